/*
 * The series table (include/lstream/state.h): the ground floor's key->index
 * map from key to slot, per-slot bookkeeping, the states in engine memory,
 * and per slot the host-side state (normaliser, error sums, forecasts going
 * out) when kept.
 */
#include <stdlib.h>
#include <string.h>

#include "base/digest.h"
#include "base/keymap.h"
#include "lstream/state.h"

typedef struct series_s {
  char *key; /* NUL-terminated copy, the map's key */
  size_t key_len;
  int32_t partition;
  int64_t windows, records, last_offset;
} series_t;

struct ls_series_table_s {
  ls_engine_t *eng;
  ls_state_table_t *states; /* (S, L, H) h and c */
  series_t *series;         /* [count], by slot */
  size_t count, cap;        /* slots used / allocated (series and states) */
  base_keymap_t index;      /* key -> slot */
  int F, O;                 /* host-side state kept per slot: 0, 0 = none */
  int64_t *norm_n;          /* [cap] */
  double *norm;             /* [cap, F, LS_NORM_STATS] */
  double *errors;           /* [cap, O, 2] */
  int64_t *serve;           /* [cap, LS_SERVE_FIELDS] */
  double *pending;          /* [cap, O] */
  double *tail;             /* [cap, F] */
};

static ls_err_t check_key(const void *key, size_t key_len) {
  LS_RETURN_IF(key == NULL, LS_ERR_INVALID_ARG, "series key is NULL");
  LS_RETURN_IF(key_len < 1 || key_len > LS_KEY_MAX, LS_ERR_INVALID_ARG,
               "series key of %zu bytes: keys have 1..%d bytes", key_len, LS_KEY_MAX);
  return LS_OK;
}

ls_err_t ls_series_table_new(ls_engine_t *eng, size_t initial, ls_series_table_t **out) {
  LS_RETURN_IF(eng == NULL || out == NULL, LS_ERR_INVALID_ARG, "engine or out is NULL");
  *out = NULL;
  LS_RETURN_IF(initial == 0 || initial > ((size_t)1 << 40), LS_ERR_INVALID_ARG,
               "initial capacity %zu is out of range [1, 2^40]", initial);
  ls_series_table_t *t = calloc(1, sizeof *t);
  LS_RETURN_IF(t == NULL, LS_ERR_NOMEM, "no memory for a series table");
  t->eng = eng;
  t->cap = initial;
  ls_err_t err = ls_state_table_new(eng, initial, &t->states);
  if (err == LS_OK) {
    t->series = calloc(initial, sizeof *t->series);
    if (t->series == NULL) err = ls_error_set(LS_ERR_NOMEM, "no memory for %zu series", initial);
  }
  if (err != LS_OK) {
    ls_series_table_destroy(t);
    return err;
  }
  *out = t;
  return LS_OK;
}

void ls_series_table_destroy(ls_series_table_t *t) {
  if (t == NULL) return;
  for (size_t s = 0; s < t->count; s++) free(t->series[s].key);
  free(t->series);
  base_keymap_free(&t->index);
  ls_state_table_destroy(t->states);
  free(t->norm_n), free(t->norm), free(t->errors), free(t->serve), free(t->pending);
  free(t->tail);
  free(t);
}

/* Grows *p from `old` to `cap` items of `size` bytes, zeroing the new ones. */
static ls_err_t grow_zeroed(void *p, size_t old, size_t cap, size_t size) {
  void **const slot = p;
  LS_RETURN_IF(size != 0 && cap > SIZE_MAX / size, LS_ERR_NOMEM, "%zu items do not fit", cap);
  char *const q = realloc(*slot, cap * size > 0 ? cap * size : 1);
  LS_RETURN_IF(q == NULL, LS_ERR_NOMEM, "no memory for the host-side state of %zu series", cap);
  memset(q + old * size, 0, (cap - old) * size);
  *slot = q;
  return LS_OK;
}

/* The host-side state arrays for cap slots (when kept). */
static ls_err_t grow_stats(ls_series_table_t *t, size_t old, size_t cap) {
  if (t->F == 0) return LS_OK;
  size_t const nf = (size_t)t->F * LS_NORM_STATS * sizeof(double);
  LS_FORWARD_IF_ERROR(grow_zeroed(&t->norm_n, old, cap, sizeof(int64_t)));
  LS_FORWARD_IF_ERROR(grow_zeroed(&t->norm, old, cap, nf));
  LS_FORWARD_IF_ERROR(grow_zeroed(&t->serve, old, cap, LS_SERVE_FIELDS * sizeof(int64_t)));
  LS_FORWARD_IF_ERROR(grow_zeroed(&t->pending, old, cap, (size_t)t->O * sizeof(double)));
  LS_FORWARD_IF_ERROR(grow_zeroed(&t->tail, old, cap, (size_t)t->F * sizeof(double)));
  return grow_zeroed(&t->errors, old, cap, (size_t)t->O * 2 * sizeof(double));
}

static ls_err_t grow(ls_series_table_t *t) {
  size_t const cap = t->cap * 2;
  series_t *s = realloc(t->series, cap * sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for %zu series", cap);
  t->series = s;
  LS_FORWARD_IF_ERROR(ls_state_table_grow(t->states, cap));
  LS_FORWARD_IF_ERROR(grow_stats(t, t->cap, cap));
  t->cap = cap;
  return LS_OK;
}

ls_err_t ls_series_table_keep_stats(ls_series_table_t *t, int features, int targets) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  LS_RETURN_IF(t->count > 0 || t->F > 0, LS_ERR_STATE,
               "the table already holds series or host-side state: keep stats on an empty one");
  LS_RETURN_IF(features < 1 || features > (1 << 16) || targets < 1 || targets > features,
               LS_ERR_INVALID_ARG, "%d features and %d targets: 1 <= targets <= features <= 65536",
               features, targets);
  t->F = features;
  t->O = targets;
  ls_err_t const err = grow_stats(t, 0, t->cap);
  if (err != LS_OK) t->F = t->O = 0;
  return err;
}

void ls_series_table_stats_shape(const ls_series_table_t *t, int *features, int *targets) {
  if (features != NULL) *features = t != NULL ? t->F : 0;
  if (targets != NULL) *targets = t != NULL ? t->O : 0;
}

ls_err_t ls_series_table_slot(ls_series_table_t *t, const void *key, size_t key_len,
                              int32_t partition, int64_t *slot) {
  LS_RETURN_IF(t == NULL || slot == NULL, LS_ERR_INVALID_ARG, "table or slot is NULL");
  LS_FORWARD_IF_ERROR(check_key(key, key_len));
  uint64_t const hash = base_key_hash(key, key_len);
  *slot = base_keymap_find(&t->index, hash, key, key_len);
  if (*slot >= 0) return LS_OK;
  if (t->count == t->cap) LS_FORWARD_IF_ERROR(grow(t));
  char *copy = malloc(key_len + 1);
  LS_RETURN_IF(copy == NULL, LS_ERR_NOMEM, "no memory for a series key");
  memcpy(copy, key, key_len);
  copy[key_len] = '\0';
  ls_err_t const err = base_keymap_add(&t->index, hash, copy, key_len, "series table");
  if (err != LS_OK) {
    free(copy);
    return err;
  }
  t->series[t->count] = (series_t){copy, key_len, partition, 0, 0, -1};
  *slot = (int64_t)t->count++;
  return LS_OK;
}

size_t ls_series_table_count(const ls_series_table_t *t) { return t == NULL ? 0 : t->count; }

static ls_err_t check_slot(const ls_series_table_t *t, int64_t slot) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  LS_RETURN_IF(slot < 0 || (size_t)slot >= t->count, LS_ERR_INVALID_ARG,
               "slot %lld is not one of the table's %zu series", (long long)slot, t->count);
  return LS_OK;
}

ls_err_t ls_series_table_trained(ls_series_table_t *t, int64_t slot, int64_t records,
                                 int64_t last_offset) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(records < 0, LS_ERR_INVALID_ARG, "negative record count %lld",
               (long long)records);
  series_t *const s = &t->series[slot];
  s->windows++;
  s->records += records;
  s->last_offset = last_offset;
  return LS_OK;
}

ls_err_t ls_series_table_restore(ls_series_table_t *t, int64_t slot, int64_t windows,
                                 int64_t records, int64_t last_offset) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(windows < 0 || records < 0, LS_ERR_INVALID_ARG,
               "negative counts (windows %lld, records %lld)", (long long)windows,
               (long long)records);
  series_t *const s = &t->series[slot];
  s->windows = windows;
  s->records = records;
  s->last_offset = last_offset;
  return LS_OK;
}

ls_err_t ls_series_table_info(const ls_series_table_t *t, int64_t slot, ls_series_info_t *out) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  const series_t *const s = &t->series[slot];
  *out = (ls_series_info_t){s->key,     s->key_len, s->partition,  slot,
                            s->windows, s->records, s->last_offset};
  return LS_OK;
}

ls_err_t ls_series_table_stats(ls_series_table_t *t, int64_t slot, ls_series_stats_t *out) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  LS_RETURN_IF(t->F == 0, LS_ERR_STATE, "the table keeps no host-side state per series");
  size_t const i = (size_t)slot;
  *out = (ls_series_stats_t){t->norm_n + i,
                             t->norm + i * (size_t)t->F * LS_NORM_STATS,
                             t->errors + i * (size_t)t->O * 2,
                             t->serve + i * LS_SERVE_FIELDS,
                             t->pending + i * (size_t)t->O,
                             t->tail + i * (size_t)t->F};
  return LS_OK;
}

ls_err_t ls_series_stats_copy(const ls_series_stats_t *dst, const ls_series_stats_t *src, int F,
                              int O) {
  LS_RETURN_IF(dst == NULL || src == NULL || F < 1 || O < 1, LS_ERR_INVALID_ARG,
               "series stats copy: dst, src and a layout of F %d, O %d >= 1", F, O);
  *dst->norm_n = *src->norm_n;
  memcpy(dst->norm, src->norm, (size_t)F * LS_NORM_STATS * sizeof(double));
  memcpy(dst->errors, src->errors, (size_t)O * 2 * sizeof(double));
  memcpy(dst->serve, src->serve, LS_SERVE_FIELDS * sizeof(int64_t));
  memcpy(dst->pending, src->pending, (size_t)O * sizeof(double));
  memcpy(dst->tail, src->tail, (size_t)F * sizeof(double));
  return LS_OK;
}

ls_state_table_t *ls_series_table_states(ls_series_table_t *t) {
  return t == NULL ? NULL : t->states;
}

ls_engine_t *ls_series_table_engine(const ls_series_table_t *t) {
  return t == NULL ? NULL : t->eng;
}

ls_err_t ls_series_table_digest(ls_series_table_t *t, uint64_t *digest) {
  LS_RETURN_IF(t == NULL || digest == NULL, LS_ERR_INVALID_ARG, "table or digest is NULL");
  const ls_engine_conf_t *const conf = ls_engine_get_conf(t->eng);
  size_t const row = (size_t)conf->shape.num_layers * (size_t)conf->shape.hidden_size;
  float *h = malloc(row * sizeof(float)), *c = malloc(row * sizeof(float));
  if (h == NULL || c == NULL) {
    free(h), free(c);
    return ls_error_set(LS_ERR_NOMEM, "no memory for a state row");
  }
  uint64_t d = BASE_FNV1A_INIT;
  ls_err_t err = LS_OK;
  for (size_t s = 0; s < t->count && err == LS_OK; s++) {
    const series_t *const e = &t->series[s];
    d = base_fnv1a(d, e->key, e->key_len + 1);
    d = base_fnv1a(d, &e->partition, sizeof e->partition);
    d = base_fnv1a(d, &e->windows, sizeof e->windows);
    d = base_fnv1a(d, &e->records, sizeof e->records);
    d = base_fnv1a(d, &e->last_offset, sizeof e->last_offset);
    err = ls_state_table_read(t->states, s, 1, h, c);
    d = base_fnv1a(d, h, row * sizeof(float));
    d = base_fnv1a(d, c, row * sizeof(float));
    if (t->F == 0) continue;
    d = base_fnv1a(d, t->norm_n + s, sizeof *t->norm_n);
    d = base_fnv1a(d, t->norm + s * (size_t)t->F * LS_NORM_STATS,
                   (size_t)t->F * LS_NORM_STATS * sizeof(double));
    d = base_fnv1a(d, t->errors + s * (size_t)t->O * 2, (size_t)t->O * 2 * sizeof(double));
    d = base_fnv1a(d, t->serve + s * LS_SERVE_FIELDS, LS_SERVE_FIELDS * sizeof(int64_t));
    d = base_fnv1a(d, t->pending + s * (size_t)t->O, (size_t)t->O * sizeof(double));
    d = base_fnv1a(d, t->tail + s * (size_t)t->F, (size_t)t->F * sizeof(double));
  }
  free(h), free(c);
  if (err == LS_OK) *digest = d;
  return err;
}
