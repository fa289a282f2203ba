/*
 * Watching a run (train/ internal, used by the program in train/cli/):
 * Prometheus /metrics and /health over HTTP (libmicrohttpd, on its own
 * thread), and TensorBoard event files.
 *
 * Threads. The step loop calls monitor_step after every step (from the
 * step callback): it updates the monitor's own figures, writes the
 * TensorBoard record, and at most every MONITOR_PUBLISH_S copies its
 * figures under a mutex into the published sample. The HTTP thread copies
 * the published sample out under the same mutex (a struct copy), adds what
 * is safe to read from any thread at that moment (the consumer's counters,
 * connection and partitions, the step loop's heartbeat), and formats from
 * its copy. The step loop never waits for a scrape beyond that copy.
 *
 * Replicas. Every rank serves its own figures on PORT + rank, each sample
 * labelled rank="r". The job's figures (steps, windows and records trained,
 * losses, gradient norm, learning rate, times) come from the step's sums
 * across ranks, so they are the same on every rank; the consumer's
 * (records read and rejected, lag, queues, connection), the series and
 * their state memory, and the snapshot writer's are the rank's own.
 * TensorBoard: rank 0 writes (its lag scalar is rank 0's partitions').
 */
#ifndef LSTREAM_TRAIN_MONITOR_H
#define LSTREAM_TRAIN_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/ingest.h"
#include "lstream/train.h"

/* How often the step loop publishes its figures, at most (seconds). */
#define MONITOR_PUBLISH_S 0.1

typedef struct monitor_conf_s {
  const char *http;         /* "[ADDR:]PORT" (ADDR: an IPv4 or IPv6 address, [v6]:PORT;
                               127.0.0.1 when absent; PORT 0: any free port), or NULL */
  const char *tensorboard;  /* a directory for event files, or NULL */
  int tensorboard_every;    /* steps between TensorBoard records (1) */
  double health_stall_s;    /* /health: the step loop's last turn at most this old (60) */
  double health_snapshot_s; /* /health: with snapshot_dir, the newest snapshot committed
                               (or the start, before one) at most this old (1800) */
} monitor_conf_t;

/* Fills conf with the defaults above (no server, no event files). */
void monitor_conf_init(monitor_conf_t *conf);

/* One partition of the rank, as /metrics shows it. */
typedef struct monitor_part_s {
  int64_t partition, next_offset, high_watermark, lag, queued_windows, paused;
} monitor_part_t;

/* One target feature's figures, in the data's own units (the calibrated
 * forecasts and the last value's against the raw next values), as
 * /metrics shows them with a target="NAME" label (the feature's name:
 * --feature-names, the fields' paths, else its index). */
typedef struct monitor_target_s {
  int64_t feature;       /* the target's feature index */
  char name[64];         /* its name (the label's value) */
  double loss, baseline; /* the last step's MSE of the forecasts, of the last value */
  double ratio;          /* loss / baseline */
  double loss_smooth, baseline_smooth, ratio_smooth; /* over about the last 100 steps */
} monitor_target_t;

/* One target's forecasts at one horizon (--horizon H > 1: the horizons
 * the summary shows, ls_horizon_shown), over about the last 100 steps, in
 * the data's units, as /metrics shows them with target="NAME" and h="K"
 * labels. */
typedef struct monitor_horizon_s {
  int64_t h, feature;
  char name[64];                   /* the target's name */
  double loss;                     /* the forecasts' MSE */
  double ratio_last, ratio_snaive; /* over the last value's, the seasonal naive's */
} monitor_horizon_t;

/* One target's quantile forecasts of one level at one horizon
 * (--quantiles; the horizons the summary shows), over about the last 100
 * steps, scored as their actuals arrived, as /metrics shows them with
 * target="NAME", h="K" and quantile="LEVEL" labels. */
typedef struct monitor_quantile_s {
  int64_t h, feature;
  char name[64];   /* the target's name */
  char level[24];  /* the level as given, e.g. "0.1" */
  double coverage; /* the share of actuals at or below the forecast */
  double pinball;  /* the mean pinball loss, data units */
} monitor_quantile_t;

/* What /metrics and /health are made of. NaN: unknown (not shown). */
typedef struct monitor_sample_s {
  int64_t rank, world;
  /* The job's, from the step's sums (the same on every rank). */
  int64_t steps, updates;   /* the trainer's counts, those before a resume included */
  int64_t windows, records; /* windows and target records trained by this run */
  double compute_s, wait_s; /* this run's seconds in the engine and waiting for windows */
  double loss, baseline;    /* the last step's MSE (prequential) and the last-value
                               baseline's on the same targets, normalised units */
  double ratio;             /* loss / baseline */
  double loss_smooth, baseline_smooth, ratio_smooth; /* over about the last 100 steps */
  double wait_share;       /* share of step time spent waiting, over about 100 steps */
  double grad_norm, lr;    /* of the last update (NaN before one) */
  int64_t nonfinite_steps; /* steps of this run whose loss or gradient was not finite */
  int64_t states_evicted;  /* series states the rank's trainer forgot (--series-idle, ...) */
  double lag_s;     /* the last step's mean time from its targets' event time to its end (NaN:
                       none had one) */
  double step_at_s; /* base_now_s() of the last step (NaN before one) */
  int n_targets;
  const monitor_target_t *targets; /* [n_targets] per target feature, data units */
  int n_horizons;
  const monitor_horizon_t *horizons; /* [n_horizons] per target and horizon shown (H > 1) */
  int n_quantiles;
  const monitor_quantile_t *quantiles; /* [n_quantiles] per level, horizon shown and target */
  /* This rank's. */
  int64_t series;     /* series held */
  double state_bytes; /* memory of their states (h and c, all layers) */
  int snapshots_on;   /* snapshot_dir is set */
  int64_t snapshots, snapshots_skipped, snapshot_failures;
  int64_t snapshots_failed_in_row; /* failed since the last commit (or the start) */
  char snapshot_error[192];        /* the last failure's message, "" before one */
  double snapshot_step;            /* the newest committed by this run (NaN: none yet) */
  double snapshot_at_s;            /* base_now_s() of its commit, or of the start before one */
  double snapshot_seconds;         /* the last snapshot job's time (NaN: none yet) */
  double snapshot_bytes;           /* the newest committed snapshot's files (NaN: none yet) */
  /* Read at scrape time. */
  int has_ingest;           /* the rank reads partitions */
  ls_ingest_stats_t ingest; /* its consumer's counters (zero without) */
  double connected;         /* 1, 0, NaN (no consumer, or no watch) */
  double heartbeat_age_s;   /* since the step loop's last turn */
  double step_age_s;        /* since the last step (NaN before one) */
  double snapshot_age_s;    /* since snapshot_at_s (NaN without snapshot_dir) */
  double healthy;           /* 1 when /health answers 200 */
  int n_parts;
  const monitor_part_t *parts; /* [n_parts] */
} monitor_sample_t;

/* ------------------------------------------------------------------------ */
/* The monitor                                                               */

typedef struct monitor_s monitor_t;

/* Watches tr (which must outlive it): starts the HTTP server on PORT +
 * rank (conf->http), and on rank 0 opens a new event file in
 * conf->tensorboard, beginning with a session start at the trainer's next
 * step, so that TensorBoard drops what a killed run wrote past the
 * snapshot this one resumed from. conf is copied. */
ls_err_t monitor_new(const monitor_conf_t *conf, ls_trainer_t *tr, monitor_t **out);

/* Stops the server, writes the last figures and closes the event file;
 * accepts NULL. Call it before destroying the trainer. */
void monitor_destroy(monitor_t *m);

/* After every step, on the trainer's thread (the step callback). */
ls_err_t monitor_step(monitor_t *m, const ls_step_stats_t *st);

/* The server's address, "http://ADDR:PORT" ("" without one). */
const char *monitor_url(const monitor_t *m);

/* ------------------------------------------------------------------------ */
/* Formatting (train/metrics.c)                                              */

/* A growable text buffer; nomem is set (and text kept short) when it could
 * not grow. Zero-initialise; free text with free(). */
typedef struct monitor_text_s {
  char *text;
  size_t len, cap;
  int nomem;
} monitor_text_t;

void monitor_text_add(monitor_text_t *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends s as a JSON string (quotes included). */
void monitor_text_json(monitor_text_t *t, const char *s);

/* The sample in Prometheus' text exposition format (version 0.0.4): for
 * every metric, # HELP and # TYPE lines, then its samples, each labelled
 * rank="r". */
void monitor_metrics_text(const monitor_sample_t *s, monitor_text_t *out);

#endif /* LSTREAM_TRAIN_MONITOR_H */
