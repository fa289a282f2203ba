/*
 * Module sections (include/lstream/state.h, format 5): what a module puts
 * comes back bit for bit, in every shard and across a change of world; a
 * reader skips an optional section it does not know (a later version's)
 * and refuses a required one, naming it; a later reader finds no section in
 * an earlier snapshot and falls back to its default; the format-4 golden
 * snapshot still loads.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_util.h"

static const ls_shape_t SHAPE = {3, 5, 2, 2}; /* I, H, L, O */

/* Ids no version of lstream has used: the sections a "later version" adds. */
enum { LATER_OPTIONAL = 1000, LATER_REQUIRED = 1001 };

/* Writes a world-rank snapshot at step 10 whose ranks carry the sections
 * that put() gives them, and commits it under dir. */
static void write_with(const char *dir, int world, void (*put)(ls_snapshot_t *snap, int rank)) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int r = 0; r < world; r++) {
    ls_snapshot_t *const s = su_snapshot(&SHAPE, world, r, 10, 7, 5, 99u + (uint32_t)r);
    cr_assert_not_null(s);
    if (put != NULL) put(s, r);
    cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK, "%s", ls_last_error());
    ls_snapshot_destroy(s);
  }
  cr_assert_eq(ls_snapshot_commit(dir, 10, world, 3), LS_OK, "%s", ls_last_error());
}

static ls_snapshot_t *load(const char *dir, int world, int rank) {
  char path[PATH_MAX];
  su_snap_path(path, dir, 10, NULL);
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_load(path, world, rank, &s), LS_OK, "%s", ls_last_error());
  return s;
}

/* The text a module keeps, per rank; floats with a NaN payload and -0. */
static float floats[6] = {1.5f, -0.0f, 3.25f, 1e-40f, 7.0f, -2.0f};

static void put_later(ls_snapshot_t *s, int rank) {
  char text[64];
  snprintf(text, sizeof text, "rank %d's settings", rank);
  cr_assert_eq(ls_snapshot_put_section(s, LS_SNAPSHOT_SECTION_SETTINGS, 1, LS_SNAPSHOT_REQUIRED,
                                       text, strlen(text)),
               LS_OK);
  cr_assert_eq(
      ls_snapshot_put_section(s, LATER_OPTIONAL, 3, LS_SNAPSHOT_FLOATS, floats, sizeof floats),
      LS_OK, "%s", ls_last_error());
}

static void put_later_required(ls_snapshot_t *s, int rank) {
  put_later(s, rank);
  cr_assert_eq(ls_snapshot_put_section(s, LATER_REQUIRED, 1, LS_SNAPSHOT_REQUIRED, "x", 1), LS_OK);
}

/* What was put comes back, with its version; a replaced section replaces. */
Test(sections, round_trip_and_replace) {
  char *const dir = su_temp_dir();
  write_with(dir, 1, put_later);
  ls_snapshot_t *const s = load(dir, 1, 0);
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  cr_assert_eq(ls_snapshot_get_section(s, LS_SNAPSHOT_SECTION_SETTINGS, &version, &data, &bytes),
               LS_OK);
  cr_expect_eq(version, 1);
  cr_expect(bytes == strlen("rank 0's settings") && !memcmp(data, "rank 0's settings", bytes));
  cr_assert_eq(ls_snapshot_get_section(s, LATER_OPTIONAL, &version, &data, &bytes), LS_OK);
  cr_expect_eq(version, 3);
  cr_expect(bytes == sizeof floats && !memcmp(data, floats, bytes), "floats bit for bit");
  cr_assert_eq(ls_snapshot_put_section(s, LATER_OPTIONAL, 4, 0, "ab", 2), LS_OK);
  cr_assert_eq(ls_snapshot_get_section(s, LATER_OPTIONAL, &version, &data, &bytes), LS_OK);
  cr_expect(version == 4 && bytes == 2 && !memcmp(data, "ab", 2), "replaced");
  ls_snapshot_file_t f;
  cr_assert_eq(ls_snapshot_get_file(s, &f), LS_OK);
  cr_expect_eq(f.version, 7);
  int seen = 0;
  for (int i = 0; i < f.n_sections; i++)
    if (f.sections[i].id == LATER_OPTIONAL) {
      seen = 1;
      cr_expect(f.sections[i].version == 3 && !f.sections[i].required && f.sections[i].shuffled);
      cr_expect_str_eq(f.sections[i].name, "?", "a module section this version does not name");
    }
  cr_expect(seen, "the file lists the later section");
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

/* Direction 1: a snapshot of a later version, which added an optional
 * section, loads here and resumes (the section is skipped); one that added
 * a required section is refused with a message naming it. */
Test(sections, later_optional_skipped_required_refused) {
  uint32_t const known[] = {LS_SNAPSHOT_SECTION_SETTINGS};
  char *const dir = su_temp_dir();
  write_with(dir, 1, put_later);
  ls_snapshot_t *s = load(dir, 1, 0);
  cr_expect_eq(ls_snapshot_check_sections(s, known, 1), LS_OK, "%s", ls_last_error());
  ls_snapshot_destroy(s);
  su_remove(dir);

  write_with(dir, 1, put_later_required);
  s = load(dir, 1, 0);
  ls_error_clear();
  cr_expect_eq(ls_snapshot_check_sections(s, known, 1), LS_ERR_UNSUPPORTED);
  cr_expect(strstr(ls_last_error(), "section 1001") != NULL &&
                strstr(ls_last_error(), "later lstream") != NULL,
            "%s", ls_last_error());
  uint32_t const all[] = {LS_SNAPSHOT_SECTION_SETTINGS, LATER_REQUIRED};
  cr_expect_eq(ls_snapshot_check_sections(s, all, 2), LS_OK, "a reader that knows it");
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

/* Direction 2: this version's snapshot (without the later section) loads in
 * the later version, which finds no such section and takes its default. */
Test(sections, earlier_snapshot_has_none) {
  char *const dir = su_temp_dir();
  write_with(dir, 1, NULL);
  ls_snapshot_t *const s = load(dir, 1, 0);
  uint32_t version = 7;
  const void *data = NULL;
  size_t bytes = 0;
  ls_error_clear();
  cr_expect_eq(ls_snapshot_get_section(s, LATER_OPTIONAL, &version, &data, &bytes),
               LS_ERR_NOT_FOUND);
  cr_expect(strstr(ls_last_error(), "no section 1000") != NULL, "%s", ls_last_error());
  uint32_t const known[] = {LATER_OPTIONAL};
  cr_expect_eq(ls_snapshot_check_sections(s, known, 1), LS_OK);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

/* Each shard keeps its own; a resume on another world reads rank 0's. */
Test(sections, per_shard_and_reshard) {
  char *const dir = su_temp_dir();
  write_with(dir, 2, put_later);
  for (int world = 1; world <= 3; world++)
    for (int rank = 0; rank < world; rank++) {
      ls_snapshot_t *const s = load(dir, world, rank);
      uint32_t version = 0;
      const void *data = NULL;
      size_t bytes = 0;
      cr_assert_eq(
          ls_snapshot_get_section(s, LS_SNAPSHOT_SECTION_SETTINGS, &version, &data, &bytes), LS_OK);
      char want[64];
      snprintf(want, sizeof want, "rank %d's settings", world == 2 ? rank : 0);
      cr_expect(bytes == strlen(want) && !memcmp(data, want, bytes), "world %d rank %d: %.*s",
                world, rank, (int)bytes, (const char *)data);
      ls_snapshot_destroy(s);
    }
  su_remove(dir);
  free(dir);
}

/* What a module reads of every shard when a resume re-shards: each shard's
 * own sections, checked against the manifest; a damaged shard refused. */
Test(sections, every_shards_own) {
  char *const dir = su_temp_dir();
  write_with(dir, 3, put_later);
  char path[PATH_MAX];
  su_snap_path(path, dir, 10, NULL);
  ls_snapshot_manifest_t *man = NULL;
  cr_assert_eq(ls_snapshot_manifest_read(path, &man), LS_OK, "%s", ls_last_error());
  for (int rank = 0; rank < 3; rank++) {
    ls_snapshot_t *s = NULL;
    cr_assert_eq(ls_snapshot_load_sections(man, rank, &s), LS_OK, "%s", ls_last_error());
    uint32_t version = 0;
    const void *data = NULL;
    size_t bytes = 0;
    cr_assert_eq(ls_snapshot_get_section(s, LS_SNAPSHOT_SECTION_SETTINGS, &version, &data, &bytes),
                 LS_OK);
    char want[64];
    snprintf(want, sizeof want, "rank %d's settings", rank);
    cr_expect(bytes == strlen(want) && !memcmp(data, want, bytes), "rank %d: %.*s", rank,
              (int)bytes, (const char *)data);
    cr_expect_eq(ls_snapshot_get_section(s, LATER_OPTIONAL, &version, &data, &bytes), LS_OK);
    cr_expect(bytes == sizeof floats && !memcmp(data, floats, bytes));
    ls_snapshot_destroy(s);
  }
  ls_snapshot_t *s = (ls_snapshot_t *)0x1;
  cr_expect_eq(ls_snapshot_load_sections(NULL, 0, &s), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_load_sections(man, 0, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_load_sections(man, 3, &s), LS_ERR_INVALID_ARG, "rank 3 of 3");
  cr_expect_null(s, "out cleared on error");
  cr_expect_eq(ls_snapshot_load_sections(man, -1, &s), LS_ERR_INVALID_ARG);
  /* One byte of shard 1 flipped: refused, the others still load. */
  char shard[PATH_MAX];
  su_snap_path(shard, dir, 10, "shard-1");
  FILE *const f = fopen(shard, "r+b");
  cr_assert_not_null(f);
  cr_assert_eq(fseek(f, 40, SEEK_SET), 0);
  const int c = fgetc(f);
  cr_assert_eq(fseek(f, 40, SEEK_SET), 0);
  fputc(c ^ 0xff, f);
  fclose(f);
  cr_expect_neq(ls_snapshot_load_sections(man, 1, &s), LS_OK, "a damaged shard is refused");
  cr_expect_null(s);
  cr_expect_eq(ls_snapshot_load_sections(man, 2, &s), LS_OK, "%s", ls_last_error());
  ls_snapshot_destroy(s);
  ls_snapshot_manifest_destroy(man);
  su_remove(dir);
  free(dir);
}

/* The format-4 snapshot committed under golden/ loads, with no module
 * section. */
Test(sections, format_4_loads) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/golden/v4/snapshots/snap-000000000012", LSTREAM_TEST_STATE_DIR);
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &s), LS_OK, "%s", ls_last_error());
  ls_snapshot_file_t f;
  cr_assert_eq(ls_snapshot_get_file(s, &f), LS_OK);
  cr_expect_eq(f.version, 4);
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  cr_expect_eq(ls_snapshot_get_section(s, LS_SNAPSHOT_SECTION_SETTINGS, &version, &data, &bytes),
               LS_ERR_NOT_FOUND);
  cr_expect_eq(ls_snapshot_series_count(s), 6);
  ls_snapshot_destroy(s);
}

Test(sections, arguments) {
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  cr_expect_eq(ls_snapshot_put_section(NULL, 64, 1, 0, "a", 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_put_section(s, 64, 1, 0, NULL, 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_put_section(s, 12, 1, 0, "a", 1), LS_ERR_INVALID_ARG, "the container's");
  cr_expect_eq(ls_snapshot_put_section(s, 1024, 1, 0, "a", 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_put_section(s, 64, 65536, 0, "a", 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_put_section(s, 64, 1, 4, "a", 1), LS_ERR_INVALID_ARG, "unknown flag");
  cr_expect_eq(ls_snapshot_put_section(s, 64, 1, LS_SNAPSHOT_FLOATS, "abc", 3), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_put_section(s, 64, 1, 0, NULL, 0), LS_OK, "an empty section");
  cr_expect_eq(ls_snapshot_put_section(s, LS_SNAPSHOT_SECTION_EVICTED, 1, 0, "a", 1),
               LS_ERR_INVALID_ARG, "the snapshot's own");
  for (uint32_t id = 65; id < 65 + LS_SNAPSHOT_MODULE_SECTIONS; id++)
    if (id != LS_SNAPSHOT_SECTION_EVICTED)
      cr_assert_eq(ls_snapshot_put_section(s, id, 0, 0, "a", 1), LS_OK);
  cr_expect_eq(ls_snapshot_put_section(s, 900, 0, 0, "a", 1), LS_ERR_INVALID_ARG, "too many");
  cr_expect_eq(ls_snapshot_get_section(s, 64, NULL, &data, &bytes), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_get_section(NULL, 64, &version, &data, &bytes), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_snapshot_check_sections(NULL, NULL, 0), LS_ERR_INVALID_ARG);
  ls_snapshot_reset(s);
  cr_expect_eq(ls_snapshot_get_section(s, 64, &version, &data, &bytes), LS_ERR_NOT_FOUND,
               "a reset forgets them");
  ls_snapshot_destroy(s);
}
