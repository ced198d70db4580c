/* tests/test_api.c — bad input for every public function of simplechain.h.
 *
 * Every failing call is checked three ways:
 *   - the exact status code (SC_EXPECT, which also wants a non-empty message);
 *   - the message is fresh: a known "marker" failure is produced right before the
 *     call, and the message afterwards must differ from it (a stale message from an
 *     earlier failure would otherwise satisfy "non-empty");
 *   - the message starts with the name of the function that was called ("sc_forward: "),
 *     as sc_last_error() documents, and, where given, mentions the specific problem.
 */
#include "testutil.h"

#include <pthread.h>

/* ------------------------------------------------------------------ message checks */
static const char *MARK_A = "sc_workspace_set_threads: argument 'ws' is NULL";
static const char *MARK_B = "sc_chain_nparams: argument 'chain' is NULL";

/* Leaves a known message in sc_last_error(); returns it. The marker must not be the
 * message the call under test is expected to produce, so two are available. */
static const char *mark(const char *callstr) {
  if (strncmp(callstr, "sc_workspace_set_threads", 24) == 0) {
    assert_int_equal(sc_chain_nparams(NULL, NULL), SC_ERR_NULL);
    assert_string_equal(sc_last_error(), MARK_B);
    return MARK_B;
  }
  assert_int_equal(sc_workspace_set_threads(NULL, 1), SC_ERR_NULL);
  assert_string_equal(sc_last_error(), MARK_A);
  return MARK_A;
}

/* fn: the function the message must start with (NULL: the function named in callstr);
 * needle: a substring the message must contain (NULL: none). */
static void check_msg(const char *callstr, const char *marker, const char *fn, const char *needle) {
  const char *msg = sc_last_error();
  char name[64];
  size_t k = 0;
  if (!fn) {
    while (callstr[k] && callstr[k] != '(' && callstr[k] != ' ' && k + 1 < sizeof name) {
      name[k] = callstr[k];
      k++;
    }
    name[k] = 0;
    fn = name;
  }
  if (strcmp(msg, marker) == 0) fail_msg("%s: left the previous message '%s'", callstr, msg);
  size_t n = strlen(fn);
  if (strncmp(msg, fn, n) != 0 || msg[n] != ':')
    fail_msg("%s: message '%s' does not start with '%s:'", callstr, msg, fn);
  if (needle && !strstr(msg, needle))
    fail_msg("%s: message '%s' does not mention '%s'", callstr, msg, needle);
}

/* a failing call: status, fresh message naming the called function (+ needle) */
#define EXPECT_FAIL(want, call, needle)                                                            \
  do {                                                                                             \
    const char *mk_ = mark(#call);                                                                 \
    SC_EXPECT(want, call);                                                                         \
    check_msg(#call, mk_, NULL, needle);                                                           \
  } while (0)
/* the same, when the message may name another (library) function */
#define EXPECT_FAIL_FN(want, call, fn, needle)                                                     \
  do {                                                                                             \
    const char *mk_ = mark(#call);                                                                 \
    SC_EXPECT(want, call);                                                                         \
    check_msg(#call, mk_, fn, needle);                                                             \
  } while (0)

/* either of two status codes (where the header allows both) */
#define EXPECT_FAIL2(want1, want2, call)                                                           \
  do {                                                                                             \
    const char *mk_ = mark(#call);                                                                 \
    sc_status st2_ = (call);                                                                       \
    if (st2_ != (want1) && st2_ != (want2))                                                        \
      fail_msg("%s -> %s, expected %s or %s (%s)", #call, sc_status_str(st2_),                     \
               sc_status_str(want1), sc_status_str(want2), sc_last_error());                       \
    check_msg(#call, mk_, NULL, NULL);                                                             \
  } while (0)

/* ------------------------------------------------------------------ fixture */
/* chain 3 -> 4 tanh -> 2, workspace for batches of up to 8, data for 8 samples */
enum { FI = 3, FH = 4, FO = 2, FB = 8 };
typedef struct fx {
  sc_chain *c, *other;
  sc_workspace *ws, *ws_other;
  size_t np;
  float p[32], g[32], x[FB * FI], t[FB * FO], y[FB * FO], gx[FB * FI], dy[FB * FO];
  double pd[32], gd[32], xd[FB * FI], td[FB * FO], yd[FB * FO], gxd[FB * FI], dyd[FB * FO];
  int32_t lab[FB];
} fx;

static int fx_setup(void **state) {
  fx *f = calloc(1, sizeof *f);
  assert_non_null(f);
  sc_layer L[] = {sc_dense(FH, SC_TANH), sc_dense(FO, SC_IDENTITY)};
  sc_layer L2[] = {sc_dense(FH, SC_TANH), sc_dense(FO, SC_IDENTITY)};
  SC_OK_OR_FAIL(sc_chain_create(&f->c, FI, L, 2));
  /* same shape, different chain object */
  SC_OK_OR_FAIL(sc_chain_create(&f->other, FI, L2, 2));
  SC_OK_OR_FAIL(sc_chain_nparams(f->c, &f->np));
  assert_int_equal(f->np, FI * FH + FH + FH * FO + FO);
  SC_OK_OR_FAIL(sc_params_init(f->c, f->p, f->np, 1));
  SC_OK_OR_FAIL(sc_params_init_f64(f->c, f->pd, f->np, 1));
  SC_OK_OR_FAIL(sc_workspace_create(&f->ws, f->c, FB));
  SC_OK_OR_FAIL(sc_workspace_create(&f->ws_other, f->other, FB));
  tu_fill_f32(f->x, FB * FI, 11, 1.0);
  tu_fill_f32(f->t, FB * FO, 12, 1.0);
  tu_fill_f32(f->dy, FB * FO, 13, 1.0);
  tu_fill_f64(f->xd, FB * FI, 11, 1.0);
  tu_fill_f64(f->td, FB * FO, 12, 1.0);
  tu_fill_f64(f->dyd, FB * FO, 13, 1.0);
  for (int b = 0; b < FB; b++) f->lab[b] = b % FO;
  *state = f;
  return 0;
}

static int fx_teardown(void **state) {
  fx *f = *state;
  sc_workspace_destroy(f->ws);
  sc_workspace_destroy(f->ws_other);
  sc_chain_destroy(f->c);
  sc_chain_destroy(f->other);
  free(f);
  return 0;
}

/* ------------------------------------------------------------------ status, errors */
static void test_status_str(void **state) {
  (void)state;
  static const char *names[] = {
      "SC_OK",           "SC_ERR_NULL",    "SC_ERR_ARG",         "SC_ERR_SHAPE",
      "SC_ERR_OVERFLOW", "SC_ERR_NOMEM",   "SC_ERR_NONFINITE",   "SC_ERR_BATCH",
      "SC_ERR_IO",       "SC_ERR_FORMAT",  "SC_ERR_UNSUPPORTED", "SC_ERR_THREAD",
      "SC_ERR_STOPPED",  "SC_ERR_CALLBACK"};
  const int ncodes = (int)(sizeof names / sizeof names[0]);
  assert_int_equal(ncodes, SC_ERR_CALLBACK + 1);
  for (int s = 0; s < ncodes; s++) {
    const char *n = sc_status_str((sc_status)s);
    assert_non_null(n);
    assert_string_equal(n, names[s]);
    /* static: the same pointer every time */
    assert_ptr_equal(n, sc_status_str((sc_status)s));
  }
  /* out-of-range values still give a non-NULL, non-empty name that is none of the above */
  const sc_status bad[] = {(sc_status)(SC_ERR_CALLBACK + 1), (sc_status)999, (sc_status)-1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *n = sc_status_str(bad[i]);
    assert_non_null(n);
    assert_true(strlen(n) > 0);
    for (int s = 0; s < ncodes; s++) assert_string_not_equal(n, names[s]);
  }
}

static void *fresh_thread(void *arg) {
  char *out = arg; /* [0]: message at start, [256]: message after a failure here */
  const char *m = sc_last_error();
  snprintf(out, 256, "%s", m ? m : "(null)");
  sc_status st = sc_chain_input_size(NULL, NULL);
  snprintf(out + 256, 256, "%d %s", (int)st, sc_last_error());
  return NULL;
}

static void test_last_error(void **state) {
  (void)state;
  /* a failure in this thread */
  assert_int_equal(sc_chain_output_size(NULL, NULL), SC_ERR_NULL);
  const char *m = sc_last_error();
  assert_non_null(m);
  assert_non_null(strstr(m, "sc_chain_output_size"));
  char keep[512];
  snprintf(keep, sizeof keep, "%s", m);
  /* a successful call does not change the message of the last failure */
  sc_layer l = sc_dense(1, SC_IDENTITY);
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 1, &l, 1));
  assert_string_equal(sc_last_error(), keep);
  /* thread-local: a new thread starts with "" and its failure does not leak here */
  char buf[512] = {0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, fresh_thread, buf), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_string_equal(buf, "");
  char want[64];
  snprintf(want, sizeof want, "%d sc_chain_input_size:", (int)SC_ERR_NULL);
  assert_memory_equal(buf + 256, want, strlen(want));
  assert_string_equal(sc_last_error(), keep);
  sc_chain_destroy(c);
}

/* ------------------------------------------------------------------ layers, chains */
static void test_layers_and_act_names(void **state) {
  (void)state;
  sc_layer l = sc_dense(7, SC_GELU);
  assert_int_equal(l.kind, SC_LAYER_DENSE);
  assert_int_equal(l.act, SC_GELU);
  assert_int_equal(l.outputs, 7);
  assert_int_equal(l.bias, 1);
  l = sc_dense_nobias(5, SC_RELU);
  assert_int_equal(l.kind, SC_LAYER_DENSE);
  assert_int_equal(l.act, SC_RELU);
  assert_int_equal(l.outputs, 5);
  assert_int_equal(l.bias, 0);
  assert_string_equal(sc_act_name(SC_IDENTITY), "identity");
  assert_string_equal(sc_act_name(SC_RELU), "relu");
  assert_string_equal(sc_act_name(SC_TANH), "tanh");
  assert_string_equal(sc_act_name(SC_SIGMOID), "sigmoid");
  assert_string_equal(sc_act_name(SC_SOFTPLUS), "softplus");
  assert_string_equal(sc_act_name(SC_GELU), "gelu");
  assert_string_equal(sc_act_name(SC_SILU), "silu");
  assert_string_equal(sc_act_name((sc_act)(SC_SILU + 1)), "?");
  assert_string_equal(sc_act_name((sc_act)-1), "?");
  assert_string_equal(sc_act_name((sc_act)1000), "?");
}

static void test_chain_create_bad(void **state) {
  (void)state;
  sc_chain *c = NULL;
  sc_layer ok2[] = {sc_dense(4, SC_TANH), sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_create(NULL, 3, ok2, 2), "out");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_create(&c, 3, NULL, 2), "layers");
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, ok2, 0), "nlayers");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_chain_create(&c, 0, ok2, 2), "input_features");

  sc_layer bad[2];
  /* zero outputs, in the first and in the last layer */
  bad[0] = sc_dense(0, SC_TANH);
  bad[1] = sc_dense(2, SC_IDENTITY);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_chain_create(&c, 3, bad, 2), "layer 0");
  bad[0] = sc_dense(4, SC_TANH);
  bad[1] = sc_dense_nobias(0, SC_IDENTITY);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_chain_create(&c, 3, bad, 2), "layer 1");
  /* unknown activations */
  const int acts[] = {-1, SC_SILU + 1, 77};
  for (size_t i = 0; i < 3; i++) {
    bad[0] = sc_dense(4, SC_TANH);
    bad[1] = sc_dense(2, (sc_act)acts[i]);
    EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, bad, 2), "activation");
  }
  /* unknown layer kinds */
  const int kinds[] = {0, SC_LAYER_DROPOUT + 1, -3}; /* just past the last kind */
  for (size_t i = 0; i < 3; i++) {
    bad[0] = sc_dense(4, SC_TANH);
    bad[0].kind = (sc_layer_kind)kinds[i];
    bad[1] = sc_dense(2, SC_IDENTITY);
    EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, bad, 2), "kind");
  }
  /* bias must be 0 or 1 */
  const int biases[] = {2, -1, 100};
  for (size_t i = 0; i < 3; i++) {
    bad[0] = sc_dense(4, SC_TANH);
    bad[1] = sc_dense(2, SC_IDENTITY);
    bad[1].bias = biases[i];
    EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, bad, 2), "bias");
  }
  /* a bad SC_ISA value is an argument error of sc_chain_create */
  {
    const char *saved = getenv("SC_ISA");
    char keep[64] = {0};
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    setenv("SC_ISA", "sse9", 1);
    EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, ok2, 2), "sse9");
    /* an ISA this CPU/build lacks (if any) is SC_ERR_UNSUPPORTED */
    const char *have[3];
    int nh = tu_isas(have);
    static const char *all[] = {"avx2", "avx512"};
    for (int i = 0; i < 2; i++) {
      int found = 0;
      for (int k = 0; k < nh; k++) found |= strcmp(have[k], all[i]) == 0;
      if (found) continue;
      setenv("SC_ISA", all[i], 1);
      EXPECT_FAIL(SC_ERR_UNSUPPORTED, sc_chain_create(&c, 3, ok2, 2), all[i]);
    }
    if (saved)
      setenv("SC_ISA", keep, 1);
    else
      unsetenv("SC_ISA");
  }
  /* the good list still works, and agrees with what it was given */
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, ok2, 2));
  size_t v = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &v));
  assert_int_equal(v, 3 * 4 + 4 + 4 * 2 + 2);
  sc_chain_destroy(c);
  sc_chain_destroy(NULL); /* fine */
}

/* a field the layer's kind does not use is refused, naming it, so that a
 * chain means one thing and a file saved from its constructor-built twin loads */
static void test_unused_fields(void **state) {
  (void)state;
  sc_chain *c = NULL;
  sc_layer d = sc_dense(4, SC_TANH);
  d.kh = 5;
  sc_layer l1[] = {d, sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, l1, 2), "'kh'");
  d = sc_dense(4, SC_TANH);
  d.ph = 7;
  l1[0] = d;
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, l1, 2), "'ph'");
  sc_layer f = sc_flatten();
  f.outputs = 99;
  sc_layer l2[] = {sc_conv2d(2, 2, 3, SC_RELU), f, sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create_image(&c, 1, 5, 5, l2, 3), "'outputs'");
  f = sc_flatten();
  f.act = (sc_act)77;
  l2[1] = f;
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create_image(&c, 1, 5, 5, l2, 3), "'act'");
  sc_layer m = sc_maxpool2d(2, 2);
  m.sh = 1;
  sc_layer l3[] = {sc_conv2d(2, 2, 3, SC_RELU), m, sc_flatten(), sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create_image(&c, 1, 7, 7, l3, 4), "stride");
  sc_layer dr = sc_dropout(0.5);
  dr.kh = 3;
  sc_layer l4[] = {sc_dense(4, SC_TANH), dr, sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create(&c, 3, l4, 3), "'kh'");
  sc_layer cv = sc_conv2d(2, 2, 3, SC_RELU);
  cv.rate = NAN;
  l3[0] = cv;
  l3[1] = sc_maxpool2d(2, 2);
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_create_image(&c, 1, 7, 7, l3, 4), "'rate'");
  /* a dense layer set field by field with the unused ones zero is the constructor's twin:
   * a file saved from one loads into the other */
  sc_layer hand = {.kind = SC_LAYER_DENSE, .act = SC_TANH, .outputs = 4, .bias = 1};
  sc_layer la[] = {hand, sc_dense(2, SC_IDENTITY)};
  sc_chain *a = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&a, 3, la, 2));
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, (sc_layer[]){sc_dense(4, SC_TANH), sc_dense(2, 0)}, 2));
  size_t n;
  sc_chain_nparams(a, &n);
  float *p = calloc(n, sizeof *p);
  SC_OK_OR_FAIL(sc_params_init(a, p, n, 4));
  char path[512];
  tu_tmp_path(path, sizeof path, "api", "twin.scp");
  SC_OK_OR_FAIL(sc_params_save(a, p, n, path));
  SC_OK_OR_FAIL(sc_params_load(c, p, n, path));
  remove(path);
  free(p);
  sc_chain_destroy(a);
  sc_chain_destroy(c);
  /* sc_conv2d_nobias: weights only, K x C x kh x kw */
  sc_layer l5[] = {sc_conv2d_nobias(3, 2, 4, SC_TANH, 1, 2, 1, 0), sc_flatten(),
                   sc_dense(2, SC_IDENTITY)};
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 2, 6, 6, l5, 3));
  sc_layer_info li;
  SC_OK_OR_FAIL(sc_chain_layer_info(c, 0, &li));
  assert_int_equal(li.nparams, 4 * 2 * 3 * 2);
  assert_int_equal(li.layer.bias, 0);
  sc_chain_destroy(c);
}

static void test_chain_overflow(void **state) {
  (void)state;
  sc_chain *c = NULL;
  /* outputs far too large */
  sc_layer big[] = {sc_dense(SIZE_MAX / 2, SC_TANH), sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL2(SC_ERR_OVERFLOW, SC_ERR_SHAPE, sc_chain_create(&c, 3, big, 2));
  sc_layer big2[] = {sc_dense(4, SC_TANH), sc_dense_nobias(SIZE_MAX, SC_IDENTITY)};
  EXPECT_FAIL2(SC_ERR_OVERFLOW, SC_ERR_SHAPE, sc_chain_create(&c, 3, big2, 2));
  /* input_features far too large */
  sc_layer small[] = {sc_dense(2, SC_IDENTITY)};
  EXPECT_FAIL2(SC_ERR_OVERFLOW, SC_ERR_SHAPE, sc_chain_create(&c, SIZE_MAX / 2, small, 1));
  EXPECT_FAIL2(SC_ERR_OVERFLOW, SC_ERR_SHAPE, sc_chain_create(&c, SIZE_MAX, small, 1));
  /* the parameter count itself overflows size_t: 256 layers of 2^28 x 2^28 */
  {
    size_t n = 256, w = (size_t)1 << 28;
    sc_layer *L = malloc(n * sizeof *L);
    assert_non_null(L);
    for (size_t i = 0; i < n; i++) L[i] = sc_dense(w, SC_IDENTITY);
    EXPECT_FAIL2(SC_ERR_OVERFLOW, SC_ERR_SHAPE, sc_chain_create(&c, w, L, n));
    free(L);
  }
  /* a valid chain whose workspace / optimizer sizes overflow: 32 layers 2^28 x 2^28
   * have 2^61 parameters, 2^64 bytes as double */
  {
    size_t n = 32, w = (size_t)1 << 28;
    sc_layer *L = malloc(n * sizeof *L);
    assert_non_null(L);
    for (size_t i = 0; i < n; i++) L[i] = sc_dense_nobias(w, SC_IDENTITY);
    sc_status st = sc_chain_create(&c, w, L, n);
    free(L);
    if (st == SC_OK) {
      size_t np = 0, bytes = 0;
      SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
      assert_true(np == (size_t)32 << 56);
      sc_workspace *ws = NULL;
      EXPECT_FAIL(SC_ERR_OVERFLOW, sc_workspace_bytes(c, 1, &bytes), NULL);
      EXPECT_FAIL(SC_ERR_OVERFLOW, sc_workspace_create(&ws, c, 1), NULL);
      unsigned char mem[64];
      EXPECT_FAIL(SC_ERR_OVERFLOW, sc_workspace_init(&ws, c, 1, mem, sizeof mem), NULL);
      sc_chain_destroy(c);
    } else {
      /* a library may refuse such a chain up front, but only as a size problem */
      assert_true(st == SC_ERR_OVERFLOW || st == SC_ERR_SHAPE);
    }
  }
  /* optimizer state size overflow */
  sc_optim o = sc_adam(1e-3);
  size_t bytes = 0;
  sc_optimizer *opt = NULL;
  EXPECT_FAIL(SC_ERR_OVERFLOW, sc_optimizer_bytes(&o, SIZE_MAX / 2, &bytes), NULL);
  EXPECT_FAIL(SC_ERR_OVERFLOW, sc_optimizer_create(&opt, &o, SIZE_MAX / 4), NULL);
  unsigned char mem[64];
  EXPECT_FAIL(SC_ERR_OVERFLOW, sc_optimizer_init(&opt, &o, SIZE_MAX / 3, mem, sizeof mem), NULL);
}

/* Huge but representable sizes: malloc fails -> SC_ERR_NOMEM. AddressSanitizer aborts on
 * such requests instead of returning NULL, so this runs in the plain build only. */
static void test_out_of_memory(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  skip();
#else
  sc_chain *c = NULL;
  /* 2^24 inputs -> 2^23 outputs: 2^47 parameters, a 2^50-byte workspace */
  sc_layer L[] = {sc_dense_nobias((size_t)1 << 23, SC_IDENTITY)};
  SC_OK_OR_FAIL(sc_chain_create(&c, (size_t)1 << 24, L, 1));
  sc_workspace *ws = NULL;
  size_t bytes = 0;
  SC_OK_OR_FAIL(sc_workspace_bytes(c, 1, &bytes));
  assert_true(bytes >= ((size_t)1 << 50));
  EXPECT_FAIL(SC_ERR_NOMEM, sc_workspace_create(&ws, c, 1), NULL);
  sc_chain_destroy(c);
  sc_optim o = sc_sgd(0.1, 0.0);
  sc_optimizer *opt = NULL;
  EXPECT_FAIL(SC_ERR_NOMEM, sc_optimizer_create(&opt, &o, (size_t)1 << 55), NULL);
#endif
}

static void test_chain_queries_bad(void **state) {
  fx *f = *state;
  size_t v = 12345;
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_nparams(NULL, &v), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_nparams(f->c, NULL), NULL);
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_input_size(NULL, &v), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_input_size(f->c, NULL), NULL);
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_output_size(NULL, &v), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_output_size(f->c, NULL), NULL);
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_nlayers(NULL, &v), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_nlayers(f->c, NULL), NULL);
  sc_layer_info info;
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_layer_info(NULL, 0, &info), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_layer_info(f->c, 0, NULL), "info");
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_layer_info(f->c, 2, &info), "2");
  EXPECT_FAIL(SC_ERR_ARG, sc_chain_layer_info(f->c, SIZE_MAX, &info), NULL);
  /* and the good calls give the right answers */
  SC_OK_OR_FAIL(sc_chain_input_size(f->c, &v));
  assert_int_equal(v, FI);
  SC_OK_OR_FAIL(sc_chain_output_size(f->c, &v));
  assert_int_equal(v, FO);
  SC_OK_OR_FAIL(sc_chain_nlayers(f->c, &v));
  assert_int_equal(v, 2);
  SC_OK_OR_FAIL(sc_chain_layer_info(f->c, 1, &info));
  assert_int_equal(info.inputs, FH);
  assert_int_equal(info.outputs, FO);
  assert_int_equal(info.nparams, FH * FO + FO);
  assert_int_equal(info.param_offset, FI * FH + FH);
  assert_int_equal(info.layer.act, SC_IDENTITY);
  /* sc_chain_isa: "?" for NULL, a known name otherwise */
  assert_string_equal(sc_chain_isa(NULL), "?");
  const char *isa = sc_chain_isa(f->c);
  assert_true(strcmp(isa, "scalar") == 0 || strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0);
}

static void test_summary(void **state) {
  fx *f = *state;
  size_t needed = 0;
  char small[16];
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_summary(NULL, small, sizeof small, &needed), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_chain_summary(f->c, NULL, 10, &needed), NULL);
  /* the needed-size protocol: buf NULL, cap 0 */
  needed = 0;
  EXPECT_FAIL(SC_ERR_NOMEM, sc_chain_summary(f->c, NULL, 0, &needed), NULL);
  assert_true(needed > 1);
  char *full = malloc(needed);
  assert_non_null(full);
  memset(full, 'X', needed);
  size_t needed2 = 0;
  SC_OK_OR_FAIL(sc_chain_summary(f->c, full, needed, &needed2));
  assert_int_equal(needed2, needed);
  assert_int_equal(strlen(full), needed - 1);
  /* content: both layers, their activations, parameter counts and offsets */
  assert_non_null(strstr(full, "dense"));
  assert_non_null(strstr(full, "tanh"));
  assert_non_null(strstr(full, "identity"));
  char num[64];
  snprintf(num, sizeof num, "%zu", f->np);
  assert_non_null(strstr(full, num));
  assert_non_null(strstr(full, sc_chain_isa(f->c)));
  /* needed may be NULL */
  SC_OK_OR_FAIL(sc_chain_summary(f->c, full, needed, NULL));
  assert_int_equal(strlen(full), needed - 1);
  /* a larger buffer is fine too */
  char *big = malloc(needed + 100);
  assert_non_null(big);
  SC_OK_OR_FAIL(sc_chain_summary(f->c, big, needed + 100, &needed2));
  assert_int_equal(needed2, needed);
  assert_string_equal(big, full);
  /* too small by one, and several smaller sizes: NOMEM, NUL-terminated truncation that
   * is a prefix of the full text, *needed still the full size, nothing written past cap */
  const size_t caps[] = {needed - 1, needed / 2, 17, 2, 1};
  for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
    size_t cap = caps[i];
    char *b = malloc(cap + 8);
    assert_non_null(b);
    memset(b, 'Z', cap + 8);
    needed2 = 0;
    EXPECT_FAIL(SC_ERR_NOMEM, sc_chain_summary(f->c, b, cap, &needed2), NULL);
    assert_int_equal(needed2, needed);
    assert_int_equal(b[cap - 1], 0);
    assert_int_equal(strlen(b), cap - 1);
    assert_memory_equal(b, full, cap - 1);
    for (size_t k = cap; k < cap + 8; k++) assert_int_equal(b[k], 'Z');
    free(b);
  }
  /* the message says how much was needed */
  snprintf(num, sizeof num, "%zu", needed);
  char one;
  EXPECT_FAIL(SC_ERR_NOMEM, sc_chain_summary(f->c, &one, 1, NULL), num);
  assert_int_equal(one, 0);
  free(big);
  free(full);
}

/* ------------------------------------------------------------------ params, workspaces */
static void test_params_init_bad(void **state) {
  fx *f = *state;
  EXPECT_FAIL(SC_ERR_NULL, sc_params_init(NULL, f->p, f->np, 1), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_init(f->c, NULL, f->np, 1), "'p'");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_init(f->c, f->p, f->np - 1, 1), NULL);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_init(f->c, f->p, f->np + 1, 1), NULL);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_init(f->c, f->p, 0, 1), NULL);
  EXPECT_FAIL(SC_ERR_NULL, sc_params_init_f64(NULL, f->pd, f->np, 1), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_init_f64(f->c, NULL, f->np, 1), "'p'");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_init_f64(f->c, f->pd, f->np - 1, 1), NULL);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_init_f64(f->c, f->pd, 0, 1), NULL);
  /* the good call: Glorot bound, biases 0, float and double agree */
  float p[32];
  double pd[32];
  SC_OK_OR_FAIL(sc_params_init(f->c, p, f->np, 7));
  SC_OK_OR_FAIL(sc_params_init_f64(f->c, pd, f->np, 7));
  double a0 = sqrt(6.0 / (FI + FH)), a1 = sqrt(6.0 / (FH + FO));
  for (size_t k = 0; k < f->np; k++) {
    assert_true(p[k] == (float)pd[k]);
    if (k < FI * FH)
      assert_true(fabs(pd[k]) <= a0);
    else if (k < FI * FH + FH)
      assert_true(pd[k] == 0);
    else if (k < FI * FH + FH + FH * FO)
      assert_true(fabs(pd[k]) <= a1);
    else
      assert_true(pd[k] == 0);
  }
}

static void test_workspace_bad(void **state) {
  fx *f = *state;
  size_t bytes = 0;
  sc_workspace *ws = NULL;
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_bytes(NULL, 4, &bytes), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_bytes(f->c, 4, NULL), "bytes");
  EXPECT_FAIL(SC_ERR_BATCH, sc_workspace_bytes(f->c, 0, &bytes), "max_batch");
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_create(NULL, f->c, 4), "out");
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_create(&ws, NULL, 4), "chain");
  EXPECT_FAIL(SC_ERR_BATCH, sc_workspace_create(&ws, f->c, 0), "max_batch");

  SC_OK_OR_FAIL(sc_workspace_bytes(f->c, 4, &bytes));
  assert_true(bytes > 0);
  unsigned char *mem = malloc(bytes + 1);
  assert_non_null(mem);
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_init(NULL, f->c, 4, mem, bytes), "out");
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_init(&ws, NULL, 4, mem, bytes), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_init(&ws, f->c, 4, NULL, bytes), "mem");
  EXPECT_FAIL(SC_ERR_BATCH, sc_workspace_init(&ws, f->c, 0, mem, bytes), "max_batch");
  /* caller memory too small: by one byte, and none at all */
  char num[32];
  snprintf(num, sizeof num, "%zu", bytes);
  EXPECT_FAIL(SC_ERR_NOMEM, sc_workspace_init(&ws, f->c, 4, mem, bytes - 1), num);
  EXPECT_FAIL(SC_ERR_NOMEM, sc_workspace_init(&ws, f->c, 4, mem, 0), NULL);
  /* more samples need at least as much */
  size_t bytes_more = 0;
  SC_OK_OR_FAIL(sc_workspace_bytes(f->c, 1000, &bytes_more));
  assert_true(bytes_more >= bytes);
  EXPECT_FAIL(SC_ERR_NOMEM, sc_workspace_init(&ws, f->c, 1000, mem, bytes), NULL);
  /* exactly enough, at an odd address ("any alignment"), works and computes */
  SC_OK_OR_FAIL(sc_workspace_init(&ws, f->c, 4, mem + 1, bytes));
  float y1[4 * FO], y2[4 * FO];
  SC_OK_OR_FAIL(sc_forward(f->c, f->p, f->x, 4, y1, ws));
  SC_OK_OR_FAIL(sc_forward(f->c, f->p, f->x, 4, y2, f->ws));
  assert_memory_equal(y1, y2, sizeof y1);
  /* batch bounded by the max_batch given at init, not by the chain */
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward(f->c, f->p, f->x, 5, y1, ws), "max_batch");

  /* threads */
  EXPECT_FAIL(SC_ERR_NULL, sc_workspace_set_threads(NULL, 2), "ws");
  EXPECT_FAIL(SC_ERR_ARG, sc_workspace_set_threads(ws, 0), "threads");
  EXPECT_FAIL(SC_ERR_ARG, sc_workspace_set_threads(ws, -1), "threads");
  EXPECT_FAIL(SC_ERR_ARG, sc_workspace_set_threads(ws, 1 << 30), "threads");
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, 1));
  sc_workspace_destroy(ws); /* allowed on caller memory (stops threads; none here) */
  sc_workspace_destroy(NULL);
  free(mem);
}

/* ------------------------------------------------------------------ parameter files */
static void write_bytes(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}
static unsigned char *read_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  unsigned char *b = malloc(1 << 16);
  assert_non_null(b);
  *n = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

static void test_params_file_bad(void **state) {
  fx *f = *state;
  char dir[] = "/tmp/sc_api_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256], bad[256], missing[256];
  snprintf(path, sizeof path, "%s/p.bin", dir);
  snprintf(bad, sizeof bad, "%s/bad.bin", dir);
  snprintf(missing, sizeof missing, "%s/no/such/dir/p.bin", dir);
  float q[32];

  EXPECT_FAIL(SC_ERR_NULL, sc_params_save(NULL, f->p, f->np, path), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_save(f->c, NULL, f->np, path), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_save(f->c, f->p, f->np, NULL), "path");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_save(f->c, f->p, f->np - 1, path), NULL);
  EXPECT_FAIL2(SC_ERR_ARG, SC_ERR_IO, sc_params_save(f->c, f->p, f->np, ""));
  EXPECT_FAIL(SC_ERR_IO, sc_params_save(f->c, f->p, f->np, missing), NULL);
  EXPECT_FAIL(SC_ERR_NULL, sc_params_load(NULL, q, f->np, path), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_load(f->c, NULL, f->np, path), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_params_load(f->c, q, f->np, NULL), "path");
  EXPECT_FAIL(SC_ERR_IO, sc_params_load(f->c, q, f->np, missing), NULL);

  /* a good round trip */
  SC_OK_OR_FAIL(sc_params_save(f->c, f->p, f->np, path));
  memset(q, 0, sizeof q);
  SC_OK_OR_FAIL(sc_params_load(f->c, q, f->np, path));
  assert_memory_equal(q, f->p, f->np * sizeof(float));
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_load(f->c, q, f->np + 1, path), NULL);

  size_t len = 0;
  unsigned char *good = read_bytes(path, &len);
  assert_int_equal(len, 32 + 4 * f->np + 8);
  assert_memory_equal(good, "SCPARAMS", 8);
  unsigned char *b = malloc(len + 1);
  assert_non_null(b);
  /* each corruption: the status, and q is left exactly as it was */
#define CORRUPT(want, needle)                                                                      \
  do {                                                                                             \
    for (size_t k_ = 0; k_ < 32; k_++) q[k_] = -7.0f;                                              \
    EXPECT_FAIL(want, sc_params_load(f->c, q, f->np, bad), needle);                                \
    for (size_t k_ = 0; k_ < 32; k_++) assert_true(q[k_] == -7.0f);                                \
  } while (0)
  memcpy(b, good, len);
  b[0] = 'X'; /* magic */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "offset 0");
  write_bytes(bad, good, 5); /* shorter than the magic */
  CORRUPT(SC_ERR_FORMAT, NULL);
  write_bytes(bad, good, 20); /* truncated header */
  CORRUPT(SC_ERR_FORMAT, NULL);
  write_bytes(bad, good, 0); /* empty file */
  CORRUPT(SC_ERR_FORMAT, NULL);
  memcpy(b, good, len);
  b[8] = 2; /* version */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "offset 8");
  memcpy(b, good, len);
  b[12] = 3; /* element type (1 float32 and 2 float64 exist) */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "offset 12");
  memcpy(b, good, len);
  b[12] = 2; /* float64: the values are then too short */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "truncated");
  memcpy(b, good, len);
  b[16] ^= 1; /* parameter count */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_SHAPE, "offset 16");
  memcpy(b, good, len);
  b[24] ^= 1; /* fingerprint */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_SHAPE, "offset 24");
  memcpy(b, good, len);
  b[32 + 5] ^= 0x10; /* a value: checksum mismatch */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "checksum");
  memcpy(b, good, len);
  b[len - 1] ^= 0x01; /* the checksum itself */
  write_bytes(bad, b, len);
  CORRUPT(SC_ERR_FORMAT, "checksum");
  write_bytes(bad, good, len - 9); /* values cut short */
  CORRUPT(SC_ERR_FORMAT, NULL);
  write_bytes(bad, good, len - 3); /* checksum cut short */
  CORRUPT(SC_ERR_FORMAT, NULL);
  memcpy(b, good, len);
  b[len] = 0; /* one byte too many */
  write_bytes(bad, b, len + 1);
  CORRUPT(SC_ERR_FORMAT, NULL);
  /* a chain with the same parameter count but another shape (relu instead of tanh) */
  sc_layer L[] = {sc_dense(FH, SC_RELU), sc_dense(FO, SC_IDENTITY)};
  sc_chain *c2 = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c2, FI, L, 2));
  for (size_t k = 0; k < 32; k++) q[k] = -7.0f;
  EXPECT_FAIL(SC_ERR_SHAPE, sc_params_load(c2, q, f->np, path), NULL);
  for (size_t k = 0; k < 32; k++) assert_true(q[k] == -7.0f);
  sc_chain_destroy(c2);
  /* a NaN parameter in an otherwise valid file */
  float pn[32];
  memcpy(pn, f->p, sizeof pn);
  pn[3] = NAN;
  if (sc_params_save(f->c, pn, f->np, bad) == SC_OK) CORRUPT(SC_ERR_NONFINITE, "parameter 3");
#undef CORRUPT
  /* the good file still loads */
  SC_OK_OR_FAIL(sc_params_load(f->c, q, f->np, path));
  assert_memory_equal(q, f->p, f->np * sizeof(float));
  free(b);
  free(good);
  remove(path);
  remove(bad);
  assert_int_equal(remove(dir), 0); /* nothing else (no .tmp file) was left behind */
}

/* ------------------------------------------------------------------ compute */
static void test_forward_bad(void **state) {
  fx *f = *state;
  EXPECT_FAIL(SC_ERR_NULL, sc_forward(NULL, f->p, f->x, 2, f->y, f->ws), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward(f->c, NULL, f->x, 2, f->y, f->ws), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward(f->c, f->p, NULL, 2, f->y, f->ws), "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward(f->c, f->p, f->x, 2, NULL, f->ws), "'y'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward(f->c, f->p, f->x, 2, f->y, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward(f->c, f->p, f->x, 0, f->y, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward(f->c, f->p, f->x, FB + 1, f->y, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward(f->c, f->p, f->x, SIZE_MAX, f->y, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_ARG, sc_forward(f->c, f->p, f->x, 2, f->y, f->ws_other), "chain");
  EXPECT_FAIL(SC_ERR_ARG, sc_forward(f->other, f->p, f->x, 2, f->y, f->ws), "chain");

  EXPECT_FAIL(SC_ERR_NULL, sc_forward_f64(NULL, f->pd, f->xd, 2, f->yd, f->ws), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward_f64(f->c, NULL, f->xd, 2, f->yd, f->ws), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward_f64(f->c, f->pd, NULL, 2, f->yd, f->ws), "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward_f64(f->c, f->pd, f->xd, 2, NULL, f->ws), "'y'");
  EXPECT_FAIL(SC_ERR_NULL, sc_forward_f64(f->c, f->pd, f->xd, 2, f->yd, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward_f64(f->c, f->pd, f->xd, 0, f->yd, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_forward_f64(f->c, f->pd, f->xd, FB + 1, f->yd, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_ARG, sc_forward_f64(f->c, f->pd, f->xd, 2, f->yd, f->ws_other), "chain");
  /* the edge batches work */
  SC_OK_OR_FAIL(sc_forward(f->c, f->p, f->x, 1, f->y, f->ws));
  SC_OK_OR_FAIL(sc_forward(f->c, f->p, f->x, FB, f->y, f->ws));
  SC_OK_OR_FAIL(sc_forward_f64(f->c, f->pd, f->xd, FB, f->yd, f->ws));
  for (int k = 0; k < FB * FO; k++) assert_true(fabs(f->y[k] - f->yd[k]) < 1e-5);
}

static void test_valgrad_bad(void **state) {
  fx *f = *state;
  const sc_loss SQ = SC_LOSS_SQUARED;
  float l = 0;
  double ld = 0;
  EXPECT_FAIL(SC_ERR_NULL, sc_valgrad(NULL, SQ, f->p, f->x, f->t, 2, &l, f->g, f->gx, f->ws),
              "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_valgrad(f->c, SQ, NULL, f->x, f->t, 2, &l, f->g, f->gx, f->ws),
              "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_valgrad(f->c, SQ, f->p, NULL, f->t, 2, &l, f->g, f->gx, f->ws),
              "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_valgrad(f->c, SQ, f->p, f->x, NULL, 2, &l, f->g, f->gx, f->ws),
              "target");
  EXPECT_FAIL(SC_ERR_NULL, sc_valgrad(f->c, SQ, f->p, f->x, f->t, 2, &l, f->g, f->gx, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_valgrad(f->c, SQ, f->p, f->x, f->t, 0, &l, f->g, f->gx, f->ws),
              "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_valgrad(f->c, SQ, f->p, f->x, f->t, FB + 1, &l, f->g, f->gx, f->ws),
              "batch");
  EXPECT_FAIL(SC_ERR_ARG, sc_valgrad(f->c, SQ, f->p, f->x, f->t, 2, &l, f->g, f->gx, f->ws_other),
              "chain");
  const int losses[] = {0, SC_LOSS_LOGIT_CROSSENTROPY + 1, -1, 99};
  for (size_t i = 0; i < 4; i++) {
    EXPECT_FAIL(SC_ERR_ARG,
                sc_valgrad(f->c, (sc_loss)losses[i], f->p, f->x, f->t, 2, &l, f->g, f->gx, f->ws),
                "loss");
    EXPECT_FAIL(
        SC_ERR_ARG,
        sc_valgrad_f64(f->c, (sc_loss)losses[i], f->pd, f->xd, f->td, 2, &ld, f->gd, f->gxd, f->ws),
        "loss");
    EXPECT_FAIL(SC_ERR_ARG, sc_loss_value(f->c, (sc_loss)losses[i], f->p, f->x, f->t, 2, &l, f->ws),
                "loss");
  }
  EXPECT_FAIL(SC_ERR_NULL,
              sc_valgrad_f64(NULL, SQ, f->pd, f->xd, f->td, 2, &ld, f->gd, f->gxd, f->ws), "chain");
  EXPECT_FAIL(SC_ERR_NULL,
              sc_valgrad_f64(f->c, SQ, NULL, f->xd, f->td, 2, &ld, f->gd, f->gxd, f->ws), "'p'");
  EXPECT_FAIL(SC_ERR_NULL,
              sc_valgrad_f64(f->c, SQ, f->pd, NULL, f->td, 2, &ld, f->gd, f->gxd, f->ws), "'x'");
  EXPECT_FAIL(SC_ERR_NULL,
              sc_valgrad_f64(f->c, SQ, f->pd, f->xd, NULL, 2, &ld, f->gd, f->gxd, f->ws), "target");
  EXPECT_FAIL(SC_ERR_NULL,
              sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, 2, &ld, f->gd, f->gxd, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH,
              sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, 0, &ld, f->gd, f->gxd, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH,
              sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, FB + 1, &ld, f->gd, f->gxd, f->ws),
              "batch");
  EXPECT_FAIL(SC_ERR_ARG,
              sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, 2, &ld, f->gd, f->gxd, f->ws_other),
              "chain");

  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(NULL, SQ, f->p, f->x, f->t, 2, &l, f->ws), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(f->c, SQ, NULL, f->x, f->t, 2, &l, f->ws), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(f->c, SQ, f->p, NULL, f->t, 2, &l, f->ws), "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(f->c, SQ, f->p, f->x, NULL, 2, &l, f->ws), "target");
  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(f->c, SQ, f->p, f->x, f->t, 2, NULL, f->ws), "lossv");
  EXPECT_FAIL(SC_ERR_NULL, sc_loss_value(f->c, SQ, f->p, f->x, f->t, 2, &l, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_loss_value(f->c, SQ, f->p, f->x, f->t, 0, &l, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_loss_value(f->c, SQ, f->p, f->x, f->t, FB + 1, &l, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_ARG, sc_loss_value(f->c, SQ, f->p, f->x, f->t, 2, &l, f->ws_other), "chain");

  /* loss, g and gx may all be NULL; the good call agrees with sc_loss_value */
  SC_OK_OR_FAIL(sc_valgrad(f->c, SQ, f->p, f->x, f->t, FB, NULL, NULL, NULL, f->ws));
  SC_OK_OR_FAIL(sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, FB, NULL, NULL, NULL, f->ws));
  float l2 = -1;
  SC_OK_OR_FAIL(sc_valgrad(f->c, SQ, f->p, f->x, f->t, FB, &l, f->g, f->gx, f->ws));
  SC_OK_OR_FAIL(sc_loss_value(f->c, SQ, f->p, f->x, f->t, FB, &l2, f->ws));
  assert_true(l > 0 && isfinite(l));
  assert_true(l == l2);
  SC_OK_OR_FAIL(sc_valgrad_f64(f->c, SQ, f->pd, f->xd, f->td, FB, &ld, f->gd, f->gxd, f->ws));
  assert_true(fabs(ld - l) < 1e-5 * (1 + ld));
}

static void test_crossentropy_labels(void **state) {
  fx *f = *state;
  const sc_loss CE = SC_LOSS_LOGIT_CROSSENTROPY;
  float l = 0;
  double ld = 0;
  int32_t lab[FB];
  memcpy(lab, f->lab, sizeof lab);
  SC_OK_OR_FAIL(sc_valgrad(f->c, CE, f->p, f->x, lab, FB, &l, f->g, NULL, f->ws));
  assert_true(l > 0 && isfinite(l));
  /* out of range at sample 3: too large, equal to the class count, negative */
  const int32_t bad[] = {FO, FO + 100, -1, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memcpy(lab, f->lab, sizeof lab);
    lab[3] = bad[i];
    EXPECT_FAIL(SC_ERR_ARG, sc_valgrad(f->c, CE, f->p, f->x, lab, FB, &l, f->g, NULL, f->ws),
                "sample 3");
    EXPECT_FAIL(SC_ERR_ARG,
                sc_valgrad_f64(f->c, CE, f->pd, f->xd, lab, FB, &ld, f->gd, NULL, f->ws),
                "sample 3");
    EXPECT_FAIL(SC_ERR_ARG, sc_loss_value(f->c, CE, f->p, f->x, lab, FB, &l, f->ws), "sample 3");
    /* only the batch's own labels are checked: a batch of 3 does not see sample 3 */
    SC_OK_OR_FAIL(sc_valgrad(f->c, CE, f->p, f->x, lab, 3, &l, f->g, NULL, f->ws));
  }
  /* cross-entropy needs at least two logits */
  sc_chain *one = NULL;
  sc_layer L[] = {sc_dense(1, SC_IDENTITY)};
  SC_OK_OR_FAIL(sc_chain_create(&one, FI, L, 1));
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, one, FB));
  int32_t zeros[FB] = {0};
  EXPECT_FAIL(SC_ERR_SHAPE, sc_valgrad(one, CE, f->p, f->x, zeros, FB, &l, NULL, NULL, ws), NULL);
  EXPECT_FAIL(SC_ERR_SHAPE, sc_loss_value(one, CE, f->p, f->x, zeros, FB, &l, ws), NULL);
  sc_workspace_destroy(ws);
  sc_chain_destroy(one);
}

static void test_pullback_bad(void **state) {
  fx *f = *state;
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback(NULL, f->p, f->x, f->dy, 2, f->g, f->gx, f->ws), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback(f->c, NULL, f->x, f->dy, 2, f->g, f->gx, f->ws), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback(f->c, f->p, NULL, f->dy, 2, f->g, f->gx, f->ws), "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback(f->c, f->p, f->x, NULL, 2, f->g, f->gx, f->ws), "dy");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback(f->c, f->p, f->x, f->dy, 2, f->g, f->gx, NULL), "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_pullback(f->c, f->p, f->x, f->dy, 0, f->g, f->gx, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_BATCH, sc_pullback(f->c, f->p, f->x, f->dy, FB + 1, f->g, f->gx, f->ws),
              "batch");
  EXPECT_FAIL(SC_ERR_ARG, sc_pullback(f->c, f->p, f->x, f->dy, 2, f->g, f->gx, f->ws_other),
              "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback_f64(NULL, f->pd, f->xd, f->dyd, 2, f->gd, f->gxd, f->ws),
              "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback_f64(f->c, NULL, f->xd, f->dyd, 2, f->gd, f->gxd, f->ws),
              "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback_f64(f->c, f->pd, NULL, f->dyd, 2, f->gd, f->gxd, f->ws),
              "'x'");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback_f64(f->c, f->pd, f->xd, NULL, 2, f->gd, f->gxd, f->ws),
              "dy");
  EXPECT_FAIL(SC_ERR_NULL, sc_pullback_f64(f->c, f->pd, f->xd, f->dyd, 2, f->gd, f->gxd, NULL),
              "ws");
  EXPECT_FAIL(SC_ERR_BATCH, sc_pullback_f64(f->c, f->pd, f->xd, f->dyd, 0, f->gd, f->gxd, f->ws),
              "batch");
  EXPECT_FAIL(SC_ERR_BATCH,
              sc_pullback_f64(f->c, f->pd, f->xd, f->dyd, FB + 1, f->gd, f->gxd, f->ws), "batch");
  EXPECT_FAIL(SC_ERR_ARG,
              sc_pullback_f64(f->c, f->pd, f->xd, f->dyd, 2, f->gd, f->gxd, f->ws_other), "chain");
  /* g and gx may both be NULL (nothing to compute); a failing call leaves g alone */
  SC_OK_OR_FAIL(sc_pullback(f->c, f->p, f->x, f->dy, FB, NULL, NULL, f->ws));
  SC_OK_OR_FAIL(sc_pullback_f64(f->c, f->pd, f->xd, f->dyd, FB, NULL, NULL, f->ws));
  float g[32];
  for (size_t k = 0; k < f->np; k++) g[k] = 0.25f;
  SC_OK_OR_FAIL(sc_pullback(f->c, f->p, f->x, f->dy, FB, g, NULL, f->ws));
  int changed = 0;
  for (size_t k = 0; k < f->np; k++) changed |= g[k] != 0.25f;
  assert_true(changed);
}

/* NaN / Inf in inputs, targets and cotangents: SC_ERR_NONFINITE naming the sample */
static void test_nonfinite(void **state) {
  fx *f = *state;
  const sc_loss SQ = SC_LOSS_SQUARED;
  const float vals[] = {NAN, INFINITY, -INFINITY};
  const char *names[] = {"NaN", "Inf", "Inf"};
  float l;
  double ld;
  for (int v = 0; v < 3; v++) {
    float x[FB * FI], t[FB * FO], dy[FB * FO];
    double xd[FB * FI], td[FB * FO], dyd[FB * FO];
    memcpy(x, f->x, sizeof x);
    memcpy(t, f->t, sizeof t);
    memcpy(dy, f->dy, sizeof dy);
    memcpy(xd, f->xd, sizeof xd);
    memcpy(td, f->td, sizeof td);
    memcpy(dyd, f->dyd, sizeof dyd);
    /* input: sample 5, element 1 */
    x[5 * FI + 1] = vals[v];
    xd[5 * FI + 1] = vals[v];
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_forward(f->c, f->p, x, FB, f->y, f->ws), "sample 5");
    assert_non_null(strstr(sc_last_error(), names[v]));
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_forward_f64(f->c, f->pd, xd, FB, f->yd, f->ws), "sample 5");
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_valgrad(f->c, SQ, f->p, x, f->t, FB, &l, f->g, f->gx, f->ws),
                "sample 5");
    assert_non_null(strstr(sc_last_error(), "input"));
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_valgrad_f64(f->c, SQ, f->pd, xd, f->td, FB, &ld, f->gd, f->gxd, f->ws),
                "sample 5");
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_loss_value(f->c, SQ, f->p, x, f->t, FB, &l, f->ws),
                "sample 5");
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_pullback(f->c, f->p, x, f->dy, FB, f->g, f->gx, f->ws),
                "sample 5");
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_pullback_f64(f->c, f->pd, xd, f->dyd, FB, f->gd, f->gxd, f->ws), "sample 5");
    EXPECT_FAIL(
        SC_ERR_NONFINITE,
        sc_valgrad(f->c, SC_LOSS_LOGIT_CROSSENTROPY, f->p, x, f->lab, FB, &l, f->g, NULL, f->ws),
        "sample 5");
    /* outside the batch it is not looked at */
    SC_OK_OR_FAIL(sc_forward(f->c, f->p, x, 5, f->y, f->ws));
    /* target: sample 6, element 0 (the last sample: FB - 1 = 7 is also checked) */
    t[6 * FO] = vals[v];
    td[6 * FO] = vals[v];
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_valgrad(f->c, SQ, f->p, f->x, t, FB, &l, f->g, f->gx, f->ws),
                "sample 6");
    assert_non_null(strstr(sc_last_error(), "target"));
    assert_non_null(strstr(sc_last_error(), names[v]));
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_valgrad(f->c, SC_LOSS_ABSOLUTE, f->p, f->x, t, FB, &l, NULL, NULL, f->ws),
                "sample 6");
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_valgrad_f64(f->c, SQ, f->pd, f->xd, td, FB, &ld, f->gd, f->gxd, f->ws),
                "sample 6");
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_loss_value(f->c, SQ, f->p, f->x, t, FB, &l, f->ws),
                "sample 6");
    memcpy(t, f->t, sizeof t);
    t[(FB - 1) * FO + 1] = vals[v];
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_valgrad(f->c, SQ, f->p, f->x, t, FB, &l, f->g, f->gx, f->ws),
                "sample 7");
    /* cotangent: sample 0, element 1 */
    dy[1] = vals[v];
    dyd[1] = vals[v];
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_pullback(f->c, f->p, f->x, dy, FB, f->g, f->gx, f->ws),
                "sample 0");
    assert_non_null(strstr(sc_last_error(), "dy"));
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_pullback_f64(f->c, f->pd, f->xd, dyd, FB, f->gd, f->gxd, f->ws), "sample 0");
  }
}

/* a NaN or Inf parameter is refused by every compute call, naming p[k];
 * a NaN that arises inside from finite values propagates through every activation to the
 * outputs and the loss, on every kernel path alike */
static void test_nonfinite_params(void **state) {
  fx *f = *state;
  const sc_loss SQ = SC_LOSS_SQUARED;
  const float vals[] = {NAN, INFINITY, -INFINITY};
  size_t np;
  sc_chain_nparams(f->c, &np);
  float *p = malloc(np * sizeof *p);
  double *pd = malloc(np * sizeof *pd);
  float l;
  double ld;
  for (int v = 0; v < 3; v++) {
    memcpy(p, f->p, np * sizeof *p);
    memcpy(pd, f->pd, np * sizeof *pd);
    size_t k = v == 0 ? 0 : np - 1 - (size_t)v; /* p[0], as in the issue, and late ones */
    p[k] = vals[v];
    pd[k] = vals[v];
    char want[32];
    snprintf(want, sizeof want, "p[%zu]", k);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_forward(f->c, p, f->x, FB, f->y, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_forward_f64(f->c, pd, f->xd, FB, f->yd, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_valgrad(f->c, SQ, p, f->x, f->t, FB, &l, f->g, f->gx, f->ws),
                want);
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_valgrad_f64(f->c, SQ, pd, f->xd, f->td, FB, &ld, f->gd, f->gxd, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_loss_value(f->c, SQ, p, f->x, f->t, FB, &l, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_pullback(f->c, p, f->x, f->dy, FB, f->g, f->gx, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE,
                sc_pullback_f64(f->c, pd, f->xd, f->dyd, FB, f->gd, f->gxd, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_apply(f->c, p, f->x, f->y, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_apply_f64(f->c, pd, f->xd, f->yd, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_vjp(f->c, p, f->x, f->dy, f->y, f->gx, f->g, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_vjp_f64(f->c, pd, f->xd, f->dyd, f->yd, f->gxd, f->gd, f->ws),
                want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_jvp(f->c, p, f->x, f->x, f->y, f->y, f->ws), want);
    EXPECT_FAIL(SC_ERR_NONFINITE, sc_jvp_f64(f->c, pd, f->xd, f->xd, f->yd, f->yd, f->ws), want);
  }
  free(p);
  free(pd);

  /* dense(2, identity) -> dense(3, act): layer 0 overflows to [+Inf, +Inf] from finite
   * weights, layer 1 forms Inf - Inf = NaN in its first unit; act(NaN) must be NaN in the
   * output and the loss must be NaN, for every activation, on every path, float and double */
  static const sc_act acts[] = {SC_IDENTITY, SC_RELU, SC_TANH, SC_SIGMOID,
                                SC_SOFTPLUS, SC_GELU, SC_SILU};
  const char *isas[3];
  int nisa = tu_isas(isas);
  const char *saved = getenv("SC_ISA");
  char keep[32] = {0};
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  enum { B = 40 }; /* more than a tile: the vector kernels run */
  for (int is = 0; is < nisa; is++)
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
      setenv("SC_ISA", isas[is], 1);
      sc_layer L[] = {sc_dense(2, SC_IDENTITY), sc_dense(3, acts[a])};
      sc_chain *c = NULL;
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_chain_create(&c, 1, L, 2));
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      /* W0 = [3e38, 3e38]^T, b0 = 0; W1 rows [1, -1], [1, 1], [-1, -1]; b1 = 0 */
      float q[2 + 2 + 6 + 3] = {3e38f, 3e38f, 0, 0, 1, -1, 1, 1, -1, -1, 0, 0, 0};
      double qd[13];
      float x[B], y[3 * B], t[3 * B] = {0}, g[13];
      double xd[B], yd[3 * B], td[3 * B] = {0}, gd[13];
      for (int k = 0; k < 13; k++) qd[k] = k < 2 ? 1.7e308 : q[k];
      for (int b = 0; b < B; b++) x[b] = 1.5f, xd[b] = 1.5;
      SC_OK_OR_FAIL(sc_forward(c, q, x, B, y, ws));
      SC_OK_OR_FAIL(sc_forward_f64(c, qd, xd, B, yd, ws));
      for (int b = 0; b < B; b++)
        if (!isnan(y[3 * b]) || !isnan(yd[3 * b]))
          fail_msg("%s, %s: act(Inf - Inf) = %g (float), %g (double), not NaN (sample %d)",
                   isas[is], sc_act_name(acts[a]), (double)y[3 * b], yd[3 * b], b);
      SC_OK_OR_FAIL(sc_valgrad(c, SQ, q, x, t, B, &l, g, NULL, ws));
      SC_OK_OR_FAIL(sc_valgrad_f64(c, SQ, qd, xd, td, B, &ld, gd, NULL, ws));
      if (!isnan(l) || !isnan(ld))
        fail_msg("%s, %s: loss %g / %g, not NaN", isas[is], sc_act_name(acts[a]), (double)l, ld);
      SC_OK_OR_FAIL(sc_apply(c, q, x, y, ws));
      SC_OK_OR_FAIL(sc_apply_f64(c, qd, xd, yd, ws));
      if (!isnan(y[0]) || !isnan(yd[0]))
        fail_msg("%s, %s: sc_apply gives %g / %g, not NaN", isas[is], sc_act_name(acts[a]),
                 (double)y[0], yd[0]);
      sc_workspace_destroy(ws);
      sc_chain_destroy(c);
    }
  if (saved)
    setenv("SC_ISA", keep, 1);
  else
    unsetenv("SC_ISA");
}

/* sc_loss_value_f64 and sc_evaluate_f64 agree with sc_valgrad_f64's
 * loss bit for bit, with the float forms to float precision, and check their arguments */
static void test_f64_loss_and_evaluate(void **state) {
  fx *f = *state;
  double lv = 0, lg = 0, l64 = 0, a64 = 0, l32 = 0, a32 = 0;
  SC_OK_OR_FAIL(sc_loss_value_f64(f->c, SC_LOSS_SQUARED, f->pd, f->xd, f->td, FB, &lv, f->ws));
  SC_OK_OR_FAIL(
      sc_valgrad_f64(f->c, SC_LOSS_SQUARED, f->pd, f->xd, f->td, FB, &lg, NULL, NULL, f->ws));
  assert_memory_equal(&lv, &lg, sizeof lv);
  float lf = 0;
  SC_OK_OR_FAIL(sc_loss_value(f->c, SC_LOSS_SQUARED, f->p, f->x, f->t, FB, &lf, f->ws));
  assert_true(fabs(lv - lf) <= 1e-5 * (1 + fabs(lv)));
  SC_OK_OR_FAIL(sc_evaluate_f64(f->c, f->pd, f->xd, f->lab, FB, &l64, &a64, f->ws));
  SC_OK_OR_FAIL(sc_evaluate(f->c, f->p, f->x, f->lab, FB, &l32, &a32, f->ws));
  assert_true(fabs(l64 - l32) <= 1e-5 * (1 + fabs(l64)));
  assert_true(a64 == a32);
  SC_OK_OR_FAIL(
      sc_loss_value_f64(f->c, SC_LOSS_LOGIT_CROSSENTROPY, f->pd, f->xd, f->lab, FB, &lv, f->ws));
  assert_true(fabs(lv - l64) <= 1e-12 * (1 + fabs(l64))); /* the same mean cross-entropy */
  EXPECT_FAIL(SC_ERR_NULL,
              sc_loss_value_f64(f->c, SC_LOSS_SQUARED, f->pd, f->xd, f->td, FB, NULL, f->ws),
              "lossv");
  EXPECT_FAIL(SC_ERR_BATCH, sc_evaluate_f64(f->c, f->pd, f->xd, f->lab, 0, &l64, &a64, f->ws),
              "n is 0");
  double *pd = malloc(sizeof(double) * 64);
  size_t np;
  sc_chain_nparams(f->c, &np);
  memcpy(pd, f->pd, np * sizeof *pd);
  pd[1] = NAN;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_evaluate_f64(f->c, pd, f->xd, f->lab, FB, &l64, &a64, f->ws),
              "p[1]");
  EXPECT_FAIL(SC_ERR_NONFINITE,
              sc_loss_value_f64(f->c, SC_LOSS_SQUARED, pd, f->xd, f->td, FB, &lv, f->ws), "p[1]");
  free(pd);
}

/* ------------------------------------------------------------------ optimizers */
static void test_optim_bad(void **state) {
  (void)state;
  /* the constructors give the documented defaults */
  sc_optim a = sc_adam(0.01);
  assert_int_equal(a.kind, SC_ADAM);
  assert_true(a.lr == 0.01 && a.beta1 == 0.9 && a.beta2 == 0.999 && a.eps == 1e-8);
  assert_true(a.weight_decay == 0 && a.momentum == 0);
  sc_optim aw = sc_adamw(0.02, 0.1);
  assert_int_equal(aw.kind, SC_ADAMW);
  assert_true(aw.lr == 0.02 && aw.beta1 == 0.9 && aw.beta2 == 0.999 && aw.eps == 1e-8);
  assert_true(aw.weight_decay == 0.1);
  sc_optim s = sc_sgd(0.5, 0.9);
  assert_int_equal(s.kind, SC_SGD);
  assert_true(s.lr == 0.5 && s.momentum == 0.9 && s.weight_decay == 0);

  size_t bytes = 0;
  sc_optimizer *opt = NULL;
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_bytes(NULL, 10, &bytes), "cfg");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_bytes(&a, 10, NULL), "bytes");
  EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_bytes(&a, 0, &bytes), "n");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_create(NULL, &a, 10), "out");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_create(&opt, NULL, 10), "cfg");
  EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_create(&opt, &a, 0), "n");

  /* a table of bad configurations: each is refused by bytes, create and init */
  sc_optim bad[32];
  const char *why[32];
  int nb = 0;
#define BAD(expr, w)                                                                               \
  do {                                                                                             \
    bad[nb] = (expr);                                                                              \
    why[nb++] = (w);                                                                               \
  } while (0)
  sc_optim o;
  o = a;
  o.kind = (sc_optim_kind)0;
  BAD(o, "kind");
  o = a;
  o.kind = (sc_optim_kind)(SC_SGD + 1);
  BAD(o, "kind");
  o = a;
  o.kind = (sc_optim_kind)-1;
  BAD(o, "kind");
  BAD(sc_adam(0), "rate");
  BAD(sc_adam(-1e-3), "rate");
  BAD(sc_adam(NAN), "rate");
  BAD(sc_adam(INFINITY), "rate");
  BAD(sc_adamw(0, 0.1), "rate");
  BAD(sc_sgd(0, 0), "rate");
  BAD(sc_sgd(-0.1, 0.5), "rate");
  BAD(sc_adamw(1e-3, -0.1), "weight_decay");
  BAD(sc_adamw(1e-3, NAN), "weight_decay");
  BAD(sc_adamw(1e-3, INFINITY), "weight_decay");
  o = sc_sgd(0.1, 0);
  o.weight_decay = -1;
  BAD(o, "weight_decay");
  BAD(sc_sgd(0.1, -0.1), "momentum");
  BAD(sc_sgd(0.1, 1.0), "momentum");
  BAD(sc_sgd(0.1, NAN), "momentum");
  o = a;
  o.beta1 = 1.0;
  BAD(o, "beta");
  o = a;
  o.beta1 = -0.1;
  BAD(o, "beta");
  o = a;
  o.beta2 = 1.0;
  BAD(o, "beta");
  o = a;
  o.beta2 = NAN;
  BAD(o, "beta");
  o = aw;
  o.beta1 = 1.5;
  BAD(o, "beta");
  o = a;
  o.eps = 0;
  BAD(o, "eps");
  o = a;
  o.eps = -1e-8;
  BAD(o, "eps");
  o = a;
  o.eps = NAN;
  BAD(o, "eps");
  o = a;
  o.eps = INFINITY;
  BAD(o, "eps");
#undef BAD
  unsigned char mem[4096];
  for (int i = 0; i < nb; i++) {
    EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_bytes(&bad[i], 10, &bytes), why[i]);
    EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_create(&opt, &bad[i], 10), why[i]);
    EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_init(&opt, &bad[i], 10, mem, sizeof mem), why[i]);
  }
  /* caller memory */
  SC_OK_OR_FAIL(sc_optimizer_bytes(&a, 10, &bytes));
  assert_true(bytes > 0 && bytes <= sizeof mem - 1);
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_init(NULL, &a, 10, mem, bytes), "out");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_init(&opt, NULL, 10, mem, bytes), "cfg");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_init(&opt, &a, 10, NULL, bytes), "mem");
  EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_init(&opt, &a, 0, mem, bytes), "n");
  char num[32];
  snprintf(num, sizeof num, "%zu", bytes);
  EXPECT_FAIL(SC_ERR_NOMEM, sc_optimizer_init(&opt, &a, 10, mem, bytes - 1), num);
  EXPECT_FAIL(SC_ERR_NOMEM, sc_optimizer_init(&opt, &a, 10, mem, 0), NULL);
  /* n larger than the memory was sized for */
  EXPECT_FAIL(SC_ERR_NOMEM, sc_optimizer_init(&opt, &a, 1000, mem, bytes), NULL);
  SC_OK_OR_FAIL(sc_optimizer_init(&opt, &a, 10, mem + 1, bytes)); /* any alignment */

  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_reset(NULL), "opt");
  float p[11] = {0}, g[11] = {0};
  for (int k = 0; k < 11; k++) g[k] = 1.0f;
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_step(NULL, p, g, 10), "opt");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_step(opt, NULL, g, 10), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_optimizer_step(opt, p, NULL, 10), "'g'");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_optimizer_step(opt, p, g, 9), "10");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_optimizer_step(opt, p, g, 11), "10");
  EXPECT_FAIL(SC_ERR_SHAPE, sc_optimizer_step(opt, p, g, 0), NULL);
  /* failed steps changed nothing; the good one moves every p by -lr (ADAM, step 1) */
  for (int k = 0; k < 11; k++) assert_true(p[k] == 0);
  SC_OK_OR_FAIL(sc_optimizer_step(opt, p, g, 10));
  for (int k = 0; k < 10; k++) assert_true(fabs(p[k] + 0.01) < 1e-7);
  assert_true(p[10] == 0);
  SC_OK_OR_FAIL(sc_optimizer_reset(opt));
  sc_optimizer_destroy(opt); /* no-op for caller memory */
  sc_optimizer_destroy(NULL);
  /* AdamW: a decay factor 1 - lr * weight_decay <= 0 is refused */
  {
    sc_optim aw = sc_adamw(0.5, 3.0);
    size_t by;
    EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_bytes(&aw, 10, &by), "lr x weight_decay");
    aw = sc_adamw(0.5, 2.0);
    EXPECT_FAIL(SC_ERR_ARG, sc_optimizer_bytes(&aw, 10, &by), "must be < 1");
    aw = sc_adamw(0.5, 1.9);
    SC_OK_OR_FAIL(sc_optimizer_bytes(&aw, 10, &by));
  }
}

/* ------------------------------------------------------------------ training */
typedef struct stop_ctx {
  size_t calls, stop_at;
  size_t last_step;
} stop_ctx;

static int stop_cb(const sc_progress *pr, void *user) {
  stop_ctx *s = user;
  s->calls++;
  s->last_step = pr->step;
  return pr->step >= s->stop_at ? 1 : 0;
}

static void test_train_bad(void **state) {
  fx *f = *state;
  const sc_loss SQ = SC_LOSS_SQUARED;
  /* the defaults are as documented */
  sc_train_opts d = sc_train_defaults();
  assert_int_equal(d.optim.kind, SC_ADAM);
  assert_true(d.optim.lr == 1e-3);
  assert_int_equal(d.epochs, 1);
  assert_int_equal(d.batch_size, 0);
  assert_int_equal(d.shuffle, 1);
  assert_int_equal(d.seed, 0);
  assert_int_equal(d.threads, 1);
  assert_int_equal(d.progress_every, 0);
  assert_null(d.progress);

  float p[32];
  memcpy(p, f->p, sizeof p);
  sc_data data = {f->x, f->t, FB};
  sc_train_report rep;
  EXPECT_FAIL(SC_ERR_NULL, sc_train(NULL, SQ, p, &data, &d, &rep), "chain");
  EXPECT_FAIL(SC_ERR_NULL, sc_train(f->c, SQ, NULL, &data, &d, &rep), "'p'");
  EXPECT_FAIL(SC_ERR_NULL, sc_train(f->c, SQ, p, NULL, &d, &rep), "data");
  EXPECT_FAIL(SC_ERR_NULL, sc_train(f->c, SQ, p, &data, NULL, &rep), "opts");
  sc_data dx = data;
  dx.x = NULL;
  EXPECT_FAIL(SC_ERR_NULL, sc_train(f->c, SQ, p, &dx, &d, &rep), "x");
  dx = data;
  dx.target = NULL;
  EXPECT_FAIL(SC_ERR_NULL, sc_train(f->c, SQ, p, &dx, &d, &rep), "target");
  dx = data;
  dx.n = 0;
  EXPECT_FAIL(SC_ERR_BATCH, sc_train(f->c, SQ, p, &dx, &d, &rep), NULL);
  EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, (sc_loss)0, p, &data, &d, &rep), "loss");
  EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, (sc_loss)42, p, &data, &d, &rep), "loss");

  sc_train_opts o = d;
  o.epochs = 0;
  EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, SQ, p, &data, &o, &rep), "epochs");
  const int threads[] = {0, -1, 1025, 1 << 30};
  for (int i = 0; i < 4; i++) {
    o = d;
    o.threads = threads[i];
    EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, SQ, p, &data, &o, &rep), "threads");
  }
  /* sc_train_threads: the same checks on its arguments; *threads is 0 after a failure */
  int used = -1;
  EXPECT_FAIL(SC_ERR_NULL, sc_train_threads(NULL, &d, FB, &used), "chain");
  assert_int_equal(used, 0);
  EXPECT_FAIL(SC_ERR_NULL, sc_train_threads(f->c, NULL, FB, &used), "opts");
  EXPECT_FAIL(SC_ERR_NULL, sc_train_threads(f->c, &d, FB, NULL), "threads");
  used = -1;
  EXPECT_FAIL(SC_ERR_BATCH, sc_train_threads(f->c, &d, 0, &used), "n is 0");
  assert_int_equal(used, 0);
  for (int i = 0; i < 4; i++) {
    o = d;
    o.threads = threads[i];
    EXPECT_FAIL(SC_ERR_ARG, sc_train_threads(f->c, &o, FB, &used), "threads");
  }
  {
    sc_dist bad;
    memset(&bad, 0, sizeof bad);
    const int rk[][2] = {{0, 0}, {-1, 2}, {2, 2}, {0, 65537}};
    for (int i = 0; i < 4; i++) {
      bad.rank = rk[i][0], bad.ranks = rk[i][1];
      o = d;
      o.dist = &bad;
      EXPECT_FAIL(SC_ERR_ARG, sc_train_threads(f->c, &o, FB, &used), "rank");
    }
  }
  o = d;
  o.threads = 7;
  SC_OK_OR_FAIL(sc_train_threads(f->c, &o, FB, &used));
  assert_true(used >= 1 && used <= 7);
  /* bad optimizer settings: refused (the message may name the optimizer function) */
  const double lrs[] = {0, -1e-3, NAN, INFINITY};
  for (int i = 0; i < 4; i++) {
    o = d;
    o.optim.lr = lrs[i];
    const char *mk = mark("sc_train");
    SC_EXPECT(SC_ERR_ARG, sc_train(f->c, SQ, p, &data, &o, &rep));
    assert_string_not_equal(sc_last_error(), mk);
    assert_non_null(strstr(sc_last_error(), "learning rate"));
  }
  o = d;
  o.optim.kind = (sc_optim_kind)99;
  SC_EXPECT(SC_ERR_ARG, sc_train(f->c, SQ, p, &data, &o, &rep));
  assert_non_null(strstr(sc_last_error(), "kind"));
  o = d;
  o.optim = sc_sgd(0.1, 1.5);
  SC_EXPECT(SC_ERR_ARG, sc_train(f->c, SQ, p, &data, &o, &rep));
  /* nothing above touched p */
  assert_memory_equal(p, f->p, f->np * sizeof(float));

  /* NaN / Inf in the data, naming the sample; in the parameters */
  float x[FB * FI], t[FB * FO];
  memcpy(x, f->x, sizeof x);
  x[4 * FI + 2] = NAN;
  dx = data;
  dx.x = x;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_train(f->c, SQ, p, &dx, &d, &rep), "sample 4");
  memcpy(t, f->t, sizeof t);
  t[2 * FO + 1] = -INFINITY;
  dx = data;
  dx.target = t;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_train(f->c, SQ, p, &dx, &d, &rep), "sample 2");
  /* with minibatches, a bad sample in a later batch is found before any step */
  o = d;
  o.batch_size = 2;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_train(f->c, SQ, p, &dx, &o, &rep), "sample 2");
  assert_memory_equal(p, f->p, f->np * sizeof(float));
  float pbad[32];
  memcpy(pbad, f->p, sizeof pbad);
  pbad[5] = NAN;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_train(f->c, SQ, pbad, &data, &d, &rep), "parameter");
  /* labels out of range for cross-entropy */
  int32_t lab[FB];
  memcpy(lab, f->lab, sizeof lab);
  lab[6] = FO;
  dx = data;
  dx.target = lab;
  EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, SC_LOSS_LOGIT_CROSSENTROPY, p, &dx, &d, &rep), "sample 6");
  lab[6] = -2;
  EXPECT_FAIL(SC_ERR_ARG, sc_train(f->c, SC_LOSS_LOGIT_CROSSENTROPY, p, &dx, &d, &rep), "sample 6");
  assert_memory_equal(p, f->p, f->np * sizeof(float));

  /* a learning rate that blows the loss up: SC_ERR_NONFINITE, not garbage */
  o = d;
  o.optim = sc_sgd(1e30, 0);
  o.epochs = 5;
  EXPECT_FAIL(SC_ERR_NONFINITE, sc_train(f->c, SQ, p, &data, &o, &rep), "loss");
  memcpy(p, f->p, sizeof p);

  /* the progress callback stops training at step 3 of 10 */
  stop_ctx sc = {0, 3, 0};
  o = d;
  o.epochs = 10;
  o.progress_every = 1;
  o.progress = stop_cb;
  o.user = &sc;
  memset(&rep, 0, sizeof rep);
  EXPECT_FAIL(SC_ERR_STOPPED, sc_train(f->c, SQ, p, &data, &o, &rep), "step 3");
  assert_int_equal(sc.calls, 3);
  assert_int_equal(sc.last_step, 3);
  assert_int_equal(rep.steps, 3);
  /* the 3 steps were taken: p moved */
  assert_memory_not_equal(p, f->p, f->np * sizeof(float));
  /* every 2 steps, stop at the first call at or after step 3: step 4 */
  memcpy(p, f->p, sizeof p);
  sc = (stop_ctx){0, 3, 0};
  o.progress_every = 2;
  EXPECT_FAIL(SC_ERR_STOPPED, sc_train(f->c, SQ, p, &data, &o, &rep), "step 4");
  assert_int_equal(sc.calls, 2);
  assert_int_equal(rep.steps, 4);
  /* report may be NULL */
  memcpy(p, f->p, sizeof p);
  sc = (stop_ctx){0, 1, 0};
  EXPECT_FAIL(SC_ERR_STOPPED, sc_train(f->c, SQ, p, &data, &o, NULL), NULL);
  /* and a good run with a callback that never stops: 10 steps, lower loss */
  memcpy(p, f->p, sizeof p);
  sc = (stop_ctx){0, SIZE_MAX, 0};
  o.progress_every = 1;
  o.optim = sc_adam(0.01);
  SC_OK_OR_FAIL(sc_train(f->c, SQ, p, &data, &o, &rep));
  assert_int_equal(sc.calls, 10);
  assert_int_equal(rep.steps, 10);
  assert_int_equal(rep.epochs, 10);
  float l0, l1;
  SC_OK_OR_FAIL(sc_loss_value(f->c, SQ, f->p, f->x, f->t, FB, &l0, f->ws));
  SC_OK_OR_FAIL(sc_loss_value(f->c, SQ, p, f->x, f->t, FB, &l1, f->ws));
  assert_true(l1 < l0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_str),
      cmocka_unit_test(test_last_error),
      cmocka_unit_test(test_layers_and_act_names),
      cmocka_unit_test(test_chain_create_bad),
      cmocka_unit_test(test_unused_fields),
      cmocka_unit_test(test_chain_overflow),
      cmocka_unit_test(test_out_of_memory),
      cmocka_unit_test_setup_teardown(test_chain_queries_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_summary, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_params_init_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_params_file_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_workspace_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_forward_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_valgrad_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_crossentropy_labels, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_pullback_bad, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_nonfinite, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_nonfinite_params, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_f64_loss_and_evaluate, fx_setup, fx_teardown),
      cmocka_unit_test(test_optim_bad),
      cmocka_unit_test_setup_teardown(test_train_bad, fx_setup, fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
