/*
 * The per-series online normaliser (include/lstream/state.h, "Normaliser"):
 * per feature, an exponentially weighted location and scale of a series'
 * levels and a scale of its changes, from the series' own past only, with a
 * warm-up (a running mean until 1/N), a floor on the scales and a clamp on
 * what comes out. The arithmetic is tests/bench/realdata/FINDINGS.md's,
 * section 4.1, in double.
 */
#include <math.h>

#include "lstream/state.h"

void ls_norm_conf_init(ls_norm_conf_t *conf) {
  if (conf == NULL) return;
  *conf = (ls_norm_conf_t){256, 1e-6, 1e-12, 10.0};
}

ls_err_t ls_norm_conf_check(const ls_norm_conf_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "normaliser configuration is NULL");
  LS_RETURN_IF(c->window < 1, LS_ERR_INVALID_ARG,
               "normaliser window %d: at least 1 record (the weight of a record is 1/window once "
               "warmed up)",
               c->window);
  LS_RETURN_IF(!(c->floor_rel >= 0.0 && c->floor_rel < 1.0) || !(c->floor_abs > 0.0) ||
                   !isfinite(c->floor_abs),
               LS_ERR_INVALID_ARG,
               "normaliser floors %g (relative, in [0, 1)) and %g (absolute, > 0 and finite)",
               c->floor_rel, c->floor_abs);
  LS_RETURN_IF(!(c->clip > 0.0), LS_ERR_INVALID_ARG, "normaliser clip %g: it must be > 0", c->clip);
  return LS_OK;
}

double ls_norm_clamp(const ls_norm_conf_t *c, double v) {
  double const k = c != NULL ? c->clip : 0.0;
  return v > k ? k : v < -k ? -k : v;
}

/* Consumes x into one feature's stats {m, v, q, prev} as the series' t-th
 * record; returns the previous value (x itself for t = 0). */
static double consume(const ls_norm_conf_t *c, int64_t t, double *st, double x) {
  double const N = (double)c->window;
  double const a = fmax(1.0 / (double)(t + 1), 1.0 / N);
  double const d = x - st[0];
  st[0] += a * d;
  st[1] = (1.0 - a) * (st[1] + a * d * d);
  double const prev = t > 0 ? st[3] : x;
  if (t > 0) {
    double const b = fmax(1.0 / (double)t, 1.0 / N);
    double const ch = x - prev;
    st[2] += b * (ch * ch - st[2]);
  }
  st[3] = x;
  return prev;
}

ls_err_t ls_norm_consume(const ls_norm_conf_t *c, int F, int64_t *n, double *stats, const float *x,
                         ls_norm_row_t *out) {
  LS_RETURN_IF(c == NULL || n == NULL || stats == NULL || x == NULL, LS_ERR_INVALID_ARG,
               "normaliser: conf, n, stats and x must not be NULL");
  LS_RETURN_IF(F < 1 || *n < 0, LS_ERR_INVALID_ARG,
               "normaliser: %d features, %lld records consumed", F, (long long)*n);
  int64_t const t = *n;
  for (int f = 0; f < F; f++) {
    double *const st = stats + (size_t)f * LS_NORM_STATS;
    double const xf = (double)x[f];
    double const prev = consume(c, t, st, xf);
    double const floor = c->floor_rel * fabs(st[0]) + c->floor_abs;
    double const s = fmax(sqrt(st[1]), floor);
    double const ds = t > 0 ? fmax(sqrt(st[2]), floor) : s;
    if (out == NULL) continue;
    if (out->level != NULL) out->level[f] = (float)ls_norm_clamp(c, (xf - st[0]) / s);
    if (out->change != NULL)
      out->change[f] = t > 0 ? (float)ls_norm_clamp(c, (xf - prev) / ds) : 0.0f;
    if (out->scale != NULL) out->scale[f] = s;
    if (out->dscale != NULL) out->dscale[f] = ds;
  }
  *n = t + 1;
  return LS_OK;
}
