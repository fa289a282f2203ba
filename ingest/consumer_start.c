/*
 * Where the consumer's partitions start (ingest/consumer_internal.h):
 * watermarks, offsets looked up by time, the series a snapshot restores,
 * the assignment.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "consumer_internal.h"
#include "kafka_util.h"
#include "window.h" /* the windower's series: a restored one's id, for the tap */

/* ------------------------------------------------------------------------ */
/* Start positions                                                           */

/* Reads each partition's watermarks and turns its start into an offset. */
static ls_err_t resolve(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
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
    p->skip_time = -1;
    switch (s.kind) {
    case LS_START_OFFSET:
      if (s.value < low || s.value > high)
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
 * trainer takes them before the windows they complete). */
static ls_err_t tap_restored(ls_ingest_t *ing, const ls_inflight_t *in) {
  const series_t *const s = (const series_t *)window_table_find(
      &ing->w->series, base_key_hash(in->key, in->key_len), in->key, in->key_len);
  LS_RETURN_IF(s == NULL, LS_ERR_STATE, "restored series '%.*s' not in the windower",
               (int)in->key_len, in->key);
  for (int r = 0; r < in->rows; r++) {
    ls_windower_record_t const rec = {s->id, in->key, in->key_len,
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
  LS_RETURN_IF(mine == NULL, LS_ERR_NOMEM, "no memory to restore %zu series", conf->n_restores);
  size_t const F = (size_t)conf->restore_F;
  size_t n = 0;
  for (size_t i = 0; i < conf->n_restores; i++) {
    const ingest_restore_t *const r = &conf->restores[i];
    if (consumer_part(ing, r->s.partition) == NULL) continue;
    mine[n] = r->s;
    mine[n].key = conf->keys + r->key_at;
    mine[n].offsets = conf->row_offsets + r->row_at;
    mine[n].times = conf->row_times + r->row_at;
    mine[n++].x = conf->row_x + r->row_at * F;
  }
  ls_err_t err = ls_windower_restore(ing->w, mine, n, enqueue_restored, ing);
  for (size_t i = 0; i < n && err == LS_OK && ing->s.tap; i++)
    err = tap_restored(ing, &mine[i]);
  free(mine);
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
  LS_FORWARD_IF_ERROR(resolve(ing, conf));
  LS_FORWARD_IF_ERROR(restore(ing, conf));
  return assign(ing);
}
