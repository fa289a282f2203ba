/*
 * The step loop (include/lstream/train.h): steps formed from the data
 * (steps.c), each window's rows normalised into the model's inputs and
 * targets (prep.c), states gathered and scattered through the series table,
 * one engine step per batch, an update every `accumulate` steps, replay
 * updates after it (replay.c), the forecasts' figures (figures.c), and the
 * guard against non-finite updates (guard.c). Setting up is setup.c's, the
 * results results.c's.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "comm.h"
#include "figures.h"
#include "guard.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "predict.h"
#include "prep.h"
#include "replay.h"
#include "snapshots.h"
#include "steps.h"
#include "train_internal.h"
#include "trainer.h"

/* ------------------------------------------------------------------------ */
/* One step                                                                  */

/* What the host reads of the device in a step, and when.
 *
 * Synchronous: the step's predictions (ls_engine_read_outputs, right after
 * the forward) and, with replay, the states its windows started from. The
 * forecasts' figures need the predictions at once: the data-unit forecast
 * of each target is base + alpha * scale * p (prep.c, figures.c), the
 * step's sums of p y and p p update the calibration, and that alpha must be
 * in place before the next step's forecasts; the normalised loss is
 * computed from the same predictions on the host, so the engine's own loss
 * is never read. The replay memory (host memory, in snapshots) takes each
 * window with its initial state before this step's replay updates draw
 * from it. One wait per step, for the forward; the reads after it find the
 * device idle. The backward, scatter, sums, update and replay updates are
 * queued behind it without a wait.
 *
 * Asynchronous: the update's gradient norm, which nothing needs at once.
 * The engine's figures are fetched right after the step's own update
 * (before its replay updates, whose norms are not reported) and read one
 * step later, once the next step's work is queued (read_last), so the host
 * forms and normalises the next step while the device runs this one's
 * backward, update and replay updates. The step's stats, complete but for
 * that norm, wait in tr->pend (with a copy of their per-target figures) and
 * reach the callback then (emit_last).
 *
 * Non-finite steps (guard.h). A step's loss is known with its sums: when
 * it is not finite, its update only zeroes the gradient. A gradient that is
 * not finite is skipped on the device, inside the update; the host sees it
 * in the norm it reads a step later, and only then marks the step's stats
 * (updated 0, nonfinite 1) and logs it. */

/* Sums the gradients across ranks (unless backward started the sums, and
 * the step loop finished them) and steps the optimizer; a step of the
 * update whose loss was not finite (tr->acc_bad) makes it zero the
 * gradient instead. st->updated: the update was asked of the optimizer
 * (which skips it if the gradient is not finite: read_last tells). */
static ls_err_t update(ls_trainer_t *tr, ls_step_stats_t *st) {
  if (!tr->overlap) {
    double const s0 = base_now_s();
    LS_FORWARD_IF_ERROR(comm_sum_grads(tr->v.comm));
    tr->sum.comm_s += base_now_s() - s0;
  }
  ls_optim_t opt = tr->opt;
  int64_t const u = tr->sum.updates;
  if (tr->conf.warmup > 0 && u < tr->conf.warmup)
    opt.lr = tr->opt.lr * (float)(u + 1) / (float)tr->conf.warmup;
  float const scale = tr->acc_count > 0 ? (float)(1.0 / tr->acc_count) : 0.0f;
  if (tr->acc_bad) {
    LS_FORWARD_IF_ERROR(ls_engine_zero_grads(tr->v.eng));
  } else {
    LS_FORWARD_IF_ERROR(ls_engine_optimizer_step(tr->v.eng, &opt, scale, NULL)); /* norm: later */
    st->updated = 1;
  }
  st->lr = opt.lr;
  tr->sum.updates++;
  tr->acc_count = 0;
  tr->acc_steps = 0;
  tr->acc_bad = 0;
  return LS_OK;
}

/* The step's forecasts to the watcher (train_watch_forecasts). */
static void watch_step(ls_trainer_t *tr, const ls_window_t *const *wins, int n) {
  const prep_t *const p = tr->prep;
  train_forecasts_t const fc = {wins,
                                n,
                                tr->T,
                                p->O,
                                p->mask,
                                p->time,
                                p->base,
                                p->scale,
                                tr->pred,
                                p->next,
                                figures_alpha(tr->v.fig),
                                tr->sum.steps};
  tr->watch(tr->watch_opaque, &fc);
}

void train_watch_forecasts(ls_trainer_t *tr, train_forecasts_fn fn, void *opaque) {
  tr->watch = fn;
  tr->watch_opaque = opaque;
}

/* The training forward of n windows: targets y with a row mask (width 1:
 * one target, or --horizon 1) or a mask per target (width O H: the
 * horizons' targets, those past a window's end masked; lengths [n] its
 * rows, NULL: from the mask). */
static ls_err_t forward_train(ls_engine_t *eng, int T, int n, const float *x, const float *y,
                              const float *mask, int width, const int *lengths, double *count) {
  if (width == 1) return ls_engine_forward(eng, T, n, x, y, mask, NULL, count);
  return ls_engine_forward_elem(eng, T, n, x, y, mask, lengths, NULL, count);
}

/* h = 1's outputs of the head's [T, n, W] into pred [T, n, O]. */
static void horizon_one(const prep_t *p, int n, const float *out, float *pred) {
  for (size_t r = 0; r < (size_t)p->T * (size_t)n; r++)
    memcpy(pred + r * (size_t)p->O, out + r * (size_t)p->W, (size_t)p->O * sizeof *pred);
}

/* Closes a section (predict.h) that ended with err: err (its message
 * kept) if it failed, else the serving thread's. */
static ls_err_t section_close(ls_trainer_t *tr, ls_err_t err) {
  char why[1024] = "";
  if (err != LS_OK) snprintf(why, sizeof why, "%s", ls_last_error());
  ls_err_t const served = predict_section_close(tr->v.pred);
  return err != LS_OK ? ls_error_set(err, "%s", why) : served;
}

/* This rank's part of a step over its n windows: their rows normalised,
 * gather, forward, the figures of its forecasts, backward (accumulating
 * gradient sums), scatter, replay memory, bookkeeping. v receives its sums. */
static ls_err_t compute_step(ls_trainer_t *tr, int n, double *v) {
  const ls_window_t *const *const wins = steps_windows(tr->steps);
  const int64_t *const slots = steps_slots(tr->steps);
  prep_t *const p = tr->prep;
  ls_engine_t *const eng = tr->v.eng;
  prep_begin(p, n);
  for (int b = 0; b < n; b++) {
    LS_FORWARD_IF_ERROR(ls_series_table_stats(tr->v.series, slots[b], &tr->st[b]));
    tr->gather[b] = tr->conf.stateless || wins[b]->reset ? -1 : slots[b]; /* a gap: zero */
  }
  LS_FORWARD_IF_ERROR(prep_windows(p, n, wins, tr->st));
  ls_state_table_t *const states = ls_series_table_states(tr->v.series);
  double count = 0.0;
  LS_FORWARD_IF_ERROR(ls_engine_gather_state(eng, states, n, tr->gather));
  int width = 1;
  const float *const mask = prep_train_mask(p, &width);
  /* The forward and the backward are sections (predict.h): records read
   * meanwhile are served on the serving thread. */
  LS_FORWARD_IF_ERROR(predict_section_open(tr->v.pred, tr->sum.steps, tr->stop));
  ls_err_t err =
      forward_train(eng, tr->T, n, p->x, prep_train_y(p), mask, width, p->lengths, &count);
  if (err == LS_OK) err = ls_engine_read_outputs(eng, NULL, tr->out, NULL, NULL);
  LS_FORWARD_IF_ERROR(section_close(tr, err));
  if (tr->out != tr->pred) horizon_one(p, n, tr->out, tr->pred);
  if (tr->v.rep != NULL) LS_FORWARD_IF_ERROR(ls_engine_read_initial_state(eng, tr->h0, tr->c0));
  for (int b = 0; b < n; b++) /* the linear path learns; tr->pred becomes the model's forecast */
    prep_learn(p, b, &tr->st[b], tr->pred, tr->out);
  if (tr->watch != NULL) watch_step(tr, wins, n); /* before the calibration moves */
  LS_FORWARD_IF_ERROR(figures_score(tr->v.fig, p, tr->pred, tr->out, tr->st, v + V__N + SNAP_V__N));
  LS_FORWARD_IF_ERROR(predict_section_open(tr->v.pred, tr->sum.steps, tr->stop));
  LS_FORWARD_IF_ERROR(section_close(tr, ls_engine_backward(eng, 1.0f)));
  if (!tr->conf.stateless) LS_FORWARD_IF_ERROR(ls_engine_scatter_state(eng, states, n, slots));
  guard_scan(&tr->guard, wins, n);
  int64_t records = 0;
  int64_t const now = base_wall_ms();
  for (int b = 0; b < n; b++) {
    const ls_window_t *const w = wins[b];
    int64_t const t = w->times[w->n_targets]; /* its last target's event time */
    if (t >= 0) v[V_LAG] += (double)(now - t), v[V_TIMED]++;
    LS_FORWARD_IF_ERROR(
        ls_series_table_trained(tr->v.series, slots[b], w->n_targets, w->last_offset));
    LS_FORWARD_IF_ERROR(ls_series_table_active(tr->v.series, slots[b], t));
    records += w->n_targets;
    if (tr->v.rep != NULL)
      LS_FORWARD_IF_ERROR(replay_push(tr->v.rep, w->partition, p, b, tr->h0, tr->c0));
  }
  if (tr->v.pred != NULL) /* after backward: its serving forwards reuse the engine */
    LS_FORWARD_IF_ERROR(
        predict_step(tr->v.pred, wins, slots, n, tr->pred, tr->out, tr->sum.steps, tr->stop));
  steps_release(tr->steps, n);
  v[V_COUNT] = count, v[V_WINDOWS] = n, v[V_RECORDS] = (double)records;
  /* --series-idle, --max-series: the states of series gone quiet go (slots
   * move: between steps only). */
  if (tr->conf.series_idle_ms > 0 || tr->max_held > 0)
    LS_FORWARD_IF_ERROR(ls_series_table_evict(tr->v.series, tr->conf.series_idle_ms, tr->max_held,
                                              &tr->sum.evicted_states));
  return LS_OK;
}

/* The replay updates after an update (every rank, in lockstep): each on the
 * windows its partitions' memories give (a rank with none adds zeros), the
 * gradients and target counts summed across ranks. */
static ls_err_t replay_updates(ls_trainer_t *tr, ls_step_stats_t *st) {
  ls_engine_t *const eng = tr->v.eng;
  replay_t *const r = tr->v.rep;
  double const t0 = base_now_s();
  for (int round = 0; round < tr->conf.replay; round++) {
    int n = 0;
    double count = 0.0;
    /* The last update's sums are done before this one's uploads, which may
     * wait on the host for an upload queued behind them. */
    LS_FORWARD_IF_ERROR(comm_wait(tr->v.comm));
    replay_gather(r, (uint64_t)tr->conf.seed, tr->sum.steps, round, &n);
    if (n > 0) {
      LS_FORWARD_IF_ERROR(ls_engine_set_state(eng, n, replay_h0(r), replay_c0(r)));
      int width = 1;
      const float *const mask = replay_mask(r, &width);
      LS_FORWARD_IF_ERROR(
          forward_train(eng, tr->T, n, replay_x(r), replay_y(r), mask, width, NULL, &count));
      LS_FORWARD_IF_ERROR(ls_engine_backward(eng, 1.0f));
    } else if (tr->overlap) {
      LS_FORWARD_IF_ERROR(comm_grads_start_segments(tr->v.comm));
    }
    LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->v.comm, &count, 1));
    if (tr->overlap) LS_FORWARD_IF_ERROR(comm_grads_finish(tr->v.comm));
    ls_step_stats_t ignored = *st;
    tr->acc_count = count;
    if (count > 0) LS_FORWARD_IF_ERROR(update(tr, &ignored));
  }
  st->compute_s += base_now_s() - t0;
  tr->sum.compute_s += base_now_s() - t0;
  return LS_OK;
}

/* After the step's sums v (every rank's): its figures (a loss that is not
 * finite marks the update it belongs to, and no forecast that is not
 * finite enters a total), the update when one is due (its gradient norm
 * fetched, read a step later), the replay updates after it, the run's
 * totals. */
static ls_err_t after_sums(ls_trainer_t *tr, const double *v, ls_step_stats_t *st) {
  int const loss_bad = figures_step(tr->v.fig, v + V__N + SNAP_V__N, st);
  tr->acc_bad |= loss_bad;
  tr->acc_count += v[V_COUNT];
  /* The update and the replay updates: a section (predict.h), to the end. */
  LS_FORWARD_IF_ERROR(predict_section_open(tr->v.pred, tr->sum.steps, tr->stop));
  ls_err_t err = LS_OK;
  if (++tr->acc_steps == tr->conf.accumulate) {
    err = update(tr, st);
    if (err == LS_OK && st->updated) err = ls_engine_fetch_figures(tr->v.eng);
    tr->fetched = err == LS_OK && st->updated;
  }
  st->step = ++tr->sum.steps;
  st->windows = (int)v[V_WINDOWS];
  st->records = (int64_t)v[V_RECORDS];
  /* Times: the mean over ranks. */
  st->compute_s = v[V_COMPUTE] / tr->v.world;
  st->wait_s = v[V_WAIT] / tr->v.world;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    st->rejected[r] = (int64_t)v[V_REJECTED + r];
  st->lag_ms = v[V_TIMED] > 0 ? v[V_LAG] / v[V_TIMED] : NAN;
  tr->sum.windows += st->windows;
  tr->sum.records += st->records;
  tr->sum.loss_sum += st->loss_sum;
  tr->sum.baseline_sum += st->baseline_sum;
  tr->sum.count += st->count;
  tr->sum.compute_s += st->compute_s;
  if (loss_bad) st->nonfinite = 1, st->loss_sum = NAN; /* its finite forecasts are counted */
  if (err == LS_OK && st->updated && tr->v.rep != NULL) err = replay_updates(tr, st);
  LS_FORWARD_IF_ERROR(section_close(tr, err));
  return predict_after_section(tr->v.pred, tr->sum.steps, tr->stop);
}

/* The gradient norm of the last step's update into its pending stats: the
 * engine's figures fetched after that update, read now that this step's
 * work is queued. A norm that is not finite: the device skipped it. */
static ls_err_t read_last(ls_trainer_t *tr) {
  if (!tr->fetched) return LS_OK;
  float norm = 0.0f;
  LS_FORWARD_IF_ERROR(comm_wait(tr->v.comm)); /* the figures come after the update's sums */
  LS_FORWARD_IF_ERROR(ls_engine_read_figures(tr->v.eng, NULL, &norm));
  if (tr->has_pend && tr->pend.updated) {
    tr->pend.grad_norm = norm;
    if (!isfinite(norm)) tr->pend.updated = 0, tr->pend.nonfinite = 1;
  }
  tr->fetched = 0;
  return LS_OK;
}

/* Keeps a step's stats until its gradient norm is read, with a copy of its
 * per-target figures (figures.c reuses its own for the next step) and its
 * suspect window (guard.h). */
static void keep_pending(ls_trainer_t *tr, const ls_step_stats_t *st) {
  tr->pend = *st;
  memcpy(tr->pend_target, st->target, (size_t)st->targets * sizeof *tr->pend_target);
  tr->pend.target = tr->pend_target;
  if (st->horizon != NULL) {
    memcpy(tr->pend_horizon, st->horizon,
           (size_t)st->horizons * (size_t)st->targets * sizeof *tr->pend_horizon);
    tr->pend.horizon = tr->pend_horizon;
  }
  if (st->quantile != NULL) {
    memcpy(tr->pend_quantile, st->quantile,
           (size_t)st->quantiles * (size_t)tr->prep->OH * sizeof *tr->pend_quantile);
    tr->pend.quantile = tr->pend_quantile;
  }
  tr->has_pend = 1;
  guard_keep(&tr->guard);
}

/* Hands the last step's stats on (a non-finite one counted, with its
 * note); 1 if the callback asks to stop. */
static int emit_last(ls_trainer_t *tr, ls_step_cb cb, void *opaque) {
  if (!tr->has_pend) return 0;
  tr->has_pend = 0;
  ls_step_stats_t *const st = &tr->pend;
  if (st->nonfinite) {
    st->nonfinite_note = guard_note(&tr->guard, st->step, !isfinite(st->loss_sum));
    tr->sum.nonfinite_steps = tr->guard.bad_steps;
  }
  return cb != NULL && cb(opaque, st) != 0;
}

/* Every rank steps in lockstep: it forms its part of the step (possibly
 * empty), computes it, and joins one sum of the step's figures; a rank with
 * nothing adds zeros. The run ends when every rank has run out (replay) or
 * any rank is stopped. A step's stats reach cb one step late, once its
 * gradient norm is read (see "What the host reads" above). */
/* After the step loop (err: how it ended; ended: a replay read
 * everything): the last step's stats, then the gradients accumulated for a
 * partial update (on every rank alike: the sums are the same everywhere),
 * the forecasts after each series' last record, the last snapshot. */
static ls_err_t end_run(ls_trainer_t *tr, ls_err_t err, int ended, ls_step_cb cb, void *opaque) {
  if (err == LS_OK) err = read_last(tr);
  if (err == LS_OK) (void)emit_last(tr, cb, opaque);
  if (err == LS_OK && tr->acc_steps > 0) {
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    err = update(tr, &st);
  }
  if (err == LS_OK && ended && tr->v.pred != NULL)
    err = predict_finish(tr->v.pred, tr->sum.steps, tr->stop);
  if (err == LS_OK) err = comm_wait(tr->v.comm); /* before the snapshot reads the model */
  int const together = err == LS_OK;
  if (err == LS_OK) err = train_snaps_final(tr->snaps, tr->sum.steps, tr->acc_steps != 0);
  if (err == LS_OK && tr->v.pred != NULL) err = predict_close(tr->v.pred, 10000);
  tr->finished = together && (err == LS_OK || train_snaps_failed(tr->snaps));
  return err;
}

ls_err_t ls_trainer_run(ls_trainer_t *tr, volatile sig_atomic_t *stop, ls_step_cb cb,
                        void *opaque) {
  LS_RETURN_IF(tr == NULL, LS_ERR_INVALID_ARG, "trainer is NULL");
  double const t0 = base_now_s();
  ls_err_t err = LS_OK;
  int cb_stop = 0, ended = 0;
  double *const v = tr->v_sums;
  tr->stop = stop;
  for (;;) {
    /* Every rank has the same count: a run resumed at max_steps trains none. */
    if (tr->conf.max_steps > 0 && tr->sum.steps >= tr->conf.max_steps) break;
    memset(v, 0, (size_t)tr->NV * sizeof *v);
    double const w0 = tr->sum.wait_s;
    int n = 0;
    atomic_store_explicit(&tr->beat_ms, base_now_ms(), memory_order_relaxed);
    /* Live, with nothing ready: the last step's stats go out now, not after
     * the wait for data (the device has nothing else to do meanwhile). */
    if (tr->has_pend && steps_idle(tr->steps)) {
      err = read_last(tr);
      if (err == LS_OK && emit_last(tr, cb, opaque)) cb_stop = 1;
    }
    if (err == LS_OK) err = train_grow_partitions(tr);
    if (err == LS_OK && !(stop && *stop) && !cb_stop)
      err = steps_form(tr->steps, stop, &n, &tr->sum.wait_s);
    double const c0 = base_now_s();
    guard_scan(&tr->guard, NULL, 0); /* no window of this rank in the step yet */
    /* The last step's sums are done (or their peer is gone: an error, not a
     * wait for ever) before the host waits on the engine (comm.h); every
     * rank waits here, as every rank runs the same sums. */
    if (err == LS_OK) err = comm_wait(tr->v.comm);
    if (err == LS_OK && n > 0) err = compute_step(tr, n, v);
    /* A rank without windows starts the same sums, in the same order, on
     * its zero gradient. */
    else if (err == LS_OK && tr->overlap)
      err = comm_grads_start_segments(tr->v.comm);
    if (err == LS_OK) err = read_last(tr);
    if (err != LS_OK) break; /* the other ranks learn of it when this one exits */
    v[V_COMPUTE] = base_now_s() - c0;
    if (emit_last(tr, cb, opaque)) cb_stop = 1; /* (the callback's time is not compute) */
    v[V_WAIT] = tr->sum.wait_s - w0;
    v[V_MORE] = tr->conf.until ? steps_more(tr->steps) : 1;
    v[V_STOP] = (stop && *stop) || cb_stop;
    v[V_BACKLOG] = steps_backlog(tr->steps);
    train_view_rejections(&tr->v, v + V_REJECTED);
    train_snaps_contribute(tr->snaps, tr->sum.steps, v + V__N);
    double const s0 = base_now_s();
    err = comm_sum_doubles(tr->v.comm, v, tr->NV);
    if (err == LS_OK && tr->overlap) err = comm_grads_finish(tr->v.comm);
    tr->sum.comm_s += base_now_s() - s0;
    if (err != LS_OK) break;
    steps_hurry(tr->steps, v[V_BACKLOG] > 0);
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    st.grad_norm = -1.0f;
    if (v[V_WINDOWS] > 0 && (err = after_sums(tr, v, &st)) != LS_OK) break;
    if (v[V__N + SNAP_V_DUE] > 0 && (err = comm_wait(tr->v.comm)) != LS_OK) break; /* as above */
    err = train_snaps_after_step(tr->snaps, v + V__N, tr->sum.steps, tr->acc_steps != 0,
                                 v[V_WINDOWS] > 0, &st);
    if (err != LS_OK) break;
    if (v[V_WINDOWS] > 0)
      keep_pending(tr, &st);
    else if ((st.snapshot_error != NULL || st.snapshot_committed >= 0) && cb != NULL &&
             cb(opaque, &st) != 0) /* an empty round's snapshot event, at once */
      cb_stop = 1;
    if (v[V_STOP] > 0) break;
    if (tr->conf.until && v[V_WINDOWS] == 0 && v[V_MORE] == 0) {
      ended = 1; /* the replay read everything */
      break;
    }
  }
  err = end_run(tr, err, ended, cb, opaque);
  tr->sum.elapsed_s += base_now_s() - t0;
  return err;
}
