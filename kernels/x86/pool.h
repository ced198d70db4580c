/* kernels/x86/pool.h — the max-pool layer's float vector kernels: forward, pullback, the 2 x 2
 * pullback fused with a relu conv's, and a conv's forward with a 2 x 2 max-pool folded in. */
static void vec_pool_fwd_f32(float *restrict a, const float *restrict x, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        const float *x0 = x + ((c * P->ih + u * KH) * P->iw + v * KW) * SC__TW;
        sc_vf m[NV];
        for (int j = 0; j < NV; j++) m[j] = V_ROW(x0, j);
        for (size_t i = 0; i < KH; i++)
          for (size_t jj = 0; jj < KW; jj++) {
            const float *xi = x0 + (i * P->iw + jj) * SC__TW;
            for (int j = 0; j < NV; j++) {
              sc_vf xv = V_ROW(xi, j);
              m[j] = v_sel(xv > m[j], xv, m[j]);
            }
          }
        float *o = a + ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int j = 0; j < NV; j++) V_ROWW(o, j) = m[j];
      }
}

static void vec_pool_bwd_f32(float *restrict dx, const float *restrict x, const float *restrict a,
                             const float *restrict dz, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  if (P->oh * KH != P->ih || P->ow * KW != P->iw) memset(dx, 0, P->in * SC__TW * sizeof(float));
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        size_t o = ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int j = 0; j < NV; j++) {
          sc_vf av = V_ROW(a + o, j), dv = V_ROW(dz + o, j);
          sc_vi taken = (sc_vi){0};
          for (size_t i = 0; i < KH; i++)
            for (size_t jj = 0; jj < KW; jj++) {
              size_t q = ((c * P->ih + u * KH + i) * P->iw + v * KW + jj) * SC__TW;
              sc_vi hit = (V_ROW(x + q, j) == av) & ~taken;
              V_ROWW(dx + q, j) = v_sel(hit, dv, V_BCAST(0.0f));
              taken |= hit;
            }
        }
      }
}

/* the 2 x 2 pool pullbacks' tail (vec_pool2_act_bwd_f32, vec_pool2_hits_bwd_f32): a window's
 * four dx vectors (lanes j of positions e, e + 1 of rows d0, d1) stored, and with bias lanes the
 * first row's two added to s[j] */
static inline __attribute__((always_inline)) void v_pool2_put(float *d0, float *d1, size_t e, int j,
                                                              sc_vf e0, sc_vf e1, sc_vf e2,
                                                              sc_vf e3, sc_vf *s, int bl) {
  V_ROWW(d0 + e, j) = e0, V_ROWW(d0 + e + SC__TW, j) = e1;
  V_ROWW(d1 + e, j) = e2, V_ROWW(d1 + e + SC__TW, j) = e3;
  if (bl) s[j] += e0, s[j] += e1;
}
/* then row 2u + 1's IW stored positions added to s, in order */
static inline __attribute__((always_inline)) void v_pool2_row2(sc_vf *s, const float *d1,
                                                               size_t IW) {
  for (size_t k = 0; k < IW; k++)
    for (int j = 0; j < NV; j++) s[j] += V_ROW(d1 + k * SC__TW, j);
}

/* A 2 x 2 max-pool's pullback (windows tiling the input exactly) with the pullback of the relu or
 * identity conv below it and that conv's bias-gradient lanes, in one pass: dx at the window's
 * first maximum (row-major, as vec_pool_bwd_f32) is dz, elsewhere 0; then, with relu, 0 where
 * the conv's output x <= 0 (sc__act_bwd_lane's rule); and bl (K rows of SC__TW, or NULL) adds
 * dx over each channel's positions in row-major order (row 2u in the window loop, row 2u + 1
 * after it, from the stored rows). The same operations in the same order as vec_pool_bwd_f32
 * then sc__act_bwd_lane: the same bits, without that pass over the conv's output and dz
 * (LeNet5's conv1: 442 KB each a tile). dx may be x (the engine writes dx over the conv's
 * output, read only here: each window's four values are read before its dx is stored) */
/* the body of both (hits NULL: vec_pool2_act_bwd_f32's compares on x and a; else the bytes of
 * vec_conv_pool_fwd_f32), each wrapper's choice a constant once inlined */
static inline __attribute__((always_inline)) void
v_pool2_bwd(float *dx, const float *x, const float *a, const uint8_t *hits,
            const float *restrict dz, float *restrict bl, int relu, const sc__lplan *P) {
  size_t IW = P->iw, OW = P->ow, RW = IW * SC__TW;
  const sc_vf zero = V_BCAST(0.0f);
  for (size_t c = 0; c < P->oc; c++) {
    sc_vf s[NV];
    for (int j = 0; j < NV; j++) s[j] = bl ? V_ROW(bl + c * SC__TW, j) : zero;
    for (size_t u = 0; u < P->oh; u++) {
      size_t r = (c * P->ih + 2 * u) * RW;
      float *d0 = dx + r, *d1 = d0 + RW;
      for (size_t v = 0; v < OW; v++) {
        size_t o = ((c * P->oh + u) * OW + v) * SC__TW, e = 2 * v * SC__TW;
        if (hits) {
          sc_vi ix[NV];
          for (int j = 0; j < NV; j++)
#if VW == 16
            ix[j] = (sc_vi)_mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(hits + o + (size_t)j * VW)));
#else
            ix[j] = (sc_vi)_mm256_cvtepu8_epi32(
                _mm_loadl_epi64((const __m128i *)(const void *)(hits + o + (size_t)j * VW)));
#endif
          for (int j = 0; j < NV; j++) {
            sc_vf dv = V_ROW(dz + o, j);
            sc_vf e0 = v_sel(ix[j] == 0, dv, zero), e1 = v_sel(ix[j] == 1, dv, zero);
            sc_vf e2 = v_sel(ix[j] == 2, dv, zero), e3 = v_sel(ix[j] == 3, dv, zero);
            v_pool2_put(d0, d1, e, j, e0, e1, e2, e3, s, bl != NULL);
          }
          continue;
        }
        const float *x0 = x + r, *x1 = x0 + RW;
        for (int j = 0; j < NV; j++) {
          sc_vf av = V_ROW(a + o, j), dv = V_ROW(dz + o, j);
          sc_vf q0 = V_ROW(x0 + e, j), q1 = V_ROW(x0 + e + SC__TW, j);
          sc_vf q2 = V_ROW(x1 + e, j), q3 = V_ROW(x1 + e + SC__TW, j);
          sc_vi h0 = q0 == av, taken = h0;
          sc_vi h1 = (q1 == av) & ~taken;
          taken |= h1;
          sc_vi h2 = (q2 == av) & ~taken;
          taken |= h2;
          sc_vi h3 = (q3 == av) & ~taken;
          sc_vf e0 = v_sel(h0, dv, zero), e1 = v_sel(h1, dv, zero);
          sc_vf e2 = v_sel(h2, dv, zero), e3 = v_sel(h3, dv, zero);
          if (relu) {
            e0 = v_sel((sc_vi)(q0 <= 0.0f), zero, e0), e1 = v_sel((sc_vi)(q1 <= 0.0f), zero, e1);
            e2 = v_sel((sc_vi)(q2 <= 0.0f), zero, e2), e3 = v_sel((sc_vi)(q3 <= 0.0f), zero, e3);
          }
          v_pool2_put(d0, d1, e, j, e0, e1, e2, e3, s, bl != NULL);
        }
      }
      if (bl) v_pool2_row2(s, d1, IW); /* row 2u + 1, in order */
    }
    if (bl)
      for (int j = 0; j < NV; j++) V_ROWW(bl + c * SC__TW, j) = s[j];
  }
}
static void vec_pool2_act_bwd_f32(float *dx, const float *x, const float *restrict a,
                                  const float *restrict dz, float *restrict bl, int relu,
                                  const sc__lplan *P) {
  if (relu)
    v_pool2_bwd(dx, x, a, NULL, dz, bl, 1, P);
  else
    v_pool2_bwd(dx, x, a, NULL, dz, bl, 0, P);
}

/* A conv's forward (any strides, relu or identity, no z) with the 2 x 2 max-pool above it
 * folded in: blocks of CB channels x one window's four positions x one native vector of lanes
 * (AVX-512: 6 x 4 = 24 accumulators; 4 input loads and CB broadcasts a tap), each sum the same
 * FMAs in the same order as V_CONV_BLOCK (the bias first, then the taps), then the activation,
 * the window's maximum as vec_pool_fwd_f32 takes it, into pa, and per lane a byte (hits: K x PH
 * x PW windows x SC__TW lanes) naming the window's first position equal to it (0-3,
 * row-major; NaN equals nothing), 4 where none is or where, with relu, the maximum is <= 0 (the
 * relu's pullback there is 0: vec_pool2_act_bwd_f32's rule, the hit's value being the
 * maximum). The conv's output is never stored (442 KB a tile for LeNet5's conv1) and the
 * pool's forward pass is skipped; vec_pool2_hits_bwd_f32 reads the bytes: the same bits.
 * LeNet5 fp32, Zen 5 (2026-11-29), --profile at 1 thread: pool1's forward 7.6 ms an epoch
 * -> 0 with conv1's forward unchanged (49-50 ms), pool1's pullback 12.5 -> 9.0 ms, pool2's
 * 2.3 + 3.3 -> 0 + 2.9; epochs 0.450 -> 0.430 s at 1 thread, 0.233 -> 0.223 at 2 (medians
 * of 5 alternating pairs). */
#define V_CPOOL_BLOCK(CB)                                                                          \
  for (; k + CB <= K; k += CB)                                                                     \
    for (size_t q = 0; q < PH; q++)                                                                \
      for (size_t w = 0; w < PW; w++)                                                              \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf acc[CB][4];                                                                        \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf bk = V_BCAST(b ? b[k + cb] : 0.0f);                                              \
            for (int e = 0; e < 4; e++) acc[cb][e] = bk;                                           \
          }                                                                                        \
          const float *p0 = x + (2 * q * sh * WP + 2 * w * sw) * SC__TW,                           \
                      *p1 = p0 + sh * WP * SC__TW;                                                 \
          for (size_t r = 0; r < R; r++) {                                                         \
            size_t ro = roff[r] * SC__TW;                                                          \
            sc_vf x0 = V_ROW(p0 + ro, j), x1 = V_ROW(p0 + ro + sw * SC__TW, j);                    \
            sc_vf x2 = V_ROW(p1 + ro, j), x3 = V_ROW(p1 + ro + sw * SC__TW, j);                    \
            for (int cb = 0; cb < CB; cb++) {                                                      \
              sc_vf wv = V_BCAST(W[(k + cb) * R + r]);                                             \
              acc[cb][0] += wv * x0, acc[cb][1] += wv * x1;                                        \
              acc[cb][2] += wv * x2, acc[cb][3] += wv * x3;                                        \
            }                                                                                      \
          }                                                                                        \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf q0 = acc[cb][0], q1 = acc[cb][1], q2 = acc[cb][2], q3 = acc[cb][3];              \
            if (relu) q0 = v_relu(q0), q1 = v_relu(q1), q2 = v_relu(q2), q3 = v_relu(q3);          \
            sc_vf m = v_max(q3, v_max(q2, v_max(q1, q0))); /* (x > m ? x : m, in order) */         \
            size_t o = ((k + (size_t)cb) * PH + q) * PW + w;                                       \
            V_ROWW(pa + o * SC__TW, j) = m;                                                        \
            v_pool_hits_store(hits + o * SC__TW + (size_t)j * VW, q0, q1, q2, q3, m, relu);        \
          }                                                                                        \
        }
/* the bytes of a window's hits (see V_CPOOL_BLOCK) */
static inline __attribute__((always_inline)) void
v_pool_hits_store(uint8_t *h, sc_vf q0, sc_vf q1, sc_vf q2, sc_vf q3, sc_vf m, int relu) {
#if VW == 16
  __m512 mm = (__m512)m;
  __m512i ix = _mm512_set1_epi32(4);
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q3, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(3));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q2, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(2));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q1, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(1));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q0, mm, _CMP_EQ_OQ),
                             _mm512_setzero_si512());
  if (relu)
    ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask(mm, _mm512_setzero_ps(), _CMP_LE_OQ),
                               _mm512_set1_epi32(4));
  _mm_storeu_si128((__m128i *)(void *)h, _mm512_cvtepi32_epi8(ix));
#else
  sc_vi ix = (sc_vi){0} + 4;
  ix = (sc_vi)v_sel(q3 == m, (sc_vf)((sc_vi){0} + 3), (sc_vf)ix);
  ix = (sc_vi)v_sel(q2 == m, (sc_vf)((sc_vi){0} + 2), (sc_vf)ix);
  ix = (sc_vi)v_sel(q1 == m, (sc_vf)((sc_vi){0} + 1), (sc_vf)ix);
  ix = (sc_vi)v_sel(q0 == m, (sc_vf)((sc_vi){0}), (sc_vf)ix);
  if (relu) ix = (sc_vi)v_sel(m <= 0.0f, (sc_vf)((sc_vi){0} + 4), (sc_vf)ix);
  __m128i lo = _mm256_castsi256_si128((__m256i)ix), hi = _mm256_extracti128_si256((__m256i)ix, 1);
  __m128i w16 = _mm_packus_epi32(lo, hi);
  _mm_storel_epi64((__m128i *)(void *)h, _mm_packus_epi16(w16, w16));
#endif
}
static void vec_conv_pool_fwd_f32(float *restrict pa, uint8_t *restrict hits,
                                  const float *restrict W, const float *restrict b,
                                  const float *restrict x, int relu, const sc__lplan *P) {
  size_t R = P->R, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp, K = P->oc, k = 0;
  size_t PH = P->oh / 2, PW = P->ow / 2;
  const size_t *roff = P->roff;
#if VW == 16
  V_CPOOL_BLOCK(6)
  V_CPOOL_BLOCK(4)
#else
  V_CPOOL_BLOCK(2)
#endif
  V_CPOOL_BLOCK(1)
}
#undef V_CPOOL_BLOCK
/* vec_pool2_act_bwd_f32 with the hits of vec_conv_pool_fwd_f32 instead of the conv's output
 * (its dz where the byte names the position, 0 elsewhere; the bias lanes in the same order):
 * the same bits */
static void vec_pool2_hits_bwd_f32(float *restrict dx, const uint8_t *restrict hits,
                                   const float *restrict dz, float *restrict bl,
                                   const sc__lplan *P) {
  v_pool2_bwd(dx, NULL, NULL, hits, dz, bl, 0, P);
}
