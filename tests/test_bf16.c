/* tests/test_bf16.c — the bfloat16 precisions: the float <-> bf16 conversions,
 * sc_workspace_set_precision and its errors, and SC_PRECISION_BF16_EMULATED against a
 * reference computed here in double on the same bf16-rounded operands (tight tolerance) and
 * against the fp32 path (looser tolerance), on every kernel set, the same bits on 1 and 2
 * threads, and a short training run that learns. */
#include "testutil.h"

/* the bf16 of x by arithmetic (not by bits): the nearest number with an 8-bit significand,
 * ties to even (rint in the default rounding mode), zeros for float denormals, as
 * VCVTNEPS2BF16 does; x finite */
static float ref_bf16(float x) {
  if (x == 0 || fabsf(x) < 0x1p-126f) return copysignf(0.0f, x);
  int e;
  frexp((double)x, &e); /* |x| = m 2^e, m in [0.5, 1) */
  double q = ldexp(1.0, e - 8);
  double y = rint((double)x / q) * q;
  return (float)y; /* exact, or +-Inf when y passes FLT_MAX's binade */
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static float fof(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void test_convert(void **state) {
  (void)state;
  /* special values */
  assert_int_equal(sc_bf16_from_float(0.0f), 0x0000);
  assert_int_equal(sc_bf16_from_float(-0.0f), 0x8000);
  assert_int_equal(sc_bf16_from_float(1.0f), 0x3f80);
  assert_int_equal(sc_bf16_from_float(fof(0x00000001u)), 0x0000); /* denormal: zero */
  assert_int_equal(sc_bf16_from_float(fof(0x807fffffu)), 0x8000);
  assert_int_equal(sc_bf16_from_float(INFINITY), 0x7f80);
  assert_int_equal(sc_bf16_from_float(-INFINITY), 0xff80);
  assert_int_equal(sc_bf16_from_float(fof(0x7f800001u)), 0x7fc0); /* signalling NaN: quiet */
  assert_int_equal(sc_bf16_from_float(fof(0xffc00000u)), 0xffc0);
  assert_int_equal(sc_bf16_from_float(fof(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds up */
  assert_int_equal(sc_bf16_from_float(fof(0x3f808000u)), 0x3f80); /* tie: to even */
  assert_int_equal(sc_bf16_from_float(fof(0x3f818000u)), 0x3f82);
  assert_int_equal(sc_bf16_from_float(fof(0x3f808001u)), 0x3f81);
  assert_int_equal(sc_bf16_from_float(fof(0x00800000u)), 0x0080); /* smallest normal */
  /* bf16 -> float is exact: every non-NaN pattern comes back */
  for (uint32_t b = 0; b < 65536; b++) {
    float f = sc_float_from_bf16((uint16_t)b);
    if (isnan(f)) continue;
    assert_int_equal(fbits(f), b << 16);
    /* back again, but denormals (exponent 0) become zeros of their sign */
    assert_int_equal(sc_bf16_from_float(f), (b & 0x7f80u) ? b : (b & 0x8000u));
  }
  /* 2^24 float patterns (every high 16-bit pattern, 256 low halves each, ties included)
   * against the arithmetic reference */
  uint64_t s = 42;
  size_t bad = 0;
  for (uint32_t hi = 0; hi < 65536; hi++)
    for (int k = 0; k < 256; k++) {
      uint32_t lo = k == 0 ? 0x8000u : k == 1 ? 0x7fffu : (uint32_t)(tu_unif(&s) * 32768 + 32768);
      float x = fof(hi << 16 | (lo & 0xffffu));
      if (!isfinite(x)) continue;
      uint16_t got = sc_bf16_from_float(x), want = (uint16_t)(fbits(ref_bf16(x)) >> 16);
      if (got != want && bad++ < 5)
        print_error("bf16(%a = 0x%08x) = 0x%04x, expected 0x%04x\n", (double)x, fbits(x), got,
                    want);
    }
  assert_int_equal(bad, 0);
}

/* the rounding of a tile on every kernel set (the vector sets have their own), bit for bit
 * against sc_bf16_from_float: an identity dense layer with W = I returns the rounded input.
 * Ties of both parities, values one below a tie, denormals (to zeros; their sign is lost in the
 * sum W x), -0,
 * values that round up into the next binade, and random ones. */
static void test_emulated_rounding(void **state) {
  (void)state;
  enum { N = 40, B = 45 };
  float *x = malloc(N * B * sizeof *x), *y = malloc(N * B * sizeof *y);
  assert_true(x && y);
  uint64_t s = 31;
  for (size_t k = 0; k < N * B; k++) {
    uint32_t hi = (uint32_t)((tu_unif(&s) + 1) * 0x3f00) + 0x1000u, sg = (k & 1u) << 31;
    uint32_t u;
    switch (k % 8) {
    case 0: u = hi << 16 | 0x8000u; break;                        /* a tie */
    case 1: u = (hi | 1u) << 16 | 0x8000u; break;                 /* a tie, odd: rounds up */
    case 2: u = hi << 16 | 0x7fffu; break;                        /* just below a tie */
    case 3: u = (uint32_t)(k * 2654435761u) & 0x007fffffu; break; /* denormal (or 0) */
    case 4: u = 0; break;                                         /* -0 or +0 */
    case 5: u = hi << 16 | 0xffffu; break; /* rounds up, maybe into the next binade */
    default: u = (uint32_t)(tu_unif(&s) * 1e9) ^ (hi << 16);
    }
    u = (u & 0x7fffffffu) | sg;
    if ((u & 0x7f800000u) == 0x7f800000u) u = 0x3f800000u | sg;
    memcpy(&x[k], &u, sizeof u);
  }
  sc_layer L[] = {sc_dense(N, SC_IDENTITY)};
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, N, L, 1));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float *p = calloc(np, sizeof *p);
    assert_true(p);
    for (size_t i = 0; i < N; i++) p[i * N + i] = 1.0f; /* W = I, b = 0 */
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16_EMULATED));
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, y, ws));
    size_t bad = 0;
    for (size_t k = 0; k < N * B; k++) {
      uint32_t want = (uint32_t)sc_bf16_from_float(x[k]) << 16, got;
      memcpy(&got, &y[k], sizeof got);
      if ((want & 0x7fffffffu) == 0) got &= 0x7fffffffu, want = 0; /* W x: 0 + -0 is +0 */
      if (got != want && bad++ < 5)
        print_error("[%s] x = 0x%08x: 0x%08x, expected 0x%08x\n", isas[is], fbits(x[k]), got, want);
    }
    print_message("  [%s] %d inputs rounded, %zu wrong\n", isas[is], N * B, bad);
    assert_int_equal(bad, 0);
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    free(p);
  }
  unsetenv("SC_ISA");
  free(x), free(y);
}

/* the test's own check of the CPU, apart from the library's: AVX512_BF16 (CPUID leaf 7
 * subleaf 1, EAX bit 5) with the AVX-512 state saved by the OS */
static int cpu_has_bf16(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned a, b, c, d;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return 0;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0u), "c"(0u));
  if (a < 7) return 0;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7u), "c"(1u));
  return (a >> 5) & 1u;
#else
  return 0;
#endif
}

static void test_precision_api(void **state) {
  (void)state;
  unsetenv("SC_BF16_KERNELS"); /* the kernels' test hook: off here */
  sc_layer L[] = {sc_dense(4, SC_TANH), sc_dense(2, SC_IDENTITY)};
  sc_chain *c = NULL;
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, L, 2));
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 8));
  sc_precision pr = (sc_precision)7;
  SC_OK_OR_FAIL(sc_workspace_precision(ws, &pr));
  assert_int_equal(pr, SC_PRECISION_FP32);
  SC_EXPECT(SC_ERR_NULL, sc_workspace_set_precision(NULL, SC_PRECISION_FP32));
  SC_EXPECT(SC_ERR_NULL, sc_workspace_precision(ws, NULL));
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_precision(ws, (sc_precision)3));
  assert_non_null(strstr(sc_last_error(), "precision = 3"));
  /* native bf16: taken where the CPU has AVX512_BF16, refused elsewhere naming why */
  const int has_bf16 = cpu_has_bf16();
  print_message("  this CPU %s AVX512_BF16\n", has_bf16 ? "has" : "lacks");
  if (has_bf16) {
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    SC_OK_OR_FAIL(sc_workspace_precision(ws, &pr));
    assert_int_equal(pr, SC_PRECISION_BF16);
    setenv("SC_BF16_KERNELS", "native", 1); /* the same, asked for by name */
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    unsetenv("SC_BF16_KERNELS");
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_FP32));
  } else {
    SC_EXPECT(SC_ERR_UNSUPPORTED, sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    assert_non_null(strstr(sc_last_error(), "AVX512_BF16"));
    assert_non_null(strstr(sc_last_error(), "EMULATED"));
    SC_OK_OR_FAIL(sc_workspace_precision(ws, &pr));
    assert_int_equal(pr, SC_PRECISION_FP32); /* unchanged by the refusal */
    setenv("SC_BF16_KERNELS", "native", 1);  /* asked for by name: the same refusal */
    SC_EXPECT(SC_ERR_UNSUPPORTED, sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    unsetenv("SC_BF16_KERNELS");
  }
  setenv("SC_BF16_KERNELS", "tiles", 1); /* not a kind of kernel */
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_precision(ws, SC_PRECISION_BF16));
  assert_non_null(strstr(sc_last_error(), "'tiles'"));
  setenv("SC_BF16_KERNELS", "model", 1);
  setenv("SC_BF16_LAYERS", "some", 1); /* neither auto nor all */
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_precision(ws, SC_PRECISION_BF16));
  assert_non_null(strstr(sc_last_error(), "SC_BF16_LAYERS='some'"));
  SC_OK_OR_FAIL(sc_workspace_precision(ws, &pr));
  assert_int_equal(pr, SC_PRECISION_FP32); /* unchanged by the refusal */
  unsetenv("SC_BF16_LAYERS");
  setenv("SC_BF16_POOL_FOLD", "yes", 1); /* neither 0 nor 1 */
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_precision(ws, SC_PRECISION_BF16));
  assert_non_null(strstr(sc_last_error(), "SC_BF16_POOL_FOLD='yes'"));
  unsetenv("SC_BF16_POOL_FOLD");
  setenv("SC_BF16_KERNELS", "amx", 1); /* the AMX GEMM: refused where the CPU lacks AMX */
  if (sc_workspace_set_precision(ws, SC_PRECISION_BF16) != SC_OK) {
    assert_non_null(strstr(sc_last_error(), "AMX"));
    print_message("  SC_BF16_KERNELS=amx refused here: %s\n", sc_last_error());
  }
  unsetenv("SC_BF16_KERNELS");
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_FP32));
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16_EMULATED));
  SC_OK_OR_FAIL(sc_workspace_precision(ws, &pr));
  assert_int_equal(pr, SC_PRECISION_BF16_EMULATED);
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_FP32));
  assert_string_equal(sc_precision_name(SC_PRECISION_FP32), "fp32");
  assert_string_equal(sc_precision_name(SC_PRECISION_BF16), "bf16");
  assert_string_equal(sc_precision_name(SC_PRECISION_BF16_EMULATED), "bf16-emulated");
  assert_null(sc_precision_name((sc_precision)-1));
  /* sc_train: the option is checked; sc_train_f64 takes only fp32 */
  double xd[8 * 3] = {0}, yd[8 * 2] = {0};
  double pd[64];
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  assert_true(np <= 64);
  SC_OK_OR_FAIL(sc_params_init_f64(c, pd, np, 1));
  sc_data_f64 dd = {xd, yd, 8};
  sc_train_opts o = sc_train_defaults();
  o.precision = SC_PRECISION_BF16_EMULATED;
  SC_EXPECT(SC_ERR_ARG, sc_train_f64(c, SC_LOSS_SQUARED, pd, &dd, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "double"));
  float xf[8 * 3] = {0}, yf[8 * 2] = {0}, pf[64];
  SC_OK_OR_FAIL(sc_params_init(c, pf, np, 1));
  sc_data df = {xf, yf, 8};
  o.precision = (sc_precision)9;
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  o.precision = SC_PRECISION_BF16;
  if (has_bf16)
    SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  else
    SC_EXPECT(SC_ERR_UNSUPPORTED, sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  o.precision = SC_PRECISION_BF16_EMULATED;
  SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, pf, &df, &o, NULL));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
}

/* ------------------------------------------------------------ the double reference */
/* An MLP (dense layers, biases), squared loss averaged over the batch, with the emulated
 * precision's roundings: the input, each weight, each layer output that feeds another layer
 * (in place: the activation derivative sees the rounded value), and each layer's dz before
 * the dW and dx products (after the bias gradient). Everything else in double. */
#define NL 3
static const size_t DIMS[NL + 1] = {5, 7, 6, 3};
static const sc_act ACTS[NL] = {SC_TANH, SC_RELU, SC_IDENTITY};
#define MAXW 8

static double rb(double v, int bf) { return bf ? (double)ref_bf16((float)v) : v; }

static double ref_valgrad(const float *p, const float *x, const float *t, size_t B, int bf,
                          double *g) {
  size_t np = 0;
  for (int l = 0; l < NL; l++) np += DIMS[l + 1] * DIMS[l] + DIMS[l + 1];
  memset(g, 0, np * sizeof *g);
  double loss = 0;
  for (size_t b = 0; b < B; b++) {
    double a[NL + 1][MAXW];
    for (size_t i = 0; i < DIMS[0]; i++) a[0][i] = rb(x[b * DIMS[0] + i], bf);
    size_t off = 0;
    for (int l = 0; l < NL; l++) {
      size_t I = DIMS[l], O = DIMS[l + 1];
      for (size_t o = 0; o < O; o++) {
        double z = p[off + O * I + o];
        for (size_t i = 0; i < I; i++) z += rb(p[off + o * I + i], bf) * a[l][i];
        double v = tu_ref_act(ACTS[l], z);
        a[l + 1][o] = l + 1 < NL ? rb(v, bf) : v;
      }
      off += O * I + O;
    }
    double d[MAXW];
    for (size_t j = 0; j < DIMS[NL]; j++) {
      double e = a[NL][j] - t[b * DIMS[NL] + j];
      loss += e * e / (double)B;
      d[j] = 2 * e / (double)B;
    }
    for (int l = NL - 1; l >= 0; l--) {
      size_t I = DIMS[l], O = DIMS[l + 1];
      off -= O * I + O;
      double nd[MAXW] = {0};
      for (size_t o = 0; o < O; o++) {
        double av = a[l + 1][o], dz = d[o];
        if (ACTS[l] == SC_TANH) dz *= 1 - av * av;
        if (ACTS[l] == SC_RELU) dz *= av > 0;
        g[off + O * I + o] += dz;
        dz = rb(dz, bf);
        for (size_t i = 0; i < I; i++) {
          g[off + o * I + i] += dz * a[l][i];
          nd[i] += rb(p[off + o * I + i], bf) * dz;
        }
      }
      memcpy(d, nd, sizeof d);
    }
  }
  return loss;
}

/* max |a[k] - b[k]|, or max |a[k]| with b NULL (a plain loop: GCC 12 for aarch64 crashed
 * vectorising two fmax reductions in one loop) */
static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t k = 0; k < n; k++) {
    double v = fabs((double)a[k] - (b ? (double)b[k] : 0.0));
    if (v > m) m = v;
  }
  return m;
}

static double max_abs(const double *v, size_t n) {
  double m = 0;
  for (size_t k = 0; k < n; k++)
    if (fabs(v[k]) > m) m = fabs(v[k]);
  return m;
}

/* a classifier's data: n inputs uniform in [-1, 1) from seed, labels b mod 3 */
static void class_data(float *x, size_t n, int32_t *lab, size_t B, uint64_t seed) {
  for (size_t k = 0; k < n; k++) x[k] = (float)tu_unif(&seed);
  for (size_t b = 0; b < B; b++) lab[b] = (int32_t)(b % 3);
}

/* loss and gradient in precision pr (l, g) on a fresh workspace on 1 thread; the same bits
 * again on 2 threads */
static void prec_run(const sc_chain *c, sc_loss loss, const float *p, const float *x, const void *t,
                     size_t B, sc_precision pr, float *l, float *g) {
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *g2 = malloc(np * sizeof *g2), l2;
  assert_non_null(g2);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, pr));
  SC_OK_OR_FAIL(sc_valgrad(c, loss, p, x, t, B, l, g, NULL, ws));
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, 2));
  SC_OK_OR_FAIL(sc_valgrad(c, loss, p, x, t, B, &l2, g2, NULL, ws));
  assert_memory_equal(g, g2, np * sizeof *g);
  assert_memory_equal(l, &l2, sizeof l2);
  sc_workspace_destroy(ws);
  free(g2);
}

/* loss and gradient in fp32 (lf, gf) and emulated bf16 (lb, g), the latter checked on 2
 * threads */
static void fp32_and_bf16(const sc_chain *c, sc_loss loss, const float *p, const float *x,
                          const void *t, size_t B, float *lf, float *gf, float *lb, float *g) {
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_valgrad(c, loss, p, x, t, B, lf, gf, NULL, ws));
  sc_workspace_destroy(ws);
  prec_run(c, loss, p, x, t, B, SC_PRECISION_BF16_EMULATED, lb, g);
}

/* the reference MLP's layers, REF_B samples of inputs x and targets t; returns the random
 * state for what follows */
#define REF_B 300 /* several tiles and slices */
static uint64_t ref_setup(sc_layer *L, float *x, float *t) {
  for (int l = 0; l < NL; l++) L[l] = sc_dense(DIMS[l + 1], ACTS[l]);
  uint64_t s = 7;
  for (size_t k = 0; k < REF_B * DIMS[0]; k++) x[k] = (float)(2 * tu_unif(&s));
  for (size_t k = 0; k < REF_B * DIMS[NL]; k++) t[k] = (float)tu_unif(&s);
  return s;
}

/* the emulated precision against the double reference (bf16 operands: tight), against the
 * reference without rounding (the fp32 path's numbers: loose), on every kernel set; the
 * same bits on 1 and 2 threads */
static void test_emulated_reference(void **state) {
  (void)state;
  enum { B = REF_B };
  sc_layer L[NL];
  float x[B * 5], t[B * 3];
  uint64_t s = ref_setup(L, x, t);
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, 5, L, NL));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *gf = malloc(np * sizeof *gf);
    double *gr = malloc(np * sizeof *gr), *gr32 = malloc(np * sizeof *gr32);
    assert_true(p && g && gf && gr && gr32);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
    for (size_t k = 0; k < np; k++) p[k] += (float)(0.05 * tu_unif(&s)); /* nonzero biases */
    float lf, lb;
    fp32_and_bf16(c, SC_LOSS_SQUARED, p, x, t, B, &lf, gf, &lb, g);
    double Lr = ref_valgrad(p, x, t, B, 1, gr), Lr32 = ref_valgrad(p, x, t, B, 0, gr32);
    double gm = max_abs(gr, np), e_bf = 0, e_32 = 0, e_f = 0;
    for (size_t k = 0; k < np; k++) {
      e_bf = fmax(e_bf, fabs(g[k] - gr[k]));   /* emulated vs its reference */
      e_32 = fmax(e_32, fabs(g[k] - gr32[k])); /* emulated vs unrounded */
      e_f = fmax(e_f, fabs(gf[k] - gr[k]));    /* fp32 path vs the bf16 reference */
    }
    e_bf /= gm, e_32 /= gm, e_f /= gm;
    print_message("  [%s] bf16-emulated: loss %.7g (its reference %.7g; fp32 %.7g, unrounded "
                  "reference %.7g); max |g - ref| / max|g|: %.2e against the bf16 reference, "
                  "%.2e against the unrounded one; the fp32 path against the bf16 reference "
                  "%.2e\n",
                  isas[is], (double)lb, Lr, (double)lf, Lr32, e_bf, e_32, e_f);
    /* tight: float accumulation only (measured 5e-8 and 1.3e-7; a dz or output within 1e-7 of
     * a rounding boundary could round the other way in double: 2^-8 of one of 300 terms) */
    assert_true(fabs(lb - Lr) <= 1e-5 * Lr);
    assert_true(e_bf <= 2e-5);
    /* loose: bf16 against unrounded arithmetic */
    assert_true(fabs(lb - lf) <= 2e-2 * lf);
    assert_true(e_32 <= 5e-2);
    /* the tight bound separates: the fp32 path's gradient does not meet it (the rounding
     * happened). Not the loss: a sum of 300 rounding errors can come within 1e-5 of the
     * reference by chance (6e-6 on the third parameter draw, seen on an AVX-512 CPU) */
    assert_true(e_f > 2e-5);
    sc_chain_destroy(c);
    free(p), free(g), free(gf), free(gr), free(gr32);
    unsetenv("SC_ISA");
  }
}

/* a convnet: the emulated precision changes the results a little (the roundings happen on
 * the conv paths too), gives the same bits on 1 and 2 threads, and stays near fp32 */
static void test_emulated_conv(void **state) {
  (void)state;
  enum { B = 96 };
  sc_layer L[] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                  sc_dense(10, SC_TANH), sc_dense(3, SC_IDENTITY)};
  const char *isas[3];
  int nisa = tu_isas(isas);
  uint64_t s = 11;
  float *x = malloc(B * 64 * sizeof *x);
  int32_t lab[B];
  assert_non_null(x);
  class_data(x, B * 64, lab, B, s);
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 8, 8, L, 5));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *gf = malloc(np * sizeof *gf);
    assert_true(p && g && gf);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
    float lf, lb;
    fp32_and_bf16(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, &lf, gf, &lb, g);
    double gm = 0, d = 0;
    size_t k0 = 0, nconv = 4 * 9; /* the conv weights come first */
    int conv_differs = 0;
    for (size_t k = 0; k < np; k++) {
      gm = fmax(gm, fabs(gf[k]));
      d = fmax(d, fabs(g[k] - gf[k]));
      if (k >= k0 && k < nconv && g[k] != gf[k]) conv_differs = 1;
    }
    print_message("  [%s] conv bf16-emulated: loss %.7g (fp32 %.7g), max |g - g32| / max|g32| "
                  "%.2e\n",
                  isas[is], (double)lb, (double)lf, d / gm);
    assert_true(conv_differs);
    assert_true(d > 0 && d <= 5e-2 * gm);
    assert_true(fabsf(lb - lf) <= 1e-2f * lf);
    sc_chain_destroy(c);
    free(p), free(g), free(gf);
    unsetenv("SC_ISA");
  }
  free(x);
}

/* ------------------------------------------------------------ the bf16 kernels */
/* SC_PRECISION_BF16's dense layers run a GEMM on bf16 pairs: "model" is portable code doing
 * what vdpbf16ps does (any CPU), "native" the AVX512_BF16 kernel (only on a CPU with it; the
 * test says so where it is skipped), "amx" the AMX-BF16 GEMM (tiles shaped to each block; only on a
 * CPU with AMX) and "amx-model" that GEMM's blocking on a portable model of the tiles (any CPU).
 * Each is checked against the double reference on the same rounded operands (tight, as the
 * emulation), against the emulation (the same operands, another summation order: tight), and
 * native against the model, amx against its model (Intel documents two orders of a pair's
 * additions for TDPBF16PS: tight, not the same bits). */
static const char *const KINDS[4] = {"model", "native", "amx-model", "amx"};
static int kernels_on(const char *kind) {
  setenv("SC_BF16_KERNELS", kind, 1);
  setenv("SC_BF16_LAYERS", "all", 1); /* small convs too (auto leaves them to the float kernels) */
  sc_layer L[] = {sc_dense(2, SC_IDENTITY)};
  sc_chain *c = NULL;
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 2, L, 1));
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
  sc_status st = sc_workspace_set_precision(ws, SC_PRECISION_BF16);
  if (st != SC_OK) {
    print_message("  [%s] bf16 kernels unavailable: %s\n", kind, sc_last_error());
    assert_int_equal(st, SC_ERR_UNSUPPORTED);
    assert_true(!strcmp(kind, "native") || !strcmp(kind, "amx")); /* the models run anywhere */
    /* the native kernels run wherever the CPU has AVX512_BF16 and the compiler built them */
    assert_false(!strcmp(kind, "native") && cpu_has_bf16() && !strstr(sc_last_error(), "build"));
  }
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  return st == SC_OK;
}

static void test_kernels_reference(void **state) {
  (void)state;
  enum { B = REF_B };
  sc_layer L[NL];
  float x[B * 5], t[B * 3];
  uint64_t s = ref_setup(L, x, t);
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 5, L, NL));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *p = malloc(np * sizeof *p), *gm_ = malloc(np * sizeof *gm_), *g = malloc(np * sizeof *g);
  float *ge = malloc(np * sizeof *ge), *gf = malloc(np * sizeof *gf);
  double *gr = malloc(np * sizeof *gr);
  float *ghw = malloc(np * sizeof *ghw); /* the last hardware kind's gradient */
  const char *hw_kind = NULL;
  assert_true(p && gm_ && g && ge && gf && gr && ghw);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
  for (size_t k = 0; k < np; k++) p[k] += (float)(0.05 * tu_unif(&s));
  float lf, le, lm = 0;
  unsetenv("SC_BF16_KERNELS");
  fp32_and_bf16(c, SC_LOSS_SQUARED, p, x, t, B, &lf, gf, &le, ge); /* the emulation */
  double Lr = ref_valgrad(p, x, t, B, 1, gr), gmax = max_abs(gr, np);
  for (int kk = 0; kk < 4; kk++) {
    if (!kernels_on(KINDS[kk])) continue;
    int hw = kk & 1; /* native, amx: compared with the model before them */
    float lb;
    prec_run(c, SC_LOSS_SQUARED, p, x, t, B, SC_PRECISION_BF16, &lb, g);
    double e_r = 0, e_e = 0, e_m = 0;
    int differs = 0;
    for (size_t k = 0; k < np; k++) {
      e_r = fmax(e_r, fabs(g[k] - gr[k]));
      e_e = fmax(e_e, fabs((double)g[k] - ge[k]));
      if (hw) e_m = fmax(e_m, fabs((double)g[k] - gm_[k]));
      differs |= g[k] != gf[k];
    }
    e_r /= gmax, e_e /= gmax, e_m /= gmax;
    print_message("  [%s kernels] loss %.7g (reference %.7g, emulation %.7g); max |g - x| / "
                  "max|g|: %.2e against the reference, %.2e against the emulation%s",
                  KINDS[kk], (double)lb, Lr, (double)le, e_r, e_e, hw ? "" : "\n");
    if (hw) print_message(", %.2e against its model\n", e_m);
    assert_true(differs); /* bf16 operands, not the fp32 path */
    assert_true(fabs(lb - Lr) <= 1e-5 * Lr);
    assert_true(e_r <= 2e-5);
    assert_true(e_e <= 2e-5);
    if (kk == 1) { /* native against the model: the same sums (Intel's definition of vdpbf16ps) */
      assert_true(fabsf(lb - lm) <= 1e-6f * lm);
      assert_true(e_m <= 1e-6);
    } else if (kk == 3) { /* amx against its model: the same products, maybe another order */
      assert_true(fabsf(lb - lm) <= 1e-5f * lm);
      assert_true(e_m <= 2e-5);
    } else {
      memcpy(gm_, g, np * sizeof *g);
      lm = lb;
    }
    if (hw) memcpy(ghw, g, np * sizeof *g), hw_kind = KINDS[kk]; /* amx after native */
  }
  /* unset, SC_PRECISION_BF16 takes the AMX GEMM where the CPU has AMX-BF16, else the
   * AVX512_BF16 kernels: the same bits as that kind asked for by name */
  unsetenv("SC_BF16_KERNELS");
  if (hw_kind) {
    float lb;
    prec_run(c, SC_LOSS_SQUARED, p, x, t, B, SC_PRECISION_BF16, &lb, g);
    print_message("  [default kernels] the bits of %s\n", hw_kind);
    assert_memory_equal(g, ghw, np * sizeof *g);
  } else
    print_message("  [default kernels] none here (no AVX512_BF16)\n");
  unsetenv("SC_BF16_LAYERS");
  sc_chain_destroy(c);
  free(p), free(gm_), free(g), free(ge), free(gf), free(gr), free(ghw);
}

/* wider layers (odd widths, more than 32 inputs: the kernel's column tails; a layer without
 * bias, with gelu's and silu's saved pre-activations), a LeNet-like convnet, and a convnet of more
 * than 16,384 parameters (the bf16 weights are made on the pool, a layer's rows in several units:
 * 3 for the second conv, with its dx, 5 for the 960 -> 17 layer, the last of one row), each
 * against the emulation */
static void test_kernels_shapes(void **state) {
  (void)state;
  enum { B = 70 };
  uint64_t s = 13;
  float *x = malloc(B * 288 * sizeof *x), *t = malloc(B * 5 * sizeof *t);
  int32_t lab[B];
  assert_true(x && t);
  for (size_t k = 0; k < B * 288; k++) x[k] = (float)tu_unif(&s);
  for (size_t k = 0; k < B * 5; k++) t[k] = (float)tu_unif(&s);
  for (size_t b = 0; b < B; b++) lab[b] = (int32_t)(b % 3);
  sc_layer mlp[] = {sc_dense(37, SC_TANH), sc_dense_nobias(33, SC_GELU), sc_dense(19, SC_SILU),
                    sc_dense(5, SC_IDENTITY)};
  sc_layer cnn[] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                    sc_dense(10, SC_TANH), sc_dense(3, SC_IDENTITY)};
  sc_layer big[] = {sc_conv2d(1, 1, 16, SC_RELU), sc_conv2d(3, 3, 60, SC_RELU), sc_flatten(),
                    sc_dense(17, SC_TANH), sc_dense(3, SC_IDENTITY)};
  static const char *const names[] = {"64 -> 37 -> 33 -> 19 -> 5", "convnet", "big convnet"};
  for (int net = 0; net < 3; net++) {
    sc_chain *c = NULL;
    if (net == 0)
      SC_OK_OR_FAIL(sc_chain_create(&c, 64, mlp, 4));
    else if (net == 1)
      SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 8, 8, cnn, 5));
    else
      SC_OK_OR_FAIL(sc_chain_create_image(&c, 8, 6, 6, big, 5));
    sc_loss loss = net ? SC_LOSS_LOGIT_CROSSENTROPY : SC_LOSS_SQUARED;
    const void *tg = net ? (const void *)lab : (const void *)t;
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    assert_true(net < 2 || np > 16384);
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *ge = malloc(np * sizeof *ge);
    float *gf = malloc(np * sizeof *gf);
    assert_true(p && g && ge && gf);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 9));
    float lf, le;
    const char *isas[3];
    int nisa = tu_isas(isas);
    for (int is = 0; is < nisa; is++) { /* every kernel set (their packers) */
      setenv("SC_ISA", isas[is], 1);    /* (read when a chain is created) */
      sc_chain_destroy(c);
      if (net == 0)
        SC_OK_OR_FAIL(sc_chain_create(&c, 64, mlp, 4));
      else if (net == 1)
        SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 8, 8, cnn, 5));
      else
        SC_OK_OR_FAIL(sc_chain_create_image(&c, 8, 6, 6, big, 5));
      unsetenv("SC_BF16_KERNELS");
      fp32_and_bf16(c, loss, p, x, tg, B, &lf, gf, &le, ge);
      for (int kk = 0; kk < 4; kk++) {
        if (!kernels_on(KINDS[kk])) continue;
        float lb;
        prec_run(c, loss, p, x, tg, B, SC_PRECISION_BF16, &lb, g);
        double gm = max_diff(ge, NULL, np), d = max_diff(g, ge, np);
        print_message("  [%s kernels, %s, %s] loss %.7g (emulation %.7g), max |g - g_emul| / "
                      "max|g| %.2e\n",
                      KINDS[kk], isas[is], names[net], (double)lb, (double)le, d / gm);
        assert_true(fabsf(lb - le) <= 1e-5f * le);
        /* the big convnet: 1e-3. Another summation order can move a float sum across a bf16
         * rounding boundary, and that activation then differs by a bf16 step (2^-8 relative);
         * 1,560 rounded activations per sample (70 samples) give the model 9.4e-5 against the
         * emulation, every other kind 3.6e-7. A wrong unit of the weights gives 0.3 to 1. */
        assert_true(d <= (net == 2 ? 1e-3 : 1e-4) * gm);
      }
    }
    unsetenv("SC_ISA");
    unsetenv("SC_BF16_KERNELS");
    sc_chain_destroy(c);
    free(p), free(g), free(ge), free(gf);
  }
  free(x), free(t);
}

/* one valgrad of a classifier in precision pr on a fresh workspace of `threads` threads */
static void class_valgrad(const sc_chain *c, sc_precision pr, int threads, const float *p,
                          const float *x, const int32_t *lab, size_t B, float *l, float *g,
                          float *gx) {
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, threads));
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, pr));
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, B, l, g, gx, ws));
  sc_workspace_destroy(ws);
}

/* conv layers with padding and strides, odd tap and channel counts, the second conv's dx and
 * the input gradient (gx: the first conv's dx too), bf16 kernels against the emulation */
static void test_kernels_conv(void **state) {
  (void)state;
  enum { B = 40, IN = 81 };
  sc_layer L[] = {sc_conv2d_ex(3, 3, 5, SC_RELU, 1, 1, 1, 1),     /* 1x9x9 -> 5x9x9, R = 9 */
                  sc_conv2d_ex(3, 3, 3, SC_TANH, 2, 2, 1, 1),     /* -> 3x5x5, R = 45, K = 3 */
                  sc_conv2d_nobias(2, 2, 4, SC_RELU, 1, 1, 0, 0), /* -> 4x4x4 */
                  sc_conv2d_ex(2, 3, 6, SC_TANH, 2, 1, 1, 0),     /* -> 6x3x2: rows stride 2 only */
                  sc_flatten(),
                  sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 9, 9, L, sizeof L / sizeof *L));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  uint64_t s = 17;
  float *x = malloc(B * IN * sizeof *x), *p = malloc(np * sizeof *p);
  float *g[5], *gx[5], l[5];
  int32_t lab[B];
  assert_true(x && p);
  class_data(x, B * IN, lab, B, s);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 4));
  for (int m = 0; m < 5; m++) {
    g[m] = malloc(np * sizeof *g[m]);
    gx[m] = malloc(B * IN * sizeof *gx[m]);
    assert_true(g[m] && gx[m]);
  }
  /* on every kernel set: the vector sets pack the operands with their own code (v_bf16_pack_*),
   * the portable one with sc__bf16_pack_* */
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1); /* (read when a chain is created) */
    sc_chain_destroy(c);
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 9, 9, L, sizeof L / sizeof *L));
    int ran[5] = {1, 0, 0, 0, 0};
    for (int m = 0; m < 5; m++) { /* 0: the emulation, then the kernels KINDS[m - 1] */
      if (m && !kernels_on(KINDS[m - 1])) continue;
      ran[m] = 1;
      class_valgrad(c, m ? SC_PRECISION_BF16 : SC_PRECISION_BF16_EMULATED, 2, p, x, lab, B, &l[m],
                    g[m], gx[m]);
      unsetenv("SC_BF16_KERNELS");
    }
    assert_true(ran[1] && ran[3]); /* the two models run anywhere */
    double gm = max_diff(g[0], NULL, np), xm = max_diff(gx[0], NULL, B * IN);
    for (int m = 1; m < 5; m++) {
      if (!ran[m]) continue;
      double d = max_diff(g[m], g[0], np), dx = max_diff(gx[m], gx[0], B * IN);
      print_message("  [%s kernels, %s, padded/strided convs] loss %.7g (emulation %.7g); max |g "
                    "- g_emul| / max|g| %.2e, the same for gx %.2e\n",
                    KINDS[m - 1], isas[is], (double)l[m], (double)l[0], d / gm, dx / xm);
      assert_true(fabsf(l[m] - l[0]) <= 1e-5f * l[0]);
      assert_true(d <= 1e-4 * gm);
      assert_true(dx <= 1e-4 * xm && xm > 0);
    }
  }
  unsetenv("SC_ISA");
  for (int m = 0; m < 5; m++) free(g[m]), free(gx[m]);
  free(x), free(p);
  sc_chain_destroy(c);
}

/* a stride-1 conv's dx as a correlation (each input position's sum over its taps made once):
 * channel counts that fill every register block of the native kernel (6, 4, 2, 1 input
 * channels), odd output channel counts (a pair with zero), padding, kernels wider than tall
 * and taller than wide, the input gradient (the first conv's dx too); and the small convs'
 * forward on pairs of taps (sc__bf16_pack_colpairs: column pairs, pairs wrapped into the next
 * row, an odd count's last tap in its neighbour's pair, 3 x 1 and 1 x 3 and 1 x 1 kernels), and
 * a 5 x 5 conv of 16 outputs whose dW^T runs its taps in blocks of three runs of 5 in the model
 * and from each input row natively (sc__bf16_dwt5_native, 6 output rows: every edge case of
 * its tap-row ranges) (the native dx does pairs of positions in the convs of 7 and 4 input
 * channels): the model against
 * the emulation (tight), native against the model (the same bits), 1 and 2 threads */
static void test_kernels_dx_corr(void **state) {
  (void)state;
  enum { B = 37, IN = 3 * 7 * 6 };
  sc_layer L[] = {sc_conv2d_ex(3, 2, 7, SC_RELU, 1, 1, 1, 0),     /* 3x7x6 -> 7x7x5 */
                  sc_conv2d_ex(2, 3, 13, SC_TANH, 1, 1, 1, 1),    /* -> 13x8x5 */
                  sc_conv2d_nobias(3, 3, 4, SC_RELU, 1, 1, 0, 0), /* -> 4x6x3 */
                  sc_conv2d_ex(1, 2, 5, SC_IDENTITY, 1, 1, 0, 1), /* -> 5x6x4 */
                  sc_conv2d_ex(3, 1, 4, SC_RELU, 1, 1, 1, 0),     /* -> 4x6x4 */
                  sc_conv2d_ex(1, 3, 3, SC_TANH, 1, 1, 0, 1),     /* -> 3x6x4 */
                  sc_conv2d(1, 1, 2, SC_IDENTITY),                /* -> 2x6x4 */
                  sc_conv2d_ex(5, 5, 16, SC_RELU, 1, 1, 2, 2),    /* -> 16x6x4: dW's runs of 5 */
                  sc_flatten(),
                  sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 3, 7, 6, L, sizeof L / sizeof *L));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *x = malloc(B * IN * sizeof *x), *p = malloc(np * sizeof *p), *g[4], *gx[4], l[4];
  int32_t lab[B];
  assert_true(x && p);
  class_data(x, B * IN, lab, B, 29);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 6));
  for (int m = 0; m < 4; m++) {
    g[m] = malloc(np * sizeof *g[m]);
    gx[m] = malloc(B * IN * sizeof *gx[m]);
    assert_true(g[m] && gx[m]);
  }
  /* 0: the emulation, 1: the model, 2: native, 3: native on 2 threads */
  class_valgrad(c, SC_PRECISION_BF16_EMULATED, 1, p, x, lab, B, &l[0], g[0], gx[0]);
  assert_true(kernels_on("model"));
  class_valgrad(c, SC_PRECISION_BF16, 1, p, x, lab, B, &l[1], g[1], gx[1]);
  double gm = max_diff(g[0], NULL, np), xm = max_diff(gx[0], NULL, B * IN);
  double d = max_diff(g[1], g[0], np), dx = max_diff(gx[1], gx[0], B * IN);
  print_message("  [model kernels] loss %.7g (emulation %.7g); max |g - g_emul| / max|g| %.2e, "
                "the same for gx %.2e\n",
                (double)l[1], (double)l[0], d / gm, dx / xm);
  assert_true(fabsf(l[1] - l[0]) <= 1e-5f * l[0]);
  assert_true(d <= 1e-4 * gm);
  assert_true(dx <= 1e-4 * xm && xm > 0);
  if (kernels_on("native")) {
    class_valgrad(c, SC_PRECISION_BF16, 1, p, x, lab, B, &l[2], g[2], gx[2]);
    class_valgrad(c, SC_PRECISION_BF16, 2, p, x, lab, B, &l[3], g[3], gx[3]);
    for (int m = 2; m < 4; m++) {
      assert_memory_equal(&l[m], &l[1], sizeof l[1]);
      assert_memory_equal(g[m], g[1], np * sizeof *g[1]);
      assert_memory_equal(gx[m], gx[1], B * IN * sizeof *gx[1]);
    }
    print_message("  [native kernels] the model's bits on 1 and 2 threads\n");
  }
  unsetenv("SC_BF16_KERNELS");
  unsetenv("SC_BF16_LAYERS");
  for (int m = 0; m < 4; m++) free(g[m]), free(gx[m]);
  free(x), free(p);
  sc_chain_destroy(c);
}

/* SC_BF16_LAYERS on a convnet whose first conv has few channels, against the emulation
 * (tight). With the model kernels (and the native ones, which give the model's bits), auto and
 * all run every layer on the bf16 forms (a small conv's dW as dot products): the same bits.
 * With the AMX model, which has no such forms, auto runs the first conv's pullback on the
 * float kernels: not the same bits as all (the sums run in another order) */
static void test_kernels_auto_layers(void **state) {
  (void)state;
  enum { B = 36, IN = 144, NM = 6 };
  sc_layer L[] = {sc_conv2d(3, 3, 4, SC_RELU),  /* 1x12x12 -> 4x10x10: few channels */
                  sc_conv2d(3, 3, 16, SC_TANH), /* -> 16x8x8: dW on taps x dz^T, 16 columns */
                  sc_conv2d(3, 3, 17, SC_RELU), /* -> 17x6x6: the same, 17 columns */
                  sc_maxpool2d(2, 2),           sc_flatten(), sc_dense(3, SC_IDENTITY)};
  /* the emulation, then kernels x SC_BF16_LAYERS */
  static const char *const kind[NM] = {NULL, "model", "model", "amx-model", "amx-model", "native"};
  static const char *const lay[NM] = {NULL, "auto", "all", "auto", "all", "auto"};
  uint64_t s = 23;
  float *x = malloc(B * IN * sizeof *x);
  int32_t lab[B];
  assert_true(x);
  class_data(x, B * IN, lab, B, s);
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int is = 0; is < nisa; is++) {
    setenv("SC_ISA", isas[is], 1);
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 12, 12, L, 6));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float *p = malloc(np * sizeof *p), *g[NM], *gx[NM], l[NM];
    int ran[NM] = {0};
    assert_true(p);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 6));
    for (int m = 0; m < NM; m++) {
      g[m] = malloc(np * sizeof *g[m]);
      gx[m] = malloc(B * IN * sizeof *gx[m]);
      assert_true(g[m] && gx[m]);
      if (m && !kernels_on(kind[m])) continue; /* native: only where the CPU has AVX512_BF16 */
      if (m) setenv("SC_BF16_KERNELS", kind[m], 1);
      if (m) setenv("SC_BF16_LAYERS", lay[m], 1);
      class_valgrad(c, m ? SC_PRECISION_BF16 : SC_PRECISION_BF16_EMULATED, 1, p, x, lab, B, &l[m],
                    g[m], gx[m]);
      unsetenv("SC_BF16_KERNELS");
      unsetenv("SC_BF16_LAYERS");
      ran[m] = 1;
    }
    double gm = max_diff(g[0], NULL, np), xm = max_diff(gx[0], NULL, B * IN);
    for (int m = 1; m < NM; m++) {
      if (!ran[m]) continue;
      double d = max_diff(g[m], g[0], np), dx = max_diff(gx[m], gx[0], B * IN);
      print_message("  [%s, %s kernels, SC_BF16_LAYERS=%s] loss %.7g (emulation %.7g); max |g - "
                    "g_emul| / max|g| %.2e, the same for gx %.2e\n",
                    isas[is], kind[m], lay[m], (double)l[m], (double)l[0], d / gm, dx / xm);
      assert_true(fabsf(l[m] - l[0]) <= 1e-5f * l[0]);
      assert_true(d <= 1e-4 * gm);
      assert_true(dx <= 1e-4 * xm && xm > 0);
    }
    int differs = 0;
    for (size_t k = 0; k < np; k++) differs |= g[3][k] != g[4][k];
    assert_true(differs); /* amx-model: auto ran the first conv's pullback otherwise than all */
    assert_memory_equal(g[1], g[2], np * sizeof *g[1]); /* model: auto and all the same */
    assert_memory_equal(gx[1], gx[2], B * IN * sizeof *gx[1]);
    if (ran[5]) { /* native: the model's bits */
      assert_memory_equal(g[5], g[1], np * sizeof *g[1]);
      assert_memory_equal(gx[5], gx[1], B * IN * sizeof *gx[1]);
      assert_memory_equal(&l[5], &l[1], sizeof l[1]);
    }
    for (int m = 0; m < NM; m++) free(g[m]), free(gx[m]);
    free(p);
    sc_chain_destroy(c);
  }
  unsetenv("SC_ISA");
  free(x);
}

/* the native GEMM's forward epilogue (bias, relu or identity, rounding, as it stores) on
 * non-finite values: +inf and -inf made by the first layer (the library refuses non-finite
 * inputs), their sum a NaN that relu passes on as the float kernels do (max(0, NaN) is NaN; with
 * the operands the other way round it would be 0), conv and dense layers alike */
static void test_kernels_epilogue_nan(void **state) {
  (void)state;
  enum { B = 2 };
  for (int conv = 0; conv < 2; conv++) {
    /* dense: 2 -> 2 identity (+inf, -inf) -> 1 relu (NaN) -> 1 identity; conv: the same with
     * 1x1 kernels on 2 channels of 1x1 pixels */
    sc_layer D[] = {sc_dense(2, SC_IDENTITY), sc_dense(1, SC_RELU), sc_dense(1, SC_IDENTITY)};
    sc_layer C[] = {sc_conv2d(1, 1, 2, SC_IDENTITY), sc_conv2d(1, 1, 1, SC_RELU),
                    sc_conv2d(1, 1, 1, SC_IDENTITY)};
    float x[B * 2] = {1e20f, 1e20f, 0.5f, 0.25f}, y[3][B];
    const char *kinds[3] = {NULL, "model", "native"}; /* NULL: the emulation */
    int ran = 0;
    for (int k = 0; k < 3; k++) {
      if (kinds[k] && !kernels_on(kinds[k])) continue;
      unsetenv("SC_BF16_LAYERS");
      sc_chain *c = NULL;
      sc_workspace *ws = NULL;
      if (conv)
        SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, 1, 1, C, 3));
      else
        SC_OK_OR_FAIL(sc_chain_create(&c, 2, D, 3));
      size_t np;
      SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
      assert_int_equal(np, 6 + 3 + 2); /* weights then biases, per layer */
      float p[11] = {1e20f, 0, 0, -1e20f, 0, 0, 1, 1, 0, 1, 0.5f};
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      if (kinds[k]) setenv("SC_BF16_KERNELS", kinds[k], 1);
      SC_OK_OR_FAIL(sc_workspace_set_precision(ws, kinds[k] ? SC_PRECISION_BF16
                                                            : SC_PRECISION_BF16_EMULATED));
      unsetenv("SC_BF16_KERNELS");
      SC_OK_OR_FAIL(sc_forward(c, p, x, B, y[k], ws));
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
      assert_true(isnan(y[k][0])); /* inf + -inf through relu */
      assert_true(isfinite(y[k][1]));
      if (k) assert_memory_equal(&y[k][1], &y[0][1], sizeof y[0][1]);
      ran++;
    }
    print_message("  [%s] NaN through relu in %d of 3 kinds (emulation, model, native)\n",
                  conv ? "conv" : "dense", ran);
  }
}

/* the native kernels fold a 2 x 2 max-pooling's pullback into the dz of the conv below it
 * (LeNet5's conv1 and pool1): ties in the windows (every position of a window tying with the
 * ones before it in turn, bf16 values so that the rounding keeps them) must route the window's
 * dz to its first maximum as the pool's own pullback does; the gradient the model kernels' bits.
 * The first conv gets the pool's pullback with its dW's packing; a second conv in between (which
 * has a dx) gets it as floats */
static void test_kernels_pool_ties(void **state) {
  (void)state;
  enum { B = 40, H = 4, W = 4 };
  sc_layer L1[] = {sc_conv2d(1, 1, 2, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                   sc_dense(3, SC_IDENTITY)};
  sc_layer L2[] = {sc_conv2d(1, 1, 2, SC_IDENTITY), sc_conv2d(1, 1, 2, SC_RELU), sc_maxpool2d(2, 2),
                   sc_flatten(), sc_dense(3, SC_IDENTITY)};
  /* a window's values in row-major order: all four equal, then the maximum first at positions
   * 1, 2, 3 with the later ones equal to it */
  static const float pat[4][4] = {
      {1, 1, 1, 1}, {0.5f, 1, 1, 1}, {0.5f, 0.25f, 1, 1}, {0.5f, 0.25f, 0.125f, 1}};
  float x[B * H * W], t[B * 3], g[2][64], gx[2][B * H * W];
  for (size_t b = 0; b < B; b++) {
    for (size_t w = 0; w < 4; w++) { /* window w at (w / 2, w % 2), pattern (w + b) % 4 */
      const float *q = pat[(w + b) % 4];
      float sc = (float)(1 + b % 3);
      for (size_t i = 0; i < 4; i++)
        x[b * H * W + (2 * (w / 2) + i / 2) * W + 2 * (w % 2) + i % 2] = sc * q[i];
    }
    for (size_t o = 0; o < 3; o++) t[b * 3 + o] = 0.25f * (float)((b + o) % 5);
  }
  int ran = 0;
  for (int k = 0; k < 8; k++) { /* (chain, with gx) x (model, native) */
    const char *kind = k % 2 ? "native" : "model";
    int two = k / 2 % 2, wgx = k / 4; /* the second chain; the input's gradient too (the first
                                         conv then has a dx: its dz as floats) */
    if (!kernels_on(kind)) continue;
    unsetenv("SC_BF16_LAYERS");
    sc_chain *c = NULL;
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, H, W, two ? L2 : L1, two ? 5 : 4));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    assert_true(np <= 64);
    float p[64];
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
    p[0] = 1, p[1] = 2, p[2] = 0, p[3] = 0; /* the conv: x and 2 x, bias 0 (ties kept) */
    if (two)                                /* the second conv: the identity, bias 0 */
      p[4] = 1, p[5] = 0, p[6] = 0, p[7] = 1, p[8] = 0, p[9] = 0;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    setenv("SC_BF16_KERNELS", kind, 1);
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    unsetenv("SC_BF16_KERNELS");
    float lv;
    SC_OK_OR_FAIL(
        sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &lv, g[k % 2], wgx ? gx[k % 2] : NULL, ws));
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    if (k % 2) assert_memory_equal(g[1], g[0], np * sizeof g[0][0]);
    if (k % 2 && wgx) assert_memory_equal(gx[1], gx[0], sizeof gx[0]);
    ran++;
  }
  print_message("  %d of 8 runs (2 chains, with and without gx, x model, native) with tied "
                "windows%s\n",
                ran, ran == 8 ? ": the same gradients" : "");
}

/* the plane index of position i (0-3, row-major) of 2 x 2 window w (0-3, row-major) of a 4-row,
 * W-column plane: the window tests' layout */
static size_t win_at(int w, int i, int W) {
  return (size_t)(2 * (w / 2) + i / 2) * (size_t)W + (size_t)(2 * (w % 2) + i % 2);
}

/* the folded pool's hits where a window's sums differ but round to the same bf16 value: the
 * native fold rounds only each window's maximum r and takes the first position whose sum is at
 * least the least float rounding to r (sc__bf16_pool_hits_native), the model rounds every sum
 * and takes the first equal to the maximum. A 1 x 1 relu conv of 2 channels (weights 1, 1) makes
 * each sum x0 + x1 (+ the bias), so the windows (row-major positions 0-3) are chosen exactly:
 * E: 1 + 3 2^-8 (the midpoint below r = 1 + 2^-6, even: rounds to r), 1, 1, 1 + 2^-6 + 2^-9: hit 0;
 * O: 1 + 2^-8 (the midpoint below r = 1 + 2^-7, odd: rounds down), 1, 1, 1 + 2^-7 + 2^-9: hit 3;
 * U: 1 + 3 2^-9 (rounds up to r = 1 + 2^-7), 1, 1, 1 + 2^-7 + 2^-9: hit 0; T: 1, 1, 1, 1: hit 0;
 * and with a bias of 3 2^-126 - 2^-134, D: 2^-126 - 2^-134 (a denormal, which VCVTNEPS2BF16 takes
 * to 0), dead, dead, 2^-126 + 2^-134 (rounds to r = 2^-126, FLT_MIN): hit 3. The input's
 * gradient is nonzero at the hits alone; the native kernels' loss and gradients are the model's
 * bits */
static void test_kernels_pool_round_ties(void **state) {
  (void)state;
  enum { B = 2, H = 4, W = 4, IN = 2 * H * W };
  sc_layer L[] = {sc_conv2d(1, 1, 1, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                  sc_dense(2, SC_IDENTITY)};
  const float u = 1.0f / 512, m126 = ldexpf(1.0f, -126);
  /* per case, its 4 positions' (x0, x1); the hit expected */
  enum { E, O, U, T, D }; /* the cases */
  const float pos[5][4][2] = {
      [E] = {{1 + 4 * u, 2 * u}, {1, 0}, {1, 0}, {1 + 8 * u, u}},
      [O] = {{1, 2 * u}, {1, 0}, {1, 0}, {1 + 4 * u, u}},
      [U] = {{1, 3 * u}, {1, 0}, {1, 0}, {1 + 4 * u, u}},
      [T] = {{1, 0}, {1, 0}, {1, 0}, {1, 0}},
      [D] = {{-3 * m126, m126}, {-1, 0}, {-1, 0}, {-3 * m126, m126 * (1 + 1.0f / 128)}}};
  const int hit[5] = {[E] = 0, [O] = 3, [U] = 0, [T] = 0, [D] = 3};
  int ran = 0;
  for (int run = 0; run < 2; run++) { /* run 0: E, O, U, T (bias 0); run 1: D, the rest dead */
    float x[B * IN], t[B * 2], g[2][16], gx[2][B * IN], lv[2];
    int want[B][4]; /* each window's case */
    for (int b = 0; b < B; b++)
      for (int w = 0; w < 4; w++) {
        int cs = run ? (w == b ? D : -1) : (w + b) % 4;
        want[b][w] = cs;
        for (int i = 0; i < 4; i++) {
          size_t at = win_at(w, i, W);
          x[b * IN + at] = cs >= 0 ? pos[cs][i][0] : -1;
          x[b * IN + H * W + at] = cs >= 0 ? pos[cs][i][1] : 0;
        }
      }
    for (int k = 0; k < B * 2; k++) t[k] = 0.5f * (float)(k % 3);
    for (int k = 0; k < 2; k++) { /* the model, native */
      const char *kind = k ? "native" : "model";
      if (!kernels_on(kind)) continue;
      unsetenv("SC_BF16_LAYERS");
      sc_chain *c = NULL;
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, H, W, L, 4));
      size_t np;
      SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
      assert_true(np <= 16);
      float p[16];
      SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
      p[0] = 1, p[1] = 1, p[2] = run ? 3 * m126 - ldexpf(1.0f, -134) : 0; /* the conv */
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      setenv("SC_BF16_KERNELS", kind, 1);
      SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
      unsetenv("SC_BF16_KERNELS");
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &lv[k], g[k], gx[k], ws));
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
      for (int b = 0; b < B; b++)
        for (int w = 0; w < 4; w++)
          for (int i = 0; i < 4; i++) {
            size_t at = win_at(w, i, W);
            int is_hit = want[b][w] >= 0 && hit[want[b][w]] == i;
            if ((gx[k][b * IN + at] != 0) != is_hit)
              fail_msg("%s, run %d, sample %d, window %d (case %d): position %d %s", kind, run, b,
                       w, want[b][w], i, is_hit ? "not the hit" : "a hit");
          }
      if (k) {
        assert_memory_equal(&lv[1], &lv[0], sizeof lv[0]);
        assert_memory_equal(g[1], g[0], np * sizeof g[0][0]);
        assert_memory_equal(gx[1], gx[0], sizeof gx[0]);
      }
      ran++;
    }
  }
  print_message("  %d of 4 runs (model, native) with sums that round alike: the hits expected\n",
                ran);
}

/* the folded pool's windows with NaN and infinite sums: the native fold takes each window's
 * 32 lanes in 16-bit lanes (sc__bf16_pool_hits32) and sends a window with a NaN to the float
 * lanes. Parameters and inputs must be finite, so the NaNs come from overflow: a 1 x 1 identity
 * conv doubles each of 2 channels (2 x 3e38 is infinite), a 1 x 1 relu conv adds them (inf - inf
 * is NaN, x86's default, negative; VDPBF16PS keeps its products' range, so the NaN needs
 * infinite operands), then the pool. vec_pool_fwd's order (m = x0, then m = x > m ? x : m) keeps
 * a NaN at a window's first position and skips it elsewhere, and its pullback gives a NaN window
 * no hit. Cases (a position's sum 2 (x0 + x1)): A: NaN, 4, 3, 1: NaN, no hit; B: 2, 6, NaN, 4: 6,
 * hit 1; C: +0, -4, -6, NaN: 0, no hit (the relu's: its derivative at 0 is 0); D: 2, inf, 4, inf:
 * inf, hit 1; E: -2, -4, -6, -1: 0, no hit; 3 samples, window w of sample b case (w + b) % 5, so
 * that the windows with an A (the float lanes' path: the whole window's 32 lanes) hold B, C, D, E
 * too; then (run 1) NaN sums everywhere. The forward's outputs (the pooled values: the chain ends
 * there), the gradients and the input gradient are the bits of the native kernels without the
 * fold (NaNs included), the model's up to NaNs */
static void test_kernels_pool_fold_nan(void **state) {
  (void)state;
  enum { B = 3, H = 4, W = 4, IN = 2 * H * W, NO = 4, NP = 9 };
  sc_layer L[] = {sc_conv2d(1, 1, 2, SC_IDENTITY), sc_conv2d(1, 1, 1, SC_RELU), sc_maxpool2d(2, 2),
                  sc_flatten()};
  const float big = 3e38f;
  enum { A, Bc, C, D, E, NC };
  /* per case, its 4 positions' (x0, x1) */
  const float pos[NC][4][2] = {[A] = {{big, -big}, {2, 0}, {1.5f, 0}, {0.5f, 0}},
                               [Bc] = {{1, 0}, {3, 0}, {-big, big}, {2, 0}},
                               [C] = {{0, 0}, {-2, 0}, {-3, 0}, {big, -big}},
                               [D] = {{1, 0}, {big, big}, {2, 0}, {big, 1}},
                               [E] = {{-1, 0}, {-2, 0}, {-3, 0}, {-0.5f, 0}}};
  const int hit[NC] = {[A] = -1, [Bc] = 1, [C] = -1, [D] = 1, [E] = -1};
  const float want[NC] = {[A] = NAN, [Bc] = 6, [C] = 0, [D] = INFINITY, [E] = 0};
  if (!kernels_on("native")) {
    unsetenv("SC_BF16_KERNELS");
    unsetenv("SC_BF16_LAYERS");
    skip();
  }
  const float p[NP] = {2, 0, 0, 2, 0, 0, 1, 1, 0}; /* conv 1: W (2 x 2), bias; conv 2: W, bias */
  float x[B * IN], t[B * NO];
  int cs[B][4], ran = 0;
  for (int k = 0; k < B * NO; k++) t[k] = 0.25f * (float)(1 + k % 3); /* no dy is 0 */
  for (int run = 0; run < 2; run++) {
    for (int b = 0; b < B; b++)
      for (int w = 0; w < 4; w++) {
        cs[b][w] = (w + b) % NC;
        for (int i = 0; i < 4; i++) {
          size_t at = win_at(w, i, W);
          x[b * IN + at] = run ? big : pos[cs[b][w]][i][0];
          x[b * IN + H * W + at] = run ? -big : pos[cs[b][w]][i][1];
        }
      }
    float y[3][B * NO], gx[3][B * IN], g[3][NP], lv[3];
    for (int m = 0; m < 3; m++) { /* 0: native with the fold, 1: without, 2: the model */
      sc_chain *c = NULL;
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, H, W, L, sizeof L / sizeof *L));
      size_t np;
      SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
      assert_int_equal(np, NP);
      setenv("SC_BF16_KERNELS", m == 2 ? "model" : "native", 1);
      setenv("SC_BF16_POOL_FOLD", m == 1 ? "0" : "1", 1);
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
      SC_OK_OR_FAIL(sc_forward(c, p, x, B, y[m], ws));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &lv[m], g[m], gx[m], ws));
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
    }
    unsetenv("SC_BF16_POOL_FOLD");
    for (int b = 0; b < B; b++)
      for (int w = 0; w < 4; w++) {
        float v = y[0][b * NO + w], e = run ? NAN : want[cs[b][w]];
        if (isnan(e) ? !isnan(v) : v != e)
          fail_msg("run %d, sample %d, window %d (case %d): %g, not %g", run, b, w, cs[b][w],
                   (double)v, (double)e);
        for (int i = 0; i < 4; i++) {
          size_t at = win_at(w, i, W);
          int is_hit = !run && hit[cs[b][w]] == i;
          if ((gx[0][b * IN + at] != 0) != is_hit)
            fail_msg("run %d, sample %d, window %d (case %d): position %d %s", run, b, w, cs[b][w],
                     i, is_hit ? "not the hit" : "a hit");
        }
      }
    assert_memory_equal(y[0], y[1], sizeof y[0]);
    assert_memory_equal(gx[0], gx[1], sizeof gx[0]);
    assert_memory_equal(g[0], g[1], sizeof g[0]);
    for (int k = 0; k < B * NO; k++)
      assert_true(isnan(y[2][k]) ? isnan(y[0][k]) : y[2][k] == y[0][k]);
    for (int k = 0; k < B * IN; k++)
      assert_true(isnan(gx[2][k]) ? isnan(gx[0][k]) : gx[2][k] == gx[0][k]);
    ran++;
  }
  unsetenv("SC_BF16_KERNELS");
  unsetenv("SC_BF16_LAYERS");
  print_message("  [native kernels] %d of 2 runs: windows with NaN and infinite sums pooled and "
                "pulled back as without the fold\n",
                ran);
}

/* a conv's forward with the 2 x 2 max-pool above it folded in (the pooled rows and the masks of
 * the windows' first maxima made as the conv's rows are, SC_BF16_POOL_FOLD=0 to turn it off):
 * the native kernels with and without it give the same loss, gradients (with and without the
 * input gradient) and forward outputs, on 1 and 2 threads, and the model's. The chain: a relu conv
 * pooled (the first layer: the dot-product dW from the masks), an identity conv pooled (dz as
 * floats, the dx from the masks), a conv of 2 output rows pooled (too few rows for the masks: the
 * pool's passes), with quantized inputs so that windows tie */
static void test_kernels_pool_fold(void **state) {
  (void)state;
  enum { B = 45, IN = 2 * 14 * 12, NO = 3 };
  sc_layer L[] = {sc_conv2d_ex(3, 3, 5, SC_RELU, 1, 1, 1, 1),     /* 2x14x12 -> 5x14x12 */
                  sc_maxpool2d(2, 2),                             /* -> 5x7x6 */
                  sc_conv2d_ex(2, 3, 7, SC_IDENTITY, 1, 1, 0, 1), /* -> 7x6x6 */
                  sc_maxpool2d(2, 2),                             /* -> 7x3x3 */
                  sc_conv2d(2, 2, 3, SC_RELU),                    /* -> 3x2x2 */
                  sc_maxpool2d(2, 2),                             /* -> 3x1x1 */
                  sc_flatten(),
                  sc_dense(NO, SC_IDENTITY)};
  if (!kernels_on("native")) {
    unsetenv("SC_BF16_KERNELS");
    unsetenv("SC_BF16_LAYERS");
    skip();
  }
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, 14, 12, L, sizeof L / sizeof *L));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *x = malloc(B * IN * sizeof *x), *p = malloc(np * sizeof *p), *g[5], *gx[5], l[5];
  float *y[5], *gn[5], ln[5]; /* gn, ln: without the input gradient */
  int32_t lab[B];
  assert_true(x && p);
  class_data(x, B * IN, lab, B, 31);
  for (size_t k = 0; k < B * IN; k++) x[k] = 0.25f * (float)(int)(4 * x[k]); /* ties */
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 8));
  for (int m = 0; m < 5; m++) {
    g[m] = malloc(np * sizeof *g[m]);
    gx[m] = malloc(B * IN * sizeof *gx[m]);
    y[m] = malloc(B * NO * sizeof *y[m]);
    gn[m] = malloc(np * sizeof *gn[m]);
    assert_true(g[m] && gx[m] && y[m] && gn[m]);
  }
  /* 0: native without the fold, 1, 2: with it on 1 and 2 threads, 3: without on 2 threads,
   * 4: the model */
  for (int m = 0; m < 5; m++) {
    setenv("SC_BF16_KERNELS", m == 4 ? "model" : "native", 1);
    setenv("SC_BF16_POOL_FOLD", m == 0 || m == 3 ? "0" : "1", 1);
    int threads = m == 2 || m == 3 ? 2 : 1;
    class_valgrad(c, SC_PRECISION_BF16, threads, p, x, lab, B, &l[m], g[m], gx[m]);
    class_valgrad(c, SC_PRECISION_BF16, threads, p, x, lab, B, &ln[m], gn[m], NULL);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_workspace_set_threads(ws, threads));
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, y[m], ws));
    sc_workspace_destroy(ws);
  }
  unsetenv("SC_BF16_POOL_FOLD");
  size_t nz = 0;
  for (size_t k = 0; k < np; k++) nz += g[0][k] != 0;
  assert_true(nz > np / 2); /* the gradients are not trivially equal */
  for (int m = 1; m < 5; m++) {
    assert_memory_equal(&l[m], &l[0], sizeof l[0]);
    assert_memory_equal(g[m], g[0], np * sizeof *g[0]);
    assert_memory_equal(gx[m], gx[0], B * IN * sizeof *gx[0]);
    assert_memory_equal(y[m], y[0], B * NO * sizeof *y[0]);
    assert_memory_equal(&ln[m], &ln[0], sizeof ln[0]);
    assert_memory_equal(gn[m], gn[0], np * sizeof *gn[0]);
  }
  print_message("  [native kernels] the pool folded into the conv: the same loss (%.7g), "
                "gradients (%zu of %zu non-zero), input gradient and outputs as without it "
                "(1 and 2 threads) and as the model\n",
                (double)l[0], nz, np);
  unsetenv("SC_BF16_KERNELS");
  unsetenv("SC_BF16_LAYERS");
  for (int m = 0; m < 5; m++) free(g[m]), free(gx[m]), free(y[m]), free(gn[m]);
  free(x), free(p);
  sc_chain_destroy(c);
}

/* each step of a bf16 dot product is an FMA (Intel SDM: "round to nearest even ... when doing each
 * accumulation of the FMA"): a product of two bf16 that overflows float is not rounded to an
 * infinity first. A dense layer 4 -> 1 with weights (1, 0, 2, 0) on x = (-b, 0, b, 0), b the bf16
 * of 3e38: -b, then -b + 2 b = b (finite; the product rounded first: -b + inf, infinite); on (b,
 * 0, -b, 0): -b; on (b, 0, b, 0): infinite. The model and the native kernels give these bits. */
static void test_kernels_fma_overflow(void **state) {
  (void)state;
  enum { B = 3 };
  sc_layer L[] = {sc_dense(1, SC_IDENTITY)};
  const float b = sc_float_from_bf16(sc_bf16_from_float(3e38f));
  const float x[B * 4] = {-b, 0, b, 0, b, 0, -b, 0, b, 0, b, 0};
  const float p[5] = {1, 0, 2, 0, 0}; /* W, bias */
  const float want[B] = {b, -b, INFINITY};
  int ran = 0;
  for (int k = 0; k < 2; k++) {
    const char *kind = k ? "native" : "model";
    if (!kernels_on(kind)) continue;
    sc_chain *c = NULL;
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, 4, L, 1));
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    setenv("SC_BF16_KERNELS", kind, 1);
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    unsetenv("SC_BF16_KERNELS");
    float y[B];
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, y, ws));
    for (int s = 0; s < B; s++)
      if (fbits(y[s]) != fbits(want[s]))
        fail_msg("%s kernels, sample %d: %a, not %a", kind, s, (double)y[s], (double)want[s]);
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
    ran++;
  }
  unsetenv("SC_BF16_LAYERS");
  print_message(
      "  %d of 2 kinds (model, native): a product past FLT_MAX accumulated as by an FMA\n", ran);
}

/* a small conv's direct forward (pairs of neighbouring columns, odd kernel width) with an
 * infinite input (made by the layer before it: the library refuses non-finite inputs): the
 * outputs whose windows hold it are non-finite, the others equal the emulation's (a window's
 * last column is not paired with its neighbour: no 0 x inf) */
static void test_kernels_direct_inf(void **state) {
  (void)state;
  enum { B = 3, H = 5, W = 7, NY = 2 * 3 * 5 };
  sc_layer L[] = {sc_conv2d(1, 1, 1, SC_IDENTITY),  /* 1x5x7: x * 1e20, overflowing once */
                  sc_conv2d(3, 3, 2, SC_IDENTITY)}; /* -> 2x3x5 */
  float x[B * H * W], ye[B * NY], yb[B * NY];
  for (size_t k = 0; k < B * H * W; k++) x[k] = 0.5f + 0.125f * (float)(k % 5);
  for (size_t b = 0; b < B; b++) x[b * H * W + 2 * W + (W - 1)] = 1e20f; /* row 2, last column */
  for (int kk = 0; kk < 2; kk++) {
    if (!kernels_on(kk ? "native" : "model")) continue;
    unsetenv("SC_BF16_LAYERS");
    sc_chain *c = NULL;
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, H, W, L, 2));
    size_t np;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    float p[64];
    assert_true(np <= 64);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 2));
    p[0] = 1e20f, p[1] = 0; /* the first layer's weight and bias */
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16_EMULATED));
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, ye, ws));
    setenv("SC_BF16_KERNELS", kk ? "native" : "model", 1);
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, SC_PRECISION_BF16));
    unsetenv("SC_BF16_KERNELS");
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, yb, ws));
    size_t finite = 0, inf = 0;
    for (size_t k = 0; k < B * NY; k++) {
      size_t u = k % 15 / 5, v = k % 5; /* the window: input rows u .. u + 2, columns v .. v + 2 */
      if (v + 2 == W - 1 && u <= 2) {
        assert_false(isfinite(yb[k]));
        assert_false(isfinite(ye[k]));
        inf++;
      } else {
        assert_true(isfinite(yb[k]));
        assert_true(fabsf(yb[k] - ye[k]) <= 1e-5f * (1 + fabsf(ye[k])));
        finite++;
      }
    }
    print_message("  [%s kernels] %zu non-finite outputs (windows on the infinite input), %zu "
                  "finite as emulated\n",
                  kk ? "native" : "model", inf, finite);
    sc_workspace_destroy(ws);
    sc_chain_destroy(c);
  }
}

/* A chain of at least 16,384 parameters makes its bf16 weights on the workspace's threads (each
 * worker the units of its part of p, sc__bf16_params_task): on 2 and 3 threads, after a call with
 * other parameters, every weight must be made again from the new p (a unit left out keeps the
 * last call's weights). The same bits as a fresh 1-thread workspace, in each bf16 precision and
 * with the bf16 kernels' model. */
static void test_threads_weights(void **state) {
  (void)state;
  enum { IN = 300, B = 40 };
  sc_layer L[] = {sc_dense(60, SC_RELU), sc_dense(30, SC_TANH), sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, IN, L, 3));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  assert_true(np >= 16384);
  float *p1 = malloc(np * sizeof *p1), *p2 = malloc(np * sizeof *p2);
  float *g1 = malloc(np * sizeof *g1), *g2 = malloc(np * sizeof *g2), x[B * IN];
  int32_t lab[B];
  assert_true(p1 && p2 && g1 && g2);
  class_data(x, B * IN, lab, B, 11);
  SC_OK_OR_FAIL(sc_params_init(c, p1, np, 1));
  SC_OK_OR_FAIL(sc_params_init(c, p2, np, 2));
  for (int k = 0; k < 3; k++) { /* emulated, bf16 (native where the CPU has it), the model */
    if (k == 2) setenv("SC_BF16_KERNELS", "model", 1);
    sc_precision pr = k ? SC_PRECISION_BF16 : SC_PRECISION_BF16_EMULATED;
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    if (sc_workspace_set_precision(ws, pr) != SC_OK) { /* (no bf16 on this CPU) */
      sc_workspace_destroy(ws);
      continue;
    }
    float l1, l2;
    SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p2, x, lab, B, &l1, g1, NULL, ws));
    for (int t = 2; t <= 3; t++) {
      sc_workspace *wt = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&wt, c, B));
      SC_OK_OR_FAIL(sc_workspace_set_precision(wt, pr));
      SC_OK_OR_FAIL(sc_workspace_set_threads(wt, t));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p1, x, lab, B, &l2, g2, NULL, wt));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p2, x, lab, B, &l2, g2, NULL, wt));
      if (memcmp(g1, g2, np * sizeof *g1) != 0 || memcmp(&l1, &l2, sizeof l1) != 0)
        fail_msg("precision %d%s, %d threads: the gradient differs from 1 thread's", (int)pr,
                 k == 2 ? " (model)" : "", t);
      sc_workspace_destroy(wt);
    }
    sc_workspace_destroy(ws);
  }
  unsetenv("SC_BF16_KERNELS");
  free(p1), free(p2), free(g1), free(g2);
  sc_chain_destroy(c);
}

/* training in the emulated precision learns what fp32 learns: 3 classes of points */
static void test_emulated_training(void **state) {
  (void)state;
  enum { N = 600 };
  float x[N * 2];
  int32_t y[N];
  uint64_t s = 5;
  for (size_t i = 0; i < N; i++) {
    int k = (int)(i % 3);
    double r = 0.2 + 0.8 * (tu_unif(&s) + 1) / 2, th = 2.1 * k + 2.5 * r + 0.15 * tu_unif(&s);
    x[2 * i] = (float)(r * cos(th)), x[2 * i + 1] = (float)(r * sin(th));
    y[i] = k;
  }
  sc_layer L[] = {sc_dense(32, SC_TANH), sc_dense(32, SC_RELU), sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 2, L, 3));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *p = malloc(np * sizeof *p);
  assert_non_null(p);
  double acc[3];
  for (int bf = 0; bf < 3; bf++) { /* fp32, emulated, the bf16 kernels' model */
    if (bf == 2) setenv("SC_BF16_KERNELS", "model", 1);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 2));
    sc_train_opts o = sc_train_defaults();
    o.optim = sc_adam(1e-2);
    o.epochs = 150;
    o.batch_size = 64;
    o.seed = 3;
    o.precision = bf == 2 ? SC_PRECISION_BF16 : bf ? SC_PRECISION_BF16_EMULATED : SC_PRECISION_FP32;
    sc_data d = {x, y, N};
    SC_OK_OR_FAIL(sc_train(c, SC_LOSS_LOGIT_CROSSENTROPY, p, &d, &o, NULL));
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, N));
    SC_OK_OR_FAIL(sc_workspace_set_precision(ws, o.precision));
    SC_OK_OR_FAIL(sc_evaluate(c, p, x, y, N, NULL, &acc[bf], ws));
    sc_workspace_destroy(ws);
  }
  unsetenv("SC_BF16_KERNELS");
  print_message("  training accuracy after 150 epochs: fp32 %.2f %%, bf16-emulated %.2f %%, bf16 "
                "(the kernels' model) %.2f %%\n",
                100 * acc[0], 100 * acc[1], 100 * acc[2]);
  assert_true(acc[0] >= 0.95);
  assert_true(acc[1] >= 0.95);
  assert_true(acc[2] >= 0.95);
  free(p);
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_convert),
      cmocka_unit_test(test_precision_api),
      cmocka_unit_test(test_emulated_rounding),
      cmocka_unit_test(test_emulated_reference),
      cmocka_unit_test(test_emulated_conv),
      cmocka_unit_test(test_kernels_reference),
      cmocka_unit_test(test_kernels_shapes),
      cmocka_unit_test(test_kernels_conv),
      cmocka_unit_test(test_kernels_dx_corr),
      cmocka_unit_test(test_kernels_auto_layers),
      cmocka_unit_test(test_kernels_direct_inf),
      cmocka_unit_test(test_kernels_fma_overflow),
      cmocka_unit_test(test_kernels_epilogue_nan),
      cmocka_unit_test(test_kernels_pool_ties),
      cmocka_unit_test(test_kernels_pool_round_ties),
      cmocka_unit_test(test_kernels_pool_fold),
      cmocka_unit_test(test_kernels_pool_fold_nan),
      cmocka_unit_test(test_threads_weights),
      cmocka_unit_test(test_emulated_training),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
