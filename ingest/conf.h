/*
 * The consumer's configuration (internal to ingest/): what
 * ls_ingest_conf_set and friends fill in, and what ls_ingest_new copies.
 */
#ifndef LSTREAM_INGEST_CONF_H
#define LSTREAM_INGEST_CONF_H

#include <librdkafka/rdkafka.h>

#include "lstream/ingest.h"

typedef struct ingest_partition_s {
  int32_t id;
  ls_start_t start;
  int marked;            /* resumed: a mark set (ls_ingest_conf_set_mark) */
  ls_ingest_mark_t mark; /* the record the start follows; offset -1 none */
} ingest_partition_t;

/* A series in flight to restore (ls_ingest_conf_restore), its pointers
 * left NULL: its key is bytes [key_at, key_at + key_len) of keys, its rows
 * [row_at, row_at + rows) of the row arrays. */
typedef struct ingest_restore_s {
  ls_inflight_t s;
  size_t key_at, row_at;
} ingest_restore_t;

struct ls_ingest_conf_s {
  rd_kafka_conf_t *kafka;         /* the librdkafka properties set so far */
  unsigned kafka_user_set;        /* bit i: the user set overridable default i (conf.c) */
  ls_ingest_settings_t s;         /* its strings owned (malloc'ed) */
  ingest_partition_t *partitions; /* [n_partitions] */
  int n_partitions, partitions_cap;
  ingest_restore_t *restores; /* [n_restores] */
  size_t n_restores, restores_cap;
  char *keys; /* their keys, packed: [keys_len] */
  size_t keys_len, keys_cap;
  int64_t *row_offsets, *row_times; /* [n_rows] */
  float *row_x;                     /* [n_rows, restore_F] */
  size_t n_rows, rows_cap, x_cap;
  int restore_F; /* the features of the rows (settings' features when the first came) */
  ls_ingest_warn_cb warn_cb;
  void *warn_opaque;
  int32_t grow_known, grow_world, grow_rank; /* ls_ingest_conf_set_growth; world 0: off */
  int arrivals;                              /* ls_ingest_conf_set_arrivals */
};

/* Frees the strings of settings whose strings were malloc'ed, and clears
 * them. */
void ingest_settings_free(ls_ingest_settings_t *s);

/* Copies src into dst, its strings malloc'ed (free with
 * ingest_settings_free). */
ls_err_t ingest_settings_copy(ls_ingest_settings_t *dst, const ls_ingest_settings_t *src);

/* LS_OK when the cluster (rk's) has topic, and dead_letters unless NULL;
 * else an error naming the missing one (topic as `what`) and the topics
 * that exist. Asks for every topic: that creates none. */
ls_err_t ingest_topics_check(rd_kafka_t *rk, int timeout_ms, const char *topic, const char *what,
                             const char *dead_letters);

/* An avro_schema_id setting (none, any, N) as ls_record_spec_t's. */
ls_err_t ingest_avro_schema_id(const char *text, int64_t *id);

/* A copy of conf's librdkafka properties for a new client; for a consumer
 * with lstream's defaults added: group.id (unless set), no offset commits or
 * stores, partition EOF events. The caller owns *out. */
ls_err_t ingest_conf_kafka(const ls_ingest_conf_t *conf, int consumer, rd_kafka_conf_t **out);

#endif /* LSTREAM_INGEST_CONF_H */
