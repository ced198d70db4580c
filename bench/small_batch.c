/* bench/small_batch.c — does a second thread slow small-batch training down?
 *
 * sc_train on a digits-sized problem (64 -> 32 relu -> 10, logit cross-entropy, ADAM 1e-3,
 * 1,797 samples: the size of sklearn's digits; the values are synthetic, the timing does not
 * depend on them), minibatches of B with shuffling, E epochs, at 1, 2, ... T threads. The
 * runs alternate between thread counts, REPS times; the median of each is printed with its
 * ratio to 1 thread, and the parameters' FNV-1a hash (the same for every thread count).
 *
 *   build/small_batch [--batch B] [--epochs E] [--threads T] [--reps R]
 * prints one line per thread count:
 *   RESULT bench=small_batch batch=32 threads=2 seconds=0.1234 ratio_to_1=1.02 params_fnv=...
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simplechain.h"

enum { NS = 1797, NI = 64, NO = 10, MAXT = 16, MAXR = 99 };

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  size_t batch = 32, epochs = 20;
  int threads = 2, reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--batch"))
      batch = (size_t)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--epochs"))
      epochs = (size_t)strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "small_batch: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (batch < 1 || epochs < 1 || threads < 1 || threads > MAXT || reps < 1 || reps > MAXR) {
    fprintf(stderr, "small_batch: bad arguments\n");
    return 2;
  }
  sc_layer L[] = {sc_dense(32, SC_RELU), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  if (sc_chain_create(&c, NI, L, 2) != SC_OK) {
    fprintf(stderr, "small_batch: %s\n", sc_last_error());
    return 1;
  }
  size_t np;
  sc_chain_nparams(c, &np);
  float *x = malloc(sizeof(float) * NS * NI), *p0 = malloc(np * sizeof *p0),
        *p = malloc(np * sizeof *p);
  int32_t *y = malloc(sizeof(int32_t) * NS);
  if (!x || !y || !p0 || !p) return 1;
  uint64_t s = 12345;
  for (size_t i = 0; i < (size_t)NS * NI; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((s >> 40) % 17) / 16.0f; /* 0..1 in 17 levels, like digits' 0..16 */
  }
  for (size_t i = 0; i < NS; i++) y[i] = (int32_t)(i % NO);
  sc_params_init(c, p0, np, 1);
  double t[MAXT][MAXR];
  uint64_t fnv[MAXT];
  for (int r = 0; r < reps; r++)
    for (int th = 1; th <= threads; th++) {
      memcpy(p, p0, np * sizeof *p);
      sc_train_opts o = sc_train_defaults();
      o.optim = sc_adam(1e-3);
      o.epochs = epochs;
      o.batch_size = batch;
      o.threads = th;
      o.seed = 3;
      sc_data d = {x, y, NS};
      sc_train_report rep;
      if (sc_train(c, SC_LOSS_LOGIT_CROSSENTROPY, p, &d, &o, &rep) != SC_OK) {
        fprintf(stderr, "small_batch: %s\n", sc_last_error());
        return 1;
      }
      t[th - 1][r] = rep.seconds;
      uint64_t h = 0xcbf29ce484222325ull;
      const unsigned char *b = (const unsigned char *)p;
      for (size_t k = 0; k < np * sizeof *p; k++) h = (h ^ b[k]) * 0x100000001b3ull;
      fnv[th - 1] = h;
    }
  double med1 = 0;
  for (int th = 1; th <= threads; th++) {
    qsort(t[th - 1], (size_t)reps, sizeof(double), cmp_d);
    double med = t[th - 1][reps / 2];
    if (th == 1) med1 = med;
    printf("RESULT bench=small_batch batch=%zu epochs=%zu steps=%zu threads=%d seconds=%.4f "
           "min=%.4f max=%.4f ratio_to_1=%.3f kernels=%s params_fnv=%016llx\n",
           batch, epochs, epochs * ((NS + batch - 1) / batch), th, med, t[th - 1][0],
           t[th - 1][reps - 1], med / med1, sc_chain_isa(c), (unsigned long long)fnv[th - 1]);
  }
  free(x);
  free(y);
  free(p0);
  free(p);
  sc_chain_destroy(c);
  return 0;
}
