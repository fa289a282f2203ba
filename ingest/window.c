/*
 * The windower (include/lstream/ingest.h, "Windows"): validates records and
 * cuts each series into TBPTT windows of T steps.
 *
 * Series live in an open-addressing hash table (linear probing, load <= 1/2)
 * of (hash tag, index) slots over an array of series. Each series owns one
 * allocation: its state, a buffer x [T+1, F] with the offsets [T+1] of the
 * records in it, and its key. Values are decoded straight into the next free
 * row. When row T is filled the buffer is a complete window (inputs rows
 * 0..T-1, targets rows 1..T) and is handed out as is; row T moves to row 0
 * on the series' next record (the carry), so windows overlap by one record
 * and nothing is copied per record.
 */
#include "lstream/ingest.h"

#include <stdlib.h>
#include <string.h>

/* One series. count is the number of filled rows of x; count == T+1 means a
 * window was just handed out and row T is still to be carried to row 0. */
typedef struct series_s {
  uint64_t hash;
  int64_t last_time; /* timestamp of the last accepted record, -1 before any */
  int64_t index;     /* windows handed out so far */
  int32_t partition;
  int count;
  size_t key_len;
  int64_t *offsets; /* [T+1] */
  float *x;         /* [T+1, F] */
  char *key;        /* key_len bytes + NUL */
} series_t;

/* A table slot: tag = high 32 bits of the key hash, idx = series index + 1
 * (0 = empty). */
typedef struct slot_s {
  uint32_t tag;
  uint32_t idx;
} slot_t;

struct ls_windower_s {
  ls_format_t fmt;
  int F, T;
  slot_t *slots; /* [mask + 1] */
  size_t mask;
  series_t **series; /* [n_series], in order of first appearance */
  size_t n_series, series_cap;
  float *scratch;      /* [F]: a new series' first record, before it is accepted */
  float *ones;         /* [T]: the mask of a complete window */
  float *partial_mask; /* [T]: the mask of a flushed partial window */
  ls_window_t view;    /* the window last handed out */
  ls_window_stats_t stats;
};

/* ------------------------------------------------------------------------ */
/* Hash table                                                                */

/* A fast 64-bit hash of the key bytes (8 at a time, splitmix64's finalizer
 * to finish). Keys are producer-chosen series ids, not adversarial input. */
static uint64_t key_hash(const unsigned char *p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  if (n > 0) {
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

static series_t *table_find(const ls_windower_t *w, uint64_t hash, const void *key,
                            size_t key_len) {
  uint32_t const tag = (uint32_t)(hash >> 32);
  for (size_t i = hash & w->mask;; i = (i + 1) & w->mask) {
    slot_t const slot = w->slots[i];
    if (slot.idx == 0) return NULL;
    if (slot.tag != tag) continue;
    series_t *const s = w->series[slot.idx - 1];
    if (s->key_len == key_len && !memcmp(s->key, key, key_len)) return s;
  }
}

static void table_place(slot_t *slots, size_t mask, uint64_t hash, uint32_t idx) {
  size_t i = hash & mask;
  while (slots[i].idx != 0)
    i = (i + 1) & mask;
  slots[i].tag = (uint32_t)(hash >> 32);
  slots[i].idx = idx;
}

/* Doubles the table and the series array when the next insert needs it. */
static ls_err_t table_reserve(ls_windower_t *w) {
  LS_RETURN_IF(w->n_series >= UINT32_MAX - 1, LS_ERR_NOMEM,
               "windower: %zu series, the most one windower holds", w->n_series);
  if (w->n_series == w->series_cap) {
    size_t const cap = w->series_cap * 2;
    series_t **const grown = realloc(w->series, cap * sizeof *grown);
    LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "windower: no memory for %zu series", cap);
    w->series = grown;
    w->series_cap = cap;
  }
  if ((w->n_series + 1) * 2 <= w->mask + 1) return LS_OK;
  size_t const size = (w->mask + 1) * 2;
  slot_t *const slots = calloc(size, sizeof *slots);
  LS_RETURN_IF(slots == NULL, LS_ERR_NOMEM, "windower: no memory for a table of %zu slots", size);
  for (size_t i = 0; i < w->n_series; i++)
    table_place(slots, size - 1, w->series[i]->hash, (uint32_t)(i + 1));
  free(w->slots);
  w->slots = slots;
  w->mask = size - 1;
  return LS_OK;
}

/* Adds a series with its first record (values [F] from scratch). */
static ls_err_t series_add(ls_windower_t *w, uint64_t hash, const ls_record_t *rec,
                           series_t **out) {
  LS_FORWARD_IF_ERROR(table_reserve(w));
  size_t const rows = (size_t)w->T + 1;
  size_t const bytes = sizeof(series_t) + rows * sizeof(int64_t) +
                       rows * (size_t)w->F * sizeof(float) + rec->key_len + 1;
  series_t *const s = malloc(bytes);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "windower: no memory for series %zu (%zu bytes)",
               w->n_series, bytes);
  s->hash = hash;
  s->last_time = -1;
  s->index = 0;
  s->partition = rec->partition;
  s->count = 0;
  s->key_len = rec->key_len;
  s->offsets = (int64_t *)(s + 1);
  s->x = (float *)(s->offsets + rows);
  s->key = (char *)(s->x + rows * (size_t)w->F);
  memcpy(s->key, rec->key, rec->key_len);
  s->key[rec->key_len] = '\0';
  memcpy(s->x, w->scratch, (size_t)w->F * sizeof(float));
  w->series[w->n_series++] = s;
  table_place(w->slots, w->mask, hash, (uint32_t)w->n_series);
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
  w->mask = 63;
  w->series_cap = 32;
  w->slots = calloc(w->mask + 1, sizeof *w->slots);
  w->series = malloc(w->series_cap * sizeof *w->series);
  w->scratch = malloc((size_t)F * sizeof(float));
  w->ones = malloc((size_t)T * sizeof(float));
  w->partial_mask = malloc((size_t)T * sizeof(float));
  if (!w->slots || !w->series || !w->scratch || !w->ones || !w->partial_mask) {
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
  for (size_t i = 0; i < w->n_series; i++)
    free(w->series[i]);
  free(w->series);
  free(w->slots);
  free(w->scratch);
  free(w->ones);
  free(w->partial_mask);
  free(w);
}

/* Points w->view at series s's buffer, n_targets valid targets. */
static const ls_window_t *window_view(ls_windower_t *w, series_t *s, int n_targets,
                                      const float *mask) {
  ls_window_t *const v = &w->view;
  v->key = s->key;
  v->key_len = s->key_len;
  v->partition = s->partition;
  v->index = s->index++;
  v->first_offset = s->offsets[0];
  v->last_offset = s->offsets[n_targets];
  v->T = w->T;
  v->F = w->F;
  v->n_targets = n_targets;
  v->x = s->x;
  v->mask = mask;
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
  w->stats.records++;
  if (rec->key_len == 0 || rec->key_len > LS_KEY_MAX) return reject(w, LS_REJECT_KEY);

  uint64_t const hash = key_hash(rec->key, rec->key_len);
  series_t *s = table_find(w, hash, rec->key, rec->key_len);
  int const F = w->F, T = w->T;
  if (s != NULL) {
    if (s->partition != rec->partition) return reject(w, LS_REJECT_PARTITION);
    if (s->count == T + 1) { /* the carry: last target becomes the first input */
      memcpy(s->x, s->x + (size_t)T * F, (size_t)F * sizeof(float));
      s->offsets[0] = s->offsets[T];
      s->count = 1;
    }
    ls_reject_t const r =
        ls_record_decode(w->fmt, rec->value, rec->value_len, F, s->x + (size_t)s->count * F);
    if (r != LS_REJECT_NONE) return reject(w, r);
    if (rec->timestamp >= 0 && rec->timestamp < s->last_time) return reject(w, LS_REJECT_BACKWARDS);
  } else {
    ls_reject_t const r = ls_record_decode(w->fmt, rec->value, rec->value_len, F, w->scratch);
    if (r != LS_REJECT_NONE) return reject(w, r);
    ls_err_t const err = series_add(w, hash, rec, &s);
    if (err != LS_OK) {
      w->stats.records--;
      return LS_REJECT__COUNT;
    }
  }
  s->offsets[s->count++] = rec->offset;
  if (rec->timestamp >= 0) s->last_time = rec->timestamp;
  w->stats.accepted++;
  w->stats.buffered++;
  if (s->count == T + 1) {
    w->stats.windows++;
    w->stats.buffered -= T; /* row T stays, as the next window's first input */
    *complete = window_view(w, s, T, w->ones);
  }
  return LS_REJECT_NONE;
}

/* Records of s not yet in a complete window. */
static int series_pending(const series_t *s, int T) {
  return s->count == T + 1 ? 1 : s->count;
}

ls_err_t ls_windower_flush_next(ls_windower_t *w, int32_t partition, size_t *cursor,
                                const ls_window_t **win) {
  LS_RETURN_IF(w == NULL || cursor == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_flush_next: w, cursor and win must not be NULL");
  *win = NULL;
  int const F = w->F, T = w->T;
  while (*cursor < w->n_series) {
    series_t *const s = w->series[(*cursor)++];
    int const n = series_pending(s, T);
    if (n < 2 || (partition >= 0 && s->partition != partition)) continue;
    /* Rows n..T are padding: zero them so no stale values reach a model. */
    memset(s->x + (size_t)n * F, 0, (size_t)(T + 1 - n) * F * sizeof(float));
    for (int t = 0; t < T; t++)
      w->partial_mask[t] = t < n - 1 ? 1.0f : 0.0f;
    w->stats.buffered -= n;
    s->count = 0;
    *win = window_view(w, s, n - 1, w->partial_mask);
    return LS_OK;
  }
  return LS_OK;
}

ls_err_t ls_windower_pending(const ls_windower_t *w, const void *key, size_t key_len,
                             int64_t *records, int *found) {
  LS_RETURN_IF(w == NULL || key == NULL || records == NULL || found == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_pending: w, key, records and found must not be NULL");
  const series_t *const s = table_find(w, key_hash(key, key_len), key, key_len);
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
