/*
 * A read-only view of a trainer (train/ internal): the handles the rooms
 * beside the step loop need (snapshots.c, predict.c, monitor.c, results.c),
 * so that none of them needs trainer.c's fields (trainer.h).
 */
#ifndef LSTREAM_TRAIN_VIEW_H
#define LSTREAM_TRAIN_VIEW_H

#include <stdint.h>

#include "comm.h"
#include "figures.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "replay.h"
#include "train_internal.h"

/* What the rooms read of the trainer. The trainer owns it and fills the
 * handles as it creates them (before the calls that use them). */
typedef struct train_view_s {
  const ls_train_conf_t *conf;
  ls_shape_t shape; /* the model's, built from conf once */
  comm_t *comm;     /* sums across ranks */
  int rank, world;
  ls_engine_t *eng;
  ls_series_table_t *series;
  ls_ingest_t *ing;     /* NULL on a rank without partitions */
  const int32_t *parts; /* [P] this rank's partitions, ascending */
  int P;
  int32_t topic_parts;    /* the topic's partitions this rank knows (at the start; live, grown to
                             take in those added to it: its snapshots keep it, train/marks.c) */
  figures_t *fig;         /* the forecasts' calibration */
  const int64_t *updates; /* the trainer's count of updates asked (the warm-up's clock) */
  const int64_t *evicted_states; /* series states this rank's trainer forgot */
  replay_t *rep;                 /* the partitions' replay memories; NULL without replay */
  struct predict_s *pred;        /* forecasts going out; NULL without: a snapshot commits only once
                                    those made before it are committed to their topic */
  uint64_t run;                  /* the run's id (train_run_choose): its forecasts' lstream-run */
} train_view_t;

/* FNV-1a digests of the parameters and, over every rank, of the series
 * tables (ls_trainer_digest; train/results.c). Collective. */
ls_err_t train_view_digest(const train_view_t *v, uint64_t *params, uint64_t *states);

/* This rank's records rejected so far, per reason, into out [LS_REJECT__COUNT]
 * (train/results.c). */
void train_view_rejections(const train_view_t *v, double *out);

#endif /* LSTREAM_TRAIN_VIEW_H */
