/* train_mpi — data-parallel training on MPI (sc_mpi.h): LeNet5 on MNIST-style IDX data, or the
 * 2x2 toy, every rank computing its share of each minibatch; p stays bitwise the same on every
 * rank and equals a one-process run with the same seed and batch size.
 *
 *   mpirun -np R build/train_mpi [--model lenet5|toy] [--epochs N] [--batch B] [--lr LR]
 *          [--threads T] [--seed S] [--data DIR] [--limit N] [--samples N] [--steps N]
 *          [--save FILE] [--no-dist] [--quiet] [--help]
 *
 * Rank 0 prints the progress (images/s over all ranks) and, last, the line
 *   RESULT bench=train_mpi model=M ranks=R threads=T steps=N seconds=S params_fnv=<16 hex>
 *          test_accuracy=A           (toy: test_mse=E)
 * after a line "exchange: X ms per step, Y bytes gathered per step, N steps".
 * params_fnv is FNV-1a (64 bit) over the bytes of p. --no-dist trains every rank alone
 * (sc_train without sc_dist), for comparison. In --data, "{rank}" is replaced by the rank, so
 * that each rank can read its own copy. A rank that cannot load its data makes every rank
 * exit with status 1, each naming the failing rank and the cause; nothing is saved. For the
 * tests, --die-rank R --die-step N makes rank R kill itself (SIGKILL) at step N: mpirun then
 * ends the job. */
#include "sc_mpi.h"
#include "example_util.h"
#include "lenet_data.h"
#include "toy_data.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fnv1a(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void usage(FILE *f) {
  fprintf(f, "usage: mpirun -np R train_mpi [options]\n"
             "Data-parallel training over MPI ranks; results bitwise equal to one process.\n\n"
             "  --model M      lenet5 (default) or toy\n"
             "  --epochs N     epochs (default 1)\n"
             "  --batch B      global minibatch (default 64; toy: full batch)\n"
             "  --lr LR        ADAM learning rate (default 1e-3)\n"
             "  --threads T    threads per rank (default 1)\n"
             "  --seed S       seed of the initial parameters and the shuffle (default 1)\n"
             "  --data DIR     lenet5: the IDX files ('{rank}' is replaced by the rank)\n"
             "  --limit N      lenet5: train on the first N images\n"
             "  --samples N    toy: training samples (default 10000)\n"
             "  --steps N      toy: full-batch steps (default 1000)\n"
             "  --save FILE    rank 0 writes the trained parameters (sc_params_save)\n"
             "  --eval FILE    load parameters (sc_params_load) and evaluate them, no training\n"
             "  --every N      toy: a progress line every N steps (default 100, 0 = none)\n"
             "  --checkpoint FILE  rank 0 writes a checkpoint every --every-steps steps and at\n"
             "                 the end (a file system the ranks share); --resume continues\n"
             "  --every-steps N  steps between checkpoints (default 500)\n"
             "  --resume       continue from --checkpoint FILE if it exists\n"
             "  --check        compare p across the ranks after every step (FNV-1a)\n"
             "  --no-dist      every rank trains alone (no exchange), for comparison\n"
             "  --quiet        only the RESULT line\n"
             "  --help         this text\n");
}

typedef struct run {
  int rank, ranks, quiet, lenet;
  int check;    /* --check: compare p across the ranks after every step */
  size_t every; /* toy: a progress line every this many steps */
  size_t np;
  size_t die_step; /* --die-step (tests): this rank kills itself at that step */
  size_t steps_per_epoch, epochs, ntrain, batch;
  const sc_chain *chain;
  const float *xt;
  const int32_t *yt;
  size_t ntest;
  sc_workspace *ws_eval;
  double t_epoch;
} run;

static int on_progress(const sc_progress *pr, void *user) {
  run *r = user;
  if (r->die_step && pr->step == r->die_step) raise(SIGKILL); /* a rank dying mid-training */
  if (r->check) { /* every rank calls this at every step: a collective comparison is safe */
    unsigned long long h = fnv1a(pr->p, r->np * sizeof *pr->p), lo, hi;
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (lo != hi) {
      fprintf(stderr, "train_mpi: rank %d: p differs between ranks after step %zu\n", r->rank,
              pr->step);
      return 1;
    }
  }
  if (r->rank != 0 || r->quiet) return 0;
  size_t in_epoch = (pr->step - 1) % r->steps_per_epoch + 1;
  if (in_epoch != r->steps_per_epoch) return 0;
  double t = MPI_Wtime(), dt = t - r->t_epoch;
  if (r->lenet) {
    double acc = 0, tl = 0;
    sc_evaluate(r->chain, pr->p, r->xt, r->yt, r->ntest, &tl, &acc, r->ws_eval);
    printf("epoch %2zu/%zu  train loss %.4f  test accuracy %6.2f %%  %.3f s  %.0f images/s "
           "(all %d ranks)\n",
           pr->epoch + 1, r->epochs, pr->epoch_loss, 100 * acc, dt, (double)r->ntrain / dt,
           r->ranks);
  } else if ((r->every && pr->step % r->every == 0) || pr->step == pr->total_steps)
    printf("step %6zu/%zu  train MSE %.5f\n", pr->step, pr->total_steps, pr->loss / 4);
  fflush(stdout);
  r->t_epoch = MPI_Wtime();
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  size_t epochs = 1, batch = 64, limit = 0, seed = 1, samples = 10000, steps = 1000, thr = 1;
  size_t die_rank = 0, die_step = 0, every = 100;
  int check = 0;
  const char *eval = NULL;
  double lr = 1e-3;
  int quiet = 0, nodist = 0, lenet = 1, resume = 0;
  const char *data_arg = NULL, *save = NULL, *ckpt = NULL;
  size_t ck_every = 500;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      if (rank == 0) usage(stdout);
      MPI_Finalize();
      return 0;
    }
    if (!strcmp(a, "--quiet") || !strcmp(a, "--no-dist") || !strcmp(a, "--check")) {
      *(a[2] == 'q' ? &quiet : a[2] == 'n' ? &nodist : &check) = 1;
      continue;
    }
    if (!strcmp(a, "--resume")) {
      resume = 1;
      continue;
    }
    if (!v) {
      if (rank == 0) fprintf(stderr, "train_mpi: %s needs a value (see --help)\n", a);
      MPI_Finalize();
      return 2;
    }
    if (!strcmp(a, "--model")) {
      ok = !strcmp(v, "lenet5") || !strcmp(v, "toy");
      lenet = !strcmp(v, "lenet5");
    } else if (!strcmp(a, "--epochs"))
      ok = example_size(v, &epochs) && epochs > 0;
    else if (!strcmp(a, "--batch"))
      ok = example_size(v, &batch) && batch > 0;
    else if (!strcmp(a, "--limit"))
      ok = example_size(v, &limit) && limit > 0;
    else if (!strcmp(a, "--seed"))
      ok = example_size(v, &seed);
    else if (!strcmp(a, "--samples"))
      ok = example_size(v, &samples) && samples > 0 && samples < (1u << 28);
    else if (!strcmp(a, "--steps"))
      ok = example_size(v, &steps) && steps > 0;
    else if (!strcmp(a, "--threads"))
      ok = example_size(v, &thr) && thr >= 1 && thr <= 256;
    else if (!strcmp(a, "--lr")) {
      char *end;
      lr = strtod(v, &end);
      ok = !*end && lr > 0 && lr < 1e3;
    } else if (!strcmp(a, "--data"))
      data_arg = v;
    else if (!strcmp(a, "--every"))
      ok = example_size(v, &every);
    else if (!strcmp(a, "--eval"))
      eval = v;
    else if (!strcmp(a, "--die-rank"))
      ok = example_size(v, &die_rank); /* for the tests */
    else if (!strcmp(a, "--die-step"))
      ok = example_size(v, &die_step) && die_step > 0;
    else if (!strcmp(a, "--save"))
      save = v;
    else if (!strcmp(a, "--checkpoint"))
      ckpt = v;
    else if (!strcmp(a, "--every-steps"))
      ok = example_size(v, &ck_every) && ck_every > 0;
    else {
      if (rank == 0) fprintf(stderr, "train_mpi: unknown option '%s' (see --help)\n", a);
      MPI_Finalize();
      return 2;
    }
    if (!ok) {
      if (rank == 0) fprintf(stderr, "train_mpi: bad value '%s' for %s\n", v, a);
      MPI_Finalize();
      return 2;
    }
    i++;
  }

  /* ---- every rank builds its chain and loads its data; failures are shared before training */
  char err[256] = "";
  sc_chain *chain = NULL;
  float *xtr = NULL, *xte = NULL, *ytoy = NULL, *xtoy_t = NULL, *ytoy_t = NULL, *p = NULL;
  int32_t *ltr = NULL, *lte = NULL;
  size_t ntr = 0, nte = 0, np = 0;
  sc_status st = SC_OK;
  if (lenet) {
    sc_layer L[LENET5_NLAYERS];
    lenet5_layers(L);
    st = sc_chain_create_image(&chain, 1, 28, 28, L, LENET5_NLAYERS);
    char dir[2048] = "";
    if (!st) {
      const char *cands[] = {data_arg, getenv("SC_DATA_DIR"), "data/mnist", "../shared/data/mnist",
                             "/usr/share/datasets/fashion-mnist"};
      for (int k = 0; k < 5 && !dir[0]; k++) {
        if (!cands[k] || !cands[k][0]) continue;
        /* {rank} -> the rank */
        const char *q = strstr(cands[k], "{rank}");
        if (q)
          snprintf(dir, sizeof dir, "%.*s%d%s", (int)(q - cands[k]), cands[k], rank, q + 6);
        else
          snprintf(dir, sizeof dir, "%s", cands[k]);
        char probe[4096];
        if (!lenet_find_file(dir, LENET_FILES[0], probe, sizeof probe)) {
          if (k == 0) break; /* an explicit --data must work: its error is reported below */
          dir[0] = 0;
        }
      }
    }
    char path[4][4096];
    size_t r1 = 0, c1 = 0, r2 = 0, c2 = 0, nl1 = 0, nl2 = 0;
    if (!st && !dir[0]) snprintf(err, sizeof err, "no MNIST-style data found (use --data DIR)");
    for (int k = 0; !st && !err[0] && k < 4; k++)
      if (!lenet_find_file(dir, LENET_FILES[k], path[k], sizeof path[k]))
        snprintf(path[k], sizeof path[k], "%s/%s", dir, LENET_FILES[k]);
    if (!st && !err[0]) st = sc_idx_load_images(path[0], &xtr, &ntr, &r1, &c1, 1.0f / 255);
    if (!st && !err[0]) st = sc_idx_load_labels(path[1], &ltr, &nl1, 10);
    if (!st && !err[0]) st = sc_idx_load_images(path[2], &xte, &nte, &r2, &c2, 1.0f / 255);
    if (!st && !err[0]) st = sc_idx_load_labels(path[3], &lte, &nl2, 10);
    if (!st && !err[0] &&
        (r1 != 28 || c1 != 28 || r2 != 28 || c2 != 28 || nl1 != ntr || nl2 != nte))
      snprintf(err, sizeof err, "%.200s: images must be 28x28 with one label each", dir);
    if (!st && !err[0] && limit && limit < ntr) ntr = limit;
  } else {
    sc_layer L[] = {sc_dense(32, SC_TANH), sc_dense(16, SC_TANH), sc_dense(4, SC_IDENTITY)};
    st = sc_chain_create(&chain, 4, L, 3);
    ntr = nte = samples;
    xtr = malloc(samples * 4 * sizeof *xtr);
    ytoy = malloc(samples * 4 * sizeof *ytoy);
    xtoy_t = malloc(samples * 4 * sizeof *xtoy_t);
    ytoy_t = malloc(samples * 4 * sizeof *ytoy_t);
    if (!xtr || !ytoy || !xtoy_t || !ytoy_t)
      snprintf(err, sizeof err, "out of memory");
    else {
      make_data(xtr, ytoy, samples, seed * 2 + 1);
      make_data(xtoy_t, ytoy_t, samples, seed * 2 + 2);
    }
    epochs = steps;
    batch = samples;
  }
  if (!st && !err[0]) st = sc_chain_nparams(chain, &np);
  if (!st && !err[0] && !(p = malloc(np * sizeof *p))) snprintf(err, sizeof err, "out of memory");
  if (!st && !err[0]) st = sc_params_init(chain, p, np, seed);
  if (st && !err[0]) snprintf(err, sizeof err, "%s: %s", sc_status_str(st), sc_last_error());
  if (!err[0] && rank == 0) /* refuse an unwritable --save or --checkpoint before training */
    if (example_writable_msg(save, err, sizeof err)) example_writable_msg(ckpt, err, sizeof err);
  if (!err[0] && resume && !ckpt) snprintf(err, sizeof err, "--resume needs --checkpoint FILE");
  /* every rank learns of every failure: no rank trains (or hangs) when one cannot */
  char *all = malloc((size_t)ranks * sizeof err);
  if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Allgather(err, (int)sizeof err, MPI_CHAR, all, (int)sizeof err, MPI_CHAR, MPI_COMM_WORLD);
  int failed = 0;
  for (int r = 0; r < ranks; r++)
    if (all[(size_t)r * sizeof err]) {
      failed = 1;
      fprintf(stderr, "train_mpi: rank %d of %d: rank %d failed: %s\n", rank, ranks, r,
              all[(size_t)r * sizeof err] ? all + (size_t)r * sizeof err : "");
    }
  unsigned long long counts[2] = {ntr, np}, mins[2], maxs[2];
  MPI_Allreduce(counts, mins, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(counts, maxs, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (!failed && (mins[0] != maxs[0] || mins[1] != maxs[1])) {
    failed = 1;
    fprintf(stderr, "train_mpi: rank %d: the ranks disagree on the data: %llu to %llu samples\n",
            rank, mins[0], maxs[0]);
  }
  int rc = 1;
  sc_mpi *mpi = NULL;
  sc_workspace *ws_eval = NULL;
  if (failed) goto out;

  sc_dist dist;
  if ((st = sc_mpi_create(&mpi, MPI_COMM_WORLD, &dist))) goto fail;
  if (lenet && (st = sc_workspace_create(&ws_eval, chain, 1000))) goto fail;
  run R = {
      rank,    ranks,  quiet, lenet, check, every, np,  (size_t)rank == die_rank ? die_step : 0,
      0,       epochs, ntr,   batch, chain, xte,   lte, nte,
      ws_eval, 0};
  if (eval) { /* no training: every rank loads, rank 0 reports */
    if ((st = sc_params_load(chain, p, np, eval))) goto fail;
    if (rank == 0) {
      double metric = 0;
      if (lenet)
        st = sc_evaluate(chain, p, xte, lte, nte, NULL, &metric, ws_eval);
      else {
        sc_workspace *wt = NULL;
        float l = 0;
        if (!(st = sc_workspace_create(&wt, chain, samples)))
          st = sc_loss_value(chain, SC_LOSS_SQUARED, p, xtoy_t, ytoy_t, samples, &l, wt);
        sc_workspace_destroy(wt);
        metric = l / 4.0;
      }
      if (st) goto fail;
      printf("%s: %s %.6f\n", eval, lenet ? "test accuracy" : "test MSE", metric);
    }
    rc = 0;
    goto out;
  }
  size_t bs = batch < ntr ? batch : ntr;
  R.steps_per_epoch = lenet ? (ntr + bs - 1) / bs : 1;
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(lr);
  o.epochs = epochs;
  o.batch_size = lenet ? batch : 0;
  o.seed = seed;
  o.threads = (int)thr;
  o.progress_every = 1;
  o.progress = on_progress;
  o.user = &R;
  o.dist = nodist ? NULL : &dist;
  o.checkpoint = ckpt;
  o.checkpoint_every = ckpt ? ck_every : 0;
  o.resume = resume;
  if (rank == 0 && !quiet)
    printf("train_mpi: %s, %zu training samples, batch %zu, %d rank(s) x %zu thread(s)%s\n",
           lenet ? "lenet5" : "toy", ntr, lenet ? batch : ntr, ranks, thr,
           nodist ? ", every rank alone (--no-dist)" : "");
  sc_data data = {xtr, lenet ? (const void *)ltr : (const void *)ytoy, ntr};
  sc_train_report rep;
  MPI_Barrier(MPI_COMM_WORLD);
  R.t_epoch = MPI_Wtime();
  double t0 = MPI_Wtime();
  st = sc_train(chain, lenet ? SC_LOSS_LOGIT_CROSSENTROPY : SC_LOSS_SQUARED, p, &data, &o, &rep);
  double seconds = MPI_Wtime() - t0;
  if (st) goto fail;
  /* every rank must hold the same p */
  unsigned long long h = fnv1a(p, np * sizeof *p), hmin, hmax;
  MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (hmin != hmax && !nodist) {
    fprintf(stderr, "train_mpi: rank %d: parameters differ between ranks (FNV %016llx)\n", rank, h);
    goto out;
  }
  sc_mpi_stats xs = {0, 0, 0};
  sc_mpi_stats_get(mpi, &xs);
  if (rank == 0) {
    double metric = 0;
    if (lenet) {
      if ((st = sc_evaluate(chain, p, xte, lte, nte, NULL, &metric, ws_eval))) goto fail;
    } else {
      sc_workspace *wt = NULL;
      float l = 0;
      if ((st = sc_workspace_create(&wt, chain, samples))) goto fail;
      st = sc_loss_value(chain, SC_LOSS_SQUARED, p, xtoy_t, ytoy_t, samples, &l, wt);
      sc_workspace_destroy(wt);
      if (st) goto fail;
      metric = l / 4.0;
    }
    if (save) {
      if ((st = sc_params_save(chain, p, np, save))) goto fail;
      if (!quiet) printf("rank 0 saved %zu parameters to %s\n", np, save);
    }
    printf("exchange: %.4f ms per step, %.0f bytes gathered per step, %zu steps\n",
           xs.calls ? 1e3 * xs.seconds / (double)xs.calls : 0.0,
           xs.calls ? xs.bytes / (double)xs.calls : 0.0, xs.calls);
    printf("RESULT bench=train_mpi model=%s ranks=%d threads=%zu steps=%zu seconds=%.4f "
           "params_fnv=%016llx %s=%.6f\n",
           lenet ? "lenet5" : "toy", nodist ? 1 : ranks, thr, rep.steps, seconds, h,
           lenet ? "test_accuracy" : "test_mse", metric);
    fflush(stdout);
  }
  rc = 0;
  goto out;
fail:
  fprintf(stderr, "train_mpi: rank %d: %s: %s\n", rank, sc_status_str(st), sc_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1); /* the others may be waiting in an exchange */
out:
  free(all);
  sc_mpi_destroy(mpi);
  sc_workspace_destroy(ws_eval);
  if (lenet) {
    sc_free(xtr);
    sc_free(ltr);
    sc_free(xte);
    sc_free(lte);
  } else {
    free(xtr);
    free(ytoy);
    free(xtoy_t);
    free(ytoy_t);
  }
  free(p);
  sc_chain_destroy(chain);
  MPI_Finalize();
  return rc;
}
