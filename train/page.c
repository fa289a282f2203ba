/*
 * The live page of --http (train/page.h): its history, its rings of
 * recent forecasts per series, and its JSON.
 */
#include "page.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/keymap.h"

/* The rings are filled while someone looks: for this long after a request
 * of /api/series or /api/forecasts (ms). */
#define PAGE_WATCH_MS 60000
/* A direct-mapped cache from the consumer's series ids to rings. */
#define PAGE_CACHE 4096

/* Compiled in by the build (train/CMakeLists.txt: lstream_embed). */
extern const unsigned char ls_page_html[], ls_chart_js[];
extern const size_t ls_page_html_len, ls_chart_js_len;

/* A point of the curves. */
typedef struct point_s {
  int64_t step;
  double time, loss, baseline, ratio, lag_s, rps;
} point_t;

/* One series' recent forecasts: rows [PAGE_RING], the newest at (n - 1) %
 * PAGE_RING. */
typedef struct ring_s {
  char *key;
  size_t len;
  int64_t sid; /* the consumer's id of its series (ls_window_t.series), -1 */
  int64_t n;
  int64_t *time; /* [PAGE_RING] the actual's event time */
  double *fy;    /* [PAGE_RING, 2, O] forecast, then actual, per target */
} ring_t;

struct page_s {
  int O;
  int *feat; /* [O] */
  pthread_mutex_t lock;
  /* The history: PAGE_HISTORY points at most, one every `stride` steps. */
  point_t hist[PAGE_HISTORY];
  int n_hist, stride, since;
  int64_t last_records;
  double last_t;
  /* The rings, index i for the key of index i in keys. */
  base_keymap_t keys;
  ring_t *rings;                     /* [PAGE_SERIES] */
  size_t victim;                     /* the next to go when full */
  int32_t cache[PAGE_CACHE];         /* series id % PAGE_CACHE -> ring + 1 (0: none) */
  atomic_int_fast64_t watched_until; /* base_now_ms() until which the rings are filled */
};

ls_err_t page_new(int O, const int *feat, page_t **out) {
  LS_RETURN_IF(O < 1 || feat == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "page_new: %d targets, feat or out NULL", O);
  *out = NULL;
  page_t *const pg = calloc(1, sizeof *pg);
  LS_RETURN_IF(pg == NULL, LS_ERR_NOMEM, "no memory for the live page");
  pg->O = O, pg->stride = 1, pg->last_t = NAN;
  pg->feat = malloc((size_t)O * sizeof *pg->feat);
  pg->rings = calloc(PAGE_SERIES, sizeof *pg->rings);
  if (pg->feat == NULL || pg->rings == NULL) {
    page_free(pg);
    return ls_error_set(LS_ERR_NOMEM, "no memory for the live page");
  }
  memcpy(pg->feat, feat, (size_t)O * sizeof *feat);
  atomic_init(&pg->watched_until, 0);
  pthread_mutex_init(&pg->lock, NULL);
  *out = pg;
  return LS_OK;
}

void page_free(page_t *pg) {
  if (pg == NULL) return;
  for (size_t i = 0; pg->rings != NULL && i < PAGE_SERIES; i++)
    free(pg->rings[i].key), free(pg->rings[i].time), free(pg->rings[i].fy);
  if (pg->rings != NULL) pthread_mutex_destroy(&pg->lock);
  base_keymap_free(&pg->keys);
  free(pg->rings), free(pg->feat);
  free(pg);
}

/* ------------------------------------------------------------------------ */
/* The trainer's thread                                                      */

void page_step(page_t *pg, const monitor_sample_t *s, double now) {
  if (pg == NULL || ++pg->since < pg->stride) return;
  pg->since = 0;
  double const dt = now - pg->last_t;
  point_t const p = {s->steps,
                     now,
                     s->loss_smooth,
                     s->baseline_smooth,
                     s->ratio_smooth,
                     s->lag_s,
                     dt > 0 ? (double)(s->records - pg->last_records) / dt : NAN};
  pg->last_records = s->records, pg->last_t = now;
  pthread_mutex_lock(&pg->lock);
  if (pg->n_hist == PAGE_HISTORY) { /* the whole run in half the points */
    for (int i = 0; i < PAGE_HISTORY / 2; i++)
      pg->hist[i] = pg->hist[2 * i + 1];
    pg->n_hist = PAGE_HISTORY / 2;
    pg->stride *= 2;
  }
  pg->hist[pg->n_hist++] = p;
  pthread_mutex_unlock(&pg->lock);
}

/* The ring of window w's series (made, or taking the place of the one
 * longest in), or NULL without memory. */
static ring_t *ring_of(page_t *pg, const ls_window_t *w) {
  int32_t *const cached = &pg->cache[(uint64_t)w->series % PAGE_CACHE];
  if (*cached > 0 && pg->rings[*cached - 1].sid == w->series) return &pg->rings[*cached - 1];
  const char *const key = w->key;
  size_t const len = w->key_len;
  uint64_t const hash = base_key_hash(key, len);
  int64_t const i = base_keymap_find(&pg->keys, hash, key, len);
  if (i >= 0) {
    pg->rings[i].sid = w->series;
    *cached = (int32_t)i + 1;
    return &pg->rings[i];
  }
  ring_t fresh = {0};
  if (pg->keys.n == PAGE_SERIES) { /* its buffers go to the new series */
    size_t const v = pg->victim++ % PAGE_SERIES, last = PAGE_SERIES - 1;
    ring_t const gone = pg->rings[v];
    (void)base_keymap_remove(&pg->keys, base_key_hash(gone.key, gone.len), gone.key, gone.len);
    pg->rings[v] = pg->rings[last]; /* the map moved the last index into v */
    pg->rings[last] = (ring_t){0};
    fresh = gone;
    free(fresh.key);
  } else {
    fresh.time = malloc(PAGE_RING * sizeof *fresh.time);
    fresh.fy = malloc(PAGE_RING * 2 * (size_t)pg->O * sizeof *fresh.fy);
  }
  fresh.key = malloc(len + 1);
  if (fresh.key == NULL || fresh.time == NULL || fresh.fy == NULL ||
      base_keymap_add(&pg->keys, hash, fresh.key, len, "live page series") != LS_OK) {
    free(fresh.key), free(fresh.time), free(fresh.fy);
    return NULL;
  }
  memcpy(fresh.key, key, len);
  fresh.key[len] = '\0';
  fresh.len = len, fresh.n = 0, fresh.sid = w->series;
  pg->rings[pg->keys.n - 1] = fresh;
  *cached = (int32_t)pg->keys.n;
  return &pg->rings[pg->keys.n - 1];
}

void page_forecasts(void *page, const train_forecasts_t *fc) {
  page_t *const pg = page;
  if (base_now_ms() > atomic_load_explicit(&pg->watched_until, memory_order_relaxed)) return;
  size_t const O = (size_t)fc->O, n = (size_t)fc->n;
  pthread_mutex_lock(&pg->lock);
  for (size_t b = 0; b < n; b++) {
    ring_t *const r = ring_of(pg, fc->wins[b]);
    for (size_t t = 0; r != NULL && t < (size_t)fc->T; t++) {
      size_t const row = t * n + b, at = (size_t)(r->n++ % PAGE_RING);
      if (fc->mask[row] == 0.0f) {
        r->n--;
        continue;
      }
      r->time[at] = fc->time[row];
      for (size_t j = 0; j < O; j++) {
        size_t const o = row * O + j;
        r->fy[at * 2 * O + j] = fc->base[o] + fc->alpha[j] * fc->scale[o] * (double)fc->pred[o];
        r->fy[at * 2 * O + O + j] = (double)fc->next[o];
      }
    }
  }
  pthread_mutex_unlock(&pg->lock);
}

/* ------------------------------------------------------------------------ */
/* JSON (the HTTP thread)                                                    */

static void num(monitor_text_t *t, const char *sep, double v) {
  if (isfinite(v))
    monitor_text_add(t, "%s%.10g", sep, v);
  else
    monitor_text_add(t, "%snull", sep);
}

static void field(monitor_text_t *t, const char *name, double v) {
  monitor_text_add(t, ",\"%s\":", name);
  num(t, "", v);
}

static void status_json(page_t *pg, const monitor_sample_t *s, monitor_text_t *t) {
  pthread_mutex_lock(&pg->lock);
  double const rps = pg->n_hist ? pg->hist[pg->n_hist - 1].rps : NAN;
  size_t const shown = pg->keys.n;
  pthread_mutex_unlock(&pg->lock);
  monitor_text_add(t, "{\"rank\":%lld,\"world\":%lld", (long long)s->rank, (long long)s->world);
  field(t, "steps", (double)s->steps), field(t, "updates", (double)s->updates);
  field(t, "records", (double)s->records), field(t, "loss", s->loss);
  field(t, "baseline", s->baseline), field(t, "ratio", s->ratio);
  field(t, "loss_smoothed", s->loss_smooth), field(t, "ratio_smoothed", s->ratio_smooth);
  field(t, "lag_seconds", s->lag_s), field(t, "records_per_second", rps);
  field(t, "snapshot_step", s->snapshot_step), field(t, "snapshot_age_seconds", s->snapshot_age_s);
  field(t, "step_age_seconds", s->step_age_s), field(t, "series", (double)s->series);
  field(t, "series_shown", (double)shown);
  monitor_text_add(t, ",\"healthy\":%s,\"targets\":[", s->healthy > 0 ? "true" : "false");
  for (int j = 0; j < s->n_targets; j++) {
    monitor_text_add(t, "%s{\"feature\":%lld", j ? "," : "", (long long)s->targets[j].feature);
    field(t, "ratio", s->targets[j].ratio);
    field(t, "ratio_smoothed", s->targets[j].ratio_smooth);
    monitor_text_add(t, "}");
  }
  monitor_text_add(t, "]}\n");
}

static void history_json(page_t *pg, monitor_text_t *t) {
  point_t *const h = malloc(PAGE_HISTORY * sizeof *h);
  if (h == NULL) {
    t->nomem = 1;
    return;
  }
  pthread_mutex_lock(&pg->lock);
  int const n = pg->n_hist;
  memcpy(h, pg->hist, (size_t)n * sizeof *h);
  pthread_mutex_unlock(&pg->lock);
  static const char *const names[] = {
      "step", "time", "loss", "baseline", "ratio", "lag_seconds", "records_per_second"};
  for (int k = 0; k < 7; k++) {
    monitor_text_add(t, "%s\"%s\":[", k ? "]," : "{", names[k]);
    for (int i = 0; i < n; i++) {
      double const v[7] = {(double)h[i].step, h[i].time,  h[i].loss, h[i].baseline,
                           h[i].ratio,        h[i].lag_s, h[i].rps};
      num(t, i ? "," : "", v[k]);
    }
  }
  monitor_text_add(t, "]}\n");
  free(h);
}

static void series_json(page_t *pg, monitor_text_t *t) {
  monitor_text_add(t, "{\"series\":[");
  pthread_mutex_lock(&pg->lock); /* a few KB of keys: formatted under the lock */
  for (size_t i = 0; i < pg->keys.n; i++) {
    monitor_text_add(t, "%s", i ? "," : "");
    monitor_text_json(t, pg->rings[i].key);
  }
  pthread_mutex_unlock(&pg->lock);
  monitor_text_add(t, "]}\n");
}

/* One series' ring, oldest first; 0 when the series has none. */
static int forecasts_json(page_t *pg, const char *key, monitor_text_t *t) {
  size_t const O = (size_t)pg->O;
  int64_t *const time = malloc(PAGE_RING * sizeof *time);
  double *const fy = malloc(PAGE_RING * 2 * O * sizeof *fy);
  int64_t n = -1;
  pthread_mutex_lock(&pg->lock);
  int64_t const i =
      time && fy ? base_keymap_find(&pg->keys, base_key_hash(key, strlen(key)), key, strlen(key))
                 : -1;
  if (i >= 0) {
    const ring_t *const r = &pg->rings[i];
    n = r->n < PAGE_RING ? r->n : PAGE_RING;
    for (int64_t k = 0; k < n; k++) { /* oldest first */
      size_t const at = (size_t)((r->n - n + k) % PAGE_RING);
      time[k] = r->time[at];
      memcpy(fy + (size_t)k * 2 * O, r->fy + at * 2 * O, 2 * O * sizeof *fy);
    }
  }
  pthread_mutex_unlock(&pg->lock);
  if (n >= 0) {
    monitor_text_add(t, "{\"series\":");
    monitor_text_json(t, key);
    monitor_text_add(t, ",\"targets\":[");
    for (size_t j = 0; j < O; j++)
      monitor_text_add(t, "%s\"%d\"", j ? "," : "", pg->feat[j]);
    monitor_text_add(t, "],\"time\":[");
    for (int64_t k = 0; k < n; k++)
      monitor_text_add(t, "%s%lld", k ? "," : "", (long long)time[k]);
    for (int part = 0; part < 2; part++) {
      monitor_text_add(t, "],\"%s\":[", part ? "actual" : "forecast");
      for (size_t j = 0; j < O; j++) {
        monitor_text_add(t, "%s[", j ? "," : "");
        for (int64_t k = 0; k < n; k++)
          num(t, k ? "," : "", fy[(size_t)k * 2 * O + (size_t)part * O + j]);
        monitor_text_add(t, "]");
      }
    }
    monitor_text_add(t, "]}\n");
  }
  free(time), free(fy);
  return n >= 0;
}

int page_render(page_t *pg, const http_request_t *req, const monitor_sample_t *live,
                http_reply_t *out) {
  const char *const url = req->url;
  if (!strcmp(url, "/") || !strcmp(url, "/chart.js")) {
    int const js = url[1] != '\0';
    out->status = 200;
    out->type = js ? "application/javascript; charset=utf-8" : "text/html; charset=utf-8";
    out->body = (char *)(js ? ls_chart_js : ls_page_html);
    out->len = js ? ls_chart_js_len : ls_page_html_len;
    out->keep = 1;
    return 1;
  }
  monitor_text_t t = {0};
  int status = 200;
  if (!strncmp(url, "/api/series", 11) || !strncmp(url, "/api/forecasts", 14))
    atomic_store_explicit(&pg->watched_until, base_now_ms() + PAGE_WATCH_MS, memory_order_relaxed);
  if (!strcmp(url, "/api/status"))
    status_json(pg, live, &t);
  else if (!strcmp(url, "/api/history"))
    history_json(pg, &t);
  else if (!strcmp(url, "/api/series"))
    series_json(pg, &t);
  else if (!strcmp(url, "/api/forecasts") && req->series != NULL) {
    if (!forecasts_json(pg, req->series, &t)) {
      status = 404;
      monitor_text_add(&t, "{\"error\":\"no recent forecasts of that series\"}\n");
    }
  } else if (!strcmp(url, "/api/forecasts")) {
    status = 400;
    monitor_text_add(&t, "{\"error\":\"give ?series=KEY (GET /api/series lists them)\"}\n");
  } else {
    return 0;
  }
  out->status = status;
  out->type = "application/json";
  if (t.nomem || t.text == NULL) {
    free(t.text);
    out->body = NULL;
    return 1; /* the server answers 500 */
  }
  out->body = t.text;
  out->len = t.len;
  return 1;
}
