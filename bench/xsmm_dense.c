/* bench/xsmm_dense.c — does libxsmm (1.17) beat our own fused dense kernel on the shapes
 * simplechain runs? One tile of 32 samples: z (O x 32) = W (O x I) x (I x 32) + b, then
 * the activation. Ours: vec_dense_fwd_f32 (kernels/vec_f32.h, AVX-512 build), which fuses
 * bias and activation. libxsmm: a JIT-ed small GEMM (libxsmm_smmdispatch), then a
 * separate bias + activation pass over the (cache-hot) output. ns per tile, median.
 *   cc -O3 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -ffp-contract=fast \
 *      -fno-math-errno -DSC_HAVE_SLEEF -I. bench/xsmm_dense.c -o build/xsmm_dense \
 *      -lxsmm -lxsmmnoblas -lpthread -lrt -ldl -lm -lsleef -lz
 * (`make bench-xsmm` does this when libxsmm-dev is installed.) */
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "xsmm-bench"
#define SC__KT_EXPORT_F32 sc__kt_f32_xsmm_bench
#define SC__KT_EXPORT_F64 sc__kt_f64_xsmm_bench
#define SC__VEC_F32 1
#define VOB 8
#define SC__OB 8
#include "../simplechain.c"

#include <libxsmm.h>
#include <stdio.h>

#include "bench_time.h"

int main(void) {
  static const struct {
    int O, I;
    const char *what;
  } shapes[] = {{32, 4, "toy layer 1 (4 -> 32 tanh)"},    {16, 32, "toy layer 2 (32 -> 16 tanh)"},
                {4, 16, "toy layer 3 (16 -> 4)"},         {8, 24, "micro layer 1 (24 -> 8 tanh)"},
                {120, 256, "LeNet dense 1 (256 -> 120)"}, {84, 120, "LeNet dense 2 (120 -> 84)"},
                {10, 84, "LeNet dense 3 (84 -> 10)"},     {50, 2, "neural ODE (2 -> 50 tanh)"}};
  libxsmm_init();
  printf("%-30s %10s %12s %12s %8s\n", "shape (one tile of 32)", "act", "ours ns", "libxsmm ns",
         "ratio");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int O = shapes[s].O, I = shapes[s].I, T = SC__TW;
    float *W = aligned_alloc(64, sizeof(float) * (size_t)(O * I + 64));
    float *b = aligned_alloc(64, sizeof(float) * (size_t)(O + 64));
    float *x = aligned_alloc(64, sizeof(float) * (size_t)(I * T + 64));
    float *a = aligned_alloc(64, sizeof(float) * (size_t)(O * T + 64));
    float *c = aligned_alloc(64, sizeof(float) * (size_t)(O * T + 64));
    for (int i = 0; i < O * I; i++) W[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < O; i++) b[i] = 0.01f * (float)i;
    for (int i = 0; i < I * T; i++) x[i] = (float)((i * 13) % 11) / 11.0f - 0.5f;
    float alpha = 1, beta = 0;
    int flags = LIBXSMM_GEMM_FLAG_NONE;
    /* row-major z = W x is column-major z^T = x^T W^T: m = T, n = O, k = I */
    libxsmm_smmfunction k = libxsmm_smmdispatch(T, O, I, &T, &I, &T, &alpha, &beta, &flags, NULL);
    if (!k) {
      printf("%-30s libxsmm returned no kernel\n", shapes[s].what);
      continue;
    }
    for (int act = 0; act < 2; act++) {
      sc_act A = act ? SC_TANH : SC_IDENTITY;
      enum { REPS = 9, CALLS = 20000 };
      double t_ours[REPS], t_x[REPS];
      for (int r = 0; r < REPS; r++) {
        double t0 = now();
        for (int i = 0; i < CALLS; i++) {
          x[i & 31] += 1e-7f;
          vec_dense_fwd_f32(a, NULL, W, b, x, (size_t)O, (size_t)I, A);
        }
        double t1 = now();
        for (int i = 0; i < CALLS; i++) {
          x[i & 31] += 1e-7f;
          k(x, W, c);
          for (int o = 0; o < O; o++) {
            float *row = c + (size_t)o * T;
            for (int t = 0; t < T; t++) row[t] += b[o];
            if (A == SC_TANH) v_act_store(row, NULL, (const sc_vf *)(const void *)row, A);
          }
        }
        double t2 = now();
        t_ours[r] = (t1 - t0) / CALLS * 1e9;
        t_x[r] = (t2 - t1) / CALLS * 1e9;
      }
      qsort(t_ours, REPS, sizeof(double), cmpd);
      qsort(t_x, REPS, sizeof(double), cmpd);
      /* same numbers? */
      double maxd = 0;
      vec_dense_fwd_f32(a, NULL, W, b, x, (size_t)O, (size_t)I, A);
      k(x, W, c);
      for (int o = 0; o < O; o++)
        for (int t = 0; t < T; t++) {
          float z = c[o * T + t] + b[o];
          float ref = A == SC_TANH ? sc__tanh_f32(z) : z;
          double d = fabs((double)ref - a[o * T + t]);
          if (d > maxd) maxd = d;
        }
      printf("%-30s %10s %12.1f %12.1f %8.2f   (max |diff| %.1e)\n", shapes[s].what,
             A == SC_TANH ? "tanh" : "identity", t_ours[REPS / 2], t_x[REPS / 2],
             t_x[REPS / 2] / t_ours[REPS / 2], maxd);
    }
    free(W), free(b), free(x), free(a), free(c);
  }
  libxsmm_finalize();
  return 0;
}
