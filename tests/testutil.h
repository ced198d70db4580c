/* tests/testutil.h — shared helpers for the cmocka tests. */
#ifndef SC_TESTUTIL_H
#define SC_TESTUTIL_H

/* include this header first: it asks for POSIX (setenv) before any system header */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the four headers above first */
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include "simplechain.h"

/* Fails the test, printing the status and sc_last_error(), if call is not SC_OK. */
#define SC_OK_OR_FAIL(call)                                                                        \
  do {                                                                                             \
    sc_status st_ = (call);                                                                        \
    if (st_ != SC_OK) fail_msg("%s -> %s: %s", #call, sc_status_str(st_), sc_last_error());        \
  } while (0)

/* Asserts that call returns the status `want` and leaves a non-empty message. */
#define SC_EXPECT(want, call)                                                                      \
  do {                                                                                             \
    sc_status st_ = (call);                                                                        \
    if (st_ != (want))                                                                             \
      fail_msg("%s -> %s, expected %s (%s)", #call, sc_status_str(st_), sc_status_str(want),       \
               sc_last_error());                                                                   \
    if ((want) != SC_OK) assert_true(strlen(sc_last_error()) > 0);                                 \
  } while (0)

/* Deterministic test data: splitmix64 uniform in [-1, 1). */
/* files for the tests that write and read them: tu_tmp_path gives
 * $TMPDIR/sc_test_<test>_<pid>_<name> (default /tmp); tu_read_all returns the whole file
 * (malloc'ed, caller frees, one 0 byte after it); tu_write_all writes b[0..n) */
static inline void tu_tmp_path(char *buf, size_t cap, const char *test, const char *name) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, cap, "%s/sc_test_%s_%ld_%s", dir && *dir ? dir : "/tmp", test, (long)getpid(),
           name);
}
static inline unsigned char *tu_read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  b[n] = 0; /* a terminator after the contents, for text */
  *len = (size_t)n;
  return b;
}
static inline void tu_write_all(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(b, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

static inline double tu_unif(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}
static inline void tu_fill_f32(float *v, size_t n, uint64_t seed, double scale) {
  for (size_t i = 0; i < n; i++) v[i] = (float)(scale * tu_unif(&seed));
}
static inline void tu_fill_f64(double *v, size_t n, uint64_t seed, double scale) {
  for (size_t i = 0; i < n; i++) v[i] = scale * tu_unif(&seed);
}

/* The ISA paths this CPU and build can run ("scalar" always). Returns the count. */
static inline int tu_isas(const char *names[3]) {
  static const char *all[3] = {"scalar", "avx2", "avx512"};
  int n = 0;
  const char *saved = getenv("SC_ISA");
  char keep[32] = {0};
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  for (int i = 0; i < 3; i++) {
    setenv("SC_ISA", all[i], 1);
    sc_layer l = sc_dense(1, SC_IDENTITY);
    sc_chain *c = NULL;
    if (sc_chain_create(&c, 1, &l, 1) == SC_OK) names[n++] = all[i];
    sc_chain_destroy(c);
  }
  if (saved)
    setenv("SC_ISA", keep, 1);
  else
    unsetenv("SC_ISA");
  return n;
}

/* The activations exactly as documented in simplechain.h, in double: the reference the
 * gradient and forward tests compare against. */
static inline double tu_ref_act(sc_act a, double z) {
  switch (a) {
  case SC_IDENTITY: return z;
  case SC_RELU: return z > 0 ? z : 0;
  case SC_TANH: return tanh(z);
  case SC_SIGMOID: return 1 / (1 + exp(-z));
  case SC_SOFTPLUS: return z > 0 ? z + log1p(exp(-z)) : log1p(exp(z));
  case SC_GELU: {
    const double k0 = sqrt(2 / 3.14159265358979323846), k1 = 0.044715;
    return 0.5 * z * (1 + tanh(k0 * (z + k1 * z * z * z)));
  }
  case SC_SILU: return z / (1 + exp(-z));
  }
  return NAN;
}

/* Runs a shell command with stderr merged into stdout. *out receives everything it
 * printed (malloc'ed, NUL-terminated; free it). Returns the exit status, 128 + signal
 * when it was killed, -1 when it could not be run. */
static inline int tu_run(const char *cmd, char **out) {
  size_t n = strlen(cmd) + 8;
  char *full = malloc(n);
  assert_non_null(full);
  snprintf(full, n, "%s 2>&1", cmd);
  FILE *f = popen(full, "r");
  free(full);
  if (!f) fail_msg("popen(%s) failed", cmd);
  size_t cap = 1 << 14, len = 0, k;
  char *buf = malloc(cap);
  assert_non_null(buf);
  while ((k = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
    len += k;
    if (len + 1 == cap) {
      char *nb = realloc(buf, cap * 2);
      assert_non_null(nb);
      buf = nb;
      cap *= 2;
    }
  }
  buf[len] = 0;
  int st = pclose(f);
  *out = buf;
  if (st == -1) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Finite differences: the comparison every gradient test uses. Fails the test unless
 * |an - fd| / max(|an|, |fd|, floor) <= rtol (an absolute bound for tiny components);
 * *worst_rel / *worst_abs keep the largest errors seen, *checked counts comparisons. */
static inline void tu_fd_compare(const char *ctx, const char *what, size_t k, double an, double fd,
                                 double rtol, double floor, double *worst_rel, double *worst_abs,
                                 size_t *checked) {
  double den = fmax(fmax(fabs(an), fabs(fd)), floor);
  double err = fabs(an - fd) / den;
  if (!(err <= rtol))
    fail_msg("%s: %s[%zu]: analytic %.15g, finite difference %.15g, rel err %.3g > %g", ctx, what,
             k, an, fd, err, rtol);
  if (err > *worst_rel) *worst_rel = err;
  if (fabs(an - fd) > *worst_abs) *worst_abs = fabs(an - fd);
  (*checked)++;
}

/* Which of n components a finite-difference check visits: all when n <= max, else every
 * stride-th one plus those marked in always (may be NULL). */
static inline int tu_fd_want(size_t k, size_t n, size_t max, const unsigned char *always) {
  if (n <= max) return 1;
  size_t stride = (n + max - 1) / max;
  return k % stride == 0 || (always && always[k]);
}

/* The losses exactly as documented in simplechain.h (mean over the batch), in double, from
 * outputs yhat (B x O); target: B x O doubles, or B int32_t labels for cross-entropy. */
static inline double tu_ref_loss(sc_loss loss, const double *yhat, const void *target, size_t B,
                                 size_t O) {
  double s = 0;
  for (size_t b = 0; b < B; b++) {
    const double *y = yhat + b * O;
    if (loss == SC_LOSS_LOGIT_CROSSENTROPY) {
      int32_t lab = ((const int32_t *)target)[b];
      double m = y[0], se = 0;
      for (size_t o = 1; o < O; o++) m = fmax(m, y[o]);
      for (size_t o = 0; o < O; o++) se += exp(y[o] - m);
      s += m + log(se) - y[lab];
    } else {
      const double *t = (const double *)target + b * O;
      for (size_t o = 0; o < O; o++)
        s += loss == SC_LOSS_SQUARED ? (y[o] - t[o]) * (y[o] - t[o]) : fabs(y[o] - t[o]);
    }
  }
  return s / (double)B;
}

#endif
