/*
 * The embedded broker and the producer against a real client: `lstream
 * broker` and the library's ls_broker host librdkafka's mock cluster, the
 * feed and CSV replay write into it, and kcat (from PATH) reads back keys,
 * partitions, offsets, timestamps and values, which must match the
 * generators exactly.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lstream/produce.h"
#include "proc.h"

/* Generous: kcat and the broker start in well under a second, but the
 * machine may be loaded (and sanitizers slow everything down). */
#define CHILD_TIMEOUT_S 60.0

/* ------------------------------------------------------------------------ */
/* Reading a topic back with kcat                                            */

typedef struct rec_s {
  char key[64];
  int partition;
  int64_t offset, ts;
  size_t len;
  unsigned char value[256];
} rec_t;

/* Every record of topic, in kcat's order (per-partition offset order). The
 * value is raw bytes after "LEN:", so binary f32 values parse safely. */
static rec_t *kcat_read(const char *addr, const char *topic, int *n) {
  /* A short fetch wait: kcat -e ends once a fetch at the end returns, which
   * otherwise waits fetch.wait.max.ms (500) per round. */
  const char *const argv[] = {"kcat",      "-C",
                              "-b",        addr,
                              "-t",        topic,
                              "-e",        "-o",
                              "beginning", "-q",
                              "-X",        "fetch.wait.max.ms=20",
                              "-f",        "%k %p %o %T %S:%s\n",
                              NULL};
  proc_result_t r;
  cr_assert_eq(proc_run(argv, NULL, CHILD_TIMEOUT_S, &r), 0, "cannot run kcat");
  cr_assert_eq(r.status, 0, "kcat failed (%d): %s", r.status, r.err);
  int cap = 1024;
  rec_t *recs = malloc((size_t)cap * sizeof *recs);
  *n = 0;
  const char *p = r.out, *const end = r.out + r.out_len;
  while (p < end) {
    if (*n == cap) recs = realloc(recs, (size_t)(cap *= 2) * sizeof *recs);
    rec_t *const x = &recs[*n];
    int used = 0;
    cr_assert_eq(sscanf(p, "%63s %d %" SCNd64 " %" SCNd64 " %zu:%n", x->key, &x->partition,
                        &x->offset, &x->ts, &x->len, &used),
                 5, "bad kcat line at byte %td: %.60s", p - r.out, p);
    cr_assert(x->len <= sizeof x->value && p + used + x->len < end && p[used + x->len] == '\n',
              "bad kcat record at byte %td", p - r.out);
    memcpy(x->value, p + used, x->len);
    p += used + x->len + 1;
    (*n)++;
  }
  proc_result_free(&r);
  return recs;
}

/* Kafka's Java client partitioner: murmur2 (seed 0x9747b28c), sign bit
 * cleared, modulo the partition count. */
static int java_partition(const char *key, int partitions) {
  const unsigned char *const d = (const unsigned char *)key;
  int const len = (int)strlen(key);
  uint32_t const m = 0x5bd1e995u;
  uint32_t h = 0x9747b28cu ^ (uint32_t)len;
  for (int i = 0; i + 4 <= len; i += 4) {
    uint32_t k =
        d[i] | (uint32_t)d[i + 1] << 8 | (uint32_t)d[i + 2] << 16 | (uint32_t)d[i + 3] << 24;
    k *= m, k ^= k >> 24, k *= m;
    h *= m, h ^= k;
  }
  int const tail = len & ~3;
  switch (len & 3) {
  case 3: h ^= (uint32_t)d[tail + 2] << 16; /* fall through */
  case 2: h ^= (uint32_t)d[tail + 1] << 8;  /* fall through */
  case 1: h ^= d[tail], h *= m;
  }
  h ^= h >> 13, h *= m, h ^= h >> 15;
  return (int)((h & 0x7fffffffu) % (uint32_t)partitions);
}

/* ------------------------------------------------------------------------ */
/* Library helpers                                                           */

static ls_broker_t *broker_with_topic(int brokers, const char *topic, int partitions) {
  ls_broker_t *b = NULL;
  cr_assert_eq(ls_broker_new(&b, brokers, 0), LS_OK, "ls_broker_new: %s", ls_last_error());
  cr_assert_eq(ls_broker_topic_create(b, topic, partitions), LS_OK, "%s", ls_last_error());
  return b;
}

static ls_producer_t *producer_for(const ls_broker_t *b, const char *topic,
                                   const char *const *settings, int n) {
  ls_producer_t *p = NULL;
  cr_assert_eq(ls_producer_new(&p, ls_broker_bootstrap(b), topic, settings, n), LS_OK,
               "ls_producer_new: %s", ls_last_error());
  return p;
}

static ls_feed_conf_t feed_conf(ls_gen_t gen, int series, int features, int64_t steps) {
  ls_feed_conf_t c;
  ls_feed_conf_default(&c);
  c.generator = gen, c.series = series, c.features = features, c.records_per_series = steps;
  return c;
}

/* Produces the feed of c into a fresh topic in format fmt and returns the
 * stats; *b receives the broker (the topic is named topic). */
static ls_produce_stats_t produce_feed(ls_broker_t *b, const char *topic, const ls_feed_conf_t *c,
                                       ls_format_t fmt) {
  ls_feed_t *feed = NULL;
  cr_assert_eq(ls_feed_new(&feed, c), LS_OK, "%s", ls_last_error());
  ls_producer_t *const p = producer_for(b, topic, NULL, 0);
  ls_produce_opts_t opts;
  ls_produce_opts_default(&opts);
  opts.format = fmt;
  ls_produce_stats_t st;
  cr_assert_eq(ls_feed_produce(feed, p, &opts, &st), LS_OK, "ls_feed_produce: %s", ls_last_error());
  ls_producer_destroy(p);
  ls_feed_destroy(feed);
  return st;
}

/* Reads topic back and checks it holds exactly the feed of c: every key
 * SYM0000..; each series on one partition, the Java client's; its records
 * in step order with timestamps start + k step; values equal to the
 * generator's, bit for bit. */
static void expect_feed_in_topic(const ls_broker_t *b, const char *topic, int partitions,
                                 const ls_feed_conf_t *c, ls_format_t fmt) {
  int n = 0;
  rec_t *const recs = kcat_read(ls_broker_bootstrap(b), topic, &n);
  cr_assert_eq(n, c->series * (int)c->records_per_series, "records in %s", topic);
  ls_feed_t *feed = NULL;
  cr_assert_eq(ls_feed_new(&feed, c), LS_OK);
  int64_t *const steps = calloc((size_t)c->series, sizeof *steps);
  int64_t last_offset[64];
  for (int i = 0; i < 64; i++)
    last_offset[i] = -1;
  float want[16], got[16];
  for (int i = 0; i < n; i++) {
    const rec_t *const r = &recs[i];
    int s = -1;
    cr_assert_eq(sscanf(r->key, "SYM%4d", &s), 1, "key '%s'", r->key);
    char key[32];
    ls_feed_key(s, key, sizeof key);
    cr_assert_str_eq(r->key, key);
    cr_assert(s >= 0 && s < c->series);
    cr_assert_eq(r->partition, java_partition(r->key, partitions), "%s on partition %d", r->key,
                 r->partition);
    cr_assert_gt(r->offset, last_offset[r->partition], "offsets out of order");
    last_offset[r->partition] = r->offset;
    int64_t const k = steps[s]++;
    cr_assert_eq(r->ts, ls_feed_time(feed, k), "%s step %lld: timestamp %lld", r->key, (long long)k,
                 (long long)r->ts);
    ls_feed_value(feed, s, k, want, NULL);
    cr_assert_eq(ls_record_decode(fmt, r->value, r->len, c->features, got), LS_REJECT_NONE,
                 "%s step %lld does not decode", r->key, (long long)k);
    cr_assert(!memcmp(got, want, (size_t)c->features * sizeof *got),
              "%s step %lld: %g... differs from the generator's %g...", r->key, (long long)k,
              got[0], want[0]);
  }
  for (int s = 0; s < c->series; s++)
    cr_expect_eq(steps[s], c->records_per_series, "series %d has %lld records", s,
                 (long long)steps[s]);
  free(steps);
  free(recs);
  ls_feed_destroy(feed);
}

/* ------------------------------------------------------------------------ */
/* The feed through Kafka                                                    */

Test(produce, f32_feed_reads_back_exactly_through_kcat, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "feed_f32", 4);
  ls_feed_conf_t const c = feed_conf(LS_GEN_AR2, 7, 3, 40);
  ls_produce_stats_t const st = produce_feed(b, "feed_f32", &c, LS_FORMAT_F32);
  cr_expect_eq(st.records, 280);
  cr_expect_eq(st.bytes, 280 * (7 + 3 * 4), "keys of 7 bytes + 3 float32");
  cr_expect_eq(st.stopped, 0);
  expect_feed_in_topic(b, "feed_f32", 4, &c, LS_FORMAT_F32);
  ls_broker_destroy(b);
}

Test(produce, csv_feed_reads_back_exactly_through_kcat, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(3, "feed_csv", 5);
  ls_feed_conf_t const c = feed_conf(LS_GEN_REGIME, 11, 2, 30);
  ls_produce_stats_t const st = produce_feed(b, "feed_csv", &c, LS_FORMAT_CSV);
  cr_expect_eq(st.records, 330);
  expect_feed_in_topic(b, "feed_csv", 5, &c, LS_FORMAT_CSV);
  ls_broker_destroy(b);
}

Test(produce, same_seed_gives_the_same_topic, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "seed_a", 3);
  cr_assert_eq(ls_broker_topic_create(b, "seed_b", 3), LS_OK);
  cr_assert_eq(ls_broker_topic_create(b, "seed_c", 3), LS_OK);
  ls_feed_conf_t c = feed_conf(LS_GEN_SINE, 5, 2, 20);
  c.seed = 99;
  produce_feed(b, "seed_a", &c, LS_FORMAT_F32);
  produce_feed(b, "seed_b", &c, LS_FORMAT_F32);
  c.seed = 100;
  produce_feed(b, "seed_c", &c, LS_FORMAT_F32);
  int na, nb, nc;
  rec_t *const a = kcat_read(ls_broker_bootstrap(b), "seed_a", &na);
  rec_t *const bb = kcat_read(ls_broker_bootstrap(b), "seed_b", &nb);
  rec_t *const cc = kcat_read(ls_broker_bootstrap(b), "seed_c", &nc);
  cr_assert(na == 100 && nb == 100 && nc == 100);
  /* kcat interleaves partitions as it likes: compare per (partition, offset). */
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < na; i++)
    for (int j = 0; j < na; j++) {
      if (a[i].partition != bb[j].partition || a[i].offset != bb[j].offset) continue;
      same_ab += !strcmp(a[i].key, bb[j].key) && a[i].ts == bb[j].ts &&
                 !memcmp(a[i].value, bb[j].value, a[i].len);
      same_ac += !strcmp(a[i].key, cc[j].key) && !memcmp(a[i].value, cc[j].value, a[i].len);
    }
  cr_expect_eq(same_ab, 100, "seed 99 twice: %d of 100 records equal", same_ab);
  cr_expect_eq(same_ac, 0, "seeds 99 and 100: %d of 100 records equal", same_ac);
  free(a), free(bb), free(cc);
  ls_broker_destroy(b);
}

static int stop_at_first_call(void *opaque, int64_t done, int64_t total) {
  *(int64_t *)opaque = done;
  return 1;
}

Test(produce, rate_limit_paces_and_progress_can_stop, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "paced", 2);
  ls_feed_conf_t const c = feed_conf(LS_GEN_SINE, 10, 1, 100); /* 1000 records */
  ls_feed_t *feed = NULL;
  cr_assert_eq(ls_feed_new(&feed, &c), LS_OK);
  ls_producer_t *const p = producer_for(b, "paced", NULL, 0);
  int64_t seen = -1;
  ls_produce_opts_t opts;
  ls_produce_opts_default(&opts);
  opts.rate = 2000.0; /* 1000 records would take 0.5 s */
  opts.progress = stop_at_first_call;
  opts.progress_opaque = &seen;
  ls_produce_stats_t st;
  cr_assert_eq(ls_feed_produce(feed, p, &opts, &st), LS_OK, "%s", ls_last_error());
  cr_expect_eq(st.stopped, 1);
  /* The first progress call comes once 0.25 s have passed: at the latest
   * right after record 501 (sent no earlier than 500 / 2000 s), earlier
   * only if sending lagged behind the rate. */
  cr_expect(seen >= 1 && seen <= 501, "stopped after %lld records", (long long)seen);
  cr_expect_eq(st.records, seen, "queued records are all delivered");
  /* Record i leaves no earlier than i / rate: a lower bound, never luck. */
  cr_expect_geq(st.seconds, (double)(seen - 1) / 2000.0, "%g s for %lld records", st.seconds,
                (long long)seen);
  int n = 0;
  free(kcat_read(ls_broker_bootstrap(b), "paced", &n));
  cr_expect_eq(n, seen);
  ls_producer_destroy(p);
  ls_feed_destroy(feed);
  ls_broker_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* CSV replay                                                                */

static char *write_temp(const char *text) {
  char *const path = strdup("/tmp/lstream_test_csv_XXXXXX");
  int const fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  return path;
}

Test(produce, csv_replay_reads_back_through_kcat, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "replay", 3);
  char *const path = write_temp("series,time,a,b\n"
                                "# a comment, then a blank line\n"
                                "\n"
                                "AAPL,1000,1.5,-2\n"
                                "MSFT,1000,0.25,1e3\r\n"
                                "AAPL,2000, 3 ,4\n"
                                "AAPL,3000,5,6"); /* no final newline */
  ls_producer_t *const p = producer_for(b, "replay", NULL, 0);
  ls_produce_opts_t opts;
  ls_produce_opts_default(&opts);
  ls_produce_stats_t st;
  cr_assert_eq(ls_csv_replay(path, p, &opts, &st), LS_OK, "%s", ls_last_error());
  cr_expect_eq(st.records, 4);
  int n = 0;
  rec_t *const recs = kcat_read(ls_broker_bootstrap(b), "replay", &n);
  cr_assert_eq(n, 4);
  const float want_aapl[3][2] = {{1.5f, -2.0f}, {3.0f, 4.0f}, {5.0f, 6.0f}};
  int aapl = 0, msft = 0;
  for (int i = 0; i < n; i++) {
    float got[2];
    cr_assert_eq(ls_record_decode(LS_FORMAT_F32, recs[i].value, recs[i].len, 2, got),
                 LS_REJECT_NONE);
    if (!strcmp(recs[i].key, "AAPL")) {
      cr_expect_eq(recs[i].ts, 1000 * (aapl + 1));
      cr_expect(got[0] == want_aapl[aapl][0] && got[1] == want_aapl[aapl][1]);
      aapl++;
    } else {
      cr_expect_str_eq(recs[i].key, "MSFT");
      cr_expect(recs[i].ts == 1000 && got[0] == 0.25f && got[1] == 1000.0f);
      msft++;
    }
  }
  cr_expect(aapl == 3 && msft == 1);
  free(recs);
  ls_producer_destroy(p);
  unlink(path);
  free(path);
  ls_broker_destroy(b);
}

Test(produce, csv_replay_names_the_bad_line_and_sends_nothing, .timeout = 120) {
  static const struct {
    const char *text, *message;
  } cases[] = {
      {"a,1,2\nb,2,3,4\n", ":2: 2 values, but line 1 has 1"},
      {"a,1,2\n\nb,x,3\n", ":3: time 'x' is not a whole number"},
      {"a,1,2\nb,-5,3\n", ":2: time '-5'"},
      {",1,2\n", ":1: the series key is empty"},
      {"a,1,2,zz\n", ":1: '2,zz' is not 2 numbers"},
      {"a,1,nan\n", ":1: a value in 'nan' is NaN"},
      {"a,1\n", ":1: no values after the time"},
      {"abc\n", ":1: no comma"},
      {"# only a comment\n", "no records"},
  };
  ls_broker_t *const b = broker_with_topic(1, "bad_csv", 2);
  ls_producer_t *const p = producer_for(b, "bad_csv", NULL, 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *const path = write_temp(cases[i].text);
    cr_expect_eq(ls_csv_replay(path, p, NULL, NULL), LS_ERR_CORRUPT, "case %zu accepted", i);
    cr_expect(strstr(ls_last_error(), path) && strstr(ls_last_error(), cases[i].message),
              "case %zu: message '%s' lacks '%s'", i, ls_last_error(), cases[i].message);
    unlink(path);
    free(path);
  }
  cr_expect_eq(ls_csv_replay("/nonexistent/x.csv", p, NULL, NULL), LS_ERR_IO);
  int n = -1;
  free(kcat_read(ls_broker_bootstrap(b), "bad_csv", &n));
  cr_expect_eq(n, 0, "a bad file sent %d records", n);
  ls_producer_destroy(p);
  ls_broker_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Failures, failover, injected errors                                       */

Test(produce, undelivered_records_are_reported, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "lost", 1);
  const char *const settings[] = {"message.timeout.ms=500"};
  ls_producer_t *const p = producer_for(b, "lost", settings, 1);
  cr_assert_eq(ls_broker_set_down(b, 1), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_producer_send(p, "k", 1, 1000, "v", 1), LS_OK);
  cr_expect_eq(ls_producer_flush(p), LS_ERR_KAFKA, "an undeliverable record passed");
  cr_expect(strstr(ls_last_error(), "1 record(s) to 'lost' were not delivered") != NULL, "%s",
            ls_last_error());
  ls_producer_destroy(p);
  ls_broker_destroy(b);
}

/* Binds (with SO_REUSEADDR: past TIME_WAIT) and connects to
 * 127.0.0.1:port: the errnos (0 for success). */
static void port_probe(int port, int *bind_err, int *connect_err) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = socket(AF_INET, SOCK_STREAM, 0), on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  *bind_err = bind(fd, (const struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
  close(fd);
  fd = socket(AF_INET, SOCK_STREAM, 0);
  *connect_err = connect(fd, (const struct sockaddr *)&a, sizeof a) == 0 ? 0 : errno;
  close(fd);
}

Test(broker, a_down_brokers_port_stays_refused_and_reserved) {
  ls_broker_t *const b = broker_with_topic(2, "held", 1);
  int port = 0;
  cr_assert_eq(sscanf(ls_broker_bootstrap(b), "127.0.0.1:%d,", &port), 1, "%s",
               ls_broker_bootstrap(b));
  int bind_err, connect_err;
  port_probe(port, &bind_err, &connect_err);
  cr_expect_eq(bind_err, EADDRINUSE, "broker 1 listens: %s", strerror(bind_err));
  cr_expect_eq(connect_err, 0, "broker 1 listens: %s", strerror(connect_err));
  cr_assert_eq(ls_broker_set_down(b, 1), LS_OK, "%s", ls_last_error());
  /* Nobody else may listen there meanwhile (the port is bound), and
   * connections are refused, not accepted by whoever took it. */
  port_probe(port, &bind_err, &connect_err);
  cr_expect_eq(bind_err, EADDRINUSE, "a down broker's port was free: %s", strerror(bind_err));
  cr_expect_eq(connect_err, ECONNREFUSED, "%s", strerror(connect_err));
  cr_assert_eq(ls_broker_set_up(b, 1), LS_OK, "%s", ls_last_error());
  port_probe(port, &bind_err, &connect_err);
  cr_expect_eq(connect_err, 0, "broker 1 is back on its port: %s", strerror(connect_err));
  ls_broker_destroy(b);
}

Test(broker, leader_moves_off_a_down_broker, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(2, "failover", 2);
  cr_assert_eq(ls_broker_set_leader(b, "failover", 0, 1), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_broker_set_leader(b, "failover", 1, 1), LS_OK);
  cr_assert_eq(ls_broker_set_down(b, 1), LS_OK);
  cr_assert_eq(ls_broker_set_leader(b, "failover", 0, 2), LS_OK);
  cr_assert_eq(ls_broker_set_leader(b, "failover", 1, 2), LS_OK);
  ls_feed_conf_t const c = feed_conf(LS_GEN_SINE, 4, 1, 10);
  cr_expect_eq(produce_feed(b, "failover", &c, LS_FORMAT_F32).records, 40);
  cr_assert_eq(ls_broker_set_up(b, 1), LS_OK);
  expect_feed_in_topic(b, "failover", 2, &c, LS_FORMAT_F32);
  ls_broker_destroy(b);
}

Test(broker, injected_produce_errors_are_retried_or_reported, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "flaky", 2);
  /* Retriable (6 NOT_LEADER_OR_FOLLOWER): the producer retries, in order. */
  int const retriable[] = {6, 6, 6};
  cr_assert_eq(ls_broker_push_request_errors(b, LS_KAFKA_API_PRODUCE, 3, retriable), LS_OK);
  ls_feed_conf_t const c = feed_conf(LS_GEN_AR2, 5, 2, 20);
  cr_expect_eq(produce_feed(b, "flaky", &c, LS_FORMAT_F32).records, 100);
  expect_feed_in_topic(b, "flaky", 2, &c, LS_FORMAT_F32);
  /* Not retriable (10 MESSAGE_TOO_LARGE): the record fails, and flush says so. */
  ls_producer_t *const p = producer_for(b, "flaky", NULL, 0);
  int const fatal[] = {10};
  cr_assert_eq(ls_broker_push_request_errors(b, LS_KAFKA_API_PRODUCE, 1, fatal), LS_OK);
  cr_assert_eq(ls_producer_send(p, "k", 1, 1000, "v", 1), LS_OK);
  cr_expect_eq(ls_producer_flush(p), LS_ERR_KAFKA, "an injected error went unreported");
  cr_expect(strstr(ls_last_error(), "too large") != NULL, "%s", ls_last_error());
  ls_producer_destroy(p);
  cr_expect_eq(ls_broker_clear_request_errors(b, LS_KAFKA_API_FETCH), LS_OK);
  ls_broker_destroy(b);
}

Test(broker, bad_arguments_are_rejected) {
  ls_broker_t *b = (ls_broker_t *)1;
  cr_expect_eq(ls_broker_new(&b, 0, 0), LS_ERR_INVALID_ARG);
  cr_expect_null(b);
  cr_expect_eq(ls_broker_new(&b, LS_BROKER_MAX_BROKERS + 1, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_new(&b, 1, 65536), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_new(NULL, 1, 0), LS_ERR_INVALID_ARG);
  b = broker_with_topic(2, "t", 2);
  cr_expect_eq(ls_broker_topic_create(b, "t", 2), LS_ERR_KAFKA, "a duplicate topic");
  cr_expect(strstr(ls_last_error(), "'t'") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_broker_topic_create(b, "bad/name", 1), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "'/'") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_broker_topic_create(b, "", 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_topic_create(b, "u", 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_topic_create(NULL, "u", 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_set_down(b, 3), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "1..2") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_broker_set_up(b, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_set_leader(b, "t", 5, 1), LS_ERR_KAFKA, "no partition 5");
  cr_expect_eq(ls_broker_set_leader(b, "t", -1, 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_set_leader(b, "t", 0, 7), LS_ERR_INVALID_ARG);
  int const err = 6;
  cr_expect_eq(ls_broker_push_request_errors(b, (ls_kafka_api_t)4, 1, &err), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_broker_push_request_errors(b, LS_KAFKA_API_FETCH, 0, &err), LS_ERR_INVALID_ARG);
  int const local = -185;
  cr_expect_eq(ls_broker_push_request_errors(b, LS_KAFKA_API_FETCH, 1, &local), LS_ERR_INVALID_ARG);
  cr_expect_str_eq(ls_broker_bootstrap(NULL), "");
  ls_broker_destroy(b);
  ls_broker_destroy(NULL);
}

Test(produce, producer_checks_its_arguments, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "args", 1);
  const char *const addr = ls_broker_bootstrap(b);
  ls_producer_t *p = (ls_producer_t *)1;
  const char *const unknown[] = {"no.such.property=1"};
  cr_expect_eq(ls_producer_new(&p, addr, "args", unknown, 1), LS_ERR_UNKNOWN_KEY);
  cr_expect_null(p);
  cr_expect(strstr(ls_last_error(), "no.such.property") != NULL, "%s", ls_last_error());
  const char *const malformed[] = {"linger.ms"};
  cr_expect_eq(ls_producer_new(&p, addr, "args", malformed, 1), LS_ERR_INVALID_ARG);
  const char *const bad_value[] = {"compression.type=zip"};
  cr_expect_eq(ls_producer_new(&p, addr, "args", bad_value, 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_producer_new(&p, "", "args", NULL, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_producer_new(&p, addr, NULL, NULL, 0), LS_ERR_INVALID_ARG);
  p = producer_for(b, "args", NULL, 0);
  char key[300];
  memset(key, 'k', sizeof key);
  cr_expect_eq(ls_producer_send(p, key, 0, 0, "v", 1), LS_ERR_INVALID_ARG, "empty key");
  cr_expect_eq(ls_producer_send(p, key, 256, 0, "v", 1), LS_ERR_INVALID_ARG, "256-byte key");
  cr_expect_eq(ls_producer_send(p, key, 1, -1, "v", 1), LS_ERR_INVALID_ARG, "negative time");
  cr_expect_eq(ls_producer_send(p, key, 1, 0, NULL, 1), LS_ERR_INVALID_ARG);
  ls_feed_conf_t const c = feed_conf(LS_GEN_SINE, 1, 1, 1);
  ls_feed_t *feed = NULL;
  cr_assert_eq(ls_feed_new(&feed, &c), LS_OK);
  ls_produce_opts_t opts;
  ls_produce_opts_default(&opts);
  opts.rate = -1;
  cr_expect_eq(ls_feed_produce(feed, p, &opts, NULL), LS_ERR_INVALID_ARG, "negative rate");
  ls_produce_opts_default(&opts);
  opts.format = (ls_format_t)5;
  cr_expect_eq(ls_feed_produce(feed, p, &opts, NULL), LS_ERR_INVALID_ARG, "bad format");
  cr_expect_eq(ls_feed_produce(NULL, p, NULL, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_feed_produce(feed, NULL, NULL, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_csv_replay(NULL, p, NULL, NULL), LS_ERR_INVALID_ARG);
  ls_feed_destroy(feed);
  ls_producer_destroy(p);
  ls_producer_destroy(NULL);
  ls_broker_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* The programs: `lstream broker` and `lstream produce`                     */

static proc_result_t run_lstream(const char *const args[]) {
  const char *argv[32] = {LSTREAM_BIN};
  int n = 1;
  while (args[n - 1] != NULL)
    argv[n] = args[n - 1], n++;
  argv[n] = NULL;
  proc_result_t r;
  cr_assert_eq(proc_run(argv, NULL, CHILD_TIMEOUT_S, &r), 0);
  return r;
}

static void expect_exit(const char *const args[], int code, const char *message) {
  proc_result_t r = run_lstream(args);
  cr_expect_eq(r.status, code, "lstream %s %s: exit %d, want %d (%s)", args[0],
               args[1] ? args[1] : "", r.status, code, r.err);
  cr_expect(strstr(r.err, message) != NULL, "lstream %s %s: stderr '%s' lacks '%s'", args[0],
            args[1] ? args[1] : "", r.err, message);
  proc_result_free(&r);
}

Test(cli, broker_serves_kcat_and_produce, .timeout = 120) {
  char file[] = "/tmp/lstream_test_bootstrap_XXXXXX";
  int const fd = mkstemp(file);
  cr_assert_geq(fd, 0);
  close(fd);
  unlink(file); /* lstream broker creates it */
  proc_broker_t b;
  const char *const args[] = {"--brokers",        "2",  "--topic", "cli_t:3",
                              "--bootstrap-file", file, NULL};
  cr_assert_eq(proc_broker_start(&b, LSTREAM_BIN, args), 0,
               "lstream broker did not print an address");
  FILE *const f = fopen(file, "r");
  cr_assert_not_null(f, "no bootstrap file");
  char line[512] = "";
  cr_expect_not_null(fgets(line, sizeof line, f));
  fclose(f);
  line[strcspn(line, "\n")] = '\0';
  cr_expect_str_eq(line, b.addr, "the file and stdout disagree");

  const char *const list[] = {"kcat", "-L", "-b", b.addr, NULL};
  proc_result_t r;
  cr_assert_eq(proc_run(list, NULL, CHILD_TIMEOUT_S, &r), 0);
  cr_expect_eq(r.status, 0, "kcat -L: %s", r.err);
  cr_expect(strstr(r.out, " 2 brokers:") && strstr(r.out, "topic \"cli_t\" with 3 partitions"),
            "kcat -L printed: %s", r.out);
  proc_result_free(&r);

  const char *const produce[] = {"produce", "--brokers", b.addr, "--topic",
                                 "cli_t",   "--series",  "5",    "--records-per-series",
                                 "20",      "--format",  "csv",  NULL};
  r = run_lstream(produce);
  cr_expect_eq(r.status, 0, "lstream produce: %s", r.err);
  cr_expect(!strncmp(r.out, "produce topic=cli_t partitions=3 records=100 ", 45), "summary: %s",
            r.out);
  proc_result_free(&r);
  int n = 0;
  rec_t *const recs = kcat_read(b.addr, "cli_t", &n);
  cr_expect_eq(n, 100);
  float v[4];
  for (int i = 0; i < n; i++)
    cr_expect_eq(ls_record_decode(LS_FORMAT_CSV, recs[i].value, recs[i].len, 4, v), LS_REJECT_NONE,
                 "record %d is not 4 csv numbers", i);
  free(recs);

  cr_expect_eq(proc_broker_stop(&b), 0, "SIGTERM should end the broker with exit 0");
  cr_expect_neq(access(file, F_OK), 0, "the bootstrap file outlived the broker");
}

Test(cli, produce_stops_cleanly_on_sigint, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic(1, "interrupted", 2);
  const char *const argv[] = {
      LSTREAM_BIN,   "produce",  "--brokers", ls_broker_bootstrap(b), "--topic",
      "interrupted", "--series", "10",        "--records-per-series", "1000",
      "--rate",      "500",      NULL}; /* 20 s unless stopped */
  proc_child_t c;
  cr_assert_eq(proc_start(&c, argv), 0);
  /* The first progress line (after a second) shows it is sending. */
  char line[512];
  cr_assert_eq(proc_read_line(c.err_fd, line, sizeof line, CHILD_TIMEOUT_S), 0, "no progress");
  cr_expect(!strncmp(line, "produce", 7), "progress line: %s", line);
  kill(c.pid, SIGINT);
  proc_result_t r;
  proc_finish(&c, CHILD_TIMEOUT_S, &r);
  cr_expect_eq(r.status, 1, "an interrupted produce exits 1");
  const char *const said = strstr(r.err, "interrupted (");
  long long sent = -1;
  cr_assert(said && sscanf(said, "interrupted (%*[^)]): %lld records", &sent) == 1, "stderr: %s",
            r.err);
  cr_expect(sent > 0 && sent < 10000, "%lld records before the signal", sent);
  proc_result_free(&r);
  int n = 0;
  free(kcat_read(ls_broker_bootstrap(b), "interrupted", &n));
  cr_expect_eq(n, sent, "what it says it delivered is in the topic");
  ls_broker_destroy(b);
}

/* A free loopback port: bind port 0, read it, close. Another process could
 * take it before the broker does; nothing else here binds fixed ports. */
static int free_port(void) {
  int const s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr = {htonl(INADDR_LOOPBACK)}};
  socklen_t len = sizeof sin;
  cr_assert(!bind(s, (struct sockaddr *)&sin, sizeof sin) &&
            !getsockname(s, (struct sockaddr *)&sin, &len));
  close(s);
  return ntohs(sin.sin_port);
}

Test(broker, fixed_port_relays_to_a_broker_that_is_up, .timeout = 120) {
  int const port = free_port();
  ls_broker_t *b = NULL;
  cr_assert_eq(ls_broker_new(&b, 2, port), LS_OK, "%s", ls_last_error());
  char want[32];
  snprintf(want, sizeof want, "127.0.0.1:%d", port);
  cr_expect_str_eq(ls_broker_bootstrap(b), want);
  cr_assert_eq(ls_broker_topic_create(b, "relayed", 1), LS_OK);
  cr_assert_eq(ls_broker_set_leader(b, "relayed", 0, 2), LS_OK);
  cr_assert_eq(ls_broker_set_down(b, 1), LS_OK); /* the relay's first target */
  ls_feed_conf_t const c = feed_conf(LS_GEN_SINE, 3, 1, 10);
  cr_expect_eq(produce_feed(b, "relayed", &c, LS_FORMAT_F32).records, 30);
  expect_feed_in_topic(b, "relayed", 1, &c, LS_FORMAT_F32);
  ls_broker_destroy(b);
}

Test(cli, fixed_port_bootstraps_and_a_taken_port_fails, .timeout = 120) {
  char port[16], want[32];
  snprintf(port, sizeof port, "%d", free_port());
  snprintf(want, sizeof want, "127.0.0.1:%s", port);
  proc_broker_t b;
  const char *const args[] = {"--port", port, "--brokers", "2", "--topic", "fixed:2", NULL};
  cr_assert_eq(proc_broker_start(&b, LSTREAM_BIN, args), 0);
  cr_expect_str_eq(b.addr, want);
  const char *const produce[] = {"produce", "--brokers", want, "--topic",
                                 "fixed",   "--series",  "3",  "--records-per-series",
                                 "10",      NULL};
  proc_result_t r = run_lstream(produce);
  cr_expect_eq(r.status, 0, "produce through the fixed port: %s", r.err);
  proc_result_free(&r);
  int n = 0;
  free(kcat_read(want, "fixed", &n));
  cr_expect_eq(n, 30);
  const char *const again[] = {"broker", "--port", port, NULL};
  expect_exit(again, 1, "Address already in use");
  cr_expect_eq(proc_broker_stop(&b), 0);
}

Test(cli, bad_arguments_give_usage_errors, .timeout = 120) {
  const char *const a1[] = {"broker", "--brokers", "0", NULL};
  expect_exit(a1, 2, "--brokers '0'");
  const char *const a2[] = {"broker", "--topic", "nocolon", NULL};
  expect_exit(a2, 2, "NAME:PARTITIONS");
  const char *const a3[] = {"broker", "--port", "70000", NULL};
  expect_exit(a3, 2, "--port");
  const char *const a4[] = {"broker", "--topic", "bad/name:3", NULL};
  expect_exit(a4, 1, "topic name 'bad/name'");
  const char *const a5[] = {"broker", "--verbose", NULL};
  expect_exit(a5, 2, "unknown option '--verbose'");
  const char *const a6[] = {"broker", "--brok", "2", NULL}; /* abbreviations are refused */
  expect_exit(a6, 2, "unknown option '--brok'");
  const char *const a7[] = {"broker", "--port", NULL};
  expect_exit(a7, 2, "option '--port' needs a value");
  const char *const p1[] = {"produce", "--topic", "t", NULL};
  expect_exit(p1, 2, "--brokers is required");
  const char *const p2[] = {"produce", "--brokers",   "x:1", "--topic",
                            "t",       "--generator", "saw", NULL};
  expect_exit(p2, 2, "--generator 'saw'");
  const char *const p3[] = {"produce", "--brokers", "x:1",      "--topic", "t",
                            "--csv",   "f.csv",     "--series", "3",       NULL};
  expect_exit(p3, 2, "--series is a feed option");
  const char *const p4[] = {"produce",     "--brokers", "x:1",  "--topic", "t",
                            "--generator", "ar2",       "--ar", "1.5,0.5", NULL};
  expect_exit(p4, 1, "not stationary");
  const char *const p5[] = {"produce", "--brokers", "x:1",         "--topic",
                            "t",       "-X",        "bogus.key=1", NULL};
  expect_exit(p5, 1, "bogus.key");
  const char *const p6[] = {"produce", "--brokers", "x:1", "--topic", "t", "--rate", "-3", NULL};
  expect_exit(p6, 2, "--rate '-3'");
  const char *const p7[] = {
      "produce", "--brokers", "x:1", "--topic", "t", "--kafka-config", "/nonexistent.properties",
      NULL};
  expect_exit(p7, 1, "cannot open Kafka config file");
  const char *const p8[] = {"produce", "--brokers", "x:1", "--topic", "t", "--features", "0", NULL};
  expect_exit(p8, 2, "--features '0'");
  const char *const p9[] = {"produce", "--brokers=x:1", "--topic=t", "--features=0", NULL};
  expect_exit(p9, 2, "--features '0'"); /* --key=value reaches the same check */
  const char *const p10[] = {"produce",     "--brokers=x:1", "--topic=t",
                             "--csv=f.csv", "--seed=3",      NULL};
  expect_exit(p10, 2, "--seed is a feed option");
}
