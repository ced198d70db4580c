/* kernels/bf16/bf16.c — the bf16 precision's kernels on AVX512_BF16 (vdpbf16ps: pairs of bf16
 * products added to float lanes), for the GEMMs of src/precision.c's SC_BF16_KERNELS=native: the
 * register-blocked GEMM (with rows at offsets, with a forward's epilogue), the dot-product form, a
 * 5 x 5 conv's dW^T, dx as a correlation, and the passes around them (rounding, dz packed with
 * the activation's derivative or a max-pool's pullback, a conv's forward with a 2 x 2 max-pool
 * folded in, the weights' pairs). Each computes what src/bf16_model.c's model computes, bit for
 * bit (test_bf16). The engine calls them through a workspace's pointers, only where the CPU has
 * AVX512_BF16 (sc__cpu_bf16). */
#include "../../src/internal.h"

#ifdef SC__HAVE_BF16_NATIVE
#include "begin.h"

/* GCC at -O2 (the two drop-in files' `cc -O2`) leaves the register blocks' loops over their
 * accumulator arrays rolled, the accumulators on the stack: LeNet5's bf16 epoch (20,000 images,
 * 2 threads, Zen 5) took 0.57 s against the make build's 0.14 (conv2's forward at 84 GFLOP/s a
 * thread against 378). So these kernels are compiled at -O3 there too, as the portable kernels
 * are: 0.23 s, the trained parameters the same bits as at -O2 (and with clang).
 * SC_NO_O3_PRAGMA opts out. */
/* The AVX512_BF16 GEMM: blocks of up to 4 rows x 32 columns (8 accumulators), the 32-bit
 * pair of A broadcast, 16 pairs of B loaded per vector (masked at the column tail), one
 * vdpbf16ps per accumulator and k. The same sums in the same order as the model. With ep (a
 * forward's epilogue, sc__bf16_ep) each vector gets its bias, relu and rounding before its store:
 * LeNet5's conv1 forward 33.4 -> 30.0 ms over 20,000 images, 1 thread, Zen 4, medians of 5
 * (the two passes after the GEMM read and wrote its 442-KB output). The row loops are unrolled
 * (GCC unroll): with the epilogue in a loop that was not, GCC kept the accumulators on the stack
 * and the forward took twice as long. */
/* row r of the block's A and its place in C (the rows through arow / crow when given) */
#define SC__BF16_AROW(r) (A + (arow ? arow[m + (size_t)(r)] : m + (size_t)(r)) * lda)
#define SC__BF16_CROW(r) (C + (crow ? crow[m + (size_t)(r)] : m + (size_t)(r)) * ldc + n)
#define SC__BF16_ROWS(MB)                                                                          \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB];                                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cr) : _mm512_setzero_ps();                           \
      c1[r] = acc ? _mm512_maskz_loadu_ps(k1, cr + 16) : _mm512_setzero_ps();                      \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, bk);                                               \
      __m512i b1 = _mm512_maskz_loadu_epi32(k1, bk + 16);                                          \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_mask_storeu_ps(cr, k0, c0[r]);                                                        \
      _mm512_mask_storeu_ps(cr + 16, k1, c1[r]);                                                   \
    }                                                                                              \
  }
/* MB rows x 64 whole columns (4 accumulators a row): MB broadcasts and 4 loads feed 4 MB
 * products (2 MB with SC__BF16_ROWS); the same sums in the same order. (One macro for both,
 * over arrays of 2 or 4 accumulators and masks, made conv1's forward 29.0 -> 31-33 ms) */
#define SC__BF16_ROWS4(MB)                                                                         \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_loadu_ps(cr) : _mm512_setzero_ps();                                     \
      c1[r] = acc ? _mm512_loadu_ps(cr + 16) : _mm512_setzero_ps();                                \
      c2[r] = acc ? _mm512_loadu_ps(cr + 32) : _mm512_setzero_ps();                                \
      c3[r] = acc ? _mm512_loadu_ps(cr + 48) : _mm512_setzero_ps();                                \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_loadu_si512(bk), b1 = _mm512_loadu_si512(bk + 16);                       \
      __m512i b2 = _mm512_loadu_si512(bk + 32), b3 = _mm512_loadu_si512(bk + 48);                  \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
        c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)a);                                \
        c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
        c2[r] = sc__bf16_ep_v(c2[r], ep, m + (size_t)r);                                           \
        c3[r] = sc__bf16_ep_v(c3[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_storeu_ps(cr, c0[r]);                                                                 \
      _mm512_storeu_ps(cr + 16, c1[r]);                                                            \
      _mm512_storeu_ps(cr + 32, c2[r]);                                                            \
      _mm512_storeu_ps(cr + 48, c3[r]);                                                            \
    }                                                                                              \
  }
/* the same for a last block of at most 16 columns: one accumulator per row */
#define SC__BF16_ROWS_H(MB)                                                                        \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB];                                                                                 \
    const uint32_t *ar[MB];                                                                        \
    float *cp[MB];                                                                                 \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      cp[r] = SC__BF16_CROW(r);                                                                    \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cp[r]) : _mm512_setzero_ps();                        \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + (brow ? brow[k] : k) * ldb + n);               \
      for (int r = 0; r < MB; r++)                                                                 \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)_mm512_set1_epi32((int)ar[r][k])); \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++)                                           \
        _mm512_mask_storeu_ps(cp[r], k0, ep ? sc__bf16_ep_v(c0[r], ep, m + (size_t)r) : c0[r]);    \
  }
/* ROWS_H's block for A rows that come in runs of KW consecutive taps (a conv's dW^T, A's rows
 * the input's lane pairs at the taps, SC__TW / 2 pairs apart within a kernel row): 15 rows, 15 / KW
 * runs, each row's broadcast at a fixed distance from its run's start, so 15 accumulators need
 * 15 / KW pointers (ROWS_H's 8 rows take 8, and 16 such rows ran out of registers: 1.5x slower);
 * the same sums in the same order. Blocks whose rows are not such runs are left to ROWS_H. */
#define SC__BF16_RUNS_OK(KW)                                                                       \
  (arow && lda == SC__TW / 2 && m + 15 <= M && sc__bf16_runs(arow + m, KW, 15 / KW))
#define SC__BF16_ROWS_G(KW)                                                                        \
  for (; SC__BF16_RUNS_OK(KW); m += 15) {                                                          \
    enum { G_ = 15 / KW };                                                                         \
    __m512 c0[15];                                                                                 \
    const uint32_t *gp[G_];                                                                        \
    for (int g = 0; g < G_; g++) gp[g] = A + arow[m + (size_t)(g * KW)] * lda;                     \
    for (int r = 0; r < 15; r++)                                                                   \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, SC__BF16_CROW(r)) : _mm512_setzero_ps();             \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + k * ldb + n);                                  \
      for (int g = 0; g < G_; g++)                                                                 \
        for (int j = 0; j < KW; j++)                                                               \
          c0[g * KW + j] =                                                                         \
              _mm512_dpbf16_ps(c0[g * KW + j], (__m512bh)b0,                                       \
                               (__m512bh)_mm512_set1_epi32((int)gp[g][j * (SC__TW / 2) + k]));     \
    }                                                                                              \
    _Pragma("GCC unroll 15") for (int r = 0; r < 15; r++)                                          \
        _mm512_mask_storeu_ps(SC__BF16_CROW(r), k0, c0[r]);                                        \
  }
/* whether rows[g KW + j] = rows[g KW] + j for all g < G, j < KW */
static inline int sc__bf16_runs(const size_t *rows, size_t KW, size_t G) {
  for (size_t g = 0; g < G; g++)
    for (size_t j = 1; j < KW; j++)
      if (rows[g * KW + j] != rows[g * KW] + j) return 0;
  return 1;
}
/* sc__bf16_ep's work on a vector of row m's C: the add, max and VCVTNEPS2BF16 of the passes */
__attribute__((always_inline)) static inline __m512 sc__bf16_ep_v(__m512 v, const sc__bf16_ep *ep,
                                                                  size_t m) {
  v = _mm512_add_ps(v, _mm512_set1_ps(ep->bias ? ep->bias[m] : 0.0f));
  if (ep->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  if (ep->round)
    v = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
  return v;
}
/* sc__bf16_gemm_native_blk on N / 64 blocks of 64 whole columns: rows by 6 with 4 accumulators
 * each, then by 4 with 4 (LeNet5's conv2, 16 outputs: 6 + 6 + 4; its forward 48.3-49.0 ->
 * 44.4-44.7 ms per epoch-thread, Zen 5, against the last 4 by 4 with 2, twice), the last rows
 * (M % 6) by 4 and 1 with 2, twice; the same sums in the same order. Used
 * for the convs' forwards (with ep): LeNet5's conv1 (6 outputs, 13 pairs of taps, 320-column
 * chunks) spent as many loads (6 broadcasts, 2 of B) as products (12) a pair with 6 x 2
 * blocks; with 6 x 4 (10 loads, 24 products) its forward took 29.3 ms instead of 31.5 over
 * 20,000 images (1 thread, Zen 4, median of 3 alternating runs; conv2's 31.3 -> 30.9). Not for
 * the dense dW (acc, N = 256): its backward took 6 % longer */
__attribute__((always_inline)) static inline void
sc__bf16_gemm_native_blk64(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                           size_t ldb, size_t M, size_t N, size_t K2, int acc, const size_t *arow,
                           const size_t *crow, const size_t *brow, const sc__bf16_ep *ep) {
  const __mmask16 k0 = 0xFFFFu, k1 = 0xFFFFu;
  for (size_t n0 = 0; n0 + 64 <= N; n0 += 64) {
    size_t n = n0, m = 0;
    SC__BF16_ROWS4(6)
    SC__BF16_ROWS4(4)
    size_t m6 = m;
    for (; n < n0 + 64; n += 32) {
      m = m6;
      SC__BF16_ROWS(4)
      SC__BF16_ROWS(1)
    }
  }
}
static void sc__bf16_gemm_native_blk(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     int acc, const size_t *arow, const size_t *crow,
                                     const size_t *brow, const sc__bf16_ep *ep) {
  size_t n = 0;
  if (ep && N >= 64 && M >= 6) { /* a conv's forward: rows by 6, 64 columns at a time */
    sc__bf16_gemm_native_blk64(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, ep);
    n = N / 64 * 64;
  }
  for (; n < N; n += 32) {
    size_t w = N - n < 32 ? N - n : 32;
    __mmask16 k0 = (__mmask16)(w >= 16 ? 0xFFFFu : (1u << w) - 1u);
    __mmask16 k1 = (__mmask16)(w >= 32 ? 0xFFFFu : w > 16 ? (1u << (w - 16)) - 1u : 0u);
    size_t m = 0;
    if (w <= 16) {
      if (!ep && !brow) {
        SC__BF16_ROWS_G(5)
        SC__BF16_ROWS_G(3)
      }
      SC__BF16_ROWS_H(8)
      SC__BF16_ROWS_H(4)
      SC__BF16_ROWS_H(1)
      continue;
    }
    SC__BF16_ROWS(8)
    SC__BF16_ROWS(6)
    SC__BF16_ROWS(4)
    SC__BF16_ROWS(1)
  }
}
#undef SC__BF16_ROWS
#undef SC__BF16_AROW
#undef SC__BF16_CROW
#undef SC__BF16_ROWS4
#undef SC__BF16_ROWS_H
#undef SC__BF16_ROWS_G
#undef SC__BF16_RUNS_OK
/* sc__bf16_fold16 on a vector, the same adds in the same order */
static inline float sc__bf16_fold16_v(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
/* sc__bf16_nt_fn: blocks of MB rows x NB columns, one accumulator each */
#define SC__BF16_NT(MB, NB)                                                                        \
  for (; n + NB <= N; n += NB) {                                                                   \
    __m512 c[MB][NB];                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++) c[i][j] = _mm512_setzero_ps();                                  \
    for (size_t s = 0; s < S; s++) {                                                               \
      const uint32_t *bp[NB], *ap = A + m * lda + s * sa;                                          \
      for (int j = 0; j < NB; j++) bp[j] = B + boff[n + (size_t)j] * bsc + s * sb;                 \
      for (size_t k = 0; k < K2; k += 16) {                                                        \
        __m512i b[NB];                                                                             \
        for (int j = 0; j < NB; j++) b[j] = _mm512_loadu_si512(bp[j] + k);                         \
        for (int i = 0; i < MB; i++) {                                                             \
          __m512i a = _mm512_loadu_si512(ap + (size_t)i * lda + k);                                \
          for (int j = 0; j < NB; j++)                                                             \
            c[i][j] = _mm512_dpbf16_ps(c[i][j], (__m512bh)a, (__m512bh)b[j]);                      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++)                                                                 \
        C[(m + (size_t)i) * ldc + n + (size_t)j] += sc__bf16_fold16_v(c[i][j]);                    \
  }
SC__INT void sc__bf16_nt_native(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                                const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                                size_t M, size_t N, size_t K2, size_t S) {
  size_t m = 0;
  for (; m + 6 <= M; m += 6) {
    size_t n = 0;
    SC__BF16_NT(6, 4)
    SC__BF16_NT(6, 1)
  }
  for (; m + 2 <= M; m += 2) {
    size_t n = 0;
    SC__BF16_NT(2, 4)
    SC__BF16_NT(2, 1)
  }
  for (; m < M; m++) {
    size_t n = 0;
    SC__BF16_NT(1, 4)
    SC__BF16_NT(1, 1)
  }
}
#undef SC__BF16_NT
/* dW^T (R x K floats, ldc K; R = ic 5 5 taps in roff's order, K <= 16 channels) of a conv with
 * a 5 x 5 kernel, row stride 1 and at least 4 output rows, from the input tile's lane pairs xp
 * (ic x hp x wp positions of SC__TW / 2 pairs; hp = oh + 4) and dz's lane pairs transposed over
 * the whole tile (dzt: oh ow SC__TW / 2 rows of K): the sums of sc__bf16_gemm_native_rows called
 * row by row (dwt[r] += over the output rows u in order, over each row's lane pairs k in
 * order), in the same order: the same bits. Per input row y and lane pair k, the broadcasts of
 * its 5 taps' pairs (j) each feed the tap rows i whose output row y - i exists, from one load
 * of dz per such row (inside: 10 loads for 25 vdpbf16ps, the 25 accumulators held over the
 * whole tile) instead of one load of dz and 15 broadcasts for 15 (SC__BF16_ROWS_G, load-bound:
 * 81 % of twice the FMA peak). LeNet5's conv2 (Zen 5, 1 thread, --profile): its pullback 92-94 ->
 * 89.5 ms an epoch. */
#define SC__BF16_DWT5_K(I0, I1)                                                                    \
  for (size_t k = 0; k < RW2; k++) {                                                               \
    __m512i b[5];                                                                                  \
    _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) b[i] =                                  \
        _mm512_maskz_loadu_epi32(km, dzt + ((y - (size_t)i) * RW2 + k) * K);                       \
    _Pragma("GCC unroll 5") for (int j = 0; j < 5; j++) {                                          \
      __m512i a = _mm512_set1_epi32((int)xr[k + 16 * (size_t)j]);                                  \
      _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) acc[i][j] =                           \
          _mm512_dpbf16_ps(acc[i][j], (__m512bh)b[i], (__m512bh)a);                                \
    }                                                                                              \
  }                                                                                                \
  break;
SC__INT void sc__bf16_dwt5_native(float *restrict dwt, const uint32_t *restrict xp,
                                  const uint32_t *restrict dzt, size_t K, size_t ic, size_t hp,
                                  size_t wp, size_t oh, size_t ow) {
  const __mmask16 km = (__mmask16)(K >= 16 ? 0xFFFFu : (1u << K) - 1u);
  size_t RW2 = ow * (SC__TW / 2);
  for (size_t ci = 0; ci < ic; ci++) {
    __m512 acc[5][5];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++) acc[i][j] = _mm512_setzero_ps();
    for (size_t y = 0; y < oh + 4; y++) {
      const uint32_t *xr = xp + (ci * hp + y) * wp * (SC__TW / 2);
      int i0 = y >= oh ? (int)(y - oh + 1) : 0, i1 = y < 4 ? (int)y : 4;
      switch (i0 * 8 + i1) { /* the tap rows i whose output row y - i exists */
      case 4: SC__BF16_DWT5_K(0, 4)
      case 0: SC__BF16_DWT5_K(0, 0)
      case 1: SC__BF16_DWT5_K(0, 1)
      case 2: SC__BF16_DWT5_K(0, 2)
      case 3: SC__BF16_DWT5_K(0, 3)
      case 12: SC__BF16_DWT5_K(1, 4)
      case 20: SC__BF16_DWT5_K(2, 4)
      case 28: SC__BF16_DWT5_K(3, 4)
      case 36: SC__BF16_DWT5_K(4, 4)
      default: break; /* (oh < 4 only; not called there) */
      }
    }
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        _mm512_mask_storeu_ps(dwt + ((ci * 5 + (size_t)i) * 5 + (size_t)j) * K, km, acc[i][j]);
  }
}
#undef SC__BF16_DWT5_K
/* sc__bf16_dx_corr_model on AVX512_BF16: blocks of MB channels x one position (its 32 lanes),
 * 2 MB accumulators, then one store; where a row's positions x and x + 1 both take every tap
 * of the kernel's row (kw - 1 <= x <= ow - 2) and MB >= 4, both at once (4 MB accumulators, the
 * broadcasts shared; the 12 of MB = 6 were latency-bound): LeNet5's conv2 pullback 98.9-99.2 ->
 * 96.2-98.1 ms per epoch-thread (bf16, 2 threads, Zen 5). The same sums in the same order */
#define SC__BF16_DXC(MB)                                                                           \
  for (; c + MB <= C; c += MB)                                                                     \
    for (size_t y = 0; y < hp; y++) {                                                              \
      size_t i0 = y >= oh ? y - oh + 1 : 0, i1 = y < kh ? y + 1 : kh;                              \
      for (size_t x = 0; x < wp; x++) {                                                            \
        size_t j0 = x >= ow ? x - ow + 1 : 0, j1 = x < kw ? x + 1 : kw;                            \
        if (MB >= 4 && x + 1 >= kw && x + 2 <= ow) { /* x and x + 1: every tap of the row */       \
          __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                   \
          for (int r = 0; r < MB; r++) c0[r] = c1[r] = c2[r] = c3[r] = _mm512_setzero_ps();        \
          for (size_t i = i0; i < i1; i++)                                                         \
            for (size_t j = 0; j < kw; j++) {                                                      \
              const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                           \
              const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                               \
              for (size_t op = 0; op < K2; op++) {                                                 \
                __m512i b0 = _mm512_loadu_si512(b + op * ps);                                      \
                __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                 \
                __m512i b2 = _mm512_loadu_si512(b + op * ps + SC__TW);                             \
                __m512i b3 = _mm512_loadu_si512(b + op * ps + SC__TW + 16);                        \
                for (int r = 0; r < MB; r++) {                                                     \
                  __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                     \
                  c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                     \
                  c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                     \
                  c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)av);                     \
                  c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)av);                     \
                }                                                                                  \
              }                                                                                    \
            }                                                                                      \
          _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                   \
            float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                        \
            _mm512_storeu_ps(d, c0[r]);                                                            \
            _mm512_storeu_ps(d + 16, c1[r]);                                                       \
            _mm512_storeu_ps(d + SC__TW, c2[r]);                                                   \
            _mm512_storeu_ps(d + SC__TW + 16, c3[r]);                                              \
          }                                                                                        \
          x++;                                                                                     \
          continue;                                                                                \
        }                                                                                          \
        __m512 c0[MB], c1[MB];                                                                     \
        for (int r = 0; r < MB; r++) c0[r] = c1[r] = _mm512_setzero_ps();                          \
        for (size_t i = i0; i < i1; i++)                                                           \
          for (size_t j = j0; j < j1; j++) {                                                       \
            const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                             \
            const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                                 \
            for (size_t op = 0; op < K2; op++) {                                                   \
              __m512i b0 = _mm512_loadu_si512(b + op * ps);                                        \
              __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                   \
              for (int r = 0; r < MB; r++) {                                                       \
                __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                       \
                c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                       \
                c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                       \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                     \
          float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                          \
          _mm512_storeu_ps(d, c0[r]);                                                              \
          _mm512_storeu_ps(d + 16, c1[r]);                                                         \
        }                                                                                          \
      }                                                                                            \
    }
SC__INT void sc__bf16_dx_corr_native(float *restrict xg, const uint32_t *restrict wt,
                                     const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh,
                                     size_t kw, size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, ps = oh * ow * SC__TW, as = kh * kw * K2, c = 0;
  SC__BF16_DXC(6)
  SC__BF16_DXC(4)
  SC__BF16_DXC(2)
  SC__BF16_DXC(1)
}
#undef SC__BF16_DXC
SC__INT void sc__bf16_gemm_native_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                       const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                       int acc, const size_t *arow, const size_t *crow, size_t grp,
                                       const size_t *brow) {
  if (!crow || grp == 0 || grp >= M) {
    sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, NULL);
    return;
  }
  for (size_t g0 = 0; g0 < M; g0 += grp) /* the groups one after the other (the model's order) */
    sc__bf16_gemm_native_blk(C, ldc, arow ? A : A + g0 * lda, lda, B, ldb,
                             M - g0 < grp ? M - g0 : grp, N, K2, acc, arow ? arow + g0 : NULL,
                             crow + g0, brow, NULL);
}
SC__INT void sc__bf16_gemm_native(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                  const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                  int acc) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, NULL, NULL);
}
SC__INT void sc__bf16_gemm_native_ep(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     const size_t *brow, const sc__bf16_ep *ep) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, 0, NULL, NULL, brow, ep);
}
/* x[k] = x[k] rounded to bf16 (kept as a float) by VCVTNEPS2BF16: the bits of sc__bf16_rne
 * (checked on all 2^32 inputs on an AMD Zen 4: denormals to zeros of their sign, a NaN kept
 * quiet), 16 at a time, the tail masked. The SC_PRECISION_BF16 kernels' rounding where the
 * CPU has the instruction (ws->bf_round) */
SC__INT void sc__bf16_round_native(float *restrict x, size_t n) {
  for (size_t k = 0; k < n; k += 16) {
    __mmask16 m = (__mmask16)(n - k >= 16 ? 0xFFFFu : (1u << (n - k)) - 1u);
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k));
    _mm512_mask_storeu_epi32(x + k, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
/* the dz of a conv layer with few channels and no dx (the dot-product form's dW only): relu's
 * (or the identity's) pullback of d (K channels of npos positions of SC__TW lanes; relu: 0 where
 * a <= 0), its bias lanes summed into bl (K rows of SC__TW; NULL: no bias) and its lane pairs,
 * rounded by VCVTNEPS2BF16, in dzp (K rows of npos SC__TW / 2 pairs): in one pass the bits of
 * sc__act_bwd_lane, the rounding and pack_lanes, which each went over LeNet5's 442-KB conv1
 * gradient (d itself is left as it was: nothing reads it after). LeNet5's conv1 backward over
 * 20,000 images, 1 thread, Zen 4: 32.5 -> 25.4 ms */
SC__INT void sc__bf16_dz_lanes_native(uint32_t *restrict dzp, const float *restrict d,
                                      float *restrict bl, const float *restrict a, size_t K,
                                      size_t npos, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (size_t k = 0; k < K; k++) {
    const float *dk = d + k * npos * SC__TW, *ak = a + k * npos * SC__TW;
    uint32_t *zk = dzp + k * npos * (SC__TW / 2);
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t q = 0; q < npos; q++)
      for (int h = 0; h < SC__TW / 16; h++) {
        size_t e = q * SC__TW + 16 * (size_t)h;
        __m512 v = _mm512_loadu_ps(dk + e);
        if (relu)
          v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(_mm512_loadu_ps(ak + e), zero, _CMP_LE_OQ), v,
                                   zero);
        s[h] = _mm512_add_ps(s[h], v);
        _mm256_storeu_si256((__m256i *)(void *)(zk + e / 2), (__m256i)_mm512_cvtneps_pbh(v));
      }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* a 2 x 2 max-pool's pullback (sc__bf16_dz_pool_native, sc__bf16_dz_pool_hits_native), the end of
 * a step: v0, v1 the dz of a window row's two positions (y, 2 wc), (y, 2 wc + 1), lanes 16 h on;
 * added to the bias lanes' sum s, rounded, stored as floats (dzf) or as lane pairs (zk) */
__attribute__((always_inline)) static inline void
sc__bf16_dz_pool_put(__m512 v0, __m512 v1, __m512 *s, float *restrict dzf, uint32_t *restrict zk,
                     size_t k, size_t npos, size_t y, size_t OW, size_t wc, int h) {
  *s = _mm512_add_ps(_mm512_add_ps(*s, v0), v1);
  __m256i r0 = (__m256i)_mm512_cvtneps_pbh(v0), r1 = (__m256i)_mm512_cvtneps_pbh(v1);
  if (dzf) {
    float *fq = dzf + k * npos * SC__TW + (y * OW + 2 * wc) * SC__TW + 16 * (size_t)h;
    _mm512_storeu_si512(fq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r0), 16));
    _mm512_storeu_si512(fq + SC__TW, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r1), 16));
    return;
  }
  uint32_t *zq = zk + (y * OW + 2 * wc) * (SC__TW / 2) + 8 * (size_t)h;
  _mm256_storeu_si256((__m256i *)(void *)zq, r0);
  _mm256_storeu_si256((__m256i *)(void *)(zq + SC__TW / 2), r1);
}
/* the same with a 2 x 2 max-pooling layer above the conv folded in: g is the pool's dz (K
 * channels of OH / 2 x OW / 2 windows of SC__TW lanes), pa its output, x its input (the conv's
 * output, K x OH x OW positions, OH and OW even); the pool's pullback gives a position its
 * window's dz where x there is the window's first value equal to pa (in row-major order within
 * the window; NaN equals nothing) and 0 elsewhere, then as sc__bf16_dz_lanes_native:
 * vec_pool_bwd's bits without writing its dx (442 KB a tile in LeNet5). With dzf (dzp NULL) the
 * rounded dz goes there as floats instead (K x OH x OW positions of SC__TW lanes), for a conv
 * whose pullback packs it otherwise (LeNet5's conv2: dx and dW by rows) */
SC__INT void sc__bf16_dz_pool_native(uint32_t *restrict dzp, float *restrict dzf,
                                     const float *restrict g, const float *restrict pa,
                                     const float *restrict x, float *restrict bl, size_t K,
                                     size_t OH, size_t OW, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, npos = OH * OW, RS = OW * SC__TW;
  for (size_t k = 0; k < K; k++) {
    const float *xk = x + k * npos * SC__TW, *gk = g + k * (npos / 4) * SC__TW;
    const float *ak = pa + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      const float *top = xk + (y & ~(size_t)1) * RS; /* the windows' first row */
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          size_t e0 = 2 * wc * SC__TW + 16 * (size_t)h; /* the window's left column */
          __m512 av = _mm512_loadu_ps(ak + ew), dv = _mm512_loadu_ps(gk + ew);
          __mmask16 t0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0), av, _CMP_EQ_OQ);
          __mmask16 t1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0 + SC__TW), av, _CMP_EQ_OQ);
          const float *r = xk + y * RS + e0;
          __m512 x0 = _mm512_loadu_ps(r), x1 = _mm512_loadu_ps(r + SC__TW);
          __mmask16 h0, h1; /* the hits of this row's two positions */
          if (y % 2 == 0) {
            h0 = t0;
            h1 = t1 & (__mmask16)~t0;
          } else {
            __mmask16 taken = t0 | t1;
            __mmask16 b0 = _mm512_cmp_ps_mask(x0, av, _CMP_EQ_OQ);
            h0 = b0 & (__mmask16)~taken;
            h1 = _mm512_cmp_ps_mask(x1, av, _CMP_EQ_OQ) & (__mmask16) ~(taken | b0);
          }
          __m512 v0 = _mm512_maskz_mov_ps(h0, dv), v1 = _mm512_maskz_mov_ps(h1, dv);
          if (relu) {
            v0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x0, zero, _CMP_LE_OQ), v0, zero);
            v1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x1, zero, _CMP_LE_OQ), v1, zero);
          }
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* A conv's forward with the 2 x 2 max-pooling layer above it folded in (bf_on's forward, its
 * epilogue, then this on each pair of output rows, which the GEMM left in a 2-row scratch s2: K
 * channels x 2 rows x 2 PW positions of SC__TW lanes): the windows [w0, w1) of pooled row q of
 * pa (K x PH x PW) as vec_pool_fwd computes them (m = x0, then m = x > m ? x : m over the window
 * in row-major order; VMAXPS(x, m) is that select), and the window's hits: per window and lane
 * a byte (SC__POOL_HITS: 16 bytes per 16 lanes), the window's position (0-3, row-major) whose
 * value is the first equal to the maximum (NaN equals nothing), 4 where none is or where, with
 * relu, the maximum is <= 0 (its relu pullback is 0). The conv's output is then never stored
 * whole (442 KB a tile in LeNet5), the pool's forward pass is skipped and its pullback reads the
 * hits (sc__bf16_dz_pool_hits_native): the same bits. The hits are made by masked moves in
 * vector registers (before 0d10ef4 four 16-bit masks per window, made in general registers);
 * with relu since 9eb1bcd in 16-bit lanes, a window's 32 lanes at once
 * (sc__bf16_pool_hits32: LeNet5 bf16's conv1 forward 37.4 -> 33.5 ms an epoch, conv2's 38.8 ->
 * 37.7, Zen 5, 1 thread, 2 alternating pairs; the same bits).
 * With relu the GEMM's epilogue adds the bias alone (sc__bf16_ep's relu and round 0: s2 holds
 * the sums plus the bias) and this relu's and rounds the window's maximum M only: r =
 * round(relu(M)), both non-decreasing, so r is the maximum of the relu'd rounded values (and its
 * bits: no sum is -0, a sum starting from +0); position j is then a hit where x_j >= lo, the least
 * float rounding to r (r's bits - 0x8000, + 1 where r's last bf16 bit is odd: ties to even; at
 * least FLT_MIN, VCVTNEPS2BF16 taking denormals to 0; a NaN where r is one, which no compare
 * passes), which are the positions whose rounded value equals r: the same hits. Both changes
 * (Zen 5, 2026-11-28, 1 thread, Fashion-MNIST): LeNet5 bf16's conv1 forward 45.7 -> 39.3 ms an
 * epoch, conv2's 43.0 -> 40.7; one tile of conv1 alone, operands hot: 18.9 -> 16.0 us. */
#define SC__POOL_HITS(k, PH, q, PW, wc, h) /* the window's 16 lanes' bytes */                      \
  (((((k) * (PH) + (q)) * (PW) + (wc)) * (SC__TW / 16) + (size_t)(h)) * 16)
/* one window's 16 lanes (h) of sc__bf16_pool_hits_native in float lanes */
__attribute__((always_inline)) static inline void
sc__bf16_pool_hits16(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW, size_t wc,
                     int h, int relu) {
  const __m512 zero = _mm512_setzero_ps(), fmin = _mm512_set1_ps(FLT_MIN);
  const __m512i half = _mm512_set1_epi32(0x8000), one = _mm512_set1_epi32(1);
  const __m512i none = _mm512_set1_epi32(4), p3 = _mm512_set1_epi32(3);
  const __m512i p2 = _mm512_set1_epi32(2), p0 = _mm512_setzero_si512();
  size_t e = 2 * wc * SC__TW + 16 * (size_t)h;
  __m512 x0 = _mm512_loadu_ps(r0 + e), x1 = _mm512_loadu_ps(r0 + e + SC__TW);
  __m512 x2 = _mm512_loadu_ps(r1 + e), x3 = _mm512_loadu_ps(r1 + e + SC__TW);
  __m512 m = _mm512_max_ps(x3, _mm512_max_ps(x2, _mm512_max_ps(x1, x0)));
  __mmask16 t0, t1, t2, t3; /* the positions equal to the maximum (rounded) */
  if (relu) {
    __m512i rb = _mm512_slli_epi32(
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_max_ps(zero, m))), 16);
    m = _mm512_castsi512_ps(rb);
    __m512i lb =
        _mm512_ternarylogic_epi32(_mm512_sub_epi32(rb, half), _mm512_srli_epi32(rb, 16), one, 0xF8);
    __m512 lo = _mm512_max_ps(fmin, _mm512_castsi512_ps(lb)); /* lb: (rb - half) | odd */
    __mmask16 live = _mm512_cmp_ps_mask(m, zero, _CMP_NLE_UQ);
    t0 = _mm512_mask_cmp_ps_mask(live, x0, lo, _CMP_GE_OQ);
    t1 = _mm512_mask_cmp_ps_mask(live, x1, lo, _CMP_GE_OQ);
    t2 = _mm512_mask_cmp_ps_mask(live, x2, lo, _CMP_GE_OQ);
    t3 = _mm512_mask_cmp_ps_mask(live, x3, lo, _CMP_GE_OQ);
  } else {
    t0 = _mm512_cmp_ps_mask(x0, m, _CMP_EQ_OQ), t1 = _mm512_cmp_ps_mask(x1, m, _CMP_EQ_OQ);
    t2 = _mm512_cmp_ps_mask(x2, m, _CMP_EQ_OQ), t3 = _mm512_cmp_ps_mask(x3, m, _CMP_EQ_OQ);
  }
  __m512i ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(none, t3, p3), t2, p2);
  ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(ix, t1, one), t0, p0);
  _mm512_storeu_ps(pa + ((k * PH + q) * PW + wc) * SC__TW + 16 * (size_t)h, m);
  _mm_storeu_si128((__m128i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, h)),
                   _mm512_cvtepi32_epi8(ix));
}
/* with relu, a window's 32 lanes at once in 16-bit lanes: each position's sums rounded
 * (VCVTNE2PS2BF16), r = the signed 16-bit maximum of the four and 0 (a bf16 value >= 0 orders as
 * its bits, a negative one below every such: the max is round(relu(max)), rounding being
 * non-decreasing), the hits the first position whose rounded sum equals r where r > 0; the
 * same bits as sc__bf16_pool_hits16 (the rounded values equal to r are those >= its least
 * float). A NaN sum (a positive NaN anywhere makes r one, a negative one counts at position 0)
 * takes that window to the float lanes, whose compares give vec_pool_fwd's result */
__attribute__((always_inline)) static inline void
sc__bf16_pool_hits32(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW,
                     size_t wc) {
  const __m512i z = _mm512_setzero_si512(), none = _mm512_set1_epi16(4);
  size_t e = 2 * wc * SC__TW;
  const float *s[4] = {r0 + e, r0 + e + SC__TW, r1 + e, r1 + e + SC__TW};
  __m512i R[4];
  for (int j = 0; j < 4; j++)
    R[j] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s[j] + 16), _mm512_loadu_ps(s[j]));
  __m512i r = _mm512_max_epi16(_mm512_max_epi16(R[0], R[1]), _mm512_max_epi16(R[2], R[3]));
  r = _mm512_max_epi16(r, z);
  if (_mm512_cmpgt_epi16_mask(r, _mm512_set1_epi16(0x7f80)) |
      _mm512_cmpgt_epu16_mask(R[0], _mm512_set1_epi16((short)0xff80))) {
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 0, 1);
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 1, 1);
    return;
  }
  __mmask32 live = _mm512_cmpgt_epi16_mask(r, z);
  __m512i ix = _mm512_mask_mov_epi16(none, _mm512_mask_cmpeq_epi16_mask(live, R[3], r),
                                     _mm512_set1_epi16(3));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[2], r), _mm512_set1_epi16(2));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[1], r), _mm512_set1_epi16(1));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[0], r), z);
  float *pq = pa + ((k * PH + q) * PW + wc) * SC__TW;
  _mm512_storeu_si512(pq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(r)), 16));
  _mm512_storeu_si512(
      pq + 16, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1)), 16));
  _mm256_storeu_si256((__m256i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, 0)),
                      _mm512_cvtepi16_epi8(ix));
}
__attribute__((always_inline)) static inline void
sc__bf16_pool_hits_body(float *restrict pa, uint8_t *restrict hits, const float *restrict s2,
                        size_t K, size_t q, size_t PH, size_t PW, size_t w0, size_t w1, int relu) {
  size_t RS = 2 * PW * SC__TW; /* a row of s2 */
  for (size_t k = 0; k < K; k++) {
    const float *r0 = s2 + k * 2 * RS, *r1 = r0 + RS;
    for (size_t wc = w0; wc < w1; wc++) {
      if (relu && SC__TW == 32) {
        sc__bf16_pool_hits32(pa, hits, r0, r1, k, q, PH, PW, wc);
        continue;
      }
      for (int h = 0; h < SC__TW / 16; h++)
        sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, h, relu);
    }
  }
}
/* s2 as the GEMM left it: with relu its sums plus the bias, else rounded (the whole epilogue) */
SC__INT void sc__bf16_pool_hits_native(float *restrict pa, uint8_t *restrict hits,
                                       const float *restrict s2, size_t K, size_t q, size_t PH,
                                       size_t PW, size_t w0, size_t w1, int relu) {
  if (relu)
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 1);
  else
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 0);
}
/* sc__bf16_dz_pool_native's pullback with the window's hits read from the bytes of
 * sc__bf16_pool_hits_native (relu folded in there): the same adds in the same order, so the same
 * bits, without reading the conv's output and the pool's */
SC__INT void sc__bf16_dz_pool_hits_native(uint32_t *restrict dzp, float *restrict dzf,
                                          const float *restrict g, const uint8_t *restrict hits,
                                          float *restrict bl, size_t K, size_t OH, size_t OW) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, PH = OH / 2, npos = OH * OW;
  for (size_t k = 0; k < K; k++) {
    const float *gk = g + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      __m512i j0 = _mm512_set1_epi32(y % 2 ? 2 : 0), j1 = _mm512_set1_epi32(y % 2 ? 3 : 1);
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          __m512i ix = _mm512_cvtepu8_epi32(_mm_loadu_si128(
              (const __m128i *)(const void *)(hits + SC__POOL_HITS(k, PH, y / 2, PW, wc, h))));
          __m512 dv = _mm512_loadu_ps(gk + ew);
          __m512 v0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j0), dv);
          __m512 v1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j1), dv);
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* W's 16 (lm) floats at a and at b (NULL: zeros) as pairs (a[k], b[k]): their upper halves, or
 * with rnd the floats rounded first (VCVTNEPS2BF16, the bits of sc__bf16_round_native) */
__attribute__((always_inline)) static inline __m512i
sc__bf16_wd_pairs(const float *a, const float *b, __mmask16 lm, int rnd) {
  if (rnd) {
    __m512i x = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, a)));
    if (!b) return x;
    __m512i y = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, b)));
    return _mm512_or_si512(x, _mm512_slli_epi32(y, 16));
  }
  __m512i x = _mm512_srli_epi32(_mm512_maskz_loadu_epi32(lm, a), 16);
  if (!b) return x;
  __m512i y = _mm512_maskz_loadu_epi32(lm, b);
  return _mm512_or_si512(x, _mm512_and_si512(y, _mm512_set1_epi32((int)0xffff0000u)));
}
/* a dense layer's rows [o0, o1) of W (O x I floats, not rounded) as the forward's pairs along
 * the inputs, wf[o][k] = (W[o][2k], W[o][2k + 1]) rounded (VCVTNEPS2BF16; an odd I's last pair
 * with 0): the bits of rounding W and pairing its upper halves (sc__bf16_params_rows) */
SC__INT void sc__bf16_wf_native(uint32_t *restrict wf, const float *restrict W, size_t I, size_t o0,
                                size_t o1) {
  size_t I2 = (I + 1) / 2;
  for (size_t o = o0; o < o1; o++)
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, W + o * I + i));
      _mm256_mask_storeu_epi32(wf + o * I2 + i / 2, (__mmask8)((1u << ((ib + 1) / 2)) - 1u), v);
    }
}
/* wd[i][m] = (W[2m][i], W[2m + 1][i]) for the pairs m in [m0, m1) and every input i < I: the
 * transposed pairs of sc__bf16_params_rows, W holding bf16 values (the upper halves of their
 * bits taken as they are; a missing odd row 2m + 1 = O gives 0), or with rnd any floats, rounded
 * as they are loaded. Blocks of 8 pairs (16 rows) x 16 inputs: 8 vectors of pairs along i,
 * transposed in registers into 16 rows of 8 pairs. The same bits as the scalar loop, which took 5
 * of the 10 ms that LeNet5's bf16 weights cost over 20,000 images (1 thread, Zen 4) */
SC__INT void sc__bf16_wd_native(uint32_t *restrict wd, const float *restrict W, size_t O, size_t I,
                                size_t O2, size_t m0, size_t m1, int rnd) {
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (size_t m = m0; m < m1; m += 8) {
    size_t mb = m1 - m < 8 ? m1 - m : 8;
    __mmask8 sm = (__mmask8)((1u << mb) - 1u);
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m512i P[8];
      for (size_t j = 0; j < 8; j++) {
        size_t r = 2 * (m + j);
        if (j >= mb) {
          P[j] = _mm512_setzero_si512();
          continue;
        }
        P[j] =
            rnd ? sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 1)
                : sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 0);
      }
      /* 128-bit lane L of U[a] holds P0..3 at input 4L + a, of V[a] P4..7 */
      __m512i T[8], U[4], V[4];
      for (int q = 0; q < 4; q++) {
        T[2 * q] = _mm512_unpacklo_epi32(P[2 * q], P[2 * q + 1]);
        T[2 * q + 1] = _mm512_unpackhi_epi32(P[2 * q], P[2 * q + 1]);
      }
      U[0] = _mm512_unpacklo_epi64(T[0], T[2]);
      U[1] = _mm512_unpackhi_epi64(T[0], T[2]);
      U[2] = _mm512_unpacklo_epi64(T[1], T[3]);
      U[3] = _mm512_unpackhi_epi64(T[1], T[3]);
      V[0] = _mm512_unpacklo_epi64(T[4], T[6]);
      V[1] = _mm512_unpackhi_epi64(T[4], T[6]);
      V[2] = _mm512_unpacklo_epi64(T[5], T[7]);
      V[3] = _mm512_unpackhi_epi64(T[5], T[7]);
      for (size_t a = 0; a < 4; a++) { /* inputs a, 4 + a (lo) and 8 + a, 12 + a (hi) */
        __m512i x = _mm512_permutex2var_epi64(U[a], lo, V[a]);
        __m512i y = _mm512_permutex2var_epi64(U[a], hi, V[a]);
        __m256i o[4] = {_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1),
                        _mm512_castsi512_si256(y), _mm512_extracti64x4_epi64(y, 1)};
        for (size_t h = 0; h < 4; h++)
          if (a + 4 * h < ib) _mm256_mask_storeu_epi32(wd + (i + a + 4 * h) * O2 + m, sm, o[h]);
      }
    }
  }
}

#include "end.h"
#endif /* SC__HAVE_BF16_NATIVE */
