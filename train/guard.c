/*
 * The guard against non-finite updates (train/guard.h).
 */
#include "guard.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/csv.h"

void guard_scan(train_guard_t *g, const ls_window_t *const *wins, int n) {
  guard_suspect_t *const c = &g->cur;
  c->value = -1.0;
  int best = -1;
  for (int b = 0; b < n; b++) {
    const ls_window_t *const w = wins[b];
    for (size_t i = 0; i < (size_t)(w->n_targets + 1) * (size_t)w->F; i++) {
      double const a = fabs((double)w->x[i]);
      if (a > c->value || isnan(a)) c->value = a, best = b;
    }
  }
  if (best < 0) return;
  const ls_window_t *const w = wins[best];
  c->key_len = w->key_len < sizeof c->key ? w->key_len : sizeof c->key - 1;
  memcpy(c->key, w->key, c->key_len);
  c->partition = w->partition;
  c->first_offset = w->first_offset;
  c->last_offset = w->last_offset;
}

void guard_keep(train_guard_t *g) {
  g->kept = g->cur;
}

const char *guard_note(train_guard_t *g, int64_t step, int loss_bad) {
  g->bad_steps++;
  int const n =
      snprintf(g->note, sizeof g->note,
               "step %" PRId64 ": the %s is not finite: its update is skipped (%" PRId64
               " such step%s so far); ",
               step, loss_bad ? "loss" : "gradient", g->bad_steps, g->bad_steps == 1 ? "" : "s");
  if (n < 0 || (size_t)n >= sizeof g->note) return g->note;
  char *const rest = g->note + n;
  size_t const left = sizeof g->note - (size_t)n;
  const guard_suspect_t *const k = &g->kept;
  if (k->value < 0) {
    snprintf(rest, left, "this rank had no window in it");
    return g->note;
  }
  /* The key as --series-out writes it (quoted, \xHH for bytes that are not text). */
  char key[4 * LS_KEY_MAX + 8] = "";
  FILE *const f = fmemopen(key, sizeof key - 1, "w");
  if (f != NULL) {
    base_csv_field(f, k->key, k->key_len);
    fclose(f);
  }
  snprintf(rest, left,
           "the window with the largest value: series %s partition %" PRId32 " offsets %" PRId64
           "..%" PRId64 ", |value| %g (bound records with --max-abs)",
           key, k->partition, k->first_offset, k->last_offset, k->value);
  return g->note;
}

int guard_finite(const float *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(p[i])) return 0;
  return 1;
}
