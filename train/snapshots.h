/*
 * Snapshots in the step loop (train/ internal): resuming from one, taking
 * them in the background, committing them across ranks. The bookkeeping is
 * snapshots.c's own (train_snaps_t); of the trainer it sees a small
 * read-only view (view.h), so snapshots.c needs nothing of trainer.c.
 */
#ifndef LSTREAM_TRAIN_SNAPSHOTS_H
#define LSTREAM_TRAIN_SNAPSHOTS_H

#include <stdint.h>

#include "lstream/ingest.h"
#include "lstream/state.h"
#include "view.h"

/* Snapshot figures every rank adds to a step's sums. */
enum {
  SNAP_V_DUE,       /* rank 0: a snapshot is due after this step */
  SNAP_V_BUSY,      /* ranks whose writer is busy */
  SNAP_V_PENDING,   /* ranks with a snapshot taken, not yet committed or dropped */
  SNAP_V_SHARDS,    /* ranks whose shard of the pending snapshot is written */
  SNAP_V_COMMITTED, /* rank 0: the last committed step + 1 */
  SNAP_V_FAILED,    /* ranks whose pending snapshot failed */
  SNAP_V__N
};

typedef struct train_snaps_s train_snaps_t;

/* The bookkeeping of a run over view, which must outlive it. */
ls_err_t train_snaps_new(const train_view_t *view, train_snaps_t **out);
void train_snaps_destroy(train_snaps_t *s); /* accepts NULL */

/* Before ingest opens: finds the snapshot to resume from (the resume key;
 * rank 0 chooses, every rank takes the same), loads this rank's part into
 * *snap (NULL when there is none) and checks it against the configuration.
 * Needs the view's conf, shape, comm, rank and world. */
ls_err_t train_snaps_find(train_snaps_t *s, ls_snapshot_t **snap);

/* After train_snaps_find, before anything is built from the configuration:
 * reconciles conf (the view's, which it may change) with the loaded
 * snapshot's settings (train_conf_adopt: fixed options not given take the
 * snapshot's values; a given one that differs is refused naming it), refuses
 * a snapshot holding a required section this version does not know, and
 * for a format-4 snapshot checks the configuration's digest. On an error
 * *snap is destroyed and NULL. */
ls_err_t train_snaps_settle(train_snaps_t *s, ls_train_conf_t *conf, ls_snapshot_t **snap);

/* train/run_id.c. The run's id, into the view (v->run): the header
 * lstream-run of its
 * forecasts and the root of its transactional ids, one per lineage of a
 * snapshot directory. Random, made when the directory is first used and
 * kept there (DIR/run-id) and in every snapshot: a directory deleted and
 * made again, or another trainer's at the same path, is another lineage.
 * A snapshot of before (format 4, or 5 without it) keeps the id its run
 * published with: a digest of the directory's absolute path. Without a
 * snapshot directory, random per run. Rank 0 decides; collective. */
ls_err_t train_run_choose(const ls_snapshot_t *snap, train_view_t *v);

/* Puts the view's run id into a snapshot being taken (its section). */
ls_err_t train_run_put(const train_view_t *v, ls_snapshot_t *snap);

/* train/marks.c. Each partition's mark (the last record read of it) into
 * a snapshot being taken: n partitions parts [n], their marks [n], and
 * topic, the topic's partitions the rank knows. */
ls_err_t train_marks_put(ls_snapshot_t *snap, int n, const int32_t *parts,
                         const ls_ingest_mark_t *marks, int32_t topic);

/* A loaded snapshot's mark of partition (offset -1 when it has none). */
ls_err_t train_marks_get(const ls_snapshot_t *snap, int32_t partition, ls_ingest_mark_t *out);

/* The topic's partitions a loaded snapshot's run knew (0: unknown, a
 * snapshot of before issue 23). */
ls_err_t train_marks_topic(const ls_snapshot_t *snap, int32_t *topic);

/* A re-sharded resume (snap, loaded from PATH for rank `rank` of `world`,
 * holds rank 0's marks): the marks of every shard whose partitions are
 * this rank's replace them, so that each is checked. */
ls_err_t train_marks_gather(const char *path, ls_snapshot_t *snap, int world, int rank);

/* The loaded snapshot's model shape against the view's (computed from the
 * settled configuration). */
ls_err_t train_snaps_check_shape(const train_snaps_t *s, const ls_snapshot_t *snap);

/* Adds this rank's partitions to ic, each where snap (NULL: none) resumes
 * it (with its mark, which the consumer checks) or else at start (one snap
 * lacks: from its beginning), and snap's records in flight to restore.
 * When the topic (topic partitions now) gained partitions since snap,
 * series new to the consumer are counted as arrived (keys that moved from
 * another rank's partitions among them: ls_ingest_conf_set_arrivals). */
ls_err_t train_snaps_ingest(const ls_snapshot_t *snap, ls_ingest_conf_t *ic, const int32_t *parts,
                            int P, int32_t topic, ls_start_t start);

/* Applies a loaded snapshot: model and optimizer into the engine, the
 * series with their counts, states and host-side state into the series
 * table (but those of partitions the consumer restarted: a topic
 * re-created), the calibration, the replay memories; *steps and *updates
 * receive the run's counts at the snapshot. */
ls_err_t train_snaps_apply(train_snaps_t *s, ls_snapshot_t *snap, int64_t *steps, int64_t *updates);

/* Starts the background writer when snapshot_dir is set. */
ls_err_t train_snaps_open(train_snaps_t *s);

/* This rank's contribution to the sums of the step after `steps` steps,
 * v [SNAP_V__N]. */
void train_snaps_contribute(train_snaps_t *s, int64_t steps, double *v);

/* After the step's sums (v summed over ranks) and its update: commits,
 * consumer-group offsets, and a new snapshot of `steps` steps when one is
 * due, unless mid_update (gradients accumulated for an update to come).
 * stepped = the step trained windows; st receives events for the log. */
ls_err_t train_snaps_after_step(train_snaps_t *s, const double *v, int64_t steps, int mid_update,
                                int stepped, ls_step_stats_t *st);

/* At the end of a run: a last snapshot of the final state, committed.
 * LS_ERR_IO when it failed on any rank (every rank returns it: the ranks
 * are still together, train_snaps_failed says so). */
ls_err_t train_snaps_final(train_snaps_t *s, int64_t steps, int mid_update);

/* 1 when train_snaps_final failed on every rank alike. */
int train_snaps_failed(const train_snaps_t *s);

/* What resuming did ("" when nothing), for the program to print. */
const char *train_snaps_note(const train_snaps_t *s);

/* The snapshot counts of a summary: resumed_step, snapshots,
 * snapshots_skipped. */
void train_snaps_totals(const train_snaps_t *s, ls_train_summary_t *sum);

/* The background writer's state (never blocks); *on = 0 (and out zeroed)
 * without snapshot_dir. */
void train_snaps_status(const train_snaps_t *s, ls_snapshotter_status_t *out, int *on);

#endif /* LSTREAM_TRAIN_SNAPSHOTS_H */
