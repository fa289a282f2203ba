/*
 * A step's model inputs and targets (train/prep.h).
 */
#include "prep.h"

#include <math.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records x targets of a step worth a second thread: 1-2 us of the
 * seasons' and linear path's work each (337 autocorrelation lags, the
 * features, a row of the least squares, a refit of K = 19-28 sharing a
 * vector with seven others), so 256 of them take 0.3-0.5 ms, against ~50
 * us to start and join a thread. A step of a few live series' records
 * stays on one. Each later horizon the linear path iterates counts as another
 * target. (2,048 until 2026-11-29: the default shape's steps, 64 windows of
 * 16 records of one feature, then ran on one thread while the other core
 * waited; at 256, 1,024 series x 1,025 records replayed with --replay 0 in
 * 5.1 s against 6.5 s, medians of 3 rounds side by side, 2-core EPYC.) */
#define PREP_THREAD_MIN 256

/* Horizon h's targets are scaled by h^-HORIZON_WEIGHT (its outputs by the
 * inverse), which weighs its squared errors h^-2.5 against h = 1's: a
 * random walk's change over h records has h times the variance of one,
 * so each later horizon pulls on the LSTM they share about h^-1.5 as hard
 * as the next record does. Without it (1 for every h), --horizon 12 made
 * h = 1's final MSE 23% worse on taylor; with h^-1 2.4%, with h^-1.25
 * 0.3% (10 seeds; FINDINGS.md, "Horizons"). */
#define HORIZON_WEIGHT 1.25

/* The most threads a step's preparation takes. */
#define PREP_THREADS_MAX 64

/* Scratch w's buffers for F features of SEASON_GROUP series, and its
 * seasons (sea: its own; NULL: none). */
static ls_err_t scratch_new(prep_scratch_t *w, int F, season_t *sea) {
  size_t const f = (size_t)(F > 0 ? F : 1) * SEASON_GROUP;
  w->level = malloc(f * sizeof *w->level), w->chg = malloc(f * sizeof *w->chg);
  w->s = malloc(f * sizeof *w->s), w->ds = malloc(f * sizeof *w->ds);
  w->sea = sea;
  LS_RETURN_IF(!w->level || !w->chg || !w->s || !w->ds, LS_ERR_NOMEM,
               "no memory for a thread's scratch (%d features)", F);
  return LS_OK;
}

static void scratch_free(prep_scratch_t *w, int own_sea) {
  free(w->level), free(w->chg), free(w->s), free(w->ds);
  if (own_sea) season_free(w->sea);
}

/* p's buffers for horizons and quantiles (W > O) for steps of B windows. */
/* Level l's calibration step: gamma exp(z^2 / 2), z the standard normal's
 * quantile at l (phi(0) / phi(z)). A level's correction moves back towards
 * its quantile at a rate of its step times the density there; under a
 * normal shape every level then moves back at the median's rate, gamma,
 * where one step for all would leave the tails 2.3x slower (0.1, 0.9) and
 * the median's correction wandering the most (a noisier median). Beyond
 * 0.025 and 0.975 the step stays theirs (6.8 gamma): 0.001's would be 118
 * gamma, its correction's own wander then as wide as the quantile's
 * distance from the median. */
static double calib_step(double gamma, double z) {
  double const a = fmin(fabs(z), 1.959964); /* 0.975's */
  return gamma * exp(0.5 * a * a);
}

/* The standard normal quantile at l in (0, 1), by bisection of Phi. */
static double probit(double l) {
  double lo = -40.0, hi = 40.0;
  for (int i = 0; i < 100; i++) {
    double const mid = 0.5 * (lo + hi);
    if (0.5 * erfc(-mid / sqrt(2.0)) < l)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

static ls_err_t horizons_new(prep_t *p, const ls_train_conf_t *c, int B) {
  size_t const rows = (size_t)p->T * (size_t)B, roh = rows * (size_t)p->OH;
  size_t const rw = rows * (size_t)p->W;
  p->y_h = malloc(rw * sizeof *p->y_h);
  p->mask_h = malloc(rw * sizeof *p->mask_h);
  p->next_h = malloc(roh * sizeof *p->next_h);
  p->snaive = malloc(roh * sizeof *p->snaive);
  p->target_h = malloc(roh * sizeof *p->target_h);
  p->lengths = malloc((size_t)B * sizeof *p->lengths);
  p->hw = malloc((size_t)p->H * sizeof *p->hw);
  p->qcal = p->Q > 0 ? malloc(rows * (size_t)(p->W - p->OH) * sizeof *p->qcal) : NULL;
  p->gamma = c->calibration_rate;
  p->qweight = c->quantile_weight > 0.0 ? (float)c->quantile_weight
               : p->Q > 0               ? 1.0f / (float)p->Q
                                        : 1.0f;
  for (int q = 0; q < p->Q; q++)
    p->zq[q] = probit(p->levels[q]), p->gstep[q] = calib_step(p->gamma, p->zq[q]);
  for (int h = 1; p->hw != NULL && h <= p->H; h++)
    p->hw[h - 1] = pow((double)h, -HORIZON_WEIGHT);
  LS_RETURN_IF(!p->y_h || !p->mask_h || !p->next_h || !p->snaive || !p->target_h || !p->lengths ||
                   !p->hw || (p->Q > 0 && !p->qcal),
               LS_ERR_NOMEM, "no memory for the targets of %d horizons (T=%d, B=%d)", p->H, p->T,
               B);
  return LS_OK;
}

ls_err_t prep_new(const ls_train_conf_t *c, int B, prep_t **out) {
  *out = NULL;
  prep_t *const p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for a step's inputs");
  p->T = c->window, p->B = B, p->F = c->features;
  p->change = c->inputs == 0;
  p->I0 = p->I = p->change ? 2 * p->F : p->F;
  p->raw = c->normalize == 1;
  p->delta = c->target == 0;
  ls_norm_conf_init(&p->norm);
  p->norm.window = c->norm_window;
  p->feat = calloc((size_t)p->F, sizeof *p->feat);
  ls_err_t err = p->feat != NULL ? train_conf_targets(c, p->feat, &p->O)
                                 : ls_error_set(LS_ERR_NOMEM, "no memory for the targets");
  if (err == LS_OK) err = season_new(c, p->O, &p->sea);
  p->I += season_inputs(p->sea);
  p->K = season_features(p->sea);
  size_t const rows = (size_t)p->T * (size_t)B;
  size_t const ro = rows * (size_t)(p->O > 0 ? p->O : 1);
  p->H = c->horizon > 1 ? c->horizon : 1;
  p->OH = p->O * p->H;
  size_t const roh = ro * (size_t)p->H;
  if (err == LS_OK) {
    p->x = malloc(rows * (size_t)p->I * sizeof *p->x);
    p->y = malloc(ro * sizeof *p->y);
    p->target = malloc(ro * sizeof *p->target);
    p->lin = calloc(roh, sizeof *p->lin);
    p->beta = calloc(roh, sizeof *p->beta);
    p->a = calloc(roh, sizeof *p->a);
    p->l = calloc(roh, sizeof *p->l);
    p->rec = malloc(rows * sizeof *p->rec);
    p->mask = malloc(rows * sizeof *p->mask);
    p->base = malloc(ro * sizeof *p->base);
    p->scale = malloc(ro * sizeof *p->scale);
    p->last = malloc(ro * sizeof *p->last);
    p->cur = malloc(ro * sizeof *p->cur);
    p->next = malloc(ro * sizeof *p->next);
    p->time = malloc(rows * sizeof *p->time);
    p->scr = calloc(1, sizeof *p->scr);
    if (!p->x || !p->y || !p->target || !p->lin || !p->beta || !p->a || !p->l || !p->rec ||
        !p->mask || !p->base || !p->scale || !p->last || !p->cur || !p->next || !p->time || !p->scr)
      err = ls_error_set(LS_ERR_NOMEM, "no memory for a step's inputs (T=%d, B=%d, I=%d)", p->T, B,
                         p->I);
  }
  if (err == LS_OK) err = prep_parse_quantiles(c->quantiles, p->levels, &p->Q);
  int per = 1;
  if (err == LS_OK) err = prep_outputs_per_target(c, &per); /* bounds O x per */
  p->W = p->OH * (1 + p->Q);
  if (err == LS_OK && p->H > p->T)
    err = ls_error_set(LS_ERR_INVALID_ARG,
                       "horizon %d is beyond the window (%d records): a target h records ahead "
                       "is known only within its window; raise --window or lower --horizon",
                       p->H, p->T);
  if (err == LS_OK && p->W > p->O) err = horizons_new(p, c, B);
  if (err == LS_OK) {
    p->threads = 1;
    err = scratch_new(&p->scr[0], p->F, p->sea);
  }
  if (err == LS_OK) err = ls_norm_conf_check(&p->norm);
  if (err != LS_OK) {
    prep_free(p);
    return err;
  }
  *out = p;
  return LS_OK;
}

void prep_free(prep_t *p) {
  if (p == NULL) return;
  free(p->feat), free(p->x), free(p->y), free(p->mask), free(p->base), free(p->scale);
  free(p->target), free(p->lin), free(p->beta), free(p->a), free(p->l), free(p->rec);
  for (int k = 0; p->scr != NULL && k < (p->threads > 1 ? p->threads : 1); k++)
    scratch_free(&p->scr[k], k > 0);
  free(p->scr);
  season_free(p->sea);
  free(p->last), free(p->cur), free(p->next), free(p->time);
  free(p->y_h), free(p->mask_h), free(p->next_h), free(p->snaive), free(p->target_h);
  free(p->lengths);
  free(p->hw), free(p->qcal);
  free(p);
}

ls_err_t prep_set_threads(prep_t *p, int threads) {
  LS_RETURN_IF(p == NULL || threads < 1, LS_ERR_INVALID_ARG, "prep or threads (%d) invalid",
               threads);
  threads = threads < PREP_THREADS_MAX ? threads : PREP_THREADS_MAX;
  if (threads <= p->threads) return LS_OK;
  prep_scratch_t *const scr = realloc(p->scr, (size_t)threads * sizeof *scr);
  LS_RETURN_IF(scr == NULL, LS_ERR_NOMEM, "no memory for %d threads' scratch", threads);
  p->scr = scr;
  for (int k = p->threads; k < threads; k++) {
    memset(&scr[k], 0, sizeof scr[k]);
    season_t *sea = NULL;
    ls_err_t err = p->sea != NULL ? season_clone(p->sea, &sea) : LS_OK;
    if (err == LS_OK) err = scratch_new(&scr[k], p->F, sea);
    p->threads = k + 1; /* freed with the prep from now on */
    LS_FORWARD_IF_ERROR(err);
  }
  return LS_OK;
}

void prep_begin(prep_t *p, int n) {
  p->B = n;
  p->t_min = INT64_MAX;
  p->t_max = -1;
}

/* What the normaliser gave the record of thread scratch w's slot g (<
 * SEASON_GROUP): its level, change, scale and change scale [F] each. */
typedef struct norm_out_s {
  float *level, *chg;
  double *s, *ds;
} norm_out_t;

static norm_out_t slot_of(const prep_t *p, const prep_scratch_t *w, int g) {
  size_t const at = (size_t)g * (size_t)p->F;
  return (norm_out_t){w->level + at, w->chg + at, w->s + at, w->ds + at};
}

/* Consumes record x [F] into the normaliser (n, stats); o receives what
 * the model sees (raw: the record itself, its change, unit scales). */
static ls_err_t consume(const prep_t *p, norm_out_t o, int64_t *n, double *stats, const float *x) {
  int64_t const t = *n;
  ls_norm_row_t out = {o.level, o.chg, o.s, o.ds};
  if (!p->raw) return ls_norm_consume(&p->norm, p->F, n, stats, x, &out);
  for (int f = 0; f < p->F; f++) { /* the previous value, before it is replaced */
    double const prev = stats[f * LS_NORM_STATS + 3];
    o.level[f] = x[f];
    o.chg[f] = t > 0 ? (float)((double)x[f] - prev) : 0.0f;
    o.s[f] = o.ds[f] = 1.0;
  }
  return ls_norm_consume(&p->norm, p->F, n, stats, x, NULL);
}

/* A record's first part on thread scratch w's slot g: the normaliser, the
 * model's inputs, the seasons' rows (their refits wait: season_refit). */
static ls_err_t record_in(const prep_t *p, prep_scratch_t *w, int g, int64_t *n, double *stats,
                          double *model, const float *x, float *in) {
  int const F = p->F;
  norm_out_t const o = slot_of(p, w, g);
  LS_FORWARD_IF_ERROR(consume(p, o, n, stats, x));
  memcpy(in, o.level, (size_t)F * sizeof *in);
  if (p->change) memcpy(in + F, o.chg, (size_t)F * sizeof *in);
  if (w->sea != NULL)
    season_record_rows(w->sea, g, model, *n - 1, x, p->feat, o.ds, o.s, o.level, in + p->I0);
  return LS_OK;
}

/* Its last part, after the refits: the forecasts of the linear path and
 * the mixing's weights, the targets' base and scale. */
static void record_out(const prep_t *p, prep_scratch_t *w, int g, int64_t n, const double *stats,
                       double *model, const float *x, double *base, double *scale, double *lin,
                       double *beta, double *a, double *l) {
  norm_out_t const o = slot_of(p, w, g);
  if (w->sea != NULL)
    season_record_out(w->sea, g, model, n - 1, p->feat, o.ds, o.s, o.level, lin, beta, a, l);
  /* Horizons the linear path does not forecast: the LSTM's alone. */
  for (int k = p->O * season_horizons(w->sea); k < p->OH; k++) {
    lin[k] = 0.0, beta[k] = 1.0;
    if (a != NULL) a[k] = 0.0;
    if (l != NULL) l[k] = 0.0;
  }
  for (int j = 0; j < p->O; j++) {
    int const f = p->feat[j];
    double const loc = p->raw ? 0.0 : stats[f * LS_NORM_STATS];
    base[j] = p->delta ? (double)x[f] : loc;
    scale[j] = p->delta ? o.ds[f] : o.s[f];
  }
}

ls_err_t prep_record(prep_t *p, int64_t *n, double *stats, double *model, const float *x, float *in,
                     double *base, double *scale, double *lin, double *beta, double *a) {
  prep_scratch_t *const w = &p->scr[0];
  LS_FORWARD_IF_ERROR(record_in(p, w, 0, n, stats, model, x, in));
  if (w->sea != NULL) season_refit(w->sea);
  record_out(p, w, 0, *n, stats, model, x, base, scale, lin, beta, a, NULL);
  return LS_OK;
}

/* Target j of row r (= t * n + b), whose base and scale are in place: from
 * x[t] (cur) and x[t+1] (next); gl the level profile's share of lin, which
 * the LSTM's target leaves in (it learns what the linear path leaves). */
static void target_row(const prep_t *p, size_t r, int j, const float *cur, const float *next,
                       double gl) {
  int const f = p->feat[j];
  size_t const o = r * (size_t)p->O + (size_t)j;
  double const base = p->base[o], scale = p->scale[o];
  double const y = ((double)next[f] - base) / scale;
  p->target[o] = (float)(p->raw ? y : ls_norm_clamp(&p->norm, y));
  p->y[o] = (float)((double)p->target[o] - (p->lin[r * (size_t)p->OH + (size_t)j] - gl));
  p->last[o] = ((double)cur[f] - base) / scale;
  p->cur[o] = cur[f];
  p->next[o] = next[f];
}

double prep_horizon_fc(const prep_t *p, int h, double lin, double beta, double v) {
  return h == 1 ? (double)prep_mix(lin, beta, (float)v) : lin + beta * (v / p->hw[h - 1]);
}

/* Row r's targets at every horizon (H > 1, or quantiles), its h = 1
 * target in place: row t of window w, whose records after t + 1 give the
 * later ones, its records after its last target too (t + h <= n_targets +
 * n_extra: the windower holds a window until H-1 of them came, or its
 * series' records ended); the seasonal
 * naive forecasts from its series' seasons (model); the quantiles' targets
 * and masks those of their horizon's. */
static void horizons_row(const prep_t *p, size_t r, const ls_window_t *w, int t,
                         const double *model) {
  int const O = p->O, F = p->F;
  for (int h = 1; h <= p->H; h++)
    for (int j = 0; j < O; j++) {
      size_t const k = (size_t)(h - 1) * O + (size_t)j, o1 = r * O + j;
      size_t const o = r * (size_t)p->OH + k, ow = r * (size_t)p->W + k;
      int const f = p->feat[j];
      double const sn = p->sea != NULL ? season_naive(p->sea, model, j, p->rec[r], h) : NAN;
      p->snaive[o] = isnan(sn) ? (double)p->cur[o1] : sn; /* no season known: the last value */
      if (h == 1) {
        p->y_h[ow] = p->y[o1], p->mask_h[ow] = 1.0f, p->next_h[o] = p->next[o1];
      } else if (t + h > w->n_targets + w->n_extra) { /* past its series' records */
        p->y_h[ow] = 0.0f, p->mask_h[ow] = 0.0f, p->next_h[o] = NAN;
      } else {
        float const x = w->x[(size_t)(t + h) * F + (size_t)f];
        double const y = ((double)x - p->base[o1]) / p->scale[o1];
        /* The clip is the one-step change's; h steps' change spreads up to h
         * times as far (a trend), so the bound grows with h. */
        double const yc = p->raw ? y : ls_norm_clamp(&p->norm, y / h) * h;
        p->target_h[o] = yc;
        p->y_h[ow] = (float)(yc * p->hw[h - 1]);
        p->mask_h[ow] = 1.0f, p->next_h[o] = x;
      }
      for (int q = 1; q <= p->Q; q++) /* each level weighs qweight in the loss: its mask */
        p->y_h[ow + (size_t)q * p->OH] = p->y_h[ow],
                                p->mask_h[ow + (size_t)q * p->OH] = p->mask_h[ow] * p->qweight;
    }
}

/* A padding row's targets at every horizon: none known. */
static void horizons_pad(const prep_t *p, size_t r) {
  if (p->W == p->O) return;
  for (size_t o = r * (size_t)p->OH; o < (r + 1) * (size_t)p->OH; o++)
    p->next_h[o] = NAN, p->snaive[o] = 0.0;
  for (size_t o = r * (size_t)p->W; o < (r + 1) * (size_t)p->W; o++)
    p->y_h[o] = 0.0f, p->mask_h[o] = 0.0f;
}

ls_err_t prep_outputs_per_target(const ls_train_conf_t *c, int *per) {
  double levels[PREP_QUANTILES_MAX];
  int Q = 0, O = 0;
  *per = 1;
  LS_FORWARD_IF_ERROR(prep_parse_quantiles(c->quantiles, levels, &Q));
  int *const feat = calloc((size_t)(c->features > 0 ? c->features : 1), sizeof *feat);
  LS_RETURN_IF(feat == NULL, LS_ERR_NOMEM, "no memory for the targets");
  ls_err_t const err = train_conf_targets(c, feat, &O);
  free(feat);
  LS_FORWARD_IF_ERROR(err);
  int64_t const H = c->horizon > 1 ? c->horizon : 1, W = (int64_t)O * H * (1 + Q);
  LS_RETURN_IF(W > PREP_OUTPUTS_MAX, LS_ERR_INVALID_ARG,
               "%d targets x horizon %" PRId64 " x (1 + %d quantiles) = %" PRId64
               " outputs, over the %d a model may have: lower --horizon, --quantiles or --targets",
               O, H, Q, W, PREP_OUTPUTS_MAX);
  size_t const cal = prep_calib_width(Q, O, (int)H);
  LS_RETURN_IF(cal > PREP_CALIB_MAX, LS_ERR_INVALID_ARG,
               "%d targets x horizon %" PRId64 " x %d quantiles: their calibration keeps %zu "
               "doubles per series (the quantiles awaiting their actuals grow as horizon^2), over "
               "%d: lower --horizon, --quantiles or --targets",
               O, H, Q, cal, PREP_CALIB_MAX);
  *per = (int)(H * (1 + Q));
  return LS_OK;
}

static int cmp_double(const void *a, const void *b) {
  double const x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Column k's point forecast (the mixing's lin + beta out / w; out / w
 * without the linear path) and the head's spread, sigma: its outermost
 * levels' distance over their normal quantiles' (one level: its distance
 * from the point output over its quantile's; 0 where there is none), in
 * target units. */
static void head_center(const prep_t *p, const float *out, const double *lin, const double *beta,
                        int k, double *point, double *sigma) {
  double const w = p->hw[k / p->O], o = out[k] / w;
  *point = lin == NULL ? o : lin[k] + beta[k] * o;
  int const hi = p->Q - 1;
  double const vlo = out[(size_t)p->OH + (size_t)k] / w;
  double const vhi = out[(size_t)(hi + 1) * p->OH + (size_t)k] / w;
  double const dz = hi > 0 ? p->zq[hi] - p->zq[0] : p->zq[0];
  double const dv = hi > 0 ? vhi - vlo : vlo - o;
  *sigma = fabs(dz) > 1e-9 ? fabs(dv / dz) : 0.0;
}

/* Column k's spread scale rho from the calibration's sums: 1 without
 * them, else sqrt(errors / spreads) in [1/16, 1]. Only narrowing: a
 * widening rho measured on the short sets and the prices cost more than it
 * gained (their errors' heavy tails; tests/bench/realdata/FINDINGS.md 17);
 * the additive corrections widen what is too narrow. */
static double spread_scale(const prep_calib_t *cal, int k) {
  if (cal == NULL) return 1.0;
  const double *const s = cal->sums + 3 * (size_t)k;
  if (!(s[0] > 0.0 && s[2] > 0.0)) return 1.0;
  return fmin(1.0, fmax(1.0 / 16.0, sqrt(s[1] / s[2])));
}

void prep_quantile_values(const prep_t *p, const float *out, const double *base,
                          const double *scale, const double *lin, const double *beta,
                          const prep_calib_t *cal, double *qv) {
  double sorted[PREP_QUANTILES_MAX];
  for (int k = 0; k < p->OH; k++) {
    int const j = k % p->O, h = k / p->O + 1;
    double point, sigma;
    head_center(p, out, lin, beta, k, &point, &sigma);
    double const rho = spread_scale(cal, k), w = p->hw[h - 1];
    for (int q = 0; q < p->Q; q++) {
      /* The head's quantiles are around its point output: moved with it
       * to the point forecast (the mixing's lin + beta out), so what the
       * mixing left out of the point (beta < 1) is not in the quantiles;
       * their distance from it scaled by rho. */
      double const v = out[(size_t)(q + 1) * p->OH + (size_t)k];
      sorted[q] = base[j] + scale[j] * (point + rho * ((v - out[k]) / w));
    }
    qsort(sorted, (size_t)p->Q, sizeof *sorted, cmp_double); /* never crossing */
    for (int q = 0; q < p->Q; q++) {
      size_t const at = (size_t)q * p->OH + (size_t)k;
      double const v = cal != NULL ? sorted[q] + scale[j] * cal->corr[at] : sorted[q];
      qv[at] = q > 0 && v < qv[at - (size_t)p->OH] ? qv[at - (size_t)p->OH] : v; /* still not */
    }
  }
}

void prep_calib_resolve(const prep_t *p, prep_calib_t cal, int64_t t, const float *y,
                        double *terms) {
  for (int h = 1; h <= p->H; h++) {
    int64_t const s = t - h;
    if (s < 0 || cal.issued[s % p->H] != (double)(s + 1)) continue; /* none went out */
    for (int q = 0; q < p->Q; q++)
      for (int j = 0; j < p->O; j++) {
        size_t const k = (size_t)q * (size_t)p->OH + (size_t)(h - 1) * (size_t)p->O + (size_t)j;
        double const fc = cal.held[prep_calib_held(p, q, j, h, s)], l = p->levels[q];
        double const d = (double)y[j] - fc, below = d <= 0.0 ? 1.0 : 0.0;
        double const pin = d >= 0.0 ? l * d : (l - 1.0) * d;
        if (!isfinite(pin)) continue;
        terms[3 * k] += 1.0, terms[3 * k + 1] += below, terms[3 * k + 2] += pin;
        cal.corr[k] += p->gstep[q] * (l - below);
      }
    for (int j = 0; j < p->O; j++) { /* the spread's scale */
      const double *const ps = cal.heldp + prep_calib_heldp(p, j, h, s);
      double const e = (double)y[j] - ps[0];
      if (!isfinite(e) || !(ps[1] > 0.0) || !isfinite(ps[1])) continue;
      double *const sum = cal.sums + 3 * ((size_t)(h - 1) * (size_t)p->O + (size_t)j);
      sum[0] += 1.0;
      double const g = fmax(1.0 / sum[0], 1.0 / PREP_SCALE_WINDOW);
      sum[1] += g * (e * e - sum[1]), sum[2] += g * (ps[1] * ps[1] - sum[2]);
    }
  }
}

void prep_calib_issue(const prep_t *p, prep_calib_t cal, int64_t t, const double *qv,
                      const float *out, const double *base, const double *scale, const double *lin,
                      const double *beta) {
  cal.issued[t % p->H] = (double)(t + 1);
  for (int k = 0; k < p->OH; k++) {
    int const j = k % p->O;
    double point, sigma;
    head_center(p, out, lin, beta, k, &point, &sigma);
    double *const ps = cal.heldp + prep_calib_heldp(p, j, k / p->O + 1, t);
    ps[0] = base[j] + scale[j] * point, ps[1] = scale[j] * sigma;
  }
  for (int q = 0; q < p->Q; q++)
    for (int h = 1; h <= p->H; h++)
      for (int j = 0; j < p->O; j++)
        cal.held[prep_calib_held(p, q, j, h, t)] =
            qv[(size_t)q * (size_t)p->OH + (size_t)(h - 1) * (size_t)p->O + (size_t)j];
}

double *prep_pending(const prep_t *p, const ls_series_stats_t *st) {
  return p->W > p->O ? st->model + season_width(p->sea) : st->pending;
}

const float *prep_train_y(const prep_t *p) {
  return p->W > p->O ? p->y_h : p->y;
}

const float *prep_train_mask(const prep_t *p, int *width) {
  *width = p->W > p->O ? p->W : 1;
  return p->W > p->O ? p->mask_h : p->mask;
}

/* A padding row r: no record, nothing to learn. */
static void pad_row(const prep_t *p, size_t r) {
  int const I = p->I, O = p->O;
  horizons_pad(p, r);
  memset(p->x + r * I, 0, (size_t)I * sizeof *p->x);
  memset(p->y + r * O, 0, (size_t)O * sizeof *p->y);
  memset(p->target + r * O, 0, (size_t)O * sizeof *p->target);
  for (int j = 0; j < O; j++) {
    size_t const o = r * (size_t)O + (size_t)j;
    p->base[o] = p->last[o] = 0.0, p->scale[o] = 1.0;
    p->cur[o] = p->next[o] = 0.0f;
  }
  for (size_t k = r * (size_t)p->OH; k < (r + 1) * (size_t)p->OH; k++)
    p->lin[k] = p->a[k] = p->l[k] = 0.0, p->beta[k] = 1.0;
}

/* Row t of window b (wins[g], its series' state st): after its record's
 * refits, the forecasts, targets and the step's event times (into sc's
 * range). */
static void row_out(const prep_t *p, prep_scratch_t *sc, int g, int b, const ls_window_t *w,
                    ls_series_stats_t *st, int t) {
  int const F = p->F, O = p->O;
  size_t const r = (size_t)t * (size_t)p->B + (size_t)b;
  const float *const cur = w->x + (size_t)t * F, *const next = cur + F;
  record_out(p, sc, g, *st->norm_n, st->norm, st->model, cur, p->base + r * O, p->scale + r * O,
             p->lin + r * p->OH, p->beta + r * p->OH, p->a + r * p->OH, p->l + r * p->OH);
  for (int j = 0; j < O; j++)
    target_row(p, r, j, cur, next,
               season_profile_weight(sc->sea, st->model, j) * p->l[r * p->OH + j]);
  if (p->W > p->O) horizons_row(p, r, w, t, st->model);
  for (int k = t; k <= t + 1; k++) /* the step's records' times, inputs and targets */
    if (w->times[k] >= 0) {
      sc->t_min = w->times[k] < sc->t_min ? w->times[k] : sc->t_min;
      sc->t_max = w->times[k] > sc->t_max ? w->times[k] : sc->t_max;
    }
}

/* Windows b0 .. b0 + cnt - 1 of the step (cnt <= SEASON_GROUP; wins [cnt]
 * and st [cnt] theirs) on thread scratch sc, in lockstep: row t of each,
 * then their records' refits together (SOLVE_LANES to a vector), then the
 * rest of each row. Every window's rows are the bits of its own alone
 * (its series' state is its own; each block's refit the same in any
 * lane). On an error, the window that failed in *err_b. */
static ls_err_t windows_on(const prep_t *p, prep_scratch_t *sc, int b0, int cnt,
                           const ls_window_t *const *wins, ls_series_stats_t *st, int *err_b) {
  int const T = p->T, F = p->F, I = p->I;
  for (int g = 0; g < cnt && p->lengths != NULL; g++)
    p->lengths[b0 + g] = wins[g]->n_targets;
  for (int t = 0; t < T; t++) {
    for (int g = 0; g < cnt; g++) {
      const ls_window_t *const w = wins[g];
      size_t const r = (size_t)t * (size_t)p->B + (size_t)(b0 + g);
      int const valid = t < w->n_targets;
      p->mask[r] = valid ? 1.0f : 0.0f;
      p->time[r] = valid ? w->times[t + 1] : -1;
      if (!valid) {
        pad_row(p, r);
        continue;
      }
      p->rec[r] = *st[g].norm_n;
      ls_err_t const err = record_in(p, sc, g, st[g].norm_n, st[g].norm, st[g].model,
                                     w->x + (size_t)t * F, p->x + r * I);
      if (err != LS_OK) {
        if (sc->sea != NULL) season_refit(sc->sea); /* the rows learned so far */
        *err_b = b0 + g;
        return err;
      }
    }
    if (sc->sea != NULL) season_refit(sc->sea);
    for (int g = 0; g < cnt; g++)
      if (t < wins[g]->n_targets) row_out(p, sc, g, b0 + g, wins[g], &st[g], t);
  }
  return LS_OK;
}

/* The step's event-time range takes in thread scratch sc's. */
static void take_times(prep_t *p, prep_scratch_t *sc) {
  p->t_min = sc->t_min < p->t_min ? sc->t_min : p->t_min;
  p->t_max = sc->t_max > p->t_max ? sc->t_max : p->t_max;
}

ls_err_t prep_window(prep_t *p, int b, const ls_window_t *w, ls_series_stats_t *st) {
  prep_scratch_t *const sc = &p->scr[0];
  sc->t_min = INT64_MAX, sc->t_max = -1;
  int err_b = -1;
  ls_err_t const err = windows_on(p, sc, b, 1, &w, st, &err_b);
  take_times(p, sc);
  return err;
}

/* One thread's windows [b0, b1) of the step; stops at the first error,
 * keeping it (and its message: they are per thread) in the scratch. */
typedef struct part_s {
  prep_t *p;
  prep_scratch_t *sc;
} part_t;

static void *run_part(void *opaque) {
  part_t const *const pt = opaque;
  prep_scratch_t *const sc = pt->sc;
  sc->t_min = INT64_MAX, sc->t_max = -1, sc->err = LS_OK, sc->err_b = -1;
  for (int b = sc->b0; b < sc->b1 && sc->err == LS_OK; b += SEASON_GROUP) {
    int const cnt = sc->b1 - b < SEASON_GROUP ? sc->b1 - b : SEASON_GROUP;
    sc->err = windows_on(pt->p, sc, b, cnt, pt->p->wins + b, pt->p->st + b, &sc->err_b);
    if (sc->err != LS_OK) snprintf(sc->why, sizeof sc->why, "%s", ls_last_error());
  }
  return NULL;
}

ls_err_t prep_windows(prep_t *p, int n, const ls_window_t *const *wins, ls_series_stats_t *st) {
  LS_RETURN_IF(p == NULL || n < 0 || n > p->B || (n > 0 && (wins == NULL || st == NULL)),
               LS_ERR_INVALID_ARG, "prep_windows: %d windows (at most %d) or NULL", n,
               p == NULL ? 0 : p->B);
  double const work = (double)n * p->T * (p->K > 0 ? p->O * season_horizons(p->sea) : 0);
  int parts = work >= PREP_THREAD_MIN ? p->threads : 1;
  parts = parts < n ? parts : (n > 0 ? n : 1);
  p->wins = wins, p->st = st, p->threads_used = parts;
  part_t pt[PREP_THREADS_MAX];
  pthread_t tid[PREP_THREADS_MAX];
  int started[PREP_THREADS_MAX];
  for (int k = 0; k < parts; k++) {
    pt[k] = (part_t){p, &p->scr[k]};
    /* Even parts, not whole groups: the work is per window, and 20
     * windows on two threads as 8 | 8 + 4 would leave one with half as
     * much again. */
    p->scr[k].b0 = (int)((long)n * k / parts), p->scr[k].b1 = (int)((long)n * (k + 1) / parts);
    /* A thread that cannot start: its part runs on the caller after its own. */
    started[k] = k > 0 && pthread_create(&tid[k], NULL, run_part, &pt[k]) == 0;
  }
  run_part(&pt[0]);
  for (int k = 1; k < parts; k++) {
    if (started[k])
      pthread_join(tid[k], NULL);
    else
      run_part(&pt[k]);
  }
  /* The first thread's error that met one (prep_windows); the event times
   * of the windows prepared. */
  for (int k = 0; k < parts; k++) {
    take_times(p, &p->scr[k]);
    if (p->scr[k].err != LS_OK) return ls_error_set(p->scr[k].err, "%s", p->scr[k].why);
  }
  return LS_OK;
}

void prep_learn(prep_t *p, int b, ls_series_stats_t *st, float *pred, const float *out) {
  if (p->sea == NULL) return;
  int const O = p->O, n = p->B, SH = season_horizons(p->sea);
  size_t const OH = (size_t)p->OH;
  int learned = 0;
  for (int t = 0; t < p->T; t++) {
    size_t const r = (size_t)t * (size_t)n + (size_t)b;
    if (p->mask[r] == 0.0f) continue;
    for (int j = 0; j < O; j++) {
      size_t const o = r * (size_t)O + (size_t)j, k1 = r * OH + (size_t)j;
      /* A series' first record has no change yet: its target is no row to learn. */
      if (p->rec[r] > 0 && p->K > 0) {
        season_learn(p->sea, st->model, j, 1, p->a[k1], (double)p->target[o], (double)pred[o],
                     p->l[k1]);
        learned = 1;
      }
      pred[o] = prep_mix(p->lin[k1], p->beta[k1], pred[o]);
    }
    /* The later horizons' mixing: each row whose target was known, the
     * LSTM's forecast in the target's units. */
    for (int h = 2; h <= SH && p->rec[r] > 0; h++)
      for (int j = 0; j < O; j++) {
        size_t const c = (size_t)(h - 1) * (size_t)O + (size_t)j, k = r * OH + c;
        if (p->mask_h[r * (size_t)p->W + c] == 0.0f) continue;
        double const v = (double)out[r * (size_t)p->W + c] / p->hw[h - 1];
        season_learn(p->sea, st->model, j, h, p->a[k], p->target_h[k], v, 0.0);
      }
  }
  for (int j = 0; learned && j < O; j++)
    season_solve(p->sea, st->model, j);
}
