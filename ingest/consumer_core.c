/*
 * The consumer's core (ingest/consumer_internal.h): rate-limited warnings,
 * the thread's failure, the counters it publishes, and its partitions.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "consumer_internal.h"

/* ------------------------------------------------------------------------ */
/* Warnings                                                                  */

void consumer_warn(ls_ingest_t *ing, int kind, const char *fmt, ...) {
  if (ing->warn_cb == NULL) return;
  pthread_mutex_lock(&ing->warn_lock);
  warn_state_t *const st = &ing->warn[kind];
  int64_t const now = base_now_ms();
  if (st->last_ms >= 0 && now - st->last_ms < ing->s.warn_interval_ms) {
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

/* ------------------------------------------------------------------------ */
/* Failing, publishing                                                       */

static void fail_v(ls_ingest_t *ing, int now, ls_err_t err, const char *fmt, va_list ap) {
  pthread_mutex_lock(&ing->lock);
  if (ing->err == LS_OK) {
    ing->err = err;
    ing->err_now = now;
    vsnprintf(ing->errmsg, sizeof ing->errmsg, fmt, ap);
  }
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
}

void consumer_fail(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(ing, 0, err, fmt, ap);
  va_end(ap);
}

void consumer_fail_now(ls_ingest_t *ing, ls_err_t err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(ing, 1, err, fmt, ap);
  va_end(ap);
}

int64_t consumer_buffered(const ls_ingest_t *ing) {
  ls_window_stats_t ws;
  ls_windower_stats(ing->w, &ws);
  return ws.buffered;
}

int64_t consumer_memory(const ls_ingest_t *ing, int64_t buffered) {
  return buffered +
         atomic_load_explicit(&ing->queued, memory_order_relaxed) *
             (ing->s.window + ing->s.horizon) +
         atomic_load_explicit(&ing->tap_n, memory_order_relaxed);
}

void consumer_track_peak(ls_ingest_t *ing) {
  int64_t const mem = consumer_memory(ing, consumer_buffered(ing));
  if (mem > ing->peak_memory) ing->peak_memory = mem;
}

void consumer_publish_locked(ls_ingest_t *ing) {
  ls_ingest_stats_t *const p = &ing->published;
  ls_windower_stats(ing->w, &p->w);
  p->skipped = ing->skipped;
  p->duplicates = ing->duplicates;
  p->peak_memory_records = ing->peak_memory;
  p->pauses = ing->pauses;
  p->paused = ing->n_paused;
  p->dead_letters = ing->dead_letters;
  p->dead_letter_errors = ing->dead_letter_errors;
  p->kafka_errors = ing->kafka_errors;
  p->partitions_added = ing->partitions_added;
  p->arrived = ing->arrived;
  int64_t done = 0;
  for (int i = 0; i < ing->n_parts; i++) {
    const part_t *const part = &ing->parts[i];
    int64_t const at = part->done && part->end != INT64_MAX ? part->end : part->next;
    done += at > part->start ? at - part->start : 0;
    ing->parts[i].pub_next = part->next;
    ing->parts[i].pub_paused = part->queue_paused;
  }
  p->progress_done = done;
}

void consumer_publish(ls_ingest_t *ing) {
  pthread_mutex_lock(&ing->lock);
  consumer_publish_locked(ing);
  pthread_mutex_unlock(&ing->lock);
}

/* ------------------------------------------------------------------------ */
/* Partitions                                                                */

part_t *consumer_part(ls_ingest_t *ing, int32_t id) {
  if (id < 0 || id > ing->max_id || ing->part_of_id[id] < 0) return NULL;
  return &ing->parts[ing->part_of_id[id]];
}

int consumer_queue_full(const ls_ingest_t *ing, part_t *part) {
  return atomic_load_explicit(&part->n, memory_order_relaxed) >= ing->s.queue_windows;
}

void consumer_set_paused(ls_ingest_t *ing, int pause, const part_t *part) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    const part_t *const p = &ing->parts[i];
    if (part != NULL ? p == part : !p->done && (pause || !p->queue_paused))
      rd_kafka_topic_partition_list_add(list, ing->s.topic, p->id);
  }
  rd_kafka_resp_err_t const err =
      pause ? rd_kafka_pause_partitions(ing->rk, list) : rd_kafka_resume_partitions(ing->rk, list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    consumer_warn(ing, WARN_KAFKA, "cannot %s partitions of '%s': %s", pause ? "pause" : "resume",
                  ing->s.topic, rd_kafka_err2str(err));
  rd_kafka_topic_partition_list_destroy(list);
}

void consumer_part_end(ls_ingest_t *ing, part_t *part) {
  ing->n_ended++;
  pthread_mutex_lock(&ing->lock);
  /* The counters as they stand at the end, published with it: a trainer
   * that stops once every partition has ended reads them whole (the loop's
   * next publish may never come). */
  consumer_publish_locked(ing);
  part->ended = 1;
  pthread_cond_broadcast(&ing->ready);
  pthread_mutex_unlock(&ing->lock);
}

void consumer_part_finish(ls_ingest_t *ing, part_t *part) {
  if (part->done) return;
  part->done = 1;
  ing->n_done++;
  if (!part->queue_paused)
    consumer_set_paused(ing, 1, part); /* what lies past the end is not ours */
  if (ing->s.flush)
    part->flushing = 1; /* consumer_service() queues its partial windows as room allows */
  else
    consumer_part_end(ing, part);
}

ls_err_t consumer_our_part(ls_ingest_t *ing, int32_t partition, const char *fn, part_t **out) {
  *out = consumer_part(ing, partition);
  LS_RETURN_IF(*out == NULL, LS_ERR_INVALID_ARG,
               "%s: partition %" PRId32 " of topic '%s' is not one this consumer reads", fn,
               partition, ing->s.topic);
  return LS_OK;
}
