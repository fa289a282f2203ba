/*
 * Every snapshot function checks its arguments and says what is wrong:
 * NULL pointers, out-of-range values, calls out of order, content that a
 * part may not hold; destroy functions accept NULL.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_util.h"

static const ls_shape_t SHAPE = {2, 4, 1, 2}; /* I, H, L, O */

/* expr returns err and the message contains what. */
#define EXPECT_ERR(expr, err, what)                                                                \
  do {                                                                                             \
    ls_error_clear();                                                                              \
    cr_assert_eq((expr), (err), "%s: %s", #expr, ls_last_error());                                 \
    cr_assert(strstr(ls_last_error(), (what)) != NULL, "%s: '%s' lacks '%s'", #expr,               \
              ls_last_error(), (what));                                                            \
  } while (0)

Test(args, destroy_null) {
  ls_snapshot_destroy(NULL);
  ls_snapshot_manifest_destroy(NULL);
  ls_snapshotter_destroy(NULL);
  ls_snapshot_reset(NULL);
  ls_snapshot_conf_init(NULL);
}

Test(args, builders) {
  ls_snapshot_t *s = NULL;
  ls_shape_t const bad = {0, 4, 1, 2};
  EXPECT_ERR(ls_snapshot_new(NULL, 0, 0, &s), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_new(&SHAPE, 0, 0, NULL), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_eq(ls_snapshot_new(&bad, 0, 0, &s), LS_ERR_INVALID_ARG);
  cr_assert_null(s);
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);

  ls_snapshot_info_t info = {1, 2, 3, 2, 1, 0};
  EXPECT_ERR(ls_snapshot_set_info(NULL, &info), LS_ERR_INVALID_ARG, "NULL");
  info.step = -1;
  EXPECT_ERR(ls_snapshot_set_info(s, &info), LS_ERR_INVALID_ARG, "step -1");
  info.step = 1000000000000ll;
  EXPECT_ERR(ls_snapshot_set_info(s, &info), LS_ERR_INVALID_ARG, "out of range");
  info.step = 1, info.world = 0;
  EXPECT_ERR(ls_snapshot_set_info(s, &info), LS_ERR_INVALID_ARG, "world size 0");
  info.world = 2, info.rank = 2;
  EXPECT_ERR(ls_snapshot_set_info(s, &info), LS_ERR_INVALID_ARG, "rank 2");

  size_t n = 0;
  cr_assert_eq(ls_param_count(&SHAPE, &n), LS_OK);
  float *p = calloc(n + 1, sizeof *p);
  EXPECT_ERR(ls_snapshot_set_model(s, p, p, NULL, n, 0), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_set_model(s, p, p, p, n + 1, 0), LS_ERR_INVALID_ARG, "parameters");
  EXPECT_ERR(ls_snapshot_set_model(s, p, p, p, n, -1), LS_ERR_INVALID_ARG, "negative");
  EXPECT_ERR(ls_snapshot_set_engine(s, NULL), LS_ERR_INVALID_ARG, "engine is NULL");

  char key[256] = {0};
  float h[4] = {0}, c[4] = {0};
  ls_series_info_t si = {key, 0, 0, 0, 0, 0, -1, -1, 0};
  EXPECT_ERR(ls_snapshot_add_series(s, &si, h, c), LS_ERR_INVALID_ARG, "0 bytes");
  si.key_len = 256;
  EXPECT_ERR(ls_snapshot_add_series(s, &si, h, c), LS_ERR_INVALID_ARG, "256 bytes");
  si.key_len = 255, si.partition = -3;
  EXPECT_ERR(ls_snapshot_add_series(s, &si, h, c), LS_ERR_INVALID_ARG, "partition -3");
  si.partition = 0, si.key = NULL;
  EXPECT_ERR(ls_snapshot_add_series(s, &si, h, c), LS_ERR_INVALID_ARG, "key is NULL");
  si.key = key;
  EXPECT_ERR(ls_snapshot_add_series(s, &si, NULL, c), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_add_series_table(s, NULL), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_eq(ls_snapshot_series_count(s), 0, "a refused series was added");

  EXPECT_ERR(ls_snapshot_add_partition(s, -1, 0), LS_ERR_INVALID_ARG, "partition -1");
  EXPECT_ERR(ls_snapshot_add_partition(s, 1, -5), LS_ERR_INVALID_ARG, "offset -5");
  cr_assert_eq(ls_snapshot_add_partition(s, 1, 5), LS_OK);
  EXPECT_ERR(ls_snapshot_add_partition(s, 1, 6), LS_ERR_INVALID_ARG, "already");

  /* Accessors. */
  ls_snapshot_model_t m;
  ls_series_info_t out;
  int32_t part;
  int64_t off;
  const float *hp;
  ls_shape_t shape;
  EXPECT_ERR(ls_snapshot_get_model(s, &m), LS_ERR_STATE, "holds no model");
  EXPECT_ERR(ls_snapshot_get_series(s, 0, &out, NULL, NULL), LS_ERR_INVALID_ARG, "series 0");
  EXPECT_ERR(ls_snapshot_get_partition(s, 1, &part, &off), LS_ERR_INVALID_ARG, "partition 1");
  EXPECT_ERR(ls_snapshot_get_states(s, &hp, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_get_shape(NULL, &shape), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_get_info(s, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_get_file(s, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_export_model(s, "/tmp/x"), LS_ERR_STATE, "holds no model");
  EXPECT_ERR(ls_snapshot_export_states(NULL, 1, "/tmp/x"), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_eq(ls_snapshot_series_count(NULL), 0);
  cr_assert_eq(ls_snapshot_partition_count(NULL), 0);
  free(p);
  ls_snapshot_destroy(s);
}

/* The engine and the table must have the snapshot's shape. */
Test(args, engine_shape) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = (ls_shape_t){2, 5, 1, 2};
  ec.threads = 1;
  ls_engine_t *eng = NULL;
  cr_assert_eq(ls_engine_new(&ec, &eng), LS_OK);
  ls_series_table_t *tab = NULL;
  cr_assert_eq(ls_series_table_new(eng, 4, &tab), LS_OK);
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  EXPECT_ERR(ls_snapshot_set_engine(s, eng), LS_ERR_INVALID_ARG, "not the snapshot's");
  EXPECT_ERR(ls_snapshot_add_series_table(s, tab), LS_ERR_INVALID_ARG, "not the snapshot's");
  ls_snapshot_destroy(s);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
}

Test(args, conf) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  cr_assert_eq(ls_snapshot_conf_check(&conf), LS_OK);
  EXPECT_ERR(ls_snapshot_conf_check(NULL), LS_ERR_INVALID_ARG, "NULL");
  conf.level = 0;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "zstd level 0");
  conf.level = 99;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "zstd level 99");
  conf.level = LS_SNAPSHOT_LEVEL_MIN - 1;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "zstd level -51");
  conf.level = LS_SNAPSHOT_LEVEL_MIN;
  cr_assert_eq(ls_snapshot_conf_check(&conf), LS_OK);
  conf.level = 3, conf.workers = -1;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "-1 zstd workers");
  conf.workers = 0, conf.shuffle = 2;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "shuffle is 2");
  conf.shuffle = 1, conf.keep = 0;
  EXPECT_ERR(ls_snapshot_conf_check(&conf), LS_ERR_INVALID_ARG, "keep 0");
}

Test(args, write_and_commit) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  EXPECT_ERR(ls_snapshot_write_shard(s, dir, &conf), LS_ERR_STATE, "set_info");
  EXPECT_ERR(ls_snapshot_write_shard(NULL, dir, &conf), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_write_shard(s, NULL, &conf), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_write_shard(s, dir, NULL), LS_ERR_INVALID_ARG, "NULL");
  ls_snapshot_info_t info = {5, 1, 1, 1, 0, 0};
  cr_assert_eq(ls_snapshot_set_info(s, &info), LS_OK);
  EXPECT_ERR(ls_snapshot_write_shard(s, dir, &conf), LS_ERR_INVALID_ARG, "lacks a model");
  ls_snapshot_t *const with_model = su_snapshot(&SHAPE, 2, 1, 5, 1, 1, 1);
  size_t n = 0;
  cr_assert_eq(ls_param_count(&SHAPE, &n), LS_OK);
  float *const p = calloc(n, sizeof *p);
  cr_assert_eq(ls_snapshot_set_model(with_model, p, p, p, n, 0), LS_OK);
  EXPECT_ERR(ls_snapshot_write_shard(with_model, dir, &conf), LS_ERR_INVALID_ARG,
             "rank 1's part holds a model");
  EXPECT_ERR(ls_snapshot_commit(NULL, 5, 1, 1), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_commit(dir, -1, 1, 1), LS_ERR_INVALID_ARG, "step -1");
  EXPECT_ERR(ls_snapshot_commit(dir, 5, 0, 1), LS_ERR_INVALID_ARG, "world size 0");
  EXPECT_ERR(ls_snapshot_commit(dir, 5, 1, 0), LS_ERR_INVALID_ARG, "keep 0");
  EXPECT_ERR(ls_snapshot_commit(dir, 5, 1, 1), LS_ERR_IO, "no shard of step 5");
  free(p);
  ls_snapshot_destroy(with_model);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

Test(args, read) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  su_write_snapshot(dir, &SHAPE, 2, 8, 3, 1, &conf, 1, NULL);
  char path[PATH_MAX], small[8];
  su_snap_path(path, dir, 8, NULL);
  ls_snapshot_t *s = NULL;
  ls_snapshot_manifest_t *m = NULL;
  EXPECT_ERR(ls_snapshot_load(NULL, 1, 0, &s), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_load(path, 0, 0, &s), LS_ERR_INVALID_ARG, "world 0");
  EXPECT_ERR(ls_snapshot_load(path, 2, 2, &s), LS_ERR_INVALID_ARG, "rank 2 of world 2");
  EXPECT_ERR(ls_snapshot_load(dir, 2, 0, &s), LS_ERR_IO, "manifest");
  EXPECT_ERR(ls_snapshot_manifest_read(NULL, &m), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_eq(ls_snapshot_manifest_read(path, &m), LS_OK);
  ls_snapshot_shard_t sh;
  ls_snapshot_file_t file;
  int64_t step;
  int32_t world;
  EXPECT_ERR(ls_snapshot_manifest_shard(m, 2, &sh), LS_ERR_INVALID_ARG, "rank 2");
  EXPECT_ERR(ls_snapshot_manifest_shard(m, -1, &sh), LS_ERR_INVALID_ARG, "rank -1");
  EXPECT_ERR(ls_snapshot_manifest_get(m, &step, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_manifest_file(NULL, &file), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_load_shard(m, 5, &s), LS_ERR_INVALID_ARG, "rank 5");
  EXPECT_ERR(ls_snapshot_load_shard(NULL, 0, &s), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_find_latest(NULL, NULL, NULL, path, sizeof path), LS_ERR_INVALID_ARG,
             "NULL");
  EXPECT_ERR(ls_snapshot_find_latest(dir, NULL, NULL, small, sizeof small), LS_ERR_INVALID_ARG,
             "too small");
  cr_assert_eq(ls_snapshot_manifest_get(m, &step, &world), LS_OK);
  cr_assert(step == 8 && world == 2);
  ls_snapshot_manifest_destroy(m);
  su_remove(dir);
  free(dir);
}

Test(args, writer) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  ls_snapshotter_t *w = NULL;
  EXPECT_ERR(ls_snapshotter_new(NULL, &SHAPE, &conf, &w), LS_ERR_INVALID_ARG, "NULL");
  conf.keep = 0;
  EXPECT_ERR(ls_snapshotter_new("/tmp", &SHAPE, &conf, &w), LS_ERR_INVALID_ARG, "keep 0");
  conf.keep = 1;
  cr_assert_eq(ls_snapshotter_new("/tmp/never-written", &SHAPE, &conf, &w), LS_OK);
  int busy;
  ls_snapshotter_status_t st;
  EXPECT_ERR(ls_snapshotter_submit(w, &busy), LS_ERR_STATE, "set_info");
  EXPECT_ERR(ls_snapshotter_submit(w, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshotter_commit(w, -2, 1, &busy), LS_ERR_INVALID_ARG, "step -2");
  EXPECT_ERR(ls_snapshotter_poll(NULL, &st), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshotter_flush(NULL), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_null(ls_snapshotter_staging(NULL));
  cr_assert_eq(ls_snapshotter_flush(w), LS_OK);
  ls_snapshotter_destroy(w);
}

/* The one spelling of a snapshot's directory, and its checks. */
Test(args, snapshot_path) {
  char buf[64];
  cr_assert_eq(ls_snapshot_path("d", 42, buf, sizeof buf), LS_OK);
  cr_expect_str_eq(buf, "d/snap-000000000042");
  EXPECT_ERR(ls_snapshot_path(NULL, 1, buf, sizeof buf), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_snapshot_path("d", -1, buf, sizeof buf), LS_ERR_INVALID_ARG, "step -1");
  EXPECT_ERR(ls_snapshot_path("d", 1000000000000ll, buf, sizeof buf), LS_ERR_INVALID_ARG, "10^12");
  EXPECT_ERR(ls_snapshot_path("d", 1, buf, 10), LS_ERR_INVALID_ARG, "does not fit");
}
