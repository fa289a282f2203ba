/*
 * What a snapshot keeps of a partition (include/lstream/ingest.h,
 * ls_ingest_inflight): its next unread offset and, per series, every
 * record in flight: the rows of its windows queued or handed out and not
 * released, then those its windower buffer holds, one record shared by
 * consecutive windows kept once. Under `hold` and `lock`
 * (ingest/consumer_internal.h), so the consumer thread adds nothing
 * meanwhile.
 */
#include <stdlib.h>
#include <string.h>

#include "consumer_internal.h"
#include "window.h" /* window_series_id */

/* A series' rows, gathered. */
typedef struct gather_s {
  int F;
  int64_t *offsets, *times; /* [cap] */
  float *x;                 /* [cap, F] */
  int n, cap;
} gather_t;

static ls_err_t gather_reserve(gather_t *g, int more) {
  if (g->n + more <= g->cap) return LS_OK;
  int cap = g->cap ? g->cap : 64;
  while (cap < g->n + more)
    cap *= 2;
  int64_t *const o = realloc(g->offsets, (size_t)cap * sizeof *o);
  if (o != NULL) g->offsets = o;
  int64_t *const t = realloc(g->times, (size_t)cap * sizeof *t);
  if (t != NULL) g->times = t;
  float *const x = realloc(g->x, (size_t)cap * (size_t)g->F * sizeof *x);
  if (x != NULL) g->x = x;
  LS_RETURN_IF(!o || !t || !x, LS_ERR_NOMEM, "no memory for %d records in flight", cap);
  g->cap = cap;
  return LS_OK;
}

/* Appends rows [n] (offsets ascending), the first dropped when it is the
 * last one held (the record consecutive windows share). */
static ls_err_t gather_add(gather_t *g, const int64_t *offsets, const int64_t *times,
                           const float *x, int n) {
  LS_FORWARD_IF_ERROR(gather_reserve(g, n));
  for (int r = 0; r < n; r++) {
    if (g->n > 0 && offsets[r] <= g->offsets[g->n - 1]) continue;
    g->offsets[g->n] = offsets[r], g->times[g->n] = times[r];
    memcpy(g->x + (size_t)g->n * g->F, x + (size_t)r * g->F, (size_t)g->F * sizeof(float));
    g->n++;
  }
  return LS_OK;
}

static int key_cmp(const ls_window_t *a, const char *key, size_t len) {
  size_t const n = a->key_len < len ? a->key_len : len;
  int const c = memcmp(a->key, key, n);
  return c != 0 ? c : (a->key_len > len) - (a->key_len < len);
}

/* By key, then series (a key evicted and back is a new series: its
 * incarnations apart, the earlier first), then window index. */
static int by_key_index(const void *pa, const void *pb) {
  const ls_window_t *const a = *(const ls_window_t *const *)pa;
  const ls_window_t *const b = *(const ls_window_t *const *)pb;
  int const c = key_cmp(a, b->key, b->key_len);
  if (c != 0) return c;
  if (a->series != b->series) return a->series < b->series ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

/* The partition's windows in flight (queued, or handed out and not
 * released: its own lists, counted under lock), sorted by key and index,
 * into *out [*n]. */
static ls_err_t windows_of(const part_t *part, const ls_window_t ***out, size_t *n) {
  size_t const count = (size_t)atomic_load(&part->n) + (size_t)part->n_out;
  size_t k = 0;
  const ls_window_t **const wins = malloc((count > 0 ? count : 1) * sizeof *wins);
  LS_RETURN_IF(wins == NULL, LS_ERR_NOMEM, "no memory for %zu windows in flight", count);
  for (const window_node_t *node = part->head; node != NULL && k < count; node = node->pnext)
    wins[k++] = &node->win;
  for (const window_node_t *node = part->out; node != NULL && k < count; node = node->next)
    wins[k++] = &node->win;
  qsort(wins, k, sizeof *wins, by_key_index);
  *out = wins;
  *n = k;
  return LS_OK;
}

/* The series whose windows are wins [n] (one incarnation of a key, in
 * order): their rows, then what the windower holds of it when it is the
 * key's series there (an earlier incarnation, evicted, has nothing held),
 * through fn. */
static ls_err_t emit_series(ls_ingest_t *ing, const ls_window_t *const *wins, size_t n, gather_t *g,
                            ls_inflight_fn fn, void *opaque) {
  g->n = 0;
  int64_t last_time = -1;
  for (size_t i = 0; i < n; i++) {
    const ls_window_t *const w = wins[i];
    LS_FORWARD_IF_ERROR(gather_add(g, w->offsets, w->times, w->x, w->n_targets + 1));
    for (int r = 0; r <= w->n_targets; r++)
      last_time = w->times[r] > last_time ? w->times[r] : last_time;
  }
  ls_inflight_t held;
  int found = 0;
  if (window_series_id(ing->w, wins[0]->key, wins[0]->key_len) == wins[0]->series)
    LS_FORWARD_IF_ERROR(
        ls_windower_pending_of(ing->w, wins[0]->key, wins[0]->key_len, &held, &found));
  if (found) {
    LS_FORWARD_IF_ERROR(gather_add(g, held.offsets, held.times, held.x, held.rows));
    last_time = held.last_time;
  }
  ls_inflight_t const s = {wins[0]->key,
                           wins[0]->key_len,
                           wins[0]->partition,
                           wins[0]->index,
                           last_time,
                           wins[0]->reset,
                           g->n,
                           g->offsets,
                           g->times,
                           g->x};
  return fn(opaque, &s);
}

/* A windower series with no window in flight passes through as it is. */
typedef struct pass_s {
  const ls_windower_t *w;
  const ls_window_t *const *wins;
  size_t n;
  ls_inflight_fn fn;
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
  return p->fn(p->opaque, s);
}

ls_err_t ls_ingest_inflight(ls_ingest_t *ing, int32_t partition, int64_t *next,
                            ls_ingest_mark_t *last, ls_inflight_fn fn, void *opaque) {
  LS_RETURN_IF(ing == NULL || next == NULL || fn == NULL, LS_ERR_INVALID_ARG,
               "ls_ingest_inflight: ing, next and fn must not be NULL");
  part_t *part;
  LS_FORWARD_IF_ERROR(consumer_our_part(ing, partition, "ls_ingest_inflight", &part));
  pthread_mutex_lock(&ing->hold);
  pthread_mutex_lock(&ing->lock);
  const ls_window_t **wins = NULL;
  size_t n = 0;
  gather_t g = {.F = ing->s.features};
  ls_err_t err = windows_of(part, &wins, &n);
  for (size_t i = 0, j; err == LS_OK && i < n; i = j) {
    for (j = i + 1; j < n && wins[j]->series == wins[i]->series &&
                    key_cmp(wins[j], wins[i]->key, wins[i]->key_len) == 0;
         j++)
      ;
    err = emit_series(ing, wins + i, j - i, &g, fn, opaque);
  }
  pass_t pass = {ing->w, wins, n, fn, opaque};
  if (err == LS_OK) err = ls_windower_each_pending(ing->w, partition, pass_pending, &pass);
  *next = part->next;
  if (last != NULL) *last = part->mark;
  pthread_mutex_unlock(&ing->lock);
  pthread_mutex_unlock(&ing->hold);
  free(wins), free(g.offsets), free(g.times), free(g.x);
  return err;
}
