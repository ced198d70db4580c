/* tests/fuzz_idx.c — libFuzzer target for sc_idx_load_images / sc_idx_load_labels.
 *
 * Not a cmocka test (its name does not start with test_): `make fuzz` builds it with
 *
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *         -DSC_HAVE_ZLIB -I. tests/fuzz_idx.c simplechain.c -lz -lm -pthread -o build/fuzz_idx
 *
 * and runs it on the seeds in tests/fuzz_corpus/idx/ (tiny valid and broken IDX files,
 * raw and gzipped; tests/fuzz_corpus/make_idx_seeds.py writes them).
 *
 * The loaders take a path, so each input is written to one temporary file per process
 * (created once, rewritten for every input, removed at exit) and both loaders read it.
 * Besides what the sanitizers catch, the target aborts when a loader breaks its contract:
 * outputs not reset on failure, no message, a success whose sizes do not match the input
 * (for a raw input the file size is exactly header + values), or values out of range. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simplechain.h"

static char fz_path[4096];

static void fz_cleanup(void) {
  if (fz_path[0]) unlink(fz_path);
}

static void fz_init(void) {
  const char *dir = getenv("TMPDIR");
  snprintf(fz_path, sizeof fz_path, "%s/sc_fuzz_idx_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(fz_path);
  if (fd < 0) {
    perror("fuzz_idx: mkstemp");
    abort();
  }
  close(fd);
  atexit(fz_cleanup);
}

static void fz_check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "fuzz_idx: contract broken: %s (last error: %s)\n", what, sc_last_error());
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!fz_path[0]) fz_init();
  FILE *f = fopen(fz_path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror("fuzz_idx: writing the input file");
    abort();
  }
  int raw = !(size >= 2 && data[0] == 0x1f && data[1] == 0x8b);

  float dummy = 0, *x = &dummy;
  size_t n = 9, r = 9, c = 9;
  sc_status st = sc_idx_load_images(fz_path, &x, &n, &r, &c, 1.0f / 255);
  if (st == SC_OK) {
    fz_check(x != NULL && n && r && c, "images: success without data");
    size_t count = n * r * c;
    fz_check(count <= ((size_t)1 << 31), "images: more than 2^31 values");
    if (raw) fz_check(size == 16 + count, "images: sizes do not match a raw file");
    for (size_t i = 0; i < count; i++)
      fz_check(x[i] >= 0.0f && x[i] <= 1.0f, "images: value out of range");
    sc_free(x);
  } else {
    fz_check(x == NULL && n == 0 && r == 0 && c == 0, "images: outputs not reset on failure");
    fz_check(sc_last_error()[0] != '\0', "images: failure without a message");
    fz_check(st == SC_ERR_FORMAT || st == SC_ERR_UNSUPPORTED || st == SC_ERR_NOMEM ||
                 st == SC_ERR_IO,
             "images: unexpected status");
  }

  /* labels twice: with the range check (10 classes) and without */
  for (int pass = 0; pass < 2; pass++) {
    size_t classes = pass ? 0 : 10;
    int32_t idummy = 0, *l = &idummy;
    size_t nl = 9;
    st = sc_idx_load_labels(fz_path, &l, &nl, classes);
    if (st == SC_OK) {
      fz_check(l != NULL && nl > 0, "labels: success without data");
      if (raw) fz_check(size == 8 + nl, "labels: size does not match a raw file");
      for (size_t i = 0; i < nl; i++)
        fz_check(l[i] >= 0 && l[i] <= 255 && (!classes || (size_t)l[i] < classes),
                 "labels: value out of range");
      sc_free(l);
    } else {
      fz_check(l == NULL && nl == 0, "labels: outputs not reset on failure");
      fz_check(sc_last_error()[0] != '\0', "labels: failure without a message");
    }
  }
  return 0;
}
