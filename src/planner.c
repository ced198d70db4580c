/* src/planner.c — the variant planner: which variant of a layer's kernels a chain runs (by rule,
 * by measurement, from a wisdom file, or forced), and sc_chain_plan, which says so. */
#include "internal.h"

/* ---------------------------------------------------------------- variants (the planner) */
/* The dense layers' float forward comes in two variants on the SIMD kernel sets: "fused"
 * (our register-blocked GEMM with bias and activation in the same pass) and "xsmm"
 * (libxsmm's JIT GEMM, then a bias/activation pass), when make finds libxsmm-dev
 * (SC_HAVE_XSMM). Which one a layer runs is decided once, at chain creation:
 *   - by rule (default, SC_PLAN=rules): xsmm on the AVX-512 kernel set for dense layers with
 *     at least SC__XSMM_MIN_IN inputs, where it measured faster (bench/xsmm_dense.c, make
 *     bench-xsmm, Zen 5: faster by 3-7 % from 84 inputs up, slower by 2-34 % at 32 inputs and
 *     below); fused everywhere else;
 *   - by measurement (SC_PLAN=measure): both variants time a forward of one slice-sized
 *     batch on this machine, the faster wins. With SC_WISDOM=path the answers are kept in a
 *     text file keyed by CPU model, kernel set and layer shape, read back on the next
 *     creation instead of timing again (a file that is not a wisdom file is ignored, left
 *     alone, and said so in sc_chain_plan);
 *   - by force (SC_DENSE_FWD=fused|xsmm), for tests and experiments.
 * The float tanh of a dense layer on the vector kernel sets has four variants: "div"
 * (tanh's final quotient E / (E + 2) as a divide) and "rcp" (a reciprocal estimate r, on
 * AVX2 refined by one Newton step, then y0 = E r, y = y0 + r (E - (E + 2) y0): no divide
 * instruction, a longer dependency chain; at most 1.5 ULP like div, test_math), and the
 * rational form (v_tanh_rat: 12 operations instead of 28, at most 6 ULP) with either
 * quotient, "rat" and "ratrcp". The rational ones are less accurate than SLEEF's tanhf u35,
 * so they are opt-in: SC_TANH_VARIANT=fast lets the planner choose among all four, otherwise
 * it chooses between div and rcp. Chosen the same three ways: by rule (div; rat with fast:
 * see SC__TANH_RULE), by measurement (SC_PLAN=measure, the same one-layer timing, kept in the
 * wisdom file with the four timings, 0 for those not timed), or by force (SC_TANH_VARIANT=
 * div|rcp|rat|ratrcp). The scalar kernels and conv layers have the divide form only.
 * Conv layers on the vector float kernel sets have SC__CONV_NV register-block shapes for the
 * forward and for dW (the kernel table names them; all give the same bits): by rule the first
 * of each (measured best on LeNet5), by SC_PLAN=measure the fastest forward (sc_forward on a
 * one-layer twin), then the fastest dW with it (sc_valgrad), kept as "conv" wisdom entries;
 * forced by SC_CONV_FWD / SC_CONV_DW (the other keeps the rule's). With libxsmm the forward
 * has "xsmm" too (im2col rows + sc__xsmm_conv_kernel's GEMM, P->xconv): measured against the
 * fastest block, forced by SC_CONV_FWD=xsmm, never by rule (bench/xsmm_conv.c and the LeNet5
 * profile on the AVX2 host: slower on conv1, within noise to slower on conv2).
 * Dense layers with lane accumulators for dW (dwl_off) have the dot form as a variant
 * (P->dw_dot: transpose + SC__K_DW, as the larger layers): rule lane, SC_PLAN=measure times
 * sc_valgrad of a one-layer twin with each ("dense_dw" wisdom entries), SC_DENSE_DW forces;
 * every kernel set, float and double, runs both.
 * The choice belongs to the chain, so results never depend on the thread count; the
 * variants may differ from each other in the last bits. SC_XSMM=0 keeps libxsmm out. */
#define SC__XSMM_MIN_IN 64
enum { SC__HOW_ONLY = 0, SC__HOW_RULE, SC__HOW_MEASURED, SC__HOW_WISDOM, SC__HOW_FORCED };
static SC__TLS int sc__planning; /* set while timing candidates: their chains plan nothing */

#if defined(SC_HAVE_XSMM) && defined(SC_HAVE_KERNELS)
#include <libxsmm.h>
#define SC__XSMM 1
/* libxsmm's GEMM for layer P, or NULL (no JIT for it) */
static sc__xsmm_fn sc__xsmm_kernel(const sc__lplan *P) {
  /* row-major a (out x TW) = W (out x in) x (in x TW) is the column-major
   * a^T (TW x out) = x^T (TW x in) W^T (in x out): m = TW, n = out, k = in */
  libxsmm_blasint m = SC__TW, n = (libxsmm_blasint)P->out, k = (libxsmm_blasint)P->in;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &m, &alpha, &beta, &flags, NULL);
}
/* libxsmm's GEMM for one output row of conv layer P (every channel), or NULL: row-major
 * a[k][(v,t)] = sum_r W[k][r] col[r][(v,t)] is the column-major a^T ((v,t) x k) = col^T W^T:
 * m = ow TW, n = oc, k = R, lda = m, ldb = R, ldc = oh ow TW (one channel's rows) */
static sc__xsmm_fn sc__xsmm_conv_kernel(const sc__lplan *P) {
  size_t m_ = P->ow * SC__TW, ldc_ = P->oh * P->ow * SC__TW;
  if (m_ > INT_MAX || ldc_ > INT_MAX || P->oc > INT_MAX || P->R > INT_MAX) return NULL;
  libxsmm_blasint m = (libxsmm_blasint)m_, n = (libxsmm_blasint)P->oc, k = (libxsmm_blasint)P->R,
                  ldc = (libxsmm_blasint)ldc_;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &ldc, &alpha, &beta, &flags, NULL);
}
#else
#define SC__XSMM 0
#endif

/* The CPU's brand string (x86 CPUID), spaces as '_', for wisdom keys */
static void sc__cpu_model(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned r[12];
  for (unsigned i = 0; i < 3; i++) sc__cpuid(0x80000002u + i, 0, r + 4 * i);
  char s[49];
  memcpy(s, r, 48);
  s[48] = 0;
  size_t k = 0;
  const char *q = s;
  while (*q == ' ') q++;
  for (; *q && k + 1 < cap; q++) buf[k++] = (*q == ' ' || *q == '=' || *q == '\n') ? '_' : *q;
  while (k > 0 && buf[k - 1] == '_') k--;
  if (k) buf[k] = 0;
#endif
}

/* the index of the first n characters of s in names (NULL-terminated), or -1 */
static int sc__name_index(const char *const *names, const char *s, size_t n) {
  for (int i = 0; names && names[i]; i++)
    if (strlen(names[i]) == n && !strncmp(names[i], s, n)) return i;
  return -1;
}
/* the tanh variants' names, by SC__TANH_* */
static const char *const sc__tanh_names[] = {"div", "rcp", "rat", "ratrcp", NULL};

/* one wisdom entry */
enum { SC__WIS_DENSE = 0, SC__WIS_TANH, SC__WIS_CONV, SC__WIS_DW };
typedef struct sc__wis {
  int tanh; /* SC__WIS_DENSE: a dense_fwd entry (fused / xsmm), SC__WIS_TANH: a tanh entry
               (div / rcp / rat / ratrcp), SC__WIS_CONV: a conv entry (forward block : dW block),
               SC__WIS_DW: a dense_dw entry (lane / dot) */
  char cpu[64], isa[16], act[16], pick[16];
  char shape[64]; /* conv: the layer's key (sc__conv_key) */
  size_t in, out;
  int bias;
  double ns_a, ns_b;                /* fused and xsmm, or lane and dot */
  double ns_c[2 * SC__CONV_NV + 1]; /* conv: the forward blocks' times, the dW blocks', then
                                       libxsmm's forward; tanh: the variants' (0: not timed) */
} sc__wis;

/* a conv layer's wisdom key: input shape, channels, kernel, stride, padding, activation, bias */
static void sc__conv_key(char *b, size_t cap, const sc__lplan *P) {
  snprintf(b, cap, "%zux%zux%zu>%zu:k%zux%zu:s%zux%zu:p%zux%zu:%s:b%d", P->ic, P->ih, P->iw, P->oc,
           P->spec.kh, P->spec.kw, P->spec.sh, P->spec.sw, P->spec.ph, P->spec.pw,
           sc_act_name(P->spec.act), P->spec.bias);
}

#define SC__WIS_MAX 4096
/* Reads the wisdom file: entries into *w (malloc'ed), their count into *nw. A missing file is
 * no entries; anything else that is not a wisdom file leaves a note and returns -1. */
static int sc__wis_read(const char *path, sc__wis **w, size_t *nw, char *note, size_t cap) {
  *w = NULL, *nw = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  size_t ln = 0, capw = 0;
  int bad = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    if (!strchr(line, '\n') && !feof(f)) {
      bad = 1;
      break;
    }
    if (ln == 1) {
      if (strcmp(line, "# simplechain wisdom 1\n") != 0) {
        bad = 1;
        break;
      }
      continue;
    }
    sc__wis e;
    memset(&e, 0, sizeof e);
    int used = 0, fields, want;
    e.tanh = !strncmp(line, "tanh ", 5)       ? SC__WIS_TANH
             : !strncmp(line, "conv ", 5)     ? SC__WIS_CONV
             : !strncmp(line, "dense_dw ", 9) ? SC__WIS_DW
                                              : SC__WIS_DENSE;
    want = e.tanh == SC__WIS_TANH ? 8 : e.tanh == SC__WIS_CONV ? 11 : 9; /* each kind's fields */
    char *colon = NULL;
    if (e.tanh == SC__WIS_CONV) {
      fields = sscanf(line,
                      "conv cpu=%63s isa=%15s shape=%63s pick=%15s fwd_ns=%lf,%lf,%lf "
                      "xsmm_ns=%lf dw_ns=%lf,%lf,%lf%n",
                      e.cpu, e.isa, e.shape, e.pick, &e.ns_c[0], &e.ns_c[1], &e.ns_c[2], &e.ns_c[6],
                      &e.ns_c[3], &e.ns_c[4], &e.ns_c[5], &used);
      colon = strchr(e.pick, ':');
    } else if (e.tanh == SC__WIS_DW) {
      fields = sscanf(line,
                      "dense_dw cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "lane_ns=%lf dot_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    } else if (e.tanh == SC__WIS_TANH) { /* (the rat timings are newer: optional) */
      fields = sscanf(line,
                      "tanh cpu=%63s isa=%15s in=%zu out=%zu bias=%d pick=%7s div_ns=%lf "
                      "rcp_ns=%lf%n rat_ns=%lf ratrcp_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, &e.bias, e.pick, &e.ns_c[0], &e.ns_c[1], &used,
                      &e.ns_c[2], &e.ns_c[3], &used);
      if (fields == 10) fields = 8;
    } else
      fields = sscanf(line,
                      "dense_fwd cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "fused_ns=%lf xsmm_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    if (fields != want || (line[used] != '\n' && line[used] != 0) ||
        (e.tanh == SC__WIS_CONV   ? !colon || colon == e.pick || !colon[1]
         : e.tanh == SC__WIS_TANH ? sc__name_index(sc__tanh_names, e.pick, strlen(e.pick)) < 0
         : e.tanh == SC__WIS_DW   ? strcmp(e.pick, "lane") && strcmp(e.pick, "dot")
                                  : strcmp(e.pick, "fused") && strcmp(e.pick, "xsmm")) ||
        *nw >= SC__WIS_MAX) {
      bad = 1;
      break;
    }
    if (*nw == capw) {
      size_t nc = capw ? 2 * capw : 16;
      sc__wis *nwp = realloc(*w, nc * sizeof **w);
      if (!nwp) {
        bad = 1;
        break;
      }
      *w = nwp, capw = nc;
    }
    (*w)[(*nw)++] = e;
  }
  int err = ferror(f);
  fclose(f);
  if (bad || err || ln == 0) {
    free(*w);
    *w = NULL, *nw = 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: line %zu is not a wisdom entry", path,
             ln ? ln : 1);
    return -1;
  }
  return 0;
}

static sc_status sc__wis_write(const char *fn, const char *path, const sc__wis *w, size_t nw) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile wf;
  sc_status st = sc__wopen(&wf, path, tmp, fn);
  if (!st) {
    char line[512];
    int k = snprintf(line, sizeof line, "# simplechain wisdom 1\n");
    sc__wwrite(&wf, line, (size_t)k);
    for (size_t i = 0; i < nw; i++) {
      if (w[i].tanh == SC__WIS_CONV)
        k = snprintf(line, sizeof line,
                     "conv cpu=%s isa=%s shape=%s pick=%s fwd_ns=%.1f,%.1f,%.1f "
                     "xsmm_ns=%.1f dw_ns=%.1f,%.1f,%.1f\n",
                     w[i].cpu, w[i].isa, w[i].shape, w[i].pick, w[i].ns_c[0], w[i].ns_c[1],
                     w[i].ns_c[2], w[i].ns_c[6], w[i].ns_c[3], w[i].ns_c[4], w[i].ns_c[5]);
      else if (w[i].tanh == SC__WIS_DW)
        k = snprintf(line, sizeof line,
                     "dense_dw cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "lane_ns=%.1f dot_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      else if (w[i].tanh)
        k = snprintf(line, sizeof line,
                     "tanh cpu=%s isa=%s in=%zu out=%zu bias=%d pick=%s div_ns=%.1f rcp_ns=%.1f "
                     "rat_ns=%.1f ratrcp_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].bias, w[i].pick, w[i].ns_c[0],
                     w[i].ns_c[1], w[i].ns_c[2], w[i].ns_c[3]);
      else
        k = snprintf(line, sizeof line,
                     "dense_fwd cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "fused_ns=%.1f xsmm_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      if (k > 0) sc__wwrite(&wf, line, (size_t)k);
    }
    st = sc__wcommit(&wf, path, fn);
  }
  free(tmp);
  return st;
}

/* ns per forward (grad: per sc_valgrad, squared loss) of a slice-sized batch through a
 * one-layer twin of P, with the variants of P except for: the xsmm GEMM xs or (NULL) our
 * fused kernel, the tanh variant tv, the conv blocks cf and cd; the median of 5 rounds */
static double sc__time_layer(const sc_chain *c, const sc__lplan *P, sc__xsmm_fn xs, int tv, int dot,
                             int cf, int cd, int grad) {
  sc_chain *t = NULL;
  sc_workspace *ws = NULL;
  float *p = NULL, *x = NULL, *y = NULL, *g = NULL;
  double best = 0;
  size_t batch = SC__TW * (c->min_tiles ? c->min_tiles : 1);
  int conv = P->spec.kind == SC_LAYER_CONV2D;
  sc__planning = 1;
  sc_status st = sc__chain_create("sc_chain_create", &t, conv ? P->ic : P->in, conv ? P->ih : 1,
                                  conv ? P->iw : 1, &P->spec, 1);
  sc__planning = 0;
  if (st) return 0;
  t->kf = c->kf, t->kd = c->kd;
  if (conv)
    t->L[0].xconv = xs;
  else
    t->L[0].xfwd = xs;
  t->L[0].tanh_var = (unsigned char)tv;
  t->L[0].dw_dot = (unsigned char)dot;
  t->L[0].conv_fwd = (unsigned char)cf, t->L[0].conv_dw = (unsigned char)cd;
  size_t np = t->nparams;
  p = malloc(np * sizeof *p);
  g = malloc(np * sizeof *g);
  x = malloc(batch * P->in * sizeof *x);
  y = calloc(batch * P->out, sizeof *y);
  if (p && g && x && y && sc_workspace_create(&ws, t, batch) == SC_OK) {
    for (size_t k = 0; k < np; k++) p[k] = (float)((k * 37) % 19) / 19.0f - 0.5f;
    for (size_t k = 0; k < batch * P->in; k++) x[k] = (float)((k * 11) % 23) / 23.0f - 0.5f;
    double r[5] = {0, 0, 0, 0, 0};
    double work = (double)(conv ? P->R : P->in) * (double)P->out * (double)batch * (grad ? 2 : 1);
    int reps = (int)(2e6 / (work + 1e4)) + 1;
    if (reps > 200) reps = 200;
    float loss;
    for (int round = -1; round < 5; round++) { /* round -1 warms up */
      uint64_t t0 = sc__ns();
      for (int k = 0; k < (round < 0 ? 1 : reps); k++)
        if (grad) /* y (zeros) is the target */
          sc_valgrad(t, SC_LOSS_SQUARED, p, x, y, batch, &loss, g, NULL, ws);
        else
          sc_forward(t, p, x, batch, y, ws);
      if (round >= 0) r[round] = (double)(sc__ns() - t0) / reps;
    }
    for (int i = 1; i < 5; i++) /* insertion sort, 5 values */
      for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
        double q = r[j];
        r[j] = r[j - 1], r[j - 1] = q;
      }
    best = r[2];
  }
  sc_workspace_destroy(ws);
  free(p);
  free(g);
  free(x);
  free(y);
  sc_chain_destroy(t);
  return best;
}

/* The rule for the tanh variant where nothing is measured or forced: div. Measured on an
 * AVX2 EPYC (Zen 4 under KVM, make bench-tanh and SC_PLAN=measure on the toy's layers;
 * bench/RESULTS.md) div was faster than rcp; on Zen 5 (AVX-512) too, by an earlier
 * measurement. With SC_TANH_VARIANT=fast (the rational forms allowed): rat, 1.8x faster than
 * div on the AVX2 EPYC (make bench-tanh), ratrcp slower there. The Intel hosts are not
 * measured yet: SC_PLAN=measure decides there. */
#define SC__TANH_RULE SC__TANH_DIV
#define SC__TANH_RULE_FAST SC__TANH_RAT

/* the wisdom entry for layer P (tanh: the tanh variant's, else the dense forward's) */
static size_t sc__wis_find(const sc__wis *w, size_t nw, const sc__lplan *P, int tanh,
                           const char *cpu, const char *isa) {
  const char *act = sc_act_name(P->spec.act);
  for (size_t i = 0; i < nw; i++)
    if (w[i].tanh == tanh && w[i].in == P->in && w[i].out == P->out && w[i].bias == P->spec.bias &&
        (tanh == SC__WIS_TANH || !strcmp(w[i].act, act)) && !strcmp(w[i].isa, isa) &&
        !strcmp(w[i].cpu, cpu))
      return i;
  return nw;
}

/* appends a measured entry; returns it, or NULL (full, or out of memory) */
static sc__wis *sc__wis_add(sc__wis **w, size_t *nw, const sc__lplan *P, int tanh, const char *cpu,
                            const char *isa, const char *pick, double a, double b) {
  if (*nw >= SC__WIS_MAX) return NULL;
  sc__wis *nwp = realloc(*w, (*nw + 1) * sizeof **w);
  if (!nwp) return NULL;
  *w = nwp;
  sc__wis *e = &nwp[(*nw)++];
  memset(e, 0, sizeof *e);
  e->tanh = tanh;
  snprintf(e->cpu, sizeof e->cpu, "%s", cpu);
  snprintf(e->isa, sizeof e->isa, "%s", isa);
  snprintf(e->act, sizeof e->act, "%s", sc_act_name(P->spec.act));
  snprintf(e->pick, sizeof e->pick, "%s", pick);
  e->in = P->in, e->out = P->out, e->bias = P->spec.bias;
  e->ns_a = a, e->ns_b = b;
  return e;
}

/* the wisdom and machine a plan is measured against */
typedef struct sc__wis_ctx {
  sc__wis *w;
  size_t n;
  int ok, added; /* the file was read (so it is written back), an entry was added or completed */
  const char *cpu, *isa;
} sc__wis_ctx;

/* The dW form of dense layer P (SC__WIS_DW), *pick = 0 lane or 1 dot, timed with sc_valgrad:
 * forced (want >= 0), by rule (lane), read from the wisdom, or measured and added to it; *how
 * says which, *ns0 / *ns1 the timings where there are some. */
static void sc__pick_dw(const sc_chain *c, const sc__lplan *P, int want, int measure,
                        sc__wis_ctx *T, unsigned char *pick, unsigned char *how, float *ns0,
                        float *ns1) {
  if (want >= 0) {
    *how = SC__HOW_FORCED, *pick = (unsigned char)want;
  } else if (!measure) {
    *how = SC__HOW_RULE, *pick = 0;
  } else {
    size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_DW, T->cpu, T->isa);
    if (hit < T->n) {
      *how = SC__HOW_WISDOM;
      *ns0 = (float)T->w[hit].ns_a, *ns1 = (float)T->w[hit].ns_b;
      *pick = strcmp(T->w[hit].pick, "dot") == 0;
      return;
    }
    double t0 = sc__time_layer(c, P, NULL, 0, 0, 0, 0, 1),
           t1 = sc__time_layer(c, P, NULL, 0, 1, 0, 0, 1);
    *how = SC__HOW_MEASURED;
    *ns0 = (float)t0, *ns1 = (float)t1;
    *pick = t0 > 0 && t1 > 0 && t1 < t0;
    if (T->ok)
      T->added |= !!sc__wis_add(&T->w, &T->n, P, SC__WIS_DW, T->cpu, T->isa, *pick ? "dot" : "lane",
                                t0, t1);
  }
}

/* The tanh variant of dense tanh layer P on a vector kernel set (P->tanh_var, P->tanh_how,
 * P->ns_tanh): forced (want >= 0), by rule, or the fastest of the candidates (div and rcp; with
 * fast, rat and ratrcp too) by the wisdom's timings, measured where it has none (each timed with
 * sc_forward; the entry is added, or completed in place). */
static void sc__pick_tanh(const sc_chain *c, sc__lplan *P, int want, int fast, int measure,
                          sc__wis_ctx *T) {
  int nc = fast ? SC__TANH_NV : 2; /* the candidates: variants 0 .. nc - 1 */
  if (want >= 0) {
    P->tanh_how = SC__HOW_FORCED, P->tanh_var = (unsigned char)want;
    return;
  }
  if (!measure) {
    P->tanh_how = SC__HOW_RULE, P->tanh_var = fast ? SC__TANH_RULE_FAST : SC__TANH_RULE;
    return;
  }
  size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_TANH, T->cpu, T->isa);
  int timed = 0, best = 0;
  P->tanh_how = hit < T->n ? SC__HOW_WISDOM : SC__HOW_MEASURED;
  for (int v = 0; v < SC__TANH_NV; v++) {
    double t = hit < T->n ? T->w[hit].ns_c[v] : 0;
    if (t <= 0 && v < nc) { /* not in the wisdom (an entry from before rat, or none) */
      t = sc__time_layer(c, P, NULL, v, 0, 0, 0, 0);
      P->tanh_how = SC__HOW_MEASURED, timed = 1;
      if (hit < T->n) T->w[hit].ns_c[v] = t;
    }
    P->ns_tanh[v] = (float)t;
    if (v < nc && t > 0 && (P->ns_tanh[best] <= 0 || t < P->ns_tanh[best])) best = v;
  }
  P->tanh_var = (unsigned char)best;
  if (!timed || !T->ok) return;
  sc__wis *e = hit < T->n ? &T->w[hit]
                          : sc__wis_add(&T->w, &T->n, P, SC__WIS_TANH, T->cpu, T->isa,
                                        sc__tanh_names[best], 0, 0);
  if (!e) return;
  /* (the pick written is the fastest of all the timed variants) */
  int all = 0;
  for (int v = 0; v < SC__TANH_NV; v++) {
    e->ns_c[v] = P->ns_tanh[v];
    if (e->ns_c[v] > 0 && (e->ns_c[all] <= 0 || e->ns_c[v] < e->ns_c[all])) all = v;
  }
  snprintf(e->pick, sizeof e->pick, "%s", sc__tanh_names[all]);
  T->added = 1;
}

/* a forced conv block (SC_CONV_FWD / SC_CONV_DW = value v): its index into names, or -1 when
 * v is unset; an error when v is not a block shape (SC_ERR_ARG) or not one of this kernel
 * set's (SC_ERR_UNSUPPORTED) */
static sc_status sc__conv_force(const char *fn, const char *var, const char *v,
                                const sc__kt_f32 *kf, const char *const *names, int *idx) {
  *idx = -1;
  if (!v || !*v) return SC_OK;
  if (!strcmp(var, "SC_CONV_FWD") && !strcmp(v, "xsmm")) { /* checked per layer */
    *idx = SC__CONV_NV;
    return SC_OK;
  }
  size_t a = strspn(v, "0123456789"), b = a < strlen(v) ? strspn(v + a + 1, "0123456789") : 0;
  if (a == 0 || v[a] != 'x' || b == 0 || v[a + 1 + b])
    return sc__fail(SC_ERR_ARG, fn, "%s='%s' is not a block shape such as 4x2", var, v);
  if (!names)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s', but the %s kernels have one conv block", var,
                    v, kf->name);
  *idx = sc__name_index(names, v, strlen(v));
  if (*idx < 0)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s' is not a block of the %s kernels (%s, %s, %s)",
                    var, v, kf->name, names[0], names[1], names[2]);
  return SC_OK;
}

/* the rule's conv dW block: the kernel set's 6-row one for channels a multiple of 6 but not
 * of 4, else the first */
static int sc__conv_dw_rule(const sc__kt_f32 *kf, const sc__lplan *P) {
  return P->oc % 6 == 0 && P->oc % 4 != 0 ? kf->conv_dw_k6 : 0;
}

/* Chooses every dense layer's forward variant and tanh variant, and every conv layer's
 * register blocks (see above). */
SC__INT sc_status sc__variant_plan(const char *fn, sc_chain *c) {
  c->plan_note[0] = 0;
  c->pool_fuse = 1;
  if (sc__planning) return SC_OK;
  const char *pf = getenv("SC_POOL_FUSE"); /* "0": the pool's and the conv's own passes */
  if (pf && *pf && strcmp(pf, "0") != 0 && strcmp(pf, "1") != 0)
    return sc__fail(SC_ERR_ARG, fn, "SC_POOL_FUSE='%s' is not '0' or '1'", pf);
  c->pool_fuse = !(pf && strcmp(pf, "0") == 0);
  const char *mode = getenv("SC_PLAN"), *force = getenv("SC_DENSE_FWD"), *off = getenv("SC_XSMM");
  const char *tforce = getenv("SC_TANH_VARIANT"), *dforce = getenv("SC_DENSE_DW");
  int measure = 0;
  if (mode && *mode && strcmp(mode, "rules") != 0) {
    if (strcmp(mode, "measure") != 0)
      return sc__fail(SC_ERR_ARG, fn, "SC_PLAN='%s' is not one of rules, measure", mode);
    measure = 1;
  }
  int want_x = -1; /* forced: 0 fused, 1 xsmm */
  if (force && *force) {
    if (strcmp(force, "fused") && strcmp(force, "xsmm"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_FWD='%s' is not one of fused, xsmm", force);
    want_x = strcmp(force, "xsmm") == 0;
  }
  int want_d = -1; /* forced: 0 lane, 1 dot */
  if (dforce && *dforce) {
    if (strcmp(dforce, "lane") && strcmp(dforce, "dot"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_DW='%s' is not one of lane, dot", dforce);
    want_d = strcmp(dforce, "dot") == 0;
  }
  int want_r = -1, fast = 0; /* forced: SC__TANH_*; fast: the rational forms allowed */
  if (tforce && *tforce) {
    fast = !strcmp(tforce, "fast");
    want_r = fast ? -1 : sc__name_index(sc__tanh_names, tforce, strlen(tforce));
    if (!fast && want_r < 0)
      return sc__fail(SC_ERR_ARG, fn,
                      "SC_TANH_VARIANT='%s' is not one of div, rcp, rat, ratrcp, fast", tforce);
  }
  int simd = c->kf != &sc__kt_ref_f32; /* the scalar kernels have no xsmm path, no rcp */
  const char *const *cfn = c->kf->conv_fwd_names, *const *cdn = c->kf->conv_dw_names;
  int want_cf, want_cd; /* forced conv blocks, or -1 */
  sc_status cst = sc__conv_force(fn, "SC_CONV_FWD", getenv("SC_CONV_FWD"), c->kf, cfn, &want_cf);
  if (!cst) cst = sc__conv_force(fn, "SC_CONV_DW", getenv("SC_CONV_DW"), c->kf, cdn, &want_cd);
  if (cst) return cst;
  if (want_r > 0 && !simd)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_TANH_VARIANT=%s, but the scalar kernels have the divide form only", tforce);
  int xok = 0;
#if SC__XSMM
  if (simd && !(off && strcmp(off, "0") == 0)) {
    int arch = libxsmm_get_target_archid(); /* (libxsmm initializes itself once) */
    xok = c->kf == &sc__kt_f32_avx512 ? arch >= LIBXSMM_X86_AVX512 : arch >= LIBXSMM_X86_AVX2;
  }
#else
  (void)off;
#endif
  const char *xwhy = !SC__XSMM                        ? "this build has no libxsmm" /* (no xok) */
                     : !simd                          ? "the scalar kernels have no xsmm path"
                     : (off && strcmp(off, "0") == 0) ? "SC_XSMM=0"
                                                      : "libxsmm does not support this CPU";
  if (want_x == 1 && !xok)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_DENSE_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  sc__wis_ctx T = {NULL, 0, 0, 0, NULL, NULL};
  const char *wpath = getenv("SC_WISDOM");
  char cpu[64] = "";
  int any_tanh = 0, any_conv = 0, any_lane = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    any_lane |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].dwl_off != SIZE_MAX;
    any_tanh |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].spec.act == SC_TANH;
    any_conv |= c->L[l].spec.kind == SC_LAYER_CONV2D;
  }
  if (any_conv && want_cf == SC__CONV_NV && !(cfn && cdn && xok))
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_CONV_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  int conv_measure = cfn && cdn && any_conv && want_cf < 0 && want_cd < 0;
  if (measure &&
      ((xok && want_x < 0) || (simd && any_tanh && want_r < 0) || conv_measure ||
       (any_lane && want_d < 0)) &&
      wpath && *wpath) {
    T.ok = sc__wis_read(wpath, &T.w, &T.n, c->plan_note, sizeof c->plan_note) == 0;
  }
  if (measure) sc__cpu_model(cpu, sizeof cpu);
  const char *isa = c->kf->name;
  T.cpu = cpu, T.isa = isa;
  sc_status st = SC_OK;
  for (size_t l = 0; l < c->nlayers && !st; l++) {
    sc__lplan *P = &c->L[l];
    P->xfwd = NULL, P->how = SC__HOW_ONLY, P->ns_fused = P->ns_xsmm = 0;
    P->tanh_var = 0, P->tanh_how = SC__HOW_ONLY;
    memset(P->ns_tanh, 0, sizeof P->ns_tanh);
    P->conv_fwd = P->conv_dw = 0, P->conv_how = SC__HOW_ONLY;
    memset(P->ns_cfwd, 0, sizeof P->ns_cfwd);
    memset(P->ns_cdw, 0, sizeof P->ns_cdw);
    P->xconv = NULL, P->ns_cx = 0;
    P->dw_dot = 0, P->dw_how = SC__HOW_ONLY, P->ns_lane = P->ns_dot = 0;
    if (P->spec.kind == SC_LAYER_CONV2D && cfn && cdn) {
      sc__xsmm_fn xc = NULL; /* libxsmm's row GEMM for this layer, where it can be had */
#if SC__XSMM
      if (xok && P->col_off != SIZE_MAX) xc = sc__xsmm_conv_kernel(P);
#endif
      if (want_cf >= 0 || want_cd >= 0) { /* forced; the other block takes the rule's */
        P->conv_how = SC__HOW_FORCED;
        if (want_cf == SC__CONV_NV) {
          if (!xc) {
            st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                          "SC_CONV_FWD=xsmm: libxsmm has no kernel for layer %zu", l);
            continue;
          }
          P->xconv = xc;
        }
        P->conv_fwd = (unsigned char)(want_cf > 0 && want_cf < SC__CONV_NV ? want_cf : 0);
        /* the dW block not forced: the rule's, not block 0 */
        P->conv_dw = (unsigned char)(want_cd >= 0 ? want_cd : sc__conv_dw_rule(c->kf, P));
        continue;
      }
      P->conv_how = SC__HOW_RULE;
      P->conv_dw = (unsigned char)sc__conv_dw_rule(c->kf, P);
      if (!measure) continue;
      char key[64];
      sc__conv_key(key, sizeof key, P);
      size_t hit = T.n;
      for (size_t i = 0; i < T.n && hit == T.n; i++)
        if (T.w[i].tanh == SC__WIS_CONV && !strcmp(T.w[i].shape, key) && !strcmp(T.w[i].isa, isa) &&
            !strcmp(T.w[i].cpu, cpu))
          hit = i;
      if (hit < T.n) {
        const char *pk = T.w[hit].pick, *colon = strchr(pk, ':');
        int fx = (size_t)(colon - pk) == 4 && !strncmp(pk, "xsmm", 4);
        int f = fx ? 0 : sc__name_index(cfn, pk, (size_t)(colon - pk));
        int d = sc__name_index(cdn, colon + 1, strlen(colon + 1));
        if (f >= 0 && d >= 0 && (!fx || xc)) { /* (else measured anew) */
          P->conv_how = SC__HOW_WISDOM;
          P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
          P->xconv = fx ? xc : NULL;
          P->ns_cx = (float)T.w[hit].ns_c[2 * SC__CONV_NV];
          for (int i = 0; i < SC__CONV_NV; i++)
            P->ns_cfwd[i] = (float)T.w[hit].ns_c[i],
            P->ns_cdw[i] = (float)T.w[hit].ns_c[SC__CONV_NV + i];
          continue;
        }
      }
      int f = 0, d = 0;
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cfwd[i] = (float)sc__time_layer(c, P, NULL, 0, 0, i, 0, 0);
        if (P->ns_cfwd[i] > 0 && (P->ns_cfwd[f] <= 0 || P->ns_cfwd[i] < P->ns_cfwd[f])) f = i;
      }
      if (xc) { /* libxsmm's forward against the fastest block */
        P->ns_cx = (float)sc__time_layer(c, P, xc, 0, 0, f, 0, 0);
        if (P->ns_cx > 0 && P->ns_cfwd[f] > 0 && P->ns_cx < P->ns_cfwd[f]) P->xconv = xc;
      }
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cdw[i] = (float)sc__time_layer(c, P, P->xconv, 0, 0, f, i, 1);
        if (P->ns_cdw[i] > 0 && (P->ns_cdw[d] <= 0 || P->ns_cdw[i] < P->ns_cdw[d])) d = i;
      }
      P->conv_how = SC__HOW_MEASURED;
      P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
      char pick[16];
      snprintf(pick, sizeof pick, "%s:%s", P->xconv ? "xsmm" : cfn[f], cdn[d]);
      sc__wis *e = T.ok ? sc__wis_add(&T.w, &T.n, P, SC__WIS_CONV, cpu, isa, pick, 0, 0) : NULL;
      if (e) {
        snprintf(e->shape, sizeof e->shape, "%s", key);
        for (int i = 0; i < SC__CONV_NV; i++)
          e->ns_c[i] = P->ns_cfwd[i], e->ns_c[SC__CONV_NV + i] = P->ns_cdw[i];
        e->ns_c[2 * SC__CONV_NV] = P->ns_cx;
        T.added = 1;
      }
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    /* the dW form of a layer with lane accumulators (the others have the dot form only) */
    if (P->dwl_off != SIZE_MAX)
      sc__pick_dw(c, P, want_d, measure, &T, &P->dw_dot, &P->dw_how, &P->ns_lane, &P->ns_dot);
    /* the tanh variant first: the GEMM variants below are timed with it */
    if (P->spec.act == SC_TANH && simd) sc__pick_tanh(c, P, want_r, fast, measure, &T);
    if (want_x == 0) { /* fused, forced: whether or not there is another variant */
      P->how = SC__HOW_FORCED;
      continue;
    }
    if (!xok || P->in > INT_MAX || P->out > INT_MAX) continue;
#if SC__XSMM
    sc__xsmm_fn xs = sc__xsmm_kernel(P);
    if (!xs) {
      if (want_x == 1)
        st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                      "SC_DENSE_FWD=xsmm: libxsmm has no kernel for layer "
                      "%zu (%zu -> %zu)",
                      l, P->in, P->out);
      continue;
    }
    if (want_x >= 0) {
      P->how = SC__HOW_FORCED;
      P->xfwd = want_x ? xs : NULL;
      continue;
    }
    if (!measure) {
      P->how = SC__HOW_RULE;
      P->xfwd = c->kf == &sc__kt_f32_avx512 && P->in >= SC__XSMM_MIN_IN ? xs : NULL;
      continue;
    }
    size_t hit = sc__wis_find(T.w, T.n, P, 0, cpu, isa);
    if (hit < T.n) {
      P->how = SC__HOW_WISDOM;
      P->ns_fused = (float)T.w[hit].ns_a, P->ns_xsmm = (float)T.w[hit].ns_b;
      P->xfwd = strcmp(T.w[hit].pick, "xsmm") == 0 ? xs : NULL;
      continue;
    }
    double tf = sc__time_layer(c, P, NULL, P->tanh_var, 0, 0, 0, 0),
           tx = sc__time_layer(c, P, xs, P->tanh_var, 0, 0, 0, 0);
    P->how = SC__HOW_MEASURED;
    P->ns_fused = (float)tf, P->ns_xsmm = (float)tx;
    P->xfwd = tx > 0 && tf > 0 && tx < tf ? xs : NULL;
    if (T.ok)
      T.added |= !!sc__wis_add(&T.w, &T.n, P, 0, cpu, isa, P->xfwd ? "xsmm" : "fused", tf, tx);
#endif
  }
  if (!st && T.ok && T.added && sc__wis_write(fn, wpath, T.w, T.n) != SC_OK) {
    const char *e = sc_last_error(), *pre = "wisdom file not written: ";
    size_t lp = strlen(pre), le = strlen(e), room = sizeof c->plan_note - 1 - lp;
    memcpy(c->plan_note, pre, lp);
    memcpy(c->plan_note + lp, e, le < room ? le : room);
    c->plan_note[lp + (le < room ? le : room)] = 0;
  }
  free(T.w);
  return st;
}

/* The plan as text (see simplechain.h). */
sc_status sc_chain_plan(const sc_chain *chain, char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  if (!buf && cap > 0) return SC__FAIL(SC_ERR_NULL, "buf is NULL but cap is %zu", cap);
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  static const char *hows[] = {"the only variant here", "rule", "measured", "wisdom",
                               "forced by SC_DENSE_FWD"};
  static const char *thows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_TANH_VARIANT"};
  int simd = chain->kf != &sc__kt_ref_f32;
  sc__sprintf(&b, "kernels %s; dense forward variants: fused%s; tanh variants: %s\n",
              chain->kf->name, SC__XSMM ? ", xsmm" : " (no libxsmm in this build)",
              simd ? "div, rcp (rat, ratrcp with SC_TANH_VARIANT=fast)" : "div");
  size_t per = (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1);
  const char *const *cfn = chain->kf->conv_fwd_names, *const *cdn = chain->kf->conv_dw_names;
  static const char *chows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_CONV_FWD / SC_CONV_DW"};
  for (size_t l = 0; l < chain->nlayers; l++) {
    const sc__lplan *P = &chain->L[l];
    if (P->spec.kind == SC_LAYER_CONV2D) {
      sc__sprintf(&b, "layer %zu conv %zux%zux%zu -> %zux%zux%zu: ", l, P->ic, P->ih, P->iw, P->oc,
                  P->oh, P->ow);
      if (!cfn || !cdn) {
        sc__sprintf(&b, "one block (%s)\n", chows[0]);
        continue;
      }
      sc__sprintf(&b, "forward %s %s, dW block %s (%s", P->xconv ? "xsmm" : "block",
                  P->xconv ? "(im2col rows + GEMM)" : cfn[P->conv_fwd], cdn[P->conv_dw],
                  chows[P->conv_how]);
      if (P->conv_how == SC__HOW_MEASURED || P->conv_how == SC__HOW_WISDOM) {
        sc__sprintf(&b, ": forward");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cfn[i], (double)P->ns_cfwd[i]);
        if (P->ns_cx > 0) sc__sprintf(&b, " xsmm %.0f ns", (double)P->ns_cx);
        sc__sprintf(&b, "; forward + dW");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cdn[i], (double)P->ns_cdw[i]);
        sc__sprintf(&b, " per %zu samples",
                    (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1));
      }
      sc__sprintf(
          &b, ")%s\n",
          sc__pool_fold_f32(chain, l)
              ? "; in float precision the forward is the fold's (the 2 x 2 pool above in it)"
              : "");
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    sc__sprintf(&b, "layer %zu dense %zu -> %zu %s: %s (%s", l, P->in, P->out,
                sc_act_name(P->spec.act), P->xfwd ? "xsmm" : "fused", hows[P->how]);
    if (P->how == SC__HOW_MEASURED || P->how == SC__HOW_WISDOM)
      sc__sprintf(&b, ": fused %.0f ns, xsmm %.0f ns per %zu samples", (double)P->ns_fused,
                  (double)P->ns_xsmm, per);
    sc__sprintf(&b, ")");
    if (P->spec.act == SC_TANH) {
      sc__sprintf(&b, "; tanh %s (%s", sc__tanh_names[P->tanh_var], thows[P->tanh_how]);
      if (P->tanh_how == SC__HOW_MEASURED || P->tanh_how == SC__HOW_WISDOM) {
        const char *sep = ": ";
        for (int v = 0; v < SC__TANH_NV; v++)
          if (P->ns_tanh[v] > 0) {
            sc__sprintf(&b, "%s%s %.0f ns", sep, sc__tanh_names[v], (double)P->ns_tanh[v]);
            sep = ", ";
          }
        sc__sprintf(&b, " per %zu samples", per);
      }
      sc__sprintf(&b, ")");
    }
    if (P->dwl_off != SIZE_MAX) {
      static const char *dhows[] = {"the only variant here", "rule", "measured", "wisdom",
                                    "forced by SC_DENSE_DW"};
      sc__sprintf(&b, "; dW %s (%s", P->dw_dot ? "dot" : "lane", dhows[P->dw_how]);
      if (P->dw_how == SC__HOW_MEASURED || P->dw_how == SC__HOW_WISDOM)
        sc__sprintf(&b, ": lane %.0f ns, dot %.0f ns per %zu samples", (double)P->ns_lane,
                    (double)P->ns_dot, per);
      sc__sprintf(&b, ")");
    }
    sc__sprintf(&b, "\n");
  }
  if (chain->plan_note[0]) sc__sprintf(&b, "note: %s\n", chain->plan_note);
  if (needed) *needed = b.len + 1;
  if (b.len + 1 > cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return SC__FAIL(SC_ERR_NOMEM, "buffer of %zu bytes too small for the plan (%zu needed)", cap,
                    b.len + 1);
  }
  return SC_OK;
}
