/* sc_nuts.h — Bayesian sampling on the flat parameter vector: the No-U-Turn sampler
 * (NUTS) over a flat double vector, parallel chains, and their diagnostics (rank-normalised
 * split-R-hat, bulk and tail ESS, Monte-Carlo standard errors, CSV output).
 *
 * A module beside the library: compile sc_nuts.c together with simplechain.c
 *
 *     cc -std=c11 -O2 app.c sc_nuts.c simplechain.c -lm -pthread
 *
 * (`make` puts both into build/libsimplechain.a). The sampler knows nothing about networks:
 * it samples any log density whose gradient a callback provides, and a simplechain chain is
 * one way to write that callback (examples/bnn.c; examples/poisson.c has no network at all).
 * Errors are reported the library's way: an sc_status, with the message in sc_last_error().
 *
 * ------------------------------------------------------------------------------------
 * The algorithm (as Stan documents it; Hoffman & Gelman 2014, Betancourt 2017)
 * ------------------------------------------------------------------------------------
 * Each iteration draws a momentum p ~ N(0, M) with a diagonal mass matrix M (the sampler
 * adapts its inverse, the "inverse metric"), then builds a trajectory of leapfrog steps by
 * repeated doubling, forwards or backwards at random, until the generalised no-U-turn
 * criterion fails (checked across the whole trajectory and across the two halves of every
 * merged subtree) or the tree depth reaches max_depth (2^max_depth - 1 steps). The next
 * state is drawn from the whole trajectory with weights exp(-H) (multinomial sampling:
 * uniform within a subtree, biased towards the new subtree at the top level).
 *
 * Divergences: a leapfrog step whose log density or gradient is not finite, or whose
 * energy error H - H0 exceeds max_energy_error (default 1000), ends the trajectory; the
 * subtree being built is discarded, the iteration is counted as divergent (stats[].divergent),
 * and sampling goes on. A log density that is NaN, +-Inf or has a non-finite gradient in
 * part of the space is therefore allowed: those points have zero posterior density.
 *
 * Warm-up (opts.warmup iterations, not kept): the step size is adapted by dual averaging
 * towards the mean acceptance statistic delta (default 0.8; gamma 0.05, t0 10, kappa 0.75)
 * and fixed to the averaged value at the end of warm-up. The diagonal inverse metric is the
 * variance of the draws in a series of windows: an initial fast interval (init_buffer = 75
 * iterations, step size only), slow windows of base_window = 25 iterations doubling in
 * length, each ending with a metric update (regularised towards 1e-3:
 * (w / (w + 5)) var + 1e-3 * 5 / (w + 5) for w draws) and a restart of the step-size
 * adaptation, and a final fast interval (term_buffer = 50). With fewer than
 * init_buffer + base_window + term_buffer warm-up iterations the three are set to 15 %,
 * 75 % and 10 % of warm-up; with fewer than 20, only the step size is adapted. The initial
 * step size and the one after each metric update come from Stan's heuristic (doubling or
 * halving until the acceptance of one leapfrog step crosses 0.8).
 *
 * Chains: chain c (0-based) draws every random number from its own generator
 * (xoshiro256++ seeded from (seed, c)). Chains run on opts.threads threads, which take whole
 * chains; a chain's draws are a function of (callback, seed, c, opts) only, bitwise identical
 * whatever the thread count, provided the callback's result depends on x alone.
 *
 * Initial points: opts.init (chains x n values, row c for chain c) or, when NULL, uniform
 * draws in (-init_radius, init_radius) (default 2) from the chain's generator, retried up
 * to 100 times until the log density and its gradient are finite (Stan's default).
 *
 * Memory: every buffer is planned before the first iteration (sc_nuts_bytes, or
 * mem = NULL for a single allocation by the library); no iteration allocates. The draws go
 * to caller memory (sc_nuts_out). The callback's own scratch (e.g. one simplechain
 * workspace per chain) is the caller's.
 */
#ifndef SC_NUTS_H
#define SC_NUTS_H

#include "simplechain.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The log density and its gradient at x (n values).
 *   Write *logp (up to an additive constant) and grad[0..n), then return 0.
 *   A non-finite *logp or gradient is allowed: the point has zero density (see above).
 *   Any non-zero return is an error: every chain stops, and sc_nuts_sample returns
 *   SC_ERR_CALLBACK naming the chain, the iteration and the value returned.
 * `chain` is the index of the chain asking; with threads > 1 the callback runs
 * concurrently for different chains (never twice at once for the same chain), so per-chain
 * scratch (a simplechain workspace, say) indexed by `chain` needs no locking. For
 * reproducible draws the result must depend on x only. */
typedef int (*sc_logdensity_fn)(void *user, size_t chain, const double *x, size_t n, double *logp,
                                double *grad);

/* Progress: called from the thread running the chain after every `progress_every`-th
 * iteration (warm-up included; iteration counts from 1 to warmup + draws) and after the
 * last. It may run concurrently for different chains. Return non-zero to stop every chain
 * (sc_nuts_sample then returns SC_ERR_STOPPED). */
typedef int (*sc_nuts_progress_fn)(void *user, size_t chain, size_t iteration, size_t total);

typedef struct sc_nuts_opts {
  size_t chains;           /* default 4 */
  size_t warmup;           /* adaptation iterations per chain, default 1000 (not kept) */
  size_t draws;            /* kept iterations per chain, default 1000 (>= 1) */
  uint64_t seed;           /* default 0 */
  int threads;             /* default 1; threads beyond `chains` stay idle */
  int max_depth;           /* tree depth limit, 1..30, default 10 */
  double delta;            /* target mean acceptance statistic, in (0, 1), default 0.8 */
  double gamma, t0, kappa; /* dual averaging: 0.05, 10, 0.75 */
  double max_energy_error; /* divergence threshold on H - H0, default 1000 */
  double step_size;        /* initial step size before the heuristic, default 1 */
  int adapt_metric;        /* 1 (default): adapt the diagonal inverse metric; 0: keep it 1 */
  size_t init_buffer;      /* default 75 */
  size_t term_buffer;      /* default 50 */
  size_t base_window;      /* default 25 */
  double init_radius;      /* default 2 */
  const double *init;      /* NULL, or chains x n initial points */
  sc_nuts_progress_fn progress;
  size_t progress_every; /* 0: never */
  void *progress_user;
} sc_nuts_opts;

sc_nuts_opts sc_nuts_defaults(void);

/* Per kept draw (the columns Stan writes with the same names plus "__"). */
typedef struct sc_nuts_stats {
  double lp;          /* log density of the draw */
  double accept_stat; /* mean acceptance probability over the trajectory */
  double step_size;   /* step size used */
  double energy;      /* Hamiltonian of the draw (with its momentum) */
  uint32_t n_leapfrog;
  uint16_t tree_depth;
  uint16_t divergent; /* 1 when the trajectory ended in a divergence */
} sc_nuts_stats;

/* Per chain. */
typedef struct sc_nuts_chain_info {
  double step_size;          /* the adapted step size the draws used */
  double mean_accept;        /* mean accept_stat of the kept draws */
  size_t divergences;        /* kept draws whose trajectory diverged */
  size_t warmup_divergences; /* the same during warm-up */
  size_t max_depth_hits;     /* kept draws whose tree reached max_depth */
  size_t gradients;          /* calls of the callback, warm-up and initialisation included */
  size_t init_attempts;      /* initial points tried (1 with opts.init) */
  double seconds;            /* wall time of the chain */
} sc_nuts_chain_info;

/* Where sc_nuts_sample writes. Only draws is required. */
typedef struct sc_nuts_out {
  double *draws;            /* chains x draws x n: draw d of chain c at draws + (c*D + d)*n */
  sc_nuts_stats *stats;     /* chains x draws (stats[c*D + d]), or NULL */
  sc_nuts_chain_info *info; /* chains, or NULL */
  double *inv_metric;       /* chains x n: each chain's adapted inverse metric, or NULL */
} sc_nuts_out;

/* Bytes of planned memory sc_nuts_sample needs for n coordinates and these options (the
 * draws not included): per chain about (30 + 9 max_depth) n doubles plus bookkeeping. */
sc_status sc_nuts_bytes(size_t n, const sc_nuts_opts *opts, size_t *bytes);

/* Runs opts->chains chains of opts->warmup + opts->draws iterations over x in R^n.
 * mem: at least sc_nuts_bytes() bytes of caller memory (any alignment), or NULL for one
 * allocation by the library, freed before returning. Errors: SC_ERR_NULL, SC_ERR_ARG
 * (options out of range, named), SC_ERR_OVERFLOW, SC_ERR_NOMEM, SC_ERR_THREAD,
 * SC_ERR_UNSUPPORTED (threads > 1 in a build without threads), SC_ERR_CALLBACK (the
 * callback returned non-zero), SC_ERR_NONFINITE (no initial point with a finite log
 * density and gradient, or the step-size heuristic found no acceptable step size),
 * SC_ERR_STOPPED (the progress callback). When several chains fail, the message is the
 * failure of the lowest-numbered chain. On failure the outputs hold no usable result. */
sc_status sc_nuts_sample(sc_logdensity_fn fn, void *user, size_t n, const sc_nuts_opts *opts,
                         const sc_nuts_out *out, void *mem, size_t bytes);

/* ------------------------------------------------------------------------------------
 * Diagnostics (Vehtari, Gelman, Simpson, Carpenter & Buerkner 2021, Bayesian Analysis 16(2);
 * the definitions of the R package posterior)
 * ------------------------------------------------------------------------------------
 * For one quantity with `chains` chains of `ndraws` draws each: every chain is split into
 * its first and last floor(ndraws / 2) draws (the middle draw of an odd count is left out),
 * giving 2 * chains chains.
 *   rhat      max(R-hat of the rank-normalised split chains, R-hat of the rank-normalised
 *             split chains of |x - median|) ("rank-normalised split-R-hat")
 *   ess_bulk  ESS of the rank-normalised split chains
 *   ess_tail  min(ESS of the indicators x <= q5, ESS of x <= q95)
 *   ess_mean  ESS of the split chains themselves; mcse_mean = sd / sqrt(ess_mean)
 * Rank normalisation: z = Phi^-1((r - 3/8) / (S + 1/4)) with r the rank among all S draws
 * (ties get their average rank). ESS uses Geyer's initial monotone sequence on the
 * combined autocorrelations, with the antithetic correction, capped at S log10(S).
 * Quantiles are R's type 7. A quantity that is constant, or not finite somewhere, gets
 * NaN R-hat and ESS values (and a non-finite one NaN for everything). ndraws must be >= 4;
 * the ESS values need ndraws >= 8 (split halves of at least 4 draws) and are NaN below. */
typedef struct sc_mcmc_summary {
  double mean, sd, mcse_mean;
  double q5, q50, q95;
  double rhat;
  double ess_bulk, ess_tail, ess_mean;
} sc_mcmc_summary;

/* Summary of coordinate `index` of draws laid out as sc_nuts_out.draws (chains x ndraws x
 * n). Allocates its scratch (about 3 * chains * ndraws doubles) and frees it. */
sc_status sc_mcmc_summary_of(const double *draws, size_t chains, size_t ndraws, size_t n,
                             size_t index, sc_mcmc_summary *summary);

/* The same for every coordinate: summaries[0..n). One allocation for all. */
sc_status sc_mcmc_summarize(const double *draws, size_t chains, size_t ndraws, size_t n,
                            sc_mcmc_summary *summaries);

/* Writes the draws as CSV for other tools (ArviZ, posterior, pandas): a header line
 *   chain,iteration,<names[0]>,...,<names[n-1]>[,lp__,accept_stat__,stepsize__,treedepth__,
 *   n_leapfrog__,divergent__,energy__]
 * then one line per draw, chain by chain; chain and iteration count from 1, values are
 * printed with 17 significant digits (they read back bit for bit). names may be NULL
 * ("x1", "x2", ...); a name must be non-empty and free of commas, quotes and line
 * breaks (SC_ERR_ARG). stats may be NULL (no sampler columns). The file is written under a
 * temporary name beside path and renamed over it when complete; on failure (SC_ERR_IO,
 * naming the path and the system's reason) no partial file is left. */
sc_status sc_mcmc_write_csv(const char *path, const double *draws, size_t chains, size_t ndraws,
                            size_t n, const char *const *names, const sc_nuts_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* SC_NUTS_H */
