/*
 * Helpers shared by ingest's librdkafka clients (ingest/kafka_util.h).
 */
#include "kafka_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

ls_err_t kafka_conf_apply(rd_kafka_conf_t *conf, const char *const *settings, int n) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "Kafka configuration is NULL");
  LS_RETURN_IF(n < 0 || (n > 0 && settings == NULL), LS_ERR_INVALID_ARG,
               "Kafka settings: %d entries but no array", n);
  for (int i = 0; i < n; i++) {
    const char *const kv = settings[i];
    LS_RETURN_IF(kv == NULL, LS_ERR_INVALID_ARG, "Kafka setting %d is NULL", i);
    const char *const eq = strchr(kv, '=');
    LS_RETURN_IF(eq == NULL || eq == kv, LS_ERR_INVALID_ARG,
                 "Kafka setting '%s' is not of the form key=value", kv);
    char key[256];
    size_t const key_len = (size_t)(eq - kv);
    LS_RETURN_IF(key_len >= sizeof key, LS_ERR_INVALID_ARG,
                 "Kafka setting key '%.40s...' is too long", kv);
    memcpy(key, kv, key_len);
    key[key_len] = '\0';
    char errstr[512];
    rd_kafka_conf_res_t const res = rd_kafka_conf_set(conf, key, eq + 1, errstr, sizeof errstr);
    LS_RETURN_IF(res == RD_KAFKA_CONF_UNKNOWN, LS_ERR_UNKNOWN_KEY,
                 "Kafka setting '%s': %s (see `kcat -X list` for librdkafka's properties)", kv,
                 errstr);
    LS_RETURN_IF(res != RD_KAFKA_CONF_OK, LS_ERR_INVALID_ARG, "Kafka setting '%s': %s", kv, errstr);
  }
  return LS_OK;
}

ls_err_t kafka_conf_new(const char *brokers, const char *const *extra, int n_extra,
                        const char *const *settings, int n_settings, rd_kafka_conf_t **out) {
  *out = NULL;
  rd_kafka_conf_t *const k = rd_kafka_conf_new();
  char servers[600];
  snprintf(servers, sizeof servers, "bootstrap.servers=%s", brokers);
  const char *const first[] = {servers};
  ls_err_t err = kafka_conf_apply(k, first, 1);
  if (err == LS_OK) err = kafka_conf_apply(k, extra, n_extra);
  if (err == LS_OK) err = kafka_conf_apply(k, settings, n_settings);
  if (err != LS_OK) {
    rd_kafka_conf_destroy(k);
    return err;
  }
  *out = k;
  return LS_OK;
}

/* Kafka's rule for topic names: 1..249 of [a-zA-Z0-9._-]. */
ls_err_t kafka_check_topic(const char *topic) {
  LS_RETURN_IF(topic == NULL || topic[0] == '\0', LS_ERR_INVALID_ARG, "topic name is empty");
  size_t const len = strlen(topic);
  LS_RETURN_IF(len > 249, LS_ERR_INVALID_ARG, "topic name '%.40s...' is %zu characters (max 249)",
               topic, len);
  size_t const bad =
      strspn(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
  LS_RETURN_IF(bad != len, LS_ERR_INVALID_ARG,
               "topic name '%s' has '%c' at %zu (Kafka allows letters, digits, '.', '_', '-')",
               topic, topic[bad], bad);
  return LS_OK;
}

/* Whether md lists one topic with partitions, each with a leader when
 * *(int *)leaders: NO_ERROR, or what is wrong. */
static rd_kafka_resp_err_t metadata_ready(const struct rd_kafka_metadata *md, void *leaders) {
  if (md->topic_cnt != 1) return RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
  const struct rd_kafka_metadata_topic *const t = &md->topics[0];
  if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR) return t->err;
  if (t->partition_cnt < 1) return RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
  for (int i = 0; *(const int *)leaders && i < t->partition_cnt; i++)
    if (t->partitions[i].err != RD_KAFKA_RESP_ERR_NO_ERROR || t->partitions[i].leader < 0)
      return t->partitions[i].err != RD_KAFKA_RESP_ERR_NO_ERROR
                 ? t->partitions[i].err
                 : RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE;
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

rd_kafka_resp_err_t kafka_wait_metadata_for(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int timeout_ms,
                                            kafka_metadata_ready_fn ready, void *opaque,
                                            const struct rd_kafka_metadata **out) {
  *out = NULL;
  double const deadline = base_now_s() + timeout_ms / 1000.0;
  rd_kafka_resp_err_t last = RD_KAFKA_RESP_ERR__TIMED_OUT;
  for (int asked = 0;; asked = 1) {
    int const left_ms = (int)((deadline - base_now_s()) * 1000.0);
    if (left_ms <= 0 && asked) return last;
    const struct rd_kafka_metadata *md = NULL;
    last = rd_kafka_metadata(rk, 0, rkt, &md, left_ms > 0 ? left_ms : 1);
    if (last == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (*out != NULL) rd_kafka_metadata_destroy(*out);
      *out = md;
      last = ready(md, opaque);
      if (last == RD_KAFKA_RESP_ERR_NO_ERROR) return last;
    }
    struct timespec const ts = {0, 100 * 1000 * 1000}; /* e.g. while a topic is created */
    nanosleep(&ts, NULL);
  }
}

rd_kafka_resp_err_t kafka_wait_metadata(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int timeout_ms,
                                        int leaders, int32_t *partitions) {
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t const err =
      kafka_wait_metadata_for(rk, rkt, timeout_ms, metadata_ready, &leaders, &md);
  if (md != NULL) {
    *partitions = md->topic_cnt == 1 ? md->topics[0].partition_cnt : 0;
    rd_kafka_metadata_destroy(md);
  }
  return err;
}

rd_kafka_resp_err_t kafka_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition,
                                     int timeout_ms, int64_t *low, int64_t *high) {
  int64_t lo = -1, hi = -1;
  rd_kafka_resp_err_t const err =
      rd_kafka_query_watermark_offsets(rk, topic, partition, &lo, &hi, timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return err;
  if (lo < 0 || hi < lo) return RD_KAFKA_RESP_ERR__BAD_MSG;
  *low = lo;
  *high = hi;
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

void kafka_log_init(kafka_log_t *log) {
  pthread_mutex_init(&log->lock, NULL);
  log->last[0] = '\0';
}

void kafka_log_destroy(kafka_log_t *log) {
  pthread_mutex_destroy(&log->lock);
}

void kafka_log_store(kafka_log_t *log, int level, const char *fac, const char *msg) {
  if (level > 4) return; /* LOG_WARNING */
  pthread_mutex_lock(&log->lock);
  snprintf(log->last, sizeof log->last, "%s: %s", fac, msg);
  pthread_mutex_unlock(&log->lock);
}

void kafka_log_get(kafka_log_t *log, char *buf, size_t size) {
  pthread_mutex_lock(&log->lock);
  snprintf(buf, size, "%s", log->last[0] ? log->last : "(none)");
  pthread_mutex_unlock(&log->lock);
}

ls_err_t kafka_end_offsets(const char *brokers, const char *const *settings, int n_settings,
                           const char *topic, const char *level, int32_t n, int timeout_ms,
                           int64_t *end) {
  rd_kafka_conf_t *k = NULL;
  LS_FORWARD_IF_ERROR(kafka_conf_new(brokers, NULL, 0, settings, n_settings, &k));
  char errstr[512];
  if (rd_kafka_conf_set(k, "isolation.level", level, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(k);
    return ls_error_set(LS_ERR_KAFKA, "isolation.level=%s: %s", level, errstr);
  }
  rd_kafka_t *const rk = rd_kafka_new(RD_KAFKA_CONSUMER, k, errstr, sizeof errstr);
  if (rk == NULL) {
    rd_kafka_conf_destroy(k);
    return ls_error_set(LS_ERR_KAFKA, "cannot create a Kafka consumer: %s", errstr);
  }
  rd_kafka_resp_err_t kerr = RD_KAFKA_RESP_ERR_NO_ERROR;
  int32_t q = 0;
  for (int64_t lo = 0; q < n && kerr == RD_KAFKA_RESP_ERR_NO_ERROR; q++)
    kerr = kafka_watermarks(rk, topic, q, timeout_ms, &lo, &end[q]);
  rd_kafka_destroy(rk);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "topic '%s' partition %d: its end offset for %s: %s", topic, (int)q - 1, level,
               rd_kafka_err2str(kerr));
  return LS_OK;
}

ls_err_t kafka_abort_left_open(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const ls_publisher_conf_t *c,
                               int32_t n) {
  int64_t *const end = calloc(2 * (size_t)n, sizeof *end);
  LS_RETURN_IF(end == NULL, LS_ERR_NOMEM, "publisher: out of memory");
  ls_err_t err = kafka_end_offsets(c->brokers, c->settings, c->n_settings, c->topic,
                                   "read_committed", n, c->timeout_ms, end);
  if (err == LS_OK)
    err = kafka_end_offsets(c->brokers, c->settings, c->n_settings, c->topic, "read_uncommitted", n,
                            c->timeout_ms, end + n);
  int open = 0;
  for (int32_t q = 0; err == LS_OK && q < n; q++)
    open += end[q] < end[n + q];
  if (err != LS_OK || open == 0) {
    free(end);
    return err;
  }
  rd_kafka_error_t *e = rd_kafka_begin_transaction(rk);
  rd_kafka_resp_err_t kerr = RD_KAFKA_RESP_ERR_NO_ERROR;
  for (int32_t q = 0; e == NULL && !kerr && q < n; q++)
    if (end[q] < end[n + q])
      kerr = rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(q),
                               RD_KAFKA_V_KEY("lstream", 7), RD_KAFKA_V_END);
  free(end);
  /* Delivered first: an abort purges what is not, maybe before its
   * partition joined the transaction (no marker there then). */
  if (e == NULL && !kerr) kerr = rd_kafka_flush(rk, c->timeout_ms);
  if (e == NULL && !kerr) e = rd_kafka_abort_transaction(rk, c->timeout_ms);
  if (e == NULL && !kerr) return LS_OK;
  err = ls_error_set(LS_ERR_KAFKA,
                     "topic '%s': cannot abort what transactional id %s left open on %d "
                     "partitions: %s",
                     c->topic, c->transactional_id, open,
                     e != NULL ? rd_kafka_error_string(e) : rd_kafka_err2str(kerr));
  if (e != NULL) rd_kafka_error_destroy(e);
  return err;
}
