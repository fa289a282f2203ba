/*
 * Where a series' host-side state (ls_series_stats_t) is in arrays that
 * hold it series after series: the series table's (series.c) and a
 * snapshot's (snapshot_stats.c) alike (state/ internal).
 */
#ifndef LSTREAM_STATE_STATS_LAYOUT_H
#define LSTREAM_STATE_STATS_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/state.h"

/* Series i's state in the arrays norm_n [n], norm [n, F, LS_NORM_STATS],
 * errors [n, O, 2], serve [n, LS_SERVE_FIELDS], pending [n, O], tail [n,
 * F] and model [n, X] (X = 0: none; NULL: not held, a writer's staging
 * snapshot holding it by reference). */
static inline ls_series_stats_t stats_layout_at(int64_t *norm_n, double *norm, double *errors,
                                                int64_t *serve, double *pending, double *tail,
                                                double *model, int F, int O, size_t X, size_t i) {
  return (ls_series_stats_t){norm_n + i,
                             norm + i * (size_t)F * LS_NORM_STATS,
                             errors + i * (size_t)O * 2,
                             serve + i * LS_SERVE_FIELDS,
                             pending + i * (size_t)O,
                             tail + i * (size_t)F,
                             X > 0 && model != NULL ? model + i * X : NULL,
                             X};
}

/* When slot's model state last changed (series.c's clock; UINT64_MAX for a
 * slot past the table's series, or a table without model state), the
 * clock now (*clock) and the table's id (*id), unless NULL. */
uint64_t series_table_model_gen(const ls_series_table_t *tab, size_t slot, uint64_t *clock,
                                uint64_t *id);

#endif
