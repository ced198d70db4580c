/* src/optim.c — optimizers on flat vectors (ADAM, AdamW, SGD with momentum): their state in
 * the library's memory or the caller's, a step, the learning-rate schedules. */
#include "internal.h"

/* ---------------------------------------------------------------- optimizers */
sc_optim sc_adam(double lr) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_ADAM;
  o.lr = lr;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  return o;
}
sc_optim sc_adamw(double lr, double weight_decay) {
  sc_optim o = sc_adam(lr);
  o.kind = SC_ADAMW;
  o.weight_decay = weight_decay;
  return o;
}
sc_optim sc_sgd(double lr, double momentum) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_SGD;
  o.lr = lr;
  o.momentum = momentum;
  return o;
}

SC__INT sc_status sc__optim_plan(const char *fn, const sc_optim *cfg, size_t n, size_t *bytes) {
  if (!cfg) return sc__fail(SC_ERR_NULL, fn, "argument 'cfg' is NULL");
  if (n == 0) return sc__fail(SC_ERR_ARG, fn, "n is 0");
  if (cfg->kind != SC_ADAM && cfg->kind != SC_ADAMW && cfg->kind != SC_SGD)
    return sc__fail(SC_ERR_ARG, fn, "unknown optimizer kind %d", (int)cfg->kind);
  if (!(cfg->lr > 0) || !isfinite(cfg->lr))
    return sc__fail(SC_ERR_ARG, fn, "learning rate %g must be finite and > 0", cfg->lr);
  if (!(cfg->weight_decay >= 0) || !isfinite(cfg->weight_decay))
    return sc__fail(SC_ERR_ARG, fn, "weight_decay %g must be finite and >= 0", cfg->weight_decay);
  if (cfg->kind == SC_ADAMW && !(cfg->lr * cfg->weight_decay < 1))
    return sc__fail(SC_ERR_ARG, fn,
                    "AdamW: lr x weight_decay = %g x %g = %g must be < 1 (each step scales p by "
                    "1 - lr x weight_decay, which would be <= 0)",
                    cfg->lr, cfg->weight_decay, cfg->lr * cfg->weight_decay);
  if (cfg->kind == SC_SGD) {
    if (!(cfg->momentum >= 0 && cfg->momentum < 1))
      return sc__fail(SC_ERR_ARG, fn, "SGD momentum %g must be in [0, 1)", cfg->momentum);
  } else {
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
      return sc__fail(SC_ERR_ARG, fn, "ADAM betas (%g, %g) must be in [0, 1)", cfg->beta1,
                      cfg->beta2);
    if (!(cfg->eps > 0) || !isfinite(cfg->eps))
      return sc__fail(SC_ERR_ARG, fn, "ADAM eps %g must be finite and > 0", cfg->eps);
  }
  int ok = 1;
  size_t vec = sc__roundup(sc__mul(n, sizeof(double), &ok), SC__ALIGN, &ok);
  size_t head = sc__roundup(sizeof(struct sc_optimizer), SC__ALIGN, &ok);
  *bytes = sc__add(sc__add(head, sc__mul(vec, 2, &ok), &ok), SC__ALIGN, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "optimizer state size overflows size_t");
  return SC_OK;
}

static sc_optimizer *sc__optim_place(void *mem, const sc_optim *cfg, size_t n) {
  uintptr_t a = ((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
  sc_optimizer *o = (sc_optimizer *)a;
  memset(o, 0, sizeof *o);
  o->cfg = *cfg;
  o->n = n;
  size_t head = (sizeof(struct sc_optimizer) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  size_t vec = (n * sizeof(double) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  o->m = (void *)(a + head);
  o->v = (void *)(a + head + vec);
  memset(o->m, 0, 2 * vec);
  return o;
}

sc_status sc_optimizer_bytes(const sc_optim *cfg, size_t n, size_t *bytes) {
  SC__CHECK_NULL(bytes);
  return sc__optim_plan(__func__, cfg, n, bytes);
}

sc_status sc_optimizer_create(sc_optimizer **out, const sc_optim *cfg, size_t n) {
  SC__CHECK_NULL(out);
  *out = NULL;
  size_t bytes = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &bytes);
  if (st) return st;
  void *mem = malloc(bytes);
  if (!mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) {
    free(mem);
    return st;
  }
  *out = sc__optim_place(mem, cfg, n);
  (*out)->owned = mem;
  (*out)->kf = kf;
  return SC_OK;
}

sc_status sc_optimizer_init(sc_optimizer **out, const sc_optim *cfg, size_t n, void *mem,
                            size_t bytes) {
  SC__CHECK_NULL(out);
  *out = NULL;
  SC__CHECK_NULL(mem);
  size_t need = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &need);
  if (st) return st;
  if (bytes < need)
    return SC__FAIL(SC_ERR_NOMEM, "caller memory of %zu bytes is smaller than the %zu needed",
                    bytes, need);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) return st;
  *out = sc__optim_place(mem, cfg, n);
  (*out)->kf = kf;
  return SC_OK;
}

void sc_optimizer_destroy(sc_optimizer *opt) {
  if (opt) free(opt->owned);
}

sc_status sc_optimizer_reset(sc_optimizer *opt) {
  SC__CHECK_NULL(opt);
  opt->t = 0;
  opt->prec = 0;
  memset(opt->m, 0, opt->n * sizeof(double));
  memset(opt->v, 0, opt->n * sizeof(double));
  return SC_OK;
}

/* the checks both step forms share; locks the optimizer to one element type */
static sc_status sc__optim_step_check(const char *fn, sc_optimizer *opt, const void *p,
                                      const void *g, size_t n, int prec) {
  if (!opt) return sc__fail(SC_ERR_NULL, fn, "argument 'opt' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!g) return sc__fail(SC_ERR_NULL, fn, "argument 'g' is NULL");
  if (n != opt->n)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the optimizer was created for %zu", n, opt->n);
  if (opt->prec && opt->prec != prec)
    return sc__fail(SC_ERR_ARG, fn,
                    "this optimizer has taken %s steps (its moments are %s): one element type "
                    "per optimizer; sc_optimizer_reset() starts afresh in either",
                    opt->prec == 1 ? "float" : "double", opt->prec == 1 ? "float" : "double");
  opt->prec = prec;
  return SC_OK;
}

/* ADAM / AdamW's coefficients for step opt->t (already counted), in torch's form:
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
static void sc__adam_coefs(const sc_optimizer *opt, sc__adam_coef *k) {
  const sc_optim *c = &opt->cfg;
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  /* 1 - beta in double: (1 - 0.999f) in float is off by 1e-5 relative */
  k->b1 = (float)c->beta1, k->b2 = (float)c->beta2, k->eps = (float)c->eps;
  k->omb1 = (float)(1.0 - c->beta1), k->omb2 = (float)(1.0 - c->beta2);
  k->step = (float)(c->lr / bc1), k->isb2 = (float)(1.0 / sqrt(bc2));
  k->decay = c->kind == SC_ADAMW ? (float)(1.0 - c->lr * c->weight_decay) : 1.0f;
  k->l2 = c->kind == SC_ADAM ? (float)c->weight_decay : 0.0f;
}

/* sc_train's float ADAM step and NaN guard, on the workspace's threads for large chains
 * (pool NULL: on the caller alone): each worker copies its part of p (sc__part_range) to
 * pbak, updates it and scans it; the first non-finite index over all parts is kept. Every
 * element gets the same operations as in one pass, so the result does not depend on the
 * thread count. At 2 threads this was LeNet5's serial part: 52 us of ADAM and guard on 44,426
 * parameters per step at batch 64, with the other thread waiting. */
typedef struct sc__optjob {
  const sc__kt_f32 *kf;
  const sc__adam_coef *k;
  float *p, *pbak, *m, *v;
  const float *g;
  size_t n;
  size_t bad[SC__OPT_PARTS]; /* per part: the first non-finite index of p, or n */
} sc__optjob;

static void sc__optjob_task(void *arg, int worker, int nworkers) {
  sc__optjob *J = arg;
  size_t parts = sc__parts(nworkers), k0, k1;
  for (size_t w = (size_t)worker; w < parts; w += (size_t)nworkers) {
    sc__part_range(w, parts, J->n, &k0, &k1);
    /* the backup, the step and the scan block by block, each block's arrays in L1 between
     * them (one pass each over the whole part read p, g, m, v from L2 three times) */
    for (size_t b0 = k0; b0 < k1; b0 += 2048) { /* (all of it: pbak is restored whole) */
      size_t nb = k1 - b0 < 2048 ? k1 - b0 : 2048;
      memcpy(J->pbak + b0, J->p + b0, nb * sizeof(float));
      J->kf->adam(J->p + b0, J->g + b0, J->m + b0, J->v + b0, nb, J->k);
      size_t b = J->kf->find_nonfinite(J->p + b0, nb);
      if (b < nb && J->bad[w] == J->n) J->bad[w] = b0 + b; /* the part's first */
    }
  }
}

/* returns the index of the first non-finite element of the updated p, or n */
SC__INT size_t sc__train_adam_f32(sc_optimizer *opt, sc__pool *pool, float *p, float *pbak,
                                  const float *g, size_t n) {
  opt->t++;
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  sc__optjob J;
  J.kf = opt->kf, J.k = &k, J.p = p, J.pbak = pbak, J.m = opt->m, J.v = opt->v, J.g = g, J.n = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++) J.bad[w] = n;
  sc__pool_run(pool, sc__optjob_task, &J);
  size_t bad = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++)
    if (J.bad[w] < bad) bad = J.bad[w];
  return bad;
}

sc_status sc_optimizer_step(sc_optimizer *opt, float *p, const float *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 1);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  float *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  if (c->kind == SC_SGD) {
    float lr = (float)c->lr, mu = (float)c->momentum, wd = (float)c->weight_decay;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      float gk = g[k] + wd * p[k];
      float b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  opt->kf->adam(p, g, m, v, n, &k);
  return SC_OK;
}

/* The same rules in double (a plain loop: the ODE-sized vectors it serves are short). */
sc_status sc_optimizer_step_f64(sc_optimizer *opt, double *p, const double *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 2);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  double *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  double lr = c->lr, wd = c->weight_decay;
  if (c->kind == SC_SGD) {
    double mu = c->momentum;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      double gk = g[k] + wd * p[k];
      double b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  double b1 = c->beta1, b2 = c->beta2, omb1 = 1.0 - b1, omb2 = 1.0 - b2, eps = c->eps;
  double step = lr / bc1, isb2 = 1.0 / sqrt(bc2);
  double decay = c->kind == SC_ADAMW ? 1.0 - lr * wd : 1.0, l2 = c->kind == SC_ADAM ? wd : 0.0;
  for (size_t k = 0; k < n; k++) {
    double gk = g[k] + l2 * p[k];
    double mk = b1 * m[k] + omb1 * gk, vk = b2 * v[k] + omb2 * gk * gk;
    m[k] = mk, v[k] = vk;
    p[k] = p[k] * decay - step * mk / (sqrt(vk) * isb2 + eps);
  }
  return SC_OK;
}
