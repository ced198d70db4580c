/* src/train.c — sc_train: epochs of shuffled minibatches on a workspace's threads, the optimizer
 * steps, the NaN guard, clipping, progress callbacks, checkpoints, and data parallelism over
 * ranks (sc_dist). */
#include "internal.h"

/* ---------------------------------------------------------------- training */
/* The threads sc_train runs on (more threads never slow training down). A step's work
 * is its batch's slices (one per SC__TW x min_tiles samples, this rank's share of them under
 * dist) and the elementwise passes over the parameters (the slices' sum, the optimizer step,
 * the NaN guard, bf16's weights). A thread beyond both only waits: it is woken for every run
 * of the step, the caller waits for it to check in, and it polls its core between runs. On a
 * 16-core Intel host (an Intel Emerald Rapids, 2026-11-28) LeNet5 at batch 64 (2 slices) took 0.093
 * s per 10,000 images on 2 threads and 0.121-0.133 s on 4, 8 and 16 (after this: 4 and 16 as
 * fast as 2, 0.110-0.114 against 0.115 in a slower run of the VM). So: at most the slices
 * of a batch, or one thread per SC__TRAIN_PARAMS_PER_THREAD parameters where that is more,
 * and never more than asked for. Results do not depend on the thread count either way. */
#define SC__TRAIN_PARAMS_PER_THREAD 65536
static int sc__train_threads_for(const sc_chain *c, size_t bs, const sc_dist *dist, int threads) {
  size_t s = sc__slices_for(c, bs);
  if (dist && dist->ranks > 1) { /* this rank's slices, as sc__execute splits them */
    size_t lo, hi;
    sc__rank_slices(s, (size_t)dist->rank, (size_t)dist->ranks, &lo, &hi);
    s = hi - lo;
  }
  size_t byp = c->nparams / SC__TRAIN_PARAMS_PER_THREAD + 1;
  size_t use = s > byp ? s : byp;
  return (size_t)threads < use ? threads : (int)use;
}

/* a dist's rank and rank count (sc_train, sc_train_threads) */
static sc_status sc__dist_rank_check(const char *fn, const sc_dist *dist) {
  if (dist->ranks < 1 || dist->ranks > 65536)
    return sc__fail(SC_ERR_ARG, fn, "dist->ranks = %d, must be in [1, 65536]", dist->ranks);
  if (dist->rank < 0 || dist->rank >= dist->ranks)
    return sc__fail(SC_ERR_ARG, fn, "dist->rank = %d, must be in [0, %d)", dist->rank, dist->ranks);
  return SC_OK;
}

sc_status sc_train_threads(const sc_chain *chain, const sc_train_opts *opts, size_t n,
                           int *threads) {
  if (threads) *threads = 0;
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(opts);
  SC__CHECK_NULL(threads);
  if (n == 0) return SC__FAIL(SC_ERR_BATCH, "n is 0: no samples");
  sc_status st = sc__threads_check(__func__, opts->threads);
  const sc_dist *dist = opts->dist;
  if (!st && dist) st = sc__dist_rank_check(__func__, dist);
  if (st) return st;
  size_t bs = opts->batch_size && opts->batch_size < n ? opts->batch_size : n;
  *threads = sc__train_threads_for(chain, bs, dist, opts->threads);
  return SC_OK;
}

sc_train_opts sc_train_defaults(void) {
  sc_train_opts o;
  memset(&o, 0, sizeof o);
  o.optim = sc_adam(1e-3);
  o.epochs = 1;
  o.batch_size = 0;
  o.shuffle = 1;
  o.seed = 0;
  o.threads = 1;
  return o;
}

/* Full-batch training (and unshuffled minibatches of whole tiles) reads the same tiles of the
 * data at every step: they are made here once, the inputs transposed to tiles (SC__TW samples a
 * row, zeros past the last sample; with bf16 operands rounded), the targets likewise (not the
 * labels: those are read in place), and the steps read them in place (ws->tiles_x) instead of
 * gathering them again: the same values, so the same bits. The toy (4 -> 32 -> 16 -> 4, 10,000
 * samples): its gathers were 2.4 % of a step, the run 2.0-4.2 % faster (Zen 5,
 * 2026-11-28). Not for a chain whose first layer is a flatten (a view of the input tile), and
 * not above SC__TILES_MAX bytes (the data set again, in tiles); SC_TRAIN_TILES=0 turns it off.
 * Returns the memory to free (NULL: not made, the steps gather as before). */
#define SC__TILES_MAX ((size_t)64 << 20)
static void *sc__train_tiles(sc_workspace *ws, const sc_chain *c, sc_loss loss, const void *x,
                             const void *target, size_t n, size_t bs, int shuffle, int f64) {
  const char *env = getenv("SC_TRAIN_TILES"); /* (checked by sc__train) */
  if ((env && !strcmp(env, "0")) || shuffle || (bs != n && bs % SC__TW) ||
      c->L[0].spec.kind == SC_LAYER_FLATTEN)
    return NULL;
  int ok = 1;
  size_t es = f64 ? sizeof(double) : sizeof(float), nt = n / SC__TW + (n % SC__TW != 0);
  size_t tcols = loss == SC_LOSS_LOGIT_CROSSENTROPY ? 0 : c->out;
  size_t xb = sc__mul(sc__mul(nt, c->in, &ok), SC__TW * es, &ok);
  size_t tb = sc__mul(sc__mul(nt, tcols, &ok), SC__TW * es, &ok);
  size_t all = sc__add(sc__add(xb, tb, &ok), SC__ALIGN, &ok);
  if (!ok || all > SC__TILES_MAX) return NULL;
  void *mem = malloc(all);
  if (!mem) return NULL; /* (not needed: the steps gather) */
  unsigned char *xt =
      (unsigned char *)(((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1));
  unsigned char *tt = xt + xb; /* (xb a multiple of SC__TW es: 64-byte aligned) */
  if (f64) {
    sc__tiles_fill_f64((double *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f64((double *)(void *)tt, target, tcols, n);
  } else {
    sc__tiles_fill_f32((float *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f32((float *)(void *)tt, target, tcols, n);
  }
  if (!f64 && ws->prec != SC_PRECISION_FP32) /* as the steps round their gathered tiles */
    (ws->bf_round ? ws->bf_round : sc__bf16_round_n)((float *)(void *)xt, nt * c->in * SC__TW);
  ws->tiles_x = xt;
  ws->tiles_t = tcols ? tt : NULL;
  ws->tiles_f64 = f64;
  ws->tiles0 = 0;
  return mem;
}

/* sc_train and sc_train_f64: one body, the element type chosen by f64 (p, the data's x and
 * float targets, the gradient, the optimizer's moments and the checkpoint's arrays are all
 * of that type) */
static sc_status sc__train(const char *fn, const sc_chain *chain, sc_loss loss, void *pv, int f64,
                           const void *xv, const void *target, size_t n, const sc_train_opts *opts,
                           sc_train_report *report) {
  if (!chain) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!pv) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!opts) return sc__fail(SC_ERR_NULL, fn, "argument 'opts' is NULL");
  if (report) memset(report, 0, sizeof *report);
  if (!xv) return sc__fail(SC_ERR_NULL, fn, "data->x is NULL");
  if (n == 0) return sc__fail(SC_ERR_BATCH, fn, "data->n is 0: no samples");
  float *p32 = f64 ? NULL : (float *)pv;
  double *p64 = f64 ? (double *)pv : NULL;
  const size_t es = f64 ? sizeof(double) : sizeof(float);
  if (opts->epochs == 0)
    return sc__fail(SC_ERR_ARG, fn,
                    "epochs is 0 (start from sc_train_defaults() and set what differs)");
  sc_status tst = sc__threads_check(fn, opts->threads);
  if (tst) return tst;
  if (!sc_precision_name(opts->precision))
    return sc__fail(SC_ERR_ARG, fn, "unknown precision %d", (int)opts->precision);
  if (f64 && opts->precision != SC_PRECISION_FP32)
    return sc__fail(SC_ERR_ARG, fn,
                    "precision %s is for float training; sc_train_f64 computes in double "
                    "(leave precision at SC_PRECISION_FP32)",
                    sc_precision_name(opts->precision));
  if (opts->lr_schedule != SC_LR_CONSTANT && opts->lr_schedule != SC_LR_COSINE)
    return sc__fail(SC_ERR_ARG, fn, "unknown lr_schedule %d", (int)opts->lr_schedule);
  if (opts->lr_schedule == SC_LR_COSINE &&
      (!(opts->lr_min >= 0) || !(opts->lr_min <= opts->optim.lr)))
    return sc__fail(SC_ERR_ARG, fn, "lr_min = %g must be in [0, lr = %g]", opts->lr_min,
                    opts->optim.lr);
  if (!(opts->clip_norm >= 0) || !isfinite(opts->clip_norm))
    return sc__fail(SC_ERR_ARG, fn, "clip_norm = %g must be finite and >= 0 (0: off)",
                    opts->clip_norm);
  if (opts->profile && opts->profile_rows < chain->nlayers + 2)
    return sc__fail(SC_ERR_SHAPE, fn, "profile_rows = %zu, needs the chain's %zu layers + 2",
                    opts->profile_rows, chain->nlayers);
  const char *ckpath = opts->checkpoint;
  if (ckpath && !*ckpath) return sc__fail(SC_ERR_ARG, fn, "checkpoint path is empty");
  if (!ckpath && opts->resume)
    return sc__fail(SC_ERR_ARG, fn, "resume is set but checkpoint is NULL");
  if (!ckpath && opts->checkpoint_every)
    return sc__fail(SC_ERR_ARG, fn, "checkpoint_every = %zu but checkpoint is NULL",
                    opts->checkpoint_every);
  const char *tenv = getenv("SC_TRAIN_TILES");
  if (tenv && strcmp(tenv, "0") && strcmp(tenv, "1"))
    return sc__fail(SC_ERR_ARG, fn, "SC_TRAIN_TILES='%s' is not '0' or '1'", tenv);
  sc_status st = sc__loss_check(fn, chain, loss, target);
  if (st) return st;
  size_t obytes = 0;
  if ((st = sc__optim_plan(fn, &opts->optim, chain->nparams, &obytes))) return st;
  int ok = 1;
  size_t bs = opts->batch_size ? opts->batch_size : n, np = chain->nparams;
  if (bs > n) bs = n;
  sc__mul(n, chain->in > chain->out ? chain->in : chain->out, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "data size overflows size_t");
  /* the data set is checked once here, not at every step */
  st = f64 ? sc__finite_check_f64(fn, chain, "input", xv, n, chain->in)
           : sc__finite_check_f32(fn, chain, "input", xv, n, chain->in);
  if (st) return st;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY)
    st = sc__labels_check(fn, (const int32_t *)target, n, chain->out);
  else
    st = f64 ? sc__finite_check_f64(fn, chain, "target", target, n, chain->out)
             : sc__finite_check_f32(fn, chain, "target", target, n, chain->out);
  if (st) return st;
  st = f64 ? sc__finite_check_f64(fn, chain, "parameter", p64, 1, np)
           : sc__finite_check_f32(fn, chain, "parameter", p32, 1, np);
  if (st) return st;

  const sc_dist *dist = opts->dist;
  if (dist) {
    if ((st = sc__dist_rank_check(fn, dist))) return st;
    if (!dist->allgather) return sc__fail(SC_ERR_NULL, fn, "dist->allgather is NULL");
  }

  size_t steps_per_epoch = (n + bs - 1) / bs;
  size_t total = sc__mul(steps_per_epoch, opts->epochs, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "epochs x steps overflows size_t");
  int shuffle = opts->shuffle && bs < n;
  int writer = ckpath && (!dist || dist->rank == 0); /* one rank writes the checkpoints */

  /* everything the steps need, allocated once */
  sc_workspace *ws = NULL;
  sc_optimizer *opt = NULL;
  double t_start = sc__now(), epoch_loss = 0, sum = 0;
  size_t step = 0, epoch = 0, s0 = 0, last_ck = (size_t)-1;
  uint64_t opt_ns = 0;          /* profile: the optimizer step, the guard, the checkpoints */
  void *g = NULL, *pbak = NULL; /* np elements of the type */
  size_t *idx = NULL;
  char *cktmp = NULL;
  void *tiles = NULL; /* the data's tiles made once (sc__train_tiles), or NULL */
  sc__ckpt ck;
  /* data-parallel: one record per slice, nparams elements then the slice's loss (a double) */
  size_t rec_g = sc__roundup(sc__mul(np, es, &ok), sizeof(double), &ok);
  size_t rec = sc__add(rec_g, sizeof(double), &ok);
  unsigned char *xsend = NULL, *xrecv = NULL;
  size_t *xcounts = NULL, *xdispls = NULL;
  double slice_loss[SC__MAX_SLICES];
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "exchange record size overflows size_t");
  if ((st = sc_workspace_create(&ws, chain, bs)) != SC_OK) goto done;
  if ((st = sc_workspace_set_threads(ws, sc__train_threads_for(chain, bs, dist, opts->threads))) !=
      SC_OK)
    goto done;
  if (opts->precision != SC_PRECISION_FP32 &&
      (st = sc_workspace_set_precision(ws, opts->precision)) != SC_OK)
    goto done;
  if ((st = sc_optimizer_create(&opt, &opts->optim, np)) != SC_OK) goto done;
  opt->prec = f64 ? 2 : 1;
  sc_workspace_set_dropout(ws, opts->seed, 0);
  if (opts->profile && (st = sc_workspace_profile(ws, 1)) != SC_OK) goto done;
  tiles = sc__train_tiles(ws, chain, loss, xv, target, n, bs, shuffle, f64);
  g = malloc(np * es);
  pbak = malloc(np * es);
  if (shuffle) idx = malloc(sc__mul(n, sizeof(size_t), &ok));
  if (ckpath) cktmp = malloc(sc__add(strlen(ckpath), SC__TMP_EXTRA, &ok));
  if (!g || !pbak || (shuffle && !idx) || (ckpath && !cktmp)) {
    st = sc__fail(SC_ERR_NOMEM, fn,
                  "out of memory for the gradient, the sample index or a file name");
    goto done;
  }
  if (dist) {
    size_t xb = sc__mul(rec, SC__MAX_SLICES, &ok);
    if (ok) {
      xsend = malloc(xb);
      xrecv = malloc(xb);
      xcounts = malloc((size_t)dist->ranks * sizeof *xcounts);
      xdispls = malloc((size_t)dist->ranks * sizeof *xdispls);
    }
    if (!xsend || !xrecv || !xcounts || !xdispls) {
      st = sc__fail(SC_ERR_NOMEM, fn,
                    "out of memory for the gradient exchange buffers (2 x %zu bytes)", xb);
      goto done;
    }
  }
  if (idx)
    for (size_t k = 0; k < n; k++) idx[k] = k;

  sc__rng rng;
  sc__rng_seed(&rng, opts->seed ^ 0x5C5C5C5C5C5C5C5Cull);
  sc__ck_identity(&ck, chain, n, bs, shuffle, opts, total);
  ck.f64 = (uint32_t)f64;
  if (opts->resume) {
    FILE *probe = fopen(ckpath, "rb");
    int e = errno;
    if (probe) fclose(probe);
    if (probe || e != ENOENT) { /* a missing checkpoint starts from the beginning */
      sc__ckpt got;
      /* p is read into g first: it is overwritten only when the whole file checks out */
      if ((st = sc__ck_read(fn, ckpath, chain, &ck, &got, g, opt->m, opt->v, idx))) goto done;
      if (got.step > total) {
        st = sc__fail(SC_ERR_ARG, fn, "'%s' is at step %llu, beyond the %zu steps of this run",
                      ckpath, (unsigned long long)got.step, total);
        goto done;
      }
      memcpy(pv, g, np * es);
      opt->t = got.t;
      memcpy(rng.s, got.rng, sizeof rng.s);
      step = (size_t)got.step, epoch = (size_t)got.epoch, s0 = (size_t)got.pos;
      sum = got.epoch_sum;
      if (s0) epoch_loss = sum / (double)s0;
      last_ck = step;
      sc_workspace_set_dropout(ws, opts->seed, step);
      if (report) report->resumed_step = step;
    }
  }
  t_start = sc__now();
  for (; epoch < opts->epochs; epoch++, s0 = 0, sum = 0) {
    if (shuffle && s0 == 0)
      for (size_t k = n - 1; k > 0; k--) { /* Fisher-Yates */
        size_t j = (size_t)sc__rng_below(&rng, (uint64_t)k + 1), tmp = idx[k];
        idx[k] = idx[j];
        idx[j] = tmp;
      }
    for (size_t s = s0; s < steps_per_epoch; s++) {
      size_t b0 = s * bs, nb = n - b0 < bs ? n - b0 : bs;
      double lv = 0;
      const unsigned char *xb = xv;
      const void *tb = target;
      const size_t *ib = NULL;
      if (idx)
        ib = idx + b0;
      else {
        xb += b0 * chain->in * es;
        tb = loss == SC_LOSS_LOGIT_CROSSENTROPY
                 ? (const void *)((const int32_t *)tb + b0)
                 : (const void *)((const unsigned char *)tb + b0 * chain->out * es);
      }
      ws->tiles0 = b0 / SC__TW; /* (with tiles: b0 a multiple of SC__TW) */
      if (!dist) {
        if (f64)
          sc__valgrad_run_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, &lv,
                              g, NULL, ws, 1, 0);
        else
          sc__valgrad_run_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, &lv, g,
                              NULL, ws, 1, 0);
      } else { /* this rank's slices, then every slice from every rank, added in order */
        size_t ns, lo, hi;
        if (f64)
          sc__valgrad_own_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        else
          sc__valgrad_own_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        for (size_t q = lo; q < hi; q++) {
          unsigned char *r = xsend + (q - lo) * rec;
          memcpy(r, ws->slices + q * ws->slice_bytes + ws->tile_bytes, np * es);
          memcpy(r + rec_g, &slice_loss[q], sizeof(double));
        }
        for (int r = 0; r < dist->ranks; r++) {
          size_t rlo, rhi;
          sc__rank_slices(ns, (size_t)r, (size_t)dist->ranks, &rlo, &rhi);
          xcounts[r] = (rhi - rlo) * rec;
          xdispls[r] = rlo * rec;
        }
        int rc = dist->allgather(dist->ctx, xsend, xrecv, xcounts, xdispls);
        if (rc != 0) {
          st = sc__fail(SC_ERR_CALLBACK, fn,
                        "the gradient exchange (dist->allgather) returned %d at step %zu (rank %d "
                        "of %d)",
                        rc, step + 1, dist->rank, dist->ranks);
          goto done;
        }
        double lsum = 0;
        for (size_t q = 0; q < ns; q++) {
          const unsigned char *r = xrecv + q * rec;
          double sl;
          memcpy(&sl, r + rec_g, sizeof sl);
          lsum += sl;
          if (q == 0)
            memcpy(g, r, np * es);
          else if (f64)
            for (size_t k = 0; k < np; k++)
              ((double *)g)[k] += ((const double *)(const void *)r)[k];
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] += ((const float *)(const void *)r)[k];
        }
        lv = lsum / (double)nb;
      }
      /* the NaN guard: a poisoned loss, gradient or update never reaches p. A NaN or Inf in
       * g always makes the updated p[k] NaN or Inf (ADAM: m/sqrt(v) is NaN; SGD: p - lr g),
       * so one scan of the new p (and a copy of the old one to fall back on) covers both;
       * g is looked at only to name the culprit */
      size_t bad = np;
      uint64_t t_opt = opts->profile ? sc__ns() : 0;
      if (!isfinite(lv)) {
        st = sc__fail(SC_ERR_NONFINITE, fn,
                      "the loss became %s at step %zu (epoch %zu, minibatch %zu of %zu): p holds "
                      "the parameters after step %zu; learning rate too high?",
                      isnan(lv) ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        goto done;
      }
      if (opts->clip_norm > 0) { /* as torch.nn.utils.clip_grad_norm_ */
        double ss = 0;
        if (f64)
          for (size_t k = 0; k < np; k++) ss += ((double *)g)[k] * ((double *)g)[k];
        else
          for (size_t k = 0; k < np; k++) ss += (double)((float *)g)[k] * (double)((float *)g)[k];
        double norm = sqrt(ss);
        if (norm > opts->clip_norm) {
          double c = opts->clip_norm / (norm + 1e-6);
          if (f64)
            for (size_t k = 0; k < np; k++) ((double *)g)[k] *= c;
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] *= (float)c;
        }
      }
      if (opts->lr_schedule == SC_LR_COSINE) /* a function of the step alone */
        opt->cfg.lr =
            opts->lr_min + (opts->optim.lr - opts->lr_min) * 0.5 *
                               (1 + cos(3.14159265358979323846 * (double)step / (double)total));
      if (!f64 && opts->optim.kind != SC_SGD) /* pbak is saved in it */
        bad = sc__train_adam_f32(opt, np >= SC__OPT_PAR_MIN ? ws->pool : NULL, p32, pbak, g, np);
      else {
        memcpy(pbak, pv, np * es);
        if (f64) {
          sc_optimizer_step_f64(opt, p64, g, np);
          bad = chain->kd->find_nonfinite(p64, np);
        } else {
          sc_optimizer_step(opt, p32, g, np);
          bad = chain->kf->find_nonfinite(p32, np);
        }
      }
      if (bad < np) {
        int nan = f64 ? isnan(p64[bad]) : isnan(p32[bad]);
        memcpy(pv, pbak, np * es);
        size_t gb = f64 ? chain->kd->find_nonfinite(g, np) : chain->kf->find_nonfinite(g, np);
        int gnan = gb < np && (f64 ? isnan(((double *)g)[gb]) : isnan(((float *)g)[gb]));
        if (gb < np)
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the gradient g[%zu] became %s at step %zu (epoch %zu, minibatch %zu of "
                        "%zu): p holds the parameters after step %zu; learning rate too high?",
                        gb, gnan ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        else
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the update of step %zu (epoch %zu, minibatch %zu of %zu) made p[%zu] %s: "
                        "p holds the parameters after step %zu; learning rate too high?",
                        step + 1, epoch, s + 1, steps_per_epoch, bad, nan ? "NaN" : "Inf", step);
        goto done;
      }
      step++;
      sum += lv;
      epoch_loss = sum / (double)(s + 1);
      int end = s + 1 == steps_per_epoch; /* the next step opens the next epoch */
      size_t next_epoch = end ? epoch + 1 : epoch, next_pos = end ? 0 : s + 1;
      if (writer && opts->checkpoint_every && step % opts->checkpoint_every == 0) {
        if ((st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                              opt, idx, n)))
          goto done;
        last_ck = step;
      }
      if (opts->profile) opt_ns += sc__ns() - t_opt;
      if (opts->progress && opts->progress_every && step % opts->progress_every == 0) {
        sc_progress pr = {epoch, step, total, lv, epoch_loss, sc__now() - t_start, p32, p64};
        if (opts->progress(&pr, opts->user)) {
          if (writer && last_ck != step && /* so that the stopped run can be resumed */
              (st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                                opt, idx, n)))
            goto done;
          st = sc__fail(SC_ERR_STOPPED, fn, "stopped by the progress callback at step %zu", step);
          epoch++;
          goto done;
        }
      }
    }
  }
  if (writer && last_ck != step) /* the finished run, so that resuming it does nothing */
    st = sc__ck_save(fn, ckpath, cktmp, &ck, step, epoch, 0, 0, &rng, pv, opt, idx, n);
done:
  if (opts->profile && ws && ws->prof &&
      sc_workspace_profile_read(ws, opts->profile, opts->profile_rows) == SC_OK)
    opts->profile[chain->nlayers + 1].fwd_seconds = (double)opt_ns * 1e-9;
  if (report) {
    report->steps = step;
    report->epochs = epoch;
    report->final_loss = epoch_loss;
    report->seconds = st == SC_OK || st == SC_ERR_STOPPED ? sc__now() - t_start : 0;
  }
  free(idx);
  free(g);
  free(pbak);
  free(cktmp);
  free(xsend);
  free(xrecv);
  free(xcounts);
  free(xdispls);
  free(tiles);
  sc_optimizer_destroy(opt);
  sc_workspace_destroy(ws);
  return st;
}
sc_status sc_train(const sc_chain *chain, sc_loss loss, float *p, const sc_data *data,
                   const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 0, data->x, data->target, data->n, opts, report);
}

sc_status sc_train_f64(const sc_chain *chain, sc_loss loss, double *p, const sc_data_f64 *data,
                       const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 1, data->x, data->target, data->n, opts, report);
}
