/*
 * The windower (ingest/window.c): exact TBPTT windows of a series (values,
 * one-record overlap, offsets, event times, indices), interleaved series, the trailing
 * partial windows, their masks and their order, every rejection reason
 * leaving the series untouched, the bound on magnitudes, a table of many series, the
 * records a series holds (ls_windower_pending_of, _each_pending), restoring series in flight
 * (a resume re-forms exactly the windows of an uninterrupted run), gaps in event time
 * (reset.gap.ms) and the bounds on event times (a stamp in the future rejected without
 * touching its series, a late one held at its series' last), a series that moves partition
 * (issue 23: the topic gained partitions) going on there, and restored so.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The records the windower holds of key (0 when it never accepted it). */
static int64_t pending_of(const ls_windower_t *w, const char *key, int *found) {
  ls_inflight_t held;
  cr_assert_eq(ls_windower_pending_of(w, key, strlen(key), &held, found), LS_OK);
  return *found ? held.rows : 0;
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
      for (int t = 0; t <= T; t++) /* each row's event time, the shared row's too */
        cr_expect_eq(win->times[t], 1000 + windows * T + t, "window %d row %d", windows, t);
      windows++;
    } else {
      cr_expect_null(win, "record %d completed a window", k);
    }
  }
  cr_expect_eq(windows, 3);
  int found;
  cr_expect_eq(pending_of(w, "AAPL", &found), 3); /* steps 9 (shared), 10, 11 */
  cr_expect_eq(found, 1);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.records, 12);
  cr_expect_eq(st.accepted, 12);
  cr_expect_eq(st.windows, 3);
  cr_expect_eq(st.series, 1);
  cr_expect_eq(st.buffered, 3);

  const ls_window_t *win = NULL;
  cr_assert_eq(ls_windower_flush_next(w, 4, &win), LS_OK);
  cr_expect_null(win, "AAPL is on partition 5");
  cr_assert_eq(ls_windower_flush_next(w, 5, &win), LS_OK);
  expect_window(win, "AAPL", 0, 3, T, 2, offset_single);
  for (int t = 0; t <= T; t++) /* padding rows have no time */
    cr_expect_eq(win->times[t], t <= 2 ? 1009 + t : -1, "partial window row %d", t);
  cr_assert_eq(ls_windower_flush_next(w, 5, &win), LS_OK);
  cr_expect_null(win);
  cr_expect_eq(pending_of(w, "AAPL", &found), 0);
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
        cr_expect_eq(win->series, s, "series ids count from 0 in order of first record");
        got[s]++;
      }
    }
  for (int s = 0; s < 3; s++)
    cr_expect_eq(got[s], 3, "series %d", s); /* 13 = 3 * 4 + 1 */
  for (int32_t p = 0; p < 2; p++) {
    const ls_window_t *win = NULL;
    cr_assert_eq(ls_windower_flush_next(w, p, &win), LS_OK);
    cr_expect_null(win, "one pending record per series makes no target");
  }
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.buffered, 0, "a flush drops the lone records");
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
  cr_expect_eq(st.records, 10);
  cr_expect_eq(st.accepted, 4);
  cr_expect_eq(st.rejected[LS_REJECT_NONE], 0);
  cr_expect_eq(st.rejected[LS_REJECT_KEY], 2);
  cr_expect_eq(st.rejected[LS_REJECT_PARTITION], 0);
  cr_expect_eq(st.rejected[LS_REJECT_BACKWARDS], 2);
  cr_expect_eq(st.rejected[LS_REJECT_NONFINITE], 1);
  cr_expect_eq(st.rejected[LS_REJECT_SIZE], 1);
  cr_expect_eq(st.series, 2);
  ls_windower_destroy(w);
}

/* The bounds on event times: a record stamped beyond the wall clock + 1 h
 * is rejected (FUTURE) whether its series is new or not, and leaves the
 * series' clock alone (year 2500 once, then the series goes on); one
 * stamped within 1 min before its series' last is accepted with the
 * series' last time (counted late), one earlier still is rejected
 * (BACKWARDS). */
Test(window, time_bounds_keep_series_alive) {
  int const T = 4;
  ls_windower_t *const w = windower(T);
  cr_assert_eq(ls_windower_set_time_bounds(w, 3600000, 60000), LS_OK);
  cr_expect_eq(ls_windower_set_time_bounds(w, -1, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_set_time_bounds(NULL, 0, 0), LS_ERR_INVALID_ARG);
  int64_t const now = (int64_t)time(NULL) * 1000, year2500 = INT64_C(16725225600000);
  int64_t const t0 = now - 86400000; /* a day ago */
  const ls_window_t *win = NULL;
  /* A new series stamped in 2500: not created; its next record is its first. */
  cr_expect_eq(push(w, "n", 1, 0, 0, 0, year2500, &win), LS_REJECT_FUTURE, "a first record");
  cr_expect_eq(push(w, "n", 1, 0, 0, 1, t0, &win), LS_REJECT_NONE);
  /* Within the hour ahead (a producer's clock running fast) passes. */
  cr_expect_eq(push(w, "n", 1, 1, 0, 2, now + 1800000, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "n", 1, 2, 0, 3, now + 7200000, &win), LS_REJECT_FUTURE, "2 h ahead");
  /* Series s: steps 0, 1; 2500; step 2 goes on as if it had not been. */
  cr_expect_eq(push(w, "s", 0, 0, 0, 10, t0, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "s", 0, 1, 0, 11, t0 + 1000, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "s", 0, 9, 0, 12, year2500, &win), LS_REJECT_FUTURE);
  cr_expect_eq(push(w, "s", 0, 2, 0, 13, t0 + 2000, &win), LS_REJECT_NONE);
  /* A clock stepped back 30 s: accepted, its time held at t0 + 2000. */
  cr_expect_eq(push(w, "s", 0, 3, 0, 14, t0 + 2000 - 30000, &win), LS_REJECT_NONE, "30 s late");
  ls_windower_record_t last;
  cr_assert_eq(ls_windower_last(w, &last), LS_OK);
  cr_expect_eq(last.time, t0 + 2000, "a late record's time is held at its series' last");
  cr_expect_eq(push(w, "s", 0, 9, 0, 15, t0 + 2000 - 60001, &win), LS_REJECT_BACKWARDS,
               "beyond the bound on lateness");
  cr_expect_eq(push(w, "s", 0, 4, 0, 16, t0 + 2500, &win), LS_REJECT_NONE);
  cr_assert_not_null(win, "steps 0..4 of s make a window: the rejected records took no row");
  int64_t const times[] = {t0, t0 + 1000, t0 + 2000, t0 + 2000, t0 + 2500};
  int64_t const offsets[] = {10, 11, 13, 14, 16};
  for (int t = 0; t <= T; t++) {
    cr_expect_eq(win->x[t * F], value_of(0, t), "row %d", t);
    cr_expect_eq(win->times[t], times[t], "row %d's time", t);
    cr_expect_eq(win->offsets[t], offsets[t], "row %d's offset", t);
  }
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.rejected[LS_REJECT_FUTURE], 3);
  cr_expect_eq(st.rejected[LS_REJECT_BACKWARDS], 1);
  cr_expect_eq(st.late, 1);
  cr_expect_eq(st.series, 2);
  /* Without a bound on lateness a record before its series' last is rejected. */
  cr_assert_eq(ls_windower_set_time_bounds(w, 0, 0), LS_OK);
  cr_expect_eq(push(w, "s", 0, 5, 0, 17, t0 + 2499, &win), LS_REJECT_BACKWARDS);
  cr_expect_eq(push(w, "s", 0, 5, 0, 18, year2500, &win), LS_REJECT_NONE, "no bound on the future");
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

/* The bound on magnitudes: a value beyond it rejects the record (RANGE),
 * first record or not, and changes nothing else; at the bound it passes. */
Test(window, values_beyond_max_abs_are_rejected) {
  int const T = 2;
  ls_windower_t *const w = windower(T);
  cr_assert_eq(ls_windower_set_max_abs(w, 1000.0), LS_OK);
  const ls_window_t *win = NULL;
  /* series 1's values are 1000 + k: step 0 is at the bound, step 1 beyond. */
  cr_expect_eq(push(w, "big", 1, 1, 0, 0, 100, &win), LS_REJECT_RANGE, "a first record");
  cr_expect_eq(push(w, "big", 1, 0, 0, 1, 100, &win), LS_REJECT_NONE, "|v| == max_abs");
  cr_expect_eq(push(w, "big", 1, 1, 0, 2, 101, &win), LS_REJECT_RANGE);
  float const v[F] = {1.0f, -3e38f}; /* the second feature alone */
  char buf[F * 4];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, v, F, buf, sizeof buf, &len), LS_OK);
  ls_record_t const rec = {"big", 3, buf, len, 0, 3, 200};
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_RANGE);
  cr_expect_eq(push(w, "big", 0, 0, 0, 4, 103, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "big", 0, 1, 0, 5, 104, &win), LS_REJECT_NONE);
  cr_assert_not_null(win, "the rejected records took no row");
  cr_expect_eq(win->x[0], value_of(1, 0));
  cr_expect_eq(win->x[F], value_of(0, 0));
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.rejected[LS_REJECT_RANGE], 3);
  cr_expect_eq(st.accepted, 3);
  /* 3.4e38 and above: no bound at all. */
  cr_assert_eq(ls_windower_set_max_abs(w, 3.4e38), LS_OK);
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_NONE);
  cr_expect_eq(ls_windower_set_max_abs(w, 0.0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_set_max_abs(NULL, 1.0), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w);
}

/* A rejected first record does not claim its series for its partition. */
Test(window, rejected_first_record_creates_no_series) {
  ls_windower_t *const w = windower(2);
  const ls_window_t *win = NULL;
  ls_record_t rec = {"x", 1, "bad", 3, 7, 0, 0};
  cr_expect_eq(ls_windower_push(w, &rec, &win), LS_REJECT_SIZE);
  int found;
  (void)pending_of(w, "x", &found);
  cr_expect_eq(found, 0);
  cr_expect_eq(push(w, "x", 0, 0, 8, 0, 0, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "x", 0, 1, 8, 1, 1, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "x", 0, 2, 8, 2, 2, &win), LS_REJECT_NONE);
  cr_assert_not_null(win);
  cr_expect_eq(win->series, 0, "a rejected record takes no series id");
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
        cr_assert_eq(win->series, s, "the id stays the series' through the map's growth");
        windows++;
      }
    }
  cr_expect_eq(windows, S);
  for (int s = 0; s < S; s += 997) {
    snprintf(key, sizeof key, "series-%d", s);
    int found;
    cr_expect_eq(pending_of(w, key, &found), 1);
    cr_expect_eq(found, 1);
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
  cr_expect_eq(ls_windower_flush_next(w, 0, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_flush_next(NULL, 0, &win), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_stats(w, NULL), LS_ERR_INVALID_ARG);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.records, 0, "invalid calls count nowhere");
  ls_windower_destroy(w);
  ls_windower_destroy(NULL);
}

/* ------------------------------------------------------------------------ */
/* Records held, restoring series in flight, flush order                     */

/* A copy of a window's identity and rows, to compare runs. */
typedef struct seen_s {
  char key[8];
  int64_t index, offsets[8], times[8];
  float x[8 * F];
  int n_targets, reset;
} seen_t;

typedef struct seen_list_s {
  seen_t w[64];
  int n;
} seen_list_t;

static ls_err_t keep(void *opaque, const ls_window_t *win) {
  seen_list_t *const l = opaque;
  cr_assert_lt(l->n, 64);
  seen_t *const s = &l->w[l->n++];
  memset(s, 0, sizeof *s);
  snprintf(s->key, sizeof s->key, "%s", win->key);
  s->index = win->index, s->n_targets = win->n_targets, s->reset = win->reset;
  memcpy(s->offsets, win->offsets, (size_t)(win->T + 1) * sizeof(int64_t));
  memcpy(s->times, win->times, (size_t)(win->T + 1) * sizeof(int64_t));
  memcpy(s->x, win->x, (size_t)(win->T + 1) * F * sizeof(float));
  return LS_OK;
}

/* The stream of resume_re_forms_the_same_windows: a and b interleaved on
 * partition 3, a at even offsets (steps 0..19), b at odd ones (steps
 * 0..9), event times = offsets. */
static void stream(ls_windower_t *w, int64_t from, int64_t to, seen_list_t *out) {
  for (int64_t o = from; o < to; o++) {
    const ls_window_t *win = NULL;
    int const a = o % 2 == 0 || o >= 20;
    int const k = a ? (o < 20 ? (int)o / 2 : (int)o - 10) : (int)o / 2;
    cr_assert_eq(push(w, a ? "a" : "b", a ? 0 : 1, k, 3, o, o, &win), LS_REJECT_NONE);
    if (win != NULL) keep(out, win);
  }
}

/* A "snapshot" after offset 12 of which a's windows 0 and 1 were trained
 * and b's window 0 is still in flight: the series in flight are a's rows
 * from its window 2's first input, b's from its window 0's. Restored into
 * a new windower, then fed offsets 13.., they give exactly the windows the
 * uninterrupted run gave from then on, in the same order: those the
 * restore re-forms, then the later ones. T = 3. */
Test(window, resume_re_forms_the_same_windows) {
  int const T = 3;
  ls_windower_t *const whole = windower(T);
  seen_list_t all = {.n = 0};
  stream(whole, 0, 30, &all);
  /* a: steps at offsets 0,2,..,18 then 20..29 (steps 10..19); b: 1,3,..,19. */
  ls_windower_t *const cut = windower(T);
  seen_list_t before = {.n = 0};
  stream(cut, 0, 13, &before); /* a's windows 0 (offsets 0..6), 1 (6..12); b's 0 (1..7) */
  cr_assert_eq(before.n, 3);
  /* In flight: a's window 2 starts at its window 1's last target (offset
   * 12); what a holds is that record alone. b's window 0 is not trained:
   * its rows, then what b holds (from offset 7). */
  int found = 0;
  ls_inflight_t a_held, b_held;
  cr_assert_eq(ls_windower_pending_of(cut, "a", 1, &a_held, &found), LS_OK);
  cr_assert(found && a_held.rows == 1 && a_held.offsets[0] == 12 && a_held.index == 2);
  cr_assert_eq(ls_windower_pending_of(cut, "b", 1, &b_held, &found), LS_OK);
  cr_assert(found && b_held.rows == 3 && b_held.offsets[0] == 7 && b_held.index == 1);
  seen_t const *const b0 = &before.w[1];
  cr_assert_str_eq(b0->key, "b");
  int64_t b_off[8], b_time[8];
  float b_x[8 * F];
  for (int r = 0; r <= T; r++) {
    b_off[r] = b0->offsets[r], b_time[r] = b0->times[r];
    memcpy(b_x + r * F, b0->x + r * F, F * sizeof(float));
  }
  for (int r = 1; r < b_held.rows; r++) { /* b's rows after its window 0's last (offset 7) */
    b_off[T + r] = b_held.offsets[r], b_time[T + r] = b_held.times[r];
    memcpy(b_x + (T + r) * F, b_held.x + (size_t)r * F, F * sizeof(float));
  }
  ls_inflight_t const in[2] = {
      {"a", 1, 3, 2, a_held.last_time, 0, 1, a_held.offsets, a_held.times, a_held.x, 0},
      {"b", 1, 3, 0, b_held.last_time, 0, T + b_held.rows, b_off, b_time, b_x, 0}};
  ls_windower_t *const resumed = windower(T);
  seen_list_t after = {.n = 0};
  cr_assert_eq(ls_windower_restore(resumed, in, 2, keep, &after), LS_OK, "%s", ls_last_error());
  cr_expect_eq(after.n, 1, "the restore re-forms b's window 0");
  stream(resumed, 13, 30, &after);
  /* The uninterrupted run's windows from b's window 0 on, a's 0 and 1 aside. */
  seen_list_t want = {.n = 0};
  for (int i = 0; i < all.n; i++)
    if (!(all.w[i].key[0] == 'a' && all.w[i].index < 2)) want.w[want.n++] = all.w[i];
  cr_assert_eq(after.n, want.n);
  for (int i = 0; i < want.n; i++) {
    cr_expect_str_eq(after.w[i].key, want.w[i].key, "window %d", i);
    cr_expect_eq(after.w[i].index, want.w[i].index, "window %d", i);
    cr_expect_arr_eq(after.w[i].offsets, want.w[i].offsets, sizeof want.w[i].offsets);
    cr_expect_arr_eq(after.w[i].times, want.w[i].times, sizeof want.w[i].times);
    cr_expect_arr_eq(after.w[i].x, want.w[i].x, sizeof want.w[i].x);
  }
  /* And they hold the same records after. */
  for (int s = 0; s < 2; s++) {
    ls_inflight_t x, y;
    int f1, f2;
    cr_assert_eq(ls_windower_pending_of(whole, s ? "b" : "a", 1, &x, &f1), LS_OK);
    cr_assert_eq(ls_windower_pending_of(resumed, s ? "b" : "a", 1, &y, &f2), LS_OK);
    cr_expect(f1 && f2 && x.rows == y.rows && x.index == y.index && x.last_time == y.last_time);
    cr_expect_arr_eq(x.offsets, y.offsets, (size_t)x.rows * sizeof(int64_t));
  }
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(resumed, &st), LS_OK);
  cr_expect_eq(st.records, 17, "restored rows are not pushed records");
  ls_windower_destroy(whole), ls_windower_destroy(cut), ls_windower_destroy(resumed);
}

/* A list of series in flight (copies of their first rows' offsets). */
typedef struct held_list_s {
  int n;
  char key[8][8];
  int rows[8];
  int64_t first[8], index[8], last_time[8];
} held_list_t;

static ls_err_t keep_held(void *opaque, const ls_inflight_t *s) {
  held_list_t *const l = opaque;
  cr_assert_lt(l->n, 8);
  snprintf(l->key[l->n], sizeof l->key[0], "%.*s", (int)s->key_len, s->key);
  l->rows[l->n] = s->rows, l->first[l->n] = s->offsets[0], l->index[l->n] = s->index;
  l->last_time[l->n++] = s->last_time;
  return LS_OK;
}

/* What each_pending gives: every series of the partition that holds
 * records, by ascending first offset, a window's last target as the next
 * window's first input. T = 2. */
Test(window, each_pending_gives_what_series_hold) {
  ls_windower_t *const w = windower(2);
  const ls_window_t *win = NULL;
  struct {
    const char *key;
    int64_t offset;
  } const recs[] = {{"a", 0}, {"b", 1}, {"a", 2}, {"a", 3}, {"c", 4}, {"b", 5}, {"d", 7}};
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    cr_assert_eq(push(w, recs[i].key, 0, (int)i, recs[i].key[0] == 'd', recs[i].offset,
                      100 + recs[i].offset, &win),
                 LS_REJECT_NONE);
  held_list_t l = {0};
  cr_assert_eq(ls_windower_each_pending(w, 0, keep_held, &l), LS_OK);
  struct {
    const char *key;
    int rows;
    int64_t first, index;
  } const want[] = {{"b", 2, 1, 0}, {"a", 1, 3, 1}, {"c", 1, 4, 0}};
  cr_assert_eq(l.n, 3);
  for (int i = 0; i < 3; i++) {
    cr_expect_str_eq(l.key[i], want[i].key, "series %d", i);
    cr_expect_eq(l.rows[i], want[i].rows, "%s", want[i].key);
    cr_expect_eq(l.first[i], want[i].first, "%s", want[i].key);
    cr_expect_eq(l.index[i], want[i].index, "%s", want[i].key);
  }
  cr_expect_eq(l.last_time[1], 103, "a's last event time");
  held_list_t none = {0};
  cr_assert_eq(ls_windower_each_pending(w, 9, keep_held, &none), LS_OK);
  cr_expect_eq(none.n, 0);
  cr_expect_eq(ls_windower_each_pending(w, 0, NULL, NULL), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w);
}

/* ------------------------------------------------------------------------ */
/* Eviction                                                                  */

/* At most 2 series on a partition: a third evicts the least recently
 * active one, its records dropped and counted; a key that comes back is a
 * new series (window 0, a new id). Partitions are bounded apart. T = 2. */
Test(window, max_series_evicts_the_least_recent) {
  ls_windower_t *const w = windower(2);
  cr_assert_eq(ls_windower_set_eviction(w, 0, 2), LS_OK);
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "a", 0, 0, 0, 0, 0, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "b", 1, 0, 0, 1, 0, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "a", 0, 1, 0, 2, 1, &win), LS_REJECT_NONE); /* a is the most recent */
  cr_assert_eq(push(w, "x", 5, 0, 1, 0, 0, &win), LS_REJECT_NONE); /* another partition */
  cr_assert_eq(push(w, "c", 2, 0, 0, 3, 2, &win), LS_REJECT_NONE); /* evicts b */
  int found;
  cr_expect_eq(pending_of(w, "a", &found), 2);
  (void)pending_of(w, "b", &found);
  cr_expect_eq(found, 0, "b, the least recent, is evicted");
  cr_expect_eq(pending_of(w, "x", &found), 1);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect(st.evicted == 1 && st.evicted_records == 1 && st.buffered == 4, "%lld %lld %lld",
            (long long)st.evicted, (long long)st.evicted_records, (long long)st.buffered);
  /* b comes back: a new series (evicting a, now the least recent). */
  cr_assert_eq(push(w, "b", 1, 5, 0, 4, 3, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "b", 1, 6, 0, 5, 4, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "b", 1, 7, 0, 6, 5, &win), LS_REJECT_NONE);
  cr_assert_not_null(win);
  cr_expect_eq(win->index, 0);
  cr_expect_eq(win->first_offset, 4);
  cr_expect_eq(win->series, 4, "ids are never reused");
  (void)pending_of(w, "a", &found);
  cr_expect_eq(found, 0);
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.evicted, 2);
  cr_expect_eq(st.evicted_records, 3);
  cr_expect_eq(st.series - st.evicted, 3, "c and b on partition 0, x on 1");
  cr_expect_eq(ls_windower_set_eviction(w, -1, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_set_eviction(NULL, 0, 0), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w);
}

/* Idle for more than 100 ms of event time against the partition's newest
 * record: evicted, in arrival order; a series with a recent record stays.
 * T = 4. */
Test(window, idle_series_are_evicted) {
  ls_windower_t *const w = windower(4);
  cr_assert_eq(ls_windower_set_eviction(w, 100, 0), LS_OK);
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "a", 0, 0, 0, 0, 0, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "b", 1, 0, 0, 1, 50, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "c", 2, 0, 0, 2, 100, &win), LS_REJECT_NONE); /* a: 100 old, stays */
  int found;
  (void)pending_of(w, "a", &found);
  cr_expect_eq(found, 1);
  cr_assert_eq(push(w, "c", 2, 1, 0, 3, 151, &win), LS_REJECT_NONE); /* a: 151, b: 101 */
  (void)pending_of(w, "a", &found);
  cr_expect_eq(found, 0);
  (void)pending_of(w, "b", &found);
  cr_expect_eq(found, 0);
  cr_expect_eq(pending_of(w, "c", &found), 2);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.evicted, 2);
  ls_windower_destroy(w);
}

/* 200000 distinct keys of 2 records each through a bound of 1000 series
 * per partition (4 partitions): the held series stay at the bound, the
 * most recent keys are held and found, every other key was evicted once. */
Test(window, churn_through_a_bound) {
  int const S = 200000, P = 4, BOUND = 1000;
  ls_windower_t *const w = windower(4);
  cr_assert_eq(ls_windower_set_eviction(w, 0, BOUND), LS_OK);
  char key[32];
  for (int s = 0; s < S; s++)
    for (int k = 0; k < 2; k++) {
      snprintf(key, sizeof key, "key-%d", s);
      const ls_window_t *win = NULL;
      cr_assert_eq(push(w, key, s % 1000, k, s % P, 2 * s + k, s, &win), LS_REJECT_NONE);
    }
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.series, S);
  cr_expect_eq(st.series - st.evicted, P * BOUND);
  cr_expect_eq(st.buffered, 2 * P * BOUND);
  cr_expect_eq(st.evicted_records, 2 * (S - P * BOUND));
  int found;
  for (int s = S - P * BOUND; s < S; s += 37) {
    snprintf(key, sizeof key, "key-%d", s);
    cr_expect_eq(pending_of(w, key, &found), 2, "%s", key);
  }
  for (int s = 0; s < S - P * BOUND; s += 997) {
    snprintf(key, sizeof key, "key-%d", s);
    (void)pending_of(w, key, &found);
    cr_expect_eq(found, 0, "%s", key);
  }
  ls_windower_destroy(w);
}

/* ------------------------------------------------------------------------ */
/* Gaps in event time                                                        */

/* reset.gap.ms = 100, T = 3: a jump of 101 ms closes what the series holds
 * as a partial window (masked, as a flush's), the next window is reset and
 * begins at the record after the gap (which completes nothing itself); a
 * jump of exactly 100 does nothing; a lone record before a gap is dropped;
 * each gap is counted. */
Test(window, a_gap_restarts_the_series) {
  int const T = 3;
  ls_windower_t *const w = windower(T);
  cr_assert_eq(ls_windower_set_reset_gap(w, 100), LS_OK);
  seen_list_t got = {.n = 0};
  /* steps: times 0, 10, 20, 30 (window 0), 40, 140 (a jump of 100: none),
   * 241 (a gap: window 1 = rows 30, 40, 140, partial), 250, 260, 270
   * (window 2, reset), 1000 (a gap: what it holds is 270 alone, dropped),
   * 1010, 1020, 1030 (window 3, reset). */
  int64_t const times[] = {0, 10, 20, 30, 40, 140, 241, 250, 260, 270, 1000, 1010, 1020, 1030};
  int const n = (int)(sizeof times / sizeof times[0]);
  for (int k = 0; k < n; k++) {
    const ls_window_t *win = NULL;
    cr_assert_eq(push(w, "g", 0, k, 0, k, times[k], &win), LS_REJECT_NONE);
    if (win != NULL) keep(&got, win);
  }
  cr_assert_eq(got.n, 4);
  int64_t const want_first[] = {0, 3, 6, 10};
  int const want_targets[] = {3, 2, 3, 3}, want_reset[] = {0, 0, 1, 1};
  for (int i = 0; i < 4; i++) {
    cr_expect_eq(got.w[i].index, i);
    cr_expect_eq(got.w[i].offsets[0], want_first[i], "window %d", i);
    cr_expect_eq(got.w[i].n_targets, want_targets[i], "window %d", i);
    cr_expect_eq(got.w[i].reset, want_reset[i], "window %d", i);
  }
  /* The partial window: rows 3, 4, 5 (times 30, 40, 140), then padding. */
  cr_expect_eq(got.w[1].times[2], 140);
  cr_expect_eq(got.w[1].times[3], -1);
  cr_expect_eq(got.w[1].offsets[3], -1);
  cr_expect_eq(got.w[1].x[3 * F], 0.0f);
  cr_expect_eq(got.w[1].x[2 * F], value_of(0, 5));
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.resets, 2);
  cr_expect_eq(st.windows, 3, "complete windows (the partial one is not)");
  cr_expect_eq(st.buffered, 1, "the last window's last target");
  /* Without a bound, the same times make windows of 3 targets only. */
  ls_windower_t *const plain = windower(T);
  int windows = 0;
  for (int k = 0; k < n; k++) {
    const ls_window_t *win = NULL;
    cr_assert_eq(push(plain, "g", 0, k, 0, k, times[k], &win), LS_REJECT_NONE);
    if (win == NULL) continue;
    cr_expect(win->n_targets == T && !win->reset);
    windows++;
  }
  cr_expect_eq(windows, 4);
  cr_expect_eq(ls_windower_set_reset_gap(w, -1), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_set_reset_gap(NULL, 1), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w), ls_windower_destroy(plain);
}

static int64_t offset_ab(int s, int k) {
  /* a (s = 0): steps at offsets 0, 2, 3, 5; b (s = 1): at 1, 4. */
  static const int64_t a[] = {0, 2, 3, 5}, b[] = {1, 4};
  return s == 0 ? a[k] : b[k];
}

/* Trailing partial windows come in order of their first offset, not of
 * their series' first appearance: a appeared first, but its partial window
 * starts at its window's last target (3), after b's (1). Series holding
 * one record (c: only its carry, d: its first record) make none, and are
 * emptied. T = 2. */
Test(window, flush_order_is_by_first_offset) {
  ls_windower_t *const w = windower(2);
  const ls_window_t *win = NULL;
  struct {
    const char *key;
    int s, k;
    int64_t offset;
  } const recs[] = {{"a", 0, 0, 0}, {"b", 1, 0, 1}, {"a", 0, 1, 2}, {"a", 0, 2, 3}, {"b", 1, 1, 4},
                    {"a", 0, 3, 5}, {"c", 2, 0, 6}, {"c", 2, 1, 7}, {"c", 2, 2, 8}, {"d", 3, 0, 9}};
  for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++)
    cr_assert_eq(push(w, recs[i].key, recs[i].s, recs[i].k, 0, recs[i].offset, -1, &win),
                 LS_REJECT_NONE);
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  expect_window(win, "b", 1, 0, 2, 1, offset_ab);
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  /* a's window 1: steps 2 (offset 3) and 3 (offset 5). */
  cr_assert_not_null(win);
  cr_expect_str_eq(win->key, "a");
  cr_expect_eq(win->index, 1);
  cr_expect_eq(win->first_offset, 3);
  cr_expect_eq(win->last_offset, 5);
  cr_expect_eq(win->n_targets, 1);
  cr_expect_eq(win->x[0], value_of(0, 2));
  cr_expect_eq(win->x[F], value_of(0, 3));
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  cr_expect_null(win);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.buffered, 0);
  ls_windower_destroy(w);
}

Test(window, restore_bad_arguments) {
  ls_windower_t *const w = windower(2);
  int64_t const off[2] = {5, 4}, t[2] = {0, 0};
  float const x[2 * F] = {0};
  ls_inflight_t in = {"k", 1, 0, 0, -1, 0, 1, off, t, x, 0};
  cr_expect_eq(ls_windower_restore(NULL, &in, 1, keep, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_restore(w, &in, 1, NULL, NULL), LS_ERR_INVALID_ARG);
  in.rows = 0;
  cr_expect_eq(ls_windower_restore(w, &in, 1, keep, NULL), LS_ERR_INVALID_ARG);
  in.rows = 2;
  cr_expect_eq(ls_windower_restore(w, &in, 1, keep, NULL), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "ascend") != NULL, "%s", ls_last_error());
  in.rows = 1, in.index = -1;
  cr_expect_eq(ls_windower_restore(w, &in, 1, keep, NULL), LS_ERR_INVALID_ARG);
  in.index = 0, in.key_len = 0;
  cr_expect_eq(ls_windower_restore(w, &in, 1, keep, NULL), LS_ERR_INVALID_ARG);
  in.key_len = 1;
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "k", 0, 0, 0, 0, -1, &win), LS_REJECT_NONE);
  cr_expect_eq(ls_windower_restore(w, &in, 1, keep, NULL), LS_ERR_STATE, "a series seen");
  ls_inflight_t held;
  int found;
  cr_expect_eq(ls_windower_pending_of(NULL, "k", 1, &held, &found), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_pending_of(w, "k", 1, NULL, &found), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w);
}

/* A key evicted and back is two series in flight: restored, the earlier
 * one's rows make its windows and it is forgotten where the later one
 * begins; the series remaining come in their partition's order of arrival
 * (b before a), so the next eviction takes the same one as it would have.
 * T = 2, three series held. */
Test(window, restore_incarnations_of_a_key) {
  ls_windower_t *const w = windower(2);
  cr_assert_eq(ls_windower_set_eviction(w, 0, 3), LS_OK);
  int64_t const a1_off[3] = {0, 1, 2}, b_off[1] = {3}, a2_off[2] = {4, 6}, c_off[1] = {5};
  int64_t const t3[3] = {-1, -1, -1};
  float const x[3 * F] = {1, 2, 3, 4, 5, 6};
  ls_inflight_t const in[4] = {{"a", 1, 0, 0, -1, 0, 3, a1_off, t3, x, 0},
                               {"b", 1, 0, 4, -1, 0, 1, b_off, t3, x, 0},
                               {"a", 1, 0, 0, -1, 0, 2, a2_off, t3, x, 0},
                               {"c", 1, 0, 0, -1, 0, 1, c_off, t3, x, 0}};
  seen_list_t got = {0};
  cr_assert_eq(ls_windower_restore(w, in, 4, keep, &got), LS_OK, "%s", ls_last_error());
  cr_assert_eq(got.n, 1, "a's first incarnation's window");
  cr_expect(!strcmp(got.w[0].key, "a") && got.w[0].index == 0 && got.w[0].offsets[2] == 2);
  held_list_t held = {0};
  cr_assert_eq(ls_windower_each_pending(w, 0, keep_held, &held), LS_OK);
  cr_assert_eq(held.n, 3, "b, a (its second incarnation) and c");
  ls_inflight_t a;
  int found = 0;
  cr_assert_eq(ls_windower_pending_of(w, "a", 1, &a, &found), LS_OK);
  cr_assert(found && a.rows == 2 && a.offsets[0] == 4 && a.offsets[1] == 6 && a.index == 0,
            "a holds its second incarnation's rows");
  /* The next series evicts the least recently arrived: b (3), not c (5)
   * nor a (6). */
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "d", 3, 0, 0, 7, -1, &win), LS_REJECT_NONE);
  cr_assert_eq(ls_windower_pending_of(w, "b", 1, &a, &found), LS_OK);
  cr_expect(!found, "b was evicted");
  cr_assert_eq(ls_windower_pending_of(w, "c", 1, &a, &found), LS_OK);
  cr_expect(found, "c is held");
  /* Two incarnations whose records overlap are no such thing. */
  ls_windower_t *const w2 = windower(2);
  ls_inflight_t bad[2] = {in[0], in[0]};
  cr_expect_eq(ls_windower_restore(w2, bad, 2, keep, &got), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w), ls_windower_destroy(w2);
}

/* ------------------------------------------------------------------------ */
/* A series that moves partition (the topic gained partitions)               */

static int64_t offset_moved(int s, int k) {
  return k < 5 ? 10 + k : k - 5; /* steps 0..4 on partition 1, then 5.. on partition 0 */
}

/* A key first on partition 1 (steps 0..4, T = 3: window 0 complete, steps
 * 3 and 4 held) then on partition 0: its record there is accepted, not
 * rejected; what it held goes out as a partial window of partition 1
 * (steps 3, 4: one target), and its windows go on, numbered on, on
 * partition 0 from step 5; counted as moved, not as a new series nor an
 * eviction. */
Test(window, a_series_that_moves_partition_goes_on) {
  int const T = 3;
  ls_windower_t *const w = windower(T);
  const ls_window_t *win = NULL;
  for (int k = 0; k < 5; k++) {
    cr_assert_eq(push(w, "m", 0, k, 1, offset_moved(0, k), 1000 + k, &win), LS_REJECT_NONE);
    if (k == 3) expect_window(win, "m", 0, 0, T, T, offset_moved);
  }
  cr_assert_eq(push(w, "m", 0, 5, 0, offset_moved(0, 5), 1005, &win), LS_REJECT_NONE,
               "a record of the key on another partition");
  cr_assert_not_null(win, "what it held, closed");
  cr_expect_eq(win->partition, 1);
  cr_expect_eq(win->index, 1);
  cr_expect_eq(win->n_targets, 1);
  cr_expect_str_eq(win->key, "m");
  cr_expect(win->offsets[0] == 13 && win->offsets[1] == 14 && win->offsets[2] == -1);
  cr_expect(win->x[0] == value_of(0, 3) && win->x[F] == value_of(0, 4));
  int found = 0;
  cr_expect_eq(pending_of(w, "m", &found), 1);
  held_list_t held = {0};
  cr_assert_eq(ls_windower_each_pending(w, 1, keep_held, &held), LS_OK);
  cr_expect_eq(held.n, 0, "partition 1 holds nothing of it");
  cr_assert_eq(ls_windower_each_pending(w, 0, keep_held, &held), LS_OK);
  cr_expect_eq(held.n, 1, "partition 0 holds it");
  for (int k = 6; k < 8; k++) {
    cr_assert_eq(push(w, "m", 0, k, 0, offset_moved(0, k), 1000 + k, &win), LS_REJECT_NONE);
    cr_expect_null(win);
  }
  cr_assert_eq(push(w, "m", 0, 8, 0, offset_moved(0, 8), 1008, &win), LS_REJECT_NONE);
  cr_assert_not_null(win);
  cr_expect(win->partition == 0 && win->index == 2 && win->n_targets == T);
  cr_expect(win->first_offset == 0 && win->last_offset == 3 && win->x[0] == value_of(0, 5));
  /* Back on partition 1: a lone record (the carry, 8) has no target. */
  cr_assert_eq(push(w, "m", 0, 9, 1, 20, 1009, &win), LS_REJECT_NONE);
  cr_expect_null(win);
  /* Its time order holds across partitions. */
  cr_expect_eq(push(w, "m", 0, 10, 0, 9, 1, &win), LS_REJECT_BACKWARDS);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.moved, 2);
  cr_expect_eq(st.series, 1);
  cr_expect_eq(st.evicted, 0);
  cr_expect_eq(st.rejected[LS_REJECT_PARTITION], 0);
  cr_expect_eq(st.buffered, 1);
  ls_windower_destroy(w);
}

/* A snapshot taken after a key moved holds two entries of it: on its old
 * partition the rows of the partial window it closed (in flight), on the
 * new one what it holds, its windows numbered on. Restored, in either
 * order of partitions, the old one's rows give its windows and that
 * partial window again, and the new one goes on: the same windows as an
 * uninterrupted run. T = 2. */
Test(window, restore_a_series_that_moved) {
  for (int order = 0; order < 2; order++) {
    int32_t const from = order ? 0 : 2, to = order ? 2 : 0;
    int64_t const old_off[4] = {10, 11, 12, 13}, new_off[1] = {5};
    int64_t const old_t[4] = {100, 101, 102, 103}, new_t[1] = {104};
    float const x[4 * F] = {1, -1, 2, -2, 3, -3, 4, -4};
    /* Old: window 0 (10..12) in flight and the partial window 1 (12, 13);
     * new: index 2, one row. */
    ls_inflight_t const in[2] = {{"k", 1, from, 0, 103, 0, 4, old_off, old_t, x, 0},
                                 {"k", 1, to, 2, 104, 0, 1, new_off, new_t, x, 0}};
    ls_inflight_t const swapped[2] = {in[1], in[0]};
    ls_windower_t *const w = windower(2);
    seen_list_t got = {0};
    cr_assert_eq(ls_windower_restore(w, order ? swapped : in, 2, keep, &got), LS_OK, "%s",
                 ls_last_error());
    cr_assert_eq(got.n, 2, "the old partition's window and partial window (order %d)", order);
    cr_expect(got.w[0].index == 0 && got.w[0].n_targets == 2 && got.w[0].offsets[2] == 12);
    cr_expect(got.w[1].index == 1 && got.w[1].n_targets == 1 && got.w[1].offsets[1] == 13);
    ls_inflight_t k;
    int found = 0;
    cr_assert_eq(ls_windower_pending_of(w, "k", 1, &k, &found), LS_OK);
    cr_assert(found && k.partition == to && k.rows == 1 && k.offsets[0] == 5 && k.index == 2,
              "the key goes on on its new partition");
    const ls_window_t *win = NULL;
    cr_assert_eq(push(w, "k", 0, 1, to, 6, 105, &win), LS_REJECT_NONE);
    cr_assert_eq(push(w, "k", 0, 2, to, 7, 106, &win), LS_REJECT_NONE);
    cr_assert_not_null(win);
    cr_expect(win->index == 2 && win->first_offset == 5 && win->partition == to);
    held_list_t held = {0};
    cr_assert_eq(ls_windower_each_pending(w, from, keep_held, &held), LS_OK);
    cr_expect_eq(held.n, 0, "nothing left on the old partition");
    ls_windower_destroy(w);
  }
}
