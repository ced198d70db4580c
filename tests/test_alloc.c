/* tests/test_alloc.c — the "no allocation in the hot path" promises of simplechain.h.
 *
 * The Makefile links this test with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=free: every call to these functions from this file and from the static
 * library goes through the __wrap_ functions below, which count and forward to the
 * real ones (calls inside libc / libcmocka themselves are not counted, which is what
 * we want: only the library's own allocations matter).
 *
 * Checked:
 *   - sc_train allocates everything before the first step: the allocation count seen
 *     by the progress callback (progress_every = 1) is the same at step 1, 2 and the
 *     last step (50), for full batch and minibatch + shuffle (with a short last batch),
 *     squared and cross-entropy loss, threads 1 and 2; and sc_train frees all it took.
 *   - the same with a checkpoint written after every step, gradient clipping and the
 *     per-layer profile on.
 *   - sc_forward, sc_valgrad, sc_loss_value, sc_pullback (float and double) and
 *     sc_optimizer_step called in a loop allocate nothing, single- and multi-threaded,
 *     with library and caller memory.
 *   - sc_workspace_init / sc_optimizer_init allocate nothing; failing calls neither.
 *   - sc_nuts_sample: with caller memory, sampling the BNN of examples/bnn_model.h (its
 *     log density is sc_valgrad_f64) allocates nothing at all, 1 or 2 threads; with
 *     library memory it allocates once, however many iterations it runs.
 * All of it on every kernel path (scalar, avx2, avx512 where available).
 *
 * libxsmm (linked when make finds it) refers to __real_malloc & co. itself, as hidden
 * weak symbols; under --wrap those become references to malloc & co. that must be
 * defined in the executable. So this file defines them too, as plain forwarders to
 * glibc's __libc_ functions (not counted: they are the "real" ones). Not under ASan,
 * whose own malloc must stay (test-asan builds without libxsmm).
 */
#include "testutil.h"

#include <stdatomic.h>

#include "../examples/bnn_model.h"
#include "sc_nuts.h"

#if defined(SC_TEST_XSMM) && !defined(__SANITIZE_ADDRESS__)
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void __libc_free(void *ptr);
void *malloc(size_t size) { return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { return __libc_calloc(n, size); }
void *realloc(void *ptr, size_t size) { return __libc_realloc(ptr, size); }
void free(void *ptr) { __libc_free(ptr); }
#endif

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void __wrap_free(void *ptr);

static atomic_size_t n_alloc; /* malloc + calloc + realloc calls */
static atomic_long n_live;    /* blocks handed out minus blocks freed */
static atomic_size_t fail_at; /* the call (n_alloc's count after it) that fails; 0: none */
static int fails(void) {
  size_t k = atomic_fetch_add(&n_alloc, 1) + 1, f = atomic_load(&fail_at);
  return f && k == f;
}

void *__wrap_malloc(size_t size) {
  if (fails()) return NULL;
  void *p = __real_malloc(size);
  if (p) atomic_fetch_add(&n_live, 1);
  return p;
}
void *__wrap_calloc(size_t n, size_t size) {
  if (fails()) return NULL;
  void *p = __real_calloc(n, size);
  if (p) atomic_fetch_add(&n_live, 1);
  return p;
}
void *__wrap_realloc(void *ptr, size_t size) {
  if (fails()) return NULL;
  void *p = __real_realloc(ptr, size);
  if (!ptr && p) atomic_fetch_add(&n_live, 1);
  return p;
}
void __wrap_free(void *ptr) {
  if (ptr) atomic_fetch_sub(&n_live, 1);
  __real_free(ptr);
}

static size_t allocs(void) { return atomic_load(&n_alloc); }
static long live(void) { return atomic_load(&n_live); }

/* the wrappers are really in place (otherwise every test below would pass vacuously) */
static void test_wrap_active(void **state) {
  (void)state;
  long l0 = live();
#if !(defined(SC_TEST_XSMM) && !defined(__SANITIZE_ADDRESS__))
  /* (with the forwarders above, this file's own calls bind to them: not counted) */
  size_t a0 = allocs();
  void *p = malloc(10);
  assert_non_null(p);
  assert_int_equal(allocs(), a0 + 1);
  assert_int_equal(live(), l0 + 1);
  free(p);
  assert_int_equal(live(), l0);
#endif
  /* the library's allocations are seen */
  size_t a1 = allocs();
  sc_layer l = sc_dense(2, SC_TANH);
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, &l, 1));
  assert_true(allocs() > a1);
  assert_int_equal(live(), l0 + 1);
  sc_chain_destroy(c);
  assert_int_equal(live(), l0);
}

/* ------------------------------------------------------------------ sc_train */
enum { TRAIN_STEPS = 50 };
typedef struct rec {
  size_t counts[TRAIN_STEPS + 1]; /* allocation count seen at step s (1-based) */
  long live_at[TRAIN_STEPS + 1];
  size_t calls;
} rec;

static int record(const sc_progress *pr, void *user) {
  rec *r = user;
  if (pr->step <= TRAIN_STEPS) {
    r->counts[pr->step] = allocs();
    r->live_at[pr->step] = live();
  }
  r->calls++;
  return 0;
}

/* the chains trained: 0 = dense 5 -> 3; 1 = LeNet5 (1x28x28 -> 10); 2 = a small convnet
 * with padding, stride and dropout (1x10x10 -> 3) */
static sc_chain *make_chain(int kind, size_t *nin, size_t *nout) {
  sc_chain *c = NULL;
  if (kind == 0) {
    sc_layer L[] = {sc_dense(16, SC_TANH), sc_dense(8, SC_GELU), sc_dense(3, SC_IDENTITY)};
    SC_OK_OR_FAIL(sc_chain_create(&c, 5, L, 3));
  } else if (kind == 1) {
    sc_layer L[] = {sc_conv2d(5, 5, 6, SC_RELU),
                    sc_maxpool2d(2, 2),
                    sc_conv2d(5, 5, 16, SC_RELU),
                    sc_maxpool2d(2, 2),
                    sc_flatten(),
                    sc_dense(120, SC_RELU),
                    sc_dense(84, SC_RELU),
                    sc_dense(10, SC_IDENTITY)};
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 28, 28, L, 8));
  } else {
    sc_layer L[] = {sc_conv2d_ex(3, 3, 4, SC_TANH, 1, 1, 1, 1),
                    sc_maxpool2d(2, 2),
                    sc_conv2d_ex(3, 3, 5, SC_RELU, 2, 2, 1, 1),
                    sc_flatten(),
                    sc_dropout(0.25),
                    sc_dense(3, SC_IDENTITY)};
    SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 10, 10, L, 6));
  }
  SC_OK_OR_FAIL(sc_chain_input_size(c, nin));
  SC_OK_OR_FAIL(sc_chain_output_size(c, nout));
  return c;
}

/* when set, train_chain also writes a checkpoint after every step and clips gradients:
 * neither may allocate */
static const char *ck_path;
static sc_precision run_prec = SC_PRECISION_FP32; /* of sc_train (float) and compute_loop */
/* when set, train_chain trains in double (sc_train_f64) */
static int train_f64;

static void train_chain(int kind, sc_loss loss, size_t n, size_t batch_size, size_t epochs,
                        int threads, int shuffle) {
  size_t nin = 0, nout = 0;
  sc_chain *c = make_chain(kind, &nin, &nout);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *x = malloc(n * nin * sizeof *x), *t = malloc(n * nout * sizeof *t);
  int32_t *lab = malloc(n * sizeof *lab);
  float *p = malloc(np * sizeof *p);
  assert_true(x && t && lab && p);
  tu_fill_f32(x, n * nin, 1, 1.0);
  tu_fill_f32(t, n * nout, 2, 1.0);
  for (size_t i = 0; i < n; i++) lab[i] = (int32_t)(i % 3);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));

  rec *r = calloc(1, sizeof *r);
  assert_non_null(r);
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(1e-2);
  o.epochs = epochs;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.threads = threads;
  o.progress_every = 1;
  o.progress = record;
  o.user = r;
  if (!train_f64) o.precision = run_prec;
  sc_layer_profile prof[10];
  if (ck_path) {
    o.checkpoint = ck_path;
    o.checkpoint_every = 1;
    o.clip_norm = 0.5;
    o.profile = prof; /* and profiling */
    o.profile_rows = 10;
  }
  sc_data d = {x, loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)lab : (const void *)t, n};
  sc_train_report rep;
  size_t before = allocs();
  long live_before = live();
  double *x64 = NULL, *t64 = NULL, *p64 = NULL;
  if (train_f64) {
    x64 = malloc(n * nin * sizeof *x64), t64 = malloc(n * nout * sizeof *t64);
    p64 = malloc(np * sizeof *p64);
    assert_true(x64 && t64 && p64);
    for (size_t i = 0; i < n * nin; i++) x64[i] = x[i];
    for (size_t i = 0; i < n * nout; i++) t64[i] = t[i];
    for (size_t i = 0; i < np; i++) p64[i] = p[i];
    before = allocs();
    live_before = live();
    sc_data_f64 d64 = {
        x64, loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)lab : (const void *)t64, n};
    SC_OK_OR_FAIL(sc_train_f64(c, loss, p64, &d64, &o, &rep));
  } else {
    SC_OK_OR_FAIL(sc_train(c, loss, p, &d, &o, &rep));
  }
  size_t after = allocs();
  assert_int_equal(rep.steps, TRAIN_STEPS);
  assert_int_equal(r->calls, TRAIN_STEPS);
  /* sc_train does allocate (workspace, optimizer, gradient, ...) -- before step 1 */
  assert_true(r->counts[1] > before);
  /* ... and nothing after: the count at every later step equals step 1's */
  for (size_t s = 1; s <= TRAIN_STEPS; s++) {
    if (r->counts[s] != r->counts[1])
      fail_msg("loss %d n %zu batch %zu threads %d shuffle %d: %zu allocations by step %zu, "
               "%zu by step 1",
               (int)loss, n, batch_size, threads, shuffle, r->counts[s] - before, s,
               r->counts[1] - before);
    assert_int_equal(r->live_at[s], r->live_at[1]);
  }
  assert_int_equal(r->counts[2], r->counts[1]);
  assert_int_equal(r->counts[TRAIN_STEPS], r->counts[2]);
  /* nothing after the last step either, and everything is freed on return */
  assert_int_equal(after, r->counts[TRAIN_STEPS]);
  assert_int_equal(live(), live_before);
  /* it trained: finite parameters */
  for (size_t k = 0; k < np; k++) assert_true(train_f64 ? isfinite(p64[k]) : isfinite(p[k]));
  free(x64);
  free(t64);
  free(p64);
  free(r);
  free(x);
  free(t);
  free(lab);
  free(p);
  sc_chain_destroy(c);
}

static void train_case(sc_loss loss, size_t n, size_t batch_size, size_t epochs, int threads,
                       int shuffle) {
  train_chain(0, loss, n, batch_size, epochs, threads, shuffle);
}

/* convnets: LeNet5 and a padded/strided/dropout one, minibatches with shuffling */
static void test_train_convnets(void **state) {
  (void)state;
  for (int th = 1; th <= 2; th++) {
    /* 90 images in batches of 50: 2 steps per epoch (the last of 40), 25 epochs */
    train_chain(1, SC_LOSS_LOGIT_CROSSENTROPY, 90, 50, 25, th, 1);
    train_chain(2, SC_LOSS_LOGIT_CROSSENTROPY, 90, 50, 25, th, 1);
    train_chain(2, SC_LOSS_SQUARED, 70, 0, TRAIN_STEPS, th, 0);
  }
}

/* checkpoints after every step (and gradient clipping) allocate nothing */
static void test_train_checkpointing(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "alloc", "ck.sck");
  ck_path = path;
  for (int th = 1; th <= 2; th++) {
    train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 1);
    train_chain(2, SC_LOSS_LOGIT_CROSSENTROPY, 90, 50, 25, th, 1);
  }
  ck_path = NULL;
  sc_checkpoint_state info;
  sc_layer L[] = {sc_dense(16, SC_TANH), sc_dense(8, SC_GELU), sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 5, L, 3));
  SC_EXPECT(SC_ERR_SHAPE, sc_checkpoint_info(c, path, &info)); /* the convnet's, last */
  sc_chain_destroy(c);
  remove(path);
}

static void test_train_full_batch(void **state) {
  (void)state;
  for (int th = 1; th <= 2; th++) {
    train_case(SC_LOSS_SQUARED, 100, 0, TRAIN_STEPS, th, 1);
    train_case(SC_LOSS_SQUARED, 333, 0, TRAIN_STEPS, th, 0); /* several slices */
  }
}

static void test_train_minibatch_shuffle(void **state) {
  (void)state;
  for (int th = 1; th <= 2; th++) {
    /* 95 samples in batches of 20: 5 steps per epoch, the last one of 15 samples */
    train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 1);
    train_case(SC_LOSS_ABSOLUTE, 95, 20, 10, th, 1);
    train_case(SC_LOSS_LOGIT_CROSSENTROPY, 95, 20, 10, th, 1);
    /* minibatches without shuffling */
    train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 0);
    /* batches of 1 */
    train_case(SC_LOSS_SQUARED, 5, 1, 10, th, 1);
  }
}

/* sc_train_f64: the same promise in double, checkpoints and clipping included */
static void test_train_f64(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "alloc", "ck64.sck");
  train_f64 = 1;
  for (int th = 1; th <= 2; th++) {
    train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 1);
    train_case(SC_LOSS_LOGIT_CROSSENTROPY, 95, 20, 10, th, 1);
    train_chain(2, SC_LOSS_SQUARED, 70, 0, TRAIN_STEPS, th, 0);
    ck_path = path;
    train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 1);
    ck_path = NULL;
  }
  train_f64 = 0;
  remove(path);
}

/* ------------------------------------------------------------------ compute loops */
static void compute_loop(int threads, int caller_memory) {
  sc_layer L[] = {sc_dense(24, SC_RELU), sc_dense_nobias(12, SC_TANH), sc_dense(4, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 7, L, 3));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  const size_t B = 150; /* several slices */
  float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *x = malloc(B * 7 * sizeof *x);
  float *y = malloc(B * 4 * sizeof *y), *t = malloc(B * 4 * sizeof *t),
        *gx = malloc(B * 7 * sizeof *gx), *dy = malloc(B * 4 * sizeof *dy);
  double *pd = malloc(np * sizeof *pd), *gd = malloc(np * sizeof *gd),
         *xd = malloc(B * 7 * sizeof *xd), *yd = malloc(B * 4 * sizeof *yd),
         *td = malloc(B * 4 * sizeof *td), *gxd = malloc(B * 7 * sizeof *gxd),
         *dyd = malloc(B * 4 * sizeof *dyd);
  int32_t *lab = malloc(B * sizeof *lab);
  assert_true(p && g && x && y && t && gx && dy && pd && gd && xd && yd && td && gxd && dyd && lab);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 1));
  SC_OK_OR_FAIL(sc_params_init_f64(c, pd, np, 1));
  tu_fill_f32(x, B * 7, 2, 1.0);
  tu_fill_f32(t, B * 4, 3, 1.0);
  tu_fill_f32(dy, B * 4, 4, 1.0);
  tu_fill_f64(xd, B * 7, 2, 1.0);
  tu_fill_f64(td, B * 4, 3, 1.0);
  tu_fill_f64(dyd, B * 4, 4, 1.0);
  for (size_t i = 0; i < B; i++) lab[i] = (int32_t)(i % 4);

  sc_workspace *ws = NULL;
  void *mem = NULL;
  if (caller_memory) {
    size_t bytes = 0;
    SC_OK_OR_FAIL(sc_workspace_bytes(c, B, &bytes));
    mem = malloc(bytes);
    assert_non_null(mem);
    size_t a0 = allocs();
    SC_OK_OR_FAIL(sc_workspace_init(&ws, c, B, mem, bytes));
    assert_int_equal(allocs(), a0); /* caller memory: no allocation */
  } else {
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  }
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, threads));
  SC_OK_OR_FAIL(sc_workspace_set_precision(ws, run_prec)); /* bf16: its buffer, here */
  sc_optimizer *adam = NULL, *sgd = NULL;
  sc_optim ca = sc_adamw(1e-3, 1e-2), cs = sc_sgd(1e-3, 0.9);
  SC_OK_OR_FAIL(sc_optimizer_create(&adam, &ca, np));
  size_t ob = 0;
  SC_OK_OR_FAIL(sc_optimizer_bytes(&cs, np, &ob));
  void *omem = malloc(ob);
  assert_non_null(omem);
  size_t a1 = allocs();
  SC_OK_OR_FAIL(sc_optimizer_init(&sgd, &cs, np, omem, ob));
  assert_int_equal(allocs(), a1);

  /* two rounds, both counted: not even the first call may allocate (no lazy set-up) */
  float lv = 0;
  double lvd = 0;
  for (int round = 0; round < 2; round++) {
    size_t before = allocs();
    long live_before = live();
    for (int it = 0; it < 10; it++) {
      size_t b = it % 2 ? B : (size_t)(1 + 13 * it); /* full and partial batches */
      SC_OK_OR_FAIL(sc_forward(c, p, x, b, y, ws));
      SC_OK_OR_FAIL(sc_forward_f64(c, pd, xd, b, yd, ws));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, b, &lv, g, gx, ws));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_ABSOLUTE, p, x, t, b, &lv, g, NULL, ws));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, b, &lv, g, gx, ws));
      SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, pd, xd, td, b, &lvd, gd, gxd, ws));
      SC_OK_OR_FAIL(sc_loss_value(c, SC_LOSS_SQUARED, p, x, t, b, &lv, ws));
      SC_OK_OR_FAIL(sc_pullback(c, p, x, dy, b, g, gx, ws));
      SC_OK_OR_FAIL(sc_pullback_f64(c, pd, xd, dyd, b, gd, gxd, ws));
      SC_OK_OR_FAIL(sc_optimizer_step(adam, p, g, np));
      SC_OK_OR_FAIL(sc_optimizer_step(sgd, p, g, np));
      SC_OK_OR_FAIL(sc_optimizer_reset(sgd));
      /* failing calls do not allocate either */
      assert_int_equal(sc_forward(c, p, x, B + 1, y, ws), SC_ERR_BATCH);
      assert_int_equal(sc_valgrad(c, (sc_loss)77, p, x, t, b, &lv, g, gx, ws), SC_ERR_ARG);
    }
    if (allocs() != before)
      fail_msg("threads %d caller memory %d round %d: %zu allocations in the compute loop", threads,
               caller_memory, round, allocs() - before);
    assert_int_equal(live(), live_before);
  }
  /* the loop computed something */
  assert_true(isfinite(lv) && lv > 0);
  for (size_t k = 0; k < np; k++) assert_true(isfinite(p[k]));
  sc_optimizer_destroy(adam);
  sc_optimizer_destroy(sgd);
  sc_workspace_destroy(ws);
  free(mem);
  free(omem);
  free(p), free(g), free(x), free(y), free(t), free(gx), free(dy);
  free(pd), free(gd), free(xd), free(yd), free(td), free(gxd), free(dyd), free(lab);
  sc_chain_destroy(c);
}

/* sc_train when an allocation fails: each of the allocations it makes is made to fail in
 * turn (full batch on 2 threads, float and double, so the data's tiles are made too): it
 * returns SC_ERR_NOMEM with p untouched and everything freed, or, where the allocation was
 * one it can do without (the tiles: the steps then gather), trains to the same bits */
static void test_train_alloc_failures(void **state) {
  (void)state;
  size_t nin = 0, nout = 0, n = 100;
  sc_chain *c = make_chain(0, &nin, &nout);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *x = malloc(n * nin * sizeof *x), *t = malloc(n * nout * sizeof *t);
  double *x64 = malloc(n * nin * sizeof *x64), *t64 = malloc(n * nout * sizeof *t64);
  float *p0 = malloc(np * sizeof *p0);
  void *ref = malloc(np * sizeof(double)), *p = malloc(np * sizeof(double));
  assert_true(x && t && x64 && t64 && p0 && ref && p);
  tu_fill_f32(x, n * nin, 1, 1.0);
  tu_fill_f32(t, n * nout, 2, 1.0);
  for (size_t i = 0; i < n * nin; i++) x64[i] = x[i];
  for (size_t i = 0; i < n * nout; i++) t64[i] = t[i];
  SC_OK_OR_FAIL(sc_params_init(c, p0, np, 3));
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(1e-2);
  o.epochs = 5;
  o.threads = 2;
  sc_data d = {x, t, n};
  sc_data_f64 d64 = {x64, t64, n};
  for (int f64 = 0; f64 < 2; f64++) {
    size_t es = f64 ? sizeof(double) : sizeof(float);
    for (size_t k = 0; k < np; k++)
      if (f64)
        ((double *)ref)[k] = p0[k];
      else
        ((float *)ref)[k] = p0[k];
    size_t before = allocs();
    long live0 = live();
    SC_OK_OR_FAIL(f64 ? sc_train_f64(c, SC_LOSS_SQUARED, ref, &d64, &o, NULL)
                      : sc_train(c, SC_LOSS_SQUARED, ref, &d, &o, NULL));
    size_t made = allocs() - before;
    assert_int_equal(live(), live0);
    int ok = 0, nomem = 0;
    for (size_t f = 1; f <= made; f++) {
      for (size_t k = 0; k < np; k++)
        if (f64)
          ((double *)p)[k] = p0[k];
        else
          ((float *)p)[k] = p0[k];
      atomic_store(&fail_at, allocs() + f);
      sc_status st = f64 ? sc_train_f64(c, SC_LOSS_SQUARED, p, &d64, &o, NULL)
                         : sc_train(c, SC_LOSS_SQUARED, p, &d, &o, NULL);
      atomic_store(&fail_at, 0);
      assert_int_equal(live(), live0); /* nothing left allocated */
      if (st == SC_OK) {
        if (memcmp(p, ref, np * es))
          fail_msg("%s: allocation %zu of %zu failed, sc_train succeeded with other results",
                   f64 ? "double" : "float", f, made);
        ok++;
        continue;
      }
      if (st != SC_ERR_NOMEM)
        fail_msg("%s: allocation %zu of %zu failed: %s (%s), not SC_ERR_NOMEM",
                 f64 ? "double" : "float", f, made, sc_status_str(st), sc_last_error());
      for (size_t k = 0; k < np; k++) /* p untouched */
        assert_true(f64 ? ((double *)p)[k] == (double)p0[k] : ((float *)p)[k] == p0[k]);
      nomem++;
    }
    print_message("  %s: each of sc_train's %zu allocations failed in turn: %d times "
                  "SC_ERR_NOMEM (p untouched), %d times the same bits (the data's tiles, which it "
                  "can do without), "
                  "nothing leaked\n",
                  f64 ? "double" : "float", made, nomem, ok);
    assert_true(nomem > 0);
    assert_true(ok > 0); /* the tiles are optional */
  }
  free(x), free(t), free(x64), free(t64), free(p0), free(ref), free(p);
  sc_chain_destroy(c);
}

static void test_compute_no_alloc(void **state) {
  (void)state;
  long l0 = live();
  compute_loop(1, 0);
  compute_loop(2, 0);
  compute_loop(3, 0);
  compute_loop(1, 1);
  compute_loop(2, 1);
  /* everything (workspaces with threads, optimizers, chains) was given back */
  assert_int_equal(live(), l0);
}

/* the bf16 precisions: training and the compute calls allocate nothing in the loop, emulated
 * and with the bf16 kernels (their portable models, SC_BF16_KERNELS=model and amx-model: the
 * same buffers as the AVX512_BF16 and AMX kernels, allocated by sc_workspace_set_precision;
 * the AMX GEMM's padded blocks are on its stack) */
static void test_bf16_no_alloc(void **state) {
  (void)state;
  long l0 = live();
  for (int kind = 0; kind < 3; kind++) {
    run_prec = kind ? SC_PRECISION_BF16 : SC_PRECISION_BF16_EMULATED;
    if (kind) setenv("SC_BF16_KERNELS", kind == 1 ? "model" : "amx-model", 1);
    for (int th = 1; th <= 2; th++) {
      train_case(SC_LOSS_SQUARED, 95, 20, 10, th, 1);
      train_chain(1, SC_LOSS_LOGIT_CROSSENTROPY, 90, 50, 25, th, 1);
      compute_loop(th, 0);
      compute_loop(th, 1);
    }
    unsetenv("SC_BF16_KERNELS");
  }
  run_prec = SC_PRECISION_FP32;
  assert_int_equal(live(), l0);
}

/* the single-state path (ODE right-hand sides) allocates nothing either */
static void test_one_state_no_alloc(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(50, SC_TANH), sc_dense(2, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 2, L, 2));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  double *p = malloc(np * sizeof *p), *dp = calloc(np, sizeof *dp);
  float *pf = malloc(np * sizeof *pf), *dpf = calloc(np, sizeof *dpf);
  assert_true(p && dp && pf && dpf);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p, np, 1));
  SC_OK_OR_FAIL(sc_params_init(c, pf, np, 1));
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, 1));
  double u[2] = {0.5, -1}, v[2] = {1, 2}, y[2], du[2] = {0, 0}, jw[2];
  float uf[2] = {0.5f, -1}, vf[2] = {1, 2}, yf[2], duf[2] = {0, 0}, jwf[2];
  size_t before = allocs();
  for (int i = 0; i < 1000; i++) {
    u[0] += 1e-3;
    uf[0] += 1e-3f;
    SC_OK_OR_FAIL(sc_apply_f64(c, p, u, y, ws));
    SC_OK_OR_FAIL(sc_vjp_f64(c, p, u, v, y, du, dp, ws));
    SC_OK_OR_FAIL(sc_jvp_f64(c, p, u, v, y, jw, ws));
    SC_OK_OR_FAIL(sc_apply(c, pf, uf, yf, ws));
    SC_OK_OR_FAIL(sc_vjp(c, pf, uf, vf, yf, duf, dpf, ws));
    SC_OK_OR_FAIL(sc_jvp(c, pf, uf, vf, yf, jwf, ws));
  }
  assert_int_equal(allocs(), before);
  assert_true(isfinite(du[0]) && isfinite(dpf[0]));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p), free(dp), free(pf), free(dpf);
}

/* NUTS: no allocation per iteration (the log density itself is simplechain's valgrad) */
static size_t nuts_allocs(bnn_model *m, size_t iters, int threads, int caller_mem) {
  sc_nuts_opts o = sc_nuts_defaults();
  o.chains = 2;
  o.warmup = iters;
  o.draws = iters;
  o.threads = threads;
  o.max_depth = 5;
  double *draws = malloc(2 * iters * m->n * sizeof *draws);
  sc_nuts_stats *stats = malloc(2 * iters * sizeof *stats);
  sc_nuts_chain_info info[2];
  size_t bytes = 0;
  SC_OK_OR_FAIL(sc_nuts_bytes(m->n, &o, &bytes));
  void *mem = caller_mem ? malloc(bytes) : NULL;
  assert_true(draws && stats && (mem || !caller_mem));
  sc_nuts_out out = {draws, stats, info, NULL};
  long l0 = live();
  size_t before = allocs();
  SC_OK_OR_FAIL(sc_nuts_sample(bnn_logdensity, m, m->n, &o, &out, mem, bytes));
  size_t used = allocs() - before;
  assert_int_equal(live(), l0);
  assert_true(info[0].gradients > 4 * iters);
  free(mem);
  free(draws);
  free(stats);
  return used;
}

static void test_nuts_no_alloc(void **state) {
  (void)state;
  bnn_model m;
  SC_OK_OR_FAIL(bnn_create(&m, 8, 40, 7, 2));
  assert_int_equal(nuts_allocs(&m, 20, 1, 1), 0);
  assert_int_equal(nuts_allocs(&m, 100, 2, 1), 0);
  assert_int_equal(nuts_allocs(&m, 20, 1, 0), 1);
  assert_int_equal(nuts_allocs(&m, 100, 2, 0), 1);
  bnn_destroy(&m);
}

/* the whole group once per kernel path this CPU and build have (SC_ISA forced): the
 * paths differ in their tile pipelines (AVX-512 holds tiles in pairs for dW, for one) */
int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrap_active),
      cmocka_unit_test(test_train_full_batch),
      cmocka_unit_test(test_train_minibatch_shuffle),
      cmocka_unit_test(test_train_convnets),
      cmocka_unit_test(test_train_checkpointing),
      cmocka_unit_test(test_train_f64),
      cmocka_unit_test(test_train_alloc_failures),
      cmocka_unit_test(test_compute_no_alloc),
      cmocka_unit_test(test_bf16_no_alloc),
      cmocka_unit_test(test_one_state_no_alloc),
      cmocka_unit_test(test_nuts_no_alloc),
  };
  const char *isas[3];
  int nisa = tu_isas(isas), failed = 0;
  for (int i = 0; i < nisa; i++) {
    char name[64];
    snprintf(name, sizeof name, "test_alloc SC_ISA=%s", isas[i]);
    setenv("SC_ISA", isas[i], 1);
    failed += cmocka_run_group_tests_name(name, tests, NULL, NULL);
  }
  unsetenv("SC_ISA");
  return failed;
}
