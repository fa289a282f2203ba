/*
 * The in-memory content of one rank's part of a snapshot
 * (include/lstream/state.h, "Snapshots"): builders that copy the trainer's
 * data in with a few memcpys into arrays that keep their capacity, and
 * accessors for a loaded one.
 */
#include <stdlib.h>
#include <string.h>

#include "snapshot_model.h"

/* Steps fit the 12 digits of a snapshot's directory name. */
#define STEP_LIMIT 1000000000000ll

ls_err_t ls_snapshot_new(const ls_shape_t *shape, size_t series, size_t partitions,
                         ls_snapshot_t **out) {
  LS_RETURN_IF(shape == NULL || out == NULL, LS_ERR_INVALID_ARG, "shape or out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(ls_shape_check(shape));
  ls_snapshot_t *s = calloc(1, sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for a snapshot");
  s->shape = *shape;
  s->row = (size_t)shape->num_layers * (size_t)shape->hidden_size;
  s->new_seg = -1;
  s->book_gen = -1;
  s->seg_hint = -1;
  ls_err_t const err = snap_reserve(s, series, 16 * series, partitions);
  if (err != LS_OK) {
    ls_snapshot_destroy(s);
    return err;
  }
  *out = s;
  return LS_OK;
}

void ls_snapshot_destroy(ls_snapshot_t *s) {
  if (s == NULL) return;
  free(s->params), free(s->adam_m), free(s->adam_v);
  free(s->key_len), free(s->key_off), free(s->keys);
  free(s->partition), free(s->windows), free(s->records), free(s->last_off);
  free(s->last_time), free(s->active);
  free(s->h), free(s->c);
  free(s->part_id), free(s->part_offset);
  free(s->norm_n), free(s->norm), free(s->errors), free(s->calib), free(s->calib_k);
  free(s->serve), free(s->pending), free(s->tail), free(s->predict), free(s->smodel);
  free(s->mrefs);
  free(s->mem_filled), free(s->mem_next), free(s->mem);
  snap_free_inflight(s);
  snap_free_refs(s);
  for (int i = 0; i < LS_SNAPSHOT_MODULE_SECTIONS; i++)
    free(s->modules[i].data);
  free(s);
}

void ls_snapshot_reset(ls_snapshot_t *s) {
  if (s == NULL) return;
  s->info = (ls_snapshot_info_t){0, 0, 0, 0, 0, 0};
  s->has_model = 0;
  s->adam_steps = 0;
  s->series = s->key_bytes = s->parts = 0;
  s->stats_F = s->stats_O = 0;
  s->model_X = 0;
  s->model_refs = 0, s->reused = 0, s->model_full = 0;
  s->has_calib = 0;
  s->has_serve = 0;
  s->predict_Q = s->predict_W = 0;
  s->mem_cap = s->mem_entry = 0;
  s->in_F = 0;
  s->in_series = s->in_key_bytes = s->in_rows = 0;
  s->in_windows = s->n_segs = 0;
  s->newseg.n = s->newseg.rows = s->newseg.m = s->newseg.X = 0;
  s->new_seg = s->seg_hint = -1;
  s->book_gen = -1; /* (the book stays: a staging snapshot's is its writer's) */
  s->n_modules = 0; /* their buffers are kept */
  memset(&s->file, 0, sizeof s->file);
}

/* *p holds at least count elements of `size` bytes (keeping its content);
 * *have is its size in bytes. */
static ls_err_t ensure(void *p, size_t *have, size_t count, size_t size, const char *what) {
  LS_RETURN_IF(size != 0 && count > SIZE_MAX / size, LS_ERR_NOMEM, "%zu %s do not fit in memory",
               count, what);
  if (count * size <= *have && *(void **)p != NULL) return LS_OK;
  LS_FORWARD_IF_ERROR(snap_grow(p, count, size, what));
  *have = count * size;
  return LS_OK;
}

ls_err_t snap_reserve_smodel(ls_snapshot_t *s) {
  if (s->stats_F == 0 || s->model_X == 0) return LS_OK;
  return ensure(&s->smodel, &s->have_smodel, s->cap_series, s->model_X * sizeof(double),
                "series models");
}

/* The optional arrays for the capacities: host-side series state, replay
 * memory of the partitions. */
static ls_err_t reserve_optional(ls_snapshot_t *s) {
  size_t const cs = s->cap_series, cp = s->cap_parts;
  if (s->stats_F > 0) {
    size_t const nf = (size_t)s->stats_F * LS_NORM_STATS, ne = (size_t)s->stats_O * 2;
    LS_FORWARD_IF_ERROR(ensure(&s->norm_n, &s->have_norm_n, cs, sizeof(int64_t), "counts"));
    LS_FORWARD_IF_ERROR(ensure(&s->norm, &s->have_norm, cs, nf * sizeof(double), "normalisers"));
    LS_FORWARD_IF_ERROR(ensure(&s->errors, &s->have_errors, cs, ne * sizeof(double), "errors"));
    LS_FORWARD_IF_ERROR(
        ensure(&s->serve, &s->have_serve, cs, LS_SERVE_FIELDS * sizeof(int64_t), "forecasts"));
    LS_FORWARD_IF_ERROR(ensure(&s->pending, &s->have_pending, cs,
                               (size_t)s->stats_O * sizeof(double), "forecasts"));
    LS_FORWARD_IF_ERROR(
        ensure(&s->tail, &s->have_tail, cs, (size_t)s->stats_F * sizeof(double), "records"));
    /* (a writer's staging snapshot mostly holds them by reference: when not,
     * snap_reserve_smodel) */
    if (s->book == NULL) LS_FORWARD_IF_ERROR(snap_reserve_smodel(s));
  }
  if (s->mem_cap > 0) {
    LS_RETURN_IF(s->mem_entry > SIZE_MAX / sizeof(float) / s->mem_cap, LS_ERR_NOMEM,
                 "a replay memory of %zu entries of %zu floats does not fit", s->mem_cap,
                 s->mem_entry);
    size_t const bytes = s->mem_cap * s->mem_entry * sizeof(float);
    LS_FORWARD_IF_ERROR(ensure(&s->mem_filled, &s->have_mem_filled, cp, 8, "memory counts"));
    LS_FORWARD_IF_ERROR(ensure(&s->mem_next, &s->have_mem_next, cp, 8, "memory slots"));
    LS_FORWARD_IF_ERROR(ensure(&s->mem, &s->have_mem, cp, bytes, "replay memories"));
  }
  return LS_OK;
}

ls_err_t snap_reserve(ls_snapshot_t *s, size_t series, size_t key_bytes, size_t parts) {
  size_t const cs = snap_next_cap(s->cap_series, series);
  if (cs != s->cap_series || s->key_len == NULL) {
    LS_RETURN_IF(s->row != 0 && cs > SIZE_MAX / sizeof(float) / s->row, LS_ERR_NOMEM,
                 "states of %zu series do not fit in memory", cs);
    LS_FORWARD_IF_ERROR(snap_grow(&s->key_len, cs, sizeof *s->key_len, "key lengths"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->key_off, cs, sizeof *s->key_off, "key offsets"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->partition, cs, sizeof *s->partition, "partitions"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->windows, cs, sizeof *s->windows, "window counts"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->last_time, cs, sizeof *s->last_time, "event times"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->active, cs, sizeof *s->active, "activity counts"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->records, cs, sizeof *s->records, "record counts"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->last_off, cs, sizeof *s->last_off, "offsets"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->h, cs * s->row, sizeof *s->h, "h state floats"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->c, cs * s->row, sizeof *s->c, "c state floats"));
    s->cap_series = cs;
  }
  size_t const ck = snap_next_cap(s->cap_keys, key_bytes);
  if (ck != s->cap_keys || s->keys == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->keys, ck, 1, "key bytes"));
    s->cap_keys = ck;
  }
  size_t const cp = snap_next_cap(s->cap_parts, parts);
  if (cp != s->cap_parts || s->part_id == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->part_id, cp, sizeof *s->part_id, "partitions"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->part_offset, cp, sizeof *s->part_offset, "offsets"));
    s->cap_parts = cp;
  }
  return reserve_optional(s);
}

ls_err_t ls_snapshot_set_info(ls_snapshot_t *s, const ls_snapshot_info_t *info) {
  LS_RETURN_IF(s == NULL || info == NULL, LS_ERR_INVALID_ARG, "snapshot or info is NULL");
  LS_RETURN_IF(info->step < 0 || info->step >= STEP_LIMIT, LS_ERR_INVALID_ARG,
               "step %lld is out of range [0, 10^12)", (long long)info->step);
  LS_RETURN_IF(info->world < 1, LS_ERR_INVALID_ARG, "world size %d: at least 1 rank",
               (int)info->world);
  LS_RETURN_IF(info->rank < 0 || info->rank >= info->world, LS_ERR_INVALID_ARG,
               "rank %d is not in [0, world %d)", (int)info->rank, (int)info->world);
  LS_RETURN_IF(info->updates < 0, LS_ERR_INVALID_ARG, "negative update count %lld",
               (long long)info->updates);
  s->info = *info;
  return LS_OK;
}

ls_err_t snap_model_buffers(ls_snapshot_t *s, size_t n) {
  size_t count = 0;
  LS_FORWARD_IF_ERROR(ls_param_count(&s->shape, &count));
  LS_RETURN_IF(n != count, LS_ERR_INVALID_ARG,
               "a model of %zu floats, but shape I=%d H=%d L=%d O=%d has %zu parameters", n,
               s->shape.input_size, s->shape.hidden_size, s->shape.num_layers, s->shape.output_size,
               count);
  if (s->params == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->params, n, sizeof(float), "parameters"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->adam_m, n, sizeof(float), "Adam moments"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->adam_v, n, sizeof(float), "Adam moments"));
  }
  s->n = n;
  return LS_OK;
}

ls_err_t ls_snapshot_set_model(ls_snapshot_t *s, const float *params, const float *adam_m,
                               const float *adam_v, size_t n, int64_t adam_steps) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(params == NULL || adam_m == NULL || adam_v == NULL, LS_ERR_INVALID_ARG,
               "params, adam_m or adam_v is NULL");
  LS_RETURN_IF(adam_steps < 0, LS_ERR_INVALID_ARG, "negative optimizer step count %lld",
               (long long)adam_steps);
  LS_FORWARD_IF_ERROR(snap_model_buffers(s, n));
  memcpy(s->params, params, n * sizeof(float));
  memcpy(s->adam_m, adam_m, n * sizeof(float));
  memcpy(s->adam_v, adam_v, n * sizeof(float));
  s->adam_steps = adam_steps;
  s->has_model = 1;
  return LS_OK;
}

/* The engine's L and H must be the snapshot's (its states' row). */
static ls_err_t check_engine_shape(const ls_snapshot_t *s, const ls_engine_t *eng, int whole) {
  LS_RETURN_IF(eng == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  const ls_shape_t *const e = &ls_engine_get_conf(eng)->shape;
  const ls_shape_t *const m = &s->shape;
  int const same = e->hidden_size == m->hidden_size && e->num_layers == m->num_layers &&
                   (!whole || (e->input_size == m->input_size && e->output_size == m->output_size));
  LS_RETURN_IF(!same, LS_ERR_INVALID_ARG,
               "the engine's shape I=%d H=%d L=%d O=%d is not the snapshot's I=%d H=%d L=%d O=%d",
               e->input_size, e->hidden_size, e->num_layers, e->output_size, m->input_size,
               m->hidden_size, m->num_layers, m->output_size);
  return LS_OK;
}

ls_err_t ls_snapshot_set_engine(ls_snapshot_t *s, ls_engine_t *eng) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_FORWARD_IF_ERROR(check_engine_shape(s, eng, 1));
  size_t const n = ls_engine_param_count(eng);
  LS_FORWARD_IF_ERROR(snap_model_buffers(s, n));
  LS_FORWARD_IF_ERROR(ls_engine_read_params(eng, s->params, n));
  LS_FORWARD_IF_ERROR(ls_engine_read_optimizer(eng, s->adam_m, s->adam_v, n, &s->adam_steps));
  s->has_model = 1;
  return LS_OK;
}

/* Appends a series' key and counts (not its states) at index s->series;
 * its host-side stats zeroed unless `filled` (the caller copies all of
 * them next: zeroing the per-series model state first, 54 KB a series at
 * the defaults, was a pass over it on the trainer's thread for nothing). */
static ls_err_t append_series(ls_snapshot_t *s, const ls_series_info_t *in, int filled) {
  LS_RETURN_IF(in->key == NULL, LS_ERR_INVALID_ARG, "series key is NULL");
  LS_RETURN_IF(in->key_len < 1 || in->key_len > LS_KEY_MAX, LS_ERR_INVALID_ARG,
               "series key of %zu bytes: keys have 1..%d bytes", in->key_len, LS_KEY_MAX);
  LS_RETURN_IF(in->partition < 0, LS_ERR_INVALID_ARG, "negative partition %d", (int)in->partition);
  LS_RETURN_IF(in->last_time < -1 || in->active < 0, LS_ERR_INVALID_ARG,
               "last event time %lld, activity %lld", (long long)in->last_time,
               (long long)in->active);
  LS_FORWARD_IF_ERROR(snap_reserve(s, s->series + 1, s->key_bytes + in->key_len + 1, 0));
  if (!filled) LS_FORWARD_IF_ERROR(snap_reserve_smodel(s));
  size_t const i = s->series++;
  s->key_len[i] = (uint8_t)in->key_len;
  s->key_off[i] = s->key_bytes;
  memcpy(s->keys + s->key_bytes, in->key, in->key_len);
  s->keys[s->key_bytes + in->key_len] = '\0';
  s->key_bytes += in->key_len + 1;
  s->partition[i] = in->partition;
  s->windows[i] = in->windows;
  s->records[i] = in->records;
  s->last_off[i] = in->last_offset;
  s->last_time[i] = in->last_time;
  s->active[i] = in->active;
  if (s->stats_F > 0 && !filled) { /* zero until filled */
    ls_series_stats_t st;
    LS_FORWARD_IF_ERROR(ls_snapshot_series_stats(s, i, &st));
    *st.norm_n = 0;
    memset(st.norm, 0, (size_t)s->stats_F * LS_NORM_STATS * sizeof(double));
    memset(st.errors, 0, (size_t)s->stats_O * 2 * sizeof(double));
    memset(st.serve, 0, LS_SERVE_FIELDS * sizeof(int64_t));
    memset(st.pending, 0, (size_t)s->stats_O * sizeof(double));
    memset(st.tail, 0, (size_t)s->stats_F * sizeof(double));
    if (st.model_n > 0) memset(st.model, 0, st.model_n * sizeof(double));
  }
  return LS_OK;
}

ls_err_t ls_snapshot_add_series(ls_snapshot_t *s, const ls_series_info_t *series, const float *h,
                                const float *c) {
  LS_RETURN_IF(s == NULL || series == NULL, LS_ERR_INVALID_ARG, "snapshot or series is NULL");
  LS_RETURN_IF(h == NULL || c == NULL, LS_ERR_INVALID_ARG, "state h or c is NULL");
  LS_RETURN_IF(s->model_refs, LS_ERR_STATE,
               "the snapshot holds a table's series' model state by reference: no series after");
  LS_FORWARD_IF_ERROR(append_series(s, series, 0));
  size_t const i = s->series - 1;
  memcpy(s->h + i * s->row, h, s->row * sizeof(float));
  memcpy(s->c + i * s->row, c, s->row * sizeof(float));
  return LS_OK;
}

/* Series `at` of s takes the host-side state of the table's slot. */
ls_err_t ls_snapshot_add_series_table(ls_snapshot_t *s, ls_series_table_t *tab) {
  LS_RETURN_IF(s == NULL || tab == NULL, LS_ERR_INVALID_ARG, "snapshot or table is NULL");
  LS_FORWARD_IF_ERROR(check_engine_shape(s, ls_series_table_engine(tab), 0));
  int F = 0, O = 0;
  ls_series_table_stats_shape(tab, &F, &O);
  if (s->series == 0 && s->stats_F == 0 && F > 0) {
    LS_FORWARD_IF_ERROR(ls_snapshot_set_stats_shape(s, F, O));
    LS_FORWARD_IF_ERROR(ls_snapshot_set_model_width(s, ls_series_table_model_width(tab)));
  }
  LS_RETURN_IF(F != s->stats_F || O != s->stats_O ||
                   (F > 0 && ls_series_table_model_width(tab) != s->model_X),
               LS_ERR_INVALID_ARG,
               "the table keeps state of %d features and %d targets per series (%zu doubles of "
               "the trainer's), the snapshot of %d and %d (%zu)",
               F, O, ls_series_table_model_width(tab), s->stats_F, s->stats_O, s->model_X);
  size_t const first = s->series, n = ls_series_table_count(tab);
  if (n == 0) return LS_OK;
  LS_FORWARD_IF_ERROR(snap_reserve(s, first + n, 0, 0));
  for (size_t i = 0; i < n; i++) {
    ls_series_info_t info;
    LS_FORWARD_IF_ERROR(ls_series_table_info(tab, (int64_t)i, &info));
    LS_FORWARD_IF_ERROR(append_series(s, &info, F > 0));
  }
  if (F > 0) { /* the series' model state by reference, or by value */
    ls_err_t const err = snap_model_plan(s, tab, first, n);
    if (!s->model_refs) LS_FORWARD_IF_ERROR(snap_reserve_smodel(s));
    LS_FORWARD_IF_ERROR(err);
    LS_FORWARD_IF_ERROR(snap_fill_stats(s, tab, first, n));
  }
  return ls_state_table_read(ls_series_table_states(tab), 0, n, s->h + first * s->row,
                             s->c + first * s->row);
}

ls_err_t ls_snapshot_add_partition(ls_snapshot_t *s, int32_t partition, int64_t offset) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(partition < 0, LS_ERR_INVALID_ARG, "negative partition %d", (int)partition);
  LS_RETURN_IF(offset < 0, LS_ERR_INVALID_ARG, "negative resume offset %lld for partition %d",
               (long long)offset, (int)partition);
  for (size_t i = 0; i < s->parts; i++)
    LS_RETURN_IF(s->part_id[i] == partition, LS_ERR_INVALID_ARG,
                 "partition %d is already in the snapshot", (int)partition);
  LS_FORWARD_IF_ERROR(snap_reserve(s, 0, 0, s->parts + 1));
  s->part_id[s->parts] = partition;
  s->part_offset[s->parts] = offset;
  if (s->mem_cap > 0) { /* an empty memory until set */
    s->mem_filled[s->parts] = s->mem_next[s->parts] = 0;
    memset(s->mem + s->parts * s->mem_cap * s->mem_entry, 0,
           s->mem_cap * s->mem_entry * sizeof(float));
  }
  s->parts++;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Host-side series state, calibration, replay memory                       */

ls_err_t ls_snapshot_set_stats_shape(ls_snapshot_t *s, int features, int targets) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(s->series > 0, LS_ERR_STATE,
               "the snapshot holds series: set the layout of their state before adding any");
  int const none = features == 0 && targets == 0;
  LS_RETURN_IF(!none && (features < 1 || features > (1 << 16) || targets < 1 || targets > features),
               LS_ERR_INVALID_ARG,
               "%d features and %d targets: 0, 0 or 1 <= targets <= features <= 65536", features,
               targets);
  s->stats_F = features;
  s->stats_O = targets;
  s->model_X = 0;
  s->has_serve = !none;
  return reserve_optional(s);
}

ls_err_t ls_snapshot_set_model_width(ls_snapshot_t *s, size_t doubles) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(s->series > 0, LS_ERR_STATE,
               "the snapshot holds series: set the layout of their state before adding any");
  LS_RETURN_IF(doubles > 0 && s->stats_F == 0, LS_ERR_STATE,
               "per-series model state needs a stats layout: set that first");
  LS_RETURN_IF(doubles > ((size_t)1 << 24), LS_ERR_INVALID_ARG,
               "%zu doubles of per-series state: at most 2^24", doubles);
  s->model_X = doubles;
  return reserve_optional(s);
}

size_t ls_snapshot_model_width(const ls_snapshot_t *s) {
  return s != NULL ? s->model_X : 0;
}

void ls_snapshot_stats_shape(const ls_snapshot_t *s, int *features, int *targets) {
  if (features != NULL) *features = s != NULL ? s->stats_F : 0;
  if (targets != NULL) *targets = s != NULL ? s->stats_O : 0;
}

/* ------------------------------------------------------------------------ */
/* Format 4's calibration and forecasts' bookkeeping                         */

/* Format 4 kept them as the container's sections 10 and 16; from format 5
 * they are train/'s module sections (figures.c, predict_out.c). A format-4
 * file's are decoded into these arrays (snapshot_decode.c), then handed
 * over as module sections of version 1, which hold the same values. */

ls_err_t snap_legacy_alloc(ls_snapshot_t *s, int calib, int n_from, int n_lengths) {
  size_t const O = (size_t)s->shape.output_size, n = (size_t)n_from + (size_t)n_lengths;
  if (calib) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->calib, 2 * O, sizeof(double), "calibration moments"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->calib_k, O, sizeof(int64_t), "calibration counts"));
    memset(s->calib, 0, 2 * O * sizeof(double));
    memset(s->calib_k, 0, O * sizeof(int64_t));
    s->has_calib = 1;
  }
  if (n > 0) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->predict, n, sizeof(int64_t), "offsets"));
    memset(s->predict, 0, n * sizeof(int64_t));
  }
  s->predict_Q = n_from, s->predict_W = n_lengths;
  return LS_OK;
}

ls_err_t snap_legacy_migrate(ls_snapshot_t *s) {
  size_t const O = (size_t)s->shape.output_size;
  if (s->has_calib) {
    /* calibration v1: spy f64 [O], spp f64 [O], k i64 [O] (O: the shape's) */
    uint8_t *const b = malloc(3 * O * 8);
    LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for a calibration of %zu", O);
    memcpy(b, s->calib, 2 * O * 8);
    memcpy(b + 2 * O * 8, s->calib_k, O * 8);
    ls_err_t const err =
        snap_put_module(s, LS_SNAPSHOT_SECTION_CALIBRATION, 1, LS_SNAPSHOT_REQUIRED, b, 3 * O * 8);
    free(b);
    LS_FORWARD_IF_ERROR(err);
    s->has_calib = 0;
  }
  if (s->predict_Q + s->predict_W > 0) {
    /* predict v1: Q u32, W u32, from i64 [Q], lengths i64 [W] */
    size_t const n = (size_t)s->predict_Q + (size_t)s->predict_W;
    uint8_t *const b = malloc(8 + n * 8);
    LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for the forecasts' bookkeeping");
    snap_put_u32(b, (uint32_t)s->predict_Q);
    snap_put_u32(b + 4, (uint32_t)s->predict_W);
    memcpy(b + 8, s->predict, n * 8);
    ls_err_t const err =
        snap_put_module(s, LS_SNAPSHOT_SECTION_PREDICT, 1, LS_SNAPSHOT_REQUIRED, b, 8 + n * 8);
    free(b);
    LS_FORWARD_IF_ERROR(err);
    s->predict_Q = s->predict_W = 0;
  }
  return LS_OK;
}

ls_err_t ls_snapshot_set_memory_shape(ls_snapshot_t *s, size_t cap, size_t entry) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(s->parts > 0, LS_ERR_STATE,
               "the snapshot holds partitions: set the layout of their memory before adding any");
  LS_RETURN_IF(
      (cap == 0) != (entry == 0) || cap > (1u << 30) || entry > (1u << 30), LS_ERR_INVALID_ARG,
      "a replay memory of %zu entries of %zu floats: 0, 0 or both in [1, 2^30]", cap, entry);
  s->mem_cap = cap;
  s->mem_entry = entry;
  return reserve_optional(s);
}

void ls_snapshot_memory_shape(const ls_snapshot_t *s, size_t *cap, size_t *entry) {
  if (cap != NULL) *cap = s != NULL ? s->mem_cap : 0;
  if (entry != NULL) *entry = s != NULL ? s->mem_entry : 0;
}

ls_err_t ls_snapshot_set_memory(ls_snapshot_t *s, size_t i, int64_t filled, int64_t next,
                                const float *entries) {
  LS_RETURN_IF(s == NULL || entries == NULL, LS_ERR_INVALID_ARG, "snapshot or entries is NULL");
  LS_RETURN_IF(i >= s->parts, LS_ERR_INVALID_ARG, "partition %zu of a snapshot of %zu", i,
               s->parts);
  LS_RETURN_IF(s->mem_cap == 0, LS_ERR_STATE, "the snapshot has no replay memory layout");
  LS_RETURN_IF(filled < 0 || (size_t)filled > s->mem_cap || next < 0 || (size_t)next >= s->mem_cap,
               LS_ERR_INVALID_ARG, "memory of %lld entries, next slot %lld: a memory holds %zu",
               (long long)filled, (long long)next, s->mem_cap);
  s->mem_filled[i] = filled;
  s->mem_next[i] = next;
  memcpy(s->mem + i * s->mem_cap * s->mem_entry, entries,
         s->mem_cap * s->mem_entry * sizeof(float));
  return LS_OK;
}

ls_err_t ls_snapshot_get_memory(const ls_snapshot_t *s, size_t i, int64_t *filled, int64_t *next,
                                const float **entries) {
  LS_RETURN_IF(s == NULL || filled == NULL || next == NULL || entries == NULL, LS_ERR_INVALID_ARG,
               "snapshot, filled, next or entries is NULL");
  LS_RETURN_IF(i >= s->parts, LS_ERR_INVALID_ARG, "partition %zu of a snapshot of %zu", i,
               s->parts);
  LS_RETURN_IF(s->mem_cap == 0, LS_ERR_STATE, "the snapshot holds no replay memory");
  *filled = s->mem_filled[i];
  *next = s->mem_next[i];
  *entries = s->mem + i * s->mem_cap * s->mem_entry;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                 */

ls_err_t ls_snapshot_get_shape(const ls_snapshot_t *s, ls_shape_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  *out = s->shape;
  return LS_OK;
}

ls_err_t ls_snapshot_get_info(const ls_snapshot_t *s, ls_snapshot_info_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  *out = s->info;
  return LS_OK;
}

ls_err_t ls_snapshot_get_model(const ls_snapshot_t *s, ls_snapshot_model_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  LS_RETURN_IF(!s->has_model, LS_ERR_STATE,
               "this part of the snapshot (rank %d) holds no model: rank 0's does",
               (int)s->info.rank);
  *out = (ls_snapshot_model_t){s->n, s->params, s->adam_m, s->adam_v, s->adam_steps};
  return LS_OK;
}

size_t ls_snapshot_series_count(const ls_snapshot_t *s) {
  return s == NULL ? 0 : s->series;
}

ls_err_t ls_snapshot_get_series(const ls_snapshot_t *s, size_t i, ls_series_info_t *out,
                                const float **h, const float **c) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  LS_RETURN_IF(i >= s->series, LS_ERR_INVALID_ARG, "series %zu of a snapshot of %zu", i, s->series);
  *out = (ls_series_info_t){
      s->keys + s->key_off[i], s->key_len[i],  s->partition[i], (int64_t)i,  s->windows[i],
      s->records[i],           s->last_off[i], s->last_time[i], s->active[i]};
  if (h != NULL) *h = s->h + i * s->row;
  if (c != NULL) *c = s->c + i * s->row;
  return LS_OK;
}

ls_err_t ls_snapshot_get_states(const ls_snapshot_t *s, const float **h, const float **c) {
  LS_RETURN_IF(s == NULL || h == NULL || c == NULL, LS_ERR_INVALID_ARG, "snapshot, h or c is NULL");
  *h = s->h;
  *c = s->c;
  return LS_OK;
}

size_t ls_snapshot_partition_count(const ls_snapshot_t *s) {
  return s == NULL ? 0 : s->parts;
}

ls_err_t ls_snapshot_get_partition(const ls_snapshot_t *s, size_t i, int32_t *partition,
                                   int64_t *offset) {
  LS_RETURN_IF(s == NULL || partition == NULL || offset == NULL, LS_ERR_INVALID_ARG,
               "snapshot, partition or offset is NULL");
  LS_RETURN_IF(i >= s->parts, LS_ERR_INVALID_ARG, "partition %zu of a snapshot of %zu", i,
               s->parts);
  *partition = s->part_id[i];
  *offset = s->part_offset[i];
  return LS_OK;
}

ls_err_t ls_snapshot_get_file(const ls_snapshot_t *s, ls_snapshot_file_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  *out = s->file;
  return LS_OK;
}

void ls_snapshot_conf_init(ls_snapshot_conf_t *conf) {
  if (conf == NULL) return;
  *conf = (ls_snapshot_conf_t){3, 0, 1, 3, 0};
}

/* ------------------------------------------------------------------------ */
/* Module sections                                                           */

ls_err_t snap_put_module(ls_snapshot_t *s, uint32_t id, uint32_t version, unsigned flags,
                         const void *data, size_t bytes) {
  struct snap_module_s *const m = snap_module_slot(s, id);
  LS_RETURN_IF(m == NULL, LS_ERR_INVALID_ARG, "a snapshot holds at most %d module sections",
               LS_SNAPSHOT_MODULE_SECTIONS);
  if (bytes > m->cap) {
    uint8_t *const p = realloc(m->data, bytes);
    LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for section %u of %zu bytes", id, bytes);
    m->data = p, m->cap = bytes;
  }
  if (bytes > 0) memcpy(m->data, data, bytes);
  m->bytes = bytes, m->version = version, m->flags = flags;
  return LS_OK;
}

ls_err_t ls_snapshot_put_section(ls_snapshot_t *s, uint32_t id, uint32_t version, unsigned flags,
                                 const void *data, size_t bytes) {
  LS_RETURN_IF(s == NULL || (data == NULL && bytes > 0), LS_ERR_INVALID_ARG,
               "snapshot or data is NULL");
  LS_RETURN_IF(!snap_is_module(id), LS_ERR_INVALID_ARG, "section id %u is not a module's (%d..%d)",
               id, LS_SNAPSHOT_SECTION_FIRST, LS_SNAPSHOT_SECTION_LAST);
  LS_RETURN_IF(id == LS_SNAPSHOT_SECTION_EVICTED, LS_ERR_INVALID_ARG,
               "section %u is the snapshot's own (its series in flight evicted: "
               "ls_inflight_t.evicted)",
               id);
  LS_RETURN_IF(version > 0xffff, LS_ERR_INVALID_ARG, "section %u: version %u above 65535", id,
               version);
  LS_RETURN_IF((flags & ~(unsigned)(LS_SNAPSHOT_REQUIRED | LS_SNAPSHOT_FLOATS)) != 0,
               LS_ERR_INVALID_ARG, "section %u: unknown flags %#x", id, flags);
  LS_RETURN_IF((flags & LS_SNAPSHOT_FLOATS) && bytes % 4 != 0, LS_ERR_INVALID_ARG,
               "section %u: %zu bytes are not float32s", id, bytes);
  return snap_put_module(s, id, version, flags, data, bytes);
}

ls_err_t ls_snapshot_get_section(const ls_snapshot_t *s, uint32_t id, uint32_t *version,
                                 const void **data, size_t *bytes) {
  LS_RETURN_IF(s == NULL || version == NULL || data == NULL || bytes == NULL, LS_ERR_INVALID_ARG,
               "snapshot, version, data or bytes is NULL");
  const struct snap_module_s *const m = snap_module(s, id);
  LS_RETURN_IF(m == NULL, LS_ERR_NOT_FOUND, "the snapshot has no section %u (%s)", id,
               snap_section_name(id));
  *version = m->version, *data = m->data, *bytes = m->bytes;
  return LS_OK;
}

ls_err_t ls_snapshot_check_sections(const ls_snapshot_t *s, const uint32_t *known, size_t n) {
  LS_RETURN_IF(s == NULL || (known == NULL && n > 0), LS_ERR_INVALID_ARG,
               "snapshot or known is NULL");
  for (int i = 0; i < s->n_modules; i++) {
    if (!(s->modules[i].flags & LS_SNAPSHOT_REQUIRED)) continue;
    size_t k = 0;
    while (k < n && known[k] != s->modules[i].id)
      k++;
    LS_RETURN_IF(k == n, LS_ERR_UNSUPPORTED,
                 "the snapshot holds section %u (version %u), which a resume needs and this "
                 "lstream does not know: it was written by a later lstream; resume with that "
                 "version or a later one",
                 s->modules[i].id, s->modules[i].version);
  }
  return LS_OK;
}

ls_err_t snap_copy_modules(ls_snapshot_t *dst, const ls_snapshot_t *src) {
  for (int i = 0; i < src->n_modules; i++) {
    const struct snap_module_s *const m = &src->modules[i];
    /* (src's series in flight evicted are src's: dst keeps its own) */
    if (snap_module(dst, m->id) != NULL || m->id == LS_SNAPSHOT_SECTION_EVICTED) continue;
    LS_FORWARD_IF_ERROR(snap_put_module(dst, m->id, m->version, m->flags, m->data, m->bytes));
  }
  return LS_OK;
}
