#!/usr/bin/env bash
# `make data`: puts an MNIST-style data set where examples/lenet5 looks for it.
#  1. With SC_DOWNLOAD=1 (`make data SC_DOWNLOAD=1`), the official MNIST (60k/10k) into
#     data/mnist/ if the network allows. Off by default: machines without a general
#     network (like this project's CI) must not try to reach outside hosts.
#  2. Otherwise Debian's dataset-fashion-mnist (60k/10k, same IDX format), installed with
#     apt and linked as data/fashion-mnist -> /usr/share/datasets/fashion-mnist.
# Real MNIST with 10,000 training digits is also in ../shared/data/mnist on project machines.
set -euo pipefail
cd "$(dirname "$0")/.."
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
have_all() { for f in "${files[@]}"; do [ -s "$1/$f.gz" ] || [ -s "$1/$f" ] || return 1; done; }

if have_all data/mnist; then echo "get-data: data/mnist already complete"; exit 0; fi
if [ "${SC_DOWNLOAD:-0}" = 1 ] && command -v curl >/dev/null; then
  base=${MNIST_URL:-https://ossci-datasets.s3.amazonaws.com/mnist}
  mkdir -p data/mnist.part
  ok=1
  for f in "${files[@]}"; do
    if ! curl -fsSL --connect-timeout 5 --max-time 120 -o "data/mnist.part/$f.gz" "$base/$f.gz"; then ok=0; break; fi
  done
  if [ $ok = 1 ]; then
    mkdir -p data/mnist && mv data/mnist.part/*.gz data/mnist/ && rmdir data/mnist.part
    echo "get-data: official MNIST in data/mnist"
    exit 0
  fi
  rm -rf data/mnist.part
  echo "get-data: MNIST download not possible here; falling back to Debian's Fashion-MNIST"
fi
if ! have_all /usr/share/datasets/fashion-mnist; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dataset-fashion-mnist >/dev/null
fi
mkdir -p data
ln -sfn /usr/share/datasets/fashion-mnist data/fashion-mnist
echo "get-data: Fashion-MNIST (60,000 + 10,000) in data/fashion-mnist:"
echo "          ./build/lenet5 --data data/fashion-mnist"
