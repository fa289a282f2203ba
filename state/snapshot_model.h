/*
 * The series' model state by reference (snapshot_model.c; the format and
 * the types are snapshot_format.h's; a read shard's is resolved with its
 * windows, snapshot_segment.c). State-internal.
 */
#ifndef LSTREAM_STATE_SNAPSHOT_MODEL_H
#define LSTREAM_STATE_SNAPSHOT_MODEL_H

#include <stdlib.h>

#include "snapshot_format.h"

/* A writer's staging snapshot s takes series [first, first + n) of tab
 * (appended, stats not filled yet) by reference: their places (mrefs), the
 * rows of those whose model state changed since the writer's last shard to
 * come in s's new segment (snapshot_model.c; the caller's thread, the
 * writer idle). Without a book, or when first > 0, none: model_refs 0. */
ls_err_t snap_model_plan(ls_snapshot_t *s, ls_series_table_t *tab, size_t first, size_t n);

/* Where series i's model state is copied to: its row of s's new segment,
 * or NULL (it stays where the writer's last shard has it); its row of
 * smodel when s holds it by value. */
double *snap_model_row(ls_snapshot_t *s, size_t i);

/* After s's shard was written: the book's places become s's (by
 * reference), or none. */
ls_err_t snap_model_written(snap_book_t *book, const ls_snapshot_t *s);

static inline void snap_places_free(snap_places_t *p) {
  free(p->number), free(p->row), free(p->clock);
  *p = (snap_places_t){0};
}

/* A segments entry (SNAP_SEG_ENTRY_BYTES in the format) (snapshot_book.c):
 * entry i of segs; room for n of them in *segs (capacity *cap); the
 * book's entry of segment `number` (alive), or -1. */
typedef struct snap_seg_entry_s {
  uint64_t writer, number, windows, size;
  uint32_t crc;
} snap_seg_entry_t;
snap_seg_entry_t snap_entry_get(const uint8_t *segs, size_t i);
void snap_entry_put(uint8_t *segs, size_t i, const snap_seg_entry_t *e);
ls_err_t snap_reserve_entries(uint8_t **segs, size_t *cap, size_t n);
int64_t snap_book_entry(const snap_book_t *b, uint64_t number);

/* The entry (its index in s's segments) of the segment new with s, opened
 * (s's entry appended, its number the book's next) when s has none yet; of
 * segment `number`, appended from the book's the first time. */
ls_err_t snap_newseg_entry(ls_snapshot_t *s, int64_t *g);
ls_err_t snap_segment_entry(ls_snapshot_t *s, uint64_t number, int64_t *g);

#endif
