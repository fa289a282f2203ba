/*
 * What `lstream train` reports of its forecasts per target feature (the
 * program's side of figures.c): the summary's lines, the fields of the log
 * line and of --metrics, in normalised units and in the data's own units.
 */
#ifndef LSTREAM_TRAIN_CLI_REPORT_H
#define LSTREAM_TRAIN_CLI_REPORT_H

#include <stdio.h>

#include "lstream/train.h"

/* Per-target sums since the last log line. */
typedef struct report_s {
  int O;
  double *mse, *base; /* [O] sums, data units */
  double *n;          /* [O] their targets */
} report_t;

/* Adds a step's figures (allocates at the first). */
void report_add(report_t *r, const ls_step_stats_t *s);

/* The log line's per-target fields (" mse_data=a,b baseline_data=c,d", at
 * most 8 targets), then the sums restart. */
void report_log_fields(report_t *r, FILE *out);

void report_free(report_t *r);

/* One --metrics line: a JSON object, valid whatever the step's figures
 * (NaN and Inf are null), with its per-target figures ("targets": [...]).
 * time_s: seconds into the run. */
void report_metrics_line(FILE *f, const ls_step_stats_t *s, double time_s);

/* The summary's headline "forecast" line (the forecasts going out against
 * the last value, data units, the mean of the targets' ratios, final and
 * whole run), its "loss" line (what the model trains on: normalised units,
 * before the calibration and the linear path's mixing) and one "target"
 * line per target feature (normalised and data units, whole run and final). */
void report_summary(FILE *out, const ls_train_summary_t *s);

/* The mean of sum over count, 0 without any. */
double report_mean(double sum, double count);

#endif /* LSTREAM_TRAIN_CLI_REPORT_H */
