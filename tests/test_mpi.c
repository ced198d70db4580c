/* tests/test_mpi.c — data-parallel training over MPI processes (build/train_mpi, sc_mpi.h).
 *
 * Runs $SC_BUILD_DIR/train_mpi under mpirun (OpenMPI; as root with the two OMPI_ALLOW_RUN_AS_ROOT
 * variables, --oversubscribe for more ranks than cores) and compares the params_fnv of its
 * RESULT line (FNV-1a of the bytes of the trained p):
 *   - the toy: one process without sc_dist (--no-dist, i.e. plain sc_train), and 1, 2 and 4
 *     ranks with 1 thread and 2 ranks with 2 threads: all the same, and with --check p is
 *     compared across the ranks after every step;
 *   - LeNet5 on small generated IDX files (256 training images, batch 96: 3 slices, so 4 ranks
 *     include one with nothing to compute): 1, 2 and 4 ranks the same;
 *   - a rank whose data directory is missing: the job exits non-zero, the output names the
 *     failing rank and the cause, and --save wrote nothing;
 *   - a rank killed in the middle of training (--die-rank 1 --die-step 3: SIGKILL): the job
 *     ends non-zero within the 120 s `timeout` around it (no rank hangs in the exchange),
 *     and nothing is saved.
 * Skipped, with a message, where train_mpi was not built (no OpenMPI). In-process ranks
 * without MPI are tested by tests/test_dist.c. */
#include "testutil.h"

#include <sys/stat.h>

static char bin[4096];

static int have_mpi(void) {
  const char *dir = getenv("SC_BUILD_DIR");
  snprintf(bin, sizeof bin, "%s/train_mpi", dir && *dir ? dir : "build");
  if (access(bin, X_OK) != 0) return 0;
  return system("command -v mpirun >/dev/null 2>&1") == 0;
}

/* runs the command, expects exit 0 and one RESULT line; returns its params_fnv (malloc'ed) */
static char *fnv_of(const char *cmd) {
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  if (rc != 0) fail_msg("%s exited with %d:\n%s", cmd, rc, out);
  const char *r = strstr(out, "RESULT ");
  if (!r) fail_msg("%s printed no RESULT line:\n%s", cmd, out);
  const char *f = strstr(r, "params_fnv=");
  assert_non_null(f);
  char *v = malloc(17);
  assert_non_null(v);
  memcpy(v, f + 11, 16);
  v[16] = 0;
  free(out);
  return v;
}

static void setup_env(void) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  /* under AddressSanitizer (make test-asan): OpenMPI's own allocations outlive MPI_Finalize
   * and would be reported as leaks at exit; the project's code is checked elsewhere */
  setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
}

static void test_toy_ranks(void **state) {
  (void)state;
  if (!have_mpi()) {
    print_message("  train_mpi not built (OpenMPI not installed): skipped\n");
    skip();
  }
  setup_env();
  const char *args = "--model toy --steps 200 --samples 1500 --quiet --check";
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' %s --no-dist", bin, args);
  char *ref = fnv_of(cmd);
  static const struct { int np, threads; } runs[4] = {{1, 1}, {2, 1}, {4, 1}, {2, 2}};
  for (int k = 0; k < 4; k++) {
    snprintf(cmd, sizeof cmd, "mpirun --oversubscribe -np %d '%s' %s --threads %d", runs[k].np, bin,
             args, runs[k].threads);
    char *got = fnv_of(cmd);
    if (strcmp(got, ref)) fail_msg("%s: params_fnv %s, one process %s", cmd, got, ref);
    free(got);
  }
  free(ref);
}

/* an IDX file of n items of dims (uint8 values from seed) */
static void write_idx(const char *path, unsigned ndims, const uint32_t *dims, uint64_t seed,
                      int mod) {
  size_t n = 1;
  for (unsigned d = 0; d < ndims; d++) n *= dims[d];
  size_t len = 4 + 4 * ndims + n;
  unsigned char *b = malloc(len);
  assert_non_null(b);
  b[0] = b[1] = 0;
  b[2] = 0x08;
  b[3] = (unsigned char)ndims;
  for (unsigned d = 0; d < ndims; d++)
    for (int k = 0; k < 4; k++)
      b[4 + 4 * d + (unsigned)k] = (unsigned char)(dims[d] >> (24 - 8 * k));
  for (size_t i = 0; i < n; i++)
    b[4 + 4 * ndims + i] =
        (unsigned char)((uint64_t)(0.5 * (tu_unif(&seed) + 1) * 1e6) % (uint64_t)mod);
  tu_write_all(path, b, len);
  free(b);
}

static void make_data_dir(const char *dir) {
  char p[4096];
  mkdir(dir, 0755);
  uint32_t tr[3] = {256, 28, 28}, te[3] = {64, 28, 28}, ltr[1] = {256}, lte[1] = {64};
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", dir);
  write_idx(p, 3, tr, 1, 256);
  snprintf(p, sizeof p, "%s/train-labels-idx1-ubyte", dir);
  write_idx(p, 1, ltr, 2, 10);
  snprintf(p, sizeof p, "%s/t10k-images-idx3-ubyte", dir);
  write_idx(p, 3, te, 3, 256);
  snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte", dir);
  write_idx(p, 1, lte, 4, 10);
}

static void remove_data_dir(const char *dir) {
  static const char *F[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  char p[4096];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, F[i]);
    remove(p);
  }
  rmdir(dir);
}

static void test_lenet_ranks_and_failure(void **state) {
  (void)state;
  if (!have_mpi()) {
    print_message("  train_mpi not built (OpenMPI not installed): skipped\n");
    skip();
  }
  setup_env();
  char dir[1024], dir0[1100], cmd[8192], save[1100];
  tu_tmp_path(dir, sizeof dir, "mpi", "data");
  make_data_dir(dir);
  char *ref = NULL;
  for (int np = 1; np <= 4; np *= 2) {
    snprintf(cmd, sizeof cmd,
             "mpirun --oversubscribe -np %d '%s' --data '%s' --epochs 2 --batch 96 --quiet", np,
             bin, dir);
    char *got = fnv_of(cmd);
    if (!ref)
      ref = got;
    else {
      if (strcmp(got, ref)) fail_msg("%s: params_fnv %s, 1 rank %s", cmd, got, ref);
      free(got);
    }
  }
  free(ref);
  /* rank 1 has no data: "{rank}" makes the directories <dir>0 and <dir>1, only the first exists */
  snprintf(dir0, sizeof dir0, "%s0", dir);
  make_data_dir(dir0);
  snprintf(save, sizeof save, "%s.params", dir);
  remove(save);
  snprintf(cmd, sizeof cmd,
           "mpirun --oversubscribe -np 2 '%s' --data '%s{rank}' --batch 96 --save '%s' --quiet",
           bin, dir, save);
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  if (rc == 0 || !strstr(out, "rank 1 failed") || !strstr(out, "cannot open"))
    fail_msg("a rank without data: exit %d, output:\n%s", rc, out);
  assert_int_not_equal(access(save, F_OK), 0); /* nothing saved */
  free(out);
  /* a rank killed at step 3 */
  snprintf(cmd, sizeof cmd,
           "timeout 120 mpirun --oversubscribe -np 2 '%s' --data '%s' --batch 96 --epochs 3 "
           "--save '%s' --die-rank 1 --die-step 3 --quiet",
           bin, dir, save);
  rc = tu_run(cmd, &out);
  if (rc == 0 || rc == 124 || strstr(out, "unknown option") || !strstr(out, "signal 9"))
    fail_msg("a killed rank: exit %d (124: the job hung), output:\n%s", rc, out);
  assert_int_not_equal(access(save, F_OK), 0);
  free(out);
  remove_data_dir(dir0);
  remove_data_dir(dir);
}

/* checkpoints under MPI: rank 0 writes; a run of 2 ranks stopped at 120 of 300 steps (its
 * last checkpoint) and resumed on 3 ranks ends with the parameters of one process */
static void test_checkpoint_ranks(void **state) {
  (void)state;
  if (!have_mpi()) {
    print_message("  train_mpi not built (OpenMPI not installed): skipped\n");
    skip();
  }
  setup_env();
  char ck[512], cmd[8192];
  tu_tmp_path(ck, sizeof ck, "mpi", "ck.sck");
  remove(ck);
  const char *args = "--model toy --samples 1500 --quiet";
  snprintf(cmd, sizeof cmd, "'%s' %s --steps 300 --no-dist", bin, args);
  char *ref = fnv_of(cmd);
  snprintf(cmd, sizeof cmd,
           "mpirun --oversubscribe -np 2 '%s' %s --steps 120 --checkpoint '%s' --every-steps 50",
           bin, args, ck);
  free(fnv_of(cmd));
  snprintf(cmd, sizeof cmd,
           "mpirun --oversubscribe -np 3 '%s' %s --steps 300 --checkpoint '%s' --every-steps 50 "
           "--resume",
           bin, args, ck);
  char *got = fnv_of(cmd);
  if (strcmp(got, ref)) fail_msg("%s: params_fnv %s, one process %s", cmd, got, ref);
  free(got);
  free(ref);
  remove(ck);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_toy_ranks),
      cmocka_unit_test(test_lenet_ranks_and_failure),
      cmocka_unit_test(test_checkpoint_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
