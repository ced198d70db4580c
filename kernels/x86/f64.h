/* kernels/x86/f64.h — the double vector kernels of an x86 kernel set: those that the sets take
 * from explicit vector code instead of the portable source, only where the compiler's own
 * vectorisation of the portable loop measured badly, or where another form measured faster for
 * double. Included in a set's double instantiation, after the portable kernels. */
#include "vone.h"
/* vec_dwl_fold_f64: gw[k] += the SC__TW lanes of wl[k]. The portable sc__dwl_fold is
 * vectorised by GCC across k, with 4 x 4 transposes and spills (40 % of a batch-32
 * valgrad of 1 -> 32 relu -> 1 on AVX2); here each weight's lanes are added as two 4-wide
 * vectors, in exactly sc__dwl_fold's order (partial sums s_j over the lanes t = j mod 8, in
 * lane order, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))), so the bits are the
 * scalar path's. */
#if SC__TW % 8 != 0
#error "vec_dwl_fold_f64 needs a tile width that is a multiple of 8"
#endif

typedef double sc_v4d __attribute__((vector_size(32), aligned(8), may_alias));

static inline void vec_dwl_fold_f64(double *restrict gw, const double *restrict wl, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const double *w = wl + k * SC__TW;
    sc_v4d a = *(const sc_v4d *)(const void *)w, b = *(const sc_v4d *)(const void *)(w + 4);
    for (int t = 8; t < SC__TW; t += 8) {
      a += *(const sc_v4d *)(const void *)(w + t);
      b += *(const sc_v4d *)(const void *)(w + t + 4);
    }
    gw[k] += ((a[0] + a[1]) + (a[2] + a[3])) + ((b[0] + b[1]) + (b[2] + b[3]));
  }
}

/* The dense forward and dx of the batch paths in double, as explicit vector code of the ISA's
 * width (8 doubles on AVX-512, 4 on AVX2), register blocks of DOB rows x 2 vectors. GCC's own
 * vectorisation of the portable loops (sc__dense_fwd, sc__dense_dx) on AVX-512 ran across
 * the rows of a register block, with vpermt2pd transposes into and out of it: on Zen 4 the
 * BNN's gradient (1 -> 32 relu -> 1, batch 100) took 6.5 us on AVX-512 against 5.6 on AVX2
 * (Zen 4, 2026-11-24). Each output's sum is the portable one (the bias or 0, then
 * the products in input order, each a multiply-add): the same bits. vec_dense_dx_act_f64
 * also applies the activation pullback of the dense layer below (identity, relu, tanh,
 * sigmoid: sc__act_bwd's operations) and adds its bias lanes, as vec_dense_dx_act_f32 does,
 * so the pass of sc__act_bwd_lane over that layer is saved. */
#if defined(SC__ISA_AVX512)
#define DVW 8 /* doubles per vector */
#define DOB 8 /* rows per register block: 8 x 2 accumulators */
#else
#define DVW 4
#define DOB 4 /* 4 x 2 accumulators of 16 registers */
#endif
#define DNV (SC__TW / DVW) /* vectors per tile row */
typedef double sc_vd __attribute__((vector_size(DVW * 8), aligned(8), may_alias));
typedef long long sc_vdl __attribute__((vector_size(DVW * 8), aligned(8), may_alias));
#define D_ROW(p, j) (((const sc_vd *)(const void *)(p))[j])
#define D_ROWW(p, j) (((sc_vd *)(void *)(p))[j])
#if DVW == 8
#define D_SPLAT(s) ((sc_vd){(s), (s), (s), (s), (s), (s), (s), (s)})
#else
#define D_SPLAT(s) ((sc_vd){(s), (s), (s), (s)})
#endif
/* v where m is false, else 0 (m: a comparison's lanes, all ones or all zeros) */
#define D_ZERO_IF(m, v) ((sc_vd)((sc_vdl)(v) & ~(sc_vdl)(m)))

/* acc[k][j] (NB rows, NVB vectors from vector jc of a tile row) = INIT(k), then for each of
 * the n steps s in order, += wp[s * ws + k * wk] times vector jc + j of tile row s of src: a
 * dense layer's sums in register blocks (the forward: rows of W against x's rows; dx: columns
 * of W against dz's rows) */
#define D_ACC(NB, NVB, INIT, src, n, wp, ws, wk)                                                   \
  sc_vd acc[NB][NVB];                                                                              \
  _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) {                                          \
    sc_vd ik = INIT(k);                                                                            \
    _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) acc[k][j] = ik;                          \
  }                                                                                                \
  for (size_t s = 0; s < (n); s++) {                                                               \
    sc_vd sv[NVB];                                                                                 \
    _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) sv[j] =                                  \
        D_ROW((src) + s * SC__TW, jc + j);                                                         \
    const double *w = (wp) + s * (ws);                                                             \
    _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) {                                        \
      sc_vd wv = D_SPLAT(w[(size_t)k * (wk)]);                                                     \
      _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) acc[k][j] += wv * sv[j];               \
    }                                                                                              \
  }
#define D_BIAS(k) D_SPLAT(b ? b[o + (size_t)(k)] : 0.0)
#define D_ZERO(k) D_SPLAT(0.0)

/* rows o..o+NB of a = act(W x + b), NVB vectors of the tile at a time; identity and relu are
 * applied as the sums are stored (sc__act_n's operations), the other activations by
 * sc__act_row from tmp */
#define D_FWD_BODY(NB, NVB)                                                                        \
  {                                                                                                \
    _Pragma("GCC unroll 4") for (int jc = 0; jc < DNV; jc += NVB) {                                \
      D_ACC(NB, NVB, D_BIAS, x, I, W + o * I, 1, I)                                                \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++)                                        \
          _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) {                                  \
        sc_vd v = acc[k][j];                                                                       \
        size_t r = (o + (size_t)k) * SC__TW;                                                       \
        if (act == SC_IDENTITY || act == SC_RELU) {                                                \
          if (z) D_ROWW(z + r, jc + j) = v;                                                        \
          D_ROWW(a + r, jc + j) = act == SC_RELU ? D_ZERO_IF(v < 0.0, v) : v;                      \
        } else                                                                                     \
          D_ROWW(tmp + (size_t)k * SC__TW, jc + j) = v;                                            \
      }                                                                                            \
    }                                                                                              \
    if (act != SC_IDENTITY && act != SC_RELU)                                                      \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) SC__TN(sc__act_row)(                   \
          a + (o + (size_t)k) * SC__TW, z ? z + (o + (size_t)k) * SC__TW : NULL,                   \
          tmp + (size_t)k * SC__TW, act);                                                          \
    o += NB;                                                                                       \
  }

static void vec_dense_fwd_f64(double *restrict a, double *restrict z, const double *restrict W,
                              const double *restrict b, const double *restrict x, size_t O,
                              size_t I, sc_act act) {
  double tmp[DOB * SC__TW] __attribute__((aligned(64)));
  size_t o = 0;
  while (o + DOB <= O) D_FWD_BODY(DOB, 2)
#if DOB > 4
  if (o + 4 <= O) D_FWD_BODY(4, 2)
#endif
  while (o < O) D_FWD_BODY(1, DNV) /* one row: the whole tile's vectors hide the latency */
}

/* rows i..i+NB of dx = W^T dz, then the layer below's pullback and bias lanes */
#define D_DX_BODY(NB, NVB)                                                                         \
  {                                                                                                \
    _Pragma("GCC unroll 4") for (int jc = 0; jc < DNV; jc += NVB) {                                \
      D_ACC(NB, NVB, D_ZERO, dz, O, W + i, I, 1)                                                   \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++)                                        \
          _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) {                                  \
        sc_vd v = acc[k][j];                                                                       \
        size_t r = (i + (size_t)k) * SC__TW;                                                       \
        if (act != SC_IDENTITY) { /* the layer below's derivative, from its output xa */           \
          sc_vd av = D_ROW(xa + r, jc + j);                                                        \
          if (act == SC_RELU)                                                                      \
            v = D_ZERO_IF(av <= 0.0, v);                                                           \
          else if (act == SC_TANH)                                                                 \
            v *= 1.0 - av * av;                                                                    \
          else                                                                                     \
            v *= av * (1.0 - av);                                                                  \
        }                                                                                          \
        D_ROWW(dx + r, jc + j) = v;                                                                \
        if (bl) D_ROWW(bl + r, jc + j) = D_ROW(bl + r, jc + j) + v;                                \
      }                                                                                            \
    }                                                                                              \
    i += NB;                                                                                       \
  }

static inline __attribute__((always_inline)) void
vec_dense_dx_body_f64(double *restrict dx, const double *restrict W, const double *restrict dz,
                      size_t O, size_t I, sc_act act, const double *restrict xa,
                      double *restrict bl) {
  size_t i = 0;
  while (i + DOB <= I) D_DX_BODY(DOB, 2)
#if DOB > 4
  if (i + 4 <= I) D_DX_BODY(4, 2)
#endif
  while (i < I) D_DX_BODY(1, DNV)
}
static void vec_dense_dx_f64(double *restrict dx, const double *restrict W,
                             const double *restrict dz, size_t O, size_t I) {
  vec_dense_dx_body_f64(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL);
}
static void vec_dense_dx_act_f64(double *restrict dx, const double *restrict W,
                                 const double *restrict dz, size_t O, size_t I, sc_act act,
                                 const double *restrict xa, double *restrict bl) {
  vec_dense_dx_body_f64(dx, W, dz, O, I, act, xa, bl);
}
#undef D_FWD_BODY
#undef D_DX_BODY
#undef D_ACC
#undef D_BIAS
#undef D_ZERO
#undef D_ZERO_IF
#undef D_SPLAT
#undef D_ROWW
#undef D_ROW
#undef DNV
#undef DOB
#undef DVW

/* The one-state path's dense layers (sc_apply_f64, sc_vjp_f64, sc_jvp_f64: one sample, a
 * neural ODE's right-hand side), as explicit 4-wide code. The portable versions (sc__one_*
 * below) are plain loops the compiler vectorises with a scalar tail, a runtime alias check
 * and, for 2 inputs, strided column sums: for the ODE net 2 -> 50 tanh -> 2 that fixed cost
 * was most of the call (AVX2 Zen 3, 2026-11-23). Here W is read in its row-major
 * layout only (no reads past a row's or the matrix's end; a tail of fewer than 4 rows or
 * columns goes element by element) and every output is written up to a multiple of 4, the
 * padding with zeros, so that the activation loops that follow run on whole vectors. The
 * sums are in another order than the portable ones: results agree to the last bits only. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SC__SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
typedef long long sc__v4l __attribute__((vector_size(32)));
#define SC__SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (sc__v4l){i0, i1, i2, i3})
#endif
#define SC__LD4(ptr) (*(const sc_v4d *)(const void *)(ptr))
#define SC__ST4(ptr) (*(sc_v4d *)(void *)(ptr))

static inline sc_v4d vone_splat(double v) { return (sc_v4d){v, v, v, v}; }

/* the four sums of r0..r3's lanes: (sum r0, sum r1, sum r2, sum r3) */
static inline sc_v4d vone_hsum4(sc_v4d r0, sc_v4d r1, sc_v4d r2, sc_v4d r3) {
  sc_v4d t0 = SC__SHUF4(r0, r1, 0, 4, 2, 6) + SC__SHUF4(r0, r1, 1, 5, 3, 7);
  sc_v4d t1 = SC__SHUF4(r2, r3, 0, 4, 2, 6) + SC__SHUF4(r2, r3, 1, 5, 3, 7);
  return SC__SHUF4(t0, t1, 0, 1, 4, 5) + SC__SHUF4(t0, t1, 2, 3, 6, 7);
}

/* dW of a small dense layer in dot form: gW[o*I + i] += the sum over the tile's SC__TW
 * samples of dz[o][t] x[i][t], as two 4-wide partial sums (lanes t mod 8 < 4 and >= 4,
 * samples in order), added as ((s0[0] + s1[0]) + (s0[1] + s1[1])) + ((s0[2] + s1[2]) +
 * (s0[3] + s1[3])). On the double paths it replaces the lane form, whose read-modify-write
 * of O x I x SC__TW accumulators per tile (and their fold per slice) was the largest cost
 * of a small double valgrad; for float the lane form stays (twice the lanes per vector).
 * Four weights at a time (consecutive o*I + i): their four lane sums s0 + s1 are reduced
 * together by vone_hsum4's shuffles, which add them in the same pairs (the same bits as one
 * at a time); one at a time, the horizontal sums were a quarter of the BNN's gradient. */
static inline sc_v4d vec_dwd_lanes(const double *restrict d, const double *restrict xi) {
  sc_v4d s0 = SC__LD4(d) * SC__LD4(xi), s1 = SC__LD4(d + 4) * SC__LD4(xi + 4);
  for (int t = 8; t < SC__TW; t += 8) {
    s0 += SC__LD4(d + t) * SC__LD4(xi + t);
    s1 += SC__LD4(d + t + 4) * SC__LD4(xi + t + 4);
  }
  return s0 + s1; /* (s0[j] + s1[j]) */
}
static inline void vec_dense_dwd_f64(double *restrict gW, const double *restrict dz,
                                     const double *restrict x, size_t O, size_t I) {
  size_t n = O * I, f = 0, o = 0, i = 0; /* (o, i): the weight f's row and column */
  for (; f + 4 <= n; f += 4) {
    sc_v4d u[4];
    for (int q = 0; q < 4; q++) {
      u[q] = vec_dwd_lanes(dz + o * SC__TW, x + i * SC__TW);
      if (++i == I) i = 0, o++;
    }
    SC__ST4(gW + f) = SC__LD4(gW + f) + vone_hsum4(u[0], u[1], u[2], u[3]);
  }
  for (; f < n; f++) {
    sc_v4d u = vec_dwd_lanes(dz + o * SC__TW, x + i * SC__TW);
    gW[f] += (u[0] + u[1]) + (u[2] + u[3]);
    if (++i == I) i = 0, o++;
  }
}

/* the sum over the inputs of row r (W + r I) times x, 4 lanes then the tail */
static inline double vone_rowdot(const double *restrict w, const double *restrict x, size_t I) {
  sc_v4d s0 = vone_splat(0), s1 = s0, s2 = s0, s3 = s0; /* four chains: it is latency-bound */
  size_t i = 0;
  for (; i + 16 <= I; i += 16) {
    s0 += SC__LD4(w + i) * SC__LD4(x + i);
    s1 += SC__LD4(w + i + 4) * SC__LD4(x + i + 4);
    s2 += SC__LD4(w + i + 8) * SC__LD4(x + i + 8);
    s3 += SC__LD4(w + i + 12) * SC__LD4(x + i + 12);
  }
  for (; i + 4 <= I; i += 4) s0 += SC__LD4(w + i) * SC__LD4(x + i);
  s0 = (s0 + s1) + (s2 + s3);
  double s = (s0[0] + s0[1]) + (s0[2] + s0[3]);
  for (; i < I; i++) s += w[i] * x[i];
  return s;
}

/* pre[o] = b[o] + sum_i W[o I + i] x[i] for o < O (b may be NULL); pre[O..O4) = 0 */
static void vone_fwd_f64(double *restrict pre, const double *restrict W, const double *restrict b,
                         const double *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v4d xv = vone_splat(x[0]);
    for (; o + 4 <= O; o += 4)
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + SC__LD4(W + o) * xv;
  } else if (I == 2) { /* four rows are two vectors (w00 w01 w10 w11), (w20 w21 w30 w31) */
    sc_v4d xx = {x[0], x[1], x[0], x[1]};
    for (; o + 4 <= O; o += 4) {
      sc_v4d p0 = SC__LD4(W + 2 * o) * xx, p1 = SC__LD4(W + 2 * o + 4) * xx;
      sc_v4d s = SC__SHUF4(p0, p1, 0, 2, 4, 6) + SC__SHUF4(p0, p1, 1, 3, 5, 7);
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + s;
    }
  } else if (I >= 4) {
    for (; o + 4 <= O; o += 4) {
      const double *w0 = W + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
      sc_v4d r0 = vone_splat(0), r1 = r0, r2 = r0, r3 = r0;
      size_t i = 0;
      for (; i + 4 <= I; i += 4) {
        sc_v4d xv = SC__LD4(x + i);
        r0 += SC__LD4(w0 + i) * xv;
        r1 += SC__LD4(w1 + i) * xv;
        r2 += SC__LD4(w2 + i) * xv;
        r3 += SC__LD4(w3 + i) * xv;
      }
      sc_v4d s = vone_hsum4(r0, r1, r2, r3);
      for (; i < I; i++) s += (sc_v4d){w0[i], w1[i], w2[i], w3[i]} * vone_splat(x[i]);
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + s;
    }
  }
  /* the rows left (all of them for I = 3), 4 at a time, the last vector with the padding (the
   * loads that follow read it so) */
  for (; o < O; o += 4) {
    sc_v4d t = vone_splat(0);
    for (size_t j = 0; j < 4 && o + j < O; j++)
      t[j] = (b ? b[o + j] : 0) + vone_rowdot(W + (o + j) * I, x, I);
    SC__ST4(pre + o) = t;
  }
}

/* dx[i] = sum_o W[o I + i] d[o] for i < I; dx[I..I4) = 0 */
static void vone_dx_f64(double *restrict dx, const double *restrict W, const double *restrict d,
                        size_t O, size_t I) {
  if (I == 1) {
    SC__ST4(dx) = (sc_v4d){vone_rowdot(W, d, O), 0, 0, 0};
  } else if (I == 2) { /* (w00 w01 w10 w11) (d0 d0 d1 d1): lanes 0, 2 go to dx0, 1, 3 to dx1 */
    sc_v4d a0 = vone_splat(0), a1 = a0, a2 = a0, a3 = a0;
    size_t o = 0;
    for (; o + 8 <= O; o += 8) {
      sc_v4d dv = SC__LD4(d + o), dw = SC__LD4(d + o + 4);
      a0 += SC__LD4(W + 2 * o) * SC__SHUF4(dv, dv, 0, 0, 1, 1);
      a1 += SC__LD4(W + 2 * o + 4) * SC__SHUF4(dv, dv, 2, 2, 3, 3);
      a2 += SC__LD4(W + 2 * o + 8) * SC__SHUF4(dw, dw, 0, 0, 1, 1);
      a3 += SC__LD4(W + 2 * o + 12) * SC__SHUF4(dw, dw, 2, 2, 3, 3);
    }
    if (o + 4 <= O) {
      sc_v4d dv = SC__LD4(d + o);
      a0 += SC__LD4(W + 2 * o) * SC__SHUF4(dv, dv, 0, 0, 1, 1);
      a1 += SC__LD4(W + 2 * o + 4) * SC__SHUF4(dv, dv, 2, 2, 3, 3);
      o += 4;
    }
    a0 = (a0 + a1) + (a2 + a3);
    double s0 = a0[0] + a0[2], s1 = a0[1] + a0[3];
    for (; o < O; o++) s0 += W[2 * o] * d[o], s1 += W[2 * o + 1] * d[o];
    SC__ST4(dx) = (sc_v4d){s0, s1, 0, 0};
  } else
    SC__VONE_DX_COLS(double, sc_v4d, 4, SC__LD4, SC__ST4, vone_splat);
}

/* gW[o I + i] += d[o] x[i], gb[o] += d[o] (gb may be NULL) */
static void vone_dw_f64(double *restrict gW, double *restrict gb, const double *restrict d,
                        const double *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v4d xv = vone_splat(x[0]);
    for (; o + 4 <= O; o += 4) SC__ST4(gW + o) = SC__LD4(gW + o) + SC__LD4(d + o) * xv;
  } else if (I == 2) {
    sc_v4d xx = {x[0], x[1], x[0], x[1]};
    for (; o + 4 <= O; o += 4) {
      sc_v4d dv = SC__LD4(d + o);
      SC__ST4(gW + 2 * o) = SC__LD4(gW + 2 * o) + SC__SHUF4(dv, dv, 0, 0, 1, 1) * xx;
      SC__ST4(gW + 2 * o + 4) = SC__LD4(gW + 2 * o + 4) + SC__SHUF4(dv, dv, 2, 2, 3, 3) * xx;
    }
  }
  SC__VONE_DW_ROWS(double, sc_v4d, 4, SC__LD4, SC__ST4, vone_splat);
}
#define SC__K_FOLD_TW vec_dwl_fold_f64
#define SC__K_DWD vec_dense_dwd_f64 /* small dense layers: dW in dot form, not lane form */
#define SC__K_FWD vec_dense_fwd_f64
#define SC__K_DX vec_dense_dx_f64
#define SC__K_DX_ACT vec_dense_dx_act_f64
#define SC__DX_ACT_OK(act)                                                                         \
  ((act) == SC_IDENTITY || (act) == SC_RELU || (act) == SC_TANH || (act) == SC_SIGMOID)
#define SC__DWD_DENSE 1
