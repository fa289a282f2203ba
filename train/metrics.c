/*
 * /metrics (train/monitor.h): the table of metrics and the Prometheus text
 * exposition format (version 0.0.4).
 *
 * Adding a metric is one line of the table below: its name (counters end
 * in _total, units in the name: _seconds, _bytes, _records), its type, its
 * labels, where its value is in monitor_sample_t (or, for a per-partition
 * metric, in monitor_part_t; for a per-target one, in monitor_target_t;
 * for a per-reason one, the array of LS_REJECT__COUNT counts) and its
 * help. A value that is NaN is not shown. A field the sample does not hold
 * yet is added to monitor_sample_t and set where monitor.c fills the
 * sample.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"

/* ------------------------------------------------------------------------ */
/* Text                                                                      */

void monitor_text_add(monitor_text_t *t, const char *fmt, ...) {
  if (t->nomem) return;
  for (;;) {
    size_t const room = t->cap - t->len;
    va_list ap;
    va_start(ap, fmt);
    int const n =
        room > 0 ? vsnprintf(t->text + t->len, room, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t const cap = (t->cap ? 2 * t->cap : 4096) + (size_t)n;
    char *const grown = realloc(t->text, cap);
    if (grown == NULL) {
      t->nomem = 1;
      return;
    }
    t->text = grown;
    t->cap = cap;
  }
}

/* The length of the UTF-8 sequence at p (2..4; p[0] >= 0x80), or 0 when
 * it is not one (a stray continuation byte, a byte UTF-8 never uses, a
 * sequence cut short). */
static int utf8_length(const unsigned char *p) {
  unsigned const c = p[0];
  int const n = c >= 0xc2 && c <= 0xdf   ? 2
                : c >= 0xe0 && c <= 0xef ? 3
                : c >= 0xf0 && c <= 0xf4 ? 4
                                         : 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  return n;
}

void monitor_text_json(monitor_text_t *t, const char *s) {
  monitor_text_add(t, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int const n = *p >= 0x80 ? utf8_length(p) : 1;
    if (*p == '"' || *p == '\\')
      monitor_text_add(t, "\\%c", *p);
    else if (*p < 0x20)
      monitor_text_add(t, "\\u%04x", *p);
    else if (n == 0) /* not UTF-8: the replacement character, so the JSON stays valid */
      monitor_text_add(t, "\\ufffd");
    else
      monitor_text_add(t, "%.*s", n, (const char *)p), p += n - 1;
  }
  monitor_text_add(t, "\"");
}

/* ------------------------------------------------------------------------ */
/* The table                                                                 */

typedef enum kind_e { COUNTER, GAUGE } kind_t;

/* The labels of a metric besides rank. */
typedef enum labels_e {
  ONE,       /* one sample */
  REASON,    /* one per rejection reason: an int64_t [LS_REJECT__COUNT] array (from 1) */
  PARTITION, /* one per partition of the rank: a field of monitor_part_t */
  TARGET,    /* one per target feature: a field of monitor_target_t */
  HORIZON,   /* one per target and horizon shown: a field of monitor_horizon_t */
  QUANTILE   /* one per level, horizon shown and target: a field of monitor_quantile_t */
} labels_t;

typedef enum ctype_e { I64, INT, F64 } ctype_t;

typedef struct metric_s {
  const char *name;
  kind_t kind;
  labels_t labels;
  ctype_t ctype;
  size_t offset; /* in monitor_sample_t, monitor_part_t for PARTITION, monitor_target_t for
                    TARGET */
  const char *help;
} metric_t;

#define S(type, field) type, offsetof(monitor_sample_t, field)
#define P(field)       I64, offsetof(monitor_part_t, field)
#define T(field)       F64, offsetof(monitor_target_t, field)
#define Z(field)       F64, offsetof(monitor_horizon_t, field)
#define U(field)       F64, offsetof(monitor_quantile_t, field)

/* clang-format off */
static const metric_t metrics[] = {
  /* The job's training, from the step's sums (the same on every rank). */
  {"lstream_steps_total", COUNTER, ONE, S(I64, steps),
   "Steps trained, those before a resume included (the trainer's step)."},
  {"lstream_updates_total", COUNTER, ONE, S(I64, updates),
   "Optimizer updates by this run."},
  {"lstream_windows_trained_total", COUNTER, ONE, S(I64, windows),
   "Windows trained by this run, all ranks."},
  {"lstream_records_trained_total", COUNTER, ONE, S(I64, records),
   "Target records trained by this run, all ranks."},
  {"lstream_loss", GAUGE, ONE, S(F64, loss),
   "The last step's prequential MSE (before its update), all targets, normalised units."},
  {"lstream_baseline_loss", GAUGE, ONE, S(F64, baseline),
   "The last step's MSE of the last-value forecast on the same targets, normalised units."},
  {"lstream_loss_ratio", GAUGE, ONE, S(F64, ratio),
   "lstream_loss / lstream_baseline_loss (below 1: better than the last value)."},
  {"lstream_loss_smoothed", GAUGE, ONE, S(F64, loss_smooth),
   "Prequential MSE over about the last 100 steps (step weights decay by 0.99)."},
  {"lstream_baseline_loss_smoothed", GAUGE, ONE, S(F64, baseline_smooth),
   "Last-value MSE over about the last 100 steps."},
  {"lstream_loss_ratio_smoothed", GAUGE, ONE, S(F64, ratio_smooth),
   "lstream_loss_smoothed / lstream_baseline_loss_smoothed."},
  /* Per target feature, in the data's own units. */
  {"lstream_target_loss", GAUGE, TARGET, T(loss),
   "The last step's MSE of the target's forecasts (calibrated, before the update), data units."},
  {"lstream_target_baseline_loss", GAUGE, TARGET, T(baseline),
   "The last step's MSE of the last value on the target's same records, data units."},
  {"lstream_target_loss_ratio", GAUGE, TARGET, T(ratio),
   "lstream_target_loss / lstream_target_baseline_loss (below 1: better than the last value)."},
  {"lstream_target_loss_smoothed", GAUGE, TARGET, T(loss_smooth),
   "The target's forecast MSE over about the last 100 steps, data units."},
  {"lstream_target_baseline_loss_smoothed", GAUGE, TARGET, T(baseline_smooth),
   "The target's last-value MSE over about the last 100 steps, data units."},
  {"lstream_target_loss_ratio_smoothed", GAUGE, TARGET, T(ratio_smooth),
   "lstream_target_loss_smoothed / lstream_target_baseline_loss_smoothed."},
  /* Per target and horizon (--horizon H > 1; those the summary shows). */
  {"lstream_horizon_loss_smoothed", GAUGE, HORIZON, Z(loss),
   "The target's forecast MSE h records ahead over about the last 100 steps, data units."},
  {"lstream_horizon_loss_ratio_last_smoothed", GAUGE, HORIZON, Z(ratio_last),
   "lstream_horizon_loss_smoothed over the last value's (x[t] for x[t+h]) on the same records."},
  {"lstream_horizon_loss_ratio_snaive_smoothed", GAUGE, HORIZON, Z(ratio_snaive),
   "lstream_horizon_loss_smoothed over the seasonal naive's on the same records."},
  /* Per quantile level, horizon and target (--quantiles; the horizons shown). */
  {"lstream_quantile_coverage_smoothed", GAUGE, QUANTILE, U(coverage),
   "The share of actuals at or below the target's quantile forecast h records ahead, over "
   "about the last 100 steps (calibrated: near the level)."},
  {"lstream_quantile_pinball_loss_smoothed", GAUGE, QUANTILE, U(pinball),
   "The mean pinball loss of those quantile forecasts, data units."},
  {"lstream_gradient_norm", GAUGE, ONE, S(F64, grad_norm),
   "Global gradient norm of the last update, before clipping."},
  {"lstream_learning_rate", GAUGE, ONE, S(F64, lr),
   "Learning rate of the last update (warm-up included)."},
  {"lstream_nonfinite_steps_total", COUNTER, ONE, S(I64, nonfinite_steps),
   "Steps of this run whose loss or gradient was not finite: their updates skipped."},
  {"lstream_lag_seconds", GAUGE, ONE, S(F64, lag_s),
   "The last step's mean time from its targets' event time to the end of its compute."},
  {"lstream_compute_seconds_total", COUNTER, ONE, S(F64, compute_s),
   "Seconds in the engine (forward, backward, update) in this run, mean over ranks."},
  {"lstream_ingest_wait_seconds_total", COUNTER, ONE, S(F64, wait_s),
   "Seconds the step loop waited for windows in this run, mean over ranks."},
  {"lstream_ingest_wait_ratio", GAUGE, ONE, S(F64, wait_share),
   "Share of step time spent waiting for windows, over about the last 100 steps."},
  {"lstream_last_step_age_seconds", GAUGE, ONE, S(F64, step_age_s),
   "Seconds since the last step."},
  {"lstream_heartbeat_age_seconds", GAUGE, ONE, S(F64, heartbeat_age_s),
   "Seconds since the step loop's last turn (a step, or an idle turn in live mode)."},
  /* This rank's consumer. */
  {"lstream_consumer_connected", GAUGE, ONE, S(F64, connected),
   "1 when the last watch reached the leaders of every partition of the rank, else 0."},
  {"lstream_consumer_records_total", COUNTER, ONE, S(I64, ingest.w.records),
   "Records the rank's consumer read: accepted, rejected and skipped."},
  {"lstream_consumer_records_rejected_total", COUNTER, REASON, S(I64, ingest.w.rejected),
   "Records rejected, by reason; never trained on."},
  {"lstream_consumer_records_late_total", COUNTER, ONE, S(I64, ingest.w.late),
   "Records stamped before their series' last within --late-ms: trained, their time held."},
  {"lstream_series_evicted_total", COUNTER, ONE, S(I64, ingest.w.evicted),
   "Series the consumer forgot (--series-idle, --max-series); their partial windows dropped."},
  {"lstream_series_evicted_records_total", COUNTER, ONE, S(I64, ingest.w.evicted_records),
   "Records of evicted series' partial windows, never trained."},
  {"lstream_series_states_evicted_total", COUNTER, ONE, S(I64, states_evicted),
   "Series states (h, c, normaliser, counts) the rank's trainer forgot."},
  {"lstream_series_resets_total", COUNTER, ONE, S(I64, ingest.w.resets),
   "Series restarted from a zero state by a gap in their event time (--reset-gap-ms)."},
  {"lstream_consumer_records_skipped_total", COUNTER, ONE, S(I64, ingest.skipped),
   "Records skipped: before a time start, or trained before a resume."},
  {"lstream_consumer_kafka_errors_total", COUNTER, ONE, S(I64, ingest.kafka_errors),
   "Client errors librdkafka retries."},
  {"lstream_consumer_dead_letters_total", COUNTER, ONE, S(I64, ingest.dead_letters),
   "Rejected records copied to the dead-letter topic."},
  {"lstream_consumer_pauses_total", COUNTER, ONE, S(I64, ingest.pauses),
   "Times partitions were paused for backpressure."},
  {"lstream_consumer_paused_partitions", GAUGE, ONE, S(INT, ingest.paused),
   "Partitions paused for backpressure now."},
  {"lstream_queued_windows", GAUGE, ONE, S(I64, ingest.queued_windows),
   "Complete windows waiting for the step loop."},
  {"lstream_consumer_memory_records", GAUGE, ONE, S(I64, ingest.memory_records),
   "Records the consumer holds: series buffers and queued windows."},
  {"lstream_consumer_lag_records", GAUGE, PARTITION, P(lag),
   "High watermark minus the consumer's next offset, per partition."},
  {"lstream_consumer_high_watermark", GAUGE, PARTITION, P(high_watermark),
   "The partition's high watermark at the last watch."},
  {"lstream_consumer_next_offset", GAUGE, PARTITION, P(next_offset),
   "The next offset the consumer reads."},
  {"lstream_consumer_partition_queued_windows", GAUGE, PARTITION, P(queued_windows),
   "The partition's windows waiting for the step loop."},
  /* This rank's series and snapshots. */
  {"lstream_series", GAUGE, ONE, S(I64, series),
   "Series whose state the rank holds."},
  {"lstream_state_bytes", GAUGE, ONE, S(F64, state_bytes),
   "Memory of the series states (h and c of every layer) the rank has allocated."},
  {"lstream_snapshots_total", COUNTER, ONE, S(I64, snapshots),
   "Snapshots committed by this run."},
  {"lstream_snapshots_skipped_total", COUNTER, ONE, S(I64, snapshots_skipped),
   "Snapshots due while the previous one was still being written."},
  {"lstream_snapshot_failures_total", COUNTER, ONE, S(I64, snapshot_failures),
   "Snapshot writes and commits of the rank's writer that failed."},
  {"lstream_snapshot_failures_in_row", GAUGE, ONE, S(I64, snapshots_failed_in_row),
   "Snapshots that failed since the last one committed (/health: 503 at "
   "--health-snapshot-failures)."},
  {"lstream_snapshot_last_step", GAUGE, ONE, S(F64, snapshot_step),
   "Step of the newest snapshot this run committed."},
  {"lstream_snapshot_age_seconds", GAUGE, ONE, S(F64, snapshot_age_s),
   "Seconds since the newest snapshot committed (since the start before one)."},
  {"lstream_snapshot_duration_seconds", GAUGE, ONE, S(F64, snapshot_seconds),
   "How long the last snapshot job took (the rank's shard; its commit on rank 0)."},
  {"lstream_snapshot_bytes", GAUGE, ONE, S(F64, snapshot_bytes),
   "Size of the newest committed snapshot's files, all ranks'."},
  {"lstream_healthy", GAUGE, ONE, S(F64, healthy),
   "1 when /health answers 200."},
};
/* clang-format on */

#undef S
#undef P
#undef T
#undef Z
#undef U

/* ------------------------------------------------------------------------ */
/* Exposition                                                                */

static double value_at(const void *base, size_t offset, ctype_t ctype, size_t index) {
  const char *const p = (const char *)base + offset;
  int64_t i64;
  int i;
  double f;
  switch (ctype) {
  case I64: memcpy(&i64, p + index * sizeof i64, sizeof i64); return (double)i64;
  case INT: memcpy(&i, p + index * sizeof i, sizeof i); return i;
  default: memcpy(&f, p + index * sizeof f, sizeof f); return f;
  }
}

/* One sample line: name{rank="r"[,label="value"][,h="K"][,quantile="L"]}
 * value (h: 0, none; level: NULL, none). */
static void sample_q(monitor_text_t *t, const char *name, int64_t rank, const char *label,
                     const char *label_value, int64_t h, const char *level, double v) {
  if (isnan(v)) return;
  monitor_text_add(t, "%s{rank=\"%lld\"", name, (long long)rank);
  if (label != NULL) { /* the value escaped as the text format wants: \\, \", \n */
    monitor_text_add(t, ",%s=\"", label);
    for (const char *c = label_value; *c; c++)
      monitor_text_add(t, *c == '\\' ? "\\\\" : *c == '"' ? "\\\"" : *c == '\n' ? "\\n" : "%c", *c);
    monitor_text_add(t, "\"");
  }
  if (h > 0) monitor_text_add(t, ",h=\"%lld\"", (long long)h);
  if (level != NULL) monitor_text_add(t, ",quantile=\"%s\"", level);
  if (isinf(v))
    monitor_text_add(t, "} %s\n", v > 0 ? "+Inf" : "-Inf");
  else if (fabs(v) < 9e15 && v == (double)(int64_t)v)
    monitor_text_add(t, "} %lld\n", (long long)v);
  else
    monitor_text_add(t, "} %.10g\n", v);
}

static void sample(monitor_text_t *t, const char *name, int64_t rank, const char *label,
                   const char *label_value, int64_t h, double v) {
  sample_q(t, name, rank, label, label_value, h, NULL, v);
}

static void metric_samples(const metric_t *m, const monitor_sample_t *s, monitor_text_t *t) {
  switch (m->labels) {
  case ONE: sample(t, m->name, s->rank, NULL, NULL, 0, value_at(s, m->offset, m->ctype, 0)); break;
  case REASON:
    for (int r = 1; r < LS_REJECT__COUNT; r++)
      sample(t, m->name, s->rank, "reason", ls_reject2str((ls_reject_t)r), 0,
             value_at(s, m->offset, m->ctype, (size_t)r));
    break;
  case PARTITION:
    for (int i = 0; i < s->n_parts; i++) {
      char id[24];
      snprintf(id, sizeof id, "%lld", (long long)s->parts[i].partition);
      sample(t, m->name, s->rank, "partition", id, 0,
             value_at(&s->parts[i], m->offset, m->ctype, 0));
    }
    break;
  case TARGET:
    for (int j = 0; j < s->n_targets; j++)
      sample(t, m->name, s->rank, "target", s->targets[j].name, 0,
             value_at(&s->targets[j], m->offset, m->ctype, 0));
    break;
  case HORIZON:
    for (int i = 0; i < s->n_horizons; i++)
      sample(t, m->name, s->rank, "target", s->horizons[i].name, s->horizons[i].h,
             value_at(&s->horizons[i], m->offset, m->ctype, 0));
    break;
  case QUANTILE:
    for (int i = 0; i < s->n_quantiles; i++)
      sample_q(t, m->name, s->rank, "target", s->quantiles[i].name, s->quantiles[i].h,
               s->quantiles[i].level, value_at(&s->quantiles[i], m->offset, m->ctype, 0));
    break;
  }
}

void monitor_metrics_text(const monitor_sample_t *s, monitor_text_t *out) {
  for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
    const metric_t *const m = &metrics[i];
    size_t const before = out->len;
    monitor_text_add(out, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
                     m->kind == COUNTER ? "counter" : "gauge");
    size_t const head = out->len;
    metric_samples(m, s, out);
    if (out->len == head && !out->nomem) out->len = before; /* no sample: no metric */
  }
  if (out->text != NULL && !out->nomem) out->text[out->len] = '\0';
}
