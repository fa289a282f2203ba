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
#include "stats_layout.h"

/* A partition's series by activity: the least and the most recently active
 * slots (-1 none), how many, and the newest event time made active. */
typedef struct plist_s {
  int64_t head, tail, count, now;
} plist_t;

typedef struct series_s {
  char *key; /* NUL-terminated copy, the map's key */
  size_t key_len;
  int32_t partition;
  int64_t windows, records, last_offset;
  int64_t last_time;  /* event time of its last active window, -1 none */
  int64_t active;     /* t->ticks when it was last active, 0 never */
  int64_t prev, next; /* slots before and after it by activity (-1: none) */
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
  plist_t *parts;           /* [n_parts] by partition id: its series by activity */
  size_t n_parts;
  int64_t ticks;               /* activations so far */
  size_t high;                 /* the most slots ever used: a slot below it is zeroed on reuse */
  float *zero_row;             /* [L H] zeros, for a reused slot's states */
  ls_series_evict_fn on_evict; /* told of each slot evicted, or NULL */
  void *evict_opaque;
  int64_t *serve;  /* [cap, LS_SERVE_FIELDS] */
  double *pending; /* [cap, O] */
  double *tail;    /* [cap, F] */
  size_t X;        /* the trainer's doubles per slot (ls_series_table_keep_model); 0 none */
  double *model;   /* [cap, X] */
  /* When each slot's model state last changed, by a clock that counts the
   * changes (ls_series_table_stats, a slot's new series or move): a
   * background snapshot writer writes again only the slots that changed since
   * it last wrote them (snapshot_model.c). */
  uint64_t *mgen; /* [cap] */
  uint64_t clock;
  uint64_t id; /* random: tells this table from another one */
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
  t->id = base_random64();
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
  for (size_t s = 0; s < t->count; s++)
    free(t->series[s].key);
  free(t->series);
  base_keymap_free(&t->index);
  ls_state_table_destroy(t->states);
  free(t->norm_n), free(t->norm), free(t->errors), free(t->zero_row), free(t->parts);
  free(t->serve), free(t->pending), free(t->tail), free(t->model), free(t->mgen);
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
  if (t->X > 0) LS_FORWARD_IF_ERROR(grow_zeroed(&t->model, old, cap, t->X * sizeof(double)));
  if (t->X > 0) LS_FORWARD_IF_ERROR(grow_zeroed(&t->mgen, old, cap, sizeof(uint64_t)));
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

ls_err_t ls_series_table_keep_model(ls_series_table_t *t, size_t doubles) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  LS_RETURN_IF(t->count > 0 || t->F == 0 || t->X > 0, LS_ERR_STATE,
               "keep the trainer's per-series state on an empty table that keeps stats, once");
  LS_RETURN_IF(doubles > ((size_t)1 << 24), LS_ERR_INVALID_ARG,
               "%zu doubles of per-series state: at most 2^24", doubles);
  t->X = doubles;
  ls_err_t err = doubles > 0 ? grow_zeroed(&t->model, 0, t->cap, doubles * sizeof(double)) : LS_OK;
  if (err == LS_OK && doubles > 0) err = grow_zeroed(&t->mgen, 0, t->cap, sizeof(uint64_t));
  if (err != LS_OK) t->X = 0;
  return err;
}

size_t ls_series_table_model_width(const ls_series_table_t *t) {
  return t != NULL ? t->X : 0;
}

/* The list of partition p, made when new. */
static ls_err_t plist_of(ls_series_table_t *t, int32_t p, plist_t **out) {
  LS_RETURN_IF(p < 0, LS_ERR_INVALID_ARG, "negative partition %d", (int)p);
  if ((size_t)p >= t->n_parts) {
    size_t const n = (size_t)p + 1;
    plist_t *const grown = realloc(t->parts, n * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "no memory for %zu partitions", n);
    for (size_t i = t->n_parts; i < n; i++)
      grown[i] = (plist_t){-1, -1, 0, -1};
    t->parts = grown;
    t->n_parts = n;
  }
  *out = &t->parts[p];
  return LS_OK;
}

/* Appends slot s to list l (the most recently active). */
static void plist_append(ls_series_table_t *t, plist_t *l, int64_t s) {
  series_t *const e = &t->series[s];
  e->prev = l->tail, e->next = -1;
  if (l->tail >= 0)
    t->series[l->tail].next = s;
  else
    l->head = s;
  l->tail = s;
  l->count++;
}

/* Unlinks slot s from its partition's list. */
static void plist_unlink(ls_series_table_t *t, int64_t s) {
  series_t *const e = &t->series[s];
  plist_t *const l = &t->parts[e->partition];
  if (e->prev >= 0)
    t->series[e->prev].next = e->next;
  else
    l->head = e->next;
  if (e->next >= 0)
    t->series[e->next].prev = e->prev;
  else
    l->tail = e->prev;
  e->prev = e->next = -1;
  l->count--;
}

/* Slot s's model state changes (or did): its clock. */
static void model_touch(ls_series_table_t *t, size_t s) {
  if (t->X > 0) t->mgen[s] = ++t->clock;
}

/* A reused slot (an evicted series' place) starts from zero: states and
 * host-side state. */
static ls_err_t clear_slot(ls_series_table_t *t, size_t s) {
  const ls_engine_conf_t *const conf = ls_engine_get_conf(t->eng);
  size_t const row = (size_t)conf->shape.num_layers * (size_t)conf->shape.hidden_size;
  if (t->zero_row == NULL) t->zero_row = calloc(row, sizeof *t->zero_row);
  LS_RETURN_IF(t->zero_row == NULL, LS_ERR_NOMEM, "no memory for a state row");
  LS_FORWARD_IF_ERROR(ls_state_table_write(t->states, s, 1, t->zero_row, t->zero_row));
  if (t->F == 0) return LS_OK;
  t->norm_n[s] = 0;
  memset(t->norm + s * (size_t)t->F * LS_NORM_STATS, 0,
         (size_t)t->F * LS_NORM_STATS * sizeof(double));
  memset(t->errors + s * (size_t)t->O * 2, 0, (size_t)t->O * 2 * sizeof(double));
  memset(t->serve + s * LS_SERVE_FIELDS, 0, LS_SERVE_FIELDS * sizeof(int64_t));
  memset(t->pending + s * (size_t)t->O, 0, (size_t)t->O * sizeof(double));
  memset(t->tail + s * (size_t)t->F, 0, (size_t)t->F * sizeof(double));
  if (t->X > 0) memset(t->model + s * t->X, 0, t->X * sizeof(double));
  return LS_OK;
}

ls_err_t ls_series_table_slot(ls_series_table_t *t, const void *key, size_t key_len,
                              int32_t partition, int64_t *slot) {
  LS_RETURN_IF(t == NULL || slot == NULL, LS_ERR_INVALID_ARG, "table or slot is NULL");
  LS_FORWARD_IF_ERROR(check_key(key, key_len));
  uint64_t const hash = base_key_hash(key, key_len);
  *slot = base_keymap_find(&t->index, hash, key, key_len);
  if (*slot >= 0 && t->series[*slot].partition != partition) { /* it moved: it follows */
    plist_t *list = NULL;
    LS_FORWARD_IF_ERROR(plist_of(t, partition, &list));
    plist_unlink(t, *slot);
    t->series[*slot].partition = partition;
    plist_append(t, list, *slot);
  }
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
  plist_t *list = NULL;
  ls_err_t const lerr = plist_of(t, partition, &list);
  if (lerr != LS_OK) {
    (void)base_keymap_remove(&t->index, hash, copy, key_len);
    free(copy);
    return lerr;
  }
  size_t const at = t->count;
  t->series[at] = (series_t){copy, key_len, partition, 0, 0, -1, -1, 0, -1, -1};
  plist_append(t, list, (int64_t)at);
  *slot = (int64_t)t->count++;
  model_touch(t, at);
  return at < t->high ? clear_slot(t, at) : (t->high = t->count, LS_OK);
}

size_t ls_series_table_count(const ls_series_table_t *t) {
  return t == NULL ? 0 : t->count;
}

static ls_err_t check_slot(const ls_series_table_t *t, int64_t slot) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  LS_RETURN_IF(slot < 0 || (size_t)slot >= t->count, LS_ERR_INVALID_ARG,
               "slot %lld is not one of the table's %zu series", (long long)slot, t->count);
  return LS_OK;
}

ls_err_t ls_series_table_trained(ls_series_table_t *t, int64_t slot, int64_t records,
                                 int64_t last_offset) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(records < 0, LS_ERR_INVALID_ARG, "negative record count %lld", (long long)records);
  series_t *const s = &t->series[slot];
  s->windows++;
  s->records += records;
  s->last_offset = last_offset;
  return LS_OK;
}

ls_err_t ls_series_table_restore(ls_series_table_t *t, int64_t slot, const ls_series_info_t *in) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(in == NULL, LS_ERR_INVALID_ARG, "info is NULL");
  LS_RETURN_IF(in->windows < 0 || in->records < 0 || in->active < 0 || in->last_time < -1,
               LS_ERR_INVALID_ARG,
               "counts out of range (windows %lld, records %lld, active %lld, last time %lld)",
               (long long)in->windows, (long long)in->records, (long long)in->active,
               (long long)in->last_time);
  series_t *const s = &t->series[slot];
  s->windows = in->windows;
  s->records = in->records;
  s->last_offset = in->last_offset;
  s->last_time = in->last_time;
  s->active = in->active;
  if (in->active > t->ticks) t->ticks = in->active;
  plist_t *const l = &t->parts[s->partition];
  if (in->last_time > l->now) l->now = in->last_time;
  return LS_OK;
}

/* A slot and when it was active, for the restored order. */
typedef struct by_active_s {
  int64_t active, slot;
} by_active_t;

static int by_active(const void *a, const void *b) {
  const by_active_t *const x = a, *const y = b;
  if (x->active != y->active) return (x->active > y->active) - (x->active < y->active);
  return (x->slot > y->slot) - (x->slot < y->slot);
}

ls_err_t ls_series_table_restored(ls_series_table_t *t) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  by_active_t *const order = malloc((t->count > 0 ? t->count : 1) * sizeof *order);
  LS_RETURN_IF(order == NULL, LS_ERR_NOMEM, "no memory to order %zu series", t->count);
  for (size_t i = 0; i < t->count; i++)
    order[i] = (by_active_t){t->series[i].active, (int64_t)i};
  qsort(order, t->count, sizeof *order, by_active);
  for (size_t p = 0; p < t->n_parts; p++)
    t->parts[p].head = t->parts[p].tail = -1, t->parts[p].count = 0;
  for (size_t i = 0; i < t->count; i++)
    plist_append(t, &t->parts[t->series[order[i].slot].partition], order[i].slot);
  free(order);
  return LS_OK;
}

ls_err_t ls_series_table_active(ls_series_table_t *t, int64_t slot, int64_t time) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  series_t *const e = &t->series[slot];
  plist_t *const l = &t->parts[e->partition];
  if (time >= 0) e->last_time = time;
  if (time > l->now) l->now = time;
  e->active = ++t->ticks;
  if (l->tail == slot) return LS_OK;
  plist_unlink(t, slot);
  plist_append(t, l, slot);
  return LS_OK;
}

/* Forgets slot s; the last slot moves into it. */
static ls_err_t evict_slot(ls_series_table_t *t, int64_t s) {
  size_t const last = t->count - 1;
  series_t *const e = &t->series[s];
  plist_unlink(t, s);
  (void)base_keymap_remove(&t->index, base_key_hash(e->key, e->key_len), e->key, e->key_len);
  free(e->key);
  if ((size_t)s != last) { /* the last slot's series, states and host state move in */
    const ls_engine_conf_t *const conf = ls_engine_get_conf(t->eng);
    size_t const row = (size_t)conf->shape.num_layers * (size_t)conf->shape.hidden_size;
    float *const buf = malloc(2 * row * sizeof *buf);
    LS_RETURN_IF(buf == NULL, LS_ERR_NOMEM, "no memory for a state row");
    ls_err_t err = ls_state_table_read(t->states, last, 1, buf, buf + row);
    if (err == LS_OK) err = ls_state_table_write(t->states, (size_t)s, 1, buf, buf + row);
    free(buf);
    LS_FORWARD_IF_ERROR(err);
    *e = t->series[last];
    plist_t *const l = &t->parts[e->partition];
    if (e->prev >= 0) t->series[e->prev].next = s;
    if (e->next >= 0) t->series[e->next].prev = s;
    if (l->head == (int64_t)last) l->head = s;
    if (l->tail == (int64_t)last) l->tail = s;
    if (t->F > 0) {
      size_t const nf = (size_t)t->F * LS_NORM_STATS, ne = (size_t)t->O * 2;
      t->norm_n[s] = t->norm_n[last];
      memcpy(t->norm + (size_t)s * nf, t->norm + last * nf, nf * sizeof(double));
      memcpy(t->errors + (size_t)s * ne, t->errors + last * ne, ne * sizeof(double));
      memcpy(t->serve + (size_t)s * LS_SERVE_FIELDS, t->serve + last * LS_SERVE_FIELDS,
             LS_SERVE_FIELDS * sizeof(int64_t));
      memcpy(t->pending + (size_t)s * (size_t)t->O, t->pending + last * (size_t)t->O,
             (size_t)t->O * sizeof(double));
      memcpy(t->tail + (size_t)s * (size_t)t->F, t->tail + last * (size_t)t->F,
             (size_t)t->F * sizeof(double));
      if (t->X > 0)
        memcpy(t->model + (size_t)s * t->X, t->model + last * t->X, t->X * sizeof(double));
      model_touch(t, (size_t)s);
    }
  }
  t->count--;
  return t->on_evict != NULL
             ? t->on_evict(t->evict_opaque, s, (size_t)s != last ? (int64_t)last : -1)
             : LS_OK;
}

ls_err_t ls_series_table_on_evict(ls_series_table_t *t, ls_series_evict_fn fn, void *opaque) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "table is NULL");
  t->on_evict = fn;
  t->evict_opaque = opaque;
  return LS_OK;
}

ls_err_t ls_series_table_evict(ls_series_table_t *t, int64_t idle_ms, size_t max,
                               int64_t *evicted) {
  LS_RETURN_IF(t == NULL || idle_ms < 0, LS_ERR_INVALID_ARG, "table is NULL or idle_ms < 0");
  int64_t n = 0;
  for (size_t p = 0; p < t->n_parts; p++) {
    plist_t *const l = &t->parts[p];
    while (idle_ms > 0 && l->head >= 0 && t->series[l->head].last_time >= 0 &&
           l->now - t->series[l->head].last_time > idle_ms) {
      LS_FORWARD_IF_ERROR(evict_slot(t, l->head));
      n++;
    }
    while (max > 0 && l->count > (int64_t)max) {
      LS_FORWARD_IF_ERROR(evict_slot(t, l->head));
      n++;
    }
  }
  if (evicted != NULL) *evicted += n;
  return LS_OK;
}

ls_err_t ls_series_table_info(const ls_series_table_t *t, int64_t slot, ls_series_info_t *out) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  const series_t *const s = &t->series[slot];
  *out = (ls_series_info_t){s->key,     s->key_len,     s->partition, slot,     s->windows,
                            s->records, s->last_offset, s->last_time, s->active};
  return LS_OK;
}

ls_err_t ls_series_table_peek(ls_series_table_t *t, int64_t slot, ls_series_stats_t *out) {
  LS_FORWARD_IF_ERROR(check_slot(t, slot));
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  LS_RETURN_IF(t->F == 0, LS_ERR_STATE, "the table keeps no host-side state per series");
  *out = stats_layout_at(t->norm_n, t->norm, t->errors, t->serve, t->pending, t->tail, t->model,
                         t->F, t->O, t->X, (size_t)slot);
  return LS_OK;
}

ls_err_t ls_series_table_stats(ls_series_table_t *t, int64_t slot, ls_series_stats_t *out) {
  LS_FORWARD_IF_ERROR(ls_series_table_peek(t, slot, out));
  model_touch(t, (size_t)slot);
  return LS_OK;
}

uint64_t series_table_model_gen(const ls_series_table_t *t, size_t slot, uint64_t *clock,
                                uint64_t *id) {
  if (clock != NULL) *clock = t->clock;
  if (id != NULL) *id = t->id;
  return t->X > 0 && slot < t->count ? t->mgen[slot] : UINT64_MAX;
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
  LS_RETURN_IF(dst->model_n != src->model_n, LS_ERR_INVALID_ARG,
               "series stats copy: %zu doubles of per-series model state into %zu", src->model_n,
               dst->model_n);
  if (src->model_n > 0) memcpy(dst->model, src->model, src->model_n * sizeof(double));
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
    if (t->X > 0) d = base_fnv1a(d, t->model + s * t->X, t->X * sizeof(double));
  }
  free(h), free(c);
  if (err == LS_OK) *digest = d;
  return err;
}
