/*
 * The snapshot directory: DIR/latest, keeping the K newest snapshots,
 * replacing a snapshot of the same step, later snapshots of an abandoned
 * run left alone but no longer found, stale temporary directories removed,
 * one lock holder at a time.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap_util.h"

static const ls_shape_t SHAPE = {1, 8, 1, 1}; /* I, H, L, O */

static int exists(const char *dir, const char *name) {
  char path[PATH_MAX];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0;
}

static int snap_exists(const char *dir, int64_t step) {
  char path[PATH_MAX];
  struct stat st;
  su_snap_path(path, dir, step, NULL);
  return stat(path, &st) == 0;
}

static void expect_latest(const char *dir, int64_t step) {
  char got[PATH_MAX], want[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, NULL, NULL, got, sizeof got), LS_OK, "%s",
               ls_last_error());
  su_snap_path(want, dir, step, NULL);
  cr_assert_str_eq(got, want);
}

Test(dir, latest_names_the_newest) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  su_write_snapshot(dir, &SHAPE, 1, 10, 5, 1, &conf, 3, NULL);
  char path[PATH_MAX], line[64] = {0};
  snprintf(path, sizeof path, "%s/latest", dir);
  FILE *const f = fopen(path, "r");
  cr_assert_not_null(f);
  cr_assert_neq(fread(line, 1, sizeof line - 1, f), 0);
  fclose(f);
  cr_assert_str_eq(line, "snap-000000000010\n");
  cr_assert(!exists(dir, ".latest.tmp") && !exists(dir, ".tmp-snap-000000000010"));
  su_remove(dir);
  free(dir);
}

Test(dir, keeps_the_k_newest) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int64_t step = 1; step <= 6; step++) {
    su_write_snapshot(dir, &SHAPE, 2, step, 5, (uint32_t)step, &conf, 3, NULL);
    for (int64_t s = 1; s <= step; s++)
      cr_assert_eq(snap_exists(dir, s), s > step - 3, "after step %lld: snapshot %lld",
                   (long long)step, (long long)s);
    expect_latest(dir, step);
  }
  su_remove(dir);
  free(dir);
}

Test(dir, replaces_a_snapshot_of_the_same_step) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  su_write_snapshot(dir, &SHAPE, 1, 10, 5, 1, &conf, 3, NULL);
  ls_snapshot_t *now = NULL;
  su_write_snapshot(dir, &SHAPE, 1, 10, 7, 2, &conf, 3, &now);
  char path[PATH_MAX];
  su_snap_path(path, dir, 10, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  su_expect_same(now, back);
  cr_assert(!exists(dir, ".old-snap-000000000010"));
  ls_snapshot_destroy(now);
  ls_snapshot_destroy(back);
  su_remove(dir);
  free(dir);
}

Test(dir, resumed_run_leaves_later_snapshots_alone) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int64_t step = 10; step <= 30; step += 10)
    su_write_snapshot(dir, &SHAPE, 1, step, 5, (uint32_t)step, &conf, 5, NULL);
  /* A run resumed from 10 commits 15 keeping 2: 20 and 30 stay on disk,
   * 15 is the latest, and if 15 is damaged the fallback is 10. */
  su_write_snapshot(dir, &SHAPE, 1, 15, 5, 15, &conf, 2, NULL);
  cr_assert(snap_exists(dir, 10) && snap_exists(dir, 15) && snap_exists(dir, 20) &&
            snap_exists(dir, 30));
  expect_latest(dir, 15);
  char path[PATH_MAX];
  su_snap_path(path, dir, 15, "shard-0");
  su_truncate(path, 100);
  expect_latest(dir, 10);
  su_remove(dir);
  free(dir);
}

Test(dir, removes_stale_temporary_directories) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  /* Shards of steps 5 and 20 written, never committed (a crash). */
  for (int64_t step = 5; step <= 20; step += 15) {
    ls_snapshot_t *s = su_snapshot(&SHAPE, 1, 0, step, 3, 1, 1);
    cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK);
    ls_snapshot_destroy(s);
  }
  su_write_snapshot(dir, &SHAPE, 1, 10, 5, 1, &conf, 3, NULL);
  cr_assert(!exists(dir, ".tmp-snap-000000000005"), "an earlier attempt was left");
  cr_assert(exists(dir, ".tmp-snap-000000000020"), "a later one (in progress?) was removed");
  su_remove(dir);
  free(dir);
}

Test(dir, one_lock_holder_at_a_time) {
  char *const dir = su_temp_dir();
  char sub[PATH_MAX], want[128];
  snprintf(sub, sizeof sub, "%s/new/snaps", dir); /* created with its parents */
  ls_snapshot_lock_t *first = NULL, *second = NULL;
  cr_assert_eq(ls_snapshot_lock(sub, &first), LS_OK, "%s", ls_last_error());
  /* A second holder (here another open file of this process) is refused at
   * once, told who holds it. */
  cr_expect_eq(ls_snapshot_lock(sub, &second), LS_ERR_STATE);
  cr_expect_null(second);
  snprintf(want, sizeof want, "in use by another trainer (pid=%ld host=", (long)getpid());
  cr_expect(strstr(ls_last_error(), want) != NULL, "'%s' not in '%s'", want, ls_last_error());
  /* Snapshots beside the lock file are found as before. */
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  su_write_snapshot(sub, &SHAPE, 1, 10, 5, 1, &conf, 3, NULL);
  expect_latest(sub, 10);
  ls_snapshot_unlock(first);
  cr_expect_eq(ls_snapshot_lock(sub, &second), LS_OK, "free again: %s", ls_last_error());
  ls_snapshot_unlock(second);
  ls_snapshot_unlock(NULL);
  su_remove(dir);
  free(dir);
}
