#!/usr/bin/env bash
# ab.sh — two builds of simplechain side by side in alternating pairs (A then B, PAIRS times):
# the 2x2 toy, the valgrad micro-benchmark and one LeNet5 epoch, so that a drift of the host's
# load moves both alike. Prints each pair and the median of B / A per workload; nothing is
# asserted (timings are benchmarks, not tests).
#
#   bash bench/ab.sh A_BUILD B_BUILD          # e.g. a worktree of the parent's build/, build
#   PAIRS=7 THREADS=1 bash bench/ab.sh ...
#
# Environment: PAIRS (default 5); THREADS for the toy and LeNet5 (default 2); STEPS toy steps
# (default 10000); FASHION_DIR (default /usr/share/datasets/fashion-mnist, else MNIST_DIR,
# default ../shared/data/mnist); PRECISIONS for LeNet5 (default "fp32", add bf16 where the CPU
# has AVX512_BF16). The micro-benchmark runs on CPU 0 (taskset) when taskset exists.
set -euo pipefail
A=${1:?usage: bench/ab.sh A_BUILD B_BUILD}
B=${2:?usage: bench/ab.sh A_BUILD B_BUILD}
PAIRS=${PAIRS:-5}
THREADS=${THREADS:-2}
STEPS=${STEPS:-10000}
PRECISIONS=${PRECISIONS:-fp32}
data=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
[ -d "$data" ] || data=${MNIST_DIR:-../shared/data/mnist}
pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
echo "== bench/ab.sh: A = $A, B = $B, $PAIRS pairs; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | tail -1; }
median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
run_pairs() { # name, unit, field, command (with @ for the build folder)
  local name=$1 unit=$2 key=$3
  shift 3
  local ra=() rb=() ratios=() i a b
  for ((i = 1; i <= PAIRS; i++)); do
    a=$("${@//@/$A}" 2>&1 | field "$key")
    b=$("${@//@/$B}" 2>&1 | field "$key")
    ra+=("$a") rb+=("$b")
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')")
    printf '  %-28s pair %d: A %s %s, B %s %s\n' "$name" "$i" "$a" "$unit" "$b" "$unit"
  done
  printf '%-30s A median %s %s, B median %s %s, median of B / A %.4f\n' "$name" \
    "$(printf '%s\n' "${ra[@]}" | median)" "$unit" "$(printf '%s\n' "${rb[@]}" | median)" "$unit" \
    "$(printf '%s\n' "${ratios[@]}" | median)"
}
run_pairs "toy2x2 $THREADS thr" s seconds @/toy2x2 --steps "$STEPS" --threads "$THREADS" --quiet
run_pairs "micro valgrad 1 thr" us us_per_call "${pin[@]}" @/micro_valgrad
for prec in $PRECISIONS; do
  run_pairs "lenet5 $prec $THREADS thr" s seconds_per_epoch @/lenet5 --data "$data" --epochs 1 \
    --threads "$THREADS" --quiet --precision "$prec"
done
