/*
 * The consumer (include/lstream/ingest.h, "Consumer"), internal: librdkafka
 * with an explicit assignment, one thread that consumes in batches,
 * validates and windows records (ingest/window.c), and bounded queues of
 * windows for the trainer, one per partition.
 *
 * Rooms, each using only those listed before it:
 *   consumer_core.c    warnings, failure, counters, partitions and pausing
 *   consumer_queue.c   the queues of windows, the memory bound, the
 *                      trainer's takes and releases
 *   consumer_leaders.c the partitions' leaders: each listed in the metadata
 *                      and reached at its advertised address, or an error
 *                      naming the partitions that are not
 *   consumer_start.c   start positions, the marks of resumed partitions
 *                      checked (a topic re-created), restoring series, the
 *                      assignment, partitions added live assigned
 *   consumer_record.c  the record path: messages to windows, held-back
 *                      messages, events, rejections and dead letters
 *   consumer_watch.c   the watch: a thread asking the partitions' leaders for
 *                      their high watermarks (connection, lag), and the
 *                      topic for its partition count (partitions added)
 *   consumer_inflight.c  what a snapshot keeps of a partition (ls_ingest_inflight)
 *   consumer_tap.c     the tap: accepted records handed to the trainer as
 *                      they come (ls_ingest_records), for live forecasts
 *   consumer.c         creation, the thread, the public calls that remain
 *
 * Threads. The consumer thread owns the librdkafka handles, the windower and
 * each partition's consumer-side state. The trainer's thread calls
 * ls_ingest_next[_partition] / _release / _stats. They meet under `lock`:
 * the queues, the pool of free windows, the published counters, the end and
 * error flags. Queue lengths are also atomics so that the consumer checks
 * its bounds per record without locking. What a resume offset reads besides
 * (each partition's next offset, the windower's series) changes only under
 * `hold`, which the consumer thread holds while it handles a batch of
 * messages or services its partitions, and lets go of while it waits (for
 * messages, for memory): so ls_ingest_inflight never sees a record between
 * librdkafka and the windows, nor a window between the windower and its
 * queue. Lock order: hold, then lock.
 *
 * Queues. Every window is in two lists: its partition's (in the order its
 * records completed them: what a replay's step formation relies on) and one
 * of all partitions in arrival order (for live mode). The head of the second
 * is always the head of its partition's, so either can be taken in O(1).
 *
 * Bounds. A partition whose queue holds queue.windows windows is paused on
 * its own (rd_kafka_pause_partitions): its messages still in hand are held
 * back, in order, with its events, and handled once the trainer has taken
 * half its queue, when it is resumed (librdkafka refetches from after the
 * last message it handed out). The other partitions go on, so a trainer
 * waiting on one partition never waits behind another's full queue.
 * Memory is counted in records: those in series buffers plus T+G per queued
 * window (G the horizon). A record needs memory + G+1 to fit (it adds one
 * record, and when it completes a window T leave the buffer and T+G enter
 * the queue); if it does
 * not, every partition is paused until the trainer has drained memory below
 * 3/4 of the bound. If nothing that can drain it will (no window queued, or
 * the trainer waits on a partition with none queued), the consumer fails
 * with an error naming the bound: it never drops, and never hangs silently.
 */
#ifndef LSTREAM_INGEST_CONSUMER_INTERNAL_H
#define LSTREAM_INGEST_CONSUMER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <librdkafka/rdkafka.h>

#include "conf.h"
#include "lstream/ingest.h"

/* Partitions added to the topic live (ls_ingest_conf_set_growth): at most
 * GROW_PARTS more per consumer, of ids below GROW_IDS (their arrays are
 * made that large at the start, so that they never move under the
 * trainer's thread); the others are read after a restart. */
#define GROW_PARTS 1024
#define GROW_IDS   65536

/* A partition the watch found added to the topic, for the consumer thread
 * to assign (consumer_grow). */
typedef struct grow_add_s {
  int32_t id;
  int64_t low, high; /* its watermarks when found */
} grow_add_t;

/* Messages asked of librdkafka per batch. */
#define BATCH_MAX 4096
/* How long one batch call may wait (ms): bounds the latency of a stop. */
#define BATCH_WAIT_MS 100

/* A queued or handed-out window and its storage. win must stay first:
 * ls_ingest_release gets the node back from the window's address. */
typedef struct window_node_s {
  ls_window_t win;
  struct window_node_s *prev, *next; /* the queue of all partitions, in arrival order; once
                                        handed out, its partition's list of those (part_t
                                        out); in the pool: next */
  struct window_node_s *pnext;       /* its partition's queue */
  int part;                          /* index in parts */
  int64_t seq;                       /* its number in its partition (part_t seq) */
  char key[LS_KEY_MAX + 1];
  float *x;         /* [T+1, F] */
  float *mask;      /* [T] */
  int64_t *times;   /* [T+1] */
  int64_t *offsets; /* [T+1] */
} window_node_t;

/* A window in flight, as a partition's ring of them keeps it (part_t
 * flight): what a snapshot reads of it without reading the window. */
typedef struct flight_s {
  const window_node_t *node;  /* NULL once released */
  int64_t seq, series, index; /* its seq; its ls_window_t's */
  int rows, reset;            /* n_targets + 1 + n_extra; its reset */
} flight_t;

typedef struct part_s {
  int32_t id;
  /* Consumer thread. */
  int64_t start;              /* first offset to read (progress counts from here) */
  int64_t end;                /* stop=end: the high watermark at start; else INT64_MAX */
  int64_t next;               /* offset after the last record handled */
  int64_t skip_time;          /* timestamp start: skip records before it, until one is not; -1 */
  int64_t assign_at;          /* the offset given to rd_kafka_assign (may be logical) */
  ls_ingest_mark_t mark;      /* the last record handled (the conf's before any); offset -1 */
  int restarted;              /* its mark not found: read from its beginning (topic_recreated) */
  int done;                   /* reached its end */
  int flushing;               /* done, partial windows still to queue */
  int queue_paused;           /* paused because its queue is full */
  rd_kafka_message_t **stash; /* [n_stash]: held back while its queue is full */
  int n_stash, stash_at, cap_stash;
  /* Under lock (n also atomic). */
  window_node_t *head, *tail;
  window_node_t *out; /* handed out, not yet released (freed by destroy) */
  int64_t n_out;
  int64_t seq;         /* the number of its next window queued: 0, 1, ... */
  flight_t *flight;    /* [cap_flight] ring: window seq at seq % cap_flight, for the seqs in
                          [flight_head, seq) (queued, handed out or released since) */
  int64_t flight_head; /* the oldest seq maybe in flight */
  int64_t cap_flight;  /* a power of two */
  atomic_int_fast64_t n;
  int ended;        /* done and every window queued: LS_NEXT_END once the queue is empty */
  int waiters;      /* threads in take_next waiting for this partition's next window */
  int64_t pub_next; /* next, as published by consumer_publish */
  int pub_paused;   /* queue_paused, as published */
  int64_t high;     /* the high watermark of the last good watch (or read at start) */
  int64_t low;      /* the low watermark read at start */
  /* Consumer thread: the check of its first records against the format. */
  int probed, probe_failed;         /* of its first PROBE_RECORDS records, those that did
                                       not decode */
  int probe_by[LS_REJECT__COUNT];   /* per reason */
  unsigned char probe_sample[1024]; /* the first that did not decode, its first bytes */
  size_t probe_sample_len;          /* its whole length */
  char probe_why[160];              /* and why */
} part_t;

/* The records of each partition checked against the declared format; a
 * run stops when half of them or more do not decode. */
#define PROBE_RECORDS 100

/* The watch's thread and what it found (ingest/consumer_watch.c). */
typedef struct consumer_watch_s {
  pthread_t thread;
  int started;
  pthread_mutex_t lock; /* quit, with wake */
  pthread_cond_t wake;
  int quit;
  /* Under the consumer's lock: */
  int connected;   /* see ls_ingest_stats_t */
  int64_t ok_ms;   /* base_now_ms() of the last good watch */
  char error[512]; /* why the last one failed; "" when connected */
} consumer_watch_t;

/* The tap's records (consumer_tap.c): two of these, one the consumer
 * fills and one handed out, swapped by ls_ingest_records. */
typedef struct tap_buf_s {
  ls_tap_record_t *rec; /* [cap]; x and key set when handed out */
  float *x;             /* [cap, F] */
  char *keys;           /* [cap, LS_KEY_MAX + 1] copies: an evicted series' key is freed */
  int64_t n, cap;
} tap_buf_t;

/* Kinds of rate-limited warning: one per rejection reason, then these. */
enum {
  WARN_KAFKA = LS_REJECT__COUNT,
  WARN_LOG,
  WARN_DEAD_LETTER,
  WARN_WATCH,
  WARN_MOVED,
  WARN_ADDED,
  WARN_ARRIVED,
  WARN__COUNT
};

typedef struct warn_state_s {
  int64_t last_ms; /* when the last one went out; -1 never */
  int64_t suppressed;
} warn_state_t;

struct ls_ingest_s {
  /* Set by ls_ingest_new, then read-only. */
  ls_ingest_settings_t s; /* the conf's settings, strings owned */
  rd_kafka_t *rk;
  rd_kafka_queue_t *rkq;     /* the consumer queue */
  rd_kafka_queue_t *commits; /* results of ls_ingest_commit_async, polled by the thread */
  rd_kafka_t *dlq;           /* dead-letter producer, or NULL */
  part_t *parts;             /* [cap_parts]: n_parts in use (more are added live only by the
                                consumer thread, under hold and lock: the array never moves) */
  atomic_int n_parts;
  int cap_parts;
  int32_t *part_of_id; /* [max_id + 1]: index in parts, -1 if not ours */
  int32_t max_id;
  /* Partitions added live (ls_ingest_conf_set_growth): those of ids >=
   * grow_known with id % grow_world == grow_rank; grow_world 0: none. */
  int32_t grow_world, grow_rank;
  int32_t grow_known;  /* the watch thread's: the topic's partitions it knows */
  atomic_int arrivals; /* count series new to the consumer (ls_ingest_conf_set_arrivals; set
                          by the watch once the topic grew) */
  ls_windower_t *w;
  pthread_t thread;
  int thread_started;
  consumer_watch_t watch;

  /* The consumer thread's own. */
  rd_kafka_message_t **batch; /* [BATCH_MAX] */
  int n_done, n_ended;
  int64_t skipped, duplicates, kafka_errors, pauses;
  int64_t dead_letters, dead_letter_errors;
  int64_t peak_memory;
  int n_paused; /* partitions paused now */
  int64_t partitions_added;
  int64_t arrived; /* series new to the consumer while arrivals is on */

  /* Changed by the consumer thread only under hold: each part's next and the
   * windower. */
  pthread_mutex_t hold;

  /* Shared, under lock. */
  pthread_mutex_t lock;
  pthread_cond_t ready; /* a window where a thread waits for its partition or any (waiters,
                         * waiters_any), an end, an error, the tap's records, stop */
  pthread_cond_t room;  /* the trainer took a window or waits, or stop */
  window_node_t *head, *tail, *pool;
  int64_t n_pool;
  int waiting;     /* index of the partition ls_ingest_next_partition waits on, or -1 */
  int waiters_any; /* threads in take_next waiting for any partition's next window */
  atomic_int_fast64_t queued;
  tap_buf_t tap_fill, tap_out; /* the tap: filled by the consumer, handed out */
  atomic_int_fast64_t tap_n;   /* records in tap_fill (memory) */
  atomic_int stop;
  int at_end;
  ls_err_t err;
  int err_now; /* err is returned before the windows queued (the records are not of their
                  format: none of them may train) */
  char errmsg[1024];
  ls_ingest_stats_t published;
  grow_add_t *adds; /* [n_adds] found by the watch, not yet assigned */
  int n_adds, cap_adds;

  /* Warnings, under warn_lock (librdkafka logs from its own threads). */
  pthread_mutex_t warn_lock;
  warn_state_t warn[WARN__COUNT];
  ls_ingest_warn_cb warn_cb;
  void *warn_opaque;
};

/* ------------------------------------------------------------------------ */
/* consumer_core.c                                                           */

/* Passes a warning of this kind to the callback, at most one per interval. */
void consumer_warn(ls_ingest_t *ing, int kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records the consumer thread's failure for ls_ingest_next. */
void consumer_fail(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* consumer_fail, and the error is returned at once, before any window
 * still queued. */
void consumer_fail_now(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records in series buffers; memory in records with `buffered` of them. */
int64_t consumer_buffered(const ls_ingest_t *ing);
int64_t consumer_memory(const ls_ingest_t *ing, int64_t buffered);

/* Samples the memory peak (on the consumer thread, where memory grows). */
void consumer_track_peak(ls_ingest_t *ing);

/* Copies the consumer thread's counters to `published` (_locked: the caller
 * holds lock). */
void consumer_publish_locked(ls_ingest_t *ing);
void consumer_publish(ls_ingest_t *ing);

/* The partition of id, or NULL when it is not one of ours. */
part_t *consumer_part(ls_ingest_t *ing, int32_t id);

/* The partition of the consumer's `partition`, or an error naming it for
 * function fn. */
ls_err_t consumer_our_part(ls_ingest_t *ing, int32_t partition, const char *fn, part_t **out);

/* 1 when part's queue holds queue.windows windows. */
int consumer_queue_full(const ls_ingest_t *ing, part_t *part);

/* Pauses or resumes one partition, or (part NULL) every partition not done
 * (resuming: and not paused for its own queue). */
void consumer_set_paused(ls_ingest_t *ing, int pause, const part_t *part);

/* Marks a partition ended: every window it will ever have is queued. */
void consumer_part_end(ls_ingest_t *ing, part_t *part);

/* The partition reached its end (stop=end). */
void consumer_part_finish(ls_ingest_t *ing, part_t *part);

/* ------------------------------------------------------------------------ */
/* consumer_queue.c                                                          */

/* Queues a copy of window v on its partition. The caller checked that the
 * partition's queue has room and that memory fits. Returns 0, or -1 when
 * out of memory. */
int consumer_enqueue(ls_ingest_t *ing, part_t *part, const ls_window_t *v);

/* Where node keeps its rows (offsets and times [T+1], x [T+1, F]), from
 * its address alone (nothing read). */
void consumer_node_rows(const ls_ingest_t *ing, window_node_t *node, int64_t **offsets,
                        int64_t **times, float **x);

/* Makes room for growth more records in memory, waiting for the trainer if
 * need be. Called with hold held, which it lets go of while it waits.
 * Returns 0, or -1 when stopping or when nothing can ever make room (the
 * failure recorded). */
int consumer_make_room(ls_ingest_t *ing, int64_t growth);

/* ------------------------------------------------------------------------ */
/* consumer_leaders.c                                                        */

/* Checks, within timeout_ms, that every partition of the consumer has a
 * leader in the topic's metadata (waiting for one while an election or a
 * topic's creation goes on) and that this host connects to each leader's
 * advertised address (once per broker, all at once). LS_OK, or
 * LS_ERR_KAFKA naming the first partition that has none, with every
 * partition in its case (the same broker's) and the broker and address;
 * advice adds the causes to look for and the bound's name. */
ls_err_t consumer_check_leaders(ls_ingest_t *ing, int timeout_ms, int advice);

/* ------------------------------------------------------------------------ */
/* consumer_start.c                                                          */

/* Reads each partition's watermarks and turns its start into an offset,
 * gives the windower the conf's skip rules of our partitions, and assigns
 * the partitions that have something to read. */
ls_err_t consumer_start(ls_ingest_t *ing, const ls_ingest_conf_t *conf);

/* Assigns the partitions the watch found added to the topic (the consumer
 * thread, under hold), from their low watermarks, and says so. Returns 0,
 * or -1 when the thread must stop (the failure recorded). */
int consumer_grow(ls_ingest_t *ing);

/* ------------------------------------------------------------------------ */
/* consumer_record.c                                                         */

/* The digest of a record's key and value (ls_ingest_mark_t). */
uint64_t consumer_mark_digest(const void *key, size_t key_len, const void *value, size_t len);

/* Takes one message from librdkafka: handles it, or holds it back while
 * its partition's queue is full. Takes ownership of m. Returns 0, or -1
 * when the thread must stop. */
int consumer_dispatch(ls_ingest_t *ing, rd_kafka_message_t *m);

/* Work that waits on the trainer: messages held back, partitions to
 * resume, partial windows to queue. Returns 0 or -1. */
int consumer_service(ls_ingest_t *ing);

/* ------------------------------------------------------------------------ */
/* consumer_tap.c                                                            */

/* Hands the record the windower just accepted to the tap. Returns 0, or
 * -1 when out of memory (the failure recorded). */
int consumer_tap_push(ls_ingest_t *ing, const ls_windower_record_t *r, int32_t partition,
                      int64_t offset, int64_t time);

/* Frees the tap's buffers. */
void consumer_tap_free(ls_ingest_t *ing);

/* ------------------------------------------------------------------------ */
/* consumer_watch.c                                                          */

/* Starts the watch thread (nothing with watch.interval.ms = 0); the
 * partitions' high watermarks are those read at start until it reports.
 * With growth on, each round also reads the topic's partition count and
 * hands the partitions added since, of this consumer, to consumer_grow. */
ls_err_t consumer_watch_start(ls_ingest_t *ing);

/* Stops the watch thread (waiting for a round in flight: at most
 * watch.interval.ms, twice that while a leader cannot be reached); safe
 * when it never started. */
void consumer_watch_stop(ls_ingest_t *ing);

/* The watch's fields of the stats (the caller holds lock). */
void consumer_watch_stats_locked(const ls_ingest_t *ing, ls_ingest_stats_t *out);

#endif /* LSTREAM_INGEST_CONSUMER_INTERNAL_H */
