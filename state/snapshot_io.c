/*
 * Snapshot directories (include/lstream/state.h, "Snapshots"): writing a
 * rank's shard into the temporary directory, the atomic commit (manifest,
 * fsync, rename, latest, pruning), the manifest, loading shards with
 * re-sharding, and finding the newest good snapshot.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot_model.h"

#define SNAP_PREFIX "snap-"
#define TMP_PREFIX  ".tmp-snap-"
#define OLD_PREFIX  ".old-snap-"
#define STEP_DIGITS 12

struct ls_snapshot_manifest_s {
  char path[PATH_MAX]; /* the snapshot directory */
  int64_t step;
  int32_t world;
  ls_snapshot_shard_t *shards; /* [world] */
  ls_snapshot_file_t file;
};

/* ------------------------------------------------------------------------ */
/* Paths and directories                                                     */

/* buf = DIR/NAME. */
static ls_err_t join_path(char *buf, const char *dir, const char *name) {
  int const n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
  LS_RETURN_IF(n < 0 || n >= PATH_MAX, LS_ERR_INVALID_ARG, "path %s/%s is too long", dir, name);
  return LS_OK;
}

/* buf = DIR/PREFIX<step, 12 digits>. */
static ls_err_t step_path(char *buf, const char *dir, const char *prefix, int64_t step) {
  char name[64];
  snprintf(name, sizeof name, "%s%0*lld", prefix, STEP_DIGITS, (long long)step);
  return join_path(buf, dir, name);
}

ls_err_t ls_snapshot_path(const char *dir, int64_t step, char *buf, size_t size) {
  LS_RETURN_IF(dir == NULL || buf == NULL || size == 0, LS_ERR_INVALID_ARG,
               "dir or buffer is NULL");
  LS_RETURN_IF(step < 0 || step > 999999999999ll, LS_ERR_INVALID_ARG,
               "step %lld is not in [0, 10^12)", (long long)step);
  int const n = snprintf(buf, size, "%s/%s%0*lld", dir, SNAP_PREFIX, STEP_DIGITS, (long long)step);
  LS_RETURN_IF(n < 0 || (size_t)n >= size, LS_ERR_INVALID_ARG,
               "the path of snapshot %lld in %s does not fit in %zu bytes", (long long)step, dir,
               size);
  return LS_OK;
}

/* buf = DIR/shard-<rank>. */
static ls_err_t shard_path(char *buf, const char *dir, int rank) {
  char name[32];
  snprintf(name, sizeof name, "shard-%d", rank);
  return join_path(buf, dir, name);
}

/* The step of a name PREFIX<12 digits>, or -1. */
static int64_t name_step(const char *name, const char *prefix) {
  size_t const p = strlen(prefix);
  if (strncmp(name, prefix, p) != 0 || strlen(name + p) != STEP_DIGITS) return -1;
  int64_t step = 0;
  for (const char *c = name + p; *c; c++) {
    if (*c < '0' || *c > '9') return -1;
    step = step * 10 + (*c - '0');
  }
  return step;
}

/* Deletes a snapshot directory (it holds only files). */
static ls_err_t remove_tree(const char *dir) {
  DIR *const d = opendir(dir);
  LS_RETURN_IF(d == NULL, LS_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
  ls_err_t err = LS_OK;
  for (struct dirent *e; err == LS_OK && (e = readdir(d)) != NULL;) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) != 0)
      err = ls_error_set(LS_ERR_IO, "%s/%s: cannot delete: %s", dir, e->d_name, strerror(errno));
  }
  closedir(d);
  if (err == LS_OK && rmdir(dir) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: cannot delete: %s", dir, strerror(errno));
  return err;
}

/* The steps of the entries PREFIX<step> of dir at most `upto`, newest
 * first (malloc'ed, *n of them; none when dir does not exist). */
static ls_err_t list_steps(const char *dir, const char *prefix, int64_t upto, int64_t **steps,
                           size_t *n) {
  *steps = NULL;
  *n = 0;
  DIR *const d = opendir(dir);
  if (d == NULL && errno == ENOENT) return LS_OK;
  LS_RETURN_IF(d == NULL, LS_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
  size_t cap = 0;
  ls_err_t err = LS_OK;
  for (struct dirent *e; err == LS_OK && (e = readdir(d)) != NULL;) {
    int64_t const s = name_step(e->d_name, prefix);
    if (s < 0 || s > upto) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      int64_t *const more = realloc(*steps, cap * sizeof *more);
      if (more == NULL) {
        err = ls_error_set(LS_ERR_NOMEM, "no memory to list %s", dir);
        break;
      }
      *steps = more;
    }
    (*steps)[(*n)++] = s;
  }
  closedir(d);
  if (err != LS_OK) {
    free(*steps);
    *steps = NULL;
    *n = 0;
    return err;
  }
  for (size_t i = 1; i < *n; i++) /* newest first (insertion sort: few entries) */
    for (size_t j = i; j > 0 && (*steps)[j - 1] < (*steps)[j]; j--) {
      int64_t const t = (*steps)[j];
      (*steps)[j] = (*steps)[j - 1];
      (*steps)[j - 1] = t;
    }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

/* Checks that s may be written and makes its step's temporary directory:
 * its path into tmp, its shard's into file. */
static ls_err_t shard_paths(const ls_snapshot_t *s, const char *dir, char tmp[PATH_MAX],
                            char file[PATH_MAX]) {
  LS_RETURN_IF(s->info.world < 1, LS_ERR_STATE,
               "the snapshot has no step, world and rank: call ls_snapshot_set_info");
  LS_RETURN_IF(s->has_model != (s->info.rank == 0), LS_ERR_INVALID_ARG,
               "rank %d's part %s a model: rank 0's part and only it holds one (set_model / "
               "set_engine on rank 0)",
               (int)s->info.rank, s->has_model ? "holds" : "lacks");
  LS_FORWARD_IF_ERROR(step_path(tmp, dir, TMP_PREFIX, s->info.step));
  LS_FORWARD_IF_ERROR(shard_path(file, tmp, (int)s->info.rank));
  return snap_make_dirs(tmp);
}

ls_err_t snap_write_shard(snap_encoder_t *enc, ls_snapshot_t *s, const char *dir) {
  char tmp[PATH_MAX], file[PATH_MAX];
  LS_FORWARD_IF_ERROR(shard_paths(s, dir, tmp, file));
  /* Its segments first: a shard written references files in place. */
  if (s->in_windows > 0 || s->model_refs) LS_FORWARD_IF_ERROR(snap_segments_put(enc, s, dir, tmp));
  LS_FORWARD_IF_ERROR(snap_write_shard_file(enc, s, file));
  /* Where its series' model state is, for the writer's next shard. */
  return s->book != NULL ? snap_model_written(s->book, s) : LS_OK;
}

ls_err_t ls_snapshot_write_shard(const ls_snapshot_t *s, const char *dir,
                                 const ls_snapshot_conf_t *conf) {
  LS_RETURN_IF(s == NULL || dir == NULL, LS_ERR_INVALID_ARG, "snapshot or dir is NULL");
  LS_FORWARD_IF_ERROR(ls_snapshot_conf_check(conf));
  LS_RETURN_IF(s->in_windows > 0 || s->model_refs, LS_ERR_STATE,
               "the snapshot holds %s by reference (a writer's staging snapshot): its writer "
               "writes it (ls_snapshotter_submit)",
               s->in_windows > 0 ? "windows" : "series' model state");
  char tmp[PATH_MAX], file[PATH_MAX];
  LS_FORWARD_IF_ERROR(shard_paths(s, dir, tmp, file));
  snap_encoder_t *enc = NULL;
  LS_FORWARD_IF_ERROR(snap_encoder_new(conf, &enc));
  ls_err_t const err = snap_write_shard_file(enc, s, file);
  snap_encoder_destroy(enc);
  return err;
}

/* Reads and checks a file of a snapshot: path, of `kind`; step, world and
 * rank as given when want_world > 0; with meta_only its container and meta
 * section alone (snap_read_file_meta: *data then for snap_unmap_file). */
static ls_err_t read_checked(const char *path, uint32_t kind, int64_t step, int32_t want_world,
                             int32_t rank, int meta_only, uint8_t **data, snap_file_t *f) {
  size_t size = 0;
  LS_FORWARD_IF_ERROR(meta_only ? snap_read_file_meta(path, data, &size)
                                : snap_read_file(path, data, &size));
  snap_limits_t const lim = {.meta_only = meta_only};
  ls_err_t err = snap_file_parse(*data, size, path, kind, &lim, f);
  if (err == LS_OK && want_world > 0 &&
      (f->step != step || f->world != want_world || f->rank != rank))
    err = ls_error_set(LS_ERR_CORRUPT,
                       "%s: written for step %lld, rank %d of %d; expected step %lld, rank %d of "
                       "%d",
                       path, (long long)f->step, (int)f->rank, (int)f->world, (long long)step,
                       (int)rank, (int)want_world);
  if (err != LS_OK) {
    if (meta_only)
      snap_unmap_file(*data, size);
    else
      free(*data);
    *data = NULL;
  }
  return err;
}

/* Writes DIR/latest = name, atomically. */
static ls_err_t write_latest(const char *dir, int64_t step) {
  char tmp[PATH_MAX], latest[PATH_MAX], line[64];
  LS_FORWARD_IF_ERROR(join_path(tmp, dir, ".latest.tmp"));
  LS_FORWARD_IF_ERROR(join_path(latest, dir, "latest"));
  int const n = snprintf(line, sizeof line, SNAP_PREFIX "%0*lld\n", STEP_DIGITS, (long long)step);
  int const fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LS_RETURN_IF(fd < 0, LS_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
  ls_err_t err = write(fd, line, (size_t)n) == n
                     ? LS_OK
                     : ls_error_set(LS_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
  if (err == LS_OK && fsync(fd) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
  close(fd);
  if (err == LS_OK && rename(tmp, latest) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: cannot rename to %s: %s", tmp, latest, strerror(errno));
  return err == LS_OK ? snap_fsync_dir(dir) : err;
}

/* Deletes all but the `keep` newest snapshots up to `step`, temporary
 * directories of earlier steps and replaced snapshots. */
static ls_err_t prune(const char *dir, int64_t step, int keep) {
  char path[PATH_MAX];
  int64_t *steps = NULL;
  size_t n = 0;
  LS_FORWARD_IF_ERROR(list_steps(dir, SNAP_PREFIX, step, &steps, &n));
  ls_err_t err = LS_OK;
  for (size_t i = (size_t)keep; err == LS_OK && i < n; i++) {
    err = step_path(path, dir, SNAP_PREFIX, steps[i]);
    if (err == LS_OK) err = remove_tree(path);
  }
  free(steps);
  const char *const others[] = {TMP_PREFIX, OLD_PREFIX};
  for (int k = 0; k < 2 && err == LS_OK; k++) {
    err = list_steps(dir, others[k], k == 0 ? step - 1 : INT64_MAX, &steps, &n);
    for (size_t i = 0; err == LS_OK && i < n; i++) {
      err = step_path(path, dir, others[k], steps[i]);
      if (err == LS_OK) err = remove_tree(path);
    }
    free(steps);
  }
  return err;
}

/* Verifies the world shards of tmp (each whole, of this step and rank,
 * all of one run: container and meta section; their writers checksummed
 * the rest as they wrote it, and a resume verifies it) and lists them for
 * the manifest. */
static ls_err_t check_shards(const char *tmp, int64_t step, int world,
                             ls_snapshot_shard_t *shards) {
  snap_meta_t zero;
  memset(&zero, 0, sizeof zero);
  for (int r = 0; r < world; r++) {
    char path[PATH_MAX];
    LS_FORWARD_IF_ERROR(shard_path(path, tmp, r));
    uint8_t *data = NULL;
    snap_file_t f;
    snap_meta_t m;
    LS_FORWARD_IF_ERROR(read_checked(path, SNAP_KIND_SHARD, step, world, r, 1, &data, &f));
    ls_err_t const err = snap_decode_shard_meta(&f, &m);
    snap_unmap_file(data, f.size);
    LS_FORWARD_IF_ERROR(err);
    if (r == 0) zero = m;
    LS_RETURN_IF(memcmp(&m.shape, &zero.shape, sizeof m.shape) != 0 || m.seed != zero.seed ||
                     m.fingerprint != zero.fingerprint,
                 LS_ERR_CORRUPT,
                 "%s: another shape, seed or configuration fingerprint than shard-0's (a shard "
                 "of another run?)",
                 path);
    shards[r] = (ls_snapshot_shard_t){f.desc.size, f.desc.crc, m.series, m.parts};
  }
  return LS_OK;
}

/* Renames tmp to final, moving a snapshot of the same step out of the way. */
static ls_err_t publish(const char *dir, const char *tmp, const char *final, int64_t step) {
  char old[PATH_MAX];
  LS_FORWARD_IF_ERROR(step_path(old, dir, OLD_PREFIX, step));
  struct stat st;
  int const replace = stat(final, &st) == 0;
  if (replace && stat(old, &st) == 0) LS_FORWARD_IF_ERROR(remove_tree(old));
  LS_RETURN_IF(replace && rename(final, old) != 0, LS_ERR_IO, "%s: cannot move aside: %s", final,
               strerror(errno));
  LS_RETURN_IF(rename(tmp, final) != 0, LS_ERR_IO, "%s: cannot rename to %s: %s", tmp, final,
               strerror(errno));
  LS_FORWARD_IF_ERROR(snap_fsync_dir(dir));
  return replace ? remove_tree(old) : LS_OK;
}

ls_err_t snap_commit(snap_encoder_t *enc, const char *dir, int64_t step, int world, int keep) {
  LS_RETURN_IF(dir == NULL, LS_ERR_INVALID_ARG, "dir is NULL");
  LS_RETURN_IF(step < 0 || step >= 1000000000000ll, LS_ERR_INVALID_ARG,
               "step %lld is out of range [0, 10^12)", (long long)step);
  LS_RETURN_IF(world < 1, LS_ERR_INVALID_ARG, "world size %d: at least 1 rank", world);
  LS_RETURN_IF(keep < 1, LS_ERR_INVALID_ARG, "keep %d: at least 1 snapshot is kept", keep);
  char tmp[PATH_MAX], final[PATH_MAX], manifest[PATH_MAX];
  LS_FORWARD_IF_ERROR(step_path(tmp, dir, TMP_PREFIX, step));
  LS_FORWARD_IF_ERROR(step_path(final, dir, SNAP_PREFIX, step));
  LS_FORWARD_IF_ERROR(join_path(manifest, tmp, "manifest"));
  struct stat st;
  LS_RETURN_IF(stat(tmp, &st) != 0, LS_ERR_IO,
               "%s: %s: no shard of step %lld was written (ls_snapshot_write_shard first)", tmp,
               strerror(errno), (long long)step);
  ls_snapshot_shard_t *const shards = malloc((size_t)world * sizeof *shards);
  LS_RETURN_IF(shards == NULL, LS_ERR_NOMEM, "no memory for %d shards", world);
  ls_err_t err = check_shards(tmp, step, world, shards);
  if (err == LS_OK) err = snap_write_manifest_file(enc, manifest, step, world, shards);
  free(shards);
  if (err == LS_OK) err = snap_fsync_dir(tmp);
  if (err == LS_OK) err = publish(dir, tmp, final, step);
  if (err == LS_OK) err = write_latest(dir, step);
  return err == LS_OK ? prune(dir, step, keep) : err;
}

ls_err_t ls_snapshot_commit(const char *dir, int64_t step, int world, int keep) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  snap_encoder_t *enc = NULL;
  LS_FORWARD_IF_ERROR(snap_encoder_new(&conf, &enc));
  ls_err_t const err = snap_commit(enc, dir, step, world, keep);
  snap_encoder_destroy(enc);
  return err;
}

/* ------------------------------------------------------------------------ */
/* The manifest                                                              */

ls_err_t ls_snapshot_manifest_read(const char *path, ls_snapshot_manifest_t **out) {
  LS_RETURN_IF(path == NULL || out == NULL, LS_ERR_INVALID_ARG, "path or out is NULL");
  *out = NULL;
  ls_snapshot_manifest_t *m = calloc(1, sizeof *m);
  LS_RETURN_IF(m == NULL, LS_ERR_NOMEM, "no memory for a manifest");
  char file[PATH_MAX];
  uint8_t *data = NULL;
  snap_file_t f;
  snap_limits_t const lim = {0};
  ls_err_t err = strlen(path) < sizeof m->path
                     ? join_path(file, path, "manifest")
                     : ls_error_set(LS_ERR_INVALID_ARG, "path %s is too long", path);
  if (err == LS_OK) strcpy(m->path, path);
  if (err == LS_OK) err = read_checked(file, SNAP_KIND_MANIFEST, 0, 0, 0, 0, &data, &f);
  if (err == LS_OK) err = snap_decode_manifest(&f, &lim, &m->shards);
  if (err == LS_OK) {
    m->step = f.step;
    m->world = f.world;
    m->file = f.desc;
    /* A snapshot directory's name says its step. */
    const char *const base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int64_t const named = name_step(base, SNAP_PREFIX);
    if (named >= 0 && named != f.step)
      err = ls_error_set(LS_ERR_CORRUPT, "%s: written for step %lld, in the directory of step %lld",
                         file, (long long)f.step, (long long)named);
  }
  free(data);
  if (err != LS_OK) {
    ls_snapshot_manifest_destroy(m);
    return err;
  }
  *out = m;
  return LS_OK;
}

void ls_snapshot_manifest_destroy(ls_snapshot_manifest_t *m) {
  if (m == NULL) return;
  free(m->shards);
  free(m);
}

ls_err_t ls_snapshot_manifest_get(const ls_snapshot_manifest_t *m, int64_t *step, int32_t *world) {
  LS_RETURN_IF(m == NULL || step == NULL || world == NULL, LS_ERR_INVALID_ARG,
               "manifest, step or world is NULL");
  *step = m->step;
  *world = m->world;
  return LS_OK;
}

ls_err_t ls_snapshot_manifest_shard(const ls_snapshot_manifest_t *m, int rank,
                                    ls_snapshot_shard_t *out) {
  LS_RETURN_IF(m == NULL || out == NULL, LS_ERR_INVALID_ARG, "manifest or out is NULL");
  LS_RETURN_IF(rank < 0 || rank >= m->world, LS_ERR_INVALID_ARG, "rank %d is not in [0, world %d)",
               rank, (int)m->world);
  *out = m->shards[rank];
  return LS_OK;
}

ls_err_t ls_snapshot_manifest_file(const ls_snapshot_manifest_t *m, ls_snapshot_file_t *out) {
  LS_RETURN_IF(m == NULL || out == NULL, LS_ERR_INVALID_ARG, "manifest or out is NULL");
  *out = m->file;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */

/* Reads shard `rank` of a snapshot and checks it against the manifest;
 * decodes `what` of it into *out (what = 0: checks only, *out untouched). */
static ls_err_t load_part(const ls_snapshot_manifest_t *m, int rank, int what,
                          ls_snapshot_t **out) {
  char path[PATH_MAX];
  LS_FORWARD_IF_ERROR(shard_path(path, m->path, rank));
  uint8_t *data = NULL;
  snap_file_t f;
  LS_FORWARD_IF_ERROR(read_checked(path, SNAP_KIND_SHARD, m->step, m->world, rank, 0, &data, &f));
  const ls_snapshot_shard_t *const want = &m->shards[rank];
  ls_err_t err = LS_OK;
  if (f.desc.size != want->size || f.desc.crc != want->crc)
    err = ls_error_set(LS_ERR_CORRUPT,
                       "%s: not the shard the manifest lists (%llu bytes, checksum %08x; listed "
                       "%llu bytes, %08x)",
                       path, (unsigned long long)f.desc.size, f.desc.crc,
                       (unsigned long long)want->size, want->crc);
  snap_limits_t const lim = {0};
  if (err == LS_OK && what == 0) err = snap_segments_check(&f, m->path);
  if (err == LS_OK && what != 0) err = snap_decode_shard(&f, what, &lim, out);
  /* Its series in flight put back together from the segment files. */
  if (err == LS_OK && (what & SNAP_DECODE_SERIES)) {
    err = snap_segments_resolve(*out, m->path, rank);
    if (err != LS_OK) ls_snapshot_destroy(*out), *out = NULL;
  }
  if (err == LS_OK && (what & SNAP_DECODE_SERIES) &&
      ((*out)->series != want->series || (*out)->parts != want->partitions)) {
    err = ls_error_set(LS_ERR_CORRUPT,
                       "%s: %zu series and %zu partitions; the manifest lists %llu and %llu", path,
                       (*out)->series, (*out)->parts, (unsigned long long)want->series,
                       (unsigned long long)want->partitions);
    ls_snapshot_destroy(*out);
    *out = NULL;
  }
  free(data);
  return err;
}

ls_err_t ls_snapshot_load_shard(const ls_snapshot_manifest_t *m, int rank, ls_snapshot_t **out) {
  LS_RETURN_IF(m == NULL || out == NULL, LS_ERR_INVALID_ARG, "manifest or out is NULL");
  *out = NULL;
  LS_RETURN_IF(rank < 0 || rank >= m->world, LS_ERR_INVALID_ARG, "rank %d is not in [0, world %d)",
               rank, (int)m->world);
  return load_part(m, rank, SNAP_DECODE_ALL, out);
}

ls_err_t ls_snapshot_load_sections(const ls_snapshot_manifest_t *m, int rank, ls_snapshot_t **out) {
  LS_RETURN_IF(m == NULL || out == NULL, LS_ERR_INVALID_ARG, "manifest or out is NULL");
  *out = NULL;
  LS_RETURN_IF(rank < 0 || rank >= m->world, LS_ERR_INVALID_ARG, "rank %d is not in [0, world %d)",
               rank, (int)m->world);
  return load_part(m, rank, SNAP_DECODE_SECTIONS, out);
}

/* Shard `part` and shard 0 (`zero`) come from one run: same shape, seed and
 * configuration fingerprint. */
static ls_err_t check_same_run(const ls_snapshot_t *part, const ls_snapshot_t *zero) {
  LS_RETURN_IF(
      memcmp(&part->shape, &zero->shape, sizeof zero->shape) != 0 ||
          part->info.seed != zero->info.seed || part->info.fingerprint != zero->info.fingerprint ||
          part->stats_F != zero->stats_F || part->stats_O != zero->stats_O ||
          part->model_X != zero->model_X || part->mem_cap != zero->mem_cap ||
          part->mem_entry != zero->mem_entry || part->in_F != zero->in_F,
      LS_ERR_CORRUPT,
      "shard %d of step %lld has another shape, seed, fingerprint, series state, memory layout "
      "or record width than shard 0",
      (int)part->info.rank, (long long)part->info.step);
  return LS_OK;
}

/* Moves the model of src (rank 0's part) into dst, of the same run. */
static ls_err_t take_model(ls_snapshot_t *dst, ls_snapshot_t *src) {
  LS_FORWARD_IF_ERROR(check_same_run(dst, src));
  float *const p = dst->params, *const m = dst->adam_m, *const v = dst->adam_v;
  dst->params = src->params, dst->adam_m = src->adam_m, dst->adam_v = src->adam_v;
  src->params = p, src->adam_m = m, src->adam_v = v;
  dst->n = src->n;
  dst->adam_steps = src->adam_steps;
  dst->has_model = src->has_model;
  /* The modules' run-wide sections (calibration, the forecasts' books). */
  return snap_copy_modules(dst, src);
}

/* Appends the series and partitions of part whose partition p has
 * p % world == rank to dst (which holds shard 0's info). */
static ls_err_t take_series(ls_snapshot_t *dst, const ls_snapshot_t *part, int world, int rank) {
  LS_FORWARD_IF_ERROR(check_same_run(part, dst));
  for (size_t i = 0; i < part->series; i++) {
    if (part->partition[i] % world != rank) continue;
    ls_series_info_t info;
    const float *h = NULL, *c = NULL;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_series(part, i, &info, &h, &c));
    LS_FORWARD_IF_ERROR(ls_snapshot_add_series(dst, &info, h, c));
    if (part->stats_F == 0) continue;
    ls_series_stats_t from, to;
    LS_FORWARD_IF_ERROR(ls_snapshot_series_stats((ls_snapshot_t *)part, i, &from));
    LS_FORWARD_IF_ERROR(ls_snapshot_series_stats(dst, dst->series - 1, &to));
    LS_FORWARD_IF_ERROR(ls_series_stats_copy(&to, &from, part->stats_F, part->stats_O));
  }
  /* Series in flight, with their partitions. */
  for (size_t i = 0; i < part->in_series; i++) {
    ls_inflight_t in;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_inflight(part, i, &in));
    if (in.partition % world == rank) LS_FORWARD_IF_ERROR(ls_snapshot_add_inflight(dst, &in));
  }
  /* Partitions with their resume offsets and replay memories. */
  for (size_t i = 0; i < part->parts; i++) {
    if (part->part_id[i] % world != rank) continue;
    LS_FORWARD_IF_ERROR(ls_snapshot_add_partition(dst, part->part_id[i], part->part_offset[i]));
    int64_t filled = 0, next = 0;
    const float *mem = NULL;
    if (part->mem_cap == 0) continue;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_memory(part, i, &filled, &next, &mem));
    LS_FORWARD_IF_ERROR(ls_snapshot_set_memory(dst, dst->parts - 1, filled, next, mem));
  }
  return LS_OK;
}

/* Builds rank's part of a world-rank run from every shard of m, starting
 * from shard 0 (loaded whole in *zero). */
static ls_err_t reshard(const ls_snapshot_manifest_t *m, ls_snapshot_t *zero, int world, int rank,
                        ls_snapshot_t **out) {
  ls_snapshot_t *s = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_new(&zero->shape, 0, 0, &s));
  s->info = zero->info;
  ls_err_t err = ls_snapshot_set_stats_shape(s, zero->stats_F, zero->stats_O);
  if (err == LS_OK) err = ls_snapshot_set_model_width(s, zero->model_X);
  if (err == LS_OK) err = ls_snapshot_set_memory_shape(s, zero->mem_cap, zero->mem_entry);
  if (err == LS_OK) err = ls_snapshot_set_inflight_features(s, zero->in_F);
  if (err == LS_OK) err = take_model(s, zero); /* with rank 0's module sections */
  if (err == LS_OK) err = take_series(s, zero, world, rank);
  for (int r = 1; err == LS_OK && r < m->world; r++) {
    ls_snapshot_t *part = NULL;
    err = load_part(m, r, SNAP_DECODE_SERIES, &part);
    if (err == LS_OK) err = take_series(s, part, world, rank);
    ls_snapshot_destroy(part);
  }
  if (err != LS_OK) {
    ls_snapshot_destroy(s);
    return err;
  }
  *out = s;
  return LS_OK;
}

ls_err_t ls_snapshot_load(const char *path, int world, int rank, ls_snapshot_t **out) {
  LS_RETURN_IF(path == NULL || out == NULL, LS_ERR_INVALID_ARG, "path or out is NULL");
  *out = NULL;
  LS_RETURN_IF(world < 1 || rank < 0 || rank >= world, LS_ERR_INVALID_ARG,
               "rank %d of world %d is not possible", rank, world);
  ls_snapshot_manifest_t *m = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &m));
  int const same = m->world == world;
  ls_snapshot_t *zero = NULL, *s = NULL;
  ls_err_t err = load_part(m, 0, same && rank != 0 ? SNAP_DECODE_MODEL : SNAP_DECODE_ALL, &zero);
  if (err == LS_OK && same && rank == 0) {
    s = zero;
    zero = NULL;
  } else if (err == LS_OK && same) {
    err = load_part(m, rank, SNAP_DECODE_ALL, &s);
    if (err == LS_OK) err = take_model(s, zero);
  } else if (err == LS_OK) {
    err = reshard(m, zero, world, rank, &s);
  }
  ls_snapshot_destroy(zero);
  ls_snapshot_manifest_destroy(m);
  if (err != LS_OK) {
    ls_snapshot_destroy(s);
    return err;
  }
  s->info.world = world;
  s->info.rank = rank;
  *out = s;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Finding the newest good snapshot                                          */

/* Checks a snapshot's manifest and every shard's structure and checksums. */
static ls_err_t verify(const char *path) {
  ls_snapshot_manifest_t *m = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &m));
  ls_err_t err = LS_OK;
  for (int r = 0; err == LS_OK && r < m->world; r++)
    err = load_part(m, r, 0, NULL);
  ls_snapshot_manifest_destroy(m);
  return err;
}

/* The step DIR/latest names: -1 when there is no such file, INT64_MAX
 * (after reporting it) when it names nothing usable. */
static ls_err_t read_latest(const char *dir, ls_snapshot_reject_cb cb, void *opaque,
                            int64_t *step) {
  char path[PATH_MAX], line[64] = {0};
  LS_FORWARD_IF_ERROR(join_path(path, dir, "latest"));
  FILE *const f = fopen(path, "r");
  *step = -1;
  if (f == NULL && errno == ENOENT) return LS_OK;
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t const n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[strcspn(line, "\n")] = '\0';
  *step = n > 0 ? name_step(line, SNAP_PREFIX) : -1;
  if (*step >= 0) return LS_OK;
  *step = INT64_MAX;
  if (cb != NULL) cb(opaque, path, LS_ERR_CORRUPT, "does not name a snapshot (snap-<12 digits>)");
  return LS_OK;
}

/* Reports a rejected snapshot with the message of its last error. */
static void reject(ls_snapshot_reject_cb cb, void *opaque, const char *path, ls_err_t err) {
  if (cb == NULL) return;
  char why[1024];
  snprintf(why, sizeof why, "%s", ls_last_error());
  cb(opaque, path, err, why);
}

ls_err_t ls_snapshot_find_latest(const char *dir, ls_snapshot_reject_cb cb, void *opaque,
                                 char *path, size_t size) {
  LS_RETURN_IF(dir == NULL || path == NULL || size == 0, LS_ERR_INVALID_ARG,
               "dir or path is NULL, or size is 0");
  path[0] = '\0';
  int64_t named = -1;
  LS_FORWARD_IF_ERROR(read_latest(dir, cb, opaque, &named));
  int64_t *steps = NULL;
  size_t n = 0;
  LS_FORWARD_IF_ERROR(list_steps(dir, SNAP_PREFIX, named < 0 ? INT64_MAX : named, &steps, &n));
  char snap[PATH_MAX];
  ls_err_t err = LS_OK;
  size_t rejected = 0;
  if (named >= 0 && named != INT64_MAX && (n == 0 || steps[0] != named)) {
    err = step_path(snap, dir, SNAP_PREFIX, named);
    if (err == LS_OK && cb != NULL) cb(opaque, snap, LS_ERR_IO, "missing: DIR/latest names it");
    rejected++;
  }
  for (size_t i = 0; err == LS_OK && i < n; i++) {
    err = step_path(snap, dir, SNAP_PREFIX, steps[i]);
    if (err != LS_OK) break;
    ls_err_t const bad = verify(snap);
    if (bad == LS_OK) {
      free(steps);
      LS_RETURN_IF(strlen(snap) >= size, LS_ERR_INVALID_ARG,
                   "a buffer of %zu bytes is too small for %s", size, snap);
      strcpy(path, snap);
      return LS_OK;
    }
    reject(cb, opaque, snap, bad);
    rejected++;
  }
  free(steps);
  LS_FORWARD_IF_ERROR(err);
  LS_RETURN_IF(rejected > 0, LS_ERR_CORRUPT, "%s: no good snapshot: %zu rejected", dir, rejected);
  return LS_OK;
}
