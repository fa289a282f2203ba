/*
 * Internals of the step loop shared by train/trainer.c and
 * train/snapshots.c: the trainer's fields.
 */
#ifndef LSTREAM_TRAINER_INTERNAL_H
#define LSTREAM_TRAINER_INTERNAL_H

#include "comm.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "train_internal.h"

/* Steps whose losses the summary keeps for its tail (the last fifth). */
#define TAIL_RING 65536

typedef struct step_loss_s {
  double loss, base, count;
} step_loss_t;

struct ls_trainer_s {
  ls_train_conf_t conf;
  comm_t *comm;
  int rank, world;
  int overlap; /* gradient sums start during backward (grads_ready) */
  ls_engine_t *eng;
  ls_series_table_t *series;
  ls_ingest_t *ing;
  ls_optim_t opt;
  int F, T, B;

  int32_t *parts; /* [P] partitions this rank reads, ascending */
  int P;
  int P_all;      /* partitions of all ranks */
  int *ended;                /* [P] partition delivered its last window (replay) */
  const ls_window_t **held;  /* [P] a partition's next window, taken but not yet used */
  int quota;                 /* replay: windows a step takes from each partition */
  const ls_window_t **defer; /* live: windows waiting for a later step, in order */
  int n_defer, cap_defer;

  /* The step being formed and its host buffers. */
  const ls_window_t **wins; /* [B] */
  int64_t *slots;           /* [B] series slots, -1 for stateless gathers */
  int64_t *gather;          /* [B] slots to gather from (-1 = zero state) */
  int64_t *mark;            /* [cap_mark] per slot: the stamp of the step using it */
  size_t cap_mark;
  int64_t stamp;
  float *x, *y, *mask; /* [T, B, F], [T, B, F], [T, B] */

  /* Accumulation and totals. */
  double acc_count;
  int acc_steps;
  ls_train_summary_t sum;
  step_loss_t *ring; /* [TAIL_RING] */

  /* A step's loss and gradient norm are read one step late (the engine's
   * figures, fetched at the end of the step, read once the next step is
   * queued), and its stats handed on then. */
  ls_step_stats_t pend; /* the last step's stats, but its loss (and norm) */
  int has_pend;
  int fetched;          /* figures fetched at the end of the last step */
  int fetched_loss;     /* and this rank computed windows in it */

  /* Snapshots (train/snapshots.c). */
  ls_snapshotter_t *snapper; /* NULL without snapshot_dir */
  uint64_t fingerprint;      /* of the configuration a snapshot must match */
  int64_t snap_pending;      /* step of the snapshot being written or committed; -1 none */
  int commit_asked;          /* rank 0 asked the writer to commit snap_pending */
  double snap_last_t;        /* when the last snapshot was taken (rank 0) */
  int32_t *snap_parts;       /* [P] this rank's partitions in the pending snapshot */
  int64_t *snap_offsets;     /* [P] their resume offsets */
  int snap_n;
  char note[2048];           /* what resuming did, for the program to print */
  char snap_error[640];      /* the last snapshot failure, for the step's stats */
};


/* Monotonic seconds. */
double train_now(void);

/* Snapshot figures every rank adds to a step's sums (see trainer.c). */
enum { SNAP_V_DUE, SNAP_V_BUSY, SNAP_V_SHARDS, SNAP_V_COMMITTED, SNAP_V_FAILED, SNAP_V__N };

/* Before ls_trainer_new opens ingest: finds the snapshot to resume from
 * (resume key), loads this rank's part into *snap (NULL when there is none)
 * and checks it against the configuration. */
ls_err_t train_snapshot_find(ls_trainer_t *tr, ls_snapshot_t **snap);

/* Applies a loaded snapshot: model and optimizer into the engine, series
 * with their counts and states into the series table, counters. */
ls_err_t train_snapshot_apply(ls_trainer_t *tr, const ls_snapshot_t *snap);

/* Starts the background writer when snapshot_dir is set. */
ls_err_t train_snapshot_open(ls_trainer_t *tr);

/* This rank's contribution to the step's sums, v [SNAP_V__N]. */
void train_snapshot_contribute(ls_trainer_t *tr, double *v);

/* After the step's sums (v summed over ranks) and its update: commits,
 * consumer-group offsets, and a new snapshot when one is due. stepped = the
 * step trained windows; st receives events for the log. */
ls_err_t train_snapshot_after_step(ls_trainer_t *tr, const double *v, int stepped,
                                   ls_step_stats_t *st);

/* At the end of a run: a last snapshot of the final state, committed. */
ls_err_t train_snapshot_final(ls_trainer_t *tr);

/* The configuration's fingerprint: what a resumed run must share. */
uint64_t train_fingerprint(const ls_train_conf_t *c);

#endif
