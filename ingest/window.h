/*
 * The windower's insides (ingest/window.c, internal): its series, their
 * partitions and the hash table they live in, and the steps of accepting a
 * record, which window_restore.c (series in flight) uses too; and the check
 * of a series in flight, so that ls_ingest_conf_restore refuses a bad one
 * when it is added, with the windower's message.
 */
#ifndef LSTREAM_INGEST_WINDOW_H
#define LSTREAM_INGEST_WINDOW_H

#include "base/keymap.h"
#include "lstream/ingest.h"

/* A key's identity: the first member of what a table holds. */
typedef struct keyed_s {
  size_t key_len;
  char *key; /* key_len bytes + NUL */
} keyed_t;

/* Keyed items, by index in the order they were added, and the map from
 * their keys to those indices; each item is one allocation, freed with the
 * table. Empty: all zero. */
typedef struct table_s {
  base_keymap_t map;
  keyed_t **items; /* [map.n] */
  size_t cap;
} table_t;

struct series_s;

/* A partition and its series that hold records, by ascending low offset. */
typedef struct wpart_s {
  int32_t id;
  struct series_s *head, *tail;
  struct series_s *lru_head, *lru_tail; /* every series of it, by its last record's arrival */
  int64_t now;                          /* the newest event time accepted on it, -1 none */
  int64_t held;                         /* its series */
} wpart_t;

/* One series. count is the number of filled rows of x; count == T+G means a
 * window was just handed out and rows T..T+G-1 are still to be carried to
 * rows 0..G-1 (G the horizon: ls_windower_set_horizon). */
typedef struct series_s {
  keyed_t k;                            /* must stay first */
  wpart_t *part;                        /* its partition (a key that moves is a new series) */
  struct series_s *prev, *next;         /* in part's list, while count > 0 */
  struct series_s *lru_prev, *lru_next; /* in part's list by last arrival */
  uint64_t hash;                        /* of its key */
  int64_t last_time;                    /* timestamp of the last accepted record, -1 before any */
  int64_t index;                        /* number of the next window handed out */
  int64_t id;                           /* 0, 1, ... by first acceptance, never reused */
  int count;
  int reset;        /* its next window starts from a zero state */
  int64_t *offsets; /* [T+G] */
  int64_t *times;   /* [T+G] event times */
  float *x;         /* [T+G, F] */
} series_t;

struct ls_windower_s {
  ls_decoder_t *dec; /* the records' format: values, and (json, avro) key and time */
  int F, T;
  int G;              /* the horizon: a window holds G-1 records after its last target */
  float max_abs;      /* a value of larger magnitude is rejected (RANGE) */
  table_t series;     /* of series_t, in order of first appearance */
  int64_t reset_gap;  /* ms: a larger jump in a series' event time restarts it; <= 0 never */
  int64_t max_future; /* ms: a record stamped further ahead of the wall clock is rejected; 0 no */
  int64_t late_ms;    /* ms: a record this much before its series' last is kept (held); 0 no */
  int64_t clock_ms;   /* the wall clock at its last reading (read when a record passes it) */
  int64_t idle_ms;    /* a series this much older than its partition's newest is evicted; 0 no */
  int64_t max_held;   /* the most series a partition holds; 0 no bound */
  int64_t next_id;
  wpart_t **parts; /* [n_parts], by ascending id */
  size_t n_parts, parts_cap;
  float *scratch;          /* [F]: a new series' first record, before it is accepted */
  float *ones;             /* [T]: the mask of a complete window */
  float *partial_mask;     /* [T]: the mask of a flushed partial window */
  ls_window_t view;        /* the window last handed out */
  ls_window_t view2;       /* the second window a push closed (G > 1) */
  const ls_window_t *more; /* &view2 when the last push closed two windows, else NULL */
  series_t *gone;          /* the series the last push evicted holding a whole window (G > 1),
                              in order, chained by next: out of the table and the lists, their
                              windows go out (ls_windower_more) and they are freed on the next
                              push (window_gone_free) */
  series_t *gone_next;     /* the first of them whose window is still to go out, or NULL */
  series_t *gone_tail;     /* the last of them */
  int64_t *gap;            /* [2 (T+G)] offsets and times of a window closed by a gap */
  float *gap_x;            /* [T+G, F] its records */
  int64_t *gap2;           /* [2 (T+G)] those of the second window a gap or a move closes */
  float *gap2_x;           /* [T+G, F] */
  ls_window_stats_t stats;
  const series_t *last; /* the series of the record the last push accepted, or NULL */
  int32_t moved_from;   /* the partition the last push's series moved from, or -1 */
  int64_t last_time;    /* its event time */
  ls_reject_t decoded;  /* the last push's value as decoded, before the key's and the
                           partition's checks: LS_REJECT_NONE or why not */
  char why[160];        /* why the last push rejected its record for its time, or "" */
};

/* The item of key, or NULL. */
keyed_t *window_table_find(const table_t *t, uint64_t hash, const void *key, size_t key_len);

/* The partition of id, or NULL. */
wpart_t *window_part_find(const ls_windower_t *w, int32_t id);

/* Unlinks s from its partition's list of series holding records. */
void window_list_unlink(series_t *s);

/* Links s into its partition's list by its low offset, searching from the
 * tail (where offsets pushed in order put it at once). */
void window_list_insert(const ls_windower_t *w, series_t *s);

/* Points view v at a window of series s whose rows are x [T+G, F],
 * offsets and times [T+G], n_targets valid targets and n_extra records
 * after them; s's next window index and reset move on. */
const ls_window_t *window_view(series_t *s, ls_window_t *v, const float *x, const int64_t *offsets,
                               const int64_t *times, int T, int F, int n_targets, int n_extra,
                               const float *mask);

/* The window of s's n rows from row `from` (n <= T+1: a partial one; more:
 * a whole one and n-T-1 records after it), its rows past them padding: in
 * the series' own buffer (buf 0, from 0), or copied to the windower's gap
 * buffer (1) or its second one (2). */
const ls_window_t *window_held_view(ls_windower_t *w, series_t *s, int from, int n, int buf);

/* Moves rows [from, from+n) of s to rows [0, n); its count n. */
void window_shift_rows(const ls_windower_t *w, series_t *s, int from, int n);

/* The carry, if it waits (ingest/window_close.c): the records after s's
 * last window (rows T..T+G-1) become its next window's first inputs (rows
 * 0..G-1). */
void window_carry(const ls_windower_t *w, series_t *s);

/* Adds a series of key [key_len] on `partition` with its first row (values
 * [F] from `first`) to come, its windows numbered from index. */
ls_err_t window_series_add(ls_windower_t *w, uint64_t hash, const void *key, size_t key_len,
                           int32_t partition, const float *first, int64_t index, series_t **out);

/* Series *s (of key [key_len], hash) goes on on `partition`, another
 * than its own, from a record of event time t whose values are in
 * w->scratch: what it holds goes out as windows of its partition
 * (window_close: *closed, then w->more),
 * and a series of its key, numbering its windows on, starts on partition
 * from that record (its state is the key's: the trainer's series table
 * keeps it). *s becomes the new series. Counted in stats.moved. */
ls_err_t window_series_move(ls_windower_t *w, series_t **s, uint64_t hash, const void *key,
                            size_t key_len, int32_t partition, int64_t t,
                            const ls_window_t **closed);

/* What series s holds goes out (ingest/window_close.c), copied to the windower's gap buffers
 * (valid until the next push, or the next call): as a partial window
 * (*first, with 2 rows or more; a lone row has no target and is dropped),
 * or, holding a whole window that waits for its records after it (G > 1),
 * as that window (*first, n_extra < G-1) and the partial one from its row
 * T on (w->more). s (holding records) then holds nothing: its count 0,
 * out of its partition's list. Returns the records it held. */
int window_close(ls_windower_t *w, series_t *s, const ls_window_t **first);

/* Forgets series s as an eviction does (its records, its place in the
 * lists and the table), counting it as evicted when `counted`. */
void window_series_forget(ls_windower_t *w, series_t *s, int counted);

/* Evicts series s (counted as evicted when `counted`): forgotten, but a whole window it holds
 * waiting for its records after it (G > 1) goes out as it is, those records it has (n_extra <
 * G-1), after the windows already closed (w->gone: ls_windower_more); the records after its
 * last target are dropped, as an evicted series' partial window is. */
void window_series_evict(ls_windower_t *w, series_t *s, int counted);

/* Frees the series the last push evicted (w->gone). */
void window_gone_free(ls_windower_t *w);

/* The id of key's series (its current incarnation: a key evicted and back
 * is a new series), or -1 when the windower holds none. */
int64_t window_series_id(const ls_windower_t *w, const void *key, size_t key_len);

/* Records of s not yet in a complete window (those from row T on, while
 * the carry waits; else its rows). */
int window_series_pending(const ls_windower_t *w, const series_t *s);

/* Makes room for s's next row, of event time t: the carry after a window,
 * or a restart after a gap (*closed and w->more: the windows it closes,
 * window_close). */
void window_next_row(ls_windower_t *w, series_t *s, int64_t t, const ls_window_t **closed);

/* Row s->count (its values written) accepted with its offset and time;
 * *complete: the window it completes, if it does. */
void window_accept_row(ls_windower_t *w, series_t *s, int64_t offset, int64_t t,
                       const ls_window_t **complete);

/* LS_ERR_INVALID_ARG, naming fn and what is wrong, unless s is a series in
 * flight: a key of 1..LS_KEY_MAX bytes, rows >= 1 with their arrays and
 * ascending offsets, a partition and a window index >= 0. */
ls_err_t window_inflight_check(const ls_inflight_t *s, const char *fn);

/* ls_windower_restore, and ids[i] (when not NULL) the id series i took (its
 * windows', its records' in the tap): an evicted one is gone by the end. */
ls_err_t window_restore(ls_windower_t *w, const ls_inflight_t *in, size_t n, ls_window_fn fn,
                        void *opaque, int64_t *ids);

#endif /* LSTREAM_INGEST_WINDOW_H */
