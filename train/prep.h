/*
 * A step's model inputs and targets (train/ internal): each window's rows
 * go through its series' normaliser (state/norm.c) into the engine's
 * buffers, normalised inputs x [T, n, I] and targets y [T, n, O], with what
 * turns a prediction back into the data's units (tests/bench/realdata/
 * FINDINGS.md, sections 4.1 and 4.2).
 */
#ifndef LSTREAM_TRAIN_PREP_H
#define LSTREAM_TRAIN_PREP_H

#include <stdint.h>

#include "lstream/ingest.h"
#include "lstream/state.h"
#include "season.h"
#include "train_internal.h"

/* What a thread preparing records needs of its own: the per-feature
 * scratch, the seasons' (season.h), and, over the
 * windows it prepared, their event-time range and the first error. */
typedef struct prep_scratch_s {
  float *level, *chg; /* [SEASON_GROUP, F]: per series of a group (prep.c windows_on) */
  double *s, *ds;     /* [SEASON_GROUP, F] */
  season_t *sea;      /* its seasons' scratch: the prep's own for thread 0 (NULL: none) */
  int64_t t_min, t_max;
  int b0, b1; /* its windows of the step: [b0, b1) */
  ls_err_t err;
  int err_b;      /* the window it failed on */
  char why[1024]; /* the error's message (messages are per thread) */
} prep_scratch_t;

/* The most quantile levels. */
#define PREP_QUANTILES_MAX 16

/* The most head outputs (targets x horizon x (1 + quantiles)): the
 * per-series pending forecasts and the summary's history grow with them. */
#define PREP_OUTPUTS_MAX 4096

/* The most doubles of a series' quantile calibration (prep_calib): 256 KiB
 * per series (H = 12, 3 levels, one target: 282). */
#define PREP_CALIB_MAX 32768

typedef struct prep_s {
  int T, B, F, I, O; /* I = 2F with change inputs, else F, + the seasons' (season.h); O targets */
  int I0;            /* the inputs before the seasons' */
  season_t *sea;     /* seasons and the linear path (NULL: neither) */
  int K;             /* the linear path's features per target (0: none) */
  int *feat;         /* [O] the target features */
  ls_norm_conf_t norm;
  int raw;    /* normalize none: raw levels and changes, targets unscaled */
  int delta;  /* target: the next change (else the next level) */
  int change; /* inputs: level and change (else level) */
  /* The step being prepared, n windows: buffers [T, n, ...] (row t of
   * window b at t * n + b). */
  float *x;             /* [T, n, I] inputs */
  float *target;        /* [T, n, O] targets, normalised */
  float *y;             /* [T, n, O] what the LSTM trains on: target - lin */
  double *lin;          /* [T, n, OH] the linear path's forecasts (0 without it; h-major as the
                           head's outputs: season_record) */
  double *beta;         /* [T, n, OH] the LSTM's weights in them (1 without the linear path) */
  double *a;            /* [T, n, OH] its forecasts before the mixing (season.h) */
  double *l;            /* [T, n, OH] the level profile's forecasts (season.h) */
  int64_t *rec;         /* [T, n] row t's record in its series (from 0) */
  float *mask;          /* [T, n] */
  double *base;         /* [T, n, O] forecast in data units = base + alpha * scale * (prediction
                           + lin) */
  double *scale;        /* [T, n, O] */
  double *last;         /* [T, n, O] the last value in target units ((x[t] - base) / scale) */
  float *cur;           /* [T, n, O] x[t] of each target feature, raw */
  float *next;          /* [T, n, O] x[t+1], raw */
  int64_t *time;        /* [T, n] event time of row t's target */
  int64_t t_min, t_max; /* event times of the step's records (inputs and targets); t_max < 0:
                           none */
  /* Horizons (--horizon H > 1; issue 25): the head has OH = O H outputs,
   * h-major, column (h - 1) O + j the forecast of target j h records
   * ahead. The target of row t at horizon h is the window's record t + h,
   * known when the window trains only while t + h <= its n_targets: past
   * that it is masked (0 in mask_h), so no record is ever the target of a
   * row that has it as an input, and the carried state is the one after
   * the last real record (lengths). h = 1's columns are y and mask. NULL
   * with H = 1 (the engine then takes y and mask as before). */
  int H, OH;
  /* Quantiles (--quantiles, Q levels): the head's columns past OH, column
   * OH + q OH + (h - 1) O + j the quantile of level levels[q] of target j
   * h records ahead, trained with the pinball loss on that target (the
   * mean's), so W = OH (1 + Q) outputs in all; y_h and mask_h are there
   * whenever W > O. */
  int Q, W;
  double levels[PREP_QUANTILES_MAX];
  float *y_h;       /* [T, n, W] what the LSTM trains on: y at h = 1, the target beyond */
  float *mask_h;    /* [T, n, W] a known target's loss weight: 1, qweight in a quantile's column;
                     * 0: not known */
  float *next_h;    /* [T, n, OH] x[t+h] of each target feature, raw; NaN: not known */
  double *snaive;   /* [T, n, OH] the seasonal naive forecast of x[t+h] (season_naive) */
  double *target_h; /* [T, n, OH] the change to x[t+h] in the target's units, clamped (known
                       where mask_h is 1) */
  int *lengths;     /* [n] the rows of each window (its n_targets) */
  double *hw;       /* [H] horizon h's targets are multiplied by hw[h - 1], its outputs divided
                       (prep_horizon_fc) */
  /* The quantiles' online calibration (Q > 0; prep_calib): its step
   * gamma (--calibration-rate, 0: off) and each row's quantile forecasts
   * as they went out, calibrated, data units (figures_score fills it). */
  double gamma;
  float qweight; /* a quantile column's weight in the loss (its mask): --quantile-weight */
  double gstep[PREP_QUANTILES_MAX]; /* each level's step (prep.c's calib_step) */
  double zq[PREP_QUANTILES_MAX];    /* each level's standard normal quantile */
  double *qcal;                     /* [T, n, Q OH] as prep_quantile_values' qv */
  /* Threads' scratch: scr[0] the caller's (prep_record, prep_learn). */
  prep_scratch_t *scr;
  int threads;
  int threads_used; /* by the last prep_windows */
  /* Of the step being prepared by prep_windows. */
  const ls_window_t *const *wins;
  ls_series_stats_t *st;
} prep_t;

/* --quantiles' text: Q levels in (0, 1), ascending, into levels
 * [PREP_QUANTILES_MAX] ("": none). */
ls_err_t prep_parse_quantiles(const char *text, double *levels, int *Q);

/* The head's outputs per target as c says: H (1 + Q); refused where all
 * targets' together pass PREP_OUTPUTS_MAX, or their calibration
 * (prep_calib_width) PREP_CALIB_MAX. */
ls_err_t prep_outputs_per_target(const ls_train_conf_t *c, int *per);

/* Buffers for steps of up to B windows of T rows, as c says (features,
 * targets, normalize, target, inputs, norm_window). */
ls_err_t prep_new(const ls_train_conf_t *c, int B, prep_t **out);
void prep_free(prep_t *p); /* accepts NULL */

/* Prepares steps' windows on up to `threads` threads (the caller's
 * included; 1 at creation): each window's rows are the same whichever
 * thread prepared them. */
ls_err_t prep_set_threads(prep_t *p, int threads);

/* Starts a step of n windows. */
void prep_begin(prep_t *p, int n);

/* One record x [F] of a series through its normaliser (n, stats) and its
 * seasons (model: ls_series_stats_t.model): the model's input row in [I]
 * and, per target j, what turns a prediction into the data's units:
 * forecast = base[j] + alpha * scale[j] * (lin[k] + beta[k] prediction),
 * with the linear path's share lin [OH] and the LSTM's weight beta [OH]
 * per horizon (column k = (h - 1) O + j; prep_horizon_fc beyond h = 1),
 * and the linear path's forecast a [OH] (may be NULL). Uses p's scratch
 * (not during prep_window). */
ls_err_t prep_record(prep_t *p, int64_t *n, double *stats, double *model, const float *x, float *in,
                     double *base, double *scale, double *lin, double *beta, double *a);

/* Row b of the step: consumes window w's input rows 0..n_targets-1 into its
 * series' normaliser st (each record once: row 0 of a series' next window
 * is this one's last target, consumed then) and writes inputs, targets and
 * what the figures need; padding rows are zero, masked and not consumed. */
ls_err_t prep_window(prep_t *p, int b, const ls_window_t *w, ls_series_stats_t *st);

/* prep_window of every window b of the step (wins [n], their series st
 * [n]), on the prep's threads where the step is worth it (the seasons' and
 * linear path's work per record: PREP_THREAD_MIN), each thread's windows
 * SEASON_GROUP at a time in lockstep (the same bits as each alone); of
 * the errors, that of the first failing window of the first thread that
 * met one (only the normaliser's checks of a series' state can fail, and
 * the run stops then: the other windows of that group are left part
 * prepared). */
ls_err_t prep_windows(prep_t *p, int n, const ls_window_t *const *wins, ls_series_stats_t *st);

/* The model's forecast in target units from the linear path's share lin,
 * the LSTM's weight beta and its output p: a float, as the engine's outputs
 * (the trainer, the serving path and `lstream predict` alike). */
static inline float prep_mix(double lin, double beta, float p) {
  return (float)(lin + beta * (double)p);
}

/* The trainer's own state per series (ls_series_stats_t.model), in
 * doubles: the seasons' and linear path's (season.h), then with H > 1 or
 * quantiles the values [W] of the next forecast awaiting its actual
 * (predict.c; with W = 1 they are the series table's pending), then with
 * quantiles their calibration (prep_calib). */
size_t prep_model_width(const prep_t *p);
double *prep_pending(const prep_t *p, const ls_series_stats_t *st);

/* A series' quantile calibration (adaptive conformal inference in its
 * quantile-tracking form, Gibbs and Candes 2021): corr [Q, OH] the
 * correction of each level, horizon and target in the series' normalised
 * units (its scale times it is added to the head's quantile), moved by
 * gamma (level - 1[actual <= quantile]) each time an actual arrives;
 * issued [H] 1 + the series' record (p->rec) after which each of its last
 * H forecasts went out, at rec mod H (0: none); held the calibrated
 * quantiles of those whose actual has not arrived, data units, at
 * prep_calib_held: H (H + 1) / 2 per level and target, since h records
 * ahead only the last h forecasts wait; then the spread's scale: heldp
 * the point forecast and the head's spread (sigma: its outermost levels'
 * distance over their normal quantiles') of each forecast held, data
 * units, at prep_calib_heldp; sums [OH, 3] per horizon and target the
 * rows, the forgotten means of the squared errors of the point forecast
 * and of the squared spreads, over about PREP_SCALE_WINDOW forecasts: the
 * head's spread is multiplied by rho = sqrt(errors / spreads) where that
 * is under 1 (1 before any; at least 1/16) before the corrections are
 * added, so a head that has not learned what the linear path forecasts (a
 * short seasonal series' change over 12 records) does not leave the
 * intervals several times too wide while the additive corrections crawl.
 * prep_calib_width(Q, O, H) doubles in all, 0 without quantiles; a
 * snapshot from before it resumes with all zero, one from before the
 * scale with its part zero (prep_calib_young). */
typedef struct prep_calib_s {
  double *corr, *issued, *held, *heldp, *sums;
} prep_calib_t;
#define PREP_SCALE_WINDOW 128
size_t prep_calib_width(int Q, int O, int H);
prep_calib_t prep_calib(const prep_t *p, const ls_series_stats_t *st);
/* A series' state dst about to be copied from a snapshot's src (c's
 * settings, O targets): if src's model state lacks the calibration (a
 * snapshot from before it), or its scale (heldp and sums), dst's missing
 * part is zeroed and its view narrowed to src's, the rest being the same
 * (fixed settings). */
void prep_calib_young(const ls_train_conf_t *c, int O, ls_series_stats_t *dst,
                      const ls_series_stats_t *src);
/* The layout of the series' model state in snapshots (train/prep_state.c:
 * section LS_SNAPSHOT_SECTION_SERIES_MODEL), put in each shard. */
#define PREP_MODEL_LAYOUT 2
ls_err_t prep_layout_put(ls_snapshot_t *snap);
/* What taking a snapshot's series' model states into this run's needs: c's
 * settings (the snapshot's, adopted), O targets, their seasons (NULL:
 * none), the snapshot's layout version: its section's; without one 1, or
 * 2 where the snapshot's width is this run's X (a snapshot of 2026-11-28
 * written between the packing and the section). */
typedef struct prep_adopt_s {
  const ls_train_conf_t *c;
  season_t *sea;
  int O, layout;
} prep_adopt_t;
/* LS_ERR_UNSUPPORTED for a layout this lstream does not know. */
ls_err_t prep_adopt_begin(const ls_train_conf_t *c, int O, size_t X, const ls_snapshot_t *snap,
                          prep_adopt_t *out);
void prep_adopt_end(prep_adopt_t *ad);
/* src, a snapshot's series state, for dst of this run (ls_series_stats_copy
 * next): of layout 1 it is packed into *buf (malloc'ed, the caller frees
 * it; NULL otherwise) and pointed there; then prep_calib_young. */
ls_err_t prep_model_adopt(const prep_adopt_t *ad, ls_series_stats_t *dst, ls_series_stats_t *src,
                          double **buf);
/* The same, then ls_series_stats_copy (dst, src) (F features). */
ls_err_t prep_stats_adopt(const prep_adopt_t *ad, int F, ls_series_stats_t *dst,
                          ls_series_stats_t src);
/* Where held keeps the level q quantile of target j, h records ahead, of
 * the forecast after record s; heldp its point forecast (+ 1: the head's
 * spread). */
size_t prep_calib_held(const prep_t *p, int q, int j, int h, int64_t s);
size_t prep_calib_heldp(const prep_t *p, int j, int h, int64_t s);

/* The calibration cal at a series' record t, whose target values are y
 * [O] (data units): each forecast whose actual this is (the one after
 * record t - h, h records ahead, if it went out) adds to terms [Q OH, 3]
 * 1, 1[y <= its quantile] and its pinball loss (left out if not finite),
 * its level's correction moves by gamma (level - 1[y <= quantile]), and
 * its point forecast's squared error and its spread join the sums. */
void prep_calib_resolve(const prep_t *p, prep_calib_t cal, int64_t t, const float *y,
                        double *terms);

/* The quantile forecasts qv [Q, OH] (prep_quantile_values') after record
 * t going out, made from out, base, scale, lin and beta as there: they
 * wait in cal for their actuals, with their point forecasts and spreads. */
void prep_calib_issue(const prep_t *p, prep_calib_t cal, int64_t t, const double *qv,
                      const float *out, const double *base, const double *scale, const double *lin,
                      const double *beta);

/* Horizon h's forecast in target units from the head's output v for it,
 * the linear path's share lin and the LSTM's weight beta at h: prep_mix's
 * at h = 1 (v a float), lin + beta v / hw[h - 1] beyond. */
double prep_horizon_fc(const prep_t *p, int h, double lin, double beta, double v);

/* The quantile forecasts of one row in the data's units, qv [Q, OH] (the
 * quantile of level q of target j h records ahead at q OH + (h - 1) O +
 * j), from the head's outputs out [W], the targets' base and scale [O],
 * the linear path's share lin [OH] and the LSTM's weights beta [OH] (both
 * NULL: none): base + scale (output / hw[h - 1] + d), d the point
 * forecast (prep_horizon_fc) less the head's point output / hw[h - 1]
 * (hw[0] = 1): the head's quantiles moved with its point to the point
 * forecast; each
 * target and horizon's sorted ascending, so that they never cross; then
 * with the series' calibration cal (NULL: none) the spreads around the
 * point scaled by its rho and each plus scale times its correction,
 * raised to the level below's where it would fall under it. */
void prep_quantile_values(const prep_t *p, const float *out, const double *base,
                          const double *scale, const double *lin, const double *beta,
                          const prep_calib_t *cal, double *qv);

/* What the engine trains on: targets and their mask, and the width of a
 * mask row (1: the row mask [T, n]; OH: a mask per target). */
const float *prep_train_y(const prep_t *p);
const float *prep_train_mask(const prep_t *p, int *width);

/* After the step's forward: the linear path and the mixing of window b's
 * series (st) learn from its rows (pred [T, n, O], the LSTM's outputs at
 * h = 1; out [T, n, W] the head's, for the later horizons' mixing), and
 * pred becomes the model's forecasts, lin + beta pred. */
void prep_learn(prep_t *p, int b, ls_series_stats_t *st, float *pred, const float *out);

#endif /* LSTREAM_TRAIN_PREP_H */
