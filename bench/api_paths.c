/* bench/api_paths.c — every public compute call on every kernel path, side by side
 *
 * For a set of chains (dense of every activation, the micro-benchmark's, an MNIST MLP, the
 * neural ODE's, LeNet5, a strided conv) and calls (sc_valgrad with each loss, sc_forward,
 * sc_pullback, the one-state sc_apply / sc_vjp / sc_jvp, batches of 1 to 256), in float and
 * double, the median ns per call on each ISA path this CPU runs (SC_ISA forced per chain),
 * 1 thread. A line is marked "<<" where a wider path is more than 10 % slower than a
 * narrower one (avx512 than avx2, or either than scalar): the compiler's vectorisation of a
 * portable loop, or a libm call per element, going wrong somewhere. It found four such
 * places on 2026-11-24 (an AVX-512 Zen 4).
 *
 *   build/api_paths [filter]     (filter: a substring of the case names, e.g. "f64" or "ode")
 * prints one line per case:  name  dtype  call  scalar_ns  avx2_ns  avx512_ns  [<<]
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "simplechain.h"

enum { OP_VALGRAD, OP_FORWARD, OP_PULLBACK, OP_APPLY, OP_VJP, OP_JVP };
static const char *OPN[] = {"valgrad", "forward", "pullback", "apply", "vjp", "jvp"};

typedef struct {
  sc_chain *c;
  sc_workspace *ws;
  sc_loss loss;
  size_t B, nin, nout, np;
  int dbl, op;
  float *p, *x, *y, *g, *gx, *t;
  double *pd, *xd, *yd, *gd, *gxd, *td;
  int32_t *lab;
} ctx_t;

static void call(ctx_t *c) {
  float l;
  double ld;
  const void *tf = c->loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)c->lab : c->t;
  const void *td = c->loss == SC_LOSS_LOGIT_CROSSENTROPY ? (const void *)c->lab : c->td;
  if (!c->dbl) switch (c->op) {
    case OP_VALGRAD: sc_valgrad(c->c, c->loss, c->p, c->x, tf, c->B, &l, c->g, NULL, c->ws); break;
    case OP_FORWARD: sc_forward(c->c, c->p, c->x, c->B, c->y, c->ws); break;
    case OP_PULLBACK: sc_pullback(c->c, c->p, c->x, c->y, c->B, c->g, c->gx, c->ws); break;
    case OP_APPLY: sc_apply(c->c, c->p, c->x, c->y, c->ws); break;
    case OP_VJP: sc_vjp(c->c, c->p, c->x, c->y, c->y + c->nout, c->gx, c->g, c->ws); break;
    default: sc_jvp(c->c, c->p, c->x, c->x, c->y, c->y + c->nout, c->ws); break;
    }
  else
    switch (c->op) {
    case OP_VALGRAD:
      sc_valgrad_f64(c->c, c->loss, c->pd, c->xd, td, c->B, &ld, c->gd, NULL, c->ws);
      break;
    case OP_FORWARD: sc_forward_f64(c->c, c->pd, c->xd, c->B, c->yd, c->ws); break;
    case OP_PULLBACK: sc_pullback_f64(c->c, c->pd, c->xd, c->yd, c->B, c->gd, c->gxd, c->ws); break;
    case OP_APPLY: sc_apply_f64(c->c, c->pd, c->xd, c->yd, c->ws); break;
    case OP_VJP:
      sc_vjp_f64(c->c, c->pd, c->xd, c->yd, c->yd + c->nout, c->gxd, c->gd, c->ws);
      break;
    default: sc_jvp_f64(c->c, c->pd, c->xd, c->xd, c->yd, c->yd + c->nout, c->ws); break;
    }
}

/* median ns per call on path isa, or -1 where the chain cannot be made there */
static double timed(const char *isa, size_t nin, const size_t img[3], const sc_layer *L, size_t nl,
                    size_t B, sc_loss loss, int dbl, int op) {
  ctx_t c;
  memset(&c, 0, sizeof c);
  setenv("SC_ISA", isa, 1);
  sc_status st = img ? sc_chain_create_image(&c.c, img[0], img[1], img[2], L, nl)
                     : sc_chain_create(&c.c, nin, L, nl);
  if (st || strcmp(sc_chain_isa(c.c), isa)) {
    sc_chain_destroy(c.c);
    return -1;
  }
  sc_chain_input_size(c.c, &c.nin);
  sc_chain_output_size(c.c, &c.nout);
  sc_chain_nparams(c.c, &c.np);
  if (sc_workspace_create(&c.ws, c.c, B)) return -1;
  c.B = B, c.dbl = dbl, c.op = op, c.loss = loss;
  size_t nx = B * c.nin, ny = 2 * B * c.nout + 16;
  c.p = malloc(c.np * 4), c.g = calloc(c.np, 4), c.x = malloc(nx * 4), c.gx = malloc(nx * 4);
  c.y = malloc(ny * 4), c.t = malloc(B * c.nout * 4), c.lab = malloc(B * 4);
  c.pd = malloc(c.np * 8), c.gd = calloc(c.np, 8), c.xd = malloc(nx * 8), c.gxd = malloc(nx * 8);
  c.yd = malloc(ny * 8), c.td = malloc(B * c.nout * 8);
  if (!c.p || !c.g || !c.x || !c.gx || !c.y || !c.t || !c.lab || !c.pd || !c.gd || !c.xd ||
      !c.gxd || !c.yd || !c.td)
    return -1;
  sc_params_init(c.c, c.p, c.np, 1);
  sc_params_init_f64(c.c, c.pd, c.np, 1);
  uint64_t s = 3;
  for (size_t i = 0; i < nx + ny; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)(s >> 40) / 16777216.0f - 0.5f;
    if (i < nx)
      c.x[i] = v, c.xd[i] = v;
    else
      c.y[i - nx] = v, c.yd[i - nx] = v;
  }
  for (size_t i = 0; i < B * c.nout; i++) c.t[i] = 0.25f, c.td[i] = 0.25;
  for (size_t i = 0; i < B; i++) c.lab[i] = (int32_t)(i % c.nout);
  call(&c); /* warm */
  double t0 = now();
  call(&c);
  double dt = now() - t0;
  long calls = dt > 0 ? (long)(0.02 / dt) : 100000;
  calls = calls < 3 ? 3 : calls > 100000 ? 100000 : calls;
  double ns[7];
  BENCH_7RUNS(ns, calls, for (long k = 0; k < calls; k++) call(&c));
  free(c.p), free(c.g), free(c.x), free(c.gx), free(c.y), free(c.t), free(c.lab);
  free(c.pd), free(c.gd), free(c.xd), free(c.gxd), free(c.yd), free(c.td);
  sc_workspace_destroy(c.ws);
  sc_chain_destroy(c.c);
  return ns[3];
}

static const char *filter;
static void row(const char *name, size_t nin, const size_t img[3], const sc_layer *L, size_t nl,
                size_t B, sc_loss loss, int dbl, int op) {
  char full[160];
  snprintf(full, sizeof full, "%s %s %s", name, dbl ? "f64" : "f32", OPN[op]);
  if (filter && !strstr(full, filter)) return;
  static const char *isas[3] = {"scalar", "avx2", "avx512"};
  double t[3];
  for (int k = 0; k < 3; k++) t[k] = timed(isas[k], nin, img, L, nl, B, loss, dbl, op);
  int slow = 0;
  for (int w = 1; w < 3; w++)
    for (int n = 0; n < w; n++)
      if (t[w] > 0 && t[n] > 0 && t[w] > 1.1 * t[n]) slow = 1;
  printf("%-40s %-4s %-8s", name, dbl ? "f64" : "f32", OPN[op]);
  for (int k = 0; k < 3; k++)
    if (t[k] < 0)
      printf(" %12s", "-");
    else
      printf(" %12.0f", t[k]);
  printf("%s\n", slow ? "  <<" : "");
  fflush(stdout);
}

int main(int argc, char **argv) {
  filter = argc > 1 ? argv[1] : NULL;
  char cpu[128];
  bench_cpu_name(cpu, sizeof cpu);
  printf("api_paths on %s, 1 thread: median ns per call\n", cpu);
  printf("%-40s %-4s %-8s %12s %12s %12s\n", "case", "type", "call", "scalar", "avx2", "avx512");
  static const sc_act acts[] = {SC_RELU, SC_TANH, SC_SIGMOID, SC_SOFTPLUS, SC_GELU, SC_SILU};
  static const size_t mnist[3] = {1, 28, 28}, small_img[3] = {3, 16, 16};
  for (int dbl = 0; dbl < 2; dbl++) {
    for (int a = 0; a < 5; a++) {
      sc_layer L[] = {sc_dense(100, acts[a]), sc_dense(100, acts[a]), sc_dense(3, SC_IDENTITY)};
      char nm[64];
      snprintf(nm, sizeof nm, "100-100-100-3 %s b256", sc_act_name(acts[a]));
      row(nm, 100, NULL, L, 3, 256, SC_LOSS_SQUARED, dbl, OP_VALGRAD);
    }
    {
      sc_layer L[] = {sc_dense(8, SC_TANH), sc_dense(2, SC_IDENTITY)};
      row("24-8-2 tanh b200 squared", 24, NULL, L, 2, 200, SC_LOSS_SQUARED, dbl, OP_VALGRAD);
      row("24-8-2 tanh b200 absolute", 24, NULL, L, 2, 200, SC_LOSS_ABSOLUTE, dbl, OP_VALGRAD);
      row("24-8-2 tanh b200 crossentropy", 24, NULL, L, 2, 200, SC_LOSS_LOGIT_CROSSENTROPY, dbl,
          OP_VALGRAD);
      row("24-8-2 tanh b200", 24, NULL, L, 2, 200, SC_LOSS_SQUARED, dbl, OP_FORWARD);
      row("24-8-2 tanh b200", 24, NULL, L, 2, 200, SC_LOSS_SQUARED, dbl, OP_PULLBACK);
    }
    {
      sc_layer L[] = {sc_dense(32, SC_RELU), sc_dense(10, SC_IDENTITY)};
      for (size_t B = 1; B <= 32; B *= 4)
        for (int op = OP_VALGRAD; op <= OP_FORWARD; op++) {
          char nm[64];
          snprintf(nm, sizeof nm, "64-32-10 relu b%zu crossentropy", B);
          row(nm, 64, NULL, L, 2, B, SC_LOSS_LOGIT_CROSSENTROPY, dbl, op);
        }
    }
    {
      sc_layer L[] = {sc_dense(128, SC_RELU), sc_dense(64, SC_RELU), sc_dense(10, SC_IDENTITY)};
      row("784-128-64-10 relu b64 crossentropy", 784, NULL, L, 3, 64, SC_LOSS_LOGIT_CROSSENTROPY,
          dbl, OP_VALGRAD);
      row("784-128-64-10 relu b1", 784, NULL, L, 3, 1, SC_LOSS_SQUARED, dbl, OP_FORWARD);
    }
    {
      sc_layer L[] = {sc_dense(50, SC_TANH), sc_dense(50, SC_TANH), sc_dense(2, SC_IDENTITY)};
      for (int op = OP_APPLY; op <= OP_JVP; op++)
        row("ode 2-50-50-2 tanh", 2, NULL, L, 3, 1, SC_LOSS_SQUARED, dbl, op);
      sc_layer M[] = {sc_dense(32, SC_TANH), sc_dense(32, SC_TANH), sc_dense(3, SC_IDENTITY)};
      for (int op = OP_APPLY; op <= OP_JVP; op++)
        row("ode 3-32-32-3 tanh", 3, NULL, M, 3, 1, SC_LOSS_SQUARED, dbl, op);
      row("2-50-50-2 tanh b128", 2, NULL, L, 3, 128, SC_LOSS_SQUARED, dbl, OP_VALGRAD);
    }
    {
      sc_layer L[] = {sc_conv2d(5, 5, 6, SC_RELU),
                      sc_maxpool2d(2, 2),
                      sc_conv2d(5, 5, 16, SC_RELU),
                      sc_maxpool2d(2, 2),
                      sc_flatten(),
                      sc_dense(120, SC_RELU),
                      sc_dense(84, SC_RELU),
                      sc_dense(10, SC_IDENTITY)};
      row("lenet5 b64 crossentropy", 0, mnist, L, 8, 64, SC_LOSS_LOGIT_CROSSENTROPY, dbl,
          OP_VALGRAD);
      row("lenet5 b64", 0, mnist, L, 8, 64, SC_LOSS_SQUARED, dbl, OP_FORWARD);
      row("lenet5 one state", 0, mnist, L, 8, 1, SC_LOSS_SQUARED, dbl, OP_APPLY);
    }
    {
      sc_layer L[] = {sc_conv2d_ex(3, 3, 8, SC_TANH, 2, 2, 1, 1), sc_flatten(),
                      sc_dense(10, SC_IDENTITY)};
      row("conv3x3 s2 p1 tanh 3x16x16 b32", 0, small_img, L, 3, 32, SC_LOSS_LOGIT_CROSSENTROPY, dbl,
          OP_VALGRAD);
    }
  }
  return 0;
}
