/* lenet_data.h — LeNet5 and its MNIST-style IDX files, shared by examples/lenet5.c and
 * examples/train_mpi.c (POSIX: access). */
#ifndef LENET_DATA_H
#define LENET_DATA_H

#include <stdio.h>
#include <unistd.h>

#include "simplechain.h"

/* conv 5x5x6 relu, maxpool 2, conv 5x5x16 relu, maxpool 2, flatten, 120 relu, 84 relu, 10 */
#define LENET5_NLAYERS 8
static inline void lenet5_layers(sc_layer L[LENET5_NLAYERS]) {
  L[0] = sc_conv2d(5, 5, 6, SC_RELU);
  L[1] = sc_maxpool2d(2, 2);
  L[2] = sc_conv2d(5, 5, 16, SC_RELU);
  L[3] = sc_maxpool2d(2, 2);
  L[4] = sc_flatten();
  L[5] = sc_dense(120, SC_RELU);
  L[6] = sc_dense(84, SC_RELU);
  L[7] = sc_dense(10, SC_IDENTITY);
}

static const char *const LENET_FILES[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

/* dir/name.gz or dir/name, whichever exists (out holds the last tried) */
static inline int lenet_find_file(const char *dir, const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/%s.gz", dir, name);
  if (access(out, R_OK) == 0) return 1;
  snprintf(out, cap, "%s/%s", dir, name);
  return access(out, R_OK) == 0;
}

/* all four files in dir */
static inline int lenet_dir_has_data(const char *dir) {
  char p[4096];
  for (int i = 0; i < 4; i++)
    if (!lenet_find_file(dir, LENET_FILES[i], p, sizeof p)) return 0;
  return 1;
}

#endif
