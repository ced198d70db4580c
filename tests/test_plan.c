/* tests/test_plan.c — kernel variants chosen at chain creation: SC_PLAN,
 * SC_DENSE_FWD, SC_TANH_VARIANT, SC_WISDOM and sc_chain_plan.
 *
 *   - every dense forward variant ("fused", and "xsmm" where the build has libxsmm), with
 *     each tanh variant ("div", "rcp", "rat", "ratrcp"), forced by name on every SIMD kernel
 *     set, gives the scalar reference's forward and gradient (relative 2e-5), the same bits on
 *     1 and 2 threads, and the plan says both were forced; rcp, rat, ratrcp on the scalar
 *     kernels are SC_ERR_UNSUPPORTED, an unknown name SC_ERR_ARG;
 *   - SC_TANH_VARIANT=fast: by rule rat; with SC_PLAN=measure all four are timed, an entry
 *     measured without them (or written before them, two timings) is completed in place, and
 *     read back without timing; fast on the scalar kernels is their one variant;
 *   - SC_PLAN=measure times the variants, writes the answers to the SC_WISDOM file, and the
 *     next creation reads them back ("wisdom") instead of timing; a measured plan gives the
 *     same bits on 1 and 2 threads;
 *   - a file that is not a wisdom file is ignored, left untouched and named in the plan's
 *     note; bad SC_PLAN / SC_DENSE_FWD values are SC_ERR_ARG, xsmm on the scalar kernels
 *     SC_ERR_UNSUPPORTED;
 *   - every conv register block (SC_CONV_FWD x SC_CONV_DW, all 9 pairs) on every SIMD kernel
 *     set gives the rule's blocks' bits exactly (forward, loss, gradient, input gradient; 1 and
 *     2 threads) and the scalar reference's values (relative 2e-5); SC_CONV_FWD=xsmm (libxsmm,
 *     where built and supported) gives the scalar values and the same bits on 1 and 2 threads;
 *     forcing one of the two keeps the rule's other (a 6-channel conv's dW block, 6x4 on
 *     AVX-512, with SC_CONV_FWD alone); a name that is no block shape is SC_ERR_ARG, one
 *     the set lacks (or any on the scalar kernels, xsmm included) SC_ERR_UNSUPPORTED;
 *     SC_PLAN=measure times the variants, keeps them in the wisdom file and reads them back;
 *   - SC_DENSE_DW=lane|dot (the dW form of dense layers small enough for lane accumulators) on
 *     every kernel set gives the scalar values, in float and double, the same bits on 1 and 2
 *     threads; SC_PLAN=measure times both forms on any kernel set.
 */
#include "testutil.h"

enum { NI = 70, NO = 5, B = 77 };

static void env_set(const char *k, const char *v) {
  if (v)
    setenv(k, v, 1);
  else
    unsetenv(k);
}

static sc_chain *make(void) {
  sc_layer L[] = {sc_dense(40, SC_RELU), sc_dense(24, SC_TANH), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 3));
  return c;
}

static char *plan_of(const sc_chain *c) {
  size_t need = 0;
  sc_chain_plan(c, NULL, 0, &need);
  char *b = malloc(need);
  SC_OK_OR_FAIL(sc_chain_plan(c, b, need, NULL));
  return b;
}

typedef struct run {
  float y[B * NO], g[NI * 40 + 40 + 40 * 24 + 24 + 24 * NO + NO], l;
} run;

static void compute(const sc_chain *c, int threads, run *r) {
  size_t np;
  sc_chain_nparams(c, &np);
  assert_int_equal(np, sizeof r->g / sizeof r->g[0]);
  float *p = malloc(np * sizeof *p), x[B * NI], t[B * NO];
  SC_OK_OR_FAIL(sc_params_init(c, p, np, 5));
  tu_fill_f32(x, B * NI, 1, 1.0);
  tu_fill_f32(t, B * NO, 2, 1.0);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, threads));
  SC_OK_OR_FAIL(sc_forward(c, p, x, B, r->y, ws));
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, B, &r->l, r->g, NULL, ws));
  sc_workspace_destroy(ws);
  free(p);
}

static void close_to(const char *what, const float *a, const float *b, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (!(fabsf(a[k] - b[k]) <= 2e-5f * (1 + fabsf(b[k]))))
      fail_msg("%s[%zu] = %.8g, the scalar reference %.8g", what, k, (double)a[k], (double)b[k]);
}

static void test_forced_variants(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  env_set("SC_ISA", "scalar");
  sc_chain *c = make();
  run ref;
  compute(c, 1, &ref);
  sc_chain_destroy(c);
  /* xsmm on the scalar kernels: refused */
  env_set("SC_DENSE_FWD", "xsmm");
  sc_layer L[] = {sc_dense(4, SC_RELU)};
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create(&c, 3, L, 1));
  /* rcp and the rational forms on the scalar kernels: refused (they have the divide only) */
  env_set("SC_DENSE_FWD", NULL);
  static const char *tvs[] = {"div", "rcp", "rat", "ratrcp"};
  for (int v = 1; v < 4; v++) {
    env_set("SC_TANH_VARIANT", tvs[v]);
    SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create(&c, 3, L, 1));
    assert_non_null(strstr(sc_last_error(), "SC_TANH_VARIANT"));
  }
  int tested = 0;
  for (int is = 0; is < nisa; is++) {
    if (!strcmp(isas[is], "scalar")) continue;
    for (int v = 0; v < 8; v++) {
      const char *var = v & 1 ? "xsmm" : "fused", *tv = tvs[v >> 1];
      env_set("SC_ISA", isas[is]);
      env_set("SC_DENSE_FWD", var);
      env_set("SC_TANH_VARIANT", tv);
      c = NULL;
      sc_status st = sc_chain_create(
          &c, NI,
          (sc_layer[]){sc_dense(40, SC_RELU), sc_dense(24, SC_TANH), sc_dense(NO, SC_IDENTITY)}, 3);
      if ((v & 1) && st == SC_ERR_UNSUPPORTED) {
        print_message("      %s: no xsmm here (%s)\n", isas[is], sc_last_error());
        continue;
      }
      SC_OK_OR_FAIL(st);
      char *pl = plan_of(c);
      char want[64], twant[64];
      snprintf(want, sizeof want, ": %s (forced", var);
      snprintf(twant, sizeof twant, "24 tanh: %s (forced by SC_DENSE_FWD); tanh %s (forced", var,
               tv);
      if (!strstr(pl, want) || !strstr(pl, twant))
        fail_msg("%s %s %s: plan\n%s", isas[is], var, tv, pl);
      free(pl);
      run r, r1;
      compute(c, 2, &r);
      compute(c, 1, &r1);
      assert_memory_equal(&r, &r1, sizeof r); /* any variant: the same bits on any threads */
      close_to("y", r.y, ref.y, B * NO);
      close_to("g", r.g, ref.g, sizeof r.g / sizeof r.g[0]);
      sc_chain_destroy(c);
      tested++;
    }
  }
  print_message("      %d forced variant(s) agree with the scalar reference\n", tested);
  env_set("SC_ISA", NULL);
  env_set("SC_TANH_VARIANT", "quick");
  SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, L, 1));
  assert_non_null(strstr(sc_last_error(), "SC_TANH_VARIANT='quick'"));
  env_set("SC_TANH_VARIANT", NULL);
  env_set("SC_DENSE_FWD", "simd");
  SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, L, 1));
  assert_non_null(strstr(sc_last_error(), "SC_DENSE_FWD"));
  env_set("SC_DENSE_FWD", NULL);
  env_set("SC_PLAN", "fastest");
  SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, L, 1));
  assert_non_null(strstr(sc_last_error(), "SC_PLAN"));
  env_set("SC_PLAN", NULL);
}

static void test_measure_and_wisdom(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "plan", "wisdom.txt");
  remove(path);
  env_set("SC_PLAN", "measure");
  env_set("SC_WISDOM", path);
  sc_chain *c = make();
  char *pl = plan_of(c);
  /* a second variant exists when xsmm can be forced (libxsmm built in, SIMD kernels, no
   * SC_XSMM=0) */
  int has_x = 0;
  {
    env_set("SC_DENSE_FWD", "xsmm");
    env_set("SC_PLAN", NULL); /* (the probe measures nothing, writes no wisdom) */
    sc_chain *cx = NULL;
    sc_layer Lx[] = {sc_dense(4, SC_RELU)};
    has_x = sc_chain_create(&cx, 3, Lx, 1) == SC_OK;
    sc_chain_destroy(cx);
    env_set("SC_DENSE_FWD", NULL);
    env_set("SC_PLAN", "measure");
  }
  /* the tanh layer has two variants on the SIMD kernel sets */
  int simd = strcmp(sc_chain_isa(c), "scalar") != 0;
  if (has_x && !strstr(pl, "(measured: fused")) fail_msg("plan:\n%s", pl);
  if (simd && !strstr(pl, "(measured: div ")) fail_msg("plan:\n%s", pl);
  if (!strstr(pl, "; dW lane (measured: lane ") && !strstr(pl, "; dW dot (measured: lane "))
    fail_msg("plan:\n%s", pl);
  { /* the dW forms are measured on every kernel set: there is always a wisdom file */
    size_t len;
    unsigned char *w = tu_read_all(path, &len);
    assert_true(len > 20 && !memcmp(w, "# simplechain wisdom 1\n", 23));
    int lines = 0;
    for (size_t k = 0; k < len; k++) lines += w[k] == '\n';
    assert_int_equal(lines, 1 + 3 * has_x + simd + 2); /* + the two lane-form layers' dW */
    assert_non_null(strstr((char *)w, "\ndense_dw cpu="));
    if (simd) assert_non_null(strstr((char *)w, "\ntanh cpu="));
    free(w);
  }
  run r1, r2;
  compute(c, 1, &r1);
  compute(c, 2, &r2);
  assert_memory_equal(&r1, &r2, sizeof r1); /* a measured plan: the same bits on any threads */
  sc_chain_destroy(c);
  free(pl);
  {
    c = make(); /* read back, not timed again */
    pl = plan_of(c);
    if (strstr(pl, "(measured") || (has_x && !strstr(pl, "(wisdom: fused")) ||
        !strstr(pl, "(wisdom: lane ") || (simd && !strstr(pl, "(wisdom: div ")))
      fail_msg("plan:\n%s", pl);
    free(pl);
    sc_chain_destroy(c);
    /* not a wisdom file: ignored, untouched, said */
    const unsigned char junk[] = "dense_fwd cpu=x isa=avx2 in=banana\n";
    tu_write_all(path, junk, sizeof junk - 1);
    c = make();
    pl = plan_of(c);
    if (!strstr(pl, "(measured") || !strstr(pl, "note: wisdom file") || !strstr(pl, "ignored"))
      fail_msg("plan:\n%s", pl);
    size_t len;
    unsigned char *w = tu_read_all(path, &len);
    assert_int_equal(len, sizeof junk - 1);
    assert_memory_equal(w, junk, len);
    free(w);
    free(pl);
    sc_chain_destroy(c);
  }
  remove(path);
  env_set("SC_PLAN", NULL);
  env_set("SC_WISDOM", NULL);
  /* the plan text: errors and sizing */
  c = make();
  char small[16];
  size_t need = 0;
  SC_EXPECT(SC_ERR_NOMEM, sc_chain_plan(c, small, sizeof small, &need));
  assert_true(need > sizeof small && strlen(small) < sizeof small);
  SC_EXPECT(SC_ERR_NULL, sc_chain_plan(NULL, small, sizeof small, NULL));
  SC_EXPECT(SC_ERR_NULL, sc_chain_plan(c, NULL, 5, NULL));
  pl = plan_of(c);
  assert_non_null(strstr(pl, "layer 0 dense 70 -> 40 relu: "));
  free(pl);
  sc_chain_destroy(c);
}

/* the line of the wisdom file w that starts with "tanh ", NUL-terminated in place, or NULL */
static char *tanh_line(char *w) {
  char *t = strstr(w, "\ntanh ");
  if (!t) return NULL;
  char *e = strchr(t + 1, '\n');
  if (e) *e = 0;
  return t + 1;
}

/* the plan of a fresh chain of make() (which is destroyed) */
static char *plan_now(void) {
  sc_chain *c = make();
  char *pl = plan_of(c);
  sc_chain_destroy(c);
  return pl;
}
static int count_lines(const char *w, size_t len) {
  int n = 0;
  for (size_t k = 0; k < len; k++) n += w[k] == '\n';
  return n;
}

static void test_tanh_fast(void **state) {
  (void)state;
  char path[512];
  tu_tmp_path(path, sizeof path, "plan", "wisdom_fast.txt");
  remove(path);
  env_set("SC_TANH_VARIANT", "fast"); /* by rule: rat */
  sc_chain *c = make();
  char *pl = plan_of(c);
  int simd = strcmp(sc_chain_isa(c), "scalar") != 0;
  sc_chain_destroy(c);
  if (simd ? !strstr(pl, "; tanh rat (rule)") : !strstr(pl, "; tanh div (the only variant here)"))
    fail_msg("plan:\n%s", pl);
  free(pl);
  if (!simd) {
    env_set("SC_TANH_VARIANT", NULL);
    return;
  }
  /* measured without fast: div and rcp only */
  env_set("SC_TANH_VARIANT", NULL);
  env_set("SC_PLAN", "measure");
  env_set("SC_WISDOM", path);
  sc_chain_destroy(make());
  size_t len;
  char *w = (char *)tu_read_all(path, &len), *t = tanh_line(w);
  assert_non_null(t);
  if (!strstr(t, " rat_ns=0.0 ratrcp_ns=0.0")) fail_msg("tanh entry: %s", t);
  free(w);
  /* fast: the entry is completed in place (no new line), rat and ratrcp timed */
  env_set("SC_TANH_VARIANT", "fast");
  pl = plan_now();
  if (!strstr(pl, "(measured: div ") || !strstr(pl, ", rat ") || !strstr(pl, ", ratrcp "))
    fail_msg("plan:\n%s", pl);
  free(pl);
  w = (char *)tu_read_all(path, &len);
  int lines = count_lines(w, len);
  t = tanh_line(w);
  assert_non_null(t);
  if (strstr(t, " rat_ns=0.0 ") || strstr(t, " ratrcp_ns=0.0")) fail_msg("tanh entry: %s", t);
  /* read back: not timed again; then the same entry in the two-timing form of older files */
  pl = plan_now();
  if (!strstr(pl, "; tanh ") || strstr(pl, "measured") || !strstr(pl, "(wisdom: div "))
    fail_msg("plan:\n%s", pl);
  free(pl);
  char *old = malloc(len + 1), *r = strstr(t, " rat_ns=");
  assert_true(old && r);
  size_t head = (size_t)(r - w);
  memcpy(old, w, head);
  old[head] = '\n';
  size_t rest = strlen(t) + (size_t)(t - w) + 1; /* past the tanh line's newline */
  memcpy(old + head + 1, w + rest, len - rest);
  size_t olen = head + 1 + len - rest;
  tu_write_all(path, (unsigned char *)old, olen);
  env_set("SC_TANH_VARIANT", NULL); /* div and rcp are there: read, not measured */
  pl = plan_now();
  if (strstr(pl, "measured") || strstr(pl, "note:") || !strstr(pl, "(wisdom: div "))
    fail_msg("plan:\n%s", pl);
  free(pl);
  env_set("SC_TANH_VARIANT", "fast"); /* rat and ratrcp are not: timed, the entry completed */
  pl = plan_now();
  if (!strstr(pl, "tanh") || !strstr(pl, "(measured: div ") || !strstr(pl, ", ratrcp "))
    fail_msg("plan:\n%s", pl);
  free(pl);
  char *w2 = (char *)tu_read_all(path, &len);
  assert_int_equal(count_lines(w2, len), lines);
  t = tanh_line(w2);
  if (!t || strstr(t, " rat_ns=0.0 ") || !strstr(t, " ratrcp_ns=")) fail_msg("tanh entry: %s", t);
  free(w2), free(old), free(w);
  remove(path);
  env_set("SC_PLAN", NULL);
  env_set("SC_WISDOM", NULL);
  env_set("SC_TANH_VARIANT", NULL);
}

/* a small convnet whose channel counts and widths leave tails for every block shape */
enum { CC = 3, CH = 11, CW = 10, CB = 37 };
static sc_chain *make_conv(void) {
  sc_layer L[] = {sc_conv2d_ex(3, 3, 7, SC_TANH, 1, 1, 1, 1),
                  sc_conv2d_ex(2, 3, 5, SC_RELU, 2, 2, 0, 1), sc_flatten(),
                  sc_dense(4, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create_image(&c, CC, CH, CW, L, 4));
  return c;
}

typedef struct crun {
  float y[CB * 4], l, *g, gx[CB * CC * CH * CW];
  size_t np;
} crun;

static void conv_compute(const sc_chain *c, int threads, crun *r) {
  sc_chain_nparams(c, &r->np);
  r->g = malloc(r->np * sizeof *r->g);
  float *p = malloc(r->np * sizeof *p), x[CB * CC * CH * CW], t[CB * 4], dy[CB * 4];
  SC_OK_OR_FAIL(sc_params_init(c, p, r->np, 7));
  tu_fill_f32(x, CB * CC * CH * CW, 3, 1.0);
  tu_fill_f32(t, CB * 4, 4, 1.0);
  tu_fill_f32(dy, CB * 4, 5, 1.0);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, CB));
  SC_OK_OR_FAIL(sc_workspace_set_threads(ws, threads));
  SC_OK_OR_FAIL(sc_forward(c, p, x, CB, r->y, ws));
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, p, x, t, CB, &r->l, r->g, NULL, ws));
  float *gp = calloc(r->np, sizeof *gp);
  SC_OK_OR_FAIL(sc_pullback(c, p, x, dy, CB, gp, r->gx, ws));
  free(gp);
  sc_workspace_destroy(ws);
  free(p);
}

static void crun_same(const char *what, const crun *a, const crun *b) {
  if (memcmp(a->y, b->y, sizeof a->y) || memcmp(&a->l, &b->l, sizeof a->l) ||
      memcmp(a->g, b->g, a->np * sizeof *a->g) || memcmp(a->gx, b->gx, sizeof a->gx))
    fail_msg("%s: not the bits of the rule's blocks", what);
}

static void test_conv_blocks(void **state) {
  (void)state;
  static const char *fwd_avx2[] = {"2x1", "1x3", "3x1"}, *dw_avx2[] = {"3x3", "2x4", "4x2"};
  static const char *fwd_avx512[] = {"4x2", "6x2", "8x1"}, *dw_avx512[] = {"4x4", "6x4", "8x2"};
  const char *isas[3];
  int nisa = tu_isas(isas);
  env_set("SC_ISA", "scalar");
  sc_chain *c = make_conv();
  crun ref;
  conv_compute(c, 1, &ref);
  sc_chain_destroy(c);
  /* the scalar kernels have one block */
  env_set("SC_CONV_DW", "3x3");
  c = NULL;
  sc_layer L1[] = {sc_conv2d(3, 3, 2, SC_RELU)};
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create_image(&c, 1, 5, 5, L1, 1));
  assert_non_null(strstr(sc_last_error(), "SC_CONV_DW='3x3'"));
  env_set("SC_CONV_DW", NULL);
  env_set("SC_CONV_FWD", "xsmm");
  SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create_image(&c, 1, 5, 5, L1, 1));
  assert_non_null(strstr(sc_last_error(), "SC_CONV_FWD=xsmm"));
  env_set("SC_CONV_FWD", NULL);
  int tested = 0;
  for (int is = 0; is < nisa; is++) {
    if (!strcmp(isas[is], "scalar")) continue;
    const char **fn = strcmp(isas[is], "avx512") ? fwd_avx2 : fwd_avx512;
    const char **dn = strcmp(isas[is], "avx512") ? dw_avx2 : dw_avx512;
    env_set("SC_ISA", isas[is]);
    c = make_conv();
    char *pl = plan_of(c);
    char want[96];
    snprintf(want, sizeof want, "forward block %s, dW block %s (rule)", fn[0], dn[0]);
    if (!strstr(pl, want)) fail_msg("%s: plan\n%s", isas[is], pl);
    free(pl);
    crun base;
    conv_compute(c, 1, &base);
    sc_chain_destroy(c);
    for (int v = 0; v < 9; v++) {
      env_set("SC_CONV_FWD", fn[v / 3]);
      env_set("SC_CONV_DW", dn[v % 3]);
      c = make_conv();
      pl = plan_of(c);
      snprintf(want, sizeof want, "forward block %s, dW block %s (forced", fn[v / 3], dn[v % 3]);
      if (!strstr(pl, want)) fail_msg("%s: plan\n%s", isas[is], pl);
      free(pl);
      crun r;
      char what[64];
      snprintf(what, sizeof what, "%s %s:%s", isas[is], fn[v / 3], dn[v % 3]);
      for (int th = 1; th <= 2; th++) {
        conv_compute(c, th, &r);
        crun_same(what, &r, &base);
        close_to("y", r.y, ref.y, CB * 4);
        close_to("g", r.g, ref.g, ref.np);
        close_to("gx", r.gx, ref.gx, CB * CC * CH * CW);
        free(r.g);
      }
      sc_chain_destroy(c);
      tested++;
    }
    /* one of the two forced: the other is the rule's (a 6-channel conv's dW rule is not block
     * 0 on AVX-512), as when neither is */
    {
      sc_layer L6[] = {sc_conv2d(3, 3, 6, SC_RELU)};
      env_set("SC_CONV_FWD", NULL);
      env_set("SC_CONV_DW", NULL);
      sc_chain *c6 = NULL;
      SC_OK_OR_FAIL(sc_chain_create_image(&c6, 1, 6, 6, L6, 1));
      char *rp = plan_of(c6), rule_dw[16] = "";
      sc_chain_destroy(c6);
      const char *rd = strstr(rp, "dW block ");
      assert_non_null(rd);
      assert_int_equal(sscanf(rd + 9, "%15[^ ]", rule_dw), 1);
      env_set("SC_CONV_FWD", fn[1]);
      SC_OK_OR_FAIL(sc_chain_create_image(&c6, 1, 6, 6, L6, 1));
      char *fp = plan_of(c6);
      sc_chain_destroy(c6);
      snprintf(want, sizeof want, "forward block %s, dW block %s (forced", fn[1], rule_dw);
      if (!strstr(fp, want))
        fail_msg("%s: SC_CONV_FWD alone, plan\n%s\nrule's\n%s", isas[is], fp, rp);
      free(fp);
      env_set("SC_CONV_FWD", NULL);
      env_set("SC_CONV_DW", dn[1]);
      SC_OK_OR_FAIL(sc_chain_create_image(&c6, 1, 6, 6, L6, 1));
      fp = plan_of(c6);
      sc_chain_destroy(c6);
      snprintf(want, sizeof want, "forward block %s, dW block %s (forced", fn[0], dn[1]);
      if (!strstr(fp, want)) fail_msg("%s: SC_CONV_DW alone, plan\n%s", isas[is], fp);
      free(fp);
      env_set("SC_CONV_DW", NULL);
      print_message("      %s: a 6-channel conv's dW rule %s kept with the forward forced\n",
                    isas[is], rule_dw);
      free(rp);
    }
    /* libxsmm's forward (im2col rows + GEMM), where the build and CPU have it: the scalar
     * reference's values, the same bits on 1 and 2 threads */
    env_set("SC_CONV_FWD", "xsmm");
    env_set("SC_CONV_DW", NULL);
    c = NULL;
    sc_status xst = sc_chain_create_image(&c, CC, CH, CW,
                                          (sc_layer[]){sc_conv2d_ex(3, 3, 7, SC_TANH, 1, 1, 1, 1),
                                                       sc_conv2d_ex(2, 3, 5, SC_RELU, 2, 2, 0, 1),
                                                       sc_flatten(), sc_dense(4, SC_IDENTITY)},
                                          4);
    if (xst == SC_ERR_UNSUPPORTED) {
      print_message("      %s: no conv xsmm here (%s)\n", isas[is], sc_last_error());
    } else {
      SC_OK_OR_FAIL(xst);
      pl = plan_of(c);
      if (!strstr(pl, "forward xsmm (im2col rows + GEMM), dW block")) fail_msg("plan\n%s", pl);
      free(pl);
      crun x1, x2;
      conv_compute(c, 1, &x1);
      conv_compute(c, 2, &x2);
      crun_same("xsmm, 1 and 2 threads", &x1, &x2);
      close_to("y", x1.y, ref.y, CB * 4);
      close_to("g", x1.g, ref.g, ref.np);
      close_to("gx", x1.gx, ref.gx, CB * CC * CH * CW);
      free(x1.g);
      free(x2.g);
      sc_chain_destroy(c);
      tested++;
    }
    /* a shape this set lacks; not a shape at all */
    env_set("SC_CONV_DW", NULL);
    env_set("SC_CONV_FWD", "5x5");
    c = NULL;
    SC_EXPECT(SC_ERR_UNSUPPORTED, sc_chain_create_image(&c, 1, 5, 5, L1, 1));
    assert_non_null(strstr(sc_last_error(), "is not a block of the"));
    env_set("SC_CONV_FWD", "4x");
    SC_EXPECT(SC_ERR_ARG, sc_chain_create_image(&c, 1, 5, 5, L1, 1));
    env_set("SC_CONV_FWD", NULL);
    /* measured, kept, read back */
    char path[512];
    tu_tmp_path(path, sizeof path, "plan", "cwisdom.txt");
    remove(path);
    env_set("SC_PLAN", "measure");
    env_set("SC_WISDOM", path);
    c = make_conv();
    pl = plan_of(c);
    if (!strstr(pl, "(measured: forward ")) fail_msg("%s: plan\n%s", isas[is], pl);
    free(pl);
    crun m1, m2;
    conv_compute(c, 1, &m1);
    conv_compute(c, 2, &m2);
    crun_same("measured, 1 and 2 threads", &m1, &m2); /* (xsmm may win: no bits of base) */
    close_to("y", m1.y, ref.y, CB * 4);
    close_to("g", m1.g, ref.g, ref.np);
    free(m1.g);
    free(m2.g);
    sc_chain_destroy(c);
    size_t len;
    unsigned char *w = tu_read_all(path, &len);
    int nconv = 0;
    for (const char *q = (const char *)w; (q = strstr(q, "\nconv cpu=")); q++) nconv++;
    assert_int_equal(nconv, 2);
    free(w);
    c = make_conv();
    pl = plan_of(c);
    if (strstr(pl, "(measured: forward ") || !strstr(pl, "(wisdom: forward "))
      fail_msg("%s: plan\n%s", isas[is], pl);
    free(pl);
    sc_chain_destroy(c);
    /* a conv entry with a malformed pick: the file is ignored */
    const unsigned char junk[] = "# simplechain wisdom 1\nconv cpu=x isa=avx2 shape=1 pick=2x1 "
                                 "fwd_ns=1,2,3 dw_ns=1,2,3\n";
    tu_write_all(path, junk, sizeof junk - 1);
    c = make_conv();
    pl = plan_of(c);
    if (!strstr(pl, "(measured: forward ") || !strstr(pl, "line 2 is not a wisdom entry"))
      fail_msg("%s: plan\n%s", isas[is], pl);
    free(pl);
    sc_chain_destroy(c);
    remove(path);
    env_set("SC_PLAN", NULL);
    env_set("SC_WISDOM", NULL);
    free(base.g);
  }
  free(ref.g);
  print_message("      %d forced conv variant(s) checked (block pairs: the rule's bits)\n", tested);
  env_set("SC_ISA", NULL);
}

/* SC_DENSE_DW=lane|dot on every kernel set (scalar included): the scalar lane form's values
 * (float and double), the same bits on 1 and 2 threads, the plan says so; bad values */
static void test_dense_dw_forms(void **state) {
  (void)state;
  const char *isas[3];
  int nisa = tu_isas(isas);
  env_set("SC_ISA", "scalar");
  sc_chain *c = make();
  run ref;
  compute(c, 1, &ref);
  size_t np;
  sc_chain_nparams(c, &np);
  double *pd = malloc(np * sizeof *pd), *gd_ref = malloc(np * sizeof *gd_ref),
         *gd = malloc(np * sizeof *gd), xd[B * NI], td[B * NO], ld_ref, ld;
  SC_OK_OR_FAIL(sc_params_init_f64(c, pd, np, 5));
  tu_fill_f64(xd, B * NI, 1, 1.0);
  tu_fill_f64(td, B * NO, 2, 1.0);
  sc_workspace *ws = NULL;
  SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, pd, xd, td, B, &ld_ref, gd_ref, NULL, ws));
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  int tested = 0;
  for (int is = 0; is < nisa; is++)
    for (int v = 0; v < 2; v++) {
      env_set("SC_ISA", isas[is]);
      env_set("SC_DENSE_DW", v ? "dot" : "lane");
      c = make();
      char *pl = plan_of(c);
      char want[64];
      snprintf(want, sizeof want, "; dW %s (forced by SC_DENSE_DW)", v ? "dot" : "lane");
      if (!strstr(pl, want) || strstr(pl, "70 -> 40 relu: fused (rule); dW"))
        fail_msg("%s: plan\n%s", isas[is], pl);
      free(pl);
      run r1, r2;
      compute(c, 1, &r1);
      compute(c, 2, &r2);
      assert_memory_equal(&r1, &r2, sizeof r1);
      close_to("y", r1.y, ref.y, B * NO);
      close_to("g", r1.g, ref.g, sizeof r1.g / sizeof r1.g[0]);
      ws = NULL;
      SC_OK_OR_FAIL(sc_workspace_create(&ws, c, B));
      SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, pd, xd, td, B, &ld, gd, NULL, ws));
      sc_workspace_destroy(ws);
      for (size_t k = 0; k < np; k++)
        if (!(fabs(gd[k] - gd_ref[k]) <= 1e-12 * (1 + fabs(gd_ref[k]))))
          fail_msg("%s %s: double g[%zu] = %.17g, scalar lane form %.17g", isas[is],
                   v ? "dot" : "lane", k, gd[k], gd_ref[k]);
      sc_chain_destroy(c);
      tested++;
    }
  print_message("      %d forced dW form(s) agree with the scalar reference\n", tested);
  env_set("SC_ISA", NULL);
  env_set("SC_DENSE_DW", "gemm");
  c = NULL;
  sc_layer L[] = {sc_dense(4, SC_RELU)};
  SC_EXPECT(SC_ERR_ARG, sc_chain_create(&c, 3, L, 1));
  assert_non_null(strstr(sc_last_error(), "SC_DENSE_DW='gemm'"));
  env_set("SC_DENSE_DW", NULL);
  free(pd), free(gd_ref), free(gd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dense_dw_forms),  cmocka_unit_test(test_conv_blocks),
      cmocka_unit_test(test_forced_variants), cmocka_unit_test(test_measure_and_wisdom),
      cmocka_unit_test(test_tanh_fast),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
