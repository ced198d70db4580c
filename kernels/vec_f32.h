/* kernels/vec_f32.h — float dense kernels written with GCC/Clang vector extensions.
 *
 * Included by simplechain.c's typed section when an ISA file (kernels/avx2.c,
 * kernels/avx512.c) defines SC__VEC_F32: one source, compiled per ISA. VW is the
 * native vector width in floats (16 for AVX-512, 8 for AVX2); a tile row of SC__TW
 * samples is NV = SC__TW / VW native vectors. VOB output rows are blocked so that their
 * VOB x NV accumulators stay in registers. The ISA files compile with
 * -ffp-contract=fast, so `acc += w * x` is one FMA.
 *
 * Dimension letters as in simplechain.c: O outputs, I inputs, ld transposed row length.
 */
#ifndef SC_KERNELS_VEC_F32_H
#define SC_KERNELS_VEC_F32_H

#ifndef VOB
#error "define VOB (rows per register block) before including vec_f32.h"
#endif

#if defined(__AVX512F__) || defined(SC__ISA_AVX512)
#define VW 16
#else
#define VW 8
#endif
#define NV (SC__TW / VW) /* native vectors per tile row */
#define NC (16 / VW)     /* native vectors per 16-column chunk of the dW block */
/* forward and dx work on column chunks of NVB vectors (AVX-512: the whole 32-sample row;
 * AVX2: 16 samples, so that VOB x NVB accumulators and the operands fit in 16 ymm) */
#define NVB (NV < 2 ? NV : 2)
#if SC__TW % VW != 0
#error "the tile width must be a multiple of the vector width"
#endif

#include <immintrin.h>
typedef float sc_vf __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef float sc_vfu __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int32_t sc_vi __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef uint32_t sc_vu __attribute__((vector_size(VW * 4), aligned(VW * 4)));

/* one float in every lane: set1, not {0} + s, which is an add GCC must keep (-0 + 0
 * is +0) and which stops it from folding the broadcast into the FMA's memory operand */
#if VW == 16
#define V_BCAST(s) ((sc_vf)_mm512_set1_ps((float)(s)))
#else
#define V_BCAST(s) ((sc_vf)_mm256_set1_ps((float)(s)))
#endif
#define V_ROW(ptr, j) (((const sc_vf *)(const void *)(ptr))[j])
#define V_ROWW(ptr, j) (((sc_vf *)(void *)(ptr))[j])

static inline __attribute__((always_inline)) sc_vf v_sel(sc_vi m, sc_vf a, sc_vf b) {
  return (sc_vf)(((sc_vi)a & m) | ((sc_vi)b & ~m)); /* m ? a : b, per lane */
}
/* min / max as single instructions (a select costs a compare and two logic ops) */
/* a * b + c as one FMA whatever the contraction pass would pick (it may fuse either
 * product of a sum of two products, which changes the rounding) */
#if VW == 16
#define V_FMA(a, b, c) ((sc_vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define V_FMA(a, b, c) ((sc_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#endif
#if VW == 16
#define v_min(a, b) ((sc_vf)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define v_max(a, b) ((sc_vf)_mm512_max_ps((__m512)(a), (__m512)(b)))
/* x >= t ? a : b */
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm512_mask_blend_ps(_mm512_cmp_ps_mask((__m512)(x), _mm512_set1_ps(t), _CMP_GE_OQ),     \
                               (__m512)(b), (__m512)(a)))
#else
#define v_min(a, b) ((sc_vf)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define v_max(a, b) ((sc_vf)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm256_blendv_ps((__m256)(b), (__m256)(a),                                               \
                           _mm256_cmp_ps((__m256)(x), _mm256_set1_ps(t), _CMP_GE_OQ)))
#endif
/* relu as max(0, z): MAXPS returns its second operand when either is NaN, so a NaN stays
 * NaN (as in the portable z < 0 ? 0 : z) */
#define v_relu(z) v_max(V_BCAST(0.0f), (z))

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
 * divide was measured slower: it lengthens the chain. */
static inline __attribute__((always_inline)) sc_vf v_tanh(sc_vf x) {
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
  sc_vf y = E / (E + 2.0f);
  sc_vf z = ax * ax;
  sc_vf ys = (ax * z) * (((1.92903522e-02f * z - 5.36949411e-02f) * z + 1.33321747e-01f) * z -
                         3.33333194e-01f) +
             ax;
  y = v_ge_sel(ax, 0.35f, y, ys);
  return (sc_vf)((sc_vu)y | sign);
}

#if defined(SC_TANH_SLEEF) && defined(SC__SLEEF)
/* opt-in (make SC_TANH=sleef): SLEEF's 3.5-ULP tanhf instead of ours */
#define V_TANH(v) SC__SLEEF_TANHF(v)
#else
#define V_TANH(v) v_tanh(v)
#endif

/* a[k] = tanh(a[k]) for n native vectors: a tight loop, so that the polynomial's
 * constants stay in registers (applied to a block's 16 accumulators at once, they
 * spilled) */
static void v_tanh_inplace(float *restrict a, size_t n) {
  sc_vf *A = (sc_vf *)(void *)a;
  for (size_t k = 0; k < n; k++) A[k] = V_TANH(A[k]);
}

/* activation of one accumulated tile row (NV vectors), stored to a (and z if asked) */
static inline __attribute__((always_inline)) void v_act_store(float *restrict a, float *restrict z,
                                                              const sc_vf *acc, sc_act act) {
  int j;
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
    sc__act_row_f32(a, z, tmp, act);
    return;
  }
  }
}

/* pre-activations (relu applied: the other activations run afterwards as a pass over
 * whole rows) of exactly NB output rows starting at o, column chunk by column chunk
 * (NB x NVB accumulators in registers); o += NB */
#define V_FWD_BODY(NB)                                                                             \
  {                                                                                                \
    const float *w = W + o * I;                                                                    \
    for (int jc = 0; jc < NV; jc += NVB) {                                                         \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                       \
        sc_vf bk = V_BCAST(b ? b[o + k] : 0.0f);                                                   \
        for (int j = 0; j < NVB; j++) acc[k][j] = bk;                                              \
      }                                                                                            \
      for (size_t i = 0; i < I; i++) {                                                             \
        sc_vf xv[NVB];                                                                             \
        for (int j = 0; j < NVB; j++) xv[j] = V_ROW(x + i * SC__TW, jc + j);                       \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[(size_t)k * I + i]);                                                \
          for (int j = 0; j < NVB; j++) acc[k][j] += wk * xv[j];                                   \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NVB; j++)           \
          V_ROWW(a + (o + k) * SC__TW, jc + j) = act == SC_RELU ? v_relu(acc[k][j]) : acc[k][j];   \
    }                                                                                              \
    o += NB;                                                                                       \
  }

/* the activation pass after the GEMM: tanh in place, the others (not hot) through the
 * portable row function; identity and relu are done */
static void v_act_rows(float *restrict a, float *restrict z, size_t O, sc_act act) {
  if (act == SC_IDENTITY || act == SC_RELU) return;
  if (act == SC_TANH) {
    v_tanh_inplace(a, O * NV);
    return;
  }
  for (size_t o = 0; o < O; o++) {
    float tmp[SC__TW] __attribute__((aligned(64)));
    for (int j = 0; j < NV; j++) V_ROWW(tmp, j) = V_ROW(a + o * SC__TW, j);
    sc__act_row_f32(a + o * SC__TW, z ? z + o * SC__TW : NULL, tmp, act);
  }
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

/* a = act(W x + b). The O rows are cut into ceil(O / VOB) blocks of nearly equal size
 * (84 rows: 7 x 8 + 4 x 7, 10 rows: 2 x 5), so no block is left with a few accumulators
 * waiting on FMA latency. Each output's sum runs over i in the same order whatever the
 * blocking, so the results do not depend on it. */
static void vec_dense_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                              const float *restrict b, const float *restrict x, size_t O, size_t I,
                              sc_act act) {
  size_t nb = (O + VOB - 1) / VOB, base = O / nb, extra = O % nb, o = 0;
  if (extra == 0 && base == VOB) { /* the common case: whole blocks of VOB rows */
    while (o < O) V_FWD_BODY(VOB)
    v_act_rows(a, z, O, act);
    return;
  }
  for (size_t bi = 0; bi < nb; bi++) {
    switch (base + (bi < extra ? 1 : 0)) {
    case 1: V_FWD_BODY(1) break;
    case 2: V_FWD_BODY(2) break;
    case 3: V_FWD_BODY(3) break;
    case 4: V_FWD_BODY(4) break;
#if VOB > 4
    case 5: V_FWD_BODY(5) break;
    case 6: V_FWD_BODY(6) break;
    case 7: V_FWD_BODY(7) break;
    case 8: V_FWD_BODY(8) break;
#endif
    default: break; /* not reached: blocks hold 1..VOB rows */
    }
  }
  v_act_rows(a, z, O, act);
}

/* gW[o][i] += sum_t dz[o][t] xT[t][i]: 16 columns of NB rows per register block
 * (used for layers too large for the lane form below) */
#define V_DW_BLOCK(NB)                                                                             \
  for (; o + NB <= O; o += NB)                                                                     \
    for (size_t i0 = 0; i0 < I; i0 += 16) {                                                        \
      sc_vf acc[NB][NC];                                                                           \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++)            \
          acc[k][j] = V_BCAST(0.0f);                                                               \
      const float *d = dz + o * SC__TW;                                                            \
      for (int t = 0; t < SC__TW; t++) {                                                           \
        sc_vf xv[NC];                                                                              \
        for (int j = 0; j < NC; j++) xv[j] = V_ROW(xT + (size_t)t * ld + i0, j);                   \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf dk = V_BCAST(d[k * SC__TW + t]);                                                   \
          for (int j = 0; j < NC; j++) acc[k][j] += dk * xv[j];                                    \
        }                                                                                          \
      }                                                                                            \
      if (i0 + 16 <= I) {                                                                          \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++)(         \
            (sc_vfu *)(void *)(gW + (o + k) * I + i0))[j] += acc[k][j];                            \
      } else {                                                                                     \
        for (int k = 0; k < NB; k++) {                                                             \
          float tmp[16] __attribute__((aligned(64)));                                              \
          for (int j = 0; j < NC; j++) V_ROWW(tmp, j) = acc[k][j];                                 \
          for (size_t c = 0; c < I - i0; c++) gW[(o + k) * I + i0 + c] += tmp[c];                  \
        }                                                                                          \
      }                                                                                            \
    }

static void vec_dense_dw_f32(float *restrict gW, const float *restrict dz, const float *restrict xT,
                             size_t O, size_t I, size_t ld) {
  size_t o = 0;
  V_DW_BLOCK(VOB)
#if VOB > 4
  V_DW_BLOCK(4)
#endif
  V_DW_BLOCK(1)
}

/* dx[i][t] = sum_o W[o][i] dz[o][t]: NB input rows x NVB vectors per register block */
#define V_DX_BLOCK(NB)                                                                             \
  for (; i + NB <= I; i += NB)                                                                     \
    for (int jc = 0; jc < NV; jc += NVB) {                                                         \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NVB; j++)           \
          acc[k][j] = V_BCAST(0.0f);                                                               \
      for (size_t o = 0; o < O; o++) {                                                             \
        sc_vf dv[NVB];                                                                             \
        for (int j = 0; j < NVB; j++) dv[j] = V_ROW(dz + o * SC__TW, jc + j);                      \
        const float *w = W + o * I + i;                                                            \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[k]);                                                                \
          for (int j = 0; j < NVB; j++) acc[k][j] += wk * dv[j];                                   \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NVB; j++) {         \
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
    }

/* dx = W^T dz, then, for the dense layer below whose output xa is this layer's input,
 * its activation pullback dx *= act'(xa) (identity, relu, tanh, sigmoid: the same
 * operations as sc__act_bwd) and its bias lanes bl += dx (bl may be NULL): the pullback
 * of one layer and the activation step of the next in one sweep */
static inline __attribute__((always_inline)) void
vec_dense_dx_body(float *restrict dx, const float *restrict W, const float *restrict dz, size_t O,
                  size_t I, sc_act act, const float *restrict xa, float *restrict bl) {
  size_t i = 0;
  V_DX_BLOCK(VOB)
#if VOB > 4
  V_DX_BLOCK(4)
#endif
  V_DX_BLOCK(1)
}
static void vec_dense_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                             size_t O, size_t I) {
  vec_dense_dx_body(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL);
}
static void vec_dense_dx_act_f32(float *restrict dx, const float *restrict W,
                                 const float *restrict dz, size_t O, size_t I, sc_act act,
                                 const float *restrict xa, float *restrict bl) {
  vec_dense_dx_body(dx, W, dz, O, I, act, xa, bl);
}

/* dW in lane form (small layers): wl[(o*I + i)*VW + lane] += sum over the tile's
 * vectors j of dz[o][j*VW + lane] x[i][j*VW + lane]. Each accumulator is one native
 * vector, loaded and stored once per tile for NV FMAs; four rows share each x load. */
/* the lane-form dW over T tiles (1 or 2, a constant after inlining), tile 0 first: each
 * accumulator gets its FMAs in the same order as from T one-tile calls; first: the slice's
 * first write, which stores the products instead of adding them to the accumulator */
static inline __attribute__((always_inline)) void vec_dense_dwl_n(float *restrict wl,
                                                                  const float *const dz[2],
                                                                  const float *const x[2], int T,
                                                                  size_t O, size_t I, int first) {
  sc_vf *A = (sc_vf *)(void *)wl;
  size_t o = 0;
  for (; o + 4 <= O; o += 4) {
    sc_vf d[4][2 * NV];
    for (int k = 0; k < 4; k++)
      for (int m = 0; m < T * NV; m++) d[k][m] = V_ROW(dz[m / NV] + (o + k) * SC__TW, m % NV);
    for (size_t i = 0; i < I; i++) {
      sc_vf xv[2 * NV];
      for (int m = 0; m < T * NV; m++) xv[m] = V_ROW(x[m / NV] + i * SC__TW, m % NV);
      for (int k = 0; k < 4; k++) {
        sc_vf acc = first ? d[k][0] * xv[0] : V_FMA(d[k][0], xv[0], A[(o + k) * I + i]);
        for (int m = 1; m < T * NV; m++) acc = V_FMA(d[k][m], xv[m], acc);
        A[(o + k) * I + i] = acc;
      }
    }
  }
  for (; o < O; o++)
    for (size_t i = 0; i < I; i++) {
      sc_vf d0 = V_ROW(dz[0] + o * SC__TW, 0), x0 = V_ROW(x[0] + i * SC__TW, 0);
      sc_vf acc = first ? d0 * x0 : V_FMA(d0, x0, A[o * I + i]);
      for (int m = 1; m < T * NV; m++)
        acc = V_FMA(V_ROW(dz[m / NV] + o * SC__TW, m % NV), V_ROW(x[m / NV] + i * SC__TW, m % NV),
                    acc);
      A[o * I + i] = acc;
    }
}

static void vec_dense_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                              size_t O, size_t I, int first) {
  const float *const dzs[2] = {dz, dz}, *const xs[2] = {x, x};
  vec_dense_dwl_n(wl, dzs, xs, 1, O, I, first);
}

#if VW == 16
#define SC__VEC_DWL2 1
/* two tiles in one pass (A, then B): one accumulator load and store per 4 FMAs instead of
 * 2; the zmm store (one per cycle) is what bounds the one-tile form. Same bits as two
 * vec_dense_dwl_f32 calls. */
static void vec_dense_dwl2_f32(float *restrict wl, const float *restrict dzA,
                               const float *restrict xA, const float *restrict dzB,
                               const float *restrict xB, size_t O, size_t I, int first) {
  const float *const dzs[2] = {dzA, dzB}, *const xs[2] = {xA, xB};
  vec_dense_dwl_n(wl, dzs, xs, 2, O, I, first);
}
#endif

/* gw[k] += the VW lanes of wl[k], summed in lane order (once per slice) */
static void vec_dwl_fold_f32(float *restrict gw, const float *restrict wl, size_t n) {
  for (size_t k = 0; k < n; k++) {
    float s = 0;
    for (int l = 0; l < VW; l++) s += wl[k * VW + (size_t)l];
    gw[k] += s;
  }
}

/* ---------------------------------------------------------------- convolutions */
#define SC__VEC_CONV 1
/* Blocking: CB output channels x XB output columns share each input load and each
 * weight broadcast (AVX-512: 4 x 2 x 2 = 16 zmm accumulators; AVX2: 2 x 1 x 4). The
 * backward: DW_KB channels x DW_RB taps of dW, CDX_CB input channels of dx per register block.
 * AVX2 has 16 registers: 3 x 3 (9 accumulators + 3 dz rows + 1) and 3 x 4 lanes (12 + 4)
 * measured best on LeNet5 (AVX2 EPYC, 1 thread, 3 alternating runs each): conv2's backward
 * 142 -> 96 ms, conv1's 49 -> 30 ms, the epoch 0.33 -> 0.27 s; 2 x 2 and 4 x 4 had spilled
 * (dx) or left the loads the bound (dW). The blocks only group weights and channels: every
 * sum keeps its order, so the results do not change by a bit. -D overrides them (tuning). */
#if VW == 16
#define CONV_CB 4
#define CONV_XB 2
#define DW_KB 4
#define DW_RB 4
#define CDX_CB 4
#else
#define CONV_CB 2
#define CONV_XB 1
#ifndef DW_KB
#define DW_KB 3
#endif
#ifndef DW_RB
#define DW_RB 3
#endif
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

#define V_CONV_ROWS(CB)                                                                            \
  for (; k + CB <= K; k += CB)                                                                     \
    for (size_t u = 0; u < OH; u++) {                                                              \
      size_t v = 0;                                                                                \
      V_CONV_BLOCK(CB, CONV_XB)                                                                    \
      V_CONV_BLOCK(CB, 1)                                                                          \
    }

static void vec_conv_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                             const float *restrict b, const float *restrict x, const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  size_t K = P->oc, k = 0;
  const size_t *roff = P->roff;
  V_CONV_ROWS(CONV_CB)
#if CONV_CB > 2
  V_CONV_ROWS(2)
#endif
  V_CONV_ROWS(1)
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

#define V_CDW_ROWS(KB)                                                                             \
  for (; k + KB <= K; k += KB) {                                                                   \
    size_t r = 0;                                                                                  \
    V_CDW_BLOCK(KB, DW_RB)                                                                         \
    V_CDW_BLOCK(KB, 1)                                                                             \
  }

static void vec_conv_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                             const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  size_t K = P->oc, k = 0, NPOS = OH * OW;
  const size_t *roff = P->roff;
  sc_vf *A = (sc_vf *)(void *)wl;
  V_CDW_ROWS(DW_KB)
#if DW_KB > 2
  V_CDW_ROWS(2)
#endif
  V_CDW_ROWS(1)
}

/* conv input gradient, gathered per input position: CB input channels share each dz
 * load; the taps that reach position (y, x) depend only on (y, x) */
#define V_CDX_ROWS(CB)                                                                             \
  for (; c + CB <= C; c += CB)                                                                     \
    for (size_t y = 0; y < IH; y++)                                                                \
      for (size_t xx = 0; xx < IW; xx++) {                                                         \
        sc_vf acc[CB][NV];                                                                         \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int j = 0; j < NV; j++) acc[cb][j] = V_BCAST(0.0f);                                 \
        for (size_t i = 0; i < KH; i++) {                                                          \
          size_t yy = y + ph;                                                                      \
          if (yy < i || (yy - i) % sh) continue;                                                   \
          size_t u = (yy - i) / sh;                                                                \
          if (u >= OH) continue;                                                                   \
          for (size_t jj = 0; jj < KW; jj++) {                                                     \
            size_t xp = xx + pw;                                                                   \
            if (xp < jj || (xp - jj) % sw) continue;                                               \
            size_t v = (xp - jj) / sw;                                                             \
            if (v >= OW) continue;                                                                 \
            const float *dp = dz + (u * OW + v) * SC__TW;                                          \
            const float *wp = W + (c * KH + i) * KW + jj;                                          \
            for (size_t k = 0; k < K; k++) {                                                       \
              sc_vf d[NV];                                                                         \
              for (int j = 0; j < NV; j++) d[j] = V_ROW(dp + k * NPOS * SC__TW, j);                \
              for (int cb = 0; cb < CB; cb++) {                                                    \
                sc_vf w = V_BCAST(wp[k * R + (size_t)cb * KH * KW]);                               \
                for (int j = 0; j < NV; j++) acc[cb][j] += w * d[j];                               \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int j = 0; j < NV; j++)                                                             \
            V_ROWW(dx + (((c + cb) * IH + y) * IW + xx) * SC__TW, j) = acc[cb][j];                 \
      }

static void vec_conv_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                            const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, C = P->ic, R = P->R;
  size_t IH = P->ih, IW = P->iw, K = P->oc, NPOS = OH * OW, c = 0;
#if CDX_CB >= 4
  V_CDX_ROWS(4)
#endif
#if CDX_CB >= 3
  V_CDX_ROWS(3)
#endif
  V_CDX_ROWS(2)
  V_CDX_ROWS(1)
}

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

#if defined(__AVX512F__) || defined(SC__ISA_AVX512)
#include <immintrin.h>
#define SC__VEC_GATHER 1
/* In-register transpose of 16 rows of 16 floats: r[k] becomes column k. Four stages:
 * unpack pairs of rows, shuffle within 128-bit lanes, then two 128-bit lane shuffles. */
static inline __attribute__((always_inline)) void v_transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; k++) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 4; k++) {
    u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int m = 0; m < 4; m++) {
    __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
    __m512 w0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    __m512 v1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
    __m512 w1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[m + 8] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
    r[m + 4] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[m + 12] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
  }
}

/* tile (cols x SC__TW, feature-major) <- samples b0..b0+n (rows idx[b] or b) of a
 * row-major array: 16 x 16 blocks loaded row by row (masked at the column tail),
 * transposed in registers; padding samples become 0. */
static int vec_gather_f32(float *restrict tile, const float *restrict src, size_t cols,
                          const size_t *idx, size_t b0, size_t n) {
  if (!idx && n == SC__TW && (cols == 2 || cols == 4)) {
    /* a whole tile of consecutive rows with few columns (the toy's 4 inputs and 4
     * targets): the block is 2 * cols vectors, and column c of 16 samples is picked out
     * of them with two-table permutes (lane s takes element c + cols * s) instead of a
     * 16 x 16 transpose that is mostly padding */
    const float *blk = src + b0 * cols;
    for (size_t j = 0; j < SC__TW / 16; j++) {
      const float *g = blk + 16 * j * cols;
      for (size_t c = 0; c < cols; c++) {
        __m512 out;
        if (cols == 2) {
          __m512i ix = _mm512_add_epi32(
              _mm512_set1_epi32((int)c),
              _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
          out = _mm512_permutex2var_ps(_mm512_loadu_ps(g), ix, _mm512_loadu_ps(g + 16));
        } else { /* lanes 0..7 from the first two vectors, 8..15 from the last two */
          __m512i ix = _mm512_add_epi32(
              _mm512_set1_epi32((int)c),
              _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
          __m512 lo = _mm512_permutex2var_ps(_mm512_loadu_ps(g), ix, _mm512_loadu_ps(g + 16));
          __m512 hi = _mm512_permutex2var_ps(_mm512_loadu_ps(g + 32), ix, _mm512_loadu_ps(g + 48));
          out = _mm512_mask_blend_ps((__mmask16)0xFF00u, lo, hi);
        }
        _mm512_store_ps(tile + c * SC__TW + 16 * j, out);
      }
    }
    return 1;
  }
  for (size_t j = 0; j < SC__TW / 16; j++) {
    const float *row[16];
    for (size_t r = 0; r < 16; r++) {
      size_t t = 16 * j + r;
      row[r] = t < n ? src + (idx ? idx[b0 + t] : b0 + t) * cols : NULL;
    }
    for (size_t c0 = 0; c0 < cols; c0 += 16) {
      size_t nc = cols - c0 < 16 ? cols - c0 : 16;
      __mmask16 m = (__mmask16)(nc == 16 ? 0xFFFFu : (1u << nc) - 1u);
      __m512 R[16];
      for (int r = 0; r < 16; r++)
        R[r] = row[r] ? _mm512_maskz_loadu_ps(m, row[r] + c0) : _mm512_setzero_ps();
      v_transpose16(R);
      for (size_t k = 0; k < nc; k++) _mm512_store_ps(tile + (c0 + k) * SC__TW + 16 * j, R[k]);
    }
  }
  return 1;
}
#else
#define SC__VEC_GATHER 1
/* In-register transpose of 8 rows of 8 floats: r[k] becomes column k (unpack pairs, shuffle
 * within 128-bit lanes, then swap the lanes) */
static inline __attribute__((always_inline)) void v_transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; k++) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; k++) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int k = 0; k < 4; k++) {
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
}

/* AVX2: a whole tile of consecutive rows with 2 or 4 columns (the toy), 8 samples at a time
 * with in-lane transposes; anything else (any width, gathered rows idx, a partial tile) in
 * 8 x 8 blocks loaded row by row (masked at the column tail) and transposed in registers.
 * Data movement only: the same tile as the portable loop. (It was 27 % of the micro
 * benchmark's 24-column valgrad on the portable loop.) */
static int vec_gather_f32(float *restrict tile, const float *restrict src, size_t cols,
                          const size_t *idx, size_t b0, size_t n) {
  if (idx || n != SC__TW || (cols != 2 && cols != 4)) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t j = 0; j < SC__TW / 8; j++) {
      const float *row[8];
      for (size_t r = 0; r < 8; r++) {
        size_t t = 8 * j + r;
        row[r] = t < n ? src + (idx ? idx[b0 + t] : b0 + t) * cols : NULL;
      }
      for (size_t c0 = 0; c0 < cols; c0 += 8) {
        size_t nc = cols - c0 < 8 ? cols - c0 : 8;
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nc), lane);
        __m256 R[8];
        for (int r = 0; r < 8; r++)
          R[r] = !row[r]   ? _mm256_setzero_ps()
                 : nc == 8 ? _mm256_loadu_ps(row[r] + c0)
                           : _mm256_maskload_ps(row[r] + c0, m);
        v_transpose8(R);
        for (size_t k = 0; k < nc; k++) _mm256_store_ps(tile + (c0 + k) * SC__TW + 8 * j, R[k]);
      }
    }
    return 1;
  }
  const float *blk = src + b0 * cols;
  for (size_t j = 0; j < SC__TW / 8; j++) {
    const float *g = blk + 8 * j * cols;
    float *o = tile + 8 * j;
    if (cols == 4) { /* Vk = rows k | k + 4; two unpack stages give the columns */
      __m256 V[4], T[4];
      for (int k = 0; k < 4; k++)
        V[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(g + 4 * k)),
                                    _mm_loadu_ps(g + 16 + 4 * k), 1);
      T[0] = _mm256_unpacklo_ps(V[0], V[1]);
      T[1] = _mm256_unpackhi_ps(V[0], V[1]);
      T[2] = _mm256_unpacklo_ps(V[2], V[3]);
      T[3] = _mm256_unpackhi_ps(V[2], V[3]);
      _mm256_store_ps(o, _mm256_shuffle_ps(T[0], T[2], 0x44));
      _mm256_store_ps(o + SC__TW, _mm256_shuffle_ps(T[0], T[2], 0xEE));
      _mm256_store_ps(o + 2 * SC__TW, _mm256_shuffle_ps(T[1], T[3], 0x44));
      _mm256_store_ps(o + 3 * SC__TW, _mm256_shuffle_ps(T[1], T[3], 0xEE));
    } else { /* even / odd elements, then the 64-bit quarters put in order */
      __m256 A = _mm256_loadu_ps(g), B = _mm256_loadu_ps(g + 8);
      __m256 c0 = _mm256_shuffle_ps(A, B, 0x88), c1 = _mm256_shuffle_ps(A, B, 0xDD);
      _mm256_store_ps(o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(c0), 0xD8)));
      _mm256_store_ps(o + SC__TW,
                      _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(c1), 0xD8)));
    }
  }
  return 1;
}
#endif

#undef V_FWD_BODY
#undef V_DW_BLOCK
#undef V_DX_BLOCK
#endif
