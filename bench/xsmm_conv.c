/* bench/xsmm_conv.c — would a conv forward through libxsmm (1.17) beat our direct conv kernel on
 * LeNet5's shapes? One tile of 32 samples in the engine's lane layout (x[(c*H + y)*W + x][t]).
 * Ours: vec_conv_fwd_f32 with the rule's register block (the shape sc_chain_create picks).
 * libxsmm: per output row, an im2col copy (R x OW*32) and one JIT-ed GEMM that writes the row of
 * every output channel (m = OW*32, n = channels, k = R taps), then a bias + relu pass; also
 * with the whole image as one GEMM (m = OH*OW*32). ns per tile, median of 7 runs, and the
 * largest difference from ours. Built for AVX-512 where the CPU has it, else for AVX2:
 *   make bench-xsmm-conv   (needs libxsmm-dev) */
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "xsmm-conv-bench"
#define SC__KT_EXPORT_F32 sc__kt_f32_xsmm_conv_bench
#define SC__KT_EXPORT_F64 sc__kt_f64_xsmm_conv_bench
#define SC__VEC_F32 1
#ifdef __AVX512F__
#define VOB 8
#else
#define VOB 6
#endif
#define SC__OB 4
#include "../simplechain.c"

#include <libxsmm.h>
#include <stdio.h>

#include "bench_time.h"

enum { T = SC__TW };

static void bias_relu(float *a, const float *b, size_t K, size_t npos) {
  for (size_t k = 0; k < K; k++)
    for (size_t q = 0; q < npos * T; q++) {
      float z = a[k * npos * T + q] + b[k];
      a[k * npos * T + q] = z > 0 ? z : 0;
    }
}

int main(void) {
  static const struct {
    size_t C, H, W, K, KH, KW;
    const char *what;
  } shapes[] = {{1, 28, 28, 6, 5, 5, "LeNet conv1 (1x28x28 -> 6, 5x5)"},
                {6, 12, 12, 16, 5, 5, "LeNet conv2 (6x12x12 -> 16, 5x5)"}};
  libxsmm_init();
  char cpu[128];
  bench_cpu_name(cpu, sizeof cpu);
  printf("cpu: %s (avx512f: %s)\n", cpu, __builtin_cpu_supports("avx512f") ? "yes" : "no");
  printf("kernels: %s, tile of %d samples\n",
#ifdef __AVX512F__
         "AVX-512",
#else
         "AVX2",
#endif
         T);
  printf("%-34s %11s %13s %13s %8s %8s\n", "shape", "ours ns", "xsmm/row ns", "xsmm/img ns",
         "row/ours", "img/ours");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    size_t C = shapes[s].C, H = shapes[s].H, Wd = shapes[s].W, K = shapes[s].K;
    size_t KH = shapes[s].KH, KW = shapes[s].KW, OH = H - KH + 1, OW = Wd - KW + 1;
    size_t R = C * KH * KW, npos = OH * OW;
    size_t *roff = malloc(R * sizeof *roff);
    for (size_t c = 0, r = 0; c < C; c++)
      for (size_t i = 0; i < KH; i++)
        for (size_t j = 0; j < KW; j++) roff[r++] = (c * H + i) * Wd + j;
    sc__lplan P;
    memset(&P, 0, sizeof P);
    P.spec.kind = SC_LAYER_CONV2D, P.spec.kh = KH, P.spec.kw = KW, P.spec.sh = P.spec.sw = 1;
    P.spec.act = SC_RELU, P.spec.bias = 1;
    P.ic = C, P.ih = H, P.iw = Wd, P.oc = K, P.oh = OH, P.ow = OW, P.hp = H, P.wp = Wd, P.R = R;
    P.roff = roff;
    float *W = aligned_alloc(64, sizeof(float) * (K * R + 16));
    float *b = aligned_alloc(64, sizeof(float) * (K + 16));
    float *x = aligned_alloc(64, sizeof(float) * C * H * Wd * T);
    float *a = aligned_alloc(64, sizeof(float) * K * npos * T);
    float *c1 = aligned_alloc(64, sizeof(float) * K * npos * T);
    float *c2 = aligned_alloc(64, sizeof(float) * K * npos * T);
    float *col = aligned_alloc(64, sizeof(float) * R * npos * T);
    for (size_t i = 0; i < K * R; i++) W[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < K; i++) b[i] = 0.01f * (float)i;
    for (size_t i = 0; i < C * H * Wd * T; i++) x[i] = (float)((i * 13) % 11) / 11.0f - 0.5f;
    float alpha = 1, beta = 0;
    int flags = LIBXSMM_GEMM_FLAG_NONE;
    /* row-major out[k][(v,t)] = sum_r W[k][r] col[r][(v,t)] is column-major
     * out^T ((v,t) x k) = col^T ((v,t) x r) W^T (r x k) */
    libxsmm_blasint m1 = (libxsmm_blasint)(OW * T), m2 = (libxsmm_blasint)(npos * T);
    libxsmm_blasint n = (libxsmm_blasint)K, k = (libxsmm_blasint)R, ldb = k;
    libxsmm_blasint ldc = (libxsmm_blasint)(npos * T);
    libxsmm_smmfunction krow =
        libxsmm_smmdispatch(m1, n, k, &m1, &ldb, &ldc, &alpha, &beta, &flags, NULL);
    libxsmm_smmfunction kimg =
        libxsmm_smmdispatch(m2, n, k, &m2, &ldb, &ldc, &alpha, &beta, &flags, NULL);
    if (!krow || !kimg) {
      printf("%-34s libxsmm returned no kernel\n", shapes[s].what);
      continue;
    }
    enum { CALLS = 200 };
    double t_o[7], t_r[7], t_i[7];
    BENCH_7RUNS(
        t_o, CALLS, for (int q = 0; q < CALLS; q++) {
          x[q & 31] += 1e-7f;
          vec_conv_fwd_f32(a, NULL, W, b, x, &P);
        });
    BENCH_7RUNS(
        t_r, CALLS, for (int q = 0; q < CALLS; q++) {
          x[q & 31] += 1e-7f;
          for (size_t u = 0; u < OH; u++) {
            for (size_t r = 0; r < R; r++)
              memcpy(col + r * OW * T, x + (roff[r] + u * Wd) * T, OW * T * sizeof *col);
            krow(col, W, c1 + u * OW * T);
          }
          bias_relu(c1, b, K, npos);
        });
    BENCH_7RUNS(
        t_i, CALLS, for (int q = 0; q < CALLS; q++) {
          x[q & 31] += 1e-7f;
          for (size_t r = 0; r < R; r++)
            for (size_t u = 0; u < OH; u++)
              memcpy(col + (r * OH + u) * OW * T, x + (roff[r] + u * Wd) * T, OW * T * sizeof *col);
          kimg(col, W, c2);
          bias_relu(c2, b, K, npos);
        });
    vec_conv_fwd_f32(a, NULL, W, b, x, &P);
    double maxd = 0;
    for (size_t i = 0; i < K * npos * T; i++) {
      double d1 = fabs((double)a[i] - c1[i]), d2 = fabs((double)a[i] - c2[i]);
      if (d1 > maxd) maxd = d1;
      if (d2 > maxd) maxd = d2;
    }
    printf("%-34s %11.0f %13.0f %13.0f %8.2f %8.2f   (max |diff| %.1e)\n", shapes[s].what, t_o[3],
           t_r[3], t_i[3], t_r[3] / t_o[3], t_i[3] / t_o[3], maxd);
    free(roff), free(W), free(b), free(x), free(a), free(c1), free(c2), free(col);
  }
  libxsmm_finalize();
  return 0;
}
