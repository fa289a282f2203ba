/*
 * Communication between replicas (train/ internal): the sums a step needs
 * from every rank. One interface, three backends:
 *   none  one process, world 1: every call is the identity
 *   mpi   MPI_COMM_WORLD, host buffers, MPI_Allreduce (the program calls
 *         MPI_Init before and MPI_Finalize after)
 *   nccl  device buffers (needs the CUDA backend)
 */
#ifndef LSTREAM_TRAIN_COMM_H
#define LSTREAM_TRAIN_COMM_H

#include <stddef.h>

#include "lstream/error.h"
#include "lstream/kernels.h"

typedef enum comm_kind_e { COMM_NONE = 0, COMM_MPI = 1, COMM_NCCL = 2 } comm_kind_t;

typedef struct comm_s comm_t;

/* Opens a backend. For mpi, MPI must be initialised. */
ls_err_t comm_new(comm_kind_t kind, comm_t **out);
void comm_destroy(comm_t *c); /* accepts NULL */

int comm_rank(const comm_t *c);
int comm_world(const comm_t *c);

/* In-place sums over every rank: grad [n] floats in the engine's memory,
 * v [n] doubles in host memory. Every rank calls with the same n. */
ls_err_t comm_sum_grads(comm_t *c, ls_engine_t *eng, float *grad, size_t n);
ls_err_t comm_sum_doubles(comm_t *c, double *v, int n);

#endif
