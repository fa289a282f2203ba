/*
 * `lstream report PREDICTIONS.csv...`: how good the forecasts of a run were
 * (train/eval.h): error measures per series and overall, best and worst
 * series, tables, plots and an HTML page in --out, the summary printed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "eval.h"

/* --series KEY, repeatable: the keys into a list. */
typedef struct chosen_s {
  const char *keys[CLI_MAX_POSITIONAL];
  int n;
} chosen_t;

static int add_series(void *dst, const char *value) {
  chosen_t *const c = dst;
  if (c->n == CLI_MAX_POSITIONAL)
    return cli_usage_error("report", "more than %d --series", CLI_MAX_POSITIONAL);
  c->keys[c->n++] = value;
  return CLI_EXIT_OK;
}

static const char *const kinds[] = {"next", "eval", "auto", NULL};

/* Reads the files, evaluates, writes the report and prints its summary. */
static int report(const cli_args_t *args, const eval_conf_t *conf, const eval_report_t *rep,
                  int quiet) {
  eval_rows_t rows = {0};
  eval_t *e = NULL;
  char *md = NULL;
  int rc = CLI_EXIT_OK;
  for (int i = 0; i < args->n && rc == CLI_EXIT_OK; i++) {
    ls_err_t const err = eval_read(&rows, args->pos[i]);
    if (err != LS_OK) rc = cli_fail(err, "cannot read the forecasts");
  }
  ls_err_t err = LS_OK;
  if (rc == CLI_EXIT_OK && (err = eval_new(&rows, conf, &e)) != LS_OK)
    rc = cli_fail(err, "nothing to evaluate");
  if (rc == CLI_EXIT_OK && (err = eval_report(e, rep, &md)) != LS_OK)
    rc = cli_fail(err, "cannot write the report");
  if (rc == CLI_EXIT_OK && !quiet) fputs(md, stdout);
  free(md);
  eval_free(e);
  eval_rows_free(&rows);
  eval_plot_release(); /* the program ends: nothing else draws */
  return rc;
}

int cmd_report(int argc, char **argv) {
  eval_conf_t conf;
  eval_conf_init(&conf);
  const char *out = "report";
  chosen_t chosen = {{0}, 0};
  int kind = 2, top = 5, points = 400, quiet = 0;
  cli_opt_t const opts[] = {
      {.name = "out",
       .arg = "DIR",
       .kind = CLI_TEXT,
       .dst = &out,
       .def = "report",
       .help = "where the tables, plots and index.html go (created)"},
      {.name = "series",
       .arg = "KEY",
       .kind = CLI_CALL,
       .dst = &chosen,
       .call = add_series,
       .help = "a series to plot, its key as the file writes it\n(repeatable)"},
      {.name = "kind",
       .arg = "K",
       .kind = CLI_VALUE,
       .dst = &kind,
       .value = BASE_V_CHOICE(kinds),
       .help = "the forecasts to evaluate: next, eval, or auto\n(next where the files have any)"},
      {.name = "season",
       .arg = "M",
       .kind = CLI_VALUE,
       .dst = &conf.season,
       .value = BASE_V_INT(0, 1000000),
       .help = "records per season of the seasonal MASE (0: none)"},
      {.name = "top",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &top,
       .value = BASE_V_INT(0, 1000),
       .help = "best and worst series listed, worst plotted"},
      {.name = "points",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &points,
       .value = BASE_V_INT(2, 10000000),
       .help = "a series plot shows its last N forecasts"},
      {.name = "bins",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &conf.bins,
       .value = BASE_V_INT(1, 100000),
       .help = "time bins of the ratio to the last value"},
      {.name = "quiet", .kind = CLI_FLAG, .dst = &quiet, .help = "print nothing but errors"},
      {0},
  };
  cli_spec_t const spec = {
      "report",
      "PREDICTIONS.csv [PREDICTIONS.csv.rank1 ...] [OPTIONS]",
      "Evaluates the forecasts in files of --predictions-out (several: a run's\n"
      "rank files): MAE, RMSE, MASE (over the last value's error, and the seasonal\n"
      "naive's), sMAPE and bias per series and overall, per horizon and quantile\n"
      "where the files have them, over the whole run and its last fifth of event\n"
      "time; the best and worst series. Writes tables (CSV), plots (PNG) and\n"
      "index.html into --out, and prints the summary (Markdown).\n",
      opts,
      NULL,
      CLI_MAX_POSITIONAL};
  cli_args_t args;
  int const parsed = cli_parse(&spec, argc, argv, &args);
  if (parsed != CLI_EXIT_OK) return parsed == CLI_DONE ? CLI_EXIT_OK : parsed;
  if (args.n == 0) return cli_usage_error("report", "expected a PREDICTIONS.csv file");
  conf.kind = kind == 2 ? -1 : kind;
  eval_report_t const rep = {out, args.pos, args.n, chosen.keys, chosen.n, top, points};
  return report(&args, &conf, &rep, quiet);
}
