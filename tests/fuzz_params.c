/* tests/fuzz_params.c — libFuzzer target for the parameter-file loader (sc_params_load) and
 * the checkpoint loader (sc_checkpoint_info, and sc_train resuming from the file), with
 * sc_params_load_f64 beside sc_params_load.
 *
 * Not a cmocka test: `make fuzz` builds it like fuzz_idx (clang, -fsanitize=fuzzer,address,
 * undefined) and runs it for FUZZ_SECONDS on seeds that `FUZZ_PARAMS_SEEDS=DIR` makes it
 * write (a valid parameter file and valid checkpoints of the chain below: shuffled and not,
 * mid-epoch and finished), plus the inputs it found before.
 *
 * Each input is written to a temporary file and read by every loader. Besides what the
 * sanitizers catch, the target aborts when a loader breaks its contract: a failure without
 * a message or with an unexpected status, p written by a failed load, a success with
 * non-finite values, or a resumed run that does not end where its checkpoint says. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simplechain.h"

enum { NI = 2, NO = 2, NS = 5 };
static char fz_path[4096];
static sc_chain *fz_chain;
static size_t fz_np;
static float fz_x[NS * NI], fz_t[NS * NO];

static void fz_cleanup(void) {
  if (fz_path[0]) unlink(fz_path);
  sc_chain_destroy(fz_chain);
}

static void fz_check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_params: contract broken: %s (last error: %s)\n", what, sc_last_error());
    abort();
  }
}

static sc_train_opts fz_opts(int shuffle, size_t epochs) {
  sc_train_opts o = sc_train_defaults();
  o.optim = sc_adam(1e-2);
  o.epochs = epochs;
  o.batch_size = 2;
  o.shuffle = shuffle;
  o.seed = 5;
  return o;
}

static int stop_at_4(const sc_progress *pr, void *user) {
  (void)user;
  return pr->step == 4;
}

/* valid seeds into dir: params.scp, and checkpoints (shuffled / not, stopped / finished) */
static void fz_seeds(const char *dir) {
  char path[4200];
  float *p = malloc(fz_np * sizeof *p);
  sc_params_init(fz_chain, p, fz_np, 1);
  snprintf(path, sizeof path, "%s/params.scp", dir);
  fz_check(sc_params_save(fz_chain, p, fz_np, path) == SC_OK, "seed: params");
  double pd[64];
  for (size_t k = 0; k < fz_np; k++) pd[k] = p[k];
  snprintf(path, sizeof path, "%s/params64.scp", dir);
  fz_check(sc_params_save_f64(fz_chain, pd, fz_np, path) == SC_OK, "seed: params f64");
  sc_data d = {fz_x, fz_t, NS};
  for (int shuffle = 0; shuffle < 2; shuffle++)
    for (int stop = 0; stop < 2; stop++) {
      sc_train_opts o = fz_opts(shuffle, 3);
      snprintf(path, sizeof path, "%s/ck-%d-%d.sck", dir, shuffle, stop);
      o.checkpoint = path;
      if (stop) o.progress = stop_at_4, o.progress_every = 1;
      sc_params_init(fz_chain, p, fz_np, 1);
      sc_status st = sc_train(fz_chain, SC_LOSS_SQUARED, p, &d, &o, NULL);
      fz_check(st == (stop ? SC_ERR_STOPPED : SC_OK), "seed: checkpoint");
    }
  free(p);
}

static void fz_init(void) {
  sc_layer L[] = {sc_dense(3, SC_TANH), sc_dense(NO, SC_IDENTITY)};
  if (sc_chain_create(&fz_chain, NI, L, 2) != SC_OK) abort();
  sc_chain_nparams(fz_chain, &fz_np);
  for (int i = 0; i < NS * NI; i++) fz_x[i] = (float)((i * 7) % 5) / 5 - 0.4f;
  for (int i = 0; i < NS * NO; i++) fz_t[i] = (float)((i * 3) % 4) / 4 - 0.3f;
  const char *seeds = getenv("FUZZ_PARAMS_SEEDS");
  if (seeds && *seeds) fz_seeds(seeds);
  const char *dir = getenv("TMPDIR");
  snprintf(fz_path, sizeof fz_path, "%s/sc_fuzz_params_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(fz_path);
  if (fd < 0) {
    perror("fuzz_params: mkstemp");
    abort();
  }
  close(fd);
  atexit(fz_cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!fz_chain) fz_init();
  FILE *f = fopen(fz_path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror("fuzz_params: writing the input file");
    abort();
  }
  float p[64];
  for (size_t k = 0; k < fz_np; k++) p[k] = 0.5f;
  sc_status st = sc_params_load(fz_chain, p, fz_np, fz_path);
  if (st == SC_OK) {
    fz_check(size == 32 + 4 * fz_np + 8 || size == 32 + 8 * fz_np + 8,
             "params: success with a file of the wrong size");
    for (size_t k = 0; k < fz_np; k++) fz_check(isfinite(p[k]), "params: non-finite value loaded");
  } else {
    fz_check(sc_last_error()[0] != '\0', "params: failure without a message");
    fz_check(st == SC_ERR_FORMAT || st == SC_ERR_SHAPE || st == SC_ERR_NONFINITE ||
                 st == SC_ERR_NOMEM || st == SC_ERR_IO,
             "params: unexpected status");
    for (size_t k = 0; k < fz_np; k++) fz_check(p[k] == 0.5f, "params: p written by a failed load");
  }

  /* the double loader reads both element types: it agrees with the float one but for values
   * beyond float range */
  double pd[64];
  for (size_t k = 0; k < fz_np; k++) pd[k] = 0.5;
  sc_status sd = sc_params_load_f64(fz_chain, pd, fz_np, fz_path);
  fz_check(sd == st || (sd == SC_OK && st == SC_ERR_NONFINITE),
           "params: float and double disagree");
  for (size_t k = 0; k < fz_np; k++)
    fz_check(sd == SC_OK ? isfinite(pd[k]) : pd[k] == 0.5, "params_f64: contract");

  sc_checkpoint_state info;
  st = sc_checkpoint_info(fz_chain, fz_path, &info);
  if (st != SC_OK) {
    fz_check(sc_last_error()[0] != '\0', "checkpoint: failure without a message");
    fz_check(st == SC_ERR_FORMAT || st == SC_ERR_SHAPE || st == SC_ERR_NOMEM || st == SC_ERR_IO,
             "checkpoint: unexpected status");
  }
  /* resuming: either refused with p untouched, or a run that ends at its last step */
  for (int shuffle = 0; shuffle < 2; shuffle++) {
    sc_train_opts o = fz_opts(shuffle, 3);
    o.checkpoint = fz_path;
    o.checkpoint_every = 0;
    o.resume = 1;
    sc_data d = {fz_x, fz_t, NS};
    for (size_t k = 0; k < fz_np; k++) p[k] = 0.5f;
    sc_train_report rep;
    /* the run rewrites the file at its end: restore the input for the next pass */
    sc_status rs = sc_train(fz_chain, SC_LOSS_SQUARED, p, &d, &o, &rep);
    if (rs == SC_OK) {
      fz_check(st == SC_OK, "resume: accepted a file sc_checkpoint_info refused");
      fz_check(rep.resumed_step == info.step && rep.steps == 9, "resume: wrong steps");
      for (size_t k = 0; k < fz_np; k++) fz_check(isfinite(p[k]), "resume: non-finite p");
    } else {
      fz_check(sc_last_error()[0] != '\0', "resume: failure without a message");
      fz_check(rs != SC_ERR_NULL, "resume: unexpected status");
      if (rs != SC_ERR_NONFINITE)
        for (size_t k = 0; k < fz_np; k++)
          fz_check(p[k] == 0.5f, "resume: p written by a refused checkpoint");
    }
    f = fopen(fz_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
  }
  return 0;
}
