/*
 * Replay of recent windows, one memory per partition (train/replay.h).
 */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include "base/digest.h"

/* The fewest windows a partition keeps. */
#define MIN_CAP 16

/* One partition's memory: a ring of cap entries, the newest `filled`. */
typedef struct memory_s {
  int32_t partition;
  int64_t filled, next;
  float *e; /* [cap, E] */
} memory_t;

struct replay_s {
  int T, I, O, M, L, H; /* M: a mask row's width */
  size_t cap, E;        /* entries per partition, floats per entry */
  int take;             /* windows per partition and update */
  int P;
  memory_t *mem;       /* [P] */
  int *pick;           /* [cap] scratch of the draws */
  float *x, *y, *mask; /* [T, rows, I], [T, rows, O], [T, rows, M] */
  float *h0, *c0;      /* [L, rows, H] */
  int rows, n;         /* the most rows, the gathered rows */
};

/* An entry's parts, in order: x [T, I], y [T, O], mask [T, M], h0 [L, H], c0 [L, H]. */
static size_t entry_floats(int T, int I, int O, int M, int L, int H) {
  return (size_t)T * (size_t)(I + O + M) + 2 * (size_t)L * (size_t)H;
}

ls_err_t replay_new(int memory, int batch, int P_all, const int32_t *parts, int P, int T, int I,
                    int O, int M, int L, int H, replay_t **out) {
  *out = NULL;
  replay_t *const r = calloc(1, sizeof *r);
  LS_RETURN_IF(r == NULL, LS_ERR_NOMEM, "no memory for the replay memory");
  r->T = T, r->I = I, r->O = O, r->M = M, r->L = L, r->H = H, r->P = P;
  r->cap = (size_t)(memory / P_all > MIN_CAP ? memory / P_all : MIN_CAP);
  r->take = batch / P_all > 1 ? batch / P_all : 1;
  r->take = (size_t)r->take > r->cap ? (int)r->cap : r->take;
  r->E = entry_floats(T, I, O, M, L, H);
  r->rows = r->take * (P > 0 ? P : 1);
  size_t const rows = (size_t)r->rows, TR = (size_t)T * rows;
  r->mem = calloc(P > 0 ? (size_t)P : 1, sizeof *r->mem);
  r->pick = malloc(r->cap * sizeof *r->pick);
  r->x = malloc(TR * (size_t)I * sizeof *r->x), r->y = malloc(TR * (size_t)O * sizeof *r->y);
  r->mask = malloc(TR * (size_t)M * sizeof *r->mask);
  r->h0 = malloc((size_t)L * rows * (size_t)H * sizeof *r->h0);
  r->c0 = malloc((size_t)L * rows * (size_t)H * sizeof *r->c0);
  ls_err_t err = r->mem && r->pick && r->x && r->y && r->mask && r->h0 && r->c0
                     ? LS_OK
                     : ls_error_set(LS_ERR_NOMEM, "no memory for replay buffers of %zu rows", rows);
  for (int i = 0; i < P && err == LS_OK; i++) {
    r->mem[i].partition = parts[i];
    r->mem[i].e = calloc(r->cap * r->E, sizeof(float));
    if (r->mem[i].e == NULL)
      err = ls_error_set(LS_ERR_NOMEM, "no memory for a replay memory of %zu windows", r->cap);
  }
  if (err != LS_OK) {
    replay_free(r);
    return err;
  }
  *out = r;
  return LS_OK;
}

void replay_free(replay_t *r) {
  if (r == NULL) return;
  for (int i = 0; r->mem != NULL && i < r->P; i++)
    free(r->mem[i].e);
  free(r->mem), free(r->pick), free(r->x), free(r->y), free(r->mask), free(r->h0), free(r->c0);
  free(r);
}

int replay_rows(const replay_t *r) {
  return r->rows;
}

/* This rank's memory of partition p, or NULL. */
static memory_t *memory_of(replay_t *r, int32_t p) {
  int lo = 0, hi = r->P; /* parts ascending */
  while (lo < hi) {
    int const mid = (lo + hi) / 2;
    if (r->mem[mid].partition < p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < r->P && r->mem[lo].partition == p ? &r->mem[lo] : NULL;
}

/* Copies rows of `width` floats between a window's [T, width] and a
 * batch's [T, n, width] at row b (to_batch: window -> batch). */
static void rows_copy(float *win, float *batch, int T, int n, int b, int width, int to_batch) {
  for (int t = 0; t < T; t++) {
    float *const w = win + (size_t)t * width, *const s = batch + ((size_t)t * n + b) * width;
    memcpy(to_batch ? s : w, to_batch ? w : s, (size_t)width * sizeof(float));
  }
}

/* Window b of a batch of n rows <-> entry e (to_batch: entry -> batch);
 * x, y, mask [T, n, ...], h0, c0 [L, n, H]. */
static void entry_copy(const replay_t *r, float *e, float *x, float *y, float *mask, float *h0,
                       float *c0, int n, int b, int to_batch) {
  int const T = r->T, I = r->I, O = r->O, M = r->M, H = r->H;
  rows_copy(e, x, T, n, b, I, to_batch);
  rows_copy(e + (size_t)T * I, y, T, n, b, O, to_batch);
  rows_copy(e + (size_t)T * (I + O), mask, T, n, b, M, to_batch);
  rows_copy(e + (size_t)T * (I + O + M), h0, r->L, n, b, H, to_batch);
  rows_copy(e + (size_t)T * (I + O + M) + (size_t)r->L * H, c0, r->L, n, b, H, to_batch);
}

ls_err_t replay_push(replay_t *r, int32_t partition, const prep_t *p, int b, const float *h0,
                     const float *c0) {
  memory_t *const m = memory_of(r, partition);
  if (m == NULL) return LS_OK; /* added to the topic live: it has a memory from the next start */
  float *const e = m->e + (size_t)m->next * r->E;
  int width = 1;
  const float *const mask = prep_train_mask(p, &width);
  LS_RETURN_IF(width != r->M, LS_ERR_INVALID_ARG, "replay_push: mask rows of %d, the memory's %d",
               width, r->M);
  entry_copy(r, e, p->x, (float *)prep_train_y(p), (float *)mask, (float *)h0, (float *)c0, p->B, b,
             0);
  m->next = (m->next + 1) % (int64_t)r->cap;
  m->filled += m->filled < (int64_t)r->cap;
  return LS_OK;
}

/* A draw in [0, n) from the generator state s (splitmix64 steps). */
static int draw(uint64_t *s, int n) {
  uint64_t const z = base_mix64((*s)++);
  return (int)((z >> 11) % (uint64_t)n);
}

void replay_gather(replay_t *r, uint64_t seed, int64_t step, int round, int *n) {
  /* The rows first, then their data at stride n. */
  int total = 0;
  for (int i = 0; i < r->P; i++)
    total += r->mem[i].filled < r->take ? (int)r->mem[i].filled : r->take;
  r->n = *n = total;
  int row = 0;
  for (int i = 0; i < r->P && total > 0; i++) {
    memory_t *const m = &r->mem[i];
    int const k = m->filled < r->take ? (int)m->filled : r->take;
    /* k distinct entries: a partial Fisher-Yates shuffle, seeded by (seed,
     * step, partition, round) alone. */
    uint64_t s = base_mix64(base_mix64(base_mix64(seed ^ (uint64_t)step) ^ (uint64_t)m->partition) ^
                            (uint64_t)round);
    for (int j = 0; j < (int)m->filled; j++)
      r->pick[j] = j;
    for (int j = 0; j < k; j++, row++) {
      int const at = j + draw(&s, (int)m->filled - j), e = r->pick[at];
      r->pick[at] = r->pick[j], r->pick[j] = e;
      entry_copy(r, m->e + (size_t)e * r->E, r->x, r->y, r->mask, r->h0, r->c0, total, row, 1);
    }
  }
}

const float *replay_x(const replay_t *r) {
  return r->x;
}
const float *replay_y(const replay_t *r) {
  return r->y;
}
const float *replay_mask(const replay_t *r, int *width) {
  *width = r->M;
  return r->mask;
}
const float *replay_h0(const replay_t *r) {
  return r->h0;
}
const float *replay_c0(const replay_t *r) {
  return r->c0;
}

void replay_shape(const replay_t *r, size_t *cap, size_t *entry) {
  *cap = r->cap;
  *entry = r->E;
}

ls_err_t replay_save(const replay_t *r, ls_snapshot_t *snap) {
  for (int i = 0; i < r->P; i++)
    LS_FORWARD_IF_ERROR(
        ls_snapshot_set_memory(snap, (size_t)i, r->mem[i].filled, r->mem[i].next, r->mem[i].e));
  return LS_OK;
}

ls_err_t replay_load(replay_t *r, const ls_snapshot_t *snap, int *cut) {
  size_t cap = 0, entry = 0;
  ls_snapshot_memory_shape(snap, &cap, &entry);
  *cut = 0;
  LS_RETURN_IF(entry != r->E || cap == 0, LS_ERR_INVALID_ARG,
               "the snapshot's replay memories hold windows of %zu floats, this run's %zu: "
               "resume with the same window, model and targets, or --resume none",
               entry, r->E);
  for (size_t i = 0; i < ls_snapshot_partition_count(snap); i++) {
    int32_t p = -1;
    int64_t offset = 0, filled = 0, next = 0;
    const float *e = NULL;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_partition(snap, i, &p, &offset));
    LS_FORWARD_IF_ERROR(ls_snapshot_get_memory(snap, i, &filled, &next, &e));
    memory_t *const m = memory_of(r, p);
    if (m == NULL) continue;
    if (cap == r->cap) {
      m->filled = filled, m->next = next;
      memcpy(m->e, e, r->cap * r->E * sizeof(float));
      continue;
    }
    /* Another number of partitions shares replay_memory out (the topic
     * gained some): the newest windows that fit, oldest first. */
    int64_t const keep = filled < (int64_t)r->cap ? filled : (int64_t)r->cap;
    for (int64_t k = 0; k < keep; k++) {
      size_t const from = (size_t)((next - keep + k) % (int64_t)cap + (int64_t)cap) % cap;
      memcpy(m->e + (size_t)k * r->E, e + from * r->E, r->E * sizeof(float));
    }
    m->filled = keep, m->next = keep % (int64_t)r->cap;
    *cut = 1;
  }
  return LS_OK;
}
