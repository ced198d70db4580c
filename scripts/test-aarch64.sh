#!/usr/bin/env bash
# The drop-in files on ARM: simplechain.c built for aarch64 with Debian's
# cross compiler (plain C: the NEON code is GCC's auto-vectorisation of the portable kernels)
# and its test suite run under qemu-user. `make test-aarch64` runs this.
#
#   1. installs gcc-aarch64-linux-gnu and qemu-user, and cmocka and zlib for arm64
#      (dpkg --add-architecture arm64), where missing;
#   2. builds build-aarch64/libsimplechain.a (simplechain.c + sc_nuts.c, -O2, no x86 kernels,
#      no SLEEF/libxsmm/MPI/SUNDIALS: the drop-in configuration) and the cmocka tests that do
#      not start other programs of the build (those need binfmt_misc, which containers lack);
#   3. runs them through qemu-aarch64 and the arm64 dynamic loader (scripts/run-tests.sh with
#      SC_TEST_RUNNER), then builds examples/toy2x2.c + simplechain.c alone, exactly the
#      two-file drop-in build, and trains it for 300 steps.
# Exit status non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
if [ ! -e /usr/lib/aarch64-linux-gnu/libcmocka.so ] || [ ! -e /usr/lib/aarch64-linux-gnu/libz.so ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  need+=(libcmocka-dev:arm64 zlib1g-dev:arm64)
fi
if [ ${#need[@]} -ne 0 ]; then
  echo "test-aarch64: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

B=build-aarch64
# GCC 12 for aarch64 has an internal compiler error on tests/test_conv.c at -O3: -O2, which is
# also what the drop-in instructions say
MK=(make --no-print-directory CC=aarch64-linux-gnu-gcc BUILD=$B OPT=-O2 SC_SLEEF=0 SC_MPI=0
    SC_NODE=0 SC_XSMM=0 SHARED=0)
TESTS=()
for t in tests/test_*.c; do
  n=$(basename "$t" .c)
  # these start programs of the build (examples, cc, make, mpirun): not under qemu-user here
  case $n in test_toy | test_lenet | test_nuts | test_neural_ode | test_mpi | test_dropin | test_install) continue ;; esac
  TESTS+=("$B/tests/$n")
done
"${MK[@]}" -j"$(nproc)" "$B/libsimplechain.a" "${TESTS[@]}"

LOADER=/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1
LIBS=/usr/aarch64-linux-gnu/lib:/usr/lib/aarch64-linux-gnu
export SC_TEST_RUNNER="qemu-aarch64 $LOADER --library-path $LIBS"
SC_SRC_DIR=$PWD SC_BUILD_DIR=$PWD/$B bash scripts/run-tests.sh "${TESTS[@]}"

# the two-file drop-in build, as the README gives it
aarch64-linux-gnu-gcc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -I. examples/toy2x2.c \
  simplechain.c -o $B/toy2x2-dropin -lm -pthread
out=$($SC_TEST_RUNNER $B/toy2x2-dropin --steps 300 --samples 2000 --threads 2 --every 100)
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q '^RESULT engine=simplechain steps=300 ' || {
  echo "test-aarch64: the drop-in toy2x2 did not finish"
  exit 1
}
echo "test-aarch64: OK ($(uname -m) host, qemu-aarch64 $(qemu-aarch64 --version | head -1 | awk '{print $3}'))"
