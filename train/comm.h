/*
 * Communication between replicas (train/ internal): the sums a step needs
 * from every rank. One interface, three backends:
 *   none  one process, world 1: every call is the identity
 *   mpi   MPI_COMM_WORLD, host buffers, MPI_Iallreduce (the program calls
 *         MPI_Init before and MPI_Finalize after); for a given world size the
 *         result is the same bits run after run
 *   nccl  device buffers: one NCCL communicator over every rank, its id
 *         broadcast over MPI; rank -> GPU by local rank (the engine's
 *         device_index); the sums run on a stream of their own, ordered
 *         after the engine's work and before its next step with events, so
 *         the host does not wait for them as they run. Step figures
 *         (doubles) go over MPI.
 *
 * A peer that is gone (or hung) never joins a sum, and NCCL's kernels wait
 * for it for ever, with everything ordered after them: the engine's next
 * step, a cudaStreamSynchronize, cudaFree at teardown. So with nccl the
 * host never blocks on a sum's stream: comm_wait polls the stream and the
 * communicator's asynchronous error, and on an error, or no end within
 * comm_set_timeout's bound, aborts the communicator (which ends its
 * kernels) and fails, naming what it waited for. The trainer calls
 * comm_wait before it hands the engine work that may wait on the host for
 * something queued after sums (an upload waits for its staging buffer's
 * last copy) and before it reads from the engine: so no host wait is ever
 * behind a sum that is not known to be done.
 *
 * Use: comm_new, create the engine on device comm_local_rank (CUDA), then
 * comm_bind it. A gradient sum is started per range — comm_grads_start, in
 * the same order on every rank, ranges disjoint — and completed by
 * comm_grads_finish before the optimizer reads the buffer. comm_sum_grads
 * does both for the whole buffer.
 */
/* How long a wait for sums may go without them ending, by default (NCCL
 * itself has no bound; PyTorch's is 10 minutes too). */
#define COMM_TIMEOUT_S 600.0
#ifndef LSTREAM_TRAIN_COMM_H
#define LSTREAM_TRAIN_COMM_H

#include <stddef.h>

#include "lstream/error.h"
#include "lstream/kernels.h"

typedef enum comm_kind_e { COMM_NONE = 0, COMM_MPI = 1, COMM_NCCL = 2 } comm_kind_t;

typedef struct comm_s comm_t;

/* Opens a backend. For mpi and nccl on more than one rank, MPI must be
 * initialised. */
ls_err_t comm_new(comm_kind_t kind, comm_t **out);
void comm_destroy(comm_t *c); /* accepts NULL */

int comm_rank(const comm_t *c);
int comm_world(const comm_t *c);
/* This rank's index among the ranks of its host (0 without MPI). */
int comm_local_rank(const comm_t *c);
comm_kind_t comm_kind(const comm_t *c);
/* Runs the gradient sums even on one rank, where they are the identity:
 * with nccl, the whole NCCL path (communicator, its stream and events, a
 * sum per segment) on one GPU, for tests. Set before comm_bind. */
void comm_set_always(comm_t *c, int on);
/* The bound on a wait for sums (seconds, > 0; COMM_TIMEOUT_S by default). */
void comm_set_timeout(comm_t *c, double seconds);

/* The GPU this rank should use for its engine: the one of its local rank
 * among the GPUs of its host, or the only one it sees where the launcher
 * gives each rank its own (CUDA_VISIBLE_DEVICES per rank). An error when
 * the host has fewer GPUs than ranks. 0 where there is no GPU at all (the
 * engine then says so). */
ls_err_t comm_gpu(const comm_t *c, int *index);

/* Binds the engine whose gradient buffer the sums work on; checks that its
 * device suits the backend (mpi: CPU, nccl: CUDA) and, for nccl, creates
 * the communicator on the engine's device. */
ls_err_t comm_bind(comm_t *c, ls_engine_t *eng);

/* Starts the in-place sum over every rank of grad[offset, offset + count),
 * after the work queued on `stream` (the engine's; NULL on the CPU). */
ls_err_t comm_grads_start(comm_t *c, size_t offset, size_t count, void *stream);
/* Starts the sum of every gradient segment (ls_grad_segment) of the bound
 * engine in backward's order: what the gradient hook does over a whole
 * backward, for a rank that has no backward to run. */
ls_err_t comm_grads_start_segments(comm_t *c);
/* Completes every started sum (mpi: waits; nccl: orders the engine's stream
 * after them and checks the communicator's error). A no-op when none was
 * started. */
ls_err_t comm_grads_finish(comm_t *c);
/* Waits until every finished sum is done (nccl: its stream, polled with the
 * communicator's error, bounded: on an error or the timeout the
 * communicator is aborted and an error returned; mpi, none: finish already
 * waited). Before the host waits on the engine for work the sums precede. */
ls_err_t comm_wait(comm_t *c);
/* comm_wait, for timing. */
ls_err_t comm_sync(comm_t *c);
/* Both, for the whole gradient buffer. */
ls_err_t comm_sum_grads(comm_t *c);

/* In-place sum over every rank of v [n] doubles in host memory. Every rank
 * calls with the same n; blocking. */
ls_err_t comm_sum_doubles(comm_t *c, double *v, int n);

#endif
