/*
 * Snapshot files: the on-disk format, and the internals shared by the
 * snapshot modules (snapshot.c: the in-memory content; snapshot_format.c:
 * what writing and reading one file share; snapshot_encode.c: writing one;
 * snapshot_decode.c: reading and verifying one; snapshot_io.c: directories,
 * commit, load; snapshot_inflight.c and snapshot_segment.c: the records in
 * flight, in the shard and by reference; snapshot_lock.c: one trainer per
 * directory; snapshotter.c: the background writer; safetensors.c: export).
 * Not a public header.
 *
 * Format, version 7; versions 6 (no series' model state by reference:
 * bytes 176..179 of the meta section and 4..7 of a segment's reserved, no
 * section 24 or 23), 5 (no records in flight by reference: no
 * inflight_windows or segments section, and no segment files) and 4 (the
 * layout of 5 without module sections: every section of a version-4 file
 * is the container's own) are read too;
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
 *     8  version    u32 7 (6 before the series' model state by reference, 5
 *                   before segments, 4 before module sections)
 *     12 kind       u32 1 = shard, 2 = manifest, 3 = segment
 *     16 flags      u32 bit 0: some section is byte-shuffled
 *     20 reserved   u32 0
 *     24 step       i64
 *     32 world      i32
 *     36 rank       i32 (0 in the manifest)
 *   frame   one zstd frame per section, in table order, back to back from
 *           byte 40; each with zstd's content size (and, written before
 *           2026-11-28, zstd's content checksum: an xxh64 pass over the raw
 *           bytes that the table's raw crc32c already makes; both read)
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
 * end marker or a wrong size: truncated), the table's checksum and bounds
 * (no more raw bytes than a frame's stored ones can hold), each frame's
 * stored checksum (naming the section at fault), the whole-file checksum,
 * each frame's content size against its table entry, and then, decoding,
 * each section's raw checksum and the content's consistency.
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
 *                 (at 164) segments G u32, (at 168) windows by reference W
 *                 u64 (0, 0: no inflight_windows or segments section);
 *                 (at 176) series model by reference u32 (1: section 24
 *                 instead of 17, and segments, G >= 1, whatever W;
 *                 version 7); 12 reserved bytes
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
 *  24 series_model_refs  (instead of 17, meta at 176) per series its
 *                 model state's place, i64 [S, 2]: a segment (its index in
 *                 segments) and the row of that segment's segment_model:
 *                 a background writer writes a series' model state once,
 *                 into the segment of the first shard after it changed
 *                 (snapshot_model.c)
 *   7 partitions  partition i32 [P], offset i64 [P] (its next unread record)
 *  11 memory      filled i64 [P], next i64 [P], entries f32 [P, M, E]
 *  12 inflight    key_len u8 [Q], then the keys, each followed by a NUL,
 *                 then per series partition, window index, last event
 *                 time, reset, rows: i64 [Q, 5] (the rows sum to R)
 *  13 inflight_rows  offset i64 [R], event time i64 [R], values f32 [R, FI]
 *                 (the series' rows one after the other)
 *  18 inflight_windows  per series its windows by reference i64 [Q] (they
 *                 sum to W), then per window the segment (its index in
 *                 segments) and the window's seq: i64 [W, 2]. A series'
 *                 records in flight are the rows of its windows, in order,
 *                 then its own rows in inflight_rows (0 of them when it
 *                 has windows), a row two of them share kept once
 *  19 segments    the segment files it references, each in the shard's
 *                 snapshot directory as seg-r<rank>-<writer, 16 hex
 *                 digits>-<number, 12 digits>: writer u64, number u64,
 *                 windows u64, size u64, file crc u32 (the file's last 4
 *                 bytes), reserved u32 (40 bytes each) [G]
 *  64..1023 module sections (format 5), after the container's, in the
 *                 order put: opaque to state/, encoded by their modules
 *                 (state.h, LS_SNAPSHOT_SECTION_*); a reader keeps those it
 *                 does not know and the module asking for them decides;
 *                 but for
 *  69 evicted     (optional, version 1; state/'s own, put with the first
 *                 series in flight evicted, absent when none is, and in
 *                 every snapshot before issue 25: none evicted) the series
 *                 in flight evicted (ls_inflight_t.evicted): their indexes
 *                 in the inflight section, ascending, u64 [n]. A reader of
 *                 before skips it (a resume then joins a returning key to
 *                 its evicted incarnation, as it did)
 * Manifest sections:
 *   8 shards      per rank: size u64, crc u32, reserved u32, series u64,
 *                 partitions u64 (32 bytes each)
 * Segment sections (a segment file: windows in flight, written once by the
 * snapshot writer that first kept them, named in its header's step, world
 * and rank; the windows new since its last segment, in the order kept; and
 * the series' model state that changed since its last shard):
 *  20 segment     F u32, model X u32 (0: no section 23; version 7),
 *                 windows N u64, rows R u64, writer u64, number u64 (40
 *                 bytes); F 0 when N and R are
 *  21 segment_windows  per window partition, seq, rows: i64 [N, 3] (the
 *                 rows sum to R; (partition, seq) once each)
 *  22 segment_rows  offset i64 [R], event time i64 [R], values f32 [R, F]
 *                 (the windows' rows one after the other)
 *  23 segment_model  rows of series' model state f64 [M, X] (X > 0)
 * Byte shuffling (flag bit 0 of a section) splits each 64 KiB block of a
 * float array (the last block shorter) into 4 planes: byte 0 of every
 * float, then byte 1, ...; raw_crc is over the unshuffled bytes.
 */
#ifndef LSTREAM_STATE_SNAPSHOT_FORMAT_H
#define LSTREAM_STATE_SNAPSHOT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/crc32c.h" /* base_crc32c: the checksum of sections and files */
#include "base/rows.h"   /* base_rows_t: a series in flight put together */
#include "lstream/state.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "snapshot files are written in the host's byte order, which must be little-endian"
#endif

enum {
  SNAP_VERSION = 7,
  SNAP_VERSION_OLDEST = 4, /* the oldest version read */
  SNAP_KIND_SHARD = 1,
  SNAP_KIND_MANIFEST = 2,
  SNAP_KIND_SEGMENT = 3,
  SNAP_HEADER_BYTES = 40,
  SNAP_ENTRY_BYTES = 40,
  SNAP_TAIL_BYTES = 32,
  SNAP_META_BYTES = 192,
  SNAP_OWN_SECTIONS = 17, /* the most container sections after meta */
  SNAP_SHARD_SECTIONS = SNAP_OWN_SECTIONS + LS_SNAPSHOT_MODULE_SECTIONS, /* and modules' */
  SNAP_IN_META = 5,         /* int64 per series in flight */
  SNAP_EVICTED_VERSION = 1, /* section LS_SNAPSHOT_SECTION_EVICTED's layout */
  SNAP_SHARD_ENTRY_BYTES = 32,
  SNAP_SEG_ENTRY_BYTES = 40,      /* a segments entry */
  SNAP_SEG_META_BYTES = 40,       /* a segment's section 20 */
  SNAP_REF = 2,                   /* int64 per window by reference */
  SNAP_SEG_WIN = 3,               /* int64 per window of a segment */
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
  SNAP_SERIES_MODEL,
  SNAP_INFLIGHT_WINDOWS,
  SNAP_SEGMENTS,
  SNAP_SEGMENT,
  SNAP_SEGMENT_WINDOWS,
  SNAP_SEGMENT_ROWS,
  SNAP_SEGMENT_MODEL,
  SNAP_SERIES_MODEL_REFS
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

/* The module section id of s, made (empty, of version 0 and no flags) when s
 * has none; NULL when s holds LS_SNAPSHOT_MODULE_SECTIONS already. */
struct snap_module_s *snap_module_slot(ls_snapshot_t *s, uint32_t id);

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

/* A segment's windows (format: segment sections 20..22): those a
 * staging snapshot writes (a new segment), or those a loaded one reads. */
typedef struct snap_segment_s {
  int F;                   /* floats of a row */
  uint64_t writer, number; /* its name's */
  size_t n, cap;           /* windows */
  int64_t *win;            /* [n, SNAP_SEG_WIN]: partition, seq, rows */
  size_t *row_at;          /* [n] each window's first row (read ones) */
  size_t *order;           /* [n] the windows by (partition, seq) (read ones) */
  size_t rows, cap_rows;
  int64_t *offsets, *times; /* [rows] */
  float *x;                 /* [rows, F] */
  size_t X, m, cap_m;       /* series' model state: doubles a row (0: none), rows, room */
  double *model;            /* [m, X] (cap_m doubles) */
} snap_segment_t;

/* What a snapshot writer's segments hold (snapshot_segment.c): the
 * segments alive (DIR/segments/seg-r<rank>-<writer>-<number>, the writer's
 * own link to each, kept while its latest snapshot references it) and, per
 * partition, which of them holds a window of a given seq. */
typedef struct snap_book_part_s {
  int32_t partition;
  int64_t written; /* its highest seq in a segment; -1 none */
  size_t n, cap;
  int64_t *hi;      /* [n] ascending: segment number[k] holds those of its windows of seq in
                       (hi[k-1], hi[k]] that were in flight when it was written */
  uint64_t *number; /* [n] */
} snap_book_part_t;

/* Where a writer's last shard has each series' model state (snapshot_model.c):
 * series i's in row row[i] of segment number[i], copied from the series
 * table (of id `table`) when its clock read clock[i]; rows: the rows
 * written into segments after the last shard that wrote every series'. */
typedef struct snap_places_s {
  uint64_t table;
  size_t X, n, cap;
  uint64_t *number, *row, *clock; /* [n] */
  uint64_t rows;
} snap_places_t;

typedef struct snap_book_s {
  uint64_t writer;    /* random: names its segments apart from any other run's */
  uint64_t next;      /* the number of its next segment */
  int64_t generation; /* changes whenever the book does */
  int writing;        /* 1 while its writer's thread writes a shard (atomic: read by the
                         trainer's thread, which refuses to fill a staging snapshot then) */
  int swept;          /* segments left by earlier runs deleted (at its first shard) */
  snap_book_part_t *parts;
  size_t n_parts, cap_parts;
  uint8_t *segs; /* [n_segs, SNAP_SEG_ENTRY_BYTES]: the segments alive, by number */
  size_t n_segs, cap_segs;
  snap_places_t places, written; /* its last shard's series' model state; scratch */
} snap_book_t;

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
  /* By reference (a writer's staging snapshot, or a shard read before its
   * segments are; snapshot_model.c): series i's model state is row
   * mrefs[i][1] of segment mrefs[i][0] (its index in segs), smodel unused;
   * the rows of the series that changed since the writer's last shard go
   * into its new segment (newseg), the others' stay where they are. */
  int model_refs;
  int64_t *mrefs;                   /* [S, 2] */
  size_t cap_mrefs;                 /* series */
  size_t reused;                    /* series whose rows stay where they are */
  int model_full;                   /* every series' row written (the places reset) */
  uint64_t fill_clock, model_table; /* the table's clock when filled, and its id */

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
  /* ... and by reference (format 6; snapshot_segment.c): series i's rows
   * are those of its in_wins[i] windows, in segment files, then its own
   * (its in_meta rows may then be 0). A loaded snapshot holds none: its
   * series are put back together from the segments. */
  int64_t *in_wins;                  /* [Q] (room as in_meta) */
  int64_t *in_refs;                  /* [W, SNAP_REF]: segment (index in segs), seq */
  size_t in_windows, cap_in_windows; /* W */
  uint8_t *segs;                     /* [G, SNAP_SEG_ENTRY_BYTES]: the segments referenced */
  size_t n_segs, cap_segs;
  int new_seg;           /* the entry of the segment written with it (newseg), -1 none */
  snap_segment_t newseg; /* its windows new since the writer's last segment */
  snap_book_t *book;     /* its writer's (a staging snapshot's), else NULL; not owned */
  int64_t book_gen;      /* the book's generation its references were made in; -1 */
  size_t book_hint;      /* the book's partition last looked up */
  int64_t seg_hint;      /* the segments entry last looked up (of seg_hint_number), -1 */
  uint64_t seg_hint_number;
  base_rows_t gather; /* a series put together (scratch) */

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

/* *p (a pointer to an array) holds `count` elements of `size` bytes, its
 * content kept; count may be 0 (snapshot_inflight.c). */
ls_err_t snap_grow(void *p, size_t count, size_t size, const char *what);

/* The next capacity for `need` elements: at least double `cap`. */
size_t snap_next_cap(size_t cap, size_t need);

/* Makes room for `series` series, `key_bytes` key bytes and `parts`
 * partitions (growing by doubling at least); but for a writer's staging
 * snapshot, the series' model state by value (snap_reserve_smodel). */
ls_err_t snap_reserve(ls_snapshot_t *snap, size_t series, size_t key_bytes, size_t parts);
ls_err_t snap_reserve_smodel(ls_snapshot_t *snap);

/* Series [first, first + n) of snap (appended, their stats not yet
 * filled) take the host-side state of tab's slots [0, n): on the calling
 * thread and, for a table of more than a few MB, a second thread, each
 * taking the next chunk of series (snapshot_stats.c; the caller's step
 * waits for the copy). */
ls_err_t snap_fill_stats(ls_snapshot_t *snap, ls_series_table_t *tab, size_t first, size_t n);

/* Makes room for `series` series in flight, `key_bytes` of their keys and
 * `rows` rows (snapshot_inflight.c). */
ls_err_t snap_reserve_inflight(ls_snapshot_t *snap, size_t series, size_t key_bytes, size_t rows);

/* Appends series `in` in flight, of `windows` windows by reference (their
 * references the caller's to append: snapshot_segment.c) before its rows
 * (then maybe none) (snapshot_inflight.c). */
ls_err_t snap_add_series_inflight(ls_snapshot_t *snap, const ls_inflight_t *in, size_t windows);

/* Frees the in-flight arrays (snapshot_inflight.c). */
void snap_free_inflight(ls_snapshot_t *snap);

/* Checks the in-flight series' keys, values, row counts and windows by
 * reference against R, W and G and sets their key offsets and first rows;
 * LS_ERR_CORRUPT naming `name` (snapshot_inflight.c). */
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
 * background writer keeps one); a shard holding windows by reference
 * writes its new segment and links its segments first (its writer's book
 * changes). */
ls_err_t snap_write_shard(snap_encoder_t *enc, ls_snapshot_t *snap, const char *dir);
ls_err_t snap_commit(snap_encoder_t *enc, const char *dir, int64_t step, int world, int keep);

/* ------------------------------------------------------------------------ */
/* Decoding (snapshot_decode.c)                                              */

/* Limits for decoding untrusted bytes. The library always verifies every
 * checksum and allocates what a verified file asks for; the fuzzer turns
 * checksums off to reach the decoders behind them, and caps allocations. */
typedef struct snap_limits_s {
  int skip_checksums;
  uint64_t max_alloc; /* bytes a decoded file may allocate; 0 = no limit */
  /* The container and the meta section alone: their checksums verified,
   * not the other sections' nor the whole file's (a file read with
   * snap_read_file_meta, whose other bytes were never read). */
  int meta_only;
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
  uint32_t segs;       /* G */
  uint64_t in_windows; /* W */
  uint32_t model_refs; /* section 24 instead of 17 */
} snap_meta_t;

/* The meta section of a snapshot's content, and back. */
void snap_meta_pack(const ls_snapshot_t *s, uint8_t m[SNAP_META_BYTES]);
snap_meta_t snap_meta_unpack(const uint8_t m[SNAP_META_BYTES]);

/* Decodes and checks the meta section only. */
ls_err_t snap_decode_shard_meta(const snap_file_t *f, snap_meta_t *meta);

/* Decodes a parsed manifest's shard list: shards [f->world], malloc'ed. */
ls_err_t snap_decode_manifest(const snap_file_t *f, const snap_limits_t *lim,
                              ls_snapshot_shard_t **shards);

/* Reads a whole file into memory (malloc'ed; snapshot_read.c). */
ls_err_t snap_read_file(const char *path, uint8_t **data, size_t *size);

/* `to` becomes another name of the file at `from` (its copy, fsynced,
 * where the file system has no hard links) (snapshot_read.c). */
ls_err_t snap_link_file(const char *from, const char *to);

/* Reads of a file only its header, section table, tail and meta section
 * into *data, a buffer of the file's *size bytes whose other pages are
 * never touched (snap_unmap_file frees it): for snap_file_parse with
 * meta_only, the commit's check of shards that their writers checksummed
 * as they wrote them (a whole read was a third of a snapshot's cost). */
ls_err_t snap_read_file_meta(const char *path, uint8_t **data, size_t *size);
void snap_unmap_file(uint8_t *data, size_t size);

/* ------------------------------------------------------------------------ */
/* Records in flight by reference (snapshot_segment.c)                      */

/* Room for `windows` windows by reference (snapshot_inflight.c). */
ls_err_t snap_reserve_refs(ls_snapshot_t *snap, size_t windows);

/* Frees the arrays of the records in flight by reference (not the book)
 * (snapshot_inflight.c). */
void snap_free_refs(ls_snapshot_t *snap);

/* A book for a new writer (a random writer id), and freeing one. */
ls_err_t snap_book_init(snap_book_t *book);
void snap_book_free(snap_book_t *book);

/* Frees a segment's arrays; it is then empty (F kept) (snapshot_inflight.c). */
void snap_segment_free(snap_segment_t *seg);

/* The name of segment `number` of writer `writer` and rank `rank`. */
void snap_segment_name(char name[64], int rank, uint64_t writer, uint64_t number);

/* Writes snap's new segment (if it has one) as its writer's
 * DIR/segments/seg-..., fsynced, enters it in the book, and links every
 * segment snap references into `tmp` (its snapshot's temporary directory,
 * which exists). */
ls_err_t snap_segments_put(snap_encoder_t *enc, ls_snapshot_t *snap, const char *dir,
                           const char *tmp);

/* After snap's shard is written: the writer's segments snap does not
 * reference are deleted from DIR/segments and the book (no later
 * snapshot of the writer will reference them; earlier snapshots keep
 * their own links); at the first, so are the segments earlier runs left
 * there. */
ls_err_t snap_segments_sweep(snap_book_t *book, const ls_snapshot_t *snap, const char *dir);

/* A loaded shard's series in flight by reference put back together from
 * the segment files in its snapshot directory `dir` (written by `rank`). */
ls_err_t snap_segments_resolve(ls_snapshot_t *snap, const char *dir, int rank);

/* Checks that the segment files a parsed shard references are in `dir`,
 * intact, and the ones it was written with. */
ls_err_t snap_segments_check(const snap_file_t *f, const char *dir);

/* Creates dir and its parents as needed (snapshot_encode.c). */
ls_err_t snap_make_dirs(const char *dir);

/* fsyncs a directory (its entries made durable) (snapshot_encode.c). */
ls_err_t snap_fsync_dir(const char *dir);

/* Writes a segment file at path (fsynced): its size and whole-file
 * checksum into *size and *crc (snapshot_encode.c). */
ls_err_t snap_write_segment_file(snap_encoder_t *enc, const snap_segment_t *seg, int64_t step,
                                 int32_t world, int32_t rank, const char *path, uint64_t *size,
                                 uint32_t *crc);

/* Decodes sections at [n] of a parsed file into secs [n] (each one's spans
 * adding up to its raw size), unshuffling, checking their raw checksums
 * (snapshot_decode.c). */
ls_err_t snap_decode_sections(const snap_file_t *f, const int *at, const snap_section_spans_t *secs,
                              int n);

/* Decodes a parsed segment file into *seg (empty; its arrays allocated)
 * and checks and indexes its windows (snapshot_segment.c). */
ls_err_t snap_decode_segment(const snap_file_t *f, snap_segment_t *seg);

/* The segments section of a parsed shard: *segs [*n, SNAP_SEG_ENTRY_BYTES]
 * (malloc'ed; NULL and 0 when it has none) (snapshot_decode.c). */
ls_err_t snap_decode_segment_list(const snap_file_t *f, uint8_t **segs, size_t *n);

/* The window of (partition, seq) in a read segment: its index, or -1. */
int64_t snap_segment_find(const snap_segment_t *seg, int64_t partition, int64_t seq);

#endif /* LSTREAM_STATE_SNAPSHOT_FORMAT_H */
