/*
 * The consumer's record path (ingest/consumer_internal.h): each message
 * from librdkafka to the windower and the queues, held back while its
 * partition's queue is full; events; rejected records warned about and
 * copied to the dead-letter topic.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/keymap.h" /* base_key_hash */
#include "consumer_internal.h"
#include "window.h"

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

/* What went wrong with a rejected record, for its warning. */
static void reject_detail(const ls_ingest_t *ing, ls_reject_t r, const rd_kafka_message_t *m,
                          char *buf, size_t size) {
  switch (r) {
  case LS_REJECT_SIZE:
  case LS_REJECT_PARSE:
  case LS_REJECT_NONFINITE:
  case LS_REJECT_FIELD:
  case LS_REJECT_TYPE:
  case LS_REJECT_TIME:
  case LS_REJECT_BACKWARDS:
  case LS_REJECT_FUTURE: snprintf(buf, size, "%s", ls_windower_why(ing->w)); return;
  case LS_REJECT_KEY:
    snprintf(buf, size, "the key is %zu bytes (1..%d allowed)%s", m->key_len, LS_KEY_MAX,
             ing->s.key_field == NULL && m->key_len == 0 &&
                     (ing->s.format == LS_FORMAT_JSON || ing->s.format == LS_FORMAT_AVRO)
                 ? ": the record has no Kafka key (name the key's field: --key-field PATH)"
                 : "");
    return;
  case LS_REJECT_PARTITION:
    snprintf(buf, size, "the series was first seen on another partition");
    return;
  case LS_REJECT_RANGE:
    snprintf(buf, size, "it holds a value beyond max.abs=%g in magnitude", ing->s.max_abs);
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
  char source[96], partition[16], offset[24];
  snprintf(source, sizeof source, "%s/%" PRId32 "/%" PRId64, ing->s.topic, m->partition, m->offset);
  snprintf(partition, sizeof partition, "%" PRId32, m->partition);
  snprintf(offset, sizeof offset, "%" PRId64, m->offset);
  rd_kafka_resp_err_t err;
  for (;;) {
    err = rd_kafka_producev(
        ing->dlq, RD_KAFKA_V_TOPIC(ing->s.dead_letter_topic), RD_KAFKA_V_KEY(m->key, m->key_len),
        RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_TIMESTAMP(timestamp > 0 ? timestamp : 0),
        RD_KAFKA_V_HEADER("lstream-reject-reason", ls_reject2str(r), -1),
        RD_KAFKA_V_HEADER("lstream-partition", partition, -1),
        RD_KAFKA_V_HEADER("lstream-offset", offset, -1),
        RD_KAFKA_V_HEADER("lstream-source", source, -1), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || atomic_load(&ing->stop)) break;
    rd_kafka_poll(ing->dlq, BATCH_WAIT_MS); /* the local queue is full: let it drain */
  }
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) ing->dead_letters++;
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    ing->dead_letter_errors++;
    consumer_warn(ing, WARN_DEAD_LETTER, "cannot copy %s to dead-letter topic '%s': %s", source,
                  ing->s.dead_letter_topic, rd_kafka_err2str(err));
  }
}

static void on_reject(ls_ingest_t *ing, const rd_kafka_message_t *m, ls_reject_t r,
                      int64_t timestamp) {
  if (ing->warn_cb != NULL) {
    char detail[300], key[48];
    reject_detail(ing, r, m, detail, sizeof detail);
    printable_key(m, key, sizeof key);
    consumer_warn(ing, r,
                  "rejected record partition %" PRId32 " offset %" PRId64 " key '%s' (%s): %s",
                  m->partition, m->offset, key, ls_reject2str(r), detail);
  }
  if (ing->dlq != NULL) dead_letter(ing, m, r, timestamp);
}

/* A series went on on another partition (ls_windower_push): said, rate
 * limited. */
static void on_moved(ls_ingest_t *ing, const rd_kafka_message_t *m) {
  if (ing->warn_cb == NULL) return;
  char key[48];
  printable_key(m, key, sizeof key);
  consumer_warn(ing, WARN_MOVED,
                "series '%s' moved from partition %" PRId32 " to partition %" PRId32
                " (offset %" PRId64 "): the topic's partitions changed; its state goes on, what "
                "it held on partition %" PRId32 " trained as a partial window",
                key, ing->w->moved_from, m->partition, m->offset, ing->w->moved_from);
}

/* A series new to the consumer once the topic gained partitions: a new
 * key, or one that moved from another consumer's partition (nothing here
 * tells them apart): counted, said, rate limited. */
static void on_arrived(ls_ingest_t *ing, const rd_kafka_message_t *m) {
  ing->arrived++;
  if (ing->warn_cb == NULL) return;
  char key[48];
  printable_key(m, key, sizeof key);
  consumer_warn(ing, WARN_ARRIVED,
                "series '%s' first seen on partition %" PRId32 " (offset %" PRId64
                ") after topic '%s' grew: a new key, or one that moved from another "
                "consumer's partition; it starts over here with a new state (what that consumer "
                "held of it stays there until its series_idle_ms evicts it)",
                key, m->partition, m->offset, ing->s.topic);
}

/* 1 for the reasons of a record that is not of the declared format. */
static int undecoded(ls_reject_t r) {
  return r == LS_REJECT_SIZE || r == LS_REJECT_PARSE || r == LS_REJECT_FIELD ||
         r == LS_REJECT_TYPE || r == LS_REJECT_TIME;
}

/* Fails the consumer at once: half or more of part's first records are not
 * of the declared format. */
static void probe_fail(ls_ingest_t *ing, const part_t *part) {
  char looks[400], by[200] = "";
  ls_value_describe(part->probe_sample,
                    part->probe_sample_len < sizeof part->probe_sample ? part->probe_sample_len
                                                                       : sizeof part->probe_sample,
                    looks, sizeof looks);
  size_t at = 0;
  for (int r = 1; r < LS_REJECT__COUNT; r++)
    if (part->probe_by[r] > 0 && at < sizeof by)
      at += (size_t)snprintf(by + at, sizeof by - at, "%s%s %d", at ? ", " : "",
                             ls_reject2str((ls_reject_t)r), part->probe_by[r]);
  consumer_fail_now(ing, LS_ERR_CORRUPT,
                    "topic '%s' partition %" PRId32 ": %d of its first %d records are not %s "
                    "records as declared (%s; the first: %s); they look like %s. Nothing was "
                    "trained on them",
                    ing->s.topic, part->id, part->probe_failed, part->probed,
                    ls_format2str(ing->s.format), by, part->probe_why, looks);
}

/* Counts one of part's first records for the check against the format;
 * returns -1 when the run must stop (failed). */
static int probe(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m, ls_reject_t r) {
  if (part->probed >= PROBE_RECORDS) return 0;
  part->probed++;
  if (undecoded(r)) {
    if (part->probe_failed++ == 0) {
      size_t const n = m->len < sizeof part->probe_sample ? m->len : sizeof part->probe_sample;
      if (n > 0) memcpy(part->probe_sample, m->payload, n);
      part->probe_sample_len = m->len;
      snprintf(part->probe_why, sizeof part->probe_why, "%s", ls_windower_why(ing->w));
    }
    part->probe_by[r]++;
  }
  /* Half of the first PROBE_RECORDS: nothing the rest could do saves it. */
  if (2 * part->probe_failed >= PROBE_RECORDS ||
      (part->probed < PROBE_RECORDS && part->next >= part->end && part->end != INT64_MAX &&
       2 * part->probe_failed >= part->probed)) {
    probe_fail(ing, part);
    return -1;
  }
  return 0;
}

uint64_t consumer_mark_digest(const void *key, size_t key_len, const void *value, size_t len) {
  /* Two passes of the series table's hash (8 bytes a step), which every
   * record pays: about 20 ns for a small one, 2-3 % of the samples of
   * `lstream bench ingest` (f32, 4 features). */
  return base_mix64(base_key_hash(key, key_len)) ^ base_key_hash(value, len);
}

/* Handles one record of part. Returns 0, or -1 when the thread must stop. */
static int handle_record(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m) {
  if (part->done) return 0; /* past our end */
  if (m->offset < part->next) {
    ing->duplicates++;
    return 0;
  }
  if (m->offset >= part->end) {
    consumer_part_finish(ing, part);
    return 0;
  }
  /* The record, and when it completes a window its T+G rows queued for the T that leave its
   * buffer (consumer_internal.h): G+1; the tap's copy of it, one more. */
  if (consumer_make_room(ing, ing->s.horizon + 1 + (ing->s.tap ? 1 : 0)) != 0) return -1;
  part->next = m->offset + 1;
  rd_kafka_timestamp_type_t ts_type;
  int64_t const ts = rd_kafka_message_timestamp(m, &ts_type);
  int64_t const timestamp = ts_type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts;
  part->mark = (ls_ingest_mark_t){m->offset, timestamp < 0 ? -1 : timestamp,
                                  consumer_mark_digest(m->key, m->key_len, m->payload, m->len)};
  if (part->skip_time >= 0) {
    if (timestamp >= 0 && timestamp < part->skip_time) {
      ing->skipped++;
      if (part->next >= part->end) consumer_part_finish(ing, part);
      return 0;
    }
    part->skip_time = -1; /* the first record at or after the start time */
  }
  ls_record_t const rec = {m->key,       m->key_len, m->payload, m->len,
                           m->partition, m->offset,  timestamp};
  const ls_window_t *win = NULL;
  int64_t const series = ing->w->stats.series;
  ls_reject_t const r = ls_windower_push(ing->w, &rec, &win);
  if (r == LS_REJECT__COUNT) {
    consumer_fail(ing, LS_ERR_NOMEM, "%s", ls_last_error());
    return -1;
  }
  if (r != LS_REJECT_NONE) on_reject(ing, m, r, timestamp);
  if (r == LS_REJECT_NONE && ing->w->moved_from >= 0) on_moved(ing, m);
  if (r == LS_REJECT_NONE && ing->w->stats.series > series && atomic_load(&ing->arrivals))
    on_arrived(ing, m);
  if (probe(ing, part, m, ing->w->decoded) != 0) return -1;
  if (r == LS_REJECT_NONE && ing->s.tap) { /* before its window is queued */
    ls_windower_record_t acc;
    ls_windower_last(ing->w, &acc);
    if (acc.series >= 0 && consumer_tap_push(ing, &acc, m->partition, m->offset, acc.time) != 0)
      return -1;
  }
  /* The windows it closed: its own, or a gap's or a move's (a series that moved closes a window
   * of its old partition), then those of the series it evicted (horizons: ls_windower_more). */
  if (win == NULL) consumer_track_peak(ing);
  for (; win != NULL; ls_windower_more(ing->w, &win))
    if (consumer_enqueue(ing, consumer_part(ing, win->partition), win) != 0) return -1;
  if (part->next >= part->end) consumer_part_finish(ing, part);
  return 0;
}

/* Handles a consumer event (m->err set) of part (NULL: not a partition's).
 * Returns 0, or -1 to stop. */
static int handle_event(ls_ingest_t *ing, part_t *part, const rd_kafka_message_t *m) {
  switch (m->err) {
  case RD_KAFKA_RESP_ERR__PARTITION_EOF:
    if (part != NULL && m->offset > part->next) part->next = m->offset;
    if (part != NULL && part->next >= part->end) consumer_part_finish(ing, part);
    return 0;
  case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
  case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
    consumer_fail(
        ing, LS_ERR_KAFKA,
        "topic '%s' partition %" PRId32 ": offset %" PRId64 " is out of range: %s (records "
        "deleted by retention before they were read are lost; restart from a later position)",
        ing->s.topic, m->partition, part != NULL ? part->next : m->offset,
        rd_kafka_message_errstr(m));
    return -1;
  case RD_KAFKA_RESP_ERR__FATAL: {
    char reason[512];
    rd_kafka_resp_err_t const fatal = rd_kafka_fatal_error(ing->rk, reason, sizeof reason);
    consumer_fail(ing, LS_ERR_KAFKA, "fatal Kafka error %s: %s", rd_kafka_err2name(fatal), reason);
    return -1;
  }
  default:
    ing->kafka_errors++;
    consumer_warn(ing, WARN_KAFKA, "Kafka: partition %" PRId32 ": %s (librdkafka retries)",
                  m->partition, rd_kafka_message_errstr(m));
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
      consumer_fail(ing, LS_ERR_NOMEM,
                    "out of memory holding back %d messages of partition %" PRId32, cap, part->id);
      return -1;
    }
    part->stash = grown;
    part->cap_stash = cap;
  }
  part->stash[part->n_stash++] = m;
  if (!part->queue_paused) {
    part->queue_paused = 1;
    consumer_set_paused(ing, 1, part);
    ing->pauses++;
    ing->n_paused++;
  }
  return 0;
}

int consumer_dispatch(ls_ingest_t *ing, rd_kafka_message_t *m) {
  part_t *const part = m->rkt != NULL ? consumer_part(ing, m->partition) : NULL;
  if (part != NULL && (part->stash_at < part->n_stash || consumer_queue_full(ing, part)))
    return stash(ing, part, m);
  int const rc = handle(ing, part, m);
  rd_kafka_message_destroy(m);
  return rc;
}

int consumer_service(ls_ingest_t *ing) {
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const part = &ing->parts[i];
    while (part->stash_at < part->n_stash && !consumer_queue_full(ing, part)) {
      rd_kafka_message_t *const m = part->stash[part->stash_at++];
      int const rc = handle(ing, part, m);
      rd_kafka_message_destroy(m);
      if (rc != 0) return -1;
    }
    if (part->stash_at == part->n_stash) part->stash_at = part->n_stash = 0;
    if (part->queue_paused && part->n_stash == 0 &&
        atomic_load(&part->n) <= ing->s.queue_windows / 2) {
      part->queue_paused = 0;
      ing->n_paused--;
      if (!part->done) consumer_set_paused(ing, 0, part);
    }
    while (part->flushing && !consumer_queue_full(ing, part)) {
      if (consumer_make_room(ing, ing->s.window + ing->s.horizon) != 0) return -1;
      const ls_window_t *win = NULL;
      ls_windower_flush_next(ing->w, part->id, &win);
      if (win == NULL) {
        part->flushing = 0;
        consumer_part_end(ing, part);
      } else if (consumer_enqueue(ing, part, win) != 0) {
        return -1;
      }
    }
  }
  return 0;
}
