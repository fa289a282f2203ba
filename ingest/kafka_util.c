/*
 * Helpers shared by ingest's librdkafka clients (ingest/kafka_util.h).
 */
#include "kafka_util.h"

#include <stdio.h>
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
