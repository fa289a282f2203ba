/*
 * The per-series normaliser (state/norm.c) and the host-side series state
 * the series table keeps: the arithmetic against values worked by hand,
 * invariance to an offset and a scale, levels around 1e4 and 1e8, constant
 * series, a series of one record, jumps and huge values (always finite,
 * never NaN), the exponential weights after the warm-up, and the table's
 * state growing with it and in its digest.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/state.h"

enum { FMAX = 4 };

/* A series' normaliser with what its last record gave. */
typedef struct series_s {
  ls_norm_conf_t conf;
  int F;
  int64_t n;
  double st[FMAX * LS_NORM_STATS];
  float level[FMAX], change[FMAX];
  double scale[FMAX], dscale[FMAX];
} series_t;

static series_t series(int F) {
  series_t s;
  memset(&s, 0, sizeof s);
  ls_norm_conf_init(&s.conf);
  s.F = F;
  return s;
}

static void push(series_t *s, const float *x) {
  ls_norm_row_t out = {s->level, s->change, s->scale, s->dscale};
  cr_assert_eq(ls_norm_consume(&s->conf, s->F, &s->n, s->st, x, &out), LS_OK, "%s",
               ls_last_error());
  for (int f = 0; f < s->F; f++)
    cr_assert(isfinite(s->level[f]) && isfinite(s->change[f]) && isfinite(s->scale[f]) &&
                  isfinite(s->dscale[f]) && s->scale[f] > 0 && s->dscale[f] > 0,
              "record %lld feature %d: level %g change %g scale %g dscale %g", (long long)s->n, f,
              s->level[f], s->change[f], s->scale[f], s->dscale[f]);
}

static void push1(series_t *s, double x) {
  float const v = (float)x;
  push(s, &v);
}

Test(norm, worked_by_hand) {
  series_t s = series(1);
  push1(&s, 1.0); /* m = 1, v = 0: the scales are the floor, nothing to say yet */
  double const floor = 1e-6 + 1e-12;
  cr_expect_eq(s.n, 1);
  cr_expect_eq(s.level[0], 0.0f);
  cr_expect_eq(s.change[0], 0.0f);
  cr_expect(fabs(s.scale[0] - floor) < 1e-18 && s.dscale[0] == s.scale[0]);
  push1(&s, 2.0); /* a = 1/2: m = 1.5, v = 0.25; b = 1: q = 1 */
  cr_expect(fabs(s.st[0] - 1.5) < 1e-15 && fabs(s.st[1] - 0.25) < 1e-15 &&
                fabs(s.st[2] - 1.0) < 1e-15 && s.st[3] == 2.0,
            "m %g v %g q %g prev %g", s.st[0], s.st[1], s.st[2], s.st[3]);
  cr_expect(fabs(s.scale[0] - 0.5) < 1e-15 && fabs(s.dscale[0] - 1.0) < 1e-15);
  cr_expect(fabsf(s.level[0] - 1.0f) < 1e-6f && fabsf(s.change[0] - 1.0f) < 1e-6f);
  push1(&s, 3.0); /* a = 1/3: m = 2, v = 2/3; b = 1/2: q = 1 */
  cr_expect(fabs(s.st[0] - 2.0) < 1e-15 && fabs(s.st[1] - 2.0 / 3.0) < 1e-15);
  cr_expect(fabsf(s.level[0] - (float)(1.0 / sqrt(2.0 / 3.0))) < 1e-6f);
  cr_expect(fabsf(s.change[0] - 1.0f) < 1e-6f);
}

/* After the warm-up a record weighs 1/window: a step from 0 to 1 after a
 * long run of zeros moves the location by 1 - (1 - 1/N)^k in k records. */
Test(norm, exponential_weights_after_warm_up) {
  series_t s = series(1);
  s.conf.window = 8;
  for (int k = 0; k < 100; k++)
    push1(&s, 0.0);
  for (int k = 1; k <= 5; k++) {
    push1(&s, 1.0);
    cr_expect(fabs(s.st[0] - (1.0 - pow(7.0 / 8.0, k))) < 1e-12, "record %d: m %g", k, s.st[0]);
  }
}

/* An offset of 1e4 and a scale of 1e3 (the synthetic tests' transform)
 * change nothing the model sees: the relative floor (1e-6 |m| = 1e-2) is far
 * below the scale (1e3). Only float rounding of the shifted values remains. */
Test(norm, invariant_to_offset_and_scale) {
  series_t a = series(2), b = series(2);
  for (int k = 0; k < 2000; k++) {
    float const x[2] = {(float)sin(0.1 * k), (float)(0.01 * k + cos(0.37 * k))};
    float const y[2] = {(float)(1e4 + 1e3 * (double)x[0]), (float)(1e4 + 1e3 * (double)x[1])};
    push(&a, x);
    push(&b, y);
    for (int f = 0; f < 2; f++) /* 1e4 in float: ulp 1e-3, relative to a scale of 7e2 */
      cr_assert(fabsf(a.level[f] - b.level[f]) < 1e-4f && fabsf(a.change[f] - b.change[f]) < 1e-3f,
                "record %d feature %d: %g/%g, %g/%g", k, f, a.level[f], b.level[f], a.change[f],
                b.change[f]);
  }
}

/* Levels around 1e8 moving by steps of 100 (float's spacing there is 8):
 * the relative floor (1e-6 of 1e8 = 100) leaves the changes readable. */
Test(norm, levels_around_1e8) {
  series_t s = series(1);
  double x = 1e8, sum = 0.0;
  uint32_t r = 7;
  for (int k = 0; k < 1000; k++) {
    r = r * 1664525u + 1013904223u;
    x += r >> 31 ? 100.0 : -100.0;
    push1(&s, x);
    if (k > 300) sum += fabs(s.change[0]);
  }
  cr_expect(sum / 699 > 0.5, "changes of +-100 at 1e8 read as %g of their scale", sum / 699);
  cr_expect(s.scale[0] >= 100.0);
}

Test(norm, constant_series_stay_at_zero) {
  double const levels[] = {0.0, 1.0, -3.5, 1e8};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
    series_t s = series(1);
    for (int k = 0; k < 600; k++) {
      push1(&s, levels[i]);
      cr_assert(s.level[0] == 0.0f && s.change[0] == 0.0f, "level %g record %d: %g %g", levels[i],
                k, s.level[0], s.change[0]);
    }
    double const floor = 1e-6 * fabs((double)(float)levels[i]) + 1e-12;
    cr_expect(fabs(s.scale[0] - floor) <= 1e-9 * floor, "scale %g, floor %g", s.scale[0], floor);
  }
}

Test(norm, one_record) {
  series_t s = series(3);
  float const x[3] = {5.0f, -1e8f, 0.0f};
  push(&s, x);
  cr_expect_eq(s.n, 1);
  for (int f = 0; f < 3; f++) {
    cr_expect(s.level[f] == 0.0f && s.change[f] == 0.0f);
    cr_expect(s.st[f * LS_NORM_STATS + 3] == (double)x[f], "prev");
    cr_expect(s.dscale[f] == s.scale[f], "the first change scale is the level scale");
  }
}

/* A jump from 0 to 1e8, alternating +-1e6 and float's largest values:
 * clamped to +-clip, finite, never NaN (push checks every output). */
Test(norm, jumps_and_huge_values_stay_finite) {
  series_t s = series(1);
  for (int k = 0; k < 1000; k++)
    push1(&s, 0.0);
  push1(&s, 1e8); /* 16 scales away at weights of 1/256: clamped to 10 */
  cr_expect(s.level[0] == 10.0f && s.change[0] == 10.0f, "clamped: %g %g", s.level[0], s.change[0]);
  for (int k = 0; k < 50; k++)
    push1(&s, k % 2 ? 1e6 : -1e6);
  series_t h = series(1);
  for (int k = 0; k < 20; k++)
    push1(&h, k % 2 ? 3.4e38 : -3.4e38);
  cr_expect(fabsf(h.level[0]) <= 10.0f && fabsf(h.change[0]) <= 10.0f);
  cr_expect_eq(ls_norm_clamp(&s.conf, 1e300), 10.0);
  cr_expect_eq(ls_norm_clamp(&s.conf, -11.0), -10.0);
  cr_expect_eq(ls_norm_clamp(&s.conf, 0.25), 0.25);
}

Test(norm, bad_arguments) {
  ls_norm_conf_t c;
  ls_norm_conf_init(&c);
  cr_expect_eq(ls_norm_conf_check(&c), LS_OK);
  int64_t n = 0;
  double st[LS_NORM_STATS] = {0};
  float const x = 1.0f;
  cr_expect_eq(ls_norm_consume(NULL, 1, &n, st, &x, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_norm_consume(&c, 0, &n, st, &x, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_norm_consume(&c, 1, NULL, st, &x, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_norm_consume(&c, 1, &n, st, &x, NULL), LS_OK, "out may be NULL");
  cr_expect_eq(n, 1);
  c.window = 0;
  cr_expect_eq(ls_norm_conf_check(&c), LS_ERR_INVALID_ARG);
  ls_norm_conf_init(&c);
  c.floor_abs = 0.0;
  cr_expect_eq(ls_norm_conf_check(&c), LS_ERR_INVALID_ARG);
}

/* The series table keeps each series' host-side state: zero for a new
 * series, kept as the table grows, part of its digest. */
/* An engine of I = 2, H = 4, L = 1, O = 1 for series tables. */
static ls_engine_t *small_engine(void) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = (ls_shape_t){2, 4, 1, 1};
  ls_engine_t *e = NULL;
  cr_assert_eq(ls_engine_new(&ec, &e), LS_OK);
  return e;
}

Test(norm, series_table_keeps_host_state) {
  ls_engine_t *const e = small_engine();
  ls_series_table_t *t = NULL;
  cr_assert_eq(ls_series_table_new(e, 2, &t), LS_OK);
  cr_assert_eq(ls_series_table_keep_stats(t, 2, 3), LS_ERR_INVALID_ARG, "targets <= features");
  cr_assert_eq(ls_series_table_keep_stats(t, 2, 1), LS_OK, "%s", ls_last_error());
  int64_t slot = -1;
  ls_series_stats_t st;
  cr_assert_eq(ls_series_table_slot(t, "a", 1, 0, &slot), LS_OK);
  cr_assert_eq(ls_series_table_stats(t, slot, &st), LS_OK);
  *st.norm_n = 3, st.norm[7] = 2.5, st.errors[1] = 4.0;
  uint64_t d1 = 0, d2 = 0;
  cr_assert_eq(ls_series_table_digest(t, &d1), LS_OK);
  char key[8];
  for (int i = 0; i < 40; i++) { /* grows several times */
    snprintf(key, sizeof key, "k%d", i);
    cr_assert_eq(ls_series_table_slot(t, key, strlen(key), 0, &slot), LS_OK);
    cr_assert_eq(ls_series_table_stats(t, slot, &st), LS_OK);
    cr_expect(*st.norm_n == 0 && st.norm[7] == 0.0 && st.errors[1] == 0.0, "new series %d", i);
  }
  cr_assert_eq(ls_series_table_stats(t, 0, &st), LS_OK);
  cr_expect(*st.norm_n == 3 && st.norm[7] == 2.5 && st.errors[1] == 4.0, "kept through growth");
  cr_assert_eq(ls_series_table_keep_stats(t, 2, 1), LS_ERR_STATE, "only on an empty table");
  ls_series_table_t *u = NULL;
  cr_assert_eq(ls_series_table_new(e, 4, &u), LS_OK);
  cr_assert_eq(ls_series_table_keep_stats(u, 2, 1), LS_OK);
  cr_assert_eq(ls_series_table_slot(u, "a", 1, 0, &slot), LS_OK);
  cr_assert_eq(ls_series_table_digest(u, &d2), LS_OK);
  cr_expect_neq(d1, d2, "the digest sees the host-side state");
  cr_assert_eq(ls_series_table_stats(u, slot, &st), LS_OK);
  *st.norm_n = 3, st.norm[7] = 2.5, st.errors[1] = 4.0;
  cr_assert_eq(ls_series_table_digest(u, &d2), LS_OK);
  cr_expect_eq(d1, d2);
  ls_series_table_destroy(t);
  ls_series_table_destroy(u);
  ls_engine_destroy(e);
}

/* Eviction from the series table: idle ones (event time), then the least
 * recently active beyond a bound; the last slot moves into a freed one with
 * its states, counts and host-side state; a key that comes back starts from
 * zero in a reused slot; restoring orders by activity. L = 1, H = 4. */
Test(norm, series_table_evicts) {
  ls_engine_t *const e = small_engine();
  ls_series_table_t *t = NULL;
  cr_assert_eq(ls_series_table_new(e, 2, &t), LS_OK);
  cr_assert_eq(ls_series_table_keep_stats(t, 2, 1), LS_OK);
  char key[8];
  float h[4], c[4];
  int64_t slot;
  for (int i = 0; i < 6; i++) { /* s0..s5, active at times 0, 10, ..., 50 */
    snprintf(key, sizeof key, "s%d", i);
    cr_assert_eq(ls_series_table_slot(t, key, strlen(key), 0, &slot), LS_OK);
    for (int k = 0; k < 4; k++)
      h[k] = (float)(10 * i + k), c[k] = -h[k];
    cr_assert_eq(ls_state_table_write(ls_series_table_states(t), (size_t)slot, 1, h, c), LS_OK);
    ls_series_stats_t st;
    cr_assert_eq(ls_series_table_stats(t, slot, &st), LS_OK);
    *st.norm_n = 100 + i;
    cr_assert_eq(ls_series_table_trained(t, slot, 3 + i, 7 * i), LS_OK);
    cr_assert_eq(ls_series_table_active(t, slot, 10 * i), LS_OK);
  }
  cr_assert_eq(ls_series_table_active(t, 0, 60), LS_OK); /* s0 again: the most recent */
  int64_t evicted = 0;
  cr_assert_eq(ls_series_table_evict(t, 35, 0, &evicted), LS_OK); /* s1 (10), s2 (20) */
  cr_expect_eq(evicted, 2);
  cr_assert_eq(ls_series_table_evict(t, 0, 3, &evicted), LS_OK); /* then s3, the least recent */
  cr_expect_eq(evicted, 3);
  cr_assert_eq(ls_series_table_count(t), 3);
  int const left[] = {0, 4, 5};
  for (int j = 0; j < 3; j++) {
    snprintf(key, sizeof key, "s%d", left[j]);
    int64_t const before = (int64_t)ls_series_table_count(t);
    cr_assert_eq(ls_series_table_slot(t, key, strlen(key), 0, &slot), LS_OK);
    cr_assert_eq((int64_t)ls_series_table_count(t), before, "%s is still held", key);
    ls_series_info_t in;
    cr_assert_eq(ls_series_table_info(t, slot, &in), LS_OK);
    cr_expect(in.records == 3 + left[j] && in.last_offset == 7 * left[j], "%s's counts", key);
    cr_assert_eq(ls_state_table_read(ls_series_table_states(t), (size_t)slot, 1, h, c), LS_OK);
    cr_expect(h[1] == (float)(10 * left[j] + 1) && c[3] == -h[3], "%s's states moved", key);
    ls_series_stats_t st;
    cr_assert_eq(ls_series_table_stats(t, slot, &st), LS_OK);
    cr_expect_eq(*st.norm_n, 100 + left[j], "%s's normaliser moved", key);
  }
  /* s1 comes back: a new series in a reused slot, from zero. */
  cr_assert_eq(ls_series_table_slot(t, "s1", 2, 0, &slot), LS_OK);
  cr_assert_eq(slot, 3);
  cr_assert_eq(ls_state_table_read(ls_series_table_states(t), (size_t)slot, 1, h, c), LS_OK);
  cr_expect(h[0] == 0.0f && h[3] == 0.0f && c[2] == 0.0f, "a reused slot starts from zero");
  ls_series_stats_t st;
  cr_assert_eq(ls_series_table_stats(t, slot, &st), LS_OK);
  cr_expect_eq(*st.norm_n, 0);
  ls_series_info_t in;
  cr_assert_eq(ls_series_table_info(t, slot, &in), LS_OK);
  cr_expect(in.windows == 0 && in.active == 0 && in.last_time == -1);
  /* Restored in slot order with their activity, the eviction order holds:
   * s1 (never active) goes first, then s4. */
  ls_series_table_t *u = NULL;
  cr_assert_eq(ls_series_table_new(e, 2, &u), LS_OK);
  for (int64_t i = 0; i < (int64_t)ls_series_table_count(t); i++) {
    cr_assert_eq(ls_series_table_info(t, i, &in), LS_OK);
    cr_assert_eq(ls_series_table_slot(u, in.key, in.key_len, 0, &slot), LS_OK);
    cr_assert_eq(ls_series_table_restore(u, slot, &in), LS_OK);
  }
  cr_assert_eq(ls_series_table_restored(u), LS_OK);
  cr_assert_eq(ls_series_table_evict(u, 0, 2, NULL), LS_OK);
  int64_t const kept = (int64_t)ls_series_table_count(u);
  cr_assert_eq(ls_series_table_slot(u, "s1", 2, 0, &slot), LS_OK);
  cr_expect_eq(slot, kept, "s1 was evicted first");
  cr_assert_eq(ls_series_table_slot(u, "s0", 2, 0, &slot), LS_OK);
  cr_expect_lt(slot, kept, "s0, the most recent, stays");
  cr_expect_eq(ls_series_table_evict(NULL, 0, 0, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_series_table_active(t, 99, 0), LS_ERR_INVALID_ARG);
  ls_series_table_destroy(t);
  ls_series_table_destroy(u);
  ls_engine_destroy(e);
}
