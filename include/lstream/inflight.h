/*
 * lstream: one series' records in flight, the type that ingest (which holds
 * them) and state (whose snapshots keep them) share; and a partition's
 * mark, the last record read of it.
 */
#ifndef LSTREAM_INFLIGHT_H
#define LSTREAM_INFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One series' records in flight (README, Architecture: "Snapshots"):
 * accepted, and not yet in a window the trainer has trained and released.
 * rows[0] is the first input of window `index` (the last target of the
 * window before, kept); the others follow in offset order. What a snapshot
 * keeps of a series' data, so that its partition resumes at its next unread
 * record however old these are. */
typedef struct ls_inflight_s {
  const char *key; /* key_len bytes, 1..LS_KEY_MAX */
  size_t key_len;
  int32_t partition;
  int64_t index;                  /* the number of the window rows[0] starts, >= 0 */
  int64_t last_time;              /* the series' last accepted event time, -1 none */
  int reset;                      /* 0 or 1: window `index` starts from a zero state */
  int rows;                       /* >= 1 (0 only from ls_windower_pending_of) */
  const int64_t *offsets, *times; /* [rows], ascending offsets */
  const float *x;                 /* [rows, F] */
  int evicted; /* 0 or 1: evicted after its last row (an earlier incarnation of its key, its
                  windows in flight; a restore evicts it there again, as it was) */
} ls_inflight_t;

/* One window of a series in flight (ls_inflight_parts_t): its place in its
 * partition's queue and its rows (an ls_window_t's rows 0..n_targets). A
 * window never changes once queued, so a snapshot may keep one that an
 * earlier snapshot of the same run wrote by reference (its partition and
 * seq). */
typedef struct ls_inflight_window_s {
  int64_t seq;                    /* its number in its partition: ascending in the order the
                                     consumer queued windows, never reused by one consumer */
  int rows;                       /* >= 1 */
  const int64_t *offsets, *times; /* [rows], ascending offsets */
  const float *x;                 /* [rows, F] */
} ls_inflight_window_t;

/* One series in flight in its parts (ls_ingest_inflight_parts): its windows
 * in flight in index order, then the rows its windower holds. The series'
 * ls_inflight_t has their rows one after the other, a row two parts share
 * (a window's last target is the next part's first input) once. */
typedef struct ls_inflight_parts_s {
  ls_inflight_t held; /* key, partition, index (of the first part), last_time, reset: the
                         series'; rows, offsets, times, x: what its windower holds (rows 0
                         with windows: none) */
  int n_windows;
  const ls_inflight_window_t *windows; /* [n_windows] */
} ls_inflight_parts_t;

/* The last record a partition's consumer handled (ls_ingest_inflight):
 * what a snapshot keeps of a partition to know its topic again on a resume
 * (a topic deleted and re-created counts its offsets from 0 again). */
typedef struct ls_ingest_mark_s {
  int64_t offset;  /* its offset; -1: none known */
  int64_t time;    /* its Kafka timestamp (ms), -1 when it has none */
  uint64_t digest; /* a 64-bit hash of its key and value */
} ls_ingest_mark_t;

#ifdef __cplusplus
}
#endif

#endif /* LSTREAM_INFLIGHT_H */
