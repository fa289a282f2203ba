/*
 * Snapshot files: what writing and reading share (the format is in
 * snapshot_format.h): section names, little-endian fields, byte
 * shuffling, a shard's sections as spans of a snapshot's memory, and its
 * meta section. The writer is snapshot_encode.c, the reader
 * snapshot_decode.c.
 */
#include <string.h>

#include "snapshot_format.h"

const char *snap_section_name(uint32_t id) {
  static const char *const names[] = {"?",
                                      "meta",
                                      "model",
                                      "optimizer",
                                      "keys",
                                      "counts",
                                      "states",
                                      "partitions",
                                      "shards",
                                      "norm",
                                      "calibration",
                                      "memory",
                                      "inflight",
                                      "inflight_rows",
                                      "activity",
                                      "serve",
                                      "predict",
                                      "series_model",
                                      "inflight_windows",
                                      "segments",
                                      "segment",
                                      "segment_windows",
                                      "segment_rows",
                                      "segment_model",
                                      "series_model_refs"};
  /* Module sections by the ids state.h allots (their content is theirs). */
  if (id == LS_SNAPSHOT_SECTION_SETTINGS) return "settings";
  if (id == LS_SNAPSHOT_SECTION_CALIBRATION) return "calibration";
  if (id == LS_SNAPSHOT_SECTION_PREDICT) return "predict";
  if (id == LS_SNAPSHOT_SECTION_RUN) return "run";
  if (id == LS_SNAPSHOT_SECTION_MARKS) return "marks";
  if (id == LS_SNAPSHOT_SECTION_EVICTED) return "evicted";
  if (id == LS_SNAPSHOT_SECTION_SERIES_MODEL) return "series_layout";
  return id <= SNAP_SERIES_MODEL_REFS ? names[id] : names[0];
}

int snap_is_module(uint32_t id) {
  return id >= LS_SNAPSHOT_SECTION_FIRST && id <= LS_SNAPSHOT_SECTION_LAST;
}

const struct snap_module_s *snap_module(const ls_snapshot_t *s, uint32_t id) {
  for (int i = 0; i < s->n_modules; i++)
    if (s->modules[i].id == id) return &s->modules[i];
  return NULL;
}

struct snap_module_s *snap_module_slot(ls_snapshot_t *s, uint32_t id) {
  struct snap_module_s *m = (struct snap_module_s *)snap_module(s, id);
  if (m != NULL || s->n_modules >= LS_SNAPSHOT_MODULE_SECTIONS) return m;
  m = &s->modules[s->n_modules++]; /* its buffer, if any, kept from before a reset */
  m->id = id, m->version = 0, m->flags = 0, m->bytes = 0;
  return m;
}

/* Little-endian fields (the host is little-endian: see the header). */
void snap_put_u32(uint8_t *p, uint32_t v) {
  memcpy(p, &v, sizeof v);
}
void snap_put_u64(uint8_t *p, uint64_t v) {
  memcpy(p, &v, sizeof v);
}
uint32_t snap_get_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
uint64_t snap_get_u64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* ------------------------------------------------------------------------ */
/* Byte shuffling                                                            */

void snap_shuffle4(uint8_t *dst, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (int b = 0; b < 4; b++)
      dst[(size_t)b * n + i] = src[4 * i + (size_t)b];
}

void snap_unshuffle4(uint8_t *dst, const uint8_t *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (int b = 0; b < 4; b++)
      dst[4 * i + (size_t)b] = src[(size_t)b * n + i];
}

/* ------------------------------------------------------------------------ */
/* Sections as spans of memory                                               */

/* The arrays of a section of snapshot s (any id but meta and shards), at
 * its current counts. */
snap_section_spans_t snap_section_of(const ls_snapshot_t *s, uint32_t id) {
  size_t const S = s->series, P = s->parts, f = sizeof(float), st = S * s->row * f;
  switch (id) {
  case SNAP_MODEL: return (snap_section_spans_t){id, 1, {{s->params, s->n * f, 1}}};
  case SNAP_OPTIMIZER:
    return (snap_section_spans_t){id, 2, {{s->adam_m, s->n * f, 1}, {s->adam_v, s->n * f, 1}}};
  case SNAP_KEYS:
    return (snap_section_spans_t){id, 2, {{s->key_len, S, 0}, {s->keys, s->key_bytes, 0}}};
  case SNAP_COUNTS:
    return (snap_section_spans_t){id,
                                  4,
                                  {{s->partition, S * 4, 0},
                                   {s->windows, S * 8, 0},
                                   {s->records, S * 8, 0},
                                   {s->last_off, S * 8, 0}}};
  case SNAP_STATES: return (snap_section_spans_t){id, 2, {{s->h, st, 1}, {s->c, st, 1}}};
  case SNAP_ACTIVITY:
    return (snap_section_spans_t){id, 2, {{s->last_time, S * 8, 0}, {s->active, S * 8, 0}}};
  case SNAP_NORM:
    return (snap_section_spans_t){id,
                                  3,
                                  {{s->norm_n, S * 8, 0},
                                   {s->norm, S * (size_t)s->stats_F * LS_NORM_STATS * 8, 0},
                                   {s->errors, S * (size_t)s->stats_O * 2 * 8, 0}}};
  case SNAP_CALIBRATION: {
    size_t const O = (size_t)s->shape.output_size;
    return (snap_section_spans_t){
        id, 3, {{s->calib, O * 8, 0}, {s->calib + O, O * 8, 0}, {s->calib_k, O * 8, 0}}};
  }
  case SNAP_SERVE:
    return (snap_section_spans_t){id,
                                  3,
                                  {{s->serve, S * LS_SERVE_FIELDS * 8, 0},
                                   {s->pending, S * (size_t)s->stats_O * 8, 0},
                                   {s->tail, S * (size_t)s->stats_F * 8, 0}}};
  case SNAP_SERIES_MODEL:
    return (snap_section_spans_t){id, 1, {{s->smodel, S * s->model_X * 8, 0}}};
  case SNAP_SERIES_MODEL_REFS: return (snap_section_spans_t){id, 1, {{s->mrefs, S * 2 * 8, 0}}};
  case SNAP_PREDICT:
    return (snap_section_spans_t){
        id, 1, {{s->predict, ((size_t)s->predict_Q + (size_t)s->predict_W) * 8, 0}}};
  case SNAP_MEMORY:
    return (snap_section_spans_t){id,
                                  3,
                                  {{s->mem_filled, P * 8, 0},
                                   {s->mem_next, P * 8, 0},
                                   {s->mem, P * s->mem_cap * s->mem_entry * f, 1}}};
  case SNAP_INFLIGHT:
    return (snap_section_spans_t){id,
                                  3,
                                  {{s->in_key_len, s->in_series, 0},
                                   {s->in_keys, s->in_key_bytes, 0},
                                   {s->in_meta, s->in_series * SNAP_IN_META * 8, 0}}};
  case SNAP_INFLIGHT_ROWS:
    return (snap_section_spans_t){id,
                                  3,
                                  {{s->in_offsets, s->in_rows * 8, 0},
                                   {s->in_times, s->in_rows * 8, 0},
                                   {s->in_x, s->in_rows * (size_t)s->in_F * f, 1}}};
  case SNAP_INFLIGHT_WINDOWS:
    return (snap_section_spans_t){
        id, 2, {{s->in_wins, s->in_series * 8, 0}, {s->in_refs, s->in_windows * SNAP_REF * 8, 0}}};
  case SNAP_SEGMENTS:
    return (snap_section_spans_t){id, 1, {{s->segs, s->n_segs * SNAP_SEG_ENTRY_BYTES, 0}}};
  case SNAP_PARTITIONS:
    return (snap_section_spans_t){id, 2, {{s->part_id, P * 4, 0}, {s->part_offset, P * 8, 0}}};
  default: {
    const struct snap_module_s *const m = snap_module(s, id);
    return (snap_section_spans_t){
        id, 1, {{m->data, m->bytes, (m->flags & LS_SNAPSHOT_FLOATS) != 0}}};
  }
  }
}

uint32_t snap_entry_flags(const ls_snapshot_t *s, uint32_t id) {
  const struct snap_module_s *const m = snap_is_module(id) ? snap_module(s, id) : NULL;
  if (m == NULL) return 0;
  return ((m->flags & LS_SNAPSHOT_REQUIRED) ? (uint32_t)SNAP_FLAG_REQUIRED : 0) |
         ((m->flags & LS_SNAPSHOT_FLOATS) ? (uint32_t)SNAP_FLAG_FLOATS : 0) | m->version << 16;
}

uint64_t snap_section_bytes(const snap_section_spans_t *sec) {
  uint64_t n = 0;
  for (int i = 0; i < sec->n; i++)
    n += sec->span[i].bytes;
  return n;
}

int snap_section_has_floats(const snap_section_spans_t *sec) {
  for (int i = 0; i < sec->n; i++)
    if (sec->span[i].floats) return 1;
  return 0;
}

/* The sections a shard holds after meta, in file order. */
int snap_shard_ids(const ls_snapshot_t *s, int own_only, uint32_t ids[SNAP_SHARD_SECTIONS]) {
  int n = 0;
  if (s->has_model) ids[n++] = SNAP_MODEL, ids[n++] = SNAP_OPTIMIZER;
  if (s->has_model && s->has_calib) ids[n++] = SNAP_CALIBRATION;
  if (s->has_model && s->predict_Q + s->predict_W > 0) ids[n++] = SNAP_PREDICT;
  ids[n++] = SNAP_KEYS, ids[n++] = SNAP_COUNTS, ids[n++] = SNAP_ACTIVITY, ids[n++] = SNAP_STATES;
  if (s->stats_F > 0) ids[n++] = SNAP_NORM;
  if (s->stats_F > 0 && s->has_serve) ids[n++] = SNAP_SERVE;
  if (s->stats_F > 0 && s->model_X > 0)
    ids[n++] = s->model_refs ? SNAP_SERIES_MODEL_REFS : SNAP_SERIES_MODEL;
  ids[n++] = SNAP_PARTITIONS;
  if (s->mem_cap > 0) ids[n++] = SNAP_MEMORY;
  if (s->in_F > 0) ids[n++] = SNAP_INFLIGHT, ids[n++] = SNAP_INFLIGHT_ROWS;
  if (s->in_F > 0 && (s->in_windows > 0 || s->model_refs))
    ids[n++] = SNAP_INFLIGHT_WINDOWS, ids[n++] = SNAP_SEGMENTS;
  for (int i = 0; !own_only && i < s->n_modules; i++)
    ids[n++] = s->modules[i].id;
  return n;
}

void snap_meta_pack(const ls_snapshot_t *s, uint8_t m[SNAP_META_BYTES]) {
  memset(m, 0, SNAP_META_BYTES);
  snap_put_u32(m + 0, (uint32_t)s->shape.input_size);
  snap_put_u32(m + 4, (uint32_t)s->shape.hidden_size);
  snap_put_u32(m + 8, (uint32_t)s->shape.num_layers);
  snap_put_u32(m + 12, (uint32_t)s->shape.output_size);
  snap_put_u32(m + 16, (uint32_t)s->has_model);
  snap_put_u64(m + 24, s->has_model ? s->n : 0);
  snap_put_u64(m + 32, (uint64_t)s->adam_steps);
  snap_put_u64(m + 40, s->info.seed);
  snap_put_u64(m + 48, s->info.fingerprint);
  snap_put_u64(m + 56, s->series);
  snap_put_u64(m + 64, s->parts);
  snap_put_u64(m + 72, s->key_bytes);
  snap_put_u32(m + 80, (uint32_t)s->stats_F);
  snap_put_u32(m + 84, (uint32_t)s->stats_O);
  snap_put_u32(m + 88, (uint32_t)(s->has_model && s->has_calib));
  snap_put_u32(m + 92, (uint32_t)(s->stats_F > 0 && s->has_serve));
  snap_put_u64(m + 96, s->mem_cap);
  snap_put_u64(m + 104, s->mem_entry);
  snap_put_u32(m + 112, (uint32_t)s->in_F);
  snap_put_u64(m + 120, s->in_series);
  snap_put_u64(m + 128, s->in_key_bytes);
  snap_put_u64(m + 136, s->in_rows);
  snap_put_u64(m + 144, (uint64_t)s->info.updates);
  snap_put_u32(m + 152, (uint32_t)(s->has_model ? s->predict_Q : 0));
  snap_put_u32(m + 156, (uint32_t)(s->has_model ? s->predict_W : 0));
  snap_put_u32(m + 160, (uint32_t)(s->stats_F > 0 ? s->model_X : 0));
  /* (snap_model_plan sets model_refs only with stats, model state and in_F) */
  snap_put_u32(m + 164,
               (uint32_t)(s->in_F > 0 && (s->in_windows > 0 || s->model_refs) ? s->n_segs : 0));
  snap_put_u64(m + 168, s->in_F > 0 ? s->in_windows : 0);
  snap_put_u32(m + 176, (uint32_t)s->model_refs);
}

snap_meta_t snap_meta_unpack(const uint8_t m[SNAP_META_BYTES]) {
  return (snap_meta_t){{(int)snap_get_u32(m + 0), (int)snap_get_u32(m + 4),
                        (int)snap_get_u32(m + 8), (int)snap_get_u32(m + 12)},
                       snap_get_u32(m + 16),
                       snap_get_u64(m + 24),
                       (int64_t)snap_get_u64(m + 32),
                       snap_get_u64(m + 40),
                       snap_get_u64(m + 48),
                       snap_get_u64(m + 56),
                       snap_get_u64(m + 64),
                       snap_get_u64(m + 72),
                       snap_get_u32(m + 80),
                       snap_get_u32(m + 84),
                       snap_get_u32(m + 88),
                       snap_get_u32(m + 92),
                       snap_get_u64(m + 96),
                       snap_get_u64(m + 104),
                       snap_get_u32(m + 112),
                       snap_get_u64(m + 120),
                       snap_get_u64(m + 128),
                       snap_get_u64(m + 136),
                       (int64_t)snap_get_u64(m + 144),
                       snap_get_u32(m + 152),
                       snap_get_u32(m + 156),
                       snap_get_u32(m + 160),
                       snap_get_u32(m + 164),
                       snap_get_u64(m + 168),
                       snap_get_u32(m + 176)};
}
