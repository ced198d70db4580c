/* kernels/sleef.h — SLEEF's vector exp, expm1, log and log1p for the ISA builds.
 *
 * Included by simplechain.c's typed section when an ISA file is compiled with
 * SC_HAVE_SLEEF (`make` defines it when libsleef-dev is installed). The activations
 * sigmoid, softplus and gelu (float and double), forward and pullback, and the logit
 * cross-entropy's softmax then run through SLEEF's 1-ULP (u10) functions, 4 to 16 lanes at a time,
 * instead of one libm call per element. The tanh is our own in float and in double (see
 * simplechain.c): the float one more accurate than SLEEF's u35 (1.5 against 2.49 ULP measured) and
 * faster, the double one 1.9x faster than SLEEF's u10 (bench/RESULTS.md). Every helper accepts y ==
 * x (in place). */
#ifndef SC_KERNELS_SLEEF_H
#define SC_KERNELS_SLEEF_H

#include <immintrin.h>
#include <math.h>
#include <sleef.h>

/* y[k] = fn(x[k]): W lanes at a time, libm for the tail. Kept out of GCC's interprocedural
 * analysis (noipa): with a tile row's constant n from its only caller, the tail loop drew a
 * false -Waggressive-loop-optimizations error */
#if defined(__GNUC__) && !defined(__clang__)
#define SC__SLEEF_ATTR __attribute__((noipa))
#else
#define SC__SLEEF_ATTR __attribute__((noinline))
#endif
#define SC__SLEEF_DEF(name, T, W, VT, load, store, fn, tail)                                       \
  static SC__SLEEF_ATTR void name(T *y, const T *x, size_t n) {                                    \
    size_t k = 0;                                                                                  \
    for (; k + W <= n; k += W) store(y + k, fn(load(x + k)));                                      \
    for (; k < n; k++) y[k] = tail(x[k]);                                                          \
  }

#if defined(__AVX512F__)
SC__SLEEF_DEF(sc__sleef_exp_f32, float, 16, __m512, _mm512_loadu_ps, _mm512_storeu_ps,
              Sleef_expf16_u10avx512f, expf)
SC__SLEEF_DEF(sc__sleef_log1p_f32, float, 16, __m512, _mm512_loadu_ps, _mm512_storeu_ps,
              Sleef_log1pf16_u10avx512f, log1pf)
SC__SLEEF_DEF(sc__sleef_expm1_f32, float, 16, __m512, _mm512_loadu_ps, _mm512_storeu_ps,
              Sleef_expm1f16_u10avx512f, expm1f)
SC__SLEEF_DEF(sc__sleef_log_f32, float, 16, __m512, _mm512_loadu_ps, _mm512_storeu_ps,
              Sleef_logf16_u10avx512f, logf)
SC__SLEEF_DEF(sc__sleef_exp_f64, double, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd,
              Sleef_expd8_u10avx512f, exp)
SC__SLEEF_DEF(sc__sleef_log1p_f64, double, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd,
              Sleef_log1pd8_u10avx512f, log1p)
SC__SLEEF_DEF(sc__sleef_expm1_f64, double, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd,
              Sleef_expm1d8_u10avx512f, expm1)
SC__SLEEF_DEF(sc__sleef_log_f64, double, 8, __m512d, _mm512_loadu_pd, _mm512_storeu_pd,
              Sleef_logd8_u10avx512f, log)
#elif defined(__AVX2__)
SC__SLEEF_DEF(sc__sleef_exp_f32, float, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
              Sleef_expf8_u10avx2, expf)
SC__SLEEF_DEF(sc__sleef_log1p_f32, float, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
              Sleef_log1pf8_u10avx2, log1pf)
SC__SLEEF_DEF(sc__sleef_expm1_f32, float, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
              Sleef_expm1f8_u10avx2, expm1f)
SC__SLEEF_DEF(sc__sleef_log_f32, float, 8, __m256, _mm256_loadu_ps, _mm256_storeu_ps,
              Sleef_logf8_u10avx2, logf)
SC__SLEEF_DEF(sc__sleef_exp_f64, double, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd,
              Sleef_expd4_u10avx2, exp)
SC__SLEEF_DEF(sc__sleef_log1p_f64, double, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd,
              Sleef_log1pd4_u10avx2, log1p)
SC__SLEEF_DEF(sc__sleef_expm1_f64, double, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd,
              Sleef_expm1d4_u10avx2, expm1)
SC__SLEEF_DEF(sc__sleef_log_f64, double, 4, __m256d, _mm256_loadu_pd, _mm256_storeu_pd,
              Sleef_logd4_u10avx2, log)
#else
#error "kernels/sleef.h needs AVX2 or AVX-512 flags"
#endif
#undef SC__SLEEF_DEF

/* the float tanh on one native vector (used only with SC_TANH_SLEEF) */
#if defined(__AVX512F__)
#define SC__SLEEF_TANHF(v) ((sc_vf)Sleef_tanhf16_u35avx512f((__m512)(v)))
#else
#define SC__SLEEF_TANHF(v) ((sc_vf)Sleef_tanhf8_u35avx2((__m256)(v)))
#endif

#endif
