/*
 * The windower (ingest/window.c): exact TBPTT windows of a series (values,
 * one-record overlap, offsets, indices), interleaved series, the trailing
 * partial windows and their masks, every rejection reason leaving the
 * series untouched, and a table of many series.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/ingest.h"

enum { F = 2 };

/* Record step k of a series: features (v, -v) with v = 1000 s + k, exact
 * in float. */
static float value_of(int s, int k) {
  return (float)(1000 * s + k);
}

static ls_windower_t *windower(int T) {
  ls_windower_t *w = NULL;
  cr_assert_eq(ls_windower_new(&w, LS_FORMAT_F32, F, T), LS_OK, "%s", ls_last_error());
  return w;
}

/* Pushes step k of series s with the given key, partition, offset and time. */
static ls_reject_t push(ls_windower_t *w, const char *key, int s, int k, int32_t partition,
                        int64_t offset, int64_t time, const ls_window_t **win) {
  float const v[F] = {value_of(s, k), -value_of(s, k)};
  char buf[F * 4];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, v, F, buf, sizeof buf, &len), LS_OK);
  ls_record_t const rec = {key, strlen(key), buf, len, partition, offset, time};
  return ls_windower_push(w, &rec, win);
}

/* Checks that win is window `index` of series s: rows x[index*T + t] for t
 * in 0..n_targets, offsets from offset_of_step. */
static void expect_window(const ls_window_t *win, const char *key, int s, int64_t index, int T,
                          int n_targets, int64_t (*offset_of_step)(int s, int k)) {
  cr_assert_not_null(win);
  cr_expect_str_eq(win->key, key);
  cr_expect_eq(win->key_len, strlen(key));
  cr_expect_eq(win->index, index);
  cr_expect_eq(win->T, T);
  cr_expect_eq(win->F, F);
  cr_expect_eq(win->n_targets, n_targets);
  int const k0 = (int)index * T;
  cr_expect_eq(win->first_offset, offset_of_step(s, k0));
  cr_expect_eq(win->last_offset, offset_of_step(s, k0 + n_targets));
  for (int t = 0; t <= T; t++) {
    float const want = t <= n_targets ? value_of(s, k0 + t) : 0.0f;
    cr_expect_eq(win->x[t * F], want, "series %d window %lld row %d", s, (long long)index, t);
    cr_expect_eq(win->x[t * F + 1], -want);
  }
  for (int t = 0; t < T; t++)
    cr_expect_eq(win->mask[t], t < n_targets ? 1.0f : 0.0f);
}

static int64_t offset_single(int s, int k) {
  return 100 + 10 * k;
}

Test(window, one_series_exact_windows_and_overlap) {
  int const T = 3;
  ls_windower_t *const w = windower(T);
  int windows = 0;
  for (int k = 0; k < 12; k++) {
    const ls_window_t *win = NULL;
    cr_assert_eq(push(w, "AAPL", 0, k, 5, offset_single(0, k), 1000 + k, &win), LS_REJECT_NONE);
    /* Window j completes with record jT + T: k = 3, 6, 9. */
    if (k > 0 && k % T == 0) {
      expect_window(win, "AAPL", 0, windows, T, T, offset_single);
      cr_expect_eq(win->partition, 5);
      windows++;
    } else {
      cr_expect_null(win, "record %d completed a window", k);
    }
  }
  cr_expect_eq(windows, 3);
  int64_t pending;
  int found;
  cr_assert_eq(ls_windower_pending(w, "AAPL", 4, &pending, &found), LS_OK);
  cr_expect_eq(found, 1);
  cr_expect_eq(pending, 3); /* steps 9 (shared), 10, 11 */
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.records, 12);
  cr_expect_eq(st.accepted, 12);
  cr_expect_eq(st.windows, 3);
  cr_expect_eq(st.series, 1);
  cr_expect_eq(st.buffered, 3);

  const ls_window_t *win = NULL;
  size_t cursor = 0;
  cr_assert_eq(ls_windower_flush_next(w, 4, &cursor, &win), LS_OK);
  cr_expect_null(win, "AAPL is on partition 5");
  cursor = 0;
  cr_assert_eq(ls_windower_flush_next(w, 5, &cursor, &win), LS_OK);
  expect_window(win, "AAPL", 0, 3, T, 2, offset_single);
  cr_assert_eq(ls_windower_flush_next(w, 5, &cursor, &win), LS_OK);
  cr_expect_null(win);
  cr_assert_eq(ls_windower_pending(w, "AAPL", 4, &pending, &found), LS_OK);
  cr_expect_eq(pending, 0);
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.buffered, 0);
  ls_windower_destroy(w);
}

Test(window, window_of_one_step) {
  ls_windower_t *const w = windower(1);
  for (int k = 0; k < 5; k++) {
    const ls_window_t *win = NULL;
    cr_assert_eq(push(w, "s", 0, k, 0, offset_single(0, k), -1, &win), LS_REJECT_NONE);
    if (k == 0)
      cr_expect_null(win);
    else
      expect_window(win, "s", 0, k - 1, 1, 1, offset_single);
  }
  ls_windower_destroy(w);
}

/* Three series interleaved on two partitions: offsets are per partition, in
 * arrival order; each series still gets exactly its own windows. */
static int64_t offset_interleaved(int s, int k) {
  /* Arrival order i = 3k + s; series 0 and 2 on partition 0, 1 on 1. */
  return s == 1 ? k : 2 * k + (s == 2);
}

Test(window, interleaved_series) {
  int const T = 4, steps = 13;
  ls_windower_t *const w = windower(T);
  char const *const keys[] = {"s0", "s1", "s2"};
  int got[3] = {0, 0, 0};
  for (int k = 0; k < steps; k++)
    for (int s = 0; s < 3; s++) {
      const ls_window_t *win = NULL;
      cr_assert_eq(push(w, keys[s], s, k, s == 1, offset_interleaved(s, k), k, &win),
                   LS_REJECT_NONE);
      if (win != NULL) {
        expect_window(win, keys[s], s, got[s], T, T, offset_interleaved);
        cr_expect_eq(win->partition, s == 1);
        got[s]++;
      }
    }
  for (int s = 0; s < 3; s++)
    cr_expect_eq(got[s], 3, "series %d", s); /* 13 = 3 * 4 + 1 */
  const ls_window_t *win = NULL;
  size_t cursor = 0;
  cr_assert_eq(ls_windower_flush_next(w, -1, &cursor, &win), LS_OK);
  cr_expect_null(win, "one pending record per series makes no target");
  ls_windower_destroy(w);
}

Test(window, rejections_leave_series_untouched) {
  int const T = 2;
  ls_windower_t *const w = windower(T);
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "s", 0, 0, 3, 0, 100, &win), LS_REJECT_NONE);

  char long_key[LS_KEY_MAX + 2];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[LS_KEY_MAX + 1] = '\0';
  cr_expect_eq(push(w, long_key, 1, 0, 3, 1, 100, &win), LS_REJECT_KEY);
  long_key[LS_KEY_MAX] = '\0'; /* 255 bytes is allowed */
  cr_expect_eq(push(w, long_key, 1, 0, 3, 2, 100, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "", 1, 0, 3, 3, 100, &win), LS_REJECT_KEY);
  cr_expect_eq(push(w, "s", 0, 99, 4, 4, 100, &win), LS_REJECT_PARTITION);
  cr_expect_eq(push(w, "s", 0, 99, 3, 5, 99, &win), LS_REJECT_BACKWARDS);
  float const nan_v[F] = {1, NAN};
  char buf[F * 4];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, nan_v, F, buf, sizeof buf, &len), LS_OK);
  ls_record_t rec = {"s", 1, buf, len, 3, 6, 200};
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_NONFINITE);
  rec.value_len = len - 1;
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_SIZE);
  /* Equal time is not backwards; unknown time (-1) is not checked. */
  cr_expect_eq(push(w, "s", 0, 1, 3, 10, 100, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "s", 0, 2, 3, 20, -1, &win), LS_REJECT_NONE);
  cr_assert_not_null(win);
  cr_expect_eq(win->x[0], value_of(0, 0));
  cr_expect_eq(win->x[F], value_of(0, 1));
  cr_expect_eq(win->x[2 * F], value_of(0, 2));
  cr_expect_eq(win->first_offset, 0);
  cr_expect_eq(win->last_offset, 20);
  /* The time check still uses the last known time (100). */
  cr_expect_eq(push(w, "s", 0, 3, 3, 30, 50, &win), LS_REJECT_BACKWARDS);

  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.records, 11);
  cr_expect_eq(st.accepted, 4);
  cr_expect_eq(st.rejected[LS_REJECT_NONE], 0);
  cr_expect_eq(st.rejected[LS_REJECT_KEY], 2);
  cr_expect_eq(st.rejected[LS_REJECT_PARTITION], 1);
  cr_expect_eq(st.rejected[LS_REJECT_BACKWARDS], 2);
  cr_expect_eq(st.rejected[LS_REJECT_NONFINITE], 1);
  cr_expect_eq(st.rejected[LS_REJECT_SIZE], 1);
  cr_expect_eq(st.series, 2);
  ls_windower_destroy(w);
}

Test(window, csv_parse_rejection) {
  ls_windower_t *w = NULL;
  cr_assert_eq(ls_windower_new(&w, LS_FORMAT_CSV, 2, 4), LS_OK);
  const ls_window_t *win = NULL;
  ls_record_t rec = {"k", 1, "1,zz", 4, 0, 0, 0};
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_PARSE);
  rec.value = "1,2";
  rec.value_len = 3;
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_NONE);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.rejected[LS_REJECT_PARSE], 1);
  ls_windower_destroy(w);
}

/* A rejected first record does not claim its series for its partition. */
Test(window, rejected_first_record_creates_no_series) {
  ls_windower_t *const w = windower(2);
  const ls_window_t *win = NULL;
  ls_record_t rec = {"x", 1, "bad", 3, 7, 0, 0};
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_SIZE);
  int64_t pending;
  int found;
  cr_assert_eq(ls_windower_pending(w, "x", 1, &pending, &found), LS_OK);
  cr_expect_eq(found, 0);
  cr_expect_eq(push(w, "x", 0, 0, 8, 0, 0, &win), LS_REJECT_NONE);
  ls_windower_destroy(w);
}

/* 20000 series (the table grows many times), T + 1 records each,
 * interleaved: one window per series, in order, and one pending record. */
Test(window, many_series) {
  int const T = 3, S = 20000;
  ls_windower_t *const w = windower(T);
  char key[32];
  int windows = 0;
  for (int k = 0; k <= T; k++)
    for (int s = 0; s < S; s++) {
      snprintf(key, sizeof key, "series-%d", s);
      const ls_window_t *win = NULL;
      cr_assert_eq(push(w, key, s % 1000, k, s % 8, (int64_t)k * S + s, k, &win), LS_REJECT_NONE);
      if (win != NULL) {
        cr_assert_eq(k, T);
        cr_assert_str_eq(win->key, key);
        cr_assert_eq(win->x[T * F], value_of(s % 1000, T));
        windows++;
      }
    }
  cr_expect_eq(windows, S);
  for (int s = 0; s < S; s += 997) {
    snprintf(key, sizeof key, "series-%d", s);
    int64_t pending;
    int found;
    cr_assert_eq(ls_windower_pending(w, key, strlen(key), &pending, &found), LS_OK);
    cr_expect_eq(found, 1);
    cr_expect_eq(pending, 1);
  }
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.series, S);
  cr_expect_eq(st.buffered, S);
  ls_windower_destroy(w);
}

Test(window, bad_arguments) {
  ls_windower_t *w = NULL;
  cr_expect_eq(ls_windower_new(&w, LS_FORMAT_F32, 0, 4), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "F=0") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_windower_new(&w, LS_FORMAT_F32, 1, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_new(&w, LS_FORMAT_F32, 1, LS_WINDOW_MAX + 1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_new(&w, (ls_format_t)3, 1, 4), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_new(NULL, LS_FORMAT_F32, 1, 4), LS_ERR_INVALID_ARG);
  w = windower(4);
  const ls_window_t *win;
  ls_record_t const null_key = {NULL, 3, "abcdefgh", 8, 0, 0, 0};
  cr_expect_eq(ls_windower_push(w, &null_key, &win), LS_REJECT__COUNT);
  cr_expect_eq(ls_windower_push(w, NULL, &win), LS_REJECT__COUNT);
  ls_record_t const ok = {"k", 1, "abcdefgh", 8, 0, 0, 0};
  cr_expect_eq(ls_windower_push(w, &ok, NULL), LS_REJECT__COUNT);
  size_t cursor = 0;
  cr_expect_eq(ls_windower_flush_next(w, -1, &cursor, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_flush_next(w, -1, NULL, &win), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_stats(w, NULL), LS_ERR_INVALID_ARG);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.records, 0, "invalid calls count nowhere");
  ls_windower_destroy(w);
  ls_windower_destroy(NULL);
}
