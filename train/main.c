/*
 * lstream: the command-line program. Dispatches `lstream COMMAND ...` to the
 * subcommands in train/cmd_*.c.
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
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static void print_help(FILE *f) {
  fprintf(f,
          "lstream %s: a stateful streaming trainer for time series.\n"
          "\n"
          "Usage: lstream COMMAND [OPTIONS]\n"
          "       lstream COMMAND --help   explains a command and its options\n"
          "\n"
          "Commands:\n",
          LSTREAM_VERSION);
  for (int i = 0; i < n_commands; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n"
             "Options:\n"
             "  -h, --help     this text\n"
             "  -V, --version  the version\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_help(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *const cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    print_help(stdout);
    return CLI_EXIT_OK;
  }
  if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
    printf("lstream %s\n", LSTREAM_VERSION);
    return CLI_EXIT_OK;
  }
  for (int i = 0; i < n_commands; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "lstream: unknown command '%s' (try `lstream --help`)\n", cmd);
  return CLI_EXIT_USAGE;
}
