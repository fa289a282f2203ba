/*
 * Evaluating forecasts (train/ internal; `lstream report`): the rows of
 * --predictions-out files, read by their columns' names; error measures per
 * series, target, horizon and period; the report's tables, plots and page.
 *
 * The file (README, "Forecasts going out"): kind, series, partition,
 * offset, time, step, then per target X forecast_X and actual_X (X a
 * feature's index or name). Read by name, so that columns a later writer
 * adds are picked up: h (the horizon, 1 when absent) and q<level>_X (the
 * forecast of quantile `level` of target X); other columns are ignored.
 *
 * The measures of one group of forecasts f_i of actuals y_i, e_i = y_i - f_i,
 * i over the group's rows in offset order within a series:
 *   MAE  = mean |e_i|         RMSE = sqrt(mean e_i^2)
 *   bias = mean (f_i - y_i)   (above 0: the forecasts run high)
 *   sMAPE = mean 200 |e_i| / (|f_i| + |y_i|) percent (a term 0 / 0 is 0)
 *   MASE = MAE / mean |y_i - y_{i-1}|, the mean over the group's rows i
 *     that have a row i - 1 before them in their series (the in-sample
 *     naive, last value, forecast's error over the same rows); the
 *     seasonal MASE likewise with y_{i-m}, m records a season.
 * Groups: per series, target, horizon and period (the whole run, and its
 * last fifth of event time: rows whose time t > t0 + 0.8 (t1 - t0), t0 and
 * t1 the first and last time of the rows evaluated); and overall, over all
 * series, where MASE is the mean of the series' MASE (M4's convention).
 * Quantiles: coverage (the share of actuals at or below the quantile's
 * forecast) and the pinball loss mean max(l (y - q), (l - 1) (y - q)).
 */
#ifndef LSTREAM_TRAIN_EVAL_H
#define LSTREAM_TRAIN_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/keymap.h"
#include "lstream/error.h"

/* ------------------------------------------------------------------------ */
/* The rows (eval_read.c)                                                    */

enum { EVAL_NEXT = 0, EVAL_EVAL = 1 }; /* a row's kind */

typedef struct eval_rows_s {
  int O;         /* targets: each forecast_X with its actual_X */
  char **target; /* [O] X, in the first file's order */
  int Q;         /* quantile levels with a q<level>_X column for every target */
  double *level; /* [Q] ascending */
  int has_h;     /* an h column */
  int files;     /* files read */
  size_t n, cap; /* rows */
  int32_t *series;
  int8_t *kind;
  int32_t *h;
  int64_t *offset, *time, *step;
  double *f; /* [n, O] forecasts */
  double *y; /* [n, O] actuals, NaN where unknown */
  double *q; /* [n, Q, O] */
  /* Series keys as the file writes them (base/csv.h's escapes kept). */
  char **key; /* [n_keys] */
  size_t n_keys, cap_keys;
  base_keymap_t map;
} eval_rows_t;

/* Appends the rows of the file at path to r (zero-initialised before the
 * first). The first file sets the columns; every later one must have the
 * same targets and quantiles (rank files of one run). Errors name the file
 * and line: a missing column, a number that does not parse, a row of
 * another width. */
ls_err_t eval_read(eval_rows_t *r, const char *path);
void eval_rows_free(eval_rows_t *r);

/* ------------------------------------------------------------------------ */
/* The measures (eval.c)                                                     */

enum { EVAL_ALL = 0, EVAL_FINAL = 1, EVAL_PERIODS = 2 };

typedef struct eval_conf_s {
  int kind;   /* EVAL_NEXT, EVAL_EVAL, or -1: next where the files have any, else eval */
  int season; /* records per season for the seasonal MASE (0: none) */
  int bins;   /* time bins of the ratio to the last value over time */
} eval_conf_t;

void eval_conf_init(eval_conf_t *c); /* kind -1, season 24, bins 50 */

/* One group's measures; NaN where undefined (no row, no naive pair). */
typedef struct eval_stat_s {
  int64_t n; /* forecasts with an actual */
  double mae, rmse, bias, smape;
  int64_t naive_n; /* rows with a row before them in their series */
  double naive_mae, mase;
  int64_t snaive_n; /* rows with one m before */
  double snaive_mae, mase_s;
} eval_stat_t;

typedef struct eval_s {
  const eval_rows_t *rows;
  eval_conf_t conf;
  int kind;                      /* the kind evaluated */
  int64_t other_kind, no_actual; /* rows left out */
  size_t n;                      /* rows evaluated, in order [n]: by series, h, offset */
  size_t *order;
  int64_t t0, t1;   /* their first and last event time */
  double cut;       /* the last fifth: time > cut */
  int H;            /* horizons, ascending in hs [H] */
  int32_t *hs;      /* [H] */
  size_t S;         /* series evaluated, in the order of their key */
  int32_t *sid;     /* [S] their index in rows->key */
  size_t *first;    /* [S + 1] where each series' rows start in order */
  eval_stat_t *ser; /* [S, O, H, EVAL_PERIODS] */
  eval_stat_t *all; /* [O, H, EVAL_PERIODS]; mase, mase_s: the mean of the series' */
  /* Quantiles [O, H, Q, EVAL_PERIODS]. */
  int64_t *q_n;
  double *coverage, *pinball;
  /* The ratio of the forecasts' MAE to the last value's over time, per
   * target and time bin (h = the first horizon): [O, bins]. */
  double *bin_mae, *bin_naive;
  int64_t *bin_n;
} eval_t;

/* The measures of r's rows as conf says. LS_ERR_INVALID_ARG when no row of
 * the kind has an actual. */
ls_err_t eval_new(const eval_rows_t *r, const eval_conf_t *conf, eval_t **out);
void eval_free(eval_t *e); /* accepts NULL */

/* Group (series s, target j, horizon k, period p) and the overall one. */
const eval_stat_t *eval_series_stat(const eval_t *e, size_t s, int j, int k, int p);
const eval_stat_t *eval_stat(const eval_t *e, int j, int k, int p);

/* The series whose key is key (as the file writes it), or -1. */
int64_t eval_find_series(const eval_t *e, const char *key);

/* Series indices ranked by their whole-run MASE of target j at horizon
 * index k (those without one last): best first, into rank [S]. */
ls_err_t eval_rank(const eval_t *e, int j, int k, size_t *rank);

/* The last value's forecast of row i (its series' previous row at the same
 * horizon): its actual, via *y_prev; 0 when it has none. */
int eval_prev(const eval_t *e, size_t at, int j, double *y_prev);

/* ------------------------------------------------------------------------ */
/* The report (eval_out.c, eval_plot.c)                                      */

typedef struct eval_report_s {
  const char *out_dir;       /* created if missing */
  const char *const *inputs; /* [n_inputs] the files read, for the page */
  int n_inputs;
  const char *const *chosen; /* [n_chosen] series to plot (keys) */
  int n_chosen;
  int top;    /* best and worst series listed and plotted (worst) */
  int points; /* the last rows of a series a forecast plot shows */
} eval_report_t;

/* Writes into rep->out_dir: summary.md, overall.csv, series.csv,
 * ratio.csv, quantiles.csv (with quantiles), the plots (PNG) and index.html
 * (the tables and plots, nothing fetched from elsewhere). *md receives the
 * summary's Markdown (malloc'd). A chosen series not in the files is an
 * error naming it. */
ls_err_t eval_report(const eval_t *e, const eval_report_t *rep, char **md);

/* Plots (eval_plot.c), each a PNG at path. */
ls_err_t eval_plot_series(const eval_t *e, size_t s, int j, int points, const char *path);
ls_err_t eval_plot_ratio(const eval_t *e, const char *path);
ls_err_t eval_plot_errors(const eval_t *e, const char *path);
ls_err_t eval_plot_coverage(const eval_t *e, const char *path);

/* Releases what drawing text keeps for the process (cairo's font caches,
 * fontconfig's configuration): once, at the end of a program that plotted,
 * when nothing else in it draws text. */
void eval_plot_release(void);

#endif /* LSTREAM_TRAIN_EVAL_H */
