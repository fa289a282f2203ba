/*
 * Records in flight by reference (state/snapshot_segment.c, format 6): a
 * writer's snapshots keep a window an earlier one wrote by reference, so
 * each window is written once, into one segment file, however many
 * snapshots hold it; every snapshot directory links the segments it needs
 * and loads to the series a snapshot without references holds; the
 * writer's own links go once no later snapshot can need them, and those of
 * earlier runs at its first shard; a missing or damaged segment makes its
 * snapshot one to pass over; a staging snapshot filled while its writer
 * wrote is refused; shards with references re-shard.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "snap_util.h"
#include "snapshot_format.h" /* segment files, to look into */

static const ls_shape_t SHAPE = {2, 32, 2, 2}; /* I, H, L, O */

/* Windows of T = 4 steps (5 rows) of KEYS series in each of PARTS
 * partitions; record t of series k has offset k + KEYS t (the series
 * interleave); window i of series k holds records T i .. T i + T and is the
 * partition's window seq KEYS i + k (the order they complete in). */
enum { T = 4, KEYS = 4, PARTS = 2, MAX_ROWS = 64 };

typedef struct rows_s {
  int64_t offsets[MAX_ROWS], times[MAX_ROWS];
  float x[MAX_ROWS * SU_IN_F];
} rows_t;

/* Records t0 .. t0 + n - 1 of series k of partition p. */
static void rows_of(rows_t *r, int p, int k, int t0, int n) {
  cr_assert_leq(n, MAX_ROWS);
  for (int i = 0; i < n; i++) {
    int const t = t0 + i;
    r->offsets[i] = k + KEYS * t, r->times[i] = 1000 + t;
    r->x[i * SU_IN_F] = (float)(p * 1000 + k * 100 + t), r->x[i * SU_IN_F + 1] = -(float)t;
  }
}

/* Series k of partition p into s: its windows first..last in flight, then
 * `held` records after them (the first of them window last's last target,
 * held again by the windower). */
static void add_series(ls_snapshot_t *s, int p, int k, int first, int last, int held) {
  rows_t w[8], h;
  ls_inflight_window_t wins[8];
  int const n = last - first + 1;
  cr_assert_leq(n, 8);
  for (int i = 0; i < n; i++) {
    rows_of(&w[i], p, k, T * (first + i), T + 1);
    wins[i] =
        (ls_inflight_window_t){KEYS * (first + i) + k, T + 1, w[i].offsets, w[i].times, w[i].x};
  }
  rows_of(&h, p, k, T * (last + 1), held);
  char key[16];
  int const len = snprintf(key, sizeof key, "s-%d-%d", p, k);
  ls_inflight_parts_t const parts = {{key, (size_t)len, p, first, 1000 + T * (last + 1) + held - 1,
                                      0, held, h.offsets, h.times, h.x, 0},
                                     n,
                                     wins};
  cr_assert_eq(ls_snapshot_add_inflight_parts(s, &parts), LS_OK, "%s", ls_last_error());
}

/* s (reset) at step: a base drawn from the step, then every series of
 * every partition with windows first..last and 2 held records. */
static void fill(ls_snapshot_t *s, int64_t step, int first, int last) {
  ls_snapshot_t *const base = su_snapshot(&SHAPE, 1, 0, step, 3, PARTS, (uint32_t)step);
  su_copy(s, base);
  ls_snapshot_destroy(base);
  for (int p = 0; p < PARTS; p++)
    for (int k = 0; k < KEYS; k++)
      add_series(s, p, k, first, last, 2);
}

static ls_snapshotter_t *writer(const char *dir, int level) {
  return su_writer(&SHAPE, dir, level, 3);
}

/* Fills the writer's staging snapshot, writes and commits it; checks that
 * it loads as the same series kept without references. */
static void take(ls_snapshotter_t *w, const char *dir, int64_t step, int first, int last) {
  fill(ls_snapshotter_staging(w), step, first, last);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK, "%s", ls_last_error());
  cr_assert_eq(busy, 0);
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  ls_snapshot_t *want = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &want), LS_OK);
  fill(want, step, first, last); /* no book: each series put together */
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  su_expect_same(want, back);
  ls_snapshot_destroy(back);
  ls_snapshot_destroy(want);
}

/* The segment files a directory holds (names starting "seg-"). */
static int count_segments(const char *dir) {
  DIR *const d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strncmp(e->d_name, "seg-", 4) == 0;
  closedir(d);
  return n;
}

/* The path of segment `number` of the only writer in DIR/segments or a
 * snapshot directory `in`. */
static void segment_path(char *buf, const char *in, uint64_t number) {
  DIR *const d = opendir(in);
  cr_assert_not_null(d, "%s", in);
  char want[32];
  snprintf(want, sizeof want, "-%012llu", (unsigned long long)number);
  buf[0] = '\0';
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t const len = strlen(e->d_name);
    if (strncmp(e->d_name, "seg-", 4) == 0 && len > 13 && !strcmp(e->d_name + len - 13, want))
      snprintf(buf, PATH_MAX, "%s/%s", in, e->d_name);
  }
  closedir(d);
  cr_assert_neq(buf[0], '\0', "no segment %llu in %s", (unsigned long long)number, in);
}

/* The windows a segment file holds. */
static size_t segment_windows(const char *path) {
  uint8_t *data = NULL;
  size_t size = 0;
  snap_file_t f;
  snap_segment_t g;
  snap_limits_t const lim = {0};
  cr_assert_eq(snap_read_file(path, &data, &size), LS_OK);
  cr_assert_eq(snap_file_parse(data, size, path, SNAP_KIND_SEGMENT, &lim, &f), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(snap_decode_segment(&f, &g), LS_OK, "%s", ls_last_error());
  size_t const n = g.n;
  snap_segment_free(&g);
  free(data);
  return n;
}

static nlink_t links_of(const char *path) {
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "%s", path);
  return st.st_nlink;
}

Test(segments, each_window_written_once) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 3);
  char segdir[PATH_MAX], path[PATH_MAX], snap[PATH_MAX];
  snprintf(segdir, sizeof segdir, "%s/segments", dir);
  take(w, dir, 10, 0, 1); /* windows 0 and 1 of every series: all new */
  segment_path(path, segdir, 0);
  cr_expect_eq(segment_windows(path), PARTS * KEYS * 2);
  take(w, dir, 20, 1, 2); /* window 0 trained, window 2 new */
  segment_path(path, segdir, 1);
  cr_expect_eq(segment_windows(path), PARTS * KEYS,
               "the second segment holds more than the "
               "windows new since the first");
  su_snap_path(snap, dir, 20, NULL);
  cr_expect_eq(count_segments(snap), 2, "snapshot 20 links segments 0 and 1");
  take(w, dir, 30, 2, 3); /* window 1 trained: segment 0 holds nothing in flight */
  cr_expect_eq(count_segments(segdir), 2, "the writer keeps segment 0 though none needs it");
  su_snap_path(snap, dir, 30, NULL);
  cr_expect_eq(count_segments(snap), 2, "snapshot 30 links segments 1 and 2");
  /* Segment 0 lives on in snapshots 10 and 20 only, which still load. */
  su_snap_path(snap, dir, 10, NULL);
  segment_path(path, snap, 0);
  cr_expect_eq(links_of(path), 2, "segment 0: the links of snapshots 10 and 20");
  take(w, dir, 40, 4, 4); /* nothing of before in flight */
  cr_expect_eq(count_segments(segdir), 1);
  ls_snapshotter_destroy(w);
  /* keep 3: snapshot 10 deleted, with its links; 20 still loads. */
  su_snap_path(snap, dir, 20, NULL);
  segment_path(path, snap, 0);
  cr_expect_eq(links_of(path), 1, "segment 0: snapshot 20's link only");
  ls_snapshot_t *back = NULL;
  cr_expect_eq(ls_snapshot_load(snap, 1, 0, &back), LS_OK, "%s", ls_last_error());
  ls_snapshot_destroy(back);
  su_remove(dir);
  free(dir);
}

Test(segments, a_missing_or_damaged_segment_is_passed_over) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 3);
  take(w, dir, 10, 0, 1);
  take(w, dir, 20, 1, 2);
  take(w, dir, 30, 2, 3);
  ls_snapshotter_destroy(w);
  char snap[PATH_MAX], path[PATH_MAX], found[PATH_MAX];
  su_snap_path(snap, dir, 30, NULL);
  segment_path(path, snap, 1);
  cr_assert_eq(unlink(path), 0);
  ls_snapshot_t *back = NULL;
  cr_expect_eq(ls_snapshot_load(snap, 1, 0, &back), LS_ERR_IO,
               "a snapshot without a segment "
               "it references loaded");
  cr_expect_eq(ls_snapshot_find_latest(dir, NULL, NULL, found, sizeof found), LS_OK, "%s",
               ls_last_error());
  su_snap_path(path, dir, 20, NULL);
  cr_expect_str_eq(found, path, "the newest good snapshot is 20");
  /* Snapshot 20's link to segment 1 damaged (its own file: the writer's
   * link is gone, and snapshot 30's). */
  segment_path(path, found, 1);
  su_flip_bit(path, su_file_size(path) / 2, 3);
  cr_expect_eq(ls_snapshot_load(found, 1, 0, &back), LS_ERR_CORRUPT);
  cr_expect_eq(ls_snapshot_find_latest(dir, NULL, NULL, found, sizeof found), LS_OK);
  su_snap_path(path, dir, 10, NULL);
  cr_expect_str_eq(found, path, "the newest good snapshot is 10");
  su_remove(dir);
  free(dir);
}

/* A section table whose raw sizes are not its frames' (a file written by
 * another program, every checksum right) is refused as the file is parsed,
 * before a decoder allocates what it claims: a size past what the stored
 * bytes can hold, and one a few bytes off what its frame says. */
Test(segments, a_table_that_claims_more_than_its_frames_is_refused) {
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 3);
  take(w, dir, 10, 0, 1);
  ls_snapshotter_destroy(w);
  char snap[PATH_MAX], path[PATH_MAX];
  su_snap_path(snap, dir, 10, NULL);
  segment_path(path, snap, 0);
  uint8_t *data = NULL;
  size_t size = 0;
  cr_assert_eq(snap_read_file(path, &data, &size), LS_OK);
  uint8_t *const tail = data + size - SNAP_TAIL_BYTES;
  uint32_t const n = snap_get_u32(tail);
  uint8_t *const windows = tail - (size_t)n * SNAP_ENTRY_BYTES + SNAP_ENTRY_BYTES; /* entry 1 */
  cr_assert_eq(snap_get_u32(windows), SNAP_SEGMENT_WINDOWS);
  uint64_t const raw = snap_get_u64(windows + 24);
  uint64_t const claims[] = {1ull << 40, raw + 8};
  for (int k = 0; k < 2; k++) {
    snap_put_u64(windows + 24, claims[k]);
    snap_put_u32(tail + 4,
                 base_crc32c(0, tail - (size_t)n * SNAP_ENTRY_BYTES, (size_t)n * SNAP_ENTRY_BYTES));
    snap_put_u32(data + size - 4, base_crc32c(0, data, size - 4));
    snap_file_t f;
    snap_limits_t const lim = {0};
    cr_expect_eq(snap_file_parse(data, size, path, SNAP_KIND_SEGMENT, &lim, &f), LS_ERR_CORRUPT,
                 "a table claiming %llu bytes", (unsigned long long)claims[k]);
    cr_expect(strstr(ls_last_error(), "'segment_windows' is not a zstd frame"), "%s",
              ls_last_error());
  }
  free(data);
  su_remove(dir);
  free(dir);
}

/* Creates an empty file dir/name. */
static void touch(const char *dir, const char *name) {
  char path[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int const fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert_geq(fd, 0, "%s", path);
  close(fd);
}

Test(segments, an_earlier_run_s_are_deleted_at_the_first_shard) {
  char *const dir = su_temp_dir();
  char segdir[PATH_MAX], path[2 * PATH_MAX];
  snprintf(segdir, sizeof segdir, "%s/segments", dir);
  cr_assert_eq(mkdir(segdir, 0755), 0);
  touch(segdir, "seg-r0-00000000000000aa-000000000007");      /* another writer of rank 0 */
  touch(segdir, ".seg-r0-00000000000000aa-000000000008.tmp"); /* one it was writing */
  touch(segdir, "seg-r3-00000000000000bb-000000000001");      /* a rank this run lacks */
  touch(segdir, "notes");                                     /* not a segment */
  ls_snapshotter_t *const w = writer(dir, 3);
  take(w, dir, 10, 0, 0);
  ls_snapshotter_destroy(w);
  cr_expect_eq(count_segments(segdir), 1, "only this run's segment is left");
  snprintf(path, sizeof path, "%s/notes", segdir);
  cr_expect_eq(access(path, F_OK), 0, "a file not a segment was deleted");
  snprintf(path, sizeof path, "%s/.seg-r0-00000000000000aa-000000000008.tmp", segdir);
  cr_expect_neq(access(path, F_OK), 0, "a segment being written by a dead run was kept");
  su_remove(dir);
  free(dir);
}

/* One series of partition 0 into the writer's staging snapshot at step 20
 * (its window 1 by the old book: not written); the error of its add. */
static ls_err_t add_one(ls_snapshotter_t *w) {
  ls_snapshot_t *const s = ls_snapshotter_staging(w);
  ls_snapshot_t *const base = su_snapshot(&SHAPE, 1, 0, 20, 3, PARTS, 20);
  su_copy(s, base);
  ls_snapshot_destroy(base);
  rows_t win, h;
  rows_of(&win, 0, 0, T, T + 1);
  rows_of(&h, 0, 0, 2 * T, 2);
  ls_inflight_window_t const wins[1] = {{KEYS + 0, T + 1, win.offsets, win.times, win.x}};
  ls_inflight_parts_t const parts = {
      {"s-0-0", 5, 0, 1, 1000 + 2 * T + 1, 0, 2, h.offsets, h.times, h.x, 0}, 1, wins};
  return ls_snapshot_add_inflight_parts(s, &parts);
}

/* One try of the test below; 0 when the writer had finished before this
 * thread looked (held off the cores that long: nothing shown, try again).
 * The writer's thread is busy from the submit until it has written; busy
 * after the add, it was busy all through it. */
static int fill_while_writing(void) {
  char *const dir = su_temp_dir();
  /* Level 19 on 4000 series: seconds of work, so that the second staging
   * snapshot is filled while the first is still being written. */
  ls_snapshotter_t *const w = writer(dir, 19);
  ls_snapshot_t *const big = su_snapshot(&SHAPE, 1, 0, 10, 4000, PARTS, 1);
  ls_snapshot_t *const s = ls_snapshotter_staging(w);
  su_copy(s, big);
  for (int p = 0; p < PARTS; p++)
    for (int k = 0; k < KEYS; k++)
      add_series(s, p, k, 0, 1, 2);
  int busy = -1;
  cr_assert_eq(ls_snapshotter_submit(w, &busy), LS_OK, "%s", ls_last_error());
  ls_err_t const added = add_one(w);
  ls_snapshotter_status_t st;
  cr_assert_eq(ls_snapshotter_poll(w, &st), LS_OK);
  int const shown = st.busy;
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  if (shown) {
    cr_expect_eq(added, LS_ERR_STATE, "a series kept while the writer wrote was taken");
    cr_expect(strstr(ls_last_error(), "idle") != NULL, "%s", ls_last_error());
  }
  /* Idle, the staging snapshot fills and goes (after an add refused too). */
  ls_snapshot_reset(ls_snapshotter_staging(w));
  fill(ls_snapshotter_staging(w), 20, 1, 2);
  cr_expect_eq(ls_snapshotter_submit(w, &busy), LS_OK, "%s", ls_last_error());
  cr_expect_eq(busy, 0);
  cr_expect_eq(ls_snapshotter_flush(w), LS_OK, "%s", ls_last_error());
  ls_snapshotter_destroy(w);
  ls_snapshot_destroy(big);
  su_remove(dir);
  free(dir);
  return shown;
}

Test(segments, filled_while_the_writer_wrote_is_refused) {
  int shown = 0;
  for (int i = 0; i < 5 && !shown; i++)
    shown = fill_while_writing();
  cr_assert(shown, "in 5 tries the first snapshot was always written before the second was filled");
}

Test(segments, without_a_writer_series_are_kept_whole) {
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  cr_assert_eq(ls_snapshot_set_inflight_features(s, SU_IN_F), LS_OK);
  add_series(s, 0, 1, 2, 4, 3); /* windows 2..4 (records 8..20), then records 20..22 */
  cr_assert_eq(ls_snapshot_inflight_count(s), 1);
  ls_inflight_t in;
  cr_assert_eq(ls_snapshot_get_inflight(s, 0, &in), LS_OK, "%s", ls_last_error());
  cr_expect_eq(in.rows, 15, "records 8..22, each once");
  cr_expect_eq(in.index, 2);
  for (int r = 0; r < in.rows; r++) {
    cr_expect_eq(in.offsets[r], 1 + KEYS * (8 + r));
    cr_expect_eq(in.x[r * SU_IN_F], (float)(100 + 8 + r));
  }
  /* A staging snapshot's series by reference cannot be read back, nor its
   * shard written but by its writer. */
  char *const dir = su_temp_dir();
  ls_snapshotter_t *const w = writer(dir, 1);
  fill(ls_snapshotter_staging(w), 10, 0, 1);
  cr_expect_eq(ls_snapshot_get_inflight(ls_snapshotter_staging(w), 3, &in), LS_ERR_STATE);
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  cr_expect_eq(ls_snapshot_write_shard(ls_snapshotter_staging(w), dir, &conf), LS_ERR_STATE);
  ls_snapshotter_destroy(w);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

Test(segments, two_ranks_reshard_onto_one) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  ls_snapshotter_t *w[2] = {NULL, NULL};
  ls_snapshot_t *want = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &want), LS_OK);
  cr_assert_eq(ls_snapshot_set_inflight_features(want, SU_IN_F), LS_OK);
  for (int64_t step = 10; step <= 20; step += 10) {
    for (int r = 0; r < 2; r++) {
      if (w[r] == NULL) cr_assert_eq(ls_snapshotter_new(dir, &SHAPE, &conf, &w[r]), LS_OK);
      ls_snapshot_t *const base = su_snapshot(&SHAPE, 2, r, step, 3, 2, (uint32_t)(step + r));
      ls_snapshot_t *const s = ls_snapshotter_staging(w[r]);
      su_copy(s, base);
      ls_snapshot_destroy(base);
      int const first = step == 10 ? 0 : 1;
      for (int p = r; p < 4; p += 2) /* partition p % 2 == r */
        for (int k = 0; k < KEYS; k++) {
          add_series(s, p, k, first, first + 1, 2);
          if (step == 20) add_series(want, p, k, first, first + 1, 2);
        }
      int busy = -1;
      cr_assert_eq(ls_snapshotter_submit(w[r], &busy), LS_OK, "%s", ls_last_error());
      cr_assert_eq(ls_snapshotter_flush(w[r]), LS_OK, "%s", ls_last_error());
    }
    int busy = -1;
    cr_assert_eq(ls_snapshotter_commit(w[0], step, 2, &busy), LS_OK);
    cr_assert_eq(ls_snapshotter_flush(w[0]), LS_OK, "%s", ls_last_error());
  }
  char path[PATH_MAX];
  su_snap_path(path, dir, 20, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  /* The base's own series in flight (su_snapshot's) come first in each
   * shard; ours are the last KEYS * 2 of each rank's. */
  size_t matched = 0;
  for (size_t i = 0; i < ls_snapshot_inflight_count(back); i++) {
    ls_inflight_t a, b;
    cr_assert_eq(ls_snapshot_get_inflight(back, i, &a), LS_OK);
    for (size_t j = 0; j < ls_snapshot_inflight_count(want); j++) {
      cr_assert_eq(ls_snapshot_get_inflight(want, j, &b), LS_OK);
      if (a.key_len != b.key_len || memcmp(a.key, b.key, a.key_len) != 0) continue;
      cr_expect(a.partition == b.partition && a.index == b.index && a.rows == b.rows &&
                a.last_time == b.last_time && a.reset == b.reset);
      cr_expect_arr_eq(a.offsets, b.offsets, (size_t)a.rows * sizeof *a.offsets);
      cr_expect_arr_eq(a.x, b.x, (size_t)a.rows * SU_IN_F * sizeof *a.x);
      matched++;
    }
  }
  cr_expect_eq(matched, ls_snapshot_inflight_count(want), "series by reference lost re-sharding");
  ls_snapshot_destroy(back);
  ls_snapshot_destroy(want);
  ls_snapshotter_destroy(w[0]);
  ls_snapshotter_destroy(w[1]);
  su_remove(dir);
  free(dir);
}
