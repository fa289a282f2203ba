/*
 * A fault injector for the kill-and-resume tests (kill_at in
 * tests/train/lib.sh), loaded into `lstream train` with LD_PRELOAD: the
 * trainer stops itself (SIGSTOP, the whole process) where LSTREAM_STOP_AT
 * says, once, and the test kills it there (SIGKILL). The trainer chooses the
 * moment, so the kill lands there however fast or loaded the machine is (a
 * test polling for the moment missed a snapshot write of a few ms, or saw a
 * short run end first).
 *   LSTREAM_STOP_AT=write  at its first fsync of a file in a snapshot's
 *                          temporary directory (".tmp-snap-", see
 *                          state/snapshot_io.c), before it syncs: half way
 *                          through writing a snapshot (a shard written, no
 *                          manifest, not renamed into place);
 *   LSTREAM_STOP_AT=N      as it starts the --metrics line of its first step
 *                          >= N (train/cli/report.c, report_metrics_line: the
 *                          format begins {"step":%lld): step N done, the
 *                          next not begun.
 * A run that never gets there runs on unstopped: the test sees it end.
 *
 * Built without sanitizers: mpirun, which has none, loads it as well.
 */
#define _GNU_SOURCE
#include <dlfcn.h> /* dlsym, RTLD_NEXT */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT     __attribute__((visibility("default"))) /* over the build's hidden default */
#define STEP_FIELD "{\"step\":%lld,"

static int stopped;

/* Stops the process, the first time only. */
static void stop_once(void) {
  if (!__atomic_exchange_n(&stopped, 1, __ATOMIC_SEQ_CST)) raise(SIGSTOP);
}

/* LSTREAM_STOP_AT, or "" */
static const char *stop_at(void) {
  const char *const at = getenv("LSTREAM_STOP_AT");
  return at != NULL ? at : "";
}

/* 1 if fd is open on a path inside a snapshot's temporary directory. */
static int in_temporary_snapshot(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t const n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return strstr(path, "/.tmp-snap-") != NULL;
}

EXPORT int fsync(int fd) {
  int (*const real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (real == NULL) return errno = ENOSYS, -1;
  if (strcmp(stop_at(), "write") == 0 && in_temporary_snapshot(fd)) stop_once();
  return real(fd);
}

EXPORT int fprintf(FILE *f, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (strncmp(fmt, STEP_FIELD, strlen(STEP_FIELD)) == 0) {
    const char *const text = stop_at();
    char *end = NULL;
    long long const at = strtoll(text, &end, 10);
    va_list step;
    va_copy(step, ap);
    if (end != text && *end == '\0' && va_arg(step, long long) >= at) stop_once();
    va_end(step);
  }
  int const r = vfprintf(f, fmt, ap);
  va_end(ap);
  return r;
}
