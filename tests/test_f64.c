/* tests/test_f64.c — double precision everywhere: sc_optimizer_step_f64,
 * sc_train_f64 and parameter files of element type 2 (sc_params_save_f64 / _load_f64).
 *
 * - the double optimizer step against the documented rules evaluated here in double
 *   (relative 1e-12 per step), one element type per optimizer until reset;
 * - sc_train_f64 equals, bit for bit, the loop it is documented to be (sc_valgrad_f64 then
 *   sc_optimizer_step_f64, minibatch by minibatch), does not depend on the thread count,
 *   resumes from its own checkpoints bitwise (and refuses a float run's), stops on NaN with
 *   the last good p, and lands near the float run;
 * - float64 parameter files round-trip exactly and convert across the two loaders.
 */
#include "testutil.h"

enum { NI = 3, NO = 2, NS = 40 };

static sc_chain *mlp(size_t *np) {
  sc_layer L[] = {sc_dense(8, SC_TANH), sc_dense(6, SC_GELU), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 3));
  SC_OK_OR_FAIL(sc_chain_nparams(c, np));
  return c;
}

static double X[NS * NI], T[NS * NO];
static int32_t LAB[NS];

static void make_data(void) {
  tu_fill_f64(X, NS * NI, 1, 1.0);
  for (int i = 0; i < NS; i++) {
    T[i * NO] = sin(X[i * NI]) * X[i * NI + 1];
    T[i * NO + 1] = X[i * NI + 2] * X[i * NI + 2] - 0.3;
    LAB[i] = (int32_t)(i % NO);
  }
}

/* ------------------------------------------------------------------ optimizer */
static void ref_step(const sc_optim *c, uint64_t t, double *p, const double *g, double *m,
                     double *v, size_t n) {
  for (size_t k = 0; k < n; k++) {
    if (c->kind == SC_SGD) {
      double gp = g[k] + c->weight_decay * p[k];
      m[k] = t == 1 ? gp : c->momentum * m[k] + gp;
      p[k] -= c->lr * m[k];
      continue;
    }
    double gk = g[k], pk = p[k];
    if (c->kind == SC_ADAM)
      gk += c->weight_decay * pk;
    else
      pk -= c->lr * c->weight_decay * pk;
    m[k] = c->beta1 * m[k] + (1 - c->beta1) * gk;
    v[k] = c->beta2 * v[k] + (1 - c->beta2) * gk * gk;
    double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
    p[k] = pk - c->lr * (m[k] / bc1) / (sqrt(v[k] / bc2) + c->eps);
  }
}

static void test_optimizer_step_f64(void **state) {
  (void)state;
  const sc_optim cfgs[] = {sc_adam(1e-2), sc_adamw(3e-2, 0.1), sc_sgd(0.05, 0.9), sc_sgd(0.1, 0),
                           sc_adam(1e-3)};
  enum { N = 57, STEPS = 25 };
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
    sc_optim cfg = cfgs[ci];
    if (ci == 4) cfg.weight_decay = 0.01; /* ADAM's L2 form */
    if (ci == 2) cfg.weight_decay = 0.02;
    double p[N], pr[N], g[N], m[N] = {0}, v[N] = {0};
    tu_fill_f64(p, N, 10 + ci, 2.0);
    memcpy(pr, p, sizeof p);
    sc_optimizer *opt = NULL;
    SC_OK_OR_FAIL(sc_optimizer_create(&opt, &cfg, N));
    for (int t = 1; t <= STEPS; t++) {
      tu_fill_f64(g, N, 100 * ci + (uint64_t)t, pow(10.0, (double)(t % 5) - 2));
      SC_OK_OR_FAIL(sc_optimizer_step_f64(opt, p, g, N));
      ref_step(&cfg, (uint64_t)t, pr, g, m, v, N);
      for (size_t k = 0; k < N; k++)
        if (!(fabs(p[k] - pr[k]) <= 1e-12 * (fabs(pr[k]) + 1e-3)))
          fail_msg("config %zu step %d element %zu: %.17g, reference %.17g", ci, t, k, p[k], pr[k]);
    }
    /* one element type per optimizer: float steps now are refused, until a reset */
    float pf[N], gf[N];
    for (size_t k = 0; k < N; k++) pf[k] = (float)p[k], gf[k] = (float)g[k];
    SC_EXPECT(SC_ERR_ARG, sc_optimizer_step(opt, pf, gf, N));
    assert_non_null(strstr(sc_last_error(), "sc_optimizer_reset"));
    SC_OK_OR_FAIL(sc_optimizer_reset(opt));
    SC_OK_OR_FAIL(sc_optimizer_step(opt, pf, gf, N));
    SC_EXPECT(SC_ERR_ARG, sc_optimizer_step_f64(opt, p, g, N));
    SC_EXPECT(SC_ERR_NULL, sc_optimizer_step_f64(NULL, p, g, N));
    SC_EXPECT(SC_ERR_NULL, sc_optimizer_step_f64(opt, NULL, g, N));
    SC_EXPECT(SC_ERR_NULL, sc_optimizer_step_f64(opt, p, NULL, N));
    SC_OK_OR_FAIL(sc_optimizer_reset(opt));
    SC_EXPECT(SC_ERR_SHAPE, sc_optimizer_step_f64(opt, p, g, N - 1));
    sc_optimizer_destroy(opt);
  }
  /* caller memory: sc_optimizer_bytes has room for the double moments */
  sc_optim cfg = sc_adam(1e-2);
  size_t bytes = 0;
  SC_OK_OR_FAIL(sc_optimizer_bytes(&cfg, 1000, &bytes));
  assert_true(bytes >= 2 * 1000 * sizeof(double));
  void *mem = malloc(bytes);
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_init(&opt, &cfg, 1000, mem, bytes));
  double *p = calloc(1000, sizeof *p), *g = malloc(1000 * sizeof *g);
  tu_fill_f64(g, 1000, 3, 1.0);
  for (int t = 0; t < 3; t++) SC_OK_OR_FAIL(sc_optimizer_step_f64(opt, p, g, 1000));
  for (size_t k = 0; k < 1000; k++) assert_true(isfinite(p[k]) && (g[k] == 0 || p[k] != 0));
  free(p), free(g), free(mem);
}

/* ------------------------------------------------------------------ sc_train_f64 */
static sc_train_opts opts_for(size_t bs, size_t epochs, int shuffle, int threads) {
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(2e-2);
  o.batch_size = bs;
  o.epochs = epochs;
  o.shuffle = shuffle;
  o.threads = threads;
  o.seed = 9;
  return o;
}

/* sc_train_f64 without shuffling is exactly: for each minibatch in order, sc_valgrad_f64 then
 * sc_optimizer_step_f64 */
static void test_train_equals_loop(void **state) {
  (void)state;
  const size_t sizes[] = {0, 16, 7};
  const sc_loss losses[] = {SC_LOSS_SQUARED, SC_LOSS_LOGIT_CROSSENTROPY, SC_LOSS_ABSOLUTE};
  for (size_t li = 0; li < 3; li++)
    for (size_t si = 0; si < 3; si++) {
      size_t np;
      sc_chain *c = mlp(&np);
      double *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q), *g = malloc(np * sizeof *g);
      SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 4));
      memcpy(q, p, np * sizeof *p);
      sc_loss loss = losses[li];
      const void *tgt = loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)LAB : (const void *)T;
      size_t bs = sizes[si] ? sizes[si] : NS;
      sc_train_opts o = opts_for(sizes[si], 6, 0, 1);
      sc_data_f64 d = {X, tgt, NS};
      sc_train_report rep;
      SC_OK_OR_FAIL(sc_train_f64(c, loss, p, &d, &o, &rep));
      size_t spe = (NS + bs - 1) / bs;
      assert_int_equal(rep.steps, 6 * spe);

      sc_workspace *ws = NULL;
      sc_optimizer *opt = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, bs));
      SC_OK_OR_FAIL(sc_optimizer_create(&opt, &o.optim, np));
      double last = 0;
      for (int e = 0; e < 6; e++)
        for (size_t s = 0; s < spe; s++) {
          size_t b0 = s * bs, nb = NS - b0 < bs ? NS - b0 : bs;
          const void *tb = loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)(LAB + b0)
                                                              : (const void *)(T + b0 * NO);
          SC_OK_OR_FAIL(sc_valgrad_f64(c, loss, q, X + b0 * NI, tb, nb, &last, g, NULL, ws));
          SC_OK_OR_FAIL(sc_optimizer_step_f64(opt, q, g, np));
        }
      if (memcmp(p, q, np * sizeof *p) != 0)
        fail_msg("loss %zu batch %zu: sc_train_f64 differs from its loop", li, bs);
      sc_optimizer_destroy(opt);
      sc_workspace_destroy(ws);
      free(p), free(q), free(g);
      sc_chain_destroy(c);
    }
}

typedef struct {
  int calls, stop_at, saw_f64;
} prog;
static int on_progress(const sc_progress *pr, void *user) {
  prog *u = user;
  u->calls++;
  if (pr->p == NULL && pr->p_f64 != NULL && isfinite(pr->p_f64[0])) u->saw_f64++;
  return u->stop_at && (int)pr->step == u->stop_at;
}

static double *train_run(int threads, int shuffle, const char *ck, int stop_at, int resume,
                         sc_status want) {
  size_t np;
  sc_chain *c = mlp(&np);
  double *p = malloc(np * sizeof *p);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 4));
  sc_train_opts o = opts_for(6, 5, shuffle, threads);
  o.clip_norm = 1.0;
  prog u = {0, stop_at, 0};
  o.progress = on_progress;
  o.progress_every = 1;
  o.user = &u;
  o.checkpoint = ck;
  o.checkpoint_every = ck ? 4 : 0;
  o.resume = resume;
  sc_data_f64 d = {X, T, NS};
  sc_status st = sc_train_f64(c, SC_LOSS_SQUARED, p, &d, &o, NULL);
  if (st != want) fail_msg("sc_train_f64 -> %s (%s)", sc_status_str(st), sc_last_error());
  assert_int_equal(u.saw_f64, u.calls);
  sc_chain_destroy(c);
  return p;
}

static void test_train_threads_and_resume(void **state) {
  (void)state;
  size_t np;
  sc_chain *c = mlp(&np);
  double *a = train_run(1, 1, NULL, 0, 0, SC_OK), *b = train_run(2, 1, NULL, 0, 0, SC_OK);
  assert_memory_equal(a, b, np * sizeof *a);
  char ck[512];
  tu_tmp_path(ck, sizeof ck, "f64", "run.sck");
  remove(ck);
  for (int stop = 3; stop <= 31; stop += 7) {
    remove(ck);
    double *s = train_run(1, 1, ck, stop, 0, SC_ERR_STOPPED);
    sc_checkpoint_state info;
    SC_OK_OR_FAIL(sc_checkpoint_info(c, ck, &info));
    assert_int_equal(info.f64, 1);
    assert_int_equal(info.step, (size_t)stop);
    double *r = train_run(2, 1, ck, 0, 1, SC_OK);
    if (memcmp(r, a, np * sizeof *a) != 0) fail_msg("stopped at %d: the resumed run differs", stop);
    free(s), free(r);
  }
  /* a double run's checkpoint does not resume a float run, nor the reverse */
  float pf[200];
  SC_OK_OR_FAIL(sc_params_init(c, pf, np, 4));
  float xf[NS * NI], tf[NS * NO];
  for (int i = 0; i < NS * NI; i++) xf[i] = (float)X[i];
  for (int i = 0; i < NS * NO; i++) tf[i] = (float)T[i];
  sc_data df = {xf, tf, NS};
  sc_train_opts o = opts_for(6, 5, 1, 1);
  o.clip_norm = 1.0;
  o.checkpoint = ck;
  o.resume = 1;
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "sc_train_f64"));
  remove(ck);
  o.resume = 0;
  SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  sc_checkpoint_state info;
  SC_OK_OR_FAIL(sc_checkpoint_info(c, ck, &info));
  assert_int_equal(info.f64, 0);
  double p64[200];
  SC_OK_OR_FAIL(sc_params_init_f64(c, p64, np, 4));
  sc_data_f64 d = {X, T, NS};
  o.resume = 1;
  SC_EXPECT(SC_ERR_ARG, sc_train_f64(c, SC_LOSS_SQUARED, p64, &d, &o, NULL));
  /* and the float run landed near the double one */
  double worst = 0;
  for (size_t k = 0; k < np; k++) worst = fmax(worst, fabs((double)pf[k] - a[k]));
  if (!(worst < 1e-3)) fail_msg("float and double runs differ by %g", worst);
  remove(ck);
  free(a), free(b);
  sc_chain_destroy(c);
}

static size_t keep_n;
static int keep_p(const sc_progress *pr, void *user) {
  memcpy(user, pr->p_f64, keep_n * sizeof(double));
  return 0;
}

static void test_train_guard_and_args(void **state) {
  (void)state;
  size_t np;
  sc_chain *c = mlp(&np);
  double p[200], p0[200];
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 4));
  sc_data_f64 d = {X, T, NS};
  sc_train_opts o = opts_for(0, 50, 0, 1);
  o.optim = sc_sgd(1e150, 0); /* the updates blow up within a few steps */
  o.progress = keep_p;
  o.progress_every = 1;
  o.user = p0;
  keep_n = np;
  memcpy(p0, p, sizeof p);
  SC_EXPECT(SC_ERR_NONFINITE, sc_train_f64(c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  assert_memory_equal(p, p0, np * sizeof *p); /* the last good p: that of the last callback */
  for (size_t k = 0; k < np; k++) assert_true(isfinite(p[k]));
  o = opts_for(0, 2, 0, 1);
  SC_EXPECT(SC_ERR_NULL, sc_train_f64(c, SC_LOSS_SQUARED, p, NULL, &o, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_train_f64(NULL, SC_LOSS_SQUARED, p, &d, &o, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_train_f64(c, SC_LOSS_SQUARED, NULL, &d, &o, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_train_f64(c, SC_LOSS_SQUARED, p, &d, NULL, NULL));
  assert_non_null(strstr(sc_last_error(), "sc_train_f64"));
  sc_data_f64 bad = {X, T, 0};
  SC_EXPECT(SC_ERR_BATCH, sc_train_f64(c, SC_LOSS_SQUARED, p, &bad, &o, NULL));
  double xn[NS * NI];
  memcpy(xn, X, sizeof xn);
  xn[7] = NAN;
  sc_data_f64 dn = {xn, T, NS};
  SC_EXPECT(SC_ERR_NONFINITE, sc_train_f64(c, SC_LOSS_SQUARED, p, &dn, &o, NULL));
  /* it trains: the loss goes down */
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 4));
  sc_train_report r1, r2;
  o = opts_for(0, 1, 0, 1);
  SC_OK_OR_FAIL(sc_train_f64(c, SC_LOSS_SQUARED, p, &d, &o, &r1));
  o.epochs = 300;
  SC_OK_OR_FAIL(sc_train_f64(c, SC_LOSS_SQUARED, p, &d, &o, &r2));
  assert_true(r2.final_loss < 0.2 * r1.final_loss);
  sc_chain_destroy(c);
}

/* ------------------------------------------------------------------ parameter files */
static void test_params_f64(void **state) {
  (void)state;
  size_t np;
  sc_chain *c = mlp(&np);
  double p[200], q[200];
  float f[200];
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 8));
  for (size_t k = 0; k < np; k++) p[k] += 1e-12 * (double)k; /* bits a float cannot hold */
  char path[512], path32[512];
  tu_tmp_path(path, sizeof path, "f64", "p64.scp");
  tu_tmp_path(path32, sizeof path32, "f64", "p32.scp");
  SC_OK_OR_FAIL(sc_params_save_f64(c, p, np, path));
  size_t len;
  unsigned char *b = tu_read_all(path, &len);
  assert_int_equal(len, 32 + 8 * np + 8);
  assert_int_equal(b[12], 2);
  SC_OK_OR_FAIL(sc_params_load_f64(c, q, np, path));
  assert_memory_equal(p, q, np * sizeof *p);
  SC_OK_OR_FAIL(sc_params_load(c, f, np, path)); /* rounded to float */
  for (size_t k = 0; k < np; k++) assert_true(f[k] == (float)p[k]);
  SC_OK_OR_FAIL(sc_params_save(c, f, np, path32)); /* float32 into double: exact */
  SC_OK_OR_FAIL(sc_params_load_f64(c, q, np, path32));
  for (size_t k = 0; k < np; k++) assert_true(q[k] == (double)f[k]);
  /* every truncation of the float64 file is refused, q untouched */
  for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 13)) {
    tu_write_all(path, b, cut);
    for (size_t k = 0; k < np; k++) q[k] = 5;
    SC_EXPECT(SC_ERR_FORMAT, sc_params_load_f64(c, q, np, path));
    for (size_t k = 0; k < np; k++) assert_true(q[k] == 5);
  }
  free(b);
  /* a double beyond float range: fine in double, SC_ERR_NONFINITE naming it as float */
  p[3] = 1e300;
  SC_OK_OR_FAIL(sc_params_save_f64(c, p, np, path));
  SC_OK_OR_FAIL(sc_params_load_f64(c, q, np, path));
  for (size_t k = 0; k < np; k++) f[k] = 5;
  SC_EXPECT(SC_ERR_NONFINITE, sc_params_load(c, f, np, path));
  assert_non_null(strstr(sc_last_error(), "parameter 3"));
  for (size_t k = 0; k < np; k++) assert_true(f[k] == 5);
  p[3] = NAN;
  SC_EXPECT(SC_ERR_NONFINITE, sc_params_save_f64(c, p, np, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_save_f64(c, NULL, np, path));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_load_f64(c, q, np + 1, path));
  remove(path);
  remove(path32);
  sc_chain_destroy(c);
}

int main(void) {
  make_data();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_optimizer_step_f64),
      cmocka_unit_test(test_train_equals_loop),
      cmocka_unit_test(test_train_threads_and_resume),
      cmocka_unit_test(test_train_guard_and_args),
      cmocka_unit_test(test_params_f64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
