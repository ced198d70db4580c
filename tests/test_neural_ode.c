/* tests/test_neural_ode.c — examples/neural_ode as a user runs it: the CVODES adjoint
 * gradient agrees with finite differences, a short training run fits the spiral, the SVG
 * is written, bad flags and failing solves give messages and non-zero exits, not crashes.
 *
 * neural_ode is built only where SUNDIALS CVODES and liblbfgs are installed (see the
 * Makefile); without it every test here is skipped.
 *
 * Measured (x86-64; the scalar, AVX2 and AVX-512 paths):
 *   --check-grad (seed 1, initial parameters, 11 parameters, central differences h = 1e-4
 *   of the whole solve at rtol 1e-12): max relative error 0.8e-6 .. 1.4e-6 (seeds 2, 3, 7:
 *   0.2e-6 .. 1.0e-6). Asserted: < 1e-4.
 *   --iters 100 --lbfgs 50 --seed 1: loss 0.0393 after ADAM, 0.0020 .. 0.0022 after L-BFGS
 *   (seeds 2..5: 0.0015 .. 0.0027); the untrained model's loss is 4.88. Asserted: ADAM
 *   loss < 0.06, final loss < 0.01 and below the ADAM loss. About 1.5 s (under ASan a few
 *   times longer).
 */
#include "testutil.h"

#include <sys/wait.h>
#include <unistd.h>

static char bin[1200];

static int setup(void **state) {
  (void)state;
  const char *b = getenv("SC_BUILD_DIR");
  snprintf(bin, sizeof bin, "%s/neural_ode", b && *b ? b : "build");
  return 0;
}

static void need_binary(void) {
  if (access(bin, X_OK) != 0) {
    printf("  %s not built (needs libsundials-dev and liblbfgs-dev): skipped\n", bin);
    skip();
  }
}

/* runs neural_ode with args (stdout and stderr together); returns the exit status, the
 * output in out (malloc'd) */
static int run(const char *args, char **out) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "'%s' %s", bin, args);
  return tu_run(cmd, out);
}

/* the value after key on the RESULT line, NAN when absent */
static double field(const char *out, const char *key) {
  const char *r = strstr(out, "RESULT ");
  if (!r) return NAN;
  const char *k = strstr(r, key);
  return k ? atof(k + strlen(key)) : NAN;
}

static void test_check_grad(void **state) {
  (void)state;
  need_binary();
  char *out = NULL;
  int rc = run("--check-grad", &out);
  if (rc != 0) fail_msg("neural_ode --check-grad exited with %d:\n%s", rc, out);
  double err = field(out, "max_rel_err=");
  assert_int_equal((int)field(out, "params="), 11);
  printf("  adjoint vs finite differences: max relative error %.3e (bound 1e-4)\n", err);
  if (!(err < 1e-4)) fail_msg("max relative error %g, expected < 1e-4:\n%s", err, out);
  free(out);
}

static void test_short_training(void **state) {
  (void)state;
  need_binary();
  char svg[512], args[1024];
  snprintf(svg, sizeof svg, "%s/test_neural_ode_%ld.svg",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
  snprintf(args, sizeof args, "--iters 100 --lbfgs 50 --seed 1 --every 10 --out '%s'", svg);
  char *out = NULL;
  int rc = run(args, &out);
  if (rc != 0) fail_msg("neural_ode %s exited with %d:\n%s", args, rc, out);
  double adam = field(out, "adam_loss="), loss = field(out, " loss="),
         secs = field(out, "seconds=");
  printf("  100 ADAM + 50 L-BFGS iterations: loss %.4e after ADAM, %.4e after L-BFGS, %.2f s\n",
         adam, loss, secs);
  assert_int_equal((int)field(out, "adam_iters="), 100);
  int lb = (int)field(out, "lbfgs_iters=");
  assert_true(lb >= 1 && lb <= 50);
  if (!(adam < 0.06)) fail_msg("loss after ADAM %g, expected < 0.06 (measured 0.0393)", adam);
  if (!(loss < 0.01)) fail_msg("final loss %g, expected < 0.01 (measured 0.0020)", loss);
  assert_true(loss < adam);
  assert_non_null(strstr(out, "adam    100  loss"));
  assert_non_null(strstr(out, "lbfgs     1  loss"));
  free(out);

  /* the SVG: complete, with the two panels' curves, the 2 x 30 data markers and legends */
  FILE *f = fopen(svg, "rb");
  if (!f) fail_msg("%s was not written", svg);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  assert_true(n > 1000 && n < sizeof buf - 1);
  assert_non_null(strstr(buf, "<svg"));
  const char *end = strstr(buf, "</svg>");
  assert_non_null(end);
  assert_null(strstr(end + 6, "<")); /* nothing after the root element */
  size_t circles = 0, lines = 0;
  for (const char *q = buf; (q = strstr(q, "<circle")); q++) circles++;
  for (const char *q = buf; (q = strstr(q, "<polyline")); q++) lines++;
  assert_true(circles >= 3 * 30); /* 30 in the phase plane, 2 x 30 against time */
  assert_true(lines >= 6);
  assert_non_null(strstr(buf, "fitted"));
  assert_non_null(strstr(buf, "data"));
  assert_null(strstr(buf, "nan"));
  assert_null(strstr(buf, "inf"));
  remove(svg);
}

static void test_untrained(void **state) {
  (void)state;
  need_binary();
  char *out = NULL;
  int rc = run("--iters 0 --lbfgs 0", &out);
  if (rc != 0) fail_msg("neural_ode --iters 0 --lbfgs 0 exited with %d:\n%s", rc, out);
  double loss = field(out, " loss=");
  assert_true(isfinite(loss) && loss > 1.0); /* measured 4.88 */
  free(out);
}

static void test_help_and_bad_flags(void **state) {
  (void)state;
  need_binary();
  char *out = NULL;
  int rc = run("--help", &out);
  if (rc != 0) fail_msg("neural_ode --help exited with %d:\n%s", rc, out);
  assert_non_null(strstr(out, "usage"));
  assert_non_null(strstr(out, "--iters"));
  assert_non_null(strstr(out, "--check-grad"));
  assert_non_null(strstr(out, "--out"));
  assert_null(strstr(out, "RESULT"));
  free(out);
  static const struct {
    const char *args, *needle;
  } cases[] = {
      {"--iters abc", "abc"}, {"--iters -3", "-3"},       {"--lbfgs 1x", "1x"},
      {"--lr 0", "--lr"},     {"--lr nan", "nan"},        {"--rtol 0.5", "--rtol"},
      {"--seed -1", "-1"},    {"--bogus", "--bogus"},     {"--iters", "--iters"},
      {"--out", "--out"},     {"--out --iters", "--out"}, {"--init-scale -1", "-1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rc = run(cases[i].args, &out);
    if (rc == 0 || rc >= 128)
      fail_msg("neural_ode %s -> %d (expected a usage error):\n%s", cases[i].args, rc, out);
    if (!strstr(out, "neural_ode:") || !strstr(out, cases[i].needle))
      fail_msg("neural_ode %s: message does not mention '%s':\n%s", cases[i].args, cases[i].needle,
               out);
    assert_null(strstr(out, "RESULT"));
    free(out);
  }
}

/* failing solves: a message naming the problem and exit status 1, never a crash */
static void test_solver_failures(void **state) {
  (void)state;
  need_binary();
  char *out = NULL;
  /* parameters 1e150 times too large: the network's output overflows at t = 0, or the first
   * step's state does. Which check fires first depends on the last bits of the kernels' sums
   * (they may differ between kernel sets), so either message counts; both name the problem. */
  int rc = run("--init-scale 1e150 --iters 5", &out);
  if (rc != 1 || (!strstr(out, "non-finite") && !strstr(out, "too large")) || !strstr(out, "CV_"))
    fail_msg("--init-scale 1e150: rc %d, output:\n%s", rc, out);
  assert_null(strstr(out, "RESULT"));
  free(out);
  /* 1e300: finite but absurd derivatives, the solver cannot take a step */
  rc = run("--init-scale 1e300 --iters 5", &out);
  if (rc != 1 || !strstr(out, "failed"))
    fail_msg("--init-scale 1e300: rc %d, output:\n%s", rc, out);
  free(out);
  /* a huge learning rate: the second ADAM step blows the model up */
  rc = run("--lr 1e6 --iters 5 --lbfgs 0", &out);
  if (rc != 1 || !strstr(out, "ADAM iteration") || !strstr(out, "failed"))
    fail_msg("--lr 1e6: rc %d, output:\n%s", rc, out);
  free(out);
  /* an unwritable SVG path: refused before any training (exit 2, like a bad flag) */
  rc = run("--iters 1 --lbfgs 0 --out /nonexistent-sc-dir/x.svg", &out);
  if (rc != 2 || !strstr(out, "/nonexistent-sc-dir/x.svg") || strstr(out, "ADAM"))
    fail_msg("unwritable --out: rc %d, output:\n%s", rc, out);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help_and_bad_flags), cmocka_unit_test(test_check_grad),
      cmocka_unit_test(test_untrained),          cmocka_unit_test(test_solver_failures),
      cmocka_unit_test(test_short_training),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
