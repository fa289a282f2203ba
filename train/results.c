/*
 * What the caller of a run reads of a trainer (include/lstream/train.h,
 * "Results"), and the figures of a rank for the sums across ranks
 * (train/view.h): the digests of the model and of the series, the
 * records rejected.
 */
#include <stdlib.h>

#include "base/digest.h"
#include "figures.h"
#include "predict.h"
#include "snapshots.h"
#include "trainer.h"
#include "view.h"

ls_err_t train_view_digest(const train_view_t *view, uint64_t *params, uint64_t *states) {
  size_t const n = ls_engine_param_count(view->eng);
  float *p = malloc(n * sizeof(float));
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for %zu parameters", n);
  ls_err_t const err = ls_engine_read_params(view->eng, p, n);
  uint64_t const h = base_fnv1a(BASE_FNV1A_INIT, p, n * sizeof(float));
  free(p);
  LS_FORWARD_IF_ERROR(err);
  *params = h;
  uint64_t mine = 0;
  LS_FORWARD_IF_ERROR(ls_series_table_digest(view->series, &mine));
  /* Every rank's digest, summed in two exact 32-bit halves, then mixed. */
  double v[2] = {(double)(mine >> 32), (double)(mine & 0xffffffffu)};
  LS_FORWARD_IF_ERROR(comm_sum_doubles(view->comm, v, 2));
  uint64_t const hi = (uint64_t)v[0], lo = (uint64_t)v[1];
  *states = view->world == 1 ? mine : (hi * 0x9E3779B97F4A7C15ull) ^ lo ^ (hi << 32);
  return LS_OK;
}

void train_view_rejections(const train_view_t *view, double *out) {
  ls_ingest_stats_t is;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    out[r] = 0.0;
  if (view->ing != NULL && ls_ingest_stats(view->ing, &is) == LS_OK)
    for (int r = 0; r < LS_REJECT__COUNT; r++)
      out[r] = (double)is.w.rejected[r];
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */

ls_err_t ls_trainer_rank(const ls_trainer_t *tr, int *rank, int *world) {
  LS_RETURN_IF(tr == NULL || rank == NULL || world == NULL, LS_ERR_INVALID_ARG,
               "trainer, rank or world is NULL");
  *rank = tr->v.rank;
  *world = tr->v.world;
  return LS_OK;
}

size_t ls_trainer_param_count(const ls_trainer_t *tr) {
  return tr == NULL ? 0 : ls_engine_param_count(tr->v.eng);
}

ls_err_t ls_trainer_params(ls_trainer_t *tr, float *dst, size_t n) {
  LS_RETURN_IF(tr == NULL, LS_ERR_INVALID_ARG, "trainer is NULL");
  return ls_engine_read_params(tr->v.eng, dst, n);
}

ls_err_t ls_trainer_summary(ls_trainer_t *tr, ls_train_summary_t *out) {
  LS_RETURN_IF(tr == NULL || out == NULL, LS_ERR_INVALID_ARG, "trainer or out is NULL");
  *out = tr->sum;
  train_snaps_totals(tr->snaps, out);
  out->series = (int64_t)ls_series_table_count(tr->v.series);
  out->threads = ls_engine_get_conf(tr->v.eng)->threads;
  /* Updates taken: the optimizer's own count (the same on every rank). */
  int64_t const taken = ls_engine_optimizer_steps(tr->v.eng);
  LS_RETURN_IF(taken < 0, LS_ERR_STATE, "cannot read the optimizer's update count: %s",
               ls_last_error());
  out->updates = taken;
  LS_FORWARD_IF_ERROR(figures_summary(tr->v.fig, tr->v.comm, out));
  ls_ingest_stats_t is = {0};
  if (tr->v.ing != NULL) LS_FORWARD_IF_ERROR(ls_ingest_stats(tr->v.ing, &is));
  predict_counts_t pc;
  predict_counts(tr->v.pred, &pc);
  enum { N = 20 };
  double v[N + LS_REJECT__COUNT] = {(double)out->series,
                                    out->wait_s,
                                    out->comm_s,
                                    (double)is.w.resets,
                                    (double)is.w.evicted,
                                    (double)is.w.evicted_records,
                                    (double)tr->sum.evicted_states,
                                    (double)pc.next,
                                    (double)pc.eval,
                                    (double)pc.published,
                                    (double)pc.skipped,
                                    (double)pc.rows,
                                    (double)pc.waits,
                                    (double)is.w.records,
                                    (double)is.dead_letters,
                                    (double)is.w.late,
                                    (double)is.w.moved,
                                    (double)is.partitions_added,
                                    (double)is.arrived,
                                    (double)pc.during_steps};
  train_view_rejections(&tr->v, v + N);
  LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->v.comm, v, N + LS_REJECT__COUNT));
  out->series = (int64_t)v[0];
  out->wait_s = v[1] / tr->v.world;
  out->comm_s = v[2] / tr->v.world;
  out->resets = (int64_t)v[3];
  out->evicted = (int64_t)v[4];
  out->evicted_records = (int64_t)v[5];
  out->evicted_states = (int64_t)v[6];
  out->predictions_next = (int64_t)v[7], out->predictions_eval = (int64_t)v[8];
  out->predictions_published = (int64_t)v[9], out->predictions_skipped = (int64_t)v[10];
  out->predictions_rows = (int64_t)v[11], out->predictions_waits = (int64_t)v[12];
  out->read = (int64_t)v[13], out->dead_letters = (int64_t)v[14];
  out->late = (int64_t)v[15];
  out->moved = (int64_t)v[16], out->partitions_added = (int64_t)v[17];
  out->arrived = (int64_t)v[18];
  out->predictions_during_steps = (int64_t)v[19];
  out->rejected = 0;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    out->rejected += out->rejected_by[r] = (int64_t)v[N + r];
  return LS_OK;
}

ls_err_t ls_trainer_digest(ls_trainer_t *tr, uint64_t *params, uint64_t *states) {
  LS_RETURN_IF(tr == NULL || params == NULL || states == NULL, LS_ERR_INVALID_ARG,
               "trainer or outputs are NULL");
  return train_view_digest(&tr->v, params, states);
}

const char *ls_trainer_note(const ls_trainer_t *tr) {
  return tr == NULL ? "" : tr->note;
}

int ls_trainer_finished(const ls_trainer_t *tr) {
  return tr != NULL && tr->finished;
}

int64_t ls_trainer_series_count(const ls_trainer_t *tr) {
  return tr == NULL ? 0 : (int64_t)ls_series_table_count(tr->v.series);
}

ls_err_t ls_trainer_series_info(ls_trainer_t *tr, int64_t i, ls_series_info_t *out) {
  LS_RETURN_IF(tr == NULL, LS_ERR_INVALID_ARG, "trainer is NULL");
  return ls_series_table_info(tr->v.series, i, out);
}

ls_err_t ls_trainer_series_errors(ls_trainer_t *tr, int64_t i, const double **errors,
                                  int *targets) {
  LS_RETURN_IF(tr == NULL || errors == NULL || targets == NULL, LS_ERR_INVALID_ARG,
               "trainer, errors or targets is NULL");
  ls_series_stats_t st;
  LS_FORWARD_IF_ERROR(ls_series_table_peek(tr->v.series, i, &st));
  *errors = st.errors;
  *targets = tr->prep->O;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Monitoring (train_internal.h)                                             */

const train_view_t *train_view_of(const ls_trainer_t *tr) {
  return &tr->v;
}
train_snaps_t *train_snaps_of(const ls_trainer_t *tr) {
  return tr->snaps;
}
int64_t train_heartbeat_ms(const ls_trainer_t *tr) {
  return atomic_load_explicit(&tr->beat_ms, memory_order_relaxed);
}
