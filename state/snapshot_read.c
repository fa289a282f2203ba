/*
 * Reading snapshot files from disk (snapshot_format.h): a whole file, or
 * only what the commit checks of a shard (its container and meta section).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot_format.h"

/* Opens path, a regular file: *fd and its *size. */
static ls_err_t open_file(const char *path, int *fd, size_t *size) {
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  LS_RETURN_IF(*fd < 0, LS_ERR_IO, "%s: cannot open: %s%s", path, strerror(errno),
               errno == ENOENT ? " (a missing file)" : "");
  struct stat st;
  ls_err_t err = LS_OK;
  if (fstat(*fd, &st) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    err = ls_error_set(LS_ERR_IO, "%s: not a regular file", path);
  if (err != LS_OK) {
    close(*fd);
    return err;
  }
  *size = st.st_size > 0 ? (size_t)st.st_size : 0;
  return LS_OK;
}

/* Reads n bytes at offset `at` of fd into buf + at, *got of them (fewer
 * where the file shrank meanwhile: what follows stays as it was, and the
 * parser's checks see a short or damaged file). */
static ls_err_t read_at(int fd, const char *path, uint8_t *buf, uint64_t at, uint64_t n,
                        uint64_t *got) {
  *got = 0;
  while (*got < n) {
    ssize_t const r = pread(fd, buf + at + *got, (size_t)(n - *got), (off_t)(at + *got));
    if (r < 0 && errno == EINTR) continue;
    LS_RETURN_IF(r < 0, LS_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    if (r == 0) break;
    *got += (uint64_t)r;
  }
  return LS_OK;
}

ls_err_t snap_read_file(const char *path, uint8_t **data, size_t *size) {
  int fd = -1;
  size_t n = 0;
  LS_FORWARD_IF_ERROR(open_file(path, &fd, &n));
  uint8_t *const buf = malloc(n > 0 ? n : 1);
  uint64_t got = 0;
  ls_err_t const err = buf == NULL
                           ? ls_error_set(LS_ERR_NOMEM, "%s: no memory for its %zu bytes", path, n)
                           : read_at(fd, path, buf, 0, n, &got);
  close(fd);
  if (err != LS_OK) {
    free(buf);
    return err;
  }
  *data = buf;
  *size = (size_t)got;
  return LS_OK;
}

/* The table's entries and the meta section's bytes, as far as the tail
 * read into buf (n bytes) places them within the file; what does not fit
 * is left unread for snap_file_parse to refuse. */
static ls_err_t read_table_and_meta(int fd, const char *path, uint8_t *buf, size_t n) {
  size_t const least = SNAP_HEADER_BYTES + SNAP_TAIL_BYTES;
  if (n < least) return LS_OK;
  uint32_t const sections = snap_get_u32(buf + n - SNAP_TAIL_BYTES);
  if (sections < 1 || sections > LS_SNAPSHOT_SECTIONS_MAX ||
      (size_t)sections * SNAP_ENTRY_BYTES > n - least)
    return LS_OK;
  size_t const table_at = n - SNAP_TAIL_BYTES - (size_t)sections * SNAP_ENTRY_BYTES;
  uint64_t got = 0;
  LS_FORWARD_IF_ERROR(read_at(fd, path, buf, table_at, (size_t)sections * SNAP_ENTRY_BYTES, &got));
  for (uint32_t i = 0; i < sections; i++) {
    const uint8_t *const e = buf + table_at + (size_t)i * SNAP_ENTRY_BYTES;
    uint64_t const at = snap_get_u64(e + 8), stored = snap_get_u64(e + 16);
    if (snap_get_u32(e) == SNAP_META && at >= SNAP_HEADER_BYTES && at <= table_at &&
        stored <= table_at - at)
      LS_FORWARD_IF_ERROR(read_at(fd, path, buf, at, stored, &got));
  }
  return LS_OK;
}

ls_err_t snap_read_file_meta(const char *path, uint8_t **data, size_t *size) {
  *data = NULL;
  *size = 0;
  int fd = -1;
  size_t n = 0;
  LS_FORWARD_IF_ERROR(open_file(path, &fd, &n));
  ls_err_t err = LS_OK;
  uint8_t *buf = NULL;
  /* Anonymous pages: those never read stay untouched (malloc may reuse
   * memory it would have to clear). */
  if (n > 0 && (buf = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) ==
                   MAP_FAILED) {
    buf = NULL;
    err = ls_error_set(LS_ERR_NOMEM, "%s: no memory for its %zu bytes", path, n);
  }
  size_t const head = n < SNAP_HEADER_BYTES ? n : SNAP_HEADER_BYTES;
  size_t const tail = n < SNAP_TAIL_BYTES ? n : SNAP_TAIL_BYTES;
  uint64_t got = 0;
  if (err == LS_OK) err = read_at(fd, path, buf, 0, head, &got);
  if (err == LS_OK) err = read_at(fd, path, buf, n - tail, tail, &got);
  if (err == LS_OK) err = read_table_and_meta(fd, path, buf, n);
  close(fd);
  if (err != LS_OK) {
    snap_unmap_file(buf, n);
    return err;
  }
  *data = buf;
  *size = n;
  return LS_OK;
}

void snap_unmap_file(uint8_t *data, size_t size) {
  if (data != NULL && size > 0) munmap(data, size);
}

/* Copies the file at `from` to `to` (fsynced): where a hard link cannot be
 * made. */
static ls_err_t copy_file(const char *from, const char *to) {
  uint8_t *data = NULL;
  size_t size = 0;
  LS_FORWARD_IF_ERROR(snap_read_file(from, &data, &size));
  int const fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ls_err_t err =
      fd >= 0 ? LS_OK : ls_error_set(LS_ERR_IO, "%s: cannot create: %s", to, strerror(errno));
  for (size_t at = 0; err == LS_OK && at < size;) {
    ssize_t const w = write(fd, data + at, size - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      err = ls_error_set(LS_ERR_IO, "%s: write failed: %s", to,
                         w < 0 ? strerror(errno) : "no progress");
    else
      at += (size_t)w;
  }
  if (err == LS_OK && fsync(fd) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: fsync failed: %s", to, strerror(errno));
  if (fd >= 0 && close(fd) != 0 && err == LS_OK)
    err = ls_error_set(LS_ERR_IO, "%s: close failed: %s", to, strerror(errno));
  free(data);
  return err;
}

ls_err_t snap_link_file(const char *from, const char *to) {
  if (link(from, to) == 0) return LS_OK;
  if (errno == EEXIST) { /* left by an attempt at this step that failed */
    LS_RETURN_IF(unlink(to) != 0, LS_ERR_IO, "%s: cannot replace: %s", to, strerror(errno));
    if (link(from, to) == 0) return LS_OK;
  }
  if (errno == EPERM || errno == EXDEV || errno == ENOTSUP || errno == EMLINK || errno == ENOSYS)
    return copy_file(from, to);
  return ls_error_set(LS_ERR_IO, "%s: cannot link to %s: %s", to, from, strerror(errno));
}
