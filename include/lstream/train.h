/*
 * lstream train: the step loop. A trainer reads windows from its partitions
 * (ingest), forms steps, passes each window's records through its series'
 * normaliser, gathers each series' state, runs the engine (kernels) and
 * stores the states back (state), and reports every step.
 *
 * Step formation. A step holds at most B windows, each of a different
 * series (a series' next window needs this one's final state).
 *   replay (until = end): each partition reads ahead up to queue_windows
 *     windows in offset order and gives a step up to batch/partitions of
 *     them by event time (the earliest last target first), stopping at one
 *     whose series is in the step already; so a topic written series by
 *     series trains like one written in time order. Steps depend on the
 *     topic's contents only, never on arrival timing: two runs are
 *     bit-identical.
 *   live (until = never): a step fires when B windows are ready, as soon
 *     as nothing ready can join it (the windows waiting are all of series
 *     already in it, as in a backlog, which so drains at replay speed, or
 *     every series the rank knows is in it), or deadline.ms after it began.
 * The model. Inputs are each feature's normalised level and change, targets
 * the normalised next change of the target features (the defaults; see the
 * keys below); a forecast in the data's units is the last value plus the
 * predicted change, scaled by the calibration. After each update, `replay`
 * more updates on windows drawn from each partition's memory of recent ones.
 * The figures of each step are measured before its update: the prequential
 * (test-then-train) loss. Beside it the trainer measures, on the same
 * targets, the last-value baseline (predict x[t+1] = x[t]); both per target
 * feature, in normalised units and in the data's own units.
 */
#ifndef LSTREAM_TRAIN_H
#define LSTREAM_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"
#include "lstream/ingest.h" /* LS_REJECT__COUNT */
#include "lstream/state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ls_train_conf_s ls_train_conf_t;

LS_API ls_err_t ls_train_conf_new(ls_train_conf_t **out);
LS_API void ls_train_conf_destroy(ls_train_conf_t *conf); /* accepts NULL */

/* Sets a key from its text (the same keys as `lstream train --KEY VALUE`
 * and `--config FILE`; dashes and dots read as underscores).
 * LS_ERR_UNKNOWN_KEY for a key that does not exist, LS_ERR_INVALID_ARG (with
 * the reason) for a bad value. The keys, their meaning, defaults and what
 * may change across a resume are one table (ls_train_conf_keys below,
 * train/conf.c; `lstream train --help` prints it). A key set here counts as
 * given: a resume refuses a given fixed key whose value differs from the
 * snapshot's, and gives the others the snapshot's values.
 *
 * Snapshots. With snapshot_dir, the trainer writes snapshots in the
 * background (the step loop only copies the model, the series states and
 * each partition's resume offset into a staging buffer) and a last one when
 * the run ends. A run resumed from a snapshot starts every partition where
 * the snapshot says and skips, per series, the records it had trained: the
 * result is bit-identical to a run that was never interrupted. A snapshot is
 * taken only after an update (never in the middle of an accumulation); one
 * due while the previous is still being written is skipped and counted.
 * After a snapshot commits, its offsets are also committed to the consumer
 * group (for Kafka's lag tools; lstream resumes from snapshots only), in
 * the background: a broker that is down never holds up a step or the end
 * of a run.
 *
 * Non-finite steps. A step whose loss or gradient (summed over the ranks)
 * holds a NaN or an Inf updates nothing: its update is skipped (a gradient
 * on the device that holds it, inside the update), the step counted
 * (ls_train_summary_t.nonfinite_steps) and reported with the window most
 * likely at fault (ls_step_stats_t.nonfinite_note), once its gradient norm
 * is read. A forecast whose error is not finite (in float32, normalised
 * units, as the model computes it; in double, the data's units) enters no
 * figure or total, and makes its step's loss not finite. A model with a
 * non-finite parameter is never snapshotted. Values beyond max_abs never
 * get that far (rejected, reason range); within it, the normaliser clamps
 * what it makes of an outlier to +-10 scales.
 *
 * Forecasts going out (predictions_topic, predictions_out; train/predict.h
 * says what they are). With snapshot_dir, each (series, source offset,
 * kind) reaches the topic once, also across kills: a snapshot commits only
 * once the forecasts made before it are committed, and a resumed run reads
 * the topic back to leave out what the killed run published after it.
 *
 * Replicas. Under mpirun every rank runs a trainer: rank r reads the
 * partitions p with p % world == r (and so owns their series and states),
 * all ranks step in lockstep, a rank with nothing ready adds zeros, and the
 * update divides the summed gradient by the summed count of valid targets.
 * In a replay a step takes batch/partitions windows from each partition, and
 * each replay update replay_batch/partitions from each partition's memory,
 * so N ranks train on the same windows per step as one.
 */
LS_API ls_err_t ls_train_conf_set(ls_train_conf_t *conf, const char *key, const char *value);

/* Passes a librdkafka property "key=value" to the consumer (as kcat -X). */
LS_API ls_err_t ls_train_conf_set_kafka(ls_train_conf_t *conf, const char *setting);

/* Warnings of the consumer that do not stop the run: Kafka's errors that
 * librdkafka retries and its own warnings (a broker down, unreachable),
 * rejected records, dead letters not delivered. Rate limited: at most one
 * per kind every 5 s, saying how many were suppressed. Called from the
 * consumer's thread or librdkafka's, one call at a time; cb may print.
 * NULL (the default) drops them. */
typedef void (*ls_train_warn_cb)(void *opaque, const char *message);
LS_API ls_err_t ls_train_conf_set_warn_cb(ls_train_conf_t *conf, ls_train_warn_cb cb, void *opaque);

/* Reads KEY = VALUE lines (blank lines and lines starting with # skipped)
 * and sets each; an error names the file and the line. */
LS_API ls_err_t ls_train_conf_read(ls_train_conf_t *conf, const char *path);

/* The current value of a key as text, into buf. */
LS_API ls_err_t ls_train_conf_get(const ls_train_conf_t *conf, const char *key, char *buf,
                                  size_t size);

/* What a key is (ls_train_key_t.flags): one of the first four, and at most
 * one of the last two. */
enum {
  LS_KEY_MODEL = 1,  /* the model and how it learns */
  LS_KEY_DATA = 2,   /* which records train */
  LS_KEY_INGEST = 4, /* how records are read and held */
  LS_KEY_RUN = 8,    /* where it runs, reads and writes; how it snapshots */
  /* May not change across a resume: a resumed run that leaves it out takes
   * the snapshot's value; one that gives another value is refused. */
  LS_KEY_FIXED = 16,
  /* May change across a resume, which the resume then reports (the run
   * differs from an uninterrupted one from there). Keys with neither may
   * change freely. */
  LS_KEY_NOTED = 32
};

/* The keys (the option table, train/conf.c), NULL-terminated: name, one-line
 * help, default as text (NULL: none, such as brokers), flags. --help, the
 * --config keys and what a resume checks all come from it. */
typedef struct ls_train_key_s {
  const char *key;
  const char *help;
  const char *def;
  unsigned flags;
} ls_train_key_t;
LS_API const ls_train_key_t *ls_train_conf_keys(void);

/* One target feature's figures over some of its targets: the squared
 * errors of the model's forecasts and of the last value's (x[t+1] = x[t]),
 * summed, in normalised units (what the model trains on) and in the data's
 * own units (the calibrated forecast against the raw next value). */
typedef struct ls_target_figures_s {
  int feature;         /* the target's feature index */
  char name[64];       /* its name: feature_names', the fields' paths (json, avro), else the
                          index */
  double count;        /* targets */
  double loss_sum;     /* model, normalised units */
  double baseline_sum; /* last value, normalised units */
  double mse_sum;      /* model, data units */
  double base_sum;     /* last value, data units */
} ls_target_figures_t;

/* One target's forecasts at one horizon (--horizon H > 1; issue 25), in
 * the data's units: the model's squared errors and those of the last value
 * (x[t] for x[t+h]) and of the seasonal naive (x[t+h-kP], k = ceil(h/P), P
 * the series' season; the last value while none is known), summed over
 * the forecasts whose actual was known when their window trained (t + h
 * within it). */
typedef struct ls_horizon_figures_s {
  int h;             /* records ahead, 1..H */
  int feature;       /* the target's feature index */
  double count;      /* forecasts scored */
  double mse_sum;    /* model */
  double last_sum;   /* last value */
  double snaive_sum; /* seasonal naive */
} ls_horizon_figures_t;

/* Whether horizon h of H is one the summary and /metrics show: every one
 * up to 12, else 1, 2, 3, H/4, H/2, 3H/4 and H. */
LS_API int ls_horizon_shown(int h, int H);

/* One target's quantile forecasts of one level at one horizon
 * (--quantiles; issue 25): how often the actual was at or below the
 * forecast (coverage: below / count; the level when calibrated) and the
 * pinball loss max(l (y - q), (l - 1) (y - q)), data units, of the
 * forecasts as they went out (calibrated unless --calibration-rate is 0),
 * each once its actual arrived (h records later), counted then. */
typedef struct ls_quantile_figures_s {
  double level;       /* the quantile's level, in (0, 1) */
  int h;              /* records ahead, 1..H */
  int feature;        /* the target's feature index */
  double count;       /* forecasts scored */
  double below;       /* of them, actual <= forecast */
  double pinball_sum; /* their pinball losses */
} ls_quantile_figures_t;

/* What one step did. Losses are sums over valid target values; divide by
 * count for the mean squared error. */
typedef struct ls_step_stats_s {
  int64_t step;                          /* 1-based */
  int windows;                           /* windows in this step */
  int64_t records;                       /* target records in this step */
  double loss_sum;                       /* model, before this step's update (prequential),
                                            normalised units, all targets */
  double baseline_sum;                   /* last-value prediction, same targets */
  double count;                          /* valid target values */
  int targets;                           /* O */
  const ls_target_figures_t *target;     /* [targets]: per target, data units too
                                            (valid during the callback) */
  int horizons;                          /* H (--horizon) */
  const ls_horizon_figures_t *horizon;   /* [horizons, targets] per horizon, h-major, with H >
                                            1 (valid during the callback), else NULL */
  int quantiles;                         /* Q (--quantiles), 0: none */
  const ls_quantile_figures_t *quantile; /* [quantiles, horizons, targets] the quantile
                                            forecasts whose actual arrived in this step, per
                                            level, h-major (valid during the callback), else
                                            NULL */
  int updated;                           /* 1 if the optimizer stepped after this step */
  int nonfinite;              /* 1: its loss or gradient (summed over the ranks) is NaN or Inf:
                                 no update, and a non-finite loss counts in no total */
  const char *nonfinite_note; /* then: what was skipped, and this rank's window with the
                                 largest |value| (series, partition, offsets), else NULL */
  float grad_norm;            /* gradient norm of that update (before clipping) */
  float lr;                   /* learning rate of that update */
  double compute_s;           /* seconds in the engine */
  double lag_ms;              /* ms from the event time of a window's last target to the end of
                                 the step's compute (the mean over the windows that have one;
                                 NaN when none has): how far training runs behind the data */
  double wait_s;              /* seconds waiting for windows */
  int64_t snapshot_committed; /* step of a snapshot that committed now, else -1 */
  int snapshot_skipped;       /* 1: a snapshot was due but the last is still being written */
  const char *snapshot_error; /* a snapshot write or commit that failed, else NULL */
  int64_t durable_step;       /* with snapshot_dir: the step of the newest snapshot committed
                                 (or resumed from), -1 when none is */
  double durable_age_s;       /* and how long ago it committed (since the run's start when
                                 none did in this run) */
  int64_t rejected[LS_REJECT__COUNT]; /* records rejected so far, per reason (ls_reject_t),
                                         all ranks */
} ls_step_stats_t;

/* Totals of a run; `tail` covers the last fifth of event time (targets
 * after t0 + 0.8 (t1 - t0), t0 and t1 the first and last records' event
 * times over every rank), the "final" figures of a run. Losses in
 * normalised units over all targets; per target, data units too. */
typedef struct ls_train_summary_s {
  int64_t steps, windows, records, series;
  int64_t updates; /* optimizer updates taken (the optimizer's count, resumed ones included;
                      skipped ones not), replay updates included */
  double loss_sum, baseline_sum, count;
  double tail_loss_sum, tail_baseline_sum, tail_count;
  int64_t tail_from_ms;                       /* the tail's targets have event times after this */
  int targets;                                /* O */
  const ls_target_figures_t *target;          /* [targets] the whole run */
  const ls_target_figures_t *tail_target;     /* [targets] the tail (both valid until the
                                                 next summary or the trainer's end) */
  int horizons;                               /* H (--horizon); figures per horizon when above 1 */
  const ls_horizon_figures_t *horizon;        /* [horizons, targets] the whole run, h-major:
                                                 [(h - 1) targets + j]; NULL with H = 1 */
  const ls_horizon_figures_t *tail_horizon;   /* [horizons, targets] the tail */
  int quantiles;                              /* Q (--quantiles' levels) */
  const ls_quantile_figures_t *quantile;      /* [quantiles, horizons, targets] the whole run:
                                                 [q horizons targets + (h - 1) targets + j];
                                                 NULL without quantiles */
  const ls_quantile_figures_t *tail_quantile; /* the same of the tail */
  double calibration_rate; /* the quantiles' online calibration step (--calibration-rate): the
                             figures are those of the quantiles as they went out, calibrated;
                             0: the head's own */
  double compute_s, wait_s, elapsed_s;
  double comm_s;        /* blocked in the step's sums across ranks (a rank's mean): the
                           all-reduce and waiting for the slowest rank; with nccl the
                           gradient sum runs on the GPU without blocking, so only the
                           step figures' sum and the wait count */
  int64_t read;         /* records the consumers read in this run (accepted or rejected; a
                           resume's records in flight not counted), all ranks */
  int64_t rejected;     /* records the consumer rejected (all reasons) */
  int64_t dead_letters; /* rejected records copied to the dead-letter topic, all ranks */
  int64_t rejected_by[LS_REJECT__COUNT]; /* per reason (ls_reject_t) */
  int64_t nonfinite_steps;   /* steps whose loss or gradient was not finite: updates skipped */
  int64_t resets;            /* series restarted by a gap in event time (reset_gap_ms), all
                                ranks */
  int64_t late;              /* records stamped before their series' last, within late_ms:
                                trained with its time */
  int64_t evicted;           /* series the consumers forgot (series_idle_ms, max_series) */
  int64_t evicted_records;   /* records those series held in partial windows: never trained */
  int64_t evicted_states;    /* series states (h, c, normaliser, counts) the trainers forgot */
  int64_t moved;             /* series that went on on another partition of their rank (the
                                topic gained partitions), their state kept, all ranks */
  int64_t partitions_added;  /* partitions added to the topic live and read, all ranks */
  int64_t arrived;           /* series new to their rank once the topic gained partitions (live,
                                or since the snapshot): new keys, or keys that moved from another
                                rank's partition and start over (no rank can tell), all ranks */
  int threads;               /* CPU threads of this rank's engine (they decide the order of
                                sums: other counts, other bits) */
  int64_t resumed_step;      /* the step of the snapshot the run resumed from, or -1 */
  int64_t snapshots;         /* snapshots committed */
  int64_t snapshots_skipped; /* due while the previous one was being written */
  /* Forecasts going out (predictions_topic, predictions_out), every rank's. */
  int64_t predictions_next, predictions_eval; /* made */
  int64_t predictions_published;              /* committed to the predictions topic by this run */
  int64_t predictions_skipped;      /* not published again: the topic held them already (what a
                                       killed run published after the snapshot resumed from) */
  int64_t predictions_rows;         /* rows written to the predictions file */
  int64_t predictions_waits;        /* forecasts that waited for room (predictions_buffer full:
                                       a broker outage): training paused meanwhile */
  int64_t predictions_during_steps; /* next forecasts made while a training step ran (live on
                                       the CPU: the serving thread, --serve-thread) */
} ls_train_summary_t;

typedef struct ls_trainer_s ls_trainer_t;

/* The number of ranks the process was started among by mpirun (Open MPI or
 * a PMI launcher), or 1. The program initialises MPI when it is above 1. */
LS_API int ls_train_launched_ranks(void);

/* Creates a trainer: checks the conf, connects, resolves the partitions and
 * their start positions, builds the engine. conf is copied. */
LS_API ls_err_t ls_trainer_new(const ls_train_conf_t *conf, ls_trainer_t **out);
LS_API void ls_trainer_destroy(ls_trainer_t *tr); /* accepts NULL */

/* What resuming did ("" when it did nothing): the snapshot used, and any
 * damaged one passed over. */
LS_API const char *ls_trainer_note(const ls_trainer_t *tr);

/* Called after every step with that step's stats, once its update's
 * gradient norm is known: when the next step's work has been queued (so
 * that the GPU need not wait for the host to read it), or at the end of the
 * run; and after a round without windows that has a snapshot event to
 * report (stats.windows = 0 then: a failure, a commit). Its losses and
 * per-target figures are computed on the host from the step's predictions,
 * before its update. A non-zero return stops the run (cleanly) after the
 * step under way. */
typedef int (*ls_step_cb)(void *opaque, const ls_step_stats_t *stats);

/* Runs until the end of a replay, until max_steps, until *stop becomes
 * non-zero (checked at least every 100 ms; a signal handler may set it), or
 * until cb asks; then takes a last snapshot (with snapshot_dir). stop and
 * cb may be NULL. LS_ERR_IO when that last snapshot failed (on every rank
 * alike: ls_trainer_finished then says 1, and the results can be read). */
LS_API ls_err_t ls_trainer_run(ls_trainer_t *tr, volatile sig_atomic_t *stop, ls_step_cb cb,
                               void *opaque);

/* 1 when ls_trainer_run ended on every rank together (a replay's end,
 * max_steps, a stop), even if its last snapshot then failed (it returned
 * LS_ERR_IO on every rank): the results below may be asked for. 0 before,
 * and after a failure of this rank alone (the other ranks may be gone). */
LS_API int ls_trainer_finished(const ls_trainer_t *tr);

/* Totals of the run. Collective: every rank calls it; series and rejected
 * records are summed over the ranks. */
LS_API ls_err_t ls_trainer_summary(ls_trainer_t *tr, ls_train_summary_t *out);

/* This trainer's rank and the number of ranks. */
LS_API ls_err_t ls_trainer_rank(const ls_trainer_t *tr, int *rank, int *world);

/* A host copy of the parameters (n = their count, from ls_trainer_param_count). */
LS_API size_t ls_trainer_param_count(const ls_trainer_t *tr);
LS_API ls_err_t ls_trainer_params(ls_trainer_t *tr, float *dst, size_t n);

/* FNV-1a digests of the flat parameter buffer and of the series table (keys,
 * counts and states; with several ranks, every rank's tables combined):
 * equal digests, bit-identical models. Collective. */
LS_API ls_err_t ls_trainer_digest(ls_trainer_t *tr, uint64_t *params, uint64_t *states);

/* Number of series seen. */
LS_API int64_t ls_trainer_series_count(const ls_trainer_t *tr);

/* What the trainer knows of series i (0 <= i < count, in order of first
 * appearance): key, partition, windows and target records trained. */
LS_API ls_err_t ls_trainer_series_info(ls_trainer_t *tr, int64_t i, ls_series_info_t *out);

/* Series i's forecast errors: errors [targets, 2] per target (in the order of
 * the summary's), the squared errors of the model's forecasts and of the
 * last value's, summed in the data's units over its targets (info.records
 * of them); valid until the table next grows. */
LS_API ls_err_t ls_trainer_series_errors(ls_trainer_t *tr, int64_t i, const double **errors,
                                         int *targets);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_TRAIN_H */
