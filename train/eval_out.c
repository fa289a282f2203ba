/*
 * The report's files (train/eval.h, "The report"): the tables as CSV (every
 * number to the last bit, %.17g; empty where undefined), the summary as
 * Markdown, the plots, and one HTML page holding the tables and the plots
 * (relative links to the PNGs beside it, no script, no outside resource:
 * it reads offline).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "eval.h"
#include "monitor.h" /* monitor_text_t: a growable text */

static const char *const period_names[EVAL_PERIODS] = {"all", "final"};
static const char *const period_titles[EVAL_PERIODS] = {"whole run", "last fifth"};

/* A plot written: its file name and caption. */
typedef struct plot_s {
  char file[64];
  char caption[400];
} plot_t;

typedef struct out_s {
  const eval_t *e;
  const eval_report_t *rep;
  plot_t *plots;
  int n_plots;
  size_t *rank; /* [S] by MASE of target 0, first horizon */
} out_t;

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */

static void csv_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, ",%.17g", v);
  else
    fputs(",", f);
}

/* Text as one CSV field (RFC 4180 quoting where it needs it). */
static void csv_text(FILE *f, const char *s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void csv_stat(FILE *f, const eval_stat_t *s) {
  fprintf(f, ",%lld", (long long)s->n);
  csv_num(f, s->mae), csv_num(f, s->rmse), csv_num(f, s->mase), csv_num(f, s->mase_s);
  csv_num(f, s->smape), csv_num(f, s->bias), csv_num(f, s->naive_mae);
  fputc('\n', f);
}

#define STAT_HEAD "n,mae,rmse,mase,mase_seasonal,smape,bias,naive_mae\n"

static ls_err_t open_out(const out_t *o, const char *name, FILE **f, char *path, size_t size) {
  snprintf(path, size, "%s/%s", o->rep->out_dir, name);
  *f = fopen(path, "w");
  LS_RETURN_IF(*f == NULL, LS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  return LS_OK;
}

static ls_err_t close_out(FILE *f, const char *path) {
  int const bad = ferror(f);
  LS_RETURN_IF(fclose(f) != 0 || bad, LS_ERR_IO, "%s: write failed", path);
  return LS_OK;
}

static ls_err_t write_tables(const out_t *o) {
  const eval_t *const e = o->e;
  const eval_rows_t *const r = e->rows;
  char path[4200];
  FILE *f = NULL;
  LS_FORWARD_IF_ERROR(open_out(o, "overall.csv", &f, path, sizeof path));
  fprintf(f, "target,h,period,series," STAT_HEAD);
  for (int j = 0; j < r->O; j++)
    for (int k = 0; k < e->H; k++)
      for (int p = 0; p < EVAL_PERIODS; p++) {
        fprintf(f, "%s,%d,%s,%zu", r->target[j], (int)e->hs[k], period_names[p], e->S);
        csv_stat(f, eval_stat(e, j, k, p));
      }
  LS_FORWARD_IF_ERROR(close_out(f, path));
  LS_FORWARD_IF_ERROR(open_out(o, "series.csv", &f, path, sizeof path));
  fprintf(f, "series,target,h,period," STAT_HEAD);
  for (size_t s = 0; s < e->S; s++)
    for (int j = 0; j < r->O; j++)
      for (int k = 0; k < e->H; k++)
        for (int p = 0; p < EVAL_PERIODS; p++) {
          csv_text(f, r->key[e->sid[s]]);
          fprintf(f, ",%s,%d,%s", r->target[j], (int)e->hs[k], period_names[p]);
          csv_stat(f, eval_series_stat(e, s, j, k, p));
        }
  LS_FORWARD_IF_ERROR(close_out(f, path));
  LS_FORWARD_IF_ERROR(open_out(o, "ratio.csv", &f, path, sizeof path));
  fprintf(f, "target,bin,from_ms,to_ms,n,mae,naive_mae,ratio\n");
  double const span = (double)(e->t1 - e->t0) + 1.0;
  for (int j = 0; j < r->O; j++)
    for (int b = 0; b < e->conf.bins; b++) {
      size_t const at = (size_t)j * (size_t)e->conf.bins + (size_t)b;
      double const n = (double)e->bin_n[at];
      fprintf(f, "%s,%d,%.17g,%.17g,%lld", r->target[j], b, e->t0 + b * span / e->conf.bins,
              e->t0 + (b + 1) * span / e->conf.bins, (long long)e->bin_n[at]);
      csv_num(f, n > 0 ? e->bin_mae[at] / n : NAN), csv_num(f, n > 0 ? e->bin_naive[at] / n : NAN);
      csv_num(f, n > 0 && e->bin_naive[at] > 0 ? e->bin_mae[at] / e->bin_naive[at] : NAN);
      fputc('\n', f);
    }
  LS_FORWARD_IF_ERROR(close_out(f, path));
  if (r->Q == 0) return LS_OK;
  LS_FORWARD_IF_ERROR(open_out(o, "quantiles.csv", &f, path, sizeof path));
  fprintf(f, "target,h,period,level,n,coverage,pinball\n");
  for (int j = 0; j < r->O; j++)
    for (int k = 0; k < e->H; k++)
      for (int q = 0; q < r->Q; q++)
        for (int p = 0; p < EVAL_PERIODS; p++) {
          size_t const at =
              (((size_t)j * (size_t)e->H + (size_t)k) * (size_t)r->Q + (size_t)q) * EVAL_PERIODS +
              (size_t)p;
          fprintf(f, "%s,%d,%s,%.17g,%lld", r->target[j], (int)e->hs[k], period_names[p],
                  r->level[q], (long long)e->q_n[at]);
          csv_num(f, e->coverage[at]), csv_num(f, e->pinball[at]);
          fputc('\n', f);
        }
  return close_out(f, path);
}

/* ------------------------------------------------------------------------ */
/* Plots                                                                     */

static ls_err_t add_plot(out_t *o, const char *file, const char *caption) {
  plot_t *const p = realloc(o->plots, ((size_t)o->n_plots + 1) * sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for the list of plots");
  o->plots = p;
  snprintf(p[o->n_plots].file, sizeof p->file, "%s", file);
  snprintf(p[o->n_plots].caption, sizeof p->caption, "%s", caption);
  o->n_plots++;
  return LS_OK;
}

/* Series s's forecast plots (every target). */
static ls_err_t plot_series(out_t *o, size_t s, const char *why) {
  const eval_t *const e = o->e;
  for (int j = 0; j < e->rows->O; j++) {
    char file[64], path[4200], caption[400];
    snprintf(file, sizeof file, "series-%zu-%d.png", s, j);
    for (int i = 0; i < o->n_plots; i++)
      if (!strcmp(o->plots[i].file, file)) return LS_OK; /* chosen and among the worst */
    snprintf(path, sizeof path, "%s/%s", o->rep->out_dir, file);
    LS_FORWARD_IF_ERROR(eval_plot_series(e, s, j, o->rep->points, path));
    snprintf(caption, sizeof caption, "%s: series %.200s, target %.60s (MASE %.4g)", why,
             e->rows->key[e->sid[s]], e->rows->target[j],
             eval_series_stat(e, s, j, 0, EVAL_ALL)->mase);
    LS_FORWARD_IF_ERROR(add_plot(o, file, caption));
  }
  return LS_OK;
}

static ls_err_t write_plots(out_t *o) {
  const eval_t *const e = o->e;
  const eval_report_t *const rep = o->rep;
  char path[4200];
  for (int c = 0; c < rep->n_chosen; c++) {
    int64_t const s = eval_find_series(e, rep->chosen[c]);
    LS_RETURN_IF(s < 0, LS_ERR_INVALID_ARG,
                 "--series '%s': no %s forecast of it with an actual in the files", rep->chosen[c],
                 e->kind == EVAL_NEXT ? "next" : "eval");
    LS_FORWARD_IF_ERROR(plot_series(o, (size_t)s, "chosen"));
  }
  for (int w = 0; w < rep->top && (size_t)w < e->S; w++) {
    size_t const s = o->rank[e->S - 1 - (size_t)w];
    if (isfinite(eval_series_stat(e, s, 0, 0, EVAL_ALL)->mase))
      LS_FORWARD_IF_ERROR(plot_series(o, s, "worst"));
  }
  snprintf(path, sizeof path, "%s/ratio.png", rep->out_dir);
  LS_FORWARD_IF_ERROR(eval_plot_ratio(e, path));
  LS_FORWARD_IF_ERROR(add_plot(o, "ratio.png",
                               "The forecasts' error over the last value's, "
                               "over time (all series; below 1: better)"));
  snprintf(path, sizeof path, "%s/errors.png", rep->out_dir);
  LS_FORWARD_IF_ERROR(eval_plot_errors(e, path));
  LS_FORWARD_IF_ERROR(add_plot(o, "errors.png",
                               "The distribution of the errors, beside the "
                               "last value's"));
  if (e->rows->Q == 0) return LS_OK;
  snprintf(path, sizeof path, "%s/coverage.png", rep->out_dir);
  LS_FORWARD_IF_ERROR(eval_plot_coverage(e, path));
  return add_plot(o, "coverage.png", "Coverage of the quantiles against nominal");
}

/* ------------------------------------------------------------------------ */
/* The summary and the page                                                  */

/* A number for people: 4 significant digits, "-" where undefined. */
static const char *num(char *buf, double v) {
  if (isfinite(v))
    snprintf(buf, 32, "%.4g", v);
  else
    snprintf(buf, 32, "-");
  return buf;
}

static void utc(char *buf, size_t size, int64_t ms) {
  time_t const t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

/* The text of a cell: escaped for the page (HTML) or a Markdown table. */
static void cell(monitor_text_t *t, const char *s, int html) {
  for (; *s; s++) {
    const char *const esc = html ? (*s == '<'   ? "&lt;"
                                    : *s == '>' ? "&gt;"
                                    : *s == '&' ? "&amp;"
                                                : NULL)
                                 : (*s == '|' ? "\\|" : NULL);
    if (esc != NULL)
      monitor_text_add(t, "%s", esc);
    else
      monitor_text_add(t, "%c", *s);
  }
}

/* One table row of cells [n]. */
static void row(monitor_text_t *t, const char *const *cells, int n, int html, int head) {
  monitor_text_add(t, "%s", html ? "<tr>" : "|");
  for (int i = 0; i < n; i++) {
    monitor_text_add(t, "%s", html ? (head ? "<th>" : "<td>") : " ");
    cell(t, cells[i], html);
    monitor_text_add(t, "%s", html ? (head ? "</th>" : "</td>") : " |");
  }
  monitor_text_add(t, "%s\n", html ? "</tr>" : "");
  if (!html && head) {
    monitor_text_add(t, "|");
    for (int i = 0; i < n; i++)
      monitor_text_add(t, "---|");
    monitor_text_add(t, "\n");
  }
}

static void table_begin(monitor_text_t *t, int html) {
  monitor_text_add(t, "%s", html ? "<table>\n" : "\n");
}
static void table_end(monitor_text_t *t, int html) {
  monitor_text_add(t, "%s", html ? "</table>\n" : "\n");
}

static void heading(monitor_text_t *t, int html, const char *title) {
  if (html)
    monitor_text_add(t, "<h2>%s</h2>\n", title);
  else
    monitor_text_add(t, "\n## %s\n", title);
}

static void overall_table(const eval_t *e, monitor_text_t *t, int html) {
  const eval_rows_t *const r = e->rows;
  char season[40];
  snprintf(season, sizeof season, "MASE (season %d)", e->conf.season);
  const char *const head[] = {"target", "h",    "period", "n",       "MAE",
                              "RMSE",   "MASE", season,   "sMAPE %", "bias"};
  table_begin(t, html);
  row(t, head, 10, html, 1);
  for (int j = 0; j < r->O; j++)
    for (int k = 0; k < e->H; k++)
      for (int p = 0; p < EVAL_PERIODS; p++) {
        const eval_stat_t *const s = eval_stat(e, j, k, p);
        char b[7][32], h[16], n[32];
        snprintf(h, sizeof h, "%d", (int)e->hs[k]);
        snprintf(n, sizeof n, "%lld", (long long)s->n);
        const char *const cells[] = {r->target[j],        h,
                                     period_titles[p],    n,
                                     num(b[0], s->mae),   num(b[1], s->rmse),
                                     num(b[2], s->mase),  num(b[3], s->mase_s),
                                     num(b[4], s->smape), num(b[5], s->bias)};
        row(t, cells, 10, html, 0);
      }
  table_end(t, html);
}

/* The best and worst series of each target (whole run, first horizon). */
static ls_err_t ranks_table(const out_t *o, monitor_text_t *t, int html) {
  const eval_t *const e = o->e;
  size_t *const rank = malloc((e->S ? e->S : 1) * sizeof *rank);
  LS_RETURN_IF(rank == NULL, LS_ERR_NOMEM, "no memory to rank %zu series", e->S);
  const char *const head[] = {"target", "", "best series", "MASE", "worst series", "MASE"};
  table_begin(t, html);
  row(t, head, 6, html, 1);
  ls_err_t err = LS_OK;
  for (int j = 0; j < e->rows->O && err == LS_OK; j++) {
    err = eval_rank(e, j, 0, rank);
    size_t ranked = 0; /* series with a MASE */
    while (err == LS_OK && ranked < e->S &&
           isfinite(eval_series_stat(e, rank[ranked], j, 0, EVAL_ALL)->mase))
      ranked++;
    for (size_t w = 0; err == LS_OK && w < (size_t)o->rep->top && w < ranked; w++) {
      size_t const best = rank[w], worst = rank[ranked - 1 - w];
      char n[24], b1[32], b2[32];
      snprintf(n, sizeof n, "%zu", w + 1);
      const char *const cells[] = {
          e->rows->target[j],          n,
          e->rows->key[e->sid[best]],  num(b1, eval_series_stat(e, best, j, 0, EVAL_ALL)->mase),
          e->rows->key[e->sid[worst]], num(b2, eval_series_stat(e, worst, j, 0, EVAL_ALL)->mase)};
      row(t, cells, 6, html, 0);
    }
  }
  table_end(t, html);
  free(rank);
  return err;
}

/* What was read and evaluated, one paragraph. */
static void preamble(const out_t *o, monitor_text_t *t, int html) {
  const eval_t *const e = o->e;
  const eval_rows_t *const r = e->rows;
  char from[40], to[40], cut[40];
  utc(from, sizeof from, e->t0), utc(to, sizeof to, e->t1), utc(cut, sizeof cut, (int64_t)e->cut);
  monitor_text_add(t, "%s%zu %s forecasts with an actual value, of %zu series and %d target%s (",
                   html ? "<p>" : "", e->n, e->kind == EVAL_NEXT ? "next" : "eval", e->S, r->O,
                   r->O > 1 ? "s" : "");
  for (int j = 0; j < r->O; j++)
    monitor_text_add(t, "%s%s", j ? ", " : "", r->target[j]);
  monitor_text_add(t, "), %d horizon%s, ", e->H, e->H > 1 ? "s" : "");
  if (r->Q == 0) monitor_text_add(t, "no quantiles");
  for (int q = 0; q < r->Q; q++)
    monitor_text_add(t, "%squantile %g", q ? ", " : "", r->level[q]);
  monitor_text_add(t,
                   ", read from %d file%s; left out: %lld rows of the other kind, %lld "
                   "without an actual.%s",
                   r->files, r->files > 1 ? "s" : "", (long long)e->other_kind,
                   (long long)e->no_actual, html ? "</p>\n<p>" : "\n");
  monitor_text_add(t,
                   "Event time from %s to %s; the last fifth from %s on. MASE: the MAE over "
                   "the last value's (the in-sample naive forecast) on the same rows, averaged "
                   "over series; the seasonal MASE over the value %d records before.%s",
                   from, to, cut, e->conf.season, html ? "</p>\n" : "\n");
}

/* The summary (Markdown) or the page's body (HTML). */
static ls_err_t document(const out_t *o, monitor_text_t *t, int html) {
  if (!html) monitor_text_add(t, "# Forecast report\n\n");
  preamble(o, t, html);
  heading(t, html, "Overall");
  overall_table(o->e, t, html);
  heading(t, html, "Best and worst series (MASE over the whole run)");
  LS_FORWARD_IF_ERROR(ranks_table(o, t, html));
  if (!html) {
    monitor_text_add(t,
                     "Tables: overall.csv, series.csv, ratio.csv%s; plots and the page: "
                     "index.html in %s\n",
                     o->e->rows->Q ? ", quantiles.csv" : "", o->rep->out_dir);
    return LS_OK;
  }
  heading(t, html, "Plots");
  for (int i = 0; i < o->n_plots; i++) {
    monitor_text_add(t, "<figure><img src=\"%s\" alt=\"", o->plots[i].file);
    cell(t, o->plots[i].caption, 1);
    monitor_text_add(t, "\"><figcaption>");
    cell(t, o->plots[i].caption, 1);
    monitor_text_add(t, "</figcaption></figure>\n");
  }
  heading(t, html, "Tables");
  monitor_text_add(t,
                   "<p><a href=\"overall.csv\">overall.csv</a>, <a href=\"series.csv\">"
                   "series.csv</a> (every series), <a href=\"ratio.csv\">ratio.csv</a>%s</p>\n",
                   o->e->rows->Q ? ", <a href=\"quantiles.csv\">quantiles.csv</a>" : "");
  return LS_OK;
}

static const char *const page_head =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>lstream forecast report</title>\n<style>\n"
    "body{font-family:sans-serif;margin:2em auto;max-width:960px;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
    "text-align:right}th{background:#f2f2f2}td:first-child{text-align:left}\n"
    "figure{margin:1.5em 0}img{max-width:100%;border:1px solid #ddd}\n"
    "figcaption{color:#555;font-size:90%}\n</style></head><body>\n"
    "<h1>Forecast report</h1>\n";

static ls_err_t write_text(const out_t *o, const char *name, const char *a, const char *b) {
  char path[4200];
  FILE *f = NULL;
  LS_FORWARD_IF_ERROR(open_out(o, name, &f, path, sizeof path));
  fputs(a, f);
  if (b != NULL) fputs(b, f);
  return close_out(f, path);
}

ls_err_t eval_report(const eval_t *e, const eval_report_t *rep, char **md) {
  LS_RETURN_IF(e == NULL || rep == NULL || md == NULL || rep->out_dir == NULL || rep->top < 0 ||
                   rep->points < 2,
               LS_ERR_INVALID_ARG, "eval_report: NULL argument, top < 0 or points < 2");
  *md = NULL;
  LS_RETURN_IF(mkdir(rep->out_dir, 0777) != 0 && errno != EEXIST, LS_ERR_IO,
               "%s: cannot create the report's directory: %s", rep->out_dir, strerror(errno));
  out_t o = {e, rep, NULL, 0, malloc((e->S ? e->S : 1) * sizeof(size_t))};
  monitor_text_t mdt = {0}, page = {0};
  ls_err_t err =
      o.rank == NULL ? ls_error_set(LS_ERR_NOMEM, "no memory") : eval_rank(e, 0, 0, o.rank);
  if (err == LS_OK) err = write_tables(&o);
  if (err == LS_OK) err = write_plots(&o);
  if (err == LS_OK) err = document(&o, &mdt, 0);
  if (err == LS_OK) err = document(&o, &page, 1);
  if (err == LS_OK && (mdt.nomem || page.nomem || !mdt.text || !page.text))
    err = ls_error_set(LS_ERR_NOMEM, "no memory for the report's text");
  if (err == LS_OK) err = write_text(&o, "summary.md", mdt.text, NULL);
  if (err == LS_OK) {
    monitor_text_add(&page, "</body></html>\n");
    err = page.nomem ? ls_error_set(LS_ERR_NOMEM, "no memory for the page")
                     : write_text(&o, "index.html", page_head, page.text);
  }
  free(o.plots), free(o.rank), free(page.text);
  if (err != LS_OK) {
    free(mdt.text);
    return err;
  }
  *md = mdt.text;
  return LS_OK;
}
