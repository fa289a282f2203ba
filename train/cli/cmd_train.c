/*
 * `lstream train`: trains the model on a topic, a log line per second (or
 * per N steps), optional JSON-lines metrics, and a summary at the end.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/csv.h"
#include "cli.h"
#include "lstream/train.h"
#include "report.h"
#include "watch.h"

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

typedef struct run_log_s {
  ls_trainer_t *tr;
  FILE *metrics;     /* JSON lines, or NULL */
  int log_every;     /* steps between log lines; 0 = by time */
  double interval_s; /* seconds between log lines when log_every is 0 */
  int quiet;
  cli_watch_t *watch; /* --http, --tensorboard */
  int64_t last_step;  /* the newest step seen */
  double t0, last_t;
  /* Since the last log line. */
  int64_t steps, windows, records;
  double loss, base, count, wait_s, compute_s;
  report_t targets;                   /* per target, data units */
  int64_t rejected[LS_REJECT__COUNT]; /* so far, per reason */
} run_log_t;

static double mse(double sum, double count) {
  return count > 0 ? sum / count : 0.0;
}

/* Rejections per reason as "size:1,range:2" (the reasons with any), or "0". */
static const char *rejected_text(const int64_t *rejected, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int r = 1; r < LS_REJECT__COUNT && len < size; r++)
    if (rejected[r] > 0)
      len += (size_t)snprintf(buf + len, size - len, "%s%s:%lld", len ? "," : "",
                              ls_reject2str((ls_reject_t)r), (long long)rejected[r]);
  return len ? buf : "0";
}

#define LOGGER "lstream train"

/* The consumer's warnings (Kafka's errors, rejected records), as they come
 * (from the consumer's thread or librdkafka's). */
static void on_warning(void *opaque, const char *message) {
  (void)opaque;
  cli_log(CLI_WARN, LOGGER, "%s", message);
}

static void print_line(run_log_t *lg, int64_t step, double now) {
  double const dt = now - lg->last_t > 0 ? now - lg->last_t : 1e-9;
  double const busy = lg->wait_s + lg->compute_s;
  char rejected[256], *text = NULL;
  size_t len = 0;
  FILE *const f = open_memstream(&text, &len); /* report.c writes the targets' fields */
  if (f != NULL) {
    fprintf(f, "step=%lld windows=%lld loss=%.6g baseline=%.6g", (long long)step,
            (long long)lg->windows, mse(lg->loss, lg->count), mse(lg->base, lg->count));
    report_log_fields(&lg->targets, f);
    fprintf(f, " windows_per_s=%.0f records_per_s=%.0f wait=%.3f rejected=%s", lg->windows / dt,
            lg->records / dt, busy > 0 ? lg->wait_s / busy : 0.0,
            rejected_text(lg->rejected, rejected, sizeof rejected));
    if (fclose(f) == 0) cli_log(CLI_INFO, LOGGER, "%s", text);
    free(text);
  }
  lg->steps = lg->windows = lg->records = 0;
  lg->loss = lg->base = lg->count = lg->wait_s = lg->compute_s = 0;
  lg->last_t = now;
}

/* The snapshot events of a step or an empty round: commits and skips
 * (not with --quiet), failures (always: they need attention), the skips
 * and failures with the age of the newest durable snapshot. */
static void snapshot_events(const run_log_t *lg, const ls_step_stats_t *s) {
  char durable[128];
  if (s->durable_step >= 0)
    snprintf(durable, sizeof durable, "the newest durable snapshot, of step %lld, is %.1f s old",
             (long long)s->durable_step, s->durable_age_s);
  else
    snprintf(durable, sizeof durable, "no snapshot is durable yet, %.1f s into the run",
             s->durable_age_s);
  if (!lg->quiet && s->snapshot_committed >= 0)
    cli_log(CLI_INFO, LOGGER, "snapshot of step %lld committed", (long long)s->snapshot_committed);
  if (!lg->quiet && s->snapshot_skipped)
    cli_log(CLI_WARN, LOGGER,
            "step %lld: snapshot skipped, the previous one is still being written (snapshot "
            "every fewer steps, or a lower --snapshot-level); %s",
            (long long)s->step, durable);
  if (s->snapshot_error != NULL) cli_log(CLI_WARN, LOGGER, "%s; %s", s->snapshot_error, durable);
}

static int on_step(void *opaque, const ls_step_stats_t *s) {
  run_log_t *const lg = opaque;
  double const now = base_now_s();
  cli_watch_step(lg->watch, s);
  snapshot_events(lg, s);
  if (s->windows == 0) return 0; /* an empty round, with a snapshot event */
  lg->steps++;
  lg->last_step = s->step;
  lg->windows += s->windows;
  lg->records += s->records;
  lg->loss += s->loss_sum;
  lg->base += s->baseline_sum;
  lg->count += s->count;
  lg->wait_s += s->wait_s;
  lg->compute_s += s->compute_s;
  report_add(&lg->targets, s);
  memcpy(lg->rejected, s->rejected, sizeof lg->rejected);
  if (lg->metrics != NULL) report_metrics_line(lg->metrics, s, now - lg->t0);
  if (s->nonfinite_note != NULL) /* every rank: each names its own suspect window */
    cli_log(CLI_WARN, LOGGER, "%s", s->nonfinite_note);
  int const due =
      lg->log_every > 0 ? lg->steps >= lg->log_every : now - lg->last_t >= lg->interval_s;
  if (!lg->quiet && due) print_line(lg, s->step, now);
  return 0;
}

/* --series-out: one CSV line per series, with its forecasts' MSE and the
 * last value's per target feature (data units). */
static int write_series(ls_trainer_t *tr, const char *base, const ls_train_summary_t *sum) {
  int rank = 0, world = 1;
  ls_trainer_rank(tr, &rank, &world);
  char path[4096];
  if (world > 1)
    snprintf(path, sizeof path, "%s.rank%d", base, rank);
  else
    snprintf(path, sizeof path, "%s", base);
  FILE *f = fopen(path, "w");
  if (f == NULL) return cli_fail(LS_ERR_IO, "cannot write --series-out %s", path);
  fprintf(f, "series,partition,windows,records,last_offset");
  for (int j = 0; j < sum->targets; j++)
    fprintf(f, ",mse_data_%d,baseline_data_%d", sum->target[j].feature, sum->target[j].feature);
  fprintf(f, "\n");
  int64_t const n = ls_trainer_series_count(tr);
  for (int64_t i = 0; i < n; i++) {
    ls_series_info_t s;
    const double *e = NULL;
    int O = 0;
    if (ls_trainer_series_info(tr, i, &s) != LS_OK || ls_trainer_series_errors(tr, i, &e, &O))
      break;
    base_csv_field(f, s.key, s.key_len); /* RFC 4180, \xHH for bytes that are not text */
    fprintf(f, ",%d,%lld,%lld,%lld", (int)s.partition, (long long)s.windows, (long long)s.records,
            (long long)s.last_offset);
    for (int j = 0; j < O; j++)
      fprintf(f, ",%.9g,%.9g", mse(e[2 * j], (double)s.records),
              mse(e[2 * j + 1], (double)s.records));
    fprintf(f, "\n");
  }
  if (fclose(f) != 0) return cli_fail(LS_ERR_IO, "cannot write --series-out %s", path);
  return CLI_EXIT_OK;
}

/* --params-out: the flat parameter buffer as raw float32. */
static int write_params(ls_trainer_t *tr, const char *path) {
  size_t const n = ls_trainer_param_count(tr);
  float *p = malloc(n * sizeof(float));
  if (p == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for %zu parameters", n);
  ls_err_t const err = ls_trainer_params(tr, p, n);
  if (err != LS_OK) {
    free(p);
    return cli_fail(err, "cannot read the parameters");
  }
  FILE *f = fopen(path, "wb");
  int ok = f != NULL && fwrite(p, sizeof(float), n, f) == n;
  if (f != NULL && fclose(f) != 0) ok = 0;
  free(p);
  return ok ? CLI_EXIT_OK : cli_fail(LS_ERR_IO, "cannot write --params-out %s", path);
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */

#define ABOUT                                                                                      \
  "Trains a stacked LSTM on the series of a Kafka topic with truncated BPTT,\n"                    \
  "carrying every series' hidden state from one window to the next; each\n"                        \
  "series' features are normalised by its own running location and scale, so\n"                    \
  "raw values work. Each step's loss is measured before its update (prequential,\n"                \
  "test-then-train) and printed beside the last-value baseline on the same\n"                      \
  "targets.\n"

#define EPILOG                                                                                     \
  "The log line: step, windows in the step, prequential MSE and baseline MSE\n"                    \
  "(normalised units, all targets), per target the MSE and the last value's in\n"                  \
  "the data's units (mse_data=, baseline_data=), windows/s, records/s and the\n"                   \
  "share of time spent waiting for data, over the steps since the previous line,\n"                \
  "and the records rejected so far per reason. Kafka's warnings and errors (a\n"                   \
  "broker down, unreachable) and rejected records are logged as they come, at\n"                   \
  "most one of a kind every 5 s. At the end (a replay's end, or SIGINT/SIGTERM)\n"                 \
  "a summary: totals, the loss over the whole run and its last fifth of event\n"                   \
  "time (final), one line per target feature (normalised and data units), the\n"                   \
  "series held and evicted, the rejections per reason, and digests of the\n"                       \
  "parameters and states (equal digests, bit-identical models).\n"                                 \
  "\n"                                                                                             \
  "Resuming (--snapshot-dir; --resume latest by default): options marked\n"                        \
  "[resume: fixed] decide the model and the steps, and may not change across a\n"                  \
  "resume: left out, they take the snapshot's values (so a later version's new\n"                  \
  "defaults never refuse an old directory); given with another value, the resume\n"                \
  "is refused, naming the option and both values. Options marked [resume:\n"                       \
  "reported] may change; the resume says so, since the run then differs from\n"                    \
  "an uninterrupted one. The others may change freely.\n"                                          \
  "\n"                                                                                             \
  "Several replicas: mpirun -np N lstream train ... (rank r reads the partitions\n"                \
  "p with p % N == r; gradients are summed with MPI; rank 0 prints).\n"

/* What the command line asks of a run. Configuration keys are applied after
 * the --config files, in the order given. */
typedef struct train_args_s {
  ls_train_conf_t *conf;
  cli_kafka_props_t props;
  const char **configs;        /* [n_configs] --config files */
  const char **keys, **values; /* [n_set] configuration keys given as options */
  int n_configs, n_set;
  const char *metrics_path, *series_path, *params_path;
  int log_every, quiet;
  cli_watch_t watch;
} train_args_t;

/* An option that sets a configuration key. */
typedef struct key_opt_s {
  train_args_t *a;
  const char *key;
  char def[64];   /* its default, for the help */
  char help[640]; /* its help, marked as the resume treats it */
} key_opt_t;

static int set_key(void *opaque, const char *value) {
  key_opt_t *const k = opaque;
  k->a->keys[k->a->n_set] = k->key;
  k->a->values[k->a->n_set++] = value;
  return CLI_EXIT_OK;
}

static int add_config(void *opaque, const char *path) {
  train_args_t *const a = opaque;
  a->configs[a->n_configs++] = path;
  return CLI_EXIT_OK;
}

/* The program's own options, after the configuration keys. */
static int program_opts(train_args_t *a, cli_opt_t *o) {
  cli_opt_t const program[] = {
      {.help = "Program options:"},
      {.name = "config",
       .arg = "FILE",
       .kind = CLI_CALL,
       .dst = a,
       .call = add_config,
       .help = "read KEY = VALUE lines first"},
      {.short_name = 'X',
       .arg = "KEY=VALUE",
       .kind = CLI_CALL,
       .dst = &a->props,
       .call = cli_kafka_props_add,
       .help = "a librdkafka property (repeatable; SASL/SSL and the rest)"},
      {.name = "kafka-config",
       .arg = "FILE",
       .kind = CLI_CALL,
       .dst = &a->props,
       .call = cli_kafka_props_load,
       .help = "librdkafka properties, one KEY=VALUE a line"},
      {.name = "metrics",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &a->metrics_path,
       .help = "append one JSON object per step (a figure that is\n"
               "NaN or Inf, as in a non-finite step, is null); lag_ms:\n"
               "from the event time of a window's last target to its\n"
               "step, the mean over the step's windows"},
      {.name = "series-out",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &a->series_path,
       .help = "at the end, write series,partition,windows,records,\n"
               "last_offset for every series (CSV, RFC 4180: a key\n"
               "holding a comma, a quote or a line break is quoted;\n"
               "NUL and bytes that are not UTF-8 are written \\xHH and a\n"
               "backslash \\\\; with several ranks each writes FILE.rankN\n"
               "for its own series)"},
      {.name = "params-out",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &a->params_path,
       .help = "at the end, write the flat parameters (float32, PyTorch\n"
               "nn.LSTM + Linear order; rank 0)"},
      {.name = "log-every",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &a->log_every,
       .value = BASE_V_INT(1, 1 << 30),
       .def = "one line per second",
       .help = "a log line every N steps"},
      {.name = "quiet", .kind = CLI_FLAG, .dst = &a->quiet, .help = "only the summary"},
      {.name = "log-format",
       .arg = "text|json",
       .kind = CLI_CALL,
       .call = cli_log_format_opt,
       .def = "text",
       .help = "log lines on stderr, each with an ISO 8601 UTC time and\n"
               "a level: text (TIME LEVEL lstream train: MESSAGE), or\n"
               "json, one object a line for log shippers (time, level,\n"
               "logger, rank under mpirun, msg); the summary on stdout\n"
               "keeps its format"},
  };
  memcpy(o, program, sizeof program);
  int const n = (int)(sizeof program / sizeof program[0]);
  return n + cli_watch_opts(&a->watch, o + n);
}

/* Every option of `lstream train`: a heading, the configuration keys
 * (spelled with dashes; the underscore spelling hidden), the program's.
 * opts [2 * keys + 16 + CLI_WATCH_OPTS], ks [keys]. */
static void train_opts(train_args_t *a, cli_opt_t *opts, key_opt_t *ks, char (*names)[40]) {
  int n = 0, i = 0;
  opts[n++] = (cli_opt_t){.help = "Model and data options (also KEY = VALUE lines in --config "
                                  "FILE; command-line\noptions override the file; dashes and "
                                  "underscores are alike):"};
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++, i++) {
    ks[i] = (key_opt_t){a, k->key, "", ""};
    ls_train_conf_get(a->conf, k->key, ks[i].def, sizeof ks[i].def);
    snprintf(ks[i].help, sizeof ks[i].help, "%s%s",
             k->flags & LS_KEY_FIXED   ? "[resume: fixed] "
             : k->flags & LS_KEY_NOTED ? "[resume: reported] "
                                       : "",
             k->help);
    snprintf(names[i], sizeof names[i], "%s", k->key);
    for (char *p = names[i]; *p; p++)
      *p = *p == '_' ? '-' : *p;
    cli_opt_t const o = {.name = names[i],
                         .arg = "V",
                         .kind = CLI_CALL,
                         .dst = &ks[i],
                         .call = set_key,
                         .help = ks[i].help,
                         .def = ks[i].def[0] ? ks[i].def : NULL};
    opts[n++] = o;
    if (strcmp(names[i], k->key) != 0) {
      opts[n] = o;
      opts[n].name = k->key;
      opts[n++].flags = CLI_HIDDEN;
    }
  }
  n += program_opts(a, opts + n);
  opts[n] = (cli_opt_t){0};
}

/* Applies the --config files, then the keys given as options, then the
 * Kafka properties. */
static int apply_conf(train_args_t *a) {
  for (int i = 0; i < a->n_configs; i++) {
    ls_err_t const err = ls_train_conf_read(a->conf, a->configs[i]);
    if (err != LS_OK) return cli_fail(err, "--config %s", a->configs[i]);
  }
  for (int i = 0; i < a->n_set; i++)
    if (ls_train_conf_set(a->conf, a->keys[i], a->values[i]) != LS_OK)
      return cli_usage_error("train", "%s", ls_last_error());
  for (int i = 0; i < a->props.n; i++)
    if (ls_train_conf_set_kafka(a->conf, a->props.items[i]) != LS_OK)
      return cli_usage_error("train", "%s", ls_last_error());
  return CLI_EXIT_OK;
}

/* Parses the command line into a (a->conf made here). Returns
 * CLI_EXIT_OK, CLI_DONE or an exit code after a message. */
static int train_parse(int argc, char **argv, train_args_t *a) {
  int keys = 0;
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++)
    keys++;
  cli_opt_t *const opts = calloc(2 * (size_t)keys + 16 + CLI_WATCH_OPTS, sizeof *opts);
  key_opt_t *const ks = calloc((size_t)keys, sizeof *ks);
  char(*names)[40] = calloc((size_t)keys, sizeof *names);
  a->configs = calloc((size_t)argc, sizeof *a->configs);
  a->keys = calloc((size_t)argc, sizeof *a->keys);
  a->values = calloc((size_t)argc, sizeof *a->values);
  int rc = CLI_EXIT_OK;
  if (!opts || !ks || !names || !a->configs || !a->keys || !a->values ||
      ls_train_conf_new(&a->conf) != LS_OK)
    rc = cli_fail(LS_ERR_NOMEM, "no memory");
  if (rc == CLI_EXIT_OK) {
    train_opts(a, opts, ks, names);
    cli_spec_t const spec = {
        "train", "--brokers HOST:PORT --topic NAME [OPTIONS]", ABOUT, opts, EPILOG, 0};
    cli_args_t args;
    rc = cli_parse(&spec, argc, argv, &args);
  }
  if (rc == CLI_EXIT_OK) rc = apply_conf(a);
  free(opts), free(ks), free(names);
  return rc;
}

static void train_args_free(train_args_t *a) {
  ls_train_conf_destroy(a->conf);
  cli_kafka_props_free(&a->props);
  free(a->configs), free(a->keys), free(a->values);
}

/* ------------------------------------------------------------------------ */
/* Running                                                                   */

/* The summary lines (rank 0 prints them; every rank takes part); *s
 * receives the summary (every rank's). Returns 0 once it is in *s. */
static int print_summary(ls_trainer_t *tr, const run_log_t *lg, int rank, ls_train_summary_t *s) {
  uint64_t dp = 0, ds = 0;
  if (ls_trainer_summary(tr, s) != LS_OK || ls_trainer_digest(tr, &dp, &ds) != LS_OK) return -1;
  if (rank != 0) return 0;
  double const busy = s->wait_s + s->compute_s;
  printf("summary steps=%lld windows=%lld records=%lld series=%lld updates=%lld rejected=%lld "
         "nonfinite=%lld resets=%lld seconds=%.3f windows_per_s=%.1f records_per_s=%.1f "
         "wait_share=%.4f comm_s=%.3f threads=%d\n",
         (long long)s->steps, (long long)s->windows, (long long)s->records, (long long)s->series,
         (long long)s->updates, (long long)s->rejected, (long long)s->nonfinite_steps,
         (long long)s->resets, s->elapsed_s, s->elapsed_s > 0 ? s->windows / s->elapsed_s : 0.0,
         s->elapsed_s > 0 ? s->records / s->elapsed_s : 0.0, busy > 0 ? s->wait_s / busy : 0.0,
         s->comm_s, s->threads);
  report_summary(stdout, s);
  printf("digest params=%016llx states=%016llx\n", (unsigned long long)dp, (unsigned long long)ds);
  printf("snapshots committed=%lld skipped=%lld resumed_from_step=%lld\n", (long long)s->snapshots,
         (long long)s->snapshots_skipped, (long long)s->resumed_step);
  printf("series held=%lld evicted=%lld evicted_records=%lld evicted_states=%lld resets=%lld "
         "late=%lld moved=%lld arrived=%lld partitions_added=%lld\n",
         (long long)s->series, (long long)s->evicted, (long long)s->evicted_records,
         (long long)s->evicted_states, (long long)s->resets, (long long)s->late,
         (long long)s->moved, (long long)s->arrived, (long long)s->partitions_added);
  printf("rejected");
  for (int r = 1; r < LS_REJECT__COUNT; r++)
    printf(" %s=%lld", ls_reject2str((ls_reject_t)r), (long long)s->rejected_by[r]);
  printf(" read=%lld dead_letters=%lld\n", (long long)s->read, (long long)s->dead_letters);
  if (s->predictions_next + s->predictions_eval + s->predictions_rows > 0)
    printf("predictions next=%lld eval=%lld published=%lld skipped=%lld rows=%lld waits=%lld "
           "during_steps=%lld\n",
           (long long)s->predictions_next, (long long)s->predictions_eval,
           (long long)s->predictions_published, (long long)s->predictions_skipped,
           (long long)s->predictions_rows, (long long)s->predictions_waits,
           (long long)s->predictions_during_steps);
  for (int j = 0; !lg->quiet && j < s->targets; j++) {
    const ls_target_figures_t *const t = &s->tail_target[j];
    if (t->count > 0 && t->base_sum > 0)
      cli_log(CLI_INFO, LOGGER,
              "feature %s: final MSE %.4g, last value %.4g (data units): the model's error is "
              "%.3f of the last value's (over the last fifth of event time)",
              t->name, mse(t->mse_sum, t->count), mse(t->base_sum, t->count),
              t->mse_sum / t->base_sum);
  }
  return 0;
}

/* 1 for a replay (--until end). */
static int until_end(const train_args_t *a) {
  char until[16] = "";
  ls_train_conf_get(a->conf, "until", until, sizeof until);
  return !strcmp(until, "end");
}

/* Runs a trainer to its end with the log lg, then the summary and the
 * files asked for. *rank receives its rank. */
static int train_run(const train_args_t *a, ls_trainer_t *tr, run_log_t *lg, int *rank) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  int world = 1;
  ls_trainer_rank(tr, rank, &world);
  if (*rank == 0 && ls_trainer_note(tr)[0] != '\0')
    cli_log(CLI_INFO, LOGGER, "%s", ls_trainer_note(tr));
  int const rc_watch = cli_watch_start(lg->watch, tr, lg->quiet);
  if (rc_watch != CLI_EXIT_OK) return rc_watch;
  lg->quiet |= *rank != 0; /* rank 0 prints; the figures it prints are every rank's */
  lg->tr = tr;
  lg->t0 = lg->last_t = base_now_s();
  ls_err_t const err = ls_trainer_run(tr, &stop_flag, on_step, lg);
  if (!lg->quiet && lg->steps > 0) print_line(lg, lg->last_step, base_now_s());
  /* On a failure of this rank alone the other ranks may be gone: no
   * collective calls then. After a last snapshot that failed everywhere,
   * the results are still written, and the exit status says it failed. */
  if (err != LS_OK && !ls_trainer_finished(tr))
    return cli_fail(err, "training stopped on rank %d", *rank);
  int rc = err == LS_OK ? CLI_EXIT_OK : cli_fail(err, "training ended on rank %d", *rank);
  ls_train_summary_t sum;
  if (print_summary(tr, lg, *rank, &sum) != 0)
    rc = cli_fail(LS_ERR_STATE, "no summary: %s", ls_last_error());
  else if (rc == CLI_EXIT_OK && until_end(a) && sum.read > 0 && sum.rejected == sum.read)
    rc = cli_fail(LS_ERR_CORRUPT,
                  "every one of the %lld records read was rejected (see the summary's rejected "
                  "line): nothing trained; check --format, --features and --fields",
                  (long long)sum.read);
  else if (a->series_path != NULL && write_series(tr, a->series_path, &sum) != CLI_EXIT_OK)
    rc = CLI_EXIT_FAIL;
  if (a->params_path != NULL && *rank == 0 && write_params(tr, a->params_path) != CLI_EXIT_OK)
    rc = CLI_EXIT_FAIL;
  return rc;
}

int cmd_train(int argc, char **argv) {
  train_args_t a = {0};
  run_log_t lg = {0};
  lg.interval_s = 1.0;
  int mpi_up = 0, rank = 0;
  ls_trainer_t *tr = NULL;
  int rc = train_parse(argc, argv, &a);
  /* Under mpirun, every line says which rank it comes from. */
  const char *rank_env = getenv("OMPI_COMM_WORLD_RANK");
  if (rank_env == NULL) rank_env = getenv("PMIX_RANK");
  if (ls_train_launched_ranks() > 1 && rank_env != NULL) cli_log_set_rank(atoi(rank_env));
  if (rc == CLI_EXIT_OK) ls_train_conf_set_warn_cb(a.conf, on_warning, NULL);
  lg.log_every = a.log_every;
  lg.quiet = a.quiet;
  lg.watch = &a.watch;
  if (rc == CLI_EXIT_OK) rc = cli_mpi_begin(&argc, &argv, &mpi_up);
  if (rc == CLI_EXIT_OK && a.metrics_path != NULL &&
      (lg.metrics = fopen(a.metrics_path, "a")) == NULL)
    rc = cli_fail(LS_ERR_IO, "cannot open --metrics %s", a.metrics_path);
  if (lg.metrics != NULL) setvbuf(lg.metrics, NULL, _IOLBF, 0); /* a line as each step ends */
  ls_err_t const err = rc == CLI_EXIT_OK ? ls_trainer_new(a.conf, &tr) : LS_OK;
  if (err != LS_OK) rc = cli_fail(err, "cannot start training");
  if (rc == CLI_EXIT_OK) rc = train_run(&a, tr, &lg, &rank);
  /* A failed rank ends the job first: teardown could wait on sums that the
   * other ranks will never join (cli_mpi_end aborts, and does not return). */
  if (rc != CLI_EXIT_OK && rc != CLI_DONE) cli_mpi_end(mpi_up, rc);
  if (lg.metrics != NULL) fclose(lg.metrics);
  cli_watch_stop(&a.watch);
  report_free(&lg.targets);
  ls_trainer_destroy(tr);
  train_args_free(&a);
  cli_mpi_end(mpi_up, rc);
  return rc == CLI_DONE ? CLI_EXIT_OK : rc;
}
