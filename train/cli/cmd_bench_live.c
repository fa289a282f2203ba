/*
 * `lstream bench live`: how soon a forecast follows its record, live, on
 * the embedded broker. One process: a broker (librdkafka's mock cluster),
 * a trainer in live mode publishing next-record forecasts, a producer
 * writing the synthetic sine feed at a given rate, and a read_committed
 * consumer of the forecasts. Both clients are plain librdkafka (as a user's
 * would be): the producer notes when it sent each record, by the offset its
 * delivery report gives, and a forecast's headers name its record's
 * partition and offset, so each latency is exact to the microsecond.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "cli.h"

static const char *const bools[] = {"false", "true", NULL};
#include "lstream/produce.h"
#include "lstream/train.h"

#define ABOUT                                                                                      \
  "Measures produce-to-forecast latency live, on the embedded broker, and prints:\n"               \
  "  live series=N rate=R records=.. forecasts=.. forecasts_per_s=.. p50_ms=.. p99_ms=..\n"        \
  "       max_ms=.. commit_ms=.. steps=.. during_steps=..\n"                                       \
  "A trainer in live mode publishes a forecast after every record; a producer writes\n"            \
  "the sine feed of --series series at --rate records/s for --seconds; a consumer\n"               \
  "(isolation.level=read_committed) reads the forecasts. A latency is from the\n"                  \
  "producer's send to the consumer's receipt; records of the first --warmup seconds\n"             \
  "are left out. The embedded broker does not hold back uncommitted transactions:\n"               \
  "on a real cluster a read_committed consumer also waits for the commit (at most\n"               \
  "--commit-ms after a transaction's first forecast). steps: the trainer's steps;\n"               \
  "during_steps: forecasts made while one ran (--serve-thread true).\n"

#define PARTITIONS 4

/* When each record was sent: per partition, by offset (us since start). */
typedef struct sent_s {
  int64_t *us[PARTITIONS];
  int64_t cap[PARTITIONS];
} sent_t;

typedef struct live_s {
  /* Options. */
  int series, features, seconds, warmup, threads, deadline_ms, commit_ms, window, batch, hidden;
  int serve_thread; /* --serve-thread: 0 false, 1 true */
  double rate;
  /* The run. */
  const char *bootstrap;
  double t0;
  sent_t sent;
  int64_t *send_us; /* [records produced] by index (the delivery reports find them) */
  int64_t produced, delivered, cap_send;
  volatile sig_atomic_t stop_trainer;
  volatile int stop_producer;
  ls_trainer_t *tr;
  ls_err_t train_err;
} live_t;

/* Wall-clock ms since the epoch: the records' event times. */
static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(const live_t *l) {
  return (int64_t)((base_now_s() - l->t0) * 1e6);
}

/* ------------------------------------------------------------------------ */
/* The producer                                                              */

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  live_t *const l = opaque;
  int64_t const i = (int64_t)(intptr_t)m->_private;
  if (m->err || m->partition < 0 || m->partition >= PARTITIONS || m->offset < 0) return;
  sent_t *const s = &l->sent;
  int const p = m->partition;
  if (m->offset >= s->cap[p]) {
    int64_t cap = s->cap[p] ? s->cap[p] : 4096;
    while (cap <= m->offset)
      cap *= 2;
    int64_t *const g = realloc(s->us[p], (size_t)cap * sizeof *g);
    if (g == NULL) return;
    for (int64_t k = s->cap[p]; k < cap; k++)
      g[k] = -1;
    s->us[p] = g, s->cap[p] = cap;
  }
  s->us[p][m->offset] = l->send_us[i];
  l->delivered++;
}

static rd_kafka_t *client(live_t *l, rd_kafka_type_t type, const char *const *kv, int n) {
  rd_kafka_conf_t *const c = rd_kafka_conf_new();
  char err[256];
  rd_kafka_conf_set(c, "bootstrap.servers", l->bootstrap, err, sizeof err);
  for (int i = 0; i < n; i += 2)
    if (rd_kafka_conf_set(c, kv[i], kv[i + 1], err, sizeof err) != RD_KAFKA_CONF_OK) {
      cli_log(CLI_ERROR, "lstream bench live", "%s", err);
      rd_kafka_conf_destroy(c);
      return NULL;
    }
  rd_kafka_conf_set_opaque(c, l);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
  rd_kafka_t *const rk = rd_kafka_new(type, c, err, sizeof err);
  if (rk == NULL) cli_log(CLI_ERROR, "lstream bench live", "%s", err);
  return rk;
}

/* Writes the feed, series round robin, paced at the rate, until stopped. */
static void *produce_main(void *arg) {
  live_t *const l = arg;
  static const char *const kv[] = {"linger.ms", "0",           "enable.idempotence",
                                   "true",      "partitioner", "murmur2_random"};
  rd_kafka_t *const rk = client(l, RD_KAFKA_PRODUCER, kv, 6);
  ls_feed_conf_t fc;
  ls_feed_conf_default(&fc);
  fc.series = l->series, fc.features = l->features, fc.noise = 0.05;
  ls_feed_t *feed = NULL;
  float *const v = malloc((size_t)l->features * sizeof *v);
  if (rk == NULL || v == NULL || ls_feed_new(&feed, &fc) != LS_OK) l->stop_producer = 1;
  for (int64_t i = 0; !l->stop_producer; i++) {
    double const due = (double)i / l->rate;
    while (base_now_s() - l->t0 < due && !l->stop_producer)
      rd_kafka_poll(rk, 1);
    if (i == l->cap_send) break; /* sized for the run */
    int const s = (int)(i % l->series);
    char key[32];
    ls_feed_key(s, key, sizeof key);
    ls_feed_value(feed, s, i / l->series, v, NULL);
    l->send_us[i] = now_us(l);
    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("src"), RD_KAFKA_V_KEY(key, strlen(key)),
                      RD_KAFKA_V_VALUE(v, (size_t)l->features * sizeof *v),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_TIMESTAMP(wall_ms()),
                      RD_KAFKA_V_OPAQUE((void *)(intptr_t)i), RD_KAFKA_V_END);
    l->produced = i + 1;
    rd_kafka_poll(rk, 0);
  }
  if (rk != NULL) rd_kafka_flush(rk, 10000);
  if (rk != NULL) rd_kafka_destroy(rk);
  ls_feed_destroy(feed);
  free(v);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* The trainer                                                               */

static void *train_main(void *arg) {
  live_t *const l = arg;
  l->train_err = ls_trainer_run(l->tr, &l->stop_trainer, NULL, NULL);
  return NULL;
}

static ls_err_t trainer_new(live_t *l) {
  ls_train_conf_t *c = NULL;
  LS_FORWARD_IF_ERROR(ls_train_conf_new(&c));
  char F[16], T[16], B[16], H[16], threads[16], deadline[16], commit[16];
  snprintf(F, sizeof F, "%d", l->features), snprintf(T, sizeof T, "%d", l->window);
  snprintf(B, sizeof B, "%d", l->batch), snprintf(H, sizeof H, "%d", l->hidden);
  snprintf(threads, sizeof threads, "%d", l->threads);
  snprintf(deadline, sizeof deadline, "%d", l->deadline_ms);
  snprintf(commit, sizeof commit, "%d", l->commit_ms);
  const char *const kv[][2] = {{"brokers", l->bootstrap},
                               {"topic", "src"},
                               {"features", F},
                               {"window", T},
                               {"batch", B},
                               {"hidden", H},
                               {"threads", threads},
                               {"deadline_ms", deadline},
                               {"predictions_topic", "preds"},
                               {"predictions_commit_ms", commit},
                               {"serve_thread", l->serve_thread ? "true" : "false"}};
  ls_err_t err = LS_OK;
  for (size_t i = 0; i < sizeof kv / sizeof kv[0] && err == LS_OK; i++)
    err = ls_train_conf_set(c, kv[i][0], kv[i][1]);
  /* librdkafka's mock broker answers a fetch only when fetch.wait.max.ms
   * is up, whatever arrives meanwhile: wait little. */
  if (err == LS_OK) err = ls_train_conf_set_kafka(c, "fetch.wait.max.ms=1");
  if (err == LS_OK) err = ls_trainer_new(c, &l->tr);
  ls_train_conf_destroy(c);
  return err;
}

/* ------------------------------------------------------------------------ */
/* The consumer of forecasts, and the figures                                */

/* A header's value as a number, or -1. */
static int64_t header(const rd_kafka_message_t *m, const char *name) {
  rd_kafka_headers_t *h = NULL;
  const void *v = NULL;
  size_t n = 0;
  char text[32];
  if (rd_kafka_message_headers(m, &h) || rd_kafka_header_get_last(h, name, &v, &n) || n == 0 ||
      n >= sizeof text)
    return -1;
  memcpy(text, v, n);
  text[n] = '\0';
  return strtoll(text, NULL, 10);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t const x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Reads forecasts until every record produced has one or 10 s pass after
 * the producer stopped; latencies [*n] (us) of the records sent after the
 * warm-up. */
static int64_t *consume(live_t *l, rd_kafka_t *rk, pthread_t producer, int64_t *n,
                        int64_t *received, double *span) {
  int64_t cap = 1 << 16, k = 0;
  int64_t *lat = malloc((size_t)cap * sizeof *lat);
  int64_t(*got)[3] = malloc((size_t)cap * sizeof *got); /* partition, offset, receipt us */
  double const end = l->t0 + l->seconds, first = l->t0 + l->warmup;
  int joined = 0;
  double last = 0;
  while (lat != NULL && got != NULL) {
    if (!joined && base_now_s() >= end) {
      l->stop_producer = 1;
      pthread_join(producer, NULL);
      joined = 1;
    }
    if (joined && (k >= l->produced || base_now_s() > end + 10)) break;
    rd_kafka_message_t *const m = rd_kafka_consumer_poll(rk, 10);
    if (m == NULL) continue;
    int64_t const p = m->err ? -1 : header(m, "lstream-partition");
    int64_t const o = m->err ? -1 : header(m, "lstream-offset");
    if (p >= 0 && p < PARTITIONS && o >= 0) {
      if (k == cap) {
        cap *= 2;
        got = realloc(got, (size_t)cap * sizeof *got);
        lat = realloc(lat, (size_t)cap * sizeof *lat);
        if (got == NULL || lat == NULL) break;
      }
      got[k][0] = p, got[k][1] = o, got[k][2] = now_us(l);
      k++;
      last = base_now_s();
    }
    rd_kafka_message_destroy(m);
  }
  *received = k;
  *span = last - first;
  *n = 0;
  for (int64_t i = 0; lat != NULL && got != NULL && i < k; i++) {
    int const p = (int)got[i][0];
    int64_t const o = got[i][1];
    int64_t const sent = o < l->sent.cap[p] ? l->sent.us[p][o] : -1;
    if (sent >= (int64_t)(l->warmup * 1e6)) lat[(*n)++] = got[i][2] - sent;
  }
  (void)first;
  free(got);
  if (lat != NULL) qsort(lat, (size_t)*n, sizeof *lat, cmp_i64);
  return lat;
}

static int run(live_t *l) {
  ls_broker_t *b = NULL;
  ls_err_t err = ls_broker_new(&b, 1, 0);
  if (err == LS_OK) err = ls_broker_topic_create(b, "src", PARTITIONS);
  if (err == LS_OK) err = ls_broker_topic_create(b, "preds", PARTITIONS);
  if (err != LS_OK) return cli_fail(err, "bench live: cannot start the embedded broker");
  l->bootstrap = ls_broker_bootstrap(b);
  if ((err = trainer_new(l)) != LS_OK) {
    ls_broker_destroy(b);
    return cli_fail(err, "bench live: cannot start the trainer");
  }
  static const char *const kv[] = {
      "group.id",           "bench-live", "isolation.level",   "read_committed",
      "enable.auto.commit", "false",      "fetch.wait.max.ms", "1"};
  rd_kafka_t *const rk = client(l, RD_KAFKA_CONSUMER, kv, 8);
  rd_kafka_topic_partition_list_t *const parts = rd_kafka_topic_partition_list_new(PARTITIONS);
  for (int p = 0; p < PARTITIONS; p++)
    rd_kafka_topic_partition_list_add(parts, "preds", p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  if (rk != NULL) rd_kafka_assign(rk, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  l->cap_send = (int64_t)(l->rate * (l->seconds + 1)) + 16;
  l->send_us = malloc((size_t)l->cap_send * sizeof *l->send_us);
  pthread_t trainer, producer;
  l->t0 = base_now_s();
  int const started =
      rk != NULL && l->send_us != NULL && pthread_create(&trainer, NULL, train_main, l) == 0;
  int rc = started ? CLI_EXIT_OK : cli_fail(LS_ERR_NOMEM, "bench live: cannot start");
  if (started && pthread_create(&producer, NULL, produce_main, l) != 0) {
    l->stop_trainer = 1;
    pthread_join(trainer, NULL);
    rc = cli_fail(LS_ERR_NOMEM, "bench live: cannot start the producer");
  } else if (started) {
    int64_t n = 0, received = 0;
    double span = 0;
    int64_t *const lat = consume(l, rk, producer, &n, &received, &span);
    l->stop_trainer = 1;
    pthread_join(trainer, NULL);
    if (l->train_err != LS_OK) rc = cli_fail(l->train_err, "bench live: training failed");
    if (rc == CLI_EXIT_OK && (lat == NULL || n == 0))
      rc = cli_fail(LS_ERR_STATE, "bench live: no forecast of a record after the warm-up");
    ls_train_summary_t sum = {0};
    if (rc == CLI_EXIT_OK && (err = ls_trainer_summary(l->tr, &sum)) != LS_OK)
      rc = cli_fail(err, "bench live: no summary");
    if (rc == CLI_EXIT_OK)
      printf("live series=%d rate=%.0f records=%" PRId64 " forecasts=%" PRId64
             " forecasts_per_s=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f commit_ms=%d"
             " steps=%" PRId64 " during_steps=%" PRId64 "\n",
             l->series, l->rate, l->produced, received, span > 0 ? (double)n / span : 0.0,
             (double)lat[n / 2] / 1e3, (double)lat[(n * 99) / 100] / 1e3, (double)lat[n - 1] / 1e3,
             l->commit_ms, sum.steps, sum.predictions_during_steps);
    free(lat);
  }
  if (rk != NULL) {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
  ls_trainer_destroy(l->tr);
  ls_broker_destroy(b);
  for (int p = 0; p < PARTITIONS; p++)
    free(l->sent.us[p]);
  free(l->send_us);
  return rc;
}

/* The options, into o [14]. */
static void live_opts(live_t *l, cli_opt_t *o) {
  cli_opt_t const opts[] = {
      {.name = "series",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &l->series,
       .value = BASE_V_INT(1, 1000000),
       .help = "series written round robin"},
      {.name = "rate",
       .arg = "R",
       .kind = CLI_VALUE,
       .dst = &l->rate,
       .value = BASE_V_DBL(1, 1e7),
       .help = "records per second, all series"},
      {.name = "seconds",
       .arg = "S",
       .kind = CLI_VALUE,
       .dst = &l->seconds,
       .value = BASE_V_INT(1, 3600),
       .help = "how long the producer writes"},
      {.name = "warmup",
       .arg = "S",
       .kind = CLI_VALUE,
       .dst = &l->warmup,
       .value = BASE_V_INT(0, 3600),
       .help = "seconds of records left out of the figures"},
      {.name = "features",
       .arg = "F",
       .kind = CLI_VALUE,
       .dst = &l->features,
       .value = BASE_V_INT(1, 64),
       .help = "values per record"},
      {.name = "window",
       .arg = "T",
       .kind = CLI_VALUE,
       .dst = &l->window,
       .value = BASE_V_INT(1, 4096),
       .help = "the trainer's window"},
      {.name = "batch",
       .arg = "B",
       .kind = CLI_VALUE,
       .dst = &l->batch,
       .value = BASE_V_INT(1, 1 << 20),
       .help = "the trainer's batch"},
      {.name = "hidden",
       .arg = "H",
       .kind = CLI_VALUE,
       .dst = &l->hidden,
       .value = BASE_V_INT(1, 16384),
       .help = "the trainer's hidden size"},
      {.name = "threads",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &l->threads,
       .value = BASE_V_INT(0, 4096),
       .help = "the trainer's threads"},
      {.name = "deadline-ms",
       .arg = "MS",
       .kind = CLI_VALUE,
       .dst = &l->deadline_ms,
       .value = BASE_V_INT(1, 3600000),
       .help = "the trainer's live step deadline"},
      {.name = "commit-ms",
       .arg = "MS",
       .kind = CLI_VALUE,
       .dst = &l->commit_ms,
       .value = BASE_V_INT(0, 600000),
       .help = "the forecasts' transactions commit this often"},
      {.name = "serve-thread",
       .arg = "BOOL",
       .kind = CLI_VALUE,
       .dst = &l->serve_thread,
       .value = BASE_V_CHOICE(bools),
       .help = "the trainer's --serve-thread (true: forecasts made while a step runs)"},
      {0},
  };
  memcpy(o, opts, sizeof opts);
}

int cmd_bench_live(int argc, char **argv) {
  live_t l = {.series = 100,
              .features = 2,
              .seconds = 10,
              .warmup = 2,
              .threads = 1,
              .deadline_ms = 200,
              .commit_ms = 100,
              .window = 16,
              .batch = 64,
              .hidden = 64,
              .rate = 1000,
              .serve_thread = 1};
  cli_opt_t opts[14];
  live_opts(&l, opts);
  cli_spec_t const spec = {
      "bench live", "[--series N] [--rate R] [--seconds S] [OPTIONS]", ABOUT, opts, NULL, 0};
  cli_args_t args;
  int rc = cli_parse(&spec, argc, argv, &args);
  if (rc == CLI_EXIT_OK && l.warmup >= l.seconds)
    rc = cli_usage_error("bench live", "--warmup %d must be shorter than --seconds %d", l.warmup,
                         l.seconds);
  if (rc == CLI_EXIT_OK) rc = run(&l);
  return rc == CLI_DONE ? CLI_EXIT_OK : rc;
}
