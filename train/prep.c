/*
 * A step's model inputs and targets (train/prep.h).
 */
#include "prep.h"

#include <stdlib.h>
#include <string.h>

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
  size_t const rows = (size_t)p->T * (size_t)B, F = (size_t)p->F;
  size_t const ro = rows * (size_t)(p->O > 0 ? p->O : 1);
  if (err == LS_OK) {
    p->x = malloc(rows * (size_t)p->I * sizeof *p->x);
    p->y = malloc(ro * sizeof *p->y);
    p->target = malloc(ro * sizeof *p->target);
    p->lin = calloc(ro, sizeof *p->lin);
    p->a = calloc(ro, sizeof *p->a);
    p->rec = malloc(rows * sizeof *p->rec);
    p->beta = malloc((size_t)(p->O > 0 ? p->O : 1) * sizeof *p->beta);
    p->mask = malloc(rows * sizeof *p->mask);
    p->base = malloc(ro * sizeof *p->base);
    p->scale = malloc(ro * sizeof *p->scale);
    p->last = malloc(ro * sizeof *p->last);
    p->cur = malloc(ro * sizeof *p->cur);
    p->next = malloc(ro * sizeof *p->next);
    p->time = malloc(rows * sizeof *p->time);
    p->level = malloc(F * sizeof *p->level), p->chg = malloc(F * sizeof *p->chg);
    p->s = malloc(F * sizeof *p->s), p->ds = malloc(F * sizeof *p->ds);
    if (!p->x || !p->y || !p->target || !p->lin || !p->a || !p->rec || !p->beta || !p->mask ||
        !p->base || !p->scale || !p->last || !p->cur || !p->next || !p->time || !p->level ||
        !p->chg || !p->s || !p->ds)
      err = ls_error_set(LS_ERR_NOMEM, "no memory for a step's inputs (T=%d, B=%d, I=%d)", p->T, B,
                         p->I);
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
  free(p->target), free(p->lin), free(p->a), free(p->rec), free(p->beta);
  season_free(p->sea);
  free(p->last), free(p->cur), free(p->next), free(p->time);
  free(p->level), free(p->chg), free(p->s), free(p->ds);
  free(p);
}

void prep_begin(prep_t *p, int n) {
  p->B = n;
  p->t_min = INT64_MAX;
  p->t_max = -1;
}

/* Consumes record x [F] into the normaliser (n, stats); p->level, chg, s,
 * ds receive what the model sees (raw: the record itself, its change, unit
 * scales). */
static ls_err_t consume(prep_t *p, int64_t *n, double *stats, const float *x) {
  int64_t const t = *n;
  ls_norm_row_t out = {p->level, p->chg, p->s, p->ds};
  if (!p->raw) return ls_norm_consume(&p->norm, p->F, n, stats, x, &out);
  for (int f = 0; f < p->F; f++) { /* the previous value, before it is replaced */
    double const prev = stats[f * LS_NORM_STATS + 3];
    p->level[f] = x[f];
    p->chg[f] = t > 0 ? (float)((double)x[f] - prev) : 0.0f;
    p->s[f] = p->ds[f] = 1.0;
  }
  return ls_norm_consume(&p->norm, p->F, n, stats, x, NULL);
}

ls_err_t prep_record(prep_t *p, int64_t *n, double *stats, double *model, const float *x, float *in,
                     double *base, double *scale, double *lin, double *beta, double *a) {
  int const F = p->F;
  LS_FORWARD_IF_ERROR(consume(p, n, stats, x));
  memcpy(in, p->level, (size_t)F * sizeof *in);
  if (p->change) memcpy(in + F, p->chg, (size_t)F * sizeof *in);
  if (p->sea != NULL)
    season_record(p->sea, model, *n - 1, x, p->feat, p->ds, p->s, p->level, in + p->I0, lin, beta,
                  a);
  for (int j = 0; p->sea == NULL && j < p->O; j++)
    lin[j] = 0.0, beta[j] = 1.0;
  for (int j = 0; j < p->O; j++) {
    int const f = p->feat[j];
    double const loc = p->raw ? 0.0 : stats[f * LS_NORM_STATS];
    base[j] = p->delta ? (double)x[f] : loc;
    scale[j] = p->delta ? p->ds[f] : p->s[f];
  }
  return LS_OK;
}

/* Target j of row r (= t * n + b), whose base and scale are in place: from
 * x[t] (cur) and x[t+1] (next). */
static void target_row(prep_t *p, size_t r, int j, const float *cur, const float *next) {
  int const f = p->feat[j];
  size_t const o = r * (size_t)p->O + (size_t)j;
  double const base = p->base[o], scale = p->scale[o];
  double const y = ((double)next[f] - base) / scale;
  p->target[o] = (float)(p->raw ? y : ls_norm_clamp(&p->norm, y));
  p->y[o] = (float)((double)p->target[o] - p->lin[o]);
  p->last[o] = ((double)cur[f] - base) / scale;
  p->cur[o] = cur[f];
  p->next[o] = next[f];
}

ls_err_t prep_window(prep_t *p, int b, const ls_window_t *w, ls_series_stats_t *st) {
  int const T = p->T, F = p->F, I = p->I, O = p->O, n = p->B;
  for (int t = 0; t < T; t++) {
    size_t const r = (size_t)t * (size_t)n + (size_t)b;
    int const valid = t < w->n_targets;
    p->mask[r] = valid ? 1.0f : 0.0f;
    p->time[r] = valid ? w->times[t + 1] : -1;
    if (!valid) { /* padding */
      memset(p->x + r * I, 0, (size_t)I * sizeof *p->x);
      memset(p->y + r * O, 0, (size_t)O * sizeof *p->y);
      memset(p->target + r * O, 0, (size_t)O * sizeof *p->target);
      for (int j = 0; j < O; j++) {
        size_t const o = r * (size_t)O + (size_t)j;
        p->base[o] = p->last[o] = p->lin[o] = 0.0, p->scale[o] = 1.0;
        p->cur[o] = p->next[o] = 0.0f;
      }
      continue;
    }
    const float *const cur = w->x + (size_t)t * F, *const next = cur + F;
    p->rec[r] = *st->norm_n;
    LS_FORWARD_IF_ERROR(prep_record(p, st->norm_n, st->norm, st->model, cur, p->x + r * I,
                                    p->base + r * O, p->scale + r * O, p->lin + r * O, p->beta,
                                    p->a + r * O));
    for (int j = 0; j < O; j++)
      target_row(p, r, j, cur, next);
    for (int k = t; k <= t + 1; k++) /* the step's records' times, inputs and targets */
      if (w->times[k] >= 0) {
        p->t_min = w->times[k] < p->t_min ? w->times[k] : p->t_min;
        p->t_max = w->times[k] > p->t_max ? w->times[k] : p->t_max;
      }
  }
  return LS_OK;
}

void prep_learn(prep_t *p, int b, ls_series_stats_t *st, float *pred) {
  if (p->sea == NULL) return;
  int const O = p->O, n = p->B;
  int learned = 0;
  for (int j = 0; j < O; j++) { /* the weights the window was forecast with */
    double alpha;
    season_mix(p->sea, st->model, j, &alpha, &p->beta[j]);
  }
  for (int t = 0; t < p->T; t++) {
    size_t const r = (size_t)t * (size_t)n + (size_t)b;
    if (p->mask[r] == 0.0f) continue;
    for (int j = 0; j < O; j++) {
      size_t const o = r * (size_t)O + (size_t)j;
      /* A series' first record has no change yet: its target is no row to learn. */
      if (p->rec[r] > 0 && p->K > 0) {
        season_learn(p->sea, st->model, j, p->a[o], (double)p->target[o], (double)pred[o]);
        learned = 1;
      }
      pred[o] = prep_mix(p->lin[o], p->beta[j], pred[o]);
    }
  }
  for (int j = 0; learned && j < O; j++)
    season_solve(p->sea, st->model, j);
}
