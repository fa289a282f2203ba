/*
 * lstream state: the series table. Every series (a Kafka message key) gets a
 * slot for the life of the table; its hidden state (h, c) lives in the
 * engine's memory at that slot (ls_state_table_t, kernels.h), and the table
 * counts what of it has been trained: windows, target records, and the
 * offset of the last record trained. Beside (h, c) a series may keep its
 * normaliser (below) and the sums of its forecasts' errors. Snapshots
 * (below) save and restore a run: the model, each rank's series and its
 * partitions' offsets.
 */
#ifndef LSTREAM_STATE_H
#define LSTREAM_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"
#include "lstream/inflight.h" /* ls_inflight_t */
#include "lstream/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ls_series_table_s ls_series_table_t;

/* What the table knows of one series. */
typedef struct ls_series_info_s {
  const char *key; /* key_len bytes, NUL-terminated; owned by the table */
  size_t key_len;
  int32_t partition;   /* the partition it was first seen on */
  int64_t slot;        /* its row in the state table */
  int64_t windows;     /* windows trained */
  int64_t records;     /* target records trained (each record but a series' first) */
  int64_t last_offset; /* offset of the last record trained; -1 before any */
  int64_t last_time;   /* event time of its last active window (ls_series_table_active), -1 */
  int64_t active;      /* when it was last active, in the table's count of activations: the
                          order of eviction (0: never) */
} ls_series_info_t;

/* ------------------------------------------------------------------------ */
/* The per-series normaliser (state/norm.c)                                  */
/*
 * Per series and feature, from the series' own past only (README,
 * Architecture: "Normalisation"): a location m and a variance v of its
 * levels and a mean square q of its changes, exponentially weighted over
 * about `window` records after a warm-up (record t, from 0, weighs
 * max(1/(t+1), 1/window): a running mean first), and the last value. A
 * record is consumed once, when it is first used as an input; what it
 * gives uses the stats after it:
 *   s  = max(sqrt(v), floor)   ds = max(sqrt(q), floor) (s at the first record)
 *   floor = floor_rel * |m| + floor_abs
 *   level  = clamp((x - m) / s)    change = clamp((x - prev) / ds) (0 at first)
 * clamp to +-clip. Values around 1e4 or 1e8, constant series and series of
 * one record give finite numbers, never NaN.
 */

typedef struct ls_norm_conf_s {
  int window;       /* records the weights reach back, >= 1            (256) */
  double floor_rel; /* scale floor relative to |location|, [0, 1)       (1e-6) */
  double floor_abs; /* and absolute, > 0                                (1e-12) */
  double clip;      /* normalised values are clamped to +-clip, > 0     (10) */
} ls_norm_conf_t;

/* Doubles of state per feature: m, v, q, prev (in this order). */
#define LS_NORM_STATS 4

/* Fills conf with the defaults above; checks a configuration. */
LS_API void ls_norm_conf_init(ls_norm_conf_t *conf);
LS_API ls_err_t ls_norm_conf_check(const ls_norm_conf_t *conf);

/* What consuming a record gives, per feature f < F; any array may be NULL. */
typedef struct ls_norm_row_s {
  float *level;   /* [F] clamp((x - m) / s) */
  float *change;  /* [F] clamp((x - prev) / ds), 0 for a series' first record */
  double *scale;  /* [F] s */
  double *dscale; /* [F] ds */
} ls_norm_row_t;

/* Consumes record x [F] into a series' state: *n records consumed so far
 * (x is record *n, from 0; *n is incremented) and stats [F, LS_NORM_STATS]
 * (all zero before the first record); writes what it gives into out (may be
 * NULL). */
LS_API ls_err_t ls_norm_consume(const ls_norm_conf_t *conf, int F, int64_t *n, double *stats,
                                const float *x, ls_norm_row_t *out);

/* v clamped to [-clip, clip] (a normalised target, say). */
LS_API double ls_norm_clamp(const ls_norm_conf_t *conf, double v);

/* ------------------------------------------------------------------------ */
/* The series table                                                          */

/* Creates a table whose states live in eng's memory, with room for
 * `initial` series before it first grows (growth keeps every state). */
LS_API ls_err_t ls_series_table_new(ls_engine_t *eng, size_t initial, ls_series_table_t **out);

/* Frees the table and its states; accepts NULL. */
LS_API void ls_series_table_destroy(ls_series_table_t *tab);

/* The slot of a series, adding it (with a zero state) when new.
 * key: 1..255 bytes. A series known on another partition moved (the topic
 * gained partitions): it is the same series, of `partition` from now on
 * (its state follows it into snapshots, re-sharding and eviction). */
LS_API ls_err_t ls_series_table_slot(ls_series_table_t *tab, const void *key, size_t key_len,
                                     int32_t partition, int64_t *slot);

/* Number of series. Slots are 0..count-1 in order of first appearance. */
LS_API size_t ls_series_table_count(const ls_series_table_t *tab);

/* Records that a window of `records` target records ending at last_offset
 * was trained for the series at slot. */
LS_API ls_err_t ls_series_table_trained(ls_series_table_t *tab, int64_t slot, int64_t records,
                                        int64_t last_offset);

/* Sets the counts and activity of the series at slot, as a snapshot
 * recorded them (info's key, partition and slot are not read); once every
 * series is restored, ls_series_table_restored orders them by activity. */
LS_API ls_err_t ls_series_table_restore(ls_series_table_t *tab, int64_t slot,
                                        const ls_series_info_t *info);
LS_API ls_err_t ls_series_table_restored(ls_series_table_t *tab);

/* The series at slot is active now (a window of it trained), its window's
 * last event time `time` (-1 unknown). */
LS_API ls_err_t ls_series_table_active(ls_series_table_t *tab, int64_t slot, int64_t time);

/* Forgets, partition by partition, the series idle for longer than idle_ms
 * (their last active event time that much before their partition's newest;
 * 0: none) and, beyond max series of a partition (0: no bound), its least
 * recently active ones: states, counts and host-side state. The last slot takes an evicted one's
 * place (slots move; a slot reused later starts from zero). *evicted (may be NULL) += their number.
 */
LS_API ls_err_t ls_series_table_evict(ls_series_table_t *tab, int64_t idle_ms, size_t max,
                                      int64_t *evicted);

/* Told of each slot ls_series_table_evict frees, before the next: `slot`
 * is forgotten and `moved` (-1 when slot was the last) takes its place, so
 * that a caller's per-slot state can follow. Its error stops the eviction. */
typedef ls_err_t (*ls_series_evict_fn)(void *opaque, int64_t slot, int64_t moved);
/* Sets (fn NULL: clears) the table's eviction listener. */
LS_API ls_err_t ls_series_table_on_evict(ls_series_table_t *tab, ls_series_evict_fn fn,
                                         void *opaque);

/* What the table knows of the series at slot. */
LS_API ls_err_t ls_series_table_info(const ls_series_table_t *tab, int64_t slot,
                                     ls_series_info_t *out);

/* A series' host-side state beside (h, c): its normaliser and the sums of
 * its forecasts' squared errors. Views into the table (or a snapshot),
 * valid until it next grows. */
typedef struct ls_series_stats_s {
  int64_t *norm_n; /* records its normaliser consumed */
  double *norm;    /* [F, LS_NORM_STATS] */
  double *errors;  /* [O, 2] per target: the model's forecasts' squared errors, then the last
                      value's, summed, in the data's units */
  int64_t *serve;  /* [LS_SERVE_FIELDS] its forecasts going out (below) */
  double *pending; /* [O] the values of the forecast awaiting its actual, data units */
  double *tail;    /* [F] the record after its last trained window's inputs (that window's
                      last target, LS_SERVE_TAIL_TIME its event time): a replay's last
                      forecast follows it */
  double *model;   /* [model_n] the trainer's own per-series state (train/season.c: its
                      seasons, recent values and linear path), opaque here; NULL when none */
  size_t model_n;  /* doubles in model; 0: none (ls_series_table_keep_model) */
} ls_series_stats_t;

/* A series' forecasts going out (train/predict.c), serve[]: the record
 * after which its last next-record forecast went out, that forecast while
 * it awaits the series' next record (its actual), and the time of tail.
 * Zero: none. */
enum {
  LS_SERVE_SERVED = 0,    /* 1 + the offset of the record its last forecast followed; 0 none */
  LS_SERVE_PENDING = 1,   /* 1 + that forecast's source offset while it awaits its actual; 0 none */
  LS_SERVE_TIME = 2,      /* its source record's event time (ms) */
  LS_SERVE_STEP = 3,      /* the model step that made it */
  LS_SERVE_TAIL_TIME = 4, /* the event time of the record in tail (ms), -1 unknown */
  LS_SERVE_FIELDS = 5
};

/* Copies one series' host-side state (every field) from src to dst, both
 * of F features and O targets and of the same model_n. */
LS_API ls_err_t ls_series_stats_copy(const ls_series_stats_t *dst, const ls_series_stats_t *src,
                                     int features, int targets);

/* Keeps, from now on, per series a normaliser of F features and the error
 * sums of O targets (zero for a new series). Call it on an empty table. */
LS_API ls_err_t ls_series_table_keep_stats(ls_series_table_t *tab, int features, int targets);

/* The F and O kept (0, 0 when none). */
LS_API void ls_series_table_stats_shape(const ls_series_table_t *tab, int *features, int *targets);

/* Keeps, from now on, beside the stats, per series `doubles` doubles of the
 * trainer's own state (ls_series_stats_t.model; zero for a new series):
 * they live, move, are evicted, digested, snapshotted and re-sharded with
 * their series. Call it on an empty table that keeps stats. */
LS_API ls_err_t ls_series_table_keep_model(ls_series_table_t *tab, size_t doubles);
LS_API size_t ls_series_table_model_width(const ls_series_table_t *tab); /* 0 when none */

/* The host-side state of the series at slot (a table that keeps it), to
 * read and change. Its model state (ls_series_stats_t.model) counts as
 * changed from this call on: a background snapshot writer rewrites it in
 * its next snapshot (ls_snapshotter_t writes only the series' model state
 * that changed since its last shard, and reuses the rest from it). */
LS_API ls_err_t ls_series_table_stats(ls_series_table_t *tab, int64_t slot, ls_series_stats_t *out);
/* The same views, for a caller that leaves the model state as it is (it
 * may change the other fields: they are written whole in every snapshot). */
LS_API ls_err_t ls_series_table_peek(ls_series_table_t *tab, int64_t slot, ls_series_stats_t *out);

/* The states of every slot, for ls_engine_gather_state / scatter_state. */
LS_API ls_state_table_t *ls_series_table_states(ls_series_table_t *tab);

/* A 64-bit FNV-1a digest of every series' key, partition, counts, state
 * bits and host-side state, in slot order: equal digests mean
 * bit-identical tables. */
LS_API ls_err_t ls_series_table_digest(ls_series_table_t *tab, uint64_t *digest);

/* The engine whose memory holds the table's states (NULL for NULL). */
LS_API ls_engine_t *ls_series_table_engine(const ls_series_table_t *tab);

/* ======================================================================== */
/* Snapshots                                                                 */
/*                                                                           */
/* A snapshot is a directory DIR/snap-<step, 12 digits> holding `manifest`   */
/* and one `shard-<rank>` file per rank; DIR/latest names the newest one.   */
/* Rank 0's shard holds the model, the optimizer state and the forecast    */
/* calibration; every shard holds its rank's series (key, partition, counts, */
/* h and c, normaliser and error sums) and its partitions' resume offsets   */
/* and replay memories, and its records in flight: those of the windows   */
/* queued in segment files `seg-r<rank>-<writer>-<n>`, each written once by */
/* the first snapshot to hold its windows and linked (a hard link) into    */
/* every later one that still holds one, the rest in the shard. Every file  */
/* is a versioned header, zstd-compressed sections each with its own       */
/* CRC32C, and a whole-file CRC32C                                          */
/* (the format is described in state/snapshot_format.h). A snapshot becomes */
/* visible only once complete: shards are written into DIR/.tmp-snap-<step>, */
/* rank 0 then commits (manifest, fsync, rename, latest, prune).            */
/*                                                                           */
/* Writing, one rank:  fill an ls_snapshot_t, ls_snapshot_write_shard, then  */
/*   ls_snapshot_commit (or let an ls_snapshotter_t do both off the step    */
/*   loop). Several ranks: each writes its shard; once every rank reports   */
/*   its shard written (the caller's collective), rank 0 commits.           */
/* Reading: ls_snapshot_find_latest, then ls_snapshot_load for a rank of a  */
/*   run of any world size, or ls_snapshot_manifest_read and               */
/*   ls_snapshot_load_shard for the files one by one.                       */
/* ======================================================================== */

/* The content of one rank's part of a snapshot: built by the trainer
 * (reset, set_info, set_model / set_engine, add_series / add_series_table,
 * add_partition), or loaded from a file. Arrays keep their capacity across
 * resets: once a snapshot has held the largest content it will hold, filling
 * it again allocates nothing. */
typedef struct ls_snapshot_s ls_snapshot_t;

/* Who wrote a snapshot, and where in the run. */
typedef struct ls_snapshot_info_s {
  int64_t step;         /* trainer steps completed, 0 .. 10^12 - 1 */
  uint64_t seed;        /* the run's seed */
  uint64_t fingerprint; /* the caller's 64-bit digest of its configuration */
  int32_t world;        /* ranks of the run that wrote it */
  int32_t rank;         /* the rank whose part this is, 0 .. world - 1 */
  int64_t updates;      /* the caller's count of optimizer updates asked for (taken or
                           skipped: the learning rate's warm-up counts them), >= 0 */
} ls_snapshot_info_t;

/* The model of a snapshot (rank 0's part only), read-only views. */
typedef struct ls_snapshot_model_s {
  size_t n;            /* floats in each buffer: ls_param_count of the shape */
  const float *params; /* [n] flat parameters, kernels.h layout */
  const float *adam_m; /* [n] Adam's first moment */
  const float *adam_v; /* [n] Adam's second moment */
  int64_t adam_steps;  /* optimizer updates so far */
} ls_snapshot_model_t;

/* Creates an empty snapshot for states of `shape` (its L and H size the
 * states), with room for `series` series and `partitions` partitions before
 * it first grows (0 is allowed for either). */
LS_API ls_err_t ls_snapshot_new(const ls_shape_t *shape, size_t series, size_t partitions,
                                ls_snapshot_t **out);

/* Frees a snapshot; accepts NULL. */
LS_API void ls_snapshot_destroy(ls_snapshot_t *snap);

/* Empties a snapshot (no series, no partitions, no model, info zero) and
 * keeps its memory for the next fill. */
LS_API void ls_snapshot_reset(ls_snapshot_t *snap);

/* Sets who wrote it and when (checked: step in range, 0 <= rank < world). */
LS_API ls_err_t ls_snapshot_set_info(ls_snapshot_t *snap, const ls_snapshot_info_t *info);

/* Copies the model: params, adam_m, adam_v [n] each (n == ls_param_count of
 * the snapshot's shape) and the optimizer's step count. Only rank 0's part
 * holds a model. */
LS_API ls_err_t ls_snapshot_set_model(ls_snapshot_t *snap, const float *params, const float *adam_m,
                                      const float *adam_v, size_t n, int64_t adam_steps);

/* Copies the model straight out of an engine of the same shape (parameters,
 * Adam moments and step count): what ls_snapshot_set_model does without a
 * host buffer in between. */
LS_API ls_err_t ls_snapshot_set_engine(ls_snapshot_t *snap, ls_engine_t *eng);

/* Appends one series, copying its key, counts (series->slot is ignored) and
 * its states h, c [L, H] each. */
LS_API ls_err_t ls_snapshot_add_series(ls_snapshot_t *snap, const ls_series_info_t *series,
                                       const float *h, const float *c);

/* Appends every series of a table in slot order, with its states read in
 * one copy (ls_state_table_read). The table's engine must have the
 * snapshot's L and H. */
LS_API ls_err_t ls_snapshot_add_series_table(ls_snapshot_t *snap, ls_series_table_t *tab);

/* Appends a partition and the offset its consumer resumes from (the next
 * record to read). Each partition at most once. */
LS_API ls_err_t ls_snapshot_add_partition(ls_snapshot_t *snap, int32_t partition, int64_t offset);

/* Series in flight (ls_inflight_t, lstream/inflight.h: what ingest hands
 * over): with them, a partition's resume offset may be past every one of
 * them. */

/* The features F of the rows in flight, on a snapshot without any (0: none
 * kept, the default and a reset's). */
LS_API ls_err_t ls_snapshot_set_inflight_features(ls_snapshot_t *snap, int features);
LS_API int ls_snapshot_inflight_features(const ls_snapshot_t *snap);
/* Appends a series in flight (copied). */
LS_API ls_err_t ls_snapshot_add_inflight(ls_snapshot_t *snap, const ls_inflight_t *s);
/* A series in flight in its parts (lstream/inflight.h), kept as
 * ls_snapshot_add_inflight keeps the series they make up; except in a
 * snapshot writer's staging snapshot (ls_snapshotter_staging), which keeps a
 * window by reference when an earlier snapshot of the writer wrote it: the
 * windows new since then go into a segment file written with this snapshot,
 * once, and every snapshot that holds a window links the segment file that
 * holds it (loading one puts its series back together). Fill a staging
 * snapshot while its writer is idle (ls_snapshotter_poll), as its
 * submit checks. */
LS_API ls_err_t ls_snapshot_add_inflight_parts(ls_snapshot_t *snap,
                                               const ls_inflight_parts_t *series);
LS_API size_t ls_snapshot_inflight_count(const ls_snapshot_t *snap);
/* Series i in flight, its pointers into the snapshot. */
LS_API ls_err_t ls_snapshot_get_inflight(const ls_snapshot_t *snap, size_t i, ls_inflight_t *out);

/* The host-side state of the series (ls_series_stats_t): set the layout, F
 * features and O targets, on a snapshot without series (0, 0: none; a reset
 * clears it; ls_snapshot_add_series_table adopts the table's); then series i's
 * views, to read or to fill (ls_snapshot_add_series gives zeros). */
LS_API ls_err_t ls_snapshot_set_stats_shape(ls_snapshot_t *snap, int features, int targets);
LS_API void ls_snapshot_stats_shape(const ls_snapshot_t *snap, int *features, int *targets);
LS_API ls_err_t ls_snapshot_series_stats(ls_snapshot_t *snap, size_t i, ls_series_stats_t *out);
/* The doubles of the trainer's per-series state (ls_series_stats_t.model),
 * on a snapshot with a stats layout and without series (0: none; a reset
 * and a new stats layout clear it; ls_snapshot_add_series_table adopts the
 * table's). */
LS_API ls_err_t ls_snapshot_set_model_width(ls_snapshot_t *snap, size_t doubles);
LS_API size_t ls_snapshot_model_width(const ls_snapshot_t *snap);

/* Each partition's replay memory: set the layout, `cap` entries of `entry`
 * floats per partition, on a snapshot without partitions (0, 0: none; a
 * reset clears it); then, for partition i, the entries held (filled <= cap),
 * the slot the next one goes to (next < cap) and the entries [cap, entry]. */
LS_API ls_err_t ls_snapshot_set_memory_shape(ls_snapshot_t *snap, size_t cap, size_t entry);
LS_API void ls_snapshot_memory_shape(const ls_snapshot_t *snap, size_t *cap, size_t *entry);
LS_API ls_err_t ls_snapshot_set_memory(ls_snapshot_t *snap, size_t i, int64_t filled, int64_t next,
                                       const float *entries);
LS_API ls_err_t ls_snapshot_get_memory(const ls_snapshot_t *snap, size_t i, int64_t *filled,
                                       int64_t *next, const float **entries);

/* Accessors; pointers stay valid until the snapshot is changed or freed. */
/* Sections of the modules above state/ (format 5 on). state/ keeps them,
 * and the container around them (ids, versions, checksums, compression,
 * commit), without reading them: each module encodes its own content, with
 * a version of its layout, and migrates the layouts it knew before. A
 * section is optional (a reader that does not know its id skips it: data a
 * later version adds that an earlier one can do without) or required (such a
 * reader refuses the snapshot, naming it: data without which resuming would
 * be wrong). Ids are allotted here, so that no two modules share one; the
 * layouts are described where they are written. */
enum {
  LS_SNAPSHOT_SECTION_FIRST = 64,
  LS_SNAPSHOT_SECTION_SETTINGS = 64,     /* train/snapshots.c: the run's configuration */
  LS_SNAPSHOT_SECTION_CALIBRATION = 65,  /* train/figures.c: the forecasts' calibration */
  LS_SNAPSHOT_SECTION_PREDICT = 66,      /* train/predict_out.c: the forecasts' bookkeeping */
  LS_SNAPSHOT_SECTION_RUN = 67,          /* train/snapshots.c: the run's id */
  LS_SNAPSHOT_SECTION_MARKS = 68,        /* train/marks.c: each partition's last record read */
  LS_SNAPSHOT_SECTION_EVICTED = 69,      /* state/snapshot_inflight.c: the series in flight evicted
                                            (ls_inflight_t.evicted; state's own: not put) */
  LS_SNAPSHOT_SECTION_SERIES_MODEL = 70, /* train/prep_state.c: the layout of the series' model
                                            state (the series_model section) */
  LS_SNAPSHOT_SECTION_LAST = 1023
};
#define LS_SNAPSHOT_MODULE_SECTIONS 16 /* the most module sections in one shard */
enum {
  LS_SNAPSHOT_REQUIRED = 1, /* a reader that does not know the id refuses the file */
  LS_SNAPSHOT_FLOATS = 2    /* the content is float32s: byte-shuffled with --snapshot-shuffle */
};

/* Puts (or replaces) a module section of `bytes` bytes, copied: id in
 * [LS_SNAPSHOT_SECTION_FIRST, LS_SNAPSHOT_SECTION_LAST], version < 65536,
 * flags of LS_SNAPSHOT_REQUIRED and LS_SNAPSHOT_FLOATS (bytes then a multiple
 * of 4). A shard holds it as given; with several ranks, each rank puts what
 * its shard needs (a resume with another world reads rank 0's). */
LS_API ls_err_t ls_snapshot_put_section(ls_snapshot_t *snap, uint32_t id, uint32_t version,
                                        unsigned flags, const void *data, size_t bytes);

/* A loaded snapshot's module section: its version and content (owned by
 * snap). LS_ERR_NOT_FOUND when the snapshot has none of that id (written
 * before the module kept it, or by a run without it). */
LS_API ls_err_t ls_snapshot_get_section(const ls_snapshot_t *snap, uint32_t id, uint32_t *version,
                                        const void **data, size_t *bytes);

/* Checks that every required module section of a loaded snapshot is one of
 * known [n] (the ids the caller reads): LS_ERR_UNSUPPORTED naming the first
 * that is not ("written by a later lstream"). */
LS_API ls_err_t ls_snapshot_check_sections(const ls_snapshot_t *snap, const uint32_t *known,
                                           size_t n);

LS_API ls_err_t ls_snapshot_get_shape(const ls_snapshot_t *snap, ls_shape_t *out);
LS_API ls_err_t ls_snapshot_get_info(const ls_snapshot_t *snap, ls_snapshot_info_t *out);
/* LS_ERR_STATE when the snapshot holds no model (a part of rank > 0). */
LS_API ls_err_t ls_snapshot_get_model(const ls_snapshot_t *snap, ls_snapshot_model_t *out);
LS_API size_t ls_snapshot_series_count(const ls_snapshot_t *snap);
/* Series i (0 <= i < count, in the order added): key (NUL-terminated),
 * partition and counts in *out (slot = i), states h, c [L, H] (either
 * pointer may be NULL). */
LS_API ls_err_t ls_snapshot_get_series(const ls_snapshot_t *snap, size_t i, ls_series_info_t *out,
                                       const float **h, const float **c);
/* Every series' states at once: h, c [S, L, H] (S = series count), for
 * ls_state_table_write. */
LS_API ls_err_t ls_snapshot_get_states(const ls_snapshot_t *snap, const float **h, const float **c);
LS_API size_t ls_snapshot_partition_count(const ls_snapshot_t *snap);
LS_API ls_err_t ls_snapshot_get_partition(const ls_snapshot_t *snap, size_t i, int32_t *partition,
                                          int64_t *offset);

/* ------------------------------------------------------------------------ */
/* Snapshot files                                                            */

/* The fastest zstd level a snapshot takes (zstd's negative "fast" levels
 * trade a little size for speed on the barely compressible floats of
 * states, weights and records in flight). */
#define LS_SNAPSHOT_LEVEL_MIN (-50)

/* How snapshot files are written. */
typedef struct ls_snapshot_conf_s {
  int level;    /* zstd compression level: LS_SNAPSHOT_LEVEL_MIN .. -1 (fast
                 * levels) or 1 .. ZSTD_maxCLevel() (22)                     (3) */
  int workers;  /* zstd worker threads; 0 = compress on the writing thread   (0) */
  int shuffle;  /* 1 = split float arrays into 4 byte planes before
                 * compression (blocks of 64 KiB): states and weights then
                 * compress better, see `lstream bench snapshot`           (1) */
  int keep;     /* snapshots kept by commits, >= 1                           (3) */
  int deferred; /* 1 = a one-rank snapshot too waits for ls_snapshotter_commit once
                 * written (its caller holds the commit until something of its own
                 * is durable); 0 = the writer commits it at once               (0) */
} ls_snapshot_conf_t;

/* Fills conf with the defaults above. */
LS_API void ls_snapshot_conf_init(ls_snapshot_conf_t *conf);

/* Checks a configuration (level, workers and keep in range). */
LS_API ls_err_t ls_snapshot_conf_check(const ls_snapshot_conf_t *conf);

/* Writes snap (whose info says its step, world and rank) as
 * DIR/.tmp-snap-<step>/shard-<rank>, fsynced, creating DIR and the
 * temporary directory as needed. Rank 0's part must hold the model, other
 * ranks' must not. Several ranks may write into the same DIR at once. A
 * staging snapshot holding windows by reference is its writer's to write
 * (LS_ERR_STATE). */
LS_API ls_err_t ls_snapshot_write_shard(const ls_snapshot_t *snap, const char *dir,
                                        const ls_snapshot_conf_t *conf);

/* Rank 0, once every rank's shard of `step` is written: verifies the
 * world shards in DIR/.tmp-snap-<step> (present and whole: their structure,
 * the checksums of their section tables and meta sections, step, world,
 * rank, shape and configuration; the other sections' checksums their
 * writers computed as they wrote them, and every load verifies them, so
 * the commit reads no more of a shard than that), writes the manifest, fsyncs, renames the
 * directory to DIR/snap-<step> (replacing a snapshot of the same step), fsyncs DIR, points
 * DIR/latest at it (temporary file + rename), and deletes all but the `keep` newest snapshots up to
 * this step (and older temporary directories left by failed attempts). Snapshots of later steps,
 * left by a run that was resumed from an earlier one, are not deleted but are no longer found. */
LS_API ls_err_t ls_snapshot_commit(const char *dir, int64_t step, int world, int keep);

/* What a file of a snapshot held, as verified when it was read. */
#define LS_SNAPSHOT_SECTIONS_MAX 34
typedef struct ls_snapshot_section_s {
  const char *name; /* "meta", "model", "optimizer", "keys", "counts", "states",
                     * "partitions", "norm", "calibration", "memory", "inflight",
                     * "inflight_rows", "inflight_windows", "segments",
                     * "activity", ... (shards), "shards" (the manifest), a
                     * module's ("settings", ...), or "?" for a module section
                     * this version does not know; static */
  uint32_t id;      /* the section id (LS_SNAPSHOT_SECTION_*, or the container's) */
  uint32_t version; /* a module section's layout version (0 for the container's) */
  int required;     /* a reader that does not know it must refuse the file */
  uint64_t offset;  /* where its zstd frame starts in the file */
  uint64_t stored;  /* bytes in the file */
  uint64_t raw;     /* bytes once decompressed */
  uint32_t crc;     /* CRC32C of the raw bytes */
  int shuffled;     /* float planes byte-shuffled before compression */
} ls_snapshot_section_t;

typedef struct ls_snapshot_file_s {
  uint32_t version; /* format version */
  uint64_t size;    /* bytes */
  uint32_t crc;     /* CRC32C of the file but its last 4 bytes */
  int n_sections;
  ls_snapshot_section_t sections[LS_SNAPSHOT_SECTIONS_MAX];
} ls_snapshot_file_t;

/* The file a loaded snapshot came from (all zero for one built in memory). */
LS_API ls_err_t ls_snapshot_get_file(const ls_snapshot_t *snap, ls_snapshot_file_t *out);

/* A snapshot's manifest: its step, world, and each shard's size, checksum
 * and counts. */
typedef struct ls_snapshot_manifest_s ls_snapshot_manifest_t;

typedef struct ls_snapshot_shard_s {
  uint64_t size;       /* bytes of shard-<rank> */
  uint32_t crc;        /* its whole-file CRC32C */
  uint64_t series;     /* series it holds */
  uint64_t partitions; /* partitions it holds */
} ls_snapshot_shard_t;

/* Reads and verifies PATH/manifest (PATH: a snap-<step> directory). */
LS_API ls_err_t ls_snapshot_manifest_read(const char *path, ls_snapshot_manifest_t **out);
LS_API void ls_snapshot_manifest_destroy(ls_snapshot_manifest_t *man); /* accepts NULL */
LS_API ls_err_t ls_snapshot_manifest_get(const ls_snapshot_manifest_t *man, int64_t *step,
                                         int32_t *world);
LS_API ls_err_t ls_snapshot_manifest_shard(const ls_snapshot_manifest_t *man, int rank,
                                           ls_snapshot_shard_t *out);
LS_API ls_err_t ls_snapshot_manifest_file(const ls_snapshot_manifest_t *man,
                                          ls_snapshot_file_t *out);

/* The path of the snapshot of `step` in a snapshot directory:
 * DIR/snap-<step, 12 digits> (the one place that spells it).
 * LS_ERR_INVALID_ARG when it does not fit in size bytes. */
LS_API ls_err_t ls_snapshot_path(const char *dir, int64_t step, char *buf, size_t size);

/* Loads shard `rank` of a snapshot, verifying everything: the size and
 * checksum the manifest lists, magic, version, structure, every section's
 * stored and raw checksums, the whole-file checksum, and that its step,
 * world and rank are the manifest's. */
LS_API ls_err_t ls_snapshot_load_shard(const ls_snapshot_manifest_t *man, int rank,
                                       ls_snapshot_t **out);

/* Loads the module sections of shard `rank` alone (and its info), verified
 * as by ls_snapshot_load_shard: what a module that keeps each shard's own
 * data in a section reads of every shard when a resume re-shards (which
 * keeps rank 0's sections). */
LS_API ls_err_t ls_snapshot_load_sections(const ls_snapshot_manifest_t *man, int rank,
                                          ls_snapshot_t **out);

/* Loads what rank `rank` of a `world`-rank run resumes from, out of the
 * snapshot at PATH (a snap-<step> directory) written by any number of ranks:
 * the model (from shard 0) and
 *   - the snapshot's world equals `world`: all of shard `rank`;
 *   - otherwise (re-sharding): from every shard, the series and the
 *     partition offsets of the partitions p with p % world == rank.
 * The result's info carries the snapshot's step, seed and fingerprint and
 * the given world and rank. Every file read is verified as by load_shard. */
LS_API ls_err_t ls_snapshot_load(const char *path, int world, int rank, ls_snapshot_t **out);

/* Called by ls_snapshot_find_latest for each snapshot it passes over:
 * path (the snapshot directory, or DIR/latest) and why. */
typedef void (*ls_snapshot_reject_cb)(void *opaque, const char *path, ls_err_t err,
                                      const char *why);

/* The newest good snapshot in DIR, into path (size bytes): the one DIR/latest
 * names, or, when that one is damaged (a file truncated, changed, missing,
 * of another version), the newest good one before it; without DIR/latest
 * the newest good snapshot of all. A snapshot is good when its manifest and
 * every shard pass the checks of their structure and checksums. Each
 * snapshot passed over is reported to cb (may be NULL). path is "" (and
 * LS_OK returned) when DIR holds no snapshot at all; LS_ERR_CORRUPT when it
 * holds some but none is good. */
LS_API ls_err_t ls_snapshot_find_latest(const char *dir, ls_snapshot_reject_cb cb, void *opaque,
                                        char *path, size_t size);

/* ------------------------------------------------------------------------ */
/* One writer per directory                                                  */

/* The lock of a snapshot directory: one trainer at a time writes into it. */
typedef struct ls_snapshot_lock_s ls_snapshot_lock_t;

/* Takes the exclusive lock of snapshot directory dir (created, with its
 * parents, when missing): the file DIR/lock, held with flock(2) for as long
 * as the lock lives and holding "pid=PID host=HOST" of its holder. Never
 * waits: LS_ERR_STATE when another process holds it, the message naming
 * the holder's pid and host. A holder that dies lets go at once (the kernel
 * drops its locks); the file stays and is reused. On NFS, Linux maps flock
 * to the server's byte-range locks, so hosts that share the directory see
 * each other's lock (NFSv4, or v3 with the lock manager running). */
LS_API ls_err_t ls_snapshot_lock(const char *dir, ls_snapshot_lock_t **out);

/* Lets go of the lock; accepts NULL. */
LS_API void ls_snapshot_unlock(ls_snapshot_lock_t *lock);

/* ------------------------------------------------------------------------ */
/* Export                                                                    */

/* The model of rank 0's part as a safetensors file (F32 tensors with
 * PyTorch's names for a module with .lstm = nn.LSTM(I, H, L) and
 * .head = nn.Linear(H, O): lstm.weight_ih_l0, ..., head.weight, head.bias),
 * loadable by load_state_dict(strict=True). */
LS_API ls_err_t ls_snapshot_export_model(const ls_snapshot_t *snap, const char *path);

/* The states of the parts parts[0 .. n-1] (in that order) as a safetensors
 * file: h, c [S, L, H] F32; where the series keep host-side state, also
 * norm_n [S] I64, norm [S, F, 4] F64 (m, v, q, prev per feature) and
 * errors [S, O, 2] F64 (model, last value per target); and in __metadata__
 * "keys" (a JSON array of strings, key byte b as code point b) and
 * "partitions" (a JSON array). */
LS_API ls_err_t ls_snapshot_export_states(const ls_snapshot_t *const *parts, int n,
                                          const char *path);

/* A tensor a module above adds to the states' export: F64 [rows, cols],
 * rows being every series in the export's order, or what the module says
 * (about: a line for the file's __metadata__, under the tensor's name). */
typedef struct ls_export_tensor_s {
  const char *name; /* at most 63 bytes, not one of the states' names */
  size_t rows, cols;
  const double *data; /* [rows, cols] */
  const char *about;  /* plain text, or NULL */
} ls_export_tensor_t;

/* ls_snapshot_export_states with the tensors extra [n_extra] (at most 8)
 * after the states' own. */
LS_API ls_err_t ls_snapshot_export_states_with(const ls_snapshot_t *const *parts, int n,
                                               const ls_export_tensor_t *extra, int n_extra,
                                               const char *path);

/* ------------------------------------------------------------------------ */
/* Background writer                                                         */

/* A thread that writes snapshots while the step loop goes on. It owns two
 * snapshots: the caller fills the staging one (ls_snapshotter_staging) and
 * submits it; the writer swaps it with the one it wrote last, so the step
 * loop never waits on compression or I/O and, once both have held the
 * largest content, never allocates. Calls come from one thread. */
typedef struct ls_snapshotter_s ls_snapshotter_t;

typedef struct ls_snapshotter_status_s {
  int busy;               /* a shard or commit is in progress */
  int64_t written_step;   /* step of the last shard written, -1 before any */
  int64_t committed_step; /* step of the last commit, -1 before any */
  int64_t failures;       /* writes and commits that failed */
  ls_err_t err;           /* the last finished job's result */
  char message[512];      /* its error message ("" when LS_OK) */
  double seconds;         /* how long it took */
} ls_snapshotter_status_t;

/* Creates a writer for snapshots of `shape` into DIR, configured by conf
 * (copied), and starts its thread. */
LS_API ls_err_t ls_snapshotter_new(const char *dir, const ls_shape_t *shape,
                                   const ls_snapshot_conf_t *conf, ls_snapshotter_t **out);

/* Waits for the job in progress, stops the thread, frees both snapshots;
 * accepts NULL. */
LS_API void ls_snapshotter_destroy(ls_snapshotter_t *w);

/* The snapshot to fill for the next submit (reset it first). It changes at
 * every accepted submit: ask again each time. */
LS_API ls_snapshot_t *ls_snapshotter_staging(ls_snapshotter_t *w);

/* Hands the staging snapshot to the thread, which writes its shard, and
 * commits it too when its info says world 1 (unless conf.deferred). *busy = 1 (and nothing
 * happens) while the previous job is still running: the caller skips this
 * snapshot (poll first to skip the filling too). */
LS_API ls_err_t ls_snapshotter_submit(ls_snapshotter_t *w, int *busy);

/* Rank 0 of several (or of one, deferred): has the thread commit `step` (every rank reported its
 * shard written). *busy = 1 (and nothing happens) while a job is running. */
LS_API ls_err_t ls_snapshotter_commit(ls_snapshotter_t *w, int64_t step, int world, int *busy);

/* The writer's state; never blocks. */
LS_API ls_err_t ls_snapshotter_poll(ls_snapshotter_t *w, ls_snapshotter_status_t *out);

/* Waits until no job is running; returns the last job's error (its
 * message in ls_last_error()). */
LS_API ls_err_t ls_snapshotter_flush(ls_snapshotter_t *w);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_STATE_H */
