/*
 * Snapshots written and loaded back are bit-identical: one and three
 * ranks, with and without byte shuffling, zstd levels -5, 1 and 19 and with
 * worker threads; re-sharding to other world sizes; empty parts; a staging
 * snapshot refilled without reallocating; a snapshot filled from an engine
 * and a series table. Also CRC32C and the byte shuffle on their own.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_util.h"
#include "snapshot_format.h"

static const ls_shape_t SHAPE = {3, 20, 2, 3}; /* I, H, L, O */

/* Writes a world-rank snapshot with conf, loads every shard, and the part
 * of every rank through ls_snapshot_load, and compares with what was
 * written. */
static void round_trip(int world, const ls_snapshot_conf_t *conf) {
  char *const dir = su_temp_dir();
  ls_snapshot_t *parts[3];
  su_write_snapshot(dir, &SHAPE, world, 42, 300, 7, conf, 2, parts);
  char path[PATH_MAX];
  su_snap_path(path, dir, 42, NULL);
  ls_snapshot_manifest_t *man = NULL;
  cr_assert_eq(ls_snapshot_manifest_read(path, &man), LS_OK, "%s", ls_last_error());
  int64_t step;
  int32_t w;
  cr_assert_eq(ls_snapshot_manifest_get(man, &step, &w), LS_OK);
  cr_assert(step == 42 && w == world);
  ls_snapshot_model_t zero;
  cr_assert_eq(ls_snapshot_get_model(parts[0], &zero), LS_OK);
  for (int r = 0; r < world; r++) {
    ls_snapshot_t *back = NULL;
    cr_assert_eq(ls_snapshot_load_shard(man, r, &back), LS_OK, "%s", ls_last_error());
    su_expect_same(parts[r], back);
    ls_snapshot_file_t file;
    cr_assert_eq(ls_snapshot_get_file(back, &file), LS_OK);
    /* meta, [model, optimizer], keys, counts, activity, states, norm,
     * serve, series_model, partitions, memory, inflight, inflight_rows,
     * [two module sections: bytes, floats] */
    cr_assert_eq(file.n_sections, r == 0 ? 16 : 12);
    for (int i = 0; i < file.n_sections; i++) {
      const char *const name = file.sections[i].name;
      int const floats = !strcmp(name, "model") || !strcmp(name, "optimizer") ||
                         !strcmp(name, "states") || !strcmp(name, "memory") ||
                         !strcmp(name, "inflight_rows") || file.sections[i].id == SU_SECTION_FLOATS;
      cr_assert_eq(file.sections[i].shuffled, floats && conf->shuffle, "section %s", name);
    }
    ls_snapshot_shard_t sh;
    cr_assert_eq(ls_snapshot_manifest_shard(man, r, &sh), LS_OK);
    cr_assert(sh.size == file.size && sh.crc == file.crc && sh.series == 300 + (uint64_t)r &&
              sh.partitions == 2 + (uint64_t)r);
    ls_snapshot_destroy(back);

    /* A rank's resume part: its shard plus rank 0's model, calibration and
     * forecasts' bookkeeping. */
    cr_assert_eq(ls_snapshot_load(path, world, r, &back), LS_OK, "%s", ls_last_error());
    if (r > 0) {
      cr_assert_eq(ls_snapshot_set_model(parts[r], zero.params, zero.adam_m, zero.adam_v, zero.n,
                                         zero.adam_steps),
                   LS_OK);
      su_copy_sections(parts[r], parts[0]);
    }
    su_expect_same(parts[r], back);
    ls_snapshot_destroy(back);
  }
  for (int r = 0; r < world; r++)
    ls_snapshot_destroy(parts[r]);
  ls_snapshot_manifest_destroy(man);
  su_remove(dir);
  free(dir);
}

/* Levels -5 (a fast one), 1 and 19, each without and with shuffling. */
static void round_trips(int world) {
  static const int levels[] = {-5, 1, 19};
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  for (int l = 0; l < 3; l++)
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
      conf.level = levels[l];
      conf.shuffle = shuffle;
      round_trip(world, &conf);
    }
}

Test(round_trip, one_rank) {
  round_trips(1);
}

Test(round_trip, three_ranks) {
  round_trips(3);
}

Test(round_trip, zstd_workers) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  conf.workers = 2;
  round_trip(1, &conf);
}

/* Loading a 3-rank snapshot for M ranks: every series and partition lands
 * once, on rank p % M, unchanged; every rank gets the model. */
static void reshard(int M) {
  char *const dir = su_temp_dir();
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  ls_snapshot_t *parts[3];
  su_write_snapshot(dir, &SHAPE, 3, 9, 50, 3, &conf, 1, parts);
  char path[PATH_MAX];
  su_snap_path(path, dir, 9, NULL);
  size_t const row = (size_t)SHAPE.num_layers * SHAPE.hidden_size;
  size_t found = 0, found_parts = 0;
  ls_snapshot_model_t zero;
  cr_assert_eq(ls_snapshot_get_model(parts[0], &zero), LS_OK);
  for (int r = 0; r < M; r++) {
    ls_snapshot_t *s = NULL;
    cr_assert_eq(ls_snapshot_load(path, M, r, &s), LS_OK, "%s", ls_last_error());
    ls_snapshot_info_t info;
    ls_snapshot_model_t model;
    cr_assert_eq(ls_snapshot_get_info(s, &info), LS_OK);
    cr_assert(info.world == M && info.rank == r && info.step == 9);
    cr_assert_eq(ls_snapshot_get_model(s, &model), LS_OK);
    cr_assert_arr_eq(model.params, zero.params, zero.n * sizeof(float));
    cr_assert_arr_eq(model.adam_v, zero.adam_v, zero.n * sizeof(float));
    /* Each series is one written by some old rank, in the old ranks' order. */
    for (size_t i = 0; i < ls_snapshot_series_count(s); i++, found++) {
      ls_series_info_t a;
      const float *ha, *ca;
      cr_assert_eq(ls_snapshot_get_series(s, i, &a, &ha, &ca), LS_OK);
      cr_assert_eq(a.partition % M, r, "series of partition %d on rank %d of %d", a.partition, r,
                   M);
      ls_snapshot_t *const old = parts[a.partition % 3];
      int hit = 0;
      for (size_t j = 0; j < ls_snapshot_series_count(old) && !hit; j++) {
        ls_series_info_t b;
        const float *hb, *cb;
        cr_assert_eq(ls_snapshot_get_series(old, j, &b, &hb, &cb), LS_OK);
        hit = b.key_len == a.key_len && !memcmp(a.key, b.key, a.key_len) &&
              a.partition == b.partition && a.windows == b.windows &&
              a.last_offset == b.last_offset && !memcmp(ha, hb, row * sizeof(float)) &&
              !memcmp(ca, cb, row * sizeof(float));
        /* the normaliser, error sums and forecasts move with the series */
        ls_series_stats_t sa, sb;
        cr_assert_eq(ls_snapshot_series_stats(s, i, &sa), LS_OK);
        cr_assert_eq(ls_snapshot_series_stats(old, j, &sb), LS_OK);
        hit = hit && *sa.norm_n == *sb.norm_n &&
              !memcmp(sa.norm, sb.norm, 3 * LS_NORM_STATS * sizeof(double)) &&
              !memcmp(sa.errors, sb.errors, 2 * 2 * sizeof(double)) &&
              !memcmp(sa.serve, sb.serve, LS_SERVE_FIELDS * sizeof(int64_t)) &&
              !memcmp(sa.pending, sb.pending, 2 * sizeof(double)) &&
              !memcmp(sa.tail, sb.tail, 3 * sizeof(double));
      }
      cr_assert(hit, "series %zu of new rank %d is not one that was written", i, r);
    }
    for (size_t i = 0; i < ls_snapshot_partition_count(s); i++, found_parts++) {
      int32_t p, q;
      int64_t off, off2, fa, na, fb, nb;
      const float *ma, *mb;
      cr_assert_eq(ls_snapshot_get_partition(s, i, &p, &off), LS_OK);
      cr_assert_eq(p % M, r);
      /* Its resume offset and replay memory are the ones written with it. */
      ls_snapshot_t *const old = parts[p % 3];
      size_t j = 0;
      while (ls_snapshot_get_partition(old, j, &q, &off2) == LS_OK && q != p)
        j++;
      cr_assert_eq(q, p, "partition %d is not one that was written", p);
      cr_assert_eq(off, off2);
      cr_assert_eq(ls_snapshot_get_memory(s, i, &fa, &na, &ma), LS_OK);
      cr_assert_eq(ls_snapshot_get_memory(old, j, &fb, &nb, &mb), LS_OK);
      cr_assert(fa == fb && na == nb && !memcmp(ma, mb, 3 * 5 * sizeof(float)),
                "partition %d: its memory did not move with it", p);
    }
    ls_snapshot_destroy(s);
  }
  /* The series in flight moved with their partitions, once each. */
  size_t in_found = 0;
  for (int r = 0; r < M; r++) {
    ls_snapshot_t *s = NULL;
    cr_assert_eq(ls_snapshot_load(path, M, r, &s), LS_OK, "%s", ls_last_error());
    for (size_t i = 0; i < ls_snapshot_inflight_count(s); i++, in_found++) {
      ls_inflight_t a, b;
      cr_assert_eq(ls_snapshot_get_inflight(s, i, &a), LS_OK);
      cr_assert_eq(a.partition % M, r);
      ls_snapshot_t *const old = parts[a.partition % 3];
      int hit = 0;
      for (size_t j = 0; j < ls_snapshot_inflight_count(old) && !hit; j++) {
        cr_assert_eq(ls_snapshot_get_inflight(old, j, &b), LS_OK);
        hit = a.key_len == b.key_len && !memcmp(a.key, b.key, a.key_len) && a.rows == b.rows &&
              a.partition == b.partition && !memcmp(a.x, b.x, (size_t)a.rows * SU_IN_F * 4) &&
              !memcmp(a.offsets, b.offsets, (size_t)a.rows * 8);
      }
      cr_assert(hit, "series in flight %zu of new rank %d is not one that was written", i, r);
    }
    ls_snapshot_destroy(s);
  }
  cr_assert_eq(in_found, 9, "one series in flight per partition");
  /* 50, 51, 52 series and 2, 3, 4 partitions were written. */
  cr_assert_eq(found, 153, "%zu series after re-sharding to %d ranks", found, M);
  cr_assert_eq(found_parts, 9);
  for (int r = 0; r < 3; r++)
    ls_snapshot_destroy(parts[r]);
  su_remove(dir);
  free(dir);
}

/* A shard without the forecasts' state, with no serve section (no forecast went out)
 * (no serve section, no bookkeeping): it loads, with none gone out. */
Test(round_trip, without_forecasts_state) {
  char *const dir = su_temp_dir();
  ls_snapshot_t *const s = su_snapshot(&SHAPE, 1, 0, 5, 40, 2, 7);
  s->has_serve = 0;
  s->predict_Q = s->predict_W = 0;
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_commit(dir, 5, 1, 1), LS_OK, "%s", ls_last_error());
  char path[PATH_MAX];
  su_snap_path(path, dir, 5, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  ls_snapshot_file_t file;
  cr_assert_eq(ls_snapshot_get_file(back, &file), LS_OK);
  for (int i = 0; i < file.n_sections; i++)
    cr_assert(strcmp(file.sections[i].name, "serve") && strcmp(file.sections[i].name, "predict"),
              "section %s", file.sections[i].name);
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  cr_expect_eq(ls_snapshot_get_section(back, LS_SNAPSHOT_SECTION_PREDICT, &version, &data, &bytes),
               LS_ERR_NOT_FOUND);
  cr_assert_eq(ls_snapshot_series_count(back), 40);
  for (size_t i = 0; i < 40; i++) {
    ls_series_stats_t a, b;
    cr_assert_eq(ls_snapshot_series_stats(back, i, &b), LS_OK);
    cr_assert_eq(ls_snapshot_series_stats(s, i, &a), LS_OK);
    cr_assert(*a.norm_n == *b.norm_n && !memcmp(a.norm, b.norm, 3 * LS_NORM_STATS * 8));
    for (int k = 0; k < LS_SERVE_FIELDS; k++)
      cr_assert_eq(b.serve[k], 0, "series %zu: serve[%d]", i, k);
    cr_assert(b.pending[0] == 0.0 && b.pending[1] == 0.0);
  }
  ls_snapshot_destroy(back);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

Test(round_trip, reshard_to_1_2_5_ranks) {
  reshard(1);
  reshard(2);
  reshard(5);
}

/* Writes a one-rank snapshot s (of `step`) into dir, commits it and loads
 * it back. */
static ls_snapshot_t *write_and_load(const ls_snapshot_t *s, const char *dir, int64_t step) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  cr_assert_eq(ls_snapshot_write_shard(s, dir, &conf), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_commit(dir, step, 1, 1), LS_OK, "%s", ls_last_error());
  char path[PATH_MAX];
  su_snap_path(path, dir, step, NULL);
  ls_snapshot_t *back = NULL;
  cr_assert_eq(ls_snapshot_load(path, 1, 0, &back), LS_OK, "%s", ls_last_error());
  return back;
}

Test(round_trip, empty_part) {
  char *const dir = su_temp_dir();
  ls_snapshot_t *s = su_snapshot(&SHAPE, 1, 0, 0, 0, 0, 1);
  ls_snapshot_t *const back = write_and_load(s, dir, 0);
  su_expect_same(s, back);
  ls_snapshot_destroy(back);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

/* Series in flight evicted (ls_inflight_t.evicted) come back marked, on the
 * same world and re-sharded; a snapshot with none marked has no section for
 * them, and the section is the snapshot's own. */
Test(round_trip, evicted_series_in_flight) {
  char *const dir = su_temp_dir();
  ls_snapshot_t *const s = su_snapshot(&SHAPE, 1, 0, 9, 10, 2, 5);
  size_t const n0 = ls_snapshot_inflight_count(s);
  int64_t const off[2] = {1000, 1001}, t[2] = {5, 6};
  float const x[2 * SU_IN_F] = {1, 2, 3, 4};
  for (int k = 0; k < 4; k++) { /* ev-0 .. ev-3 on partitions 0, 1, 0, 1; ev-1, ev-2 evicted */
    char key[8];
    snprintf(key, sizeof key, "ev-%d", k);
    ls_inflight_t const in = {key, 4, k % 2, 0, 6, 0, 2, off, t, x, k == 1 || k == 2};
    cr_assert_eq(ls_snapshot_add_inflight(s, &in), LS_OK, "%s", ls_last_error());
  }
  uint32_t version = 0;
  cr_expect_eq(ls_snapshot_put_section(s, LS_SNAPSHOT_SECTION_EVICTED, 1, 0, &version, 4),
               LS_ERR_INVALID_ARG, "the snapshot's own section");
  ls_snapshot_t *const back = write_and_load(s, dir, 9);
  su_expect_same(s, back);
  for (int world = 1; world <= 2; world++)
    for (int rank = 0; rank < world; rank++) {
      char path[PATH_MAX];
      su_snap_path(path, dir, 9, NULL);
      ls_snapshot_t *part = NULL;
      cr_assert_eq(ls_snapshot_load(path, world, rank, &part), LS_OK, "%s", ls_last_error());
      int seen = 0;
      for (size_t i = 0; i < ls_snapshot_inflight_count(part); i++) {
        ls_inflight_t in;
        cr_assert_eq(ls_snapshot_get_inflight(part, i, &in), LS_OK);
        int const ours = in.key_len == 4 && !memcmp(in.key, "ev-", 3);
        int const k = ours ? in.key[3] - '0' : -1;
        cr_expect_eq(in.evicted, k == 1 || k == 2, "world %d rank %d: series %zu ('%.*s')", world,
                     rank, i, (int)in.key_len, in.key);
        seen += ours;
      }
      cr_expect_eq(seen, 4 / world, "world %d rank %d", world, rank);
      ls_snapshot_destroy(part);
    }
  ls_snapshot_destroy(back);
  /* None marked: no section (a snapshot as before). */
  ls_snapshot_reset(s);
  ls_snapshot_t *const plain = su_snapshot(&SHAPE, 1, 0, 10, 10, 2, 5);
  ls_snapshot_t *const again = write_and_load(plain, dir, 10);
  const void *data = NULL;
  size_t bytes = 0;
  cr_expect_eq(ls_snapshot_get_section(again, LS_SNAPSHOT_SECTION_EVICTED, &version, &data, &bytes),
               LS_ERR_NOT_FOUND);
  for (size_t i = 0; i < n0; i++) {
    ls_inflight_t in;
    cr_assert_eq(ls_snapshot_get_inflight(again, i, &in), LS_OK);
    cr_expect_eq(in.evicted, 0);
  }
  ls_snapshot_destroy(again);
  ls_snapshot_destroy(plain);
  ls_snapshot_destroy(s);
  su_remove(dir);
  free(dir);
}

/* Refilling a reset snapshot with as much content reuses its memory. */
Test(round_trip, staging_reuse) {
  ls_snapshot_t *a = su_snapshot(&SHAPE, 2, 1, 5, 40, 2, 3);
  const float *h1, *c1, *h2, *c2;
  cr_assert_eq(ls_snapshot_get_states(a, &h1, &c1), LS_OK);
  ls_snapshot_t *const b = su_snapshot(&SHAPE, 2, 1, 5, 40, 2, 4);
  ls_snapshot_reset(a);
  cr_assert_eq(ls_snapshot_series_count(a), 0);
  cr_assert_eq(ls_snapshot_partition_count(a), 0);
  su_copy(a, b);
  cr_assert_eq(ls_snapshot_get_states(a, &h2, &c2), LS_OK);
  cr_assert(h1 == h2 && c1 == c2, "the states were reallocated");
  su_expect_same(b, a);
  ls_snapshot_destroy(a);
  ls_snapshot_destroy(b);
}

/* set_engine + add_series_table capture an engine and a series table;
 * loading gives back the same parameters, moments and states. */
Test(round_trip, engine_and_series_table) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = SHAPE;
  ec.max_batch = 4;
  ec.max_window = 3;
  ec.threads = 1;
  ls_engine_t *eng = NULL;
  cr_assert_eq(ls_engine_new(&ec, &eng), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_init_params(eng, 11), LS_OK);
  ls_series_table_t *tab = NULL;
  cr_assert_eq(ls_series_table_new(eng, 2, &tab), LS_OK);
  /* Three optimizer steps on windows of 4 series make moments and states. */
  float x[3 * 4 * 3], y[3 * 4 * 3];
  for (int i = 0; i < 36; i++)
    x[i] = 0.1f * (float)(i % 7), y[i] = 0.05f * (float)(i % 5);
  int64_t slots[4];
  for (int k = 0; k < 4; k++) {
    char key[8];
    snprintf(key, sizeof key, "s%d", k);
    cr_assert_eq(ls_series_table_slot(tab, key, strlen(key), k % 2, &slots[k]), LS_OK);
  }
  ls_optim_t opt;
  ls_optim_init(&opt);
  for (int step = 0; step < 3; step++) {
    cr_assert_eq(ls_engine_gather_state(eng, ls_series_table_states(tab), 4, slots), LS_OK);
    cr_assert_eq(ls_engine_forward(eng, 3, 4, x, y, NULL, NULL, NULL), LS_OK);
    cr_assert_eq(ls_engine_backward(eng, 1.0f / 36), LS_OK);
    cr_assert_eq(ls_engine_optimizer_step(eng, &opt, 1.0f, NULL), LS_OK);
    cr_assert_eq(ls_engine_scatter_state(eng, ls_series_table_states(tab), 4, slots), LS_OK);
    for (int k = 0; k < 4; k++)
      ls_series_table_trained(tab, slots[k], 3, 10 * step + k);
  }
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  ls_snapshot_info_t const info = {3, 11, 99, 1, 0, 0};
  cr_assert_eq(ls_snapshot_set_info(s, &info), LS_OK);
  cr_assert_eq(ls_snapshot_set_engine(s, eng), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_add_series_table(s, tab), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_add_partition(s, 0, 12), LS_OK);
  char *const dir = su_temp_dir();
  ls_snapshot_t *const back = write_and_load(s, dir, 3);
  su_expect_same(s, back);

  size_t const n = ls_engine_param_count(eng), row = 2 * 20;
  float *p = malloc(3 * n * sizeof *p), *h = malloc(4 * row * sizeof *h),
        *c = malloc(4 * row * sizeof *c);
  int64_t adam_steps;
  cr_assert_eq(ls_engine_read_params(eng, p, n), LS_OK);
  cr_assert_eq(ls_engine_read_optimizer(eng, p + n, p + 2 * n, n, &adam_steps), LS_OK);
  ls_snapshot_model_t m;
  cr_assert_eq(ls_snapshot_get_model(back, &m), LS_OK);
  cr_assert_eq(m.adam_steps, 3);
  cr_assert_eq(adam_steps, 3);
  cr_assert_arr_eq(m.params, p, n * sizeof(float));
  cr_assert_arr_eq(m.adam_m, p + n, n * sizeof(float));
  cr_assert_arr_eq(m.adam_v, p + 2 * n, n * sizeof(float));
  cr_assert_eq(ls_state_table_read(ls_series_table_states(tab), 0, 4, h, c), LS_OK);
  const float *hb, *cb;
  cr_assert_eq(ls_snapshot_get_states(back, &hb, &cb), LS_OK);
  cr_assert_arr_eq(hb, h, 4 * row * sizeof(float));
  cr_assert_arr_eq(cb, c, 4 * row * sizeof(float));
  for (int k = 0; k < 4; k++) {
    ls_series_info_t a, b;
    cr_assert_eq(ls_series_table_info(tab, k, &a), LS_OK);
    cr_assert_eq(ls_snapshot_get_series(back, (size_t)k, &b, NULL, NULL), LS_OK);
    cr_assert(a.key_len == b.key_len && !memcmp(a.key, b.key, a.key_len) &&
              a.partition == b.partition && a.windows == 3 && b.windows == 3 &&
              a.records == b.records && a.last_offset == b.last_offset);
  }
  free(p), free(h), free(c);
  ls_snapshot_destroy(back);
  ls_snapshot_destroy(s);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  su_remove(dir);
  free(dir);
}

Test(format, shuffle) {
  uint8_t const src[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  uint8_t planes[12], back[12];
  snap_shuffle4(planes, src, 3);
  uint8_t const want[12] = {1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12};
  cr_assert_arr_eq(planes, want, 12);
  snap_unshuffle4(back, planes, 3);
  cr_assert_arr_eq(back, src, 12);
}

/* A table of more than a few MB of host-side state is copied into the
 * snapshot by two threads, each taking chunks of series (snapshot_stats.c):
 * every series' state arrives whole, in its place. */
Test(round_trip, large_series_table_in_two_halves) {
  ls_engine_t *eng = NULL;
  enum { N = 301, F = 3, O = 2, X = 4096 }; /* ~33 KB a series: ~10 MB */
  ls_series_table_t *const tab = su_table(&SHAPE, N, F, O, X, 1, &eng);
  for (int k = 0; k < N; k++) {
    ls_series_stats_t st;
    cr_assert_eq(ls_series_table_stats(tab, k, &st), LS_OK);
    *st.norm_n = k;
    for (int i = 0; i < F * LS_NORM_STATS; i++)
      st.norm[i] = k + 0.001 * i;
    st.errors[1] = st.pending[0] = st.tail[F - 1] = -k;
  }
  ls_snapshot_t *s = NULL;
  cr_assert_eq(ls_snapshot_new(&SHAPE, 0, 0, &s), LS_OK);
  cr_assert_eq(ls_snapshot_add_series_table(s, tab), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_series_count(s), (size_t)N);
  for (int k = 0; k < N; k++) {
    ls_series_stats_t a, b;
    cr_assert_eq(ls_series_table_stats(tab, k, &a), LS_OK);
    cr_assert_eq(ls_snapshot_series_stats(s, (size_t)k, &b), LS_OK);
    cr_assert(*a.norm_n == *b.norm_n && a.model_n == b.model_n, "series %d", k);
    cr_assert_arr_eq(a.norm, b.norm, F * LS_NORM_STATS * sizeof(double), "series %d", k);
    cr_assert_arr_eq(a.model, b.model, X * sizeof(double), "series %d", k);
    cr_assert(b.errors[1] == -k && b.pending[0] == -k && b.tail[F - 1] == -k, "series %d", k);
  }
  ls_snapshot_destroy(s);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
}
