/*
 * Rows gathered from parts that may share rows (base/rows.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/rows.h"

/* Room for `need` rows, growing by doubling. */
static ls_err_t reserve(base_rows_t *r, size_t need) {
  if (need <= r->cap && r->offsets != NULL) return LS_OK;
  size_t cap = r->cap ? r->cap : 64;
  while (cap < need)
    cap *= 2;
  size_t const F = (size_t)r->F;
  LS_RETURN_IF(F == 0 || cap > SIZE_MAX / (F * sizeof(float) + 2 * sizeof(int64_t)), LS_ERR_NOMEM,
               "%zu rows of %zu floats do not fit in memory", cap, F);
  int64_t *const o = realloc(r->offsets, cap * sizeof *o);
  if (o != NULL) r->offsets = o;
  int64_t *const t = realloc(r->times, cap * sizeof *t);
  if (t != NULL) r->times = t;
  float *const x = realloc(r->x, cap * F * sizeof *x);
  if (x != NULL) r->x = x;
  LS_RETURN_IF(o == NULL || t == NULL || x == NULL, LS_ERR_NOMEM, "no memory for %zu rows", cap);
  r->cap = cap;
  return LS_OK;
}

ls_err_t base_rows_append(base_rows_t *r, const int64_t *offsets, const int64_t *times,
                          const float *x, size_t n) {
  LS_FORWARD_IF_ERROR(reserve(r, r->n + n));
  size_t const F = (size_t)r->F;
  for (size_t i = 0; i < n; i++) {
    if (r->n > 0 && offsets[i] <= r->offsets[r->n - 1]) continue; /* held already */
    r->offsets[r->n] = offsets[i], r->times[r->n] = times[i];
    memcpy(r->x + r->n * F, x + i * F, F * sizeof(float));
    r->n++;
  }
  return LS_OK;
}

void base_rows_free(base_rows_t *r) {
  free(r->offsets), free(r->times), free(r->x);
  *r = (base_rows_t){.F = r->F};
}
