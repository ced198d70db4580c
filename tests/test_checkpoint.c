/* tests/test_checkpoint.c — sc_train's NaN guard, gradient clipping, and checkpoint / resume
 * .
 *
 *   - guard: a run made to blow up (SGD, lr 1e30) stops with SC_ERR_NONFINITE naming the
 *     step, epoch and minibatch, and p is bitwise the parameters after the last good step
 *     (as the progress callback saw them);
 *   - clipping: one SGD step with clip_norm moves p by exactly -lr * g * clip / (|g| + 1e-6),
 *     g from sc_valgrad, bit for bit; a norm below clip_norm is left alone;
 *   - resume: runs stopped (progress callback) after every step of a shuffled, dropout,
 *     minibatch run with a short last batch, under ADAM, AdamW and SGD with momentum, then
 *     resumed with another thread count, end bitwise equal to the uninterrupted run; a
 *     finished run resumes to itself; a missing file starts afresh; more epochs continue;
 *   - cosine schedule: the rates, bit for bit, and resumed runs under it;
 *   - mismatched settings are SC_ERR_ARG naming the difference; a checkpoint of another
 *     chain SC_ERR_SHAPE;
 *   - damaged files (truncated at every offset, every byte flipped) are refused with
 *     SC_ERR_FORMAT and leave p untouched; sc_checkpoint_info reports the state.
 * The kill -9 test of the trainer binaries is in test_toy.c.
 */
#include "testutil.h"

#include <errno.h>

enum { NI = 5, NO = 3, NS = 45, BS = 8 };

typedef struct fixture {
  sc_chain *c;
  size_t np;
  float x[NS * NI], t[NS * NO];
  float *p0;
} fixture;

static void fx_make(fixture *f) {
  sc_layer L[] = {sc_dense(12, SC_TANH), sc_dropout(0.2), sc_dense(NO, SC_IDENTITY)};
  f->c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&f->c, NI, L, 3));
  sc_chain_nparams(f->c, &f->np);
  f->p0 = malloc(f->np * sizeof *f->p0);
  SC_OK_OR_FAIL(sc_params_init(f->c, f->p0, f->np, 7));
  tu_fill_f32(f->x, NS * NI, 11, 1.0);
  tu_fill_f32(f->t, NS * NO, 12, 1.0);
}
static void fx_free(fixture *f) {
  free(f->p0);
  sc_chain_destroy(f->c);
}

typedef struct stopper {
  size_t at;   /* stop after this step (0: never) */
  float *last; /* copy of p after every step */
  size_t np;
} stopper;
static int on_step(const sc_progress *pr, void *user) {
  stopper *s = user;
  if (s->last) memcpy(s->last, pr->p, s->np * sizeof *s->last);
  return s->at && pr->step == s->at;
}

static sc_train_opts base_opts(sc_optim o, int threads) {
  sc_train_opts opts = sc_train_defaults();
  opts.optim = o;
  opts.epochs = 4;
  opts.batch_size = BS; /* 45 samples: 6 steps per epoch, the last one of 5 samples */
  opts.seed = 99;
  opts.threads = threads;
  return opts;
}

/* the guard with ADAM on a chain of 40,200 parameters (its step, backup and scan run block by
 * block of 2,048, on 1 and 2 threads): weight W[20][0] (p[4000], in the second block) at 3e38
 * on an input that is always 0 leaves the loss finite, but its L2 term (weight_decay 10) makes
 * its gradient, then the update, non-finite: the message names p[4000] and p comes back whole */
static void test_guard_adam_wide(void **state) {
  (void)state;
  enum { IN = 200, N = 64 };
  sc_layer L[] = {sc_dense(200, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, IN, L, 1));
  size_t np;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &np));
  assert_int_equal(np, 40200);
  float *x = malloc(N * IN * sizeof *x), *t = malloc(N * 200 * sizeof *t);
  float *p = malloc(np * sizeof *p), *p0 = malloc(np * sizeof *p0);
  assert_true(x && t && p && p0);
  for (size_t k = 0; k < N * IN; k++) x[k] = (float)((k * 37) % 101) / 101.0f - 0.5f;
  for (size_t b = 0; b < N; b++) x[b * IN] = 0.0f;
  for (size_t k = 0; k < N * 200; k++) t[k] = (float)((k * 53) % 97) / 97.0f;
  for (int threads = 1; threads <= 2; threads++) {
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
    p[20 * IN] = 3e38f;
    memcpy(p0, p, np * sizeof *p);
    sc_data d = {x, t, N};
    sc_optim adam = sc_adam(1e-3);
    adam.weight_decay = 10;
    sc_train_opts o = base_opts(adam, threads);
    o.batch_size = N;
    sc_train_report rep;
    SC_EXPECT(SC_ERR_NONFINITE, sc_train(c, SC_LOSS_SQUARED, p, &d, &o, &rep));
    if (!strstr(sc_last_error(), "made p[4000]"))
      fail_msg("not the update's guard on p[4000]: '%s'", sc_last_error());
    assert_int_equal(rep.steps, 0);
    assert_memory_equal(p, p0, np * sizeof *p); /* the parameters it was given, all */
  }
  free(x), free(t), free(p), free(p0);
  sc_chain_destroy(c);
}

static void test_guard(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  float *p = malloc(f.np * sizeof *p), *last = malloc(f.np * sizeof *last);
  memcpy(p, f.p0, f.np * sizeof *p);
  memcpy(last, f.p0, f.np * sizeof *last);
  sc_data d = {f.x, f.t, NS};
  sc_train_opts o = base_opts(sc_sgd(1e30, 0), 1);
  stopper s = {0, last, f.np};
  o.progress = on_step;
  o.progress_every = 1;
  o.user = &s;
  sc_train_report rep;
  SC_EXPECT(SC_ERR_NONFINITE, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, &rep));
  const char *m = sc_last_error();
  if (!strstr(m, "step") || !strstr(m, "epoch") || !strstr(m, "minibatch"))
    fail_msg("message does not name step, epoch and minibatch: '%s'", m);
  for (size_t k = 0; k < f.np; k++) assert_true(isfinite(p[k]));
  assert_memory_equal(p, last, f.np * sizeof *p); /* the last good step's parameters */
  assert_true(rep.steps >= 1);
  char want[64];
  snprintf(want, sizeof want, "after step %zu", rep.steps);
  if (!strstr(m, want)) fail_msg("'%s' does not say '%s'", m, want);
  /* bad clip_norm values */
  o = base_opts(sc_adam(1e-3), 1);
  o.clip_norm = -1;
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  o.clip_norm = NAN;
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  free(p);
  free(last);
  fx_free(&f);
}

static void test_clip(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  sc_layer L[] = {sc_dense(12, SC_TANH), sc_dense(NO, SC_IDENTITY)}; /* no dropout here */
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 2));
  size_t np;
  sc_chain_nparams(c, &np);
  float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *q = malloc(np * sizeof *q);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
  memcpy(q, p, np * sizeof *q);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
  float lv;
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, f.x, f.t, NS, &lv, g, NULL, ws));
  double ss = 0;
  for (size_t k = 0; k < np; k++) ss += (double)g[k] * g[k];
  double norm = sqrt(ss);
  for (int pass = 0; pass < 2; pass++) {
    double clip = pass == 0 ? norm / 10 : norm * 2; /* clipped; left alone */
    sc_data d = {f.x, f.t, NS};
    sc_train_opts o = sc_train_defaults();
    o.optim = sc_sgd(0.5, 0);
    o.clip_norm = clip;
    memcpy(q, p, np * sizeof *q);
    SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
    float cf = pass == 0 ? (float)(clip / (norm + 1e-6)) : 1.0f;
    for (size_t k = 0; k < np; k++) {
      float gk = pass == 0 ? g[k] * cf : g[k];
      float want = p[k] - 0.5f * gk;
      if (memcmp(&want, &q[k], sizeof want))
        fail_msg("clip %g: p[%zu] = %.9g, expected %.9g", clip, k, (double)q[k], (double)want);
    }
  }
  free(p);
  free(g);
  free(q);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  fx_free(&f);
}

/* SC_LR_COSINE: step t of T takes lr_t = lr_min + (lr - lr_min) (1 + cos(pi t / T)) / 2,
 * checked bit for bit against sc_valgrad + the SGD rule by hand (full batch, 3 epochs) */
static void test_cosine(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  sc_layer L[] = {sc_dense(12, SC_TANH), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 2));
  size_t np;
  sc_chain_nparams(c, &np);
  float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g), *q = malloc(np * sizeof *q);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
  memcpy(q, p, np * sizeof *q);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, NS));
  sc_data d = {f.x, f.t, NS};
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_sgd(0.1, 0);
  o.epochs = 3;
  o.lr_schedule = SC_LR_COSINE;
  o.lr_min = 0.01;
  SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
  for (int t = 0; t < 3; t++) {
    float lv;
    SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, f.x, f.t, NS, &lv, g, NULL, ws));
    double lr = 0.01 + (0.1 - 0.01) * 0.5 * (1 + cos(3.14159265358979323846 * t / 3.0));
    float lf = (float)lr;
    for (size_t k = 0; k < np; k++) p[k] -= lf * g[k];
  }
  assert_memory_equal(p, q, np * sizeof *p);
  o.lr_min = 0.2; /* above lr */
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
  o.lr_min = -1;
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
  o.lr_min = 0;
  o.lr_schedule = (sc_lr_schedule)7;
  SC_EXPECT(SC_ERR_ARG, sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
  free(p);
  free(g);
  free(q);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  fx_free(&f);
}

static void test_resume_bitwise(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  sc_data d = {f.x, f.t, NS};
  char path[512];
  tu_tmp_path(path, sizeof path, "checkpoint", "run.sck");
  const sc_optim opts3[3] = {sc_adam(3e-3), sc_adamw(3e-3, 0.1), sc_sgd(0.05, 0.9)};
  float *ref = malloc(f.np * sizeof *ref), *p = malloc(f.np * sizeof *p);
  int resumed = 0;
  for (int oi = 0; oi < 3; oi++) {
    memcpy(ref, f.p0, f.np * sizeof *ref);
    sc_train_opts o = base_opts(opts3[oi], 1);
    o.clip_norm = oi == 2 ? 0.5 : 0; /* clipping is part of the state that must match */
    if (oi == 1) o.lr_schedule = SC_LR_COSINE, o.lr_min = 1e-4;
    SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, ref, &d, &o, NULL));
    size_t total = 4 * 6;
    for (size_t stop = 1; stop < total; stop += (oi == 0 ? 1 : 5)) {
      remove(path);
      memcpy(p, f.p0, f.np * sizeof *p);
      sc_train_opts a = base_opts(opts3[oi], 2);
      a.clip_norm = o.clip_norm;
      a.lr_schedule = o.lr_schedule, a.lr_min = o.lr_min;
      stopper s = {stop, NULL, f.np};
      a.progress = on_step;
      a.progress_every = 1;
      a.user = &s;
      a.checkpoint = path;
      a.checkpoint_every = 4; /* the stop writes one too, off this grid */
      SC_EXPECT(SC_ERR_STOPPED, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &a, NULL));
      sc_checkpoint_state info;
      SC_OK_OR_FAIL(sc_checkpoint_info(f.c, path, &info));
      assert_int_equal(info.step, stop);
      assert_int_equal(info.epoch * 6 + info.epoch_step, stop);
      assert_int_equal(info.batch_size, BS);
      /* resume in a fresh process image: p starts from garbage, another thread count */
      for (size_t k = 0; k < f.np; k++) p[k] = 1.0f;
      sc_train_opts b = base_opts(opts3[oi], oi == 1 ? 3 : 1);
      b.clip_norm = o.clip_norm;
      b.lr_schedule = o.lr_schedule, b.lr_min = o.lr_min;
      b.checkpoint = path;
      b.resume = 1;
      sc_train_report rep;
      SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, &rep));
      assert_int_equal(rep.resumed_step, stop);
      assert_int_equal(rep.steps, total);
      if (memcmp(p, ref, f.np * sizeof *p))
        fail_msg("optimizer %d, stopped after step %zu: the resumed run differs", oi, stop);
      resumed++;
      /* the finished run's checkpoint resumes to itself */
      for (size_t k = 0; k < f.np; k++) p[k] = 2.0f;
      SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, &rep));
      assert_int_equal(rep.resumed_step, total);
      assert_memory_equal(p, ref, f.np * sizeof *p);
    }
  }
  /* raising the epochs continues the run: 4 + 2 epochs equal 6 epochs at once */
  {
    remove(path);
    float *six = malloc(f.np * sizeof *six);
    memcpy(six, f.p0, f.np * sizeof *six);
    sc_train_opts o = base_opts(sc_adam(3e-3), 1);
    o.epochs = 6;
    SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, six, &d, &o, NULL));
    memcpy(p, f.p0, f.np * sizeof *p);
    o.epochs = 4;
    o.checkpoint = path; /* written at the end only */
    o.resume = 1;        /* the file is missing: starts from the beginning */
    sc_train_report rep;
    SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, &rep));
    assert_int_equal(rep.resumed_step, 0);
    o.epochs = 6;
    SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, &rep));
    assert_int_equal(rep.resumed_step, 24);
    assert_memory_equal(p, six, f.np * sizeof *p);
    /* fewer epochs than the checkpoint has done */
    o.epochs = 2;
    SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, NULL));
    free(six);
  }
  print_message("      %d stopped runs resumed bit for bit\n", resumed);
  remove(path);
  free(ref);
  free(p);
  fx_free(&f);
}

static void test_mismatch_and_args(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  sc_data d = {f.x, f.t, NS};
  char path[512];
  tu_tmp_path(path, sizeof path, "checkpoint", "mm.sck");
  float *p = malloc(f.np * sizeof *p);
  memcpy(p, f.p0, f.np * sizeof *p);
  sc_train_opts o = base_opts(sc_adam(1e-3), 1);
  o.checkpoint = path;
  SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  memcpy(p, f.p0, f.np * sizeof *p);
  o.resume = 1;
  struct {
    const char *needle;
    sc_train_opts o;
  } cases[7];
  for (int i = 0; i < 7; i++) cases[i].o = o;
  cases[6].needle = "lr_schedule", cases[6].o.lr_schedule = SC_LR_COSINE;
  cases[0].needle = "batch size", cases[0].o.batch_size = 9;
  cases[1].needle = "seed", cases[1].o.seed = 98;
  cases[2].needle = "lr", cases[2].o.optim.lr = 2e-3;
  cases[3].needle = "optimizer", cases[3].o.optim = sc_sgd(1e-3, 0);
  cases[4].needle = "clip_norm", cases[4].o.clip_norm = 1;
  cases[5].needle = "shuffling", cases[5].o.shuffle = 0;
  for (int i = 0; i < 7; i++) {
    SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &cases[i].o, NULL));
    if (!strstr(sc_last_error(), cases[i].needle))
      fail_msg("'%s' does not name %s", sc_last_error(), cases[i].needle);
    assert_memory_equal(p, f.p0, f.np * sizeof *p); /* untouched */
  }
  sc_data d2 = {f.x, f.t, NS - 1};
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d2, &o, NULL));
  assert_non_null(strstr(sc_last_error(), "sample count"));
  /* another chain */
  sc_layer L[] = {sc_dense(12, SC_RELU), sc_dropout(0.2), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c2 = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c2, NI, L, 3));
  SC_EXPECT(SC_ERR_SHAPE, sc_train(c2, SC_LOSS_SQUARED, p, &d, &o, NULL));
  sc_checkpoint_state info;
  SC_EXPECT(SC_ERR_SHAPE, sc_checkpoint_info(c2, path, &info));
  sc_chain_destroy(c2);
  /* argument errors */
  sc_train_opts b = base_opts(sc_adam(1e-3), 1);
  b.resume = 1;
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, NULL));
  b.resume = 0;
  b.checkpoint_every = 3;
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, NULL));
  b.checkpoint = "";
  SC_EXPECT(SC_ERR_ARG, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_checkpoint_info(NULL, path, &info));
  SC_EXPECT(SC_ERR_NULL, sc_checkpoint_info(f.c, NULL, &info));
  SC_EXPECT(SC_ERR_NULL, sc_checkpoint_info(f.c, path, NULL));
  /* a parameter file is not a checkpoint, a directory is an I/O error */
  char other[512];
  tu_tmp_path(other, sizeof other, "checkpoint", "params.scp");
  SC_OK_OR_FAIL(sc_params_save(f.c, f.p0, f.np, other));
  SC_EXPECT(SC_ERR_FORMAT, sc_checkpoint_info(f.c, other, &info));
  SC_EXPECT(SC_ERR_IO, sc_checkpoint_info(f.c, "/", &info));
  /* an unwritable checkpoint path stops training with the I/O error */
  b = base_opts(sc_adam(1e-3), 1);
  b.checkpoint = "/nonexistent-dir-sc/ck.sck";
  b.checkpoint_every = 2;
  memcpy(p, f.p0, f.np * sizeof *p);
  SC_EXPECT(SC_ERR_IO, sc_train(f.c, SC_LOSS_SQUARED, p, &d, &b, NULL));
  remove(other);
  remove(path);
  free(p);
  fx_free(&f);
}

static void test_damaged(void **state) {
  (void)state;
  fixture f;
  fx_make(&f);
  sc_data d = {f.x, f.t, NS};
  char path[512], bad[512];
  tu_tmp_path(path, sizeof path, "checkpoint", "good.sck");
  tu_tmp_path(bad, sizeof bad, "checkpoint", "bad.sck");
  float *p = malloc(f.np * sizeof *p), *q = malloc(f.np * sizeof *q);
  memcpy(p, f.p0, f.np * sizeof *p);
  sc_train_opts o = base_opts(sc_adam(1e-3), 1);
  o.epochs = 1;
  o.checkpoint = path;
  SC_OK_OR_FAIL(sc_train(f.c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  size_t len;
  unsigned char *b = tu_read_all(path, &len);
  assert_int_equal(len, 224 + 12 * f.np + 8 * NS + 8);
  o.resume = 1;
  o.epochs = 2;
  sc_checkpoint_state info;
  int nfail = 0;
  for (size_t cut = 0; cut < len; cut++) {
    tu_write_all(bad, b, cut);
    for (size_t k = 0; k < f.np; k++) q[k] = 0.25f;
    o.checkpoint = bad;
    sc_status st = sc_train(f.c, SC_LOSS_SQUARED, q, &d, &o, NULL);
    if (st != SC_ERR_FORMAT)
      fail_msg("cut at %zu: %s (%s)", cut, sc_status_str(st), sc_last_error());
    for (size_t k = 0; k < f.np; k++) assert_true(q[k] == 0.25f);
    SC_EXPECT(SC_ERR_FORMAT, sc_checkpoint_info(f.c, bad, &info));
    nfail++;
  }
  /* every byte flipped (its lowest bit): refused, p untouched. The header fields are
   * checked by their meaning or by the checksum, the rest by the checksum */
  for (size_t at = 0; at < len; at++) {
    b[at] ^= 1;
    tu_write_all(bad, b, len);
    b[at] ^= 1;
    for (size_t k = 0; k < f.np; k++) q[k] = 0.25f;
    sc_status st = sc_train(f.c, SC_LOSS_SQUARED, q, &d, &o, NULL);
    if (st == SC_OK) fail_msg("flipped byte %zu accepted", at);
    if (st != SC_ERR_FORMAT && st != SC_ERR_ARG && st != SC_ERR_SHAPE)
      fail_msg("flipped byte %zu: %s (%s)", at, sc_status_str(st), sc_last_error());
    for (size_t k = 0; k < f.np; k++) assert_true(q[k] == 0.25f);
    nfail++;
  }
  /* extra bytes at the end */
  unsigned char *b2 = malloc(len + 1);
  memcpy(b2, b, len);
  b2[len] = 0;
  tu_write_all(bad, b2, len + 1);
  SC_EXPECT(SC_ERR_FORMAT, sc_checkpoint_info(f.c, bad, &info));
  assert_non_null(strstr(sc_last_error(), "unexpected bytes"));
  free(b2);
  print_message("      %d damaged checkpoints refused\n", nfail);
  free(b);
  remove(path);
  remove(bad);
  free(p);
  free(q);
  fx_free(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_guard),          cmocka_unit_test(test_guard_adam_wide),
      cmocka_unit_test(test_clip),           cmocka_unit_test(test_cosine),
      cmocka_unit_test(test_resume_bitwise), cmocka_unit_test(test_mismatch_and_args),
      cmocka_unit_test(test_damaged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
