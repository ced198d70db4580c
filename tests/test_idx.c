/* tests/test_idx.c — sc_idx_load_images / sc_idx_load_labels (IDX files, gzipped or raw).
 *
 * Checked:
 *   - the real MNIST files in ../shared/data/mnist (skipped if absent): shapes, pixel range
 *     with scale 1/255, labels < 10, and pinned byte sums and label histograms;
 *   - round trips of small hand-made files, raw and gzipped (also two gzip members);
 *   - every header field: magic, each other IDX type (SC_ERR_UNSUPPORTED naming it),
 *     unknown types, dimension counts, zero sizes, headers cut at every length, absurd
 *     sizes (0xFFFFFFFF^3, just over 2^31 values) refused before allocating;
 *   - bodies that disagree with the header: truncation at every offset (raw; gzipped
 *     content; the gzip file itself cut at every length), trailing bytes, labels >=
 *     classes, every byte of a gzip stream corrupted; messages name the file and the
 *     offset;
 *   - NULL arguments, bad scale, missing file, a directory; outputs are NULL / 0 after
 *     every failure.
 * Without SC_HAVE_ZLIB the gzip cases check SC_ERR_UNSUPPORTED and its advice instead.
 */
#include "testutil.h"

#include <unistd.h>
#ifdef SC_HAVE_ZLIB
#include <zlib.h>
#endif

/* ---------------------------------------------------------------- helpers */
#ifdef SC_HAVE_ZLIB
static void write_gz(const char *path, const unsigned char *b, size_t n) {
  gzFile g = gzopen(path, "wb9");
  assert_non_null(g);
  if (n) assert_int_equal(gzwrite(g, b, (unsigned)n), (int)n);
  assert_int_equal(gzclose(g), Z_OK);
}
#endif

static void put_be32(unsigned char *b, uint32_t v) {
  b[0] = (unsigned char)(v >> 24), b[1] = (unsigned char)(v >> 16);
  b[2] = (unsigned char)(v >> 8), b[3] = (unsigned char)v;
}

/* An image file: header for n x r x c then n*r*c pattern bytes; *len receives its size. */
static unsigned char *make_images(uint32_t n, uint32_t r, uint32_t c, size_t *len) {
  size_t body = (size_t)n * r * c;
  unsigned char *b = malloc(16 + body + 1);
  assert_non_null(b);
  b[0] = 0, b[1] = 0, b[2] = 0x08, b[3] = 3;
  put_be32(b + 4, n), put_be32(b + 8, r), put_be32(b + 12, c);
  for (size_t i = 0; i < body; i++) b[16 + i] = (unsigned char)(i * 37 + 11);
  *len = 16 + body;
  return b;
}
/* A label file: n labels i % classes. */
static unsigned char *make_labels(uint32_t n, unsigned classes, size_t *len) {
  unsigned char *b = malloc(8 + (size_t)n + 1);
  assert_non_null(b);
  b[0] = 0, b[1] = 0, b[2] = 0x08, b[3] = 1;
  put_be32(b + 4, n);
  for (size_t i = 0; i < n; i++) b[8 + i] = (unsigned char)(i % classes);
  *len = 8 + (size_t)n;
  return b;
}

/* Fails unless the last error message contains needle. */
static void msg_has(const char *needle) {
  if (!strstr(sc_last_error(), needle))
    fail_msg("message \"%s\" lacks \"%s\"", sc_last_error(), needle);
}
static void msg_has_offset(size_t off) {
  char s[48];
  snprintf(s, sizeof s, "offset %zu", off);
  msg_has(s);
}

/* Loads images, checks the status, and on failure that every output was reset. */
static void expect_images(sc_status want, const char *path) {
  float dummy = 0;
  float *x = &dummy;
  size_t n = 7, r = 7, c = 7;
  sc_status st = sc_idx_load_images(path, &x, &n, &r, &c, 1.0f);
  if (st != want)
    fail_msg("images '%s' -> %s, expected %s (%s)", path, sc_status_str(st), sc_status_str(want),
             sc_last_error());
  if (st == SC_OK) {
    assert_non_null(x);
    sc_free(x);
    return;
  }
  assert_null(x);
  assert_int_equal(n, 0);
  assert_int_equal(r, 0);
  assert_int_equal(c, 0);
  assert_true(strlen(sc_last_error()) > 0);
  msg_has("sc_idx_load_images: ");
}
static void expect_labels(sc_status want, const char *path, size_t classes) {
  int32_t dummy = 0;
  int32_t *l = &dummy;
  size_t n = 7;
  sc_status st = sc_idx_load_labels(path, &l, &n, classes);
  if (st != want)
    fail_msg("labels '%s' -> %s, expected %s (%s)", path, sc_status_str(st), sc_status_str(want),
             sc_last_error());
  if (st == SC_OK) {
    assert_non_null(l);
    sc_free(l);
    return;
  }
  assert_null(l);
  assert_int_equal(n, 0);
  assert_true(strlen(sc_last_error()) > 0);
  msg_has("sc_idx_load_labels: ");
}

/* writes b[0..n) to path and loads it as images: status want and, when it fails, a
 * message that names the file and contains needle (unless NULL) */
static void file_images(const char *path, const unsigned char *b, size_t n, sc_status want,
                        const char *needle) {
  tu_write_all(path, b, n);
  expect_images(want, path);
  if (want != SC_OK) msg_has(path);
  if (needle) msg_has(needle);
}
/* the same for a label file with 10 classes */
static void file_labels(const char *path, const unsigned char *b, size_t n, sc_status want,
                        const char *needle) {
  tu_write_all(path, b, n);
  expect_labels(want, path, 10);
  if (want != SC_OK) msg_has(path);
  if (needle) msg_has(needle);
}

/* ---------------------------------------------------------------- arguments */
static void test_null_args(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "null.idx");
  size_t len;
  unsigned char *b = make_images(2, 3, 4, &len);
  tu_write_all(path, b, len);
  float *x = NULL;
  int32_t *l = NULL;
  size_t n = 5, r = 5, c = 5;
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_images(NULL, &x, &n, &r, &c, 1.0f));
  assert_null(x);
  assert_int_equal(n + r + c, 0);
  msg_has("path");
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_images(path, NULL, &n, &r, &c, 1.0f));
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_images(path, &x, NULL, &r, &c, 1.0f));
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_images(path, &x, &n, NULL, &c, 1.0f));
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_images(path, &x, &n, &r, NULL, 1.0f));
  assert_null(x);
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_labels(NULL, &l, &n, 10));
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_labels(path, NULL, &n, 10));
  SC_EXPECT(SC_ERR_NULL, sc_idx_load_labels(path, &l, NULL, 10));
  assert_null(l);
  /* a non-finite scale */
  SC_EXPECT(SC_ERR_ARG, sc_idx_load_images(path, &x, &n, &r, &c, NAN));
  SC_EXPECT(SC_ERR_ARG, sc_idx_load_images(path, &x, &n, &r, &c, INFINITY));
  assert_null(x);
  sc_free(NULL); /* fine */
  remove(path);
  free(b);
}

static void test_io_errors(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "does-not-exist.idx");
  remove(path);
  expect_images(SC_ERR_IO, path);
  msg_has(path);
  msg_has("No such file");
  expect_labels(SC_ERR_IO, path, 10);
  msg_has(path);
  /* a directory opens on POSIX but cannot be read */
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  expect_images(SC_ERR_IO, dir);
  msg_has(dir);
  expect_labels(SC_ERR_IO, dir, 0);
  expect_images(SC_ERR_IO, "");
}

/* ---------------------------------------------------------------- round trips */
static void check_roundtrip(const char *path) {
  size_t len;
  unsigned char *b = make_images(5, 3, 4, &len);
  float *x = NULL;
  size_t n = 0, r = 0, c = 0;
  SC_OK_OR_FAIL(sc_idx_load_images(path, &x, &n, &r, &c, 1.0f));
  assert_int_equal(n, 5);
  assert_int_equal(r, 3);
  assert_int_equal(c, 4);
  for (size_t i = 0; i < 60; i++) assert_true(x[i] == (float)b[16 + i]);
  sc_free(x);
  SC_OK_OR_FAIL(sc_idx_load_images(path, &x, &n, &r, &c, 1.0f / 255));
  for (size_t i = 0; i < 60; i++) {
    assert_true(x[i] == (float)b[16 + i] * (1.0f / 255));
    assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
  }
  sc_free(x);
  SC_OK_OR_FAIL(sc_idx_load_images(path, &x, &n, &r, &c, -2.0f));
  assert_true(x[1] == -2.0f * (float)b[17]);
  sc_free(x);
  free(b);
}
static void check_roundtrip_labels(const char *path) {
  int32_t *l = NULL;
  size_t n = 0;
  SC_OK_OR_FAIL(sc_idx_load_labels(path, &l, &n, 10));
  assert_int_equal(n, 23);
  for (size_t i = 0; i < n; i++) assert_int_equal(l[i], (int32_t)(i % 10));
  sc_free(l);
  SC_OK_OR_FAIL(sc_idx_load_labels(path, &l, &n, 0)); /* no range check */
  sc_free(l);
  expect_labels(SC_ERR_FORMAT, path, 9); /* label 9 at sample 9, offset 17 */
  msg_has("sample 9");
  msg_has("label 9");
  msg_has("offset 17");
}

static void test_roundtrip_raw(void **state) {
  (void)state;
  char pi[512], pl[512];
  tu_tmp_path(pi, sizeof pi, "idx", "rt-images.idx");
  tu_tmp_path(pl, sizeof pl, "idx", "rt-labels.idx");
  size_t len;
  unsigned char *b = make_images(5, 3, 4, &len);
  tu_write_all(pi, b, len);
  free(b);
  b = make_labels(23, 10, &len);
  tu_write_all(pl, b, len);
  free(b);
  check_roundtrip(pi);
  check_roundtrip_labels(pl);
  /* a single 1x1x1 image and a single label */
  b = make_images(1, 1, 1, &len);
  tu_write_all(pi, b, len);
  float *x = NULL;
  size_t n, r, c;
  SC_OK_OR_FAIL(sc_idx_load_images(pi, &x, &n, &r, &c, 1.0f));
  assert_true(n == 1 && r == 1 && c == 1 && x[0] == (float)b[16]);
  sc_free(x);
  free(b);
  /* every byte value survives, labels up to 255 with classes 256 */
  unsigned char lab[8 + 256];
  memcpy(lab, "\0\0\x08\x01\0\0\x01\0", 8);
  for (int i = 0; i < 256; i++) lab[8 + i] = (unsigned char)(255 - i);
  tu_write_all(pl, lab, sizeof lab);
  int32_t *l = NULL;
  SC_OK_OR_FAIL(sc_idx_load_labels(pl, &l, &n, 256));
  assert_int_equal(n, 256);
  for (int i = 0; i < 256; i++) assert_int_equal(l[i], 255 - i);
  sc_free(l);
  expect_labels(SC_ERR_FORMAT, pl, 255); /* sample 0 has label 255 */
  msg_has("sample 0");
  msg_has("label 255");
  msg_has("offset 8");
  remove(pi);
  remove(pl);
}

/* A larger file than one read chunk (16 KiB) and one first allocation (64 Ki values). */
static void test_roundtrip_large(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "large.idx");
  size_t len;
  unsigned char *b = make_images(301, 17, 29, &len); /* 148,393 values */
  tu_write_all(path, b, len);
  float *x = NULL;
  size_t n, r, c;
  SC_OK_OR_FAIL(sc_idx_load_images(path, &x, &n, &r, &c, 1.0f));
  assert_true(n == 301 && r == 17 && c == 29);
  for (size_t i = 0; i < len - 16; i++)
    if (x[i] != (float)b[16 + i]) fail_msg("value %zu: %g != %u", i, (double)x[i], b[16 + i]);
  sc_free(x);
#ifdef SC_HAVE_ZLIB
  write_gz(path, b, len);
  SC_OK_OR_FAIL(sc_idx_load_images(path, &x, &n, &r, &c, 1.0f));
  assert_true(n == 301 && r == 17 && c == 29);
  for (size_t i = 0; i < len - 16; i++) assert_true(x[i] == (float)b[16 + i]);
  sc_free(x);
#endif
  free(b);
  remove(path);
}

static void test_roundtrip_gz(void **state) {
  (void)state;
  char pi[512], pl[512];
  tu_tmp_path(pi, sizeof pi, "idx", "rt-images.idx.gz");
  tu_tmp_path(pl, sizeof pl, "idx", "rt-labels.idx.gz");
  size_t len, llen;
  unsigned char *bi = make_images(5, 3, 4, &len), *bl = make_labels(23, 10, &llen);
#ifdef SC_HAVE_ZLIB
  write_gz(pi, bi, len);
  write_gz(pl, bl, llen);
  size_t glen;
  unsigned char *g = tu_read_all(pi, &glen);
  assert_true(g[0] == 0x1f && g[1] == 0x8b); /* really gzipped */
  free(g);
  check_roundtrip(pi);
  check_roundtrip_labels(pl);
  /* two gzip members one after the other (`cat a.gz b.gz`) are one stream */
  char p1[512], p2[512];
  tu_tmp_path(p1, sizeof p1, "idx", "part1.gz");
  tu_tmp_path(p2, sizeof p2, "idx", "part2.gz");
  write_gz(p1, bi, 30);
  write_gz(p2, bi + 30, len - 30);
  size_t l1, l2;
  unsigned char *g1 = tu_read_all(p1, &l1), *g2 = tu_read_all(p2, &l2);
  unsigned char *cat = malloc(l1 + l2);
  memcpy(cat, g1, l1);
  memcpy(cat + l1, g2, l2);
  tu_write_all(pi, cat, l1 + l2);
  check_roundtrip(pi);
  /* non-gzip bytes after the last member are ignored (documented; gunzip does the same) */
  memcpy(cat + l1, "garbage!", 8);
  tu_write_all(pi, cat, l1 + 8);
  expect_images(SC_ERR_FORMAT, pi); /* the first member alone is a truncated IDX stream */
  msg_has("offset 30");
  free(g1), free(g2), free(cat);
  write_gz(p1, bi, len);
  g1 = tu_read_all(p1, &l1);
  cat = malloc(l1 + 8);
  memcpy(cat, g1, l1);
  memcpy(cat + l1, "garbage!", 8);
  tu_write_all(pi, cat, l1 + 8);
  check_roundtrip(pi);
  free(g1), free(cat);
  remove(p1), remove(p2);
  /* compressed twice: the inner gzip magic is not an IDX magic */
  tu_write_all(p1, bi, len);
  {
    size_t once_len;
    write_gz(p2, bi, len);
    unsigned char *once = tu_read_all(p2, &once_len);
    write_gz(pi, once, once_len);
    free(once);
  }
  expect_images(SC_ERR_FORMAT, pi);
  msg_has("compressed twice");
  remove(p1), remove(p2);
#else
  /* without zlib: a gzip file is refused with advice, a raw one still loads */
  static const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0xff, 0xff};
  tu_write_all(pi, gz, sizeof gz);
  tu_write_all(pl, gz, sizeof gz);
  expect_images(SC_ERR_UNSUPPORTED, pi);
  msg_has(pi);
  msg_has("zlib");
  msg_has("gunzip");
  expect_labels(SC_ERR_UNSUPPORTED, pl, 10);
  msg_has("zlib");
  tu_write_all(pi, bi, len);
  check_roundtrip(pi);
#endif
  free(bi);
  free(bl);
  remove(pi);
  remove(pl);
}

/* ---------------------------------------------------------------- real data */
static int mnist_path(char *buf, size_t cap, const char *file) {
  const char *src = getenv("SC_SRC_DIR");
  snprintf(buf, cap, "%s/../shared/data/mnist/%s", src && *src ? src : ".", file);
  return access(buf, R_OK) == 0;
}

static void check_mnist(const char *img, const char *lab, uint64_t pixel_sum,
                        const int32_t first[10], const size_t hist[10]) {
  char pi[1024], pl[1024];
  int have_img = mnist_path(pi, sizeof pi, img), have_lab = mnist_path(pl, sizeof pl, lab);
  if (!have_img || !have_lab) {
    print_message("skipped: %s or %s not found (set SC_SRC_DIR to the repository root)\n", pi, pl);
    skip();
  }
  float *x = NULL;
  int32_t *l = NULL;
  size_t n = 0, r = 0, c = 0, nl = 0;
#ifndef SC_HAVE_ZLIB
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_idx_load_images(pi, &x, &n, &r, &c, 1.0f / 255));
  msg_has("zlib");
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_idx_load_labels(pl, &l, &nl, 10));
  print_message("built without zlib: the gzipped MNIST files are refused as documented\n");
  (void)pixel_sum, (void)first, (void)hist;
  return;
#else
  SC_OK_OR_FAIL(sc_idx_load_images(pi, &x, &n, &r, &c, 1.0f / 255));
  assert_int_equal(n, 10000);
  assert_int_equal(r, 28);
  assert_int_equal(c, 28);
  uint64_t sum = 0;
  float lo = 1, hi = 0;
  for (size_t i = 0; i < n * r * c; i++) {
    lo = x[i] < lo ? x[i] : lo;
    hi = x[i] > hi ? x[i] : hi;
    sum += (uint64_t)lrintf(x[i] * 255.0f);
  }
  assert_true(lo == 0.0f && hi == 1.0f);
  assert_int_equal(sum, pixel_sum);
  sc_free(x);
  SC_OK_OR_FAIL(sc_idx_load_labels(pl, &l, &nl, 10));
  assert_int_equal(nl, n);
  size_t h[10] = {0};
  for (size_t i = 0; i < nl; i++) {
    assert_true(l[i] >= 0 && l[i] < 10);
    h[l[i]]++;
  }
  for (int k = 0; k < 10; k++) {
    assert_int_equal(l[k], first[k]);
    assert_int_equal(h[k], hist[k]);
  }
  sc_free(l);
  /* the wrong kind of file for each loader */
  expect_images(SC_ERR_FORMAT, pl);
  msg_has("labels file");
  expect_labels(SC_ERR_FORMAT, pi, 10);
  msg_has("images file");
#endif
}

static void test_mnist_t10k(void **state) {
  (void)state;
  static const int32_t first[10] = {7, 2, 1, 0, 4, 1, 4, 9, 5, 9};
  static const size_t hist[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
  check_mnist("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 264923200u, first, hist);
}
static void test_mnist_train(void **state) {
  (void)state;
  static const int32_t first[10] = {0, 3, 7, 8, 0, 1, 2, 1, 8, 2};
  static const size_t hist[10] = {1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978};
  check_mnist("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 262146600u, first, hist);
}

/* ---------------------------------------------------------------- header fields */
static void test_bad_magic(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "magic.idx");
  size_t len;
  unsigned char *b = make_images(2, 2, 2, &len);
  for (int k = 0; k < 2; k++) {
    b[k] = 0x42;
    file_images(path, b, len, SC_ERR_FORMAT, "offset 0");
    expect_labels(SC_ERR_FORMAT, path, 0);
    msg_has("offset 0");
    b[k] = 0;
  }
  free(b);
  remove(path);
}

static void test_bad_type(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "type.idx");
  size_t len, llen;
  unsigned char *b = make_images(2, 2, 2, &len), *l = make_labels(4, 3, &llen);
  static const struct {
    unsigned char t;
    const char *name;
  } other[] = {{0x09, "signed byte"},
               {0x0B, "int16"},
               {0x0C, "int32"},
               {0x0D, "float32"},
               {0x0E, "float64"}};
  for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
    char hex[8];
    snprintf(hex, sizeof hex, "0x%02x", other[k].t);
    b[2] = other[k].t;
    file_images(path, b, len, SC_ERR_UNSUPPORTED, hex);
    msg_has(other[k].name);
    msg_has("offset 2");
    l[2] = other[k].t;
    file_labels(path, l, llen, SC_ERR_UNSUPPORTED, other[k].name);
  }
  static const unsigned char unknown[] = {0x00, 0x01, 0x07, 0x0A, 0x0F, 0x10, 0x80, 0xFF};
  for (size_t k = 0; k < sizeof unknown; k++) {
    b[2] = unknown[k];
    file_images(path, b, len, SC_ERR_FORMAT, "offset 2");
    l[2] = unknown[k];
    file_labels(path, l, llen, SC_ERR_FORMAT, "offset 2");
  }
  free(b);
  free(l);
  remove(path);
}

static void test_bad_ndims(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "ndims.idx");
  size_t len, llen;
  unsigned char *b = make_images(2, 2, 2, &len), *l = make_labels(4, 3, &llen);
  static const unsigned char bad_img[] = {0, 1, 2, 4, 255};
  for (size_t k = 0; k < sizeof bad_img; k++) {
    b[3] = bad_img[k];
    file_images(path, b, len, SC_ERR_FORMAT, "byte 3");
  }
  static const unsigned char bad_lab[] = {0, 2, 3, 4, 255};
  for (size_t k = 0; k < sizeof bad_lab; k++) {
    l[3] = bad_lab[k];
    file_labels(path, l, llen, SC_ERR_FORMAT, "byte 3");
  }
  free(b);
  free(l);
  remove(path);
}

static void test_zero_dim(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "zero.idx");
  for (int d = 0; d < 3; d++) {
    size_t len;
    unsigned char *b = make_images(2, 2, 2, &len);
    put_be32(b + 4 + 4 * d, 0);
    file_images(path, b, len, SC_ERR_FORMAT, NULL);
    msg_has_offset(4 + 4 * (size_t)d);
    msg_has("is 0");
    free(b);
  }
  size_t llen;
  unsigned char *l = make_labels(4, 3, &llen);
  put_be32(l + 4, 0);
  file_labels(path, l, 8, SC_ERR_FORMAT, "offset 4"); /* a 0-label file is refused too */
  free(l);
  remove(path);
}

/* The header cut at every length: 0..15 bytes for images, 0..7 for labels, raw and gzipped. */
static void test_short_header(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "short.idx");
  size_t len, llen;
  unsigned char *b = make_images(2, 2, 2, &len), *l = make_labels(4, 3, &llen);
  for (int gz = 0; gz < 2; gz++) {
#ifndef SC_HAVE_ZLIB
    if (gz) break;
#endif
    for (size_t k = 0; k < 16; k++) {
#ifdef SC_HAVE_ZLIB
      if (gz)
        write_gz(path, b, k);
      else
#endif
        tu_write_all(path, b, k);
      expect_images(SC_ERR_FORMAT, path);
      msg_has(path);
      msg_has_offset(k);
      if (k > 0) msg_has("truncated header");
    }
    for (size_t k = 0; k < 8; k++) {
#ifdef SC_HAVE_ZLIB
      if (gz)
        write_gz(path, l, k);
      else
#endif
        tu_write_all(path, l, k);
      expect_labels(SC_ERR_FORMAT, path, 10);
      msg_has(path);
      msg_has_offset(k);
    }
  }
  free(b);
  free(l);
  remove(path);
}

/* Sizes no real file has: refused from the header alone (no allocation of that size). */
static void test_huge_dims(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "huge.idx");
  unsigned char h[16 + 64] = {0, 0, 0x08, 3};
  static const uint32_t bad[][3] = {{0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu},
                                    {0xFFFFFFFFu, 1, 1},
                                    {1, 1, 0xFFFFFFFFu},
                                    {2049, 1024, 1024}, /* 2^31 + 2^20 values */
                                    {65536, 65536, 2}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    for (int d = 0; d < 3; d++) put_be32(h + 4 + 4 * d, bad[k][d]);
    file_images(path, h, sizeof h, SC_ERR_FORMAT, "2^31");
  }
  /* exactly 2^31 values passes the header check and fails for want of data, quickly
   * and without allocating 8 GiB of floats first */
  put_be32(h + 4, 2048), put_be32(h + 8, 1024), put_be32(h + 12, 1024);
  file_images(path, h, sizeof h, SC_ERR_FORMAT, "truncated");
  msg_has_offset(sizeof h);
  msg_has("expected 2147483664 bytes");
  /* labels */
  unsigned char lh[8] = {0, 0, 0x08, 1};
  put_be32(lh + 4, 0xFFFFFFFFu);
  file_labels(path, lh, sizeof lh, SC_ERR_FORMAT, "2^31");
  put_be32(lh + 4, 0x80000001u);
  file_labels(path, lh, sizeof lh, SC_ERR_FORMAT, "2^31");
  put_be32(lh + 4, 0x80000000u);
  file_labels(path, lh, sizeof lh, SC_ERR_FORMAT, "offset 8");
  msg_has("expected 2147483656 bytes");
  remove(path);
}

/* ---------------------------------------------------------------- bodies */
static void test_count_mismatch(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "count.idx");
  size_t len;
  unsigned char *b = make_images(3, 4, 5, &len); /* 16 + 60 bytes */
  /* the header says 4 images, the body holds 3 */
  put_be32(b + 4, 4);
  file_images(path, b, len, SC_ERR_FORMAT, "truncated");
  msg_has("offset 76");
  msg_has("expected 96 bytes");
  /* the header says 2 images, the body holds 3 */
  put_be32(b + 4, 2);
  file_images(path, b, len, SC_ERR_FORMAT, "offset 56");
  /* rows and columns swapped keep the size: that is a valid file */
  put_be32(b + 4, 3), put_be32(b + 8, 5), put_be32(b + 12, 4);
  file_images(path, b, len, SC_OK, NULL);
  free(b);
  /* labels: 10 claimed, 9 present; 8 claimed, 9 present */
  unsigned char *l = make_labels(9, 10, &len);
  put_be32(l + 4, 10);
  file_labels(path, l, len, SC_ERR_FORMAT, "offset 17");
  msg_has("expected 18 bytes");
  put_be32(l + 4, 8);
  file_labels(path, l, len, SC_ERR_FORMAT, "offset 16");
  free(l);
  remove(path);
}

/* The body cut at every offset, raw and (as content) gzipped. */
static void test_truncated_body(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "trunc.idx");
  size_t len, llen;
  unsigned char *b = make_images(3, 2, 2, &len), *l = make_labels(6, 4, &llen);
  char want[64];
  for (int gz = 0; gz < 2; gz++) {
#ifndef SC_HAVE_ZLIB
    if (gz) break;
#endif
    for (size_t k = 16; k < len; k++) {
#ifdef SC_HAVE_ZLIB
      if (gz)
        write_gz(path, b, k);
      else
#endif
        tu_write_all(path, b, k);
      expect_images(SC_ERR_FORMAT, path);
      msg_has(path);
      msg_has("truncated");
      msg_has_offset(k);
      snprintf(want, sizeof want, "expected %zu bytes", len);
      msg_has(want);
      if (gz) msg_has("decompressed");
    }
    for (size_t k = 8; k < llen; k++) {
#ifdef SC_HAVE_ZLIB
      if (gz)
        write_gz(path, l, k);
      else
#endif
        tu_write_all(path, l, k);
      expect_labels(SC_ERR_FORMAT, path, 10);
      msg_has(path);
      msg_has_offset(k);
      snprintf(want, sizeof want, "expected %zu bytes", llen);
      msg_has(want);
    }
  }
  free(b);
  free(l);
  remove(path);
}

static void test_trailing_bytes(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "trail.idx");
  size_t len;
  unsigned char *b = make_images(3, 2, 2, &len);
  unsigned char *big = calloc(len + 40000, 1);
  memcpy(big, b, len);
  static const size_t extra[] = {1, 2, 100, 40000};
  for (int gz = 0; gz < 2; gz++) {
#ifndef SC_HAVE_ZLIB
    if (gz) break;
#endif
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++) {
#ifdef SC_HAVE_ZLIB
      if (gz)
        write_gz(path, big, len + extra[k]);
      else
#endif
        tu_write_all(path, big, len + extra[k]);
      expect_images(SC_ERR_FORMAT, path);
      msg_has(path);
      msg_has("unexpected bytes");
      msg_has_offset(len);
    }
  }
  size_t llen;
  unsigned char *l = make_labels(5, 10, &llen);
  l[llen] = 0;
  file_labels(path, l, llen + 1, SC_ERR_FORMAT, "offset 13");
  free(l);
  free(b);
  free(big);
  remove(path);
}

static void test_labels_range(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "idx", "range.idx");
  size_t len;
  unsigned char *l = make_labels(7, 10, &len);
  l[8 + 3] = 10;
  file_labels(path, l, len, SC_ERR_FORMAT, "sample 3");
  msg_has("label 10");
  msg_has("offset 11");
  expect_labels(SC_OK, path, 11);
  expect_labels(SC_OK, path, 0);
  l[8 + 6] = 0xFF; /* the first bad one is named */
  tu_write_all(path, l, len);
  expect_labels(SC_ERR_FORMAT, path, 11);
  msg_has("sample 6");
  msg_has("label 255");
  msg_has("offset 14");
  expect_labels(SC_OK, path, 0);
  expect_labels(SC_OK, path, SIZE_MAX);
  free(l);
  remove(path);
}

#ifdef SC_HAVE_ZLIB
/* The gzip file itself cut at every length, and every byte of its deflate data and trailer
 * corrupted: never a success, never a crash. */
static void test_gz_damage(void **state) {
  (void)state;
  char path[512], gzp[512];
  tu_tmp_path(path, sizeof path, "idx", "damage.idx");
  tu_tmp_path(gzp, sizeof gzp, "idx", "damage-src.gz");
  size_t len, glen;
  unsigned char *b = make_images(4, 5, 6, &len);
  write_gz(gzp, b, len);
  unsigned char *g = tu_read_all(gzp, &glen);
  assert_true(glen > 20);
  size_t n_truncated = 0;
  for (size_t k = 0; k < glen; k++) {
    file_images(path, g, k, SC_ERR_FORMAT, "offset");
    if (strstr(sc_last_error(), "unexpected end of file")) n_truncated++;
  }
  assert_true(n_truncated > 0); /* zlib's own report of a cut stream was seen and passed on */
  /* the complete data without the 8-byte trailer (CRC, length): still an error */
  file_images(path, g, glen - 8, SC_ERR_FORMAT, "truncated gzip stream");
  msg_has("unexpected end of file");
  msg_has("CRC");
  msg_has_offset(len);
  /* every byte after the 10-byte gzip header corrupted */
  for (size_t k = 10; k < glen; k++) {
    for (int m = 0; m < 2; m++) {
      unsigned char keep = g[k];
      g[k] ^= m ? 0xFF : 0x01;
      tu_write_all(path, g, glen);
      /* the damage may decode to another IDX type before the CRC is reached */
      float *x = NULL;
      size_t n = 1, r = 1, c = 1;
      sc_status st = sc_idx_load_images(path, &x, &n, &r, &c, 1.0f);
      if (st != SC_ERR_FORMAT && st != SC_ERR_UNSUPPORTED)
        fail_msg("byte %zu ^ 0x%02x -> %s (%s)", k, m ? 0xFF : 0x01, sc_status_str(st),
                 sc_last_error());
      assert_true(x == NULL && n == 0 && r == 0 && c == 0);
      msg_has(path);
      g[k] = keep;
    }
  }
  /* a wrong CRC is zlib's "incorrect data check" */
  g[glen - 8] ^= 0x55;
  file_images(path, g, glen, SC_ERR_FORMAT, "corrupt gzip stream");
  msg_has("incorrect data check");
  g[glen - 8] ^= 0x55;
  /* a corrupt deflate stream with nothing useful in it */
  static const unsigned char junk[] = {0x1f, 0x8b, 0x08, 0,    0, 0, 0, 0, 0, 3, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0,    0};
  file_images(path, junk, sizeof junk, SC_ERR_FORMAT, "zlib");
  expect_labels(SC_ERR_FORMAT, path, 10);
  msg_has("zlib");
  /* an unknown compression method */
  g[2] = 0x07;
  file_images(path, g, glen, SC_ERR_FORMAT, "zlib");
  free(b);
  free(g);
  remove(path);
  remove(gzp);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_args),      cmocka_unit_test(test_io_errors),
      cmocka_unit_test(test_roundtrip_raw),  cmocka_unit_test(test_roundtrip_large),
      cmocka_unit_test(test_roundtrip_gz),   cmocka_unit_test(test_mnist_t10k),
      cmocka_unit_test(test_mnist_train),    cmocka_unit_test(test_bad_magic),
      cmocka_unit_test(test_bad_type),       cmocka_unit_test(test_bad_ndims),
      cmocka_unit_test(test_zero_dim),       cmocka_unit_test(test_short_header),
      cmocka_unit_test(test_huge_dims),      cmocka_unit_test(test_count_mismatch),
      cmocka_unit_test(test_truncated_body), cmocka_unit_test(test_trailing_bytes),
      cmocka_unit_test(test_labels_range),
#ifdef SC_HAVE_ZLIB
      cmocka_unit_test(test_gz_damage),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
