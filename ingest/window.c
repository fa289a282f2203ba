/*
 * The windower (include/lstream/ingest.h, "Windows"): validates records and
 * cuts each series into TBPTT windows of T steps.
 *
 * Series are found by key through the ground floor's key->index map
 * (include/base/keymap.h) over an array of series; the index is the
 * series' id in its windows. Each series owns one allocation: its state, a
 * buffer x [T+1, F] with the offsets and event times [T+1] of the records
 * in it, and its key. Values are decoded straight into the next free
 * row. When row T is filled the buffer is a complete window (inputs rows
 * 0..T-1, targets rows 1..T) and is handed out as is; row T moves to row 0
 * on the series' next record (the carry), so windows overlap by one record
 * and nothing is copied per record.
 *
 * Each partition keeps the series that hold records in a list ordered by
 * their oldest held record (the low offset: row 0, or row T while it waits
 * to be carried). A series' low offset only changes to the record just
 * pushed (its first, or the last target of a window it completed), so it
 * moves to the tail: O(1) per record when a partition's offsets increase,
 * as Kafka's do. The head is the partition's lowest held offset (what a
 * resume needs) and the list is the order of trailing partial windows.
 *
 * Skip rules (resuming from a snapshot) live in a second table of the same
 * kind, looked up only when a record's series is not in the first, and
 * freed once every rule's series has been seen.
 */
#include "window.h"

#include <stdlib.h>
#include <string.h>

#include "base/keymap.h"

/* A key's identity: the first member of what a table holds. */
typedef struct keyed_s {
  size_t key_len;
  char *key; /* key_len bytes + NUL */
} keyed_t;

/* Keyed items, by index in the order they were added, and the map from
 * their keys to those indices; each item is one allocation, freed with the
 * table. Empty: all zero. */
typedef struct table_s {
  base_keymap_t map;
  keyed_t **items; /* [map.n] */
  size_t cap;
} table_t;

struct series_s;

/* A partition and its series that hold records, by ascending low offset. */
typedef struct wpart_s {
  int32_t id;
  struct series_s *head, *tail;
} wpart_t;

/* One series. count is the number of filled rows of x; count == T+1 means a
 * window was just handed out and row T is still to be carried to row 0. */
typedef struct series_s {
  keyed_t k;                    /* must stay first */
  wpart_t *part;                /* the partition it was first accepted on */
  struct series_s *prev, *next; /* in part's list, while count > 0 */
  int64_t last_time;            /* timestamp of the last accepted record, -1 before any */
  int64_t index;                /* number of the next window handed out */
  int64_t id;                   /* its index in the table: 0, 1, ... by first acceptance */
  int count;
  int64_t *offsets; /* [T+1] */
  int64_t *times;   /* [T+1] event times */
  float *x;         /* [T+1, F] */
} series_t;

/* A skip rule (ls_windower_skip_series) of a series not seen yet. */
typedef struct skip_s {
  keyed_t k; /* must stay first */
  int32_t partition;
  int64_t below, next_index;
} skip_t;

struct ls_windower_s {
  ls_format_t fmt;
  int F, T;
  table_t series;    /* of series_t, in order of first appearance */
  table_t skips;     /* of skip_t */
  size_t skips_left; /* rules whose series was not accepted yet */
  wpart_t **parts;   /* [n_parts], by ascending id */
  size_t n_parts, parts_cap;
  float *scratch;      /* [F]: a new series' first record, before it is accepted */
  float *ones;         /* [T]: the mask of a complete window */
  float *partial_mask; /* [T]: the mask of a flushed partial window */
  ls_window_t view;    /* the window last handed out */
  ls_window_stats_t stats;
  const series_t *last; /* the series of the record the last push accepted, or NULL */
};

/* ------------------------------------------------------------------------ */
/* Hash tables                                                               */

/* The item of key, or NULL. */
static keyed_t *table_find(const table_t *t, uint64_t hash, const void *key, size_t key_len) {
  int64_t const idx = base_keymap_find(&t->map, hash, key, key_len);
  return idx >= 0 ? t->items[idx] : NULL;
}

/* Makes room in the item array for the next add; `what` names the items
 * in messages ("series"). */
static ls_err_t table_reserve(table_t *t, const char *what) {
  if (t->map.n < t->cap) return LS_OK;
  size_t const cap = t->cap ? t->cap * 2 : 32;
  keyed_t **const grown = realloc(t->items, cap * sizeof *grown);
  LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "windower: no memory for %zu %s", cap, what);
  t->items = grown;
  t->cap = cap;
  return LS_OK;
}

/* Allocates an item of `head` bytes (a struct whose first member is a
 * keyed_t), `body` bytes after it, then the key; fills the keyed_t. */
static void *item_new(size_t head, size_t body, const void *key, size_t key_len) {
  keyed_t *const k = malloc(head + body + key_len + 1);
  if (k == NULL) return NULL;
  k->key_len = key_len;
  k->key = (char *)k + head + body;
  memcpy(k->key, key, key_len);
  k->key[key_len] = '\0';
  return k;
}

/* Adds item as index t->map.n (room reserved by table_reserve). On an
 * error the item is not added (the caller still owns it). */
static ls_err_t table_add(table_t *t, keyed_t *item, uint64_t hash, const char *what) {
  LS_FORWARD_IF_ERROR(base_keymap_add(&t->map, hash, item->key, item->key_len, what));
  t->items[t->map.n - 1] = item;
  return LS_OK;
}

/* Frees the items and the table; it is then empty. */
static void table_free(table_t *t) {
  for (size_t i = 0; i < t->map.n; i++)
    free(t->items[i]);
  free(t->items);
  base_keymap_free(&t->map);
  *t = (table_t){0};
}

/* ------------------------------------------------------------------------ */
/* Partitions and their lists of series                                      */

/* The index of the first partition with an id >= id. */
static size_t part_at(const ls_windower_t *w, int32_t id) {
  size_t lo = 0, hi = w->n_parts;
  while (lo < hi) {
    size_t const mid = lo + (hi - lo) / 2;
    if (w->parts[mid]->id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static wpart_t *part_find(const ls_windower_t *w, int32_t id) {
  size_t const at = part_at(w, id);
  return at < w->n_parts && w->parts[at]->id == id ? w->parts[at] : NULL;
}

/* Finds partition id, adding it if new. */
static ls_err_t part_get(ls_windower_t *w, int32_t id, wpart_t **out) {
  size_t const at = part_at(w, id);
  if (at < w->n_parts && w->parts[at]->id == id) {
    *out = w->parts[at];
    return LS_OK;
  }
  if (w->n_parts == w->parts_cap) {
    size_t const cap = w->parts_cap ? w->parts_cap * 2 : 8;
    wpart_t **const grown = realloc(w->parts, cap * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "windower: no memory for %zu partitions", cap);
    w->parts = grown;
    w->parts_cap = cap;
  }
  wpart_t *const p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "windower: no memory for partition %d", (int)id);
  p->id = id;
  memmove(w->parts + at + 1, w->parts + at, (w->n_parts - at) * sizeof *w->parts);
  w->parts[at] = p;
  w->n_parts++;
  *out = p;
  return LS_OK;
}

/* The offset of the oldest record s holds (count > 0). */
static int64_t series_low(const series_t *s, int T) {
  return s->offsets[s->count == T + 1 ? T : 0];
}

static void list_unlink(series_t *s) {
  wpart_t *const p = s->part;
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    p->head = s->next;
  if (s->next != NULL)
    s->next->prev = s->prev;
  else
    p->tail = s->prev;
  s->prev = s->next = NULL;
}

/* Links s into its partition's list by its low offset, searching from the
 * tail (where offsets pushed in order put it at once). */
static void list_insert(series_t *s, int T) {
  wpart_t *const p = s->part;
  int64_t const low = series_low(s, T);
  series_t *after = p->tail;
  while (after != NULL && series_low(after, T) > low)
    after = after->prev;
  s->prev = after;
  s->next = after != NULL ? after->next : p->head;
  if (s->next != NULL)
    s->next->prev = s;
  else
    p->tail = s;
  if (after != NULL)
    after->next = s;
  else
    p->head = s;
}

/* Adds a series with its first record (values [F] from scratch), its
 * windows numbered from index. */
static ls_err_t series_add(ls_windower_t *w, uint64_t hash, const ls_record_t *rec, int64_t index,
                           series_t **out) {
  wpart_t *part = NULL;
  LS_FORWARD_IF_ERROR(part_get(w, rec->partition, &part));
  LS_FORWARD_IF_ERROR(table_reserve(&w->series, "series"));
  size_t const rows = (size_t)w->T + 1;
  size_t const body = 2 * rows * sizeof(int64_t) + rows * (size_t)w->F * sizeof(float);
  series_t *const s = item_new(sizeof(series_t), body, rec->key, rec->key_len);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "windower: no memory for series %zu (%zu bytes)",
               w->series.map.n, sizeof(series_t) + body + rec->key_len + 1);
  s->id = (int64_t)w->series.map.n;
  s->part = part;
  s->prev = s->next = NULL;
  s->last_time = -1;
  s->index = index;
  s->count = 0;
  s->offsets = (int64_t *)(s + 1);
  s->times = s->offsets + rows;
  s->x = (float *)(s->times + rows);
  memcpy(s->x, w->scratch, (size_t)w->F * sizeof(float));
  ls_err_t const err = table_add(&w->series, &s->k, hash, "windower series");
  if (err != LS_OK) {
    free(s);
    return err;
  }
  w->stats.series++;
  *out = s;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Windower                                                                  */

ls_err_t ls_windower_new(ls_windower_t **out, ls_format_t fmt, int F, int T) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_windower_new: out is NULL");
  *out = NULL;
  LS_RETURN_IF(fmt != LS_FORMAT_F32 && fmt != LS_FORMAT_CSV, LS_ERR_INVALID_ARG,
               "ls_windower_new: unknown format %d", (int)fmt);
  LS_RETURN_IF(F < 1 || F > LS_FEATURES_MAX, LS_ERR_INVALID_ARG,
               "windower: features F=%d is outside [1, %d]", F, LS_FEATURES_MAX);
  LS_RETURN_IF(T < 1 || T > LS_WINDOW_MAX, LS_ERR_INVALID_ARG,
               "windower: window T=%d is outside [1, %d]", T, LS_WINDOW_MAX);
  ls_windower_t *const w = calloc(1, sizeof *w);
  LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "windower: out of memory");
  w->fmt = fmt;
  w->F = F;
  w->T = T;
  w->scratch = malloc((size_t)F * sizeof(float));
  w->ones = malloc((size_t)T * sizeof(float));
  w->partial_mask = malloc((size_t)T * sizeof(float));
  if (!w->scratch || !w->ones || !w->partial_mask) {
    ls_windower_destroy(w);
    return ls_error_set(LS_ERR_NOMEM, "windower: out of memory (F=%d, T=%d)", F, T);
  }
  for (int t = 0; t < T; t++)
    w->ones[t] = 1.0f;
  *out = w;
  return LS_OK;
}

void ls_windower_destroy(ls_windower_t *w) {
  if (w == NULL) return;
  table_free(&w->series);
  table_free(&w->skips);
  for (size_t i = 0; i < w->n_parts; i++)
    free(w->parts[i]);
  free(w->parts);
  free(w->scratch);
  free(w->ones);
  free(w->partial_mask);
  free(w);
}

ls_err_t window_skip_check(const void *key, size_t key_len, int32_t partition, int64_t below,
                           int64_t next_index) {
  LS_RETURN_IF(key == NULL, LS_ERR_INVALID_ARG, "skip rule: the key is NULL");
  LS_RETURN_IF(key_len == 0 || key_len > LS_KEY_MAX, LS_ERR_INVALID_ARG,
               "skip rule: a key of %zu bytes is no series key (1..%d bytes)", key_len, LS_KEY_MAX);
  LS_RETURN_IF(partition < 0 || below < 0 || next_index < 0, LS_ERR_INVALID_ARG,
               "skip rule for series '%.*s': partition %d, offset %lld and window index %lld "
               "must not be negative",
               (int)key_len, (const char *)key, (int)partition, (long long)below,
               (long long)next_index);
  return LS_OK;
}

ls_err_t ls_windower_skip_series(ls_windower_t *w, const void *key, size_t key_len,
                                 int32_t partition, int64_t below, int64_t next_index) {
  LS_RETURN_IF(w == NULL, LS_ERR_INVALID_ARG, "ls_windower_skip_series: w is NULL");
  LS_FORWARD_IF_ERROR(window_skip_check(key, key_len, partition, below, next_index));
  uint64_t const hash = base_key_hash(key, key_len);
  LS_RETURN_IF(table_find(&w->series, hash, key, key_len) != NULL, LS_ERR_STATE,
               "skip rule for series '%.*s': the windower already has its records (declare skip "
               "rules before pushing)",
               (int)key_len, (const char *)key);
  LS_RETURN_IF(table_find(&w->skips, hash, key, key_len) != NULL, LS_ERR_INVALID_ARG,
               "series '%.*s' has two skip rules (one per series)", (int)key_len,
               (const char *)key);
  LS_FORWARD_IF_ERROR(table_reserve(&w->skips, "skip rules"));
  skip_t *const rule = item_new(sizeof(skip_t), 0, key, key_len);
  LS_RETURN_IF(rule == NULL, LS_ERR_NOMEM, "windower: no memory for skip rule %zu",
               w->skips.map.n + 1);
  rule->partition = partition;
  rule->below = below;
  rule->next_index = next_index;
  ls_err_t const err = table_add(&w->skips, &rule->k, hash, "windower skip rules");
  if (err != LS_OK) {
    free(rule);
    return err;
  }
  w->skips_left++;
  return LS_OK;
}

/* Points w->view at series s's buffer, n_targets valid targets. */
static const ls_window_t *window_view(ls_windower_t *w, series_t *s, int n_targets,
                                      const float *mask) {
  ls_window_t *const v = &w->view;
  v->key = s->k.key;
  v->key_len = s->k.key_len;
  v->series = s->id;
  v->partition = s->part->id;
  v->index = s->index++;
  v->first_offset = s->offsets[0];
  v->last_offset = s->offsets[n_targets];
  v->T = w->T;
  v->F = w->F;
  v->n_targets = n_targets;
  v->x = s->x;
  v->mask = mask;
  v->times = s->times;
  v->offsets = s->offsets;
  return v;
}

static ls_reject_t reject(ls_windower_t *w, ls_reject_t reason) {
  w->stats.rejected[reason]++;
  return reason;
}

ls_reject_t ls_windower_push(ls_windower_t *w, const ls_record_t *rec,
                             const ls_window_t **complete) {
  if (w == NULL || rec == NULL || complete == NULL || (rec->key == NULL && rec->key_len > 0) ||
      (rec->value == NULL && rec->value_len > 0)) {
    ls_error_set(LS_ERR_INVALID_ARG, "ls_windower_push: w, rec, complete, and rec's key and "
                                     "value (when their length is not 0) must not be NULL");
    return LS_REJECT__COUNT;
  }
  *complete = NULL;
  w->last = NULL;
  w->stats.records++;
  if (rec->key_len == 0 || rec->key_len > LS_KEY_MAX) return reject(w, LS_REJECT_KEY);

  uint64_t const hash = base_key_hash(rec->key, rec->key_len);
  series_t *s = (series_t *)table_find(&w->series, hash, rec->key, rec->key_len);
  int const F = w->F, T = w->T;
  if (s != NULL) {
    if (s->part->id != rec->partition) return reject(w, LS_REJECT_PARTITION);
    if (s->count == T + 1) { /* the carry: last target becomes the first input */
      memcpy(s->x, s->x + (size_t)T * F, (size_t)F * sizeof(float));
      s->offsets[0] = s->offsets[T];
      s->times[0] = s->times[T];
      s->count = 1;
    }
    ls_reject_t const r =
        ls_record_decode(w->fmt, rec->value, rec->value_len, F, s->x + (size_t)s->count * F);
    if (r != LS_REJECT_NONE) return reject(w, r);
    if (rec->timestamp >= 0 && rec->timestamp < s->last_time) return reject(w, LS_REJECT_BACKWARDS);
  } else {
    const skip_t *const rule =
        w->skips_left > 0 ? (const skip_t *)table_find(&w->skips, hash, rec->key, rec->key_len)
                          : NULL;
    if (rule != NULL && rule->partition != rec->partition) return reject(w, LS_REJECT_PARTITION);
    if (rule != NULL && rec->offset < rule->below) {
      w->stats.skipped++;
      return LS_REJECT_NONE;
    }
    ls_reject_t const r = ls_record_decode(w->fmt, rec->value, rec->value_len, F, w->scratch);
    if (r != LS_REJECT_NONE) return reject(w, r);
    ls_err_t const err = series_add(w, hash, rec, rule != NULL ? rule->next_index : 0, &s);
    if (err != LS_OK) {
      w->stats.records--;
      return LS_REJECT__COUNT;
    }
    if (rule != NULL && --w->skips_left == 0) table_free(&w->skips); /* every rule passed */
  }
  s->times[s->count] = rec->timestamp >= 0 ? rec->timestamp : -1;
  s->offsets[s->count++] = rec->offset;
  if (rec->timestamp >= 0) s->last_time = rec->timestamp;
  w->stats.accepted++;
  w->stats.buffered++;
  w->last = s;
  if (s->count == 1) list_insert(s, T); /* it holds a record again */
  if (s->count == T + 1) {
    list_unlink(s); /* its low offset is now this record's: to the tail */
    list_insert(s, T);
    w->stats.windows++;
    w->stats.buffered -= T; /* row T stays, as the next window's first input */
    *complete = window_view(w, s, T, w->ones);
  }
  return LS_REJECT_NONE;
}

ls_err_t ls_windower_last(const ls_windower_t *w, ls_windower_record_t *out) {
  LS_RETURN_IF(w == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_last: w and out must not be NULL");
  const series_t *const s = w->last;
  if (s == NULL) {
    *out = (ls_windower_record_t){-1, NULL, 0, NULL};
    return LS_OK;
  }
  /* The record is the last row filled: count - 1 (the carry happens on the next push). */
  *out = (ls_windower_record_t){s->id, s->k.key, s->k.key_len,
                                s->x + (size_t)(s->count - 1) * (size_t)w->F};
  return LS_OK;
}

/* Records of s not yet in a complete window. */
static int series_pending(const series_t *s, int T) {
  return s->count == T + 1 ? 1 : s->count;
}

ls_err_t ls_windower_flush_next(ls_windower_t *w, int32_t partition, const ls_window_t **win) {
  LS_RETURN_IF(w == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_flush_next: w and win must not be NULL");
  *win = NULL;
  wpart_t *const part = part_find(w, partition);
  int const F = w->F, T = w->T;
  while (part != NULL && part->head != NULL) {
    series_t *const s = part->head;
    int const n = series_pending(s, T);
    list_unlink(s);
    w->stats.buffered -= n;
    s->count = 0;
    if (n < 2) continue; /* a lone record: no target to train on */
    /* Rows n..T are padding: zero them so no stale values reach a model. */
    memset(s->x + (size_t)n * F, 0, (size_t)(T + 1 - n) * F * sizeof(float));
    for (int t = n; t <= T; t++)
      s->times[t] = s->offsets[t] = -1;
    for (int t = 0; t < T; t++)
      w->partial_mask[t] = t < n - 1 ? 1.0f : 0.0f;
    *win = window_view(w, s, n - 1, w->partial_mask);
    return LS_OK;
  }
  return LS_OK;
}

ls_err_t ls_windower_low_offset(const ls_windower_t *w, int32_t partition, int64_t *offset,
                                int *found) {
  LS_RETURN_IF(w == NULL || offset == NULL || found == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_low_offset: w, offset and found must not be NULL");
  const wpart_t *const part = part_find(w, partition);
  *found = part != NULL && part->head != NULL;
  *offset = *found ? series_low(part->head, w->T) : -1;
  return LS_OK;
}

ls_err_t ls_windower_pending(const ls_windower_t *w, const void *key, size_t key_len,
                             int64_t *records, int *found) {
  LS_RETURN_IF(w == NULL || key == NULL || records == NULL || found == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_pending: w, key, records and found must not be NULL");
  const series_t *const s =
      (const series_t *)table_find(&w->series, base_key_hash(key, key_len), key, key_len);
  *found = s != NULL;
  *records = s != NULL ? series_pending(s, w->T) : 0;
  return LS_OK;
}

ls_err_t ls_windower_stats(const ls_windower_t *w, ls_window_stats_t *out) {
  LS_RETURN_IF(w == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_stats: w and out must not be NULL");
  *out = w->stats;
  return LS_OK;
}
