/*
 * The forecasts' figures (train/ internal): per target feature, the
 * squared errors of the model's prequential forecasts and of the last
 * value, in normalised units and in the data's own units, per step, over
 * the run and over its last fifth of event time; each series' error sums;
 * and the calibration of the forecasts (tests/bench/realdata/FINDINGS.md,
 * section 4.3): a factor alpha in [0, 1] per target that scales the
 * predicted change, fitted online to past forecasts.
 */
#ifndef LSTREAM_TRAIN_FIGURES_H
#define LSTREAM_TRAIN_FIGURES_H

#include "comm.h"
#include "lstream/state.h"
#include "lstream/train.h"
#include "prep.h"

typedef struct figures_s figures_t;

/* The doubles a step's figures add to the step's sums across ranks: the
 * rows scored, the rows left out (not finite), 6 per target, and with H >
 * 1 horizons 4 per target and horizon (ls_horizon_figures_t's sums), and
 * with Q quantile levels 3 per level, target and horizon (ls_quantile_
 * figures_t's). */
#define FIG_V(O, H, Q) (2 + 6 * (O) + ((H) > 1 ? 4 * (O) * (H) : 0) + 3 * (Q) * (O) * (H))

/* Figures of O targets (the features feat [O], named as the
 * configuration c names them) at H horizons (c's horizon); calibrate: fit
 * alpha (else alpha = 1). */
ls_err_t figures_new(int O, const int *feat, const ls_train_conf_t *c, figures_t **out);
void figures_free(figures_t *f); /* accepts NULL */

/* Scores the step prepared in p from the predictions pred [T, n, O] made
 * before its update (h = 1's, the model's forecast) and, with horizons,
 * the head's outputs out [T, n, W] (prep.h; the later horizons' combined
 * with the linear path's: prep_horizon_fc): into v [FIG_V(O, H, Q)]
 * (the step's sums, zeroed first), each window's series' error sums
 * st[b], and the timeline of event time. A forecast whose error is not
 * finite (float32 in normalised units, the model's arithmetic; double in
 * the data's units) enters none of them: it is counted apart. */
ls_err_t figures_score(figures_t *f, const prep_t *p, const float *pred, const float *out,
                       ls_series_stats_t *st, double *v);

/* After the step's sums v (every rank's) are known: the run's totals, the
 * step's figures for st (target, loss_sum, baseline_sum, count: of the
 * finite forecasts), and the calibration for the next step. Returns 1 when
 * some rank left a forecast out, not finite: the step's loss is not. */
int figures_step(figures_t *f, const double *v, ls_step_stats_t *st);

/* The run's figures into sum: the whole run's (totals) and the last fifth
 * of event time's, every rank's. Collective. */
ls_err_t figures_summary(figures_t *f, comm_t *comm, ls_train_summary_t *sum);

/* Per target [O], the factor the step's forecasts scale their predicted
 * change by (data units: base + alpha * scale * prediction). */
const double *figures_alpha(const figures_t *f);

/* Target j's calibration moments into m [3]: the averages of p y and of
 * p p that alpha = clamp(m[0] / m[1], 0, 1) comes from, and the forecasts
 * they have seen. */
void figures_moments(const figures_t *f, int j, double *m);

/* The calibration into a snapshot, and back (a resumed run then forecasts
 * the same). */
ls_err_t figures_save(const figures_t *f, ls_snapshot_t *snap);
ls_err_t figures_load(figures_t *f, const ls_snapshot_t *snap);

#endif /* LSTREAM_TRAIN_FIGURES_H */
