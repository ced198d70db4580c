/* kernels/vec_f64.h — the double kernels that the ISA files (kernels/avx2.c, avx512.c)
 * take from explicit vector code instead of the portable source (SC__VEC_F64): only where
 * the compiler's own vectorisation of the portable loop measured badly, or where another
 * form measured faster for double.
 *
 * vec_dwl_fold_f64: gw[k] += the SC__TW lanes of wl[k]. The portable sc__dwl_fold is
 * vectorised by GCC across k, with 4 x 4 transposes and spills (40 % of a batch-32
 * valgrad of 1 -> 32 relu -> 1 on AVX2); here each weight's lanes are added as two 4-wide
 * vectors, in exactly sc__dwl_fold's order (partial sums s_j over the lanes t = j mod 8, in
 * lane order, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))), so the bits are the
 * scalar path's. */
#ifndef SC_KERNELS_VEC_F64_H
#define SC_KERNELS_VEC_F64_H

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

/* dW of a small dense layer in dot form: gW[o*I + i] += the sum over the tile's SC__TW
 * samples of dz[o][t] x[i][t], as two 4-wide partial sums (lanes t mod 8 < 4 and >= 4,
 * samples in order), added as ((s0[0] + s1[0]) + (s0[1] + s1[1])) + ((s0[2] + s1[2]) +
 * (s0[3] + s1[3])). On the double paths it replaces the lane form, whose read-modify-write
 * of O x I x SC__TW accumulators per tile (and their fold per slice) was the largest cost
 * of a small double valgrad; for float the lane form stays (twice the lanes per vector). */
static inline void vec_dense_dwd_f64(double *restrict gW, const double *restrict dz,
                                     const double *restrict x, size_t O, size_t I) {
  for (size_t o = 0; o < O; o++) {
    const double *d = dz + o * SC__TW;
    for (size_t i = 0; i < I; i++) {
      const double *xi = x + i * SC__TW;
      sc_v4d s0 = *(const sc_v4d *)(const void *)d * *(const sc_v4d *)(const void *)xi;
      sc_v4d s1 = *(const sc_v4d *)(const void *)(d + 4) * *(const sc_v4d *)(const void *)(xi + 4);
      for (int t = 8; t < SC__TW; t += 8) {
        s0 += *(const sc_v4d *)(const void *)(d + t) * *(const sc_v4d *)(const void *)(xi + t);
        s1 += *(const sc_v4d *)(const void *)(d + t + 4) *
              *(const sc_v4d *)(const void *)(xi + t + 4);
      }
      gW[o * I + i] += ((s0[0] + s1[0]) + (s0[1] + s1[1])) + ((s0[2] + s1[2]) + (s0[3] + s1[3]));
    }
  }
}

#endif
