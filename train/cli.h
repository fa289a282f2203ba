/*
 * The lstream program's subcommands and the small helpers they share.
 * Driver code: this is where library errors become messages and exit codes.
 */
#ifndef LSTREAM_TRAIN_CLI_H
#define LSTREAM_TRAIN_CLI_H

#include <stdint.h>

#include "lstream/error.h"

/* Exit codes of every subcommand. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* A subcommand: `lstream NAME ARGS...`; argv[0] is NAME. */
typedef struct cli_command_s {
  const char *name;
  const char *summary; /* one line for `lstream --help` */
  int (*run)(int argc, char **argv);
} cli_command_t;

int cmd_bench(int argc, char **argv);   /* lstream bench engine|... */
int cmd_broker(int argc, char **argv);  /* lstream broker (train/cmd_broker.c) */
int cmd_produce(int argc, char **argv); /* lstream produce (train/cmd_produce.c) */
int cmd_train(int argc, char **argv);   /* lstream train (train/cmd_train.c) */
int cmd_inspect(int argc, char **argv); /* lstream inspect (train/cmd_snapshot.c) */
int cmd_export(int argc, char **argv);  /* lstream export (train/cmd_snapshot.c) */

/* `lstream bench engine ...` (train/cmd_bench_engine.c). */
int cmd_bench_engine(int argc, char **argv);

/* `lstream bench ingest ...` (train/cmd_bench_ingest.c). */
int cmd_bench_ingest(int argc, char **argv);

/* `lstream bench snapshot ...` (train/cmd_bench_snapshot.c). */
int cmd_bench_snapshot(int argc, char **argv);
/* lstream bench comm (train/cmd_bench_comm.c) */
int cmd_bench_comm(int argc, char **argv);

/* Kafka client properties from `-X key=value` and `--kafka-config FILE`
 * (ls_kafka_config_read's format), in the order given so that later ones
 * win; items [n] are "key=value" strings for the library's settings
 * arguments. Zero-initialise; free with _free. */
typedef struct cli_kafka_props_s {
  char **items;
  int n, cap;
} cli_kafka_props_t;

/* Each returns CLI_EXIT_OK, or an exit code after printing what is wrong
 * (with FILE:LINE for a file). */
int cli_kafka_props_add(cli_kafka_props_t *props, const char *kv);
int cli_kafka_props_load(cli_kafka_props_t *props, const char *path);
void cli_kafka_props_free(cli_kafka_props_t *props);

/* Prints "lstream: " + the message + the library's last error to stderr and
 * returns CLI_EXIT_FAIL. */
int cli_fail(ls_err_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prints "lstream NAME: " + message + "(try `lstream NAME --help`)" and
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Strict number parsing: the whole string must be a number within
 * [min, max]. Return 0 on success, -1 otherwise. */
int cli_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int cli_parse_int(const char *s, int min, int max, int *out);
int cli_parse_double(const char *s, double min, double max, double *out);

/* Median of n doubles (sorts the array in place). */
double cli_median(double *v, int n);

/* MPI around a command started by mpirun on several ranks: cli_mpi_begin
 * initialises it (*up = 1) or does nothing (one rank); returns CLI_EXIT_OK
 * or a failure it has printed. cli_mpi_end aborts the job when rc is a
 * failure (the other ranks must not wait on this one; it does not return
 * then) and otherwise finalises. */
int cli_mpi_begin(int *argc, char ***argv, int *up);
void cli_mpi_end(int up, int rc);

#endif /* LSTREAM_TRAIN_CLI_H */
