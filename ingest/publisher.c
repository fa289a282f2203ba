/*
 * Publishing exactly once (include/lstream/produce.h, "Publishing exactly
 * once"): a transactional librdkafka producer driven by a thread of its
 * own, and the read-back of what a previous run left in a topic.
 *
 * The caller's thread copies each message into `in` (under lock). The
 * thread moves them to `pending` (every message not yet committed, in
 * order), produces pending[produced..] into the open transaction, and
 * commits it when it is commit_ms old or a commit was asked for; only then
 * are its messages freed. A transaction that must be aborted is produced
 * again from pending[0]; one whose commit times out (an outage) is
 * committed again until it goes through. `held` (in + pending) is the
 * bound the caller waits on.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "kafka_util.h"
#include "lstream/produce.h"

/* lstream's producer defaults; the caller's settings follow. A transaction
 * outlives a broker outage of up to 15 minutes (the brokers' default
 * transaction.max.timeout.ms; librdkafka's own 60 s made an outage of a
 * minute abort it: a real broker then fences the producer, the embedded
 * mock shows the aborted copy to read_committed consumers). A broker that
 * allows less gets librdkafka's 60 s (transactional_new). */
#define TXN_TIMEOUT_MS "900000"
static const char *const publisher_defaults[] = {
    "linger.ms=1",
    "partitioner=murmur2_random", /* the Java client's: a key lands where its clients expect */
    "transaction.timeout.ms=" TXN_TIMEOUT_MS,
};

/* How long the thread sleeps before retrying a commit or abort that failed. */
#define RETRY_MS 100
/* The longest the thread idles without serving delivery reports. */
#define IDLE_MS 50

/* One message: key, value, then per header its name (NUL-terminated), a
 * u32 length and the bytes, in data. */
typedef struct msg_s {
  int64_t seq, timestamp;
  uint32_t key_len, len;
  int n_headers;
  char data[];
} msg_t;

typedef struct msg_list_s {
  msg_t **m;
  int64_t n, cap;
} msg_list_t;

struct ls_publisher_s {
  rd_kafka_t *rk;
  rd_kafka_topic_t *rkt;
  char *topic;
  int32_t partitions;
  int commit_ms, timeout_ms;
  int64_t max_messages;
  kafka_log_t log;
  pthread_t thread;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* for the thread: messages, a commit asked for, quit */
  pthread_cond_t done; /* for callers: room, a commit, a failure */
  /* Under lock. */
  msg_list_t in;
  int64_t ask;  /* commit every message up to this number now */
  int64_t held; /* in.n + pending.n */
  int quit, failed;
  int idle;      /* the thread waits on wake: a send wakes it */
  char why[512]; /* the failure */
  ls_publisher_stats_t st;
  int64_t *next;            /* [partitions] one past the highest offset written */
  ls_publisher_conf_t conf; /* the caller's, on the copies below */
  char *brokers, *txn_id, **settings;
  /* The thread's own. */
  msg_list_t pending;
  int64_t produced; /* pending.m[0 .. produced) are in the open transaction */
  int txn_open, txn_bad;
  double txn_t0;
};

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */

static msg_t *msg_new(const void *key, size_t key_len, const void *value, size_t len,
                      int64_t timestamp, const ls_header_t *headers, int n_headers) {
  size_t size = key_len + len;
  for (int i = 0; i < n_headers; i++)
    size += strlen(headers[i].name) + 1 + sizeof(uint32_t) + headers[i].len;
  msg_t *const m = malloc(sizeof *m + size);
  if (m == NULL) return NULL;
  m->timestamp = timestamp;
  m->key_len = (uint32_t)key_len;
  m->len = (uint32_t)len;
  m->n_headers = n_headers;
  char *d = m->data;
  memcpy(d, key, key_len), d += key_len;
  if (len > 0) memcpy(d, value, len), d += len;
  for (int i = 0; i < n_headers; i++) {
    size_t const name = strlen(headers[i].name) + 1;
    uint32_t const hl = (uint32_t)headers[i].len;
    memcpy(d, headers[i].name, name), d += name;
    memcpy(d, &hl, sizeof hl), d += sizeof hl;
    if (hl > 0) memcpy(d, headers[i].value, hl), d += hl;
  }
  return m;
}

/* m's headers as librdkafka's (owned by the caller until produced). */
static rd_kafka_headers_t *msg_headers(const msg_t *m) {
  rd_kafka_headers_t *const h = rd_kafka_headers_new((size_t)m->n_headers);
  const char *d = m->data + m->key_len + m->len;
  for (int i = 0; i < m->n_headers; i++) {
    const char *const name = d;
    d += strlen(name) + 1;
    uint32_t hl;
    memcpy(&hl, d, sizeof hl), d += sizeof hl;
    rd_kafka_header_add(h, name, -1, d, (ssize_t)hl);
    d += hl;
  }
  return h;
}

static int list_push(msg_list_t *l, msg_t *m) {
  if (l->n == l->cap) {
    int64_t const cap = l->cap ? 2 * l->cap : 1024;
    msg_t **const grown = realloc(l->m, (size_t)cap * sizeof *grown);
    if (grown == NULL) return -1;
    l->m = grown;
    l->cap = cap;
  }
  l->m[l->n++] = m;
  return 0;
}

static void list_free(msg_list_t *l) {
  for (int64_t i = 0; i < l->n; i++)
    free(l->m[i]);
  free(l->m);
  *l = (msg_list_t){0};
}

/* ------------------------------------------------------------------------ */
/* The thread                                                                */

/* Records a failure for good (the caller learns it on its next call). */
static void fail(ls_publisher_t *p, const char *what, const rd_kafka_error_t *e) {
  pthread_mutex_lock(&p->lock);
  /* Fenced: another producer of this transactional id took over, or the
   * broker aborted a transaction older than transaction.timeout.ms (an
   * outage longer than it). */
  int const fenced = e != NULL && rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__FENCED;
  if (!p->failed)
    snprintf(p->why, sizeof p->why, "publishing to topic '%s': %s: %s%s", p->topic, what,
             e != NULL ? rd_kafka_error_string(e) : ls_last_error(),
             fenced ? " (another trainer took over this run, or a broker outage outlasted the "
                      "transaction timeout, transaction.timeout.ms: restart it, and the resumed "
                      "run publishes each forecast once)"
                    : "");
  p->failed = 1;
  pthread_cond_broadcast(&p->done);
  pthread_mutex_unlock(&p->lock);
}

/* Keeps the last error retried, for the stats. */
static void note_retry(ls_publisher_t *p, const char *what, const rd_kafka_error_t *e) {
  pthread_mutex_lock(&p->lock);
  p->st.retries++;
  snprintf(p->st.error, sizeof p->st.error, "%s: %s", what, rd_kafka_error_string(e));
  pthread_mutex_unlock(&p->lock);
}

static void sleep_ms(int ms) {
  struct timespec const ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Produces what pending holds beyond the open transaction. Returns -1 on a
 * failure for good. */
static int produce_pending(ls_publisher_t *p) {
  while (p->produced < p->pending.n && !p->txn_bad) {
    if (!p->txn_open) {
      rd_kafka_error_t *const e = rd_kafka_begin_transaction(p->rk);
      if (e != NULL) {
        fail(p, "begin_transaction", e);
        rd_kafka_error_destroy(e);
        return -1;
      }
      p->txn_open = 1;
      p->txn_t0 = base_now_s();
    }
    msg_t *const m = p->pending.m[p->produced];
    rd_kafka_headers_t *const h = msg_headers(m);
    rd_kafka_resp_err_t const err = rd_kafka_producev(
        p->rk, RD_KAFKA_V_RKT(p->rkt), RD_KAFKA_V_KEY(m->data, m->key_len),
        /* The value is not copied: m lives until its transaction commits. */
        RD_KAFKA_V_VALUE(m->data + m->key_len, m->len), RD_KAFKA_V_MSGFLAGS(0),
        RD_KAFKA_V_TIMESTAMP(m->timestamp), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_headers_destroy(h);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) { /* librdkafka's queue: let it drain */
        rd_kafka_poll(p->rk, 10);
        return 0;
      }
      p->txn_bad = 1; /* the transaction is in an error state: its commit says how */
      return 0;
    }
    p->produced++;
  }
  return 0;
}

/* The open transaction committed: its messages are done. */
static void committed(ls_publisher_t *p) {
  int64_t const k = p->produced;
  p->txn_open = 0;
  if (k == 0) return;
  int64_t const last = p->pending.m[k - 1]->seq;
  for (int64_t i = 0; i < k; i++)
    free(p->pending.m[i]);
  memmove(p->pending.m, p->pending.m + k, (size_t)(p->pending.n - k) * sizeof *p->pending.m);
  p->pending.n -= k;
  p->produced = 0;
  pthread_mutex_lock(&p->lock);
  p->held -= k;
  p->st.committed = last;
  p->st.transactions++;
  p->st.error[0] = '\0';
  pthread_cond_broadcast(&p->done);
  pthread_mutex_unlock(&p->lock);
}

/* Aborts the open transaction, to produce its messages again. Returns -1
 * on a failure for good. */
static int abort_open(ls_publisher_t *p) {
  for (;;) {
    rd_kafka_error_t *const e = rd_kafka_abort_transaction(p->rk, p->timeout_ms);
    if (e == NULL) break;
    if (!rd_kafka_error_is_retriable(e)) {
      fail(p, "abort_transaction", e);
      rd_kafka_error_destroy(e);
      return -1;
    }
    note_retry(p, "abort_transaction", e);
    rd_kafka_error_destroy(e);
    sleep_ms(RETRY_MS);
  }
  p->produced = 0;
  p->txn_open = 0;
  p->txn_bad = 0;
  pthread_mutex_lock(&p->lock);
  p->st.aborts++;
  pthread_mutex_unlock(&p->lock);
  /* The broker may have aborted it first, skipping markers (a restart):
   * what it left open would go out with the next commit. */
  if (kafka_abort_left_open(p->rk, p->rkt, &p->conf, p->partitions) == LS_OK) return 0;
  fail(p, "after an abort", NULL);
  return -1;
}

/* Commits the open transaction. Returns -1 on a failure for good. */
static int commit_open(ls_publisher_t *p) {
  rd_kafka_error_t *const e = rd_kafka_commit_transaction(p->rk, p->timeout_ms);
  if (e == NULL) {
    committed(p);
    return 0;
  }
  int rc = 0;
  if (rd_kafka_error_txn_requires_abort(e)) {
    note_retry(p, "commit_transaction (aborted, produced again)", e);
    rc = abort_open(p);
  } else if (rd_kafka_error_is_retriable(e)) {
    note_retry(p, "commit_transaction", e);
    sleep_ms(RETRY_MS);
  } else {
    fail(p, "commit_transaction", e);
    rc = -1;
  }
  rd_kafka_error_destroy(e);
  return rc;
}

/* Whether the open transaction is to be committed now (ask: the number
 * committing was asked up to); else *wait_s receives how long until it is. */
static int commit_due(const ls_publisher_t *p, int64_t ask, double *wait_s) {
  *wait_s = IDLE_MS / 1000.0;
  if (!p->txn_open) return 0;
  if (p->txn_bad) return 1; /* its commit fails and says whether to abort */
  if (p->produced == 0) return 0;
  int64_t const first = p->pending.m[0]->seq;
  int const all_asked = p->produced == p->pending.n || p->pending.m[p->produced]->seq > ask;
  if (ask >= first && all_asked) return 1;
  double const left = p->txn_t0 + p->commit_ms / 1000.0 - base_now_s();
  if (left <= 0) return 1;
  if (left < *wait_s) *wait_s = left;
  return 0;
}

/* Moves what the caller queued to pending; *quit and *ask as they are. */
static int take_in(ls_publisher_t *p, int *quit, int64_t *ask) {
  pthread_mutex_lock(&p->lock);
  int rc = 0;
  for (int64_t i = 0; i < p->in.n && rc == 0; i++)
    rc = list_push(&p->pending, p->in.m[i]);
  if (rc == 0) p->in.n = 0;
  *quit = p->quit;
  *ask = p->ask;
  pthread_mutex_unlock(&p->lock);
  if (rc != 0) {
    ls_error_set(LS_ERR_NOMEM, "out of memory");
    fail(p, "holding messages", NULL);
  }
  return rc;
}

static void *publisher_main(void *arg) {
  ls_publisher_t *const p = arg;
  pthread_setname_np(pthread_self(), "ls-publisher");
  for (;;) {
    int quit = 0;
    int64_t ask = 0;
    if (take_in(p, &quit, &ask) != 0 || quit) break;
    if (produce_pending(p) != 0) break;
    rd_kafka_poll(p->rk, 0); /* delivery reports: positions */
    double wait_s = 0;
    if (commit_due(p, ask, &wait_s)) {
      if (commit_open(p) != 0) break;
      continue;
    }
    pthread_mutex_lock(&p->lock);
    if (p->in.n == 0 && !p->quit && p->ask == ask) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      long const ns = ts.tv_nsec + (long)(wait_s * 1e9);
      ts.tv_sec += ns / 1000000000L;
      ts.tv_nsec = ns % 1000000000L;
      p->idle = 1;
      pthread_cond_timedwait(&p->wake, &p->lock, &ts);
      p->idle = 0;
    }
    pthread_mutex_unlock(&p->lock);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  ls_publisher_t *const p = rd_kafka_opaque(rk);
  if (p != NULL) kafka_log_store(&p->log, level, fac, buf);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
  (void)rk;
  ls_publisher_t *const p = opaque;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR || m->partition < 0 || m->partition >= p->partitions)
    return;
  pthread_mutex_lock(&p->lock);
  if (m->offset + 1 > p->next[m->partition]) p->next[m->partition] = m->offset + 1;
  pthread_mutex_unlock(&p->lock);
}

void ls_publisher_conf_init(ls_publisher_conf_t *conf) {
  if (conf == NULL) return;
  *conf = (ls_publisher_conf_t){.commit_ms = 100, .max_messages = 1 << 20, .timeout_ms = 30000};
}

static ls_err_t check_conf(const ls_publisher_conf_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "publisher: conf is NULL");
  LS_RETURN_IF(c->brokers == NULL || !c->brokers[0] || c->topic == NULL || !c->topic[0] ||
                   c->transactional_id == NULL || !c->transactional_id[0],
               LS_ERR_INVALID_ARG, "publisher: brokers, topic and transactional id are required");
  LS_RETURN_IF(c->commit_ms < 0 || c->max_messages < 1 || c->timeout_ms < 1 || c->n_settings < 0 ||
                   (c->n_settings > 0 && c->settings == NULL),
               LS_ERR_INVALID_ARG,
               "publisher: commit_ms %d (>= 0), max_messages %" PRId64 " (>= 1), timeout_ms %d "
               "(>= 1), %d settings",
               c->commit_ms, c->max_messages, c->timeout_ms, c->n_settings);
  return LS_OK;
}

/* A producer on c's brokers and settings, `extra` [n_extra] applied
 * before them, reporting to p (may be NULL). */
static ls_err_t client_new(const ls_publisher_conf_t *c, const char *const *extra, int n_extra,
                           ls_publisher_t *p, rd_kafka_t **out) {
  *out = NULL;
  rd_kafka_conf_t *k = NULL;
  LS_FORWARD_IF_ERROR(kafka_conf_new(c->brokers, extra, n_extra, c->settings, c->n_settings, &k));
  if (p != NULL) {
    rd_kafka_conf_set_opaque(k, p);
    rd_kafka_conf_set_log_cb(k, on_log);
    rd_kafka_conf_set_dr_msg_cb(k, on_delivery);
  }
  char errstr[512];
  *out = rd_kafka_new(RD_KAFKA_PRODUCER, k, errstr, sizeof errstr);
  if (*out == NULL) {
    rd_kafka_conf_destroy(k);
    return ls_error_set(LS_ERR_KAFKA, "publisher: cannot create a Kafka producer: %s", errstr);
  }
  return LS_OK;
}

/* The transactional producer of c, its transactions started. */
static ls_err_t transactional_new(const ls_publisher_conf_t *c, ls_publisher_t *p,
                                  rd_kafka_t **out) {
  char id[600], queue[64];
  snprintf(id, sizeof id, "transactional.id=%s", c->transactional_id);
  /* librdkafka's own queue never holds more than we do. */
  snprintf(queue, sizeof queue, "queue.buffering.max.messages=%" PRId64,
           c->max_messages < 10000000 ? c->max_messages : 10000000);
  const char *extra[] = {publisher_defaults[0], publisher_defaults[1], publisher_defaults[2], id,
                         queue};
  LS_FORWARD_IF_ERROR(client_new(c, extra, 5, p, out));
  rd_kafka_error_t *e = rd_kafka_init_transactions(*out, c->timeout_ms);
  if (e != NULL && rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT) {
    /* The broker allows less than lstream's default (a caller's own
     * setting, applied after it, is kept and refused as it is). */
    rd_kafka_error_destroy(e);
    rd_kafka_destroy(*out);
    extra[2] = "transaction.timeout.ms=60000";
    LS_FORWARD_IF_ERROR(client_new(c, extra, 5, p, out));
    e = rd_kafka_init_transactions(*out, c->timeout_ms);
  }
  if (e == NULL) return LS_OK;
  ls_err_t const err = ls_error_set(
      LS_ERR_KAFKA, "topic '%s': cannot start transactions (transactional.id %s) within %d ms: %s",
      c->topic, c->transactional_id, c->timeout_ms, rd_kafka_error_string(e));
  rd_kafka_error_destroy(e);
  rd_kafka_destroy(*out);
  *out = NULL;
  return err;
}

/* The topic's metadata: it can be written (every partition has a leader). */
static ls_err_t check_topic(ls_publisher_t *p, const ls_publisher_conf_t *c) {
  p->rkt = rd_kafka_topic_new(p->rk, c->topic, NULL);
  LS_RETURN_IF(p->rkt == NULL, LS_ERR_KAFKA, "topic '%s' cannot be written: %s", c->topic,
               rd_kafka_err2str(rd_kafka_last_error()));
  rd_kafka_resp_err_t const err =
      kafka_wait_metadata(p->rk, p->rkt, c->timeout_ms, 1, &p->partitions);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return LS_OK;
  char logged[512];
  kafka_log_get(&p->log, logged, sizeof logged);
  return ls_error_set(LS_ERR_KAFKA,
                      "topic '%s' cannot be written: %s (within %d ms; last client message: %s): "
                      "does it exist (or does the cluster create topics), does every partition "
                      "have a leader, may this client write it?",
                      c->topic, rd_kafka_err2str(err), c->timeout_ms, logged);
}

/* p->conf: c with its strings copied (the thread ends what an abort left
 * open with it). */
static ls_err_t conf_copy(ls_publisher_t *p, const ls_publisher_conf_t *c) {
  p->conf = *c;
  p->conf.brokers = p->brokers = strdup(c->brokers);
  p->conf.transactional_id = p->txn_id = strdup(c->transactional_id);
  p->conf.topic = p->topic;
  p->settings = calloc((size_t)c->n_settings + 1, sizeof *p->settings);
  int ok = p->brokers != NULL && p->txn_id != NULL && p->settings != NULL;
  for (int i = 0; ok && i < c->n_settings; i++)
    ok = (p->settings[i] = strdup(c->settings[i])) != NULL;
  p->conf.settings = (const char *const *)p->settings;
  return ok ? LS_OK : ls_error_set(LS_ERR_NOMEM, "publisher: out of memory");
}

ls_err_t ls_publisher_new(const ls_publisher_conf_t *c, ls_publisher_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "publisher: out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(check_conf(c));
  if (kafka_check_topic(c->topic) != LS_OK) /* a cluster might create it anyway */
    return ls_error_set(LS_ERR_INVALID_ARG, "topic '%s' cannot be written: %s", c->topic,
                        ls_last_error());
  ls_publisher_t *const p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "publisher: out of memory");
  kafka_log_init(&p->log);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  p->commit_ms = c->commit_ms;
  p->timeout_ms = c->timeout_ms;
  p->max_messages = c->max_messages;
  p->topic = strdup(c->topic);
  ls_err_t err = p->topic != NULL ? LS_OK : ls_error_set(LS_ERR_NOMEM, "publisher: strdup");
  if (err == LS_OK) err = transactional_new(c, p, &p->rk);
  if (err == LS_OK) err = check_topic(p, c);
  if (err == LS_OK && (p->next = calloc((size_t)p->partitions, sizeof *p->next)) == NULL)
    err = ls_error_set(LS_ERR_NOMEM, "publisher: out of memory");
  if (err == LS_OK) err = conf_copy(p, c);
  if (err == LS_OK) err = kafka_abort_left_open(p->rk, p->rkt, &p->conf, p->partitions);
  for (int32_t q = 0; err == LS_OK && q < p->partitions; q++) { /* where ours will land */
    int64_t lo = 0;
    rd_kafka_resp_err_t const kerr =
        kafka_watermarks(p->rk, c->topic, q, c->timeout_ms, &lo, &p->next[q]);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR)
      err = ls_error_set(LS_ERR_KAFKA, "topic '%s' partition %d: its high watermark: %s", c->topic,
                         (int)q, rd_kafka_err2str(kerr));
  }
  if (err == LS_OK) {
    p->started = pthread_create(&p->thread, NULL, publisher_main, p) == 0;
    if (!p->started) err = ls_error_set(LS_ERR_NOMEM, "publisher: cannot start its thread");
  }
  if (err != LS_OK) {
    ls_publisher_destroy(p);
    return err;
  }
  *out = p;
  return LS_OK;
}

void ls_publisher_destroy(ls_publisher_t *p) {
  if (p == NULL) return;
  if (p->started) {
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
  }
  if (p->rk != NULL) {
    rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    if (p->txn_open) {
      rd_kafka_error_t *const e = rd_kafka_abort_transaction(p->rk, 1000);
      if (e != NULL) rd_kafka_error_destroy(e);
    }
  }
  if (p->rkt != NULL) rd_kafka_topic_destroy(p->rkt);
  if (p->rk != NULL) rd_kafka_destroy(p->rk);
  list_free(&p->in);
  list_free(&p->pending);
  free(p->next);
  free(p->topic);
  for (int i = 0; p->settings != NULL && i < p->conf.n_settings; i++)
    free(p->settings[i]);
  free(p->settings), free(p->brokers), free(p->txn_id);
  kafka_log_destroy(&p->log);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

int32_t ls_publisher_partitions(const ls_publisher_t *p) {
  return p != NULL ? p->partitions : 0;
}

/* ------------------------------------------------------------------------ */
/* The caller's side                                                         */

/* Waits on done until *until (realtime) or forever (until NULL); 1 if the
 * time ran out. Caller holds lock. */
static int wait_done(ls_publisher_t *p, const struct timespec *until) {
  if (until == NULL) return pthread_cond_wait(&p->done, &p->lock) != 0;
  return pthread_cond_timedwait(&p->done, &p->lock, until) != 0;
}

/* The realtime clock wait_ms from now into *ts; NULL for wait_ms < 0. */
static const struct timespec *deadline(int wait_ms, struct timespec *ts) {
  if (wait_ms < 0) return NULL;
  clock_gettime(CLOCK_REALTIME, ts);
  long const ns = ts->tv_nsec + (long)(wait_ms % 1000) * 1000000L;
  ts->tv_sec += wait_ms / 1000 + ns / 1000000000L;
  ts->tv_nsec = ns % 1000000000L;
  return ts;
}

ls_err_t ls_publisher_send(ls_publisher_t *p, const void *key, size_t key_len, const void *value,
                           size_t len, int64_t timestamp_ms, const ls_header_t *headers,
                           int n_headers, int wait_ms, int *queued) {
  LS_RETURN_IF(p == NULL || queued == NULL, LS_ERR_INVALID_ARG, "publisher or queued is NULL");
  *queued = 0;
  LS_RETURN_IF(key == NULL || key_len < 1 || key_len > LS_KEY_MAX || (value == NULL && len > 0) ||
                   len > UINT32_MAX || timestamp_ms < 0 || n_headers < 0 ||
                   n_headers > LS_HEADERS_MAX || (n_headers > 0 && headers == NULL),
               LS_ERR_INVALID_ARG,
               "ls_publisher_send: a key of 1..%d bytes, a value, a timestamp >= 0 and at most "
               "%d headers (got %zu bytes, %zu bytes, %" PRId64 ", %d)",
               LS_KEY_MAX, LS_HEADERS_MAX, key_len, len, timestamp_ms, n_headers);
  for (int i = 0; i < n_headers; i++)
    LS_RETURN_IF(headers[i].name == NULL || (headers[i].value == NULL && headers[i].len > 0) ||
                     headers[i].len > UINT32_MAX,
                 LS_ERR_INVALID_ARG, "ls_publisher_send: header %d has no name or no value", i);
  struct timespec ts;
  const struct timespec *const until = deadline(wait_ms, &ts);
  pthread_mutex_lock(&p->lock);
  int timed_out = 0;
  if (p->held >= p->max_messages && !p->failed) p->st.waits++;
  while (p->held >= p->max_messages && !p->failed && !timed_out && wait_ms != 0)
    timed_out = wait_done(p, until);
  ls_err_t err = p->failed ? ls_error_set(LS_ERR_KAFKA, "%s", p->why) : LS_OK;
  msg_t *const m = err == LS_OK && p->held < p->max_messages
                       ? msg_new(key, key_len, value, len, timestamp_ms, headers, n_headers)
                       : NULL;
  if (m != NULL && list_push(&p->in, m) != 0) {
    free(m);
    err = ls_error_set(LS_ERR_NOMEM, "publisher: out of memory for %" PRId64 " messages",
                       2 * p->in.cap);
  } else if (m != NULL) {
    m->seq = ++p->st.sent;
    p->held++;
    *queued = 1;
    if (p->idle) pthread_cond_signal(&p->wake); /* else it takes `in` on its next turn */
  }
  pthread_mutex_unlock(&p->lock);
  return err;
}

int64_t ls_publisher_sent(ls_publisher_t *p) {
  if (p == NULL) return 0;
  pthread_mutex_lock(&p->lock);
  int64_t const n = p->st.sent;
  pthread_mutex_unlock(&p->lock);
  return n;
}

ls_err_t ls_publisher_commit(ls_publisher_t *p, int64_t upto, int wait_ms, int *done) {
  LS_RETURN_IF(p == NULL || done == NULL, LS_ERR_INVALID_ARG, "publisher or done is NULL");
  struct timespec ts;
  const struct timespec *const until = deadline(wait_ms, &ts);
  pthread_mutex_lock(&p->lock);
  if (upto > p->ask) {
    p->ask = upto;
    pthread_cond_signal(&p->wake);
  }
  int timed_out = 0;
  while (p->st.committed < upto && !p->failed && !timed_out && wait_ms != 0)
    timed_out = wait_done(p, until);
  *done = p->st.committed >= upto;
  ls_err_t const err = p->failed ? ls_error_set(LS_ERR_KAFKA, "%s", p->why) : LS_OK;
  pthread_mutex_unlock(&p->lock);
  return err;
}

ls_err_t ls_publisher_positions(ls_publisher_t *p, int64_t *next, int32_t n) {
  LS_RETURN_IF(p == NULL || next == NULL || n != p->partitions, LS_ERR_INVALID_ARG,
               "ls_publisher_positions: publisher and next [partitions] must be given (n %d, "
               "partitions %d)",
               (int)n, p != NULL ? (int)p->partitions : 0);
  pthread_mutex_lock(&p->lock);
  memcpy(next, p->next, (size_t)n * sizeof *next);
  pthread_mutex_unlock(&p->lock);
  return LS_OK;
}

ls_err_t ls_publisher_stats(ls_publisher_t *p, ls_publisher_stats_t *out) {
  LS_RETURN_IF(p == NULL || out == NULL, LS_ERR_INVALID_ARG, "publisher or out is NULL");
  pthread_mutex_lock(&p->lock);
  *out = p->st;
  pthread_mutex_unlock(&p->lock);
  return LS_OK;
}

ls_err_t ls_publisher_fence(const ls_publisher_conf_t *c) {
  LS_FORWARD_IF_ERROR(check_conf(c));
  rd_kafka_t *rk = NULL;
  LS_FORWARD_IF_ERROR(transactional_new(c, NULL, &rk));
  rd_kafka_destroy(rk);
  return LS_OK;
}
