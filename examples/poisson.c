/* poisson — the 10-group Poisson model of TuringLang/Turing.jl#2265, sampled with NUTS and
 * checked against its exact posterior.
 *
 * Data: G groups (default 10) of N Poisson counts each (default 3,000); group i's true mean
 * is drawn uniformly in [20, 40], all with a fixed data seed.
 * Model: rho_i ~ Gamma(shape a = 6.5, scale b = 2.25), y_ij ~ Poisson(rho_i), sampled on
 * l_i = log rho_i with the log-Jacobian l_i added (Turing's "linked" mode):
 *     log p(l) = sum_i [ a l_i - e^{l_i} / b + sum_j (y_ij l_i - e^{l_i}) ] + const
 * The posterior is known exactly: rho_i | y ~ Gamma(a + sum_j y_ij, scale b / (1 + N b)).
 *
 * Every evaluation of the likelihood goes over all G x N counts, as a probabilistic-programming
 * system's would (see logdensity), in a fixed order, so its value never depends on the number
 * of threads; the chains are what runs in parallel.
 *
 *   poisson [--groups G] [--counts N] [--data-seed S] [sampler flags] [--help]
 *
 * Last line: RESULT bench=poisson chains=C draws=D rhat_max=... ess_bulk_min=...
 *            max_abs_z=... seconds=...
 */
#include "nuts_cli.h"

#define PRIOR_SHAPE 6.5
#define PRIOR_SCALE 2.25

typedef struct model {
  size_t groups, counts;
  const double *y; /* groups x counts */
} model;

/* Every call goes over all the counts. Count j of group i adds
 *     log p(y_ij | rho_i) = y_ij l_i - rho_i - log(y_ij!)
 * (the last term is a constant and left out); the sum over j is computed as
 * l_i sum_j y_ij - N rho_i, the same sum with one addition per count, in 8 lanes of partial
 * sums added in a fixed order, so the value never depends on the number of threads. (With
 * the terms summed one by one the compiler's baseline code is 4x slower: bench/RESULTS.md.) */
static int logdensity(void *user, size_t chain, const double *l, size_t n, double *lp,
                      double *grad) {
  (void)chain;
  const model *m = user;
  double total = 0;
  for (size_t i = 0; i < n; i++) {
    const double *y = m->y + i * m->counts;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t j = 0;
    for (; j + 8 <= m->counts; j += 8) {
      s0 += y[j];
      s1 += y[j + 1];
      s2 += y[j + 2];
      s3 += y[j + 3];
      s4 += y[j + 4];
      s5 += y[j + 5];
      s6 += y[j + 6];
      s7 += y[j + 7];
    }
    for (; j < m->counts; j++) s0 += y[j];
    double sy = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
    double rho = exp(l[i]), N = (double)m->counts;
    /* Gamma(a, b) prior on rho plus the log-Jacobian l of rho = e^l, then the counts */
    total += PRIOR_SHAPE * l[i] - rho / PRIOR_SCALE + (sy * l[i] - N * rho);
    grad[i] = PRIOR_SHAPE - rho / PRIOR_SCALE + (sy - N * rho);
  }
  *lp = total;
  return 0;
}

typedef struct {
  uint64_t s;
} rng64;
static uint64_t rng_next(rng64 *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double rng_unif(rng64 *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1.0p-53; }
/* Knuth's product of uniforms; fine for means up to a few hundred */
static double rng_poisson(rng64 *r, double mean) {
  double L = exp(-mean), p = 1;
  size_t k = 0;
  do {
    k++;
    p *= rng_unif(r);
  } while (p > L);
  return (double)(k - 1);
}

static void usage(FILE *f) {
  fprintf(f, "usage: poisson [options]\n"
             "NUTS on the 10-group Poisson model of Turing.jl#2265 (Gamma(6.5, 2.25) prior on\n"
             "each mean, sampled on the log scale), compared with the exact posterior.\n\n"
             "  --groups G     groups (default 10)\n"
             "  --counts N     Poisson counts per group (default 3000)\n"
             "  --data-seed S  seed of the true means and the counts (default 2265)\n" NUTS_CLI_HELP
             "  --help         this text\n");
}

typedef struct poisson_flags {
  size_t groups, counts, dseed;
} poisson_flags;

static int poisson_option(void *user, const char *a, const char *v) {
  poisson_flags *f = user;
  if (!strcmp(a, "--groups"))
    return example_size(v, &f->groups) && f->groups >= 1 && f->groups <= 100000 ? 1 : -1;
  if (!strcmp(a, "--counts"))
    return example_size(v, &f->counts) && f->counts >= 1 && f->counts <= 100000000 ? 1 : -1;
  if (!strcmp(a, "--data-seed")) return example_size(v, &f->dseed) ? 1 : -1;
  return 0;
}

int main(int argc, char **argv) {
  nuts_cli cli = {"poisson", 4, 1000, 1000, (size_t)-1, 1, 2, 0, NULL};
  poisson_flags fl = {10, 3000, 2265};
  int code = nuts_cli_parse(&cli, argc, argv, usage, poisson_option, &fl);
  if (code >= 0) return code;
  size_t groups = fl.groups, counts = fl.counts, dseed = fl.dseed;
  if (counts > 100000000 / groups) {
    fprintf(stderr, "poisson: --groups x --counts must be at most 1e8\n");
    return 2;
  }
  if (!example_writable("poisson", cli.csv)) return 2;
  size_t G = groups, C = cli.chains, D = cli.draws;
  double *y = malloc(G * counts * sizeof *y), *truth = malloc(G * sizeof *truth);
  double *draws = malloc(C * D * G * sizeof *draws), *rho = malloc(C * D * G * sizeof *rho);
  sc_nuts_chain_info *info = calloc(C, sizeof *info);
  sc_nuts_stats *stats = cli.csv ? malloc(C * D * sizeof *stats) : NULL;
  sc_mcmc_summary *sl = malloc(G * sizeof *sl), *sr = malloc(G * sizeof *sr);
  int rc = 1;
  if (!y || !truth || !draws || !rho || !info || !sl || !sr || (cli.csv && !stats)) {
    fprintf(stderr, "poisson: out of memory\n");
    goto out;
  }
  rng64 r = {dseed};
  for (size_t i = 0; i < G; i++) {
    truth[i] = 20 + 20 * rng_unif(&r);
    for (size_t j = 0; j < counts; j++) y[i * counts + j] = rng_poisson(&r, truth[i]);
  }
  model m = {G, counts, y};
  sc_nuts_opts o = nuts_cli_opts(&cli);
  if (!cli.quiet)
    printf("poisson: %zu groups x %zu counts; %zu chains x (%zu warm-up + %zu draws), %d "
           "thread(s), seed %llu\n",
           G, counts, C, cli.warmup, D, cli.threads, cli.seed);
  sc_nuts_out out = {draws, stats, info, NULL};
  double t0 = nuts_cli_now();
  sc_status st = sc_nuts_sample(logdensity, &m, G, &o, &out, NULL, 0);
  double seconds = nuts_cli_now() - t0;
  if (st) {
    fprintf(stderr, "poisson: %s: %s\n", sc_status_str(st), sc_last_error());
    goto out;
  }
  for (size_t k = 0; k < C * D * G; k++) rho[k] = exp(draws[k]);
  if ((st = sc_mcmc_summarize(draws, C, D, G, sl)) || (st = sc_mcmc_summarize(rho, C, D, G, sr))) {
    fprintf(stderr, "poisson: %s: %s\n", sc_status_str(st), sc_last_error());
    goto out;
  }
  nuts_cli_report(&cli, info);
  printf("\ngroup  true mean  exact mean  exact sd   sampled mean  sampled sd   mcse      z      "
         "R-hat   ESS bulk  ESS tail\n");
  double rhat_max = 0, ess_min = INFINITY, zmax = 0, ess_sum = 0;
  size_t grads = 0;
  for (size_t i = 0; i < G; i++) {
    double sy = 0;
    for (size_t j = 0; j < counts; j++) sy += y[i * counts + j];
    double shape = PRIOR_SHAPE + sy, scale = PRIOR_SCALE / (1 + (double)counts * PRIOR_SCALE);
    double em = shape * scale, esd = sqrt(shape) * scale;
    double z = (sr[i].mean - em) / sr[i].mcse_mean;
    /* convergence on the sampled coordinate l_i and on rho_i (ranks agree: the same R-hat
     * and bulk ESS; tail ESS too) */
    double rh = fmax(sl[i].rhat, sr[i].rhat), eb = fmin(sl[i].ess_bulk, sr[i].ess_bulk);
    printf("%5zu  %9.4f  %10.5f  %8.5f   %12.5f  %10.5f  %8.6f  %6.2f  %6.4f  %8.0f  %8.0f\n",
           i + 1, truth[i], em, esd, sr[i].mean, sr[i].sd, sr[i].mcse_mean, z, rh, eb,
           fmin(sl[i].ess_tail, sr[i].ess_tail));
    if (!(rh <= rhat_max)) rhat_max = rh;
    if (!(eb >= ess_min)) ess_min = eb;
    if (!(fabs(z) <= zmax)) zmax = fabs(z);
    ess_sum += eb;
  }
  for (size_t k = 0; k < C; k++) grads += info[k].gradients;
  printf("\n%.3f s for %zu chains x %zu iterations: %.0f gradients/s, min bulk ESS %.0f (%.0f "
         "per second)\n",
         seconds, C, cli.warmup + D, (double)grads / seconds, ess_min, ess_min / seconds);
  (void)ess_sum;
  if (cli.csv) {
    char **names = malloc(G * sizeof *names);
    char *buf = malloc(G * 32);
    if (!names || !buf) {
      free(names);
      free(buf);
      fprintf(stderr, "poisson: out of memory\n");
      goto out;
    }
    for (size_t i = 0; i < G; i++) {
      names[i] = buf + 32 * i;
      snprintf(names[i], 32, "log_rho.%zu", i + 1);
    }
    st = sc_mcmc_write_csv(cli.csv, draws, C, D, G, (const char *const *)names, stats);
    free(names);
    free(buf);
    if (st) {
      fprintf(stderr, "poisson: %s: %s\n", sc_status_str(st), sc_last_error());
      goto out;
    }
    printf("wrote %zu draws of log rho to %s\n", C * D, cli.csv);
  }
  printf("RESULT bench=poisson chains=%zu draws=%zu rhat_max=%.4f ess_bulk_min=%.0f "
         "max_abs_z=%.2f seconds=%.4f\n",
         C, D, rhat_max, ess_min, zmax, seconds);
  rc = 0;
out:
  free(y);
  free(truth);
  free(draws);
  free(rho);
  free(info);
  free(stats);
  free(sl);
  free(sr);
  return rc;
}
