/* tests/test_dist.c — data-parallel sc_train (sc_dist) without MPI: R "ranks" are R threads of
 * this process, each running sc_train on its own copy of p, exchanging through an in-process
 * allgather (a shared buffer and a barrier). Checked:
 *   - the final p of every rank is bitwise the p of sc_train in one process (same seed and
 *     batch size), for 1, 2, 3, 4 and 7 ranks (a 500-sample batch of these nets has 4
 *     slices, a 130-sample one 2: some ranks compute nothing), with 1 and 2 threads per rank,
 *     shuffled minibatches, a short last minibatch and dropout, for a dense net and a small
 *     convnet;
 *   - the losses seen by the progress callback are the same on every rank and the same as in
 *     one process, step by step;
 *   - an exchange that fails makes sc_train return SC_ERR_CALLBACK naming the step and rank;
 *   - bad sc_dist fields are argument errors naming the field.
 * tests/test_mpi.c checks the same through MPI with several processes. */
#include "testutil.h"

#include <pthread.h>

enum { MAX_RANKS = 8, N_SAMPLES = 1130, MAX_STEPS = 64 };

typedef struct inproc {
  int ranks;
  pthread_barrier_t bar;
  unsigned char *shared;
  size_t cap;
  int fail_at; /* 1-based call number at which every rank's exchange fails (0: never) */
  int calls[MAX_RANKS];
  int max_senders; /* the most ranks that sent slices in one exchange */
} inproc;

typedef struct rank_ctx {
  inproc *w;
  int rank;
} rank_ctx;

static int inproc_allgather(void *ctx, const void *send, void *recv, const size_t *counts,
                            const size_t *displs) {
  rank_ctx *rc = ctx;
  inproc *w = rc->w;
  size_t total = displs[w->ranks - 1] + counts[w->ranks - 1];
  if (total > w->cap) return 99;
  if (w->fail_at && ++w->calls[rc->rank] == w->fail_at) return 5;
  memcpy(w->shared + displs[rc->rank], send, counts[rc->rank]);
  if (rc->rank == 0) {
    int senders = 0;
    for (int r = 0; r < w->ranks; r++) senders += counts[r] > 0;
    if (senders > w->max_senders) w->max_senders = senders;
  }
  pthread_barrier_wait(&w->bar);
  memcpy(recv, w->shared, total);
  pthread_barrier_wait(&w->bar);
  return 0;
}

typedef struct job {
  const sc_chain *c;
  sc_loss loss;
  const sc_data *data;
  sc_train_opts opts;
  sc_dist dist;
  rank_ctx rc;
  float *p;
  double *p64; /* set: sc_train_f64 on data64 */
  const sc_data_f64 *data64;
  sc_status st;
  char msg[512];
  double losses[MAX_STEPS];
} job;

static int record_loss(const sc_progress *pr, void *user) {
  job *j = user;
  if (pr->step <= MAX_STEPS) j->losses[pr->step - 1] = pr->loss;
  return 0;
}

static void *run_rank(void *arg) {
  job *j = arg;
  if (j->p64)
    j->st = sc_train_f64(j->c, j->loss, j->p64, j->data64, &j->opts, NULL);
  else
    j->st = sc_train(j->c, j->loss, j->p, j->data, &j->opts, NULL);
  snprintf(j->msg, sizeof j->msg, "%s", sc_last_error());
  return NULL;
}

/* trains from p0 with R in-process ranks (R = 0: plain sc_train); the results in jobs[];
 * returns the most ranks that contributed slices to one exchange */
static int train_ranks(const sc_chain *c, sc_loss loss, const sc_data *data, const float *p0,
                       const sc_data_f64 *data64, const double *p064, size_t np, int R, int threads,
                       int fail_at, job *jobs) {
  inproc w;
  memset(&w, 0, sizeof w);
  w.ranks = R ? R : 1;
  w.cap = 1 << 24;
  w.shared = malloc(w.cap);
  w.fail_at = fail_at;
  assert_non_null(w.shared);
  assert_int_equal(pthread_barrier_init(&w.bar, NULL, (unsigned)w.ranks), 0);
  pthread_t th[MAX_RANKS];
  for (int r = 0; r < w.ranks; r++) {
    job *j = &jobs[r];
    memset(j, 0, sizeof *j);
    j->c = c;
    j->loss = loss;
    if (data64) { /* sc_train_f64 */
      j->data64 = data64;
      j->p64 = malloc(np * sizeof *j->p64);
      assert_non_null(j->p64);
      memcpy(j->p64, p064, np * sizeof *p064);
    } else {
      j->data = data;
      j->p = malloc(np * sizeof *j->p);
      assert_non_null(j->p);
      memcpy(j->p, p0, np * sizeof *p0);
    }
    j->opts = sc_train_defaults();
    j->opts.epochs = 3;
    j->opts.batch_size = 500; /* 1130 samples: minibatches of 500, 500, 130 */
    j->opts.seed = 7;
    j->opts.threads = threads;
    j->opts.progress_every = 1;
    j->opts.progress = record_loss;
    j->opts.user = j;
    j->rc.w = &w;
    j->rc.rank = r;
    j->dist = (sc_dist){r, R, inproc_allgather, &j->rc};
    if (R) j->opts.dist = &j->dist;
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, j), 0);
  }
  for (int r = 0; r < w.ranks; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&w.bar);
  free(w.shared);
  return w.max_senders;
}

static void check_net(const sc_layer *L, size_t nl, size_t C, size_t H, size_t W, sc_loss loss) {
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, C, H, W, L, nl));
  size_t np = 0, in = 0, out = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
  SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
  float *x = malloc(N_SAMPLES * in * sizeof *x), *t = malloc(N_SAMPLES * out * sizeof *t);
  int32_t *lab = malloc(N_SAMPLES * sizeof *lab);
  float *p0 = malloc(np * sizeof *p0);
  assert_true(x && t && lab && p0);
  tu_fill_f32(x, N_SAMPLES * in, 3, 1.0);
  tu_fill_f32(t, N_SAMPLES * out, 4, 1.0);
  for (size_t k = 0; k < N_SAMPLES; k++) lab[k] = (int32_t)((k * 7) % out);
  SC_OK_OR_FAIL(sc_params_init(c, p0, np, 11));
  sc_data data = {x, loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)lab : (const void *)t,
                  N_SAMPLES};
  job ref[1];
  train_ranks(c, loss, &data, p0, NULL, NULL, np, 0, 1, 0, ref);
  if (ref[0].st != SC_OK) fail_msg("single process: %s", ref[0].msg);
  assert_true(memcmp(ref[0].p, p0, np * sizeof *p0) != 0); /* it trained */
  static const int RANKS[6] = {1, 2, 3, 4, 7, 2};
  for (int k = 0; k < 6; k++) {
    int R = RANKS[k], threads = k == 5 ? 2 : 1;
    job jobs[MAX_RANKS];
    int senders = train_ranks(c, loss, &data, p0, NULL, NULL, np, R, threads, 0, jobs);
    /* a 500-sample batch has 4 slices or more: with 4 ranks or more, 4 ranks send */
    assert_true(senders == (R < 4 ? R : 4) || (R > 4 && senders > 4));
    for (int r = 0; r < R; r++) {
      if (jobs[r].st != SC_OK) fail_msg("%d ranks, rank %d: %s", R, r, jobs[r].msg);
      if (memcmp(jobs[r].p, ref[0].p, np * sizeof *p0) != 0) {
        size_t d = 0;
        while (jobs[r].p[d] == ref[0].p[d]) d++;
        fail_msg("%d ranks x %d threads, rank %d: p[%zu] = %.9g, one process %.9g", R, threads, r,
                 d, jobs[r].p[d], ref[0].p[d]);
      }
      assert_memory_equal(jobs[r].losses, ref[0].losses, sizeof ref[0].losses);
      free(jobs[r].p);
    }
  }
  free(ref[0].p);
  free(x), free(t), free(lab), free(p0);
  sc_chain_destroy(c);
}

static void test_dense_bitwise(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(16, SC_TANH), sc_dropout(0.2), sc_dense(8, SC_GELU),
                  sc_dense(3, SC_IDENTITY)};
  check_net(L, 4, 5, 1, 1, SC_LOSS_SQUARED);
}

static void test_convnet_bitwise(void **state) {
  (void)state;
  sc_layer L[] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                  sc_dense(10, SC_RELU), sc_dense(4, SC_IDENTITY)};
  check_net(L, 5, 1, 10, 10, SC_LOSS_LOGIT_CROSSENTROPY);
}

static void test_exchange_failure_and_args(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(8, SC_TANH), sc_dense(2, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 3, L, 2));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  float x[N_SAMPLES * 3], t[N_SAMPLES * 2], *p0 = malloc(np * sizeof *p0);
  tu_fill_f32(x, N_SAMPLES * 3, 1, 1.0);
  tu_fill_f32(t, N_SAMPLES * 2, 2, 1.0);
  SC_OK_OR_FAIL(sc_params_init(c, p0, np, 1));
  sc_data data = {x, t, N_SAMPLES};
  job jobs[MAX_RANKS];
  train_ranks(c, SC_LOSS_SQUARED, &data, p0, NULL, NULL, np, 3, 1, 4, jobs);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(jobs[r].st, SC_ERR_CALLBACK);
    if (!strstr(jobs[r].msg, "step 4") || !strstr(jobs[r].msg, "returned 5"))
      fail_msg("rank %d: %s", r, jobs[r].msg);
    free(jobs[r].p);
  }
  /* bad fields */
  sc_train_opts o = sc_train_defaults();
  sc_dist d = {0, 0, inproc_allgather, NULL};
  o.dist = &d;
  float *p = malloc(np * sizeof *p);
  memcpy(p, p0, np * sizeof *p);
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, p, &data, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "dist->ranks"));
  d.ranks = 2;
  d.rank = 2;
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, p, &data, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "dist->rank"));
  d.rank = 0;
  d.allgather = NULL;
  SC_EXPECT(SC_ERR_NULL, sc_train(c, SC_LOSS_SQUARED, p, &data, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "dist->allgather"));
  assert_memory_equal(p, p0, np * sizeof *p); /* untouched */
  free(p), free(p0);
  sc_chain_destroy(c);
}

/* sc_train_f64 over R in-process ranks equals one process, bit for bit (the slices'
 * gradients are exchanged as doubles) */
static void test_f64_bitwise(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(12, SC_TANH), sc_dense(7, SC_SOFTPLUS), sc_dense(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 4, L, 3));
  size_t np = 0;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  double *x = malloc(N_SAMPLES * 4 * sizeof *x), *t = malloc(N_SAMPLES * 3 * sizeof *t);
  double *p0 = malloc(np * sizeof *p0);
  assert_true(x && t && p0);
  tu_fill_f64(x, N_SAMPLES * 4, 5, 1.0);
  tu_fill_f64(t, N_SAMPLES * 3, 6, 1.0);
  SC_OK_OR_FAIL(sc_params_init_f64(c, p0, np, 12));
  sc_data_f64 d = {x, t, N_SAMPLES};
  double *ref = NULL;
  static const int RANKS[4] = {0, 1, 2, 3};
  for (int k = 0; k < 4; k++) {
    int R = RANKS[k];
    job jobs[MAX_RANKS];
    train_ranks(c, SC_LOSS_SQUARED, NULL, NULL, &d, p0, np, R, 1, 0, jobs);
    for (int r = 0; r < (R ? R : 1); r++) {
      if (jobs[r].st != SC_OK) fail_msg("%d ranks, rank %d: %s", R, r, jobs[r].msg);
      if (!ref) {
        ref = jobs[r].p64;
        assert_true(memcmp(ref, p0, np * sizeof *p0) != 0);
        continue;
      }
      if (memcmp(jobs[r].p64, ref, np * sizeof *ref) != 0)
        fail_msg("%d ranks, rank %d: sc_train_f64 differs from one process", R, r);
      free(jobs[r].p64);
    }
  }
  free(ref);
  free(x), free(t), free(p0);
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense_bitwise),
      cmocka_unit_test(test_convnet_bitwise),
      cmocka_unit_test(test_exchange_failure_and_args),
      cmocka_unit_test(test_f64_bitwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
