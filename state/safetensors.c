/*
 * Export of a snapshot's model and states as safetensors files
 * (include/lstream/state.h, "Export"). The format: an 8-byte little-endian
 * header length N, N bytes of JSON (padded with spaces to a multiple of 8)
 * mapping each tensor name to {"dtype", "shape", "data_offsets": [begin,
 * end]} (offsets into the data that follows) plus an optional
 * "__metadata__" map of strings, then the tensors' bytes back to back.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_format.h"

/* A tensor to write: its name, shape, and where its elements come from
 * (n_src pieces written one after the other; `one` serves a tensor of one
 * piece); dtype NULL is "F32". */
typedef struct tensor_s {
  char name[64];
  int ndim;
  size_t dims[3];
  int n_src;
  const void *const *src;
  const size_t *src_n; /* elements */
  const void *one;
  size_t one_n;
  const char *dtype; /* "F32", "F64" or "I64" */
} tensor_t;

/* The most tensors a module adds to the states' export. */
#define LS_EXPORT_EXTRA_MAX 8

static size_t dtype_bytes(const tensor_t *t) {
  return t->dtype == NULL || !strcmp(t->dtype, "F32") ? 4 : 8;
}

/* A growing text buffer for the JSON header. */
typedef struct text_s {
  char *p;
  size_t len, cap;
  int failed;
} text_t;

static void text_add(text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text_t *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int const n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if (t->p != NULL && (size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    size_t const cap = 2 * (t->cap + (size_t)n + 64);
    char *const q = realloc(t->p, cap);
    if (q == NULL) {
      t->failed = 1;
      return;
    }
    t->p = q;
    t->cap = cap;
  }
}

/* A JSON string of arbitrary bytes: byte b stands for code point b. */
static void text_add_bytes(text_t *t, const char *s, size_t n) {
  text_add(t, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char const b = (unsigned char)s[i];
    if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\')
      text_add(t, "%c", b);
    else
      text_add(t, "\\u%04x", b);
  }
  text_add(t, "\"");
}

/* Writes the file: header (with the metadata JSON object `meta`, which
 * may be NULL) and the tensors. */
static ls_err_t write_safetensors(const char *path, const tensor_t *ts, int n, const char *meta) {
  text_t t = {0};
  text_add(&t, "{");
  if (meta != NULL) text_add(&t, "\"__metadata__\":%s", meta);
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    size_t count = 1;
    for (int d = 0; d < ts[i].ndim; d++)
      count *= ts[i].dims[d];
    text_add(&t, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i == 0 && meta == NULL ? "" : ",",
             ts[i].name, ts[i].dtype != NULL ? ts[i].dtype : "F32");
    for (int d = 0; d < ts[i].ndim; d++)
      text_add(&t, "%s%zu", d ? "," : "", ts[i].dims[d]);
    text_add(&t, "],\"data_offsets\":[%zu,%zu]}", at, at + count * dtype_bytes(&ts[i]));
    at += count * dtype_bytes(&ts[i]);
  }
  text_add(&t, "}");
  while (!t.failed && t.len % 8 != 0)
    text_add(&t, " ");
  if (t.failed) {
    free(t.p);
    return ls_error_set(LS_ERR_NOMEM, "%s: no memory for the safetensors header", path);
  }
  FILE *const f = fopen(path, "wb");
  if (f == NULL) {
    free(t.p);
    return ls_error_set(LS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  }
  uint8_t len[8];
  uint64_t const header_len = t.len;
  memcpy(len, &header_len, sizeof len); /* little-endian host: snapshot_format.h */
  int ok = fwrite(len, 1, sizeof len, f) == sizeof len && fwrite(t.p, 1, t.len, f) == t.len;
  for (int i = 0; ok && i < n; i++)
    for (int k = 0; ok && k < ts[i].n_src; k++)
      ok = fwrite(ts[i].src[k], dtype_bytes(&ts[i]), ts[i].src_n[k], f) == ts[i].src_n[k];
  int const e = errno;
  free(t.p);
  if (fclose(f) != 0) ok = 0;
  LS_RETURN_IF(!ok, LS_ERR_IO, "%s: write failed: %s", path, strerror(e));
  return LS_OK;
}

ls_err_t ls_snapshot_export_model(const ls_snapshot_t *s, const char *path) {
  LS_RETURN_IF(s == NULL || path == NULL, LS_ERR_INVALID_ARG, "snapshot or path is NULL");
  LS_RETURN_IF(!s->has_model, LS_ERR_STATE,
               "this part of the snapshot (rank %d) holds no model: export rank 0's",
               (int)s->info.rank);
  int const L = s->shape.num_layers, H = s->shape.hidden_size;
  int const n = 4 * L + 2;
  tensor_t *const ts = calloc((size_t)n, sizeof *ts);
  LS_RETURN_IF(ts == NULL, LS_ERR_NOMEM, "no memory for %d tensors", n);
  ls_err_t err = LS_OK;
  for (int i = 0; i < n && err == LS_OK; i++) {
    int const layer = i < 4 * L ? i / 4 : 0;
    ls_param_kind_t const kind =
        i < 4 * L ? (ls_param_kind_t)(i % 4) : (ls_param_kind_t)(LS_PARAM_HEAD_WEIGHT + i - 4 * L);
    size_t offset = 0, count = 0;
    char name[48];
    err = ls_param_locate(&s->shape, layer, kind, &offset, &count);
    if (err == LS_OK) err = ls_param_name(layer, kind, name, sizeof name);
    if (err != LS_OK) break;
    tensor_t *const t = &ts[i];
    snprintf(t->name, sizeof t->name, "%s%s", kind < LS_PARAM_HEAD_WEIGHT ? "lstm." : "", name);
    /* Weights are [rows, count / rows]: 4H rows in the LSTM, O in the head. */
    int const matrix =
        kind == LS_PARAM_WEIGHT_IH || kind == LS_PARAM_WEIGHT_HH || kind == LS_PARAM_HEAD_WEIGHT;
    size_t const rows = kind == LS_PARAM_HEAD_WEIGHT ? (size_t)s->shape.output_size : 4u * H;
    t->ndim = matrix ? 2 : 1;
    t->dims[0] = matrix ? rows : count;
    t->dims[1] = matrix ? count / rows : 0;
    t->one = s->params + offset;
    t->one_n = count;
    t->n_src = 1;
    t->src = &t->one;
    t->src_n = &t->one_n;
    t->dtype = NULL;
  }
  char meta[256];
  snprintf(meta, sizeof meta,
           "{\"format\":\"pt\",\"lstream.step\":\"%lld\",\"lstream.shape\":\"%d,%d,%d,%d\","
           "\"lstream.adam_steps\":\"%lld\"}",
           (long long)s->info.step, s->shape.input_size, H, L, s->shape.output_size,
           (long long)s->adam_steps);
  if (err == LS_OK) err = write_safetensors(path, ts, n, meta);
  free(ts);
  return err;
}

/* The states' metadata: step, layout, partitions and keys of the parts'
 * series, in order, into meta (a JSON object). */
static void states_meta(const ls_snapshot_t *const *parts, int n, const ls_export_tensor_t *extra,
                        int n_extra, text_t *meta) {
  text_t keys = {0};
  text_add(&keys, "[");
  text_add(meta,
           "{\"format\":\"lstream-states\",\"layout\":\"[S, L, H]\",\"step\":\"%lld\","
           "\"norm\":\"m, v, q, prev per feature\",\"errors\":\"model, last value per target\","
           "\"partitions\":\"[",
           (long long)parts[0]->info.step);
  for (int i = 0; i < n; i++)
    for (size_t j = 0; j < parts[i]->series; j++) {
      int const first = keys.len == 1;
      text_add(&keys, "%s", first ? "" : ",");
      text_add_bytes(&keys, parts[i]->keys + parts[i]->key_off[j], parts[i]->key_len[j]);
      text_add(meta, "%s%d", first ? "" : ",", (int)parts[i]->partition[j]);
    }
  text_add(&keys, "]");
  /* The format's metadata values are strings: "keys" is a JSON array
   * inside a JSON string, escaped twice. */
  text_add(meta, "]\",\"keys\":");
  if (!keys.failed)
    text_add_bytes(meta, keys.p, keys.len);
  else
    meta->failed = 1;
  for (int i = 0; i < n_extra; i++)
    if (extra[i].about != NULL) {
      text_add(meta, ",\"%s\":", extra[i].name);
      text_add_bytes(meta, extra[i].about, strlen(extra[i].about));
    }
  text_add(meta, "}");
  free(keys.p);
}

ls_err_t ls_snapshot_export_states(const ls_snapshot_t *const *parts, int n, const char *path) {
  return ls_snapshot_export_states_with(parts, n, NULL, 0, path);
}

/* The tensors extra [n_extra] checked. */
static ls_err_t check_extra(const ls_export_tensor_t *extra, int n_extra) {
  static const char *const taken[] = {"h", "c", "norm_n", "norm", "errors"};
  LS_RETURN_IF(n_extra < 0 || n_extra > LS_EXPORT_EXTRA_MAX || (n_extra > 0 && extra == NULL),
               LS_ERR_INVALID_ARG, "%d extra tensors (at most %d) at %p", n_extra,
               LS_EXPORT_EXTRA_MAX, (const void *)extra);
  for (int i = 0; i < n_extra; i++) {
    const ls_export_tensor_t *const t = &extra[i];
    LS_RETURN_IF(t->name == NULL || t->name[0] == '\0' || strlen(t->name) > 63 ||
                     strpbrk(t->name, "\"\\") != NULL || t->data == NULL || t->rows == 0 ||
                     t->cols == 0,
                 LS_ERR_INVALID_ARG,
                 "extra tensor %d: a name of 1 to 63 bytes without quotes, data and a shape of "
                 "at least [1, 1]",
                 i);
    for (size_t k = 0; k < sizeof taken / sizeof taken[0]; k++)
      LS_RETURN_IF(!strcmp(t->name, taken[k]), LS_ERR_INVALID_ARG,
                   "extra tensor '%s': a name the states use", t->name);
  }
  return LS_OK;
}

ls_err_t ls_snapshot_export_states_with(const ls_snapshot_t *const *parts, int n,
                                        const ls_export_tensor_t *extra, int n_extra,
                                        const char *path) {
  LS_RETURN_IF(parts == NULL || path == NULL || n < 1, LS_ERR_INVALID_ARG,
               "parts or path is NULL, or %d parts", n);
  LS_FORWARD_IF_ERROR(check_extra(extra, n_extra));
  size_t S = 0;
  for (int i = 0; i < n; i++) {
    LS_RETURN_IF(parts[i] == NULL, LS_ERR_INVALID_ARG, "part %d is NULL", i);
    LS_RETURN_IF(parts[i]->shape.hidden_size != parts[0]->shape.hidden_size ||
                     parts[i]->shape.num_layers != parts[0]->shape.num_layers ||
                     parts[i]->stats_F != parts[0]->stats_F ||
                     parts[i]->stats_O != parts[0]->stats_O,
                 LS_ERR_INVALID_ARG, "part %d has states of another shape than part 0's", i);
    S += parts[i]->series;
  }
  /* pieces: h, c, norm_n, norm, errors of every part, in that order; counts [5 n] */
  const void **const pieces = malloc(5 * (size_t)n * sizeof *pieces);
  size_t *const counts = malloc(5 * (size_t)n * sizeof *counts);
  text_t meta = {0};
  states_meta(parts, n, extra, n_extra, &meta);
  ls_err_t err = LS_OK;
  if (pieces == NULL || counts == NULL || meta.failed) {
    err = ls_error_set(LS_ERR_NOMEM, "%s: no memory for the metadata of %zu series", path, S);
  } else {
    size_t const F = (size_t)parts[0]->stats_F, O = (size_t)parts[0]->stats_O;
    for (int i = 0; i < n; i++) {
      const ls_snapshot_t *const p = parts[i];
      const void *const src[5] = {p->h, p->c, p->norm_n, p->norm, p->errors};
      size_t const cnt[5] = {p->series * p->row, p->series * p->row, p->series,
                             p->series * F * LS_NORM_STATS, p->series * O * 2};
      for (int k = 0; k < 5; k++)
        pieces[k * n + i] = src[k], counts[k * n + i] = cnt[k];
    }
    size_t const L = (size_t)parts[0]->shape.num_layers, H = (size_t)parts[0]->shape.hidden_size;
    tensor_t ts[5 + LS_EXPORT_EXTRA_MAX] = {
        {"h", 3, {S, L, H}, n, pieces, counts, NULL, 0, "F32"},
        {"c", 3, {S, L, H}, n, pieces + n, counts + n, NULL, 0, "F32"},
        {"norm_n", 1, {S, 0, 0}, n, pieces + 2 * n, counts + 2 * n, NULL, 0, "I64"},
        {"norm", 3, {S, F, LS_NORM_STATS}, n, pieces + 3 * n, counts + 3 * n, NULL, 0, "F64"},
        {"errors", 3, {S, O, 2}, n, pieces + 4 * n, counts + 4 * n, NULL, 0, "F64"}};
    /* Without host-side state (F = 0): h and c only. */
    int const k = F > 0 ? 5 : 2;
    for (int i = 0; i < n_extra; i++) {
      tensor_t *const t = &ts[k + i];
      snprintf(t->name, sizeof t->name, "%s", extra[i].name);
      t->ndim = 2, t->dims[0] = extra[i].rows, t->dims[1] = extra[i].cols;
      t->one = extra[i].data, t->one_n = extra[i].rows * extra[i].cols;
      t->n_src = 1, t->src = &t->one, t->src_n = &t->one_n, t->dtype = "F64";
    }
    err = write_safetensors(path, ts, k + n_extra, meta.p);
  }
  free(pieces);
  free(counts);
  free(meta.p);
  return err;
}
