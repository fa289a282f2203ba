/*
 * Live step formation's helpers (train/live.h).
 */
#include "live.h"

#include <stdlib.h>

ls_err_t live_defer(const ls_window_t ***list, int *n, int *cap, const ls_window_t *w) {
  if (*n == *cap) {
    int const grown = *cap ? 2 * *cap : 64;
    const ls_window_t **const d = realloc(*list, (size_t)grown * sizeof *d);
    LS_RETURN_IF(d == NULL, LS_ERR_NOMEM, "no memory to defer %d windows", grown);
    *list = d;
    *cap = grown;
  }
  (*list)[(*n)++] = w;
  return LS_OK;
}

ls_err_t live_sweep(ls_ingest_t *ing, const int32_t *parts, int P, int first, live_take_fn take,
                    int (*more)(void *opaque), void *opaque) {
  for (int got = 1; got && more(opaque);) {
    got = 0;
    for (int k = 0; k < P && more(opaque); k++) {
      ls_next_t what = LS_NEXT_TIMEOUT;
      const ls_window_t *w = NULL;
      LS_FORWARD_IF_ERROR(ls_ingest_next_partition(ing, parts[(first + k) % P], 0, &what, &w));
      if (what != LS_NEXT_WINDOW) continue;
      got = 1;
      LS_FORWARD_IF_ERROR(take(opaque, w));
    }
  }
  return LS_OK;
}

int live_every_series(ls_ingest_t *ing, int n) {
  ls_ingest_stats_t is;
  return n > 0 && ls_ingest_stats(ing, &is) == LS_OK && n >= is.w.series - is.w.evicted;
}
