/*
 * The run's id (train/snapshots.h, train_run_choose): one lineage of
 * forecasts per snapshot directory, random, kept in the directory
 * (DIR/run-id) and in its snapshots (LS_SNAPSHOT_SECTION_RUN).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "comm.h"
#include "snapshots.h"

/* The run section: the id, u64. Version 1. */
enum { RUN_VERSION = 1 };

/* The id of the runs before the id was kept: a digest of the directory's
 * absolute path (what their forecasts carry). */
static ls_err_t path_id(const char *dir, uint64_t *id) {
  char abs[PATH_MAX + 1];
  LS_RETURN_IF(realpath(dir, abs) == NULL, LS_ERR_IO, "cannot resolve %s: %s", dir,
               strerror(errno));
  *id = base_fnv1a(BASE_FNV1A_INIT, abs, strlen(abs));
  return LS_OK;
}

/* DIR/run-id: the id in hex; *found 0 when there is none. */
static ls_err_t read_run_file(const char *dir, uint64_t *id, int *found) {
  char path[PATH_MAX + 16], text[32] = "";
  snprintf(path, sizeof path, "%s/run-id", dir);
  *found = 0;
  FILE *const f = fopen(path, "r");
  if (f == NULL && errno == ENOENT) return LS_OK;
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot read %s: %s", path, strerror(errno));
  char *const got = fgets(text, sizeof text, f);
  fclose(f);
  char *end = NULL;
  unsigned long long const v = got != NULL ? strtoull(text, &end, 16) : 0;
  LS_RETURN_IF(got == NULL || end == text || (*end != '\n' && *end != '\0'), LS_ERR_CORRUPT,
               "%s does not hold a run id (16 hex digits): remove it to start a new lineage "
               "of forecasts",
               path);
  *id = (uint64_t)v;
  *found = 1;
  return LS_OK;
}

/* Writes DIR/run-id atomically (a temporary file, fsync, rename). */
static ls_err_t write_run_file(const char *dir, uint64_t id) {
  char path[PATH_MAX + 16], tmp[PATH_MAX + 24];
  snprintf(path, sizeof path, "%s/run-id", dir);
  snprintf(tmp, sizeof tmp, "%s/.run-id.tmp", dir);
  FILE *const f = fopen(tmp, "w");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
  int ok = fprintf(f, "%016" PRIx64 "\n", id) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = fclose(f) == 0 && ok;
  ok = ok && rename(tmp, path) == 0;
  int const why = errno;
  if (!ok) unlink(tmp);
  LS_RETURN_IF(!ok, LS_ERR_IO, "cannot write %s: %s", path, strerror(why));
  return LS_OK;
}

/* Rank 0's choice (train_run_choose). */
static ls_err_t choose(const char *dir, const ls_snapshot_t *snap, uint64_t *id) {
  if (dir[0] == '\0') {
    *id = base_random64();
    return LS_OK;
  }
  LS_RETURN_IF(mkdir(dir, 0755) != 0 && errno != EEXIST, LS_ERR_IO,
               "cannot make the snapshot directory %s: %s", dir, strerror(errno));
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  int found = 0;
  if (snap != NULL &&
      ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_RUN, &version, &data, &bytes) == LS_OK) {
    LS_RETURN_IF(version != RUN_VERSION || bytes != sizeof *id, LS_ERR_CORRUPT,
                 "the snapshot's run id is of version %u and %zu bytes, not version %d of %zu",
                 version, bytes, RUN_VERSION, sizeof *id);
    memcpy(id, data, sizeof *id);
  } else if (snap != NULL) {
    LS_FORWARD_IF_ERROR(path_id(dir, id)); /* written before the id was kept */
  } else {
    LS_FORWARD_IF_ERROR(read_run_file(dir, id, &found));
    if (!found) *id = base_random64(); /* a new directory: a new lineage */
  }
  uint64_t kept = 0;
  int have = 0;
  LS_FORWARD_IF_ERROR(read_run_file(dir, &kept, &have));
  if (!have || kept != *id) LS_FORWARD_IF_ERROR(write_run_file(dir, *id));
  return LS_OK;
}

ls_err_t train_run_choose(const ls_snapshot_t *snap, train_view_t *v) {
  LS_RETURN_IF(v == NULL, LS_ERR_INVALID_ARG, "view is NULL");
  uint64_t id = 0;
  if (v->rank == 0) LS_FORWARD_IF_ERROR(choose(v->conf->snapshot_dir, snap, &id));
  /* Every rank takes rank 0's (two exact 32-bit halves through a sum). */
  double h[2] = {(double)(id >> 32), (double)(id & 0xffffffffu)};
  LS_FORWARD_IF_ERROR(comm_sum_doubles(v->comm, h, 2));
  v->run = (uint64_t)h[0] << 32 | (uint64_t)h[1];
  return LS_OK;
}

ls_err_t train_run_put(const train_view_t *v, ls_snapshot_t *snap) {
  /* Required: a resume that did not know it would publish under another id,
   * and so again what the killed run had published. */
  return ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_RUN, RUN_VERSION, LS_SNAPSHOT_REQUIRED,
                                 &v->run, sizeof v->run);
}
