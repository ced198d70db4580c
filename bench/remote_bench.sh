#!/usr/bin/env bash
# bench/remote_bench.sh — the CPU-dependent figures (speed, bf16, AMX) on a second machine that has no compiler
# setup, no libxsmm/SLEEF/cmocka and no data (a lent machine with another CPU family): the
# binaries are built here, stripped and carried with the shared libraries they need and the
# 10,000 real MNIST digits; the other machine runs them.
#
#   bash bench/remote_bench.sh prepare        # here: builds what it needs (make), then fills .dev/
#                                             # (git-ignored; about 45 MB)
#   bash bench/remote_bench.sh run [OUTDIR]   # there, in a copy of the working tree with .dev/:
#                                             # writes cpu.txt tests.txt bench.txt bf16.txt
#                                             # scaling.txt variants.txt to OUTDIR (default $OUT,
#                                             # else /tmp/remote_bench); about 5 minutes on 16 cores
#
# What "run" does, in order (each part in a file of its own, so that a run cut short keeps
# what it finished):
#   cpu.txt       lscpu, the CPU flags, PyTorch's build
#   tests.txt     the CPU-dependent cmocka programs (AMX, AVX512_BF16, the ISA paths), 14 at once
#   bench.txt     bench/bench_all.sh, sections peak toy micro threads lenet ode isa summary, pinned
#                 to two cores (PIN, default 4,5), one rep, LeNet5 on the 10k digits
#   bf16.txt      LeNet5 fp32 / bf16 (default kernels) / bf16 with SC_BF16_KERNELS=native, 3
#                 rounds interleaved; $B/bf16_gemm (the bf16 GEMMs, AMX where the CPU has it)
#   scaling.txt   toy2x2 and LeNet5 at 1..16 threads, unpinned, parameters compared bit for bit
#                 against 1 thread (fp32; bf16 LeNet5 at 1, 2, 16)
#   variants.txt  the toy at 2 threads under the planner's rules, each tanh form forced and
#                 SC_PLAN=measure, interleaved; the wisdom file SC_PLAN=measure writes for the
#                 toy and LeNet5 (what the measurement picks on that CPU)
set -u
cd "$(dirname "$0")/.."
mode=${1:-}
case $mode in
prepare)
  set -e
  TESTS="test_api test_bf16 test_conv test_f64 test_grad test_isa test_math test_onestate
         test_optim test_plan test_profile test_threads test_toy"
  targets=(all bench-bins build/bf16_gemm)
  for t in $TESTS; do targets+=("build/tests/$t"); done
  make -s -j"$(nproc)" "${targets[@]}"
  rm -rf .dev && mkdir -p .dev/build/tests .dev/lib .dev/mnist
  for b in peak toy2x2 toy2x2-portable micro_valgrad ode_rhs lenet5 small_batch bf16_gemm; do
    strip -o ".dev/build/$b" "build/$b"
  done
  # the programs whose results depend on the CPU (kernels, dispatch, threads); not the file
  # formats', the allocators' or the samplers' (and test_alloc takes 20 s)
  for t in $TESTS; do strip -o ".dev/build/tests/$t" "build/tests/$t"; done
  for l in libsleef.so.3 libz.so.1 libcmocka.so.0; do
    p=$(ldd build/tests/test_bf16 build/lenet5 | awk -v l="$l" '$1 == l {print $3; exit}')
    [ -n "$p" ] && cp -L "$p" .dev/lib/
  done
  mnist=${MNIST_DIR:-../shared/data/mnist}
  cp "$mnist"/*-ubyte.gz .dev/mnist/
  du -sh .dev
  exit 0
  ;;
run) ;;
*)
  echo "usage: bash bench/remote_bench.sh prepare | run [OUTDIR]" >&2
  exit 2
  ;;
esac

[ -d .dev/build ] || { echo "remote_bench: .dev/build missing ('bash bench/remote_bench.sh prepare' first)" >&2; exit 2; }
O=${2:-${OUT:-/tmp/remote_bench}}
mkdir -p "$O"
PIN=${PIN:-4,5}
PIN1=${PIN%%,*}
export LD_LIBRARY_PATH=$PWD/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.dev/build # (build/ is left alone: run it here too, it measures this machine)
T0=$(date +%s)
el() { echo "[t+$(($(date +%s) - T0)) s]"; }
{
  date -u; nproc; lscpu; echo; grep -m1 '^flags' /proc/cpuinfo; echo
  grep -i cpus_allowed_list /proc/self/status; uname -a
  command -v python3
  python3 -c 'import torch; print("torch", torch.__version__, "threads", torch.get_num_threads()); print(torch.__config__.show())' 2>&1 | head -30
  free -g
} >"$O/cpu.txt" 2>&1

# 1. correctness on this CPU (the AMX path where it has AMX)
{
  el; echo "== tests (scripts/run-tests.sh, 14 at once)"
  SC_TEST_JOBS=14 SC_SRC_DIR=$PWD SC_BUILD_DIR=$PWD/$B timeout 120 bash scripts/run-tests.sh $B/tests/test_* 2>&1 |
    grep -E '^==|PASSED|FAILED|SKIP|amx|AMX|^tests:|failing' | head -150
  el
} >"$O/tests.txt" 2>&1

# 2. the bench subset, pinned to two cores
{
  el
  STEPS=10000 REPS=1 HF=0 MICRO_RUNS=3 LENET_EPOCHS=1 LENET_BATCHES=64 LENET_THREADS="1 2" \
    LENET_PAIRS=3 LENET_ACC=1 ODE_RUNS=2 ISA_STEPS=2000 ISAS="avx512 avx2" PYTHON=$(command -v python3) BUILD=$B \
    FASHION_DIR=.dev/mnist MNIST_DIR=.dev/mnist \
    SECTIONS="peak toy micro threads lenet ode isa summary" timeout 300 taskset -c "$PIN" bash bench/bench_all.sh 2>&1
  el
} >"$O/bench.txt" 2>&1

# 3. bf16 kernels: the default (AMX where the CPU has it) vs AVX512_BF16 vs fp32
{
  el; echo "== LeNet5 10k MNIST, 1 epoch, 2 threads pinned $PIN: fp32 / bf16 default / bf16 native, 3 rounds"
  for _ in 1 2 3; do
    for cfg in fp32 bf16 native; do
      case $cfg in
        fp32) a="--precision fp32" e="" ;;
        bf16) a="--precision bf16" e="" ;;
        native) a="--precision bf16" e="SC_BF16_KERNELS=native" ;;
      esac
      echo "$cfg: $(env $e timeout 30 taskset -c "$PIN" $B/lenet5 --data .dev/mnist --epochs 1 --quiet --threads 2 $a 2>&1 | grep -E '^RESULT|rror' | tail -1)"
    done
  done
  echo "== bf16 GEMMs (1 thread, pinned $PIN1)"
  timeout 40 taskset -c "$PIN1" $B/bf16_gemm 2>&1 | tail -25
  el
} >"$O/bf16.txt" 2>&1

# 4. scaling on all cores, the parameters compared bit for bit across thread counts
{
  el; echo "== scaling: toy2x2 2000 steps, threads 1 2 4 8 16 (--save, cmp against 1 thread)"
  tmp=$(mktemp -d)
  for t in 1 2 4 8 16; do
    line=$(timeout 60 $B/toy2x2 --steps 2000 --threads $t --every 0 --quiet --save "$tmp/toy_$t.bin" 2>&1 | grep '^RESULT' | tail -1)
    echo "threads $t: $line; bits vs 1 thread: $(cmp -s "$tmp/toy_1.bin" "$tmp/toy_$t.bin" && echo same || echo DIFFERENT)"
  done
  echo "== scaling: lenet5 fp32 1 epoch MNIST 10k, batch 64 and 512, threads 1 2 4 8 16"
  for b in 64 512; do
    for t in 1 2 4 8 16; do
      line=$(timeout 60 $B/lenet5 --data .dev/mnist --epochs 1 --batch $b --threads $t --quiet --save "$tmp/ln_${b}_$t.bin" 2>&1 | grep '^RESULT' | tail -1)
      echo "batch $b threads $t: $line; bits vs 1 thread: $(cmp -s "$tmp/ln_${b}_1.bin" "$tmp/ln_${b}_$t.bin" && echo same || echo DIFFERENT)"
    done
  done
  echo "== bf16 LeNet5 (default kernels) bits across threads, 1 epoch MNIST 10k batch 64"
  for t in 1 2 16; do
    line=$(timeout 60 $B/lenet5 --data .dev/mnist --epochs 1 --threads $t --quiet --precision bf16 --save "$tmp/lb_$t.bin" 2>&1 | grep '^RESULT' | tail -1)
    echo "bf16 threads $t: $line; bits vs 1 thread: $(cmp -s "$tmp/lb_1.bin" "$tmp/lb_$t.bin" && echo same || echo DIFFERENT)"
  done
  rm -rf "$tmp"
  el
} >"$O/scaling.txt" 2>&1

# 5. the toy's variants on this CPU (2 threads pinned), and what SC_PLAN=measure picks
{
  el; echo "== toy2x2 3000 steps, 2 threads pinned $PIN: variants, 2 rounds interleaved"
  for _ in 1 2; do
    for cfg in rules div rcp measure fast; do
      case $cfg in
        rules) e="SC_PLAN=rules" ;;
        div) e="SC_TANH_VARIANT=div" ;;
        rcp) e="SC_TANH_VARIANT=rcp" ;;
        measure) e="SC_PLAN=measure" ;;
        fast) e="SC_TANH_VARIANT=fast" ;;
      esac
      echo "$cfg: $(env $e timeout 30 taskset -c "$PIN" $B/toy2x2 --steps 3000 --threads 2 --every 0 --quiet 2>&1 | grep -E '^RESULT|rror' | tail -1)"
    done
  done
  echo "== toy, 1 thread pinned $PIN1, 3000 steps: rules / div / rcp"
  for cfg in rules div rcp; do
    case $cfg in rules) e="SC_PLAN=rules" ;; div) e="SC_TANH_VARIANT=div" ;; rcp) e="SC_TANH_VARIANT=rcp" ;; esac
    echo "$cfg: $(env $e timeout 30 taskset -c "$PIN1" $B/toy2x2 --steps 3000 --threads 1 --every 0 --quiet 2>&1 | grep -E '^RESULT|rror' | tail -1)"
  done
  echo "== SC_PLAN=measure wisdom: toy, then LeNet5 fp32 (1 epoch 10k, 2 threads)"
  w=$(mktemp)
  rm -f "$w"
  SC_PLAN=measure SC_WISDOM="$w" timeout 30 taskset -c "$PIN" $B/toy2x2 --steps 200 --threads 2 --every 0 --quiet --profile 2>&1 | tail -20
  SC_PLAN=measure SC_WISDOM="$w" timeout 30 taskset -c "$PIN" $B/lenet5 --data .dev/mnist --epochs 1 --threads 2 --quiet 2>&1 | grep -E 'RESULT|plan|rror' | tail -5
  echo "-- wisdom file:"; cat "$w"; rm -f "$w"
  el
} >"$O/variants.txt" 2>&1
echo "remote_bench: done in $(($(date +%s) - T0)) s; files in $O"
