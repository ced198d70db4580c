/* tests/test_npz.c — NumPy/PyTorch weight files: sc_params_export_npz /
 * sc_params_import_npz and their _f64 forms.
 *
 * - round trips, float and double, across the two, for dense, conv (padding, stride, no
 *   bias), pool, flatten and dropout chains; the same parameters give the same bytes;
 * - tests/npz_check.py (where a python3 with NumPy is found: $SC_PYTHON, /usr/bin/python3,
 *   python3): np.load sees the documented state_dict names, shapes and values; with PyTorch,
 *   the matching nn.Sequential loads them (strict) and its forward equals sc_forward's;
 * - files built here by a small zip writer of the test's own: deflated entries (as
 *   np.savez_compressed writes them), big-endian and float64 arrays, zip64 size fields;
 * - malformed files: wrong shapes, dtypes, Fortran order, missing / extra / duplicate
 *   arrays, CRC mismatch, NaN, values beyond float range, every truncation, a zip bomb
 *   (both a false size claim and a stream longer than claimed), random damage: always an
 *   error naming the problem, p untouched, no crash (ASan in CI).
 */
#include "testutil.h"

#include <sys/stat.h>

#ifdef SC_HAVE_ZLIB
#include <zlib.h>
#endif

/* ------------------------------------------------------------------ chains */
typedef struct {
  const char *name;
  size_t c, h, w;
  sc_layer layers[10];
  size_t nl;
  const char *spec; /* for npz_check.py */
} tchain;

static tchain chains[5];

static void make_chains(void) {
  chains[0] = (tchain){"mlp",
                       3,
                       1,
                       1,
                       {sc_dense(4, SC_TANH), sc_dense(2, SC_IDENTITY)},
                       2,
                       "input 3 1 1; dense 4 tanh 1; dense 2 identity 1"};
  chains[1] = (tchain){"mlp_acts",
                       5,
                       1,
                       1,
                       {sc_dense(6, SC_GELU), sc_dense_nobias(7, SC_SOFTPLUS),
                        sc_dense(5, SC_SIGMOID), sc_dropout(0.25), sc_dense(3, SC_RELU),
                        sc_dense(4, SC_SILU), sc_dense(2, SC_IDENTITY)},
                       7,
                       "input 5 1 1; dense 6 gelu 1; dense 7 softplus 0; dense 5 sigmoid 1; "
                       "dropout 0.25; dense 3 relu 1; dense 4 silu 1; dense 2 identity 1"};
  chains[2] =
      (tchain){"lenet",
               1,
               28,
               28,
               {sc_conv2d_ex(5, 5, 6, SC_RELU, 1, 1, 2, 2), sc_maxpool2d(2, 2),
                sc_conv2d(5, 5, 16, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),
                sc_dense(120, SC_RELU), sc_dense(84, SC_RELU), sc_dense(10, SC_IDENTITY)},
               8,
               "input 1 28 28; conv 5 5 6 relu 1 1 1 2 2; pool 2 2; conv 5 5 16 relu 1 1 1 0 0; "
               "pool 2 2; flatten; dense 120 relu 1; dense 84 relu 1; dense 10 identity 1"};
  chains[3] =
      (tchain){"conv_nobias",
               3,
               9,
               7,
               {sc_conv2d_nobias(3, 2, 4, SC_TANH, 2, 1, 1, 1), sc_conv2d(2, 2, 3, SC_IDENTITY),
                sc_flatten(), sc_dense_nobias(4, SC_IDENTITY)},
               4,
               "input 3 9 7; conv 3 2 4 tanh 0 2 1 1 1; conv 2 2 3 identity 1 1 1 0 0; "
               "flatten; dense 4 identity 0"};
  chains[4] =
      (tchain){"single", 1, 1, 1, {sc_dense(1, SC_IDENTITY)}, 1, "input 1 1 1; dense 1 identity 1"};
}

static sc_chain *build(const tchain *t, size_t *np) {
  sc_chain *c = NULL;
  if (t->h == 1 && t->w == 1)
    SC_OK_OR_FAIL(sc_chain_create(&c, t->c, t->layers, t->nl));
  else
    SC_OK_OR_FAIL(sc_chain_create_image(&c, t->c, t->h, t->w, t->layers, t->nl));
  SC_OK_OR_FAIL(sc_chain_nparams(c, np));
  return c;
}

static void path_for(char *buf, size_t cap, const char *name) {
  tu_tmp_path(buf, cap, "npz", name);
}

/* ------------------------------------------------------------------ round trips */
static void test_roundtrip(void **state) {
  (void)state;
  for (size_t ci = 0; ci < sizeof chains / sizeof chains[0]; ci++) {
    size_t np;
    sc_chain *c = build(&chains[ci], &np);
    float *p = malloc(np * sizeof *p), *q = malloc(np * sizeof *q);
    double *pd = malloc(np * sizeof *pd), *qd = malloc(np * sizeof *qd);
    assert_true(p && q && pd && qd);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 3 + ci));
    SC_OK_OR_FAIL(sc_params_init_f64(c, pd, np, 5 + ci));
    char path[512], path2[512];
    path_for(path, sizeof path, "rt.npz");
    path_for(path2, sizeof path2, "rt2.npz");

    SC_OK_OR_FAIL(sc_params_export_npz(c, p, np, path));
    for (size_t k = 0; k < np; k++) q[k] = 7;
    SC_OK_OR_FAIL(sc_params_import_npz(c, q, np, path));
    assert_memory_equal(p, q, np * sizeof *p);
    /* float32 arrays into double */
    SC_OK_OR_FAIL(sc_params_import_npz_f64(c, qd, np, path));
    for (size_t k = 0; k < np; k++) assert_true(qd[k] == (double)p[k]);
    /* the same parameters, the same bytes */
    SC_OK_OR_FAIL(sc_params_export_npz(c, p, np, path2));
    size_t n1, n2;
    unsigned char *b1 = tu_read_all(path, &n1), *b2 = tu_read_all(path2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);

    SC_OK_OR_FAIL(sc_params_export_npz_f64(c, pd, np, path));
    for (size_t k = 0; k < np; k++) qd[k] = 7;
    SC_OK_OR_FAIL(sc_params_import_npz_f64(c, qd, np, path));
    assert_memory_equal(pd, qd, np * sizeof *pd);
    /* float64 arrays into float: rounded to nearest */
    SC_OK_OR_FAIL(sc_params_import_npz(c, q, np, path));
    for (size_t k = 0; k < np; k++) assert_true(q[k] == (float)pd[k]);

    /* into a chain of another shape: SC_ERR_SHAPE or SC_ERR_FORMAT naming an array */
    size_t np2;
    sc_chain *other = build(&chains[(ci + 1) % (sizeof chains / sizeof chains[0])], &np2);
    float *r = calloc(np2, sizeof *r);
    sc_status st = sc_params_import_npz(other, r, np2, path);
    assert_true(st == SC_ERR_SHAPE || st == SC_ERR_FORMAT);
    assert_non_null(strstr(sc_last_error(), "array '"));
    for (size_t k = 0; k < np2; k++) assert_true(r[k] == 0);
    free(r);
    sc_chain_destroy(other);
    remove(path);
    remove(path2);
    free(p), free(q), free(pd), free(qd);
    sc_chain_destroy(c);
  }
}

static void test_export_errors(void **state) {
  (void)state;
  size_t np;
  sc_chain *c = build(&chains[0], &np);
  float p[64];
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 1));
  char path[512];
  path_for(path, sizeof path, "err.npz");
  remove(path);
  SC_EXPECT(SC_ERR_NULL, sc_params_export_npz(NULL, p, np, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_export_npz(c, NULL, np, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_export_npz(c, p, np, NULL));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_export_npz(c, p, np + 1, path));
  SC_EXPECT(SC_ERR_ARG, sc_params_export_npz(c, p, np, ""));
  SC_EXPECT(SC_ERR_IO, sc_params_export_npz(c, p, np, "/nonexistent-dir/x.npz"));
  assert_non_null(strstr(sc_last_error(), "/nonexistent-dir/x.npz"));
  p[5] = NAN;
  SC_EXPECT(SC_ERR_NONFINITE, sc_params_export_npz(c, p, np, path));
  assert_non_null(strstr(sc_last_error(), "p[5]"));
  assert_int_equal(access(path, F_OK), -1);
  double pd[64];
  for (size_t k = 0; k < np; k++) pd[k] = 0.5;
  pd[np - 1] = -INFINITY;
  SC_EXPECT(SC_ERR_NONFINITE, sc_params_export_npz_f64(c, pd, np, path));
  assert_int_equal(access(path, F_OK), -1);

  float q[64];
  SC_EXPECT(SC_ERR_NULL, sc_params_import_npz(NULL, q, np, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_import_npz(c, NULL, np, path));
  SC_EXPECT(SC_ERR_NULL, sc_params_import_npz(c, q, np, NULL));
  SC_EXPECT(SC_ERR_SHAPE, sc_params_import_npz(c, q, np - 1, path));
  SC_EXPECT(SC_ERR_IO, sc_params_import_npz(c, q, np, path)); /* does not exist */
  assert_non_null(strstr(sc_last_error(), path));
  SC_EXPECT(SC_ERR_IO, sc_params_import_npz(c, q, np, "/tmp")); /* a directory */
  sc_chain_destroy(c);
}

/* ------------------------------------------------------------------ Python and PyTorch */
static const char *find_python(void) {
  static char found[512];
  const char *cands[3] = {getenv("SC_PYTHON"), "/usr/bin/python3", "python3"};
  for (int i = 0; i < 3; i++) {
    if (!cands[i] || !*cands[i] || strchr(cands[i], '\'')) continue;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import numpy' >/dev/null 2>&1", cands[i]);
    if (system(cmd) == 0) {
      snprintf(found, sizeof found, "%s", cands[i]);
      return found;
    }
  }
  return NULL;
}

static void write_f32(const char *path, const float *v, size_t n) {
  unsigned char *b = malloc(4 * n + 1);
  assert_non_null(b);
  for (size_t k = 0; k < n; k++) {
    uint32_t u;
    memcpy(&u, &v[k], 4);
    for (int j = 0; j < 4; j++) b[4 * k + j] = (unsigned char)(u >> (8 * j));
  }
  tu_write_all(path, b, 4 * n);
  free(b);
}

static void test_python(void **state) {
  (void)state;
  const char *py = find_python();
  if (!py) {
    print_message("test_npz: no python3 with NumPy found ($SC_PYTHON, /usr/bin/python3, python3; "
                  "Debian: python3-numpy); the Python check is skipped\n");
    skip();
  }
  const char *src = getenv("SC_SRC_DIR");
  if (!src || !*src) src = ".";
  char script[1024];
  snprintf(script, sizeof script, "%s/tests/npz_check.py", src);
  if (access(script, R_OK) != 0) fail_msg("%s not found (set SC_SRC_DIR)", script);
  int torch_ok = 0;
  for (size_t ci = 0; ci < sizeof chains / sizeof chains[0]; ci++) {
    size_t np, in, out, B = 5;
    sc_chain *c = build(&chains[ci], &np);
    SC_OK_OR_FAIL(sc_chain_input_size(c, &in));
    SC_OK_OR_FAIL(sc_chain_output_size(c, &out));
    float *p = malloc(np * 4), *x = malloc(B * in * 4), *y = malloc(B * out * 4);
    assert_true(p && x && y);
    SC_OK_OR_FAIL(sc_params_init(c, p, np, 11 + ci));
    /* biases too, so that a mixed-up bias shows */
    for (size_t k = 0; k < np; k++) p[k] += 0.01f * (float)((k * 7) % 13) - 0.06f;
    tu_fill_f32(x, B * in, 99 + ci, 1.0);
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
    SC_OK_OR_FAIL(sc_forward(c, p, x, B, y, ws));
    sc_workspace_destroy(ws);
    char dir[] = "/tmp/sc_npz_py_XXXXXX", path[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/params.npz", dir);
    SC_OK_OR_FAIL(sc_params_export_npz(c, p, np, path));
    snprintf(path, sizeof path, "%s/p.bin", dir);
    write_f32(path, p, np);
    snprintf(path, sizeof path, "%s/x.bin", dir);
    write_f32(path, x, B * in);
    snprintf(path, sizeof path, "%s/y.bin", dir);
    write_f32(path, y, B * out);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s' >'%s/log' 2>&1", py, script, dir,
             chains[ci].spec, dir);
    int st = system(cmd);
    snprintf(path, sizeof path, "%s/log", dir);
    size_t ln;
    unsigned char *log = tu_read_all(path, &ln);
    log[ln] = 0;
    if (st != 0 || !strstr((char *)log, "NPZ_CHECK OK"))
      fail_msg("npz_check.py on chain %s failed:\n%s", chains[ci].name, (char *)log);
    if (strstr((char *)log, "TORCH OK")) torch_ok++;
    /* NumPy's and PyTorch's own files back in: float32 stored, float64 deflated (zlib),
     * the state_dict of the loaded model */
    const char *back[3] = {"numpy.npz", "numpy_c.npz", "torch.npz"};
    float *q = malloc(np * 4);
    assert_non_null(q);
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, back[i]);
      if (access(path, F_OK) != 0) continue; /* torch.npz without torch */
#ifndef SC_HAVE_ZLIB
      if (i == 1) continue;
#endif
      memset(q, 0, np * 4);
      SC_OK_OR_FAIL(sc_params_import_npz(c, q, np, path));
      assert_memory_equal(p, q, np * 4);
    }
    free(q);
    print_message("test_npz: %s: %s", chains[ci].name, (char *)log);
    free(log);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(p), free(x), free(y);
    sc_chain_destroy(c);
  }
  if (!torch_ok) print_message("test_npz: PyTorch not found: only the NumPy half ran\n");
}

/* ------------------------------------------------------------------ a zip writer of our own */
static uint32_t t_crc(const unsigned char *b, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= b[i];
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

typedef struct {
  char name[64];
  unsigned char *data; /* the .npy bytes */
  size_t len;
  int deflate;
  uint64_t claim; /* stated uncompressed size (0: the real one) */
  int zip64;      /* sizes in a zip64 extra field (as Python writes large entries) */
  int bad_crc;
} tentry;

static void put(unsigned char **q, uint64_t v, int n) {
  for (int i = 0; i < n; i++) *(*q)++ = (unsigned char)(v >> (8 * i));
}

/* the .npy bytes: header dict from descr/fortran/shape, then raw value bytes */
static unsigned char *t_npy(const char *descr, const char *fortran, const char *shape,
                            const unsigned char *vals, size_t nv, size_t *len) {
  char dict[512];
  snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran,
           shape);
  size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
  unsigned char *b = malloc(total + nv + 1);
  assert_non_null(b);
  memcpy(b, "\x93NUMPY\x01\x00", 8);
  b[8] = (unsigned char)((total - 10) & 255), b[9] = (unsigned char)((total - 10) >> 8);
  memcpy(b + 10, dict, dl);
  memset(b + 10 + dl, ' ', total - 10 - dl - 1);
  b[total - 1] = '\n';
  if (nv) memcpy(b + total, vals, nv);
  *len = total + nv;
  return b;
}

/* float values as '<f4' / '>f4' / '<f8' bytes */
static unsigned char *t_vals(const float *v, size_t n, int es, int big) {
  unsigned char *b = malloc(n * (size_t)es + 1);
  assert_non_null(b);
  for (size_t k = 0; k < n; k++) {
    uint64_t u;
    if (es == 4) {
      uint32_t w;
      memcpy(&w, &v[k], 4);
      u = w;
    } else {
      double d = v[k];
      memcpy(&u, &d, 8);
    }
    for (int j = 0; j < es; j++)
      b[k * (size_t)es + (size_t)(big ? es - 1 - j : j)] = (unsigned char)(u >> (8 * j));
  }
  return b;
}

/* builds the archive; returns its size (malloc'ed in *out) */
static size_t t_zip(const tentry *e, int ne, unsigned char **out) {
  size_t cap = 1 << 16;
  for (int i = 0; i < ne; i++) cap += 2 * e[i].len + 256;
  unsigned char *b = malloc(cap), *q = b;
  assert_non_null(b);
  uint64_t offs[16];
  size_t csz[16];
  for (int i = 0; i < ne; i++) {
    offs[i] = (uint64_t)(q - b);
    const unsigned char *data = e[i].data;
    size_t cl = e[i].len;
    unsigned char *cbuf = NULL;
    if (e[i].deflate) {
#ifdef SC_HAVE_ZLIB
      z_stream zs;
      memset(&zs, 0, sizeof zs);
      assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
      size_t bound = deflateBound(&zs, (uLong)e[i].len);
      cbuf = malloc(bound + 16);
      zs.next_in = e[i].data, zs.avail_in = (uInt)e[i].len;
      zs.next_out = cbuf, zs.avail_out = (uInt)bound;
      assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
      cl = zs.total_out;
      deflateEnd(&zs);
      data = cbuf;
#else
      fail_msg("deflate without zlib");
#endif
    }
    csz[i] = cl;
    uint32_t crc = t_crc(e[i].data, e[i].len) ^ (e[i].bad_crc ? 1u : 0u);
    uint64_t us = e[i].claim ? e[i].claim : e[i].len;
    size_t nl = strlen(e[i].name);
    put(&q, 0x04034b50u, 4), put(&q, 20, 2), put(&q, 0, 2), put(&q, e[i].deflate ? 8 : 0, 2);
    put(&q, 0, 4), put(&q, crc, 4);
    put(&q, e[i].zip64 ? 0xFFFFFFFFu : cl, 4), put(&q, e[i].zip64 ? 0xFFFFFFFFu : us, 4);
    put(&q, nl, 2), put(&q, e[i].zip64 ? 20 : 0, 2);
    memcpy(q, e[i].name, nl), q += nl;
    if (e[i].zip64) put(&q, 1, 2), put(&q, 16, 2), put(&q, us, 8), put(&q, cl, 8);
    memcpy(q, data, cl), q += cl;
    free(cbuf);
  }
  uint64_t cdo = (uint64_t)(q - b);
  for (int i = 0; i < ne; i++) {
    uint32_t crc = t_crc(e[i].data, e[i].len) ^ (e[i].bad_crc ? 1u : 0u);
    uint64_t us = e[i].claim ? e[i].claim : e[i].len;
    size_t nl = strlen(e[i].name);
    put(&q, 0x02014b50u, 4), put(&q, 20, 2), put(&q, 20, 2), put(&q, 0, 2);
    put(&q, e[i].deflate ? 8 : 0, 2), put(&q, 0, 4), put(&q, crc, 4);
    put(&q, e[i].zip64 ? 0xFFFFFFFFu : csz[i], 4), put(&q, e[i].zip64 ? 0xFFFFFFFFu : us, 4);
    put(&q, nl, 2), put(&q, e[i].zip64 ? 20 : 0, 2), put(&q, 0, 2), put(&q, 0, 2), put(&q, 0, 2);
    put(&q, 0, 4), put(&q, offs[i], 4);
    memcpy(q, e[i].name, nl), q += nl;
    if (e[i].zip64) put(&q, 1, 2), put(&q, 16, 2), put(&q, us, 8), put(&q, csz[i], 8);
  }
  uint64_t cds = (uint64_t)(q - b) - cdo;
  put(&q, 0x06054b50u, 4), put(&q, 0, 4), put(&q, (uint64_t)ne, 2), put(&q, (uint64_t)ne, 2);
  put(&q, cds, 4), put(&q, cdo, 4), put(&q, 0, 2);
  *out = b;
  return (size_t)(q - b);
}

/* chain 0 (3 -> 4 tanh -> 2): its four arrays from p, as the test wants them */
typedef struct {
  const char *descr, *fortran;
  int deflate, zip64, es, big;
} tstyle;

static int mlp_entries(tentry *e, const float *p, tstyle s) {
  static const char *names[4] = {"0.weight.npy", "0.bias.npy", "2.weight.npy", "2.bias.npy"};
  static const char *shapes[4] = {"(4, 3)", "(4,)", "(2, 4)", "(2,)"};
  static const size_t off[4] = {0, 12, 16, 24}, cnt[4] = {12, 4, 8, 2};
  for (int i = 0; i < 4; i++) {
    memset(&e[i], 0, sizeof e[i]);
    snprintf(e[i].name, sizeof e[i].name, "%s", names[i]);
    unsigned char *v = t_vals(p + off[i], cnt[i], s.es, s.big);
    e[i].data = t_npy(s.descr, s.fortran, shapes[i], v, cnt[i] * (size_t)s.es, &e[i].len);
    free(v);
    e[i].deflate = s.deflate, e[i].zip64 = s.zip64;
  }
  return 4;
}

static void free_entries(tentry *e, int n) {
  for (int i = 0; i < n; i++) free(e[i].data);
}

/* imports b[0..n) into chain 0; returns the status, with p checked untouched on error */
static sc_status import_bytes(const unsigned char *b, size_t n, float *q, int f64) {
  char path[512];
  path_for(path, sizeof path, "in.npz");
  tu_write_all(path, b, n);
  size_t np;
  sc_chain *c = build(&chains[0], &np);
  float before[26];
  double qd[26];
  for (size_t k = 0; k < np; k++) q[k] = -3, qd[k] = -3;
  memcpy(before, q, sizeof before);
  sc_status st =
      f64 ? sc_params_import_npz_f64(c, qd, np, path) : sc_params_import_npz(c, q, np, path);
  if (f64)
    for (size_t k = 0; k < np; k++) q[k] = (float)qd[k];
  if (st != SC_OK) {
    assert_true(strlen(sc_last_error()) > 0);
    assert_memory_equal(q, before, sizeof before);
  }
  sc_chain_destroy(c);
  remove(path);
  return st;
}

static void mlp_params(float *p) {
  size_t np;
  sc_chain *c = build(&chains[0], &np);
  assert_int_equal(np, 26);
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 21));
  sc_chain_destroy(c);
}

static void test_foreign_files(void **state) {
  (void)state;
  float p[26], q[26];
  mlp_params(p);
  const tstyle styles[] = {
      {"<f4", "False", 0, 0, 4, 0},
      {">f4", "False", 0, 0, 4, 1},
      {"<f8", "False", 0, 0, 8, 0},
      {"<f4", "False", 0, 1, 4, 0},
      {"<f4", "True", 0, 0, 4, 0} /* 1-D only below */,
#ifdef SC_HAVE_ZLIB
      {"<f4", "False", 1, 0, 4, 0},
      {"<f8", "False", 1, 1, 8, 0},
#endif
  };
  for (size_t si = 0; si < sizeof styles / sizeof styles[0]; si++) {
    tentry e[4];
    int ne = mlp_entries(e, p, styles[si]);
    if (!strcmp(styles[si].fortran, "True")) {
      /* Fortran order is the same bytes for the 1-D biases: accepted there */
      free(e[0].data), free(e[2].data);
      tstyle c = styles[si];
      c.fortran = "False";
      tentry e2[4];
      mlp_entries(e2, p, c);
      e[0].data = e2[0].data, e[0].len = e2[0].len;
      e[2].data = e2[2].data, e[2].len = e2[2].len;
      free(e2[1].data), free(e2[3].data);
    }
    unsigned char *z;
    size_t zn = t_zip(e, ne, &z);
    for (int f64 = 0; f64 < 2; f64++) {
      sc_status st = import_bytes(z, zn, q, f64);
      if (st != SC_OK) fail_msg("style %zu f64 %d: %s", si, f64, sc_last_error());
      assert_memory_equal(p, q, sizeof p);
    }
    free(z);
    free_entries(e, ne);
  }
#ifndef SC_HAVE_ZLIB
  print_message("test_npz: built without zlib: deflated entries not tested\n");
#endif
}

/* one damaged variant of the mlp file: what to expect */
typedef struct {
  const char *what;
  sc_status want;
  const char *msg; /* a substring of the message */
} tcase;

static void expect_case(const unsigned char *z, size_t zn, tcase c) {
  float q[26];
  sc_status st = import_bytes(z, zn, q, 0);
  if (st != c.want || !strstr(sc_last_error(), c.msg))
    fail_msg("%s: got %s '%s', expected %s with '%s'", c.what, sc_status_str(st), sc_last_error(),
             sc_status_str(c.want), c.msg);
}

static void test_malformed(void **state) {
  (void)state;
  float p[26];
  mlp_params(p);
  tstyle plain = {"<f4", "False", 0, 0, 4, 0};
  tentry e[5];
  unsigned char *z;
  size_t zn;

  /* shape: the weight transposed */
  mlp_entries(e, p, plain);
  free(e[0].data);
  {
    unsigned char *v = t_vals(p, 12, 4, 0);
    e[0].data = t_npy("<f4", "False", "(3, 4)", v, 48, &e[0].len);
    free(v);
  }
  zn = t_zip(e, 4, &z);
  expect_case(z, zn,
              (tcase){"transposed", SC_ERR_SHAPE,
                      "array '0.weight' has shape (3, 4), the chain needs (4, 3)"});
  free(z), free_entries(e, 4);

  /* dtype */
  const char *dtypes[] = {"<i4", "<f2", "|u1", "<c8", "f4"};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    mlp_entries(e, p, plain);
    free(e[1].data);
    unsigned char v[16] = {0};
    e[1].data = t_npy(dtypes[i], "False", "(4,)", v, 16, &e[1].len);
    zn = t_zip(e, 4, &z);
    expect_case(z, zn, (tcase){dtypes[i], SC_ERR_FORMAT, "has dtype"});
    free(z), free_entries(e, 4);
  }

  /* Fortran order of a 2-D array */
  tstyle fort = {"<f4", "True", 0, 0, 4, 0};
  mlp_entries(e, p, fort);
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"fortran", SC_ERR_FORMAT, "Fortran order"});
  free(z), free_entries(e, 4);

  /* missing, extra, duplicate */
  mlp_entries(e, p, plain);
  zn = t_zip(e, 3, &z);
  expect_case(z, zn, (tcase){"missing", SC_ERR_FORMAT, "array '2.bias' is missing"});
  free(z);
  e[4] = e[3];
  e[4].data = malloc(e[3].len);
  memcpy(e[4].data, e[3].data, e[3].len);
  zn = t_zip(e, 5, &z);
  expect_case(z, zn, (tcase){"duplicate", SC_ERR_FORMAT, "appears twice"});
  free(z);
  snprintf(e[4].name, sizeof e[4].name, "4.weight.npy");
  zn = t_zip(e, 5, &z);
  expect_case(z, zn, (tcase){"extra", SC_ERR_FORMAT, "unexpected array '4.weight'"});
  free(z);
  snprintf(e[4].name, sizeof e[4].name, "README.txt");
  zn = t_zip(e, 5, &z);
  expect_case(z, zn, (tcase){"not npy", SC_ERR_FORMAT, "entry 'README.txt'"});
  free(z);
  free_entries(e, 5);

  /* CRC, NaN, beyond float range, bad header dicts, shapes that differ in length */
  mlp_entries(e, p, plain);
  e[2].bad_crc = 1;
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"crc", SC_ERR_FORMAT, "CRC mismatch"});
  free(z), free_entries(e, 4);
  {
    float bad[26];
    memcpy(bad, p, sizeof bad);
    bad[13] = NAN;
    mlp_entries(e, bad, plain);
    zn = t_zip(e, 4, &z);
    expect_case(z, zn, (tcase){"nan", SC_ERR_NONFINITE, "array '0.bias' element 1 is NaN"});
    free(z), free_entries(e, 4);
  }
  {
    mlp_entries(e, p, plain);
    free(e[3].data);
    unsigned char v[16];
    double big[2] = {1e300, 1};
    memcpy(v, big, 16); /* little-endian host assumed for this case */
    e[3].data = t_npy("<f8", "False", "(2,)", v, 16, &e[3].len);
    zn = t_zip(e, 4, &z);
    uint16_t one = 1;
    unsigned char le;
    memcpy(&le, &one, 1);
    if (le) expect_case(z, zn, (tcase){"range", SC_ERR_NONFINITE, "beyond float range"});
    float q[26];
    if (le) assert_int_equal(import_bytes(z, zn, q, 1), SC_OK); /* fine in double */
    free(z), free_entries(e, 4);
  }
  const char *headers[][2] = {
      {"{'descr': '<f4', 'fortran_order': False, }", "lacks 'shape'"},
      {"{'descr': '<f4', 'shape': (4,), }", "lacks 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,), }", "neither True nor False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1, }", "unknown key"},
      {"['descr', '<f4']", "does not start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } junk", "after the header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
       "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 1), }", "has shape (4, 1)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "has shape ()"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,", "bad 'shape'"},
  };
  for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
    mlp_entries(e, p, plain);
    free(e[1].data);
    size_t dl = strlen(headers[i][0]), total = (10 + dl + 1 + 63) / 64 * 64;
    e[1].data = malloc(total + 16);
    memcpy(e[1].data, "\x93NUMPY\x01\x00", 8);
    e[1].data[8] = (unsigned char)(total - 10), e[1].data[9] = 0;
    memcpy(e[1].data + 10, headers[i][0], dl);
    memset(e[1].data + 10 + dl, ' ', total - 10 - dl - 1);
    e[1].data[total - 1] = '\n';
    memset(e[1].data + total, 0, 16);
    e[1].len = total + 16;
    zn = t_zip(e, 4, &z);
    expect_case(z, zn,
                (tcase){headers[i][0],
                        strstr(headers[i][1], "has shape") ? SC_ERR_SHAPE : SC_ERR_FORMAT,
                        headers[i][1]});
    free(z), free_entries(e, 4);
  }
  /* more value bytes than the shape holds; a wrong .npy magic; a version 9 .npy */
  mlp_entries(e, p, plain);
  e[3].len -= 4;
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"short", SC_ERR_FORMAT, "bytes of values"});
  free(z);
  e[3].len += 4;
  e[0].data[1] = 'X';
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"magic", SC_ERR_FORMAT, "not an .npy"});
  free(z);
  e[0].data[1] = 'N', e[0].data[6] = 9;
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"version", SC_ERR_FORMAT, "version 9"});
  free(z), free_entries(e, 4);

  /* not a zip at all; empty */
  const unsigned char junk[] = "this is not a zip archive, only some text to read";
  expect_case(junk, sizeof junk, (tcase){"junk", SC_ERR_FORMAT, "no end-of-central-directory"});
  expect_case(junk, 0, (tcase){"empty", SC_ERR_FORMAT, "not an .npz"});
}

/* every truncation of a valid file (stored and deflated), and a sample of byte damage */
static void test_truncated_and_damaged(void **state) {
  (void)state;
  float p[26], q[26];
  mlp_params(p);
  for (int def = 0; def < 2; def++) {
#ifndef SC_HAVE_ZLIB
    if (def) break;
#endif
    tstyle s = {"<f4", "False", def, 0, 4, 0};
    tentry e[4];
    mlp_entries(e, p, s);
    unsigned char *z;
    size_t zn = t_zip(e, 4, &z);
    assert_int_equal(import_bytes(z, zn, q, 0), SC_OK);
    for (size_t cut = 0; cut < zn; cut++) {
      sc_status st = import_bytes(z, cut, q, 0);
      if (st == SC_OK) fail_msg("a file cut at %zu of %zu bytes loaded", cut, zn);
    }
    uint64_t seed = 77 + (uint64_t)def;
    unsigned char *d = malloc(zn);
    int ok = 0;
    for (int t = 0; t < 1500; t++) {
      memcpy(d, z, zn);
      int flips = 1 + (int)((tu_unif(&seed) + 1) * 2);
      for (int k = 0; k < flips; k++) {
        size_t at = (size_t)((tu_unif(&seed) + 1) / 2 * (double)zn) % zn;
        d[at] = (unsigned char)((tu_unif(&seed) + 1) * 128);
      }
      if (import_bytes(d, zn, q, t & 1) == SC_OK) ok++; /* e.g. a byte of a name field's slack */
    }
    print_message(
        "test_npz: %s: 1500 damaged files, %d still loaded (damage outside what is read)\n",
        def ? "deflated" : "stored", ok);
    free(d);
    free(z);
    free_entries(e, 4);
  }
}

/* a zip bomb: a deflated entry far longer than it says, or one that claims far more than its
 * shape can need */
static void test_zip_bomb(void **state) {
  (void)state;
#ifndef SC_HAVE_ZLIB
  print_message("test_npz: built without zlib: a deflated bomb cannot be read anyway\n");
  skip();
#else
  float p[26];
  mlp_params(p);
  tstyle s = {"<f4", "False", 1, 0, 4, 0};
  tentry e[4];
  mlp_entries(e, p, s);
  /* 0.bias.npy: its real .npy followed by 32 MiB of zeros, deflated (about 32 KiB) */
  size_t big = (size_t)32 << 20;
  unsigned char *bomb = calloc(e[1].len + big, 1);
  assert_non_null(bomb);
  memcpy(bomb, e[1].data, e[1].len);
  size_t real = e[1].len;
  free(e[1].data);
  e[1].data = bomb, e[1].len = real + big;
  e[1].claim = real; /* says it is small */
  unsigned char *z;
  size_t zn = t_zip(e, 4, &z);
  assert_true(zn < (size_t)1 << 20);
  expect_case(z, zn, (tcase){"bomb", SC_ERR_FORMAT, "longer than its stated"});
  free(z);
  e[1].claim = 0; /* tells the truth: more than 4 values can need */
  zn = t_zip(e, 4, &z);
  expect_case(z, zn, (tcase){"big claim", SC_ERR_FORMAT, "more than its shape can need"});
  free(z);
  free_entries(e, 4);
#endif
}

int main(void) {
  make_chains();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_export_errors),
      cmocka_unit_test(test_python),    cmocka_unit_test(test_foreign_files),
      cmocka_unit_test(test_malformed), cmocka_unit_test(test_truncated_and_damaged),
      cmocka_unit_test(test_zip_bomb),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
