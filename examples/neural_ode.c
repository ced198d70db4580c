/* neural_ode — a neural ODE fitted with SUNDIALS CVODES adjoint sensitivities.
 *
 * Data: the spiral u' = A u^3 (u^3 element-wise), A = [[-0.1, 2.0], [-2.0, -0.1]],
 * u(0) = (2, 0), saved at the 30 times t_i = 1.5 i / 29, solved by CVODES at rtol 1e-12.
 *
 * Model: u' = NN(u^3), NN = simplechain 2 -> 50 tanh -> 2 (identity output), in double
 * precision through the library's one-state path:
 *   right-hand side   f(u) = NN(u^3)                           sc_apply_f64
 *   Jacobian          J = J_NN(u^3) diag(3 u^2)                sc_jvp_f64 on e_1, e_2
 *   adjoint           lambda' = -J^T lambda                    sc_vjp_f64, du part
 *   gradient          dL/dp = int_0^T J_p^T lambda dt          sc_vjp_f64, dp part (a
 *                                                              CVODES backward quadrature)
 * Loss: L = mean over the 30 points and 2 components of (u(t_i) - data_i)^2. The adjoint
 * pass runs backward from t = 1.5 to 0 one data interval at a time; at each data time
 * lambda jumps by dL/du(t_i) = (2/60) (u(t_i) - data_i) and the backward problem is
 * re-initialized there (CVodeReInitB / CVodeQuadReInitB).
 *
 * Both directions use Adams-Moulton with Newton iterations and the dense linear solver with the
 * exact Jacobians above. Training: ADAM (lr 0.05, on the flat double vector) for --iters
 * iterations, then L-BFGS (liblbfgs, backtracking Wolfe line search) for up to --lbfgs
 * iterations; a line-search trial whose solve fails counts as an infinite loss (the line
 * search then shortens the step).
 *
 *   neural_ode [--iters N] [--lbfgs N] [--lr LR] [--seed S] [--rtol TOL] [--every N]
 *              [--init-scale S] [--out FILE.svg] [--check-grad] [--help]
 *
 * The last line of a training run is
 *   RESULT adam_iters=N adam_loss=X lbfgs_iters=N loss=X seconds=S
 * and of --check-grad
 *   RESULT check_grad params=N max_rel_err=X
 * Exit status: 0 done, 1 a failure (solver, non-finite state, I/O; the message says which),
 * 2 a bad command line.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "simplechain.h"
#include "example_util.h"

#include <cvodes/cvodes.h>
#include <lbfgs.h>
#include <nvector/nvector_serial.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS 2      /* state size */
#define NPTS 30   /* data points */
#define T_END 1.5 /* last data time */
#define HIDDEN 50 /* hidden units */
#define NFINE 301 /* points of the plotted curves */
#define MAX_STEPS 20000L

static const double A_TRUE[2][2] = {{-0.1, 2.0}, {-2.0, -0.1}};
static const double U0[2] = {2.0, 0.0};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ the ODE solver */
typedef struct node {
  /* the network; p points at the parameters of the current solve */
  const sc_chain *chain;
  sc_workspace *ws;
  size_t np;
  const double *p;
  int truth; /* 1: the right-hand side is A u^3 (the data), 0: the network */
  double rtol, atol;
  /* SUNDIALS objects, created once and re-initialized for every solve */
  SUNContext ctx;
  void *mem;
  N_Vector y, yB, qB;
  SUNMatrix J, JB;
  SUNLinearSolver LS, LSB;
  int which, have_b;
  /* errors: cb_msg from our callbacks, sun_msg from SUNDIALS' error handler, err the
   * message a failing solve leaves for the caller */
  char cb_msg[512], sun_msg[512], warn_msg[512], err[2000];
  long nwarn;
} node;

static void node_err(node *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
}

/* a callback's failure: keeps the first message of a solve, returns code (CVODE's
 * convention: > 0 recoverable, the solver may retry with a smaller step; < 0 fatal) */
static int cb_fail(node *s, int code, const char *fmt, ...) {
  if (!s->cb_msg[0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->cb_msg, sizeof s->cb_msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* SUNDIALS' error handler: keeps the last error message instead of printing it */
static void on_sun_error(int code, const char *module, const char *function, char *msg,
                         void *user) {
  node *s = user;
  (void)module;
  if (code == CV_WARNING) { /* e.g. "t + h = t on the next step": kept for the error message */
    s->nwarn++;
    snprintf(s->warn_msg, sizeof s->warn_msg, "%s: %s", function ? function : "?", msg ? msg : "?");
    return;
  }
  snprintf(s->sun_msg, sizeof s->sun_msg, "%s: %s", function ? function : "?", msg ? msg : "?");
}

/* a SUNDIALS call returned flag < 0: composes s->err, returns -1 */
static int sun_fail(node *s, const char *call, int flag, int lin) {
  char *name = lin ? CVodeGetLinReturnFlagName(flag) : CVodeGetReturnFlagName(flag);
  node_err(s, "%s failed (%s)%s%s%s%s%s%s", call, name ? name : "?", s->sun_msg[0] ? ": " : "",
           s->sun_msg, s->cb_msg[0] ? "; " : "", s->cb_msg,
           s->warn_msg[0] ? "; last warning: " : "", s->warn_msg);
  free(name);
  return -1;
}
#define SUN_CHECK(call)                                                                            \
  do {                                                                                             \
    int f_ = (call);                                                                               \
    if (f_ < 0) return sun_fail(s, #call, f_, 0);                                                  \
  } while (0)
#define SUN_CHECK_LS(call)                                                                         \
  do {                                                                                             \
    int f_ = (call);                                                                               \
    if (f_ < 0) return sun_fail(s, #call, f_, 1);                                                  \
  } while (0)

static int len_ok(N_Vector v, sunindextype n) { return v && N_VGetLength_Serial(v) == n; }

/* c = u^3; checks u and c. Returns 0 or a callback error. */
static int cube(node *s, const char *where, sunrealtype t, const double *u, double c[2]) {
  if (!isfinite(u[0]) || !isfinite(u[1]))
    return cb_fail(s, -1, "%s: non-finite state u(t = %.6g) = (%g, %g)", where, t, u[0], u[1]);
  c[0] = u[0] * u[0] * u[0];
  c[1] = u[1] * u[1] * u[1];
  if (!isfinite(c[0]) || !isfinite(c[1]))
    return cb_fail(s, -1, "%s: state too large, u(t = %.6g) = (%g, %g) overflows u^3", where, t,
                   u[0], u[1]);
  return 0;
}

/* u' = f(u) */
static int rhs(sunrealtype t, N_Vector y, N_Vector ydot, void *user) {
  node *s = user;
  if (!len_ok(y, NS) || !len_ok(ydot, NS))
    return cb_fail(s, -1, "rhs: state vectors of length %ld and %ld, expected %d",
                   y ? (long)N_VGetLength_Serial(y) : -1L,
                   ydot ? (long)N_VGetLength_Serial(ydot) : -1L, NS);
  const double *u = N_VGetArrayPointer(y);
  double *f = N_VGetArrayPointer(ydot), c[2];
  int r = cube(s, "rhs", t, u, c);
  if (r) return r;
  if (s->truth) {
    f[0] = A_TRUE[0][0] * c[0] + A_TRUE[0][1] * c[1];
    f[1] = A_TRUE[1][0] * c[0] + A_TRUE[1][1] * c[1];
  } else {
    sc_status st = sc_apply_f64(s->chain, s->p, c, f, s->ws);
    if (st != SC_OK)
      return cb_fail(s, -1, "rhs at t = %.6g: %s: %s", t, sc_status_str(st), sc_last_error());
  }
  if (!isfinite(f[0]) || !isfinite(f[1])) /* recoverable: CVODE may try a smaller step */
    return cb_fail(s, 1, "rhs: non-finite derivative f(u) = (%g, %g) at t = %.6g, u = (%g, %g)",
                   f[0], f[1], t, u[0], u[1]);
  return 0;
}

/* Jm[i][j] = df_i/du_j at u */
static int jacobian(node *s, const char *where, sunrealtype t, const double *u, double Jm[2][2]) {
  double c[2];
  int r = cube(s, where, t, u, c);
  if (r) return r;
  for (int j = 0; j < 2; j++) {
    double d = 3 * u[j] * u[j], col[2];
    if (s->truth) {
      col[0] = A_TRUE[0][j];
      col[1] = A_TRUE[1][j];
    } else {
      const double e[2] = {j == 0, j == 1};
      sc_status st = sc_jvp_f64(s->chain, s->p, c, e, NULL, col, s->ws);
      if (st != SC_OK)
        return cb_fail(s, -1, "%s at t = %.6g: %s: %s", where, t, sc_status_str(st),
                       sc_last_error());
    }
    Jm[0][j] = col[0] * d;
    Jm[1][j] = col[1] * d;
  }
  for (int i = 0; i < 4; i++)
    if (!isfinite(Jm[i / 2][i % 2]))
      return cb_fail(s, 1, "%s: non-finite Jacobian at t = %.6g", where, t);
  return 0;
}

static int jac(sunrealtype t, N_Vector y, N_Vector fy, SUNMatrix Jac, void *user, N_Vector t1,
               N_Vector t2, N_Vector t3) {
  node *s = user;
  (void)fy, (void)t1, (void)t2, (void)t3;
  if (!len_ok(y, NS) || SUNDenseMatrix_Rows(Jac) != NS || SUNDenseMatrix_Columns(Jac) != NS)
    return cb_fail(s, -1, "jac: state or matrix of the wrong size (expected %d)", NS);
  double Jm[2][2];
  int r = jacobian(s, "jac", t, N_VGetArrayPointer(y), Jm);
  if (r) return r;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) SM_ELEMENT_D(Jac, i, j) = Jm[i][j];
  return 0;
}

/* the adjoint: lambda' = -J^T lambda = -diag(3u^2) J_NN^T lambda */
static int rhsB(sunrealtype t, N_Vector y, N_Vector yB, N_Vector yBdot, void *user) {
  node *s = user;
  if (s->truth) return cb_fail(s, -1, "rhsB: no adjoint for the data ODE");
  if (!len_ok(y, NS) || !len_ok(yB, NS) || !len_ok(yBdot, NS))
    return cb_fail(s, -1, "rhsB: state or adjoint vector of the wrong length (expected %d)", NS);
  const double *u = N_VGetArrayPointer(y), *lam = N_VGetArrayPointer(yB);
  double *out = N_VGetArrayPointer(yBdot), c[2], du[2] = {0, 0};
  int r = cube(s, "rhsB", t, u, c);
  if (r) return r;
  if (!isfinite(lam[0]) || !isfinite(lam[1]))
    return cb_fail(s, -1, "rhsB: non-finite adjoint lambda(t = %.6g) = (%g, %g)", t, lam[0],
                   lam[1]);
  sc_status st = sc_vjp_f64(s->chain, s->p, c, lam, NULL, du, NULL, s->ws);
  if (st != SC_OK)
    return cb_fail(s, -1, "rhsB at t = %.6g: %s: %s", t, sc_status_str(st), sc_last_error());
  out[0] = -3 * u[0] * u[0] * du[0];
  out[1] = -3 * u[1] * u[1] * du[1];
  return 0;
}

/* dfB/dlambda = -J^T */
static int jacB(sunrealtype t, N_Vector y, N_Vector yB, N_Vector fyB, SUNMatrix JB, void *user,
                N_Vector t1, N_Vector t2, N_Vector t3) {
  node *s = user;
  (void)yB, (void)fyB, (void)t1, (void)t2, (void)t3;
  if (!len_ok(y, NS) || SUNDenseMatrix_Rows(JB) != NS || SUNDenseMatrix_Columns(JB) != NS)
    return cb_fail(s, -1, "jacB: state or matrix of the wrong size (expected %d)", NS);
  double Jm[2][2];
  int r = jacobian(s, "jacB", t, N_VGetArrayPointer(y), Jm);
  if (r) return r;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) SM_ELEMENT_D(JB, i, j) = -Jm[j][i];
  return 0;
}

/* the gradient quadrature, integrated from T back to 0: qB' = -J_p^T lambda, so that
 * qB(0) = int_0^T J_p^T lambda dt = dL/dp */
static int quadB(sunrealtype t, N_Vector y, N_Vector yB, N_Vector qBdot, void *user) {
  node *s = user;
  if (!len_ok(y, NS) || !len_ok(yB, NS) || !len_ok(qBdot, (sunindextype)s->np))
    return cb_fail(s, -1, "quadB: vector of the wrong length (state %d, gradient %zu expected)", NS,
                   s->np);
  const double *u = N_VGetArrayPointer(y), *lam = N_VGetArrayPointer(yB);
  double c[2];
  int r = cube(s, "quadB", t, u, c);
  if (r) return r;
  N_VConst(0.0, qBdot);
  sc_status st = sc_vjp_f64(s->chain, s->p, c, lam, NULL, NULL, N_VGetArrayPointer(qBdot), s->ws);
  if (st != SC_OK)
    return cb_fail(s, -1, "quadB at t = %.6g: %s: %s", t, sc_status_str(st), sc_last_error());
  N_VScale(-1.0, qBdot, qBdot);
  return 0;
}

static void node_free(node *s) {
  if (s->mem) CVodeFree(&s->mem); /* also frees the adjoint memory and backward problem */
  if (s->LS) SUNLinSolFree(s->LS);
  if (s->LSB) SUNLinSolFree(s->LSB);
  if (s->J) SUNMatDestroy(s->J);
  if (s->JB) SUNMatDestroy(s->JB);
  if (s->y) N_VDestroy(s->y);
  if (s->yB) N_VDestroy(s->yB);
  if (s->qB) N_VDestroy(s->qB);
  if (s->ctx) SUNContext_Free(&s->ctx);
  sc_workspace_destroy(s->ws);
  s->ws = NULL;
}

static int node_init(node *s, const sc_chain *chain, size_t np) {
  memset(s, 0, sizeof *s);
  s->chain = chain;
  s->np = np;
  sc_status st = sc_workspace_create(&s->ws, chain, 1);
  if (st != SC_OK) {
    node_err(s, "sc_workspace_create: %s", sc_last_error());
    return -1;
  }
  if (SUNContext_Create(NULL, &s->ctx) != 0 || !s->ctx) {
    node_err(s, "SUNContext_Create failed");
    return -1;
  }
  s->y = N_VNew_Serial(NS, s->ctx);
  s->yB = N_VNew_Serial(NS, s->ctx);
  s->qB = N_VNew_Serial((sunindextype)np, s->ctx);
  s->J = SUNDenseMatrix(NS, NS, s->ctx);
  s->JB = SUNDenseMatrix(NS, NS, s->ctx);
  if (!s->y || !s->yB || !s->qB || !s->J || !s->JB) {
    node_err(s, "out of memory for the SUNDIALS vectors and matrices");
    return -1;
  }
  s->LS = SUNLinSol_Dense(s->y, s->J, s->ctx);
  s->LSB = SUNLinSol_Dense(s->yB, s->JB, s->ctx);
  if (!s->LS || !s->LSB) {
    node_err(s, "SUNLinSol_Dense failed");
    return -1;
  }
  s->mem = CVodeCreate(CV_ADAMS, s->ctx);
  if (!s->mem) {
    node_err(s, "CVodeCreate failed");
    return -1;
  }
  SUN_CHECK(CVodeSetErrHandlerFn(s->mem, on_sun_error, s));
  N_VConst(0.0, s->y);
  SUN_CHECK(CVodeInit(s->mem, rhs, 0.0, s->y));
  SUN_CHECK(CVodeSetUserData(s->mem, s));
  SUN_CHECK(CVodeSStolerances(s->mem, 1e-8, 1e-10));
  SUN_CHECK(CVodeSetMaxNumSteps(s->mem, MAX_STEPS));
  SUN_CHECK_LS(CVodeSetLinearSolver(s->mem, s->LS, s->J));
  SUN_CHECK_LS(CVodeSetJacFn(s->mem, jac));
  SUN_CHECK(CVodeAdjInit(s->mem, 100, CV_HERMITE));
  return 0;
}

/* Solves u' = f(u), u(0) = U0 (the data ODE when s->truth) and writes u(tout[i]) to
 * out[2i..2i+1], i < n; tout[0] must be 0. With data (n x 2) also the loss into *loss;
 * with grad (length np, needs data) also dL/dp by the adjoint method. Returns 0, or -1
 * with the reason in s->err. */
static int solve(node *s, const double *tout, size_t n, double *out, const double *data,
                 double *loss, double *grad) {
  s->cb_msg[0] = s->sun_msg[0] = s->warn_msg[0] = s->err[0] = 0;
  if (n < 2 || tout[0] != 0.0 || (grad && (!data || s->truth))) {
    node_err(s, "solve: bad arguments");
    return -1;
  }
  double *y = N_VGetArrayPointer(s->y);
  y[0] = U0[0];
  y[1] = U0[1];
  SUN_CHECK(CVodeReInit(s->mem, 0.0, s->y));
  if (grad) SUN_CHECK(CVodeAdjReInit(s->mem));
  SUN_CHECK(CVodeSStolerances(s->mem, s->rtol, s->atol));
  SUN_CHECK(CVodeSetStopTime(s->mem, tout[n - 1]));
  out[0] = U0[0];
  out[1] = U0[1];
  for (size_t i = 1; i < n; i++) {
    sunrealtype tret;
    int ncheck, flag;
    if (grad)
      flag = CVodeF(s->mem, tout[i], s->y, &tret, CV_NORMAL, &ncheck);
    else
      flag = CVode(s->mem, tout[i], s->y, &tret, CV_NORMAL);
    if (flag < 0) {
      char call[64];
      snprintf(call, sizeof call, "%s to t = %.6g", grad ? "CVodeF" : "CVode", tout[i]);
      return sun_fail(s, call, flag, 0);
    }
    if (!isfinite(y[0]) || !isfinite(y[1])) {
      node_err(s, "non-finite state u(t = %.6g) = (%g, %g)", tout[i], y[0], y[1]);
      return -1;
    }
    out[2 * i] = y[0];
    out[2 * i + 1] = y[1];
  }
  if (!data) return 0;
  const double w = 2.0 / (2.0 * (double)n); /* dL/du = w (u - data) */
  double sum = 0;
  for (size_t i = 0; i < 2 * n; i++) sum += (out[i] - data[i]) * (out[i] - data[i]);
  *loss = sum / (2.0 * (double)n);
  if (!isfinite(*loss)) {
    node_err(s, "non-finite loss");
    return -1;
  }
  if (!grad) return 0;

  /* adjoint pass: lambda(T) = dL/du(T), qB(T) = 0, backward one data interval at a time */
  double *lam = N_VGetArrayPointer(s->yB);
  const double T = tout[n - 1];
  lam[0] = w * (out[2 * (n - 1)] - data[2 * (n - 1)]);
  lam[1] = w * (out[2 * (n - 1) + 1] - data[2 * (n - 1) + 1]);
  N_VConst(0.0, s->qB);
  if (!s->have_b) {
    SUN_CHECK(CVodeCreateB(s->mem, CV_ADAMS, &s->which));
    void *memB = CVodeGetAdjCVodeBmem(s->mem, s->which);
    if (!memB) {
      node_err(s, "CVodeGetAdjCVodeBmem failed");
      return -1;
    }
    SUN_CHECK(CVodeSetErrHandlerFn(memB, on_sun_error, s));
    SUN_CHECK(CVodeInitB(s->mem, s->which, rhsB, T, s->yB));
    SUN_CHECK(CVodeSetUserDataB(s->mem, s->which, s));
    SUN_CHECK(CVodeSetMaxNumStepsB(s->mem, s->which, MAX_STEPS));
    SUN_CHECK_LS(CVodeSetLinearSolverB(s->mem, s->which, s->LSB, s->JB));
    SUN_CHECK_LS(CVodeSetJacFnB(s->mem, s->which, jacB));
    SUN_CHECK(CVodeQuadInitB(s->mem, s->which, quadB, s->qB));
    /* the quadrature stays out of the error test (CVODES' default): it rides on the steps
     * lambda and u need; including it doubles the cost for no measurable gain in the
     * gradient check */
    SUN_CHECK(CVodeSetQuadErrConB(s->mem, s->which, SUNFALSE));
    s->have_b = 1;
  } else {
    SUN_CHECK(CVodeReInitB(s->mem, s->which, T, s->yB));
    SUN_CHECK(CVodeQuadReInitB(s->mem, s->which, s->qB));
  }
  SUN_CHECK(CVodeSStolerancesB(s->mem, s->which, s->rtol, s->atol));
  for (size_t i = n - 1; i >= 1; i--) {
    sunrealtype tret;
    int flag = CVodeB(s->mem, tout[i - 1], CV_NORMAL);
    if (flag < 0) {
      char call[64];
      snprintf(call, sizeof call, "CVodeB to t = %.6g", tout[i - 1]);
      return sun_fail(s, call, flag, 0);
    }
    SUN_CHECK(CVodeGetB(s->mem, s->which, &tret, s->yB));
    SUN_CHECK(CVodeGetQuadB(s->mem, s->which, &tret, s->qB));
    if (i - 1 == 0) break;
    /* the data point at t_{i-1}: lambda jumps by dL/du(t_{i-1}) */
    lam[0] += w * (out[2 * (i - 1)] - data[2 * (i - 1)]);
    lam[1] += w * (out[2 * (i - 1) + 1] - data[2 * (i - 1) + 1]);
    SUN_CHECK(CVodeReInitB(s->mem, s->which, tout[i - 1], s->yB));
    SUN_CHECK(CVodeQuadReInitB(s->mem, s->which, s->qB));
  }
  const double *q = N_VGetArrayPointer(s->qB);
  for (size_t k = 0; k < s->np; k++) {
    if (!isfinite(q[k])) {
      node_err(s, "non-finite gradient component %zu", k);
      return -1;
    }
    grad[k] = q[k];
  }
  return 0;
}

/* ------------------------------------------------------------------ training */
typedef struct trainer {
  node *s;
  const double *tsave, *data;
  double *traj; /* NPTS x 2 scratch */
  size_t every;
  int iters; /* L-BFGS iterations so far */
  long evals, failed_evals;
  double last_loss, t0;
} trainer;

static lbfgsfloatval_t lb_eval(void *inst, const lbfgsfloatval_t *x, lbfgsfloatval_t *g,
                               const int n, const lbfgsfloatval_t step) {
  trainer *tr = inst;
  double loss;
  (void)step;
  tr->evals++;
  tr->s->p = x;
  if ((size_t)n != tr->s->np || solve(tr->s, tr->tsave, NPTS, tr->traj, tr->data, &loss, g) != 0) {
    /* an infinite loss makes the backtracking line search shorten the step */
    if (tr->failed_evals++ < 3)
      printf("lbfgs: trial point rejected: %s\n",
             (size_t)n != tr->s->np ? "wrong vector length" : tr->s->err);
    for (int k = 0; k < n; k++) g[k] = 0;
    return INFINITY;
  }
  return loss;
}

static int lb_progress(void *inst, const lbfgsfloatval_t *x, const lbfgsfloatval_t *g,
                       const lbfgsfloatval_t fx, const lbfgsfloatval_t xnorm,
                       const lbfgsfloatval_t gnorm, const lbfgsfloatval_t step, int n, int k,
                       int ls) {
  trainer *tr = inst;
  (void)x, (void)g, (void)xnorm, (void)n;
  tr->iters = k;
  tr->last_loss = fx;
  if (tr->every && (k == 1 || k % (int)tr->every == 0))
    printf("lbfgs %5d  loss %.6e  |g| %.3e  step %.3g  (%d evaluations, %.2f s)\n", k, fx, gnorm,
           step, ls, now() - tr->t0);
  fflush(stdout);
  return 0;
}

static const char *lbfgs_status(int r) {
  switch (r) {
  case LBFGS_SUCCESS: return "converged";
  case LBFGS_STOP: return "stopped";
  case LBFGS_ALREADY_MINIMIZED: return "already minimized";
  case LBFGSERR_MAXIMUMITERATION: return "iteration limit reached";
  case LBFGSERR_ROUNDING_ERROR: return "rounding errors prevent progress";
  case LBFGSERR_MINIMUMSTEP: return "line-search step below the minimum";
  case LBFGSERR_MAXIMUMSTEP: return "line-search step above the maximum";
  case LBFGSERR_MAXIMUMLINESEARCH: return "line search reached its evaluation limit";
  case LBFGSERR_WIDTHTOOSMALL: return "line-search interval too small";
  case LBFGSERR_INCREASEGRADIENT: return "search direction is not a descent direction";
  case LBFGSERR_OUTOFMEMORY: return "out of memory";
  case LBFGSERR_INVALID_N:
  case LBFGSERR_INVALID_N_SSE: return "invalid number of variables";
  case LBFGSERR_INVALID_X_SSE: return "misaligned variables";
  case LBFGSERR_CANCELED: return "canceled";
  default: return "error";
  }
}

/* line search / iteration-limit endings keep the best point found (liblbfgs reverts to
 * it); these codes are normal ends of a run, the others are failures */
static int lbfgs_fatal(int r) {
  return r == LBFGSERR_OUTOFMEMORY || r == LBFGSERR_INVALID_N || r == LBFGSERR_INVALID_N_SSE ||
         r == LBFGSERR_INVALID_X_SSE || r == LBFGSERR_LOGICERROR || r == LBFGSERR_UNKNOWNERROR ||
         (r >= LBFGSERR_INVALID_EPSILON && r <= LBFGSERR_INVALID_ORTHANTWISE_END);
}

/* ------------------------------------------------------------------ SVG */
typedef struct frame {
  double x0, x1, y0, y1; /* data range */
  double px, py, pw, ph; /* pixel rectangle */
  double xstep, ystep;   /* tick spacing */
} frame;

/* pixel coordinates, clamped far outside the picture (where the clip path hides them) so
 * that a diverging model curve never prints huge numbers */
static double clamp_px(double v) { return v < -1e5 ? -1e5 : v > 1e5 ? 1e5 : v; }
static double fx_(const frame *f, double x) {
  return clamp_px(f->px + (x - f->x0) / (f->x1 - f->x0) * f->pw);
}
static double fy_(const frame *f, double y) {
  return clamp_px(f->py + f->ph - (y - f->y0) / (f->y1 - f->y0) * f->ph);
}

/* a round tick spacing (1, 2 or 5 times a power of ten) giving about target ticks */
static double nice_step(double lo, double hi, int target) {
  double raw = (hi - lo) / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

/* sets the range to [lo, hi] widened by margin (a fraction), and its tick spacing */
static void set_range(double *r0, double *r1, double *step, double lo, double hi, double margin,
                      int target) {
  if (!(hi > lo)) {
    lo -= 1;
    hi += 1;
  }
  double m = margin * (hi - lo);
  *r0 = lo - m;
  *r1 = hi + m;
  *step = nice_step(*r0, *r1, target);
}

static void tick_label(char *buf, size_t cap, double v, double step) {
  int dec = 0; /* the decimals step needs: 0.25 -> 2 */
  while (dec < 8 && fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-6) dec++;
  if (fabs(v) < 1e-6 * step) v = 0; /* no "-0" */
  snprintf(buf, cap, "%.*f", dec, v);
}

/* the ticks inside [lo, hi]: k * step for k in [*k0, *k1] */
static void tick_span(double lo, double hi, double step, long *k0, long *k1) {
  *k0 = (long)ceil(lo / step - 1e-9);
  *k1 = (long)floor(hi / step + 1e-9);
}

static void svg_axes(FILE *o, const frame *f, const char *title, const char *xlabel,
                     const char *ylabel) {
  char lab[64];
  long kx0, kx1, ky0, ky1;
  tick_span(f->x0, f->x1, f->xstep, &kx0, &kx1);
  tick_span(f->y0, f->y1, f->ystep, &ky0, &ky1);
  fprintf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#ffffff'/>\n", f->px, f->py,
          f->pw, f->ph);
  fprintf(o, "<g stroke='#e6e6e6' stroke-width='1'>\n");
  for (long k = kx0; k <= kx1; k++)
    fprintf(o, "<line x1='%.2f' y1='%.2f' x2='%.2f' y2='%.2f'/>\n", fx_(f, k * f->xstep), f->py,
            fx_(f, k * f->xstep), f->py + f->ph);
  for (long k = ky0; k <= ky1; k++)
    fprintf(o, "<line x1='%.2f' y1='%.2f' x2='%.2f' y2='%.2f'/>\n", f->px, fy_(f, k * f->ystep),
            f->px + f->pw, fy_(f, k * f->ystep));
  fprintf(o,
          "</g>\n<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
          "stroke='#444444' stroke-width='1'/>\n",
          f->px, f->py, f->pw, f->ph);
  fprintf(o, "<g font-size='12' fill='#333333' stroke='none'>\n");
  for (long k = kx0; k <= kx1; k++) {
    double v = k * f->xstep, x = fx_(f, v);
    tick_label(lab, sizeof lab, v, f->xstep);
    fprintf(o, "<line x1='%.2f' y1='%.2f' x2='%.2f' y2='%.2f' stroke='#444444'/>\n", x,
            f->py + f->ph, x, f->py + f->ph + 5);
    fprintf(o, "<text x='%.2f' y='%.2f' text-anchor='middle'>%s</text>\n", x, f->py + f->ph + 19,
            lab);
  }
  for (long k = ky0; k <= ky1; k++) {
    double v = k * f->ystep, y = fy_(f, v);
    tick_label(lab, sizeof lab, v, f->ystep);
    fprintf(o, "<line x1='%.2f' y1='%.2f' x2='%.2f' y2='%.2f' stroke='#444444'/>\n", f->px - 5, y,
            f->px, y);
    fprintf(o, "<text x='%.2f' y='%.2f' text-anchor='end'>%s</text>\n", f->px - 8, y + 4, lab);
  }
  fprintf(o, "</g>\n<g font-size='14' fill='#111111'>\n");
  fprintf(o, "<text x='%.2f' y='%.2f' text-anchor='middle'>%s</text>\n", f->px + f->pw / 2,
          f->py + f->ph + 40, xlabel);
  fprintf(o, "<text transform='translate(%.2f %.2f) rotate(-90)' text-anchor='middle'>%s</text>\n",
          f->px - 46, f->py + f->ph / 2, ylabel);
  fprintf(o, "<text x='%.2f' y='%.2f' font-weight='bold' text-anchor='middle'>%s</text>\n",
          f->px + f->pw / 2, f->py - 10, title);
  fprintf(o, "</g>\n");
}

/* a polyline through (xs[i*sx], ys[i*sy]), clipped to the clip path clip */
static void svg_line(FILE *o, const frame *f, const char *clip, const double *xs, size_t sx,
                     const double *ys, size_t sy, size_t n, const char *color, double width,
                     const char *dash) {
  fprintf(o,
          "<polyline clip-path='url(#%s)' fill='none' stroke='%s' stroke-width='%.1f' "
          "stroke-linejoin='round'%s%s%s points='",
          clip, color, width, dash ? " stroke-dasharray='" : "", dash ? dash : "", dash ? "'" : "");
  for (size_t i = 0; i < n; i++)
    fprintf(o, "%.2f,%.2f%s", fx_(f, xs[i * sx]), fy_(f, ys[i * sy]), i + 1 < n ? " " : "");
  fprintf(o, "'/>\n");
}

static void svg_points(FILE *o, const frame *f, const double *xs, size_t sx, const double *ys,
                       size_t sy, size_t n, const char *color) {
  fprintf(o, "<g fill='#ffffff' stroke='%s' stroke-width='1.6'>\n", color);
  for (size_t i = 0; i < n; i++)
    fprintf(o, "<circle cx='%.2f' cy='%.2f' r='3.6'/>\n", fx_(f, xs[i * sx]), fy_(f, ys[i * sy]));
  fprintf(o, "</g>\n");
}

/* one legend entry at (x, y): a line sample (dash may be NULL) or, with dot, a data marker */
static void svg_legend(FILE *o, double x, double y, const char *color, const char *dash, int dot,
                       double width, const char *text) {
  if (dot)
    fprintf(o,
            "<circle cx='%.1f' cy='%.1f' r='3.6' fill='#ffffff' stroke='%s' "
            "stroke-width='1.6'/>\n",
            x + 14, y - 4, color);
  else
    fprintf(
        o,
        "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' stroke-width='%.1f'%s%s%s/>\n",
        x, y - 4, x + 28, y - 4, color, width, dash ? " stroke-dasharray='" : "", dash ? dash : "",
        dash ? "'" : "");
  fprintf(o, "<text x='%.1f' y='%.1f' font-size='12.5' fill='#111111'>%s</text>\n", x + 36, y,
          text);
}

static void minmax(const double *v, size_t n, size_t stride, double *lo, double *hi) {
  for (size_t i = 0; i < n; i++) {
    if (v[i * stride] < *lo) *lo = v[i * stride];
    if (v[i * stride] > *hi) *hi = v[i * stride];
  }
}

/* The plot: left the phase plane (u1, u2), right u1 and u2 against t; the true trajectory
 * (ftrue), the fitted one (ffit) and, if finit is not NULL, the untrained model's, all at
 * the NFINE times tfine; the data as markers. The axes fit the truth and the data; the
 * model curves are clipped to them. */
static int write_svg(const char *path, const double *tfine, const double *ftrue, const double *ffit,
                     const double *finit, const double *tsave, const double *data,
                     const char *subtitle) {
  FILE *o = fopen(path, "w");
  if (!o) {
    fprintf(stderr, "neural_ode: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  const double W = 1040, H = 560;
  const char *c_true = "#222222", *c_fit = "#d62728", *c_init = "#9a9a9a";
  const char *c_u1 = "#1f77b4", *c_u2 = "#ff7f0e", *c_u1f = "#0b3d66", *c_u2f = "#a34d00";
  const char *fit_dash = "7 4", *init_dash = "2 3";
  double lo1 = INFINITY, hi1 = -INFINITY, lo2 = INFINITY, hi2 = -INFINITY;
  minmax(ftrue, NFINE, 2, &lo1, &hi1);
  minmax(ftrue + 1, NFINE, 2, &lo2, &hi2);
  minmax(data, NPTS, 2, &lo1, &hi1);
  minmax(data + 1, NPTS, 2, &lo2, &hi2);
  frame ph = {0, 0, 0, 0, 90, 90, 380, 340, 0, 0};
  set_range(&ph.x0, &ph.x1, &ph.xstep, lo1, hi1, 0.08, 8);
  set_range(&ph.y0, &ph.y1, &ph.ystep, lo2, hi2, 0.08, 8);
  frame tm = {0, T_END, 0, 0, 570, 90, 440, 340, 0.25, 0};
  set_range(&tm.y0, &tm.y1, &tm.ystep, fmin(lo1, lo2), fmax(hi1, hi2), 0.06, 8);

  fprintf(o,
          "<?xml version='1.0' encoding='UTF-8'?>\n"
          "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
          "viewBox='0 0 %.0f %.0f' font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>\n",
          W, H, W, H);
  fprintf(o, "<rect width='100%%' height='100%%' fill='#f7f7f7'/>\n");
  fprintf(o,
          "<defs>\n<clipPath id='cp'><rect x='%.1f' y='%.1f' width='%.1f' height='%.1f'/>"
          "</clipPath>\n<clipPath id='ct'><rect x='%.1f' y='%.1f' width='%.1f' height='%.1f'/>"
          "</clipPath>\n</defs>\n",
          ph.px, ph.py, ph.pw, ph.ph, tm.px, tm.py, tm.pw, tm.ph);
  fprintf(o,
          "<text x='%.1f' y='32' font-size='19' font-weight='bold' text-anchor='middle' "
          "fill='#111111'>Neural ODE u&#8242; = NN(u&#179;) fitted to the spiral u&#8242; = "
          "A u&#179;</text>\n",
          W / 2);
  fprintf(o, "<text x='%.1f' y='56' font-size='13' text-anchor='middle' fill='#444444'>%s</text>\n",
          W / 2, subtitle);

  /* left: the phase plane */
  svg_axes(o, &ph, "phase plane", "u&#8321;", "u&#8322;");
  if (finit) svg_line(o, &ph, "cp", finit, 2, finit + 1, 2, NFINE, c_init, 1.6, init_dash);
  svg_line(o, &ph, "cp", ftrue, 2, ftrue + 1, 2, NFINE, c_true, 2.0, NULL);
  svg_line(o, &ph, "cp", ffit, 2, ffit + 1, 2, NFINE, c_fit, 2.2, fit_dash);
  svg_points(o, &ph, data, 2, data + 1, 2, NPTS, c_true);
  double ly = ph.py + ph.ph + 72;
  svg_legend(o, ph.px, ly, c_true, NULL, 0, 2.0, "true (CVODES, rtol 1e-12)");
  svg_legend(o, ph.px + 215, ly, c_fit, fit_dash, 0, 2.2, "fitted neural ODE");
  svg_legend(o, ph.px, ly + 22, c_true, NULL, 1, 0, "data (30 points)");
  if (finit) svg_legend(o, ph.px + 215, ly + 22, c_init, init_dash, 0, 1.6, "untrained model");

  /* right: the components against time */
  svg_axes(o, &tm, "components against time", "t", "u&#8321;, u&#8322;");
  if (finit) {
    svg_line(o, &tm, "ct", tfine, 1, finit, 2, NFINE, c_init, 1.6, init_dash);
    svg_line(o, &tm, "ct", tfine, 1, finit + 1, 2, NFINE, c_init, 1.6, init_dash);
  }
  svg_line(o, &tm, "ct", tfine, 1, ftrue, 2, NFINE, c_u1, 2.0, NULL);
  svg_line(o, &tm, "ct", tfine, 1, ftrue + 1, 2, NFINE, c_u2, 2.0, NULL);
  svg_line(o, &tm, "ct", tfine, 1, ffit, 2, NFINE, c_u1f, 2.0, fit_dash);
  svg_line(o, &tm, "ct", tfine, 1, ffit + 1, 2, NFINE, c_u2f, 2.0, fit_dash);
  svg_points(o, &tm, tsave, 1, data, 2, NPTS, c_u1);
  svg_points(o, &tm, tsave, 1, data + 1, 2, NPTS, c_u2);
  svg_legend(o, tm.px, ly, c_u1, NULL, 0, 2.0, "u&#8321; true");
  svg_legend(o, tm.px + 130, ly, c_u1f, fit_dash, 0, 2.0, "u&#8321; fitted");
  svg_legend(o, tm.px + 270, ly, c_u1, NULL, 1, 0, "u&#8321; data");
  svg_legend(o, tm.px, ly + 22, c_u2, NULL, 0, 2.0, "u&#8322; true");
  svg_legend(o, tm.px + 130, ly + 22, c_u2f, fit_dash, 0, 2.0, "u&#8322; fitted");
  svg_legend(o, tm.px + 270, ly + 22, c_u2, NULL, 1, 0, "u&#8322; data");
  fprintf(o, "</svg>\n");
  int bad = ferror(o);
  if (fclose(o) != 0 || bad) {
    fprintf(stderr, "neural_ode: error writing %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ command line */
static void usage(FILE *f) {
  fprintf(f,
          "usage: neural_ode [options]\n"
          "Fits the neural ODE u' = NN(u^3), NN = 2 -> 50 tanh -> 2 (simplechain, double), to 30\n"
          "points of the spiral u' = A u^3, A = [[-0.1, 2], [-2, -0.1]], u(0) = (2, 0), t in\n"
          "[0, 1.5]. Gradients by SUNDIALS CVODES adjoint sensitivities; ADAM, then L-BFGS.\n\n"
          "  --iters N       ADAM iterations (default 300, 0 = none)\n"
          "  --lbfgs N       L-BFGS iterations after ADAM, at most (default 200, 0 = none)\n"
          "  --lr LR         ADAM learning rate (default 0.05)\n"
          "  --seed S        seed of the initial parameters (default 1)\n"
          "  --rtol TOL      relative tolerance of the training solves, absolute = TOL/100\n"
          "                  (default 1e-8)\n"
          "  --every N       print the loss every N iterations (default 10, 0 = never)\n"
          "  --init-scale S  multiply the initial (Glorot) parameters by S (default 1)\n"
          "  --out FILE.svg  plot the data, the true and the fitted trajectories\n"
          "  --check-grad    compare the adjoint gradient with central finite differences of\n"
          "                  the whole solve for a few parameters, print the max relative error\n"
          "  --help          this text\n"
          "\"loss\" is the mean over the 30 points and 2 components of the squared error.\n");
}

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || end == s || s[0] == '-' || v > 100000000ull) return 0;
  *out = (size_t)v;
  return 1;
}

static int parse_pos(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !isfinite(v) || !(v > 0)) return 0;
  *out = v;
  return 1;
}

/* the parameters the gradient check looks at: some of each block of the 2 -> 50 -> 2
 * chain (W1 50x2, b1, W2 2x50, b2) */
static const size_t CHECK_IDX[] = {0, 37, 99, 100, 125, 149, 150, 201, 249, 250, 251};
#define NCHECK (sizeof CHECK_IDX / sizeof CHECK_IDX[0])

int main(int argc, char **argv) {
  size_t iters = 300, nlbfgs = 200, every = 10, seed = 1;
  double lr = 0.05, rtol = 1e-8, init_scale = 1;
  const char *out_path = NULL;
  int check_grad = 0;
  setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines and error messages in order */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--check-grad")) {
      check_grad = 1;
      continue;
    }
    if (strcmp(a, "--iters") && strcmp(a, "--lbfgs") && strcmp(a, "--every") &&
        strcmp(a, "--seed") && strcmp(a, "--lr") && strcmp(a, "--rtol") &&
        strcmp(a, "--init-scale") && strcmp(a, "--out")) {
      fprintf(stderr, "neural_ode: unknown option '%s' (see --help)\n", a);
      return 2;
    }
    if (!v) {
      fprintf(stderr, "neural_ode: %s needs a value (see --help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--iters"))
      ok = parse_size(v, &iters);
    else if (!strcmp(a, "--lbfgs"))
      ok = parse_size(v, &nlbfgs) && nlbfgs <= 1000000;
    else if (!strcmp(a, "--every"))
      ok = parse_size(v, &every);
    else if (!strcmp(a, "--seed"))
      ok = parse_size(v, &seed);
    else if (!strcmp(a, "--lr"))
      ok = parse_pos(v, &lr);
    else if (!strcmp(a, "--rtol"))
      ok = parse_pos(v, &rtol) && rtol < 0.1;
    else if (!strcmp(a, "--init-scale"))
      ok = parse_pos(v, &init_scale);
    else if (!strcmp(a, "--out"))
      ok = *(out_path = v) != 0 && strncmp(v, "--", 2) != 0;
    if (!ok) {
      fprintf(stderr, "neural_ode: bad value '%s' for %s (see --help)\n", v, a);
      return 2;
    }
    i++;
  }

  if (!example_writable("neural_ode", out_path)) return 2;
  int rc = 1;
  sc_chain *chain = NULL;
  node S;
  int node_up = 0;
  double *p = NULL, *p0 = NULL, *g = NULL, *m = NULL, *vv = NULL, *best = NULL, *traj = NULL;
  double tsave[NPTS], data[2 * NPTS], tfine[NFINE], ftrue[2 * NFINE], ffit[2 * NFINE],
      finit[2 * NFINE];
  sc_status st;
  sc_layer layers[] = {sc_dense(HIDDEN, SC_TANH), sc_dense(2, SC_IDENTITY)};
  if ((st = sc_chain_create(&chain, 2, layers, 2)) != SC_OK) {
    fprintf(stderr, "neural_ode: %s: %s\n", sc_status_str(st), sc_last_error());
    return 1;
  }
  size_t np = 0, nin = 0, nout = 0;
  sc_chain_nparams(chain, &np);
  sc_chain_input_size(chain, &nin);
  sc_chain_output_size(chain, &nout);
  if (nin != NS || nout != NS || np != 2 * HIDDEN + HIDDEN + HIDDEN * 2 + 2) {
    fprintf(stderr,
            "neural_ode: chain has %zu inputs, %zu outputs, %zu parameters; expected "
            "2, 2, %d\n",
            nin, nout, np, 2 * HIDDEN + HIDDEN + HIDDEN * 2 + 2);
    goto out;
  }
  p = lbfgs_malloc((int)np); /* L-BFGS works on p in place */
  g = calloc(np, sizeof *g);
  m = calloc(np, sizeof *m);
  vv = calloc(np, sizeof *vv);
  best = calloc(np, sizeof *best);
  p0 = calloc(np, sizeof *p0);
  traj = calloc(2 * NPTS, sizeof *traj);
  if (!p || !p0 || !g || !m || !vv || !best || !traj) {
    fprintf(stderr, "neural_ode: out of memory\n");
    goto out;
  }
  if ((st = sc_params_init_f64(chain, p, np, seed)) != SC_OK) {
    fprintf(stderr, "neural_ode: %s: %s\n", sc_status_str(st), sc_last_error());
    goto out;
  }
  for (size_t k = 0; k < np; k++) p[k] *= init_scale;
  memcpy(p0, p, np * sizeof *p);
  if (node_init(&S, chain, np) != 0) {
    fprintf(stderr, "neural_ode: setting up CVODES: %s\n", S.err);
    node_free(&S);
    goto out;
  }
  node_up = 1;

  /* the data */
  for (int i = 0; i < NPTS; i++) tsave[i] = T_END * i / (NPTS - 1);
  for (int i = 0; i < NFINE; i++) tfine[i] = T_END * i / (NFINE - 1);
  S.truth = 1;
  S.rtol = 1e-12;
  S.atol = 1e-14;
  if (solve(&S, tsave, NPTS, data, NULL, NULL, NULL) != 0) {
    fprintf(stderr, "neural_ode: solving the data ODE: %s\n", S.err);
    goto out;
  }
  S.truth = 0;
  printf("neural_ode: spiral u' = A u^3, %d points on [0, %.1f], u(%.1f) = (%.4f, %.4f)\n", NPTS,
         T_END, T_END, data[2 * NPTS - 2], data[2 * NPTS - 1]);
  printf(
      "model u' = NN(u^3), NN 2 -> %d tanh -> 2 (%zu parameters, double, kernels %s), seed %zu\n",
      HIDDEN, np, sc_chain_isa(chain), seed);

  if (check_grad) {
    /* tight tolerances: the adjoint gradient is the gradient of the exact solution, the
     * finite differences are of the numerical solve, whose error changes unevenly with p
     * (the step sequence changes); at rtol 1e-12 that noise is ~1e-12 / h */
    S.rtol = 1e-12;
    S.atol = 1e-14;
    S.p = p;
    double loss, t0 = now();
    if (solve(&S, tsave, NPTS, traj, data, &loss, g) != 0) {
      fprintf(stderr, "neural_ode: adjoint gradient: %s\n", S.err);
      goto out;
    }
    double t_adj = now() - t0, gmax = 0, maxrel = 0;
    for (size_t k = 0; k < np; k++) gmax = fmax(gmax, fabs(g[k]));
    printf("check-grad: loss %.6e, |dL/dp|_max %.3e, adjoint gradient in %.1f ms (rtol %g)\n", loss,
           gmax, 1e3 * t_adj, S.rtol);
    printf("  param  adjoint          finite diff.     rel. error\n");
    const double h = 1e-4;
    for (size_t c = 0; c < NCHECK; c++) {
      size_t k = CHECK_IDX[c];
      double keep = p[k], lp, lm;
      p[k] = keep + h;
      int e1 = solve(&S, tsave, NPTS, traj, data, &lp, NULL);
      p[k] = keep - h;
      int e2 = e1 ? e1 : solve(&S, tsave, NPTS, traj, data, &lm, NULL);
      p[k] = keep;
      if (e1 || e2) {
        fprintf(stderr, "neural_ode: finite differences: %s\n", S.err);
        goto out;
      }
      double fd = (lp - lm) / (2 * h);
      /* relative to the larger of the two, floored at 1e-3 of the largest component */
      double rel = fabs(fd - g[k]) / fmax(fmax(fabs(fd), fabs(g[k])), 1e-3 * gmax);
      maxrel = fmax(maxrel, rel);
      printf("  %5zu  %+.9e  %+.9e  %.2e\n", k, g[k], fd, rel);
    }
    printf("check-grad: max relative error %.3e over %zu parameters (h = %g)\n", maxrel,
           (size_t)NCHECK, h);
    printf("RESULT check_grad params=%zu max_rel_err=%.3e\n", (size_t)NCHECK, maxrel);
    rc = 0;
    goto out;
  }

  /* ADAM */
  S.rtol = rtol;
  S.atol = rtol * 1e-2;
  S.p = p;
  double t_start = now(), loss = NAN, adam_loss, best_loss = INFINITY;
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (size_t it = 1; it <= iters; it++) {
    if (solve(&S, tsave, NPTS, traj, data, &loss, g) != 0) {
      fprintf(stderr, "neural_ode: ADAM iteration %zu: %s\n", it, S.err);
      goto out;
    }
    if (loss < best_loss) {
      best_loss = loss;
      memcpy(best, p, np * sizeof *p);
    }
    if (every && (it == 1 || it % every == 0 || it == iters))
      printf("adam  %5zu  loss %.6e  (%.2f s)\n", it, loss, now() - t_start);
    fflush(stdout);
    double c1 = 1 - pow(b1, (double)it), c2 = 1 - pow(b2, (double)it);
    for (size_t k = 0; k < np; k++) {
      m[k] = b1 * m[k] + (1 - b1) * g[k];
      vv[k] = b2 * vv[k] + (1 - b2) * g[k] * g[k];
      p[k] -= lr * (m[k] / c1) / (sqrt(vv[k] / c2) + eps);
    }
  }
  /* the loss after the last update; ADAM is not monotone, keep the best point seen */
  if (solve(&S, tsave, NPTS, traj, data, &loss, NULL) != 0) {
    if (!iters) {
      fprintf(stderr, "neural_ode: %s\n", S.err);
      goto out;
    }
    printf("adam: the last update fails to solve (%s); keeping the best point\n", S.err);
    loss = INFINITY;
  }
  if (iters && best_loss < loss) {
    memcpy(p, best, np * sizeof *p);
    loss = best_loss;
  }
  adam_loss = loss;
  double t_adam = now() - t_start;
  if (iters)
    printf("adam: %zu iterations, loss %.6e, %.2f s (%.1f ms per loss + gradient)\n", iters,
           adam_loss, t_adam, 1e3 * t_adam / (double)(iters + 1));

  /* L-BFGS */
  trainer tr = {&S, tsave, data, traj, every, 0, 0, 0, loss, now()};
  if (nlbfgs) {
    lbfgs_parameter_t prm;
    lbfgs_parameter_init(&prm);
    prm.m = 10;
    prm.max_iterations = (int)nlbfgs;
    prm.epsilon = 1e-10;
    prm.linesearch = LBFGS_LINESEARCH_BACKTRACKING; /* handles a failed (infinite) trial */
    lbfgsfloatval_t fx = loss;
    int r = lbfgs((int)np, p, &fx, lb_eval, lb_progress, &tr, &prm);
    S.p = p;
    printf("lbfgs: %d iterations, %ld evaluations: %s (%d)\n", tr.iters, tr.evals, lbfgs_status(r),
           r);
    if (lbfgs_fatal(r)) {
      fprintf(stderr, "neural_ode: L-BFGS failed: %s (%d)\n", lbfgs_status(r), r);
      goto out;
    }
    if (solve(&S, tsave, NPTS, traj, data, &loss, NULL) != 0) {
      fprintf(stderr, "neural_ode: after L-BFGS: %s\n", S.err);
      goto out;
    }
  }
  double t_total = now() - t_start;
  printf("fit: loss (MSE over %d points x 2) %.6e after ADAM (%zu), %.6e after L-BFGS (%d); "
         "%.2f s in all\n",
         NPTS, adam_loss, iters, loss, tr.iters, t_total);
  if (S.nwarn) printf("(CVODES issued %ld warnings)\n", S.nwarn);

  if (out_path) {
    S.truth = 1;
    S.rtol = 1e-12;
    S.atol = 1e-14;
    if (solve(&S, tfine, NFINE, ftrue, NULL, NULL, NULL) != 0) {
      fprintf(stderr, "neural_ode: solving the data ODE for the plot: %s\n", S.err);
      goto out;
    }
    S.truth = 0;
    S.rtol = 1e-10;
    S.atol = 1e-12;
    if (solve(&S, tfine, NFINE, ffit, NULL, NULL, NULL) != 0) {
      fprintf(stderr, "neural_ode: solving the fitted ODE for the plot: %s\n", S.err);
      goto out;
    }
    S.p = p0; /* the untrained model, drawn when it solves */
    int have_init = solve(&S, tfine, NFINE, finit, NULL, NULL, NULL) == 0;
    S.p = p;
    char sub[256];
    snprintf(sub, sizeof sub,
             "NN 2 &#8594; %d tanh &#8594; 2 (simplechain, double), CVODES adjoints; "
             "%zu ADAM + %d L-BFGS iterations; MSE %.3g",
             HIDDEN, iters, tr.iters, loss);
    if (write_svg(out_path, tfine, ftrue, ffit, have_init ? finit : NULL, tsave, data, sub) != 0)
      goto out;
    printf("wrote %s\n", out_path);
  }
  printf("RESULT adam_iters=%zu adam_loss=%.6e lbfgs_iters=%d loss=%.6e seconds=%.3f\n", iters,
         adam_loss, tr.iters, loss, t_total);
  rc = 0;
out:
  if (node_up) node_free(&S);
  if (p) lbfgs_free(p);
  free(g);
  free(m);
  free(vv);
  free(best);
  free(p0);
  free(traj);
  sc_chain_destroy(chain);
  return rc;
}
