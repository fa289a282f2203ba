/*
 * `lstream produce`: writes a reproducible synthetic market feed, or replays
 * a CSV file, into a Kafka topic (ingest's "Synthetic feed" and "Producing
 * records"). Progress goes to stderr on long runs; a final summary line of
 * key=value pairs goes to stdout.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lstream/produce.h"
#include "progress.h"

#define ABOUT                                                                                      \
  "Produces a reproducible synthetic market feed into a Kafka topic: series keyed\n"               \
  "SYM0000, SYM0001, ..., each with F features and one record per step, sent\n"                    \
  "step by step across all series; timestamps are event times that increase per\n"                 \
  "series. The same seed and options give the same records. With --csv, replays a\n"               \
  "file instead. Returns once every record is delivered (exit 1 if any is not).\n"

#define EPILOG                                                                                     \
  "Output: progress on stderr for runs longer than a second, then one line on\n"                   \
  "stdout:\n"                                                                                      \
  "  produce topic=NAME partitions=P records=N bytes=B seconds=S records_per_s=R\n"

/* Set by the first SIGINT or SIGTERM: stop sending, flush what was queued. */
static volatile sig_atomic_t produce_interrupted = 0;

static void produce_on_signal(int sig) {
  produce_interrupted = sig;
}

/* The library's progress callback: draws the bar, and asks to stop after a
 * signal. */
static int produce_on_progress(void *opaque, int64_t done, int64_t total) {
  cli_progress_update(opaque, done, total);
  return produce_interrupted != 0;
}

typedef struct produce_args_s {
  const char *brokers, *topic, *csv, *feed_option; /* feed_option: the first one given */
  ls_feed_conf_t feed;
  ls_produce_opts_t opts;
  cli_kafka_props_t props;
} produce_args_t;

/* --ar A1,A2 into the feed's ar1, ar2. */
static int parse_ar(void *opaque, const char *s) {
  ls_feed_conf_t *const c = opaque;
  static const base_value_t coef = BASE_V_DBL(-10.0, 10.0);
  char buf[128];
  const char *const comma = strchr(s, ',');
  int ok = comma != NULL && (size_t)(comma - s) < sizeof buf;
  if (ok) {
    memcpy(buf, s, (size_t)(comma - s));
    buf[comma - s] = '\0';
    ok = base_value_parse(&coef, buf, &c->ar1) == 0 &&
         base_value_parse(&coef, comma + 1, &c->ar2) == 0;
  }
  return ok ? CLI_EXIT_OK : cli_usage_error("produce", "--ar '%s': expected two numbers A1,A2", s);
}

static const char *const generators[] = {"sine", "ar2", "regime", NULL}; /* ls_gen_t order */

/* Parses the options into a; returns CLI_EXIT_OK, CLI_DONE or an exit code
 * after a message. */
static int produce_parse(int argc, char **argv, produce_args_t *a) {
  char ar_def[64];
  ls_feed_conf_t *const c = &a->feed;
  const char **const feed = &a->feed_option;
  snprintf(ar_def, sizeof ar_def, "%g,%g", c->ar1, c->ar2);
  /* An option a row or two (clang-format would give each field a line). */
  /* clang-format off */
  cli_opt_t const opts[] = {
      {.name = "brokers", .arg = "ADDR", .kind = CLI_TEXT, .dst = &a->brokers,
       .flags = CLI_REQUIRED, .help = "bootstrap servers, host:port[,host:port...] (required)"},
      {.name = "topic", .arg = "NAME", .kind = CLI_TEXT, .dst = &a->topic, .flags = CLI_REQUIRED,
       .help = "topic to write (required); a cluster that auto-creates\n"
               "topics (the embedded broker does) creates it"},
      {.name = "format", .arg = "F", .kind = CLI_VALUE, .dst = &a->opts.format,
       .value = BASE_V_CHOICE(ls_format_names),
       .help = "value format: f32 (F little-endian float32), csv\n"
               "(F decimal numbers separated by commas), or ticks as\n"
               "a feed sends them: json ({\"sym\":KEY,\"ts\":ISO 8601,\n"
               "\"px\":..,\"qty\":..,\"bid\":..,\"ask\":..,\"f4\":..}) or avro\n"
               "(the same fields, ts in ms, plain binary; the schema:\n"
               "ls_ticks_spec); read them with --fields px,... --key-field\n"
               "sym --time-field ts"},
      {.name = "rate", .arg = "R", .kind = CLI_VALUE, .dst = &a->opts.rate,
       .value = BASE_V_DBL(0.0, 1e9), .help = "at most R records/s; 0: as fast as possible"},
      {.short_name = 'X', .arg = "key=value", .kind = CLI_CALL, .dst = &a->props,
       .call = cli_kafka_props_add,
       .help = "a librdkafka producer property (repeatable); overrides\n"
               "lstream's defaults: compression.type=lz4, linger.ms=20,\n"
               "queue.buffering.max.messages=500000,\n"
               "enable.idempotence=true, partitioner=murmur2_random\n"
               "(the Java client's: a key always goes to the same\n"
               "partition)"},
      {.name = "kafka-config", .arg = "FILE", .kind = CLI_CALL, .dst = &a->props,
       .call = cli_kafka_props_load,
       .help = "librdkafka properties, one key=value a line ('#'\n"
               "comments); applied in order with -X, later ones win"},
      {.name = "csv", .arg = "FILE", .kind = CLI_TEXT, .dst = &a->csv,
       .help = "replay FILE instead: lines series,time_ms,v1,...,vF\n"
               "(same F on every line; blank lines, '#' comments and a\n"
               "first line starting with 'series,' skipped). The whole\n"
               "file is checked first: a bad line is reported as\n"
               "FILE:LINE and nothing is sent. Feed options do not apply."},
      {.help = "Feed options:"},
      {.name = "series", .arg = "N", .kind = CLI_VALUE, .dst = &c->series, .seen = feed,
       .value = BASE_V_INT(1, LS_FEED_MAX_SERIES), .help = "number of series"},
      {.name = "features", .arg = "F", .kind = CLI_VALUE, .dst = &c->features, .seen = feed,
       .value = BASE_V_INT(1, LS_FEATURES_MAX), .help = "values per record"},
      {.name = "records-per-series", .arg = "K", .kind = CLI_VALUE, .dst = &c->records_per_series,
       .seen = feed, .value = BASE_V_I64(1, (double)INT64_MAX), .help = "steps per series"},
      {.name = "generator", .arg = "G", .kind = CLI_VALUE, .dst = &c->generator, .seen = feed,
       .value = BASE_V_CHOICE(generators),
       .help = "sine: sin(2 pi k/P + phase) + noise, period P\n"
               "  in [16,128) steps and phase random per series and\n"
               "  feature;\n"
               "ar2: x[k] = a1 x[k-1] + a2 x[k-2] + noise (stationary);\n"
               "regime: a random walk switching between a calm regime\n"
               "  (drift +0.01, vol = noise) and a turbulent one (drift\n"
               "  -0.02, vol = 3 x noise), switch probability 0.02/step"},
      {.name = "noise", .arg = "S", .kind = CLI_VALUE, .dst = &c->noise, .seen = feed,
       .value = BASE_V_DBL(0.0, 1e6), .help = "standard deviation of the Gaussian noise"},
      {.name = "ar", .arg = "A1,A2", .kind = CLI_CALL, .dst = c, .call = parse_ar, .seen = feed,
       .def = ar_def,
       .help = "ar2 coefficients (the default: a damped cycle of\n"
               "~11 steps); must be stationary: |A2| < 1, A1 + A2 < 1,\n"
               "A2 - A1 < 1"},
      {.name = "seed", .arg = "S", .kind = CLI_VALUE, .dst = &c->seed, .seen = feed,
       .value = BASE_V_U64, .help = "random seed, 0..2^64-1"},
      {.name = "start-ms", .arg = "MS", .kind = CLI_VALUE, .dst = &c->start_ms, .seen = feed,
       .value = BASE_V_I64(0, (double)INT64_MAX),
       .help = "event time of step 0, ms since the epoch (the default is\n"
               "2024-01-01 UTC; against a real cluster use a recent time:\n"
               "retention may delete older records)"},
      {.name = "step-ms", .arg = "MS", .kind = CLI_VALUE, .dst = &c->step_ms, .seen = feed,
       .value = BASE_V_I64(1, (double)INT64_MAX), .help = "event time between steps"},
      {.name = "offset", .arg = "A", .kind = CLI_VALUE, .dst = &c->offset, .seen = feed,
       .value = BASE_V_DBL(-1e30, 1e30),
       .help = "values written are A + S x (x the generator's, in\n"
               "float32): a feed far from 0, for the normaliser"},
      {.name = "scale", .arg = "S", .kind = CLI_VALUE, .dst = &c->scale, .seen = feed,
       .value = BASE_V_DBL(-1e30, 1e30), .help = "see --offset (not 0)"},
      {0},
  };
  cli_spec_t const spec = {"produce",
                           "--brokers ADDR --topic NAME [FEED OPTIONS | --csv FILE]\n"
                           "                       [--format f32|csv] [--rate R] [-X key=value]...\n"
                           "                       [--kafka-config FILE]",
                           ABOUT, opts, EPILOG, 0};
  /* clang-format on */
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc != CLI_EXIT_OK) return rc;
  if (a->csv != NULL && a->feed_option != NULL)
    return cli_usage_error("produce", "--%s is a feed option and does not apply with --csv",
                           a->feed_option);
  return CLI_EXIT_OK;
}

int cmd_produce(int argc, char **argv) {
  produce_args_t a = {0};
  ls_feed_conf_default(&a.feed);
  ls_produce_opts_default(&a.opts);
  int rc = produce_parse(argc, argv, &a);
  if (rc == CLI_DONE) {
    cli_kafka_props_free(&a.props);
    return CLI_EXIT_OK;
  }
  ls_feed_t *feed = NULL;
  ls_producer_t *producer = NULL;
  ls_err_t err = LS_OK;
  if (rc == CLI_EXIT_OK && a.csv == NULL && (err = ls_feed_new(&feed, &a.feed)) != LS_OK)
    rc = cli_fail(err, "bad feed options");
  /* json and avro: ticks (ls_ticks_spec), key and time in the value. */
  ls_ticks_t ticks;
  ls_decoder_t *encoder = NULL;
  if (rc == CLI_EXIT_OK && (a.opts.format == LS_FORMAT_JSON || a.opts.format == LS_FORMAT_AVRO)) {
    err = ls_ticks_spec(a.opts.format, a.feed.features, &ticks);
    if (err == LS_OK) err = ls_decoder_new(&encoder, &ticks.spec);
    if (err != LS_OK) rc = cli_fail(err, "cannot encode %s ticks", ls_format2str(a.opts.format));
    a.opts.encoder = encoder;
  }
  if (rc == CLI_EXIT_OK &&
      (err = ls_producer_new(&producer, a.brokers, a.topic, (const char *const *)a.props.items,
                             a.props.n)) != LS_OK)
    rc = cli_fail(err, "cannot start producing to '%s' at %s", a.topic, a.brokers);
  if (rc == CLI_EXIT_OK) {
    /* One-shot handlers: a second Ctrl-C kills at once, even mid-flush. */
    struct sigaction sa = {.sa_handler = produce_on_signal, .sa_flags = SA_RESETHAND};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    cli_progress_t bar;
    cli_progress_init(&bar, "produce", "records");
    a.opts.progress = produce_on_progress;
    a.opts.progress_opaque = &bar;
    ls_produce_stats_t st = {0};
    err = a.csv != NULL ? ls_csv_replay(a.csv, producer, &a.opts, &st)
                        : ls_feed_produce(feed, producer, &a.opts, &st);
    cli_progress_finish(&bar);
    if (err != LS_OK)
      rc = cli_fail(err, "producing to '%s' failed after %" PRId64 " delivered records", a.topic,
                    st.records);
    else if (st.stopped)
      rc = cli_fail(LS_OK, "interrupted (%s): %" PRId64 " records were delivered to '%s'",
                    strsignal(produce_interrupted), st.records, a.topic);
    else
      printf("produce topic=%s partitions=%d records=%" PRId64 " bytes=%" PRId64
             " seconds=%.3f records_per_s=%.0f\n",
             a.topic, ls_producer_partitions(producer), st.records, st.bytes, st.seconds,
             st.seconds > 0.0 ? (double)st.records / st.seconds : 0.0);
  }
  ls_producer_destroy(producer);
  ls_feed_destroy(feed);
  ls_decoder_destroy(encoder);
  cli_kafka_props_free(&a.props);
  return rc;
}
