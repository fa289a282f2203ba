/*
 * Internals of train/ shared by its files: the configuration's fields.
 */
#ifndef LSTREAM_TRAIN_INTERNAL_H
#define LSTREAM_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/value.h" /* base_key_t: the configuration's table */
#include "lstream/ingest.h"
#include "lstream/train.h"

/* The most keys of the option table (train/conf.c). */
#define TRAIN_KEYS_MAX 96

struct ls_train_conf_s {
  unsigned char given[TRAIN_KEYS_MAX]; /* per key of the table: set by ls_train_conf_set */
  char brokers[512];
  char topic[256];
  int format; /* ls_format_t */
  /* json, avro records (issue 26): ls_record_spec_t's. */
  char fields[1024], key_field[256], time_field[256];
  int time_unit;               /* ls_time_unit_t */
  char avro_schema[1024];      /* a FILE */
  char avro_schema_id[32];     /* none, any or N */
  char feature_names[1024];    /* "" = fields', else the indexes */
  char dead_letter_topic[256]; /* "" = none */
  char group[256];             /* "" = lstream-TOPIC-RUNID */
  int features, window, batch, hidden, layers;
  int optimizer; /* 0 adam, 1 adamw */
  double lr, beta1, beta2, eps, weight_decay, clip;
  int warmup, accumulate;
  int64_t seed;
  int device;    /* ls_device_t */
  int precision; /* ls_precision_t: 0 fp32, 1 tf32 */
  int threads;
  int until; /* 0 live, 1 end */
  char start[64];
  int stateless;
  double max_abs;         /* records holding a value of larger magnitude are rejected (range) */
  int64_t reset_gap_ms;   /* a larger jump in a series' event time restarts its state; 0 never */
  int64_t max_future_ms;  /* records stamped further ahead of the wall clock: rejected; 0 no */
  int64_t late_ms;        /* records this much before their series' last: kept, held; 0 no */
  int64_t series_idle_ms; /* evict a series idle this long (event time); 0 never */
  int64_t max_series;     /* the most series held over all partitions; 0 no bound */
  int deadline_ms;
  int queue_windows;
  int64_t buffer_records;
  char partitions[1024];
  int comm;        /* 0 auto, 1 none, 2 mpi, 3 nccl */
  int overlap;     /* start each segment's gradient sum during backward: 0 auto, 1 false, 2 true */
  int comm_always; /* run the gradient sums even on one rank */
  int comm_timeout_ms; /* the bound on a wait for NCCL's sums (a peer gone) */
  int64_t max_steps;   /* stop after this many steps in all (resumed ones included); 0 = no limit */
  char snapshot_dir[1024];
  int64_t snapshot_every;   /* steps; 0 = off */
  double snapshot_interval; /* seconds; 0 = off */
  int snapshot_keep, snapshot_level, snapshot_threads, snapshot_shuffle;
  char resume[1024];   /* latest | none | a snapshot directory */
  int topic_recreated; /* a resumed topic re-created: 0 refuse, 1 restart its partitions */
  char **kafka;        /* "key=value" librdkafka properties */
  int n_kafka;
  /* The model's inputs and targets (issue 17). */
  int normalize;            /* 0 series, 1 none */
  int norm_window;          /* the normaliser's N */
  int target;               /* 0 delta, 1 level */
  int inputs;               /* 0 level,change; 1 level */
  char targets[1024];       /* "all" or a list of features such as 0,3 */
  int calibrate;            /* 0 false, 1 true */
  char season[64];          /* auto | none | periods such as 24,168 (issue 24) */
  int season_max;           /* the longest season, records */
  int auto_seasons;         /* with season auto: the seasons found per target, 1 or 2 */
  int season_levels;        /* the linear path's level profiles per season: 0 false, 1 true */
  int mix_profile;          /* the level profile's forecast in the mixing: 0 false, 1 true */
  int mix_profile_rows;     /* its weight's rows: 0 all, 1 those the linear path forecast */
  int linear;               /* the linear path beside the LSTM: 0 false, 1 true */
  int linear_blocks;        /* the linear path's block means of older records (0-3) */
  int linear_wait;          /* rows per weight before the linear path's forecasts count */
  int horizon;              /* H, records ahead per forecast (issue 25) */
  int horizon_linear;       /* the linear path iterated and mixed per horizon: 0 false, 1 true */
  int horizon_prior;        /* rows per record ahead of the prior on the LSTM's weight there */
  char quantiles[256];      /* levels of the quantile forecasts, such as 0.1,0.5,0.9; "": none */
  double calibration_rate;  /* gamma of the quantiles' online calibration; 0: off */
  double quantile_weight;   /* each quantile column's loss against the point's; 0: 1 / levels */
  int replay;               /* replay updates per step */
  int replay_batch;         /* windows per replay update, over all partitions */
  int replay_memory;        /* windows kept for replay, over all partitions */
  ls_train_warn_cb warn_cb; /* the consumer's warnings, or NULL */
  void *warn_opaque;
  /* Forecasts going out (issue 12). */
  char predictions_topic[256]; /* "" = none */
  char predictions_out[1024];  /* "" = none */
  int predictions;             /* bit 0 next, bit 1 eval */
  int predictions_commit_ms;
  int serve_thread; /* live on the CPU: next forecasts on a thread of their own during steps */
  int64_t predictions_buffer;
  /* Watching a run (issue 23). */
  int health_snapshot_failures; /* /health: 503 after this many snapshots in a row failed */
};

/* For json and avro, features := the number of fields (an error when it
 * was given otherwise, or no fields were); a feature_names list must name
 * every feature. */
ls_err_t train_conf_resolve(ls_train_conf_t *c);

/* The options against each other once a resumed snapshot's settings are in
 * (some, such as --quantiles, may come from it): --calibration-rate given
 * without quantiles is refused. */
ls_err_t train_conf_check_settled(const ls_train_conf_t *c);

/* Feature f's name: feature_names' item f, else (json, avro) the path of
 * field f, else its index; into buf [size]. */
const char *train_conf_feature_name(const ls_train_conf_t *c, int f, char *buf, size_t size);

/* The target features of c's targets key, ascending, into feat [features];
 * *O receives their count. */
ls_err_t train_conf_targets(const ls_train_conf_t *c, int *feat, int *O);

ls_err_t train_conf_copy(ls_train_conf_t *dst, const ls_train_conf_t *src);

/* The configuration's table of keys (conf.c) and their count (*n): what
 * conf_kept.c reads and writes of a snapshot's settings. */
const base_key_t *train_conf_table(size_t *n);

/* The keys with a flag of mask (LS_KEY_FIXED, ...) and their values, one
 * "key=value\n" each in the table's order, doubles to the last bit: what a
 * snapshot keeps of its run's configuration (its settings section). *len
 * receives the bytes written (no NUL counted). */
ls_err_t train_conf_settings(const ls_train_conf_t *c, unsigned mask, char *buf, size_t size,
                             size_t *len);

/* Reconciles c with the settings a snapshot (path, for messages) was
 * written with: a fixed key that c was not given takes the snapshot's
 * value; one given another value is refused, naming the key and both
 * values; a fixed key the snapshot does not know (a later option) must be
 * at its default; a noted key that differs, and a setting this version does
 * not know, are appended to note. */
ls_err_t train_conf_adopt(ls_train_conf_t *c, const char *text, size_t len, const char *path,
                          char *note, size_t note_size);

/* A snapshot that keeps no settings (format 4): the options that came
 * later and changed training take the values it was trained with, unless
 * given (then refused when they differ). */
ls_err_t train_conf_adopt_earlier(ls_train_conf_t *c, const char *path, char *note,
                                  size_t note_size);

/* "topic, format, ...": the fixed keys, for messages. */
const char *train_conf_fixed_names(void);
void train_conf_free_kafka(ls_train_conf_t *c);

/* What monitoring (train/monitor.c) reads of a trainer, defined in
 * trainer.c: its view (view.h) and snapshot bookkeeping, read on the
 * trainer's thread (from the step callback), and the time of the step
 * loop's last turn (base_now_ms(); a step, or an idle turn in live mode),
 * which any thread may read. */
struct train_view_s;
struct train_snaps_s;
const struct train_view_s *train_view_of(const ls_trainer_t *tr);

/* A step's forecasts of its trained targets, for a watcher (the live page,
 * train/page.c): the test-then-train forecasts behind the step's loss, in
 * the data's units. wins [n] are the step's windows; row t of window b is
 * at r = t * n + b of the [T, n, ...] buffers. */
typedef struct train_forecasts_s {
  const ls_window_t *const *wins;
  int n, T, O;
  const float *mask;   /* [T, n] */
  const int64_t *time; /* [T, n] the target's event time */
  const double *base;  /* [T, n, O] forecast = base + alpha * scale * pred */
  const double *scale; /* [T, n, O] */
  const float *pred;   /* [T, n, O] */
  const float *next;   /* [T, n, O] the actual */
  const double *alpha; /* [O] */
  int64_t step;        /* the steps trained before this one */
} train_forecasts_t;
typedef void (*train_forecasts_fn)(void *opaque, const train_forecasts_t *fc);

/* fn (NULL: none) is called on the trainer's thread after every step's
 * forward with its forecasts (trainer.c). */
void train_watch_forecasts(ls_trainer_t *tr, train_forecasts_fn fn, void *opaque);
struct train_snaps_s *train_snaps_of(const ls_trainer_t *tr);
int64_t train_heartbeat_ms(const ls_trainer_t *tr);

#endif
