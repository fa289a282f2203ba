/*
 * The windower (include/lstream/ingest.h, "Windows"): validates records and
 * cuts each series into TBPTT windows of T steps.
 *
 * Series are found by key through the ground floor's key->index map
 * (include/base/keymap.h) over an array of series; the index is the
 * series' id in its windows. Each series owns one allocation: its state, a
 * buffer x [T+G, F] with the offsets and event times [T+G] of the records
 * in it, and its key. Values are decoded straight into the next free
 * row. When row T+G-1 is filled the buffer is a complete window (inputs
 * rows 0..T-1, targets rows 1..T, and with a horizon G > 1 the G-1 records
 * after them, targets of its later horizons only) and is handed out as is;
 * rows T..T+G-1 move to rows 0..G-1 on the series' next record (the
 * carry), so windows overlap by G records and nothing is copied per
 * record. A horizon's records after a window are data, never timing: a
 * window waits for them (or for its series' end: a flush, a gap, a move),
 * so a replay's windows are the same however its records arrive.
 *
 * Each partition keeps the series that hold records in a list ordered by
 * their oldest held record (the low offset: row 0, or row T while the
 * carry waits). A series' low offset only changes to the record just
 * pushed (its first, or the last target of a window it completed), so it
 * moves to the tail: O(1) per record when a partition's offsets increase,
 * as Kafka's do. The head is the partition's lowest held offset (what a
 * resume needs) and the list is the order of trailing partial windows.
 *
 * Resuming from a snapshot restores series in flight (ls_windower_restore):
 * each comes back with its first row as its buffer's row 0, and its later
 * rows are pushed again in offset order, re-forming the same windows.
 *
 * Event times (ls_windower_set_time_bounds): a record stamped beyond the
 * wall clock plus the bound on the future is rejected before its series is
 * looked at, so one bad stamp never becomes a series' clock; the clock is
 * read only for a record past its last reading's bound (never, for data in
 * the past). A record stamped before its series' last by no more than the
 * bound on lateness is accepted with the series' last time: a series'
 * times never go back, so gaps, eviction and step formation see them in
 * order.
 *
 * A gap (ls_windower_set_reset_gap): a record whose event time is more than
 * the bound after its series' last one first closes what the series holds
 * as a partial window (copied to the windower's gap buffer, since the new
 * record reuses the series' buffer), then starts the series' next window
 * from it, marked reset: the trainer starts it from a zero state.
 */
#include "window.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/keymap.h"

/* ------------------------------------------------------------------------ */
/* Hash tables                                                               */

/* The item of key, or NULL. */
keyed_t *window_table_find(const table_t *t, uint64_t hash, const void *key, size_t key_len) {
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

wpart_t *window_part_find(const ls_windower_t *w, int32_t id) {
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
  p->now = -1;
  memmove(w->parts + at + 1, w->parts + at, (w->n_parts - at) * sizeof *w->parts);
  w->parts[at] = p;
  w->n_parts++;
  *out = p;
  return LS_OK;
}

/* Adds a series of key [key_len] on `partition` with its first row (values
 * [F] from `first`) to come, its windows numbered from index. */
ls_err_t window_series_add(ls_windower_t *w, uint64_t hash, const void *key, size_t key_len,
                           int32_t partition, const float *first, int64_t index, series_t **out) {
  wpart_t *part = NULL;
  LS_FORWARD_IF_ERROR(part_get(w, partition, &part));
  LS_FORWARD_IF_ERROR(table_reserve(&w->series, "series"));
  size_t const rows = (size_t)w->T + (size_t)w->G;
  size_t const body = 2 * rows * sizeof(int64_t) + rows * (size_t)w->F * sizeof(float);
  series_t *const s = item_new(sizeof(series_t), body, key, key_len);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "windower: no memory for series %zu (%zu bytes)",
               w->series.map.n, sizeof(series_t) + body + key_len + 1);
  s->id = w->next_id++;
  s->hash = hash;
  s->lru_next = NULL;
  s->lru_prev = part->lru_tail;
  if (part->lru_tail != NULL)
    part->lru_tail->lru_next = s;
  else
    part->lru_head = s;
  part->lru_tail = s;
  part->held++;
  s->part = part;
  s->prev = s->next = NULL;
  s->last_time = -1;
  s->index = index;
  s->count = 0;
  s->reset = 0;
  s->offsets = (int64_t *)(s + 1);
  s->times = s->offsets + rows;
  s->x = (float *)(s->times + rows);
  memcpy(s->x, first, (size_t)w->F * sizeof(float));
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

/* (Re)makes the gap buffers for windows of T+G rows, horizon G. */
static ls_err_t gap_new(ls_windower_t *w, int G) {
  size_t const rows = (size_t)w->T + (size_t)G;
  int64_t *const gap = malloc(2 * rows * sizeof(int64_t)), *const gap2 =
                                                               malloc(2 * rows * sizeof(int64_t));
  float *const gap_x = malloc(rows * (size_t)w->F * sizeof(float));
  float *const gap2_x = malloc(rows * (size_t)w->F * sizeof(float));
  if (!gap || !gap2 || !gap_x || !gap2_x) { /* the windower left as it was */
    free(gap), free(gap2), free(gap_x), free(gap2_x);
    return ls_error_set(LS_ERR_NOMEM, "windower: out of memory (F=%d, T=%d, horizon %d)", w->F,
                        w->T, G);
  }
  free(w->gap), free(w->gap_x), free(w->gap2), free(w->gap2_x);
  w->gap = gap, w->gap2 = gap2, w->gap_x = gap_x, w->gap2_x = gap2_x;
  w->G = G;
  return LS_OK;
}

ls_err_t ls_windower_set_horizon(ls_windower_t *w, int G) {
  LS_RETURN_IF(w == NULL || G < 1 || G > w->T, LS_ERR_INVALID_ARG,
               "ls_windower_set_horizon: w must not be NULL and G (%d) in [1, T=%d]: a window "
               "holds G-1 records after it, fewer than its own",
               G, w == NULL ? 0 : w->T);
  LS_RETURN_IF(w->next_id > 0, LS_ERR_STATE,
               "ls_windower_set_horizon: set it before the first record (%lld series held)",
               (long long)w->next_id);
  return G == w->G ? LS_OK : gap_new(w, G);
}

ls_err_t ls_windower_new_spec(ls_windower_t **out, const ls_record_spec_t *spec, int T) {
  LS_RETURN_IF(out == NULL || spec == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_new_spec: out and spec must not be NULL");
  *out = NULL;
  LS_RETURN_IF(T < 1 || T > LS_WINDOW_MAX, LS_ERR_INVALID_ARG,
               "windower: window T=%d is outside [1, %d]", T, LS_WINDOW_MAX);
  ls_decoder_t *dec = NULL;
  LS_FORWARD_IF_ERROR(ls_decoder_new(&dec, spec));
  ls_windower_t *const w = calloc(1, sizeof *w);
  if (w == NULL) {
    ls_decoder_destroy(dec);
    return ls_error_set(LS_ERR_NOMEM, "windower: out of memory");
  }
  int const F = ls_decoder_features(dec);
  w->dec = dec;
  w->F = F;
  w->T = T;
  w->max_abs = INFINITY;
  w->moved_from = -1;
  w->scratch = malloc((size_t)F * sizeof(float));
  w->ones = malloc((size_t)T * sizeof(float));
  w->partial_mask = malloc((size_t)T * sizeof(float));
  if (!w->scratch || !w->ones || !w->partial_mask || gap_new(w, 1) != LS_OK) {
    ls_windower_destroy(w);
    return ls_error_set(LS_ERR_NOMEM, "windower: out of memory (F=%d, T=%d)", F, T);
  }
  for (int t = 0; t < T; t++)
    w->ones[t] = 1.0f;
  *out = w;
  return LS_OK;
}

ls_err_t ls_windower_new(ls_windower_t **out, ls_format_t fmt, int F, int T) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "ls_windower_new: out is NULL");
  *out = NULL;
  LS_RETURN_IF(fmt != LS_FORMAT_F32 && fmt != LS_FORMAT_CSV, LS_ERR_INVALID_ARG,
               "ls_windower_new: format %s needs its fields (ls_windower_new_spec)",
               ls_format2str(fmt));
  ls_record_spec_t spec;
  ls_record_spec_init(&spec);
  spec.format = fmt;
  spec.features = F;
  return ls_windower_new_spec(out, &spec, T);
}

void ls_windower_destroy(ls_windower_t *w) {
  if (w == NULL) return;
  window_gone_free(w);
  table_free(&w->series);
  for (size_t i = 0; i < w->n_parts; i++)
    free(w->parts[i]);
  free(w->parts);
  free(w->scratch);
  free(w->ones);
  free(w->partial_mask);
  free(w->gap), free(w->gap_x), free(w->gap2), free(w->gap2_x);
  ls_decoder_destroy(w->dec);
  free(w);
}

const char *ls_windower_why(const ls_windower_t *w) {
  return w == NULL ? "" : w->why[0] ? w->why : ls_decoder_why(w->dec);
}

static ls_reject_t reject(ls_windower_t *w, ls_reject_t reason) {
  w->stats.rejected[reason]++;
  return reason;
}

ls_err_t ls_windower_set_max_abs(ls_windower_t *w, double max_abs) {
  LS_RETURN_IF(w == NULL || !(max_abs > 0.0), LS_ERR_INVALID_ARG,
               "ls_windower_set_max_abs: w must not be NULL and max_abs (%g) must be > 0", max_abs);
  w->max_abs = max_abs >= 3.4e38 ? INFINITY : (float)max_abs; /* float's largest, about */
  return LS_OK;
}

ls_err_t ls_windower_set_reset_gap(ls_windower_t *w, int64_t gap_ms) {
  LS_RETURN_IF(w == NULL || gap_ms < 0, LS_ERR_INVALID_ARG,
               "ls_windower_set_reset_gap: w must not be NULL and gap_ms (%lld) must be >= 0",
               (long long)gap_ms);
  w->reset_gap = gap_ms;
  return LS_OK;
}

/* LS_ERR_INVALID_ARG naming fn unless w is not NULL and the bounds a and b
 * (named so) are >= 0. */
static ls_err_t check_bounds(const ls_windower_t *w, const char *fn, const char *a_name, int64_t a,
                             const char *b_name, int64_t b) {
  LS_RETURN_IF(w == NULL || a < 0 || b < 0, LS_ERR_INVALID_ARG,
               "%s: w must not be NULL, %s (%lld) and %s (%lld) must be >= 0", fn, a_name,
               (long long)a, b_name, (long long)b);
  return LS_OK;
}

ls_err_t ls_windower_set_time_bounds(ls_windower_t *w, int64_t max_future_ms, int64_t late_ms) {
  LS_FORWARD_IF_ERROR(check_bounds(w, "ls_windower_set_time_bounds", "max_future_ms", max_future_ms,
                                   "late_ms", late_ms));
  w->max_future = max_future_ms;
  w->late_ms = late_ms;
  return LS_OK;
}

/* 1 when event time t lies more than the bound ahead of the wall clock. */
static int beyond_future(ls_windower_t *w, int64_t t) {
  if (w->max_future <= 0 || t < 0 || t - w->max_future <= w->clock_ms) return 0;
  w->clock_ms = base_wall_ms(); /* the last reading is behind t's bound: read it again */
  return t - w->max_future > w->clock_ms;
}

/* Rejects a record for its event time t (FUTURE or BACKWARDS against the
 * series' last time `last`), saying why in w->why. */
static ls_reject_t reject_time(ls_windower_t *w, ls_reject_t r, int64_t t, int64_t last) {
  if (r == LS_REJECT_FUTURE)
    snprintf(w->why, sizeof w->why,
             "its time %lld ms is more than max.future.ms=%lld ahead of this machine's clock "
             "(%lld)",
             (long long)t, (long long)w->max_future, (long long)w->clock_ms);
  else
    snprintf(w->why, sizeof w->why,
             "its time %lld ms is more than late.ms=%lld before the series' last record (%lld)",
             (long long)t, (long long)w->late_ms, (long long)last);
  return reject(w, r);
}

/* The magnitude check after a value decoded: RANGE beyond max_abs. */
static ls_reject_t check_range(const ls_windower_t *w, ls_reject_t r, const float *x) {
  if (r != LS_REJECT_NONE) return r;
  for (int f = 0; f < w->F; f++)
    if (fabsf(x[f]) > w->max_abs) return LS_REJECT_RANGE;
  return LS_REJECT_NONE;
}

int window_series_pending(const ls_windower_t *w, const series_t *s) {
  return s->count == w->T + w->G ? w->G : s->count;
}

/* Makes room for s's next row: the carry after a window, or, when its
 * event time t jumps more than the gap bound, a restart: what s holds goes
 * out (window_close: *closed, w->more), and its next window is reset. */
void window_next_row(ls_windower_t *w, series_t *s, int64_t t, const ls_window_t **closed) {
  w->more = NULL;
  if (w->reset_gap > 0 && t >= 0 && s->last_time >= 0 && t - s->last_time > w->reset_gap &&
      s->count > 0) {
    w->stats.buffered -= window_close(w, s, closed);
    s->reset = 1;
    w->stats.resets++;
    return;
  }
  window_carry(w, s);
}

/* Unlinks s from its partition's list by arrival. */
static void lru_unlink(series_t *s) {
  wpart_t *const p = s->part;
  if (s->lru_prev != NULL)
    s->lru_prev->lru_next = s->lru_next;
  else
    p->lru_head = s->lru_next;
  if (s->lru_next != NULL)
    s->lru_next->lru_prev = s->lru_prev;
  else
    p->lru_tail = s->lru_prev;
  s->lru_prev = s->lru_next = NULL;
}

/* Row s->count (its values written) accepted with its offset and time;
 * *complete: the window it completes, if it does. */
void window_accept_row(ls_windower_t *w, series_t *s, int64_t offset, int64_t t,
                       const ls_window_t **complete) {
  int const T = w->T, G = w->G;
  wpart_t *const p = s->part;
  s->times[s->count] = t >= 0 ? t : -1;
  s->offsets[s->count++] = offset;
  if (t >= 0) s->last_time = t;
  if (t > p->now) p->now = t;
  if (p->lru_tail != s) { /* it arrived last: to the tail */
    lru_unlink(s);
    s->lru_prev = p->lru_tail;
    p->lru_tail->lru_next = s;
    p->lru_tail = s;
  }
  w->stats.accepted++;
  w->stats.buffered++;
  if (s->count == 1) window_list_insert(w, s); /* it holds a record again */
  if (s->count == T + G) {
    window_list_unlink(s); /* its low offset is now row T's: to the tail */
    window_list_insert(w, s);
    w->stats.windows++;
    w->stats.buffered -= T; /* rows T.. stay, as the next window's first inputs */
    *complete = window_view(s, &w->view, s->x, s->offsets, s->times, T, w->F, T, G - 1, w->ones);
  }
}

/* Takes series s out of its partition's lists and the table (the last
 * series takes its index); its memory stays. */
static void series_unlist(ls_windower_t *w, series_t *s) {
  if (s->count > 0) window_list_unlink(s);
  lru_unlink(s);
  s->part->held--;
  if (w->last == s) w->last = NULL;
  table_t *const t = &w->series;
  size_t const last = t->map.n - 1;
  int64_t const idx = base_keymap_remove(&t->map, s->hash, s->k.key, s->k.key_len);
  if (idx >= 0 && (size_t)idx != last) t->items[idx] = t->items[last];
}

/* Forgets series s: the records it holds (counted as evicted when
 * `counted`), its place in the lists and in the table. */
void window_series_forget(ls_windower_t *w, series_t *s, int counted) {
  int const n = s->count > 0 ? window_series_pending(w, s) : 0;
  series_unlist(w, s);
  w->stats.buffered -= n;
  if (counted) w->stats.evicted++, w->stats.evicted_records += n;
  free(s);
}

void window_series_evict(ls_windower_t *w, series_t *s, int counted) {
  int const T = w->T;
  if (s->count <= T + 1 || s->count >= T + w->G) { /* no whole window waits */
    window_series_forget(w, s, counted);
    return;
  }
  series_unlist(w, s);
  w->stats.buffered -= s->count;
  /* Its records from its last target on are no window's inputs. */
  if (counted) w->stats.evicted++, w->stats.evicted_records += s->count - T;
  s->next = NULL;
  if (w->gone_tail != NULL)
    w->gone_tail->next = s;
  else
    w->gone = s;
  w->gone_tail = s;
  if (w->gone_next == NULL) w->gone_next = s;
}

void window_gone_free(ls_windower_t *w) {
  while (w->gone != NULL) {
    series_t *const s = w->gone;
    w->gone = s->next;
    free(s);
  }
  w->gone_next = w->gone_tail = NULL;
}

/* Evicts, on s's partition, the series idle for longer than idle_ms (by
 * event time, against the partition's newest) and the least recently
 * active beyond max_held, s (just accepted) aside; in arrival order. */
static void evict_after(ls_windower_t *w, series_t *s) {
  wpart_t *const p = s->part;
  while (w->idle_ms > 0 && p->lru_head != s && p->lru_head->last_time >= 0 &&
         p->now - p->lru_head->last_time > w->idle_ms)
    window_series_evict(w, p->lru_head, 1);
  while (w->max_held > 0 && p->held > w->max_held && p->lru_head != s)
    window_series_evict(w, p->lru_head, 1);
}

ls_err_t window_series_move(ls_windower_t *w, series_t **s, uint64_t hash, const void *key,
                            size_t key_len, int32_t partition, int64_t t,
                            const ls_window_t **closed) {
  series_t *const old = *s;
  /* Copied to the gap buffers: the old series goes before the windows are taken. */
  if (old->count > 0) w->stats.buffered -= window_close(w, old, closed);
  int64_t const index = old->index, last = old->last_time;
  int const gap = w->reset_gap > 0 && t >= 0 && last >= 0 && t - last > w->reset_gap;
  int const reset = old->reset || gap;
  w->moved_from = old->part->id;
  window_series_forget(w, old, 0);
  LS_FORWARD_IF_ERROR(window_series_add(w, hash, key, key_len, partition, w->scratch, index, s));
  (*s)->last_time = last;
  (*s)->reset = reset;
  if (*closed != NULL) w->view.key = (*s)->k.key; /* the key's, as the old series' was */
  if (w->more != NULL) w->view2.key = (*s)->k.key;
  w->stats.series--; /* the same series, on */
  w->stats.moved++;
  w->stats.resets += gap;
  return LS_OK;
}

int64_t window_series_id(const ls_windower_t *w, const void *key, size_t key_len) {
  const series_t *const s =
      (const series_t *)window_table_find(&w->series, base_key_hash(key, key_len), key, key_len);
  return s != NULL ? s->id : -1;
}

ls_err_t ls_windower_set_eviction(ls_windower_t *w, int64_t idle_ms, int64_t max_held) {
  LS_FORWARD_IF_ERROR(
      check_bounds(w, "ls_windower_set_eviction", "idle_ms", idle_ms, "max_held", max_held));
  w->idle_ms = idle_ms;
  w->max_held = max_held;
  return LS_OK;
}

/* 1 for the reasons of a value that does not decode (its key may be
 * unknown then: json, avro). */
static int undecoded(ls_reject_t r) {
  return r == LS_REJECT_SIZE || r == LS_REJECT_PARSE || r == LS_REJECT_FIELD ||
         r == LS_REJECT_TYPE || r == LS_REJECT_TIME;
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
  w->more = NULL;
  window_gone_free(w);
  w->last = NULL;
  w->moved_from = -1;
  w->decoded = LS_REJECT_NONE;
  w->why[0] = '\0';
  w->stats.records++;
  /* The value first: for json and avro it holds the key and the time. */
  ls_decoded_t got;
  w->decoded = ls_decoder_decode(w->dec, rec, w->scratch, &got);
  ls_reject_t const r = check_range(w, w->decoded, w->scratch);
  if (got.key == NULL && undecoded(r)) return reject(w, r);
  if (got.key_len == 0 || got.key_len > LS_KEY_MAX) return reject(w, LS_REJECT_KEY);
  int64_t t = got.time;
  uint64_t const hash = base_key_hash(got.key, got.key_len);
  series_t *s = (series_t *)window_table_find(&w->series, hash, got.key, got.key_len);
  int const F = w->F;
  if (s != NULL) {
    if (r != LS_REJECT_NONE) return reject(w, r);
    if (beyond_future(w, t)) return reject_time(w, LS_REJECT_FUTURE, t, s->last_time);
    if (t >= 0 && t < s->last_time) {
      if (s->last_time - t > w->late_ms)
        return reject_time(w, LS_REJECT_BACKWARDS, t, s->last_time);
      t = s->last_time; /* late within the bound: held at the series' last */
      w->stats.late++;
    }
    if (s->part->id != rec->partition) { /* the key moved (the topic's partitions changed) */
      if (window_series_move(w, &s, hash, got.key, got.key_len, rec->partition, t, complete) !=
          LS_OK) {
        w->stats.records--;
        *complete = NULL;
        return LS_REJECT__COUNT;
      }
    } else {
      window_next_row(w, s, t, complete);
      memcpy(s->x + (size_t)s->count * F, w->scratch, (size_t)F * sizeof(float));
    }
  } else {
    if (r != LS_REJECT_NONE) return reject(w, r);
    if (beyond_future(w, t)) return reject_time(w, LS_REJECT_FUTURE, t, -1);
    ls_err_t const err =
        window_series_add(w, hash, got.key, got.key_len, rec->partition, w->scratch, 0, &s);
    if (err != LS_OK) {
      w->stats.records--;
      return LS_REJECT__COUNT;
    }
  }
  const ls_window_t *done = NULL; /* (a record that closes a window after a gap completes none) */
  window_accept_row(w, s, rec->offset, t, &done);
  if (done != NULL) *complete = done;
  w->last = s; /* (eviction below spares s) */
  w->last_time = t;
  if (w->idle_ms > 0 || w->max_held > 0) evict_after(w, s);
  if (*complete == NULL) ls_windower_more(w, complete); /* an evicted series' window */
  return LS_REJECT_NONE;
}

ls_err_t ls_windower_last(const ls_windower_t *w, ls_windower_record_t *out) {
  LS_RETURN_IF(w == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_last: w and out must not be NULL");
  const series_t *const s = w->last;
  if (s == NULL) {
    *out = (ls_windower_record_t){-1, NULL, 0, NULL, -1};
    return LS_OK;
  }
  /* The record is the last row filled: count - 1 (the carry happens on the next push). */
  *out = (ls_windower_record_t){s->id, s->k.key, s->k.key_len,
                                s->x + (size_t)(s->count - 1) * (size_t)w->F, w->last_time};
  return LS_OK;
}

ls_err_t ls_windower_flush_next(ls_windower_t *w, int32_t partition, const ls_window_t **win) {
  LS_RETURN_IF(w == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_flush_next: w and win must not be NULL");
  *win = NULL;
  window_gone_free(w);
  wpart_t *const part = window_part_find(w, partition);
  int const T = w->T;
  while (part != NULL && part->head != NULL) {
    series_t *const s = part->head;
    window_list_unlink(s);
    window_carry(w, s);
    int const n = s->count;
    if (n > T + 1) { /* a whole window, its records after it cut short; then the rest */
      *win = window_held_view(w, s, 0, n, 1);
      window_shift_rows(w, s, T, n - T);
      w->stats.buffered -= T;
      window_list_insert(w, s);
      return LS_OK;
    }
    w->stats.buffered -= n;
    s->count = 0;
    if (n < 2) continue; /* a lone record: no target to train on */
    *win = window_held_view(w, s, 0, n, 0);
    return LS_OK;
  }
  return LS_OK;
}

ls_err_t ls_windower_stats(const ls_windower_t *w, ls_window_stats_t *out) {
  LS_RETURN_IF(w == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_stats: w and out must not be NULL");
  *out = w->stats;
  return LS_OK;
}
