/*
 * One trainer per snapshot directory (include/lstream/state.h, "One writer
 * per directory"): an flock on DIR/lock that names its holder.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "snapshot_format.h"

struct ls_snapshot_lock_s {
  int fd;
};

/* The holder named in the lock file open as fd, into buf ("unknown" when
 * it has not written its name yet). */
static void holder(int fd, char *buf, size_t size) {
  ssize_t const n = pread(fd, buf, size - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  if (buf[0] == '\0') snprintf(buf, size, "a holder that has not written its name yet");
}

/* Writes "pid=PID host=HOST" into the lock file fd, which this process
 * holds. */
static ls_err_t write_holder(int fd, const char *path) {
  char host[256] = "unknown", text[320];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  int const n = snprintf(text, sizeof text, "pid=%ld host=%s\n", (long)getpid(), host);
  LS_RETURN_IF(ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != (ssize_t)n, LS_ERR_IO,
               "%s: cannot write the lock's holder: %s", path, strerror(errno));
  return LS_OK;
}

ls_err_t ls_snapshot_lock(const char *dir, ls_snapshot_lock_t **out) {
  LS_RETURN_IF(dir == NULL || out == NULL, LS_ERR_INVALID_ARG, "dir or out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(snap_make_dirs(dir));
  char path[PATH_MAX];
  LS_RETURN_IF((size_t)snprintf(path, sizeof path, "%s/lock", dir) >= sizeof path,
               LS_ERR_INVALID_ARG, "path %s/lock is too long", dir);
  int const fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LS_RETURN_IF(fd < 0, LS_ERR_IO, "%s: cannot open the lock file: %s", path, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int const e = errno;
    char who[320];
    holder(fd, who, sizeof who);
    close(fd);
    LS_RETURN_IF(e == EWOULDBLOCK, LS_ERR_STATE,
                 "snapshot directory %s is in use by another trainer (%s, in %s): stop it, or "
                 "give this run another --snapshot-dir",
                 dir, who, path);
    return ls_error_set(LS_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
  }
  ls_snapshot_lock_t *const lock = malloc(sizeof *lock);
  ls_err_t err = lock != NULL ? write_holder(fd, path) : ls_error_set(LS_ERR_NOMEM, "no memory");
  if (err != LS_OK) {
    free(lock);
    close(fd); /* lets go of the lock */
    return err;
  }
  lock->fd = fd;
  *out = lock;
  return LS_OK;
}

void ls_snapshot_unlock(ls_snapshot_lock_t *lock) {
  if (lock == NULL) return;
  close(lock->fd); /* the last descriptor of the open file: the flock goes with it */
  free(lock);
}
