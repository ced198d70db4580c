/* bench/kernels_speed.c — the float dense kernels one by one (AVX-512 or AVX2 build), on the toy's
 * layer shapes (4 -> 32 tanh -> 16 tanh -> 4), one 32-sample tile per call, operands in L1: ns per
 * call and GFLOP/s (2 O I TW flops; the tanh rows: the forward with tanh, whose difference to the
 * identity forward is the tanh pass). Median of 7 runs. make bench-kernels   (the AVX-512 build
 * where the CPU has it, then the AVX2 build) These are the figures behind the time breakdown of the
 * toy in bench/RESULTS.md. */
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "kernels-bench"
#define SC__KT_EXPORT_F32 sc__kt_f32_kernels_bench
#define SC__KT_EXPORT_F64 sc__kt_f64_kernels_bench
#define SC__VEC_F32 1
#ifdef __AVX512F__
#define VOB 8
#define SC__OB 8
#define ISA "AVX-512"
#else
#define VOB 6
#define SC__OB 4
#define ISA "AVX2"
#endif
#include "../simplechain.c"

#include <stdio.h>

#include "bench_time.h"

#define CALLS 200000
static float W[4096] __attribute__((aligned(64))), X[2][4096] __attribute__((aligned(64)));
static float D[2][4096] __attribute__((aligned(64))), A[4096] __attribute__((aligned(64)));
static float WL[1024 * 16] __attribute__((aligned(64))), BL[4096] __attribute__((aligned(64)));

/* median of 7 runs of CALLS calls of STMT, ns per call */
#define TIME(STMT, out)                                                                            \
  do {                                                                                             \
    double tt_[7];                                                                                 \
    BENCH_7RUNS(                                                                                   \
        tt_, CALLS, for (int it = 0; it < CALLS; it++) {                                           \
          STMT;                                                                                    \
          __asm__ volatile("" : : "r"(A), "r"(WL) : "memory");                                     \
        });                                                                                        \
    out = tt_[3];                                                                                  \
  } while (0)

int main(void) {
  for (int i = 0; i < 4096; i++) {
    W[i] = 0.01f * (float)(i % 7) - 0.03f;
    X[0][i] = X[1][i] = 0.02f * (float)(i % 5) - 0.04f;
    D[0][i] = D[1][i] = 0.03f * (float)(i % 3) - 0.03f;
  }
  static const size_t shapes[3][2] = {{32, 4}, {16, 32}, {4, 16}}; /* O, I */
  char cpu[128];
  bench_cpu_name(cpu, sizeof cpu);
  printf("cpu: %s\n", cpu);
  printf("%s float dense kernels, toy shapes, one %d-sample tile per call, median of 7\n", ISA,
         SC__TW);
  printf("  %-24s %8s %10s %9s\n", "kernel", "O x I", "ns/call", "GFLOP/s");
  double sum[4] = {0, 0, 0, 0};
  for (int s = 0; s < 3; s++) {
    size_t O = shapes[s][0], I = shapes[s][1];
    double fl = 2.0 * (double)(O * I) * SC__TW, t, ti;
    const float *b = W + O * I;
    TIME(vec_dense_fwd_f32(A, NULL, W, b, X[0], O, I, SC_IDENTITY), ti);
    printf("  %-24s %3zux%-4zu %10.1f %9.1f\n", "forward (identity)", O, I, ti, fl / ti);
    sum[0] += ti;
    if (s < 2) { /* the toy's tanh layers */
      TIME(vec_dense_fwd_f32(A, NULL, W, b, X[0], O, I, SC_TANH), t);
      printf("  %-24s %3zux%-4zu %10.1f %9s   (tanh pass %.1f ns)\n", "forward + tanh", O, I, t, "",
             t - ti);
      sum[1] += t - ti;
    }
    TIME(vec_dense_dwl_f32(WL, D[0], X[0], O, I, 0, NULL, 0), t);
    printf("  %-24s %3zux%-4zu %10.1f %9.1f\n", "dW, one tile", O, I, t, fl / t);
#ifdef SC__VEC_DWL2
    TIME(vec_dense_dwl2_f32(WL, D[0], X[0], D[1], X[1], O, I, 0, NULL, 0), t);
    printf("  %-24s %3zux%-4zu %10.1f %9.1f   (per tile)\n", "dW, pair of tiles", O, I, t / 2,
           2 * fl / t);
    sum[2] += t / 2;
#else
    sum[2] += t;
#endif
    if (s > 0) { /* the first layer needs no dx */
      TIME(vec_dense_dx_f32(A, W, D[0], O, I), t);
      printf("  %-24s %3zux%-4zu %10.1f %9.1f\n", "dx", O, I, t, fl / t);
      sum[3] += t;
      /* as the toy runs it: the layer below's tanh derivative and its bias lanes fused */
      TIME(vec_dense_dx_act_f32(A, W, D[0], O, I, SC_TANH, X[1], BL), t);
      printf("  %-24s %3zux%-4zu %10.1f %9.1f\n", "dx + tanh' + bias", O, I, t, fl / t);
    }
  }
  printf("  per tile: forward GEMMs %.0f ns, tanh passes %.0f ns, dW %.0f ns, dx %.0f ns;"
         " GEMMs %.0f ns in all\n",
         sum[0], sum[1], sum[2], sum[3], sum[0] + sum[2] + sum[3]);
  return 0;
}
