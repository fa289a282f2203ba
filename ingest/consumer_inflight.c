/*
 * What a snapshot keeps of a partition (include/lstream/ingest.h,
 * ls_ingest_inflight_parts, ls_ingest_inflight): its next unread offset
 * and, per series, every record in flight: its windows queued or handed out
 * and not released, then the rows its windower buffer holds; put together
 * (ls_ingest_inflight), one record shared by consecutive parts kept once.
 * Under `hold` and `lock` (ingest/consumer_internal.h), so the consumer
 * thread adds nothing meanwhile.
 */
#include <stdlib.h>
#include <string.h>

#include "base/digest.h" /* base_mix64: the series ids' hash */
#include "base/rows.h"
#include "consumer_internal.h"
#include "window.h" /* window_series_id */

static int key_cmp(const ls_window_t *a, const char *key, size_t len) {
  size_t const n = a->key_len < len ? a->key_len : len;
  int const c = memcmp(a->key, key, n);
  return c != 0 ? c : (a->key_len > len) - (a->key_len < len);
}

/* A series' windows among a partition's in flight (windows_of). */
typedef struct bucket_s {
  const ls_window_t *first; /* one of its windows: its key and id */
  size_t count, at;         /* its windows; where they go in the grouped order */
} bucket_t;

/* By key, then series id (a key evicted and back is a new series: its
 * incarnations apart, the earlier first). */
static int by_key_series(const void *pa, const void *pb) {
  const ls_window_t *const a = ((const bucket_t *)pa)->first;
  const ls_window_t *const b = ((const bucket_t *)pb)->first;
  int const c = key_cmp(a, b->key, b->key_len);
  if (c != 0) return c;
  return (a->series > b->series) - (a->series < b->series);
}

/* The partition's windows in flight (queued, or handed out and not
 * released: its own lists, counted under lock) into *out [*n], grouped by
 * series, the series by key then id, each series' windows by index: what a
 * sort by (key, series, index) gives, keys compared per series, not per
 * window (a replay's look-ahead holds thousands of windows a partition). */
static ls_err_t windows_of(const part_t *part, const ls_window_t ***out, size_t *n) {
  size_t const count = (size_t)atomic_load(&part->n) + (size_t)part->n_out;
  size_t slots = 16;
  while (slots < 2 * count)
    slots *= 2;
  const ls_window_t **const all = malloc((count > 0 ? count : 1) * sizeof *all);
  const ls_window_t **const wins = malloc((count > 0 ? count : 1) * sizeof *wins);
  uint32_t *const of = malloc((count > 0 ? count : 1) * sizeof *of); /* each one's bucket */
  uint32_t *const slot = malloc(slots * sizeof *slot);               /* bucket + 1; 0 free */
  bucket_t *const buckets = malloc((count > 0 ? count : 1) * sizeof *buckets);
  if (!all || !wins || !of || !slot || !buckets) {
    free(all), free(wins), free(of), free(slot), free(buckets);
    return ls_error_set(LS_ERR_NOMEM, "no memory for %zu windows in flight", count);
  }
  /* In seq order: those handed out (taken from the queue's head, so before
   * any queued; their list is newest first) then the queue. */
  size_t const n_out = (size_t)part->n_out < count ? (size_t)part->n_out : count;
  size_t k = 0, nb = 0;
  for (const window_node_t *node = part->out; node != NULL && k < n_out; node = node->next)
    all[n_out - 1 - k++] = &node->win;
  for (const window_node_t *node = part->head; node != NULL && k < count; node = node->pnext)
    all[k++] = &node->win;
  memset(slot, 0, slots * sizeof *slot);
  for (size_t i = 0; i < k; i++) { /* its series' bucket: open addressing on the id */
    int64_t const id = all[i]->series;
    size_t h = (size_t)base_mix64((uint64_t)id) & (slots - 1);
    while (slot[h] != 0 && buckets[slot[h] - 1].first->series != id)
      h = (h + 1) & (slots - 1);
    if (slot[h] == 0) buckets[nb] = (bucket_t){all[i], 0, 0}, slot[h] = (uint32_t)++nb;
    of[i] = slot[h] - 1;
    buckets[of[i]].count++;
  }
  /* The buckets in order; then each window into its series' place. */
  bucket_t *const sorted = malloc((nb > 0 ? nb : 1) * sizeof *sorted);
  ls_err_t err =
      sorted != NULL ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for %zu series", nb);
  if (err == LS_OK) {
    for (size_t b = 0; b < nb; b++)
      sorted[b] = buckets[b], sorted[b].at = b; /* (at: its bucket, for now) */
    qsort(sorted, nb, sizeof *sorted, by_key_series);
    size_t at = 0;
    for (size_t b = 0; b < nb; b++)
      buckets[sorted[b].at].at = at, at += sorted[b].count;
    for (size_t i = 0; i < k; i++)
      wins[buckets[of[i]].at++] = all[i];
    for (size_t b = 0; b < nb; b++) { /* by index (seq order is, but check) */
      const ls_window_t **const w = wins + buckets[sorted[b].at].at - sorted[b].count;
      for (size_t i = 1; i < sorted[b].count; i++)
        for (size_t j = i; j > 0 && w[j - 1]->index > w[j]->index; j--) {
          const ls_window_t *const t = w[j];
          w[j] = w[j - 1], w[j - 1] = t;
        }
    }
  }
  free(all), free(of), free(slot), free(buckets), free(sorted);
  if (err != LS_OK) {
    free(wins);
    return err;
  }
  *out = wins;
  *n = k;
  return LS_OK;
}

/* The windows of one series in flight, as parts (room for n_cap). */
typedef struct parts_buf_s {
  ls_inflight_window_t *w;
  size_t cap;
} parts_buf_t;

/* The series whose windows are wins [n] (one incarnation of a key, in
 * order): its windows, then what the windower holds of it when it is the
 * key's series there (an earlier incarnation, evicted, has nothing held),
 * through fn. */
static ls_err_t emit_series(ls_ingest_t *ing, const ls_window_t *const *wins, size_t n,
                            parts_buf_t *buf, ls_inflight_parts_fn fn, void *opaque) {
  if (n > buf->cap) {
    ls_inflight_window_t *const w = realloc(buf->w, n * sizeof *w);
    LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "no memory for %zu windows of a series in flight", n);
    buf->w = w, buf->cap = n;
  }
  for (size_t i = 0; i < n; i++) {
    const ls_window_t *const w = wins[i];
    /* (win is a window_node_t's first member) */
    buf->w[i] = (ls_inflight_window_t){((const window_node_t *)w)->seq, w->n_targets + 1,
                                       w->offsets, w->times, w->x};
  }
  ls_inflight_t held = {.rows = 0};
  int found = 0;
  if (window_series_id(ing->w, wins[0]->key, wins[0]->key_len) == wins[0]->series)
    LS_FORWARD_IF_ERROR(
        ls_windower_pending_of(ing->w, wins[0]->key, wins[0]->key_len, &held, &found));
  int64_t last_time = held.last_time;
  if (!found) { /* the latest event time of the windows' rows */
    last_time = -1, held = (ls_inflight_t){.rows = 0};
    for (size_t i = 0; i < n; i++)
      for (int r = 0; r <= wins[i]->n_targets; r++)
        last_time = wins[i]->times[r] > last_time ? wins[i]->times[r] : last_time;
  }
  ls_inflight_parts_t const s = {{wins[0]->key, wins[0]->key_len, wins[0]->partition,
                                  wins[0]->index, last_time, wins[0]->reset, held.rows,
                                  held.offsets, held.times, held.x},
                                 (int)n,
                                 buf->w};
  return fn(opaque, &s);
}

/* A windower series with no window in flight passes through as it is. */
typedef struct pass_s {
  const ls_windower_t *w;
  const ls_window_t *const *wins;
  size_t n;
  ls_inflight_parts_fn fn;
  void *opaque;
} pass_t;

static ls_err_t pass_pending(void *opaque, const ls_inflight_t *s) {
  const pass_t *const p = opaque;
  int64_t const id = window_series_id(p->w, s->key, s->key_len);
  size_t lo = 0, hi = p->n;
  while (lo < hi) { /* the key's first window in wins, by (key, series, index) */
    size_t const mid = lo + (hi - lo) / 2;
    int const c = key_cmp(p->wins[mid], s->key, s->key_len);
    if (c < 0 || (c == 0 && p->wins[mid]->series < id))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < p->n && key_cmp(p->wins[lo], s->key, s->key_len) == 0 && p->wins[lo]->series == id)
    return LS_OK; /* emitted with its windows */
  ls_inflight_parts_t const parts = {*s, 0, NULL};
  return p->fn(p->opaque, &parts);
}

ls_err_t ls_ingest_inflight_parts(ls_ingest_t *ing, int32_t partition, int64_t *next,
                                  ls_ingest_mark_t *last, ls_inflight_parts_fn fn, void *opaque) {
  LS_RETURN_IF(ing == NULL || next == NULL || fn == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_inflight: ing, next and fn must not be NULL");
  part_t *part;
  LS_FORWARD_IF_ERROR(consumer_our_part(ing, partition, "ls_ingest_inflight", &part));
  pthread_mutex_lock(&ing->hold);
  pthread_mutex_lock(&ing->lock);
  const ls_window_t **wins = NULL;
  size_t n = 0;
  parts_buf_t buf = {NULL, 0};
  ls_err_t err = windows_of(part, &wins, &n);
  for (size_t i = 0, j; err == LS_OK && i < n; i = j) {
    for (j = i + 1; j < n && wins[j]->series == wins[i]->series &&
                    key_cmp(wins[j], wins[i]->key, wins[i]->key_len) == 0;
         j++)
      ;
    err = emit_series(ing, wins + i, j - i, &buf, fn, opaque);
  }
  pass_t pass = {ing->w, wins, n, fn, opaque};
  if (err == LS_OK) err = ls_windower_each_pending(ing->w, partition, pass_pending, &pass);
  *next = part->next;
  if (last != NULL) *last = part->mark;
  pthread_mutex_unlock(&ing->lock);
  pthread_mutex_unlock(&ing->hold);
  free(wins), free(buf.w);
  return err;
}

/* ls_ingest_inflight's: each series' parts put together for fn. */
typedef struct gather_s {
  base_rows_t rows;
  ls_inflight_fn fn;
  void *opaque;
} gather_t;

static ls_err_t gather_series(void *opaque, const ls_inflight_parts_t *s) {
  gather_t *const g = opaque;
  g->rows.n = 0;
  for (int i = 0; i < s->n_windows; i++) {
    const ls_inflight_window_t *const w = &s->windows[i];
    LS_FORWARD_IF_ERROR(base_rows_append(&g->rows, w->offsets, w->times, w->x, (size_t)w->rows));
  }
  if (s->n_windows == 0) return g->fn(g->opaque, &s->held); /* as the windower holds it */
  LS_FORWARD_IF_ERROR(
      base_rows_append(&g->rows, s->held.offsets, s->held.times, s->held.x, (size_t)s->held.rows));
  ls_inflight_t in = s->held;
  in.rows = (int)g->rows.n;
  in.offsets = g->rows.offsets, in.times = g->rows.times, in.x = g->rows.x;
  return g->fn(g->opaque, &in);
}

ls_err_t ls_ingest_inflight(ls_ingest_t *ing, int32_t partition, int64_t *next,
                            ls_ingest_mark_t *last, ls_inflight_fn fn, void *opaque) {
  LS_RETURN_IF(ing == NULL || next == NULL || fn == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_inflight: ing, next and fn must not be NULL");
  gather_t g = {{.F = ing->s.features}, fn, opaque};
  ls_err_t const err = ls_ingest_inflight_parts(ing, partition, next, last, gather_series, &g);
  base_rows_free(&g.rows);
  return err;
}
