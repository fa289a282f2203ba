/*
 * lstream ingest: Kafka partitions in, validated per-series windows out.
 *
 * Records (README, Architecture: "Records"): key = series id (1..255
 * bytes); value by format:
 *   LS_FORMAT_F32   F little-endian IEEE-754 float32 values (4F bytes)
 *   LS_FORMAT_CSV   F decimal numbers separated by commas
 *   LS_FORMAT_JSON  a JSON object; the F values are fields named by paths
 *   LS_FORMAT_AVRO  an Avro record of a given schema (plain binary or
 *                   Confluent's framing); the values are fields, by name
 * Series key = the Kafka key, and event time = the Kafka message timestamp,
 * unless (json, avro) a key field or a time field is named. Writing into
 * Kafka (the embedded broker, the feed, producers) is lstream/produce.h.
 */
#ifndef LSTREAM_INGEST_H
#define LSTREAM_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"
#include "lstream/inflight.h" /* ls_inflight_t */

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

typedef enum ls_format_e {
  LS_FORMAT_F32 = 0,
  LS_FORMAT_CSV = 1,
  LS_FORMAT_JSON = 2,
  LS_FORMAT_AVRO = 3,
  LS_FORMAT__COUNT
} ls_format_t;

/* The formats' names by value ("f32", "csv", "json", "avro"), NULL after the last: the one
 * list of them, which ls_format_parse, ls_format2str and every option that
 * takes a format read. A format is valid when 0 <= fmt < LS_FORMAT__COUNT. */
LS_API extern const char *const ls_format_names[LS_FORMAT__COUNT + 1];

/* The most features a record may carry. */
#define LS_FEATURES_MAX 4096
/* The most bytes one csv value takes when encoded, its comma included: a
 * buffer of F * LS_CSV_VALUE_MAX bytes always holds an encoded record. */
#define LS_CSV_VALUE_MAX 16

/* Why a record was rejected. */
typedef enum ls_reject_e {
  LS_REJECT_NONE = 0,  /* accepted */
  LS_REJECT_SIZE,      /* wrong width: not F values */
  LS_REJECT_PARSE,     /* does not decode */
  LS_REJECT_NONFINITE, /* holds NaN or Inf */
  LS_REJECT_BACKWARDS, /* event time before the series' previous record */
  LS_REJECT_KEY,       /* key empty or longer than 255 bytes */
  LS_REJECT_PARTITION, /* unused: a series may move partition (ls_windower_push) */
  LS_REJECT_RANGE,     /* holds a value beyond the bound on magnitudes (max.abs) */
  LS_REJECT_FIELD,     /* json, avro: a field named (value, key or time) is missing or null */
  LS_REJECT_TYPE,      /* json, avro: a field of the wrong type (a string where a number
                          belongs, an object as a key, ...) */
  LS_REJECT_TIME,      /* json, avro: the time field does not read as a time (an ISO 8601
                          string without a zone, a date that does not exist, before 1970) */
  LS_REJECT_FUTURE,    /* event time beyond the wall clock + the bound on the future */
  LS_REJECT__COUNT
} ls_reject_t;

/* A short name for a reason ("size", "parse", "nonfinite", ...). */
LS_API const char *ls_reject2str(ls_reject_t reason);

/* Parses a name of ls_format_names. */
LS_API ls_err_t ls_format_parse(const char *name, ls_format_t *out);

/* The format's name in ls_format_names ("unknown" when fmt is none). */
LS_API const char *ls_format2str(ls_format_t fmt);

/* Encodes F values as a record value into buf (size bytes; *len: the
 * length, no NUL). CSV: the shortest text that reads back to the same float
 * ("%.{6..9}g", "C" locale). NaN and Inf encode too ("nan", "inf"), so that
 * tests can produce records the decoder must reject. */
LS_API ls_err_t ls_record_encode(ls_format_t fmt, const float *values, int F, char *buf,
                                 size_t size, size_t *len);

/* Decodes a record value of exactly F values into out [F] (partly written on rejection):
 * LS_REJECT_NONE, or why not (SIZE, PARSE, NONFINITE). csv takes spaces and tabs around each number
 * and one trailing "\n" or "\r\n" (ingest/record.c: the grammar). Invalid arguments (out NULL, F
 * outside [1, LS_FEATURES_MAX], value NULL with len > 0) are SIZE. */
LS_API ls_reject_t ls_record_decode(ls_format_t fmt, const void *value, size_t len, int F,
                                    float *out);

/* One Kafka record as a decoder and the windower see it. */
typedef struct ls_record_s {
  const void *key; /* series key (any bytes) */
  size_t key_len;
  const void *value; /* encoded values */
  size_t value_len;
  int32_t partition;
  int64_t offset;
  int64_t timestamp; /* event time, ms since the epoch; < 0 = unknown (not checked) */
} ls_record_t;

/* The units of a numeric time field: auto (by magnitude: below 1e11
 * seconds, below 1e14 ms, below 1e17 us, else ns), s, ms, us, ns. */
typedef enum ls_time_unit_e {
  LS_TIME_AUTO = 0,
  LS_TIME_S,
  LS_TIME_MS,
  LS_TIME_US,
  LS_TIME_NS,
  LS_TIME__COUNT
} ls_time_unit_t;

/* Their names by value ("auto", "s", "ms", "us", "ns"), NULL after the last. */
LS_API extern const char *const ls_time_unit_names[LS_TIME__COUNT + 1];

/* What a record is: its format and, for json and avro, where its values,
 * series key and event time are. A path names a field: names separated by
 * dots into nested objects (records), [N] an array's element N:
 * "px", "quote.bid", "levels[0].px". */
typedef struct ls_record_spec_s {
  ls_format_t format;
  int features;             /* F; json, avro: the number of fields (0: take it from them) */
  const char *fields;       /* json, avro: the F values' paths, comma separated, in order */
  const char *key_field;    /* json, avro: the series key's path (a string, or a number's
                               text); NULL or "": the Kafka key */
  const char *time_field;   /* json, avro: the event time's path: a number of time_unit
                               since the epoch, or an ISO 8601 string with a zone
                               ("2024-01-02T14:30:00.123Z", "+01:00"); NULL or "": the Kafka
                               timestamp */
  ls_time_unit_t time_unit; /* of a numeric time field */
  const char *avro_schema;  /* avro: the writer's schema, JSON text (required) */
  int64_t avro_schema_id;   /* avro: LS_AVRO_PLAIN: plain binary; LS_AVRO_ANY_ID: Confluent's
                               framing (a 0 byte, the schema id in 4 bytes big-endian), any
                               id; an id >= 0: that framing, with that id only */
} ls_record_spec_t;

#define LS_AVRO_PLAIN  (-1)
#define LS_AVRO_ANY_ID (-2)

/* Fills spec with format f32, 1 feature, no fields, time unit auto, plain
 * Avro binary. */
LS_API void ls_record_spec_init(ls_record_spec_t *spec);

/* A record decoder: the spec checked (fields parsed, the Avro schema read
 * and each path found in it) and what decoding needs, made once. Not
 * thread-safe: one thread decodes. */
typedef struct ls_decoder_s ls_decoder_t;

/* Creates a decoder; the spec's strings are copied. An error names what is
 * wrong (a bad path, a field the schema lacks, a schema that does not
 * parse). */
LS_API ls_err_t ls_decoder_new(ls_decoder_t **out, const ls_record_spec_t *spec);

/* Frees a decoder; accepts NULL. */
LS_API void ls_decoder_destroy(ls_decoder_t *d);

/* F: the values per record. */
LS_API int ls_decoder_features(const ls_decoder_t *d);

/* Encodes a record of d's spec (json, avro; for benchmarks and tests): values x [F], the key
 * (json, avro with a key field: that field, a string) and the time (ms; json: an ISO 8601 string,
 * avro: the field's long, or string) into buf [size], *len bytes. Avro with Confluent's framing
 * takes the spec's id (0 for any). Only paths of one name encode. */
LS_API ls_err_t ls_decoder_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                                  const float *x, char *buf, size_t size, size_t *len);

/* What ls_decoder_decode found besides the values. */
typedef struct ls_decoded_s {
  const void *key; /* the series key: rec's, or the key field's (valid until the next
                      call); NULL when the key field could not be read */
  size_t key_len;
  int64_t time; /* event time in ms: rec's timestamp, or the time field's; -1 unknown */
} ls_decoded_t;

/* Decodes rec's value into x [F] (partly written on rejection) and *out: LS_REJECT_NONE, or why
 * not: SIZE, PARSE, NONFINITE (f32, csv: as ls_record_decode), PARSE (not a JSON object, a
 * truncated one, not a record of the schema), FIELD, TYPE, TIME. The key is read even when a value
 * is rejected, where it can be. Invalid arguments are PARSE. */
LS_API ls_reject_t ls_decoder_decode(ls_decoder_t *d, const ls_record_t *rec, float *x,
                                     ls_decoded_t *out);

/* The last rejection of d, for messages ("field 'px' is a string"); "" when
 * the last decode accepted. */
LS_API const char *ls_decoder_why(const ls_decoder_t *d);

/* What value [len] looks like, for a message about records that are not of their declared format:
 * "JSON objects with fields sym (string), px (number)", "CSV text of 3 numbers", "binary of 8 bytes
 * (2 float32 of plausible size)", "Avro with Confluent's framing (schema id 4)", ..., with a hint
 * of the options that read it; into buf [size]. */
LS_API void ls_value_describe(const void *value, size_t len, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Windows                                                                   */

/* The longest window (T) a windower accepts. */
#define LS_WINDOW_MAX 65536

/* One training window of one series (README, Architecture: "Windows"):
 * TBPTT with k1 = k2 = T, so window k holds inputs x[kT .. kT+T-1] and
 * targets x[kT+1 .. kT+T]. Consecutive windows share one record: the last
 * target of window k is the first input of window k+1. */
typedef struct ls_window_s {
  const char *key;      /* series key, key_len bytes, NUL-terminated */
  size_t key_len;       /* 1..LS_KEY_MAX */
  int32_t partition;    /* the series' partition */
  int64_t series;       /* the series' id in its windower (and consumer): 0, 1, ... in
                           the order series were first accepted (or restored), never
                           reused */
  int64_t index;        /* k: the window's number in its series, from 0 */
  int64_t first_offset; /* offset of the record in row 0 (first input) */
  int64_t last_offset;  /* offset of the record in row n_targets (last valid target) */
  int T, F;
  int n_targets;          /* valid targets: T, fewer only in a flushed trailing window */
  const float *x;         /* [T+G, F] records (G: ls_windower_set_horizon): inputs = rows
                             0..T-1, targets = rows 1..T+n_extra; rows past them are zero */
  const float *mask;      /* [T] 1 where target t is valid, 0 (padding) after */
  const int64_t *times;   /* [T+G] event times (ms) of the rows' records (the Kafka
                             timestamps, or their time field's); -1 for padding rows
                             and unknown times */
  const int64_t *offsets; /* [T+G] the rows' records' offsets; -1 for padding rows */
  int reset;              /* 1: the series' state restarts from zero at this window (the
                             first after a gap: ls_windower_set_reset_gap) */
  int n_extra;            /* targets past row T: G-1, fewer at its series' end, 0 partial */
} ls_window_t;

/* Receive a series in flight, whole or in its parts (valid during the call). */
typedef ls_err_t (*ls_inflight_fn)(void *opaque, const ls_inflight_t *series);
typedef ls_err_t (*ls_inflight_parts_fn)(void *opaque, const ls_inflight_parts_t *series);
/* Receives a window completed while restoring (valid during the call). */
typedef ls_err_t (*ls_window_fn)(void *opaque, const ls_window_t *win);

/* Counters of a windower (and of a consumer, below). */
typedef struct ls_window_stats_s {
  int64_t records;                    /* records pushed: accepted + rejected */
  int64_t accepted;                   /* records now in a series buffer or a window */
  int64_t rejected[LS_REJECT__COUNT]; /* per reason; [LS_REJECT_NONE] stays 0 */
  int64_t windows;                    /* complete windows emitted */
  int64_t series;                     /* distinct series seen */
  int64_t buffered;                   /* records held for windows not yet complete */
  int64_t resets;                     /* gaps that restarted a series (reset_gap) */
  int64_t late;                       /* records accepted late: their event time before
                                         their series' last, within late_ms, held at it */
  int64_t evicted;                    /* series evicted (ls_windower_set_eviction); the
                                         series held now: series - evicted */
  int64_t evicted_records;            /* records the evicted series held, never trained */
  int64_t moved;                      /* series that went on on another partition */
} ls_window_stats_t;

/* The decode -> validate -> window pipeline for one consumer, without Kafka: records go in one at
 * a time, complete windows come out. Series are keyed by message key in the ground floor's
 * key->index map; each holds a buffer of T+G records [T+G, F] into which values are decoded in
 * place, so a push allocates nothing except on a series' first record. Not thread-safe: one thread
 * pushes. */
typedef struct ls_windower_s ls_windower_t;

/* Creates a windower for records of F features in format fmt (f32 or csv)
 * and windows of T steps. */
LS_API ls_err_t ls_windower_new(ls_windower_t **out, ls_format_t fmt, int F, int T);

/* The same for records of any format: spec as ls_decoder_new takes it
 * (for json and avro: the key and time it names replace the Kafka key and
 * timestamp in everything below). */
LS_API ls_err_t ls_windower_new_spec(ls_windower_t **out, const ls_record_spec_t *spec, int T);

/* Why the last push rejected a record it could not decode (its decoder's
 * ls_decoder_why), for messages; "" otherwise. */
LS_API const char *ls_windower_why(const ls_windower_t *w);

/* Frees a windower; accepts NULL. */
LS_API void ls_windower_destroy(ls_windower_t *w);

/* Validates and buffers one record. Checks, in this order: the key (1..255 bytes: KEY), the value
 * (SIZE, PARSE, NONFINITE, then RANGE: a value of magnitude above the windower's bound), the time
 * (not beyond the bound on the future: FUTURE; not before the series' last accepted record by
 * more than the bound on lateness: BACKWARDS; a record late within it is accepted with its
 * series' last time: ls_windower_set_time_bounds). A rejected record changes nothing but the
 * counters. A record on another partition than its series' moves it there (stats.moved): what it
 * held goes out as a partial window of the old one (*complete; a lone record is dropped), its
 * windows go on, numbered on. When it completes a window, *complete points at it (valid until the
 * next call on w), else NULL. Returns the reason, LS_REJECT_NONE when accepted. Invalid
 * arguments, and no memory for a new series, count nowhere and return LS_REJECT__COUNT, with a
 * message in ls_last_error(). */
LS_API ls_reject_t ls_windower_push(ls_windower_t *w, const ls_record_t *rec,
                                    const ls_window_t **complete);

/* Horizon G in [1, T] (default 1, set before any record): a window holds its series' G-1 records
 * after its last target too (n_extra: targets only, the next window's inputs), complete with them.
 * At its series' end (a flush, a gap, a move) it goes with fewer, then the rest as a partial window
 * (a flush's at its next call, the others' through ls_windower_more); evicted, with fewer alone. A
 * push's first window is *complete, the others ls_windower_more's (NULL: none), each valid until
 * the next call on w: it overwrites *complete (the evicted window is built in the same view). */
LS_API ls_err_t ls_windower_set_horizon(ls_windower_t *w, int G);
LS_API ls_err_t ls_windower_more(ls_windower_t *w, const ls_window_t **win);

/* Sets the bound on the magnitude of values: a record holding a value v
 * with |v| > max_abs is rejected (RANGE). A new windower has none (every
 * finite float passes). max_abs must be > 0; 3.4e38 or more is no bound. */
LS_API ls_err_t ls_windower_set_max_abs(ls_windower_t *w, double max_abs);

/* Sets the bound on a series' event-time gaps (ms; 0, a new windower's: none): a record more than
 * gap_ms after its series' last accepted one first closes what the series holds as a partial window
 * (masked, as a flush's; a lone record, with no target, is dropped), then starts the series' next
 * window, marked reset (its state restarts from zero); the record completes no window itself then.
 * Counted in stats.resets. */
LS_API ls_err_t ls_windower_set_reset_gap(ls_windower_t *w, int64_t gap_ms);

/* The bounds on event times (ms; 0, a new windower's: none), so that no
 * series dies of one bad stamp:
 * - max_future_ms: a record stamped more than this after the wall clock of
 *   the machine reading it is rejected (FUTURE) and leaves its series'
 *   clock as it was (as Kafka's brokers since 3.6 refuse records stamped
 *   log.message.timestamp.after.max.ms ahead of theirs). The wall clock,
 *   not the partition's newest record: a partition's first record has no
 *   newest to be measured against, and a live topic's records cannot come
 *   from the future of the moment they are read; historical data never
 *   meets the bound, so a replay depends on when it runs only through
 *   records stamped beyond it.
 * - late_ms: a record stamped before its series' last accepted one by at
 *   most this much (a producer's clock stepped back) is accepted, in offset
 *   order as every record, with its event time held at the series' last
 *   (counted in stats.late); one later than that is rejected (BACKWARDS).
 *   0: every record before its series' last is rejected. */
LS_API ls_err_t ls_windower_set_time_bounds(ls_windower_t *w, int64_t max_future_ms,
                                            int64_t late_ms);

/* Bounds the series held (0: no bound, a new windower's): after a record is accepted, its partition
 * forgets each series idle for longer than idle_ms (its last event time that much before the
 * partition's newest) and, beyond max_held series, the least recently active ones; in order of
 * their last records' arrival, the record's own series aside. An evicted series' records in buffer
 * are dropped (stats.evicted_records) but a whole window waiting for its records after it (out as
 * it is: ls_windower_set_horizon); its key, if it comes back, starts a new series (window 0). */
LS_API ls_err_t ls_windower_set_eviction(ls_windower_t *w, int64_t idle_ms, int64_t max_held);
/* The record the last ls_windower_push accepted (not rejected, not skipped below a skip rule): its
 * series' id (as in its windows), the series' key (NUL-terminated, valid as long as the windower),
 * its decoded values x [F] (valid until the next push) and its event time as accepted (a late
 * record's held at its series' last). series = -1, key and x NULL when the last push accepted
 * none. */
typedef struct ls_windower_record_s {
  int64_t series;
  const char *key;
  size_t key_len;
  const float *x;
  int64_t time; /* its event time (ms; -1 unknown) */
} ls_windower_record_t;
LS_API ls_err_t ls_windower_last(const ls_windower_t *w, ls_windower_record_t *out);

/* Emits the trailing partial windows of `partition`, for the end of its data: each call gives
 * the next series of it holding a target beyond its last window, as a window with n_targets < T
 * (or its whole window short of G-1 records after it: ls_windower_set_horizon), masked and zero
 * padded, by ascending first_offset; *win is NULL when there are no more. Its series then hold
 * nothing (a lone record, without a target, is dropped), and a later push starts a new window. */
LS_API ls_err_t ls_windower_flush_next(ls_windower_t *w, int32_t partition,
                                       const ls_window_t **win);

/* The series of `partition` that hold records (its partial window, or the last target of its last
 * window, kept), each through fn as a series in flight of those records alone, in ascending order
 * of their first offset; the pointers stay valid until the next push. */
LS_API ls_err_t ls_windower_each_pending(const ls_windower_t *w, int32_t partition,
                                         ls_inflight_fn fn, void *opaque);

/* That of one series, by key: *found = 0 when the windower never accepted
 * it; else *out as above (rows 0 when it holds none, as after a flush). */
LS_API ls_err_t ls_windower_pending_of(const ls_windower_t *w, const void *key, size_t key_len,
                                       ls_inflight_t *out, int *found);

/* Restores series [n] in flight, of series the windower has not seen: each as a new series whose
 * buffer holds its rows[0] as the first input of window `index`, then every later row of them,
 * partition by partition in offset order (the order they first came in), as records pushed again:
 * the windows they complete go to fn, in the order they first completed (a key's incarnation
 * evicted holding a whole window gives it when the next begins). Rows count as accepted records,
 * not as pushed ones. */
LS_API ls_err_t ls_windower_restore(ls_windower_t *w, const ls_inflight_t *series, size_t n,
                                    ls_window_fn fn, void *opaque);

/* The windower's counters. */
LS_API ls_err_t ls_windower_stats(const ls_windower_t *w, ls_window_stats_t *out);

/* ------------------------------------------------------------------------ */
/* librdkafka properties                                                     */

/* Reads a --kafka-config FILE (as kcat -F and the Kafka tools do): one
 * key=value per line, blanks around key and value ignored, lines empty or
 * starting with '#' skipped. Each property is checked against librdkafka;
 * an error names the file and the line. On success *settings [*n] holds the
 * "key=value" strings in file order; free them with ls_kafka_config_free. */
LS_API ls_err_t ls_kafka_config_read(const char *path, char ***settings, int *n);

/* Frees what ls_kafka_config_read returned; accepts NULL. */
LS_API void ls_kafka_config_free(char **settings, int n);

/* ------------------------------------------------------------------------ */
/* Consumer                                                                  */

/* Where a partition starts. */
typedef enum ls_start_kind_e {
  LS_START_OFFSET = 0,    /* value = an offset, within [low, high] watermarks */
  LS_START_BEGINNING = 1, /* the low watermark */
  LS_START_END = 2,       /* the high watermark: only records produced later */
  LS_START_TIMESTAMP = 3  /* value = ms since the epoch: the first record at or after it */
} ls_start_kind_t;

typedef struct ls_start_s {
  ls_start_kind_t kind;
  int64_t value; /* the offset or the timestamp; unused otherwise */
} ls_start_t;

/* Parses "beginning", "end", an offset ("1234" or "offset:1234") or a
 * timestamp in ms ("time:1700000000000"). */
LS_API ls_err_t ls_start_parse(const char *text, ls_start_t *out);

/* Consumer configuration: lstream keys and librdkafka properties. */
typedef struct ls_ingest_conf_s ls_ingest_conf_t;

/* Warnings the consumer does not stop for (rejected records, Kafka errors librdkafka retries,
 * librdkafka's own warnings), rate limited: one per kind every warn.interval.ms at most, saying how
 * many were suppressed. Called from the consumer's thread or librdkafka's, one call at a time. */
typedef void (*ls_ingest_warn_cb)(void *opaque, const char *message);

/* The consumer's lstream settings, typed: ls_ingest_conf_set sets one field from its text (the key
 * in brackets, spelled as the trainer's option that sets it; dots and dashes read as underscores),
 * and ls_ingest_conf_set_settings all of them at once. Defaults in parentheses (the table in
 * ingest/conf.c; the shared ones are the trainer's). */
typedef struct ls_ingest_settings_s {
  const char *topic;             /* [topic] the topic to read (required) */
  const char *dead_letter_topic; /* [dead_letter_topic] copy rejected records there, with
                                    the headers lstream-reject-reason, lstream-partition,
                                    lstream-offset and lstream-source (NULL: none) */
  ls_format_t format;            /* [format] f32 | csv | json | avro (f32) */
  int features;                  /* [features] F, values per record, 1..LS_FEATURES_MAX (1);
                                    json, avro: taken from fields */
  const char *fields;            /* [fields] json, avro: the values' paths (ls_record_spec_t) */
  const char *key_field;         /* [key_field] json, avro: the series key's path (NULL: the
                                    Kafka key) */
  const char *time_field;        /* [time_field] json, avro: the event time's path (NULL:
                                    the Kafka timestamp) */
  ls_time_unit_t time_unit;      /* [time_unit] auto | s | ms | us | ns (auto) */
  const char *avro_schema;       /* [avro_schema] avro: a FILE holding the writer's schema */
  const char *avro_schema_id;    /* [avro_schema_id] avro: none (plain binary), any
                                    (Confluent's framing, any id) or an id N (that framing,
                                    id N only) (none) */
  int window;                    /* [window] T, steps per window, 1..LS_WINDOW_MAX (16) */
  int horizon;                   /* [horizon] G: ls_windower_set_horizon, 1..window (1) */
  int64_t queue_windows;         /* [queue_windows] most complete windows queued per
                                    partition (4096) */
  int64_t buffer_records;        /* [buffer_records] most records held in memory: series
                                    buffers plus T+G per queued window, all partitions
                                    (16777216) */
  int stop_at_end;               /* [stop] end (1): stop at the high watermarks read at
                                    start (replay) | never (0): run until destroyed (live) */
  int flush;                     /* [flush] true (1): at the end, emit trailing partial
                                    windows, masked | false (0) */
  double max_abs;                /* [max_abs] ls_windower_set_max_abs (1e18: squared
                                    differences, 4e36, stay finite in float32) */
  int64_t reset_gap_ms;          /* [reset_gap_ms] ls_windower_set_reset_gap; 0 none (0) */
  int64_t max_future_ms;         /* [max_future_ms] ls_windower_set_time_bounds'
                                    max_future_ms; 0 none (3600000) */
  int64_t late_ms;               /* [late_ms] its late_ms; 0 none (60000) */
  int64_t series_idle_ms;        /* [series_idle_ms] ls_windower_set_eviction's idle_ms (0) */
  int64_t max_series;            /* [max_series] its max_held, per partition; 0 none (0) */
  int tap;                       /* [tap] true (1): also hand every accepted record, as it
                                    is accepted, to ls_ingest_records | false (0) */
  int warn_interval_ms;          /* [warn_interval_ms] see ls_ingest_warn_cb (5000) */
  int start_timeout_ms;          /* [start_timeout_ms] limit on resolving start positions
                                    and on reaching each partition's leader (10000) */
  int commit_timeout_ms;         /* [commit_timeout_ms] limit on ls_ingest_commit (5000) */
  int watch_interval_ms;         /* [watch_interval_ms] how often a thread asks the
                                    partitions' leaders for their high watermarks (one
                                    ListOffsets per leader, waiting at most this long): is
                                    the cluster reached, each partition's lag; 0 never (1000) */
  int topic_recreated;           /* [topic_recreated] a partition failing ls_ingest_conf_set_mark's
                                    check: refuse (0): ls_ingest_new fails, naming it | restart
                                    (1): read from its beginning, nothing of it restored (refuse) */
} ls_ingest_settings_t;

/* Fills s with the defaults (no topic). */
LS_API void ls_ingest_settings_init(ls_ingest_settings_t *s);

LS_API ls_err_t ls_ingest_conf_new(ls_ingest_conf_t **out);
LS_API void ls_ingest_conf_destroy(ls_ingest_conf_t *conf); /* accepts NULL */

/* Sets one field of the settings from its key and its text, as on a
 * command line ("window", "64"; the keys are in ls_ingest_settings_t). An
 * unknown key is LS_ERR_UNKNOWN_KEY; librdkafka properties go through
 * ls_ingest_conf_set_kafka. */
LS_API ls_err_t ls_ingest_conf_set(ls_ingest_conf_t *conf, const char *key, const char *value);

/* Sets every field: each is checked against the range ls_ingest_conf_set
 * accepts (an error names the first bad one and leaves conf unchanged),
 * then copied, strings included. */
LS_API ls_err_t ls_ingest_conf_set_settings(ls_ingest_conf_t *conf, const ls_ingest_settings_t *s);

/* The settings of conf; its strings stay conf's, valid until it changes. */
LS_API ls_err_t ls_ingest_conf_get_settings(const ls_ingest_conf_t *conf,
                                            ls_ingest_settings_t *out);

/* Passes one librdkafka property through, "key=value" (as kcat -X), checked now; SASL/SSL and the
 * rest work this way; bootstrap.servers is needed. Defaults a property replaces:
 * group.id=lstream-ingest (needed to assign partitions; no group is joined, offsets are committed
 * only by ls_ingest_commit), auto.offset.reset=error (a record deleted before it was read fails the
 * consumer), queued.min.messages=1000000 (ingest/conf.c says why), session.timeout.ms =
 * commit.timeout.ms (bounds a commit's wait for a coordinator). enable.auto.commit,
 * enable.auto.offset.store (false) and enable.partition.eof (true) are fixed. */
LS_API ls_err_t ls_ingest_conf_set_kafka(ls_ingest_conf_t *conf, const char *setting);

/* Adds a partition to consume (one a rank owns) and where it starts. */
LS_API ls_err_t ls_ingest_conf_add_partition(ls_ingest_conf_t *conf, int32_t partition,
                                             ls_start_t start);

/* Live (stop=never), each watch round reads the topic's partition count; partitions of ids >= known
 * with id % world == rank are read from their beginning, said in a warning
 * (stats.partitions_added). At most 1024 more, ids below 65536 (others: a warning). world 0 (the
 * default): none. */
LS_API ls_err_t ls_ingest_conf_set_growth(ls_ingest_conf_t *conf, int32_t known, int world,
                                          int rank);

/* Counts (stats.arrived) and says (a warning, at most one each 5 s) every series new to this
 * consumer: once the topic gained partitions, a key that moved here from another consumer's
 * partition cannot be told from a new one. On from the start (the trainer: the topic grew since
 * its snapshot), or once the watch finds the topic grown (ls_ingest_conf_set_growth). */
LS_API ls_err_t ls_ingest_conf_set_arrivals(ls_ingest_conf_t *conf, int on);

LS_API ls_err_t ls_ingest_conf_set_warn_cb(ls_ingest_conf_t *conf, ls_ingest_warn_cb cb,
                                           void *opaque);

/* Partition (added at a start offset) resumes after record mark (-1:
 * unknown): ls_ingest_new checks the record (unless retention deleted it)
 * and the high watermark; a topic re-created fails: see topic_recreated. */
LS_API ls_err_t ls_ingest_conf_set_mark(ls_ingest_conf_t *conf, int32_t partition,
                                        const ls_ingest_mark_t *mark);

/* Adds a series in flight to restore (a snapshot's): copied; ls_ingest_new restores those of the
 * partitions the conf reads (ls_windower_restore; others are ignored, so every rank may be given
 * all of them) before it reads anything, and fails on a second one of a series. */
LS_API ls_err_t ls_ingest_conf_restore(ls_ingest_conf_t *conf, const ls_inflight_t *series);

/* The number of partitions of the conf's topic, from the cluster's metadata. */
LS_API ls_err_t ls_ingest_topic_partitions(const ls_ingest_conf_t *conf, int32_t *count);

/* Counters of a running consumer. Memory is counted in records: series buffers plus T+G per
 * queued window. */
typedef struct ls_ingest_stats_s {
  ls_window_stats_t w;         /* the windower's counters */
  int64_t skipped;             /* records before a timestamp start (not in w.records) */
  int64_t duplicates;          /* records the client delivered twice, dropped */
  int64_t queued_windows;      /* windows waiting for ls_ingest_next */
  int64_t memory_records;      /* buffered + (T+1) * queued_windows, now */
  int64_t peak_memory_records; /* the most memory_records ever reached */
  int64_t pauses;              /* times partitions were paused (backpressure) */
  int paused;                  /* partitions paused for backpressure now */
  int64_t dead_letters;        /* rejected records copied to the dead-letter topic, less
                                  those its producer failed to deliver */
  int64_t dead_letter_errors;  /* copies that could not be delivered */
  int64_t kafka_errors;        /* client errors librdkafka retries */
  int64_t partitions_added;    /* partitions added to the topic live and read (growth) */
  int64_t arrived;             /* series new to this consumer once the topic grew: new keys, or
                                  moved from another's partition (ls_ingest_conf_set_arrivals) */
  int64_t progress_done;       /* offsets consumed since the start positions */
  int64_t progress_total;      /* offsets from the start positions to the high
                                  watermarks read at start (stop=end), else -1 */
  int connected;               /* 1: the last watch reached every partition's leader (or none
                                  ran yet); 0: it failed (watch_error); -1: watch.interval.ms 0 */
  int64_t disconnected_ms;     /* 0 while connected, else ms since the last good watch */
  char watch_error[512];       /* why the last watch failed (the partitions it cannot read,
                                  their leader and its address, if that is why); "" if none */
} ls_ingest_stats_t;

/* One partition of a running consumer, its fields read together. */
typedef struct ls_ingest_partition_s {
  int32_t partition;
  int64_t next_offset;    /* the next offset the consumer reads (one past the last record
                             it handled; its start position before any) */
  int64_t high_watermark; /* from the last good watch, or read at start, and at least
                             next_offset (the consumer read that far: a watch older than its
                             last fetch is behind it); -1 unknown */
  int64_t lag;            /* high_watermark - next_offset: the records the cluster holds that
                             the consumer has not read yet, never negative; -1 unknown */
  int64_t queued_windows; /* windows of it waiting for the trainer */
  int paused;             /* paused for backpressure (its queue is full) */
  int restarted;          /* read from its beginning: its mark's check failed (restart) */
} ls_ingest_partition_t;

/* What ls_ingest_next returned. */
typedef enum ls_next_e {
  LS_NEXT_WINDOW = 0,  /* *win is a window: give it back with ls_ingest_release */
  LS_NEXT_TIMEOUT = 1, /* none became ready within the timeout */
  LS_NEXT_END = 2,     /* stop=end: every partition reached its end, every window
                          (and, with flush, every partial one) was delivered */
  LS_NEXT_RECORDS = 3  /* tap on, ls_ingest_next only: no window is ready, but accepted
                          records wait for ls_ingest_records */
} ls_next_t;

typedef struct ls_ingest_s ls_ingest_t;

/* A consumer: assigns the conf's partitions at their start positions (resolved now: an offset
 * outside the watermarks fails here, naming them), then consumes on a thread of its own, decodes,
 * validates, windows, and queues complete windows, one queue per partition. Backpressure: a
 * partition whose queue is full is paused alone (its records already fetched held back, in order)
 * and resumed once the trainer took half of it; when memory (buffer.records) is full every
 * partition is paused until the trainer drains it below 3/4. Nothing is ever dropped; a bound
 * that nothing the trainer takes can relieve is an error. Start positions and a replay's end come
 * only from each partition's leader, so every partition must have a leader in the metadata,
 * reachable at its advertised address: the consumer first connects to each leader (within
 * start.timeout.ms) and fails, naming the partitions, the broker and the address, when it cannot;
 * a partition without a leader fails once start.timeout.ms has passed without one. None is ever
 * taken for empty. An outage later only warns, naming the partitions that cannot be read (and the
 * stats' watch_error says so). Records before a timestamp start are skipped (a broker that cannot
 * look offsets up by time, as librdkafka's mock, answers "none": the consumer starts at the low
 * watermark and skips). The conf is copied. */
LS_API ls_err_t ls_ingest_new(ls_ingest_t **out, const ls_ingest_conf_t *conf);

/* Stops the thread, closes the clients (flushing dead letters, for up to
 * 5 s); accepts NULL. No consumer-group close: nothing waits on a broker
 * that is down, and commits still in flight are abandoned. Windows not
 * released are freed: do not use them after. */
LS_API void ls_ingest_destroy(ls_ingest_t *ing);

/* Waits up to timeout_ms (0: do not wait, < 0: forever) for the next window of any partition, in
 * arrival order; with tap on, it returns LS_NEXT_RECORDS as soon as records wait for
 * ls_ingest_records. A failure of the consumer thread (a fatal Kafka error, an offset out of
 * range, a memory bound too small for the series' partial windows) is returned here, with its
 * message, once the queue is empty. */
LS_API ls_err_t ls_ingest_next(ls_ingest_t *ing, int timeout_ms, ls_next_t *what,
                               const ls_window_t **win);

/* ls_ingest_next for one partition (one of the conf's): its windows in the
 * order its records completed them (the data's order: what a replay forms
 * its steps from). LS_NEXT_END once stop=end and all its windows (flushed
 * ones included) were taken. One thread takes windows, by either call. */
LS_API ls_err_t ls_ingest_next_partition(ls_ingest_t *ing, int32_t partition, int timeout_ms,
                                         ls_next_t *what, const ls_window_t **win);

/* One accepted record as the tap hands it out (ls_ingest_records). */
typedef struct ls_tap_record_s {
  int64_t series;  /* the consumer's id of its series, as in its windows */
  const char *key; /* the series' key, NUL-terminated (a copy, valid as x) */
  size_t key_len;
  int32_t partition;
  int64_t offset;
  int64_t time;   /* event time (ms), -1 unknown */
  const float *x; /* [F] its values */
} ls_tap_record_t;

/* With tap on: the records accepted since the last call, in the order the consumer accepted them
 * (each partition's in offset order; a window is queued only after its records are here), into
 * *recs [*n], valid until the next call. Never waits. Until taken, records count towards
 * buffer.records (a consumer whose memory is full waits for them to be taken, as for windows): a
 * caller that turns tap on takes them often. LS_ERR_STATE with tap off. */
LS_API ls_err_t ls_ingest_records(ls_ingest_t *ing, const ls_tap_record_t **recs, int64_t *n);

/* Gives a window back to the consumer's pool; accepts NULL. */
LS_API void ls_ingest_release(ls_ingest_t *ing, const ls_window_t *win);

/* A snapshot of the counters; callable from any thread. */
LS_API ls_err_t ls_ingest_stats(ls_ingest_t *ing, ls_ingest_stats_t *out);

/* The consumer's partitions, in the order they were added: up to n into
 * out [n]; *count: how many there are (n = 0 asks). Any thread; published
 * after each batch of messages (at least every 100 ms) and by the watch. */
LS_API ls_err_t ls_ingest_partitions(ls_ingest_t *ing, ls_ingest_partition_t *out, int n,
                                     int *count);

/* What a snapshot keeps of partition `partition` (one of the conf's): every series of it with
 * records in flight (accepted, not yet in a window the trainer has released: partial windows, the
 * last target of each window handed out, windows queued or taken and not released, flushed ones
 * included), each through fn with all of those records; and *next, the offset of its next unread
 * record (one past the last record it handled, its start position if none; messages held back
 * while paused are unread), and *last (unless NULL) that record's mark (the conf's if none; -1
 * none). A consumer started at *next with those series restored forms exactly the windows not yet
 * trained, in the same per-partition order, whatever the records' age. Consistent while the
 * consumer runs (it waits for the batch in hand, milliseconds). Call from the thread that takes
 * windows. _parts: partitions [n] (next, last [n]), series in parts: windows (seq), rows held. */
LS_API ls_err_t ls_ingest_inflight(ls_ingest_t *ing, int32_t partition, int64_t *next,
                                   ls_ingest_mark_t *last, ls_inflight_fn fn, void *opaque);
LS_API ls_err_t ls_ingest_inflight_parts(ls_ingest_t *ing, int n, const int32_t *partitions,
                                         int64_t *next, ls_ingest_mark_t *last,
                                         ls_inflight_parts_fn fn, void *opaque);

/* Commits offsets [n] (next to read, Kafka's convention) of partitions [n] (the conf's) to the
 * conf's group.id, for Kafka's tools to show the lag; informational: lstream resumes from its
 * snapshots. Returns once the coordinator answered, or LS_ERR_KAFKA after commit.timeout.ms (it
 * may still land) or when it refused a partition (named). Any thread; n = 0 commits nothing.
 * _async: without the wait, a failure reported later through the warning callback, rate limited
 * (one in flight when the consumer is destroyed is abandoned): a broker outage never holds up a
 * step or an exit of a trainer whose offsets live in its snapshots. */
LS_API ls_err_t ls_ingest_commit(ls_ingest_t *ing, int n, const int32_t *partitions,
                                 const int64_t *offsets);
LS_API ls_err_t ls_ingest_commit_async(ls_ingest_t *ing, int n, const int32_t *partitions,
                                       const int64_t *offsets);

/* Records of one of the consumer's series not yet in a complete window (the rows of
 * ls_windower_pending_of; 0 with *found = 0 for a key never accepted), once a replay (stop=end)
 * has reached the end of every partition (LS_ERR_STATE before). */
LS_API ls_err_t ls_ingest_pending(ls_ingest_t *ing, const void *key, size_t key_len,
                                  int64_t *records, int *found);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_INGEST_H */
