/*
 * Snapshot files: the on-disk format, and the internals shared by the
 * snapshot modules (snapshot.c: the in-memory content; snapshot_format.c:
 * what writing and reading one file share; snapshot_encode.c: writing one;
 * snapshot_decode.c: reading and verifying one; snapshot_io.c: directories,
 * commit, load; snapshot_lock.c: one trainer per directory; snapshotter.c:
 * the background writer; safetensors.c: export). Not a public header.
 *
 * Format, version 5; version 4 is read too (the same layout without module
 * sections: every section of a version-4 file is the container's own);
 * versions 1 to 3 are refused with a message saying why: 1 has no
 * normaliser, calibration or replay memory; 2 has no records in flight, its
 * resume offsets pinned at a quiet series' oldest record; 3 has no
 * forecasts going out, serve and predict sections. Every integer
 * little-endian (the build requires a little-endian host); every checksum
 * CRC32C (Castagnoli, as in iSCSI, ext4 and Kafka's record batches).
 *
 *   file    = header | frame* | table | tail
 *   header  (40 bytes)
 *     0  magic      8   "LSTRSNAP"
 *     8  version    u32 5 (4 for files written before module sections)
 *     12 kind       u32 1 = shard, 2 = manifest
 *     16 flags      u32 bit 0: some section is byte-shuffled
 *     20 reserved   u32 0
 *     24 step       i64
 *     32 world      i32
 *     36 rank       i32 (0 in the manifest)
 *   frame   one zstd frame per section, in table order, back to back from
 *           byte 40; each with zstd's content size and content checksum
 *   table   (40 bytes per section)
 *     0  id         u32 section id (below)
 *     4  flags      u32 bit 0: float arrays byte-shuffled; bit 1: required
 *                   (a module section a reader must know, else refuse the
 *                   file); bit 2: a module section of float32s; bits
 *                   16..31: a module section's layout version
 *     8  offset     u64 where its frame starts
 *     16 stored     u64 frame bytes
 *     24 raw        u64 bytes once decompressed
 *     32 stored_crc u32 CRC32C of the frame bytes
 *     36 raw_crc    u32 CRC32C of the raw bytes (before shuffling)
 *   tail    (32 bytes)
 *     0  sections   u32 number of table entries
 *     4  table_crc  u32 CRC32C of the table
 *     8  file_size  u64 bytes of the whole file
 *     16 end        8   "LSSNPEND"
 *     24 reserved   u32 0
 *     28 file_crc   u32 CRC32C of every byte before it
 *
 * A writer streams header, frames, table and tail in one pass; a reader
 * checks, in this order, the magic, version and kind, the tail (a missing
 * end marker or a wrong size: truncated), the table's checksum and bounds,
 * each frame's stored checksum (naming the section at fault), the whole-file
 * checksum, and then, decoding, each section's content size and raw
 * checksum and the content's consistency.
 *
 * Shard sections, in this order (model, optimizer and calibration in rank
 * 0's only; norm, calibration, memory and in-flight only when the meta says
 * so):
 *   1 meta        192 bytes: I, H, L, O i32; has_model u32; reserved u32;
 *                 n u64 (params); adam_steps i64; seed u64; fingerprint u64;
 *                 series S u64; partitions P u64; key_bytes u64;
 *                 (at 80) stats features F u32, stats targets G u32 (0, 0:
 *                 no norm section); has_calibration u32; has_serve u32
 *                 (1: a serve section, with norm);
 *                 memory cap M u64, memory entry E u64 (floats; 0, 0: no
 *                 memory section); (at 112) in-flight features FI u32 (0:
 *                 no in-flight sections), reserved u32, in-flight series Q
 *                 u64, their key bytes KQ u64, their rows R u64; updates
 *                 i64 (the trainer's, for the warm-up); (at 152) predict
 *                 PQ u32, predict W u32 (0, 0: no predict section); (at
 *                 160) series model X u32 (0: no series_model section);
 *                 28 reserved bytes
 *   2 model       params f32 [n]
 *   3 optimizer   adam_m f32 [n], adam_v f32 [n]
 *  10 calibration (format 4 only) spy f64 [O], spp f64 [O], k i64 [O]
 *  16 predict     (format 4 only) from i64 [PQ], lengths i64 [W]
 *                 (both read into train's module sections, calibration 65
 *                 and predict 66, version 1: snap_legacy_migrate)
 *   4 keys        key_len u8 [S], then the keys, each followed by a NUL
 *                 (key_bytes = sum(key_len + 1))
 *   5 counts      partition i32 [S], windows i64 [S], records i64 [S],
 *                 last_offset i64 [S]
 *  14 activity    last event time i64 [S], activity i64 [S] (the order of
 *                 eviction: ls_series_info_t.active)
 *   6 states      h f32 [S, L, H], c f32 [S, L, H]
 *   9 norm        norm_n i64 [S], norm f64 [S, F, 4], errors f64 [S, G, 2]
 *  15 serve       serve i64 [S, 5], pending f64 [S, G], tail f64 [S, F]
 *                 (ls_series_stats_t)
 *  17 series_model  model f64 [S, X]: the trainer's per-series state
 *                 (ls_series_stats_t.model, opaque to state/; written since
 *                 issue 24, absent before: X = 0)
 *   7 partitions  partition i32 [P], offset i64 [P] (its next unread record)
 *  11 memory      filled i64 [P], next i64 [P], entries f32 [P, M, E]
 *  12 inflight    key_len u8 [Q], then the keys, each followed by a NUL,
 *                 then per series partition, window index, last event
 *                 time, reset, rows: i64 [Q, 5] (the rows sum to R)
 *  13 inflight_rows  offset i64 [R], event time i64 [R], values f32 [R, FI]
 *                 (the series' rows one after the other)
 *  64..1023 module sections (format 5), after the container's, in the
 *                 order put: opaque to state/, encoded by their modules
 *                 (state.h, LS_SNAPSHOT_SECTION_*); a reader keeps those it
 *                 does not know and the module asking for them decides
 * Manifest sections:
 *   8 shards      per rank: size u64, crc u32, reserved u32, series u64,
 *                 partitions u64 (32 bytes each)
 * Byte shuffling (flag bit 0 of a section) splits each 64 KiB block of a
 * float array (the last block shorter) into 4 planes: byte 0 of every
 * float, then byte 1, ...; raw_crc is over the unshuffled bytes.
 */
#ifndef LSTREAM_STATE_SNAPSHOT_FORMAT_H
#define LSTREAM_STATE_SNAPSHOT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/crc32c.h" /* base_crc32c: the checksum of sections and files */
#include "lstream/state.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files are written in the host's byte order, which must be little-endian"
#endif

enum {
  SNAP_VERSION = 5,
  SNAP_VERSION_OLDEST = 4, /* the oldest version read */
  SNAP_KIND_SHARD = 1,
  SNAP_KIND_MANIFEST = 2,
  SNAP_HEADER_BYTES = 40,
  SNAP_ENTRY_BYTES = 40,
  SNAP_TAIL_BYTES = 32,
  SNAP_META_BYTES = 192,
  SNAP_OWN_SECTIONS = 15, /* the most container sections after meta */
  SNAP_SHARD_SECTIONS = SNAP_OWN_SECTIONS + LS_SNAPSHOT_MODULE_SECTIONS, /* and modules' */
  SNAP_IN_META = 5, /* int64 per series in flight */
  SNAP_SHARD_ENTRY_BYTES = 32,
  SNAP_SHUFFLE_BLOCK = 64 * 1024, /* bytes shuffled together */
  SNAP_FLAG_SHUFFLED = 1,
  SNAP_FLAG_REQUIRED = 2,
  SNAP_FLAG_FLOATS = 4, /* a module section of float32s (shuffled or not) */
  SNAP_FLAG_KNOWN = SNAP_FLAG_SHUFFLED | SNAP_FLAG_REQUIRED | SNAP_FLAG_FLOATS | 0xffff0000u
};

/* Section ids (the table's id field). */
typedef enum snap_section_e {
  SNAP_META = 1,
  SNAP_MODEL,
  SNAP_OPTIMIZER,
  SNAP_KEYS,
  SNAP_COUNTS,
  SNAP_STATES,
  SNAP_PARTITIONS,
  SNAP_SHARDS,
  SNAP_NORM,
  SNAP_CALIBRATION,
  SNAP_MEMORY,
  SNAP_INFLIGHT,
  SNAP_INFLIGHT_ROWS,
  SNAP_ACTIVITY,
  SNAP_SERVE,
  SNAP_PREDICT,
  SNAP_SERIES_MODEL
} snap_section_t;

/* The first 8 bytes of every file, and bytes 16..23 of its tail. */
#define SNAP_MAGIC     "LSTRSNAP"
#define SNAP_END_MAGIC "LSSNPEND"

/* "meta", ..., a module section's name ("settings"); "?" for an unknown id. */
const char *snap_section_name(uint32_t id);

/* Whether id is a module section's (LS_SNAPSHOT_SECTION_FIRST..LAST). */
int snap_is_module(uint32_t id);

/* The module section id of s, or NULL. */
const struct snap_module_s *snap_module(const ls_snapshot_t *s, uint32_t id);

/* Puts a module section into s (ls_snapshot_put_section without the checks
 * of its arguments). */
ls_err_t snap_put_module(ls_snapshot_t *s, uint32_t id, uint32_t version, unsigned flags,
                         const void *data, size_t bytes);

/* Copies the module sections of src that dst lacks into dst (rank 0's
 * into another rank's part: they describe the run). */
ls_err_t snap_copy_modules(ls_snapshot_t *dst, const ls_snapshot_t *src);

/* Format 4's calibration and forecasts' bookkeeping (snapshot.c): room for
 * them (zeroed) as a format-4 meta announces them, and, once decoded, their
 * hand-over as the module sections that hold them from format 5 on. */
ls_err_t snap_legacy_alloc(ls_snapshot_t *s, int calib, int n_from, int n_lengths);
ls_err_t snap_legacy_migrate(ls_snapshot_t *s);

/* Little-endian fields at p (the host is little-endian: see above). */
void snap_put_u32(uint8_t *p, uint32_t v);
void snap_put_u64(uint8_t *p, uint64_t v);
uint32_t snap_get_u32(const uint8_t *p);
uint64_t snap_get_u64(const uint8_t *p);

/* The content of one rank's part (include/lstream/state.h). Arrays have
 * room for cap_series series, cap_parts partitions and cap_keys key bytes. */
struct ls_snapshot_s {
  ls_shape_t shape;
  size_t row; /* L * H: floats of one series' h (or c) */
  ls_snapshot_info_t info;

  int has_model;
  size_t n;                        /* floats of each model buffer */
  float *params, *adam_m, *adam_v; /* [n], allocated at the first set_model */
  int64_t adam_steps;

  size_t series, cap_series;
  uint8_t *key_len; /* [S] */
  size_t *key_off;  /* [S] where each key starts in keys */
  char *keys;       /* key bytes, each key followed by a NUL */
  size_t key_bytes, cap_keys;
  int32_t *partition;                    /* [S] */
  int64_t *windows, *records, *last_off; /* [S] */
  int64_t *last_time, *active;           /* [S] */
  float *h, *c;                          /* [S, L, H] */

  int stats_F, stats_O; /* host-side state per series: 0, 0 = none */
  int64_t *norm_n;      /* [S] */
  double *norm;         /* [S, F, LS_NORM_STATS] */
  double *errors;       /* [S, O, 2] */
  int has_serve;        /* with stats: serve and pending */
  int64_t *serve;       /* [S, LS_SERVE_FIELDS] */
  double *pending;      /* [S, O] */
  double *tail;         /* [S, F] */
  size_t model_X;       /* with stats: the trainer's doubles per series (0: none) */
  double *smodel;       /* [S, X] */

  int has_calib;    /* with the model: calibration per target of the shape's O */
  double *calib;    /* [2 O]: spy [O], then spp [O] */
  int64_t *calib_k; /* [O] */

  int predict_Q, predict_W; /* with the model: the forecasts' bookkeeping (0, 0: none) */
  int64_t *predict;         /* [Q + W]: from [Q], then lengths [W] */

  size_t parts, cap_parts;
  int32_t *part_id;               /* [P] */
  int64_t *part_offset;           /* [P] */
  size_t mem_cap, mem_entry;      /* replay memory per partition: 0, 0 = none */
  int64_t *mem_filled, *mem_next; /* [P] */
  float *mem;                     /* [P, mem_cap, mem_entry] */

  /* Records in flight (snapshot_inflight.c): Q series, R rows. */
  int in_F; /* features of a row; 0 = none kept (no sections) */
  size_t in_series, cap_in_series;
  uint8_t *in_key_len; /* [Q] */
  size_t *in_key_off;  /* [Q] where each key starts in in_keys */
  char *in_keys;       /* key bytes, each key followed by a NUL */
  size_t in_key_bytes, cap_in_keys;
  int64_t *in_meta;  /* [Q, SNAP_IN_META]: partition, index, last time, reset, rows */
  size_t *in_row_at; /* [Q] its first row */
  size_t in_rows, cap_in_rows;
  int64_t *in_offsets, *in_times; /* [R] */
  float *in_x;                    /* [R, in_F] */

  /* Module sections (ls_snapshot_put_section), in the order put. */
  int n_modules;
  struct snap_module_s {
    uint32_t id, version;
    unsigned flags; /* LS_SNAPSHOT_REQUIRED, LS_SNAPSHOT_FLOATS */
    uint8_t *data;
    size_t bytes, cap;
  } modules[LS_SNAPSHOT_MODULE_SECTIONS];

  /* Bytes allocated for the optional arrays above (they keep them across
   * resets, as the others keep their capacity). */
  size_t have_norm_n, have_norm, have_errors, have_serve, have_pending, have_tail, have_smodel,
      have_mem_filled, have_mem_next, have_mem;

  ls_snapshot_file_t file; /* what it was loaded from */
};

/* Makes room for `series` series, `key_bytes` key bytes and `parts`
 * partitions (growing by doubling at least). */
ls_err_t snap_reserve(ls_snapshot_t *snap, size_t series, size_t key_bytes, size_t parts);

/* Makes room for `series` series in flight, `key_bytes` of their keys and
 * `rows` rows (snapshot_inflight.c). */
ls_err_t snap_reserve_inflight(ls_snapshot_t *snap, size_t series, size_t key_bytes, size_t rows);

/* Frees the in-flight arrays (snapshot_inflight.c). */
void snap_free_inflight(ls_snapshot_t *snap);

/* Checks the in-flight series' keys, values and row counts against R and
 * sets their key offsets and first rows; LS_ERR_CORRUPT naming `name`
 * (snapshot_inflight.c). */
ls_err_t snap_index_inflight(ls_snapshot_t *snap, const char *name);

/* Allocates the model buffers (once) and checks n against the shape. */
ls_err_t snap_model_buffers(ls_snapshot_t *snap, size_t n);

/* ------------------------------------------------------------------------ */
/* Shuffling (the checksums are base_crc32c)                                */

/* dst = the 4 byte planes of n floats' bytes (src, n * 4 bytes), and back. */
void snap_shuffle4(uint8_t *dst, const uint8_t *src, size_t n);
void snap_unshuffle4(uint8_t *dst, const uint8_t *src, size_t n);

/* ------------------------------------------------------------------------ */
/* A shard's sections in memory (snapshot_format.c)                          */

/* One array of a section's raw bytes; `floats`: an f32 array, shuffled in
 * a shuffled section. */
typedef struct snap_span_s {
  void *ptr;
  size_t bytes;
  int floats;
} snap_span_t;

/* A section as the arrays of a snapshot it is made of, in order. */
typedef struct snap_section_spans_s {
  uint32_t id;
  int n;
  snap_span_t span[4];
} snap_section_spans_t;

/* The table entry's flags of section id of s beyond the shuffle bit: a
 * module section's SNAP_FLAG_REQUIRED and version << 16; 0 for the
 * container's. */
uint32_t snap_entry_flags(const ls_snapshot_t *s, uint32_t id);

/* The arrays of section id of snapshot s (any id but meta and shards; a
 * module section's content as one span), at its current counts. */
snap_section_spans_t snap_section_of(const ls_snapshot_t *s, uint32_t id);

/* The bytes of a section's arrays; whether any of them is floats. */
uint64_t snap_section_bytes(const snap_section_spans_t *sec);
int snap_section_has_floats(const snap_section_spans_t *sec);

/* The sections a shard of content s holds after meta, in file order (by
 * s's has_model, has_calib, stats_F and mem_cap; then its module sections),
 * into ids; their number. With own_only, the container's sections only. */
int snap_shard_ids(const ls_snapshot_t *s, int own_only, uint32_t ids[SNAP_SHARD_SECTIONS]);

/* ------------------------------------------------------------------------ */
/* Encoding (snapshot_encode.c)                                              */

/* A compression context and its buffers, reused from file to file. */
typedef struct snap_encoder_s snap_encoder_t;

ls_err_t snap_encoder_new(const ls_snapshot_conf_t *conf, snap_encoder_t **out);
void snap_encoder_destroy(snap_encoder_t *enc);

/* Writes snap as a shard file at path (created or truncated, fsynced). */
ls_err_t snap_write_shard_file(snap_encoder_t *enc, const ls_snapshot_t *snap, const char *path);

/* Writes a manifest for `world` shards at path (fsynced). */
ls_err_t snap_write_manifest_file(snap_encoder_t *enc, const char *path, int64_t step,
                                  int32_t world, const ls_snapshot_shard_t *shards);

/* ls_snapshot_write_shard and ls_snapshot_commit with a given encoder (the
 * background writer keeps one). */
ls_err_t snap_write_shard(snap_encoder_t *enc, const ls_snapshot_t *snap, const char *dir);
ls_err_t snap_commit(snap_encoder_t *enc, const char *dir, int64_t step, int world, int keep);

/* ------------------------------------------------------------------------ */
/* Decoding (snapshot_decode.c)                                              */

/* Limits for decoding untrusted bytes. The library always verifies every
 * checksum and allocates what a verified file asks for; the fuzzer turns
 * checksums off to reach the decoders behind them, and caps allocations. */
typedef struct snap_limits_s {
  int skip_checksums;
  uint64_t max_alloc; /* bytes a decoded file may allocate; 0 = no limit */
} snap_limits_t;

/* A file's bytes, parsed and checked up to its sections' content. */
typedef struct snap_file_s {
  const char *name; /* for messages */
  const uint8_t *data;
  size_t size;
  uint32_t kind, flags;
  int64_t step;
  int32_t world, rank;
  ls_snapshot_file_t desc; /* sections[i].crc holds the raw_crc to verify */
  uint32_t ids[LS_SNAPSHOT_SECTIONS_MAX];
  uint32_t entry_flags[LS_SNAPSHOT_SECTIONS_MAX]; /* each table entry's flags */
} snap_file_t;

/* Checks a file's container (magic, version, kind, tail, table, every
 * stored checksum, the file checksum) and fills *out. Errors are
 * LS_ERR_CORRUPT with "NAME: what is wrong". */
ls_err_t snap_file_parse(const uint8_t *data, size_t size, const char *name, uint32_t kind,
                         const snap_limits_t *lim, snap_file_t *out);

/* What of a shard to decode (the module sections always are: SECTIONS
 * asks for them alone). */
enum {
  SNAP_DECODE_MODEL = 1,
  SNAP_DECODE_SERIES = 2,
  SNAP_DECODE_ALL = 3,
  SNAP_DECODE_SECTIONS = 4
};

/* Decodes a parsed shard into a new snapshot: its meta, and the model
 * and/or series and partitions as `what` asks. */
ls_err_t snap_decode_shard(const snap_file_t *f, int what, const snap_limits_t *lim,
                           ls_snapshot_t **out);

/* A shard's meta section. */
typedef struct snap_meta_s {
  ls_shape_t shape;
  uint32_t has_model;
  uint64_t n;
  int64_t adam_steps;
  uint64_t seed, fingerprint, series, parts, key_bytes;
  uint32_t stats_F, stats_O, has_calib, has_serve;
  uint64_t mem_cap, mem_entry;
  uint32_t in_F;
  uint64_t in_series, in_key_bytes, in_rows;
  int64_t updates;
  uint32_t predict_Q, predict_W;
  uint32_t model_X;
} snap_meta_t;

/* The meta section of a snapshot's content, and back. */
void snap_meta_pack(const ls_snapshot_t *s, uint8_t m[SNAP_META_BYTES]);
snap_meta_t snap_meta_unpack(const uint8_t m[SNAP_META_BYTES]);

/* Decodes and checks the meta section only. */
ls_err_t snap_decode_shard_meta(const snap_file_t *f, snap_meta_t *meta);

/* Decodes a parsed manifest's shard list: shards [f->world], malloc'ed. */
ls_err_t snap_decode_manifest(const snap_file_t *f, const snap_limits_t *lim,
                              ls_snapshot_shard_t **shards);

/* Reads a whole file into memory (malloc'ed). */
ls_err_t snap_read_file(const char *path, uint8_t **data, size_t *size);

/* ------------------------------------------------------------------------ */
/* Directories (snapshot_io.c)                                               */

/* Creates dir and its parents as needed. */
ls_err_t snap_make_dirs(const char *dir);

#endif /* LSTREAM_STATE_SNAPSHOT_FORMAT_H */
