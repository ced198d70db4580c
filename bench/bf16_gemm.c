/* bench/bf16_gemm.c — the bf16 GEMM kernels one by one on the shapes LeNet5's layers give them
 * (one 32-sample tile; SC_PRECISION_BF16): the AVX512_BF16 kernel (sc__bf16_gemm_native) and,
 * where the CPU has AMX-BF16, the AMX kernel (sc__bf16_gemm_amx) on the same shape and on the
 * shape rounded up to whole 16 x 16 tiles (no zero-padded copies at the edges). Also the cost of
 * one LDTILECFG + TILERELEASE pair (each AMX call pays one), and an AMX call followed by an
 * AVX-512 pass over its output (the switch between the units). ns per call (median of 7 runs),
 * GFLOP/s counted on the shape's own M N K (2 flops per multiply-add, 2 multiply-adds per pair).
 * In builds with libxsmm, also libxsmm 1.17's bf16 GEMM (libxsmm_bsmmdispatch: bf16 inputs, fp32
 * output) on the same operands: our row-major C = A B is its column-major C^T = B^T A^T, and our
 * B (pairs along k) is its VNNI layout of that first operand (LIBXSMM_GEMM_FLAG_VNNI_A); its
 * result is checked against ours.
 *   make bench-bf16-gemm   (x86-64; needs AVX512_BF16 for anything to run) */
#include "../simplechain.c"

#include <stdio.h>
#include <stdlib.h>

#include "bench_time.h"

#ifdef SC__HAVE_BF16_NATIVE
static uint32_t A[300 * 160] __attribute__((aligned(64))),
    B[160 * 800] __attribute__((aligned(64)));
static float C[300 * 800] __attribute__((aligned(64)));

typedef struct {
  const char *name;
  size_t M, N, K2;
  int acc;
} shape;

static size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

#ifdef SC_HAVE_XSMM
#include <libxsmm.h>
static libxsmm_bsmmfunction xk; /* the shape being timed */
/* libxsmm's kernel for M x N x K2 pairs (C rows N apart, A rows K2 pairs, B rows N pairs), or
 * NULL where it JITs none */
static libxsmm_bsmmfunction xsmm_kernel(size_t M, size_t N, size_t K2, int acc) {
  libxsmm_blasint m = (libxsmm_blasint)N, n = (libxsmm_blasint)M, k = (libxsmm_blasint)(2 * K2);
  libxsmm_blasint lda = m, ldb = k, ldc = m;
  float alpha = 1, beta = acc ? 1.0f : 0.0f;
  int flags = LIBXSMM_GEMM_FLAG_VNNI_A;
  return libxsmm_bsmmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta, &flags, NULL);
}
static void xsmm_gemm(float *c, size_t ldc, const uint32_t *a, size_t lda, const uint32_t *b,
                      size_t ldb, size_t M, size_t N, size_t K2, int acc) {
  (void)ldc, (void)lda, (void)ldb, (void)M, (void)N, (void)K2, (void)acc;
  xk((const libxsmm_bfloat16 *)(const void *)b, (const libxsmm_bfloat16 *)(const void *)a, c);
}
static float Cx[300 * 800] __attribute__((aligned(64)));
#endif

static double time_gemm(sc__bf16_gemm_fn f, size_t M, size_t N, size_t K2, int acc) {
  double ns[7];
  size_t flops = 4 * M * N * K2, count = 1 + (size_t)(2e8 / (double)(flops + 20000));
  BENCH_7RUNS(
      ns, count, for (size_t i = 0; i < count; i++) {
        f(C, N, A, K2, B, N, M, N, K2, acc);
        __asm__ volatile("" : : "r"(C) : "memory");
      });
  return ns[3];
}

#ifdef SC__HAVE_AMX
__attribute__((target("amx-tile"))) static double time_cfg(void) {
  sc__amx_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  double ns[7];
  size_t count = 200000;
  BENCH_7RUNS(
      ns, count, for (size_t i = 0; i < count; i++) {
        __asm__ volatile("" : : "r"(&cfg) : "memory");
        _tile_loadconfig(&cfg);
        _tile_zero(0);
        _tile_release();
      });
  return ns[3];
}
#endif

int main(void) {
  char cpu[256];
  bench_cpu_name(cpu, sizeof cpu);
  printf("CPU: %s\n", cpu);
  if (!sc__cpu_bf16()) {
    printf("no AVX512_BF16 here: nothing to time\n");
    return 0;
  }
  srand(1);
  for (size_t i = 0; i < sizeof A / 4; i++)
    A[i] = sc__bf16_pair((float)((double)rand() / RAND_MAX - 0.5),
                         (float)((double)rand() / RAND_MAX - 0.5));
  for (size_t i = 0; i < sizeof B / 4; i++)
    B[i] = sc__bf16_pair((float)((double)rand() / RAND_MAX - 0.5),
                         (float)((double)rand() / RAND_MAX - 0.5));
  int amx = 0;
#ifdef SC__HAVE_AMX
  amx = sc__cpu_amx();
#endif
  printf("AMX-BF16: %s\n", amx ? "yes" : "no");
  const shape S[] = {
      {"conv1 fwd (6 x 768 x 13)", 6, 768, 13, 0},
      {"conv2 fwd (16 x 256 x 75)", 16, 256, 75, 0},
      {"conv2 dW (16 x 150 x 128)", 16, 150, 128, 1},
      {"conv2 dx (150 x 256 x 8)", 150, 256, 8, 0},
      {"dense1 fwd (120 x 32 x 128)", 120, 32, 128, 0},
      {"dense1 dW (120 x 256 x 16)", 120, 256, 16, 1},
      {"dense1 dx (256 x 32 x 60)", 256, 32, 60, 0},
  };
#ifdef SC_HAVE_XSMM
  libxsmm_init();
  printf("libxsmm target: %s\n", libxsmm_get_target_arch());
#endif
  printf("%-30s %12s %12s %12s %12s %12s %12s\n", "shape (M x N x K pairs)", "native ns", "amx ns",
         "amx16 ns", "native GF/s", "xsmm ns", "xsmm GF/s");
  for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
    const shape *h = &S[s];
    double tn = time_gemm(sc__bf16_gemm_native, h->M, h->N, h->K2, h->acc), ta = 0, tp = 0;
#ifdef SC__HAVE_AMX
    if (amx) {
      ta = time_gemm(sc__bf16_gemm_amx, h->M, h->N, h->K2, h->acc);
      tp = time_gemm(sc__bf16_gemm_amx, up16(h->M), up16(h->N), up16(h->K2), h->acc);
    }
#endif
    double tx = 0, dmax = 0, cmax = 0;
#ifdef SC_HAVE_XSMM
    if ((xk = xsmm_kernel(h->M, h->N, h->K2, h->acc))) {
      memset(C, 0, h->M * h->N * sizeof *C), memset(Cx, 0, h->M * h->N * sizeof *Cx);
      sc__bf16_gemm_native(C, h->N, A, h->K2, B, h->N, h->M, h->N, h->K2, h->acc);
      xsmm_gemm(Cx, h->N, A, h->K2, B, h->N, h->M, h->N, h->K2, h->acc);
      for (size_t i = 0; i < h->M * h->N; i++) {
        dmax = fmax(dmax, fabs((double)C[i] - (double)Cx[i]));
        cmax = fmax(cmax, fabs((double)C[i]));
      }
      tx = time_gemm(xsmm_gemm, h->M, h->N, h->K2, h->acc);
    }
#endif
    printf("%-30s %12.0f %12.0f %12.0f %12.1f %12.0f %12.1f\n", h->name, tn, ta, tp,
           4.0 * h->M * h->N * h->K2 / tn, tx, tx > 0 ? 4.0 * h->M * h->N * h->K2 / tx : 0.0);
    printf("RESULT bench=bf16_gemm shape=%zux%zux%zu native_ns=%.0f amx_ns=%.0f amx16_ns=%.0f "
           "xsmm_ns=%.0f xsmm_vs_native_maxdiff=%.2e\n",
           h->M, h->N, h->K2, tn, ta, tp, tx, cmax > 0 ? dmax / cmax : 0.0);
  }
#ifdef SC__HAVE_AMX
  if (amx) {
    printf("LDTILECFG + TILEZERO + TILERELEASE: %.1f ns\n", time_cfg());
    double ns[7];
    size_t count = 20000;
    BENCH_7RUNS(
        ns, count, for (size_t i = 0; i < count; i++) {
          sc__bf16_gemm_amx(C, 768, A, 16, B, 768, 16, 768, 16, 0);
          sc__bf16_round_native(C, 16 * 768);
        });
    double both = ns[3];
    BENCH_7RUNS(
        ns, count, for (size_t i = 0; i < count; i++) {
          sc__bf16_round_native(C, 16 * 768);
          __asm__ volatile("" : : "r"(C) : "memory");
        });
    printf("amx 16x768x16 then an AVX-512 pass over C: %.0f ns (the pass alone %.0f ns, the GEMM "
           "alone %.0f ns)\n",
           both, ns[3], time_gemm(sc__bf16_gemm_amx, 16, 768, 16, 0));
  }
#endif
  return 0;
}
#else
int main(void) {
  printf("this compiler builds no AVX512_BF16 kernels\n");
  return 0;
}
#endif
