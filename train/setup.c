/*
 * Setting a trainer up (include/lstream/train.h): its partitions and
 * consumer, the comm backend, the engine, the buffers of its steps, and
 * what a snapshot brings back; and taking it down.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "comm.h"
#include "figures.h"
#include "launch.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "predict.h"
#include "prep.h"
#include "season.h"
#include "replay.h"
#include "snapshots.h"
#include "steps.h"
#include "train_internal.h"
#include "trainer.h"

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

/* Parses the partitions key against the topic's count; keeps this rank's
 * (and the count). */
static ls_err_t pick_partitions(ls_trainer_t *tr, int32_t count) {
  int32_t *const parts = calloc((size_t)count, sizeof *parts);
  LS_RETURN_IF(parts == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)count);
  tr->v.parts = parts;
  tr->v.topic_parts = count;
  return train_pick_partitions(tr->conf.partitions, count, tr->v.world, tr->v.rank, parts, &tr->v.P,
                               &tr->P_all);
}

static ls_err_t open_ingest(ls_trainer_t *tr, const ls_snapshot_t *snap) {
  const ls_train_conf_t *const c = &tr->conf;
  LS_RETURN_IF(c->brokers[0] == '\0', LS_ERR_INVALID_ARG,
               "no brokers: give --brokers HOST:PORT (e.g. the address `lstream broker` prints)");
  LS_RETURN_IF(c->topic[0] == '\0', LS_ERR_INVALID_ARG, "no topic: give --topic NAME");
  LS_RETURN_IF(!strcmp(c->predictions_topic, c->topic), LS_ERR_INVALID_ARG,
               "--predictions-topic '%s' is the topic trained on: every forecast would come back "
               "as a record to train on and forecast again (a feedback loop); publish the "
               "forecasts to another topic",
               c->predictions_topic);
  ls_start_t start;
  LS_FORWARD_IF_ERROR(ls_start_parse(c->start, &start));
  ls_ingest_settings_t is;
  ls_ingest_settings_init(&is);
  is.topic = c->topic;
  is.dead_letter_topic = c->dead_letter_topic;
  is.format = (ls_format_t)c->format;
  is.features = c->features;
  is.fields = c->fields;
  is.key_field = c->key_field;
  is.time_field = c->time_field;
  is.time_unit = (ls_time_unit_t)c->time_unit;
  is.avro_schema = c->avro_schema;
  is.avro_schema_id = c->avro_schema_id;
  is.window = c->window; /* a horizon past it: prep_new's message */
  is.horizon = c->horizon > 1 && c->horizon <= c->window ? c->horizon : 1;
  is.queue_windows = c->queue_windows;
  is.max_abs = c->max_abs;
  is.reset_gap_ms = c->reset_gap_ms;
  is.max_future_ms = c->max_future_ms, is.late_ms = c->late_ms;
  is.topic_recreated = c->topic_recreated;
  is.series_idle_ms = c->series_idle_ms;
  is.commit_timeout_ms = 2000; /* group commits are informational: a coordinator that is down
                                  must not hold up the end of a run */
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
  if (err == LS_OK) err = ls_ingest_conf_set_warn_cb(ic, c->warn_cb, c->warn_opaque);
  if (err == LS_OK) err = ls_ingest_conf_set_kafka(ic, servers);
  /* Live: a fetch waits for data a tenth of the deadline at most (a mock
   * broker answers an empty fetch only then, whatever arrives meanwhile). */
  int const tenth = c->deadline_ms / 10, fetch_wait = tenth < 1 ? 1 : tenth > 500 ? 500 : tenth;
  snprintf(servers, sizeof servers, "fetch.wait.max.ms=%d", fetch_wait);
  if (err == LS_OK && !c->until) err = ls_ingest_conf_set_kafka(ic, servers);
  /* The group the snapshots' offsets are committed to: --group, else a
   * -X group.id, else one of this run's own (its id outlives restarts with
   * a snapshot directory), so that lag tools never mix runs. */
  char group[600];
  if (c->group[0])
    snprintf(group, sizeof group, "group.id=%s", c->group);
  else
    snprintf(group, sizeof group, "group.id=lstream-%s-%016llx", c->topic,
             (unsigned long long)tr->v.run);
  if (err == LS_OK) err = ls_ingest_conf_set_kafka(ic, group);
  for (int i = 0; i < c->n_kafka && err == LS_OK; i++)
    if (!c->group[0] || strncmp(c->kafka[i], "group.id=", 9) != 0)
      err = ls_ingest_conf_set_kafka(ic, c->kafka[i]);
  int32_t count = 0;
  if (err == LS_OK) err = ls_ingest_topic_partitions(ic, &count);
  if (err == LS_OK) err = pick_partitions(tr, count);
  /* --max-series over all partitions: each holds its share, whatever the
   * ranks (a rank's trainer the share of its partitions). */
  if (err == LS_OK && c->max_series > 0) {
    is.max_series = (c->max_series + tr->P_all - 1) / tr->P_all;
    tr->max_held = (size_t)is.max_series;
    err = ls_ingest_conf_set_settings(ic, &is);
  }
  if (err == LS_OK) err = train_snaps_ingest(snap, ic, tr->v.parts, tr->v.P, count, start);
  /* Live, every partition: those added to the topic are read (p % world). */
  if (err == LS_OK && !c->until && !strcmp(c->partitions, "all"))
    err = ls_ingest_conf_set_growth(ic, count, tr->v.world, tr->v.rank);
  /* A rank with no partition (more ranks than partitions) only joins steps. */
  if (err == LS_OK && tr->v.P > 0) err = ls_ingest_new(&tr->v.ing, ic);
  ls_ingest_conf_destroy(ic);
  return err;
}

ls_err_t train_grow_partitions(ls_trainer_t *tr) {
  int count = 0;
  if (tr->v.ing == NULL || tr->conf.until) return LS_OK;
  LS_FORWARD_IF_ERROR(ls_ingest_partitions(tr->v.ing, NULL, 0, &count));
  if (count <= tr->v.P) return LS_OK;
  ls_ingest_partition_t *const list = calloc((size_t)count, sizeof *list);
  int32_t *const parts = realloc((void *)tr->v.parts, (size_t)count * sizeof *parts);
  if (parts != NULL) tr->v.parts = parts;
  ls_err_t err = list != NULL && parts != NULL
                     ? ls_ingest_partitions(tr->v.ing, list, count, &count)
                     : ls_error_set(LS_ERR_NOMEM, "no memory for %d partitions", count);
  /* In the order they were added: ascending (the added ones come after the
   * topic's count at the start). */
  for (int i = tr->v.P; i < count && err == LS_OK; i++) {
    parts[i] = list[i].partition;
    if (parts[i] >= tr->v.topic_parts) tr->v.topic_parts = parts[i] + 1;
  }
  free(list);
  LS_FORWARD_IF_ERROR(err);
  tr->v.P = count;
  steps_set_partitions(tr->steps, parts, count);
  return LS_OK;
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
  int const K =
      steps_lookahead(c->buffer_records, tr->P_all, c->window, c->horizon, c->queue_windows);
  steps_conf_t const sc = {tr->v.ing, tr->v.series, tr->v.parts,    tr->v.P, tr->B, tr->quota,
                           K,         c->until,     c->deadline_ms, on_idle, tr};
  LS_FORWARD_IF_ERROR(steps_new(&sc, &tr->steps));
  LS_FORWARD_IF_ERROR(prep_new(c, tr->B, &tr->prep));
  /* A step's windows are prepared on the engine's threads' count (the CPU
   * engine's, resolved; with CUDA, the cores the rank may use). */
  int threads = ls_engine_get_conf(tr->v.eng)->threads;
  if (threads < 1) {
    long const online = sysconf(_SC_NPROCESSORS_ONLN);
    threads = online > 0 ? (int)online : 1;
  }
  LS_FORWARD_IF_ERROR(prep_set_threads(tr->prep, threads));
  LS_FORWARD_IF_ERROR(figures_new(tr->prep->O, tr->prep->feat, c, &tr->v.fig));
  LS_FORWARD_IF_ERROR(ls_series_table_keep_stats(tr->v.series, c->features, tr->prep->O));
  LS_FORWARD_IF_ERROR(ls_series_table_keep_model(tr->v.series, prep_model_width(tr->prep)));
  tr->NV = V__N + SNAP_V__N + FIG_V(tr->prep->O, tr->prep->H, tr->prep->Q);
  tr->st = calloc(B, sizeof *tr->st);
  tr->gather = calloc(B, sizeof *tr->gather);
  tr->pred = calloc(T * B * (size_t)tr->prep->O, sizeof *tr->pred);
  tr->out = sh->output_size > tr->prep->O ? calloc(T * B * (size_t)sh->output_size, sizeof *tr->out)
                                          : tr->pred;
  tr->h0 = calloc(LH * B, sizeof *tr->h0);
  tr->c0 = calloc(LH * B, sizeof *tr->c0);
  tr->v_sums = calloc((size_t)tr->NV, sizeof *tr->v_sums);
  tr->pend_target = calloc((size_t)tr->prep->O, sizeof *tr->pend_target);
  tr->pend_horizon = calloc((size_t)tr->prep->OH, sizeof *tr->pend_horizon);
  size_t const QOH = (size_t)tr->prep->Q * (size_t)tr->prep->OH;
  tr->pend_quantile = calloc(QOH > 0 ? QOH : 1, sizeof *tr->pend_quantile);
  LS_RETURN_IF(!tr->st || !tr->gather || !tr->pred || !tr->out || !tr->h0 || !tr->c0 ||
                   !tr->v_sums || !tr->pend_target || !tr->pend_horizon || !tr->pend_quantile,
               LS_ERR_NOMEM, "no memory for the step buffers (B=%zu, T=%zu)", B, T);
  return LS_OK;
}

/* A live run with a snapshot directory but no cadence snapshots only when
 * it stops: said once, by rank 0, through the warning callback (a crash
 * would lose all it trained). */
static void warn_no_cadence(const ls_trainer_t *tr) {
  const ls_train_conf_t *const c = &tr->conf;
  if (c->warn_cb == NULL || tr->v.rank != 0 || c->until != 0 || c->snapshot_dir[0] == '\0' ||
      c->snapshot_every > 0 || c->snapshot_interval > 0)
    return;
  c->warn_cb(c->warn_opaque,
             "--snapshot-dir without --snapshot-every or --snapshot-interval: a live run "
             "snapshots only when it stops, so a crash (SIGKILL, a lost machine) loses all it "
             "trained since its start, and /health turns 503 after --health-snapshot-age; give, "
             "say, --snapshot-interval 60");
}

/* The backend of the comm key: auto = mpi when started by mpirun on more
 * than one rank (the program initialises MPI then), else none. */
static ls_err_t open_comm(ls_trainer_t *tr) {
  comm_kind_t kind = COMM_NONE;
  switch (tr->conf.comm) {
  case 0:
    kind = ls_train_launched_ranks() > 1 ? (tr->conf.device ? COMM_NCCL : COMM_MPI) : COMM_NONE;
    break;
  case 1: kind = COMM_NONE; break;
  case 2: kind = COMM_MPI; break;
  case 3: kind = COMM_NCCL; break;
  }
  LS_FORWARD_IF_ERROR(comm_new(kind, &tr->v.comm));
  comm_set_always(tr->v.comm, tr->conf.comm_always);
  comm_set_timeout(tr->v.comm, tr->conf.comm_timeout_ms / 1e3);
  tr->v.rank = comm_rank(tr->v.comm);
  tr->v.world = comm_world(tr->v.comm);
  return LS_OK;
}

/* The engine's gradient hook: a segment is final, start its sum. */
static ls_err_t grads_ready(void *opaque, int segment, size_t offset, size_t count, void *stream) {
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
  int const want =
      tr->conf.overlap == 2 || (tr->conf.overlap == 0 && comm_kind(tr->v.comm) == COMM_NCCL);
  int const sums = tr->v.world > 1 || (tr->conf.comm_always && comm_kind(tr->v.comm) != COMM_NONE);
  tr->overlap = sums && want && tr->conf.accumulate == 1;
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
  opt.skip_nonfinite = 1; /* a non-finite gradient never reaches the parameters (guard.h) */
  return opt;
}

/* The losses of the head's outputs (per per target, O targets): squared
 * errors, then with --quantiles the pinball loss of each level (prep.h's
 * columns). */
static ls_err_t set_losses(const ls_train_conf_t *c, int O, int per, ls_engine_t *eng) {
  double levels[PREP_QUANTILES_MAX];
  int Q = 0;
  LS_FORWARD_IF_ERROR(prep_parse_quantiles(c->quantiles, levels, &Q));
  if (Q == 0) return LS_OK;
  int const W = O * per, OH = W / (1 + Q);
  ls_loss_col_t *const cols = calloc((size_t)W, sizeof *cols);
  LS_RETURN_IF(cols == NULL, LS_ERR_NOMEM, "no memory for %d losses", W);
  for (int k = 0; k < W; k++)
    cols[k] = k < OH ? (ls_loss_col_t){LS_LOSS_MSE, 0.0f}
                     : (ls_loss_col_t){LS_LOSS_PINBALL, (float)levels[k / OH - 1]};
  ls_err_t const err = ls_engine_set_loss(eng, cols, W);
  free(cols);
  return err;
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
  int per = 1; /* the head's outputs per target: a mask per output unless 1 */
  LS_FORWARD_IF_ERROR(prep_outputs_per_target(c, &per));
  if (c->replay > 0)
    LS_FORWARD_IF_ERROR(replay_new(c->replay_memory, c->replay_batch, tr->P_all, tr->v.parts,
                                   tr->v.P, c->window, sh->input_size, sh->output_size,
                                   per > 1 ? sh->output_size : 1, c->layers, c->hidden,
                                   &tr->v.rep));
  int const rows = tr->v.rep != NULL ? replay_rows(tr->v.rep) : 0;
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = *sh;
  ec.max_batch = tr->B > rows ? tr->B : rows;
  ec.max_window = c->window;
  ec.device = c->device ? LS_DEVICE_CUDA : LS_DEVICE_CPU;
  ec.precision = (ls_precision_t)c->precision;
  ec.threads = train_rank_threads(c->threads);
  if (c->device) LS_FORWARD_IF_ERROR(comm_gpu(tr->v.comm, &ec.device_index));
  LS_FORWARD_IF_ERROR(ls_engine_new(&ec, &tr->v.eng));
  return set_losses(c, sh->output_size / per, per, tr->v.eng);
}

/* The model's shape: I inputs per record (F levels, and F changes, and
 * the seasons' lags: season.h), O targets (the targets key) x H horizons
 * outputs (prep.h). */
static ls_err_t shape_of(const ls_train_conf_t *c, ls_shape_t *shape) {
  int *const feat = calloc((size_t)c->features, sizeof *feat);
  LS_RETURN_IF(feat == NULL, LS_ERR_NOMEM, "no memory for %d features", c->features);
  int O = 0;
  season_t *sea = NULL;
  ls_err_t err = train_conf_targets(c, feat, &O);
  free(feat);
  if (err == LS_OK) err = season_new(c, O, &sea);
  int const I = (c->inputs == 0 ? 2 * c->features : c->features) + season_inputs(sea);
  season_free(sea);
  int per = 1;
  if (err == LS_OK) err = prep_outputs_per_target(c, &per);
  *shape = (ls_shape_t){I, c->hidden, c->layers, O * per};
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
  tr->v.updates = &tr->sum.updates;
  tr->v.evicted_states = &tr->sum.evicted_states;

  ls_snapshot_t *snap = NULL;
  int64_t steps = 0, updates = 0;
  err = train_conf_resolve(&tr->conf);
  if (err == LS_OK) err = shape_of(c, &tr->v.shape);
  if (err == LS_OK) err = train_snaps_new(&tr->v, &tr->snaps);
  if (err == LS_OK) err = open_comm(tr);
  if (err == LS_OK) warn_no_cadence(tr);
  if (err == LS_OK) err = train_snaps_find(tr->snaps, &snap);
  /* The snapshot's settings may fill in fixed options left out: what
   * depends on them is read again. */
  if (err == LS_OK && snap != NULL) {
    err = train_snaps_settle(tr->snaps, &tr->conf, &snap);
    if (err == LS_OK) err = train_conf_resolve(&tr->conf);
    if (err == LS_OK) err = shape_of(c, &tr->v.shape);
    if (err == LS_OK) err = train_snaps_check_shape(tr->snaps, snap);
    tr->T = c->window;
    tr->opt = optim_of(c);
  }
  if (err == LS_OK) err = train_conf_check_settled(c);
  /* The run's id before the consumer: its group is named after it. */
  if (err == LS_OK) err = train_run_choose(snap, &tr->v);
  if (err == LS_OK) err = open_ingest(tr, snap);
  if (err == LS_OK) err = open_engine(tr);
  if (err == LS_OK) err = bind_comm(tr);
  if (err == LS_OK) err = ls_engine_init_params(tr->v.eng, (uint64_t)c->seed);
  if (err == LS_OK) err = ls_series_table_new(tr->v.eng, 1024, &tr->v.series);
  if (err == LS_OK) err = alloc_buffers(tr);
  if (err == LS_OK && snap != NULL) err = train_snaps_apply(tr->snaps, snap, &steps, &updates);
  /* What starting did, for the log: the resume's note (once applied). */
  snprintf(tr->note, sizeof tr->note, "%s%s", train_snaps_note(tr->snaps),
           c->overlap == 2 && c->accumulate > 1 && tr->v.world > 1
               ? "overlap is off: it needs --accumulate 1 (the sums wait for an update's last "
                 "step); "
               : "");
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
  if (tr->out != tr->pred) free(tr->out);
  free((void *)tr->v.parts), free(tr->st), free(tr->gather), free(tr->pred), free(tr->h0);
  free(tr->c0), free(tr->v_sums), free(tr->pend_target), free(tr->pend_horizon);
  free(tr->pend_quantile);
  free(tr);
}
