/*
 * The step loop (include/lstream/train.h): steps formed from the data
 * (steps.c), each window's rows normalised into the model's inputs and
 * targets (prep.c), states gathered and scattered through the series table,
 * one engine step per batch, an update every `accumulate` steps, replay
 * updates after it (replay.c), and the forecasts' figures (figures.c).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "comm.h"
#include "figures.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "predict.h"
#include "prep.h"
#include "replay.h"
#include "snapshots.h"
#include "steps.h"
#include "train_internal.h"

struct ls_trainer_s {
  ls_train_conf_t conf;
  train_view_t v; /* comm, rank, world, engine, series table, ingest, partitions, figures,
                     replay: what snapshots.c reads */
  train_snaps_t *snaps;
  int overlap; /* gradient sums start during backward (grads_ready) */
  ls_optim_t opt;
  int T, B;
  int P_all; /* partitions of all ranks */
  int quota; /* replay: windows a step takes from each partition */
  steps_t *steps;
  prep_t *prep;
  ls_series_stats_t *st; /* [B] the step's windows' series state */
  int64_t *gather;       /* [B] slots to gather from (-1 = zero state) */
  float *pred;           /* [T, B, O] the step's predictions */
  float *h0, *c0;        /* [L, B, H] the step's initial states (for replay) */
  double *v_sums;        /* [NV] the step's sums across ranks */
  int NV;

  /* Accumulation and totals. */
  double acc_count;
  int acc_steps;
  ls_train_summary_t sum;

  /* A step's stats reach the callback one step late, once the gradient
   * norm of its update (fetched at the end of the step) is read. */
  ls_step_stats_t pend;             /* the last step's stats, but its gradient norm */
  ls_target_figures_t *pend_target; /* [O] its per-target figures (pend.target) */
  int has_pend;
  int fetched; /* the engine's figures were fetched after the last step's update */

  volatile sig_atomic_t *stop; /* the run's stop flag (forecasts waiting for room see it) */
  char note[2560]; /* what resuming and the comm setup did, for the program to print */
  atomic_int_fast64_t beat_ms; /* base_now_ms() at the step loop's last turn */
};

/* What every rank contributes to a step, summed across ranks: these, then
 * the snapshots' (SNAP_V__N), then the forecasts' figures (FIG_V(O)). */
enum { V_COUNT, V_WINDOWS, V_RECORDS, V_MORE, V_STOP, V_WAIT, V_COMPUTE, V__N };

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

/* Parses the partitions key against the topic's count; keeps this rank's. */
static ls_err_t pick_partitions(ls_trainer_t *tr, int32_t count) {
  int32_t *const parts = calloc((size_t)count, sizeof *parts);
  LS_RETURN_IF(parts == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)count);
  tr->v.parts = parts;
  char *want = calloc((size_t)count, 1);
  LS_RETURN_IF(want == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)count);
  const char *s = tr->conf.partitions;
  ls_err_t err = LS_OK;
  if (!strcmp(s, "all")) memset(want, 1, (size_t)count), s = "";
  while (*s && err == LS_OK) {
    char *end = NULL;
    long const p = strtol(s, &end, 10);
    if (end == s || (*end != ',' && *end != '\0') || p < 0 || p >= count)
      err = ls_error_set(LS_ERR_INVALID_ARG,
                         "partitions '%s': expected 'all' or a list of partitions in [0, %d)",
                         tr->conf.partitions, (int)count);
    else
      want[p] = 1, s = *end ? end + 1 : end;
  }
  /* Partition p belongs to rank p % world: its series and their states too. */
  for (int32_t p = 0; p < count && err == LS_OK; p++) {
    tr->P_all += want[p];
    if (want[p] && p % tr->v.world == tr->v.rank) parts[tr->v.P++] = p;
  }
  free(want);
  if (err == LS_OK && tr->P_all == 0)
    err = ls_error_set(LS_ERR_INVALID_ARG, "partitions '%s' names none", tr->conf.partitions);
  return err;
}

static ls_err_t open_ingest(ls_trainer_t *tr, const ls_snapshot_t *snap) {
  const ls_train_conf_t *const c = &tr->conf;
  LS_RETURN_IF(c->brokers[0] == '\0', LS_ERR_INVALID_ARG,
               "no brokers: give --brokers HOST:PORT (e.g. the address `lstream broker` prints)");
  LS_RETURN_IF(c->topic[0] == '\0', LS_ERR_INVALID_ARG, "no topic: give --topic NAME");
  ls_start_t start;
  LS_FORWARD_IF_ERROR(ls_start_parse(c->start, &start));
  ls_ingest_settings_t is;
  ls_ingest_settings_init(&is);
  is.topic = c->topic;
  is.format = (ls_format_t)c->format;
  is.features = c->features;
  is.window = c->window;
  is.queue_windows = c->queue_windows;
  is.buffer_records = c->buffer_records;
  is.stop_at_end = c->until;
  is.flush = c->until; /* a replay trains every record: trailing partial windows too, masked */
  /* Live next-record forecasts see each record as it is read (predict.h). */
  is.tap = !c->until && (c->predictions & PREDICT_NEXT) &&
           (c->predictions_topic[0] != '\0' || c->predictions_out[0] != '\0');
  ls_ingest_conf_t *ic = NULL;
  LS_FORWARD_IF_ERROR(ls_ingest_conf_new(&ic));
  char servers[600];
  snprintf(servers, sizeof servers, "bootstrap.servers=%s", c->brokers);
  ls_err_t err = ls_ingest_conf_set_settings(ic, &is);
  if (err == LS_OK) err = ls_ingest_conf_set_kafka(ic, servers);
  for (int i = 0; i < c->n_kafka && err == LS_OK; i++) err = ls_ingest_conf_set_kafka(ic, c->kafka[i]);
  int32_t count = 0;
  if (err == LS_OK) err = ls_ingest_topic_partitions(ic, &count);
  if (err == LS_OK) err = pick_partitions(tr, count);
  if (err == LS_OK) err = train_snaps_ingest(snap, ic, tr->v.parts, tr->v.P, start);
  /* A rank with no partition (more ranks than partitions) only joins steps. */
  if (err == LS_OK && tr->v.P > 0) err = ls_ingest_new(&tr->v.ing, ic);
  ls_ingest_conf_destroy(ic);
  return err;
}

/* Live, while a step waits for windows: the forecasts of what was read. */
static ls_err_t on_idle(void *opaque) {
  ls_trainer_t *const tr = opaque;
  return tr->v.pred != NULL ? predict_idle(tr->v.pred, tr->sum.steps, tr->stop) : LS_OK;
}

/* The step's buffers, its step formation, inputs, figures; the sums'
 * layout: the trainer's figures, the snapshots', the forecasts'. */
static ls_err_t alloc_buffers(ls_trainer_t *tr) {
  const ls_train_conf_t *const c = &tr->conf;
  ls_shape_t const *const sh = &tr->v.shape;
  size_t const B = (size_t)tr->B, T = (size_t)tr->T, LH = (size_t)c->layers * (size_t)c->hidden;
  /* The replay's look-ahead per partition: the consumer's queue bound, and
   * within buffer_records over all partitions (the same on every rank). */
  int64_t const fit = c->buffer_records / ((int64_t)tr->P_all * (c->window + 1));
  int const K = fit < c->queue_windows ? (fit > 1 ? (int)fit : 1) : c->queue_windows;
  steps_conf_t const sc = {tr->v.ing, tr->v.series, tr->v.parts,    tr->v.P, tr->B, tr->quota,
                           K,         c->until,     c->deadline_ms, on_idle, tr};
  LS_FORWARD_IF_ERROR(steps_new(&sc, &tr->steps));
  LS_FORWARD_IF_ERROR(prep_new(c, tr->B, &tr->prep));
  LS_FORWARD_IF_ERROR(figures_new(tr->prep->O, tr->prep->feat, c->calibrate, &tr->v.fig));
  LS_FORWARD_IF_ERROR(ls_series_table_keep_stats(tr->v.series, c->features, tr->prep->O));
  tr->NV = V__N + SNAP_V__N + FIG_V(tr->prep->O);
  tr->st = calloc(B, sizeof *tr->st);
  tr->gather = calloc(B, sizeof *tr->gather);
  tr->pred = calloc(T * B * (size_t)sh->output_size, sizeof *tr->pred);
  tr->h0 = calloc(LH * B, sizeof *tr->h0);
  tr->c0 = calloc(LH * B, sizeof *tr->c0);
  tr->v_sums = calloc((size_t)tr->NV, sizeof *tr->v_sums);
  tr->pend_target = calloc((size_t)tr->prep->O, sizeof *tr->pend_target);
  LS_RETURN_IF(!tr->st || !tr->gather || !tr->pred || !tr->h0 || !tr->c0 || !tr->v_sums ||
                   !tr->pend_target,
               LS_ERR_NOMEM, "no memory for the step buffers (B=%zu, T=%zu)", B, T);
  return LS_OK;
}

/* The backend of the comm key: auto = mpi when started by mpirun on more
 * than one rank (the program initialises MPI then), else none. */
static ls_err_t open_comm(ls_trainer_t *tr) {
  comm_kind_t kind = COMM_NONE;
  switch (tr->conf.comm) {
  case 0: kind = ls_train_launched_ranks() > 1 ? (tr->conf.device ? COMM_NCCL : COMM_MPI) : COMM_NONE; break;
  case 1: kind = COMM_NONE; break;
  case 2: kind = COMM_MPI; break;
  case 3: kind = COMM_NCCL; break;
  }
  LS_FORWARD_IF_ERROR(comm_new(kind, &tr->v.comm));
  comm_set_always(tr->v.comm, tr->conf.comm_always);
  tr->v.rank = comm_rank(tr->v.comm);
  tr->v.world = comm_world(tr->v.comm);
  return LS_OK;
}

/* The engine's gradient hook: a segment is final, start its sum. */
static ls_err_t grads_ready(void *opaque, int segment, size_t offset, size_t count,
                            void *stream) {
  (void)segment;
  return comm_grads_start(((ls_trainer_t *)opaque)->v.comm, offset, count, stream);
}

/* Binds the comm backend to the engine and, where asked (by default with
 * nccl: on the CPU the sums are a fraction of a percent of a step and
 * overlapping them measured no gain), has backward start the gradient sums
 * (not with accumulation: the sums wait for the last step of an update,
 * which a rank learns only after the step's sum). */
static ls_err_t bind_comm(ls_trainer_t *tr) {
  LS_FORWARD_IF_ERROR(comm_bind(tr->v.comm, tr->v.eng));
  int const want = tr->conf.overlap == 2 || (tr->conf.overlap == 0 && comm_kind(tr->v.comm) == COMM_NCCL);
  int const sums = tr->v.world > 1 || (tr->conf.comm_always && comm_kind(tr->v.comm) != COMM_NONE);
  tr->overlap = sums && want && tr->conf.accumulate == 1;
  snprintf(tr->note, sizeof tr->note, "%s%s", train_snaps_note(tr->snaps),
           tr->conf.overlap == 2 && tr->conf.accumulate > 1 && tr->v.world > 1
               ? "overlap is off: it needs --accumulate 1 (the sums wait for an update's last "
                 "step); "
               : "");
  return tr->overlap ? ls_engine_set_grad_hook(tr->v.eng, grads_ready, tr) : LS_OK;
}

/* The optimizer's settings from the configuration. */
static ls_optim_t optim_of(const ls_train_conf_t *c) {
  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.lr = (float)c->lr;
  opt.beta1 = (float)c->beta1;
  opt.beta2 = (float)c->beta2;
  opt.eps = (float)c->eps;
  opt.weight_decay = (float)c->weight_decay;
  opt.decoupled = c->optimizer == 1;
  opt.clip_norm = (float)c->clip;
  return opt;
}

/* The replay memories of this rank's partitions (with replay), then the
 * engine, sized for this rank's steps and replay updates. */
static ls_err_t open_engine(ls_trainer_t *tr) {
  const ls_train_conf_t *const c = &tr->conf;
  /* A replay step takes batch/partitions windows from each partition (at
   * least one), whichever rank reads it; live steps take `batch` each. */
  tr->quota = c->batch / tr->P_all > 0 ? c->batch / tr->P_all : 1;
  tr->B = c->until ? tr->quota * (tr->v.P > 0 ? tr->v.P : 1) : c->batch;
  ls_shape_t const *const sh = &tr->v.shape;
  if (c->replay > 0)
    LS_FORWARD_IF_ERROR(replay_new(c->replay_memory, c->replay_batch, tr->P_all, tr->v.parts,
                                   tr->v.P, c->window, sh->input_size, sh->output_size, c->layers,
                                   c->hidden, &tr->v.rep));
  int const rows = tr->v.rep != NULL ? replay_rows(tr->v.rep) : 0;
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = *sh;
  ec.max_batch = tr->B > rows ? tr->B : rows;
  ec.max_window = c->window;
  ec.device = c->device ? LS_DEVICE_CUDA : LS_DEVICE_CPU;
  ec.precision = (ls_precision_t)c->precision;
  ec.threads = c->threads;
  if (c->device) LS_FORWARD_IF_ERROR(comm_gpu(tr->v.comm, &ec.device_index));
  return ls_engine_new(&ec, &tr->v.eng);
}

/* The model's shape: I inputs per record (F levels, and F changes), O
 * targets (the targets key). */
static ls_err_t shape_of(const ls_train_conf_t *c, ls_shape_t *shape) {
  int *const feat = calloc((size_t)c->features, sizeof *feat);
  LS_RETURN_IF(feat == NULL, LS_ERR_NOMEM, "no memory for %d features", c->features);
  int O = 0;
  ls_err_t const err = train_conf_targets(c, feat, &O);
  free(feat);
  *shape = (ls_shape_t){c->inputs == 0 ? 2 * c->features : c->features, c->hidden, c->layers, O};
  return err;
}

ls_err_t ls_trainer_new(const ls_train_conf_t *conf, ls_trainer_t **out) {
  LS_RETURN_IF(conf == NULL || out == NULL, LS_ERR_INVALID_ARG, "conf or out is NULL");
  *out = NULL;
  ls_trainer_t *tr = calloc(1, sizeof *tr);
  LS_RETURN_IF(tr == NULL, LS_ERR_NOMEM, "no memory for a trainer");
  ls_err_t err = train_conf_copy(&tr->conf, conf);
  if (err != LS_OK) {
    free(tr);
    return err;
  }
  const ls_train_conf_t *const c = &tr->conf;
  tr->T = c->window;
  tr->opt = optim_of(c);
  tr->v.conf = c;

  ls_snapshot_t *snap = NULL;
  int64_t steps = 0, updates = 0;
  err = shape_of(c, &tr->v.shape);
  if (err == LS_OK) err = train_snaps_new(&tr->v, &tr->snaps);
  if (err == LS_OK) err = open_comm(tr);
  if (err == LS_OK) err = train_snaps_find(tr->snaps, &snap);
  if (err == LS_OK) err = open_ingest(tr, snap);
  if (err == LS_OK) err = open_engine(tr);
  if (err == LS_OK) err = bind_comm(tr);
  if (err == LS_OK) err = ls_engine_init_params(tr->v.eng, (uint64_t)c->seed);
  if (err == LS_OK) err = ls_series_table_new(tr->v.eng, 1024, &tr->v.series);
  if (err == LS_OK) err = alloc_buffers(tr);
  if (err == LS_OK && snap != NULL) err = train_snaps_apply(tr->snaps, snap, &steps, &updates);
  if (err == LS_OK) err = predict_new(&tr->v, tr->prep, tr->v.fig, &tr->v.pred);
  if (err == LS_OK && tr->v.pred != NULL) err = predict_resume(tr->v.pred, snap);
  if (err == LS_OK) err = train_snaps_open(tr->snaps);
  ls_snapshot_destroy(snap);
  if (err != LS_OK) {
    ls_trainer_destroy(tr);
    return err;
  }
  tr->sum.steps = steps;
  tr->sum.updates = updates;
  atomic_init(&tr->beat_ms, base_now_ms());
  *out = tr;
  return LS_OK;
}

void ls_trainer_destroy(ls_trainer_t *tr) {
  if (tr == NULL) return;
  steps_free(tr->steps);          /* gives back the windows it holds */
  train_snaps_destroy(tr->snaps); /* waits for a snapshot being written */
  predict_free(tr->v.pred);       /* before the engine, which holds its serving states */
  ls_ingest_destroy(tr->v.ing);
  ls_series_table_destroy(tr->v.series);
  comm_destroy(tr->v.comm); /* before the engine whose buffer its sums use */
  ls_engine_destroy(tr->v.eng);
  train_conf_free_kafka(&tr->conf);
  prep_free(tr->prep);
  figures_free(tr->v.fig);
  replay_free(tr->v.rep);
  free((void *)tr->v.parts), free(tr->st), free(tr->gather), free(tr->pred), free(tr->h0);
  free(tr->c0), free(tr->v_sums), free(tr->pend_target);
  free(tr);
}

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
 * reach the callback then (emit_last). */

/* Sums the gradients across ranks (unless backward started the sums, and
 * the step loop finished them) and steps the optimizer. */
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
  LS_FORWARD_IF_ERROR(ls_engine_optimizer_step(tr->v.eng, &opt, scale, NULL)); /* norm: later */
  st->updated = 1;
  st->lr = opt.lr;
  tr->sum.updates++;
  tr->acc_count = 0;
  tr->acc_steps = 0;
  return LS_OK;
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
    LS_FORWARD_IF_ERROR(prep_window(p, b, wins[b], &tr->st[b]));
    tr->gather[b] = tr->conf.stateless ? -1 : slots[b];
  }
  ls_state_table_t *const states = ls_series_table_states(tr->v.series);
  double count = 0.0;
  LS_FORWARD_IF_ERROR(ls_engine_gather_state(eng, states, n, tr->gather));
  LS_FORWARD_IF_ERROR(ls_engine_forward(eng, tr->T, n, p->x, p->y, p->mask, NULL, &count));
  LS_FORWARD_IF_ERROR(ls_engine_read_outputs(eng, NULL, tr->pred, NULL, NULL));
  if (tr->v.rep != NULL) LS_FORWARD_IF_ERROR(ls_engine_read_initial_state(eng, tr->h0, tr->c0));
  LS_FORWARD_IF_ERROR(figures_score(tr->v.fig, p, tr->pred, tr->st, v + V__N + SNAP_V__N));
  LS_FORWARD_IF_ERROR(ls_engine_backward(eng, 1.0f));
  if (!tr->conf.stateless) LS_FORWARD_IF_ERROR(ls_engine_scatter_state(eng, states, n, slots));
  int64_t records = 0;
  for (int b = 0; b < n; b++) {
    const ls_window_t *const w = wins[b];
    LS_FORWARD_IF_ERROR(
        ls_series_table_trained(tr->v.series, slots[b], w->n_targets, w->last_offset));
    records += w->n_targets;
    if (tr->v.rep != NULL)
      LS_FORWARD_IF_ERROR(replay_push(tr->v.rep, w->partition, p, b, tr->h0, tr->c0));
  }
  if (tr->v.pred != NULL) /* after backward: its serving forwards reuse the engine */
    LS_FORWARD_IF_ERROR(
        predict_step(tr->v.pred, wins, slots, n, tr->pred, tr->sum.steps, tr->stop));
  steps_release(tr->steps, n);
  v[V_COUNT] = count, v[V_WINDOWS] = n, v[V_RECORDS] = (double)records;
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
    replay_gather(r, (uint64_t)tr->conf.seed, tr->sum.steps, round, &n);
    if (n > 0) {
      LS_FORWARD_IF_ERROR(ls_engine_set_state(eng, n, replay_h0(r), replay_c0(r)));
      LS_FORWARD_IF_ERROR(
          ls_engine_forward(eng, tr->T, n, replay_x(r), replay_y(r), replay_mask(r), NULL, &count));
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

/* After the step's sums v (every rank's): the update when one is due (its
 * gradient norm fetched, read a step later), the replay updates after it,
 * the step's figures and the run's totals. */
static ls_err_t after_sums(ls_trainer_t *tr, const double *v, ls_step_stats_t *st) {
  tr->acc_count += v[V_COUNT];
  if (++tr->acc_steps == tr->conf.accumulate) {
    LS_FORWARD_IF_ERROR(update(tr, st));
    LS_FORWARD_IF_ERROR(ls_engine_fetch_figures(tr->v.eng));
    tr->fetched = 1;
  }
  st->step = ++tr->sum.steps;
  st->windows = (int)v[V_WINDOWS];
  st->records = (int64_t)v[V_RECORDS];
  figures_step(tr->v.fig, v + V__N + SNAP_V__N, st);
  /* Times: the mean over ranks. */
  st->compute_s = v[V_COMPUTE] / tr->v.world;
  st->wait_s = v[V_WAIT] / tr->v.world;
  tr->sum.windows += st->windows;
  tr->sum.records += st->records;
  tr->sum.loss_sum += st->loss_sum;
  tr->sum.baseline_sum += st->baseline_sum;
  tr->sum.count += st->count;
  tr->sum.compute_s += st->compute_s;
  return st->updated && tr->v.rep != NULL ? replay_updates(tr, st) : LS_OK;
}

/* The gradient norm of the last step's update into its pending stats: the
 * engine's figures fetched after that update, read now that this step's
 * work is queued. */
static ls_err_t read_last(ls_trainer_t *tr) {
  if (!tr->fetched) return LS_OK;
  float norm = 0.0f;
  LS_FORWARD_IF_ERROR(ls_engine_read_figures(tr->v.eng, NULL, &norm));
  if (tr->has_pend && tr->pend.updated) tr->pend.grad_norm = norm;
  tr->fetched = 0;
  return LS_OK;
}

/* Keeps a step's stats until its gradient norm is read, with a copy of its
 * per-target figures (figures.c reuses its own for the next step). */
static void keep_pending(ls_trainer_t *tr, const ls_step_stats_t *st) {
  tr->pend = *st;
  memcpy(tr->pend_target, st->target, (size_t)st->targets * sizeof *tr->pend_target);
  tr->pend.target = tr->pend_target;
  tr->has_pend = 1;
}

/* Hands the last step's stats on; 1 if the callback asks to stop. */
static int emit_last(ls_trainer_t *tr, ls_step_cb cb, void *opaque) {
  if (!tr->has_pend) return 0;
  tr->has_pend = 0;
  return cb != NULL && cb(opaque, &tr->pend) != 0;
}

/* Every rank steps in lockstep: it forms its part of the step (possibly
 * empty), computes it, and joins one sum of the step's figures; a rank with
 * nothing adds zeros. The run ends when every rank has run out (replay) or
 * any rank is stopped. A step's stats reach cb one step late, once its
 * gradient norm is read (see "What the host reads" above). */
ls_err_t ls_trainer_run(ls_trainer_t *tr, volatile sig_atomic_t *stop, ls_step_cb cb,
                        void *opaque) {
  LS_RETURN_IF(tr == NULL, LS_ERR_INVALID_ARG, "trainer is NULL");
  double const t0 = base_now_s();
  ls_err_t err = LS_OK;
  int cb_stop = 0, ended = 0;
  double *const v = tr->v_sums;
  tr->stop = stop;
  for (;;) {
    memset(v, 0, (size_t)tr->NV * sizeof *v);
    double const w0 = tr->sum.wait_s;
    int n = 0;
    atomic_store_explicit(&tr->beat_ms, base_now_ms(), memory_order_relaxed);
    if (!(stop && *stop) && !cb_stop) err = steps_form(tr->steps, stop, &n, &tr->sum.wait_s);
    double const c0 = base_now_s();
    if (err == LS_OK && n > 0) err = compute_step(tr, n, v);
    /* A rank without windows starts the same sums, in the same order, on
     * its zero gradient. */
    else if (err == LS_OK && tr->overlap) err = comm_grads_start_segments(tr->v.comm);
    if (err == LS_OK) err = read_last(tr);
    if (err != LS_OK) break; /* the other ranks learn of it when this one exits */
    v[V_COMPUTE] = base_now_s() - c0;
    if (emit_last(tr, cb, opaque)) cb_stop = 1; /* (the callback's time is not compute) */
    v[V_WAIT] = tr->sum.wait_s - w0;
    v[V_MORE] = tr->conf.until ? steps_more(tr->steps) : 1;
    v[V_STOP] = (stop && *stop) || cb_stop;
    train_snaps_contribute(tr->snaps, tr->sum.steps, v + V__N);
    double const s0 = base_now_s();
    err = comm_sum_doubles(tr->v.comm, v, tr->NV);
    if (err == LS_OK && tr->overlap) err = comm_grads_finish(tr->v.comm);
    tr->sum.comm_s += base_now_s() - s0;
    if (err != LS_OK) break;
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    st.grad_norm = -1.0f;
    if (v[V_WINDOWS] > 0 && (err = after_sums(tr, v, &st)) != LS_OK) break;
    err = train_snaps_after_step(tr->snaps, v + V__N, tr->sum.steps, tr->acc_steps != 0,
                                 v[V_WINDOWS] > 0, &st);
    if (err != LS_OK) break;
    if (v[V_WINDOWS] > 0) keep_pending(tr, &st);
    if (v[V_STOP] > 0) break;
    if (tr->conf.until && v[V_WINDOWS] == 0 && v[V_MORE] == 0) {
      ended = 1; /* the replay read everything */
      break;
    }
    if (tr->conf.max_steps > 0 && tr->sum.steps >= tr->conf.max_steps) break;
  }
  /* The last step's stats, then the gradients accumulated for a partial
   * update (on every rank alike: the sums above are the same everywhere). */
  if (err == LS_OK) err = read_last(tr);
  if (err == LS_OK) (void)emit_last(tr, cb, opaque);
  if (err == LS_OK && tr->acc_steps > 0) {
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    err = update(tr, &st);
  }
  /* The forecasts after each series' last record, before the last snapshot. */
  if (err == LS_OK && ended && tr->v.pred != NULL)
    err = predict_finish(tr->v.pred, tr->sum.steps, stop);
  if (err == LS_OK) err = train_snaps_final(tr->snaps, tr->sum.steps, tr->acc_steps != 0);
  if (err == LS_OK && tr->v.pred != NULL) err = predict_close(tr->v.pred, 10000);
  tr->sum.elapsed_s += base_now_s() - t0;
  return err;
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
  LS_FORWARD_IF_ERROR(figures_summary(tr->v.fig, tr->v.comm, out));
  ls_ingest_stats_t is;
  out->rejected = 0;
  if (tr->v.ing != NULL && ls_ingest_stats(tr->v.ing, &is) == LS_OK)
    for (int r = 0; r < LS_REJECT__COUNT; r++) out->rejected += is.w.rejected[r];
  predict_counts_t pc;
  predict_counts(tr->v.pred, &pc);
  double v[10] = {(double)out->series,  (double)out->rejected, out->wait_s,
                  out->comm_s,          (double)pc.next,       (double)pc.eval,
                  (double)pc.published, (double)pc.skipped,    (double)pc.rows,
                  (double)pc.waits};
  LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->v.comm, v, 10));
  out->series = (int64_t)v[0];
  out->rejected = (int64_t)v[1];
  out->wait_s = v[2] / tr->v.world;
  out->comm_s = v[3] / tr->v.world;
  out->predictions_next = (int64_t)v[4], out->predictions_eval = (int64_t)v[5];
  out->predictions_published = (int64_t)v[6], out->predictions_skipped = (int64_t)v[7];
  out->predictions_rows = (int64_t)v[8], out->predictions_waits = (int64_t)v[9];
  return LS_OK;
}

ls_err_t ls_trainer_digest(ls_trainer_t *tr, uint64_t *params, uint64_t *states) {
  LS_RETURN_IF(tr == NULL || params == NULL || states == NULL, LS_ERR_INVALID_ARG,
               "trainer or outputs are NULL");
  return train_view_digest(&tr->v, params, states);
}

const char *ls_trainer_note(const ls_trainer_t *tr) { return tr == NULL ? "" : tr->note; }

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
  LS_FORWARD_IF_ERROR(ls_series_table_stats(tr->v.series, i, &st));
  *errors = st.errors;
  *targets = tr->v.shape.output_size;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Monitoring (train_internal.h)                                             */

const train_view_t *train_view_of(const ls_trainer_t *tr) { return &tr->v; }
train_snaps_t *train_snaps_of(const ls_trainer_t *tr) { return tr->snaps; }
int64_t train_heartbeat_ms(const ls_trainer_t *tr) {
  return atomic_load_explicit(&tr->beat_ms, memory_order_relaxed);
}
