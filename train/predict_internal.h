/*
 * Forecasts going out, internal (train/predict.h): what predict.c (the
 * serving state and when forecasts are made) and predict_out.c (where they
 * go: the topic, the file, what a previous run left) share.
 */
#ifndef LSTREAM_TRAIN_PREDICT_INTERNAL_H
#define LSTREAM_TRAIN_PREDICT_INTERNAL_H

#include <pthread.h>
#include <stdio.h>

#include "base/keymap.h"
#include "lstream/kernels.h"
#include "lstream/produce.h"
#include "predict.h"

/* One series' serving state beside the series table's. */
typedef struct pseries_s {
  int synced;     /* its serving (h, c) is the trained state table's row */
  int dirty;      /* in the list of series with records to serve */
  int64_t norm_n; /* its serving normaliser: the trained one and the records served */
  double *norm;   /* [F, LS_NORM_STATS] */
  double *model;  /* [ls_series_stats_t.model_n] its serving seasons and linear path (NULL:
                     none) */
  /* Records read from its trained boundary on, in order: [head, n); those
   * before adv are in its serving state. */
  int64_t head, adv, n, cap;
  int64_t *off, *time;
  float *x;          /* [cap, F] */
  int64_t last_time; /* event time of the last record read, -1 none */
  int64_t reset_at;  /* the offset of the record whose serving starts from a zero state (the
                        first after a gap: --reset-gap-ms), -1 none */
} pseries_t;

struct predict_s {
  const struct train_view_s *v;
  prep_t *p;
  const figures_t *fig;
  int kinds, live;
  int T, F, I, O, B; /* B: the engine's largest batch */
  int H, OH;         /* horizons, O H point forecasts a forecast (prep.h) */
  int NQ, W;         /* quantile levels; W = OH (1 + Q) head outputs, and values a forecast */
  double *value;     /* [W] one forecast's, scratch (values_of's layout) */
  double *qv;        /* [Q OH] its quantiles, scratch */
  char qtext[PREP_QUANTILES_MAX * 24]; /* the levels, "0.1,0.5,0.9" */

  /* Where forecasts go (predict_out.c). */
  ls_format_t format;
  char (*names)[64];   /* [O] json, avro: the targets' names, the forecast's fields */
  ls_publisher_t *pub; /* NULL without a topic */
  int32_t Q;           /* the topic's partitions */
  char run[17];        /* the run's id (header lstream-run): hex */
  int exact;           /* a snapshot directory: exactly once */
  FILE *file;          /* NULL without one */
  char path[1100];
  char *row; /* [O * 52 + 16] the last row's h and values as text, row_n bytes */
  size_t row_n;
  double *row_value; /* [O] the forecast it holds */
  int row_h;         /* and its horizon */
  float *row_x;      /* [F] and its actual (row_actual: one) */
  int row_actual;
  base_keymap_t seen; /* (series key) -> index in seen_off: what the topic holds already */
  char **seen_key;
  int64_t *seen_off; /* [n, 2]: per kind (next, eval) the highest source offset, -1 */
  char *seen_open;   /* [n, 2]: 1 until this run made the forecast at seen_off */
  size_t seen_cap;
  int64_t open;       /* entries of seen_open at 1: while any, this run's snapshots send a
                         resumed run to read back from where this one did (back_from) */
  int64_t *back_from; /* [Q] where this run read the topic back from */
  char *buf;          /* [buf_cap] a message's value */
  size_t buf_cap;
  int64_t made[2], skipped, rows;
  int64_t during_steps; /* next forecasts made on the serving thread */

  /* Serving (predict.c). */
  ls_engine_t *eng;        /* the serving forward's: the trainer's, or with the serving thread
                              its own (predict_thread.c) */
  ls_state_table_t *serve; /* serving (h, c) per slot, in eng's memory */
  pseries_t *ps;           /* [cap_ps] per slot */
  size_t cap_ps;
  int64_t *slot_of; /* [cap_slot_of] per consumer series id: its slot, -1 */
  size_t cap_slot_of;
  int64_t *id_of; /* [cap_id_of] per slot: the consumer series id slot_of last gave it, -1 */
  size_t cap_id_of;
  float *state_row; /* [2 L H] one serving state row, moved when slots move */
  int64_t *dirty;   /* [n_dirty] slots with records to serve */
  size_t n_dirty, cap_dirty;
  /* One serving batch of at most B series: slots, inputs [B, I], the head's
   * outputs [B, OH], per target base, scale and linear forecast [B, O]. */
  int64_t *b_slot;
  float *b_x, *b_pred;
  double *b_base, *b_scale, *b_lin, *b_beta; /* [B, O]: the linear path's share, the LSTM's
                                                weight (season.h) */

  /* Records a drain on the serving thread took whose series has no slot
   * yet (the series table takes new series between sections only): taken
   * in order by the next drain outside a section. later_x [n_later, F],
   * later_key: their keys, each NUL-terminated, one after the other. */
  ls_tap_record_t *later;
  float *later_x;
  char *later_key;
  size_t n_later, cap_later, key_n, key_cap;
  int on_thread; /* 1 while the serving thread drains and serves */

  /* The serving thread (predict_thread.c; NULL: none). */
  struct serve_thread_s *thread;
};

/* The serving thread (predict_thread.c). Live on the CPU, a record read
 * while the trainer runs an engine-only part of a step (a section:
 * predict_section_open / _close, predict.h) is served at once on a thread
 * of its own, with the parameters published when the section opened, on a
 * serving engine of its own (pr->eng). Outside sections it waits, and the
 * trainer's thread serves as before; the two never touch the serving state
 * at once. predict_thread_start creates the serving engine and the thread,
 * which serves with `serve` (predict.c's: what the tap brought, then every
 * record that may be served); _stop joins it (the engine stays: pr->eng,
 * its serving table's). */
typedef ls_err_t (*predict_serve_fn)(predict_t *pr, int64_t step, volatile sig_atomic_t *stop);
ls_err_t predict_thread_start(predict_t *pr, predict_serve_fn serve);
void predict_thread_stop(predict_t *pr);

/* With the serving thread: the serving engine gets the trainer's parameters
 * when they changed (the optimizer's update count moved). The trainer's
 * thread, outside sections. */
ls_err_t predict_thread_publish(predict_t *pr);

/* A forecast to send out. */
typedef struct forecast_s {
  int kind; /* PREDICT_NEXT or PREDICT_EVAL */
  int64_t slot;
  int32_t partition;
  int64_t offset, time, step;
  const double *value; /* [W] data units, h-major: per h O points, then O per quantile level */
  const float *actual; /* [known, F] the next `known` records (h = 1.. known), NULL: none */
  int known;
} forecast_t;

/* Sends a forecast out (left out when the topic holds it already): the
 * topic, and the file when its actual is known (else the series keeps it
 * to write once it is). */
ls_err_t predict_emit(predict_t *pr, const forecast_t *fc, volatile sig_atomic_t *stop);

/* The series at slot read its next record x [F]: the forecast it keeps
 * for the file (if any) is written with that actual. */
ls_err_t predict_resolve(predict_t *pr, int64_t slot, const float *x);

/* The topic, the file and the run's id (predict_new). */
ls_err_t predict_out_open(predict_t *pr);
void predict_out_close(predict_t *pr);

#endif /* LSTREAM_TRAIN_PREDICT_INTERNAL_H */
