/*
 * Child programs for the ingest tests: runs a command with a deadline and
 * captures what it prints (kcat, `lstream produce`), or runs one in the
 * background (`lstream broker`) and reads its output line by line. Waits on
 * conditions (a line, an exit) with generous deadlines, never on fixed
 * sleeps.
 */
#ifndef LSTREAM_TESTS_INGEST_PROC_H
#define LSTREAM_TESTS_INGEST_PROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct proc_result_s {
  int status; /* exit code; -1 if killed by a signal or past its deadline */
  char *out;  /* stdout, NUL-terminated (may also hold NULs) */
  size_t out_len;
  char *err; /* stderr, NUL-terminated */
} proc_result_t;

/* A child with its stdin, stdout and stderr on pipes. */
typedef struct proc_child_s {
  pid_t pid;
  int in_fd, out_fd, err_fd;
} proc_child_t;

/* Starts argv (argv[0] looked up in PATH). Returns 0 on success. */
int proc_start(proc_child_t *c, const char *const argv[]);

/* Reads fd up to the next newline into line (NUL-terminated, newline
 * dropped), waiting up to timeout_s. Returns 0 on success, -1 at EOF, on
 * error, past the deadline or if the line does not fit. */
int proc_read_line(int fd, char *line, size_t size, double timeout_s);

/* Closes the child's stdin, collects the rest of its output until it exits
 * (killing it past timeout_s), and closes its pipes. res may be NULL. */
void proc_finish(proc_child_t *c, double timeout_s, proc_result_t *res);

/* proc_start + input (NULL: none) on stdin + proc_finish. Returns 0 if the
 * command could be started. */
int proc_run(const char *const argv[], const char *input, double timeout_s, proc_result_t *res);
void proc_result_free(proc_result_t *res);

/* `lstream broker ARGS...` running in the background. */
typedef struct proc_broker_s {
  proc_child_t child;
  char addr[512]; /* the bootstrap line it printed */
} proc_broker_t;

/* Starts `LSTREAM broker ARGS...` (lstream: the program's path; args:
 * NULL-terminated, may be NULL) and waits up to 20 s for its address line.
 * Returns 0 on success. */
int proc_broker_start(proc_broker_t *b, const char *lstream, const char *const args[]);

/* Sends SIGTERM and waits up to 20 s; returns the exit code (-1: killed by
 * a signal or did not stop in time). */
int proc_broker_stop(proc_broker_t *b);

#endif /* LSTREAM_TESTS_INGEST_PROC_H */
