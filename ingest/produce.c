/*
 * Producing records (include/lstream/produce.h, "Producing records"): a
 * librdkafka producer for one topic with delivery reports checked, and the
 * two things that drive it: the synthetic feed and CSV replay. Both go
 * through one send path (produce_run_*) that encodes, paces, reports
 * progress and flushes.
 */
#include "lstream/produce.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "kafka_util.h"

/* How long ls_producer_new waits for the topic's metadata. */
#define PRODUCER_METADATA_TIMEOUT_S 10.0

/* lstream's producer defaults (ingest.h says why); user settings follow. */
static const char *const producer_defaults[] = {
    "compression.type=lz4",
    "linger.ms=20",
    "queue.buffering.max.messages=500000",
    "enable.idempotence=true",
    "partitioner=murmur2_random",
};

struct ls_producer_s {
  rd_kafka_t *rk;
  rd_kafka_topic_t *rkt;
  char *brokers, *topic;
  int partitions;
  int sends_since_poll;
  kafka_log_t log;
  /* Delivery reports; served by rd_kafka_poll on the producing thread. */
  int64_t delivered, delivered_bytes, failed;
  char first_failure[256];
  char fatal[512]; /* librdkafka's fatal error, "" if none */
};

static void sleep_seconds(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------------------ */
/* The producer                                                              */

static void producer_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  ls_producer_t *const p = rd_kafka_opaque(rk);
  kafka_log_store(&p->log, level, fac, buf);
}

static void producer_error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
  ls_producer_t *const p = opaque;
  kafka_log_store(&p->log, 3, "ERROR", reason);
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    char why[256];
    rd_kafka_fatal_error(rk, why, sizeof why);
    snprintf(p->fatal, sizeof p->fatal, "%s", why);
  }
}

static void producer_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  ls_producer_t *const p = opaque;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    p->delivered++;
    p->delivered_bytes += (int64_t)(m->key_len + m->len);
  } else if (p->failed++ == 0) {
    snprintf(p->first_failure, sizeof p->first_failure, "%s", rd_kafka_err2str(m->err));
  }
}

/* Waits for the topic's metadata (it may be being created). */
static ls_err_t producer_wait_metadata(ls_producer_t *p) {
  int32_t n = 0;
  rd_kafka_resp_err_t const last =
      kafka_wait_metadata(p->rk, p->rkt, (int)(PRODUCER_METADATA_TIMEOUT_S * 1000), 0, &n);
  if (last == RD_KAFKA_RESP_ERR_NO_ERROR) {
    p->partitions = n;
    return LS_OK;
  }
  char logged[512];
  kafka_log_get(&p->log, logged, sizeof logged);
  return ls_error_set(LS_ERR_KAFKA,
                      "no metadata for topic '%s' from %s within %.0f s: %s (last client message: "
                      "%s); is the broker address right, and does the topic exist or the cluster "
                      "auto-create topics?",
                      p->topic, p->brokers, PRODUCER_METADATA_TIMEOUT_S, rd_kafka_err2str(last),
                      logged);
}

ls_err_t ls_producer_new(ls_producer_t **out, const char *brokers, const char *topic,
                         const char *const *settings, int n_settings) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_producer_new: out is NULL");
  *out = NULL;
  LS_RETURN_IF(brokers == NULL || brokers[0] == '\0', LS_ERR_INVALID_ARG,
               "producer: no broker address (want host:port[,host:port...])");
  LS_RETURN_IF(topic == NULL || topic[0] == '\0', LS_ERR_INVALID_ARG, "producer: no topic name");
  ls_producer_t *const p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "producer: allocating it");
  kafka_log_init(&p->log);
  p->brokers = strdup(brokers);
  p->topic = strdup(topic);
  rd_kafka_conf_t *const conf = rd_kafka_conf_new();
  ls_err_t err = p->brokers && p->topic ? LS_OK : ls_error_set(LS_ERR_NOMEM, "producer: strdup");
  char errstr[512];
  if (err == LS_OK && rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr,
                                        sizeof errstr) != RD_KAFKA_CONF_OK)
    err = ls_error_set(LS_ERR_INVALID_ARG, "producer: brokers '%s': %s", brokers, errstr);
  if (err == LS_OK)
    err = kafka_conf_apply(conf, producer_defaults,
                           (int)(sizeof producer_defaults / sizeof producer_defaults[0]));
  if (err == LS_OK) err = kafka_conf_apply(conf, settings, n_settings);
  if (err != LS_OK) {
    rd_kafka_conf_destroy(conf);
    ls_producer_destroy(p);
    return err;
  }
  rd_kafka_conf_set_opaque(conf, p);
  rd_kafka_conf_set_log_cb(conf, producer_log_cb);
  rd_kafka_conf_set_error_cb(conf, producer_error_cb);
  rd_kafka_conf_set_dr_msg_cb(conf, producer_dr_cb);
  p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (p->rk == NULL) {
    rd_kafka_conf_destroy(conf);
    ls_producer_destroy(p);
    return ls_error_set(LS_ERR_KAFKA, "producer: %s", errstr);
  }
  p->rkt = rd_kafka_topic_new(p->rk, topic, NULL);
  err = p->rkt != NULL ? producer_wait_metadata(p)
                       : ls_error_set(LS_ERR_KAFKA, "producer: topic '%s': %s", topic,
                                      rd_kafka_err2str(rd_kafka_last_error()));
  if (err != LS_OK) {
    ls_producer_destroy(p);
    return err;
  }
  *out = p;
  return LS_OK;
}

void ls_producer_destroy(ls_producer_t *producer) {
  if (producer == NULL) return;
  if (producer->rkt != NULL) rd_kafka_topic_destroy(producer->rkt);
  if (producer->rk != NULL) {
    rd_kafka_purge(producer->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(producer->rk);
  }
  kafka_log_destroy(&producer->log);
  free(producer->brokers);
  free(producer->topic);
  free(producer);
}

int ls_producer_partitions(const ls_producer_t *producer) {
  return producer != NULL ? producer->partitions : 0;
}

static ls_err_t producer_check_fatal(const ls_producer_t *p) {
  LS_RETURN_IF(p->fatal[0] != '\0', LS_ERR_KAFKA, "producer for '%s': fatal error: %s", p->topic,
               p->fatal);
  return LS_OK;
}

ls_err_t ls_producer_send(ls_producer_t *producer, const void *key, size_t key_len,
                          int64_t timestamp_ms, const void *value, size_t len) {
  LS_RETURN_IF(producer == NULL, LS_ERR_INVALID_ARG, "ls_producer_send: producer is NULL");
  LS_RETURN_IF(key == NULL || key_len < 1 || key_len > LS_KEY_MAX, LS_ERR_INVALID_ARG,
               "ls_producer_send: the key must be 1..%d bytes (got %zu)", LS_KEY_MAX, key_len);
  LS_RETURN_IF(value == NULL && len > 0, LS_ERR_INVALID_ARG,
               "ls_producer_send: value is NULL but len is %zu", len);
  LS_RETURN_IF(timestamp_ms < 0, LS_ERR_INVALID_ARG, "ls_producer_send: timestamp %lld is negative",
               (long long)timestamp_ms);
  LS_FORWARD_IF_ERROR(producer_check_fatal(producer));
  for (;;) {
    rd_kafka_resp_err_t const rerr = rd_kafka_producev(
        producer->rk, RD_KAFKA_V_RKT(producer->rkt), RD_KAFKA_V_KEY(key, key_len),
        RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_END);
    if (rerr == RD_KAFKA_RESP_ERR_NO_ERROR) break;
    LS_RETURN_IF(rerr != RD_KAFKA_RESP_ERR__QUEUE_FULL, LS_ERR_KAFKA,
                 "queuing a record for '%s': %s", producer->topic, rd_kafka_err2str(rerr));
    rd_kafka_poll(producer->rk, 100); /* the queue drains as batches are delivered */
    LS_FORWARD_IF_ERROR(producer_check_fatal(producer));
  }
  if (++producer->sends_since_poll == 1000) { /* serve delivery reports */
    producer->sends_since_poll = 0;
    rd_kafka_poll(producer->rk, 0);
  }
  return LS_OK;
}

ls_err_t ls_producer_flush(ls_producer_t *producer) {
  LS_RETURN_IF(producer == NULL, LS_ERR_INVALID_ARG, "ls_producer_flush: producer is NULL");
  /* Every record ends delivered or failed within message.timeout.ms. */
  while (rd_kafka_outq_len(producer->rk) > 0)
    rd_kafka_flush(producer->rk, 1000);
  rd_kafka_poll(producer->rk, 0);
  int64_t const failed = producer->failed;
  producer->failed = 0;
  if (failed > 0) {
    char logged[512];
    kafka_log_get(&producer->log, logged, sizeof logged);
    return ls_error_set(LS_ERR_KAFKA,
                        "%lld record(s) to '%s' were not delivered; first reason: %s (last client "
                        "message: %s)",
                        (long long)failed, producer->topic, producer->first_failure, logged);
  }
  return producer_check_fatal(producer);
}

/* ------------------------------------------------------------------------ */
/* The send path shared by the feed and CSV replay                           */

void ls_produce_opts_default(ls_produce_opts_t *opts) {
  if (opts == NULL) return;
  *opts = (ls_produce_opts_t){.format = LS_FORMAT_F32, .rate = 0.0};
}

typedef struct produce_run_s {
  ls_producer_t *producer;
  ls_produce_opts_t opts;
  int features;
  int64_t total, done;
  int64_t delivered0, bytes0; /* the producer's counters at the start */
  double start, last_progress;
  int stopped;
  char *buf; /* an encoded value */
  size_t size;
} produce_run_t;

/* Checks the arguments every produce call shares; opts may be NULL. */
static ls_err_t produce_check(const ls_producer_t *producer, const ls_produce_opts_t *opts) {
  LS_RETURN_IF(producer == NULL, LS_ERR_INVALID_ARG, "produce: producer is NULL");
  LS_RETURN_IF(opts != NULL && (unsigned)opts->format >= LS_FORMAT__COUNT, LS_ERR_INVALID_ARG,
               "produce: format %d is not one of ls_format_t", (int)opts->format);
  LS_RETURN_IF(opts != NULL && !(opts->rate >= 0.0 && isfinite(opts->rate)), LS_ERR_INVALID_ARG,
               "produce: rate %g must be >= 0 records/s (0 = unlimited)", opts->rate);
  return LS_OK;
}

static ls_err_t produce_run_begin(produce_run_t *run, ls_producer_t *producer,
                                  const ls_produce_opts_t *opts, int features, int64_t total) {
  LS_FORWARD_IF_ERROR(produce_check(producer, opts));
  *run = (produce_run_t){.producer = producer, .features = features, .total = total};
  if (opts != NULL)
    run->opts = *opts;
  else
    ls_produce_opts_default(&run->opts);
  /* Covers f32's 4 bytes a value, and a tick's names, key and time. */
  run->size = (size_t)features * (LS_CSV_VALUE_MAX + 16) + LS_KEY_MAX + 128;
  run->buf = malloc(run->size);
  LS_RETURN_IF(run->buf == NULL, LS_ERR_NOMEM, "produce: allocating a %zu-byte record buffer",
               run->size);
  run->delivered0 = producer->delivered;
  run->bytes0 = producer->delivered_bytes;
  run->start = run->last_progress = base_now_s();
  return LS_OK;
}

/* Reports progress; returns the callback's answer (non-zero: stop). */
static int produce_run_progress(produce_run_t *run, double now) {
  run->last_progress = now;
  return run->opts.progress != NULL &&
         run->opts.progress(run->opts.progress_opaque, run->done, run->total) != 0;
}

static ls_err_t produce_run_send(produce_run_t *run, const char *key, size_t key_len,
                                 int64_t timestamp_ms, const float *values) {
  size_t len = 0;
  if (run->opts.encoder != NULL)
    LS_FORWARD_IF_ERROR(ls_decoder_encode(run->opts.encoder, key, key_len, timestamp_ms, values,
                                          run->buf, run->size, &len));
  else
    LS_FORWARD_IF_ERROR(
        ls_record_encode(run->opts.format, values, run->features, run->buf, run->size, &len));
  /* Pace: record i leaves no earlier than start + i / rate. */
  bool const paced = run->opts.rate > 0.0;
  if (paced) {
    double const wait = run->start + (double)run->done / run->opts.rate - base_now_s();
    if (wait > 0.0) sleep_seconds(wait);
  }
  LS_FORWARD_IF_ERROR(ls_producer_send(run->producer, key, key_len, timestamp_ms, run->buf, len));
  run->done++;
  if (paced || (run->done & 1023) == 0) {
    double const now = base_now_s();
    if (now - run->last_progress >= 0.25 && produce_run_progress(run, now)) run->stopped = 1;
  }
  return LS_OK;
}

/* Flushes what was sent (also after an error, which then wins), fills stats
 * and frees the run. */
static ls_err_t produce_run_end(produce_run_t *run, ls_err_t err, ls_produce_stats_t *stats) {
  if (err == LS_OK && !run->stopped) /* the last report: a stop asked now changes nothing */
    (void)produce_run_progress(run, base_now_s());
  char saved[1024];
  snprintf(saved, sizeof saved, "%s", ls_last_error());
  ls_err_t const flushed = ls_producer_flush(run->producer);
  if (err != LS_OK) ls_error_set(err, "%s", saved);
  if (stats != NULL)
    *stats = (ls_produce_stats_t){
        .records = run->producer->delivered - run->delivered0,
        .bytes = run->producer->delivered_bytes - run->bytes0,
        .seconds = base_now_s() - run->start,
        .stopped = run->stopped,
    };
  free(run->buf);
  return err != LS_OK ? err : flushed;
}

/* ------------------------------------------------------------------------ */
/* The synthetic feed                                                        */

ls_err_t ls_feed_produce(ls_feed_t *feed, ls_producer_t *producer, const ls_produce_opts_t *opts,
                         ls_produce_stats_t *stats) {
  LS_RETURN_IF(feed == NULL, LS_ERR_INVALID_ARG, "ls_feed_produce: feed is NULL");
  ls_feed_conf_t const *const c = ls_feed_conf(feed);
  int const N = c->series, F = c->features;
  int64_t const K = c->records_per_series;
  produce_run_t run;
  LS_FORWARD_IF_ERROR(produce_run_begin(&run, producer, opts, F, (int64_t)N * K));
  float *const values = malloc((size_t)F * sizeof *values);
  ls_err_t err = values != NULL ? LS_OK : ls_error_set(LS_ERR_NOMEM, "feed: allocating values");
  for (int64_t k = 0; k < K && err == LS_OK && !run.stopped; k++) {
    for (int s = 0; s < N && err == LS_OK && !run.stopped; s++) {
      char key[32];
      int const key_len = ls_feed_key(s, key, sizeof key);
      err = ls_feed_value(feed, s, k, values, NULL);
      if (err == LS_OK)
        err = produce_run_send(&run, key, (size_t)key_len, ls_feed_time(feed, k), values);
    }
  }
  free(values);
  return produce_run_end(&run, err, stats);
}

/* ------------------------------------------------------------------------ */
/* CSV replay                                                                */

/* Parses one line "series,time_ms,v1,...,vF" (its end of line removed).
 * *features is the width every line must have (0 before the first record,
 * which sets it); values [LS_FEATURES_MAX] receives the values. */
static ls_err_t csv_parse_line(const char *path, int64_t lineno, const char *line, size_t len,
                               int *features, int64_t *features_line, float *values,
                               size_t *key_len, int64_t *time_ms) {
  const char *const end = line + len;
  const char *const c1 = memchr(line, ',', len);
  LS_RETURN_IF(c1 == NULL, LS_ERR_CORRUPT,
               "%s:%lld: no comma (each line is series,time_ms,v1[,v2...])", path,
               (long long)lineno);
  *key_len = (size_t)(c1 - line);
  LS_RETURN_IF(*key_len == 0, LS_ERR_CORRUPT, "%s:%lld: the series key is empty", path,
               (long long)lineno);
  LS_RETURN_IF(*key_len > LS_KEY_MAX, LS_ERR_CORRUPT,
               "%s:%lld: the series key is %zu bytes (max %d)", path, (long long)lineno, *key_len,
               LS_KEY_MAX);
  const char *const t = c1 + 1;
  const char *const c2 = memchr(t, ',', (size_t)(end - t));
  LS_RETURN_IF(c2 == NULL, LS_ERR_CORRUPT,
               "%s:%lld: no values after the time (each line is series,time_ms,v1[,v2...])", path,
               (long long)lineno);
  char field[32];
  size_t const t_len = (size_t)(c2 - t);
  char *tail = NULL;
  if (t_len > 0 && t_len < sizeof field) {
    memcpy(field, t, t_len);
    field[t_len] = '\0';
    errno = 0;
    *time_ms = strtoll(field, &tail, 10);
  }
  LS_RETURN_IF(tail == NULL || *tail != '\0' || errno != 0 || *time_ms < 0, LS_ERR_CORRUPT,
               "%s:%lld: time '%.*s' is not a whole number of milliseconds >= 0", path,
               (long long)lineno, (int)(t_len < 40 ? t_len : 40), t);

  const char *const v = c2 + 1;
  size_t const v_len = (size_t)(end - v);
  int F = 1;
  for (const char *q = v; (q = memchr(q, ',', (size_t)(end - q))) != NULL; q++)
    F++;
  LS_RETURN_IF(F > LS_FEATURES_MAX, LS_ERR_CORRUPT, "%s:%lld: %d values (max %d)", path,
               (long long)lineno, F, LS_FEATURES_MAX);
  if (*features == 0) {
    *features = F;
    *features_line = lineno;
  }
  LS_RETURN_IF(F != *features, LS_ERR_CORRUPT,
               "%s:%lld: %d values, but line %lld has %d (every line needs the same features)",
               path, (long long)lineno, F, (long long)*features_line, *features);
  ls_reject_t const r = ls_record_decode(LS_FORMAT_CSV, v, v_len, F, values);
  LS_RETURN_IF(r == LS_REJECT_NONFINITE, LS_ERR_CORRUPT,
               "%s:%lld: a value in '%.60s' is NaN, infinite or out of float range (the trainer "
               "would reject the record)",
               path, (long long)lineno, v);
  LS_RETURN_IF(r != LS_REJECT_NONE, LS_ERR_CORRUPT, "%s:%lld: '%.60s' is not %d numbers", path,
               (long long)lineno, v, F);
  return LS_OK;
}

/* Reads f from its current position: checks every line and counts the
 * records into *count, and sends them through run unless run is NULL. */
static ls_err_t csv_scan(const char *path, FILE *f, int *features, float *values, int64_t *count,
                         produce_run_t *run) {
  char *line = NULL;
  size_t cap = 0;
  int64_t lineno = 0, features_line = 0;
  bool first = true;
  ls_err_t err = LS_OK;
  ssize_t n;
  *count = 0;
  while (err == LS_OK && (run == NULL || !run->stopped) && (n = getline(&line, &cap, f)) >= 0) {
    lineno++;
    size_t len = (size_t)n;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      len--;
    line[len] = '\0'; /* messages quote parts of the line with %s */
    if (len == 0 || line[0] == '#') continue;
    bool const header = first && len >= 7 && !memcmp(line, "series,", 7);
    first = false;
    if (header) continue;
    size_t key_len = 0;
    int64_t time_ms = 0;
    err = csv_parse_line(path, lineno, line, len, features, &features_line, values, &key_len,
                         &time_ms);
    if (err == LS_OK && run != NULL) err = produce_run_send(run, line, key_len, time_ms, values);
    if (err == LS_OK) (*count)++;
  }
  if (err == LS_OK && ferror(f))
    err = ls_error_set(LS_ERR_IO, "%s: read error after line %lld", path, (long long)lineno);
  free(line);
  return err;
}

ls_err_t ls_csv_replay(const char *path, ls_producer_t *producer, const ls_produce_opts_t *opts,
                       ls_produce_stats_t *stats) {
  LS_RETURN_IF(path == NULL, LS_ERR_INVALID_ARG, "ls_csv_replay: path is NULL");
  LS_FORWARD_IF_ERROR(produce_check(producer, opts));
  FILE *const f = fopen(path, "r");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot open CSV file '%s': %s", path, strerror(errno));
  float *const values = malloc(LS_FEATURES_MAX * sizeof *values);
  int features = 0;
  int64_t count = 0;
  ls_err_t err = values != NULL ? csv_scan(path, f, &features, values, &count, NULL)
                                : ls_error_set(LS_ERR_NOMEM, "csv: allocating values");
  if (err == LS_OK && count == 0)
    err = ls_error_set(LS_ERR_CORRUPT, "%s: no records (expected lines series,time_ms,v1[,v2...])",
                       path);
  if (err == LS_OK) {
    rewind(f);
    produce_run_t run;
    err = produce_run_begin(&run, producer, opts, features, count);
    if (err == LS_OK) {
      int64_t sent = 0;
      err = csv_scan(path, f, &features, values, &sent, &run);
      err = produce_run_end(&run, err, stats);
    }
  }
  free(values);
  fclose(f);
  return err;
}

ls_err_t ls_ticks_spec(ls_format_t format, int F, ls_ticks_t *out) {
  LS_RETURN_IF(out == NULL || F < 1 || F > LS_FEATURES_MAX ||
                   (format != LS_FORMAT_JSON && format != LS_FORMAT_AVRO),
               LS_ERR_INVALID_ARG,
               "ls_ticks_spec: json or avro, F in [1, %d] (got %s, %d), out not NULL",
               LS_FEATURES_MAX, ls_format2str(format), F);
  static const char *const names[] = {"px", "qty", "bid", "ask"};
  size_t at = 0, sat = 0;
  sat += (size_t)snprintf(out->schema, sizeof out->schema,
                          "{\"type\":\"record\",\"name\":\"Tick\",\"fields\":["
                          "{\"name\":\"sym\",\"type\":\"string\"},"
                          "{\"name\":\"ts\",\"type\":\"long\"}");
  for (int f = 0; f < F; f++) {
    char name[16];
    if (f < 4)
      snprintf(name, sizeof name, "%s", names[f]);
    else
      snprintf(name, sizeof name, "f%d", f);
    at += (size_t)snprintf(out->fields + at, sizeof out->fields - at, "%s%s", f ? "," : "", name);
    sat += (size_t)snprintf(out->schema + sat, sizeof out->schema - sat,
                            ",{\"name\":\"%s\",\"type\":\"float\"}", name);
  }
  snprintf(out->schema + sat, sizeof out->schema - sat, "]}");
  ls_record_spec_init(&out->spec);
  out->spec.format = format;
  out->spec.features = F;
  out->spec.fields = out->fields;
  out->spec.key_field = "sym";
  out->spec.time_field = "ts";
  out->spec.avro_schema = format == LS_FORMAT_AVRO ? out->schema : NULL;
  return LS_OK;
}
