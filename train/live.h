/*
 * Live step formation's helpers (train/ internal): the list of windows
 * deferred to a later step, what every partition has ready now, and
 * whether every series a consumer knows is in a step. Step formation
 * (steps.c, form_live) decides what joins a step.
 */
#ifndef LSTREAM_TRAIN_LIVE_H
#define LSTREAM_TRAIN_LIVE_H

#include <stdint.h>

#include "lstream/ingest.h"

/* Takes window w into the step being formed, or defers it. */
typedef ls_err_t (*live_take_fn)(void *opaque, const ls_window_t *w);

/* Appends w to the deferred windows *list [*n] (room for *cap, grown). */
ls_err_t live_defer(const ls_window_t ***list, int *n, int *cap, const ls_window_t *w);

/* Hands what the partitions parts [P] of ing have ready now to take, one
 * window of each partition in turn (from index `first`), so that every
 * partition's series get into a step, not only the one whose records came
 * first; until more(opaque) says 0 or no partition has one ready. Never
 * waits. */
ls_err_t live_sweep(ls_ingest_t *ing, const int32_t *parts, int P, int first, live_take_fn take,
                    int (*more)(void *opaque), void *opaque);

/* 1 when a step of n windows holds one of every series ing knows: no window
 * that could join it can come before a new series does. */
int live_every_series(ls_ingest_t *ing, int n);

#endif /* LSTREAM_TRAIN_LIVE_H */
