/*
 * The forecasts' figures and their calibration (train/figures.h).
 *
 * The timeline keeps, per event time, the targets' error sums of this rank,
 * so that the "final" figures cover the last fifth of event time however
 * the steps were formed (a backfilled topic's last steps hold one series).
 * It is an array of disjoint time ranges in order, one per distinct time
 * while they fit (exact), merged in pairs beyond TIMELINE_MAX entries, or
 * fewer where its entries are wide (horizons and quantiles: TIMELINE_BYTES
 * at most; a merged range straddling the cut counts by its middle).
 */
#include "figures.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "season.h"

/* Entries of the timeline before pairs are merged. */
#define TIMELINE_MAX 65536
/* The timeline's sums at most (its entries then fewer, down to 1024). */
#define TIMELINE_BYTES ((size_t)32 << 20)
/* Forecasts the calibration's averages reach back (FINDINGS.md 4.3). */
#define CAL_N 512.0

/* Per step and target, in v after the row count: */
enum { V_LOSS, V_BASE, V_MSE, V_BASE_DATA, V_PY, V_PP, V_PER };
/* Per timeline entry: the count, then per target loss, base, mse, base_data. */
#define TL_PER 4
/* Per horizon and target (H > 1), after those in v and in a timeline entry. */
enum { HZ_N, HZ_MSE, HZ_LAST, HZ_SNAIVE, HZ_PER };
/* Per quantile level, horizon and target (Q > 0), after those: as
 * prep_calib_resolve's terms. */
enum { QZ_N, QZ_BELOW, QZ_PINBALL, QZ_PER };

struct figures_s {
  int O, calibrate;
  int H, OH;                           /* horizons; O H */
  ls_horizon_figures_t *hz;            /* [OH] the run's per horizon (H > 1) */
  ls_horizon_figures_t *hz_tail;       /* [OH] its last fifth */
  ls_horizon_figures_t *hz_step;       /* [OH] the last step's */
  int Q;                               /* quantile levels */
  double gamma;                        /* their calibration's step (--calibration-rate) */
  ls_quantile_figures_t *qz, *qz_tail; /* [Q OH] the run's, its last fifth */
  ls_quantile_figures_t *qz_step;      /* [Q OH] the last step's */
  double *alpha;                       /* [O] this step's */
  double *spy, *spp;                   /* [O] calibration moments */
  int64_t *k;                          /* [O] forecasts they have seen */
  ls_target_figures_t *step;           /* [O] the last step's */
  ls_target_figures_t *total;          /* [O] the run's */
  ls_target_figures_t *tail;           /* [O] the last fifth of event time (summary) */
  size_t n, cap;                       /* timeline entries used / allocated */
  size_t n_max;                        /* entries before pairs are merged (tl_max) */
  int64_t *tmin, *tmax;                /* [cap] */
  double *sums;                        /* [cap, W] W = 1 + TL_PER O */
  double *row;                         /* [W] one row's */
  double *err;                         /* [V_PER O] one row's terms */
  int64_t t_min, t_max;                /* this rank's records' event times; t_max < 0: none */
};

/* Doubles per timeline entry: the count, TL_PER per target, HZ_PER per
 * target and horizon with H > 1. */
static size_t tl_width(const figures_t *f) {
  return 1 + TL_PER * (size_t)f->O + (f->H > 1 ? HZ_PER * (size_t)f->OH : 0) +
         QZ_PER * (size_t)f->Q * (size_t)f->OH;
}

/* The timeline's entries before pairs are merged: a power of two. */
static size_t tl_max(const figures_t *f) {
  size_t m = TIMELINE_MAX;
  while (m > 1024 && m * tl_width(f) * sizeof(double) > TIMELINE_BYTES)
    m /= 2;
  return m;
}

ls_err_t figures_new(int O, const int *feat, const ls_train_conf_t *c, figures_t **out) {
  *out = NULL;
  /* With the linear path, each series' mixing weights are its calibration
   * (season.h): the run-wide one would shrink a young series' forecasts. */
  int const calibrate = c->calibrate && !season_linear(c);
  double levels[PREP_QUANTILES_MAX];
  int Q = 0;
  LS_FORWARD_IF_ERROR(prep_parse_quantiles(c->quantiles, levels, &Q));
  figures_t *const f = calloc(1, sizeof *f);
  LS_RETURN_IF(f == NULL, LS_ERR_NOMEM, "no memory for the figures");
  f->O = O, f->calibrate = calibrate;
  f->H = c->horizon > 1 ? c->horizon : 1, f->OH = O * f->H;
  f->Q = Q, f->gamma = c->calibration_rate;
  f->t_min = INT64_MAX, f->t_max = -1;
  f->n_max = tl_max(f);
  size_t const o = (size_t)O, W = tl_width(f);
  f->alpha = calloc(o, sizeof *f->alpha), f->spy = calloc(o, sizeof *f->spy);
  f->spp = calloc(o, sizeof *f->spp), f->k = calloc(o, sizeof *f->k);
  f->step = calloc(o, sizeof *f->step), f->total = calloc(o, sizeof *f->total);
  f->tail = calloc(o, sizeof *f->tail), f->row = calloc(W, sizeof *f->row);
  f->err = calloc(V_PER * o, sizeof *f->err);
  if (f->H > 1) {
    f->hz = calloc((size_t)f->OH, sizeof *f->hz);
    f->hz_tail = calloc((size_t)f->OH, sizeof *f->hz_tail);
    f->hz_step = calloc((size_t)f->OH, sizeof *f->hz_step);
  }
  size_t const nq = (size_t)f->Q * (size_t)f->OH;
  if (f->Q > 0) {
    f->qz = calloc(nq, sizeof *f->qz), f->qz_tail = calloc(nq, sizeof *f->qz_tail);
    f->qz_step = calloc(nq, sizeof *f->qz_step);
  }
  if ((f->Q > 0 && (!f->qz || !f->qz_tail || !f->qz_step)) || !f->alpha || !f->spy || !f->spp ||
      !f->k || !f->step || !f->total || !f->tail || !f->row || !f->err ||
      (f->H > 1 && (!f->hz || !f->hz_tail || !f->hz_step))) {
    figures_free(f);
    return ls_error_set(LS_ERR_NOMEM, "no memory for the figures of %d targets", O);
  }
  for (int j = 0; j < O; j++) {
    f->step[j].feature = f->total[j].feature = f->tail[j].feature = feat[j];
    train_conf_feature_name(c, feat[j], f->step[j].name, sizeof f->step[j].name);
    memcpy(f->total[j].name, f->step[j].name, sizeof f->step[j].name);
    memcpy(f->tail[j].name, f->step[j].name, sizeof f->step[j].name);
    f->alpha[j] = calibrate ? 0.0 : 1.0; /* no forecast has paid off yet: the last value */
  }
  for (size_t k = 0; k < nq; k++) {
    ls_quantile_figures_t const q = {levels[k / (size_t)f->OH],
                                     (int)(k % (size_t)f->OH) / O + 1,
                                     feat[k % (size_t)O],
                                     0.0,
                                     0.0,
                                     0.0};
    f->qz[k] = f->qz_tail[k] = f->qz_step[k] = q;
  }
  for (int k = 0; k < f->OH && f->H > 1; k++) {
    f->hz[k].h = f->hz_tail[k].h = f->hz_step[k].h = k / O + 1;
    f->hz[k].feature = f->hz_tail[k].feature = f->hz_step[k].feature = feat[k % O];
  }
  *out = f;
  return LS_OK;
}

void figures_free(figures_t *f) {
  if (f == NULL) return;
  free(f->alpha), free(f->spy), free(f->spp), free(f->k), free(f->step), free(f->total);
  free(f->tail), free(f->row), free(f->err), free(f->tmin), free(f->tmax), free(f->sums);
  free(f->hz), free(f->hz_tail), free(f->hz_step), free(f->qz), free(f->qz_tail), free(f->qz_step);
  free(f);
}

/* ------------------------------------------------------------------------ */
/* The timeline                                                              */

/* Halves the timeline: entries 2i and 2i+1 become entry i. */
static void merge_pairs(figures_t *f) {
  size_t const W = tl_width(f);
  size_t m = 0;
  for (size_t i = 0; i < f->n; i += 2, m++) {
    f->tmin[m] = f->tmin[i];
    f->tmax[m] = i + 1 < f->n ? f->tmax[i + 1] : f->tmax[i];
    for (size_t k = 0; k < W; k++)
      f->sums[m * W + k] = f->sums[i * W + k] + (i + 1 < f->n ? f->sums[(i + 1) * W + k] : 0.0);
  }
  f->n = m;
}

/* The index of the first entry whose range ends at or after t. */
static size_t find(const figures_t *f, int64_t t) {
  size_t lo = 0, hi = f->n;
  while (lo < hi) {
    size_t const mid = lo + (hi - lo) / 2;
    if (f->tmax[mid] < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Adds f->row (a row's sums) at event time t. */
static ls_err_t timeline_add(figures_t *f, int64_t t) {
  size_t const W = tl_width(f);
  size_t at = find(f, t);
  if (at == f->n || f->tmin[at] > t) { /* a new time */
    if (f->n >= f->n_max) {
      merge_pairs(f);
      return timeline_add(f, t);
    }
    if (f->n == f->cap) {
      size_t const cap = f->cap ? 2 * f->cap : 1024;
      int64_t *const a = realloc(f->tmin, cap * sizeof *a);
      if (a != NULL) f->tmin = a;
      int64_t *const b = realloc(f->tmax, cap * sizeof *b);
      if (b != NULL) f->tmax = b;
      double *const s = realloc(f->sums, cap * W * sizeof *s);
      if (s != NULL) f->sums = s;
      LS_RETURN_IF(!a || !b || !s, LS_ERR_NOMEM, "no memory for %zu event times", cap);
      f->cap = cap;
    }
    memmove(f->tmin + at + 1, f->tmin + at, (f->n - at) * sizeof *f->tmin);
    memmove(f->tmax + at + 1, f->tmax + at, (f->n - at) * sizeof *f->tmax);
    memmove(f->sums + (at + 1) * W, f->sums + at * W, (f->n - at) * W * sizeof *f->sums);
    f->tmin[at] = f->tmax[at] = t;
    memset(f->sums + at * W, 0, W * sizeof *f->sums);
    f->n++;
  }
  for (size_t k = 0; k < W; k++)
    f->sums[at * W + k] += f->row[k];
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

/* Row r's terms per target into f->err [O, V_PER]; 0 when one is not
 * finite: in float32 for the normalised ones (the model's own arithmetic,
 * whose loss would overflow), in double for the data's units. */
static int row_terms(figures_t *f, const prep_t *p, const float *pred, size_t r) {
  int ok = 1;
  for (int j = 0; j < f->O; j++) {
    size_t const o = r * (size_t)f->O + (size_t)j;
    double const pr = pred[o], y = p->target[o], next = p->next[o];
    double const fc = p->base[o] + f->alpha[j] * p->scale[o] * pr;
    double *const e = f->err + (size_t)j * V_PER;
    e[V_LOSS] = (pr - y) * (pr - y);
    e[V_BASE] = (y - p->last[o]) * (y - p->last[o]);
    e[V_MSE] = (fc - next) * (fc - next);
    e[V_BASE_DATA] = (next - p->cur[o]) * (next - p->cur[o]);
    e[V_PY] = pr * y;
    e[V_PP] = pr * pr;
    ok &= fabs(e[V_LOSS]) <= FLT_MAX && fabs(e[V_BASE]) <= FLT_MAX && fabs(e[V_PY]) <= FLT_MAX &&
          fabs(e[V_PP]) <= FLT_MAX && isfinite(e[V_MSE]) && isfinite(e[V_BASE_DATA]);
  }
  return ok;
}

/* Row r's terms per horizon and target (H > 1) into f->row's and v's
 * horizon blocks (v: the step's, after its 2 + V_PER O): the forecasts
 * whose actual is known, finite; h = 1's the model's (pred), the later
 * ones the head's (out) with their linear path's (prep_horizon_fc). */
static void horizon_terms(figures_t *f, const prep_t *p, const float *pred, const float *out,
                          size_t r, double *v) {
  double *const row = f->row + 1 + TL_PER * (size_t)f->O;
  memset(row, 0, HZ_PER * (size_t)f->OH * sizeof *row);
  for (int k = 0; k < f->OH; k++) {
    int const j = k % f->O;
    size_t const o = r * (size_t)f->OH + (size_t)k, o1 = r * (size_t)f->O + (size_t)j;
    double const y = p->next_h[o];
    if (isnan(y)) continue; /* not known when the window trained */
    double const pr = k < f->O ? (double)pred[o1]
                               : prep_horizon_fc(p, k / f->O + 1, p->lin[o], p->beta[o],
                                                 out[r * (size_t)p->W + (size_t)k]);
    double const fc = p->base[o1] + f->alpha[j] * p->scale[o1] * pr;
    double const e[HZ_PER] = {1.0, (fc - y) * (fc - y), (y - p->cur[o1]) * (y - p->cur[o1]),
                              (y - p->snaive[o]) * (y - p->snaive[o])};
    if (!isfinite(e[HZ_MSE]) || !isfinite(e[HZ_LAST]) || !isfinite(e[HZ_SNAIVE])) continue;
    for (int q = 0; q < HZ_PER; q++)
      row[k * HZ_PER + q] = e[q], v[k * HZ_PER + q] += e[q];
  }
}

/* Row r's terms per quantile level, horizon and target (Q > 0) into
 * f->row's and v's quantile blocks (v: the step's, after the horizons'),
 * and its series' calibration (st; prep_calib): first the forecasts whose
 * actual is the row's record x[t] (those after record t - h, h records
 * ahead) are scored as they went out, and each level's correction moves
 * by gamma (level - 1[x[t] <= quantile]); then the row's own quantile
 * forecasts, from the head's outputs out [T, n, W] with the corrections
 * (prep_quantile_values), go out (p->qcal) and wait for their actuals. */
static void quantile_terms(figures_t *f, const prep_t *p, const float *out, size_t r,
                           const ls_series_stats_t *st, double *v) {
  size_t const O = (size_t)f->O, OH = (size_t)f->OH, QOH = (size_t)f->Q * OH;
  double *const row = f->row + 1 + TL_PER * O + (f->H > 1 ? HZ_PER * OH : 0);
  memset(row, 0, QZ_PER * QOH * sizeof *row);
  prep_calib_t const cal = prep_calib(p, st);
  prep_calib_resolve(p, cal, p->rec[r], p->cur + r * O, row);
  for (size_t k = 0; k < QZ_PER * QOH; k++)
    v[k] += row[k];
  double *const qv = p->qcal + r * QOH;
  const float *const o = out + r * (size_t)p->W;
  prep_quantile_values(p, o, p->base + r * O, p->scale + r * O, p->lin + r * OH, p->beta + r * OH,
                       p->gamma > 0.0 ? &cal : NULL, qv);
  prep_calib_issue(p, cal, p->rec[r], qv, o, p->base + r * O, p->scale + r * O, p->lin + r * OH,
                   p->beta + r * OH);
}

ls_err_t figures_score(figures_t *f, const prep_t *p, const float *pred, const float *out,
                       ls_series_stats_t *st, double *v) {
  int const O = f->O, n = p->B;
  memset(v, 0, FIG_V(O, f->H, f->Q) * sizeof *v);
  for (size_t r = 0; r < (size_t)p->T * (size_t)n; r++) {
    if (p->mask[r] == 0.0f) continue;
    if (!row_terms(f, p, pred, r)) { /* a forecast that is not finite enters no figure */
      if (f->Q > 0)                  /* nor the calibration; it goes out as the head gave it */
        prep_quantile_values(p, out + r * (size_t)p->W, p->base + r * (size_t)O,
                             p->scale + r * (size_t)O, p->lin + r * (size_t)f->OH,
                             p->beta + r * (size_t)f->OH, NULL,
                             p->qcal + r * (size_t)f->Q * (size_t)f->OH);
      v[1] += 1.0;
      continue;
    }
    double *const sums = st[r % (size_t)n].errors;
    f->row[0] = 1.0;
    for (int j = 0; j < O; j++) {
      const double *const e = f->err + (size_t)j * V_PER;
      for (int k = 0; k < V_PER; k++)
        v[2 + j * V_PER + k] += e[k];
      for (int k = 0; k < TL_PER; k++)
        f->row[1 + j * TL_PER + k] = e[k];
      sums[2 * j] += e[V_MSE], sums[2 * j + 1] += e[V_BASE_DATA];
    }
    if (f->H > 1) horizon_terms(f, p, pred, out, r, v + 2 + V_PER * O);
    if (f->Q > 0)
      quantile_terms(f, p, out, r, &st[r % (size_t)n],
                     v + 2 + V_PER * O + (f->H > 1 ? HZ_PER * f->OH : 0));
    v[0] += 1.0;
    LS_FORWARD_IF_ERROR(timeline_add(f, p->time[r]));
  }
  if (p->t_max >= 0) {
    f->t_min = p->t_min < f->t_min ? p->t_min : f->t_min;
    f->t_max = p->t_max > f->t_max ? p->t_max : f->t_max;
  }
  return LS_OK;
}

/* Target j's alpha from its calibration: clamp(spy / spp, 0, 1), 0 before
 * any forecast (the last value). */
static void set_alpha(figures_t *f, int j) {
  if (f->calibrate) f->alpha[j] = f->spp[j] > 0 ? fmin(1.0, fmax(0.0, f->spy[j] / f->spp[j])) : 0.0;
}

/* The calibration after a step of n forecasts per target with sums py, pp
 * (FINDINGS.md 4.3), and alpha for the next step. */
static void calibrate(figures_t *f, int j, double n, double py, double pp) {
  if (!f->calibrate || n <= 0) return;
  f->k[j] += (int64_t)n;
  double const w = fmin(1.0, fmax(n / (double)f->k[j], n / CAL_N));
  f->spy[j] += w * (py / n - f->spy[j]);
  f->spp[j] += w * (pp / n - f->spp[j]);
  set_alpha(f, j);
}

int figures_step(figures_t *f, const double *v, ls_step_stats_t *st) {
  double const rows = v[0];
  st->loss_sum = st->baseline_sum = 0.0;
  for (int j = 0; j < f->O; j++) {
    const double *const e = v + 2 + j * V_PER;
    ls_target_figures_t *const s = &f->step[j], *const t = &f->total[j];
    s->count = rows, s->loss_sum = e[V_LOSS], s->baseline_sum = e[V_BASE];
    s->mse_sum = e[V_MSE], s->base_sum = e[V_BASE_DATA];
    t->count += rows, t->loss_sum += e[V_LOSS], t->baseline_sum += e[V_BASE];
    t->mse_sum += e[V_MSE], t->base_sum += e[V_BASE_DATA];
    st->loss_sum += e[V_LOSS], st->baseline_sum += e[V_BASE];
    calibrate(f, j, rows, e[V_PY], e[V_PP]);
  }
  for (int k = 0; k < f->OH && f->H > 1; k++) {
    const double *const e = v + 2 + V_PER * f->O + k * HZ_PER;
    ls_horizon_figures_t *const s = &f->hz_step[k];
    s->count = e[HZ_N], s->mse_sum = e[HZ_MSE];
    s->last_sum = e[HZ_LAST], s->snaive_sum = e[HZ_SNAIVE];
    f->hz[k].count += e[HZ_N], f->hz[k].mse_sum += e[HZ_MSE];
    f->hz[k].last_sum += e[HZ_LAST], f->hz[k].snaive_sum += e[HZ_SNAIVE];
  }
  st->horizons = f->H;
  st->horizon = f->H > 1 ? f->hz_step : NULL;
  const double *const qs = v + 2 + V_PER * f->O + (f->H > 1 ? HZ_PER * f->OH : 0);
  for (int k = 0; k < f->Q * f->OH; k++) {
    ls_quantile_figures_t *const s = &f->qz_step[k];
    s->count = qs[k * QZ_PER + QZ_N], s->below = qs[k * QZ_PER + QZ_BELOW];
    s->pinball_sum = qs[k * QZ_PER + QZ_PINBALL];
    f->qz[k].count += s->count, f->qz[k].below += s->below;
    f->qz[k].pinball_sum += s->pinball_sum;
  }
  st->quantiles = f->Q;
  st->quantile = f->Q > 0 ? f->qz_step : NULL;
  st->count = rows * f->O;
  st->targets = f->O;
  st->target = f->step;
  return v[1] > 0;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */

/* t0, t1: the first and last records' event times over every rank (from
 * each rank's, gathered through a sum); *any = 0 when no rank has one. */
static ls_err_t span(const figures_t *f, comm_t *comm, int64_t *t0, int64_t *t1, int *any) {
  int const world = comm_world(comm), rank = comm_rank(comm);
  double *const v = calloc(3 * (size_t)world, sizeof *v);
  LS_RETURN_IF(v == NULL, LS_ERR_NOMEM, "no memory for %d ranks' times", world);
  if (f->t_max >= 0) /* ms since the epoch: exact in a double */
    v[rank] = (double)f->t_min, v[world + rank] = (double)f->t_max, v[2 * world + rank] = 1.0;
  ls_err_t const err = comm_sum_doubles(comm, v, 3 * world);
  *any = 0;
  for (int r = 0; r < world && err == LS_OK; r++) {
    if (v[2 * world + r] == 0.0) continue;
    int64_t const a = (int64_t)v[r], b = (int64_t)v[world + r];
    *t0 = *any && *t0 < a ? *t0 : a;
    *t1 = *any && *t1 > b ? *t1 : b;
    *any = 1;
  }
  free(v);
  return err;
}

ls_err_t figures_summary(figures_t *f, comm_t *comm, ls_train_summary_t *sum) {
  int64_t t0 = 0, t1 = 0;
  int any = 0;
  LS_FORWARD_IF_ERROR(span(f, comm, &t0, &t1, &any));
  double const cut = (double)t0 + 0.8 * (double)(t1 - t0);
  size_t const W = tl_width(f);
  double *const tail = calloc(W, sizeof *tail);
  LS_RETURN_IF(tail == NULL, LS_ERR_NOMEM, "no memory for the final figures");
  for (size_t i = 0; any && i < f->n; i++) {
    double const mid = f->tmin[i] == f->tmax[i] ? (double)f->tmin[i]
                                                : 0.5 * ((double)f->tmin[i] + (double)f->tmax[i]);
    if (mid > cut)
      for (size_t k = 0; k < W; k++)
        tail[k] += f->sums[i * W + k];
  }
  ls_err_t const err = comm_sum_doubles(comm, tail, (int)W);
  sum->tail_loss_sum = sum->tail_baseline_sum = 0.0;
  for (int j = 0; j < f->O && err == LS_OK; j++) {
    const double *const e = tail + 1 + j * TL_PER;
    f->tail[j].count = tail[0];
    f->tail[j].loss_sum = e[V_LOSS], f->tail[j].baseline_sum = e[V_BASE];
    f->tail[j].mse_sum = e[V_MSE], f->tail[j].base_sum = e[V_BASE_DATA];
    sum->tail_loss_sum += e[V_LOSS], sum->tail_baseline_sum += e[V_BASE];
  }
  for (int k = 0; k < f->OH && f->H > 1 && err == LS_OK; k++) {
    const double *const e = tail + 1 + TL_PER * f->O + k * HZ_PER;
    f->hz_tail[k].count = e[HZ_N], f->hz_tail[k].mse_sum = e[HZ_MSE];
    f->hz_tail[k].last_sum = e[HZ_LAST], f->hz_tail[k].snaive_sum = e[HZ_SNAIVE];
  }
  const double *const qt = tail + 1 + TL_PER * f->O + (f->H > 1 ? HZ_PER * f->OH : 0);
  for (int k = 0; k < f->Q * f->OH && err == LS_OK; k++) {
    f->qz_tail[k].count = qt[k * QZ_PER + QZ_N], f->qz_tail[k].below = qt[k * QZ_PER + QZ_BELOW];
    f->qz_tail[k].pinball_sum = qt[k * QZ_PER + QZ_PINBALL];
  }
  sum->quantiles = f->Q;
  sum->calibration_rate = f->gamma;
  sum->quantile = f->Q > 0 ? f->qz : NULL;
  sum->tail_quantile = f->Q > 0 ? f->qz_tail : NULL;
  sum->horizons = f->H;
  sum->horizon = f->H > 1 ? f->hz : NULL;
  sum->tail_horizon = f->H > 1 ? f->hz_tail : NULL;
  sum->tail_count = tail[0] * f->O;
  sum->tail_from_ms = any ? (int64_t)floor(cut) : -1;
  sum->targets = f->O;
  sum->target = f->total;
  sum->tail_target = f->tail;
  free(tail);
  return err;
}

const double *figures_alpha(const figures_t *f) {
  return f->alpha;
}

void figures_moments(const figures_t *f, int j, double *m) {
  m[0] = f->spy[j], m[1] = f->spp[j], m[2] = (double)f->k[j];
}

/* The calibration's snapshot section (LS_SNAPSHOT_SECTION_CALIBRATION,
 * rank 0's), version 1: spy f64 [O], spp f64 [O], k i64 [O], O the model's
 * targets (format 4's container section 10 is read as this). */
enum { CALIBRATION_VERSION = 1 };

ls_err_t figures_save(const figures_t *f, ls_snapshot_t *snap) {
  size_t const O = (size_t)f->O, bytes = 3 * O * 8;
  uint8_t *const b = malloc(bytes > 0 ? bytes : 1);
  LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for the calibration of %zu targets", O);
  memcpy(b, f->spy, O * 8);
  memcpy(b + O * 8, f->spp, O * 8);
  memcpy(b + 2 * O * 8, f->k, O * 8);
  ls_err_t const err = ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_CALIBRATION,
                                               CALIBRATION_VERSION, LS_SNAPSHOT_REQUIRED, b, bytes);
  free(b);
  return err;
}

ls_err_t figures_load(figures_t *f, const ls_snapshot_t *snap) {
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  LS_FORWARD_IF_ERROR(
      ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_CALIBRATION, &version, &data, &bytes));
  size_t const O = (size_t)f->O;
  LS_RETURN_IF(version != CALIBRATION_VERSION || bytes != 3 * O * 8, LS_ERR_CORRUPT,
               "the snapshot's calibration is of version %u and %zu bytes; this lstream reads "
               "version %d of %zu bytes (%zu targets)",
               version, bytes, CALIBRATION_VERSION, 3 * O * 8, O);
  const uint8_t *const b = data;
  memcpy(f->spy, b, O * 8);
  memcpy(f->spp, b + O * 8, O * 8);
  memcpy(f->k, b + 2 * O * 8, O * 8);
  for (int j = 0; j < f->O; j++)
    set_alpha(f, j);
  return LS_OK;
}

int ls_horizon_shown(int h, int H) {
  return h >= 1 && h <= H &&
         (H <= 12 || h <= 3 || h == H / 4 || h == H / 2 || h == 3 * H / 4 || h == H);
}
