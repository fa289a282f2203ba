/*
 * Child programs for the ingest tests: runs a command with a deadline and
 * captures what it prints (kcat, `lstream produce`), and starts and stops
 * `lstream broker` in the background. Waits on conditions (output, exit)
 * with generous deadlines, never on fixed sleeps.
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

/* Runs argv (argv[0] looked up in PATH) with input on its stdin (NULL: none),
 * killing it after timeout_s. Returns 0 if it could be started. */
int proc_run(const char *const argv[], const char *input, double timeout_s, proc_result_t *res);
void proc_result_free(proc_result_t *res);

/* `lstream broker ARGS...` running in the background. */
typedef struct proc_broker_s {
  pid_t pid;
  int out_fd;     /* its stdout */
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
