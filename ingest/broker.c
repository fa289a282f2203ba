/*
 * The embedded broker (include/lstream/produce.h, "Embedded broker"):
 * librdkafka's mock cluster hosted on a helper producer handle, as in
 * librdkafka's tests/0009-mock_cluster.c, plus an optional fixed bootstrap
 * port through a loopback relay (ingest/relay.h).
 */
#include "lstream/produce.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h> /* must follow rdkafka.h */

#include "kafka_util.h"
#include "relay.h"

struct ls_broker_s {
  rd_kafka_t *rk; /* the helper handle that owns the mock cluster */
  rd_kafka_mock_cluster_t *mock;
  relay_t *relay;      /* NULL without a fixed port */
  char bootstrap[512]; /* what clients use */
  int n_brokers;
  int port[LS_BROKER_MAX_BROKERS + 1]; /* broker id -> its listener's port */
  int hold[LS_BROKER_MAX_BROKERS + 1]; /* id -> the socket holding a down broker's port, or -1 */
  kafka_log_t log;
};

static void broker_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf) {
  ls_broker_t *const b = rd_kafka_opaque(rk);
  kafka_log_store(&b->log, level, fac, buf);
}

/* b->port[id] from the mock's bootstrap list "host:port,..." (brokers 1..N
 * in order); 0 where it cannot be read. */
static void broker_ports(ls_broker_t *b, const char *direct) {
  const char *s = direct;
  for (int id = 1; id <= b->n_brokers && s != NULL; id++) {
    const char *const colon = strchr(s, ':');
    b->port[id] = colon != NULL ? atoi(colon + 1) : 0;
    s = strchr(s, ',');
    if (s != NULL) s++;
  }
}

/* While a mock broker is down, its listener is closed and its port free:
 * another process's listener, or a client's own outgoing socket (a TCP
 * self-connect), could take it, and clients that still find that broker in
 * the metadata would then talk to the wrong party instead of being refused.
 * A socket bound to the port, not listening, keeps connections refused and
 * the port taken (ephemeral ports skip bound ones; explicit binds fail).
 * Best effort: where the bind fails, the port was taken already. */
static void broker_hold_port(ls_broker_t *b, int id) {
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)b->port[id]),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int const fd = b->port[id] > 0 ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  int on = 1; /* bound past the closed connections' TIME_WAIT ... */
  if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
                  bind(fd, (const struct sockaddr *)&a, sizeof a) != 0)) {
    close(fd);
    return;
  }
  on = 0; /* ... then exclusive: other binds of the port fail, SO_REUSEADDR or not */
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  b->hold[id] = fd;
}

static void broker_release_port(ls_broker_t *b, int id) {
  if (b->hold[id] >= 0) close(b->hold[id]);
  b->hold[id] = -1;
}

/* librdkafka's mock leaves Nagle's algorithm on its connections (it sets
 * no TCP_NODELAY; a real broker does): a small response that follows
 * another waits for the client's delayed acknowledgement (~40 ms on Linux)
 * whenever the client has nothing else to send, e.g. the last produce
 * before a transaction's commit. Accepted connections inherit the
 * listener's TCP_NODELAY on Linux, so each mock broker's listener (found
 * among this process's sockets by its port) gets it. Best effort: a
 * listener not found keeps the mock's default. */
static void broker_nodelay(const ls_broker_t *b) {
  DIR *const d = opendir("/proc/self/fd");
  if (d == NULL) return;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int const fd = atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(d)) continue;
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int listening = 0;
    socklen_t ll = sizeof listening;
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0 || len != sizeof a ||
        a.sin_family != AF_INET ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll) != 0 || !listening)
      continue;
    for (int id = 1; id <= b->n_brokers; id++)
      if (b->port[id] == ntohs(a.sin_port)) {
        int const on = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      }
  }
  closedir(d);
}

/* ------------------------------------------------------------------------ */

ls_err_t ls_broker_new(ls_broker_t **out, int n_brokers, int port) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_broker_new: out is NULL");
  *out = NULL;
  LS_RETURN_IF(n_brokers < 1 || n_brokers > LS_BROKER_MAX_BROKERS, LS_ERR_INVALID_ARG,
               "broker count %d is out of range (1..%d)", n_brokers, LS_BROKER_MAX_BROKERS);
  LS_RETURN_IF(port < 0 || port > 65535, LS_ERR_INVALID_ARG,
               "port %d is out of range (0 for a random port, else 1..65535)", port);
  ls_broker_t *const b = calloc(1, sizeof *b);
  LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "allocating the embedded broker");
  kafka_log_init(&b->log);
  b->n_brokers = n_brokers;
  for (int id = 0; id <= LS_BROKER_MAX_BROKERS; id++)
    b->hold[id] = -1;

  rd_kafka_conf_t *const conf = rd_kafka_conf_new();
  rd_kafka_conf_set_log_cb(conf, broker_log_cb);
  rd_kafka_conf_set_opaque(conf, b);
  char errstr[512];
  b->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (b->rk == NULL) {
    rd_kafka_conf_destroy(conf);
    ls_broker_destroy(b);
    return ls_error_set(LS_ERR_KAFKA, "creating the mock cluster's helper handle: %s", errstr);
  }
  b->mock = rd_kafka_mock_cluster_new(b->rk, n_brokers);
  if (b->mock == NULL) {
    char last[512];
    kafka_log_get(&b->log, last, sizeof last);
    ls_broker_destroy(b);
    return ls_error_set(LS_ERR_KAFKA, "librdkafka could not start a mock cluster of %d brokers: %s",
                        n_brokers, last);
  }
  const char *const direct = rd_kafka_mock_cluster_bootstraps(b->mock);
  broker_ports(b, direct);
  broker_nodelay(b);
  if (port != 0) {
    ls_err_t const err = relay_new(&b->relay, port, direct);
    if (err != LS_OK) {
      ls_broker_destroy(b);
      return err;
    }
    snprintf(b->bootstrap, sizeof b->bootstrap, "127.0.0.1:%d", port);
  } else if ((size_t)snprintf(b->bootstrap, sizeof b->bootstrap, "%s", direct) >=
             sizeof b->bootstrap) {
    ls_broker_destroy(b);
    return ls_error_set(LS_ERR_NOMEM, "bootstrap list of %d brokers is too long", n_brokers);
  }
  *out = b;
  return LS_OK;
}

void ls_broker_destroy(ls_broker_t *broker) {
  if (broker == NULL) return;
  for (int id = 1; id <= broker->n_brokers; id++)
    broker_release_port(broker, id);
  relay_destroy(broker->relay);
  if (broker->mock != NULL) rd_kafka_mock_cluster_destroy(broker->mock);
  if (broker->rk != NULL) rd_kafka_destroy(broker->rk);
  kafka_log_destroy(&broker->log);
  free(broker);
}

const char *ls_broker_bootstrap(const ls_broker_t *broker) {
  return broker != NULL ? broker->bootstrap : "";
}

/* ------------------------------------------------------------------------ */

static ls_err_t broker_check_id(const ls_broker_t *broker, int broker_id) {
  LS_RETURN_IF(broker_id < 1 || broker_id > broker->n_brokers, LS_ERR_INVALID_ARG,
               "broker id %d does not exist (this cluster has ids 1..%d)", broker_id,
               broker->n_brokers);
  return LS_OK;
}

/* Turns a mock call's result into an lstream error naming the action. */
static ls_err_t broker_result(rd_kafka_resp_err_t rerr, const char *what) {
  LS_RETURN_IF(rerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA, "%s: %s", what,
               rd_kafka_err2str(rerr));
  return LS_OK;
}

ls_err_t ls_broker_topic_create(ls_broker_t *broker, const char *topic, int partitions) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG, "ls_broker_topic_create: broker is NULL");
  LS_FORWARD_IF_ERROR(kafka_check_topic(topic));
  LS_RETURN_IF(partitions < 1 || partitions > LS_BROKER_MAX_PARTITIONS, LS_ERR_INVALID_ARG,
               "topic '%s': %d partitions is out of range (1..%d)", topic, partitions,
               LS_BROKER_MAX_PARTITIONS);
  char what[300];
  snprintf(what, sizeof what, "creating topic '%s' with %d partitions", topic, partitions);
  LS_FORWARD_IF_ERROR(
      broker_result(rd_kafka_mock_topic_create(broker->mock, topic, partitions, 1), what));
  /* The mock draws each partition's leader at random (rd_jitter over its
   * replicas, which are the first min(3, N) brokers whatever the factor
   * asked): then with 2 brokers and 4 partitions, 1 run in 16 has broker 1
   * lead nothing, and a test that takes it down tests nothing. Partition p
   * is led by broker 1 + p % N instead, the same every run. */
  for (int p = 0; broker->n_brokers > 1 && p < partitions; p++)
    LS_FORWARD_IF_ERROR(ls_broker_set_leader(broker, topic, p, 1 + p % broker->n_brokers));
  return LS_OK;
}

ls_err_t ls_broker_set_down(ls_broker_t *broker, int broker_id) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG, "ls_broker_set_down: broker is NULL");
  LS_FORWARD_IF_ERROR(broker_check_id(broker, broker_id));
  LS_FORWARD_IF_ERROR(broker_result(rd_kafka_mock_broker_set_down(broker->mock, broker_id),
                                    "taking a mock broker down"));
  if (broker->hold[broker_id] < 0) broker_hold_port(broker, broker_id);
  return LS_OK;
}

ls_err_t ls_broker_set_up(ls_broker_t *broker, int broker_id) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG, "ls_broker_set_up: broker is NULL");
  LS_FORWARD_IF_ERROR(broker_check_id(broker, broker_id));
  broker_release_port(broker, broker_id); /* the mock listens on it again */
  LS_FORWARD_IF_ERROR(broker_result(rd_kafka_mock_broker_set_up(broker->mock, broker_id),
                                    "bringing a mock broker up"));
  broker_nodelay(broker); /* its new listener */
  return LS_OK;
}

ls_err_t ls_broker_set_leader(ls_broker_t *broker, const char *topic, int partition,
                              int broker_id) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG, "ls_broker_set_leader: broker is NULL");
  LS_FORWARD_IF_ERROR(kafka_check_topic(topic));
  LS_RETURN_IF(partition < 0, LS_ERR_INVALID_ARG, "partition %d of topic '%s' is negative",
               partition, topic);
  if (broker_id != -1) LS_FORWARD_IF_ERROR(broker_check_id(broker, broker_id));
  char what[300];
  snprintf(what, sizeof what, "moving the leader of %s [%d] to broker %d", topic, partition,
           broker_id);
  return broker_result(
      rd_kafka_mock_partition_set_leader(broker->mock, topic, (int32_t)partition, broker_id), what);
}

static ls_err_t broker_check_api(ls_kafka_api_t api) {
  switch (api) {
  case LS_KAFKA_API_PRODUCE:
  case LS_KAFKA_API_FETCH:
  case LS_KAFKA_API_LIST_OFFSETS:
  case LS_KAFKA_API_METADATA:
  case LS_KAFKA_API_OFFSET_COMMIT:
  case LS_KAFKA_API_OFFSET_FETCH:
  case LS_KAFKA_API_FIND_COORDINATOR:
  case LS_KAFKA_API_JOIN_GROUP: return LS_OK;
  }
  return ls_error_set(LS_ERR_INVALID_ARG, "Kafka API key %d is not one of ls_kafka_api_t",
                      (int)api);
}

ls_err_t ls_broker_push_request_errors(ls_broker_t *broker, ls_kafka_api_t api, int n,
                                       const int *errors) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG, "ls_broker_push_request_errors: broker is NULL");
  LS_FORWARD_IF_ERROR(broker_check_api(api));
  LS_RETURN_IF(n < 1 || errors == NULL, LS_ERR_INVALID_ARG,
               "ls_broker_push_request_errors: need at least one error code (got n=%d)", n);
  rd_kafka_resp_err_t *const errs = malloc((size_t)n * sizeof *errs);
  LS_RETURN_IF(errs == NULL, LS_ERR_NOMEM, "allocating %d error codes", n);
  for (int i = 0; i < n; i++) {
    if (errors[i] < 0) {
      free(errs);
      return ls_error_set(LS_ERR_INVALID_ARG,
                          "error code %d at %d is not a Kafka protocol error (those are >= 0; "
                          "librdkafka's negative codes are local)",
                          errors[i], i);
    }
    errs[i] = (rd_kafka_resp_err_t)errors[i];
  }
  rd_kafka_mock_push_request_errors_array(broker->mock, (int16_t)api, (size_t)n, errs);
  free(errs);
  return LS_OK;
}

ls_err_t ls_broker_clear_request_errors(ls_broker_t *broker, ls_kafka_api_t api) {
  LS_RETURN_IF(broker == NULL, LS_ERR_INVALID_ARG,
               "ls_broker_clear_request_errors: broker is NULL");
  LS_FORWARD_IF_ERROR(broker_check_api(api));
  rd_kafka_mock_clear_request_errors(broker->mock, (int16_t)api);
  return LS_OK;
}
