/*
 * A snapshot writer's segment entries (snapshot_format.h: the segments
 * section, and the book's list of the segments alive), and a staging
 * snapshot's entries of the segments it references (snapshot_segment.c:
 * the windows in flight; snapshot_model.c: the series' model state).
 */
#include <inttypes.h>
#include <string.h>

#include "snapshot_model.h"

snap_seg_entry_t snap_entry_get(const uint8_t *segs, size_t i) {
  const uint8_t *const p = segs + i * SNAP_SEG_ENTRY_BYTES;
  return (snap_seg_entry_t){snap_get_u64(p), snap_get_u64(p + 8), snap_get_u64(p + 16),
                            snap_get_u64(p + 24), snap_get_u32(p + 32)};
}

void snap_entry_put(uint8_t *segs, size_t i, const snap_seg_entry_t *e) {
  uint8_t *const p = segs + i * SNAP_SEG_ENTRY_BYTES;
  memset(p, 0, SNAP_SEG_ENTRY_BYTES);
  snap_put_u64(p, e->writer);
  snap_put_u64(p + 8, e->number);
  snap_put_u64(p + 16, e->windows);
  snap_put_u64(p + 24, e->size);
  snap_put_u32(p + 32, e->crc);
}

ls_err_t snap_reserve_entries(uint8_t **segs, size_t *cap, size_t n) {
  size_t const c = snap_next_cap(*cap, n);
  if (c == *cap && *segs != NULL) return LS_OK;
  LS_FORWARD_IF_ERROR(snap_grow(segs, c, SNAP_SEG_ENTRY_BYTES, "segment entries"));
  *cap = c;
  return LS_OK;
}

int64_t snap_book_entry(const snap_book_t *b, uint64_t number) {
  size_t lo = 0, hi = b->n_segs;
  while (lo < hi) { /* by number, ascending */
    size_t const mid = lo + (hi - lo) / 2;
    if (snap_entry_get(b->segs, mid).number < number)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < b->n_segs && snap_entry_get(b->segs, lo).number == number ? (int64_t)lo : -1;
}

ls_err_t snap_segment_entry(ls_snapshot_t *s, uint64_t number, int64_t *g) {
  /* (a series' windows run in seq order: mostly the segment of the last) */
  if (s->seg_hint >= 0 && s->seg_hint_number == number) {
    *g = s->seg_hint;
    return LS_OK;
  }
  for (size_t i = s->n_segs; i-- > 0;)
    if (snap_get_u64(s->segs + i * SNAP_SEG_ENTRY_BYTES + 8) == number &&
        (int64_t)i != s->new_seg) {
      *g = s->seg_hint = (int64_t)i;
      s->seg_hint_number = number;
      return LS_OK;
    }
  int64_t const at = snap_book_entry(s->book, number);
  LS_RETURN_IF(at < 0, LS_ERR_STATE,
               "the snapshot writer's book puts a window or a series' model state in segment "
               "%" PRIu64 ", which it no longer holds",
               number);
  LS_FORWARD_IF_ERROR(snap_reserve_entries(&s->segs, &s->cap_segs, s->n_segs + 1));
  snap_seg_entry_t const e = snap_entry_get(s->book->segs, (size_t)at);
  snap_entry_put(s->segs, s->n_segs, &e);
  *g = s->seg_hint = (int64_t)s->n_segs++;
  s->seg_hint_number = number;
  return LS_OK;
}

ls_err_t snap_newseg_entry(ls_snapshot_t *s, int64_t *g) {
  snap_segment_t *const n = &s->newseg;
  if (s->new_seg < 0) { /* its entry; its size and checksum once written */
    LS_FORWARD_IF_ERROR(snap_reserve_entries(&s->segs, &s->cap_segs, s->n_segs + 1));
    snap_seg_entry_t const e = {s->book->writer, s->book->next, 0, 0, 0};
    snap_entry_put(s->segs, s->n_segs, &e);
    s->new_seg = (int)s->n_segs++;
    n->n = n->rows = n->m = n->X = 0;
    n->writer = e.writer, n->number = e.number;
  }
  *g = s->new_seg;
  return LS_OK;
}
