#!/usr/bin/env bash
# Installs the Debian packages simplechain's build, tests and benchmarks use.
# Safe to run repeatedly; installs only what is missing. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential pkg-config zlib1g-dev libcmocka-dev libxsmm-dev libsleef-dev
      hyperfine clang libclang-rt-14-dev)
case "${1:-}" in
  --bench) pkgs+=(python3-torch python3-numpy libopenblas0-openmp) ;;
  --all)   pkgs+=(python3-torch python3-numpy libopenblas0-openmp) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && { echo "install-deps: all packages present"; exit 0; }
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
