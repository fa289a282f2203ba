/*
 * Series-state tables (include/lstream/kernels.h, "Series-state tables in
 * device memory"): (h, c) per series slot in the engine's memory, and the
 * gather and scatter of a batch's states.
 */
#include <stdlib.h>

#include "engine_internal.h"

struct ls_state_table_s {
  ls_engine_t *eng;
  size_t slots; /* S */
  float *h;     /* (S, L, H) */
  float *c;     /* (S, L, H) */
};

/* ------------------------------------------------------------------------ */
/* Series-state tables                                                       */

static size_t row_floats(const ls_engine_t *e) {
  return (size_t)e->conf.shape.num_layers * (size_t)e->conf.shape.hidden_size;
}

ls_err_t ls_state_table_new(ls_engine_t *e, size_t slots, ls_state_table_t **out) {
  LS_RETURN_IF(e == NULL || out == NULL, LS_ERR_INVALID_ARG, "engine or out is NULL");
  *out = NULL;
  LS_RETURN_IF(slots == 0, LS_ERR_INVALID_ARG, "a state table needs at least one slot");
  LS_RETURN_IF(slots > SIZE_MAX / 2 / sizeof(float) / row_floats(e), LS_ERR_INVALID_ARG,
               "%zu slots do not fit in memory", slots);
  ls_state_table_t *t = calloc(1, sizeof *t);
  LS_RETURN_IF(t == NULL, LS_ERR_NOMEM, "no memory for a state table");
  t->eng = e;
  t->slots = slots;
  ls_err_t err = engine_alloc(e, &t->h, slots * row_floats(e));
  if (err == LS_OK) err = engine_alloc(e, &t->c, slots * row_floats(e));
  if (err != LS_OK) {
    ls_state_table_destroy(t);
    return err;
  }
  *out = t;
  return LS_OK;
}

void ls_state_table_destroy(ls_state_table_t *t) {
  if (t == NULL) return;
  if (t->h != NULL) t->eng->ops->free(t->eng->ctx, t->h);
  if (t->c != NULL) t->eng->ops->free(t->eng->ctx, t->c);
  free(t);
}

size_t ls_state_table_slots(const ls_state_table_t *t) {
  return t == NULL ? 0 : t->slots;
}

ls_err_t ls_state_table_grow(ls_state_table_t *t, size_t slots) {
  LS_RETURN_IF(t == NULL, LS_ERR_INVALID_ARG, "state table is NULL");
  if (slots <= t->slots) return LS_OK;
  ls_engine_t *const e = t->eng;
  LS_RETURN_IF(slots > SIZE_MAX / 2 / sizeof(float) / row_floats(e), LS_ERR_INVALID_ARG,
               "%zu slots do not fit in memory", slots);
  float *h = NULL, *c = NULL;
  size_t const old_bytes = t->slots * row_floats(e) * sizeof(float);
  ls_err_t err = engine_alloc(e, &h, slots * row_floats(e));
  if (err == LS_OK) err = engine_alloc(e, &c, slots * row_floats(e));
  if (err == LS_OK) err = e->ops->copy(e->ctx, h, t->h, old_bytes);
  if (err == LS_OK) err = e->ops->copy(e->ctx, c, t->c, old_bytes);
  if (err != LS_OK) { /* the table keeps its old rows */
    if (h != NULL) e->ops->free(e->ctx, h);
    if (c != NULL) e->ops->free(e->ctx, c);
    return err;
  }
  e->ops->free(e->ctx, t->h);
  e->ops->free(e->ctx, t->c);
  t->h = h;
  t->c = c;
  t->slots = slots;
  return LS_OK;
}

static ls_err_t check_rows(const ls_state_table_t *t, size_t first, size_t n, const void *h,
                           const void *c) {
  LS_RETURN_IF(t == NULL || h == NULL || c == NULL, LS_ERR_INVALID_ARG,
               "state table, h or c is NULL");
  LS_RETURN_IF(n == 0 || first >= t->slots || n > t->slots - first, LS_ERR_INVALID_ARG,
               "rows [%zu, %zu + %zu) are outside the table's %zu slots", first, first, n,
               t->slots);
  return LS_OK;
}

ls_err_t ls_state_table_read(ls_state_table_t *t, size_t first, size_t n, float *h, float *c) {
  LS_FORWARD_IF_ERROR(check_rows(t, first, n, h, c));
  ls_engine_t *const e = t->eng;
  size_t const off = first * row_floats(e), bytes = n * row_floats(e) * sizeof(float);
  LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, h, t->h + off, bytes));
  return e->ops->download(e->ctx, c, t->c + off, bytes);
}

ls_err_t ls_state_table_write(ls_state_table_t *t, size_t first, size_t n, const float *h,
                              const float *c) {
  LS_FORWARD_IF_ERROR(check_rows(t, first, n, h, c));
  ls_engine_t *const e = t->eng;
  size_t const off = first * row_floats(e), bytes = n * row_floats(e) * sizeof(float);
  LS_FORWARD_IF_ERROR(e->ops->upload(e->ctx, t->h + off, h, bytes));
  return e->ops->upload(e->ctx, t->c + off, c, bytes);
}

static int slot_row_cmp(const void *a, const void *b) {
  const slot_row_t *const x = a, *const y = b;
  return x->slot < y->slot ? -1 : x->slot > y->slot ? 1 : x->row - y->row;
}

/* distinct: no slot >= 0 may appear twice (a scatter's rows would race for
 * it on a GPU, and one of them would be lost anyway). */
static ls_err_t check_slots(ls_engine_t *e, const ls_state_table_t *t, int B, const int64_t *slots,
                            int distinct) {
  LS_FORWARD_IF_ERROR(engine_check_batch(e, B));
  LS_RETURN_IF(t == NULL || slots == NULL, LS_ERR_INVALID_ARG, "state table or slots is NULL");
  LS_RETURN_IF(t->eng != e, LS_ERR_INVALID_ARG, "the state table belongs to another engine");
  int n = 0;
  for (int b = 0; b < B; b++) {
    LS_RETURN_IF(slots[b] >= (int64_t)t->slots, LS_ERR_INVALID_ARG,
                 "slot %lld (row %d) is outside the table's %zu slots", (long long)slots[b], b,
                 t->slots);
    if (distinct && slots[b] >= 0) e->scatter_rows[n++] = (slot_row_t){slots[b], b};
  }
  qsort(e->scatter_rows, (size_t)n, sizeof *e->scatter_rows, slot_row_cmp);
  for (int i = 1; i < n; i++)
    LS_RETURN_IF(e->scatter_rows[i].slot == e->scatter_rows[i - 1].slot, LS_ERR_INVALID_ARG,
                 "slot %lld is given to rows %d and %d: a scatter's slots must be distinct (each "
                 "series at most once per step)",
                 (long long)e->scatter_rows[i].slot, e->scatter_rows[i - 1].row,
                 e->scatter_rows[i].row);
  return LS_OK;
}

ls_err_t ls_engine_gather_state(ls_engine_t *e, ls_state_table_t *t, int B, const int64_t *slots) {
  LS_FORWARD_IF_ERROR(check_slots(e, t, B, slots, 0));
  LS_FORWARD_IF_ERROR(e->ops->state_gather(e->ctx, e->hs, e->cs, e->hs_stride, t->h, t->c, slots, B,
                                           e->conf.shape.num_layers, e->conf.shape.hidden_size));
  e->state_B = B;
  e->fwd_T = 0;
  return LS_OK;
}

ls_err_t ls_engine_scatter_state(ls_engine_t *e, ls_state_table_t *t, int B, const int64_t *slots) {
  LS_FORWARD_IF_ERROR(check_slots(e, t, B, slots, 1));
  LS_RETURN_IF(e->fwd_T == 0 || e->fwd_B != B, LS_ERR_STATE,
               "scatter of B=%d rows needs a completed forward of the same batch", B);
  int const L = e->conf.shape.num_layers, H = e->conf.shape.hidden_size;
  size_t const step = (size_t)B * (size_t)H, last = (size_t)e->fwd_T * step;
  if (!e->fwd_partial)
    return e->ops->state_scatter(e->ctx, t->h, t->c, e->hs + last, e->cs + last, e->hs_stride,
                                 slots, B, L, H);
  /* Full rows at once, then each row that ends early from its last valid
   * step (partial windows are rare: a replay's last ones, a live step fired
   * by its deadline). */
  for (int b = 0; b < B; b++)
    e->skip[b] = e->last[b] < e->fwd_T ? -1 : slots[b];
  LS_FORWARD_IF_ERROR(e->ops->state_scatter(e->ctx, t->h, t->c, e->hs + last, e->cs + last,
                                            e->hs_stride, e->skip, B, L, H));
  for (int b = 0; b < B; b++) {
    if (e->last[b] == e->fwd_T || slots[b] < 0) continue;
    size_t const at = (size_t)e->last[b] * step + (size_t)b * H;
    LS_FORWARD_IF_ERROR(e->ops->state_scatter(e->ctx, t->h, t->c, e->hs + at, e->cs + at,
                                              e->hs_stride, slots + b, 1, L, H));
  }
  return LS_OK;
}
