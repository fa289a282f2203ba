/*
 * The lstream program's subcommands and the small helpers they share.
 * Driver code: this is where library errors become messages and exit codes.
 */
#ifndef LSTREAM_TRAIN_CLI_H
#define LSTREAM_TRAIN_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "base/value.h"
#include "log.h" /* cli_log: every line on stderr */
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
int cmd_broker(int argc, char **argv);  /* lstream broker (train/cli/cmd_broker.c) */
int cmd_produce(int argc, char **argv); /* lstream produce (train/cli/cmd_produce.c) */
int cmd_train(int argc, char **argv);   /* lstream train (train/cli/cmd_train.c) */
int cmd_inspect(int argc, char **argv); /* lstream inspect (train/cli/cmd_snapshot.c) */
int cmd_export(int argc, char **argv);  /* lstream export (train/cli/cmd_snapshot.c) */
int cmd_report(int argc, char **argv);  /* lstream report (train/cli/cmd_report.c) */
int cmd_predict(int argc, char **argv); /* lstream predict (train/cli/cmd_predict.c) */

/* `lstream bench engine ...` (train/cli/cmd_bench_engine.c). */
int cmd_bench_engine(int argc, char **argv);

/* ------------------------------------------------------------------------ */
/* Options: one table type for every command (options.c)                     */

typedef enum cli_kind_e {
  CLI_FLAG,  /* no value: *(int *)dst = 1 */
  CLI_TEXT,  /* *(const char **)dst = the value, argv's own (not copied) */
  CLI_VALUE, /* a typed value into dst, read as `value` says (base/value.h) */
  CLI_CALL   /* call(dst, value); it returns CLI_EXIT_OK, or an exit code after
                its message */
} cli_kind_t;

/* cli_opt_t.flags */
enum { CLI_REQUIRED = 1, CLI_HIDDEN = 2, CLI_NO_DEFAULT = 4 };

/* One option: --name VALUE or --name=VALUE (and -X VALUE with a short name);
 * a flag takes no value. An entry with no name but help is a heading in the
 * help; an all-zero entry ends a table. */
typedef struct cli_opt_s {
  const char *name; /* the long name, without "--" */
  int short_name;   /* 'X', or 0 */
  const char *arg;  /* the value's name in the help ("N", "FILE"); NULL for a flag */
  cli_kind_t kind;
  void *dst;                                 /* where the value goes */
  base_value_t value;                        /* CLI_VALUE: how it is read and checked */
  int (*call)(void *dst, const char *value); /* CLI_CALL */
  const char *help;                          /* lines separated by '\n' */
  const char *def;   /* the default shown in the help; NULL: the value dst holds (CLI_VALUE) */
  unsigned flags;    /* CLI_REQUIRED: an error when not given; CLI_HIDDEN: not in the help;
                        CLI_NO_DEFAULT: no default shown */
  const char **seen; /* not NULL: receives "name" when the option is given, if still NULL */
} cli_opt_t;

/* spec.positional for a command that dispatches to subcommands: parsing
 * stops at its first positional argument (cli_args_t.sub). */
#define CLI_SUBCOMMAND     (-1)
#define CLI_MAX_POSITIONAL 64

/* A command: its name ("train", "bench engine"), the rest of its usage line,
 * text before and after its options in the help, its options. */
typedef struct cli_spec_s {
  const char *cmd;
  const char *usage;
  const char *about; /* may be NULL */
  const cli_opt_t *opts;
  const char *epilog; /* may be NULL */
  int positional;     /* positional arguments allowed, or CLI_SUBCOMMAND */
} cli_spec_t;

/* What cli_parse leaves besides the options' values. */
typedef struct cli_args_s {
  const char *pos[CLI_MAX_POSITIONAL]; /* the positional arguments */
  int n;
  int sub; /* CLI_SUBCOMMAND: argv index of the subcommand, 0 if none */
} cli_args_t;

/* cli_parse's return after -h/--help printed the help: exit 0. */
enum { CLI_DONE = -1 };

/* Parses argv [argc] (argv[0]: the command) with getopt_long against
 * spec's options, applying each in order. Returns CLI_EXIT_OK, CLI_DONE, or
 * an exit code after a message: an unknown or abbreviated option, a missing
 * value, a value that is not what the option takes ("--window '0':
 * expected an integer in [1, 65536]"), a required option not given, too
 * many positional arguments. */
int cli_parse(const cli_spec_t *spec, int argc, char **argv, cli_args_t *args);

/* The command's help: usage, about, every option with its help and default,
 * the epilog. */
void cli_help(FILE *f, const cli_spec_t *spec);

/* Subcommands' one-line summaries as lines of text, for a help's epilog. */
void cli_commands_text(const cli_command_t *cmds, int n, char *buf, size_t size);

/* `lstream bench ingest ...` (train/cli/cmd_bench_ingest.c). */
int cmd_bench_ingest(int argc, char **argv);

/* `lstream bench snapshot ...` (train/cli/cmd_bench_snapshot.c). */
int cmd_bench_snapshot(int argc, char **argv);
/* lstream bench comm (train/cli/cmd_bench_comm.c) */
int cmd_bench_comm(int argc, char **argv);
/* lstream bench live (train/cli/cmd_bench_live.c) */
int cmd_bench_live(int argc, char **argv);

/* Kafka client properties from `-X key=value` and `--kafka-config FILE`
 * (ls_kafka_config_read's format), in the order given so that later ones
 * win; items [n] are "key=value" strings for the library's settings
 * arguments. Zero-initialise; free with _free. */
typedef struct cli_kafka_props_s {
  char **items;
  int n, cap;
} cli_kafka_props_t;

/* Each returns CLI_EXIT_OK, or an exit code after printing what is wrong
 * (with FILE:LINE for a file); props is a cli_kafka_props_t (CLI_CALL
 * handlers of -X and --kafka-config). */
int cli_kafka_props_add(void *props, const char *kv);
int cli_kafka_props_load(void *props, const char *path);
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

/* path = arg when it is a snapshot (it holds a manifest), else the newest
 * good snapshot under arg (said on note), those passed over reported on
 * stderr; CLI_EXIT_OK or an exit code after a message
 * (train/cli/cmd_snapshot.c). */
int cli_snapshot_resolve(const char *cmd, const char *arg, char *path, size_t size, FILE *note);

/* Median of n doubles (sorts the array in place). */
double cli_median(double *v, int n);

/* The program's allocator, for --version: "jemalloc <version>" where the
 * build linked it and malloc resolves to it; "another malloc (jemalloc
 * <version> linked, not in use)" where it is linked but malloc resolves
 * elsewhere (an LD_PRELOAD); else "system malloc" (not linked, or its
 * version unreadable) (train/cli/allocator.c). */
void cli_allocator(char *buf, size_t size);

/* MPI around a command started by mpirun on several ranks: cli_mpi_begin
 * initialises it (*up = 1) or does nothing (one rank); returns CLI_EXIT_OK
 * or a failure it has printed. cli_mpi_end aborts the job when rc is a
 * failure (the other ranks must not wait on this one; it does not return
 * then) and otherwise finalises. */
int cli_mpi_begin(int *argc, char ***argv, int *up);
void cli_mpi_end(int up, int rc);

#endif /* LSTREAM_TRAIN_CLI_H */
