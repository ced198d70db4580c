/* src/typed/conv.h — the convolution and max-pool layers' portable kernels. */
/* Convolutions see their input as a tile of C x Hp x Wp rows (already zero-padded when
 * the layer pads), each row SC__TW samples. Output position (u, v) reads the R taps
 * x + (u*sh*Wp + v*sw + roff[r]) rows: the convolution is a dense layer over windows. */
SC__KSTATIC void SC__TN(sc__conv_fwd)(SC__T *restrict a, SC__T *restrict z, const SC__T *restrict W,
                                      const SC__T *restrict b, const SC__T *restrict x,
                                      const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  const size_t *roff = P->roff;
  for (size_t k = 0; k < P->oc; k++) {
    const SC__T *w = W + k * R;
    SC__T bk = b ? b[k] : 0;
    for (size_t u = 0; u < OH; u++)
      for (size_t v = 0; v < OW; v++) {
        SC__T acc[SC__TW];
        const SC__T *base = x + (u * sh * WP + v * sw) * SC__TW;
        for (int t = 0; t < SC__TW; t++) acc[t] = bk;
        for (size_t r = 0; r < R; r++) {
          const SC__T *xr = base + roff[r] * SC__TW;
          SC__T wr = w[r];
          for (int t = 0; t < SC__TW; t++) acc[t] += wr * xr[t];
        }
        size_t o = (k * OH + u) * OW + v;
        SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, P->spec.act);
      }
  }
}

/* conv dW in lane form: wl[(k*R + r)*TW + t] += sum_{u,v} dz[k][u][v][t] x[tap][t] */
SC__KSTATIC void SC__TN(sc__conv_dwl)(SC__T *restrict wl, const SC__T *restrict dz,
                                      const SC__T *restrict x, const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  for (size_t k = 0; k < P->oc; k++)
    for (size_t r = 0; r < R; r++) {
      SC__T acc[SC__TW];
      SC__T *w = wl + (k * R + r) * SC__TW;
      for (int t = 0; t < SC__TW; t++) acc[t] = w[t];
      const SC__T *xr = x + P->roff[r] * SC__TW;
      for (size_t u = 0; u < OH; u++)
        for (size_t v = 0; v < OW; v++) {
          const SC__T *d = dz + ((k * OH + u) * OW + v) * SC__TW;
          const SC__T *xv = xr + (u * sh * WP + v * sw) * SC__TW;
          for (int t = 0; t < SC__TW; t++) acc[t] += d[t] * xv[t];
        }
      for (int t = 0; t < SC__TW; t++) w[t] = acc[t];
    }
}

/* conv input gradient (unpadded input layout): dx[c][y][x] = sum over the taps (k, i, j)
 * with y + ph = u*sh + i and x + pw = v*sw + j of W[k][c][i][j] dz[k][u][v] */
SC__KSTATIC void SC__TN(sc__conv_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                     const SC__T *restrict dz, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, C = P->ic, R = P->R;
  for (size_t c = 0; c < C; c++)
    for (size_t y = 0; y < P->ih; y++)
      for (size_t xx = 0; xx < P->iw; xx++) {
        SC__T acc[SC__TW];
        for (int t = 0; t < SC__TW; t++) acc[t] = 0;
        for (size_t i = 0; i < KH; i++) {
          size_t yy = y + ph;
          if (yy < i || (yy - i) % sh) continue;
          size_t u = (yy - i) / sh;
          if (u >= OH) continue;
          for (size_t j = 0; j < KW; j++) {
            size_t xp = xx + pw;
            if (xp < j || (xp - j) % sw) continue;
            size_t v = (xp - j) / sw;
            if (v >= OW) continue;
            for (size_t k = 0; k < P->oc; k++) {
              SC__T w = W[k * R + (c * KH + i) * KW + j];
              const SC__T *d = dz + ((k * OH + u) * OW + v) * SC__TW;
              for (int t = 0; t < SC__TW; t++) acc[t] += w * d[t];
            }
          }
        }
        SC__T *o = dx + ((c * P->ih + y) * P->iw + xx) * SC__TW;
        for (int t = 0; t < SC__TW; t++) o[t] = acc[t];
      }
}

/* zero-padded copy of a C x H x W tile into C x Hp x Wp */
static void SC__TN(sc__pad)(SC__T *restrict xp, const SC__T *restrict x, const sc__lplan *P) {
  size_t ph = P->spec.ph, pw = P->spec.pw;
  memset(xp, 0, P->ic * P->hp * P->wp * SC__TW * sizeof(SC__T));
  for (size_t c = 0; c < P->ic; c++)
    for (size_t y = 0; y < P->ih; y++)
      memcpy(xp + ((c * P->hp + y + ph) * P->wp + pw) * SC__TW,
             x + ((c * P->ih + y) * P->iw) * SC__TW, P->iw * SC__TW * sizeof(SC__T));
}

SC__KSTATIC void SC__TN(sc__pool_fwd)(SC__T *restrict a, const SC__T *restrict x,
                                      const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        SC__T m[SC__TW];
        const SC__T *x0 = x + ((c * P->ih + u * KH) * P->iw + v * KW) * SC__TW;
        for (int t = 0; t < SC__TW; t++) m[t] = x0[t];
        for (size_t i = 0; i < KH; i++)
          for (size_t j = 0; j < KW; j++) {
            const SC__T *xi = x0 + (i * P->iw + j) * SC__TW;
            for (int t = 0; t < SC__TW; t++) m[t] = xi[t] > m[t] ? xi[t] : m[t];
          }
        SC__T *o = a + ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int t = 0; t < SC__TW; t++) o[t] = m[t];
      }
}

/* the gradient goes to the first element of each window equal to its max */
SC__KSTATIC void SC__TN(sc__pool_bwd)(SC__T *restrict dx, const SC__T *restrict x,
                                      const SC__T *restrict a, const SC__T *restrict dz,
                                      const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  if (P->oh * KH != P->ih || P->ow * KW != P->iw) /* rows/columns outside every window */
    memset(dx, 0, P->in * SC__TW * sizeof(SC__T));
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        size_t o = ((c * P->oh + u) * P->ow + v) * SC__TW;
        SC__T taken[SC__TW];
        for (int t = 0; t < SC__TW; t++) taken[t] = 0;
        for (size_t i = 0; i < KH; i++)
          for (size_t j = 0; j < KW; j++) {
            size_t q = ((c * P->ih + u * KH + i) * P->iw + v * KW + j) * SC__TW;
            for (int t = 0; t < SC__TW; t++) {
              int hit = x[q + (size_t)t] == a[o + (size_t)t] && taken[t] == 0;
              dx[q + (size_t)t] = hit ? dz[o + (size_t)t] : 0;
              taken[t] = hit ? 1 : taken[t];
            }
          }
      }
}
