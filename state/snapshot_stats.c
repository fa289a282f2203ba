/*
 * A snapshot's series' host-side state: where a series' is
 * (ls_snapshot_series_stats), and a series table's copied in
 * (ls_snapshot_add_series_table, snapshot_format.h's snap_fill_stats): the
 * trainer's step waits for the copy (tens of MB at the defaults with many
 * series: 54 KB a series with 4 targets), and the engine's threads and the
 * snapshot writer's are idle meanwhile, so a large table is copied by the
 * calling thread and a second one, each taking the next chunk of series as
 * it finishes one (a helper slowed by another process on its core leaves
 * the rest to the caller). A copy moves bytes and adds nothing up: the
 * snapshot is the same whichever thread copied a series.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "snapshot_model.h"
#include "stats_layout.h"

ls_err_t ls_snapshot_series_stats(ls_snapshot_t *s, size_t i, ls_series_stats_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  LS_RETURN_IF(i >= s->series, LS_ERR_INVALID_ARG, "series %zu of a snapshot of %zu", i, s->series);
  LS_RETURN_IF(s->stats_F == 0, LS_ERR_STATE, "the snapshot holds no host-side series state");
  *out = stats_layout_at(s->norm_n, s->norm, s->errors, s->serve, s->pending, s->tail, s->smodel,
                         s->stats_F, s->stats_O, s->model_X, i);
  return LS_OK;
}

/* Bytes of state above which a second thread helps: under it, its start
 * and join (~50 us) would cost more than they save. */
#define FILL_SPLIT_BYTES ((size_t)8 << 20)
/* Series a thread takes at a time. */
#define FILL_CHUNK 16

/* The copy of series [0, n) of a table into the snapshot's [first, first
 * + n): the next chunk to take; the first error and its message. */
typedef struct fill_s {
  ls_snapshot_t *s;
  ls_series_table_t *tab;
  size_t first, n, next;
  int failed;
  ls_err_t err;
  char why[512];
} fill_t;

static ls_err_t copy_one(fill_t *f, size_t i) {
  ls_series_stats_t src, dst;
  LS_FORWARD_IF_ERROR(ls_series_table_peek(f->tab, (int64_t)i, &src));
  LS_FORWARD_IF_ERROR(ls_snapshot_series_stats(f->s, f->first + i, &dst));
  /* Its model state: into the new segment, or where it is (by reference). */
  double *const row = snap_model_row(f->s, f->first + i);
  if (src.model_n > 0 && row != NULL) memcpy(row, src.model, src.model_n * sizeof *row);
  src.model_n = dst.model_n = 0;
  return ls_series_stats_copy(&dst, &src, f->s->stats_F, f->s->stats_O);
}

/* Takes chunks until none is left (or a thread failed); an error is kept
 * in f once, its message with it (the thread's own, thread-local). */
static void fill_chunks(fill_t *f) {
  for (;;) {
    size_t const at = __atomic_fetch_add(&f->next, FILL_CHUNK, __ATOMIC_RELAXED);
    if (at >= f->n || __atomic_load_n(&f->failed, __ATOMIC_RELAXED)) return;
    size_t const to = at + FILL_CHUNK < f->n ? at + FILL_CHUNK : f->n;
    for (size_t i = at; i < to; i++) {
      ls_err_t const err = copy_one(f, i);
      if (err == LS_OK) continue;
      if (!__atomic_exchange_n(&f->failed, 1, __ATOMIC_RELAXED)) {
        f->err = err;
        snprintf(f->why, sizeof f->why, "%s", ls_last_error());
      }
      return;
    }
  }
}

static void *fill_main(void *arg) {
  fill_chunks(arg);
  return NULL;
}

ls_err_t snap_fill_stats(ls_snapshot_t *s, ls_series_table_t *tab, size_t first, size_t n) {
  LS_RETURN_IF(s == NULL || tab == NULL || first + n > s->series, LS_ERR_INVALID_ARG,
               "snap_fill_stats: snapshot or table NULL, or series %zu..%zu of %zu", first,
               first + n, s->series);
  size_t const per =
      ((size_t)s->stats_F * (LS_NORM_STATS + 1) + (size_t)s->stats_O * 3 + s->model_X) *
      sizeof(double);
  size_t const copied = n - s->reused; /* series whose model state is copied */
  fill_t f = {s, tab, first, n, 0, 0, LS_OK, ""};
  pthread_t helper;
  int const helped = n > FILL_CHUNK && copied * per > FILL_SPLIT_BYTES &&
                     pthread_create(&helper, NULL, fill_main, &f) == 0;
  fill_chunks(&f);
  if (helped) pthread_join(helper, NULL);
  LS_RETURN_IF(f.failed, f.err, "%s", f.why);
  return LS_OK;
}
