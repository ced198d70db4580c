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

#include "simplechain.h"

/* Fails the test, printing the status and sc_last_error(), if call is not SC_OK. */
#define SC_OK_OR_FAIL(call)                                                               \
  do {                                                                                    \
    sc_status st_ = (call);                                                               \
    if (st_ != SC_OK) fail_msg("%s -> %s: %s", #call, sc_status_str(st_), sc_last_error()); \
  } while (0)

/* Asserts that call returns the status `want` and leaves a non-empty message. */
#define SC_EXPECT(want, call)                                                             \
  do {                                                                                    \
    sc_status st_ = (call);                                                               \
    if (st_ != (want))                                                                    \
      fail_msg("%s -> %s, expected %s (%s)", #call, sc_status_str(st_), sc_status_str(want), \
               sc_last_error());                                                          \
    if ((want) != SC_OK) assert_true(strlen(sc_last_error()) > 0);                        \
  } while (0)

/* Deterministic test data: splitmix64 uniform in [-1, 1). */
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
  if (saved) setenv("SC_ISA", keep, 1);
  else unsetenv("SC_ISA");
  return n;
}

#endif
