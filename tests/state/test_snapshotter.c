/*
 * The background writer: a submitted snapshot is written (and, for one
 * rank, committed) off the calling thread; a submit while it is busy is
 * reported and changes nothing; completion is polled; the two snapshots
 * are swapped, never reallocated; rank 0 commits a multi-rank snapshot;
 * failures are reported with their message; destroy finishes the job; the
 * series' model state is written once after it changed, each shard naming
 * where every series' is (snapshot_model.c).
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snap_util.h"
#include "snapshot_format.h" /* the writer's book: where a frame is */

static const ls_shape_t SHAPE = {2, 32, 2, 2}; /* I, H, L, O */

static ls_snapshotter_t *writer(const char *dir, int level) {
  return su_writer(&SHAPE, dir, level, 2);
}

/* Fills the writer's staging snapshot with a copy of src. */
static void fill(ls_snapshotter_t *w, const ls_snapshot_t *src) {
  su_copy(ls_snapshotter_staging(w), src);
}

static void expect_loads_as(const char *dir, int64_t step, int world, int rank,
                            const ls_snapshot_t *want) {
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, world, rank, &back), LS_OK, "%s", ls_last_error());
  su_expect_same(want, back);
  ls_snapshot_destroy(back);
}

Test(writer, busy_poll_swap_and_commit) {
  char *const dir = su_temp_dir();
  /* Level 19 on 4000 series x 2 x 64 floats: seconds of work, so the
   * second submit comes while the first is surely still running. */
  ls_snapshotter_t *const w = writer(dir, 19);
  ls_snapshot_t *const a = su_snapshot(&SHAPE, 1, 0, 100, 4000, 2, 1);
  ls_snapshot_t *const b = su_snapshot(&SHAPE, 1, 0, 200, 10, 2, 2);
  ls_snapshot_t *const first = ls_snapshotter_staging(w);
  fill(w, a);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK, "%s", ls_last_error());
  cr_assert_eq(busy, 0);
  ls_snapshot_t *const second = ls_snapshotter_staging(w);
  cr_assert_neq(second, first, "the staging snapshot was not swapped");
  ls_snapshotter_status_t st;
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  cr_assert(st.busy && st.written_step == -1 && st.committed_step == -1);
  fill(w, b);
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK);
  cr_assert_eq(busy, 1, "a submit while writing was accepted");
  cr_assert_eq(ls_snapshotter_staging(w), second, "a refused submit swapped");
  cr_assert_eq(ls_snapshotter_commit(w, 100, 1, &busy), LS_OK);
  cr_assert_eq(busy, 1, "a commit while writing was accepted");
  while (ls_snapshotter_poll(w, &st) == LS_OK && st.busy)
    usleep(1000);
  cr_assert(st.err == LS_OK && st.written_step == 100 && st.committed_step == 100 &&
                st.failures == 0 && st.seconds > 0.0,
            "%s", st.message);
  expect_loads_as(dir, 100, 1, 0, a);
  /* The refused snapshot is still there to submit; then the first
   * snapshot comes back as the staging one. */
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK);
  cr_assert_eq(busy, 0);
  cr_assert_eq(ls_snapshotter_staging(w), first);
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  cr_assert(!st.busy && st.written_step == 200 && st.committed_step == 200);
  expect_loads_as(dir, 200, 1, 0, b);
  ls_snapshotter_destroy(w);
  ls_snapshot_destroy(a);
  ls_snapshot_destroy(b);
  su_remove(dir);
  free(dir);
}

Test(writer, ranks_then_commit_by_rank_0) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *w[2] = {writer(dir, 3), writer(dir, 3)};
  ls_snapshot_t *parts[2];
  for (int r = 0; r < 2; r++) {
    parts[r] = su_snapshot(&SHAPE, 2, r, 7, 30, 2, 5);
    fill(w[r], parts[r]);
    int busy = -1;
    cr_assert_eq(ls_snapshotter_submit(w[r], &busy), LS_OK);
    cr_assert_eq(busy, 0);
  }
  for (int r = 0; r < 2; r++) {
    cr_assert_eq(ls_snapshotter_flush(w[r]), LS_OK, "%s", ls_last_error());
    ls_snapshotter_status_t st;
    cr_assert_eq(ls_snapshotter_poll(w[r], &st), LS_OK);
    cr_assert(st.written_step == 7 && st.committed_step == -1, "rank %d", r);
  }
  int busy = -1;
  cr_assert_eq(ls_snapshotter_commit(w[0], 7, 2, &busy), LS_OK);
  cr_assert_eq(busy, 0);
  cr_assert_eq(ls_snapshotter_flush(w[0]), LS_OK, "%s", ls_last_error());
  ls_snapshotter_status_t st;
  cr_assert_eq(ls_snapshotter_poll(w[0], &st), LS_OK);
  cr_assert_eq(st.committed_step, 7);
  expect_loads_as(dir, 7, 2, 0, parts[0]);
  for (int r = 0; r < 2; r++) {
    ls_snapshotter_destroy(w[r]);
    ls_snapshot_destroy(parts[r]);
  }
  su_remove(dir);
  free(dir);
}

Test(writer, failure_is_reported) {
  char *const dir = su_temp_dir();
  char file[PATH_MAX];
  snprintf(file, sizeof file, "%s/not-a-dir", dir);
  FILE *const f = fopen(file, "w");
  fclose(f);
  ls_snapshotter_t *const w = writer(file, 1);
  ls_snapshot_t *const a = su_snapshot(&SHAPE, 1, 0, 3, 5, 1, 1);
  fill(w, a);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK);
  cr_assert_eq(ls_snapshotter_flush(w), LS_ERR_IO);
  cr_assert(strstr(ls_last_error(), "not-a-dir"), "%s", ls_last_error());
  ls_snapshotter_status_t st;
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  cr_assert(st.err == LS_ERR_IO && st.failures == 1 && st.written_step == -1 &&
            strstr(st.message, "not-a-dir"));
  /* A commit of a step never written fails too, and says why. */
  cr_assert_eq(ls_snapshotter_commit(w, 9, 1, &busy), LS_OK);
  cr_assert_eq(ls_snapshotter_flush(w), LS_ERR_IO);
  cr_assert(strstr(ls_last_error(), "no shard of step 9"), "%s", ls_last_error());
  ls_snapshotter_destroy(w);
  ls_snapshot_destroy(a);
  su_remove(dir);
  free(dir);
}

Test(writer, destroy_finishes_the_job) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 19);
  ls_snapshot_t *const a = su_snapshot(&SHAPE, 1, 0, 4, 500, 1, 1);
  fill(w, a);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK);
  ls_snapshotter_destroy(w);
  expect_loads_as(dir, 4, 1, 0, a);
  ls_snapshot_destroy(a);
  su_remove(dir);
  free(dir);
}

/* Deferred: a one-rank snapshot is written, not committed, until asked. */
Test(writer, deferred_commit_waits_to_be_asked) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  conf.deferred = 1;
  ls_snapshotter_t *w = NULL;
  cr_assert_eq(ls_snapshotter_new(dir, &SHAPE, &conf, &w), LS_OK, "%s", ls_last_error());
  ls_snapshot_t *const a = su_snapshot(&SHAPE, 1, 0, 7, 20, 2, 3);
  fill(w, a);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK);
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  ls_snapshotter_status_t st;
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  cr_assert(st.written_step == 7 && st.committed_step == -1, "written %lld, committed %lld",
            (long long)st.written_step, (long long)st.committed_step);
  char got[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, NULL, NULL, got, sizeof got), LS_OK);
  cr_assert_str_eq(got, "", "nothing is visible before the commit");
  cr_assert_eq(ls_snapshotter_commit(w, 7, 1, &busy), LS_OK);
  cr_assert_eq(busy, 0);
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  cr_assert_eq(st.committed_step, 7);
  expect_loads_as(dir, 7, 1, 0, a);
  ls_snapshotter_destroy(w);
  ls_snapshot_destroy(a);
  su_remove(dir);
  free(dir);
}

/* A table of FR_N series with FR_X doubles of model state each (su_table). */
enum { FR_N = 40, FR_F = 2, FR_O = 1, FR_X = 300 };

/* The writer's staging snapshot of step, with the table's series. */
static ls_snapshot_t *frames_fill(ls_snapshotter_t *w, ls_series_table_t *tab, int64_t step) {
  ls_snapshot_t *const s = ls_snapshotter_staging(w);
  ls_snapshot_reset(s);
  ls_snapshot_info_t const info = {step, 7, 9, 1, 0, step};
  cr_assert_eq(ls_snapshot_set_info(s, &info), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_set_engine(s, ls_series_table_engine(tab)), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_snapshot_set_inflight_features(s, 2), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_add_series_table(s, tab), LS_OK, "%s", ls_last_error());
  return s;
}

/* That snapshot written and committed: the series whose rows stay where
 * the last shard has them, and (*fresh) the rows its new segment holds. */
static size_t frames_write(ls_snapshotter_t *w, ls_series_table_t *tab, int64_t step,
                           size_t *fresh) {
  ls_snapshot_t *const s = frames_fill(w, tab, step);
  size_t const reused = s->reused;
  cr_assert(s->model_refs, "not by reference");
  *fresh = s->new_seg >= 0 ? s->newseg.m : 0;
  int busy = 1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK, "%s", ls_last_error());
  cr_assert_eq(busy, 0);
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  return reused;
}

/* Series k's model state in the snapshot of step: model[0] and the rest
 * as the table made it (k 1e4 + i). */
static void frames_expect(const char *dir, int64_t step, const double *first) {
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_series_count(back), (size_t)FR_N);
  for (int k = 0; k < FR_N; k++) {
    ls_series_stats_t st;
    cr_assert_eq(ls_snapshot_series_stats(back, (size_t)k, &st), LS_OK);
    cr_assert_eq(st.model[0], first[k], "step %lld, series %d: %g, expected %g", (long long)step, k,
                 st.model[0], first[k]);
    for (size_t i = 1; i < FR_X; i++)
      cr_assert_eq(st.model[i], k * 1e4 + (double)i, "step %lld, series %d, [%zu]", (long long)step,
                   k, i);
  }
  ls_snapshot_destroy(back);
}

/* The snapshot of step holds the table's model state, slot for slot. */
static void frames_expect_table(const char *dir, int64_t step, ls_series_table_t *tab) {
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  size_t const n = ls_series_table_count(tab);
  cr_assert_eq(ls_snapshot_series_count(back), n);
  for (size_t k = 0; k < n; k++) {
    ls_series_stats_t a, b;
    cr_assert_eq(ls_series_table_peek(tab, (int64_t)k, &a), LS_OK);
    cr_assert_eq(ls_snapshot_series_stats(back, k, &b), LS_OK);
    cr_assert_arr_eq(a.model, b.model, FR_X * sizeof(double), "step %lld, slot %zu",
                     (long long)step, k);
  }
  ls_snapshot_destroy(back);
}

/* Files in DIR/segments. */
static int segment_files(const char *dir) {
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "ls -A '%s/segments' | wc -l", dir);
  FILE *const p = popen(cmd, "r");
  int n = -1;
  cr_assert(p != NULL && fscanf(p, "%d", &n) == 1);
  pclose(p);
  return n;
}

/* The series' model state by reference (snapshot_model.c): a shard writes
 * into its new segment the rows of the series whose model state changed
 * since the writer's last shard (ls_series_table_stats counts as a
 * change, ls_series_table_peek does not: a change through peek alone is
 * left out, which shows the row stayed where it was) and keeps the
 * others' places; once the rows written since the last full shard would
 * outnumber the series, every row is written again and the older segments
 * go; slots emptied, moved into and reused by eviction are written again;
 * a snapshot without a segment holding rows it names is not loaded. */
Test(writer, writes_the_model_state_of_series_that_changed) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 3);
  ls_engine_t *eng = NULL;
  ls_series_table_t *const tab = su_table(&SHAPE, FR_N, FR_F, FR_O, FR_X, 2, &eng);
  double first[FR_N];
  for (int k = 0; k < FR_N; k++)
    first[k] = k * 1e4;
  size_t fresh = 0;
  cr_assert_eq(frames_write(w, tab, 10, &fresh), 0, "the first shard kept places");
  cr_assert_eq(fresh, (size_t)FR_N);
  frames_expect(dir, 10, first);
  ls_series_stats_t st;
  for (int k = 0; k < FR_N; k++) { /* 3, 7 and 30 change; 5 through peek only */
    int const changed = k == 3 || k == 7 || k == 30;
    if (!changed && k != 5) continue;
    cr_assert_eq((changed ? ls_series_table_stats : ls_series_table_peek)(tab, k, &st), LS_OK);
    st.model[0] = -1.0 - k;
    if (changed) first[k] = st.model[0];
  }
  size_t const r20 = frames_write(w, tab, 20, &fresh);
  cr_assert_eq(r20, FR_N - 3, "reused %zu, fresh %zu", r20, fresh);
  cr_assert_eq(fresh, 3);
  frames_expect(dir, 20, first); /* 5 as before: its row stayed */
  cr_assert_eq(ls_series_table_stats(tab, 0, &st), LS_OK);
  st.model[0] = first[0] = 0.5;
  cr_assert_eq(frames_write(w, tab, 30, &fresh), FR_N - 1);
  cr_assert_eq(fresh, 1);
  frames_expect(dir, 30, first);
  double was[FR_N];
  memcpy(was, first, sizeof was);
  cr_assert_eq(segment_files(dir), 3, "the writer's segments of 10, 20 and 30");
  /* 38 changed: 3 + 1 + 38 rows since the first would outnumber the 40
   * series, so every row again, and the three segments before go. */
  for (int k = 0; k < FR_N - 2; k++) {
    cr_assert_eq(ls_series_table_stats(tab, k, &st), LS_OK);
    st.model[0] = first[k] = 2.0 + k;
  }
  cr_assert_eq(frames_write(w, tab, 40, &fresh), 0);
  cr_assert_eq(fresh, (size_t)FR_N);
  frames_expect(dir, 40, first);
  frames_expect(dir, 30, was); /* its directory links the segments it names */
  cr_assert_eq(segment_files(dir), 1, "the segments no shard of the writer's needs stay");
  /* Two series evicted (the last slots move into their places) and two new
   * ones in the slots freed (zero): the four slots' rows are written. */
  int64_t evicted = 0;
  cr_assert_eq(ls_series_table_evict(tab, 0, FR_N / 2 - 1, &evicted), LS_OK, "%s", ls_last_error());
  cr_assert_eq(evicted, 2);
  for (int k = 0; k < 2; k++) {
    int64_t slot;
    cr_assert_eq(ls_series_table_slot(tab, k ? "new1" : "new0", 4, k, &slot), LS_OK);
    cr_assert_eq(slot, FR_N - 2 + k);
  }
  cr_assert_eq(frames_write(w, tab, 50, &fresh), FR_N - 4);
  cr_assert_eq(fresh, 4);
  frames_expect_table(dir, 50, tab);
  /* Without the segment of its four rows, 50 is not loaded; 40 is the
   * newest good snapshot. */
  const snap_book_t *const book = ls_snapshotter_staging(w)->book;
  char snap[PATH_MAX], name[64], path[PATH_MAX + 64], found[PATH_MAX];
  su_snap_path(snap, dir, 50, NULL);
  snap_segment_name(name, 0, book->writer, book->next - 1);
  snprintf(path, sizeof path, "%s/%s", snap, name);
  cr_assert_eq(unlink(path), 0, "%s", path);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(snap, 1, 0, &back), LS_ERR_IO);
  cr_assert(strstr(ls_last_error(), name) != NULL, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_find_latest(dir, NULL, NULL, found, sizeof found), LS_OK, "%s",
               ls_last_error());
  su_snap_path(snap, dir, 40, NULL);
  cr_assert_str_eq(found, snap);
  ls_snapshotter_destroy(w);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  su_remove(dir);
  free(dir);
}

/* What would break a staging snapshot's series' model state by reference
 * is refused: a series added after the table's, other features for the
 * records in flight once its new segment is open; and a table of another
 * width than the snapshot's. */
Test(writer, refuses_what_would_break_the_references) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 3);
  ls_engine_t *eng = NULL;
  ls_series_table_t *const tab = su_table(&SHAPE, FR_N, FR_F, FR_O, FR_X, 2, &eng);
  ls_snapshot_t *const s = frames_fill(w, tab, 10);
  cr_assert(s->model_refs && s->new_seg >= 0);
  float const h[2 * 32] = {0};
  ls_series_info_t const si = {"late", 4, 0, 0, 0, 0, -1, -1, 0};
  cr_assert_eq(ls_snapshot_add_series(s, &si, h, h), LS_ERR_STATE);
  cr_assert_eq(ls_snapshot_set_inflight_features(s, 3), LS_ERR_STATE);
  cr_assert_eq(ls_snapshot_series_count(s), (size_t)FR_N);
  ls_snapshot_reset(s);
  cr_assert_eq(ls_snapshot_set_stats_shape(s, FR_F, FR_O), LS_OK);
  cr_assert_eq(ls_snapshot_set_model_width(s, FR_X - 1), LS_OK);
  cr_assert_eq(ls_snapshot_add_series_table(s, tab), LS_ERR_INVALID_ARG);
  cr_assert(strstr(ls_last_error(), "300 doubles") != NULL, "%s", ls_last_error());
  ls_snapshotter_destroy(w);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  su_remove(dir);
  free(dir);
}

/* Rows spread over too many segments (a snapshot links, a resume reads
 * every one its rows are in): one series changed a snapshot, 300 series,
 * the rows stay in at most 256 segments beside the new one, and the
 * snapshot after writes every row again. */
Test(writer, bounds_the_segments_of_the_rows) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 1);
  ls_engine_t *eng = NULL;
  enum { N = 300 };
  ls_series_table_t *const tab = su_table(&SHAPE, N, FR_F, FR_O, 8, 2, &eng);
  size_t fresh = 0;
  cr_assert_eq(frames_write(w, tab, 1, &fresh), 0);
  for (int k = 0; k < 257; k++) {
    ls_series_stats_t st;
    cr_assert_eq(ls_series_table_stats(tab, k, &st), LS_OK);
    st.model[0] = -k;
    size_t const reused = frames_write(w, tab, 2 + k, &fresh);
    size_t const want = k < 256 ? 1 : N;
    cr_assert_eq(fresh, want, "snapshot %d after the full one: %zu rows written", k + 1, fresh);
    cr_assert_eq(reused, N - want);
  }
  cr_assert_eq(segment_files(dir), 1);
  ls_snapshotter_destroy(w);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  su_remove(dir);
  free(dir);
}
