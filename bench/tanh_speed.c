/* bench/tanh_speed.c — ns per element of the float tanh: ours (v_tanh_q in simplechain.c's
 * vector kernels, all four variants: the divide and the reciprocal form of the expm1 tanh,
 * and of the opt-in rational tanh) against SLEEF's u35
 * and u10 tanhf, streaming over 4,096 floats in [-6.8, 6.8] (L1-resident), median of 7
 * runs of 100,000 passes; then the double tanh (ours, sc__tanh_f64, auto-vectorized) against
 * SLEEF's u10 and u35 tanh, 25,000 passes. Built twice: for AVX-512 (build/tanh_speed) and AVX2
 * (build/tanh_speed_avx2).
 *   make bench-tanh   (needs libsleef-dev; runs the AVX-512 build where the CPU has it)
 * The accuracy of each is measured by tests/test_math.c (test_tanh_ulp). */
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "tanh-bench"
#define SC__KT_EXPORT_F32 sc__kt_f32_tanh_bench
#define SC__KT_EXPORT_F64 sc__kt_f64_tanh_bench
#define SC__VEC_F32 1
#ifdef __AVX512F__
#define VOB 8
#define SC__OB 8
#else
#define VOB 6
#define SC__OB 4
#endif
#include "../simplechain.c"

#include <sleef.h>
#include <stdio.h>

#include "bench_time.h"

#define N 4096
#define PASSES 100000
static float xs[N] __attribute__((aligned(64))), ys[N] __attribute__((aligned(64)));
static double xd[N] __attribute__((aligned(64))), yd[N] __attribute__((aligned(64)));

#define BENCH(name, EXPR)                                                                          \
  do {                                                                                             \
    double t[7];                                                                                   \
    BENCH_7RUNS(                                                                                   \
        t, (double)N *PASSES, for (int it = 0; it < PASSES; it++) {                                \
          for (int i = 0; i < N; i += VW) {                                                        \
            sc_vf x = V_ROW(xs + i, 0);                                                            \
            V_ROWW(ys + i, 0) = (EXPR);                                                            \
          }                                                                                        \
          __asm__ volatile("" : : "r"(ys) : "memory");                                             \
        });                                                                                        \
    printf("  %-28s %8.4f ns/element (min %.4f, max %.4f)\n", name, t[3], t[0], t[6]);             \
  } while (0)

/* the double tanh: ns per element of a loop over N doubles (DW lanes per step of EXPR) */
#define BENCHD(name, DW, EXPR)                                                                     \
  do {                                                                                             \
    double t[7];                                                                                   \
    BENCH_7RUNS(                                                                                   \
        t, (double)N *PASSES / 4, for (int it = 0; it < PASSES / 4; it++) {                        \
          for (int i = 0; i < N; i += (DW)) EXPR;                                                  \
          __asm__ volatile("" : : "r"(yd) : "memory");                                             \
        });                                                                                        \
    printf("  %-28s %8.4f ns/element (min %.4f, max %.4f)\n", name, t[3], t[0], t[6]);             \
  } while (0)

int main(void) {
  char cpu[128];
  bench_cpu_name(cpu, sizeof cpu);
  printf("cpu: %s\n", cpu);
  for (int i = 0; i < N; i++) xs[i] = (float)(i - N / 2) / 300.0f;
#if VW == 16
  printf("float tanh, AVX-512, %d floats streamed %d times, median of 7\n", N, PASSES);
#else
  printf("float tanh, AVX2, %d floats streamed %d times, median of 7\n", N, PASSES);
#endif
  BENCH("ours, div (v_tanh_q)", v_tanh_q(x, SC__TANH_DIV));
  BENCH("ours, rcp (v_tanh_q)", v_tanh_q(x, SC__TANH_RCP));
  BENCH("ours, rat (opt-in, 6 ULP)", v_tanh_q(x, SC__TANH_RAT));
  BENCH("ours, ratrcp (opt-in, 6 ULP)", v_tanh_q(x, SC__TANH_RATRCP));
#if VW == 16
  BENCH("SLEEF Sleef_tanhf16_u35", (sc_vf)Sleef_tanhf16_u35avx512f((__m512)x));
  BENCH("SLEEF Sleef_tanhf16_u10", (sc_vf)Sleef_tanhf16_u10avx512f((__m512)x));
#else
  BENCH("SLEEF Sleef_tanhf8_u35", (sc_vf)Sleef_tanhf8_u35avx2((__m256)x));
  BENCH("SLEEF Sleef_tanhf8_u10", (sc_vf)Sleef_tanhf8_u10avx2((__m256)x));
#endif
  for (int i = 0; i < N; i++) xd[i] = (double)(i - N / 2) / 300.0;
  printf("double tanh, %d doubles streamed %d times, median of 7\n", N, PASSES / 4);
  BENCHD("ours (sc__tanh_f64, 1.5 ULP)", 1, yd[i] = sc__tanh_f64(xd[i]));
#if VW == 16
  BENCHD("SLEEF Sleef_tanhd8_u10", 8,
         _mm512_store_pd(yd + i, Sleef_tanhd8_u10avx512f(_mm512_load_pd(xd + i))));
  BENCHD("SLEEF Sleef_tanhd8_u35", 8,
         _mm512_store_pd(yd + i, Sleef_tanhd8_u35avx512f(_mm512_load_pd(xd + i))));
#else
  BENCHD("SLEEF Sleef_tanhd4_u10", 4,
         _mm256_store_pd(yd + i, Sleef_tanhd4_u10avx2(_mm256_load_pd(xd + i))));
  BENCHD("SLEEF Sleef_tanhd4_u35", 4,
         _mm256_store_pd(yd + i, Sleef_tanhd4_u35avx2(_mm256_load_pd(xd + i))));
#endif
  return 0;
}
