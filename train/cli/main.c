/*
 * lstream: the command-line program. Dispatches `lstream COMMAND ...` to the
 * subcommands in train/cli/cmd_*.c.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#ifndef LSTREAM_VERSION
#define LSTREAM_VERSION "unknown"
#endif

static const cli_command_t commands[] = {
    {"train", "train the model on a topic, carrying each series' state", cmd_train},
    {"bench", "measure speeds: engine steps, ingest, snapshots", cmd_bench},
    {"broker", "host an embedded Kafka cluster for development and tests", cmd_broker},
    {"produce", "write a synthetic market feed (or a CSV file) into a Kafka topic", cmd_produce},
    {"inspect", "verify and describe a snapshot", cmd_inspect},
    {"export", "write a snapshot's model and states as safetensors files", cmd_export},
    {"report", "evaluate a run's forecasts: measures, plots, an HTML page", cmd_report},
    {"predict", "a series' forecasts from a snapshot, as the trainer made them", cmd_predict},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

int main(int argc, char **argv) {
  int version = 0;
  char about[128], list[1024], epilog[1200];
  snprintf(about, sizeof about, "lstream %s: a stateful streaming trainer for time series.\n",
           LSTREAM_VERSION);
  cli_commands_text(commands, n_commands, list, sizeof list);
  snprintf(epilog, sizeof epilog, "Commands:\n%s", list);
  cli_opt_t const opts[] = {
      {.name = "version",
       .short_name = 'V',
       .kind = CLI_FLAG,
       .dst = &version,
       .help = "the version and the allocator the program runs on"},
      {0},
  };
  cli_spec_t const spec = {"",
                           "COMMAND [OPTIONS]\n       lstream COMMAND --help   explains a "
                           "command and its options",
                           about,
                           opts,
                           epilog,
                           CLI_SUBCOMMAND};
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc == CLI_DONE) return CLI_EXIT_OK;
  if (rc != CLI_EXIT_OK) return rc;
  if (version) {
    char alloc[128];
    cli_allocator(alloc, sizeof alloc);
    printf("lstream %s (allocator: %s)\n", LSTREAM_VERSION, alloc);
    return CLI_EXIT_OK;
  }
  if (args.sub == 0) {
    cli_help(stderr, &spec);
    return CLI_EXIT_USAGE;
  }
  const char *const cmd = argv[args.sub];
  if (!strcmp(cmd, "help")) {
    cli_help(stdout, &spec);
    return CLI_EXIT_OK;
  }
  for (int i = 0; i < n_commands; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - args.sub, argv + args.sub);
  cli_log(CLI_ERROR, "lstream", "unknown command '%s' (try `lstream --help`)", cmd);
  return CLI_EXIT_USAGE;
}
