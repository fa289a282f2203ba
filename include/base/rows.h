/*
 * Rows of records gathered from parts that may share rows: a series in
 * flight put together from its windows (a window's last target is the next
 * one's first input) and the rows its windower holds. Each row is a
 * record's offset, event time and F floats; offsets ascend, and a row whose
 * offset is not past the last one gathered is already there.
 */
#ifndef LSTREAM_BASE_ROWS_H
#define LSTREAM_BASE_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "base/api.h"
#include "lstream/error.h"

/* Empty: {.F = F} (the rest zero); n = 0 empties it, keeping its memory. */
typedef struct base_rows_s {
  int F;                    /* floats of a row, >= 1 */
  int64_t *offsets, *times; /* [cap] */
  float *x;                 /* [cap, F] */
  size_t n, cap;            /* rows held, room */
} base_rows_t;

/* Appends rows [n] (offsets [n] ascending, times [n], x [n, F]), leaving
 * out those whose offset is not past the last row held. LS_ERR_NOMEM when
 * memory runs out (the rows held are kept). */
BASE_API ls_err_t base_rows_append(base_rows_t *r, const int64_t *offsets, const int64_t *times,
                                   const float *x, size_t n);

/* Frees the rows' memory; F is kept, the rest zero. */
BASE_API void base_rows_free(base_rows_t *r);

#endif /* LSTREAM_BASE_ROWS_H */
