/*
 * `lstream bench ingest`: the speed of decode + validate + window (no
 * training), either consuming a topic from its beginning to its end, or on
 * records generated in memory first (one core, no Kafka).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli.h"
#include "lstream/ingest.h"
#include "lstream/produce.h"
#include "progress.h"

#define ABOUT                                                                                      \
  "Times decoding, validation and windowing, without training, and prints one line:\n"             \
  "  ingest format=f32 records=N seconds=S records_per_s=R windows=W\n"                            \
  "\n"                                                                                             \
  "With --brokers, consumes every partition of the topic from its beginning to the\n"              \
  "high watermarks read at start, as the trainer would (progress on stderr).\n"                    \
  "With --from-memory, first encodes N records of K series (the synthetic sine\n"                  \
  "feed) in memory, then times one thread pushing them through the windower; the\n"                \
  "median of 3 passes is reported.\n"

typedef struct bench_args_s {
  const char *brokers, *topic;
  ls_format_t format;
  int window, features, from_memory, series;
  int64_t records;
  cli_kafka_props_t props;
  char schema_path[64]; /* avro from a topic: the ticks' schema, for the consumer; removed after */
} bench_args_t;

static void print_result(const bench_args_t *a, int64_t records, double seconds, int64_t windows) {
  printf("ingest format=%s records=%" PRId64 " seconds=%.3f records_per_s=%.0f windows=%" PRId64
         "\n",
         ls_format2str(a->format), records, seconds, seconds > 0 ? (double)records / seconds : 0.0,
         windows);
  fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* From memory                                                               */

/* N encoded records, series round robin: value i in arena[at[i], at[i+1]). */
typedef struct records_s {
  char *arena;
  size_t *at; /* [N + 1] */
  char (*keys)[16];
} records_t;

static void records_free(records_t *r) {
  free(r->arena);
  free(r->at);
  free(r->keys);
}

/* The record spec of a's format: json and avro are ticks (ls_ticks_spec),
 * their key and time in the value. */
static ls_err_t spec_of(const bench_args_t *a, ls_ticks_t *t) {
  if (a->format == LS_FORMAT_JSON || a->format == LS_FORMAT_AVRO)
    return ls_ticks_spec(a->format, a->features, t);
  ls_record_spec_init(&t->spec);
  t->spec.format = a->format;
  t->spec.features = a->features;
  return LS_OK;
}

static int records_make(const bench_args_t *a, records_t *r) {
  int const F = a->features, K = a->series;
  int64_t const N = a->records;
  size_t const per =
      a->format == LS_FORMAT_F32 ? 4 * (size_t)F : (LS_CSV_VALUE_MAX + 16) * (size_t)F + 64;
  ls_ticks_t ticks;
  ls_decoder_t *enc = NULL;
  ls_err_t e = spec_of(a, &ticks);
  if (e == LS_OK) e = ls_decoder_new(&enc, &ticks.spec);
  if (e != LS_OK)
    return cli_fail(e, "bench ingest: cannot encode %s records", ls_format2str(a->format));
  r->arena = malloc((size_t)N * per);
  r->at = malloc(((size_t)N + 1) * sizeof *r->at);
  r->keys = malloc((size_t)K * sizeof *r->keys);
  float *const v = malloc((size_t)F * sizeof *v);
  ls_feed_conf_t fc;
  ls_feed_conf_default(&fc);
  fc.series = K;
  fc.features = F;
  ls_feed_t *feed = NULL;
  ls_err_t err = r->arena && r->at && r->keys && v ? ls_feed_new(&feed, &fc) : LS_ERR_NOMEM;
  for (int s = 0; s < K && err == LS_OK; s++)
    if (ls_feed_key(s, r->keys[s], sizeof r->keys[s]) < 0)
      err = ls_error_set(LS_ERR_INVALID_ARG, "series key %d does not fit", s);
  r->at[0] = 0;
  for (int64_t i = 0; i < N && err == LS_OK; i++) {
    err = ls_feed_value(feed, (int)(i % K), i / K, v, NULL);
    size_t len = 0;
    if (err == LS_OK)
      err = ls_decoder_encode(enc, r->keys[i % K], strlen(r->keys[i % K]),
                              INT64_C(1704067200000) + 1000 * (i / K), v, r->arena + r->at[i], per,
                              &len);
    r->at[i + 1] = r->at[i] + len;
  }
  ls_feed_destroy(feed);
  ls_decoder_destroy(enc);
  free(v);
  if (err != LS_OK) return cli_fail(err, "cannot generate %" PRId64 " records", N);
  return CLI_EXIT_OK;
}

/* One pass: every record through a new windower. Returns seconds. */
static double records_pass(const bench_args_t *a, const records_t *r, int64_t *windows,
                           ls_err_t *err) {
  ls_windower_t *w = NULL;
  ls_ticks_t ticks;
  *err = spec_of(a, &ticks);
  if (*err == LS_OK) *err = ls_windower_new_spec(&w, &ticks.spec, a->window);
  if (*err != LS_OK) return 0.0;
  int64_t n_windows = 0;
  int const K = a->series;
  double const t0 = base_now_s();
  for (int64_t i = 0; i < a->records; i++) {
    int const s = (int)(i % K);
    ls_record_t const rec = {
        r->keys[s], strlen(r->keys[s]), r->arena + r->at[i], r->at[i + 1] - r->at[i], s % 8, i,
        i / K};
    const ls_window_t *win = NULL;
    ls_reject_t const rej = ls_windower_push(w, &rec, &win);
    if (rej != LS_REJECT_NONE) {
      *err = ls_error_set(LS_ERR_CORRUPT, "generated record %" PRId64 " was rejected (%s)", i,
                          ls_reject2str(rej));
      break;
    }
    n_windows += win != NULL;
  }
  double const seconds = base_now_s() - t0;
  ls_windower_destroy(w);
  *windows = n_windows;
  return seconds;
}

static int bench_from_memory(const bench_args_t *a) {
  records_t r = {0};
  int rc = records_make(a, &r);
  double t[3];
  int64_t windows = 0;
  for (int pass = 0; pass < 3 && rc == CLI_EXIT_OK; pass++) {
    ls_err_t err;
    t[pass] = records_pass(a, &r, &windows, &err);
    if (err != LS_OK) rc = cli_fail(err, "bench ingest --from-memory");
  }
  if (rc == CLI_EXIT_OK) print_result(a, a->records, cli_median(t, 3), windows);
  records_free(&r);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* From a topic                                                              */

static void print_warning(void *opaque, const char *message) {
  cli_log(CLI_WARN, "lstream bench ingest", "%s", message);
}

/* The consumer's configuration: every partition from its beginning, to the
 * high watermarks. */
static int conf_make(bench_args_t *a, ls_ingest_conf_t **out) {
  ls_ingest_settings_t s;
  ls_ingest_settings_init(&s);
  s.topic = a->topic;
  s.format = a->format;
  s.features = a->features;
  ls_ticks_t ticks;
  char *const schema_path = a->schema_path;
  int fd = -1;
  if (a->format == LS_FORMAT_JSON || a->format == LS_FORMAT_AVRO) {
    ls_err_t const e = ls_ticks_spec(a->format, a->features, &ticks);
    if (e != LS_OK) return cli_fail(e, "bench ingest");
    s.fields = ticks.fields, s.key_field = "sym", s.time_field = "ts";
  }
  if (a->format == LS_FORMAT_AVRO) { /* the consumer reads its schema from a file */
    snprintf(schema_path, sizeof a->schema_path, "/tmp/lstream-bench-schema-XXXXXX");
    fd = mkstemp(schema_path);
    size_t const n = strlen(ticks.schema);
    if (fd < 0 || write(fd, ticks.schema, n) != (ssize_t)n) {
      if (fd >= 0) close(fd), unlink(schema_path);
      schema_path[0] = '\0';
      return cli_fail(LS_ERR_IO, "bench ingest: cannot write the ticks' schema to %s", schema_path);
    }
    close(fd);
    s.avro_schema = schema_path;
  }
  s.window = a->window;
  s.stop_at_end = 1;
  s.queue_windows = 4096;
  ls_ingest_conf_t *c = NULL;
  ls_err_t err = ls_ingest_conf_new(&c);
  if (err == LS_OK) err = ls_ingest_conf_set_settings(c, &s);
  char servers[1024];
  snprintf(servers, sizeof servers, "bootstrap.servers=%s", a->brokers);
  if (err == LS_OK) err = ls_ingest_conf_set_settings(c, &s);
  if (err == LS_OK) err = ls_ingest_conf_set_kafka(c, servers);
  for (int i = 0; i < a->props.n && err == LS_OK; i++)
    err = ls_ingest_conf_set_kafka(c, a->props.items[i]);
  if (err == LS_OK) err = ls_ingest_conf_set_warn_cb(c, print_warning, NULL);
  int32_t partitions = 0;
  if (err == LS_OK) err = ls_ingest_topic_partitions(c, &partitions);
  ls_start_t const beginning = {LS_START_BEGINNING, 0};
  for (int32_t p = 0; p < partitions && err == LS_OK; p++)
    err = ls_ingest_conf_add_partition(c, p, beginning);
  if (err != LS_OK) {
    ls_ingest_conf_destroy(c);
    return cli_fail(err, "bench ingest: topic '%s' on %s", a->topic, a->brokers);
  }
  *out = c;
  return CLI_EXIT_OK;
}

static int bench_topic(bench_args_t *a) {
  ls_ingest_conf_t *c = NULL;
  int rc = conf_make(a, &c);
  if (rc != CLI_EXIT_OK) return rc;
  double const t0 = base_now_s();
  ls_ingest_t *ing = NULL;
  ls_err_t err = ls_ingest_new(&ing, c);
  ls_ingest_conf_destroy(c);
  if (a->schema_path[0]) unlink(a->schema_path); /* read by ls_ingest_new */
  if (err != LS_OK) return cli_fail(err, "bench ingest: cannot start consuming '%s'", a->topic);
  cli_progress_t bar;
  cli_progress_init(&bar, "ingest", "records");
  ls_ingest_stats_t st = {0};
  for (;;) {
    ls_next_t what;
    const ls_window_t *win = NULL;
    err = ls_ingest_next(ing, 100, &what, &win);
    if (err != LS_OK || what == LS_NEXT_END) break;
    ls_ingest_release(ing, win);
    ls_ingest_stats(ing, &st);
    cli_progress_update(&bar, st.progress_done, st.progress_total);
  }
  double const seconds = base_now_s() - t0;
  cli_progress_finish(&bar);
  ls_ingest_stats(ing, &st);
  ls_ingest_destroy(ing);
  if (err != LS_OK) return cli_fail(err, "bench ingest: consuming '%s' failed", a->topic);
  int64_t rejected = 0;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    rejected += st.w.rejected[r];
  if (rejected > 0)
    cli_log(CLI_WARN, "lstream bench ingest", "%" PRId64 " of %" PRId64 " records were rejected",
            rejected, st.w.records);
  print_result(a, st.w.records, seconds, st.w.windows);
  return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */

int cmd_bench_ingest(int argc, char **argv) {
  bench_args_t a = {
      .format = LS_FORMAT_F32, .window = 32, .features = 4, .series = 1000, .records = 4000000};
  cli_opt_t const opts[] = {
      {.name = "brokers",
       .arg = "ADDR",
       .kind = CLI_TEXT,
       .dst = &a.brokers,
       .help = "bootstrap servers (host:port,...)"},
      {.name = "topic",
       .arg = "NAME",
       .kind = CLI_TEXT,
       .dst = &a.topic,
       .help = "the topic to read"},
      {.name = "format",
       .arg = "FMT",
       .kind = CLI_VALUE,
       .dst = &a.format,
       .value = BASE_V_CHOICE(ls_format_names),
       .help = "record values: f32, csv, or json or avro ticks\n"
               "(`lstream produce --format json|avro`'s)"},
      {.name = "window",
       .arg = "T",
       .kind = CLI_VALUE,
       .dst = &a.window,
       .value = BASE_V_INT(1, LS_WINDOW_MAX),
       .help = "steps per window"},
      {.name = "features",
       .arg = "F",
       .kind = CLI_VALUE,
       .dst = &a.features,
       .value = BASE_V_INT(1, LS_FEATURES_MAX),
       .help = "values per record"},
      {.short_name = 'X',
       .arg = "key=value",
       .kind = CLI_CALL,
       .dst = &a.props,
       .call = cli_kafka_props_add,
       .help = "a librdkafka property (repeatable)"},
      {.name = "kafka-config",
       .arg = "FILE",
       .kind = CLI_CALL,
       .dst = &a.props,
       .call = cli_kafka_props_load,
       .help = "librdkafka properties, key=value lines"},
      {.name = "from-memory",
       .kind = CLI_FLAG,
       .dst = &a.from_memory,
       .help = "no Kafka: records generated in memory"},
      {.name = "records",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &a.records,
       .value = BASE_V_I64(1, (double)(INT64_C(1) << 31)),
       .help = "records to generate"},
      {.name = "series",
       .arg = "K",
       .kind = CLI_VALUE,
       .dst = &a.series,
       .value = BASE_V_INT(1, LS_FEED_MAX_SERIES),
       .help = "series they belong to"},
      {0},
  };
  cli_spec_t const spec = {
      "bench ingest",
      "--brokers ADDR --topic NAME [--format f32|csv|json|avro]\n"
      "                            [--window T] [--features F] [-X key=value]...\n"
      "                            [--kafka-config FILE]\n"
      "       lstream bench ingest --from-memory [--records N] [--series K]\n"
      "                            [--format f32|csv|json|avro] [--window T] [--features F]",
      ABOUT,
      opts,
      NULL,
      0};
  cli_args_t args;
  int rc = cli_parse(&spec, argc, argv, &args);
  if (rc == CLI_EXIT_OK && !a.from_memory && (a.brokers == NULL || a.topic == NULL))
    rc = cli_usage_error("bench ingest", "give --brokers and --topic, or --from-memory");
  if (rc == CLI_EXIT_OK) rc = a.from_memory ? bench_from_memory(&a) : bench_topic(&a);
  cli_kafka_props_free(&a.props);
  return rc == CLI_DONE ? CLI_EXIT_OK : rc;
}
