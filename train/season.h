/*
 * Seasons and the linear path (train/ internal; issue 24).
 *
 * Per series and target feature, beside its normaliser: the series' recent
 * raw values (a ring of 2 season_max + 1), its season (given by --season,
 * or found online from the autocorrelation of its own changes: --season
 * auto; with --auto-seasons 2, the default, also a second one: a multiple
 * of the first that the series follows clearly more closely, as a week of
 * days, whose lags join the linear path only), and a linear autoregression
 * on its recent and seasonal lags fitted
 * by exponentially forgotten least squares (LSTNet's autoregressive
 * highway). What a record gives, in the target's units (its change over
 * the series' change scale ds, as the model's target):
 *   inputs  per season slot P: the values one and two seasons back,
 *           x[t+1-P] and x[t+1-2P], normalised as the level input is (zero
 *           while the series is younger than its lags, or has no season)
 *   z       the linear path's features: the last R changes, the normalised
 *           level, and per season s1 = (x[t+1-P] - x[t]) / ds, s2 =
 *           (x[t+1-2P] - x[t]) / ds, c1 = (x[t+1-P] - x[t-P]) / ds, c2 =
 *           (x[t+1-2P] - x[t-2P]) / ds: the seasonal naive forecast's change
 *           and the change one and two seasons ago; e = the change at t+1's
 *           phase averaged over about 16 seasons (the profile); with
 *           --season-levels also l = (m + L - x[t]) / ds, m the mean of the
 *           last P records and L the level profile at t+1's phase (x less
 *           the mean of the P records it ends, averaged over about 16
 *           seasons: Holt-Winters' seasonal index); 1
 *   lin     alpha w . z, the linear path's share of the forecast
 * The forecast is alpha a + beta p, a = w . z the linear path's and p the
 * LSTM's, alpha and beta in [0, 1] per series and target: the least
 * squares of the targets on the past forecasts of both (both 0 before any:
 * a young series starts at the last value, and the LSTM's output counts
 * once it has earned its weight on the series; on a random walk both stay
 * near 0). The linear path is an online least squares of the targets on
 * its features, refitted at every record (it matches an online AR(p) on
 * the same lags); the LSTM trains on what it leaves, y - alpha a, and the
 * mixing weights are fitted on both forecasts together. With --horizon H
 * > 1 (and --horizon-linear) the later horizons have the same form: a_h,
 * the change over h records that the one-step regression forecasts when
 * run on its own forecasts (the recent changes, lags and means past record
 * t its forecasts, the profiles as they are: an AR(p)'s h-step forecast),
 * combined with the LSTM's own forecast at h (trained on the whole change
 * over h records, as without the linear path) by weights alpha_h and
 * beta_h of their own, fitted on the rows whose target at h the window
 * held. The state lives in
 * ls_series_stats_t.model: snapshots, re-sharding and eviction carry it
 * with its series.
 */
#ifndef LSTREAM_TRAIN_SEASON_H
#define LSTREAM_TRAIN_SEASON_H

#include <stddef.h>
#include <stdint.h>

#include "train_internal.h"

/* The most seasons --season may give. */
#define SEASON_SLOTS_MAX 2

typedef struct season_s season_t;

/* Parses --season's text: "auto", "none" or up to SEASON_SLOTS_MAX periods
 * in [2, season_max], such as "24" or "24,168": *slots (0: none), periods
 * [SEASON_SLOTS_MAX] (0: auto). */
ls_err_t season_parse(const char *text, int season_max, int *slots, int *periods);

/* Whether c has the linear path (linear, with normalised change targets). */
int season_linear(const ls_train_conf_t *c);

/* The seasons and linear path of O targets as c says (NULL in *out when
 * neither is on: then nothing of this file runs). */
ls_err_t season_new(const ls_train_conf_t *c, int O, season_t **out);
/* Another season_t like s, with scratch of its own (for another thread:
 * season_record uses its season_t's scratch). */
ls_err_t season_clone(const season_t *s, season_t **out);
void season_free(season_t *s); /* accepts NULL */

size_t season_width(const season_t *s); /* doubles per series (ls_series_table_keep_model) */
/* A series' target blocks as written before the linear path's A was kept
 * as its upper triangle (whole, K x K: snapshots of before 2026-11-28's
 * eighth session): season_full_extra more doubles than season_width (0:
 * no linear path, the same layout); season_pack_full turns old [O blocks
 * of theirs] into out [season_width], the same values. */
size_t season_full_extra(const season_t *s);
void season_pack_full(const season_t *s, const double *old, double *out);
int season_inputs(const season_t *s);   /* model inputs it adds: 2 slots O (found: 2 O) */
int season_features(const season_t *s); /* K, the linear path's features per target */

/* Record t (from 0) of a series, just consumed by its normaliser: x [F] its
 * values, feat [O] the target features, ds [F] the change scales and
 * level [F] the normalised levels the normaliser gave. Updates the series'
 * state `model` (ring, season) and writes the inputs in [season_inputs],
 * per target the linear path's share of the forecast lin (alpha a), the
 * LSTM's weight beta and, unless NULL, the linear path's forecast a; ls
 * [F] are the level scales. The linear path first learns the row the
 * record completes (the last record's features, its change) and is
 * refitted: a pure online least squares of the targets on the features.
 * lin, beta and a hold season_horizons(s) O columns, h-major (column (h -
 * 1) O + j: target j h records ahead, a the change over h records): the
 * later horizons' the one-step regression iterated on its own forecasts,
 * mixed with their own weights (season_learn). With --mix-profile lin
 * holds gamma l too at h = 1, and l (unless NULL) [O] receives l, the
 * level profile's forecast of the change in a's units (0 without). */
void season_record(season_t *s, double *model, int64_t t, const float *x, const int *feat,
                   const double *ds, const double *ls, const float *level, float *in, double *lin,
                   double *beta, double *a, double *l);

/* (season_record: one series' record at once, as the tests feed it;
 * prep_record does the same in the three parts below.)
 *
 * The series whose records one season_t takes at once: season_record in
 * three parts, so that the refits of several series' records go into
 * vector lanes together (one target's record alone fills one lane of
 * SOLVE_LANES; a step of one-feature series refitted lane by lane spent a
 * quarter of its cycles there). */
#define SEASON_GROUP 8

/* season_record's first part for the series in slot g (< SEASON_GROUP) of
 * s's scratch: the ring, the seasons, the features, the model's inputs in
 * `in` and the linear path's row; its targets' refits wait for
 * season_refit. */
void season_record_rows(season_t *s, int g, double *model, int64_t t, const float *x,
                        const int *feat, const double *ds, const double *ls, const float *level,
                        float *in);
/* The refits of every target block season_record_rows left since the last
 * call, SOLVE_LANES at a time: each block's weights the bits of its refit
 * alone. */
void season_refit(season_t *s);
/* season_record's last part for slot g, after season_refit: the forecasts
 * (lin, beta, a, l as season_record's). */
void season_record_out(season_t *s, int g, double *model, int64_t t, const int *feat,
                       const double *ds, const double *ls, const float *level, double *lin,
                       double *beta, double *a, double *l);

/* Target j's mixing at horizon h (1 .. season_horizons) learns one row:
 * the linear path's forecast a (exactly as season_record_out gave it: 0
 * while the path is young), the normalised target y (the change over h
 * records) and the LSTM's forecast p, in the same units; at h = 1 with
 * --mix-profile the level profile's forecast l as well (season_record's;
 * ignored otherwise, and with --mix-profile-rows linear taken as 0 on a
 * row where a is 0). */
void season_learn(season_t *s, double *model, int j, int h, double a, double y, double p, double l);

/* The horizons the linear path forecasts: --horizon with --horizon-linear
 * and the linear path, else 1 (0 for NULL). */
int season_horizons(const season_t *s);

/* Target j's weight on the level profile's forecast in lin (0 without). */
double season_profile_weight(const season_t *s, const double *model, int j);

/* After a window's rows were learned: target j's mixing weights (every
 * horizon's). */
void season_solve(season_t *s, double *model, int j);

/* The seasonal naive forecast of record t + h of target j, t the series'
 * record just consumed (season_record): its value k seasons back, x[t + h
 * - k P] with k = ceil(h / P), P the season of slot 0 now; NaN when there
 * is none, or the value is not in the ring (issue 25's baseline per
 * horizon). */
double season_naive(const season_t *s, const double *model, int j, int64_t t, int h);

/* Target j's season in slot i now (0: none): for the tests. */
int season_period(const season_t *s, const double *model, int j, int i);

/* Target j's profiles of slot i (season_max floats each: the changes at
 * each phase, then, with --season-levels, the levels), NULL when s has no
 * such slot: for the tests. */
const float *season_profiles(const season_t *s, const double *model, int j, int i);

#endif /* LSTREAM_TRAIN_SEASON_H */
