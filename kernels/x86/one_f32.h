/* kernels/x86/one_f32.h — the one-state path's dense layers in float on 8-wide vectors. */
#include "vone.h"
/* The one-state path's dense layers in float (sc_apply, sc_vjp, sc_jvp), as explicit 8-wide
 * code: vone_*_f64's method with 8 lanes. The portable loops (sc__one_dense_* below), as
 * GCC vectorised them with AVX-512 flags, made sc_apply of 2 -> 50 tanh -> 50 tanh -> 2
 * slower on the AVX-512 set than on the portable one (954 against 711 ns on Zen 4; the
 * dense forward 82 % of it: Zen 4, 2026-11-24). W is read in its row-major layout
 * only; every output is written up to a multiple of 8, the padding with zeros. The sums are
 * in another order than the portable ones: results agree to the last bits only. */
typedef float sc_v8f __attribute__((vector_size(32), aligned(4), may_alias));
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SC__SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int sc__v8i __attribute__((vector_size(32)));
#define SC__SHUF8(a, b, ...) __builtin_shuffle(a, b, (sc__v8i){__VA_ARGS__})
#endif
#define SC__LD8(ptr) (*(const sc_v8f *)(const void *)(ptr))
#define SC__ST8(ptr) (*(sc_v8f *)(void *)(ptr))

static inline sc_v8f vonef_splat(float v) { return (sc_v8f){v, v, v, v, v, v, v, v}; }

/* the eight sums of r[0..7]'s lanes, as one vector (lane j: the sum of r[j]) */
static inline sc_v8f vonef_hsum8(const sc_v8f *r) {
  sc_v8f t[4], u[2];
  for (int q = 0; q < 4; q++)
    t[q] = SC__SHUF8(r[2 * q], r[2 * q + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
           SC__SHUF8(r[2 * q], r[2 * q + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  for (int q = 0; q < 2; q++)
    u[q] = SC__SHUF8(t[2 * q], t[2 * q + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
           SC__SHUF8(t[2 * q], t[2 * q + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  return SC__SHUF8(u[0], u[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         SC__SHUF8(u[0], u[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

/* the sum over i < I of w[i] x[i]: 8 lanes in two chains, then the tail */
static inline float vonef_rowdot(const float *restrict w, const float *restrict x, size_t I) {
  sc_v8f s0 = vonef_splat(0), s1 = s0;
  size_t i = 0;
  for (; i + 16 <= I; i += 16) {
    s0 += SC__LD8(w + i) * SC__LD8(x + i);
    s1 += SC__LD8(w + i + 8) * SC__LD8(x + i + 8);
  }
  if (i + 8 <= I) s0 += SC__LD8(w + i) * SC__LD8(x + i), i += 8;
  s0 += s1;
  float s = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
  for (; i < I; i++) s += w[i] * x[i];
  return s;
}

/* pre[o] = b[o] + sum_i W[o I + i] x[i] for o < O (b may be NULL); pre[O..O8) = 0 */
static void vonef_fwd(float *restrict pre, const float *restrict W, const float *restrict b,
                      const float *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v8f xv = vonef_splat(x[0]);
    for (; o + 8 <= O; o += 8)
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + SC__LD8(W + o) * xv;
  } else if (I == 2) { /* eight rows are two vectors (w00 w01 ... w31), (w40 ... w71) */
    sc_v8f xx = {x[0], x[1], x[0], x[1], x[0], x[1], x[0], x[1]};
    for (; o + 8 <= O; o += 8) {
      sc_v8f p0 = SC__LD8(W + 2 * o) * xx, p1 = SC__LD8(W + 2 * o + 8) * xx;
      sc_v8f s = SC__SHUF8(p0, p1, 0, 2, 4, 6, 8, 10, 12, 14) +
                 SC__SHUF8(p0, p1, 1, 3, 5, 7, 9, 11, 13, 15);
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + s;
    }
  } else if (I >= 8) {
    for (; o + 8 <= O; o += 8) {
      const float *w0 = W + o * I;
      sc_v8f r[8];
      for (int q = 0; q < 8; q++) r[q] = vonef_splat(0);
      size_t i = 0;
      for (; i + 8 <= I; i += 8) {
        sc_v8f xv = SC__LD8(x + i);
        for (int q = 0; q < 8; q++) r[q] += SC__LD8(w0 + q * I + i) * xv;
      }
      sc_v8f s = vonef_hsum8(r);
      for (; i < I; i++) {
        sc_v8f wc;
        for (int q = 0; q < 8; q++) wc[q] = w0[q * I + i];
        s += wc * vonef_splat(x[i]);
      }
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + s;
    }
  }
  /* the rows left (all of them for I = 3 to 7), 8 at a time, the last vector with the padding */
  for (; o < O; o += 8) {
    sc_v8f t = vonef_splat(0);
    for (size_t j = 0; j < 8 && o + j < O; j++)
      t[j] = (b ? b[o + j] : 0) + vonef_rowdot(W + (o + j) * I, x, I);
    SC__ST8(pre + o) = t;
  }
}

/* dx[i] = sum_o W[o I + i] d[o] for i < I; dx[I..I8) = 0 */
static void vonef_dx(float *restrict dx, const float *restrict W, const float *restrict d, size_t O,
                     size_t I) {
  if (I == 1) {
    SC__ST8(dx) = (sc_v8f){vonef_rowdot(W, d, O), 0, 0, 0, 0, 0, 0, 0};
  } else if (I == 2) { /* (w00 w01 w10 w11 ...) (d0 d0 d1 d1 ...): even lanes dx0, odd dx1 */
    sc_v8f a0 = vonef_splat(0), a1 = a0;
    size_t o = 0;
    for (; o + 8 <= O; o += 8) {
      sc_v8f dv = SC__LD8(d + o);
      a0 += SC__LD8(W + 2 * o) * SC__SHUF8(dv, dv, 0, 0, 1, 1, 2, 2, 3, 3);
      a1 += SC__LD8(W + 2 * o + 8) * SC__SHUF8(dv, dv, 4, 4, 5, 5, 6, 6, 7, 7);
    }
    a0 += a1;
    float s0 = (a0[0] + a0[2]) + (a0[4] + a0[6]), s1 = (a0[1] + a0[3]) + (a0[5] + a0[7]);
    for (; o < O; o++) s0 += W[2 * o] * d[o], s1 += W[2 * o + 1] * d[o];
    SC__ST8(dx) = (sc_v8f){s0, s1, 0, 0, 0, 0, 0, 0};
  } else
    SC__VONE_DX_COLS(float, sc_v8f, 8, SC__LD8, SC__ST8, vonef_splat);
}

/* gW[o I + i] += d[o] x[i], gb[o] += d[o] (gb may be NULL) */
static void vonef_dw(float *restrict gW, float *restrict gb, const float *restrict d,
                     const float *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v8f xv = vonef_splat(x[0]);
    for (; o + 8 <= O; o += 8) SC__ST8(gW + o) = SC__LD8(gW + o) + SC__LD8(d + o) * xv;
  } else if (I == 2) {
    sc_v8f xx = {x[0], x[1], x[0], x[1], x[0], x[1], x[0], x[1]};
    for (; o + 8 <= O; o += 8) {
      sc_v8f dv = SC__LD8(d + o);
      SC__ST8(gW + 2 * o) = SC__LD8(gW + 2 * o) + SC__SHUF8(dv, dv, 0, 0, 1, 1, 2, 2, 3, 3) * xx;
      SC__ST8(gW + 2 * o + 8) =
          SC__LD8(gW + 2 * o + 8) + SC__SHUF8(dv, dv, 4, 4, 5, 5, 6, 6, 7, 7) * xx;
    }
  }
  SC__VONE_DW_ROWS(float, sc_v8f, 8, SC__LD8, SC__ST8, vonef_splat);
}
