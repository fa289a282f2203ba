/*
 * The CPU backend's threads (internal to kernels/): a fixed pool that runs
 * one function on n threads, the caller being thread 0, and returns when
 * all are done.
 *
 * Why not OpenMP: libgomp's idle threads spin for ~300k pauses (several ms)
 * after each parallel region unless OMP_WAIT_POLICY is set before the
 * program starts, and OpenBLAS' threaded GEMMs synchronise their threads
 * many times per call with sched_yield loops. On a machine shared with
 * other work both turn every synchronisation into a wait for a descheduled
 * thread. Here idle threads spin for POOL_SPIN_NS, then sleep; the backend
 * runs every GEMM on one thread, split into one block per thread.
 */
#ifndef LSTREAM_KERNELS_POOL_CPU_H
#define LSTREAM_KERNELS_POOL_CPU_H

#include "lstream/kernels.h"

typedef struct pool_s pool_t;

/* A pool of `threads` threads in all, the caller included (threads - 1 are
 * started); each started thread first calls init (NULL: none). */
ls_err_t pool_new(int threads, void (*init)(void), pool_t **out);

/* Stops and joins the threads; NULL is ignored. */
void pool_free(pool_t *p);

/* fn(arg, i, n) for i in [0, n) on n threads (clamped to the pool's, and
 * to 1 while the pool adapts to a competing load: pool_adapt), the caller
 * running i = 0; returns when every call has returned. work: the run's size
 * in any one unit (multiply-adds), for the rates pool_adapt compares. Not
 * reentrant: fn must not call pool_run. */
void pool_run(pool_t *p, int n, double work, void (*fn)(void *arg, int i, int n), void *arg);

/* How the pool chooses between all its threads and the caller alone
 * (pool_adapt_end): POOL_ADAPT_OFF all of them always; POOL_ADAPT_ON by the
 * rates of its runs; POOL_ADAPT_ALTERNATE the other choice at every
 * pool_adapt_end (for tests). Only where the runs' results do not depend on
 * their thread count. */
typedef enum pool_adapt_e { POOL_ADAPT_OFF, POOL_ADAPT_ON, POOL_ADAPT_ALTERNATE } pool_adapt_t;
void pool_adapt(pool_t *p, pool_adapt_t mode);

/* The end of a unit of work (an optimizer update): the rate of its runs
 * that wanted several threads is measured and the next unit's choice
 * made. */
void pool_adapt_end(pool_t *p);

#endif /* LSTREAM_KERNELS_POOL_CPU_H */
