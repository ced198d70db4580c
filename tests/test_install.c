/* tests/test_install.c — packaging: `make install PREFIX=...` puts the
 * header, libsimplechain.a, libsimplechain.so.MAJOR.MINOR.PATCH with its soname and links,
 * and lib/pkgconfig/simplechain.pc in place; a small program then builds with
 *
 *   cc app.c $(pkg-config --cflags --libs simplechain)             (the shared library)
 *   cc app.c $(pkg-config --static --cflags --libs simplechain)    (a SHARED=0 prefix: the
 *                                                                   static library)
 *
 * and runs; `make uninstall` removes every file it installed. The shared library exports
 * sc_* symbols only. The installs use the build directory of the suite (SC_BUILD_DIR, with
 * the flags the suite was built with: SC_TEST_OPT, so the sanitizer build links too) and
 * temporary prefixes. Skipped with a message when make, cc, pkg-config or binutils are
 * missing.
 */
#include "testutil.h"

#include <sys/stat.h>

#ifndef SC_TEST_OPT
#define SC_TEST_OPT "-O2"
#endif

static const char *APP_SRC =
    "#include <simplechain.h>\n"
    "#include <stdio.h>\n"
    "int main(void) {\n"
    "  sc_layer layers[] = {sc_dense(8, SC_TANH), sc_dense(2, SC_IDENTITY)};\n"
    "  sc_chain *c = NULL;\n"
    "  sc_workspace *ws = NULL;\n"
    "  static float p[64], g[64], x[3 * 16], t[2 * 16];\n"
    "  size_t np = 0;\n"
    "  float loss = 0;\n"
    "  for (int i = 0; i < 3 * 16; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;\n"
    "  for (int i = 0; i < 2 * 16; i++) t[i] = (float)((i * 13) % 7) / 7.0f;\n"
    "  if (sc_chain_create(&c, 3, layers, 2) != SC_OK || sc_chain_nparams(c, &np) != SC_OK ||\n"
    "      np > 64 || sc_params_init(c, p, np, 7) != SC_OK ||\n"
    "      sc_workspace_create(&ws, c, 16) != SC_OK ||\n"
    "      sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, 16, &loss, g, NULL, ws) != SC_OK) {\n"
    "    fprintf(stderr, \"%s\\n\", sc_last_error());\n"
    "    return 1;\n"
    "  }\n"
    "  printf(\"version %d.%d.%d np %zu loss %.9g\\nAPP OK\\n\", SC_VERSION_MAJOR,\n"
    "         SC_VERSION_MINOR, SC_VERSION_PATCH, np, (double)loss);\n"
    "  sc_workspace_destroy(ws);\n"
    "  sc_chain_destroy(c);\n"
    "  return 0;\n"
    "}\n";

static char srcdir[2048], builddir[2048], tmp[64] = "", prefix[128], prefix_static[128];
static char logpath[256];

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return NULL;
  }
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static int status_of(int st) {
  if (st == -1) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* runs a shell command with its output to logpath; fails the test (with the output)
 * unless it exits with 0 */
static char *sh(const char *fmt, ...) {
  char cmd[8192], full[9000];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  snprintf(full, sizeof full, "( %s ) >'%s' 2>&1", cmd, logpath);
  int st = status_of(system(full));
  char *out = slurp(logpath);
  if (st != 0) fail_msg("`%s` exited with %d:\n%s", cmd, st, out ? out : "");
  assert_non_null(out);
  return out;
}

static void absolute(char *dst, size_t n, const char *path) {
  if (path[0] == '/') {
    snprintf(dst, n, "%s", path);
  } else {
    char cwd[1024];
    if (!getcwd(cwd, sizeof cwd)) fail_msg("getcwd failed");
    snprintf(dst, n, "%s/%s", cwd, path);
  }
}

static int setup(void **state) {
  (void)state;
  const char *tools[] = {"make", "cc", "pkg-config", "readelf", "nm"};
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tools[i]);
    if (system(cmd) != 0) {
      print_message("test_install: no `%s` on PATH; the install tests are skipped\n", tools[i]);
      return 0;
    }
  }
  const char *src = getenv("SC_SRC_DIR"), *build = getenv("SC_BUILD_DIR");
  absolute(srcdir, sizeof srcdir, src && *src ? src : ".");
  absolute(builddir, sizeof builddir, build && *build ? build : "build");
  if (strchr(srcdir, '\'') || strchr(builddir, '\'')) return -1;
  snprintf(tmp, sizeof tmp, "/tmp/sc_install_XXXXXX");
  if (!mkdtemp(tmp)) return -1;
  snprintf(prefix, sizeof prefix, "%s/prefix", tmp);
  snprintf(prefix_static, sizeof prefix_static, "%s/prefix-static", tmp);
  snprintf(logpath, sizeof logpath, "%s/log.txt", tmp);
  char path[256];
  snprintf(path, sizeof path, "%s/app.c", tmp);
  FILE *f = fopen(path, "w");
  if (!f || fputs(APP_SRC, f) < 0 || fclose(f) != 0) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (tmp[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) return -1;
  }
  return 0;
}

#define NEED_SETUP()                                                                               \
  do {                                                                                             \
    if (!tmp[0]) skip();                                                                           \
  } while (0)

/* make install into a prefix; SHARED=0 for the static-only one */
static void install(const char *where, int shared) {
  free(sh("make --no-print-directory -C '%s' BUILD='%s' PREFIX='%s' SHARED=%d install", srcdir,
          builddir, where, shared));
}

static int exists(const char *dir, const char *rel) {
  char path[512];
  struct stat sb;
  snprintf(path, sizeof path, "%s/%s", dir, rel);
  return lstat(path, &sb) == 0;
}

static void test_install_layout(void **state) {
  (void)state;
  NEED_SETUP();
  install(prefix, 1);
  char so[64], soname[64], version[32];
  snprintf(version, sizeof version, "%d.%d.%d", SC_VERSION_MAJOR, SC_VERSION_MINOR,
           SC_VERSION_PATCH);
  snprintf(so, sizeof so, "lib/libsimplechain.so.%s", version);
  snprintf(soname, sizeof soname, "libsimplechain.so.%d", SC_VERSION_MAJOR);
  const char *files[] = {"include/simplechain.h", "include/sc_nuts.h",
                         "lib/libsimplechain.a",  so,
                         "lib/libsimplechain.so", "lib/pkgconfig/simplechain.pc"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    if (!exists(prefix, files[i])) fail_msg("make install did not install %s", files[i]);
  char rel[96];
  snprintf(rel, sizeof rel, "lib/%s", soname);
  if (!exists(prefix, rel)) fail_msg("make install did not install %s", rel);

  /* the soname, and the .pc's version */
  char *out = sh("readelf -d '%s/%s'", prefix, so);
  char want[128];
  snprintf(want, sizeof want, "[%s]", soname);
  if (!strstr(out, "(SONAME)") || !strstr(out, want))
    fail_msg("%s has no soname %s:\n%s", so, soname, out);
  free(out);
  out = sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --modversion simplechain", prefix);
  snprintf(want, sizeof want, "%s\n", version);
  assert_string_equal(out, want);
  free(out);

  /* exported: the sc_* API only (none of the sc__ internals, nothing from libxsmm) */
  out = sh("nm -D --defined-only '%s/%s' | awk 'NF == 3 { print $3 }'", prefix, so);
  size_t nsym = 0;
  for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
    if (strncmp(line, "sc_", 3) != 0 || line[3] == '_')
      fail_msg("the shared library exports %s", line);
    nsym++;
  }
  if (nsym < 50) fail_msg("only %zu sc_* symbols exported", nsym);
  free(out);
}

static void check_app_output(const char *out) {
  char want[64];
  snprintf(want, sizeof want, "version %d.%d.%d np 50 loss ", SC_VERSION_MAJOR, SC_VERSION_MINOR,
           SC_VERSION_PATCH);
  if (!strstr(out, want) || !strstr(out, "APP OK\n")) fail_msg("unexpected output:\n%s", out);
}

static void test_install_shared(void **state) {
  (void)state;
  NEED_SETUP();
  if (!exists(prefix, "lib/pkgconfig/simplechain.pc")) install(prefix, 1);
  free(sh("cd '%s' && cc %s app.c $(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags --libs "
          "simplechain) -o app-shared",
          tmp, SC_TEST_OPT, prefix));
  char *out = sh("readelf -d '%s/app-shared'", tmp);
  char want[64];
  snprintf(want, sizeof want, "[libsimplechain.so.%d]", SC_VERSION_MAJOR);
  if (!strstr(out, want)) fail_msg("the app does not need %s:\n%s", want, out);
  free(out);
  out = sh("cd '%s' && LD_LIBRARY_PATH='%s/lib' ./app-shared", tmp, prefix);
  check_app_output(out);
  free(out);
  /* it ran against the installed library */
  out = sh("cd '%s' && LD_LIBRARY_PATH='%s/lib' ldd ./app-shared", tmp, prefix);
  char want2[256];
  snprintf(want2, sizeof want2, "%s/lib/libsimplechain.so.%d", prefix, SC_VERSION_MAJOR);
  if (!strstr(out, want2)) fail_msg("ldd does not show %s:\n%s", want2, out);
  free(out);
}

static void test_install_static(void **state) {
  (void)state;
  NEED_SETUP();
  install(prefix_static, 0);
  if (exists(prefix_static, "lib/libsimplechain.so"))
    fail_msg("SHARED=0 installed a shared library");
  free(sh("cd '%s' && cc %s app.c $(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --static "
          "--cflags --libs simplechain) -o app-static",
          tmp, SC_TEST_OPT, prefix_static));
  char *out = sh("readelf -d '%s/app-static'", tmp);
  if (strstr(out, "libsimplechain"))
    fail_msg("the static app needs a shared simplechain:\n%s", out);
  free(out);
  out = sh("cd '%s' && ./app-static", tmp);
  check_app_output(out);
  /* the same library code: the same loss as the shared build, to the bit */
  if (exists(tmp, "app-shared")) {
    char *out2 = sh("cd '%s' && LD_LIBRARY_PATH='%s/lib' ./app-shared", tmp, prefix);
    assert_string_equal(out, out2);
    free(out2);
  }
  free(out);
}

/* make uninstall leaves no file and no link of ours behind */
static void test_uninstall(void **state) {
  (void)state;
  NEED_SETUP();
  const char *prefixes[] = {prefix, prefix_static};
  for (int i = 0; i < 2; i++) {
    if (!exists(prefixes[i], "lib")) install(prefixes[i], i == 0);
    free(sh("make --no-print-directory -C '%s' BUILD='%s' PREFIX='%s' uninstall", srcdir, builddir,
            prefixes[i]));
    char *out = sh("find '%s' ! -type d", prefixes[i]);
    if (out[0]) fail_msg("make uninstall left:\n%s", out);
    free(out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_install_layout),
      cmocka_unit_test(test_install_shared),
      cmocka_unit_test(test_install_static),
      cmocka_unit_test(test_uninstall),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
