#!/usr/bin/env bash
# bench_toy.sh — simplechain vs its PyTorch twin on the 2x2 matrix-exponential toy,
# side by side, in one invocation.  Run by `make bench-toy` (after `make`), or directly:
#
#   bash bench/bench_toy.sh                     # 10,000 steps, 3 repetitions
#   STEPS=1000 REPS=3 bash bench/bench_toy.sh   # quick run
#
# Environment (all optional):
#   STEPS     ADAM steps per run (default 10000)
#   REPS      repetitions per engine and thread count; the table shows the median (default 3)
#   THREADS   thread counts to compare (default "1 2")
#   SAMPLES   training samples (= test samples) (default 10000)
#   PYTHON    interpreter with torch (default /usr/bin/python3, Debian's python3-torch)
#   HF_RUNS   hyperfine runs (default 3, after 1 warm-up run); HF=0 skips hyperfine
#   BUILD     build folder of a simplechain tree, holding toy2x2 (default build)
#   OPENBLAS_OMP_DIR  where libopenblas0-openmp's libblas.so.3 lies
#             (default /usr/lib/x86_64-linux-gnu/openblas-openmp)
#   TORCH_MALLOC  tuned (default): PyTorch runs with glibc malloc tunables that keep freed
#             memory in the process (bench/torch_env.sh); glibc: glibc's defaults
#   PEAK_GFLOPS  measured FMA peak per thread count, "1:273.0 2:539.3" (bench_all.sh sets it
#             from build/peak); adds a %peak column: achieved GFLOP/s / peak at that count
#   SUMMARY_FILE  if set, "toy ENGINE THREADS MEDIAN_S GFLOPS PEAK_FRACTION MIN_S MAX_S" lines are
#             appended to it (bench_all.sh's summary)
#
# Both programs time only their training loop (C: sc_train, run with --every 0 so that no
# test evaluation happens inside it; PyTorch: the loop after a few untimed, undone warm-up
# steps) and print a RESULT line in the same format; this script collects those lines,
# takes medians, and prints the table.  The full output is also saved to
# bench/out/toy-<date>.txt.
set -euo pipefail

cd "$(dirname "$0")/.."
STEPS=${STEPS:-10000}
REPS=${REPS:-3}
THREADS=${THREADS:-"1 2"}
SAMPLES=${SAMPLES:-10000}
PYTHON=${PYTHON:-/usr/bin/python3}
HF_RUNS=${HF_RUNS:-3}
HF=${HF:-1}
BUILD=${BUILD:-build}
PEAK_GFLOPS=${PEAK_GFLOPS:-}
SUMMARY_FILE=${SUMMARY_FILE:-}
TOY="$BUILD/toy2x2"
TWIN=bench/toy2x2_torch.py
OPENBLAS_OMP_DIR=${OPENBLAS_OMP_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}

for v in STEPS REPS SAMPLES HF_RUNS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench_toy: $v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[ -x "$TOY" ] || { echo "bench_toy: $TOY not found; run 'make' first" >&2; exit 1; }

STAMP=$(date +%Y-%m-%d_%H%M%S)
mkdir -p bench/out
LOG="bench/out/toy-$STAMP.txt"
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/bench_toy.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
RAW="$TMPD/results"
# Run a private copy of the binary: a rebuild of $BUILD during the benchmark (a shared
# working tree) must not change the program half-way through the runs.
TOY_SRC="$TOY"
cp "$TOY_SRC" "$TMPD/toy2x2"
TOY="$TMPD/toy2x2"

# --- PyTorch configuration (TORCH_ENV, TORCH_NOTE, HAVE_TORCH, torch_probe) -----------
source bench/torch_env.sh

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# field KEY from a RESULT line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }

run_one() { # engine threads
  local eng=$1 t=$2 out line
  if [ "$eng" = simplechain ]; then
    out=$("$TOY" --steps "$STEPS" --samples "$SAMPLES" --threads "$t" --every 0 --quiet 2>&1) || {
      echo "  simplechain t=$t FAILED:"; echo "$out" | sed 's/^/    /'; return 0; }
  else
    out=$(env "${TORCH_ENV[@]}" "$PYTHON" "$TWIN" --steps "$STEPS" --samples "$SAMPLES" \
            --threads "$t" --quiet 2>&1) || {
      echo "  pytorch t=$t FAILED:"; echo "$out" | sed 's/^/    /'; return 0; }
  fi
  line=$(echo "$out" | grep '^RESULT' | tail -1)
  [ -n "$line" ] || { echo "  $eng t=$t: no RESULT line:"; echo "$out" | sed 's/^/    /'; return 0; }
  echo "  $line   (load $(cut -d' ' -f1 /proc/loadavg))"
  echo "$eng $t $(echo "$line" | field seconds) $(echo "$line" | field train_mse) $(echo "$line" | field test_mse)" >>"$RAW"
}

main() {
  echo "== simplechain vs PyTorch: toy2x2 (4 -> 32 tanh -> 16 tanh -> 4, full-batch ADAM lr 1e-3)"
  echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "machine:  $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), $(uname -sr)"
  local commit dirty=""
  # the source tree the binary was built in ($BUILD is a folder of it)
  local src
  src=$(cd "$(dirname "$TOY_SRC")/.." && pwd)
  commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && ! git -C "$src" diff --quiet HEAD -- 2>/dev/null; then
    dirty=" + uncommitted changes to tracked files"
  fi
  echo "commit:   $commit$dirty ($src)"
  echo "binary:   $TOY_SRC (built $(date -u -r "$TOY_SRC" '+%Y-%m-%d %H:%M:%S UTC'), sha256 $(sha256sum "$TOY" | cut -c1-16)…; a private copy is what runs)"
  echo "compiler: $(${CC:-cc} --version 2>/dev/null | head -1)"
  echo "kernels:  $("$TOY" --steps 1 --samples 16 --every 0 --quiet 2>/dev/null | sed -n 's/.*kernels \([^)]*\)).*/\1/p')"
  echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-min load average at start; the machine may be shared)"
  echo "workload: $SAMPLES train + $SAMPLES test samples, $STEPS steps, $REPS repetitions per engine and thread count, threads: $THREADS"
  if [ $HAVE_TORCH = 1 ]; then
    echo "pytorch:  $PYTHON $TWIN on $TORCH_NOTE"
    torch_probe
  else
    echo "pytorch:  NOT AVAILABLE ($PYTHON cannot import torch and numpy; 'bash scripts/install-deps.sh bench'); simplechain only"
  fi
  echo
  echo "== runs (training-loop seconds; engines interleaved)"
  local r t
  for ((r = 1; r <= REPS; r++)); do
    echo "rep $r/$REPS"
    for t in $THREADS; do
      run_one simplechain "$t"
      [ $HAVE_TORCH = 1 ] && run_one pytorch "$t"
    done
  done
  echo
  echo "== results: median of $REPS, $STEPS steps, $SAMPLES samples"
  echo "   (GFLOP/s: 2*(704+704+576) flops per sample per step; ratio = pytorch median seconds / simplechain median seconds, > 1: simplechain is faster)"
  if [ -n "$PEAK_GFLOPS" ]; then
    echo "   (%peak: GFLOP/s / measured fp32 FMA peak at the same thread count: $PEAK_GFLOPS GFLOP/s)"
  fi
  printf '%-12s %7s %10s %10s %10s %9s %8s %6s %10s %10s %9s\n' engine threads median_s min_s max_s steps/s GFLOP/s %peak train_mse test_mse pt/sc
  local eng sc_med med mn mx tr te ratio pk
  for t in $THREADS; do
    sc_med=$(awk -v t="$t" '$1=="simplechain" && $2==t {print $3}' "$RAW" | median)
    for eng in simplechain pytorch; do
      [ "$eng" = pytorch ] && [ $HAVE_TORCH = 0 ] && continue
      med=$(awk -v e=$eng -v t="$t" '$1==e && $2==t {print $3}' "$RAW" | median)
      if [ "$med" = nan ]; then printf '%-12s %7s %10s\n' "$eng" "$t" "no data"; continue; fi
      mn=$(awk -v e=$eng -v t="$t" '$1==e && $2==t {print $3}' "$RAW" | sort -g | head -1)
      mx=$(awk -v e=$eng -v t="$t" '$1==e && $2==t {print $3}' "$RAW" | sort -g | tail -1)
      # the losses are deterministic for a given engine and thread count; show the last run's
      tr=$(awk -v e=$eng -v t="$t" '$1==e && $2==t {x=$4} END {print x}' "$RAW")
      te=$(awk -v e=$eng -v t="$t" '$1==e && $2==t {x=$5} END {print x}' "$RAW")
      ratio=-
      if [ "$eng" = pytorch ] && [ "$sc_med" != nan ]; then ratio=$(awk -v a="$med" -v b="$sc_med" 'BEGIN {printf "%.2f", a / b}'); fi
      pk=$(echo "$PEAK_GFLOPS" | tr ' ' '\n' | awk -F: -v t="$t" '$1==t {print $2}' | tail -1)
      awk -v e=$eng -v t="$t" -v m="$med" -v mn="$mn" -v mx="$mx" -v s="$STEPS" -v n="$SAMPLES" \
          -v tr="$tr" -v te="$te" -v r="$ratio" -v pk="$pk" -v sf="$SUMMARY_FILE" 'BEGIN {
        g = 2 * (704 + 704 + 576) * n * s / m * 1e-9
        pc = pk > 0 ? sprintf("%.1f%%", 100 * g / pk) : "-"
        printf "%-12s %7s %10.4f %10.4f %10.4f %9.0f %8.2f %6s %10s %10s %9s\n", e, t, m, mn, mx, s / m,
               g, pc, tr, te, r
        if (sf != "") printf "toy %s %s %s %.3f %s %s %s\n", e, t, m, g, (pk > 0 ? g / pk : "nan"), mn, mx >> sf }'
    done
  done
  if [ $HAVE_TORCH = 1 ]; then
    echo
    for t in $THREADS; do
      sc_med=$(awk -v t="$t" '$1=="simplechain" && $2==t {print $3}' "$RAW" | median)
      med=$(awk -v t="$t" '$1=="pytorch" && $2==t {print $3}' "$RAW" | median)
      awk -v t="$t" -v a="$med" -v b="$sc_med" 'BEGIN {
        if (a == "nan" || b == "nan") { printf "threads=%s: ratio n/a\n", t; exit }
        printf "threads=%s: pytorch/simplechain time ratio %.2f (simplechain %.3f ms/step, pytorch %.3f ms/step)\n",
               t, a / b, 1000 * b / '"$STEPS"', 1000 * a / '"$STEPS"' }'
    done
  fi

  if [ "$HF" != 0 ] && command -v hyperfine >/dev/null 2>&1; then
    echo
    echo "== hyperfine: the whole simplechain process (data generation + training + final losses), $STEPS steps"
    local tl
    tl=$(echo $THREADS | tr ' ' ',')
    echo "(the program below is the private copy of $TOY_SRC)"
    hyperfine --style basic -N --runs "$HF_RUNS" --warmup 1 -L threads "$tl" \
      "$TOY --quiet --every 0 --steps $STEPS --samples $SAMPLES --threads {threads}" 2>&1 || echo "(hyperfine failed)"
  elif [ "$HF" != 0 ]; then
    echo
    echo "== hyperfine: not installed (apt-get install hyperfine, or 'bash scripts/install-deps.sh bench'); skipped"
  fi
  echo
  echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "saved: $LOG"
}

main 2>&1 | tee "$LOG"
