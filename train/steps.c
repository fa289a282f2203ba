/*
 * Step formation (train/steps.h): the replay's look-ahead by event time,
 * live steps as soon as nothing ready can join them (live.c's helpers), and the series' slots and
 * marks that keep a series to one window per step.
 */
#include "steps.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "live.h"

/* How long one wait for a window may block before the stop flag is read. */
#define WAIT_SLICE_MS 100

/* A partition's look-ahead (replay): a binary min-heap of its next windows
 * by (event time of the last target, last offset). */
typedef struct ahead_s {
  const ls_window_t **w; /* [K] */
  int n;
  int ended; /* the partition delivered its last window */
} ahead_t;

struct steps_s {
  steps_conf_t c;
  ahead_t *ahead; /* [n_ahead] replay (the partitions at the start) */
  int n_ahead;
  const ls_window_t **defer; /* live: windows waiting for a later step, in order */
  int n_defer, cap_defer;
  int n_live; /* live: windows in the step being formed */
  int hurry;  /* live: a rank had windows waiting after the last step: none waits out a deadline */
  const ls_window_t **wins; /* [B] the step's */
  int64_t *slots;           /* [B] their series' slots */
  int64_t *mark;            /* [cap_mark] per slot: the stamp of the step using it */
  size_t cap_mark;
  int64_t stamp;
};

int steps_lookahead(int64_t buffer_records, int partitions, int T, int H, int64_t queue_windows) {
  int64_t const fit = buffer_records / ((int64_t)partitions * (T + H));
  return fit < queue_windows ? (fit > 1 ? (int)fit : 1) : (int)queue_windows;
}

ls_err_t steps_new(const steps_conf_t *conf, steps_t **out) {
  *out = NULL;
  steps_t *const s = calloc(1, sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for step formation");
  s->c = *conf;
  size_t const P = conf->P > 0 ? (size_t)conf->P : 1, K = (size_t)conf->lookahead;
  s->wins = calloc((size_t)conf->B, sizeof *s->wins);
  s->slots = calloc((size_t)conf->B, sizeof *s->slots);
  s->ahead = calloc(P, sizeof *s->ahead);
  s->n_ahead = conf->P;
  ls_err_t err =
      s->wins && s->slots && s->ahead ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for steps");
  for (int i = 0; conf->replay && i < conf->P && err == LS_OK; i++)
    if ((s->ahead[i].w = calloc(K, sizeof *s->ahead[i].w)) == NULL)
      err = ls_error_set(LS_ERR_NOMEM, "no memory for a look-ahead of %zu windows", K);
  if (err != LS_OK) {
    steps_free(s);
    return err;
  }
  *out = s;
  return LS_OK;
}

void steps_free(steps_t *s) {
  if (s == NULL) return;
  for (int i = 0; s->ahead != NULL && i < s->n_ahead; i++) {
    for (int k = 0; k < s->ahead[i].n; k++)
      ls_ingest_release(s->c.ing, s->ahead[i].w[k]);
    free(s->ahead[i].w);
  }
  for (int i = 0; i < s->n_defer; i++)
    ls_ingest_release(s->c.ing, s->defer[i]);
  free(s->ahead), free(s->defer), free(s->wins), free(s->slots), free(s->mark);
  free(s);
}

const ls_window_t *const *steps_windows(const steps_t *s) {
  return s->wins;
}
const int64_t *steps_slots(const steps_t *s) {
  return s->slots;
}

void steps_release(steps_t *s, int n) {
  for (int b = 0; b < n; b++) {
    ls_ingest_release(s->c.ing, s->wins[b]);
    s->wins[b] = NULL;
  }
}

int steps_more(const steps_t *s) {
  for (int i = 0; i < s->c.P; i++)
    if (!s->ahead[i].ended || s->ahead[i].n > 0) return 1;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Series slots                                                              */

/* Grows a per-series array of int64_t (*v, *cap entries) to hold index i,
 * filling new entries with fill. */
static ls_err_t grow_index(int64_t **v, size_t *cap, size_t i, int64_t fill, const char *what) {
  if (i < *cap) return LS_OK;
  size_t n = *cap ? *cap : 1024;
  while (n <= i)
    n *= 2;
  int64_t *const grown = realloc(*v, n * sizeof *grown);
  LS_RETURN_IF(grown == NULL, LS_ERR_NOMEM, "no memory for %zu %s", n, what);
  for (size_t k = *cap; k < n; k++)
    grown[k] = fill;
  *v = grown;
  *cap = n;
  return LS_OK;
}

/* The slot of a window's series, by its key (slots move when series are
 * evicted between steps). Grows the per-slot marks with the table. */
static ls_err_t window_slot(steps_t *s, const ls_window_t *w, int64_t *slot) {
  LS_FORWARD_IF_ERROR(ls_series_table_slot(s->c.series, w->key, w->key_len, w->partition, slot));
  return grow_index(&s->mark, &s->cap_mark, (size_t)*slot, 0, "series marks");
}

static void add_window(steps_t *s, int b, const ls_window_t *w, int64_t slot) {
  s->wins[b] = w;
  s->slots[b] = slot;
  s->mark[slot] = s->stamp;
}

/* ------------------------------------------------------------------------ */
/* Replay                                                                    */

/* a before b: by the event time of their last targets, then their offsets. */
static int before(const ls_window_t *a, const ls_window_t *b) {
  int64_t const ta = a->times[a->n_targets], tb = b->times[b->n_targets];
  return ta != tb ? ta < tb : a->last_offset < b->last_offset;
}

static void heap_push(ahead_t *h, const ls_window_t *w) {
  int i = h->n++;
  while (i > 0 && before(w, h->w[(i - 1) / 2])) {
    h->w[i] = h->w[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->w[i] = w;
}

static void heap_pop(ahead_t *h) {
  const ls_window_t *const last = h->w[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(h->w[c + 1], h->w[c])) c++;
    if (!before(h->w[c], last)) break;
    h->w[i] = h->w[c];
    i = c;
  }
  if (h->n > 0) h->w[i] = last;
}

/* Fills partition i's look-ahead to K windows, waiting for them in its
 * offset order, unless it ends or the run is stopped. */
static ls_err_t fill(steps_t *s, int i, volatile sig_atomic_t *stop, double *wait_s) {
  ahead_t *const h = &s->ahead[i];
  double const t0 = base_now_s();
  ls_err_t err = LS_OK;
  while (h->n < s->c.lookahead && !h->ended && !(stop && *stop) && err == LS_OK) {
    ls_next_t what;
    const ls_window_t *w = NULL;
    err = ls_ingest_next_partition(s->c.ing, s->c.parts[i], WAIT_SLICE_MS, &what, &w);
    if (err == LS_OK && what == LS_NEXT_WINDOW) heap_push(h, w);
    if (err == LS_OK && what == LS_NEXT_END) h->ended = 1;
  }
  *wait_s += base_now_s() - t0;
  return err;
}

/* Up to quota windows of every partition, earliest first, each partition
 * stopping at a window whose series is in the step already. */
static ls_err_t form_replay(steps_t *s, volatile sig_atomic_t *stop, int *n, double *wait_s) {
  for (int i = 0; i < s->c.P && !(stop && *stop); i++) {
    LS_FORWARD_IF_ERROR(fill(s, i, stop, wait_s));
    ahead_t *const h = &s->ahead[i];
    for (int k = 0; k < s->c.quota && h->n > 0; k++) {
      int64_t slot;
      LS_FORWARD_IF_ERROR(window_slot(s, h->w[0], &slot));
      if (s->mark[slot] == s->stamp) break; /* its series is in this step already */
      add_window(s, (*n)++, h->w[0], slot);
      heap_pop(h);
    }
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Live                                                                      */

/* Takes window w into the step, or defers it (its series is in the step,
 * or has a window deferred: each series stays in order). */
static ls_err_t live_take(void *opaque, const ls_window_t *w) {
  steps_t *const s = opaque;
  int64_t slot;
  LS_FORWARD_IF_ERROR(window_slot(s, w, &slot));
  if (s->mark[slot] == s->stamp) return live_defer(&s->defer, &s->n_defer, &s->cap_defer, w);
  add_window(s, s->n_live++, w, slot);
  return LS_OK;
}

/* The step can grow: fewer than B windows in it, fewer than B waiting (how
 * far it looks ahead). */
static int live_more(void *opaque) {
  const steps_t *const s = opaque;
  return s->n_live < s->c.B && s->n_defer < s->c.B;
}

/* Deferred windows first, in order, then new ones, what every partition
 * has ready first (live_sweep). The step fires with B windows; as soon as
 * nothing ready can join it: windows wait that are all of series in it (a
 * backlog: it drains at replay speed, one window of each series a step),
 * it holds every series the rank knows, or another rank has a backlog
 * (s->hurry); or deadline_ms after it began (so that ranks meet in lockstep
 * even when one has no data). */
static ls_err_t form_live(steps_t *s, volatile sig_atomic_t *stop, int *n, double *wait_s) {
  int kept = 0;
  s->n_live = 0;
  for (int i = 0; i < s->n_defer; i++) {
    const ls_window_t *const w = s->defer[i];
    int64_t slot;
    LS_FORWARD_IF_ERROR(window_slot(s, w, &slot));
    if (s->n_live < s->c.B && s->mark[slot] != s->stamp)
      add_window(s, s->n_live++, w, slot);
    else
      s->defer[kept++] = w, s->mark[slot] = s->stamp;
  }
  s->n_defer = kept;
  double const t0 = base_now_s(), deadline = t0 + s->c.deadline_ms / 1e3;
  while (live_more(s) && !(stop && *stop)) {
    double const left = deadline - base_now_s();
    int const wait_ms = left < WAIT_SLICE_MS / 1e3 ? (int)(left * 1e3) + 1 : WAIT_SLICE_MS;
    if (s->c.ing == NULL) { /* no partition on this rank: wait out the step */
      struct timespec const ts = {0, (long)wait_ms * 1000000L};
      if (s->hurry || left <= 0) break;
      nanosleep(&ts, NULL);
      continue;
    }
    LS_FORWARD_IF_ERROR(live_sweep(s->c.ing, s->c.parts, s->c.P, (int)(s->stamp % s->c.P),
                                   live_take, live_more, s));
    int const n_in = s->n_live;
    if (s->hurry || (n_in > 0 && (s->n_defer > 0 || live_every_series(s->c.ing, n_in)))) break;
    if (left <= 0 || !live_more(s)) break;
    ls_next_t what = LS_NEXT_TIMEOUT;
    const ls_window_t *w = NULL;
    LS_FORWARD_IF_ERROR(ls_ingest_next(s->c.ing, wait_ms, &what, &w));
    if (what == LS_NEXT_RECORDS && s->c.idle != NULL) LS_FORWARD_IF_ERROR(s->c.idle(s->c.opaque));
    if (what == LS_NEXT_WINDOW) LS_FORWARD_IF_ERROR(live_take(s, w));
  }
  *n = s->n_live;
  *wait_s += base_now_s() - t0;
  return LS_OK;
}

int steps_idle(steps_t *s) {
  ls_ingest_stats_t is;
  return !s->c.replay && s->n_defer == 0 &&
         (s->c.ing == NULL || (ls_ingest_stats(s->c.ing, &is) == LS_OK && is.queued_windows == 0));
}

int steps_backlog(const steps_t *s) {
  return s->n_defer > 0;
}

void steps_set_partitions(steps_t *s, const int32_t *parts, int P) {
  if (s->c.replay) return; /* a replay reads the partitions it started with */
  s->c.parts = parts;
  s->c.P = P;
}

void steps_hurry(steps_t *s, int hurry) {
  s->hurry = hurry;
}

ls_err_t steps_form(steps_t *s, volatile sig_atomic_t *stop, int *n, double *wait_s) {
  *n = 0;
  s->stamp++;
  if (s->c.replay) return s->c.P > 0 ? form_replay(s, stop, n, wait_s) : LS_OK;
  return form_live(s, stop, n, wait_s);
}
