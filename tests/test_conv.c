/* tests/test_conv.c — image chains: conv2d (stride, padding), maxpool2d, flatten, dropout,
 * sc_evaluate.
 *
 * 1. Reference forward. The test carries its own naive double-precision forward of the
 *    documented definitions (simplechain.h: cross-correlation in NCHW, weights K x C x kh x
 *    kw then the bias, stride, zero padding; non-overlapping max windows, rounded down;
 *    flatten in NCHW order; dense; dropout = identity outside training) and its own shape
 *    arithmetic (H' = (H + 2 ph - kh) / sh + 1, H' = H / kh for pooling, parameter counts
 *    and offsets), checked against sc_chain_layer_info for every chain built here.
 *    sc_forward_f64 must agree with it to
 *        |y - r| <= FWD_RTOL * max(|r|, 1),     FWD_RTOL = 1e-12
 *    (values are O(1): inputs in [-1, 1), Glorot weights; at most 175 terms per sum, so
 *    the library may sum in any order), on every ISA path, over ~50 configurations:
 *    C in {1,2,3}, H, W in 5..9 (mostly non-square), kernels 1x1, 3x3, 2x3, 3x2, 5x5,
 *    strides 1 and 2 (also mixed), paddings 0, 1, 2 (< kernel, mixed), 1, 4, 6, 7 output
 *    channels, every activation, with and without bias, half of them followed by
 *    maxpool -> flatten -> dense; batches 1, 5 and 33 (33 spans two 32-sample tiles).
 *    The float forward is checked against the same reference, fed the float-rounded p
 *    and x, at FWD_RTOL_F32 = 1e-5 (float sums of <= 175 terms, the 1.5-ulp float tanh;
 *    measured worst 4.3e-7).
 *
 * 2. Finite differences in double. sc_valgrad_f64 (squared loss; logit cross-entropy
 *    after flatten + dense) and sc_pullback_f64 (F = <dy, y>) against central
 *    differences (F(v + h e_k) - F(v - h e_k)) / 2h w.r.t. p and x, with
 *        |fd - an| / max(|fd|, |an|, FD_FLOOR) <= FD_RTOL = 1e-6,  FD_FLOOR = 1e-2
 *    (an absolute 1e-8 for components below 1e-2: dead units, cancellations).
 *    Step h = FD_H = 1e-5. Error budget: truncation h^2 |F'''| / 6 ~ 2e-11 |F'''|;
 *    rounding ~ eps |F| / h, and |F| reaches ~60 here (squared loss over 126 conv outputs
 *    per sample), i.e. ~1e-9 at h = 1e-5 but ~1e-8 at h = 1e-6, which is the absolute
 *    tolerance itself. Measured worst errors (absolute / relative): h = 1e-6: 1.2e-8 /
 *    1.2e-6 (a failure from rounding noise alone); h = 3e-6: 1.7e-8 / 6.7e-7; h = 1e-5:
 *    3.4e-9 / 1.5e-7. Hence h = 1e-5, as in tests/test_grad.c. The worst errors are
 *    printed on every run.
 *    Kinks: inputs are redrawn, sample by sample, until every relu pre-activation has
 *    |z| >= KINK_MARGIN = 1e-3 and every max-pool window's largest value beats the
 *    runner-up by >= KINK_MARGIN (windows of dead relu zeros excepted: their gradient is
 *    0 whichever element wins), measured by the reference forward; a step of h moves any
 *    of them by ~h = 1e-5 << KINK_MARGIN, so no difference straddles a kink.
 *    Dropout (rate 0.3): sc_workspace_set_dropout(ws, seed, step) is reset before EVERY
 *    sc_valgrad call (each call advances the step), so the analytic gradient and all the
 *    finite-difference evaluations share one mask.
 *    Cases: a single conv with every activation, with and without bias, with strides and
 *    paddings; max-pool on raw inputs (distinct values; trailing rows/columns that fill
 *    no window) and after conv (tanh; relu); flatten; dropout after conv, after dense and
 *    on the input; the LeNet-like chain 1x12x12 -> conv 3x3x4 relu -> maxpool 2 -> conv
 *    3x3x6 tanh -> flatten -> dense 10. Batches 1, 2, 3, 5, 33. Large arrays are checked
 *    on a strided subset of about MAX_CHECKS components (plus the first and last weight
 *    and every bias of every layer, and every input of the last sample). Every ISA path
 *    runs them (the double kernels are compiled per ISA too).
 *
 * 3. Every ISA path in float against the scalar path: forward y, valgrad loss / g / gx,
 *    pullback g / gx for the LeNet-like chain (cross-entropy and squared) and for LeNet5
 *    (1x28x28 -> conv 5x5x6 relu -> maxpool 2 -> conv 5x5x16 relu -> maxpool 2 -> flatten
 *    -> dense 120 relu -> dense 84 relu -> dense 10), batches 1, 7, 33, 100, with
 *        |v - r| <= ISA_RTOL * max(|r|, ISA_FLOOR * max_k |r_k|),  ISA_RTOL = 1e-4,
 *    ISA_FLOOR = 0.1 (as tests/test_isa.c). Float rounding differs between paths by
 *    ~1e-6, so the inputs keep every relu pre-activation and max-pool gap >= ISA_MARGIN =
 *    1e-4 away from a kink (else one path could route a gradient elsewhere).
 *
 * 4. Dropout semantics (identity at rate 0 and outside sc_valgrad, the fraction kept and
 *    the 1/(1-rate) scale, mask determinism in (seed, step), step advance, independence
 *    of threads, batch size and precision, bad rates). 5. Shape errors and LeNet5's layer
 *    table. 6. sc_evaluate against hand-computed accuracy (ties: first index) and loss.
 * 7. The fused pool pullback (a 2 x 2 max-pool's pullback with the relu or identity conv's
 *    below it, SC_POOL_FUSE): bitwise equal to the separate passes (valgrad, valgrad without
 *    g, pullback; 1 and 2 threads; batches 1, 33, 70; inputs constant over 4 x 4 blocks so
 *    that windows tie), on every ISA path; a bad SC_POOL_FUSE value is SC_ERR_ARG.
 *
 * Run time: ~4 s (-O3), ~20 s under `make test-asan`, on a 2-core x86 with AVX-512; the
 * finite differences take most of it. LeNet5 runs only in the float ISA comparison.
 */
#include "testutil.h"

#include <float.h>

#define FWD_RTOL 1e-12
#define FWD_RTOL_F32 1e-5
#define FD_H 1e-5
#define FD_RTOL 1e-6
#define FD_FLOOR 1e-2
#define KINK_MARGIN 1e-3
#define MAX_CHECKS 120 /* components of p (and of x) checked per case, roughly */
#define ISA_RTOL 1e-4
#define ISA_FLOOR 0.1
#define ISA_MARGIN 1e-4

#define NACT 7 /* every activation */
static const sc_act ACTS[NACT] = {SC_IDENTITY, SC_RELU, SC_TANH, SC_SIGMOID,
                                  SC_SOFTPLUS, SC_GELU, SC_SILU};

/* ================================================================ networks, shapes */
#define MAXL 10
typedef struct net {
  size_t c, h, w, nl;
  sc_layer L[MAXL];
} net;

typedef struct lshape {
  size_t ic, ih, iw, oc, oh, ow, np, off;
} lshape;

static net mk_net(size_t c, size_t h, size_t w) {
  net n;
  memset(&n, 0, sizeof n);
  n.c = c, n.h = h, n.w = w;
  return n;
}
static void add(net *n, sc_layer l) {
  assert_true(n->nl < MAXL);
  n->L[n->nl++] = l;
}
static sc_layer nobias(sc_layer l) {
  l.bias = 0;
  return l;
}

/* the documented shape arithmetic, independently of the library */
static void net_shapes(const net *n, lshape *s) {
  size_t c = n->c, h = n->h, w = n->w, off = 0;
  for (size_t l = 0; l < n->nl; l++) {
    const sc_layer *L = &n->L[l];
    lshape *o = &s[l];
    o->ic = c, o->ih = h, o->iw = w, o->np = 0, o->off = off;
    switch (L->kind) {
    case SC_LAYER_CONV2D:
      o->oc = L->outputs;
      o->oh = (h + 2 * L->ph - L->kh) / L->sh + 1;
      o->ow = (w + 2 * L->pw - L->kw) / L->sw + 1;
      o->np = L->outputs * c * L->kh * L->kw + (L->bias ? L->outputs : 0);
      break;
    case SC_LAYER_MAXPOOL2D: o->oc = c, o->oh = h / L->kh, o->ow = w / L->kw; break;
    case SC_LAYER_FLATTEN: o->oc = c * h * w, o->oh = 1, o->ow = 1; break;
    case SC_LAYER_DENSE:
      o->oc = L->outputs, o->oh = 1, o->ow = 1;
      o->np = L->outputs * c * h * w + (L->bias ? L->outputs : 0);
      break;
    default: /* dropout */ o->oc = c, o->oh = h, o->ow = w; break;
    }
    off += o->np;
    c = o->oc, h = o->oh, w = o->ow;
  }
}
static size_t net_in(const net *n) { return n->c * n->h * n->w; }
static size_t net_out(const net *n) {
  lshape s[MAXL];
  net_shapes(n, s);
  const lshape *q = &s[n->nl - 1];
  return q->oc * q->oh * q->ow;
}
static size_t net_np(const net *n) {
  lshape s[MAXL];
  net_shapes(n, s);
  return s[n->nl - 1].off + s[n->nl - 1].np;
}
static size_t net_maxfeat(const net *n) {
  lshape s[MAXL];
  net_shapes(n, s);
  size_t m = net_in(n);
  for (size_t l = 0; l < n->nl; l++)
    if (s[l].oc * s[l].oh * s[l].ow > m) m = s[l].oc * s[l].oh * s[l].ow;
  return m;
}
static int net_has_dropout(const net *n) {
  for (size_t l = 0; l < n->nl; l++)
    if (n->L[l].kind == SC_LAYER_DROPOUT && n->L[l].rate > 0) return 1;
  return 0;
}

static void net_desc(const net *n, char *buf, size_t cap) {
  int k = snprintf(buf, cap, "%zux%zux%zu", n->c, n->h, n->w);
  for (size_t l = 0; l < n->nl && k > 0 && (size_t)k < cap; l++) {
    const sc_layer *L = &n->L[l];
    char *b = buf + k;
    size_t r = cap - (size_t)k;
    int m = 0;
    switch (L->kind) {
    case SC_LAYER_CONV2D:
      m = snprintf(b, r, " -> conv %zux%zu K%zu s%zux%zu p%zux%zu %s%s", L->kh, L->kw, L->outputs,
                   L->sh, L->sw, L->ph, L->pw, sc_act_name(L->act), L->bias ? "" : " nobias");
      break;
    case SC_LAYER_MAXPOOL2D: m = snprintf(b, r, " -> maxpool %zux%zu", L->kh, L->kw); break;
    case SC_LAYER_FLATTEN: m = snprintf(b, r, " -> flatten"); break;
    case SC_LAYER_DENSE:
      m = snprintf(b, r, " -> dense %zu %s%s", L->outputs, sc_act_name(L->act),
                   L->bias ? "" : " nobias");
      break;
    default: m = snprintf(b, r, " -> dropout %g", L->rate); break;
    }
    if (m < 0) break;
    k += m;
  }
}

/* distance to the nearest kink met by one sample */
typedef struct margins {
  double relu; /* smallest |z| over relu pre-activations */
  double gap;  /* smallest (max - runner-up) over max-pool windows (not all-dead ones) */
} margins;

/* One sample through the documented definitions (dropout = identity). */
static void ref_forward1(const net *n, const double *p, const double *x, double *y, margins *m) {
  lshape s[MAXL];
  net_shapes(n, s);
  size_t mf = net_maxfeat(n);
  double *A = malloc(mf * sizeof *A), *B = malloc(mf * sizeof *B);
  assert_true(A && B);
  memcpy(A, x, net_in(n) * sizeof *A);
  double *cur = A, *nxt = B;
  m->relu = m->gap = DBL_MAX;
  for (size_t l = 0; l < n->nl; l++) {
    const sc_layer *L = &n->L[l];
    const lshape *q = &s[l];
    const double *W = p + q->off;
    switch (L->kind) {
    case SC_LAYER_CONV2D: {
      size_t R = q->ic * L->kh * L->kw;
      const double *b = L->bias ? W + q->oc * R : NULL;
      for (size_t k = 0; k < q->oc; k++)
        for (size_t u = 0; u < q->oh; u++)
          for (size_t v = 0; v < q->ow; v++) {
            double z = b ? b[k] : 0;
            for (size_t c = 0; c < q->ic; c++)
              for (size_t i = 0; i < L->kh; i++) {
                long yy = (long)(u * L->sh + i) - (long)L->ph;
                if (yy < 0 || yy >= (long)q->ih) continue;
                for (size_t j = 0; j < L->kw; j++) {
                  long xx = (long)(v * L->sw + j) - (long)L->pw;
                  if (xx < 0 || xx >= (long)q->iw) continue;
                  z += W[((k * q->ic + c) * L->kh + i) * L->kw + j] *
                       cur[(c * q->ih + (size_t)yy) * q->iw + (size_t)xx];
                }
              }
            if (L->act == SC_RELU && fabs(z) < m->relu) m->relu = fabs(z);
            nxt[(k * q->oh + u) * q->ow + v] = tu_ref_act(L->act, z);
          }
      break;
    }
    case SC_LAYER_MAXPOOL2D:
      for (size_t c = 0; c < q->oc; c++)
        for (size_t u = 0; u < q->oh; u++)
          for (size_t v = 0; v < q->ow; v++) {
            double best = -INFINITY, second = -INFINITY;
            for (size_t i = 0; i < L->kh; i++)
              for (size_t j = 0; j < L->kw; j++) {
                double val = cur[(c * q->ih + u * L->kh + i) * q->iw + v * L->kw + j];
                if (val > best) {
                  second = best;
                  best = val;
                } else if (val > second) {
                  second = val;
                }
              }
            nxt[(c * q->oh + u) * q->ow + v] = best;
            if (!(best == 0 && second == 0) && best - second < m->gap) m->gap = best - second;
          }
      break;
    case SC_LAYER_DENSE: {
      size_t I = q->ic * q->ih * q->iw, O = q->oc;
      const double *b = L->bias ? W + O * I : NULL;
      for (size_t o = 0; o < O; o++) {
        double z = b ? b[o] : 0;
        for (size_t i = 0; i < I; i++) z += W[o * I + i] * cur[i];
        if (L->act == SC_RELU && fabs(z) < m->relu) m->relu = fabs(z);
        nxt[o] = tu_ref_act(L->act, z);
      }
      break;
    }
    default: /* flatten, dropout */ memcpy(nxt, cur, q->ic * q->ih * q->iw * sizeof *nxt); break;
    }
    double *t = cur;
    cur = nxt;
    nxt = t;
  }
  memcpy(y, cur, net_out(n) * sizeof *y);
  free(A), free(B);
}

/* ================================================================ chain, params, data */
/* Builds the chain on `isa` (NULL: the default path) and checks every layer's shapes,
 * parameter count and offset against the test's own arithmetic. */
static sc_chain *mk_chain(const char *isa, const net *n) {
  if (isa)
    setenv("SC_ISA", isa, 1);
  else
    unsetenv("SC_ISA");
  sc_chain *c = NULL;
  char d[300];
  net_desc(n, d, sizeof d);
  sc_status st = sc_chain_create_image(&c, n->c, n->h, n->w, n->L, n->nl);
  if (st != SC_OK)
    fail_msg("sc_chain_create_image(%s) -> %s: %s", d, sc_status_str(st), sc_last_error());
  if (isa) assert_string_equal(sc_chain_isa(c), isa);
  lshape s[MAXL];
  net_shapes(n, s);
  size_t nl = 0, np = 0, in = 0, out = 0;
  SC_OK_OR_FAIL(sc_chain_nlayers(c, &nl));
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  if (nl != n->nl || np != net_np(n) || in != net_in(n) || out != net_out(n))
    fail_msg("%s: layers %zu, parameters %zu, inputs %zu, outputs %zu; expected %zu, %zu, %zu, %zu",
             d, nl, np, in, out, n->nl, net_np(n), net_in(n), net_out(n));
  for (size_t l = 0; l < n->nl; l++) {
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
    const lshape *q = &s[l];
    size_t want[10] = {q->ic,
                       q->ih,
                       q->iw,
                       q->oc,
                       q->oh,
                       q->ow,
                       q->np,
                       q->off,
                       q->ic * q->ih * q->iw,
                       q->oc * q->oh * q->ow};
    size_t got[10] = {li.in_shape[0],  li.in_shape[1],  li.in_shape[2], li.out_shape[0],
                      li.out_shape[1], li.out_shape[2], li.nparams,     li.param_offset,
                      li.inputs,       li.outputs};
    for (int k = 0; k < 10; k++)
      if (want[k] != got[k])
        fail_msg("%s: layer %zu info: in %zux%zux%zu out %zux%zux%zu np %zu off %zu in %zu out "
                 "%zu; expected in %zux%zux%zu out %zux%zux%zu np %zu off %zu in %zu out %zu",
                 d, l, got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8],
                 got[9], want[0], want[1], want[2], want[3], want[4], want[5], want[6], want[7],
                 want[8], want[9]);
    assert_int_equal(li.layer.kind, n->L[l].kind);
  }
  return c;
}

/* Glorot weights from the library, then random non-zero biases */
static void mk_params(const sc_chain *c, const net *n, double *p, uint64_t seed) {
  lshape s[MAXL];
  net_shapes(n, s);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, net_np(n), seed));
  uint64_t r = seed * 31 + 7;
  for (size_t l = 0; l < n->nl; l++)
    if (s[l].np && n->L[l].bias)
      for (size_t o = 0; o < s[l].oc; o++) p[s[l].off + s[l].np - s[l].oc + o] = 0.5 * tu_unif(&r);
}

/* Inputs in [-1, 1), redrawn sample by sample until the sample is >= margin away from
 * every relu kink and max-pool tie (see the header). */
static void mk_inputs(const net *n, const double *p, double *x, size_t batch, uint64_t seed,
                      double margin) {
  size_t in = net_in(n);
  double *y = malloc(net_out(n) * sizeof *y);
  assert_non_null(y);
  uint64_t s = seed;
  for (size_t b = 0; b < batch; b++) {
    for (int tries = 0;; tries++) {
      assert_true(tries < 2000);
      for (size_t i = 0; i < in; i++) x[b * in + i] = tu_unif(&s);
      margins m;
      ref_forward1(n, p, x + b * in, y, &m);
      if (m.relu >= margin && m.gap >= margin) break;
    }
  }
  free(y);
}

/* ================================================================ 1. reference forward */
typedef struct convcfg {
  size_t c, h, w, kh, kw, k, sh, sw, ph, pw;
} convcfg;

static void check_forward(const char *isa, const net *n, size_t batch, uint64_t seed,
                          double *worst) {
  char d[300];
  net_desc(n, d, sizeof d);
  sc_chain *c = mk_chain(isa, n);
  size_t np = net_np(n), in = net_in(n), out = net_out(n);
  double *p = malloc(np * sizeof *p), *x = malloc(batch * in * sizeof *x);
  double *y = malloc(batch * out * sizeof *y), *r = malloc(out * sizeof *r);
  float *pf = malloc(np * sizeof *pf), *xf = malloc(batch * in * sizeof *xf);
  float *yf = malloc(batch * out * sizeof *yf);
  double *pr = malloc(np * sizeof *pr), *xr = malloc(in * sizeof *xr);
  assert_true(p && x && y && r && pf && xf && yf && pr && xr);
  mk_params(c, n, p, seed);
  tu_fill_f64(x, batch * in, seed + 1, 1.0);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));
  for (size_t k = 0; k < batch * out; k++) y[k] = NAN;
  SC_OK_OR_FAIL(sc_forward_f64(c, p, x, batch, y, ws));
  margins m;
  for (size_t b = 0; b < batch; b++) {
    ref_forward1(n, p, x + b * in, r, &m);
    for (size_t o = 0; o < out; o++) {
      double a = y[b * out + o], e = fabs(a - r[o]) / fmax(fabs(r[o]), 1);
      if (!(e <= FWD_RTOL))
        fail_msg("isa=%s %s batch=%zu: y[%zu][%zu] = %.17g, reference %.17g (err %.3g > %g)", isa,
                 d, batch, b, o, a, r[o], e, FWD_RTOL);
      if (e > worst[0]) worst[0] = e;
    }
  }
  /* float: the same reference on the float-rounded values */
  for (size_t k = 0; k < np; k++) pf[k] = (float)p[k], pr[k] = pf[k];
  for (size_t k = 0; k < batch * in; k++) xf[k] = (float)x[k];
  SC_OK_OR_FAIL(sc_forward(c, pf, xf, batch, yf, ws));
  for (size_t b = 0; b < batch; b++) {
    for (size_t i = 0; i < in; i++) xr[i] = xf[b * in + i];
    ref_forward1(n, pr, xr, r, &m);
    for (size_t o = 0; o < out; o++) {
      double a = yf[b * out + o], e = fabs(a - r[o]) / fmax(fabs(r[o]), 1);
      if (!(e <= FWD_RTOL_F32))
        fail_msg("isa=%s %s batch=%zu: float y[%zu][%zu] = %.9g, reference %.9g (err %.3g > %g)",
                 isa, d, batch, b, o, a, r[o], e, FWD_RTOL_F32);
      if (e > worst[1]) worst[1] = e;
    }
  }
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(x), free(y), free(r), free(pf), free(xf), free(yf), free(pr), free(xr);
}

static void test_forward_reference(void **state) {
  (void)state;
  static const size_t KER[5][2] = {{1, 1}, {3, 3}, {2, 3}, {3, 2}, {5, 5}};
  static const size_t STR[3][2] = {{1, 1}, {2, 2}, {2, 1}};
  static const size_t PAD[5][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {2, 1}};
  static const size_t CH[3] = {1, 2, 3}, KOUT[4] = {1, 4, 6, 7}, BATCH[3] = {1, 5, 33};
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst[2] = {0, 0};
  size_t cases = 0;
  for (int is = 0; is < nisa; is++) {
    size_t idx = 0;
    for (size_t ki = 0; ki < 5; ki++)
      for (size_t si = 0; si < 3; si++)
        for (size_t pi = 0; pi < 5; pi++) {
          size_t kh = KER[ki][0], kw = KER[ki][1], ph = PAD[pi][0], pw = PAD[pi][1];
          if (ph >= kh || pw >= kw) continue;
          if (si == 2 && pi > 1) /* mixed strides: a few paddings suffice */
            continue;
          size_t i = idx++;
          size_t C = CH[i % 3], H = 5 + i % 5, W = 5 + (i * 3 + 2) % 5, K = KOUT[i % 4];
          if (H + 2 * ph < kh || W + 2 * pw < kw) continue;
          net n = mk_net(C, H, W);
          sc_layer conv = sc_conv2d_ex(kh, kw, K, ACTS[i % NACT], STR[si][0], STR[si][1], ph, pw);
          add(&n, (i & 1) ? nobias(conv) : conv);
          lshape s[MAXL];
          net_shapes(&n, s);
          if ((i % 4) >= 2 && s[0].oh >= 2 && s[0].ow >= 2) {
            add(&n, sc_maxpool2d(2, s[0].ow >= 3 && (i & 4) ? 3 : 2));
            add(&n, sc_flatten());
            add(&n, sc_dense(3, SC_TANH));
          }
          check_forward(isas[is], &n, BATCH[(i / 3) % 3], 100 + i, worst);
          cases++;
        }
  }
  /* the plain sc_conv2d constructor (stride 1, no padding, bias) and chains of layers */
  for (int is = 0; is < nisa; is++) {
    net n = mk_net(3, 9, 8);
    add(&n, sc_conv2d(3, 3, 6, SC_RELU));
    add(&n, sc_conv2d_ex(2, 3, 4, SC_GELU, 2, 1, 1, 2));
    add(&n, sc_maxpool2d(2, 3));
    add(&n, sc_dropout(0.5));
    add(&n, sc_flatten());
    add(&n, sc_dense(5, SC_SIGMOID));
    for (size_t b = 0; b < 3; b++) check_forward(isas[is], &n, BATCH[b], 900 + b, worst), cases++;
    net m = mk_net(1, 12, 12);
    add(&m, sc_conv2d(3, 3, 4, SC_RELU));
    add(&m, sc_maxpool2d(2, 2));
    add(&m, sc_conv2d(3, 3, 6, SC_TANH));
    add(&m, sc_flatten());
    add(&m, sc_dense(10, SC_IDENTITY));
    check_forward(isas[is], &m, 33, 950, worst), cases++;
  }
  print_message("  forward vs reference: %zu cases, %d ISA(s); worst relative error double %.3g "
                "(tolerance %g), float %.3g (tolerance %g)\n",
                cases, nisa, worst[0], FWD_RTOL, worst[1], FWD_RTOL_F32);
  unsetenv("SC_ISA");
}

/* ================================================================ 2. finite differences */
typedef enum fdkind { FD_SQUARED, FD_XENT, FD_PULLBACK } fdkind;
static const char *fd_name(fdkind k) {
  return k == FD_SQUARED ? "valgrad squared" : k == FD_XENT ? "valgrad logit-xent" : "pullback";
}

typedef struct fdctx {
  const sc_chain *c;
  sc_workspace *ws;
  fdkind k;
  const void *target;
  const double *dy;
  double *y;
  size_t batch, out;
  uint64_t dseed, dstep;
} fdctx;

static double fd_eval(const fdctx *F, const double *p, const double *x) {
  if (F->k == FD_PULLBACK) {
    SC_OK_OR_FAIL(sc_forward_f64(F->c, p, x, F->batch, F->y, F->ws));
    double s = 0;
    for (size_t k = 0; k < F->batch * F->out; k++) s += F->dy[k] * F->y[k];
    return s;
  }
  /* the same dropout mask for every evaluation */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(F->ws, F->dseed, F->dstep));
  double v = NAN;
  SC_OK_OR_FAIL(sc_valgrad_f64(F->c,
                               F->k == FD_SQUARED ? SC_LOSS_SQUARED : SC_LOSS_LOGIT_CROSSENTROPY, p,
                               x, F->target, F->batch, &v, NULL, NULL, F->ws));
  return v;
}

typedef struct fdstats {
  double worst, worst_abs;
  size_t checked, cases;
} fdstats;

static void fd_cmp(const char *what, const char *ctx, size_t k, double an, double fd, fdstats *st) {
  tu_fd_compare(ctx, what, k, an, fd, FD_RTOL, FD_FLOOR, &st->worst, &st->worst_abs, &st->checked);
}

static int want_index(size_t k, size_t n, const unsigned char *always) {
  return tu_fd_want(k, n, MAX_CHECKS, always);
}

static void check_fd(const char *isa, const net *n, fdkind kind, size_t batch, uint64_t seed,
                     fdstats *st) {
  char d[300], ctx[400];
  net_desc(n, d, sizeof d);
  snprintf(ctx, sizeof ctx, "isa=%s %s batch=%zu net %s", isa, fd_name(kind), batch, d);
  sc_chain *c = mk_chain(isa, n);
  size_t np = net_np(n), in = net_in(n), out = net_out(n), nx = batch * in, ny = batch * out;
  double *p = malloc(np * sizeof *p), *pp = malloc(np * sizeof *pp);
  double *x = malloc(nx * sizeof *x), *xx = malloc(nx * sizeof *xx);
  double *g = malloc(np * sizeof *g), *g0 = malloc(np * sizeof *g0);
  double *gx = malloc(nx * sizeof *gx), *yhat = malloc(ny * sizeof *yhat);
  double *yref = malloc(out * sizeof *yref), *ybuf = malloc(ny * sizeof *ybuf);
  double *tf = malloc(ny * sizeof *tf), *dy = malloc(ny * sizeof *dy);
  int32_t *lab = malloc(batch * sizeof *lab);
  unsigned char *always = calloc(np, 1);
  assert_true(p && pp && x && xx && g && g0 && gx && yhat && yref && ybuf && tf && dy && lab &&
              always);
  mk_params(c, n, p, seed);
  mk_inputs(n, p, x, batch, seed ^ 0xABCDEF, KINK_MARGIN);
  lshape s[MAXL];
  net_shapes(n, s);
  for (size_t l = 0; l < n->nl; l++)
    if (s[l].np) {
      size_t nw = s[l].np - (n->L[l].bias ? s[l].oc : 0);
      always[s[l].off] = always[s[l].off + nw - 1] = 1;
      for (size_t k = nw; k < s[l].np; k++) always[s[l].off + k] = 1;
    }

  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));
  int drop = net_has_dropout(n);

  /* forward agrees with the reference (dropout is the identity in sc_forward) */
  SC_OK_OR_FAIL(sc_forward_f64(c, p, x, batch, yhat, ws));
  for (size_t b = 0; b < batch; b++) {
    margins m;
    ref_forward1(n, p, x + b * in, yref, &m);
    for (size_t o = 0; o < out; o++)
      if (!(fabs(yhat[b * out + o] - yref[o]) <= FWD_RTOL * fmax(1, fabs(yref[o]))))
        fail_msg("%s: forward y[%zu][%zu] = %.17g, reference %.17g", ctx, b, o, yhat[b * out + o],
                 yref[o]);
  }

  const void *target = NULL;
  if (kind == FD_XENT) {
    assert_true(out >= 2);
    for (size_t b = 0; b < batch; b++) lab[b] = (int32_t)((b * 7 + seed) % out);
    target = lab;
  } else {
    tu_fill_f64(tf, ny, seed ^ 0x5151, 1.0);
    target = tf;
  }
  tu_fill_f64(dy, ny, seed + 5, 1.0);
  fdctx F = {c, ws, kind, target, dy, ybuf, batch, out, seed * 3 + 1, seed % 5 + 2};

  /* analytic gradients */
  for (size_t k = 0; k < nx; k++) gx[k] = 1e6; /* overwritten */
  if (kind == FD_PULLBACK) {
    tu_fill_f64(g0, np, seed + 6, 2.0); /* pullback adds into g */
    memcpy(g, g0, np * sizeof *g);
    SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, g, gx, ws));
  } else {
    for (size_t k = 0; k < np; k++) g[k] = 1e3, g0[k] = 0; /* overwritten, not accumulated */
    double lv = NAN;
    SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, F.dseed, F.dstep));
    SC_OK_OR_FAIL(sc_valgrad_f64(c,
                                 kind == FD_SQUARED ? SC_LOSS_SQUARED : SC_LOSS_LOGIT_CROSSENTROPY,
                                 p, x, target, batch, &lv, g, gx, ws));
    double want =
        drop ? fd_eval(&F, p, x)
             : tu_ref_loss(kind == FD_SQUARED ? SC_LOSS_SQUARED : SC_LOSS_LOGIT_CROSSENTROPY, yhat,
                           target, batch, out);
    if (!(fabs(lv - want) <= 1e-12 * fmax(1, fabs(want))))
      fail_msg("%s: loss %.17g, expected %.17g (%s)", ctx, lv, want,
               drop ? "loss-only sc_valgrad_f64, same mask" : "documented formula");
  }

  memcpy(pp, p, np * sizeof *p);
  for (size_t k = 0; k < np; k++) {
    if (!want_index(k, np, always)) continue;
    pp[k] = p[k] + FD_H;
    double fp = fd_eval(&F, pp, x);
    pp[k] = p[k] - FD_H;
    double fm = fd_eval(&F, pp, x);
    pp[k] = p[k];
    fd_cmp(kind == FD_PULLBACK ? "g - g0" : "dL/dp", ctx, k, g[k] - g0[k], (fp - fm) / (2 * FD_H),
           st);
  }
  memcpy(xx, x, nx * sizeof *x);
  for (size_t k = 0; k < nx; k++) {
    if (!want_index(k, nx, NULL) && k < nx - in) continue;
    xx[k] = x[k] + FD_H;
    double fp = fd_eval(&F, p, xx);
    xx[k] = x[k] - FD_H;
    double fm = fd_eval(&F, p, xx);
    xx[k] = x[k];
    fd_cmp(kind == FD_PULLBACK ? "gx" : "dL/dx", ctx, k, gx[k], (fp - fm) / (2 * FD_H), st);
  }
  st->cases++;

  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(pp), free(x), free(xx), free(g), free(g0), free(gx), free(yhat), free(yref);
  free(ybuf), free(tf), free(dy), free(lab), free(always);
}

static void fd_report(const char *what, const fdstats *st, int nisa) {
  print_message("  %s: %zu cases on %d ISA(s), %zu derivatives; worst FD error: relative %.3g "
                "(tolerance %g), absolute %.3g (h = %g)\n",
                what, st->cases, nisa, st->checked, st->worst, FD_RTOL, st->worst_abs, FD_H);
}

static const convcfg FD_CONV[6] = {
    /* c  h  w kh kw  k sh sw ph pw */
    {2, 7, 6, 3, 3, 4, 2, 1, 1, 2}, {1, 8, 9, 5, 5, 3, 2, 2, 2, 2}, {3, 6, 5, 2, 3, 6, 1, 2, 1, 1},
    {2, 5, 7, 1, 1, 7, 2, 1, 0, 0}, {1, 9, 7, 3, 3, 1, 1, 1, 2, 2}, {3, 5, 8, 3, 2, 4, 1, 2, 0, 1},
};

/* a single conv layer: every activation, with and without bias, each under the squared
 * loss (conv output = chain output), logit cross-entropy (conv -> flatten -> dense 5) and
 * the pullback */
static void test_fd_conv(void **state) {
  (void)state;
  static const size_t BATCH[4] = {1, 2, 5, 33};
  const char *isas[3];
  int nisa = tu_isas(isas);
  fdstats st = {0, 0, 0, 0};
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < NACT; a++)
      for (int bias = 0; bias < 2; bias++) {
        size_t i = a * 2 + (size_t)bias;
        const convcfg *q = &FD_CONV[(i + (size_t)is) % 6];
        sc_layer conv =
            bias ? sc_conv2d_ex(q->kh, q->kw, q->k, ACTS[a], q->sh, q->sw, q->ph, q->pw)
                 : sc_conv2d_nobias(q->kh, q->kw, q->k, ACTS[a], q->sh, q->sw, q->ph, q->pw);
        net n = mk_net(q->c, q->h, q->w);
        add(&n, conv);
        check_fd(isas[is], &n, FD_SQUARED, BATCH[i % 4], 10 + i, &st);
        check_fd(isas[is], &n, FD_PULLBACK, BATCH[(i + 1) % 4], 20 + i, &st);
        add(&n, sc_flatten());
        add(&n, sc_dense(5, SC_IDENTITY));
        check_fd(isas[is], &n, FD_XENT, BATCH[(i + 2) % 4], 30 + i, &st);
      }
  fd_report("conv2d", &st, nisa);
  unsetenv("SC_ISA");
}

/* max-pool on raw inputs (distinct random values; trailing rows / columns that fill no
 * window get exactly zero gradient) and after conv (tanh; relu with dead-zero ties) */
static void test_fd_maxpool(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  fdstats st = {0, 0, 0, 0};
  for (int is = 0; is < nisa; is++) {
    net a = mk_net(3, 7, 9);
    add(&a, sc_maxpool2d(2, 2));
    add(&a, sc_flatten());
    add(&a, sc_dense(4, SC_IDENTITY));
    check_fd(isas[is], &a, FD_XENT, 5, 40, &st);
    check_fd(isas[is], &a, FD_SQUARED, 1, 41, &st);

    net b = mk_net(2, 8, 7);
    add(&b, sc_maxpool2d(2, 3));
    check_fd(isas[is], &b, FD_SQUARED, 33, 42, &st);
    check_fd(isas[is], &b, FD_PULLBACK, 2, 43, &st);

    net c = mk_net(1, 9, 8);
    add(&c, sc_conv2d_ex(3, 3, 3, SC_TANH, 1, 1, 1, 1));
    add(&c, sc_maxpool2d(3, 3));
    check_fd(isas[is], &c, FD_SQUARED, 5, 44, &st);
    check_fd(isas[is], &c, FD_PULLBACK, 33, 45, &st);

    net d = mk_net(2, 8, 8);
    add(&d, sc_conv2d(3, 3, 4, SC_RELU));
    add(&d, sc_maxpool2d(2, 2));
    add(&d, sc_flatten());
    add(&d, sc_dense(3, SC_IDENTITY));
    check_fd(isas[is], &d, FD_XENT, 5, 46, &st);
    check_fd(isas[is], &d, FD_PULLBACK, 1, 47, &st);
  }
  fd_report("maxpool2d", &st, nisa);
  unsetenv("SC_ISA");
}

/* dropout 0.3 after conv and after dense, and on the input itself; the mask is pinned
 * with sc_workspace_set_dropout before every sc_valgrad call */
static void test_fd_dropout(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  fdstats st = {0, 0, 0, 0};
  for (int is = 0; is < nisa; is++) {
    net n = mk_net(2, 6, 6);
    add(&n, sc_conv2d(3, 3, 4, SC_TANH));
    add(&n, sc_dropout(0.3));
    add(&n, sc_flatten());
    add(&n, sc_dense(6, SC_SIGMOID));
    add(&n, sc_dropout(0.3));
    add(&n, sc_dense(3, SC_IDENTITY));
    check_fd(isas[is], &n, FD_SQUARED, 5, 50, &st);
    check_fd(isas[is], &n, FD_XENT, 33, 51, &st);
    check_fd(isas[is], &n, FD_PULLBACK, 5, 52, &st);

    net m = mk_net(1, 5, 5);
    add(&m, sc_dropout(0.3));
    add(&m, sc_conv2d_ex(3, 3, 2, SC_SOFTPLUS, 1, 1, 1, 1));
    add(&m, sc_flatten());
    add(&m, sc_dense(3, SC_IDENTITY));
    check_fd(isas[is], &m, FD_XENT, 2, 53, &st);
    check_fd(isas[is], &m, FD_SQUARED, 33, 54, &st);
  }
  fd_report("dropout", &st, nisa);
  unsetenv("SC_ISA");
}

static net lenet_like(void) {
  net n = mk_net(1, 12, 12);
  add(&n, sc_conv2d(3, 3, 4, SC_RELU));
  add(&n, sc_maxpool2d(2, 2));
  add(&n, sc_conv2d(3, 3, 6, SC_TANH));
  add(&n, sc_flatten());
  add(&n, sc_dense(10, SC_IDENTITY));
  return n;
}

static net lenet5(void) {
  net n = mk_net(1, 28, 28);
  add(&n, sc_conv2d(5, 5, 6, SC_RELU));
  add(&n, sc_maxpool2d(2, 2));
  add(&n, sc_conv2d(5, 5, 16, SC_RELU));
  add(&n, sc_maxpool2d(2, 2));
  add(&n, sc_flatten());
  add(&n, sc_dense(120, SC_RELU));
  add(&n, sc_dense(84, SC_RELU));
  add(&n, sc_dense(10, SC_IDENTITY));
  return n;
}

static void test_fd_lenet_like(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  fdstats st = {0, 0, 0, 0};
  net n = lenet_like();
  for (int is = 0; is < nisa; is++) {
    check_fd(isas[is], &n, FD_XENT, 3, 60, &st);
    check_fd(isas[is], &n, FD_SQUARED, 2, 61, &st);
    check_fd(isas[is], &n, FD_PULLBACK, 3, 62, &st);
    check_fd(isas[is], &n, is & 1 ? FD_SQUARED : FD_XENT, 33, 63, &st);
  }
  fd_report("LeNet-like", &st, nisa);
  unsetenv("SC_ISA");
}

/* ================================================================ 3. ISA paths, float */
typedef struct fres {
  float *y, *g, *gx, *pg, *pgx, loss;
} fres;

static void fres_free(fres *r) {
  free(r->y), free(r->g), free(r->gx), free(r->pg), free(r->pgx);
  memset(r, 0, sizeof *r);
}

static void isa_run(const char *isa, const net *n, sc_loss loss, size_t batch, const float *p,
                    const float *x, const void *target, const float *dy, fres *r) {
  sc_chain *c = mk_chain(isa, n);
  size_t np = net_np(n), nx = batch * net_in(n), ny = batch * net_out(n);
  r->y = malloc(ny * sizeof *r->y);
  r->g = malloc(np * sizeof *r->g);
  r->pg = calloc(np, sizeof *r->pg);
  r->gx = malloc(nx * sizeof *r->gx);
  r->pgx = malloc(nx * sizeof *r->pgx);
  assert_true(r->y && r->g && r->pg && r->gx && r->pgx);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));
  SC_OK_OR_FAIL(sc_forward(c, p, x, batch, r->y, ws));
  for (size_t k = 0; k < np; k++) r->g[k] = 99.0f;
  for (size_t k = 0; k < nx; k++) r->gx[k] = 99.0f, r->pgx[k] = -99.0f;
  SC_OK_OR_FAIL(sc_valgrad(c, loss, p, x, target, batch, &r->loss, r->g, r->gx, ws));
  float lv = 0;
  SC_OK_OR_FAIL(sc_loss_value(c, loss, p, x, target, batch, &lv, ws));
  if (!(fabsf(lv - r->loss) <= 1e-6f * fmaxf(1, fabsf(lv))))
    fail_msg("isa=%s: sc_loss_value %.9g but sc_valgrad loss %.9g", isa, (double)lv,
             (double)r->loss);
  SC_OK_OR_FAIL(sc_pullback(c, p, x, dy, batch, r->pg, r->pgx, ws));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
}

typedef struct diffstats {
  double worst;
  size_t compared;
} diffstats;

static void isa_cmp(const char *what, const char *ctx, const float *v, const float *r, size_t n,
                    diffstats *ds) {
  double scale = 0;
  for (size_t k = 0; k < n; k++) scale = fmax(scale, fabs((double)r[k]));
  for (size_t k = 0; k < n; k++) {
    if (!isfinite(r[k]))
      fail_msg("%s: scalar %s[%zu] = %g is not finite", ctx, what, k, (double)r[k]);
    double den = fmax(fabs((double)r[k]), ISA_FLOOR * scale);
    double dd = fabs((double)v[k] - (double)r[k]);
    double rel = den > 0 ? dd / den : dd;
    if (!(rel <= ISA_RTOL))
      fail_msg("%s: %s[%zu] = %.9g, scalar reference %.9g (relative difference %.3g > %g)", ctx,
               what, k, (double)v[k], (double)r[k], rel, ISA_RTOL);
    if (rel > ds->worst) ds->worst = rel;
    ds->compared++;
  }
}

/* float data for n: parameters (Glorot + biases), nmax samples ISA_MARGIN away from kinks
 * (measured in double on the float-rounded values), labels, targets, cotangents */
typedef struct fdata {
  float *p, *x, *t, *dy;
  int32_t *lab;
} fdata;

static void mk_fdata(const net *n, size_t nmax, uint64_t seed, fdata *D) {
  size_t np = net_np(n), in = net_in(n), out = net_out(n);
  D->p = malloc(np * sizeof *D->p);
  D->x = malloc(nmax * in * sizeof *D->x);
  D->t = malloc(nmax * out * sizeof *D->t);
  D->dy = malloc(nmax * out * sizeof *D->dy);
  D->lab = malloc(nmax * sizeof *D->lab);
  double *pd = malloc(np * sizeof *pd), *xd = malloc(in * sizeof *xd), *y = malloc(out * sizeof *y);
  assert_true(D->p && D->x && D->t && D->dy && D->lab && pd && xd && y);
  sc_chain *c = mk_chain("scalar", n);
  SC_OK_OR_FAIL(sc_params_init(c, D->p, np, seed));
  sc_chain_destroy(c);
  lshape s[MAXL];
  net_shapes(n, s);
  for (size_t l = 0; l < n->nl; l++)
    if (s[l].np && n->L[l].bias)
      tu_fill_f32(D->p + s[l].off + s[l].np - s[l].oc, s[l].oc, seed + l, 0.3);
  for (size_t k = 0; k < np; k++) pd[k] = D->p[k];
  uint64_t r = seed * 7 + 3;
  for (size_t b = 0; b < nmax; b++)
    for (int tries = 0;; tries++) {
      assert_true(tries < 2000);
      for (size_t i = 0; i < in; i++)
        D->x[b * in + i] = (float)tu_unif(&r), xd[i] = D->x[b * in + i];
      margins m;
      ref_forward1(n, pd, xd, y, &m);
      if (m.relu >= ISA_MARGIN && m.gap >= ISA_MARGIN) break;
    }
  tu_fill_f32(D->t, nmax * out, seed + 11, 1.0);
  tu_fill_f32(D->dy, nmax * out, seed + 12, 1.0);
  for (size_t b = 0; b < nmax; b++) D->lab[b] = (int32_t)((b * 5 + seed) % out);
  free(pd), free(xd), free(y);
}
static void fdata_free(fdata *D) { free(D->p), free(D->x), free(D->t), free(D->dy), free(D->lab); }

static void isa_compare_net(const char *name, const net *n, const sc_loss *losses, int nloss,
                            uint64_t seed) {
  static const size_t BATCH[4] = {1, 7, 33, 100};
  const char *isas[3];
  int nisa = tu_isas(isas);
  assert_string_equal(isas[0], "scalar");
  fdata D;
  mk_fdata(n, 100, seed, &D);
  size_t np = net_np(n), in = net_in(n), out = net_out(n);
  diffstats ds = {0, 0};
  for (int li = 0; li < nloss; li++)
    for (size_t bi = 0; bi < 4; bi++) {
      size_t B = BATCH[bi];
      const void *target =
          losses[li] == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)D.lab : (const void *)D.t;
      fres ref;
      isa_run("scalar", n, losses[li], B, D.p, D.x, target, D.dy, &ref);
      for (int is = 1; is < nisa; is++) {
        fres got;
        isa_run(isas[is], n, losses[li], B, D.p, D.x, target, D.dy, &got);
        char ctx[200];
        snprintf(ctx, sizeof ctx, "%s isa=%s loss=%s batch=%zu", name, isas[is],
                 losses[li] == SC_LOSS_SQUARED ? "squared" : "logit-xent", B);
        isa_cmp("y", ctx, got.y, ref.y, B * out, &ds);
        isa_cmp("loss", ctx, &got.loss, &ref.loss, 1, &ds);
        isa_cmp("g", ctx, got.g, ref.g, np, &ds);
        isa_cmp("gx", ctx, got.gx, ref.gx, B * in, &ds);
        isa_cmp("pullback g", ctx, got.pg, ref.pg, np, &ds);
        isa_cmp("pullback gx", ctx, got.pgx, ref.pgx, B * in, &ds);
        fres_free(&got);
      }
      fres_free(&ref);
    }
  print_message("  %s: %d ISA path(s) vs scalar, %zu values compared, worst relative "
                "difference %.3g (tolerance %g)\n",
                name, nisa, ds.compared, ds.worst, ISA_RTOL);
  fdata_free(&D);
  unsetenv("SC_ISA");
}

static void test_isa_lenet_like(void **state) {
  (void)state;
  net n = lenet_like();
  const sc_loss losses[2] = {SC_LOSS_LOGIT_CROSSENTROPY, SC_LOSS_SQUARED};
  isa_compare_net("LeNet-like", &n, losses, 2, 70);
}

static void test_isa_lenet5(void **state) {
  (void)state;
  net n = lenet5();
  const sc_loss losses[1] = {SC_LOSS_LOGIT_CROSSENTROPY};
  isa_compare_net("LeNet5", &n, losses, 1, 80);
}

/* the AVX-512 float conv's input gradient runs 2 neighbouring positions at once (6 input
 * channels a block) where every tap of the kernel reaches both (stride 1 across), and position
 * by position elsewhere: nets whose dx takes both, with padding, a row stride, a 1 x 1 and a
 * 1-wide kernel, and channel counts that leave 1-5 channels to the narrower blocks; each ISA
 * path against the scalar reference (gx, g, pullback) */
static void test_isa_conv_dx_blocks(void **state) {
  (void)state;
  const sc_loss losses[2] = {SC_LOSS_SQUARED, SC_LOSS_LOGIT_CROSSENTROPY};
  net a = mk_net(6, 10, 10); /* 3 x 3, pad 1: both forms in each row; its dx is gx */
  add(&a, sc_conv2d_ex(3, 3, 8, SC_RELU, 1, 1, 1, 1));
  add(&a, sc_flatten());
  add(&a, sc_dense(5, SC_IDENTITY));
  isa_compare_net("dx blocks, 6 ch 3x3 pad 1", &a, losses, 2, 91);
  net b = mk_net(2, 9, 13); /* 13 channels (6 + 6 + 1) into a 2 x 4 kernel, stride 2 x 1 */
  add(&b, sc_conv2d(1, 1, 13, SC_TANH));
  add(&b, sc_conv2d_ex(2, 4, 5, SC_RELU, 2, 1, 1, 2));
  add(&b, sc_flatten());
  add(&b, sc_dense(4, SC_IDENTITY));
  isa_compare_net("dx blocks, 13 ch 2x4 stride 2x1", &b, losses, 2, 92);
  net d = mk_net(1, 16, 14); /* LeNet5's conv2 shape with 11 channels, a 5 x 1 kernel after */
  add(&d, sc_conv2d(3, 3, 11, SC_RELU));
  add(&d, sc_conv2d(5, 5, 7, SC_RELU));
  add(&d, sc_conv2d(5, 1, 3, SC_IDENTITY));
  add(&d, sc_flatten());
  add(&d, sc_dense(3, SC_IDENTITY));
  isa_compare_net("dx blocks, 11 ch 5x5, 7 ch 5x1", &d, losses, 1, 93);
}

/* dense layers of more than 1024 weights take their dW as dot products of the transposed input
 * (the AVX-512 set: 16 x 16 register transposes, then 6 rows x 64 columns a block where there
 * are 64 columns, the rest 16 at a time): widths that leave partial blocks of rows, of 64 and of
 * 16 columns, each ISA path against the scalar reference */
static void test_isa_dense_dot_blocks(void **state) {
  (void)state;
  const sc_loss losses[2] = {SC_LOSS_SQUARED, SC_LOSS_LOGIT_CROSSENTROPY};
  net a = mk_net(1, 2, 35); /* 70 inputs */
  add(&a, sc_flatten());
  add(&a, sc_dense(20, SC_RELU));    /* 70 -> 20: 64 + 6 columns, 6 + 6 + 6 + 2 rows */
  add(&a, sc_dense(77, SC_TANH));    /* 20 -> 77: no 64-column block */
  add(&a, sc_dense(9, SC_IDENTITY)); /* 77 -> 9 */
  isa_compare_net("dense dot blocks 70-20-77-9", &a, losses, 2, 94);
  net b = mk_net(2, 5, 13); /* 130 inputs */
  add(&b, sc_flatten());
  add(&b, sc_dense(13, SC_SIGMOID));  /* 130 -> 13: 128 + 2 columns */
  add(&b, sc_dense(96, SC_RELU));     /* 13 -> 96 */
  add(&b, sc_dense(12, SC_IDENTITY)); /* 96 -> 12: 64 + 32 columns, 6 + 6 rows */
  isa_compare_net("dense dot blocks 130-13-96-12", &b, losses, 2, 95);
}

/* ================================================================ 4. dropout */
/* valgrad of the same chain with and without dropout(0) layers: identical */
static void test_dropout_rate0_identity(void **state) {
  (void)state;
  net a = mk_net(2, 6, 6), b = mk_net(2, 6, 6);
  add(&a, sc_conv2d(3, 3, 4, SC_TANH));
  add(&a, sc_flatten());
  add(&a, sc_dense(5, SC_GELU));
  add(&a, sc_dense(3, SC_IDENTITY));
  add(&b, sc_dropout(0));
  add(&b, sc_conv2d(3, 3, 4, SC_TANH));
  add(&b, sc_dropout(0));
  add(&b, sc_flatten());
  add(&b, sc_dense(5, SC_GELU));
  add(&b, sc_dropout(0.0));
  add(&b, sc_dense(3, SC_IDENTITY));
  const size_t B = 40;
  sc_chain *ca = mk_chain(NULL, &a), *cb = mk_chain(NULL, &b);
  size_t np = net_np(&a), nx = B * net_in(&a);
  assert_int_equal(np, net_np(&b));
  double *p = malloc(np * sizeof *p), *x = malloc(nx * sizeof *x);
  double *ga = malloc(np * sizeof *ga), *gb = malloc(np * sizeof *gb);
  double *gxa = malloc(nx * sizeof *gxa), *gxb = malloc(nx * sizeof *gxb);
  assert_true(p && x && ga && gb && gxa && gxb);
  mk_params(ca, &a, p, 5);
  tu_fill_f64(x, nx, 6, 1.0);
  int32_t lab[40];
  for (size_t i = 0; i < B; i++) lab[i] = (int32_t)(i % 3);
  sc_workspace *wa = NULL, *wb = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&wa, ca, B));
  SC_OK_OR_FAIL(sc_workspace_create(&wb, cb, B));
  SC_OK_OR_FAIL(sc_workspace_set_dropout(wb, 99, 3));
  double la = 0, lb = 0;
  SC_OK_OR_FAIL(sc_valgrad_f64(ca, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &la, ga, gxa, wa));
  SC_OK_OR_FAIL(sc_valgrad_f64(cb, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &lb, gb, gxb, wb));
  assert_true(fabs(la - lb) <= 1e-13 * fabs(la));
  for (size_t k = 0; k < np; k++)
    if (!(fabs(ga[k] - gb[k]) <= 1e-13 * fmax(1e-3, fabs(ga[k]))))
      fail_msg("rate 0: g[%zu] = %.17g with dropout(0), %.17g without", k, gb[k], ga[k]);
  for (size_t k = 0; k < nx; k++)
    if (!(fabs(gxa[k] - gxb[k]) <= 1e-13 * fmax(1e-3, fabs(gxa[k]))))
      fail_msg("rate 0: gx[%zu] = %.17g with dropout(0), %.17g without", k, gxb[k], gxa[k]);
  sc_workspace_destroy(wa), sc_workspace_destroy(wb);
  sc_chain_destroy(ca), sc_chain_destroy(cb);
  free(p), free(x), free(ga), free(gb), free(gxa), free(gxb);
  unsetenv("SC_ISA");
}

/* outside sc_valgrad dropout(0.5) is the identity: sc_forward (both precisions),
 * sc_loss_value, sc_pullback and sc_evaluate equal the chain without dropout */
static void test_dropout_identity_outside_training(void **state) {
  (void)state;
  net a = lenet_like(), b = mk_net(1, 12, 12);
  add(&b, sc_conv2d(3, 3, 4, SC_RELU));
  add(&b, sc_dropout(0.5));
  add(&b, sc_maxpool2d(2, 2));
  add(&b, sc_conv2d(3, 3, 6, SC_TANH));
  add(&b, sc_flatten());
  add(&b, sc_dropout(0.5));
  add(&b, sc_dense(10, SC_IDENTITY));
  const size_t B = 33;
  sc_chain *ca = mk_chain(NULL, &a), *cb = mk_chain(NULL, &b);
  size_t np = net_np(&a), nx = B * 144, ny = B * 10;
  double *p = malloc(np * sizeof *p), *x = malloc(nx * sizeof *x), *ya = malloc(ny * sizeof *ya);
  double *yb = malloc(ny * sizeof *yb), *dy = malloc(ny * sizeof *dy);
  double *ga = calloc(np, sizeof *ga), *gb = calloc(np, sizeof *gb);
  double *gxa = malloc(nx * sizeof *gxa), *gxb = malloc(nx * sizeof *gxb);
  float *pf = malloc(np * sizeof *pf), *xf = malloc(nx * sizeof *xf);
  float *yfa = malloc(ny * sizeof *yfa), *yfb = malloc(ny * sizeof *yfb);
  assert_true(p && x && ya && yb && dy && ga && gb && gxa && gxb && pf && xf && yfa && yfb);
  mk_params(ca, &a, p, 8);
  tu_fill_f64(x, nx, 9, 1.0);
  tu_fill_f64(dy, ny, 10, 1.0);
  for (size_t k = 0; k < np; k++) pf[k] = (float)p[k];
  for (size_t k = 0; k < nx; k++) xf[k] = (float)x[k];
  int32_t lab[33];
  for (size_t i = 0; i < B; i++) lab[i] = (int32_t)(i % 10);
  sc_workspace *wa = NULL, *wb = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&wa, ca, B));
  SC_OK_OR_FAIL(sc_workspace_create(&wb, cb, B));
  SC_OK_OR_FAIL(sc_forward_f64(ca, p, x, B, ya, wa));
  SC_OK_OR_FAIL(sc_forward_f64(cb, p, x, B, yb, wb));
  assert_memory_equal(ya, yb, ny * sizeof *ya);
  SC_OK_OR_FAIL(sc_forward(ca, pf, xf, B, yfa, wa));
  SC_OK_OR_FAIL(sc_forward(cb, pf, xf, B, yfb, wb));
  assert_memory_equal(yfa, yfb, ny * sizeof *yfa);
  float la = 0, lb = 0;
  SC_OK_OR_FAIL(sc_loss_value(ca, SC_LOSS_LOGIT_CROSSENTROPY, pf, xf, lab, B, &la, wa));
  SC_OK_OR_FAIL(sc_loss_value(cb, SC_LOSS_LOGIT_CROSSENTROPY, pf, xf, lab, B, &lb, wb));
  assert_true(la == lb);
  SC_OK_OR_FAIL(sc_pullback_f64(ca, p, x, dy, B, ga, gxa, wa));
  SC_OK_OR_FAIL(sc_pullback_f64(cb, p, x, dy, B, gb, gxb, wb));
  for (size_t k = 0; k < np; k++)
    assert_true(fabs(ga[k] - gb[k]) <= 1e-13 * fmax(1e-3, fabs(ga[k])));
  for (size_t k = 0; k < nx; k++)
    assert_true(fabs(gxa[k] - gxb[k]) <= 1e-13 * fmax(1e-3, fabs(gxa[k])));
  double ea[2], eb[2];
  SC_OK_OR_FAIL(sc_evaluate(ca, pf, xf, lab, B, &ea[0], &ea[1], wa));
  SC_OK_OR_FAIL(sc_evaluate(cb, pf, xf, lab, B, &eb[0], &eb[1], wb));
  assert_true(ea[0] == eb[0] && ea[1] == eb[1]);
  /* and sc_valgrad with rate 0.5 does differ */
  double lv = 0, lw = 0;
  SC_OK_OR_FAIL(sc_valgrad_f64(ca, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &lv, NULL, NULL, wa));
  SC_OK_OR_FAIL(sc_valgrad_f64(cb, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &lw, NULL, NULL, wb));
  assert_true(fabs(lv - lw) > 1e-6);
  sc_workspace_destroy(wa), sc_workspace_destroy(wb);
  sc_chain_destroy(ca), sc_chain_destroy(cb);
  free(p), free(x), free(ya), free(yb), free(dy), free(ga), free(gb), free(gxa), free(gxb);
  free(pf), free(xf), free(yfa), free(yfb);
}

/* The chain C x H x W -> dropout(rate) under the squared loss with targets t:
 *   L = (1/B) sum (m s x - t)^2,  dL/dx = 2 (m s x - t) m s / B,  s = 1/(1 - rate),
 * so gx is exactly 0 where an element was dropped (m = 0) and 2 (s x - t) s / B where it
 * was kept. |x| >= 0.2 > |t| / 2 keeps the kept values non-zero. Returns the mask. */
#define DM_C 4
#define DM_H 8
#define DM_W 8
#define DM_F (DM_C * DM_H * DM_W)
#define DM_B 40

static void dm_data(double *x, double *t, size_t n) {
  uint64_t s = 4242;
  for (size_t k = 0; k < n; k++) {
    double u = tu_unif(&s);
    x[k] = (u < 0 ? -1 : 1) * (0.2 + 0.8 * fabs(u));
    t[k] = 0.3 * tu_unif(&s);
  }
}

static void dm_check(const char *ctx, double rate, const double *x, const double *t, size_t B,
                     double lv, const double *gx, unsigned char *mask) {
  double s = 1.0 / (1.0 - rate), L = 0;
  for (size_t k = 0; k < B * DM_F; k++) {
    double kept = 2 * (s * x[k] - t[k]) * s / (double)B;
    if (gx[k] == 0) {
      mask[k] = 0;
      L += t[k] * t[k];
    } else {
      mask[k] = 1;
      L += (s * x[k] - t[k]) * (s * x[k] - t[k]);
      if (!(fabs(gx[k] - kept) <= 1e-12 * fabs(kept)))
        fail_msg("%s: gx[%zu] = %.17g: neither 0 (dropped) nor %.17g (kept, scaled by %g)", ctx, k,
                 gx[k], kept, s);
    }
  }
  L /= (double)B;
  if (!(fabs(lv - L) <= 1e-12 * L))
    fail_msg("%s: loss %.17g, expected %.17g from the mask read off gx", ctx, lv, L);
}

static sc_chain *dm_chain(double rate) {
  unsetenv("SC_ISA");
  sc_layer l = sc_dropout(rate);
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, DM_C, DM_H, DM_W, &l, 1));
  size_t np = 1;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  assert_int_equal(np, 0);
  return c;
}

static size_t count_kept(const unsigned char *m, size_t from, size_t to) {
  size_t n = 0;
  for (size_t k = from; k < to; k++) n += m[k];
  return n;
}

static void test_dropout_mask(void **state) {
  (void)state;
  const size_t B = DM_B, N = DM_B * DM_F;
  double *x = malloc(N * sizeof *x), *t = malloc(N * sizeof *t), *gx = malloc(N * sizeof *gx);
  double *gx2 = malloc(N * sizeof *gx2);
  float *xf = malloc(N * sizeof *xf), *tf = malloc(N * sizeof *tf), *gxf = malloc(N * sizeof *gxf);
  unsigned char *m1 = malloc(N), *m2 = malloc(N), *m3 = malloc(N), *m4 = malloc(N);
  assert_true(x && t && gx && gx2 && xf && tf && gxf && m1 && m2 && m3 && m4);
  dm_data(x, t, N);
  for (size_t k = 0; k < N; k++) xf[k] = (float)x[k], tf[k] = (float)t[k];
  double p0 = 0; /* no parameters; any non-NULL pointer */

  sc_chain *c = dm_chain(0.5);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  double lv = 0;

  /* rate 0.5: about half dropped, the rest scaled by 2 */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  dm_check("rate 0.5 seed 1234 step 7", 0.5, x, t, B, lv, gx, m1);
  double frac = (double)count_kept(m1, 0, N) / (double)N;
  double frac2 = (double)count_kept(m1, 32 * DM_F, N) / (double)(N - 32 * DM_F);
  print_message("  dropout 0.5: kept %.4f of %zu elements (%.4f of the samples 32..39)\n", frac, N,
                frac2);
  assert_true(frac >= 0.45 && frac <= 0.55);
  assert_true(frac2 >= 0.45 && frac2 <= 0.55);
  /* the mask varies along samples and along elements */
  size_t const_cols = 0, same_rows = 0;
  for (size_t f = 0; f < DM_F; f++) {
    size_t kept = 0;
    for (size_t b = 0; b < 32; b++) kept += m1[b * DM_F + f];
    const_cols += kept == 0 || kept == 32;
  }
  for (size_t b = 1; b < B; b++) same_rows += memcmp(m1, m1 + b * DM_F, DM_F) == 0;
  assert_int_equal(const_cols, 0);
  assert_int_equal(same_rows, 0);

  /* the same (seed, step): the same mask, bitwise the same gx */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx2, ws));
  assert_memory_equal(gx, gx2, N * sizeof *gx);
  /* ... after calls that are not sc_valgrad, which do not advance the step */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  SC_OK_OR_FAIL(sc_forward_f64(c, &p0, x, B, gx2, ws));
  assert_memory_equal(gx2, x, N * sizeof *x); /* identity in sc_forward */
  SC_OK_OR_FAIL(sc_pullback_f64(c, &p0, x, t, B, NULL, gx2, ws));
  assert_memory_equal(gx2, t, N * sizeof *t); /* identity in sc_pullback */
  float lf = 0;
  SC_OK_OR_FAIL(
      sc_loss_value(c, SC_LOSS_SQUARED, (const float *)(const void *)&p0, xf, tf, B, &lf, ws));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx2, ws));
  assert_memory_equal(gx, gx2, N * sizeof *gx);

  /* every sc_valgrad advances the step: the next call uses (1234, 8) */
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx2, ws));
  dm_check("rate 0.5 step 8 (advanced)", 0.5, x, t, B, lv, gx2, m2);
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 8));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  dm_check("rate 0.5 step 8 (set)", 0.5, x, t, B, lv, gx, m3);
  assert_memory_equal(m2, m3, N);
  size_t diff = 0;
  for (size_t k = 0; k < N; k++) diff += m1[k] != m2[k];
  assert_true(diff > N / 3 && diff < 2 * N / 3); /* independent masks: ~half differ */
  /* another seed, same step: another mask */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1235, 7));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  dm_check("rate 0.5 seed 1235", 0.5, x, t, B, lv, gx, m3);
  diff = 0;
  for (size_t k = 0; k < N; k++) diff += m1[k] != m3[k];
  assert_true(diff > N / 3 && diff < 2 * N / 3);

  /* float: the same mask as double (it depends on seed, step, sample, element only) */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  float lvf = 0;
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, (const float *)(const void *)&p0, xf, tf, B, &lvf,
                           NULL, gxf, ws));
  for (size_t k = 0; k < N; k++) {
    if ((gxf[k] != 0) != m1[k]) fail_msg("float mask differs from double mask at element %zu", k);
    if (m1[k]) {
      double kept = 2 * (2 * (double)xf[k] - tf[k]) * 2 / (double)B;
      assert_true(fabs(gxf[k] - kept) <= 1e-6 * fabs(kept));
    }
  }

  /* the mask of sample b does not depend on the batch size */
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, 5, &lv, NULL, gx, ws));
  dm_check("rate 0.5 batch 5", 0.5, x, t, 5, lv, gx, m4);
  assert_memory_equal(m4, m1, 5 * DM_F);

  /* 1 and 2 threads: bitwise the same */
  sc_workspace *w2 = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&w2, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_threads(w2, 2));
  SC_OK_OR_FAIL(sc_workspace_set_dropout(w2, 1234, 7));
  double lv2 = 0;
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv2, NULL, gx2, w2));
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 1234, 7));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  assert_memory_equal(gx, gx2, N * sizeof *gx);
  assert_true(lv == lv2);
  sc_workspace_destroy(w2);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);

  /* rate 0.3: ~70 % kept, scaled by 1/0.7 */
  c = dm_chain(0.3);
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 77, 0));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  dm_check("rate 0.3", 0.3, x, t, B, lv, gx, m1);
  frac = (double)count_kept(m1, 0, N) / (double)N;
  assert_true(frac >= 0.65 && frac <= 0.75);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);

  /* rate 0: nothing dropped, nothing scaled */
  c = dm_chain(0);
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, &p0, x, t, B, &lv, NULL, gx, ws));
  dm_check("rate 0", 0, x, t, B, lv, gx, m1);
  assert_int_equal(count_kept(m1, 0, N), N);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);

  free(x), free(t), free(gx), free(gx2), free(xf), free(tf), free(gxf);
  free(m1), free(m2), free(m3), free(m4);
}

/* A convnet with dropout: sc_valgrad with 1 and 2 threads, over a batch of several
 * slices, gives bitwise identical loss, g, gx for the same (seed, step). */
static void test_dropout_threads(void **state) {
  (void)state;
  net n = mk_net(1, 12, 12);
  add(&n, sc_conv2d(3, 3, 4, SC_RELU));
  add(&n, sc_maxpool2d(2, 2));
  add(&n, sc_dropout(0.5));
  add(&n, sc_conv2d(3, 3, 6, SC_TANH));
  add(&n, sc_flatten());
  add(&n, sc_dropout(0.25));
  add(&n, sc_dense(10, SC_IDENTITY));
  const size_t B = 100;
  sc_chain *c = mk_chain(NULL, &n);
  size_t np = net_np(&n), nx = B * 144;
  float *p = malloc(np * sizeof *p), *x = malloc(nx * sizeof *x);
  float *g1 = malloc(np * sizeof *g1), *g2 = malloc(np * sizeof *g2);
  float *gx1 = malloc(nx * sizeof *gx1), *gx2 = malloc(nx * sizeof *gx2);
  assert_true(p && x && g1 && g2 && gx1 && gx2);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
  tu_fill_f32(x, nx, 4, 1.0);
  int32_t lab[100];
  for (size_t i = 0; i < B; i++) lab[i] = (int32_t)(i * 3 % 10);
  sc_workspace *w1 = NULL, *w2 = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&w1, c, B));
  SC_OK_OR_FAIL(sc_workspace_create(&w2, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_threads(w2, 2));
  for (uint64_t step = 0; step < 3; step++) {
    float l1 = 0, l2 = 0;
    SC_OK_OR_FAIL(sc_workspace_set_dropout(w1, 5, step));
    SC_OK_OR_FAIL(sc_workspace_set_dropout(w2, 5, step));
    SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &l1, g1, gx1, w1));
    SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &l2, g2, gx2, w2));
    assert_memory_equal(&l1, &l2, sizeof l1);
    assert_memory_equal(g1, g2, np * sizeof *g1);
    assert_memory_equal(gx1, gx2, nx * sizeof *gx1);
  }
  sc_workspace_destroy(w1), sc_workspace_destroy(w2);
  sc_chain_destroy(c);
  free(p), free(x), free(g1), free(g2), free(gx1), free(gx2);
}

static void test_dropout_bad_rate(void **state) {
  (void)state;
  unsetenv("SC_ISA");
  const double bad[4] = {1.0, -0.1, 1.5, NAN};
  for (int i = 0; i < 4; i++) {
    sc_layer L[2] = {sc_dense(4, SC_TANH), sc_dropout(bad[i])};
    sc_chain *c = NULL;
    SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, L, 2));
    sc_layer M[3] = {sc_conv2d(3, 3, 2, SC_RELU), sc_dropout(bad[i]), sc_flatten()};
    SC_EXPECT(SC_ERR_ARG, sc_chain_create_image(&c, 1, 5, 5, M, 3));
    assert_non_null(strstr(sc_last_error(), "dropout"));
  }
  sc_layer ok[1] = {sc_dropout(0.999)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, 3, 3, ok, 1));
  sc_chain_destroy(c);
}

/* ================================================================ 5. shapes */
static void expect_shape_error(size_t C, size_t H, size_t W, const sc_layer *L, size_t nl,
                               sc_status want, const char *needle) {
  sc_chain *c = NULL;
  SC_EXPECT(want, sc_chain_create_image(&c, C, H, W, L, nl));
  if (needle && !strstr(sc_last_error(), needle))
    fail_msg("error message \"%s\" does not mention \"%s\"", sc_last_error(), needle);
}

static void test_shape_errors(void **state) {
  (void)state;
  unsetenv("SC_ISA");
  /* dense after an image without flatten */
  sc_layer a[2] = {sc_conv2d(3, 3, 4, SC_RELU), sc_dense(10, SC_IDENTITY)};
  expect_shape_error(1, 8, 8, a, 2, SC_ERR_SHAPE, "flatten");
  sc_layer a2[3] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_dense(10, SC_IDENTITY)};
  expect_shape_error(1, 8, 8, a2, 3, SC_ERR_SHAPE, "flatten");
  expect_shape_error(3, 4, 4, a2 + 2, 1, SC_ERR_SHAPE, "flatten"); /* dense on an image input */
  /* kernel larger than the input (with or without padding) */
  sc_layer b[1] = {sc_conv2d(5, 5, 2, SC_TANH)};
  expect_shape_error(1, 4, 6, b, 1, SC_ERR_SHAPE, NULL);
  sc_layer b2[1] = {sc_conv2d(3, 7, 2, SC_TANH)};
  expect_shape_error(1, 4, 6, b2, 1, SC_ERR_SHAPE, NULL);
  sc_layer b3[1] = {sc_conv2d_ex(5, 5, 2, SC_TANH, 1, 1, 0, 1)};
  expect_shape_error(1, 4, 6, b3, 1, SC_ERR_SHAPE, NULL);
  sc_layer b4[2] = {sc_conv2d(3, 3, 2, SC_TANH), sc_conv2d(3, 3, 2, SC_TANH)};
  expect_shape_error(1, 4, 6, b4, 2, SC_ERR_SHAPE, NULL); /* second conv sees 2x4 */
  /* ... but padding can make it fit: 1x4x6 -> 5x5 pad 1 -> 2x2x4 */
  {
    net n = mk_net(1, 4, 6);
    add(&n, sc_conv2d_ex(5, 5, 2, SC_TANH, 1, 1, 1, 1));
    sc_chain *c = mk_chain(NULL, &n);
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, 0, &li));
    assert_int_equal(li.out_shape[0], 2);
    assert_int_equal(li.out_shape[1], 2);
    assert_int_equal(li.out_shape[2], 4);
    sc_chain_destroy(c);
  }
  /* padding >= kernel */
  sc_layer p1[1] = {sc_conv2d_ex(3, 3, 2, SC_RELU, 1, 1, 3, 1)};
  expect_shape_error(1, 8, 8, p1, 1, SC_ERR_SHAPE, "padding");
  sc_layer p2[1] = {sc_conv2d_ex(3, 2, 2, SC_RELU, 1, 1, 1, 2)};
  expect_shape_error(1, 8, 8, p2, 1, SC_ERR_SHAPE, "padding");
  sc_layer p3[1] = {sc_conv2d_ex(1, 1, 2, SC_RELU, 1, 1, 1, 0)};
  expect_shape_error(1, 8, 8, p3, 1, SC_ERR_SHAPE, "padding");
  /* zero kernel, zero stride, zero channels */
  sc_layer z[6] = {sc_conv2d(0, 3, 2, SC_RELU),
                   sc_conv2d(3, 0, 2, SC_RELU),
                   sc_conv2d_ex(3, 3, 2, SC_RELU, 0, 1, 0, 0),
                   sc_conv2d_ex(3, 3, 2, SC_RELU, 1, 0, 0, 0),
                   sc_conv2d(3, 3, 0, SC_RELU),
                   sc_maxpool2d(0, 2)};
  for (int i = 0; i < 6; i++) expect_shape_error(2, 8, 8, z + i, 1, SC_ERR_SHAPE, NULL);
  sc_layer z2[1] = {sc_maxpool2d(2, 0)};
  expect_shape_error(2, 8, 8, z2, 1, SC_ERR_SHAPE, NULL);
  /* max-pool window larger than its input */
  sc_layer m[1] = {sc_maxpool2d(6, 2)};
  expect_shape_error(2, 5, 5, m, 1, SC_ERR_SHAPE, NULL);
  sc_layer m2[2] = {sc_conv2d(3, 3, 2, SC_RELU), sc_maxpool2d(2, 4)};
  expect_shape_error(1, 5, 5, m2, 2, SC_ERR_SHAPE, NULL); /* conv gives 3x3 */
  /* conv on a plain feature vector (F x 1 x 1): only 1x1 kernels fit */
  {
    sc_chain *c = NULL;
    sc_layer v[1] = {sc_conv2d(3, 3, 2, SC_RELU)};
    SC_EXPECT(SC_ERR_SHAPE, sc_chain_create(&c, 9, v, 1));
    sc_layer w[2] = {sc_conv2d(1, 1, 2, SC_RELU), sc_dense(3, SC_IDENTITY)};
    SC_OK_OR_FAIL(sc_chain_create(&c, 9, w, 2));
    size_t np = 0;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    assert_int_equal(np, 2 * 9 + 2 + 3 * 2 + 3);
    sc_chain_destroy(c);
  }
  /* absurd sizes are refused, not overflowed */
  {
    sc_chain *c = NULL;
    sc_layer h[1] = {sc_conv2d_ex(3, 3, 2, SC_RELU, 1, 1, SIZE_MAX / 2, SIZE_MAX / 2)};
    sc_status st = sc_chain_create_image(&c, 1, 8, 8, h, 1);
    assert_true(st == SC_ERR_SHAPE || st == SC_ERR_OVERFLOW);
    sc_layer h2[1] = {sc_conv2d(SIZE_MAX, SIZE_MAX, 2, SC_RELU)};
    st = sc_chain_create_image(&c, 1, 8, 8, h2, 1);
    assert_true(st == SC_ERR_SHAPE || st == SC_ERR_OVERFLOW);
  }
  /* a conv whose output is K x 1 x 1 may feed dense directly, like flatten -> dense */
  {
    net a1 = mk_net(3, 5, 5), a2 = mk_net(3, 5, 5);
    add(&a1, sc_conv2d(5, 5, 4, SC_TANH));
    add(&a1, sc_dense(2, SC_IDENTITY));
    add(&a2, sc_conv2d(5, 5, 4, SC_TANH));
    add(&a2, sc_flatten());
    add(&a2, sc_dense(2, SC_IDENTITY));
    sc_chain *c1 = mk_chain(NULL, &a1), *c2 = mk_chain(NULL, &a2);
    size_t np = net_np(&a1);
    double *p = malloc(np * sizeof *p), x[3 * 75], y1[6], y2[6];
    assert_non_null(p);
    mk_params(c1, &a1, p, 1);
    tu_fill_f64(x, 3 * 75, 2, 1.0);
    sc_workspace *w1 = NULL, *w2 = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&w1, c1, 3));
    SC_OK_OR_FAIL(sc_workspace_create(&w2, c2, 3));
    SC_OK_OR_FAIL(sc_forward_f64(c1, p, x, 3, y1, w1));
    SC_OK_OR_FAIL(sc_forward_f64(c2, p, x, 3, y2, w2));
    for (int k = 0; k < 6; k++) assert_true(fabs(y1[k] - y2[k]) <= 1e-14);
    sc_workspace_destroy(w1), sc_workspace_destroy(w2);
    sc_chain_destroy(c1), sc_chain_destroy(c2);
    free(p);
  }
}

static void test_lenet5_layer_info(void **state) {
  (void)state;
  unsetenv("SC_ISA");
  net n = lenet5();
  sc_chain *c = mk_chain(NULL, &n); /* also checks every layer against net_shapes */
  static const size_t IN[8][3] = {{1, 28, 28}, {6, 24, 24}, {6, 12, 12}, {16, 8, 8},
                                  {16, 4, 4},  {256, 1, 1}, {120, 1, 1}, {84, 1, 1}};
  static const size_t OUT[8][3] = {{6, 24, 24}, {6, 12, 12}, {16, 8, 8}, {16, 4, 4},
                                   {256, 1, 1}, {120, 1, 1}, {84, 1, 1}, {10, 1, 1}};
  static const size_t NP[8] = {156, 0, 2416, 0, 0, 30840, 10164, 850};
  size_t off = 0;
  for (size_t l = 0; l < 8; l++) {
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
    for (int k = 0; k < 3; k++) {
      assert_int_equal(li.in_shape[k], IN[l][k]);
      assert_int_equal(li.out_shape[k], OUT[l][k]);
    }
    assert_int_equal(li.inputs, IN[l][0] * IN[l][1] * IN[l][2]);
    assert_int_equal(li.outputs, OUT[l][0] * OUT[l][1] * OUT[l][2]);
    assert_int_equal(li.nparams, NP[l]);
    assert_int_equal(li.param_offset, off);
    off += NP[l];
  }
  sc_layer_info li;
  SC_EXPECT(SC_ERR_ARG, sc_chain_layer_info(c, 8, &li));
  size_t np = 0, in = 0, out = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  assert_int_equal(np, 44426);
  assert_int_equal(in, 784);
  assert_int_equal(out, 10);
  size_t need = 0;
  (void)sc_chain_summary(c, NULL, 0, &need); /* sizing call */
  assert_true(need > 1);
  char *buf = malloc(need);
  assert_non_null(buf);
  SC_OK_OR_FAIL(sc_chain_summary(c, buf, need, NULL));
  assert_non_null(strstr(buf, "conv2d"));
  assert_non_null(strstr(buf, "maxpool2d"));
  assert_non_null(strstr(buf, "flatten"));
  assert_non_null(strstr(buf, "44426"));
  free(buf);
  sc_chain_destroy(c);
}

/* ================================================================ 6. sc_evaluate */
static void evaluate_identity(const char *isa) {
  setenv("SC_ISA", isa, 1);
  sc_layer L[1] = {sc_dense_nobias(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, L, 1));
  assert_string_equal(sc_chain_isa(c), isa);
  const float p[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}; /* y = x exactly */
  enum { N = 10 };
  const float x[N * 3] = {1, 2, 3, 3, 2, 1, 1, 1, 0, 1,  1,  0,  0,    2,     2,
                          0, 2, 2, 5, 5, 5, 5, 5, 5, -1, -3, -2, 0.5f, -0.5f, 0.25f};
  const int32_t lab[N] = {2, 0, 0, 1, 1, 2, 0, 1, 0, 1};
  /* correct: 0 (max 3 at 2), 1, 2 (tie 0/1: first = 0), 4 (tie 1/2: first = 1), 6 (all
   * equal: 0), 8; wrong: 3 (tie, first is 0), 5 (tie, first is 1), 7 (all equal, label
   * in the middle), 9. (Taking the last maximum would give 0, 1, 3, 5, 8: 0.5.) */
  const double acc_want = 0.6;
  double loss_want = 0;
  for (int i = 0; i < N; i++) {
    double m = x[i * 3], se = 0;
    for (int o = 1; o < 3; o++) m = fmax(m, x[i * 3 + o]);
    for (int o = 0; o < 3; o++) se += exp(x[i * 3 + o] - m);
    loss_want += m + log(se) - x[i * 3 + lab[i]];
  }
  loss_want /= N;
  static const size_t MB[5] = {1, 3, 4, 10, 16};
  for (int k = 0; k < 5; k++) {
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, MB[k]));
    double loss = NAN, acc = NAN;
    SC_OK_OR_FAIL(sc_evaluate(c, p, x, lab, N, &loss, &acc, ws));
    if (acc != acc_want)
      fail_msg("isa=%s max_batch %zu: accuracy %.17g, expected %g", isa, MB[k], acc, acc_want);
    if (!(fabs(loss - loss_want) <= 1e-6 * loss_want))
      fail_msg("isa=%s max_batch %zu: loss %.17g, expected %.17g", isa, MB[k], loss, loss_want);
    /* either output may be NULL */
    double a2 = NAN, l2 = NAN;
    SC_OK_OR_FAIL(sc_evaluate(c, p, x, lab, N, NULL, &a2, ws));
    SC_OK_OR_FAIL(sc_evaluate(c, p, x, lab, N, &l2, NULL, ws));
    assert_true(a2 == acc && l2 == loss);
    /* a subset: samples 2..7 -> 2, 4 and 6 right */
    SC_OK_OR_FAIL(sc_evaluate(c, p, x + 6, lab + 2, 6, NULL, &a2, ws));
    assert_true(a2 == 0.5);
    sc_workspace_destroy(ws);
  }
  sc_chain_destroy(c);
}

/* 3 -> dense_nobias(3) with W = I: the logits are the inputs, exactly */
static void test_evaluate_identity(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) evaluate_identity(isas[is]);
  unsetenv("SC_ISA");
}

/* On a convnet: sc_evaluate (in pieces of max_batch 7) agrees with sc_loss_value over the
 * whole set and with the argmax of sc_forward. */
static void test_evaluate_convnet(void **state) {
  (void)state;
  unsetenv("SC_ISA");
  net n = lenet_like();
  const size_t N = 33;
  sc_chain *c = mk_chain(NULL, &n);
  fdata D;
  mk_fdata(&n, N, 91, &D);
  sc_workspace *w7 = NULL, *wn = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&w7, c, 7));
  SC_OK_OR_FAIL(sc_workspace_create(&wn, c, N));
  float y[33 * 10], lv = 0;
  SC_OK_OR_FAIL(sc_forward(c, D.p, D.x, N, y, wn));
  /* labels: the argmax for every third sample, so the accuracy is far from 0 */
  for (size_t b = 0; b < N; b += 3) {
    int32_t am = 0;
    for (int32_t o = 1; o < 10; o++)
      if (y[b * 10 + (size_t)o] > y[b * 10 + (size_t)am]) am = o;
    D.lab[b] = am;
  }
  SC_OK_OR_FAIL(sc_loss_value(c, SC_LOSS_LOGIT_CROSSENTROPY, D.p, D.x, D.lab, N, &lv, wn));
  size_t right = 0;
  for (size_t b = 0; b < N; b++) {
    size_t am = 0;
    for (size_t o = 1; o < 10; o++)
      if (y[b * 10 + o] > y[b * 10 + am]) am = o;
    right += (int32_t)am == D.lab[b];
  }
  assert_true(right >= 11);
  double loss = 0, acc = 0;
  SC_OK_OR_FAIL(sc_evaluate(c, D.p, D.x, D.lab, N, &loss, &acc, w7));
  if (acc != (double)right / (double)N)
    fail_msg("accuracy %.17g, argmax of sc_forward gives %zu / %zu", acc, right, N);
  if (!(fabs(loss - lv) <= 1e-5 * fabs(lv)))
    fail_msg("loss %.9g, sc_loss_value %.9g", loss, (double)lv);
  sc_workspace_destroy(w7), sc_workspace_destroy(wn);
  sc_chain_destroy(c);
  fdata_free(&D);
}

/* ================================================================ max-pool ties */
/* "The gradient goes to the first maximal element of each window", on every ISA path */
static void test_maxpool_ties_first(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  /* 1 x 5 x 6 -> maxpool 2x3 -> 1 x 2 x 2; the last row fills no window */
  const double x[30] = {0.5, 0.5, 0.5, 1, 2, 2, /* */
                        0.5, 0.5, 0.5, 2, 1, 2, /* */
                        -1,  -3,  -2,  7, 7, 7, /* */
                        -3,  -1,  -1,  7, 7, 7, /* */
                        9,   9,   9,   9, 9, 9};
  /* windows (row-major inside): {0,1,2,6,7,8} all 0.5 -> first (0); {3,4,5,9,10,11}
   * max 2 at 4, 5, 9 -> 4; {12..14,18..20} max -1 at 12, 19, 20 -> 12; {15..17,21..23}
   * all 7 -> 15 */
  const size_t first[4] = {0, 4, 12, 15};
  const double ymax[4] = {0.5, 2, -1, 7};
  for (int is = 0; is < nisa; is++) {
    net n = mk_net(1, 5, 6);
    add(&n, sc_maxpool2d(2, 3));
    sc_chain *c = mk_chain(isas[is], &n);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
    double y[4], dy[4] = {1, 2, 3, 4}, gx[30];
    float xf[30], yf[4], dyf[4] = {1, 2, 3, 4}, gxf[30];
    for (int k = 0; k < 30; k++) xf[k] = (float)x[k];
    double pd = 0;
    float pf = 0;
    SC_OK_OR_FAIL(sc_forward_f64(c, &pd, x, 1, y, ws));
    SC_OK_OR_FAIL(sc_pullback_f64(c, &pd, x, dy, 1, NULL, gx, ws));
    SC_OK_OR_FAIL(sc_forward(c, &pf, xf, 1, yf, ws));
    SC_OK_OR_FAIL(sc_pullback(c, &pf, xf, dyf, 1, NULL, gxf, ws));
    for (int w = 0; w < 4; w++) {
      assert_true(y[w] == ymax[w]);
      assert_true(yf[w] == (float)ymax[w]);
    }
    for (size_t k = 0; k < 30; k++) {
      double want = 0;
      for (int w = 0; w < 4; w++)
        if (first[w] == k) want = dy[w];
      if (gx[k] != want || gxf[k] != (float)want)
        fail_msg("isa=%s: gx[%zu] = %g (float %g), expected %g (gradient to the first maximum)",
                 isas[is], k, gx[k], (double)gxf[k], want);
    }
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
  }
  unsetenv("SC_ISA");
}

/* ================================================================ the fused pool pullback */
/* On the vector float paths a 2 x 2 max-pool's pullback over a relu or identity conv is one pass
 * with the conv's activation pullback and bias lanes (vec_pool2_act_bwd_f32; SC_POOL_FUSE=0 runs
 * the pool's and the conv's own passes). It must give the same bits: loss, g and gx of
 * sc_valgrad, g and gx of sc_pullback, on 1 and 2 threads, batches of 1, 33 and 70 (a partial
 * tile), for chains that fuse at one or two levels (a conv with a dx below a pool), relu and
 * identity, with and without bias, a conv output of odd size (no fusion there) and inputs
 * quantized so that windows tie and relu outputs are 0. */
static void test_pool_fuse_bits(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  enum { NCH = 6, MAXB = 70 };
  net nets[NCH];
  nets[0] = mk_net(1, 12, 12); /* conv1 relu -> pool -> dense (LeNet5's first layers) */
  add(&nets[0], sc_conv2d(3, 3, 5, SC_RELU));
  add(&nets[0], sc_maxpool2d(2, 2));
  add(&nets[0], sc_flatten());
  add(&nets[0], sc_dense(3, SC_IDENTITY));
  nets[1] = mk_net(2, 14, 10); /* identity conv without bias pooled, then a relu conv pooled */
  add(&nets[1], nobias(sc_conv2d_ex(3, 3, 4, SC_IDENTITY, 1, 1, 1, 1)));
  add(&nets[1], sc_maxpool2d(2, 2));
  add(&nets[1], sc_conv2d(2, 2, 6, SC_RELU));
  add(&nets[1], sc_maxpool2d(2, 2));
  add(&nets[1], sc_flatten());
  add(&nets[1], sc_dense(2, SC_IDENTITY));
  nets[2] = mk_net(1, 11, 9); /* a 9 x 7 conv output: the pool's windows do not tile it */
  add(&nets[2], sc_conv2d(3, 3, 3, SC_RELU));
  add(&nets[2], sc_maxpool2d(2, 2));
  add(&nets[2], sc_flatten());
  add(&nets[2], sc_dense(2, SC_IDENTITY));
  nets[3] = mk_net(3, 8, 8); /* a tanh conv pooled: not fused */
  add(&nets[3], sc_conv2d(3, 3, 2, SC_TANH));
  add(&nets[3], sc_maxpool2d(2, 2));
  add(&nets[3], sc_flatten());
  add(&nets[3], sc_dense(2, SC_RELU));
  /* the float forward's fold (vec_conv_pool_fwd_f32): 11 channels (blocks 6, 4, 1 on AVX-512;
   * 2 and 1 on AVX2), strides 2 x 1 with padding (10 x 10 outputs), then 16 channels (4 x 4) */
  nets[4] = mk_net(2, 19, 12);
  add(&nets[4], sc_conv2d_ex(3, 3, 11, SC_RELU, 2, 1, 1, 0));
  add(&nets[4], sc_maxpool2d(2, 2));
  add(&nets[4], sc_conv2d(2, 2, 16, SC_RELU));
  add(&nets[4], sc_maxpool2d(2, 2));
  add(&nets[4], sc_flatten());
  add(&nets[4], sc_dense(3, SC_IDENTITY));
  nets[5] = mk_net(1, 16, 16); /* identity conv with bias, 7 channels, stride 2 (8 x 8) */
  add(&nets[5], sc_conv2d_ex(4, 4, 7, SC_IDENTITY, 2, 2, 1, 1));
  add(&nets[5], sc_maxpool2d(2, 2));
  add(&nets[5], sc_flatten());
  add(&nets[5], sc_dense(2, SC_TANH));
  static const size_t B[3] = {1, 33, MAXB};
  int compared = 0;
  /* each ISA path with the rule's conv forwards (the float fold), then with libxsmm's
   * (SC_CONV_FWD=xsmm, where the build and CPU have it: no fold, the fused pullback's dx
   * written over the conv's output) */
  int xsmm_runs = 0;
  for (int vi = 0; vi < 2 * nisa; vi++) {
    int is = vi / 2, xs = vi % 2;
    if (xs) {
      sc_chain *probe = NULL;
      sc_layer pl[] = {sc_conv2d(3, 3, 2, SC_RELU)};
      setenv("SC_ISA", isas[is], 1);
      setenv("SC_CONV_FWD", "xsmm", 1);
      sc_status pst = sc_chain_create_image(&probe, 1, 6, 6, pl, 1);
      unsetenv("SC_CONV_FWD");
      sc_chain_destroy(probe);
      if (pst == SC_ERR_UNSUPPORTED) continue;
      SC_OK_OR_FAIL(pst);
      xsmm_runs++;
    }
    for (int ni = 0; ni < NCH; ni++) {
      const net *n = &nets[ni];
      size_t in = n->c * n->h * n->w;
      sc_chain *cf = NULL, *cu = NULL;
      if (xs) setenv("SC_CONV_FWD", "xsmm", 1);
      setenv("SC_POOL_FUSE", "1", 1);
      cf = mk_chain(isas[is], n);
      setenv("SC_POOL_FUSE", "0", 1);
      cu = mk_chain(isas[is], n);
      unsetenv("SC_POOL_FUSE");
      unsetenv("SC_CONV_FWD");
      size_t np = 0, no = 0;
      SC_OK_OR_FAIL(sc_chain_nparams(cf, &np));
      SC_OK_OR_FAIL(sc_chain_output_size(cf, &no));
      float *p = malloc(np * sizeof *p), *x = malloc(MAXB * in * sizeof *x);
      float *t = malloc(MAXB * no * sizeof *t), *g[2], *gx[2], lv[2];
      assert_true(p && x && t);
      for (int k = 0; k < 2; k++) {
        g[k] = malloc(np * sizeof *g[k]), gx[k] = malloc(MAXB * in * sizeof *gx[k]);
        assert_true(g[k] && gx[k]);
      }
      SC_OK_OR_FAIL(sc_params_init(cf, p, np, 11 + (uint64_t)ni));
      /* quarters in [-1, 1), constant over 4 x 4 blocks of each channel: a conv's outputs in
       * such a block are equal (ties in the pool's windows), many relu outputs 0 */
      for (size_t k = 0; k < MAXB * in; k++) {
        size_t b = k / in, ch = k % in / (n->h * n->w), i = k % (n->h * n->w) / n->w, j = k % n->w;
        uint64_t r =
            ((((b * 7 + ch) * 131 + i / 4) * 137 + j / 4) + (uint64_t)ni) * 6364136223846793005ull;
        x[k] = 0.25f * (float)(int)((r >> 33) % 8) - 1.0f;
      }
      for (size_t k = 0; k < MAXB * no; k++) t[k] = 0.1f * (float)(k % 7) - 0.3f;
      for (int th = 1; th <= 2; th++)
        for (int bi = 0; bi < 3; bi++)
          for (int mode = 0; mode < 4; mode++) { /* valgrad, without g, pullback, forward */
            for (int k = 0; k < 2; k++) {
              sc_chain *c = k ? cu : cf;
              sc_workspace *ws = NULL;
              SC_OK_OR_FAIL(sc_workspace_create(&ws, c, MAXB));
              SC_OK_OR_FAIL(sc_workspace_set_threads(ws, th));
              if (mode < 3) memset(g[k], 0, np * sizeof *g[k]); /* (kept for the check below) */
              lv[k] = 0;
              if (mode == 0)
                SC_OK_OR_FAIL(
                    sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B[bi], &lv[k], g[k], gx[k], ws));
              else if (mode == 1)
                SC_OK_OR_FAIL(
                    sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B[bi], &lv[k], NULL, gx[k], ws));
              else if (mode == 2)
                SC_OK_OR_FAIL(sc_pullback(c, p, x, t, B[bi], g[k], gx[k], ws));
              else { /* the outputs, in gx (batch x no <= MAXB x in floats) */
                assert_true(no <= in);
                memset(gx[k], 0, MAXB * in * sizeof *gx[k]);
                SC_OK_OR_FAIL(sc_forward(c, p, x, B[bi], gx[k], ws));
              }
              sc_workspace_destroy(ws);
            }
            if (memcmp(&lv[0], &lv[1], sizeof lv[0]) || memcmp(g[0], g[1], np * sizeof *g[0]) ||
                memcmp(gx[0], gx[1], B[bi] * in * sizeof *gx[0]))
              fail_msg("isa=%s%s chain %d, %d thread(s), batch %zu, %s: the fused pool pullback "
                       "differs from the unfused passes",
                       isas[is], xs ? " SC_CONV_FWD=xsmm" : "", ni, th, B[bi],
                       mode == 0   ? "valgrad"
                       : mode == 1 ? "valgrad without g"
                       : mode == 2 ? "pullback"
                                   : "forward");
            compared++;
          }
      size_t nz = 0;
      for (size_t k = 0; k < np; k++) nz += g[0][k] != 0;
      assert_true(nz > np / 4); /* the gradients are not trivially equal */
      for (int k = 0; k < 2; k++) free(g[k]), free(gx[k]);
      free(p), free(x), free(t);
      sc_chain_destroy(cf), sc_chain_destroy(cu);
    }
  }
  unsetenv("SC_ISA");
  print_message("  %d comparisons (%d ISA paths, %d of them also with SC_CONV_FWD=xsmm, x %d "
                "chains x threads, batches, calls): the same bits with and without SC_POOL_FUSE\n",
                compared, nisa, xsmm_runs, NCH);
  /* a bad value is SC_ERR_ARG at chain creation */
  setenv("SC_POOL_FUSE", "yes", 1);
  sc_chain *bad = NULL;
  sc_layer l = sc_dense(1, SC_IDENTITY);
  assert_int_equal(sc_chain_create(&bad, 1, &l, 1), SC_ERR_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_POOL_FUSE"));
  assert_null(bad);
  unsetenv("SC_POOL_FUSE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_reference),
      cmocka_unit_test(test_fd_conv),
      cmocka_unit_test(test_fd_maxpool),
      cmocka_unit_test(test_fd_dropout),
      cmocka_unit_test(test_fd_lenet_like),
      cmocka_unit_test(test_isa_lenet_like),
      cmocka_unit_test(test_isa_lenet5),
      cmocka_unit_test(test_isa_conv_dx_blocks),
      cmocka_unit_test(test_isa_dense_dot_blocks),
      cmocka_unit_test(test_dropout_rate0_identity),
      cmocka_unit_test(test_dropout_identity_outside_training),
      cmocka_unit_test(test_dropout_mask),
      cmocka_unit_test(test_dropout_threads),
      cmocka_unit_test(test_dropout_bad_rate),
      cmocka_unit_test(test_shape_errors),
      cmocka_unit_test(test_lenet5_layer_info),
      cmocka_unit_test(test_evaluate_identity),
      cmocka_unit_test(test_evaluate_convnet),
      cmocka_unit_test(test_maxpool_ties_first),
      cmocka_unit_test(test_pool_fuse_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
