/*
 * The consumer (include/lstream/ingest.h, "Consumer"): creation, the
 * consumer thread, and the public calls that are not the queues'. The
 * design and the rooms are described in ingest/consumer_internal.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consumer_internal.h"
#include "window.h"

/* ------------------------------------------------------------------------ */
/* The thread                                                                */

/* At the end of a replay: the dead letters delivered, the end announced.
 * Every partition is done: none is paused for backpressure any more. */
static void finish(ls_ingest_t *ing) {
  if (ing->dlq != NULL) rd_kafka_flush(ing->dlq, 10000);
  ing->n_paused = 0;
  pthread_mutex_lock(&ing->lock);
  consumer_publish_locked(ing);
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

static ls_err_t commit_result(const ls_ingest_t *ing, rd_kafka_event_t *ev);

/* Reports the asynchronous commits that failed (a warning each: they are
 * informational). */
static void commit_results(ls_ingest_t *ing) {
  rd_kafka_event_t *ev;
  while ((ev = rd_kafka_queue_poll(ing->commits, 0)) != NULL) {
    if (commit_result(ing, ev) != LS_OK)
      consumer_warn(ing, WARN_KAFKA, "%s (informational: lstream resumes from its snapshots)",
                    ls_last_error());
    rd_kafka_event_destroy(ev);
  }
}

static void *consumer_main(void *arg) {
  ls_ingest_t *const ing = arg;
  int failed = 0;
  while (!failed && !atomic_load(&ing->stop)) {
    commit_results(ing);
    pthread_mutex_lock(&ing->hold);
    failed = consumer_grow(ing) != 0 || consumer_service(ing) != 0;
    pthread_mutex_unlock(&ing->hold);
    if (failed) break;
    consumer_publish(ing);
    if (ing->s.stop_at_end && ing->n_ended == ing->n_parts) break;
    ssize_t const n = consume_batch(ing);
    if (n < 0) {
      consumer_fail(ing, LS_ERR_KAFKA, "consuming topic '%s' failed: %s", ing->s.topic,
                    rd_kafka_err2str(rd_kafka_last_error()));
      break;
    }
    pthread_mutex_lock(&ing->hold);
    for (ssize_t i = 0; i < n; i++) {
      if (!failed)
        failed = consumer_dispatch(ing, ing->batch[i]);
      else
        rd_kafka_message_destroy(ing->batch[i]);
    }
    pthread_mutex_unlock(&ing->hold);
    if (ing->dlq != NULL) rd_kafka_poll(ing->dlq, 0);
  }
  if (!failed && !atomic_load(&ing->stop) && ing->s.stop_at_end) finish(ing);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void on_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  if (level <= 4) /* LOG_WARNING or worse */
    consumer_warn(rd_kafka_opaque(rk), WARN_LOG, "librdkafka %s: %s", fac, buf);
}

static void on_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
  ls_ingest_t *const ing = opaque;
  ing->kafka_errors++;
  consumer_warn(ing, WARN_KAFKA, "Kafka: %s: %s (librdkafka retries)",
                rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static void on_dead_letter_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  ls_ingest_t *const ing = opaque;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
  ing->dead_letters--; /* counted when handed to the producer */
  ing->dead_letter_errors++;
  consumer_warn(ing, WARN_DEAD_LETTER, "a record for dead-letter topic '%s' was not delivered: %s",
                ing->s.dead_letter_topic, rd_kafka_err2str(m->err));
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
  int64_t const one = (int64_t)conf->s.window + conf->s.horizon;
  LS_RETURN_IF(conf->s.buffer_records < 2 * one, LS_ERR_INVALID_ARG,
               "buffer.records=%" PRId64 " cannot hold even two windows of T+G=%" PRId64 " records",
               conf->s.buffer_records, one);
  return LS_OK;
}

/* Copies the conf's settings and partitions into ing. */
static ls_err_t copy_conf(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  LS_FORWARD_IF_ERROR(ingest_settings_copy(&ing->s, &conf->s));
  ing->warn_cb = conf->warn_cb;
  ing->warn_opaque = conf->warn_opaque;
  ing->n_parts = conf->n_partitions;
  /* Partitions added live go into room made now (consumer_internal.h). */
  int const grow = conf->grow_world > 0 && !conf->s.stop_at_end;
  ing->grow_world = grow ? conf->grow_world : 0;
  ing->grow_rank = conf->grow_rank;
  ing->grow_known = conf->grow_known;
  atomic_init(&ing->arrivals, conf->arrivals);
  ing->cap_parts = ing->n_parts + (grow ? GROW_PARTS : 0);
  ing->parts = calloc((size_t)ing->cap_parts, sizeof *ing->parts);
  ing->batch = malloc(BATCH_MAX * sizeof *ing->batch);
  ing->max_id = grow ? GROW_IDS - 1 : 0;
  for (int i = 0; i < ing->n_parts; i++)
    if (conf->partitions[i].id > ing->max_id) ing->max_id = conf->partitions[i].id;
  ing->part_of_id = malloc(((size_t)ing->max_id + 1) * sizeof *ing->part_of_id);
  LS_RETURN_IF(!ing->parts || !ing->batch || !ing->part_of_id, LS_ERR_NOMEM,
               "ls_ingest_new: out of memory (%d partitions, largest id %" PRId32 ")", ing->n_parts,
               ing->max_id);
  for (int32_t id = 0; id <= ing->max_id; id++)
    ing->part_of_id[id] = -1;
  for (int i = 0; i < ing->n_parts; i++) {
    ing->parts[i].id = conf->partitions[i].id;
    ing->parts[i].mark = conf->partitions[i].mark;
    atomic_init(&ing->parts[i].n, 0);
    ing->part_of_id[ing->parts[i].id] = i;
  }
  return LS_OK;
}

/* The contents of an Avro schema FILE (at most 1 MiB), malloc'ed. */
static ls_err_t read_schema(const char *path, char **out) {
  FILE *const f = fopen(path, "rb");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot read the Avro schema %s: %s", path, strerror(errno));
  size_t const cap = 1 << 20;
  char *const text = malloc(cap + 1);
  size_t const n = text != NULL ? fread(text, 1, cap + 1, f) : 0;
  int const bad = ferror(f);
  fclose(f);
  if (text == NULL || bad || n > cap) {
    free(text);
    return ls_error_set(text == NULL ? LS_ERR_NOMEM : LS_ERR_IO,
                        "cannot read the Avro schema %s (%s)", path,
                        bad ? "a read error" : "over 1 MiB, or no memory");
  }
  text[n] = '\0';
  *out = text;
  return LS_OK;
}

/* The windower of the settings' record spec; for json and avro, F is the
 * number of fields. */
static ls_err_t windower_make(ls_ingest_t *ing) {
  const ls_ingest_settings_t *const s = &ing->s;
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = s->format;
  int const named = s->format == LS_FORMAT_JSON || s->format == LS_FORMAT_AVRO;
  spec.features = named ? 0 : s->features;
  spec.fields = s->fields;
  spec.key_field = s->key_field;
  spec.time_field = s->time_field;
  spec.time_unit = s->time_unit;
  LS_FORWARD_IF_ERROR(ingest_avro_schema_id(s->avro_schema_id, &spec.avro_schema_id));
  char *schema = NULL;
  if (s->format == LS_FORMAT_AVRO) {
    LS_RETURN_IF(s->avro_schema == NULL, LS_ERR_INVALID_ARG,
                 "--format avro needs the writer's schema: --avro-schema FILE");
    LS_FORWARD_IF_ERROR(read_schema(s->avro_schema, &schema));
  }
  spec.avro_schema = schema;
  ls_err_t const err = ls_windower_new_spec(&ing->w, &spec, s->window);
  free(schema);
  if (err == LS_OK) ing->s.features = ing->w->F;
  return err;
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
  atomic_init(&ing->tap_n, 0);
  atomic_init(&ing->stop, 0);
  ls_err_t err = copy_conf(ing, conf);
  if (err == LS_OK) err = windower_make(ing);
  if (err == LS_OK) err = ls_windower_set_horizon(ing->w, ing->s.horizon);
  if (err == LS_OK) err = ls_windower_set_max_abs(ing->w, ing->s.max_abs);
  if (err == LS_OK) err = ls_windower_set_reset_gap(ing->w, ing->s.reset_gap_ms);
  if (err == LS_OK) err = ls_windower_set_time_bounds(ing->w, ing->s.max_future_ms, ing->s.late_ms);
  if (err == LS_OK)
    err = ls_windower_set_eviction(ing->w, ing->s.series_idle_ms, ing->s.max_series);
  if (err == LS_OK) err = client_new(ing, conf, RD_KAFKA_CONSUMER, &ing->rk);
  if (err == LS_OK && ing->s.dead_letter_topic != NULL)
    err = client_new(ing, conf, RD_KAFKA_PRODUCER, &ing->dlq);
  if (err == LS_OK) {
    rd_kafka_poll_set_consumer(ing->rk);
    ing->rkq = rd_kafka_queue_get_consumer(ing->rk);
    ing->commits = rd_kafka_queue_new(ing->rk);
    err = consumer_start(ing, conf);
  }
  if (err == LS_OK) {
    ing->published.progress_total = -1;
    if (ing->s.stop_at_end) {
      ing->published.progress_total = 0;
      for (int i = 0; i < ing->n_parts; i++)
        if (ing->parts[i].end > ing->parts[i].start)
          ing->published.progress_total += ing->parts[i].end - ing->parts[i].start;
    }
    consumer_publish(ing);
    err = consumer_watch_start(ing);
  }
  if (err == LS_OK) {
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
  consumer_watch_stop(ing);
  if (ing->thread_started) pthread_join(ing->thread, NULL);
  for (int i = 0; ing->parts != NULL && i < ing->n_parts; i++) {
    part_t *const part = &ing->parts[i];
    for (int k = part->stash_at; k < part->n_stash; k++)
      rd_kafka_message_destroy(part->stash[k]);
    free(part->stash);
    free_nodes(part->out);
    free(part->flight);
  }
  if (ing->rkq != NULL) rd_kafka_queue_destroy(ing->rkq);
  if (ing->commits != NULL) rd_kafka_queue_destroy(ing->commits);
  /* No consumer_close: no group was joined and the offsets that matter are
   * in the snapshots, so nothing is worth waiting on a broker for (with one
   * down, closing waits for commits in flight for up to a minute). */
  if (ing->rk != NULL) rd_kafka_destroy_flags(ing->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  if (ing->dlq != NULL) {
    rd_kafka_flush(ing->dlq, 5000);
    rd_kafka_destroy(ing->dlq);
  }
  free_nodes(ing->head);
  free_nodes(ing->pool);
  consumer_tap_free(ing);
  ls_windower_destroy(ing->w);
  free(ing->batch);
  free(ing->adds);
  free(ing->part_of_id);
  free(ing->parts);
  ingest_settings_free(&ing->s);
  pthread_cond_destroy(&ing->room);
  pthread_cond_destroy(&ing->ready);
  pthread_mutex_destroy(&ing->warn_lock);
  pthread_mutex_destroy(&ing->lock);
  pthread_mutex_destroy(&ing->hold);
  free(ing);
}

/* ------------------------------------------------------------------------ */
/* Counters, resume offsets, commits                                        */

ls_err_t ls_ingest_stats(ls_ingest_t *ing, ls_ingest_stats_t *out) {
  LS_RETURN_IF(ing == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_stats: ing and out must not be NULL");
  pthread_mutex_lock(&ing->lock);
  *out = ing->published;
  out->queued_windows = atomic_load(&ing->queued);
  out->memory_records = consumer_memory(ing, out->w.buffered);
  consumer_watch_stats_locked(ing, out);
  pthread_mutex_unlock(&ing->lock);
  return LS_OK;
}

/* A commit's result as an error: the first partition refused, or what
 * failed the whole commit. */
static ls_err_t commit_result(const ls_ingest_t *ing, rd_kafka_event_t *ev) {
  const rd_kafka_topic_partition_list_t *const list = rd_kafka_event_topic_partition_list(ev);
  for (int i = 0; list != NULL && i < list->cnt; i++)
    LS_RETURN_IF(list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
                 "cannot commit offset %" PRId64 " of topic '%s' partition %" PRId32 ": %s",
                 list->elems[i].offset, ing->s.topic, list->elems[i].partition,
                 rd_kafka_err2str(list->elems[i].err));
  LS_RETURN_IF(rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot commit offsets of topic '%s': %s", ing->s.topic,
               rd_kafka_event_error_string(ev));
  return LS_OK;
}

/* The list of offsets [n] of partitions [n] to commit, checked, for fn;
 * *list is NULL when n is 0. */
static ls_err_t commit_list(ls_ingest_t *ing, int n, const int32_t *partitions,
                            const int64_t *offsets, const char *fn,
                            rd_kafka_topic_partition_list_t **list) {
  *list = NULL;
  LS_RETURN_IF(ing == NULL || n < 0 || (n > 0 && (partitions == NULL || offsets == NULL)),
               LS_ERR_INVALID_ARG,
               "%s: ing, and partitions and offsets when n > 0, must not be NULL; "
               "n (%d) must not be negative",
               fn, n);
  if (n == 0) return LS_OK;
  *list = rd_kafka_topic_partition_list_new(n);
  ls_err_t err = LS_OK;
  for (int i = 0; i < n && err == LS_OK; i++) {
    part_t *part;
    err = consumer_our_part(ing, partitions[i], fn, &part);
    if (err == LS_OK && offsets[i] < 0)
      err = ls_error_set(LS_ERR_INVALID_ARG,
                         "%s: partition %" PRId32 ": offset %" PRId64
                         " is negative (commit the next offset to read)",
                         fn, partitions[i], offsets[i]);
    if (err == LS_OK)
      rd_kafka_topic_partition_list_add(*list, ing->s.topic, partitions[i])->offset = offsets[i];
  }
  if (err != LS_OK) {
    rd_kafka_topic_partition_list_destroy(*list);
    *list = NULL;
  }
  return err;
}

ls_err_t ls_ingest_commit_async(ls_ingest_t *ing, int n, const int32_t *partitions,
                                const int64_t *offsets) {
  rd_kafka_topic_partition_list_t *list = NULL;
  LS_FORWARD_IF_ERROR(commit_list(ing, n, partitions, offsets, "ls_ingest_commit_async", &list));
  if (list == NULL) return LS_OK;
  rd_kafka_resp_err_t const kerr = rd_kafka_commit_queue(ing->rk, list, ing->commits, NULL, NULL);
  rd_kafka_topic_partition_list_destroy(list);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot commit offsets of topic '%s': %s", ing->s.topic, rd_kafka_err2str(kerr));
  return LS_OK;
}

ls_err_t ls_ingest_commit(ls_ingest_t *ing, int n, const int32_t *partitions,
                          const int64_t *offsets) {
  rd_kafka_topic_partition_list_t *list = NULL;
  ls_err_t err = commit_list(ing, n, partitions, offsets, "ls_ingest_commit", &list);
  if (list == NULL) return err;
  rd_kafka_queue_t *const q = rd_kafka_queue_new(ing->rk);
  if (q != NULL) {
    rd_kafka_resp_err_t const kerr = rd_kafka_commit_queue(ing->rk, list, q, NULL, NULL);
    rd_kafka_event_t *const ev = kerr == RD_KAFKA_RESP_ERR_NO_ERROR
                                     ? rd_kafka_queue_poll(q, ing->s.commit_timeout_ms)
                                     : NULL;
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR)
      err = ls_error_set(LS_ERR_KAFKA, "cannot commit offsets of topic '%s': %s", ing->s.topic,
                         rd_kafka_err2str(kerr));
    else if (ev == NULL)
      err = ls_error_set(LS_ERR_KAFKA,
                         "committing offsets of topic '%s' took more than commit.timeout.ms=%d "
                         "(is the group coordinator reachable? the commit may still land)",
                         ing->s.topic, ing->s.commit_timeout_ms);
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
  LS_RETURN_IF(ing == NULL || records == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_pending: ing and records must not be NULL");
  pthread_mutex_lock(&ing->lock);
  int const at_end = ing->at_end;
  pthread_mutex_unlock(&ing->lock);
  LS_RETURN_IF(!at_end, LS_ERR_STATE,
               "ls_ingest_pending: the consumer is still running (call it once "
               "ls_ingest_next returned LS_NEXT_END)");
  ls_inflight_t held;
  LS_FORWARD_IF_ERROR(ls_windower_pending_of(ing->w, key, key_len, &held, found));
  *records = *found ? held.rows : 0;
  return LS_OK;
}
