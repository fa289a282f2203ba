/*
 * Helpers shared by ingest's librdkafka clients (ingest/kafka_util.h).
 */
#include "kafka_util.h"

#include <stdio.h>
#include <string.h>

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
