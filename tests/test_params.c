/* tests/test_params.c — sc_params_save / sc_params_load: round trip, every header field
 * checked, truncation at every offset, corruption, atomic write, init determinism. */
#include "testutil.h"

#include <unistd.h>

static sc_chain *make_chain(size_t hidden) {
  sc_layer l[] = {sc_dense(hidden, SC_TANH), sc_dense_nobias(3, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 5, l, 2));
  return c;
}

static void test_roundtrip(void **state) {
  (void)state;
  sc_chain *c = make_chain(7);
  size_t n;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &n));
  float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
  SC_OK_OR_FAIL(sc_params_init(c, p, n, 99));
  char path[512], tmp[600];
  tu_tmp_path(path, sizeof path, "params", "rt.scp");
  SC_OK_OR_FAIL(sc_params_save(c, p, n, path));
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  assert_int_equal(access(tmp, F_OK), -1); /* the temporary file was renamed away */
  memset(q, 0, n * sizeof *q);
  SC_OK_OR_FAIL(sc_params_load(c, q, n, path));
  assert_memory_equal(p, q, n * sizeof *p);
  size_t len;
  unsigned char *b = tu_read_all(path, &len);
  assert_int_equal(len, 32 + 4 * n + 8);
  assert_memory_equal(b, "SCPARAMS", 8);
  /* values are little-endian float32 right after the 32-byte header */
  uint32_t u =
      (uint32_t)b[32] | (uint32_t)b[33] << 8 | (uint32_t)b[34] << 16 | (uint32_t)b[35] << 24;
  float f0;
  memcpy(&f0, &u, sizeof f0);
  assert_true(f0 == p[0]);
  free(b);
  remove(path);
  free(p);
  free(q);
  sc_chain_destroy(c);
}

/* issue 12, defect 1: NaN or Inf parameters are refused at save time (the loader would refuse
 * the file), naming the element, and nothing is written: an existing file stays as it was */
static void test_save_nonfinite(void **state) {
  (void)state;
  sc_chain *c = make_chain(4);
  size_t n;
  SC_OK_OR_FAIL(sc_chain_nparams(c, &n));
  float *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
  SC_OK_OR_FAIL(sc_params_init(c, p, n, 5));
  char path[512], tmp[600];
  tu_tmp_path(path, sizeof path, "params", "nonfinite.scp");
  SC_OK_OR_FAIL(sc_params_save(c, p, n, path));
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < 3; k++) {
    float keep = p[n - 2];
    p[n - 2] = bad[k];
    SC_EXPECT(SC_ERR_NONFINITE, sc_params_save(c, p, n, path));
    char want[64];
    snprintf(want, sizeof want, "p[%zu]", n - 2);
    if (!strstr(sc_last_error(), want))
      fail_msg("message '%s' does not name %s", sc_last_error(), want);
    p[n - 2] = keep;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  assert_int_equal(access(tmp, F_OK), -1);
  SC_OK_OR_FAIL(sc_params_load(c, q, n, path)); /* the first file, intact */
  assert_memory_equal(p, q, n * sizeof *p);
  remove(path);
  free(p);
  free(q);
  sc_chain_destroy(c);
}

static void test_wrong_chain(void **state) {
  (void)state;
  sc_chain *a = make_chain(7), *b = make_chain(8);
  sc_layer l2[] = {sc_dense(7, SC_RELU), sc_dense_nobias(3, SC_IDENTITY)}; /* same sizes */
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, 5, l2, 2));
  size_t na, nb;
  sc_chain_nparams(a, &na);
  sc_chain_nparams(b, &nb);
  float *p = calloc(nb, sizeof *p), *q = calloc(nb, sizeof *q);
  SC_OK_OR_FAIL(sc_params_init(a, p, na, 1));
  char path[512];
  tu_tmp_path(path, sizeof path, "params", "wc.scp");
  SC_OK_OR_FAIL(sc_params_save(a, p, na, path));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_load(b, q, nb, path));
  assert_non_null(strstr(sc_last_error(), "parameters"));
  /* same parameter count, different activation: the fingerprint catches it */
  SC_EXPECT(SC_ERR_SHAPE, sc_params_load(c, q, na, path));
  assert_non_null(strstr(sc_last_error(), "different shape"));
  for (size_t k = 0; k < na; k++) assert_true(q[k] == 0.0f); /* untouched */
  remove(path);
  free(p);
  free(q);
  sc_chain_destroy(a);
  sc_chain_destroy(b);
  sc_chain_destroy(c);
}

/* a chain's parameters saved to `path`, the file's bytes in b[0..len), a scratch array q
 * and a second path for damaged copies */
typedef struct saved_file {
  sc_chain *c;
  size_t n, len;
  float *p, *q;
  unsigned char *b;
  char path[512], other[512];
} saved_file;

static void saved_open(saved_file *f) {
  f->c = make_chain(4);
  sc_chain_nparams(f->c, &f->n);
  f->p = malloc(f->n * sizeof *f->p);
  f->q = malloc(f->n * sizeof *f->q);
  assert_true(f->p && f->q);
  sc_params_init(f->c, f->p, f->n, 3);
  tu_tmp_path(f->path, sizeof f->path, "params", "saved.scp");
  tu_tmp_path(f->other, sizeof f->other, "params", "damaged.scp");
  SC_OK_OR_FAIL(sc_params_save(f->c, f->p, f->n, f->path));
  f->b = tu_read_all(f->path, &f->len);
}

static void saved_close(saved_file *f) {
  free(f->b);
  remove(f->path);
  remove(f->other);
  free(f->p);
  free(f->q);
  sc_chain_destroy(f->c);
}

/* every truncation length fails cleanly, leaves p untouched, and names an offset */
static void test_truncated_everywhere(void **state) {
  (void)state;
  saved_file f;
  saved_open(&f);
  for (size_t k = 0; k < f.len; k++) {
    tu_write_all(f.other, f.b, k);
    for (size_t j = 0; j < f.n; j++) f.q[j] = 42.0f;
    sc_status st = sc_params_load(f.c, f.q, f.n, f.other);
    if (st != SC_ERR_FORMAT)
      fail_msg("truncated to %zu bytes: got %s (%s)", k, sc_status_str(st), sc_last_error());
    assert_true(strstr(sc_last_error(), "offset") != NULL);
    for (size_t j = 0; j < f.n; j++) assert_true(f.q[j] == 42.0f);
  }
  /* one byte too many */
  unsigned char *longer = malloc(f.len + 1);
  memcpy(longer, f.b, f.len);
  longer[f.len] = 0;
  tu_write_all(f.other, longer, f.len + 1);
  SC_EXPECT(SC_ERR_FORMAT, sc_params_load(f.c, f.q, f.n, f.other));
  free(longer);
  saved_close(&f);
}

static void test_corrupt_fields(void **state) {
  (void)state;
  saved_file f;
  saved_open(&f);
  struct {
    size_t off;
    unsigned char val;
    sc_status want;
    const char *words;
  } cases[] = {
      {0, 'X', SC_ERR_FORMAT, "magic"},
      {8, 2, SC_ERR_FORMAT, "version"},
      {12, 2, SC_ERR_FORMAT, "element type"},
      {16, 0xFF, SC_ERR_SHAPE, "parameters"},
      {24, 0x5A, SC_ERR_SHAPE, "shape"},
      {40, 0x01, SC_ERR_FORMAT, "checksum"},
      {f.len - 1, 0x77, SC_ERR_FORMAT, "checksum"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unsigned char *m = malloc(f.len);
    memcpy(m, f.b, f.len);
    m[cases[i].off] ^= cases[i].val;
    tu_write_all(f.other, m, f.len);
    sc_status st = sc_params_load(f.c, f.q, f.n, f.other);
    if (st != cases[i].want || !strstr(sc_last_error(), cases[i].words))
      fail_msg("byte %zu flipped: got %s '%s', want %s mentioning '%s'", cases[i].off,
               sc_status_str(st), sc_last_error(), sc_status_str(cases[i].want), cases[i].words);
    free(m);
  }
  saved_close(&f);
}

static void test_bad_args(void **state) {
  (void)state;
  sc_chain *c = make_chain(4);
  size_t n;
  sc_chain_nparams(c, &n);
  float *p = calloc(n, sizeof *p);
  char path[512];
  tu_tmp_path(path, sizeof path, "params", "args.scp");
  SC_EXPECT(SC_ERR_NULL, sc_params_save(NULL, p, n, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_save(c, NULL, n, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_save(c, p, n, NULL));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_save(c, p, n + 1, path));
  SC_EXPECT(SC_ERR_ARG, sc_params_save(c, p, n, ""));
  SC_EXPECT(SC_ERR_IO, sc_params_save(c, p, n, "/nonexistent-dir-sc/x.scp"));
  SC_EXPECT(SC_ERR_NULL, sc_params_load(NULL, p, n, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_load(c, NULL, n, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_load(c, p, n, NULL));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_load(c, p, n - 1, path));
  SC_EXPECT(SC_ERR_IO, sc_params_load(c, p, n, "/nonexistent-dir-sc/x.scp"));
  assert_non_null(strstr(sc_last_error(), "/nonexistent-dir-sc/x.scp"));
  /* a NaN parameter in a file (written by hand: sc_params_save refuses one) is reported with
   * its index; the checksum (FNV-1a over the value bytes) is made to match */
  SC_OK_OR_FAIL(sc_params_save(c, p, n, path));
  size_t len;
  unsigned char *b = tu_read_all(path, &len);
  const unsigned char qnan[4] = {0x00, 0x00, 0xc0, 0x7f};
  memcpy(b + 32 + 4 * 2, qnan, 4);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 32; k < 32 + 4 * n; k++) h = (h ^ b[k]) * 0x100000001b3ull;
  for (int k = 0; k < 8; k++) b[32 + 4 * n + (size_t)k] = (unsigned char)(h >> (8 * k));
  tu_write_all(path, b, len);
  free(b);
  SC_EXPECT(SC_ERR_NONFINITE, sc_params_load(c, p, n, path));
  assert_non_null(strstr(sc_last_error(), "parameter 2"));
  remove(path);
  free(p);
  sc_chain_destroy(c);
}

/* Glorot init: deterministic per seed, different across seeds, within the bound, zero
 * biases, and float/double agree */
static void test_init(void **state) {
  (void)state;
  sc_chain *c = make_chain(6);
  size_t n;
  sc_chain_nparams(c, &n);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double *d = malloc(n * sizeof *d);
  SC_OK_OR_FAIL(sc_params_init(c, a, n, 5));
  SC_OK_OR_FAIL(sc_params_init(c, b, n, 5));
  SC_OK_OR_FAIL(sc_params_init_f64(c, d, n, 5));
  assert_memory_equal(a, b, n * sizeof *a);
  for (size_t k = 0; k < n; k++) assert_true(a[k] == (float)d[k]);
  SC_OK_OR_FAIL(sc_params_init(c, b, n, 6));
  assert_memory_not_equal(a, b, n * sizeof *a);
  sc_layer_info li;
  SC_OK_OR_FAIL(sc_chain_layer_info(c, 0, &li));
  double bound = sqrt(6.0 / (double)(li.inputs + li.outputs));
  for (size_t k = 0; k < li.inputs * li.outputs; k++) assert_true(fabs(a[k]) <= bound);
  for (size_t k = li.inputs * li.outputs; k < li.nparams; k++) assert_true(a[k] == 0.0f);
  /* the first draw is pinned: same numbers on every machine */
  uint32_t bits;
  memcpy(&bits, &a[0], sizeof bits);
  if (bits != 0xbea004e5u)
    fail_msg("first Glorot draw for seed 5 is %.9g (0x%08x), pinned 0xbea004e5", a[0],
             (unsigned)bits);
  free(a);
  free(b);
  free(d);
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),      cmocka_unit_test(test_save_nonfinite),
      cmocka_unit_test(test_wrong_chain),    cmocka_unit_test(test_truncated_everywhere),
      cmocka_unit_test(test_corrupt_fields), cmocka_unit_test(test_bad_args),
      cmocka_unit_test(test_init),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
