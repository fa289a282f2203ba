/*
 * The background writer: a submitted snapshot is written (and, for one
 * rank, committed) off the calling thread; a submit while it is busy is
 * reported and changes nothing; completion is polled; the two snapshots
 * are swapped, never reallocated; rank 0 commits a multi-rank snapshot;
 * failures are reported with their message; destroy finishes the job.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snap_util.h"

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
