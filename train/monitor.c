/*
 * Watching a run (train/monitor.h): the figures the step loop publishes,
 * what a scrape reads live, /health, the HTTP server's pages, and the
 * TensorBoard scalars.
 */
#include "monitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/clock.h"
#include "http.h"
#include "page.h"
#include "prep.h"
#include "snapshots.h"
#include "tensorboard.h"
#include "train_internal.h"

/* Each step's weight in the smoothed figures, relative to the next's. */
#define SMOOTH_DECAY 0.99
/* Seconds between flushes of the event file (also flushed at every
 * snapshot commit, so that what a resume keeps is on disk). */
#define TB_FLUSH_S 1.0
/* TensorBoard scalars of a step: the run's, then 3 per target feature. */
#define TB_RUN_SCALARS    7
#define TB_TARGET_SCALARS 3
/* ... and 3 per target and horizon shown (H > 1). */
#define TB_HORIZON_SCALARS 3
/* ... and 2 per quantile level, horizon shown and target (--quantiles). */
#define TB_QUANTILE_SCALARS 2
#define TB_TAG_MAX          192

struct monitor_s {
  monitor_conf_t conf;
  char *http_spec, *tb_dir; /* conf's strings, owned */
  ls_trainer_t *tr;
  const train_view_t *view;
  train_snaps_t *snaps;
  ls_ingest_t *ing; /* NULL on a rank without partitions */
  int P;
  int O;    /* target features */
  int n_hz; /* targets x horizons shown (H > 1), else 0 */
  int n_qz; /* levels x horizons shown x targets (--quantiles), else 0 */

  /* The trainer's thread. */
  monitor_sample_t mine;
  double loss_w, base_w, count_w, wait_w, busy_w; /* decayed sums */
  double published_at;
  monitor_target_t *tg_mine;  /* [O] the per-target figures of mine */
  double *tg_w;               /* [O, 3] decayed sums: forecast, last value, count */
  int *hz_k;                  /* [n_hz] each one's place in a step's horizon figures */
  monitor_horizon_t *hz_mine; /* [n_hz] */
  double *hz_w; /* [n_hz, 4] decayed sums: forecast, last value, seasonal naive, count */
  int *qz_k;    /* [n_qz] each one's place in a step's quantile figures */
  monitor_quantile_t *qz_mine; /* [n_qz] */
  double *qz_w;                /* [n_qz, 3] decayed sums: count, below, pinball */
  tb_writer_t *tb;
  double tb_flushed, tb_last_t;
  int64_t tb_records;              /* since the last TensorBoard record */
  ls_ingest_partition_t *tb_parts; /* [P] */
  char (*tb_tags)[TB_TAG_MAX];     /* [O TB_TARGET_SCALARS + n_hz TB_HORIZON_SCALARS + n_qz
                                      TB_QUANTILE_SCALARS] the targets' tags, the horizons',
                                      the quantiles' */
  const char **tags;               /* [TB_RUN_SCALARS + those] a record's */
  float *values;                   /* [TB_RUN_SCALARS + those] */

  /* Shared: the published sample, under lock. */
  pthread_mutex_t lock;
  monitor_sample_t pub;
  monitor_target_t *tg_pub;   /* [O] pub.targets */
  monitor_horizon_t *hz_pub;  /* [n_hz] pub.horizons */
  monitor_quantile_t *qz_pub; /* [n_qz] pub.quantiles */

  /* The HTTP thread. */
  http_server_t *http;
  page_t *page;                     /* the live page's history and forecasts (with http) */
  ls_ingest_partition_t *raw_parts; /* [P] */
  monitor_part_t *parts;            /* [P] */
  monitor_target_t *tg_http;        /* [O] */
  monitor_horizon_t *hz_http;       /* [n_hz] */
  monitor_quantile_t *qz_http;      /* [n_qz] */
};

void monitor_conf_init(monitor_conf_t *conf) {
  if (conf == NULL) return;
  *conf =
      (monitor_conf_t){.tensorboard_every = 1, .health_stall_s = 60.0, .health_snapshot_s = 1800.0};
}

static double mse(double sum, double count) {
  return count > 0 ? sum / count : NAN;
}
static double ratio(double a, double b) {
  return b > 0 ? a / b : NAN;
}

/* ------------------------------------------------------------------------ */
/* The trainer's thread                                                      */

/* Bytes of the regular files of a committed snapshot's directory. */
static double snapshot_bytes(const char *dir, int64_t step) {
  char path[4096];
  if (ls_snapshot_path(dir, step, path, sizeof path) != LS_OK) return NAN;
  DIR *const d = opendir(path);
  if (d == NULL) return NAN;
  double bytes = 0;
  for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
      bytes += (double)st.st_size;
  }
  closedir(d);
  return bytes;
}

/* A step's per-target figures (data units) into the monitor's own. */
static void account_targets(monitor_t *m, const ls_step_stats_t *st) {
  for (int j = 0; j < st->targets && j < m->O; j++) {
    const ls_target_figures_t *const t = &st->target[j];
    monitor_target_t *const g = &m->tg_mine[j];
    double *const w = m->tg_w + 3 * (size_t)j;
    g->feature = t->feature;
    g->loss = mse(t->mse_sum, t->count);
    g->baseline = mse(t->base_sum, t->count);
    g->ratio = ratio(t->mse_sum, t->base_sum);
    w[0] = SMOOTH_DECAY * w[0] + t->mse_sum;
    w[1] = SMOOTH_DECAY * w[1] + t->base_sum;
    w[2] = SMOOTH_DECAY * w[2] + t->count;
    g->loss_smooth = mse(w[0], w[2]);
    g->baseline_smooth = mse(w[1], w[2]);
    g->ratio_smooth = ratio(w[0], w[1]);
  }
}

/* w [n] = SMOOTH_DECAY w + add: decayed sums, a step's added. */
static void decay_add(double *w, const double *add, int n) {
  for (int k = 0; k < n; k++)
    w[k] = SMOOTH_DECAY * w[k] + add[k];
}

/* A step's per-horizon figures (data units) into the monitor's own:
 * smoothed, a step holding few forecasts of a horizon. */
static void account_horizons(monitor_t *m, const ls_step_stats_t *st) {
  if (st->horizon == NULL) return;
  for (int i = 0; i < m->n_hz; i++) {
    const ls_horizon_figures_t *const t = &st->horizon[m->hz_k[i]];
    monitor_horizon_t *const g = &m->hz_mine[i];
    double *const w = m->hz_w + 4 * (size_t)i;
    double const add[4] = {t->mse_sum, t->last_sum, t->snaive_sum, t->count};
    decay_add(w, add, 4);
    g->loss = mse(w[0], w[3]);
    g->ratio_last = ratio(w[0], w[1]);
    g->ratio_snaive = ratio(w[0], w[2]);
  }
}

/* A step's quantile figures into the monitor's own: smoothed as the
 * horizons'. */
static void account_quantiles(monitor_t *m, const ls_step_stats_t *st) {
  if (st->quantile == NULL) return;
  for (int i = 0; i < m->n_qz; i++) {
    const ls_quantile_figures_t *const t = &st->quantile[m->qz_k[i]];
    monitor_quantile_t *const g = &m->qz_mine[i];
    double *const w = m->qz_w + 3 * (size_t)i;
    double const add[3] = {t->count, t->below, t->pinball_sum};
    decay_add(w, add, 3);
    g->coverage = w[0] > 0 ? w[1] / w[0] : NAN;
    g->pinball = mse(w[2], w[0]);
  }
}

/* A step's snapshot events into the monitor's own sample. */
static void account_snapshot(monitor_t *m, const ls_step_stats_t *st, double now) {
  monitor_sample_t *const s = &m->mine;
  s->snapshots_skipped += st->snapshot_skipped;
  if (st->snapshot_committed < 0 && st->snapshot_error != NULL) { /* (a commit may warn too) */
    s->snapshots_failed_in_row++;
    snprintf(s->snapshot_error, sizeof s->snapshot_error, "%s", st->snapshot_error);
  }
  if (st->snapshot_committed >= 0) {
    s->snapshots_failed_in_row = 0;
    s->snapshots++;
    s->snapshot_step = (double)st->snapshot_committed;
    s->snapshot_at_s = now;
    s->snapshot_bytes = snapshot_bytes(m->view->conf->snapshot_dir, st->snapshot_committed);
  }
}

/* A step's figures into the monitor's own sample (a round without windows
 * brings only its snapshot events; a loss that is not finite is shown as
 * such, and left out of the smoothed figures). */
static void account(monitor_t *m, const ls_step_stats_t *st, double now) {
  monitor_sample_t *const s = &m->mine;
  account_snapshot(m, st, now);
  if (st->windows == 0) return;
  s->steps = st->step;
  s->windows += st->windows;
  s->records += st->records;
  s->compute_s += st->compute_s;
  s->wait_s += st->wait_s;
  s->nonfinite_steps += st->nonfinite;
  s->loss = mse(st->loss_sum, st->count);
  s->baseline = mse(st->baseline_sum, st->count);
  s->ratio = ratio(st->loss_sum, st->baseline_sum);
  s->lag_s = st->lag_ms / 1e3;
  if (isfinite(st->loss_sum)) {
    m->loss_w = SMOOTH_DECAY * m->loss_w + st->loss_sum;
    m->base_w = SMOOTH_DECAY * m->base_w + st->baseline_sum;
    m->count_w = SMOOTH_DECAY * m->count_w + st->count;
  }
  m->wait_w = SMOOTH_DECAY * m->wait_w + st->wait_s;
  m->busy_w = SMOOTH_DECAY * m->busy_w + st->wait_s + st->compute_s;
  s->loss_smooth = mse(m->loss_w, m->count_w);
  s->baseline_smooth = mse(m->base_w, m->count_w);
  s->ratio_smooth = ratio(m->loss_w, m->base_w);
  account_targets(m, st);
  account_horizons(m, st);
  account_quantiles(m, st);
  s->wait_share = ratio(m->wait_w, m->busy_w);
  if (st->updated) {
    s->updates++;
    s->grad_norm = st->grad_norm;
    s->lr = st->lr;
  }
  s->step_at_s = now;
}

/* Copies the monitor's sample, with what only the trainer's thread may
 * read (series, snapshot writer), to the published one. */
static void publish(monitor_t *m, double now) {
  monitor_sample_t *const s = &m->mine;
  ls_snapshotter_status_t status;
  int on = 0;
  train_snaps_status(m->snaps, &status, &on);
  s->snapshot_failures = status.failures;
  if (on && (status.written_step >= 0 || status.failures > 0)) s->snapshot_seconds = status.seconds;
  const train_view_t *const v = m->view;
  s->series = (int64_t)ls_series_table_count(v->series);
  s->states_evicted = *v->evicted_states;
  s->state_bytes = (double)ls_state_table_slots(ls_series_table_states(v->series)) * 2.0 *
                   v->shape.num_layers * v->shape.hidden_size * sizeof(float);
  pthread_mutex_lock(&m->lock);
  m->pub = *s;
  memcpy(m->tg_pub, m->tg_mine, (size_t)m->O * sizeof *m->tg_pub);
  m->pub.targets = m->tg_pub;
  if (m->n_hz > 0) memcpy(m->hz_pub, m->hz_mine, (size_t)m->n_hz * sizeof *m->hz_pub);
  m->pub.horizons = m->hz_pub;
  if (m->n_qz > 0) memcpy(m->qz_pub, m->qz_mine, (size_t)m->n_qz * sizeof *m->qz_pub);
  m->pub.quantiles = m->qz_pub;
  pthread_mutex_unlock(&m->lock);
  m->published_at = now;
}

/* The consumer lag of the rank's partitions, in all. */
static double total_lag(monitor_t *m) {
  int count = 0;
  if (m->ing == NULL || ls_ingest_partitions(m->ing, m->tb_parts, m->P, &count) != LS_OK)
    return NAN;
  double lag = 0;
  for (int i = 0; i < count && i < m->P; i++)
    if (m->tb_parts[i].lag >= 0) lag += (double)m->tb_parts[i].lag;
  return lag;
}

/* The scalars of a step's TensorBoard record into m->tags, m->values: the
 * run's, then per target its forecasts' MSE, the last value's and their
 * ratio in the data's units; returns how many (NaN and, without an update,
 * the optimizer's are left out). */
static int tb_scalars(monitor_t *m, const ls_step_stats_t *st, double now) {
  const monitor_sample_t *const s = &m->mine;
  double const dt = now - m->tb_last_t;
  struct {
    const char *tag;
    double v;
    int shown;
  } const all[TB_RUN_SCALARS] = {
      {"loss/model", s->loss, 1},
      {"loss/baseline", s->baseline, 1},
      {"loss/ratio", s->ratio, 1},
      {"throughput/records_per_second", dt > 0 ? (double)m->tb_records / dt : NAN, 1},
      {"ingest/consumer_lag_records", total_lag(m), 1},
      {"optimizer/learning_rate", st->lr, st->updated},
      {"optimizer/gradient_norm", st->grad_norm, st->updated},
  };
  int n = 0;
  for (int i = 0; i < TB_RUN_SCALARS; i++)
    if (all[i].shown && isfinite(all[i].v))
      m->tags[n] = all[i].tag, m->values[n++] = (float)all[i].v;
  for (int j = 0; j < m->O; j++) {
    const monitor_target_t *const g = &m->tg_mine[j];
    double const v[TB_TARGET_SCALARS] = {g->loss, g->baseline, g->ratio};
    for (int k = 0; k < TB_TARGET_SCALARS; k++)
      if (isfinite(v[k]))
        m->tags[n] = m->tb_tags[j * TB_TARGET_SCALARS + k], m->values[n++] = (float)v[k];
  }
  char(*const hz_tags)[TB_TAG_MAX] = m->tb_tags + (size_t)m->O * TB_TARGET_SCALARS;
  for (int i = 0; i < m->n_hz; i++) {
    const monitor_horizon_t *const g = &m->hz_mine[i];
    double const v[TB_HORIZON_SCALARS] = {g->loss, g->ratio_last, g->ratio_snaive};
    for (int k = 0; k < TB_HORIZON_SCALARS; k++)
      if (isfinite(v[k]))
        m->tags[n] = hz_tags[i * TB_HORIZON_SCALARS + k], m->values[n++] = (float)v[k];
  }
  char(*const qz_tags)[TB_TAG_MAX] = hz_tags + (size_t)m->n_hz * TB_HORIZON_SCALARS;
  for (int i = 0; i < m->n_qz; i++) {
    const monitor_quantile_t *const g = &m->qz_mine[i];
    double const v[TB_QUANTILE_SCALARS] = {g->coverage, g->pinball};
    for (int k = 0; k < TB_QUANTILE_SCALARS; k++)
      if (isfinite(v[k]))
        m->tags[n] = qz_tags[i * TB_QUANTILE_SCALARS + k], m->values[n++] = (float)v[k];
  }
  return n;
}

/* The step's TensorBoard record (every tensorboard_every steps). */
static ls_err_t tb_step(monitor_t *m, const ls_step_stats_t *st, double now) {
  m->tb_records += st->records;
  if (st->step % m->conf.tensorboard_every == 0) {
    int const n = tb_scalars(m, st, now);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    LS_FORWARD_IF_ERROR(tb_writer_scalars(m->tb, st->step, (double)ts.tv_sec + ts.tv_nsec / 1e9,
                                          m->tags, m->values, n));
    m->tb_records = 0;
    m->tb_last_t = now;
  }
  if (now - m->tb_flushed >= TB_FLUSH_S || st->snapshot_committed >= 0) {
    m->tb_flushed = now;
    LS_FORWARD_IF_ERROR(tb_writer_flush(m->tb));
  }
  return LS_OK;
}

ls_err_t monitor_step(monitor_t *m, const ls_step_stats_t *st) {
  LS_RETURN_IF(m == NULL || st == NULL, LS_ERR_INVALID_ARG, "monitor_step: m or st is NULL");
  double const now = base_now_s();
  account(m, st, now);
  if (m->page != NULL && st->windows > 0)
    page_step(m->page, &m->mine, (double)base_wall_ms() / 1e3);
  ls_err_t const err = m->tb != NULL && st->windows > 0 ? tb_step(m, st, now) : LS_OK;
  /* A snapshot's outcome is shown at once (/health may turn on it). */
  if (now - m->published_at >= MONITOR_PUBLISH_S || st->snapshot_committed >= 0 ||
      st->snapshot_error != NULL)
    publish(m, now);
  return err;
}

/* ------------------------------------------------------------------------ */
/* The HTTP thread                                                           */

/* The published sample with what is read live: the consumer, the
 * heartbeat, ages. */
static void live_sample(monitor_t *m, monitor_sample_t *s) {
  pthread_mutex_lock(&m->lock);
  *s = m->pub;
  memcpy(m->tg_http, m->tg_pub, (size_t)m->O * sizeof *m->tg_http);
  if (m->n_hz > 0) memcpy(m->hz_http, m->hz_pub, (size_t)m->n_hz * sizeof *m->hz_http);
  if (m->n_qz > 0) memcpy(m->qz_http, m->qz_pub, (size_t)m->n_qz * sizeof *m->qz_http);
  pthread_mutex_unlock(&m->lock);
  s->targets = m->tg_http;
  s->horizons = m->hz_http;
  s->quantiles = m->qz_http;
  double const now = base_now_s();
  s->heartbeat_age_s = (double)(base_now_ms() - train_heartbeat_ms(m->tr)) / 1e3;
  s->step_age_s = now - s->step_at_s; /* NaN before a step */
  s->snapshot_age_s = s->snapshots_on ? now - s->snapshot_at_s : NAN;
  s->connected = NAN;
  int count = 0;
  if (m->ing != NULL && ls_ingest_stats(m->ing, &s->ingest) == LS_OK &&
      ls_ingest_partitions(m->ing, m->raw_parts, m->P, &count) == LS_OK) {
    s->has_ingest = 1;
    if (s->ingest.connected >= 0) s->connected = s->ingest.connected;
    for (int i = 0; i < count && i < m->P; i++) {
      const ls_ingest_partition_t *const r = &m->raw_parts[i];
      m->parts[i] = (monitor_part_t){r->partition, r->next_offset,    r->high_watermark,
                                     r->lag,       r->queued_windows, r->paused};
    }
    s->n_parts = count < m->P ? count : m->P;
    s->parts = m->parts;
  }
}

/* Why the run is unhealthy, as JSON strings into why; returns how many
 * reasons there are. */
static int health_reasons(const monitor_t *m, const monitor_sample_t *s, monitor_text_t *why) {
  int n = 0;
  if (s->heartbeat_age_s > m->conf.health_stall_s) {
    monitor_text_add(why, "%s\"the step loop has not turned for %.1f s (bound %.0f s)\"",
                     n++ ? "," : "", s->heartbeat_age_s, m->conf.health_stall_s);
  }
  if (s->has_ingest && s->connected == 0) {
    char text[sizeof s->ingest.watch_error + 64];
    snprintf(text, sizeof text, "the consumer has not reached the cluster for %.1f s: %s",
             (double)s->ingest.disconnected_ms / 1e3, s->ingest.watch_error);
    monitor_text_add(why, "%s", n++ ? "," : "");
    monitor_text_json(why, text);
  }
  if (s->snapshots_on && s->snapshot_age_s > m->conf.health_snapshot_s) {
    monitor_text_add(why, "%s\"the newest snapshot is %.0f s old (bound %.0f s)\"", n++ ? "," : "",
                     s->snapshot_age_s, m->conf.health_snapshot_s);
  }
  int const in_row = m->view->conf->health_snapshot_failures;
  if (s->snapshots_on && s->snapshots_failed_in_row >= in_row) {
    char text[320];
    snprintf(text, sizeof text, "the last %lld snapshots failed (bound %d in a row), the last: %s",
             (long long)s->snapshots_failed_in_row, in_row, s->snapshot_error);
    monitor_text_add(why, "%s", n++ ? "," : "");
    monitor_text_json(why, text);
  }
  return n;
}

static void health_text(const monitor_t *m, const monitor_sample_t *s, monitor_text_t *out,
                        int *status) {
  monitor_text_t why = {0};
  int const bad = health_reasons(m, s, &why);
  *status = bad ? 503 : 200;
  monitor_text_add(out, "{\"status\":\"%s\",\"rank\":%lld,\"step\":%lld,", bad ? "unhealthy" : "ok",
                   (long long)s->rank, (long long)s->steps);
  monitor_text_add(out, "\"heartbeat_age_seconds\":%.3f,\"consumer_connected\":%s,",
                   s->heartbeat_age_s,
                   isnan(s->connected) ? "null"
                   : s->connected > 0  ? "true"
                                       : "false");
  if (isnan(s->snapshot_age_s))
    monitor_text_add(out, "\"snapshot_age_seconds\":null,");
  else
    monitor_text_add(out, "\"snapshot_age_seconds\":%.3f,", s->snapshot_age_s);
  monitor_text_add(out, "\"snapshots_failed_in_row\":%lld,", (long long)s->snapshots_failed_in_row);
  monitor_text_add(out, "\"reasons\":[%s]}\n", why.text != NULL ? why.text : "");
  if (why.nomem) out->nomem = 1;
  free(why.text);
}

static void render(void *opaque, const http_request_t *req, http_reply_t *out) {
  monitor_t *const m = opaque;
  monitor_sample_t s;
  live_sample(m, &s);
  monitor_text_t text = {0}, discard = {0};
  int status = 200;
  s.healthy = health_reasons(m, &s, &discard) == 0;
  free(discard.text);
  if (req->page == HTTP_OTHER) {
    (void)page_render(m->page, req, &s, out); /* status 0 where it is not the page's */
    return;
  }
  if (req->page == HTTP_METRICS) {
    monitor_metrics_text(&s, &text);
    out->type = "text/plain; version=0.0.4; charset=utf-8";
  } else {
    health_text(m, &s, &text, &status);
    out->type = "application/json";
  }
  if (text.nomem || text.text == NULL) {
    free(text.text);
    return; /* the server answers 500 */
  }
  out->status = status;
  out->body = text.text;
  out->len = text.len;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

/* The monitor's starting figures: nothing known yet. */
static void sample_init(monitor_t *m, int rank, int world) {
  monitor_sample_t *const s = &m->mine;
  memset(s, 0, sizeof *s);
  s->rank = rank, s->world = world;
  s->loss = s->baseline = s->ratio = NAN;
  s->loss_smooth = s->baseline_smooth = s->ratio_smooth = s->wait_share = NAN;
  s->grad_norm = s->lr = s->step_at_s = s->lag_s = NAN;
  s->snapshot_step = s->snapshot_seconds = s->snapshot_bytes = NAN;
  s->snapshots_on = m->view->conf->snapshot_dir[0] != '\0';
  s->snapshot_at_s = base_now_s(); /* the start stands for the newest snapshot until one */
  s->n_targets = m->O;
  s->targets = m->tg_mine;
  s->n_horizons = m->n_hz;
  s->horizons = m->hz_mine;
  s->n_quantiles = m->n_qz;
  s->quantiles = m->qz_mine;
  ls_train_summary_t sum;
  memset(&sum, 0, sizeof sum);
  train_snaps_totals(m->snaps, &sum);
  s->steps = sum.resumed_step > 0 ? sum.resumed_step : 0;
}

/* The quantiles' figures, nothing known yet, per level, horizon shown and
 * target (the step's layout: level-major, then h-major), and their
 * TensorBoard tags. */
static ls_err_t quantiles_init(monitor_t *m) {
  const ls_train_conf_t *const c = m->view->conf;
  double levels[PREP_QUANTILES_MAX];
  int Q = 0;
  LS_FORWARD_IF_ERROR(prep_parse_quantiles(c->quantiles, levels, &Q));
  static const char *const names[TB_QUANTILE_SCALARS] = {"coverage", "pinball"};
  char(*const qz_tags)[TB_TAG_MAX] =
      m->tb_tags + (size_t)m->O * TB_TARGET_SCALARS + (size_t)m->n_hz * TB_HORIZON_SCALARS;
  int const H = c->horizon > 1 ? c->horizon : 1;
  for (int q = 0, i = 0; q < Q && i < m->n_qz; q++)
    for (int h = 1; h <= H; h++)
      for (int j = 0; j < m->O && ls_horizon_shown(h, H); j++, i++) {
        monitor_quantile_t *const g = &m->qz_mine[i];
        *g = (monitor_quantile_t){h, m->tg_mine[j].feature, "", "", NAN, NAN};
        memcpy(g->name, m->tg_mine[j].name, sizeof g->name);
        snprintf(g->level, sizeof g->level, "%g", levels[q]);
        m->qz_k[i] = (q * H + h - 1) * m->O + j;
        for (int k = 0; k < TB_QUANTILE_SCALARS; k++)
          snprintf(qz_tags[i * TB_QUANTILE_SCALARS + k], TB_TAG_MAX, "quantile_%s_%d_%s/%s",
                   g->level, h, g->name, names[k]);
      }
  return LS_OK;
}

/* The per-target figures, nothing known yet, of the target features (the
 * configuration's targets key), and their TensorBoard tags. */
static ls_err_t targets_init(monitor_t *m) {
  const ls_train_conf_t *const c = m->view->conf;
  int *const feat = calloc((size_t)c->features, sizeof *feat);
  LS_RETURN_IF(feat == NULL, LS_ERR_NOMEM, "no memory for %d features", c->features);
  int O = 0;
  ls_err_t const err = train_conf_targets(c, feat, &O);
  static const char *const names[TB_TARGET_SCALARS] = {"loss", "baseline", "ratio"};
  for (int j = 0; j < m->O && err == LS_OK; j++) {
    m->tg_mine[j] = (monitor_target_t){feat[j], "", NAN, NAN, NAN, NAN, NAN, NAN};
    train_conf_feature_name(c, feat[j], m->tg_mine[j].name, sizeof m->tg_mine[j].name);
    for (int k = 0; k < TB_TARGET_SCALARS; k++)
      snprintf(m->tb_tags[j * TB_TARGET_SCALARS + k], TB_TAG_MAX, "target_%s/%s",
               m->tg_mine[j].name, names[k]);
  }
  free(feat);
  static const char *const hz_names[TB_HORIZON_SCALARS] = {"loss", "ratio_last", "ratio_snaive"};
  char(*const hz_tags)[TB_TAG_MAX] = m->tb_tags + (size_t)m->O * TB_TARGET_SCALARS;
  int const H = c->horizon;
  for (int h = 1, i = 0; err == LS_OK && H > 1 && h <= H; h++)
    for (int j = 0; j < m->O && ls_horizon_shown(h, H); j++, i++) {
      monitor_horizon_t *const g = &m->hz_mine[i];
      *g = (monitor_horizon_t){h, m->tg_mine[j].feature, "", NAN, NAN, NAN};
      memcpy(g->name, m->tg_mine[j].name, sizeof g->name);
      m->hz_k[i] = (h - 1) * m->O + j; /* h-major, as the step's figures */
      for (int k = 0; k < TB_HORIZON_SCALARS; k++)
        snprintf(hz_tags[i * TB_HORIZON_SCALARS + k], TB_TAG_MAX, "horizon_%d_%s/%s", h, g->name,
                 hz_names[k]);
    }
  return err == LS_OK ? quantiles_init(m) : err;
}

/* Levels x horizons shown x targets (--quantiles), else 0. */
static int quantiles_shown(const ls_train_conf_t *c, int O) {
  double levels[PREP_QUANTILES_MAX];
  int Q = 0, H = c->horizon > 1 ? c->horizon : 1, n = 0;
  if (prep_parse_quantiles(c->quantiles, levels, &Q) != LS_OK) return 0;
  for (int h = 1; h <= H; h++)
    n += ls_horizon_shown(h, H) ? O : 0;
  return Q * n;
}

/* Targets x horizons shown (H > 1), else 0. */
static int horizons_shown(int O, int H) {
  int n = 0;
  for (int h = 1; H > 1 && h <= H; h++)
    n += ls_horizon_shown(h, H) ? O : 0;
  return n;
}

/* The copies of conf's strings and the buffers of P partitions and O
 * targets. */
static ls_err_t monitor_alloc(monitor_t *m, const monitor_conf_t *conf) {
  m->conf = *conf;
  if (conf->http != NULL) m->http_spec = strdup(conf->http);
  if (conf->tensorboard != NULL) m->tb_dir = strdup(conf->tensorboard);
  m->conf.http = m->http_spec;
  m->conf.tensorboard = m->tb_dir;
  size_t const P = m->P > 0 ? (size_t)m->P : 1;
  m->tb_parts = calloc(P, sizeof *m->tb_parts);
  m->raw_parts = calloc(P, sizeof *m->raw_parts);
  m->parts = calloc(P, sizeof *m->parts);
  m->n_hz = horizons_shown(m->O, m->view->conf->horizon);
  m->n_qz = quantiles_shown(m->view->conf, m->O);
  size_t const O = m->O > 0 ? (size_t)m->O : 1, Z = m->n_hz > 0 ? (size_t)m->n_hz : 1,
               U = m->n_qz > 0 ? (size_t)m->n_qz : 1;
  size_t const tags = O * TB_TARGET_SCALARS + Z * TB_HORIZON_SCALARS + U * TB_QUANTILE_SCALARS,
               scalars = TB_RUN_SCALARS + tags;
  m->qz_k = calloc(U, sizeof *m->qz_k), m->qz_w = calloc(3 * U, sizeof *m->qz_w);
  m->qz_mine = calloc(U, sizeof *m->qz_mine), m->qz_pub = calloc(U, sizeof *m->qz_pub);
  m->qz_http = calloc(U, sizeof *m->qz_http);
  m->hz_k = calloc(Z, sizeof *m->hz_k);
  m->hz_mine = calloc(Z, sizeof *m->hz_mine), m->hz_pub = calloc(Z, sizeof *m->hz_pub);
  m->hz_http = calloc(Z, sizeof *m->hz_http), m->hz_w = calloc(4 * Z, sizeof *m->hz_w);
  m->tg_mine = calloc(O, sizeof *m->tg_mine);
  m->tg_pub = calloc(O, sizeof *m->tg_pub);
  m->tg_http = calloc(O, sizeof *m->tg_http);
  m->tg_w = calloc(3 * O, sizeof *m->tg_w);
  m->tb_tags = calloc(tags, sizeof *m->tb_tags);
  m->tags = calloc(scalars, sizeof *m->tags);
  m->values = calloc(scalars, sizeof *m->values);
  LS_RETURN_IF((conf->http != NULL && m->http_spec == NULL) ||
                   (conf->tensorboard != NULL && m->tb_dir == NULL) || m->tb_parts == NULL ||
                   m->raw_parts == NULL || m->parts == NULL || !m->tg_mine || !m->tg_pub ||
                   !m->tg_http || !m->tg_w || !m->tb_tags || !m->tags || !m->values || !m->hz_k ||
                   !m->hz_mine || !m->hz_pub || !m->hz_http || !m->hz_w || !m->qz_k || !m->qz_w ||
                   !m->qz_mine || !m->qz_pub || !m->qz_http,
               LS_ERR_NOMEM, "no memory for the monitor");
  return targets_init(m);
}

/* The live page, fed the trainer's forecasts. */
static ls_err_t page_open(monitor_t *m) {
  int *const feat = calloc((size_t)(m->O > 0 ? m->O : 1), sizeof *feat);
  LS_RETURN_IF(feat == NULL, LS_ERR_NOMEM, "no memory for %d targets", m->O);
  for (int j = 0; j < m->O; j++)
    feat[j] = (int)m->tg_mine[j].feature;
  ls_err_t const err = page_new(m->O, feat, &m->page);
  free(feat);
  if (err == LS_OK) train_watch_forecasts(m->tr, page_forecasts, m->page);
  return err;
}

ls_err_t monitor_new(const monitor_conf_t *conf, ls_trainer_t *tr, monitor_t **out) {
  LS_RETURN_IF(conf == NULL || tr == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "monitor_new: conf, tr and out must not be NULL");
  LS_RETURN_IF(
      conf->tensorboard_every < 1 || !(conf->health_stall_s > 0) || !(conf->health_snapshot_s > 0),
      LS_ERR_INVALID_ARG, "monitor_new: tensorboard_every must be >= 1 and the health bounds > 0");
  *out = NULL;
  monitor_t *const m = calloc(1, sizeof *m);
  LS_RETURN_IF(m == NULL, LS_ERR_NOMEM, "no memory for the monitor");
  pthread_mutex_init(&m->lock, NULL);
  m->tr = tr;
  m->view = train_view_of(tr);
  m->snaps = train_snaps_of(tr);
  m->ing = m->view->ing;
  if (m->ing != NULL) (void)ls_ingest_partitions(m->ing, NULL, 0, &m->P);
  int per = 1; /* the head's outputs per target (horizons, quantiles) */
  (void)prep_outputs_per_target(m->view->conf, &per);
  m->O = m->view->shape.output_size / per;
  ls_err_t err = monitor_alloc(m, conf);
  if (err == LS_OK) {
    sample_init(m, m->view->rank, m->view->world);
    m->tb_flushed = m->tb_last_t = base_now_s();
    publish(m, base_now_s());
  }
  if (err == LS_OK && m->tb_dir != NULL && m->view->rank == 0)
    err = tb_writer_new(m->tb_dir, m->mine.steps + 1, &m->tb);
  if (err == LS_OK && m->http_spec != NULL) err = page_open(m);
  if (err == LS_OK && m->http_spec != NULL)
    err = http_server_new(m->http_spec, m->view->rank, render, m, &m->http);
  if (err != LS_OK) {
    monitor_destroy(m);
    return err;
  }
  *out = m;
  return LS_OK;
}

void monitor_destroy(monitor_t *m) {
  if (m == NULL) return;
  http_server_destroy(m->http); /* no page is rendered after this */
  if (m->page != NULL) train_watch_forecasts(m->tr, NULL, NULL);
  page_free(m->page);
  tb_writer_destroy(m->tb);
  pthread_mutex_destroy(&m->lock);
  free(m->http_spec), free(m->tb_dir);
  free(m->tb_parts), free(m->raw_parts), free(m->parts);
  free(m->tg_mine), free(m->tg_pub), free(m->tg_http), free(m->tg_w), free(m->tb_tags);
  free(m->tags), free(m->values);
  free(m->hz_k), free(m->hz_mine), free(m->hz_pub), free(m->hz_http), free(m->hz_w);
  free(m->qz_k), free(m->qz_mine), free(m->qz_pub), free(m->qz_http), free(m->qz_w);
  free(m);
}

const char *monitor_url(const monitor_t *m) {
  return m == NULL ? "" : http_server_url(m->http);
}
