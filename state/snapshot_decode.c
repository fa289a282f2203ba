/*
 * Reading snapshot files (snapshot_format.h, "Decoding"): the parser that
 * verifies a file's container and checksums, and the decoders of its
 * sections.
 */
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_forceIgnoreChecksum, for snap_limits_t */
#include <zstd.h>

#include "snapshot_format.h"

/* ------------------------------------------------------------------------ */
/* Parsing                                                                   */

#define CORRUPT(...) ls_error_set(LS_ERR_CORRUPT, __VA_ARGS__)

static const char *kind_name(uint32_t kind) {
  return kind == SNAP_KIND_SHARD      ? "shard"
         : kind == SNAP_KIND_MANIFEST ? "manifest"
         : kind == SNAP_KIND_SEGMENT  ? "segment"
                                      : "?";
}

/* Checks a table entry against its neighbours and the file. */
static ls_err_t parse_entry(snap_file_t *f, int i, const uint8_t *e, uint64_t *next,
                            uint64_t table_at) {
  uint32_t const id = snap_get_u32(e + 0), flags = snap_get_u32(e + 4);
  uint64_t const at = snap_get_u64(e + 8), stored = snap_get_u64(e + 16),
                 raw = snap_get_u64(e + 24);
  /* A version-4 file has the container's sections only, each with at most
   * the shuffle flag; version 5 adds module sections with theirs. */
  int const v4 = snap_get_u32(f->data + 8) == 4;
  uint32_t const allowed = v4 ? (uint32_t)SNAP_FLAG_SHUFFLED : (uint32_t)SNAP_FLAG_KNOWN;
  int const own = id >= SNAP_META && id <= SNAP_SERIES_MODEL_REFS;
  if (!(own || (!v4 && snap_is_module(id))) || (flags & ~allowed) != 0 ||
      (own && (flags & ~(uint32_t)SNAP_FLAG_SHUFFLED) != 0))
    return CORRUPT("%s: section %d has an unknown id %u or flags %#x", f->name, i, id, flags);
  if (at != *next || stored > table_at - at)
    return CORRUPT("%s: section '%s' at bytes %llu..+%llu does not follow the one before "
                   "within the file",
                   f->name, snap_section_name(id), (unsigned long long)at,
                   (unsigned long long)stored);
  /* No more raw bytes than a zstd frame of the stored ones can hold (each
   * block of up to ZSTD_BLOCKSIZE_MAX takes 4 bytes at least): decoders
   * allocate the raw sizes. Whether the frame says the same is checked
   * after its stored checksum (frames_match). */
  if (raw / ZSTD_BLOCKSIZE_MAX > stored / 4)
    return CORRUPT("%s: section '%s' is not a zstd frame of %llu bytes", f->name,
                   snap_section_name(id), (unsigned long long)raw);
  *next = at + stored;
  f->ids[i] = id;
  f->entry_flags[i] = flags;
  f->desc.sections[i] = (ls_snapshot_section_t){snap_section_name(id),
                                                id,
                                                flags >> 16,
                                                (flags & SNAP_FLAG_REQUIRED) != 0,
                                                at,
                                                stored,
                                                raw,
                                                snap_get_u32(e + 36),
                                                (flags & SNAP_FLAG_SHUFFLED) != 0};
  return LS_OK;
}

/* Each section's zstd frame says the raw size its table entry does (the
 * sections read: a file read for its meta alone holds only that one's), so
 * that no decoder allocates what a table claims past its frames (a file
 * written by another program, every checksum right). */
static ls_err_t frames_match(const snap_file_t *f, const snap_limits_t *lim) {
  for (int i = 0; i < f->desc.n_sections; i++) {
    const ls_snapshot_section_t *const s = &f->desc.sections[i];
    if (lim->meta_only && f->ids[i] != SNAP_META) continue;
    if (ZSTD_getFrameContentSize(f->data + s->offset, (size_t)s->stored) != s->raw)
      return CORRUPT("%s: section '%s' is not a zstd frame of %llu bytes", f->name, s->name,
                     (unsigned long long)s->raw);
  }
  return LS_OK;
}

ls_err_t snap_file_parse(const uint8_t *d, size_t size, const char *name, uint32_t kind,
                         const snap_limits_t *lim, snap_file_t *f) {
  size_t const least = SNAP_HEADER_BYTES + SNAP_TAIL_BYTES;
  *f = (snap_file_t){.name = name, .data = d, .size = size};
  if (size < least)
    return CORRUPT("%s: truncated: %zu bytes, a snapshot file has at least %zu", name, size, least);
  if (memcmp(d, SNAP_MAGIC, 8) != 0)
    return CORRUPT("%s: not a snapshot file (wrong magic number: its first bytes are not "
                   "\"LSTRSNAP\")",
                   name);
  uint32_t const version = snap_get_u32(d + 8);
  if (version == 3)
    return CORRUPT("%s: format version 3, written by an lstream that kept no forecasts going out "
                   "(no serve or predict section) or no records in flight in the layout of "
                   "version 4 (the two lines of version 3 differ); this build reads versions %d "
                   "to %d: train afresh (--resume none, or another --snapshot-dir) or resume "
                   "with the lstream that wrote it",
                   name, SNAP_VERSION_OLDEST, SNAP_VERSION);
  if (version == 2)
    return CORRUPT("%s: format version 2, written by an lstream that kept no records in flight "
                   "(its resume offsets stayed at a quiet series' oldest record, which retention "
                   "may have deleted); this build reads versions %d to %d: train afresh (--resume "
                   "none, or another --snapshot-dir) or resume with the lstream that wrote it",
                   name, SNAP_VERSION_OLDEST, SNAP_VERSION);
  if (version == 1)
    return CORRUPT("%s: format version 1, written by an lstream without the per-series "
                   "normaliser, calibration and replay memory; this build reads versions %d to "
                   "%d: train afresh (--resume none, or another --snapshot-dir) or resume with "
                   "the lstream that wrote it",
                   name, SNAP_VERSION_OLDEST, SNAP_VERSION);
  if (version > SNAP_VERSION || version < SNAP_VERSION_OLDEST)
    return CORRUPT("%s: format version %u, this build reads versions %d to %d (written by a "
                   "later lstream? resume with it)",
                   name, version, SNAP_VERSION_OLDEST, SNAP_VERSION);
  f->kind = snap_get_u32(d + 12);
  if (f->kind != kind)
    return CORRUPT("%s: a %s file where a %s was expected", name, kind_name(f->kind),
                   kind_name(kind));
  f->flags = snap_get_u32(d + 16);
  f->step = (int64_t)snap_get_u64(d + 24);
  f->world = (int32_t)snap_get_u32(d + 32);
  f->rank = (int32_t)snap_get_u32(d + 36);

  const uint8_t *const tail = d + size - SNAP_TAIL_BYTES;
  uint64_t const file_size = snap_get_u64(tail + 8);
  if (memcmp(tail + 16, SNAP_END_MAGIC, 8) != 0)
    return CORRUPT("%s: truncated or damaged: no end marker in its last bytes (%zu bytes)", name,
                   size);
  if (file_size != size)
    return CORRUPT("%s: %s: %zu bytes, written with %llu", name,
                   size < file_size ? "truncated" : "damaged", size, (unsigned long long)file_size);
  uint32_t const n = snap_get_u32(tail);
  if (n < 1 || n > LS_SNAPSHOT_SECTIONS_MAX || n * SNAP_ENTRY_BYTES > size - least)
    return CORRUPT("%s: damaged: %u sections do not fit in %zu bytes (at most %d)", name, n, size,
                   LS_SNAPSHOT_SECTIONS_MAX);
  size_t const table_at = size - SNAP_TAIL_BYTES - n * SNAP_ENTRY_BYTES;
  uint32_t const table_crc = base_crc32c(0, d + table_at, n * SNAP_ENTRY_BYTES);
  if (!lim->skip_checksums && table_crc != snap_get_u32(tail + 4))
    return CORRUPT("%s: the section table is damaged (checksum %08x, written %08x)", name,
                   table_crc, snap_get_u32(tail + 4));
  uint64_t next = SNAP_HEADER_BYTES;
  for (uint32_t i = 0; i < n; i++)
    LS_FORWARD_IF_ERROR(
        parse_entry(f, (int)i, d + table_at + i * SNAP_ENTRY_BYTES, &next, table_at));
  if (next != table_at)
    return CORRUPT("%s: damaged: %llu bytes between the last section and the table", name,
                   (unsigned long long)(table_at - next));
  f->desc.version = version;
  f->desc.size = size;
  f->desc.n_sections = (int)n;
  f->desc.crc = snap_get_u32(d + size - 4);
  if (lim->skip_checksums) return frames_match(f, lim);
  for (uint32_t i = 0; i < n; i++) {
    const ls_snapshot_section_t *const s = &f->desc.sections[i];
    if (lim->meta_only && f->ids[i] != SNAP_META) continue;
    uint32_t const got = base_crc32c(0, d + s->offset, s->stored);
    uint32_t const want = snap_get_u32(d + table_at + i * SNAP_ENTRY_BYTES + 32);
    if (got != want)
      return CORRUPT("%s: section '%s' (bytes %llu..%llu) is damaged: checksum %08x, written "
                     "%08x",
                     name, s->name, (unsigned long long)s->offset,
                     (unsigned long long)(s->offset + s->stored), got, want);
  }
  if (!lim->meta_only) {
    uint32_t const file_crc = base_crc32c(0, d, size - 4);
    if (file_crc != f->desc.crc)
      return CORRUPT("%s: damaged header, table or tail: whole-file checksum %08x, written %08x",
                     name, file_crc, f->desc.crc);
  }
  return frames_match(f, lim);
}

/* ------------------------------------------------------------------------ */
/* Decoding sections                                                         */

/* A decompression context and a block for unshuffling. */
typedef struct decoder_s {
  ZSTD_DCtx *dctx;
  uint8_t block[SNAP_SHUFFLE_BLOCK];
} decoder_t;

/* A frame being decompressed: its input, and zstd's last hint (0 once the
 * frame has ended, checksum included). */
typedef struct inflow_s {
  ZSTD_inBuffer in;
  size_t left;
} inflow_t;

/* Decompresses into dst (n bytes, n == 0 to finish the frame) until it is
 * full, or the frame ends. */
static ls_err_t inflate_into(const snap_file_t *f, const ls_snapshot_section_t *s, ZSTD_DCtx *dctx,
                             inflow_t *flow, void *dst, size_t n) {
  ZSTD_outBuffer out = {dst, n, 0};
  while (flow->left != 0) {
    size_t const in_was = flow->in.pos, out_was = out.pos;
    flow->left = ZSTD_decompressStream(dctx, &out, &flow->in);
    if (ZSTD_isError(flow->left))
      return CORRUPT("%s: section '%s' does not decompress: %s", f->name, s->name,
                     ZSTD_getErrorName(flow->left));
    if (out.pos == out.size && n > 0) return LS_OK;
    if (flow->in.pos == in_was && out.pos == out_was) break; /* no progress: input ends */
  }
  if (out.pos < out.size || flow->left != 0)
    return CORRUPT("%s: section '%s' holds less than the %llu bytes it was written with", f->name,
                   s->name, (unsigned long long)s->raw);
  return LS_OK;
}

/* Decodes section i of f into the spans of sec (which must add up to its
 * raw size), unshuffling, and checks its raw checksum. */
static ls_err_t decode_section(const snap_file_t *f, int i, const snap_section_spans_t *sec,
                               decoder_t *dec, const snap_limits_t *lim) {
  const ls_snapshot_section_t *const s = &f->desc.sections[i];
  if (f->ids[i] != sec->id)
    return CORRUPT("%s: section %d is '%s' where '%s' was expected", f->name, i, s->name,
                   snap_section_name(sec->id));
  if (s->raw != snap_section_bytes(sec))
    return CORRUPT("%s: section '%s' holds %llu bytes, its meta section says %llu", f->name,
                   s->name, (unsigned long long)s->raw,
                   (unsigned long long)snap_section_bytes(sec));
  const uint8_t *const frame = f->data + s->offset; /* of s->raw bytes (parse_entry) */
  ZSTD_DCtx_reset(dec->dctx, ZSTD_reset_session_only);
  inflow_t flow = {{frame, s->stored, 0}, 1};
  uint32_t crc = 0;
  for (int k = 0; k < sec->n; k++) {
    uint8_t *const dst = sec->span[k].ptr;
    size_t const bytes = sec->span[k].bytes;
    if (!(s->shuffled && sec->span[k].floats)) {
      LS_FORWARD_IF_ERROR(inflate_into(f, s, dec->dctx, &flow, dst, bytes));
    } else {
      for (size_t at = 0; at < bytes; at += SNAP_SHUFFLE_BLOCK) {
        size_t const len = bytes - at < SNAP_SHUFFLE_BLOCK ? bytes - at : SNAP_SHUFFLE_BLOCK;
        LS_FORWARD_IF_ERROR(inflate_into(f, s, dec->dctx, &flow, dec->block, len));
        snap_unshuffle4(dst + at, dec->block, len / 4);
      }
    }
    crc = base_crc32c(crc, dst, bytes);
  }
  /* The frame must end here (its last block and zstd's checksum), and the
   * section with it. */
  LS_FORWARD_IF_ERROR(inflate_into(f, s, dec->dctx, &flow, NULL, 0));
  if (flow.in.pos != flow.in.size)
    return CORRUPT("%s: section '%s' has %zu bytes after its zstd frame", f->name, s->name,
                   flow.in.size - flow.in.pos);
  if (!lim->skip_checksums && crc != s->crc)
    return CORRUPT("%s: section '%s' decodes to other bytes than were written (checksum %08x, "
                   "written %08x)",
                   f->name, s->name, crc, s->crc);
  return LS_OK;
}

/* A decoder; skipping checksums (the fuzzer) skips zstd's too. */
static ls_err_t decoder_new(const snap_limits_t *lim, decoder_t **out) {
  decoder_t *d = malloc(sizeof *d);
  ZSTD_DCtx *const dctx = ZSTD_createDCtx();
  if (d == NULL || dctx == NULL) {
    free(d);
    ZSTD_freeDCtx(dctx);
    return ls_error_set(LS_ERR_NOMEM, "no memory for a zstd decompression context");
  }
  if (lim->skip_checksums)
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_forceIgnoreChecksum, ZSTD_d_ignoreChecksum);
  d->dctx = dctx;
  *out = d;
  return LS_OK;
}

static void decoder_destroy(decoder_t *d) {
  if (d == NULL) return;
  ZSTD_freeDCtx(d->dctx);
  free(d);
}

/* Decodes section 0 of a shard into *m and checks it against the header. */
/* The meta's in-flight counts and update count, for what a writer makes. */
static ls_err_t check_meta_inflight(const snap_file_t *f, const snap_meta_t *m) {
  if (m->in_F > (1u << 16) || m->in_series > (1ull << 40) || m->in_rows > (1ull << 40) ||
      m->in_windows > (1ull << 40) || m->in_key_bytes < 2 * m->in_series ||
      m->in_key_bytes > 256 * m->in_series || m->in_rows + m->in_windows < m->in_series ||
      (m->in_F == 0 && m->in_series + m->in_rows + m->in_windows > 0) ||
      (m->model_refs ? m->segs == 0 || m->model_refs > 1 || m->in_F == 0
                     : (m->segs == 0) != (m->in_windows == 0) || m->segs > m->in_windows) ||
      m->updates < 0)
    return CORRUPT("%s: meta: %llu series in flight of %u features with %llu rows, %llu windows "
                   "by reference in %u segments and %llu key bytes, %lld updates are not possible",
                   f->name, (unsigned long long)m->in_series, m->in_F,
                   (unsigned long long)m->in_rows, (unsigned long long)m->in_windows, m->segs,
                   (unsigned long long)m->in_key_bytes, (long long)m->updates);
  return LS_OK;
}

/* The meta's layouts of the series' state, memory, calibration and
 * forecasts' bookkeeping, for what a writer makes. */
static ls_err_t check_meta_layouts(const snap_file_t *f, const snap_meta_t *m) {
  if ((m->stats_F == 0) != (m->stats_O == 0) || m->stats_F > (1u << 16) ||
      m->stats_O > m->stats_F || (m->mem_cap == 0) != (m->mem_entry == 0) ||
      m->mem_cap > (1u << 30) || m->mem_entry > (1u << 30) || m->has_calib > m->has_model ||
      m->has_serve > (m->stats_F > 0) || m->predict_Q > (1u << 20) || m->predict_W > (1u << 20) ||
      (m->predict_Q + m->predict_W > 0 && !m->has_model) || m->model_X > (1u << 24) ||
      (m->model_X > 0 && m->stats_F == 0) || (m->model_refs && m->model_X == 0))
    return CORRUPT("%s: meta: series state of %u features and %u targets (forecasts %u), a "
                   "memory of %llu entries of %llu floats, calibration %u, forecasts' "
                   "bookkeeping of %u and %u values, %u doubles of series model are not possible",
                   f->name, m->stats_F, m->stats_O, m->has_serve, (unsigned long long)m->mem_cap,
                   (unsigned long long)m->mem_entry, m->has_calib, m->predict_Q, m->predict_W,
                   m->model_X);
  return LS_OK;
}

/* The bytes m's content takes (row: L H floats, n parameters); in double:
 * S * row may overflow 64 bits in a damaged file. */
static double meta_content_bytes(const snap_meta_t *m, uint64_t row, size_t n) {
  double const S = (double)m->series;
  return S * (53.0 + 8.0 * (double)row) + (double)m->key_bytes +
         S * 8.0 * (1.0 + 4.0 * m->stats_F + 2.0 * m->stats_O) +
         S * 8.0 * (LS_SERVE_FIELDS + m->stats_O + m->stats_F) * m->has_serve +
         S * 8.0 * (m->model_X + (m->model_refs ? 2 : 0)) +
         8.0 * ((double)m->predict_Q + (double)m->predict_W) +
         (double)m->parts * (28.0 + 4.0 * (double)m->mem_cap * (double)m->mem_entry) +
         (m->has_model ? 12.0 * (double)n + 24.0 * m->shape.output_size : 0.0) +
         (double)m->in_series * 65.0 + (double)m->in_key_bytes +
         (double)m->in_rows * (16.0 + 4.0 * m->in_F) + (double)m->in_windows * 16.0 +
         (double)m->segs * SNAP_SEG_ENTRY_BYTES;
}

static ls_err_t read_meta(const snap_file_t *f, decoder_t *dec, const snap_limits_t *lim,
                          snap_meta_t *m) {
  uint8_t raw[SNAP_META_BYTES];
  snap_section_spans_t const sec = {SNAP_META, 1, {{raw, sizeof raw, 0}}};
  LS_FORWARD_IF_ERROR(decode_section(f, 0, &sec, dec, lim));
  *m = snap_meta_unpack(raw);
  uint32_t const version = snap_get_u32(f->data + 8);
  if (version < 6) m->segs = 0, m->in_windows = 0; /* (reserved before) */
  if (version < 7) m->model_refs = 0;
  if (ls_shape_check(&m->shape) != LS_OK)
    return CORRUPT("%s: meta: shape I=%d H=%d L=%d O=%d is not valid", f->name, m->shape.input_size,
                   m->shape.hidden_size, m->shape.num_layers, m->shape.output_size);
  if (f->step < 0 || f->world < 1 || f->rank < 0 || f->rank >= f->world)
    return CORRUPT("%s: step %lld, rank %d of world %d is not possible", f->name,
                   (long long)f->step, (int)f->rank, (int)f->world);
  if (m->has_model != (f->rank == 0))
    return CORRUPT("%s: rank %d %s a model: rank 0's part and only it holds one", f->name,
                   (int)f->rank, m->has_model ? "holds" : "lacks");
  size_t n = 0;
  ls_param_count(&m->shape, &n);
  if (m->has_model && (m->n != n || m->adam_steps < 0))
    return CORRUPT("%s: meta: %llu parameters (%lld updates), the shape has %zu", f->name,
                   (unsigned long long)m->n, (long long)m->adam_steps, n);
  /* What the content will take, before allocating it: per series 1 + 4 +
   * 5 * 8 bytes of counts, 8 of key offset, 2 * L * H floats, its host-side
   * state; keys have 2..256 bytes each with their NUL. */
  uint64_t const S = m->series, row = (uint64_t)m->shape.num_layers * m->shape.hidden_size;
  if (S > (1ull << 40) || m->parts > (1ull << 40) || m->key_bytes < 2 * S || m->key_bytes > 256 * S)
    return CORRUPT("%s: meta: %llu series with %llu key bytes, %llu partitions are not possible",
                   f->name, (unsigned long long)S, (unsigned long long)m->key_bytes,
                   (unsigned long long)m->parts);
  LS_FORWARD_IF_ERROR(check_meta_inflight(f, m));
  LS_FORWARD_IF_ERROR(check_meta_layouts(f, m));
  double const need = meta_content_bytes(m, row, n);
  if (need > 0x1p62 || (lim->max_alloc != 0 && need > (double)lim->max_alloc))
    return CORRUPT("%s: meta: content of %.0f bytes exceeds the limit of %llu", f->name, need,
                   (unsigned long long)(lim->max_alloc ? lim->max_alloc : 1ull << 62));
  /* Every section's size as the meta says, before anything is allocated. */
  ls_snapshot_t sizing = {.shape = m->shape,
                          .row = (size_t)row,
                          .has_model = (int)m->has_model,
                          .n = n,
                          .series = (size_t)S,
                          .parts = (size_t)m->parts,
                          .key_bytes = (size_t)m->key_bytes,
                          .stats_F = (int)m->stats_F,
                          .stats_O = (int)m->stats_O,
                          .has_calib = (int)m->has_calib,
                          .has_serve = (int)m->has_serve,
                          .model_X = (size_t)m->model_X,
                          .predict_Q = (int)m->predict_Q,
                          .predict_W = (int)m->predict_W,
                          .mem_cap = (size_t)m->mem_cap,
                          .mem_entry = (size_t)m->mem_entry,
                          .in_F = (int)m->in_F,
                          .in_series = (size_t)m->in_series,
                          .in_key_bytes = (size_t)m->in_key_bytes,
                          .in_rows = (size_t)m->in_rows,
                          .in_windows = (size_t)m->in_windows,
                          .n_segs = (size_t)m->segs,
                          .model_refs = (int)m->model_refs};
  uint32_t ids[SNAP_SHARD_SECTIONS];
  int const count = 1 + snap_shard_ids(&sizing, 1, ids);
  int modules = 0; /* the module sections after the container's */
  while (count + modules < f->desc.n_sections && snap_is_module(f->ids[count + modules]))
    modules++;
  if (f->desc.n_sections != count + modules)
    return CORRUPT("%s: %d sections, its meta section says %d and %d of modules", f->name,
                   f->desc.n_sections, count, modules);
  for (int i = 1; i < count; i++) {
    snap_section_spans_t const want = snap_section_of(&sizing, ids[i - 1]);
    if (f->desc.sections[i].raw != snap_section_bytes(&want))
      return CORRUPT("%s: section '%s' holds %llu bytes, its meta section says %llu", f->name,
                     f->desc.sections[i].name, (unsigned long long)f->desc.sections[i].raw,
                     (unsigned long long)snap_section_bytes(&want));
  }
  return LS_OK;
}

/* Checks the keys' lengths and NULs and sets their offsets. */
static ls_err_t index_keys(const snap_file_t *f, ls_snapshot_t *s) {
  size_t at = 0;
  for (size_t i = 0; i < s->series; i++) {
    size_t const len = s->key_len[i];
    if (len < 1 || len + 1 > s->key_bytes - at || s->keys[at + len] != '\0')
      return CORRUPT("%s: keys: key %zu (%zu bytes at %zu) is not a NUL-terminated key of 1..%d "
                     "bytes within the section",
                     f->name, i, len, at, LS_KEY_MAX);
    s->key_off[i] = at;
    at += len + 1;
  }
  if (at != s->key_bytes)
    return CORRUPT("%s: keys: %zu bytes after the last key", f->name, s->key_bytes - at);
  return LS_OK;
}

static int cmp_i32(const void *a, const void *b) {
  int32_t const x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Checks counts and partitions for values a writer never produces. */
static ls_err_t check_values(const snap_file_t *f, ls_snapshot_t *s) {
  for (size_t i = 0; i < s->series; i++)
    if (s->partition[i] < 0 || s->windows[i] < 0 || s->records[i] < 0 || s->last_off[i] < -1 ||
        s->last_time[i] < -1 || s->active[i] < 0)
      return CORRUPT("%s: counts: series %zu has partition %d, %lld windows, %lld records, last "
                     "offset %lld",
                     f->name, i, (int)s->partition[i], (long long)s->windows[i],
                     (long long)s->records[i], (long long)s->last_off[i]);
  for (size_t i = 0; i < s->parts; i++)
    if (s->part_id[i] < 0 || s->part_offset[i] < 0)
      return CORRUPT("%s: partitions: partition %d has offset %lld", f->name, (int)s->part_id[i],
                     (long long)s->part_offset[i]);
  for (size_t i = 0; s->stats_F > 0 && i < s->series; i++)
    if (s->norm_n[i] < 0)
      return CORRUPT("%s: norm: series %zu consumed %lld records", f->name, i,
                     (long long)s->norm_n[i]);
  for (size_t i = 0; s->has_serve && i < s->series * LS_SERVE_FIELDS; i++)
    if (s->serve[i] < 0 && i % LS_SERVE_FIELDS != LS_SERVE_TIME &&
        i % LS_SERVE_FIELDS != LS_SERVE_TAIL_TIME) /* a time may be -1 */
      return CORRUPT("%s: serve: series %zu holds %lld", f->name, i / LS_SERVE_FIELDS,
                     (long long)s->serve[i]);
  for (size_t i = 0; s->mem_cap > 0 && i < s->parts; i++)
    if (s->mem_filled[i] < 0 || (uint64_t)s->mem_filled[i] > s->mem_cap || s->mem_next[i] < 0 ||
        (uint64_t)s->mem_next[i] >= s->mem_cap)
      return CORRUPT("%s: memory: partition %d holds %lld entries, next slot %lld, of %zu", f->name,
                     (int)s->part_id[i], (long long)s->mem_filled[i], (long long)s->mem_next[i],
                     s->mem_cap);
  int32_t *const ids = malloc(s->parts ? s->parts * sizeof *ids : 1);
  LS_RETURN_IF(ids == NULL, LS_ERR_NOMEM, "no memory to check %zu partitions", s->parts);
  memcpy(ids, s->part_id, s->parts * sizeof *ids);
  qsort(ids, s->parts, sizeof *ids, cmp_i32);
  ls_err_t err = LS_OK;
  for (size_t i = 0; i < s->parts && err == LS_OK; i++)
    if (i > 0 && ids[i] == ids[i - 1])
      err = CORRUPT("%s: partitions: partition %d is listed twice", f->name, (int)ids[i]);
  free(ids);
  return err;
}

/* Decodes the sections after meta that `what` asks for into s (sized from
 * m), and checks them. */
/* Decodes the module sections of f (after its n container sections and
 * meta) into s, each as its bytes (state/ does not read them). */
static ls_err_t decode_modules(const snap_file_t *f, int n, decoder_t *dec,
                               const snap_limits_t *lim, ls_snapshot_t *s) {
  for (int i = 1 + n; i < f->desc.n_sections; i++) {
    const ls_snapshot_section_t *const d = &f->desc.sections[i];
    if (snap_module(s, f->ids[i]) != NULL)
      return CORRUPT("%s: section %u twice", f->name, f->ids[i]);
    if ((lim->max_alloc != 0 && d->raw > lim->max_alloc) || d->raw > (1ull << 40))
      return CORRUPT("%s: section %u of %llu bytes exceeds the limit", f->name, f->ids[i],
                     (unsigned long long)d->raw);
    uint32_t const e = f->entry_flags[i];
    unsigned const flags = ((e & SNAP_FLAG_REQUIRED) ? LS_SNAPSHOT_REQUIRED : 0) |
                           ((e & SNAP_FLAG_FLOATS) ? LS_SNAPSHOT_FLOATS : 0);
    if ((d->shuffled && !(e & SNAP_FLAG_FLOATS)) || ((e & SNAP_FLAG_FLOATS) && d->raw % 4 != 0))
      return CORRUPT("%s: section %u is shuffled or of floats but not float32s", f->name,
                     f->ids[i]);
    LS_FORWARD_IF_ERROR(snap_put_module(s, f->ids[i], d->version, flags, NULL, 0));
    struct snap_module_s *const m = &s->modules[s->n_modules - 1];
    m->data = malloc(d->raw > 0 ? (size_t)d->raw : 1);
    LS_RETURN_IF(m->data == NULL, LS_ERR_NOMEM, "no memory for section %u", f->ids[i]);
    m->cap = m->bytes = (size_t)d->raw;
    snap_section_spans_t const sec = {f->ids[i], 1, {{m->data, m->bytes, d->shuffled}}};
    LS_FORWARD_IF_ERROR(decode_section(f, i, &sec, dec, lim));
  }
  return LS_OK;
}

/* Decodes the sections after meta that `what` asks for into s (sized from
 * m), and checks them. */
static ls_err_t decode_shard_body(const snap_file_t *f, const snap_meta_t *m, int what,
                                  decoder_t *dec, const snap_limits_t *lim, ls_snapshot_t *s) {
  uint32_t ids[SNAP_SHARD_SECTIONS];
  int n = snap_shard_ids(s, 1, ids);
  if (!(what & SNAP_DECODE_ALL)) { /* the module sections alone: they follow the container's */
    n = 0;
    while (1 + n < f->desc.n_sections && f->ids[1 + n] < LS_SNAPSHOT_SECTION_FIRST)
      n++;
  }
  for (int i = 0; i < n && (what & SNAP_DECODE_ALL); i++) {
    int const model = ids[i] == SNAP_MODEL || ids[i] == SNAP_OPTIMIZER ||
                      ids[i] == SNAP_CALIBRATION || ids[i] == SNAP_PREDICT;
    if (!(what & (model ? SNAP_DECODE_MODEL : SNAP_DECODE_SERIES))) continue;
    snap_section_spans_t const sec = snap_section_of(s, ids[i]);
    LS_FORWARD_IF_ERROR(decode_section(f, 1 + i, &sec, dec, lim));
  }
  if (what & SNAP_DECODE_MODEL) LS_FORWARD_IF_ERROR(snap_legacy_migrate(s));
  LS_FORWARD_IF_ERROR(decode_modules(f, n, dec, lim, s));
  if (!(what & SNAP_DECODE_SERIES)) return LS_OK;
  if (s->stats_F > 0 && !s->has_serve) { /* no serve section: no forecast has gone out */
    memset(s->serve, 0, s->series * LS_SERVE_FIELDS * sizeof *s->serve);
    memset(s->pending, 0, s->series * (size_t)s->stats_O * sizeof *s->pending);
    memset(s->tail, 0, s->series * (size_t)s->stats_F * sizeof *s->tail);
    s->has_serve = 1;
  }
  LS_FORWARD_IF_ERROR(index_keys(f, s));
  LS_FORWARD_IF_ERROR(snap_index_inflight(s, f->name));
  return check_values(f, s);
}

/* A snapshot sized for what of m's content `what` asks for. */
static ls_err_t shard_alloc(const snap_file_t *f, const snap_meta_t *m, int what,
                            ls_snapshot_t **out) {
  int const series = (what & SNAP_DECODE_SERIES) != 0;
  ls_snapshot_t *s = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_new(&m->shape, series ? (size_t)m->series : 0,
                                      series ? (size_t)m->parts : 0, &s));
  ls_err_t err = series ? snap_reserve(s, 0, (size_t)m->key_bytes, 0) : LS_OK;
  /* The layouts (whether or not the series are decoded: shards of one run
   * agree on them). */
  if (err == LS_OK) err = ls_snapshot_set_stats_shape(s, (int)m->stats_F, (int)m->stats_O);
  s->has_serve = (int)m->has_serve; /* 0: no serve section, zeros once decoded */
  if (err == LS_OK) err = ls_snapshot_set_model_width(s, (size_t)m->model_X);
  if (err == LS_OK) err = ls_snapshot_set_memory_shape(s, (size_t)m->mem_cap, (size_t)m->mem_entry);
  if (err == LS_OK) err = ls_snapshot_set_inflight_features(s, (int)m->in_F);
  s->model_refs = (int)m->model_refs; /* (its rows: snap_model_resolve) */
  if (err == LS_OK && series && m->model_refs)
    err = snap_grow(&s->mrefs, (size_t)m->series, 2 * sizeof *s->mrefs, "series' model places");
  if (err == LS_OK && series && m->model_refs) s->cap_mrefs = (size_t)m->series;
  if (err == LS_OK && series)
    err =
        snap_reserve_inflight(s, (size_t)m->in_series, (size_t)m->in_key_bytes, (size_t)m->in_rows);
  if (err == LS_OK && series) err = snap_reserve_refs(s, (size_t)m->in_windows);
  if (err == LS_OK && series)
    err = snap_grow(&s->segs, (size_t)m->segs, SNAP_SEG_ENTRY_BYTES, "segment entries");
  if (err == LS_OK && series) { /* (a file before format 6 has no windows by reference) */
    s->cap_segs = (size_t)m->segs;
    memset(s->in_wins, 0, (size_t)m->in_series * sizeof *s->in_wins);
  }
  if (err == LS_OK && m->has_model && (what & SNAP_DECODE_MODEL)) {
    err = snap_model_buffers(s, (size_t)m->n);
    s->has_model = 1;
    s->adam_steps = m->adam_steps;
  }
  /* Format 4's calibration and forecasts' books (format 5 writes none). */
  if (err == LS_OK && (what & SNAP_DECODE_MODEL))
    err = snap_legacy_alloc(s, (int)m->has_calib, (int)m->predict_Q, (int)m->predict_W);
  if (err != LS_OK) {
    ls_snapshot_destroy(s);
    return err;
  }
  if (series) {
    s->series = (size_t)m->series;
    s->parts = (size_t)m->parts;
    s->key_bytes = (size_t)m->key_bytes;
    s->in_series = (size_t)m->in_series;
    s->in_key_bytes = (size_t)m->in_key_bytes;
    s->in_rows = (size_t)m->in_rows;
    s->in_windows = (size_t)m->in_windows;
    s->n_segs = (size_t)m->segs;
  }
  s->info = (ls_snapshot_info_t){f->step, m->seed, m->fingerprint, f->world, f->rank, m->updates};
  *out = s;
  return LS_OK;
}

ls_err_t snap_decode_shard(const snap_file_t *f, int what, const snap_limits_t *lim,
                           ls_snapshot_t **out) {
  *out = NULL;
  decoder_t *dec = NULL;
  LS_FORWARD_IF_ERROR(decoder_new(lim, &dec));
  snap_meta_t m;
  ls_snapshot_t *s = NULL;
  ls_err_t err = read_meta(f, dec, lim, &m);
  if (err == LS_OK) err = shard_alloc(f, &m, what, &s);
  if (err == LS_OK) err = decode_shard_body(f, &m, what, dec, lim, s);
  decoder_destroy(dec);
  if (err != LS_OK) {
    ls_snapshot_destroy(s);
    return err;
  }
  s->file = f->desc;
  *out = s;
  return LS_OK;
}

ls_err_t snap_decode_shard_meta(const snap_file_t *f, snap_meta_t *m) {
  snap_limits_t const lim = {0};
  decoder_t *dec = NULL;
  LS_FORWARD_IF_ERROR(decoder_new(&lim, &dec));
  ls_err_t const err = read_meta(f, dec, &lim, m);
  decoder_destroy(dec);
  return err;
}

ls_err_t snap_decode_manifest(const snap_file_t *f, const snap_limits_t *lim,
                              ls_snapshot_shard_t **shards) {
  *shards = NULL;
  if (f->step < 0 || f->world < 1 || f->rank != 0 || f->desc.n_sections != 1)
    return CORRUPT("%s: step %lld, world %d, rank %d, %d sections: not a manifest's", f->name,
                   (long long)f->step, (int)f->world, (int)f->rank, f->desc.n_sections);
  uint64_t const bytes = (uint64_t)f->world * SNAP_SHARD_ENTRY_BYTES;
  if (f->desc.sections[0].raw != bytes)
    return CORRUPT("%s: section 'shards' holds %llu bytes, %d shards take %llu", f->name,
                   (unsigned long long)f->desc.sections[0].raw, (int)f->world,
                   (unsigned long long)bytes);
  if (lim->max_alloc != 0 && bytes > lim->max_alloc)
    return CORRUPT("%s: %d shards exceed the limit of %llu bytes", f->name, (int)f->world,
                   (unsigned long long)lim->max_alloc);
  uint8_t *const list = malloc((size_t)bytes);
  ls_snapshot_shard_t *const out = malloc((size_t)f->world * sizeof *out);
  decoder_t *dec = NULL;
  ls_err_t err = list && out ? decoder_new(lim, &dec)
                             : ls_error_set(LS_ERR_NOMEM, "no memory for %d shards", (int)f->world);
  snap_section_spans_t const sec = {SNAP_SHARDS, 1, {{list, (size_t)bytes, 0}}};
  if (err == LS_OK) err = decode_section(f, 0, &sec, dec, lim);
  for (int32_t r = 0; err == LS_OK && r < f->world; r++) {
    const uint8_t *const p = list + (size_t)r * SNAP_SHARD_ENTRY_BYTES;
    out[r] = (ls_snapshot_shard_t){snap_get_u64(p), snap_get_u32(p + 8), snap_get_u64(p + 16),
                                   snap_get_u64(p + 24)};
    if (out[r].size < SNAP_HEADER_BYTES + SNAP_TAIL_BYTES)
      err = CORRUPT("%s: shard %d of %llu bytes is not possible", f->name, (int)r,
                    (unsigned long long)out[r].size);
  }
  decoder_destroy(dec);
  free(list);
  if (err != LS_OK) {
    free(out);
    return err;
  }
  *shards = out;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Segments                                                                  */

ls_err_t snap_decode_sections(const snap_file_t *f, const int *at, const snap_section_spans_t *secs,
                              int n) {
  snap_limits_t const lim = {0};
  decoder_t *dec = NULL;
  LS_FORWARD_IF_ERROR(decoder_new(&lim, &dec));
  ls_err_t err = LS_OK;
  for (int k = 0; k < n && err == LS_OK; k++)
    err = decode_section(f, at[k], &secs[k], dec, &lim);
  decoder_destroy(dec);
  return err;
}

ls_err_t snap_decode_segment_list(const snap_file_t *f, uint8_t **segs, size_t *n) {
  *segs = NULL, *n = 0;
  snap_limits_t const lim = {0};
  decoder_t *dec = NULL;
  LS_FORWARD_IF_ERROR(decoder_new(&lim, &dec));
  snap_meta_t m;
  ls_err_t err = read_meta(f, dec, &lim, &m);
  int at = -1;
  for (int i = 1; err == LS_OK && i < f->desc.n_sections; i++)
    if (f->ids[i] == SNAP_SEGMENTS) at = i;
  if (err == LS_OK && at > 0) {
    size_t const bytes = (size_t)m.segs * SNAP_SEG_ENTRY_BYTES;
    *segs = malloc(bytes > 0 ? bytes : 1);
    snap_section_spans_t const sec = {SNAP_SEGMENTS, 1, {{*segs, bytes, 0}}};
    err = *segs == NULL ? ls_error_set(LS_ERR_NOMEM, "no memory for %u segment entries", m.segs)
                        : decode_section(f, at, &sec, dec, &lim);
    if (err == LS_OK) *n = m.segs;
  }
  decoder_destroy(dec);
  if (err != LS_OK) free(*segs), *segs = NULL, *n = 0;
  return err;
}
