/* ---------------------------------------------------------------- one state */
/* The single-state path (sc_apply, sc_vjp, sc_jvp): one sample, no tiles, so an ODE
 * right-hand side costs a few matrix-vector products. Activations of layer l live at
 * scratch + a_off (the first `out` elements of its tile area), gelu's pre-activations at
 * z_off, the cotangent in the d0/d1 areas and the tangent in the xT area... all inside
 * slice 0's tile memory, which is far larger than one sample needs.
 *   forward always; with v: du += J_u^T v (du may be NULL), dp += J_p^T v (may be NULL);
 *   with w: jw = J_u w. y (may be NULL) receives f(u). Dropout is the identity here. */
/* y[k] = act'(.) * y[k] for k < n (the pullback's act_bwd, which is also the tangent's) */
#if !SC__F32 && defined(SC__VEC_F64)
#define SC__ONE_VEC 1 /* the dense layers by vone_*_f64 */
#elif SC__F32 && defined(SC__VEC_F32)
#define SC__ONE_VEC 2 /* by vonef_* */
#else
#define SC__ONE_VEC 0
#endif
#define SC__ONE_ACTD(buf, a, z, n, act) SC__TN(sc__act_bwd)((buf), (a), (z), (n), (act))

/* The outputs u (of n_out) that tap i reaches inside an input of n_in with stride s and
 * padding p: 0 <= u s + i - p < n_in for u in [*lo, *hi) */
static inline void SC__TN(sc__one_taprange)(size_t n_out, size_t n_in, size_t s, size_t p, size_t i,
                                            size_t *lo, size_t *hi) {
  size_t l = i >= p ? 0 : (p - i + s - 1) / s;
  size_t h = n_in + p <= i ? 0 : (n_in - 1 + p - i) / s + 1;
  if (h > n_out) h = n_out;
  *lo = l;
  *hi = h > l ? h : l;
}

/* conv over one sample: out[k][u][v] = b[k] + the sum over the taps (ci, i, j) in order of
 * W * in, with zero padding. Tap by tap over whole output rows (contiguous, vectorised), where
 * each output took its taps one by one with two bounds checks each: every output gets the
 * same additions in the same order, so the same bits, and LeNet5's forward on one state ran
 * 3.5-4.5x faster (204-234 -> 51-58 us on a Zen 5 at 2baeba0, 2026-11-24) */
static void SC__TN(sc__one_conv)(SC__T *restrict out, const SC__T *restrict W,
                                 const SC__T *restrict b, const SC__T *restrict in,
                                 const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, npos = OH * OW;
  for (size_t k = 0; k < P->oc; k++) {
    SC__T *restrict o = out + k * npos, b0 = b ? b[k] : 0;
    for (size_t q = 0; q < npos; q++) o[q] = b0;
    for (size_t ci = 0; ci < P->ic; ci++)
      for (size_t i = 0; i < KH; i++) {
        size_t u0, u1;
        SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
        for (size_t j = 0; j < KW; j++) {
          size_t v0, v1;
          SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
          SC__T w = W[k * P->R + (ci * KH + i) * KW + j];
          for (size_t u = u0; u < u1; u++) {
            const SC__T *restrict r = in + (ci * P->ih + u * sh + i - ph) * P->iw;
            SC__T *restrict d = o + u * OW;
            if (sw == 1)
              for (size_t v = v0; v < v1; v++) d[v] += w * r[v + j - pw];
            else
              for (size_t v = v0; v < v1; v++) d[v] += w * r[v * sw + j - pw];
          }
        }
      }
  }
}

/* The pullback of a conv layer over one sample, for d = dL/d(pre-activation) (oc x npos):
 * dx (nxt, overwritten) and dp's weights and bias (added to). The same additions in the same
 * order as the direct loop over (k, u, v, ci, i, j) it replaces: into dx[ci][y][x], k by k,
 * and for each k the outputs (u, v) in raster order, which is the taps (i, j) in descending
 * order; into each weight and bias, the outputs in raster order. dW goes 16 channels at a
 * time along d transposed into dt (npos x KP, KP = oc rounded up to 16; free scratch). */
static void SC__TN(sc__one_conv_bwd)(SC__T *restrict nxt, SC__T *restrict dpw, SC__T *restrict dpb,
                                     SC__T *restrict dt, const SC__T *restrict d,
                                     const SC__T *restrict W, const SC__T *restrict xin,
                                     const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, npos = OH * OW, K = P->oc;
  if (dpb)
    for (size_t k = 0; k < K; k++) {
      SC__T s = dpb[k];
      for (size_t q = 0; q < npos; q++) s += d[k * npos + q];
      dpb[k] = s;
    }
  if (dpw) {
    size_t KP = (K + 15) & ~(size_t)15;
    for (size_t q = 0; q < npos; q++)
      for (size_t k = 0; k < KP; k++) dt[q * KP + k] = k < K ? d[k * npos + q] : 0;
    for (size_t k0 = 0; k0 < K; k0 += 16)
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t i = 0; i < KH; i++) {
          size_t u0, u1;
          SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
          for (size_t j = 0; j < KW; j++) {
            size_t v0, v1, r = (ci * KH + i) * KW + j;
            SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
            SC__T acc[16];
            for (size_t t = 0; t < 16; t++) acc[t] = k0 + t < K ? dpw[(k0 + t) * P->R + r] : 0;
            for (size_t u = u0; u < u1; u++) {
              const SC__T *restrict xr = xin + (ci * P->ih + u * sh + i - ph) * P->iw;
              for (size_t v = v0; v < v1; v++) {
                SC__T x = xr[v * sw + j - pw];
                const SC__T *restrict dq = dt + (u * OW + v) * KP + k0;
                for (size_t t = 0; t < 16; t++) acc[t] += dq[t] * x;
              }
            }
            for (size_t t = 0; t < 16 && k0 + t < K; t++) dpw[(k0 + t) * P->R + r] = acc[t];
          }
        }
  }
  if (!nxt) return;
  for (size_t e = 0; e < P->in; e++) nxt[e] = 0;
  for (size_t k = 0; k < K; k++)
    for (size_t ci = 0; ci < P->ic; ci++)
      for (size_t i = KH; i-- > 0;) {
        size_t u0, u1;
        SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
        for (size_t j = KW; j-- > 0;) {
          size_t v0, v1;
          SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
          SC__T w = W[k * P->R + (ci * KH + i) * KW + j];
          for (size_t u = u0; u < u1; u++) {
            SC__T *restrict nr = nxt + (ci * P->ih + u * sh + i - ph) * P->iw;
            const SC__T *restrict dr = d + k * npos + u * OW;
            if (sw == 1)
              for (size_t v = v0; v < v1; v++) nr[v + j - pw] += w * dr[v];
            else
              for (size_t v = v0; v < v1; v++) nr[v * sw + j - pw] += w * dr[v];
          }
        }
      }
}

/* index of the first maximum of each pool window, for one sample */
static size_t SC__TN(sc__one_argmax)(const SC__T *in, const sc__lplan *P, size_t c, size_t u,
                                     size_t v) {
  size_t best = (c * P->ih + u * P->spec.kh) * P->iw + v * P->spec.kw;
  for (size_t i = 0; i < P->spec.kh; i++)
    for (size_t j = 0; j < P->spec.kw; j++) {
      size_t q = (c * P->ih + u * P->spec.kh + i) * P->iw + v * P->spec.kw + j;
      if (in[q] > in[best]) best = q;
    }
  return best;
}

/* dot product with four partial sums (no long dependency chain; order fixed) */
static inline SC__T SC__TN(sc__dot)(const SC__T *restrict a, const SC__T *restrict b, size_t n) {
  SC__T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  if (n < 8) {
    for (; i < n; i++) s0 += a[i] * b[i];
    return s0;
  }
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

#if !SC__ONE_VEC /* else vone_*_f64 */
/* dx = W^T d for a dense layer (W: O x I): narrow inputs column by column (four
 * partial sums over o), wide ones row by row (vectorizable over i) */
static void SC__TN(sc__one_dense_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                     const SC__T *restrict d, size_t O, size_t I) {
  if (I < 16) {
    for (size_t i = 0; i < I; i++) {
      SC__T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t o = 0;
      for (; o + 4 <= O; o += 4) {
        s0 += W[o * I + i] * d[o];
        s1 += W[(o + 1) * I + i] * d[o + 1];
        s2 += W[(o + 2) * I + i] * d[o + 2];
        s3 += W[(o + 3) * I + i] * d[o + 3];
      }
      for (; o < O; o++) s0 += W[o * I + i] * d[o];
      dx[i] = (s0 + s1) + (s2 + s3);
    }
    return;
  }
  for (size_t i = 0; i < I; i++) dx[i] = 0;
  for (size_t o = 0; o < O; o++) {
    const SC__T *restrict wr = W + o * I;
    SC__T dv = d[o];
    for (size_t i = 0; i < I; i++) dx[i] += wr[i] * dv;
  }
}

/* a = b + W x for a dense layer (W: O x I, b may be NULL). Narrow inputs (I < 8, the first
 * layer of an ODE right-hand side) go column by column, vectorizable over the outputs, with
 * I a constant in each case; wide ones are one dot product per output. */
static inline void SC__TN(sc__one_fwd_cols)(SC__T *restrict a, const SC__T *restrict W,
                                            const SC__T *restrict b, const SC__T *restrict x,
                                            size_t O, const size_t I) {
  for (size_t o = 0; o < O; o++) {
    SC__T s = 0; /* the order of sc__dot for n < 8, then the bias */
    for (size_t i = 0; i < I; i++) s += W[o * I + i] * x[i];
    a[o] = (b ? b[o] : 0) + s;
  }
}

static void SC__TN(sc__one_dense_fwd)(SC__T *restrict a, const SC__T *restrict W,
                                      const SC__T *restrict b, const SC__T *restrict x, size_t O,
                                      size_t I) {
  switch (I) {
  case 1: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 1); return;
  case 2: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 2); return;
  case 3: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 3); return;
  case 4: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 4); return;
  default: break;
  }
  for (size_t o = 0; o < O; o++) a[o] = (b ? b[o] : 0) + SC__TN(sc__dot)(W + o * I, x, I);
}

/* gW += d x^T (gW: O x I); narrow inputs with I a constant, vectorizable over the outputs */
static inline void SC__TN(sc__one_dw_cols)(SC__T *restrict gW, const SC__T *restrict d,
                                           const SC__T *restrict x, size_t O, const size_t I) {
  for (size_t o = 0; o < O; o++)
    for (size_t i = 0; i < I; i++) gW[o * I + i] += d[o] * x[i];
}

/* gW += d x^T and gb += d (gb may be NULL) */
static void SC__TN(sc__one_dense_dwb)(SC__T *restrict gW, SC__T *restrict gb,
                                      const SC__T *restrict d, const SC__T *restrict x, size_t O,
                                      size_t I) {
  if (gb)
    for (size_t o = 0; o < O; o++) gb[o] += d[o];
  switch (I) {
  case 1: SC__TN(sc__one_dw_cols)(gW, d, x, O, 1); return;
  case 2: SC__TN(sc__one_dw_cols)(gW, d, x, O, 2); return;
  case 3: SC__TN(sc__one_dw_cols)(gW, d, x, O, 3); return;
  case 4: SC__TN(sc__one_dw_cols)(gW, d, x, O, 4); return;
  default: break;
  }
  for (size_t o = 0; o < O; o++) {
    SC__T dv = d[o];
    SC__T *restrict gr = gW + o * I;
    for (size_t i = 0; i < I; i++) gr[i] += dv * x[i];
  }
}
#endif /* the portable dense kernels */

/* the dense layers' kernels of this path, and the length their outputs are written to */
#if SC__ONE_VEC == 1
#define SC__ONE_PAD(n) (((n) + 3) & ~(size_t)3)
#define SC__ONE_FWD vone_fwd_f64
#define SC__ONE_DX vone_dx_f64
#define SC__ONE_DW vone_dw_f64
#elif SC__ONE_VEC == 2
#define SC__ONE_PAD(n) (((n) + 7) & ~(size_t)7)
#define SC__ONE_FWD vonef_fwd
#define SC__ONE_DX vonef_dx
#define SC__ONE_DW vonef_dw
#else
#define SC__ONE_PAD(n) (n)
#define SC__ONE_FWD SC__TN(sc__one_dense_fwd)
#define SC__ONE_DX SC__TN(sc__one_dense_dx)
#define SC__ONE_DW SC__TN(sc__one_dense_dwb)
#endif

static void SC__TN(sc__one)(const sc_chain *c, const SC__T *p, const SC__T *u, const SC__T *v,
                            const SC__T *w, SC__T *y, SC__T *du, SC__T *dp, SC__T *jw,
                            SC__T *scratch, int fwd) {
  size_t L = c->nlayers;
  SC__T *tm = scratch;
  /* the tangent ping-pongs between two areas as large as the widest layer */
  SC__T *ta = tm + c->d0_off, *tb = tm + c->d1_off;
  const SC__T *in = u, *tin = w;
  /* fwd = 0: the activations of this u and p are in scratch from the call before (a forward
   * with v = NULL, w = NULL); only the pullback runs (y and jw must be NULL) */
  for (size_t l = 0; fwd && l < L; l++) {
    const sc__lplan *P = &c->L[l];
    const SC__T *W = p + P->poff;
    SC__T *a = tm + P->a_off, *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
    SC__T *tout = tin ? (tin == ta ? tb : ta) : NULL;
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
    case SC_LAYER_CONV2D: {
      int dense = P->spec.kind == SC_LAYER_DENSE;
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);
      const SC__T *b = P->spec.bias ? W + nw : NULL;
      /* pre-activations go to z (gelu keeps them) or to the unused rest of this layer's tile
       * area (out x SC__TW elements), then are activated into a; with no activation, straight
       * into a. A dense layer's outputs are written up to no = SC__ONE_PAD(out) (zeros) */
      size_t no = dense ? SC__ONE_PAD(P->out) : P->out;
      SC__T *pre = P->spec.act == SC_IDENTITY ? a : z ? z : a + no;
      if (dense)
        SC__ONE_FWD(pre, W, b, in, P->out, P->in);
      else
        SC__TN(sc__one_conv)(pre, W, b, in, P);
      if (pre != a) SC__TN(sc__act_n)(a, NULL, pre, no, P->spec.act);
      if (tout) {
        if (dense)
          SC__ONE_FWD(tout, W, NULL, tin, P->out, P->in);
        else
          SC__TN(sc__one_conv)(tout, W, NULL, tin, P);
        SC__ONE_ACTD(tout, a, z, no, P->spec.act);
      }
      break;
    }
    case SC_LAYER_MAXPOOL2D:
      for (size_t ch = 0; ch < P->oc; ch++)
        for (size_t uu = 0; uu < P->oh; uu++)
          for (size_t vv = 0; vv < P->ow; vv++) {
            size_t q = SC__TN(sc__one_argmax)(in, P, ch, uu, vv),
                   o = (ch * P->oh + uu) * P->ow + vv;
            a[o] = in[q];
            if (tout) tout[o] = tin[q];
          }
      break;
    case SC_LAYER_FLATTEN: /* a view: the same elements */
      a = (SC__T *)in;
      if (tout) memcpy(tout, tin, P->out * sizeof(SC__T));
      break;
    case SC_LAYER_DROPOUT:
      if (a != in) memcpy(a, in, P->out * sizeof(SC__T));
      if (tout) memcpy(tout, tin, P->out * sizeof(SC__T));
      break;
    }
    in = P->spec.kind == SC_LAYER_FLATTEN ? in : a;
    if (tout) tin = tout;
  }
  /* (loops, not memcpy: a few elements, where the library call costs more) */
  if (y)
    for (size_t k = 0; k < c->out; k++) y[k] = in[k];
  if (jw)
    for (size_t k = 0; k < c->out; k++) jw[k] = tin[k];
  if (!v || (!du && !dp)) return;
  /* pullback of v */
  SC__T *cur = tm + c->d0_off, *nxt = tm + c->d1_off;
  for (size_t k = 0; k < c->out; k++) cur[k] = v[k];
  for (size_t l = L; l-- > 0;) {
    const sc__lplan *P = &c->L[l];
    const SC__T *W = p + P->poff;
    const SC__T *xin = u;
    for (size_t q = l; q-- > 0;) /* the input of layer l: the last non-flatten output */
      if (c->L[q].spec.kind != SC_LAYER_FLATTEN) {
        xin = tm + c->L[q].a_off;
        break;
      }
    const SC__T *a = tm + P->a_off, *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
    int need_dx = l > 0 || du;
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
    case SC_LAYER_CONV2D: {
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);
      if (P->spec.kind == SC_LAYER_DENSE) {
        size_t no = SC__ONE_PAD(P->out);
        for (size_t o = P->out; o < no; o++) cur[o] = 0; /* (from v or a non-dense layer) */
        SC__ONE_ACTD(cur, a, z, no, P->spec.act);
        if (dp)
          SC__ONE_DW(dp + P->poff, P->spec.bias ? dp + P->poff + nw : NULL, cur, xin, P->out,
                     P->in);
        if (need_dx) SC__ONE_DX(nxt, W, cur, P->out, P->in);
      } else {
        SC__ONE_ACTD(cur, a, z, P->out, P->spec.act);
        /* (dt: the free rest of this layer's tile area, out x (SC__TW - 1) elements) */
        SC__TN(sc__one_conv_bwd)
        (need_dx ? nxt : NULL, dp ? dp + P->poff : NULL,
         dp && P->spec.bias ? dp + P->poff + nw : NULL, tm + P->a_off + P->out, cur, W, xin, P);
      }
      break;
    }
    case SC_LAYER_MAXPOOL2D:
      if (need_dx) {
        for (size_t i = 0; i < P->in; i++) nxt[i] = 0;
        for (size_t ch = 0; ch < P->oc; ch++)
          for (size_t uu = 0; uu < P->oh; uu++)
            for (size_t vv = 0; vv < P->ow; vv++)
              nxt[SC__TN(sc__one_argmax)(xin, P, ch, uu, vv)] = cur[(ch * P->oh + uu) * P->ow + vv];
      }
      break;
    case SC_LAYER_FLATTEN:
    case SC_LAYER_DROPOUT:
      need_dx = 0; /* identity: cur stays */
      break;
    }
    if (need_dx) {
      SC__T *t = cur;
      cur = nxt;
      nxt = t;
    }
  }
  if (du)
    for (size_t i = 0; i < c->in; i++) du[i] += cur[i];
}
#undef SC__ONE_ACTD
#undef SC__ONE_VEC
#undef SC__ONE_PAD
#undef SC__ONE_FWD
#undef SC__ONE_DX
#undef SC__ONE_DW
