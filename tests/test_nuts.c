/* tests/test_nuts.c — the NUTS sampler, its diagnostics and CSV output (sc_nuts.h), and the
 * two sampling examples' models.
 *
 * Statistical checks use fixed seeds, so each is deterministic; the bounds are stated in
 * Monte-Carlo standard errors (MCSE = sd / sqrt(ESS) from the project's own ESS) and are
 * wide enough (4.5 MCSE per quantity: with 100 quantities, a correct sampler exceeds it with
 * probability below 1e-3 per seed) that a new seed rarely trips them, yet a sampler with
 * the wrong stationary distribution fails them by tens of MCSEs (the wrong-metric
 * check below shows one does).
 *
 * Covered:
 *   - a 100-dimensional standard normal: every mean and every E[x^2] within 4.5 MCSE;
 *     R-hat < 1.01, bulk ESS > 1000
 *   - a 2-D Gaussian with correlation 0.99 and scales 1 and 10: means, variances and the
 *     covariance within 4.5 MCSE
 *   - the same checks fail for a distribution 25 % wider (a negative control)
 *   - draws bitwise identical for 1, 2 and 3 threads; chain c identical whatever the number
 *     of chains
 *   - a density that is NaN beyond a wall: divergences counted, no draw beyond the wall,
 *     the truncated-normal mean within 4.5 MCSE
 *   - errors: callback failure (SC_ERR_CALLBACK naming chain and code), stop from the
 *     progress callback, non-finite initial point, bad options each named, caller memory
 *     too small
 *   - diagnostics: iid draws (R-hat ~ 1, ESS ~ S), AR(1) chains (ESS ~ S (1-phi)/(1+phi)),
 *     shifted chains (R-hat >> 1), constant draws (NaN), type-7 quantiles, bad arguments
 *   - CSV: header, values read back bit for bit, names validated, unwritable path leaves
 *     no file
 *   - the Poisson model against its exact posterior, and the BNN log density's gradient
 *     against central differences (examples/poisson.c, examples/bnn_model.h)
 */
#include "testutil.h"

#include "sc_nuts.h"

#include "../examples/bnn_model.h"

/* ------------------------------------------------------------------ models */
static int std_normal(void *u, size_t c, const double *x, size_t n, double *lp, double *g) {
  (void)u;
  (void)c;
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    s += x[i] * x[i];
    g[i] = -x[i];
  }
  *lp = -0.5 * s;
  return 0;
}

/* 2-D Gaussian: mean (1, -2), sds (1, 10), correlation 0.99 */
#define G2_RHO 0.99
static const double g2_mu[2] = {1.0, -2.0}, g2_sd[2] = {1.0, 10.0};
static int gauss2(void *u, size_t c, const double *x, size_t n, double *lp, double *g) {
  (void)c;
  (void)n;
  double w = u ? *(const double *)u : 1.0; /* negative control: scales widened by w */
  double s0 = w * g2_sd[0], s1 = w * g2_sd[1];
  double a = (x[0] - g2_mu[0]) / s0, b = (x[1] - g2_mu[1]) / s1;
  double k = 1.0 / (1 - G2_RHO * G2_RHO);
  *lp = -0.5 * k * (a * a - 2 * G2_RHO * a * b + b * b);
  g[0] = -k * (a - G2_RHO * b) / s0;
  g[1] = -k * (b - G2_RHO * a) / s1;
  return 0;
}

typedef struct run {
  size_t n, C, D;
  double *draws;
  sc_nuts_stats *stats;
  sc_nuts_chain_info *info;
} run;

static void run_free(run *r) {
  free(r->draws);
  free(r->stats);
  free(r->info);
}

static sc_status run_sampler(run *r, sc_logdensity_fn fn, void *user, size_t n,
                             const sc_nuts_opts *o) {
  r->n = n;
  r->C = o->chains;
  r->D = o->draws;
  r->draws = malloc(o->chains * o->draws * n * sizeof *r->draws);
  r->stats = malloc(o->chains * o->draws * sizeof *r->stats);
  r->info = calloc(o->chains, sizeof *r->info);
  assert_true(r->draws && r->stats && r->info);
  sc_nuts_out out = {r->draws, r->stats, r->info, NULL};
  return sc_nuts_sample(fn, user, n, o, &out, NULL, 0);
}

/* summary of a derived quantity q(draw) of coordinate i (i, or i*j when j >= 0) */
static sc_mcmc_summary derived(const run *r, size_t i, long j, double shift_i, double shift_j) {
  size_t S = r->C * r->D;
  double *q = malloc(S * sizeof *q);
  assert_non_null(q);
  for (size_t k = 0; k < S; k++) {
    double a = r->draws[k * r->n + i] - shift_i;
    q[k] = j < 0 ? a * a : a * (r->draws[k * r->n + (size_t)j] - shift_j);
  }
  sc_mcmc_summary s;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(q, r->C, r->D, 1, 0, &s));
  free(q);
  return s;
}

static void expect_within(const char *what, size_t i, double got, double want, double mcse,
                          double bound) {
  double z = (got - want) / mcse;
  if (!(fabs(z) <= bound))
    fail_msg("%s[%zu]: %.5f, expected %.5f: %.2f MCSE (MCSE %.5f; bound %.1f)", what, i, got, want,
             z, mcse, bound);
}

/* ------------------------------------------------------------------ sampling */
static void test_std_normal_100(void **state) {
  (void)state;
  enum { N = 100 };
  sc_nuts_opts o = sc_nuts_defaults();
  o.seed = 11;
  o.threads = 2;
  run r;
  SC_OK_OR_FAIL(run_sampler(&r, std_normal, NULL, N, &o));
  sc_mcmc_summary *s = malloc(N * sizeof *s);
  SC_OK_OR_FAIL(sc_mcmc_summarize(r.draws, r.C, r.D, N, s));
  for (size_t i = 0; i < N; i++) {
    expect_within("mean", i, s[i].mean, 0.0, s[i].mcse_mean, 4.5);
    sc_mcmc_summary v = derived(&r, i, -1, 0, 0);
    expect_within("E[x^2]", i, v.mean, 1.0, v.mcse_mean, 4.5);
    assert_true(s[i].rhat < 1.01);
    assert_true(s[i].ess_bulk > 1000);
    assert_true(s[i].ess_tail > 500);
  }
  for (size_t c = 0; c < r.C; c++) {
    assert_int_equal(r.info[c].divergences, 0);
    assert_true(r.info[c].step_size > 0.2 && r.info[c].step_size < 1.0);
    assert_true(r.info[c].mean_accept > 0.7);
  }
  free(s);
  run_free(&r);
}

static void check_gauss2(const run *r, double bound, int *bad) {
  sc_mcmc_summary s[2];
  SC_OK_OR_FAIL(sc_mcmc_summarize(r->draws, r->C, r->D, 2, s));
  double want_cov = G2_RHO * g2_sd[0] * g2_sd[1];
  for (size_t i = 0; i < 2; i++) {
    double z = (s[i].mean - g2_mu[i]) / s[i].mcse_mean;
    sc_mcmc_summary v = derived(r, i, -1, g2_mu[i], 0);
    double zv = (v.mean - g2_sd[i] * g2_sd[i]) / v.mcse_mean;
    if (bad)
      *bad |= !(fabs(z) <= bound) || !(fabs(zv) <= bound);
    else {
      expect_within("mean", i, s[i].mean, g2_mu[i], s[i].mcse_mean, bound);
      expect_within("variance", i, v.mean, g2_sd[i] * g2_sd[i], v.mcse_mean, bound);
    }
  }
  sc_mcmc_summary cv = derived(r, 0, 1, g2_mu[0], g2_mu[1]);
  double zc = (cv.mean - want_cov) / cv.mcse_mean;
  if (bad)
    *bad |= !(fabs(zc) <= bound);
  else
    expect_within("covariance", 0, cv.mean, want_cov, cv.mcse_mean, bound);
}

static void test_correlated_2d(void **state) {
  (void)state;
  sc_nuts_opts o = sc_nuts_defaults();
  o.seed = 5;
  o.threads = 2;
  o.draws = 2000;
  run r;
  SC_OK_OR_FAIL(run_sampler(&r, gauss2, NULL, 2, &o));
  check_gauss2(&r, 4.5, NULL);
  /* the adapted metric found the scales: step size well above the narrow width 0.14 */
  for (size_t c = 0; c < r.C; c++) assert_true(r.info[c].step_size > 0.05);
  run_free(&r);
}

/* The same checks fail for draws from a slightly different distribution: scales 25 % wider
 * (variances 56 % larger, well over 4.5 MCSE here). (A wrong gradient would not do as a
 * negative control: leapfrog steps with any position-dependent force preserve volume and
 * are reversible, so NUTS with the true energy stays exact, only slower.) */
static void test_checks_can_fail(void **state) {
  (void)state;
  sc_nuts_opts o = sc_nuts_defaults();
  o.seed = 5;
  o.threads = 2;
  o.draws = 2000;
  double wider = 1.25;
  run r;
  SC_OK_OR_FAIL(run_sampler(&r, gauss2, &wider, 2, &o));
  int bad = 0;
  check_gauss2(&r, 4.5, &bad);
  assert_true(bad);
  run_free(&r);
}

static void test_threads_identical(void **state) {
  (void)state;
  sc_nuts_opts o = sc_nuts_defaults();
  o.chains = 3;
  o.warmup = 150;
  o.draws = 100;
  o.seed = 42;
  run r1, r2, r3;
  SC_OK_OR_FAIL(run_sampler(&r1, gauss2, NULL, 2, &o));
  o.threads = 2;
  SC_OK_OR_FAIL(run_sampler(&r2, gauss2, NULL, 2, &o));
  o.threads = 3;
  SC_OK_OR_FAIL(run_sampler(&r3, gauss2, NULL, 2, &o));
  size_t nd = 3 * 100 * 2, ns = 3 * 100;
  assert_memory_equal(r1.draws, r2.draws, nd * sizeof(double));
  assert_memory_equal(r1.draws, r3.draws, nd * sizeof(double));
  assert_memory_equal(r1.stats, r2.stats, ns * sizeof(sc_nuts_stats));
  assert_memory_equal(r1.stats, r3.stats, ns * sizeof(sc_nuts_stats));
  /* chain 1 of a 2-chain run is chain 1 of the 3-chain run */
  run r4;
  o.chains = 2;
  SC_OK_OR_FAIL(run_sampler(&r4, gauss2, NULL, 2, &o));
  assert_memory_equal(r4.draws + 100 * 2, r1.draws + 100 * 2, 100 * 2 * sizeof(double));
  /* another seed gives other draws */
  run r5;
  o.seed = 43;
  SC_OK_OR_FAIL(run_sampler(&r5, gauss2, NULL, 2, &o));
  assert_true(memcmp(r5.draws, r1.draws, 100 * 2 * sizeof(double)) != 0);
  run_free(&r1);
  run_free(&r2);
  run_free(&r3);
  run_free(&r4);
  run_free(&r5);
}

/* standard normal in 2-D, NaN for x0 > WALL */
#define WALL 1.0
static int walled(void *u, size_t c, const double *x, size_t n, double *lp, double *g) {
  std_normal(u, c, x, n, lp, g);
  if (x[0] > WALL) *lp = NAN;
  return 0;
}

static void test_nan_region(void **state) {
  (void)state;
  sc_nuts_opts o = sc_nuts_defaults();
  o.seed = 3;
  o.threads = 2;
  o.draws = 2000;
  o.init_radius = 0.5;
  run r;
  SC_OK_OR_FAIL(run_sampler(&r, walled, NULL, 2, &o));
  size_t div = 0, flagged = 0;
  for (size_t c = 0; c < r.C; c++) div += r.info[c].divergences;
  for (size_t k = 0; k < r.C * r.D; k++) {
    assert_true(r.draws[k * 2] <= WALL);
    flagged += r.stats[k].divergent;
  }
  assert_true(div > 0);
  assert_int_equal(div, flagged);
  /* E[x | x < 1] for a standard normal: -phi(1) / Phi(1) */
  double phi = exp(-0.5 * WALL * WALL) / sqrt(2 * 3.141592653589793);
  double Phi = 0.5 * erfc(-WALL / sqrt(2.0));
  sc_mcmc_summary s;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(r.draws, r.C, r.D, 2, 0, &s));
  expect_within("truncated mean", 0, s.mean, -phi / Phi, s.mcse_mean, 4.5);
  SC_OK_OR_FAIL(sc_mcmc_summary_of(r.draws, r.C, r.D, 2, 1, &s));
  expect_within("free mean", 1, s.mean, 0.0, s.mcse_mean, 4.5);
  run_free(&r);
}

/* ------------------------------------------------------------------ errors */
typedef struct failing {
  size_t chain, after;
  size_t calls[8];
} failing;

static int fails_later(void *u, size_t c, const double *x, size_t n, double *lp, double *g) {
  failing *f = u;
  if (c == f->chain && ++f->calls[c] > f->after) return 7;
  return std_normal(NULL, c, x, n, lp, g);
}

static int stop_at_50(void *u, size_t chain, size_t it, size_t total) {
  (void)u;
  (void)total;
  return chain == 1 && it >= 50;
}

static int nan_everywhere(void *u, size_t c, const double *x, size_t n, double *lp, double *g) {
  (void)u;
  (void)c;
  (void)x;
  for (size_t i = 0; i < n; i++) g[i] = 0;
  *lp = NAN;
  return 0;
}

static void expect_msg(const char *needle) {
  if (!strstr(sc_last_error(), needle))
    fail_msg("message '%s' does not mention '%s'", sc_last_error(), needle);
}

static void test_errors(void **state) {
  (void)state;
  double draws[4 * 20 * 3];
  sc_nuts_out out = {draws, NULL, NULL, NULL};
  sc_nuts_opts o = sc_nuts_defaults();
  o.warmup = 30;
  o.draws = 20;
  o.threads = 2;
  failing f = {1, 100, {0}};
  SC_EXPECT(SC_ERR_CALLBACK, sc_nuts_sample(fails_later, &f, 3, &o, &out, NULL, 0));
  expect_msg("returned 7");
  expect_msg("chain 1");
  o.progress = stop_at_50;
  o.progress_every = 10;
  SC_EXPECT(SC_ERR_STOPPED, sc_nuts_sample(std_normal, NULL, 3, &o, &out, NULL, 0));
  expect_msg("progress callback");
  o.progress = NULL;
  SC_EXPECT(SC_ERR_NONFINITE, sc_nuts_sample(nan_everywhere, NULL, 3, &o, &out, NULL, 0));
  expect_msg("no initial point");
  double init[4 * 3] = {0};
  init[7] = NAN;
  o.init = init;
  SC_EXPECT(SC_ERR_NONFINITE, sc_nuts_sample(std_normal, NULL, 3, &o, &out, NULL, 0));
  expect_msg("opts->init[7]");
  init[7] = 0;
  SC_OK_OR_FAIL(sc_nuts_sample(std_normal, NULL, 3, &o, &out, NULL, 0));
  o.init = NULL;
  /* arguments, each named */
  SC_EXPECT(SC_ERR_NULL, sc_nuts_sample(NULL, NULL, 3, &o, &out, NULL, 0));
  expect_msg("'fn'");
  SC_EXPECT(SC_ERR_NULL, sc_nuts_sample(std_normal, NULL, 3, NULL, &out, NULL, 0));
  expect_msg("'opts'");
  SC_EXPECT(SC_ERR_NULL, sc_nuts_sample(std_normal, NULL, 3, &o, NULL, NULL, 0));
  sc_nuts_out none = {NULL, NULL, NULL, NULL};
  SC_EXPECT(SC_ERR_NULL, sc_nuts_sample(std_normal, NULL, 3, &o, &none, NULL, 0));
  expect_msg("out->draws");
  SC_EXPECT(SC_ERR_ARG, sc_nuts_sample(std_normal, NULL, 0, &o, &out, NULL, 0));
#define BAD_OPT(field, value)                                                                      \
  do {                                                                                             \
    sc_nuts_opts b_ = o;                                                                           \
    b_.field = value;                                                                              \
    SC_EXPECT(SC_ERR_ARG, sc_nuts_sample(std_normal, NULL, 3, &b_, &out, NULL, 0));                \
    expect_msg(#field);                                                                            \
    size_t bytes_;                                                                                 \
    SC_EXPECT(SC_ERR_ARG, sc_nuts_bytes(3, &b_, &bytes_));                                         \
  } while (0)
  BAD_OPT(chains, 0);
  BAD_OPT(draws, 0);
  BAD_OPT(threads, 0);
  BAD_OPT(max_depth, 0);
  BAD_OPT(max_depth, 31);
  BAD_OPT(delta, 1.0);
  BAD_OPT(delta, NAN);
  BAD_OPT(gamma, 0);
  BAD_OPT(t0, -1);
  BAD_OPT(kappa, 0);
  BAD_OPT(max_energy_error, 0);
  BAD_OPT(step_size, INFINITY);
  BAD_OPT(adapt_metric, 2);
  BAD_OPT(init_radius, 0);
#undef BAD_OPT
  /* caller memory */
  size_t bytes = 0;
  SC_OK_OR_FAIL(sc_nuts_bytes(3, &o, &bytes));
  assert_true(bytes > 0);
  unsigned char *mem = malloc(bytes + 1);
  SC_EXPECT(SC_ERR_NOMEM, sc_nuts_sample(std_normal, NULL, 3, &o, &out, mem, bytes - 1));
  expect_msg("needs");
  /* any alignment */
  SC_OK_OR_FAIL(sc_nuts_sample(std_normal, NULL, 3, &o, &out, mem + 1, bytes));
  free(mem);
  SC_EXPECT(SC_ERR_NULL, sc_nuts_bytes(3, &o, NULL));
  SC_EXPECT(SC_ERR_OVERFLOW, sc_nuts_bytes(SIZE_MAX / 4, &o, &bytes));
}

/* ------------------------------------------------------------------ diagnostics */
static double normal01(uint64_t *s) {
  double u = 0.5 * (tu_unif(s) + 1.0), v = 0.5 * (tu_unif(s) + 1.0);
  if (u <= 0) u = 1e-300;
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static void test_diag_iid_and_ar1(void **state) {
  (void)state;
  enum { C = 4, D = 2000 };
  double *x = malloc(C * D * 2 * sizeof *x);
  uint64_t s = 99;
  double phi = 0.9;
  for (size_t c = 0; c < C; c++) {
    double ar = normal01(&s);
    for (size_t d = 0; d < D; d++) {
      x[(c * D + d) * 2] = normal01(&s);
      ar = phi * ar + sqrt(1 - phi * phi) * normal01(&s);
      x[(c * D + d) * 2 + 1] = ar;
    }
  }
  sc_mcmc_summary m[2];
  SC_OK_OR_FAIL(sc_mcmc_summarize(x, C, D, 2, m));
  double S = C * D;
  assert_true(m[0].rhat < 1.01);
  assert_true(m[0].ess_bulk > 0.85 * S && m[0].ess_bulk < 1.15 * S);
  assert_true(m[0].ess_mean > 0.85 * S && m[0].ess_mean < 1.15 * S);
  assert_true(m[0].ess_tail > 0.7 * S && m[0].ess_tail < 1.3 * S);
  double want = S * (1 - phi) / (1 + phi);
  if (!(m[1].ess_bulk > 0.75 * want && m[1].ess_bulk < 1.25 * want))
    fail_msg("AR(1) bulk ESS %.0f, expected about %.0f", m[1].ess_bulk, want);
  assert_true(m[1].ess_mean > 0.75 * want && m[1].ess_mean < 1.25 * want);
  assert_true(m[1].rhat < 1.05);
  assert_true(fabs(m[0].mcse_mean - m[0].sd / sqrt(m[0].ess_mean)) < 1e-15);
  /* the same through sc_mcmc_summary_of */
  sc_mcmc_summary one;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(x, C, D, 2, 1, &one));
  assert_memory_equal(&one, &m[1], sizeof one);
  /* one chain shifted by 2: R-hat far above 1 (and the tail R-hat sees a scale change) */
  for (size_t d = 0; d < D; d++) x[(0 * D + d) * 2] += 2.0;
  for (size_t d = 0; d < D; d++) x[(1 * D + d) * 2 + 1] *= 4.0;
  SC_OK_OR_FAIL(sc_mcmc_summarize(x, C, D, 2, m));
  assert_true(m[0].rhat > 1.3);
  assert_true(m[1].rhat > 1.1);
  free(x);
}

static void test_diag_edge_cases(void **state) {
  (void)state;
  /* constant draws: quantiles and mean defined, R-hat and ESS NaN */
  double k[2 * 8];
  for (int i = 0; i < 16; i++) k[i] = 3.0;
  sc_mcmc_summary s;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(k, 2, 8, 1, 0, &s));
  assert_true(s.mean == 3.0 && s.q5 == 3.0 && s.q95 == 3.0 && s.sd == 0.0);
  assert_true(isnan(s.rhat) && isnan(s.ess_bulk) && isnan(s.ess_tail));
  /* a non-finite draw: everything NaN */
  k[5] = NAN;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(k, 2, 8, 1, 0, &s));
  assert_true(isnan(s.mean) && isnan(s.rhat));
  /* type-7 quantiles of 1..20 (one chain of 20): q5 = 1.95, q50 = 10.5, q95 = 19.05 */
  double v[20];
  for (int i = 0; i < 20; i++) v[i] = 20 - i;
  SC_OK_OR_FAIL(sc_mcmc_summary_of(v, 1, 20, 1, 0, &s));
  assert_float_equal(s.q5, 1.95, 1e-12);
  assert_float_equal(s.q50, 10.5, 1e-12);
  assert_float_equal(s.q95, 19.05, 1e-12);
  assert_float_equal(s.mean, 10.5, 1e-12);
  /* arguments */
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_summary_of(v, 1, 3, 1, 0, &s));
  expect_msg("at least 4");
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_summary_of(v, 1, 20, 1, 1, &s));
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_summary_of(v, 0, 20, 1, 0, &s));
  SC_EXPECT(SC_ERR_NULL, sc_mcmc_summary_of(NULL, 1, 20, 1, 0, &s));
  SC_EXPECT(SC_ERR_NULL, sc_mcmc_summary_of(v, 1, 20, 1, 0, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_mcmc_summarize(v, 1, 20, 1, NULL));
  SC_EXPECT(SC_ERR_OVERFLOW, sc_mcmc_summarize(v, SIZE_MAX / 2, 20, 1, &s));
}

/* ------------------------------------------------------------------ CSV */
static void test_csv(void **state) {
  (void)state;
  enum { C = 2, D = 5, N = 3 };
  double x[C * D * N];
  sc_nuts_stats st[C * D];
  uint64_t s = 7;
  for (size_t i = 0; i < C * D * N; i++) x[i] = tu_unif(&s) * 1e3 / 7.0;
  x[4] = -0.0;
  x[5] = 1e-310; /* subnormal */
  for (size_t i = 0; i < C * D; i++) {
    st[i] = (sc_nuts_stats){-1.5 * (double)i, 0.875, 0.25, 3.5, (uint32_t)(7 + i), 3,
                            (uint16_t)(i % 2)};
  }
  char path[512];
  tu_tmp_path(path, sizeof path, "nuts", "draws.csv");
  const char *names[N] = {"alpha", "beta.1", "log_sigma"};
  SC_OK_OR_FAIL(sc_mcmc_write_csv(path, x, C, D, N, names, st));
  size_t len;
  char *txt = (char *)tu_read_all(path, &len);
  txt[len] = 0;
  const char *header = "chain,iteration,alpha,beta.1,log_sigma,lp__,accept_stat__,stepsize__,"
                       "treedepth__,n_leapfrog__,divergent__,energy__\n";
  assert_int_equal(strncmp(txt, header, strlen(header)), 0);
  /* every value reads back bit for bit */
  char *line = txt + strlen(header);
  for (size_t c = 0; c < C; c++)
    for (size_t d = 0; d < D; d++) {
      char *end;
      assert_int_equal(strtoul(line, &end, 10), c + 1);
      assert_int_equal(strtoul(end + 1, &end, 10), d + 1);
      for (size_t i = 0; i < N; i++) {
        double v = strtod(end + 1, &end);
        assert_memory_equal(&v, &x[(c * D + d) * N + i], sizeof v);
      }
      double lp = strtod(end + 1, &end);
      assert_true(lp == st[c * D + d].lp);
      line = strchr(line, '\n') + 1;
    }
  assert_int_equal(*line, 0);
  free(txt);
  /* no names, no stats */
  SC_OK_OR_FAIL(sc_mcmc_write_csv(path, x, C, D, N, NULL, NULL));
  txt = (char *)tu_read_all(path, &len);
  txt[len] = 0;
  if (strncmp(txt, "chain,iteration,x1,x2,x3\n1,1,", 29)) fail_msg("CSV starts '%.40s'", txt);
  free(txt);
  remove(path);
  /* bad names and paths */
  const char *comma[N] = {"a", "b,c", "d"}, *empty[N] = {"a", "", "d"};
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_write_csv(path, x, C, D, N, comma, NULL));
  expect_msg("names[1]");
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_write_csv(path, x, C, D, N, empty, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_mcmc_write_csv(NULL, x, C, D, N, NULL, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_mcmc_write_csv(path, NULL, C, D, N, NULL, NULL));
  SC_EXPECT(SC_ERR_ARG, sc_mcmc_write_csv(path, x, 0, D, N, NULL, NULL));
  SC_EXPECT(SC_ERR_IO, sc_mcmc_write_csv("/nonexistent-dir/x.csv", x, C, D, N, NULL, NULL));
  expect_msg("/nonexistent-dir/x.csv");
  FILE *probe = fopen(path, "r");
  assert_null(probe); /* nothing was left at path */
}

/* ------------------------------------------------------------------ the examples' models */
static void test_poisson_example(void **state) {
  (void)state;
  const char *dir = getenv("SC_BUILD_DIR");
  char cmd[4096], *out1 = NULL, *out2 = NULL;
  snprintf(cmd, sizeof cmd, "'%s/poisson' --quiet --threads 1", dir && *dir ? dir : "build");
  int rc = tu_run(cmd, &out1);
  if (rc != 0) fail_msg("%s exited with %d:\n%s", cmd, rc, out1);
  const char *line = strstr(out1, "RESULT ");
  assert_non_null(line);
  size_t C = 0, D = 0;
  double rhat = 0, ess = 0, z = 0, secs = 0;
  int n = sscanf(line,
                 "RESULT bench=poisson chains=%zu draws=%zu rhat_max=%lf ess_bulk_min=%lf "
                 "max_abs_z=%lf seconds=%lf",
                 &C, &D, &rhat, &ess, &z, &secs);
  if (n != 6) fail_msg("RESULT line not in the expected format: %s", line);
  assert_int_equal(C, 4);
  assert_int_equal(D, 1000);
  /* every group's posterior mean within 4 MCSE of the exact one (the target) */
  if (!(z < 4.0 && rhat < 1.01 && ess > 1000))
    fail_msg("poisson: max |z| %.2f, R-hat %.4f, min bulk ESS %.0f\n%s", z, rhat, ess, out1);
  /* the same draws with 2 threads: the same table and RESULT but for the time */
  snprintf(cmd, sizeof cmd, "'%s/poisson' --quiet --threads 2", dir && *dir ? dir : "build");
  assert_int_equal(tu_run(cmd, &out2), 0);
  const char *l2 = strstr(out2, "RESULT ");
  assert_non_null(l2);
  assert_int_equal(strncmp(line, l2, (size_t)(strstr(line, "seconds=") - line)), 0);
  const char *t1 = strstr(out1, "group"), *t2 = strstr(out2, "group");
  assert_true(t1 && t2);
  assert_int_equal(strncmp(t1, t2, (size_t)(strstr(t1, "\n\n") - t1)), 0);
  free(out1);
  free(out2);
  /* bad flags */
  snprintf(cmd, sizeof cmd, "'%s/poisson' --chains 0", dir && *dir ? dir : "build");
  assert_int_not_equal(tu_run(cmd, &out1), 0);
  assert_non_null(strstr(out1, "--chains"));
  free(out1);
}

static void test_bnn_gradient(void **state) {
  (void)state;
  bnn_model m;
  SC_OK_OR_FAIL(bnn_create(&m, 8, 30, 2454, 2));
  size_t n = m.n;
  double *v = malloc(n * sizeof *v), *g = malloc(n * sizeof *g), *g2 = malloc(n * sizeof *g2);
  for (int point = 0; point < 3; point++) {
    if (point == 0)
      bnn_bench_point(v, m.np);
    else
      tu_fill_f64(v, n, 100 + (uint64_t)point, 1.5);
    double lp = 0, lp2 = 0;
    assert_int_equal(bnn_logdensity(&m, 0, v, n, &lp, g), 0);
    assert_true(isfinite(lp));
    /* chain 1's workspace gives the same bits */
    assert_int_equal(bnn_logdensity(&m, 1, v, n, &lp2, g2), 0);
    assert_true(lp == lp2);
    assert_memory_equal(g, g2, n * sizeof *g);
    double worst_rel = 0, worst_abs = 0;
    size_t checked = 0;
    for (size_t k = 0; k < n; k++) {
      double h = 1e-5 * fmax(1.0, fabs(v[k])), keep = v[k], lpp = 0, lpm = 0;
      v[k] = keep + h;
      bnn_logdensity(&m, 0, v, n, &lpp, g2);
      v[k] = keep - h;
      bnn_logdensity(&m, 0, v, n, &lpm, g2);
      v[k] = keep;
      tu_fd_compare("bnn", "grad", k, g[k], (lpp - lpm) / (2 * h), 2e-6, 1e-3, &worst_rel,
                    &worst_abs, &checked);
    }
    assert_int_equal(checked, n);
  }
  /* the log density at the benchmark point, as the PyTorch twin computes it for H=32, N=100 */
  bnn_destroy(&m);
  SC_OK_OR_FAIL(bnn_create(&m, 32, 100, 2454, 1));
  double *w = malloc(m.n * sizeof *w), *gw = malloc(m.n * sizeof *gw), lp = 0;
  bnn_bench_point(w, m.np);
  assert_int_equal(bnn_logdensity(&m, 0, w, m.n, &lp, gw), 0);
  assert_float_equal(lp, -3178.43101695, 1e-6);
  /* a wrong size or chain index is the callback's error */
  assert_int_not_equal(bnn_logdensity(&m, 0, w, m.n - 1, &lp, gw), 0);
  assert_int_not_equal(bnn_logdensity(&m, 5, w, m.n, &lp, gw), 0);
  free(w);
  free(gw);
  bnn_destroy(&m);
  free(v);
  free(g);
  free(g2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_std_normal_100),
      cmocka_unit_test(test_correlated_2d),
      cmocka_unit_test(test_checks_can_fail),
      cmocka_unit_test(test_threads_identical),
      cmocka_unit_test(test_nan_region),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_diag_iid_and_ar1),
      cmocka_unit_test(test_diag_edge_cases),
      cmocka_unit_test(test_csv),
      cmocka_unit_test(test_poisson_example),
      cmocka_unit_test(test_bnn_gradient),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
