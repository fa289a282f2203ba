/*
 * A series' model state in ls_series_stats_t.model (train/prep.h): its
 * width, the calibration's place in it (and the quantile levels, whose
 * count sizes it), its layout's version in snapshots, and a snapshot's
 * state of an earlier layout taken into this one's (the calibration
 * younger than the snapshot zeroed, the linear path's sums of layout 1
 * packed: season_pack_full).
 *
 * Section LS_SNAPSHOT_SECTION_SERIES_MODEL (required: an lstream that does
 * not know it would read the doubles in another layout), version
 * PREP_MODEL_LAYOUT, no content: the layout of the snapshot's series_model
 * section. Version 2 (2026-11-28, eighth session): the linear path's sums
 * as their upper triangle (season_tri_at). A snapshot without the section
 * is of layout 1: the sums whole, K x K.
 */
#include <stdint.h>
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

/* The calibration's doubles a snapshot's series state of n doubles lacks
 * against this run's X (c's settings, O targets): 0 when n == X, all of it
 * (a snapshot of before it) or its scale's (before the scale) when that
 * makes up the difference, else SIZE_MAX. */
static size_t calib_missing(const ls_train_conf_t *c, int O, size_t n, size_t X) {
  double levels[PREP_QUANTILES_MAX];
  int Q = 0;
  if (n == X) return 0;
  if (prep_parse_quantiles(c->quantiles, levels, &Q) != LS_OK) return SIZE_MAX; /* refused before */
  size_t const H = (size_t)(c->horizon > 1 ? c->horizon : 1),
               whole = prep_calib_width(Q, O, (int)H);
  if (whole > 0 && n + whole == X) return whole;
  if (whole > 0 && n + scale_width((size_t)O, H) == X) return scale_width((size_t)O, H);
  return SIZE_MAX;
}

void prep_calib_young(const ls_train_conf_t *c, int O, ls_series_stats_t *dst,
                      const ls_series_stats_t *src) {
  size_t const young = calib_missing(c, O, src->model_n, dst->model_n);
  if (young == 0 || young == SIZE_MAX) return;
  memset(dst->model + src->model_n, 0, young * sizeof *dst->model);
  dst->model_n = src->model_n;
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

ls_err_t prep_layout_put(ls_snapshot_t *snap) {
  return ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_SERIES_MODEL, PREP_MODEL_LAYOUT,
                                 LS_SNAPSHOT_REQUIRED, NULL, 0);
}

ls_err_t prep_adopt_begin(const ls_train_conf_t *c, int O, size_t X, const ls_snapshot_t *snap,
                          prep_adopt_t *out) {
  *out = (prep_adopt_t){c, NULL, O, 1};
  LS_FORWARD_IF_ERROR(O > 0 ? season_new(c, O, &out->sea) : LS_OK);
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  size_t const n = ls_snapshot_model_width(snap);
  if (ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_SERIES_MODEL, &version, &data, &bytes) ==
      LS_OK)
    out->layout = (int)version;
  /* Without the section: layout 1, or 2 as lstream wrote it on 2026-11-28
   * before it kept the section (tests/state/golden/v6-packed), whose width
   * tells them apart (layout 1's is season_full_extra more). */
  else if (season_full_extra(out->sea) > 0 && calib_missing(c, O, n, X) != SIZE_MAX)
    out->layout = 2;
  LS_RETURN_IF(out->layout < 1 || out->layout > PREP_MODEL_LAYOUT, LS_ERR_UNSUPPORTED,
               "the snapshot's series keep their seasons and linear path in layout %d; this "
               "lstream reads layouts 1 to %d (written by a later lstream? resume with it)",
               out->layout, PREP_MODEL_LAYOUT);
  return LS_OK;
}

void prep_adopt_end(prep_adopt_t *ad) {
  season_free(ad->sea);
  ad->sea = NULL;
}

ls_err_t prep_model_adopt(const prep_adopt_t *ad, ls_series_stats_t *dst, ls_series_stats_t *src,
                          double **buf) {
  *buf = NULL;
  size_t const extra = ad->layout < 2 ? season_full_extra(ad->sea) : 0;
  if (extra > 0) { /* layout 1: the linear path's sums whole */
    size_t const blocks = season_width(ad->sea);
    LS_RETURN_IF(src->model_n < blocks + extra, LS_ERR_CORRUPT,
                 "the snapshot's series keep %zu doubles of seasons and linear path, its "
                 "settings make %zu in its layout (1)",
                 src->model_n, blocks + extra);
    size_t const n = src->model_n - extra;
    double *const b = malloc(n * sizeof *b);
    LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for a series' linear path");
    season_pack_full(ad->sea, src->model, b);
    memcpy(b + blocks, src->model + blocks + extra, (n - blocks) * sizeof *b);
    src->model = b, src->model_n = n;
    *buf = b;
  }
  prep_calib_young(ad->c, ad->O, dst, src);
  return LS_OK;
}

ls_err_t prep_stats_adopt(const prep_adopt_t *ad, int F, ls_series_stats_t *dst,
                          ls_series_stats_t src) {
  double *packed = NULL;
  LS_FORWARD_IF_ERROR(prep_model_adopt(ad, dst, &src, &packed));
  ls_err_t const err = ls_series_stats_copy(dst, &src, F, ad->O);
  free(packed);
  return err;
}
