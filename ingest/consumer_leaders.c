/*
 * The leaders of the consumer's partitions (ingest/consumer_internal.h,
 * consumer_check_leaders). Everything the consumer learns of a partition
 * (its watermarks, so a replay's end; its start; its records) comes from
 * the partition's leader, so before any of it is trusted every partition
 * must have a leader in the cluster's metadata that this host reaches at
 * the address it advertises. librdkafka alone says neither in time nor in
 * words: 2.0.2's query_watermark_offsets waits on an unreachable leader
 * past its timeout (it serves its reply queue until the requests give up),
 * and a partition listed without a leader fails there at once as "Unknown
 * partition", however briefly a leader election lasts.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "consumer_internal.h"
#include "kafka_util.h"

/* What is known of one partition's leader, worst first. */
typedef enum lead_e {
  LEAD_UNLISTED,  /* the partition is not in the topic's metadata */
  LEAD_NONE,      /* listed with an error or a leader of -1 */
  LEAD_UNKNOWN,   /* its leader is not among the metadata's brokers */
  LEAD_UNREACHED, /* its leader's advertised address does not connect */
  LEAD_OK
} lead_t;

typedef struct lead_part_s {
  lead_t lead;
  int broker;              /* index in the metadata's brokers, or -1 */
  int32_t leader;          /* the leader's id as listed, or -1 */
  rd_kafka_resp_err_t err; /* what the metadata said of it (LEAD_UNLISTED, LEAD_NONE) */
} lead_part_t;

typedef struct leaders_s {
  ls_ingest_t *ing;
  lead_part_t *part; /* [n_parts], in the order of ing->parts */
} leaders_t;

/* ------------------------------------------------------------------------ */
/* The metadata                                                              */

/* Classifies our partitions by md (kafka_metadata_ready_fn): NO_ERROR once
 * every one of them has a leader among md's brokers, else the first thing
 * missing (a leader election, a topic being created: the wait goes on). */
static rd_kafka_resp_err_t leaders_listed(const struct rd_kafka_metadata *md, void *opaque) {
  const leaders_t *const l = opaque;
  rd_kafka_resp_err_t const topic_err =
      md->topic_cnt != 1 ? RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC : md->topics[0].err;
  for (int i = 0; i < l->ing->n_parts; i++)
    l->part[i] = (lead_part_t){
        LEAD_UNLISTED, -1, -1,
        topic_err != RD_KAFKA_RESP_ERR_NO_ERROR ? topic_err : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION};
  for (int k = 0; topic_err == RD_KAFKA_RESP_ERR_NO_ERROR && k < md->topics[0].partition_cnt; k++) {
    const rd_kafka_metadata_partition_t *const mp = &md->topics[0].partitions[k];
    const part_t *const p = consumer_part(l->ing, mp->id);
    if (p == NULL) continue;
    lead_part_t *const lp = &l->part[p - l->ing->parts];
    lp->leader = mp->leader;
    lp->err = mp->err != RD_KAFKA_RESP_ERR_NO_ERROR ? mp->err
              : mp->leader < 0                      ? RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE
                                                    : RD_KAFKA_RESP_ERR_NO_ERROR;
    lp->lead = lp->err != RD_KAFKA_RESP_ERR_NO_ERROR ? LEAD_NONE : LEAD_UNKNOWN;
    for (int b = 0; lp->lead == LEAD_UNKNOWN && b < md->broker_cnt; b++)
      if (md->brokers[b].id == mp->leader) lp->lead = LEAD_OK, lp->broker = b;
  }
  for (int i = 0; i < l->ing->n_parts; i++)
    if (l->part[i].lead != LEAD_OK)
      return l->part[i].lead == LEAD_UNKNOWN ? RD_KAFKA_RESP_ERR__UNKNOWN_BROKER : l->part[i].err;
  return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* ------------------------------------------------------------------------ */
/* Reaching the leaders                                                      */

enum { ADDRESSES_MAX = 4 }; /* tried per broker: its IPv4 and IPv6 ones, say */

/* Connects in progress, and what they found per broker. */
typedef struct reach_s {
  struct pollfd *fds; /* [n] one connect each; fd -1 once it is over */
  int *broker;        /* [n] the broker (index in the metadata's) of each */
  int n;
  int *reached;    /* [broker_cnt] 1: an address of it connected */
  char (*why)[96]; /* [broker_cnt] why not */
} reach_t;

/* Starts a non-blocking connect to one address of broker b. */
static void reach_start(reach_t *r, const struct addrinfo *ai, int b) {
  int const fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int const err = fd < 0 ? errno : connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    r->fds[r->n] = (struct pollfd){fd, POLLOUT, 0};
    r->broker[r->n++] = b;
    return;
  }
  if (fd >= 0) close(fd);
  if (err == 0)
    r->reached[b] = 1;
  else
    snprintf(r->why[b], sizeof r->why[b], "%s", strerror(err));
}

/* Ends connect i: it connected, or why it did not. */
static void reach_end(reach_t *r, int i) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(r->fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  int const b = r->broker[i];
  if (err == 0)
    r->reached[b] = 1;
  else
    snprintf(r->why[b], sizeof r->why[b], "%s", strerror(err));
  close(r->fds[i].fd);
  r->fds[i].fd = -1; /* poll skips it */
}

/* Connects to the advertised address of every broker that leads one of our
 * partitions, all at once, within timeout_ms: once per broker, not once per
 * partition (a burst of connections to one broker overflows a small listen
 * backlog, the mock broker's is 5, and every dropped SYN then costs the
 * client's own connections a second or more of retransmission). Marks the
 * partitions of a broker that does not connect LEAD_UNREACHED, why[b]
 * saying why. */
static ls_err_t leaders_reach(leaders_t *l, const struct rd_kafka_metadata *md, int timeout_ms,
                              char (*why)[96]) {
  size_t const nb = (size_t)md->broker_cnt + 1;
  reach_t r = {malloc(nb * ADDRESSES_MAX * sizeof *r.fds),
               malloc(nb * ADDRESSES_MAX * sizeof *r.broker), 0, calloc(nb, sizeof *r.reached),
               why};
  int *const used = calloc(nb, sizeof *used); /* [broker_cnt]: leads one of ours */
  if (r.fds == NULL || r.broker == NULL || r.reached == NULL || used == NULL) {
    free(r.fds), free(r.broker), free(r.reached), free(used);
    return ls_error_set(LS_ERR_NOMEM, "reaching the leaders of topic '%s'", l->ing->s.topic);
  }
  for (int i = 0; i < l->ing->n_parts; i++)
    if (l->part[i].lead == LEAD_OK) used[l->part[i].broker] = 1;
  for (int b = 0; b < md->broker_cnt; b++) {
    if (!used[b]) continue;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", md->brokers[b].port);
    int const gai = getaddrinfo(md->brokers[b].host, service, &hints, &res);
    snprintf(why[b], sizeof why[b], "%s", gai != 0 ? gai_strerror(gai) : "no address");
    int k = 0;
    for (const struct addrinfo *ai = res; ai != NULL && k < ADDRESSES_MAX; ai = ai->ai_next, k++)
      reach_start(&r, ai, b);
    if (res != NULL) freeaddrinfo(res);
  }
  int64_t const deadline = base_now_ms() + timeout_ms;
  for (int pending = r.n; pending > 0;) { /* one look at least, even with no time left */
    int64_t const left = deadline - base_now_ms();
    int ready = poll(r.fds, (nfds_t)r.n, left > 0 ? (int)left : 0);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < r.n && ready > 0; i++)
      if (r.fds[i].fd >= 0 && r.fds[i].revents != 0) reach_end(&r, i), ready--, pending--;
    if (left <= 0) break;
  }
  for (int i = 0; i < r.n; i++) {
    if (r.fds[i].fd < 0) continue;
    close(r.fds[i].fd);
    if (!r.reached[r.broker[i]])
      snprintf(why[r.broker[i]], sizeof why[0], "no answer within %d ms", timeout_ms);
  }
  for (int i = 0; i < l->ing->n_parts; i++)
    if (l->part[i].lead == LEAD_OK && !r.reached[l->part[i].broker])
      l->part[i].lead = LEAD_UNREACHED;
  free(r.fds), free(r.broker), free(r.reached), free(used);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The report                                                                */

/* Whether two partitions are in the same case (the same broker's). */
static int same_case(const lead_part_t *a, const lead_part_t *b) {
  return a->lead == b->lead && a->leader == b->leader && a->err == b->err;
}

/* "partition 0" or "partitions 0, 2, 4 and 9 more": those in partition
 * first's case (it is the first in a bad one). Returns how many there are;
 * *others receives how many partitions are in another bad case. */
static int case_partitions(const leaders_t *l, int first, char *out, size_t size, int *others) {
  enum { LISTED = 8 };
  char ids[LISTED * 12] = "";
  size_t at = 0;
  int n = 0;
  *others = 0;
  for (int i = first; i < l->ing->n_parts; i++) {
    if (!same_case(&l->part[i], &l->part[first]))
      *others += l->part[i].lead != LEAD_OK;
    else if (n++ < LISTED)
      at += (size_t)snprintf(ids + at, sizeof ids - at, "%s%d", n > 1 ? ", " : "",
                             (int)l->ing->parts[i].id);
  }
  char more[32] = "";
  if (n > LISTED) snprintf(more, sizeof more, " and %d more", n - LISTED);
  snprintf(out, size, "partition%s %s%s", n > 1 ? "s" : "", ids, more);
  return n;
}

/* LS_OK when every partition's leader is listed and reached, else the
 * error naming the first partition that is not, with every partition in
 * its case (advice: the causes to look for, and the bound waited). */
static ls_err_t leaders_report(const leaders_t *l, const struct rd_kafka_metadata *md,
                               char (*why)[96], int timeout_ms, int advice) {
  int first = 0;
  while (first < l->ing->n_parts && l->part[first].lead == LEAD_OK)
    first++;
  if (first == l->ing->n_parts) return LS_OK;
  const lead_part_t *const lp = &l->part[first];
  char parts[160], rest[96] = "";
  int others = 0;
  const char *const their =
      case_partitions(l, first, parts, sizeof parts, &others) > 1 ? "their" : "its";
  if (others > 0)
    snprintf(rest, sizeof rest, " (and %d more partition%s whose leader cannot be read)", others,
             others > 1 ? "s" : "");
  const char *const topic = l->ing->s.topic;
  switch (lp->lead) {
  case LEAD_UNREACHED: {
    const rd_kafka_metadata_broker_t *const br = &md->brokers[lp->broker];
    return ls_error_set(LS_ERR_KAFKA,
                        "cannot read topic '%s' %s: %s leader, broker %d, advertises %s:%d, "
                        "which this host cannot reach (%s)%s%s",
                        topic, parts, their, (int)lp->leader, br->host, br->port, why[lp->broker],
                        rest,
                        advice ? ": is that broker down, or is the address it advertises "
                                 "(advertised.listeners) one that only other hosts reach? Every "
                                 "rank must reach every broker's advertised address"
                               : "");
  }
  case LEAD_UNKNOWN:
    return ls_error_set(LS_ERR_KAFKA,
                        "cannot read topic '%s' %s: %s leader, broker %d, is not among the %d "
                        "brokers the cluster's metadata lists%s",
                        topic, parts, their, (int)lp->leader, md->broker_cnt, rest);
  case LEAD_NONE:
    return ls_error_set(LS_ERR_KAFKA, "cannot read topic '%s' %s: no leader (%s) for %d ms%s%s",
                        topic, parts, rd_kafka_err2str(lp->err), timeout_ms, rest,
                        advice ? " (start.timeout.ms): a leader election that did not end, or "
                                 "every replica of the partition down"
                               : "");
  case LEAD_UNLISTED:
  case LEAD_OK: break;
  }
  return ls_error_set(LS_ERR_KAFKA,
                      "cannot read topic '%s' %s: not in the cluster's metadata (%s)%s: does the "
                      "partition exist?",
                      topic, parts, rd_kafka_err2str(lp->err), rest);
}

/* ------------------------------------------------------------------------ */

ls_err_t consumer_check_leaders(ls_ingest_t *ing, int timeout_ms, int advice) {
  int64_t const deadline = base_now_ms() + timeout_ms;
  leaders_t l = {ing, calloc((size_t)ing->n_parts, sizeof *l.part)};
  rd_kafka_topic_t *const rkt = rd_kafka_topic_new(ing->rk, ing->s.topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  rd_kafka_resp_err_t const kerr =
      l.part == NULL || rkt == NULL
          ? rd_kafka_last_error()
          : kafka_wait_metadata_for(ing->rk, rkt, timeout_ms, leaders_listed, &l, &md);
  char(*const why)[96] = md != NULL ? calloc((size_t)md->broker_cnt + 1, sizeof *why) : NULL;
  ls_err_t err = LS_OK;
  if (l.part == NULL || (md != NULL && why == NULL))
    err = ls_error_set(LS_ERR_NOMEM, "checking the leaders of topic '%s'", ing->s.topic);
  else if (md == NULL)
    err = ls_error_set(LS_ERR_KAFKA,
                       "cannot read topic '%s': no metadata within %d ms: %s (is bootstrap.servers "
                       "right, is any broker up?)",
                       ing->s.topic, timeout_ms, rd_kafka_err2str(kerr));
  int64_t const left = deadline - base_now_ms();
  if (err == LS_OK) err = leaders_reach(&l, md, left > 0 ? (int)left : 0, why);
  if (err == LS_OK) err = leaders_report(&l, md, why, timeout_ms, advice);
  free(why);
  free(l.part);
  if (md != NULL) rd_kafka_metadata_destroy(md);
  if (rkt != NULL) rd_kafka_topic_destroy(rkt);
  return err;
}
