/*
 * Small helpers shared by ingest's librdkafka clients (internal): applying
 * "key=value" properties to a configuration, and keeping the last message
 * librdkafka logged so that errors can quote it (the library never prints).
 */
#ifndef LSTREAM_INGEST_KAFKA_UTIL_H
#define LSTREAM_INGEST_KAFKA_UTIL_H

#include <pthread.h>

#include <librdkafka/rdkafka.h>

#include "lstream/error.h"
#include "lstream/produce.h" /* ls_publisher_conf_t */

/* Sets each "key=value" of settings [n] on conf, in order, so that later ones
 * win. A malformed entry or one librdkafka refuses fails with
 * LS_ERR_INVALID_ARG (unknown property: LS_ERR_UNKNOWN_KEY) naming it. */
ls_err_t kafka_conf_apply(rd_kafka_conf_t *conf, const char *const *settings, int n);

/* Checks a topic name against Kafka's rule: 1..249 of [a-zA-Z0-9._-]. */
ls_err_t kafka_check_topic(const char *topic);

/* A new librdkafka configuration: bootstrap.servers=brokers, then extra
 * [n_extra], then settings [n_settings] (later ones win). */
ls_err_t kafka_conf_new(const char *brokers, const char *const *extra, int n_extra,
                        const char *const *settings, int n_settings, rd_kafka_conf_t **out);

/* Each partition 0..n-1 of topic's end for a consumer of isolation.level
 * `level` ("read_committed": its last stable offset, before the first
 * transaction still open; "read_uncommitted": its high watermark), into
 * end [n], through a consumer on brokers and settings [n_settings]. */
ls_err_t kafka_end_offsets(const char *brokers, const char *const *settings, int n_settings,
                           const char *topic, const char *level, int32_t n, int timeout_ms,
                           int64_t *end);

/* Ends, aborted, a transaction of producer rk's id left open on some
 * partitions with no marker: a broker restarted after an outage aborts a
 * transaction past its timeout before it knows those partitions' leaders,
 * and skips their markers ("Couldn't find leader endpoint ... can be
 * skipped"). read_committed consumers (the read-back: their end is the last
 * stable offset) stop before its records, and this producer id's next
 * commit there would commit them: forecasts twice. A partition whose last
 * stable offset is below its high watermark once init_transactions ended
 * what the coordinator knew open gets one empty record in a transaction
 * then aborted, whose marker (this producer id, a newer epoch) ends the old
 * records too. Another producer's transaction open there costs a record.
 * The check also follows the client's own aborts (the broker may have
 * aborted first). c: rk's brokers, settings, topic (rkt, n partitions),
 * transactional id and timeout (flush, abort). */
ls_err_t kafka_abort_left_open(rd_kafka_t *rk, rd_kafka_topic_t *rkt, const ls_publisher_conf_t *c,
                               int32_t n);

/* Asks for topic rkt's metadata until it lists partitions (each with a
 * leader, when `leaders`) or timeout_ms has passed (the cluster may still
 * be creating the topic: LEADER_NOT_AVAILABLE); *partitions receives their
 * count. Returns RD_KAFKA_RESP_ERR_NO_ERROR, or the last thing wrong. */
rd_kafka_resp_err_t kafka_wait_metadata(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int timeout_ms,
                                        int leaders, int32_t *partitions);

/* Whether a metadata reply is the one waited for: NO_ERROR, or what it lacks. */
typedef rd_kafka_resp_err_t (*kafka_metadata_ready_fn)(const struct rd_kafka_metadata *md,
                                                       void *opaque);

/* kafka_wait_metadata with the caller's test: asks until ready accepts a
 * reply or timeout_ms has passed (at least one request). *out receives the
 * last reply read, accepted or not (NULL if none came; free it with
 * rd_kafka_metadata_destroy). Returns NO_ERROR, or the last thing wrong. */
rd_kafka_resp_err_t kafka_wait_metadata_for(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int timeout_ms,
                                            kafka_metadata_ready_fn ready, void *opaque,
                                            const struct rd_kafka_metadata **out);

/* A partition's watermarks from its leader (rd_kafka_query_watermark_offsets),
 * trusted only when the leader answered both: NO_ERROR with
 * 0 <= *low <= *high, else the error. librdkafka passes an answer without
 * an offset (-1) through as a watermark with NO_ERROR; that is
 * RD_KAFKA_RESP_ERR__BAD_MSG here, never an empty partition. */
rd_kafka_resp_err_t kafka_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition,
                                     int timeout_ms, int64_t *low, int64_t *high);

/* The last warning or error librdkafka logged for one client handle.
 * librdkafka calls log callbacks from its own threads: access is locked. */
typedef struct kafka_log_s {
  pthread_mutex_t lock;
  char last[512]; /* "" until something is logged */
} kafka_log_t;

void kafka_log_init(kafka_log_t *log);
void kafka_log_destroy(kafka_log_t *log);

/* Keeps "FAC: message" if level is a warning or worse (syslog levels <= 4). */
void kafka_log_store(kafka_log_t *log, int level, const char *fac, const char *msg);

/* Copies the last message into buf (size bytes), "(none)" if there is none. */
void kafka_log_get(kafka_log_t *log, char *buf, size_t size);

#endif /* LSTREAM_INGEST_KAFKA_UTIL_H */
