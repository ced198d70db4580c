#!/usr/bin/env bash
# Installs the Debian packages simplechain uses; installs only what is missing, so it is
# cheap to run again. Needs root or sudo when something is missing.
#   scripts/install-deps.sh [test|bench|all]
#     test  (default) compiler, make, pkg-config, cmocka, zlib, SLEEF, SUNDIALS, liblbfgs
#     bench test + PyTorch twin (python3-torch, numpy, OpenBLAS/OpenMP) and hyperfine
#     all   bench + libxsmm, clang with sanitizer/fuzzer runtimes
set -euo pipefail
what=${1:-test}
pkgs=(gcc make libc6-dev pkg-config libcmocka-dev zlib1g-dev libsleef-dev libsundials-dev liblbfgs-dev)
case "$what" in
  test) ;;
  bench) pkgs+=(python3-torch python3-numpy libopenblas0-openmp hyperfine) ;;
  all) pkgs+=(python3-torch python3-numpy libopenblas0-openmp hyperfine
              libxsmm-dev libsleef-dev clang libclang-rt-14-dev) ;;
  *) echo "usage: $0 [test|bench|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
