/*
 * Consumer configuration (include/lstream/ingest.h, "Consumer"): lstream's
 * keys, librdkafka properties passed through (-X key=value and
 * --kafka-config FILE), partitions with their start positions, and the
 * topic's partition count from the cluster's metadata.
 */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka_util.h"
#include "window.h"

/* ------------------------------------------------------------------------ */
/* Parsing values                                                            */

/* Strict integer: the whole text, within [min, max]. */
static ls_err_t parse_i64(const char *key, const char *text, int64_t min, int64_t max,
                          int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long const v = strtoll(text, &end, 10);
  LS_RETURN_IF(text[0] == '\0' || *end != '\0' || errno != 0 || v < min || v > max,
               LS_ERR_INVALID_ARG, "%s: '%s' is not an integer in [%lld, %lld]", key, text,
               (long long)min, (long long)max);
  *out = v;
  return LS_OK;
}

static ls_err_t parse_int(const char *key, const char *text, int min, int max, int *out) {
  int64_t v = 0;
  LS_FORWARD_IF_ERROR(parse_i64(key, text, min, max, &v));
  *out = (int)v;
  return LS_OK;
}

/* One of two words, giving 1 for the first and 0 for the second. */
static ls_err_t parse_choice(const char *key, const char *text, const char *yes, const char *no,
                             int *out) {
  LS_RETURN_IF(strcmp(text, yes) && strcmp(text, no), LS_ERR_INVALID_ARG,
               "%s: '%s' is neither %s nor %s", key, text, yes, no);
  *out = !strcmp(text, yes);
  return LS_OK;
}

/* Replaces *slot by a copy of text ("" clears it). */
static ls_err_t set_string(const char *key, const char *text, char **slot) {
  char *const copy = text[0] ? strdup(text) : NULL;
  LS_RETURN_IF(text[0] && copy == NULL, LS_ERR_NOMEM, "%s: out of memory", key);
  free(*slot);
  *slot = copy;
  return LS_OK;
}

ls_err_t ls_start_parse(const char *text, ls_start_t *out) {
  LS_RETURN_IF(text == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_start_parse: text and out must not be NULL");
  ls_start_t s = {LS_START_OFFSET, 0};
  if (!strcmp(text, "beginning")) {
    s.kind = LS_START_BEGINNING;
  } else if (!strcmp(text, "end")) {
    s.kind = LS_START_END;
  } else if (!strncmp(text, "time:", 5)) {
    s.kind = LS_START_TIMESTAMP;
    LS_FORWARD_IF_ERROR(parse_i64("start time (ms)", text + 5, 0, INT64_MAX, &s.value));
  } else {
    const char *const digits = !strncmp(text, "offset:", 7) ? text + 7 : text;
    ls_err_t const err = parse_i64("start offset", digits, 0, INT64_MAX, &s.value);
    LS_RETURN_IF(err != LS_OK, err,
                 "start position '%s' is not beginning, end, an offset (N or offset:N) "
                 "or a time in ms (time:MS)",
                 text);
  }
  *out = s;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* librdkafka properties                                                     */

/* Applies one "key=value" to a librdkafka conf (kafka_util's checks). */
static ls_err_t kafka_apply_one(rd_kafka_conf_t *kconf, const char *setting) {
  return kafka_conf_apply(kconf, &setting, 1);
}

/* Trims ASCII blanks from both ends of s[0..*n) in place; returns the start. */
static char *trim(char *s, size_t *n) {
  while (*n > 0 &&
         (s[*n - 1] == ' ' || s[*n - 1] == '\t' || s[*n - 1] == '\r' || s[*n - 1] == '\n'))
    (*n)--;
  while (*n > 0 && (*s == ' ' || *s == '\t')) {
    s++;
    (*n)--;
  }
  s[*n] = '\0';
  return s;
}

/* Turns one line of a --kafka-config file into "key=value" in *setting
 * (NULL for a blank or comment line), checked against librdkafka. */
static ls_err_t kafka_config_line(const char *path, int line_no, char *line, rd_kafka_conf_t *check,
                                  char **setting) {
  *setting = NULL;
  size_t n = strlen(line);
  char *const text = trim(line, &n);
  if (n == 0 || text[0] == '#') return LS_OK;
  char *const eq = strchr(text, '=');
  LS_RETURN_IF(eq == NULL || eq == text, LS_ERR_INVALID_ARG,
               "%s:%d: expected key=value, got '%.80s'", path, line_no, text);
  size_t key_n = (size_t)(eq - text), value_n = n - key_n - 1;
  char *const key = trim(text, &key_n);
  char *const value = trim(eq + 1, &value_n);
  LS_RETURN_IF(key_n == 0, LS_ERR_INVALID_ARG, "%s:%d: expected key=value, the key is empty", path,
               line_no);
  size_t const size = key_n + value_n + 2;
  char *const kv = malloc(size);
  LS_RETURN_IF(kv == NULL, LS_ERR_NOMEM, "%s:%d: out of memory", path, line_no);
  snprintf(kv, size, "%s=%s", key, value);
  ls_err_t const err = kafka_apply_one(check, kv);
  if (err != LS_OK) {
    free(kv);
    char detail[768];
    snprintf(detail, sizeof detail, "%s", ls_last_error());
    return ls_error_set(err, "%s:%d: %s", path, line_no, detail);
  }
  *setting = kv;
  return LS_OK;
}

/* Appends setting to (*list)[*n], growing it. Takes ownership of setting. */
static ls_err_t settings_append(char ***list, int *n, int *cap, char *setting) {
  if (*n == *cap) {
    int const grown_cap = *cap ? *cap * 2 : 16;
    char **const grown = realloc(*list, (size_t)grown_cap * sizeof *grown);
    if (grown == NULL) {
      free(setting);
      return ls_error_set(LS_ERR_NOMEM, "out of memory for %d Kafka settings", grown_cap);
    }
    *list = grown;
    *cap = grown_cap;
  }
  (*list)[(*n)++] = setting;
  return LS_OK;
}

ls_err_t ls_kafka_config_read(const char *path, char ***settings, int *n) {
  LS_RETURN_IF(path == NULL || settings == NULL || n == NULL, LS_ERR_INVALID_ARG,
               "ls_kafka_config_read: path, settings and n must not be NULL");
  *settings = NULL;
  *n = 0;
  FILE *const f = fopen(path, "r");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot open Kafka config file %s: %s", path, strerror(errno));
  rd_kafka_conf_t *const check = rd_kafka_conf_new();
  char **list = NULL;
  int count = 0, cap = 0, line_no = 0;
  char *line = NULL;
  size_t line_cap = 0;
  ls_err_t err = LS_OK;
  while (err == LS_OK && getline(&line, &line_cap, f) >= 0) {
    char *setting = NULL;
    err = kafka_config_line(path, ++line_no, line, check, &setting);
    if (err == LS_OK && setting != NULL) err = settings_append(&list, &count, &cap, setting);
  }
  if (err == LS_OK && ferror(f))
    err = ls_error_set(LS_ERR_IO, "cannot read Kafka config file %s after line %d", path, line_no);
  free(line);
  fclose(f);
  rd_kafka_conf_destroy(check);
  if (err != LS_OK) {
    ls_kafka_config_free(list, count);
    return err;
  }
  *settings = list;
  *n = count;
  return LS_OK;
}

void ls_kafka_config_free(char **settings, int n) {
  if (settings == NULL) return;
  for (int i = 0; i < n; i++)
    free(settings[i]);
  free(settings);
}

/* ------------------------------------------------------------------------ */
/* The configuration object                                                  */

/* Consumer defaults that a user's property replaces. group.id is required by
 * rd_kafka_assign but used for nothing else; auto.offset.reset=error makes
 * records deleted before they were read an error instead of a silent skip.
 * queued.min.messages: with assigned partitions sharing one consumer queue,
 * librdkafka 2.0 stops fetching every partition once that queue holds this
 * many messages and resumes only on a later timer tick, so its default
 * (100000) leaves a fast consumer idle for ~0.5 s at a time; memory stays
 * bounded by queued.max.messages.kbytes. */
static const struct {
  const char *key, *setting;
} overridable[] = {
    {"group.id", "group.id=lstream-ingest"},
    {"auto.offset.reset", "auto.offset.reset=error"},
    {"queued.min.messages", "queued.min.messages=1000000"},
};
enum { N_OVERRIDABLE = sizeof overridable / sizeof overridable[0] };

ls_err_t ls_ingest_conf_new(ls_ingest_conf_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_new: out is NULL");
  ls_ingest_conf_t *const c = calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "ls_ingest_conf_new: out of memory");
  c->kafka = rd_kafka_conf_new();
  c->format = LS_FORMAT_F32;
  c->features = 1;
  c->window = 32;
  c->queue_windows = 256;
  c->buffer_records = 4194304;
  c->warn_interval_ms = 5000;
  c->start_timeout_ms = 10000;
  c->commit_timeout_ms = 5000;
  *out = c;
  return LS_OK;
}

void ls_ingest_conf_destroy(ls_ingest_conf_t *conf) {
  if (conf == NULL) return;
  rd_kafka_conf_destroy(conf->kafka);
  free(conf->topic);
  free(conf->dead_letter_topic);
  free(conf->partitions);
  free(conf->skips);
  free(conf->skip_keys);
  free(conf);
}

ls_err_t ls_ingest_conf_set(ls_ingest_conf_t *conf, const char *key, const char *value) {
  LS_RETURN_IF(conf == NULL || key == NULL || value == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set: conf, key and value must not be NULL");
  if (!strcmp(key, "topic")) return set_string(key, value, &conf->topic);
  if (!strcmp(key, "dead.letter.topic")) return set_string(key, value, &conf->dead_letter_topic);
  if (!strcmp(key, "format")) return ls_format_parse(value, &conf->format);
  if (!strcmp(key, "features")) return parse_int(key, value, 1, LS_FEATURES_MAX, &conf->features);
  if (!strcmp(key, "window")) return parse_int(key, value, 1, LS_WINDOW_MAX, &conf->window);
  if (!strcmp(key, "queue.windows"))
    return parse_i64(key, value, 1, INT32_MAX, &conf->queue_windows);
  if (!strcmp(key, "buffer.records"))
    return parse_i64(key, value, 2, INT64_MAX / 4, &conf->buffer_records);
  if (!strcmp(key, "stop")) return parse_choice(key, value, "end", "never", &conf->stop_at_end);
  if (!strcmp(key, "flush")) return parse_choice(key, value, "true", "false", &conf->flush);
  if (!strcmp(key, "warn.interval.ms"))
    return parse_int(key, value, 0, 3600 * 1000, &conf->warn_interval_ms);
  if (!strcmp(key, "start.timeout.ms"))
    return parse_int(key, value, 1, 3600 * 1000, &conf->start_timeout_ms);
  if (!strcmp(key, "commit.timeout.ms"))
    return parse_int(key, value, 1, 3600 * 1000, &conf->commit_timeout_ms);
  return ls_error_set(LS_ERR_UNKNOWN_KEY,
                      "unknown ingest key '%s' (librdkafka properties go through "
                      "ls_ingest_conf_set_kafka, -X on the command line)",
                      key);
}

ls_err_t ls_ingest_conf_set_kafka(ls_ingest_conf_t *conf, const char *setting) {
  LS_RETURN_IF(conf == NULL || setting == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set_kafka: conf and setting must not be NULL");
  LS_FORWARD_IF_ERROR(kafka_apply_one(conf->kafka, setting));
  for (int i = 0; i < N_OVERRIDABLE; i++) {
    size_t const n = strlen(overridable[i].key);
    if (!strncmp(setting, overridable[i].key, n) && setting[n] == '=')
      conf->kafka_user_set |= 1u << i;
  }
  return LS_OK;
}

ls_err_t ls_ingest_conf_add_partition(ls_ingest_conf_t *conf, int32_t partition, ls_start_t start) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_add_partition: conf is NULL");
  LS_RETURN_IF(partition < 0, LS_ERR_INVALID_ARG, "partition %d is negative", (int)partition);
  LS_RETURN_IF(start.kind < LS_START_OFFSET || start.kind > LS_START_TIMESTAMP, LS_ERR_INVALID_ARG,
               "partition %d: unknown start kind %d", (int)partition, (int)start.kind);
  LS_RETURN_IF((start.kind == LS_START_OFFSET || start.kind == LS_START_TIMESTAMP) &&
                   start.value < 0,
               LS_ERR_INVALID_ARG, "partition %d: start %s %lld is negative", (int)partition,
               start.kind == LS_START_OFFSET ? "offset" : "time", (long long)start.value);
  for (int i = 0; i < conf->n_partitions; i++)
    LS_RETURN_IF(conf->partitions[i].id == partition, LS_ERR_INVALID_ARG,
                 "partition %d was added twice", (int)partition);
  if (conf->n_partitions == conf->partitions_cap) {
    int const cap = conf->partitions_cap ? conf->partitions_cap * 2 : 16;
    ingest_partition_t *const grown = realloc(conf->partitions, (size_t)cap * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "out of memory for %d partitions", cap);
    conf->partitions = grown;
    conf->partitions_cap = cap;
  }
  conf->partitions[conf->n_partitions++] = (ingest_partition_t){partition, start};
  return LS_OK;
}

/* Grows *buf (*cap elements of size bytes) to hold at least need. */
static ls_err_t grow(void **buf, size_t *cap, size_t need, size_t size, const char *what) {
  if (need <= *cap) return LS_OK;
  size_t new_cap = *cap ? *cap : 64;
  while (new_cap < need)
    new_cap *= 2;
  void *const grown = realloc(*buf, new_cap * size);
  LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "out of memory for %zu %s", new_cap, what);
  *buf = grown;
  *cap = new_cap;
  return LS_OK;
}

ls_err_t ls_ingest_conf_skip_series(ls_ingest_conf_t *conf, const void *key, size_t key_len,
                                    int32_t partition, int64_t below, int64_t next_index) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_skip_series: conf is NULL");
  LS_FORWARD_IF_ERROR(window_skip_check(key, key_len, partition, below, next_index));
  LS_FORWARD_IF_ERROR(grow((void **)&conf->skips, &conf->skips_cap, conf->n_skips + 1,
                           sizeof *conf->skips, "skip rules"));
  LS_FORWARD_IF_ERROR(grow((void **)&conf->skip_keys, &conf->keys_cap, conf->keys_len + key_len, 1,
                           "bytes of skip rule keys"));
  memcpy(conf->skip_keys + conf->keys_len, key, key_len);
  conf->skips[conf->n_skips++] =
      (ingest_skip_t){partition, below, next_index, conf->keys_len, key_len};
  conf->keys_len += key_len;
  return LS_OK;
}

ls_err_t ls_ingest_conf_set_warn_cb(ls_ingest_conf_t *conf, ls_ingest_warn_cb cb, void *opaque) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_set_warn_cb: conf is NULL");
  conf->warn_cb = cb;
  conf->warn_opaque = opaque;
  return LS_OK;
}

ls_err_t ingest_conf_kafka(const ls_ingest_conf_t *conf, int consumer, rd_kafka_conf_t **out) {
  rd_kafka_conf_t *const k = rd_kafka_conf_dup(conf->kafka);
  LS_RETURN_IF(k == NULL, LS_ERR_NOMEM, "out of memory for a Kafka configuration");
  if (consumer) {
    /* What the consumer relies on: it commits nothing and finds the end of
     * each partition. */
    static const char *const fixed[] = {
        "enable.auto.commit=false", "enable.auto.offset.store=false", "enable.partition.eof=true"};
    ls_err_t err = kafka_conf_apply(k, fixed, 3);
    for (int i = 0; i < N_OVERRIDABLE && err == LS_OK; i++)
      if (!(conf->kafka_user_set & (1u << i))) err = kafka_apply_one(k, overridable[i].setting);
    if (err != LS_OK) {
      rd_kafka_conf_destroy(k);
      return err;
    }
  }
  *out = k;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                  */

static void log_to_store(const rd_kafka_t *rk, int level, const char *fac, const char *msg) {
  kafka_log_store(rd_kafka_opaque(rk), level, fac, msg);
}

ls_err_t ls_ingest_topic_partitions(const ls_ingest_conf_t *conf, int32_t *count) {
  LS_RETURN_IF(conf == NULL || count == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_topic_partitions: conf and count must not be NULL");
  LS_RETURN_IF(conf->topic == NULL, LS_ERR_INVALID_ARG,
               "no topic set (ls_ingest_conf_set(conf, \"topic\", NAME))");
  rd_kafka_conf_t *k;
  LS_FORWARD_IF_ERROR(ingest_conf_kafka(conf, 1, &k));
  kafka_log_t log;
  kafka_log_init(&log);
  rd_kafka_conf_set_opaque(k, &log);
  rd_kafka_conf_set_log_cb(k, log_to_store);
  char errstr[512];
  rd_kafka_t *const rk = rd_kafka_new(RD_KAFKA_CONSUMER, k, errstr, sizeof errstr);
  if (rk == NULL) {
    rd_kafka_conf_destroy(k);
    kafka_log_destroy(&log);
    return ls_error_set(LS_ERR_KAFKA, "cannot create a Kafka client: %s", errstr);
  }
  rd_kafka_topic_t *const rkt = rd_kafka_topic_new(rk, conf->topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t kerr = rkt != NULL
                                 ? rd_kafka_metadata(rk, 0, rkt, &md, conf->start_timeout_ms)
                                 : rd_kafka_last_error();
  if (kerr == RD_KAFKA_RESP_ERR_NO_ERROR)
    kerr = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  int32_t const n = kerr == RD_KAFKA_RESP_ERR_NO_ERROR ? md->topics[0].partition_cnt : 0;
  char last[512];
  kafka_log_get(&log, last, sizeof last);
  if (md != NULL) rd_kafka_metadata_destroy(md);
  if (rkt != NULL) rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  kafka_log_destroy(&log);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot read the metadata of topic '%s': %s (check bootstrap.servers and the "
               "topic name; librdkafka's last warning: %s)",
               conf->topic, rd_kafka_err2str(kerr), last);
  LS_RETURN_IF(n < 1, LS_ERR_KAFKA, "topic '%s' has no partitions", conf->topic);
  *count = n;
  return LS_OK;
}
