/* src/typed/exec.h — the typed bodies of the compute entry points (src/api.c): argument checks,
 * the job of a call, running its slices on the workspace's threads and reducing them, the
 * one-state path for small batches, and the bf16 precision's parameter rounding. Compiled once
 * per element type in src/compute.c. */

/* the public name of a typed body (src/api.c's wrapper has the same parameters, so that it
 * compiles to a jump), for its messages: "sc_valgrad: ...", "sc_valgrad_f64: ..." */
#if SC__F32
#define SC__PUBNAME(name) #name
#else
#define SC__PUBNAME(name) #name "_f64"
#endif

SC__INT sc_status SC__TN(sc__finite_check)(const char *fn, const sc_chain *c, const char *what,
                                           const SC__T *v, size_t rows, size_t cols) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)c->kf : (const void *)c->kd;
  size_t n = rows * cols, k = 0;
  if (n <= 16) /* a state or a cotangent of a few elements: no call through the table */
    while (k < n && isfinite(v[k])) k++;
  else
    k = kt->find_nonfinite(v, n);
  if (k == n) return SC_OK;
  if (rows == 1)
    return sc__fail(SC_ERR_NONFINITE, fn, "%s: element %zu is %s", what, k,
                    isnan(v[k]) ? "NaN" : "Inf");
  return sc__fail(SC_ERR_NONFINITE, fn, "%s of sample %zu, element %zu is %s", what, k / cols,
                  k % cols, isnan(v[k]) ? "NaN" : "Inf");
}

/* The parameters of a compute call: a NaN or Inf in p is SC_ERR_NONFINITE naming the
 * element (one vectorised pass over p; bench/RESULTS.md gives its cost). */
static sc_status SC__TN(sc__param_check)(const char *fn, const sc_chain *c, const SC__T *p) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)c->kf : (const void *)c->kd;
  size_t k = kt->find_nonfinite(p, c->nparams);
  if (k == c->nparams) return SC_OK;
  return sc__fail(SC_ERR_NONFINITE, fn, "parameter p[%zu] is %s", k, isnan(p[k]) ? "NaN" : "Inf");
}

/* the error for an input the gathers found a NaN or Inf in: the up-front check's message */
static sc_status SC__TN(sc__input_bad)(const char *fn, const sc_chain *c, const SC__T *x,
                                       size_t batch) {
  sc_status st = SC__TN(sc__finite_check)(fn, c, "input", x, batch, c->in);
  return st ? st : sc__fail(SC_ERR_NONFINITE, fn, "input: a NaN or Inf was found");
}

/* Workers take slices as they go (an atomic counter), so a core slowed by the host does
 * not hold the others up. Results do not depend on it: a slice's gradient and loss are its
 * own, and the slices are reduced in index order. A worker runs its slices in its own scratch
 * area (number worker; the slice's number when there are more workers than areas): one
 * thread's consecutive slices then find their tile memory in its L1 / L2 instead of each
 * bringing in its own (the micro-benchmark, 1 thread, 2 slices: 2.4 % faster) */
static void SC__TN(sc__task)(void *arg, int worker, int nworkers) {
  SC__TT(sc__job) *J = arg;
  if (nworkers <= 1) {
    for (size_t s = J->slice_lo; s < J->slice_hi; s++) J->kt->run_slice(J, s, 0);
    return;
  }
  int own = (size_t)nworkers <= J->ws->max_slices;
  for (size_t s; (s = J->slice_lo + sc__pool_claim(J->ws->pool)) < J->slice_hi;)
    J->kt->run_slice(J, s, own ? (size_t)worker : s);
}

/* Runs a validated job; reduces the slices into g (overwrite or accumulate) and loss. */
#if SC__F32
/* bf16 precisions: the parameters with their weights rounded to bfloat16 (biases kept), and the
 * bf16 kernels' weight operands made from them, in units of a layer's rows [o0, o1) (o0 even): a
 * unit rounds its rows and packs the pairs made of them only, so units run on any thread in any
 * order and give the same bits. (One serial pass took 43 us of LeNet5's 550-us bf16 step on
 * 2 threads, the other thread waiting: the rounding, in the portable code, half of it.) */
static void sc__bf16_params_rows(sc_workspace *ws, const float *p, size_t l, size_t o0, size_t o1) {
  const sc__lplan *P = &ws->chain->L[l];
  int conv = P->spec.kind == SC_LAYER_CONV2D;
  if (P->spec.kind != SC_LAYER_DENSE && !conv) {
    memcpy(ws->bf_p + P->poff, p + P->poff, P->np * sizeof *p);
    return;
  }
  /* conv: K x R, as a dense layer's O x I; weights first, then the biases */
  size_t I = conv ? P->R : P->in, O = conv ? P->oc : P->out, I2 = (I + 1) / 2, O2 = (O + 1) / 2;
  float *W = ws->bf_p + P->poff;
#ifdef SC__HAVE_BF16_NATIVE
  if (!conv && ws->bf_round && ws->bf16k && ws->prec == SC_PRECISION_BF16 &&
      (ws->bf_on[l] & 3) == 3) {
    /* a dense layer whose forward and pullback both run on the bf16 kernels reads only their
     * pairs and its biases: the pairs made from p, each float rounded as it is loaded (the same
     * bits), without the rounded copy of the weights (LeNet5's dense layers, 41,600 of its
     * 44,426 parameters) */
    uint32_t *wf = ws->bf_w + ws->bf_woff[l], *wd = wf + O * I2;
    if (P->spec.bias) memcpy(W + O * I + o0, p + P->poff + O * I + o0, (o1 - o0) * sizeof *p);
    sc__bf16_wf_native(wf, p + P->poff, I, o0, o1);
    sc__bf16_wd_native(wd, p + P->poff, O, I, O2, o0 / 2, (o1 + 1) / 2, 1);
    return;
  }
#endif
  memcpy(W + o0 * I, p + P->poff + o0 * I, (o1 - o0) * I * sizeof *p);
  (ws->bf_round ? ws->bf_round : sc__bf16_round_n)(W + o0 * I, (o1 - o0) * I);
  if (P->spec.bias) memcpy(W + O * I + o0, p + P->poff + O * I + o0, (o1 - o0) * sizeof *p);
  if (!ws->bf16k || !ws->bf_on[l]) return;
  /* the bf16 kernels' weight operands: pairs along the inputs and the outputs */
  uint32_t *wf = ws->bf_w + ws->bf_woff[l], *wd = wf + O * I2;
  /* W holds bf16 values (rounded above): a pair is the upper halves of two floats' bits
   * (sc__bf16_pair would round them again, to the same bits: 35 ms of a 0.9-s LeNet5 run) */
  for (size_t o = o0; o < (ws->bf_on[l] & 20 ? o0 : o1); o++) { /* (bits 4, 16: below) */
    const float *r = W + o * I;
    for (size_t k = 0; k < I / 2; k++) wf[o * I2 + k] = sc__bf16_pair_r(r[2 * k], r[2 * k + 1]);
    if (I % 2) wf[o * I2 + I / 2] = sc__fbits(r[I - 1]) >> 16;
  }
  size_t m0 = o0 / 2, m1 = (o1 + 1) / 2;
#ifdef SC__HAVE_BF16_NATIVE
  if (ws->bf_round) /* the CPU has AVX512_BF16, so AVX-512 */
    sc__bf16_wd_native(wd, W, O, I, O2, m0, m1, 0);
  else
#endif
    for (size_t i = 0; i < I; i++) /* wd's rows in order; this unit's pairs m of each */
      for (size_t m = m0; m < m1; m++)
        wd[i * O2 + m] =
            sc__bf16_pair_r(W[2 * m * I + i], 2 * m + 1 < O ? W[(2 * m + 1) * I + i] : 0);
  if (conv && (ws->bf_on[l] & 8)) /* AMX's dx in place: wd's rows in tperm's order */
    for (size_t i = 0; i < I; i++)
      memcpy(wd + I * O2 + i * O2 + m0, wd + P->tperm[i] * O2 + m0, (m1 - m0) * sizeof *wd);
  /* the channel-pair forward's: (w[o][2 cp][i][j], w[o][2 cp + 1][i][j]) */
  if (conv && (ws->bf_on[l] & 16)) {
    uint32_t *wh = wd + 2 * I * O2;
    size_t ic = P->ic, t = P->spec.kh * P->spec.kw, KC = (ic + 1) / 2 * t;
    for (size_t o = o0; o < o1; o++) /* q = cp t + ij (no division: 3 ms an epoch) */
      for (size_t cp = 0; 2 * cp < ic; cp++) {
        const float *r = W + o * I + 2 * cp * t;
        uint32_t *d = wh + o * KC + cp * t;
        if (2 * cp + 1 < ic)
          for (size_t ij = 0; ij < t; ij++) d[ij] = sc__bf16_pair_r(r[ij], r[ij + t]);
        else
          for (size_t ij = 0; ij < t; ij++) d[ij] = sc__fbits(r[ij]) >> 16;
      }
  }
  if (conv && (ws->bf_on[l] & 4)) { /* the direct forward's: a channel's taps (2q, 2q + 1) */
    uint32_t *wc = wd + I * O2;
    size_t t = P->spec.kh * P->spec.kw, TP = (t + 1) / 2, KD = P->ic * TP;
    for (size_t o = o0; o < o1; o++)
      for (size_t ci = 0; ci < P->ic; ci++) {
        const float *r = W + o * I + ci * t;
        uint32_t *d = wc + o * KD + ci * TP;
        for (size_t q = 0; 2 * q + 1 < t; q++) d[q] = sc__bf16_pair_r(r[2 * q], r[2 * q + 1]);
        if (t % 2) /* the last tap: the second half of its pair (a 1 x 1 kernel's: the first) */
          d[TP - 1] = t > 1 ? sc__bf16_pair_r(0.0f, r[t - 1]) : sc__fbits(r[0]) >> 16;
      }
  }
}

/* a layer's rows per unit: an even number, about SC__BFP_UNIT weights (16 KB: in L1) */
#define SC__BFP_UNIT 4096
static size_t sc__bf16_params_chunk(const sc__lplan *P) {
  size_t I = P->spec.kind == SC_LAYER_CONV2D ? P->R : P->in;
  size_t ch = I ? SC__BFP_UNIT / I : 0;
  return ch < 2 ? 2 : ch & ~(size_t)1;
}
/* unit u: its layer and rows; 0 when u is past the last */
static int sc__bf16_params_unit(const sc_chain *c, size_t u, size_t *l, size_t *o0, size_t *o1) {
  for (size_t k = 0; k < c->nlayers; k++) {
    const sc__lplan *P = &c->L[k];
    if (P->np == 0) continue;
    int wl = P->spec.kind == SC_LAYER_DENSE || P->spec.kind == SC_LAYER_CONV2D;
    size_t O = !wl ? 1 : P->spec.kind == SC_LAYER_CONV2D ? P->oc : P->out;
    size_t ch = wl ? sc__bf16_params_chunk(P) : 1, n = (O + ch - 1) / ch;
    if (u < n) {
      *l = k;
      *o0 = u * ch;
      *o1 = O - *o0 < ch ? O : *o0 + ch;
      return 1;
    }
    u -= n;
  }
  return 0;
}
typedef struct {
  sc_workspace *ws;
  const float *p;
} sc__bfp_job;
/* With several workers, a unit goes to the worker whose part of the parameters (sc__part_range,
 * the parts of sc_train's ADAM step, sc__optjob_task) holds the unit's first weight: the worker
 * that has just updated those parameters reads them from its own cache. Taken as they came (any
 * worker, any unit), the units read the other core's freshly written parameters, and the next
 * ADAM step wrote over lines the other core held: on a host whose two vCPUs were 377 ns apart
 * (a ping-pong round trip), LeNet5's bf16 epoch on 2 threads spent 47 ms per 2 epochs in this
 * run and 27 in ADAM; with the units aligned, 32 and 17, the epoch 6 % faster (with the vCPUs 80
 * ns apart: no change; Zen 5, 2026-11-28). */
static void sc__bf16_params_task(void *arg, int worker, int nworkers) {
  const sc__bfp_job *B = arg;
  const sc_chain *c = B->ws->chain;
  size_t l, o0, o1;
  if (nworkers > 1) {
    size_t parts = sc__parts(nworkers), k0, k1;
    for (size_t u = 0; sc__bf16_params_unit(c, u, &l, &o0, &o1); u++) {
      const sc__lplan *P = &c->L[l];
      size_t I = P->spec.kind == SC_LAYER_CONV2D  ? P->R
                 : P->spec.kind == SC_LAYER_DENSE ? P->in
                                                  : 1;
      size_t e = P->poff + o0 * I, w = 0;
      for (; w + 1 < parts; w++) {
        sc__part_range(w, parts, c->nparams, &k0, &k1);
        if (e < k1) break;
      }
      if (w % (size_t)nworkers == (size_t)worker) sc__bf16_params_rows(B->ws, B->p, l, o0, o1);
    }
    return;
  }
  for (size_t u = 0; sc__bf16_params_unit(c, u, &l, &o0, &o1); u++)
    sc__bf16_params_rows(B->ws, B->p, l, o0, o1);
}
static const float *sc__bf16_params(sc_workspace *ws, const float *p) {
  sc__bfp_job B = {ws, p};
  if (ws->chain->nparams >= SC__OPT_PAR_MIN)
    sc__pool_run(ws->pool, sc__bf16_params_task, &B);
  else /* small: waking the pool would cost more */
    sc__bf16_params_task(&B, 0, 1);
  return ws->bf_p;
}
#endif

/* The slices' gradients summed into g (overwritten, or added to with accumulate): each
 * worker takes a part of the elements (sc__part_range) and adds the slices in index order, in
 * blocks that stay in L1, so every element gets the same additions in the same order on any
 * number of threads. Large chains run it on the workspace's threads (LeNet5's 44,426
 * parameters from 2 slices at batch 64), others on the caller alone. */
typedef struct SC__TT(sc__redjob) {
  sc_workspace *ws;
  SC__T *g;
  size_t np, nslices;
  int accumulate;
} SC__TT(sc__redjob);

static void SC__TN(sc__reduce_task)(void *arg, int worker, int nworkers) {
  const SC__TT(sc__redjob) *R = arg;
  size_t parts = sc__parts(nworkers), k0, k1;
  for (size_t w = (size_t)worker; w < parts; w += (size_t)nworkers) {
    sc__part_range(w, parts, R->np, &k0, &k1);
    for (size_t b0 = k0; b0 < k1; b0 += 1024) {
      size_t b1 = k1 - b0 < 1024 ? k1 : b0 + 1024;
      SC__T *restrict g = R->g;
      for (size_t s = 0; s < R->nslices; s++) {
        const SC__T *restrict gsl =
            (const SC__T *)(const void *)(R->ws->slices + s * R->ws->slice_bytes +
                                          R->ws->tile_bytes);
        if (s == 0 && !R->accumulate)
          for (size_t k = b0; k < b1; k++) g[k] = gsl[k];
        else
          for (size_t k = b0; k < b1; k++) g[k] += gsl[k];
      }
    }
  }
}

static void SC__TN(sc__execute)(SC__TT(sc__job) * J, SC__T *g, int accumulate, double *loss) {
#if SC__F32
  if (J->ws->prec != SC_PRECISION_FP32) {
    J->bf16 = 1;
    J->bf16k = J->ws->prec == SC_PRECISION_BF16 ? J->ws->bf16k : 0;
    J->p = sc__bf16_params(J->ws, J->p);
  }
#endif
  J->ntiles = (J->batch + SC__TW - 1) / SC__TW;
  J->nslices = sc__slices_for(J->c, J->batch);
  J->scale = (SC__T)(1.0 / (double)J->batch);
  J->kt = SC__F32 ? (const void *)J->c->kf : (const void *)J->c->kd;
  J->slice_lo = 0;
  J->slice_hi = J->nslices;
  if (J->own_slices) { /* data-parallel: this rank's contiguous run of slices */
    sc__rank_slices(J->nslices, (size_t)J->dist_rank, (size_t)J->dist_ranks, &J->slice_lo,
                    &J->slice_hi);
  }
  /* one slice (a batch of up to min_tiles tiles) is run here: waking the pool for work only
   * one thread can do costs more than it gives (batch 32 on 2 threads was 2-3x
   * slower than on 1); the slice's work is the same whichever thread does it */
  if (J->slice_hi - J->slice_lo == 1)
    SC__TN(sc__task)(J, 0, 1);
  else if (J->slice_hi > J->slice_lo)
    sc__pool_run(J->ws->pool, SC__TN(sc__task), J);
  if (J->own_slices) return; /* the caller exchanges the slices and reduces them */
  if (J->chk_x)
    for (size_t s = 0; s < J->nslices; s++)
      if (J->slice_bad[s]) {
        J->x_bad = 1; /* the caller reports it; no loss, no gradient written */
        return;
      }
  if (loss) {
    double l = 0;
    for (size_t s = 0; s < J->nslices; s++) l += J->slice_loss[s];
    *loss = l / (double)J->batch;
  }
  if (g && J->want_g) {
    sc_workspace *ws = J->ws;
    size_t np = J->c->nparams;
    SC__TT(sc__redjob) R = {ws, g, np, J->nslices, accumulate};
    if (np >= SC__OPT_PAR_MIN && J->nslices > 1)
      sc__pool_run(ws->pool, SC__TN(sc__reduce_task), &R);
    else /* small: waking the pool would cost more */
      SC__TN(sc__reduce_task)(&R, 0, 1);
  }
}

static void SC__TN(sc__job_init)(SC__TT(sc__job) * J, const sc_chain *c, sc_workspace *ws, int mode,
                                 const SC__T *p, const SC__T *x, size_t batch) {
  memset(J, 0, sizeof *J);
  J->c = c;
  J->ws = ws;
  J->mode = mode;
  J->p = p;
  J->x = x;
  J->batch = batch;
}

/* Small batches of dense chains go sample by sample through the one-state path (sc__one: a
 * few matrix-vector products) instead of a tile of SC__TW samples, most of them padding: at
 * batch 1 a forward of 784 -> 128 -> 64 -> 10 relu took 66.5 us as a tile and 8.3 us as one
 * state, a valgrad of 2 -> 50 -> 50 -> 2 tanh 8.6 us against about 1 (AVX-512, Zen 4;
 * measured 2026-11-24). Per sample the tile costs the same from 1 to 32 samples and
 * the one state grows with each: the crossing measured at 5 to 10 samples, hence up to
 * SC__SMALL_BATCH. Only chains of dense, flatten and dropout layers (a LeNet5 forward on one
 * state takes 51-58 us, a whole tile 86: the one-state conv would win at batch 1 alone), fp32
 * precision (a bf16 workspace keeps its bf16 GEMMs), and for a loss at most SC__SMALL_OUT outputs
 * (its cotangent is on the stack). The choice depends on the chain and the batch size only, never
 * on threads or profiling; results differ from the tile path's in the last bits, as results may
 * with the batch size. */
#define SC__SMALL_BATCH 4
#define SC__SMALL_OUT 64
static int SC__TN(sc__small_ok)(const sc_chain *c, const sc_workspace *ws, size_t batch,
                                int training) {
  if (batch > SC__SMALL_BATCH) return 0;
#if SC__F32
  if (ws->prec != SC_PRECISION_FP32) return 0;
#else
  (void)ws;
#endif
  for (size_t l = 0; l < c->nlayers; l++) {
    sc_layer_kind k = c->L[l].spec.kind;
    if (k == SC_LAYER_CONV2D || k == SC_LAYER_MAXPOOL2D) return 0;
    if (k == SC_LAYER_DROPOUT && training && c->L[l].spec.rate > 0) return 0; /* masks */
  }
  return 1;
}

/* the loss of one sample's outputs y (see sc__loss_tile: the same formulas), and with v != NULL
 * its gradient times s into v */
static double SC__TN(sc__small_loss)(const sc_chain *c, sc_loss loss, const SC__T *y,
                                     const void *target, size_t b, SC__T s, SC__T *v) {
  size_t O = c->out;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY) {
    size_t lab = (size_t)((const int32_t *)target)[b], am = 0;
    for (size_t o = 1; o < O; o++)
      if (y[o] > y[am]) am = o;
    SC__T m = y[am], se = 1;
    for (size_t o = 0; o < O; o++)
      if (o != am) se += SC__EXP(y[o] - m);
    SC__T lse = m + SC__LOG(se);
    if (v)
      for (size_t o = 0; o < O; o++) v[o] = s * (SC__EXP(y[o] - lse) - (o == lab ? 1 : 0));
    return (double)(lse - y[lab]);
  }
  const SC__T *t = (const SC__T *)target + b * O;
  SC__T acc = 0;
  for (size_t o = 0; o < O; o++) {
    SC__T e = y[o] - t[o];
    if (loss == SC_LOSS_SQUARED) {
      acc += e * e;
      if (v) v[o] = 2 * s * e;
    } else {
      acc += SC__FABS(e);
      if (v) v[o] = s * (SC__T)((e > 0) - (e < 0));
    }
  }
  return (double)acc;
}

static void SC__TN(sc__one_run)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                const SC__T *v, const SC__T *w, SC__T *y, SC__T *du, SC__T *dp,
                                SC__T *jw, sc_workspace *ws, int fwd);

/* sc_valgrad / sc_loss_value / sc_pullback on a small batch, sample by sample (sc__small_ok):
 * with a loss, its value into *lossv and the gradient (g, gx overwritten; g may be NULL, gx
 * too); with dy instead (pullback), g accumulates and gx is overwritten */
static void SC__TN(sc__small_grad)(const sc_chain *c, sc_loss loss, const SC__T *p, const SC__T *x,
                                   const void *target, const SC__T *dy, size_t batch, double *lossv,
                                   SC__T *g, SC__T *gx, sc_workspace *ws) {
  SC__T y[SC__SMALL_OUT], v[SC__SMALL_OUT] = {0}; /* (v: cppcheck's uninitvar) */
  SC__T s = (SC__T)(1.0 / (double)batch);
  double l = 0;
  if (g && !dy) memset(g, 0, c->nparams * sizeof *g);
  if (gx) memset(gx, 0, batch * c->in * sizeof *gx);
  for (size_t b = 0; b < batch; b++) {
    const SC__T *xb = x + b * c->in, *vb = dy ? dy + b * c->out : v;
    if (!dy) {
      SC__TN(sc__one_run)(c, p, xb, NULL, NULL, y, NULL, NULL, NULL, ws, 1);
      l += SC__TN(sc__small_loss)(c, loss, y, target, b, s, (g || gx) ? v : NULL);
    }
    if (g || gx) /* after the loss's forward, the pullback alone (with dy: both) */
      SC__TN(sc__one_run)(c, p, xb, vb, NULL, NULL, gx ? gx + b * c->in : NULL, g, NULL, ws, !!dy);
  }
  if (lossv) *lossv = l / (double)batch;
}

SC__INT sc_status SC__TN(sc__forward)(const sc_chain *chain, const SC__T *p, const SC__T *x,
                                      size_t batch, SC__T *y, sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_forward);
  sc_status st = sc__compute_check(fn, chain, p, x, batch, ws);
  if (st) return st;
  if (!y) return sc__fail(SC_ERR_NULL, fn, "argument 'y' is NULL");
  if ((st = SC__TN(sc__finite_check)(fn, chain, "input", x, batch, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(fn, chain, p))) return st;
  if (SC__TN(sc__small_ok)(chain, ws, batch, 0)) {
    for (size_t b = 0; b < batch; b++) SC__TN(sc__one_run)
    (chain, p, x + b * chain->in, NULL, NULL, y + b * chain->out, NULL, NULL, NULL, ws, 1);
    return SC_OK;
  }
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__FORWARD, p, x, batch);
  J.y = y;
  SC__TN(sc__execute)(&J, NULL, 0, NULL);
  return SC_OK;
}

/* tiles <- the n samples of a row-major array, in order (tile k at k cols SC__TW, zeros past
 * the last sample): what the steps' gathers make, made once (sc__train_tiles) */
SC__INT void SC__TN(sc__tiles_fill)(SC__T *restrict dst, const void *src, size_t cols, size_t n) {
  SC__TT(sc__job) J;
  memset(&J, 0, sizeof J); /* (no idx, no check) */
  for (size_t b0 = 0; b0 < n; b0 += SC__TW) {
    size_t m = n - b0 < SC__TW ? n - b0 : SC__TW;
    SC__TN(sc__gather)(dst + b0 * cols, (const SC__T *)src, cols, &J, b0, m, 0);
  }
}

/* sc_train's tiles made before its steps (sc__train_tiles), for a step in order (no idx) */
static void SC__TN(sc__job_tiles)(SC__TT(sc__job) * J, const size_t *idx) {
  const sc_workspace *ws = J->ws;
  if (!ws->tiles_x || idx || ws->tiles_f64 != !SC__F32) return;
  J->tiles_x = (const SC__T *)ws->tiles_x + ws->tiles0 * J->c->in * SC__TW;
  if (ws->tiles_t) J->tiles_t = (const SC__T *)ws->tiles_t + ws->tiles0 * J->c->out * SC__TW;
}

/* valgrad core, shared by the public entry points and sc_train (idx, no checks). chk_x: the
 * gathers check x for NaN and Inf (the caller did not); returns 1, with nothing written, when
 * they found one, else 0 */
SC__INT int SC__TN(sc__valgrad_run)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                    const SC__T *x, const size_t *idx, const void *target,
                                    size_t batch, double *lossv, SC__T *g, SC__T *gx,
                                    sc_workspace *ws, int train, int chk_x) {
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, (g || gx) ? SC__VALGRAD : SC__LOSS, p, x, batch);
  J.loss = loss;
  J.target = target;
  J.idx = idx;
  J.gx = gx;
  J.want_g = g != NULL;
  J.train = train;
  J.drop_seed = ws->drop_seed;
  J.drop_step = ws->drop_step;
  J.chk_x = chk_x;
  SC__TN(sc__job_tiles)(&J, idx);
  SC__TN(sc__execute)(&J, g, 0, lossv);
  if (J.x_bad) return 1;
  if (train) ws->drop_step++;
  return 0;
}

/* sc_train's data-parallel step: only this rank's slices of the minibatch (see sc_dist). Their
 * gradients stay in the workspace's slice buffers, their losses go to slice_loss[lo..hi). */
SC__INT void SC__TN(sc__valgrad_own)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                     const SC__T *x, const size_t *idx, const void *target,
                                     size_t batch, sc_workspace *ws, int rank, int ranks,
                                     size_t *ns, size_t *lo, size_t *hi, double *slice_loss) {
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__VALGRAD, p, x, batch);
  J.loss = loss;
  J.target = target;
  J.idx = idx;
  J.want_g = 1;
  J.train = 1;
  J.drop_seed = ws->drop_seed;
  J.drop_step = ws->drop_step;
  J.own_slices = 1;
  SC__TN(sc__job_tiles)(&J, idx);
  J.dist_rank = rank;
  J.dist_ranks = ranks;
  SC__TN(sc__execute)(&J, NULL, 0, NULL);
  *ns = J.nslices;
  *lo = J.slice_lo;
  *hi = J.slice_hi;
  for (size_t s = J.slice_lo; s < J.slice_hi; s++) slice_loss[s] = J.slice_loss[s];
  ws->drop_step++;
}

static sc_status SC__TN(sc__target_check)(const char *fn, const sc_chain *chain, sc_loss loss,
                                          const void *target, size_t batch) {
  sc_status st = sc__loss_check(fn, chain, loss, target);
  if (st) return st;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY)
    return sc__labels_check(fn, (const int32_t *)target, batch, chain->out);
  return SC__TN(sc__finite_check)(fn, chain, "target", (const SC__T *)target, batch, chain->out);
}

SC__INT sc_status SC__TN(sc__valgrad)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                      const SC__T *x, const void *target, size_t batch,
                                      SC__T *lossv, SC__T *g, SC__T *gx, sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_valgrad);
  sc_status st = sc__compute_check(fn, chain, p, x, batch, ws);
  if (st) return st;
  if ((st = SC__TN(sc__target_check)(fn, chain, loss, target, batch))) return st;
  /* x is checked for NaN and Inf by the tiles' gathers as they load it (one pass over x less:
   * the micro-benchmark 2.04 -> 1.99 us on Zen 5, 2026-11-25), not up front,
   * unless gx is asked for (it is written tile by tile) or the batch takes the one-state path;
   * either way an error names the first such element and nothing is written */
  int small = chain->out <= SC__SMALL_OUT && SC__TN(sc__small_ok)(chain, ws, batch, 1);
  int chk_x = !small && !gx;
  if (!chk_x && (st = SC__TN(sc__finite_check)(fn, chain, "input", x, batch, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(fn, chain, p))) return st;
  double l = 0;
  if (small) {
    SC__TN(sc__small_grad)(chain, loss, p, x, target, NULL, batch, &l, g, gx, ws);
    ws->drop_step++; /* as sc__valgrad_run's: no dropout layer here draws from it */
  } else if (SC__TN(sc__valgrad_run)(chain, loss, p, x, NULL, target, batch, &l, g, gx, ws, 1,
                                     chk_x))
    return SC__TN(sc__input_bad)(fn, chain, x, batch);
  if (lossv) *lossv = (SC__T)l;
  return SC_OK;
}

SC__INT sc_status SC__TN(sc__loss_value)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                         const SC__T *x, const void *target, size_t batch,
                                         SC__T *lossv, sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_loss_value);
  sc_status st = sc__compute_check(fn, chain, p, x, batch, ws);
  if (st) return st;
  if (!lossv) return sc__fail(SC_ERR_NULL, fn, "argument 'lossv' is NULL");
  if ((st = SC__TN(sc__target_check)(fn, chain, loss, target, batch))) return st;
  int small = chain->out <= SC__SMALL_OUT && SC__TN(sc__small_ok)(chain, ws, batch, 0);
  if (small && (st = SC__TN(sc__finite_check)(fn, chain, "input", x, batch, chain->in)))
    return st; /* (else the gathers check x, as in sc_valgrad) */
  if ((st = SC__TN(sc__param_check)(fn, chain, p))) return st;
  double l = 0;
  if (small)
    SC__TN(sc__small_grad)(chain, loss, p, x, target, NULL, batch, &l, NULL, NULL, ws);
  else if (SC__TN(sc__valgrad_run)(chain, loss, p, x, NULL, target, batch, &l, NULL, NULL, ws, 0,
                                   1))
    return SC__TN(sc__input_bad)(fn, chain, x, batch);
  *lossv = (SC__T)l;
  return SC_OK;
}

SC__INT sc_status SC__TN(sc__evaluate)(const sc_chain *chain, const SC__T *p, const SC__T *x,
                                       const int32_t *labels, size_t n, double *loss,
                                       double *accuracy, sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_evaluate);
  sc_status st = sc__compute_check(fn, chain, p, x, 1, ws);
  if (st) return st;
  if (!labels) return sc__fail(SC_ERR_NULL, fn, "argument 'labels' is NULL");
  if (n == 0) return sc__fail(SC_ERR_BATCH, fn, "n is 0");
  if (chain->out < 2)
    return sc__fail(SC_ERR_SHAPE, fn, "a classifier needs at least 2 outputs; the chain has %zu",
                    chain->out);
  if ((st = sc__labels_check(fn, labels, n, chain->out))) return st;
  if ((st = SC__TN(sc__finite_check)(fn, chain, "input", x, n, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(fn, chain, p))) return st;
  double lsum = 0, csum = 0;
  for (size_t b0 = 0; b0 < n; b0 += ws->max_batch) {
    size_t nb = n - b0 < ws->max_batch ? n - b0 : ws->max_batch;
    SC__TT(sc__job) J;
    SC__TN(sc__job_init)(&J, chain, ws, SC__LOSS, p, x + b0 * chain->in, nb);
    J.loss = SC_LOSS_LOGIT_CROSSENTROPY;
    J.target = labels + b0;
    J.count_correct = 1;
    double l = 0;
    SC__TN(sc__execute)(&J, NULL, 0, &l);
    lsum += l * (double)nb;
    for (size_t s = 0; s < J.nslices; s++) csum += J.slice_correct[s];
  }
  if (loss) *loss = lsum / (double)n;
  if (accuracy) *accuracy = csum / (double)n;
  return SC_OK;
}

SC__INT sc_status SC__TN(sc__pullback)(const sc_chain *chain, const SC__T *p, const SC__T *x,
                                       const SC__T *dy, size_t batch, SC__T *g, SC__T *gx,
                                       sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_pullback);
  sc_status st = sc__compute_check(fn, chain, p, x, batch, ws);
  if (st) return st;
  if (!dy) return sc__fail(SC_ERR_NULL, fn, "argument 'dy' is NULL");
  if ((st = SC__TN(sc__finite_check)(fn, chain, "input", x, batch, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(fn, chain, p))) return st;
  if ((st = SC__TN(sc__finite_check)(fn, chain, "cotangent dy", dy, batch, chain->out))) return st;
  if (!g && !gx) return SC_OK;
  if (SC__TN(sc__small_ok)(chain, ws, batch, 0)) {
    SC__TN(sc__small_grad)(chain, SC_LOSS_SQUARED, p, x, NULL, dy, batch, NULL, g, gx, ws);
    return SC_OK;
  }
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__PULLBACK, p, x, batch);
  J.dy = dy;
  J.gx = gx;
  J.want_g = g != NULL;
  SC__TN(sc__execute)(&J, g, 1, NULL);
  return SC_OK;
}

/* ---------------------------------------------------------------- one state (API) */
static sc_status SC__TN(sc__one_check)(const char *fn, const sc_chain *chain, const SC__T *p,
                                       const SC__T *u, const sc_workspace *ws) {
  if (!chain) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!u) return sc__fail(SC_ERR_NULL, fn, "argument 'u' is NULL");
  if (!ws) return sc__fail(SC_ERR_NULL, fn, "argument 'ws' is NULL");
  if (ws->chain != chain)
    return sc__fail(SC_ERR_ARG, fn, "the workspace was created for a different chain");
  sc_status st = SC__TN(sc__finite_check)(fn, chain, "state u", u, 1, chain->in);
  return st ? st : SC__TN(sc__param_check)(fn, chain, p);
}

static void SC__TN(sc__one_run)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                const SC__T *v, const SC__T *w, SC__T *y, SC__T *du, SC__T *dp,
                                SC__T *jw, sc_workspace *ws, int fwd) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)chain->kf : (const void *)chain->kd;
  kt->one(chain, p, u, v, w, y, du, dp, jw, (SC__T *)(void *)ws->slices, fwd);
}

SC__INT sc_status SC__TN(sc__apply)(const sc_chain *chain, const SC__T *p, const SC__T *u, SC__T *y,
                                    sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_apply);
  sc_status st = SC__TN(sc__one_check)(fn, chain, p, u, ws);
  if (st) return st;
  if (!y) return sc__fail(SC_ERR_NULL, fn, "argument 'y' is NULL");
  SC__TN(sc__one_run)(chain, p, u, NULL, NULL, y, NULL, NULL, NULL, ws, 1);
  return SC_OK;
}

SC__INT sc_status SC__TN(sc__vjp)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                  const SC__T *v, SC__T *y, SC__T *du, SC__T *dp,
                                  sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_vjp);
  sc_status st = SC__TN(sc__one_check)(fn, chain, p, u, ws);
  if (st) return st;
  if (!v) return sc__fail(SC_ERR_NULL, fn, "argument 'v' is NULL");
  if ((st = SC__TN(sc__finite_check)(fn, chain, "cotangent v", v, 1, chain->out))) return st;
  SC__TN(sc__one_run)(chain, p, u, v, NULL, y, du, dp, NULL, ws, 1);
  return SC_OK;
}

SC__INT sc_status SC__TN(sc__jvp)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                  const SC__T *w, SC__T *y, SC__T *jw, sc_workspace *ws) {
  const char *fn = SC__PUBNAME(sc_jvp);
  sc_status st = SC__TN(sc__one_check)(fn, chain, p, u, ws);
  if (st) return st;
  if (!w) return sc__fail(SC_ERR_NULL, fn, "argument 'w' is NULL");
  if (!jw) return sc__fail(SC_ERR_NULL, fn, "argument 'jw' is NULL");
  if ((st = SC__TN(sc__finite_check)(fn, chain, "tangent w", w, 1, chain->in))) return st;
  SC__TN(sc__one_run)(chain, p, u, NULL, w, y, NULL, NULL, jw, ws, 1);
  return SC_OK;
}
#undef SC__PUBNAME
