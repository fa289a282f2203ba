/*
 * lstream producing: writing into Kafka (ingest/). The embedded broker
 * (librdkafka's mock cluster) for development and tests, the synthetic
 * feed and the producer that writes it or a CSV file into a topic, and
 * the exactly-once publisher of the trainer's forecasts with the
 * read-back a resumed run needs. Consuming is lstream/ingest.h.
 */
#ifndef LSTREAM_PRODUCE_H
#define LSTREAM_PRODUCE_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"
#include "lstream/ingest.h" /* ls_format_t */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Embedded broker                                                           */
/*
 * An in-process Kafka cluster for development and tests: librdkafka's mock
 * cluster (README, Architecture: "Kafka for development and tests"),
 * speaking the Kafka protocol on loopback TCP to any client (kcat
 * included). It keeps about 5 MiB per partition and drops the oldest
 * batches beyond that, serves fetches from one thread, has no SSL/SASL,
 * and forgets everything (records, committed offsets) when destroyed.
 * Topics a client asks for that were not created here are auto-created
 * with 4 partitions (librdkafka's default).
 */

typedef struct ls_broker_s ls_broker_t;

#define LS_BROKER_MAX_BROKERS    32
#define LS_BROKER_MAX_PARTITIONS 10000

/* Kafka protocol API keys, for ls_broker_push_request_errors. */
typedef enum ls_kafka_api_e {
  LS_KAFKA_API_PRODUCE = 0,
  LS_KAFKA_API_FETCH = 1,
  LS_KAFKA_API_LIST_OFFSETS = 2,
  LS_KAFKA_API_METADATA = 3,
  LS_KAFKA_API_OFFSET_COMMIT = 8,
  LS_KAFKA_API_OFFSET_FETCH = 9,
  LS_KAFKA_API_FIND_COORDINATOR = 10,
  LS_KAFKA_API_JOIN_GROUP = 11
} ls_kafka_api_t;

/* Starts a cluster of n_brokers brokers (ids 1..n_brokers). port 0: the
 * brokers' own random loopback ports are the bootstrap list. port P > 0:
 * clients bootstrap through 127.0.0.1:P, relayed to the first broker that is
 * up (librdkafka 2.0.2 cannot put a mock broker on a chosen port); they then
 * connect to the brokers' advertised random ports on 127.0.0.1, so P works
 * for clients on this machine only. Fails with LS_ERR_IO if P is taken. */
LS_API ls_err_t ls_broker_new(ls_broker_t **out, int n_brokers, int port);

/* Stops the cluster; every record in it is gone. Accepts NULL. */
LS_API void ls_broker_destroy(ls_broker_t *broker);

/* The bootstrap address list ("127.0.0.1:PORT[,...]"), valid until destroy. */
LS_API const char *ls_broker_bootstrap(const ls_broker_t *broker);

/* Creates topic (Kafka's naming rule: 1..249 of [a-zA-Z0-9._-]) with
 * partitions partitions, partition p led by broker 1 + p % n_brokers (the
 * same every run: the mock alone draws leaders at random). Replication
 * factor 1 is asked for, though the mock lists up to 3 brokers as replicas
 * (it does not replicate anyway). An existing name fails with LS_ERR_KAFKA.
 * Topics auto-created by a client's request keep the mock's random leaders. */
LS_API ls_err_t ls_broker_topic_create(ls_broker_t *broker, const char *topic, int partitions);

/* Takes broker broker_id down (its listener and connections close) or brings
 * it back up on the same port. Going down does NOT move leadership: clients
 * see the partitions it leads as unavailable until ls_broker_set_leader moves
 * them or the broker comes back. */
LS_API ls_err_t ls_broker_set_down(ls_broker_t *broker, int broker_id);
LS_API ls_err_t ls_broker_set_up(ls_broker_t *broker, int broker_id);

/* Makes broker_id (or -1: no leader) the leader of topic [partition]. A topic
 * unknown to the cluster is auto-created first (librdkafka's mock does so). */
LS_API ls_err_t ls_broker_set_leader(ls_broker_t *broker, const char *topic, int partition,
                                     int broker_id);

/* Makes the next n requests of API api (on any broker) fail with errors [n],
 * Kafka protocol error codes (e.g. 6 NOT_LEADER_OR_FOLLOWER, 7
 * REQUEST_TIMED_OUT, 10 MESSAGE_TOO_LARGE), in order; clear drops those not
 * yet used. librdkafka's mock ignores injected METADATA errors (its Metadata
 * handler never applies them): disturb metadata with ls_broker_set_down or a
 * leader of -1 instead. */
LS_API ls_err_t ls_broker_push_request_errors(ls_broker_t *broker, ls_kafka_api_t api, int n,
                                              const int *errors);
LS_API ls_err_t ls_broker_clear_request_errors(ls_broker_t *broker, ls_kafka_api_t api);

/* ------------------------------------------------------------------------ */
/* Synthetic feed                                                            */
/*
 * A reproducible market-like feed: N series (keys "SYM0000", "SYM0001", ...,
 * four digits at least), each with F features, one record per step. Every
 * random draw is a pure function of (seed, series, step, feature), computed
 * with splitmix64's mixer, so values do not depend on the order they are
 * asked for, nor on the machine. The noise is Gaussian with standard
 * deviation `noise` (variance s2 = noise^2). Generators, per feature f:
 *
 *   sine    x[k] = sin(2 pi k / P + phi) + noise * z[k], with period P in
 *           [16, 128) steps and phase phi in [0, 2 pi) drawn per (series, f).
 *   ar2     x[k] = ar1 x[k-1] + ar2 x[k-2] + noise * z[k], from x = 0. The
 *           coefficients must be stationary (|ar2| < 1, ar1 + ar2 < 1,
 *           ar2 - ar1 < 1); the defaults 1.2, -0.5 are (complex roots of
 *           modulus 0.71: a damped cycle of about 11 steps; stationary
 *           variance 3.7 s2).
 *   regime  a random walk x[k] = x[k-1] + d[r] + v[r] z[k] from x = 0, whose
 *           regime r (one per series) is calm (d = +0.01, v = noise) or
 *           turbulent (d = -0.02, v = 3 noise), starts at random and switches
 *           with probability 0.02 per step. Not stationary, by design.
 *
 * Event time of step k: start_ms + k * step_ms for every series.
 */

typedef enum ls_gen_e { LS_GEN_SINE = 0, LS_GEN_AR2 = 1, LS_GEN_REGIME = 2 } ls_gen_t;

/* Parses "sine", "ar2" or "regime". */
LS_API ls_err_t ls_gen_parse(const char *name, ls_gen_t *out);
/* "sine", "ar2" or "regime". */
LS_API const char *ls_gen2str(ls_gen_t gen);

#define LS_FEED_MAX_SERIES 10000000
/* Largest series * features: bounds the per-series state (8 bytes each). */
#define LS_FEED_MAX_CELLS (1 << 26)

typedef struct ls_feed_conf_s {
  int series;                 /* N, 1..LS_FEED_MAX_SERIES (default 16) */
  int features;               /* F, 1..LS_FEATURES_MAX (default 4) */
  int64_t records_per_series; /* K >= 1: steps ls_feed_produce sends (default 1000) */
  ls_gen_t generator;         /* default LS_GEN_SINE */
  double noise;               /* noise standard deviation >= 0 (default 0.1) */
  uint64_t seed;              /* default 1 */
  double ar1, ar2;            /* AR(2) coefficients (default 1.2, -0.5) */
  int64_t start_ms;           /* event time of step 0 (default 1704067200000,
                                 2024-01-01 UTC: fixed, for reproducibility; a
                                 real cluster's retention may delete records
                                 that old at once, so set it to now there) */
  int64_t step_ms;            /* event time between steps, >= 1 (default 1000) */
  double offset, scale;       /* values out are offset + scale x, rounded to float
                                 (the generators run on x): 0, 1 by default; scale != 0 */
} ls_feed_conf_t;

/* Fills conf with the defaults above. */
LS_API void ls_feed_conf_default(ls_feed_conf_t *conf);

typedef struct ls_feed_s ls_feed_t;

/* Checks conf (each bad field is named) and copies it. */
LS_API ls_err_t ls_feed_new(ls_feed_t **out, const ls_feed_conf_t *conf);
LS_API void ls_feed_destroy(ls_feed_t *feed); /* accepts NULL */

/* The feed's configuration, as given to ls_feed_new. */
LS_API const ls_feed_conf_t *ls_feed_conf(const ls_feed_t *feed);

/* The F values of series s at step k (any k >= 0) into out [F]; if mean is
 * not NULL, mean [F] receives their expectation given steps 0..k-1 (and the
 * hidden regime): the forecast of an ideal model, so that the mean of
 * (out - mean)^2 is the best achievable one-step error. Values are rounded to
 * float and the recursions run on the rounded values, exactly as they are
 * produced. sine is random access; ar2 and regime keep per-series state, so
 * asking each series for k, k+1, ... costs O(F) a step, and going back
 * replays that series from step 0. Not thread-safe (one feed per thread). */
LS_API ls_err_t ls_feed_value(ls_feed_t *feed, int s, int64_t k, float *out, float *mean);

/* Writes series s's key ("SYM0042") into buf (size bytes, NUL-terminated);
 * returns its length, or -1 if it does not fit. */
LS_API int ls_feed_key(int s, char *buf, size_t size);

/* The event time (ms) of step k. */
LS_API int64_t ls_feed_time(const ls_feed_t *feed, int64_t k);

/* ------------------------------------------------------------------------ */
/* Producing records                                                         */

/* A Kafka producer for one topic, tuned for throughput and order: lz4
 * compression, linger.ms=20 (fuller batches), a queue of 500,000 records,
 * idempotence (per-partition order and no duplicates across retries), and
 * the Java client's murmur2 partitioner (partitioner=murmur2_random), so
 * the same key always goes to the same partition, whichever client
 * produced it. */
typedef struct ls_producer_s ls_producer_t;

/* Connects to brokers ("host:port,...") and waits up to 10 s for topic's
 * metadata (a cluster that auto-creates topics creates it). settings [n] are
 * librdkafka "key=value" properties applied after lstream's defaults, so
 * they win. */
LS_API ls_err_t ls_producer_new(ls_producer_t **out, const char *brokers, const char *topic,
                                const char *const *settings, int n_settings);

/* Frees the producer; records not yet flushed are dropped. Accepts NULL. */
LS_API void ls_producer_destroy(ls_producer_t *producer);

/* The topic's partition count. */
LS_API int ls_producer_partitions(const ls_producer_t *producer);

/* Queues one record (key 1..255 bytes, timestamp in ms); blocks while the
 * local queue is full. Delivery is checked by ls_producer_flush. */
LS_API ls_err_t ls_producer_send(ls_producer_t *producer, const void *key, size_t key_len,
                                 int64_t timestamp_ms, const void *value, size_t len);

/* Waits until every queued record is delivered or has failed. Fails with
 * LS_ERR_KAFKA (how many failed, the first reason) if any failed since the
 * last flush. */
LS_API ls_err_t ls_producer_flush(ls_producer_t *producer);

/* Called about 4 times a second during ls_feed_produce and ls_csv_replay
 * with the records queued so far and the total; return non-zero to stop
 * early (what was queued is still flushed). */
typedef int (*ls_progress_fn)(void *opaque, int64_t done, int64_t total);

typedef struct ls_produce_opts_s {
  ls_format_t format;      /* record value format (default LS_FORMAT_F32) */
  ls_decoder_t *encoder;   /* json, avro: encodes each record (ls_decoder_encode: its key and
                              time go into the value too); NULL: f32, csv */
  double rate;             /* records per second, 0 = as fast as possible */
  ls_progress_fn progress; /* may be NULL */
  void *progress_opaque;
} ls_produce_opts_t;

typedef struct ls_produce_stats_s {
  int64_t records; /* delivered */
  int64_t bytes;   /* keys + values delivered */
  double seconds;  /* from the first send to the end of the flush */
  int stopped;     /* 1 if progress asked to stop */
} ls_produce_stats_t;

/* Ticks as a market feed sends them, for benchmarks and demonstrations: a
 * json or avro record spec of F values named px, qty, bid, ask (then f4,
 * f5, ...), the series key in the field sym and the event time in ts (json:
 * an ISO 8601 string, ~120 bytes at F = 4; avro: a long of ms, floats, plain
 * binary). Its strings are the struct's own. */
typedef struct ls_ticks_s {
  ls_record_spec_t spec;
  char fields[LS_FEATURES_MAX * 8];
  char schema[LS_FEATURES_MAX * 48 + 256];
} ls_ticks_t;
LS_API ls_err_t ls_ticks_spec(ls_format_t format, int F, ls_ticks_t *out);

/* Fills opts with the defaults above. */
LS_API void ls_produce_opts_default(ls_produce_opts_t *opts);

/* Sends K steps of every series of feed (step-major: step 0 of every series,
 * then step 1, ...), key = ls_feed_key, timestamp = ls_feed_time, then
 * flushes. Restarts the feed's series at step 0. */
LS_API ls_err_t ls_feed_produce(ls_feed_t *feed, ls_producer_t *producer,
                                const ls_produce_opts_t *opts, ls_produce_stats_t *stats);

/* Replays a CSV file of lines "series,time_ms,v1,...,vF" (the values follow
 * the csv record grammar, the same F on every line; no quoting; blank lines,
 * lines starting with '#' and a first line starting with "series," are
 * skipped; per-series time order is not checked: the trainer rejects records
 * that go back). The whole file is checked first: a bad line fails with
 * LS_ERR_CORRUPT and "FILE:LINE: what is wrong", and nothing is sent. */
LS_API ls_err_t ls_csv_replay(const char *path, ls_producer_t *producer,
                              const ls_produce_opts_t *opts, ls_produce_stats_t *stats);

/* ------------------------------------------------------------------------ */
/* Publishing exactly once                                                   */
/*
 * A transactional producer for one topic (ingest/publisher.c), for output
 * that must reach it exactly once. The caller queues messages (never
 * blocking longer than it asks); a thread of the publisher's own produces
 * them in transactions that it commits at least every commit_ms, and at
 * once when asked to. It holds every message until its transaction has
 * committed: a transaction the client must abort (its messages timed out
 * during an outage) is produced again, so nothing is dropped, and holding
 * at most max_messages makes a full publisher push back on its caller.
 * The transactional.id fences any earlier producer with the same id
 * (librdkafka's init_transactions aborts its open transaction).
 *
 * What a crash leaves: a read_committed consumer of a real cluster never
 * sees an uncommitted transaction; librdkafka's mock cluster (the embedded
 * broker) does not isolate transactions (its EndTxn writes no markers and
 * its fetches report no aborted transactions), so there every message
 * produced counts. ls_topic_read_back reads back what a previous run left,
 * as the same kind of consumer sees it, for a caller that resumes to leave
 * out what is there already.
 */

/* A Kafka record header. */
typedef struct ls_header_s {
  const char *name; /* NUL-terminated */
  const void *value;
  size_t len;
} ls_header_t;

/* The most headers a message carries here. */
#define LS_HEADERS_MAX 8

typedef struct ls_publisher_conf_s {
  const char *brokers;          /* bootstrap servers host:port[,...] (required) */
  const char *topic;            /* (required) */
  const char *transactional_id; /* (required) */
  int commit_ms;                /* a transaction commits at most this long after its first
                                   message, >= 0 (100) */
  int64_t max_messages;         /* messages held (queued, and in the open transaction), >= 1
                                   (1048576) */
  int timeout_ms;               /* starting (the topic's metadata, init_transactions) and
                                   reading back, >= 1 (30000) */
  const char *const *settings;  /* [n_settings] librdkafka "key=value" properties applied
                                   after lstream's defaults (lz4 off, linger.ms=1, the Java
                                   client's murmur2 partitioner) */
  int n_settings;
} ls_publisher_conf_t;

/* Fills conf with the defaults above (no brokers, topic or id). */
LS_API void ls_publisher_conf_init(ls_publisher_conf_t *conf);

typedef struct ls_publisher_s ls_publisher_t;

/* Connects, checks that the topic can be written (its metadata: it exists,
 * or the cluster created it, and every partition has a leader), starts the
 * transactions (fencing any producer of the same transactional id), ends
 * aborted what that id left open on the topic's partitions (a transaction
 * a restarted broker aborted without writing its markers there: one empty
 * record in an aborted transaction on each such partition) and starts the
 * thread. An error names the topic and why. */
LS_API ls_err_t ls_publisher_new(const ls_publisher_conf_t *conf, ls_publisher_t **out);

/* Stops the thread and closes the producer; messages not yet committed
 * are dropped (their transaction aborted): commit first. Accepts NULL. */
LS_API void ls_publisher_destroy(ls_publisher_t *pub);

/* The topic's partition count. */
LS_API int32_t ls_publisher_partitions(const ls_publisher_t *pub);

/* Queues a message (key 1..LS_KEY_MAX bytes, value, Kafka timestamp in
 * ms >= 0, n_headers <= LS_HEADERS_MAX headers), copying it. When
 * max_messages are held it waits up to wait_ms (< 0: as long as it
 * takes) for room: *queued = 0 if none came (nothing queued), else 1.
 * Fails once the publisher has failed for good (a fatal Kafka error, such
 * as being fenced by another producer of its id), with the reason. */
LS_API ls_err_t ls_publisher_send(ls_publisher_t *pub, const void *key, size_t key_len,
                                  const void *value, size_t len, int64_t timestamp_ms,
                                  const ls_header_t *headers, int n_headers, int wait_ms,
                                  int *queued);

/* Messages queued so far: the number of the last one (they are numbered
 * 1, 2, ...). */
LS_API int64_t ls_publisher_sent(ls_publisher_t *pub);

/* Asks for every message up to number `upto` to be committed now (not
 * commit_ms after its transaction began) and waits up to wait_ms (0: not
 * at all, < 0: as long as it takes) for it; *done = 1 once they are all
 * in committed transactions. Fails as ls_publisher_send does. */
LS_API ls_err_t ls_publisher_commit(ls_publisher_t *pub, int64_t upto, int wait_ms, int *done);

/* Per partition q < n (n: the partition count), one past the highest
 * offset a message of this publisher was written at (the partition's high
 * watermark when the publisher started, before any): what it writes later
 * lands at or after next[q]. */
LS_API ls_err_t ls_publisher_positions(ls_publisher_t *pub, int64_t *next, int32_t n);

typedef struct ls_publisher_stats_s {
  int64_t sent;         /* messages queued */
  int64_t committed;    /* messages in committed transactions */
  int64_t transactions; /* committed */
  int64_t aborts;       /* transactions aborted and produced again */
  int64_t retries;      /* commits that failed and were tried again (an outage) */
  int64_t waits;        /* sends that found the publisher full */
  char error[256];      /* the last error it retried, "" after a commit succeeds */
} ls_publisher_stats_t;

LS_API ls_err_t ls_publisher_stats(ls_publisher_t *pub, ls_publisher_stats_t *out);

/* Starts and ends the transactions of conf's transactional id: a producer
 * still running with it is fenced, and its open transaction aborted (a
 * read_committed consumer no longer waits on it). */
LS_API ls_err_t ls_publisher_fence(const ls_publisher_conf_t *conf);

/* Called by ls_topic_read_back for each message. */
typedef void (*ls_read_back_fn)(void *opaque, int32_t partition, const void *key, size_t key_len,
                                const ls_header_t *headers, int n_headers);

/* Reads conf's topic back with isolation.level=read_committed: every
 * partition q from offset from[q] (from NULL, or from[q] below the low
 * watermark: from the low watermark) up to the high watermark read now,
 * within conf's timeout_ms, calling fn for each message (its first
 * LS_HEADERS_MAX headers). n: the topic's partition count (from may hold
 * fewer entries, n_from). *messages receives how many were read. */
LS_API ls_err_t ls_topic_read_back(const ls_publisher_conf_t *conf, const int64_t *from,
                                   int32_t n_from, ls_read_back_fn fn, void *opaque,
                                   int64_t *messages);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_PRODUCE_H */
