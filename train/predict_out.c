/*
 * Where forecasts go (train/predict.h, predict_internal.h): the
 * predictions topic (a transactional publisher: key the series, value the
 * target features' forecasts in the input's format (a JSON object for
 * json and avro input), headers saying what
 * the forecast is), the CSV file, and, resuming, what a previous run of
 * the same snapshot directory left in the topic and the file.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/csv.h"
#include "base/digest.h"
#include "predict_internal.h"
#include "view.h"

/* How long a send waits for room before it looks at the stop flag again. */
#define ROOM_WAIT_MS 100

static const char *const kind_names[] = {"next", "eval"};

/* ------------------------------------------------------------------------ */
/* What the topic holds already (read back when resuming)                   */

/* Index of key in the seen map, or -1. */
static int64_t seen_find(const predict_t *pr, const void *key, size_t len) {
  return base_keymap_find(&pr->seen, base_key_hash(key, len), key, len);
}

/* Notes that the topic holds a forecast of kind k (0 next, 1 eval) of
 * series key after offset `offset`. */
static ls_err_t seen_note(predict_t *pr, const void *key, size_t len, int k, int64_t offset) {
  int64_t i = seen_find(pr, key, len);
  if (i < 0) {
    if (pr->seen.n == pr->seen_cap) {
      size_t const cap = pr->seen_cap ? 2 * pr->seen_cap : 256;
      char **const keys = realloc(pr->seen_key, cap * sizeof *keys);
      if (keys != NULL) pr->seen_key = keys;
      int64_t *const off = realloc(pr->seen_off, cap * 2 * sizeof *off);
      if (off != NULL) pr->seen_off = off;
      char *const open = realloc(pr->seen_open, cap * 2);
      if (open != NULL) pr->seen_open = open;
      LS_RETURN_IF(keys == NULL || off == NULL || open == NULL, LS_ERR_NOMEM,
                   "no memory for %zu series", cap);
      pr->seen_cap = cap;
    }
    char *const copy = malloc(len + 1);
    LS_RETURN_IF(copy == NULL, LS_ERR_NOMEM, "no memory for a series key");
    memcpy(copy, key, len);
    copy[len] = '\0';
    ls_err_t const err = base_keymap_add(&pr->seen, base_key_hash(copy, len), copy, len, "seen");
    if (err != LS_OK) {
      free(copy);
      return err;
    }
    i = (int64_t)pr->seen.n - 1;
    pr->seen_key[i] = copy;
    pr->seen_off[2 * i] = pr->seen_off[2 * i + 1] = -1;
    pr->seen_open[2 * i] = pr->seen_open[2 * i + 1] = 0;
  }
  if (offset > pr->seen_off[2 * i + k]) pr->seen_off[2 * i + k] = offset;
  if (!pr->seen_open[2 * i + k]) pr->seen_open[2 * i + k] = 1, pr->open++;
  return LS_OK;
}

/* A header's value as a whole number, or -1. */
static int64_t header_i64(const ls_header_t *h) {
  char text[32];
  if (h->len == 0 || h->len >= sizeof text) return -1;
  memcpy(text, h->value, h->len);
  text[h->len] = '\0';
  char *end = NULL;
  long long const v = strtoll(text, &end, 10);
  return *end == '\0' && v >= 0 ? (int64_t)v : -1;
}

typedef struct back_s {
  predict_t *pr;
  ls_err_t err;
  int64_t ours;
} back_t;

/* One message read back: a forecast of this run (its header lstream-run)
 * for a partition this rank reads is noted. */
static void on_back(void *opaque, int32_t partition, const void *key, size_t key_len,
                    const ls_header_t *h, int n) {
  (void)partition;
  back_t *const b = opaque;
  predict_t *const pr = b->pr;
  int64_t source = -1, offset = -1;
  int kind = -1, run = 0;
  for (int i = 0; i < n; i++) {
    if (!strcmp(h[i].name, "lstream-run"))
      run = h[i].len == strlen(pr->run) && !memcmp(h[i].value, pr->run, h[i].len);
    else if (!strcmp(h[i].name, "lstream-partition"))
      source = header_i64(&h[i]);
    else if (!strcmp(h[i].name, "lstream-offset"))
      offset = header_i64(&h[i]);
    else if (!strcmp(h[i].name, "lstream-kind"))
      kind = h[i].len == 4 && !memcmp(h[i].value, "next", 4)   ? 0
             : h[i].len == 4 && !memcmp(h[i].value, "eval", 4) ? 1
                                                               : -1;
  }
  int mine = 0;
  for (int i = 0; i < pr->v->P && !mine; i++)
    mine = pr->v->parts[i] == source;
  if (!run || !mine || kind < 0 || offset < 0 || b->err != LS_OK) return;
  b->ours++;
  b->err = seen_note(pr, key, key_len, kind, offset);
}

/* 1 when the topic holds the forecast fc already. A (series, kind) whose
 * forecasts reached the last one the topic holds is closed: its next ones
 * are new (a series' forecasts of a kind are made in offset order). */
static int seen_already(predict_t *pr, const forecast_t *fc, const ls_series_info_t *si) {
  if (pr->open == 0) return 0;
  int64_t const i = seen_find(pr, si->key, si->key_len);
  size_t const at = 2 * (size_t)i + (fc->kind == PREDICT_EVAL);
  if (i < 0 || !pr->seen_open[at]) return 0;
  if (fc->offset >= pr->seen_off[at]) pr->seen_open[at] = 0, pr->open--;
  return fc->offset <= pr->seen_off[at];
}

/* ------------------------------------------------------------------------ */
/* The file                                                                  */

/* One row: kind, series, partition, offset, time, step, h (with
 * --horizon H > 1), the forecasts value [O (1 + Q)] of horizon h (points,
 * then per quantile level), the actual values (actual [F] the record h
 * ahead; NULL: empty, unknown). */
static ls_err_t write_row(predict_t *pr, int kind, const ls_series_info_t *si, int64_t offset,
                          int64_t time, int64_t step, int h, const double *value,
                          const float *actual) {
  FILE *const f = pr->file;
  int const VH = pr->O * (1 + pr->NQ); /* a row's forecasts */
  fprintf(f, "%s,", kind_names[kind == PREDICT_EVAL]);
  base_csv_field(f, si->key, si->key_len);
  fprintf(f, ",%d,%" PRId64 ",%" PRId64 ",%" PRId64, (int)si->partition, offset, time, step);
  /* The values' text, kept: a replay's next and eval rows of a record are
   * the same forecast (formatting them is most of a row's time). */
  if (pr->row_n == 0 || pr->row_h != h ||
      memcmp(pr->row_value, value, (size_t)VH * sizeof *value) != 0 ||
      (actual != NULL) != pr->row_actual ||
      (actual != NULL && memcmp(pr->row_x, actual, (size_t)pr->F * sizeof *actual) != 0)) {
    size_t const cap = (size_t)VH * 52 + 16;
    size_t n = pr->H > 1 ? (size_t)snprintf(pr->row, cap, ",%d", h) : 0;
    for (int j = 0; j < VH; j++)
      n += (size_t)snprintf(pr->row + n, cap - n, ",%.17g", value[j]);
    for (int j = 0; j < pr->O; j++)
      n += actual != NULL
               ? (size_t)snprintf(pr->row + n, cap - n, ",%.9g", (double)actual[pr->p->feat[j]])
               : (size_t)snprintf(pr->row + n, cap - n, ",");
    pr->row_n = n, pr->row_h = h;
    memcpy(pr->row_value, value, (size_t)VH * sizeof *value);
    pr->row_actual = actual != NULL;
    if (actual != NULL) memcpy(pr->row_x, actual, (size_t)pr->F * sizeof *actual);
  }
  fwrite(pr->row, 1, pr->row_n, f);
  fputc('\n', f);
  pr->rows++;
  LS_RETURN_IF(ferror(f), LS_ERR_IO, "cannot write --predictions-out %s: %s", pr->path,
               strerror(errno));
  return LS_OK;
}

/* A forecast's rows, one per horizon h = 1..H: its values value [W]
 * (h-major, O (1 + Q) a horizon), the actuals of the first `known` horizons from the records
 * actual [known, F] (the rest empty). */
static ls_err_t write_rows(predict_t *pr, int kind, const ls_series_info_t *si, int64_t offset,
                           int64_t time, int64_t step, const double *value, const float *actual,
                           int known) {
  for (int h = 1; h <= pr->H; h++)
    LS_FORWARD_IF_ERROR(
        write_row(pr, kind, si, offset, time, step, h,
                  value + (size_t)(h - 1) * (size_t)pr->O * (size_t)(1 + pr->NQ),
                  actual != NULL && h <= known ? actual + (size_t)(h - 1) * (size_t)pr->F : NULL));
  return LS_OK;
}

static void write_head(predict_t *pr) {
  fprintf(pr->file, "kind,series,partition,offset,time,step%s", pr->H > 1 ? ",h" : "");
  for (int j = 0; j < pr->O; j++)
    fprintf(pr->file, ",forecast_%d", pr->p->feat[j]);
  for (int q = 0; q < pr->NQ; q++)
    for (int j = 0; j < pr->O; j++)
      fprintf(pr->file, ",q%g_%d", pr->p->levels[q], pr->p->feat[j]);
  for (int j = 0; j < pr->O; j++)
    fprintf(pr->file, ",actual_%d", pr->p->feat[j]);
  fputc('\n', pr->file);
}

/* The path of rank r's file in a run of `world` ranks. */
static void file_path(const predict_t *pr, int r, int world, char *buf, size_t size) {
  if (world > 1)
    snprintf(buf, size, "%s.rank%d", pr->v->conf->predictions_out, r);
  else
    snprintf(buf, size, "%s", pr->v->conf->predictions_out);
}

/* Cuts path back to `length` bytes (what a snapshot recorded). */
static ls_err_t cut_back(const char *path, int64_t length) {
  if (truncate(path, (off_t)length) == 0 || (errno == ENOENT && length == 0)) return LS_OK;
  return ls_error_set(LS_ERR_IO,
                      "cannot cut --predictions-out %s back to its %" PRId64
                      " bytes at the snapshot: %s",
                      path, length, strerror(errno));
}

/* Opens this rank's file, cut back to lengths[rank] of a run of world_was
 * ranks (lengths NULL: a fresh start, empty). Rank 0 cuts back the files
 * of ranks that are no more (or named otherwise now). */
static ls_err_t open_file(predict_t *pr, const int64_t *lengths, int world_was) {
  int const rank = pr->v->rank, world = pr->v->world;
  int const same_names = (world_was > 1) == (world > 1);
  for (int r = 0; rank == 0 && lengths != NULL && r < world_was; r++)
    if (r >= world || !same_names) {
      char old[1100];
      file_path(pr, r, world_was, old, sizeof old);
      LS_FORWARD_IF_ERROR(cut_back(old, lengths[r]));
    }
  int64_t const keep = lengths != NULL && same_names && rank < world_was ? lengths[rank] : 0;
  LS_FORWARD_IF_ERROR(cut_back(pr->path, keep));
  size_t const VH = (size_t)pr->O * (size_t)(1 + pr->NQ);
  pr->row = malloc(VH * 52 + 16); /* ",%d", then ",%.17g" and ",%.9g": 25 + 16 bytes at most */
  pr->row_value = malloc(VH * sizeof *pr->row_value);
  pr->row_x = malloc((size_t)pr->F * sizeof *pr->row_x);
  LS_RETURN_IF(!pr->row || !pr->row_value || !pr->row_x, LS_ERR_NOMEM, "no memory for a row");
  pr->file = fopen(pr->path, keep > 0 ? "a" : "w");
  LS_RETURN_IF(pr->file == NULL, LS_ERR_IO, "cannot open --predictions-out %s: %s", pr->path,
               strerror(errno));
  if (keep == 0) write_head(pr);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The topic                                                                 */

/* Makes room for need bytes of a message's value. */
static ls_err_t buf_room(predict_t *pr, size_t need) {
  if (pr->buf_cap >= need) return LS_OK;
  char *const b = realloc(pr->buf, need);
  LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for a forecast");
  pr->buf = b, pr->buf_cap = need;
  return LS_OK;
}

/* JSON input (and Avro's, which has no schema for forecasts): one object,
 * {"key":K,"partition":P,"offset":O,"time":MS,"kind":"next","step":S,
 * "forecast":{"NAME":V,...}}, each target under its field's name (NaN or
 * Inf: null); with --horizon H > 1 each target's V is an array of its H
 * forecasts, h = 1 first; with --quantiles, "quantiles":{"LEVEL":{"NAME":
 * V,...},...} beside "forecast". */
static size_t json_targets(const predict_t *pr, const forecast_t *fc, int c, char *b) {
  size_t const VH = (size_t)pr->O * (size_t)(1 + pr->NQ);
  size_t n = (size_t)sprintf(b, "{");
  for (int j = 0; j < pr->O; j++) {
    n += (size_t)sprintf(b + n, "%s\"%s\":%s", j ? "," : "", pr->names[j], pr->H > 1 ? "[" : "");
    for (int h = 0; h < pr->H; h++) {
      double const v = fc->value[(size_t)h * VH + (size_t)c * (size_t)pr->O + (size_t)j];
      n += (size_t)sprintf(b + n, isfinite(v) ? "%s%.17g" : "%snull", h ? "," : "", v);
    }
    n += (size_t)sprintf(b + n, "%s", pr->H > 1 ? "]" : "");
  }
  return n + (size_t)sprintf(b + n, "}");
}

static ls_err_t encode_json(predict_t *pr, const forecast_t *fc, const ls_series_info_t *si,
                            size_t *len) {
  LS_FORWARD_IF_ERROR(buf_room(pr, 200 + 6 * si->key_len +
                                       (size_t)(1 + pr->NQ) * ((size_t)pr->O * (64 + 4) + 32) +
                                       (size_t)pr->W * 32));
  char *const b = pr->buf;
  size_t n = (size_t)sprintf(b, "{\"key\":\"");
  for (size_t i = 0; i < si->key_len; i++) {
    unsigned char const c = (unsigned char)si->key[i];
    if (c == '"' || c == '\\')
      b[n++] = '\\', b[n++] = (char)c;
    else if (c < 0x20)
      n += (size_t)sprintf(b + n, "\\u%04x", c);
    else
      b[n++] = (char)c;
  }
  n += (size_t)sprintf(b + n,
                       "\",\"partition\":%d,\"offset\":%lld,\"time\":%lld,\"kind\":\"%s\","
                       "\"step\":%lld,\"forecast\":",
                       (int)fc->partition, (long long)fc->offset, (long long)fc->time,
                       kind_names[fc->kind == PREDICT_EVAL], (long long)fc->step);
  n += json_targets(pr, fc, 0, b + n);
  for (int q = 0; q < pr->NQ; q++) {
    n += (size_t)sprintf(b + n, "%s\"%g\":", q ? "," : ",\"quantiles\":{", pr->p->levels[q]);
    n += json_targets(pr, fc, q + 1, b + n);
  }
  n += (size_t)sprintf(b + n, "%s}", pr->NQ > 0 ? "}" : "");
  *len = n;
  return LS_OK;
}

/* The forecast's value in the input's format: W float32, W numbers
 * (h-major: per horizon O points, then O per quantile level), or a JSON
 * object. */
static ls_err_t encode_value(predict_t *pr, const forecast_t *fc, const ls_series_info_t *si,
                             size_t *len) {
  if (pr->names != NULL) return encode_json(pr, fc, si, len);
  size_t const need = (size_t)pr->W * 32;
  LS_FORWARD_IF_ERROR(buf_room(pr, need));
  const double *const value = fc->value;
  size_t n = 0;
  for (int j = 0; j < pr->W; j++) {
    if (pr->format == LS_FORMAT_F32) {
      float const v = (float)value[j];
      memcpy(pr->buf + n, &v, sizeof v);
      n += sizeof v;
    } else {
      n += (size_t)snprintf(pr->buf + n, need - n, "%s%.17g", j ? "," : "", value[j]);
    }
  }
  *len = n;
  return LS_OK;
}

/* v in decimal into buf (24 bytes), no NUL; its length (snprintf costs a
 * good part of a forecast's time on the step loop's thread). */
static size_t decimal(char *buf, int64_t v) {
  char tmp[24];
  size_t n = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u > 0);
  size_t k = 0;
  if (v < 0) buf[k++] = '-';
  while (n > 0)
    buf[k++] = tmp[--n];
  return k;
}

static ls_err_t publish(predict_t *pr, const forecast_t *fc, const ls_series_info_t *si,
                        volatile sig_atomic_t *stop) {
  size_t len = 0;
  LS_FORWARD_IF_ERROR(encode_value(pr, fc, si, &len));
  char part[24], off[24], tm[24], step[24], hz[24];
  const char *const kind = kind_names[fc->kind == PREDICT_EVAL];
  ls_header_t h[8] = {{"lstream-partition", part, decimal(part, fc->partition)},
                      {"lstream-offset", off, decimal(off, fc->offset)},
                      {"lstream-time", tm, decimal(tm, fc->time)},
                      {"lstream-kind", kind, 4},
                      {"lstream-step", step, decimal(step, fc->step)},
                      {"lstream-run", pr->run, 16}};
  int n_h = 6; /* the horizons' header with H > 1 only, the quantiles' with some */
  if (pr->H > 1) h[n_h++] = (ls_header_t){"lstream-horizon", hz, decimal(hz, pr->H)};
  if (pr->NQ > 0) h[n_h++] = (ls_header_t){"lstream-quantiles", pr->qtext, strlen(pr->qtext)};
  /* The stop flag matters only to a send that found no room: a stop while
   * forecasts go out (SIGTERM in a rolling restart) finishes the step and
   * takes the last snapshot; a stop while the buffer stays full (a broker
   * down) cannot wait for room, and fails. */
  for (;;) {
    int queued = 0;
    LS_FORWARD_IF_ERROR(ls_publisher_send(pr->pub, si->key, si->key_len, pr->buf, len,
                                          fc->time > 0 ? fc->time : 0, h, n_h, ROOM_WAIT_MS,
                                          &queued));
    if (queued) return LS_OK;
    LS_RETURN_IF(stop != NULL && *stop, LS_ERR_STATE,
                 "stopped while the predictions topic '%s' was full (its forecasts are "
                 "made again when the run resumes)",
                 pr->v->conf->predictions_topic);
  }
}

ls_err_t predict_emit(predict_t *pr, const forecast_t *fc, volatile sig_atomic_t *stop) {
  ls_series_info_t si;
  LS_FORWARD_IF_ERROR(ls_series_table_info(pr->v->series, fc->slot, &si));
  pr->made[fc->kind == PREDICT_EVAL]++;
  if (pr->pub != NULL && seen_already(pr, fc, &si))
    pr->skipped++;
  else if (pr->pub != NULL)
    LS_FORWARD_IF_ERROR(publish(pr, fc, &si, stop));
  if (pr->file == NULL) return LS_OK;
  if (fc->actual != NULL || fc->kind == PREDICT_EVAL)
    return write_rows(pr, fc->kind, &si, fc->offset, fc->time, fc->step, fc->value, fc->actual,
                      fc->known);
  ls_series_stats_t st; /* a next forecast waits for its actual: the series' next record */
  LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, fc->slot, &st));
  st.serve[LS_SERVE_PENDING] = fc->offset + 1;
  st.serve[LS_SERVE_TIME] = fc->time;
  st.serve[LS_SERVE_STEP] = fc->step;
  memcpy(prep_pending(pr->p, &st), fc->value, (size_t)pr->W * sizeof *st.pending);
  return LS_OK;
}

ls_err_t predict_resolve(predict_t *pr, int64_t slot, const float *x) {
  if (pr->file == NULL) return LS_OK;
  ls_series_stats_t st;
  LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, slot, &st));
  if (st.serve[LS_SERVE_PENDING] == 0) return LS_OK;
  ls_series_info_t si;
  LS_FORWARD_IF_ERROR(ls_series_table_info(pr->v->series, slot, &si));
  int64_t const offset = st.serve[LS_SERVE_PENDING] - 1;
  st.serve[LS_SERVE_PENDING] = 0;
  return write_rows(pr, PREDICT_NEXT, &si, offset, st.serve[LS_SERVE_TIME], st.serve[LS_SERVE_STEP],
                    prep_pending(pr->p, &st), x, 1);
}

/* ------------------------------------------------------------------------ */
/* Opening, resuming, snapshots, closing                                     */

/* The run's id (train_run_choose, in the view): one lineage of forecasts
 * per snapshot directory, a fresh one per run without. */
static ls_err_t run_id(predict_t *pr) {
  pr->exact = pr->v->conf->snapshot_dir[0] != '\0';
  snprintf(pr->run, sizeof pr->run, "%016" PRIx64, pr->v->run);
  return LS_OK;
}

/* The publisher's settings for transactional id `id`. */
static ls_publisher_conf_t pub_conf(const predict_t *pr, const char *id) {
  const ls_train_conf_t *const c = pr->v->conf;
  ls_publisher_conf_t pc;
  ls_publisher_conf_init(&pc);
  pc.brokers = c->brokers;
  pc.topic = c->predictions_topic;
  pc.transactional_id = id;
  pc.commit_ms = c->predictions_commit_ms;
  pc.max_messages = c->predictions_buffer;
  pc.settings = (const char *const *)c->kafka;
  pc.n_settings = c->n_kafka;
  return pc;
}

/* Rank r's transactional id. */
static void tx_id(const predict_t *pr, int r, char *buf, size_t size) {
  snprintf(buf, size, "lstream-%s-%d", pr->run, r);
}

ls_err_t predict_out_open(predict_t *pr) {
  const ls_train_conf_t *const c = pr->v->conf;
  pr->format = (ls_format_t)c->format;
  if (pr->format == LS_FORMAT_JSON || pr->format == LS_FORMAT_AVRO) {
    pr->names = calloc((size_t)pr->O, sizeof *pr->names);
    LS_RETURN_IF(pr->names == NULL, LS_ERR_NOMEM, "no memory for %d names", pr->O);
    for (int j = 0; j < pr->O; j++)
      train_conf_feature_name(c, pr->p->feat[j], pr->names[j], sizeof pr->names[j]);
  }
  LS_FORWARD_IF_ERROR(run_id(pr));
  for (int q = 0, n = 0; q < pr->NQ; q++) /* the header lstream-quantiles: 0.1,0.5,0.9 */
    n += snprintf(pr->qtext + n, sizeof pr->qtext - (size_t)n, "%s%g", q ? "," : "",
                  pr->p->levels[q]);
  if (c->predictions_out[0] != '\0')
    file_path(pr, pr->v->rank, pr->v->world, pr->path, sizeof pr->path);
  if (c->predictions_topic[0] == '\0') return LS_OK;
  char id[64];
  tx_id(pr, pr->v->rank, id, sizeof id);
  ls_publisher_conf_t const pc = pub_conf(pr, id);
  LS_FORWARD_IF_ERROR(ls_publisher_new(&pc, &pr->pub));
  pr->Q = ls_publisher_partitions(pr->pub);
  return LS_OK;
}

void predict_out_close(predict_t *pr) {
  ls_publisher_destroy(pr->pub);
  if (pr->file != NULL) fclose(pr->file);
  for (size_t i = 0; i < pr->seen.n; i++)
    free(pr->seen_key[i]);
  base_keymap_free(&pr->seen);
  free(pr->seen_key), free(pr->seen_off), free(pr->seen_open), free(pr->buf), free(pr->names);
  free(pr->back_from), free(pr->row), free(pr->row_value), free(pr->row_x);
}

/* Reads the topic back from `from` [n] (NULL: its start) for what this
 * run's earlier incarnation published; rank 0 first fences the
 * transactional ids of ranks that are no more. */
static ls_err_t read_back(predict_t *pr, const int64_t *from, int n, int world_was) {
  for (int r = pr->v->world; pr->v->rank == 0 && r < world_was; r++) {
    char id[64];
    tx_id(pr, r, id, sizeof id);
    ls_publisher_conf_t const pc = pub_conf(pr, id);
    LS_FORWARD_IF_ERROR(ls_publisher_fence(&pc));
  }
  char id[64];
  tx_id(pr, pr->v->rank, id, sizeof id);
  ls_publisher_conf_t const pc = pub_conf(pr, id);
  pr->back_from = calloc((size_t)pr->Q, sizeof *pr->back_from); /* 0: the start */
  LS_RETURN_IF(pr->back_from == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)pr->Q);
  for (int q = 0; q < n && q < pr->Q; q++)
    pr->back_from[q] = from[q];
  back_t b = {pr, LS_OK, 0};
  int64_t messages = 0;
  LS_FORWARD_IF_ERROR(ls_topic_read_back(&pc, from, n, on_back, &b, &messages));

  return b.err;
}

/* The forecasts' bookkeeping as a snapshot section (LS_SNAPSHOT_SECTION_
 * PREDICT, rank 0's), version 1: Q u32, W u32, then from i64 [Q] (per
 * partition of the predictions topic, an offset below which the run that
 * wrote the snapshot published nothing after it) and lengths i64 [W] (per
 * rank, the length of its predictions file); format 4's container section
 * 16 is read as this. */
enum { PREDICT_VERSION = 1 };

/* The snapshot's bookkeeping: *from [*n_from], *lengths [*n_lengths] into
 * a malloc'ed *buf (NULL, 0 with none: written without forecasts going out). */
static ls_err_t books_of(const ls_snapshot_t *snap, int64_t **buf, int *n_from, int *n_lengths) {
  *buf = NULL, *n_from = *n_lengths = 0;
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  if (snap == NULL ||
      ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_PREDICT, &version, &data, &bytes) != LS_OK)
    return LS_OK;
  const uint8_t *const b = data;
  uint32_t Q = 0, W = 0;
  if (bytes >= 8) memcpy(&Q, b, 4), memcpy(&W, b + 4, 4);
  LS_RETURN_IF(version != PREDICT_VERSION || bytes < 8 || Q > (1u << 20) || W > (1u << 20) ||
                   bytes != 8 + 8 * ((size_t)Q + W),
               LS_ERR_CORRUPT,
               "the snapshot's forecasts' bookkeeping is of version %u and %zu bytes, not "
               "version %d of %u + %u offsets",
               version, bytes, PREDICT_VERSION, Q, W);
  *buf = malloc(8 * ((size_t)Q + W) + 8);
  LS_RETURN_IF(*buf == NULL, LS_ERR_NOMEM, "no memory for the forecasts' bookkeeping");
  memcpy(*buf, b + 8, 8 * ((size_t)Q + W));
  *n_from = (int)Q, *n_lengths = (int)W;
  return LS_OK;
}

ls_err_t predict_resume(predict_t *pr, const ls_snapshot_t *snap) {
  int64_t *books = NULL;
  int n_from = 0, world_was = 0;
  LS_FORWARD_IF_ERROR(books_of(snap, &books, &n_from, &world_was));
  const int64_t *const from = books, *const lengths = books != NULL ? books + n_from : NULL;
  ls_err_t err = LS_OK;
  if (pr->path[0] != '\0') err = open_file(pr, lengths, world_was);
  if (err == LS_OK && pr->pub != NULL && pr->exact) err = read_back(pr, from, n_from, world_was);
  free(books);
  return err;
}

ls_err_t predict_save(predict_t *pr, ls_snapshot_t *snap, int64_t *mark) {
  int const world = pr->v->world, rank = pr->v->rank, W = pr->Q + 1;
  double *const v = calloc((size_t)world * (size_t)W, sizeof *v);
  int64_t *const at = calloc((size_t)(pr->Q + world), sizeof *at);
  ls_err_t err = v && at ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for %d ranks", world);
  if (err == LS_OK && pr->pub != NULL) err = ls_publisher_positions(pr->pub, at, pr->Q);
  /* Until this run has made every forecast it found in the topic, a run
   * resumed from this snapshot must read back from where this one did. */
  for (int q = 0; err == LS_OK && pr->open > 0 && q < pr->Q; q++)
    at[q] = pr->back_from[q] < at[q] ? pr->back_from[q] : at[q];
  for (int q = 0; err == LS_OK && q < pr->Q; q++) /* offsets: exact in a double */
    v[rank * W + q] = (double)at[q];
  if (err == LS_OK && pr->file != NULL) {
    if (fflush(pr->file) != 0 || fsync(fileno(pr->file)) != 0)
      err = ls_error_set(LS_ERR_IO, "cannot write --predictions-out %s: %s", pr->path,
                         strerror(errno));
    v[rank * W + pr->Q] = (double)ftello(pr->file);
  }
  if (err == LS_OK) err = comm_sum_doubles(pr->v->comm, v, world * W);
  for (int q = 0; err == LS_OK && q < pr->Q; q++) { /* the earliest over the ranks */
    at[q] = (int64_t)v[q];
    for (int r = 1; r < world; r++)
      at[q] = (int64_t)v[r * W + q] < at[q] ? (int64_t)v[r * W + q] : at[q];
  }
  for (int r = 0; err == LS_OK && r < world; r++)
    at[pr->Q + r] = (int64_t)v[r * W + pr->Q];
  if (err == LS_OK && rank == 0) {
    size_t const bytes = 8 + 8 * ((size_t)pr->Q + (size_t)world);
    uint8_t *const b = malloc(bytes);
    uint32_t const nq = (uint32_t)pr->Q, nw = (uint32_t)world;
    if (b == NULL) err = ls_error_set(LS_ERR_NOMEM, "no memory for the forecasts' bookkeeping");
    if (b != NULL) {
      memcpy(b, &nq, 4), memcpy(b + 4, &nw, 4);
      memcpy(b + 8, at, 8 * ((size_t)pr->Q + (size_t)world));
      err = ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_PREDICT, PREDICT_VERSION,
                                    LS_SNAPSHOT_REQUIRED, b, bytes);
    }
    free(b);
  }

  free(v), free(at);
  *mark = pr->pub != NULL ? ls_publisher_sent(pr->pub) : 0;
  int done = 0;
  if (err == LS_OK && pr->pub != NULL) err = ls_publisher_commit(pr->pub, *mark, 0, &done);
  return err;
}

ls_err_t predict_durable(predict_t *pr, int64_t mark, int wait_ms, int *done) {
  *done = 1;
  return pr->pub != NULL ? ls_publisher_commit(pr->pub, mark, wait_ms, done) : LS_OK;
}

/* The rows of the series' forecasts still awaiting their actual, without
 * it. */
static ls_err_t write_pending(predict_t *pr) {
  size_t const n = ls_series_table_count(pr->v->series);
  for (size_t s = 0; s < n; s++) {
    ls_series_stats_t st;
    LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, (int64_t)s, &st));
    if (st.serve[LS_SERVE_PENDING] == 0) continue;
    ls_series_info_t si;
    LS_FORWARD_IF_ERROR(ls_series_table_info(pr->v->series, (int64_t)s, &si));
    LS_FORWARD_IF_ERROR(write_rows(pr, PREDICT_NEXT, &si, st.serve[LS_SERVE_PENDING] - 1,
                                   st.serve[LS_SERVE_TIME], st.serve[LS_SERVE_STEP],
                                   prep_pending(pr->p, &st), NULL, 0));
  }
  return LS_OK;
}

ls_err_t predict_close(predict_t *pr, int timeout_ms) {
  if (pr->file != NULL) {
    LS_FORWARD_IF_ERROR(write_pending(pr));
    LS_RETURN_IF(fflush(pr->file) != 0, LS_ERR_IO, "cannot write --predictions-out %s: %s",
                 pr->path, strerror(errno));
  }
  if (pr->pub == NULL) return LS_OK;
  int done = 0;
  LS_FORWARD_IF_ERROR(ls_publisher_commit(pr->pub, ls_publisher_sent(pr->pub), timeout_ms, &done));
  ls_publisher_stats_t st;
  ls_publisher_stats(pr->pub, &st);
  LS_RETURN_IF(!done, LS_ERR_KAFKA,
               "%" PRId64 " forecasts were not committed to topic '%s' within %d ms (%s); a run "
               "resumed from the last snapshot publishes them",
               st.sent - st.committed, pr->v->conf->predictions_topic, timeout_ms,
               st.error[0] ? st.error : "the broker unreachable?");
  return LS_OK;
}

void predict_counts(const predict_t *pr, predict_counts_t *out) {
  memset(out, 0, sizeof *out);
  if (pr == NULL) return;
  out->next = pr->made[0], out->eval = pr->made[1];
  out->skipped = pr->skipped, out->rows = pr->rows, out->during_steps = pr->during_steps;
  ls_publisher_stats_t st;
  if (pr->pub != NULL && ls_publisher_stats(pr->pub, &st) == LS_OK)
    out->published = st.committed, out->waits = st.waits;
}
