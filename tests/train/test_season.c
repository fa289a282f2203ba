/*
 * Seasons and the linear path (train/season.h): --season's text, a
 * series' season found from its own changes, and the linear path's online
 * least squares against a known autoregression.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/digest.h" /* base_mix64: a reproducible noise */
#include "season.h"
#include "prep.h"            /* prep_adopt_begin */
#include "season_internal.h" /* the horizons' mixing block */

static ls_train_conf_t *conf_with(const char *season, const char *linear) {
  ls_train_conf_t *c = NULL;
  cr_assert_eq(ls_train_conf_new(&c), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "season", season), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_train_conf_set(c, "linear", linear), LS_OK, "%s", ls_last_error());
  return c;
}

/* The seasons of one target as --season and --linear say, then the keys
 * and values of kv (pairs, NULL after the last; never NULL). */
static season_t *season_set(const char *season, const char *linear, const char *const *kv) {
  ls_train_conf_t *c = conf_with(season, linear);
  for (int i = 0; kv[i] != NULL; i += 2)
    cr_assert_eq(ls_train_conf_set(c, kv[i], kv[i + 1]), LS_OK, "%s", ls_last_error());
  season_t *s = NULL;
  cr_assert_eq(season_new(c, 1, &s), LS_OK, "%s", ls_last_error());
  cr_assert_not_null(s);
  ls_train_conf_destroy(c);
  return s;
}

/* ... with --auto-seasons as found says. */
static season_t *season_found(const char *season, const char *linear, const char *found) {
  return season_set(season, linear, (const char *const[]){"auto_seasons", found, NULL});
}

static season_t *season_with(const char *season, const char *linear) {
  return season_found(season, linear, "2");
}

/* A standard normal draw from counter i (Box-Muller on splitmix64). */
static double gauss(uint64_t i) {
  double const u = ((double)(base_mix64(2 * i) >> 11) + 0.5) / 9007199254740992.0;
  double const v = ((double)(base_mix64(2 * i + 1) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Feeds x [n] to one series of one target through season_record (change
 * scale 1, level 0), the linear path's forecasts of record t + 1 into a
 * [n] (may be NULL); returns the series' state (malloc'ed). */
static double *feed(season_t *s, const double *x, int n, double *a) {
  double *const model = calloc(season_width(s), sizeof *model);
  cr_assert_not_null(model);
  float *const in = calloc((size_t)season_inputs(s) + 1, sizeof *in);
  int const feat = 0;
  double const ds = 1.0, ls = 1.0;
  float const level = 0.0f;
  for (int t = 0; t < n; t++) {
    float const v = (float)x[t];
    double lin = 0.0, beta = 0.0, raw = 0.0;
    season_record(s, model, t, &v, &feat, &ds, &ls, &level, in, &lin, &beta, &raw, NULL);
    if (a != NULL) a[t] = raw;
  }
  free(in);
  return model;
}

Test(season, parse) {
  int slots = -1, p[SEASON_SLOTS_MAX];
  cr_expect_eq(season_parse("auto", 336, &slots, p), LS_OK);
  cr_expect(slots == 1 && p[0] == 0);
  cr_expect_eq(season_parse("none", 336, &slots, p), LS_OK);
  cr_expect_eq(slots, 0);
  cr_expect_eq(season_parse("24,168", 336, &slots, p), LS_OK);
  cr_expect(slots == 2 && p[0] == 24 && p[1] == 168);
  const char *const bad[] = {"1", "400", "24,168,7", "daily", "24,", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    cr_expect_eq(season_parse(bad[i], 336, &slots, p), LS_ERR_INVALID_ARG, "'%s' was accepted",
                 bad[i]);
}

/* Nothing of it runs without a season or the linear path, or without
 * normalised change targets. */
Test(season, off) {
  season_t *s = NULL;
  ls_train_conf_t *c = conf_with("none", "false");
  cr_assert_eq(season_new(c, 1, &s), LS_OK);
  cr_expect_null(s);
  cr_assert_eq(ls_train_conf_set(c, "season", "auto"), LS_OK);
  cr_assert_eq(ls_train_conf_set(c, "normalize", "none"), LS_OK);
  cr_assert_eq(season_new(c, 1, &s), LS_OK);
  cr_expect_null(s);
  ls_train_conf_destroy(c);
}

/* A noisy cycle of 24 records is found as such; a random walk has none. */
Test(season, found_from_the_changes) {
  season_t *const s = season_with("auto", "false");
  enum { N = 3000 };
  double *const x = malloc(N * sizeof *x), *const w = malloc(N * sizeof *w);
  double walk = 0.0;
  for (int t = 0; t < N; t++) {
    x[t] = 100.0 + 10.0 * sin(6.283185307179586 * t / 24.0) + gauss((uint64_t)t);
    walk += gauss((uint64_t)(t + N)), w[t] = walk;
  }
  double *const m1 = feed(s, x, N, NULL), *const m2 = feed(s, w, N, NULL);
  cr_expect_eq(season_period(s, m1, 0, 0), 24);
  cr_expect_eq(season_period(s, m1, 0, 1), 0, "a second season %d in a single one",
               season_period(s, m1, 0, 1));
  cr_expect_eq(season_period(s, m2, 0, 0), 0);
  cr_expect_eq(season_period(s, m2, 0, 1), 0);
  free(m1), free(m2), free(x), free(w);
  season_free(s);
}

/* A day of 24 records in a week of 7 days whose last two are quieter (an
 * hourly load): both seasons are found, the day first, the week second;
 * the inputs stay those of one season (the week's lags feed the linear
 * path). */
Test(season, a_week_beside_a_day) {
  season_t *const s = season_with("auto", "true");
  cr_expect_eq(season_inputs(s), 2, "the model's inputs are the first season's two");
  enum { N = 4000 };
  double *const x = malloc(N * sizeof *x);
  for (int t = 0; t < N; t++) {
    int const weekend = (t / 24) % 7 >= 5;
    x[t] = 100.0 + (weekend ? 3.0 : 10.0) * sin(6.283185307179586 * t / 24.0) + gauss((uint64_t)t);
  }
  double *const m = feed(s, x, N, NULL);
  cr_expect_eq(season_period(s, m, 0, 0), 24, "%d", season_period(s, m, 0, 0));
  cr_expect_eq(season_period(s, m, 0, 1), 168, "%d", season_period(s, m, 0, 1));
  free(m), free(x);
  season_free(s);
}

/* Until a second season is found its features are 0 and left out of the
 * least squares: the linear path forecasts as with one season found, to
 * the bit (the leading block's Cholesky is the whole one's). */
Test(season, no_second_season_changes_nothing) {
  season_t *const one = season_found("auto", "true", "1"), *const two = season_with("auto", "true");
  enum { N = 3000 };
  double *const x = malloc(N * sizeof *x), *const a1 = calloc(N, sizeof *a1);
  double *const a2 = calloc(N, sizeof *a2);
  for (int t = 0; t < N; t++)
    x[t] = 100.0 + 10.0 * sin(6.283185307179586 * t / 24.0) + gauss((uint64_t)t);
  double *const m1 = feed(one, x, N, a1), *const m2 = feed(two, x, N, a2);
  cr_assert_eq(season_period(two, m2, 0, 1), 0);
  cr_expect_arr_eq(a1, a2, N * sizeof *a1, "the linear path's forecasts differ");
  cr_expect_gt(season_width(two), season_width(one), "the second season has its own state");
  free(m1), free(m2), free(x), free(a1), free(a2);
  season_free(one), season_free(two);
}

/* On an AR(2) series the linear path's one-step forecasts reach the
 * noise's variance: it contains AR(p). */
Test(season, linear_path_learns_an_autoregression) {
  season_t *const s = season_with("none", "true");
  enum { N = 6000 };
  double *const x = calloc(N, sizeof *x), *const a = calloc(N, sizeof *a);
  for (int t = 2; t < N; t++)
    x[t] = 0.6 * x[t - 1] - 0.3 * x[t - 2] + gauss((uint64_t)t);
  double *const m = feed(s, x, N, a);
  double se = 0.0;
  int n = 0;
  for (int t = N / 2; t + 1 < N; t++) /* a[t]: the forecast of x[t+1] - x[t] */
    se += (x[t] + a[t] - x[t + 1]) * (x[t] + a[t] - x[t + 1]), n++;
  /* 1.1: the least squares of ~20 weights over its ~1,000-row memory adds
   * about 2% to the noise's variance; 3,000 scored rows put the estimate
   * within about 3%. */
  cr_expect_lt(se / n, 1.1, "MSE %g, noise variance 1", se / n);
  free(m), free(x), free(a);
  season_free(s);
}

/* The seasonal naive forecast per horizon (issue 25's baseline): record t
 * + h's value ceil(h / P) seasons back, x[t + h - k P], from the series'
 * ring; NaN without a season or before the series reaches that far back. */
Test(season, naive_per_horizon) {
  enum { P = 24, N = 200 };
  season_t *const s = season_with("24", "true");
  double x[N];
  for (int t = 0; t < N; t++)
    x[t] = (double)(t * 7 % 101); /* distinct values: an index off by one shows */
  double *const model = feed(s, x, N, NULL);
  int64_t const t = N - 1;
  for (int h = 1; h <= 3 * P; h++) {
    int64_t const k = (h + P - 1) / P;
    cr_expect_eq(season_naive(s, model, 0, t, h), (double)(float)x[t + h - k * P],
                 "h %d: x[t + h - %lld P]", h, (long long)k);
  }
  cr_expect(isnan(season_naive(s, model, 0, t, 0)), "h 0: none");
  free(model);
  season_free(s);
  season_t *const young = season_with("24", "true");
  double *const m2 = feed(young, x, 10, NULL);
  cr_expect(isnan(season_naive(young, m2, 0, 9, 1)), "10 records: x[-14] is not there");
  cr_expect_eq(season_naive(young, m2, 0, 9, 20), (double)(float)x[5]);
  free(m2);
  season_free(young);
  season_t *const none = season_with("none", "true");
  double *const m3 = feed(none, x, N, NULL);
  cr_expect(isnan(season_naive(none, m3, 0, N - 1, 1)), "no season: NaN");
  free(m3);
  season_free(none);
}

/* The seasons and linear path of one target with --season-levels as
 * given. */
static season_t *season_levels(const char *season, const char *on) {
  return season_set(season, "true", (const char *const[]){"season_levels", on, NULL});
}

/* A season of 12 records (a monthly series) under noise of sd NOISE. */
#define NOISE 1.5
static void monthly(double *x, int n) {
  static const double shape[12] = {-8, -6, -3, 0, 2, 5, 9, 7, 3, 0, -4, -5};
  for (int t = 0; t < n; t++)
    x[t] = 50.0 + shape[t % 12] + NOISE * gauss((uint64_t)(t + 77));
}

/* With --season-levels a season found late takes its profiles from the
 * records the series holds: once found, the profiles are those of the
 * season given from the first record, to the bit. */
Test(season, a_season_found_late_starts_from_the_history) {
  enum { N = 120, P = 12 };
  double x[N];
  monthly(x, N);
  season_t *const found = season_levels("auto", "true"), *const given = season_levels("12", "true");
  double *const mf = feed(found, x, N, NULL), *const mg = feed(given, x, N, NULL);
  cr_assert_eq(season_period(found, mf, 0, 0), P, "%d", season_period(found, mf, 0, 0));
  const float *const pf = season_profiles(found, mf, 0, 0);
  const float *const pg = season_profiles(given, mg, 0, 0);
  cr_assert(pf != NULL && pg != NULL);
  cr_expect_arr_eq(pf, pg, P * sizeof *pf, "the change profiles differ");
  cr_expect_arr_eq(pf + 336, pg + 12, P * sizeof *pf, "the level profiles differ");
  cr_expect_null(season_profiles(given, mg, 0, 1), "one slot given");
  free(mf), free(mg);
  season_free(found), season_free(given);
}

/* On a noisy monthly series the level profile averages the season over
 * about 16 of them, where the values one and two seasons back and the
 * profile of changes hold two or the noise of two records: over the last
 * half of 1,200 records the linear path's MSE with it is within 25% of the
 * noise's variance, and clearly below that without it. */
Test(season, levels_average_the_season) {
  enum { N = 1200 };
  double *const x = malloc(N * sizeof *x), *const a_on = calloc(N, sizeof *a_on);
  double *const a_off = calloc(N, sizeof *a_off);
  cr_assert(x != NULL && a_on != NULL && a_off != NULL);
  monthly(x, N);
  season_t *const on = season_levels("auto", "true"), *const off = season_levels("auto", "false");
  double *const m1 = feed(on, x, N, a_on), *const m2 = feed(off, x, N, a_off);
  cr_assert_eq(season_period(on, m1, 0, 0), 12);
  double se_on = 0.0, se_off = 0.0;
  int n = 0;
  for (int t = N / 2; t + 1 < N; t++) {
    double const e1 = x[t] + a_on[t] - x[t + 1], e2 = x[t] + a_off[t] - x[t + 1];
    se_on += e1 * e1, se_off += e2 * e2, n++;
  }
  double const noise = NOISE * NOISE;
  cr_expect_lt(se_on / n, 1.25 * noise, "with levels MSE %g, noise %g", se_on / n, noise);
  cr_expect_lt(se_on / n, 0.95 * se_off / n, "with levels MSE %g, without %g", se_on / n,
               se_off / n);
  free(m1), free(m2), free(x), free(a_on), free(a_off);
  season_free(on), season_free(off);
}

/* The linear path of one target without seasons, --linear-blocks and
 * --linear-wait as given. */
static season_t *linear_with(const char *blocks, const char *wait) {
  return season_set("none", "true",
                    (const char *const[]){"linear_blocks", blocks, "linear_wait", wait, NULL});
}

/* A series pulled to the mean of its records 13 to 24 back (a slow cycle
 * beyond the last 12 changes): the blocks change nothing until the path
 * has learned 512 rows (to the bit), then carry the forecast. */
Test(season, blocks_reach_further_back) {
  enum { N = 6000 };
  double *const x = calloc(N, sizeof *x), *const a0 = calloc(N, sizeof *a0);
  double *const a2 = calloc(N, sizeof *a2);
  cr_assert(x != NULL && a0 != NULL && a2 != NULL);
  for (int t = 24; t < N; t++) {
    double mean = 0.0;
    for (int k = 12; k < 24; k++)
      mean += x[t - 1 - k] / 12.0;
    x[t] = 0.9 * mean + gauss((uint64_t)t + 999);
  }
  season_t *const none = linear_with("0", "1"), *const two = linear_with("2", "1");
  cr_expect_eq(season_features(two), season_features(none) + 2);
  double *const m0 = feed(none, x, N, a0), *const m2 = feed(two, x, N, a2);
  int const early = 32 + 500; /* the path's first row is the 33rd record's */
  cr_expect_arr_eq(a0, a2, early * sizeof *a0, "the blocks moved a forecast before 512 rows");
  double se0 = 0.0, se2 = 0.0;
  int n = 0;
  for (int t = N / 2; t + 1 < N; t++) {
    double const e0 = x[t] + a0[t] - x[t + 1], e2 = x[t] + a2[t] - x[t + 1];
    se0 += e0 * e0, se2 += e2 * e2, n++;
  }
  cr_expect_lt(se2 / n, 1.1, "with the blocks MSE %g, noise variance 1", se2 / n);
  cr_expect_lt(se2 / n, 0.9 * se0 / n, "with the blocks MSE %g, without %g", se2 / n, se0 / n);
  free(m0), free(m2), free(x), free(a0), free(a2);
  season_free(none), season_free(two);
}

/* The linear path forecasts once it has learned --linear-wait rows per
 * weight (the blocks' not counted): with 2 its first forecast comes one
 * row per weight later than with 1. */
Test(season, wait_rows_per_weight) {
  enum { N = 300 };
  double x[N];
  x[0] = 0.0;
  for (int t = 1; t < N; t++)
    x[t] = 0.7 * x[t - 1] + gauss((uint64_t)t + 5);
  int first[2] = {-1, -1}, weights = 0;
  for (int w = 1; w <= 2; w++) {
    season_t *const s = linear_with("2", w == 1 ? "1" : "2");
    weights = season_features(s) - 2;
    double a[N];
    double *const m = feed(s, x, N, a);
    for (int t = 0; t < N && first[w - 1] < 0; t++)
      if (a[t] != 0.0) first[w - 1] = t;
    cr_assert(first[w - 1] > 0, "no forecast with --linear-wait %d", w);
    free(m);
    season_free(s);
  }
  cr_expect_eq(first[1] - first[0], weights, "first forecasts at %d and %d, %d weights", first[0],
               first[1], weights);
}

/* Feeds x [n] as feed does with --horizon H: the linear path's forecasts
 * of the change over h records, h = 1..H, into a [n, H] (h-major: a[t H +
 * h - 1]), and each horizon's LSTM weight of the last record into beta
 * [H]. */
static double *feed_h(season_t *s, const double *x, int n, int H, double *a, double *beta) {
  double *const model = calloc(season_width(s), sizeof *model);
  cr_assert_not_null(model);
  float *const in = calloc((size_t)season_inputs(s) + 1, sizeof *in);
  double *const lin = calloc((size_t)H, sizeof *lin);
  cr_assert(in != NULL && lin != NULL);
  int const feat = 0;
  double const ds = 1.0, ls = 1.0;
  float const level = 0.0f;
  for (int t = 0; t < n; t++) {
    float const v = (float)x[t];
    season_record(s, model, t, &v, &feat, &ds, &ls, &level, in, lin, beta, a + (size_t)t * H, NULL);
  }
  free(in), free(lin);
  return model;
}

static season_t *horizons_with(const char *horizon, const char *on) {
  return season_set("none", "true",
                    (const char *const[]){"horizon", horizon, "horizon_linear", on, NULL});
}

/* Exactly (to float rounding): horizon h's forecast after record t is h -
 * 1's plus the one-step forecast of the series continued by its forecasts
 * of records t + 1 .. t + h - 1, fed to a copy of its state that learns no
 * row from them ([9] = 0, season.c; their own profile updates are at
 * phases no later forecast reads). */
static void check_iterated(season_t *s, const double *x, int N) {
  enum { H = 6 };
  double *const a = malloc((size_t)N * H * sizeof *a);
  cr_assert_not_null(a);
  double beta[H];
  for (int t = N - 40; t < N; t += 7) {
    double *const mt = feed_h(s, x, t + 1, H, a, beta);
    double const now = (double)(float)x[t];
    for (int h = 2; h <= H; h++) {
      double const prev = a[(size_t)t * H + h - 2], got = a[(size_t)t * H + h - 1];
      mt[9] = 0.0;
      float const v = (float)(now + prev), level = 0.0f;
      float in[2];
      int const feat = 0;
      double const ds = 1.0, ls = 1.0;
      double lin[H], next[H];
      season_record(s, mt, t + h - 1, &v, &feat, &ds, &ls, &level, in, lin, beta, next, NULL);
      double const want = (double)v - now + next[0];
      cr_expect_lt(fabs(got - want), 1e-4 * (1.0 + fabs(want)),
                   "record %d: h = %d's %.9g, not %.9g", t, h, got, want);
    }
    free(mt);
  }
  free(a);
}

/* Beyond h = 1 the linear path iterates its one-step regression on its own
 * forecasts: on changes that follow d[t+1] = 0.6 d[t] + e, its forecast of
 * the change over h records is d[t] (0.6 + 0.6^2 + .. + 0.6^h), as an
 * AR(1) of the changes forecasts it; h = 1's is the same as with
 * --horizon 1 bit for bit; --horizon-linear false forecasts none. */
Test(season, later_horizons_iterate_the_one_step_path) {
  enum { N = 4000, H = 6 };
  double *const x = malloc(N * sizeof *x), *const d = malloc(N * sizeof *d);
  double *const a = malloc((size_t)N * H * sizeof *a), *const a1 = malloc(N * sizeof *a1);
  cr_assert(x && d && a && a1);
  d[0] = 0.0, x[0] = 100.0;
  for (int t = 1; t < N; t++)
    d[t] = 0.6 * d[t - 1] + gauss((uint64_t)t + 77), x[t] = x[t - 1] + d[t];
  season_t *const s = horizons_with("6", "true"), *const one = horizons_with("1", "true");
  season_t *const off = horizons_with("6", "false");
  cr_expect_eq(season_horizons(s), H);
  cr_expect_eq(season_horizons(off), 1);
  cr_expect_gt(season_width(s), season_width(off), "no room for the horizons' mixing");
  double beta[H];
  double *const m = feed_h(s, x, N, H, a, beta), *const m1 = feed(one, x, N, a1);
  for (int t = 0; t < N; t++)
    cr_assert_eq(a[(size_t)t * H], a1[t], "record %d: h = 1's forecast %.17g, not %.17g", t,
                 a[(size_t)t * H], a1[t]);
  for (int h = 2; h <= H; h++) {
    double se = 0.0, sv = 0.0;
    for (int t = N / 2; t < N; t++) {
      double want = 0.0, g = 1.0;
      for (int i = 1; i <= h; i++)
        g *= 0.6, want += g * d[t];
      double const e = a[(size_t)t * H + h - 1] - want;
      se += e * e, sv += want * want;
    }
    /* (the fitted weights' noise grows with h: 2.5% at h = 2, 12% at 6;
     * the one-step forecast held, 8% and 58%) */
    cr_expect_lt(se, (0.02 + 0.025 * h) * sv, "h %d: off by %.3g of the forecast's variance", h,
                 se / sv);
    cr_expect_eq(beta[h - 1], 0.0, "h %d: the LSTM weighs %g before its mixing learned", h,
                 beta[h - 1]);
  }
  check_iterated(s, x, N);
  /* With a season of 12 (its lags and profiles, the level profile's mean
   * of the last 12 moved along a record at a time) on a cycle of 12. */
  season_t *const s12 = season_set(
      "12", "true", (const char *const[]){"horizon", "6", "horizon_linear", "true", NULL});
  for (int t = 0; t < N; t++)
    x[t] += 5.0 * sin(6.283185307179586 * t / 12.0);
  check_iterated(s12, x, N);
  season_free(s12);
  free(m), free(m1), free(x), free(d), free(a), free(a1);
  season_free(s), season_free(one), season_free(off);
}

/* Horizons past the season (H > P): the lags one season back of the
 * records after t are the path's own forecasts. A cycle of 4 records, with
 * a little noise, is forecast 5 and 6 records ahead as it repeats. */
Test(season, horizons_past_the_season_follow_the_cycle) {
  enum { N = 2000, H = 6 };
  double const cycle[4] = {0.0, 10.0, 4.0, -6.0};
  double *const x = malloc(N * sizeof *x), *const a = malloc((size_t)N * H * sizeof *a);
  cr_assert(x != NULL && a != NULL);
  for (int t = 0; t < N; t++)
    x[t] = 50.0 + cycle[t % 4] + 0.05 * gauss((uint64_t)t + 31);
  season_t *const s = season_set(
      "4", "true", (const char *const[]){"horizon", "6", "horizon_linear", "true", NULL});
  double beta[H];
  double *const m = feed_h(s, x, N, H, a, beta);
  for (int h = 1; h <= H; h++) {
    double se = 0.0;
    int count = 0;
    for (int t = N / 2; t + h < N; t++, count++) {
      double const want = cycle[(t + h) % 4] - cycle[t % 4], e = a[(size_t)t * H + h - 1] - want;
      se += e * e;
    }
    /* (the cycle's changes: a variance of about 60; the noise's 0.0025) */
    cr_expect_lt(se / count, 0.01, "h %d: mean squared error %.3g", h, se / count);
  }
  free(m), free(x), free(a);
  season_free(s);
}

/* Each later horizon's mixing is its own: rows whose target is the linear
 * path's forecast weigh it (alpha near 1, beta near 0), rows whose target
 * is the LSTM's weigh that (beta near 1, alpha near 0; with
 * --horizon-prior, beta_h drawn towards 0 by h x that many rows against
 * the 1,024 the sums hold: 1024 / (1024 + 3 x 32) at h = 3); a horizon
 * past H or before 1 learns nothing; season_record hands out each
 * horizon's weights. */
static void horizons_mix(const char *prior, double beta3) {
  enum { H = 3 };
  season_t *const s = season_set("none", "true",
                                 (const char *const[]){"horizon", "3", "horizon_linear", "true",
                                                       "horizon_prior", prior, NULL});
  size_t const width = season_width(s);
  double *const model = calloc(width, sizeof *model), *const only = calloc(width, sizeof *only);
  cr_assert(model != NULL && only != NULL);
  for (int i = 0; i < 2000; i++) {
    double const a = gauss((uint64_t)i + 900), p = gauss((uint64_t)i + 9000);
    for (int k = 0; k < 2; k++) {
      double *const m = k == 0 ? model : only;
      season_learn(s, m, 0, 2, a, a, p, 0.0); /* h = 2: the linear path is right */
      season_learn(s, m, 0, 3, a, p, p, 0.0); /* h = 3: the LSTM is */
    }
    season_learn(s, model, 0, 4, a, a, p, 0.0); /* beyond H: nothing */
    season_learn(s, model, 0, 0, a, a, p, 0.0); /* nor before 1 */
  }
  cr_expect_arr_eq(model, only, width * sizeof *model, "a horizon outside 1..H learned");
  season_solve(s, model, 0);
  const double *const h2 = model + s->hx, *const h3 = h2 + HMIX; /* alpha [5], beta [6] */
  cr_expect_gt(h2[5], 0.95, "h = 2's alpha %g", h2[5]);
  cr_expect_lt(h2[6], 0.05, "h = 2's beta %g", h2[6]);
  cr_expect_lt(h3[5], 0.05, "h = 3's alpha %g", h3[5]);
  cr_expect_lt(fabs(h3[6] - beta3), 0.02, "h = 3's beta %g, not about %g", h3[6], beta3);
  /* As season_record hands them out. */
  float const v = 1.0f, level = 0.0f;
  float in[1];
  double lin[H], raw[H], beta[H];
  int const feat = 0;
  double const ds = 1.0, ls = 1.0;
  season_record(s, model, 0, &v, &feat, &ds, &ls, &level, in, lin, beta, raw, NULL);
  cr_expect(beta[1] == h2[6] && beta[2] == h3[6], "beta %g %g", beta[1], beta[2]);
  free(model), free(only);
  season_free(s);
}

Test(season, later_horizons_mix_on_their_own) {
  horizons_mix("0", 1.0);
  horizons_mix("32", 1024.0 / (1024.0 + 3 * 32.0));
}

/* The linear path's refit (season_solve_w) solves several target blocks
 * at once, one a vector lane: each block's weights are the bits of its
 * solve alone, whether it shares a call with 1, 3 (the 4-lane vectors) or
 * 7 others (8 lanes), with fewer features in use (n < K), and beside a
 * block whose sums are not positive definite (whose weights stay as they
 * were); and they solve (A + I) w = b (Gaussian elimination here). */
Test(season, refits_in_lanes_are_each_blocks_alone) {
  enum { BLOCKS = 8 };
  season_t *const s = season_with("auto", "true");
  int const K = season_features(s);
  size_t const per = season_width(s); /* one target */
  cr_assert(K > 5 && K < 64, "K %d", K);
  double *blocks[BLOCKS], *alone[BLOCKS];
  for (int k = 0; k < BLOCKS; k++) {
    blocks[k] = calloc(per, sizeof(double));
    alone[k] = calloc(per, sizeof(double));
    cr_assert(blocks[k] != NULL && alone[k] != NULL);
    double *const A = blocks[k] + HEAD + 2 * (size_t)K, *const b = A + season_tri(K);
    /* A = Z^T Z over 3K rows of draws (the upper triangle, as learn_row
     * keeps it), b = Z^T y */
    for (int r = 0; r < 3 * K; r++) {
      double z[64], y = gauss((uint64_t)(k * 1000 + r) * 97 + 1);
      for (int u = 0; u < K; u++)
        z[u] = gauss((uint64_t)(k * 1000 + r) * 97 + 2 + (uint64_t)u);
      for (int u = 0; u < K; u++) {
        for (int v = u; v < K; v++)
          A[season_tri_at(K, u, v)] += z[u] * z[v];
        b[u] += z[u] * y;
      }
    }
    if (k == 5) A[0] = -10.0; /* A + I not positive definite */
    for (int p = 0; p < K; p++)
      blocks[k][HEAD + p] = 1000.0 + p; /* weights before */
    memcpy(alone[k], blocks[k], per * sizeof(double));
  }
  int const ns[2] = {K, K - 5};
  for (int v = 0; v < 2; v++) {
    int const n = ns[v];
    for (int k = 0; k < BLOCKS; k++) {
      memcpy(alone[k], blocks[k], per * sizeof(double));
      season_solve_w(s, &alone[k], 1, n);
    }
    int const calls[3] = {8, 3, 5};
    for (int c = 0; c < 3; c++) {
      double *ms[BLOCKS];
      for (int k = 0; k < calls[c]; k++) {
        ms[k] = malloc(per * sizeof(double));
        cr_assert_not_null(ms[k]);
        memcpy(ms[k], blocks[k], per * sizeof(double));
      }
      season_solve_w(s, ms, calls[c], n);
      for (int k = 0; k < calls[c]; k++) {
        cr_expect_eq(memcmp(ms[k] + HEAD, alone[k] + HEAD, (size_t)K * sizeof(double)), 0,
                     "n %d, %d blocks: block %d's weights differ from its solve alone", n, calls[c],
                     k);
        free(ms[k]);
      }
    }
    for (int p = 0; p < K; p++)
      cr_expect_eq(alone[5][HEAD + p], 1000.0 + p, "not positive definite: weight %d changed", p);
    /* Block 0 against Gaussian elimination of (A + I) w = b, its first n. */
    double M[64][65];
    const double *const A = blocks[0] + HEAD + 2 * (size_t)K, *const b = A + season_tri(K);
    for (int p = 0; p < n; p++) {
      for (int q = 0; q < n; q++)
        M[p][q] =
            A[p <= q ? season_tri_at(K, p, q) : season_tri_at(K, q, p)] + (p == q ? 1.0 : 0.0);
      M[p][n] = b[p];
    }
    for (int c = 0; c < n; c++)
      for (int r = c + 1; r < n; r++) {
        double const f = M[r][c] / M[c][c];
        for (int q = c; q <= n; q++)
          M[r][q] -= f * M[c][q];
      }
    double w[64];
    for (int p = n - 1; p >= 0; p--) {
      w[p] = M[p][n];
      for (int q = p + 1; q < n; q++)
        w[p] -= M[p][q] * w[q];
      w[p] /= M[p][p];
    }
    for (int p = 0; p < n; p++)
      cr_expect_lt(fabs(w[p] - alone[0][HEAD + p]), 1e-9 * (1.0 + fabs(w[p])),
                   "n %d: w[%d] %.17g, not %.17g", n, p, alone[0][HEAD + p], w[p]);
  }
  for (int k = 0; k < BLOCKS; k++)
    free(blocks[k]), free(alone[k]);
  season_free(s);
}

/* With --mix-profile the one-step forecast weighs in the first season's
 * level profile's forecast l (5 more doubles a target): on a short noisy
 * monthly series, where the linear path's 26 weights fit noise, the mixing
 * (the LSTM silent: p = 0) puts weight on l and forecasts better than the
 * linear path alone (the mixing as the trainer runs it: each record's
 * forecasts learned when the next record arrives, then refitted). */
static double mixed_run(season_t *s, const double *x, int N, double ds, double *gamma,
                        size_t *width, int *young);

static double mixed_mse(const char *on, double *gamma, size_t *width) {
  enum { N = 240 };
  double x[N];
  monthly(x, N);
  season_t *const s =
      season_set("12", "true", (const char *const[]){"mix_profile", on, "linear_wait", "1", NULL});
  double const mse = mixed_run(s, x, N, 1.0, gamma, width, NULL);
  season_free(s);
  return mse;
}

/* mixed_mse's run of season s over x [N] in units of ds: the MSE over the
 * second half, the profile's weight (*gamma), the state's width; young
 * (unless NULL) receives the rows the linear path gave no forecast yet
 * (a = 0) after which the profile weight's sums held something. */
static double mixed_run(season_t *s, const double *x, int N, double ds, double *gamma,
                        size_t *width, int *young) {
  *width = season_width(s);
  double *const model = calloc(*width, sizeof *model);
  float *const in = calloc((size_t)season_inputs(s) + 1, sizeof *in);
  cr_assert(model != NULL && in != NULL);
  int const feat = 0;
  double const ls = 1.0;
  float const level = 0.0f;
  double se = 0.0, a = 0.0, l = 0.0, lin = 0.0;
  int n = 0;
  if (young != NULL) *young = 0;
  for (int t = 0; t < N; t++) {
    float const v = (float)x[t];
    if (t > 0) {
      double const y = ((double)v - (double)(float)x[t - 1]) / ds;
      if (t >= N / 2) se += (lin - y) * (lin - y), n++;
      season_learn(s, model, 0, 1, a, y, 0.0, l);
      season_solve(s, model, 0);
      const double *const g = model + s->mx; /* the profile weight's sums */
      if (young != NULL && a == 0.0 && (g[0] != 0.0 || g[1] != 0.0 || g[2] != 0.0 || g[3] != 0.0))
        ++*young;
    }
    double beta = 0.0;
    season_record(s, model, t, &v, &feat, &ds, &ls, &level, in, &lin, &beta, &a, &l);
  }
  *gamma = season_profile_weight(s, model, 0);
  free(model), free(in);
  return se / n;
}

/* A quarterly series whose swing grows with its level, as UKgas': the
 * level x2.5 over 108 quarters, the swing from 30% of it to 60%. */
static void growing(double *x, int n) {
  static const double shape[4] = {0.5, -0.1, -0.6, 0.2};
  for (int t = 0; t < n; t++) {
    double const level = 100.0 * exp(0.0085 * t), swing = 0.3 + 0.3 * t / (double)n;
    x[t] = level * (1.0 + swing * shape[t % 4]) + 2.0 * gauss((uint64_t)(t + 501));
  }
}

/* --mix-profile-rows linear: the profile's weight learns only from rows
 * where the linear path forecast too (a and l forecast the same change;
 * rows where l stood alone taught it the whole change, which the linear
 * path then forecast as well). Its sums hold nothing while the path is
 * young, and on a season that grows the pair no longer overshoots it: the
 * second half's MSE well under that of every row's fit. */
Test(season, mix_profile_learns_beside_the_linear_path) {
  enum { N = 108 };
  double x[N];
  growing(x, N);
  double mse[2], gamma[2];
  int young[2];
  const char *const rows[2] = {"linear", "all"};
  for (int k = 0; k < 2; k++) {
    season_t *const s = season_set(
        "4", "true", (const char *const[]){"mix_profile_rows", rows[k], "linear_wait", "1", NULL});
    size_t width = 0;
    mse[k] = mixed_run(s, x, N, 40.0, &gamma[k], &width, &young[k]);
    season_free(s);
  }
  cr_expect_eq(young[0], 0, "%d young rows in the profile weight's sums", young[0]);
  cr_expect_gt(young[1], 0, "every row's fit: no young rows in its sums");
  cr_expect_lt(mse[0], 0.5 * mse[1],
               "MSE %g (gamma %g) on the linear path's rows, %g (gamma %g) on all", mse[0],
               gamma[0], mse[1], gamma[1]);
}

Test(season, mix_profile_weighs_the_level_profile) {
  double g_on = -1.0, g_off = -1.0;
  size_t w_on = 0, w_off = 0;
  double const on = mixed_mse("true", &g_on, &w_on), off = mixed_mse("false", &g_off, &w_off);
  cr_expect_eq(w_on, w_off + 5, "state of %zu doubles with, %zu without", w_on, w_off);
  cr_expect_eq(g_off, 0.0);
  cr_expect(g_on > 0.05 && g_on <= 1.0, "gamma %g", g_on);
  cr_expect_lt(on, 0.95 * off, "MSE %g with the profile, %g without", on, off);
}

/* A state written before the linear path's A was kept as its upper
 * triangle (whole, both triangles summed: the same values mirrored) comes
 * back as this layout, the same doubles in their places: the weights,
 * sums and everything after A (the horizons' mixing, the floats, the
 * second season) moved by what the lower triangle took. */
Test(season, full_sums_of_earlier_snapshots_packed) {
  season_t *const s = season_set(
      "auto", "true", (const char *const[]){"horizon", "3", "horizon_linear", "true", NULL});
  int const K = season_features(s);
  size_t const per = season_width(s), extra = season_full_extra(s), at = HEAD + 2 * (size_t)K;
  cr_assert_eq(extra, (size_t)K * (size_t)(K - 1) / 2);
  double *const now = calloc(per, sizeof *now);
  cr_assert_not_null(now);
  float *const in = calloc((size_t)season_inputs(s) + 1, sizeof *in);
  int const feat = 0;
  double const ds = 1.0, ls = 1.0;
  float const level = 0.0f;
  for (int t = 0; t < 900; t++) {
    float const v = (float)(sin(t * 6.283185307179586 / 24.0) + 0.1 * gauss((uint64_t)t + 77));
    double lin[3], beta[3], raw[3];
    season_record(s, now, t, &v, &feat, &ds, &ls, &level, in, lin, beta, raw, NULL);
  }
  free(in);
  /* the layout before: A [K][K] */
  double *const old = calloc(per + extra, sizeof *old), *const back = calloc(per, sizeof *back);
  cr_assert(old != NULL && back != NULL);
  memcpy(old, now, at * sizeof *old);
  int nonzero = 0;
  for (int u = 0; u < K; u++)
    for (int v = u; v < K; v++) {
      double const a = now[at + season_tri_at(K, u, v)];
      old[at + (size_t)u * K + v] = old[at + (size_t)v * K + u] = a;
      nonzero += a != 0.0;
    }
  memcpy(old + at + (size_t)K * K, now + at + season_tri(K),
         (per - at - season_tri(K)) * sizeof *old);
  cr_assert_gt(nonzero, K, "the sums learned nothing");
  season_pack_full(s, old, back);
  cr_expect_eq(memcmp(back, now, per * sizeof *now), 0, "the packed state differs");
  free(now), free(old), free(back);
  season_free(s);
}

/* A snapshot's layout of the series' model state (prep_adopt_begin): its
 * section's version; without the section 1 (the sums whole: season_full_extra
 * doubles more than this run's), or 2 at this run's width (written on
 * 2026-11-28 before the section was kept); a later version refused. */
Test(season, layout_of_snapshots) {
  ls_train_conf_t *const c = conf_with("auto", "true");
  season_t *s = NULL;
  cr_assert_eq(season_new(c, 1, &s), LS_OK, "%s", ls_last_error());
  size_t const X = season_width(s), extra = season_full_extra(s);
  cr_assert_gt(extra, 0);
  ls_shape_t const shape = {2, 8, 1, 1};
  struct {
    int version; /* 0: no section */
    size_t width;
    int layout; /* 0: refused */
  } const cases[] = {{0, X + extra, 1}, {0, X, 2}, {1, X + extra, 1}, {2, X, 2}, {3, X, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    ls_snapshot_t *snap = NULL;
    cr_assert_eq(ls_snapshot_new(&shape, 0, 0, &snap), LS_OK);
    cr_assert_eq(ls_snapshot_set_stats_shape(snap, 1, 1), LS_OK, "%s", ls_last_error());
    cr_assert_eq(ls_snapshot_set_model_width(snap, cases[k].width), LS_OK, "%s", ls_last_error());
    if (cases[k].version > 0)
      cr_assert_eq(ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_SERIES_MODEL,
                                           (uint32_t)cases[k].version, LS_SNAPSHOT_REQUIRED, NULL,
                                           0),
                   LS_OK);
    prep_adopt_t ad;
    ls_err_t const err = prep_adopt_begin(c, 1, X, snap, &ad);
    if (cases[k].layout == 0) {
      cr_expect_eq(err, LS_ERR_UNSUPPORTED, "case %zu", k);
      cr_expect(strstr(ls_last_error(), "layout 3") != NULL, "%s", ls_last_error());
    } else {
      cr_expect_eq(err, LS_OK, "case %zu: %s", k, ls_last_error());
      cr_expect_eq(ad.layout, cases[k].layout, "case %zu", k);
    }
    prep_adopt_end(&ad);
    ls_snapshot_destroy(snap);
  }
  season_free(s);
  ls_train_conf_destroy(c);
}
