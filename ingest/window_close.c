/*
 * The windows a series' buffer gives out (ingest/window.h): its place in
 * its partition's list, the views of its windows, the carry, and what it
 * holds closed when its records end (a flush, a gap, a move). With a
 * horizon G > 1 a series may hold a whole window waiting for its G-1
 * records after it: it goes out with those it has, then what follows its
 * last target as a partial window, so nothing is dropped and the windows
 * are those of its data alone; evicted, that window alone goes out
 * (ls_windower_more, from the series' own buffer, freed on the next push).
 */
#include <string.h>

#include "window.h"

/* The offset of the oldest record s holds (count > 0). */
static int64_t series_low(const ls_windower_t *w, const series_t *s) {
  return s->offsets[s->count == w->T + w->G ? w->T : 0];
}

void window_list_unlink(series_t *s) {
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

void window_list_insert(const ls_windower_t *w, series_t *s) {
  wpart_t *const p = s->part;
  int64_t const low = series_low(w, s);
  series_t *after = p->tail;
  while (after != NULL && series_low(w, after) > low)
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

const ls_window_t *window_view(series_t *s, ls_window_t *v, const float *x, const int64_t *offsets,
                               const int64_t *times, int T, int F, int n_targets, int n_extra,
                               const float *mask) {
  v->key = s->k.key;
  v->key_len = s->k.key_len;
  v->series = s->id;
  v->partition = s->part->id;
  v->index = s->index++;
  v->first_offset = offsets[0];
  v->last_offset = offsets[n_targets];
  v->T = T;
  v->F = F;
  v->n_targets = n_targets;
  v->n_extra = n_extra;
  v->x = x;
  v->mask = mask;
  v->times = times;
  v->offsets = offsets;
  v->reset = s->reset;
  s->reset = 0;
  return v;
}

/* The window of s's n rows from row `from` (n <= T+1: a partial one; more:
 * a whole one and n-T-1 records after it), its rows past them padding: in
 * the series' own buffer (buf 0, from 0), or copied to the windower's gap
 * buffer (1) or its second one (2). */
const ls_window_t *window_held_view(ls_windower_t *w, series_t *s, int from, int n, int buf) {
  int const F = w->F, T = w->T;
  size_t const rows = (size_t)T + (size_t)w->G;
  float *const x = buf == 0 ? s->x : buf == 1 ? w->gap_x : w->gap2_x;
  int64_t *const offsets = buf == 0 ? s->offsets : buf == 1 ? w->gap : w->gap2;
  int64_t *const t_of = buf == 0 ? s->times : offsets + rows;
  if (buf != 0) {
    memcpy(x, s->x + (size_t)from * F, (size_t)n * F * sizeof(float));
    memcpy(offsets, s->offsets + from, (size_t)n * sizeof(int64_t));
    memcpy(t_of, s->times + from, (size_t)n * sizeof(int64_t));
  }
  /* Rows n.. are padding: zero them so no stale values reach a model. */
  memset(x + (size_t)n * F, 0, (rows - (size_t)n) * F * sizeof(float));
  for (size_t t = (size_t)n; t < rows; t++)
    t_of[t] = offsets[t] = -1;
  if (n > T + 1) {
    w->stats.windows++;
    return window_view(s, buf == 2 ? &w->view2 : &w->view, x, offsets, t_of, T, F, T, n - T - 1,
                       w->ones);
  }
  for (int t = 0; t < T; t++)
    w->partial_mask[t] = t < n - 1 ? 1.0f : 0.0f;
  return window_view(s, buf == 2 ? &w->view2 : &w->view, x, offsets, t_of, T, F, n - 1, 0,
                     w->partial_mask);
}

/* Moves rows [from, from+n) of s to rows [0, n); its count n. */
void window_shift_rows(const ls_windower_t *w, series_t *s, int from, int n) {
  size_t const F = (size_t)w->F;
  memmove(s->x, s->x + (size_t)from * F, (size_t)n * F * sizeof(float));
  memmove(s->offsets, s->offsets + from, (size_t)n * sizeof(int64_t));
  memmove(s->times, s->times + from, (size_t)n * sizeof(int64_t));
  s->count = n;
}

void window_carry(const ls_windower_t *w, series_t *s) {
  if (s->count == w->T + w->G) window_shift_rows(w, s, w->T, w->G);
}

int window_close(ls_windower_t *w, series_t *s, const ls_window_t **first) {
  int const T = w->T;
  w->more = NULL;
  window_list_unlink(s);
  window_carry(w, s);
  int const n = s->count;
  if (n > T + 1) { /* a whole window first: copied, then the rest from row T */
    *first = window_held_view(w, s, 0, n, 1);
    w->more = window_held_view(w, s, T, n - T, 2);
  } else if (n >= 2) {
    *first = window_held_view(w, s, 0, n, 1);
  }
  s->count = 0;
  return n;
}

ls_err_t ls_windower_more(ls_windower_t *w, const ls_window_t **win) {
  LS_RETURN_IF(w == NULL || win == NULL, LS_ERR_INVALID_ARG,
               "ls_windower_more: w and win must not be NULL");
  *win = w->more;
  w->more = NULL;
  series_t *const s = *win == NULL ? w->gone_next : NULL;
  if (s != NULL) { /* an evicted series' whole window, in its own buffer */
    w->gone_next = s->next;
    *win = window_held_view(w, s, 0, s->count, 0);
  }
  return LS_OK;
}
