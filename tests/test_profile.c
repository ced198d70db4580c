/* tests/test_profile.c — the per-layer profiler: sc_workspace_profile,
 * sc_workspace_profile_read, sc_profile_table and sc_train's opts.profile.
 *
 *   - every weighted layer gets forward and backward time, and exactly the flop count of
 *     its matrix work times the samples it saw (forward 2 in out; backward twice that above
 *     layer 0, once at layer 0), on every kernel path, 1 and 2 threads, a batch of many
 *     slices (each slice counts in a set of its own; the sets are summed);
 *   - profiling changes no bit of the results;
 *   - stopping keeps the counters, starting again zeroes them;
 *   - sc_train fills the optimizer row; too few rows, a never-started workspace, NULLs are
 *     errors; the table names the layers and is sized like sc_chain_summary's.
 */
#include "testutil.h"

enum { NI = 6, NO = 3, B = 1070 }; /* many slices: the per-slice counters are summed */

static void check_rows(const char *isa, const sc_layer_profile *r, size_t calls) {
  /* dense 6 -> 20 tanh -> 9 relu -> 3 */
  const double mac[3] = {6 * 20, 20 * 9, 9 * 3};
  for (int l = 0; l < 3; l++) {
    double f = 2 * mac[l] * B * (double)calls, b = f * (l > 0 ? 2 : 1);
    if (r[l].fwd_flop != f || r[l].bwd_flop != b)
      fail_msg("%s layer %d: flop %g / %g, expected %g / %g", isa, l, r[l].fwd_flop, r[l].bwd_flop,
               f, b);
    if (!(r[l].fwd_seconds > 0) || !(r[l].bwd_seconds > 0))
      fail_msg("%s layer %d: no time (%g, %g)", isa, l, r[l].fwd_seconds, r[l].bwd_seconds);
  }
  assert_true(r[3].fwd_flop == 0 && r[3].bwd_flop == 0);
  assert_true(r[3].fwd_seconds + r[3].bwd_seconds > 0); /* gather, loss, folds */
}

static void test_profile_counts(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  const char *saved = getenv("SC_ISA");
  char keep[32] = {0};
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  for (int is = 0; is < nisa; is++)
    for (int th = 1; th <= 2; th++) {
      setenv("SC_ISA", isas[is], 1);
      sc_layer L[] = {sc_dense(20, SC_TANH), sc_dense(9, SC_RELU), sc_dense(NO, SC_IDENTITY)};
      sc_chain *c = NULL;
      SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 3));
      size_t np;
      sc_chain_nparams(c, &np);
      float *p = malloc(np * sizeof *p), *g0 = malloc(np * sizeof *g0),
            *g1 = malloc(np * sizeof *g1), x[B * NI], t[B * NO], l0, l1;
      tu_fill_f32(x, B * NI, 1, 1.0);
      tu_fill_f32(t, B * NO, 2, 1.0);
      SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
      sc_workspace *ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      SC_OK_OR_FAIL(sc_workspace_set_threads(ws, th));
      sc_layer_profile r[5];
      SC_EXPECT(SC_ERR_ARG, sc_workspace_profile_read(ws, r, 5)); /* never started */
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &l0, g0, NULL, ws));
      SC_OK_OR_FAIL(sc_workspace_profile(ws, 1));
      for (int k = 0; k < 3; k++)
        SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &l1, g1, NULL, ws));
      assert_memory_equal(g0, g1, np * sizeof *g0); /* no bit changed */
      assert_memory_equal(&l0, &l1, sizeof l0);
      SC_OK_OR_FAIL(sc_workspace_profile_read(ws, r, 5));
      check_rows(isas[is], r, 3);
      assert_true(r[4].fwd_seconds == 0); /* later rows zeroed */
      /* stopped: the counters stay as they are */
      SC_OK_OR_FAIL(sc_workspace_profile(ws, 0));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &l1, g1, NULL, ws));
      sc_layer_profile r2[4];
      SC_OK_OR_FAIL(sc_workspace_profile_read(ws, r2, 4));
      assert_memory_equal(r, r2, sizeof r2);
      /* started again: zeroed, then one call */
      SC_OK_OR_FAIL(sc_workspace_profile(ws, 1));
      SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &l1, g1, NULL, ws));
      SC_OK_OR_FAIL(sc_workspace_profile_read(ws, r, 4));
      check_rows(isas[is], r, 1);
      /* a forward call counts forward work only */
      SC_OK_OR_FAIL(sc_workspace_profile(ws, 1));
      float y[B * NO];
      SC_OK_OR_FAIL(sc_forward(c, p, x, B, y, ws));
      SC_OK_OR_FAIL(sc_workspace_profile_read(ws, r, 4));
      assert_true(r[0].fwd_flop == 2.0 * 6 * 20 * B && r[0].bwd_flop == 0);
      /* errors */
      SC_EXPECT(SC_ERR_SHAPE, sc_workspace_profile_read(ws, r, 3));
      SC_EXPECT(SC_ERR_NULL, sc_workspace_profile_read(NULL, r, 4));
      SC_EXPECT(SC_ERR_NULL, sc_workspace_profile_read(ws, NULL, 4));
      SC_EXPECT(SC_ERR_NULL, sc_workspace_profile(NULL, 1));
      SC_EXPECT(SC_ERR_ARG, sc_workspace_profile(ws, 2));
      sc_workspace_destroy(ws);
      free(p);
      free(g0);
      free(g1);
      sc_chain_destroy(c);
    }
  if (saved)
    setenv("SC_ISA", keep, 1);
  else
    unsetenv("SC_ISA");
}

static void test_profile_train_and_table(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(20, SC_TANH), sc_dense(9, SC_RELU), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 3));
  size_t np;
  sc_chain_nparams(c, &np);
  float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q), x[B * NI], t[B * NO];
  tu_fill_f32(x, B * NI, 1, 1.0);
  tu_fill_f32(t, B * NO, 2, 1.0);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 3));
  memcpy(q, p, np * sizeof *q);
  sc_data d = {x, t, B};
  sc_train_opts o = sc_train_defaults();
  o.epochs = 5;
  o.batch_size = 32; /* 3 steps per epoch */
  o.threads = 2;
  SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, q, &d, &o, NULL));
  sc_layer_profile r[6];
  o.profile = r;
  o.profile_rows = 4;
  SC_EXPECT(SC_ERR_SHAPE, sc_train(c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  o.profile_rows = 5;
  SC_OK_OR_FAIL(sc_train(c, SC_LOSS_SQUARED, p, &d, &o, NULL));
  assert_memory_equal(p, q, np * sizeof *p); /* profiled training: the same parameters */
  for (int l = 0; l < 3; l++) {
    double f = 2.0 * (l == 0 ? 6 * 20 : l == 1 ? 20 * 9 : 9 * 3) * B * 5;
    assert_true(r[l].fwd_flop == f && r[l].bwd_flop == f * (l > 0 ? 2 : 1));
  }
  assert_true(r[4].fwd_seconds > 0); /* the optimizer row */
  size_t need = 0;
  SC_OK_OR_FAIL(sc_profile_table(c, r, 5, NULL, 0, &need));
  char *buf = malloc(need);
  SC_OK_OR_FAIL(sc_profile_table(c, r, 5, buf, need, NULL));
  assert_int_equal(strlen(buf) + 1, need);
  assert_non_null(strstr(buf, "dense tanh"));
  assert_non_null(strstr(buf, "GFLOP/s"));
  assert_non_null(strstr(buf, "(optimizer, guard)"));
  char small[40];
  SC_EXPECT(SC_ERR_NOMEM, sc_profile_table(c, r, 5, small, sizeof small, NULL));
  assert_true(strlen(small) < sizeof small);
  SC_EXPECT(SC_ERR_SHAPE, sc_profile_table(c, r, 3, buf, need, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_profile_table(NULL, r, 5, buf, need, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_profile_table(c, NULL, 5, buf, need, NULL));
  free(buf);
  free(p);
  free(q);
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_profile_counts),
      cmocka_unit_test(test_profile_train_and_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
