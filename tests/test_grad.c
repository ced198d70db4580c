/* tests/test_grad.c — finite-difference gradient checks, in double precision.
 *
 * Every check runs on every ISA path this CPU and build offer (tu_isas): the double
 * kernels are compiled once per ISA too.
 *
 * Method. For a scalar function F of the parameters p (or the inputs x), the analytic
 * derivative from the library is compared with the central difference
 *     (F(v + h e_k) - F(v - h e_k)) / (2 h),     h = FD_H = 1e-5,
 * where F is evaluated by the library itself (sc_valgrad_f64 with g = gx = NULL for a
 * loss, sc_forward_f64 for <dy, y>). Error budget in double:
 *   truncation  h^2 |F'''| / 6 ~ 2e-11 |F'''|;
 *   rounding    F carries ~eps of rounding per O(1) term it sums (up to ~2000 terms
 *               for the pullback's <dy, y>), so the quotient carries ~sqrt(terms)
 *               eps / h of noise: ~1e-9 at h = 1e-5 (measured up to 2.4e-9), but ~1e-8
 *               at h = 1e-6 (measured 3.5e-8, relative errors up to 8.6e-7: too close
 *               to the tolerance, hence h = 1e-5 rather than 1e-6).
 * The relative error
 *     |fd - an| / max(|fd|, |an|, FD_FLOOR)        (FD_FLOOR = 1e-2)
 * must be <= FD_RTOL = 1e-6 (measured worst: 1.3e-7). The floor keeps components that
 * are zero or tiny (dead relu units, cancellations) from turning rounding noise into a
 * large relative error: below 1e-2 the check is an absolute one at 1e-8, which still
 * flags any wrong component larger than that.
 *
 * Kinks. relu (at z = 0) and the absolute loss (at yhat = t) are not differentiable
 * there. Inputs are drawn so that every relu pre-activation of every sample satisfies
 * |z| >= KINK_MARGIN = 1e-2 (computed by the reference forward below), and absolute-loss
 * targets are placed at least 0.1 away from the prediction. A perturbation of h = 1e-5
 * moves a pre-activation by h times a product of activations and weights (O(1) here,
 * so ~1e-5 << 1e-2): no finite difference straddles a kink.
 *
 * Chains are multi-layer (e.g. 3 -> 7 act -> 5 act -> 2), with widths from
 * {1, 3, 7, 16, 17, 33}, biases on and off, and batch sizes 1, 5, 17, 33, 40 (not
 * multiples of the 16-sample tile) plus batches of 31..70 (70 spans two slices).
 * Large chains check a strided subset of the parameters (always including the first
 * and last weight and every bias of every layer) to keep the run time small.
 */
#include "testutil.h"

#include <float.h>

#define FD_H 1e-5
#define FD_RTOL 1e-6
#define FD_FLOOR 1e-2
#define KINK_MARGIN 1e-2
#define MAX_CHECKS 240 /* parameters (and inputs) checked per case, at most, roughly */

#define NACT 7 /* every activation */
static const sc_act ACTS[NACT] = {SC_IDENTITY, SC_RELU, SC_TANH, SC_SIGMOID,
                                  SC_SOFTPLUS, SC_GELU, SC_SILU};
static const size_t WIDTHS[6] = {1, 3, 7, 16, 17, 33};
static const size_t BATCHES[5] = {1, 5, 17, 33, 40};

/* --------------------------------------------------------------- network + reference */
typedef struct netdef {
  size_t in, nl;
  sc_layer L[4];
} netdef;

static size_t net_nparams(const netdef *n) {
  size_t w = n->in, np = 0;
  for (size_t l = 0; l < n->nl; l++) {
    np += n->L[l].outputs * w + (n->L[l].bias ? n->L[l].outputs : 0);
    w = n->L[l].outputs;
  }
  return np;
}
static size_t net_out(const netdef *n) { return n->L[n->nl - 1].outputs; }
static size_t net_maxw(const netdef *n) {
  size_t m = n->in;
  for (size_t l = 0; l < n->nl; l++)
    if (n->L[l].outputs > m) m = n->L[l].outputs;
  return m;
}

/* Naive reference forward of one sample, from the documented parameter layout
 * (W as O x I row-major, then b). Returns the smallest |z| over relu layers (DBL_MAX if
 * there are none). */
static double ref_forward1(const netdef *n, const double *p, const double *x, double *y) {
  double bufa[64], bufb[64], minz = DBL_MAX;
  const double *cur = x;
  double *nxt = bufa;
  size_t w = n->in, off = 0;
  for (size_t l = 0; l < n->nl; l++) {
    size_t O = n->L[l].outputs;
    const double *W = p + off, *b = n->L[l].bias ? p + off + O * w : NULL;
    for (size_t o = 0; o < O; o++) {
      double z = b ? b[o] : 0;
      for (size_t i = 0; i < w; i++) z += W[o * w + i] * cur[i];
      if (n->L[l].act == SC_RELU && fabs(z) < minz) minz = fabs(z);
      nxt[o] = tu_ref_act(n->L[l].act, z);
    }
    off += O * w + (b ? O : 0);
    w = O;
    cur = nxt;
    nxt = nxt == bufa ? bufb : bufa;
  }
  memcpy(y, cur, w * sizeof *y);
  return minz;
}

static sc_chain *mk_chain(const char *isa, const netdef *n) {
  setenv("SC_ISA", isa, 1);
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, n->in, n->L, n->nl));
  assert_string_equal(sc_chain_isa(c), isa);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  assert_int_equal(np, net_nparams(n));
  return c;
}

/* Glorot weights from the library, then random (non-zero) biases */
static void mk_params(const sc_chain *c, const netdef *n, double *p, uint64_t seed) {
  size_t np = net_nparams(n);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, seed));
  uint64_t s = seed * 31 + 7;
  for (size_t l = 0; l < n->nl; l++) {
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
    if (!li.layer.bias) continue;
    for (size_t o = 0; o < li.outputs; o++)
      p[li.param_offset + li.inputs * li.outputs + o] = 0.5 * tu_unif(&s);
  }
}

/* batch inputs whose relu pre-activations all stay KINK_MARGIN away from 0 */
static void mk_inputs(const netdef *n, const double *p, double *x, size_t batch, uint64_t seed) {
  double y[64];
  uint64_t s = seed;
  for (size_t b = 0; b < batch; b++) {
    int tries = 0;
    for (;;) {
      for (size_t i = 0; i < n->in; i++) x[b * n->in + i] = tu_unif(&s);
      if (ref_forward1(n, p, x + b * n->in, y) >= KINK_MARGIN) break;
      assert_true(++tries < 1000);
    }
  }
}

/* --------------------------------------------------------------- comparison */
typedef struct fdstats {
  double worst, worst_abs;
  size_t checked;
} fdstats;

static void fd_check(const char *what, const char *ctx, size_t k, double an, double fd,
                     fdstats *st) {
  tu_fd_compare(ctx, what, k, an, fd, FD_RTOL, FD_FLOOR, &st->worst, &st->worst_abs, &st->checked);
}

/* which of n components to check: all if few, else a stride plus the marked ones */
static int want_index(size_t k, size_t n, const unsigned char *always) {
  return tu_fd_want(k, n, MAX_CHECKS, always);
}

/* first and last weight and all biases of every layer */
static unsigned char *mk_always(const sc_chain *c, const netdef *n) {
  size_t np = net_nparams(n);
  unsigned char *m = calloc(np, 1);
  assert_non_null(m);
  for (size_t l = 0; l < n->nl; l++) {
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
    size_t nw = li.inputs * li.outputs;
    m[li.param_offset] = m[li.param_offset + nw - 1] = 1;
    for (size_t k = nw; k < li.nparams; k++) m[li.param_offset + k] = 1;
  }
  return m;
}

/* --------------------------------------------------------------- loss gradient check */
typedef struct lossctx {
  const sc_chain *c;
  sc_loss loss;
  const void *target;
  size_t batch;
  sc_workspace *ws;
} lossctx;

static double loss_at(const lossctx *L, const double *p, const double *x) {
  double v = NAN;
  SC_OK_OR_FAIL(sc_valgrad_f64(L->c, L->loss, p, x, L->target, L->batch, &v, NULL, NULL, L->ws));
  return v;
}

static const char *loss_name(sc_loss l) {
  return l == SC_LOSS_SQUARED ? "squared" : l == SC_LOSS_ABSOLUTE ? "absolute" : "logit-xent";
}

/* One full check of sc_valgrad_f64 on (isa, net, loss, batch). */
static void check_valgrad(const char *isa, const netdef *n, sc_loss loss, size_t batch,
                          uint64_t seed, double worst[2]) {
  char ctx[200];
  int k0 = snprintf(ctx, sizeof ctx, "isa=%s loss=%s batch=%zu net=%zu", isa, loss_name(loss),
                    batch, n->in);
  for (size_t l = 0; l < n->nl && k0 > 0 && (size_t)k0 < sizeof ctx; l++)
    k0 += snprintf(ctx + k0, sizeof ctx - (size_t)k0, "->%zu %s%s", n->L[l].outputs,
                   sc_act_name(n->L[l].act), n->L[l].bias ? "" : "(nobias)");

  sc_chain *c = mk_chain(isa, n);
  size_t np = net_nparams(n), in = n->in, out = net_out(n), nx = batch * in;
  assert_true(net_maxw(n) <= 64);
  double *p = malloc(np * sizeof *p), *pp = malloc(np * sizeof *pp);
  double *x = malloc(nx * sizeof *x), *xx = malloc(nx * sizeof *xx);
  double *g = malloc(np * sizeof *g), *gx = malloc(nx * sizeof *gx);
  double *g2 = malloc(np * sizeof *g2), *gx2 = malloc(nx * sizeof *gx2);
  double *yhat = malloc(batch * out * sizeof *yhat), *yref = malloc(out * sizeof *yref);
  double *tf = malloc(batch * out * sizeof *tf);
  int32_t *lab = malloc(batch * sizeof *lab);
  assert_true(p && pp && x && xx && g && gx && g2 && gx2 && yhat && yref && tf && lab);

  mk_params(c, n, p, seed);
  mk_inputs(n, p, x, batch, seed ^ 0xABCDEF);

  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));

  /* the library forward agrees with the naive reference of the documented definitions */
  SC_OK_OR_FAIL(sc_forward_f64(c, p, x, batch, yhat, ws));
  for (size_t b = 0; b < batch; b++) {
    ref_forward1(n, p, x + b * in, yref);
    for (size_t o = 0; o < out; o++) {
      double a = yhat[b * out + o], r = yref[o];
      if (!(fabs(a - r) <= 1e-12 * fmax(1, fabs(r))))
        fail_msg("%s: forward y[%zu][%zu] = %.17g, reference %.17g", ctx, b, o, a, r);
    }
  }

  /* targets */
  uint64_t ts = seed ^ 0x5151;
  const void *target = NULL;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY) {
    for (size_t b = 0; b < batch; b++) lab[b] = (int32_t)((b * 7 + seed) % out);
    target = lab;
  } else {
    for (size_t k = 0; k < batch * out; k++) {
      double u = tu_unif(&ts);
      tf[k] = loss == SC_LOSS_SQUARED ? u : yhat[k] + (u < 0 ? -1 : 1) * (0.1 + 0.4 * fabs(u));
    }
    target = tf;
  }
  lossctx L = {c, loss, target, batch, ws};

  /* loss value matches the documented formula */
  double lv = NAN, lr = tu_ref_loss(loss, yhat, target, batch, out);
  for (size_t k = 0; k < np; k++) g[k] = 1e3; /* must be overwritten, not accumulated */
  for (size_t k = 0; k < nx; k++) gx[k] = -1e3;
  SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, p, x, target, batch, &lv, g, gx, ws));
  if (!(fabs(lv - lr) <= 1e-12 * fmax(1, fabs(lr))))
    fail_msg("%s: loss %.17g, documented formula gives %.17g", ctx, lv, lr);

  /* g alone and gx alone give the same numbers as both together */
  SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, p, x, target, batch, NULL, g2, NULL, ws));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, p, x, target, batch, NULL, NULL, gx2, ws));
  for (size_t k = 0; k < np; k++)
    if (!(fabs(g[k] - g2[k]) <= 1e-13 * fmax(1, fabs(g[k]))))
      fail_msg("%s: g[%zu] = %.17g with gx, %.17g without", ctx, k, g[k], g2[k]);
  for (size_t k = 0; k < nx; k++)
    if (!(fabs(gx[k] - gx2[k]) <= 1e-13 * fmax(1, fabs(gx[k]))))
      fail_msg("%s: gx[%zu] = %.17g with g, %.17g without", ctx, k, gx[k], gx2[k]);

  /* dL/dp against central differences */
  fdstats st = {0, 0, 0};
  unsigned char *always = mk_always(c, n);
  memcpy(pp, p, np * sizeof *p);
  for (size_t k = 0; k < np; k++) {
    if (!want_index(k, np, always)) continue;
    pp[k] = p[k] + FD_H;
    double lp = loss_at(&L, pp, x);
    pp[k] = p[k] - FD_H;
    double lm = loss_at(&L, pp, x);
    pp[k] = p[k];
    fd_check("dL/dp", ctx, k, g[k], (lp - lm) / (2 * FD_H), &st);
  }
  /* dL/dx against central differences (always every input of the last sample, which
   * sits in a partly filled tile) */
  memcpy(xx, x, nx * sizeof *x);
  for (size_t k = 0; k < nx; k++) {
    if (!want_index(k, nx, NULL) && k < nx - in) continue;
    xx[k] = x[k] + FD_H;
    double lp = loss_at(&L, p, xx);
    xx[k] = x[k] - FD_H;
    double lm = loss_at(&L, p, xx);
    xx[k] = x[k];
    fd_check("dL/dx", ctx, k, gx[k], (lp - lm) / (2 * FD_H), &st);
  }
  assert_true(st.checked > 0);
  if (st.worst > worst[0]) worst[0] = st.worst;
  if (st.worst_abs > worst[1]) worst[1] = st.worst_abs;

  free(always);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(pp), free(x), free(xx), free(g), free(gx), free(g2), free(gx2);
  free(yhat), free(yref), free(tf), free(lab);
}

/* Builds in -> h1 act (bias) -> h2 act (bias alternating) -> out, for case number i. */
static netdef case_net(size_t i, sc_act act, sc_loss loss) {
  static const size_t OUTS[4] = {2, 3, 1, 7};
  netdef n;
  memset(&n, 0, sizeof n);
  n.in = WIDTHS[i % 6];
  n.nl = 3;
  size_t h1 = WIDTHS[(i + 2) % 6], h2 = WIDTHS[(i + 4) % 6], out = OUTS[i % 4];
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY && out < 2) out = 2;
  n.L[0] = sc_dense(h1, act);
  n.L[1] = (i & 1) ? sc_dense_nobias(h2, act) : sc_dense(h2, act);
  /* cross-entropy wants logits; otherwise the activation also sits on the output */
  sc_act oact = loss == SC_LOSS_LOGIT_CROSSENTROPY || (i & 2) ? SC_IDENTITY : act;
  n.L[2] = (i & 4) ? sc_dense_nobias(out, oact) : sc_dense(out, oact);
  return n;
}

/* --------------------------------------------------------------- tests */
static void run_loss(sc_loss loss) {
  const char *isas[3];
  int nisa = tu_isas(isas);
  assert_true(nisa >= 1);
  double worst[2] = {0, 0};
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < NACT; a++) {
      size_t i = a * 3 + (size_t)loss + (size_t)is;
      netdef n = case_net(i, ACTS[a], loss);
      check_valgrad(isas[is], &n, loss, BATCHES[(a + (size_t)loss + (size_t)is) % 5], 1000 + i,
                    worst);
    }
  print_message(
      "  %s loss: worst FD error: relative %.3g (tolerance %g), absolute %.3g; %d ISA(s)\n",
      loss_name(loss), worst[0], FD_RTOL, worst[1], nisa);
  unsetenv("SC_ISA");
}

static void test_valgrad_squared(void **state) {
  (void)state;
  run_loss(SC_LOSS_SQUARED);
}
static void test_valgrad_absolute(void **state) {
  (void)state;
  run_loss(SC_LOSS_ABSOLUTE);
}
static void test_valgrad_crossentropy(void **state) {
  (void)state;
  run_loss(SC_LOSS_LOGIT_CROSSENTROPY);
}

/* The example chain of the brief, 3 -> 7 act -> 5 act -> 2, every activation, with and
 * without biases, at batch 1 and at a batch of 70 that spans two slices. */
static void test_valgrad_small_chain_all_acts(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst[2] = {0, 0};
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < NACT; a++)
      for (int bias = 0; bias < 2; bias++) {
        netdef n;
        memset(&n, 0, sizeof n);
        n.in = 3;
        n.nl = 3;
        n.L[0] = bias ? sc_dense(7, ACTS[a]) : sc_dense_nobias(7, ACTS[a]);
        n.L[1] = bias ? sc_dense(5, ACTS[a]) : sc_dense_nobias(5, ACTS[a]);
        n.L[2] = bias ? sc_dense(2, SC_IDENTITY) : sc_dense_nobias(2, SC_IDENTITY);
        sc_loss loss = (sc_loss)(SC_LOSS_SQUARED + (int)((a + (size_t)bias) % 3));
        check_valgrad(isas[is], &n, loss, bias ? 70 : 1, 77 + a, worst);
      }
  print_message("  3->7->5->2: worst FD error: relative %.3g, absolute %.3g\n", worst[0], worst[1]);
  unsetenv("SC_ISA");
}

/* Single-layer chains: the activation is the output layer, every width. */
static void test_valgrad_single_layer(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst[2] = {0, 0};
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < NACT; a++) {
      netdef n;
      memset(&n, 0, sizeof n);
      n.in = WIDTHS[(a + 1) % 6];
      n.nl = 1;
      n.L[0] = (a & 1) ? sc_dense_nobias(WIDTHS[a % 6], ACTS[a]) : sc_dense(WIDTHS[a % 6], ACTS[a]);
      check_valgrad(isas[is], &n, a % 2 ? SC_LOSS_ABSOLUTE : SC_LOSS_SQUARED, BATCHES[(a + 2) % 5],
                    500 + a, worst);
    }
  print_message("  single layer: worst FD error: relative %.3g, absolute %.3g\n", worst[0],
                worst[1]);
  unsetenv("SC_ISA");
}

/* ------------------------------------------------------------- pullback */
typedef struct pbctx {
  const sc_chain *c;
  const double *dy;
  size_t batch, out;
  sc_workspace *ws;
  double *y;
} pbctx;

static double dot_dy_y(const pbctx *P, const double *p, const double *x) {
  SC_OK_OR_FAIL(sc_forward_f64(P->c, p, x, P->batch, P->y, P->ws));
  double s = 0;
  for (size_t k = 0; k < P->batch * P->out; k++) s += P->dy[k] * P->y[k];
  return s;
}

static void check_pullback(const char *isa, const netdef *n, size_t batch, uint64_t seed,
                           double worst[2]) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "pullback isa=%s act=%s batch=%zu in=%zu", isa,
           sc_act_name(n->L[0].act), batch, n->in);
  sc_chain *c = mk_chain(isa, n);
  size_t np = net_nparams(n), in = n->in, out = net_out(n), nx = batch * in;
  double *p = malloc(np * sizeof *p), *pp = malloc(np * sizeof *pp);
  double *x = malloc(nx * sizeof *x), *xx = malloc(nx * sizeof *xx);
  double *g = malloc(np * sizeof *g), *g0 = malloc(np * sizeof *g0);
  double *gx = malloc(nx * sizeof *gx), *gx2 = malloc(nx * sizeof *gx2);
  double *dy = malloc(batch * out * sizeof *dy), *y = malloc(batch * out * sizeof *y);
  assert_true(p && pp && x && xx && g && g0 && gx && gx2 && dy && y);
  mk_params(c, n, p, seed);
  mk_inputs(n, p, x, batch, seed + 99);
  tu_fill_f64(dy, batch * out, seed + 5, 1.0);
  tu_fill_f64(g0, np, seed + 6, 2.0); /* pullback adds into g */
  memcpy(g, g0, np * sizeof *g);
  for (size_t k = 0; k < nx; k++) gx[k] = 1e6; /* gx is overwritten */

  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch + 3));
  pbctx P = {c, dy, batch, out, ws, y};

  SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, g, gx, ws));
  fdstats st = {0, 0, 0};
  unsigned char *always = mk_always(c, n);
  memcpy(pp, p, np * sizeof *p);
  for (size_t k = 0; k < np; k++) {
    if (!want_index(k, np, always)) continue;
    pp[k] = p[k] + FD_H;
    double fp = dot_dy_y(&P, pp, x);
    pp[k] = p[k] - FD_H;
    double fm = dot_dy_y(&P, pp, x);
    pp[k] = p[k];
    fd_check("g - g0", ctx, k, g[k] - g0[k], (fp - fm) / (2 * FD_H), &st);
  }
  memcpy(xx, x, nx * sizeof *x);
  for (size_t k = 0; k < nx; k++) {
    if (!want_index(k, nx, NULL) && k < nx - in) continue;
    xx[k] = x[k] + FD_H;
    double fp = dot_dy_y(&P, p, xx);
    xx[k] = x[k] - FD_H;
    double fm = dot_dy_y(&P, p, xx);
    xx[k] = x[k];
    fd_check("gx", ctx, k, gx[k], (fp - fm) / (2 * FD_H), &st);
  }
  if (st.worst > worst[0]) worst[0] = st.worst;
  if (st.worst_abs > worst[1]) worst[1] = st.worst_abs;

  /* a second call adds the same vector-Jacobian product once more */
  double *g1 = malloc(np * sizeof *g1);
  assert_non_null(g1);
  memcpy(g1, g, np * sizeof *g);
  SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, g, NULL, ws));
  for (size_t k = 0; k < np; k++) {
    double want = g0[k] + 2 * (g1[k] - g0[k]);
    if (!(fabs(g[k] - want) <= 1e-12 * fmax(1, fabs(want))))
      fail_msg("%s: second pullback: g[%zu] = %.17g, expected g0 + 2 vjp = %.17g", ctx, k, g[k],
               want);
  }
  /* gx alone equals gx computed together with g */
  for (size_t k = 0; k < nx; k++) gx2[k] = -5;
  SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, NULL, gx2, ws));
  for (size_t k = 0; k < nx; k++)
    if (!(fabs(gx2[k] - gx[k]) <= 1e-13 * fmax(1, fabs(gx[k]))))
      fail_msg("%s: gx[%zu] alone %.17g, with g %.17g", ctx, k, gx2[k], gx[k]);
  /* neither output requested: nothing to do, not an error, g untouched */
  memcpy(g1, g, np * sizeof *g);
  SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, NULL, NULL, ws));
  assert_memory_equal(g1, g, np * sizeof *g);

  free(g1);
  free(always);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(pp), free(x), free(xx), free(g), free(g0), free(gx), free(gx2), free(dy), free(y);
}

static void test_pullback_fd(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst[2] = {0, 0};
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < NACT; a++) {
      /* 3 -> 7 act -> 5 act -> 2 act, and a wider variant */
      netdef n;
      memset(&n, 0, sizeof n);
      n.in = 3;
      n.nl = 3;
      n.L[0] = sc_dense(7, ACTS[a]);
      n.L[1] = sc_dense_nobias(5, ACTS[a]);
      n.L[2] = sc_dense(2, ACTS[a]);
      check_pullback(isas[is], &n, BATCHES[(a + (size_t)is) % 5], 300 + a, worst);

      netdef w;
      memset(&w, 0, sizeof w);
      w.in = WIDTHS[(a + 3) % 6];
      w.nl = 2;
      w.L[0] = sc_dense_nobias(WIDTHS[(a + 5) % 6], ACTS[a]);
      w.L[1] = sc_dense(WIDTHS[(a + 1) % 6], ACTS[(a + 2) % NACT]);
      check_pullback(isas[is], &w, BATCHES[(a + 3) % 5] + 30, 400 + a, worst);
    }
  print_message("  pullback: worst FD error: relative %.3g, absolute %.3g\n", worst[0], worst[1]);
  unsetenv("SC_ISA");
}

/* valgrad's g equals the pullback of the loss cotangent dL/dyhat (squared loss:
 * 2 (yhat - t) / B), started from g = 0. */
static void test_valgrad_equals_pullback_of_loss_cotangent(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    netdef n;
    memset(&n, 0, sizeof n);
    n.in = 17;
    n.nl = 3;
    n.L[0] = sc_dense(16, SC_GELU);
    n.L[1] = sc_dense(33, SC_TANH);
    n.L[2] = sc_dense(3, SC_SIGMOID);
    const size_t B = 33, np = net_nparams(&n), O = 3;
    sc_chain *c = mk_chain(isas[is], &n);
    double *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *gp = calloc(np, sizeof *gp);
    double x[33 * 17], t[33 * 3], y[33 * 3], dy[33 * 3], gx[33 * 17], gxp[33 * 17];
    assert_true(p && g && gp);
    mk_params(c, &n, p, 4242);
    tu_fill_f64(x, B * 17, 1, 1.0);
    tu_fill_f64(t, B * O, 2, 1.0);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, p, x, t, B, NULL, g, gx, ws));
    SC_OK_OR_FAIL(sc_forward_f64(c, p, x, B, y, ws));
    for (size_t k = 0; k < B * O; k++) dy[k] = 2 * (y[k] - t[k]) / (double)B;
    SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, B, gp, gxp, ws));
    for (size_t k = 0; k < np; k++)
      if (!(fabs(g[k] - gp[k]) <= 1e-13 * fmax(1e-3, fabs(g[k]))))
        fail_msg("isa=%s g[%zu]: valgrad %.17g, pullback %.17g", isas[is], k, g[k], gp[k]);
    for (size_t k = 0; k < B * 17; k++)
      if (!(fabs(gx[k] - gxp[k]) <= 1e-13 * fmax(1e-3, fabs(gx[k]))))
        fail_msg("isa=%s gx[%zu]: valgrad %.17g, pullback %.17g", isas[is], k, gx[k], gxp[k]);
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    free(p), free(g), free(gp);
  }
  unsetenv("SC_ISA");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valgrad_squared),
      cmocka_unit_test(test_valgrad_absolute),
      cmocka_unit_test(test_valgrad_crossentropy),
      cmocka_unit_test(test_valgrad_small_chain_all_acts),
      cmocka_unit_test(test_valgrad_single_layer),
      cmocka_unit_test(test_pullback_fd),
      cmocka_unit_test(test_valgrad_equals_pullback_of_loss_cotangent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
