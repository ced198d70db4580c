/* lenet5 — LeNet5 on MNIST-style IDX data, as in SimpleChains.jl's example:
 *   1x28x28 -> conv 5x5x6 relu -> maxpool 2 -> conv 5x5x16 relu -> maxpool 2 -> flatten
 *           -> dense 120 relu -> dense 84 relu -> dense 10 (logits), ADAM, cross-entropy.
 *
 *   lenet5 [--epochs N] [--batch B] [--lr LR] [--data DIR] [--threads T] [--seed S]
 *          [--save FILE] [--export FILE.npz] [--eval FILE] [--limit N] [--precision P] [--help]
 *
 * Data: the four files train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each raw or .gz) in the first of:
 * --data DIR, $SC_DATA_DIR, data/mnist, ../shared/data/mnist,
 * /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist; `make data`).
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "simplechain.h"
#include "example_util.h"
#include "lenet_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Defaults, measured (bench/RESULTS.md): batch 64 with lr 1e-3 reaches the accuracy
 * targets in 10 epochs on both the 10,000 real MNIST digits and Fashion-MNIST, while
 * giving each of two threads a full tile of 32 images per step. Larger batches run
 * faster per image but need more epochs (SimpleChains used ADAM 3e-4 with its small
 * default batch; PyTorch at batch 2048 / 3e-4 reached only 53.6 % in 10 epochs). */
#define DEFAULT_BATCH 64
#define DEFAULT_LR 3e-3
#define DEFAULT_EPOCHS 10
#define DEFAULT_COSINE 1

static double now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: lenet5 [options]\n"
      "Trains LeNet5 on MNIST-style IDX data (ADAM, logit cross-entropy) and reports the\n"
      "test accuracy after every epoch.\n\n"
      "  --epochs N     epochs (default %d)\n"
      "  --batch B      minibatch size (default %d)\n"
      "  --lr LR        ADAM learning rate (default %g)\n"
      "  --data DIR     folder with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],\n"
      "                 t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]\n"
      "                 (default: $SC_DATA_DIR, data/mnist, ../shared/data/mnist,\n"
      "                 /usr/share/datasets/fashion-mnist)\n"
      "  --threads T    threads (default: the number of CPUs, at most 16); training uses at\n"
      "                 most as many as a step has work for (sc_train_threads: batch 64, 2);\n"
      "                 results do not depend on it\n"
      "  --seed S       seed for the initial parameters and the shuffling (default 1)\n"
      "  --limit N      use only the first N training images (default: all)\n"
      "  --save FILE    write the trained parameters (sc_params_save format)\n"
      "  --export FILE  write them as NumPy .npz, named as torch.nn.Sequential's state_dict:\n"
      "                 Conv2d(1,6,5), ReLU, MaxPool2d(2), Conv2d(6,16,5), ReLU,\n"
      "                 MaxPool2d(2), Flatten, Linear(256,120), ReLU, Linear(120,84), ReLU,\n"
      "                 Linear(84,10)\n"
      "  --eval FILE    load parameters from FILE (a .npz file: imported) and only evaluate\n"
      "                 on the test set\n"
      "  --checkpoint FILE  write a checkpoint (atomic, checksummed) every --every-steps\n"
      "                 steps and at the end; with --resume a run killed at any moment\n"
      "                 continues from it and ends bit for bit as an uninterrupted one\n"
      "  --every-steps N  steps between checkpoints (default 500)\n"
      "  --resume       continue from --checkpoint FILE if it exists\n"
      "  --clip NORM    clip the gradient's L2 norm to NORM (default: off)\n"
      "  --profile      print the time and GFLOP/s of every layer (also SC_PROFILE=1)\n"
      "  --precision P  fp32 (default), bf16 (bfloat16 operands for the conv and dense\n"
      "                 layers' matrix work, float accumulation; needs AVX512_BF16), or\n"
      "                 bf16-emulated (the same rounding computed by the float kernels, on\n"
      "                 any CPU: to check a model's accuracy in bf16)\n"
      "  --schedule S   learning rate: cosine (annealed to 0 over the run, default) or\n"
      "                 constant\n"
      "  --quiet        no progress lines, only the per-epoch summaries\n"
      "  --help         this text\n",
      DEFAULT_EPOCHS, DEFAULT_BATCH, DEFAULT_LR);
}

typedef struct {
  const sc_chain *chain;
  const float *xt;
  const int32_t *yt;
  size_t ntest, steps_per_epoch, epochs, batch, ntrain;
  sc_workspace *ws_eval;
  double t_start, eval_seconds, last_print, epoch_start;
  int quiet, tty;
} monitor;

static int on_progress(const sc_progress *pr, void *user) {
  monitor *m = user;
  double t = now();
  size_t in_epoch = (pr->step - 1) % m->steps_per_epoch + 1;
  if (in_epoch == m->steps_per_epoch) {
    double tr = t - m->epoch_start, acc = 0, tl = 0;
    double t0 = now();
    if (sc_evaluate(m->chain, pr->p, m->xt, m->yt, m->ntest, &tl, &acc, m->ws_eval) != SC_OK) {
      fprintf(stderr, "lenet5: evaluation failed: %s\n", sc_last_error());
      return 1;
    }
    m->eval_seconds += now() - t0;
    if (m->tty && !m->quiet) fprintf(stderr, "\r%78s\r", "");
    printf("epoch %2zu/%zu  train loss %.4f  test loss %.4f  test accuracy %6.2f %%  %.3f s "
           "(%.0f images/s)\n",
           pr->epoch + 1, m->epochs, pr->epoch_loss, tl, 100 * acc, tr, (double)m->ntrain / tr);
    fflush(stdout);
    m->last_print = m->epoch_start = now(); /* the next epoch starts after the evaluation */
    return 0;
  }
  if (!m->quiet && t - m->last_print > (m->tty ? 0.25 : 5.0)) {
    double frac = (double)in_epoch / (double)m->steps_per_epoch;
    double el = t - m->epoch_start, rate = (double)(in_epoch * m->batch) / el;
    double eta = el / frac - el;
    if (m->tty)
      fprintf(stderr, "\repoch %2zu/%zu  %5.1f %%  loss %.4f  %8.0f images/s  ETA %.1f s ",
              pr->epoch + 1, m->epochs, 100 * frac, pr->epoch_loss, rate, eta);
    else
      fprintf(stderr, "epoch %zu/%zu  %.1f %%  loss %.4f  %.0f images/s  ETA %.1f s\n",
              pr->epoch + 1, m->epochs, 100 * frac, pr->epoch_loss, rate, eta);
    m->last_print = t;
  }
  return 0;
}

int main(int argc, char **argv) {
  size_t epochs = DEFAULT_EPOCHS, batch = DEFAULT_BATCH, limit = 0, seed = 1;
  double lr = DEFAULT_LR;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = ncpu > 0 ? (ncpu > 16 ? 16 : (int)ncpu) : 1, quiet = 0, resume = 0, profile = 0;
  const char *data = NULL, *save = NULL, *eval = NULL, *export_npz = NULL;
  example_run_flags rf = {NULL, 500, 0}; /* --checkpoint, --every-steps, --clip */
  int cosine = DEFAULT_COSINE;
  sc_precision prec = SC_PRECISION_FP32;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--quiet")) {
      quiet = 1;
      continue;
    }
    if (!strcmp(a, "--resume")) {
      resume = 1;
      continue;
    }
    if (!strcmp(a, "--profile")) {
      profile = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "lenet5: %s needs a value (see --help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--epochs"))
      ok = example_size(v, &epochs) && epochs > 0;
    else if (!strcmp(a, "--batch"))
      ok = example_size(v, &batch) && batch > 0;
    else if (!strcmp(a, "--limit"))
      ok = example_size(v, &limit) && limit > 0;
    else if (!strcmp(a, "--seed"))
      ok = example_size(v, &seed);
    else if (!strcmp(a, "--lr")) {
      char *end;
      lr = strtod(v, &end);
      ok = *end == 0 && lr > 0 && isfinite(lr);
    } else if (!strcmp(a, "--threads")) {
      size_t t;
      ok = example_size(v, &t) && t >= 1 && t <= 1024;
      threads = (int)t;
    } else if (!strcmp(a, "--data"))
      data = v;
    else if (!strcmp(a, "--save"))
      save = v;
    else if (!strcmp(a, "--export"))
      export_npz = v;
    else if (!strcmp(a, "--eval"))
      eval = v;
    else if (!strcmp(a, "--precision"))
      ok = example_precision(v, &prec);
    else if (!strcmp(a, "--schedule")) {
      ok = !strcmp(v, "cosine") || !strcmp(v, "constant");
      cosine = !strcmp(v, "cosine");
    } else if (example_run_flag(&rf, a, v, &ok))
      ;
    else {
      fprintf(stderr, "lenet5: unknown option '%s' (see --help)\n", a);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "lenet5: bad value '%s' for %s\n", v, a);
      return 2;
    }
    i++;
  }

  if (resume && !rf.checkpoint) {
    fprintf(stderr, "lenet5: --resume needs --checkpoint FILE\n");
    return 2;
  }
  if (!example_writable("lenet5", save) || !example_writable("lenet5", export_npz) ||
      !example_writable("lenet5", rf.checkpoint))
    return 2;
  if (eval && access(eval, R_OK) != 0) {
    fprintf(stderr, "lenet5: cannot read --eval '%s': %s\n", eval, strerror(errno));
    return 2;
  }
  /* find the data */
  const char *env = getenv("SC_DATA_DIR");
  const char *cands[5] = {data, env && *env ? env : NULL, "data/mnist", "../shared/data/mnist",
                          "/usr/share/datasets/fashion-mnist"};
  const char *dir = NULL;
  if (data) {
    if (!lenet_dir_has_data(data)) {
      fprintf(stderr,
              "lenet5: --data %s: missing one of the four IDX files (%s, %s, %s, %s,\n"
              "        raw or .gz)\n",
              data, LENET_FILES[0], LENET_FILES[1], LENET_FILES[2], LENET_FILES[3]);
      return 1;
    }
    dir = data;
  } else
    for (int i = 1; i < 5 && !dir; i++)
      if (cands[i] && lenet_dir_has_data(cands[i])) dir = cands[i];
  if (!dir) {
    fprintf(
        stderr,
        "lenet5: no MNIST-style data found. Looked in: %s%s%sdata/mnist, ../shared/data/mnist,\n"
        "        /usr/share/datasets/fashion-mnist.\n"
        "        Get a data set with `make data` (MNIST download, or Debian's Fashion-MNIST),\n"
        "        or pass --data DIR / set SC_DATA_DIR to a folder with the four IDX files.\n",
        env && *env ? "$SC_DATA_DIR=" : "", env && *env ? env : "", env && *env ? ", " : "");
    return 1;
  }

  char path[4][4096];
  for (int i = 0; i < 4; i++) lenet_find_file(dir, LENET_FILES[i], path[i], sizeof path[i]);
  float *xtr = NULL, *xte = NULL, *p = NULL;
  int32_t *ytr = NULL, *yte = NULL;
  size_t ntr = 0, nte = 0, nl = 0, r = 0, c = 0, r2 = 0, c2 = 0;
  sc_chain *chain = NULL;
  sc_workspace *ws_eval = NULL;
  sc_status st;
  int rc = 1;
#define CHECK(call)                                                                                \
  do {                                                                                             \
    if ((st = (call)) != SC_OK) {                                                                  \
      fprintf(stderr, "lenet5: %s: %s\n", sc_status_str(st), sc_last_error());                     \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)
  double t_load = now();
  CHECK(sc_idx_load_images(path[2], &xte, &nte, &r, &c, 1.0f / 255));
  CHECK(sc_idx_load_labels(path[3], &yte, &nl, 10));
  if (nl != nte || r != 28 || c != 28) {
    fprintf(stderr,
            "lenet5: %s: %zu images of %zux%zu with %zu labels; need 28x28 and one label each\n",
            dir, nte, r, c, nl);
    goto out;
  }
  if (!eval) {
    CHECK(sc_idx_load_images(path[0], &xtr, &ntr, &r2, &c2, 1.0f / 255));
    CHECK(sc_idx_load_labels(path[1], &ytr, &nl, 10));
    if (nl != ntr || r2 != 28 || c2 != 28) {
      fprintf(stderr, "lenet5: %s: %zu training images of %zux%zu with %zu labels\n", dir, ntr, r2,
              c2, nl);
      goto out;
    }
    if (limit && limit < ntr) ntr = limit;
  }
  t_load = now() - t_load;

  sc_layer layers[LENET5_NLAYERS];
  lenet5_layers(layers);
  CHECK(sc_chain_create_image(&chain, 1, 28, 28, layers, LENET5_NLAYERS));
  size_t np;
  CHECK(sc_chain_nparams(chain, &np));
  p = malloc(np * sizeof *p);
  if (!p) goto out;
  CHECK(sc_workspace_create(&ws_eval, chain, 1024));
  CHECK(sc_workspace_set_threads(ws_eval, threads));
  if ((st = sc_workspace_set_precision(ws_eval, prec)) != SC_OK) {
    fprintf(stderr, "lenet5: %s: %s\n", sc_status_str(st), sc_last_error());
    if (st == SC_ERR_UNSUPPORTED)
      fprintf(stderr, "lenet5: --precision bf16-emulated runs anywhere\n");
    goto out;
  }

  if (eval) {
    size_t el = strlen(eval);
    if (el >= 4 && !strcmp(eval + el - 4, ".npz"))
      CHECK(sc_params_import_npz(chain, p, np, eval));
    else
      CHECK(sc_params_load(chain, p, np, eval));
    double acc, tl;
    double t0 = now();
    CHECK(sc_evaluate(chain, p, xte, yte, nte, &tl, &acc, ws_eval));
    printf("lenet5: %s on %zu test images of %s: loss %.4f, accuracy %.2f %% (%.3f s)\n", eval, nte,
           dir, tl, 100 * acc, now() - t0);
    rc = 0;
    goto out;
  }

  CHECK(sc_params_init(chain, p, np, seed));
  if (!quiet) {
    char buf[2048];
    sc_chain_summary(chain, buf, sizeof buf, NULL);
    printf("lenet5: %zu training + %zu test images from %s (loaded in %.2f s)\n"
           "        %zu epochs, batch %zu, ADAM lr %g, %d thread(s), seed %zu, precision %s\n%s",
           ntr, nte, dir, t_load, epochs, batch, lr, threads, seed, sc_precision_name(prec), buf);
  }
  size_t bs = batch < ntr ? batch : ntr;
  monitor mon;
  memset(&mon, 0, sizeof mon);
  mon.chain = chain, mon.xt = xte, mon.yt = yte, mon.ntest = nte;
  mon.steps_per_epoch = (ntr + bs - 1) / bs, mon.epochs = epochs, mon.batch = bs, mon.ntrain = ntr;
  mon.ws_eval = ws_eval, mon.quiet = quiet, mon.tty = isatty(2);
  mon.t_start = mon.last_print = mon.epoch_start = now();
  sc_train_opts opts = sc_train_defaults();
  opts.optim = sc_adam(lr);
  opts.epochs = epochs;
  opts.batch_size = bs;
  opts.threads = threads;
  opts.seed = seed;
  opts.progress_every = 1;
  opts.progress = on_progress;
  opts.user = &mon;
  opts.clip_norm = rf.clip;
  opts.lr_schedule = cosine ? SC_LR_COSINE : SC_LR_CONSTANT;
  opts.precision = prec;
  int used = 0; /* sc_train uses no more threads than a step has work for */
  CHECK(sc_train_threads(chain, &opts, ntr, &used));
  if (!quiet && used != threads)
    printf("        training runs on %d of the %d threads (a batch of %zu has work for %d)\n", used,
           threads, bs, used);
  sc_layer_profile prof[LENET5_NLAYERS + 2];
  if (example_profile_wanted(profile)) opts.profile = prof, opts.profile_rows = LENET5_NLAYERS + 2;
  opts.checkpoint = rf.checkpoint;
  opts.checkpoint_every = rf.checkpoint ? rf.every_steps : 0;
  opts.resume = resume;
  if (resume) {
    sc_checkpoint_state cs;
    if (sc_checkpoint_info(chain, rf.checkpoint, &cs) == SC_OK)
      printf("resuming from %s at step %zu (epoch %zu, step %zu of %zu in it)\n", rf.checkpoint,
             cs.step, cs.epoch + 1, cs.epoch_step, mon.steps_per_epoch);
    else
      printf("no usable checkpoint at %s: %s\n", rf.checkpoint, sc_last_error());
  }
  sc_data d = {xtr, ytr, ntr};
  sc_train_report rep;
  CHECK(sc_train(chain, SC_LOSS_LOGIT_CROSSENTROPY, p, &d, &opts, &rep));
  /* the epochs this process trained (a resumed run did only part of them) */
  double ran = (double)(rep.steps - rep.resumed_step) / (double)mon.steps_per_epoch;
  if (ran <= 0) ran = 1;
  double acc = 0, tl = 0;
  CHECK(sc_evaluate(chain, p, xte, yte, nte, &tl, &acc, ws_eval));
  double train_s = rep.seconds - mon.eval_seconds;
  printf("done: %zu epochs in %.2f s of training (%.3f s per epoch, %.0f images/s, kernels %s)\n"
         "      test accuracy %.2f %% (precision %s)\n",
         rep.epochs, train_s, train_s / ran, (double)ntr * ran / train_s, sc_chain_isa(chain),
         100 * acc, sc_precision_name(prec));
  if (opts.profile) /* the evaluations after each epoch run on another workspace */
    example_profile_print(chain, prof, LENET5_NLAYERS + 2, train_s, used);
  printf("RESULT engine=simplechain bench=lenet5 epochs=%zu batch=%zu threads=%d train=%zu "
         "precision=%s seconds_per_epoch=%.4f test_accuracy=%.4f threads_used=%d\n",
         rep.epochs, bs, threads, ntr, sc_precision_name(prec), train_s / ran, acc, used);
  if (save) {
    CHECK(sc_params_save(chain, p, np, save));
    printf("saved %zu parameters to %s\n", np, save);
  }
  if (export_npz) {
    CHECK(sc_params_export_npz(chain, p, np, export_npz));
    printf("exported %zu parameters to %s (np.load; torch: load_state_dict)\n", np, export_npz);
  }
  rc = 0;
out:
  sc_free(xtr);
  sc_free(ytr);
  sc_free(xte);
  sc_free(yte);
  free(p);
  sc_workspace_destroy(ws_eval);
  sc_chain_destroy(chain);
  return rc;
}
