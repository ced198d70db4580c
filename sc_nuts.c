/* sc_nuts.c — the No-U-Turn sampler, parallel chains and MCMC diagnostics. See sc_nuts.h.
 *
 * Layout of this file: random numbers; the planned per-chain memory; the Hamiltonian
 * (leapfrog, energy); the trajectory (build_tree, transition); adaptation (dual averaging,
 * windowed variance); one chain from start to end; chains on threads; diagnostics; CSV.
 *
 * Dimension letters: n coordinates; C chains; D kept draws per chain. */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* pthreads */
#endif

#include "sc_nuts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if !defined(SC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#define SC__NUTS_THREADS 1
#include <pthread.h>
#include <stdatomic.h>
#else
#define SC__NUTS_THREADS 0
#endif

#define SC__NUTS_ALIGN 64
#define SC__NUTS_INIT_TRIES 100
#define SC__SQRT_2PI 2.506628274631000502415765

/* ---------------------------------------------------------------- random numbers */
/* xoshiro256++ (Blackman & Vigna), seeded through splitmix64 from (seed, chain). */
typedef struct nuts_rng {
  uint64_t s[4];
  int has_spare; /* the polar method makes normals in pairs */
  double spare;
} nuts_rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void rng_seed(nuts_rng *r, uint64_t seed, uint64_t chain) {
  uint64_t x = seed ^ (0xD1B54A32D192ED03ull * (chain + 1));
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
  r->has_spare = 0;
  r->spare = 0;
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(nuts_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl64(s[0] + s[3], 23) + s[0];
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64(s[3], 45);
  return out;
}

/* uniform in [0, 1) */
static double rng_unif(nuts_rng *r) { return (double)(rng_next(r) >> 11) * 0x1p-53; }

/* standard normal, Marsaglia's polar method */
static double rng_normal(nuts_rng *r) {
  if (r->has_spare) {
    r->has_spare = 0;
    return r->spare;
  }
  double u, v, s;
  do {
    u = 2.0 * rng_unif(r) - 1.0;
    v = 2.0 * rng_unif(r) - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  double f = sqrt(-2.0 * log(s) / s);
  r->spare = v * f;
  r->has_spare = 1;
  return u * f;
}

/* ---------------------------------------------------------------- planned memory */
/* A phase-space point: position q, momentum p, gradient g of the log density, and lp. */
typedef struct nuts_pt {
  double *q, *p, *g;
  double lp;
} nuts_pt;

/* The locals of one level of build_tree (depth >= 1): the proposal of the final subtree
 * and the momenta / sharp momenta / momentum sums at the subtrees' inner ends. */
typedef struct nuts_level {
  nuts_pt prop_final;
  double *p_init_end, *ps_init_end, *rho_init;
  double *p_final_beg, *ps_final_beg, *rho_final;
} nuts_level;

/* Everything one chain uses. */
typedef struct nuts_chain {
  /* fixed for the run */
  size_t n, id;
  const sc_nuts_opts *o;
  sc_logdensity_fn fn;
  void *user;
  nuts_rng rng;
  /* the integrator's point, the trajectory's ends, the sample and the proposal */
  nuts_pt z, fwd, bck, sample, propose, init;
  double *inv; /* diagonal inverse metric */
  double *rho, *rho_fwd, *rho_bck, *tmp;
  double *ps_fwd_bck, *ps_fwd_fwd, *ps_bck_fwd, *ps_bck_bck;
  double *p_fwd_bck, *p_fwd_fwd, *p_bck_fwd, *p_bck_bck;
  double *w_mean, *w_m2; /* Welford accumulators of the variance windows */
  nuts_level *lev;       /* lev[1..max_depth] */
  /* state of the step */
  double eps;
  double H0;
  int divergent;
  size_t n_leapfrog;
  double sum_metro;
  /* dual averaging */
  double da_mu, da_sbar, da_xbar;
  size_t da_count;
  /* variance windows */
  size_t win_count, win_size, win_next, w_n;
  size_t init_buffer, term_buffer, base_window;
  int adapt_windows;
  /* result of the run */
  sc_status st;
  char msg[400];
  size_t iteration;
  int collateral; /* stopped because another chain failed */
  sc_nuts_chain_info info;
} nuts_chain;

/* bytes of one chain's block: the struct, then the vectors, each 64-byte aligned */
static int nuts_chain_layout(size_t n, int max_depth, size_t *bytes) {
  const size_t top_vectors = 6 * 3 + 1 + 4 + 4 + 4 + 2; /* points, inv, rho*, ps*, p*, w* */
  const size_t level_vectors = 3 + 6;
  size_t vec = n * sizeof(double);
  if (n != 0 && vec / n != sizeof(double)) return 0;
  if (vec > SIZE_MAX - SC__NUTS_ALIGN) return 0;
  vec = (vec + SC__NUTS_ALIGN - 1) / SC__NUTS_ALIGN * SC__NUTS_ALIGN;
  size_t nvec = top_vectors + (size_t)max_depth * level_vectors;
  if (vec != 0 && nvec > SIZE_MAX / vec) return 0;
  size_t head = (sizeof(nuts_chain) + SC__NUTS_ALIGN - 1) / SC__NUTS_ALIGN * SC__NUTS_ALIGN;
  size_t levs = ((size_t)(max_depth + 1) * sizeof(nuts_level) + SC__NUTS_ALIGN - 1) /
                SC__NUTS_ALIGN * SC__NUTS_ALIGN;
  size_t total = nvec * vec;
  if (total > SIZE_MAX - head - levs) return 0;
  *bytes = total + head + levs;
  return 1;
}

static double *carve(unsigned char **at, size_t n) {
  double *v = (double *)(void *)*at;
  size_t vec = (n * sizeof(double) + SC__NUTS_ALIGN - 1) / SC__NUTS_ALIGN * SC__NUTS_ALIGN;
  *at += vec;
  return v;
}

static void carve_pt(unsigned char **at, size_t n, nuts_pt *pt) {
  pt->q = carve(at, n);
  pt->p = carve(at, n);
  pt->g = carve(at, n);
  pt->lp = 0;
}

static nuts_chain *nuts_chain_carve(unsigned char *block, size_t n, int max_depth) {
  nuts_chain *ch = (nuts_chain *)(void *)block;
  memset(ch, 0, sizeof *ch);
  unsigned char *at =
      block + (sizeof(nuts_chain) + SC__NUTS_ALIGN - 1) / SC__NUTS_ALIGN * SC__NUTS_ALIGN;
  ch->lev = (nuts_level *)(void *)at;
  at += ((size_t)(max_depth + 1) * sizeof(nuts_level) + SC__NUTS_ALIGN - 1) / SC__NUTS_ALIGN *
        SC__NUTS_ALIGN;
  carve_pt(&at, n, &ch->z);
  carve_pt(&at, n, &ch->fwd);
  carve_pt(&at, n, &ch->bck);
  carve_pt(&at, n, &ch->sample);
  carve_pt(&at, n, &ch->propose);
  carve_pt(&at, n, &ch->init);
  ch->inv = carve(&at, n);
  ch->rho = carve(&at, n);
  ch->rho_fwd = carve(&at, n);
  ch->rho_bck = carve(&at, n);
  ch->tmp = carve(&at, n);
  ch->ps_fwd_bck = carve(&at, n);
  ch->ps_fwd_fwd = carve(&at, n);
  ch->ps_bck_fwd = carve(&at, n);
  ch->ps_bck_bck = carve(&at, n);
  ch->p_fwd_bck = carve(&at, n);
  ch->p_fwd_fwd = carve(&at, n);
  ch->p_bck_fwd = carve(&at, n);
  ch->p_bck_bck = carve(&at, n);
  ch->w_mean = carve(&at, n);
  ch->w_m2 = carve(&at, n);
  memset(&ch->lev[0], 0, sizeof ch->lev[0]);
  for (int d = 1; d <= max_depth; d++) {
    nuts_level *L = &ch->lev[d];
    carve_pt(&at, n, &L->prop_final);
    L->p_init_end = carve(&at, n);
    L->ps_init_end = carve(&at, n);
    L->rho_init = carve(&at, n);
    L->p_final_beg = carve(&at, n);
    L->ps_final_beg = carve(&at, n);
    L->rho_final = carve(&at, n);
  }
  return ch;
}

/* ---------------------------------------------------------------- the Hamiltonian */
static void vcopy(double *d, const double *s, size_t n) { memcpy(d, s, n * sizeof *d); }
static void vzero(double *d, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = 0;
}
static void vadd(double *d, const double *a, const double *b, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}
static void vacc(double *d, const double *a, size_t n) {
  for (size_t i = 0; i < n; i++) d[i] += a[i];
}
/* sums of n terms in 8 partial sums (term i into sum i mod 8, in order), added as
 * ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)), then the last n mod 8 terms: a fixed
 * order (the same draws whatever the thread count), and 8 chains of additions instead of one
 * (the U-turn criterion's dot products and the kinetic energy were 16 % of a BNN run) */
#define SC__NUTS_SUM8(n, TERM)                                                                     \
  double s_[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                         \
  size_t i_ = 0;                                                                                   \
  for (; i_ + 8 <= (n); i_ += 8)                                                                   \
    for (int j_ = 0; j_ < 8; j_++) {                                                               \
      size_t i = i_ + (size_t)j_;                                                                  \
      s_[j_] += TERM;                                                                              \
    }                                                                                              \
  double s = ((s_[0] + s_[1]) + (s_[2] + s_[3])) + ((s_[4] + s_[5]) + (s_[6] + s_[7]));            \
  for (size_t i = i_; i < (n); i++) s += TERM;

static double vdot(const double *a, const double *b, size_t n) {
  SC__NUTS_SUM8(n, a[i] * b[i])
  return s;
}
static void pt_copy(nuts_pt *d, const nuts_pt *s, size_t n) {
  vcopy(d->q, s->q, n);
  vcopy(d->p, s->p, n);
  vcopy(d->g, s->g, n);
  d->lp = s->lp;
}

/* Evaluates the callback at pt->q into pt->lp and pt->g. A non-finite value or gradient
 * makes lp -Inf (zero density). Returns non-zero when the callback failed (recorded). */
static int nuts_eval(nuts_chain *ch, nuts_pt *pt) {
  double lp = 0;
  ch->info.gradients++;
  int rc = ch->fn(ch->user, ch->id, pt->q, ch->n, &lp, pt->g);
  if (rc != 0) {
    ch->st = SC_ERR_CALLBACK;
    snprintf(ch->msg, sizeof ch->msg,
             "the log-density callback returned %d (chain %zu, iteration %zu)", rc, ch->id,
             ch->iteration);
    return 1;
  }
  int finite = isfinite(lp);
  for (size_t i = 0; finite && i < ch->n; i++) finite = isfinite(pt->g[i]);
  if (!finite) {
    lp = -INFINITY;
    vzero(pt->g, ch->n); /* keeps NaN out of the momenta; the step is divergent anyway */
  }
  pt->lp = lp;
  return 0;
}

static double kinetic(const nuts_chain *ch, const double *p) {
  const double *inv = ch->inv;
  SC__NUTS_SUM8(ch->n, p[i] * p[i] * inv[i])
  return 0.5 * s;
}

/* H = -lp + K(p); NaN is taken as +Inf */
static double hamiltonian(const nuts_chain *ch, const nuts_pt *z) {
  double h = -z->lp + kinetic(ch, z->p);
  return isnan(h) ? INFINITY : h;
}

static void sharp(const nuts_chain *ch, const double *p, double *ps) {
  for (size_t i = 0; i < ch->n; i++) ps[i] = ch->inv[i] * p[i];
}

static void sample_momentum(nuts_chain *ch, double *p) {
  for (size_t i = 0; i < ch->n; i++) p[i] = rng_normal(&ch->rng) / sqrt(ch->inv[i]);
}

/* one leapfrog step of size eps (signed) on ch->z */
static int leapfrog(nuts_chain *ch, double eps) {
  nuts_pt *z = &ch->z;
  size_t n = ch->n;
  for (size_t i = 0; i < n; i++) z->p[i] += 0.5 * eps * z->g[i];
  for (size_t i = 0; i < n; i++) z->q[i] += eps * ch->inv[i] * z->p[i];
  if (nuts_eval(ch, z)) return 1;
  for (size_t i = 0; i < n; i++) z->p[i] += 0.5 * eps * z->g[i];
  return 0;
}

/* ---------------------------------------------------------------- the trajectory */
static double log_sum_exp(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double m = a > b ? a : b;
  return m + log(exp(a - m) + exp(b - m));
}

/* the generalised no-U-turn criterion between two ends with momentum sum rho */
static int criterion(const nuts_chain *ch, const double *ps_minus, const double *ps_plus,
                     const double *rho) {
  return vdot(ps_plus, rho, ch->n) > 0 && vdot(ps_minus, rho, ch->n) > 0;
}

/* Builds a subtree of 2^depth leapfrog steps from ch->z in direction sign. On return
 * *propose holds the subtree's multinomial sample; ps_beg/ps_end and p_beg/p_end the sharp
 * and plain momenta at its two ends; rho (accumulated) its momentum sum; *lsw (accumulated)
 * its log total weight. Returns 1 when the subtree is valid (no divergence, no U-turn), 0
 * otherwise, -1 when the callback failed. */
static int build_tree(nuts_chain *ch, int depth, nuts_pt *propose, double *ps_beg, double *ps_end,
                      double *rho, double *p_beg, double *p_end, double sign, double *lsw) {
  size_t n = ch->n;
  if (depth == 0) {
    if (leapfrog(ch, sign * ch->eps)) return -1;
    ch->n_leapfrog++;
    double h = hamiltonian(ch, &ch->z);
    if (h - ch->H0 > ch->o->max_energy_error) ch->divergent = 1;
    double dH = ch->H0 - h;
    *lsw = log_sum_exp(*lsw, dH);
    ch->sum_metro += dH > 0 ? 1.0 : exp(dH);
    pt_copy(propose, &ch->z, n);
    sharp(ch, ch->z.p, ps_beg);
    vcopy(ps_end, ps_beg, n);
    vacc(rho, ch->z.p, n);
    vcopy(p_beg, ch->z.p, n);
    vcopy(p_end, ch->z.p, n);
    return !ch->divergent;
  }
  nuts_level *L = &ch->lev[depth];
  /* the initial subtree */
  double lsw_init = -INFINITY;
  vzero(L->rho_init, n);
  int v = build_tree(ch, depth - 1, propose, ps_beg, L->ps_init_end, L->rho_init, p_beg,
                     L->p_init_end, sign, &lsw_init);
  if (v <= 0) return v;
  /* the final subtree */
  double lsw_final = -INFINITY;
  vzero(L->rho_final, n);
  v = build_tree(ch, depth - 1, &L->prop_final, L->ps_final_beg, ps_end, L->rho_final,
                 L->p_final_beg, p_end, sign, &lsw_final);
  if (v <= 0) return v;
  /* multinomial sample between the two, uniform in weight */
  double lsw_sub = log_sum_exp(lsw_init, lsw_final);
  *lsw = log_sum_exp(*lsw, lsw_sub);
  if (lsw_final > lsw_sub) {
    pt_copy(propose, &L->prop_final, n);
  } else {
    double a = exp(lsw_final - lsw_sub);
    if (rng_unif(&ch->rng) < a) pt_copy(propose, &L->prop_final, n);
  }
  /* the criterion across the merged subtree and across its two halves */
  double *rho_sub = ch->tmp;
  vadd(rho_sub, L->rho_init, L->rho_final, n);
  vacc(rho, rho_sub, n);
  int persist = criterion(ch, ps_beg, ps_end, rho_sub);
  vadd(rho_sub, L->rho_init, L->p_final_beg, n);
  persist = persist && criterion(ch, ps_beg, L->ps_final_beg, rho_sub);
  vadd(rho_sub, L->rho_final, L->p_init_end, n);
  persist = persist && criterion(ch, L->ps_init_end, ps_end, rho_sub);
  return persist;
}

typedef struct nuts_step {
  double accept;
  double energy;
  int depth;
} nuts_step;

/* One NUTS transition from ch->sample (q, g, lp valid); the new state is left there.
 * Returns non-zero when the callback failed. */
static int transition(nuts_chain *ch, nuts_step *out) {
  size_t n = ch->n;
  nuts_pt *z = &ch->z;
  vcopy(z->q, ch->sample.q, n);
  vcopy(z->g, ch->sample.g, n);
  z->lp = ch->sample.lp;
  sample_momentum(ch, z->p);
  vcopy(ch->sample.p, z->p, n);
  ch->H0 = hamiltonian(ch, z);
  pt_copy(&ch->fwd, z, n);
  pt_copy(&ch->bck, z, n);
  ch->divergent = 0;
  ch->n_leapfrog = 0;
  ch->sum_metro = 0;
  double lsw = 0; /* the initial point has weight exp(0) */
  vcopy(ch->rho, z->p, n);
  sharp(ch, z->p, ch->ps_fwd_bck);
  vcopy(ch->ps_fwd_fwd, ch->ps_fwd_bck, n);
  vcopy(ch->ps_bck_fwd, ch->ps_fwd_bck, n);
  vcopy(ch->ps_bck_bck, ch->ps_fwd_bck, n);
  vcopy(ch->p_fwd_bck, z->p, n);
  vcopy(ch->p_fwd_fwd, z->p, n);
  vcopy(ch->p_bck_fwd, z->p, n);
  vcopy(ch->p_bck_bck, z->p, n);
  int depth = 0;
  while (depth < ch->o->max_depth) {
    vzero(ch->rho_fwd, n);
    vzero(ch->rho_bck, n);
    double lsw_sub = -INFINITY;
    int v;
    if (rng_unif(&ch->rng) > 0.5) { /* extend forwards */
      pt_copy(z, &ch->fwd, n);
      vcopy(ch->rho_bck, ch->rho, n);
      vcopy(ch->p_bck_fwd, ch->p_fwd_bck, n);
      vcopy(ch->ps_bck_fwd, ch->ps_fwd_bck, n);
      v = build_tree(ch, depth, &ch->propose, ch->ps_fwd_bck, ch->ps_fwd_fwd, ch->rho_fwd,
                     ch->p_fwd_bck, ch->p_fwd_fwd, 1.0, &lsw_sub);
      pt_copy(&ch->fwd, z, n);
    } else { /* extend backwards */
      pt_copy(z, &ch->bck, n);
      vcopy(ch->rho_fwd, ch->rho, n);
      vcopy(ch->p_fwd_bck, ch->p_bck_fwd, n);
      vcopy(ch->ps_fwd_bck, ch->ps_bck_fwd, n);
      v = build_tree(ch, depth, &ch->propose, ch->ps_bck_fwd, ch->ps_bck_bck, ch->rho_bck,
                     ch->p_bck_fwd, ch->p_bck_bck, -1.0, &lsw_sub);
      pt_copy(&ch->bck, z, n);
    }
    if (v < 0) return 1;
    if (v == 0) break;
    depth++;
    /* biased progressive sampling towards the new subtree */
    if (lsw_sub > lsw) {
      pt_copy(&ch->sample, &ch->propose, n);
    } else {
      double a = exp(lsw_sub - lsw);
      if (rng_unif(&ch->rng) < a) pt_copy(&ch->sample, &ch->propose, n);
    }
    lsw = log_sum_exp(lsw, lsw_sub);
    vadd(ch->rho, ch->rho_bck, ch->rho_fwd, n);
    int persist = criterion(ch, ch->ps_bck_bck, ch->ps_fwd_fwd, ch->rho);
    vadd(ch->tmp, ch->rho_bck, ch->p_fwd_bck, n);
    persist = persist && criterion(ch, ch->ps_bck_bck, ch->ps_fwd_bck, ch->tmp);
    vadd(ch->tmp, ch->rho_fwd, ch->p_bck_fwd, n);
    persist = persist && criterion(ch, ch->ps_bck_fwd, ch->ps_fwd_fwd, ch->tmp);
    if (!persist) break;
  }
  out->depth = depth;
  out->accept = ch->n_leapfrog ? ch->sum_metro / (double)ch->n_leapfrog : 0.0;
  out->energy = hamiltonian(ch, &ch->sample);
  return 0;
}

/* ---------------------------------------------------------------- adaptation */
static void da_restart(nuts_chain *ch) {
  ch->da_count = 0;
  ch->da_sbar = 0;
  ch->da_xbar = 0;
}

static void da_learn(nuts_chain *ch, double accept) {
  const sc_nuts_opts *o = ch->o;
  ch->da_count++;
  if (accept > 1) accept = 1;
  double t = (double)ch->da_count;
  double eta = 1.0 / (t + o->t0);
  ch->da_sbar = (1.0 - eta) * ch->da_sbar + eta * (o->delta - accept);
  double x = ch->da_mu - ch->da_sbar * sqrt(t) / o->gamma;
  double xeta = pow(t, -o->kappa);
  ch->da_xbar = (1.0 - xeta) * ch->da_xbar + xeta * x;
  ch->eps = exp(x);
}

/* Stan's heuristic: double or halve eps until one leapfrog step's acceptance crosses 0.8.
 * Leaves ch->sample as it was. Returns non-zero on failure (recorded). */
static int init_stepsize(nuts_chain *ch) {
  size_t n = ch->n;
  if (ch->eps == 0 || ch->eps > 1e7 || isnan(ch->eps)) return 0;
  const double log08 = log(0.8);
  int direction = 0;
  for (;;) {
    nuts_pt *z = &ch->z;
    vcopy(z->q, ch->sample.q, n);
    vcopy(z->g, ch->sample.g, n);
    z->lp = ch->sample.lp;
    sample_momentum(ch, z->p);
    double H0 = hamiltonian(ch, z);
    if (leapfrog(ch, ch->eps)) return 1;
    double h = hamiltonian(ch, z);
    double dH = H0 - h;
    if (direction == 0)
      direction = dH > log08 ? 1 : -1;
    else if (direction == 1 && !(dH > log08))
      break;
    else if (direction == -1 && !(dH < log08))
      break;
    ch->eps = direction == 1 ? 2 * ch->eps : 0.5 * ch->eps;
    if (ch->eps > 1e7) {
      ch->st = SC_ERR_NONFINITE;
      snprintf(ch->msg, sizeof ch->msg,
               "chain %zu: the step size grew past 1e7 in the step-size search: the "
               "density looks improper (flat or unbounded in some direction)",
               ch->id);
      return 1;
    }
    if (ch->eps == 0) {
      ch->st = SC_ERR_NONFINITE;
      snprintf(ch->msg, sizeof ch->msg,
               "chain %zu: no acceptably small step size (the log density or its gradient "
               "is not finite next to the current point)",
               ch->id);
      return 1;
    }
  }
  return 0;
}

/* Stan's windows: an initial buffer, doubling slow windows, a terminal buffer. */
static void windows_setup(nuts_chain *ch) {
  const sc_nuts_opts *o = ch->o;
  size_t W = o->warmup;
  ch->init_buffer = o->init_buffer;
  ch->term_buffer = o->term_buffer;
  ch->base_window = o->base_window;
  ch->adapt_windows = o->adapt_metric && W >= 20;
  if (ch->adapt_windows && ch->init_buffer + ch->base_window + ch->term_buffer > W) {
    ch->init_buffer = (size_t)(0.15 * (double)W);
    ch->term_buffer = (size_t)(0.1 * (double)W);
    ch->base_window = W - (ch->init_buffer + ch->term_buffer);
  }
  ch->win_count = 0;
  ch->win_size = ch->base_window;
  ch->win_next = ch->init_buffer + ch->win_size - 1;
  ch->w_n = 0;
  vzero(ch->w_mean, ch->n);
  vzero(ch->w_m2, ch->n);
}

static void windows_next(nuts_chain *ch) {
  size_t W = ch->o->warmup;
  size_t last = W - ch->term_buffer - 1;
  if (ch->win_next == last) return;
  ch->win_size *= 2;
  ch->win_next = ch->win_count + ch->win_size;
  if (ch->win_next != last) {
    size_t boundary = ch->win_next + 2 * ch->win_size;
    if (boundary >= W - ch->term_buffer) ch->win_next = last;
  }
}

/* Adds the state to the current window; at a window's end updates the inverse metric and
 * returns 1. */
static int windows_learn(nuts_chain *ch, const double *q) {
  size_t W = ch->o->warmup, n = ch->n;
  size_t c = ch->win_count;
  if (c >= ch->init_buffer && c < W - ch->term_buffer && c != W) {
    ch->w_n++;
    double k = (double)ch->w_n;
    for (size_t i = 0; i < n; i++) {
      double d = q[i] - ch->w_mean[i];
      ch->w_mean[i] += d / k;
      ch->w_m2[i] += d * (q[i] - ch->w_mean[i]);
    }
  }
  if (c == ch->win_next && c != W) {
    windows_next(ch);
    double w = (double)ch->w_n;
    if (ch->w_n >= 2) {
      for (size_t i = 0; i < n; i++) {
        double var = ch->w_m2[i] / (w - 1.0);
        ch->inv[i] = (w / (w + 5.0)) * var + 1e-3 * (5.0 / (w + 5.0));
      }
    }
    ch->w_n = 0;
    vzero(ch->w_mean, n);
    vzero(ch->w_m2, n);
    ch->win_count++;
    return 1;
  }
  ch->win_count++;
  return 0;
}

/* ---------------------------------------------------------------- one chain */
static double nuts_now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A finite starting point: opts->init's row, or uniform draws in (-r, r). */
static int find_init(nuts_chain *ch) {
  const sc_nuts_opts *o = ch->o;
  size_t n = ch->n;
  int tries = o->init ? 1 : SC__NUTS_INIT_TRIES;
  for (int t = 0; t < tries; t++) {
    ch->info.init_attempts++;
    if (o->init)
      vcopy(ch->sample.q, o->init + ch->id * n, n);
    else
      for (size_t i = 0; i < n; i++)
        ch->sample.q[i] = o->init_radius * (2.0 * rng_unif(&ch->rng) - 1.0);
    if (nuts_eval(ch, &ch->sample)) return 1;
    if (isfinite(ch->sample.lp)) return 0;
  }
  ch->st = SC_ERR_NONFINITE;
  if (o->init)
    snprintf(ch->msg, sizeof ch->msg,
             "chain %zu: the log density or its gradient is not finite at opts->init (row %zu)",
             ch->id, ch->id);
  else
    snprintf(ch->msg, sizeof ch->msg,
             "chain %zu: no initial point with a finite log density and gradient in %d "
             "uniform draws in (-%g, %g)",
             ch->id, tries, o->init_radius, o->init_radius);
  return 1;
}

typedef struct nuts_run {
  sc_logdensity_fn fn;
  void *user;
  size_t n;
  const sc_nuts_opts *o;
  const sc_nuts_out *out;
  unsigned char *chains; /* chains blocks of chain_bytes */
  size_t chain_bytes;
#if SC__NUTS_THREADS
  atomic_size_t next;
  atomic_int stop;
#else
  size_t next;
  int stop;
#endif
} nuts_run;

static int run_stopped(nuts_run *R) {
#if SC__NUTS_THREADS
  return atomic_load_explicit(&R->stop, memory_order_relaxed);
#else
  return R->stop;
#endif
}
static void run_stop(nuts_run *R) {
#if SC__NUTS_THREADS
  atomic_store_explicit(&R->stop, 1, memory_order_relaxed);
#else
  R->stop = 1;
#endif
}

static void run_chain(nuts_run *R, size_t c) {
  const sc_nuts_opts *o = R->o;
  size_t n = R->n, D = o->draws, W = o->warmup, total = W + D;
  nuts_chain *ch = nuts_chain_carve(R->chains + c * R->chain_bytes, n, o->max_depth);
  double t0 = nuts_now();
  ch->n = n;
  ch->id = c;
  ch->o = o;
  ch->fn = R->fn;
  ch->user = R->user;
  ch->st = SC_OK;
  rng_seed(&ch->rng, o->seed, c);
  for (size_t i = 0; i < n; i++) ch->inv[i] = 1.0;
  double sum_accept = 0;
  if (find_init(ch)) goto done;
  ch->eps = o->step_size;
  if (init_stepsize(ch)) goto done;
  ch->da_mu = log(10 * ch->eps);
  da_restart(ch);
  windows_setup(ch);
  for (size_t it = 0; it < total; it++) {
    if (run_stopped(R)) {
      ch->st = SC_ERR_STOPPED;
      ch->collateral = 1;
      snprintf(ch->msg, sizeof ch->msg, "chain %zu stopped at iteration %zu (another chain failed)",
               c, it + 1);
      goto done;
    }
    ch->iteration = it + 1;
    nuts_step s;
    if (transition(ch, &s)) goto done;
    if (it < W) {
      if (ch->divergent) ch->info.warmup_divergences++;
      da_learn(ch, s.accept);
      if (ch->adapt_windows && windows_learn(ch, ch->sample.q)) {
        if (init_stepsize(ch)) goto done;
        ch->da_mu = log(10 * ch->eps);
        da_restart(ch);
      }
      if (it + 1 == W) ch->eps = exp(ch->da_xbar);
    } else {
      size_t d = it - W;
      vcopy(R->out->draws + (c * D + d) * n, ch->sample.q, n);
      sum_accept += s.accept;
      if (ch->divergent) ch->info.divergences++;
      if (s.depth >= o->max_depth) ch->info.max_depth_hits++;
      if (R->out->stats) {
        sc_nuts_stats *st = &R->out->stats[c * D + d];
        st->lp = ch->sample.lp;
        st->accept_stat = s.accept;
        st->step_size = ch->eps;
        st->energy = s.energy;
        st->n_leapfrog = (uint32_t)ch->n_leapfrog;
        st->tree_depth = (uint16_t)s.depth;
        st->divergent = (uint16_t)ch->divergent;
      }
    }
    if (o->progress && o->progress_every &&
        ((it + 1) % o->progress_every == 0 || it + 1 == total) &&
        o->progress(o->progress_user, c, it + 1, total)) {
      ch->st = SC_ERR_STOPPED;
      snprintf(ch->msg, sizeof ch->msg,
               "the progress callback asked to stop (chain %zu, iteration %zu)", c, it + 1);
      goto done;
    }
  }
  ch->info.step_size = ch->eps;
  ch->info.mean_accept = sum_accept / (double)D;
  if (R->out->inv_metric) vcopy(R->out->inv_metric + c * n, ch->inv, n);
done:
  ch->info.seconds = nuts_now() - t0;
  if (R->out->info) R->out->info[c] = ch->info;
  if (ch->st != SC_OK) run_stop(R);
}

/* ---------------------------------------------------------------- chains on threads */
static size_t run_claim(nuts_run *R) {
#if SC__NUTS_THREADS
  return atomic_fetch_add_explicit(&R->next, 1, memory_order_relaxed);
#else
  return R->next++;
#endif
}

static void *run_worker(void *arg) {
  nuts_run *R = arg;
  for (size_t c; (c = run_claim(R)) < R->o->chains;) run_chain(R, c);
  return NULL;
}

sc_nuts_opts sc_nuts_defaults(void) {
  sc_nuts_opts o;
  memset(&o, 0, sizeof o);
  o.chains = 4;
  o.warmup = 1000;
  o.draws = 1000;
  o.threads = 1;
  o.max_depth = 10;
  o.delta = 0.8;
  o.gamma = 0.05;
  o.t0 = 10;
  o.kappa = 0.75;
  o.max_energy_error = 1000;
  o.step_size = 1;
  o.adapt_metric = 1;
  o.init_buffer = 75;
  o.term_buffer = 50;
  o.base_window = 25;
  o.init_radius = 2;
  return o;
}

static sc_status check_opts(const char *fn, size_t n, const sc_nuts_opts *o) {
  if (!o) return sc_set_error(SC_ERR_NULL, fn, "argument 'opts' is NULL");
  if (n == 0) return sc_set_error(SC_ERR_ARG, fn, "n is 0: nothing to sample");
  if (o->chains == 0) return sc_set_error(SC_ERR_ARG, fn, "opts->chains is 0");
  if (o->draws == 0) return sc_set_error(SC_ERR_ARG, fn, "opts->draws is 0");
  if (o->warmup > SIZE_MAX / 4 || o->draws > SIZE_MAX / 4)
    return sc_set_error(SC_ERR_ARG, fn, "opts->warmup + opts->draws is too large");
  if (o->threads < 1)
    return sc_set_error(SC_ERR_ARG, fn, "opts->threads = %d must be >= 1", o->threads);
  if (o->max_depth < 1 || o->max_depth > 30)
    return sc_set_error(SC_ERR_ARG, fn, "opts->max_depth = %d must be in [1, 30]", o->max_depth);
  if (!(o->delta > 0 && o->delta < 1))
    return sc_set_error(SC_ERR_ARG, fn, "opts->delta = %g must be in (0, 1)", o->delta);
  if (!(o->gamma > 0 && isfinite(o->gamma)))
    return sc_set_error(SC_ERR_ARG, fn, "opts->gamma = %g must be finite and > 0", o->gamma);
  if (!(o->t0 >= 0 && isfinite(o->t0)))
    return sc_set_error(SC_ERR_ARG, fn, "opts->t0 = %g must be finite and >= 0", o->t0);
  if (!(o->kappa > 0 && o->kappa <= 1))
    return sc_set_error(SC_ERR_ARG, fn, "opts->kappa = %g must be in (0, 1]", o->kappa);
  if (!(o->max_energy_error > 0))
    return sc_set_error(SC_ERR_ARG, fn, "opts->max_energy_error = %g must be > 0",
                        o->max_energy_error);
  if (!(o->step_size > 0 && isfinite(o->step_size)))
    return sc_set_error(SC_ERR_ARG, fn, "opts->step_size = %g must be finite and > 0",
                        o->step_size);
  if (o->adapt_metric != 0 && o->adapt_metric != 1)
    return sc_set_error(SC_ERR_ARG, fn, "opts->adapt_metric = %d must be 0 or 1", o->adapt_metric);
  if (o->adapt_metric && o->warmup >= 20 && o->base_window == 0)
    return sc_set_error(SC_ERR_ARG, fn, "opts->base_window is 0");
  if (!o->init && !(o->init_radius > 0 && isfinite(o->init_radius)))
    return sc_set_error(SC_ERR_ARG, fn, "opts->init_radius = %g must be finite and > 0",
                        o->init_radius);
  if (o->init) {
    for (size_t i = 0; i < o->chains * n; i++)
      if (!isfinite(o->init[i]))
        return sc_set_error(SC_ERR_NONFINITE, fn,
                            "opts->init[%zu] (chain %zu, coordinate %zu) is %g", i, i / n, i % n,
                            o->init[i]);
  }
  return SC_OK;
}

static sc_status plan_bytes(const char *fn, size_t n, const sc_nuts_opts *opts, size_t *bytes) {
  size_t per;
  if (!nuts_chain_layout(n, opts->max_depth, &per) ||
      opts->chains > (SIZE_MAX - 2 * SC__NUTS_ALIGN) / per)
    return sc_set_error(SC_ERR_OVERFLOW, fn,
                        "memory for %zu chains of %zu coordinates overflows size_t", opts->chains,
                        n);
  *bytes = opts->chains * per + SC__NUTS_ALIGN;
  return SC_OK;
}

sc_status sc_nuts_bytes(size_t n, const sc_nuts_opts *opts, size_t *bytes) {
  const char *fn = "sc_nuts_bytes";
  if (!bytes) return sc_set_error(SC_ERR_NULL, fn, "argument 'bytes' is NULL");
  *bytes = 0;
  sc_status st = check_opts(fn, n, opts);
  if (st) return st;
  return plan_bytes(fn, n, opts, bytes);
}

sc_status sc_nuts_sample(sc_logdensity_fn fn, void *user, size_t n, const sc_nuts_opts *opts,
                         const sc_nuts_out *out, void *mem, size_t bytes) {
  const char *fname = "sc_nuts_sample";
  if (!fn) return sc_set_error(SC_ERR_NULL, fname, "argument 'fn' is NULL");
  if (!out) return sc_set_error(SC_ERR_NULL, fname, "argument 'out' is NULL");
  if (!out->draws) return sc_set_error(SC_ERR_NULL, fname, "out->draws is NULL");
  sc_status st = check_opts(fname, n, opts);
  if (st) return st;
  size_t need = 0;
  st = plan_bytes(fname, n, opts, &need);
  if (st) return st;
  /* products the outputs are indexed by */
  if (opts->chains > SIZE_MAX / opts->draws ||
      opts->chains * opts->draws > SIZE_MAX / n / sizeof(double))
    return sc_set_error(SC_ERR_OVERFLOW, fname, "chains x draws x n overflows size_t");
#if !SC__NUTS_THREADS
  if (opts->threads > 1)
    return sc_set_error(SC_ERR_UNSUPPORTED, fname,
                        "opts->threads = %d, but this build has no threads (SC_NO_THREADS)",
                        opts->threads);
#endif
  void *owned = NULL;
  if (!mem) {
    owned = malloc(need);
    if (!owned)
      return sc_set_error(SC_ERR_NOMEM, fname, "out of memory for the sampler's state (%zu bytes)",
                          need);
    mem = owned;
  } else if (bytes < need) {
    return sc_set_error(SC_ERR_NOMEM, fname, "mem holds %zu bytes, the sampler needs %zu", bytes,
                        need);
  }
  nuts_run R;
  memset(&R, 0, sizeof R);
  R.fn = fn;
  R.user = user;
  R.n = n;
  R.o = opts;
  R.out = out;
  uintptr_t a = (uintptr_t)mem;
  R.chains = (unsigned char *)mem + ((SC__NUTS_ALIGN - a % SC__NUTS_ALIGN) % SC__NUTS_ALIGN);
  nuts_chain_layout(n, opts->max_depth, &R.chain_bytes);
#if SC__NUTS_THREADS
  atomic_init(&R.next, 0);
  atomic_init(&R.stop, 0);
  size_t nt = (size_t)opts->threads < opts->chains ? (size_t)opts->threads : opts->chains;
  pthread_t th[64];
  size_t started = 0;
  if (nt > 65) nt = 65; /* the caller plus 64 workers */
  for (; started + 1 < nt; started++)
    if (pthread_create(&th[started], NULL, run_worker, &R) != 0) break;
  sc_status thread_err = SC_OK;
  if (started + 1 < nt) {
    run_stop(&R);
    thread_err = SC_ERR_THREAD;
  }
  if (!thread_err) run_worker(&R);
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  if (thread_err) {
    free(owned);
    return sc_set_error(SC_ERR_THREAD, fname, "pthread_create failed for worker %zu of %zu",
                        started + 1, nt);
  }
#else
  run_worker(&R);
#endif
  /* the failure of the lowest-numbered chain that failed on its own account */
  const nuts_chain *bad = NULL;
  for (size_t c = 0; c < opts->chains; c++) {
    const nuts_chain *ch = (const nuts_chain *)(const void *)(R.chains + c * R.chain_bytes);
    if (ch->st == SC_OK) continue;
    if (!bad || (bad->collateral && !ch->collateral)) bad = ch;
    if (!bad->collateral) break;
  }
  if (bad) {
    st = sc_set_error(bad->st, fname, "%s", bad->msg);
    free(owned);
    return st;
  }
  free(owned);
  return SC_OK;
}

/* ---------------------------------------------------------------- diagnostics */
/* Inverse of the standard normal CDF: Acklam's rational approximation (relative error
 * below 1.2e-9) refined by one Halley step on erfc, which brings it to double precision. */
static double norm_quantile(double p) {
  static const double a[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                              -2.759285104469687e+02, 1.383577518672690e+02,
                              -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[5] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                              6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                              -2.400758277161838e+00, -2.549732539343734e+00,
                              4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                              3.754408661907416e+00};
  if (!(p > 0)) return -INFINITY;
  if (!(p < 1)) return INFINITY;
  double x;
  if (p < 0.02425) {
    double q = sqrt(-2 * log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = sqrt(-2 * log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  double e = 0.5 * erfc(-x / sqrt(2.0)) - p;
  double u = e * SC__SQRT_2PI * exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

/* R-hat of M chains of N values (x[c*N + k]) */
static double rhat_basic(const double *x, size_t M, size_t N) {
  if (M < 2 || N < 2) return NAN;
  double W = 0, mm = 0, mv = 0;
  for (size_t c = 0; c < M; c++) {
    const double *y = x + c * N;
    double m = 0, v = 0;
    for (size_t k = 0; k < N; k++) m += y[k];
    m /= (double)N;
    for (size_t k = 0; k < N; k++) v += (y[k] - m) * (y[k] - m);
    W += v / (double)(N - 1);
    double d = m - mm; /* Welford over the chain means */
    mm += d / (double)(c + 1);
    mv += d * (m - mm);
  }
  W /= (double)M;
  double B_over_N = mv / (double)(M - 1);
  double var_hat = W * (double)(N - 1) / (double)N + B_over_N;
  return sqrt(var_hat / W);
}

/* ESS of M chains of N values (Geyer's initial monotone sequence over the autocorrelations
 * combined across chains, the antithetic correction, capped at M N log10(M N)).
 * rho: scratch of N + 2 values, means: scratch of M values. */
static double ess_basic(const double *x, size_t M, size_t N, double *rho, double *means) {
  if (N < 4) return NAN;
  double mean_var = 0, mm = 0, mv = 0;
  for (size_t c = 0; c < M; c++) {
    const double *y = x + c * N;
    double m = 0, a0 = 0;
    for (size_t k = 0; k < N; k++) m += y[k];
    m /= (double)N;
    means[c] = m;
    for (size_t k = 0; k < N; k++) a0 += (y[k] - m) * (y[k] - m);
    mean_var += a0 / (double)(N - 1);
    double d = m - mm;
    mm += d / (double)(c + 1);
    mv += d * (m - mm);
  }
  mean_var /= (double)M;
  double var_plus = mean_var * (double)(N - 1) / (double)N;
  if (M > 1) var_plus += mv / (double)(M - 1);
  if (!(var_plus > 0)) return NAN;
/* rho at lag t from the chains' biased autocovariances */
#define SC__RHO_AT(t, out)                                                                         \
  do {                                                                                             \
    double acov_ = 0;                                                                              \
    for (size_t c_ = 0; c_ < M; c_++) {                                                            \
      const double *y_ = x + c_ * N;                                                               \
      double s_ = 0;                                                                               \
      for (size_t k_ = 0; k_ + (t) < N; k_++)                                                      \
        s_ += (y_[k_] - means[c_]) * (y_[k_ + (t)] - means[c_]);                                   \
      acov_ += s_ / (double)N;                                                                     \
    }                                                                                              \
    (out) = 1.0 - (mean_var - acov_ / (double)M) / var_plus;                                       \
  } while (0)
  for (size_t k = 0; k < N + 2; k++) rho[k] = 0;
  size_t t = 0;
  double even = 1, odd;
  rho[0] = 1;
  SC__RHO_AT(1, odd);
  rho[1] = odd;
  while (t + 5 < N && !isnan(even + odd) && even + odd > 0) {
    t += 2;
    SC__RHO_AT(t, even);
    SC__RHO_AT(t + 1, odd);
    if (even + odd >= 0) {
      rho[t] = even;
      rho[t + 1] = odd;
    }
  }
#undef SC__RHO_AT
  size_t max_t = t;
  if (even > 0) rho[max_t] = even;
  /* Geyer's initial monotone sequence */
  for (t = 0; t + 4 <= max_t;) {
    t += 2;
    if (rho[t] + rho[t + 1] > rho[t - 2] + rho[t - 1]) {
      rho[t] = (rho[t - 2] + rho[t - 1]) / 2;
      rho[t + 1] = rho[t];
    }
  }
  double S = (double)(M * N);
  double tau = -1;
  for (size_t k = 0; k < max_t; k++) tau += 2 * rho[k];
  tau += rho[max_t];
  double floor_tau = 1 / log10(S);
  if (tau < floor_tau) tau = floor_tau;
  return S / tau;
}

typedef struct sc__ranked {
  double v;
  size_t i;
} sc__ranked;

static int ranked_cmp(const void *a, const void *b) {
  const sc__ranked *x = a, *y = b;
  if (x->v < y->v) return -1;
  if (x->v > y->v) return 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* z[i] = Phi^-1((r_i - 3/8) / (S + 1/4)), r_i the average rank of x[i] among the S values;
 * leaves the sorted values in pairs */
static void z_scale(const double *x, size_t S, sc__ranked *pairs, double *z) {
  for (size_t i = 0; i < S; i++) {
    pairs[i].v = x[i];
    pairs[i].i = i;
  }
  qsort(pairs, S, sizeof *pairs, ranked_cmp);
  for (size_t a = 0; a < S;) {
    size_t b = a;
    while (b + 1 < S && pairs[b + 1].v == pairs[a].v) b++;
    double r = 0.5 * (double)(a + 1 + b + 1); /* ranks a+1 .. b+1 */
    double zz = norm_quantile((r - 0.375) / ((double)S + 0.25));
    for (size_t k = a; k <= b; k++) z[pairs[k].i] = zz;
    a = b + 1;
  }
}

/* R's type-7 quantile of sorted values */
static double quantile7(const sc__ranked *sorted, size_t S, double prob) {
  double h = (double)(S - 1) * prob;
  size_t lo = (size_t)floor(h);
  if (lo + 1 >= S) return sorted[S - 1].v;
  return sorted[lo].v + (h - (double)lo) * (sorted[lo + 1].v - sorted[lo].v);
}

typedef struct sc__diag_scratch {
  sc__ranked *pairs; /* S */
  double *all, *sp, *a, *rho, *means;
} sc__diag_scratch;

static size_t diag_scratch_bytes(size_t C, size_t D, int *ok) {
  size_t S = C * D;
  if (C != 0 && S / C != D) *ok = 0;
  if (S > SIZE_MAX / 64) *ok = 0;
  return S * sizeof(sc__ranked) + (4 * S + D + 2 + 2 * C) * sizeof(double);
}

static void diag_scratch_carve(sc__diag_scratch *w, void *mem, size_t C, size_t D) {
  size_t S = C * D;
  w->pairs = mem;
  w->all = (double *)(void *)(w->pairs + S);
  w->sp = w->all + S;
  w->a = w->sp + S;
  w->rho = w->a + S;
  w->means = w->rho + D + 2; /* rho holds D + 2 */
}

static void summary_one(const double *draws, size_t C, size_t D, size_t n, size_t idx,
                        sc__diag_scratch *w, sc_mcmc_summary *s) {
  size_t S = C * D, N = D / 2, M = 2 * C, SP = M * N;
  s->mean = s->sd = s->mcse_mean = s->q5 = s->q50 = s->q95 = NAN;
  s->rhat = s->ess_bulk = s->ess_tail = s->ess_mean = NAN;
  for (size_t c = 0; c < C; c++)
    for (size_t d = 0; d < D; d++) w->all[c * D + d] = draws[(c * D + d) * n + idx];
  for (size_t i = 0; i < S; i++)
    if (!isfinite(w->all[i])) return;
  double m = 0, v = 0;
  for (size_t i = 0; i < S; i++) m += w->all[i];
  m /= (double)S;
  for (size_t i = 0; i < S; i++) v += (w->all[i] - m) * (w->all[i] - m);
  s->mean = m;
  s->sd = S > 1 ? sqrt(v / (double)(S - 1)) : NAN;
  for (size_t i = 0; i < S; i++) {
    w->pairs[i].v = w->all[i];
    w->pairs[i].i = i;
  }
  qsort(w->pairs, S, sizeof *w->pairs, ranked_cmp);
  s->q5 = quantile7(w->pairs, S, 0.05);
  s->q50 = quantile7(w->pairs, S, 0.5);
  s->q95 = quantile7(w->pairs, S, 0.95);
  if (w->pairs[0].v == w->pairs[S - 1].v) return; /* constant: R-hat and ESS undefined */
  /* split chains */
  for (size_t c = 0; c < C; c++)
    for (size_t k = 0; k < N; k++) {
      w->sp[(2 * c) * N + k] = w->all[c * D + k];
      w->sp[(2 * c + 1) * N + k] = w->all[c * D + D - N + k];
    }
  s->ess_mean = ess_basic(w->sp, M, N, w->rho, w->means);
  s->mcse_mean = s->sd / sqrt(s->ess_mean);
  /* bulk: rank-normalised split chains */
  z_scale(w->sp, SP, w->pairs, w->a);
  double rhat_bulk = rhat_basic(w->a, M, N);
  s->ess_bulk = ess_basic(w->a, M, N, w->rho, w->means);
  /* tail R-hat: the folded split chains, |x - median| */
  double med = quantile7(w->pairs, SP, 0.5); /* pairs hold the sorted split values */
  for (size_t i = 0; i < SP; i++) w->a[i] = fabs(w->sp[i] - med);
  z_scale(w->a, SP, w->pairs, w->a);
  double rhat_tail = rhat_basic(w->a, M, N);
  s->rhat = rhat_bulk > rhat_tail ? rhat_bulk : rhat_tail;
  if (isnan(rhat_bulk) || isnan(rhat_tail)) s->rhat = NAN;
  /* tail ESS: indicators of the 5 % and 95 % quantiles of all draws */
  double qs[2] = {s->q5, s->q95}, e[2];
  for (int j = 0; j < 2; j++) {
    int varies = 0;
    for (size_t i = 0; i < SP; i++) {
      w->a[i] = w->sp[i] <= qs[j] ? 1.0 : 0.0;
      varies |= w->a[i] != w->a[0];
    }
    e[j] = varies ? ess_basic(w->a, M, N, w->rho, w->means) : NAN;
  }
  s->ess_tail = e[0] < e[1] ? e[0] : e[1];
  if (isnan(e[0]) || isnan(e[1])) s->ess_tail = NAN;
}

static sc_status diag_check(const char *fn, const double *draws, size_t C, size_t D, size_t n,
                            const void *out) {
  if (!draws) return sc_set_error(SC_ERR_NULL, fn, "argument 'draws' is NULL");
  if (!out)
    return sc_set_error(SC_ERR_NULL, fn, "argument 'summar%s' is NULL",
                        strcmp(fn, "sc_mcmc_summarize") ? "y" : "ies");
  if (C == 0) return sc_set_error(SC_ERR_ARG, fn, "chains is 0");
  if (D < 4) return sc_set_error(SC_ERR_ARG, fn, "ndraws = %zu: split chains need at least 4", D);
  if (n == 0) return sc_set_error(SC_ERR_ARG, fn, "n is 0");
  int ok = 1;
  diag_scratch_bytes(C, D, &ok);
  if (!ok || C * D > SIZE_MAX / n / sizeof(double))
    return sc_set_error(SC_ERR_OVERFLOW, fn, "chains x ndraws x n overflows size_t");
  return SC_OK;
}

sc_status sc_mcmc_summary_of(const double *draws, size_t chains, size_t ndraws, size_t n,
                             size_t index, sc_mcmc_summary *summary) {
  const char *fn = "sc_mcmc_summary_of";
  sc_status st = diag_check(fn, draws, chains, ndraws, n, summary);
  if (st) return st;
  if (index >= n) return sc_set_error(SC_ERR_ARG, fn, "index %zu is not below n = %zu", index, n);
  int ok = 1;
  void *mem = malloc(diag_scratch_bytes(chains, ndraws, &ok));
  if (!mem) return sc_set_error(SC_ERR_NOMEM, fn, "out of memory for the scratch");
  sc__diag_scratch w;
  diag_scratch_carve(&w, mem, chains, ndraws);
  summary_one(draws, chains, ndraws, n, index, &w, summary);
  free(mem);
  return SC_OK;
}

sc_status sc_mcmc_summarize(const double *draws, size_t chains, size_t ndraws, size_t n,
                            sc_mcmc_summary *summaries) {
  const char *fn = "sc_mcmc_summarize";
  sc_status st = diag_check(fn, draws, chains, ndraws, n, summaries);
  if (st) return st;
  int ok = 1;
  void *mem = malloc(diag_scratch_bytes(chains, ndraws, &ok));
  if (!mem) return sc_set_error(SC_ERR_NOMEM, fn, "out of memory for the scratch");
  sc__diag_scratch w;
  diag_scratch_carve(&w, mem, chains, ndraws);
  for (size_t i = 0; i < n; i++) summary_one(draws, chains, ndraws, n, i, &w, &summaries[i]);
  free(mem);
  return SC_OK;
}

/* ---------------------------------------------------------------- CSV */
#if defined(__unix__) || defined(__APPLE__)
#include <errno.h>
#include <unistd.h>
#define SC__NUTS_POSIX_IO 1
#else
#include <errno.h>
#define SC__NUTS_POSIX_IO 0
#endif

static int csv_row(FILE *f, size_t c, size_t d, const double *x, size_t n, const sc_nuts_stats *s) {
  if (fprintf(f, "%zu,%zu", c + 1, d + 1) < 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (fprintf(f, ",%.17g", x[i]) < 0) return 0;
  if (s && fprintf(f, ",%.17g,%.17g,%.17g,%u,%lu,%u,%.17g", s->lp, s->accept_stat, s->step_size,
                   (unsigned)s->tree_depth, (unsigned long)s->n_leapfrog, (unsigned)s->divergent,
                   s->energy) < 0)
    return 0;
  return fputc('\n', f) != EOF;
}

sc_status sc_mcmc_write_csv(const char *path, const double *draws, size_t chains, size_t ndraws,
                            size_t n, const char *const *names, const sc_nuts_stats *stats) {
  const char *fn = "sc_mcmc_write_csv";
  if (!path) return sc_set_error(SC_ERR_NULL, fn, "argument 'path' is NULL");
  if (!draws) return sc_set_error(SC_ERR_NULL, fn, "argument 'draws' is NULL");
  if (!*path) return sc_set_error(SC_ERR_ARG, fn, "path is empty");
  if (chains == 0 || ndraws == 0 || n == 0)
    return sc_set_error(SC_ERR_ARG, fn, "chains = %zu, ndraws = %zu, n = %zu: each must be > 0",
                        chains, ndraws, n);
  if (chains > SIZE_MAX / ndraws || chains * ndraws > SIZE_MAX / n / sizeof(double))
    return sc_set_error(SC_ERR_OVERFLOW, fn, "chains x ndraws x n overflows size_t");
  if (names)
    for (size_t i = 0; i < n; i++) {
      if (!names[i]) return sc_set_error(SC_ERR_NULL, fn, "names[%zu] is NULL", i);
      if (!names[i][0]) return sc_set_error(SC_ERR_ARG, fn, "names[%zu] is empty", i);
      if (strpbrk(names[i], ",\"\r\n"))
        return sc_set_error(SC_ERR_ARG, fn, "names[%zu] = '%s' holds a comma, quote or line break",
                            i, names[i]);
    }
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 48);
  if (!tmp) return sc_set_error(SC_ERR_NOMEM, fn, "out of memory");
  /* a name no other writer uses: the process id (where there is one), a counter and a
   * clock reading; created exclusively ("wx"), so the umask applies as to any new file */
  static unsigned long counter;
  FILE *f = NULL;
  int e = 0;
  for (int attempt = 0; attempt < 100 && !f; attempt++) {
    unsigned long k = counter++; /* a race here only costs a retry: "wx" is exclusive */
#if SC__NUTS_POSIX_IO
    unsigned long id = (unsigned long)getpid();
#else
    unsigned long id = (unsigned long)(uintptr_t)&k;
#endif
    snprintf(tmp, plen + 48, "%s.tmp-%lx-%lx-%lx", path, id, k, (unsigned long)clock());
    errno = 0;
    f = fopen(tmp, "wx");
    e = errno;
    if (!f && e != EEXIST) break;
  }
  if (!f) {
    sc_status st = sc_set_error(e == ENOMEM ? SC_ERR_NOMEM : SC_ERR_IO, fn,
                                "cannot create a temporary file beside '%s': %s", path,
                                e ? strerror(e) : "no unused name");
    free(tmp);
    return st;
  }
  int ok = fputs("chain,iteration", f) != EOF;
  for (size_t i = 0; ok && i < n; i++)
    ok = names ? fprintf(f, ",%s", names[i]) >= 0 : fprintf(f, ",x%zu", i + 1) >= 0;
  if (ok && stats)
    ok = fputs(",lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__", f) !=
         EOF;
  ok = ok && fputc('\n', f) != EOF;
  for (size_t c = 0; ok && c < chains; c++)
    for (size_t d = 0; ok && d < ndraws; d++)
      ok = csv_row(f, c, d, draws + (c * ndraws + d) * n, n, stats ? &stats[c * ndraws + d] : NULL);
  e = ok ? 0 : errno;
  if (ok && fflush(f) != 0) {
    ok = 0;
    e = errno;
  }
#if SC__NUTS_POSIX_IO
  if (ok && fsync(fileno(f)) != 0) {
    ok = 0;
    e = errno;
  }
#endif
  if (fclose(f) != 0 && ok) {
    ok = 0;
    e = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = 0;
    e = errno;
  }
  if (!ok) {
    remove(tmp);
    free(tmp);
    return sc_set_error(SC_ERR_IO, fn, "cannot write '%s': %s", path,
                        e ? strerror(e) : "write error");
  }
  free(tmp);
  return SC_OK;
}
