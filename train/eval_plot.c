/*
 * The report's plots (train/eval.h, "The report"), drawn with cairo into
 * PNG files: a small chart (axes with round ticks, dates on a time axis,
 * lines, bands, bars, a legend) and the four plots made of it. cairo was
 * measured against PLplot and gnuplot (README, "Seeing the forecasts"):
 * it returns every error as a status, where PLplot's plexit() prints and
 * exits the process, and gnuplot is a program started per plot.
 */
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eval.h"

/* Image size (pixels) and margins of the plot area. */
#define IMG_W    900
#define IMG_H    420
#define MARGIN_L 78
#define MARGIN_R 24
#define MARGIN_T 62
#define MARGIN_B 58
#define FONT     12.0

typedef struct rgba_s {
  double r, g, b, a;
} rgba_t;

static const rgba_t C_ACTUAL = {0.13, 0.13, 0.13, 1}, C_FORECAST = {0.12, 0.47, 0.71, 1};
static const rgba_t C_NAIVE = {1.0, 0.50, 0.05, 1}, C_BAND = {0.12, 0.47, 0.71, 0.18};
static const rgba_t C_GRID = {0.88, 0.88, 0.88, 1}, C_TEXT = {0.1, 0.1, 0.1, 1};
static const rgba_t C_SERIES[] = {
    {0.12, 0.47, 0.71, 1}, {0.84, 0.15, 0.16, 1}, {0.17, 0.63, 0.17, 1}, {0.58, 0.40, 0.74, 1}};

typedef struct chart_s {
  cairo_surface_t *surf;
  cairo_t *cr;
  double x0, x1, y0, y1; /* data ranges */
  double px0, px1, py0, py1;
  int legend; /* the legend's width so far (pixels) */
} chart_t;

/* ------------------------------------------------------------------------ */
/* A chart                                                                   */

static void color(cairo_t *cr, rgba_t c) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a);
}

static double px(const chart_t *c, double x) {
  return c->px0 + (x - c->x0) / (c->x1 - c->x0) * (c->px1 - c->px0);
}
static double py(const chart_t *c, double y) {
  return c->py0 - (y - c->y0) / (c->y1 - c->y0) * (c->py0 - c->py1);
}

static void text(cairo_t *cr, double x, double y, const char *s, double align, double size) {
  cairo_text_extents_t ext;
  cairo_set_font_size(cr, size);
  cairo_text_extents(cr, s, &ext);
  cairo_move_to(cr, x - align * ext.x_advance, y);
  cairo_show_text(cr, s);
}

/* A round step of about span / n: 1, 2 or 5 times a power of ten. */
static double nice_step(double span, int n) {
  double const raw = span / n, p = pow(10.0, floor(log10(raw))), m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* A step of event time (ms) of about span / n, and the label's format. */
static double time_step(double span, const char **fmt) {
  static const double steps[] = {1e3,     5e3,         15e3,         60e3,         300e3,
                                 900e3,   3600e3,      3 * 3600e3,   6 * 3600e3,   12 * 3600e3,
                                 86400e3, 7 * 86400e3, 30 * 86400e3, 365 * 86400e3};
  size_t i = 0;
  while (i + 1 < sizeof steps / sizeof steps[0] && span / steps[i] > 8)
    i++;
  double const s = steps[i];
  *fmt = s < 60e3 ? "%H:%M:%S" : s < 86400e3 ? "%m-%d %H:%M" : "%Y-%m-%d";
  return s;
}

static void x_ticks(chart_t *c, int time_x) {
  cairo_t *const cr = c->cr;
  const char *fmt = NULL;
  double const step = time_x ? time_step(c->x1 - c->x0, &fmt) : nice_step(c->x1 - c->x0, 6);
  for (double v = ceil(c->x0 / step) * step; v <= c->x1 + 1e-9 * step; v += step) {
    char label[40];
    if (time_x) {
      time_t const t = (time_t)floor(v / 1e3);
      struct tm tm;
      gmtime_r(&t, &tm);
      strftime(label, sizeof label, fmt, &tm);
    } else {
      snprintf(label, sizeof label, "%g", fabs(v) < 1e-12 * step ? 0.0 : v);
    }
    color(cr, C_GRID);
    cairo_move_to(cr, px(c, v), c->py0);
    cairo_line_to(cr, px(c, v), c->py1);
    cairo_stroke(cr);
    color(cr, C_TEXT);
    text(cr, px(c, v), c->py0 + 16, label, 0.5, FONT - 1);
  }
}

static void y_ticks(chart_t *c) {
  cairo_t *const cr = c->cr;
  double const step = nice_step(c->y1 - c->y0, 5);
  for (double v = ceil(c->y0 / step) * step; v <= c->y1 + 1e-9 * step; v += step) {
    char label[40];
    snprintf(label, sizeof label, "%.6g", fabs(v) < 1e-12 * step ? 0.0 : v);
    color(cr, C_GRID);
    cairo_move_to(cr, c->px0, py(c, v));
    cairo_line_to(cr, c->px1, py(c, v));
    cairo_stroke(cr);
    color(cr, C_TEXT);
    text(cr, c->px0 - 6, py(c, v) + 4, label, 1.0, FONT - 1);
  }
}

/* Widens a range that is empty or not finite. */
static void settle_range(double *lo, double *hi) {
  if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
  if (*hi <= *lo) {
    double const d = *lo != 0 ? fabs(*lo) * 0.05 : 1.0;
    *lo -= d, *hi += d;
  }
}

/* A chart over [x0, x1] x [y0, y1] (the y range padded by 5%). */
static ls_err_t chart_begin(chart_t *c, const char *title, const char *xlabel, const char *ylabel,
                            double x0, double x1, double y0, double y1, int time_x) {
  memset(c, 0, sizeof *c);
  settle_range(&x0, &x1);
  settle_range(&y0, &y1);
  double const pad = 0.05 * (y1 - y0);
  c->x0 = x0, c->x1 = x1, c->y0 = y0 - pad, c->y1 = y1 + pad;
  c->px0 = MARGIN_L, c->px1 = IMG_W - MARGIN_R, c->py0 = IMG_H - MARGIN_B, c->py1 = MARGIN_T;
  c->surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, IMG_W, IMG_H);
  c->cr = cairo_create(c->surf);
  cairo_status_t const st = cairo_status(c->cr);
  LS_RETURN_IF(st != CAIRO_STATUS_SUCCESS, LS_ERR_NOMEM, "cannot draw a plot: %s",
               cairo_status_to_string(st));
  cairo_t *const cr = c->cr;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_line_width(cr, 1.0);
  x_ticks(c, time_x);
  y_ticks(c);
  color(cr, C_TEXT);
  cairo_rectangle(cr, c->px0, c->py1, c->px1 - c->px0, c->py0 - c->py1);
  cairo_stroke(cr);
  text(cr, IMG_W / 2.0, 24, title, 0.5, FONT + 3);
  text(cr, (c->px0 + c->px1) / 2, IMG_H - 14, xlabel, 0.5, FONT);
  cairo_save(cr);
  cairo_translate(cr, 18, (c->py0 + c->py1) / 2);
  cairo_rotate(cr, -M_PI / 2);
  text(cr, 0, 0, ylabel, 0.5, FONT);
  cairo_restore(cr);
  return LS_OK;
}

/* A polyline of the finite points; dash > 0: dashed. */
static void chart_line(chart_t *c, const double *x, const double *y, size_t n, rgba_t col,
                       double width, double dash) {
  cairo_t *const cr = c->cr;
  cairo_save(cr);
  cairo_rectangle(cr, c->px0, c->py1, c->px1 - c->px0, c->py0 - c->py1);
  cairo_clip(cr);
  color(cr, col);
  cairo_set_line_width(cr, width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  if (dash > 0) cairo_set_dash(cr, &dash, 1, 0);
  int open = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(x[i]) || !isfinite(y[i])) {
      open = 0;
      continue;
    }
    if (open)
      cairo_line_to(cr, px(c, x[i]), py(c, y[i]));
    else
      cairo_move_to(cr, px(c, x[i]), py(c, y[i]));
    open = 1;
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

static void chart_points(chart_t *c, const double *x, const double *y, size_t n, rgba_t col) {
  color(c->cr, col);
  for (size_t i = 0; i < n; i++)
    if (isfinite(x[i]) && isfinite(y[i])) {
      cairo_arc(c->cr, px(c, x[i]), py(c, y[i]), 4.0, 0, 2 * M_PI);
      cairo_fill(c->cr);
    }
}

/* The area between lo and hi over x. */
static void chart_band(chart_t *c, const double *x, const double *lo, const double *hi, size_t n,
                       rgba_t col) {
  if (n == 0) return;
  cairo_t *const cr = c->cr;
  cairo_move_to(cr, px(c, x[0]), py(c, lo[0]));
  for (size_t i = 1; i < n; i++)
    cairo_line_to(cr, px(c, x[i]), py(c, lo[i]));
  for (size_t i = n; i-- > 0;)
    cairo_line_to(cr, px(c, x[i]), py(c, hi[i]));
  cairo_close_path(cr);
  color(cr, col);
  cairo_fill(cr);
}

/* Bars of height v[i] over [edge[i], edge[i + 1]]. */
static void chart_bars(chart_t *c, const double *edge, const double *v, size_t n, rgba_t col,
                       int filled) {
  cairo_t *const cr = c->cr;
  color(cr, col);
  cairo_set_line_width(cr, 1.5);
  for (size_t i = 0; i < n; i++) {
    cairo_rectangle(cr, px(c, edge[i]), py(c, v[i]), px(c, edge[i + 1]) - px(c, edge[i]),
                    py(c, c->y0 > 0 ? c->y0 : 0.0) - py(c, v[i]));
    if (filled)
      cairo_fill(cr);
    else
      cairo_stroke(cr);
  }
}

static void chart_hline(chart_t *c, double y, rgba_t col) {
  double const xs[2] = {c->x0, c->x1}, ys[2] = {y, y};
  chart_line(c, xs, ys, 2, col, 1.2, 5.0);
}

/* A legend entry, in a row above the plot area from its left. */
static void chart_legend(chart_t *c, const char *name, rgba_t col) {
  cairo_text_extents_t ext;
  cairo_set_font_size(c->cr, FONT);
  cairo_text_extents(c->cr, name, &ext);
  double const x = c->px0 + c->legend, y = c->py1 - 10;
  color(c->cr, col);
  cairo_rectangle(c->cr, x, y - 8, 18, 8);
  cairo_fill(c->cr);
  color(c->cr, C_TEXT);
  text(c->cr, x + 24, y, name, 0.0, FONT);
  c->legend += (int)(24 + ext.x_advance + 22);
}

static ls_err_t chart_end(chart_t *c, const char *path) {
  cairo_status_t st = cairo_status(c->cr);
  cairo_destroy(c->cr);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(c->surf, path);
  cairo_surface_destroy(c->surf);
  LS_RETURN_IF(st != CAIRO_STATUS_SUCCESS, LS_ERR_IO, "%s: cannot write the plot: %s", path,
               cairo_status_to_string(st));
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The plots                                                                 */

static void extend(double v, double *lo, double *hi) {
  if (!isfinite(v)) return;
  *lo = v < *lo ? v : *lo;
  *hi = v > *hi ? v : *hi;
}

/* Forecasts against actuals: the series' last `points` rows of target j
 * at the first horizon, with the outer quantiles' band. */
static void series_data(const eval_t *e, size_t s, int points, size_t *from, size_t *n) {
  const eval_rows_t *const r = e->rows;
  size_t end = e->first[s];
  while (end < e->first[s + 1] && r->h[e->order[end]] == e->hs[0])
    end++;
  *n = end - e->first[s] > (size_t)points ? (size_t)points : end - e->first[s];
  *from = end - *n;
}

ls_err_t eval_plot_series(const eval_t *e, size_t s, int j, int points, const char *path) {
  LS_RETURN_IF(e == NULL || path == NULL || s >= e->S || j < 0 || j >= e->rows->O || points < 2,
               LS_ERR_INVALID_ARG, "eval_plot_series: no series %zu or target %d", s, j);
  const eval_rows_t *const r = e->rows;
  size_t from = 0, n = 0;
  size_t const O = (size_t)r->O, Q = (size_t)r->Q;
  series_data(e, s, points, &from, &n);
  double *const buf = calloc(5 * (n ? n : 1), sizeof *buf);
  LS_RETURN_IF(buf == NULL, LS_ERR_NOMEM, "no memory for a plot of %zu points", n);
  double *const x = buf, *const y = buf + n, *const f = buf + 2 * n, *const lo = buf + 3 * n;
  double *const hi = buf + 4 * n, ylo = INFINITY, yhi = -INFINITY;
  for (size_t a = 0; a < n; a++) {
    size_t const i = e->order[from + a];
    x[a] = (double)r->time[i], y[a] = r->y[i * O + (size_t)j], f[a] = r->f[i * O + (size_t)j];
    lo[a] = Q >= 2 ? r->q[(i * Q) * O + (size_t)j] : NAN;
    hi[a] = Q >= 2 ? r->q[(i * Q + Q - 1) * O + (size_t)j] : NAN;
    extend(y[a], &ylo, &yhi), extend(f[a], &ylo, &yhi);
    extend(lo[a], &ylo, &yhi), extend(hi[a], &ylo, &yhi);
  }
  char title[400];
  snprintf(title, sizeof title, "%.200s, target %.60s: forecast vs actual (last %zu)",
           r->key[e->sid[s]], r->target[j], n);
  chart_t c;
  ls_err_t err = chart_begin(&c, title, "event time of the record each forecast follows (UTC)",
                             "value", n ? x[0] : 0, n ? x[n - 1] : 1, ylo, yhi, 1);
  if (err == LS_OK) {
    if (Q >= 2) chart_band(&c, x, lo, hi, n, C_BAND);
    chart_line(&c, x, y, n, C_ACTUAL, 1.6, 0);
    chart_line(&c, x, f, n, C_FORECAST, 1.6, 0);
    chart_legend(&c, "actual", C_ACTUAL);
    chart_legend(&c, "forecast", C_FORECAST);
    if (Q >= 2) chart_legend(&c, "outer quantiles", C_BAND);
  }
  ls_err_t const end = chart_end(&c, path);
  free(buf);
  return err != LS_OK ? err : end;
}

/* The forecasts' MAE over the last value's per time bin, per target. */
ls_err_t eval_plot_ratio(const eval_t *e, const char *path) {
  LS_RETURN_IF(e == NULL || path == NULL || e->conf.bins < 1, LS_ERR_INVALID_ARG,
               "eval_plot_ratio: e or path is NULL, or no bins");
  int const O = e->rows->O, B = e->conf.bins;
  double *const x = malloc(2 * (size_t)B * sizeof *x), *const v = x ? x + B : NULL;
  LS_RETURN_IF(x == NULL, LS_ERR_NOMEM, "no memory for a plot of %d bins", B);
  double const span = (double)(e->t1 - e->t0) + 1.0;
  double lo = 1.0, hi = 1.0;
  for (int j = 0; j < O; j++)
    for (int b = 0; b < B; b++) {
      size_t const at = (size_t)j * (size_t)B + (size_t)b;
      extend(e->bin_n[at] ? e->bin_mae[at] / e->bin_naive[at] : NAN, &lo, &hi);
    }
  hi = hi > 3.0 ? 3.0 : hi; /* a bin of a near-zero last value's error: the axis stays readable */
  chart_t c;
  ls_err_t err = chart_begin(&c, "Error ratio to the last value over time (MAE / last value's MAE)",
                             "event time (UTC)", "ratio", (double)e->t0, (double)e->t1, lo, hi, 1);
  for (int j = 0; j < O && err == LS_OK; j++) {
    for (int b = 0; b < B; b++) {
      size_t const at = (size_t)j * (size_t)B + (size_t)b;
      x[b] = (double)e->t0 + (b + 0.5) * span / B;
      v[b] = e->bin_n[at] ? e->bin_mae[at] / e->bin_naive[at] : NAN;
    }
    rgba_t const col = C_SERIES[j % 4];
    chart_line(&c, x, v, (size_t)B, col, 2.0, 0);
    chart_points(&c, x, v, (size_t)B, col);
    char name[80];
    snprintf(name, sizeof name, "target %.60s", e->rows->target[j]);
    chart_legend(&c, name, col);
  }
  if (err == LS_OK) chart_hline(&c, 1.0, C_NAIVE);
  ls_err_t const end = chart_end(&c, path);
  free(x);
  return err != LS_OK ? err : end;
}

/* Histogram bins of the errors, in units of each series' last-value MAE. */
#define HIST_BINS 60
#define HIST_MAX  4.0

/* The shares of the model's (hm) and the last value's (hn) scaled errors
 * per bin, every target and series at the first horizon. */
static void histograms(const eval_t *e, double *hm, double *hn) {
  const eval_rows_t *const r = e->rows;
  size_t const O = (size_t)r->O;
  double nm = 0, nn = 0;
  for (size_t s = 0; s < e->S; s++)
    for (int j = 0; j < r->O; j++) {
      double const scale = eval_series_stat(e, s, j, 0, EVAL_ALL)->naive_mae;
      if (!(scale > 0)) continue;
      for (size_t a = e->first[s]; a < e->first[s + 1] && r->h[e->order[a]] == e->hs[0]; a++) {
        size_t const i = e->order[a];
        double const y = r->y[i * O + (size_t)j], em = (y - r->f[i * O + (size_t)j]) / scale;
        double prev;
        int const bm = (int)floor((em + HIST_MAX) / (2 * HIST_MAX) * HIST_BINS);
        if (bm >= 0 && bm < HIST_BINS) hm[bm]++;
        nm++;
        if (!eval_prev(e, a, j, &prev)) continue;
        int const bn = (int)floor(((y - prev) / scale + HIST_MAX) / (2 * HIST_MAX) * HIST_BINS);
        if (bn >= 0 && bn < HIST_BINS) hn[bn]++;
        nn++;
      }
    }
  for (int b = 0; b < HIST_BINS; b++)
    hm[b] = nm > 0 ? hm[b] / nm : 0, hn[b] = nn > 0 ? hn[b] / nn : 0;
}

ls_err_t eval_plot_errors(const eval_t *e, const char *path) {
  LS_RETURN_IF(e == NULL || path == NULL, LS_ERR_INVALID_ARG, "eval_plot_errors: NULL argument");
  double edge[HIST_BINS + 1], hm[HIST_BINS] = {0}, hn[HIST_BINS] = {0}, top = 0;
  histograms(e, hm, hn);
  for (int b = 0; b <= HIST_BINS; b++)
    edge[b] = -HIST_MAX + 2 * HIST_MAX * b / HIST_BINS;
  for (int b = 0; b < HIST_BINS; b++)
    top = fmax(top, fmax(hm[b], hn[b]));
  chart_t c;
  ls_err_t const err = chart_begin(&c, "Distribution of the errors (actual - forecast)",
                                   "error / the series' last-value MAE", "share of forecasts",
                                   -HIST_MAX, HIST_MAX, 0.0, top > 0 ? top : 1.0, 0);
  if (err == LS_OK) {
    chart_bars(&c, edge, hm, HIST_BINS, (rgba_t){C_FORECAST.r, C_FORECAST.g, C_FORECAST.b, 0.6}, 1);
    chart_bars(&c, edge, hn, HIST_BINS, C_NAIVE, 0);
    chart_legend(&c, "forecast", C_FORECAST);
    chart_legend(&c, "last value", C_NAIVE);
  }
  ls_err_t const end = chart_end(&c, path);
  return err != LS_OK ? err : end;
}

/* Coverage against the nominal level per quantile (whole run, first
 * horizon), one set of points per target. */
ls_err_t eval_plot_coverage(const eval_t *e, const char *path) {
  LS_RETURN_IF(e == NULL || path == NULL || e->rows->Q < 1, LS_ERR_INVALID_ARG,
               "eval_plot_coverage: no quantiles to plot");
  int const Q = e->rows->Q;
  double *const x = malloc(2 * (size_t)Q * sizeof *x), *const v = x ? x + Q : NULL;
  LS_RETURN_IF(x == NULL, LS_ERR_NOMEM, "no memory for %d quantiles", Q);
  chart_t c;
  ls_err_t const err = chart_begin(&c, "Coverage of the quantile forecasts against nominal",
                                   "nominal level", "share of actuals at or below", 0, 1, 0, 1, 0);
  double const diag[2] = {0, 1};
  if (err == LS_OK) chart_line(&c, diag, diag, 2, C_NAIVE, 1.2, 5.0);
  for (int j = 0; j < e->rows->O && err == LS_OK; j++) {
    for (int q = 0; q < Q; q++) {
      x[q] = e->rows->level[q];
      v[q] = e->coverage[(((size_t)j * (size_t)e->H) * (size_t)Q + (size_t)q) * EVAL_PERIODS];
    }
    chart_line(&c, x, v, (size_t)Q, C_SERIES[j % 4], 1.5, 0);
    chart_points(&c, x, v, (size_t)Q, C_SERIES[j % 4]);
    char name[80];
    snprintf(name, sizeof name, "target %.60s", e->rows->target[j]);
    chart_legend(&c, name, C_SERIES[j % 4]);
  }
  ls_err_t const end = chart_end(&c, path);
  free(x);
  return err != LS_OK ? err : end;
}

void eval_plot_release(void) {
  cairo_debug_reset_static_data();
  FcFini();
}
