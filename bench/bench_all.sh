#!/usr/bin/env bash
# bench_all.sh — every benchmark of simplechain, side by side, in one invocation
# (`make bench` builds what it needs and runs this):
#
#   peak        the machine's fp32 FMA peak (build/peak), 1 thread and all threads
#   toy         (a) toy2x2 vs its PyTorch twin at 1 and 2 threads (bench/bench_toy.sh), with
#               achieved GFLOP/s as a fraction of the measured peak at the same thread count
#   micro       (b) one valgrad of 24 -> 8 tanh -> 2, batch 200, 1 thread, both engines
#               (build/micro_valgrad, bench/micro_valgrad_torch.py)
#   lenet       (d) LeNet5 on Fashion-MNIST (60,000 images) vs its PyTorch twin: seconds per
#               epoch at batch 64 and 2048, GFLOP/s and %peak, in fp32 and (batch 64) bf16
#               side by side with the bf16/fp32 speed ratio and a per-layer profile of each;
#               then the test accuracy after 10 epochs with the defaults on Fashion-MNIST and
#               on the real MNIST digits, in each precision (build/lenet5, bench/lenet5_torch.py)
#   ode         (e) neural-ODE right-hand side 2 -> 50 tanh -> 2 on one state, float64, 1 thread:
#               RHS and VJP ns per call, both engines (build/ode_rhs, bench/ode_rhs_torch.py)
#   bnn         the Bayesian neural network of examples/bnn_model.h: its log-density gradient
#               (float64, 1 thread, linked parameterisation) vs the PyTorch twin
#               (build/bnn_grad, bench/bnn_grad_torch.py), the published Turing.jl figures as
#               context; then one NUTS run of build/bnn (4 chains x 1000 draws after 1000)
#   poisson     build/poisson (the 10-group Poisson model): 4 chains x (1000 + 1000)
#               iterations on 2 threads, seconds and bulk ESS per second, POISSON_RUNS runs
#   mpi         LeNet5 on Fashion-MNIST over MPI (build/train_mpi): 1 rank x 2 threads vs 2 ranks x
#               1 thread at batch 64 and 2048, s/epoch, exchange time and bytes per step
#   isa         toy2x2 and the micro-benchmark at 1 thread with SC_ISA=avx512, avx2, scalar, and
#               toy2x2 built from the two drop-in files alone (build/toy2x2-portable)
#   hyperfine   (c) the toy trainer as a whole process
#   summary     the figures against the targets stated in the project's issues
#
#   bash bench/bench_all.sh                             # the full run (about 20 minutes)
#   STEPS=1000 REPS=1 HF_RUNS=1 LENET_EPOCHS=1 LENET_ACC=0 ODE_RUNS=1 bash bench/bench_all.sh
#                                                       # quick run (about 1 minute)
#   SECTIONS="peak micro" bash bench/bench_all.sh       # some sections only
#
# Environment (all optional):
#   SECTIONS     which sections, in this order regardless
#                (default "peak toy micro lenet ode bnn poisson mpi isa hyperfine")
#   STEPS        ADAM steps per toy run (default 10000); REPS repetitions of the toy and
#                LeNet5 runs (default 3)
#   THREADS      thread counts for the toy (default "1 2"); SAMPLES (default 10000)
#   MICRO_RUNS   runs of each micro-benchmark program, engines interleaved (default 3); each
#                run reports the median of its own MICRO_REPS repetitions (default 15)
#   ISAS         paths for the isa section (default "avx512 avx2 scalar", those the CPU has)
#   ISA_STEPS    toy steps in the isa section (default STEPS)
#   PEAK_REPS    repetitions of the peak measurement (default 7), PEAK_MS ms each (default 200)
#   HF_RUNS      hyperfine runs (default 3, after 1 warm-up); HF=0 skips hyperfine
#   LENET_EPOCHS epochs per timed LeNet5 run (default 2); the table shows the median over all
#                REPS x LENET_EPOCHS epochs (each program times each epoch's training loop:
#                no test evaluation, no data loading; PyTorch after untimed warm-up steps)
#   LENET_BATCHES  batch sizes (default "64 2048"); LENET_THREADS simplechain's thread counts
#                (default "1 2"); LENET_PT_THREADS PyTorch's (default "2")
#   LENET_LIMIT  train on the first N images only (default 0: all 60,000; quick runs)
#   LENET_PRECISIONS  "fp32 bf16" (default) or "fp32": bf16 runs LeNet5 with bfloat16 operands
#                (build/lenet5 --precision bf16 where the CPU has AVX512_BF16, else
#                bf16-emulated, labelled so) beside fp32, at the batch sizes LENET_BF16_BATCHES
#                (default "64"), with the PyTorch twin under torch.autocast(bfloat16); on a
#                CPU without AVX512_BF16 PyTorch's bf16 is slow, and runs in the first rep only
#   LENET_PAIRS  alternating 1-epoch runs of fp32 and bf16 (default 5; 0: none) at the first
#                bf16 batch and each thread count, after the table: the median of their
#                per-pair ratios, which a load that drifts between the table's runs moves less
#   LENET_ACC    1 (default): one 10-epoch default run each on FASHION_DIR and MNIST_DIR for
#                the test accuracy; 0 skips them.  LENET_ACC_EPOCHS (default 10)
#   FASHION_DIR  Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist, Debian's
#                dataset-fashion-mnist); MNIST_DIR real MNIST (default ../shared/data/mnist)
#   ODE_RUNS     runs of each ODE program, engines interleaved (default 3); each run prints
#                the median of its own repetitions, the table the median over runs
#   BNN_RUNS     runs of each BNN-gradient program, engines interleaved (default 3);
#                BNN_SAMPLE=0 skips the NUTS run of build/bnn
#   POISSON_RUNS runs of build/poisson (default 5)
#   PYTHON, BUILD, OPENBLAS_OMP_DIR, TORCH_MALLOC   as in bench_toy.sh
# All programs run from private copies (a rebuild of build/ in a shared working tree during
# the run cannot change them).  The output is also saved to bench/out/all-<date>.txt.
set -euo pipefail

cd "$(dirname "$0")/.."
SECTIONS=${SECTIONS:-"peak toy micro threads lenet ode bnn poisson mpi isa hyperfine"}
STEPS=${STEPS:-10000}
REPS=${REPS:-3}
THREADS=${THREADS:-"1 2"}
SAMPLES=${SAMPLES:-10000}
MICRO_RUNS=${MICRO_RUNS:-3}
MICRO_REPS=${MICRO_REPS:-15}
ISAS=${ISAS:-"avx512 avx2 scalar"}
ISA_STEPS=${ISA_STEPS:-$STEPS}
PEAK_REPS=${PEAK_REPS:-7}
PEAK_MS=${PEAK_MS:-200}
HF_RUNS=${HF_RUNS:-3}
HF=${HF:-1}
LENET_EPOCHS=${LENET_EPOCHS:-2}
LENET_BATCHES=${LENET_BATCHES:-"64 2048"}
LENET_THREADS=${LENET_THREADS:-"1 2"}
LENET_PT_THREADS=${LENET_PT_THREADS:-"2"}
LENET_LIMIT=${LENET_LIMIT:-0}
LENET_PRECISIONS=${LENET_PRECISIONS:-"fp32 bf16"}
LENET_BF16_BATCHES=${LENET_BF16_BATCHES:-"64"}
LENET_PAIRS=${LENET_PAIRS:-5}
LENET_ACC=${LENET_ACC:-1}
LENET_ACC_EPOCHS=${LENET_ACC_EPOCHS:-10}
FASHION_DIR=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
MNIST_DIR=${MNIST_DIR:-../shared/data/mnist}
ODE_RUNS=${ODE_RUNS:-3}
BNN_RUNS=${BNN_RUNS:-3}
BNN_SAMPLE=${BNN_SAMPLE:-1}
POISSON_RUNS=${POISSON_RUNS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
BUILD=${BUILD:-build}
OPENBLAS_OMP_DIR=${OPENBLAS_OMP_DIR:-/usr/lib/x86_64-linux-gnu/openblas-openmp}
export STEPS REPS THREADS SAMPLES PYTHON BUILD OPENBLAS_OMP_DIR HF_RUNS

for v in STEPS REPS SAMPLES MICRO_RUNS MICRO_REPS ISA_STEPS PEAK_REPS HF_RUNS LENET_EPOCHS LENET_ACC_EPOCHS ODE_RUNS BNN_RUNS POISSON_RUNS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench_all: $v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
[[ $LENET_LIMIT =~ ^[0-9]+$ ]] || { echo "bench_all: LENET_LIMIT must be a non-negative integer, got '$LENET_LIMIT'" >&2; exit 2; }
[[ $LENET_PAIRS =~ ^[0-9]+$ ]] || { echo "bench_all: LENET_PAIRS must be a non-negative integer, got '$LENET_PAIRS'" >&2; exit 2; }
for v in $LENET_BATCHES $LENET_BF16_BATCHES $LENET_THREADS $LENET_PT_THREADS; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "bench_all: LENET_BATCHES/LENET_BF16_BATCHES/LENET_THREADS/LENET_PT_THREADS must hold positive integers, got '$v'" >&2; exit 2; }
done
for v in $LENET_PRECISIONS; do
  [[ $v == fp32 || $v == bf16 ]] || { echo "bench_all: LENET_PRECISIONS must hold fp32 and/or bf16, got '$v'" >&2; exit 2; }
done
# the CPU's bf16 dot products (vdpbf16ps); without them simplechain runs its emulation
CPU_BF16=0
grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && CPU_BF16=1
SC_BF16=$([ $CPU_BF16 = 1 ] && echo bf16 || echo bf16-emulated)
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

STAMP=$(date +%Y-%m-%d_%H%M%S)
mkdir -p bench/out
LOG="bench/out/all-$STAMP.txt"
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/bench_all.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
SUM="$TMPD/summary" # "section key... value" lines for the summary
: >"$SUM"

# private copies of the programs
TOY_SRC="$BUILD/toy2x2" MICRO_SRC="$BUILD/micro_valgrad" PEAK_SRC="$BUILD/peak"
LENET_SRC="$BUILD/lenet5" ODE_SRC="$BUILD/ode_rhs"
BNNG_SRC="$BUILD/bnn_grad" BNN_SRC="$BUILD/bnn" POIS_SRC="$BUILD/poisson" MPI_SRC="$BUILD/train_mpi" SMALL_SRC="$BUILD/small_batch"
PORT_SRC="$BUILD/toy2x2-portable"
TOY="" MICRO="" PEAK="" LENET="" ODE="" BNNG="" BNN="" POIS="" TMPI="" SMALL=""
# (toy2x2 goes to a folder of its own, handed to bench_toy.sh as its BUILD: every section
# runs the same copy)
mkdir -p "$TMPD/build"
[ -x "$TOY_SRC" ] && cp "$TOY_SRC" "$TMPD/build/toy2x2" && TOY="$TMPD/build/toy2x2"
[ -x "$MICRO_SRC" ] && cp "$MICRO_SRC" "$TMPD/micro_valgrad" && MICRO="$TMPD/micro_valgrad"
PORT=""
[ -x "$PORT_SRC" ] && cp "$PORT_SRC" "$TMPD/toy2x2-portable" && PORT="$TMPD/toy2x2-portable"
[ -x "$PEAK_SRC" ] && cp "$PEAK_SRC" "$TMPD/peak" && PEAK="$TMPD/peak"
[ -x "$LENET_SRC" ] && cp "$LENET_SRC" "$TMPD/lenet5" && LENET="$TMPD/lenet5"
[ -x "$ODE_SRC" ] && cp "$ODE_SRC" "$TMPD/ode_rhs" && ODE="$TMPD/ode_rhs"
[ -x "$BNNG_SRC" ] && cp "$BNNG_SRC" "$TMPD/bnn_grad" && BNNG="$TMPD/bnn_grad"
[ -x "$BNN_SRC" ] && cp "$BNN_SRC" "$TMPD/bnn" && BNN="$TMPD/bnn"
[ -x "$POIS_SRC" ] && cp "$POIS_SRC" "$TMPD/poisson" && POIS="$TMPD/poisson"
[ -x "$SMALL_SRC" ] && cp "$SMALL_SRC" "$TMPD/small_batch" && SMALL="$TMPD/small_batch"
[ -x "$MPI_SRC" ] && cp "$MPI_SRC" "$TMPD/train_mpi" && TMPI="$TMPD/train_mpi"

source bench/torch_env.sh

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
sumget() { awk -v k="$1" '$1==k {v=$2} END {print (v == "" ? "nan" : v)}' "$SUM"; }
sumput() { echo "$1 $2" >>"$SUM"; }
busy() { # the processes using the most CPU right now, other than this benchmark
  ps -eo pcpu=,comm= --sort=-pcpu 2>/dev/null | awk '$1 > 5 {printf "%s%s(%s%%)", sep, $2, $1; sep=", "} END {if (!sep) printf "none above 5%%"}'
}

header() {
  local commit dirty="" model fam
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && ! git diff --quiet HEAD -- 2>/dev/null; then
    dirty=" + uncommitted changes to tracked files: $(git diff --name-only HEAD -- | tr '\n' ' ')"
  fi
  model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  fam=$(lscpu 2>/dev/null | awk -F: '/^CPU family/ {f=$2} /^Model:/ {m=$2} END {gsub(/ /,"",f); gsub(/ /,"",m); print "family " f ", model " m}')
  echo "== simplechain benchmarks (bench/bench_all.sh)"
  echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  vendor=$(lscpu 2>/dev/null | sed -n 's/^Vendor ID: *//p' | head -1)
  feats=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512bw|avx512vl|avx512dq|avx512_bf16|amx_bf16|amx_tile|amx_int8|avx512_fp16' | tr '\n' ' ')
  echo "machine:  $vendor $model ($fam), $(nproc) CPUs, $(uname -sr)"
  echo "features: ${feats:-none of avx2/avx512/amx}"
  echo "          $(lscpu 2>/dev/null | grep -q 'Hypervisor vendor' && echo "VM: $(lscpu | sed -n 's/^Hypervisor vendor: *//p')"); avx512f: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no); L1d $(lscpu | sed -n 's/^L1d cache: *//p'), L2 $(lscpu | sed -n 's/^L2 cache: *//p'), L3 $(lscpu | sed -n 's/^L3 cache: *//p')"
  echo "commit:   $commit$dirty"
  echo "compiler: $(${CC:-cc} --version 2>/dev/null | head -1)"
  echo "programs: $TOY_SRC, $MICRO_SRC, $PEAK_SRC, $LENET_SRC, $ODE_SRC, $BNNG_SRC, $BNN_SRC, $POIS_SRC (private copies run)"
  if [ -n "$TOY" ]; then
    echo "kernels:  $("$TOY" --steps 1 --samples 16 --every 0 --quiet 2>/dev/null | sed -n 's/.*kernels \([^)]*\)).*/\1/p' || true) (SC_ISA=${SC_ISA:-unset})"
  fi
  if [ $HAVE_TORCH = 1 ]; then
    echo "pytorch:  $PYTHON on $TORCH_NOTE"
    torch_probe
  else
    echo "pytorch:  NOT AVAILABLE ($PYTHON cannot import torch and numpy)"
  fi
  echo "sections: $SECTIONS; STEPS=$STEPS REPS=$REPS THREADS=\"$THREADS\" SAMPLES=$SAMPLES"
  if want lenet; then
    echo "          LENET_EPOCHS=$LENET_EPOCHS LENET_BATCHES=\"$LENET_BATCHES\" LENET_THREADS=\"$LENET_THREADS\" LENET_PT_THREADS=\"$LENET_PT_THREADS\" LENET_LIMIT=$LENET_LIMIT LENET_ACC=$LENET_ACC"
    echo "          LENET_PRECISIONS=\"$LENET_PRECISIONS\" LENET_BF16_BATCHES=\"$LENET_BF16_BATCHES\" (simplechain's bf16: $SC_BF16${SC_BF16_KERNELS:+, SC_BF16_KERNELS=$SC_BF16_KERNELS})"
    echo "          FASHION_DIR=$FASHION_DIR MNIST_DIR=$MNIST_DIR"
  fi
  want ode && echo "          ODE_RUNS=$ODE_RUNS"
  want bnn && echo "          BNN_RUNS=$BNN_RUNS BNN_SAMPLE=$BNN_SAMPLE"
  want poisson && echo "          POISSON_RUNS=$POISSON_RUNS"
  true
  echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-min) at start; busy now: $(busy)"
  sumput load_start "$(load1)"
}

# the largest thread count any wanted section uses (the peak is measured at 1 and at it)
max_threads() {
  local l="$THREADS"
  want lenet && l="$l $LENET_THREADS $LENET_PT_THREADS"
  echo $l | tr ' ' '\n' | sort -n | tail -1
}

# --- peak ---------------------------------------------------------------------------------
section_peak() {
  echo
  echo "== FMA peak: fp32, independent vfmadd chains in registers (build/peak, median of $PEAK_REPS x ${PEAK_MS} ms)"
  if [ -z "$PEAK" ]; then echo "  build/peak not built (x86-64 only; 'make bench-bins'); no %peak figures"; return; fi
  local maxt out
  maxt=$(max_threads)
  out=$("$PEAK" --threads "$maxt" --reps "$PEAK_REPS" --ms "$PEAK_MS" 2>&1) || { echo "  peak FAILED:"; echo "$out" | sed 's/^/    /'; return; }
  echo "$out" | grep '^RESULT' | sed 's/^/  /'
  local ghz
  ghz=$(echo "$out" | grep 'bench=clock' | field ghz)
  echo
  printf '  %-7s %7s %9s %11s %9s %16s\n' isa threads GFLOP/s per_thread min..max flops/cycle/thr
  echo "$out" | grep 'bench=fma_peak' | grep -v unsupported | while read -r line; do
    printf '  %-7s %7s %9s %11s %9s %11s of %2s\n' "$(echo "$line" | field isa)" "$(echo "$line" | field threads)" \
      "$(echo "$line" | field gflops)" "$(echo "$line" | field per_thread)" \
      "$(echo "$line" | field min)..$(echo "$line" | field max)" "$(echo "$line" | field flops_per_cycle)" "$(echo "$line" | field of_max)"
  done
  echo "  (core clock measured at $ghz GHz with dependent integer adds; flops/cycle = per-thread GFLOP/s / that clock)"
  echo "$out" | grep -q 'bench=pingpong' &&
    echo "  (pingpong: a cache line's round trip between the first two CPUs; on a Zen 5 KVM host (2026-11-28) 68-120 ns"
  echo "$out" | grep -q 'bench=pingpong' &&
    echo "   when its vCPUs sat near each other, 360-420 ns when far: 2-thread runs then slower, the toy ~9 %, LeNet5 bf16 ~30 %; measured again at the end)"
  local l isa t g
  while read -r l; do
    isa=$(echo "$l" | field isa) t=$(echo "$l" | field threads) g=$(echo "$l" | field gflops)
    sumput "peak_${isa}_$t" "$g"
  done < <(echo "$out" | grep 'bench=fma_peak' | grep -v unsupported)
  sumput clock_ghz "$ghz"
  # a core taken by another process shows as a low per-thread figure at N threads
  awk -v a="$(sumget peak_avx512_1)" -v b="$(sumget "peak_avx512_$maxt")" -v n="$maxt" 'BEGIN {
    if (a != "nan" && b != "nan" && n > 1 && b / n < 0.9 * a)
      printf "  WARNING: %d-thread peak is only %.0f%% of %d x the 1-thread peak: another process had a core\n" \
             "  (the %d-thread %%peak figures below are then overstated; rerun on a quiet machine)\n", n, 100 * b / (n * a), n, n }'
}

# the peak of the ISA the toy's kernels use, per thread count
peak_list_for() { # isa
  local t p out=""
  for t in $THREADS; do
    p=$(sumget "peak_$1_$t")
    [ "$p" != nan ] && out="$out${out:+ }$t:$p"
  done
  echo "$out"
}

# --- toy ----------------------------------------------------------------------------------
section_toy() {
  echo
  echo "== (a) toy2x2, $STEPS steps: simplechain vs PyTorch (bench/bench_toy.sh)"
  local kern
  kern=$("$TOY" --steps 1 --samples 16 --every 0 --quiet 2>/dev/null | sed -n 's/.*kernels \([^)]*\)).*/\1/p' || true)
  PEAK_GFLOPS=$(peak_list_for "${kern:-avx512}") SUMMARY_FILE="$TMPD/toy_summary" HF=0 BUILD="$TMPD/build" \
    bash bench/bench_toy.sh 2>&1 | sed -n '/^== runs/,$p' | grep -v '^saved:' | sed 's/^/  /'
  [ -f "$TMPD/toy_summary" ] && awk '{k = "toy_" $2 "_" $3; print k "_s", $4; print k "_gflops", $5; print k "_frac", $6; print k "_min", $7; print k "_max", $8}' "$TMPD/toy_summary" >>"$SUM"
  echo "  (the toy's kernels: ${kern:-?}; %peak uses the ${kern:-avx512} FMA peak at the same thread count)"
}

# --- micro --------------------------------------------------------------------------------
section_micro() {
  echo
  echo "== (b) micro-benchmark: one valgrad of 24 -> 8 tanh -> 2 (no bias), squared loss, batch 200, float32, 1 thread"
  echo "   (µs per call; each run prints the median of its $MICRO_REPS repetitions; $MICRO_RUNS runs per engine, interleaved)"
  [ -n "$MICRO" ] || { echo "  build/micro_valgrad not built ('make bench-bins')"; return; }
  local r out line
  : >"$TMPD/micro"
  for ((r = 1; r <= MICRO_RUNS; r++)); do
    out=$("$MICRO" --reps "$MICRO_REPS" 2>&1) || true
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    if [ -n "$line" ]; then echo "  $line   (load $(load1))"; echo "simplechain $(echo "$line" | field us_per_call)" >>"$TMPD/micro"
    else echo "  simplechain FAILED:"; echo "$out" | sed 's/^/    /'; fi
    if [ $HAVE_TORCH = 1 ]; then
      out=$(env "${TORCH_ENV[@]}" "$PYTHON" bench/micro_valgrad_torch.py --reps "$MICRO_REPS" --threads 1 2>&1) || true
      line=$(echo "$out" | grep '^RESULT' | tail -1)
      if [ -n "$line" ]; then echo "  $line   (load $(load1))"; echo "pytorch $(echo "$line" | field us_per_call)" >>"$TMPD/micro"
      else echo "  pytorch FAILED:"; echo "$out" | sed 's/^/    /'; fi
    fi
  done
  local sc pt
  sc=$(awk '$1=="simplechain" {print $2}' "$TMPD/micro" | median)
  pt=$(awk '$1=="pytorch" {print $2}' "$TMPD/micro" | median)
  sumput micro_sc_us "$sc"
  sumput micro_pt_us "$pt"
  echo
  printf '  %-26s %12s %14s\n' engine us/call "vs simplechain"
  printf '  %-26s %12s %14s\n' "simplechain (this machine)" "$sc" "1.00"
  [ "$pt" != nan ] && printf '  %-26s %12s %14s\n' "PyTorch (this machine)" "$pt" "$(awk -v a="$pt" -v b="$sc" 'BEGIN {printf "%.1fx", a / b}')"
  printf '  %-26s %12s %14s\n' "SimpleChains.jl (published)" "5.7" "$(awk -v b="$sc" 'BEGIN {printf "%.1fx", 5.7 / b}')"
  printf '  %-26s %12s %14s\n' "Flux (published)" "96" "$(awk -v b="$sc" 'BEGIN {printf "%.1fx", 96 / b}')"
  echo "  (the published SimpleChains.jl and Flux figures are from SimpleChains.jl's README, on their machine, not this one)"
}

# --- lenet --------------------------------------------------------------------------------
# LeNet5 training work per image, in multiply-adds (x 2 = flops; biases, activations,
# pooling, the loss and the optimizer are not counted):
#   forward   conv1 24*24*6 outputs x 25 = 86,400; conv2 8*8*16 x 150 = 153,600;
#             dense 256*120 + 120*84 + 84*10 = 41,640                     -> 281,640
#   dW        the same products again                                     -> 281,640
#   dx        conv2 + dense (conv1's input gradient is not needed)        -> 195,240
#   total     758,520 multiply-adds = 1,517,040 flops per image (91.02 GFLOP per 60,000-image epoch)
LENET_FLOPS=1517040

lenet_run() { # engine batch threads precision: one run; its per-epoch seconds go to $TMPD/lenet
  local eng=$1 b=$2 t=$3 pr=$4 out line eps e lim=()
  [ "$LENET_LIMIT" != 0 ] && lim=(--limit "$LENET_LIMIT")
  if [ "$eng" = simplechain ]; then
    out=$("$LENET" --data "$FASHION_DIR" --epochs "$LENET_EPOCHS" --batch "$b" --threads "$t" \
            --precision "$pr" --quiet "${lim[@]}" 2>&1) || {
      echo "  simplechain $pr batch=$b threads=$t FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; return 0; }
    [ -n "$LENET_KERN" ] || LENET_KERN=$(echo "$out" | sed -n 's/.*kernels \([a-z0-9]*\)).*/\1/p' | tail -1)
  else
    out=$(env "${TORCH_ENV[@]}" "$PYTHON" bench/lenet5_torch.py --data "$FASHION_DIR" --epochs "$LENET_EPOCHS" \
            --batch "$b" --threads "$t" --precision "$pr" --no-eval "${lim[@]}" 2>&1) || {
      echo "  pytorch $pr batch=$b threads=$t FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; return 0; }
  fi
  line=$(echo "$out" | grep '^RESULT' | tail -1)
  [ -n "$line" ] || { echo "  $eng $pr batch=$b threads=$t: no RESULT line:"; echo "$out" | tail -5 | sed 's/^/    /'; return 0; }
  # each epoch's training-loop seconds, from the per-epoch lines of both programs
  eps=$(echo "$out" | sed -n 's/^epoch .* \([0-9.][0-9.]*\) s (.*/\1/p' | tr '\n' ' ')
  echo "  $line   epochs: ${eps% }   (load $(load1))"
  for e in $eps; do echo "$eng $pr $b $t $e $(echo "$line" | field train)" >>"$TMPD/lenet"; done
}

lenet_pairs() { # LENET_PAIRS alternating 1-epoch runs, fp32 then bf16, per thread count
  [ "$LENET_PAIRS" -gt 0 ] && [ "$CPU_BF16" = 1 ] || return 0 # (emulated bf16 is slow by design)
  local b t i pr out f h lim=() fs hs rs
  b=$(echo $LENET_BF16_BATCHES | awk '{print $1}')
  [ "$LENET_LIMIT" != 0 ] && lim=(--limit "$LENET_LIMIT")
  echo "  paired runs: $LENET_PAIRS x (fp32, $SC_BF16) alternating, 1 epoch each, batch $b:"
  for t in $LENET_THREADS; do
    fs="" hs="" rs=""
    for ((i = 1; i <= LENET_PAIRS; i++)); do
      for pr in fp32 "$SC_BF16"; do
        out=$("$LENET" --data "$FASHION_DIR" --epochs 1 --batch "$b" --threads "$t" --precision "$pr" \
                --quiet "${lim[@]}" 2>&1 | grep '^RESULT' | tail -1 | field seconds_per_epoch)
        [ "$pr" = fp32 ] && f=$out || h=$out
      done
      [ -n "$f" ] && [ -n "$h" ] || { echo "    threads $t: a run FAILED"; continue 2; }
      fs+="$f " hs+="$h " rs+="$(awk -v f="$f" -v h="$h" 'BEGIN {print f / h}') "
    done
    awk -v t="$t" -v p="$SC_BF16" -v fs="${fs% }" -v hs="${hs% }" -v rm="$(echo $rs | tr ' ' '\n' | median)" \
        -v fm="$(echo $fs | tr ' ' '\n' | median)" -v hm="$(echo $hs | tr ' ' '\n' | median)" -v b="$b" -v sf="$SUM" -v ld="$(load1)" 'BEGIN {
      printf "    %s thread(s): fp32 %s s, %s %s s; medians %.4f / %.4f s; median of the pairs: %.2fx (load %s)\n", t, fs, p, hs, fm, hm, rm, ld
      printf "lenet_pair_%s_%s_ratio %s\n", b, t, rm >> sf }'
  done
}

LENET_KERN=""
section_lenet() {
  echo
  echo "== (d) LeNet5 on Fashion-MNIST: simplechain vs PyTorch, seconds per epoch of training"
  echo "   (each run: $LENET_EPOCHS epoch(s), each timed alone, test evaluation and data loading excluded;"
  echo "    $REPS runs per engine, batch and thread count, interleaved; median over all epochs)"
  [ -n "$LENET" ] || { echo "  $LENET_SRC not built ('make bench-bins')"; return; }
  if ! [ -d "$FASHION_DIR" ]; then
    echo "  $FASHION_DIR not found (apt-get install dataset-fashion-mnist, or 'bash scripts/install-deps.sh bench')"
    return
  fi
  : >"$TMPD/lenet"
  local r b t pr c
  # one (precision, batch) list: fp32 at every batch, bf16 at LENET_BF16_BATCHES
  local cfgs=()
  for pr in $LENET_PRECISIONS; do
    if [ "$pr" = fp32 ]; then for b in $LENET_BATCHES; do cfgs+=("fp32:$b"); done
    else for b in $LENET_BF16_BATCHES; do cfgs+=("bf16:$b"); done; fi
  done
  for ((r = 1; r <= REPS; r++)); do
    echo "  rep $r/$REPS"
    for c in "${cfgs[@]}"; do
      pr=${c%%:*} b=${c#*:}
      for t in $LENET_THREADS; do lenet_run simplechain "$b" "$t" "$([ "$pr" = bf16 ] && echo "$SC_BF16" || echo fp32)"; done
      if [ $HAVE_TORCH = 1 ]; then
        # PyTorch's bf16 without the CPU's bf16 instructions is several times slower than its
        # fp32: one rep of it is enough to show that
        [ "$pr" = bf16 ] && [ $CPU_BF16 = 0 ] && [ "$r" -gt 1 ] && continue
        for t in $LENET_PT_THREADS; do lenet_run pytorch "$b" "$t" "$pr"; done
      fi
    done
  done
  echo
  echo "  (GFLOP/s: $LENET_FLOPS flops per image = 2 x (281,640 forward + 281,640 dW + 195,240 dx) multiply-adds;"
  echo "   %peak: against the ${LENET_KERN:-avx512} fp32 FMA peak at the same thread count; pt/sc = PyTorch median / simplechain"
  echo "   median at the same precision, batch and thread count, > 1: simplechain is faster;"
  echo "   bf16-emulated: bf16 rounding computed by the float kernels, for accuracy, not speed)"
  printf '  %-12s %-13s %6s %7s %10s %8s %8s %9s %8s %7s %7s\n' engine precision batch threads s/epoch min max images/s GFLOP/s %peak pt/sc
  local eng med mn mx n sc pk ratio tl key prow c
  for c in "${cfgs[@]}"; do
    pr=${c%%:*} b=${c#*:}
    tl=$(echo $LENET_THREADS $LENET_PT_THREADS | tr ' ' '\n' | sort -nu)
    for t in $tl; do
      for eng in simplechain pytorch; do
        # rows of this engine, batch, threads and precision class (bf16 covers bf16-emulated)
        sel() { awk -v e="$1" -v p="$pr" -v b="$b" -v t="$t" '$1==e && substr($2,1,4)==p && $3==b && $4==t' "$TMPD/lenet"; }
        sel $eng >"$TMPD/lenet_sel"
        [ -s "$TMPD/lenet_sel" ] || continue
        prow=$(awk '{x=$2} END {print x}' "$TMPD/lenet_sel")
        med=$(awk '{print $5}' "$TMPD/lenet_sel" | median)
        mn=$(awk '{print $5}' "$TMPD/lenet_sel" | sort -g | head -1)
        mx=$(awk '{print $5}' "$TMPD/lenet_sel" | sort -g | tail -1)
        n=$(awk '{x=$6} END {print x}' "$TMPD/lenet_sel")
        sc=$(sel simplechain | awk '{print $5}' | median)
        pk=$(sumget "peak_${LENET_KERN:-avx512}_$t")
        ratio=-
        [ "$eng" = pytorch ] && [ "$sc" != nan ] && ratio=$(awk -v a="$med" -v s="$sc" 'BEGIN {printf "%.2f", a / s}')
        # summary keys: fp32 as before (lenet_sc_64_2_s), bf16 with a suffix (lenet_scbf16_64_2_s)
        key=$([ $eng = simplechain ] && echo sc || echo pt)$([ "$pr" = bf16 ] && echo bf16)
        awk -v e=$eng -v pr="$prow" -v b="$b" -v t="$t" -v m="$med" -v mn="$mn" -v mx="$mx" -v n="$n" -v f=$LENET_FLOPS \
            -v pk="$pk" -v r="$ratio" -v k="$key" -v sf="$SUM" 'BEGIN {
          g = f * n / m * 1e-9
          pc = (pk != "nan" && pk > 0) ? sprintf("%.1f%%", 100 * g / pk) : "-"
          printf "  %-12s %-13s %6s %7s %10.4f %8.3f %8.3f %9.0f %8.1f %7s %7s\n", e, pr, b, t, m, mn, mx, n / m, g, pc, r
          printf "lenet_%s_%s_%s_s %s\n", k, b, t, m >> sf
          printf "lenet_%s_%s_%s_gflops %.1f\n", k, b, t, g >> sf
          printf "lenet_%s_%s_%s_frac %s\n", k, b, t, (pk != "nan" && pk > 0) ? g / pk : "nan" >> sf }'
      done
    done
  done
  local ntrain
  ntrain=$(awk '{x=$6} END {print (x == "" ? "nan" : x)}' "$TMPD/lenet")
  echo "  (min/max: fastest and slowest single epoch; train set: $ntrain images)"
  sumput lenet_train "$ntrain"
  if [[ " $LENET_PRECISIONS " == *" bf16 "* ]]; then
    for b in $LENET_BF16_BATCHES; do
      for t in $LENET_THREADS; do
        awk -v f="$(sumget "lenet_sc_${b}_${t}_s")" -v h="$(sumget "lenet_scbf16_${b}_${t}_s")" -v b="$b" -v t="$t" -v p="$SC_BF16" 'BEGIN {
          if (f == "nan" || h == "nan" || f == "" || h == "") exit
          printf "  simplechain %s / fp32 speed, batch %s, %s thread(s): %.2fx (fp32 %.4f s, %s %.4f s per epoch)\n", p, b, t, f / h, f, p, h }'
      done
    done
    [ $CPU_BF16 = 1 ] || echo "  (this CPU has no AVX512_BF16: simplechain's bf16 column is its emulation, slower than fp32 by design)"
    lenet_pairs
    # where the time goes, per layer and direction (sc_train's profiler), one epoch each
    local pb pt lim=()
    pb=$(echo $LENET_BF16_BATCHES | awk '{print $1}') pt=$(echo $LENET_THREADS | tr ' ' '\n' | sort -n | tail -1)
    [ "$LENET_LIMIT" != 0 ] && lim=(--limit "$LENET_LIMIT")
    for pr in fp32 "$SC_BF16"; do
      echo
      echo "  per-layer profile, $pr, batch $pb, $pt thread(s), one epoch (build/lenet5 --profile):"
      "$LENET" --data "$FASHION_DIR" --epochs 1 --batch "$pb" --threads "$pt" --precision "$pr" --profile --quiet "${lim[@]}" 2>&1 |
        sed -n '/^profile/,/^RESULT/p' | grep -v '^RESULT' | sed 's/^/    /' || echo "    (failed)"
    done
  fi

  echo
  echo "  test accuracy after $LENET_ACC_EPOCHS epoch(s) with the defaults (batch 64, ADAM lr 3e-3 cosine-annealed, seed 1, all CPUs; one run each):"
  if [ "$LENET_ACC" = 0 ]; then echo "  skipped (LENET_ACC=0)"; return; fi
  local name dir out line acc prs=fp32 k
  [[ " $LENET_PRECISIONS " == *" bf16 "* ]] && prs="fp32 $SC_BF16"
  for pr in $prs; do
    k=$([ "$pr" = fp32 ] || echo "bf16_") # summary keys: lenet_acc_fashion, lenet_acc_bf16_fashion
    for name in fashion mnist; do
      dir=$([ $name = fashion ] && echo "$FASHION_DIR" || echo "$MNIST_DIR")
      if ! [ -d "$dir" ]; then printf '  %-8s %s not found; skipped\n' "$name" "$dir"; continue; fi
      out=$("$LENET" --data "$dir" --epochs "$LENET_ACC_EPOCHS" --precision "$pr" --quiet 2>&1) || {
        echo "  $name $pr FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; continue; }
      line=$(echo "$out" | grep '^RESULT' | tail -1)
      echo "$out" | grep '^epoch' | tail -1 | sed "s|^|  $name $pr: last |"
      echo "  $name $pr: $line   (load $(load1))"
      acc=$(echo "$line" | field test_accuracy)
      sumput "lenet_acc_$k$name" "${acc:-nan}"
      sumput "lenet_acc_$k${name}_epochs" "$(echo "$line" | field epochs)"
    done
  done
  printf '  %-56s %-13s %10s %10s\n' "data (test set: 10,000 images)" precision accuracy target
  for pr in $prs; do
    k=$([ "$pr" = fp32 ] || echo "bf16_")
    printf '  %-56s %-13s %10s %10s\n' "Fashion-MNIST ($FASHION_DIR)" "$pr" "$(awk -v a="$(sumget lenet_acc_${k}fashion)" 'BEGIN {printf (a == "nan" ? "n/a" : "%.2f %%"), 100 * a}')" ">= 88.5 %"
    printf '  %-56s %-13s %10s %10s\n' "MNIST ($MNIST_DIR)" "$pr" "$(awk -v a="$(sumget lenet_acc_${k}mnist)" 'BEGIN {printf (a == "nan" ? "n/a" : "%.2f %%"), 100 * a}')" ">= 97.5 %"
  done
}

# --- ode ----------------------------------------------------------------------------------
section_ode() {
  echo
  echo "== (e) neural-ODE right-hand side: 2 -> 50 tanh -> 2 on one state, float64, 1 thread"
  echo "   (ns per call; rhs: y = NN(u); vjp: J_u^T v and J_p^T v, forward recomputed; each run prints"
  echo "    the median of its own repetitions; $ODE_RUNS runs per engine, interleaved; the table: median over runs)"
  [ -n "$ODE" ] || { echo "  $ODE_SRC not built ('make bench-bins')"; return; }
  local r out line
  : >"$TMPD/ode"
  for ((r = 1; r <= ODE_RUNS; r++)); do
    out=$("$ODE" 2>&1) || true
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    if [ -n "$line" ]; then
      echo "  $line   (load $(load1))"
      echo "simplechain $(echo "$line" | field rhs_ns) $(echo "$line" | field vjp_ns) $(echo "$line" | field rhs_plus_vjp_ns) nan nan" >>"$TMPD/ode"
    else echo "  simplechain FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; fi
    if [ $HAVE_TORCH = 1 ]; then
      out=$(env "${TORCH_ENV[@]}" "$PYTHON" bench/ode_rhs_torch.py 2>&1) || true
      line=$(echo "$out" | grep '^RESULT' | tail -1)
      if [ -n "$line" ]; then
        echo "  $line   (load $(load1))"
        echo "pytorch $(echo "$line" | field rhs_ns) $(echo "$line" | field vjp_ns) $(echo "$line" | field rhs_plus_vjp_ns) $(echo "$line" | field functional_vjp_ns) $(echo "$line" | field backward_ns)" >>"$TMPD/ode"
      else echo "  pytorch FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; fi
    fi
  done
  local eng c rhs vjp tot fv bw srhs svjp stot
  srhs=$(awk '$1=="simplechain" {print $2}' "$TMPD/ode" | median)
  svjp=$(awk '$1=="simplechain" {print $3}' "$TMPD/ode" | median)
  stot=$(awk '$1=="simplechain" {print $4}' "$TMPD/ode" | median)
  echo
  echo "  (pytorch vjp: the faster of autograd.grad(y, [u] + params, v) and y.backward(v), both giving the state and"
  echo "   parameter parts like sc_vjp_f64; functional = torch.autograd.functional.vjp, state part only, for reference)"
  printf '  %-12s %10s %10s %12s %14s %12s\n' engine rhs_ns vjp_ns rhs+vjp_ns functional_ns backward_ns
  for eng in simplechain pytorch; do
    [ -n "$(awk -v e=$eng '$1==e' "$TMPD/ode")" ] || continue
    rhs=$(awk -v e=$eng '$1==e {print $2}' "$TMPD/ode" | median)
    vjp=$(awk -v e=$eng '$1==e {print $3}' "$TMPD/ode" | median)
    tot=$(awk -v e=$eng '$1==e {print $4}' "$TMPD/ode" | median)
    fv=$(awk -v e=$eng '$1==e {print $5}' "$TMPD/ode" | median)
    bw=$(awk -v e=$eng '$1==e {print $6}' "$TMPD/ode" | median)
    [ "$eng" = simplechain ] && fv=- bw=-
    printf '  %-12s %10s %10s %12s %14s %12s\n' "$eng" "$rhs" "$vjp" "$tot" "$fv" "$bw"
    c=$([ $eng = simplechain ] && echo sc || echo pt)
    sumput "ode_${c}_rhs" "$rhs"
    sumput "ode_${c}_vjp" "$vjp"
    sumput "ode_${c}_tot" "$tot"
  done
  if [ "$(sumget ode_pt_tot)" != nan ] && [ "$stot" != nan ]; then
    awk -v a="$(sumget ode_pt_rhs)" -v b="$srhs" -v c="$(sumget ode_pt_vjp)" -v d="$svjp" -v e="$(sumget ode_pt_tot)" -v f="$stot" 'BEGIN {
      printf "  pytorch/simplechain: rhs %.1fx, vjp %.1fx, rhs+vjp %.1fx\n", a / b, c / d, e / f }'
  fi
}

# --- bnn ----------------------------------------------------------------------------------
section_bnn() {
  echo
  echo "== Bayesian neural network (examples/bnn_model.h): log density + gradient, float64, 1 thread"
  echo "   (1 -> 32 relu -> 1, 100 points, theta ~ N(0, I), sigma ~ Gamma(0.1, 1), on (theta, log sigma);"
  echo "    ns per call, each run the median of its own 7 repetitions; $BNN_RUNS runs per engine, interleaved)"
  [ -n "$BNNG" ] || { echo "  $BNNG_SRC not built ('make bench-bins')"; return; }
  local r out line
  : >"$TMPD/bnn_times"
  for ((r = 1; r <= BNN_RUNS; r++)); do
    out=$("$BNNG" 2>&1) || true
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    if [ -n "$line" ]; then
      echo "  $line   (load $(load1))"
      echo "simplechain $(echo "$line" | field grad_ns) $(echo "$line" | field logp)" >>"$TMPD/bnn_times"
    else echo "  simplechain FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; fi
    if [ $HAVE_TORCH = 1 ]; then
      out=$(env "${TORCH_ENV[@]}" "$PYTHON" bench/bnn_grad_torch.py 2>&1) || true
      line=$(echo "$out" | grep '^RESULT' | tail -1)
      if [ -n "$line" ]; then
        echo "  $line   (load $(load1))"
        echo "pytorch $(echo "$line" | field grad_ns) $(echo "$line" | field logp)" >>"$TMPD/bnn_times"
      else echo "  pytorch FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; fi
    fi
  done
  local sg pg
  sg=$(awk '$1=="simplechain" {print $2}' "$TMPD/bnn_times" | median)
  pg=$(awk '$1=="pytorch" {print $2}' "$TMPD/bnn_times" | median)
  echo
  printf '  %-40s %14s %10s\n' engine grad_ns ratio
  printf '  %-40s %14s %10s\n' "simplechain (sc_valgrad_f64)" "$sg" 1
  [ "$pg" != nan ] && printf '  %-40s %14s %10s\n' "pytorch (torch.autograd, float64)" "$pg" "$(awk -v a="$pg" -v b="$sg" 'BEGIN {printf "%.1fx", a / b}')"
  echo "  log density at the benchmark point, both engines (must agree): $(awk '{print $1 " " $3}' "$TMPD/bnn_times" | sort -u | tr '\n' ' ')"
  echo "  context, NOT comparable (another machine, another BNN whose sizes were not published; TuringLang/Turing.jl#2454,"
  echo "  LogDensityProblems.logdensity_and_gradient, minimum over runs): Tracker 99.1 us (linked: fails),"
  echo "  Mooncake 532 us (linked 531 us), Zygote 2252 us (linked 2382 us)"
  sumput bnn_sc_ns "$sg"
  sumput bnn_pt_ns "$pg"
  if [ "$BNN_SAMPLE" = 1 ] && [ -n "$BNN" ]; then
    echo
    echo "  NUTS on it: build/bnn --quiet --threads 2 (4 chains x 1000 draws after 1000 warm-up)"
    out=$("$BNN" --quiet --threads 2 2>&1) || true
    echo "$out" | grep -E 'divergent|sigma|R-hat|f\(x_i\)|gradient|RESULT' | sed 's/^/  /'
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    sumput bnn_rhat "$(echo "$line" | field rhat_max)"
    sumput bnn_s "$(echo "$line" | field seconds)"
  fi
}

# --- poisson ------------------------------------------------------------------------------
section_poisson() {
  echo
  echo "== Poisson model of Turing.jl#2265 (examples/poisson.c): NUTS, 4 chains x (1000 warm-up + 1000 draws), 2 threads"
  [ -n "$POIS" ] || { echo "  $POIS_SRC not built ('make')"; return; }
  local r out line
  : >"$TMPD/pois"
  for ((r = 1; r <= POISSON_RUNS; r++)); do
    out=$("$POIS" --quiet --threads 2 2>&1) || true
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    if [ -n "$line" ]; then
      echo "  $line   (load $(load1))"
      echo "$(echo "$line" | field seconds) $(echo "$line" | field ess_bulk_min) $(echo "$line" | field rhat_max) $(echo "$line" | field max_abs_z)" >>"$TMPD/pois"
    else echo "  FAILED:"; echo "$out" | tail -5 | sed 's/^/    /'; fi
  done
  [ -s "$TMPD/pois" ] || return
  local s e rh z
  s=$(awk '{print $1}' "$TMPD/pois" | median) e=$(awk '{print $2}' "$TMPD/pois" | median)
  rh=$(awk '{print $3}' "$TMPD/pois" | median) z=$(awk '{print $4}' "$TMPD/pois" | median)
  echo "  median: $s s, min bulk ESS $e ($(awk -v e="$e" -v s="$s" 'BEGIN {printf "%.0f", e / s}') per second), R-hat max $rh, max |z| $z"
  echo "  (the same seed every run: the draws are identical, only the time varies; Turing.jl#2265 reports 16 s"
  echo "   for one chain of 1000 draws, on another machine)"
  sumput pois_s "$s"
  sumput pois_rhat "$rh"
  sumput pois_z "$z"
}

# --- threads ------------------------------------------------------------------------------
section_threads() {
  echo
  echo "== threads on small batches (bench/small_batch.c): sc_train, 64 -> 32 relu -> 10, 1,797 samples,"
  echo "   150 epochs, median of 9 runs alternating thread counts; target: any thread count"
  echo "   at batch 32 at most 5 % slower than 1 thread"
  [ -n "$SMALL" ] || { echo "  $SMALL_SRC not built ('make bench-bins')"; return; }
  local b nt out
  nt=$(nproc)
  for b in 32 256; do
    out=$("$SMALL" --batch $b --epochs 150 --reps 9 --threads "$nt" 2>&1) || { echo "  FAILED: $out"; continue; }
    echo "$out" | sed 's/^/  /'
    sumput "threads_b${b}_ratio" "$(echo "$out" | tail -1 | sed -n 's/.*ratio_to_1=\([0-9.]*\).*/\1/p')"
  done
}

# --- mpi ----------------------------------------------------------------------------------
section_mpi() {
  echo
  echo "== data-parallel LeNet5 over MPI (build/train_mpi): 1 rank x 2 threads vs 2 ranks x 1 thread, one epoch"
  echo "   (Fashion-MNIST from $FASHION_DIR, 60,000 images; s/epoch is the training loop alone, --quiet: no evaluation)"
  [ -n "$TMPI" ] || { echo "  $MPI_SRC not built (OpenMPI not installed: 'bash scripts/install-deps.sh test')"; return; }
  command -v mpirun >/dev/null 2>&1 || { echo "  mpirun not found"; return; }
  [ -d "$FASHION_DIR" ] || { echo "  $FASHION_DIR missing ('make data')"; return; }
  local b cfg np thr out line s ms by
  printf '  %-6s %-18s %10s %14s %14s %10s\n' batch config s/epoch exchange_ms/step bytes/step params_fnv
  for b in 64 2048; do
    for cfg in "1 2" "2 1"; do
      np=${cfg% *} thr=${cfg#* }
      out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe --bind-to none -np "$np" \
        "$TMPI" --data "$FASHION_DIR" --epochs 1 --batch "$b" --threads "$thr" --quiet 2>&1) || true
      line=$(echo "$out" | grep '^RESULT' | tail -1)
      if [ -z "$line" ]; then echo "  batch $b, $np x $thr FAILED:"; echo "$out" | tail -3 | sed 's/^/    /'; continue; fi
      s=$(echo "$line" | field seconds)
      ms=$(echo "$out" | sed -n 's/^exchange: \([^ ]*\) ms per step, \([^ ]*\) bytes.*/\1/p' | tail -1)
      by=$(echo "$out" | sed -n 's/^exchange: \([^ ]*\) ms per step, \([^ ]*\) bytes.*/\2/p' | tail -1)
      printf '  %-6s %-18s %10s %14s %14s %10s\n' "$b" "$np rank(s) x $thr" "$s" "$ms" "$by" "$(echo "$line" | field params_fnv)"
      sumput "mpi_${b}_${np}x${thr}" "$s"
    done
    awk -v a="$(sumget mpi_${b}_2x1)" -v c="$(sumget mpi_${b}_1x2)" -v b="$b" 'BEGIN {
      if (a != "nan" && c != "nan") printf "  batch %s: 2 ranks x 1 thread / 1 rank x 2 threads = %.3f\n", b, a / c }'
  done
  echo "  (the same params_fnv in both configurations of a batch size: the results are bitwise equal)"
}

# --- isa ----------------------------------------------------------------------------------
section_isa() {
  echo
  echo "== ISA paths, 1 thread: toy2x2 $ISA_STEPS steps (1 run each) and the micro-benchmark (1 run each), SC_ISA forced"
  [ -n "$TOY" ] || { echo "  toy2x2 not built"; return; }
  printf '  %-8s %10s %10s %8s %7s %12s %8s\n' SC_ISA toy_s ms/step GFLOP/s %peak micro_us load
  local isa out line s g us pk frac
  for isa in $ISAS; do
    out=$(SC_ISA=$isa "$TOY" --steps "$ISA_STEPS" --samples "$SAMPLES" --threads 1 --every 0 --quiet 2>&1) || {
      printf '  %-8s %s\n' "$isa" "not available: $(echo "$out" | tail -1)"; continue; }
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    s=$(echo "$line" | field seconds) g=$(echo "$line" | field gflops)
    us=nan
    if [ -n "$MICRO" ]; then
      us=$(SC_ISA=$isa "$MICRO" --reps "$MICRO_REPS" 2>/dev/null | grep '^RESULT' | field us_per_call || true)
      us=${us:-nan}
    fi
    # %peak against the FMA peak of that vector width (none for scalar: the baseline
    # x86-64 build may still be auto-vectorized with SSE, so there is no fair denominator)
    case $isa in
      avx512) pk=$(sumget peak_avx512_1) ;;
      avx2) pk=$(sumget peak_avx2_1) ;;
      *) pk=nan ;;
    esac
    frac=$(awk -v g="$g" -v p="$pk" 'BEGIN {if (p == "nan" || p <= 0) print "-"; else printf "%.1f%%", 100 * g / p}')
    printf '  %-8s %10.4f %10.4f %8.2f %7s %12s %8s\n' "$isa" "$s" "$(awk -v s="$s" -v n="$ISA_STEPS" 'BEGIN {print 1000 * s / n}')" "$g" "$frac" "$us" "$(load1)"
    sumput "isa_${isa}_s" "$s"
    sumput "isa_${isa}_us" "$us"
  done
  # the opt-in rational tanh (SC_TANH_VARIANT=fast: 6 ULP instead of 1.5) on the vector sets
  for isa in $ISAS; do
    [ "$isa" = scalar ] && continue
    out=$(SC_ISA=$isa SC_TANH_VARIANT=fast "$TOY" --steps "$ISA_STEPS" --samples "$SAMPLES" --threads 1 --every 0 --quiet 2>&1) || continue
    line=$(echo "$out" | grep '^RESULT' | tail -1)
    s=$(echo "$line" | field seconds) g=$(echo "$line" | field gflops)
    case $isa in
      avx512) pk=$(sumget peak_avx512_1) ;;
      *) pk=$(sumget peak_avx2_1) ;;
    esac
    frac=$(awk -v g="$g" -v p="$pk" 'BEGIN {if (p == "nan" || p <= 0) print "-"; else printf "%.1f%%", 100 * g / p}')
    printf '  %-8s %10.4f %10.4f %8.2f %7s %12s %8s\n' "$isa+rat" "$s" "$(awk -v s="$s" -v n="$ISA_STEPS" 'BEGIN {print 1000 * s / n}')" "$g" "$frac" "-" "$(load1)"
    sumput "isa_${isa}_rat_s" "$s"
  done
  echo "  (+rat: SC_TANH_VARIANT=fast, the opt-in rational tanh, 6 ULP instead of 1.5: the rule picks rat)"
  # the two drop-in files alone (cc -std=c11 -O2 app.c simplechain.c): no kernels/; on x86-64
  # the built-in AVX-512 set where the CPU has AVX-512, else the built-in AVX2 set where it has
  # AVX2 + FMA, else the portable kernels
  # (REPS runs, the median: it is compared with a target)
  if [ -n "$PORT" ]; then
    local runs="" r
    for r in $(seq "$REPS"); do
      out=$("$PORT" --steps "$ISA_STEPS" --samples "$SAMPLES" --threads 1 --every 0 --quiet 2>&1) || continue
      s=$(echo "$out" | grep '^RESULT' | tail -1 | field seconds)
      runs="$runs $s"
    done
    if [ -n "$runs" ]; then
      s=$(echo $runs | tr ' ' '\n' | median)
      g=$(awk -v s="$s" -v n="$ISA_STEPS" -v m="$SAMPLES" 'BEGIN {print 2 * (704 + 704 + 576) * m * n / s * 1e-9}')
      printf '  %-8s %10.4f %10.4f %8.2f %7s %12s %8s\n' "two-file" "$s" "$(awk -v s="$s" -v n="$ISA_STEPS" 'BEGIN {print 1000 * s / n}')" "$g" "-" "-" "$(load1)"
      sumput isa_portable_s "$s"
    fi
    echo "  (two-file: toy2x2 built from examples/toy2x2.c + simplechain.c alone, cc -std=c11 -O2, SC_ISA unset: kernels $(echo "$out" | sed -n 's/.*kernels \([a-z0-9]*\)).*/\1/p' | tail -1);"
    echo "   the median of $REPS runs:$runs s)"
  fi
  echo "  (%peak: against the 1-thread FMA peak of that vector width; none for scalar)"
  echo "  (toy_s, GFLOP/s: one run each but two-file's, not a median: a busy core shows here directly)"
}

# --- hyperfine ----------------------------------------------------------------------------
section_hyperfine() {
  echo
  echo "== (c) hyperfine: the whole toy2x2 process (data generation + training + final losses), $STEPS steps"
  if [ "$HF" = 0 ]; then echo "  skipped (HF=0)"; return; fi
  command -v hyperfine >/dev/null 2>&1 || { echo "  hyperfine not installed (apt-get install hyperfine); skipped"; return; }
  local tl
  tl=$(echo $THREADS | tr ' ' ',')
  echo "  (the program is the private copy of $TOY_SRC)"
  hyperfine --style basic -N --runs "$HF_RUNS" --warmup 1 -L threads "$tl" \
    "$TOY --quiet --every 0 --steps $STEPS --samples $SAMPLES --threads {threads}" 2>&1 | sed 's/^/  /' || echo "  (hyperfine failed)"
}

# --- summary ------------------------------------------------------------------------------
verdict() { # value op target
  awk -v v="$1" -v op="$2" -v t="$3" 'BEGIN {
    if (v == "nan" || v == "") { print "n/a"; exit }
    ok = (op == "<=") ? (v + 0 <= t + 0) : (v + 0 >= t + 0)
    print ok ? "MET" : "NOT MET" }'
}
section_summary() {
  echo
  echo "== summary against the targets"
  local t2 sc2 pt2 fr2 us a512 a2 ratio avx tgt_s scale
  t2=$(echo $THREADS | tr ' ' '\n' | sort -n | tail -1)
  sc2=$(sumget "toy_simplechain_${t2}_s") pt2=$(sumget "toy_pytorch_${t2}_s") fr2=$(sumget "toy_simplechain_${t2}_frac")
  us=$(sumget micro_sc_us)
  a512=$(sumget isa_avx512_s) a2=$(sumget isa_avx2_s)
  ratio=$(awk -v a="$pt2" -v b="$sc2" 'BEGIN {print (a == "nan" || b == "nan") ? "nan" : a / b}')
  avx=$(awk -v a="$a2" -v b="$a512" 'BEGIN {print (a == "nan" || b == "nan") ? "nan" : a / b}')
  # the time target is for 10,000 steps; scale it when STEPS differs
  tgt_s=$(awk -v s="$STEPS" 'BEGIN {printf "%.3g", 3.0 * s / 10000}')
  scale=""
  [ "$STEPS" != 10000 ] && scale=" (scaled: 3.0 s/10k steps)"
  row() { printf '  %-76s %-12s %s\n' "$1" "$2" "$3"; }
  fmt() { awk -v v="$1" -v f="$2" 'BEGIN {if (v == "nan" || v == "") print "n/a"; else printf f "\n", v}'; }
  pct() { awk -v v="$1" -v d="${2:-1}" 'BEGIN {if (v == "nan" || v == "") print "n/a"; else printf "%." d "f %%\n", 100 * v}'; }
  div() { awk -v a="$1" -v b="$2" 'BEGIN {print (a == "nan" || b == "nan" || a == "" || b == "") ? "nan" : a / b}'; }
  row target measured verdict
  if want toy; then
    row "toy, $t2 threads: training <= $tgt_s s$scale" "$(fmt "$sc2" "%.3f s")" "$(verdict "$sc2" '<=' "$tgt_s")"
    # judged against PyTorch's fastest run: a host-loaded core slows its OpenMP threads
    # far more than ours (runs of 10 s and 19 s within one make bench), and a claim must not
    # profit from that; the median ratio is shown beside it
    local ptmin ptmax rbest
    ptmin=$(sumget "toy_pytorch_${t2}_min") ptmax=$(sumget "toy_pytorch_${t2}_max")
    rbest=$(awk -v a="$ptmin" -v b="$sc2" 'BEGIN {print (a == "nan" || b == "nan") ? "nan" : a / b}')
    row "toy, $t2 threads: >= 9x the tuned PyTorch (its fastest run)" "$(fmt "$rbest" "%.2fx")" "$(verdict "$rbest" '>=' 9)"
    awk -v r="$ratio" -v a="$ptmin" -v b="$ptmax" 'BEGIN {
      if (r == "nan" || a == "nan") exit
      printf "  %-76s %s\n", "  (against PyTorch'"'"'s median run)", sprintf("%.2fx", r)
      if (b / a > 1.25) printf "  %-76s %s\n", "  (PyTorch'"'"'s runs spread " a " .. " b " s: a loaded host)", "NOISY" }'
    row "toy, $t2 threads: >= 40 % of the FMA peak" "$(pct "$fr2")" "$(verdict "$fr2" '>=' 0.40)"
    row "toy, $t2 threads: >= 50 % of the FMA peak" "$(pct "$fr2")" "$(verdict "$fr2" '>=' 0.50)"
    # PyTorch's toy on more threads slower than on one: its OpenMP barriers on a host whose
    # vCPUs sit far apart (a Zen 5, 2026-11-28: 18.3 s on 2 threads against 12.1 on 1, 9.1 near), or a
    # busy core; a ratio against such a run flatters simplechain and is not a result
    local pt1 v12
    pt1=$(sumget "toy_pytorch_1_s")
    v12=$(verdict "$ratio" '>=' 12)
    if [ "$t2" != 1 ] && awk -v a="$pt2" -v b="$pt1" 'BEGIN {exit !(a != "nan" && b != "nan" && a > b)}'; then
      printf '  %-76s %s\n' "  (PyTorch's toy: $pt2 s on $t2 threads, $pt1 s on 1: its threads were hindered)" "SUSPECT"
      [ "$v12" = MET ] && v12="SUSPECT"
    fi
    row "toy, $t2 threads: >= 12x the tuned PyTorch, median" "$(fmt "$ratio" "%.2fx")" "$v12"
  fi
  want micro && row "micro valgrad: <= 3 us per call, 1 thread" "$(fmt "$us" "%.3f us")" "$(verdict "$us" '<=' 3)"
  want micro && row "micro valgrad: <= 2 us per call, 1 thread" "$(fmt "$us" "%.3f us")" "$(verdict "$us" '<=' 2)"
  if want lenet; then
    # the time target is for an epoch of 60,000 images; scaled when the runs trained on fewer
    # (LENET_LIMIT, or a data set of fewer images: the runs' own train= count)
    local ls lf lr64 lr2k ltgt lsc ln
    ls=$(sumget lenet_sc_64_2_s) lf=$(sumget lenet_sc_64_2_frac)
    lr64=$(div "$(sumget lenet_pt_64_2_s)" "$ls")
    lr2k=$(div "$(sumget lenet_pt_2048_2_s)" "$(sumget lenet_sc_2048_2_s)")
    ltgt=0.8 lsc=""
    ln=$(sumget lenet_train)
    [[ $ln =~ ^[1-9][0-9]*$ ]] || ln=$LENET_LIMIT
    if [ "$ln" != 0 ] && [ "$ln" -lt 60000 ]; then
      ltgt=$(awk -v n="$ln" 'BEGIN {printf "%.3g", 0.8 * n / 60000}') lsc=" (scaled to $ln images)"
    fi
    row "lenet5, 2 threads, batch 64: <= $ltgt s per epoch$lsc" "$(fmt "$ls" "%.3f s")" "$(verdict "$ls" '<=' "$ltgt")"
    row "lenet5, 2 threads, batch 64: >= 30 % of the FMA peak" "$(pct "$lf")" "$(verdict "$lf" '>=' 0.30)"
    row "lenet5, 2 threads, batch 64: >= 55 % of the FMA peak" "$(pct "$lf")" "$(verdict "$lf" '>=' 0.55)"
    row "lenet5, 2 threads, batch 64: >= 4x PyTorch" "$(fmt "$lr64" "%.2fx")" "$(verdict "$lr64" '>=' 4)"
    row "lenet5, 2 threads, batch 2048: >= 4x PyTorch" "$(fmt "$lr2k" "%.2fx")" "$(verdict "$lr2k" '>=' 4)"
    row "lenet5, Fashion-MNIST, $(sumget lenet_acc_fashion_epochs) epochs: test accuracy >= 88.5 %" "$(pct "$(sumget lenet_acc_fashion)" 2)" "$(verdict "$(sumget lenet_acc_fashion)" '>=' 0.885)"
    row "lenet5, MNIST 10k digits, $(sumget lenet_acc_mnist_epochs) epochs: test accuracy >= 97.5 %" "$(pct "$(sumget lenet_acc_mnist)" 2)" "$(verdict "$(sumget lenet_acc_mnist)" '>=' 0.975)"
    if [[ " $LENET_PRECISIONS " == *" bf16 "* ]]; then
      local bs bx
      bs=$(sumget lenet_scbf16_64_2_s)
      bx=$(div "$ls" "$bs")
      row "lenet5 $SC_BF16, 2 threads, batch 64: >= 2x fp32" "$(fmt "$bx" "%.2fx")" "$(verdict "$bx" '>=' 2)"
      [ "$(sumget lenet_pair_64_2_ratio)" != nan ] &&
        row "  (the median of $LENET_PAIRS alternating fp32 / $SC_BF16 1-epoch pairs)" "$(fmt "$(sumget lenet_pair_64_2_ratio)" "%.2fx")" "(info)"
      local btgt
      btgt=$(awk -v t="$ltgt" 'BEGIN {printf "%.3g", 0.123 * t / 0.8}')
      row "lenet5 $SC_BF16, 2 threads, batch 64: <= $btgt s/epoch (stretch)$lsc" "$(fmt "$bs" "%.3f s")" "$(verdict "$bs" '<=' "$btgt")"
      row "lenet5 $SC_BF16, Fashion-MNIST: test accuracy >= 88.5 %" "$(pct "$(sumget lenet_acc_bf16_fashion)" 2)" "$(verdict "$(sumget lenet_acc_bf16_fashion)" '>=' 0.885)"
      row "lenet5 $SC_BF16, MNIST 10k digits: test accuracy >= 97.5 %" "$(pct "$(sumget lenet_acc_bf16_mnist)" 2)" "$(verdict "$(sumget lenet_acc_bf16_mnist)" '>=' 0.975)"
      [ $CPU_BF16 = 1 ] || echo "    (no AVX512_BF16 on this CPU: the bf16 speed rows measure the emulation)"
    fi
  fi
  if want ode; then
    local or
    or=$(div "$(sumget ode_pt_tot)" "$(sumget ode_sc_tot)")
    row "ode RHS + VJP, 1 thread, float64: >= 20x PyTorch" "$(fmt "$or" "%.1fx")" "$(verdict "$or" '>=' 20)"
    row "ode RHS + VJP, 1 thread, float64: <= 0.5 us" "$(fmt "$(awk -v n="$(sumget ode_sc_tot)" 'BEGIN {print n == "nan" ? "nan" : n / 1000}')" "%.3f us")" "$(verdict "$(awk -v n="$(sumget ode_sc_tot)" 'BEGIN {print n == "nan" ? "nan" : n / 1000}')" '<=' 0.5)"
  fi
  if want bnn; then
    local br
    br=$(div "$(sumget bnn_pt_ns)" "$(sumget bnn_sc_ns)")
    row "bnn log-density gradient, float64, 1 thread: >= 50x PyTorch" "$(fmt "$br" "%.1fx")" "$(verdict "$br" '>=' 50)"
    if [ "$BNN_SAMPLE" = 1 ]; then
      row "bnn NUTS 4 x 1000: R-hat < 1.05 on sigma and f(x_i)" "$(fmt "$(sumget bnn_rhat)" "%.4f")" "$(verdict "$(sumget bnn_rhat)" '<=' 1.05)"
      row "bnn NUTS 4 x 1000 on 2 threads: in seconds (<= 10 s)" "$(fmt "$(sumget bnn_s)" "%.2f s")" "$(verdict "$(sumget bnn_s)" '<=' 10)"
    fi
  fi
  if want poisson; then
    row "poisson 4 x (1000 + 1000), 2 threads: < 0.5 s" "$(fmt "$(sumget pois_s)" "%.3f s")" "$(verdict "$(sumget pois_s)" '<=' 0.5)"
    row "poisson: R-hat < 1.01 for all 10 groups" "$(fmt "$(sumget pois_rhat)" "%.4f")" "$(verdict "$(sumget pois_rhat)" '<=' 1.01)"
    row "poisson: |z| < 4 for all 10 groups" "$(fmt "$(sumget pois_z)" "%.2f")" "$(verdict "$(sumget pois_z)" '<=' 4)"
  fi
  if want mpi; then
    local m64 m2k
    m64=$(div "$(sumget mpi_64_2x1)" "$(sumget mpi_64_1x2)")
    m2k=$(div "$(sumget mpi_2048_2x1)" "$(sumget mpi_2048_1x2)")
    row "mpi lenet5 batch 2048: 2 ranks x 1 thr within 15 % of 1 x 2" "$(fmt "$m2k" "%.3f")" "$(verdict "$m2k" '<=' 1.15)"
    row "mpi lenet5 batch 64: 2 ranks x 1 thr within 30 % of 1 x 2" "$(fmt "$m64" "%.3f")" "$(verdict "$m64" '<=' 1.30)"
  fi
  want isa && row "AVX2 toy time within 2x of AVX-512 (1 thread)" "$(fmt "$avx" "%.2fx")" "$(verdict "$avx" '<=' 2)"
  if want isa && want toy; then
    # PyTorch's 1-thread toy time, scaled from STEPS to the isa section's ISA_STEPS
    local port pt1 rport
    port=$(sumget isa_portable_s) pt1=$(sumget toy_pytorch_1_s)
    rport=$(awk -v p="$pt1" -v s="$port" -v a="$ISA_STEPS" -v b="$STEPS" 'BEGIN {print (p == "nan" || s == "nan" || p == "" || s == "") ? "nan" : p * a / b / s}')
    row "two-file build (cc -O2 app.c simplechain.c), toy 1 thread: >= 3x PyTorch 1 thr" "$(fmt "$rport" "%.2fx")" "$(verdict "$rport" '>=' 3)"
  fi
  local l0 l1
  l0=$(sumget load_start) l1=$(load1)
  echo "  load average (1 min): $l0 at start, $l1 at end; busy now: $(busy)"
  awk -v a="$l0" -v b="$l1" 'BEGIN {if (a + 0 > 0.5 || b + 0 > 0.5) print "  NOTE: the machine was not idle; 2-thread figures in particular may be pessimistic"}'
}

main() {
  header
  # a failing section reports and the others still run
  if want peak; then section_peak || echo "  (section peak failed)"; fi
  if want toy; then
    if [ -n "$TOY" ]; then section_toy || echo "  (section toy failed)"
    else echo; echo "== (a) toy2x2: $TOY_SRC not built ('make')"; fi
  fi
  if want micro; then section_micro || echo "  (section micro failed)"; fi
  if want threads; then section_threads || echo "  (section threads failed)"; fi
  if want lenet; then section_lenet || echo "  (section lenet failed)"; fi
  if want ode; then section_ode || echo "  (section ode failed)"; fi
  if want bnn; then section_bnn || echo "  (section bnn failed)"; fi
  if want poisson; then section_poisson || echo "  (section poisson failed)"; fi
  if want mpi; then section_mpi || echo "  (section mpi failed)"; fi
  if want isa; then section_isa || echo "  (section isa failed)"; fi
  if want hyperfine && [ -n "$TOY" ]; then section_hyperfine || echo "  (section hyperfine failed)"; fi
  if want toy || want micro || want lenet || want ode || want bnn || want poisson || want mpi || want isa; then section_summary || echo "  (summary failed)"; fi
  if [ -n "$PEAK" ]; then
    echo
    echo "  the vCPUs' distance at the end of the run (build/peak --pingpong-only; see the peak section):"
    "$PEAK" --pingpong-only 2>&1 | sed 's/^/  /'
  fi
  echo
  echo "saved: $LOG"
}

main 2>&1 | tee "$LOG"
