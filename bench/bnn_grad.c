/* bench/bnn_grad.c — the log density and gradient of examples/bnn_model.h's Bayesian neural
 * network (1 -> H relu -> 1, 100 points, linked parameterisation) on one thread, float64,
 * through simplechain's sc_valgrad_f64: ns per call (median of 7 runs of the mean over many
 * calls; the point moves a little every call). Twin: bench/bnn_grad_torch.py (same model,
 * data and point; both print the log density there).
 *   bnn_grad [--hidden H] [--points N] [--calls N] */
#include "../examples/bnn_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"

int main(int argc, char **argv) {
  long hidden = 32, points = 100, calls = 50000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--hidden"))
      hidden = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--points"))
      points = atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls"))
      calls = atol(argv[i + 1]);
  }
  if (hidden < 1 || hidden > 4096 || points < 1 || points > 1000000 || calls < 1) {
    fprintf(stderr, "usage: bnn_grad [--hidden H] [--points N] [--calls N]\n");
    return 2;
  }
  bnn_model m;
  if (bnn_create(&m, (size_t)hidden, (size_t)points, 2454, 1)) {
    fprintf(stderr, "bnn_grad: %s\n", sc_last_error());
    return 1;
  }
  double *v = malloc(m.n * sizeof *v), *g = malloc(m.n * sizeof *g), lp0 = 0, lp = 0, sink = 0;
  if (!v || !g) return 1;
  bnn_bench_point(v, m.np);
  if (bnn_logdensity(&m, 0, v, m.n, &lp0, g)) {
    fprintf(stderr, "bnn_grad: the log density failed: %s\n", sc_last_error());
    return 1;
  }
  double ns[7];
  BENCH_7RUNS(
      ns, calls, for (long k = 0; k < calls; k++) {
        v[0] += 1e-12;
        bnn_logdensity(&m, 0, v, m.n, &lp, g);
        sink += lp;
      });
  printf("RESULT engine=simplechain bench=bnn_grad hidden=%ld points=%ld dtype=float64 "
         "kernels=%s logp=%.12g grad_ns=%.1f min_ns=%.1f max_ns=%.1f%s\n",
         hidden, points, sc_chain_isa(m.chain), lp0, ns[3], ns[0], ns[6], sink == sink ? "" : " ?");
  free(v);
  free(g);
  bnn_destroy(&m);
  return 0;
}
