/* src/typed/lanes.h — dW in lane form (dense layers with few weights, every conv): accumulators of
 * SC__TW lanes per weight, folded once per slice. */
/* dW in lane form: wl[(o*I + i)*TW + t] += dz[o][t] x[i][t] (= when first) */
SC__KSTATIC void SC__TN(sc__dense_dwl)(SC__T *restrict wl, const SC__T *restrict dz,
                                       const SC__T *restrict x, size_t O, size_t I, int first) {
  for (size_t o = 0; o < O; o++)
    for (size_t i = 0; i < I; i++) {
      SC__T *w = wl + (o * I + i) * SC__TW;
      if (first) /* the slice's first tile writes: no zeroing pass */
        for (int t = 0; t < SC__TW; t++)
          w[t] = dz[o * SC__TW + (size_t)t] * x[i * SC__TW + (size_t)t];
      else
        for (int t = 0; t < SC__TW; t++)
          w[t] += dz[o * SC__TW + (size_t)t] * x[i * SC__TW + (size_t)t];
    }
}

/* gw[k] += the TW lanes of wl[k], in a fixed order: 8 partial sums (lanes t = j mod 8, in
 * lane order), then added pairwise. A single chain of TW dependent additions per weight
 * was the slowest part of a small double-precision valgrad (the BNN of examples/bnn.c). */
SC__KSTATIC void SC__TN(sc__dwl_fold)(SC__T *restrict gw, const SC__T *restrict wl, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const SC__T *w = wl + k * SC__TW;
    SC__T s[8];
    for (int j = 0; j < 8; j++) s[j] = w[j];
    for (int t = 8; t < SC__TW; t += 8)
      for (int j = 0; j < 8; j++) s[j] += w[t + j];
    gw[k] += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
}
