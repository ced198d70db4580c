/* example_util.h — what the examples share: reading a size from the command line, and
 * refusing an unwritable output path before the work starts (--save/--out/--csv targets
 * found bad only after training would lose the run). */
#ifndef EXAMPLE_UTIL_H
#define EXAMPLE_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simplechain.h"

/* a non-negative decimal integer, the whole string: 1 and *out, or 0 */
static inline int example_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || end == s || s[0] == '-' || v > (unsigned long long)SIZE_MAX) return 0;
  *out = (size_t)v;
  return 1;
}

/* whether path (NULL: nothing to check) can be written; else 0 and the reason in msg. A file
 * the probe creates is removed again. */
static inline int example_writable_msg(const char *path, char *msg, size_t cap) {
  if (!path) return 1;
  FILE *t = fopen(path, "r");
  int existed = t != NULL;
  if (t) fclose(t);
  t = fopen(path, "a");
  if (!t) {
    snprintf(msg, cap, "cannot write '%.200s': %s", path, strerror(errno));
    return 0;
  }
  fclose(t);
  if (!existed) remove(path);
  return 1;
}

/* An output path that cannot be written is refused before the work, not after it: 1 if path
 * (when not NULL) can be opened for writing, else 0 with a message naming the path and the
 * system's reason. */
static inline int example_writable(const char *prog, const char *path) {
  char msg[300];
  if (example_writable_msg(path, msg, sizeof msg)) return 1;
  fprintf(stderr, "%s: %s\n", prog, msg);
  return 0;
}

/* The long-run flags toy2x2 and lenet5 share: --checkpoint FILE, --every-steps N, --clip
 * NORM. Returns 1 when a is one of them (then *ok says whether v was a good value). */
typedef struct example_run_flags {
  const char *checkpoint;
  size_t every_steps;
  double clip;
} example_run_flags;
static inline int example_run_flag(example_run_flags *f, const char *a, const char *v, int *ok) {
  if (!strcmp(a, "--checkpoint")) {
    f->checkpoint = v;
  } else if (!strcmp(a, "--every-steps")) {
    *ok = example_size(v, &f->every_steps) && f->every_steps > 0;
  } else if (!strcmp(a, "--clip")) {
    char *end;
    f->clip = strtod(v, &end);
    *ok = *end == 0 && f->clip > 0 && f->clip < 1e300;
  } else
    return 0;
  return 1;
}

/* --precision fp32 | bf16 | bf16-emulated (the names sc_precision_name gives) */
static inline int example_precision(const char *v, sc_precision *out) {
  const sc_precision all[] = {SC_PRECISION_FP32, SC_PRECISION_BF16, SC_PRECISION_BF16_EMULATED};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
    if (!strcmp(v, sc_precision_name(all[k]))) {
      *out = all[k];
      return 1;
    }
  return 0;
}

/* --profile, or SC_PROFILE set to anything but "" or "0" */
static inline int example_profile_wanted(int flag) {
  const char *e = getenv("SC_PROFILE");
  return flag || (e && *e && strcmp(e, "0") != 0);
}

/* sc_train's per-layer profile (opts.profile rows) as a table on stdout, with the wall time
 * of the training run for reference */
static inline void example_profile_print(const sc_chain *c, const sc_layer_profile *rows,
                                         size_t nrows, double wall_s, int threads) {
  size_t need = 0;
  if (sc_chain_plan(c, NULL, 0, &need), need > 0) { /* the kernel variants the layers run */
    char *plan = malloc(need);
    if (plan && sc_chain_plan(c, plan, need, NULL) == SC_OK) printf("plan: %s", plan);
    free(plan);
  }
  if (sc_profile_table(c, rows, nrows, NULL, 0, &need) != SC_OK && need == 0) return;
  char *buf = malloc(need);
  if (!buf) return;
  if (sc_profile_table(c, rows, nrows, buf, need, NULL) == SC_OK) {
    double tot = 0;
    for (size_t r = 0; r < nrows; r++) tot += rows[r].fwd_seconds + rows[r].bwd_seconds;
    printf("profile (thread-seconds over %d thread(s); %.3f s of the %.3f s wall time x %d "
           "threads accounted for):\n%s",
           threads, tot, wall_s, threads, buf);
  }
  free(buf);
}

#endif
