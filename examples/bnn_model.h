/* bnn_model.h — the Bayesian neural network of TuringLang/Turing.jl#2454 on simplechain, as a
 * log density over one flat vector (used by examples/bnn.c, bench/bnn_grad.c and the tests).
 *
 * Network f(x; theta): 1 -> H relu -> 1 (two dense layers; H = 32 by default), theta its
 * flat parameter vector (simplechain's layout, P = 3H + 1 values).
 * Data: N points (default 100) of the curve y = sin(1.5 x) + 0.2 x on x uniform in [-3, 3],
 * plus N(0, 0.15^2) noise, from a fixed seed.
 * Model: theta ~ N(0, I_P); sigma ~ Gamma(shape 0.1, scale 1); y_i ~ N(f(x_i; theta), sigma).
 * Sampled on v = (theta, s = log sigma) (the "linked" parameterisation: the log-Jacobian s
 * is added), so with r_i = y_i - f(x_i; theta):
 *   log p(v) = -|theta|^2 / 2 - P/2 log(2 pi)                    prior on theta
 *            + 0.1 s - e^s - lgamma(0.1)                           prior on sigma, Jacobian
 *            - N s - N/2 log(2 pi) - sum_i r_i^2 / (2 e^{2s})      likelihood
 * The gradient: simplechain's sc_valgrad_f64 with the squared loss gives
 * L = (1/N) sum_i r_i^2 and g = dL/dtheta, so
 *   d/dtheta = -theta - N g / (2 e^{2s}),   d/ds = 0.1 - e^s - N + N L e^{-2s}. */
#ifndef BNN_MODEL_H
#define BNN_MODEL_H

#include "simplechain.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BNN_LOG_2PI 1.8378770664093454836

typedef struct bnn_model {
  sc_chain *chain;
  size_t hidden, points;
  size_t np; /* network parameters P */
  size_t n;  /* sampled coordinates, P + 1 */
  double *x, *y;
  sc_workspace **ws; /* one per sampler chain */
  size_t nws;
} bnn_model;

static inline uint64_t bnn_splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline double bnn_unif(uint64_t *s) {
  return ((double)(bnn_splitmix(s) >> 11) + 0.5) * 0x1.0p-53;
}

/* the data set: x uniform in [-3, 3], y = sin(1.5 x) + 0.2 x + N(0, 0.15^2) (Box-Muller) */
static inline void bnn_data(double *x, double *y, size_t N, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < N; i++) {
    x[i] = -3 + 6 * bnn_unif(&s);
    double u = bnn_unif(&s), w = bnn_unif(&s);
    double noise = sqrt(-2 * log(u)) * cos(6.283185307179586 * w);
    y[i] = sin(1.5 * x[i]) + 0.2 * x[i] + 0.15 * noise;
  }
}

static inline void bnn_destroy(bnn_model *m) {
  if (!m) return;
  for (size_t c = 0; m->ws && c < m->nws; c++) sc_workspace_destroy(m->ws[c]);
  free(m->ws);
  free(m->x);
  free(m->y);
  sc_chain_destroy(m->chain);
  memset(m, 0, sizeof *m);
}

/* Builds the network, the data and one workspace per sampler chain. */
static inline sc_status bnn_create(bnn_model *m, size_t hidden, size_t points, uint64_t data_seed,
                                   size_t chains) {
  memset(m, 0, sizeof *m);
  m->hidden = hidden;
  m->points = points;
  sc_layer L[] = {sc_dense(hidden, SC_RELU), sc_dense(1, SC_IDENTITY)};
  sc_status st = sc_chain_create(&m->chain, 1, L, 2);
  if (st) return st;
  if ((st = sc_chain_nparams(m->chain, &m->np))) goto fail;
  m->n = m->np + 1;
  m->x = malloc(points * sizeof *m->x);
  m->y = malloc(points * sizeof *m->y);
  m->ws = calloc(chains, sizeof *m->ws);
  if (!m->x || !m->y || !m->ws) {
    st = sc_set_error(SC_ERR_NOMEM, "bnn_create", "out of memory for %zu points", points);
    goto fail;
  }
  m->nws = chains;
  for (size_t c = 0; c < chains; c++)
    if ((st = sc_workspace_create(&m->ws[c], m->chain, points))) goto fail;
  bnn_data(m->x, m->y, points, data_seed);
  return SC_OK;
fail:
  bnn_destroy(m);
  return st;
}

/* the log density and its gradient at v = (theta, log sigma): an sc_logdensity_fn */
static inline int bnn_logdensity(void *user, size_t chain, const double *v, size_t n, double *lp,
                                 double *grad) {
  const bnn_model *m = user;
  size_t P = m->np;
  double N = (double)m->points, s = v[P], L = 0;
  if (n != m->n || chain >= m->nws) return 1;
  sc_status st = sc_valgrad_f64(m->chain, SC_LOSS_SQUARED, v, m->x, m->y, m->points, &L, grad, NULL,
                                m->ws[chain]);
  if (st == SC_ERR_NONFINITE) { /* non-finite parameters (a wild trajectory): zero density */
    *lp = -INFINITY;
    return 0;
  }
  if (st != SC_OK) return 2;
  double inv2s2 = 0.5 * exp(-2 * s); /* 1 / (2 sigma^2) */
  double sq = 0;
  for (size_t k = 0; k < P; k++) {
    sq += v[k] * v[k];
    grad[k] = -v[k] - N * grad[k] * inv2s2;
  }
  *lp = -0.5 * sq - 0.5 * (double)P * BNN_LOG_2PI         /* theta prior */
        + 0.1 * s - exp(s) - lgamma(0.1)                  /* sigma prior + Jacobian */
        - N * s - 0.5 * N * BNN_LOG_2PI - N * L * inv2s2; /* likelihood */
  grad[P] = 0.1 - exp(s) - N + 2 * N * L * inv2s2;
  return 0;
}

/* the fixed point the gradient benchmarks time: theta_k = 0.5 sin(k + 1), sigma = 0.3 (the
 * PyTorch twin, bench/bnn_grad_torch.py, builds the same) */
static inline void bnn_bench_point(double *v, size_t P) {
  for (size_t k = 0; k < P; k++) v[k] = 0.5 * sin((double)(k + 1));
  v[P] = log(0.3);
}

#endif
