/*
 * The consumer's queues of windows and its memory bound
 * (ingest/consumer_internal.h), and the trainer's side of them: taking and
 * releasing windows.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer_internal.h"

/* ------------------------------------------------------------------------ */
/* The queues of windows                                                     */

void consumer_node_rows(const ls_ingest_t *ing, window_node_t *node, int64_t **offsets,
                        int64_t **times, float **x) {
  size_t const rows = (size_t)ing->s.window + (size_t)ing->s.horizon;
  *times = (int64_t *)(node + 1);
  *offsets = *times + rows;
  *x = (float *)(*offsets + rows);
}

static window_node_t *node_new(const ls_ingest_t *ing) {
  size_t const rows = (size_t)ing->s.window + (size_t)ing->s.horizon;
  window_node_t *const node =
      malloc(sizeof *node + 2 * rows * sizeof(int64_t) +
             (rows * (size_t)ing->s.features + (size_t)ing->s.window) * sizeof(float));
  if (node == NULL) return NULL;
  consumer_node_rows(ing, node, &node->offsets, &node->times, &node->x);
  node->mask = node->x + rows * (size_t)ing->s.features;
  return node;
}

/* Enters node as the partition's next window in flight (its seq); the
 * caller holds lock. Returns 0, or -1 when out of memory. */
static int flight_push(part_t *part, window_node_t *node) {
  if (part->seq - part->flight_head == part->cap_flight) { /* full: twice the room */
    int64_t const cap = part->cap_flight ? 2 * part->cap_flight : 256;
    flight_t *const f = malloc((size_t)cap * sizeof *f);
    if (f == NULL) return -1;
    for (int64_t s = part->flight_head; s < part->seq; s++)
      f[s & (cap - 1)] = part->flight[s & (part->cap_flight - 1)];
    free(part->flight);
    part->flight = f, part->cap_flight = cap;
  }
  node->seq = part->seq++;
  part->flight[node->seq & (part->cap_flight - 1)] = (flight_t){
      node,
      node->seq,
      node->win.series,
      node->win.index,
      node->win.n_targets + 1 + node->win.n_extra, /* its records after it too (an evicted
                                                      series' are nowhere else) */
      node->win.reset};
  return 0;
}

/* The window node leaves flight (released); the caller holds lock. */
static void flight_release(part_t *part, const window_node_t *node) {
  int64_t const mask = part->cap_flight - 1;
  part->flight[node->seq & mask].node = NULL;
  while (part->flight_head < part->seq && part->flight[part->flight_head & mask].node == NULL)
    part->flight_head++;
}

int consumer_enqueue(ls_ingest_t *ing, part_t *part, const ls_window_t *v) {
  pthread_mutex_lock(&ing->lock);
  window_node_t *node = ing->pool;
  if (node != NULL) {
    ing->pool = node->next;
    ing->n_pool--;
  }
  pthread_mutex_unlock(&ing->lock);
  if (node == NULL && (node = node_new(ing)) == NULL) {
    consumer_fail(ing, LS_ERR_NOMEM, "out of memory for a window (T=%d, F=%d)", ing->s.window,
                  ing->s.features);
    return -1;
  }
  size_t const rows = (size_t)ing->s.window + (size_t)ing->s.horizon;
  memcpy(node->key, v->key, v->key_len + 1);
  memcpy(node->x, v->x, rows * (size_t)ing->s.features * sizeof(float));
  memcpy(node->mask, v->mask, (size_t)ing->s.window * sizeof(float));
  memcpy(node->times, v->times, rows * sizeof(int64_t));
  memcpy(node->offsets, v->offsets, rows * sizeof(int64_t));
  node->win = *v;
  node->win.key = node->key;
  node->win.x = node->x;
  node->win.mask = node->mask;
  node->win.times = node->times;
  node->win.offsets = node->offsets;
  node->part = (int)(part - ing->parts);
  node->next = node->pnext = NULL;
  pthread_mutex_lock(&ing->lock);
  if (flight_push(part, node) != 0) {
    pthread_mutex_unlock(&ing->lock);
    free(node);
    consumer_fail(ing, LS_ERR_NOMEM, "out of memory for the windows in flight of partition %d",
                  (int)part->id);
    return -1;
  }
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
  /* Only a thread waiting for this partition's windows or any partition's
   * (a replay's look-ahead waits on one partition: a wake-up per window of
   * the others would be for nothing). */
  if (ing->waiters_any > 0 || part->waiters > 0) pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
  consumer_track_peak(ing);
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
  node->next = part->out;
  if (part->out != NULL) part->out->prev = node;
  part->out = node;
  part->n_out++;
  int64_t const left = atomic_fetch_sub(&part->n, 1) - 1;
  atomic_fetch_sub(&ing->queued, 1);
  pthread_cond_broadcast(&ing->room);
  /* Half drained: wake the consumer from its batch wait to resume it. */
  if (left == ing->s.queue_windows / 2) rd_kafka_queue_yield(ing->rkq);
  return node;
}

/* ------------------------------------------------------------------------ */
/* The memory bound                                                          */

/* 1 when the trainer can never drain memory: nothing queued, or it waits
 * on a partition that has nothing queued and has not ended. Caller holds
 * lock. */
static int stuck_locked(const ls_ingest_t *ing) {
  if (atomic_load(&ing->tap_n) > 0) return 0; /* the trainer takes the tap's records */
  if (atomic_load(&ing->queued) == 0) return 1;
  if (ing->waiting < 0) return 0;
  const part_t *const w = &ing->parts[ing->waiting];
  return atomic_load(&w->n) == 0 && !w->ended;
}

/* Waits, every partition paused, until memory + growth fits the bound,
 * with `buffered` records in series buffers. Returns 0, or -1 when stopping
 * or when nothing can ever make room. */
static int wait_for_room(ls_ingest_t *ing, int64_t buffered, int64_t growth) {
  consumer_set_paused(ing, 1, NULL);
  int const was_paused = ing->n_paused;
  ing->pauses++;
  ing->n_paused = ing->n_parts - ing->n_done;
  pthread_mutex_lock(&ing->lock);
  consumer_publish_locked(ing);
  int stuck = 0;
  for (;;) {
    int64_t const mem = consumer_memory(ing, buffered);
    if (atomic_load(&ing->stop)) break;
    if (mem + growth <= ing->s.buffer_records &&
        (mem <= ing->s.buffer_records / 4 * 3 || atomic_load(&ing->queued) == 0))
      break;
    if ((stuck = stuck_locked(ing)) != 0) break;
    pthread_cond_wait(&ing->room, &ing->lock);
  }
  pthread_mutex_unlock(&ing->lock);
  if (stuck) {
    ls_window_stats_t ws;
    ls_windower_stats(ing->w, &ws);
    consumer_fail(
        ing, LS_ERR_STATE,
        "buffer.records=%" PRId64 " is full (%" PRId64 " records in partial windows of %" PRId64
        " series, %" PRId64 " queued windows of %d) and nothing the trainer will take can "
        "drain it: raise buffer.records above partitions x queue.windows x (window + horizon) "
        "+ series x (window + horizon)",
        ing->s.buffer_records, ws.buffered, ws.series, (int64_t)atomic_load(&ing->queued),
        ing->s.window + ing->s.horizon);
    return -1;
  }
  if (atomic_load(&ing->stop)) return -1;
  consumer_set_paused(ing, 0, NULL);
  ing->n_paused = was_paused;
  return 0;
}

int consumer_make_room(ls_ingest_t *ing, int64_t growth) {
  int64_t const buffered = consumer_buffered(ing);
  if (consumer_memory(ing, buffered) + growth <= ing->s.buffer_records) return 0;
  pthread_mutex_unlock(&ing->hold);
  int const rc = wait_for_room(ing, buffered, growth);
  pthread_mutex_lock(&ing->hold);
  return rc;
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
    int const tapped = part == NULL && atomic_load(&ing->tap_n) > 0;
    if (head != NULL || ended || tapped || ing->err != LS_OK || timeout_ms == 0 || timed_out) break;
    if (part != NULL && ing->waiting != (int)(part - ing->parts)) {
      ing->waiting = (int)(part - ing->parts);
      pthread_cond_broadcast(&ing->room); /* a consumer paused on memory re-checks */
    }
    int *const waiters = part != NULL ? &part->waiters : &ing->waiters_any;
    ++*waiters;
    timed_out = timeout_ms < 0 ? pthread_cond_wait(&ing->ready, &ing->lock) != 0
                               : pthread_cond_timedwait(&ing->ready, &ing->lock, &deadline) != 0;
    --*waiters;
  }
  ing->waiting = -1;
  window_node_t *const head = part != NULL ? part->head : ing->head;
  ls_err_t err = LS_OK;
  if (ing->err != LS_OK && ing->err_now) {
    err = ls_error_set(ing->err, "%s", ing->errmsg);
  } else if (head != NULL) {
    window_node_t *const node = dequeue_locked(ing, &ing->parts[head->part]);
    *win = &node->win;
    *what = LS_NEXT_WINDOW;
  } else if (ing->err != LS_OK) {
    err = ls_error_set(ing->err, "%s", ing->errmsg);
  } else if (part != NULL ? part->ended : ing->at_end) {
    *what = LS_NEXT_END;
  } else if (part == NULL && atomic_load(&ing->tap_n) > 0) {
    *what = LS_NEXT_RECORDS;
  }
  pthread_mutex_unlock(&ing->lock);
  return err;
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
  LS_FORWARD_IF_ERROR(consumer_our_part(ing, partition, "ls_ingest_next_partition", &part));
  return take_next(ing, part, timeout_ms, what, win);
}

void ls_ingest_release(ls_ingest_t *ing, const ls_window_t *win) {
  if (ing == NULL || win == NULL) return;
  window_node_t *node = (window_node_t *)((char *)win - offsetof(window_node_t, win));
  part_t *const part = &ing->parts[node->part];
  pthread_mutex_lock(&ing->lock);
  if (node->prev != NULL)
    node->prev->next = node->next;
  else
    part->out = node->next;
  if (node->next != NULL) node->next->prev = node->prev;
  part->n_out--;
  flight_release(part, node);
  if (ing->n_pool < ing->s.queue_windows * ing->n_parts) {
    node->next = ing->pool;
    ing->pool = node;
    ing->n_pool++;
    node = NULL;
  }
  pthread_mutex_unlock(&ing->lock);
  free(node);
}
