/*
 * The windower's series in flight (include/lstream/ingest.h): what a
 * series holds, as a snapshot keeps it, and restoring series from one.
 */
#include <stdlib.h>
#include <string.h>

#include "window.h"

/* ------------------------------------------------------------------------ */
/* Records in flight                                                         */

/* s's pending rows as a series in flight into *out (pointers into s). */
static void pending_view(const ls_windower_t *w, const series_t *s, ls_inflight_t *out) {
  int const T = w->T, carry = s->count == T + w->G;
  *out = (ls_inflight_t){s->k.key,
                         s->k.key_len,
                         s->part->id,
                         s->index,
                         s->last_time,
                         s->reset,
                         window_series_pending(w, s),
                         s->offsets + (carry ? T : 0),
                         s->times + (carry ? T : 0),
                         s->x + (size_t)(carry ? T : 0) * w->F,
                         0};
}

ls_err_t ls_windower_each_pending(const ls_windower_t *w, int32_t partition, ls_inflight_fn fn,
                                  void *opaque) {
  LS_RETURN_IF(w == NULL || fn == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_each_pending: w and fn must not be NULL");
  const wpart_t *const part = window_part_find(w, partition);
  for (const series_t *s = part != NULL ? part->head : NULL; s != NULL; s = s->next) {
    ls_inflight_t v;
    pending_view(w, s, &v);
    LS_FORWARD_IF_ERROR(fn(opaque, &v));
  }
  return LS_OK;
}

ls_err_t ls_windower_pending_of(const ls_windower_t *w, const void *key, size_t key_len,
                                ls_inflight_t *out, int *found) {
  LS_RETURN_IF(w == NULL || key == NULL || out == NULL || found == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_pending_of: w, key, out and found must not be NULL");
  const series_t *const s =
      (const series_t *)window_table_find(&w->series, base_key_hash(key, key_len), key, key_len);
  *found = s != NULL;
  if (s != NULL) pending_view(w, s, out);
  return LS_OK;
}

/* A restored row: row r of series i. */
typedef struct restored_s {
  int32_t partition;
  int r;
  int64_t offset;
  size_t i;
} restored_t;

static int by_partition_offset(const void *a, const void *b) {
  const restored_t *const x = a, *const y = b;
  if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

ls_err_t window_inflight_check(const ls_inflight_t *in, const char *fn) {
  LS_RETURN_IF(in->key == NULL || in->key_len == 0 || in->key_len > LS_KEY_MAX || in->rows < 1 ||
                   in->offsets == NULL || in->times == NULL || in->x == NULL || in->partition < 0 ||
                   in->index < 0,
               LS_ERR_INVALID_ARG,
               "%s: a series needs a key of 1..%d bytes, rows >= 1 and their arrays, a partition "
               "and a window index >= 0",
               fn, LS_KEY_MAX);
  for (int r = 1; r < in->rows; r++)
    LS_RETURN_IF(in->offsets[r] <= in->offsets[r - 1], LS_ERR_INVALID_ARG,
                 "%s: series '%.*s': offsets must ascend", fn, (int)in->key_len, in->key);
  return LS_OK;
}

/* Evicts restored series made[j] (uncounted: the run it was in counted it),
 * a whole window it holds to fn; made[j] = NULL (its memory may go). */
static ls_err_t restore_evict(ls_windower_t *w, series_t **made, size_t j, ls_window_fn fn,
                              void *opaque) {
  window_series_evict(w, made[j], 0);
  made[j] = NULL;
  const ls_window_t *win = NULL;
  LS_FORWARD_IF_ERROR(ls_windower_more(w, &win));
  return win != NULL ? fn(opaque, win) : LS_OK;
}

/* Series i of a restore begins (its row 0): a series of its key that an
 * entry begun before made, whose rows are all in (an incarnation evicted before
 * this one began, in a snapshot that did not mark it evicted), is evicted
 * first, a whole window it holds to fn. */
static ls_err_t restore_begin(ls_windower_t *w, const ls_inflight_t *in, size_t n, series_t **made,
                              size_t i, ls_window_fn fn, void *opaque) {
  uint64_t const hash = base_key_hash(in[i].key, in[i].key_len);
  series_t *const old = (series_t *)window_table_find(&w->series, hash, in[i].key, in[i].key_len);
  if (old != NULL) {
    size_t j = 0;
    while (j < n && made[j] != old)
      j++;
    LS_RETURN_IF(j == n, LS_ERR_STATE,
                 "ls_windower_restore: series '%.*s' is known already (restore it once, before "
                 "any push)",
                 (int)in[i].key_len, in[i].key);
    LS_FORWARD_IF_ERROR(restore_evict(w, made, j, fn, opaque)); /* where the next one began */
  }
  series_t **const out = &made[i];
  LS_FORWARD_IF_ERROR(window_series_add(w, hash, in[i].key, in[i].key_len, in[i].partition, in[i].x,
                                        in[i].index, out));
  (*out)->reset = in[i].reset;
  const ls_window_t *none = NULL;
  window_accept_row(w, *out, in[i].offsets[0], in[i].times[0], &none);
  return LS_OK;
}

/* Entries of one key are incarnations of it (a series evicted, and back
 * as a new one; or moved to another partition): they may not overlap in
 * offsets. An entry with a later one of its key on another partition,
 * numbering its windows on (window_series_move), was left behind by a
 * move: superseded[i] = 1. */
static ls_err_t check_incarnations(const ls_inflight_t *in, size_t n, unsigned char *superseded) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++) {
      const ls_inflight_t *const a = &in[i], *const b = &in[j];
      if (a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len) != 0) continue;
      int const apart = a->partition != b->partition || a->offsets[a->rows - 1] < b->offsets[0] ||
                        b->offsets[b->rows - 1] < a->offsets[0];
      LS_RETURN_IF(!apart, LS_ERR_INVALID_ARG,
                   "ls_windower_restore: series '%.*s' twice with overlapping records (two "
                   "incarnations of a key follow each other)",
                   (int)a->key_len, a->key);
      if (a->partition != b->partition && a->index != b->index)
        superseded[a->index < b->index ? i : j] = 1;
    }
  return LS_OK;
}

/* Hands the windows a row closed (window_next_row: win, then w->more) to fn;
 * w->more is taken (ls_windower_more gives it no more: its series may be
 * forgotten next). */
static ls_err_t closed_to(ls_windower_t *w, const ls_window_t *win, ls_window_fn fn, void *opaque) {
  const ls_window_t *const more = w->more;
  w->more = NULL;
  ls_err_t const err = win != NULL ? fn(opaque, win) : LS_OK;
  return err == LS_OK && more != NULL ? fn(opaque, more) : err;
}

/* Restores a superseded entry alone: its rows pushed again, the windows
 * they complete, then what it held when it moved as a partial window (as
 * window_series_move closed it), through fn; the series is forgotten. */
static ls_err_t restore_moved(ls_windower_t *w, const ls_inflight_t *in, ls_window_fn fn,
                              void *opaque, int64_t *id) {
  series_t *s = NULL;
  LS_FORWARD_IF_ERROR(window_series_add(w, base_key_hash(in->key, in->key_len), in->key,
                                        in->key_len, in->partition, in->x, in->index, &s));
  s->reset = in->reset;
  *id = s->id;
  const ls_window_t *win = NULL;
  window_accept_row(w, s, in->offsets[0], in->times[0], &win);
  ls_err_t err = LS_OK;
  for (int r = 1; r < in->rows && err == LS_OK; r++) {
    win = NULL;
    window_next_row(w, s, in->times[r], &win);
    err = closed_to(w, win, fn, opaque);
    memcpy(s->x + (size_t)s->count * w->F, in->x + (size_t)r * w->F, (size_t)w->F * sizeof(float));
    win = NULL;
    if (err == LS_OK) window_accept_row(w, s, in->offsets[r], in->times[r], &win);
    if (win != NULL && err == LS_OK) err = fn(opaque, win);
  }
  if (s->count > 0) { /* what it held when it moved, closed as window_series_move closed it */
    win = NULL;
    w->stats.buffered -= window_close(w, s, &win);
    if (err == LS_OK) err = closed_to(w, win, fn, opaque);
  }
  window_series_forget(w, s, 0);
  w->stats.series--; /* counted again by the entry that follows it */
  return err;
}

ls_err_t ls_windower_restore(ls_windower_t *w, const ls_inflight_t *in, size_t n, ls_window_fn fn,
                             void *opaque) {
  return window_restore(w, in, n, fn, opaque, NULL);
}

ls_err_t window_restore(ls_windower_t *w, const ls_inflight_t *in, size_t n, ls_window_fn fn,
                        void *opaque, int64_t *ids) {
  LS_RETURN_IF(w == NULL || (in == NULL && n > 0) || fn == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_restore: w, series and fn must not be NULL");
  window_gone_free(w);
  size_t rows = 0;
  for (size_t i = 0; i < n; i++) {
    LS_FORWARD_IF_ERROR(window_inflight_check(&in[i], "ls_windower_restore"));
    rows += (size_t)in[i].rows;
  }
  series_t **const made = calloc(n > 0 ? n : 1, sizeof *made);
  restored_t *const order = malloc((rows > 0 ? rows : 1) * sizeof *order);
  unsigned char *const moved = calloc(n > 0 ? n : 1, 1);
  int64_t *const id = ids != NULL ? ids : calloc(n > 0 ? n : 1, sizeof *id);
  ls_err_t err = made && order && moved && id
                     ? check_incarnations(in, n, moved)
                     : ls_error_set(LS_ERR_NOMEM, "no memory to restore %zu records", rows);
  /* Those left behind by a move first, each alone (its key's later entry
   * is on another partition, so its windows are its partition's alone). */
  for (size_t i = 0; i < n && err == LS_OK; i++)
    if (moved[i]) err = restore_moved(w, &in[i], fn, opaque, &id[i]);
  /* Every row, the first of each series too, in the order its partition
   * delivered them: series begin, and come last in their partition's order
   * of arrival (which eviction follows), as they did; one evicted is
   * evicted after its last row (whether or not its key is back in the
   * snapshot: back after it, the key's next record begins a new series). */
  size_t k = 0;
  for (size_t i = 0; i < n && err == LS_OK; i++)
    for (int r = 0; r < in[i].rows && !moved[i]; r++)
      order[k++] = (restored_t){in[i].partition, r, in[i].offsets[r], i};
  if (err == LS_OK) qsort(order, k, sizeof *order, by_partition_offset);
  int const F = w->F;
  for (size_t j = 0; j < k && err == LS_OK; j++) {
    size_t const i = order[j].i;
    const ls_inflight_t *const src = &in[i];
    int const r = order[j].r;
    if (r == 0) {
      err = restore_begin(w, in, n, made, i, fn, opaque);
      if (err == LS_OK) id[i] = made[i]->id;
    } else {
      series_t *const s = made[i];
      const ls_window_t *win = NULL;
      window_next_row(w, s, src->times[r], &win);
      err = closed_to(w, win, fn, opaque);
      memcpy(s->x + (size_t)s->count * F, src->x + (size_t)r * F, (size_t)F * sizeof(float));
      win = NULL;
      if (err == LS_OK) window_accept_row(w, s, src->offsets[r], src->times[r], &win);
      if (win != NULL && err == LS_OK) err = fn(opaque, win);
    }
    if (err == LS_OK && src->evicted && r == src->rows - 1)
      err = restore_evict(w, made, i, fn, opaque);
  }
  /* The series that remain (the last incarnation of each key; evicted
   * ones are NULL) take their last accepted time. */
  for (size_t i = 0; i < n && err == LS_OK; i++) {
    const series_t *const now = (const series_t *)window_table_find(
        &w->series, base_key_hash(in[i].key, in[i].key_len), in[i].key, in[i].key_len);
    if (made[i] != NULL && now == made[i]) made[i]->last_time = in[i].last_time;
  }
  free(order), free(made), free(moved);
  if (id != ids) free(id);
  return err;
}
