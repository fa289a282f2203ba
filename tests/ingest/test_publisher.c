/*
 * The publisher (transactional producer) and the tap, against the embedded
 * broker: messages with their headers reach the topic exactly once as a
 * real client (kcat, read_committed) reads it, committed in transactions;
 * read-back from the publisher's positions sees exactly what was written
 * after them (librdkafka's mock cluster does not fence an earlier producer of
 * a transactional id, so fencing is not tested here); an outage holds messages (a full publisher
 * pushes back) and loses or duplicates none; a topic that cannot be written fails at the start. The
 * tap hands every accepted record over, in order, before its window.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/produce.h"
#include "proc.h"

#define CHILD_TIMEOUT_S 60.0

static ls_broker_t *broker_with_topic(const char *topic, int partitions) {
  ls_broker_t *b = NULL;
  cr_assert_eq(ls_broker_new(&b, 1, 0), LS_OK, "ls_broker_new: %s", ls_last_error());
  cr_assert_eq(ls_broker_topic_create(b, topic, partitions), LS_OK, "%s", ls_last_error());
  return b;
}

static ls_publisher_conf_t conf_for(const ls_broker_t *b, const char *topic, const char *id) {
  ls_publisher_conf_t c;
  ls_publisher_conf_init(&c);
  c.brokers = ls_broker_bootstrap(b);
  c.topic = topic;
  c.transactional_id = id;
  c.timeout_ms = 20000;
  return c;
}

/* Queues message i: key "k<i % 7>", value "v<i>", headers n=<i> and a
 * fixed one, waiting up to wait_ms for room; returns whether it was. */
static int send_msg(ls_publisher_t *p, int i, int wait_ms) {
  char key[16], value[16], n[16];
  snprintf(key, sizeof key, "k%d", i % 7);
  snprintf(value, sizeof value, "v%d", i);
  snprintf(n, sizeof n, "%d", i);
  ls_header_t const h[2] = {{"n", n, strlen(n)}, {"kind", "next", 4}};
  int queued = 0;
  cr_assert_eq(ls_publisher_send(p, key, strlen(key), value, strlen(value), 1000 + i, h, 2, wait_ms,
                                 &queued),
               LS_OK, "send %d: %s", i, ls_last_error());
  return queued;
}

static void send_one(ls_publisher_t *p, int i) {
  cr_assert_eq(send_msg(p, i, -1), 1, "message %d not queued", i);
}

/* Counts, per message number, how often kcat (read_committed) sees it in
 * topic, checking key, value and headers; returns how many it read. */
static int kcat_count(const ls_broker_t *b, const char *topic, int *seen, int n_seen) {
  const char *const argv[] = {"kcat",      "-C",
                              "-b",        ls_broker_bootstrap(b),
                              "-t",        topic,
                              "-e",        "-o",
                              "beginning", "-q",
                              "-X",        "isolation.level=read_committed",
                              "-X",        "fetch.wait.max.ms=20",
                              "-f",        "%k %s %h\n",
                              NULL};
  proc_result_t r;
  cr_assert_eq(proc_run(argv, NULL, CHILD_TIMEOUT_S, &r), 0, "cannot run kcat");
  cr_assert_eq(r.status, 0, "kcat failed (%d): %s", r.status, r.err);
  int lines = 0;
  for (char *line = strtok(r.out, "\n"); line != NULL; line = strtok(NULL, "\n"), lines++) {
    int k = -1, v = -1, h = -1;
    cr_assert_eq(sscanf(line, "k%d v%d n=%d,kind=next", &k, &v, &h), 3, "line '%s'", line);
    cr_assert(v >= 0 && v < n_seen && k == v % 7 && h == v, "line '%s'", line);
    seen[v]++;
  }
  proc_result_free(&r);
  return lines;
}

Test(publisher, transactions_reach_a_real_client_exactly_once, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic("pub", 3);
  ls_publisher_conf_t c = conf_for(b, "pub", "test-tx-1");
  c.commit_ms = 5;
  ls_publisher_t *p = NULL;
  cr_assert_eq(ls_publisher_new(&c, &p), LS_OK, "%s", ls_last_error());
  cr_expect_eq(ls_publisher_partitions(p), 3);
  for (int i = 0; i < 500; i++)
    send_one(p, i);
  cr_expect_eq(ls_publisher_sent(p), 500);
  int done = 0;
  cr_assert_eq(ls_publisher_commit(p, ls_publisher_sent(p), -1, &done), LS_OK, "%s",
               ls_last_error());
  cr_assert(done);
  ls_publisher_stats_t st;
  ls_publisher_stats(p, &st);
  cr_expect_eq(st.sent, 500);
  cr_expect_eq(st.committed, 500);
  cr_expect_geq(st.transactions, 1);
  int seen[500] = {0};
  cr_expect_eq(kcat_count(b, "pub", seen, 500), 500);
  for (int i = 0; i < 500; i++)
    cr_expect_eq(seen[i], 1, "message %d seen %d times", i, seen[i]);
  ls_publisher_destroy(p);
  ls_broker_destroy(b);
}

/* Read-back: counts messages by their n header. */
typedef struct back_count_s {
  int seen[600];
  int bad;
} back_count_t;

static void count_back(void *opaque, int32_t partition, const void *key, size_t key_len,
                       const ls_header_t *h, int n) {
  (void)partition, (void)key, (void)key_len;
  back_count_t *const bc = opaque;
  int v = -1;
  for (int i = 0; i < n; i++)
    if (!strcmp(h[i].name, "n")) v = atoi((const char *)h[i].value);
  if (v < 0 || v >= 600)
    bc->bad++;
  else
    bc->seen[v]++;
}

Test(publisher, read_back_from_positions_sees_what_came_after, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic("back", 4);
  ls_publisher_conf_t c = conf_for(b, "back", "test-tx-2");
  ls_publisher_t *p = NULL;
  cr_assert_eq(ls_publisher_new(&c, &p), LS_OK, "%s", ls_last_error());
  int done = 0;
  for (int i = 0; i < 300; i++)
    send_one(p, i);
  cr_assert_eq(ls_publisher_commit(p, 300, -1, &done), LS_OK);
  int64_t pos[4];
  cr_assert_eq(ls_publisher_positions(p, pos, 4), LS_OK);
  int64_t total = 0;
  for (int q = 0; q < 4; q++)
    total += pos[q];
  cr_expect_eq(total, 300, "the positions add up to the messages written (%lld)", (long long)total);
  /* A second publisher starts at the high watermarks (the same here). */
  ls_publisher_conf_t c2 = conf_for(b, "back", "test-tx-2b");
  ls_publisher_t *p2 = NULL;
  cr_assert_eq(ls_publisher_new(&c2, &p2), LS_OK, "%s", ls_last_error());
  int64_t pos2[4];
  cr_assert_eq(ls_publisher_positions(p2, pos2, 4), LS_OK);
  cr_expect_arr_eq(pos2, pos, sizeof pos, "a new publisher's positions are the high watermarks");
  ls_publisher_destroy(p2);
  for (int i = 300; i < 600; i++)
    send_one(p, i);
  cr_assert_eq(ls_publisher_commit(p, 600, -1, &done), LS_OK);
  back_count_t bc = {{0}, 0};
  int64_t n = 0;
  cr_assert_eq(ls_topic_read_back(&c, pos, 4, count_back, &bc, &n), LS_OK, "%s", ls_last_error());
  cr_expect_eq(n, 300);
  cr_expect_eq(bc.bad, 0);
  for (int i = 0; i < 600; i++)
    cr_expect_eq(bc.seen[i], i >= 300, "message %d read back %d times", i, bc.seen[i]);
  /* From the beginning: everything. */
  memset(&bc, 0, sizeof bc);
  cr_assert_eq(ls_topic_read_back(&c, NULL, 0, count_back, &bc, &n), LS_OK);
  cr_expect_eq(n, 600);
  ls_publisher_destroy(p);
  ls_broker_destroy(b);
}

Test(publisher, outage_pushes_back_then_delivers_each_once, .timeout = 180) {
  ls_broker_t *const b = broker_with_topic("out", 2);
  ls_publisher_conf_t c = conf_for(b, "out", "test-tx-4");
  c.commit_ms = 5;
  c.max_messages = 50;
  ls_publisher_t *p = NULL;
  cr_assert_eq(ls_publisher_new(&c, &p), LS_OK, "%s", ls_last_error());
  for (int i = 0; i < 20; i++)
    send_one(p, i);
  int done = 0;
  cr_assert_eq(ls_publisher_commit(p, 20, -1, &done), LS_OK);
  cr_assert_eq(ls_broker_set_down(b, 1), LS_OK);
  /* Down: the publisher holds 50 at most, then pushes back. */
  int i = 20;
  while (i < 200 && send_msg(p, i, 200))
    i++;
  cr_expect_eq(i, 70, "20 committed, then 50 held before the publisher pushed back (%d)", i);
  cr_assert_eq(ls_publisher_commit(p, i, 300, &done), LS_OK);
  cr_expect_eq(done, 0, "nothing commits while the broker is down");
  cr_assert_eq(ls_broker_set_up(b, 1), LS_OK);
  cr_assert_eq(ls_publisher_commit(p, i, 60000, &done), LS_OK, "%s", ls_last_error());
  cr_assert(done, "the held messages commit once the broker is back");
  int seen[500] = {0};
  cr_expect_eq(kcat_count(b, "out", seen, 500), 70);
  for (int k = 0; k < 70; k++)
    cr_expect_eq(seen[k], 1, "message %d seen %d times", k, seen[k]);
  ls_publisher_destroy(p);
  ls_broker_destroy(b);
}

Test(publisher, unwritable_topic_fails_at_start, .timeout = 120) {
  ls_broker_t *const b = broker_with_topic("ok", 2);
  ls_publisher_conf_t c = conf_for(b, "bad topic!", "test-tx-5");
  c.timeout_ms = 2000;
  ls_publisher_t *p = NULL;
  cr_expect_neq(ls_publisher_new(&c, &p), LS_OK);
  cr_expect_null(p);
  cr_expect(strstr(ls_last_error(), "'bad topic!' cannot be written") != NULL, "%s",
            ls_last_error());
  cr_assert_eq(ls_broker_set_leader(b, "ok", 1, -1), LS_OK);
  c.topic = "ok";
  cr_expect_neq(ls_publisher_new(&c, &p), LS_OK, "a partition without a leader");
  cr_expect(strstr(ls_last_error(), "'ok' cannot be written") != NULL, "%s", ls_last_error());
  ls_broker_destroy(b);
}

Test(publisher, bad_arguments) {
  ls_publisher_conf_t c;
  ls_publisher_conf_init(&c);
  ls_publisher_t *p = NULL;
  cr_expect_eq(ls_publisher_new(&c, &p), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_publisher_new(NULL, &p), LS_ERR_INVALID_ARG);
  int q = 0;
  cr_expect_eq(ls_publisher_send(NULL, "k", 1, "v", 1, 0, NULL, 0, 0, &q), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_publisher_commit(NULL, 1, 0, &q), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_topic_read_back(&c, NULL, 0, NULL, NULL, NULL), LS_ERR_INVALID_ARG);
  ls_publisher_destroy(NULL);
}

/* ------------------------------------------------------------------------ */
/* The tap                                                                   */

enum { TAP_S = 3, TAP_K = 10, TAP_F = 2, TAP_T = 4 };

typedef struct tapped_s {
  int n[TAP_S];                 /* records of series s tapped so far */
  int64_t offset[TAP_S][TAP_K]; /* the offset of its k-th record */
} tapped_t;

/* Drains the tap into t, checking each record against the feed. */
static void drain(ls_ingest_t *ing, ls_feed_t *feed, tapped_t *t, int64_t *last_offset) {
  const ls_tap_record_t *r = NULL;
  int64_t n = 0;
  cr_assert_eq(ls_ingest_records(ing, &r, &n), LS_OK, "%s", ls_last_error());
  for (int64_t i = 0; i < n; i++) {
    int s = -1;
    cr_assert_eq(sscanf(r[i].key, "SYM%4d", &s), 1);
    cr_assert(s >= 0 && s < TAP_S && t->n[s] < TAP_K, "record of %s beyond the feed", r[i].key);
    int const k = t->n[s]++;
    float want[TAP_F];
    ls_feed_value(feed, s, k, want, NULL);
    cr_expect(!memcmp(r[i].x, want, sizeof want), "%s step %d: values", r[i].key, k);
    cr_expect_eq(r[i].time, ls_feed_time(feed, k));
    cr_expect_gt(r[i].offset, last_offset[r[i].partition], "offsets in order per partition");
    last_offset[r[i].partition] = r[i].offset;
    t->offset[s][k] = r[i].offset;
  }
}

/* A topic "tap" of TAP_S series x TAP_K records (and one rejected), and
 * a consumer of it with the tap on, window `window`, stopping at the end
 * (or not) and flushing. */
static ls_ingest_t *tap_world(ls_broker_t **b, ls_feed_t **feed, const char *window,
                              const char *stop) {
  *b = broker_with_topic("tap", 2);
  ls_feed_conf_t fc;
  ls_feed_conf_default(&fc);
  fc.series = TAP_S, fc.features = TAP_F, fc.records_per_series = TAP_K;
  cr_assert_eq(ls_feed_new(feed, &fc), LS_OK);
  ls_producer_t *prod = NULL;
  cr_assert_eq(ls_producer_new(&prod, ls_broker_bootstrap(*b), "tap", NULL, 0), LS_OK);
  ls_produce_opts_t opts;
  ls_produce_opts_default(&opts);
  ls_produce_stats_t pst;
  cr_assert_eq(ls_feed_produce(*feed, prod, &opts, &pst), LS_OK);
  ls_producer_send(prod, "SYM0000", 7, ls_feed_time(*feed, TAP_K), "bad", 3); /* rejected */
  cr_assert_eq(ls_producer_flush(prod), LS_OK);
  ls_producer_destroy(prod);
  ls_ingest_conf_t *ic = NULL;
  cr_assert_eq(ls_ingest_conf_new(&ic), LS_OK);
  char servers[300];
  snprintf(servers, sizeof servers, "bootstrap.servers=%s", ls_broker_bootstrap(*b));
  cr_assert_eq(ls_ingest_conf_set_kafka(ic, servers), LS_OK);
  const char *const kv[][2] = {{"topic", "tap"}, {"features", "2"}, {"window", window},
                               {"stop", stop},   {"tap", "true"},   {"flush", "true"}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    cr_assert_eq(ls_ingest_conf_set(ic, kv[i][0], kv[i][1]), LS_OK, "%s", ls_last_error());
  for (int q = 0; q < 2; q++)
    cr_assert_eq(ls_ingest_conf_add_partition(ic, q, (ls_start_t){LS_START_BEGINNING, 0}), LS_OK);
  ls_ingest_t *ing = NULL;
  cr_assert_eq(ls_ingest_new(&ing, ic), LS_OK, "%s", ls_last_error());
  ls_ingest_conf_destroy(ic);
  return ing;
}

Test(tap, every_record_before_its_window, .timeout = 120) {
  ls_broker_t *b = NULL;
  ls_feed_t *feed = NULL;
  ls_ingest_t *const ing = tap_world(&b, &feed, "4", "end");
  tapped_t t = {{0}, {{0}}};
  int64_t last_offset[2] = {-1, -1};
  int windows = 0;
  for (;;) {
    ls_next_t what;
    const ls_window_t *w = NULL;
    cr_assert_eq(ls_ingest_next(ing, 30000, &what, &w), LS_OK, "%s", ls_last_error());
    if (what == LS_NEXT_END) break;
    cr_assert_neq(what, LS_NEXT_TIMEOUT, "nothing within 30 s");
    if (what != LS_NEXT_WINDOW) {
      drain(ing, feed, &t, last_offset);
      continue;
    }
    int s = -1;
    sscanf(w->key, "SYM%4d", &s);
    /* Its rows' records were all in the tap before it was queued. */
    drain(ing, feed, &t, last_offset);
    for (int r = 0; r <= w->n_targets; r++) {
      int const k = (int)w->index * TAP_T + r;
      cr_assert_lt(k, t.n[s], "%s window %lld row %d: not tapped before its window", w->key,
                   (long long)w->index, r);
      cr_expect_eq(w->offsets[r], t.offset[s][k], "%s window %lld row %d: offset", w->key,
                   (long long)w->index, r);
    }
    windows++;
    ls_ingest_release(ing, w);
  }
  drain(ing, feed, &t, last_offset);
  for (int s = 0; s < TAP_S; s++)
    cr_expect_eq(t.n[s], TAP_K, "series %d: %d records tapped", s, t.n[s]);
  cr_expect_eq(windows, TAP_S * 3, "two full windows and a flushed one per series (%d)", windows);
  ls_ingest_destroy(ing);
  ls_feed_destroy(feed);
  ls_broker_destroy(b);
}

Test(tap, records_wake_a_trainer_before_any_window, .timeout = 120) {
  ls_broker_t *b = NULL;
  ls_feed_t *feed = NULL;
  ls_ingest_t *const ing = tap_world(&b, &feed, "100", "never"); /* no window ever */
  tapped_t t = {{0}, {{0}}};
  int64_t last_offset[2] = {-1, -1};
  int total = 0;
  while (total < TAP_S * TAP_K) {
    ls_next_t what;
    const ls_window_t *w = NULL;
    cr_assert_eq(ls_ingest_next(ing, 30000, &what, &w), LS_OK, "%s", ls_last_error());
    cr_assert_eq(what, LS_NEXT_RECORDS, "records, not %d", (int)what);
    drain(ing, feed, &t, last_offset);
    total = 0;
    for (int s = 0; s < TAP_S; s++)
      total += t.n[s];
  }
  ls_next_t what;
  const ls_window_t *w = NULL;
  cr_assert_eq(ls_ingest_next(ing, 200, &what, &w), LS_OK);
  cr_expect_eq(what, LS_NEXT_TIMEOUT, "the tap is empty once taken");
  ls_ingest_destroy(ing);
  ls_feed_destroy(feed);
  ls_broker_destroy(b);
}
