/*
 * Writing snapshot files (snapshot_format.h, "Encoding"): the streaming
 * encoder of shards, manifests and segments, each section one zstd frame,
 * checksummed as it goes; and the directories they go into.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "snapshot_format.h"

/* Compressed bytes handed to write() at a time. */
#define OUT_BYTES (1u << 20)

/* ------------------------------------------------------------------------ */
/* Directories                                                               */

ls_err_t snap_make_dirs(const char *dir) {
  char buf[PATH_MAX];
  LS_RETURN_IF(strlen(dir) >= sizeof buf, LS_ERR_INVALID_ARG, "path %s is too long", dir);
  strcpy(buf, dir);
  for (char *p = buf + 1;; p++) {
    int const end = *p == '\0';
    if (*p != '/' && !end) continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      return ls_error_set(LS_ERR_IO, "%s: cannot create the directory: %s", buf, strerror(errno));
    if (end) break;
    *p = '/';
  }
  struct stat st;
  LS_RETURN_IF(stat(dir, &st) != 0 || !S_ISDIR(st.st_mode), LS_ERR_IO, "%s: not a directory", dir);
  return LS_OK;
}

static ls_err_t fsync_path(const char *path, int flags) {
  int const fd = open(path, flags | O_CLOEXEC);
  LS_RETURN_IF(fd < 0, LS_ERR_IO, "%s: cannot open to fsync: %s", path, strerror(errno));
  int const r = fsync(fd);
  int const e = errno;
  close(fd);
  LS_RETURN_IF(r != 0, LS_ERR_IO, "%s: fsync failed: %s", path, strerror(e));
  return LS_OK;
}

ls_err_t snap_fsync_dir(const char *dir) {
  return fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

struct snap_encoder_s {
  ZSTD_CCtx *cctx;
  ls_snapshot_conf_t conf;
  uint8_t *block; /* [SNAP_SHUFFLE_BLOCK] shuffled input */
  uint8_t *out;   /* [OUT_BYTES] compressed output */
};

ls_err_t ls_snapshot_conf_check(const ls_snapshot_conf_t *conf) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "snapshot configuration is NULL");
  LS_RETURN_IF(conf->level == 0 || conf->level < LS_SNAPSHOT_LEVEL_MIN ||
                   conf->level < ZSTD_minCLevel() || conf->level > ZSTD_maxCLevel(),
               LS_ERR_INVALID_ARG,
               "zstd level %d is out of range [%d, -1] (fast) or [1, %d] (0 is not a level)",
               conf->level, LS_SNAPSHOT_LEVEL_MIN, ZSTD_maxCLevel());
  ZSTD_bounds const wb = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
  LS_RETURN_IF(conf->workers < 0 || (!ZSTD_isError(wb.error) && conf->workers > wb.upperBound),
               LS_ERR_INVALID_ARG,
               "%d zstd workers: this libzstd takes 0..%d (0 = compress on the writing thread)",
               conf->workers, ZSTD_isError(wb.error) ? 0 : wb.upperBound);
  LS_RETURN_IF(conf->shuffle != 0 && conf->shuffle != 1, LS_ERR_INVALID_ARG,
               "shuffle is %d: 0 or 1", conf->shuffle);
  LS_RETURN_IF(conf->keep < 1, LS_ERR_INVALID_ARG, "keep %d: at least 1 snapshot is kept",
               conf->keep);
  LS_RETURN_IF(conf->deferred != 0 && conf->deferred != 1, LS_ERR_INVALID_ARG,
               "deferred is %d: 0 or 1", conf->deferred);
  return LS_OK;
}

/* Sets a zstd parameter, turning its error into ours. */
static ls_err_t cctx_set(ZSTD_CCtx *cctx, ZSTD_cParameter p, int value, const char *what) {
  size_t const r = ZSTD_CCtx_setParameter(cctx, p, value);
  LS_RETURN_IF(ZSTD_isError(r), LS_ERR_INVALID_ARG, "zstd %s = %d: %s", what, value,
               ZSTD_getErrorName(r));
  return LS_OK;
}

ls_err_t snap_encoder_new(const ls_snapshot_conf_t *conf, snap_encoder_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_conf_check(conf));
  snap_encoder_t *e = calloc(1, sizeof *e);
  LS_RETURN_IF(e == NULL, LS_ERR_NOMEM, "no memory for a snapshot encoder");
  e->conf = *conf;
  e->cctx = ZSTD_createCCtx();
  e->block = malloc(SNAP_SHUFFLE_BLOCK);
  e->out = malloc(OUT_BYTES);
  ls_err_t err = e->cctx && e->block && e->out
                     ? LS_OK
                     : ls_error_set(LS_ERR_NOMEM, "no memory for a zstd compression context");
  if (err == LS_OK)
    err = cctx_set(e->cctx, ZSTD_c_compressionLevel, conf->level, "compression level");
  /* No zstd content checksum: each section's raw crc32c (its table entry)
   * already checks what decompression gives, and a second pass over the
   * raw bytes was ~15% of what a snapshot's series states cost to write. */
  if (err == LS_OK) err = cctx_set(e->cctx, ZSTD_c_checksumFlag, 0, "checksum flag");
  if (err == LS_OK && conf->workers > 0)
    err = cctx_set(e->cctx, ZSTD_c_nbWorkers, conf->workers, "worker threads");
  if (err != LS_OK) {
    snap_encoder_destroy(e);
    return err;
  }
  *out = e;
  return LS_OK;
}

void snap_encoder_destroy(snap_encoder_t *e) {
  if (e == NULL) return;
  ZSTD_freeCCtx(e->cctx);
  free(e->block);
  free(e->out);
  free(e);
}

/* A file being written: every byte goes through out_write, which keeps
 * the offset and the whole-file checksum. */
typedef struct out_file_s {
  int fd;
  const char *path;
  uint64_t offset;
  uint32_t crc;
  uint32_t file_crc; /* once written: the whole-file checksum in its last 4 bytes */
} out_file_t;

/* Writes n bytes; with `crc`, into the whole-file checksum (a frame's go
 * in at its end, its own checksum combined: one pass over its bytes). */
static ls_err_t out_write_crc(out_file_t *o, const void *data, size_t n, int crc) {
  if (crc) o->crc = base_crc32c(o->crc, data, n);
  o->offset += n;
  const uint8_t *p = data;
  while (n > 0) {
    ssize_t const w = write(o->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    LS_RETURN_IF(w <= 0, LS_ERR_IO, "%s: write failed: %s", o->path,
                 w < 0 ? strerror(errno) : "no progress");
    p += w;
    n -= (size_t)w;
  }
  return LS_OK;
}

static ls_err_t out_write(out_file_t *o, const void *data, size_t n) {
  return out_write_crc(o, data, n, 1);
}

/* Feeds n bytes to the open frame (mode ZSTD_e_end: and closes it),
 * writing what comes out; *crc, *stored: the frame's checksum and size. */
static ls_err_t compress_feed(snap_encoder_t *e, out_file_t *o, const void *src, size_t n,
                              ZSTD_EndDirective mode, uint32_t *crc, uint64_t *stored) {
  ZSTD_inBuffer in = {src, n, 0};
  for (;;) {
    ZSTD_outBuffer ob = {e->out, OUT_BYTES, 0};
    size_t const left = ZSTD_compressStream2(e->cctx, &ob, &in, mode);
    LS_RETURN_IF(ZSTD_isError(left), LS_ERR_BACKEND, "%s: zstd compression failed: %s", o->path,
                 ZSTD_getErrorName(left));
    *crc = base_crc32c(*crc, e->out, ob.pos);
    *stored += ob.pos;
    LS_FORWARD_IF_ERROR(out_write_crc(o, e->out, ob.pos, 0));
    if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size) return LS_OK;
  }
}

/* Writes one section's frame and fills its table entry. */
static ls_err_t write_section(snap_encoder_t *e, out_file_t *o, const snap_section_spans_t *sec,
                              uint32_t entry_flags, uint8_t entry[SNAP_ENTRY_BYTES]) {
  int const shuffled = e->conf.shuffle && snap_section_has_floats(sec);
  uint64_t const raw = snap_section_bytes(sec), offset = o->offset;
  size_t const r = ZSTD_CCtx_reset(e->cctx, ZSTD_reset_session_only);
  size_t const p = ZSTD_isError(r) ? r : ZSTD_CCtx_setPledgedSrcSize(e->cctx, raw);
  LS_RETURN_IF(ZSTD_isError(p), LS_ERR_BACKEND, "%s: zstd: %s", o->path, ZSTD_getErrorName(p));
  uint32_t raw_crc = 0, stored_crc = 0;
  uint64_t stored = 0;
  for (int i = 0; i < sec->n; i++) {
    const uint8_t *const src = sec->span[i].ptr;
    size_t const bytes = sec->span[i].bytes;
    int const shuffle = shuffled && sec->span[i].floats;
    /* A block at a time, checksummed and compressed while in cache. */
    for (size_t at = 0; at < bytes; at += SNAP_SHUFFLE_BLOCK) {
      size_t const len = bytes - at < SNAP_SHUFFLE_BLOCK ? bytes - at : SNAP_SHUFFLE_BLOCK;
      raw_crc = base_crc32c(raw_crc, src + at, len);
      if (shuffle) snap_shuffle4(e->block, src + at, len / 4);
      LS_FORWARD_IF_ERROR(compress_feed(e, o, shuffle ? e->block : src + at, len, ZSTD_e_continue,
                                        &stored_crc, &stored));
    }
  }
  LS_FORWARD_IF_ERROR(compress_feed(e, o, NULL, 0, ZSTD_e_end, &stored_crc, &stored));
  o->crc = base_crc32c_combine(o->crc, stored_crc, stored);
  snap_put_u32(entry + 0, sec->id);
  snap_put_u32(entry + 4, (shuffled ? SNAP_FLAG_SHUFFLED : 0) | entry_flags);
  snap_put_u64(entry + 8, offset);
  snap_put_u64(entry + 16, stored);
  snap_put_u64(entry + 24, raw);
  snap_put_u32(entry + 32, stored_crc);
  snap_put_u32(entry + 36, raw_crc);
  return LS_OK;
}

/* Writes a whole file: header, the sections' frames, table, tail. */
static ls_err_t write_sections(snap_encoder_t *e, out_file_t *o, uint32_t kind, int64_t step,
                               int32_t world, int32_t rank, const snap_section_spans_t *secs,
                               const uint32_t *entry_flags, int n) {
  int any_shuffled = 0;
  for (int i = 0; i < n; i++)
    any_shuffled |= e->conf.shuffle && snap_section_has_floats(&secs[i]);
  uint8_t head[SNAP_HEADER_BYTES] = {0};
  memcpy(head, SNAP_MAGIC, 8);
  snap_put_u32(head + 8, SNAP_VERSION);
  snap_put_u32(head + 12, kind);
  snap_put_u32(head + 16, any_shuffled ? SNAP_FLAG_SHUFFLED : 0);
  snap_put_u64(head + 24, (uint64_t)step);
  snap_put_u32(head + 32, (uint32_t)world);
  snap_put_u32(head + 36, (uint32_t)rank);
  LS_FORWARD_IF_ERROR(out_write(o, head, sizeof head));
  uint8_t table[LS_SNAPSHOT_SECTIONS_MAX * SNAP_ENTRY_BYTES];
  for (int i = 0; i < n; i++)
    LS_FORWARD_IF_ERROR(write_section(e, o, &secs[i], entry_flags ? entry_flags[i] : 0,
                                      table + (size_t)i * SNAP_ENTRY_BYTES));
  size_t const table_bytes = (size_t)n * SNAP_ENTRY_BYTES;
  LS_FORWARD_IF_ERROR(out_write(o, table, table_bytes));
  uint8_t tail[SNAP_TAIL_BYTES] = {0};
  snap_put_u32(tail + 0, (uint32_t)n);
  snap_put_u32(tail + 4, base_crc32c(0, table, table_bytes));
  snap_put_u64(tail + 8, o->offset + SNAP_TAIL_BYTES);
  memcpy(tail + 16, SNAP_END_MAGIC, 8);
  LS_FORWARD_IF_ERROR(out_write(o, tail, SNAP_TAIL_BYTES - 4));
  uint8_t crc[4];
  o->file_crc = o->crc;
  snap_put_u32(crc, o->crc);
  return out_write(o, crc, sizeof crc);
}

/* Creates path, writes it, fsyncs and closes it; removes it on failure.
 * *size and *crc (unless NULL): its bytes and whole-file checksum. */
static ls_err_t write_file(snap_encoder_t *e, const char *path, uint32_t kind, int64_t step,
                           int32_t world, int32_t rank, const snap_section_spans_t *secs,
                           const uint32_t *entry_flags, int n, uint64_t *size, uint32_t *crc) {
  out_file_t o = {open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), path, 0, 0, 0};
  LS_RETURN_IF(o.fd < 0, LS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
  ls_err_t err = write_sections(e, &o, kind, step, world, rank, secs, entry_flags, n);
  if (size != NULL) *size = o.offset;
  if (crc != NULL) *crc = o.file_crc;
  if (err == LS_OK && fsync(o.fd) != 0)
    err = ls_error_set(LS_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
  if (close(o.fd) != 0 && err == LS_OK)
    err = ls_error_set(LS_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  if (err != LS_OK) unlink(path);
  return err;
}

ls_err_t snap_write_shard_file(snap_encoder_t *e, const ls_snapshot_t *s, const char *path) {
  uint8_t meta[SNAP_META_BYTES];
  snap_meta_pack(s, meta);
  snap_section_spans_t secs[1 + SNAP_SHARD_SECTIONS] = {{SNAP_META, 1, {{meta, sizeof meta, 0}}}};
  uint32_t ids[SNAP_SHARD_SECTIONS], flags[1 + SNAP_SHARD_SECTIONS] = {0};
  int const n = snap_shard_ids(s, 0, ids);
  for (int i = 0; i < n; i++) {
    secs[1 + i] = snap_section_of(s, ids[i]);
    flags[1 + i] = snap_entry_flags(s, ids[i]);
  }
  return write_file(e, path, SNAP_KIND_SHARD, s->info.step, s->info.world, s->info.rank, secs,
                    flags, 1 + n, NULL, NULL);
}

ls_err_t snap_write_manifest_file(snap_encoder_t *e, const char *path, int64_t step, int32_t world,
                                  const ls_snapshot_shard_t *shards) {
  size_t const bytes = (size_t)world * SNAP_SHARD_ENTRY_BYTES;
  uint8_t *const list = calloc(1, bytes);
  LS_RETURN_IF(list == NULL, LS_ERR_NOMEM, "no memory for a manifest of %d shards", (int)world);
  for (int32_t r = 0; r < world; r++) {
    uint8_t *const p = list + (size_t)r * SNAP_SHARD_ENTRY_BYTES;
    snap_put_u64(p + 0, shards[r].size);
    snap_put_u32(p + 8, shards[r].crc);
    snap_put_u64(p + 16, shards[r].series);
    snap_put_u64(p + 24, shards[r].partitions);
  }
  snap_section_spans_t const sec = {SNAP_SHARDS, 1, {{list, bytes, 0}}};
  ls_err_t const err =
      write_file(e, path, SNAP_KIND_MANIFEST, step, world, 0, &sec, NULL, 1, NULL, NULL);
  free(list);
  return err;
}

ls_err_t snap_write_segment_file(snap_encoder_t *e, const snap_segment_t *g, int64_t step,
                                 int32_t world, int32_t rank, const char *path, uint64_t *size,
                                 uint32_t *crc) {
  uint8_t meta[SNAP_SEG_META_BYTES] = {0};
  snap_put_u32(meta, (uint32_t)g->F);
  snap_put_u32(meta + 4, (uint32_t)g->X);
  snap_put_u64(meta + 8, g->n);
  snap_put_u64(meta + 16, g->rows);
  snap_put_u64(meta + 24, g->writer);
  snap_put_u64(meta + 32, g->number);
  size_t const R = g->rows;
  snap_section_spans_t const secs[4] = {
      {SNAP_SEGMENT, 1, {{meta, sizeof meta, 0}}},
      {SNAP_SEGMENT_WINDOWS, 1, {{g->win, g->n * SNAP_SEG_WIN * sizeof(int64_t), 0}}},
      {SNAP_SEGMENT_ROWS,
       3,
       {{g->offsets, R * sizeof(int64_t), 0},
        {g->times, R * sizeof(int64_t), 0},
        {g->x, R * (size_t)g->F * sizeof(float), 1}}},
      {SNAP_SEGMENT_MODEL, 1, {{g->model, g->m * g->X * sizeof(double), 0}}}};
  return write_file(e, path, SNAP_KIND_SEGMENT, step, world, rank, secs, NULL, g->X > 0 ? 4 : 3,
                    size, crc);
}
