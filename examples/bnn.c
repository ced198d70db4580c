/* bnn — a Bayesian neural network (the model of TuringLang/Turing.jl#2454) sampled with NUTS
 * on simplechain's double-precision gradient. The model and data are in bnn_model.h:
 * 1 -> 32 relu -> 1 on 100 noisy points of y = sin(1.5 x) + 0.2 x, theta ~ N(0, I),
 * sigma ~ Gamma(0.1, 1), y ~ N(f(x; theta), sigma), sampled on (theta, log sigma).
 *
 *   bnn [--hidden H] [--points N] [--data-seed S] [sampler flags] [--out FILE.svg] [--help]
 *
 * Prints per-chain sampler facts, the posterior of sigma, and the convergence of sigma and
 * of the posterior mean of f at every data point (the network's weights themselves are not
 * identified: hidden units can swap and flip, so chains settle in different modes of the
 * same function, and their R-hat says nothing about the fit). Last line:
 *   RESULT bench=bnn chains=C draws=D rhat_max=... ess_bulk_min=... grad_ns=... seconds=...
 * with rhat_max and ess_bulk_min over sigma and f(x_i), grad_ns the time of one log density
 * and gradient on one thread. */
#include "bnn_model.h"
#include "nuts_cli.h"

#define GRID 200

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* median of 7 runs of `calls` log-density-and-gradient evaluations, ns per call */
static double time_gradient(const bnn_model *m, size_t calls) {
  double *v = malloc(m->n * sizeof *v), *g = malloc(m->n * sizeof *g), t[7], sink = 0;
  if (!v || !g) {
    free(v);
    free(g);
    return NAN;
  }
  bnn_bench_point(v, m->np);
  for (int r = 0; r < 7; r++) {
    double t0 = nuts_cli_now(), lp = 0;
    for (size_t k = 0; k < calls; k++) {
      v[0] += 1e-12; /* a new point every call */
      bnn_logdensity((void *)m, 0, v, m->n, &lp, g);
      sink += lp;
    }
    t[r] = (nuts_cli_now() - t0) / (double)calls * 1e9;
  }
  qsort(t, 7, sizeof t[0], cmp_double);
  free(v);
  free(g);
  return sink == sink ? t[3] : NAN;
}

/* The data, the posterior mean of f and its 90 % band (5 % and 95 % quantiles over the
 * draws, pointwise) on a grid. fg: GRID x S values of f at the grid, per draw. */
static int write_svg(const char *path, const bnn_model *m, const double *gx, double *fg, size_t S) {
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  double mean[GRID], lo[GRID], hi[GRID];
  double ymin = INFINITY, ymax = -INFINITY;
  for (size_t g = 0; g < GRID; g++) {
    double *row = fg + g * S, s = 0;
    for (size_t k = 0; k < S; k++) s += row[k];
    mean[g] = s / (double)S;
    qsort(row, S, sizeof *row, cmp_double);
    lo[g] = row[(size_t)(0.05 * (double)(S - 1))];
    hi[g] = row[(size_t)(0.95 * (double)(S - 1))];
    ymin = fmin(ymin, lo[g]);
    ymax = fmax(ymax, hi[g]);
  }
  for (size_t i = 0; i < m->points; i++) {
    ymin = fmin(ymin, m->y[i]);
    ymax = fmax(ymax, m->y[i]);
  }
  double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;
  const double W = 720, H = 440, L = 50, R = 20, T = 40, B = 40;
  double x0 = gx[0], x1 = gx[GRID - 1];
#define PX(x) (L + ((x)-x0) / (x1 - x0) * (W - L - R))
#define PY(y) (T + (ymax - (y)) / (ymax - ymin) * (H - T - B))
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
          "fill=\"white\"/>\n",
          W, H);
  fprintf(f,
          "<text x=\"%.0f\" y=\"22\" font-size=\"14\">Bayesian neural network 1-%zu-1 (relu): "
          "posterior mean of f and its 90%% band, %zu draws</text>\n",
          L, m->hidden, S);
  fprintf(f,
          "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
          "stroke=\"#888\"/>\n",
          L, T, W - L - R, H - T - B);
  for (int k = -3; k <= 3; k++)
    if (k >= x0 && k <= x1)
      fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%d</text>\n", PX((double)k),
              H - B + 16, k);
  for (int k = (int)ceil(ymin); k <= (int)floor(ymax); k++)
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n", L - 6,
            PY((double)k) + 4, k);
  fprintf(f, "<path fill=\"#9ecae1\" fill-opacity=\"0.6\" stroke=\"none\" d=\"");
  for (size_t g = 0; g < GRID; g++) fprintf(f, "%s%.1f,%.1f", g ? " L" : "M", PX(gx[g]), PY(hi[g]));
  for (size_t g = GRID; g-- > 0;) fprintf(f, " L%.1f,%.1f", PX(gx[g]), PY(lo[g]));
  fprintf(f, " Z\"/>\n<path fill=\"none\" stroke=\"#08519c\" stroke-width=\"2\" d=\"");
  for (size_t g = 0; g < GRID; g++)
    fprintf(f, "%s%.1f,%.1f", g ? " L" : "M", PX(gx[g]), PY(mean[g]));
  fprintf(f, "\"/>\n");
  for (size_t i = 0; i < m->points; i++)
    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"#d62728\"/>\n", PX(m->x[i]),
            PY(m->y[i]));
  fprintf(f,
          "<text x=\"%.0f\" y=\"%.0f\" fill=\"#08519c\">posterior mean of f(x)</text>\n"
          "<text x=\"%.0f\" y=\"%.0f\" fill=\"#3182bd\">90%% band of f(x)</text>\n"
          "<text x=\"%.0f\" y=\"%.0f\" fill=\"#d62728\">data</text>\n",
          L + 10, T + 16, L + 10, T + 32, L + 10, T + 48);
  fprintf(f,
          "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">x</text>\n"
          "<text x=\"14\" y=\"%.1f\">y</text>\n",
          (L + W - R) / 2, H - 6, (T + H - B) / 2);
#undef PX
#undef PY
  int ok = fprintf(f, "</svg>\n") > 0;
  ok = fclose(f) == 0 && ok;
  return ok;
}

static void usage(FILE *f) {
  fprintf(
      f, "usage: bnn [options]\n"
         "NUTS on a Bayesian neural network 1 -> H relu -> 1 (theta ~ N(0, I), sigma ~\n"
         "Gamma(0.1, 1), Gaussian likelihood), gradients from simplechain in double.\n\n"
         "  --hidden H     hidden units (default 32)\n"
         "  --points N     data points (default 100)\n"
         "  --data-seed S  seed of the data (default 2454)\n"
         "  --out FILE.svg draw the data, the posterior mean of f and its 90%% band\n" NUTS_CLI_HELP
         "  --help         this text\n");
}

typedef struct bnn_flags {
  size_t hidden, points, dseed;
  const char *svg;
} bnn_flags;

static int bnn_option(void *user, const char *a, const char *v) {
  bnn_flags *f = user;
  if (!strcmp(a, "--hidden"))
    return example_size(v, &f->hidden) && f->hidden >= 1 && f->hidden <= 4096 ? 1 : -1;
  if (!strcmp(a, "--points"))
    return example_size(v, &f->points) && f->points >= 1 && f->points <= 1000000 ? 1 : -1;
  if (!strcmp(a, "--data-seed")) return example_size(v, &f->dseed) ? 1 : -1;
  if (!strcmp(a, "--out")) return (f->svg = v)[0] ? 1 : -1;
  return 0;
}

int main(int argc, char **argv) {
  nuts_cli cli = {"bnn", 4, 1000, 1000, (size_t)-1, 1, 2, 0, NULL};
  bnn_flags fl = {32, 100, 2454, NULL};
  int code = nuts_cli_parse(&cli, argc, argv, usage, bnn_option, &fl);
  if (code >= 0) return code;
  size_t hidden = fl.hidden, points = fl.points, dseed = fl.dseed;
  const char *svg = fl.svg;
  if (!example_writable("bnn", svg) || !example_writable("bnn", cli.csv)) return 2;
  size_t C = cli.chains, D = cli.draws, S = C * D;
  bnn_model m;
  sc_status st = bnn_create(&m, hidden, points, dseed, C);
  if (st) {
    fprintf(stderr, "bnn: %s: %s\n", sc_status_str(st), sc_last_error());
    return 1;
  }
  size_t n = m.n, N = points;
  int rc = 1;
  double *draws = malloc(S * n * sizeof *draws);
  double *q = malloc(S * (N + 1) * sizeof *q); /* sigma, then f(x_i), per draw */
  double *gx = malloc(GRID * sizeof *gx), *fg = svg ? malloc(GRID * S * sizeof *fg) : NULL;
  double *fy = malloc((N > GRID ? N : GRID) * sizeof *fy);
  sc_nuts_chain_info *info = calloc(C, sizeof *info);
  sc_nuts_stats *stats = cli.csv ? malloc(S * sizeof *stats) : NULL;
  sc_mcmc_summary *sq = malloc((N + 1) * sizeof *sq);
  sc_workspace *wsg = NULL;
  if (!draws || !q || !gx || !fy || !info || !sq || (svg && !fg) || (cli.csv && !stats)) {
    fprintf(stderr, "bnn: out of memory\n");
    goto out;
  }
  sc_nuts_opts o = nuts_cli_opts(&cli);
  if (!cli.quiet) {
    char buf[512];
    sc_chain_summary(m.chain, buf, sizeof buf, NULL);
    printf("bnn: 1 -> %zu relu -> 1, %zu parameters + log sigma; %zu points; %zu chains x (%zu "
           "warm-up + %zu draws), %d thread(s), seed %llu\n%s",
           hidden, m.np, N, C, cli.warmup, D, cli.threads, cli.seed, buf);
  }
  sc_nuts_out out = {draws, stats, info, NULL};
  double t0 = nuts_cli_now();
  st = sc_nuts_sample(bnn_logdensity, &m, n, &o, &out, NULL, 0);
  double seconds = nuts_cli_now() - t0;
  if (st) {
    fprintf(stderr, "bnn: %s: %s\n", sc_status_str(st), sc_last_error());
    goto out;
  }
  /* derived quantities: sigma and f at the data points (and on the grid for the picture) */
  for (size_t g = 0; g < GRID; g++) gx[g] = -3.3 + 6.6 * (double)g / (GRID - 1);
  if ((st = sc_workspace_create(&wsg, m.chain, N > GRID ? N : GRID))) goto fail;
  for (size_t k = 0; k < S; k++) {
    const double *v = draws + k * n;
    q[k * (N + 1)] = exp(v[m.np]);
    if ((st = sc_forward_f64(m.chain, v, m.x, N, fy, wsg))) goto fail;
    memcpy(q + k * (N + 1) + 1, fy, N * sizeof *fy);
    if (fg) {
      if ((st = sc_forward_f64(m.chain, v, gx, GRID, fy, wsg))) goto fail;
      for (size_t g = 0; g < GRID; g++) fg[g * S + k] = fy[g];
    }
  }
  if ((st = sc_mcmc_summarize(q, C, D, N + 1, sq))) goto fail;
  nuts_cli_report(&cli, info);
  double rhat_max = 0, ess_min = INFINITY, rhat_f = 0, ess_f = INFINITY;
  for (size_t j = 0; j <= N; j++) {
    if (!(sq[j].rhat <= rhat_max)) rhat_max = sq[j].rhat;
    if (!(sq[j].ess_bulk >= ess_min)) ess_min = sq[j].ess_bulk;
    if (j && !(sq[j].rhat <= rhat_f)) rhat_f = sq[j].rhat;
    if (j && !(sq[j].ess_bulk >= ess_f)) ess_f = sq[j].ess_bulk;
  }
  printf("\nsigma: posterior mean %.4f, sd %.4f, 90%% interval [%.4f, %.4f] (the data's noise "
         "sd is 0.15)\n       R-hat %.4f, bulk ESS %.0f, tail ESS %.0f\n",
         sq[0].mean, sq[0].sd, sq[0].q5, sq[0].q95, sq[0].rhat, sq[0].ess_bulk, sq[0].ess_tail);
  printf("f(x_i) at the %zu data points: max R-hat %.4f, min bulk ESS %.0f\n", N, rhat_f, ess_f);
  double grad_ns = time_gradient(&m, 20000);
  size_t grads = 0;
  for (size_t k = 0; k < C; k++) grads += info[k].gradients;
  printf("log-density gradient: %.0f ns per call (1 thread, %zu points); the run made %zu calls "
         "in %.3f s\n",
         grad_ns, N, grads, seconds);
  if (svg) {
    if (!write_svg(svg, &m, gx, fg, S)) {
      fprintf(stderr, "bnn: cannot write '%s': %s\n", svg, strerror(errno));
      goto out;
    }
    printf("wrote %s\n", svg);
  }
  if (cli.csv) {
    char **names = malloc(n * sizeof *names), *buf = malloc(n * 32);
    if (!names || !buf) {
      free(names);
      free(buf);
      fprintf(stderr, "bnn: out of memory\n");
      goto out;
    }
    for (size_t k = 0; k < n; k++) {
      names[k] = buf + 32 * k;
      if (k < m.np)
        snprintf(names[k], 32, "theta.%zu", k + 1);
      else
        snprintf(names[k], 32, "log_sigma");
    }
    st = sc_mcmc_write_csv(cli.csv, draws, C, D, n, (const char *const *)names, stats);
    free(names);
    free(buf);
    if (st) goto fail;
    printf("wrote %zu draws to %s\n", S, cli.csv);
  }
  printf("RESULT bench=bnn chains=%zu draws=%zu rhat_max=%.4f ess_bulk_min=%.0f grad_ns=%.1f "
         "seconds=%.4f\n",
         C, D, rhat_max, ess_min, grad_ns, seconds);
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "bnn: %s: %s\n", sc_status_str(st), sc_last_error());
out:
  sc_workspace_destroy(wsg);
  free(draws);
  free(q);
  free(gx);
  free(fg);
  free(fy);
  free(info);
  free(stats);
  free(sq);
  bnn_destroy(&m);
  return rc;
}
