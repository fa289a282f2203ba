/*
 * `lstream train --http / --tensorboard` (train/cli/watch.h).
 */
#include "watch.h"

#include <stdio.h>
#include <string.h>

int cli_watch_opts(cli_watch_t *w, cli_opt_t *o) {
  monitor_conf_init(&w->conf);
  cli_opt_t const opts[CLI_WATCH_OPTS] = {
      {.help = "Watching a run:"},
      {.name = "http",
       .arg = "[ADDR:]PORT",
       .kind = CLI_TEXT,
       .dst = &w->conf.http,
       .help = "serve Prometheus /metrics and /health on ADDR:PORT\n"
               "(127.0.0.1 without ADDR; 0.0.0.0 or [::] for every\n"
               "interface; PORT 0: any free port, printed). Under\n"
               "mpirun rank r serves its own figures on PORT + r,\n"
               "each sample labelled rank=\"r\"",
       .def = "off"},
      {.name = "tensorboard",
       .arg = "DIR",
       .kind = CLI_TEXT,
       .dst = &w->conf.tensorboard,
       .help = "write TensorBoard event files into DIR (rank 0):\n"
               "losses, ratio, per target its MSE, the last\n"
               "value's and their ratio in the data's units\n"
               "(target_F/...), learning rate, gradient norm,\n"
               "records/s, lag; steps go on from a snapshot when\n"
               "the run resumes",
       .def = "off"},
      {.name = "tensorboard-every",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &w->conf.tensorboard_every,
       .value = BASE_V_INT(1, 1 << 30),
       .help = "a TensorBoard record every N steps"},
      {.name = "health-stall",
       .arg = "S",
       .kind = CLI_VALUE,
       .dst = &w->conf.health_stall_s,
       .value = BASE_V_DBL(0.001, 1e9),
       .help = "/health answers 503 when the step loop has not\n"
               "turned (a step, or an idle turn in live mode) for\n"
               "S seconds"},
      {.name = "health-snapshot-age",
       .arg = "S",
       .kind = CLI_VALUE,
       .dst = &w->conf.health_snapshot_s,
       .value = BASE_V_DBL(0.001, 1e9),
       .help = "with --snapshot-dir: /health answers 503 when\n"
               "the newest snapshot (the start, before one) is\n"
               "older than S seconds"},
  };
  memcpy(o, opts, sizeof opts);
  return CLI_WATCH_OPTS;
}

int cli_watch_start(cli_watch_t *w, ls_trainer_t *tr, int quiet) {
  if (w->conf.http == NULL && w->conf.tensorboard == NULL) return CLI_EXIT_OK;
  ls_err_t const err = monitor_new(&w->conf, tr, &w->mon);
  if (err != LS_OK) return cli_fail(err, "cannot start watching the run");
  int rank = 0, world = 1;
  ls_trainer_rank(tr, &rank, &world);
  if (!quiet && w->conf.http != NULL) {
    cli_log(CLI_INFO, "lstream train", "rank %d serves %s/metrics and %s/health", rank,
            monitor_url(w->mon), monitor_url(w->mon));
    cli_log(CLI_INFO, "lstream train", "rank %d's live page: %s/", rank, monitor_url(w->mon));
  }
  return CLI_EXIT_OK;
}

void cli_watch_step(cli_watch_t *w, const ls_step_stats_t *st) {
  if (w->mon == NULL) return;
  if (monitor_step(w->mon, st) != LS_OK && !w->warned) {
    cli_log(CLI_WARN, "lstream train", "%s (training goes on)", ls_last_error());
    w->warned = 1;
  }
}

void cli_watch_stop(cli_watch_t *w) {
  monitor_destroy(w->mon);
  w->mon = NULL;
}
