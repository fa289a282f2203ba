/*
 * The synthetic feed's generators, in memory (include/lstream/produce.h,
 * "Synthetic feed"). Randomness is counter-based: every draw hashes (seed,
 * series, step, stream) with splitmix64's finalizer, so a value depends on
 * its coordinates only. ar2 and regime keep the last two values (and the
 * regime) of each series to run their recursions. Per feature f:
 *
 *   sine    x[k] = sin(2 pi k / P + phi) + noise * z[k], with period P in
 *           [16, 128) steps and phase phi in [0, 2 pi) drawn per (series, f).
 *   ar2     x[k] = ar1 x[k-1] + ar2 x[k-2] + noise * z[k], from x = 0. The
 *           coefficients must be stationary (|ar2| < 1, ar1 + ar2 < 1,
 *           ar2 - ar1 < 1); the defaults 1.2, -0.5 are (complex roots of
 *           modulus 0.71: a damped cycle of about 11 steps; stationary
 *           variance 3.7 s2).
 *   regime  a random walk x[k] = x[k-1] + d[r] + v[r] z[k] from x = 0, whose
 *           regime r (one per series) is calm (d = +0.01, v = noise) or
 *           turbulent (d = -0.02, v = 3 noise), starts at random and switches
 *           with probability 0.02 per step. Not stationary, by design.
 */
#include "lstream/produce.h"

#include "base/digest.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Draw streams: features use 0..F-1; the others sit above any F. */
#define STREAM_PERIOD ((uint64_t)1 << 32)
#define STREAM_PHASE  ((uint64_t)2 << 32)
#define STREAM_REGIME ((uint64_t)3 << 32)
#define STREAM_NORMAL ((uint64_t)4 << 32) /* Box-Muller's second uniform */

/* The regime generator's constants (above). */
static const double regime_drift[2] = {0.01, -0.02};
static const double regime_vol[2] = {1.0, 3.0}; /* times noise */
static const double regime_switch_p = 0.02;

static const double two_pi = 6.283185307179586;

struct ls_feed_s {
  ls_feed_conf_t conf;
  int64_t *next;         /* (N) the step each series' state is ready to compute */
  unsigned char *regime; /* (N) regime of the series' last computed step */
  float *x1, *x2;        /* (N, F) the series' last and second-to-last values */
};

/* ------------------------------------------------------------------------ */
/* Counter-based random draws                                                */

/* A uniform in (0, 1) that depends only on its four coordinates. */
static double feed_uniform(uint64_t seed, int s, int64_t k, uint64_t stream) {
  uint64_t const h =
      base_mix64(base_mix64(base_mix64(base_mix64(seed) ^ (uint64_t)s) ^ (uint64_t)k) ^ stream);
  return ((double)(h >> 11) + 0.5) * 0x1.0p-53;
}

/* A standard normal (Box-Muller) for feature f of series s at step k. */
static double feed_normal(uint64_t seed, int s, int64_t k, int f) {
  double const u1 = feed_uniform(seed, s, k, (uint64_t)f);
  double const u2 = feed_uniform(seed, s, k, STREAM_NORMAL + (uint64_t)f);
  return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

/* ------------------------------------------------------------------------ */
/* Names and configuration                                                   */

static const char *const gen_names[] = {"sine", "ar2", "regime"};

ls_err_t ls_gen_parse(const char *name, ls_gen_t *out) {
  LS_RETURN_IF(name == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_gen_parse: name and out must not be NULL");
  for (int g = 0; g < 3; g++)
    if (!strcmp(name, gen_names[g])) {
      *out = (ls_gen_t)g;
      return LS_OK;
    }
  return ls_error_set(LS_ERR_INVALID_ARG, "unknown generator '%s' (expected sine, ar2 or regime)",
                      name);
}

const char *ls_gen2str(ls_gen_t gen) {
  return gen >= LS_GEN_SINE && gen <= LS_GEN_REGIME ? gen_names[gen] : "unknown";
}

void ls_feed_conf_default(ls_feed_conf_t *conf) {
  if (conf == NULL) return;
  *conf = (ls_feed_conf_t){.series = 16,
                           .features = 4,
                           .records_per_series = 1000,
                           .generator = LS_GEN_SINE,
                           .noise = 0.1,
                           .seed = 1,
                           .ar1 = 1.2,
                           .ar2 = -0.5,
                           .start_ms = INT64_C(1704067200000),
                           .step_ms = 1000,
                           .offset = 0.0,
                           .scale = 1.0};
}

static ls_err_t feed_check_conf(const ls_feed_conf_t *c) {
  LS_RETURN_IF(c->series < 1 || c->series > LS_FEED_MAX_SERIES, LS_ERR_INVALID_ARG,
               "feed: series = %d is out of range (1..%d)", c->series, LS_FEED_MAX_SERIES);
  LS_RETURN_IF(c->features < 1 || c->features > LS_FEATURES_MAX, LS_ERR_INVALID_ARG,
               "feed: features = %d is out of range (1..%d)", c->features, LS_FEATURES_MAX);
  LS_RETURN_IF((int64_t)c->series * c->features > LS_FEED_MAX_CELLS, LS_ERR_INVALID_ARG,
               "feed: series * features = %d * %d exceeds %d (fewer series or features)", c->series,
               c->features, LS_FEED_MAX_CELLS);
  LS_RETURN_IF(c->records_per_series < 1 || c->records_per_series > INT64_MAX / c->series,
               LS_ERR_INVALID_ARG,
               "feed: records_per_series = %lld must be at least 1, and series * "
               "records_per_series must fit in 64 bits",
               (long long)c->records_per_series);
  LS_RETURN_IF(c->generator < LS_GEN_SINE || c->generator > LS_GEN_REGIME, LS_ERR_INVALID_ARG,
               "feed: generator %d is not one of ls_gen_t", (int)c->generator);
  LS_RETURN_IF(!(c->noise >= 0.0 && c->noise <= 1e6), LS_ERR_INVALID_ARG,
               "feed: noise = %g must be in [0, 1e6]", c->noise);
  LS_RETURN_IF(c->generator == LS_GEN_AR2 &&
                   !(fabs(c->ar2) < 1.0 && c->ar1 + c->ar2 < 1.0 && c->ar2 - c->ar1 < 1.0),
               LS_ERR_INVALID_ARG,
               "feed: AR(2) coefficients %g, %g are not stationary (need |ar2| < 1, ar1 + ar2 < "
               "1, ar2 - ar1 < 1; e.g. 1.2, -0.5); the series would explode",
               c->ar1, c->ar2);
  LS_RETURN_IF(!isfinite(c->offset) || !isfinite(c->scale) || c->scale == 0.0, LS_ERR_INVALID_ARG,
               "feed: offset %g and scale %g must be finite, the scale not 0", c->offset, c->scale);
  LS_RETURN_IF(c->step_ms < 1, LS_ERR_INVALID_ARG,
               "feed: step_ms = %lld must be at least 1 (event times must increase)",
               (long long)c->step_ms);
  LS_RETURN_IF(c->start_ms < 0 || c->records_per_series > (INT64_MAX - c->start_ms) / c->step_ms,
               LS_ERR_INVALID_ARG,
               "feed: start_ms = %lld with %lld steps of %lld ms overflows the timestamps",
               (long long)c->start_ms, (long long)c->records_per_series, (long long)c->step_ms);
  return LS_OK;
}

ls_err_t ls_feed_new(ls_feed_t **out, const ls_feed_conf_t *conf) {
  LS_RETURN_IF(out == NULL || conf == NULL, LS_ERR_INVALID_ARG,
               "ls_feed_new: out and conf must not be NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(feed_check_conf(conf));
  ls_feed_t *const feed = calloc(1, sizeof *feed);
  LS_RETURN_IF(feed == NULL, LS_ERR_NOMEM, "feed: allocating the generator");
  feed->conf = *conf;
  size_t const n = (size_t)conf->series, cells = n * (size_t)conf->features;
  if (conf->generator != LS_GEN_SINE) {
    feed->next = calloc(n, sizeof *feed->next);
    feed->regime = calloc(n, sizeof *feed->regime);
    feed->x1 = calloc(cells, sizeof *feed->x1);
    feed->x2 = calloc(cells, sizeof *feed->x2);
    if (!feed->next || !feed->regime || !feed->x1 || !feed->x2) {
      ls_feed_destroy(feed);
      return ls_error_set(LS_ERR_NOMEM, "feed: allocating the state of %zu series x %d features", n,
                          conf->features);
    }
  }
  *out = feed;
  return LS_OK;
}

void ls_feed_destroy(ls_feed_t *feed) {
  if (feed == NULL) return;
  free(feed->next);
  free(feed->regime);
  free(feed->x1);
  free(feed->x2);
  free(feed);
}

const ls_feed_conf_t *ls_feed_conf(const ls_feed_t *feed) {
  return feed != NULL ? &feed->conf : NULL;
}

int ls_feed_key(int s, char *buf, size_t size) {
  if (buf == NULL || s < 0) return -1;
  int const n = snprintf(buf, size, "SYM%04d", s);
  return n >= 0 && (size_t)n < size ? n : -1;
}

int64_t ls_feed_time(const ls_feed_t *feed, int64_t k) {
  return feed != NULL ? feed->conf.start_ms + k * feed->conf.step_ms : 0;
}

/* ------------------------------------------------------------------------ */
/* Generators                                                                */

static void feed_sine(const ls_feed_t *feed, int s, int64_t k, float *out, float *mean) {
  ls_feed_conf_t const *const c = &feed->conf;
  for (int f = 0; f < c->features; f++) {
    double const period = 16.0 + 112.0 * feed_uniform(c->seed, s, f, STREAM_PERIOD);
    double const phase = two_pi * feed_uniform(c->seed, s, f, STREAM_PHASE);
    /* k mod period keeps the argument small, so a late step is as exact as
     * an early one. */
    double const m = sin(two_pi * fmod((double)k, period) / period + phase);
    out[f] = (float)(m + c->noise * feed_normal(c->seed, s, k, f));
    if (mean != NULL) mean[f] = (float)m;
  }
}

/* Computes step feed->next[s] of an ar2 or regime series and advances its
 * state; out and mean as in ls_feed_value (mean may be NULL). */
static void feed_step(ls_feed_t *feed, int s, float *out, float *mean) {
  ls_feed_conf_t const *const c = &feed->conf;
  int64_t const k = feed->next[s];
  float *const x1 = feed->x1 + (size_t)s * (size_t)c->features;
  float *const x2 = feed->x2 + (size_t)s * (size_t)c->features;
  double expect_drift = 0.0, drift = 0.0, vol = c->noise;
  if (c->generator == LS_GEN_REGIME) {
    int const prev = feed->regime[s];
    int r;
    if (k == 0) {
      r = feed_uniform(c->seed, s, 0, STREAM_REGIME) < 0.5;
      expect_drift = 0.5 * (regime_drift[0] + regime_drift[1]);
    } else {
      r = feed_uniform(c->seed, s, k, STREAM_REGIME) < regime_switch_p ? !prev : prev;
      expect_drift =
          (1.0 - regime_switch_p) * regime_drift[prev] + regime_switch_p * regime_drift[!prev];
    }
    feed->regime[s] = (unsigned char)r;
    drift = regime_drift[r];
    vol = c->noise * regime_vol[r];
  }
  for (int f = 0; f < c->features; f++) {
    double const z = feed_normal(c->seed, s, k, f);
    double m, x;
    if (c->generator == LS_GEN_AR2) {
      m = c->ar1 * x1[f] + c->ar2 * x2[f];
      x = m + vol * z;
    } else {
      m = x1[f] + expect_drift;
      x = x1[f] + drift + vol * z;
    }
    x2[f] = x1[f];
    x1[f] = (float)x;
    out[f] = x1[f];
    if (mean != NULL) mean[f] = (float)m;
  }
  feed->next[s] = k + 1;
}

/* out [F] and mean [F] (may be NULL) as produced: offset + scale x. */
static void feed_transform(const ls_feed_t *feed, float *out, float *mean) {
  double const a = feed->conf.offset, b = feed->conf.scale;
  if (a == 0.0 && b == 1.0) return;
  for (int f = 0; f < feed->conf.features; f++) {
    out[f] = (float)(a + b * (double)out[f]);
    if (mean != NULL) mean[f] = (float)(a + b * (double)mean[f]);
  }
}

ls_err_t ls_feed_value(ls_feed_t *feed, int s, int64_t k, float *out, float *mean) {
  LS_RETURN_IF(feed == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_feed_value: feed and out must not be NULL");
  LS_RETURN_IF(s < 0 || s >= feed->conf.series, LS_ERR_INVALID_ARG,
               "ls_feed_value: series %d is out of range (0..%d)", s, feed->conf.series - 1);
  LS_RETURN_IF(k < 0, LS_ERR_INVALID_ARG, "ls_feed_value: step %lld is negative", (long long)k);
  if (feed->conf.generator == LS_GEN_SINE) {
    feed_sine(feed, s, k, out, mean);
    feed_transform(feed, out, mean);
    return LS_OK;
  }
  if (k < feed->next[s]) { /* replay the series from step 0 */
    size_t const F = (size_t)feed->conf.features, at = (size_t)s * F;
    feed->next[s] = 0;
    memset(feed->x1 + at, 0, F * sizeof *feed->x1);
    memset(feed->x2 + at, 0, F * sizeof *feed->x2);
  }
  while (feed->next[s] < k)
    feed_step(feed, s, out, NULL);
  feed_step(feed, s, out, mean);
  feed_transform(feed, out, mean);
  return LS_OK;
}
