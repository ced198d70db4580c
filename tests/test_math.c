/* tests/test_math.c — accuracy of the float activations against double references.
 *
 * An activation is evaluated through the public API: a 1 -> 1 chain
 * dense_nobias(1, act) with p = {1.0f}, so y = act(0 + 1 * x) = act(x) exactly (the
 * dense layer adds x to a zero accumulator; only -0 turns into +0), forwarded over many
 * x in large batches; sc_pullback with dy = 1 gives act'(x) as the backward pass
 * computes it. Every ISA path is measured: each compiles its own activation code.
 *
 * Points: a uniform grid of 2^18 + 1 points over [-12, 12]; every 1999th float (by bit
 * pattern) in [-12, 12], which covers all binades down to the smallest subnormal; every
 * float in [8, 9] and [-9, -8] for tanh (every 17th for the others): just below tanh's
 * clamp at |x| = 9, where results approach the float spacing of 1 (an earlier rational
 * tanh peaked there, 6.09 ULP, with results above 1); every float in +-[0.34, 0.36],
 * around the switch between tanh's two formulas at |x| = 0.35; and special values: +-0,
 * tiny and subnormal, +-FLT_MAX and other huge values, and x = +-3.81238604, where an
 * exhaustive offline scan of all floats in [0, 9.5] found the largest error of the
 * current tanh (1.4984 ULP, with and without FMA contraction).
 *
 * ULP: the error |y - r| of the float result y against the double reference r, in units
 * of the float spacing at r (2^(e - 23) for 2^e <= |r| < 2^(e+1), 2^-149 for subnormal
 * r); 0.5 ULP is correct rounding.
 *
 * Tolerances of the values:
 *   tanh      max ULP <= 1.5 (simplechain.h refers here); also exactly +-1 for
 *             |x| >= 9 and never outside [-1, 1], as documented. The opt-in rational
 *             variants rat and ratrcp of the vector kernels (SC_TANH_VARIANT): max ULP <= 6
 *             (an exhaustive scan of [0, 9.5] found 5.41), the same range, oddness and +-1
 *             from |x| = 9.125. When the tests are
 *             built with SLEEF (SC_TEST_SLEEF), SLEEF's tanhf u35 is measured on the
 *             same points and ours must be at least as accurate: the condition
 *             for using our own tanh instead of SLEEF's (which is 3x slower here).
 *   sigmoid   |y - r| <= 1e-6 |r| + FLT_MIN   (1e-6 ~ 8 float eps: expf, an add and a
 *             divide, each <= 1 ULP; the FLT_MIN absolute term lets results whose true
 *             value is subnormal, e.g. sigmoid(-100) = 3.7e-44, flush to 0)
 *   softplus  the same
 *   gelu      |y - r| <= (1e-6 + 2^-21 |2u| (1 - sigmoid(2u))) |r| + 1e-37, with
 *             u = sqrt(2/pi) (x + 0.044715 x^3): gelu = x sigmoid(2u) (simplechain.h)
 *             inherits the relative error of its float argument 2u (a few roundings,
 *             <= 8 eps |2u| absolute) amplified by the condition number of
 *             sigmoid(2u), |2u| (1 - sigmoid(2u)): up to ~1e-5 in the negative tail
 *             (measured 1.03e-5 at x = -9.04), ~0 for x > 0. Results below 1e-37 may
 *             flush to -0 (expf overflows for 2|u| > 88.7, i.e. results below
 *             |x| e^-88.7).
 *             The double reference is written as x / (1 + exp(-2u)), the same
 *             function; 0.5 x (1 + tanh(u)) in double would round to -0 in the tail.
 *   silu      |y - r| <= 1e-6 |r| + 1e-36: x / (1 + exp(-x)) is expf, an add and a divide
 *             (each <= 1 ULP; the condition number of 1 / (1 + e) in e is 1 - sigmoid(x)
 *             <= 1, so exp's error is not amplified); results below 1e-36 may flush to -0
 *             (expf overflows for x < -88.7, where |silu(x)| < 2.8e-37).
 * Ranges and signs (exact): tanh in [-1, 1] and odd, sigmoid in [0, 1], softplus >=
 * max(x, 0), gelu(x) and silu(x) <= 0 for x <= 0 and in [0, x] for x >= 0; limits for huge
 * |x|.
 * Derivatives: see check_derivative.
 * NaN and Inf inputs cannot reach an activation: sc_forward rejects them with
 * SC_ERR_NONFINITE, which is tested instead.
 */
#include "testutil.h"

#include <float.h>
#ifdef SC_TEST_SLEEF
#include <sleef.h>
#endif

#define CHUNK 65536
#define TANH_MAX_ULP 1.5
#define TANH_RAT_MAX_ULP 6.0
#define NPATHS 10 /* tanh paths at most: scalar, and 4 variants on each vector kernel set */

/* ---------------------------------------------------------------- references */
static double ref_tanh(double x) { return tanh(x); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
/* 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)): the same function, written without the
 * cancellation of 1 + tanh(u) in the negative tail (where it would round to -0) */
static double ref_gelu(double x) {
  const double k0 = sqrt(2 / 3.14159265358979323846), k1 = 0.044715;
  return x / (1 + exp(-2 * k0 * (x + k1 * x * x * x)));
}

static double ref_silu(double x) { return x / (1 + exp(-x)); }

static double ulp_at(double r) {
  r = fabs(r);
  if (r < FLT_MIN) return 0x1p-149;
  if (r > FLT_MAX) r = FLT_MAX;
  int e;
  frexp(r, &e); /* r = m 2^e, 0.5 <= m < 1 */
  return ldexp(1.0, e - 24);
}

/* ---------------------------------------------------------------- evaluation */
typedef struct evaluator {
  sc_chain *c;
  sc_workspace *ws;
  float p[1];
} evaluator;

/* tanh variant for ev_open: NULL (the default plan), or a SC_TANH_VARIANT name */
static const char *ev_tanh_variant;
static void ev_open(evaluator *ev, const char *isa, sc_act act) {
  setenv("SC_ISA", isa, 1);
  if (ev_tanh_variant)
    setenv("SC_TANH_VARIANT", ev_tanh_variant, 1);
  else
    unsetenv("SC_TANH_VARIANT");
  sc_layer l = sc_dense_nobias(1, act);
  ev->c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&ev->c, 1, &l, 1));
  assert_string_equal(sc_chain_isa(ev->c), isa);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(ev->c, &np));
  assert_int_equal(np, 1);
  ev->p[0] = 1.0f;
  SC_OK_OR_FAIL(sc_workspace_create(&ev->ws, ev->c, CHUNK));
}
static void ev_close(evaluator *ev) {
  sc_workspace_destroy(ev->ws);
  sc_chain_destroy(ev->c);
  unsetenv("SC_ISA");
  unsetenv("SC_TANH_VARIANT");
}

/* the tanh paths: every kernel set, and on the vector ones every tanh variant; *variant
 * receives each path's SC_TANH_VARIANT (NULL for scalar) */
static int tanh_paths(const char *isa[NPATHS], const char *variant[NPATHS]) {
  const char *isas[3];
  int nisa = tu_isas(isas), n = 0;
  for (int i = 0; i < nisa; i++) {
    if (!strcmp(isas[i], "scalar")) {
      isa[n] = isas[i], variant[n++] = NULL;
      continue;
    }
    static const char *vs[] = {"div", "rcp", "rat", "ratrcp"};
    for (int v = 0; v < 4; v++) isa[n] = isas[i], variant[n++] = vs[v];
  }
  return n;
}
/* the stated bound of a tanh path */
static double tanh_bound(const char *variant) {
  return variant && !strncmp(variant, "rat", 3) ? TANH_RAT_MAX_ULP : TANH_MAX_ULP;
}
/* y[i] = act(x[i]), any n */
static void ev_run(evaluator *ev, const float *x, float *y, size_t n) {
  for (size_t at = 0; at < n; at += CHUNK) {
    size_t b = n - at < CHUNK ? n - at : CHUNK;
    SC_OK_OR_FAIL(sc_forward(ev->c, ev->p, x + at, b, y + at, ev->ws));
  }
}

/* the sweep points (see the header comment); *n receives the count. band_stride: 1 for
 * every float in +-[8, 9], more to thin that band out (tests other than tanh's) */
static float *sweep_points(size_t *n, uint32_t band_stride) {
  static const float special[] = {
      0.0f,    -0.0f,  1e-45f,  -1e-45f, 1e-40f,   -1e-40f,     FLT_MIN,     -FLT_MIN, 1e-30f,
      -1e-30f, 1e-10f, -1e-10f, 1e-4f,   -1e-4f,   9.0f,        -9.0f,       12.0f,    -12.0f,
      20.0f,   -20.0f, 88.0f,   -88.0f,  100.0f,   -100.0f,     1e6f,        -1e6f,    1e20f,
      -1e20f,  1e30f,  -1e30f,  FLT_MAX, -FLT_MAX, 3.81238604f, -3.81238604f};
  const size_t ngrid = (1u << 18) + 1;
  uint32_t b12, b8, b9, b034, b036;
  float f12 = 12.0f, f8 = 8.0f, f9 = 9.0f, f034 = 0.34f, f036 = 0.36f;
  memcpy(&b12, &f12, 4), memcpy(&b8, &f8, 4), memcpy(&b9, &f9, 4);
  memcpy(&b034, &f034, 4), memcpy(&b036, &f036, 4);
  const uint32_t stride = 1999;
  size_t nstride = b12 / stride + 1, nband = (b9 - b8) / band_stride + 1;
  size_t nswitch = (b036 - b034) / band_stride + 1;
  size_t cap = sizeof special / sizeof *special + ngrid + 2 * nstride + 2 * nband + 2 * nswitch;
  float *x = malloc(cap * sizeof *x);
  assert_non_null(x);
  size_t k = 0;
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) x[k++] = special[i];
  for (size_t i = 0; i < ngrid; i++)
    x[k++] = (float)(-12.0 + 24.0 * (double)i / (double)(ngrid - 1));
  for (uint32_t b = 0; b <= b12; b += stride) {
    float v;
    memcpy(&v, &b, 4);
    x[k++] = v;
    x[k++] = -v;
  }
  for (uint32_t b = b8; b <= b9; b += band_stride) {
    float v;
    memcpy(&v, &b, 4);
    x[k++] = v;
    x[k++] = -v;
  }
  for (uint32_t b = b034; b <= b036; b += band_stride) {
    float v;
    memcpy(&v, &b, 4);
    x[k++] = v;
    x[k++] = -v;
  }
  assert_true(k <= cap);
  *n = k;
  return x;
}

typedef struct errstats {
  double max_ulp, max_ulp_x;
  double max_rel, max_rel_x; /* relative error |y - r| / |r| (r != 0) */
  size_t n;
} errstats;

static void stats_add(errstats *s, float x, float y, double r) {
  double d = fabs((double)y - r);
  double u = d / ulp_at(r);
  if (u > s->max_ulp) s->max_ulp = u, s->max_ulp_x = x;
  if (r != 0 && d / fabs(r) > s->max_rel) s->max_rel = d / fabs(r), s->max_rel_x = x;
  s->n++;
}

/* ---------------------------------------------------------------- tests */
static void test_tanh_ulp(void **state) {
  (void)state;
  size_t n = 0;
  float *x = sweep_points(&n, 1), *y = malloc(n * sizeof *y);
  double *r = malloc(n * sizeof *r);
  assert_true(y && r);
  for (size_t i = 0; i < n; i++) r[i] = ref_tanh(x[i]);
  const char *isas[NPATHS], *vars[NPATHS];
  int nisa = tanh_paths(isas, vars);
  double worst = 0; /* of the accurate paths (div, rcp, scalar) */
  int over = 0;     /* paths over their bound */
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    ev_tanh_variant = vars[is];
    ev_open(&ev, isas[is], SC_TANH);
    ev_run(&ev, x, y, n);
    errstats s = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
      assert_true(isfinite(y[i]));
      stats_add(&s, x[i], y[i], r[i]);
    }
    /* exact at 0 (sign aside: the dense layer's zero accumulator turns -0 into +0) */
    assert_true(y[0] == 0.0f && y[1] == 0.0f);
    print_message("  tanh [%s%s%s]: max error %.3f ULP at x = %.9g (%zu points; bound %.2g)\n",
                  isas[is], vars[is] ? " " : "", vars[is] ? vars[is] : "", s.max_ulp, s.max_ulp_x,
                  s.n, tanh_bound(vars[is]));
    if (tanh_bound(vars[is]) == TANH_MAX_ULP && s.max_ulp > worst) worst = s.max_ulp;
    over += !(s.max_ulp <= tanh_bound(vars[is]));
    ev_close(&ev);
  }
  ev_tanh_variant = NULL;
#ifdef SC_TEST_SLEEF
  /* SLEEF's tanhf u35 (3.5-ULP bound) on the same points: ours must be no less accurate
   * (the default variants; the rational ones are an opt-in trade) */
  errstats sl = {0, 0, 0, 0, 0};
  for (size_t i = 0; i < n; i++) stats_add(&sl, x[i], Sleef_tanhf_u35(x[i]), r[i]);
  print_message("  tanh [SLEEF tanhf u35]: max error %.3f ULP at x = %.9g; ours %.3f\n", sl.max_ulp,
                sl.max_ulp_x, worst);
  assert_true(worst <= sl.max_ulp);
#endif
  free(x), free(y), free(r);
  assert_true(worst <= TANH_MAX_ULP);
  assert_int_equal(over, 0);
}

/* tanh maps into [-1, 1], is odd, and is exactly +-1 for |x| >= 9 (huge x included) */
static void test_tanh_range_and_symmetry(void **state) {
  (void)state;
  size_t n = 0;
  float *x = sweep_points(&n, 1), *y = malloc(n * sizeof *y), *ny = malloc(n * sizeof *ny);
  float *nx = malloc(n * sizeof *nx);
  assert_true(y && ny && nx);
  for (size_t i = 0; i < n; i++) nx[i] = -x[i];
  const char *isas[NPATHS], *vars[NPATHS];
  int nisa = tanh_paths(isas, vars);
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    ev_tanh_variant = vars[is];
    ev_open(&ev, isas[is], SC_TANH);
    ev_run(&ev, x, y, n);
    ev_run(&ev, nx, ny, n);
    size_t out_of_range = 0, first = n;
    for (size_t i = 0; i < n; i++) {
      if (!(y[i] >= -1.0f && y[i] <= 1.0f)) {
        if (first == n) first = i;
        out_of_range++;
      }
      if (y[i] != -ny[i])
        fail_msg("[%s %s] tanh(%.9g) = %.9g but tanh(%.9g) = %.9g: not odd", isas[is],
                 vars[is] ? vars[is] : "", (double)x[i], (double)y[i], (double)nx[i],
                 (double)ny[i]);
    }
    if (out_of_range)
      fail_msg("[%s] tanh outside [-1, 1] at %zu of %zu points, e.g. tanh(%.9g) = %.9g "
               "(|y| - 1 = %.3g)",
               isas[is], out_of_range, n, (double)x[first], (double)y[first],
               fabs((double)y[first]) - 1.0);
    /* documented: exactly +-1 for |x| >= 9.125 (so 1 - tanh^2, the backward factor, is
     * 0). tanh rounds to 1 in float from |x| = 9.011 on; the scalar path clamps at 9,
     * the vector paths at 9.125, where their result is the correctly rounded 1 - 2^-24 */
    size_t not_one = 0;
    for (size_t i = 0; i < n; i++)
      if (fabsf(x[i]) >= 9.125f && y[i] != (x[i] > 0 ? 1.0f : -1.0f) && not_one++ == 0)
        print_message("  [%s] tanh(%.9g) = %.9g, expected exactly %g\n", isas[is], (double)x[i],
                      (double)y[i], x[i] > 0 ? 1.0 : -1.0);
    assert_int_equal(not_one, 0);
    ev_close(&ev);
  }
  ev_tanh_variant = NULL;
  free(x), free(y), free(ny), free(nx);
}

typedef double (*ref_fn)(double);

static double u_of(double x) {
  return sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
}
static double du_of(double x) {
  return sqrt(2 / 3.14159265358979323846) * (1 + 3 * 0.044715 * x * x);
}

/* error bounds of the values (see the header comment) */
typedef double (*bound_fn)(double x, double r);
static double bound_sigmoid_softplus(double x, double r) {
  (void)x;
  return 1e-6 * fabs(r) + FLT_MIN;
}
static double bound_gelu(double x, double r) {
  double t = 2 * u_of(x), cond = fabs(t) / (1 + exp(t)); /* |2u| (1 - sigmoid(2u)) */
  return (1e-6 + 0x1p-21 * cond) * fabs(r) + 1e-37;
}
static double bound_silu(double x, double r) {
  (void)x;
  return 1e-6 * fabs(r) + 1e-36;
}

/* max over the sweep of |y - r| / bound(x, r), must be <= 1 */
static void check_act(sc_act act, const char *name, ref_fn ref, bound_fn bound) {
  size_t n = 0;
  float *x = sweep_points(&n, 17), *y = malloc(n * sizeof *y);
  double *r = malloc(n * sizeof *r);
  assert_true(y && r);
  for (size_t i = 0; i < n; i++) r[i] = ref(x[i]);
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    ev_open(&ev, isas[is], act);
    ev_run(&ev, x, y, n);
    errstats s = {0, 0, 0, 0, 0};
    double worst = 0, worst_x = 0;
    for (size_t i = 0; i < n; i++) {
      if (!isfinite(y[i]) && isfinite(r[i]))
        fail_msg("[%s] %s(%.9g) = %g, reference %.17g", isas[is], name, (double)x[i], (double)y[i],
                 r[i]);
      double bd = bound(x[i], r[i]);
      double q = fabs((double)y[i] - r[i]) / bd;
      if (!(q <= 1))
        fail_msg("[%s] %s(%.9g) = %.9g, reference %.17g: error %.3g > bound %.3g", isas[is], name,
                 (double)x[i], (double)y[i], r[i], fabs((double)y[i] - r[i]), bd);
      if (q > worst) worst = q, worst_x = x[i];
      if (fabs(r[i]) >= 1e-36 || r[i] == 0) /* not the results allowed to flush */
        stats_add(&s, x[i], y[i], r[i]);
    }
    print_message("  %s [%s]: max %.3f ULP at x = %.9g, max relative error %.3g at x = %.9g "
                  "(|result| >= 1e-36); worst error / bound %.3f at x = %.9g\n",
                  name, isas[is], s.max_ulp, s.max_ulp_x, s.max_rel, s.max_rel_x, worst, worst_x);
    ev_close(&ev);
  }
  free(x), free(y), free(r);
}

static void test_sigmoid(void **state) {
  (void)state;
  check_act(SC_SIGMOID, "sigmoid", ref_sigmoid, bound_sigmoid_softplus);
}
static void test_softplus(void **state) {
  (void)state;
  check_act(SC_SOFTPLUS, "softplus", ref_softplus, bound_sigmoid_softplus);
}
static void test_gelu(void **state) {
  (void)state;
  check_act(SC_GELU, "gelu", ref_gelu, bound_gelu);
}
static void test_silu(void **state) {
  (void)state;
  check_act(SC_SILU, "silu", ref_silu, bound_silu);
}

/* Limits for huge |x| and the sign / range facts that every float implementation of
 * these functions keeps: sigmoid in [0, 1], softplus >= max(x, 0), gelu(x) <= 0 for
 * x <= 0 and 0 <= gelu(x) <= x for x >= 0 (since 0 <= (1 + tanh) / 2 <= 1), and silu the
 * same (x times a sigmoid); silu(big) = big exactly (exp(-big) is 0 beside 1). Results
 * whose true value is below FLT_MIN may be flushed to 0. Every violation is printed. */
static const float BIG[] = {100.0f, 1e6f, 1e20f, FLT_MAX};
enum { NBIG = sizeof BIG / sizeof *BIG };

static void check_range(sc_act act, const char *name) {
  size_t n = 0;
  float *x = sweep_points(&n, 17), *y = malloc(n * sizeof *y);
  assert_non_null(y);
  const char *isas[3];
  int nisa = tu_isas(isas);
  size_t total_bad = 0;
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    float yp[NBIG], ym[NBIG], neg[NBIG];
    for (int i = 0; i < NBIG; i++) neg[i] = -BIG[i];
    ev_open(&ev, isas[is], act);
    ev_run(&ev, BIG, yp, NBIG);
    ev_run(&ev, neg, ym, NBIG);
    for (int i = 0; i < NBIG; i++) {
      /* act(+big) = 1 (sigmoid) or big (softplus, gelu, silu; gelu within 4 ULP); act(-big)
       * in [-FLT_MIN, FLT_MIN] (the true values are below 4e-44 in magnitude) */
      float want = act == SC_SIGMOID ? 1.0f : BIG[i];
      int okp = act == SC_GELU ? fabs((double)yp[i] - want) <= 0x1p-21 * want : yp[i] == want;
      int okm = fabsf(ym[i]) <= FLT_MIN;
      if (act == SC_SIGMOID || act == SC_SOFTPLUS) okm = okm && ym[i] >= 0.0f;
      if (!okp)
        print_message("  [%s] %s(%g) = %.9g, expected %.9g\n", isas[is], name, (double)BIG[i],
                      (double)yp[i], (double)want);
      if (!okm)
        print_message("  [%s] %s(%g) = %.9g, expected 0 (within FLT_MIN)\n", isas[is], name,
                      (double)neg[i], (double)ym[i]);
      total_bad += !okp + !okm;
    }
    ev_run(&ev, x, y, n);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++) {
      int ok;
      if (act == SC_SIGMOID)
        ok = y[i] >= 0.0f && y[i] <= 1.0f;
      else if (act == SC_SOFTPLUS)
        ok = y[i] >= 0.0f && y[i] >= x[i];
      else
        ok = x[i] <= 0 ? y[i] <= 0.0f : (y[i] >= 0.0f && y[i] <= x[i]);
      if (!ok && bad++ == 0) first = i;
    }
    if (bad)
      print_message("  [%s] %s sign/range violated at %zu of %zu points, e.g. %s(%.9g) = %.9g\n",
                    isas[is], name, bad, n, name, (double)x[first], (double)y[first]);
    total_bad += bad;
    ev_close(&ev);
  }
  free(x), free(y);
  assert_int_equal(total_bad, 0);
}

static void test_sigmoid_range(void **state) {
  (void)state;
  check_range(SC_SIGMOID, "sigmoid");
}
static void test_softplus_range(void **state) {
  (void)state;
  check_range(SC_SOFTPLUS, "softplus");
}
static void test_gelu_range(void **state) {
  (void)state;
  check_range(SC_GELU, "gelu");
}
static void test_silu_range(void **state) {
  (void)state;
  check_range(SC_SILU, "silu");
}

/* gelu and silu for large negative x: the true values are -0 in float, or nearly (|gelu(x)| <
 * 1e-30 for x <= -10, |silu(x)| < 5e-4 at -10 and < 8e-42 from -100 on); an absolute error of
 * tol is allowed. Every violation is printed. */
static void check_negative_tail(sc_act act, const char *name, double (*ref)(double)) {
  static const float xs[] = {-10.0f, -12.0f, -20.0f, -100.0f, -1e6f, -1e20f, -FLT_MAX};
  enum { NX = sizeof xs / sizeof *xs };
  const char *isas[3];
  int nisa = tu_isas(isas);
  size_t bad = 0;
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    float y[NX];
    ev_open(&ev, isas[is], act);
    ev_run(&ev, xs, y, NX);
    for (int i = 0; i < NX; i++) {
      double r = ref((double)xs[i]), tol = 1e-6 * fabs(r) + 1e-36;
      if (act == SC_GELU) r = 0, tol = 1e-6;
      if (!(fabs((double)y[i] - r) <= tol) || !(y[i] <= 0.0f)) {
        print_message("  [%s] %s(%g) = %.9g, expected %.9g (|error| <= %.3g, <= 0)\n", isas[is],
                      name, (double)xs[i], (double)y[i], r, tol);
        bad++;
      }
    }
    ev_close(&ev);
  }
  assert_int_equal(bad, 0);
}
static void test_gelu_negative_tail(void **state) {
  (void)state;
  check_negative_tail(SC_GELU, "gelu", ref_gelu);
}
static void test_silu_negative_tail(void **state) {
  (void)state;
  check_negative_tail(SC_SILU, "silu", ref_silu);
}

/* Derivatives, as the backward pass computes them: for the 1 -> 1 chain with w = 1,
 * sc_pullback with dy = 1 gives gx = act'(x). Compared with the double derivative:
 *   tanh'     |d - r| <= 1e-5 |r| + 2^-20: the float path uses 1 - a^2 from the forward
 *             a, and a 1.5 ULP error in a (9e-8 near +-1) gives ~2e-7 < 2^-20 in 1 - a^2
 *   sigmoid'  |d - r| <= 1e-5 |r| + 2^-22   (a (1 - a) from the forward a)
 *   softplus' |d - r| <= 1e-5 |r| + 2^-22   (-expm1(-a) from the forward a)
 *   gelu'     r = s + 2 x u' s (1 - s) with s = sigmoid(2u); the two terms cancel (r
 *             crosses 0 near x = -0.75), so the bound is relative to their magnitudes
 *             T = s + |2 x u' s (1 - s)|: |d - r| <= (1e-5 + 2^-21 |2u| (1 - s)) T +
 *             1e-30, where |2u| (1 - s) is the condition number of exp(-2u) as for
 *             the values. Derivatives below 1e-30 (x < -9.5) are only checked in
 *             absolute terms: there the float formula loses s (1 - s) ~ e^-150 to
 *             underflow, which is harmless.
 *   silu'     r = s + x s (1 - s) with s = sigmoid(x), the two terms cancelling near x = -2.4:
 *             |d - r| <= 1e-5 T + 1e-30 with T = s + |x s (1 - s)| (exp(-x)'s error is not
 *             amplified: s and s (1 - s) have condition numbers below 1 in it).
 * The tails must be right: gelu' and silu' -> 1 for x >> 0, -> 0
 * for x << 0 (a tanh that saturates to 1 - 2^-23 instead of 1 would make x^3 (1 - tanh^2) grow
 * without bound). And the signs: tanh', sigmoid', softplus' >= 0 everywhere. Points: the sweep plus
 * the special values up to |x| = 1e6. Violations are printed (up to 4 per path). */

static double dref(sc_act act, double x) {
  switch (act) {
  case SC_TANH: {
    double ch = cosh(x);
    return 1 / (ch * ch);
  }
  case SC_SIGMOID: {
    double e = exp(-fabs(x));
    return e / ((1 + e) * (1 + e));
  }
  case SC_SOFTPLUS: return ref_sigmoid(x);
  case SC_GELU: { /* with s = sigmoid(2u): 0.5 (1 + tanh u) = s, 1 - tanh^2 = 4 s (1 - s) */
    double s = 1 / (1 + exp(-2 * u_of(x))), sm = 1 / (1 + exp(2 * u_of(x)));
    return s + 2 * x * s * sm * du_of(x);
  }
  case SC_SILU: {
    double s = 1 / (1 + exp(-x)), sm = 1 / (1 + exp(x)); /* sm = 1 - s, without cancellation */
    return s + x * s * sm;
  }
  default: return NAN;
  }
}

static double dbound(sc_act act, double x, double r) {
  switch (act) {
  case SC_TANH: return 1e-5 * fabs(r) + 0x1p-20;
  case SC_GELU: { /* relative to the sum of the magnitudes of the two terms of r */
    double t = 2 * u_of(x), sg = 1 / (1 + exp(-t)), sm = 1 / (1 + exp(t));
    double terms = sg + fabs(2 * x * sg * sm * du_of(x));
    return (1e-5 + 0x1p-21 * fabs(t) * sm) * terms + 1e-30;
  }
  case SC_SILU: {
    double s = 1 / (1 + exp(-x)), sm = 1 / (1 + exp(x));
    return 1e-5 * (s + fabs(x * s * sm)) + 1e-30;
  }
  default: return 1e-5 * fabs(r) + 0x1p-22;
  }
}

static void check_derivative(sc_act act, const char *name) {
  size_t n0 = 0, n = 0;
  float *x0 = sweep_points(&n0, act == SC_TANH ? 1 : 17), *x = malloc(n0 * sizeof *x);
  assert_non_null(x);
  for (size_t i = 0; i < n0; i++)
    if (fabsf(x0[i]) <= 1e6f) x[n++] = x0[i];
  float *d = malloc(n * sizeof *d), *ones = malloc(CHUNK * sizeof *ones);
  assert_true(d && ones);
  for (size_t i = 0; i < CHUNK; i++) ones[i] = 1.0f;
  const char *isas[NPATHS], *vars[NPATHS] = {NULL};
  int nisa = act == SC_TANH ? tanh_paths(isas, vars) : tu_isas(isas); /* tanh: every variant */
  size_t bad_total = 0;
  for (int is = 0; is < nisa; is++) {
    evaluator ev;
    ev_tanh_variant = vars[is];
    ev_open(&ev, isas[is], act);
    for (size_t at = 0; at < n; at += CHUNK) {
      size_t b = n - at < CHUNK ? n - at : CHUNK;
      SC_OK_OR_FAIL(sc_pullback(ev.c, ev.p, x + at, ones, b, NULL, d + at, ev.ws));
    }
    size_t bad = 0, neg = 0;
    double worst = 0, worst_x = 0, worst_d = 0;
    for (size_t i = 0; i < n; i++) {
      double r = dref(act, x[i]), bound = dbound(act, x[i], r);
      double q = fabs((double)d[i] - r) / bound;
      int sign_ok = act == SC_GELU || act == SC_SILU || d[i] >= 0.0f;
      if (!(q <= 1) || !sign_ok) {
        if (bad < 4)
          print_message("  [%s] %s'(%.9g) = %.9g, reference %.9g (error %.3g, bound %.3g)\n",
                        isas[is], name, (double)x[i], (double)d[i], r, fabs((double)d[i] - r),
                        bound);
        bad++;
        neg += !sign_ok;
      }
      if (q > worst) worst = q, worst_x = x[i], worst_d = d[i];
    }
    print_message("  %s' [%s%s%s]: worst error / bound %.3g at x = %.9g (%s' = %.9g, reference "
                  "%.9g); %zu of %zu points out of bounds, %zu with a negative derivative\n",
                  name, isas[is], vars[is] ? " " : "", vars[is] ? vars[is] : "", worst, worst_x,
                  name, worst_d, dref(act, worst_x), bad, n, neg);
    bad_total += bad;
    ev_close(&ev);
  }
  ev_tanh_variant = NULL;
  free(x0), free(x), free(d), free(ones);
  assert_int_equal(bad_total, 0);
}

static void test_tanh_derivative(void **state) {
  (void)state;
  check_derivative(SC_TANH, "tanh");
}
static void test_sigmoid_derivative(void **state) {
  (void)state;
  check_derivative(SC_SIGMOID, "sigmoid");
}
static void test_softplus_derivative(void **state) {
  (void)state;
  check_derivative(SC_SOFTPLUS, "softplus");
}
static void test_gelu_derivative(void **state) {
  (void)state;
  check_derivative(SC_GELU, "gelu");
}
static void test_silu_derivative(void **state) {
  (void)state;
  check_derivative(SC_SILU, "silu");
}

/* NaN and Inf inputs are rejected, naming the sample, before any activation runs */
/* The double tanh (ours since d1322ca, in place of libm's and SLEEF's u10), on every kernel
 * path through sc_forward_f64 and through sc_apply_f64 (the one-state path), against tanhl
 * (x87 long double: 64-bit significands, a reference 2^11 times finer than double). Points: a
 * grid over [-21, 21], every 2^40-th double of [2^-30, 21] by bit pattern (all binades), a dense
 * band around the switch at |x| = 0.35, and the scale just below the clamp (19.06 .. 19.1).
 * Bound: TANH_F64_MAX_ULP; also odd, in [-1, 1], exactly +-1 from |x| = 19.1 on, 0 at 0. */
#define TANH_F64_MAX_ULP 2.0
static double ulp_f64(double y, long double r) {
  int e;
  frexpl(r, &e);
  long double u = ldexpl(1.0L, e - 53);
  return (double)(fabsl((long double)y - r) / u);
}
static void test_tanh_f64_ulp(void **state) {
  (void)state;
  size_t cap = 1000000, n = 0;
  double *x = malloc(cap * sizeof *x);
  assert_non_null(x);
  for (int i = 0; i <= 200000; i++) x[n++] = -21.0 + 42.0 * i / 200000.0;
  uint64_t lo = 0x3e10000000000000u, hi = 0x4035000000000000u; /* 2^-30 .. 21 */
  for (uint64_t u = lo; u < hi && n + 2 < cap; u += (uint64_t)1 << 40) {
    double v;
    memcpy(&v, &u, sizeof v);
    x[n++] = v, x[n++] = -v;
  }
  for (int i = 0; i < 100000 && n < cap; i++) x[n++] = 0.34 + 0.02 * i / 100000.0;
  for (int i = 0; i < 50000 && n < cap; i++) x[n++] = 19.0 + 0.2 * i / 50000.0;
  /* random points, log-uniform in each band (a fixed seed): the grids above missed errors of
   * 2.8 ULP near 19 and 1.96 near 0.2 that a faulty variant made */
  static const double band[] = {1e-300, 1e-10, 1e-3, 0.1, 0.3, 0.35, 0.5, 1, 2, 4, 8, 16, 19.2};
  uint64_t seed = 0x5eed7a9bu;
  for (int b = 0; b < 12; b++)
    for (int i = 0; i < 25000 && n < cap; i++) {
      seed = seed * 6364136223846793005u + 1442695040888963407u;
      double u = (double)(seed >> 11) / 9007199254740992.0;
      double v = band[b] * pow(band[b + 1] / band[b], u);
      x[n++] = (i & 1) ? -v : v;
    }
  double *y = malloc(n * sizeof *y), *yo = malloc(sizeof *yo);
  assert_true(y && yo);
  const char *isas[3];
  int nisa = tu_isas(isas);
  double worst = 0;
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_layer l = sc_dense_nobias(1, SC_TANH);
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, 1, &l, 1));
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, CHUNK));
    double p[1] = {1.0};
    for (size_t at = 0; at < n; at += CHUNK)
      SC_OK_OR_FAIL(sc_forward_f64(c, p, x + at, n - at < CHUNK ? n - at : CHUNK, y + at, ws));
    double mx = 0, mx_x = 0;
    for (size_t i = 0; i < n; i++) {
      long double r = tanhl((long double)x[i]);
      double e = ulp_f64(y[i], r);
      if (e > mx) mx = e, mx_x = x[i];
      if (!(y[i] >= -1.0 && y[i] <= 1.0))
        fail_msg("[%s] tanh(%.17g) = %.17g", isas[is], x[i], y[i]);
      if (fabs(x[i]) >= 19.1 && fabs(y[i]) != 1.0)
        fail_msg("[%s] tanh(%.17g) = %.17g, expected exactly +-1", isas[is], x[i], y[i]);
      if (i % 97 == 0) { /* the one-state path: the same function */
        SC_OK_OR_FAIL(sc_apply_f64(c, p, x + i, yo, ws));
        if (ulp_f64(*yo, r) > TANH_F64_MAX_ULP)
          fail_msg("[%s] sc_apply_f64: tanh(%.17g) = %.17g", isas[is], x[i], *yo);
      }
    }
    for (size_t i = 0; i + 1 < n; i += 2) /* the bit-pattern points come in +- pairs */
      if (x[i] == -x[i + 1] && y[i] != -y[i + 1])
        fail_msg("[%s] tanh not odd at %.17g", isas[is], x[i]);
    print_message("  tanh f64 [%s]: max error %.3f ULP at x = %.17g (%zu points; bound %.1f)\n",
                  isas[is], mx, mx_x, n, TANH_F64_MAX_ULP);
    if (mx > worst) worst = mx;
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    unsetenv("SC_ISA");
  }
  free(x), free(y), free(yo);
  assert_true(worst <= TANH_F64_MAX_ULP);
}

static void test_nonfinite_rejected(void **state) {
  (void)state;
  static const sc_act acts[5] = {SC_TANH, SC_SIGMOID, SC_SOFTPLUS, SC_GELU, SC_SILU};
  const char *isas[3];
  int nisa = tu_isas(isas);
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  static const char *bad_word[3] = {"NaN", "Inf", "Inf"};
  for (int is = 0; is < nisa; is++)
    for (int a = 0; a < 5; a++) {
      evaluator ev;
      ev_open(&ev, isas[is], acts[a]);
      float x[37], y[37];
      for (int b = 0; b < 3; b++) {
        for (int i = 0; i < 37; i++) x[i] = 0.25f * (float)(i - 18);
        for (int i = 0; i < 37; i++) y[i] = 42.0f;
        size_t at = (size_t)(5 + 13 * b);
        x[at] = bad[b];
        SC_EXPECT(SC_ERR_NONFINITE, sc_forward(ev.c, ev.p, x, 37, y, ev.ws));
        char want[32];
        snprintf(want, sizeof want, "sample %zu", at);
        if (!strstr(sc_last_error(), want) || !strstr(sc_last_error(), bad_word[b]))
          fail_msg("message '%s' should name %s and %s", sc_last_error(), want, bad_word[b]);
        /* finite inputs work again on the same workspace */
        x[at] = 0.5f;
        SC_OK_OR_FAIL(sc_forward(ev.c, ev.p, x, 37, y, ev.ws));
        for (int i = 0; i < 37; i++) assert_true(isfinite(y[i]));
      }
      ev_close(&ev);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tanh_ulp),
      cmocka_unit_test(test_tanh_range_and_symmetry),
      cmocka_unit_test(test_sigmoid),
      cmocka_unit_test(test_softplus),
      cmocka_unit_test(test_gelu),
      cmocka_unit_test(test_sigmoid_range),
      cmocka_unit_test(test_softplus_range),
      cmocka_unit_test(test_gelu_range),
      cmocka_unit_test(test_gelu_negative_tail),
      cmocka_unit_test(test_silu),
      cmocka_unit_test(test_silu_range),
      cmocka_unit_test(test_silu_negative_tail),
      cmocka_unit_test(test_tanh_derivative),
      cmocka_unit_test(test_tanh_f64_ulp),
      cmocka_unit_test(test_sigmoid_derivative),
      cmocka_unit_test(test_softplus_derivative),
      cmocka_unit_test(test_gelu_derivative),
      cmocka_unit_test(test_silu_derivative),
      cmocka_unit_test(test_nonfinite_rejected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
