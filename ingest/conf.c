/*
 * Consumer configuration (include/lstream/ingest.h, "Consumer"): lstream's
 * keys, librdkafka properties passed through (-X key=value and
 * --kafka-config FILE), partitions with their start positions, and the
 * topic's partition count from the cluster's metadata.
 */
#include "conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/kvfile.h"
#include "base/value.h"
#include "kafka_util.h"
#include "window.h"

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */

static const char *const stops[] = {"never", "end", NULL};
static const char *const bools[] = {"false", "true", NULL};
static const char *const recreated[] = {"refuse", "restart", NULL};

/* The keys of ls_ingest_conf_set over ls_ingest_settings_t, with their
 * defaults: spelled as the trainer's options that set them (train/conf.c;
 * "queue.windows" and "queue-windows" are read as queue_windows), and the
 * shared ones with the trainer's defaults, so that a consumer made here and
 * one a trainer makes read alike. */
#define F(field) offsetof(ls_ingest_settings_t, field)
#define KEY(name, field, value, def)                                                               \
  { name, NULL, F(field), value, def, 0 }
static const base_key_t keys[] = {
    KEY("topic", topic, BASE_V_STR(0), NULL),
    KEY("dead_letter_topic", dead_letter_topic, BASE_V_STR(0), NULL),
    KEY("format", format, BASE_V_CHOICE(ls_format_names), "f32"),
    KEY("features", features, BASE_V_INT(1, LS_FEATURES_MAX), "1"),
    KEY("fields", fields, BASE_V_STR(0), NULL),
    KEY("key_field", key_field, BASE_V_STR(0), NULL),
    KEY("time_field", time_field, BASE_V_STR(0), NULL),
    KEY("time_unit", time_unit, BASE_V_CHOICE(ls_time_unit_names), "auto"),
    KEY("avro_schema", avro_schema, BASE_V_STR(0), NULL),
    KEY("avro_schema_id", avro_schema_id, BASE_V_STR(0), "none"),
    KEY("window", window, BASE_V_INT(1, LS_WINDOW_MAX), "16"),
    KEY("horizon", horizon, BASE_V_INT(1, LS_WINDOW_MAX), "1"),
    KEY("queue_windows", queue_windows, BASE_V_I64(1, INT32_MAX), "4096"),
    KEY("buffer_records", buffer_records, BASE_V_I64(2, (double)(INT64_MAX / 4)), "16777216"),
    KEY("stop", stop_at_end, BASE_V_CHOICE(stops), "never"),
    KEY("flush", flush, BASE_V_CHOICE(bools), "false"),
    KEY("max_abs", max_abs, BASE_V_DBL(1e-30, 3.5e38), "1e18"),
    KEY("reset_gap_ms", reset_gap_ms, BASE_V_I64(0, (double)(INT64_MAX / 4)), "0"),
    KEY("max_future_ms", max_future_ms, BASE_V_I64(0, (double)(INT64_MAX / 4)), "3600000"),
    KEY("late_ms", late_ms, BASE_V_I64(0, (double)(INT64_MAX / 4)), "60000"),
    KEY("series_idle_ms", series_idle_ms, BASE_V_I64(0, (double)(INT64_MAX / 4)), "0"),
    KEY("max_series", max_series, BASE_V_I64(0, (double)(INT64_MAX / 4)), "0"),
    KEY("tap", tap, BASE_V_CHOICE(bools), "false"),
    KEY("warn_interval_ms", warn_interval_ms, BASE_V_INT(0, 3600 * 1000), "5000"),
    KEY("start_timeout_ms", start_timeout_ms, BASE_V_INT(1, 3600 * 1000), "10000"),
    KEY("commit_timeout_ms", commit_timeout_ms, BASE_V_INT(1, 3600 * 1000), "5000"),
    KEY("watch_interval_ms", watch_interval_ms, BASE_V_INT(0, 3600 * 1000), "1000"),
    KEY("topic_recreated", topic_recreated, BASE_V_CHOICE(recreated), "refuse"),
};
#undef KEY
#undef F
enum { N_KEYS = sizeof keys / sizeof keys[0] };

void ls_ingest_settings_init(ls_ingest_settings_t *s) {
  if (s == NULL) return;
  memset(s, 0, sizeof *s);
  /* The table's defaults (checked by the tests: ingest test_conf). The
   * caller owns the settings' strings (ls_ingest_conf_set_settings copies
   * them): a text default is pointed to, never allocated here. */
  for (int i = 0; i < N_KEYS; i++) {
    if (keys[i].def == NULL) continue;
    if (keys[i].value.kind == BASE_STR && keys[i].value.size == 0)
      *(const char **)((char *)s + keys[i].offset) = keys[i].def;
    else
      (void)base_key_set(&keys[i], s, keys[i].def);
  }
}

/* The settings' strings, each malloc'ed in a conf's copy. */
static const char **strings_of(ls_ingest_settings_t *s, int i) {
  const char **const all[] = {&s->topic,         &s->dead_letter_topic, &s->fields,
                              &s->key_field,     &s->time_field,        &s->avro_schema,
                              &s->avro_schema_id};
  return i < (int)(sizeof all / sizeof all[0]) ? all[i] : NULL;
}

void ingest_settings_free(ls_ingest_settings_t *s) {
  const char **str;
  for (int i = 0; (str = strings_of(s, i)) != NULL; i++) {
    free((char *)*str);
    *str = NULL;
  }
}

ls_err_t ingest_settings_copy(ls_ingest_settings_t *dst, const ls_ingest_settings_t *src) {
  *dst = *src;
  const char **str;
  int nomem = 0;
  for (int i = 0; (str = strings_of(dst, i)) != NULL; i++) {
    const char *const from = *str; /* src's, copied with *dst */
    *str = from != NULL && from[0] ? strdup(from) : NULL;
    nomem |= from != NULL && from[0] && *str == NULL;
  }
  if (nomem) {
    ingest_settings_free(dst);
    return ls_error_set(LS_ERR_NOMEM, "out of memory for the ingest settings");
  }
  return LS_OK;
}

ls_err_t ingest_avro_schema_id(const char *text, int64_t *id) {
  static const base_value_t ids = BASE_V_I64(0, INT32_MAX);
  if (text == NULL || !strcmp(text, "none")) {
    *id = LS_AVRO_PLAIN;
    return LS_OK;
  }
  if (!strcmp(text, "any")) {
    *id = LS_AVRO_ANY_ID;
    return LS_OK;
  }
  LS_RETURN_IF(base_value_parse(&ids, text, id) != 0, LS_ERR_INVALID_ARG,
               "avro_schema_id '%s': expected none (plain Avro binary), any (Confluent's "
               "framing, any schema id) or a schema id 0..2147483647 (that framing, that id)",
               text);
  return LS_OK;
}

/* An offset, or a time in ms: a whole non-negative integer. */
static const base_value_t offset_value = BASE_V_I64(0, (double)INT64_MAX);

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
    LS_RETURN_IF(base_value_parse(&offset_value, text + 5, &s.value) != 0, LS_ERR_INVALID_ARG,
                 "start time '%s' is not a time in ms since the epoch (time:MS)", text);
  } else {
    const char *const digits = !strncmp(text, "offset:", 7) ? text + 7 : text;
    LS_RETURN_IF(base_value_parse(&offset_value, digits, &s.value) != 0, LS_ERR_INVALID_ARG,
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

/* What ls_kafka_config_read collects: the settings, checked against
 * librdkafka as they are read. */
typedef struct kafka_file_s {
  rd_kafka_conf_t *check;
  char **list;
  int n, cap;
} kafka_file_t;

/* One key=value of a --kafka-config file: checked, appended. */
static ls_err_t kafka_file_pair(void *opaque, const char *key, const char *value) {
  kafka_file_t *const f = opaque;
  if (f->n == f->cap) {
    int const cap = f->cap ? f->cap * 2 : 16;
    char **const grown = realloc(f->list, (size_t)cap * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "out of memory for %d Kafka settings", cap);
    f->list = grown;
    f->cap = cap;
  }
  size_t const size = strlen(key) + strlen(value) + 2;
  char *const kv = malloc(size);
  LS_RETURN_IF(kv == NULL, LS_ERR_NOMEM, "out of memory for a Kafka setting");
  snprintf(kv, size, "%s=%s", key, value);
  ls_err_t const err = kafka_apply_one(f->check, kv);
  if (err != LS_OK) {
    free(kv);
    return err;
  }
  f->list[f->n++] = kv;
  return LS_OK;
}

ls_err_t ls_kafka_config_read(const char *path, char ***settings, int *n) {
  LS_RETURN_IF(path == NULL || settings == NULL || n == NULL, LS_ERR_INVALID_ARG,
               "ls_kafka_config_read: path, settings and n must not be NULL");
  *settings = NULL;
  *n = 0;
  kafka_file_t f = {rd_kafka_conf_new(), NULL, 0, 0};
  ls_err_t const err = base_kv_read(path, "Kafka config file", kafka_file_pair, &f);
  rd_kafka_conf_destroy(f.check);
  if (err != LS_OK) {
    ls_kafka_config_free(f.list, f.n);
    return err;
  }
  *settings = f.list;
  *n = f.n;
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
 * rd_kafka_assign and names the group offsets are committed to (no group is
 * joined); session.timeout.ms (set to commit.timeout.ms) then serves one
 * purpose: it is how long librdkafka keeps a commit waiting for a group
 * coordinator, and destroying a consumer waits for its commits in flight (a
 * coordinator that is down held an exit up for its default, 45 s);
 * auto.offset.reset=error makes
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
    {"session.timeout.ms", NULL}, /* commit.timeout.ms */
};
enum { N_OVERRIDABLE = sizeof overridable / sizeof overridable[0] };

ls_err_t ls_ingest_conf_new(ls_ingest_conf_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_new: out is NULL");
  ls_ingest_conf_t *const c = calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "ls_ingest_conf_new: out of memory");
  c->kafka = rd_kafka_conf_new();
  ls_ingest_settings_t d; /* the defaults, their strings the table's */
  ls_ingest_settings_init(&d);
  ls_err_t const err = ingest_settings_copy(&c->s, &d); /* the conf owns its copy */
  if (err != LS_OK) {
    rd_kafka_conf_destroy(c->kafka);
    free(c);
    return err;
  }
  *out = c;
  return LS_OK;
}

void ls_ingest_conf_destroy(ls_ingest_conf_t *conf) {
  if (conf == NULL) return;
  rd_kafka_conf_destroy(conf->kafka);
  ingest_settings_free(&conf->s);
  free(conf->partitions);
  free(conf->restores), free(conf->keys);
  free(conf->row_offsets), free(conf->row_times), free(conf->row_x);
  free(conf);
}

ls_err_t ls_ingest_conf_set(ls_ingest_conf_t *conf, const char *key, const char *value) {
  LS_RETURN_IF(conf == NULL || key == NULL || value == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set: conf, key and value must not be NULL");
  const base_key_t *const k = base_keys_find(keys, N_KEYS, key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY,
               "unknown ingest key '%s' (librdkafka properties go through "
               "ls_ingest_conf_set_kafka, -X on the command line)",
               key);
  return base_key_set(k, &conf->s, value);
}

ls_err_t ls_ingest_conf_set_settings(ls_ingest_conf_t *conf, const ls_ingest_settings_t *s) {
  LS_RETURN_IF(conf == NULL || s == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set_settings: conf and s must not be NULL");
  for (int i = 0; i < N_KEYS; i++)
    LS_FORWARD_IF_ERROR(base_key_check(&keys[i], s));
  ls_ingest_settings_t copy;
  LS_FORWARD_IF_ERROR(ingest_settings_copy(&copy, s));
  ingest_settings_free(&conf->s);
  conf->s = copy;
  return LS_OK;
}

ls_err_t ls_ingest_conf_get_settings(const ls_ingest_conf_t *conf, ls_ingest_settings_t *out) {
  LS_RETURN_IF(conf == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_get_settings: conf and out must not be NULL");
  *out = conf->s;
  return LS_OK;
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
  conf->partitions[conf->n_partitions++] = (ingest_partition_t){partition, start, 0, {-1, -1, 0}};
  return LS_OK;
}

ls_err_t ls_ingest_conf_set_growth(ls_ingest_conf_t *conf, int32_t known, int world, int rank) {
  LS_RETURN_IF(conf == NULL || known < 0 || world < 0 || (world > 0 && (rank < 0 || rank >= world)),
               LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set_growth: conf must not be NULL, known (%d) >= 0, world (%d) >= "
               "0 and rank (%d) in [0, world)",
               (int)known, world, rank);
  conf->grow_known = known;
  conf->grow_world = world;
  conf->grow_rank = rank;
  return LS_OK;
}

ls_err_t ls_ingest_conf_set_arrivals(ls_ingest_conf_t *conf, int on) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "ls_ingest_conf_set_arrivals: conf is NULL");
  conf->arrivals = on != 0;
  return LS_OK;
}

ls_err_t ls_ingest_conf_set_mark(ls_ingest_conf_t *conf, int32_t partition,
                                 const ls_ingest_mark_t *mark) {
  LS_RETURN_IF(conf == NULL || mark == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_set_mark: conf and mark must not be NULL");
  LS_RETURN_IF(mark->offset < -1 || mark->time < -1, LS_ERR_INVALID_ARG,
               "partition %d: a mark's offset (%lld) and time (%lld) must be -1 or more",
               (int)partition, (long long)mark->offset, (long long)mark->time);
  for (int i = 0; i < conf->n_partitions; i++) {
    ingest_partition_t *const p = &conf->partitions[i];
    if (p->id != partition) continue;
    LS_RETURN_IF(p->start.kind != LS_START_OFFSET || mark->offset >= p->start.value,
                 LS_ERR_INVALID_ARG,
                 "partition %d: a mark (offset %lld) needs a start offset past it (the offset "
                 "after the record it marks)",
                 (int)partition, (long long)mark->offset);
    p->marked = 1;
    p->mark = *mark;
    return LS_OK;
  }
  return ls_error_set(LS_ERR_INVALID_ARG,
                      "ls_ingest_conf_set_mark: partition %d was not added "
                      "(ls_ingest_conf_add_partition first)",
                      (int)partition);
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

ls_err_t ls_ingest_conf_restore(ls_ingest_conf_t *conf, const ls_inflight_t *in) {
  LS_RETURN_IF(conf == NULL || in == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_conf_restore: conf and series must not be NULL");
  LS_FORWARD_IF_ERROR(window_inflight_check(in, "ls_ingest_conf_restore"));
  if (conf->n_restores == 0) conf->restore_F = conf->s.features;
  size_t const F = (size_t)conf->restore_F, rows = (size_t)in->rows, need = conf->n_rows + rows;
  LS_FORWARD_IF_ERROR(grow((void **)&conf->restores, &conf->restores_cap, conf->n_restores + 1,
                           sizeof *conf->restores, "series to restore"));
  LS_FORWARD_IF_ERROR(grow((void **)&conf->keys, &conf->keys_cap, conf->keys_len + in->key_len, 1,
                           "bytes of keys to restore"));
  size_t cap = conf->rows_cap, x_cap = conf->x_cap;
  LS_FORWARD_IF_ERROR(grow((void **)&conf->row_offsets, &cap, need, sizeof(int64_t), "records"));
  cap = conf->rows_cap;
  LS_FORWARD_IF_ERROR(grow((void **)&conf->row_times, &cap, need, sizeof(int64_t), "records"));
  LS_FORWARD_IF_ERROR(grow((void **)&conf->row_x, &x_cap, need * F, sizeof(float), "values"));
  conf->rows_cap = cap, conf->x_cap = x_cap;
  memcpy(conf->keys + conf->keys_len, in->key, in->key_len);
  memcpy(conf->row_offsets + conf->n_rows, in->offsets, rows * sizeof(int64_t));
  memcpy(conf->row_times + conf->n_rows, in->times, rows * sizeof(int64_t));
  memcpy(conf->row_x + conf->n_rows * F, in->x, rows * F * sizeof(float));
  ingest_restore_t *const r = &conf->restores[conf->n_restores++];
  r->s = *in;
  r->s.key = NULL, r->s.offsets = r->s.times = NULL, r->s.x = NULL;
  r->key_at = conf->keys_len, r->row_at = conf->n_rows;
  conf->keys_len += in->key_len;
  conf->n_rows = need;
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
    char session[64];
    snprintf(session, sizeof session, "session.timeout.ms=%d", conf->s.commit_timeout_ms);
    for (int i = 0; i < N_OVERRIDABLE && err == LS_OK; i++)
      if (!(conf->kafka_user_set & (1u << i)))
        err = kafka_apply_one(k, overridable[i].setting ? overridable[i].setting : session);
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

/* 1 when md lists topic. */
static int listed(const struct rd_kafka_metadata *md, const char *topic) {
  for (int i = 0; i < md->topic_cnt; i++)
    if (!strcmp(md->topics[i].topic, topic)) return 1;
  return 0;
}

ls_err_t ingest_topics_check(rd_kafka_t *rk, int timeout_ms, const char *topic, const char *what,
                             const char *dead_letters) {
  const struct rd_kafka_metadata *md = NULL;
  /* librdkafka asks one broker: one that is down answers at once with a
   * transport error, and the next request may go to another (a cluster
   * with a broker down still lists its topics). Until timeout_ms. */
  int64_t const until = base_now_ms() + timeout_ms;
  rd_kafka_resp_err_t kerr;
  for (;;) {
    int64_t const left = until - base_now_ms();
    kerr = rd_kafka_metadata(rk, 1, NULL, &md, left > 1 ? (int)left : 1);
    if (kerr == RD_KAFKA_RESP_ERR_NO_ERROR || base_now_ms() >= until ||
        (kerr != RD_KAFKA_RESP_ERR__TRANSPORT && kerr != RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN))
      break;
    struct timespec const pause = {0, 100 * 1000000L};
    nanosleep(&pause, NULL);
  }
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot read the metadata of topic '%s': listing the cluster's topics failed "
               "within %d ms: %s (is bootstrap.servers right, and a broker up?)",
               topic, timeout_ms, rd_kafka_err2str(kerr));
  const char *const missing = !listed(md, topic) ? topic
                              : dead_letters != NULL && dead_letters[0] && !listed(md, dead_letters)
                                  ? dead_letters
                                  : NULL;
  if (missing == NULL) {
    rd_kafka_metadata_destroy(md);
    return LS_OK;
  }
  char names[600] = "";
  size_t at = 0;
  int shown = 0;
  for (int i = 0; i < md->topic_cnt && at < sizeof names; i++) {
    const char *const name = md->topics[i].topic;
    if (name[0] == '_' && name[1] == '_') continue; /* Kafka's own */
    if (shown++ == 20) {
      at += (size_t)snprintf(names + at, sizeof names - at, ", ...");
      break;
    }
    at += (size_t)snprintf(names + at, sizeof names - at, "%s'%s'", at ? ", " : "", name);
  }
  rd_kafka_metadata_destroy(md);
  return ls_error_set(LS_ERR_KAFKA,
                      "%s '%s' does not exist; the cluster's topics: %s. lstream never "
                      "creates topics: check the name, or create it first",
                      missing == topic ? what : "the dead-letter topic", missing,
                      shown ? names : "none");
}

static void log_to_store(const rd_kafka_t *rk, int level, const char *fac, const char *msg) {
  kafka_log_store(rd_kafka_opaque(rk), level, fac, msg);
}

ls_err_t ls_ingest_topic_partitions(const ls_ingest_conf_t *conf, int32_t *count) {
  LS_RETURN_IF(conf == NULL || count == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_topic_partitions: conf and count must not be NULL");
  LS_RETURN_IF(conf->s.topic == NULL, LS_ERR_INVALID_ARG,
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
  /* Every topic first, which creates none (asking for one by name may, on a
   * broker that creates topics on demand): lstream never creates a topic. */
  ls_err_t err = ingest_topics_check(rk, conf->s.start_timeout_ms, conf->s.topic, "the topic",
                                     conf->s.dead_letter_topic);
  if (err != LS_OK) {
    rd_kafka_destroy(rk);
    kafka_log_destroy(&log);
    return err;
  }
  rd_kafka_topic_t *const rkt = rd_kafka_topic_new(rk, conf->s.topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t kerr = rkt != NULL
                                 ? rd_kafka_metadata(rk, 0, rkt, &md, conf->s.start_timeout_ms)
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
               conf->s.topic, rd_kafka_err2str(kerr), last);
  LS_RETURN_IF(n < 1, LS_ERR_KAFKA, "topic '%s' has no partitions", conf->s.topic);
  *count = n;
  return LS_OK;
}
