#!/usr/bin/env bash
# Installs the Debian packages simplechain uses; installs only what is missing, so it is
# cheap to run again. Needs root or sudo when something is missing.
#   scripts/install-deps.sh [TIER ...]     (default: test)
#     test   compiler, make, pkg-config, Python 3 (make check-amalgamation), cmocka, zlib, SLEEF,
#            libxsmm, SUNDIALS, liblbfgs, OpenMPI
#     fuzz   clang and its sanitizer/libFuzzer runtimes (make fuzz)
#     bench  PyTorch twin (python3-torch, numpy, OpenBLAS/OpenMP), hyperfine, Fashion-MNIST
#     all    all of the above
set -euo pipefail
[ $# -eq 0 ] && set -- test
pkgs=(gcc make libc6-dev pkg-config python3 libcmocka-dev zlib1g-dev libsleef-dev libxsmm-dev libsundials-dev
      liblbfgs-dev openmpi-bin libopenmpi-dev)
for what in "$@"; do
  case "$what" in
    test) ;;
    fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    bench) pkgs+=(python3-torch python3-numpy libopenblas0-openmp hyperfine dataset-fashion-mnist) ;;
    all) pkgs+=(clang libclang-rt-14-dev python3-torch python3-numpy libopenblas0-openmp hyperfine
                dataset-fashion-mnist) ;;
    *) echo "usage: $0 [test|fuzz|bench|all ...]" >&2; exit 2 ;;
  esac
done
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
