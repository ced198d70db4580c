/* tests/fuzz_npz.c — libFuzzer target for the .npz importer (sc_params_import_npz and
 * sc_params_import_npz_f64).
 *
 * Not a cmocka test: `make fuzz` builds it like fuzz_idx (clang, -fsanitize=fuzzer,address,
 * undefined) and runs it for FUZZ_SECONDS on the seeds in tests/fuzz_corpus/npz (np.savez and
 * np.savez_compressed files of the chain below, from NumPy) plus those that
 * `FUZZ_NPZ_SEEDS=DIR` makes it write with sc_params_export_npz / _f64, plus the inputs it
 * found before.
 *
 * Each input is written to a temporary file and imported as float and as double. Besides
 * what the sanitizers catch, the target aborts when the importer breaks its contract: a
 * failure without a message or with an unexpected status, p written by a failed import, or
 * a success with non-finite values. */
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

static char fz_path[4096];
static sc_chain *fz_chain;
static size_t fz_np;

static void fz_cleanup(void) {
  if (fz_path[0]) unlink(fz_path);
  sc_chain_destroy(fz_chain);
}

static void fz_check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_npz: contract broken: %s (last error: %s)\n", what, sc_last_error());
    abort();
  }
}

static void fz_init(void) {
  /* 1 x 3 x 3 -> conv 2x2, 2 channels, tanh -> flatten -> dense 2: 4-D, 2-D and 1-D arrays */
  sc_layer L[] = {sc_conv2d(2, 2, 2, SC_TANH), sc_flatten(), sc_dense(2, SC_IDENTITY)};
  if (sc_chain_create_image(&fz_chain, 1, 3, 3, L, 3) != SC_OK) abort();
  sc_chain_nparams(fz_chain, &fz_np);
  const char *seeds = getenv("FUZZ_NPZ_SEEDS");
  if (seeds && *seeds) {
    char path[4200];
    float p[64];
    double pd[64];
    sc_params_init(fz_chain, p, fz_np, 1);
    sc_params_init_f64(fz_chain, pd, fz_np, 2);
    snprintf(path, sizeof path, "%s/f32.npz", seeds);
    fz_check(sc_params_export_npz(fz_chain, p, fz_np, path) == SC_OK, "seed: f32");
    snprintf(path, sizeof path, "%s/f64.npz", seeds);
    fz_check(sc_params_export_npz_f64(fz_chain, pd, fz_np, path) == SC_OK, "seed: f64");
  }
  const char *dir = getenv("TMPDIR");
  snprintf(fz_path, sizeof fz_path, "%s/sc_fuzz_npz_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(fz_path);
  if (fd < 0) {
    perror("fuzz_npz: mkstemp");
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
    perror("fuzz_npz: writing the input file");
    abort();
  }
  float p[64];
  double pd[64];
  for (size_t k = 0; k < fz_np; k++) p[k] = 0.5f, pd[k] = 0.5;
  sc_status st = sc_params_import_npz(fz_chain, p, fz_np, fz_path);
  sc_status sd = sc_params_import_npz_f64(fz_chain, pd, fz_np, fz_path);
  const sc_status sts[2] = {st, sd};
  for (int i = 0; i < 2; i++) {
    if (sts[i] == SC_OK) {
      for (size_t k = 0; k < fz_np; k++)
        fz_check(i ? isfinite(pd[k]) : isfinite(p[k]), "non-finite value imported");
    } else {
      fz_check(sc_last_error()[0] != '\0' || i == 0, "failure without a message");
      fz_check(sts[i] == SC_ERR_FORMAT || sts[i] == SC_ERR_SHAPE || sts[i] == SC_ERR_NONFINITE ||
                   sts[i] == SC_ERR_NOMEM || sts[i] == SC_ERR_IO || sts[i] == SC_ERR_UNSUPPORTED,
               "unexpected status");
      for (size_t k = 0; k < fz_np; k++)
        fz_check(i ? pd[k] == 0.5 : p[k] == 0.5f, "p written by a failed import");
    }
  }
  /* a float64 file beyond float range may fail as float only; otherwise both agree */
  fz_check(st == sd || (sd == SC_OK && st == SC_ERR_NONFINITE), "float and double disagree");
  return 0;
}
