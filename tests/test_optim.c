/* tests/test_optim.c — ADAM, AdamW and SGD(+momentum, +weight decay) against an
 * independent double-precision implementation of the update rules documented in
 * simplechain.h, single and multiple steps; caller-memory optimizers; reset.
 *
 * Tolerance. The library keeps p, m, v in float, so the comparison is on the update
 * Delta = p_new - p_old of every element (computed exactly in double from the floats):
 *
 *   |Delta_lib - Delta_ref| <= RTOL * mag + 1.2e-7 * (|p_old| + |p_new|)
 *
 * RTOL = 1e-6. mag is the update computed with every term replaced by its magnitude
 * (|g| instead of g in the first moment / momentum buffer, |wd p| instead of wd p), so
 * that cancellation inside a sum (m crossing zero, g + wd p ~ 0) cannot make the bound
 * unfairly tight; on step 1 of ADAM without weight decay mag == |Delta|, a plain relative
 * bound. The second term is the rounding of storing p (and p * decay) in float: about
 * one float ulp of the values involved. Float arithmetic on the few operations of one
 * update is good to ~3e-7 of mag, so 1e-6 leaves room while catching any wrong
 * constant, sign, bias correction, eps placement or order of weight decay.
 *
 * Besides the step-by-step check (the reference is applied to the library's own p
 * before every step, with its own m / v / buffer in double), each multi-step run also
 * follows a fully independent double trajectory and compares the final p with a bound
 * of 1e-6 times the summed magnitudes of all steps.
 */
#include "testutil.h"

#define RTOL 1e-6

/* ------------------------------------------------------------------ reference */
typedef struct ref_opt {
  sc_optim cfg;
  size_t n;
  unsigned long t;
  double *m, *v; /* ADAM moments; SGD: m = momentum buffer */
  double *mabs;  /* the first moment / buffer of the magnitudes (for the tolerance) */
} ref_opt;

static void ref_init(ref_opt *r, const sc_optim *cfg, size_t n) {
  r->cfg = *cfg;
  r->n = n;
  r->t = 0;
  r->m = calloc(n, sizeof(double));
  r->v = calloc(n, sizeof(double));
  r->mabs = calloc(n, sizeof(double));
  assert_non_null(r->m);
  assert_non_null(r->v);
  assert_non_null(r->mabs);
}
static void ref_free(ref_opt *r) {
  free(r->m);
  free(r->v);
  free(r->mabs);
}

/* One documented update of p (double) from g; mag[k] (if not NULL) receives the
 * magnitude of the update's terms, see the file comment. */
static void ref_step(ref_opt *r, double *p, const float *g, double *mag) {
  const sc_optim *c = &r->cfg;
  r->t++;
  for (size_t k = 0; k < r->n; k++) {
    double gk = g[k], pk = p[k], gmag;
    if (c->kind == SC_SGD) {
      /* g' = g + wd p; buf = momentum buf + g' (buf = g' at t = 1); p -= lr buf */
      double gp = gk + c->weight_decay * pk;
      gmag = fabs(gk) + fabs(c->weight_decay * pk);
      double buf = r->t == 1 ? gp : c->momentum * r->m[k] + gp;
      r->mabs[k] = r->t == 1 ? gmag : c->momentum * r->mabs[k] + gmag;
      r->m[k] = buf;
      p[k] = pk - c->lr * buf;
      if (mag) mag[k] = c->lr * r->mabs[k];
      continue;
    }
    double decay_term = 0;
    if (c->kind == SC_ADAM) {
      /* L2: weight_decay * p is added to g first */
      gmag = fabs(gk) + fabs(c->weight_decay * pk);
      gk += c->weight_decay * pk;
    } else {
      /* AdamW: p -= lr wd p first, then ADAM with the raw gradient */
      gmag = fabs(gk);
      decay_term = c->lr * c->weight_decay * fabs(pk);
      pk -= c->lr * c->weight_decay * pk;
    }
    r->m[k] = c->beta1 * r->m[k] + (1 - c->beta1) * gk;
    r->v[k] = c->beta2 * r->v[k] + (1 - c->beta2) * gk * gk;
    r->mabs[k] = c->beta1 * r->mabs[k] + (1 - c->beta1) * gmag;
    double bc1 = 1 - pow(c->beta1, (double)r->t), bc2 = 1 - pow(c->beta2, (double)r->t);
    double den = sqrt(r->v[k] / bc2) + c->eps;
    p[k] = pk - c->lr * (r->m[k] / bc1) / den;
    if (mag) mag[k] = c->lr * (r->mabs[k] / bc1) / den + decay_term;
  }
}

/* ------------------------------------------------------------------ data */
/* gradients of very different sizes: zeros, tiny (below eps), 1e-3 .. 1e3, both signs;
 * positive_only: all >= 0 (for the weight-decay runs, so that g + wd p does not cancel) */
static void make_grad(float *g, size_t n, uint64_t seed, int positive_only) {
  for (size_t k = 0; k < n; k++) {
    double u = tu_unif(&seed);
    double scale = pow(10.0, (double)((k * 7 + seed) % 7) - 3.0);
    double v = u * scale;
    if (positive_only) v = fabs(v) + 0.01 * scale;
    if (k % 11 == 5) v = 0;
    if (k % 13 == 3) v = positive_only ? 3e-9 : -3e-9;
    g[k] = (float)v;
  }
}

static void check_delta(const char *what, int step, size_t k, double p_old, double p_lib,
                        double p_ref, double mag) {
  double dl = p_lib - p_old, dr = p_ref - p_old;
  double tol = RTOL * mag + 1.2e-7 * (fabs(p_old) + fabs(p_ref));
  if (!(fabs(dl - dr) <= tol))
    fail_msg("%s, step %d, element %zu: p %.9g -> library %.9g (update %.9g), reference %.9g "
             "(update %.9g); |error| %.3g > tolerance %.3g (relative error of the update %.3g)",
             what, step, k, p_old, p_lib, dl, p_ref, dr, fabs(dl - dr), tol,
             dr != 0 ? fabs(dl - dr) / fabs(dr) : 0.0);
}

/* Runs `steps` updates of the library optimizer (cfg) on p0 (n elements, scaled by
 * p_scale) and checks every step against the reference, plus the final p against an
 * independent double trajectory. Returns nothing; fails the test on a mismatch. */
static void run_check(const char *what, const sc_optim *cfg, size_t n, int steps, double p_lo,
                      double p_hi, int positive_grads, uint64_t seed) {
  float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
  double *pin = malloc(n * sizeof *pin), *pind = malloc(n * sizeof *pind);
  double *mag = malloc(n * sizeof *mag), *acc = calloc(n, sizeof *acc);
  double *mag2 = malloc(n * sizeof *mag2);
  assert_true(p && g && pin && pind && mag && acc && mag2);
  uint64_t s = seed;
  for (size_t k = 0; k < n; k++) {
    double u = 0.5 * (tu_unif(&s) + 1); /* [0, 1) */
    p[k] = (float)(p_lo + (p_hi - p_lo) * u);
    if (p_lo < 0 && k % 2) p[k] = -p[k];
    pind[k] = p[k];
  }
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, cfg, n));
  ref_opt sync, ind;
  ref_init(&sync, cfg, n);
  ref_init(&ind, cfg, n);
  for (int t = 1; t <= steps; t++) {
    make_grad(g, n, seed * 1000 + (uint64_t)t, positive_grads);
    for (size_t k = 0; k < n; k++) pin[k] = p[k];
    double *pref = malloc(n * sizeof *pref);
    assert_non_null(pref);
    memcpy(pref, pin, n * sizeof *pref);
    ref_step(&sync, pref, g, mag);
    ref_step(&ind, pind, g, mag2);
    for (size_t k = 0; k < n; k++) acc[k] += mag2[k] + 1.2e-7 / RTOL * fabs(pind[k]);
    SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, n));
    for (size_t k = 0; k < n; k++) check_delta(what, t, k, pin[k], p[k], pref[k], mag[k]);
    free(pref);
  }
  for (size_t k = 0; k < n; k++) {
    double err = fabs((double)p[k] - pind[k]), tol = RTOL * acc[k] + 1e-30;
    if (!(err <= tol))
      fail_msg("%s: after %d steps element %zu: library %.9g, independent reference %.9g, "
               "|error| %.3g > %.3g",
               what, steps, k, (double)p[k], pind[k], err, tol);
  }
  ref_free(&sync);
  ref_free(&ind);
  sc_optimizer_destroy(opt);
  free(p);
  free(g);
  free(pin);
  free(pind);
  free(mag);
  free(mag2);
  free(acc);
}

/* ------------------------------------------------------------------ ADAM */
static void test_adam_first_step_is_lr_sign(void **state) {
  (void)state;
  /* step 1 without weight decay: mhat = g, vhat = g^2, so Delta = -lr g / (|g| + eps):
   * -lr sign(g) for |g| >> eps, 0 for g = 0, -lr g / (|g| + eps) for tiny g */
  const size_t n = 6;
  float p[6] = {0.5f, -0.25f, 0, 1, 2, -3};
  const float g[6] = {3.0f, -0.001f, 0.0f, 1e-8f, 250.0f, -1e-9f};
  const float p0[6] = {0.5f, -0.25f, 0, 1, 2, -3};
  sc_optim cfg = sc_adam(0.01);
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &cfg, n));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, n));
  for (size_t k = 0; k < n; k++) {
    double want = 0.01 * (double)g[k] / (fabs((double)g[k]) + 1e-8);
    double got = (double)p0[k] - (double)p[k];
    assert_true(fabs(got - want) <= 1e-5 * fabs(want) + 2.4e-7 * fabs((double)p0[k]));
  }
  assert_true(p[2] == 0); /* g = 0: no move at all */
  /* |g| >> eps: a full lr step, whatever the gradient's size */
  assert_true(fabs((p0[0] - p[0]) - 0.01) < 1e-7);
  assert_true(fabs((p0[4] - p[4]) - 0.01) < 1e-6);
  assert_true(fabs((p0[1] - p[1]) + 0.01) < 1e-7);
  /* g = 1e-8 = eps: half a step */
  assert_true(fabs((p0[3] - p[3]) - 0.005) < 1e-6);
  sc_optimizer_destroy(opt);
}

static void test_adam_single_step(void **state) {
  (void)state;
  sc_optim cfg = sc_adam(0.1);
  /* p small, so that storing p in float cannot hide an error in the update */
  run_check("ADAM(0.1) single step", &cfg, 37, 1, 0.0, 0.004, 0, 1);
}

static void test_adam_multi_step(void **state) {
  (void)state;
  sc_optim cfg = sc_adam(0.02);
  run_check("ADAM(0.02) 30 steps", &cfg, 37, 30, 0.0, 0.5, 0, 2);
  /* other hyper-parameters: the betas and eps are used as given */
  cfg = sc_adam(0.05);
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.99;
  cfg.eps = 1e-4;
  run_check("ADAM(0.05, betas 0.8 0.99, eps 1e-4) 20 steps", &cfg, 37, 20, 0.0, 0.5, 0, 3);
  cfg.beta1 = 0; /* no first-moment averaging: RMSprop-like */
  run_check("ADAM(beta1 0) 5 steps", &cfg, 37, 5, 0.0, 0.5, 0, 4);
  /* a longer vector: vector bodies and tails */
  cfg = sc_adam(0.01);
  run_check("ADAM(0.01) n=1000 10 steps", &cfg, 1000, 10, 0.0, 1.0, 0, 5);
  run_check("ADAM(0.01) n=1 10 steps", &cfg, 1, 10, 0.0, 1.0, 0, 6);
}

static void test_adam_weight_decay(void **state) {
  (void)state;
  /* ADAM with weight_decay > 0 adds wd * p to g (L2, as torch.optim.Adam) */
  sc_optim cfg = sc_adam(0.01);
  cfg.weight_decay = 0.5;
  run_check("ADAM(0.01, L2 0.5) single step", &cfg, 37, 1, 1.0, 2.0, 1, 7);
  run_check("ADAM(0.01, L2 0.5) 15 steps", &cfg, 37, 15, 1.0, 2.0, 1, 8);
  /* L2 really changes the result: with g = 0 the parameter still moves toward 0 */
  float p[3] = {1.0f, -2.0f, 0.0f}, g[3] = {0, 0, 0};
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &cfg, 3));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 3));
  /* step 1: g' = wd p, so Delta = -lr sign(p) */
  assert_true(fabs(p[0] - (1.0 - 0.01)) < 1e-6);
  assert_true(fabs(p[1] - (-2.0 + 0.01)) < 1e-6);
  assert_true(p[2] == 0);
  sc_optimizer_destroy(opt);
}

static void test_adamw(void **state) {
  (void)state;
  sc_optim cfg = sc_adamw(0.1, 0.5);
  run_check("AdamW(0.1, 0.5) single step", &cfg, 37, 1, 1.0, 2.0, 0, 9);
  run_check("AdamW(0.1, 0.5) 20 steps", &cfg, 37, 20, 1.0, 2.0, 0, 10);
  cfg = sc_adamw(0.003, 0.01);
  run_check("AdamW(0.003, 0.01) 10 steps", &cfg, 100, 10, 0.0, 3.0, 0, 11);
  /* decoupled: with g = 0 the parameter shrinks by exactly (1 - lr wd), no ADAM move */
  cfg = sc_adamw(0.1, 0.5);
  float p[2] = {1.0f, -4.0f}, g[2] = {0, 0};
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &cfg, 2));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 2));
  assert_true(fabs(p[0] - 0.95) < 1e-7);
  assert_true(fabs(p[1] + 3.8) < 4e-7);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 2));
  assert_true(fabs(p[0] - 0.95 * 0.95) < 2e-7);
  /* AdamW with weight_decay 0 is ADAM, bit for bit */
  sc_optim a = sc_adam(0.05), aw = sc_adamw(0.05, 0.0);
  float p1[37], p2[37], gg[37];
  tu_fill_f32(p1, 37, 12, 1.0);
  memcpy(p2, p1, sizeof p1);
  sc_optimizer *o1 = NULL, *o2 = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&o1, &a, 37));
  SC_OK_OR_FAIL(sc_optimizer_create(&o2, &aw, 37));
  for (int t = 0; t < 5; t++) {
    make_grad(gg, 37, 100 + (uint64_t)t, 0);
    SC_OK_OR_FAIL(sc_optimizer_step(o1, p1, gg, 37));
    SC_OK_OR_FAIL(sc_optimizer_step(o2, p2, gg, 37));
  }
  assert_memory_equal(p1, p2, sizeof p1);
  sc_optimizer_destroy(o1);
  sc_optimizer_destroy(o2);
  sc_optimizer_destroy(opt);
}

/* ------------------------------------------------------------------ SGD */
static void test_sgd_plain(void **state) {
  (void)state;
  sc_optim cfg = sc_sgd(0.1, 0.0);
  run_check("SGD(0.1) single step", &cfg, 37, 1, 0.0, 0.004, 0, 13);
  run_check("SGD(0.1) 10 steps", &cfg, 37, 10, 0.0, 1.0, 0, 14);
  /* p -= lr g, exactly as float arithmetic does it for representable values */
  float p[4] = {1.0f, 0.5f, -2.0f, 0.0f};
  const float g[4] = {1.0f, -2.0f, 0.25f, 0.0f};
  sc_optim c2 = sc_sgd(0.5, 0.0);
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &c2, 4));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 4));
  assert_true(p[0] == 0.5f && p[1] == 1.5f && p[2] == -2.125f && p[3] == 0.0f);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 4)); /* no momentum: the same move again */
  assert_true(p[0] == 0.0f && p[1] == 2.5f && p[2] == -2.25f && p[3] == 0.0f);
  sc_optimizer_destroy(opt);
}

static void test_sgd_momentum(void **state) {
  (void)state;
  sc_optim cfg = sc_sgd(0.05, 0.9);
  run_check("SGD(0.05, momentum 0.9) single step", &cfg, 37, 1, 0.0, 0.004, 0, 15);
  run_check("SGD(0.05, momentum 0.9) 25 steps", &cfg, 37, 25, 0.0, 1.0, 0, 16);
  /* by hand: constant g = 1, lr 0.5, momentum 0.5: buf 1, 1.5, 1.75 (no dampening,
   * buf = g at t = 1) -> p = 10 - 0.5, - 0.75, - 0.875 */
  float p[1] = {10.0f};
  const float g[1] = {1.0f};
  sc_optim c2 = sc_sgd(0.5, 0.5);
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &c2, 1));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 1));
  assert_true(p[0] == 9.5f);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 1));
  assert_true(p[0] == 8.75f);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 1));
  assert_true(p[0] == 7.875f);
  sc_optimizer_destroy(opt);
}

static void test_sgd_weight_decay(void **state) {
  (void)state;
  sc_optim cfg = sc_sgd(0.1, 0.0);
  cfg.weight_decay = 0.3;
  run_check("SGD(0.1, wd 0.3) single step", &cfg, 37, 1, 1.0, 2.0, 1, 17);
  run_check("SGD(0.1, wd 0.3) 10 steps", &cfg, 37, 10, 1.0, 2.0, 1, 18);
  cfg = sc_sgd(0.02, 0.9);
  cfg.weight_decay = 0.1;
  run_check("SGD(0.02, momentum 0.9, wd 0.1) single step", &cfg, 37, 1, 1.0, 2.0, 1, 19);
  run_check("SGD(0.02, momentum 0.9, wd 0.1) 20 steps", &cfg, 37, 20, 1.0, 2.0, 1, 20);
  /* by hand: g = 0, wd 0.5, lr 0.5, momentum 0.5, p = 8:
   * t=1: g' = 4, buf 4, p = 6; t=2: g' = 3, buf = 2 + 3 = 5, p = 3.5 */
  float p[1] = {8.0f};
  const float g[1] = {0.0f};
  sc_optim c2 = sc_sgd(0.5, 0.5);
  c2.weight_decay = 0.5;
  sc_optimizer *opt = NULL;
  SC_OK_OR_FAIL(sc_optimizer_create(&opt, &c2, 1));
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 1));
  assert_true(p[0] == 6.0f);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 1));
  assert_true(p[0] == 3.5f);
  sc_optimizer_destroy(opt);
}

/* ------------------------------------------------------------------ memory, reset */
static sc_optim kind_cfg(int i) {
  sc_optim c;
  switch (i) {
  case 0:
    c = sc_adam(0.01);
    c.weight_decay = 0.01;
    return c;
  case 1: return sc_adamw(0.01, 0.1);
  case 2:
    c = sc_sgd(0.05, 0.9);
    c.weight_decay = 0.01;
    return c;
  default: return sc_sgd(0.05, 0.0);
  }
}

static void test_caller_memory(void **state) {
  (void)state;
  const size_t sizes[] = {1, 15, 16, 17, 333};
  for (int kind = 0; kind < 4; kind++) {
    sc_optim cfg = kind_cfg(kind);
    size_t prev = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
      size_t n = sizes[si], bytes = 0;
      SC_OK_OR_FAIL(sc_optimizer_bytes(&cfg, n, &bytes));
      assert_true(bytes >= 2 * n * sizeof(float)); /* room for m and v */
      assert_true(bytes >= prev);
      prev = bytes;
      /* poisoned, misaligned caller memory: init must set up clean state */
      for (size_t off = 0; off < 3; off++) {
        unsigned char *mem = malloc(bytes + off);
        assert_non_null(mem);
        memset(mem, 0xFF, bytes + off);
        sc_optimizer *oc = NULL, *ol = NULL;
        SC_OK_OR_FAIL(sc_optimizer_init(&oc, &cfg, n, mem + off, bytes));
        assert_non_null(oc);
        assert_true((unsigned char *)oc >= mem && (unsigned char *)oc < mem + bytes + off);
        SC_OK_OR_FAIL(sc_optimizer_create(&ol, &cfg, n));
        float *p1 = malloc(n * sizeof(float)), *p2 = malloc(n * sizeof(float));
        float *g = malloc(n * sizeof(float));
        assert_true(p1 && p2 && g);
        tu_fill_f32(p1, n, 77 + n, 1.0);
        memcpy(p2, p1, n * sizeof(float));
        for (int t = 0; t < 6; t++) {
          make_grad(g, n, 500 + (uint64_t)t, 0);
          SC_OK_OR_FAIL(sc_optimizer_step(oc, p1, g, n));
          SC_OK_OR_FAIL(sc_optimizer_step(ol, p2, g, n));
        }
        assert_memory_equal(p1, p2, n * sizeof(float));
        for (size_t k = 0; k < n; k++) assert_true(isfinite(p1[k]));
        sc_optimizer_destroy(oc); /* no-op for caller memory */
        sc_optimizer_destroy(ol);
        free(mem);
        free(p1);
        free(p2);
        free(g);
      }
    }
  }
  /* the caller-memory optimizer is checked against the reference too */
  sc_optim cfg = sc_sgd(0.1, 0.5);
  size_t n = 9, bytes = 0;
  SC_OK_OR_FAIL(sc_optimizer_bytes(&cfg, n, &bytes));
  unsigned char *mem = malloc(bytes);
  assert_non_null(mem);
  memset(mem, 0x7F, bytes);
  sc_optimizer *o = NULL;
  SC_OK_OR_FAIL(sc_optimizer_init(&o, &cfg, n, mem, bytes));
  float p[9], g[9];
  double pr[9];
  for (size_t k = 0; k < n; k++) pr[k] = p[k] = (float)k * 0.125f;
  ref_opt r;
  ref_init(&r, &cfg, n);
  for (int t = 1; t <= 4; t++) {
    make_grad(g, n, 900 + (uint64_t)t, 0);
    double pin[9], mag[9];
    for (size_t k = 0; k < n; k++) pin[k] = pr[k] = p[k];
    ref_step(&r, pr, g, mag);
    SC_OK_OR_FAIL(sc_optimizer_step(o, p, g, n));
    for (size_t k = 0; k < n; k++)
      check_delta("SGD caller memory", t, k, pin[k], p[k], pr[k], mag[k]);
  }
  ref_free(&r);
  free(mem);
}

static void test_reset(void **state) {
  (void)state;
  const size_t n = 45;
  for (int kind = 0; kind < 4; kind++) {
    sc_optim cfg = kind_cfg(kind);
    sc_optimizer *used = NULL, *fresh = NULL;
    SC_OK_OR_FAIL(sc_optimizer_create(&used, &cfg, n));
    SC_OK_OR_FAIL(sc_optimizer_create(&fresh, &cfg, n));
    float pw[45], p1[45], p2[45], g[45];
    /* build up state */
    tu_fill_f32(pw, n, 3, 1.0);
    for (int t = 0; t < 7; t++) {
      make_grad(g, n, 40 + (uint64_t)t, 0);
      SC_OK_OR_FAIL(sc_optimizer_step(used, pw, g, n));
    }
    SC_OK_OR_FAIL(sc_optimizer_reset(used));
    /* after reset: the same updates as a fresh optimizer, bit for bit (t restarts at 1,
     * so the bias corrections and SGD's buf = g' at t = 1 apply again) */
    tu_fill_f32(p1, n, 4, 1.0);
    memcpy(p2, p1, sizeof p1);
    for (int t = 0; t < 5; t++) {
      make_grad(g, n, 60 + (uint64_t)t, 0);
      SC_OK_OR_FAIL(sc_optimizer_step(used, p1, g, n));
      SC_OK_OR_FAIL(sc_optimizer_step(fresh, p2, g, n));
      assert_memory_equal(p1, p2, sizeof p1);
    }
    /* without the reset the result would differ (the test can tell) */
    SC_OK_OR_FAIL(sc_optimizer_reset(fresh));
    tu_fill_f32(p1, n, 4, 1.0);
    memcpy(p2, p1, sizeof p1);
    make_grad(g, n, 60, 0);
    SC_OK_OR_FAIL(sc_optimizer_step(used, p1, g, n));  /* used: t = 6 */
    SC_OK_OR_FAIL(sc_optimizer_step(fresh, p2, g, n)); /* fresh: t = 1 */
    if (kind != 3)
      assert_memory_not_equal(p1, p2, sizeof p1);
    else
      assert_memory_equal(p1, p2, sizeof p1); /* plain SGD has no state */
    sc_optimizer_destroy(used);
    sc_optimizer_destroy(fresh);
  }
}

/* sc_train's steps are sc_valgrad + sc_optimizer_step: full batch, bit for bit */
static void test_train_uses_optimizer(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(5, SC_TANH), sc_dense(2, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, L, 2));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  enum { N = 21 };
  float x[N * 3], t[N * 2], p1[64], p2[64], g[64];
  tu_fill_f32(x, N * 3, 1, 1.0);
  tu_fill_f32(t, N * 2, 2, 1.0);
  for (int kind = 0; kind < 4; kind++) {
    sc_optim cfg = kind_cfg(kind);
    SC_OK_OR_FAIL(sc_params_init(c, p1, np, 9));
    memcpy(p2, p1, np * sizeof(float));
    sc_train_opts o = sc_train_defaults();
    o.optim = cfg;
    o.epochs = 6;
    sc_data d = {x, t, N};
    sc_train_report rep;
    SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, p1, &d, &o, &rep));
    assert_int_equal(rep.steps, 6);
    sc_workspace *ws = NULL;
    sc_optimizer *opt = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, N));
    SC_OK_OR_FAIL(sc_optimizer_create(&opt, &cfg, np));
    for (int s = 0; s < 6; s++) {
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p2, x, t, N, NULL, g, NULL, ws));
      SC_OK_OR_FAIL(sc_optimizer_step(opt, p2, g, np));
    }
    assert_memory_equal(p1, p2, np * sizeof(float));
    sc_optimizer_destroy(opt);
    sc_workspace_destroy(ws);
  }
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adam_first_step_is_lr_sign),
      cmocka_unit_test(test_adam_single_step),
      cmocka_unit_test(test_adam_multi_step),
      cmocka_unit_test(test_adam_weight_decay),
      cmocka_unit_test(test_adamw),
      cmocka_unit_test(test_sgd_plain),
      cmocka_unit_test(test_sgd_momentum),
      cmocka_unit_test(test_sgd_weight_decay),
      cmocka_unit_test(test_caller_memory),
      cmocka_unit_test(test_reset),
      cmocka_unit_test(test_train_uses_optimizer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
