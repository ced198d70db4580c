/* kernels/vec_f64.h — the double kernels that the ISA files (kernels/avx2.c, avx512.c)
 * take from explicit vector code instead of the portable source (SC__VEC_F64): only where
 * the compiler's own vectorisation of the portable loop measured badly.
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

#endif
