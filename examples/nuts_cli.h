/* nuts_cli.h — what the sampling examples (poisson.c, bnn.c) share: the sampler's command
 * line flags, a progress printer and the per-chain report. Header-only, static functions. */
#ifndef NUTS_CLI_H
#define NUTS_CLI_H

#include "example_util.h"
#include "sc_nuts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct nuts_cli {
  const char *prog;
  size_t chains, draws, warmup, every;
  unsigned long long seed;
  int threads, quiet;
  const char *csv;
} nuts_cli;

#define NUTS_CLI_HELP                                                                              \
  "  --chains C     chains (default 4), run on the threads\n"                                      \
  "  --draws D      kept draws per chain (default 1000)\n"                                         \
  "  --warmup W     warm-up iterations per chain (default 1000)\n"                                 \
  "  --seed S       sampler seed (default 1); chain c's draws depend on (S, c) only\n"             \
  "  --threads T    threads (default 2); the draws do not depend on it\n"                          \
  "  --every N      a progress line per chain every N iterations (default: a quarter of\n"         \
  "                 the run; 0 = none)\n"                                                          \
  "  --csv FILE     write the draws as CSV (chain, iteration, one column per parameter,\n"         \
  "                 Stan's sampler columns)\n"                                                     \
  "  --quiet        only the summary\n"

/* Consumes option a (with value v when it takes one): 1 = it was a sampler option (value
 * used), 0 = not one of ours, -1 = bad value (message printed). */
static inline int nuts_cli_option(nuts_cli *c, const char *a, const char *v) {
  size_t t = 0;
  int ok;
  if (!strcmp(a, "--chains"))
    ok = example_size(v, &c->chains) && c->chains >= 1 && c->chains <= 4096;
  else if (!strcmp(a, "--draws"))
    ok = example_size(v, &c->draws) && c->draws >= 4 && c->draws <= 100000000;
  else if (!strcmp(a, "--warmup"))
    ok = example_size(v, &c->warmup) && c->warmup <= 100000000;
  else if (!strcmp(a, "--every"))
    ok = example_size(v, &c->every);
  else if (!strcmp(a, "--seed")) {
    ok = example_size(v, &t);
    c->seed = t;
  } else if (!strcmp(a, "--threads")) {
    ok = example_size(v, &t) && t >= 1 && t <= 64;
    c->threads = (int)t;
  } else if (!strcmp(a, "--csv")) {
    ok = v[0] != 0;
    c->csv = v;
  } else
    return 0;
  if (!ok) {
    fprintf(stderr, "%s: bad value '%s' for %s (see --help)\n", c->prog, v, a);
    return -1;
  }
  return 1;
}

/* The program's own options: 1 = taken (value used), 0 = unknown, -1 = bad value (the
 * caller prints the message). */
typedef int (*nuts_cli_extra_fn)(void *user, const char *opt, const char *val);

/* Parses the command line: --help / -h (usage on stdout), --quiet, the sampler flags above
 * and, through extra, the program's own options (all of which take a value). Returns -1 to
 * go on, or the exit code (0 after --help, 2 after a bad option or value, with a message). */
static inline int nuts_cli_parse(nuts_cli *c, int argc, char **argv, void (*usage)(FILE *),
                                 nuts_cli_extra_fn extra, void *user) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--quiet")) {
      c->quiet = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "%s: %s needs a value (see --help)\n", c->prog, a);
      return 2;
    }
    int r = nuts_cli_option(c, a, v);
    if (r < 0) return 2;
    if (r == 0) r = extra(user, a, v);
    if (r == 0) {
      fprintf(stderr, "%s: unknown option '%s' (see --help)\n", c->prog, a);
      return 2;
    }
    if (r < 0) {
      fprintf(stderr, "%s: bad value '%s' for %s (see --help)\n", c->prog, v, a);
      return 2;
    }
    i++;
  }
  return -1;
}

static inline int nuts_cli_progress(void *user, size_t chain, size_t it, size_t total) {
  const nuts_cli *c = user;
  printf("chain %zu: iteration %6zu/%zu%s\n", chain + 1, it, total,
         it <= c->warmup ? "  (warm-up)" : "");
  fflush(stdout);
  return 0;
}

/* sampler options from the flags */
static inline sc_nuts_opts nuts_cli_opts(nuts_cli *c) {
  sc_nuts_opts o = sc_nuts_defaults();
  o.chains = c->chains;
  o.draws = c->draws;
  o.warmup = c->warmup;
  o.seed = c->seed;
  o.threads = c->threads;
  if (c->every == (size_t)-1) c->every = (c->warmup + c->draws + 3) / 4;
  if (!c->quiet && c->every) {
    o.progress = nuts_cli_progress;
    o.progress_every = c->every;
    o.progress_user = c;
  }
  return o;
}

static inline void nuts_cli_report(const nuts_cli *c, const sc_nuts_chain_info *info) {
  size_t div = 0, hits = 0;
  for (size_t k = 0; k < c->chains; k++) {
    div += info[k].divergences;
    hits += info[k].max_depth_hits;
    if (!c->quiet)
      printf("chain %zu: step size %.4g, mean acceptance %.3f, %zu divergent (%zu in warm-up), "
             "%zu at max depth, %zu gradients, %.3f s\n",
             k + 1, info[k].step_size, info[k].mean_accept, info[k].divergences,
             info[k].warmup_divergences, info[k].max_depth_hits, info[k].gradients,
             info[k].seconds);
  }
  printf("%zu divergent transitions and %zu at the maximum tree depth among %zu draws\n", div, hits,
         c->chains * c->draws);
}

static inline double nuts_cli_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
