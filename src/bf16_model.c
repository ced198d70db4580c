/* src/bf16_model.c — the portable models of the bf16 precision's kernels: what VDPBF16PS
 * (kernels/bf16/) and TDPBF16PS on AMX tiles (kernels/amx/) compute, in plain C on any CPU
 * (SC_BF16_KERNELS=model, =amx-model). The tests compare the kernels with them. */
#include "internal.h"
#include "../kernels/amx/blocking.h"

/* ---- the bf16 kernels: one GEMM on bf16 pairs (sc__bf16_gemm_fn) serves a dense layer's
 * (and, row by row, a conv layer's) forward (A: the weights paired along the inputs, B: the tile
 * paired along the inputs), dx (A: the weights paired along the outputs, B: dz paired along the
 * outputs) and dW (A: dz paired along the samples, B: the layer input paired along the samples,
 * accumulated into the slice's gradient). The model is portable code computing what vdpbf16ps
 * computes (Intel SDM: per pair, srcdest += hi * hi, then srcdest += lo * lo, "round to nearest
 * even ... when doing each accumulation of the FMA", denormal inputs read as zero and denormal
 * results flushed to zero); it runs on any CPU and is what the tests compare the AVX512_BF16
 * kernel with. Each step is an FMA (sc__bf16_fma: fmaf, one rounding): the product of two bf16 is
 * exact in float unless it overflows (or underflows), and there a product rounded first differs:
 * -3e38 + 3e38 x 2 is 3e38 on an AMD Zen 5's VDPBF16PS and by fmaf, infinite with the product
 * rounded, and 3e38 x 2 + (-3e38 x 2) is infinite against NaN (before a052706, 2026-11-29, the
 * model rounded each product, and a compiler contracting a * b + c into an FMA, as clang may, gave
 * the other). */
static inline float sc__bf16_lo_f(uint32_t w) { return sc__fof(w << 16); }
static inline float sc__bf16_hi_f(uint32_t w) { return sc__fof(w & 0xffff0000u); }
static inline float sc__ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }
/* one step of the models: c + a b with one rounding, flushed to zero if denormal */
static inline float sc__bf16_fma(float c, float a, float b) { return sc__ftz(fmaf(a, b, c)); }

SC__INT void sc__bf16_gemm_model_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                      const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                      int acc, const size_t *arow, const size_t *crow, size_t grp,
                                      const size_t *brow) {
  (void)grp; /* row by row: one group after the other */
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float *cp = C + (crow ? crow[m] : m) * ldc;
      float c = acc ? sc__ftz(cp[n]) : 0.0f;
      const uint32_t *ar = A + (arow ? arow[m] : m) * lda;
      for (size_t k = 0; k < K2; k++) {
        uint32_t a = ar[k], b = B[(brow ? brow[k] : k) * ldb + n];
        c = sc__bf16_fma(c, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
        c = sc__bf16_fma(c, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
      }
      cp[n] = c;
    }
}
SC__INT void sc__bf16_gemm_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                 const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                 int acc) {
  sc__bf16_gemm_model_rows(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, 0, NULL);
}
/* The dx of a stride-1 conv layer (C input channels, K2 pairs of output channels, kh x kw
 * taps, oh x ow outputs) as a correlation: each element of the (padded) input's gradient xg
 * (C x (oh + kh - 1) x (ow + kw - 1) positions of TW lanes, overwritten) is one sum over the
 * taps (i, j) whose output (y - i, x - j) exists, in the order i, j, then the pairs op, of
 * wt[(c kh + i) kw + j][op] (W^T's pairs, sc__bf16_params) times dzp[op][(y - i) ow + x - j]
 * (dz's channel pairs, sc__bf16_pack_rows over the whole tile). Each sum is made once, in
 * registers on the native kernel, instead of adding each output row's taps into xg (8 pairs
 * at a time for LeNet5's conv2). What vdpbf16ps computes, as sc__bf16_gemm_model. */
SC__INT void sc__bf16_dx_corr_model(float *restrict xg, const uint32_t *restrict wt,
                                    const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh,
                                    size_t kw, size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, npos = oh * ow;
  for (size_t c = 0; c < C; c++)
    for (size_t y = 0; y < hp; y++)
      for (size_t x = 0; x < wp; x++)
        for (size_t t = 0; t < SC__TW; t++) {
          float acc = 0.0f;
          for (size_t i = y >= oh ? y - oh + 1 : 0; i <= y && i < kh; i++)
            for (size_t j = x >= ow ? x - ow + 1 : 0; j <= x && j < kw; j++)
              for (size_t op = 0; op < K2; op++) {
                uint32_t a = wt[((c * kh + i) * kw + j) * K2 + op],
                         b = dzp[(op * npos + (y - i) * ow + x - j) * SC__TW + t];
                acc = sc__bf16_fma(acc, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
                acc = sc__bf16_fma(acc, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
              }
          xg[((c * hp + y) * wp + x) * SC__TW + t] = acc;
        }
}
/* sc__bf16_nt_fn's fold of 16 lanes: p[i] + p[i + 8], then + 4, + 2, + 1 (IEEE float adds) */
static float sc__bf16_fold16(const float *p) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; i++) s8[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}
SC__INT void sc__bf16_nt_model(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                               const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                               size_t M, size_t N, size_t K2, size_t S) {
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float p[16] = {0};
      for (size_t s = 0; s < S; s++) {
        const uint32_t *a = A + m * lda + s * sa, *b = B + boff[n] * bsc + s * sb;
        for (size_t k = 0; k < K2; k++) {
          float *c = &p[k % 16];
          *c = sc__bf16_fma(*c, sc__bf16_hi_f(a[k]), sc__bf16_hi_f(b[k]));
          *c = sc__bf16_fma(*c, sc__bf16_lo_f(a[k]), sc__bf16_lo_f(b[k]));
        }
      }
      C[m * ldc + n] += sc__bf16_fold16(p);
    }
}

typedef struct {
  uint32_t t[8][16][16];
  unsigned rows[8], cols[8]; /* the configured shape (cols in 32-bit words) */
} sc__amx_tiles;             /* the portable model's tile registers */
/* the model: LDTILECFG (the shapes; every tile zeroed), TILELOADD / TILESTORED (the configured
 * rows and columns; a load zeroes the rest), TILEZERO and TDPBF16PS; a shape TDPBF16PS would
 * refuse (#UD) makes C all NaN, so that a test fails */
static inline void sc__amx_m_cfg(sc__amx_tiles *T, const sc__amx_cfg *c) {
  memset(T->t, 0, sizeof T->t);
  for (int t = 0; t < 8; t++) T->rows[t] = c->rows[t], T->cols[t] = c->colsb[t] / 4u;
}
static inline void sc__amx_m_load(sc__amx_tiles *T, int t, const void *p, size_t stride) {
  memset(T->t[t], 0, sizeof T->t[t]);
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy(T->t[t][r], (const char *)p + (size_t)r * stride, 4 * T->cols[t]);
}
static inline void sc__amx_m_store(const sc__amx_tiles *T, int t, void *p, size_t stride) {
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy((char *)p + (size_t)r * stride, T->t[t][r], 4 * T->cols[t]);
}
static inline void sc__amx_m_dp(sc__amx_tiles *T, int c, int a, int b) {
  if (!T->rows[c] || T->rows[a] != T->rows[c] || T->cols[b] != T->cols[c] ||
      T->rows[b] != T->cols[a] || !T->cols[a]) {
    for (int m = 0; m < 16; m++)
      for (int n = 0; n < 16; n++) T->t[c][m][n] = 0x7FC00000u;
    return;
  }
  for (unsigned m = 0; m < T->rows[c]; m++)
    for (unsigned n = 0; n < T->cols[c]; n++) {
      float acc = sc__ftz(sc__fof(T->t[c][m][n]));
      for (unsigned k = 0; k < T->cols[a]; k++) {
        uint32_t x = T->t[a][m][k], y = T->t[b][k][n];
        acc = sc__bf16_fma(acc, sc__bf16_lo_f(x), sc__bf16_lo_f(y));
        acc = sc__bf16_fma(acc, sc__bf16_hi_f(x), sc__bf16_hi_f(y));
      }
      T->t[c][m][n] = sc__fbits(acc);
    }
}
/* the portable model of the AMX GEMM (SC_BF16_KERNELS=amx-model: any CPU, slow) */
#define SC__TM_CFG(c) sc__amx_m_cfg(&T, c)
#define SC__TM_ZERO(i) memset(T.t[i], 0, sizeof T.t[i])
#define SC__TM_LOAD(t, p, s) sc__amx_m_load(&T, t, p, s)
#define SC__TM_STORE(t, p, s) sc__amx_m_store(&T, t, p, s)
#define SC__TM_DP(c, a, b) sc__amx_m_dp(&T, c, a, b)
#define SC__TM_RELEASE() (void)0
/* the grouped form (sc__bf16_gemm_grp_fn): one configuration for all the groups */
SC__INT void sc__bf16_gemm_amx_model_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                         size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                         size_t M, size_t N, size_t K2, size_t G, int acc) {
  static _Thread_local sc__amx_tiles T; /* 8 KB: off the stack */
  SC__AMX_GEMM_BODY(SC__TM)
}
SC__INT void sc__bf16_gemm_amx_model_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                          sc__grp_off ao, const uint32_t *B0, size_t ldb,
                                          sc__grp_off bo, size_t M, size_t N, size_t K2, size_t G) {
  static _Thread_local sc__amx_tiles T;
  SC__AMX_SUMG_BODY(SC__TM)
}
SC__INT void sc__bf16_gemm_amx_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_model_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}
