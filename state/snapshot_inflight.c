/*
 * A snapshot's records in flight (include/lstream/state.h,
 * ls_inflight_t): per series its key, partition, window index,
 * last event time, reset flag and rows, in arrays that keep their capacity,
 * and the series evicted, in their own section (snapshot_format.h has the
 * layout and the sections).
 */
#include <stdlib.h>
#include <string.h>

#include "snapshot_format.h"

#define CORRUPT(...) ls_error_set(LS_ERR_CORRUPT, __VA_ARGS__)

ls_err_t snap_grow(void *p, size_t count, size_t size, const char *what) {
  void **const slot = p;
  LS_RETURN_IF(size != 0 && count > SIZE_MAX / size, LS_ERR_NOMEM, "%zu %s do not fit in memory",
               count, what);
  void *const q = realloc(*slot, count ? count * size : 1);
  LS_RETURN_IF(q == NULL, LS_ERR_NOMEM, "no memory for %zu %s", count, what);
  *slot = q;
  return LS_OK;
}

size_t snap_next_cap(size_t cap, size_t need) {
  return need <= cap ? cap : need > 2 * cap ? need : 2 * cap;
}

ls_err_t snap_reserve_inflight(ls_snapshot_t *s, size_t series, size_t key_bytes, size_t rows) {
  size_t const cs = snap_next_cap(s->cap_in_series, series);
  if (cs != s->cap_in_series || s->in_key_len == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_key_len, cs, 1, "key lengths"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_key_off, cs, sizeof(size_t), "key offsets"));
    LS_FORWARD_IF_ERROR(
        snap_grow(&s->in_meta, cs, SNAP_IN_META * sizeof(int64_t), "series in flight"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_row_at, cs, sizeof(size_t), "series in flight"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_wins, cs, sizeof(int64_t), "series in flight"));
    s->cap_in_series = cs;
  }
  size_t const ck = snap_next_cap(s->cap_in_keys, key_bytes);
  if (ck != s->cap_in_keys || s->in_keys == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_keys, ck, 1, "key bytes"));
    s->cap_in_keys = ck;
  }
  size_t const cr = snap_next_cap(s->cap_in_rows, rows);
  if (cr != s->cap_in_rows || s->in_offsets == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_offsets, cr, sizeof(int64_t), "offsets in flight"));
    LS_FORWARD_IF_ERROR(snap_grow(&s->in_times, cr, sizeof(int64_t), "event times in flight"));
    LS_FORWARD_IF_ERROR(
        snap_grow(&s->in_x, cr, (size_t)s->in_F * sizeof(float), "records in flight"));
    s->cap_in_rows = cr;
  }
  return LS_OK;
}

ls_err_t snap_reserve_refs(ls_snapshot_t *s, size_t windows) {
  size_t const cap = snap_next_cap(s->cap_in_windows, windows);
  if (cap == s->cap_in_windows && s->in_refs != NULL) return LS_OK;
  LS_FORWARD_IF_ERROR(
      snap_grow(&s->in_refs, cap, SNAP_REF * sizeof(int64_t), "windows in flight by reference"));
  s->cap_in_windows = cap;
  return LS_OK;
}

void snap_segment_free(snap_segment_t *g) {
  free(g->win), free(g->row_at), free(g->order), free(g->offsets), free(g->times), free(g->x);
  free(g->model);
  *g = (snap_segment_t){.F = g->F};
}

void snap_free_refs(ls_snapshot_t *s) {
  free(s->in_refs), free(s->segs);
  snap_segment_free(&s->newseg);
  base_rows_free(&s->gather);
}

void snap_free_inflight(ls_snapshot_t *s) {
  free(s->in_key_len), free(s->in_key_off), free(s->in_keys), free(s->in_meta);
  free(s->in_row_at), free(s->in_offsets), free(s->in_times), free(s->in_x), free(s->in_wins);
}

ls_err_t ls_snapshot_set_inflight_features(ls_snapshot_t *s, int features) {
  LS_RETURN_IF(s == NULL, LS_ERR_INVALID_ARG, "snapshot is NULL");
  LS_RETURN_IF(features < 0 || features > (1 << 16), LS_ERR_INVALID_ARG,
               "in-flight records of %d features", features);
  LS_RETURN_IF((s->in_series > 0 || s->new_seg >= 0) && features != s->in_F, LS_ERR_STATE,
               "the snapshot holds series in flight or a new segment already (set the features "
               "first)");
  if (features != s->newseg.F) { /* the rows' arrays are sized for another width */
    free(s->in_offsets), free(s->in_times), free(s->in_x);
    s->in_offsets = s->in_times = NULL, s->in_x = NULL, s->cap_in_rows = 0;
    snap_segment_free(&s->newseg);
    base_rows_free(&s->gather);
  }
  s->in_F = s->newseg.F = s->gather.F = features;
  return snap_reserve_inflight(s, 0, 0, 0);
}

int ls_snapshot_inflight_features(const ls_snapshot_t *s) {
  return s == NULL ? 0 : s->in_F;
}

/* Series i in flight (of s->in_series) as evicted: its index appended to
 * s's section LS_SNAPSHOT_SECTION_EVICTED (made on the first; room doubled). */
static ls_err_t mark_evicted(ls_snapshot_t *s, size_t i) {
  struct snap_module_s *const m = snap_module_slot(s, LS_SNAPSHOT_SECTION_EVICTED);
  LS_RETURN_IF(m == NULL, LS_ERR_INVALID_ARG, "a snapshot holds at most %d module sections",
               LS_SNAPSHOT_MODULE_SECTIONS);
  m->version = SNAP_EVICTED_VERSION;
  if (m->bytes + 8 > m->cap) {
    size_t const cap = snap_next_cap(m->cap, m->bytes + 64);
    LS_FORWARD_IF_ERROR(snap_grow(&m->data, cap, 1, "series in flight evicted"));
    m->cap = cap;
  }
  uint64_t const at = i;
  memcpy(m->data + m->bytes, &at, 8);
  m->bytes += 8;
  return LS_OK;
}

/* Whether series i in flight is evicted (s's section holds it: ascending). */
static int is_evicted(const ls_snapshot_t *s, size_t i) {
  const struct snap_module_s *const m = snap_module(s, LS_SNAPSHOT_SECTION_EVICTED);
  if (m == NULL || m->version != SNAP_EVICTED_VERSION) return 0;
  size_t lo = 0, hi = m->bytes / 8;
  while (lo < hi) {
    size_t const mid = lo + (hi - lo) / 2;
    uint64_t at;
    memcpy(&at, m->data + mid * 8, 8);
    if (at == i) return 1;
    if (at < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

ls_err_t ls_snapshot_add_inflight(ls_snapshot_t *s, const ls_inflight_t *in) {
  LS_RETURN_IF(s == NULL || in == NULL, LS_ERR_INVALID_ARG, "snapshot or series is NULL");
  LS_RETURN_IF(s->in_F == 0, LS_ERR_STATE,
               "no features set for records in flight (ls_snapshot_set_inflight_features)");
  return snap_add_series_inflight(s, in, 0);
}

ls_err_t snap_add_series_inflight(ls_snapshot_t *s, const ls_inflight_t *in, size_t windows) {
  int const least = windows > 0 ? 0 : 1; /* rows of its own: with windows, maybe none */
  LS_RETURN_IF(in->key == NULL || in->key_len < 1 || in->key_len > LS_KEY_MAX || in->rows < least ||
                   (in->rows > 0 && (in->offsets == NULL || in->times == NULL || in->x == NULL)) ||
                   in->partition < 0 || in->index < 0 || (in->reset != 0 && in->reset != 1) ||
                   (in->evicted != 0 && in->evicted != 1),
               LS_ERR_INVALID_ARG,
               "a series in flight needs a key of 1..%d bytes, rows >= %d and their arrays, a "
               "partition and window index >= 0, a reset and an evicted of 0 or 1",
               LS_KEY_MAX, least);
  size_t const rows = (size_t)in->rows, F = (size_t)s->in_F;
  LS_FORWARD_IF_ERROR(snap_reserve_inflight(s, s->in_series + 1, s->in_key_bytes + in->key_len + 1,
                                            s->in_rows + rows));
  size_t const i = s->in_series;
  if (in->evicted) LS_FORWARD_IF_ERROR(mark_evicted(s, i));
  s->in_key_len[i] = (uint8_t)in->key_len;
  s->in_key_off[i] = s->in_key_bytes;
  memcpy(s->in_keys + s->in_key_bytes, in->key, in->key_len);
  s->in_keys[s->in_key_bytes + in->key_len] = '\0';
  s->in_key_bytes += in->key_len + 1;
  int64_t *const m = s->in_meta + i * SNAP_IN_META;
  m[0] = in->partition, m[1] = in->index, m[2] = in->last_time, m[3] = in->reset, m[4] = in->rows;
  s->in_row_at[i] = s->in_rows;
  s->in_wins[i] = (int64_t)windows;
  if (rows > 0) {
    memcpy(s->in_offsets + s->in_rows, in->offsets, rows * sizeof(int64_t));
    memcpy(s->in_times + s->in_rows, in->times, rows * sizeof(int64_t));
    memcpy(s->in_x + s->in_rows * F, in->x, rows * F * sizeof(float));
  }
  s->in_rows += rows;
  s->in_series++;
  return LS_OK;
}

size_t ls_snapshot_inflight_count(const ls_snapshot_t *s) {
  return s == NULL ? 0 : s->in_series;
}

ls_err_t ls_snapshot_get_inflight(const ls_snapshot_t *s, size_t i, ls_inflight_t *out) {
  LS_RETURN_IF(s == NULL || out == NULL, LS_ERR_INVALID_ARG, "snapshot or out is NULL");
  LS_RETURN_IF(i >= s->in_series, LS_ERR_INVALID_ARG, "series in flight %zu of %zu", i,
               s->in_series);
  LS_RETURN_IF(s->in_wins[i] > 0, LS_ERR_STATE,
               "series in flight %zu holds windows by reference (a staging snapshot's): its writer "
               "writes them",
               i);
  const int64_t *const m = s->in_meta + i * SNAP_IN_META;
  size_t const at = s->in_row_at[i];
  *out = (ls_inflight_t){s->in_keys + s->in_key_off[i],
                         s->in_key_len[i],
                         (int32_t)m[0],
                         m[1],
                         m[2],
                         (int)m[3],
                         (int)m[4],
                         s->in_offsets + at,
                         s->in_times + at,
                         s->in_x + at * (size_t)s->in_F,
                         is_evicted(s, i)};
  return LS_OK;
}

ls_err_t snap_index_inflight(ls_snapshot_t *s, const char *name) {
  size_t at = 0, row = 0, ref = 0;
  for (size_t i = 0; i < s->in_series; i++) {
    size_t const len = s->in_key_len[i];
    if (len < 1 || len + 1 > s->in_key_bytes - at || s->in_keys[at + len] != '\0')
      return CORRUPT("%s: inflight: key %zu (%zu bytes at %zu) is not a NUL-terminated key of "
                     "1..%d bytes within the section",
                     name, i, len, at, LS_KEY_MAX);
    s->in_key_off[i] = at;
    at += len + 1;
    const int64_t *const m = s->in_meta + i * SNAP_IN_META;
    int64_t const wins = s->in_wins[i]; /* its windows by reference (format 6) */
    if (m[0] < 0 || m[0] > INT32_MAX || m[1] < 0 || m[2] < -1 || (m[3] != 0 && m[3] != 1) ||
        m[4] < (wins > 0 ? 0 : 1) || (uint64_t)m[4] > s->in_rows - row || wins < 0 ||
        (uint64_t)wins > s->in_windows - ref)
      return CORRUPT("%s: inflight: series %zu has partition %lld, window %lld, last time %lld, "
                     "reset %lld, %lld rows (%zu left), %lld windows by reference (%zu left)",
                     name, i, (long long)m[0], (long long)m[1], (long long)m[2], (long long)m[3],
                     (long long)m[4], s->in_rows - row, (long long)wins, s->in_windows - ref);
    s->in_row_at[i] = row;
    for (int64_t r = 1; r < m[4]; r++)
      if (s->in_offsets[row + r] <= s->in_offsets[row + r - 1])
        return CORRUPT("%s: inflight_rows: series %zu's offsets do not ascend", name, i);
    row += (size_t)m[4];
    for (int64_t k = 0; k < wins; k++, ref++)
      if (s->in_refs[ref * SNAP_REF] < 0 || (uint64_t)s->in_refs[ref * SNAP_REF] >= s->n_segs ||
          s->in_refs[ref * SNAP_REF + 1] < 0)
        return CORRUPT("%s: inflight_windows: window %zu of series %zu is seq %lld of segment "
                       "%lld (of %zu)",
                       name, (size_t)k, i, (long long)s->in_refs[ref * SNAP_REF + 1],
                       (long long)s->in_refs[ref * SNAP_REF], s->n_segs);
  }
  if (at != s->in_key_bytes || row != s->in_rows || ref != s->in_windows)
    return CORRUPT("%s: inflight: %zu key bytes, %zu rows and %zu windows by reference left after "
                   "the last series",
                   name, s->in_key_bytes - at, s->in_rows - row, s->in_windows - ref);
  /* The series evicted: ascending indexes of series (a later layout,
   * unknown here, is left out: none evicted). */
  const struct snap_module_s *const m = snap_module(s, LS_SNAPSHOT_SECTION_EVICTED);
  if (m == NULL || m->version != SNAP_EVICTED_VERSION) return LS_OK;
  if (m->bytes % 8 != 0 || m->flags != 0)
    return CORRUPT("%s: evicted: %zu bytes of flags %#x, not indexes of series in flight", name,
                   m->bytes, m->flags);
  for (size_t k = 0; k < m->bytes / 8; k++) {
    uint64_t idx, before = 0;
    memcpy(&idx, m->data + k * 8, 8);
    if (k > 0) memcpy(&before, m->data + (k - 1) * 8, 8);
    if (idx >= s->in_series || (k > 0 && idx <= before))
      return CORRUPT("%s: evicted: series %llu (of %zu), after %llu: not an ascending index of "
                     "a series in flight",
                     name, (unsigned long long)idx, s->in_series, (unsigned long long)before);
  }
  return LS_OK;
}
