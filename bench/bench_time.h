/* bench/bench_time.h — the CPU's name, the wall clock, the median sort and a 7-run timer
 * shared by the C benchmarks */
#ifndef SC_BENCH_TIME_H
#define SC_BENCH_TIME_H
#include <stdio.h>
#include <string.h>
#include <time.h>

/* the CPU's model name from /proc/cpuinfo (Linux), else "unknown" */
static inline void bench_cpu_name(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
      const char *v = strchr(line, ':') + 1;
      while (*v == ' ') v++;
      snprintf(buf, cap, "%s", v);
      buf[strcspn(buf, "\n")] = 0;
      break;
    }
  fclose(f);
}

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
/* 7 timed runs of BODY: ns[0..6] = each run's seconds / count, in ns, sorted (ns[3] is
 * the median); needs <stdlib.h> */
#define BENCH_7RUNS(ns, count, BODY)                                                               \
  do {                                                                                             \
    for (int run_ = 0; run_ < 7; run_++) {                                                         \
      double t0_ = now();                                                                          \
      BODY;                                                                                        \
      (ns)[run_] = (now() - t0_) / (double)(count) * 1e9;                                          \
    }                                                                                              \
    qsort((ns), 7, sizeof(ns)[0], cmpd);                                                           \
  } while (0)
#endif
