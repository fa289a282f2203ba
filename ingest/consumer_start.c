/*
 * Where the consumer's partitions start (ingest/consumer_internal.h):
 * watermarks, offsets looked up by time, the series a snapshot restores,
 * the assignment.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "consumer_internal.h"
#include "window.h" /* the windower's series: a restored one's id, for the tap */

/* ------------------------------------------------------------------------ */
/* Start positions                                                           */

/* Reads each partition's watermarks and turns its start into an offset. */
static ls_err_t resolve(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  int const timeout = conf->s.start_timeout_ms;
  rd_kafka_topic_partition_list_t *const times = rd_kafka_topic_partition_list_new(1);
  ls_err_t err = LS_OK;
  for (int i = 0; i < ing->n_parts && err == LS_OK; i++) {
    part_t *const p = &ing->parts[i];
    ls_start_t const s = conf->partitions[i].start;
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t const kerr =
        rd_kafka_query_watermark_offsets(ing->rk, ing->s.topic, p->id, &low, &high, timeout);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      err = ls_error_set(LS_ERR_KAFKA,
                         "topic '%s' partition %" PRId32 ": cannot read its watermarks: %s "
                         "(does the partition exist? is bootstrap.servers right?)",
                         ing->s.topic, p->id, rd_kafka_err2str(kerr));
      break;
    }
    p->end = ing->s.stop_at_end ? high : INT64_MAX;
    p->high = high;
    p->skip_time = -1;
    switch (s.kind) {
    case LS_START_OFFSET:
      if (s.value < low || s.value > high)
        err = ls_error_set(LS_ERR_INVALID_ARG,
                           "topic '%s' partition %" PRId32 ": start offset %" PRId64
                           " is outside the watermarks [%" PRId64 ", %" PRId64
                           "] (below: deleted by retention; above: not written yet)",
                           ing->s.topic, p->id, s.value, low, high);
      p->start = p->assign_at = s.value;
      break;
    case LS_START_BEGINNING:
      p->start = low;
      p->assign_at = RD_KAFKA_OFFSET_BEGINNING;
      break;
    case LS_START_END: p->start = p->assign_at = high; break;
    case LS_START_TIMESTAMP:
      p->start = p->assign_at = low; /* unless offsets_for_times finds it */
      p->skip_time = s.value;
      rd_kafka_topic_partition_list_add(times, ing->s.topic, p->id)->offset = s.value;
      break;
    }
    p->next = p->start;
  }
  if (err == LS_OK && times->cnt > 0) {
    rd_kafka_resp_err_t const kerr = rd_kafka_offsets_for_times(ing->rk, times, timeout);
    for (int i = 0; i < times->cnt && err == LS_OK; i++) {
      const rd_kafka_topic_partition_t *const t = &times->elems[i];
      rd_kafka_resp_err_t const perr = kerr != RD_KAFKA_RESP_ERR_NO_ERROR ? kerr : t->err;
      if (perr != RD_KAFKA_RESP_ERR_NO_ERROR) {
        err = ls_error_set(LS_ERR_KAFKA,
                           "topic '%s' partition %" PRId32 ": cannot look up the offset of a "
                           "start time: %s",
                           ing->s.topic, t->partition, rd_kafka_err2str(perr));
        break;
      }
      part_t *const p = consumer_part(ing, t->partition);
      if (t->offset >= 0) p->start = p->assign_at = p->next = t->offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(times);
  return err;
}

/* Queues a window a restore re-formed. */
static ls_err_t enqueue_restored(void *opaque, const ls_window_t *win) {
  ls_ingest_t *const ing = opaque;
  part_t *const part = consumer_part(ing, win->partition);
  LS_RETURN_IF(part == NULL || consumer_enqueue(ing, part, win) != 0, LS_ERR_NOMEM,
               "no memory to queue a restored window of partition %d", (int)win->partition);
  return LS_OK;
}

/* Restores the conf's series in flight of our partitions into the
 * windower; the windows they complete are queued. */
/* With the tap on: the rows of a restored series, as if read again (the
 * trainer takes them before the windows they complete). */
static ls_err_t tap_restored(ls_ingest_t *ing, const ls_inflight_t *in) {
  const series_t *const s = (const series_t *)window_table_find(
      &ing->w->series, base_key_hash(in->key, in->key_len), in->key, in->key_len);
  LS_RETURN_IF(s == NULL, LS_ERR_STATE, "restored series '%.*s' not in the windower",
               (int)in->key_len, in->key);
  for (int r = 0; r < in->rows; r++) {
    ls_windower_record_t const rec = {s->id, in->key, in->key_len,
                                      in->x + (size_t)r * (size_t)ing->s.features, in->times[r]};
    LS_RETURN_IF(consumer_tap_push(ing, &rec, in->partition, in->offsets[r], in->times[r]) != 0,
                 LS_ERR_NOMEM, "no memory for the restored records in the tap");
  }
  return LS_OK;
}

static ls_err_t restore(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  if (conf->n_restores == 0) return LS_OK;
  LS_RETURN_IF(conf->restore_F != ing->s.features, LS_ERR_INVALID_ARG,
               "the records to restore have %d features, the consumer reads %d", conf->restore_F,
               ing->s.features);
  ls_inflight_t *const mine = malloc(conf->n_restores * sizeof *mine);
  LS_RETURN_IF(mine == NULL, LS_ERR_NOMEM, "no memory to restore %zu series", conf->n_restores);
  size_t const F = (size_t)conf->restore_F;
  size_t n = 0;
  for (size_t i = 0; i < conf->n_restores; i++) {
    const ingest_restore_t *const r = &conf->restores[i];
    if (consumer_part(ing, r->s.partition) == NULL) continue;
    mine[n] = r->s;
    mine[n].key = conf->keys + r->key_at;
    mine[n].offsets = conf->row_offsets + r->row_at;
    mine[n].times = conf->row_times + r->row_at;
    mine[n++].x = conf->row_x + r->row_at * F;
  }
  ls_err_t err = ls_windower_restore(ing->w, mine, n, enqueue_restored, ing);
  for (size_t i = 0; i < n && err == LS_OK && ing->s.tap; i++)
    err = tap_restored(ing, &mine[i]);
  free(mine);
  return err;
}

/* Sets *(int *)opaque: the partition holds records. */
static ls_err_t first_pending(void *opaque, const ls_inflight_t *s) {
  (void)s;
  *(int *)opaque = 1;
  return LS_OK;
}

/* Assigns the partitions that have something to read; the others are done
 * from the start. */
static ls_err_t assign(ls_ingest_t *ing) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(ing->n_parts);
  for (int i = 0; i < ing->n_parts; i++) {
    part_t *const p = &ing->parts[i];
    if (p->start >= p->end) { /* what a restore put in it is still flushed */
      int found = 0;
      p->done = 1;
      ing->n_done++;
      ls_windower_each_pending(ing->w, p->id, first_pending, &found);
      if (ing->s.flush && found)
        p->flushing = 1;
      else
        p->ended = 1, ing->n_ended++;
      continue;
    }
    rd_kafka_topic_partition_list_add(list, ing->s.topic, p->id)->offset = p->assign_at;
  }
  rd_kafka_resp_err_t const kerr = rd_kafka_assign(ing->rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  LS_RETURN_IF(kerr != RD_KAFKA_RESP_ERR_NO_ERROR, LS_ERR_KAFKA,
               "cannot assign the partitions of topic '%s': %s", ing->s.topic,
               rd_kafka_err2str(kerr));
  return LS_OK;
}

/* Connects to host:port within timeout_ms: 0, or -1 with the reason in why. */
static int tcp_probe(const char *host, int port, int timeout_ms, char *why, size_t size) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  int const gai = getaddrinfo(host, service, &hints, &res);
  snprintf(why, size, "%s", gai != 0 ? gai_strerror(gai) : "no address");
  int ok = -1;
  for (const struct addrinfo *ai = res; ai != NULL && ok != 0; ai = ai->ai_next) {
    int const fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int err = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      socklen_t len = sizeof err;
      int const r = poll(&p, 1, timeout_ms);
      if (r != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = ETIMEDOUT;
    }
    close(fd);
    if (err == 0)
      ok = 0;
    else
      snprintf(why, size, "%s", err == ETIMEDOUT ? "no answer" : strerror(err));
  }
  if (res != NULL) freeaddrinfo(res);
  return ok;
}

/* Each partition's leader, at the address its broker advertises, must be
 * reachable from here: librdkafka's offset queries wait on an unreachable
 * leader forever, whatever their timeout. Each leader is probed once, not
 * once per partition: a burst of connections overflows a small listen
 * backlog (the mock broker's is 5), and every dropped SYN then costs the
 * client connections made meanwhile a second or more of TCP retransmission. */
static ls_err_t probe_leaders(ls_ingest_t *ing, int timeout_ms) {
  rd_kafka_topic_t *const rkt = rd_kafka_topic_new(ing->rk, ing->s.topic, NULL);
  const struct rd_kafka_metadata *md = NULL;
  if (rkt == NULL ||
      rd_kafka_metadata(ing->rk, 0, rkt, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
    md = NULL; /* what follows reports it */
  /* probed[b]: 0 not yet, 1 reachable, -1 not (why[b] says why) */
  signed char *const probed = md != NULL ? calloc((size_t)md->broker_cnt + 1, 1) : NULL;
  char(*const why)[128] = md != NULL ? calloc((size_t)md->broker_cnt + 1, sizeof *why) : NULL;
  ls_err_t err = md != NULL && (probed == NULL || why == NULL)
                     ? ls_error_set(LS_ERR_NOMEM, "probing the leaders of topic '%s'", ing->s.topic)
                     : LS_OK;
  for (int t = 0; md != NULL && t < md->topic_cnt && err == LS_OK; t++)
    for (int p = 0; p < md->topics[t].partition_cnt && err == LS_OK; p++) {
      const rd_kafka_metadata_partition_t *const mp = &md->topics[t].partitions[p];
      for (int b = 0; consumer_part(ing, mp->id) != NULL && b < md->broker_cnt; b++) {
        const rd_kafka_metadata_broker_t *const br = &md->brokers[b];
        if (br->id != mp->leader) continue;
        if (probed[b] == 0)
          probed[b] =
              tcp_probe(br->host, br->port, timeout_ms, why[b], sizeof why[b]) == 0 ? 1 : -1;
        if (probed[b] > 0) continue;
        err = ls_error_set(LS_ERR_KAFKA,
                           "topic '%s' partition %" PRId32 ": its leader, broker %" PRId32
                           ", advertises %s:%d, which this host cannot reach (%s): is that "
                           "broker down, or is the address it advertises (advertised.listeners) "
                           "one that only other hosts reach? Every rank must reach every "
                           "broker's advertised address",
                           ing->s.topic, mp->id, br->id, br->host, br->port, why[b]);
        break;
      }
    }
  free(probed), free(why);
  if (md != NULL) rd_kafka_metadata_destroy(md);
  if (rkt != NULL) rd_kafka_topic_destroy(rkt);
  return err;
}

ls_err_t consumer_start(ls_ingest_t *ing, const ls_ingest_conf_t *conf) {
  LS_FORWARD_IF_ERROR(probe_leaders(ing, conf->s.start_timeout_ms));
  LS_FORWARD_IF_ERROR(resolve(ing, conf));
  LS_FORWARD_IF_ERROR(restore(ing, conf));
  return assign(ing);
}
