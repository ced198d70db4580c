/* bench/micro_valgrad.c — SimpleChains.jl's README micro-benchmark: one valgrad of
 * 24 -> 8 tanh -> 2 (no bias), squared loss, batch 200, float, one thread.
 * SimpleChains.jl published 5.7 us per call, Flux 96 us (their machine, not this one).
 * Prints the median over repetitions of the mean time per call.
 *   micro_valgrad [--reps R] [--calls N] [--threads T] */
#include "simplechain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"

int main(int argc, char **argv) {
  int reps = 15, calls = 20000, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls"))
      calls = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
  }
  if (reps < 1 || reps > 1000 || calls < 1 || threads < 1) {
    fprintf(stderr, "usage: micro_valgrad [--reps R] [--calls N] [--threads T]\n");
    return 2;
  }
  enum { B = 200, IN = 24 };
  sc_layer layers[] = {sc_dense_nobias(8, SC_TANH), sc_dense_nobias(2, SC_IDENTITY)};
  sc_chain *c;
  sc_workspace *ws;
  if (sc_chain_create(&c, IN, layers, 2) || sc_workspace_create(&ws, c, B) ||
      sc_workspace_set_threads(ws, threads)) {
    fprintf(stderr, "micro_valgrad: %s\n", sc_last_error());
    return 1;
  }
  size_t np;
  sc_chain_nparams(c, &np);
  float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
  float x[B * IN], y[B * 2];
  uint64_t s = 7;
  for (int i = 0; i < B * IN; i++)
    x[i] = (float)((s = s * 6364136223846793005ull + 1) >> 40) * 0x1p-24f - 0.5f;
  for (int i = 0; i < B * 2; i++)
    y[i] = (float)((s = s * 6364136223846793005ull + 1) >> 40) * 0x1p-24f;
  sc_params_init(c, p, np, 1);
  double *t = malloc((size_t)reps * sizeof *t);
  float loss = 0;
  for (int i = 0; i < calls / 10; i++)
    sc_valgrad(c, SC_LOSS_SQUARED, p, x, y, B, &loss, g, NULL, ws);
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    for (int i = 0; i < calls; i++) sc_valgrad(c, SC_LOSS_SQUARED, p, x, y, B, &loss, g, NULL, ws);
    t[r] = (now() - t0) / calls * 1e6;
  }
  qsort(t, (size_t)reps, sizeof *t, cmpd);
  printf(
      "RESULT engine=simplechain bench=valgrad_24_8_2_b200 threads=%d kernels=%s us_per_call=%.3f "
      "min=%.3f max=%.3f loss=%.6f\n",
      threads, sc_chain_isa(c), t[reps / 2], t[0], t[reps - 1], loss);
  free(t);
  free(p);
  free(g);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  return 0;
}
