/* src/params.c — a chain's parameters: Glorot initialisation (sc_params_init), the chain's
 * shape fingerprint, and the parameter file format (sc_params_save, sc_params_load). */
#include "internal.h"

/* ---------------------------------------------------------------- params init */
SC__INT sc_status sc__init_check(const char *fn, const sc_chain *c, const void *p, size_t n) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (n != c->nparams)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the chain has %zu parameters", n, c->nparams);
  return SC_OK;
}

/* Glorot-uniform in double; `put` stores one value at index k */
#define SC__GLOROT_BODY(PUT)                                                                       \
  do {                                                                                             \
    sc__rng r;                                                                                     \
    sc__rng_seed(&r, seed);                                                                        \
    for (size_t l = 0; l < chain->nlayers; l++) {                                                  \
      const sc__lplan *P = &chain->L[l];                                                           \
      if (P->np == 0) continue;                                                                    \
      size_t taps = P->spec.kind == SC_LAYER_CONV2D ? P->spec.kh * P->spec.kw : 1;                 \
      size_t fan_in = P->spec.kind == SC_LAYER_CONV2D ? P->R : P->in;                              \
      double a = sqrt(6.0 / (double)(fan_in + P->oc * taps));                                      \
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);                                              \
      for (size_t k = 0; k < nw; k++) PUT(P->poff + k, a * (2.0 * sc__rng_unif(&r) - 1.0));        \
      for (size_t k = nw; k < P->np; k++) PUT(P->poff + k, 0.0);                                   \
    }                                                                                              \
  } while (0)

sc_status sc_params_init(const sc_chain *chain, float *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTF(k, v) p[(k)] = (float)(v)
  SC__GLOROT_BODY(SC__PUTF);
#undef SC__PUTF
  return SC_OK;
}
sc_status sc_params_init_f64(const sc_chain *chain, double *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTD(k, v) p[(k)] = (v)
  SC__GLOROT_BODY(SC__PUTD);
#undef SC__PUTD
  return SC_OK;
}

/* ---------------------------------------------------------------- parameter files */
#define SC__PF_MAGIC "SCPARAMS"
#define SC__PF_HEAD 32

SC__INT uint64_t sc__fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

SC__INT uint64_t sc__fingerprint(const sc_chain *c) {
  uint64_t h = SC__FNV_INIT, v[10];
  v[0] = (uint64_t)c->in_c, v[1] = (uint64_t)c->in_h, v[2] = (uint64_t)c->in_w;
  h = sc__fnv1a(h, v, 3 * sizeof v[0]);
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc_layer *s = &c->L[l].spec;
    int w = s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D;
    v[0] = (uint64_t)s->kind;
    v[1] = w ? (uint64_t)s->outputs : 0;
    v[2] = w ? (uint64_t)s->act : 0;
    v[3] = w ? (uint64_t)s->bias : 0;
    v[4] = (uint64_t)s->kh, v[5] = (uint64_t)s->kw, v[6] = (uint64_t)s->sh;
    v[7] = (uint64_t)s->sw, v[8] = (uint64_t)s->ph, v[9] = (uint64_t)s->pw;
    h = sc__fnv1a(h, v, sizeof v);
  }
  return h;
}

SC__INT void sc__put_le(unsigned char *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
}
SC__INT uint64_t sc__get_le(const unsigned char *b, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* What every parameter writer (files, .npz) checks first: chain, p and n, a usable path, and
 * finite values, float (f64 = 0) or double: a file the loaders would refuse is never written.
 * verb says what did not happen ("saved", "exported"). */
SC__INT sc_status sc__write_check(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                  size_t n, const char *path, const char *verb) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  size_t plen = strlen(path);
  if (plen == 0) return sc__fail(SC_ERR_ARG, fn, "path is empty");
  if (plen > SIZE_MAX - SC__TMP_EXTRA) return sc__fail(SC_ERR_OVERFLOW, fn, "path too long");
  for (size_t k = 0; k < n; k++) {
    double v = f64 ? ((const double *)pv)[k] : (double)((const float *)pv)[k];
    if (!isfinite(v))
      return sc__fail(SC_ERR_NONFINITE, fn, "parameter p[%zu] is %s: not %s to '%s'", k,
                      isnan(v) ? "NaN" : "Inf", verb, path);
  }
  return SC_OK;
}

/* element type 1 (float32) from float p, or 2 (float64) from double p */
static sc_status sc__params_save(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                 size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, pv, f64, n, path, "saved");
  if (st) return st;
  const float *p32 = pv;
  const double *p64 = pv;
  size_t es = f64 ? 8 : 4, plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    return st;
  }
  unsigned char head[SC__PF_HEAD], buf[4096];
  memcpy(head, SC__PF_MAGIC, 8);
  sc__put_le(head + 8, 1, 4);
  sc__put_le(head + 12, f64 ? 2 : 1, 4);
  sc__put_le(head + 16, (uint64_t)n, 8);
  sc__put_le(head + 24, sc__fingerprint(chain), 8);
  sc__wwrite(&w, head, sizeof head);
  uint64_t sum = SC__FNV_INIT;
  for (size_t k = 0; !w.err && k < n;) {
    size_t m = 0;
    for (; k < n && m + es <= sizeof buf; k++, m += es)
      sc__put_le(buf + m, f64 ? sc__dbits(p64[k]) : sc__fbits(p32[k]), (int)es);
    sum = sc__fnv1a(sum, buf, m);
    sc__wwrite(&w, buf, m);
  }
  sc__put_le(head, sum, 8);
  sc__wwrite(&w, head, 8);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  return st;
}

/* either element type into float p (f64 = 0; a double beyond float range is
 * SC_ERR_NONFINITE) or double p (f64 = 1) */
static sc_status sc__params_load(const char *fn, const sc_chain *chain, void *pv, int f64, size_t n,
                                 const char *path) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  FILE *f;
  if ((st = sc__ropen(&f, path, fn))) return st;
  unsigned char head[SC__PF_HEAD], buf[4096];
  errno = 0;
  size_t got = fread(head, 1, sizeof head, f);
  if (got < sizeof head && (st = sc__rerr(f, path, fn))) {
    fclose(f);
    return st;
  }
  if (got < 8 || memcmp(head, SC__PF_MAGIC, 8) != 0) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': not a simplechain parameter file (bad magic at offset 0)", path);
  }
  if (got < sizeof head) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)",
                    path, got, SC__PF_HEAD);
  }
  uint64_t ver = sc__get_le(head + 8, 4), type = sc__get_le(head + 12, 4);
  uint64_t cnt = sc__get_le(head + 16, 8), fp = sc__get_le(head + 24, 8);
  if (ver != 1)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported format version %llu at offset 8", path,
                  (unsigned long long)ver);
  else if (type != 1 && type != 2)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': unsupported element type %llu at offset 12 (1 = float32, 2 = float64)",
                  path, (unsigned long long)type);
  else if (cnt != (uint64_t)n)
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)cnt, n);
  else if (fp != sc__fingerprint(chain))
    st = sc__fail(SC_ERR_SHAPE, fn,
                  "'%s': saved for a chain of a different shape (fingerprint at offset 24)", path);
  if (st) {
    fclose(f);
    return st;
  }
  /* read into a scratch copy first: p is written only when everything checks out */
  size_t es = type == 2 ? 8 : 4;
  double *tmp = malloc(n * sizeof *tmp);
  if (!tmp) {
    fclose(f);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  uint64_t sum = SC__FNV_INIT;
  size_t k = 0;
  while (k < n) {
    size_t want = (n - k) * es < sizeof buf ? (n - k) * es : sizeof buf;
    errno = 0;
    got = fread(buf, 1, want, f);
    sum = sc__fnv1a(sum, buf, got);
    for (size_t m = 0; m + es <= got; m += es, k++)
      tmp[k] = es == 8 ? sc__dof(sc__get_le(buf + m, 8))
                       : (double)sc__fof((uint32_t)sc__get_le(buf + m, 4));
    if (got < want) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': truncated: file ends at offset %zu, expected %zu bytes of values",
                      path, SC__PF_HEAD + k * es + got % es, SC__PF_HEAD + n * es);
      break;
    }
  }
  if (!st) {
    errno = 0;
    got = fread(head, 1, 8, f);
    if (got < 8) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path,
                      SC__PF_HEAD + n * es + got);
    } else if (sc__get_le(head, 8) != sum)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)",
                    path, SC__PF_HEAD + n * es);
    else if (fgetc(f) != EOF)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unexpected bytes after offset %zu", path,
                    SC__PF_HEAD + n * es + 8);
  }
  if (!st)
    for (k = 0; k < n; k++) {
      double v = f64 ? tmp[k] : (double)(float)tmp[k];
      if (!isfinite(v)) {
        st = sc__fail(SC_ERR_NONFINITE, fn, "'%s': parameter %zu (offset %zu) is %s%s", path, k,
                      SC__PF_HEAD + k * es, isnan(v) ? "NaN" : "Inf",
                      isfinite(tmp[k]) ? " as a float (beyond float range)" : "");
        break;
      }
    }
  if (!st)
    for (k = 0; k < n; k++) {
      if (f64)
        ((double *)pv)[k] = tmp[k];
      else
        ((float *)pv)[k] = (float)tmp[k];
    }
  free(tmp);
  fclose(f);
  return st;
}

sc_status sc_params_save(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 0, n, path);
}
sc_status sc_params_save_f64(const sc_chain *chain, const double *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 1, n, path);
}
sc_status sc_params_load(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 0, n, path);
}
sc_status sc_params_load_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 1, n, path);
}
