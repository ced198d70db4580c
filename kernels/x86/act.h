/* kernels/x86/act.h — the activations on float vectors: our tanh in four variants, and the
 * forward's activation of a row or a tile after its sum (the dense and conv epilogues). */
/* the float tanh of sc__tanh_f32 in simplechain.c, the same method and coefficients on
 * vectors, with the dependency chain shortened: a tile's tanh pass is bound by the
 * latency of each vector's chain of about 20 dependent operations (the scheduler fills
 * with waiting operations), not by operation count. So: the factor 2 is folded into
 * the log2(e) constant (t comes from min(|x|, 9) directly), the reduction r = a - n ln2
 * is one FMA with ln2 rounded to float (its error, n 1.9e-9 absolute in r, stays below
 * 0.03 ULP of tanh, because the condition number 2 / (E + 2) shrinks as n grows), and
 * q(r) is evaluated in Estrin's form. make bench-tanh: 0.165 ns per element, against
 * 0.180 for the plain transcription; the same 1.5-ULP bound (test_math; an exhaustive
 * scan of [0, 9.5] gave 1.499). A reciprocal estimate plus a correction instead of the
 * divide was measured slower: it lengthens the chain.
 * var: the planner's tanh variant (SC__TANH_DIV .. SC__TANH_RATRCP): bit 0 the reciprocal
 * form of the final quotient, bit 1 the rational form instead of expm1 (v_tanh_rat). */
static inline __attribute__((always_inline)) sc_vf v_quot(sc_vf E, sc_vf d, int rcp) {
  if (!rcp) return E / d;
  /* y0 = E r, r ~ 1 / d; y = y0 + r (E - d y0): relative error about (d r - 1)^2 */
  sc_vf r = V_RCP(d);
#if VW != 16 /* AVX2's 12-bit estimate squared is 2^-22: one Newton step on r first */
  r = V_FMA(r, V_FMA(-d, r, V_BCAST(1.0f)), r);
#endif
  sc_vf y0 = E * r;
  return V_FMA(r, V_FMA(-d, y0, E), y0);
}
/* The rational tanh ("rat", opt-in: SC_TANH_VARIANT=rat|ratrcp|fast): with a = x clamped to
 * [-9.125, 9.125] and s = a^2, tanh x ~ a P(s) / Q(s), P and Q of degree 4 with P(0) = Q(0)
 * = 1 (our own fit: iteratively reweighted least squares on the relative error over [0, 9.1],
 * 2.3e-8 before rounding), the result clamped to [-1, 1]. Odd by construction, exactly +-1
 * from |x| = 9.125 on, 12 operations and one quotient against the expm1 form's 28: make
 * bench-tanh 0.31 ns against 0.56 per element (AVX2, Zen 4). Its price is accuracy: the
 * roundings of P, Q, a P and the quotient add up to 5.41 ULP (an exhaustive scan of [0, 9.5];
 * tests/test_math.c bounds it by 6), above SLEEF's tanhf u35 (2.49), which is why it is never
 * chosen unless asked for. */
static inline __attribute__((always_inline)) sc_vf v_tanh_rat(sc_vf x, int rcp) {
  sc_vf a = v_max(V_BCAST(-9.125f), v_min(V_BCAST(9.125f), x)); /* (a NaN stays NaN) */
  sc_vf s = a * a;
  sc_vf p =
      (((1.317753462e-08f * s + 2.048119495e-05f) * s + 3.487811424e-03f) * s + 1.337447613e-01f) *
          s +
      1.0f;
  sc_vf q =
      (((7.704051086e-07f * s + 3.272921022e-04f) * s + 2.584739029e-02f) * s + 4.670778811e-01f) *
          s +
      1.0f;
  sc_vf y = v_quot(a * p, q, rcp);
  return v_max(V_BCAST(-1.0f), v_min(V_BCAST(1.0f), y));
}
static inline __attribute__((always_inline)) sc_vf v_tanh_q(sc_vf x, int var) {
  if (var & 2) return v_tanh_rat(x, var & 1);
  sc_vu sign = (sc_vu)x & 0x80000000u;
  sc_vf ax = (sc_vf)((sc_vu)x & 0x7fffffffu);
  sc_vf m = v_min(V_BCAST(9.125f), ax);    /* 9.125, not 9: tanh(9) must round to 1; NaN stays */
  sc_vf t = m * 2.88539008f + 12582912.0f; /* 2 log2(e) m + 1.5 2^23 */
  sc_vf a = m + m;
  sc_vf n = t - 12582912.0f;
  sc_vf r = a - n * 0.693147182f;
  sc_vf r2 = r * r;
  sc_vf qa = 1.66665435e-1f * r + 4.99999970e-1f;
  sc_vf qb = 8.36654752e-3f * r + 4.16672006e-2f;
  sc_vf q = (1.38825155e-3f * r2 + qb) * r2 + qa;
  sc_vf p = r2 * q + r;
  sc_vf s = (sc_vf)(((sc_vu)t << 23) + 0x3f800000u);
  sc_vf E = s * p + (s - 1.0f);
  sc_vf y = v_quot(E, E + 2.0f, var & 1);
  sc_vf z = ax * ax;
  sc_vf ys = (ax * z) * (((1.92903522e-02f * z - 5.36949411e-02f) * z + 1.33321747e-01f) * z -
                         3.33333194e-01f) +
             ax;
  y = v_ge_sel(ax, 0.35f, y, ys);
  return (sc_vf)((sc_vu)y | sign);
}

#define v_tanh(x) v_tanh_q(x, 0)

#if defined(SC_TANH_SLEEF) && defined(SC__SLEEF)
/* opt-in (make SC_TANH=sleef): SLEEF's 3.5-ULP tanhf instead of ours */
#define V_TANH(v) SC__SLEEF_TANHF(v)
#else
#define V_TANH(v) v_tanh(v)
#endif

/* a[k] = tanh(a[k]) for n native vectors: a tight loop, so that the polynomial's
 * constants stay in registers (applied to a block's 16 accumulators at once, they
 * spilled). var: the tanh variant (SC__TANH_*) */
static void v_tanh_inplace(float *restrict a, size_t n, int var) {
  sc_vf *A = (sc_vf *)(void *)a;
  switch (var) {
  case SC__TANH_RCP:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RCP);
    return;
  case SC__TANH_RAT:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RAT);
    return;
  case SC__TANH_RATRCP:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RATRCP);
    return;
  default:
    for (size_t k = 0; k < n; k++) A[k] = V_TANH(A[k]);
  }
}

/* activation of one accumulated tile row (NV vectors), stored to a (and z if asked) */
static inline __attribute__((always_inline)) void v_act_store(float *restrict a, float *restrict z,
                                                              const sc_vf *acc, sc_act act) {
  int j;
  if (SC__IS_TANH_ACT(act)) {
    for (j = 0; j < NV; j++) V_ROWW(a, j) = acc[j]; /* (then in place, from L1) */
    v_tanh_inplace(a, NV, (int)act - 32);
    return;
  }
  switch (act) {
  case SC_IDENTITY:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = acc[j];
    return;
  case SC_RELU:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = v_relu(acc[j]);
    return;
  case SC_TANH:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = V_TANH(acc[j]);
    return;
  default: { /* not hot: the portable row function */
    float tmp[SC__TW] __attribute__((aligned(64)));
    for (j = 0; j < NV; j++) V_ROWW(tmp, j) = acc[j];
    SC__TN(sc__act_row)(a, z, tmp, act);
    return;
  }
  }
}

/* pre-activations (relu applied: the other activations run afterwards as a pass over
 * whole rows) of exactly NB output rows starting at o, column chunk by column chunk
 * (NB x nvb_ accumulators in registers), the first nv_ vectors of each row (NV, or NVH for a
 * half tile: the rest stored as zeros); o += NB */
#define V_FWD_BODY(NB)                                                                             \
  {                                                                                                \
    const float *w = W + o * I;                                                                    \
    for (int jc = 0; jc < nv_; jc += nvb_) {                                                       \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                       \
        sc_vf bk = V_BCAST(b ? b[o + k] : 0.0f);                                                   \
        for (int j = 0; j < nvb_; j++) acc[k][j] = bk;                                             \
      }                                                                                            \
      for (size_t i = 0; i < I; i++) {                                                             \
        sc_vf xv[NVB];                                                                             \
        for (int j = 0; j < nvb_; j++) xv[j] = V_ROW(x + i * SC__TW, jc + j);                      \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[(size_t)k * I + i]);                                                \
          for (int j = 0; j < nvb_; j++) acc[k][j] += wk * xv[j];                                  \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++)          \
          V_ROWW(a + (o + k) * SC__TW, jc + j) = act == SC_RELU ? v_relu(acc[k][j]) : acc[k][j];   \
    }                                                                                              \
    for (int k = 0; k < NB; k++) /* (a half tile's other half) */                                  \
      for (int j = nv_; j < NV; j++) V_ROWW(a + (o + k) * SC__TW, j) = V_BCAST(0.0f);              \
    o += NB;                                                                                       \
  }

/* the activation pass after the GEMM: tanh in place, the others (not hot) through the
 * portable row function; identity and relu are done */
static void v_act_rows(float *restrict a, float *restrict z, size_t O, sc_act act) {
  if (act == SC_IDENTITY || act == SC_RELU) return;
  if (act == SC_TANH || SC__IS_TANH_ACT(act)) {
    v_tanh_inplace(a, O * NV, act == SC_TANH ? SC__TANH_DIV : (int)act - 32);
    return;
  }
  for (size_t o = 0; o < O; o++) {
    float tmp[SC__TW] __attribute__((aligned(64)));
    for (int j = 0; j < NV; j++) V_ROWW(tmp, j) = V_ROW(a + o * SC__TW, j);
    SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, tmp, act);
  }
}

/* the activation pass of a half tile: tanh on the first NVH vectors of each row (the rest
 * are zeros, and tanh 0 = 0), the others as v_act_rows on whole rows */
static void v_act_rows_h(float *restrict a, float *restrict z, size_t O, sc_act act) {
  if (act == SC_TANH || SC__IS_TANH_ACT(act)) {
    int var = act == SC_TANH ? SC__TANH_DIV : (int)act - 32;
    for (size_t o = 0; o < O; o++) v_tanh_inplace(a + o * SC__TW, NVH, var);
    return;
  }
  v_act_rows(a, z, O, act);
}

/* a = act(a + b) in place, row by row (after libxsmm's GEMM wrote a = W x); z as above */
static void vec_bias_act_f32(float *restrict a, float *restrict z, const float *restrict b,
                             size_t O, sc_act act) {
  for (size_t o = 0; o < O; o++) {
    sc_vf acc[NV], bk = V_BCAST(b ? b[o] : 0.0f);
    for (int j = 0; j < NV; j++) acc[j] = V_ROW(a + o * SC__TW, j) + bk;
    v_act_store(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, act);
  }
}

/* a conv output's bias (per channel, over npos rows) and activation, in place */
static void vec_conv_bias_act_f32(float *restrict a, float *restrict z, const float *restrict b,
                                  size_t K, size_t npos, sc_act act) {
  for (size_t k = 0; k < K; k++) {
    sc_vf bk = V_BCAST(b ? b[k] : 0.0f);
    for (size_t q = k * npos; q < (k + 1) * npos; q++) {
      sc_vf acc[NV];
      for (int j = 0; j < NV; j++) acc[j] = V_ROW(a + q * SC__TW, j) + bk;
      v_act_store(a + q * SC__TW, z ? z + q * SC__TW : NULL, acc, act);
    }
  }
}
