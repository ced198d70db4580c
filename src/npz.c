/* src/npz.c — NumPy .npz files: the parameters exported as the arrays of the matching
 * torch.nn.Sequential's state_dict, and imported back (stored or deflated). */
#include "internal.h"

/* ---------------------------------------------------------------- NumPy .npz files */
/* An .npz file is a zip archive of .npy files, one per array. The arrays are the
 * parameter blocks, named as the state_dict of the matching torch.nn.Sequential (see the
 * header). Written "stored" (no compression, so zlib is not needed); read stored or
 * deflated (np.savez_compressed; deflate needs zlib). Zip64 end records (archives over
 * 4 GiB or 65535 arrays) are refused; zip64 size fields of single entries are read. */

typedef struct sc__npz_arr {
  char name[48]; /* "3.weight" */
  size_t poff, count;
  int ndim;
  size_t shape[4];
  uint32_t crc;    /* export: of the .npy bytes */
  uint64_t offset; /* export: of its local header */
  size_t hlen;     /* export: .npy header bytes (magic included) */
  int seen;        /* import */
} sc__npz_arr;

/* The arrays of a chain in parameter order, and the Sequential indices they carry: a dense
 * or conv layer is module i (Linear / Conv2d) followed, unless its activation is the
 * identity, by the activation's module i+1; maxpool2d, flatten and dropout are one module
 * each. *out is malloc'ed. */
static sc_status sc__npz_plan(const char *fn, const sc_chain *c, sc__npz_arr **out, size_t *na) {
  sc__npz_arr *a = calloc(2 * c->nlayers + 1, sizeof *a);
  if (!a) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  size_t k = 0, idx = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc__lplan *P = &c->L[l];
    const sc_layer *s = &P->spec;
    if (s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D) {
      size_t nw = P->np - (s->bias ? s->outputs : 0);
      sc__npz_arr *w = &a[k++];
      snprintf(w->name, sizeof w->name, "%zu.weight", idx);
      w->poff = P->poff, w->count = nw;
      w->shape[0] = s->outputs;
      if (s->kind == SC_LAYER_DENSE) {
        w->ndim = 2, w->shape[1] = P->in;
      } else {
        w->ndim = 4, w->shape[1] = P->ic, w->shape[2] = s->kh, w->shape[3] = s->kw;
      }
      if (s->bias) {
        sc__npz_arr *b = &a[k++];
        snprintf(b->name, sizeof b->name, "%zu.bias", idx);
        b->poff = P->poff + nw, b->count = s->outputs, b->ndim = 1, b->shape[0] = s->outputs;
      }
      idx += s->act != SC_IDENTITY ? 2 : 1;
    } else {
      idx++;
    }
  }
  *out = a, *na = k;
  return SC_OK;
}

/* CRC-32 of zip (reflected polynomial 0xEDB88320), bit by bit: a few ms per MB, and no
 * table to initialise */
static uint32_t sc__crc32(uint32_t crc, const unsigned char *b, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= b[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/* the .npy header of an array: magic, version 1.0, length, the dict padded with spaces to
 * a multiple of 64 bytes in all, ending in a newline (as numpy writes it) */
static size_t sc__npy_header(unsigned char *h, size_t cap, const sc__npz_arr *a, int f64) {
  char dict[256], shape[128];
  int m = 0;
  shape[0] = 0;
  for (int d = 0; d < a->ndim; d++)
    m += snprintf(shape + m, sizeof shape - (size_t)m, "%s%zu", d ? ", " : "", a->shape[d]);
  snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (%s%s), }",
           f64 ? 8 : 4, shape, a->ndim == 1 ? "," : "");
  size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
  if (total > cap) return 0;
  memcpy(h, "\x93NUMPY\x01\x00", 8);
  sc__put_le(h + 8, total - 10, 2);
  memcpy(h + 10, dict, dl);
  memset(h + 10 + dl, ' ', total - 10 - dl - 1);
  h[total - 1] = '\n';
  return total;
}

/* the values p[poff .. poff+count) as little-endian bytes, chunk by chunk: crc (w NULL) or
 * write */
static uint32_t sc__npz_values(const void *p, int f64, const sc__npz_arr *a, uint32_t crc,
                               sc__wfile *w) {
  unsigned char buf[4096];
  size_t es = f64 ? 8 : 4;
  for (size_t k = 0; k < a->count;) {
    size_t m = 0;
    for (; k < a->count && m + es <= sizeof buf; k++, m += es) {
      if (f64)
        sc__put_le(buf + m, sc__dbits(((const double *)p)[a->poff + k]), 8);
      else
        sc__put_le(buf + m, sc__fbits(((const float *)p)[a->poff + k]), 4);
    }
    if (w)
      sc__wwrite(w, buf, m);
    else
      crc = sc__crc32(crc, buf, m);
  }
  return crc;
}

#define SC__ZIP_LOCAL 0x04034b50u
#define SC__ZIP_CENTRAL 0x02014b50u
#define SC__ZIP_END 0x06054b50u
#define SC__ZIP_DATE 0x21 /* 1980-01-01, 00:00: the file depends on the values alone */

static sc_status sc__npz_export(const char *fn, const sc_chain *chain, const void *p, int f64,
                                size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, p, f64, n, path, "exported");
  if (st) return st;
  size_t plen = strlen(path);
  sc__npz_arr *a;
  size_t na;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  if (na > 0xFFFF) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%zu arrays: more than a zip without zip64 holds", na);
  }
  /* offsets and CRCs first: the local headers carry them */
  unsigned char h[512];
  uint64_t off = 0;
  for (size_t i = 0; i < na; i++) {
    a[i].hlen = sc__npy_header(h, sizeof h, &a[i], f64);
    a[i].crc = sc__npz_values(p, f64, &a[i], sc__crc32(0, h, a[i].hlen), NULL);
    a[i].offset = off;
    off += 30 + strlen(a[i].name) + 4 + a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
  }
  if (off > 0xFFFFFFFFu - 65536u * (na + 1)) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "%zu parameters: over the 4 GiB a zip without zip64 holds", n);
  }
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) {
    free(a);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    free(a);
    return st;
  }
  unsigned char z[64];
  uint64_t cd_size = 0;
  for (int pass = 0; pass < 2; pass++) /* 0: entries, 1: central directory */
    for (size_t i = 0; i < na; i++) {
      size_t nl = strlen(a[i].name) + 4;
      uint64_t size = a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
      unsigned char *q = z;
      sc__put_le(q, pass ? SC__ZIP_CENTRAL : SC__ZIP_LOCAL, 4), q += 4;
      if (pass) sc__put_le(q, 20, 2), q += 2; /* made by: version 2.0 */
      sc__put_le(q, 20, 2), q += 2;           /* needed: 2.0 */
      sc__put_le(q, 0, 2), q += 2;            /* flags */
      sc__put_le(q, 0, 2), q += 2;            /* stored */
      sc__put_le(q, 0, 2), q += 2;            /* time */
      sc__put_le(q, SC__ZIP_DATE, 2), q += 2;
      sc__put_le(q, a[i].crc, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, nl, 2), q += 2;
      sc__put_le(q, 0, 2), q += 2; /* extra */
      if (pass) {
        memset(q, 0, 10), q += 10; /* comment, disk, internal and external attributes */
        sc__put_le(q, a[i].offset, 4), q += 4;
        cd_size += (uint64_t)(q - z) + nl;
      }
      sc__wwrite(&w, z, (size_t)(q - z));
      sc__wwrite(&w, a[i].name, nl - 4);
      sc__wwrite(&w, ".npy", 4);
      if (!pass) {
        sc__npy_header(h, sizeof h, &a[i], f64);
        sc__wwrite(&w, h, a[i].hlen);
        sc__npz_values(p, f64, &a[i], 0, &w);
      }
    }
  sc__put_le(z, SC__ZIP_END, 4);
  sc__put_le(z + 4, 0, 4); /* disk numbers */
  sc__put_le(z + 8, na, 2);
  sc__put_le(z + 10, na, 2);
  sc__put_le(z + 12, cd_size, 4);
  sc__put_le(z + 16, off, 4);
  sc__put_le(z + 20, 0, 2);
  sc__wwrite(&w, z, 22);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  free(a);
  return st;
}

/* --- reading */

/* reads len bytes at offset off; a short read is SC_ERR_FORMAT naming what was read */
static sc_status sc__npz_pread(const char *fn, FILE *f, const char *path, uint64_t off,
                               unsigned char *buf, size_t len, const char *what) {
  if (off > (uint64_t)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': %s at offset %llu lies outside the file", path, what,
                    (unsigned long long)off);
  errno = 0;
  size_t got = fread(buf, 1, len, f);
  if (got < len) {
    sc_status st = sc__rerr(f, path, fn);
    if (st) return st;
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': truncated: %s at offset %llu (file ends %zu bytes in)", path, what,
                    (unsigned long long)off, got);
  }
  return SC_OK;
}

/* The dict of an .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (8, 3), }
 * in any key order. Fills descr, fortran and the shape; 0 or a message in err. */
static int sc__npy_dict(const char *s, size_t len, char *descr, size_t dcap, int *fortran,
                        size_t *shape, int *ndim, char *err, size_t ecap) {
  size_t i = 0;
  int have = 0;
#define SC__WS()                                                                                   \
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++
#define SC__BAD(...)                                                                               \
  do {                                                                                             \
    snprintf(err, ecap, __VA_ARGS__);                                                              \
    return -1;                                                                                     \
  } while (0)
  SC__WS();
  if (i >= len || s[i] != '{') SC__BAD("header does not start with '{'");
  i++;
  for (;;) {
    SC__WS();
    if (i < len && s[i] == '}') break;
    if (i >= len || (s[i] != '\'' && s[i] != '"'))
      SC__BAD("expected a quoted key at header byte %zu", i);
    char q = s[i++], key[16];
    size_t k0 = i;
    while (i < len && s[i] != q) i++;
    if (i >= len || i - k0 >= sizeof key) SC__BAD("bad key at header byte %zu", k0);
    memcpy(key, s + k0, i - k0);
    key[i - k0] = 0;
    i++;
    SC__WS();
    if (i >= len || s[i] != ':') SC__BAD("expected ':' after '%s'", key);
    i++;
    SC__WS();
    if (!strcmp(key, "descr")) {
      if (i >= len || (s[i] != '\'' && s[i] != '"')) SC__BAD("'descr' is not a string");
      char dq = s[i++];
      size_t d0 = i;
      while (i < len && s[i] != dq) i++;
      if (i >= len || i - d0 >= dcap) SC__BAD("bad 'descr'");
      memcpy(descr, s + d0, i - d0);
      descr[i - d0] = 0;
      i++;
      have |= 1;
    } else if (!strcmp(key, "fortran_order")) {
      if (len - i >= 4 && !memcmp(s + i, "True", 4))
        *fortran = 1, i += 4;
      else if (len - i >= 5 && !memcmp(s + i, "False", 5))
        *fortran = 0, i += 5;
      else
        SC__BAD("'fortran_order' is neither True nor False");
      have |= 2;
    } else if (!strcmp(key, "shape")) {
      if (i >= len || s[i] != '(') SC__BAD("'shape' is not a tuple");
      i++;
      *ndim = 0;
      for (;;) {
        SC__WS();
        if (i < len && s[i] == ')') break;
        if (i >= len || s[i] < '0' || s[i] > '9') SC__BAD("bad 'shape' at header byte %zu", i);
        uint64_t v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
          if (v > (UINT64_MAX - 9) / 10) SC__BAD("a dimension of 'shape' overflows");
          v = v * 10 + (uint64_t)(s[i++] - '0');
        }
        if (*ndim >= 8) SC__BAD("'shape' has more than 8 dimensions");
        if (v > SIZE_MAX) SC__BAD("a dimension of 'shape' overflows");
        shape[(*ndim)++] = (size_t)v;
        SC__WS();
        if (i < len && s[i] == ',') {
          i++;
          continue;
        }
        if (i < len && s[i] == ')') break;
        SC__BAD("bad 'shape' at header byte %zu", i);
      }
      i++;
      have |= 4;
    } else {
      SC__BAD("unknown key '%s'", key);
    }
    SC__WS();
    if (i < len && s[i] == ',') {
      i++;
      continue;
    }
    if (i < len && s[i] == '}') break;
    SC__BAD("expected ',' or '}' at header byte %zu", i);
  }
  i++;
  SC__WS();
  if (i != len) SC__BAD("bytes after the header's '}'");
  if (have != 7)
    SC__BAD("header lacks '%s'", !(have & 1) ? "descr" : !(have & 2) ? "fortran_order" : "shape");
  return 0;
#undef SC__WS
#undef SC__BAD
}

static void sc__shape_str(char *b, size_t cap, const size_t *shape, int ndim) {
  int m = snprintf(b, cap, "(");
  for (int d = 0; d < ndim && m > 0 && (size_t)m < cap; d++)
    m += snprintf(b + m, cap - (size_t)m, "%s%zu", d ? ", " : "", shape[d]);
  if (m > 0 && (size_t)m < cap) snprintf(b + m, cap - (size_t)m, "%s)", ndim == 1 ? "," : "");
}

/* one .npy (bytes u[0..len)) into dst (float or double) at the array's place */
static sc_status sc__npy_read(const char *fn, const char *path, const sc__npz_arr *a,
                              const unsigned char *u, size_t len, void *dst, int f64) {
  if (len < 10 || memcmp(u, "\x93NUMPY", 6) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is not an .npy (bad magic)", path,
                    a->name);
  unsigned major = u[6];
  if (major < 1 || major > 3)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': unsupported .npy version %u.%u", path,
                    a->name, major, u[7]);
  size_t hl = major == 1 ? (size_t)sc__get_le(u + 8, 2)
                         : (len >= 12 ? (size_t)sc__get_le(u + 8, 4) : SIZE_MAX);
  size_t h0 = major == 1 ? 10 : 12;
  if (hl > len - h0 || len < h0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': truncated .npy header", path, a->name);
  char descr[16], msg[160];
  int fortran = 0, ndim = 0;
  size_t shape[8];
  if (sc__npy_dict((const char *)u + h0, hl, descr, sizeof descr, &fortran, shape, &ndim, msg,
                   sizeof msg))
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': .npy header: %s", path, a->name, msg);
  int big = 0, es = 0;
  if ((descr[0] == '<' || descr[0] == '>' || descr[0] == '=') && descr[1] == 'f' &&
      (descr[2] == '4' || descr[2] == '8') && !descr[3]) {
    big = descr[0] == '>';
    es = descr[2] - '0';
  }
  if (!es)
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' has dtype '%s'; float32 ('<f4') or float64 ('<f8') needed",
                    path, a->name, descr);
  char got[128], want[128];
  sc__shape_str(got, sizeof got, shape, ndim);
  sc__shape_str(want, sizeof want, a->shape, a->ndim);
  if (strcmp(got, want) != 0)
    return sc__fail(SC_ERR_SHAPE, fn, "'%s': array '%s' has shape %s, the chain needs %s", path,
                    a->name, got, want);
  if (fortran) {
    int wide = 0;
    for (int d = 0; d < ndim; d++) wide += shape[d] > 1;
    if (wide > 1)
      return sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': array '%s' is in Fortran order; save C-ordered arrays "
                      "(np.ascontiguousarray)",
                      path, a->name);
  }
  const unsigned char *v = u + h0 + hl;
  size_t nb = len - h0 - hl;
  if (nb != a->count * (size_t)es)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' holds %zu bytes of values, %zu expected",
                    path, a->name, nb, a->count * (size_t)es);
  for (size_t k = 0; k < a->count; k++, v += es) {
    unsigned char b[8] = {0};
    for (int j = 0; j < es; j++) b[j] = big ? v[es - 1 - j] : v[j];
    double x = es == 8 ? sc__dof(sc__get_le(b, 8)) : (double)sc__fof((uint32_t)sc__get_le(b, 4));
    if (f64)
      ((double *)dst)[a->poff + k] = x;
    else
      ((float *)dst)[a->poff + k] = (float)x;
    double y = f64 ? x : (double)(float)x;
    if (!isfinite(y))
      return sc__fail(SC_ERR_NONFINITE, fn, "'%s': array '%s' element %zu is %s%s", path, a->name,
                      k, isnan(y) ? "NaN" : "Inf", isfinite(x) ? " (beyond float range)" : "");
  }
  return SC_OK;
}

/* the uncompressed bytes of one entry into out (exactly usize bytes) */
static sc_status sc__npz_inflate(const char *fn, const char *path, const char *name,
                                 unsigned char *in, size_t csize, unsigned char *out,
                                 size_t usize) {
#ifdef SC_HAVE_ZLIB
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    return sc__fail(SC_ERR_NOMEM, fn, "zlib's inflateInit2 failed (out of memory)");
  sc_status st = SC_OK;
  size_t done_in = 0, done_out = 0;
  int r = Z_OK, longer = 0;
  unsigned char spill; /* one byte past the stated size: a longer stream (a bomb) shows */
  for (;;) {
    /* zlib counts in uInt: at most 1 GiB at a time */
    size_t ci = csize - done_in, co = usize - done_out;
    zs.next_in = in + done_in;
    zs.avail_in = (uInt)(ci > (1u << 30) ? (1u << 30) : ci);
    zs.next_out = co ? out + done_out : &spill;
    zs.avail_out = co ? (uInt)(co > (1u << 30) ? (1u << 30) : co) : 1;
    uInt ai = zs.avail_in, ao = zs.avail_out;
    r = inflate(&zs, Z_NO_FLUSH);
    done_in += ai - zs.avail_in;
    if (co) {
      done_out += ao - zs.avail_out;
    } else if (zs.avail_out == 0) {
      longer = 1;
      break;
    }
    if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR)) break;
    if (ai == zs.avail_in && ao == zs.avail_out) break; /* no progress: input ends early */
  }
  if (r == Z_MEM_ERROR)
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory in zlib");
  else if (longer)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': array '%s': the deflated data is longer than its stated %zu bytes "
                  "(a zip bomb?)",
                  path, name, usize);
  else if (r != Z_STREAM_END)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is damaged or truncated",
                  path, name);
  else if (done_out != usize)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is %zu bytes, %zu stated",
                  path, name, done_out, usize);
  inflateEnd(&zs);
  return st;
#else
  (void)in, (void)csize, (void)out, (void)usize;
  return sc__fail(SC_ERR_UNSUPPORTED, fn,
                  "'%s': array '%s' is compressed (np.savez_compressed); reading it needs zlib: "
                  "compile with -DSC_HAVE_ZLIB and link -lz, or save with np.savez",
                  path, name);
#endif
}

static sc_status sc__npz_import(const char *fn, const sc_chain *chain, void *p, int f64, size_t n,
                                const char *path) {
  sc_status st = sc__init_check(fn, chain, p, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  sc__npz_arr *a = NULL;
  size_t na = 0;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  FILE *f = NULL;
  unsigned char *tail = NULL, *cd = NULL, *cbuf = NULL, *ubuf = NULL;
  void *tmp = NULL;
  if ((st = sc__ropen(&f, path, fn))) goto done;
  if (fseek(f, 0, SEEK_END) != 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  long fsl = ftell(f);
  if (fsl < 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  uint64_t fsize = (uint64_t)fsl;
  if (fsize < 22) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not an .npz (zip) file: %llu bytes", path,
                  (unsigned long long)fsize);
    goto done;
  }
  /* the end record: the last "PK\5\6" whose comment ends the file */
  size_t tl = fsize < 22 + 65535 ? (size_t)fsize : 22 + 65535;
  tail = malloc(tl);
  tmp = malloc(n * (f64 ? sizeof(double) : sizeof(float)) + 1);
  if (!tail || !tmp) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, fsize - tl, tail, tl, "the end of the file"))) goto done;
  size_t e = tl - 22 + 1;
  while (e-- > 0)
    if (sc__get_le(tail + e, 4) == SC__ZIP_END && e + 22 + sc__get_le(tail + e + 20, 2) == tl)
      break;
  if (e == (size_t)-1) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': not an .npz (zip) file: no end-of-central-directory record", path);
    goto done;
  }
  uint64_t eoff = fsize - tl + e;
  uint64_t nent = sc__get_le(tail + e + 10, 2), cds = sc__get_le(tail + e + 12, 4);
  uint64_t cdo = sc__get_le(tail + e + 16, 4);
  if (sc__get_le(tail + e + 4, 4) != 0 || sc__get_le(tail + e + 8, 2) != nent) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip split over several disks", path);
    goto done;
  }
  if (nent == 0xFFFF || cds == 0xFFFFFFFFu || cdo == 0xFFFFFFFFu) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip64 archive (over 4 GiB or 65535 entries)",
                  path);
    goto done;
  }
  if (cdo > eoff || cds > eoff - cdo) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': the central directory (offset %llu, %llu bytes) lies outside the file",
                  path, (unsigned long long)cdo, (unsigned long long)cds);
    goto done;
  }
  cd = malloc((size_t)cds + 1);
  if (!cd) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, cdo, cd, (size_t)cds, "the central directory"))) goto done;
  size_t at = 0;
  for (uint64_t ent = 0; ent < nent; ent++) {
    if (cds - at < 46 || sc__get_le(cd + at, 4) != SC__ZIP_CENTRAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': bad central directory entry %llu at offset %llu",
                    path, (unsigned long long)ent, (unsigned long long)(cdo + at));
      goto done;
    }
    const unsigned char *c = cd + at;
    unsigned flags = (unsigned)sc__get_le(c + 8, 2), method = (unsigned)sc__get_le(c + 10, 2);
    uint32_t crc = (uint32_t)sc__get_le(c + 16, 4);
    uint64_t csize = sc__get_le(c + 20, 4), usize = sc__get_le(c + 24, 4);
    size_t nl = (size_t)sc__get_le(c + 28, 2), xl = (size_t)sc__get_le(c + 30, 2);
    size_t cl = (size_t)sc__get_le(c + 32, 2);
    uint64_t loff = sc__get_le(c + 42, 4);
    if (cds - at - 46 < (uint64_t)nl + xl + cl) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': central directory entry %llu is truncated", path,
                    (unsigned long long)ent);
      goto done;
    }
    char name[64];
    const char *nm = (const char *)c + 46;
    int named = nl > 4 && nl - 4 < sizeof name && !memcmp(nm + nl - 4, ".npy", 4);
    if (named) {
      memcpy(name, nm, nl - 4);
      name[nl - 4] = 0;
      named = strlen(name) == nl - 4;
    }
    if (!named) {
      char shown[40];
      size_t sl = nl < sizeof shown - 1 ? nl : sizeof shown - 1;
      for (size_t i = 0; i < sl; i++) shown[i] = nm[i] >= 32 && nm[i] < 127 ? nm[i] : '?';
      shown[sl] = 0;
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': entry '%s%s' is not an .npy array of this chain",
                    path, shown, nl > sl ? "..." : "");
      goto done;
    }
    /* zip64 sizes of this entry */
    for (size_t x = 0; x + 4 <= xl;) {
      const unsigned char *xp = c + 46 + nl + x;
      size_t id = (size_t)sc__get_le(xp, 2), len = (size_t)sc__get_le(xp + 2, 2);
      if (len > xl - x - 4) break;
      if (id == 1) {
        const unsigned char *v = xp + 4, *vend = xp + 4 + len;
        if (usize == 0xFFFFFFFFu && vend - v >= 8) usize = sc__get_le(v, 8), v += 8;
        if (csize == 0xFFFFFFFFu && vend - v >= 8) csize = sc__get_le(v, 8), v += 8;
        if (loff == 0xFFFFFFFFu && vend - v >= 8) loff = sc__get_le(v, 8), v += 8;
      }
      x += 4 + len;
    }
    at += 46 + nl + xl + cl;
    sc__npz_arr *A = NULL;
    for (size_t i = 0; i < na && !A; i++)
      if (!strcmp(a[i].name, name)) A = &a[i];
    if (!A) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': unexpected array '%s' (this chain's arrays are %s ... %s, see the "
                    "header)",
                    path, name, na ? a[0].name : "none", na ? a[na - 1].name : "none");
      goto done;
    }
    if (A->seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' appears twice", path, name);
      goto done;
    }
    A->seen = 1;
    if (flags & 1u) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': array '%s' is encrypted", path, name);
      goto done;
    }
    if (method != 0 && method != 8) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "'%s': array '%s' uses zip compression method %u (stored and deflate only)",
                    path, name, method);
      goto done;
    }
    /* no more than its shape can need: 8 bytes a value and a header of at most 64 KiB */
    uint64_t cap = (uint64_t)A->count * 8 + 65536 + 12;
    if (usize > cap) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' claims %llu bytes, more than its shape can need (%llu)", path,
                    name, (unsigned long long)usize, (unsigned long long)cap);
      goto done;
    }
    if ((method == 0 && csize != usize) || loff > eoff || csize > eoff) {
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': inconsistent sizes or offset", path, name);
      goto done;
    }
    unsigned char lh[30];
    if ((st = sc__npz_pread(fn, f, path, loff, lh, 30, "a local header"))) goto done;
    if (sc__get_le(lh, 4) != SC__ZIP_LOCAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': no local header at offset %llu", path,
                    name, (unsigned long long)loff);
      goto done;
    }
    uint64_t doff = loff + 30 + sc__get_le(lh + 26, 2) + sc__get_le(lh + 28, 2);
    if (doff > eoff || csize > eoff - doff) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': its data runs past the archive", path,
                    name);
      goto done;
    }
    free(cbuf);
    free(ubuf);
    cbuf = malloc((size_t)csize + 1);
    ubuf = method == 0 ? NULL : malloc((size_t)usize + 1);
    if (!cbuf || (method != 0 && !ubuf)) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto done;
    }
    if ((st = sc__npz_pread(fn, f, path, doff, cbuf, (size_t)csize, "an array's data"))) goto done;
    const unsigned char *u = cbuf;
    if (method == 8) {
      if ((st = sc__npz_inflate(fn, path, name, cbuf, (size_t)csize, ubuf, (size_t)usize)))
        goto done;
      u = ubuf;
    }
    if (sc__crc32(0, u, (size_t)usize) != crc) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': CRC mismatch (the file is damaged)", path,
                    name);
      goto done;
    }
    if ((st = sc__npy_read(fn, path, A, u, (size_t)usize, tmp, f64))) goto done;
  }
  for (size_t i = 0; i < na; i++)
    if (!a[i].seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is missing", path, a[i].name);
      goto done;
    }
  memcpy(p, tmp, n * (f64 ? sizeof(double) : sizeof(float)));
done:
  if (f) fclose(f);
  free(tail);
  free(cd);
  free(cbuf);
  free(ubuf);
  free(tmp);
  free(a);
  return st;
}

sc_status sc_params_export_npz(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__npz_export(__func__, chain, p, 0, n, path);
}
sc_status sc_params_export_npz_f64(const sc_chain *chain, const double *p, size_t n,
                                   const char *path) {
  return sc__npz_export(__func__, chain, p, 1, n, path);
}
sc_status sc_params_import_npz(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 0, n, path);
}
sc_status sc_params_import_npz_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 1, n, path);
}
