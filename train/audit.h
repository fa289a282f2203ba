/*
 * What a forecast was made from (train/ internal; `lstream predict`): a
 * snapshot's model, one series' state (h, c) and normaliser, the run's
 * calibration and settings, to forecast that series' next records as the
 * trainer did at the snapshot's step, bit for bit on the CPU.
 *
 * The series' state in a snapshot is its state after its last trained
 * window; the next record its normaliser takes is the one after the
 * norm_n it has consumed (the first input of its next window). The
 * trainer's forecasts at step S+1 (the predictions file's rows of step S)
 * were made with the model of the snapshot at step S: for the series of
 * the windows trained then, audit_forecast over those windows' records
 * gives the same numbers. Records are taken T at a time, as the trainer's
 * windows (T = --window), each from the state the last one left. Not
 * modelled: --reset-gap-ms (a gap restarts the trainer's state from zero)
 * and a run on a GPU (other arithmetic). With --horizon H, the next H
 * records' forecasts; with --quantiles, each level's quantile forecasts
 * too, calibrated as the trainer's step calibrated them (each record moves
 * the series' corrections by the forecasts whose actual it is: a replay's
 * forecasts; a live trainer serves records before its step, with the
 * corrections as they stood). A forecast that is not finite is left
 * uncalibrated and moves nothing.
 */
#ifndef LSTREAM_TRAIN_AUDIT_H
#define LSTREAM_TRAIN_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/state.h"

typedef struct audit_s audit_t;

/* What a series' forecasts start from. */
typedef struct audit_info_s {
  int64_t step;         /* the snapshot's */
  int F, O, T;          /* features, targets, window */
  int H;                /* horizons: each forecast covers the next H records */
  int Q;                /* quantile levels (--quantiles; 0: none) */
  const double *levels; /* [Q] */
  const int *feat;      /* [O] the target features */
  int64_t norm_n;       /* records its normaliser consumed */
  int64_t last_offset;  /* the offset of the last record it trained on, -1 none */
  const double *alpha;  /* [O] the calibration factor of the forecasts */
} audit_info_t;

/* The series key (NUL-terminated) of the snapshot at path (a snapshot
 * directory), every rank's part searched. Errors name what is missing: the
 * series, the settings (a format-4 snapshot), the model. */
ls_err_t audit_new(const char *path, const char *key, audit_t **out);
void audit_free(audit_t *a); /* accepts NULL */
void audit_info(const audit_t *a, audit_info_t *out);

/* The forecasts after each of n records x [n, F] that follow the series'
 * state (its state and normaliser advance): out [n, H, O (1 + Q)] (per
 * record, h-major: per horizon its O point forecasts, then O per quantile
 * level), in the data's units: the values a --predictions-out row holds. */
ls_err_t audit_forecast(audit_t *a, const float *x, int64_t n, double *out);

/* The calibration of a snapshot's forecasts (rank 0's part, snap; O
 * targets): per target alpha [O], and moments [O, 3] (the averages of p y
 * and p p, the forecasts seen), from the run's settings (--calibrate). */
ls_err_t audit_calibration(const ls_snapshot_t *snap, int O, double *alpha, double *moments);

#endif /* LSTREAM_TRAIN_AUDIT_H */
