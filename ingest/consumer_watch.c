/*
 * The consumer's watch (ingest/consumer_internal.h): a thread that asks the
 * leaders of the consumer's partitions for their high watermarks every
 * watch.interval.ms, with one ListOffsets request per leader (the latest
 * offset, Kafka's timestamp -1). What it finds is the consumer's connection
 * to the cluster (connected: the last round trip answered for every
 * partition) and each partition's lag (high watermark - next offset). The
 * fetches' own watermarks would not do: a partition paused for
 * backpressure fetches nothing, so its lag would freeze exactly when it
 * grows. A round that fails says which partitions cannot be read and why
 * (their leader's broker and address: consumer_leaders.c), in the stats and
 * in a warning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "consumer_internal.h"
#include "kafka_util.h"

/* Whether a watch's round reached every partition's leader: NO_ERROR
 * only when the call and every partition succeeded with an offset (a
 * partition the replies left out keeps its -1). */
static rd_kafka_resp_err_t watch_answered(const rd_kafka_topic_partition_list_t *list,
                                          rd_kafka_resp_err_t err) {
  for (int i = 0; i < list->cnt && err == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
    err = list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR ? list->elems[i].err
          : list->elems[i].offset < 0                      ? RD_KAFKA_RESP_ERR__BAD_MSG
                                                           : RD_KAFKA_RESP_ERR_NO_ERROR;
  return err;
}

/* Records one watch's result under the consumer's lock: connected with
 * list's high watermarks, or (why not "") not, why saying so. */
static void watch_record(ls_ingest_t *ing, const rd_kafka_topic_partition_list_t *list,
                         const char *why) {
  pthread_mutex_lock(&ing->lock);
  consumer_watch_t *const w = &ing->watch;
  w->connected = why[0] == '\0';
  snprintf(w->error, sizeof w->error, "%s", why);
  if (w->connected) {
    w->ok_ms = base_now_ms();
    for (int i = 0; i < list->cnt; i++) {
      part_t *const part = consumer_part(ing, list->elems[i].partition);
      if (part != NULL) part->high = list->elems[i].offset;
    }
  }
  pthread_mutex_unlock(&ing->lock);
}

/* Why a round failed, into why: the partitions whose leaders are missing
 * or out of reach, by name (consumer_check_leaders, within the interval),
 * else what librdkafka said. */
static void watch_why(ls_ingest_t *ing, rd_kafka_resp_err_t err, char *why, size_t size) {
  if (consumer_check_leaders(ing, ing->s.watch_interval_ms, 0) != LS_OK)
    snprintf(why, size, "%s", ls_last_error());
  else
    snprintf(why, size, "cannot reach the leaders of topic '%s': %s", ing->s.topic,
             rd_kafka_err2str(err));
}

/* Waits until `deadline_ms` (base_now_ms) or quit; returns quit. */
static int watch_sleep(consumer_watch_t *w, int64_t deadline_ms) {
  pthread_mutex_lock(&w->lock);
  while (!w->quit) {
    int64_t const left = deadline_ms - base_now_ms();
    if (left <= 0) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t const ns = ts.tv_nsec + (left % 1000) * 1000000;
    ts.tv_sec += (time_t)(left / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&w->wake, &w->lock, &ts);
  }
  int const quit = w->quit;
  pthread_mutex_unlock(&w->lock);
  return quit;
}

/* Growth (ls_ingest_conf_set_growth): reads the topic's partition count
 * (rkt's metadata, within timeout_ms) and hands the partitions added since
 * the last count, of this consumer, with their watermarks, to the
 * consumer thread (consumer_grow). A partition whose watermarks do not
 * come is asked for again next time. */
static void watch_grow(ls_ingest_t *ing, rd_kafka_topic_t *rkt, int timeout_ms) {
  int32_t count = 0;
  if (kafka_wait_metadata(ing->rk, rkt, timeout_ms, 1, &count) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return; /* the round's watch says why */
  /* Grown: a key new here may have come from another consumer's partition. */
  if (count > ing->grow_known) atomic_store(&ing->arrivals, 1);
  for (int32_t id = ing->grow_known; id < count; id++) {
    if (id % ing->grow_world == ing->grow_rank) {
      grow_add_t a = {id, 0, 0};
      if (kafka_watermarks(ing->rk, ing->s.topic, id, timeout_ms, &a.low, &a.high) !=
          RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
      pthread_mutex_lock(&ing->lock);
      if (ing->n_adds == ing->cap_adds) {
        int const cap = ing->cap_adds ? 2 * ing->cap_adds : 16;
        grow_add_t *const grown = realloc(ing->adds, (size_t)cap * sizeof *grown);
        if (grown != NULL) ing->adds = grown, ing->cap_adds = cap;
      }
      int const kept = ing->n_adds < ing->cap_adds;
      if (kept) ing->adds[ing->n_adds++] = a;
      pthread_mutex_unlock(&ing->lock);
      if (!kept) return; /* no memory: asked for again */
    }
    ing->grow_known = id + 1;
  }
}

/* The list of the consumer's partitions as they are now (partitions added
 * live join it). */
static void watch_list(ls_ingest_t *ing, rd_kafka_topic_partition_list_t **list) {
  int const n = ing->n_parts;
  if (*list != NULL && (*list)->cnt == n) return;
  if (*list != NULL) rd_kafka_topic_partition_list_destroy(*list);
  *list = rd_kafka_topic_partition_list_new(n);
  for (int i = 0; i < n; i++)
    rd_kafka_topic_partition_list_add(*list, ing->s.topic, ing->parts[i].id);
}

static void *watch_main(void *arg) {
  ls_ingest_t *const ing = arg;
  int const interval = ing->s.watch_interval_ms;
  rd_kafka_topic_t *const rkt =
      ing->grow_world > 0 ? rd_kafka_topic_new(ing->rk, ing->s.topic, NULL) : NULL;
  rd_kafka_topic_partition_list_t *list = NULL;
  watch_list(ing, &list);
  int64_t next = base_now_ms() + interval;
  while (!watch_sleep(&ing->watch, next)) {
    next = base_now_ms() + interval;
    if (rkt != NULL) watch_grow(ing, rkt, interval);
    watch_list(ing, &list);
    for (int i = 0; i < list->cnt; i++) {
      list->elems[i].offset = RD_KAFKA_OFFSET_END; /* as a timestamp: the latest offset */
      list->elems[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    rd_kafka_resp_err_t const err =
        watch_answered(list, rd_kafka_offsets_for_times(ing->rk, list, interval));
    char why[sizeof ing->watch.error] = "";
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      watch_why(ing, err, why, sizeof why);
      consumer_warn(ing, WARN_WATCH, "%s (asked again every %d ms)", why, interval);
    }
    watch_record(ing, list, why);
  }
  rd_kafka_topic_partition_list_destroy(list);
  if (rkt != NULL) rd_kafka_topic_destroy(rkt);
  return NULL;
}

ls_err_t consumer_watch_start(ls_ingest_t *ing) {
  consumer_watch_t *const w = &ing->watch;
  pthread_mutex_lock(&ing->lock);
  w->connected = ing->s.watch_interval_ms > 0 ? 1 : -1; /* the start positions were read */
  w->ok_ms = base_now_ms();
  pthread_mutex_unlock(&ing->lock);
  if (ing->s.watch_interval_ms == 0) return LS_OK;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  int const rc = pthread_create(&w->thread, NULL, watch_main, ing);
  if (rc != 0) {
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    return ls_error_set(LS_ERR_NOMEM, "ls_ingest_new: cannot start the watch thread: %s",
                        strerror(rc));
  }
  w->started = 1;
  return LS_OK;
}

void consumer_watch_stop(ls_ingest_t *ing) {
  consumer_watch_t *const w = &ing->watch;
  if (!w->started) return;
  pthread_mutex_lock(&w->lock);
  w->quit = 1;
  pthread_cond_broadcast(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  w->started = 0;
}

void consumer_watch_stats_locked(const ls_ingest_t *ing, ls_ingest_stats_t *out) {
  const consumer_watch_t *const w = &ing->watch;
  out->connected = w->connected;
  out->disconnected_ms = w->connected == 0 ? base_now_ms() - w->ok_ms : 0;
  snprintf(out->watch_error, sizeof out->watch_error, "%s", w->connected == 0 ? w->error : "");
}

/* ------------------------------------------------------------------------ */
/* Partitions                                                                */

ls_err_t ls_ingest_partitions(ls_ingest_t *ing, ls_ingest_partition_t *out, int n, int *count) {
  LS_RETURN_IF(ing == NULL || count == NULL || n < 0 || (n > 0 && out == NULL), LS_ERR_INVALID_ARG,
               "ls_ingest_partitions: ing and count, and out when n (%d) > 0, must not be NULL; "
               "n must not be negative",
               n);
  *count = ing->n_parts;
  pthread_mutex_lock(&ing->lock);
  for (int i = 0; i < n && i < ing->n_parts; i++) {
    const part_t *const p = &ing->parts[i];
    /* One read of both under the lock; a watch answered before the last
     * fetch is behind what was read: the high watermark is at least that. */
    int64_t const high = p->high < 0 ? -1 : p->high > p->pub_next ? p->high : p->pub_next;
    out[i] = (ls_ingest_partition_t){p->id,
                                     p->pub_next,
                                     high,
                                     high < 0 ? -1 : high - p->pub_next,
                                     (int64_t)atomic_load(&p->n),
                                     p->pub_paused,
                                     p->restarted};
  }
  pthread_mutex_unlock(&ing->lock);
  return LS_OK;
}
