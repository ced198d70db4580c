/* tests/test_dropin.c — the drop-in promise of simplechain.h: a user program compiled
 * together with simplechain.c alone (no build/, no kernels/, no library archive) builds
 * warning-free with -Wall -Wextra -Werror and works.
 *
 * The test writes app.c into a fresh temporary directory, compiles it with
 *
 *   cc -std=c11 -O2 -Wall -Wextra -Werror app.c $SC_SRC_DIR/simplechain.c -I$SC_SRC_DIR -o app -lm
 *
 * (also with -DSC_NO_THREADS -DSC_NO_BUILTIN_AVX512, with -pthread -Wpedantic as the header
 * suggests for threads, and with -DSC_NO_BUILTIN_AVX2), runs it and checks its exit status
 * and output. The app trains 3 -> 8 tanh -> 2 with ADAM, checks that the loss went down,
 * which kernel set it ran on, and that threads are available exactly when SC_NO_THREADS is
 * not defined; it also takes 20 SGD steps on a small convnet (conv 3x3, max-pool, dense) and
 * on the dense chain in double, and prints the bits of all three losses, which the runs
 * below compare.
 * Skipped only when there is no `cc`.
 *
 * Kernel sets: on x86-64 the two files alone carry built-in AVX-512 and AVX2 sets, picked on
 * a CPU with AVX-512 (F, BW, VL, DQ), else AVX2 + FMA; -DSC_NO_BUILTIN_AVX512 leaves out the
 * first, -DSC_NO_BUILTIN_AVX2 both (only the portable "scalar" set). Every scalar run
 * (SC_ISA=scalar) gives the same bits. test_dropin_kernels compiles kernels/avx2/avx2.c and
 * kernels/avx512/avx512.c along, with no flags of their own: the app must then run on the kernel
 * set the CPU supports, reach the portable build's loss within 1e-3 relative, and give
 * exactly the bits of the built-in set of the same name (the same code): AVX-512 by default
 * on a CPU with it, AVX2 with SC_ISA=avx2.
 */
#include "testutil.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *APP_SRC1 =
    "#include \"simplechain.h\"\n"
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "\n"
    "#define CHECK(call)                                                        \\\n"
    "  do {                                                                   \\\n"
    "    sc_status st_ = (call);                                              \\\n"
    "    if (st_ != SC_OK) {                                                  \\\n"
    "      fprintf(stderr, \"%s -> %s: %s\\n\", #call, sc_status_str(st_),      \\\n"
    "              sc_last_error());                                          \\\n"
    "      return 1;                                                          \\\n"
    "    }                                                                    \\\n"
    "  } while (0)\n"
    "\n"
    "enum { N = 48 };\n"
    "\n"
    "int main(void) {\n"
    "  sc_layer layers[] = {sc_dense(8, SC_TANH), sc_dense(2, SC_IDENTITY)};\n"
    "  sc_chain *chain = NULL;\n"
    "  CHECK(sc_chain_create(&chain, 3, layers, 2));\n"
    "  size_t np = 0;\n"
    "  CHECK(sc_chain_nparams(chain, &np));\n"
    "  if (np != 3 * 8 + 8 + 8 * 2 + 2) {\n"
    "    fprintf(stderr, \"nparams %zu\\n\", np);\n"
    "    return 1;\n"
    "  }\n"
    "  static float p[64], g[64], x[N * 3], t[N * 2];\n"
    "  unsigned long s = 12345;\n"
    "  for (int i = 0; i < N * 3; i++) {\n"
    "    s = s * 6364136223846793005ul + 1442695040888963407ul;\n"
    "    x[i] = (float)((double)(s >> 40) / (double)(1ul << 24) * 2.0 - 1.0);\n"
    "  }\n"
    "  for (int i = 0; i < N; i++) {\n"
    "    t[2 * i] = 0.5f * x[3 * i] - x[3 * i + 1] * x[3 * i + 2];\n"
    "    t[2 * i + 1] = x[3 * i + 2] * x[3 * i + 2] - 0.3f;\n"
    "  }\n"
    "  CHECK(sc_params_init(chain, p, np, 42));\n"
    "  sc_workspace *ws = NULL;\n"
    "  CHECK(sc_workspace_create(&ws, chain, N));\n"
    "  sc_status th = sc_workspace_set_threads(ws, 2);\n"
    "#ifdef SC_NO_THREADS\n"
    "  if (th != SC_ERR_UNSUPPORTED) {\n"
    "    fprintf(stderr, \"set_threads without threads: %s\\n\", sc_status_str(th));\n"
    "    return 1;\n"
    "  }\n"
    "#else\n"
    "  if (th != SC_OK) {\n"
    "    fprintf(stderr, \"set_threads: %s: %s\\n\", sc_status_str(th), sc_last_error());\n"
    "    return 1;\n"
    "  }\n"
    "#endif\n"
    "  sc_optim cfg = sc_adam(0.02);\n"
    "  sc_optimizer *opt = NULL;\n"
    "  CHECK(sc_optimizer_create(&opt, &cfg, np));\n"
    "  float loss0 = 0, loss = 0;\n"
    "  CHECK(sc_valgrad(chain, SC_LOSS_SQUARED, p, x, t, N, &loss0, g, NULL, ws));\n"
    "  for (int step = 0; step < 100; step++) {\n"
    "    CHECK(sc_valgrad(chain, SC_LOSS_SQUARED, p, x, t, N, &loss, g, NULL, ws));\n"
    "    CHECK(sc_optimizer_step(opt, p, g, np));\n"
    "  }\n"
    "  CHECK(sc_loss_value(chain, SC_LOSS_SQUARED, p, x, t, N, &loss, ws));\n";
/* (in two strings: C99 compilers need only support 4,095 characters in one) */
static const char *APP_SRC2 =
    "  /* a conv chain (float) and the dense chain in double: 20 SGD steps each, their losses'\n"
    "   * bits printed too, so that the builds' conv and double kernels are compared as well */\n"
    "  sc_layer cl[] = {sc_conv2d(3, 3, 4, SC_RELU), sc_maxpool2d(2, 2), sc_flatten(),\n"
    "                   sc_dense(2, SC_IDENTITY)};\n"
    "  sc_chain *cc = NULL;\n"
    "  CHECK(sc_chain_create_image(&cc, 2, 6, 6, cl, 4));\n"
    "  size_t cn = 0;\n"
    "  CHECK(sc_chain_nparams(cc, &cn));\n"
    "  static float cp[256], cg[256], cx[N * 72];\n"
    "  if (cn > 256) return 1;\n"
    "  for (int i = 0; i < N * 72; i++) {\n"
    "    s = s * 6364136223846793005ul + 1442695040888963407ul;\n"
    "    cx[i] = (float)((double)(s >> 40) / (double)(1ul << 24) * 2.0 - 1.0);\n"
    "  }\n"
    "  CHECK(sc_params_init(cc, cp, cn, 7));\n"
    "  sc_workspace *cw = NULL;\n"
    "  CHECK(sc_workspace_create(&cw, cc, N));\n"
    "  (void)sc_workspace_set_threads(cw, 2);\n"
    "  float closs = 0;\n"
    "  for (int step = 0; step < 20; step++) {\n"
    "    CHECK(sc_valgrad(cc, SC_LOSS_SQUARED, cp, cx, t, N, &closs, cg, NULL, cw));\n"
    "    for (size_t k = 0; k < cn; k++) cp[k] -= 0.05f * cg[k];\n"
    "  }\n"
    "  static double dp[64], dg[64], dx[N * 3], dt[N * 2];\n"
    "  for (int i = 0; i < N * 3; i++) dx[i] = x[i];\n"
    "  for (int i = 0; i < N * 2; i++) dt[i] = t[i];\n"
    "  CHECK(sc_params_init_f64(chain, dp, np, 42));\n"
    "  double dloss = 0;\n"
    "  for (int step = 0; step < 20; step++) {\n"
    "    CHECK(sc_valgrad_f64(chain, SC_LOSS_SQUARED, dp, dx, dt, N, &dloss, dg, NULL, ws));\n"
    "    for (size_t k = 0; k < np; k++) dp[k] -= 0.1 * dg[k];\n"
    "  }\n"
    "  unsigned int bits, cbits;\n"
    "  unsigned long long dbits;\n"
    "  memcpy(&bits, &loss, sizeof bits);\n"
    "  memcpy(&cbits, &closs, sizeof cbits);\n"
    "  memcpy(&dbits, &dloss, sizeof dbits);\n"
    "  printf(\"isa=%s loss0=%.6f loss=%.6f bits=%08x/%08x/%016llx\\n\", sc_chain_isa(chain), "
    "loss0,\n"
    "         loss, bits, cbits, dbits);\n"
    "  sc_workspace_destroy(cw);\n"
    "  sc_chain_destroy(cc);\n"
    "  if (!(loss < 0.5f * loss0)) {\n"
    "    fprintf(stderr, \"loss did not decrease enough: %g -> %g\\n\", loss0, loss);\n"
    "    return 1;\n"
    "  }\n"
    "  sc_optimizer_destroy(opt);\n"
    "  sc_workspace_destroy(ws);\n"
    "  sc_chain_destroy(chain);\n"
    "  printf(\"DROPIN OK\\n\");\n"
    "  return 0;\n"
    "}\n";

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return NULL;
  }
  size_t k;
  while ((k = fread(buf + len, 1, cap - 1 - len, f)) > 0) {
    len += k;
    if (len + 1 == cap) {
      char *nb = realloc(buf, cap * 2);
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
  }
  buf[len] = 0;
  fclose(f);
  return buf;
}

static int have_cc(void) { return system("command -v cc >/dev/null 2>&1") == 0; }

static int exit_code(int status) {
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* what earlier builds reached, for later ones to compare with: the portable (scalar) loss
 * and bits, and the bits of the two-file build's built-in AVX2 and AVX-512 sets */
static float scalar_loss = -1;
/* "bits=" and the three losses' bits: dense float, conv float, dense double */
#define BITS_LEN 39
static char scalar_bits[48], avx2_bits[48], avx512_bits[48];

static int cpu_has(const char *what) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (strcmp(what, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (strcmp(what, "avx2") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  (void)what;
  return 0;
}

/* the kernel set the dispatcher should pick on this CPU, for a build with these flags, with
 * the kernels/ files compiled in or not: the two files alone carry built-in AVX-512 and AVX2
 * sets (-DSC_NO_BUILTIN_AVX512 leaves out the first, -DSC_NO_BUILTIN_AVX2 both) */
static const char *expected_isa(const char *flags, int kernels) {
#if defined(__x86_64__)
  int no2 = !kernels && strstr(flags, "SC_NO_BUILTIN_AVX2") != NULL;
  int no512 = no2 || (!kernels && strstr(flags, "SC_NO_BUILTIN_AVX512") != NULL);
  if (!no512 && cpu_has("avx512")) return "avx512";
  if (!no2 && cpu_has("avx2")) return "avx2";
#endif
  (void)flags, (void)kernels;
  return "scalar";
}

/* builds and runs the app with extra compiler flags (and runs it once more with SC_ISA=isa
 * for each name in isas, a space-separated list, where isas is not NULL); expects it to print
 * DROPIN OK. With kernels, kernels/avx2/avx2.c and
 * kernels/avx512/avx512.c are compiled along with no flags of their own (the fast paths
 * from a plain cc command) */
static void run_app(const char *dir, const char *extra_flags, int kernels, const char *isa);
static void build_and_run_k(const char *extra_flags, int kernels, const char *isas) {
  const char *src = getenv("SC_SRC_DIR");
  if (!src || !*src) src = ".";
  /* the build runs in the temporary directory: make the source directory absolute */
  char srcdir[4096];
  if (src[0] == '/') {
    snprintf(srcdir, sizeof srcdir, "%s", src);
  } else {
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) fail_msg("getcwd failed");
    snprintf(srcdir, sizeof srcdir, "%s/%s", cwd, src);
  }
  if (strchr(srcdir, '\'')) fail_msg("SC_SRC_DIR '%s' contains a quote", srcdir);
  char lib[4200];
  snprintf(lib, sizeof lib, "%s/simplechain.c", srcdir);
  struct stat sb;
  if (stat(lib, &sb) != 0) fail_msg("%s not found (set SC_SRC_DIR to the repository root)", lib);

  char dir[] = "/tmp/sc_dropin_XXXXXX";
  if (!mkdtemp(dir)) fail_msg("mkdtemp failed");
  char path[4200];
  snprintf(path, sizeof path, "%s/app.c", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(APP_SRC1, f) >= 0);
  assert_true(fputs(APP_SRC2, f) >= 0);
  assert_int_equal(fclose(f), 0);

  /* exactly the documented drop-in build: the app and simplechain.c, nothing else */
  char cmd[32768], kfiles[8400] = "";
  if (kernels)
    snprintf(kfiles, sizeof kfiles, "'%s/kernels/avx2/avx2.c' '%s/kernels/avx512/avx512.c'", srcdir,
             srcdir);
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cc -std=c11 -O2 -Wall -Wextra -Werror %s app.c '%s' %s -I'%s' -o app -lm "
           ">build.log 2>&1",
           dir, extra_flags, lib, kfiles, srcdir);
  assert_null(strstr(cmd, "/build/"));
  if (!kernels) assert_null(strstr(cmd, "kernels"));
  assert_null(strstr(cmd, ".a "));
  int st = exit_code(system(cmd));
  snprintf(path, sizeof path, "%s/build.log", dir);
  char *log = slurp(path);
  if (st != 0)
    fail_msg("drop-in build (%s) failed with status %d:\n%s", extra_flags, st, log ? log : "");
  /* -Werror already guarantees it; an empty log says no diagnostics at all */
  assert_non_null(log);
  if (log[0]) fail_msg("drop-in build (%s) printed diagnostics:\n%s", extra_flags, log);
  free(log);

  /* a build for AVX-512 by flag (below) runs only on a CPU that has it */
  int runnable = !strstr(extra_flags, "-mavx512f") || cpu_has("avx512");
  if (runnable) run_app(dir, extra_flags, kernels, NULL);
  char isa[16];
  for (const char *q = runnable ? isas : NULL; q && *q; q += strspn(q, " ")) {
    size_t len = strcspn(q, " ");
    assert_true(len < sizeof isa);
    memcpy(isa, q, len);
    isa[len] = 0;
    run_app(dir, extra_flags, kernels, isa);
    q += len;
  }

  const char *files[] = {"app.c", "app", "build.log", "out.txt", "err.txt"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

/* runs ./app in dir (with SC_ISA=isa when isa is not NULL) and checks its output */
static void run_app(const char *dir, const char *extra_flags, int kernels, const char *isa) {
  char cmd[8192], path[4200];
  snprintf(cmd, sizeof cmd, "cd '%s' && %s%s ./app >out.txt 2>err.txt", dir, isa ? "SC_ISA=" : "",
           isa ? isa : "");
  int st = exit_code(system(cmd));
  snprintf(path, sizeof path, "%s/out.txt", dir);
  char *out = slurp(path);
  snprintf(path, sizeof path, "%s/err.txt", dir);
  char *err = slurp(path);
  assert_non_null(out);
  assert_non_null(err);
  if (st != 0)
    fail_msg("drop-in app (%s, SC_ISA=%s) exited with %d\nstdout:\n%s\nstderr:\n%s", extra_flags,
             isa ? isa : "", st, out, err);
  /* the last line is exactly DROPIN OK, and the expected kernels were used */
  size_t n = strlen(out);
  assert_true(n >= 10);
  assert_string_equal(out + n - 10, "DROPIN OK\n");
  assert_true(n == 10 || out[n - 11] == '\n');
  char want[32];
  snprintf(want, sizeof want, "isa=%s ", isa ? isa : expected_isa(extra_flags, kernels));
  if (!strstr(out, want)) fail_msg("expected %s in: %s", want, out);
  float l0 = -1, l1 = -1;
  assert_int_equal(sscanf(strstr(out, "loss0="), "loss0=%f loss=%f", &l0, &l1), 2);
  assert_true(l0 > 0 && l1 >= 0 && l1 < 0.5f * l0);
  const char *bits = strstr(out, "bits=");
  assert_non_null(bits);
  assert_true(strcspn(bits, " \n") == BITS_LEN);
  int scalar = strcmp(want, "isa=scalar ") == 0, avx2 = strcmp(want, "isa=avx2 ") == 0;
  int avx512 = strcmp(want, "isa=avx512 ") == 0;
  /* every scalar run, with or without the built-in set, gives the same bits */
  if (scalar && scalar_bits[0] && strncmp(bits, scalar_bits, BITS_LEN) != 0)
    fail_msg("scalar runs differ: %.*s (%s) against %s", BITS_LEN, bits, extra_flags, scalar_bits);
  if (scalar && !scalar_bits[0]) {
    scalar_loss = l1;
    snprintf(scalar_bits, sizeof scalar_bits, "%.*s", BITS_LEN, bits);
  }
  /* the built-in AVX2 set and kernels/avx2/avx2.c are the same code: the same bits */
  if (avx2 && avx2_bits[0] && strncmp(bits, avx2_bits, BITS_LEN) != 0)
    fail_msg("avx2 runs differ: %.*s (%s%s) against %s", BITS_LEN, bits, extra_flags,
             kernels ? ", kernels/ files" : "", avx2_bits);
  if (avx2 && !avx2_bits[0]) snprintf(avx2_bits, sizeof avx2_bits, "%.*s", BITS_LEN, bits);
  /* so are the built-in AVX-512 set and kernels/avx512/avx512.c */
  if (avx512 && avx512_bits[0] && strncmp(bits, avx512_bits, BITS_LEN) != 0)
    fail_msg("avx512 runs differ: %.*s (%s%s) against %s", BITS_LEN, bits, extra_flags,
             kernels ? ", kernels/ files" : "", avx512_bits);
  if (avx512 && !avx512_bits[0]) snprintf(avx512_bits, sizeof avx512_bits, "%.*s", BITS_LEN, bits);
  if (!scalar && scalar_loss > 0 && !(fabsf(l1 - scalar_loss) <= 1e-3f * scalar_loss))
    fail_msg("the %s kernels reached loss %g, the portable ones %g", want + 4, (double)l1,
             (double)scalar_loss);
  assert_string_equal(err, "");
  free(out);
  free(err);
}

static void build_and_run(const char *extra_flags, const char *isa) {
  build_and_run_k(extra_flags, 0, isa);
}

/* the two files alone, without the built-in AVX2 set: the portable kernels only. First, so
 * that the later builds have its loss and bits to compare with. */
static void test_dropin_no_builtin(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
  build_and_run("-DSC_NO_BUILTIN_AVX2", NULL);
}

/* the two files alone, as the README builds them (-pthread) and with -Wpedantic: the fastest
 * built-in set the CPU runs, the built-in AVX2 set (SC_ISA=avx2) on a CPU with AVX2 + FMA
 * (x86-64), and the scalar set (SC_ISA=scalar) with the bits of the build without the built-in
 * sets. (The builds without -pthread are test_dropin_no_builtin's and test_dropin_no_threads'.) */
static void test_dropin_threads(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
  build_and_run("-pthread -Wpedantic", cpu_has("avx2") ? "scalar avx2" : "scalar");
}

static void test_dropin_no_threads(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
  build_and_run("-DSC_NO_THREADS -DSC_NO_BUILTIN_AVX512", NULL);
}

/* cc -O2 app.c simplechain.c kernels/avx2/avx2.c kernels/avx512/avx512.c: the fast paths, no -m or
 * -D flags (weak references in simplechain.c, target pragmas in the kernel files); with SC_ISA=avx2
 * the bits of the built-in AVX2 set */
static void test_dropin_kernels(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
#if !(defined(__x86_64__) || defined(__i386__))
  print_message("test_dropin: the kernels/ files are x86 code; skipped\n");
  skip();
#endif
  build_and_run_k("-pthread -Wpedantic", 1, cpu_has("avx2") ? "avx2" : NULL);
}

/* the two files built with AVX-512 flags (as -march=native does on such a CPU): the AVX2 pass
 * then compiles the vector kernels' AVX-512-only functions too, which the AVX-512 pass must
 * rename (its list of names; a missing one is a redefinition error). Built on any x86-64 CPU,
 * run (with the AVX-512 set's bits) only on one with AVX-512 */
static void test_dropin_avx512_flags(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
#if !defined(__x86_64__)
  print_message("test_dropin: AVX-512 flags are x86-64 only; skipped\n");
  skip();
#endif
  build_and_run("-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma", NULL);
}

/* The README's C example (its first ```c block) builds from the two files alone with its own
 * command line plus -Wall -Wextra -Wpedantic -Werror, runs, and prints a final loss below the
 * data's variance (y = x^2 for x uniform in [0, 1]: 4/45 = 0.089): the README cannot drift
 * from the API. (-DSC_NO_BUILTIN_AVX512: a shorter compile; the example's speed is not tested.) */
static void test_dropin_readme_example(void **state) {
  (void)state;
  if (!have_cc()) {
    print_message("test_dropin: no `cc` on PATH; skipping the drop-in build\n");
    skip();
  }
  const char *src = getenv("SC_SRC_DIR");
  if (!src || !*src) src = ".";
  char srcdir[4096], path[4200];
  if (src[0] == '/')
    snprintf(srcdir, sizeof srcdir, "%s", src);
  else {
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) fail_msg("getcwd failed");
    snprintf(srcdir, sizeof srcdir, "%s/%s", cwd, src);
  }
  snprintf(path, sizeof path, "%s/README.md", srcdir);
  char *readme = slurp(path);
  if (!readme) fail_msg("%s not found (set SC_SRC_DIR to the repository root)", path);
  char *a = strstr(readme, "\n```c\n");
  assert_non_null(a);
  a += 6;
  char *b = strstr(a, "\n```\n");
  assert_non_null(b);
  b[1] = 0;
  assert_non_null(strstr(a, "cc -std=c11 -O2 app.c simplechain.c -lm -pthread"));
  char dir[] = "/tmp/sc_readme_XXXXXX";
  if (!mkdtemp(dir)) fail_msg("mkdtemp failed");
  snprintf(path, sizeof path, "%s/app.c", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(a, f) >= 0);
  assert_int_equal(fclose(f), 0);
  free(readme);
  char cmd[16384];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cc -std=c11 -O2 -Wall -Wextra -Wpedantic -Werror -DSC_NO_BUILTIN_AVX512 "
           "-I'%s' app.c '%s/simplechain.c' -lm -pthread -o app >build.log 2>&1 && ./app "
           ">out.txt 2>&1",
           dir, srcdir, srcdir);
  int st = exit_code(system(cmd));
  snprintf(path, sizeof path, "%s/build.log", dir);
  char *log = slurp(path);
  snprintf(path, sizeof path, "%s/out.txt", dir);
  char *out = slurp(path);
  if (st != 0)
    fail_msg("the README's example failed (status %d):\n%s%s", st, log ? log : "", out ? out : "");
  assert_non_null(log);
  if (log[0]) fail_msg("the README's example printed diagnostics:\n%s", log);
  assert_non_null(out);
  double loss = -1;
  if (sscanf(out, "final loss %lf", &loss) != 1) fail_msg("unexpected output: %s", out);
  print_message("  the README's example: final loss %g\n", loss);
  assert_true(loss >= 0 && loss < 0.089);
  free(log);
  free(out);
  const char *files[] = {"app.c", "app", "build.log", "out.txt", "model.scp"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dropin_readme_example), cmocka_unit_test(test_dropin_no_builtin),
      cmocka_unit_test(test_dropin_threads),        cmocka_unit_test(test_dropin_no_threads),
      cmocka_unit_test(test_dropin_avx512_flags),   cmocka_unit_test(test_dropin_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
