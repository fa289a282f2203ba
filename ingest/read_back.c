/*
 * Reading a topic back (include/lstream/produce.h, ls_topic_read_back): a
 * read_committed consumer of every partition, from given offsets to the
 * high watermarks read at the start, handing each message's key and
 * headers to the caller (what a resumed run needs to leave out what a
 * previous one published).
 */
#include <stdio.h>
#include <stdlib.h>

#include <librdkafka/rdkafka.h>

#include "base/clock.h"
#include "kafka_util.h"
#include "lstream/produce.h"

/* What a read-back has yet to read: per partition the high watermark read
 * at the start, whether it is done. */
typedef struct back_s {
  int64_t *high;
  char *done;
  int left;
} back_t;

/* Assigns every partition of topic (n of them) from from[q] (or its low
 * watermark) to its high watermark; b receives what is left to read. */
static ls_err_t back_assign(rd_kafka_t *rk, const char *topic, int32_t n, const int64_t *from,
                            int32_t n_from, int timeout_ms, back_t *b) {
  rd_kafka_topic_partition_list_t *const list = rd_kafka_topic_partition_list_new(n);
  ls_err_t err = LS_OK;
  for (int32_t q = 0; q < n && err == LS_OK; q++) {
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t const kerr = kafka_watermarks(rk, topic, q, timeout_ms, &lo, &hi);
    if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
      err = ls_error_set(LS_ERR_KAFKA, "reading back topic '%s': partition %d's watermarks: %s",
                         topic, (int)q, rd_kafka_err2str(kerr));
      break;
    }
    int64_t const start = from != NULL && q < n_from && from[q] > lo ? from[q] : lo;
    b->high[q] = hi;
    b->done[q] = start >= hi;
    if (start < hi) {
      rd_kafka_topic_partition_list_add(list, topic, q)->offset = start;
      b->left++;
    }
  }
  if (err == LS_OK && b->left > 0 && rd_kafka_assign(rk, list) != RD_KAFKA_RESP_ERR_NO_ERROR)
    err =
        ls_error_set(LS_ERR_KAFKA, "reading back topic '%s': cannot assign its partitions", topic);
  rd_kafka_topic_partition_list_destroy(list);
  return err;
}

/* Calls fn with m's key and headers. */
static void back_message(const rd_kafka_message_t *m, ls_read_back_fn fn, void *opaque) {
  ls_header_t h[LS_HEADERS_MAX];
  int n = 0;
  rd_kafka_headers_t *hdrs = NULL;
  if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
    for (size_t i = 0; n < LS_HEADERS_MAX; i++) {
      const char *name = NULL;
      const void *value = NULL;
      size_t size = 0;
      if (rd_kafka_header_get_all(hdrs, i, &name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR)
        break;
      h[n++] = (ls_header_t){name, value, size};
    }
  fn(opaque, m->partition, m->key, m->key_len, h, n);
}

/* Consumes until every assigned partition reached its high watermark
 * (errors are librdkafka's to retry: the last one is quoted if time runs
 * out). */
static ls_err_t back_consume(rd_kafka_t *rk, const char *topic, int timeout_ms, back_t *b,
                             ls_read_back_fn fn, void *opaque, int64_t *messages) {
  double const end = base_now_s() + timeout_ms / 1000.0;
  char last[256] = "none";
  while (b->left > 0) {
    LS_RETURN_IF(base_now_s() > end, LS_ERR_KAFKA,
                 "reading back topic '%s': %d partitions not read to their end within %d ms "
                 "(a transaction still open, or the cluster unreachable? last error: %s)",
                 topic, b->left, timeout_ms, last);
    rd_kafka_message_t *const m = rd_kafka_consumer_poll(rk, 100);
    if (m == NULL) continue;
    int64_t reached = -1;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      back_message(m, fn, opaque);
      (*messages)++;
      reached = m->offset + 1;
    } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      reached = m->offset;
    } else {
      snprintf(last, sizeof last, "%s", rd_kafka_message_errstr(m));
    }
    int32_t const q = m->partition;
    if (reached >= 0 && q >= 0 && !b->done[q] && reached >= b->high[q]) {
      b->done[q] = 1;
      b->left--;
    }
    rd_kafka_message_destroy(m);
  }
  return LS_OK;
}

ls_err_t ls_topic_read_back(const ls_publisher_conf_t *c, const int64_t *from, int32_t n_from,
                            ls_read_back_fn fn, void *opaque, int64_t *messages) {
  LS_RETURN_IF(fn == NULL || messages == NULL || n_from < 0, LS_ERR_INVALID_ARG,
               "ls_topic_read_back: fn and messages must not be NULL");
  LS_RETURN_IF(c == NULL || c->brokers == NULL || c->topic == NULL || c->timeout_ms < 1,
               LS_ERR_INVALID_ARG, "ls_topic_read_back: brokers, topic and a timeout are needed");
  *messages = 0;
  static const char *const consumer[] = {
      "group.id=lstream-read-back", "isolation.level=read_committed", "enable.auto.commit=false",
      "enable.partition.eof=true",  "auto.offset.reset=earliest",
  };
  rd_kafka_conf_t *k = NULL;
  LS_FORWARD_IF_ERROR(kafka_conf_new(c->brokers, consumer, 5, c->settings, c->n_settings, &k));
  char errstr[512];
  rd_kafka_t *const rk = rd_kafka_new(RD_KAFKA_CONSUMER, k, errstr, sizeof errstr);
  if (rk == NULL) {
    rd_kafka_conf_destroy(k);
    return ls_error_set(LS_ERR_KAFKA, "reading back: cannot create a Kafka consumer: %s", errstr);
  }
  rd_kafka_topic_t *const rkt = rd_kafka_topic_new(rk, c->topic, NULL);
  int32_t n = 0;
  rd_kafka_resp_err_t const kerr =
      rkt != NULL ? kafka_wait_metadata(rk, rkt, c->timeout_ms, 1, &n) : rd_kafka_last_error();
  if (rkt != NULL) rd_kafka_topic_destroy(rkt);
  ls_err_t err = kerr == RD_KAFKA_RESP_ERR_NO_ERROR
                     ? LS_OK
                     : ls_error_set(LS_ERR_KAFKA, "reading back topic '%s': %s", c->topic,
                                    rd_kafka_err2str(kerr));
  back_t b = {calloc((size_t)(n > 0 ? n : 1), sizeof *b.high), calloc((size_t)(n > 0 ? n : 1), 1),
              0};
  if (err == LS_OK && (b.high == NULL || b.done == NULL))
    err = ls_error_set(LS_ERR_NOMEM, "reading back: out of memory");
  if (err == LS_OK) err = back_assign(rk, c->topic, n, from, n_from, c->timeout_ms, &b);
  if (err == LS_OK) err = back_consume(rk, c->topic, c->timeout_ms, &b, fn, opaque, messages);
  free(b.high), free(b.done);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return err;
}
