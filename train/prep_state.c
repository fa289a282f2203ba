/*
 * A series' model state in ls_series_stats_t.model (train/prep.h): its
 * width, the calibration's place in it (and the quantile levels, whose
 * count sizes it), and a snapshot's state of an earlier layout taken into
 * this one's (the calibration younger than the snapshot zeroed, the linear
 * path's sums of before 2026-11-28's eighth session packed:
 * season_pack_full).
 */
#include <stdlib.h>
#include <string.h>

#include "prep.h"

ls_err_t prep_parse_quantiles(const char *text, double *levels, int *Q) {
  *Q = 0;
  for (const char *s = text; *s != '\0';) {
    char *end = NULL;
    double const l = strtod(s, &end);
    LS_RETURN_IF(end == s || (*end != ',' && *end != '\0') || !(l > 0.0 && l < 1.0) ||
                     (*Q > 0 && !(l > levels[*Q - 1])) || *Q == PREP_QUANTILES_MAX,
                 LS_ERR_INVALID_ARG,
                 "quantiles '%s': up to %d levels in (0, 1), ascending, such as 0.1,0.5,0.9", text,
                 PREP_QUANTILES_MAX);
    levels[(*Q)++] = l;
    s = *end ? end + 1 : end;
    LS_RETURN_IF(*end == ',' && *s == '\0', LS_ERR_INVALID_ARG,
                 "quantiles '%s' ends with a comma: give levels such as 0.1,0.5,0.9", text);
  }
  return LS_OK;
}

size_t prep_model_width(const prep_t *p) {
  return season_width(p->sea) + (p->W > p->O ? (size_t)p->W : 0) +
         prep_calib_width(p->Q, p->O, p->H);
}

/* The spread scale's doubles: heldp and sums. */
static size_t scale_width(size_t o, size_t h) {
  return 2 * o * h * (h + 1) / 2 + 3 * o * h;
}

size_t prep_calib_width(int Q, int O, int H) {
  size_t const q = (size_t)Q, o = (size_t)O, h = (size_t)H;
  return q > 0 ? q * o * h + h + q * o * h * (h + 1) / 2 + scale_width(o, h) : 0;
}

prep_calib_t prep_calib(const prep_t *p, const ls_series_stats_t *st) {
  double *const at = st->model + season_width(p->sea) + (size_t)p->W;
  size_t const QOH = (size_t)p->Q * (size_t)p->OH, tri = (size_t)p->H * (size_t)(p->H + 1) / 2;
  double *const held = at + QOH + (size_t)p->H;
  double *const heldp = held + (size_t)p->Q * (size_t)p->O * tri;
  return (prep_calib_t){at, at + QOH, held, heldp, heldp + 2 * (size_t)p->O * tri};
}

/* The calibration's doubles that a snapshot of before it (*whole) or of
 * before its scale (*scale) lacks (0, 0: no calibration). */
static void calib_young_widths(const ls_train_conf_t *c, int O, size_t *whole, size_t *scale) {
  double levels[PREP_QUANTILES_MAX];
  int Q = 0;
  *whole = *scale = 0;
  if (prep_parse_quantiles(c->quantiles, levels, &Q) != LS_OK) return; /* refused before */
  size_t const H = (size_t)(c->horizon > 1 ? c->horizon : 1);
  *whole = prep_calib_width(Q, O, (int)H);
  *scale = *whole > 0 ? scale_width((size_t)O, H) : 0;
}

void prep_calib_young(const ls_train_conf_t *c, int O, ls_series_stats_t *dst,
                      const ls_series_stats_t *src) {
  size_t whole, scale;
  calib_young_widths(c, O, &whole, &scale);
  size_t young = whole;
  if (young == 0) return;
  if (src->model_n + young != dst->model_n) young = scale; /* the scale's */
  if (src->model_n + young != dst->model_n) return;
  memset(dst->model + src->model_n, 0, young * sizeof *dst->model);
  dst->model_n = src->model_n;
}

ls_err_t prep_model_adopt(const ls_train_conf_t *c, const season_t *sea, int O,
                          ls_series_stats_t *dst, ls_series_stats_t *src, double **buf) {
  *buf = NULL;
  size_t whole, scale;
  calib_young_widths(c, O, &whole, &scale);
  size_t const extra = season_full_extra(sea), n = src->model_n - extra, blocks = season_width(sea);
  int const now = src->model_n == dst->model_n ||
                  (whole > 0 && src->model_n + whole == dst->model_n) ||
                  (scale > 0 && src->model_n + scale == dst->model_n);
  int const old = extra > 0 && src->model_n >= blocks + extra &&
                  (n == dst->model_n || (whole > 0 && n + whole == dst->model_n) ||
                   (scale > 0 && n + scale == dst->model_n));
  if (!now && old) {
    double *const b = malloc(n * sizeof *b);
    LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for a series' linear path");
    season_pack_full(sea, src->model, b);
    memcpy(b + blocks, src->model + blocks + extra, (n - blocks) * sizeof *b);
    src->model = b, src->model_n = n;
    *buf = b;
  }
  prep_calib_young(c, O, dst, src);
  return LS_OK;
}

size_t prep_calib_heldp(const prep_t *p, int j, int h, int64_t s) {
  size_t const tri = (size_t)p->H * (size_t)(p->H + 1) / 2;
  return 2 * ((size_t)j * tri + (size_t)(h - 1) * (size_t)h / 2 + (size_t)(s % h));
}

size_t prep_calib_held(const prep_t *p, int q, int j, int h, int64_t s) {
  size_t const tri = (size_t)p->H * (size_t)(p->H + 1) / 2;
  return ((size_t)q * (size_t)p->O + (size_t)j) * tri + (size_t)(h - 1) * (size_t)h / 2 +
         (size_t)(s % h);
}

ls_err_t prep_stats_adopt(const ls_train_conf_t *c, const season_t *sea, int F, int O,
                          ls_series_stats_t *dst, ls_series_stats_t src) {
  double *packed = NULL;
  LS_FORWARD_IF_ERROR(prep_model_adopt(c, sea, O, dst, &src, &packed));
  ls_err_t const err = ls_series_stats_copy(dst, &src, F, O);
  free(packed);
  return err;
}
