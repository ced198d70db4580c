/* tests/test_threads.c — results do not depend on the thread count.
 *
 * simplechain.h promises that a batch is cut into slices that depend only on the batch
 * size and that slices are reduced in a fixed order, so sc_train (opts.threads) and the
 * compute calls on a workspace with sc_workspace_set_threads give BITWISE identical
 * results for 1, 2 and 3 threads, and from one run to the next. Everything here is
 * compared with memcmp.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* sched_getcpu, sched_setaffinity, CPU_SET */
#endif
#include "testutil.h"
#include <time.h>
#if defined(__linux__)
#include <sched.h>
#endif

#define NS 1000 /* samples of the regression problem */
#define NIN 5
#define NOUT 2

/* y = (sin(x0) + x1 x2, x3 - x4^2 / 2): smooth, learnable */
static void mk_data(float *x, float *y, int32_t *lab, size_t n) {
  tu_fill_f32(x, n * NIN, 12345, 1.5);
  for (size_t i = 0; i < n; i++) {
    const float *r = x + i * NIN;
    y[i * NOUT] = sinf(r[0]) + r[1] * r[2];
    y[i * NOUT + 1] = r[3] - 0.5f * r[4] * r[4];
    lab[i] = (int32_t)((r[0] > 0) + 2 * (r[1] * r[2] > 0)); /* 4 classes */
  }
}

/* wide: 5 -> 200 -> 90 -> out, 19,382 parameters (with out = 2): above SC__OPT_PAR_MIN
 * (16,384), so sc_train's ADAM step runs on the threads, in parts that end at multiples of
 * 64 but the last (19,382 = 302 x 64 + 54) */
static int wide_chain;
static sc_chain *mk_chain(size_t out, sc_act last) {
  sc_layer L[3] = {sc_dense(wide_chain ? 200 : 16, SC_TANH),
                   sc_dense_nobias(wide_chain ? 90 : 17, SC_GELU), sc_dense(out, last)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NIN, L, 3));
  return c;
}

typedef struct train_run {
  float *p;
  double final_loss;
  size_t steps;
} train_run;

static void train(const sc_chain *c, sc_loss loss, const sc_data *d, size_t batch_size,
                  size_t epochs, uint64_t seed, int threads, sc_optim optim, train_run *r) {
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  r->p = malloc(np * sizeof *r->p);
  assert_non_null(r->p);
  SC_OK_OR_FAIL(sc_params_init(c, r->p, np, 7));
  sc_train_opts o = sc_train_defaults();
  o.optim = optim;
  o.epochs = epochs;
  o.batch_size = batch_size;
  o.seed = seed;
  o.threads = threads;
  sc_train_report rep;
  memset(&rep, 0, sizeof rep);
  SC_OK_OR_FAIL(sc_train(c, loss, r->p, d, &o, &rep));
  r->final_loss = rep.final_loss;
  r->steps = rep.steps;
}

/* trains with 1, 2, 3 threads and 1 thread again; all parameters must be identical */
static void check_train(sc_loss loss, size_t batch_size, size_t epochs, sc_optim optim) {
  float *x = malloc(NS * NIN * sizeof *x), *y = malloc(NS * NOUT * sizeof *y);
  int32_t *lab = malloc(NS * sizeof *lab);
  assert_true(x && y && lab);
  mk_data(x, y, lab, NS);
  int xent = loss == SC_LOSS_LOGIT_CROSSENTROPY;
  sc_chain *c = mk_chain(xent ? 4 : NOUT, SC_IDENTITY);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  sc_data d = {x, xent ? (const void *)lab : (const void *)y, NS};

  /* starting loss, to check that training did something */
  float *p0 = malloc(np * sizeof *p0);
  assert_non_null(p0);
  SC_OK_OR_FAIL(sc_params_init(c, p0, np, 7));
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
  float l0 = 0, l1 = 0;
  SC_OK_OR_FAIL(sc_loss_value(c, loss, p0, x, d.target, NS, &l0, ws));

  static const int THREADS[4] = {1, 2, 3, 1};
  train_run runs[4];
  for (int i = 0; i < 4; i++)
    train(c, loss, &d, batch_size, epochs, 99, THREADS[i], optim, &runs[i]);
  size_t bs = batch_size ? batch_size : NS;
  assert_int_equal(runs[0].steps, epochs * ((NS + bs - 1) / bs));
  SC_OK_OR_FAIL(sc_loss_value(c, loss, runs[0].p, x, d.target, NS, &l1, ws));
  print_message(
      "  loss %d, batch %zu, %zu epochs: loss %.5g -> %.5g (1, 2, 3 threads: identical)\n",
      (int)loss, bs, epochs, (double)l0, (double)l1);
  assert_true(l1 < 0.9f * l0);
  assert_memory_not_equal(runs[0].p, p0, np * sizeof *p0);
  for (int i = 1; i < 4; i++) {
    if (memcmp(runs[0].p, runs[i].p, np * sizeof(float)) != 0) {
      size_t k = 0;
      while (k < np && memcmp(&runs[0].p[k], &runs[i].p[k], sizeof(float)) == 0) k++;
      fail_msg("threads=%d: p[%zu] = %.9g, with 1 thread %.9g (batch %zu)", THREADS[i], k,
               (double)runs[i].p[k], (double)runs[0].p[k], bs);
    }
    assert_memory_equal(&runs[0].final_loss, &runs[i].final_loss, sizeof(double));
    assert_int_equal(runs[0].steps, runs[i].steps);
  }
  /* sanity: a different shuffling seed gives different parameters (so the runs above
   * really did shuffle, and the comparison is not vacuous) */
  if (batch_size && batch_size < NS) {
    train_run other;
    train(c, loss, &d, batch_size, epochs, 100, 2, optim, &other);
    assert_memory_not_equal(runs[0].p, other.p, np * sizeof(float));
    free(other.p);
  }
  for (int i = 0; i < 4; i++) free(runs[i].p);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  free(p0), free(x), free(y), free(lab);
}

static void test_train_minibatch_squared(void **state) {
  (void)state;
  check_train(SC_LOSS_SQUARED, 200, 6, sc_adam(1e-2));
}
static void test_train_minibatch_odd_batch(void **state) {
  (void)state;
  /* 1000 = 7 x 137 + 41: the last minibatch of each epoch is short */
  check_train(SC_LOSS_ABSOLUTE, 137, 4, sc_adamw(1e-2, 1e-3));
}
static void test_train_fullbatch(void **state) {
  (void)state;
  check_train(SC_LOSS_SQUARED, 0, 25, sc_adam(1e-2));
}
static void test_train_crossentropy(void **state) {
  (void)state;
  check_train(SC_LOSS_LOGIT_CROSSENTROPY, 200, 5, sc_sgd(0.1, 0.9));
}
/* the ADAM / AdamW step and the NaN guard on the threads (a chain with more than 16,384
 * parameters): the same bits as the one-pass step of 1 thread */
static void test_train_wide_adam(void **state) {
  (void)state;
  wide_chain = 1;
  check_train(SC_LOSS_SQUARED, 200, 2, sc_adam(1e-3));
  check_train(SC_LOSS_LOGIT_CROSSENTROPY, 0, 8, sc_adamw(1e-3, 1e-2));
  wide_chain = 0;
}

/* sc_train runs on no more threads than a step has work for (sc_train_threads): the slices of
 * a minibatch (a small dense chain: 4 tiles of 32 samples a slice; a wider one: 1 tile), or
 * one thread per 65,536 parameters where that is more; never more than asked for. And it
 * really does: the process's threads (Linux: /proc/self/task), counted from the progress
 * callback during the run, are the calling thread plus the used count's workers. */
#if defined(__linux__)
#include <dirent.h>
static int count_tasks(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}
#else
static int count_tasks(void) { return -1; }
#endif
static int max_tasks_seen;
static int on_step_count_tasks(const sc_progress *pr, void *user) {
  (void)pr, (void)user;
  int n = count_tasks();
  if (n > max_tasks_seen) max_tasks_seen = n;
  return 0;
}
static int used_threads(const sc_chain *c, size_t batch, int threads, size_t n) {
  sc_train_opts o = sc_train_defaults();
  o.batch_size = batch;
  o.threads = threads;
  int used = -1;
  SC_OK_OR_FAIL(sc_train_threads(c, &o, n, &used));
  return used;
}
static void test_train_threads_used(void **state) {
  (void)state;
  sc_chain *small = mk_chain(NOUT, SC_IDENTITY); /* 5 -> 16 -> 17 -> 2: 4 tiles a slice */
  wide_chain = 1;
  sc_chain *wide = mk_chain(NOUT, SC_IDENTITY); /* 5 -> 200 -> 90 -> 2: 1 tile a slice */
  wide_chain = 0;
  sc_layer L[3] = {sc_dense(400, SC_TANH), sc_dense(200, SC_TANH), sc_dense(NOUT, SC_IDENTITY)};
  sc_chain *big = NULL; /* 82,802 parameters: 2 threads for its parameters alone */
  SC_OK_OR_FAIL(sc_chain_create(&big, NIN, L, 3));
  /* the slices of a minibatch bound it */
  assert_int_equal(used_threads(small, 32, 3, NS), 1);    /* 1 tile: 1 slice */
  assert_int_equal(used_threads(small, 200, 3, NS), 2);   /* 7 tiles: 2 slices */
  assert_int_equal(used_threads(small, 0, 3, NS), 3);     /* full batch: 32 tiles, 8 slices */
  assert_int_equal(used_threads(small, 0, 16, NS), 8);    /* ... and no more than 8 */
  assert_int_equal(used_threads(small, 5000, 16, NS), 8); /* a batch above n: all n */
  assert_int_equal(used_threads(wide, 64, 16, NS), 2);    /* LeNet5's case: 2 tiles */
  assert_int_equal(used_threads(wide, 200, 3, NS), 3);
  assert_int_equal(used_threads(wide, 200, 1, NS), 1); /* never more than asked for */
  assert_int_equal(used_threads(big, 32, 4, NS), 2);   /* the parameters' share */
  assert_int_equal(used_threads(big, 32, 1, NS), 1);
  /* with dist, this rank's share of the slices: 8 slices over 3 ranks are 2, 3, 3 */
  sc_train_opts o = sc_train_defaults();
  o.threads = 16;
  sc_dist dist;
  memset(&dist, 0, sizeof dist);
  dist.ranks = 3;
  int used = 0, want[3] = {2, 3, 3};
  for (int r = 0; r < 3; r++) {
    dist.rank = r;
    o.dist = &dist;
    SC_OK_OR_FAIL(sc_train_threads(small, &o, NS, &used));
    assert_int_equal(used, want[r]);
  }
  /* sc_train itself runs on that many: small chain, 3 threads asked for */
  int base = count_tasks();
  if (base < 1) {
    print_message("  (no /proc/self/task here: the thread count during sc_train not checked)\n");
  } else {
    float *x = malloc(NS * NIN * sizeof *x), *y = malloc(NS * NOUT * sizeof *y);
    int32_t *lab = malloc(NS * sizeof *lab);
    size_t np = 0;
    SC_OK_OR_FAIL(sc_chain_nparams(small, &np));
    float *p = malloc(np * sizeof *p);
    assert_true(x && y && lab && p);
    mk_data(x, y, lab, NS);
    sc_data d = {x, y, NS};
    static const size_t BATCH[3] = {32, 200, 0};
    for (int i = 0; i < 3; i++) {
      SC_OK_OR_FAIL(sc_params_init(small, p, np, 7));
      sc_train_opts t = sc_train_defaults();
      t.batch_size = BATCH[i];
      t.threads = 3;
      t.progress_every = 1;
      t.progress = on_step_count_tasks;
      max_tasks_seen = 0;
      SC_OK_OR_FAIL(sc_train(small, SC_LOSS_SQUARED, p, &d, &t, NULL));
      int u = used_threads(small, BATCH[i], 3, NS);
      print_message("  batch %zu, 3 threads asked for: %d used, %d threads in the process during "
                    "the run (%d before)\n",
                    BATCH[i] ? BATCH[i] : (size_t)NS, u, max_tasks_seen, base);
      assert_int_equal(max_tasks_seen - base, u - 1);
    }
    free(p), free(x), free(y), free(lab);
  }
  sc_chain_destroy(small);
  sc_chain_destroy(wide);
  sc_chain_destroy(big);
}

/* sc_train's data tiles, made once before the first step when every step reads the same
 * samples in order (full batch, or opts.shuffle = 0 with a batch size that is a multiple of
 * 32): the same bits as gathering them at every step (SC_TRAIN_TILES=0), in float, double and
 * bf16 operands (emulated: any CPU; the bf16 kernels where the CPU has them), for the three
 * losses, 1 and 2 threads, a last short tile (1000 = 31 x 32 + 8), a last short minibatch
 * (1000 = 10 x 96 + 40), and a conv chain on images. And that the tiles are really used: a
 * progress callback that overwrites the data after step 1 (which sc_train's contract forbids)
 * changes the result of the gathering run, not of the tiled run, which equals the run on the
 * unchanged data. */
typedef struct tiles_cb {
  float *x;
  double *x64;
  size_t nx;
} tiles_cb;
static int tiles_poke(const sc_progress *pr, void *user) {
  const tiles_cb *t = user;
  if (pr->step == 1)
    for (size_t k = 0; k < t->nx; k++) {
      if (t->x) t->x[k] = -t->x[k];
      if (t->x64) t->x64[k] = -t->x64[k];
    }
  return 0;
}
/* trains c for 3 epochs (6 for full batch) with the tiles (tiles 1) or without, from the same
 * p0; f64: sc_train_f64 on the data converted; poke: tiles_poke after step 1. Returns p (np
 * floats, or doubles as bytes), or NULL where prec is unsupported */
static void *tiles_run(const sc_chain *c, sc_loss loss, const float *x, const void *t, size_t n,
                       size_t nin, size_t nout, size_t batch, int threads, sc_precision prec,
                       int f64, int tiles, int poke) {
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  int xent = loss == SC_LOSS_LOGIT_CROSSENTROPY;
  float *xc = malloc(n * nin * sizeof *xc), *p = malloc(np * sizeof(double));
  double *x64 = malloc(n * nin * sizeof *x64), *t64 = malloc(n * nout * sizeof *t64);
  assert_true(xc && p && x64 && t64);
  memcpy(xc, x, n * nin * sizeof *xc);
  for (size_t k = 0; k < n * nin; k++) x64[k] = x[k];
  for (size_t k = 0; !xent && k < n * nout; k++) t64[k] = ((const float *)t)[k];
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 7));
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(1e-2);
  o.epochs = batch ? 3 : 6;
  o.batch_size = batch;
  o.shuffle = 0;
  o.seed = 5;
  o.threads = threads;
  o.precision = prec;
  tiles_cb cb = {f64 ? NULL : xc, f64 ? x64 : NULL, n * nin};
  if (poke) {
    o.progress = tiles_poke;
    o.progress_every = 1;
    o.user = &cb;
  }
  setenv("SC_TRAIN_TILES", tiles ? "1" : "0", 1);
  sc_status st;
  if (f64) {
    double *p64 = (double *)(void *)p;
    for (size_t k = np; k-- > 0;) p64[k] = p[k]; /* (in place, from the top) */
    sc_data_f64 d = {x64, xent ? t : (const void *)t64, n};
    st = sc_train_f64(c, loss, p64, &d, &o, NULL);
  } else {
    sc_data d = {xc, t, n};
    st = sc_train(c, loss, p, &d, &o, NULL);
  }
  unsetenv("SC_TRAIN_TILES");
  free(xc), free(x64), free(t64);
  if (st == SC_ERR_UNSUPPORTED && prec == SC_PRECISION_BF16) {
    free(p);
    return NULL;
  }
  SC_OK_OR_FAIL(st);
  return p;
}
static void test_train_tiles(void **state) {
  (void)state;
  float *x = malloc(NS * NIN * sizeof *x), *y = malloc(NS * NOUT * sizeof *y);
  int32_t *lab = malloc(NS * sizeof *lab);
  assert_true(x && y && lab);
  mk_data(x, y, lab, NS);
  static const sc_loss LOSS[3] = {SC_LOSS_SQUARED, SC_LOSS_ABSOLUTE, SC_LOSS_LOGIT_CROSSENTROPY};
  static const sc_precision PREC[3] = {SC_PRECISION_FP32, SC_PRECISION_BF16_EMULATED,
                                       SC_PRECISION_BF16};
  int runs = 0, skipped = 0;
  for (int li = 0; li < 3; li++) {
    int xent = LOSS[li] == SC_LOSS_LOGIT_CROSSENTROPY;
    sc_chain *c = mk_chain(xent ? 4 : NOUT, SC_IDENTITY);
    size_t np = 0;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
    const void *t = xent ? (const void *)lab : (const void *)y;
    for (int f64 = 0; f64 < 2; f64++)
      for (int pi = 0; pi < (f64 ? 1 : 3); pi++)
        for (size_t batch = 0; batch <= 96; batch += 96)
          for (int threads = 1; threads <= 2; threads++) {
            void *a =
                tiles_run(c, LOSS[li], x, t, NS, NIN, NOUT, batch, threads, PREC[pi], f64, 1, 0);
            void *b =
                tiles_run(c, LOSS[li], x, t, NS, NIN, NOUT, batch, threads, PREC[pi], f64, 0, 0);
            assert_true(!a == !b);
            if (!a) {
              skipped++;
              continue;
            }
            if (memcmp(a, b, np * (f64 ? sizeof(double) : sizeof(float))))
              fail_msg("loss %d, %s, precision %d, batch %zu, %d threads: the tiled run differs",
                       (int)LOSS[li], f64 ? "double" : "float", (int)PREC[pi], batch, threads);
            runs++;
            free(a), free(b);
          }
    sc_chain_destroy(c);
  }
  /* the tiles are used: the data overwritten after step 1 changes only the gathering run */
  sc_chain *c = mk_chain(NOUT, SC_IDENTITY);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  for (int f64 = 0; f64 < 2; f64++) {
    size_t bytes = np * (f64 ? sizeof(double) : sizeof(float));
    void *plain =
        tiles_run(c, SC_LOSS_SQUARED, x, y, NS, NIN, NOUT, 0, 2, SC_PRECISION_FP32, f64, 0, 0);
    void *tp =
        tiles_run(c, SC_LOSS_SQUARED, x, y, NS, NIN, NOUT, 0, 2, SC_PRECISION_FP32, f64, 1, 1);
    void *gp =
        tiles_run(c, SC_LOSS_SQUARED, x, y, NS, NIN, NOUT, 0, 2, SC_PRECISION_FP32, f64, 0, 1);
    assert_memory_equal(tp, plain, bytes);
    assert_memory_not_equal(gp, plain, bytes);
    free(plain), free(tp), free(gp);
  }
  sc_chain_destroy(c);
  /* a conv chain on 10 x 10 images (the first layer reads the tiles through its packing) */
  enum { NI = 70 };
  sc_layer L[] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                  sc_dense(3, SC_IDENTITY)};
  SC_OK_OR_FAIL(sc_chain_create_image(&c, 1, 10, 10, L, sizeof L / sizeof *L));
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *xi = malloc(NI * 100 * sizeof *xi);
  int32_t li3[NI];
  assert_non_null(xi);
  tu_fill_f32(xi, NI * 100, 777, 1.0);
  for (int i = 0; i < NI; i++) li3[i] = (int32_t)(i % 3);
  for (int pi = 0; pi < 3; pi++)
    for (int threads = 1; threads <= 2; threads++) {
      void *a = tiles_run(c, SC_LOSS_LOGIT_CROSSENTROPY, xi, li3, NI, 100, 3, 0, threads, PREC[pi],
                          0, 1, 0);
      void *b = tiles_run(c, SC_LOSS_LOGIT_CROSSENTROPY, xi, li3, NI, 100, 3, 0, threads, PREC[pi],
                          0, 0, 0);
      assert_true(!a == !b);
      if (!a) {
        skipped++;
        continue;
      }
      assert_memory_equal(a, b, np * sizeof(float));
      runs++;
      free(a), free(b);
    }
  sc_chain_destroy(c);
  /* a value other than 0 or 1 is an error naming it */
  setenv("SC_TRAIN_TILES", "yes", 1);
  c = mk_chain(NOUT, SC_IDENTITY);
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float *p = malloc(np * sizeof *p);
  assert_non_null(p);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 7));
  sc_train_opts o = sc_train_defaults();
  o.epochs = 1;
  sc_data d = {x, y, NS};
  assert_int_equal(sc_train(c, SC_LOSS_SQUARED, p, &d, &o, NULL), SC_ERR_ARG);
  assert_non_null(strstr(sc_last_error(), "SC_TRAIN_TILES='yes'"));
  unsetenv("SC_TRAIN_TILES");
  print_message("  %d pairs of runs with and without the tiles: the same bits (%d skipped: no "
                "AVX512_BF16); the data overwritten after step 1 changes only the run without\n",
                runs, skipped);
  free(p), free(xi);
  sc_chain_destroy(c);
  free(x), free(y), free(lab);
}

/* sc_valgrad / sc_forward / sc_pullback on a workspace with 1, 2, 3 threads, float and
 * double, at batch sizes from 1 tile to 16 slices; and repeated steps of plain SGD
 * driven by sc_valgrad. On every ISA path. */
static void run_workspace_threads(const char *isa) {
  setenv("SC_ISA", isa, 1);
  float *x = malloc(NS * NIN * sizeof *x), *y = malloc(NS * NOUT * sizeof *y);
  int32_t *lab = malloc(NS * sizeof *lab);
  assert_true(x && y && lab);
  mk_data(x, y, lab, NS);
  sc_chain *c = mk_chain(NOUT, SC_SIGMOID);
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  static const size_t BATCHES[6] = {1, 15, 17, 77, 200, NS};
  static const int THREADS[4] = {1, 2, 3, 1};
  enum { NSTEP = 8 };

  double *xd = malloc(NS * NIN * sizeof *xd), *yd = malloc(NS * NOUT * sizeof *yd);
  assert_true(xd && yd);
  for (size_t k = 0; k < NS * NIN; k++) xd[k] = x[k];
  for (size_t k = 0; k < NS * NOUT; k++) yd[k] = y[k];

  /* per thread count: after NSTEP SGD steps: p, last loss, last gx, forward, pullback */
  float *P[4], *GX[4], *Y[4], *PG[4], *PGX[4], L[4];
  double *PD[4], *GD[4], LD[4];
  for (size_t bi = 0; bi < 6; bi++) {
    size_t B = BATCHES[bi];
    for (int ti = 0; ti < 4; ti++) {
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
      SC_OK_OR_FAIL(sc_workspace_set_threads(ws, THREADS[ti]));
      P[ti] = malloc(np * sizeof(float));
      PG[ti] = calloc(np, sizeof(float));
      GX[ti] = malloc(B * NIN * sizeof(float));
      PGX[ti] = malloc(B * NIN * sizeof(float));
      Y[ti] = malloc(B * NOUT * sizeof(float));
      PD[ti] = malloc(np * sizeof(double));
      GD[ti] = malloc(np * sizeof(double));
      float *g = malloc(np * sizeof(float));
      assert_true(P[ti] && PG[ti] && GX[ti] && PGX[ti] && Y[ti] && PD[ti] && GD[ti] && g);
      SC_OK_OR_FAIL(sc_params_init(c, P[ti], np, 3));
      SC_OK_OR_FAIL(sc_params_init_f64(c, PD[ti], np, 3));
      for (int s = 0; s < NSTEP; s++) {
        /* a different window of the data set every step */
        size_t off = ((size_t)s * 131) % (NS - B + 1);
        SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, P[ti], x + off * NIN, y + off * NOUT, B,
                                 &L[ti], g, GX[ti], ws));
        for (size_t k = 0; k < np; k++) P[ti][k] -= 0.05f * g[k];
        SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, PD[ti], xd + off * NIN, yd + off * NOUT, B,
                                     &LD[ti], GD[ti], NULL, ws));
        for (size_t k = 0; k < np; k++) PD[ti][k] -= 0.05 * GD[ti][k];
      }
      SC_OK_OR_FAIL(sc_forward(c, P[ti], x, B, Y[ti], ws));
      /* pullback twice: accumulation happens in the same order too */
      SC_OK_OR_FAIL(sc_pullback(c, P[ti], x, y, B, PG[ti], PGX[ti], ws));
      SC_OK_OR_FAIL(sc_pullback(c, P[ti], x, y, B, PG[ti], NULL, ws));
      free(g);
      sc_workspace_destroy(ws);
    }
    for (int ti = 1; ti < 4; ti++) {
      char ctx[80];
      snprintf(ctx, sizeof ctx, "isa %s, batch %zu, %d threads", isa, B, THREADS[ti]);
      if (memcmp(P[0], P[ti], np * sizeof(float)) != 0) fail_msg("%s: float p differs", ctx);
      if (memcmp(&L[0], &L[ti], sizeof(float)) != 0)
        fail_msg("%s: loss %.9g vs %.9g", ctx, (double)L[ti], (double)L[0]);
      if (memcmp(GX[0], GX[ti], B * NIN * sizeof(float)) != 0) fail_msg("%s: gx differs", ctx);
      if (memcmp(Y[0], Y[ti], B * NOUT * sizeof(float)) != 0) fail_msg("%s: forward differs", ctx);
      if (memcmp(PG[0], PG[ti], np * sizeof(float)) != 0) fail_msg("%s: pullback g differs", ctx);
      if (memcmp(PGX[0], PGX[ti], B * NIN * sizeof(float)) != 0)
        fail_msg("%s: pullback gx differs", ctx);
      if (memcmp(PD[0], PD[ti], np * sizeof(double)) != 0) fail_msg("%s: double p differs", ctx);
      if (memcmp(&LD[0], &LD[ti], sizeof(double)) != 0) fail_msg("%s: double loss differs", ctx);
    }
    /* the steps did move p */
    float *pi = malloc(np * sizeof(float));
    assert_non_null(pi);
    SC_OK_OR_FAIL(sc_params_init(c, pi, np, 3));
    assert_memory_not_equal(pi, P[0], np * sizeof(float));
    free(pi);
    for (int ti = 0; ti < 4; ti++) {
      free(P[ti]), free(PG[ti]), free(GX[ti]), free(PGX[ti]), free(Y[ti]), free(PD[ti]);
      free(GD[ti]);
    }
  }
  free(xd), free(yd);
  sc_chain_destroy(c);
  free(x), free(y), free(lab);
  unsetenv("SC_ISA");
}

static void test_workspace_threads(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  for (int i = 0; i < nisa; i++) run_workspace_threads(isas[i]);
}

/* the classifier's data (NS samples) and its chain (4 hidden units, identity) */
static sc_chain *mk_problem(float **x, float **y, int32_t **lab, size_t *np) {
  *x = malloc(NS * NIN * sizeof **x), *y = malloc(NS * NOUT * sizeof **y);
  *lab = malloc(NS * sizeof **lab);
  assert_true(*x && *y && *lab);
  mk_data(*x, *y, *lab, NS);
  sc_chain *c = mk_chain(4, SC_IDENTITY);
  SC_OK_OR_FAIL(sc_chain_nparams(c, np));
  return c;
}

/* One workspace, its thread count changed between calls: 2 -> 1 -> 3 -> 2 give the same
 * gradient every time. */
static void test_set_threads_changes(void **state) {
  (void)state;
  float *x, *y;
  int32_t *lab;
  size_t np = 0;
  sc_chain *c = mk_problem(&x, &y, &lab, &np);
  float *p = malloc(np * sizeof *p), *g0 = malloc(np * sizeof *g0), *g = malloc(np * sizeof *g);
  assert_true(p && g0 && g);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
  float l0 = 0, l = 0;
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, NS, &l0, g0, NULL, ws));
  static const int SEQ[5] = {2, 1, 3, 3, 2};
  for (int i = 0; i < 5; i++) {
    SC_OK_OR_FAIL(sc_workspace_set_threads(ws, SEQ[i]));
    for (int rep = 0; rep < 2; rep++) {
      memset(g, 0xFF, np * sizeof *g); /* NaN pattern: must be overwritten */
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, NS, &l, g, NULL, ws));
      assert_memory_equal(g0, g, np * sizeof *g);
      assert_memory_equal(&l0, &l, sizeof l);
    }
  }
  assert_true(isfinite(l0) && l0 > 0);
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_threads(ws, 0));
  SC_EXPECT(SC_ERR_ARG, sc_workspace_set_threads(ws, -2));
  sc_workspace_destroy(ws);
  free(p), free(g0), free(g);
  sc_chain_destroy(c);
  free(x), free(y), free(lab);
}

/* The pool's workers are pinned (worker k to the k-th allowed CPU, cyclically) and the calling
 * thread is not; when the scheduler has put the caller on a worker's CPU, a run moves it to
 * the first allowed CPU, which no worker holds, and leaves its affinity as it was. Placed on
 * worker 1's CPU by hand (affinity narrowed to that CPU, then restored), the caller is on the
 * first CPU after one sc_valgrad (in at least 60 % of 20 tries), with its affinity unchanged.
 * With SC_PIN=0 nothing moves it (in fewer than half).
 * Linux with at least 2 allowed CPUs only. */
static void test_caller_moved_home(void **state) {
  (void)state;
#if defined(__linux__) && defined(CPU_SET)
  cpu_set_t all, one, after;
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  int cpus[2], nc = 0;
  for (int k = 0; k < CPU_SETSIZE && nc < 2; k++)
    if (CPU_ISSET(k, &all)) cpus[nc++] = k;
  if (nc < 2 || sched_getcpu() < 0) {
    print_message("  fewer than 2 CPUs allowed (or no sched_getcpu): skipped\n");
    skip();
  }
  float *x, *y;
  int32_t *lab;
  size_t np = 0;
  sc_chain *c = mk_problem(&x, &y, &lab, &np);
  float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), l = 0;
  assert_true(p && g);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
  for (int pin = 1; pin >= 0; pin--) {
    setenv("SC_PIN", pin ? "1" : "0", 1); /* read by sc_workspace_set_threads */
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
    SC_OK_OR_FAIL(sc_workspace_set_threads(ws, 2));
    int home = 0, runs = 0;
    for (int tries = 0; tries < 40 && runs < 20; tries++) {
      /* a move at most once a millisecond (sc__pool_nudge): 2 ms apart */
      struct timespec ms2 = {0, 2000000};
      nanosleep(&ms2, NULL);
      CPU_ZERO(&one);
      CPU_SET(cpus[1], &one);
      assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0); /* onto worker 1's CPU */
      assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0); /* the mask as it was */
      if (sched_getcpu() != cpus[1]) continue; /* the scheduler moved it already: again */
      runs++;
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, p, x, lab, NS, &l, g, NULL, ws));
      home += sched_getcpu() == cpus[0];
      assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
      assert_true(CPU_EQUAL(&after, &all)); /* the caller's affinity is left as it was */
    }
    print_message("  SC_PIN=%d: the caller on CPU %d before a valgrad, on CPU %d after it in %d of "
                  "%d runs\n",
                  pin, cpus[1], cpus[0], home, runs);
    assert_true(runs >= 10);
    /* (on an idle machine 20 of 20 and 0 of 20, 18 of 20 once in a CI run beside other
     * work: other processes on the CPUs can move the caller between the two reads of
     * sched_getcpu) */
    if (pin)
      assert_true(10 * home >= 6 * runs);
    else /* nothing but the load balancer moves it */
      assert_true(2 * home < runs);
    sc_workspace_destroy(ws);
  }
  unsetenv("SC_PIN");
  free(p), free(g);
  sc_chain_destroy(c);
  free(x), free(y), free(lab);
#else
  skip();
#endif
}

int main(void) {
  unsetenv("SC_ISA"); /* the default (widest) kernel path */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_minibatch_squared),
      cmocka_unit_test(test_train_minibatch_odd_batch),
      cmocka_unit_test(test_train_fullbatch),
      cmocka_unit_test(test_train_crossentropy),
      cmocka_unit_test(test_train_wide_adam),
      cmocka_unit_test(test_train_tiles),
      cmocka_unit_test(test_train_threads_used),
      cmocka_unit_test(test_workspace_threads),
      cmocka_unit_test(test_set_threads_changes),
      cmocka_unit_test(test_caller_moved_home),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
