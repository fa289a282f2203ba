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
    {"comm", "time the gradient all-reduce across the ranks of mpirun (mpi, nccl)",
     cmd_bench_comm},
    {"snapshot", "size and speed of snapshots of many series' states (zstd levels, shuffling)",
     cmd_bench_snapshot},
};
static const int n_benches = (int)(sizeof benches / sizeof benches[0]);

int cmd_bench(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    FILE *const f = argc < 2 ? stderr : stdout;
    fprintf(f, "Usage: lstream bench WHAT [OPTIONS]   (lstream bench WHAT --help for each)\n\n");
    for (int i = 0; i < n_benches; i++)
      fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].summary);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  for (int i = 0; i < n_benches; i++)
    if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
  return cli_usage_error("bench", "unknown benchmark '%s'", argv[1]);
}
