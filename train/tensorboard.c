/*
 * TensorBoard event files (train/tensorboard.h): a protocol-buffer encoder
 * for the few fields of tensorflow.Event that scalars need, and TFRecord
 * framing.
 */
#include "tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"

struct tb_writer_s {
  FILE *f;
  char path[4096];
  uint8_t *buf; /* one event being encoded */
  size_t len, cap;
  int nomem;
};

/* ------------------------------------------------------------------------ */
/* Protocol buffers                                                          */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

static void put(tb_writer_t *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    size_t const cap = 2 * (w->len + n) + 256;
    uint8_t *const grown = realloc(w->buf, cap);
    if (grown == NULL) {
      w->nomem = 1;
      return;
    }
    w->buf = grown;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, p, n);
  w->len += n;
}

static void put_varint(tb_writer_t *w, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  put(w, b, n);
}

static void put_key(tb_writer_t *w, int field, int wire) {
  put_varint(w, (uint64_t)field << 3 | (uint64_t)wire);
}

/* Little-endian fixed-width values (the host is little-endian, as the
 * snapshot format already requires). */
static void put_double(tb_writer_t *w, int field, double v) {
  put_key(w, field, WIRE_FIXED64);
  put(w, &v, sizeof v);
}

static void put_float(tb_writer_t *w, int field, float v) {
  put_key(w, field, WIRE_FIXED32);
  put(w, &v, sizeof v);
}

static void put_bytes(tb_writer_t *w, int field, const void *p, size_t n) {
  put_key(w, field, WIRE_BYTES);
  put_varint(w, n);
  put(w, p, n);
}

/* Bytes a varint of v takes. */
static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v > 0x7f)
    v >>= 7, n++;
  return n;
}

/* ------------------------------------------------------------------------ */
/* TFRecord                                                                  */

static uint32_t masked_crc(const void *p, size_t n) {
  uint32_t const crc = base_crc32c(0, p, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* Frames the encoded event as a record and writes it. */
static ls_err_t write_record(tb_writer_t *w) {
  LS_RETURN_IF(w->nomem, LS_ERR_NOMEM, "no memory to encode a TensorBoard event");
  uint64_t const n = w->len;
  uint32_t const len_crc = masked_crc(&n, sizeof n), data_crc = masked_crc(w->buf, w->len);
  int const ok = fwrite(&n, sizeof n, 1, w->f) == 1 && fwrite(&len_crc, 4, 1, w->f) == 1 &&
                 fwrite(w->buf, 1, w->len, w->f) == w->len && fwrite(&data_crc, 4, 1, w->f) == 1;
  w->len = 0;
  LS_RETURN_IF(!ok, LS_ERR_IO, "cannot write TensorBoard events to %s: %s", w->path,
               strerror(errno));
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */

enum {
  EVENT_WALL_TIME = 1,
  EVENT_STEP = 2,
  EVENT_FILE_VERSION = 3,
  EVENT_SUMMARY = 5,
  EVENT_SESSION_LOG = 7
};
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

ls_err_t tb_writer_scalars(tb_writer_t *w, int64_t step, double wall_time, const char *const *tags,
                           const float *values, int n) {
  LS_RETURN_IF(w == NULL || n < 0 || (n > 0 && (tags == NULL || values == NULL)),
               LS_ERR_INVALID_ARG, "tb_writer_scalars: bad arguments");
  size_t summary = 0; /* the Summary's length */
  for (int i = 0; i < n; i++) {
    size_t const tag = strlen(tags[i]), value = 1 + varint_len(tag) + tag + 1 + 4;
    summary += 1 + varint_len(value) + value;
  }
  put_double(w, EVENT_WALL_TIME, wall_time);
  put_key(w, EVENT_STEP, WIRE_VARINT);
  put_varint(w, (uint64_t)step);
  put_key(w, EVENT_SUMMARY, WIRE_BYTES);
  put_varint(w, summary);
  for (int i = 0; i < n; i++) {
    size_t const tag = strlen(tags[i]);
    put_key(w, SUMMARY_VALUE, WIRE_BYTES);
    put_varint(w, 1 + varint_len(tag) + tag + 1 + 4);
    put_bytes(w, VALUE_TAG, tags[i], tag);
    put_float(w, VALUE_SIMPLE, values[i]);
  }
  return write_record(w);
}

/* The first two events: the file version, and a session start at step. */
static ls_err_t write_head(tb_writer_t *w, int64_t step) {
  double const now = wall_now();
  put_double(w, EVENT_WALL_TIME, now);
  put_bytes(w, EVENT_FILE_VERSION, "brain.Event:2", 13);
  LS_FORWARD_IF_ERROR(write_record(w));
  put_double(w, EVENT_WALL_TIME, now);
  put_key(w, EVENT_STEP, WIRE_VARINT);
  put_varint(w, (uint64_t)step);
  uint8_t const start[2] = {SESSION_STATUS << 3 | WIRE_VARINT, SESSION_START};
  put_bytes(w, EVENT_SESSION_LOG, start, sizeof start);
  return write_record(w);
}

/* mkdir -p. */
static ls_err_t make_dirs(const char *dir) {
  char path[4096];
  LS_RETURN_IF(snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path, LS_ERR_INVALID_ARG,
               "--tensorboard %s: the path is too long", dir);
  for (char *p = path + 1;; p++) {
    int const end = *p == '\0';
    if (*p == '/' || end) {
      *p = '\0';
      LS_RETURN_IF(mkdir(path, 0777) != 0 && errno != EEXIST, LS_ERR_IO,
                   "--tensorboard %s: cannot create %s: %s", dir, path, strerror(errno));
      if (end) break;
      *p = '/';
    }
  }
  return LS_OK;
}

ls_err_t tb_writer_new(const char *dir, int64_t first_step, tb_writer_t **out) {
  LS_RETURN_IF(dir == NULL || dir[0] == '\0' || out == NULL || first_step < 0, LS_ERR_INVALID_ARG,
               "tb_writer_new: a directory, out, and a step >= 0 are needed");
  *out = NULL;
  LS_FORWARD_IF_ERROR(make_dirs(dir));
  tb_writer_t *const w = calloc(1, sizeof *w);
  LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "no memory for a TensorBoard writer");
  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%06ld.%s.%ld", dir,
           (long long)ts.tv_sec, ts.tv_nsec / 1000, host, (long)getpid());
  w->f = fopen(w->path, "wbx");
  ls_err_t err = w->f == NULL
                     ? ls_error_set(LS_ERR_IO, "cannot create %s: %s", w->path, strerror(errno))
                     : write_head(w, first_step);
  if (err == LS_OK) err = tb_writer_flush(w);
  if (err != LS_OK) {
    tb_writer_destroy(w);
    return err;
  }
  *out = w;
  return LS_OK;
}

ls_err_t tb_writer_flush(tb_writer_t *w) {
  LS_RETURN_IF(w == NULL, LS_ERR_INVALID_ARG, "tb_writer_flush: w is NULL");
  LS_RETURN_IF(fflush(w->f) != 0, LS_ERR_IO, "cannot write TensorBoard events to %s: %s", w->path,
               strerror(errno));
  return LS_OK;
}

void tb_writer_destroy(tb_writer_t *w) {
  if (w == NULL) return;
  if (w->f != NULL) fclose(w->f);
  free(w->buf);
  free(w);
}

const char *tb_writer_path(const tb_writer_t *w) {
  return w == NULL ? "" : w->path;
}
