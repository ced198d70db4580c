/* bench/ode_rhs.c — the neural-ODE right-hand side on one state, double precision, one
 * thread: NN 2 -> 50 tanh -> 2 (examples/neural_ode's network). Times
 *   rhs: y = NN(u)                       (sc_apply_f64)
 *   vjp: du += J_u^T v, dp += J_p^T v    (sc_vjp_f64, forward recomputed inside)
 * in ns per call (median over repetitions of the mean over many calls; the state moves
 * a little every call so nothing is cached).
 *   ode_rhs [--reps R] [--calls N] */
#include "simplechain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"

int main(int argc, char **argv) {
  int reps = 11, calls = 200000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--calls"))
      calls = atoi(argv[i + 1]);
  }
  if (reps < 1 || reps > 1000 || calls < 1) {
    fprintf(stderr, "usage: ode_rhs [--reps R] [--calls N]\n");
    return 2;
  }
  sc_layer L[] = {sc_dense(50, SC_TANH), sc_dense(2, SC_IDENTITY)};
  sc_chain *c;
  sc_workspace *ws;
  if (sc_chain_create(&c, 2, L, 2) || sc_workspace_create(&ws, c, 1)) {
    fprintf(stderr, "ode_rhs: %s\n", sc_last_error());
    return 1;
  }
  size_t np;
  sc_chain_nparams(c, &np);
  double *p = malloc(np * sizeof *p), *dp = calloc(np, sizeof *dp);
  double *t_rhs = malloc((size_t)reps * sizeof *t_rhs),
         *t_vjp = malloc((size_t)reps * sizeof *t_vjp);
  sc_params_init_f64(c, p, np, 1);
  double u[2] = {2.0, 0.0}, v[2] = {0.3, -0.8}, y[2], du[2] = {0, 0}, sink = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    for (int i = 0; i < calls; i++) {
      u[0] += 1e-9;
      sc_apply_f64(c, p, u, y, ws);
      sink += y[0];
    }
    double t1 = now();
    for (int i = 0; i < calls; i++) {
      u[1] += 1e-9;
      sc_vjp_f64(c, p, u, v, NULL, du, dp, ws);
    }
    double t2 = now();
    t_rhs[r] = (t1 - t0) / calls * 1e9;
    t_vjp[r] = (t2 - t1) / calls * 1e9;
  }
  qsort(t_rhs, (size_t)reps, sizeof *t_rhs, cmpd);
  qsort(t_vjp, (size_t)reps, sizeof *t_vjp, cmpd);
  printf("RESULT engine=simplechain bench=ode_rhs net=2-50tanh-2 dtype=float64 kernels=%s "
         "rhs_ns=%.1f vjp_ns=%.1f rhs_plus_vjp_ns=%.1f check=%.3g\n",
         sc_chain_isa(c), t_rhs[reps / 2], t_vjp[reps / 2], t_rhs[reps / 2] + t_vjp[reps / 2],
         sink + du[0] + dp[0]);
  free(p), free(dp), free(t_rhs), free(t_vjp);
  sc_workspace_destroy(ws);
  sc_chain_destroy(c);
  return 0;
}
