/*
 * The step loop (include/lstream/train.h): windows from ingest, steps
 * formed from the data, states gathered and scattered through the series
 * table, one engine step per batch, an update every `accumulate` steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "comm.h"
#include "guard.h"
#include "live.h"
#include "lstream/ingest.h"
#include "lstream/kernels.h"
#include "lstream/state.h"
#include "snapshots.h"
#include "train_internal.h"

/* How long one wait for a window may block before the stop flag is read. */
#define WAIT_SLICE_MS 100

/* Steps whose losses the summary keeps for its tail (the last fifth). */
#define TAIL_RING 65536

typedef struct step_loss_s {
  double loss, base, count;
} step_loss_t;

struct ls_trainer_s {
  ls_train_conf_t conf;
  train_view_t v; /* comm, rank, world, engine, series table, ingest, partitions: what
                     snapshots.c reads */
  train_snaps_t *snaps;
  int overlap; /* gradient sums start during backward (grads_ready) */
  ls_optim_t opt;
  int F, T, B;

  int P_all;                 /* partitions of all ranks */
  int *ended;                /* [P] partition delivered its last window (replay) */
  const ls_window_t **held;  /* [P] a partition's next window, taken but not yet used */
  int quota;                 /* replay: windows a step takes from each partition */
  const ls_window_t **defer; /* live: windows waiting for a later step, in order */
  int n_defer, cap_defer;
  int hurry;  /* live: a rank had windows waiting after the last step: none waits out a deadline */
  int n_live; /* live: windows in the step being formed */

  /* The step being formed and its host buffers. */
  const ls_window_t **wins; /* [B] */
  int64_t *slots;           /* [B] series slots, -1 for stateless gathers */
  int64_t *gather;          /* [B] slots to gather from (-1 = zero state) */
  int64_t *mark;            /* [cap_mark] per slot: the stamp of the step using it */
  size_t cap_mark;
  int64_t *slot_of;         /* [cap_slot_of] per consumer series id: its slot, -1 unknown */
  size_t cap_slot_of;
  int64_t stamp;
  float *seq;  /* [T+1, B, F] the windows' records: inputs rows 0..T-1, targets 1..T */
  float *mask; /* [T, B] */

  /* Accumulation and totals. */
  double acc_count;
  int acc_steps;
  int acc_bad;  /* a step of this accumulation had a non-finite loss: skip its update */
  int finished; /* ls_trainer_finished */
  train_guard_t guard;
  ls_train_summary_t sum;
  step_loss_t *ring; /* [TAIL_RING] */

  char note[2560]; /* what resuming and the comm setup did, for the program to print */
};

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

/* Parses the partitions key against the topic's count; keeps this rank's. */
static ls_err_t pick_partitions(ls_trainer_t *tr, int32_t count) {
  int32_t *const parts = calloc((size_t)count, sizeof *parts);
  LS_RETURN_IF(parts == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)count);
  tr->v.parts = parts;
  return train_pick_partitions(tr->conf.partitions, count, tr->v.world, tr->v.rank, parts, &tr->v.P,
                               &tr->P_all);
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
  is.max_abs = c->max_abs;
  is.commit_timeout_ms = 2000; /* group commits are informational: a coordinator that is down
                                  must not hold up the end of a run */
  is.buffer_records = c->buffer_records;
  is.stop_at_end = c->until;
  is.flush = c->until; /* a replay trains every record: trailing partial windows too, masked */
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

static ls_err_t alloc_buffers(ls_trainer_t *tr) {
  size_t const B = (size_t)tr->B, T = (size_t)tr->T, F = (size_t)tr->F;
  size_t const P = tr->v.P > 0 ? (size_t)tr->v.P : 1;
  tr->ended = calloc(P, sizeof *tr->ended);
  tr->held = calloc(P, sizeof *tr->held);
  tr->wins = calloc(B, sizeof *tr->wins);
  tr->slots = calloc(B, sizeof *tr->slots);
  tr->gather = calloc(B, sizeof *tr->gather);
  tr->seq = calloc((T + 1) * B * F, sizeof(float));
  tr->mask = calloc(T * B, sizeof(float));
  tr->ring = calloc(TAIL_RING, sizeof *tr->ring);
  LS_RETURN_IF(!tr->ended || !tr->held || !tr->wins || !tr->slots || !tr->gather || !tr->seq ||
                   !tr->mask || !tr->ring,
               LS_ERR_NOMEM, "no memory for the step buffers (B=%zu, T=%zu, F=%zu)", B, T, F);
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
  tr->overlap = tr->v.world > 1 && want && tr->conf.accumulate == 1;
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

/* The engine, sized for this rank's steps. */
static ls_err_t open_engine(ls_trainer_t *tr) {
  const ls_train_conf_t *const c = &tr->conf;
  /* A replay step takes batch/partitions windows from each partition (at
   * least one), whichever rank reads it; live steps take `batch` each. */
  tr->quota = c->batch / tr->P_all > 0 ? c->batch / tr->P_all : 1;
  tr->B = c->until ? tr->quota * (tr->v.P > 0 ? tr->v.P : 1) : c->batch;
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = tr->v.shape;
  ec.max_batch = tr->B;
  ec.max_window = c->window;
  ec.device = c->device ? LS_DEVICE_CUDA : LS_DEVICE_CPU;
  ec.precision = (ls_precision_t)c->precision;
  ec.threads = train_rank_threads(c->threads);
  if (c->device) LS_FORWARD_IF_ERROR(comm_gpu(tr->v.comm, &ec.device_index));
  return ls_engine_new(&ec, &tr->v.eng);
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
  tr->F = c->features, tr->T = c->window;
  tr->opt = optim_of(c);
  tr->v.conf = c;
  tr->v.shape = (ls_shape_t){c->features, c->hidden, c->layers, c->features}; /* O = I */

  ls_snapshot_t *snap = NULL;
  int64_t steps = 0, updates = 0;
  err = train_snaps_new(&tr->v, &tr->snaps);
  if (err == LS_OK) err = open_comm(tr);
  if (err == LS_OK) err = train_snaps_find(tr->snaps, &snap);
  if (err == LS_OK) err = open_ingest(tr, snap);
  if (err == LS_OK) err = open_engine(tr);
  if (err == LS_OK) err = bind_comm(tr);
  if (err == LS_OK) err = ls_engine_init_params(tr->v.eng, (uint64_t)c->seed);
  if (err == LS_OK) err = ls_series_table_new(tr->v.eng, 1024, &tr->v.series);
  if (err == LS_OK) err = alloc_buffers(tr);
  if (err == LS_OK && snap != NULL) err = train_snaps_apply(tr->snaps, snap, &steps, &updates);
  if (err == LS_OK) err = train_snaps_open(tr->snaps);
  ls_snapshot_destroy(snap);
  if (err != LS_OK) {
    ls_trainer_destroy(tr);
    return err;
  }
  tr->sum.steps = steps;
  tr->sum.updates = updates;
  *out = tr;
  return LS_OK;
}

void ls_trainer_destroy(ls_trainer_t *tr) {
  if (tr == NULL) return;
  if (tr->v.ing != NULL) {
    for (int p = 0; tr->held && p < tr->v.P; p++) ls_ingest_release(tr->v.ing, tr->held[p]);
    for (int i = 0; i < tr->n_defer; i++) ls_ingest_release(tr->v.ing, tr->defer[i]);
  }
  train_snaps_destroy(tr->snaps); /* waits for a snapshot being written */
  ls_ingest_destroy(tr->v.ing);
  ls_series_table_destroy(tr->v.series);
  comm_destroy(tr->v.comm); /* before the engine whose buffer its sums use */
  ls_engine_destroy(tr->v.eng);
  train_conf_free_kafka(&tr->conf);
  free((void *)tr->v.parts), free(tr->ended), free(tr->held), free(tr->defer), free(tr->wins);
  free(tr->slots), free(tr->gather), free(tr->mark), free(tr->slot_of), free(tr->seq), free(tr->mask);
  free(tr->ring);
  free(tr);
}

/* ------------------------------------------------------------------------ */
/* Step formation                                                            */

/* Grows a per-series array of int64_t (*v, *cap entries) to hold index i,
 * filling new entries with fill. */
static ls_err_t grow_index(int64_t **v, size_t *cap, size_t i, int64_t fill, const char *what) {
  if (i < *cap) return LS_OK;
  size_t n = *cap ? *cap : 1024;
  while (n <= i) n *= 2;
  int64_t *const grown = realloc(*v, n * sizeof *grown);
  LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "no memory for %zu %s", n, what);
  for (size_t k = *cap; k < n; k++) grown[k] = fill;
  *v = grown;
  *cap = n;
  return LS_OK;
}

/* The slot of a window's series: by the consumer's id of the series, the
 * key is looked up in the series table once per series. Grows the per-slot
 * marks with the table. */
static ls_err_t window_slot(ls_trainer_t *tr, const ls_window_t *w, int64_t *slot) {
  LS_RETURN_IF(w->series < 0, LS_ERR_INVALID_ARG, "window of series id %lld", (long long)w->series);
  LS_FORWARD_IF_ERROR(
      grow_index(&tr->slot_of, &tr->cap_slot_of, (size_t)w->series, -1, "series ids"));
  if (tr->slot_of[w->series] < 0)
    LS_FORWARD_IF_ERROR(ls_series_table_slot(tr->v.series, w->key, w->key_len, w->partition,
                                             &tr->slot_of[w->series]));
  *slot = tr->slot_of[w->series];
  return grow_index(&tr->mark, &tr->cap_mark, (size_t)*slot, 0, "series marks");
}

/* Copies window w into row b of the step's buffers. */
static void add_window(ls_trainer_t *tr, int b, const ls_window_t *w, int64_t slot) {
  size_t const F = (size_t)tr->F, B = (size_t)tr->B;
  for (int t = 0; t <= tr->T; t++)
    memcpy(tr->seq + ((size_t)t * B + b) * F, w->x + (size_t)t * F, F * sizeof(float));
  for (int t = 0; t < tr->T; t++) tr->mask[(size_t)t * B + b] = w->mask[t];
  tr->wins[b] = w;
  tr->slots[b] = slot;
  tr->mark[slot] = tr->stamp;
}

/* Waits for the next window of partition i (replay). *win is NULL when the
 * partition has ended or the run was stopped. */
static ls_err_t next_of_partition(ls_trainer_t *tr, int i, volatile sig_atomic_t *stop,
                                  const ls_window_t **win) {
  *win = NULL;
  double const t0 = base_now_s();
  ls_err_t err = LS_OK;
  while (!(stop && *stop)) {
    ls_next_t what;
    err = ls_ingest_next_partition(tr->v.ing, tr->v.parts[i], WAIT_SLICE_MS, &what, win);
    if (err != LS_OK || what == LS_NEXT_WINDOW) break;
    if (what == LS_NEXT_END) {
      tr->ended[i] = 1;
      break;
    }
  }
  tr->sum.wait_s += base_now_s() - t0;
  return err;
}

/* Replay: takes up to `quota` windows from every partition in turn, in its
 * offset order; a partition stops early when it ends or when its next
 * window's series is already in the step (that window is held for the next
 * step). What a partition gives depends on its own data only, so the step's
 * windows are the same whichever rank reads which partitions.
 * *n receives the number of windows (0: every partition has ended). */
static ls_err_t form_replay(ls_trainer_t *tr, volatile sig_atomic_t *stop, int *n) {
  *n = 0;
  for (int i = 0; i < tr->v.P && !(stop && *stop); i++) {
    for (int k = 0; k < tr->quota && !tr->ended[i]; k++) {
      const ls_window_t *w = tr->held[i];
      if (w == NULL) LS_FORWARD_IF_ERROR(next_of_partition(tr, i, stop, &w));
      if (w == NULL) break; /* ended or stopped */
      int64_t slot;
      LS_FORWARD_IF_ERROR(window_slot(tr, w, &slot));
      if (tr->mark[slot] == tr->stamp) { /* its series is in this step already */
        tr->held[i] = w;
        break;
      }
      tr->held[i] = NULL;
      add_window(tr, (*n)++, w, slot);
    }
  }
  return LS_OK;
}

/* Live: takes window w into the step, or defers it (its series is in the
 * step, or has a window deferred: each series stays in order). */
static ls_err_t live_take(void *opaque, const ls_window_t *w) {
  ls_trainer_t *const tr = opaque;
  int64_t slot;
  LS_FORWARD_IF_ERROR(window_slot(tr, w, &slot));
  if (tr->mark[slot] == tr->stamp) return live_defer(&tr->defer, &tr->n_defer, &tr->cap_defer, w);
  add_window(tr, tr->n_live++, w, slot);
  return LS_OK;
}

/* Live: the step can grow: fewer than B windows in it, fewer than B waiting
 * (how far it looks ahead). */
static int live_more(void *opaque) {
  const ls_trainer_t *const tr = opaque;
  return tr->n_live < tr->B && tr->n_defer < tr->B;
}

/* Live: deferred windows first, in order, then new ones, what every
 * partition has ready first (live_sweep). The step fires with B windows; as
 * soon as nothing ready can join it: windows wait that are all of series in
 * it (a backlog: it drains at replay speed, one window of each series a
 * step), it holds every series the rank knows, or another rank has a
 * backlog (tr->hurry); or deadline_ms after it began (so that ranks meet in
 * lockstep even when one has no data). */
static ls_err_t form_live(ls_trainer_t *tr, volatile sig_atomic_t *stop, int *n) {
  int kept = 0;
  tr->n_live = 0;
  for (int i = 0; i < tr->n_defer; i++) {
    const ls_window_t *const w = tr->defer[i];
    int64_t slot;
    LS_FORWARD_IF_ERROR(window_slot(tr, w, &slot));
    if (tr->n_live < tr->B && tr->mark[slot] != tr->stamp)
      add_window(tr, tr->n_live++, w, slot);
    else tr->defer[kept++] = w, tr->mark[slot] = tr->stamp;
  }
  tr->n_defer = kept;
  double const t0 = base_now_s(), deadline = t0 + tr->conf.deadline_ms / 1e3;
  while (live_more(tr) && !(stop && *stop)) {
    double const left = deadline - base_now_s();
    int const wait_ms = left < WAIT_SLICE_MS / 1e3 ? (int)(left * 1e3) + 1 : WAIT_SLICE_MS;
    if (tr->v.ing == NULL) { /* no partition on this rank: wait out the step */
      struct timespec const ts = {0, (long)wait_ms * 1000000L};
      if (tr->hurry || left <= 0) break;
      nanosleep(&ts, NULL);
      continue;
    }
    LS_FORWARD_IF_ERROR(live_sweep(tr->v.ing, tr->v.parts, tr->v.P, (int)(tr->stamp % tr->v.P),
                                   live_take, live_more, tr));
    int const n_in = tr->n_live;
    if (tr->hurry || (n_in > 0 && (tr->n_defer > 0 || live_every_series(tr->v.ing, n_in)))) break;
    if (left <= 0 || !live_more(tr)) break;
    ls_next_t what = LS_NEXT_TIMEOUT;
    const ls_window_t *w = NULL;
    LS_FORWARD_IF_ERROR(ls_ingest_next(tr->v.ing, wait_ms, &what, &w));
    if (what == LS_NEXT_WINDOW) LS_FORWARD_IF_ERROR(live_take(tr, w));
  }
  *n = tr->n_live;
  tr->sum.wait_s += base_now_s() - t0;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* One step                                                                  */

/* What every rank contributes to a step, summed across ranks. */
enum {
  V_LOSS, V_COUNT, V_BASE, V_WINDOWS, V_RECORDS, V_MORE, V_STOP, V_WAIT, V_COMPUTE,
  V_BACKLOG,  /* live: ranks with windows waiting for a later step */
  V_LAG,      /* ms from the event time of a window's last target to its step's end, summed */
  V_TIMED,    /* windows with an event time */
  V_REJECTED, /* [LS_REJECT__COUNT] records rejected so far, per reason */
  V__N = V_REJECTED + LS_REJECT__COUNT
};

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
  /* A non-finite loss or gradient never reaches the parameters (guard.h). */
  opt.skip_nonfinite = 1;
  int64_t const before = ls_engine_optimizer_steps(tr->v.eng);
  if (tr->acc_bad)
    LS_FORWARD_IF_ERROR(ls_engine_zero_grads(tr->v.eng));
  else
    LS_FORWARD_IF_ERROR(ls_engine_optimizer_step(tr->v.eng, &opt, scale, &st->grad_norm));
  st->updated = ls_engine_optimizer_steps(tr->v.eng) > before;
  st->nonfinite = !st->updated;
  st->lr = opt.lr;
  tr->sum.updates += st->updated;
  tr->acc_count = 0;
  tr->acc_steps = 0;
  tr->acc_bad = 0;
  return LS_OK;
}

/* This rank's part of a step over its n windows: the baseline, gather,
 * forward, backward (accumulating gradient sums), scatter, bookkeeping.
 * v receives the loss, baseline and counts. */
static ls_err_t compute_step(ls_trainer_t *tr, int n, double *v) {
  size_t const F = (size_t)tr->F, B = (size_t)tr->B;
  int const T = tr->T;
  /* The engine takes dense [T+1, n, F]: pack the rows of a partial step. */
  if (n < tr->B)
    for (int t = 1; t <= T; t++) {
      memmove(tr->seq + (size_t)t * n * F, tr->seq + (size_t)t * B * F,
              (size_t)n * F * sizeof(float));
      if (t < T)
        memmove(tr->mask + (size_t)t * n, tr->mask + (size_t)t * B, (size_t)n * sizeof(float));
    }
  /* Last-value baseline on the same targets: row r + n is row r's next step. */
  double base = 0.0;
  for (size_t r = 0; r < (size_t)T * n; r++) {
    if (tr->mask[r] == 0.0f) continue;
    const float *const xv = tr->seq + r * F, *const yv = tr->seq + (r + n) * F;
    for (size_t f = 0; f < F; f++) base += (double)(yv[f] - xv[f]) * (yv[f] - xv[f]);
  }
  for (int b = 0; b < n; b++) tr->gather[b] = tr->conf.stateless ? -1 : tr->slots[b];
  ls_state_table_t *const states = ls_series_table_states(tr->v.series);
  double loss = 0.0, count = 0.0;
  LS_FORWARD_IF_ERROR(ls_engine_gather_state(tr->v.eng, states, n, tr->gather));
  LS_FORWARD_IF_ERROR(ls_engine_forward_seq(tr->v.eng, T, n, tr->seq, tr->mask, &loss, &count));
  LS_FORWARD_IF_ERROR(ls_engine_backward(tr->v.eng, 1.0f));
  if (!tr->conf.stateless)
    LS_FORWARD_IF_ERROR(ls_engine_scatter_state(tr->v.eng, states, n, tr->slots));
  guard_scan(&tr->guard, tr->seq, tr->wins, n, T, (int)F);
  int64_t records = 0;
  int64_t const now = base_wall_ms();
  for (int b = 0; b < n; b++) {
    const ls_window_t *const w = tr->wins[b];
    if (w->last_time >= 0) v[V_LAG] += (double)(now - w->last_time), v[V_TIMED]++;
    LS_FORWARD_IF_ERROR(
        ls_series_table_trained(tr->v.series, tr->slots[b], w->n_targets, w->last_offset));
    records += w->n_targets;
    ls_ingest_release(tr->v.ing, w);
    tr->wins[b] = NULL;
  }
  v[V_LOSS] = loss, v[V_COUNT] = count, v[V_BASE] = base;
  v[V_WINDOWS] = n, v[V_RECORDS] = (double)records;
  return LS_OK;
}

/* After the sums of a step that trained windows: its update (every
 * `accumulate` steps), its figures into st and the totals. A step whose
 * loss is not finite adds nothing to the totals and skips its update, as
 * does one whose gradient is not finite (guard.h). */
static ls_err_t account_step(ls_trainer_t *tr, const double *v, ls_step_stats_t *st) {
  int const loss_bad = !isfinite(v[V_LOSS]);
  tr->acc_bad |= loss_bad;
  tr->acc_count += v[V_COUNT];
  if (++tr->acc_steps == tr->conf.accumulate) LS_FORWARD_IF_ERROR(update(tr, st));
  st->step = ++tr->sum.steps;
  st->windows = (int)v[V_WINDOWS];
  st->records = (int64_t)v[V_RECORDS];
  st->loss_sum = v[V_LOSS];
  st->baseline_sum = v[V_BASE];
  st->count = v[V_COUNT];
  /* Times: the mean over ranks. */
  st->compute_s = v[V_COMPUTE] / tr->v.world;
  st->wait_s = v[V_WAIT] / tr->v.world;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    st->rejected[r] = (int64_t)v[V_REJECTED + r];
  st->lag_ms = v[V_TIMED] > 0 ? v[V_LAG] / v[V_TIMED] : NAN;
  tr->sum.windows += st->windows;
  tr->sum.records += st->records;
  tr->sum.compute_s += st->compute_s;
  st->nonfinite |= loss_bad;
  if (st->nonfinite) st->nonfinite_note = guard_note(&tr->guard, st->step, loss_bad);
  tr->sum.nonfinite_steps = tr->guard.bad_steps;
  step_loss_t const l = {st->loss_sum, st->baseline_sum, st->count};
  tr->ring[(st->step - 1) % TAIL_RING] = loss_bad ? (step_loss_t){0, 0, 0} : l;
  if (loss_bad) return LS_OK;
  tr->sum.loss_sum += l.loss;
  tr->sum.baseline_sum += l.base;
  tr->sum.count += l.count;
  return LS_OK;
}

/* Replay: does this rank still have windows to give? */
static int has_more(const ls_trainer_t *tr) {
  for (int i = 0; i < tr->v.P; i++)
    if (!tr->ended[i] || tr->held[i] != NULL) return 1;
  return 0;
}

/* Every rank steps in lockstep: it forms its part of the step (possibly
 * empty), computes it, and joins one sum of the step's figures; a rank with
 * nothing adds zeros. The run ends when every rank has run out (replay) or
 * any rank is stopped. */
ls_err_t ls_trainer_run(ls_trainer_t *tr, volatile sig_atomic_t *stop, ls_step_cb cb,
                        void *opaque) {
  LS_RETURN_IF(tr == NULL, LS_ERR_INVALID_ARG, "trainer is NULL");
  double const t0 = base_now_s();
  ls_err_t err = LS_OK;
  int cb_stop = 0;
  for (;;) {
    double v[V__N + SNAP_V__N] = {0};
    /* Every rank has the same count: a run resumed at max_steps trains none. */
    if (tr->conf.max_steps > 0 && tr->sum.steps >= tr->conf.max_steps) break;
    double const w0 = tr->sum.wait_s;
    int n = 0;
    tr->stamp++;
    tr->guard.value = -1.0; /* no window of this rank in the step yet */
    if (!(stop && *stop) && !cb_stop) {
      if (tr->conf.until) err = tr->v.P > 0 ? form_replay(tr, stop, &n) : LS_OK;
      else err = form_live(tr, stop, &n);
    }
    double const c0 = base_now_s();
    if (err == LS_OK && n > 0) err = compute_step(tr, n, v);
    /* A rank without windows starts the same sums, in the same order, on
     * its zero gradient. */
    else if (err == LS_OK && tr->overlap) err = comm_grads_start_segments(tr->v.comm);
    if (err != LS_OK) break; /* the other ranks learn of it when this one exits */
    v[V_COMPUTE] = base_now_s() - c0;
    v[V_WAIT] = tr->sum.wait_s - w0;
    v[V_MORE] = tr->conf.until ? has_more(tr) : 1;
    v[V_STOP] = (stop && *stop) || cb_stop;
    v[V_BACKLOG] = tr->n_defer > 0;
    train_view_rejections(&tr->v, v + V_REJECTED);
    train_snaps_contribute(tr->snaps, tr->sum.steps, v + V__N);
    double const s0 = base_now_s();
    err = comm_sum_doubles(tr->v.comm, v, V__N + SNAP_V__N);
    if (err == LS_OK && tr->overlap) err = comm_grads_finish(tr->v.comm);
    tr->sum.comm_s += base_now_s() - s0;
    if (err != LS_OK) break;
    tr->hurry = v[V_BACKLOG] > 0;
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    st.grad_norm = -1.0f;
    if (v[V_WINDOWS] > 0 && (err = account_step(tr, v, &st)) != LS_OK) break;
    err = train_snaps_after_step(tr->snaps, v + V__N, tr->sum.steps, tr->acc_steps != 0,
                                 v[V_WINDOWS] > 0, &st);
    if (err != LS_OK) break;
    int const event = st.snapshot_error != NULL || st.snapshot_committed >= 0;
    if ((v[V_WINDOWS] > 0 || event) && cb != NULL && cb(opaque, &st) != 0) cb_stop = 1;
    if (v[V_STOP] > 0) break;
    if (tr->conf.until && v[V_WINDOWS] == 0 && v[V_MORE] == 0) break;
  }
  /* Gradients accumulated for a partial update are applied at the end (on
   * every rank alike: the sums above are the same everywhere). */
  if (err == LS_OK && tr->acc_steps > 0) {
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    err = update(tr, &st);
  }
  int const together = err == LS_OK;
  if (err == LS_OK) err = train_snaps_final(tr->snaps, tr->sum.steps, tr->acc_steps != 0);
  tr->finished = together && (err == LS_OK || train_snaps_failed(tr->snaps));
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
  out->threads = ls_engine_get_conf(tr->v.eng)->threads;
  int64_t tail = tr->sum.steps / 5;
  if (tail < 1) tail = tr->sum.steps;
  if (tail > TAIL_RING) tail = TAIL_RING;
  out->tail_steps = tail;
  out->tail_loss_sum = out->tail_baseline_sum = out->tail_count = 0.0;
  for (int64_t s = tr->sum.steps - tail; s < tr->sum.steps; s++) {
    const step_loss_t *const r = &tr->ring[s % TAIL_RING];
    out->tail_loss_sum += r->loss;
    out->tail_baseline_sum += r->base;
    out->tail_count += r->count;
  }
  double v[3 + LS_REJECT__COUNT] = {(double)out->series, out->wait_s, out->comm_s};
  train_view_rejections(&tr->v, v + 3);
  LS_FORWARD_IF_ERROR(comm_sum_doubles(tr->v.comm, v, 3 + LS_REJECT__COUNT));
  out->series = (int64_t)v[0];
  out->wait_s = v[1] / tr->v.world;
  out->comm_s = v[2] / tr->v.world;
  out->rejected = 0;
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    out->rejected += out->rejected_by[r] = (int64_t)v[3 + r];
  return LS_OK;
}

ls_err_t ls_trainer_digest(ls_trainer_t *tr, uint64_t *params, uint64_t *states) {
  LS_RETURN_IF(tr == NULL || params == NULL || states == NULL, LS_ERR_INVALID_ARG,
               "trainer or outputs are NULL");
  return train_view_digest(&tr->v, params, states);
}

const char *ls_trainer_note(const ls_trainer_t *tr) { return tr == NULL ? "" : tr->note; }

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
