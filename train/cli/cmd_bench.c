/*
 * `lstream bench WHAT`: speed measurements users run on their own hardware.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const cli_command_t benches[] = {
    {"engine", "time full training steps (forward, loss, backward, clip, Adam)", cmd_bench_engine},
    {"ingest", "time decode + validate + window of a topic, or of records in memory",
     cmd_bench_ingest},
    {"comm", "time the gradient all-reduce across the ranks of mpirun (mpi, nccl)", cmd_bench_comm},
    {"snapshot", "size and speed of snapshots of many series' states (zstd levels, shuffling)",
     cmd_bench_snapshot},
    {"live", "produce-to-forecast latency, live, on the embedded broker", cmd_bench_live},
};
static const int n_benches = (int)(sizeof benches / sizeof benches[0]);

int cmd_bench(int argc, char **argv) {
  char list[1024], epilog[1100];
  cli_commands_text(benches, n_benches, list, sizeof list);
  snprintf(epilog, sizeof epilog, "Benchmarks (lstream bench WHAT --help for each):\n%s", list);
  cli_opt_t const opts[] = {{0}};
  cli_spec_t const spec = {"bench", "WHAT [OPTIONS]", NULL, opts, epilog, CLI_SUBCOMMAND};
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc != CLI_EXIT_OK) return rc == CLI_DONE ? CLI_EXIT_OK : rc;
  if (args.sub == 0) {
    cli_help(stderr, &spec);
    return CLI_EXIT_USAGE;
  }
  for (int i = 0; i < n_benches; i++)
    if (!strcmp(argv[args.sub], benches[i].name))
      return benches[i].run(argc - args.sub, argv + args.sub);
  return cli_usage_error("bench", "unknown benchmark '%s'", argv[args.sub]);
}
