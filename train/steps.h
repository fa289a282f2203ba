/*
 * Step formation (train/ internal): which windows train together. A step
 * holds at most B windows, each of a different series (a series' next
 * window needs this one's final state).
 *   replay (until = end): each partition keeps a look-ahead of its next K
 *     windows in offset order (K = queue_windows, the consumer's bound per
 *     partition, at most buffer_records / (partitions x (T + H)): steps_lookahead;
 *     fewer at its end) and gives up to batch/partitions of them
 *     to a step by event time: the earliest (last target's time, offset)
 *     first, stopping at one whose series is in the step already. So a
 *     topic written series by series (all of A, then all of B) trains like
 *     one written in time order, within the look-ahead; and what a partition
 *     gives depends on its own data only: the steps are the same however
 *     many ranks read the topic, and two runs are bit-identical.
 *   live (until = live): a step fires when B windows are ready, as soon as
 *     nothing ready can join it (every window waiting is of a series in
 *     the step, as in a backlog, which so drains at replay speed; the step
 *     holds every series the rank knows; or another rank has a backlog), or
 *     deadline_ms after it began. Every partition's ready windows are taken
 *     in turn.
 */
#ifndef LSTREAM_TRAIN_STEPS_H
#define LSTREAM_TRAIN_STEPS_H

#include <signal.h>
#include <stdint.h>

#include "lstream/ingest.h"
#include "lstream/state.h"

typedef struct steps_s steps_t;

typedef struct steps_conf_s {
  ls_ingest_t *ing;          /* NULL on a rank without partitions */
  ls_series_table_t *series; /* where a window's series gets its slot */
  const int32_t *parts;      /* [P] this rank's partitions, ascending */
  int P;
  int B;           /* windows per step at most */
  int quota;       /* replay: windows a step takes from each partition */
  int lookahead;   /* replay: K */
  int replay;      /* 1 replay, 0 live */
  int deadline_ms; /* live */
  /* Live: called while a step waits for windows, as soon as the consumer's
   * tap holds records (ls_ingest_next's LS_NEXT_RECORDS); may be NULL. */
  ls_err_t (*idle)(void *opaque);
  void *opaque;
} steps_conf_t;

/* The replay's look-ahead K per partition: queue_windows, at most what buffer_records holds over
 * all partitions of windows of T + H records each (the consumer's count of a queued window, H
 * the horizon), at least 1. */
int steps_lookahead(int64_t buffer_records, int partitions, int T, int H, int64_t queue_windows);

ls_err_t steps_new(const steps_conf_t *conf, steps_t **out);
void steps_free(steps_t *s); /* releases the windows it holds; accepts NULL */

/* Forms the next step of this rank: *n windows (0: none now, or, in a
 * replay, this rank has run out); *wait_s += the time spent waiting for
 * data. Stops early when *stop (may be NULL) becomes non-zero. */
ls_err_t steps_form(steps_t *s, volatile sig_atomic_t *stop, int *n, double *wait_s);

/* Live: the rank's partitions are now parts [P] (those added to the topic
 * joined them), which must outlive s. */
void steps_set_partitions(steps_t *s, const int32_t *parts, int P);

/* The step's windows [n] and their series' slots [n]. */
const ls_window_t *const *steps_windows(const steps_t *s);
const int64_t *steps_slots(const steps_t *s);

/* Gives the step's windows back to the consumer (after the step). */
void steps_release(steps_t *s, int n);

/* Replay: 1 while this rank still has windows to give. */
int steps_more(const steps_t *s);

/* Live: 1 when no window is ready now (the next step waits for data). */
int steps_idle(steps_t *s);

/* Live: 1 when windows wait for a later step (a backlog). */
int steps_backlog(const steps_t *s);

/* Live: 1 when some rank has a backlog (summed across ranks after a step):
 * the next step waits out no deadline. */
void steps_hurry(steps_t *s, int hurry);

#endif /* LSTREAM_TRAIN_STEPS_H */
