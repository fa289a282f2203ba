/*
 * What a rank takes on (train/ internal; train/launch.c): its share of its
 * host's cores and the partitions that are its own.
 */
#ifndef LSTREAM_TRAIN_LAUNCH_H
#define LSTREAM_TRAIN_LAUNCH_H

#include <stdint.h>

#include "lstream/error.h"

/* The threads of this rank's engine for the threads key: as given when
 * above 0, or with OMP_NUM_THREADS set (0: the engine reads it); under a
 * launcher that says how many ranks share this host (mpirun's
 * OMPI_COMM_WORLD_LOCAL_SIZE), this rank's share of the host's cores
 * (cores / local ranks, at most the cores it is bound to), computed where it
 * runs; else 0, every core it may run on. */
int train_rank_threads(int threads);

/* Parses the partitions key spec ("all", or "0,2,5") against the topic's
 * count: *P_all receives the partitions named, parts [*P] those of rank
 * (p % world == rank), ascending. */
ls_err_t train_pick_partitions(const char *spec, int32_t count, int world, int rank, int32_t *parts,
                               int *P, int *P_all);

#endif /* LSTREAM_TRAIN_LAUNCH_H */
