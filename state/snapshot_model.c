/*
 * The series' model state by reference (snapshot_format.h: section 24 of a
 * shard, section 23 of a segment). With many series, only those that
 * trained since the last snapshot have a model state that changed (a step
 * trains B of them), yet each snapshot copied, compressed and wrote every
 * series' (54 KB a series at the defaults). The series table counts the
 * changes to each slot's model state (series.c: ls_series_table_stats, a
 * new series in a slot, a move); a background writer's book keeps where
 * its last shard has each series' state (a row of a segment file) and the
 * table's clock when it was copied. The trainer's thread, filling the next
 * staging snapshot, puts the rows of the series that changed since into
 * the snapshot's new segment (written once, with the windows new since the
 * last one: snapshot_segment.c) and keeps the others' places: a shard
 * lists every series' place, and its directory links every segment it
 * names. Segments whose rows no shard names any more go as the windows'
 * do (snap_segments_sweep). So that rows superseded do not pile up, once
 * the rows written since the last full one would outnumber the series, or
 * the rows staying would be spread over more than MODEL_SEGMENTS_MAX
 * segments, the next shard writes every series' row again (the disk holds
 * at most about twice the series' state; a snapshot links, a resume reads
 * at most that many segments of rows).
 */
#include <stdlib.h>
#include <string.h>

#include "snapshot_model.h"
#include "stats_layout.h"

static ls_err_t places_reserve(snap_places_t *p, size_t n) {
  if (n <= p->cap && p->number != NULL) return LS_OK;
  size_t const cap = snap_next_cap(p->cap, n);
  LS_FORWARD_IF_ERROR(snap_grow(&p->number, cap, sizeof *p->number, "series' model places"));
  LS_FORWARD_IF_ERROR(snap_grow(&p->row, cap, sizeof *p->row, "series' model places"));
  LS_FORWARD_IF_ERROR(snap_grow(&p->clock, cap, sizeof *p->clock, "series' model places"));
  p->cap = cap;
  return LS_OK;
}

/* The most segments a shard's rows may be in: beyond, every row again (a
 * snapshot links, and a resume reads, every segment its rows are in). */
#define MODEL_SEGMENTS_MAX 256

/* Which of s's series [0, n) stay where the book's places have them:
 * mrefs[2 i] = the index in the book's segments of the one that holds
 * series i's row, or -1 (its state changed, or no places of this table).
 * Whether s writes every row again: no such places, or the rows written
 * since the last full write would outnumber the series, or those staying
 * are in more than MODEL_SEGMENTS_MAX segments (seen [the book's
 * segments]: zeros, scratch). */
static int staying(ls_snapshot_t *s, ls_series_table_t *tab, size_t n, uint64_t id, int64_t *seen) {
  const snap_places_t *const p = &s->book->places;
  int const known = p->n > 0 && p->table == id && p->X == s->model_X;
  size_t changed = 0, segments = 0;
  for (size_t i = 0; i < n; i++) {
    int const stays =
        known && i < p->n && series_table_model_gen(tab, i, NULL, NULL) <= p->clock[i];
    int64_t const at = stays ? snap_book_entry(s->book, p->number[i]) : -1;
    s->mrefs[2 * i] = at;
    changed += at < 0;
    if (at >= 0 && !seen[at]) seen[at] = 1, segments++;
  }
  return !known || p->rows + changed > n || segments > MODEL_SEGMENTS_MAX;
}

/* Where s's series [0, n) go (staying's mrefs[2 i]): a row that stays, to
 * its segment's entry in s (g_of [the book's segments]: -1 until made),
 * the others (all with model_full) into the new segment. */
static ls_err_t place_rows(ls_snapshot_t *s, size_t n, int64_t *g_of) {
  const snap_places_t *const p = &s->book->places;
  snap_segment_t *const seg = &s->newseg;
  int64_t g = -1;
  for (size_t i = 0; i < n; i++) {
    int64_t *const ref = s->mrefs + 2 * i;
    int64_t const at = ref[0];
    if (!s->model_full && at >= 0) {
      if (g_of[at] < 0) LS_FORWARD_IF_ERROR(snap_segment_entry(s, p->number[i], &g_of[at]));
      ref[0] = g_of[at], ref[1] = (int64_t)p->row[i];
      s->reused++;
      continue;
    }
    if (g < 0) LS_FORWARD_IF_ERROR(snap_newseg_entry(s, &g));
    ref[0] = g, ref[1] = (int64_t)seg->m++;
  }
  if (g >= 0 && seg->m * s->model_X > seg->cap_m) { /* room for the rows the fill copies in */
    size_t const cap = snap_next_cap(seg->cap_m, seg->m * s->model_X);
    LS_FORWARD_IF_ERROR(snap_grow(&seg->model, cap, sizeof(double), "series' model rows"));
    seg->cap_m = cap;
  }
  seg->X = g >= 0 ? s->model_X : 0;
  return LS_OK;
}

ls_err_t snap_model_plan(ls_snapshot_t *s, ls_series_table_t *tab, size_t first, size_t n) {
  LS_RETURN_IF(first > 0 && s->model_refs, LS_ERR_STATE,
               "a writer's staging snapshot takes the series of one table");
  s->model_refs = 0, s->reused = 0;
  if (!(s->book != NULL && s->model_X > 0 && s->in_F > 0 && first == 0 && n > 0)) return LS_OK;
  /* (the places and segments are the book's: the writer must be idle) */
  LS_RETURN_IF(__atomic_load_n(&s->book->writing, __ATOMIC_ACQUIRE), LS_ERR_STATE,
               "the snapshot writer is writing: fill it while idle (ls_snapshotter_poll)");
  if (s->book_gen < 0) s->book_gen = s->book->generation;
  LS_RETURN_IF(s->book_gen != s->book->generation, LS_ERR_STATE,
               "the snapshot writer wrote while its staging snapshot was filled");
  if (n > s->cap_mrefs) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->mrefs, n, 2 * sizeof *s->mrefs, "series' model places"));
    s->cap_mrefs = n;
  }
  uint64_t clock = 0, id = 0;
  (void)series_table_model_gen(tab, 0, &clock, &id);
  s->fill_clock = clock, s->model_table = id;
  size_t const G = s->book->n_segs;
  int64_t *const g_of = calloc(G ? G : 1, sizeof *g_of);
  LS_RETURN_IF(g_of == NULL, LS_ERR_NOMEM, "no memory for %zu segments' entries", G);
  s->model_full = staying(s, tab, n, id, g_of);
  for (size_t k = 0; k < G; k++)
    g_of[k] = -1;
  s->model_refs = 1;
  ls_err_t const err = place_rows(s, n, g_of);
  free(g_of);
  if (err != LS_OK) s->model_refs = 0, s->reused = 0;
  return err;
}

double *snap_model_row(ls_snapshot_t *s, size_t i) {
  if (!s->model_refs) return s->smodel + i * s->model_X;
  int64_t const *const ref = s->mrefs + 2 * i;
  return ref[0] == s->new_seg ? s->newseg.model + (size_t)ref[1] * s->model_X : NULL;
}

ls_err_t snap_model_written(snap_book_t *b, const ls_snapshot_t *s) {
  snap_places_t *const p = &b->places, *const q = &b->written;
  if (!s->model_refs) { /* none kept: the next shard writes every row */
    p->n = 0;
    return LS_OK;
  }
  LS_FORWARD_IF_ERROR(places_reserve(q, s->series));
  for (size_t i = 0; i < s->series; i++) {
    int64_t const *const ref = s->mrefs + 2 * i;
    int const fresh = ref[0] == s->new_seg;
    q->number[i] = snap_get_u64(s->segs + (size_t)ref[0] * SNAP_SEG_ENTRY_BYTES + 8);
    q->row[i] = (uint64_t)ref[1];
    q->clock[i] = fresh ? s->fill_clock : p->clock[i];
  }
  q->table = s->model_table, q->X = s->model_X, q->n = s->series;
  q->rows = s->model_full ? 0 : p->rows + (s->new_seg >= 0 ? s->newseg.m : 0);
  snap_places_t const t = *p;
  *p = *q, *q = t;
  return LS_OK;
}
