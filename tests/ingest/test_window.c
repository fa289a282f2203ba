/*
 * The windower (ingest/window.c): exact TBPTT windows of a series (values,
 * one-record overlap, offsets, event times, indices), interleaved series, the trailing
 * partial windows, their masks and their order, every rejection reason
 * leaving the series untouched, a table of many series, skip rules
 * (resuming a series mid-stream) and the lowest offset a partition holds.
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
      for (int t = 0; t <= T; t++) /* each row's event time, the shared row's too */
        cr_expect_eq(win->times[t], 1000 + windows * T + t, "window %d row %d", windows, t);
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
  cr_assert_eq(ls_windower_flush_next(w, 4, &win), LS_OK);
  cr_expect_null(win, "AAPL is on partition 5");
  cr_assert_eq(ls_windower_flush_next(w, 5, &win), LS_OK);
  expect_window(win, "AAPL", 0, 3, T, 2, offset_single);
  for (int t = 0; t <= T; t++) /* padding rows have no time */
    cr_expect_eq(win->times[t], t <= 2 ? 1009 + t : -1, "partial window row %d", t);
  cr_assert_eq(ls_windower_flush_next(w, 5, &win), LS_OK);
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
/* Skip rules, low offsets, flush order                                      */

/* Resuming series "s" (partition 2) after its window 1 was trained: records
 * below that window's last target (step 6) are skipped without a trace,
 * step 6 is row 0 of window 2, and every window after is the uninterrupted
 * run's (expect_window: window k holds steps kT..kT+T). */
Test(window, skip_rule_resumes_a_series) {
  int const T = 3;
  ls_windower_t *const w = windower(T);
  cr_assert_eq(ls_windower_skip_series(w, "s", 1, 2, offset_single(0, 6), 2), LS_OK, "%s",
               ls_last_error());
  const ls_window_t *win = NULL;
  /* Skipped, not validated: a time after step 6's, a value that is NaN. */
  cr_expect_eq(push(w, "s", 0, 3, 2, offset_single(0, 3), 5000, &win), LS_REJECT_NONE);
  cr_expect_null(win);
  float const nan_v[F] = {NAN, 0};
  char buf[F * 4];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, nan_v, F, buf, sizeof buf, &len), LS_OK);
  ls_record_t const bad = {"s", 1, buf, len, 2, offset_single(0, 4), 1004};
  cr_expect_eq(ls_windower_push(w, &bad, &win), LS_REJECT_NONE);
  /* The rule holds the series to its partition, as before the snapshot. */
  cr_expect_eq(push(w, "s", 0, 7, 1, offset_single(0, 7), 1007, &win), LS_REJECT_PARTITION);
  int64_t pending;
  int found;
  cr_assert_eq(ls_windower_pending(w, "s", 1, &pending, &found), LS_OK);
  cr_expect_eq(found, 0, "skipped records start no series");
  int windows = 2;
  for (int k = 5; k < 14; k++) {
    cr_assert_eq(push(w, "s", 0, k, 2, offset_single(0, k), 1000 + k, &win), LS_REJECT_NONE);
    if (k > 6 && k % T == 0)
      expect_window(win, "s", 0, windows++, T, T, offset_single);
    else
      cr_expect_null(win, "record %d completed a window", k);
  }
  cr_expect_eq(windows, 4);
  cr_expect_eq(push(w, "s", 0, 14, 1, offset_single(0, 14), 1014, &win), LS_REJECT_PARTITION);
  cr_assert_eq(ls_windower_flush_next(w, 2, &win), LS_OK);
  expect_window(win, "s", 0, 4, T, 1, offset_single);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.skipped, 3);  /* steps 3 and 5, the NaN */
  cr_expect_eq(st.accepted, 8); /* steps 6..13 */
  cr_expect_eq(st.rejected[LS_REJECT_PARTITION], 2);
  cr_expect_eq(st.rejected[LS_REJECT_NONFINITE], 0);
  cr_expect_eq(st.records, 13);
  cr_expect_eq(st.series, 1);
  cr_expect_eq(st.windows, 2);
  ls_windower_destroy(w);
}

/* 100k rules (a snapshot's worth of series): each series' first record
 * below its rule is skipped, the next starts it at its window index. T = 1,
 * so the record after completes a window. Once every rule is passed the
 * rules are freed and new series go on as usual. */
Test(window, many_skip_rules) {
  int const S = 100000;
  ls_windower_t *const w = windower(1);
  char key[32];
  for (int s = 0; s < S; s++) {
    snprintf(key, sizeof key, "series-%d", s);
    cr_assert_eq(ls_windower_skip_series(w, key, strlen(key), s % 8, 1000 + s, s), LS_OK);
  }
  for (int step = 0; step < 3; step++)
    for (int s = 0; s < S; s++) {
      snprintf(key, sizeof key, "series-%d", s);
      const ls_window_t *win = NULL;
      int64_t const offset = 999 + s + step;
      cr_assert_eq(push(w, key, s % 1000, step, s % 8, offset, step, &win), LS_REJECT_NONE);
      if (step < 2) {
        cr_assert_null(win);
        continue;
      }
      cr_assert_not_null(win, "series %d", s);
      cr_assert_eq(win->index, s);
      cr_assert_eq(win->first_offset, 1000 + s);
      cr_assert_eq(win->x[0], value_of(s % 1000, 1));
    }
  const ls_window_t *win = NULL;
  cr_expect_eq(push(w, "new", 0, 0, 3, 5, 0, &win), LS_REJECT_NONE);
  cr_expect_eq(push(w, "new", 0, 1, 3, 6, 0, &win), LS_REJECT_NONE);
  cr_assert_not_null(win);
  cr_expect_eq(win->index, 0);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.skipped, S);
  cr_expect_eq(st.series, S + 1);
  cr_expect_eq(st.windows, S + 1);
  ls_windower_destroy(w);
}

/* The lowest held offset of a partition: partial windows, and the last
 * target of a window handed out (the next window's first input). T = 2. */
Test(window, low_offset_includes_the_overlap_record) {
  ls_windower_t *const w = windower(2);
  const ls_window_t *win = NULL;
  int64_t low;
  int found;
  cr_assert_eq(ls_windower_low_offset(w, 0, &low, &found), LS_OK);
  cr_expect_eq(found, 0);
  cr_expect_eq(low, -1);
  struct {
    const char *key;
    int64_t offset, low; /* the partition's low offset after the push */
  } const steps[] = {
      {"a", 0, 0}, {"b", 1, 0},
      {"a", 2, 0}, {"a", 3, 1}, /* a's window (0, 2, 3) is out: a holds 3, b still 1 */
      {"b", 4, 1}, {"b", 5, 3}, /* b's window (1, 4, 5) is out: b holds 5 */
      {"a", 6, 3},              /* the carry: a's row 0 is 3 */
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    cr_assert_eq(push(w, steps[i].key, 0, (int)i, 0, steps[i].offset, -1, &win), LS_REJECT_NONE);
    cr_assert_eq(ls_windower_low_offset(w, 0, &low, &found), LS_OK);
    cr_expect_eq(found, 1);
    cr_expect_eq(low, steps[i].low, "after offset %lld", (long long)steps[i].offset);
  }
  /* Offsets out of order (not Kafka's, but the windower's API allows it). */
  cr_assert_eq(push(w, "c", 0, 0, 1, 10, -1, &win), LS_REJECT_NONE);
  cr_assert_eq(push(w, "d", 0, 0, 1, 5, -1, &win), LS_REJECT_NONE);
  cr_assert_eq(ls_windower_low_offset(w, 1, &low, &found), LS_OK);
  cr_expect_eq(low, 5);
  /* After the flush partition 0 holds nothing; partition 1 is untouched. */
  do
    cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  while (win != NULL);
  cr_assert_eq(ls_windower_low_offset(w, 0, &low, &found), LS_OK);
  cr_expect_eq(found, 0);
  cr_assert_eq(ls_windower_low_offset(w, 1, &low, &found), LS_OK);
  cr_expect_eq(found, 1);
  cr_expect_eq(low, 5);
  ls_windower_destroy(w);
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

Test(window, skip_rule_bad_arguments) {
  ls_windower_t *const w = windower(2);
  cr_expect_eq(ls_windower_skip_series(NULL, "k", 1, 0, 0, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_skip_series(w, NULL, 1, 0, 0, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_skip_series(w, "", 0, 0, 0, 0), LS_ERR_INVALID_ARG);
  char long_key[LS_KEY_MAX + 1];
  memset(long_key, 'k', sizeof long_key);
  cr_expect_eq(ls_windower_skip_series(w, long_key, sizeof long_key, 0, 0, 0), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "256 bytes") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_windower_skip_series(w, "k", 1, -1, 0, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_skip_series(w, "k", 1, 0, -1, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_skip_series(w, "k", 1, 0, 0, -1), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "series 'k'") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_windower_skip_series(w, "k", 1, 0, 4, 1), LS_OK);
  cr_expect_eq(ls_windower_skip_series(w, "k", 1, 0, 5, 1), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "two skip rules") != NULL, "%s", ls_last_error());
  const ls_window_t *win = NULL;
  cr_assert_eq(push(w, "seen", 0, 0, 0, 0, -1, &win), LS_REJECT_NONE);
  cr_expect_eq(ls_windower_skip_series(w, "seen", 4, 0, 9, 1), LS_ERR_STATE);
  int64_t low;
  int found;
  cr_expect_eq(ls_windower_low_offset(NULL, 0, &low, &found), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_low_offset(w, 0, NULL, &found), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_low_offset(w, 0, &low, NULL), LS_ERR_INVALID_ARG);
  ls_windower_destroy(w);
}
