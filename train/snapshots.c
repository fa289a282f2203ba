/*
 * Snapshots in the step loop: resuming from one, taking them in the
 * background, and committing them across ranks (see include/lstream/train.h).
 *
 * Taking one, per step (every rank, in lockstep):
 *   before the step's sums, each rank adds: rank 0 whether one is due, its
 *   writer's busy flag, whether its shard of the pending snapshot is written,
 *   and (rank 0) the last committed step;
 *   after the sums: a due snapshot is filled and submitted by every rank
 *   (or skipped by all while any is busy); once every shard is written,
 *   rank 0 commits; once committed, every rank commits its partitions'
 *   offsets to the consumer group.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/digest.h"
#include "trainer_internal.h"

/* ------------------------------------------------------------------------ */
/* Configuration fingerprint                                                 */

uint64_t train_fingerprint(const ls_train_conf_t *c) {
  char text[1024];
  /* What decides the model and the steps a resumed run must reproduce; not
   * where it reads from, how many ranks, or how it snapshots. */
  int const n = snprintf(text, sizeof text,
                         "topic=%s format=%d F=%d T=%d B=%d H=%d L=%d opt=%d lr=%.17g b1=%.17g "
                         "b2=%.17g eps=%.17g wd=%.17g clip=%.17g warmup=%d acc=%d seed=%" PRId64
                         " stateless=%d",
                         c->topic, c->format, c->features, c->window, c->batch, c->hidden,
                         c->layers, c->optimizer, c->lr, c->beta1, c->beta2, c->eps,
                         c->weight_decay, c->clip, c->warmup, c->accumulate, c->seed,
                         c->stateless);
  return base_fnv1a(BASE_FNV1A_INIT, text, n < (int)sizeof text ? (size_t)n : sizeof text);
}

/* ------------------------------------------------------------------------ */
/* Resuming                                                                  */

static void note_reject(void *opaque, const char *path, ls_err_t err, const char *why) {
  ls_trainer_t *const tr = opaque;
  size_t const len = strlen(tr->note);
  snprintf(tr->note + len, sizeof tr->note - len, "passed over %s (%s: %s); ", path,
           ls_err2str(err), why);
}

ls_err_t train_snapshot_find(ls_trainer_t *tr, ls_snapshot_t **snap) {
  const ls_train_conf_t *const c = &tr->conf;
  *snap = NULL;
  tr->sum.resumed_step = -1;
  char path[2048] = "";
  if (!strcmp(c->resume, "none")) return LS_OK;
  if (!strcmp(c->resume, "latest")) {
    if (c->snapshot_dir[0] == '\0') return LS_OK;
    /* Rank 0 chooses; the others take the same step, so that every rank
     * resumes from one snapshot even if files change meanwhile. */
    double step = -1.0;
    if (tr->rank == 0) {
      LS_FORWARD_IF_ERROR(
          ls_snapshot_find_latest(c->snapshot_dir, note_reject, tr, path, sizeof path));
      ls_snapshot_manifest_t *man = NULL;
      if (path[0] != '\0') {
        LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &man));
        int64_t s = 0;
        int32_t w = 0;
        ls_err_t const err = ls_snapshot_manifest_get(man, &s, &w);
        ls_snapshot_manifest_destroy(man);
        LS_FORWARD_IF_ERROR(err);
        step = (double)s;
      }
    }
    double v[1] = {tr->rank == 0 ? step + 1.0 : 0.0};
    LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->comm, v, 1));
    if (v[0] < 1.0) return LS_OK; /* no snapshot yet: a fresh start */
    snprintf(path, sizeof path, "%s/snap-%012" PRId64, c->snapshot_dir, (int64_t)v[0] - 1);
  } else {
    snprintf(path, sizeof path, "%s", c->resume);
  }
  LS_FORWARD_IF_ERROR(ls_snapshot_load(path, tr->world, tr->rank, snap));
  ls_snapshot_info_t info;
  ls_shape_t shape;
  ls_err_t err = ls_snapshot_get_info(*snap, &info);
  if (err == LS_OK) err = ls_snapshot_get_shape(*snap, &shape);
  if (err == LS_OK && (shape.input_size != c->features || shape.hidden_size != c->hidden ||
                       shape.num_layers != c->layers || shape.output_size != c->features))
    err = ls_error_set(LS_ERR_INVALID_ARG,
                       "snapshot %s holds a model of features %d, hidden %d, layers %d; this run "
                       "has %d, %d, %d: resume with the same model, or --resume none",
                       path, shape.input_size, shape.hidden_size, shape.num_layers, c->features,
                       c->hidden, c->layers);
  if (err == LS_OK && info.fingerprint != tr->fingerprint)
    err = ls_error_set(LS_ERR_INVALID_ARG,
                       "snapshot %s was written with another configuration (topic, format, "
                       "window, batch, optimizer settings, seed or stateless differ): resume "
                       "with the same options, or --resume none",
                       path);
  if (err != LS_OK) {
    ls_snapshot_destroy(*snap);
    *snap = NULL;
    return err;
  }
  tr->sum.resumed_step = info.step;
  size_t const len = strlen(tr->note);
  snprintf(tr->note + len, sizeof tr->note - len, "resumed from %s (step %" PRId64 ", %d rank%s)",
           path, info.step, info.world, info.world == 1 ? "" : "s");
  return LS_OK;
}

ls_err_t train_snapshot_apply(ls_trainer_t *tr, const ls_snapshot_t *snap) {
  ls_snapshot_model_t model;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_model(snap, &model));
  LS_FORWARD_IF_ERROR(ls_engine_write_params(tr->eng, model.params, model.n));
  LS_FORWARD_IF_ERROR(
      ls_engine_write_optimizer(tr->eng, model.adam_m, model.adam_v, model.n, model.adam_steps));
  /* The series in their order: the slots, and so the table, come out as
   * those of the run that wrote the snapshot. */
  size_t const S = ls_snapshot_series_count(snap);
  for (size_t i = 0; i < S; i++) {
    ls_series_info_t s;
    int64_t slot = -1;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_series(snap, i, &s, NULL, NULL));
    LS_FORWARD_IF_ERROR(ls_series_table_slot(tr->series, s.key, s.key_len, s.partition, &slot));
    LS_FORWARD_IF_ERROR(
        ls_series_table_restore(tr->series, slot, s.windows, s.records, s.last_offset));
  }
  if (S > 0) {
    const float *h = NULL, *c = NULL;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_states(snap, &h, &c));
    LS_FORWARD_IF_ERROR(ls_state_table_write(ls_series_table_states(tr->series), 0, S, h, c));
  }
  ls_snapshot_info_t info;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_info(snap, &info));
  tr->sum.steps = info.step;
  tr->sum.updates = model.adam_steps;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Taking snapshots                                                          */

ls_err_t train_snapshot_open(ls_trainer_t *tr) {
  const ls_train_conf_t *const c = &tr->conf;
  tr->snap_pending = -1;
  tr->snap_last_t = base_now_s();
  if (c->snapshot_dir[0] == '\0') return LS_OK;
  ls_snapshot_conf_t sc;
  ls_snapshot_conf_init(&sc);
  sc.level = c->snapshot_level;
  sc.workers = c->snapshot_threads;
  sc.shuffle = c->snapshot_shuffle;
  sc.keep = c->snapshot_keep;
  ls_shape_t const shape = {c->features, c->hidden, c->layers, c->features};
  size_t const P = tr->P > 0 ? (size_t)tr->P : 1;
  tr->snap_parts = calloc(P, sizeof *tr->snap_parts);
  tr->snap_offsets = calloc(P, sizeof *tr->snap_offsets);
  LS_RETURN_IF(tr->snap_parts == NULL || tr->snap_offsets == NULL, LS_ERR_NOMEM,
               "no memory for snapshot offsets");
  return ls_snapshotter_new(c->snapshot_dir, &shape, &sc, &tr->snapper);
}

void train_snapshot_contribute(ls_trainer_t *tr, double *v) {
  memset(v, 0, SNAP_V__N * sizeof *v);
  if (tr->snapper == NULL) return;
  ls_snapshotter_status_t st;
  if (ls_snapshotter_poll(tr->snapper, &st) != LS_OK) return;
  const ls_train_conf_t *const c = &tr->conf;
  if (tr->rank == 0) {
    int64_t const next = tr->sum.steps + 1;
    v[SNAP_V_DUE] = (c->snapshot_every > 0 && next % c->snapshot_every == 0) ||
                    (c->snapshot_interval > 0 && base_now_s() - tr->snap_last_t >= c->snapshot_interval);
    v[SNAP_V_COMMITTED] = (double)(st.committed_step + 1); /* 0: none yet */
  }
  v[SNAP_V_BUSY] = st.busy || tr->snap_pending >= 0;
  v[SNAP_V_SHARDS] = tr->snap_pending >= 0 && !st.busy && st.written_step == tr->snap_pending;
  /* The pending snapshot's write (or rank 0's commit) failed. */
  v[SNAP_V_FAILED] = tr->snap_pending >= 0 && !st.busy && st.err != LS_OK;
}

/* Fills the staging snapshot with this rank's part at the current step and
 * hands it to the writer. */
static ls_err_t take(ls_trainer_t *tr) {
  ls_snapshot_t *const snap = ls_snapshotter_staging(tr->snapper);
  ls_snapshot_reset(snap);
  ls_snapshot_info_t const info = {tr->sum.steps, (uint64_t)tr->conf.seed, tr->fingerprint,
                                   tr->world, tr->rank};
  LS_FORWARD_IF_ERROR(ls_snapshot_set_info(snap, &info));
  if (tr->rank == 0) LS_FORWARD_IF_ERROR(ls_snapshot_set_engine(snap, tr->eng));
  LS_FORWARD_IF_ERROR(ls_snapshot_add_series_table(snap, tr->series));
  tr->snap_n = 0;
  for (int i = 0; i < tr->P; i++) {
    int64_t offset = 0;
    LS_FORWARD_IF_ERROR(ls_ingest_resume_offset(tr->ing, tr->parts[i], &offset));
    LS_FORWARD_IF_ERROR(ls_snapshot_add_partition(snap, tr->parts[i], offset));
    tr->snap_parts[tr->snap_n] = tr->parts[i];
    tr->snap_offsets[tr->snap_n++] = offset;
  }
  int busy = 0;
  LS_FORWARD_IF_ERROR(ls_snapshotter_submit(tr->snapper, &busy));
  LS_RETURN_IF(busy, LS_ERR_STATE, "snapshot writer busy although every rank reported it idle");
  tr->snap_pending = tr->sum.steps;
  tr->commit_asked = 0;
  tr->snap_last_t = base_now_s();
  return LS_OK;
}

/* The pending snapshot committed: its offsets go to the consumer group
 * (informational; a failure is reported, not fatal). */
static void committed(ls_trainer_t *tr, ls_step_stats_t *st) {
  if (tr->ing != NULL && tr->snap_n > 0 &&
      ls_ingest_commit(tr->ing, tr->snap_n, tr->snap_parts, tr->snap_offsets) != LS_OK) {
    snprintf(tr->snap_error, sizeof tr->snap_error,
             "snapshot of step %" PRId64 " committed, but not its offsets to the consumer group: %s",
             tr->snap_pending, ls_last_error());
    st->snapshot_error = tr->snap_error;
  }
  st->snapshot_committed = tr->snap_pending;
  tr->sum.snapshots++;
  tr->snap_pending = -1;
}

ls_err_t train_snapshot_after_step(ls_trainer_t *tr, const double *v, int stepped,
                                   ls_step_stats_t *st) {
  st->snapshot_committed = -1;
  if (tr->snapper == NULL) return LS_OK;
  if (tr->snap_pending >= 0 && v[SNAP_V_FAILED] > 0) {
    /* A failed write or commit, on any rank, drops that snapshot everywhere;
     * training goes on and the next one is taken when due. */
    ls_snapshotter_status_t status;
    LS_FORWARD_IF_ERROR(ls_snapshotter_poll(tr->snapper, &status));
    snprintf(tr->snap_error, sizeof tr->snap_error, "snapshot of step %" PRId64 " failed%s%s",
             tr->snap_pending, status.err != LS_OK ? ": " : " on another rank",
             status.err != LS_OK ? status.message : "");
    st->snapshot_error = tr->snap_error;
    tr->snap_pending = -1;
  }
  if (tr->snap_pending >= 0) {
    if (tr->world > 1 && tr->rank == 0 && !tr->commit_asked &&
        v[SNAP_V_SHARDS] == (double)tr->world) {
      int busy = 0;
      LS_FORWARD_IF_ERROR(
          ls_snapshotter_commit(tr->snapper, tr->snap_pending, tr->world, &busy));
      tr->commit_asked = !busy;
    }
    if (v[SNAP_V_COMMITTED] - 1.0 >= (double)tr->snap_pending) committed(tr, st);
  }
  if (stepped && v[SNAP_V_DUE] > 0 && tr->acc_steps == 0) {
    if (v[SNAP_V_BUSY] > 0) {
      st->snapshot_skipped = 1;
      tr->sum.snapshots_skipped++;
    } else {
      LS_FORWARD_IF_ERROR(take(tr));
    }
  }
  return LS_OK;
}

ls_err_t train_snapshot_final(ls_trainer_t *tr) {
  if (tr->snapper == NULL || tr->sum.steps == 0) return LS_OK;
  /* Rounds of: wait for the writer, sum the ranks' figures, commit what is
   * written; until a snapshot of the final step has committed. */
  for (;;) {
    (void)ls_snapshotter_flush(tr->snapper); /* a failure shows in the poll below */
    double v[SNAP_V__N];
    train_snapshot_contribute(tr, v);
    v[SNAP_V_DUE] = 0;
    LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->comm, v, SNAP_V__N));
    int const failed = v[SNAP_V_FAILED] > 0;
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    LS_FORWARD_IF_ERROR(train_snapshot_after_step(tr, v, 0, &st));
    LS_RETURN_IF(failed, LS_ERR_IO, "the last snapshot: %s", st.snapshot_error);
    if (tr->snap_pending >= 0) continue;
    /* Nothing in flight: done if the final step is committed (or cannot be
     * taken, in the middle of an accumulation). */
    if (v[SNAP_V_COMMITTED] - 1.0 >= (double)tr->sum.steps || tr->acc_steps != 0) return LS_OK;
    LS_FORWARD_IF_ERROR(take(tr));
  }
}
