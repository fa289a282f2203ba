/*
 * Where the consumer's partitions start (ingest/consumer_internal.h):
 * watermarks, offsets looked up by time, skip rules, the assignment.
 */
#include <inttypes.h>

#include "consumer_internal.h"

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
        rd_kafka_query_watermark_offsets(ing->rk, ing->s.topic, p->id, &low, &high, timeout);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      err = ls_error_set(LS_ERR_KAFKA,
                         "topic '%s' partition %" PRId32 ": cannot read its watermarks: %s "
                         "(does the partition exist? is bootstrap.servers right?)",
                         ing->s.topic, p->id, rd_kafka_err2str(kerr));
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
      part_t *const p = consumer_part(ing, t->partition);
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
    if (consumer_part(ing, r->partition) != NULL)
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
  LS_FORWARD_IF_ERROR(resolve(ing, conf));
  LS_FORWARD_IF_ERROR(apply_skips(ing, conf));
  return assign(ing);
}
