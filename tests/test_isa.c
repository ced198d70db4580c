/* tests/test_isa.c — every ISA kernel path against the portable scalar reference, in
 * float: forward outputs, valgrad loss / g / gx (all three losses) and pullback g / gx;
 * and in double (test_double_paths: the double kernels of the ISA files, vec_f64.h's dW in
 * dot form and lane fold among them), with a double-sized tolerance.
 *
 * Sizes 1, 3, 7, 16, 17, 33, 100 are used as input sizes and layer widths, and as batch
 * sizes (plus 257, which spans 5 slices): none but 16 is a multiple of a vector width
 * or of the 32-sample tile, so the remainder paths of every kernel run.
 *
 * Tolerance. The ISA paths may compute in a different order from the scalar code (FMA
 * contraction, register blocking, vectorized activations), so agreement is not bitwise.
 * A float dot product of n terms has a rounding error of about n eps sum |terms|, and
 * one ulp of change in a pre-activation moves tanh / sigmoid / gelu by about one ulp.
 * Every value v of a path is compared with the scalar value r of the same array as
 *     |v - r| <= ISA_RTOL * max(|r|, ISA_FLOOR * max_k |r_k|),
 * ISA_RTOL = 1e-4 (~840 float ulps), ISA_FLOOR = 0.1: a relative check, with components
 * that are small next to the rest of the array (gradient entries that cancel) checked
 * against 1e-5 of the array's largest entry instead. The largest difference measured is
 * printed.
 */
#include "testutil.h"

#define ISA_RTOL 1e-4
#define ISA_FLOOR 0.1

#define NACT 7 /* every activation */
static const sc_act ACTS[NACT] = {SC_IDENTITY, SC_RELU, SC_TANH, SC_SIGMOID,
                                  SC_SOFTPLUS, SC_GELU, SC_SILU};
static const size_t SIZES[7] = {1, 3, 7, 16, 17, 33, 100};

typedef struct netdef {
  size_t in, nl;
  sc_layer L[3];
} netdef;

/* a net of nl layers on in inputs, its layers to be filled in */
static netdef net_of(size_t in, size_t nl) {
  netdef n;
  memset(&n, 0, sizeof n);
  n.in = in;
  n.nl = nl;
  return n;
}

/* everything one path computes for a net, a batch and a loss */
typedef struct results {
  float *y, *g, *gx, *pg, *pgx, loss;
  size_t ny, np, nx;
} results;

static void results_free(results *r) {
  free(r->y), free(r->g), free(r->gx), free(r->pg), free(r->pgx);
  memset(r, 0, sizeof *r);
}

static sc_chain *mk_chain(const char *isa, const netdef *n) {
  if (isa)
    setenv("SC_ISA", isa, 1);
  else
    unsetenv("SC_ISA");
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, n->in, n->L, n->nl));
  if (isa) assert_string_equal(sc_chain_isa(c), isa);
  return c;
}

static void run_path(const char *isa, const netdef *n, sc_loss loss, size_t batch, uint64_t seed,
                     results *r) {
  sc_chain *c = mk_chain(isa, n);
  size_t np = 0, out = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  r->np = np;
  r->ny = batch * out;
  r->nx = batch * n->in;
  float *p = malloc(np * sizeof *p), *x = malloc(r->nx * sizeof *x);
  float *t = malloc(r->ny * sizeof *t), *dy = malloc(r->ny * sizeof *dy);
  int32_t *lab = malloc(batch * sizeof *lab);
  r->y = malloc(r->ny * sizeof *r->y);
  r->g = malloc(np * sizeof *r->g);
  r->pg = malloc(np * sizeof *r->pg);
  r->gx = malloc(r->nx * sizeof *r->gx);
  r->pgx = malloc(r->nx * sizeof *r->pgx);
  assert_true(p && x && t && dy && lab && r->y && r->g && r->pg && r->gx && r->pgx);

  SC_OK_OR_FAIL(sc_params_init(c, p, np, seed));
  /* non-zero biases, so that the bias paths matter */
  for (size_t l = 0; l < n->nl; l++) {
    sc_layer_info li;
    SC_OK_OR_FAIL(sc_chain_layer_info(c, l, &li));
    if (li.layer.bias)
      tu_fill_f32(p + li.param_offset + li.inputs * li.outputs, li.outputs, seed + l, 0.5);
  }
  tu_fill_f32(x, r->nx, seed + 11, 2.0);
  tu_fill_f32(t, r->ny, seed + 12, 1.0);
  tu_fill_f32(dy, r->ny, seed + 13, 1.0);
  for (size_t b = 0; b < batch; b++) lab[b] = (int32_t)((b * 5 + seed) % (out < 2 ? 2 : out));
  const void *target = loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)lab : (const void *)t;

  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));
  SC_OK_OR_FAIL(sc_forward(c, p, x, batch, r->y, ws));
  for (size_t k = 0; k < np; k++) r->g[k] = 99.0f; /* overwritten */
  for (size_t k = 0; k < r->nx; k++) r->gx[k] = 99.0f;
  SC_OK_OR_FAIL(sc_valgrad(c, loss, p, x, target, batch, &r->loss, r->g, r->gx, ws));
  float lv = 0;
  SC_OK_OR_FAIL(sc_loss_value(c, loss, p, x, target, batch, &lv, ws));
  if (!(fabsf(lv - r->loss) <= 1e-6f * fmaxf(1, fabsf(lv))))
    fail_msg("isa=%s: sc_loss_value %.9g but sc_valgrad loss %.9g", isa, lv, r->loss);
  tu_fill_f32(r->pg, np, seed + 14, 1.0); /* pullback accumulates into g */
  for (size_t k = 0; k < r->nx; k++) r->pgx[k] = -99.0f;
  SC_OK_OR_FAIL(sc_pullback(c, p, x, dy, batch, r->pg, r->pgx, ws));

  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(x), free(t), free(dy), free(lab);
}

typedef struct diffstats {
  double worst; /* largest |v - r| / max(|r|, floor) */
  size_t compared;
} diffstats;

static void compare(const char *what, const char *ctx, const float *v, const float *r, size_t n,
                    diffstats *ds) {
  double scale = 0;
  for (size_t k = 0; k < n; k++) scale = fmax(scale, fabs((double)r[k]));
  for (size_t k = 0; k < n; k++) {
    assert_true(isfinite(r[k]));
    double den = fmax(fabs((double)r[k]), ISA_FLOOR * scale);
    double d = fabs((double)v[k] - (double)r[k]);
    double rel = den > 0 ? d / den : d;
    if (!(rel <= ISA_RTOL))
      fail_msg("%s: %s[%zu] = %.9g, scalar reference %.9g (relative difference %.3g > %g)", ctx,
               what, k, (double)v[k], (double)r[k], rel, ISA_RTOL);
    if (rel > ds->worst) ds->worst = rel;
    ds->compared++;
  }
}

static void compare_all_isas(const netdef *n, sc_loss loss, size_t batch, uint64_t seed,
                             diffstats *ds) {
  const char *isas[3];
  int nisa = tu_isas(isas);
  assert_true(nisa >= 1);
  assert_string_equal(isas[0], "scalar");
  results ref;
  run_path("scalar", n, loss, batch, seed, &ref);
  for (int i = 0; i < nisa; i++) {
    results got;
    run_path(isas[i], n, loss, batch, seed, &got);
    char ctx[200];
    int k = snprintf(ctx, sizeof ctx, "isa=%s loss=%d batch=%zu net=%zu", isas[i], (int)loss, batch,
                     n->in);
    for (size_t l = 0; l < n->nl && k > 0 && (size_t)k < sizeof ctx; l++)
      k += snprintf(ctx + k, sizeof ctx - (size_t)k, "->%zu %s%s", n->L[l].outputs,
                    sc_act_name(n->L[l].act), n->L[l].bias ? "" : "(nobias)");
    compare("forward y", ctx, got.y, ref.y, ref.ny, ds);
    compare("valgrad loss", ctx, &got.loss, &ref.loss, 1, ds);
    compare("valgrad g", ctx, got.g, ref.g, ref.np, ds);
    compare("valgrad gx", ctx, got.gx, ref.gx, ref.nx, ds);
    compare("pullback g", ctx, got.pg, ref.pg, ref.np, ds);
    compare("pullback gx", ctx, got.pgx, ref.pgx, ref.nx, ds);
    results_free(&got);
  }
  results_free(&ref);
}

/* input size x first-layer width, over all 7 x 7 combinations; batch, activations and
 * loss rotate through their lists */
static void test_sizes_grid(void **state) {
  (void)state;
  diffstats ds = {0, 0};
  for (size_t i = 0; i < 7; i++)
    for (size_t j = 0; j < 7; j++) {
      netdef n = net_of(SIZES[i], 3);
      size_t out = SIZES[(i + j + 1) % 7];
      n.L[0] = sc_dense(SIZES[j], ACTS[(i + j) % NACT]);
      n.L[1] = (i + j) % 2 ? sc_dense_nobias(SIZES[(2 * i + j) % 7], ACTS[(i + 2 * j + 1) % NACT])
                           : sc_dense(SIZES[(2 * i + j) % 7], ACTS[(i + 2 * j + 1) % NACT]);
      sc_loss loss = (sc_loss)(SC_LOSS_SQUARED + (int)((i + 2 * j) % 3));
      if (loss == SC_LOSS_LOGIT_CROSSENTROPY && out < 2) out = 3;
      n.L[2] = loss == SC_LOSS_LOGIT_CROSSENTROPY ? sc_dense(out, SC_IDENTITY)
                                                  : sc_dense(out, ACTS[(i + 3 * j + 2) % NACT]);
      compare_all_isas(&n, loss, SIZES[(3 * i + j) % 7], 100 * i + j + 1, &ds);
    }
  print_message(
      "  sizes grid: %zu values compared, worst relative difference %.3g (tolerance %g)\n",
      ds.compared, ds.worst, ISA_RTOL);
  unsetenv("SC_ISA");
}

/* every activation at every batch size, on a 17 -> 33 act -> 16 act -> 3 chain, with
 * each loss; plus a 100-wide chain */
static void test_acts_batches(void **state) {
  (void)state;
  static const size_t BATCHES[8] = {1, 3, 7, 16, 17, 33, 100, 257};
  diffstats ds = {0, 0};
  for (size_t a = 0; a < NACT; a++)
    for (size_t b = 0; b < 8; b++) {
      netdef n = net_of(17, 3);
      n.L[0] = sc_dense(33, ACTS[a]);
      n.L[1] = b % 2 ? sc_dense(16, ACTS[a]) : sc_dense_nobias(16, ACTS[a]);
      sc_loss loss = (sc_loss)(SC_LOSS_SQUARED + (int)((a + b) % 3));
      n.L[2] = sc_dense(3, loss == SC_LOSS_LOGIT_CROSSENTROPY ? SC_IDENTITY : ACTS[a]);
      compare_all_isas(&n, loss, BATCHES[b], 7000 + 10 * a + b, &ds);
    }
  for (size_t a = 0; a < NACT; a++) {
    netdef n = net_of(100, 2);
    n.L[0] = sc_dense(100, ACTS[a]);
    n.L[1] = sc_dense(7, SC_IDENTITY);
    compare_all_isas(&n, SC_LOSS_LOGIT_CROSSENTROPY, 100, 8000 + a, &ds);
  }
  print_message("  activations x batches: %zu values compared, worst relative difference %.3g\n",
                ds.compared, ds.worst);
  unsetenv("SC_ISA");
}

/* libxsmm (builds with SC_HAVE_XSMM, AVX-512 path): dense layers with >= 64 inputs get
 * libxsmm's forward GEMM (the summary marks them "xsmm"), the others keep ours; both
 * agree with the scalar reference and with SC_XSMM=0 (our kernel on every layer) */
static void test_xsmm_layers(void **state) {
  (void)state;
  netdef n = net_of(100, 3);
  n.L[0] = sc_dense(64, SC_GELU);        /* 100 inputs: libxsmm (gelu also keeps z) */
  n.L[1] = sc_dense_nobias(70, SC_TANH); /* 64 inputs, the threshold: libxsmm */
  n.L[2] = sc_dense(5, SC_IDENTITY);     /* 70 inputs: libxsmm */
  netdef m = n;
  m.in = 63; /* 63 inputs: ours */
  const char *isas[3];
  int nisa = tu_isas(isas);
  if (strcmp(isas[nisa - 1], "avx512") != 0) {
    print_message("  no AVX-512 path on this CPU: libxsmm is not used\n");
    return;
  }
  char buf[2048];
  sc_chain *c = mk_chain("avx512", &n), *c2 = mk_chain("avx512", &m);
  SC_OK_OR_FAIL(sc_chain_summary(c, buf, sizeof buf, NULL));
  char buf2[2048];
  SC_OK_OR_FAIL(sc_chain_summary(c2, buf2, sizeof buf2, NULL));
  sc_chain_destroy(c), sc_chain_destroy(c2);
  if (!strstr(buf, "xsmm")) {
    print_message("  this build has no libxsmm (make adds it when libxsmm-dev is installed)\n");
    assert_null(strstr(buf2, "xsmm"));
    unsetenv("SC_ISA");
    return;
  }
  /* three marked layers in the first chain; in the second, the 63-input layer is not */
  int marks = 0;
  for (const char *q = buf; (q = strstr(q, "xsmm")) != NULL; q++) marks++;
  assert_int_equal(marks, 3);
  marks = 0;
  for (const char *q = buf2; (q = strstr(q, "xsmm")) != NULL; q++) marks++;
  assert_int_equal(marks, 2);
  setenv("SC_XSMM", "0", 1);
  c = mk_chain("avx512", &n);
  SC_OK_OR_FAIL(sc_chain_summary(c, buf, sizeof buf, NULL));
  sc_chain_destroy(c);
  assert_null(strstr(buf, "xsmm"));
  diffstats ds = {0, 0};
  static const size_t BATCHES[3] = {1, 33, 257};
  for (int b = 0; b < 3; b++)
    for (int loss = 0; loss < 3; loss++) {
      results own, x;
      sc_loss L = (sc_loss)(SC_LOSS_SQUARED + loss);
      setenv("SC_XSMM", "0", 1);
      run_path("avx512", &n, L, BATCHES[b], 9000 + (uint64_t)b, &own);
      unsetenv("SC_XSMM");
      run_path("avx512", &n, L, BATCHES[b], 9000 + (uint64_t)b, &x);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "libxsmm vs ours, batch %zu loss %d", BATCHES[b], loss);
      compare("forward y", ctx, x.y, own.y, own.ny, &ds);
      compare("valgrad g", ctx, x.g, own.g, own.np, &ds);
      compare("valgrad gx", ctx, x.gx, own.gx, own.nx, &ds);
      compare("pullback g", ctx, x.pg, own.pg, own.np, &ds);
      results_free(&own), results_free(&x);
      compare_all_isas(&n, L, BATCHES[b], 9100 + (uint64_t)b, &ds); /* and the reference */
    }
  print_message("  libxsmm layers: %zu values compared, worst relative difference %.3g\n",
                ds.compared, ds.worst);
  unsetenv("SC_ISA");
}

/* 2 and 4 columns (inputs, targets, cotangents) of whole 32-sample tiles of
 * consecutive rows take the gather's permute (AVX-512) or in-lane transpose (AVX2) path (the
 * toy's 4 -> ... -> 4): batches of whole tiles and with a partial last tile */
static void test_few_columns(void **state) {
  (void)state;
  static const size_t INS[3] = {2, 4, 3}, OUTS[2] = {2, 4}, BATCHES[4] = {32, 64, 100, 7};
  diffstats ds = {0, 0};
  for (size_t i = 0; i < 3; i++)
    for (size_t o = 0; o < 2; o++)
      for (size_t b = 0; b < 4; b++) {
        netdef n = net_of(INS[i], 2);
        n.L[0] = sc_dense(9, SC_TANH);
        n.L[1] = sc_dense(OUTS[o], SC_IDENTITY);
        compare_all_isas(&n, SC_LOSS_SQUARED, BATCHES[b], 9000 + 10 * i + 3 * o + b, &ds);
      }
  print_message("  2 and 4 columns: %zu values compared, worst relative difference %.3g\n",
                ds.compared, ds.worst);
  unsetenv("SC_ISA");
}

/* the input gather (sample rows -> feature-major tiles) moves data only: through a dense
 * layer with identity weights and no bias, y = 1 x + 0 x ... = x exactly, on every path, for
 * every width (the AVX2 and AVX-512 gathers load 8 or 16 columns at a time, masked at the
 * tail) and batch (partial tiles) */
static void test_gather_exact(void **state) {
  (void)state;
  const char *isas[3];
  int ni = tu_isas(isas);
  for (int k = 0; k < ni; k++) {
    setenv("SC_ISA", isas[k], 1);
    for (size_t in = 1; in <= 41; in++) {
      sc_layer L = sc_dense_nobias(in, SC_IDENTITY);
      sc_chain *c = NULL;
      SC_OK_OR_FAIL(sc_chain_create(&c, in, &L, 1));
      float *p = calloc(in * in, sizeof *p);
      for (size_t i = 0; i < in; i++) p[i * in + i] = 1;
      const size_t B = 70;
      float *x = malloc(B * in * sizeof *x), *y = malloc(B * in * sizeof *y);
      tu_fill_f32(x, B * in, 77 + in, 3.0);
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      for (size_t b = 1; b <= B; b += 3) {
        SC_OK_OR_FAIL(sc_forward(c, p, x, b, y, ws));
        if (memcmp(x, y, b * in * sizeof *x) != 0)
          fail_msg("%s: %zu inputs, batch %zu: the identity layer changed its input", isas[k], in,
                   b);
      }
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
      free(p), free(x), free(y);
    }
  }
  unsetenv("SC_ISA");
}

/* sc_train's minibatches gather their rows through the shuffled order (idx): on AVX-512 8
 * columns of 16 rows at a time from row pointers, 4 at a time, and the tails; the padding rows of
 * a partial tile read row 0 and are cleared. A few SGD steps on every path must end where the
 * scalar reference's do up to rounding (a row or column out of place moves the parameters by
 * about lr x the gradient, 1e-2 here; rounding by about 1e-6) */
static void test_train_gather(void **state) {
  (void)state;
  const char *isas[3];
  int ni = tu_isas(isas);
  static const size_t INS[] = {5, 8, 12, 16, 21, 24, 41};
  const size_t n = 97; /* batches of 40: 40, 40, 17 (the last one a partial tile) */
  double worst = 0;
  for (size_t ii = 0; ii < sizeof INS / sizeof *INS; ii++) {
    size_t in = INS[ii], np = 0;
    sc_layer L[2] = {sc_dense(5, SC_TANH), sc_dense(2, SC_IDENTITY)};
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, in, L, 2));
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float *x = malloc(n * in * sizeof *x), *t = malloc(n * 2 * sizeof *t);
    float *p0 = malloc(np * sizeof *p0), *ref = malloc(np * sizeof *ref),
          *p = malloc(np * sizeof *p);
    assert_true(x && t && p0 && ref && p);
    tu_fill_f32(x, n * in, 500 + in, 1.0);
    tu_fill_f32(t, n * 2, 600 + in, 1.0);
    SC_OK_OR_FAIL(sc_params_init(c, p0, np, 7));
    sc_data d = {x, t, n};
    for (int k = -1; k < ni; k++) { /* -1: the scalar reference */
      setenv("SC_ISA", k < 0 ? "scalar" : isas[k], 1);
      sc_chain *ck = NULL; /* (the kernel set is chosen when the chain is made) */
      SC_OK_OR_FAIL(sc_chain_create(&ck, in, L, 2));
      sc_train_opts o = sc_train_defaults();
      o.optim = sc_sgd(0.1, 0);
      o.epochs = 2;
      o.batch_size = 40;
      o.seed = 3;
      float *q = k < 0 ? ref : p;
      memcpy(q, p0, np * sizeof *q);
      SC_OK_OR_FAIL(sc_train(ck, SC_LOSS_SQUARED, q, &d, &o, NULL));
      sc_chain_destroy(ck);
      if (k < 0) continue;
      for (size_t j = 0; j < np; j++) {
        double e = fabs((double)p[j] - (double)ref[j]);
        if (e > worst) worst = e;
        if (!(e <= 1e-4))
          fail_msg("%s: %zu inputs: parameter %zu is %.9g after training, the scalar path's %.9g",
                   isas[k], in, j, (double)p[j], (double)ref[j]);
      }
    }
    sc_chain_destroy(c);
    free(x), free(t), free(p0), free(ref), free(p);
  }
  print_message("  sc_train's shuffled gathers: worst parameter difference %.3g\n", worst);
  unsetenv("SC_ISA");
}

/* sc_valgrad (without gx) and sc_loss_value check x for NaN and Inf in the tiles' gathers, not
 * up front: every gather path (16 consecutive rows by 8 columns, the 4-column and masked tails,
 * the 2- and 4-column tiles, partial tiles, later slices; float and double) must find one
 * anywhere, name its sample and element as the up-front check does, and write nothing */
static void test_gather_nonfinite(void **state) {
  (void)state;
  const char *isas[3];
  int ni = tu_isas(isas);
  const size_t ins[] = {1, 2, 4, 5, 8, 12, 13, 24, 31, 41};
  const size_t batches[] = {32, 70, 200};
  const float vals[] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < ni; k++) {
    setenv("SC_ISA", isas[k], 1);
    for (size_t ii = 0; ii < sizeof ins / sizeof *ins; ii++) {
      size_t in = ins[ii];
      sc_layer L = sc_dense(2, SC_TANH);
      sc_chain *c = NULL;
      SC_OK_OR_FAIL(sc_chain_create(&c, in, &L, 1));
      size_t np;
      sc_chain_nparams(c, &np);
      const size_t B = 200;
      float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
      float *x = malloc(B * in * sizeof *x), *t = malloc(B * 2 * sizeof *t);
      double *pd = malloc(np * sizeof *pd), *gd = malloc(np * sizeof *gd);
      double *xd = malloc(B * in * sizeof *xd), *td = malloc(B * 2 * sizeof *td);
      tu_fill_f32(p, np, 5 + in, 0.5);
      tu_fill_f32(x, B * in, 77 + in, 3.0);
      tu_fill_f32(t, B * 2, 99 + in, 1.0);
      for (size_t i = 0; i < np; i++) pd[i] = p[i];
      for (size_t i = 0; i < B * in; i++) xd[i] = x[i];
      for (size_t i = 0; i < B * 2; i++) td[i] = t[i];
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      for (size_t bi = 0; bi < sizeof batches / sizeof *batches; bi++) {
        size_t b = batches[bi];
        const size_t samples[] = {0, 7, 15, 16, 31, 32, 47, b / 2, b - 1};
        const size_t elems[] = {0, in / 2, in & ~(size_t)7, in & ~(size_t)3, in - 1};
        for (size_t si = 0; si < sizeof samples / sizeof *samples; si++)
          for (size_t ei = 0; ei < sizeof elems / sizeof *elems; ei++) {
            size_t sm = samples[si], el = elems[ei];
            if (sm >= b || el >= in) continue;
            float v = vals[(si + ei) % 3];
            x[sm * in + el] = v;
            xd[sm * in + el] = v;
            char want[96];
            snprintf(want, sizeof want, "sample %zu, element %zu is %s", sm, el,
                     isnan(v) ? "NaN" : "Inf");
            for (size_t i = 0; i < np; i++) g[i] = gd[i] = 7;
            float l = 7;
            double ldd = 7;
            sc_status st = sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, b, &l, g, NULL, ws);
            if (st != SC_ERR_NONFINITE || !strstr(sc_last_error(), want))
              fail_msg("%s: in %zu, batch %zu, x[%zu][%zu] = %g: sc_valgrad gave %d (%s)", isas[k],
                       in, b, sm, el, (double)v, (int)st, sc_last_error());
            for (size_t i = 0; i < np; i++)
              if (g[i] != 7) fail_msg("%s: in %zu, batch %zu: g written", isas[k], in, b);
            assert_true(l == 7);
            st = sc_loss_value(c, SC_LOSS_SQUARED, p, x, t, b, &l, ws);
            if (st != SC_ERR_NONFINITE || !strstr(sc_last_error(), want) || l != 7)
              fail_msg("%s: in %zu, batch %zu, x[%zu][%zu]: sc_loss_value gave %d (%s)", isas[k],
                       in, b, sm, el, (int)st, sc_last_error());
            st = sc_valgrad_f64(c, SC_LOSS_SQUARED, pd, xd, td, b, &ldd, gd, NULL, ws);
            if (st != SC_ERR_NONFINITE || !strstr(sc_last_error(), want) || ldd != 7)
              fail_msg("%s: in %zu, batch %zu, x[%zu][%zu]: sc_valgrad_f64 gave %d (%s)", isas[k],
                       in, b, sm, el, (int)st, sc_last_error());
            for (size_t i = 0; i < np; i++)
              if (gd[i] != 7) fail_msg("%s: in %zu, batch %zu: gd written", isas[k], in, b);
            x[sm * in + el] = 0.5f;
            xd[sm * in + el] = 0.5;
          }
        /* finite again: the calls succeed (nothing stays flagged) */
        float l = 0;
        SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, b, &l, g, NULL, ws));
        assert_true(isfinite(l));
      }
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
      free(p), free(g), free(x), free(t), free(pd), free(gd), free(xd), free(td);
    }
  }
  unsetenv("SC_ISA");
}

/* the chain reports the kernel set it uses; with SC_ISA unset it picks the widest this
 * CPU supports */
static void test_isa_names(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  netdef n = net_of(4, 1);
  n.L[0] = sc_dense(3, SC_TANH);
  for (int i = 0; i < nisa; i++) {
    sc_chain *c = mk_chain(isas[i], &n);
    assert_string_equal(sc_chain_isa(c), isas[i]);
    sc_chain_destroy(c);
  }
  sc_chain *c = mk_chain(NULL, &n);
  assert_string_equal(sc_chain_isa(c), isas[nisa - 1]);
  sc_chain_destroy(c);
}

static void test_isa_bogus(void **state) {
  (void)state;
  sc_layer l = sc_dense(2, SC_RELU);
  static const char *bad[] = {"bogus", "sse2", "avx1024", "neon", "scalarx"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("SC_ISA", bad[i], 1);
    sc_chain *c = (sc_chain *)(uintptr_t)1; /* must be reset to NULL on failure */
    SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, &l, 1));
    assert_null(c);
    assert_non_null(strstr(sc_last_error(), "SC_ISA"));
  }
  unsetenv("SC_ISA");
}

/* An ISA this CPU (or build) cannot run is SC_ERR_UNSUPPORTED, not a silent fallback.
 * Skipped when every path is available. */
static void test_isa_unavailable(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  static const char *all[2] = {"avx2", "avx512"};
  const char *missing = NULL;
  for (int a = 0; a < 2 && !missing; a++) {
    int have = 0;
    for (int i = 0; i < nisa; i++) have |= strcmp(isas[i], all[a]) == 0;
    if (!have) missing = all[a];
  }
  if (!missing) {
    print_message("  every ISA path is available on this CPU: nothing to test\n");
    skip();
  }
  sc_layer l = sc_dense(2, SC_RELU);
  setenv("SC_ISA", missing, 1);
  sc_chain *c = NULL;
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create(&c, 3, &l, 1));
  assert_null(c);
  unsetenv("SC_ISA");
}

/* Double precision: the _f64 entry points of every path against the scalar one. The ISA
 * files compile the portable double kernels with their flags and take some from simplechain.c's
 * double vector section (the lane fold of the bias gradients, the dW of small dense layers in
 * dot form, a different summation order from the scalar lane form, and the dense forward and
 * dx, the latter with the relu / tanh / sigmoid pullback of the layer below fused in; their
 * multiply-adds round once where the scalar path rounds twice), so the results agree to
 * rounding: |v - r| <= 1e-12 max(|r|, 0.1 max_k |r_k|) (about 4500 double ulps;
 * the largest difference measured is printed). Nets: the BNN's 1 -> 32 relu -> 1, a small
 * three-layer net with every activation (dot-form dW), and a 100 -> 100 layer (10,000
 * weights: the transposed dW form); batches 1, 7, 33, 100, 257; the three losses. */
#define ISA_RTOL64 1e-12
static void compare64(const char *what, const char *ctx, const double *v, const double *r, size_t n,
                      double *worst) {
  double scale = 0;
  for (size_t k = 0; k < n; k++) scale = fmax(scale, fabs(r[k]));
  for (size_t k = 0; k < n; k++) {
    double den = fmax(fabs(r[k]), ISA_FLOOR * scale), d = fabs(v[k] - r[k]);
    double rel = den > 0 ? d / den : d;
    if (!(rel <= ISA_RTOL64))
      fail_msg("%s %s[%zu]: %.17g, scalar %.17g (rel %.3g > %g)", ctx, what, k, v[k], r[k], rel,
               ISA_RTOL64);
    if (rel > *worst) *worst = rel;
  }
}

typedef struct results64 {
  double *y, *g, *gx, *pg, *pgx, loss;
  size_t ny, np, nx;
} results64;

static void run_path64(const char *isa, const netdef *n, sc_loss loss, size_t batch, uint64_t seed,
                       results64 *r) {
  sc_chain *c = mk_chain(isa, n);
  size_t out = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &r->np));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  r->ny = batch * out;
  r->nx = batch * n->in;
  double *p = malloc(r->np * sizeof *p), *x = malloc(r->nx * sizeof *x);
  double *t = malloc(r->ny * sizeof *t), *dy = malloc(r->ny * sizeof *dy);
  int32_t *lab = malloc(batch * sizeof *lab);
  r->y = malloc(r->ny * sizeof *r->y);
  r->g = malloc(r->np * sizeof *r->g);
  r->pg = malloc(r->np * sizeof *r->pg);
  r->gx = malloc(r->nx * sizeof *r->gx);
  r->pgx = malloc(r->nx * sizeof *r->pgx);
  assert_true(p && x && t && dy && lab && r->y && r->g && r->pg && r->gx && r->pgx);
  tu_fill_f64(p, r->np, seed, 0.8);
  tu_fill_f64(x, r->nx, seed + 11, 2.0);
  tu_fill_f64(t, r->ny, seed + 12, 1.0);
  tu_fill_f64(dy, r->ny, seed + 13, 1.0);
  for (size_t b = 0; b < batch; b++) lab[b] = (int32_t)((b * 5 + seed) % (out < 2 ? 2 : out));
  const void *target = loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)lab : (const void *)t;
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, batch));
  SC_OK_OR_FAIL(sc_forward_f64(c, p, x, batch, r->y, ws));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, p, x, target, batch, &r->loss, r->g, r->gx, ws));
  tu_fill_f64(r->pg, r->np, seed + 14, 1.0);
  SC_OK_OR_FAIL(sc_pullback_f64(c, p, x, dy, batch, r->pg, r->pgx, ws));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(x), free(t), free(dy), free(lab);
}

static void results64_free(results64 *r) {
  free(r->y), free(r->g), free(r->gx), free(r->pg), free(r->pgx);
}

static void test_double_paths(void **state) {
  (void)state;
  static const size_t BATCHES[5] = {1, 7, 33, 100, 257};
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst = 0;
  size_t runs = 0;
  for (int net = 0; net < 8; net++) {
    netdef n;
    if (net == 0) {
      n = net_of(1, 2);
      n.L[0] = sc_dense(32, SC_RELU);
      n.L[1] = sc_dense(1, SC_IDENTITY);
    } else if (net == 7) {
      n = net_of(100, 2);
      n.L[0] = sc_dense(100, SC_TANH);
      n.L[1] = sc_dense(3, SC_IDENTITY);
    } else {
      n = net_of(17, 3);
      n.L[0] = sc_dense(33, ACTS[net - 1]);
      n.L[1] = net % 2 ? sc_dense(16, ACTS[net % 6]) : sc_dense_nobias(16, ACTS[net % 6]);
      n.L[2] = sc_dense(3, SC_IDENTITY);
    }
    for (int b = 0; b < 5; b++) {
      sc_loss loss = (sc_loss)(SC_LOSS_SQUARED + (net + b) % (net == 0 ? 2 : 3)); /* 1 output */
      results64 ref;
      run_path64("scalar", &n, loss, BATCHES[b], 500 + 10 * (uint64_t)net + (uint64_t)b, &ref);
      for (int i = 1; i < nisa; i++) {
        results64 got;
        run_path64(isas[i], &n, loss, BATCHES[b], 500 + 10 * (uint64_t)net + (uint64_t)b, &got);
        char ctx[128];
        snprintf(ctx, sizeof ctx, "double isa=%s net=%d batch=%zu loss=%d", isas[i], net,
                 BATCHES[b], (int)loss);
        compare64("forward y", ctx, got.y, ref.y, ref.ny, &worst);
        compare64("valgrad loss", ctx, &got.loss, &ref.loss, 1, &worst);
        compare64("valgrad g", ctx, got.g, ref.g, ref.np, &worst);
        compare64("valgrad gx", ctx, got.gx, ref.gx, ref.nx, &worst);
        compare64("pullback g", ctx, got.pg, ref.pg, ref.np, &worst);
        compare64("pullback gx", ctx, got.pgx, ref.pgx, ref.nx, &worst);
        results64_free(&got);
        runs++;
      }
      results64_free(&ref);
    }
  }
  print_message("  double: %zu path runs compared with scalar, worst relative difference %.3g\n",
                runs, worst);
  unsetenv("SC_ISA");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_grid),       cmocka_unit_test(test_acts_batches),
      cmocka_unit_test(test_isa_names),        cmocka_unit_test(test_isa_bogus),
      cmocka_unit_test(test_isa_unavailable),  cmocka_unit_test(test_xsmm_layers),
      cmocka_unit_test(test_few_columns),      cmocka_unit_test(test_double_paths),
      cmocka_unit_test(test_gather_exact),     cmocka_unit_test(test_train_gather),
      cmocka_unit_test(test_gather_nonfinite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
