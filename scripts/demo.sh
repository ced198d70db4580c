#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is missing (compiler, make, cmocka,
# zlib), build the library and the examples, train the 2x2 matrix-exponential toy
# (10,000 full-batch ADAM steps), then LeNet5 for 10 epochs on MNIST-style data: the real
# digits in ../shared/data/mnist when present, else whatever `make data` provides
# (Debian's Fashion-MNIST when nothing can be downloaded).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
make --no-print-directory all
threads=$(nproc 2>/dev/null || echo 1)
echo "== toy2x2: 4 -> 32 tanh -> 16 tanh -> 4, matrix exponential of 2x2 matrices"
./build/toy2x2 --threads "$threads" --every 2000
echo
echo "== lenet5"
if ./build/lenet5 --help >/dev/null && { [ -n "${SC_DATA_DIR:-}" ] || [ -d data/mnist ] || [ -d ../shared/data/mnist ] || [ -d /usr/share/datasets/fashion-mnist ]; }; then
  ./build/lenet5 --threads "$threads" --quiet
else
  bash scripts/get-data.sh
  if [ -d data/mnist ]; then ./build/lenet5 --threads "$threads" --quiet
  else ./build/lenet5 --threads "$threads" --quiet --data data/fashion-mnist; fi
fi
