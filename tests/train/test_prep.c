/*
 * A step's windows prepared on several threads (train/prep.h,
 * prep_windows) are bit for bit those prepared one by one on one thread
 * (prep_window): the inputs, targets, the linear path's forecasts, the
 * units, the event-time range, and every series' normaliser and seasons'
 * state; steps too small for threads and more threads than windows alike;
 * bad arguments refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prep.h"

enum { F = 3, T = 8, N = 100, STEPS = 30 };

/* One series' state, for each of the two ways. */
typedef struct series_s {
  int64_t norm_n;
  double norm[F * LS_NORM_STATS];
  double *model;
} series_t;

static prep_t *prep_with(const ls_train_conf_t *c, int threads) {
  prep_t *p = NULL;
  cr_assert_eq(prep_new(c, N, &p), LS_OK, "%s", ls_last_error());
  cr_assert_eq(prep_set_threads(p, threads), LS_OK, "%s", ls_last_error());
  return p;
}

/* Window k of series s: records k T .. k T + T of a daily-like cycle with
 * the series' own phase and level, the last window of some series short. */
static void make_window(ls_window_t *w, float *x, int64_t *times, int64_t *offs, int s, int k) {
  int const n_targets = (k == STEPS - 1 && s % 3 == 0) ? T - 3 : T;
  for (int t = 0; t <= T; t++) {
    int64_t const r = (int64_t)k * T + t;
    for (int f = 0; f < F; f++)
      x[t * F + f] = t <= n_targets ? (float)(1000.0 * (s + 1) + 50.0 * sin((double)r * 0.26 + s) +
                                              7.0 * f + 0.3 * cos((double)r * 1.7 * (f + 1)))
                                    : 0.0f;
    times[t] = t <= n_targets ? 1700000000000 + r * 60000 : -1;
    offs[t] = t <= n_targets ? r : -1;
  }
  *w = (ls_window_t){.key = "k",
                     .key_len = 1,
                     .series = s,
                     .index = k,
                     .first_offset = (int64_t)k * T,
                     .last_offset = (int64_t)k * T + n_targets,
                     .T = T,
                     .F = F,
                     .n_targets = n_targets,
                     .x = x,
                     .times = times,
                     .offsets = offs};
}

#define SAME(a, b, count, what)                                                                    \
  cr_assert(memcmp((a), (b), (size_t)(count) * sizeof *(a)) == 0, "step %d: %s differ", step, what)

/* n windows a step (the first n series), on 1 thread and on `threads`. */
static void compare(int n, int threads, int used) {
  ls_train_conf_t *c = NULL;
  cr_assert_eq(ls_train_conf_new(&c), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "features", "3"), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "window", "8"), LS_OK);
  prep_t *const one = prep_with(c, 1), *const many = prep_with(c, threads);
  cr_assert_not_null(one->sea, "the default has seasons and the linear path");
  size_t const width = season_width(one->sea);
  series_t *const a = calloc(N, sizeof *a), *const b = calloc(N, sizeof *b);
  for (int s = 0; s < N; s++) {
    a[s].model = calloc(width, sizeof *a[s].model);
    b[s].model = calloc(width, sizeof *b[s].model);
  }
  float *const x = malloc((size_t)N * (T + 1) * F * sizeof *x);
  int64_t *const times = malloc((size_t)N * (T + 1) * sizeof *times);
  int64_t *const offs = malloc((size_t)N * (T + 1) * sizeof *offs);
  ls_window_t *const w = calloc(N, sizeof *w);
  const ls_window_t **const wins = calloc(N, sizeof *wins);
  ls_series_stats_t *const sa = calloc(N, sizeof *sa), *const sb = calloc(N, sizeof *sb);
  for (int step = 0; step < STEPS; step++) {
    for (int s = 0; s < n; s++) {
      size_t const at = (size_t)s * (T + 1);
      make_window(&w[s], x + at * F, times + at, offs + at, s, step);
      wins[s] = &w[s];
      sa[s] = (ls_series_stats_t){.norm_n = &a[s].norm_n, .norm = a[s].norm, .model = a[s].model};
      sb[s] = (ls_series_stats_t){.norm_n = &b[s].norm_n, .norm = b[s].norm, .model = b[s].model};
      sa[s].model_n = sb[s].model_n = width;
    }
    prep_begin(one, n);
    for (int s = 0; s < n; s++)
      cr_assert_eq(prep_window(one, s, wins[s], &sa[s]), LS_OK, "%s", ls_last_error());
    prep_begin(many, n);
    cr_assert_eq(prep_windows(many, n, wins, sb), LS_OK, "%s", ls_last_error());
    cr_assert_eq(many->threads_used, used, "step %d: %d threads, not %d", step, many->threads_used,
                 used);
    size_t const rows = (size_t)T * n, ro = rows * one->O;
    SAME(one->x, many->x, rows * one->I, "inputs");
    SAME(one->target, many->target, ro, "targets");
    SAME(one->y, many->y, ro, "the LSTM's targets");
    SAME(one->lin, many->lin, ro, "the linear path's forecasts");
    SAME(one->a, many->a, ro, "its forecasts before the mixing");
    SAME(one->base, many->base, ro, "bases");
    SAME(one->scale, many->scale, ro, "scales");
    SAME(one->last, many->last, ro, "last values");
    SAME(one->mask, many->mask, rows, "masks");
    SAME(one->rec, many->rec, rows, "record numbers");
    SAME(one->time, many->time, rows, "times");
    cr_assert(one->t_min == many->t_min && one->t_max == many->t_max, "step %d: time range", step);
    cr_assert(one->t_max > 0, "step %d: no time range", step);
    for (int s = 0; s < n; s++) {
      cr_assert_eq(a[s].norm_n, b[s].norm_n);
      SAME(a[s].norm, b[s].norm, F * LS_NORM_STATS, "normalisers");
      SAME(a[s].model, b[s].model, width, "seasons' states");
    }
  }
  for (int s = 0; s < N; s++)
    free(a[s].model), free(b[s].model);
  free(a), free(b), free(x), free(times), free(offs), free(w), free(wins), free(sa), free(sb);
  prep_free(one), prep_free(many);
  ls_train_conf_destroy(c);
}

Test(prep, threads_give_the_same_rows) {
  compare(N, 3, 3); /* 100 windows x 8 rows x 3 targets: threads */
}

Test(prep, more_threads_than_windows) {
  compare(2, 8, 1); /* 48 record-targets a step: one thread */
}

Test(prep, arguments) {
  ls_train_conf_t *c = NULL;
  cr_assert_eq(ls_train_conf_new(&c), LS_OK);
  prep_t *const p = prep_with(c, 2);
  ls_series_stats_t st;
  const ls_window_t *wins[1] = {NULL};
  cr_expect_eq(prep_set_threads(p, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(prep_set_threads(NULL, 2), LS_ERR_INVALID_ARG);
  cr_expect_eq(prep_set_threads(p, 1), LS_OK, "fewer threads than it has: kept");
  cr_expect_eq(prep_windows(NULL, 1, wins, &st), LS_ERR_INVALID_ARG);
  cr_expect_eq(prep_windows(p, N + 1, wins, &st), LS_ERR_INVALID_ARG, "more windows than B");
  cr_expect_eq(prep_windows(p, 1, NULL, &st), LS_ERR_INVALID_ARG);
  cr_expect_eq(prep_windows(p, 1, wins, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(prep_windows(p, 0, NULL, NULL), LS_OK, "an empty step");
  prep_free(p);
  ls_train_conf_destroy(c);
}
