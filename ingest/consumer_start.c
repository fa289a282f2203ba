/*
 * Where the consumer's partitions start (ingest/consumer_internal.h):
 * watermarks, offsets looked up by time, the marks of resumed partitions
 * checked (is the topic the one the snapshot was taken from?), the series a
 * snapshot restores, the assignment.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "consumer_internal.h"
#include "kafka_util.h"
#include "window.h" /* the windower's series: a restored one's id, for the tap */

/* ------------------------------------------------------------------------ */
/* Start positions                                                           */

/* Why a resumed partition is not the one its mark was taken from, one per
 * partition ("" while it is). */
typedef char why_t[256];

/* Reads each partition's watermarks and turns its start into an offset. A
 * resumed partition (marked) whose start is past its high watermark has
 * why[i] set instead of failing. */
static ls_err_t resolve(ls_ingest_t *ing, const ls_ingest_conf_t *conf, why_t *why) {
  int const timeout = conf->s.start_timeout_ms;
  rd_kafka_topic_partition_list_t *const times = rd_kafka_topic_partition_list_new(1);
  ls_err_t err = LS_OK;
  for (int i = 0; i < ing->n_parts && err == LS_OK; i++) {
    part_t *const p = &ing->parts[i];
    ls_start_t const s = conf->partitions[i].start;
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t const kerr =
        kafka_watermarks(ing->rk, ing->s.topic, p->id, timeout, &low, &high);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      err = ls_error_set(LS_ERR_KAFKA,
                         "topic '%s' partition %" PRId32 ": cannot read its watermarks from its "
                         "leader within %d ms (start.timeout.ms): %s",
                         ing->s.topic, p->id, timeout, rd_kafka_err2str(kerr));
      break;
    }
    p->end = ing->s.stop_at_end ? high : INT64_MAX;
    p->high = high;
    p->low = low;
    p->skip_time = -1;
    switch (s.kind) {
    case LS_START_OFFSET:
      if (conf->partitions[i].marked && s.value > high)
        snprintf(why[i], sizeof why[i],
                 "the snapshot resumes at offset %" PRId64 ", but the partition ends at offset "
                 "%" PRId64 " (its high watermark)",
                 s.value, high);
      else if (s.value < low || s.value > high)
        err = ls_error_set(LS_ERR_INVALID_ARG,
                           "topic '%s' partition %" PRId32 ": start offset %" PRId64
                           " is outside the watermarks [%" PRId64 ", %" PRId64
                           "] (below: deleted by retention; above: not written yet)",
                           ing->s.topic, p->id, s.value, low, high);
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
      rd_kafka_topic_partition_list_add(times, ing->s.topic, p->id)->offset = s.value;
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
                           ing->s.topic, t->partition, rd_kafka_err2str(perr));
        break;
      }
      /* Only an answer within the watermarks is taken: -1 (no record at or
       * after the time), an offset written since, or a partition the reply
       * left out (librdkafka then leaves the time itself in t->offset)
       * all start at the low watermark, skipping by time, which reads the
       * same records. */
      part_t *const p = consumer_part(ing, t->partition);
      if (p != NULL && t->offset >= p->start && t->offset <= p->high)
        p->start = p->assign_at = p->next = t->offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(times);
  return err;
}

/* ------------------------------------------------------------------------ */
/* The marks of resumed partitions                                           */

/* Compares message m, read at part's mark, with the mark: why set when it
 * is another record. */
static void compare_mark(const part_t *part, const rd_kafka_message_t *m, char *why, size_t size) {
  const ls_ingest_mark_t *const k = &part->mark;
  rd_kafka_timestamp_type_t type;
  int64_t const ts = rd_kafka_message_timestamp(m, &type);
  int64_t const t = type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE || ts < 0 ? -1 : ts;
  uint64_t const digest = consumer_mark_digest(m->key, m->key_len, m->payload, m->len);
  if (m->offset != k->offset)
    snprintf(why, size,
             "the snapshot resumes after the record at offset %" PRId64 " (timestamp %" PRId64
             "), but the partition holds no record there (the next is at offset %" PRId64 ")",
             k->offset, k->time, m->offset);
  else if (t != k->time || digest != k->digest)
    snprintf(why, size,
             "the snapshot resumes after the record at offset %" PRId64 " (timestamp %" PRId64
             "), but the partition holds another record there (timestamp %" PRId64 "%s)",
             k->offset, k->time, t, t == k->time ? ", another key or value" : "");
}

/* Reads the record at the mark of each resumed partition whose mark the
 * watermarks do not settle (want[i]), within timeout_ms, and compares it
 * (why). Assigns them for that, and unassigns them after: what was read
 * is of an assignment since replaced, which librdkafka drops. */
static ls_err_t read_marks(ls_ingest_t *ing, const int *want, why_t *why, int timeout_ms) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  int left = 0;
  for (int i = 0; i < ing->n_parts; i++)
    if (want[i]) {
      rd_kafka_topic_partition_list_add(list, ing->s.topic, ing->parts[i].id)->offset =
          ing->parts[i].mark.offset;
      left++;
    }
  rd_kafka_resp_err_t const kerr =
      left > 0 ? rd_kafka_assign(ing->rk, list) : RD_KAFKA_RESP_ERR_NO_ERROR;
  rd_kafka_topic_partition_list_destroy(list);
  if (left == 0) return LS_OK;
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot assign the partitions of topic '%s' to read their snapshot's last "
               "records: %s",
               ing->s.topic, rd_kafka_err2str(kerr));
  int *const done = calloc((size_t)ing->n_parts, sizeof *done);
  LS_RETURN_IF(done == NULL, LS_ERR_NOMEM, "no memory for %d partitions", ing->n_parts);
  int64_t const deadline = base_now_ms() + timeout_ms;
  while (left > 0) {
    int64_t const wait = deadline - base_now_ms();
    if (wait <= 0) break;
    ssize_t n = rd_kafka_consume_batch_queue(ing->rkq, 0, ing->batch, BATCH_MAX);
    if (n == 0)
      n = rd_kafka_consume_batch_queue(ing->rkq, wait < BATCH_WAIT_MS ? (int)wait : BATCH_WAIT_MS,
                                       ing->batch, 1);
    for (ssize_t j = 0; j < n; j++) {
      rd_kafka_message_t *const m = ing->batch[j];
      part_t *const part = m->rkt != NULL ? consumer_part(ing, m->partition) : NULL;
      int const i = part != NULL ? (int)(part - ing->parts) : -1;
      if (i >= 0 && want[i] && !done[i]) {
        done[i] = 1;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
          compare_mark(part, m, why[i], sizeof why[i]);
        else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
          snprintf(why[i], sizeof why[i],
                   "the snapshot resumes after the record at offset %" PRId64
                   ", but the partition ends at offset %" PRId64,
                   part->mark.offset, m->offset);
        else /* deleted by retention since the watermarks were read: not a re-creation */
          done[i] = m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                    m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE;
        left -= done[i];
      }
      rd_kafka_message_destroy(m);
    }
  }
  free(done);
  rd_kafka_resp_err_t const uerr = rd_kafka_assign(ing->rk, NULL);
  LS_RETURN_IF(left > 0, LS_ERR_KAFKA,
               "topic '%s': could not read the record each resumed partition's snapshot ends "
               "with within %d ms (start.timeout.ms; %d partition%s unanswered), to check that "
               "the topic is the one the snapshot was taken from",
               ing->s.topic, timeout_ms, left, left > 1 ? "s" : "");
  LS_RETURN_IF(uerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot unassign the partitions of topic '%s': %s", ing->s.topic,
               rd_kafka_err2str(uerr));
  return LS_OK;
}

/* A resumed partition is the one its snapshot was taken from when its high
 * watermark is not below its start (resolve) and the record at its mark is
 * the mark's, or gone to retention (the low watermark past it). One that is
 * not (a topic deleted and re-created since: offsets from 0 again) fails
 * the start, or with topic_recreated=restart is read from its beginning. */
static ls_err_t check_marks(ls_ingest_t *ing, const ls_ingest_conf_t *conf, why_t *why) {
  int *const want = calloc((size_t)ing->n_parts, sizeof *want);
  LS_RETURN_IF(want == NULL, LS_ERR_NOMEM, "no memory for %d partitions", ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    const part_t *const p = &ing->parts[i];
    want[i] = conf->partitions[i].marked && why[i][0] == '\0' && p->mark.offset >= p->low;
  }
  ls_err_t const err = read_marks(ing, want, why, conf->s.start_timeout_ms);
  free(want);
  LS_FORWARD_IF_ERROR(err);
  int first = -1, n = 0;
  char ids[160] = "";
  size_t at = 0;
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const p = &ing->parts[i];
    if (why[i][0] == '\0') continue;
    if (first < 0) first = i;
    if (at < sizeof ids)
      at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%" PRId32, n ? ", " : "", p->id);
    n++;
    if (!ing->s.topic_recreated) continue;
    p->restarted = 1;
    p->start = p->next = p->low;
    p->assign_at = RD_KAFKA_OFFSET_BEGINNING;
    p->mark = (ls_ingest_mark_t){-1, -1, 0};
  }
  if (first < 0) return LS_OK;
  char others[200] = "";
  if (n > 1) snprintf(others, sizeof others, " (partitions %s are in that case)", ids);
  const char *const topic = ing->s.topic;
  int32_t const id = ing->parts[first].id;
  if (!ing->s.topic_recreated)
    return ls_error_set(
        LS_ERR_CORRUPT,
        "topic '%s' partition %" PRId32 ": %s%s: the topic was deleted and re-created since the "
        "snapshot (its offsets count from 0 again), or lost records; its offsets are not the "
        "snapshot's, so nothing was read. To read it from its beginning, the model kept and the "
        "series of such partitions started over, give topic_recreated=restart "
        "(--topic-recreated restart); to train anew, --resume none or another snapshot "
        "directory",
        topic, id, why[first], others);
  consumer_warn(ing, WARN_LOG,
                "topic '%s' partition %" PRId32 ": %s%s: the topic was deleted and re-created "
                "since the snapshot; topic_recreated=restart: read from its beginning, what the "
                "snapshot held in flight of it dropped",
                topic, id, why[first], others);
  return LS_OK;
}

/* Queues a window a restore re-formed. */
static ls_err_t enqueue_restored(void *opaque, const ls_window_t *win) {
  ls_ingest_t *const ing = opaque;
  part_t *const part = consumer_part(ing, win->partition);
  LS_RETURN_IF(part == NULL || consumer_enqueue(ing, part, win) != 0, LS_ERR_NOMEM,
               "no memory to queue a restored window of partition %d", (int)win->partition);
  return LS_OK;
}

/* Restores the conf's series in flight of our partitions into the
 * windower; the windows they complete are queued. */
/* With the tap on: the rows of a restored series, as if read again (the
 * trainer takes them before the windows they complete), with the id the
 * restore gave it (its windows'; gone by now if it was evicted). */
static ls_err_t tap_restored(ls_ingest_t *ing, const ls_inflight_t *in, int64_t id) {
  for (int r = 0; r < in->rows; r++) {
    ls_windower_record_t const rec = {id, in->key, in->key_len,
                                      in->x + (size_t)r * (size_t)ing->s.features, in->times[r]};
    LS_RETURN_IF(consumer_tap_push(ing, &rec, in->partition, in->offsets[r], in->times[r]) != 0,
                 LS_ERR_NOMEM, "no memory for the restored records in the tap");
  }
  return LS_OK;
}

static ls_err_t restore(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  if (conf->n_restores == 0) return LS_OK;
  LS_RETURN_IF(conf->restore_F != ing->s.features, LS_ERR_INVALID_ARG,
               "the records to restore have %d features, the consumer reads %d", conf->restore_F,
               ing->s.features);
  ls_inflight_t *const mine = malloc(conf->n_restores * sizeof *mine);
  int64_t *const ids = malloc(conf->n_restores * sizeof *ids); /* each one's series id */
  if (mine == NULL || ids == NULL) free(mine), free(ids);
  LS_RETURN_IF(mine == NULL || ids == NULL, LS_ERR_NOMEM, "no memory to restore %zu series",
               conf->n_restores);
  size_t const F = (size_t)conf->restore_F;
  size_t n = 0;
  for (size_t i = 0; i < conf->n_restores; i++) {
    const ingest_restore_t *const r = &conf->restores[i];
    const part_t *const part = consumer_part(ing, r->s.partition);
    if (part == NULL || part->restarted) continue;
    mine[n] = r->s;
    mine[n].key = conf->keys + r->key_at;
    mine[n].offsets = conf->row_offsets + r->row_at;
    mine[n].times = conf->row_times + r->row_at;
    mine[n++].x = conf->row_x + r->row_at * F;
  }
  ls_err_t err = window_restore(ing->w, mine, n, enqueue_restored, ing, ids);
  for (size_t i = 0; i < n && err == LS_OK && ing->s.tap; i++)
    err = tap_restored(ing, &mine[i], ids[i]);
  free(mine), free(ids);
  return err;
}

/* Sets *(int *)opaque: the partition holds records. */
static ls_err_t first_pending(void *opaque, const ls_inflight_t *s) {
  (void)s;
  *(int *)opaque = 1;
  return LS_OK;
}

/* Assigns the partitions that have something to read; the others are done
 * from the start. */
static ls_err_t assign(ls_ingest_t *ing) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const p = &ing->parts[i];
    if (p->start >= p->end) { /* what a restore put in it is still flushed */
      int found = 0;
      p->done = 1;
      ing->n_done++;
      ls_windower_each_pending(ing->w, p->id, first_pending, &found);
      if (ing->s.flush && found)
        p->flushing = 1;
      else
        p->ended = 1, ing->n_ended++;
      continue;
    }
    rd_kafka_topic_partition_list_add(list, ing->s.topic, p->id)->offset = p->assign_at;
  }
  rd_kafka_resp_err_t const kerr = rd_kafka_assign(ing->rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot assign the partitions of topic '%s': %s", ing->s.topic,
               rd_kafka_err2str(kerr));
  return LS_OK;
}

ls_err_t consumer_start(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  LS_FORWARD_IF_ERROR(consumer_check_leaders(ing, conf->s.start_timeout_ms, 1));
  why_t *const why = calloc((size_t)ing->n_parts, sizeof *why);
  LS_RETURN_IF(why == NULL, LS_ERR_NOMEM, "no memory for %d partitions", ing->n_parts);
  ls_err_t err = resolve(ing, conf, why);
  if (err == LS_OK) err = check_marks(ing, conf, why);
  free(why);
  LS_FORWARD_IF_ERROR(err);
  LS_FORWARD_IF_ERROR(restore(ing, conf));
  return assign(ing);
}

/* ------------------------------------------------------------------------ */
/* Partitions added live                                                     */

/* Makes part i of ing the added partition a, from its low watermark. */
static void grow_part(ls_ingest_t *ing, int i, const grow_add_t *a) {
  part_t *const p = &ing->parts[i];
  *p = (part_t){.id = a->id, .end = INT64_MAX, .skip_time = -1, .mark = {-1, -1, 0}};
  p->start = p->next = p->assign_at = p->pub_next = a->low;
  p->low = a->low;
  p->high = a->high;
  atomic_init(&p->n, 0);
  ing->part_of_id[a->id] = i;
}

int consumer_grow(ls_ingest_t *ing) {
  pthread_mutex_lock(&ing->lock);
  int const n = ing->n_adds;
  grow_add_t *const adds = n > 0 ? malloc((size_t)n * sizeof *adds) : NULL;
  if (adds != NULL) memcpy(adds, ing->adds, (size_t)n * sizeof *adds);
  if (adds != NULL || n == 0) ing->n_adds = 0; /* else tried again on the next turn */
  pthread_mutex_unlock(&ing->lock);
  if (n == 0 || adds == NULL) return 0;
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(n);
  char ids[256] = "", left[256] = "";
  size_t at = 0, at_left = 0;
  for (int k = 0; k < n; k++) {
    const grow_add_t *const a = &adds[k];
    if (consumer_part(ing, a->id) != NULL) continue;
    if (ing->n_parts == ing->cap_parts || a->id > ing->max_id) {
      if (at_left < sizeof left)
        at_left += (size_t)snprintf(left + at_left, sizeof left - at_left, "%s%" PRId32,
                                    at_left ? ", " : "", a->id);
      continue;
    }
    int const i = ing->n_parts;
    grow_part(ing, i, a);
    pthread_mutex_lock(&ing->lock);
    ing->n_parts = i + 1; /* the trainer's thread may name it from now on */
    pthread_mutex_unlock(&ing->lock);
    rd_kafka_topic_partition_list_add(list, ing->s.topic, a->id)->offset = a->low;
    ing->partitions_added++;
    if (at < sizeof ids)
      at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%" PRId32 "@%" PRId64, at ? ", " : "",
                             a->id, a->low);
  }
  free(adds);
  /* Added to the assignment: the others read on where they are. */
  rd_kafka_error_t *const kerr = list->cnt > 0 ? rd_kafka_incremental_assign(ing->rk, list) : NULL;
  int const added = list->cnt;
  rd_kafka_topic_partition_list_destroy(list);
  if (kerr != NULL) {
    consumer_fail(ing, LS_ERR_KAFKA, "cannot assign the partitions added to topic '%s' (%s): %s",
                  ing->s.topic, ids, rd_kafka_error_string(kerr));
    rd_kafka_error_destroy(kerr);
    return -1;
  }
  if (added > 0)
    consumer_warn(ing, WARN_ADDED,
                  "topic '%s' gained partitions: this consumer reads partition%s %s (partition@"
                  "offset) from %s beginning",
                  ing->s.topic, added > 1 ? "s" : "", ids, added > 1 ? "their" : "its");
  if (at_left > 0)
    consumer_warn(ing, WARN_LOG,
                  "topic '%s' gained partitions %s, which this consumer cannot add while it runs "
                  "(at most %d more, of ids below %d): a restart reads them",
                  ing->s.topic, left, GROW_PARTS, GROW_IDS);
  return 0;
}
