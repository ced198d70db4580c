/* src/typed/act.h — the activations, portable: forward over a row (with the pre-activation kept
 * where the pullback needs it) and the pullback's derivative, by columns and by lanes. */
#if defined(SC__KERNELS_ONLY) && defined(SC_HAVE_SLEEF)
#include "../../kernels/sleef.h" /* vector exp / log1p / double tanh for this ISA */
#define SC__SLEEF 1
#endif

/* e[j] = exp(e[j]) for j < m: SLEEF's vector exp in the kernel sets that have it, else libm's */
static inline void SC__TN(sc__exp_n)(SC__T *restrict e, size_t m) {
#ifdef SC__SLEEF
  SC__TT(sc__sleef_exp)(e, e, m);
#else
  /* cppcheck-suppress uninitvar ; (cppcheck 2.10 misses that each caller fills e[0..m) first) */
  for (size_t j = 0; j < m; j++) e[j] = SC__EXP(e[j]);
#endif
}

/* silu, forward and derivative (d *= silu'(z)), out of line: the switches below, which the
 * one-state path inlines, grow by a call only */
#if defined(__GNUC__)
#define SC__ACT_NOINLINE __attribute__((noinline))
#else
#define SC__ACT_NOINLINE
#endif
static SC__ACT_NOINLINE void SC__TN(sc__silu_n)(SC__T *restrict a, const SC__T *restrict z,
                                                size_t n) {
  /* z sigmoid(z) = z / (1 + exp(-z)): -0 in the far negative tail, as gelu */
#ifdef SC__SLEEF
  for (size_t t = 0; t < n; t++) a[t] = -z[t];
  SC__TT(sc__sleef_exp)(a, a, n);
  for (size_t t = 0; t < n; t++) a[t] = z[t] / (1 + a[t]);
#else
  for (size_t t = 0; t < n; t++) a[t] = z[t] / (1 + SC__EXP(-z[t]));
#endif
}
#define SC__ACT_CHUNK 64
static SC__ACT_NOINLINE void SC__TN(sc__silu_bwd)(SC__T *restrict d, const SC__T *restrict z,
                                                  size_t n) {
  /* d/dz z s(z) = s + z s (1 - s), with 1 - s = e s, e = exp(-z) */
  for (size_t k = 0; k < n; k += SC__ACT_CHUNK) {
    size_t m = n - k < SC__ACT_CHUNK ? n - k : SC__ACT_CHUNK, j;
    SC__T e[SC__ACT_CHUNK];
    for (j = 0; j < m; j++) e[j] = -z[k + j];
    SC__TN(sc__exp_n)(e, m);
    for (j = 0; j < m; j++) {
      SC__T v = z[k + j], sg = 1 / (1 + e[j]);
      SC__T w = -v < SC__EXPMAX ? e[j] * sg * sg : 0; /* s (1 - s); 0 where exp overflowed */
      d[k + j] *= sg + (w == 0 ? 0 : v * w);
    }
  }
}

/* a[t] = act(z[t]) for t < n; zs (if not NULL) keeps z for the pullback */
static inline void SC__TN(sc__act_n)(SC__T *restrict a, SC__T *restrict zs, const SC__T *restrict z,
                                     size_t n, sc_act act) {
  size_t t;
  if (zs)
    for (t = 0; t < n; t++) zs[t] = z[t];
  switch (act) {
  case SC_IDENTITY:
    for (t = 0; t < n; t++) a[t] = z[t];
    break;
  case SC_RELU:
    for (t = 0; t < n; t++) a[t] = z[t] < 0 ? 0 : z[t]; /* NaN stays NaN (max(0, z) in SIMD) */
    break;
  case SC_TANH:
    for (t = 0; t < n; t++) a[t] = SC__TANH(z[t]);
    break;
  case SC_SIGMOID:
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -z[t];
    SC__TT(sc__sleef_exp)(a, a, n);
    for (t = 0; t < n; t++) a[t] = 1 / (1 + a[t]);
#else
    for (t = 0; t < n; t++) a[t] = 1 / (1 + SC__EXP(-z[t]));
#endif
    break;
  case SC_SOFTPLUS:
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -SC__FABS(z[t]);
    SC__TT(sc__sleef_exp)(a, a, n);
    SC__TT(sc__sleef_log1p)(a, a, n);
    for (t = 0; t < n; t++) a[t] += z[t] > 0 ? z[t] : 0;
#else
    for (t = 0; t < n; t++) a[t] = (z[t] > 0 ? z[t] : 0) + SC__LOG1P(SC__EXP(-SC__FABS(z[t])));
#endif
    break;
  case SC_GELU: /* 0.5 z (1 + tanh(u)) = z sigmoid(2u): no cancellation in the tail */
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -2 * SC__GELU_K0 * (z[t] + SC__GELU_K1 * z[t] * z[t] * z[t]);
    SC__TT(sc__sleef_exp)(a, a, n);
    for (t = 0; t < n; t++) a[t] = z[t] / (1 + a[t]);
#else
    for (t = 0; t < n; t++) {
      SC__T v = z[t], m2u = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v * v * v);
      a[t] = v / (1 + SC__EXP(m2u)); /* exp overflows to inf in the far tail: -0 */
    }
#endif
    break;
  case SC_SILU: SC__TN(sc__silu_n)(a, z, n); break;
  }
}

/* one tile row */
static inline void SC__TN(sc__act_row)(SC__T *restrict a, SC__T *restrict zs,
                                       const SC__T *restrict z, sc_act act) {
  SC__TN(sc__act_n)(a, zs, z, SC__TW, act);
}

/* d[k] *= act'(.), from the saved output a (or z for gelu and silu). softplus and gelu take their
 * exp (expm1) for SC__ACT_CHUNK elements at a time into a buffer on the stack, by SLEEF's vector
 * functions in the ISA builds: one libm call per element was half of a valgrad of 100 -> 100
 * softplus -> 100 -> 3 (AVX-512 Zen 4, 2026-11-24) */
SC__KSTATIC void SC__TN(sc__act_bwd)(SC__T *restrict d, const SC__T *restrict a,
                                     const SC__T *restrict z, size_t n, sc_act act) {
  size_t k;
  switch (act) {
  case SC_IDENTITY: break;
  case SC_RELU:
    for (k = 0; k < n; k++) d[k] = a[k] <= 0 ? 0 : d[k]; /* a NaN output passes d on */
    break;
  case SC_TANH:
    for (k = 0; k < n; k++) d[k] *= 1 - a[k] * a[k];
    break;
  case SC_SIGMOID:
    for (k = 0; k < n; k++) d[k] *= a[k] * (1 - a[k]);
    break;
  case SC_SOFTPLUS: /* sigmoid(z) = 1 - exp(-softplus(z)) */
#ifdef SC__SLEEF
    for (k = 0; k < n; k += SC__ACT_CHUNK) {
      size_t m = n - k < SC__ACT_CHUNK ? n - k : SC__ACT_CHUNK, j;
      SC__T e[SC__ACT_CHUNK];
      for (j = 0; j < m; j++) e[j] = -a[k + j];
      SC__TT(sc__sleef_expm1)(e, e, m);
      for (j = 0; j < m; j++) d[k + j] *= -e[j];
    }
#else
    for (k = 0; k < n; k++) d[k] *= -SC__EXPM1(-a[k]);
#endif
    break;
  case SC_GELU: /* d/dz z s(2u) = s + z 2u' s (1 - s), with 1 - s = e s, e = exp(-2u) */
    for (k = 0; k < n; k += SC__ACT_CHUNK) {
      size_t m = n - k < SC__ACT_CHUNK ? n - k : SC__ACT_CHUNK, j;
      SC__T e[SC__ACT_CHUNK];
      for (j = 0; j < m; j++) {
        SC__T v = z[k + j], v2 = v * v;
        e[j] = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v2 * v); /* -2u, as below */
      }
      SC__TN(sc__exp_n)(e, m);
      for (j = 0; j < m; j++) {
        SC__T v = z[k + j], v2 = v * v, m2u = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v2 * v);
        SC__T sg = 1 / (1 + e[j]);
        SC__T w = m2u < SC__EXPMAX ? e[j] * sg * sg : 0; /* s (1 - s); 0 where exp overflowed */
        SC__T du = SC__GELU_K0 * (1 + 3 * SC__GELU_K1 * v2);
        d[k + j] *= sg + (w == 0 ? 0 : v * 2 * du * w);
      }
    }
    break;
  case SC_SILU: SC__TN(sc__silu_bwd)(d, z, n); break;
  }
}

/* sc__act_bwd with the bias gradient's lanes (bl: K rows of SC__TW) summed in the same pass
 * over d: K channels of npos positions (a dense layer: K outputs, npos 1); each channel's sums
 * in a local row (in registers; bl and d share the tile, so summed in place they were loaded and
 * stored at every position). The same operations in the same order as act_bwd then the sums:
 * the same bits. LeNet5's conv1, 20,000 images, 1 thread (Zen 4): the in-place sums took 9.5 of
 * its 41-ms backward in bf16 */
SC__KSTATIC void SC__TN(sc__act_bwd_lane)(SC__T *restrict d, SC__T *restrict bl,
                                          const SC__T *restrict a, const SC__T *restrict z,
                                          size_t K, size_t npos, sc_act act) {
  int fused = act == SC_IDENTITY || act == SC_RELU || act == SC_TANH;
  if (!fused) SC__TN(sc__act_bwd)(d, a, z, K * npos * SC__TW, act);
  for (size_t k = 0; k < K; k++) {
    SC__T sum[SC__TW];
    memcpy(sum, bl + k * SC__TW, sizeof sum);
    SC__T *dk = d + k * npos * SC__TW;
    const SC__T *ak = a + k * npos * SC__TW;
    for (size_t q = 0; q < npos * SC__TW; q += SC__TW)
      for (int t = 0; t < SC__TW; t++) {
        SC__T v = dk[q + (size_t)t];
        if (act == SC_RELU)
          v = ak[q + (size_t)t] <= 0 ? 0 : v;
        else if (act == SC_TANH)
          v *= 1 - ak[q + (size_t)t] * ak[q + (size_t)t];
        dk[q + (size_t)t] = v;
        sum[t] += v;
      }
    memcpy(bl + k * SC__TW, sum, sizeof sum);
  }
}
