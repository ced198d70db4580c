/* kernels/x86/vone.h — the one-state dense kernels' parts that do not depend on the vector
 * width, for vone_*_f64 (4 doubles, kernels/x86/f64.h) and vonef_* (8 floats, one_f32.h): T the
 * element type, VT the vector type of W_ lanes, LD / ST its unaligned load and store, SPLAT its
 * broadcast. */
#ifndef SC__VONE_PARTS
#define SC__VONE_PARTS 1
/* dx[i] = sum_o W[o I + i] d[o] for 3 <= I (then dx[I..) padding = 0): column blocks of 2 W
 * and W lanes, rows in pairs (four or two chains), the last columns as one vector */
#define SC__VONE_DX_COLS(T, VT, W_, LD, ST, SPLAT)                                                 \
  do {                                                                                             \
    size_t i = 0;                                                                                  \
    for (; i + 2 * (W_) <= I; i += 2 * (W_)) {                                                     \
      VT a0 = SPLAT(0), a1 = a0, b0 = a0, b1 = a0;                                                 \
      size_t o = 0;                                                                                \
      for (; o + 2 <= O; o += 2) {                                                                 \
        VT d0 = SPLAT(d[o]), d1 = SPLAT(d[o + 1]);                                                 \
        a0 += LD(W + o * I + i) * d0;                                                              \
        a1 += LD(W + o * I + i + (W_)) * d0;                                                       \
        b0 += LD(W + (o + 1) * I + i) * d1;                                                        \
        b1 += LD(W + (o + 1) * I + i + (W_)) * d1;                                                 \
      }                                                                                            \
      if (o < O) {                                                                                 \
        VT d0 = SPLAT(d[o]);                                                                       \
        a0 += LD(W + o * I + i) * d0;                                                              \
        a1 += LD(W + o * I + i + (W_)) * d0;                                                       \
      }                                                                                            \
      ST(dx + i) = a0 + b0;                                                                        \
      ST(dx + i + (W_)) = a1 + b1;                                                                 \
    }                                                                                              \
    for (; i + (W_) <= I; i += (W_)) {                                                             \
      VT a0 = SPLAT(0), b0 = a0;                                                                   \
      size_t o = 0;                                                                                \
      for (; o + 2 <= O; o += 2) {                                                                 \
        a0 += LD(W + o * I + i) * SPLAT(d[o]);                                                     \
        b0 += LD(W + (o + 1) * I + i) * SPLAT(d[o + 1]);                                           \
      }                                                                                            \
      if (o < O) a0 += LD(W + o * I + i) * SPLAT(d[o]);                                            \
      ST(dx + i) = a0 + b0;                                                                        \
    }                                                                                              \
    if (i < I) {                                                                                   \
      VT t = SPLAT(0);                                                                             \
      for (size_t j = 0; i + j < I; j++) {                                                         \
        T s = 0;                                                                                   \
        for (size_t o = 0; o < O; o++) s += W[o * I + i + j] * d[o];                               \
        t[j] = s;                                                                                  \
      }                                                                                            \
      ST(dx + i) = t;                                                                              \
    }                                                                                              \
  } while (0)
/* gW[o I + i] += d[o] x[i] for the rows from o on, then gb[o] += d[o] for all (gb may be
 * NULL); returns from the function */
#define SC__VONE_DW_ROWS(T, VT, W_, LD, ST, SPLAT)                                                 \
  do {                                                                                             \
    for (; o < O; o++) {                                                                           \
      T *restrict g = gW + o * I;                                                                  \
      VT dv = SPLAT(d[o]);                                                                         \
      size_t i = 0;                                                                                \
      for (; i + (W_) <= I; i += (W_)) ST(g + i) = LD(g + i) + dv * LD(x + i);                     \
      for (; i < I; i++) g[i] += d[o] * x[i];                                                      \
    }                                                                                              \
    if (!gb) return;                                                                               \
    for (o = 0; o + (W_) <= O; o += (W_)) ST(gb + o) = LD(gb + o) + LD(d + o);                     \
    for (; o < O; o++) gb[o] += d[o];                                                              \
  } while (0)
#endif
