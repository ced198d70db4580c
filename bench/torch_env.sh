# bench/torch_env.sh — sourced by bench_toy.sh and bench_all.sh: the PyTorch configuration
# both twins run in (the fastest Debian one available, glibc malloc tuned), and a probe of what the torch
# process really loads.  Expects PYTHON and OPENBLAS_OMP_DIR to be set; sets TORCH_ENV
# (an array of VAR=value for env), TORCH_NOTE, HAVE_TORCH, and defines torch_probe.

# --- PyTorch configuration: the fastest Debian one available -------------------------
HAVE_AVX512=0
grep -qw avx512f /proc/cpuinfo 2>/dev/null && HAVE_AVX512=1
TORCH_ENV=()
if [ -d "$OPENBLAS_OMP_DIR" ]; then
  if [ $HAVE_AVX512 = 1 ]; then
    TORCH_ENV=("LD_LIBRARY_PATH=$OPENBLAS_OMP_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
               OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512)
  else # the AVX-512 settings would crash (SIGILL) on a CPU without AVX-512
    TORCH_ENV=("LD_LIBRARY_PATH=$OPENBLAS_OMP_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
               OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2)
  fi
  TORCH_NOTE="OpenBLAS (OpenMP build, libopenblas0-openmp) from $OPENBLAS_OMP_DIR, run with: ${TORCH_ENV[*]}"
else
  # torch links libblas.so.3, which Debian's alternatives resolve (the reference BLAS
  # unless an optimized BLAS package registered itself)
  sysblas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
  case "$sysblas" in
    */blas/libblas.so.3* | "") blasname="the reference BLAS (libblas3)" ;;
    *) blasname="the system's libblas.so.3 -> $sysblas (not the reference BLAS)" ;;
  esac
  TORCH_NOTE="$blasname, default environment; $OPENBLAS_OMP_DIR is absent ('bash scripts/install-deps.sh bench' installs libopenblas0-openmp, the fast configuration)"
fi

# --- glibc malloc: keep freed memory in the process ---------------------------------------
# With glibc's defaults, PyTorch's per-step tensors (the toy's 10,000 x 32 activations,
# LeNet5's im2col buffers at batch 2048) are mmapped or trimmed back to the OS when freed
# and page-faulted in again on the next step: measured on the benchmark machine, 0.4-3
# million minor faults per run and 1.5-2x longer training loops.  PyTorch's CPU
# performance guides recommend jemalloc or tcmalloc for this; these glibc tunables have the
# same effect without a package (top_pad: grow the heap 1 GB at a time; trim_threshold:
# never give it back; mmap_threshold: the largest glibc accepts, 32 MiB, fixed).
# TORCH_MALLOC=glibc keeps glibc's defaults (the configuration of runs before 2026-11-21 07:40).
TORCH_MALLOC=${TORCH_MALLOC:-tuned}
case "$TORCH_MALLOC" in
  tuned)
    TORCH_ENV+=("GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4000000000:glibc.malloc.top_pad=1000000000")
    TORCH_NOTE="$TORCH_NOTE; glibc malloc tuned (TORCH_MALLOC=tuned): ${TORCH_ENV[${#TORCH_ENV[@]}-1]}" ;;
  glibc) TORCH_NOTE="$TORCH_NOTE; glibc malloc defaults (TORCH_MALLOC=glibc)" ;;
  *) echo "torch_env: TORCH_MALLOC must be tuned or glibc, got '$TORCH_MALLOC'" >&2; return 2 2>/dev/null || exit 2 ;;
esac

HAVE_TORCH=0
if "$PYTHON" -c 'import torch, numpy' >/dev/null 2>&1; then HAVE_TORCH=1; fi

# what the torch process actually loads, checked from inside it
torch_probe() {
  env "${TORCH_ENV[@]}" "$PYTHON" - <<'EOF' 2>&1 || true
import ctypes, torch
cap = torch.__config__.show().split("CPU capability usage:")[-1].split("\n")[0].strip()
blas = set()
for l in open("/proc/self/maps"):
    parts = l.split()
    if len(parts) >= 6 and "blas" in parts[-1]:
        blas.add(parts[-1])
blas = sorted(blas)
core = "n/a (not OpenBLAS)"
try:
    lib = ctypes.CDLL("libblas.so.3")
    f = lib.openblas_get_corename; f.restype = ctypes.c_char_p
    core = f().decode()
except Exception:
    pass
print(f"  torch {torch.__version__}, ATen CPU capability {cap}, OpenBLAS core {core}")
print("  BLAS libraries mapped: " + (", ".join(blas) if blas else "none"))
EOF
}
