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

#include "snapshots.h"

#include "base/clock.h"
#include "guard.h"
#include "base/digest.h"
#include "predict.h" /* and prep.h */

struct train_snaps_s {
  const train_view_t *v;
  ls_snapshot_lock_t *lock;  /* rank 0's hold on snapshot_dir, NULL without */
  ls_snapshotter_t *snapper; /* NULL without snapshot_dir */
  uint64_t fingerprint;      /* of the configuration a snapshot must match */
  int64_t pending;           /* step of the snapshot being written or committed; -1 none */
  int commit_asked;          /* rank 0 asked the writer to commit `pending` */
  int refused;               /* rank 0 refused `pending`: its model is not finite */
  int64_t pred_mark;         /* the forecasts to be committed before `pending` may be */
  double last_t;             /* when the last snapshot was taken (rank 0) */
  int32_t *parts;            /* [P] this rank's partitions in the pending snapshot */
  int64_t *offsets;          /* [P] their resume offsets */
  ls_ingest_mark_t *marks;   /* [P] the last record read of each (train/marks.c) */
  int cap_parts;             /* their room */
  int n;
  int64_t resumed_step; /* the snapshot the run resumed from, -1 none */
  int64_t durable_step; /* the newest snapshot committed (or resumed from), -1 none */
  double durable_t;     /* when it committed (the run's start for one resumed from) */
  int final_failed;     /* train_snaps_final failed on every rank */
  int64_t committed, skipped;
  char note[2048];      /* what resuming did */
  char path[2048];      /* the snapshot resumed from */
  char error[640];      /* the last snapshot failure, for the step's stats */
  char pred_error[512]; /* why the forecasts before `pending` cannot be committed */
};

/* ------------------------------------------------------------------------ */
/* Configuration fingerprint                                                 */

/* The digest of a configuration that format-4 snapshots keep (and later
 * ones too, for the shards' agreement): kept exactly as it was, so that a
 * format-4 snapshot, which holds no settings section, can still be checked
 * against the run resuming it. */
static uint64_t fingerprint(const ls_train_conf_t *c) {
  char text[2560];
  /* What decides the model and the steps a resumed run must reproduce; not
   * where it reads from, how many ranks, or how it snapshots. */
  int const n = snprintf(
      text, sizeof text,
      "topic=%s format=%d F=%d T=%d B=%d H=%d L=%d opt=%d lr=%.17g b1=%.17g b2=%.17g eps=%.17g "
      "wd=%.17g clip=%.17g warmup=%d acc=%d seed=%" PRId64 " stateless=%d normalize=%d N=%d "
      "target=%d inputs=%d targets=%s calibrate=%d replay=%d,%d,%d queue=%d buffer=%" PRId64,
      c->topic, c->format, c->features, c->window, c->batch, c->hidden, c->layers, c->optimizer,
      c->lr, c->beta1, c->beta2, c->eps, c->weight_decay, c->clip, c->warmup, c->accumulate,
      c->seed, c->stateless, c->normalize, c->norm_window, c->target, c->inputs, c->targets,
      c->calibrate, c->replay, c->replay_batch, c->replay_memory, c->queue_windows,
      c->buffer_records);
  return base_fnv1a(BASE_FNV1A_INIT, text, n < (int)sizeof text ? (size_t)n : sizeof text);
}

/* ------------------------------------------------------------------------ */
/* Resuming                                                                  */

ls_err_t train_snaps_new(const train_view_t *view, train_snaps_t **out) {
  LS_RETURN_IF(view == NULL || out == NULL, LS_ERR_INVALID_ARG, "view or out is NULL");
  const ls_train_conf_t *const c = view->conf;
  LS_RETURN_IF((c->snapshot_every > 0 || c->snapshot_interval > 0) && c->snapshot_dir[0] == '\0',
               LS_ERR_INVALID_ARG,
               "snapshot_every=%" PRId64 " and snapshot_interval=%g need snapshot_dir (give "
               "--snapshot-dir DIR, or drop --snapshot-every and --snapshot-interval)",
               c->snapshot_every, c->snapshot_interval);
  train_snaps_t *const s = calloc(1, sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for snapshot bookkeeping");
  s->v = view;
  s->fingerprint = fingerprint(view->conf);
  s->pending = -1;
  s->resumed_step = s->durable_step = -1;
  s->durable_t = base_now_s();
  *out = s;
  return LS_OK;
}

void train_snaps_destroy(train_snaps_t *s) {
  if (s == NULL) return;
  ls_snapshotter_destroy(s->snapper);
  ls_snapshot_unlock(s->lock); /* after the last write */
  free(s->parts), free(s->offsets), free(s->marks);
  free(s);
}

int train_snaps_failed(const train_snaps_t *s) {
  return s != NULL && s->final_failed;
}

const char *train_snaps_note(const train_snaps_t *s) {
  return s == NULL ? "" : s->note;
}

void train_snaps_totals(const train_snaps_t *s, ls_train_summary_t *sum) {
  sum->resumed_step = s->resumed_step;
  sum->snapshots = s->committed;
  sum->snapshots_skipped = s->skipped;
}

void train_snaps_status(const train_snaps_t *s, ls_snapshotter_status_t *out, int *on) {
  memset(out, 0, sizeof *out);
  *on = s != NULL && s->snapper != NULL;
  if (*on) (void)ls_snapshotter_poll(s->snapper, out);
}

/* ------------------------------------------------------------------------ */
/* Resuming                                                                  */

static void note_reject(void *opaque, const char *path, ls_err_t err, const char *why) {
  train_snaps_t *const s = opaque;
  size_t const len = strlen(s->note);
  snprintf(s->note + len, sizeof s->note - len, "passed over %s (%s: %s); ", path, ls_err2str(err),
           why);
}

/* The path of the snapshot to resume from ("" for none): the resume key, or
 * with `latest` the newest good one rank 0 finds. */
static ls_err_t find_path(train_snaps_t *s, char *path, size_t size) {
  const ls_train_conf_t *const c = s->v->conf;
  path[0] = '\0';
  if (!strcmp(c->resume, "none")) return LS_OK;
  if (strcmp(c->resume, "latest") != 0) {
    snprintf(path, size, "%s", c->resume);
    return LS_OK;
  }
  if (c->snapshot_dir[0] == '\0') return LS_OK;
  /* Rank 0 chooses; the others take the same step, so that every rank
   * resumes from one snapshot even if files change meanwhile. */
  double step = -1.0;
  if (s->v->rank == 0) {
    LS_FORWARD_IF_ERROR(ls_snapshot_find_latest(c->snapshot_dir, note_reject, s, path, size));
    ls_snapshot_manifest_t *man = NULL;
    if (path[0] != '\0') {
      LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &man));
      int64_t at = 0;
      int32_t w = 0;
      ls_err_t const err = ls_snapshot_manifest_get(man, &at, &w);
      ls_snapshot_manifest_destroy(man);
      LS_FORWARD_IF_ERROR(err);
      step = (double)at;
    }
  }
  double v[1] = {s->v->rank == 0 ? step + 1.0 : 0.0};
  LS_FORWARD_IF_ERROR(comm_sum_doubles(s->v->comm, v, 1));
  path[0] = '\0';
  if (v[0] >= 1.0) /* else no snapshot yet: a fresh start */
    LS_FORWARD_IF_ERROR(ls_snapshot_path(c->snapshot_dir, (int64_t)v[0] - 1, path, size));
  return LS_OK;
}

ls_err_t train_snaps_check_shape(const train_snaps_t *s, const ls_snapshot_t *snap) {
  LS_RETURN_IF(s == NULL || snap == NULL, LS_ERR_INVALID_ARG, "snapshots or snap is NULL");
  const char *const path = s->path;
  ls_shape_t shape;
  ls_shape_t const *const want = &s->v->shape;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_shape(snap, &shape));
  LS_RETURN_IF(memcmp(&shape, want, sizeof shape) != 0, LS_ERR_INVALID_ARG,
               "snapshot %s holds a model of features %d, hidden %d, layers %d; this run has %d, "
               "%d, %d: resume with the same model, or --resume none",
               path, shape.input_size, shape.hidden_size, shape.num_layers, want->input_size,
               want->hidden_size, want->num_layers);
  return LS_OK;
}

/* A loaded snapshot's configuration against this run's. */
static ls_err_t check_loaded(const train_snaps_t *s, const ls_snapshot_t *snap, const char *path,
                             ls_snapshot_info_t *info) {
  LS_FORWARD_IF_ERROR(ls_snapshot_get_info(snap, info));
  uint32_t version = 0;
  const void *text = NULL;
  size_t len = 0;
  /* Format 5 on: the settings were reconciled option by option (settle).
   * Format 4 kept a digest only. */
  if (ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_SETTINGS, &version, &text, &len) == LS_OK)
    return LS_OK;
  LS_RETURN_IF(info->fingerprint != s->fingerprint, LS_ERR_INVALID_ARG,
               "snapshot %s was written by an earlier lstream (format 4), which kept a digest of "
               "its settings, not their values: one of %s differs from this run's; resume with "
               "the options that wrote it, or --resume none",
               path, train_conf_fixed_names());
  return LS_OK;
}

/* The module sections this version reads: a snapshot holding another that
 * it must not skip was written by a later version. */
static const uint32_t known_sections[] = {
    LS_SNAPSHOT_SECTION_SETTINGS, LS_SNAPSHOT_SECTION_CALIBRATION,
    LS_SNAPSHOT_SECTION_PREDICT,  LS_SNAPSHOT_SECTION_RUN,
    LS_SNAPSHOT_SECTION_MARKS,    LS_SNAPSHOT_SECTION_SERIES_MODEL};

/* The settings section: "key=value\n" per fixed or noted option, in the
 * option table's order (train_conf_settings). Version 1. */
enum { SETTINGS_VERSION = 1 };

ls_err_t train_snaps_settle(train_snaps_t *s, ls_train_conf_t *conf, ls_snapshot_t **snap) {
  LS_RETURN_IF(s == NULL || conf == NULL || snap == NULL, LS_ERR_INVALID_ARG,
               "snapshots, conf or snap is NULL");
  LS_RETURN_IF(conf != s->v->conf, LS_ERR_INVALID_ARG, "conf is not the view's");
  if (*snap == NULL) return LS_OK;
  ls_err_t err = ls_snapshot_check_sections(*snap, known_sections,
                                            sizeof known_sections / sizeof known_sections[0]);
  uint32_t version = 0;
  const void *text = NULL;
  size_t len = 0;
  ls_err_t const has =
      ls_snapshot_get_section(*snap, LS_SNAPSHOT_SECTION_SETTINGS, &version, &text, &len);
  if (err == LS_OK && has == LS_OK && version > SETTINGS_VERSION)
    err = ls_error_set(LS_ERR_UNSUPPORTED,
                       "snapshot %s: its settings are of version %u, this lstream reads %d: "
                       "resume with the lstream that wrote it, or a later one",
                       s->path, version, SETTINGS_VERSION);
  char note[1024] = "";
  if (err == LS_OK && has == LS_OK)
    err = train_conf_adopt(conf, text, len, s->path, note, sizeof note);
  else if (err == LS_OK)
    err = train_conf_adopt_earlier(conf, s->path, note, sizeof note);
  if (err == LS_OK) s->fingerprint = fingerprint(conf);
  ls_snapshot_info_t info;
  if (err == LS_OK) err = check_loaded(s, *snap, s->path, &info);
  if (err != LS_OK) {
    ls_snapshot_destroy(*snap);
    *snap = NULL;
    return err;
  }
  size_t n = strlen(note);
  while (n > 0 && (note[n - 1] == ' ' || note[n - 1] == ';'))
    note[--n] = '\0';
  size_t const at = strlen(s->note);
  snprintf(s->note + at, sizeof s->note - at, "%s%s", n ? "; " : "", note);
  return LS_OK;
}

ls_err_t train_snaps_find(train_snaps_t *s, ls_snapshot_t **snap) {
  LS_RETURN_IF(s == NULL || snap == NULL, LS_ERR_INVALID_ARG, "snapshots or snap is NULL");
  *snap = NULL;
  /* One trainer per directory, from before it chooses what to resume from;
   * rank 0 holds it for all (a refusal ends the job). */
  if (s->v->rank == 0 && s->v->conf->snapshot_dir[0] != '\0')
    LS_FORWARD_IF_ERROR(ls_snapshot_lock(s->v->conf->snapshot_dir, &s->lock));
  char path[2048];
  LS_FORWARD_IF_ERROR(find_path(s, path, sizeof path));
  if (path[0] == '\0') return LS_OK;
  LS_FORWARD_IF_ERROR(ls_snapshot_load(path, s->v->world, s->v->rank, snap));
  snprintf(s->path, sizeof s->path, "%s", path);
  ls_snapshot_info_t info;
  ls_err_t err = ls_snapshot_get_info(*snap, &info);
  if (err != LS_OK) {
    ls_snapshot_destroy(*snap);
    *snap = NULL;
    return err;
  }
  s->resumed_step = s->durable_step = info.step;
  /* The snapshot's own rank count is its manifest's (the loaded part is this
   * run's, re-sharded when the counts differ). */
  ls_snapshot_manifest_t *man = NULL;
  int64_t at = 0;
  int32_t written = 0;
  err = ls_snapshot_manifest_read(path, &man);
  if (err == LS_OK) err = ls_snapshot_manifest_get(man, &at, &written);
  ls_snapshot_manifest_destroy(man);
  if (err == LS_OK && written != s->v->world) /* re-sharded: each shard's marks of ours */
    err = train_marks_gather(path, *snap, s->v->world, s->v->rank);
  size_t const len = strlen(s->note);
  snprintf(s->note + len, sizeof s->note - len,
           "resumed from %s (step %" PRId64 "; written by %d rank%s, resumed on %d)", path,
           info.step, (int)written, written == 1 ? "" : "s", s->v->world);
  return err;
}

/* Where partition p starts: the snapshot's resume offset when it has one
 * (*resumed = 1), else dflt. */
static ls_start_t partition_start(const ls_snapshot_t *snap, int32_t p, ls_start_t dflt,
                                  int *resumed) {
  size_t const n = snap != NULL ? ls_snapshot_partition_count(snap) : 0;
  *resumed = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t part = -1;
    int64_t offset = 0;
    if (ls_snapshot_get_partition(snap, i, &part, &offset) == LS_OK && part == p) {
      *resumed = 1;
      return (ls_start_t){LS_START_OFFSET, offset};
    }
  }
  return dflt;
}

ls_err_t train_snaps_ingest(const ls_snapshot_t *snap, ls_ingest_conf_t *ic, const int32_t *parts,
                            int P, int32_t topic, ls_start_t start) {
  int32_t known = 0;
  if (snap != NULL) LS_FORWARD_IF_ERROR(train_marks_topic(snap, &known));
  int grown = known > 0 && topic > known;
  for (int i = 0; i < P; i++) {
    int resumed = 0;
    /* One a snapshot lacks was added to the topic since: from its beginning. */
    ls_start_t const at = partition_start(
        snap, parts[i], snap != NULL ? (ls_start_t){LS_START_BEGINNING, 0} : start, &resumed);
    LS_FORWARD_IF_ERROR(ls_ingest_conf_add_partition(ic, parts[i], at));
    grown |= snap != NULL && !resumed;
    ls_ingest_mark_t mark = {-1, -1, 0};
    if (resumed) LS_FORWARD_IF_ERROR(train_marks_get(snap, parts[i], &mark));
    /* A mark past the start (a snapshot not of this lstream) is not checked. */
    if (resumed && mark.offset >= at.value) mark = (ls_ingest_mark_t){-1, -1, 0};
    if (resumed) LS_FORWARD_IF_ERROR(ls_ingest_conf_set_mark(ic, parts[i], &mark));
  }
  if (grown) LS_FORWARD_IF_ERROR(ls_ingest_conf_set_arrivals(ic, 1));
  /* The records in flight: the consumer forms the windows not yet trained
   * from them (the partitions resume past them). */
  size_t const n = snap != NULL ? ls_snapshot_inflight_count(snap) : 0;
  ls_ingest_settings_t is;
  LS_FORWARD_IF_ERROR(ls_ingest_conf_get_settings(ic, &is));
  LS_RETURN_IF(n > 0 && ls_snapshot_inflight_features(snap) != is.features, LS_ERR_INVALID_ARG,
               "the snapshot's records in flight have %d features, this run reads %d: resume "
               "with the same features, or --resume none",
               ls_snapshot_inflight_features(snap), is.features);
  for (size_t i = 0; i < n; i++) {
    ls_inflight_t in;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_inflight(snap, i, &in));
    LS_FORWARD_IF_ERROR(ls_ingest_conf_restore(ic, &in));
  }
  return LS_OK;
}

/* The partitions the consumer ing (NULL: none) restarted, their topic
 * re-created: *out [*n] (malloc'ed) and their ids in text. */
static ls_err_t restarted_partitions(ls_ingest_t *ing, int32_t **out, int *n, char *text,
                                     size_t size) {
  *out = NULL, *n = 0;
  int count = 0;
  if (ing == NULL) return LS_OK;
  LS_FORWARD_IF_ERROR(ls_ingest_partitions(ing, NULL, 0, &count));
  ls_ingest_partition_t *const parts = calloc(count > 0 ? (size_t)count : 1, sizeof *parts);
  *out = calloc(count > 0 ? (size_t)count : 1, sizeof **out);
  if (parts == NULL || *out == NULL) {
    free(parts), free(*out);
    *out = NULL;
    return ls_error_set(LS_ERR_NOMEM, "no memory for %d partitions", count);
  }
  ls_err_t const err = ls_ingest_partitions(ing, parts, count, &count);
  size_t at = 0;
  for (int i = 0; i < count && err == LS_OK; i++) {
    if (!parts[i].restarted) continue;
    (*out)[(*n)++] = parts[i].partition;
    if (at < size)
      at += (size_t)snprintf(text + at, size - at, "%s%d", *n > 1 ? ", " : "",
                             (int)parts[i].partition);
  }
  free(parts);
  return err;
}

/* Series i's host-side state (F features) from the snapshot into the table's slot. */
static ls_err_t apply_stats(ls_series_table_t *series, ls_snapshot_t *snap, size_t i, int64_t slot,
                            const prep_adopt_t *ad, int F) {
  ls_series_stats_t from, to_st;
  LS_FORWARD_IF_ERROR(ls_snapshot_series_stats(snap, i, &from));
  LS_FORWARD_IF_ERROR(ls_series_table_stats(series, slot, &to_st));
  return prep_stats_adopt(ad, F, &to_st, from);
}

ls_err_t train_snaps_apply(train_snaps_t *s, ls_snapshot_t *snap, int64_t *steps,
                           int64_t *updates) {
  ls_engine_t *const eng = s->v->eng;
  ls_series_table_t *const series = s->v->series;
  size_t const S = ls_snapshot_series_count(snap);
  int F = 0, O = 0, tf = 0, to = 0; /* the snapshot's and the table's features and targets */
  ls_snapshot_stats_shape(snap, &F, &O);
  ls_series_table_stats_shape(series, &tf, &to);
  LS_RETURN_IF(S > 0 && (F != tf || O != to), LS_ERR_INVALID_ARG,
               "the snapshot's series keep state of %d features and %d targets, this run's of %d "
               "and %d: resume with the same features and targets, or --resume none",
               F, O, tf, to);
  ls_snapshot_model_t model;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_model(snap, &model));
  LS_FORWARD_IF_ERROR(ls_engine_write_params(eng, model.params, model.n));
  LS_FORWARD_IF_ERROR(
      ls_engine_write_optimizer(eng, model.adam_m, model.adam_v, model.n, model.adam_steps));
  /* The partitions the consumer restarted (their topic re-created): their
   * series start over. */
  char restarted[256] = "";
  int32_t *gone = NULL;
  int n_gone = 0;
  LS_FORWARD_IF_ERROR(restarted_partitions(s->v->ing, &gone, &n_gone, restarted, sizeof restarted));
  /* The series in their order: the slots, and the table, as the writer's. */
  size_t kept = 0;
  prep_adopt_t ad; /* their model states' layout in the snapshot and in this run */
  ls_err_t err = prep_adopt_begin(s->v->conf, to, ls_series_table_model_width(series), snap, &ad);
  for (size_t i = 0; i < S && err == LS_OK; i++) {
    ls_series_info_t si;
    int64_t slot = -1;
    const float *h = NULL, *c = NULL;
    err = ls_snapshot_get_series(snap, i, &si, &h, &c);
    int drop = 0;
    for (int k = 0; k < n_gone && err == LS_OK; k++)
      drop |= gone[k] == si.partition;
    if (err != LS_OK || drop) continue;
    err = ls_series_table_slot(series, si.key, si.key_len, si.partition, &slot);
    if (err == LS_OK) err = ls_series_table_restore(series, slot, &si);
    if (err == LS_OK) err = apply_stats(series, snap, i, slot, &ad, F);
    if (err == LS_OK && n_gone > 0) /* else all at once below */
      err = ls_state_table_write(ls_series_table_states(series), (size_t)slot, 1, h, c);
    kept++;
  }
  free(gone);
  prep_adopt_end(&ad);
  LS_FORWARD_IF_ERROR(err);
  LS_FORWARD_IF_ERROR(ls_series_table_restored(series));
  if (S > 0 && n_gone == 0) {
    const float *h = NULL, *c = NULL;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_states(snap, &h, &c));
    LS_FORWARD_IF_ERROR(ls_state_table_write(ls_series_table_states(series), 0, S, h, c));
  }
  if (n_gone > 0) {
    size_t const at = strlen(s->note);
    snprintf(s->note + at, sizeof s->note - at,
             "; topic '%s' re-created since the snapshot (--topic-recreated restart): partition%s "
             "%s read from %s beginning, %zu of the snapshot's series started over",
             s->v->conf->topic, n_gone > 1 ? "s" : "", restarted, n_gone > 1 ? "their" : "its",
             S - kept);
  }
  LS_FORWARD_IF_ERROR(figures_load(s->v->fig, snap));
  int cut = 0;
  if (s->v->rep != NULL) LS_FORWARD_IF_ERROR(replay_load(s->v->rep, snap, &cut));
  size_t const at = strlen(s->note);
  if (cut)
    snprintf(s->note + at, sizeof s->note - at,
             "; the topic's partitions are not the snapshot's: each replay memory keeps its newest "
             "windows that fit");
  ls_snapshot_info_t info;
  LS_FORWARD_IF_ERROR(ls_snapshot_get_info(snap, &info));
  *steps = info.step;
  *updates = info.updates;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Taking snapshots                                                          */

/* Room in parts, offsets and marks for the view's partitions (live,
 * those added to the topic join them). */
static ls_err_t room_for_partitions(train_snaps_t *s) {
  int const P = s->v->P > 0 ? s->v->P : 1;
  if (P <= s->cap_parts) return LS_OK;
  int32_t *const parts = realloc(s->parts, (size_t)P * sizeof *parts);
  if (parts != NULL) s->parts = parts;
  int64_t *const offsets = realloc(s->offsets, (size_t)P * sizeof *offsets);
  if (offsets != NULL) s->offsets = offsets;
  ls_ingest_mark_t *const marks = realloc(s->marks, (size_t)P * sizeof *marks);
  if (marks != NULL) s->marks = marks;
  LS_RETURN_IF(parts == NULL || offsets == NULL || marks == NULL, LS_ERR_NOMEM,
               "no memory for the snapshot offsets of %d partitions", P);
  s->cap_parts = P;
  return LS_OK;
}

ls_err_t train_snaps_open(train_snaps_t *s) {
  const ls_train_conf_t *const c = s->v->conf;
  s->pending = -1;
  s->last_t = base_now_s();
  if (c->snapshot_dir[0] == '\0') return LS_OK;
  ls_snapshot_conf_t sc;
  ls_snapshot_conf_init(&sc);
  sc.level = c->snapshot_level;
  sc.workers = c->snapshot_threads;
  sc.shuffle = c->snapshot_shuffle;
  sc.keep = c->snapshot_keep;
  sc.deferred = s->v->pred != NULL; /* committed once the forecasts before it are */
  LS_FORWARD_IF_ERROR(room_for_partitions(s));
  return ls_snapshotter_new(c->snapshot_dir, &s->v->shape, &sc, &s->snapper);
}

void train_snaps_contribute(train_snaps_t *s, int64_t steps, double *v) {
  memset(v, 0, SNAP_V__N * sizeof *v);
  if (s->snapper == NULL) return;
  ls_snapshotter_status_t st;
  if (ls_snapshotter_poll(s->snapper, &st) != LS_OK) return;
  const ls_train_conf_t *const c = s->v->conf;
  if (s->v->rank == 0) {
    int64_t const next = steps + 1;
    v[SNAP_V_DUE] = (c->snapshot_every > 0 && next % c->snapshot_every == 0) ||
                    (c->snapshot_interval > 0 && base_now_s() - s->last_t >= c->snapshot_interval);
    v[SNAP_V_COMMITTED] = (double)(st.committed_step + 1); /* 0: none yet */
  }
  v[SNAP_V_BUSY] = st.busy;
  v[SNAP_V_PENDING] = s->pending >= 0;
  /* Its shard is written, and the forecasts made before it are committed. */
  int durable = 1;
  ls_err_t const perr = s->pending >= 0 && s->v->pred != NULL
                            ? predict_durable(s->v->pred, s->pred_mark, 0, &durable)
                            : LS_OK;
  if (perr != LS_OK) snprintf(s->pred_error, sizeof s->pred_error, "%s", ls_last_error());
  v[SNAP_V_SHARDS] = s->pending >= 0 && !st.busy && st.written_step == s->pending && durable;
  /* The pending snapshot's write (or rank 0's commit, or the forecasts)
   * failed, or rank 0 refused it. */
  v[SNAP_V_FAILED] =
      s->pending >= 0 && ((!st.busy && st.err != LS_OK) || s->refused || perr != LS_OK);
}

/* A series in flight into the snapshot (opaque), windows written before by reference. */
static ls_err_t keep_inflight(void *opaque, const ls_inflight_parts_t *in) {
  return ls_snapshot_add_inflight_parts(opaque, in);
}

/* Fills the staging snapshot with this rank's part after `steps` steps and
 * hands it to the writer. */
static ls_err_t take(train_snaps_t *s, int64_t steps) {
  const train_view_t *const v = s->v;
  ls_snapshot_t *const snap = ls_snapshotter_staging(s->snapper);
  ls_snapshot_reset(snap);
  ls_snapshot_info_t const info = {
      steps, (uint64_t)v->conf->seed, s->fingerprint, v->world, v->rank, *v->updates};
  LS_FORWARD_IF_ERROR(ls_snapshot_set_info(snap, &info));
  /* The run's settings, in every shard (a resume on another world reads
   * rank 0's). */
  char text[8192];
  size_t len = 0;
  LS_FORWARD_IF_ERROR(
      train_conf_settings(v->conf, LS_KEY_FIXED | LS_KEY_NOTED, text, sizeof text, &len));
  LS_FORWARD_IF_ERROR(ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_SETTINGS, SETTINGS_VERSION,
                                              LS_SNAPSHOT_REQUIRED, text, len));
  LS_FORWARD_IF_ERROR(train_run_put(v, snap));
  LS_FORWARD_IF_ERROR(prep_layout_put(snap));
  if (v->rank == 0) {
    LS_FORWARD_IF_ERROR(ls_snapshot_set_engine(snap, v->eng));
    /* Never a model with a NaN or an Inf (the step loop skips the updates
     * that would make one): the snapshot is dropped on every rank. */
    ls_snapshot_model_t model;
    LS_FORWARD_IF_ERROR(ls_snapshot_get_model(snap, &model));
    s->refused = !guard_finite(model.params, model.n);
    if (s->refused) {
      s->pending = steps;
      return LS_OK;
    }
    LS_FORWARD_IF_ERROR(figures_save(v->fig, snap));
  }
  size_t cap = 0, entry = 0;
  if (v->rep != NULL) replay_shape(v->rep, &cap, &entry);
  LS_FORWARD_IF_ERROR(ls_snapshot_set_memory_shape(snap, cap, entry));
  LS_FORWARD_IF_ERROR(ls_snapshot_set_inflight_features(snap, v->conf->features)); /* first */
  LS_FORWARD_IF_ERROR(ls_snapshot_add_series_table(snap, v->series)); /* (rows: a segment) */
  LS_FORWARD_IF_ERROR(room_for_partitions(s));
  /* Each partition's next unread record: what is older is in flight, in the snapshot. */
  LS_FORWARD_IF_ERROR(
      ls_ingest_inflight_parts(v->ing, v->P, v->parts, s->offsets, s->marks, keep_inflight, snap));
  for (s->n = 0; s->n < v->P; s->n++) {
    LS_FORWARD_IF_ERROR(ls_snapshot_add_partition(snap, v->parts[s->n], s->offsets[s->n]));
    s->parts[s->n] = v->parts[s->n];
  }
  LS_FORWARD_IF_ERROR(train_marks_put(snap, s->n, s->parts, s->marks, v->topic_parts));
  if (v->rep != NULL) LS_FORWARD_IF_ERROR(replay_save(v->rep, snap));
  if (v->pred != NULL) LS_FORWARD_IF_ERROR(predict_save(v->pred, snap, &s->pred_mark));
  int busy = 0;
  LS_FORWARD_IF_ERROR(ls_snapshotter_submit(s->snapper, &busy));
  LS_RETURN_IF(busy, LS_ERR_STATE, "snapshot writer busy although every rank reported it idle");
  s->pending = steps;
  s->commit_asked = 0;
  s->last_t = base_now_s();
  return LS_OK;
}

/* The pending snapshot committed: its offsets go to the consumer group
 * (informational, asynchronous: a broker down never holds up a step or the
 * exit; a failure is reported, not fatal). */
static void committed(train_snaps_t *s, ls_step_stats_t *st) {
  if (s->v->ing != NULL && s->n > 0 &&
      ls_ingest_commit_async(s->v->ing, s->n, s->parts, s->offsets) != LS_OK) {
    snprintf(s->error, sizeof s->error,
             "snapshot of step %" PRId64
             " committed, but not its offsets to the consumer group: %s",
             s->pending, ls_last_error());
    st->snapshot_error = s->error;
  }
  st->snapshot_committed = s->pending;
  s->committed++;
  s->durable_step = s->pending;
  s->durable_t = base_now_s();
  s->pending = -1;
}

/* A failed write or commit, on any rank, drops that snapshot everywhere;
 * training goes on and the next one is taken when due. The reason named:
 * this rank's writer's, or its forecasts' (their transaction failed for
 * good, as when a newer trainer fenced this one), else another rank's. */
static ls_err_t dropped(train_snaps_t *s, ls_step_stats_t *st) {
  ls_snapshotter_status_t status;
  LS_FORWARD_IF_ERROR(ls_snapshotter_poll(s->snapper, &status));
  snprintf(s->error, sizeof s->error, "snapshot of step %" PRId64 " failed%s%s", s->pending,
           s->refused            ? ": the model holds a non-finite parameter (not written)"
           : status.err != LS_OK ? ": "
           : s->pred_error[0]    ? ": the forecasts made before it cannot be committed: "
                                 : " on another rank",
           s->refused            ? ""
           : status.err != LS_OK ? status.message
                                 : s->pred_error);
  st->snapshot_error = s->error;
  s->pending = -1;
  s->refused = 0;
  s->pred_error[0] = '\0';
  return LS_OK;
}

ls_err_t train_snaps_after_step(train_snaps_t *s, const double *v, int64_t steps, int mid_update,
                                int stepped, ls_step_stats_t *st) {
  st->snapshot_committed = -1;
  st->durable_step = s->durable_step;
  if (s->snapper == NULL) return LS_OK;
  int const world = s->v->world;
  if (s->pending >= 0 && v[SNAP_V_FAILED] > 0) LS_FORWARD_IF_ERROR(dropped(s, st));
  if (s->pending >= 0) {
    int const asks = world > 1 || s->v->pred != NULL; /* else the writer commits at once */
    if (asks && s->v->rank == 0 && !s->commit_asked && v[SNAP_V_SHARDS] == (double)world) {
      int busy = 0;
      LS_FORWARD_IF_ERROR(ls_snapshotter_commit(s->snapper, s->pending, world, &busy));
      s->commit_asked = !busy;
    }
    if (v[SNAP_V_COMMITTED] - 1.0 >= (double)s->pending) committed(s, st);
  }
  st->durable_step = s->durable_step;
  st->durable_age_s = base_now_s() - s->durable_t;
  /* Busy: a writer still at work, or a snapshot pending (one that failed
   * now was dropped everywhere just above). */
  int const busy = v[SNAP_V_BUSY] > 0 || (v[SNAP_V_PENDING] > 0 && v[SNAP_V_FAILED] == 0);
  if (stepped && v[SNAP_V_DUE] > 0 && !mid_update) {
    if (busy) {
      st->snapshot_skipped = 1;
      s->skipped++;
    } else {
      LS_FORWARD_IF_ERROR(take(s, steps));
    }
  }
  return LS_OK;
}

/* How long the last snapshot waits for the forecasts made before it to be
 * committed to their topic (a broker outage), before it is given up. */
#define FINAL_FORECASTS_WAIT_S 10.0

/* The last snapshot waits for the forecasts made before it; 1 when they
 * have taken longer than FINAL_FORECASTS_WAIT_S since *since. */
static int final_wait(train_snaps_t *s, double *since) {
  if (s->pending < 0 || s->v->pred == NULL) return 0;
  int done = 0;
  if (predict_durable(s->v->pred, s->pred_mark, 100, &done) != LS_OK || done) return 0;
  if (*since < 0) *since = base_now_s();
  if (base_now_s() - *since < FINAL_FORECASTS_WAIT_S) return 0;
  snprintf(s->error, sizeof s->error,
           "snapshot of step %" PRId64 " not committed: the forecasts made before it were not "
           "committed to their topic within %.0f s (the broker unreachable?); a run resumed "
           "from the previous snapshot makes them again",
           s->pending, FINAL_FORECASTS_WAIT_S);
  return 1;
}

ls_err_t train_snaps_final(train_snaps_t *s, int64_t steps, int mid_update) {
  /* Nothing trained since the snapshot resumed from: it is the last one. */
  if (s->snapper == NULL || steps == 0 || steps == s->resumed_step) return LS_OK;
  /* Rounds of: wait for the writer, sum the ranks' figures, commit what is
   * written; until a snapshot of the final step has committed. */
  double since = -1.0;
  for (;;) {
    (void)ls_snapshotter_flush(s->snapper); /* a failure shows in the poll below */
    int const gave_up = final_wait(s, &since);
    double v[SNAP_V__N];
    train_snaps_contribute(s, steps, v);
    v[SNAP_V_DUE] = 0;
    v[SNAP_V_FAILED] += gave_up;
    LS_FORWARD_IF_ERROR(comm_sum_doubles(s->v->comm, v, SNAP_V__N));
    int const failed = v[SNAP_V_FAILED] > 0;
    LS_RETURN_IF(gave_up, LS_ERR_KAFKA, "the last snapshot: %s", s->error);
    ls_step_stats_t st;
    memset(&st, 0, sizeof st);
    LS_FORWARD_IF_ERROR(train_snaps_after_step(s, v, steps, mid_update, 0, &st));
    s->final_failed = failed;
    LS_RETURN_IF(failed, LS_ERR_IO, "the last snapshot: %s", st.snapshot_error);
    if (s->pending >= 0) continue;
    /* Nothing in flight: done if the final step is committed (or cannot be
     * taken, in the middle of an accumulation). */
    if (v[SNAP_V_COMMITTED] - 1.0 >= (double)steps || mid_update) return LS_OK;
    LS_FORWARD_IF_ERROR(take(s, steps));
  }
}
