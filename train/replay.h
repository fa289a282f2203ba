/*
 * Replay of recent windows (train/ internal; tests/bench/realdata/
 * FINDINGS.md, section 4.4): after each update, R more updates on windows
 * drawn from a memory of recent ones, so that a one-series topic (one
 * window per step) trains enough.
 *
 * The memory is kept per partition: each keeps its newest
 * max(memory / P_all, 16) windows (P_all: the partitions of every rank),
 * as trained: normalised inputs [T, I], targets [T, O], mask [T] and the
 * state (h0, c0) [L, H] the window started from. Replay update r of step s
 * takes max(batch / P_all, 1) distinct windows from each partition's memory
 * (all it holds when fewer), drawn by a generator seeded with (seed, s,
 * partition, r). What a partition gives depends on its own data only, so N
 * ranks replay the same windows as one, whichever rank holds a partition;
 * snapshots keep each partition's memory beside its resume offset, and
 * re-sharding moves it with the partition.
 */
#ifndef LSTREAM_TRAIN_REPLAY_H
#define LSTREAM_TRAIN_REPLAY_H

#include <stdint.h>

#include "lstream/state.h"
#include "prep.h"

typedef struct replay_s replay_t;

/* The memories of this rank's P partitions (parts [P], ascending) of P_all
 * in all, for windows of T rows, I inputs, O targets (head outputs), mask
 * rows of M (1, or O with a mask per target: prep_train_mask), states [L,
 * H]; per
 * partition max(memory / P_all, 16) entries, each update taking
 * max(batch / P_all, 1) from each. */
ls_err_t replay_new(int memory, int batch, int P_all, const int32_t *parts, int P, int T, int I,
                    int O, int M, int L, int H, replay_t **out);
void replay_free(replay_t *r); /* accepts NULL */

/* The most rows a replay update gathers on this rank. */
int replay_rows(const replay_t *r);

/* Remembers row b of the step prepared in p (of partition `partition`,
 * one of this rank's), which started from h0, c0 [L, n, H] (the step's).
 * A partition added to the topic live has no memory until the next start:
 * nothing is kept of it (its windows train once all the same). */
ls_err_t replay_push(replay_t *r, int32_t partition, const prep_t *p, int b, const float *h0,
                     const float *c0);

/* The rows of replay update `round` of step `step` on this rank, into its
 * buffers: *n rows (0: nothing to replay here) of x [T, n, I], y [T, n, O],
 * mask [T, n, M], h0, c0 [L, n, H]. */
void replay_gather(replay_t *r, uint64_t seed, int64_t step, int round, int *n);
const float *replay_x(const replay_t *r);
const float *replay_y(const replay_t *r);
const float *replay_mask(const replay_t *r, int *width); /* width: M */
const float *replay_h0(const replay_t *r);
const float *replay_c0(const replay_t *r);

/* The memories into a snapshot whose partitions are this rank's, in order
 * (after ls_snapshot_set_memory_shape with replay_shape's), and back from a
 * loaded one (its partitions, any order; those of other ranks ignored).
 * A snapshot of another number of partitions (a topic that gained some:
 * replay_memory shared out differently) gives each memory its newest
 * windows that fit; *cut is then 1. */
void replay_shape(const replay_t *r, size_t *cap, size_t *entry);
ls_err_t replay_save(const replay_t *r, ls_snapshot_t *snap);
ls_err_t replay_load(replay_t *r, const ls_snapshot_t *snap, int *cut);

#endif /* LSTREAM_TRAIN_REPLAY_H */
