/* toy2x2 — the SimpleChains.jl benchmark: learn the matrix exponential of 2x2 matrices.
 *
 * X: samples of 4 standard-normal floats, read as the 2x2 matrix [[x0, x1], [x2, x3]];
 * Y: the 4 entries of exp(X), computed in double with the closed form for 2x2 matrices.
 * Network 4 -> 32 tanh -> 16 tanh -> 4, full-batch ADAM, squared loss.
 *
 *   toy2x2 [--steps N] [--samples N] [--seed S] [--lr LR] [--threads T]
 *          [--every N] [--save FILE] [--export FILE.npz]
 *          [--checkpoint FILE [--every-steps N] [--resume]]
 *          [--clip NORM] [--precision P] [--profile] [--quiet] [--help]
 *
 * "MSE" below is the mean over samples and the 4 outputs of the squared error (the
 * library's squared loss sums over outputs, so MSE = loss / 4).
 */
#include "simplechain.h"
#include "example_util.h"
#include "toy_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* multiply-adds of one sample's forward + pullback, x2 for flops:
 * forward W1..W3 (4*32 + 32*16 + 16*4), dW the same, dX for layers 2 and 3 */
#define TOY_FLOPS_PER_SAMPLE_STEP (2.0 * (704 + 704 + 576))

typedef struct {
  const sc_chain *chain;
  const float *xt, *yt;
  size_t ntest;
  sc_workspace *ws_test;
  double last_t;
  size_t last_step;
  int quiet;
} monitor;

static int on_progress(const sc_progress *pr, void *user) {
  monitor *m = user;
  float test_loss = NAN;
  if (sc_loss_value(m->chain, SC_LOSS_SQUARED, pr->p, m->xt, m->yt, m->ntest, &test_loss,
                    m->ws_test) != SC_OK)
    fprintf(stderr, "toy2x2: test loss failed: %s\n", sc_last_error());
  double dt = pr->seconds - m->last_t;
  double rate = dt > 0 ? (double)(pr->step - m->last_step) / dt : 0;
  m->last_t = pr->seconds;
  m->last_step = pr->step;
  if (!m->quiet)
    printf("step %7zu/%zu  train MSE %.5f  test MSE %.5f  %8.0f steps/s\n", pr->step,
           pr->total_steps, pr->loss / 4, test_loss / 4, rate);
  fflush(stdout);
  return 0;
}

static void usage(FILE *f) {
  fprintf(
      f, "usage: toy2x2 [options]\n"
         "Trains 4 -> 32 tanh -> 16 tanh -> 4 to map a 2x2 matrix to its matrix exponential\n"
         "(full-batch ADAM, squared loss), like the SimpleChains.jl benchmark.\n\n"
         "  --steps N      ADAM steps (default 10000)\n"
         "  --samples N    training samples; a separate test set of the same size (default 10000)\n"
         "  --seed S       seed for data and initial parameters (default 1)\n"
         "  --lr LR        learning rate (default 1e-3)\n"
         "  --threads T    threads (default 1); results do not depend on it\n"
         "  --every N      progress line every N steps (default 1000, 0 = none)\n"
         "  --save FILE    write the trained parameters (sc_params_save format)\n"
         "  --export FILE  write them as NumPy .npz, named as torch.nn.Sequential's state_dict\n"
         "                 (Linear(4,32), Tanh, Linear(32,16), Tanh, Linear(16,4))\n"
         "  --checkpoint FILE  write a checkpoint (atomic, checksummed) every --every-steps\n"
         "                 steps and at the end; with --resume a run killed at any moment\n"
         "                 continues from it and ends bit for bit as an uninterrupted one\n"
         "  --every-steps N  steps between checkpoints (default 1000)\n"
         "  --resume       continue from --checkpoint FILE if it exists\n"
         "  --clip NORM    clip the gradient's L2 norm to NORM (default: off)\n"
         "  --profile      print the time and GFLOP/s of every layer (also SC_PROFILE=1)\n"
         "  --precision P  fp32 (default), bf16 (bfloat16 operands for the dense layers'\n"
         "                 matrix work, float accumulation; needs AVX512_BF16), or\n"
         "                 bf16-emulated (the same rounding by the float kernels, any CPU);\n"
         "                 the MSEs are then computed in that precision too\n"
         "  --quiet        only the final summary\n"
         "  --help         this text\n");
}

int main(int argc, char **argv) {
  size_t steps = 10000, samples = 10000, every = 1000;
  unsigned long long seed = 1;
  double lr = 1e-3;
  int threads = 1, quiet = 0, resume = 0, profile = 0;
  const char *save = NULL, *export_npz = NULL;
  example_run_flags rf = {NULL, 1000, 0}; /* --checkpoint, --every-steps, --clip */
  sc_precision prec = SC_PRECISION_FP32;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--quiet")) {
      quiet = 1;
      continue;
    } else if (!strcmp(a, "--resume")) {
      resume = 1;
      continue;
    } else if (!strcmp(a, "--profile")) {
      profile = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "toy2x2: %s needs a value (see --help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--steps"))
      ok = example_size(v, &steps) && steps > 0;
    else if (!strcmp(a, "--samples"))
      ok = example_size(v, &samples) && samples > 0;
    else if (!strcmp(a, "--every"))
      ok = example_size(v, &every);
    else if (!strcmp(a, "--seed")) {
      size_t s;
      ok = example_size(v, &s);
      seed = s;
    } else if (!strcmp(a, "--lr")) {
      char *end;
      lr = strtod(v, &end);
      ok = *end == 0 && lr > 0 && isfinite(lr);
    } else if (!strcmp(a, "--threads")) {
      size_t t;
      ok = example_size(v, &t) && t >= 1 && t <= 1024;
      threads = (int)t;
    } else if (!strcmp(a, "--save"))
      save = v;
    else if (!strcmp(a, "--export"))
      export_npz = v;
    else if (!strcmp(a, "--precision"))
      ok = example_precision(v, &prec);
    else if (example_run_flag(&rf, a, v, &ok))
      ;
    else {
      fprintf(stderr, "toy2x2: unknown option '%s' (see --help)\n", a);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "toy2x2: bad value '%s' for %s\n", v, a);
      return 2;
    }
    i++;
  }

  if (samples > SIZE_MAX / (4 * sizeof(float))) {
    fprintf(stderr, "toy2x2: --samples %zu is too large for this machine's address space\n",
            samples);
    return 2;
  }
  if (resume && !rf.checkpoint) {
    fprintf(stderr, "toy2x2: --resume needs --checkpoint FILE\n");
    return 2;
  }
  if (!example_writable("toy2x2", save) || !example_writable("toy2x2", export_npz) ||
      !example_writable("toy2x2", rf.checkpoint))
    return 2;
  sc_layer layers[] = {sc_dense(32, SC_TANH), sc_dense(16, SC_TANH), sc_dense(4, SC_IDENTITY)};
  sc_chain *chain = NULL;
  sc_workspace *ws_test = NULL;
  float *x = NULL, *y = NULL, *xt = NULL, *yt = NULL, *p = NULL;
  int rc = 1;
  sc_status st;
#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((st = (call)) != SC_OK) {                                                                  \
      fprintf(stderr, "toy2x2: %s: %s\n", sc_status_str(st), sc_last_error());                     \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)
  CHECK(sc_chain_create(&chain, 4, layers, 3));
  size_t np;
  CHECK(sc_chain_nparams(chain, &np));
  x = malloc(samples * 4 * sizeof *x);
  y = malloc(samples * 4 * sizeof *y);
  xt = malloc(samples * 4 * sizeof *xt);
  yt = malloc(samples * 4 * sizeof *yt);
  p = malloc(np * sizeof *p);
  if (!x || !y || !xt || !yt || !p) {
    fprintf(stderr, "toy2x2: out of memory for %zu samples\n", samples);
    goto out;
  }
  make_data(x, y, samples, seed * 2 + 1);
  make_data(xt, yt, samples, seed * 2 + 2);
  CHECK(sc_params_init(chain, p, np, seed));
  CHECK(sc_workspace_create(&ws_test, chain, samples));
  if ((st = sc_workspace_set_precision(ws_test, prec)) != SC_OK) {
    fprintf(stderr, "toy2x2: %s: %s\n", sc_status_str(st), sc_last_error());
    if (st == SC_ERR_UNSUPPORTED)
      fprintf(stderr, "toy2x2: --precision bf16-emulated runs anywhere\n");
    goto out;
  }
  if (!quiet) {
    char buf[1024];
    sc_chain_summary(chain, buf, sizeof buf, NULL);
    printf("toy2x2: %zu train + %zu test samples, %zu steps, lr %g, %d thread(s), seed %llu, "
           "precision %s\n%s",
           samples, samples, steps, lr, threads, seed, sc_precision_name(prec), buf);
  }
  monitor mon = {chain, xt, yt, samples, ws_test, 0, 0, quiet};
  sc_train_opts opts = sc_train_defaults();
  opts.optim = sc_adam(lr);
  opts.epochs = steps; /* full batch: one step per epoch */
  opts.batch_size = 0;
  opts.threads = threads;
  opts.seed = seed;
  opts.progress_every = every;
  opts.progress = every ? on_progress : NULL;
  opts.user = &mon;
  opts.clip_norm = rf.clip;
  opts.checkpoint = rf.checkpoint;
  opts.checkpoint_every = rf.checkpoint ? rf.every_steps : 0;
  opts.resume = resume;
  opts.precision = prec;
  sc_layer_profile prof[3 + 2];
  if (example_profile_wanted(profile)) opts.profile = prof, opts.profile_rows = 5;
  if (resume && !quiet) {
    sc_checkpoint_state cs;
    if (sc_checkpoint_info(chain, rf.checkpoint, &cs) == SC_OK)
      printf("resuming from %s at step %zu of %zu\n", rf.checkpoint, cs.step, steps);
    else
      printf("no usable checkpoint at %s: %s\n", rf.checkpoint, sc_last_error());
  }
  sc_data data = {x, y, samples};
  int used = 0; /* sc_train uses no more threads than a step has work for */
  CHECK(sc_train_threads(chain, &opts, samples, &used));
  sc_train_report rep;
  CHECK(sc_train(chain, SC_LOSS_SQUARED, p, &data, &opts, &rep));
  size_t ran = rep.steps - rep.resumed_step; /* the steps this process took */

  float train_loss, test_loss;
  CHECK(sc_loss_value(chain, SC_LOSS_SQUARED, p, x, y, samples, &train_loss, ws_test));
  CHECK(sc_loss_value(chain, SC_LOSS_SQUARED, p, xt, yt, samples, &test_loss, ws_test));
  /* the training time includes the progress callbacks' test evaluations; report the
   * training throughput on the steps alone */
  double gflops = TOY_FLOPS_PER_SAMPLE_STEP * (double)samples * (double)ran / rep.seconds * 1e-9;
  printf("done: %zu steps in %.3f s (%.0f steps/s, %.1f GFLOP/s on the matmuls, kernels %s)\n", ran,
         rep.seconds, (double)ran / rep.seconds, gflops, sc_chain_isa(chain));
  if (rep.resumed_step)
    printf("(resumed at step %zu; %zu steps in all)\n", rep.resumed_step, rep.steps);
  if (opts.profile) example_profile_print(chain, prof, 5, rep.seconds, used);
  printf("train MSE %.5f   test MSE %.5f\n", train_loss / 4, test_loss / 4);
  printf("RESULT engine=simplechain steps=%zu samples=%zu threads=%d seconds=%.4f "
         "train_mse=%.6f test_mse=%.6f gflops=%.2f precision=%s\n",
         rep.steps, samples, threads, rep.seconds, train_loss / 4, test_loss / 4, gflops,
         sc_precision_name(prec));
  if (save) {
    CHECK(sc_params_save(chain, p, np, save));
    printf("saved %zu parameters to %s (load with sc_params_load)\n", np, save);
  }
  if (export_npz) {
    CHECK(sc_params_export_npz(chain, p, np, export_npz));
    printf("exported %zu parameters to %s (np.load; torch: load_state_dict)\n", np, export_npz);
  }
  rc = 0;
out:
  free(x);
  free(y);
  free(xt);
  free(yt);
  free(p);
  sc_workspace_destroy(ws_test);
  sc_chain_destroy(chain);
  return rc;
}
