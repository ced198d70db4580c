/* kernels/x86/dense.h — the dense layer's float vector kernels: forward, dW (dot form and lane
 * form, a pair of tiles at once), dx (with the activation's derivative of the layer below), and
 * the lane accumulators' fold. */
/* BODY(NB) for n rows cut into ceil(n / VOB) blocks of nearly equal size (BODY advances its
 * own row counter): whole blocks of VOB rows when they fit exactly, else e.g. 84 rows as
 * 7 x 8 + 4 x 7 and 10 as 2 x 5, so that no block is left with a few accumulators waiting on
 * FMA latency */
#if VOB > 4
#define V_BLOCKS_5_8(BODY)                                                                         \
  case 5: BODY(5) break;                                                                           \
  case 6: BODY(6) break;                                                                           \
  case 7: BODY(7) break;                                                                           \
  case 8:                                                                                          \
    BODY(8) break;
#else
#define V_BLOCKS_5_8(BODY)
#endif
#define V_BLOCKS(n, BODY)                                                                          \
  do {                                                                                             \
    size_t nb_ = ((n) + VOB - 1) / VOB, base_ = (n) / nb_, extra_ = (n) % nb_;                     \
    if (extra_ == 0 && base_ == VOB) {                                                             \
      for (size_t bi_ = 0; bi_ < nb_; bi_++) BODY(VOB)                                             \
      break;                                                                                       \
    }                                                                                              \
    for (size_t bi_ = 0; bi_ < nb_; bi_++) {                                                       \
      switch (base_ + (bi_ < extra_ ? 1 : 0)) {                                                    \
      case 1: BODY(1) break;                                                                       \
      case 2: BODY(2) break;                                                                       \
      case 3: BODY(3) break;                                                                       \
      case 4: BODY(4) break; V_BLOCKS_5_8(BODY)                                                    \
      default: break; /* not reached: blocks hold 1..VOB rows */                                   \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* a = act(W x + b). The O rows are cut into ceil(O / VOB) blocks of nearly equal size
 * (84 rows: 7 x 8 + 4 x 7, 10 rows: 2 x 5), so no block is left with a few accumulators
 * waiting on FMA latency. Each output's sum runs over i in the same order whatever the
 * blocking, so the results do not depend on it. */
static inline __attribute__((always_inline)) void
vec_dense_fwd_body(float *restrict a, const float *restrict W, const float *restrict b,
                   const float *restrict x, size_t O, size_t I, sc_act act, const int nv_,
                   const int nvb_) {
  size_t o = 0;
  V_BLOCKS(O, V_FWD_BODY);
}
static void vec_dense_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                              const float *restrict b, const float *restrict x, size_t O, size_t I,
                              sc_act act) {
  vec_dense_fwd_body(a, W, b, x, O, I, act, NV, NVB);
  v_act_rows(a, z, O, act);
}
/* the same on a half tile: the first half of each row, the second stored as zeros */
static void vec_dense_fwd_h_f32(float *restrict a, float *restrict z, const float *restrict W,
                                const float *restrict b, const float *restrict x, size_t O,
                                size_t I, sc_act act) {
  vec_dense_fwd_body(a, W, b, x, O, I, act, NVH, NVBH);
  v_act_rows_h(a, z, O, act);
}

/* gW[o][i] += sum_t dz[o][t] xT[t][i]: 16 columns of NB rows per register block, columns from
 * i1 on (used for layers too large for the lane form below) */
#define V_DW_COLS(NB, i1)                                                                          \
  for (size_t i0 = (i1); i0 < I; i0 += 16) {                                                       \
    sc_vf acc[NB][NC];                                                                             \
    _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++) acc[k][j] =  \
        V_BCAST(0.0f);                                                                             \
    const float *d = dz + o * SC__TW;                                                              \
    for (int t = 0; t < SC__TW; t++) {                                                             \
      sc_vf xv[NC];                                                                                \
      for (int j = 0; j < NC; j++) xv[j] = V_ROW(xT + (size_t)t * ld + i0, j);                     \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                       \
        sc_vf dk = V_BCAST(d[k * SC__TW + t]);                                                     \
        for (int j = 0; j < NC; j++) acc[k][j] += dk * xv[j];                                      \
      }                                                                                            \
    }                                                                                              \
    if (i0 + 16 <= I) {                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++)(           \
          (sc_vfu *)(void *)(gW + (o + k) * I + i0))[j] += acc[k][j];                              \
    } else {                                                                                       \
      for (int k = 0; k < NB; k++) {                                                               \
        float tmp[16] __attribute__((aligned(64)));                                                \
        for (int j = 0; j < NC; j++) V_ROWW(tmp, j) = acc[k][j];                                   \
        for (size_t c = 0; c < I - i0; c++) gW[(o + k) * I + i0 + c] += tmp[c];                    \
      }                                                                                            \
    }                                                                                              \
  }
#define V_DW_BLOCK(NB)                                                                             \
  for (; o + NB <= O; o += NB) V_DW_COLS(NB, 0)

static void vec_dense_dw_f32(float *restrict gW, const float *restrict dz, const float *restrict xT,
                             size_t O, size_t I, size_t ld) {
  size_t o = 0;
#if VW == 16
  /* 6 rows x 64 columns (24 zmm): per t 4 loads of xT and 6 broadcasts of dz feed 24 FMAs,
   * where 8 x 16 took 1 load and 8 broadcasts for 8 (the loads the bound); the columns past
   * the last 64 by 16 as below. Each gW element's sum runs over t in the same order: the same
   * bits. LeNet5's dense layers alone (one tile, operands hot, Zen 5): 256 -> 120 9.4 -> 7.5 us,
   * 120 -> 84 3.4 -> 3.0 us (Zen 5, 2026-11-28) */
  for (size_t i64 = I / 64 * 64; i64 && o + 6 <= O; o += 6) {
    for (size_t i0 = 0; i0 < i64; i0 += 64) {
      sc_vf acc[6][4];
      for (int k = 0; k < 6; k++)
        for (int j = 0; j < 4; j++) acc[k][j] = V_BCAST(0.0f);
      const float *d = dz + o * SC__TW;
      for (int t = 0; t < SC__TW; t++) {
        sc_vf xv[4];
        for (int j = 0; j < 4; j++) xv[j] = V_ROW(xT + (size_t)t * ld + i0, j);
        for (int k = 0; k < 6; k++) {
          sc_vf dk = V_BCAST(d[k * SC__TW + t]);
          for (int j = 0; j < 4; j++) acc[k][j] += dk * xv[j];
        }
      }
      for (int k = 0; k < 6; k++)
        for (int j = 0; j < 4; j++) ((sc_vfu *)(void *)(gW + (o + k) * I + i0))[j] += acc[k][j];
    }
    V_DW_COLS(6, i64)
  }
#endif
  V_DW_BLOCK(VOB)
#if VOB > 4
  V_DW_BLOCK(4)
#endif
  V_DW_BLOCK(1)
}

/* dx[i][t] = sum_o W[o][i] dz[o][t]: exactly NB input rows starting at i, NVB vectors per
 * register block, the first nv_ vectors of each row (NV, or NVH for a half tile: the rest
 * stored as zeros); i += NB */
#define V_DX_BODY(NB)                                                                              \
  {                                                                                                \
    for (int jc = 0; jc < nv_; jc += nvb_) {                                                       \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++)          \
          acc[k][j] = V_BCAST(0.0f);                                                               \
      for (size_t o = 0; o < O; o++) {                                                             \
        sc_vf dv[NVB];                                                                             \
        for (int j = 0; j < nvb_; j++) dv[j] = V_ROW(dz + o * SC__TW, jc + j);                     \
        const float *w = W + o * I + i;                                                            \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[k]);                                                                \
          for (int j = 0; j < nvb_; j++) acc[k][j] += wk * dv[j];                                  \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++) {        \
        sc_vf v = acc[k][j];                                                                       \
        if (act != SC_IDENTITY) { /* the layer below's derivative, from its output xa */           \
          sc_vf av = V_ROW(xa + (i + k) * SC__TW, jc + j);                                         \
          if (act == SC_RELU)                                                                      \
            v = v_sel((sc_vi)(av <= 0.0f), V_BCAST(0.0f), v);                                      \
          else if (act == SC_TANH)                                                                 \
            v = v * (1.0f - av * av);                                                              \
          else                                                                                     \
            v = v * (av * (1.0f - av));                                                            \
        }                                                                                          \
        V_ROWW(dx + (i + k) * SC__TW, jc + j) = v;                                                 \
        if (bl) V_ROWW(bl + (i + k) * SC__TW, jc + j) = V_ROW(bl + (i + k) * SC__TW, jc + j) + v;  \
      }                                                                                            \
    }                                                                                              \
    for (int k = 0; k < NB; k++) /* (a half tile's other half) */                                  \
      for (int j = nv_; j < NV; j++) V_ROWW(dx + (i + k) * SC__TW, j) = V_BCAST(0.0f);             \
    i += NB;                                                                                       \
  }

/* dx = W^T dz, then, for the dense layer below whose output xa is this layer's input,
 * its activation pullback dx *= act'(xa) (identity, relu, tanh, sigmoid: the same
 * operations as sc__act_bwd) and its bias lanes bl += dx (bl may be NULL): the pullback
 * of one layer and the activation step of the next in one sweep */
static inline __attribute__((always_inline)) void
vec_dense_dx_body(float *restrict dx, const float *restrict W, const float *restrict dz, size_t O,
                  size_t I, sc_act act, const float *restrict xa, float *restrict bl, const int nv_,
                  const int nvb_) {
  /* the I rows in ceil(I / VOB) blocks of nearly equal size, as in vec_dense_fwd_f32 (32
   * rows on AVX2: 6 6 5 5 5 5, not 6 6 6 6 6 1 1, whose one-row blocks wait on FMA latency);
   * each sum runs over o in the same order whatever the blocking: the same bits */
  size_t i = 0;
  V_BLOCKS(I, V_DX_BODY);
}
static void vec_dense_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                             size_t O, size_t I) {
  vec_dense_dx_body(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL, NV, NVB);
}
static void vec_dense_dx_h_f32(float *restrict dx, const float *restrict W,
                               const float *restrict dz, size_t O, size_t I) {
  vec_dense_dx_body(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL, NVH, NVBH);
}
static inline __attribute__((always_inline)) void
vec_dense_dx_act_n(float *restrict dx, const float *restrict W, const float *restrict dz, size_t O,
                   size_t I, sc_act act, const float *restrict xa, float *restrict bl, const int nv,
                   const int nvb) {
  /* tanh and relu with the activation and whether there are bias lanes as constants: with them
   * known only at run time, GCC tested both for every stored vector (the toy's dx 1.5 % slower) */
#define V_DX_ACT_CASE(A)                                                                           \
  case A:                                                                                          \
    if (bl)                                                                                        \
      vec_dense_dx_body(dx, W, dz, O, I, A, xa, bl, nv, nvb);                                      \
    else                                                                                           \
      vec_dense_dx_body(dx, W, dz, O, I, A, xa, NULL, nv, nvb);                                    \
    return;
  switch (act) {
    V_DX_ACT_CASE(SC_TANH)
    V_DX_ACT_CASE(SC_RELU)
  default: vec_dense_dx_body(dx, W, dz, O, I, act, xa, bl, nv, nvb);
  }
#undef V_DX_ACT_CASE
}
static void vec_dense_dx_act_f32(float *restrict dx, const float *restrict W,
                                 const float *restrict dz, size_t O, size_t I, sc_act act,
                                 const float *restrict xa, float *restrict bl) {
  vec_dense_dx_act_n(dx, W, dz, O, I, act, xa, bl, NV, NVB);
}
/* a half tile's (the first NVH vectors of each row; zeros in the rest) */
static void vec_dense_dx_act_h_f32(float *restrict dx, const float *restrict W,
                                   const float *restrict dz, size_t O, size_t I, sc_act act,
                                   const float *restrict xa, float *restrict bl) {
  vec_dense_dx_act_n(dx, W, dz, O, I, act, xa, bl, NVH, NVBH);
}

/* dW in lane form (small layers): wl[(o*I + i)*VW + lane] += sum over the tile's
 * vectors j of dz[o][j*VW + lane] x[i][j*VW + lane]. Each accumulator is one native
 * vector, loaded and stored once per tile for NV FMAs; four rows share each x load. */
/* the lane-form dW over T tiles (1 or 2, a constant after inlining), tile 0 first: each
 * accumulator gets its FMAs in the same order as from T one-tile calls; first: the slice's
 * first write, which stores the products instead of adding them to the accumulator.
 * With bias (a constant), the layer's bias lanes bl[o][t] += dz[o][t] too, tile 0 first:
 * the additions vec_dense_dx_act_f32 would have made as it stored each dz (the same bits),
 * with one load and store of a lane vector per T tiles instead of per tile, and none of
 * the dx pass's (the toy, 1 thread: those loads and stores were 4.7 % of its time) */
static inline __attribute__((always_inline)) void
vec_dense_dwl_n(float *restrict wl, const float *const dz[2], const float *const x[2], int T,
                size_t O, size_t I, int first, const int bias, float *restrict bl, const int nvl) {
  sc_vf *A = (sc_vf *)(void *)wl;
  /* the products: tile 0's NV vectors, then (T = 2) tile 1's; the last tile's first nvl only
   * (NV, or NVH for a half tile, whose other half of dz is zeros: the products left out would
   * add zeros) */
  const int M = (T - 1) * NV + nvl;
  /* R rows from o share each x load (4 at a time, then the last 1-3 as one block: the
   * micro-benchmark's 2-output layer had gone row by row, reloading dz and x for every weight) */
#define V_DWL_ROWS(R)                                                                              \
  {                                                                                                \
    sc_vf d[R][2 * NV];                                                                            \
    for (int k = 0; k < R; k++)                                                                    \
      for (int m = 0; m < M; m++) d[k][m] = V_ROW(dz[m / NV] + (o + k) * SC__TW, m % NV);          \
    if (bias)                                                                                      \
      for (int k = 0; k < R; k++)                                                                  \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf v = V_ROW(bl + (o + k) * SC__TW, j);                                               \
          for (int t = 0; t < T; t++)                                                              \
            if (t * NV + j < M) v += d[k][t * NV + j];                                             \
          V_ROWW(bl + (o + k) * SC__TW, j) = v;                                                    \
        }                                                                                          \
    for (size_t i = 0; i < I; i++) {                                                               \
      sc_vf xv[2 * NV];                                                                            \
      for (int m = 0; m < M; m++) xv[m] = V_ROW(x[m / NV] + i * SC__TW, m % NV);                   \
      for (int k = 0; k < R; k++) {                                                                \
        sc_vf acc = first ? d[k][0] * xv[0] : V_FMA(d[k][0], xv[0], A[(o + k) * I + i]);           \
        for (int m = 1; m < M; m++) acc = V_FMA(d[k][m], xv[m], acc);                              \
        A[(o + k) * I + i] = acc;                                                                  \
      }                                                                                            \
    }                                                                                              \
  }
  size_t o = 0;
  for (; o + 4 <= O; o += 4) V_DWL_ROWS(4)
  switch (O - o) {
  case 3: V_DWL_ROWS(3) break;
  case 2: V_DWL_ROWS(2) break;
  case 1: V_DWL_ROWS(1) break;
  default: break;
  }
#undef V_DWL_ROWS
}

/* vec_dense_dwl_n with whether there are bias lanes and whether the last tile is a half tile
 * as constants (one copy each) */
static inline __attribute__((always_inline)) void
vec_dense_dwl_sel(float *restrict wl, const float *const dz[2], const float *const x[2], int T,
                  size_t O, size_t I, int first, float *restrict bl, int half) {
  if (half) {
    if (bl)
      vec_dense_dwl_n(wl, dz, x, T, O, I, first, 1, bl, NVH);
    else
      vec_dense_dwl_n(wl, dz, x, T, O, I, first, 0, NULL, NVH);
  } else if (bl)
    vec_dense_dwl_n(wl, dz, x, T, O, I, first, 1, bl, NV);
  else
    vec_dense_dwl_n(wl, dz, x, T, O, I, first, 0, NULL, NV);
}

/* bl: the layer's bias lanes, or NULL (see vec_dense_dwl_n); half: a half tile */
static void vec_dense_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                              size_t O, size_t I, int first, float *restrict bl, int half) {
  const float *const dzs[2] = {dz, dz}, *const xs[2] = {x, x};
  vec_dense_dwl_sel(wl, dzs, xs, 1, O, I, first, bl, half);
}

#if VW == 16
#define SC__VEC_DWL2 1
/* two tiles in one pass (A, then B): one accumulator load and store per 4 FMAs instead of
 * 2; the zmm store (one per cycle) is what bounds the one-tile form. Same bits as two
 * vec_dense_dwl_f32 calls. */
static void vec_dense_dwl2_f32(float *restrict wl, const float *restrict dzA,
                               const float *restrict xA, const float *restrict dzB,
                               const float *restrict xB, size_t O, size_t I, int first,
                               float *restrict bl, int half) { /* half: tile B is a half tile */
  const float *const dzs[2] = {dzA, dzB}, *const xs[2] = {xA, xB};
  vec_dense_dwl_sel(wl, dzs, xs, 2, O, I, first, bl, half);
}
#endif

/* gw[k] += the VW lanes of wl[k] (once per slice), summed as a fixed tree: on AVX-512 lane l
 * and lane l + 8 first, then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). Eight weights
 * at a time with horizontal adds (no transposes), the rest one by one with the same sums,
 * so the result does not depend on where a weight falls. The lane-order chain it replaces
 * took 947 ns for the toy's 752 weights on the AVX2 host (16 slices a step: 1.7 % of it). */
static inline float vec_fold8(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
static inline __m256 vec_fold8x8(const __m256 *v) {
  __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}
static void vec_dwl_fold_f32(float *restrict gw, const float *restrict wl, size_t n) {
  size_t k = 0;
#if VW == 16
  /* sixteen weights at a time in 512-bit registers, the same sums in the same tree: lanes
   * l + (l + 8) for two weights per register (two 256-bit halves shuffled together), then
   * three levels of even + odd lanes across register pairs (the micro-benchmark's fold:
   * 48 operations for 16 weights against 72 with the 256-bit hadds) */
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#define V_EVOD(a, b)                                                                               \
  _mm512_add_ps(_mm512_permutex2var_ps((a), ev, (b)), _mm512_permutex2var_ps((a), od, (b)))
  for (; k + 16 <= n; k += 16) {
    __m512 u[8], v[4], x[2];
    for (int p = 0; p < 8; p++) { /* weights 2p, 2p + 1: their lanes l + (l + 8) */
      __m512 a = _mm512_loadu_ps(wl + (k + 2 * (size_t)p) * VW),
             b = _mm512_loadu_ps(wl + (k + 2 * (size_t)p + 1) * VW);
      u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    for (int q = 0; q < 4; q++) v[q] = V_EVOD(u[2 * q], u[2 * q + 1]); /* 4 pair sums a weight */
    for (int r = 0; r < 2; r++) x[r] = V_EVOD(v[2 * r], v[2 * r + 1]); /* 2 quad sums */
    _mm512_storeu_ps(gw + k, _mm512_add_ps(_mm512_loadu_ps(gw + k), V_EVOD(x[0], x[1])));
  }
#undef V_EVOD
#endif
  for (; k + 8 <= n; k += 8) {
    __m256 v[8];
    for (int j = 0; j < 8; j++) {
      const float *w = wl + (k + (size_t)j) * VW;
#if VW == 16
      __m512 x = _mm512_loadu_ps(w);
      v[j] = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
#else
      v[j] = _mm256_loadu_ps(w);
#endif
    }
    _mm256_storeu_ps(gw + k, _mm256_add_ps(_mm256_loadu_ps(gw + k), vec_fold8x8(v)));
  }
  for (; k < n; k++) {
    const float *w = wl + k * VW;
#if VW == 16
    float u[8];
    for (int l = 0; l < 8; l++) u[l] = w[l] + w[l + 8];
    gw[k] += vec_fold8(u);
#else
    gw[k] += vec_fold8(w);
#endif
  }
}

#undef V_FWD_BODY
#undef V_DW_BLOCK
#undef V_DW_COLS
#undef V_DX_BODY
#undef V_BLOCKS
#undef V_BLOCKS_5_8
