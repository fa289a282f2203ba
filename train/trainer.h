/*
 * The trainer's fields (train/ internal), shared by its rooms: setup.c
 * (ls_trainer_new, ls_trainer_destroy), trainer.c (the step loop) and
 * results.c (what a run's caller reads of it).
 */
#ifndef LSTREAM_TRAIN_TRAINER_H
#define LSTREAM_TRAIN_TRAINER_H

#include <signal.h>
#include <stdatomic.h>

#include "guard.h"
#include "prep.h"
#include "snapshots.h"
#include "steps.h"
#include "view.h"

struct ls_trainer_s {
  ls_train_conf_t conf;
  train_view_t v; /* comm, rank, world, engine, series table, ingest, partitions, figures,
                     replay: what snapshots.c reads */
  train_snaps_t *snaps;
  int overlap; /* gradient sums start during backward (grads_ready) */
  ls_optim_t opt;
  int T, B;
  int P_all;       /* partitions of all ranks */
  size_t max_held; /* the most series of a partition the rank's table holds; 0 no bound */
  int quota;       /* replay: windows a step takes from each partition */
  steps_t *steps;
  prep_t *prep;
  ls_series_stats_t *st; /* [B] the step's windows' series state */
  int64_t *gather;       /* [B] slots to gather from (-1 = zero state) */
  float *pred;           /* [T, B, O] the step's predictions (h = 1's) */
  float *out;            /* [T, B, O H] the head's outputs, h-major (prep.h); pred with H = 1 */
  float *h0, *c0;        /* [L, B, H] the step's initial states (for replay) */
  double *v_sums;        /* [NV] the step's sums across ranks */
  int NV;

  /* Accumulation and totals. */
  double acc_count;
  int acc_steps;
  int acc_bad;  /* a step of this accumulation had a non-finite loss: skip its update */
  int finished; /* ls_trainer_finished */
  train_guard_t guard;
  ls_train_summary_t sum; /* updates: those asked of the optimizer (warm-up counts them);
                             evicted_states: this rank's */

  /* A step's stats reach the callback one step late, once the gradient
   * norm of its update (fetched at the end of the step) is read. */
  ls_step_stats_t pend;                 /* the last step's stats, but its gradient norm */
  ls_target_figures_t *pend_target;     /* [O] its per-target figures (pend.target) */
  ls_horizon_figures_t *pend_horizon;   /* [O H] and per horizon (pend.horizon, H > 1) */
  ls_quantile_figures_t *pend_quantile; /* [Q O H] and per quantile (pend.quantile, Q > 0) */
  int has_pend;
  int fetched; /* the engine's figures were fetched after the last step's update */

  volatile sig_atomic_t *stop; /* the run's stop flag (forecasts waiting for room see it) */
  char note[2560];             /* what resuming and the comm setup did, for the program to print */
  atomic_int_fast64_t beat_ms; /* base_now_ms() at the step loop's last turn */
  train_forecasts_fn watch;    /* the step's forecasts to a watcher (the live page), or NULL */
  void *watch_opaque;
};

/* What every rank contributes to a step, summed across ranks: these, then
 * the snapshots' (SNAP_V__N), then the forecasts' figures (FIG_V(O, H, Q)). */
enum {
  V_COUNT,
  V_WINDOWS,
  V_RECORDS,
  V_MORE,
  V_STOP,
  V_WAIT,
  V_COMPUTE,
  V_BACKLOG,  /* live: ranks with windows waiting for a later step */
  V_LAG,      /* ms from the event time of a window's last target to its step's end, summed */
  V_TIMED,    /* windows with an event time */
  V_REJECTED, /* [LS_REJECT__COUNT] records rejected so far, per reason */
  V__N = V_REJECTED + LS_REJECT__COUNT
};

/* Live: the partitions the consumer added since (the topic gained some,
 * ls_ingest_conf_set_growth) join the rank's: its view, its step
 * formation, its snapshots (setup.c). Between steps. */
ls_err_t train_grow_partitions(ls_trainer_t *tr);

#endif
