#!/usr/bin/env bash
# The main job on a fresh Debian machine: install what is missing (compiler, make,
# cmocka, zlib), build the library and examples, train the 2x2 matrix-exponential toy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
make demo
