/* src/idx.c — MNIST-style IDX files (gzipped or not): images as floats, labels as int32, every
 * header field checked. */
#include "internal.h"

/* ---------------------------------------------------------------- IDX files (MNIST) */
/* sc_idx_load_images / sc_idx_load_labels (see simplechain.h). A file is read through a
 * small source: zlib's gzread when built with SC_HAVE_ZLIB (it reads raw files too),
 * stdio otherwise, always in chunks of SC__IDX_CHUNK bytes. src.off counts the bytes of
 * the (decompressed) stream delivered so far: that is the offset error messages give.
 * Nothing is allocated from the header's claims: the header is checked first, then the
 * output grows (doubling) as values actually arrive: memory never exceeds twice what the
 * file really holds (at least SC__IDX_FIRST values), whatever its header claims. */
#define SC__IDX_CHUNK 16384                    /* bytes per read */
#define SC__IDX_MAX_VALUES ((uint64_t)1 << 31) /* headers claiming more are refused */
#define SC__IDX_FIRST ((size_t)1 << 16)        /* first allocation (values), then x2 */

typedef struct sc__idx_src {
  const char *path;
  const char *fn; /* the public function, for messages */
  size_t off;     /* bytes of the decompressed stream delivered so far */
  size_t expect;  /* bytes the whole stream should have (header, then all) */
  char what[96];  /* "a 16-byte header + 10000 x 28 x 28 values", for messages */
#ifdef SC_HAVE_ZLIB
  gzFile gz;
#else
  FILE *f;
#endif
} sc__idx_src;

void sc_free(void *p) { free(p); }

/* " of the decompressed stream" for a gzipped file, "" for a raw one */
static const char *sc__idx_where(const sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  return gzdirect(s->gz) ? "" : " of the decompressed stream";
#else
  (void)s;
  return "";
#endif
}

static sc_status sc__idx_open(sc__idx_src *s, const char *path, const char *fn) {
  s->path = path;
  s->fn = fn;
  s->off = 0;
  s->expect = 0;
  s->what[0] = '\0';
  errno = 0;
#ifdef SC_HAVE_ZLIB
  s->gz = gzopen(path, "rb");
  if (!s->gz) /* gzopen leaves errno 0 when only its own allocation failed */
    return sc__io_fail(fn, errno ? errno : ENOMEM, "cannot open", path);
  gzbuffer(s->gz, 65536); /* before the first read; fewer system calls than the 8 KiB default */
#else
  s->f = fopen(path, "rb");
  if (!s->f) return sc__io_fail(fn, errno ? errno : EIO, "cannot open", path);
#endif
  return SC_OK;
}

static void sc__idx_close(sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  gzclose(s->gz); /* read-only: errors were seen (and reported) by the reads */
#else
  fclose(s->f);
#endif
}

/* Reads up to want bytes into buf; *got < want only where the data ends. A read error
 * or a corrupt / truncated gzip stream fails here, with the message set. */
static sc_status sc__idx_read(sc__idx_src *s, unsigned char *buf, size_t want, size_t *got) {
  size_t have = 0;
  *got = 0;
  while (have < want) {
    size_t ask = want - have < SC__IDX_CHUNK ? want - have : SC__IDX_CHUNK;
#ifdef SC_HAVE_ZLIB
    int r = gzread(s->gz, buf + have, (unsigned)ask);
    int zerr = Z_OK;
    const char *zmsg = gzerror(s->gz, &zerr);
    if (r > 0) {
      have += (size_t)r;
      s->off += (size_t)r;
    }
    *got = have;
    /* Z_BUF_ERROR: the stream stops mid-member ("unexpected end of file"). zlib says so
     * as soon as it decompressed the last bytes there are, which may be well before we
     * read them: keep reading, and fail where the data actually ends (below). */
    if (r < 0 || (zerr != Z_OK && (zerr != Z_BUF_ERROR || (size_t)r < ask))) {
      /* zlib's message starts with "<path>: "; drop that, the path is named anyway */
      size_t plen = strlen(s->path);
      if (!zmsg || !*zmsg) zmsg = "unknown error";
      if (strncmp(zmsg, s->path, plen) == 0 && zmsg[plen] == ':' && zmsg[plen + 1] == ' ')
        zmsg += plen + 2;
      if (zerr == Z_ERRNO) return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s': %s", s->path, zmsg);
      if (zerr == Z_MEM_ERROR)
        return sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory in zlib", s->path);
      if (zerr == Z_BUF_ERROR && s->off < s->expect)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data ends at offset %zu of the "
                        "decompressed stream, expected %zu bytes (zlib: %s)",
                        s->path, s->off, s->expect, zmsg);
      if (zerr == Z_BUF_ERROR)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data is complete (offset %zu of the "
                        "decompressed stream) but the end of the gzip stream (CRC, length) is "
                        "missing (zlib: %s)",
                        s->path, s->off, zmsg);
      /* zlib decompresses ahead, so the damage may lie beyond what was delivered */
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': corrupt gzip stream (zlib: %s), seen after offset %zu of the "
                      "decompressed stream",
                      s->path, zmsg, s->off);
    }
    if ((size_t)r < ask) break; /* the end of the data */
#else
    size_t r = fread(buf + have, 1, ask, s->f);
    have += r;
    s->off += r;
    *got = have;
    if (r < ask) {
      if (ferror(s->f))
        return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s' at offset %zu: %s", s->path, s->off,
                        strerror(errno));
      break;
    }
#endif
  }
  return SC_OK;
}

static const char *sc__idx_type_name(unsigned t) {
  switch (t) {
  case 0x08: return "unsigned byte";
  case 0x09: return "signed byte";
  case 0x0B: return "int16";
  case 0x0C: return "int32";
  case 0x0D: return "float32";
  case 0x0E: return "float64";
  }
  return NULL;
}

/* Reads and checks the header of an IDX file of uint8 values with ndims (1 or 3)
 * dimensions; dims[0..ndims) receive the sizes and *count their product. */
static sc_status sc__idx_header(sc__idx_src *s, unsigned ndims, uint32_t dims[3], size_t *count) {
  static const char *names3[3] = {"the image count", "the row count", "the column count"};
  static const char *names1[1] = {"the label count"};
  const char **names = ndims == 3 ? names3 : names1;
  const char *kind = ndims == 3 ? "images" : "labels";
  const size_t hlen = 4 + 4 * (size_t)ndims;
  unsigned char h[16];
  size_t got;
  s->expect = hlen;
  sc_status st = sc__idx_read(s, h, 4, &got);
  if (st) return st;
#ifndef SC_HAVE_ZLIB
  if (got >= 2 && h[0] == 0x1f && h[1] == 0x8b)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s' is gzip-compressed and this build has no zlib: build with `make` "
                    "(which links zlib when installed), or compile simplechain.c with "
                    "-DSC_HAVE_ZLIB and link -lz, or gunzip the file",
                    s->path);
#endif
  if (got == 0)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': empty file (offset 0), expected a %zu-byte IDX header", s->path, hlen);
  if (got >= 2 && (h[0] != 0 || h[1] != 0))
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': not an IDX file: bytes 0x%02x 0x%02x at offset 0, an IDX file starts "
                    "with two zero bytes%s",
                    s->path, h[0], h[1],
                    h[0] == 0x1f && h[1] == 0x8b ? " (this is gzip data: compressed twice?)" : "");
  if (got < 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header",
                    s->path, s->off, sc__idx_where(s), hlen);
  const char *tname = sc__idx_type_name(h[2]);
  if (!tname)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': unknown IDX data type 0x%02x at offset 2 (magic 0x%02x%02x%02x%02x)",
                    s->path, h[2], h[0], h[1], h[2], h[3]);
  if (h[2] != 0x08)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s': IDX data type 0x%02x (%s) at offset 2 is not supported: %s must be "
                    "0x08 (unsigned byte)",
                    s->path, h[2], tname, kind);
  if (h[3] != ndims)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': %u dimensions (byte 3, magic 0x%02x%02x%02x%02x), %s have %u (magic "
                    "0x000008%02x)%s",
                    s->path, (unsigned)h[3], h[0], h[1], h[2], h[3], kind, ndims, ndims,
                    ndims == 3 && h[3] == 1   ? ": is this a labels file?"
                    : ndims == 1 && h[3] == 3 ? ": is this an images file?"
                                              : "");
  st = sc__idx_read(s, h + 4, hlen - 4, &got);
  if (st) return st;
  if (got < hlen - 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header (%u dimensions)",
                    s->path, s->off, sc__idx_where(s), hlen, ndims);
  for (unsigned d = 0; d < ndims; d++) {
    const unsigned char *b = h + 4 + 4 * d;
    dims[d] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
    if (dims[d] == 0)
      return sc__fail(SC_ERR_FORMAT, s->fn, "'%s': %s (dimension %u, offset %u) is 0", s->path,
                      names[d], d, 4 + 4 * d);
  }
  uint64_t total = 1;
  for (unsigned d = 0; d < ndims; d++) {
    total *= dims[d]; /* no overflow: total <= 2^31 before, dims[d] < 2^32 */
    if (total > SC__IDX_MAX_VALUES) {
      if (ndims == 3)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': the header (offsets 4..15) claims %lu x %lu x %lu images: more "
                        "than 2^31 values, refused",
                        s->path, (unsigned long)dims[0], (unsigned long)dims[1],
                        (unsigned long)dims[2]);
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': the header (offset 4) claims %lu labels: more than 2^31, refused",
                      s->path, (unsigned long)dims[0]);
    }
  }
  int ok = 1;
  *count = (size_t)total;
  s->expect = sc__add(hlen, *count, &ok); /* total <= 2^31: fits even a 32-bit size_t */
  if (ndims == 3)
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu x %lu x %lu pixels", hlen,
             (unsigned long)dims[0], (unsigned long)dims[1], (unsigned long)dims[2]);
  else
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu labels", hlen,
             (unsigned long)dims[0]);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': file size overflows size_t", s->path);
  return SC_OK;
}

/* Reads the count uint8 values after the header, into floats (times scale) or, when
 * labels, into int32_t checked against classes (0: unchecked); then checks that
 * nothing follows. On success *out is the malloc'ed array. */
static sc_status sc__idx_body(sc__idx_src *s, size_t count, int labels, float scale, size_t classes,
                              void **out) {
  unsigned char buf[SC__IDX_CHUNK];
  const size_t esz = labels ? sizeof(int32_t) : sizeof(float);
  void *v = NULL;
  size_t cap = 0, done = 0, got = 0;
  sc_status st = SC_OK;
  *out = NULL;
  while (done < count) {
    size_t want = count - done < SC__IDX_CHUNK ? count - done : SC__IDX_CHUNK;
    if (done + want > cap) {
      size_t ncap = cap ? cap : SC__IDX_FIRST;
      while (ncap < done + want) ncap = ncap > count / 2 ? count : ncap * 2;
      if (ncap > count) ncap = count;
      int ok = 1;
      size_t bytes = sc__mul(ncap, esz, &ok);
      void *nv = ok ? realloc(v, bytes) : NULL;
      if (!nv) {
        st = ok ? sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory for %s (%zu bytes)", s->path,
                           s->what, bytes)
                : sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': %zu values overflow size_t", s->path,
                           ncap);
        goto fail;
      }
      v = nv;
      cap = ncap;
    }
    st = sc__idx_read(s, buf, want, &got);
    if (st) goto fail;
    if (labels) {
      int32_t *lab = (int32_t *)v + done;
      for (size_t i = 0; i < got; i++) {
        if (classes && (size_t)buf[i] >= classes) {
          st = sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': label %u of sample %zu (offset %zu%s) is not < classes = %zu",
                        s->path, (unsigned)buf[i], done + i, s->off - got + i, sc__idx_where(s),
                        classes);
          goto fail;
        }
        lab[i] = (int32_t)buf[i];
      }
    } else {
      float *x = (float *)v + done;
      for (size_t i = 0; i < got; i++) x[i] = (float)buf[i] * scale;
    }
    done += got;
    if (got < want) {
      st = sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated: the data ends at offset %zu%s, expected %zu bytes (%s)",
                    s->path, s->off, sc__idx_where(s), s->expect, s->what);
      goto fail;
    }
  }
  st = sc__idx_read(s, buf, 1, &got); /* must be the end (for gzip: also checks the CRC) */
  if (st) goto fail;
  if (got) {
    st = sc__fail(SC_ERR_FORMAT, s->fn,
                  "'%s': unexpected bytes after the data at offset %zu%s: expected exactly %zu "
                  "bytes (%s)",
                  s->path, s->expect, sc__idx_where(s), s->expect, s->what);
    goto fail;
  }
  *out = v;
  return SC_OK;
fail:
  free(v);
  return st;
}

sc_status sc_idx_load_images(const char *path, float **images, size_t *n, size_t *rows,
                             size_t *cols, float scale) {
  if (images) *images = NULL;
  if (n) *n = 0;
  if (rows) *rows = 0;
  if (cols) *cols = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(images);
  SC__CHECK_NULL(n);
  SC__CHECK_NULL(rows);
  SC__CHECK_NULL(cols);
  if (!isfinite(scale)) return SC__FAIL(SC_ERR_ARG, "scale %g is not finite", (double)scale);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 3, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 0, scale, 0, &v);
  sc__idx_close(&s);
  if (st) return st;
  *images = (float *)v;
  *n = dims[0];
  *rows = dims[1];
  *cols = dims[2];
  return SC_OK;
}

sc_status sc_idx_load_labels(const char *path, int32_t **labels, size_t *n, size_t classes) {
  if (labels) *labels = NULL;
  if (n) *n = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(labels);
  SC__CHECK_NULL(n);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 1, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 1, 0.0f, classes, &v);
  sc__idx_close(&s);
  if (st) return st;
  *labels = (int32_t *)v;
  *n = dims[0];
  return SC_OK;
}
