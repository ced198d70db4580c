/* tests/test_onestate.c — the single-state path: sc_apply / sc_vjp / sc_jvp (float and
 * double), for every layer type and for mixed chains.
 *
 * Cases (layer_cases below): dense with and without bias and every activation (5 -> 17
 * act -> 3 act, and single layers 9 -> 4 act; widths off the vector lengths; a wide
 * 70 -> 130 softplus -> 33 gelu; a narrow 1 -> 7 -> 3 -> 4 -> 2 -> 13 -> 1 with layers of
 * 1, 2, 3 and 4 inputs, which the vector one-state kernels of the x86 sets treat apart); conv2d
 * valid, with strides, with paddings, mixed (sh != sw, ph != pw), 1x1 and 5x5, without bias, every
 * activation; maxpool2d (2x2 and 3x2 windows, with trailing rows / columns that fill no window);
 * flatten; dropout (on features and on an image: the identity in this path); combinations of them
 * (chains that start with dropout or flatten, end in flatten, maxpool or dropout, widths of 1); and
 * the two mixed chains neural ODE  2 -> dense 50 tanh -> dense 2 convnet     1x8x8 -> conv 3x3x4
 * pad 1 tanh -> maxpool 2 -> conv 3x3x3 relu stride 2
 *                 -> flatten -> dense 3
 * (and a variant of the convnet whose second conv has padding 1 and gives 3x2x2), each
 * with two draws of parameters and states.
 *
 * 1. Double precision, on every ISA path (the double kernels are compiled per ISA too):
 *    - sc_apply_f64 equals sc_forward_f64 at batch 1;
 *    - sc_jvp_f64: jw (pre-filled with garbage: it is overwritten) against the central
 *      difference (f(u + h w) - f(u - h w)) / 2h computed with sc_apply_f64; y = f(u);
 *      y = NULL allowed; a second call gives the same jw (overwrite, not accumulate);
 *    - sc_vjp_f64: du and dp against central differences of F(u; p) = <v, f(u; p)> along
 *      every u_k and every p_k (above MAX_FD = 400 components: a stride plus the last
 *      40); du and dp start pre-filled with random values and the increments are checked
 *      (they accumulate); a second call adds the same amount again; du alone (dp = NULL)
 *      and dp alone (du = NULL) give the same numbers; y = f(u); y alone and nothing at
 *      all requested are fine;
 *    - consistency <v, J w> (from sc_jvp_f64) = <J^T v, w> (from sc_vjp_f64);
 *    - sc_vjp_f64 from zero equals sc_pullback_f64 at batch 1 (dp = g, du = gx).
 *    Tolerances.
 *      "equal" checks (apply vs forward, vjp vs pullback, y outputs, accumulation,
 *      NULL-argument variants, <v,Jw> vs <J^T v,w>):
 *          |a - b| <= EQ_RTOL * max(|a|, |b|, 1),   EQ_RTOL = 1e-12
 *      (values are O(1): inputs in [-1, 1), Glorot weights, biases in [-0.5, 0.5)).
 *      Finite differences, as tests/test_grad.c and tests/test_conv.c: h = FD_H = 1e-5,
 *          |fd - an| / max(|fd|, |an|, FD_FLOOR) <= FD_RTOL = 1e-6,   FD_FLOOR = 1e-2
 *      (an absolute 1e-8 below 1e-2). Error budget: truncation h^2 |F'''| / 6 ~ 1e-11,
 *      rounding ~ eps |F| sqrt(terms) / h ~ 1e-10.
 *      Kinks: u is redrawn until every relu pre-activation has |z| >= KINK_MARGIN = 1e-3
 *      and every max-pool window's largest value beats the runner-up by >= KINK_MARGIN
 *      (computed with prefix chains of the library itself); a step of h = 1e-5 moves them
 *      by ~1e-5, so no difference straddles a kink.
 *      Measured worst (x86 with AVX-512, all three paths): FD relative 1.5e-8, equal
 *      checks 1.4e-15.
 *
 * 2. Float, on every ISA path: apply y, vjp y / du / dp (from zero), jvp y / jw against
 *    the scalar float path, against the scalar double path fed the float-rounded
 *    p, u, v, w, and against the float batch path at batch 1 (sc_forward, sc_pullback):
 *        |a - r| <= ISA_RTOL * max(|r|, ISA_FLOOR * max_k |r_k|),  ISA_RTOL = 1e-4,
 *    ISA_FLOOR = 0.1 (as tests/test_isa.c and tests/test_conv.c; measured worst ~4e-6).
 *    Float accumulation (a second call doubles the increment) at F32_ACC_RTOL = 1e-5
 *    (relative, floor 1). The worst errors are printed on every run.
 *
 * 3. Documented kinks, exactly: relu'(0) = 0 (a relu layer whose pre-activations are all
 *    exactly 0 passes no gradient or tangent) and max-pool ties (gradient and tangent go
 *    to the first maximal element of each window), float and double, every ISA, and the
 *    same as sc_pullback_f64.
 *
 * 4. Workspaces: results are bitwise the same with max_batch 1, 33 and caller memory at
 *    an odd address; one workspace serves the batch path and the single-state path in
 *    any order, float and double (bitwise the same results as fresh workspaces); the
 *    one-state calls do not advance the dropout step (only sc_valgrad does); a workspace
 *    with threads set works.
 *
 * 5. Bad inputs, float and double: NULL for chain, p, u, ws (all three functions), y
 *    (sc_apply), v (sc_vjp), w and jw (sc_jvp) -> SC_ERR_NULL, the message naming the
 *    function and the argument; a workspace of another chain (same layers) -> SC_ERR_ARG;
 *    NaN, +Inf and -Inf at every position of u, v, w (on every ISA: the finite check is
 *    vectorized) -> SC_ERR_NONFINITE, the message naming "state u", "cotangent v" or
 *    "tangent w" and NaN / Inf; failed calls accumulate nothing into du / dp.
 *
 * 6. Threads: two pthreads, each with its own workspace, call sc_vjp_f64 on one shared
 *    chain 10,000 times each, concurrently, on different states (y and du per call
 *    stored, dp accumulated over all calls); the same calls made sequentially afterwards
 *    give bitwise identical results. Neural-ODE net on every ISA, convnet on the default.
 *
 * Allocation counting is covered by tests/test_alloc.c, not here. Run time ~0.5 s (-O3),
 * ~1.5 s under `make test-asan`.
 */
#include "testutil.h"

#include <float.h>
#include <pthread.h>

#define EQ_RTOL 1e-12
#define FD_H 1e-5
#define FD_RTOL 1e-6
#define FD_FLOOR 1e-2
#define KINK_MARGIN 1e-3
#define ISA_RTOL 1e-4
#define ISA_FLOOR 0.1
#define F32_ACC_RTOL 1e-5
#define THREAD_ITERS 10000
#define MAX_FD 400 /* components of u (and of p) checked by finite differences, roughly */

#define NACT 7 /* every activation */
static const sc_act ACTS[NACT] = {SC_IDENTITY, SC_RELU, SC_TANH, SC_SIGMOID,
                                  SC_SOFTPLUS, SC_GELU, SC_SILU};

/* ================================================================ cases */
#define MAXL 8
typedef struct ocase {
  char name[160];
  size_t c, h, w; /* input shape; h == 0: a plain vector of c features */
  size_t nl;
  sc_layer L[MAXL];
} ocase;

static ocase oc_new(const char *name, size_t c, size_t h, size_t w) {
  ocase o;
  memset(&o, 0, sizeof o);
  snprintf(o.name, sizeof o.name, "%s", name);
  o.c = c, o.h = h, o.w = w;
  return o;
}
static void oc_add(ocase *o, sc_layer l) {
  assert_true(o->nl < MAXL);
  o->L[o->nl++] = l;
}
static sc_layer nobias(sc_layer l) {
  l.bias = 0;
  return l;
}

static sc_chain *mk_chain_n(const char *isa, const ocase *o, size_t nl) {
  if (isa) setenv("SC_ISA", isa, 1);
  sc_chain *c = NULL;
  if (o->h)
    SC_OK_OR_FAIL(sc_chain_create_image(&c, o->c, o->h, o->w, o->L, nl));
  else
    SC_OK_OR_FAIL(sc_chain_create(&c, o->c, o->L, nl));
  if (isa) assert_string_equal(sc_chain_isa(c), isa);
  return c;
}
static sc_chain *mk_chain(const char *isa, const ocase *o) { return mk_chain_n(isa, o, o->nl); }

/* The layer-type cases, by group (0: dense, 1: conv2d, 2: the others and combinations),
 * into out (returns the count). */
static size_t layer_cases(int group, ocase *out, size_t cap) {
  size_t n = 0;
  char nm[160];
  if (group == 0) {
    /* dense: 5 -> 17 act -> 3 act, with and without bias, every activation */
    for (int a = 0; a < NACT; a++)
      for (int b = 0; b < 2; b++) {
        snprintf(nm, sizeof nm, "5 -> dense 17 %s -> dense 3 %s%s", sc_act_name(ACTS[a]),
                 sc_act_name(ACTS[a]), b ? "" : " (no bias)");
        ocase o = oc_new(nm, 5, 0, 0);
        oc_add(&o, b ? sc_dense(17, ACTS[a]) : sc_dense_nobias(17, ACTS[a]));
        oc_add(&o, b ? sc_dense(3, ACTS[a]) : sc_dense_nobias(3, ACTS[a]));
        assert_true(n < cap);
        out[n++] = o;
      }
    /* wide: several vector lengths, remainders */
    {
      ocase o = oc_new("70 -> dense 130 softplus -> dense 33 gelu", 70, 0, 0);
      oc_add(&o, sc_dense(130, SC_SOFTPLUS));
      oc_add(&o, sc_dense(33, SC_GELU));
      assert_true(n < cap);
      out[n++] = o;
    }
    /* narrow layers: 1, 2, 3 and 4 inputs, and outputs off the vector length (the vector
     * one-state kernels take 1 and 2 inputs apart and write outputs in blocks of 4) */
    {
      ocase o = oc_new("1 -> dense 7 tanh -> dense 3 sigmoid -> dense 4 softplus -> dense 2 "
                       "identity -> dense 13 gelu -> dense 1",
                       1, 0, 0);
      oc_add(&o, sc_dense(7, SC_TANH));
      oc_add(&o, sc_dense(3, SC_SIGMOID));
      oc_add(&o, sc_dense(4, SC_SOFTPLUS));
      oc_add(&o, sc_dense_nobias(2, SC_IDENTITY));
      oc_add(&o, sc_dense(13, SC_GELU));
      oc_add(&o, sc_dense(1, SC_IDENTITY));
      assert_true(n < cap);
      out[n++] = o;
    }
    /* 3 to 7 inputs into more outputs than one vector holds (the vector kernels' row tail:
     * with 3 inputs and 5 or more outputs, sc_apply_f64 wrote past a 4-lane vector on the
     * stack until db993d1) */
    {
      ocase o = oc_new("3 -> dense 11 tanh -> dense 6 relu -> dense 21 sigmoid -> dense 7 "
                       "-> dense 5 gelu -> dense 2",
                       3, 0, 0);
      oc_add(&o, sc_dense(11, SC_TANH));
      oc_add(&o, sc_dense(6, SC_RELU));
      oc_add(&o, sc_dense(21, SC_SIGMOID));
      oc_add(&o, sc_dense_nobias(7, SC_IDENTITY));
      oc_add(&o, sc_dense(5, SC_GELU));
      oc_add(&o, sc_dense(2, SC_IDENTITY));
      assert_true(n < cap);
      out[n++] = o;
    }
    /* single dense layer */
    for (int a = 0; a < NACT; a++) {
      snprintf(nm, sizeof nm, "9 -> dense 4 %s%s", sc_act_name(ACTS[a]), a & 1 ? " (no bias)" : "");
      ocase o = oc_new(nm, 9, 0, 0);
      oc_add(&o, a & 1 ? sc_dense_nobias(4, ACTS[a]) : sc_dense(4, ACTS[a]));
      assert_true(n < cap);
      out[n++] = o;
    }
    return n;
  }
  if (group == 1) {
    /* conv2d */
    static const struct {
      size_t c, h, w, kh, kw, k, sh, sw, ph, pw;
      int bias;
    } CV[] = {
        {2, 7, 6, 3, 3, 4, 1, 1, 0, 0, 1}, /* valid, stride 1 */
        {2, 7, 6, 3, 2, 3, 2, 1, 1, 1, 1}, /* stride 2x1, padding 1 */
        {3, 8, 7, 3, 3, 5, 2, 2, 2, 1, 1}, /* stride 2, padding 2x1 */
        {3, 4, 5, 1, 1, 2, 1, 1, 0, 0, 1}, /* 1x1 */
        {1, 6, 7, 2, 3, 3, 1, 2, 1, 2, 1}, /* stride 1x2, padding 1x2 */
        {2, 9, 9, 5, 5, 2, 3, 3, 2, 2, 1}, /* 5x5 stride 3 padding 2 */
        {2, 6, 5, 3, 3, 3, 1, 1, 1, 1, 0}, /* no bias, padding 1 */
        {3, 5, 8, 2, 2, 2, 2, 3, 1, 0, 0}, /* no bias, stride 2x3, padding 1x0 */
        /* more channels than one 16-channel block of the one-state conv's dW */
        {2, 6, 5, 3, 2, 17, 1, 2, 1, 1, 1}, /* K17 stride 1x2, padding 1 */
        {1, 5, 5, 3, 3, 33, 2, 1, 0, 1, 0}, /* K33 no bias, stride 2x1, padding 0x1 */
    };
    for (size_t i = 0; i < sizeof CV / sizeof CV[0]; i++)
      for (int a = 0; a < NACT; a++) {
        if ((size_t)a % 2 != i % 2 && i > 1) /* every activation for the first two */
          continue;
        snprintf(nm, sizeof nm, "%zux%zux%zu -> conv %zux%zu K%zu s%zux%zu p%zux%zu %s%s", CV[i].c,
                 CV[i].h, CV[i].w, CV[i].kh, CV[i].kw, CV[i].k, CV[i].sh, CV[i].sw, CV[i].ph,
                 CV[i].pw, sc_act_name(ACTS[a]), CV[i].bias ? "" : " (no bias)");
        ocase o = oc_new(nm, CV[i].c, CV[i].h, CV[i].w);
        sc_layer l = sc_conv2d_ex(CV[i].kh, CV[i].kw, CV[i].k, ACTS[a], CV[i].sh, CV[i].sw,
                                  CV[i].ph, CV[i].pw);
        oc_add(&o, CV[i].bias ? l : nobias(l));
        assert_true(n < cap);
        out[n++] = o;
      }
    {
      ocase o = oc_new("2x5x6 -> conv 3x3 K3 (sc_conv2d) tanh", 2, 5, 6);
      oc_add(&o, sc_conv2d(3, 3, 3, SC_TANH));
      assert_true(n < cap);
      out[n++] = o;
    }
    return n;
  }
  /* maxpool2d on raw inputs (distinct values, trailing rows / columns) */
  {
    ocase o = oc_new("3x6x7 -> maxpool 2x2", 3, 6, 7);
    oc_add(&o, sc_maxpool2d(2, 2));
    out[n++] = o;
    o = oc_new("2x7x6 -> maxpool 3x2", 2, 7, 6);
    oc_add(&o, sc_maxpool2d(3, 2));
    out[n++] = o;
  }
  /* flatten, dropout */
  {
    ocase o = oc_new("2x3x4 -> flatten", 2, 3, 4);
    oc_add(&o, sc_flatten());
    out[n++] = o;
    o = oc_new("6 -> dropout 0.5", 6, 0, 0);
    oc_add(&o, sc_dropout(0.5));
    out[n++] = o;
    o = oc_new("2x3x3 -> dropout 0.3", 2, 3, 3);
    oc_add(&o, sc_dropout(0.3));
    out[n++] = o;
  }
  /* small combinations */
  {
    ocase o = oc_new("2x3x3 -> flatten -> dense 4 tanh", 2, 3, 3);
    oc_add(&o, sc_flatten());
    oc_add(&o, sc_dense(4, SC_TANH));
    out[n++] = o;
    o = oc_new("4 -> dense 6 relu -> dropout 0.4 -> dense 3", 4, 0, 0);
    oc_add(&o, sc_dense(6, SC_RELU));
    oc_add(&o, sc_dropout(0.4));
    oc_add(&o, sc_dense(3, SC_IDENTITY));
    out[n++] = o;
    o = oc_new("2x5x5 -> conv 2x2 K3 sigmoid -> dropout 0.2 -> maxpool 2 -> flatten -> dense 2 "
               "gelu",
               2, 5, 5);
    oc_add(&o, sc_conv2d(2, 2, 3, SC_SIGMOID));
    oc_add(&o, sc_dropout(0.2));
    oc_add(&o, sc_maxpool2d(2, 2));
    oc_add(&o, sc_flatten());
    oc_add(&o, sc_dense(2, SC_GELU));
    out[n++] = o;
    o = oc_new("1x6x6 -> dropout 0.5 -> maxpool 2 -> conv 2x2 K2 relu -> flatten -> dense 3 "
               "softplus -> dropout 0.1",
               1, 6, 6);
    oc_add(&o, sc_dropout(0.5));
    oc_add(&o, sc_maxpool2d(2, 2));
    oc_add(&o, sc_conv2d(2, 2, 2, SC_RELU));
    oc_add(&o, sc_flatten());
    oc_add(&o, sc_dense(3, SC_SOFTPLUS));
    oc_add(&o, sc_dropout(0.1));
    out[n++] = o;
    /* chains that end in flatten / maxpool (y is a view of an earlier layer's output) */
    o = oc_new("2x4x5 -> conv 2x2 K3 gelu -> flatten", 2, 4, 5);
    oc_add(&o, sc_conv2d(2, 2, 3, SC_GELU));
    oc_add(&o, sc_flatten());
    out[n++] = o;
    o = oc_new("1x7x7 -> conv 3x3 K2 p1 tanh -> maxpool 2", 1, 7, 7);
    oc_add(&o, sc_conv2d_ex(3, 3, 2, SC_TANH, 1, 1, 1, 1));
    oc_add(&o, sc_maxpool2d(2, 2));
    out[n++] = o;
    o = oc_new("2x2x3 -> flatten -> dropout 0.5 -> flatten", 2, 2, 3);
    oc_add(&o, sc_flatten());
    oc_add(&o, sc_dropout(0.5));
    oc_add(&o, sc_flatten());
    out[n++] = o;
    /* widths of 1 */
    o = oc_new("1 -> dense 33 gelu -> dense 1 sigmoid", 1, 0, 0);
    oc_add(&o, sc_dense(33, SC_GELU));
    oc_add(&o, sc_dense(1, SC_SIGMOID));
    out[n++] = o;
    o = oc_new("1x1x1 -> conv 1x1 K1 softplus -> flatten -> dense 1 tanh (no bias)", 1, 1, 1);
    oc_add(&o, sc_conv2d(1, 1, 1, SC_SOFTPLUS));
    oc_add(&o, sc_flatten());
    oc_add(&o, sc_dense_nobias(1, SC_TANH));
    out[n++] = o;
  }
  assert_true(n <= cap);
  return n;
}

static ocase node_case(void) {
  ocase o = oc_new("neural ODE 2 -> dense 50 tanh -> dense 2", 2, 0, 0);
  oc_add(&o, sc_dense(50, SC_TANH));
  oc_add(&o, sc_dense(2, SC_IDENTITY));
  return o;
}
static ocase convnet_case(int padded) {
  ocase o = oc_new(padded ? "convnet 1x8x8 -> conv 3x3x4 p1 tanh -> maxpool 2 -> conv 3x3x3 "
                            "relu s2 p1 -> flatten -> dense 3"
                          : "convnet 1x8x8 -> conv 3x3x4 p1 tanh -> maxpool 2 -> conv 3x3x3 "
                            "relu s2 -> flatten -> dense 3",
                   1, 8, 8);
  oc_add(&o, sc_conv2d_ex(3, 3, 4, SC_TANH, 1, 1, 1, 1));
  oc_add(&o, sc_maxpool2d(2, 2));
  oc_add(&o, sc_conv2d_ex(3, 3, 3, SC_RELU, 2, 2, padded, padded));
  oc_add(&o, sc_flatten());
  oc_add(&o, sc_dense(3, SC_IDENTITY));
  return o;
}

/* ================================================================ case data */
typedef struct odata {
  size_t in, out, np;
  double *p, *u, *v, *w;
} odata;

static void od_free(odata *d) {
  free(d->p), free(d->u), free(d->v), free(d->w);
  memset(d, 0, sizeof *d);
}

/* The smallest distance to a kink at state u: relu pre-activations (|z|) and max-pool
 * gaps (largest minus runner-up), measured with prefix chains of the library (scalar). */
static double kink_distance(const ocase *o, const sc_chain *full, const double *p,
                            const double *u) {
  double m = DBL_MAX;
  size_t nl = o->nl;
  for (size_t l = 0; l < nl; l++) {
    const sc_layer *L = &o->L[l];
    int relu = (L->kind == SC_LAYER_DENSE || L->kind == SC_LAYER_CONV2D) && L->act == SC_RELU;
    int pool = L->kind == SC_LAYER_MAXPOOL2D;
    if (!relu && !pool) continue;
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(full, l, &li));
    double *buf = NULL;
    const double *val = u;
    size_t nval = li.inputs;
    if (relu || l > 0) {
      /* relu: layers 0..l with layer l's activation replaced by the identity;
       * pool: layers 0..l-1 (the pool's input) */
      ocase pre = *o;
      size_t n = relu ? l + 1 : l;
      if (relu) pre.L[l].act = SC_IDENTITY;
      sc_chain *c = mk_chain_n(NULL, &pre, n);
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
      SC_OK_OR_FAIL(sc_chain_output_size(c, &nval));
      buf = malloc(nval * sizeof *buf);
      assert_non_null(buf);
      SC_OK_OR_FAIL(sc_apply_f64(c, p, u, buf, ws));
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
      val = buf;
    }
    if (relu) {
      for (size_t k = 0; k < nval; k++) m = fmin(m, fabs(val[k]));
    } else {
      size_t C = li.in_shape[0], H = li.in_shape[1], W = li.in_shape[2];
      assert_int_equal(nval, C * H * W);
      for (size_t ch = 0; ch < C; ch++)
        for (size_t i = 0; i + L->kh <= H; i += L->kh)
          for (size_t j = 0; j + L->kw <= W; j += L->kw) {
            double t1 = -DBL_MAX, t2 = -DBL_MAX;
            for (size_t a = 0; a < L->kh; a++)
              for (size_t b = 0; b < L->kw; b++) {
                double x = val[(ch * H + i + a) * W + j + b];
                if (x > t1)
                  t2 = t1, t1 = x;
                else if (x > t2)
                  t2 = x;
              }
            if (L->kh * L->kw > 1 && !(t1 == 0 && t2 == 0)) /* dead relu zeros: no gradient */
              m = fmin(m, t1 - t2);
          }
    }
    free(buf);
  }
  return m;
}

/* p: Glorot weights and random biases; u kink-free; v, w random. */
static void od_make(const ocase *o, odata *d, uint64_t seed) {
  sc_chain *c = mk_chain("scalar", o);
  SC_OK_OR_FAIL(sc_chain_input_size(c, &d->in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &d->out));
  SC_OK_OR_FAIL(sc_chain_nparams(c, &d->np));
  d->p = malloc((d->np ? d->np : 1) * sizeof *d->p);
  d->u = malloc(d->in * sizeof *d->u);
  d->v = malloc(d->out * sizeof *d->v);
  d->w = malloc(d->in * sizeof *d->w);
  assert_true(d->p && d->u && d->v && d->w);
  if (d->np) {
    SC_OK_OR_FAIL(sc_params_init_f64(c, d->p, d->np, seed));
    uint64_t s = seed * 31 + 7;
    for (size_t l = 0; l < o->nl; l++) {
      sc_layer_info li;
      SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
      if ((li.layer.kind != SC_LAYER_DENSE && li.layer.kind != SC_LAYER_CONV2D) || !li.layer.bias)
        continue;
      size_t nb = li.out_shape[0];
      for (size_t k = 0; k < nb; k++)
        d->p[li.param_offset + li.nparams - nb + k] = 0.5 * tu_unif(&s);
    }
  }
  tu_fill_f64(d->v, d->out, seed ^ 0x1111, 1.0);
  tu_fill_f64(d->w, d->in, seed ^ 0x2222, 1.0);
  for (int tries = 0;; tries++) {
    assert_true(tries < 2000);
    tu_fill_f64(d->u, d->in, seed * 1000 + (uint64_t)tries, 1.0);
    if (kink_distance(o, c, d->p, d->u) >= KINK_MARGIN) break;
  }
  sc_chain_destroy(c);
}

/* ================================================================ comparisons */
typedef struct stats {
  double fd_rel, fd_abs; /* finite differences */
  double eq_rel;         /* "equal" checks */
  double isa_rel;        /* float ISA vs scalar float */
  double f32_rel;        /* float vs double */
  double f32_batch_rel;  /* float one-state vs float batch path (forward, pullback) */
  size_t fd_checked;
} stats;

static void fd_check(const char *ctx, const char *what, size_t k, double an, double fd, stats *st) {
  tu_fd_compare(ctx, what, k, an, fd, FD_RTOL, FD_FLOOR, &st->fd_rel, &st->fd_abs, &st->fd_checked);
}

/* components checked by finite differences: all of them up to MAX_FD, else a stride
 * plus the last 40 (the output layer's bias and last weights) */
static int fd_want(size_t k, size_t n) {
  if (n <= MAX_FD) return 1;
  size_t stride = (n + MAX_FD - 1) / MAX_FD;
  return k % stride == 0 || k + 40 >= n;
}

static void eq_check(const char *ctx, const char *what, size_t k, double got, double want,
                     stats *st) {
  double den = fmax(fmax(fabs(got), fabs(want)), 1.0);
  double err = fabs(got - want) / den;
  if (!(err <= EQ_RTOL))
    fail_msg("%s: %s[%zu] = %.17g, expected %.17g (rel err %.3g > %g)", ctx, what, k, got, want,
             err, EQ_RTOL);
  if (st) st->eq_rel = fmax(st->eq_rel, err);
}
static void eq_vec(const char *ctx, const char *what, const double *got, const double *want,
                   size_t n, stats *st) {
  for (size_t k = 0; k < n; k++) eq_check(ctx, what, k, got[k], want[k], st);
}

/* |a - r| <= rtol * max(|r|, ISA_FLOOR * max_k |r_k|); returns the worst ratio err/den */
static double rel_vec(const char *ctx, const char *what, const float *got, const double *ref,
                      size_t n, double rtol) {
  double mx = 0, worst = 0;
  for (size_t k = 0; k < n; k++) mx = fmax(mx, fabs(ref[k]));
  for (size_t k = 0; k < n; k++) {
    double den = fmax(fabs(ref[k]), ISA_FLOOR * mx), err = fabs((double)got[k] - ref[k]);
    if (!(err <= rtol * den))
      fail_msg("%s: %s[%zu] = %.9g, reference %.9g (err %.3g > %g x %.3g)", ctx, what, k,
               (double)got[k], ref[k], err, rtol, den);
    if (den > 0) worst = fmax(worst, err / den);
  }
  return worst;
}

static double dot(const double *a, const double *b, size_t n) {
  double s = 0;
  for (size_t k = 0; k < n; k++) s += a[k] * b[k];
  return s;
}

/* ================================================================ double checks */
typedef struct fctx {
  const sc_chain *c;
  sc_workspace *ws;
  const double *v;
  double *y;
  size_t out;
} fctx;

/* F(u; p) = <v, f(u; p)> through sc_apply_f64 */
static double F_at(const fctx *F, const double *p, const double *u) {
  SC_OK_OR_FAIL(sc_apply_f64(F->c, p, u, F->y, F->ws));
  return dot(F->v, F->y, F->out);
}

static double *dalloc(size_t n) {
  double *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  return x;
}
static float *falloc(size_t n) {
  float *x = malloc((n ? n : 1) * sizeof *x);
  assert_non_null(x);
  return x;
}

static void check_f64(const char *isa, const ocase *o, const odata *d, stats *st) {
  char ctx[256];
  snprintf(ctx, sizeof ctx, "isa=%s f64 [%s]", isa, o->name);
  sc_chain *c = mk_chain(isa, o);
  size_t in = d->in, out = d->out, np = d->np;
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));

  double *y = dalloc(out), *yf = dalloc(out), *y2 = dalloc(out), *yt = dalloc(out);
  double *jw = dalloc(out), *jw2 = dalloc(out), *yp = dalloc(out), *ym = dalloc(out);
  double *du = dalloc(in), *du0 = dalloc(in), *du1 = dalloc(in), *duz = dalloc(in);
  double *dp = dalloc(np), *dp0 = dalloc(np), *dp1 = dalloc(np), *dpz = dalloc(np);
  double *uu = dalloc(in), *pp = dalloc(np), *g = dalloc(np), *gx = dalloc(in);

  /* sc_apply_f64 == sc_forward_f64 at batch 1 */
  SC_OK_OR_FAIL(sc_apply_f64(c, d->p, d->u, y, ws));
  SC_OK_OR_FAIL(sc_forward_f64(c, d->p, d->u, 1, yf, ws));
  eq_vec(ctx, "apply y vs forward y", y, yf, out, st);

  /* sc_jvp_f64: jw (overwritten) against central differences along w; y */
  for (size_t k = 0; k < out; k++) jw[k] = 1e6, yt[k] = NAN;
  SC_OK_OR_FAIL(sc_jvp_f64(c, d->p, d->u, d->w, yt, jw, ws));
  eq_vec(ctx, "jvp y vs apply y", yt, y, out, st);
  fctx F = {c, ws, d->v, y2, out};
  for (size_t k = 0; k < in; k++) uu[k] = d->u[k] + FD_H * d->w[k];
  SC_OK_OR_FAIL(sc_apply_f64(c, d->p, uu, yp, ws));
  for (size_t k = 0; k < in; k++) uu[k] = d->u[k] - FD_H * d->w[k];
  SC_OK_OR_FAIL(sc_apply_f64(c, d->p, uu, ym, ws));
  for (size_t k = 0; k < out; k++)
    fd_check(ctx, "jvp jw", k, jw[k], (yp[k] - ym[k]) / (2 * FD_H), st);
  /* y = NULL; a second call overwrites (does not add to) jw */
  SC_OK_OR_FAIL(sc_jvp_f64(c, d->p, d->u, d->w, NULL, jw2, ws));
  eq_vec(ctx, "jvp jw (y = NULL) vs jw", jw2, jw, out, st);
  SC_OK_OR_FAIL(sc_jvp_f64(c, d->p, d->u, d->w, NULL, jw2, ws));
  eq_vec(ctx, "jvp jw (second call) vs jw", jw2, jw, out, st);

  /* sc_vjp_f64: du, dp accumulate into random pre-filled vectors */
  tu_fill_f64(du0, in, 0xD0, 2.0);
  tu_fill_f64(dp0, np, 0xD1, 2.0);
  memcpy(du, du0, in * sizeof *du);
  memcpy(dp, dp0, np * sizeof *dp);
  for (size_t k = 0; k < out; k++) yt[k] = NAN;
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, yt, du, dp, ws));
  eq_vec(ctx, "vjp y vs apply y", yt, y, out, st);
  memcpy(du1, du, in * sizeof *du);
  memcpy(dp1, dp, np * sizeof *dp);
  /* du against central differences of F along every u_k */
  memcpy(uu, d->u, in * sizeof *uu);
  for (size_t k = 0; k < in; k++) {
    if (!fd_want(k, in)) continue;
    uu[k] = d->u[k] + FD_H;
    double fp = F_at(&F, d->p, uu);
    uu[k] = d->u[k] - FD_H;
    double fm = F_at(&F, d->p, uu);
    uu[k] = d->u[k];
    fd_check(ctx, "vjp du - du0", k, du1[k] - du0[k], (fp - fm) / (2 * FD_H), st);
  }
  /* dp against central differences of F along every p_k */
  if (np) memcpy(pp, d->p, np * sizeof *pp);
  for (size_t k = 0; k < np; k++) {
    if (!fd_want(k, np)) continue;
    pp[k] = d->p[k] + FD_H;
    double fp = F_at(&F, pp, d->u);
    pp[k] = d->p[k] - FD_H;
    double fm = F_at(&F, pp, d->u);
    pp[k] = d->p[k];
    fd_check(ctx, "vjp dp - dp0", k, dp1[k] - dp0[k], (fp - fm) / (2 * FD_H), st);
  }
  /* a second call adds the same amount again */
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, NULL, du, dp, ws));
  for (size_t k = 0; k < in; k++)
    eq_check(ctx, "second vjp: du vs du0 + 2 (du1 - du0)", k, du[k], du0[k] + 2 * (du1[k] - du0[k]),
             st);
  for (size_t k = 0; k < np; k++)
    eq_check(ctx, "second vjp: dp vs dp0 + 2 (dp1 - dp0)", k, dp[k], dp0[k] + 2 * (dp1[k] - dp0[k]),
             st);
  /* du alone, dp alone */
  memcpy(du, du0, in * sizeof *du);
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, NULL, du, NULL, ws));
  eq_vec(ctx, "vjp du (dp = NULL) vs du with dp", du, du1, in, st);
  if (np) memcpy(dp, dp0, np * sizeof *dp);
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, NULL, NULL, dp, ws));
  eq_vec(ctx, "vjp dp (du = NULL) vs dp with du", dp, dp1, np, st);
  /* y alone; nothing at all */
  for (size_t k = 0; k < out; k++) yt[k] = NAN;
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, yt, NULL, NULL, ws));
  eq_vec(ctx, "vjp y (du = dp = NULL) vs apply y", yt, y, out, st);
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, NULL, NULL, NULL, ws));

  /* from zero: <v, J w> == <J^T v, w>, and == sc_pullback_f64 at batch 1 */
  for (size_t k = 0; k < in; k++) duz[k] = 0;
  for (size_t k = 0; k < np; k++) dpz[k] = 0, g[k] = 0;
  SC_OK_OR_FAIL(sc_vjp_f64(c, d->p, d->u, d->v, NULL, duz, dpz, ws));
  double a = dot(d->v, jw, out), b = dot(duz, d->w, in);
  eq_check(ctx, "<v, J w> (jvp) vs <J^T v, w> (vjp)", 0, a, b, st);
  for (size_t k = 0; k < in; k++) gx[k] = 1e6;
  SC_OK_OR_FAIL(sc_pullback_f64(c, d->p, d->u, d->v, 1, np ? g : NULL, gx, ws));
  eq_vec(ctx, "vjp dp vs pullback g", dpz, g, np, st);
  eq_vec(ctx, "vjp du vs pullback gx", duz, gx, in, st);

  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(y), free(yf), free(y2), free(yt), free(jw), free(jw2), free(yp), free(ym);
  free(du), free(du0), free(du1), free(duz), free(dp), free(dp0), free(dp1), free(dpz);
  free(uu), free(pp), free(g), free(gx);
}

/* ================================================================ float checks */
static void f2d(double *dst, const float *src, size_t n) {
  for (size_t k = 0; k < n; k++) dst[k] = (double)src[k];
}

typedef struct fres {
  float *y, *yv, *du, *dp, *yj, *jw;
} fres;

static void fres_alloc(fres *r, const odata *d) {
  r->y = falloc(d->out), r->yv = falloc(d->out), r->yj = falloc(d->out), r->jw = falloc(d->out);
  r->du = falloc(d->in), r->dp = falloc(d->np);
}
static void fres_free(fres *r) {
  free(r->y), free(r->yv), free(r->du), free(r->dp), free(r->yj), free(r->jw);
}

/* Float results on one ISA, plus the float accumulation and NULL-argument checks. */
static void run_f32(const char *isa, const ocase *o, const odata *d, const float *p, const float *u,
                    const float *v, const float *w, fres *r, double *batch_rel) {
  char ctx[256];
  snprintf(ctx, sizeof ctx, "isa=%s f32 [%s]", isa, o->name);
  sc_chain *c = mk_chain(isa, o);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
  size_t in = d->in, out = d->out, np = d->np;
  SC_OK_OR_FAIL(sc_apply(c, p, u, r->y, ws));
  memset(r->du, 0, (in ? in : 1) * sizeof(float));
  memset(r->dp, 0, (np ? np : 1) * sizeof(float));
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, r->yv, r->du, r->dp, ws));
  for (size_t k = 0; k < out; k++) r->jw[k] = 1e6f;
  SC_OK_OR_FAIL(sc_jvp(c, p, u, w, r->yj, r->jw, ws));
  /* y from vjp and jvp is the apply y (the same forward) */
  for (size_t k = 0; k < out; k++)
    if (!(fabsf(r->yv[k] - r->y[k]) <= 1e-6f * fmaxf(1, fabsf(r->y[k])) &&
          fabsf(r->yj[k] - r->y[k]) <= 1e-6f * fmaxf(1, fabsf(r->y[k]))))
      fail_msg("%s: y[%zu]: apply %.9g, vjp %.9g, jvp %.9g", ctx, k, (double)r->y[k],
               (double)r->yv[k], (double)r->yj[k]);
  /* the batch path at batch 1: sc_forward's y, sc_pullback's g and gx */
  {
    float *yb = falloc(out), *g = falloc(np), *gx = falloc(in);
    double *t = dalloc(in + out + np);
    SC_OK_OR_FAIL(sc_forward(c, p, u, 1, yb, ws));
    memset(g, 0, (np ? np : 1) * sizeof *g);
    SC_OK_OR_FAIL(sc_pullback(c, p, u, v, 1, np ? g : NULL, gx, ws));
    double e = 0;
    f2d(t, yb, out), e = fmax(e, rel_vec(ctx, "apply y vs forward", r->y, t, out, ISA_RTOL));
    f2d(t, g, np), e = fmax(e, rel_vec(ctx, "vjp dp vs pullback g", r->dp, t, np, ISA_RTOL));
    f2d(t, gx, in), e = fmax(e, rel_vec(ctx, "vjp du vs pullback gx", r->du, t, in, ISA_RTOL));
    *batch_rel = fmax(*batch_rel, e);
    free(yb), free(g), free(gx), free(t);
  }
  /* accumulation: du0 + 2 x increment; NULL variants */
  float *du = falloc(in), *dp = falloc(np), *du0 = falloc(in), *dp0 = falloc(np),
        *jw2 = falloc(out);
  tu_fill_f32(du0, in, 0xF0, 2.0);
  tu_fill_f32(dp0, np, 0xF1, 2.0);
  memcpy(du, du0, in * sizeof *du);
  if (np) memcpy(dp, dp0, np * sizeof *dp);
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, NULL, du, dp, ws));
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, NULL, du, np ? dp : NULL, ws));
  for (size_t k = 0; k < in; k++) {
    double want = (double)du0[k] + 2.0 * r->du[k];
    if (!(fabs(du[k] - want) <= F32_ACC_RTOL * fmax(1, fabs(want))))
      fail_msg("%s: two vjp calls: du[%zu] = %.9g, expected du0 + 2 J^T v = %.9g", ctx, k,
               (double)du[k], want);
  }
  for (size_t k = 0; k < np; k++) {
    double want = (double)dp0[k] + 2.0 * r->dp[k];
    if (!(fabs(dp[k] - want) <= F32_ACC_RTOL * fmax(1, fabs(want))))
      fail_msg("%s: two vjp calls: dp[%zu] = %.9g, expected dp0 + 2 J_p^T v = %.9g", ctx, k,
               (double)dp[k], want);
  }
  memset(du, 0, (in ? in : 1) * sizeof *du);
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, NULL, du, NULL, ws));
  for (size_t k = 0; k < in; k++)
    if (!(fabsf(du[k] - r->du[k]) <= 1e-6f * fmaxf(1, fabsf(r->du[k]))))
      fail_msg("%s: du[%zu] with dp = NULL %.9g, with dp %.9g", ctx, k, (double)du[k],
               (double)r->du[k]);
  memset(dp, 0, (np ? np : 1) * sizeof *dp);
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, NULL, NULL, dp, ws));
  for (size_t k = 0; k < np; k++)
    if (!(fabsf(dp[k] - r->dp[k]) <= 1e-6f * fmaxf(1, fabsf(r->dp[k]))))
      fail_msg("%s: dp[%zu] with du = NULL %.9g, with du %.9g", ctx, k, (double)dp[k],
               (double)r->dp[k]);
  SC_OK_OR_FAIL(sc_vjp(c, p, u, v, NULL, NULL, NULL, ws));
  SC_OK_OR_FAIL(sc_jvp(c, p, u, w, NULL, jw2, ws));
  for (size_t k = 0; k < out; k++)
    if (!(fabsf(jw2[k] - r->jw[k]) <= 1e-6f * fmaxf(1, fabsf(r->jw[k]))))
      fail_msg("%s: jw[%zu] with y = NULL %.9g, with y %.9g", ctx, k, (double)jw2[k],
               (double)r->jw[k]);
  free(du), free(dp), free(du0), free(dp0), free(jw2);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
}

static void check_f32(const char **isas, int nisa, const ocase *o, const odata *d, stats *st) {
  size_t in = d->in, out = d->out, np = d->np;
  float *p = falloc(np), *u = falloc(in), *v = falloc(out), *w = falloc(in);
  for (size_t k = 0; k < np; k++) p[k] = (float)d->p[k];
  for (size_t k = 0; k < in; k++) u[k] = (float)d->u[k], w[k] = (float)d->w[k];
  for (size_t k = 0; k < out; k++) v[k] = (float)d->v[k];

  /* double reference on the scalar path, fed the float-rounded values */
  double *pd = dalloc(np), *ud = dalloc(in), *vd = dalloc(out), *wd = dalloc(in);
  f2d(pd, p, np), f2d(ud, u, in), f2d(vd, v, out), f2d(wd, w, in);
  double *ry = dalloc(out), *rdu = dalloc(in), *rdp = dalloc(np), *rjw = dalloc(out);
  {
    sc_chain *c = mk_chain("scalar", o);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
    memset(rdu, 0, (in ? in : 1) * sizeof *rdu);
    memset(rdp, 0, (np ? np : 1) * sizeof *rdp);
    SC_OK_OR_FAIL(sc_vjp_f64(c, pd, ud, vd, ry, rdu, rdp, ws));
    SC_OK_OR_FAIL(sc_jvp_f64(c, pd, ud, wd, NULL, rjw, ws));
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
  }

  fres ref, r;
  fres_alloc(&ref, d);
  fres_alloc(&r, d);
  assert_string_equal(isas[0], "scalar");
  for (int is = 0; is < nisa; is++) {
    char ctx[256];
    snprintf(ctx, sizeof ctx, "isa=%s f32 [%s]", isas[is], o->name);
    fres *x = is == 0 ? &ref : &r;
    run_f32(isas[is], o, d, p, u, v, w, x, &st->f32_batch_rel);
    /* against double */
    double e = 0;
    e = fmax(e, rel_vec(ctx, "apply y vs f64", x->y, ry, out, ISA_RTOL));
    e = fmax(e, rel_vec(ctx, "vjp y vs f64", x->yv, ry, out, ISA_RTOL));
    e = fmax(e, rel_vec(ctx, "vjp du vs f64", x->du, rdu, in, ISA_RTOL));
    e = fmax(e, rel_vec(ctx, "vjp dp vs f64", x->dp, rdp, np, ISA_RTOL));
    e = fmax(e, rel_vec(ctx, "jvp y vs f64", x->yj, ry, out, ISA_RTOL));
    e = fmax(e, rel_vec(ctx, "jvp jw vs f64", x->jw, rjw, out, ISA_RTOL));
    st->f32_rel = fmax(st->f32_rel, e);
    if (is == 0) continue;
    /* against the scalar float path */
    double *t = dalloc(in + out + np);
    e = 0;
    f2d(t, ref.y, out), e = fmax(e, rel_vec(ctx, "apply y vs scalar", x->y, t, out, ISA_RTOL));
    f2d(t, ref.yv, out), e = fmax(e, rel_vec(ctx, "vjp y vs scalar", x->yv, t, out, ISA_RTOL));
    f2d(t, ref.du, in), e = fmax(e, rel_vec(ctx, "vjp du vs scalar", x->du, t, in, ISA_RTOL));
    f2d(t, ref.dp, np), e = fmax(e, rel_vec(ctx, "vjp dp vs scalar", x->dp, t, np, ISA_RTOL));
    f2d(t, ref.yj, out), e = fmax(e, rel_vec(ctx, "jvp y vs scalar", x->yj, t, out, ISA_RTOL));
    f2d(t, ref.jw, out), e = fmax(e, rel_vec(ctx, "jvp jw vs scalar", x->jw, t, out, ISA_RTOL));
    st->isa_rel = fmax(st->isa_rel, e);
    free(t);
  }
  fres_free(&ref);
  fres_free(&r);
  free(p), free(u), free(v), free(w), free(pd), free(ud), free(vd), free(wd);
  free(ry), free(rdu), free(rdp), free(rjw);
}

/* ================================================================ drivers */
static void run_cases(const ocase *cs, size_t n, uint64_t seed, const char *label) {
  const char *isas[3];
  int nisa = tu_isas(isas);
  assert_true(nisa >= 1);
  stats st;
  memset(&st, 0, sizeof st);
  for (size_t i = 0; i < n; i++) {
    odata d;
    od_make(&cs[i], &d, seed + 17 * i);
    for (int is = 0; is < nisa; is++) check_f64(isas[is], &cs[i], &d, &st);
    check_f32(isas, nisa, &cs[i], &d, &st);
    od_free(&d);
  }
  print_message("  %s: %zu chains x %d ISA(s): FD worst rel %.3g (tol %g), abs %.3g, %zu checked; "
                "equal-checks worst rel %.3g (tol %g); f32 ISA vs scalar worst %.3g, f32 vs f64 "
                "worst %.3g, f32 vs f32 batch path worst %.3g (tol %g)\n",
                label, n, nisa, st.fd_rel, FD_RTOL, st.fd_abs, st.fd_checked, st.eq_rel, EQ_RTOL,
                st.isa_rel, st.f32_rel, st.f32_batch_rel, ISA_RTOL);
  unsetenv("SC_ISA");
}

static void test_dense(void **state) {
  (void)state;
  ocase cs[32];
  size_t k = layer_cases(0, cs, 32);
  assert_int_equal(k, 24);
  run_cases(cs, k, 100, "dense");
}

static void test_conv(void **state) {
  (void)state;
  ocase cs[48];
  size_t k = layer_cases(1, cs, 48);
  assert_int_equal(k, 43);
  run_cases(cs, k, 200, "conv2d");
}

static void test_pool_flatten_dropout(void **state) {
  (void)state;
  ocase cs[20];
  size_t k = layer_cases(2, cs, 20);
  assert_int_equal(k, 14);
  run_cases(cs, k, 300, "maxpool / flatten / dropout / combinations");
}

static void test_mixed(void **state) {
  (void)state;
  ocase cs[3] = {node_case(), convnet_case(0), convnet_case(1)};
  /* the documented shapes */
  size_t io[3][3] = {{2, 2, 2 * 50 + 50 + 50 * 2 + 2},
                     {64, 3, (4 * 9 + 4) + (3 * 4 * 9 + 3) + (3 * 3 + 3)},
                     {64, 3, (4 * 9 + 4) + (3 * 4 * 9 + 3) + (3 * 12 + 3)}};
  for (int i = 0; i < 3; i++) {
    sc_chain *c = mk_chain(NULL, &cs[i]);
    size_t a, b, np;
    SC_OK_OR_FAIL(sc_chain_input_size(c, &a));
    SC_OK_OR_FAIL(sc_chain_output_size(c, &b));
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    assert_int_equal(a, io[i][0]);
    assert_int_equal(b, io[i][1]);
    assert_int_equal(np, io[i][2]);
    sc_chain_destroy(c);
  }
  run_cases(cs, 3, 400, "mixed (neural ODE, convnet)");
  /* a second draw of states and parameters */
  run_cases(cs, 3, 500, "mixed (second draw)");
}

/* The results do not depend on the workspace: max_batch 1, 33, caller memory at an odd
 * address; bitwise. */
static void test_workspace_independent(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  ocase o = convnet_case(1);
  odata d;
  od_make(&o, &d, 77);
  for (int is = 0; is < nisa; is++) {
    sc_chain *c = mk_chain(isas[is], &o);
    sc_workspace *ws[3] = {NULL, NULL, NULL};
    SC_OK_OR_FAIL(sc_workspace_create(&ws[0], c, 1));
    SC_OK_OR_FAIL(sc_workspace_create(&ws[1], c, 33));
    size_t bytes = 0;
    SC_OK_OR_FAIL(sc_workspace_bytes(c, 2, &bytes));
    unsigned char *mem = malloc(bytes + 1);
    assert_non_null(mem);
    SC_OK_OR_FAIL(sc_workspace_init(&ws[2], c, 2, mem + 1, bytes));
    double y[3][3], jw[3][3], du[3][64], dp[3][300];
    float yf[3][3], jwf[3][3], duf[3][64], dpf[3][300];
    float pf[300], uf[64], vf[3], wf[64];
    assert_true(d.np <= 300 && d.in == 64 && d.out == 3);
    for (size_t k = 0; k < d.np; k++) pf[k] = (float)d.p[k];
    for (size_t k = 0; k < 64; k++) uf[k] = (float)d.u[k], wf[k] = (float)d.w[k];
    for (size_t k = 0; k < 3; k++) vf[k] = (float)d.v[k];
    for (int i = 0; i < 3; i++) {
      memset(du[i], 0, sizeof du[i]), memset(dp[i], 0, sizeof dp[i]);
      memset(duf[i], 0, sizeof duf[i]), memset(dpf[i], 0, sizeof dpf[i]);
      SC_OK_OR_FAIL(sc_vjp_f64(c, d.p, d.u, d.v, y[i], du[i], dp[i], ws[i]));
      SC_OK_OR_FAIL(sc_jvp_f64(c, d.p, d.u, d.w, NULL, jw[i], ws[i]));
      SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, yf[i], duf[i], dpf[i], ws[i]));
      SC_OK_OR_FAIL(sc_jvp(c, pf, uf, wf, NULL, jwf[i], ws[i]));
    }
    for (int i = 1; i < 3; i++) {
      assert_memory_equal(y[0], y[i], sizeof y[0]);
      assert_memory_equal(jw[0], jw[i], sizeof jw[0]);
      assert_memory_equal(du[0], du[i], sizeof du[0]);
      assert_memory_equal(dp[0], dp[i], sizeof dp[0]);
      assert_memory_equal(yf[0], yf[i], sizeof yf[0]);
      assert_memory_equal(jwf[0], jwf[i], sizeof jwf[0]);
      assert_memory_equal(duf[0], duf[i], sizeof duf[0]);
      assert_memory_equal(dpf[0], dpf[i], sizeof dpf[0]);
    }
    sc_workspace_destroy(ws[0]);
    sc_workspace_destroy(ws[1]); /* ws[2] lives in caller memory */
    free(mem);
    sc_chain_destroy(c);
  }
  od_free(&d);
  unsetenv("SC_ISA");
}

/* ================================================================ documented kinks */
/* relu'(0) = 0: a relu layer with every pre-activation exactly 0 (u = 0, no bias / zero
 * bias) passes no gradient and no tangent. Max-pool ties: the gradient (and the tangent)
 * go to the first maximal element of each window. Float and double, every ISA; the batch
 * path (sc_pullback at batch 1) agrees. */
static void test_relu_zero_and_pool_ties(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    /* 3 -> dense 4 relu (bias 0) -> dense 2 */
    ocase o = oc_new("3 -> dense 4 relu -> dense 2", 3, 0, 0);
    oc_add(&o, sc_dense(4, SC_RELU));
    oc_add(&o, sc_dense(2, SC_IDENTITY));
    sc_chain *c = mk_chain(isas[is], &o);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
    size_t np = 0;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    assert_int_equal(np, 12 + 4 + 8 + 2);
    double p[26], u[3] = {0, 0, 0}, v[2] = {0.75, -1.5}, w[3] = {1, -2, 0.5}, y[2], jw[2];
    double du[3] = {0, 0, 0}, dp[26] = {0}, g[26] = {0}, gx[3];
    float pf[26], uf[3] = {0, 0, 0}, vf[2] = {0.75f, -1.5f}, wf[3] = {1, -2, 0.5f}, yf[2], jwf[2];
    float duf[3] = {0, 0, 0}, dpf[26] = {0};
    SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 11));
    for (size_t k = 12; k < 16; k++) p[k] = 0; /* layer-0 bias */
    p[24] = 0.25, p[25] = -0.125;
    for (size_t k = 0; k < np; k++) pf[k] = (float)p[k];
    SC_OK_OR_FAIL(sc_vjp_f64(c, p, u, v, y, du, dp, ws));
    SC_OK_OR_FAIL(sc_jvp_f64(c, p, u, w, NULL, jw, ws));
    SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
    SC_OK_OR_FAIL(sc_jvp(c, pf, uf, wf, NULL, jwf, ws));
    SC_OK_OR_FAIL(sc_pullback_f64(c, p, u, v, 1, g, gx, ws));
    for (size_t k = 0; k < 2; k++) {
      if (y[k] != p[24 + k] || yf[k] != pf[24 + k])
        fail_msg("isa=%s relu(0): y[%zu] = %.17g / %.9g, expected the output bias %.17g", isas[is],
                 k, y[k], (double)yf[k], p[24 + k]);
      if (jw[k] != 0 || jwf[k] != 0)
        fail_msg("isa=%s relu'(0) = 0: jw[%zu] = %.17g / %.9g, expected 0", isas[is], k, jw[k],
                 (double)jwf[k]);
    }
    for (size_t k = 0; k < 3; k++)
      if (du[k] != 0 || duf[k] != 0 || gx[k] != 0)
        fail_msg("isa=%s relu'(0) = 0: du[%zu] = %.17g / %.9g (pullback gx %.17g), expected 0",
                 isas[is], k, du[k], (double)duf[k], gx[k]);
    for (size_t k = 0; k < np; k++) {
      double want = k >= 24 ? v[k - 24] : 0; /* only the output bias gets v */
      if (dp[k] != want || dpf[k] != (float)want || g[k] != want)
        fail_msg("isa=%s relu'(0) = 0: dp[%zu] = %.17g / %.9g (pullback g %.17g), expected %g",
                 isas[is], k, dp[k], (double)dpf[k], g[k], want);
    }
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);

    /* 1x4x5 -> maxpool 2x2 (the last column fills no window): windows with ties */
    ocase q = oc_new("1x4x5 -> maxpool 2x2", 1, 4, 5);
    oc_add(&q, sc_maxpool2d(2, 2));
    c = mk_chain(isas[is], &q);
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
    /* window (0,0): all 0.5 -> first (0,0); (0,1): 0.9 at (0,3) and (1,2) -> (0,3);
     * (1,0): 0.7 at (3,0) and (3,1) -> (3,0); (1,1): unique max at (3,3) */
    static const double U[20] = {0.5, 0.5, -0.1, 0.9, 2.0,  /* row 0 */
                                 0.5, 0.5, 0.9,  0.2, 2.0,  /* row 1 */
                                 0.1, 0.2, 0.3,  0.4, 2.0,  /* row 2 */
                                 0.7, 0.7, -0.3, 0.8, 2.0}; /* row 3 */
    static const size_t FIRST[4] = {0, 3, 15, 18};
    double qu[20], qw[20], qdu[20], qgx[20], qv[4] = {1, -2, 3, -4}, qy[4], qjw[4];
    float qfu[20], qfw[20], qfdu[20], qfv[4] = {1, -2, 3, -4}, qfy[4], qfjw[4];
    for (size_t k = 0; k < 20; k++) {
      qu[k] = U[k], qfu[k] = (float)U[k];
      qw[k] = 1.0 + (double)k, qfw[k] = (float)qw[k];
      qdu[k] = 0, qfdu[k] = 0;
    }
    double dummy = 0;
    float dummyf = 0;
    SC_OK_OR_FAIL(sc_vjp_f64(c, &dummy, qu, qv, qy, qdu, NULL, ws));
    SC_OK_OR_FAIL(sc_jvp_f64(c, &dummy, qu, qw, NULL, qjw, ws));
    SC_OK_OR_FAIL(sc_vjp(c, &dummyf, qfu, qfv, qfy, qfdu, NULL, ws));
    SC_OK_OR_FAIL(sc_jvp(c, &dummyf, qfu, qfw, NULL, qfjw, ws));
    SC_OK_OR_FAIL(sc_pullback_f64(c, &dummy, qu, qv, 1, NULL, qgx, ws));
    for (size_t o2 = 0; o2 < 4; o2++) {
      if (qy[o2] != U[FIRST[o2]] || qfy[o2] != (float)U[FIRST[o2]])
        fail_msg("isa=%s maxpool ties: y[%zu] = %.17g / %.9g, expected %.17g", isas[is], o2, qy[o2],
                 (double)qfy[o2], U[FIRST[o2]]);
      if (qjw[o2] != qw[FIRST[o2]] || qfjw[o2] != qfw[FIRST[o2]])
        fail_msg("isa=%s maxpool ties: jw[%zu] = %.17g / %.9g, expected w[%zu] = %.17g (the first "
                 "maximal element)",
                 isas[is], o2, qjw[o2], (double)qfjw[o2], FIRST[o2], qw[FIRST[o2]]);
    }
    for (size_t k = 0; k < 20; k++) {
      double want = 0;
      for (size_t o2 = 0; o2 < 4; o2++)
        if (FIRST[o2] == k) want = qv[o2];
      if (qdu[k] != want || qfdu[k] != (float)want || qgx[k] != want)
        fail_msg("isa=%s maxpool ties: du[%zu] = %.17g / %.9g (pullback gx %.17g), expected %g "
                 "(the gradient goes to the first maximal element)",
                 isas[is], k, qdu[k], (double)qfdu[k], qgx[k], want);
    }
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
  }
  unsetenv("SC_ISA");
}

/* ================================================================ workspace sharing */
/* One workspace serves the batch path and the single-state path, float and double, in
 * any order: the batch results after one-state calls equal those of a fresh workspace
 * (bitwise), and the other way round; one-state calls do not advance the dropout step
 * (only sc_valgrad does); a workspace with threads set gives the same results. */
static void test_interleave_with_batch_path(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  ocase o = oc_new("1x8x8 -> conv 3x3 K4 p1 gelu -> dropout 0.3 -> maxpool 2 -> flatten -> dense "
                   "5 relu -> dense 3",
                   1, 8, 8);
  oc_add(&o, sc_conv2d_ex(3, 3, 4, SC_GELU, 1, 1, 1, 1));
  oc_add(&o, sc_dropout(0.3));
  oc_add(&o, sc_maxpool2d(2, 2));
  oc_add(&o, sc_flatten());
  oc_add(&o, sc_dense(5, SC_RELU));
  oc_add(&o, sc_dense(3, SC_IDENTITY));
  odata d;
  od_make(&o, &d, 99);
  const size_t B = 5, in = d.in, out = d.out, np = d.np;
  double *x = dalloc(B * in), *t = dalloc(B * out), *dy = dalloc(B * out);
  tu_fill_f64(x, B * in, 123, 1.0);
  tu_fill_f64(t, B * out, 124, 1.0);
  tu_fill_f64(dy, B * out, 125, 1.0);
  for (int is = 0; is < nisa; is++) {
    sc_chain *c = mk_chain(isas[is], &o);
    sc_workspace *fresh = NULL, *ws = NULL;
    /* references from fresh workspaces */
    double *g0 = dalloc(np), *gp0 = dalloc(np), *gx0 = dalloc(B * in), l0 = 0;
    double *du0 = dalloc(in), *dp0 = dalloc(np), y0[3], jw0[3];
    SC_OK_OR_FAIL(sc_workspace_create(&fresh, c, B));
    SC_OK_OR_FAIL(sc_workspace_set_dropout(fresh, 7, 3));
    SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, d.p, x, t, B, &l0, g0, NULL, fresh));
    memset(gp0, 0, np * sizeof *gp0);
    SC_OK_OR_FAIL(sc_pullback_f64(c, d.p, x, dy, B, gp0, gx0, fresh));
    sc_workspace_destroy(fresh);
    SC_OK_OR_FAIL(sc_workspace_create(&fresh, c, 1));
    memset(du0, 0, in * sizeof *du0), memset(dp0, 0, np * sizeof *dp0);
    SC_OK_OR_FAIL(sc_vjp_f64(c, d.p, d.u, d.v, y0, du0, dp0, fresh));
    SC_OK_OR_FAIL(sc_jvp_f64(c, d.p, d.u, d.w, NULL, jw0, fresh));
    sc_workspace_destroy(fresh);

    /* one workspace, everything interleaved */
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_workspace_set_dropout(ws, 7, 3));
    double *du = dalloc(in), *dp = dalloc(np), y[3], jw[3], *g = dalloc(np), *gx = dalloc(B * in);
    float *pf = falloc(np), *uf = falloc(in), *duf = falloc(in), *dpf = falloc(np), vf[3], yf[3];
    for (size_t k = 0; k < np; k++) pf[k] = (float)d.p[k];
    for (size_t k = 0; k < in; k++) uf[k] = (float)d.u[k], duf[k] = 0;
    for (size_t k = 0; k < out; k++) vf[k] = (float)d.v[k];
    memset(dpf, 0, np * sizeof *dpf);
    for (int round = 0; round < 2; round++) {
      memset(du, 0, in * sizeof *du), memset(dp, 0, np * sizeof *dp);
      SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
      SC_OK_OR_FAIL(sc_apply_f64(c, d.p, d.u, y, ws));
      SC_OK_OR_FAIL(sc_vjp_f64(c, d.p, d.u, d.v, y, du, dp, ws));
      SC_OK_OR_FAIL(sc_jvp_f64(c, d.p, d.u, d.w, y, jw, ws));
      assert_memory_equal(y, y0, sizeof y);
      assert_memory_equal(jw, jw0, sizeof jw);
      assert_memory_equal(du, du0, in * sizeof *du);
      assert_memory_equal(dp, dp0, np * sizeof *dp);
      if (round == 0) {
        /* the dropout step is still 3: the same mask as the fresh workspace's */
        double l = 0;
        SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, d.p, x, t, B, &l, g, NULL, ws));
        if (l != l0 || memcmp(g, g0, np * sizeof *g))
          fail_msg("isa=%s: sc_valgrad_f64 after one-state calls differs from a fresh workspace "
                   "with the same dropout (seed, step): loss %.17g vs %.17g",
                   isas[is], l, l0);
        memset(g, 0, np * sizeof *g);
        SC_OK_OR_FAIL(sc_pullback_f64(c, d.p, x, dy, B, g, gx, ws));
        assert_memory_equal(g, gp0, np * sizeof *g);
        assert_memory_equal(gx, gx0, B * in * sizeof *gx);
        /* the second round runs with two threads on the workspace */
        sc_status st = sc_workspace_set_threads(ws, 2);
        assert_true(st == SC_OK || st == SC_ERR_UNSUPPORTED);
      }
    }
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    free(g0), free(gp0), free(gx0), free(du0), free(dp0), free(du), free(dp), free(g), free(gx);
    free(pf), free(uf), free(duf), free(dpf);
  }
  free(x), free(t), free(dy);
  od_free(&d);
  unsetenv("SC_ISA");
}

/* ================================================================ bad inputs */
/* the message names the function and `arg` as a whole word */
static void expect_msg(const char *fn, const char *arg) {
  const char *m = sc_last_error();
  if (!strstr(m, fn)) fail_msg("message \"%s\" does not name the function %s", m, fn);
  size_t la = strlen(arg);
  for (const char *s = m; (s = strstr(s, arg)) != NULL; s++) {
    int before = s == m || !(s[-1] == '_' || (s[-1] >= 'a' && s[-1] <= 'z') ||
                             (s[-1] >= 'A' && s[-1] <= 'Z') || (s[-1] >= '0' && s[-1] <= '9'));
    char a = s[la];
    int after =
        !(a == '_' || (a >= 'a' && a <= 'z') || (a >= 'A' && a <= 'Z') || (a >= '0' && a <= '9'));
    if (before && after && s >= m + strlen(fn)) /* after the function-name prefix */
      return;
  }
  fail_msg("message \"%s\" (%s) does not name \"%s\"", m, fn, arg);
}

#define EXPECT_NULL(fn, arg, call)                                                                 \
  do {                                                                                             \
    SC_EXPECT(SC_ERR_NULL, call);                                                                  \
    expect_msg(fn, arg);                                                                           \
  } while (0)

static void test_null_and_foreign_workspace(void **state) {
  (void)state;
  unsetenv("SC_ISA");
  ocase o = node_case();
  sc_chain *c = mk_chain(NULL, &o), *other = mk_chain(NULL, &o);
  sc_workspace *ws = NULL, *wso = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 4));
  SC_OK_OR_FAIL(sc_workspace_create(&wso, other, 4));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  double *p = dalloc(np), *dp = dalloc(np), u[2] = {0.3, -0.2}, v[2] = {1, 2}, w[2] = {0.5, 1};
  double y[2], du[2] = {0, 0}, jw[2];
  float *pf = falloc(np), *dpf = falloc(np), uf[2] = {0.3f, -0.2f}, vf[2] = {1, 2},
        wf[2] = {0.5f, 1}, yf[2], duf[2] = {0, 0}, jwf[2];
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 3));
  SC_OK_OR_FAIL(sc_params_init(c, pf, np, 3));
  memset(dp, 0, np * sizeof *dp);
  memset(dpf, 0, np * sizeof *dpf);

  /* double */
  EXPECT_NULL("sc_apply_f64", "chain", sc_apply_f64(NULL, p, u, y, ws));
  EXPECT_NULL("sc_apply_f64", "p", sc_apply_f64(c, NULL, u, y, ws));
  EXPECT_NULL("sc_apply_f64", "u", sc_apply_f64(c, p, NULL, y, ws));
  EXPECT_NULL("sc_apply_f64", "y", sc_apply_f64(c, p, u, NULL, ws));
  EXPECT_NULL("sc_apply_f64", "ws", sc_apply_f64(c, p, u, y, NULL));
  EXPECT_NULL("sc_vjp_f64", "chain", sc_vjp_f64(NULL, p, u, v, y, du, dp, ws));
  EXPECT_NULL("sc_vjp_f64", "p", sc_vjp_f64(c, NULL, u, v, y, du, dp, ws));
  EXPECT_NULL("sc_vjp_f64", "u", sc_vjp_f64(c, p, NULL, v, y, du, dp, ws));
  EXPECT_NULL("sc_vjp_f64", "v", sc_vjp_f64(c, p, u, NULL, y, du, dp, ws));
  EXPECT_NULL("sc_vjp_f64", "ws", sc_vjp_f64(c, p, u, v, y, du, dp, NULL));
  EXPECT_NULL("sc_jvp_f64", "chain", sc_jvp_f64(NULL, p, u, w, y, jw, ws));
  EXPECT_NULL("sc_jvp_f64", "p", sc_jvp_f64(c, NULL, u, w, y, jw, ws));
  EXPECT_NULL("sc_jvp_f64", "u", sc_jvp_f64(c, p, NULL, w, y, jw, ws));
  EXPECT_NULL("sc_jvp_f64", "w", sc_jvp_f64(c, p, u, NULL, y, jw, ws));
  EXPECT_NULL("sc_jvp_f64", "jw", sc_jvp_f64(c, p, u, w, y, NULL, ws));
  EXPECT_NULL("sc_jvp_f64", "ws", sc_jvp_f64(c, p, u, w, y, jw, NULL));
  /* float */
  EXPECT_NULL("sc_apply", "chain", sc_apply(NULL, pf, uf, yf, ws));
  EXPECT_NULL("sc_apply", "p", sc_apply(c, NULL, uf, yf, ws));
  EXPECT_NULL("sc_apply", "u", sc_apply(c, pf, NULL, yf, ws));
  EXPECT_NULL("sc_apply", "y", sc_apply(c, pf, uf, NULL, ws));
  EXPECT_NULL("sc_apply", "ws", sc_apply(c, pf, uf, yf, NULL));
  EXPECT_NULL("sc_vjp", "chain", sc_vjp(NULL, pf, uf, vf, yf, duf, dpf, ws));
  EXPECT_NULL("sc_vjp", "p", sc_vjp(c, NULL, uf, vf, yf, duf, dpf, ws));
  EXPECT_NULL("sc_vjp", "u", sc_vjp(c, pf, NULL, vf, yf, duf, dpf, ws));
  EXPECT_NULL("sc_vjp", "v", sc_vjp(c, pf, uf, NULL, yf, duf, dpf, ws));
  EXPECT_NULL("sc_vjp", "ws", sc_vjp(c, pf, uf, vf, yf, duf, dpf, NULL));
  EXPECT_NULL("sc_jvp", "chain", sc_jvp(NULL, pf, uf, wf, yf, jwf, ws));
  EXPECT_NULL("sc_jvp", "p", sc_jvp(c, NULL, uf, wf, yf, jwf, ws));
  EXPECT_NULL("sc_jvp", "u", sc_jvp(c, pf, NULL, wf, yf, jwf, ws));
  EXPECT_NULL("sc_jvp", "w", sc_jvp(c, pf, uf, NULL, yf, jwf, ws));
  EXPECT_NULL("sc_jvp", "jw", sc_jvp(c, pf, uf, wf, yf, NULL, ws));
  EXPECT_NULL("sc_jvp", "ws", sc_jvp(c, pf, uf, wf, yf, jwf, NULL));

  /* the optional outputs may be NULL */
  SC_OK_OR_FAIL(sc_vjp_f64(c, p, u, v, NULL, NULL, NULL, ws));
  SC_OK_OR_FAIL(sc_jvp_f64(c, p, u, w, NULL, jw, ws));
  SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, NULL, NULL, NULL, ws));
  SC_OK_OR_FAIL(sc_jvp(c, pf, uf, wf, NULL, jwf, ws));

  /* a workspace of another chain (same layers, another object) */
  SC_EXPECT(SC_ERR_ARG, sc_apply_f64(c, p, u, y, wso));
  SC_EXPECT(SC_ERR_ARG, sc_vjp_f64(c, p, u, v, y, du, dp, wso));
  SC_EXPECT(SC_ERR_ARG, sc_jvp_f64(c, p, u, w, y, jw, wso));
  SC_EXPECT(SC_ERR_ARG, sc_apply(c, pf, uf, yf, wso));
  SC_EXPECT(SC_ERR_ARG, sc_vjp(c, pf, uf, vf, yf, duf, dpf, wso));
  SC_EXPECT(SC_ERR_ARG, sc_jvp(c, pf, uf, wf, yf, jwf, wso));
  assert_non_null(strstr(sc_last_error(), "sc_jvp"));
  /* the other chain's own workspace works with it */
  SC_OK_OR_FAIL(sc_apply_f64(other, p, u, y, wso));
  /* the failed calls left du and dp alone (they fail before computing anything) */
  assert_true(du[0] == 0 && du[1] == 0 && duf[0] == 0 && duf[1] == 0);
  for (size_t k = 0; k < np; k++) assert_true(dp[k] == 0 && dpf[k] == 0);

  sc_workspace_destroy(ws);
  sc_workspace_destroy(wso);
  sc_chain_destroy(c);
  sc_chain_destroy(other);
  free(p), free(dp), free(pf), free(dpf);
}

/* NaN / +Inf / -Inf at every position of u, v, w, every ISA, float and double. */
static void nonfinite_chain(const char *isa, const ocase *o) {
  sc_chain *c = mk_chain(isa, o);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
  size_t in, out, np;
  SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  double *p = dalloc(np), *u = dalloc(in), *v = dalloc(out), *w = dalloc(in);
  double *y = dalloc(out), *du = dalloc(in), *dp = dalloc(np), *jw = dalloc(out);
  float *pf = falloc(np), *uf = falloc(in), *vf = falloc(out), *wf = falloc(in);
  float *yf = falloc(out), *duf = falloc(in), *dpf = falloc(np), *jwf = falloc(out);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 5));
  SC_OK_OR_FAIL(sc_params_init(c, pf, np, 5));
  tu_fill_f64(u, in, 1, 1.0), tu_fill_f64(w, in, 2, 1.0), tu_fill_f64(v, out, 3, 1.0);
  tu_fill_f32(uf, in, 1, 1.0), tu_fill_f32(wf, in, 2, 1.0), tu_fill_f32(vf, out, 3, 1.0);
  memset(du, 0, in * sizeof *du), memset(duf, 0, in * sizeof *duf);
  if (np) memset(dp, 0, np * sizeof *dp), memset(dpf, 0, np * sizeof *dpf);
  const double bad[3] = {NAN, INFINITY, -INFINITY};
  for (int b = 0; b < 3; b++) {
    const char *word = b == 0 ? "NaN" : "Inf";
    /* u */
    for (size_t k = 0; k < in; k++) {
      double s = u[k];
      float sf = uf[k];
      u[k] = bad[b], uf[k] = (float)bad[b];
      SC_EXPECT(SC_ERR_NONFINITE, sc_apply_f64(c, p, u, y, ws));
      expect_msg("sc_apply_f64", "state u");
      assert_non_null(strstr(sc_last_error(), word));
      SC_EXPECT(SC_ERR_NONFINITE, sc_vjp_f64(c, p, u, v, y, du, dp, ws));
      expect_msg("sc_vjp_f64", "state u");
      SC_EXPECT(SC_ERR_NONFINITE, sc_jvp_f64(c, p, u, w, y, jw, ws));
      expect_msg("sc_jvp_f64", "state u");
      SC_EXPECT(SC_ERR_NONFINITE, sc_apply(c, pf, uf, yf, ws));
      expect_msg("sc_apply", "state u");
      assert_non_null(strstr(sc_last_error(), word));
      SC_EXPECT(SC_ERR_NONFINITE, sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
      expect_msg("sc_vjp", "state u");
      SC_EXPECT(SC_ERR_NONFINITE, sc_jvp(c, pf, uf, wf, yf, jwf, ws));
      expect_msg("sc_jvp", "state u");
      u[k] = s, uf[k] = sf;
    }
    /* w */
    for (size_t k = 0; k < in; k++) {
      double s = w[k];
      float sf = wf[k];
      w[k] = bad[b], wf[k] = (float)bad[b];
      SC_EXPECT(SC_ERR_NONFINITE, sc_jvp_f64(c, p, u, w, y, jw, ws));
      expect_msg("sc_jvp_f64", "tangent w");
      assert_non_null(strstr(sc_last_error(), word));
      SC_EXPECT(SC_ERR_NONFINITE, sc_jvp(c, pf, uf, wf, yf, jwf, ws));
      expect_msg("sc_jvp", "tangent w");
      assert_non_null(strstr(sc_last_error(), word));
      w[k] = s, wf[k] = sf;
    }
    /* v */
    for (size_t k = 0; k < out; k++) {
      double s = v[k];
      float sf = vf[k];
      v[k] = bad[b], vf[k] = (float)bad[b];
      SC_EXPECT(SC_ERR_NONFINITE, sc_vjp_f64(c, p, u, v, y, du, dp, ws));
      expect_msg("sc_vjp_f64", "cotangent v");
      assert_non_null(strstr(sc_last_error(), word));
      SC_EXPECT(SC_ERR_NONFINITE, sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
      expect_msg("sc_vjp", "cotangent v");
      assert_non_null(strstr(sc_last_error(), word));
      v[k] = s, vf[k] = sf;
    }
  }
  /* nothing was accumulated by the failed calls; the clean values still work */
  for (size_t k = 0; k < in; k++) assert_true(du[k] == 0 && duf[k] == 0);
  for (size_t k = 0; k < np; k++) assert_true(dp[k] == 0 && dpf[k] == 0);
  SC_OK_OR_FAIL(sc_vjp_f64(c, p, u, v, y, du, dp, ws));
  SC_OK_OR_FAIL(sc_jvp_f64(c, p, u, w, y, jw, ws));
  SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
  SC_OK_OR_FAIL(sc_jvp(c, pf, uf, wf, yf, jwf, ws));
  for (size_t k = 0; k < out; k++)
    assert_true(isfinite(y[k]) && isfinite(jw[k]) && isfinite(yf[k]) && isfinite(jwf[k]));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(u), free(v), free(w), free(y), free(du), free(dp), free(jw);
  free(pf), free(uf), free(vf), free(wf), free(yf), free(duf), free(dpf), free(jwf);
}

static void test_nonfinite(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  ocase wide = oc_new("37 -> dense 19 tanh -> dense 35", 37, 0, 0);
  oc_add(&wide, sc_dense(19, SC_TANH));
  oc_add(&wide, sc_dense(35, SC_IDENTITY));
  ocase cn = convnet_case(0);
  for (int is = 0; is < nisa; is++) {
    nonfinite_chain(isas[is], &wide);
    nonfinite_chain(isas[is], &cn);
  }
  unsetenv("SC_ISA");
}

/* ================================================================ threads */
typedef struct tjob {
  const sc_chain *c;
  const double *p;
  sc_workspace *ws;
  size_t in, out, np;
  uint64_t seed;
  double *ys, *dus, *dp; /* per call: y (out), du (in); dp accumulated over all calls */
  pthread_barrier_t *bar;
  sc_status st;
  char err[256];
} tjob;

static void tjob_run(tjob *J) {
  double u[64], v[8];
  assert_true(J->in <= 64 && J->out <= 8);
  for (size_t k = 0; k < J->np; k++) J->dp[k] = 0;
  J->st = SC_OK;
  for (size_t i = 0; i < THREAD_ITERS; i++) {
    tu_fill_f64(u, J->in, J->seed * 1000003u + i, 1.0);
    tu_fill_f64(v, J->out, J->seed * 7919u + i + 0x777, 1.0);
    double *du = J->dus + i * J->in;
    for (size_t k = 0; k < J->in; k++) du[k] = 0;
    sc_status st = sc_vjp_f64(J->c, J->p, u, v, J->ys + i * J->out, du, J->dp, J->ws);
    if (st != SC_OK) {
      J->st = st;
      snprintf(J->err, sizeof J->err, "%s", sc_last_error());
      return;
    }
  }
}

static void *tjob_thread(void *arg) {
  tjob *J = arg;
  pthread_barrier_wait(J->bar);
  tjob_run(J);
  return NULL;
}

static void threads_on(const char *isa, const ocase *o) {
  sc_chain *c = mk_chain(isa, o);
  size_t in, out, np;
  SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  double *p = dalloc(np);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 9));
  pthread_barrier_t bar;
  assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
  tjob J[2], S[2];
  for (int t = 0; t < 2; t++) {
    memset(&J[t], 0, sizeof J[t]);
    J[t].c = c, J[t].p = p, J[t].in = in, J[t].out = out, J[t].np = np;
    J[t].seed = 1 + (uint64_t)t, J[t].bar = &bar;
    SC_OK_OR_FAIL(sc_workspace_create(&J[t].ws, c, t ? 8 : 1));
    J[t].ys = dalloc(THREAD_ITERS * out), J[t].dus = dalloc(THREAD_ITERS * in),
    J[t].dp = dalloc(np);
    S[t] = J[t];
    S[t].ys = dalloc(THREAD_ITERS * out), S[t].dus = dalloc(THREAD_ITERS * in),
    S[t].dp = dalloc(np);
  }
  pthread_t th[2];
  for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, tjob_thread, &J[t]), 0);
  for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
  pthread_barrier_destroy(&bar);
  for (int t = 0; t < 2; t++)
    if (J[t].st != SC_OK)
      fail_msg("isa=%s [%s] thread %d: sc_vjp_f64 -> %s: %s", isa, o->name, t,
               sc_status_str(J[t].st), J[t].err);
  /* the same calls, one after the other (thread 1's on thread 0's workspace) */
  sc_workspace *wsave = S[1].ws;
  S[1].ws = S[0].ws;
  tjob_run(&S[0]);
  tjob_run(&S[1]);
  S[1].ws = wsave;
  for (int t = 0; t < 2; t++) {
    assert_int_equal(S[t].st, SC_OK);
    if (memcmp(J[t].ys, S[t].ys, THREAD_ITERS * out * sizeof(double)) ||
        memcmp(J[t].dus, S[t].dus, THREAD_ITERS * in * sizeof(double)) ||
        (np && memcmp(J[t].dp, S[t].dp, np * sizeof(double))))
      fail_msg("isa=%s [%s] thread %d: concurrent results differ from sequential ones", isa,
               o->name, t);
    for (size_t k = 0; k < np; k++) assert_true(isfinite(J[t].dp[k]));
  }
  /* the two threads really computed different things */
  assert_true(memcmp(J[0].ys, J[1].ys, out * sizeof(double)) != 0);
  for (int t = 0; t < 2; t++) {
    sc_workspace_destroy(J[t].ws);
    free(J[t].ys), free(J[t].dus), free(J[t].dp), free(S[t].ys), free(S[t].dus), free(S[t].dp);
  }
  free(p);
  sc_chain_destroy(c);
}

static void test_threads(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  ocase node = node_case(), cn = convnet_case(0);
  for (int is = 0; is < nisa; is++) threads_on(isas[is], &node);
  unsetenv("SC_ISA");
  threads_on(NULL, &cn);
}

/* ================================================================ 7. small batches */
/* sc_forward, sc_valgrad, sc_loss_value and sc_pullback at batch <= 4 on a chain of dense,
 * flatten and dropout layers go sample by sample through this path (simplechain.c:
 * SC__SMALL_BATCH); checked against the tile path, forced by a batch of the same samples
 * repeated R = 8 times (8 b > 4): the same mean loss and gradient g, per-sample gx / R (the
 * loss is a mean), outputs y; for the pullback (a sum) g x R. Float and double, every ISA,
 * the three losses, batches 1 to 4. Tolerance: |a - r| <= SB_RTOL max(|r|, SB_FLOOR max|r|),
 * SB_RTOL 1e-4 in float, 1e-11 in double, SB_FLOOR 0.1 (measured worst: printed). A dropout
 * layer of rate > 0 keeps sc_valgrad on the tile path (its masks): the gradient then equals
 * the tile path's (tests/test_grad.c, test_isa.c); test_alloc counts allocations at batch 1. */
#define SB_R 8
static double sb_err(const double *a, const double *r, size_t n) {
  double mx = 0, worst = 0;
  for (size_t k = 0; k < n; k++) mx = fmax(mx, fabs(r[k]));
  for (size_t k = 0; k < n; k++) {
    double den = fmax(fabs(r[k]), 0.1 * mx);
    if (den > 0) worst = fmax(worst, fabs(a[k] - r[k]) / den);
  }
  return worst;
}
static void test_small_batches(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  sc_layer L[] = {sc_dense(19, SC_TANH), sc_dropout(0.0), sc_dense(11, SC_GELU),
                  sc_dense_nobias(7, SC_RELU), sc_dense(5, SC_IDENTITY)};
  const size_t I = 6, O = 5, NL = 5, BIG = 4 * SB_R;
  double worst32 = 0, worst64 = 0;
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_chain *c = NULL;
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, I, L, NL));
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, BIG));
    size_t np = 0;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    double *pd = malloc(np * sizeof *pd), *xd = malloc(4 * I * sizeof *xd);
    double *td = malloc(4 * O * sizeof *td), *dyd = malloc(4 * O * sizeof *dyd);
    double *a = malloc((np + BIG * (I + O)) * sizeof *a),
           *r = malloc((np + BIG * (I + O)) * sizeof *r);
    float *pf = malloc(np * sizeof *pf);
    double *gd = malloc(np * sizeof *gd), *gxd = malloc(BIG * I * sizeof *gxd),
           *yd = malloc(BIG * O * sizeof *yd);
    float *gf = malloc(np * sizeof *gf), *gxf = malloc(BIG * I * sizeof *gxf),
          *yf = malloc(BIG * O * sizeof *yf);
    int32_t lab[4 * SB_R];
    assert_non_null(pd), assert_non_null(xd), assert_non_null(td), assert_non_null(dyd);
    assert_non_null(a), assert_non_null(r), assert_non_null(pf);
    assert_non_null(gd), assert_non_null(gxd);
    assert_non_null(yd), assert_non_null(gf), assert_non_null(gxf), assert_non_null(yf);
    SC_OK_OR_FAIL(sc_params_init_f64(c, pd, np, 7));
    for (size_t k = 0; k < np; k++) pf[k] = (float)pd[k];
    uint64_t rng = 11;
    for (size_t b = 0; b < 4; b++) { /* the 4 samples the batches are made of */
      for (size_t i = 0; i < I; i++) xd[b * I + i] = tu_unif(&rng);
      for (size_t o = 0; o < O; o++) td[b * O + o] = tu_unif(&rng);
      for (size_t o = 0; o < O; o++) dyd[b * O + o] = tu_unif(&rng);
      lab[b] = (int32_t)(b * 3 % O);
    }
    for (size_t B = 1; B <= 4; B++) {
      /* the big batch: the B samples repeated SB_R times (sample k is sample k % B); the
       * small one is its first B samples */
      double xs[4 * SB_R * 6], ts[4 * SB_R * 5], dys[4 * SB_R * 5];
      float xsf[4 * SB_R * 6], tsf[4 * SB_R * 5], dysf[4 * SB_R * 5];
      int32_t labs[4 * SB_R];
      for (size_t k = 0; k < B * SB_R; k++) {
        for (size_t i = 0; i < I; i++)
          xsf[k * I + i] = (float)(xs[k * I + i] = xd[(k % B) * I + i]);
        for (size_t o = 0; o < O; o++)
          tsf[k * O + o] = (float)(ts[k * O + o] = td[(k % B) * O + o]);
        for (size_t o = 0; o < O; o++)
          dysf[k * O + o] = (float)(dys[k * O + o] = dyd[(k % B) * O + o]);
        labs[k] = lab[k % B];
      }
      for (int dbl = 0; dbl < 2; dbl++) {
        double *worst = dbl ? &worst64 : &worst32, tol = dbl ? 1e-11 : 1e-4;
        char ctx[128];
        /* forward */
        if (dbl) {
          SC_OK_OR_FAIL(sc_forward_f64(c, pd, xs, B * SB_R, yd, ws));
          for (size_t k = 0; k < B * O; k++) r[k] = yd[k];
          SC_OK_OR_FAIL(sc_forward_f64(c, pd, xs, B, yd, ws));
          for (size_t k = 0; k < B * O; k++) a[k] = yd[k];
        } else {
          SC_OK_OR_FAIL(sc_forward(c, pf, xsf, B * SB_R, yf, ws));
          for (size_t k = 0; k < B * O; k++) r[k] = yf[k];
          SC_OK_OR_FAIL(sc_forward(c, pf, xsf, B, yf, ws));
          for (size_t k = 0; k < B * O; k++) a[k] = yf[k];
        }
        double e = sb_err(a, r, B * O);
        snprintf(ctx, sizeof ctx, "isa=%s %s forward batch %zu", isas[is], dbl ? "f64" : "f32", B);
        if (!(e <= tol)) fail_msg("%s: relative error %g > %g", ctx, e, tol);
        *worst = fmax(*worst, e);
        /* valgrad and loss_value, each loss */
        for (int lo = 1; lo <= 3; lo++) {
          sc_loss loss = (sc_loss)lo;
          const void *tgt_big = loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)labs
                                : dbl                              ? (const void *)ts
                                                                   : (const void *)tsf;
          size_t n = 0;
          for (int big = 1; big >= 0; big--) {
            double *dst = big ? r : a;
            size_t Bn = big ? B * SB_R : B;
            n = 0;
            if (dbl) {
              double lv = 0, lv2 = 0;
              SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, pd, xs, tgt_big, Bn, &lv, gd, gxd, ws));
              SC_OK_OR_FAIL(sc_loss_value_f64(c, loss, pd, xs, tgt_big, Bn, &lv2, ws));
              dst[n++] = lv, dst[n++] = lv2;
              for (size_t k = 0; k < np; k++) dst[n++] = gd[k];
              for (size_t k = 0; k < B * I; k++) dst[n++] = gxd[k] * (big ? SB_R : 1);
            } else {
              float lv = 0, lv2 = 0;
              SC_OK_OR_FAIL(sc_valgrad(c, loss, pf, xsf, tgt_big, Bn, &lv, gf, gxf, ws));
              SC_OK_OR_FAIL(sc_loss_value(c, loss, pf, xsf, tgt_big, Bn, &lv2, ws));
              dst[n++] = lv, dst[n++] = lv2;
              for (size_t k = 0; k < np; k++) dst[n++] = gf[k];
              for (size_t k = 0; k < B * I; k++) dst[n++] = (double)gxf[k] * (big ? SB_R : 1);
            }
          }
          e = sb_err(a, r, n);
          snprintf(ctx, sizeof ctx, "isa=%s %s valgrad loss %d batch %zu", isas[is],
                   dbl ? "f64" : "f32", lo, B);
          if (!(e <= tol)) fail_msg("%s: relative error %g > %g", ctx, e, tol);
          *worst = fmax(*worst, e);
        }
        /* pullback: g accumulates (from 0.5) and is a sum over the samples */
        size_t n = 0;
        for (int big = 1; big >= 0; big--) {
          double *dst = big ? r : a;
          size_t Bn = big ? B * SB_R : B;
          double f = big ? 1.0 / SB_R : 1.0;
          n = 0;
          if (dbl) {
            for (size_t k = 0; k < np; k++) gd[k] = 0.5;
            SC_OK_OR_FAIL(sc_pullback_f64(c, pd, xs, dys, Bn, gd, gxd, ws));
            for (size_t k = 0; k < np; k++) dst[n++] = (gd[k] - 0.5) * f;
            for (size_t k = 0; k < B * I; k++) dst[n++] = gxd[k];
          } else {
            for (size_t k = 0; k < np; k++) gf[k] = 0.5f;
            SC_OK_OR_FAIL(sc_pullback(c, pf, xsf, dysf, Bn, gf, gxf, ws));
            for (size_t k = 0; k < np; k++) dst[n++] = ((double)gf[k] - 0.5) * f;
            for (size_t k = 0; k < B * I; k++) dst[n++] = gxf[k];
          }
        }
        e = sb_err(a, r, n);
        snprintf(ctx, sizeof ctx, "isa=%s %s pullback batch %zu", isas[is], dbl ? "f64" : "f32", B);
        if (!(e <= tol * (dbl ? 1 : 10))) fail_msg("%s: relative error %g", ctx, e);
        *worst = fmax(*worst, e);
      }
    }
    free(pd), free(xd), free(td), free(dyd), free(a), free(r), free(pf);
    free(gd), free(gxd), free(yd), free(gf), free(gxf), free(yf);
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
  }
  unsetenv("SC_ISA");
  print_message(
      "  small batches: %d ISA(s), batches 1-4: worst relative error f32 %.3g (tol 1e-4), "
      "f64 %.3g (tol 1e-11)\n",
      nisa, worst32, worst64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense),
      cmocka_unit_test(test_conv),
      cmocka_unit_test(test_pool_flatten_dropout),
      cmocka_unit_test(test_mixed),
      cmocka_unit_test(test_workspace_independent),
      cmocka_unit_test(test_relu_zero_and_pool_ties),
      cmocka_unit_test(test_interleave_with_batch_path),
      cmocka_unit_test(test_null_and_foreign_workspace),
      cmocka_unit_test(test_nonfinite),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_small_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
