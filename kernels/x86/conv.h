/* kernels/x86/conv.h — the convolution's float vector kernels: forward, dW in lane form, dx; each
 * in SC__CONV_NV register-block variants where the planner may choose. */
#define SC__VEC_CONV 1
/* Blocking: CB output channels x XB output columns share each input load and each
 * weight broadcast (AVX-512: 4 x 2 x 2 = 16 zmm accumulators; AVX2: 2 x 1 x 4). The
 * backward: KB channels x RB taps of dW, CDX_CB input channels of dx per register block.
 * AVX2 has 16 registers: 3 x 3 (9 accumulators + 3 dz rows + 1) and 3 x 4 lanes (12 + 4)
 * measured best on LeNet5 (AVX2 EPYC, 1 thread, 3 alternating runs each): conv2's backward
 * 142 -> 96 ms, conv1's 49 -> 30 ms, the epoch 0.33 -> 0.27 s; 2 x 2 and 4 x 4 had spilled
 * (dx) or left the loads the bound (dW). The blocks only group weights and channels: every
 * sum keeps its order, so the results do not change by a bit. */
/* The forward and dW blocks are planner variants (see sc__variant_plan: SC_CONV_FWD,
 * SC_CONV_DW, SC_PLAN=measure): index 0 is the rule's (the shapes measured best above),
 * the others also fit the register file (a one-channel block can take its input rows as
 * memory operands). */
#if VW == 16
#define V_CONV_FWD_BLOCKS(X) X(0, 4, 2) X(1, 6, 2) X(2, 8, 1)
#define V_CONV_DW_BLOCKS(X) X(0, 4, 4) X(1, 6, 4) X(2, 8, 2)
/* 6 x 4 for 6 channels (LeNet5's first conv; Zen 4, 1 thread, 20,000 images: its backward
 * 51.8 -> 47.0 ms, 4 runs; on 16 channels 4 x 4 stays faster: 125.4 against 131 ms) */
#define V_CONV_DW_K6 1
#define CDX_CB 6
#else
#define V_CONV_FWD_BLOCKS(X) X(0, 2, 1) X(1, 1, 3) X(2, 3, 1)
#define V_CONV_DW_BLOCKS(X) X(0, 3, 3) X(1, 2, 4) X(2, 4, 2)
#define V_CONV_DW_K6 0 /* 3 x 3 divides 6 already */
#ifndef CDX_CB
#define CDX_CB 3
#endif
#endif

#define V_CONV_BLOCK(CB, XB)                                                                       \
  for (; v + XB <= OW; v += XB) {                                                                  \
    sc_vf acc[CB][XB][NV];                                                                         \
    for (int cb = 0; cb < CB; cb++) {                                                              \
      sc_vf bk = V_BCAST(b ? b[k + cb] : 0.0f);                                                    \
      for (int xb = 0; xb < XB; xb++)                                                              \
        for (int j = 0; j < NV; j++) acc[cb][xb][j] = bk;                                          \
    }                                                                                              \
    const float *base = x + (u * sh * WP + v * sw) * SC__TW;                                       \
    for (size_t r = 0; r < R; r++) {                                                               \
      const float *xr = base + roff[r] * SC__TW;                                                   \
      sc_vf xv[XB][NV];                                                                            \
      for (int xb = 0; xb < XB; xb++)                                                              \
        for (int j = 0; j < NV; j++) xv[xb][j] = V_ROW(xr + (size_t)xb * sw * SC__TW, j);          \
      for (int cb = 0; cb < CB; cb++) {                                                            \
        sc_vf w = V_BCAST(W[(k + cb) * R + r]);                                                    \
        for (int xb = 0; xb < XB; xb++)                                                            \
          for (int j = 0; j < NV; j++) acc[cb][xb][j] += w * xv[xb][j];                            \
      }                                                                                            \
    }                                                                                              \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int xb = 0; xb < XB; xb++) {                                                            \
        size_t o = ((k + cb) * OH + u) * OW + v + xb;                                              \
        v_act_store(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc[cb][xb], P->spec.act);          \
      }                                                                                            \
  }

#define V_CONV_ROWS(CB, XB)                                                                        \
  for (; k + CB <= K; k += CB)                                                                     \
    for (size_t u = 0; u < OH; u++) {                                                              \
      size_t v = 0;                                                                                \
      V_CONV_BLOCK(CB, XB)                                                                         \
      V_CONV_BLOCK(CB, 1)                                                                          \
    }

/* one forward per block shape: CB channels x XB columns, then 2 and 1 channel(s) */
#define V_CONV_FWD_FN(I, CB, XB)                                                                   \
  static void vec_conv_fwd##I##_f32(float *restrict a, float *restrict z, const float *restrict W, \
                                    const float *restrict b, const float *restrict x,              \
                                    const sc__lplan *P) {                                          \
    size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;         \
    size_t K = P->oc, k = 0;                                                                       \
    const size_t *roff = P->roff;                                                                  \
    V_CONV_ROWS(CB, XB)                                                                            \
    if (CB > 2) {                                                                                  \
      V_CONV_ROWS(2, XB)                                                                           \
    }                                                                                              \
    V_CONV_ROWS(1, XB)                                                                             \
  }
V_CONV_FWD_BLOCKS(V_CONV_FWD_FN)

static void vec_conv_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                             const float *restrict b, const float *restrict x, const sc__lplan *P) {
  switch (P->conv_fwd) {
  case 1: vec_conv_fwd1_f32(a, z, W, b, x, P); break;
  case 2: vec_conv_fwd2_f32(a, z, W, b, x, P); break;
  default: vec_conv_fwd0_f32(a, z, W, b, x, P);
  }
}

/* conv dW in lane form: one native-vector accumulator per weight; KB channels x RB taps
 * per register block, the sum running over every output position of the tile */
#define V_CDW_BLOCK(KB, RB)                                                                        \
  for (; r + RB <= R; r += RB) {                                                                   \
    sc_vf acc[KB][RB];                                                                             \
    for (int kb = 0; kb < KB; kb++)                                                                \
      for (int rb = 0; rb < RB; rb++) acc[kb][rb] = A[(k + kb) * R + r + rb];                      \
    for (size_t u = 0; u < OH; u++)                                                                \
      for (size_t v = 0; v < OW; v++) {                                                            \
        const float *xp = x + (u * sh * WP + v * sw) * SC__TW;                                     \
        const float *dp = dz + (u * OW + v) * SC__TW;                                              \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf d[KB];                                                                             \
          for (int kb = 0; kb < KB; kb++) d[kb] = V_ROW(dp + (k + kb) * NPOS * SC__TW, j);         \
          for (int rb = 0; rb < RB; rb++) {                                                        \
            sc_vf xv = V_ROW(xp + roff[r + rb] * SC__TW, j);                                       \
            for (int kb = 0; kb < KB; kb++) acc[kb][rb] += d[kb] * xv;                             \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    for (int kb = 0; kb < KB; kb++)                                                                \
      for (int rb = 0; rb < RB; rb++) A[(k + kb) * R + r + rb] = acc[kb][rb];                      \
  }

#define V_CDW_ROWS(KB, RB)                                                                         \
  for (; k + KB <= K; k += KB) {                                                                   \
    size_t r = 0;                                                                                  \
    V_CDW_BLOCK(KB, RB)                                                                            \
    V_CDW_BLOCK(KB, 1)                                                                             \
  }

/* one dW per block shape: KB channels x RB taps, then 2 and 1 channel(s) */
#define V_CONV_DW_FN(I, KB, RB)                                                                    \
  static void vec_conv_dwl##I##_f32(float *restrict wl, const float *restrict dz,                  \
                                    const float *restrict x, const sc__lplan *P) {                 \
    size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;         \
    size_t K = P->oc, k = 0, NPOS = OH * OW;                                                       \
    const size_t *roff = P->roff;                                                                  \
    sc_vf *A = (sc_vf *)(void *)wl;                                                                \
    V_CDW_ROWS(KB, RB)                                                                             \
    if (KB > 2) {                                                                                  \
      V_CDW_ROWS(2, RB)                                                                            \
    }                                                                                              \
    V_CDW_ROWS(1, RB)                                                                              \
  }
V_CONV_DW_BLOCKS(V_CONV_DW_FN)

static void vec_conv_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                             const sc__lplan *P) {
  switch (P->conv_dw) {
  case 1: vec_conv_dwl1_f32(wl, dz, x, P); break;
  case 2: vec_conv_dwl2_f32(wl, dz, x, P); break;
  default: vec_conv_dwl0_f32(wl, dz, x, P);
  }
}

/* the block names, for the planner (index = variant) */
#define V_CONV_NAME(I, A, B) #A "x" #B,
static const char *const vec_conv_fwd_names[SC__CONV_NV + 1] = {V_CONV_FWD_BLOCKS(V_CONV_NAME)
                                                                    NULL};
static const char *const vec_conv_dw_names[SC__CONV_NV + 1] = {V_CONV_DW_BLOCKS(V_CONV_NAME) NULL};
#undef V_CONV_NAME

/* conv input gradient, gathered per input position: CB input channels share each dz
 * load; the taps that reach position (y, x) depend only on (y, x) */
/* whether kernel row i reaches input row y (padding ph, stride sh), and the output row u */
static inline __attribute__((always_inline)) int v_cdx_row(size_t y, size_t i, size_t ph, size_t sh,
                                                           size_t OH, size_t *u) {
  size_t yy = y + ph;
  if (yy < i || (yy - i) % sh) return 0;
  *u = (yy - i) / sh;
  return *u < OH;
}
#define V_CDX_POS(CB, xx)                                                                          \
  {                                                                                                \
    sc_vf acc[CB][NV];                                                                             \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int j = 0; j < NV; j++) acc[cb][j] = V_BCAST(0.0f);                                     \
    for (size_t i = 0, u; i < KH; i++) {                                                           \
      if (!v_cdx_row(y, i, ph, sh, OH, &u)) continue;                                              \
      for (size_t jj = 0; jj < KW; jj++) {                                                         \
        size_t xp = (xx) + pw;                                                                     \
        if (xp < jj || (xp - jj) % sw) continue;                                                   \
        size_t v = (xp - jj) / sw;                                                                 \
        if (v >= OW) continue;                                                                     \
        const float *dp = dz + (u * OW + v) * SC__TW;                                              \
        const float *wp = W + (c * KH + i) * KW + jj;                                              \
        for (size_t k = 0; k < K; k++) {                                                           \
          sc_vf d[NV];                                                                             \
          for (int j = 0; j < NV; j++) d[j] = V_ROW(dp + k * NPOS * SC__TW, j);                    \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf w = V_BCAST(wp[k * R + (size_t)cb * KH * KW]);                                   \
            for (int j = 0; j < NV; j++) acc[cb][j] += w * d[j];                                   \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int j = 0; j < NV; j++)                                                                 \
        V_ROWW(dx + (((c + cb) * IH + y) * IW + (xx)) * SC__TW, j) = acc[cb][j];                   \
  }
#define V_CDX_ROWS(CB)                                                                             \
  for (; c + CB <= C; c += CB)                                                                     \
    for (size_t y = 0; y < IH; y++)                                                                \
      for (size_t xx = 0; xx < IW; xx++) V_CDX_POS(CB, xx)

#if VW == 16
/* the same sums for XB neighbouring positions of a row at once (stride 1 across) where every
 * tap of the kernel reaches all of them (in LeNet5's conv2, 12 x 12 positions from an 8 x 8
 * output, the middle 4 of each row): CB x XB x NV accumulators (6 x 2 x 2 = 24 zmm), each
 * (tap, k) step's CB weights broadcast once for the XB positions, 10 loads per 24 FMAs against
 * 8 per 12; every other position as V_CDX_POS. Each sum gets the same FMAs in the same order:
 * the same bits. LeNet5's conv2 dx alone (one tile, operands hot, Zen 5): 52.9 -> 40.3 us; its
 * pullback in the epoch (1 thread, Fashion-MNIST, 3 alternating runs) 165.7 -> 146.0 ms. Blocks
 * of 3 channels x 4 positions (the same 24 accumulators, 11 loads per 24 FMAs) took 80 us, and
 * blocks that also took the positions a tap misses (a branch per position in the k loop, or a
 * k loop per position inside the block) 49-76 us (Zen 5, 2026-11-28). */
#define V_CDX_XROWS(CB, XB)                                                                        \
  for (; sw == 1 && c + CB <= C; c += CB)                                                          \
    for (size_t y = 0; y < IH; y++)                                                                \
      for (size_t xx = 0; xx < IW; xx++) {                                                         \
        if (xx + pw + 1 < KW || xx + pw + XB > OW || xx + XB > IW) {                               \
          V_CDX_POS(CB, xx) /* a tap of the kernel's misses a position of the block */             \
          continue;                                                                                \
        }                                                                                          \
        sc_vf acc[CB][XB][NV];                                                                     \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int xb = 0; xb < XB; xb++)                                                          \
            for (int j = 0; j < NV; j++) acc[cb][xb][j] = V_BCAST(0.0f);                           \
        for (size_t i = 0, u; i < KH; i++) {                                                       \
          if (!v_cdx_row(y, i, ph, sh, OH, &u)) continue;                                          \
          for (size_t jj = 0; jj < KW; jj++) {                                                     \
            const float *dp = dz + (u * OW + xx + pw - jj) * SC__TW;                               \
            const float *wp = W + (c * KH + i) * KW + jj;                                          \
            for (size_t k = 0; k < K; k++) {                                                       \
              sc_vf w[CB];                                                                         \
              for (int cb = 0; cb < CB; cb++) w[cb] = V_BCAST(wp[k * R + (size_t)cb * KH * KW]);   \
              for (int xb = 0; xb < XB; xb++) {                                                    \
                sc_vf d[NV];                                                                       \
                for (int j = 0; j < NV; j++)                                                       \
                  d[j] = V_ROW(dp + ((size_t)xb + k * NPOS) * SC__TW, j);                          \
                for (int cb = 0; cb < CB; cb++)                                                    \
                  for (int j = 0; j < NV; j++) acc[cb][xb][j] += w[cb] * d[j];                     \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int xb = 0; xb < XB; xb++)                                                          \
            for (int j = 0; j < NV; j++)                                                           \
              V_ROWW(dx + (((c + cb) * IH + y) * IW + xx + (size_t)xb) * SC__TW, j) =              \
                  acc[cb][xb][j];                                                                  \
        xx += XB - 1;                                                                              \
      }
#endif
static void vec_conv_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                            const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, C = P->ic, R = P->R;
  size_t IH = P->ih, IW = P->iw, K = P->oc, NPOS = OH * OW, c = 0;
#if VW == 16
  V_CDX_XROWS(6, 2)
#endif
#if CDX_CB >= 6
  V_CDX_ROWS(6)
#endif
#if CDX_CB >= 4
  V_CDX_ROWS(4)
#endif
#if CDX_CB >= 3
  V_CDX_ROWS(3)
#endif
  V_CDX_ROWS(2)
  V_CDX_ROWS(1)
}
