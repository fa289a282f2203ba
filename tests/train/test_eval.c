/*
 * Evaluating forecasts (train/eval.h): the columns found by name (h and
 * quantiles, which today's files lack, included), every measure on a small
 * file worked out by hand, the files of a report, and bad files refused
 * with a message naming what is wrong.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eval.h"

/* The hand-worked values are exact in a few operations: 1e-12. */
#define EPS 1e-12

static char dir[] = "/tmp/test_eval_XXXXXX";

static void setup(void) {
  cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

static const char *write_file(const char *name, const char *text) {
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *const f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Series a, horizon 1: f 1 2 3 4, y 2 2 5 3 (times 0..30); horizon 2: two
 * rows; series b ("b,\"x\"" as written): f 10 10, y 10 12 (times 40, 50); a
 * row without an actual, an eval row, a column nobody knows. */
static const char *const sample =
    "kind,series,partition,offset,time,step,h,extra,forecast_0,q0.1_0,q0.9_0,actual_0\n"
    "next,a,0,0,0,1,1,x,1,0,2,2\n"
    "next,a,0,1,10,1,1,x,2,1,3,2\n"
    "next,a,0,2,20,1,1,x,3,2,4,5\n"
    "next,a,0,3,30,1,1,x,4,3,5,3\n"
    "next,a,0,0,0,1,2,x,1,0,2,1\n"
    "next,a,0,1,10,1,2,x,1,0,2,3\n"
    "next,\"b,\"\"x\"\"\",1,6,50,1,1,x,10,9,11,12\n"
    "next,\"b,\"\"x\"\"\",1,5,40,1,1,x,10,9,11,10\n"
    "next,\"b,\"\"x\"\"\",1,7,60,1,1,x,10,9,11,\n"
    "eval,a,0,0,0,1,1,x,7,0,2,2\n";

static eval_t *evaluate(eval_rows_t *r, int season) {
  cr_assert_eq(eval_read(r, write_file("p.csv", sample)), LS_OK, "%s", ls_last_error());
  eval_conf_t c;
  eval_conf_init(&c);
  c.season = season;
  eval_t *e = NULL;
  cr_assert_eq(eval_new(r, &c, &e), LS_OK, "%s", ls_last_error());
  return e;
}

Test(eval, columns_by_name, .init = setup, .fini = teardown) {
  eval_rows_t r = {0};
  eval_t *const e = evaluate(&r, 2);
  cr_expect_eq(r.O, 1);
  cr_expect_str_eq(r.target[0], "0");
  cr_expect_eq(r.Q, 2);
  cr_expect_eq(r.level[0], 0.1);
  cr_expect_eq(r.level[1], 0.9);
  cr_expect(r.has_h);
  cr_expect_eq(e->kind, EVAL_NEXT);
  cr_expect_eq(e->n, 8);
  cr_expect_eq(e->no_actual, 1);
  cr_expect_eq(e->other_kind, 1);
  cr_expect_eq(e->H, 2);
  cr_expect_eq(e->S, 2);
  cr_expect_eq(eval_find_series(e, "b,\"x\""), 1, "the key as the file writes it, unquoted");
  cr_expect_eq(eval_find_series(e, "c"), -1);
  eval_free(e);
  eval_rows_free(&r);
}

Test(eval, measures_by_hand, .init = setup, .fini = teardown) {
  eval_rows_t r = {0};
  eval_t *const e = evaluate(&r, 2);
  const eval_stat_t *const a = eval_series_stat(e, 0, 0, 0, EVAL_ALL);
  cr_expect_eq(a->n, 4);
  cr_expect_float_eq(a->mae, 1.0, EPS);
  cr_expect_float_eq(a->rmse, sqrt(1.5), EPS);
  cr_expect_float_eq(a->bias, -0.5, EPS);
  cr_expect_float_eq(a->smape, (200.0 / 3 + 0 + 50 + 200.0 / 7) / 4, EPS);
  cr_expect_eq(a->naive_n, 3);
  cr_expect_float_eq(a->naive_mae, 5.0 / 3, EPS);
  cr_expect_float_eq(a->mase, 0.6, EPS);
  cr_expect_eq(a->snaive_n, 2);
  cr_expect_float_eq(a->mase_s, 0.5, EPS); /* |5 - 2|, |3 - 2| */
  const eval_stat_t *const b = eval_series_stat(e, 1, 0, 0, EVAL_ALL);
  cr_expect_eq(b->n, 2, "sorted by offset, the row without an actual left out");
  cr_expect_float_eq(b->mase, 0.5, EPS);
  const eval_stat_t *const all = eval_stat(e, 0, 0, EVAL_ALL);
  cr_expect_eq(all->n, 6);
  cr_expect_float_eq(all->mae, 1.0, EPS);
  cr_expect_float_eq(all->mase, 0.55, EPS, "the mean of the series' MASE");
  /* The last fifth: t0 = 0, t1 = 50, time > 40: b's last row only. */
  const eval_stat_t *const fin = eval_stat(e, 0, 0, EVAL_FINAL);
  cr_expect_eq(fin->n, 1);
  cr_expect_float_eq(fin->mae, 2.0, EPS);
  cr_expect_float_eq(fin->mase, 1.0, EPS, "its naive pair reaches back before the cut");
  const eval_stat_t *const h2 = eval_series_stat(e, 0, 0, 1, EVAL_ALL);
  cr_expect_eq(h2->n, 2);
  cr_expect_float_eq(h2->mae, 1.0, EPS);
  cr_expect_float_eq(h2->naive_mae, 2.0, EPS);
  /* Quantiles of horizon 1, whole run: a's 4 rows and b's 2. */
  size_t const q1 = 0, q9 = 1 * EVAL_PERIODS; /* [O, H, Q, periods] */
  cr_expect_eq(e->q_n[q1], 6);
  cr_expect_float_eq(e->coverage[q1], 1.0 / 6, EPS); /* 3 <= 3 only */
  cr_expect_float_eq(e->coverage[q9], 4.0 / 6, EPS);
  cr_expect_float_eq(e->pinball[q1], (0.2 + 0.1 + 0.3 + 0 + 0.1 + 0.3) / 6, EPS);
  size_t rank[2];
  cr_expect_eq(eval_rank(e, 0, 0, rank), LS_OK);
  cr_expect_eq(rank[0], 1, "b (MASE 0.5) before a (0.6)");
  eval_free(e);
  eval_rows_free(&r);
}

Test(eval, the_report_files, .init = setup, .fini = teardown) {
  eval_rows_t r = {0};
  eval_t *const e = evaluate(&r, 2);
  char out[256], path[300];
  snprintf(out, sizeof out, "%s/rep", dir);
  const char *const bad[] = {"zz"};
  eval_report_t rep = {out, NULL, 0, bad, 1, 3, 100};
  char *md = NULL;
  cr_expect_eq(eval_report(e, &rep, &md), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "'zz'") != NULL, "%s", ls_last_error());
  const char *const good[] = {"a"};
  rep.chosen = good;
  cr_assert_eq(eval_report(e, &rep, &md), LS_OK, "%s", ls_last_error());
  cr_expect(strstr(md, "| 0 | 1 | whole run | 6 | 1 | ") != NULL, "%s", md);
  const char *const files[] = {"overall.csv",  "series.csv",    "ratio.csv", "quantiles.csv",
                               "summary.md",   "index.html",    "ratio.png", "errors.png",
                               "coverage.png", "series-0-0.png"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", out, files[i]);
    cr_expect(stat(path, &st) == 0 && st.st_size > 0, "%s missing or empty", files[i]);
  }
  free(md);
  eval_free(e);
  eval_rows_free(&r);
  eval_plot_release(); /* (each test runs in a process of its own) */
}

/* A file that eval_read refuses, and a word its message holds. */
static void refused(const char *first, const char *text, const char *word) {
  eval_rows_t r = {0};
  if (first != NULL) cr_assert_eq(eval_read(&r, write_file("first.csv", first)), LS_OK);
  cr_expect_neq(eval_read(&r, write_file("bad.csv", text)), LS_OK, "accepted: %s", text);
  cr_expect(strstr(ls_last_error(), word) != NULL, "'%s' not in: %s", word, ls_last_error());
  eval_rows_free(&r);
}

Test(eval, bad_files, .init = setup, .fini = teardown) {
  refused(NULL, "kind,series,offset,time,actual_0\n", "no forecast_X");
  refused(NULL, "kind,series,offset,time,forecast_0\n", "actual_0");
  refused(NULL, "kind,series,time,forecast_0,actual_0\n", "offset");
  refused(NULL, "kind,series,offset,time,forecast_0,actual_0\nnext,a,1,2,abc,3\n", ":2:");
  refused(NULL, "kind,series,offset,time,forecast_0,actual_0\nnext,a,1,2,3\n", "fields");
  refused(NULL, "kind,series,offset,time,forecast_0,actual_0\nlater,a,1,2,3,4\n", "later");
  refused(NULL, "kind,series,offset,time,forecast_0,actual_0\nnext,\"a,1,2,3,4\n", "not closed");
  refused("kind,series,offset,time,forecast_0,actual_0\n",
          "kind,series,offset,time,forecast_1,actual_1\n", "forecast_0");
  refused("kind,series,offset,time,forecast_0,actual_0\n",
          "kind,series,offset,time,h,forecast_0,actual_0\n", "h column");
  eval_rows_t r = {0};
  eval_conf_t c;
  eval_conf_init(&c);
  eval_t *e = NULL;
  cr_assert_eq(eval_read(&r, write_file("x.csv", "kind,series,offset,time,forecast_0,actual_0\n"
                                                 "next,a,1,2,3,\n")),
               LS_OK);
  cr_expect_eq(eval_new(&r, &c, &e), LS_ERR_INVALID_ARG, "nothing with an actual");
  cr_expect_null(e);
  eval_rows_free(&r);
}
