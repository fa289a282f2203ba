/*
 * `lstream train`: trains the model on a topic, a log line per second (or
 * per N steps), optional JSON-lines metrics, and a summary at the end.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli.h"
#include "lstream/train.h"


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
  int64_t last_step; /* the newest step seen */
  double t0, last_t;
  /* Since the last log line. */
  int64_t steps, windows, records;
  double loss, base, count, wait_s, compute_s;
} run_log_t;

static void usage(FILE *f) {
  fprintf(f,
          "Usage: lstream train --brokers HOST:PORT --topic NAME [OPTIONS]\n"
          "\n"
          "Trains a stacked LSTM on the series of a Kafka topic with truncated BPTT,\n"
          "carrying every series' hidden state from one window to the next. Each\n"
          "step's loss is measured before its update (prequential, test-then-train)\n"
          "and printed beside the last-value baseline on the same targets.\n"
          "\n"
          "Model and data options (also KEY = VALUE lines in --config FILE; command-line\n"
          "options override the file; dashes and underscores are alike):\n");
  for (const ls_train_key_t *k = ls_train_conf_keys(); k->key != NULL; k++) {
    char def[64] = "";
    ls_train_conf_t *c = NULL;
    if (ls_train_conf_new(&c) == LS_OK) ls_train_conf_get(c, k->key, def, sizeof def);
    ls_train_conf_destroy(c);
    char opt[40];
    snprintf(opt, sizeof opt, "--%s", k->key);
    for (char *p = opt + 2; *p; p++) *p = *p == '_' ? '-' : *p;
    fprintf(f, "  %-18s %s%s%s%s\n", opt, k->help, def[0] ? " [" : "", def, def[0] ? "]" : "");
  }
  fprintf(f,
          "\n"
          "Program options:\n"
          "  --config FILE        read KEY = VALUE lines first\n"
          "  -X KEY=VALUE         a librdkafka property (repeatable; SASL/SSL and the rest)\n"
          "  --kafka-config FILE  librdkafka properties, one KEY=VALUE a line\n"
          "  --metrics FILE       append one JSON object per step\n"
          "  --series-out FILE    at the end, write series,partition,windows,records,\n"
          "                       last_offset for every series (CSV; with several ranks\n"
          "                       each writes FILE.rankN for its own series)\n"
          "  --params-out FILE    at the end, write the flat parameters (float32, PyTorch\n"
          "                       nn.LSTM + Linear order; rank 0)\n"
          "  --log-every N        a log line every N steps (default: one per second)\n"
          "  --quiet              only the summary\n"
          "  -h, --help           this text\n"
          "\n"
          "The log line: step, windows in the step, prequential MSE, baseline MSE,\n"
          "windows/s, records/s and the share of time spent waiting for data, over the\n"
          "steps since the previous line. At the end (a replay's end, or SIGINT/SIGTERM)\n"
          "a summary gives the MSE over the whole run and over its last fifth (final),\n"
          "the series, and digests of the parameters and states (equal digests,\n"
          "bit-identical models).\n"
          "\n"
          "Several replicas: mpirun -np N lstream train ... (rank r reads the partitions\n"
          "p with p %% N == r; gradients are summed with MPI; rank 0 prints).\n");
}

static double mse(double sum, double count) { return count > 0 ? sum / count : 0.0; }

static void print_line(run_log_t *lg, int64_t step, double now) {
  double const dt = now - lg->last_t > 0 ? now - lg->last_t : 1e-9;
  double const busy = lg->wait_s + lg->compute_s;
  fprintf(stderr,
          "step=%lld windows=%lld loss=%.6g baseline=%.6g windows_per_s=%.0f records_per_s=%.0f "
          "wait=%.3f\n",
          (long long)step, (long long)lg->windows, mse(lg->loss, lg->count),
          mse(lg->base, lg->count), lg->windows / dt, lg->records / dt,
          busy > 0 ? lg->wait_s / busy : 0.0);
  lg->steps = lg->windows = lg->records = 0;
  lg->loss = lg->base = lg->count = lg->wait_s = lg->compute_s = 0;
  lg->last_t = now;
}

static int on_step(void *opaque, const ls_step_stats_t *s) {
  run_log_t *const lg = opaque;
  double const now = base_now_s();
  lg->steps++;
  lg->last_step = s->step;
  lg->windows += s->windows;
  lg->records += s->records;
  lg->loss += s->loss_sum;
  lg->base += s->baseline_sum;
  lg->count += s->count;
  lg->wait_s += s->wait_s;
  lg->compute_s += s->compute_s;
  if (lg->metrics != NULL) {
    fprintf(lg->metrics,
            "{\"step\":%lld,\"time_s\":%.6f,\"windows\":%d,\"records\":%lld,\"loss\":%.9g,"
            "\"baseline\":%.9g,\"count\":%.0f,\"updated\":%d,\"grad_norm\":%.6g,\"lr\":%.6g,"
            "\"compute_s\":%.6f,\"wait_s\":%.6f}\n",
            (long long)s->step, now - lg->t0, s->windows, (long long)s->records,
            mse(s->loss_sum, s->count), mse(s->baseline_sum, s->count), s->count, s->updated,
            s->updated ? (double)s->grad_norm : 0.0, s->updated ? (double)s->lr : 0.0,
            s->compute_s, s->wait_s);
  }
  if (!lg->quiet && s->snapshot_committed >= 0)
    fprintf(stderr, "lstream train: snapshot of step %lld committed\n",
            (long long)s->snapshot_committed);
  if (!lg->quiet && s->snapshot_skipped)
    fprintf(stderr,
            "lstream train: step %lld: snapshot skipped, the previous one is still being "
            "written (snapshot every fewer steps, or a lower --snapshot-level)\n",
            (long long)s->step);
  if (s->snapshot_error != NULL) /* printed even when quiet: it needs attention */
    fprintf(stderr, "lstream train: warning: %s\n", s->snapshot_error);
  int const due = lg->log_every > 0 ? lg->steps >= lg->log_every : now - lg->last_t >= lg->interval_s;
  if (!lg->quiet && due) print_line(lg, s->step, now);
  return 0;
}

/* --series-out: one CSV line per series. */
static int write_series(ls_trainer_t *tr, const char *base) {
  int rank = 0, world = 1;
  ls_trainer_rank(tr, &rank, &world);
  char path[4096];
  if (world > 1) snprintf(path, sizeof path, "%s.rank%d", base, rank);
  else snprintf(path, sizeof path, "%s", base);
  FILE *f = fopen(path, "w");
  if (f == NULL) return cli_fail(LS_ERR_IO, "cannot write --series-out %s", path);
  fprintf(f, "series,partition,windows,records,last_offset\n");
  int64_t const n = ls_trainer_series_count(tr);
  for (int64_t i = 0; i < n; i++) {
    ls_series_info_t s;
    if (ls_trainer_series_info(tr, i, &s) != LS_OK) break;
    fprintf(f, "%s,%d,%lld,%lld,%lld\n", s.key, (int)s.partition, (long long)s.windows,
            (long long)s.records, (long long)s.last_offset);
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

/* Applies --config FILE before everything else, so that options override it. */
static int apply_config_files(ls_train_conf_t *conf, int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--config")) {
      ls_err_t const err = ls_train_conf_read(conf, argv[i + 1]);
      if (err != LS_OK) return cli_fail(err, "--config %s", argv[i + 1]);
    }
  return CLI_EXIT_OK;
}

int cmd_train(int argc, char **argv) {
  ls_train_conf_t *conf = NULL;
  cli_kafka_props_t props = {0};
  run_log_t lg = {0};
  lg.interval_s = 1.0;
  const char *metrics_path = NULL, *series_path = NULL, *params_path = NULL;
  int mpi_up = 0, rank = 0;
  ls_trainer_t *tr = NULL;
  int rc = CLI_EXIT_OK;
  if (ls_train_conf_new(&conf) != LS_OK) return cli_fail(LS_ERR_NOMEM, "no memory");
  rc = apply_config_files(conf, argc, argv);
  for (int i = 1; i < argc && rc == CLI_EXIT_OK; i++) {
    const char *const a = argv[i];
    const char *const v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      goto done;
    } else if (!strcmp(a, "--quiet")) {
      lg.quiet = 1;
      continue;
    } else if (strncmp(a, "--", 2) != 0 && strcmp(a, "-X") != 0) {
      rc = cli_usage_error("train", "unexpected argument '%s'", a);
    } else if (v == NULL) {
      rc = cli_usage_error("train", "option '%s' needs a value", a);
    } else if (!strcmp(a, "--config")) {
      /* applied first, above */
    } else if (!strcmp(a, "-X")) {
      rc = cli_kafka_props_add(&props, v);
    } else if (!strcmp(a, "--kafka-config")) {
      rc = cli_kafka_props_load(&props, v);
    } else if (!strcmp(a, "--metrics")) {
      metrics_path = v;
    } else if (!strcmp(a, "--series-out")) {
      series_path = v;
    } else if (!strcmp(a, "--params-out")) {
      params_path = v;
    } else if (!strcmp(a, "--log-every")) {
      if (cli_parse_int(v, 1, 1 << 30, &lg.log_every))
        rc = cli_usage_error("train", "--log-every '%s': expected a positive integer", v);
    } else {
      ls_err_t const err = ls_train_conf_set(conf, a + 2, v);
      if (err == LS_ERR_UNKNOWN_KEY) rc = cli_usage_error("train", "unknown option '%s'", a);
      else if (err != LS_OK) rc = cli_usage_error("train", "%s", ls_last_error());
    }
    i++;
  }
  for (int i = 0; i < props.n && rc == CLI_EXIT_OK; i++) {
    ls_err_t const err = ls_train_conf_set_kafka(conf, props.items[i]);
    if (err != LS_OK) rc = cli_usage_error("train", "%s", ls_last_error());
  }
  if (rc != CLI_EXIT_OK) goto done;
  if ((rc = cli_mpi_begin(&argc, &argv, &mpi_up)) != CLI_EXIT_OK) goto done;
  if (metrics_path != NULL && (lg.metrics = fopen(metrics_path, "a")) == NULL) {
    rc = cli_fail(LS_ERR_IO, "cannot open --metrics %s", metrics_path);
    goto done;
  }
  ls_err_t err = ls_trainer_new(conf, &tr);
  if (err != LS_OK) {
    rc = cli_fail(err, "cannot start training");
    goto done;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  int world = 1;
  ls_trainer_rank(tr, &rank, &world);
  if (rank == 0 && ls_trainer_note(tr)[0] != '\0')
    fprintf(stderr, "lstream train: %s\n", ls_trainer_note(tr));
  lg.quiet |= rank != 0; /* rank 0 prints; the figures it prints are every rank's */
  lg.tr = tr;
  lg.t0 = lg.last_t = base_now_s();
  err = ls_trainer_run(tr, &stop_flag, on_step, &lg);
  if (!lg.quiet && lg.steps > 0) print_line(&lg, lg.last_step, base_now_s());
  if (err != LS_OK) {
    rc = cli_fail(err, "training stopped on rank %d", rank);
    goto done; /* the other ranks may be gone: no collective calls now */
  }

  ls_train_summary_t s;
  uint64_t dp = 0, ds = 0;
  if (ls_trainer_summary(tr, &s) == LS_OK && ls_trainer_digest(tr, &dp, &ds) == LS_OK &&
      rank == 0) {
    double const busy = s.wait_s + s.compute_s;
    printf("summary steps=%lld windows=%lld records=%lld series=%lld updates=%lld rejected=%lld "
           "seconds=%.3f windows_per_s=%.1f records_per_s=%.1f wait_share=%.4f comm_s=%.3f\n",
           (long long)s.steps, (long long)s.windows, (long long)s.records, (long long)s.series,
           (long long)s.updates, (long long)s.rejected, s.elapsed_s,
           s.elapsed_s > 0 ? s.windows / s.elapsed_s : 0.0,
           s.elapsed_s > 0 ? s.records / s.elapsed_s : 0.0, busy > 0 ? s.wait_s / busy : 0.0,
           s.comm_s);
    printf("loss mse=%.6g baseline=%.6g final_mse=%.6g final_baseline=%.6g final_steps=%lld "
           "final_ratio=%.4f\n",
           mse(s.loss_sum, s.count), mse(s.baseline_sum, s.count),
           mse(s.tail_loss_sum, s.tail_count), mse(s.tail_baseline_sum, s.tail_count),
           (long long)s.tail_steps,
           s.tail_baseline_sum > 0 ? s.tail_loss_sum / s.tail_baseline_sum : 0.0);
    printf("digest params=%016llx states=%016llx\n", (unsigned long long)dp,
           (unsigned long long)ds);
    printf("snapshots committed=%lld skipped=%lld resumed_from_step=%lld\n",
           (long long)s.snapshots, (long long)s.snapshots_skipped, (long long)s.resumed_step);
    if (!lg.quiet && s.tail_count > 0 && s.tail_baseline_sum > 0)
      fprintf(stderr,
              "lstream train: final prequential MSE %.4g, last-value baseline %.4g: the model's "
              "error is %.3g of the baseline's (over the last %lld steps)\n",
              mse(s.tail_loss_sum, s.tail_count), mse(s.tail_baseline_sum, s.tail_count),
              s.tail_loss_sum / s.tail_baseline_sum, (long long)s.tail_steps);
  }
  if (series_path != NULL && write_series(tr, series_path) != CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
  if (params_path != NULL && rank == 0 && write_params(tr, params_path) != CLI_EXIT_OK)
    rc = CLI_EXIT_FAIL;
done:
  /* A failed rank ends the job first: teardown could wait on sums that the
   * other ranks will never join (cli_mpi_end aborts, and does not return). */
  if (rc != CLI_EXIT_OK) cli_mpi_end(mpi_up, rc);
  if (lg.metrics != NULL) fclose(lg.metrics);
  ls_trainer_destroy(tr);
  cli_kafka_props_free(&props);
  ls_train_conf_destroy(conf);
  cli_mpi_end(mpi_up, rc);
  return rc;
}
