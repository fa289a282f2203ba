/*
 * The guard against non-finite updates (train/ internal). A step whose loss
 * or gradient is not finite (NaN or Inf, summed over the ranks) has its
 * update skipped (ls_optim_t.skip_nonfinite: decided on the device, seen by
 * the host when it reads the step's gradient norm, a step late; or the
 * gradient zeroed when the loss itself is not finite), is counted, and is
 * logged with the window most likely at fault: of this rank's windows in
 * the step, the one whose records hold the largest magnitude. A model with
 * a non-finite parameter is never snapshotted (guard_finite, in
 * snapshots.c).
 */
#ifndef LSTREAM_TRAIN_GUARD_H
#define LSTREAM_TRAIN_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/ingest.h"

/* Of a rank's windows in a step: the one with the largest |value|. */
typedef struct guard_suspect_s {
  char key[LS_KEY_MAX + 1];
  size_t key_len;
  int32_t partition;
  int64_t first_offset, last_offset;
  double value; /* < 0: the rank had no window in the step */
} guard_suspect_t;

typedef struct train_guard_s {
  guard_suspect_t cur;  /* of the step scanned last */
  guard_suspect_t kept; /* of the step whose stats wait for their gradient norm */
  int64_t bad_steps;    /* steps whose loss or gradient was not finite */
  char note[768];
} train_guard_t;

/* Notes, of the step's windows wins [n] (their records, rows 0..n_targets),
 * the one holding the largest |value|; n = 0: none. */
void guard_scan(train_guard_t *g, const ls_window_t *const *wins, int n);

/* Keeps the last scan's suspect for guard_note (the step's stats wait a
 * step for its gradient norm). */
void guard_keep(train_guard_t *g);

/* Counts step `step` as non-finite (its loss, when loss_bad, else its
 * gradient) and returns the note for the log: what was skipped and the
 * window kept by guard_keep. Valid until the next call. */
const char *guard_note(train_guard_t *g, int64_t step, int loss_bad);

/* 1 when every one of p [n] is finite. */
int guard_finite(const float *p, size_t n);

#endif /* LSTREAM_TRAIN_GUARD_H */
