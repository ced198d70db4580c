/* src/typed/dense.h — the dense layer's portable kernels: the fused forward (W x + b, then the
 * activation), dW in dot form over a transposed tile, and dx. Dimension letters: O outputs,
 * I inputs. */
SC__KSTATIC void SC__TN(sc__dense_fwd)(SC__T *restrict a, SC__T *restrict z,
                                       const SC__T *restrict W, const SC__T *restrict b,
                                       const SC__T *restrict x, size_t O, size_t I, sc_act act) {
  size_t o = 0;
  for (; o + SC__OB <= O; o += SC__OB) {
    SC__T acc[SC__OB][SC__TW];
    const SC__T *w = W + o * I;
    for (int t0 = 0; t0 < SC__TW; t0 += SC__CW) { /* OB x CW accumulators in registers */
      SC__T ac[SC__OB][SC__CW];
      for (int k = 0; k < SC__OB; k++) {
        SC__T bk = b ? b[o + k] : 0;
        for (int t = 0; t < SC__CW; t++) ac[k][t] = bk;
      }
      for (size_t i = 0; i < I; i++) {
        const SC__T *xi = x + i * SC__TW + t0;
        for (int k = 0; k < SC__OB; k++) {
          SC__T wk = w[(size_t)k * I + i];
          for (int t = 0; t < SC__CW; t++) ac[k][t] += wk * xi[t];
        }
      }
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) acc[k][t0 + t] = ac[k][t];
    }
    for (int k = 0; k < SC__OB; k++)
      SC__TN(sc__act_row)(a + (o + k) * SC__TW, z ? z + (o + k) * SC__TW : NULL, acc[k], act);
  }
  for (; o < O; o++) { /* one row: TW accumulators fit, and more chains hide the latency */
    SC__T acc[SC__TW];
    const SC__T *w = W + o * I;
    SC__T bo = b ? b[o] : 0;
    for (int t = 0; t < SC__TW; t++) acc[t] = bo;
    for (size_t i = 0; i < I; i++) {
      const SC__T *xi = x + i * SC__TW;
      SC__T wi = w[i];
      for (int t = 0; t < SC__TW; t++) acc[t] += wi * xi[t];
    }
    SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, act);
  }
}

SC__KSTATIC void SC__TN(sc__dense_dw)(SC__T *restrict gW, const SC__T *restrict dz,
                                      const SC__T *restrict xT, size_t O, size_t I, size_t ld) {
  size_t o = 0;
  for (; o + SC__OB <= O; o += SC__OB) {
    for (size_t i0 = 0; i0 < I; i0 += SC__IC) {
      SC__T acc[SC__OB][SC__IC];
      for (int k = 0; k < SC__OB; k++)
        for (int c = 0; c < SC__IC; c++) acc[k][c] = 0;
      for (int t = 0; t < SC__TW; t++) {
        const SC__T *xr = xT + (size_t)t * ld + i0;
        for (int k = 0; k < SC__OB; k++) {
          SC__T d = dz[(o + k) * SC__TW + (size_t)t];
          for (int c = 0; c < SC__IC; c++) acc[k][c] += d * xr[c];
        }
      }
      size_t nc = I - i0 < SC__IC ? I - i0 : SC__IC;
      for (int k = 0; k < SC__OB; k++) {
        SC__T *gr = gW + (o + k) * I + i0;
        for (size_t c = 0; c < nc; c++) gr[c] += acc[k][c];
      }
    }
  }
  for (; o < O; o++) {
    for (size_t i0 = 0; i0 < I; i0 += SC__IC) {
      SC__T acc[SC__IC];
      for (int c = 0; c < SC__IC; c++) acc[c] = 0;
      for (int t = 0; t < SC__TW; t++) {
        const SC__T *xr = xT + (size_t)t * ld + i0;
        SC__T d = dz[o * SC__TW + (size_t)t];
        for (int c = 0; c < SC__IC; c++) acc[c] += d * xr[c];
      }
      size_t nc = I - i0 < SC__IC ? I - i0 : SC__IC;
      SC__T *gr = gW + o * I + i0;
      for (size_t c = 0; c < nc; c++) gr[c] += acc[c];
    }
  }
}

SC__KSTATIC void SC__TN(sc__dense_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                      const SC__T *restrict dz, size_t O, size_t I) {
  size_t i = 0;
  for (; i + SC__OB <= I; i += SC__OB)
    for (int t0 = 0; t0 < SC__TW; t0 += SC__CW) { /* OB x CW accumulators in registers */
      SC__T acc[SC__OB][SC__CW];
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) acc[k][t] = 0;
      for (size_t o = 0; o < O; o++) {
        const SC__T *d = dz + o * SC__TW + t0;
        const SC__T *w = W + o * I + i;
        for (int k = 0; k < SC__OB; k++) {
          SC__T wk = w[k];
          for (int t = 0; t < SC__CW; t++) acc[k][t] += wk * d[t];
        }
      }
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) dx[(i + k) * SC__TW + (size_t)(t0 + t)] = acc[k][t];
    }
  for (; i < I; i++) { /* one row: TW accumulators */
    SC__T acc[SC__TW];
    for (int t = 0; t < SC__TW; t++) acc[t] = 0;
    for (size_t o = 0; o < O; o++) {
      const SC__T *d = dz + o * SC__TW;
      SC__T wi = W[o * I + i];
      for (int t = 0; t < SC__TW; t++) acc[t] += wi * d[t];
    }
    for (int t = 0; t < SC__TW; t++) dx[i * SC__TW + (size_t)t] = acc[t];
  }
}
