/*
 * The lstream program's log (train/cli/ only: library code never prints;
 * the commands turn what the libraries report into these lines). Every
 * line goes to stderr whole, with an ISO 8601 UTC time to the millisecond
 * and a level:
 *
 *   text (default): 2026-11-27T07:08:46.123Z WARN lstream train: MESSAGE
 *   json (--log-format json, for log shippers), one object a line:
 *     {"time":"2026-11-27T07:08:46.123Z","level":"warn",
 *      "logger":"lstream train","rank":1,"msg":"MESSAGE"}
 *
 * Under mpirun the rank is in every line ("rank": N in JSON, "rank N: "
 * before the message in text). Lines may come from any thread (the
 * consumer's warnings do); each is one write. Results (the summary,
 * --help) are not log lines: they keep their own format on stdout.
 */
#ifndef LSTREAM_TRAIN_CLI_LOG_H
#define LSTREAM_TRAIN_CLI_LOG_H

typedef enum cli_level_e { CLI_INFO, CLI_WARN, CLI_ERROR } cli_level_t;

/* The --log-format option's handler (a CLI_CALL): "text" or "json"; it
 * applies at once, so the lines after it on the command line are in it.
 * Returns CLI_EXIT_OK or CLI_EXIT_USAGE after a message. */
int cli_log_format_opt(void *unused, const char *value);

/* The rank every later line names (-1, the default: none). */
void cli_log_set_rank(int rank);

/* One line of `logger` ("lstream train", "lstream") at level: the message
 * as printf formats it (one line; a trailing newline is dropped). */
void cli_log(cli_level_t level, const char *logger, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif /* LSTREAM_TRAIN_CLI_LOG_H */
