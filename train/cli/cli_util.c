/*
 * Helpers shared by the lstream subcommands: error reporting, medians,
 * lists of subcommands, MPI around a command.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lstream/train.h"

#ifdef LSTREAM_HAVE_MPI
#include <mpi.h>
#endif

int cli_fail(ls_err_t err, const char *fmt, ...) {
  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *detail = ls_last_error();
  if (err != LS_OK)
    cli_log(CLI_ERROR, "lstream", "%s: %s%s%s", what, ls_err2str(err), detail[0] ? ": " : "",
            detail);
  else
    cli_log(CLI_ERROR, "lstream", "%s", what);
  return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  char what[1024], logger[64];
  char const *const sep = cmd[0] ? " " : "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(logger, sizeof logger, "lstream%s%s", sep, cmd);
  cli_log(CLI_ERROR, logger, "%s (try `%s --help`)", what, logger);
  return CLI_EXIT_USAGE;
}

static int cmp_double(const void *a, const void *b) {
  double const x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *v, int n) {
  if (n <= 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void cli_commands_text(const cli_command_t *cmds, int n, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "  %-10s %s\n", cmds[i].name, cmds[i].summary);
}

int cli_mpi_begin(int *argc, char ***argv, int *up) {
  *up = 0;
  if (ls_train_launched_ranks() <= 1) return CLI_EXIT_OK;
#ifdef LSTREAM_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return cli_fail(LS_ERR_BACKEND, "MPI_Init_thread failed");
  *up = 1;
  /* Only the main thread calls MPI, but other threads exist (the consumer,
   * the snapshot writer, OpenMP's). */
  if (provided < MPI_THREAD_FUNNELED)
    return cli_fail(LS_ERR_BACKEND, "this MPI offers thread level %d, below MPI_THREAD_FUNNELED",
                    provided);
  return CLI_EXIT_OK;
#else
  (void)argc, (void)argv;
  return cli_fail(LS_ERR_UNSUPPORTED, "started by mpirun, but this build has no MPI");
#endif
}

void cli_mpi_end(int up, int rc) {
#ifdef LSTREAM_HAVE_MPI
  if (!up) return;
  if (rc != CLI_EXIT_OK) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
#else
  (void)up, (void)rc;
#endif
}
