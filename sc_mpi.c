/* sc_mpi.c — sc_dist over MPI (see sc_mpi.h). */
#include "sc_mpi.h"

#include <limits.h>
#include <stdlib.h>

struct sc_mpi {
  MPI_Comm comm;
  int rank, ranks;
  int *counts, *displs; /* MPI takes int counts: converted from sc_train's size_t ones */
  sc_mpi_stats stats;
};

static int sc__mpi_allgather(void *ctx, const void *send, void *recv, const size_t *counts,
                             const size_t *displs) {
  sc_mpi *m = ctx;
  for (int r = 0; r < m->ranks; r++) {
    if (counts[r] > INT_MAX || displs[r] > INT_MAX) return 1; /* more than 2 GiB a step */
    m->counts[r] = (int)counts[r];
    m->displs[r] = (int)displs[r];
  }
  double t0 = MPI_Wtime();
  int rc = MPI_Allgatherv(send, m->counts[m->rank], MPI_BYTE, recv, m->counts, m->displs, MPI_BYTE,
                          m->comm);
  m->stats.seconds += MPI_Wtime() - t0;
  m->stats.calls++;
  m->stats.bytes += (double)(displs[m->ranks - 1] + counts[m->ranks - 1]);
  return rc == MPI_SUCCESS ? 0 : 2;
}

sc_status sc_mpi_create(sc_mpi **out, MPI_Comm comm, sc_dist *dist) {
  const char *fn = "sc_mpi_create";
  if (!out) return sc_set_error(SC_ERR_NULL, fn, "argument 'out' is NULL");
  *out = NULL;
  if (!dist) return sc_set_error(SC_ERR_NULL, fn, "argument 'dist' is NULL");
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return sc_set_error(SC_ERR_UNSUPPORTED, fn, "MPI is not initialised (call MPI_Init)");
  sc_mpi *m = calloc(1, sizeof *m);
  if (!m) return sc_set_error(SC_ERR_NOMEM, fn, "out of memory");
  m->comm = comm;
  MPI_Comm_rank(comm, &m->rank);
  MPI_Comm_size(comm, &m->ranks);
  m->counts = malloc((size_t)m->ranks * sizeof *m->counts);
  m->displs = malloc((size_t)m->ranks * sizeof *m->displs);
  if (!m->counts || !m->displs) {
    int ranks = m->ranks;
    sc_mpi_destroy(m);
    return sc_set_error(SC_ERR_NOMEM, fn, "out of memory for %d ranks", ranks);
  }
  dist->rank = m->rank;
  dist->ranks = m->ranks;
  dist->allgather = sc__mpi_allgather;
  dist->ctx = m;
  *out = m;
  return SC_OK;
}

void sc_mpi_destroy(sc_mpi *m) {
  if (!m) return;
  free(m->counts);
  free(m->displs);
  free(m);
}

sc_status sc_mpi_stats_get(const sc_mpi *m, sc_mpi_stats *stats) {
  if (!m || !stats) return sc_set_error(SC_ERR_NULL, "sc_mpi_stats_get", "a NULL argument");
  *stats = m->stats;
  return SC_OK;
}
