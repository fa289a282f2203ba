/*
 * The consumer (include/lstream/ingest.h, "Consumer"): librdkafka with an
 * explicit assignment, one thread that consumes in batches, validates and
 * windows records (ingest/window.c), and bounded queues of windows for the
 * trainer, one per partition.
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
 * messages, for memory): so ls_ingest_resume_offset never sees a record
 * between librdkafka and the windows, nor a window between the windower and
 * its queue. Lock order: hold, then lock.
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
 * Memory is counted in records: those in series buffers plus T+1 per queued
 * window. A record needs memory + 2 to fit (it adds one record, and when it
 * completes a window T leave the buffer and T+1 enter the queue); if it does
 * not, every partition is paused until the trainer has drained memory below
 * 3/4 of the bound. If nothing that can drain it will (no window queued, or
 * the trainer waits on a partition with none queued), the consumer fails
 * with an error naming the bound: it never drops, and never hangs silently.
 */
#include "lstream/ingest.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "conf.h"

/* Messages asked of librdkafka per batch. */
#define BATCH_MAX 4096
/* How long one batch call may wait (ms): bounds the latency of a stop. */
#define BATCH_WAIT_MS 100

/* A queued or handed-out window and its storage. win must stay first:
 * ls_ingest_release gets the node back from the window's address. */
typedef struct window_node_s {
  ls_window_t win;
  struct window_node_s *prev, *next; /* the queue of all partitions, in arrival order; once
                                        handed out, the list of those; in the pool: next */
  struct window_node_s *pnext;       /* its partition's queue */
  int part;                          /* index in parts */
  char key[LS_KEY_MAX + 1];
  float *x;    /* [T+1, F] */
  float *mask; /* [T] */
} window_node_t;

typedef struct part_s {
  int32_t id;
  /* Consumer thread. */
  int64_t start;              /* first offset to read (progress counts from here) */
  int64_t end;                /* stop=end: the high watermark at start; else INT64_MAX */
  int64_t next;               /* offset after the last record handled */
  int64_t skip_time;          /* timestamp start: skip records before it, until one is not; -1 */
  int64_t assign_at;          /* the offset given to rd_kafka_assign (may be logical) */
  int done;                   /* reached its end */
  int flushing;               /* done, partial windows still to queue */
  int queue_paused;           /* paused because its queue is full */
  rd_kafka_message_t **stash; /* [n_stash]: held back while its queue is full */
  int n_stash, stash_at, cap_stash;
  /* Under lock (n also atomic). */
  window_node_t *head, *tail;
  atomic_int_fast64_t n;
  int ended; /* done and every window queued: LS_NEXT_END once the queue is empty */
} part_t;

/* Kinds of rate-limited warning: one per rejection reason, then these. */
enum { WARN_KAFKA = LS_REJECT__COUNT, WARN_LOG, WARN_DEAD_LETTER, WARN__COUNT };

typedef struct warn_state_s {
  int64_t last_ms; /* when the last one went out; -1 never */
  int64_t suppressed;
} warn_state_t;

struct ls_ingest_s {
  /* Set by ls_ingest_new, then read-only. */
  char *topic, *dead_letter_topic;
  ls_format_t format;
  int F, T;
  int64_t queue_cap, memory_cap;
  int stop_at_end, flush;
  int commit_timeout_ms;
  rd_kafka_t *rk;
  rd_kafka_queue_t *rkq; /* the consumer queue */
  rd_kafka_t *dlq;       /* dead-letter producer, or NULL */
  part_t *parts;         /* [n_parts] */
  int n_parts;
  int32_t *part_of_id; /* [max_id + 1]: index in parts, -1 if not ours */
  int32_t max_id;
  ls_windower_t *w;
  pthread_t thread;
  int thread_started;

  /* The consumer thread's own. */
  rd_kafka_message_t **batch; /* [BATCH_MAX] */
  int n_done, n_ended;
  int64_t skipped, duplicates, kafka_errors, pauses;
  int64_t dead_letters, dead_letter_errors;
  int64_t peak_memory;
  int n_paused; /* partitions paused now */

  /* Changed by the consumer thread only under hold: each part's next and the
   * windower. */
  pthread_mutex_t hold;

  /* Shared, under lock. */
  pthread_mutex_t lock;
  pthread_cond_t ready; /* a window, an end or an error */
  pthread_cond_t room;  /* the trainer took a window or waits, or stop */
  window_node_t *head, *tail, *pool;
  window_node_t *out; /* handed out, not yet released (freed by destroy) */
  int64_t n_pool;
  int waiting; /* index of the partition ls_ingest_next_partition waits on, or -1 */
  atomic_int_fast64_t queued;
  atomic_int stop;
  int at_end;
  ls_err_t err;
  char errmsg[1024];
  ls_ingest_stats_t published;

  /* Warnings, under warn_lock (librdkafka logs from its own threads). */
  pthread_mutex_t warn_lock;
  warn_state_t warn[WARN__COUNT];
  ls_ingest_warn_cb warn_cb;
  void *warn_opaque;
  int warn_interval_ms;
};

/* ------------------------------------------------------------------------ */
/* Warnings                                                                  */

/* Passes a warning of this kind to the callback, at most one per interval. */
static void warn(ls_ingest_t *ing, int kind, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void warn(ls_ingest_t *ing, int kind, const char *fmt, ...) {
  if (ing->warn_cb == NULL) return;
  pthread_mutex_lock(&ing->warn_lock);
  warn_state_t *const st = &ing->warn[kind];
  int64_t const now = base_now_ms();
  if (st->last_ms >= 0 && now - st->last_ms < ing->warn_interval_ms) {
    st->suppressed++;
    pthread_mutex_unlock(&ing->warn_lock);
    return;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int const n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (st->suppressed > 0 && n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, " (%" PRId64 " more like it suppressed)",
             st->suppressed);
  st->suppressed = 0;
  st->last_ms = now;
  ing->warn_cb(ing->warn_opaque, msg);
  pthread_mutex_unlock(&ing->warn_lock);
}

static void on_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  if (level <= 4) /* LOG_WARNING or worse */
    warn(rd_kafka_opaque(rk), WARN_LOG, "librdkafka %s: %s", fac, buf);
}

static void on_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
  ls_ingest_t *const ing = opaque;
  ing->kafka_errors++;
  warn(ing, WARN_KAFKA, "Kafka: %s: %s (librdkafka retries)",
       rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

/* ------------------------------------------------------------------------ */
/* Failing, publishing                                                       */

/* Records the consumer thread's failure for ls_ingest_next. */
static void fail(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...) {
  pthread_mutex_lock(&ing->lock);
  if (ing->err == LS_OK) {
    ing->err = err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ing->errmsg, sizeof ing->errmsg, fmt, ap);
    va_end(ap);
  }
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
}

static int64_t buffered_records(const ls_ingest_t *ing) {
  ls_window_stats_t ws;
  ls_windower_stats(ing->w, &ws);
  return ws.buffered;
}

static int64_t memory_records(const ls_ingest_t *ing, int64_t buffered) {
  return buffered + atomic_load_explicit(&ing->queued, memory_order_relaxed) * (ing->T + 1);
}

/* Memory only grows on the consumer thread: it samples its peak there. */
static void track_peak(ls_ingest_t *ing) {
  int64_t const mem = memory_records(ing, buffered_records(ing));
  if (mem > ing->peak_memory) ing->peak_memory = mem;
}

/* Copies the consumer thread's counters to `published`; caller holds lock. */
static void publish_locked(ls_ingest_t *ing) {
  ls_ingest_stats_t *const p = &ing->published;
  ls_windower_stats(ing->w, &p->w);
  p->skipped = ing->skipped + p->w.skipped;
  p->duplicates = ing->duplicates;
  p->peak_memory_records = ing->peak_memory;
  p->pauses = ing->pauses;
  p->paused = ing->n_paused;
  p->dead_letters = ing->dead_letters;
  p->dead_letter_errors = ing->dead_letter_errors;
  p->kafka_errors = ing->kafka_errors;
  int64_t done = 0;
  for (int i = 0; i < ing->n_parts; i++) {
    const part_t *const part = &ing->parts[i];
    int64_t const at = part->done && part->end != INT64_MAX ? part->end : part->next;
    done += at > part->start ? at - part->start : 0;
  }
  p->progress_done = done;
}

static void publish(ls_ingest_t *ing) {
  pthread_mutex_lock(&ing->lock);
  publish_locked(ing);
  pthread_mutex_unlock(&ing->lock);
}

/* ------------------------------------------------------------------------ */
/* Partitions                                                                */

static part_t *part_find(ls_ingest_t *ing, int32_t id) {
  if (id < 0 || id > ing->max_id || ing->part_of_id[id] < 0) return NULL;
  return &ing->parts[ing->part_of_id[id]];
}

static int queue_full(const ls_ingest_t *ing, part_t *part) {
  return atomic_load_explicit(&part->n, memory_order_relaxed) >= ing->queue_cap;
}

/* Pauses or resumes one partition, or (part NULL) every partition not done
 * (resuming: and not paused for its own queue). */
static void set_paused(ls_ingest_t *ing, int pause, const part_t *part) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    const part_t *const p = &ing->parts[i];
    if (part != NULL ? p == part : !p->done && (pause || !p->queue_paused))
      rd_kafka_topic_partition_list_add(list, ing->topic, p->id);
  }
  rd_kafka_resp_err_t const err =
      pause ? rd_kafka_pause_partitions(ing->rk, list) : rd_kafka_resume_partitions(ing->rk, list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    warn(ing, WARN_KAFKA, "cannot %s partitions of '%s': %s", pause ? "pause" : "resume",
         ing->topic, rd_kafka_err2str(err));
  rd_kafka_topic_partition_list_destroy(list);
}

/* Marks a partition ended: every window it will ever have is queued. */
static void part_end(ls_ingest_t *ing, part_t *part) {
  ing->n_ended++;
  pthread_mutex_lock(&ing->lock);
  part->ended = 1;
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
}

/* The partition reached its end (stop=end). */
static void part_finish(ls_ingest_t *ing, part_t *part) {
  if (part->done) return;
  part->done = 1;
  ing->n_done++;
  if (!part->queue_paused) set_paused(ing, 1, part); /* what lies past the end is not ours */
  if (ing->flush)
    part->flushing = 1; /* service() queues its partial windows as room allows */
  else
    part_end(ing, part);
}

/* ------------------------------------------------------------------------ */
/* The queues of windows                                                     */

static window_node_t *node_new(const ls_ingest_t *ing) {
  size_t const rows = (size_t)ing->T + 1;
  window_node_t *const node =
      malloc(sizeof *node + (rows * (size_t)ing->F + (size_t)ing->T) * sizeof(float));
  if (node == NULL) return NULL;
  node->x = (float *)(node + 1);
  node->mask = node->x + rows * (size_t)ing->F;
  return node;
}

/* Queues a copy of window v on its partition. The caller checked that the
 * partition's queue has room and that memory fits. Returns 0, or -1 when
 * out of memory. */
static int enqueue(ls_ingest_t *ing, part_t *part, const ls_window_t *v) {
  pthread_mutex_lock(&ing->lock);
  window_node_t *node = ing->pool;
  if (node != NULL) {
    ing->pool = node->next;
    ing->n_pool--;
  }
  pthread_mutex_unlock(&ing->lock);
  if (node == NULL && (node = node_new(ing)) == NULL) {
    fail(ing, LS_ERR_NOMEM, "out of memory for a window (T=%d, F=%d)", ing->T, ing->F);
    return -1;
  }
  size_t const rows = (size_t)ing->T + 1;
  memcpy(node->key, v->key, v->key_len + 1);
  memcpy(node->x, v->x, rows * (size_t)ing->F * sizeof(float));
  memcpy(node->mask, v->mask, (size_t)ing->T * sizeof(float));
  node->win = *v;
  node->win.key = node->key;
  node->win.x = node->x;
  node->win.mask = node->mask;
  node->part = (int)(part - ing->parts);
  node->next = node->pnext = NULL;
  pthread_mutex_lock(&ing->lock);
  node->prev = ing->tail;
  if (ing->tail != NULL)
    ing->tail->next = node;
  else
    ing->head = node;
  ing->tail = node;
  if (part->tail != NULL)
    part->tail->pnext = node;
  else
    part->head = node;
  part->tail = node;
  atomic_fetch_add(&part->n, 1);
  atomic_fetch_add(&ing->queued, 1);
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
  track_peak(ing);
  return 0;
}

/* Takes the head of part's queue off both queues, onto the list of windows
 * handed out; caller holds lock. */
static window_node_t *dequeue_locked(ls_ingest_t *ing, part_t *part) {
  window_node_t *const node = part->head;
  part->head = node->pnext;
  if (part->head == NULL) part->tail = NULL;
  if (node->prev != NULL)
    node->prev->next = node->next;
  else
    ing->head = node->next;
  if (node->next != NULL)
    node->next->prev = node->prev;
  else
    ing->tail = node->prev;
  node->prev = NULL;
  node->next = ing->out;
  if (ing->out != NULL) ing->out->prev = node;
  ing->out = node;
  int64_t const left = atomic_fetch_sub(&part->n, 1) - 1;
  atomic_fetch_sub(&ing->queued, 1);
  pthread_cond_broadcast(&ing->room);
  /* Half drained: wake the consumer from its batch wait to resume it. */
  if (left == ing->queue_cap / 2) rd_kafka_queue_yield(ing->rkq);
  return node;
}

/* ------------------------------------------------------------------------ */
/* The memory bound                                                          */

/* 1 when the trainer can never drain memory: nothing queued, or it waits
 * on a partition that has nothing queued and has not ended. Caller holds
 * lock. */
static int stuck_locked(const ls_ingest_t *ing) {
  if (atomic_load(&ing->queued) == 0) return 1;
  if (ing->waiting < 0) return 0;
  const part_t *const w = &ing->parts[ing->waiting];
  return atomic_load(&w->n) == 0 && !w->ended;
}

/* Waits, every partition paused, until memory + growth fits the bound,
 * with `buffered` records in series buffers. Returns 0, or -1 when stopping
 * or when nothing can ever make room. */
static int wait_for_room(ls_ingest_t *ing, int64_t buffered, int64_t growth) {
  set_paused(ing, 1, NULL);
  int const was_paused = ing->n_paused;
  ing->pauses++;
  ing->n_paused = ing->n_parts - ing->n_done;
  pthread_mutex_lock(&ing->lock);
  publish_locked(ing);
  int stuck = 0;
  for (;;) {
    int64_t const mem = memory_records(ing, buffered);
    if (atomic_load(&ing->stop)) break;
    if (mem + growth <= ing->memory_cap &&
        (mem <= ing->memory_cap / 4 * 3 || atomic_load(&ing->queued) == 0))
      break;
    if ((stuck = stuck_locked(ing)) != 0) break;
    pthread_cond_wait(&ing->room, &ing->lock);
  }
  pthread_mutex_unlock(&ing->lock);
  if (stuck) {
    ls_window_stats_t ws;
    ls_windower_stats(ing->w, &ws);
    fail(ing, LS_ERR_STATE,
         "buffer.records=%" PRId64 " is full (%" PRId64 " records in partial windows of %" PRId64
         " series, %" PRId64 " queued windows of %d) and nothing the trainer will take can "
         "drain it: raise buffer.records above partitions x queue.windows x (window + 1) + "
         "series x (window + 1)",
         ing->memory_cap, ws.buffered, ws.series, (int64_t)atomic_load(&ing->queued), ing->T + 1);
    return -1;
  }
  if (atomic_load(&ing->stop)) return -1;
  set_paused(ing, 0, NULL);
  ing->n_paused = was_paused;
  return 0;
}

/* Makes room for growth more records in memory, waiting for the trainer if
 * need be. Called with hold held, which it lets go of while it waits:
 * nothing held changes meanwhile, and the trainer may want a resume offset
 * before it takes the windows that would drain memory. Returns 0 or -1, as
 * wait_for_room. */
static int make_room(ls_ingest_t *ing, int64_t growth) {
  int64_t const buffered = buffered_records(ing);
  if (memory_records(ing, buffered) + growth <= ing->memory_cap) return 0;
  pthread_mutex_unlock(&ing->hold);
  int const rc = wait_for_room(ing, buffered, growth);
  pthread_mutex_lock(&ing->hold);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

/* What went wrong with a rejected record, for its warning. */
static void reject_detail(const ls_ingest_t *ing, ls_reject_t r, const rd_kafka_message_t *m,
                          int64_t timestamp, char *buf, size_t size) {
  switch (r) {
  case LS_REJECT_SIZE:
    snprintf(buf, size, "the value (%zu bytes) is not %d %s values", m->len, ing->F,
             ls_format2str(ing->format));
    return;
  case LS_REJECT_PARSE:
    snprintf(buf, size, "the value '%.*s' does not parse as %d csv numbers",
             (int)(m->len < 40 ? m->len : 40), m->payload ? (const char *)m->payload : "", ing->F);
    return;
  case LS_REJECT_NONFINITE: snprintf(buf, size, "the value holds NaN or Inf"); return;
  case LS_REJECT_BACKWARDS:
    snprintf(buf, size, "its time %" PRId64 " ms is before the series' last record", timestamp);
    return;
  case LS_REJECT_KEY:
    snprintf(buf, size, "the key is %zu bytes (1..%d allowed)", m->key_len, LS_KEY_MAX);
    return;
  case LS_REJECT_PARTITION:
    snprintf(buf, size, "the series was first seen on another partition");
    return;
  default: snprintf(buf, size, "?"); return;
  }
}

/* The key, printable, for messages: at most 40 bytes, '?' for the rest. */
static void printable_key(const rd_kafka_message_t *m, char *buf, size_t size) {
  size_t n = m->key_len < size - 1 ? m->key_len : size - 1;
  if (n > 40) n = 40;
  const unsigned char *const k = m->key;
  for (size_t i = 0; i < n; i++)
    buf[i] = k[i] >= 32 && k[i] < 127 ? (char)k[i] : '?';
  buf[n] = '\0';
}

static void dead_letter(ls_ingest_t *ing, const rd_kafka_message_t *m, ls_reject_t r,
                        int64_t timestamp) {
  char source[96];
  snprintf(source, sizeof source, "%s/%" PRId32 "/%" PRId64, ing->topic, m->partition, m->offset);
  rd_kafka_resp_err_t err;
  for (;;) {
    err = rd_kafka_producev(
        ing->dlq, RD_KAFKA_V_TOPIC(ing->dead_letter_topic), RD_KAFKA_V_KEY(m->key, m->key_len),
        RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0),
        RD_KAFKA_V_HEADER("lstream-reject-reason", ls_reject2str(r), -1),
        RD_KAFKA_V_HEADER("lstream-source", source, -1), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || atomic_load(&ing->stop)) break;
    rd_kafka_poll(ing->dlq, BATCH_WAIT_MS); /* the local queue is full: let it drain */
  }
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    ing->dead_letter_errors++;
    warn(ing, WARN_DEAD_LETTER, "cannot copy %s to dead-letter topic '%s': %s", source,
         ing->dead_letter_topic, rd_kafka_err2str(err));
  }
}

static void on_reject(ls_ingest_t *ing, const rd_kafka_message_t *m, ls_reject_t r,
                      int64_t timestamp) {
  if (ing->warn_cb != NULL) {
    char detail[160], key[48];
    reject_detail(ing, r, m, timestamp, detail, sizeof detail);
    printable_key(m, key, sizeof key);
    warn(ing, r, "rejected record partition %" PRId32 " offset %" PRId64 " key '%s' (%s): %s",
         m->partition, m->offset, key, ls_reject2str(r), detail);
  }
  if (ing->dlq != NULL) dead_letter(ing, m, r, timestamp);
}

/* Handles one record of part. Returns 0, or -1 when the thread must stop. */
static int handle_record(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m) {
  if (part->done) return 0; /* past our end */
  if (m->offset < part->next) {
    ing->duplicates++;
    return 0;
  }
  if (m->offset >= part->end) {
    part_finish(ing, part);
    return 0;
  }
  if (make_room(ing, 2) != 0) return -1;
  part->next = m->offset + 1;
  rd_kafka_timestamp_type_t ts_type;
  int64_t const ts = rd_kafka_message_timestamp(m, &ts_type);
  int64_t const timestamp = ts_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts;
  if (part->skip_time >= 0) {
    if (timestamp >= 0 && timestamp < part->skip_time) {
      ing->skipped++;
      if (part->next >= part->end) part_finish(ing, part);
      return 0;
    }
    part->skip_time = -1; /* the first record at or after the start time */
  }
  ls_record_t const rec = {m->key,       m->key_len, m->payload, m->len,
                           m->partition, m->offset,  timestamp};
  const ls_window_t *win = NULL;
  ls_reject_t const r = ls_windower_push(ing->w, &rec, &win);
  if (r == LS_REJECT__COUNT) {
    fail(ing, LS_ERR_NOMEM, "%s", ls_last_error());
    return -1;
  }
  if (r != LS_REJECT_NONE) on_reject(ing, m, r, timestamp);
  if (win != NULL && enqueue(ing, part, win) != 0) return -1;
  if (win == NULL) track_peak(ing);
  if (part->next >= part->end) part_finish(ing, part);
  return 0;
}

/* Handles a consumer event (m->err set) of part (NULL: not a partition's).
 * Returns 0, or -1 to stop. */
static int handle_event(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m) {
  switch (m->err) {
  case RD_KAFKA_RESP_ERR__PARTITION_EOF:
    if (part != NULL && m->offset > part->next) part->next = m->offset;
    if (part != NULL && part->next >= part->end) part_finish(ing, part);
    return 0;
  case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
  case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    fail(ing, LS_ERR_KAFKA,
         "topic '%s' partition %" PRId32 ": offset %" PRId64 " is out of range: %s (records "
         "deleted by retention before they were read are lost; restart from a later position)",
         ing->topic, m->partition, part != NULL ? part->next : m->offset,
         rd_kafka_message_errstr(m));
    return -1;
  case RD_KAFKA_RESP_ERR__FATAL: {
    char reason[512];
    rd_kafka_resp_err_t const fatal = rd_kafka_fatal_error(ing->rk, reason, sizeof reason);
    fail(ing, LS_ERR_KAFKA, "fatal Kafka error %s: %s", rd_kafka_err2name(fatal), reason);
    return -1;
  }
  default:
    ing->kafka_errors++;
    warn(ing, WARN_KAFKA, "Kafka: partition %" PRId32 ": %s (librdkafka retries)", m->partition,
         rd_kafka_message_errstr(m));
    return 0;
  }
}

static int handle(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m) {
  return m->err ? handle_event(ing, part, m) : handle_record(ing, part, m);
}

/* Keeps m (a record or an event) for later, in order. Returns 0, or -1
 * when out of memory. */
static int stash(ls_ingest_t *ing, part_t *part, rd_kafka_message_t *m) {
  if (part->n_stash == part->cap_stash) {
    int const cap = part->cap_stash ? 2 * part->cap_stash : 64;
    rd_kafka_message_t **const grown = realloc(part->stash, (size_t)cap * sizeof *grown);
    if (grown == NULL) {
      fail(ing, LS_ERR_NOMEM, "out of memory holding back %d messages of partition %" PRId32, cap,
           part->id);
      return -1;
    }
    part->stash = grown;
    part->cap_stash = cap;
  }
  part->stash[part->n_stash++] = m;
  if (!part->queue_paused) {
    part->queue_paused = 1;
    set_paused(ing, 1, part);
    ing->pauses++;
    ing->n_paused++;
  }
  return 0;
}

/* Takes one message from librdkafka: handles it, or holds it back while
 * its partition's queue is full. Takes ownership of m. Returns 0 or -1. */
static int dispatch(ls_ingest_t *ing, rd_kafka_message_t *m) {
  part_t *const part = m->rkt != NULL ? part_find(ing, m->partition) : NULL;
  if (part != NULL && (part->stash_at < part->n_stash || queue_full(ing, part)))
    return stash(ing, part, m);
  int const rc = handle(ing, part, m);
  rd_kafka_message_destroy(m);
  return rc;
}

/* Work that waits on the trainer: messages held back, partitions to
 * resume, partial windows to queue. Returns 0 or -1. */
static int service(ls_ingest_t *ing) {
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const part = &ing->parts[i];
    while (part->stash_at < part->n_stash && !queue_full(ing, part)) {
      rd_kafka_message_t *const m = part->stash[part->stash_at++];
      int const rc = handle(ing, part, m);
      rd_kafka_message_destroy(m);
      if (rc != 0) return -1;
    }
    if (part->stash_at == part->n_stash) part->stash_at = part->n_stash = 0;
    if (part->queue_paused && part->n_stash == 0 && atomic_load(&part->n) <= ing->queue_cap / 2) {
      part->queue_paused = 0;
      ing->n_paused--;
      if (!part->done) set_paused(ing, 0, part);
    }
    while (part->flushing && !queue_full(ing, part)) {
      if (make_room(ing, ing->T + 1) != 0) return -1;
      const ls_window_t *win = NULL;
      ls_windower_flush_next(ing->w, part->id, &win);
      if (win == NULL) {
        part->flushing = 0;
        part_end(ing, part);
      } else if (enqueue(ing, part, win) != 0) {
        return -1;
      }
    }
  }
  return 0;
}

/* At the end of a replay: the dead letters delivered, the end announced.
 * Every partition is done: none is paused for backpressure any more. */
static void finish(ls_ingest_t *ing) {
  if (ing->dlq != NULL) rd_kafka_flush(ing->dlq, 10000);
  ing->n_paused = 0;
  pthread_mutex_lock(&ing->lock);
  publish_locked(ing);
  ing->at_end = 1;
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
}

/* What librdkafka has ready, up to BATCH_MAX messages; if nothing is,
 * waits up to BATCH_WAIT_MS for one. (A batch call that blocks waits until
 * its batch is full or its time is up, however many messages came.) */
static ssize_t consume_batch(ls_ingest_t *ing) {
  ssize_t const n = rd_kafka_consume_batch_queue(ing->rkq, 0, ing->batch, BATCH_MAX);
  return n != 0 ? n : rd_kafka_consume_batch_queue(ing->rkq, BATCH_WAIT_MS, ing->batch, 1);
}

static void *consumer_main(void *arg) {
  ls_ingest_t *const ing = arg;
  int failed = 0;
  while (!failed && !atomic_load(&ing->stop)) {
    pthread_mutex_lock(&ing->hold);
    failed = service(ing);
    pthread_mutex_unlock(&ing->hold);
    if (failed) break;
    publish(ing);
    if (ing->stop_at_end && ing->n_ended == ing->n_parts) break;
    ssize_t const n = consume_batch(ing);
    if (n < 0) {
      fail(ing, LS_ERR_KAFKA, "consuming topic '%s' failed: %s", ing->topic,
           rd_kafka_err2str(rd_kafka_last_error()));
      break;
    }
    pthread_mutex_lock(&ing->hold);
    for (ssize_t i = 0; i < n; i++) {
      if (!failed)
        failed = dispatch(ing, ing->batch[i]);
      else
        rd_kafka_message_destroy(ing->batch[i]);
    }
    pthread_mutex_unlock(&ing->hold);
    if (ing->dlq != NULL) rd_kafka_poll(ing->dlq, 0);
  }
  if (!failed && !atomic_load(&ing->stop) && ing->stop_at_end) finish(ing);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Start positions                                                           */

/* Reads each partition's watermarks and turns its start into an offset. */
static ls_err_t resolve_starts(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  int const timeout = conf->s.start_timeout_ms;
  rd_kafka_topic_partition_list_t *const times = rd_kafka_topic_partition_list_new(1);
  ls_err_t err = LS_OK;
  for (int i = 0; i < ing->n_parts && err == LS_OK; i++) {
    part_t *const p = &ing->parts[i];
    ls_start_t const s = conf->partitions[i].start;
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t const kerr =
        rd_kafka_query_watermark_offsets(ing->rk, ing->topic, p->id, &low, &high, timeout);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      err = ls_error_set(LS_ERR_KAFKA,
                         "topic '%s' partition %" PRId32 ": cannot read its watermarks: %s "
                         "(does the partition exist? is bootstrap.servers right?)",
                         ing->topic, p->id, rd_kafka_err2str(kerr));
      break;
    }
    p->end = ing->stop_at_end ? high : INT64_MAX;
    p->skip_time = -1;
    switch (s.kind) {
    case LS_START_OFFSET:
      if (s.value < low || s.value > high)
        err = ls_error_set(LS_ERR_INVALID_ARG,
                           "topic '%s' partition %" PRId32 ": start offset %" PRId64
                           " is outside the watermarks [%" PRId64 ", %" PRId64
                           "] (below: deleted by retention; above: not written yet)",
                           ing->topic, p->id, s.value, low, high);
      p->start = p->assign_at = s.value;
      break;
    case LS_START_BEGINNING:
      p->start = low;
      p->assign_at = RD_KAFKA_OFFSET_BEGINNING;
      break;
    case LS_START_END: p->start = p->assign_at = high; break;
    case LS_START_TIMESTAMP:
      p->start = p->assign_at = low; /* unless offsets_for_times finds it */
      p->skip_time = s.value;
      rd_kafka_topic_partition_list_add(times, ing->topic, p->id)->offset = s.value;
      break;
    }
    p->next = p->start;
  }
  if (err == LS_OK && times->cnt > 0) {
    rd_kafka_resp_err_t const kerr = rd_kafka_offsets_for_times(ing->rk, times, timeout);
    for (int i = 0; i < times->cnt && err == LS_OK; i++) {
      const rd_kafka_topic_partition_t *const t = &times->elems[i];
      rd_kafka_resp_err_t const perr = kerr != RD_KAFKA_RESP_ERR_NO_ERROR ? kerr : t->err;
      if (perr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = ls_error_set(LS_ERR_KAFKA,
                           "topic '%s' partition %" PRId32 ": cannot look up the offset of a "
                           "start time: %s",
                           ing->topic, t->partition, rd_kafka_err2str(perr));
        break;
      }
      part_t *const p = part_find(ing, t->partition);
      if (t->offset >= 0) p->start = p->assign_at = p->next = t->offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(times);
  return err;
}

/* Gives the windower the conf's skip rules of our partitions. */
static ls_err_t apply_skips(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  for (size_t i = 0; i < conf->n_skips; i++) {
    const ingest_skip_t *const r = &conf->skips[i];
    if (part_find(ing, r->partition) != NULL)
      LS_FORWARD_IF_ERROR(ls_windower_skip_series(ing->w, conf->skip_keys + r->key_at, r->key_len,
                                                  r->partition, r->below, r->next_index));
  }
  return LS_OK;
}

/* Assigns the partitions that have something to read; the others are done
 * (with nothing to flush) from the start. */
static ls_err_t assign(ls_ingest_t *ing) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const p = &ing->parts[i];
    if (p->start >= p->end) {
      p->done = p->ended = 1;
      ing->n_done++;
      ing->n_ended++;
      continue;
    }
    rd_kafka_topic_partition_list_add(list, ing->topic, p->id)->offset = p->assign_at;
  }
  rd_kafka_resp_err_t const kerr = rd_kafka_assign(ing->rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot assign the partitions of topic '%s': %s", ing->topic,
               rd_kafka_err2str(kerr));
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void on_dead_letter_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  ls_ingest_t *const ing = opaque;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    ing->dead_letters++;
    return;
  }
  ing->dead_letter_errors++;
  warn(ing, WARN_DEAD_LETTER, "a record for dead-letter topic '%s' was not delivered: %s",
       ing->dead_letter_topic, rd_kafka_err2str(m->err));
}

/* A librdkafka client on conf's properties, its logs and errors turned
 * into warnings. */
static ls_err_t client_new(ls_ingest_t *ing, const ls_ingest_conf_t *conf, rd_kafka_type_t type,
                           rd_kafka_t **out) {
  rd_kafka_conf_t *k;
  LS_FORWARD_IF_ERROR(ingest_conf_kafka(conf, type == RD_KAFKA_CONSUMER, &k));
  rd_kafka_conf_set_opaque(k, ing);
  rd_kafka_conf_set_log_cb(k, on_kafka_log);
  rd_kafka_conf_set_error_cb(k, on_kafka_error);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(k, on_dead_letter_delivery);
  char errstr[512];
  *out = rd_kafka_new(type, k, errstr, sizeof errstr);
  if (*out == NULL) {
    rd_kafka_conf_destroy(k);
    return ls_error_set(LS_ERR_KAFKA, "cannot create a Kafka %s: %s",
                        type == RD_KAFKA_CONSUMER ? "consumer" : "dead-letter producer", errstr);
  }
  return LS_OK;
}

static ls_err_t check_conf(const ls_ingest_conf_t *conf) {
  LS_RETURN_IF(conf->s.topic == NULL, LS_ERR_INVALID_ARG,
               "no topic to consume (set the ingest key \"topic\")");
  LS_RETURN_IF(conf->n_partitions == 0, LS_ERR_INVALID_ARG,
               "no partitions to consume (ls_ingest_conf_add_partition; "
               "ls_ingest_topic_partitions counts them)");
  int64_t const one = (int64_t)conf->s.window + 1;
  LS_RETURN_IF(conf->s.buffer_records < 2 * one, LS_ERR_INVALID_ARG,
               "buffer.records=%" PRId64 " cannot hold even two windows of T+1=%" PRId64 " records",
               conf->s.buffer_records, one);
  return LS_OK;
}

/* Copies the conf's settings and partitions into ing. */
static ls_err_t copy_conf(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  ing->format = conf->s.format;
  ing->F = conf->s.features;
  ing->T = conf->s.window;
  ing->queue_cap = conf->s.queue_windows;
  ing->memory_cap = conf->s.buffer_records;
  ing->stop_at_end = conf->s.stop_at_end;
  ing->flush = conf->s.flush;
  ing->commit_timeout_ms = conf->s.commit_timeout_ms;
  ing->warn_cb = conf->warn_cb;
  ing->warn_opaque = conf->warn_opaque;
  ing->warn_interval_ms = conf->s.warn_interval_ms;
  ing->topic = strdup(conf->s.topic);
  ing->dead_letter_topic = conf->s.dead_letter_topic ? strdup(conf->s.dead_letter_topic) : NULL;
  ing->n_parts = conf->n_partitions;
  ing->parts = calloc((size_t)ing->n_parts, sizeof *ing->parts);
  ing->batch = malloc(BATCH_MAX * sizeof *ing->batch);
  for (int i = 0; i < ing->n_parts; i++)
    if (conf->partitions[i].id > ing->max_id) ing->max_id = conf->partitions[i].id;
  ing->part_of_id = malloc(((size_t)ing->max_id + 1) * sizeof *ing->part_of_id);
  LS_RETURN_IF(!ing->topic || (conf->s.dead_letter_topic && !ing->dead_letter_topic) || !ing->parts ||
                   !ing->batch || !ing->part_of_id,
               LS_ERR_NOMEM, "ls_ingest_new: out of memory (%d partitions, largest id %" PRId32 ")",
               ing->n_parts, ing->max_id);
  for (int32_t id = 0; id <= ing->max_id; id++)
    ing->part_of_id[id] = -1;
  for (int i = 0; i < ing->n_parts; i++) {
    ing->parts[i].id = conf->partitions[i].id;
    atomic_init(&ing->parts[i].n, 0);
    ing->part_of_id[ing->parts[i].id] = i;
  }
  return LS_OK;
}

ls_err_t ls_ingest_new(ls_ingest_t **out, const ls_ingest_conf_t *conf) {
  LS_RETURN_IF(out == NULL || conf == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_new: out and conf must not be NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(check_conf(conf));
  ls_ingest_t *const ing = calloc(1, sizeof *ing);
  LS_RETURN_IF(ing == NULL, LS_ERR_NOMEM, "ls_ingest_new: out of memory");
  pthread_mutex_init(&ing->hold, NULL);
  pthread_mutex_init(&ing->lock, NULL);
  pthread_mutex_init(&ing->warn_lock, NULL);
  pthread_cond_init(&ing->ready, NULL);
  pthread_cond_init(&ing->room, NULL);
  for (int k = 0; k < WARN__COUNT; k++)
    ing->warn[k].last_ms = -1;
  ing->waiting = -1;
  atomic_init(&ing->queued, 0);
  atomic_init(&ing->stop, 0);
  ls_err_t err = copy_conf(ing, conf);
  if (err == LS_OK) err = ls_windower_new(&ing->w, ing->format, ing->F, ing->T);
  if (err == LS_OK) err = client_new(ing, conf, RD_KAFKA_CONSUMER, &ing->rk);
  if (err == LS_OK && ing->dead_letter_topic != NULL)
    err = client_new(ing, conf, RD_KAFKA_PRODUCER, &ing->dlq);
  if (err == LS_OK) {
    rd_kafka_poll_set_consumer(ing->rk);
    ing->rkq = rd_kafka_queue_get_consumer(ing->rk);
    err = resolve_starts(ing, conf);
  }
  if (err == LS_OK) err = apply_skips(ing, conf);
  if (err == LS_OK) err = assign(ing);
  if (err == LS_OK) {
    ing->published.progress_total = -1;
    if (ing->stop_at_end) {
      ing->published.progress_total = 0;
      for (int i = 0; i < ing->n_parts; i++)
        if (ing->parts[i].end > ing->parts[i].start)
          ing->published.progress_total += ing->parts[i].end - ing->parts[i].start;
    }
    publish(ing);
    if (pthread_create(&ing->thread, NULL, consumer_main, ing) != 0)
      err = ls_error_set(LS_ERR_NOMEM, "ls_ingest_new: cannot start the consumer thread");
    else
      ing->thread_started = 1;
  }
  if (err != LS_OK) {
    ls_ingest_destroy(ing);
    return err;
  }
  *out = ing;
  return LS_OK;
}

static void free_nodes(window_node_t *node) {
  while (node != NULL) {
    window_node_t *const next = node->next;
    free(node);
    node = next;
  }
}

void ls_ingest_destroy(ls_ingest_t *ing) {
  if (ing == NULL) return;
  pthread_mutex_lock(&ing->lock);
  atomic_store(&ing->stop, 1);
  pthread_cond_broadcast(&ing->room);
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
  if (ing->thread_started) pthread_join(ing->thread, NULL);
  for (int i = 0; ing->parts != NULL && i < ing->n_parts; i++) {
    part_t *const part = &ing->parts[i];
    for (int k = part->stash_at; k < part->n_stash; k++)
      rd_kafka_message_destroy(part->stash[k]);
    free(part->stash);
  }
  if (ing->rkq != NULL) rd_kafka_queue_destroy(ing->rkq);
  if (ing->rk != NULL) {
    rd_kafka_consumer_close(ing->rk);
    rd_kafka_destroy(ing->rk);
  }
  if (ing->dlq != NULL) {
    rd_kafka_flush(ing->dlq, 5000);
    rd_kafka_destroy(ing->dlq);
  }
  free_nodes(ing->head);
  free_nodes(ing->out);
  free_nodes(ing->pool);
  ls_windower_destroy(ing->w);
  free(ing->batch);
  free(ing->part_of_id);
  free(ing->parts);
  free(ing->topic);
  free(ing->dead_letter_topic);
  pthread_cond_destroy(&ing->room);
  pthread_cond_destroy(&ing->ready);
  pthread_mutex_destroy(&ing->warn_lock);
  pthread_mutex_destroy(&ing->lock);
  pthread_mutex_destroy(&ing->hold);
  free(ing);
}

/* ------------------------------------------------------------------------ */
/* The trainer's side                                                        */

/* Takes the next window of one partition (part) or of any (NULL), waiting
 * up to timeout_ms. */
static ls_err_t take_next(ls_ingest_t *ing, part_t *part, int timeout_ms, ls_next_t *what,
                          const ls_window_t **win) {
  *win = NULL;
  *what = LS_NEXT_TIMEOUT;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  if (timeout_ms > 0) {
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&ing->lock);
  int timed_out = 0;
  for (;;) {
    window_node_t *const head = part != NULL ? part->head : ing->head;
    int const ended = part != NULL ? part->ended : ing->at_end;
    if (head != NULL || ended || ing->err != LS_OK || timeout_ms == 0 || timed_out) break;
    if (part != NULL && ing->waiting != (int)(part - ing->parts)) {
      ing->waiting = (int)(part - ing->parts);
      pthread_cond_broadcast(&ing->room); /* a consumer paused on memory re-checks */
    }
    timed_out = timeout_ms < 0 ? pthread_cond_wait(&ing->ready, &ing->lock) != 0
                               : pthread_cond_timedwait(&ing->ready, &ing->lock, &deadline) != 0;
  }
  ing->waiting = -1;
  window_node_t *const head = part != NULL ? part->head : ing->head;
  ls_err_t err = LS_OK;
  if (head != NULL) {
    window_node_t *const node = dequeue_locked(ing, &ing->parts[head->part]);
    *win = &node->win;
    *what = LS_NEXT_WINDOW;
  } else if (ing->err != LS_OK) {
    err = ls_error_set(ing->err, "%s", ing->errmsg);
  } else if (part != NULL ? part->ended : ing->at_end) {
    *what = LS_NEXT_END;
  }
  pthread_mutex_unlock(&ing->lock);
  return err;
}

/* The partition of the consumer's `partition`, or an error naming it for
 * function fn. */
static ls_err_t our_part(ls_ingest_t *ing, int32_t partition, const char *fn, part_t **out) {
  *out = part_find(ing, partition);
  LS_RETURN_IF(*out == NULL, LS_ERR_INVALID_ARG,
               "%s: partition %" PRId32 " of topic '%s' is not one this consumer reads", fn,
               partition, ing->topic);
  return LS_OK;
}

ls_err_t ls_ingest_next(ls_ingest_t *ing, int timeout_ms, ls_next_t *what,
                        const ls_window_t **win) {
  LS_RETURN_IF(ing == NULL || what == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_next: ing, what and win must not be NULL");
  return take_next(ing, NULL, timeout_ms, what, win);
}

ls_err_t ls_ingest_next_partition(ls_ingest_t *ing, int32_t partition, int timeout_ms,
                                  ls_next_t *what, const ls_window_t **win) {
  LS_RETURN_IF(ing == NULL || what == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_next_partition: ing, what and win must not be NULL");
  part_t *part;
  LS_FORWARD_IF_ERROR(our_part(ing, partition, "ls_ingest_next_partition", &part));
  return take_next(ing, part, timeout_ms, what, win);
}

void ls_ingest_release(ls_ingest_t *ing, const ls_window_t *win) {
  if (ing == NULL || win == NULL) return;
  window_node_t *node = (window_node_t *)((char *)win - offsetof(window_node_t, win));
  pthread_mutex_lock(&ing->lock);
  if (node->prev != NULL)
    node->prev->next = node->next;
  else
    ing->out = node->next;
  if (node->next != NULL) node->next->prev = node->prev;
  if (ing->n_pool < ing->queue_cap * ing->n_parts) {
    node->next = ing->pool;
    ing->pool = node;
    ing->n_pool++;
    node = NULL;
  }
  pthread_mutex_unlock(&ing->lock);
  free(node);
}

ls_err_t ls_ingest_stats(ls_ingest_t *ing, ls_ingest_stats_t *out) {
  LS_RETURN_IF(ing == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_stats: ing and out must not be NULL");
  pthread_mutex_lock(&ing->lock);
  *out = ing->published;
  out->queued_windows = atomic_load(&ing->queued);
  out->memory_records = memory_records(ing, out->w.buffered);
  pthread_mutex_unlock(&ing->lock);
  return LS_OK;
}

ls_err_t ls_ingest_resume_offset(ls_ingest_t *ing, int32_t partition, int64_t *offset) {
  LS_RETURN_IF(ing == NULL || offset == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_resume_offset: ing and offset must not be NULL");
  part_t *part;
  LS_FORWARD_IF_ERROR(our_part(ing, partition, "ls_ingest_resume_offset", &part));
  int const idx = (int)(part - ing->parts);
  pthread_mutex_lock(&ing->hold);
  int64_t low = part->next, held = 0;
  int found = 0;
  ls_windower_low_offset(ing->w, partition, &held, &found);
  if (found && held < low) low = held;
  pthread_mutex_lock(&ing->lock);
  for (const window_node_t *node = part->head; node != NULL; node = node->pnext)
    if (node->win.first_offset < low) low = node->win.first_offset;
  for (const window_node_t *node = ing->out; node != NULL; node = node->next)
    if (node->part == idx && node->win.first_offset < low) low = node->win.first_offset;
  pthread_mutex_unlock(&ing->lock);
  pthread_mutex_unlock(&ing->hold);
  *offset = low;
  return LS_OK;
}

/* A commit's result as an error: the first partition refused, or what
 * failed the whole commit. */
static ls_err_t commit_result(const ls_ingest_t *ing, rd_kafka_event_t *ev) {
  const rd_kafka_topic_partition_list_t *const list = rd_kafka_event_topic_partition_list(ev);
  for (int i = 0; list != NULL && i < list->cnt; i++)
    LS_RETURN_IF(list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
                 "cannot commit offset %" PRId64 " of topic '%s' partition %" PRId32 ": %s",
                 list->elems[i].offset, ing->topic, list->elems[i].partition,
                 rd_kafka_err2str(list->elems[i].err));
  LS_RETURN_IF(rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot commit offsets of topic '%s': %s", ing->topic,
               rd_kafka_event_error_string(ev));
  return LS_OK;
}

ls_err_t ls_ingest_commit(ls_ingest_t *ing, int n, const int32_t *partitions,
                          const int64_t *offsets) {
  LS_RETURN_IF(ing == NULL || n < 0 || (n > 0 && (partitions == NULL || offsets == NULL)),
               LS_ERR_INVALID_ARG,
               "ls_ingest_commit: ing, and partitions and offsets when n > 0, must not be NULL; "
               "n (%d) must not be negative",
               n);
  if (n == 0) return LS_OK;
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(n);
  ls_err_t err = LS_OK;
  for (int i = 0; i < n && err == LS_OK; i++) {
    part_t *part;
    err = our_part(ing, partitions[i], "ls_ingest_commit", &part);
    if (err == LS_OK && offsets[i] < 0)
      err = ls_error_set(LS_ERR_INVALID_ARG,
                         "ls_ingest_commit: partition %" PRId32 ": offset %" PRId64
                         " is negative (commit the next offset to read)",
                         partitions[i], offsets[i]);
    if (err == LS_OK)
      rd_kafka_topic_partition_list_add(list, ing->topic, partitions[i])->offset = offsets[i];
  }
  rd_kafka_queue_t *const q = err == LS_OK ? rd_kafka_queue_new(ing->rk) : NULL;
  if (q != NULL) {
    rd_kafka_resp_err_t const kerr = rd_kafka_commit_queue(ing->rk, list, q, NULL, NULL);
    rd_kafka_event_t *const ev =
        kerr == RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_queue_poll(q, ing->commit_timeout_ms) : NULL;
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR)
      err = ls_error_set(LS_ERR_KAFKA, "cannot commit offsets of topic '%s': %s", ing->topic,
                         rd_kafka_err2str(kerr));
    else if (ev == NULL)
      err = ls_error_set(LS_ERR_KAFKA,
                         "committing offsets of topic '%s' took more than commit.timeout.ms=%d "
                         "(is the group coordinator reachable? the commit may still land)",
                         ing->topic, ing->commit_timeout_ms);
    else
      err = commit_result(ing, ev);
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
  }
  rd_kafka_topic_partition_list_destroy(list);
  return err;
}

ls_err_t ls_ingest_pending(ls_ingest_t *ing, const void *key, size_t key_len, int64_t *records,
                           int *found) {
  LS_RETURN_IF(ing == NULL, LS_ERR_INVALID_ARG, "ls_ingest_pending: ing is NULL");
  pthread_mutex_lock(&ing->lock);
  int const at_end = ing->at_end;
  pthread_mutex_unlock(&ing->lock);
  LS_RETURN_IF(!at_end, LS_ERR_STATE,
               "ls_ingest_pending: the consumer is still running (call it once "
               "ls_ingest_next returned LS_NEXT_END)");
  return ls_windower_pending(ing->w, key, key_len, records, found);
}
