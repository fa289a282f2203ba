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

/* A partition's windows in flight grouped by series (in_flight): the
 * series, each its windows' entries in the ring, in seq order (which is
 * its windows' index order), the series by key then id (a key evicted and
 * back is a new series: its incarnations apart, the earlier first); and a
 * map of the series' ids to them. */
typedef struct flying_s {
  const window_node_t *first; /* its first window: its key, partition, id */
  size_t count, at;           /* its windows, where they start in `order` */
} flying_t;

typedef struct grouped_s {
  flying_t *series; /* [n_series], sorted */
  size_t n_series;
  const flight_t **order; /* [n]: the windows, series by series */
  size_t n;
  uint32_t *slot; /* [mask + 1]: 1 + the series' place in `series` by id hash; 0 free */
  size_t mask;
} grouped_t;

static void grouped_free(grouped_t *g) {
  free(g->series), free(g->order), free(g->slot);
  *g = (grouped_t){0};
}

static int key_cmp(const window_node_t *a, const window_node_t *b) {
  size_t const n = a->win.key_len < b->win.key_len ? a->win.key_len : b->win.key_len;
  int const c = memcmp(a->win.key, b->win.key, n);
  return c != 0 ? c : (a->win.key_len > b->win.key_len) - (a->win.key_len < b->win.key_len);
}

static int by_key_series(const void *pa, const void *pb) {
  const window_node_t *const a = ((const flying_t *)pa)->first;
  const window_node_t *const b = ((const flying_t *)pb)->first;
  int const c = key_cmp(a, b);
  if (c != 0) return c;
  return (a->win.series > b->win.series) - (a->win.series < b->win.series);
}

/* The slot of series id in g (its place, or the free one it would take). */
static size_t slot_of(const grouped_t *g, const flying_t *series, int64_t id) {
  size_t h = (size_t)base_mix64((uint64_t)id) & g->mask;
  while (g->slot[h] != 0 && series[g->slot[h] - 1].first->win.series != id)
    h = (h + 1) & g->mask;
  return h;
}

/* The place in g->series of series id, or -1. */
static int64_t series_of(const grouped_t *g, int64_t id) {
  size_t const h = slot_of(g, g->series, id);
  return g->slot[h] != 0 ? (int64_t)g->slot[h] - 1 : -1;
}

/* The windows in flight of part, grouped: read from its ring (in seq order,
 * released ones left out), not from the windows, so that a look-ahead of
 * thousands of windows is read as a few contiguous arrays. */
static ls_err_t in_flight(const part_t *part, grouped_t *g) {
  *g = (grouped_t){0};
  size_t const count = (size_t)(part->seq - part->flight_head),
               cmask = (size_t)part->cap_flight - 1;
  size_t slots = 16;
  while (slots < 2 * count)
    slots *= 2;
  flying_t *const ser = malloc((count > 0 ? count : 1) * sizeof *ser);
  uint32_t *const of = malloc((count > 0 ? count : 1) * sizeof *of); /* each one's series */
  g->order = malloc((count > 0 ? count : 1) * sizeof *g->order);
  g->slot = calloc(slots, sizeof *g->slot);
  g->series = malloc((count > 0 ? count : 1) * sizeof *g->series);
  g->mask = slots - 1;
  if (!ser || !of || !g->order || !g->slot || !g->series) {
    free(ser), free(of), grouped_free(g);
    return ls_error_set(LS_ERR_NOMEM, "no memory for %zu windows in flight", count);
  }
  size_t ns = 0, k = 0;
  for (int64_t seq = part->flight_head; seq < part->seq; seq++) {
    const flight_t *const f = &part->flight[(size_t)seq & cmask];
    if (f->node == NULL) continue; /* released */
    size_t const h = slot_of(g, ser, f->series);
    if (g->slot[h] == 0) ser[ns] = (flying_t){f->node, 0, 0}, g->slot[h] = (uint32_t)++ns;
    of[k++] = g->slot[h] - 1;
    ser[g->slot[h] - 1].count++;
  }
  /* The series in order (their old places kept in `at` for now), then the
   * map onto their new places, then each window into its series' run. */
  memcpy(g->series, ser, ns * sizeof *ser);
  for (size_t i = 0; i < ns; i++)
    g->series[i].at = i;
  qsort(g->series, ns, sizeof *g->series, by_key_series);
  size_t at = 0;
  for (size_t i = 0; i < ns; i++) {
    size_t const old = g->series[i].at;
    ser[old].at = at;   /* where its windows go */
    ser[old].count = i; /* its new place */
    g->series[i].at = at, at += g->series[i].count;
  }
  k = 0;
  for (int64_t seq = part->flight_head; seq < part->seq; seq++) {
    const flight_t *const f = &part->flight[(size_t)seq & cmask];
    if (f->node != NULL) g->order[ser[of[k++]].at++] = f;
  }
  for (size_t h = 0; h <= g->mask; h++) /* the map onto the sorted places */
    if (g->slot[h] != 0) g->slot[h] = (uint32_t)ser[g->slot[h] - 1].count + 1;
  g->n_series = ns, g->n = k;
  free(ser), free(of);
  return LS_OK;
}

/* The windows of one series in flight, as parts (room for n_cap). */
typedef struct parts_buf_s {
  ls_inflight_window_t *w;
  size_t cap;
} parts_buf_t;

/* Series s of g (one incarnation of a key): its windows, in order, then
 * what the windower holds of it when it is the key's series there (an
 * earlier incarnation, evicted, has nothing held, and is marked evicted),
 * through fn. A window's
 * rows are given by their addresses in its node, not read here: a snapshot
 * that wrote them before never reads them. */
static ls_err_t emit_series(ls_ingest_t *ing, const grouped_t *g, const flying_t *s,
                            parts_buf_t *buf, ls_inflight_parts_fn fn, void *opaque) {
  size_t const n = s->count;
  if (n > buf->cap) {
    ls_inflight_window_t *const w = realloc(buf->w, n * sizeof *w);
    LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "no memory for %zu windows of a series in flight", n);
    buf->w = w, buf->cap = n;
  }
  const flight_t *const *const f = g->order + s->at;
  for (size_t i = 0; i < n; i++) {
    int64_t *offsets, *times;
    float *x;
    consumer_node_rows(ing, (window_node_t *)f[i]->node, &offsets, &times, &x);
    buf->w[i] = (ls_inflight_window_t){f[i]->seq, f[i]->rows, offsets, times, x};
  }
  const ls_window_t *const first = &s->first->win;
  ls_inflight_t held = {.rows = 0};
  int found = 0, evicted = 0;
  LS_FORWARD_IF_ERROR(ls_windower_pending_of(ing->w, first->key, first->key_len, &held, &found));
  if (window_series_id(ing->w, first->key, first->key_len) != first->series) {
    /* An earlier incarnation: evicted, unless its key went on on another
     * partition (moved: a restore knows it by its later entry there), or
     * may have (its key gone too, its last window partial, as a move
     * closes one: left as it was). */
    const ls_window_t *const last = &((const window_node_t *)f[n - 1]->node)->win;
    evicted = found ? held.partition == first->partition : last->n_targets == last->T;
    found = 0;
  }
  int64_t last_time = held.last_time;
  if (!found) { /* the latest event time of the windows' rows */
    last_time = -1, held = (ls_inflight_t){.rows = 0};
    for (size_t i = 0; i < n; i++)
      for (int r = 0; r < buf->w[i].rows; r++)
        last_time = buf->w[i].times[r] > last_time ? buf->w[i].times[r] : last_time;
  }
  ls_inflight_parts_t const parts = {{first->key, first->key_len, first->partition, f[0]->index,
                                      last_time, f[0]->reset, held.rows, held.offsets, held.times,
                                      held.x, evicted},
                                     (int)n,
                                     buf->w};
  return fn(opaque, &parts);
}

/* A windower series with no window in flight passes through as it is. */
typedef struct pass_s {
  const ls_windower_t *w;
  const grouped_t *g;
  ls_inflight_parts_fn fn;
  void *opaque;
} pass_t;

static ls_err_t pass_pending(void *opaque, const ls_inflight_t *s) {
  const pass_t *const p = opaque;
  if (series_of(p->g, window_series_id(p->w, s->key, s->key_len)) >= 0)
    return LS_OK; /* emitted with its windows */
  ls_inflight_parts_t const parts = {*s, 0, NULL};
  return p->fn(p->opaque, &parts);
}

/* What a snapshot keeps of one partition (the caller holds hold and lock). */
static ls_err_t partition_parts(ls_ingest_t *ing, part_t *part, parts_buf_t *buf,
                                ls_inflight_parts_fn fn, void *opaque) {
  grouped_t g;
  ls_err_t err = in_flight(part, &g);
  for (size_t i = 0; err == LS_OK && i < g.n_series; i++)
    err = emit_series(ing, &g, &g.series[i], buf, fn, opaque);
  pass_t pass = {ing->w, &g, fn, opaque};
  if (err == LS_OK) err = ls_windower_each_pending(ing->w, part->id, pass_pending, &pass);
  grouped_free(&g);
  return err;
}

ls_err_t ls_ingest_inflight_parts(ls_ingest_t *ing, int n, const int32_t *partitions, int64_t *next,
                                  ls_ingest_mark_t *last, ls_inflight_parts_fn fn, void *opaque) {
  LS_RETURN_IF(ing == NULL || n < 0 || (n > 0 && (partitions == NULL || next == NULL)) ||
                   fn == NULL,
               LS_ERR_INVALID_ARG,
               "ls_ingest_inflight: ing, partitions, next and fn must not be NULL, n >= 0");
  for (int i = 0; i < n; i++) {
    part_t *part;
    LS_FORWARD_IF_ERROR(consumer_our_part(ing, partitions[i], "ls_ingest_inflight", &part));
  }
  /* Once for all of them: the consumer thread holds `hold` a batch at a
   * time, and would be waited for at every partition. */
  pthread_mutex_lock(&ing->hold);
  pthread_mutex_lock(&ing->lock);
  parts_buf_t buf = {NULL, 0};
  ls_err_t err = LS_OK;
  for (int i = 0; i < n && err == LS_OK; i++) {
    part_t *const part = consumer_part(ing, partitions[i]);
    err = partition_parts(ing, part, &buf, fn, opaque);
    next[i] = part->next;
    if (last != NULL) last[i] = part->mark;
  }
  pthread_mutex_unlock(&ing->lock);
  pthread_mutex_unlock(&ing->hold);
  free(buf.w);
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
  ls_err_t const err = ls_ingest_inflight_parts(ing, 1, &partition, next, last, gather_series, &g);
  base_rows_free(&g.rows);
  return err;
}
