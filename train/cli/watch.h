/*
 * `lstream train`'s options for watching a run (--http, --tensorboard,
 * --health-*) and their hooks into it (train/monitor.h does the work).
 * Driver code: errors become messages here.
 */
#ifndef LSTREAM_TRAIN_CLI_WATCH_H
#define LSTREAM_TRAIN_CLI_WATCH_H

#include "cli.h"
#include "lstream/train.h"
#include "monitor.h"

typedef struct cli_watch_s {
  monitor_conf_t conf;
  monitor_t *mon;
  int warned; /* a failed step was reported */
} cli_watch_t;

/* Most options cli_watch_opts adds. */
#define CLI_WATCH_OPTS 6

/* Fills the monitor's defaults and up to CLI_WATCH_OPTS options into o;
 * returns how many. */
int cli_watch_opts(cli_watch_t *w, cli_opt_t *o);

/* Starts watching tr when an option asked for it; says where (rank 0
 * unless quiet). Returns CLI_EXIT_OK or an exit code after a message. */
int cli_watch_start(cli_watch_t *w, ls_trainer_t *tr, int quiet);

/* After every step (from the step callback); a failure is printed once. */
void cli_watch_step(cli_watch_t *w, const ls_step_stats_t *st);

/* Stops watching: before the trainer is destroyed. */
void cli_watch_stop(cli_watch_t *w);

#endif /* LSTREAM_TRAIN_CLI_WATCH_H */
