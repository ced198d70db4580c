/* bench/bench_time.h — the wall clock and the median sort shared by the C benchmarks */
#ifndef SC_BENCH_TIME_H
#define SC_BENCH_TIME_H
#include <time.h>

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* qsort comparator for doubles, ascending */
static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
#endif
