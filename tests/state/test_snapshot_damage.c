/*
 * Damaged snapshots are rejected with a message naming the file and the
 * fault, and ls_snapshot_find_latest falls back to the previous good one
 * and says so: a truncated shard or manifest, a flipped bit in every
 * section, header, table and tail, a missing shard, a wrong version, a
 * wrong magic number, a shard of another snapshot or run; a half-written
 * temporary directory is never visible; the commit refuses shards with a
 * damaged container or meta section.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snap_util.h"

static const ls_shape_t SHAPE = {2, 12, 2, 2}; /* I, H, L, O */

/* What find_latest reported. */
typedef struct reports_s {
  int n;
  char path[4][PATH_MAX];
  char why[4][1024];
} reports_t;

static void collect(void *opaque, const char *path, ls_err_t err, const char *why) {
  reports_t *const r = opaque;
  cr_assert_neq(err, LS_OK);
  if (r->n < 4) {
    snprintf(r->path[r->n], PATH_MAX, "%s", path);
    snprintf(r->why[r->n], 1024, "%s", why);
  }
  r->n++;
}

/* A directory with 3-rank snapshots of steps 10, 20 and 30. */
static char *three_snapshots(void) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int64_t step = 10; step <= 30; step += 10)
    su_write_snapshot(dir, &SHAPE, 3, step, 40, (uint32_t)step, &conf, 5, NULL);
  return dir;
}

/* find_latest picks `want` after rejecting snapshot `bad` (when > 0) with a
 * reason that names `file` and contains `fault`. */
static void expect_latest(const char *dir, int64_t want, int64_t bad, const char *file,
                          const char *fault) {
  reports_t r = {0};
  char got[PATH_MAX], path[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, collect, &r, got, sizeof got), LS_OK, "%s",
               ls_last_error());
  su_snap_path(path, dir, want, NULL);
  cr_assert_str_eq(got, path);
  if (bad < 0) {
    cr_assert_eq(r.n, 0, "rejected %s: %s", r.path[0], r.why[0]);
    return;
  }
  cr_assert_eq(r.n, 1, "%d rejections", r.n);
  su_snap_path(path, dir, bad, NULL);
  cr_assert_str_eq(r.path[0], path);
  cr_assert(strstr(r.why[0], file) != NULL, "'%s' does not name %s", r.why[0], file);
  cr_assert(strstr(r.why[0], fault) != NULL, "'%s' does not say '%s'", r.why[0], fault);
}

/* Loading rank's part of snapshot `step` fails with err and a message
 * naming file and fault. */
static void expect_load_fails(const char *dir, int64_t step, int rank, ls_err_t err,
                              const char *file, const char *fault) {
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *s = NULL;
  ls_error_clear();
  cr_assert_eq(ls_snapshot_load(path, 3, rank, &s), err, "%s", ls_last_error());
  cr_assert_null(s);
  cr_assert(strstr(ls_last_error(), file) && strstr(ls_last_error(), fault),
            "'%s' does not name %s and '%s'", ls_last_error(), file, fault);
}

static void copy_file(const char *from, const char *to) {
  FILE *const in = fopen(from, "rb"), *const out = fopen(to, "wb");
  cr_assert(in && out, "cannot copy %s to %s", from, to);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
    cr_assert_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  cr_assert_eq(fclose(out), 0);
}

static void done(char *dir) {
  su_remove(dir);
  free(dir);
}

Test(damage, intact) {
  char *const dir = three_snapshots();
  expect_latest(dir, 30, -1, NULL, NULL);
  done(dir);
}

Test(damage, truncated_shard) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-1");
  su_truncate(path, su_file_size(path) - 100);
  expect_latest(dir, 20, 30, "snap-000000000030/shard-1", "truncated");
  expect_load_fails(dir, 30, 1, LS_ERR_CORRUPT, "shard-1", "truncated");
  su_truncate(path, 20); /* shorter than a header */
  expect_latest(dir, 20, 30, "shard-1", "truncated");
  done(dir);
}

Test(damage, truncated_manifest) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "manifest");
  su_truncate(path, su_file_size(path) - 1);
  expect_latest(dir, 20, 30, "snap-000000000030/manifest", "truncated");
  done(dir);
}

/* A flipped bit anywhere in a file: in each section, the fault names the
 * section; in the header, table or tail, the whole file. Flipping it back
 * makes the snapshot good again. */
static void flip_everywhere(const char *dir, int rank) {
  char path[PATH_MAX], snap[PATH_MAX], name[16];
  su_snap_path(snap, dir, 30, NULL);
  ls_snapshot_manifest_t *man = NULL;
  cr_assert_eq(ls_snapshot_manifest_read(snap, &man), LS_OK);
  ls_snapshot_file_t file;
  if (rank < 0) {
    snprintf(name, sizeof name, "manifest");
    cr_assert_eq(ls_snapshot_manifest_file(man, &file), LS_OK);
  } else {
    snprintf(name, sizeof name, "shard-%d", rank);
    ls_snapshot_t *s = NULL;
    cr_assert_eq(ls_snapshot_load_shard(man, rank, &s), LS_OK, "%s", ls_last_error());
    cr_assert_eq(ls_snapshot_get_file(s, &file), LS_OK);
    ls_snapshot_destroy(s);
  }
  ls_snapshot_manifest_destroy(man);
  su_snap_path(path, dir, 30, name);
  for (int i = 0; i < file.n_sections; i++) {
    const ls_snapshot_section_t *const sec = &file.sections[i];
    uint64_t const at = sec->offset + sec->stored / 2;
    char fault[64];
    snprintf(fault, sizeof fault, "section '%s'", sec->name);
    su_flip_bit(path, at, i % 8);
    expect_latest(dir, 20, 30, name, fault);
    su_flip_bit(path, at, i % 8);
    expect_latest(dir, 30, -1, NULL, NULL);
  }
  /* header (step field), table (a size), tail (the file checksum) */
  uint64_t const size = su_file_size(path);
  uint64_t const table = size - 32 - 40 * (uint64_t)file.n_sections;
  struct {
    uint64_t at;
    const char *fault;
  } const places[] = {{26, "whole-file checksum"},
                      {20, "whole-file checksum"},
                      {table + 17, "section table"},
                      {size - 2, "whole-file checksum"},
                      {size - 10, "end marker"}};
  for (size_t k = 0; k < sizeof places / sizeof places[0]; k++) {
    su_flip_bit(path, places[k].at, 3);
    expect_latest(dir, 20, 30, name, places[k].fault);
    su_flip_bit(path, places[k].at, 3);
  }
  expect_latest(dir, 30, -1, NULL, NULL);
}

Test(damage, bit_flip_in_every_section_and_field) {
  char *const dir = three_snapshots();
  flip_everywhere(dir, 0);  /* shard with the model: 7 sections */
  flip_everywhere(dir, 2);  /* shard without: 5 sections */
  flip_everywhere(dir, -1); /* the manifest */
  done(dir);
}

Test(damage, missing_shard) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-2");
  cr_assert_eq(unlink(path), 0);
  expect_latest(dir, 20, 30, "snap-000000000030/shard-2", "missing");
  expect_load_fails(dir, 30, 2, LS_ERR_IO, "shard-2", "missing");
  done(dir);
}

Test(damage, wrong_version) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-1");
  su_poke_u32(path, 8, 8);
  expect_latest(dir, 20, 30, "shard-1", "format version 8, this build reads versions 4 to 7");
  expect_load_fails(dir, 30, 1, LS_ERR_CORRUPT, "shard-1", "version 8");
  done(dir);
}

/* A snapshot of format version 1 (before the normaliser) is refused with a
 * message that says why and what to do. */
Test(damage, version_1_is_refused_clearly) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-0");
  su_poke_u32(path, 8, 1);
  expect_latest(dir, 20, 30, "shard-0",
                "format version 1, written by an lstream without the "
                "per-series normaliser");
  expect_load_fails(dir, 30, 0, LS_ERR_CORRUPT, "shard-0", "--resume none");
  done(dir);
}

/* Version 2 (no records in flight: its resume offsets could stay at a
 * quiet series' oldest record) is refused the same way. */
Test(damage, version_2_is_refused_clearly) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-1");
  su_poke_u32(path, 8, 2);
  expect_latest(dir, 20, 30, "shard-1",
                "format version 2, written by an lstream that kept no "
                "records in flight");
  expect_load_fails(dir, 30, 1, LS_ERR_CORRUPT, "shard-1", "--resume none");
  done(dir);
}

/* Version 3 (either line of it: no forecasts going out, or no records in
 * flight in version 4's layout) is refused the same way. */
Test(damage, version_3_is_refused_clearly) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-0");
  su_poke_u32(path, 8, 3);
  expect_latest(dir, 20, 30, "shard-0",
                "format version 3, written by an lstream that kept no "
                "forecasts going out");
  expect_load_fails(dir, 30, 0, LS_ERR_CORRUPT, "shard-0", "--resume none");
  done(dir);
}

Test(damage, wrong_magic) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "manifest");
  su_poke_u32(path, 0, 0x464c457f); /* "\x7fELF" */
  expect_latest(dir, 20, 30, "manifest", "not a snapshot file (wrong magic number");
  done(dir);
}

Test(damage, shard_of_another_snapshot) {
  char *const dir = three_snapshots();
  char from[PATH_MAX], to[PATH_MAX];
  su_snap_path(from, dir, 20, "shard-1");
  su_snap_path(to, dir, 30, "shard-1");
  copy_file(from, to);
  expect_latest(dir, 20, 30, "shard-1", "written for step 20");
  done(dir);
}

Test(damage, shard_not_the_one_listed) {
  /* The same step, rank and world, but other content: only the manifest's
   * size and checksum tell. */
  char *const dir = three_snapshots();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  char *const other = su_temp_dir();
  su_write_snapshot(other, &SHAPE, 3, 30, 41, 99, &conf, 1, NULL);
  char from[PATH_MAX], to[PATH_MAX];
  su_snap_path(from, other, 30, "shard-1");
  su_snap_path(to, dir, 30, "shard-1");
  cr_assert_eq(rename(from, to), 0);
  expect_latest(dir, 20, 30, "shard-1", "not the shard the manifest lists");
  done(other);
  done(dir);
}

Test(damage, falls_back_twice_and_says_so) {
  char *const dir = three_snapshots();
  char path[PATH_MAX];
  su_snap_path(path, dir, 30, "shard-0");
  su_truncate(path, 1000);
  su_snap_path(path, dir, 20, "manifest");
  cr_assert_eq(unlink(path), 0);
  reports_t r = {0};
  char got[PATH_MAX], want[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, collect, &r, got, sizeof got), LS_OK);
  su_snap_path(want, dir, 10, NULL);
  cr_assert_str_eq(got, want);
  cr_assert_eq(r.n, 2);
  cr_assert(strstr(r.path[0], "snap-000000000030") && strstr(r.why[0], "truncated"));
  cr_assert(strstr(r.path[1], "snap-000000000020") && strstr(r.why[1], "manifest"));
  /* Nothing good at all: an error, after three reports. */
  su_snap_path(path, dir, 10, "shard-2");
  su_flip_bit(path, 100, 0);
  r.n = 0;
  cr_assert_eq(ls_snapshot_find_latest(dir, collect, &r, got, sizeof got), LS_ERR_CORRUPT);
  cr_assert_eq(r.n, 3);
  cr_assert(strstr(ls_last_error(), "no good snapshot"), "%s", ls_last_error());
  done(dir);
}

Test(damage, latest_missing_wrong_or_dangling) {
  char *const dir = three_snapshots();
  char latest[PATH_MAX];
  snprintf(latest, sizeof latest, "%s/latest", dir);
  cr_assert_eq(unlink(latest), 0);
  expect_latest(dir, 30, -1, NULL, NULL); /* the newest of all */
  FILE *f = fopen(latest, "w");
  fputs("snap-12\n", f);
  fclose(f);
  reports_t r = {0};
  char got[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, collect, &r, got, sizeof got), LS_OK);
  cr_assert(r.n == 1 && strstr(r.path[0], "latest") && strstr(r.why[0], "does not name"));
  f = fopen(latest, "w");
  fputs("snap-000000000040\n", f);
  fclose(f);
  r.n = 0;
  cr_assert_eq(ls_snapshot_find_latest(dir, collect, &r, got, sizeof got), LS_OK);
  cr_assert(r.n == 1 && strstr(r.path[0], "snap-000000000040") && strstr(r.why[0], "missing"));
  cr_assert(strstr(got, "snap-000000000030"));
  done(dir);
}

/* Ranks [from, to)'s shards of `step` (of 3) written, not committed. */
static void write_shards(const char *dir, int64_t step, int from, int to) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int r = from; r < to; r++) {
    ls_snapshot_t *s = su_snapshot(&SHAPE, 3, r, step, 10, 1, (uint32_t)step);
    cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK, "%s", ls_last_error());
    ls_snapshot_destroy(s);
  }
}

Test(damage, half_written_snapshot_never_visible) {
  char *const dir = three_snapshots();
  /* Step 40: two of three shards written, and a commit that finds the
   * third missing; step 50: shards written, never committed. */
  write_shards(dir, 40, 0, 2);
  cr_assert_eq(ls_snapshot_commit(dir, 40, 3, 5), LS_ERR_IO);
  cr_assert(strstr(ls_last_error(), ".tmp-snap-000000000040/shard-2") &&
                strstr(ls_last_error(), "missing"),
            "%s", ls_last_error());
  write_shards(dir, 50, 0, 3);
  expect_latest(dir, 30, -1, NULL, NULL);
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s/.tmp-snap-000000000050", dir);
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_load(tmp, 3, 0, &s), LS_ERR_IO);
  cr_assert(strstr(ls_last_error(), "manifest"), "%s", ls_last_error());
  done(dir);
}

Test(damage, empty_or_absent_directory) {
  char *const dir = su_temp_dir();
  char got[PATH_MAX] = "x", absent[PATH_MAX];
  cr_assert_eq(ls_snapshot_find_latest(dir, NULL, NULL, got, sizeof got), LS_OK);
  cr_assert_str_eq(got, "");
  snprintf(absent, sizeof absent, "%s/none", dir);
  cr_assert_eq(ls_snapshot_find_latest(absent, NULL, NULL, got, sizeof got), LS_OK);
  cr_assert_str_eq(got, "");
  done(dir);
}

Test(damage, shards_of_two_runs_never_committed) {
  char *const dir = three_snapshots();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int r = 0; r < 3; r++) {
    ls_snapshot_t *s = su_snapshot(&SHAPE, 3, r, 40, 10, 1, 40);
    ls_snapshot_info_t info;
    cr_assert_eq(ls_snapshot_get_info(s, &info), LS_OK);
    info.fingerprint += r == 2; /* rank 2 ran with another configuration */
    cr_assert_eq(ls_snapshot_set_info(s, &info), LS_OK);
    cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK);
    ls_snapshot_destroy(s);
  }
  cr_assert_eq(ls_snapshot_commit(dir, 40, 3, 5), LS_ERR_CORRUPT);
  cr_assert(strstr(ls_last_error(), "shard-2") && strstr(ls_last_error(), "fingerprint"), "%s",
            ls_last_error());
  expect_latest(dir, 30, -1, NULL, NULL);
  done(dir);
}

/* Section `id`'s bytes in a snapshot file, from its table (the format of
 * state/snapshot_format.h: a 32-byte tail whose first 4 bytes count the
 * 40-byte entries before it; an entry's id at 0, offset at 8, size at 16). */
static uint32_t section_span(const char *path, uint32_t id, uint64_t *at, uint64_t *stored) {
  FILE *const f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  uint64_t const size = su_file_size(path);
  uint8_t tail[32], e[40];
  cr_assert(fseek(f, (long)(size - 32), SEEK_SET) == 0 && fread(tail, 1, 32, f) == 32);
  uint32_t n;
  memcpy(&n, tail, 4);
  *at = *stored = 0;
  for (uint32_t i = 0; i < n; i++) {
    cr_assert(fseek(f, (long)(size - 32 - 40 * (uint64_t)(n - i)), SEEK_SET) == 0 &&
              fread(e, 1, 40, f) == 40);
    uint32_t got;
    memcpy(&got, e, 4);
    if (got == id) memcpy(at, e + 8, 8), memcpy(stored, e + 16, 8);
  }
  fclose(f);
  cr_assert_gt(*stored, 0, "%s has no section %u", path, id);
  return n;
}

/* The commit reads of each shard its container and meta section (its
 * writer checksummed the rest as it wrote it): damage there, or a shard cut
 * short, is refused and nothing is committed; damage in another section is
 * not read then, and finding the newest good snapshot refuses it. */
Test(damage, commit_checks_container_and_meta) {
  char *const dir = three_snapshots();
  write_shards(dir, 40, 0, 3);
  char path[PATH_MAX], cut[PATH_MAX];
  snprintf(path, sizeof path, "%s/.tmp-snap-000000000040/shard-0", dir);
  snprintf(cut, sizeof cut, "%s/.tmp-snap-000000000040/shard-2", dir);
  uint64_t meta_at, meta_n, other_at, other_n;
  section_span(path, 1, &meta_at, &meta_n);                      /* meta */
  uint32_t const n = section_span(path, 6, &other_at, &other_n); /* h and c */
  uint64_t const size = su_file_size(path), table = size - 32 - 40 * (uint64_t)n;
  struct {
    uint64_t at;
    const char *fault;
  } const places[] = {{meta_at + meta_n / 2, "section 'meta'"},
                      {table + 17, "section table"},
                      {size - 10, "end marker"},
                      {26, "step"}};
  for (size_t k = 0; k < sizeof places / sizeof places[0]; k++) {
    su_flip_bit(path, places[k].at, 1);
    cr_assert_eq(ls_snapshot_commit(dir, 40, 3, 5), LS_ERR_CORRUPT, "%s", places[k].fault);
    cr_assert(strstr(ls_last_error(), "shard-0") && strstr(ls_last_error(), places[k].fault),
              "'%s' does not name shard-0 and '%s'", ls_last_error(), places[k].fault);
    su_flip_bit(path, places[k].at, 1);
    expect_latest(dir, 30, -1, NULL, NULL);
  }
  uint64_t const whole = su_file_size(cut);
  su_truncate(cut, whole - 100);
  cr_assert_eq(ls_snapshot_commit(dir, 40, 3, 5), LS_ERR_CORRUPT);
  cr_assert(strstr(ls_last_error(), "shard-2") && strstr(ls_last_error(), "truncated"), "%s",
            ls_last_error());
  expect_latest(dir, 30, -1, NULL, NULL);
  write_shards(dir, 40, 2, 3); /* whole again */
  su_flip_bit(path, other_at + other_n / 2, 1);
  cr_assert_eq(ls_snapshot_commit(dir, 40, 3, 5), LS_OK, "%s", ls_last_error());
  expect_latest(dir, 30, 40, "snap-000000000040/shard-0", "damaged");
  done(dir);
}
