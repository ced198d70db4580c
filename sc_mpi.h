/* sc_mpi.h — data-parallel training on MPI: an sc_dist (simplechain.h) whose exchange is
 * MPI_Allgatherv on bytes over a communicator. A module beside the library, so that the two
 * drop-in files stay MPI-free: compile sc_mpi.c with mpicc (`make` builds it into
 * build/libsimplechain_mpi.a when OpenMPI is installed).
 *
 *     sc_mpi *m;  sc_dist dist;
 *     sc_mpi_create(&m, MPI_COMM_WORLD, &dist);   // after MPI_Init
 *     opts.dist = &dist;                          // every rank calls sc_train alike
 *     sc_train(chain, loss, p, &data, &opts, &report);
 *     sc_mpi_destroy(m);
 *
 * The result is bitwise the same on every rank, and the same as one process with the same
 * seed and batch size, whatever the number of ranks and of threads per rank (see sc_dist).
 * Errors of MPI itself follow the communicator's error handler: with MPI's default
 * (MPI_ERRORS_ARE_FATAL) a failing or killed rank ends the whole job, so no rank hangs. */
#ifndef SC_MPI_H
#define SC_MPI_H

#include <mpi.h>

#include "simplechain.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_mpi sc_mpi;

/* Binds dist to comm (which must stay valid while dist is used): rank and size from comm,
 * the counts arrays the exchange needs allocated here, once. Errors: SC_ERR_NULL,
 * SC_ERR_NOMEM, SC_ERR_UNSUPPORTED (MPI not initialised). */
sc_status sc_mpi_create(sc_mpi **out, MPI_Comm comm, sc_dist *dist);
void sc_mpi_destroy(sc_mpi *m); /* NULL is fine */

/* Time spent in the exchange and bytes received by this rank, since creation. */
typedef struct sc_mpi_stats {
  size_t calls;
  double seconds;
  double bytes;
} sc_mpi_stats;
sc_status sc_mpi_stats_get(const sc_mpi *m, sc_mpi_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
