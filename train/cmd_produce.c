/*
 * `lstream produce`: writes a reproducible synthetic market feed, or replays
 * a CSV file, into a Kafka topic (ingest's "Synthetic feed" and "Producing
 * records"). Progress goes to stderr on long runs; a final summary line of
 * key=value pairs goes to stdout.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lstream/ingest.h"
#include "progress.h"

static void usage(FILE *f) {
  ls_feed_conf_t d;
  ls_feed_conf_default(&d);
  fprintf(f,
          "Usage: lstream produce --brokers ADDR --topic NAME [FEED OPTIONS | --csv FILE]\n"
          "                       [--format f32|csv] [--rate R] [-X key=value]...\n"
          "                       [--kafka-config FILE]\n"
          "\n"
          "Produces a reproducible synthetic market feed into a Kafka topic: series keyed\n"
          "SYM0000, SYM0001, ..., each with F features and one record per step, sent\n"
          "step by step across all series; timestamps are event times that increase per\n"
          "series."
          "The same seed and options give the same records. With --csv, replays a file\n"
          "instead. Returns once every record is delivered (exit 1 if any is not).\n"
          "\n"
          "  --brokers ADDR         bootstrap servers, host:port[,host:port...] (required)\n"
          "  --topic NAME           topic to write (required); a cluster that auto-creates\n"
          "                         topics (the embedded broker does) creates it\n"
          "  --format F             value format: f32 (F little-endian float32, default) or\n"
          "                         csv (F decimal numbers separated by commas)\n"
          "  --rate R               at most R records/s (default 0: as fast as possible)\n"
          "  -X key=value           a librdkafka producer property (repeatable); overrides\n"
          "                         lstream's defaults: compression.type=lz4, linger.ms=20,\n"
          "                         queue.buffering.max.messages=500000,\n"
          "                         enable.idempotence=true, partitioner=murmur2_random\n"
          "                         (the Java client's: a key always goes to the same\n"
          "                         partition)\n"
          "  --kafka-config FILE    librdkafka properties, one key=value a line ('#'\n"
          "                         comments); applied in order with -X, later ones win\n"
          "\n"
          "Feed options:\n"
          "  --series N             number of series (default %d)\n"
          "  --features F           values per record (default %d, max %d)\n"
          "  --records-per-series K steps per series (default %" PRId64 ")\n"
          "  --generator G          sine (default): sin(2 pi k/P + phase) + noise, period P\n"
          "                           in [16,128) steps and phase random per series and\n"
          "                           feature;\n"
          "                         ar2: x[k] = a1 x[k-1] + a2 x[k-2] + noise (stationary);\n"
          "                         regime: a random walk switching between a calm regime\n"
          "                           (drift +0.01, vol = noise) and a turbulent one (drift\n"
          "                           -0.02, vol = 3 x noise), switch probability 0.02/step\n"
          "  --noise S              standard deviation of the Gaussian noise (default %g)\n"
          "  --ar A1,A2             ar2 coefficients (default %g,%g: a damped cycle of\n"
          "                         ~11 steps); must be stationary: |A2| < 1, A1 + A2 < 1,\n"
          "                         A2 - A1 < 1\n"
          "  --seed S               random seed, 0..2^64-1 (default %" PRIu64 ")\n"
          "  --start-ms MS          event time of step 0, ms since the epoch (default\n"
          "                         %" PRId64 ", 2024-01-01 UTC; against a real cluster\n"
          "                         use a recent time: retention may delete older records)\n"
          "  --step-ms MS           event time between steps (default %" PRId64 ")\n"
          "\n"
          "  --csv FILE             replay FILE instead: lines series,time_ms,v1,...,vF\n"
          "                         (same F on every line; blank lines, '#' comments and a\n"
          "                         first line starting with 'series,' skipped). The whole\n"
          "                         file is checked first: a bad line is reported as\n"
          "                         FILE:LINE and nothing is sent. Feed options do not apply.\n"
          "\n"
          "Output: progress on stderr for runs longer than a second, then one line on\n"
          "stdout:\n"
          "  produce topic=NAME partitions=P records=N bytes=B seconds=S records_per_s=R\n",
          d.series, d.features, LS_FEATURES_MAX, d.records_per_series, d.noise, d.ar1, d.ar2,
          d.seed, d.start_ms, d.step_ms);
}

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

/* Parses "A1,A2". */
static int produce_parse_ar(const char *s, double *a1, double *a2) {
  char buf[128];
  const char *const comma = strchr(s, ',');
  if (comma == NULL || (size_t)(comma - s) >= sizeof buf) return -1;
  memcpy(buf, s, (size_t)(comma - s));
  buf[comma - s] = '\0';
  return cli_parse_double(buf, -10.0, 10.0, a1) || cli_parse_double(comma + 1, -10.0, 10.0, a2) ? -1
                                                                                                : 0;
}

typedef struct produce_args_s {
  const char *brokers, *topic, *csv, *feed_option; /* feed_option: the first one given */
  ls_feed_conf_t feed;
  ls_produce_opts_t opts;
  cli_kafka_props_t props;
} produce_args_t;

/* Parses the options into a; returns CLI_EXIT_OK or an exit code after a
 * message. */
static int produce_parse(int argc, char **argv, produce_args_t *a) {
  for (int i = 1; i < argc; i++) {
    const char *const o = argv[i];
    const char *const v = i + 1 < argc ? argv[i + 1] : NULL;
    int rc = CLI_EXIT_OK;
    if (v == NULL) return cli_usage_error("produce", "option '%s' needs a value or is unknown", o);
    i++;
    if (!strcmp(o, "--brokers")) {
      a->brokers = v;
    } else if (!strcmp(o, "--topic")) {
      a->topic = v;
    } else if (!strcmp(o, "--csv")) {
      a->csv = v;
    } else if (!strcmp(o, "--format")) {
      if (ls_format_parse(v, &a->opts.format) != LS_OK)
        return cli_usage_error("produce", "--format '%s': expected f32 or csv", v);
    } else if (!strcmp(o, "--rate")) {
      if (cli_parse_double(v, 0.0, 1e9, &a->opts.rate))
        return cli_usage_error("produce", "--rate '%s': expected 0..1e9 records/s", v);
    } else if (!strcmp(o, "-X")) {
      rc = cli_kafka_props_add(&a->props, v);
    } else if (!strcmp(o, "--kafka-config")) {
      rc = cli_kafka_props_load(&a->props, v);
    } else {
      /* The feed's options. */
      if (a->feed_option == NULL) a->feed_option = o;
      ls_feed_conf_t *const c = &a->feed;
      if (!strcmp(o, "--series")) {
        if (cli_parse_int(v, 1, LS_FEED_MAX_SERIES, &c->series))
          return cli_usage_error("produce", "--series '%s': expected 1..%d", v, LS_FEED_MAX_SERIES);
      } else if (!strcmp(o, "--features")) {
        if (cli_parse_int(v, 1, LS_FEATURES_MAX, &c->features))
          return cli_usage_error("produce", "--features '%s': expected 1..%d", v, LS_FEATURES_MAX);
      } else if (!strcmp(o, "--records-per-series")) {
        if (cli_parse_i64(v, 1, INT64_MAX, &c->records_per_series))
          return cli_usage_error("produce", "--records-per-series '%s': expected >= 1", v);
      } else if (!strcmp(o, "--generator")) {
        if (ls_gen_parse(v, &c->generator) != LS_OK)
          return cli_usage_error("produce", "--generator '%s': expected sine, ar2 or regime", v);
      } else if (!strcmp(o, "--noise")) {
        if (cli_parse_double(v, 0.0, 1e6, &c->noise))
          return cli_usage_error("produce", "--noise '%s': expected 0..1e6", v);
      } else if (!strcmp(o, "--ar")) {
        if (produce_parse_ar(v, &c->ar1, &c->ar2))
          return cli_usage_error("produce", "--ar '%s': expected two numbers A1,A2", v);
      } else if (!strcmp(o, "--seed")) {
        char *end = NULL;
        c->seed = strtoull(v, &end, 10);
        if (v[0] == '-' || *end != '\0' || end == v)
          return cli_usage_error("produce", "--seed '%s': expected 0..2^64-1", v);
      } else if (!strcmp(o, "--start-ms")) {
        if (cli_parse_i64(v, 0, INT64_MAX, &c->start_ms))
          return cli_usage_error("produce", "--start-ms '%s': expected ms since the epoch", v);
      } else if (!strcmp(o, "--step-ms")) {
        if (cli_parse_i64(v, 1, INT64_MAX, &c->step_ms))
          return cli_usage_error("produce", "--step-ms '%s': expected >= 1", v);
      } else {
        return cli_usage_error("produce", "unknown option '%s'", o);
      }
    }
    if (rc != CLI_EXIT_OK) return rc;
  }
  if (a->brokers == NULL) return cli_usage_error("produce", "--brokers is required");
  if (a->topic == NULL) return cli_usage_error("produce", "--topic is required");
  if (a->csv != NULL && a->feed_option != NULL)
    return cli_usage_error("produce", "%s is a feed option and does not apply with --csv",
                           a->feed_option);
  return CLI_EXIT_OK;
}

int cmd_produce(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
  produce_args_t a = {0};
  ls_feed_conf_default(&a.feed);
  ls_produce_opts_default(&a.opts);
  int rc = produce_parse(argc, argv, &a);
  ls_feed_t *feed = NULL;
  ls_producer_t *producer = NULL;
  ls_err_t err = LS_OK;
  if (rc == CLI_EXIT_OK && a.csv == NULL && (err = ls_feed_new(&feed, &a.feed)) != LS_OK)
    rc = cli_fail(err, "bad feed options");
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
  cli_kafka_props_free(&a.props);
  return rc;
}
