/*
 * The synthetic feed's generators in memory (include/lstream/ingest.h,
 * "Synthetic feed"): keys, reproducibility, random access, the statistics
 * each generator promises (its best achievable one-step error, AR(2)'s
 * stationary variance), and argument checking.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "lstream/produce.h"

static ls_feed_t *feed_make(ls_gen_t gen, int series, int features, double noise, uint64_t seed) {
  ls_feed_conf_t c;
  ls_feed_conf_default(&c);
  c.generator = gen;
  c.series = series;
  c.features = features;
  c.noise = noise;
  c.seed = seed;
  ls_feed_t *feed = NULL;
  cr_assert_eq(ls_feed_new(&feed, &c), LS_OK, "ls_feed_new: %s", ls_last_error());
  return feed;
}

/* Residual statistics over series, steps skip..K-1 and features:
 * the mean of (value - mean) and of its square, and the values' variance. */
typedef struct residual_s {
  double mean, mse, var;
} residual_t;

static residual_t feed_residual(ls_feed_t *feed, int64_t K, int64_t skip) {
  ls_feed_conf_t const *const c = ls_feed_conf(feed);
  float out[8], mean[8];
  double sum_r = 0, sum_r2 = 0, sum_x = 0, sum_x2 = 0, n = 0;
  for (int s = 0; s < c->series; s++)
    for (int64_t k = 0; k < K; k++) {
      cr_assert_eq(ls_feed_value(feed, s, k, out, mean), LS_OK);
      if (k < skip) continue;
      for (int f = 0; f < c->features; f++) {
        double const r = (double)out[f] - mean[f];
        sum_r += r, sum_r2 += r * r, sum_x += out[f], sum_x2 += (double)out[f] * out[f], n++;
      }
    }
  double const mx = sum_x / n;
  return (residual_t){sum_r / n, sum_r2 / n, sum_x2 / n - mx * mx};
}

Test(feed, keys_are_zero_padded) {
  char buf[16];
  cr_expect_eq(ls_feed_key(42, buf, sizeof buf), 7);
  cr_expect_str_eq(buf, "SYM0042");
  cr_expect_eq(ls_feed_key(12345, buf, sizeof buf), 8);
  cr_expect_str_eq(buf, "SYM12345");
  cr_expect_eq(ls_feed_key(1, buf, 7), -1, "a key that does not fit");
  cr_expect_eq(ls_feed_key(-1, buf, sizeof buf), -1);
}

Test(feed, event_time_is_start_plus_steps) {
  ls_feed_t *const feed = feed_make(LS_GEN_SINE, 1, 1, 0.1, 1);
  ls_feed_conf_t const *const c = ls_feed_conf(feed);
  cr_expect_eq(ls_feed_time(feed, 0), c->start_ms);
  cr_expect_eq(ls_feed_time(feed, 7), c->start_ms + 7 * c->step_ms);
  ls_feed_destroy(feed);
}

Test(feed, same_seed_same_values_other_seed_other_values) {
  for (ls_gen_t g = LS_GEN_SINE; g <= LS_GEN_REGIME; g++) {
    ls_feed_t *const a = feed_make(g, 3, 4, 0.1, 7), *const b = feed_make(g, 3, 4, 0.1, 7),
                     *const other = feed_make(g, 3, 4, 0.1, 8);
    float va[4], vb[4], vo[4];
    int differ = 0;
    for (int s = 0; s < 3; s++)
      for (int64_t k = 0; k < 50; k++) {
        ls_feed_value(a, s, k, va, NULL);
        ls_feed_value(b, s, k, vb, NULL);
        ls_feed_value(other, s, k, vo, NULL);
        cr_assert(!memcmp(va, vb, sizeof va), "%s: series %d step %lld differs for one seed",
                  ls_gen2str(g), s, (long long)k);
        differ += memcmp(va, vo, sizeof va) != 0;
      }
    cr_expect_eq(differ, 150, "%s: seeds 7 and 8 agree on %d of 150 steps", ls_gen2str(g),
                 150 - differ);
    ls_feed_destroy(a), ls_feed_destroy(b), ls_feed_destroy(other);
  }
}

Test(feed, random_access_matches_sequential) {
  for (ls_gen_t g = LS_GEN_SINE; g <= LS_GEN_REGIME; g++) {
    ls_feed_t *const feed = feed_make(g, 4, 2, 0.1, 3);
    float seq[4][100][2], v[2];
    for (int64_t k = 0; k < 100; k++) /* series interleaved, as produced */
      for (int s = 0; s < 4; s++)
        ls_feed_value(feed, s, k, seq[s][k], NULL);
    int64_t const probes[] = {99, 0, 57, 58, 3, 99, 42};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
      int64_t const k = probes[i];
      cr_assert_eq(ls_feed_value(feed, 2, k, v, NULL), LS_OK);
      cr_assert(!memcmp(v, seq[2][k], sizeof v), "%s: step %lld asked again differs", ls_gen2str(g),
                (long long)k);
    }
    ls_feed_destroy(feed);
  }
}

/* Tolerances below: every figure is an average over >= 100k draws whose
 * relative standard error is under 1% (2% for regime, whose regimes last
 * ~50 steps); the bounds sit at about 5 standard errors. The draws are
 * fixed by the seed, so the result never changes from run to run. */

Test(feed, sine_best_error_is_the_noise_variance) {
  ls_feed_t *const feed = feed_make(LS_GEN_SINE, 64, 4, 0.2, 11);
  residual_t const r = feed_residual(feed, 2000, 0);
  cr_expect(fabs(r.mse / 0.04 - 1.0) < 0.03, "mse %g, want 0.04 = noise^2", r.mse);
  cr_expect(fabs(r.mean) < 0.003, "residual mean %g, want 0", r.mean);
  /* sin^2 averages 1/2 over whole periods, plus the noise; 2000 steps hold
   * whole periods but for a part worth at most 128 / (4 pi 2000) = 0.005. */
  cr_expect(fabs(r.var - 0.54) < 0.02, "variance %g, want 0.5 + 0.04", r.var);
  ls_feed_destroy(feed);
}

Test(feed, ar2_best_error_and_stationary_variance) {
  ls_feed_t *const feed = feed_make(LS_GEN_AR2, 64, 4, 0.1, 5);
  ls_feed_conf_t const *const c = ls_feed_conf(feed);
  residual_t const r = feed_residual(feed, 2000, 100); /* skip the start from 0 */
  double const a1 = c->ar1, a2 = c->ar2, s2 = 0.01;
  double const var = s2 * (1 - a2) / ((1 + a2) * ((1 - a2) * (1 - a2) - a1 * a1));
  cr_expect(fabs(r.mse / s2 - 1.0) < 0.03, "mse %g, want s2 = %g", r.mse, s2);
  cr_expect(fabs(r.mean) < 0.001, "residual mean %g, want 0", r.mean);
  /* Autocorrelated values: about 10x fewer independent draws, so 10%. */
  cr_expect(fabs(r.var / var - 1.0) < 0.10, "variance %g, want %g (3.7 s2)", r.var, var);
  ls_feed_destroy(feed);
}

Test(feed, regime_best_error_mixes_the_two_volatilities) {
  ls_feed_t *const feed = feed_make(LS_GEN_REGIME, 256, 2, 0.1, 9);
  residual_t const r = feed_residual(feed, 1000, 0);
  /* Half the time calm (vol noise), half turbulent (3 noise): 5 noise^2,
   * plus the unknown switch: p (1 - p) (0.01 + 0.02)^2. */
  double const want = 5 * 0.01 + 0.02 * 0.98 * 0.03 * 0.03;
  cr_expect(fabs(r.mse / want - 1.0) < 0.10, "mse %g, want %g", r.mse, want);
  cr_expect(fabs(r.mean) < 0.002, "residual mean %g, want 0", r.mean);
  ls_feed_destroy(feed);
}

Test(feed, zero_noise_makes_the_mean_exact) {
  for (ls_gen_t g = LS_GEN_SINE; g <= LS_GEN_AR2; g++) {
    ls_feed_t *const feed = feed_make(g, 2, 3, 0.0, 1);
    residual_t const r = feed_residual(feed, 100, 0);
    cr_expect_eq(r.mse, 0.0, "%s: mse %g without noise", ls_gen2str(g), r.mse);
    ls_feed_destroy(feed);
  }
}

/* ls_feed_new must fail with INVALID_ARG and name the field. */
static void expect_bad_conf(ls_feed_conf_t c, const char *field) {
  ls_feed_t *feed = (ls_feed_t *)1;
  cr_expect_eq(ls_feed_new(&feed, &c), LS_ERR_INVALID_ARG, "%s accepted", field);
  cr_expect_null(feed, "%s: out not cleared", field);
  cr_expect(strstr(ls_last_error(), field) != NULL, "message '%s' does not name %s",
            ls_last_error(), field);
}

/* --offset A --scale S: every value (and its expectation) is A + S x in
 * float, the recursions running on x as before. */
Test(feed, offset_and_scale_transform_the_values_only) {
  for (int g = 0; g < 3; g++) {
    ls_feed_t *const plain = feed_make((ls_gen_t)g, 3, 2, 0.1, 9);
    ls_feed_conf_t c = *ls_feed_conf(plain);
    c.offset = 1e4, c.scale = 1e3;
    ls_feed_t *moved = NULL;
    cr_assert_eq(ls_feed_new(&moved, &c), LS_OK, "%s", ls_last_error());
    float a[2], am[2], b[2], bm[2];
    for (int s = 0; s < 3; s++)
      for (int64_t k = 0; k < 300; k++) {
        cr_assert_eq(ls_feed_value(plain, s, k, a, am), LS_OK);
        cr_assert_eq(ls_feed_value(moved, s, k, b, bm), LS_OK);
        for (int f = 0; f < 2; f++) {
          cr_assert_eq(b[f], (float)(1e4 + 1e3 * (double)a[f]), "%s s %d k %lld", ls_gen2str(g), s,
                       (long long)k);
          cr_assert_eq(bm[f], (float)(1e4 + 1e3 * (double)am[f]));
        }
      }
    ls_feed_destroy(plain);
    ls_feed_destroy(moved);
  }
}

Test(feed, bad_configurations_are_rejected) {
  ls_feed_conf_t d;
  ls_feed_conf_default(&d);
  ls_feed_conf_t c = d;
  c.series = 0, expect_bad_conf(c, "series");
  c = d, c.features = 0, expect_bad_conf(c, "features");
  c = d, c.features = LS_FEATURES_MAX + 1, expect_bad_conf(c, "features");
  c = d, c.series = LS_FEED_MAX_SERIES, c.features = 64, expect_bad_conf(c, "series * features");
  c = d, c.records_per_series = 0, expect_bad_conf(c, "records_per_series");
  c = d, c.noise = -1, expect_bad_conf(c, "noise");
  c = d, c.noise = NAN, expect_bad_conf(c, "noise");
  c = d, c.generator = (ls_gen_t)7, expect_bad_conf(c, "generator");
  c = d, c.generator = LS_GEN_AR2, c.ar1 = 1.5, c.ar2 = 0.0, expect_bad_conf(c, "stationary");
  c = d, c.generator = LS_GEN_AR2, c.ar1 = 0.0, c.ar2 = -1.0, expect_bad_conf(c, "stationary");
  c = d, c.step_ms = 0, expect_bad_conf(c, "step_ms");
  c = d, c.start_ms = INT64_MAX - 10, expect_bad_conf(c, "start_ms");
  c = d, c.scale = 0.0, expect_bad_conf(c, "scale");
  c = d, c.offset = INFINITY, expect_bad_conf(c, "offset");
  cr_expect_eq(ls_feed_new(NULL, &d), LS_ERR_INVALID_ARG);
  ls_feed_t *feed = NULL;
  cr_expect_eq(ls_feed_new(&feed, NULL), LS_ERR_INVALID_ARG);
  ls_feed_destroy(NULL); /* accepted */
}

Test(feed, value_checks_its_arguments) {
  ls_feed_t *const feed = feed_make(LS_GEN_AR2, 2, 1, 0.1, 1);
  float v;
  cr_expect_eq(ls_feed_value(feed, 2, 0, &v, NULL), LS_ERR_INVALID_ARG, "series out of range");
  cr_expect_eq(ls_feed_value(feed, -1, 0, &v, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_feed_value(feed, 0, -1, &v, NULL), LS_ERR_INVALID_ARG, "negative step");
  cr_expect_eq(ls_feed_value(feed, 0, 0, NULL, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_feed_value(NULL, 0, 0, &v, NULL), LS_ERR_INVALID_ARG);
  ls_feed_destroy(feed);
}

Test(feed, generator_names) {
  ls_gen_t g;
  cr_expect_eq(ls_gen_parse("regime", &g), LS_OK);
  cr_expect_eq(g, LS_GEN_REGIME);
  cr_expect_str_eq(ls_gen2str(LS_GEN_AR2), "ar2");
  cr_expect_eq(ls_gen_parse("cosine", &g), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "cosine") != NULL);
}
