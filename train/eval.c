/*
 * The error measures of forecasts (train/eval.h, "The measures"): the rows
 * of one kind with an actual, ordered by series (by key), horizon and
 * offset; sums per group in double, in that order.
 */
#define _GNU_SOURCE /* qsort_r */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"

/* A group's sums, finished into an eval_stat_t. */
typedef struct sums_s {
  int64_t n, naive_n, snaive_n;
  double abs, sq, bias, smape, naive, snaive;
} sums_t;

void eval_conf_init(eval_conf_t *c) {
  if (c != NULL) *c = (eval_conf_t){.kind = -1, .season = 24, .bins = 50};
}

static double ratio(double a, double b) {
  return b > 0 ? a / b : NAN;
}

static void finish(const sums_t *s, eval_stat_t *out) {
  double const n = (double)s->n;
  out->n = s->n;
  out->mae = s->n ? s->abs / n : NAN;
  out->rmse = s->n ? sqrt(s->sq / n) : NAN;
  out->bias = s->n ? s->bias / n : NAN;
  out->smape = s->n ? s->smape / n : NAN;
  out->naive_n = s->naive_n;
  out->naive_mae = s->naive_n ? s->naive / (double)s->naive_n : NAN;
  out->mase = s->naive_n ? ratio(out->mae, out->naive_mae) : NAN;
  out->snaive_n = s->snaive_n;
  out->snaive_mae = s->snaive_n ? s->snaive / (double)s->snaive_n : NAN;
  out->mase_s = s->snaive_n ? ratio(out->mae, out->snaive_mae) : NAN;
}

static void add_sums(sums_t *to, const sums_t *s) {
  to->n += s->n, to->naive_n += s->naive_n, to->snaive_n += s->snaive_n;
  to->abs += s->abs, to->sq += s->sq, to->bias += s->bias, to->smape += s->smape;
  to->naive += s->naive, to->snaive += s->snaive;
}

/* ------------------------------------------------------------------------ */
/* Order                                                                     */

typedef struct key_s {
  int64_t series, h, offset;
  size_t row;
} row_key_t;

static int cmp_key(const void *a, const void *b) {
  const row_key_t *const x = a, *const y = b;
  if (x->series != y->series) return x->series < y->series ? -1 : 1;
  if (x->h != y->h) return x->h < y->h ? -1 : 1;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return (x->row > y->row) - (x->row < y->row);
}

static int cmp_series(const void *a, const void *b, void *keys) {
  char *const *const k = keys;
  return strcmp(k[*(const int32_t *)a], k[*(const int32_t *)b]);
}

static int has_actual(const eval_rows_t *r, size_t i) {
  for (int j = 0; j < r->O; j++)
    if (isnan(r->y[i * (size_t)r->O + (size_t)j])) return 0;
  return 1;
}

/* The rows evaluated, in order; the series, their first rows, horizons. */
static ls_err_t arrange(eval_t *e) {
  const eval_rows_t *const r = e->rows;
  int any_next = 0;
  for (size_t i = 0; i < r->n && !any_next; i++)
    any_next = r->kind[i] == EVAL_NEXT;
  e->kind = e->conf.kind >= 0 ? e->conf.kind : any_next ? EVAL_NEXT : EVAL_EVAL;
  int32_t *const rank = malloc((r->n_keys ? r->n_keys : 1) * sizeof *rank);
  int32_t *const by_rank = malloc((r->n_keys ? r->n_keys : 1) * sizeof *by_rank);
  row_key_t *const k = malloc((r->n ? r->n : 1) * sizeof *k);
  e->order = malloc((r->n ? r->n : 1) * sizeof *e->order);
  e->hs = malloc((r->n ? r->n : 1) * sizeof *e->hs);
  if (!rank || !by_rank || !k || !e->order || !e->hs) {
    free(rank), free(by_rank), free(k);
    return ls_error_set(LS_ERR_NOMEM, "no memory to sort %zu forecasts", r->n);
  }
  for (size_t i = 0; i < r->n_keys; i++)
    by_rank[i] = (int32_t)i;
  qsort_r(by_rank, r->n_keys, sizeof *by_rank, cmp_series, r->key);
  for (size_t i = 0; i < r->n_keys; i++)
    rank[by_rank[i]] = (int32_t)i;
  size_t n = 0;
  for (size_t i = 0; i < r->n; i++) {
    if (r->kind[i] != e->kind) {
      e->other_kind++;
    } else if (!has_actual(r, i)) {
      e->no_actual++;
    } else {
      k[n++] = (row_key_t){rank[r->series[i]], r->h[i], r->offset[i], i};
    }
  }
  qsort(k, n, sizeof *k, cmp_key);
  for (size_t i = 0; i < n; i++)
    e->order[i] = k[i].row;
  e->n = n;
  free(rank), free(by_rank), free(k);
  return LS_OK;
}

/* The series, their first rows, the horizons and the times of e->order. */
static ls_err_t index_rows(eval_t *e) {
  const eval_rows_t *const r = e->rows;
  e->sid = malloc((e->n + 1) * sizeof *e->sid);
  e->first = malloc((e->n + 1) * sizeof *e->first);
  LS_RETURN_IF(!e->sid || !e->first, LS_ERR_NOMEM, "no memory for the series");
  e->t0 = INT64_MAX, e->t1 = INT64_MIN;
  for (size_t a = 0; a < e->n; a++) {
    size_t const i = e->order[a];
    if (a == 0 || r->series[i] != r->series[e->order[a - 1]]) {
      e->sid[e->S] = r->series[i];
      e->first[e->S++] = a;
    }
    e->t0 = r->time[i] < e->t0 ? r->time[i] : e->t0;
    e->t1 = r->time[i] > e->t1 ? r->time[i] : e->t1;
    int seen = 0;
    for (int h = 0; h < e->H && !seen; h++)
      seen = e->hs[h] == r->h[i];
    if (!seen) {
      int at = e->H++;
      for (; at > 0 && e->hs[at - 1] > r->h[i]; at--)
        e->hs[at] = e->hs[at - 1];
      e->hs[at] = r->h[i];
    }
  }
  e->first[e->S] = e->n;
  e->cut = (double)e->t0 + 0.8 * (double)(e->t1 - e->t0);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Measures                                                                  */

static int horizon_index(const eval_t *e, int32_t h) {
  for (int k = 0; k < e->H; k++)
    if (e->hs[k] == h) return k;
  return 0;
}

/* Row at (order position a) of target j into sums [EVAL_PERIODS] and the
 * quantiles' counts; p: its place in its (series, h) run. */
static void score_row(eval_t *e, size_t a, size_t p, int j, sums_t *sums) {
  const eval_rows_t *const r = e->rows;
  size_t const O = (size_t)r->O, i = e->order[a];
  double const f = r->f[i * O + (size_t)j], y = r->y[i * O + (size_t)j], err = y - f;
  int const fin = (double)r->time[i] > e->cut, k = horizon_index(e, r->h[i]);
  double const den = fabs(f) + fabs(y);
  for (int period = 0; period <= fin; period++) {
    sums_t *const s = &sums[period];
    s->n++;
    s->abs += fabs(err), s->sq += err * err, s->bias += f - y;
    s->smape += den > 0 ? 200.0 * fabs(err) / den : 0.0;
    if (p >= 1) s->naive_n++, s->naive += fabs(y - r->y[e->order[a - 1] * O + (size_t)j]);
    if (e->conf.season > 0 && p >= (size_t)e->conf.season)
      s->snaive_n++,
          s->snaive += fabs(y - r->y[e->order[a - (size_t)e->conf.season] * O + (size_t)j]);
    for (int q = 0; q < r->Q; q++) {
      size_t const at =
          (((size_t)j * (size_t)e->H + (size_t)k) * (size_t)r->Q + (size_t)q) * EVAL_PERIODS +
          (size_t)period;
      double const v = r->q[(i * (size_t)r->Q + (size_t)q) * O + (size_t)j], l = r->level[q];
      e->q_n[at]++;
      e->coverage[at] += y <= v;
      e->pinball[at] += fmax(l * (y - v), (l - 1.0) * (y - v));
    }
  }
  if (k == 0 && p >= 1 && e->conf.bins > 0) { /* the ratio over time: the first horizon */
    double const span = (double)(e->t1 - e->t0) + 1.0;
    int b = (int)((double)(r->time[i] - e->t0) / span * e->conf.bins);
    b = b < 0 ? 0 : b >= e->conf.bins ? e->conf.bins - 1 : b;
    size_t const at = (size_t)j * (size_t)e->conf.bins + (size_t)b;
    e->bin_n[at]++;
    e->bin_mae[at] += fabs(err);
    e->bin_naive[at] += fabs(y - r->y[e->order[a - 1] * O + (size_t)j]);
  }
}

/* Series s's groups, summed into total [O, H, EVAL_PERIODS] too. */
static void score_series(eval_t *e, size_t s, sums_t *total, sums_t *tmp) {
  const eval_rows_t *const r = e->rows;
  size_t const G = (size_t)r->O * (size_t)e->H * EVAL_PERIODS;
  memset(tmp, 0, G * sizeof *tmp);
  size_t p = 0;
  for (size_t a = e->first[s]; a < e->first[s + 1]; a++, p++) {
    if (a > e->first[s] && r->h[e->order[a]] != r->h[e->order[a - 1]]) p = 0;
    int const k = horizon_index(e, r->h[e->order[a]]);
    for (int j = 0; j < r->O; j++)
      score_row(e, a, p, j, tmp + ((size_t)j * (size_t)e->H + (size_t)k) * EVAL_PERIODS);
  }
  for (size_t g = 0; g < G; g++) {
    finish(&tmp[g], &e->ser[s * G + g]);
    add_sums(&total[g], &tmp[g]);
  }
}

/* The overall groups: sums over every row, MASE the mean of the series'. */
static void overall(eval_t *e, const sums_t *total) {
  size_t const G = (size_t)e->rows->O * (size_t)e->H * EVAL_PERIODS;
  for (size_t g = 0; g < G; g++) {
    finish(&total[g], &e->all[g]);
    double m = 0, ms = 0;
    int64_t nm = 0, nms = 0;
    for (size_t s = 0; s < e->S; s++) {
      const eval_stat_t *const st = &e->ser[s * G + g];
      if (isfinite(st->mase)) m += st->mase, nm++;
      if (isfinite(st->mase_s)) ms += st->mase_s, nms++;
    }
    e->all[g].mase = nm ? m / (double)nm : NAN;
    e->all[g].mase_s = nms ? ms / (double)nms : NAN;
  }
}

static ls_err_t measure(eval_t *e) {
  size_t const O = (size_t)e->rows->O, G = O * (size_t)e->H * EVAL_PERIODS;
  size_t const QG = G * (size_t)(e->rows->Q > 0 ? e->rows->Q : 1);
  size_t const bins = O * (size_t)(e->conf.bins > 0 ? e->conf.bins : 1);
  e->ser = calloc(e->S * G, sizeof *e->ser);
  e->all = calloc(G, sizeof *e->all);
  e->q_n = calloc(QG, sizeof *e->q_n);
  e->coverage = calloc(QG, sizeof *e->coverage), e->pinball = calloc(QG, sizeof *e->pinball);
  e->bin_n = calloc(bins, sizeof *e->bin_n);
  e->bin_mae = calloc(bins, sizeof *e->bin_mae), e->bin_naive = calloc(bins, sizeof *e->bin_naive);
  sums_t *const total = calloc(G, sizeof *total), *const tmp = calloc(G, sizeof *tmp);
  ls_err_t err = LS_OK;
  if (!e->ser || !e->all || !e->q_n || !e->coverage || !e->pinball || !e->bin_n || !e->bin_mae ||
      !e->bin_naive || !total || !tmp) {
    err = ls_error_set(LS_ERR_NOMEM, "no memory for the measures of %zu series", e->S);
  } else {
    for (size_t s = 0; s < e->S; s++)
      score_series(e, s, total, tmp);
    overall(e, total);
    for (size_t g = 0; g < QG; g++)
      if (e->q_n[g] > 0)
        e->coverage[g] /= (double)e->q_n[g], e->pinball[g] /= (double)e->q_n[g];
      else
        e->coverage[g] = e->pinball[g] = NAN;
  }
  free(total), free(tmp);
  return err;
}

ls_err_t eval_new(const eval_rows_t *r, const eval_conf_t *conf, eval_t **out) {
  LS_RETURN_IF(r == NULL || conf == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "eval_new: r, conf and out must not be NULL");
  LS_RETURN_IF(conf->kind < -1 || conf->kind > EVAL_EVAL || conf->season < 0 || conf->bins < 0,
               LS_ERR_INVALID_ARG, "eval_new: kind %d, season %d or bins %d out of range",
               conf->kind, conf->season, conf->bins);
  *out = NULL;
  eval_t *const e = calloc(1, sizeof *e);
  LS_RETURN_IF(e == NULL, LS_ERR_NOMEM, "no memory for the measures");
  e->rows = r;
  e->conf = *conf;
  ls_err_t err = arrange(e);
  if (err == LS_OK && e->n == 0)
    err = ls_error_set(LS_ERR_INVALID_ARG,
                       "no %s forecast with an actual value among %zu rows (%lld of the other "
                       "kind, %lld without an actual)",
                       e->kind == EVAL_NEXT ? "next" : "eval", r->n, (long long)e->other_kind,
                       (long long)e->no_actual);
  if (err == LS_OK) err = index_rows(e);
  if (err == LS_OK) err = measure(e);
  if (err != LS_OK) {
    eval_free(e);
    return err;
  }
  *out = e;
  return LS_OK;
}

void eval_free(eval_t *e) {
  if (e == NULL) return;
  free(e->order), free(e->hs), free(e->sid), free(e->first), free(e->ser), free(e->all);
  free(e->q_n), free(e->coverage), free(e->pinball);
  free(e->bin_n), free(e->bin_mae), free(e->bin_naive);
  free(e);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */

const eval_stat_t *eval_series_stat(const eval_t *e, size_t s, int j, int k, int p) {
  size_t const G = (size_t)e->rows->O * (size_t)e->H * EVAL_PERIODS;
  return &e->ser[s * G + ((size_t)j * (size_t)e->H + (size_t)k) * EVAL_PERIODS + (size_t)p];
}

const eval_stat_t *eval_stat(const eval_t *e, int j, int k, int p) {
  return &e->all[((size_t)j * (size_t)e->H + (size_t)k) * EVAL_PERIODS + (size_t)p];
}

int64_t eval_find_series(const eval_t *e, const char *key) {
  for (size_t s = 0; s < e->S; s++)
    if (!strcmp(e->rows->key[e->sid[s]], key)) return (int64_t)s;
  return -1;
}

typedef struct rank_by_s {
  const eval_t *e;
  int j, k;
} rank_by_t;

/* Whole-run MASE ascending, series without one last, then by index. */
static int cmp_rank(const void *a, const void *b, void *by) {
  const rank_by_t *const r = by;
  size_t const x = *(const size_t *)a, y = *(const size_t *)b;
  double const mx = eval_series_stat(r->e, x, r->j, r->k, EVAL_ALL)->mase;
  double const my = eval_series_stat(r->e, y, r->j, r->k, EVAL_ALL)->mase;
  int const nx = isnan(mx), ny = isnan(my);
  if (nx != ny) return nx - ny;
  if (!nx && mx != my) return mx < my ? -1 : 1;
  return (x > y) - (x < y);
}

ls_err_t eval_rank(const eval_t *e, int j, int k, size_t *rank) {
  LS_RETURN_IF(e == NULL || rank == NULL || j < 0 || j >= e->rows->O || k < 0 || k >= e->H,
               LS_ERR_INVALID_ARG, "eval_rank: no target %d or horizon index %d", j, k);
  for (size_t s = 0; s < e->S; s++)
    rank[s] = s;
  rank_by_t by = {e, j, k};
  qsort_r(rank, e->S, sizeof *rank, cmp_rank, &by);
  return LS_OK;
}

int eval_prev(const eval_t *e, size_t at, int j, double *y_prev) {
  const eval_rows_t *const r = e->rows;
  if (at == 0 || at >= e->n) return 0;
  size_t const i = e->order[at], b = e->order[at - 1];
  if (r->series[i] != r->series[b] || r->h[i] != r->h[b]) return 0;
  *y_prev = r->y[b * (size_t)r->O + (size_t)j];
  return 1;
}
