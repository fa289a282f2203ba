/*
 * A snapshot's records in flight by reference (include/lstream/state.h,
 * ls_snapshot_add_inflight_parts; the format is snapshot_format.h's,
 * version 6). A replay's look-ahead holds most of a topic in queued windows,
 * and each snapshot would copy, compress and write all of it again: instead a
 * writer's staging snapshot keeps a window that an earlier snapshot of the
 * same writer wrote by reference (its partition and seq, which never change
 * once queued), and the windows new since then go into one new segment file
 * written with this snapshot. Each segment is written once, as
 * DIR/segments/seg-r<rank>-<writer>-<number> (the writer's own link to it,
 * kept while its latest snapshot references it), and hard-linked into every
 * snapshot directory that references it: a snapshot directory holds all it
 * needs, and deleting it frees what no other one holds. Loading puts each
 * series back together, so what a loaded snapshot holds does not depend on
 * how it was written.
 *
 * The writer's book (snap_book_t) says which segment holds a window: per
 * partition, segment number[k] holds the windows of seq in (hi[k-1], hi[k]]
 * that were in flight when it was written (a window is in flight from its
 * queueing to its release, so one in flight now and older than the last
 * segment was in flight then and is in a segment; one released is never
 * asked for again). The trainer's thread reads it while filling a staging
 * snapshot, the writer's thread changes it while writing one: never at once
 * (filling while it writes a shard is refused; a submit checks generations).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/digest.h"
#include "snapshot_model.h"

#define CORRUPT(...) ls_error_set(LS_ERR_CORRUPT, __VA_ARGS__)

/* The writer's folder of segments in a snapshot directory. */
#define SEG_DIR "segments"

void snap_segment_name(char name[64], int rank, uint64_t writer, uint64_t number) {
  snprintf(name, 64, "seg-r%d-%016" PRIx64 "-%012" PRIu64, rank, writer, number);
}

/* buf = DIR/NAME. */
static ls_err_t join(char buf[PATH_MAX], const char *dir, const char *name) {
  int const n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);
  LS_RETURN_IF(n < 0 || n >= PATH_MAX, LS_ERR_INVALID_ARG, "path %s/%s is too long", dir, name);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

/* Room in a segment for n windows and `rows` rows. */
static ls_err_t segment_reserve(snap_segment_t *g, size_t n, size_t rows) {
  size_t const cn = snap_next_cap(g->cap, n);
  if (cn != g->cap || g->win == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&g->win, cn, SNAP_SEG_WIN * sizeof(int64_t), "segment windows"));
    g->cap = cn;
  }
  size_t const cr = snap_next_cap(g->cap_rows, rows);
  if (cr != g->cap_rows || g->offsets == NULL) {
    LS_FORWARD_IF_ERROR(snap_grow(&g->offsets, cr, sizeof(int64_t), "segment offsets"));
    LS_FORWARD_IF_ERROR(snap_grow(&g->times, cr, sizeof(int64_t), "segment event times"));
    LS_FORWARD_IF_ERROR(snap_grow(&g->x, cr, (size_t)g->F * sizeof(float), "segment records"));
    g->cap_rows = cr;
  }
  return LS_OK;
}

int64_t snap_segment_find(const snap_segment_t *g, int64_t partition, int64_t seq) {
  size_t lo = 0, hi = g->n;
  while (lo < hi) { /* the first window of (partition, seq) >= the one asked for */
    size_t const mid = lo + (hi - lo) / 2;
    const int64_t *const w = g->win + g->order[mid] * SNAP_SEG_WIN;
    if (w[0] < partition || (w[0] == partition && w[1] < seq))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == g->n) return -1;
  const int64_t *const w = g->win + g->order[lo] * SNAP_SEG_WIN;
  return w[0] == partition && w[1] == seq ? (int64_t)g->order[lo] : -1;
}

/* ------------------------------------------------------------------------ */
/* The book                                                                  */

ls_err_t snap_book_init(snap_book_t *b) {
  LS_RETURN_IF(b == NULL, LS_ERR_INVALID_ARG, "book is NULL");
  *b = (snap_book_t){.writer = base_random64()};
  return LS_OK;
}

void snap_book_free(snap_book_t *b) {
  if (b == NULL) return;
  for (size_t i = 0; i < b->n_parts; i++)
    free(b->parts[i].hi), free(b->parts[i].number);
  free(b->parts), free(b->segs), snap_places_free(&b->places), snap_places_free(&b->written);
  *b = (snap_book_t){0};
}

/* The book's partition, or NULL; *hint: where the last one was found. */
static snap_book_part_t *book_part(snap_book_t *b, int32_t partition, size_t *hint) {
  if (*hint < b->n_parts && b->parts[*hint].partition == partition) return &b->parts[*hint];
  for (size_t i = 0; i < b->n_parts; i++)
    if (b->parts[i].partition == partition) return &b->parts[*hint = i];
  return NULL;
}

/* Whether the window (partition, seq) is in a segment alive: its number. */
static int book_lookup(snap_book_t *b, size_t *hint, int32_t partition, int64_t seq,
                       uint64_t *number) {
  const snap_book_part_t *const p = book_part(b, partition, hint);
  if (p == NULL || seq > p->written) return 0;
  size_t lo = 0, hi = p->n;
  while (lo < hi) { /* the first boundary >= seq */
    size_t const mid = lo + (hi - lo) / 2;
    if (p->hi[mid] < seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == p->n) return 0;
  *number = p->number[lo];
  return 1;
}

/* Segment g written: its windows' seqs enter the book, under its number. */
static ls_err_t book_enter(snap_book_t *b, const snap_segment_t *g, const snap_seg_entry_t *e) {
  LS_FORWARD_IF_ERROR(snap_reserve_entries(&b->segs, &b->cap_segs, b->n_segs + 1));
  size_t hint = 0;
  for (size_t k = 0; k < g->n; k++) {
    int32_t const partition = (int32_t)g->win[k * SNAP_SEG_WIN];
    int64_t const seq = g->win[k * SNAP_SEG_WIN + 1];
    snap_book_part_t *p = book_part(b, partition, &hint);
    if (p == NULL) {
      if (b->n_parts == b->cap_parts) {
        size_t const cap = b->cap_parts ? 2 * b->cap_parts : 16;
        LS_FORWARD_IF_ERROR(snap_grow(&b->parts, cap, sizeof *b->parts, "book partitions"));
        b->cap_parts = cap;
      }
      p = &b->parts[hint = b->n_parts++];
      *p = (snap_book_part_t){.partition = partition, .written = -1};
    }
    if (p->n == 0 || p->number[p->n - 1] != e->number) {
      if (p->n == p->cap) {
        size_t const cap = p->cap ? 2 * p->cap : 16;
        LS_FORWARD_IF_ERROR(snap_grow(&p->hi, cap, sizeof *p->hi, "book boundaries"));
        LS_FORWARD_IF_ERROR(snap_grow(&p->number, cap, sizeof *p->number, "book boundaries"));
        p->cap = cap;
      }
      p->hi[p->n] = seq, p->number[p->n++] = e->number;
    }
    if (seq > p->hi[p->n - 1]) p->hi[p->n - 1] = seq;
    if (seq > p->written) p->written = seq;
  }
  snap_entry_put(b->segs, b->n_segs++, e); /* the newest: numbers stay ascending */
  b->next = e->number + 1;
  b->generation++;
  return LS_OK;
}

/* Segment `number` leaves the book (its file gone). */
static void book_drop(snap_book_t *b, uint64_t number) {
  int64_t const at = snap_book_entry(b, number);
  if (at >= 0) {
    memmove(b->segs + (size_t)at * SNAP_SEG_ENTRY_BYTES,
            b->segs + ((size_t)at + 1) * SNAP_SEG_ENTRY_BYTES,
            (b->n_segs - (size_t)at - 1) * SNAP_SEG_ENTRY_BYTES);
    b->n_segs--;
  }
  for (size_t i = 0; i < b->n_parts; i++) {
    snap_book_part_t *const p = &b->parts[i];
    size_t k = 0;
    for (size_t j = 0; j < p->n; j++)
      if (p->number[j] != number) p->hi[k] = p->hi[j], p->number[k++] = p->number[j];
    p->n = k;
  }
  b->generation++;
}

/* ------------------------------------------------------------------------ */
/* Keeping series in flight (the trainer's thread)                          */

/* A window of `partition` into s by reference: *ref = its segment and seq;
 * a window no segment holds yet goes into s's new one. */
static ls_err_t keep_window(ls_snapshot_t *s, int32_t partition, const ls_inflight_window_t *w,
                            int64_t *ref) {
  uint64_t number = 0;
  int64_t g = -1;
  if (book_lookup(s->book, &s->book_hint, partition, w->seq, &number)) {
    LS_FORWARD_IF_ERROR(snap_segment_entry(s, number, &g));
  } else {
    snap_segment_t *const n = &s->newseg;
    LS_FORWARD_IF_ERROR(snap_newseg_entry(s, &g));
    size_t const rows = (size_t)w->rows, F = (size_t)n->F;
    LS_FORWARD_IF_ERROR(segment_reserve(n, n->n + 1, n->rows + rows));
    int64_t *const m = n->win + n->n++ * SNAP_SEG_WIN;
    m[0] = partition, m[1] = w->seq, m[2] = w->rows;
    memcpy(n->offsets + n->rows, w->offsets, rows * sizeof(int64_t));
    memcpy(n->times + n->rows, w->times, rows * sizeof(int64_t));
    memcpy(n->x + n->rows * F, w->x, rows * F * sizeof(float));
    n->rows += rows;
  }
  ref[0] = g, ref[1] = w->seq;
  return LS_OK;
}

/* The series' parts put together, kept as one series (no writer's book). */
static ls_err_t keep_together(ls_snapshot_t *s, const ls_inflight_parts_t *p) {
  base_rows_t *const r = &s->gather;
  r->n = 0;
  for (int i = 0; i < p->n_windows; i++) {
    const ls_inflight_window_t *const w = &p->windows[i];
    LS_FORWARD_IF_ERROR(base_rows_append(r, w->offsets, w->times, w->x, (size_t)w->rows));
  }
  LS_FORWARD_IF_ERROR(
      base_rows_append(r, p->held.offsets, p->held.times, p->held.x, (size_t)p->held.rows));
  ls_inflight_t in = p->held;
  in.rows = (int)r->n, in.offsets = r->offsets, in.times = r->times, in.x = r->x;
  return ls_snapshot_add_inflight(s, &in);
}

ls_err_t ls_snapshot_add_inflight_parts(ls_snapshot_t *s, const ls_inflight_parts_t *p) {
  LS_RETURN_IF(s == NULL || p == NULL, LS_ERR_INVALID_ARG, "snapshot or series is NULL");
  LS_RETURN_IF(p->n_windows < 0 || (p->n_windows > 0 && p->windows == NULL) || p->held.rows < 0,
               LS_ERR_INVALID_ARG, "a series in flight of %d windows (%s) and %d rows of its own",
               p->n_windows, p->windows == NULL ? "NULL" : "given", p->held.rows);
  if (p->n_windows == 0) return ls_snapshot_add_inflight(s, &p->held);
  LS_RETURN_IF(s->in_F == 0, LS_ERR_STATE,
               "no features set for records in flight (ls_snapshot_set_inflight_features)");
  for (int i = 0; i < p->n_windows; i++) {
    const ls_inflight_window_t *const w = &p->windows[i];
    LS_RETURN_IF(w->seq < 0 || w->rows < 1 || w->offsets == NULL || w->times == NULL ||
                     w->x == NULL,
                 LS_ERR_INVALID_ARG,
                 "window %d of a series in flight: seq %lld, %d rows (a window has a seq >= 0 "
                 "and rows >= 1 and their arrays)",
                 i, (long long)w->seq, w->rows);
  }
  if (s->book == NULL) return keep_together(s, p);
  /* (the filling thread posts the writer's jobs: idle now, idle till done) */
  LS_RETURN_IF(__atomic_load_n(&s->book->writing, __ATOMIC_ACQUIRE), LS_ERR_STATE,
               "the snapshot writer is writing: fill it while idle (ls_snapshotter_poll)");
  if (s->book_gen < 0) s->book_gen = s->book->generation;
  LS_RETURN_IF(s->book_gen != s->book->generation, LS_ERR_STATE,
               "the snapshot writer wrote while its staging snapshot was filled (fill it while "
               "the writer is idle: ls_snapshotter_poll)");
  size_t const W = s->in_windows, n = (size_t)p->n_windows;
  LS_FORWARD_IF_ERROR(snap_reserve_refs(s, W + n));
  for (size_t i = 0; i < n; i++)
    LS_FORWARD_IF_ERROR(
        keep_window(s, p->held.partition, &p->windows[i], s->in_refs + (W + i) * SNAP_REF));
  LS_FORWARD_IF_ERROR(snap_add_series_inflight(s, &p->held, n));
  s->in_windows = W + n;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Writing (the writer's thread)                                             */

ls_err_t snap_segments_put(snap_encoder_t *enc, ls_snapshot_t *s, const char *dir,
                           const char *tmp) {
  LS_RETURN_IF(s->book == NULL, LS_ERR_STATE,
               "a snapshot holding windows by reference is its writer's to write");
  LS_RETURN_IF(s->book_gen != s->book->generation, LS_ERR_STATE,
               "the snapshot's windows by reference were kept before its writer's last write");
  char segdir[PATH_MAX], name[64], path[PATH_MAX], to[PATH_MAX];
  LS_FORWARD_IF_ERROR(join(segdir, dir, SEG_DIR));
  LS_FORWARD_IF_ERROR(snap_make_dirs(segdir));
  int const rank = (int)s->info.rank;
  if (s->new_seg >= 0) { /* written whole under a temporary name, then renamed */
    snap_segment_t const *const n = &s->newseg;
    snap_seg_entry_t e = {n->writer, n->number, n->n, 0, 0};
    char part[96];
    snap_segment_name(name, rank, e.writer, e.number);
    snprintf(part, sizeof part, ".%s.tmp", name);
    LS_FORWARD_IF_ERROR(join(path, segdir, part));
    LS_FORWARD_IF_ERROR(join(to, segdir, name));
    LS_FORWARD_IF_ERROR(
        snap_write_segment_file(enc, n, s->info.step, s->info.world, rank, path, &e.size, &e.crc));
    if (rename(path, to) != 0) {
      ls_err_t const err =
          ls_error_set(LS_ERR_IO, "%s: cannot rename to %s: %s", path, to, strerror(errno));
      unlink(path);
      return err;
    }
    LS_FORWARD_IF_ERROR(snap_fsync_dir(segdir));
    snap_entry_put(s->segs, (size_t)s->new_seg, &e);
    LS_FORWARD_IF_ERROR(book_enter(s->book, n, &e));
    s->book_gen = s->book->generation;
  }
  for (size_t g = 0; g < s->n_segs; g++) {
    snap_seg_entry_t const e = snap_entry_get(s->segs, g);
    snap_segment_name(name, rank, e.writer, e.number);
    LS_FORWARD_IF_ERROR(join(path, segdir, name));
    LS_FORWARD_IF_ERROR(join(to, tmp, name));
    LS_FORWARD_IF_ERROR(snap_link_file(path, to));
  }
  return LS_OK;
}

/* Parses a segment file's name: its rank and writer; 0 if it is none
 * (`tmp`: the name of one being written, .NAME.tmp). */
static int parse_name(const char *name, int *rank, uint64_t *writer, int *tmp) {
  char rest[16] = "";
  unsigned long long w = 0, number = 0;
  int r = -1;
  *tmp = name[0] == '.';
  if (sscanf(name + *tmp, "seg-r%d-%16llx-%12llu%15s", &r, &w, &number, rest) < 3) return 0;
  if (r < 0 || strcmp(rest, *tmp ? ".tmp" : "") != 0) return 0;
  *rank = r, *writer = (uint64_t)w;
  return 1;
}

/* Deletes the segments earlier runs left in segdir: rank's of other
 * writers, and (rank 0) those of ranks the run does not have. */
static ls_err_t sweep_stale(const snap_book_t *b, const char *segdir, int rank, int world) {
  DIR *const d = opendir(segdir);
  if (d == NULL && errno == ENOENT) return LS_OK;
  LS_RETURN_IF(d == NULL, LS_ERR_IO, "%s: cannot list: %s", segdir, strerror(errno));
  ls_err_t err = LS_OK;
  for (struct dirent *e; err == LS_OK && (e = readdir(d)) != NULL;) {
    int r = 0, tmp = 0;
    uint64_t writer = 0;
    if (!parse_name(e->d_name, &r, &writer, &tmp)) continue;
    int const stale = (r == rank && (writer != b->writer || tmp)) || (rank == 0 && r >= world);
    if (stale && unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT)
      err = ls_error_set(LS_ERR_IO, "%s/%s: cannot delete: %s", segdir, e->d_name, strerror(errno));
  }
  closedir(d);
  return err;
}

ls_err_t snap_segments_sweep(snap_book_t *b, const ls_snapshot_t *s, const char *dir) {
  char segdir[PATH_MAX], name[64], path[PATH_MAX];
  LS_FORWARD_IF_ERROR(join(segdir, dir, SEG_DIR));
  int const rank = (int)s->info.rank;
  if (!b->swept) {
    LS_FORWARD_IF_ERROR(sweep_stale(b, segdir, rank, (int)s->info.world));
    b->swept = 1;
  }
  for (size_t i = b->n_segs; i-- > 0;) {
    snap_seg_entry_t const e = snap_entry_get(b->segs, i);
    int kept = 0;
    for (size_t g = 0; g < s->n_segs && !kept; g++)
      kept = snap_entry_get(s->segs, g).number == e.number;
    if (kept) continue;
    snap_segment_name(name, rank, e.writer, e.number);
    LS_FORWARD_IF_ERROR(join(path, segdir, name));
    LS_RETURN_IF(unlink(path) != 0 && errno != ENOENT, LS_ERR_IO, "%s: cannot delete: %s", path,
                 strerror(errno));
    book_drop(b, e.number);
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

/* A window's place for sorting: (partition, seq), its index. */
typedef struct seg_key_s {
  int64_t partition, seq;
  size_t i;
} seg_key_t;

static int by_partition_seq(const void *a, const void *b) {
  const seg_key_t *const x = a, *const y = b;
  if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Checks a decoded segment's windows, sets their first rows and orders
 * them by (partition, seq). */
static ls_err_t index_segment(const snap_file_t *f, snap_segment_t *g) {
  size_t row = 0;
  for (size_t k = 0; k < g->n; k++) {
    const int64_t *const w = g->win + k * SNAP_SEG_WIN;
    if (w[0] < 0 || w[0] > INT32_MAX || w[1] < 0 || w[2] < 1 || (uint64_t)w[2] > g->rows - row)
      return CORRUPT("%s: segment_windows: window %zu is seq %lld of partition %lld with %lld "
                     "rows (%zu left)",
                     f->name, k, (long long)w[1], (long long)w[0], (long long)w[2], g->rows - row);
    g->row_at[k] = row;
    for (int64_t r = 1; r < w[2]; r++)
      if (g->offsets[row + (size_t)r] <= g->offsets[row + (size_t)r - 1])
        return CORRUPT("%s: segment_rows: window %zu's offsets do not ascend", f->name, k);
    row += (size_t)w[2];
  }
  if (row != g->rows)
    return CORRUPT("%s: segment_rows: %zu rows after the last window", f->name, g->rows - row);
  seg_key_t *const keys = malloc((g->n ? g->n : 1) * sizeof *keys);
  LS_RETURN_IF(keys == NULL, LS_ERR_NOMEM, "no memory to index %zu windows", g->n);
  for (size_t k = 0; k < g->n; k++)
    keys[k] = (seg_key_t){g->win[k * SNAP_SEG_WIN], g->win[k * SNAP_SEG_WIN + 1], k};
  qsort(keys, g->n, sizeof *keys, by_partition_seq);
  ls_err_t err = LS_OK;
  for (size_t k = 0; k < g->n; k++) {
    g->order[k] = keys[k].i;
    if (k > 0 && by_partition_seq(&keys[k - 1], &keys[k]) == 0 && err == LS_OK)
      err = CORRUPT("%s: segment_windows: window %lld of partition %lld twice", f->name,
                    (long long)keys[k].seq, (long long)keys[k].partition);
  }
  free(keys);
  return err;
}

ls_err_t snap_decode_segment(const snap_file_t *f, snap_segment_t *g) {
  *g = (snap_segment_t){0};
  int const ns = f->desc.n_sections;
  if ((ns != 3 && ns != 4) || f->ids[0] != SNAP_SEGMENT || f->ids[1] != SNAP_SEGMENT_WINDOWS ||
      f->ids[2] != SNAP_SEGMENT_ROWS || (ns == 4 && f->ids[3] != SNAP_SEGMENT_MODEL) ||
      f->desc.sections[0].raw != SNAP_SEG_META_BYTES)
    return CORRUPT("%s: not a segment's sections (%d of them)", f->name, ns);
  uint8_t meta[SNAP_SEG_META_BYTES];
  snap_section_spans_t const ms = {SNAP_SEGMENT, 1, {{meta, sizeof meta, 0}}};
  int const at[4] = {0, 1, 2, 3};
  ls_err_t err = snap_decode_sections(f, at, &ms, 1);
  uint32_t const F = snap_get_u32(meta);
  uint32_t const X = snap_get_u32(f->data + 8) < 7 ? 0 : snap_get_u32(meta + 4); /* (reserved) */
  uint64_t const n = snap_get_u64(meta + 8), R = snap_get_u64(meta + 16);
  uint64_t const M = ns == 4 && X > 0 ? f->desc.sections[3].raw / (8 * (uint64_t)X) : 0;
  if (err == LS_OK &&
      ((F < 1 && n + R > 0) || F > (1u << 16) || n > (1ull << 40) || R > (1ull << 40) || R < n ||
       f->desc.sections[1].raw != n * SNAP_SEG_WIN * 8 ||
       f->desc.sections[2].raw != R * (16 + 4 * (uint64_t)F) || X > (1u << 24) ||
       (ns == 4) != (X > 0) || (ns == 4 && f->desc.sections[3].raw != M * 8 * X)))
    err = CORRUPT("%s: segment: %llu windows of %llu rows of %u features, model rows of %u "
                  "doubles do not fit its sections",
                  f->name, (unsigned long long)n, (unsigned long long)R, F, X);
  if (err == LS_OK) {
    *g = (snap_segment_t){.F = (int)F,
                          .writer = snap_get_u64(meta + 24),
                          .number = snap_get_u64(meta + 32),
                          .n = (size_t)n,
                          .cap = (size_t)n,
                          .rows = (size_t)R,
                          .cap_rows = (size_t)R,
                          .X = X,
                          .m = (size_t)M,
                          .cap_m = (size_t)(M * X)};
    g->win = malloc(n ? n * SNAP_SEG_WIN * 8 : 1);
    g->row_at = malloc(n ? n * sizeof *g->row_at : 1);
    g->order = malloc(n ? n * sizeof *g->order : 1);
    g->offsets = malloc(R ? R * 8 : 1);
    g->times = malloc(R ? R * 8 : 1);
    g->x = malloc(R > 0 && F > 0 ? R * F * 4 : 1);
    g->model = malloc(M ? M * X * 8 : 1);
    if (!g->win || !g->row_at || !g->order || !g->offsets || !g->times || !g->x || !g->model)
      err =
          ls_error_set(LS_ERR_NOMEM, "no memory for a segment of %llu rows", (unsigned long long)R);
  }
  snap_section_spans_t const secs[3] = {
      {SNAP_SEGMENT_WINDOWS, 1, {{g->win, g->n * SNAP_SEG_WIN * 8, 0}}},
      {SNAP_SEGMENT_ROWS,
       3,
       {{g->offsets, g->rows * 8, 0}, {g->times, g->rows * 8, 0}, {g->x, g->rows * F * 4, 1}}},
      {SNAP_SEGMENT_MODEL, 1, {{g->model, g->m * g->X * 8, 0}}}};
  if (err == LS_OK) err = snap_decode_sections(f, at + 1, secs, ns - 1);
  if (err == LS_OK) err = index_segment(f, g);
  if (err != LS_OK) snap_segment_free(g);
  return err;
}

/* Reads and checks segment file g of a shard's segments (entries segs) in
 * dir, written by `rank`: intact, the one listed (size, checksum, name);
 * decoded into *out when out is not NULL. */
static ls_err_t read_segment(const uint8_t *segs, size_t g, const char *dir, int rank,
                             snap_segment_t *out) {
  snap_seg_entry_t const e = snap_entry_get(segs, g);
  char name[64], path[PATH_MAX];
  snap_segment_name(name, rank, e.writer, e.number);
  LS_FORWARD_IF_ERROR(join(path, dir, name));
  uint8_t *data = NULL;
  size_t size = 0;
  LS_FORWARD_IF_ERROR(snap_read_file(path, &data, &size));
  snap_limits_t const lim = {0};
  snap_file_t f;
  ls_err_t err = snap_file_parse(data, size, path, SNAP_KIND_SEGMENT, &lim, &f);
  if (err == LS_OK && (f.desc.size != e.size || f.desc.crc != e.crc || f.rank != rank))
    err = CORRUPT("%s: not the segment the shard lists (%llu bytes, checksum %08x, rank %d; "
                  "listed %llu bytes, %08x, rank %d)",
                  path, (unsigned long long)f.desc.size, f.desc.crc, (int)f.rank,
                  (unsigned long long)e.size, e.crc, rank);
  if (err == LS_OK && out != NULL) err = snap_decode_segment(&f, out);
  if (err == LS_OK && out != NULL &&
      (out->writer != e.writer || out->number != e.number || out->n != e.windows))
    err = CORRUPT("%s: holds %zu windows of segment %" PRIu64 " of writer %016" PRIx64
                  ", listed as %" PRIu64 " windows of segment %" PRIu64 " of %016" PRIx64,
                  path, out->n, out->number, out->writer, e.windows, e.number, e.writer);
  free(data);
  return err;
}

ls_err_t snap_segments_check(const snap_file_t *f, const char *dir) {
  uint8_t *segs = NULL;
  size_t n = 0;
  LS_FORWARD_IF_ERROR(snap_decode_segment_list(f, &segs, &n));
  ls_err_t err = LS_OK;
  for (size_t g = 0; g < n && err == LS_OK; g++)
    err = read_segment(segs, g, dir, (int)f->rank, NULL);
  free(segs);
  return err;
}

/* Puts s's series in flight back together from the segments segs [G]:
 * with the by-reference form moved into `old`, each series' windows'
 * rows then its own into s. */
static ls_err_t put_together(ls_snapshot_t *s, const ls_snapshot_t *old, const snap_segment_t *segs,
                             const char *name) {
  size_t ref = 0;
  base_rows_t *const r = &s->gather;
  for (size_t i = 0; i < old->in_series; i++) {
    const int64_t *const m = old->in_meta + i * SNAP_IN_META;
    r->n = 0;
    for (int64_t k = 0; k < old->in_wins[i]; k++, ref++) {
      int64_t const g = old->in_refs[ref * SNAP_REF], seq = old->in_refs[ref * SNAP_REF + 1];
      const snap_segment_t *const seg = &segs[g];
      int64_t const at = snap_segment_find(seg, m[0], seq);
      if (at < 0)
        return CORRUPT("%s: inflight_windows: segment %" PRIu64 " holds no window %lld of "
                       "partition %lld",
                       name, seg->number, (long long)seq, (long long)m[0]);
      const int64_t *const w = seg->win + at * SNAP_SEG_WIN;
      size_t const row = seg->row_at[at];
      LS_FORWARD_IF_ERROR(base_rows_append(r, seg->offsets + row, seg->times + row,
                                           seg->x + row * (size_t)seg->F, (size_t)w[2]));
    }
    size_t const row = old->in_row_at[i];
    LS_FORWARD_IF_ERROR(base_rows_append(r, old->in_offsets + row, old->in_times + row,
                                         old->in_x + row * (size_t)old->in_F, (size_t)m[4]));
    LS_RETURN_IF(r->n > INT32_MAX, LS_ERR_CORRUPT, "%s: a series in flight of %zu rows", name,
                 r->n);
    ls_inflight_t const in = {old->in_keys + old->in_key_off[i],
                              old->in_key_len[i],
                              (int32_t)m[0],
                              m[1],
                              m[2],
                              (int)m[3],
                              (int)r->n,
                              r->offsets,
                              r->times,
                              r->x,
                              0}; /* evicted: s's section holds it, series i is i again */
    LS_FORWARD_IF_ERROR(snap_add_series_inflight(s, &in, 0));
  }
  return LS_OK;
}

/* The series' model state by reference: each series' segment one of the
 * G the shard lists (before any is read); then, segment g read, the rows
 * of the series it holds copied into smodel and its rows freed, so that
 * no more than one segment's rows are in memory beside the series'. */
static ls_err_t check_model_refs(const ls_snapshot_t *s, size_t G, const char *name) {
  for (size_t i = 0; s->model_refs && i < s->series; i++)
    if (s->mrefs[2 * i] < 0 || (uint64_t)s->mrefs[2 * i] >= G)
      return CORRUPT("%s: series_model_refs: series %zu's model state is in segment %lld of %zu",
                     name, i, (long long)s->mrefs[2 * i], G);
  return LS_OK;
}

static ls_err_t resolve_model(ls_snapshot_t *s, snap_segment_t *seg, size_t g, const char *name) {
  size_t const X = s->model_X;
  for (size_t i = 0; s->model_refs && i < s->series; i++) {
    int64_t const r = s->mrefs[2 * i + 1];
    if ((uint64_t)s->mrefs[2 * i] != g) continue;
    if (seg->X != X || r < 0 || (uint64_t)r >= seg->m)
      return CORRUPT("%s: series_model_refs: series %zu's model state is row %lld of segment "
                     "%" PRIu64 ", which %s",
                     name, i, (long long)r, seg->number,
                     seg->X != X ? "holds rows of another width" : "it does not hold");
    memcpy(s->smodel + i * X, seg->model + (size_t)r * X, X * sizeof(double));
  }
  free(seg->model), seg->model = NULL, seg->m = seg->cap_m = 0;
  return LS_OK;
}

ls_err_t snap_segments_resolve(ls_snapshot_t *s, const char *dir, int rank) {
  if (s->in_windows == 0 && s->n_segs == 0) return LS_OK;
  const char *const name = dir;
  snap_segment_t *const segs = calloc(s->n_segs ? s->n_segs : 1, sizeof *segs);
  LS_RETURN_IF(segs == NULL, LS_ERR_NOMEM, "no memory for %zu segments", s->n_segs);
  ls_err_t err = check_model_refs(s, s->n_segs, name);
  size_t read = 0;
  for (; read < s->n_segs && err == LS_OK; read++) {
    err = read_segment(s->segs, read, dir, rank, &segs[read]);
    if (err == LS_OK) err = resolve_model(s, &segs[read], read, name);
  }
  for (size_t g = 0; g < read && err == LS_OK; g++)
    if (segs[g].F != s->in_F && segs[g].n > 0)
      err = CORRUPT("%s: segment %" PRIu64 " holds rows of %d features, the shard's of %d", name,
                    segs[g].number, segs[g].F, s->in_F);
  if (err == LS_OK) s->model_refs = 0; /* (resolved) */
  /* The by-reference form moves aside; s's in-flight arrays start empty. */
  ls_snapshot_t old = {0};
  if (err == LS_OK) {
    old.in_F = s->in_F, old.in_series = s->in_series;
    old.in_key_len = s->in_key_len, old.in_key_off = s->in_key_off, old.in_keys = s->in_keys;
    old.in_meta = s->in_meta, old.in_row_at = s->in_row_at, old.in_wins = s->in_wins;
    old.in_offsets = s->in_offsets, old.in_times = s->in_times, old.in_x = s->in_x;
    old.in_refs = s->in_refs;
    s->in_key_len = NULL, s->in_key_off = NULL, s->in_keys = NULL, s->in_meta = NULL;
    s->in_row_at = NULL, s->in_wins = NULL, s->in_offsets = s->in_times = NULL, s->in_x = NULL;
    s->in_refs = NULL;
    s->cap_in_series = s->cap_in_keys = s->cap_in_rows = s->cap_in_windows = 0;
    s->in_series = s->in_key_bytes = s->in_rows = s->in_windows = 0;
    s->n_segs = 0;
    err = snap_reserve_inflight(s, old.in_series, 0, 0);
    if (err == LS_OK) err = put_together(s, &old, segs, name);
    snap_free_inflight(&old);
    free(old.in_refs);
  }
  for (size_t g = 0; g < read; g++)
    snap_segment_free(&segs[g]);
  free(segs);
  return err == LS_OK ? snap_index_inflight(s, name) : err;
}
