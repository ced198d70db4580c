/* src/checkpoint.c — sc_train's checkpoints: the file that lets a killed run resume and end bit
 * for bit as an uninterrupted one (atomic, checksummed, checked against the run). */
#include "internal.h"

/* ---------------------------------------------------------------- checkpoints */

SC__INT void sc__ck_identity(sc__ckpt *k, const sc_chain *chain, size_t n, size_t bs, int shuffle,
                             const sc_train_opts *o, size_t total) {
  memset(k, 0, sizeof *k);
  k->np = chain->nparams, k->fp = sc__fingerprint(chain), k->nsamples = n, k->bs = bs;
  k->seed = o->seed, k->shuffle = (uint32_t)shuffle, k->kind = (uint32_t)o->optim.kind;
  const sc_optim *c = &o->optim;
  int sched = o->lr_schedule != SC_LR_CONSTANT;
  double h[SC__CK_NH] = {c->lr,
                         c->beta1,
                         c->beta2,
                         c->eps,
                         c->momentum,
                         c->weight_decay,
                         o->clip_norm,
                         (double)o->lr_schedule,
                         sched ? o->lr_min : 0,
                         sched ? (double)total : 0};
  memcpy(k->hyper, h, sizeof h);
}

static void sc__ck_encode(unsigned char *h, const sc__ckpt *k) {
  memset(h, 0, SC__CK_HEAD);
  memcpy(h, SC__CK_MAGIC, 8);
  sc__put_le(h + 8, 1, 4);
  sc__put_le(h + 12, k->f64 ? 1 : 0, 4);
  sc__put_le(h + 16, k->np, 8);
  sc__put_le(h + 24, k->fp, 8);
  sc__put_le(h + 32, k->nsamples, 8);
  sc__put_le(h + 40, k->bs, 8);
  sc__put_le(h + 48, k->seed, 8);
  sc__put_le(h + 56, k->shuffle, 4);
  sc__put_le(h + 60, k->kind, 4);
  for (int i = 0; i < SC__CK_NH; i++) sc__put_le(h + 64 + 8 * i, sc__dbits(k->hyper[i]), 8);
  sc__put_le(h + 144, k->step, 8);
  sc__put_le(h + 152, k->epoch, 8);
  sc__put_le(h + 160, k->pos, 8);
  sc__put_le(h + 168, k->t, 8);
  for (int i = 0; i < 4; i++) sc__put_le(h + 176 + 8 * i, k->rng[i], 8);
  sc__put_le(h + 208, sc__dbits(k->epoch_sum), 8);
  sc__put_le(h + 216, k->nidx, 8);
}

static void sc__ck_decode(const unsigned char *h, sc__ckpt *k) {
  k->np = sc__get_le(h + 16, 8), k->fp = sc__get_le(h + 24, 8);
  k->nsamples = sc__get_le(h + 32, 8), k->bs = sc__get_le(h + 40, 8);
  k->seed = sc__get_le(h + 48, 8);
  k->shuffle = (uint32_t)sc__get_le(h + 56, 4), k->kind = (uint32_t)sc__get_le(h + 60, 4);
  for (int i = 0; i < SC__CK_NH; i++) k->hyper[i] = sc__dof(sc__get_le(h + 64 + 8 * i, 8));
  k->step = sc__get_le(h + 144, 8), k->epoch = sc__get_le(h + 152, 8);
  k->pos = sc__get_le(h + 160, 8), k->t = sc__get_le(h + 168, 8);
  for (int i = 0; i < 4; i++) k->rng[i] = sc__get_le(h + 176 + 8 * i, 8);
  k->epoch_sum = sc__dof(sc__get_le(h + 208, 8));
  k->nidx = sc__get_le(h + 216, 8);
}

/* Writes a checkpoint atomically (sc__wopen/sc__wcommit; tmp: strlen(path) + SC__TMP_EXTRA
 * bytes). Allocates nothing where POSIX I/O exists. */
static sc_status sc__ck_write(const char *fn, const char *path, char *tmp, const sc__ckpt *k,
                              const void *p, const void *m, const void *v, const size_t *idx) {
  sc__wfile w;
  sc_status st = sc__wopen(&w, path, tmp, fn);
  if (st) return st;
  unsigned char buf[4096];
  uint64_t sum = SC__FNV_INIT;
  sc__ck_encode(buf, k);
  sum = sc__fnv1a(sum, buf, SC__CK_HEAD);
  sc__wwrite(&w, buf, SC__CK_HEAD);
  const void *arr[3] = {p, m, v};
  size_t es = k->f64 ? 8 : 4;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; !w.err && i < k->np;) {
      size_t b = 0;
      for (; i < k->np && b + es <= sizeof buf; i++, b += es)
        sc__put_le(buf + b,
                   k->f64 ? sc__dbits(((const double *)arr[a])[i])
                          : sc__fbits(((const float *)arr[a])[i]),
                   (int)es);
      sum = sc__fnv1a(sum, buf, b);
      sc__wwrite(&w, buf, b);
    }
  for (size_t i = 0; !w.err && i < k->nidx;) {
    size_t b = 0;
    for (; i < k->nidx && b + 8 <= sizeof buf; i++, b += 8)
      sc__put_le(buf + b, (uint64_t)idx[i], 8);
    sum = sc__fnv1a(sum, buf, b);
    sc__wwrite(&w, buf, b);
  }
  sc__put_le(buf, sum, 8);
  sc__wwrite(&w, buf, 8);
  return sc__wcommit(&w, path, fn);
}

/* sc_train's state after `step` steps, the next of which is step `pos` of epoch `epoch`
 * (sum: the loss sum of that epoch's first pos steps), written as a checkpoint */
SC__INT sc_status sc__ck_save(const char *fn, const char *path, char *tmp, sc__ckpt *ck,
                              size_t step, size_t epoch, size_t pos, double sum, const sc__rng *rng,
                              const void *p, const sc_optimizer *opt, const size_t *idx, size_t n) {
  ck->step = step, ck->epoch = epoch, ck->pos = pos, ck->t = step;
  ck->epoch_sum = pos ? sum : 0, ck->nidx = idx ? n : 0;
  memcpy(ck->rng, rng->s, sizeof ck->rng);
  return sc__ck_write(fn, path, tmp, ck, p, opt->m, opt->v, idx);
}

/* The next min(left, cap) bytes of a checkpoint into buf (*got), added to the checksum; a
 * short read is SC_ERR_IO (a read error) or SC_ERR_FORMAT (truncated, naming the offset). */
static sc_status sc__ck_chunk(FILE *f, unsigned char *buf, size_t cap, size_t left, size_t *got,
                              uint64_t *sum, size_t off, const char *path, const char *fn) {
  size_t want = left < cap ? left : cap;
  errno = 0;
  *got = fread(buf, 1, want, f);
  if (*got < want) {
    sc_status st = sc__rerr(f, path, fn);
    return st ? st : sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated at offset %zu", path, off + *got);
  }
  *sum = sc__fnv1a(*sum, buf, *got);
  return SC_OK;
}

/* Reads and checks a whole checkpoint. k receives the header. If want is not NULL, the run's
 * identity (nparams, fingerprint, samples, batch size, seed, shuffle, optimizer and clip
 * settings) must match it (SC_ERR_ARG / SC_ERR_SHAPE naming the field). The arrays go to p,
 * m, v (nparams floats each) and idx (samples entries), each may be NULL; on an error they
 * may hold part of the file, so the caller reads p into scratch memory. */
SC__INT sc_status sc__ck_read(const char *fn, const char *path, const sc_chain *chain,
                              const sc__ckpt *want, sc__ckpt *k, void *p, void *m, void *v,
                              size_t *idx) {
  FILE *f;
  sc_status st = sc__ropen(&f, path, fn);
  if (st) return st;
  unsigned char buf[4096];
  unsigned char *seen = NULL;
  errno = 0;
  size_t got = fread(buf, 1, SC__CK_HEAD, f);
  if (got < SC__CK_HEAD && (st = sc__rerr(f, path, fn))) goto out;
  if (got < 8 || memcmp(buf, SC__CK_MAGIC, 8) != 0) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not a simplechain checkpoint (bad magic at offset 0)",
                  path);
    goto out;
  }
  if (got < SC__CK_HEAD) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)", path,
                  got, SC__CK_HEAD);
    goto out;
  }
  uint64_t ver = sc__get_le(buf + 8, 4), flags = sc__get_le(buf + 12, 4);
  if (ver != 1 || flags > 1) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported version %llu / flags %llu at offset 8",
                  path, (unsigned long long)ver, (unsigned long long)flags);
    goto out;
  }
  sc__ck_decode(buf, k);
  k->f64 = (uint32_t)flags;
  uint64_t sum = sc__fnv1a(SC__FNV_INIT, buf, SC__CK_HEAD);
  /* the header's own consistency */
  const char *bad = NULL;
  size_t at = 0;
  int hok = 1;
  for (int i = 0; i < SC__CK_NH; i++) hok &= isfinite(k->hyper[i]) != 0;
  uint64_t spe = k->bs ? (k->nsamples + k->bs - 1) / k->bs : 0;
  if (k->np != chain->nparams) {
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)k->np, chain->nparams);
    goto out;
  }
  if (k->fp != sc__fingerprint(chain)) {
    st =
        sc__fail(SC_ERR_SHAPE, fn,
                 "'%s': written for a chain of a different shape (fingerprint at offset 24)", path);
    goto out;
  }
  if (k->nsamples == 0 || k->nsamples > SIZE_MAX / 16)
    bad = "sample count", at = 32;
  else if (k->bs == 0 || k->bs > k->nsamples)
    bad = "batch size", at = 40;
  else if (k->shuffle > 1)
    bad = "shuffle flag", at = 56;
  else if (k->kind < SC_ADAM || k->kind > SC_SGD)
    bad = "optimizer kind", at = 60;
  else if (!hok || (k->hyper[7] != 0 && k->hyper[7] != 1))
    bad = "optimizer settings", at = 64;
  else if (k->pos >= spe)
    bad = "steps into the epoch", at = 160;
  else if (k->epoch > UINT64_MAX / spe || k->epoch * spe + k->pos != k->step)
    bad = "step", at = 144;
  else if (k->t != k->step)
    bad = "optimizer step count", at = 168;
  else if (!isfinite(k->epoch_sum))
    bad = "epoch loss sum", at = 208;
  else if (k->nidx != (k->shuffle ? k->nsamples : 0))
    bad = "index count", at = 216;
  if (bad) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': inconsistent %s at offset %zu (file corrupted)", path,
                  bad, at);
    goto out;
  }
  if (want && k->f64 != want->f64) {
    st = sc__fail(SC_ERR_ARG, fn,
                  "'%s' was written by sc_train%s (%s parameters): resume it with sc_train%s", path,
                  k->f64 ? "_f64" : "", k->f64 ? "double" : "float", k->f64 ? "_f64" : "");
    goto out;
  }
  if (want) {
    static const char *hn[SC__CK_NH] = {
        "lr",           "beta1",     "beta2",       "eps",    "momentum",
        "weight_decay", "clip_norm", "lr_schedule", "lr_min", "the schedule's length (epochs)"};
    if (k->nsamples != want->nsamples)
      bad = "the sample count";
    else if (k->bs != want->bs)
      bad = "the batch size";
    else if (k->seed != want->seed)
      bad = "the seed";
    else if (k->shuffle != want->shuffle)
      bad = "shuffling";
    else if (k->kind != want->kind)
      bad = "the optimizer";
    for (int i = 0; !bad && i < SC__CK_NH; i++)
      if (sc__dbits(k->hyper[i]) != sc__dbits(want->hyper[i])) bad = hn[i];
    if (bad) {
      st = sc__fail(SC_ERR_ARG, fn,
                    "'%s' was written by a run with different settings (%s differs): resuming "
                    "needs the same data, batch size, seed, shuffling, optimizer, clip_norm and "
                    "learning-rate schedule",
                    path, bad);
      goto out;
    }
  }
  /* the size the header claims, against the file's: nothing is allocated for a lie */
  int ok = 1;
  size_t es = k->f64 ? 8 : 4;
  size_t need = sc__add(sc__add(SC__CK_HEAD, sc__mul((size_t)k->np, 3 * es, &ok), &ok),
                        sc__add(sc__mul((size_t)k->nidx, 8, &ok), 8, &ok), &ok);
  long end = -1;
  if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
  if (!ok || end < 0 || (uint64_t)end != (uint64_t)need || fseek(f, SC__CK_HEAD, SEEK_SET) != 0) {
    if (end < 0)
      st = sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
    else
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s: the file has %ld bytes, its header needs %zu",
                    path, (uint64_t)end < need ? "truncated" : "unexpected bytes at the end", end,
                    need);
    goto out;
  }
  void *arr[3] = {p, m, v};
  size_t off = SC__CK_HEAD;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; i < k->np;) {
      if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->np - i) * es, &got, &sum, off, path, fn)))
        goto out;
      for (size_t b = 0; b + es <= got; b += es, i++, off += es) {
        double x = k->f64 ? sc__dof(sc__get_le(buf + b, 8))
                          : (double)sc__fof((uint32_t)sc__get_le(buf + b, 4));
        if (!isfinite(x) || (a == 2 && x < 0)) {
          static const char *an[3] = {"parameter", "first moment", "second moment"};
          st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s %zu (offset %zu) is %g", path, an[a], i, off,
                        x);
          goto out;
        }
        if (arr[a] && k->f64)
          ((double *)arr[a])[i] = x;
        else if (arr[a])
          ((float *)arr[a])[i] = (float)x;
      }
    }
  if (k->nidx) {
    seen = calloc((size_t)(k->nidx + 7) / 8, 1);
    if (!seen) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto out;
    }
  }
  for (size_t i = 0; i < k->nidx;) {
    if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->nidx - i) * 8, &got, &sum, off, path, fn)))
      goto out;
    for (size_t b = 0; b < got; b += 8, i++, off += 8) {
      uint64_t j = sc__get_le(buf + b, 8);
      if (j >= k->nsamples || (seen[j / 8] >> (j % 8) & 1)) {
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': the sample order is not a permutation (entry %zu at offset %zu)", path,
                      i, off);
        goto out;
      }
      seen[j / 8] |= (unsigned char)(1u << (j % 8));
      if (idx) idx[i] = (size_t)j;
    }
  }
  errno = 0;
  got = fread(buf, 1, 8, f);
  if (got < 8) {
    if (!(st = sc__rerr(f, path, fn)))
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path, off);
  } else if (sc__get_le(buf, 8) != sum)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)", path,
                  off);
out:
  free(seen);
  fclose(f);
  return st;
}

sc_status sc_checkpoint_info(const sc_chain *chain, const char *path, sc_checkpoint_state *info) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(info);
  sc__ckpt k;
  sc_status st = sc__ck_read(__func__, path, chain, NULL, &k, NULL, NULL, NULL, NULL);
  if (st) return st;
  memset(info, 0, sizeof *info);
  info->step = (size_t)k.step;
  info->epoch = (size_t)k.epoch;
  info->epoch_step = (size_t)k.pos;
  info->samples = (size_t)k.nsamples;
  info->batch_size = (size_t)k.bs;
  info->seed = k.seed;
  info->shuffle = (int)k.shuffle;
  info->optim.kind = (sc_optim_kind)k.kind;
  info->optim.lr = k.hyper[0], info->optim.beta1 = k.hyper[1], info->optim.beta2 = k.hyper[2];
  info->optim.eps = k.hyper[3], info->optim.momentum = k.hyper[4];
  info->optim.weight_decay = k.hyper[5];
  info->clip_norm = k.hyper[6];
  info->lr_schedule = (sc_lr_schedule)(int)k.hyper[7];
  info->lr_min = k.hyper[8];
  info->f64 = (int)k.f64;
  return SC_OK;
}
