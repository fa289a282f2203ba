/*
 * What a forecast was made from (train/audit.h): the trainer's own pieces
 * (its configuration from the snapshot's settings, prep.c's normalising,
 * figures.c's calibration, the engine's forward) put together for one
 * series.
 */
#include "audit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "figures.h"
#include "lstream/kernels.h"
#include "prep.h"
#include "train_internal.h"

struct audit_s {
  audit_info_t info;
  ls_train_conf_t *conf;
  prep_t *p;
  figures_t *fig;
  ls_engine_t *eng;
  int stateless;
  float *h, *c;         /* [L, H] the series' state */
  double *norm;         /* [F, LS_NORM_STATS] its normaliser */
  double *model;        /* [ls_series_stats_t.model_n] its seasons and linear path (NULL: none) */
  float *x, *pred;      /* [T, I], [T, O H] a window's */
  double *base, *scale; /* [T, O] */
  double *lin, *beta;   /* [T, O] the linear path's share, the LSTM's weight (season.h) */
  double *qv, *terms;   /* [Q OH] a record's quantile forecasts, [Q OH 3] scratch */
  float *y;             /* [O] a record's target values */
};

/* The run's configuration from a snapshot's settings section. */
static ls_err_t settings(const ls_snapshot_t *snap, const char *path, ls_train_conf_t **out) {
  uint32_t version = 0;
  const void *text = NULL;
  size_t len = 0;
  ls_err_t const has =
      ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_SETTINGS, &version, &text, &len);
  LS_RETURN_IF(has != LS_OK, LS_ERR_UNSUPPORTED,
               "%s keeps no settings (a format-4 snapshot): resume it with a later lstream and "
               "take a snapshot, then predict from that",
               path);
  LS_FORWARD_IF_ERROR(ls_train_conf_new(out));
  char note[1024];
  return train_conf_adopt(*out, text, len, path, note, sizeof note);
}

ls_err_t audit_calibration(const ls_snapshot_t *snap, int O, double *alpha, double *moments) {
  LS_RETURN_IF(snap == NULL || alpha == NULL || O < 1, LS_ERR_INVALID_ARG,
               "audit_calibration: snap or alpha is NULL, or %d targets", O);
  ls_train_conf_t *conf = NULL;
  figures_t *fig = NULL;
  int *feat = NULL, n = 0;
  ls_err_t err = settings(snap, "the snapshot", &conf);
  if (err == LS_OK && (feat = calloc((size_t)conf->features, sizeof *feat)) == NULL)
    err = ls_error_set(LS_ERR_NOMEM, "no memory for %d features", conf->features);
  if (err == LS_OK) err = train_conf_targets(conf, feat, &n);
  if (err == LS_OK && n != O)
    err = ls_error_set(LS_ERR_CORRUPT, "the snapshot's settings name %d targets, its series %d", n,
                       O);
  if (err == LS_OK) err = figures_new(O, feat, conf, &fig);
  if (err == LS_OK) err = figures_load(fig, snap);
  for (int j = 0; j < O && err == LS_OK; j++) {
    alpha[j] = figures_alpha(fig)[j];
    if (moments != NULL) figures_moments(fig, j, moments + 3 * j);
  }
  figures_free(fig);
  ls_train_conf_destroy(conf);
  free(feat);
  return err;
}

/* Finds key among the parts: *part and its index there. */
static ls_err_t find_series(ls_snapshot_t *const *parts, int world, const char *key,
                            const char *path, int *part, size_t *at) {
  size_t const len = strlen(key);
  for (int r = 0; r < world; r++)
    for (size_t i = 0; i < ls_snapshot_series_count(parts[r]); i++) {
      ls_series_info_t si;
      LS_FORWARD_IF_ERROR(ls_snapshot_get_series(parts[r], i, &si, NULL, NULL));
      if (si.key_len == len && !memcmp(si.key, key, len)) {
        *part = r, *at = i;
        return LS_OK;
      }
    }
  return ls_error_set(LS_ERR_NOT_FOUND,
                      "%s holds no series '%s' (a key as the topic's records "
                      "carry it; `lstream export --states` lists them)",
                      path, key);
}

/* The engine (the CPU's, one thread, one series) with the snapshot's model. */
static ls_err_t engine(audit_t *a, const ls_snapshot_t *snap) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  LS_FORWARD_IF_ERROR(ls_snapshot_get_shape(snap, &ec.shape));
  ec.max_batch = 1, ec.max_window = a->info.T, ec.threads = 1, ec.device = LS_DEVICE_CPU;
  LS_FORWARD_IF_ERROR(ls_engine_new(&ec, &a->eng));
  ls_snapshot_model_t m;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_model(snap, &m));
  return ls_engine_write_params(a->eng, m.params, m.n);
}

/* The series' state, normaliser and counts from its part. */
static ls_err_t series_state(audit_t *a, ls_snapshot_t *snap, size_t at) {
  ls_shape_t shape;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_shape(snap, &shape));
  size_t const row = (size_t)shape.num_layers * (size_t)shape.hidden_size;
  ls_series_info_t si;
  const float *h = NULL, *c = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_series(snap, at, &si, &h, &c));
  ls_series_stats_t st;
  LS_FORWARD_IF_ERROR(ls_snapshot_series_stats(snap, at, &st));
  size_t const F = (size_t)a->info.F;
  a->h = malloc(row * sizeof *a->h), a->c = malloc(row * sizeof *a->c);
  a->norm = malloc(F * LS_NORM_STATS * sizeof *a->norm);
  LS_RETURN_IF(!a->h || !a->c || !a->norm, LS_ERR_NOMEM, "no memory for a series' state");
  memcpy(a->h, h, row * sizeof *h), memcpy(a->c, c, row * sizeof *c);
  memcpy(a->norm, st.norm, F * LS_NORM_STATS * sizeof *a->norm);
  size_t const X = prep_model_width(a->p);
  if (X > 0) {
    a->model = calloc(X, sizeof *a->model);
    LS_RETURN_IF(a->model == NULL, LS_ERR_NOMEM, "no memory for a series' linear path");
  }
  /* (a snapshot of an earlier layout in this one's) */
  ls_series_stats_t into = {.model = a->model, .model_n = X};
  double *packed = NULL;
  prep_adopt_t ad;
  ls_err_t err = prep_adopt_begin(a->conf, a->p->O, X, snap, &ad);
  if (err == LS_OK) err = prep_model_adopt(&ad, &into, &st, &packed);
  prep_adopt_end(&ad);
  LS_FORWARD_IF_ERROR(err);
  err = st.model_n == into.model_n
            ? LS_OK
            : ls_error_set(LS_ERR_CORRUPT,
                           "the snapshot's series keep %zu doubles of seasons and "
                           "linear path, its settings make %zu",
                           st.model_n, X);
  if (err == LS_OK && st.model_n > 0) memcpy(a->model, st.model, st.model_n * sizeof *a->model);
  free(packed);
  LS_FORWARD_IF_ERROR(err);
  a->info.norm_n = *st.norm_n;
  a->info.last_offset = si.last_offset;
  return LS_OK;
}

/* Everything from the loaded parts (rank 0's first). */
static ls_err_t build(audit_t *a, ls_snapshot_t *const *parts, int world, const char *path,
                      const char *key) {
  int part = 0;
  size_t at = 0;
  LS_FORWARD_IF_ERROR(find_series(parts, world, key, path, &part, &at));
  LS_FORWARD_IF_ERROR(settings(parts[0], path, &a->conf));
  LS_FORWARD_IF_ERROR(prep_new(a->conf, 1, &a->p));
  ls_snapshot_info_t si;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_info(parts[0], &si));
  a->info.step = si.step;
  a->info.F = a->p->F, a->info.O = a->p->O, a->info.T = a->p->T, a->info.feat = a->p->feat;
  a->info.H = a->p->H;
  a->info.Q = a->p->Q, a->info.levels = a->p->levels;
  a->stateless = a->conf->stateless;
  LS_FORWARD_IF_ERROR(figures_new(a->p->O, a->p->feat, a->conf, &a->fig));
  LS_FORWARD_IF_ERROR(figures_load(a->fig, parts[0]));
  a->info.alpha = figures_alpha(a->fig);
  LS_FORWARD_IF_ERROR(engine(a, parts[0]));
  LS_FORWARD_IF_ERROR(series_state(a, parts[part], at));
  size_t const T = (size_t)a->p->T;
  a->x = malloc(T * (size_t)a->p->I * sizeof *a->x);
  a->pred = malloc(T * (size_t)a->p->W * sizeof *a->pred); /* the head's, all outputs */
  a->base = malloc(T * (size_t)a->p->O * sizeof *a->base);
  a->scale = malloc(T * (size_t)a->p->O * sizeof *a->scale);
  a->lin = malloc(T * (size_t)a->p->OH * sizeof *a->lin); /* h-major, every horizon's */
  a->beta = malloc(T * (size_t)a->p->OH * sizeof *a->beta);
  size_t const QOH = (size_t)a->p->Q * (size_t)a->p->OH;
  a->qv = malloc((QOH + 1) * sizeof *a->qv);
  a->terms = malloc((3 * QOH + 1) * sizeof *a->terms);
  a->y = malloc((size_t)a->p->O * sizeof *a->y);
  LS_RETURN_IF(!a->x || !a->pred || !a->base || !a->scale || !a->lin || !a->beta || !a->qv ||
                   !a->terms || !a->y,
               LS_ERR_NOMEM, "no memory for a window of %zu records", T);
  return LS_OK;
}

ls_err_t audit_new(const char *path, const char *key, audit_t **out) {
  LS_RETURN_IF(path == NULL || key == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "audit_new: path, key and out must not be NULL");
  *out = NULL;
  ls_snapshot_manifest_t *man = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &man));
  int64_t step = 0;
  int32_t world = 0;
  ls_snapshot_manifest_get(man, &step, &world);
  ls_snapshot_t **const parts = calloc((size_t)world, sizeof *parts);
  audit_t *a = calloc(1, sizeof *a);
  ls_err_t err = parts && a ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for a snapshot");
  for (int r = 0; r < world && err == LS_OK; r++)
    err = ls_snapshot_load_shard(man, r, &parts[r]);
  if (err == LS_OK) err = build(a, parts, world, path, key);
  for (int r = 0; parts != NULL && r < world; r++)
    ls_snapshot_destroy(parts[r]);
  free(parts);
  ls_snapshot_manifest_destroy(man);
  if (err != LS_OK) {
    audit_free(a);
    return err;
  }
  *out = a;
  return LS_OK;
}

void audit_free(audit_t *a) {
  if (a == NULL) return;
  ls_engine_destroy(a->eng);
  figures_free(a->fig);
  prep_free(a->p);
  ls_train_conf_destroy(a->conf);
  free(a->h), free(a->c), free(a->norm), free(a->model), free(a->x), free(a->pred);
  free(a->base), free(a->scale), free(a->lin), free(a->beta), free(a->qv);
  free(a->terms), free(a->y);
  free(a);
}

void audit_info(const audit_t *a, audit_info_t *out) {
  if (a != NULL && out != NULL) *out = a->info;
}

/* One window of n <= T records from the series' state; `end`: its last
 * record is the series' last. */
static ls_err_t window(audit_t *a, const float *x, int n, int end, double *out) {
  prep_t *const p = a->p;
  int const I = p->I, O = p->O;
  int64_t const rec0 = a->info.norm_n; /* the window's first record */
  for (int t = 0; t < n; t++) {
    size_t const o = (size_t)t * (size_t)O, oh = (size_t)t * (size_t)p->OH;
    LS_FORWARD_IF_ERROR(prep_record(p, &a->info.norm_n, a->norm, a->model,
                                    x + (size_t)t * (size_t)p->F, a->x + (size_t)t * (size_t)I,
                                    a->base + o, a->scale + o, a->lin + oh, a->beta + oh, NULL));
  }
  LS_FORWARD_IF_ERROR(
      ls_engine_set_state(a->eng, 1, a->stateless ? NULL : a->h, a->stateless ? NULL : a->c));
  LS_FORWARD_IF_ERROR(ls_engine_forward(a->eng, n, 1, a->x, NULL, NULL, NULL, NULL));
  LS_FORWARD_IF_ERROR(ls_engine_read_outputs(a->eng, NULL, a->pred, a->h, a->c));
  const double *const alpha = a->info.alpha;
  size_t const O1 = (size_t)O, OH = (size_t)p->OH, Q = (size_t)p->Q, VH = O1 * (1 + Q);
  for (size_t o = 0; o < (size_t)n * OH; o++) { /* as the trainer's values_of */
    size_t const t = o / OH, c = o % OH, j = c % O1, b = t * O1 + j;
    float const pr = a->pred[t * (size_t)p->W + c];
    double const fc = prep_horizon_fc(p, (int)(c / O1) + 1, a->lin[o], a->beta[o], (double)pr);
    out[t * OH * (1 + Q) + c / O1 * VH + j] = a->base[b] + alpha[j] * a->scale[b] * fc;
  }
  if (Q == 0) return LS_OK;
  /* The quantiles as the trainer's step made them (figures_score): at each
   * record the forecasts whose actual it is move the series' corrections
   * (prep_calib), then its own go out calibrated and wait for theirs. The
   * series' last record is no training row (it has no target): the trainer
   * serves it at the end with the corrections as they stand. */
  ls_series_stats_t st = {.model = a->model};
  prep_calib_t const cal = prep_calib(p, &st);
  for (size_t t = 0; t < (size_t)n; t++) {
    double *const row = out + t * OH * (1 + Q);
    int finite = 1;
    for (size_t j = 0; j < O1; j++) {
      finite &= isfinite(row[j]);
      a->y[j] = x[t * (size_t)p->F + (size_t)p->feat[j]];
    }
    int const moves = finite && !(end && t + 1 == (size_t)n); /* a training row's */
    if (moves) prep_calib_resolve(p, cal, rec0 + (int64_t)t, a->y, a->terms);
    const float *const o = a->pred + t * (size_t)p->W;
    prep_quantile_values(p, o, a->base + t * O1, a->scale + t * O1, a->lin + t * OH,
                         a->beta + t * OH, finite && p->gamma > 0.0 ? &cal : NULL, a->qv);
    if (moves)
      prep_calib_issue(p, cal, rec0 + (int64_t)t, a->qv, o, a->base + t * O1, a->scale + t * O1,
                       a->lin + t * OH, a->beta + t * OH);
    for (size_t q = 0; q < Q; q++)
      for (size_t k = 0; k < OH; k++)
        row[k / O1 * VH + (q + 1) * O1 + k % O1] = a->qv[q * OH + k];
  }
  return LS_OK;
}

ls_err_t audit_forecast(audit_t *a, const float *x, int64_t n, double *out) {
  LS_RETURN_IF(a == NULL || (n > 0 && (x == NULL || out == NULL)) || n < 0, LS_ERR_INVALID_ARG,
               "audit_forecast: a, x or out is NULL, or n = %lld", (long long)n);
  int64_t const T = a->info.T;
  for (int64_t at = 0; at < n; at += T) {
    int const len = (int)(n - at < T ? n - at : T);
    LS_FORWARD_IF_ERROR(window(a, x + at * a->info.F, len, at + len == n,
                               out + at * a->info.O * a->info.H * (1 + a->info.Q)));
  }
  return LS_OK;
}
