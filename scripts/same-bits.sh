#!/usr/bin/env bash
# Writes what a change that must keep the bits (a refactoring, a faster kernel) may not
# change into a folder: the trained parameters, exported .npz files and posterior draws of
# the examples on every kernel set this CPU has (SC_ISA=scalar, avx2, avx512), at 1 and 2
# threads, in fp32 and in each bf16 kernel kind the CPU has (SC_BF16_KERNELS=native, amx,
# model, amx-model), and the same from the two drop-in files alone (build/toy2x2-portable).
# Run it on two builds and compare the folders:
#
#   make all build/toy2x2-portable && bash scripts/same-bits.sh /tmp/after
#   (the same in a checkout of the reference commit, into /tmp/before)
#   diff -r /tmp/before /tmp/after && echo same bits
#
# usage: scripts/same-bits.sh OUT_DIR [BUILD_DIR] [MNIST_DIR]
# BUILD_DIR defaults to build, MNIST_DIR to $SC_DATA_DIR or ../shared/data/mnist. Each run's
# output goes to OUT_DIR/log.txt (timings differ; the files compared are the results).
set -euo pipefail
out=${1:?usage: scripts/same-bits.sh OUT_DIR [BUILD_DIR] [MNIST_DIR]}
b=${2:-build}
data=${3:-${SC_DATA_DIR:-../shared/data/mnist}}
mkdir -p "$out"
log="$out/log.txt"
: >"$log"
run() { # name, then the command; its output to the log
  local name=$1
  shift
  echo "== $name: $*" >>"$log"
  "$@" >>"$log" 2>&1 || { echo "same-bits: $name failed (see $log)" >&2; exit 1; }
}
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
isas=(scalar)
has avx2 && has fma && isas+=(avx2)
has avx512f && has avx512bw && has avx512vl && has avx512dq && isas+=(avx512)
for isa in "${isas[@]}"; do
  for t in 1 2; do
    run "toy $isa t$t" env SC_ISA=$isa "$b/toy2x2" --steps 2000 --threads $t --quiet \
      --save "$out/toy-$isa-t$t.params"
    if [ -x "$b/toy2x2-portable" ]; then
      run "toy portable $isa t$t" env SC_ISA=$isa "$b/toy2x2-portable" --steps 2000 --threads $t \
        --quiet --save "$out/toy-portable-$isa-t$t.params"
    fi
  done
  run "toy npz $isa" env SC_ISA=$isa "$b/toy2x2" --steps 300 --quiet --export "$out/toy-$isa.npz"
  if [ -d "$data" ]; then
    for t in 1 2; do
      run "lenet5 $isa t$t" env SC_ISA=$isa "$b/lenet5" --data "$data" --limit 2000 --epochs 1 \
        --threads $t --quiet --save "$out/lenet5-$isa-t$t.params"
    done
    run "lenet5 bf16-emulated $isa" env SC_ISA=$isa "$b/lenet5" --data "$data" --limit 2000 \
      --epochs 1 --quiet --precision bf16-emulated --save "$out/lenet5-$isa-bf16emu.params"
  fi
  run "poisson $isa" env SC_ISA=$isa "$b/poisson" --chains 4 --quiet --csv "$out/poisson-$isa.csv"
  run "bnn $isa" env SC_ISA=$isa "$b/bnn" --chains 2 --draws 100 --warmup 100 --quiet \
    --csv "$out/bnn-$isa.csv"
done
# the bf16 kernels: each kind the CPU runs (the models on any CPU, on fewer images: slow)
if [ -d "$data" ]; then
  kinds=(model amx-model)
  has avx512_bf16 && kinds+=(native)
  has avx512_bf16 && has amx_bf16 && has amx_tile && kinds+=(amx)
  for k in "${kinds[@]}"; do
    lim=2000
    case $k in *model) lim=200 ;; esac
    for t in 1 2; do
      run "lenet5 bf16 $k t$t" env SC_BF16_KERNELS=$k "$b/lenet5" --data "$data" --limit $lim \
        --epochs 1 --threads $t --quiet --precision bf16 --save "$out/lenet5-bf16-$k-t$t.params"
    done
    if [ "$k" = native ] || [ "$k" = amx ]; then
      run "toy bf16 $k" env SC_BF16_KERNELS=$k "$b/toy2x2" --steps 500 --quiet --precision bf16 \
        --save "$out/toy-bf16-$k.params"
    fi
  done
fi
echo "same-bits: $(find "$out" -type f ! -name log.txt | wc -l) result files in $out"
