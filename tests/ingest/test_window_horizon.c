/*
 * The windower with a horizon G > 1 (ls_windower_set_horizon, issue 25): a
 * window is complete only once its series' G-1 records after its last
 * target came, and holds them (x rows T+1..T+G-1, n_extra) as targets of
 * its later horizons; they stay the next window's inputs. At a series' end
 * (a flush, a gap) the window goes out with those it has, then what
 * follows its last target as a partial window. A resume from what the
 * series hold re-forms the same windows. Horizon 1 is the plain windower.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lstream/ingest.h"

enum { F = 1, T = 4, G = 3 };

static ls_windower_t *windower(int g) {
  ls_windower_t *w = NULL;
  cr_assert_eq(ls_windower_new(&w, LS_FORMAT_F32, F, T), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_windower_set_horizon(w, g), LS_OK, "%s", ls_last_error());
  return w;
}

/* Pushes record k of key (value k, offset 10 k, time 1000 + k, or `time`
 * when >= 0). */
static const ls_window_t *push(ls_windower_t *w, const char *key, int k, int64_t time) {
  float const v = (float)k;
  char buf[4];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, &v, F, buf, sizeof buf, &len), LS_OK);
  ls_record_t const rec = {key, strlen(key), buf, len, 0, 10 * k, time >= 0 ? time : 1000 + k};
  const ls_window_t *win = NULL;
  cr_assert_eq(ls_windower_push(w, &rec, &win), LS_REJECT_NONE);
  return win;
}

/* win is window `index`: rows from record index*T, n_targets targets and
 * n_extra records after them, zero past. */
static void expect(const ls_window_t *win, int64_t index, int n_targets, int n_extra) {
  cr_assert_not_null(win, "window %lld", (long long)index);
  cr_expect_eq(win->index, index);
  cr_expect_eq(win->n_targets, n_targets, "window %lld", (long long)index);
  cr_expect_eq(win->n_extra, n_extra, "window %lld", (long long)index);
  int const k0 = (int)index * T, n = n_targets + 1 + n_extra;
  cr_expect_eq(win->first_offset, 10 * k0);
  cr_expect_eq(win->last_offset, 10 * (k0 + n_targets));
  for (int r = 0; r < T + G; r++) {
    cr_expect_eq(win->x[r], r < n ? (float)(k0 + r) : 0.0f, "window %lld row %d", (long long)index,
                 r);
    cr_expect_eq(win->offsets[r], r < n ? 10 * (k0 + r) : -1);
  }
  for (int t = 0; t < T; t++)
    cr_expect_eq(win->mask[t], t < n_targets ? 1.0f : 0.0f);
}

Test(window_horizon, a_window_waits_for_its_records_after_it) {
  ls_windower_t *const w = windower(G);
  int windows = 0;
  for (int k = 0; k < 15; k++) {
    const ls_window_t *const win = push(w, "s", k, -1);
    /* Window j: inputs jT.., its last target jT + T, complete at jT + T + G - 1 (6, 10, 14). */
    if (k >= T + G - 1 && (k - (T + G - 1)) % T == 0)
      expect(win, windows++, T, G - 1);
    else
      cr_expect_null(win, "record %d completed a window: none before its G-1 records after it", k);
  }
  cr_expect_eq(windows, 3);
  ls_inflight_t held;
  int found = 0;
  cr_assert_eq(ls_windower_pending_of(w, "s", 1, &held, &found), LS_OK);
  cr_expect_eq(held.rows, G, "records 12..14: the next window's first inputs");
  cr_expect_eq(held.offsets[0], 10 * 3 * T);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.windows, 3);
  cr_expect_eq(st.buffered, G);
  ls_windower_destroy(w);
}

Test(window_horizon, the_end_of_a_replay_cuts_its_records_after_it_short) {
  ls_windower_t *const w = windower(G);
  for (int k = 0; k < 10; k++) /* window 0 at 6; window 1 (4..8) and record 9 held */
    cr_expect_eq(push(w, "s", k, -1) == NULL, k != T + G - 1);
  const ls_window_t *win = NULL;
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  expect(win, 1, T, 1); /* whole, one record after it of G-1 */
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  expect(win, 2, 1, 0); /* then records 8, 9 */
  cr_assert_eq(ls_windower_flush_next(w, 0, &win), LS_OK);
  cr_expect_null(win);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.buffered, 0);
  cr_expect_eq(st.windows, 2, "the whole window counted, as one of horizon 1 would be");
  ls_windower_destroy(w);
}

Test(window_horizon, a_gap_closes_the_waiting_window_and_the_rest) {
  ls_windower_t *const w = windower(G);
  cr_assert_eq(ls_windower_set_reset_gap(w, 100), LS_OK);
  for (int k = 0; k < 10; k++)
    push(w, "s", k, -1);
  const ls_window_t *win = push(w, "s", 10, 5000), *more = NULL;
  expect(win, 1, T, 1);
  cr_expect_eq(win->reset, 0);
  cr_assert_eq(ls_windower_more(w, &more), LS_OK);
  expect(more, 2, 1, 0);
  cr_assert_eq(ls_windower_more(w, &more), LS_OK);
  cr_expect_null(more, "taken once");
  for (int k = 11; k < 16; k++) /* window 3 from record 10, reset: complete at 16 */
    cr_expect_null(push(w, "s", k, 5000 + k));
  win = push(w, "s", 16, 5016);
  cr_assert_not_null(win);
  cr_expect_eq(win->index, 3);
  cr_expect_eq(win->reset, 1);
  cr_expect_eq(win->n_extra, G - 1);
  cr_expect_eq(win->first_offset, 100);
  ls_windower_destroy(w);
}

/* Series s has pushed records 0..9: window 0 went out at 6, window 1 (inputs 4..7) holds record
 * 9 of its G-1 = 2 after it and waits. */
static void push_until_waiting(ls_windower_t *w, const char *s) {
  for (int k = 0; k < 10; k++)
    cr_expect_eq(push(w, s, k, -1) == NULL, k != T + G - 1);
}

Test(window_horizon, an_evicted_series_hands_out_its_waiting_window) {
  ls_windower_t *const w = windower(G);
  cr_assert_eq(ls_windower_set_eviction(w, 0, 1), LS_OK);
  push_until_waiting(w, "a");
  /* b's first record evicts a (one series held at most): a's window goes out as a flush's, with
   * the one record after it a has (the rows whose t + h passes it masked by the trainer). */
  const ls_window_t *win = push(w, "b", 0, -1), *more = NULL;
  expect(win, 1, T, 1);
  cr_expect_str_eq(win->key, "a");
  cr_assert_eq(ls_windower_more(w, &more), LS_OK);
  cr_expect_null(more);
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.windows, 2);
  cr_expect_eq(st.evicted, 1);
  cr_expect_eq(st.evicted_records, 2, "records 8 and 9: no window's inputs");
  cr_expect_eq(st.buffered, 1, "b's record");
  /* a comes back as a new series, from window 0. */
  cr_expect_null(push(w, "a", 20, -1));
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.evicted, 2, "b, holding one record: dropped");
  cr_expect_eq(st.evicted_records, 3);
  ls_windower_destroy(w);
}

Test(window_horizon, one_record_completes_its_window_and_evicts_a_waiting_one) {
  ls_windower_t *const w = windower(G);
  cr_assert_eq(ls_windower_set_eviction(w, 100, 0), LS_OK);
  push_until_waiting(w, "a"); /* times 1000..1009 */
  for (int k = 0; k < T + G - 1; k++)
    cr_expect_null(push(w, "b", k, 1010 + k));
  /* b's record 6 completes its window 0 and leaves a idle (1200 - 1009 > 100). */
  const ls_window_t *win = push(w, "b", T + G - 1, 1200), *more = NULL;
  expect(win, 0, T, G - 1);
  cr_expect_str_eq(win->key, "b");
  cr_assert_eq(ls_windower_more(w, &more), LS_OK);
  expect(more, 1, T, 1);
  cr_expect_str_eq(more->key, "a");
  cr_assert_eq(ls_windower_more(w, &more), LS_OK);
  cr_expect_null(more, "taken once");
  ls_window_stats_t st;
  cr_assert_eq(ls_windower_stats(w, &st), LS_OK);
  cr_expect_eq(st.windows, 3);
  cr_expect_eq(st.evicted_records, 2);
  cr_expect_eq(st.buffered, G, "b's records 4..6, its next window's first inputs");
  ls_windower_destroy(w);
}

/* Series in flight handed on to a new windower (a resume). */
typedef struct kept_s {
  ls_inflight_t in;
  int64_t offsets[T + G], times[T + G];
  float x[T + G];
} kept_t;

static ls_err_t keep(void *opaque, const ls_inflight_t *s) {
  kept_t *const k = opaque;
  k->in = *s;
  memcpy(k->offsets, s->offsets, (size_t)s->rows * sizeof *k->offsets);
  memcpy(k->times, s->times, (size_t)s->rows * sizeof *k->times);
  memcpy(k->x, s->x, (size_t)s->rows * sizeof *k->x);
  k->in.offsets = k->offsets, k->in.times = k->times, k->in.x = k->x;
  return LS_OK;
}

static ls_err_t no_window(void *opaque, const ls_window_t *win) {
  (void)opaque;
  cr_expect_fail("restoring completed window %lld", (long long)win->index);
  return LS_OK;
}

Test(window_horizon, a_resume_re_forms_the_same_windows) {
  for (int cut = 5; cut < 14; cut++) { /* what the series holds after record cut */
    ls_windower_t *const a = windower(G), *const b = windower(G);
    for (int k = 0; k <= cut; k++)
      push(a, "s", k, -1);
    kept_t kept;
    memset(&kept, 0, sizeof kept);
    cr_assert_eq(ls_windower_each_pending(a, 0, keep, &kept), LS_OK);
    cr_assert_eq(ls_windower_restore(b, &kept.in, 1, no_window, NULL), LS_OK, "%s",
                 ls_last_error());
    for (int k = cut + 1; k < 20; k++) {
      const ls_window_t *const wa = push(a, "s", k, -1), *const wb = push(b, "s", k, -1);
      cr_expect_eq(wa == NULL, wb == NULL, "cut %d record %d", cut, k);
      if (wa != NULL && wb != NULL) {
        cr_expect_eq(wb->index, wa->index);
        cr_expect_eq(wb->n_extra, wa->n_extra);
        cr_expect_arr_eq(wb->x, wa->x, (T + G) * sizeof(float), "cut %d record %d", cut, k);
      }
    }
    ls_windower_destroy(a);
    ls_windower_destroy(b);
  }
}

/* A resume: the windows completed while restoring. */
typedef struct restored_s {
  int n;
  int64_t index[4];
  int n_extra[4];
} restored_t;

static ls_err_t keep_window(void *opaque, const ls_window_t *win) {
  restored_t *const r = opaque;
  cr_assert_lt(r->n, 4);
  r->index[r->n] = win->index, r->n_extra[r->n++] = win->n_extra;
  return LS_OK;
}

Test(window_horizon, a_resume_hands_out_an_evicted_incarnations_window) {
  /* What a snapshot keeps of key "a": its first incarnation's window 1, handed out by its
   * eviction (records 4..9), and its next incarnation (records 20, 21, from window 0). */
  int64_t offsets[T + 2], times[T + 2], offsets2[2] = {200, 210}, times2[2] = {1020, 1021};
  float x[T + 2], x2[2] = {20, 21};
  for (int r = 0; r < T + 2; r++)
    offsets[r] = 10 * (T + r), times[r] = 1000 + T + r, x[r] = (float)(T + r);
  ls_inflight_t const in[2] = {/* not marked evicted, as a snapshot of before keeps it */
                               {"a", 1, 0, 1, 1009, 0, T + 2, offsets, times, x, 0},
                               {"a", 1, 0, 0, 1021, 0, 2, offsets2, times2, x2, 0}};
  ls_windower_t *const w = windower(G);
  restored_t got = {0};
  cr_assert_eq(ls_windower_restore(w, in, 2, keep_window, &got), LS_OK, "%s", ls_last_error());
  cr_assert_eq(got.n, 1, "the window the eviction handed out, formed again");
  cr_expect_eq(got.index[0], 1);
  cr_expect_eq(got.n_extra[0], 1);
  ls_inflight_t held;
  int found = 0;
  cr_assert_eq(ls_windower_pending_of(w, "a", 1, &held, &found), LS_OK);
  cr_expect_eq(held.rows, 2);
  cr_expect_eq(held.index, 0);
  ls_windower_destroy(w);
}

/* The windows of a run, as far as a resume must form them again. */
typedef struct seen_s {
  int n;
  struct {
    char key;
    int64_t index, first_offset, last_offset;
    int n_targets, n_extra;
    float x[T + G];
  } win[8];
} seen_t;

static ls_err_t see(void *opaque, const ls_window_t *win) {
  seen_t *const s = opaque;
  cr_assert_lt(s->n, 8);
  s->win[s->n].key = win->key[0];
  s->win[s->n].index = win->index, s->win[s->n].first_offset = win->first_offset;
  s->win[s->n].last_offset = win->last_offset;
  s->win[s->n].n_targets = win->n_targets, s->win[s->n].n_extra = win->n_extra;
  memcpy(s->win[s->n++].x, win->x, (size_t)(win->n_targets + 1 + win->n_extra) * sizeof(float));
  return LS_OK;
}

/* Pushes record k of key into w, its windows to seen. */
static void push_seen(ls_windower_t *w, const char *key, int k, seen_t *seen) {
  for (const ls_window_t *win = push(w, key, k, -1); win != NULL;) {
    see(seen, win);
    cr_assert_eq(ls_windower_more(w, &win), LS_OK);
  }
}

static void expect_seen(const seen_t *got, const seen_t *want, int g, const char *what) {
  cr_assert_eq(got->n, want->n, "G=%d %s: %d windows, uninterrupted %d", g, what, got->n, want->n);
  for (int i = 0; i < want->n; i++) {
    cr_expect_eq(got->win[i].key, want->win[i].key, "G=%d %s window %d", g, what, i);
    cr_expect_eq(got->win[i].index, want->win[i].index, "G=%d %s window %d: index %lld, not %lld",
                 g, what, i, (long long)got->win[i].index, (long long)want->win[i].index);
    cr_expect_eq(got->win[i].first_offset, want->win[i].first_offset,
                 "G=%d %s window %d: from offset %lld, not %lld", g, what, i,
                 (long long)got->win[i].first_offset, (long long)want->win[i].first_offset);
    cr_expect_eq(got->win[i].last_offset, want->win[i].last_offset, "G=%d %s window %d", g, what,
                 i);
    cr_expect_eq(got->win[i].n_targets, want->win[i].n_targets, "G=%d %s window %d", g, what, i);
    cr_expect_eq(got->win[i].n_extra, want->win[i].n_extra, "G=%d %s window %d", g, what, i);
    cr_expect_arr_eq(got->win[i].x, want->win[i].x, sizeof got->win[i].x, "G=%d %s window %d", g,
                     what, i);
  }
}

Test(window_horizon, a_resume_ends_an_evicted_series_whose_key_comes_back_after_it) {
  /* One series a partition (max_held 1): a holds a whole window (G = 1: complete, its last
   * target kept; G = 3: waiting for its records after it), b's record evicts a (its leftover
   * forgotten; its waiting window handed out), a comes back: a new series. A snapshot just
   * after b's record keeps a's window in flight, marked evicted (its key has no series then),
   * and b's row; a resume from it forms the same windows as the run that went on. */
  for (int g = 1; g <= G; g += G - 1) {
    int const na = T + 1 + (g > 1), back = na + 1, end = back + T + g;
    ls_windower_t *const a = windower(g);
    cr_assert_eq(ls_windower_set_eviction(a, 0, 1), LS_OK);
    seen_t before = {0}, want = {0};
    for (int k = 0; k < na; k++)
      push_seen(a, "a", k, &before);
    push_seen(a, "b", na, g > 1 ? &want : &before); /* evicts a: its waiting window */
    cr_expect_eq(before.n, g == 1, "G=%d: a's window complete before b's record", g);
    for (int k = back; k < end; k++)
      push_seen(a, "a", k, &want);
    cr_assert_eq(want.n, 1 + (g > 1), "G=%d: the new series' window", g);
    cr_expect_eq(want.win[want.n - 1].index, 0, "G=%d: a new series", g);
    cr_expect_eq(want.win[want.n - 1].first_offset, 10 * back);
    ls_windower_destroy(a);

    int64_t offsets[T + 2], times[T + 2], b_offset = 10 * na, b_time = 1000 + na;
    float x[T + 2], b_x = (float)na;
    for (int k = 0; k < na; k++)
      offsets[k] = 10 * k, times[k] = 1000 + k, x[k] = (float)k;
    ls_inflight_t const in[2] = {{"a", 1, 0, 0, 1000 + na - 1, 0, na, offsets, times, x, 1},
                                 {"b", 1, 0, 0, b_time, 0, 1, &b_offset, &b_time, &b_x, 0}};
    ls_windower_t *const b = windower(g);
    cr_assert_eq(ls_windower_set_eviction(b, 0, 1), LS_OK);
    seen_t restored = {0}, got = {0};
    cr_assert_eq(ls_windower_restore(b, in, 2, see, &restored), LS_OK, "%s", ls_last_error());
    /* G = 1: a's window 0 formed again (it was in flight); G = 3: and handed out by the eviction.
     */
    cr_expect_eq(restored.n, 1, "G=%d: a's window 0 once", g);
    if (g > 1) {
      got.n = restored.n;
      memcpy(got.win, restored.win, sizeof restored.win);
    }
    ls_inflight_t held;
    int found = 1;
    cr_assert_eq(ls_windower_pending_of(b, "a", 1, &held, &found), LS_OK);
    cr_expect_eq(found, 0, "G=%d: a's evicted series ended by the restore", g);
    for (int k = back; k < end; k++)
      push_seen(b, "a", k, &got);
    expect_seen(&got, &want, g, "resumed");
    ls_windower_destroy(b);
  }
}

Test(window_horizon, horizon_bounds) {
  ls_windower_t *w = NULL;
  cr_assert_eq(ls_windower_new(&w, LS_FORMAT_F32, F, T), LS_OK);
  cr_expect_eq(ls_windower_set_horizon(w, 0), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_set_horizon(w, T + 1), LS_ERR_INVALID_ARG, "more after it than in it");
  cr_expect_eq(ls_windower_set_horizon(NULL, 2), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_windower_more(w, NULL), LS_ERR_INVALID_ARG);
  const ls_window_t *win = push(w, "s", 0, -1);
  cr_expect_null(win);
  cr_expect_eq(ls_windower_set_horizon(w, 2), LS_ERR_STATE, "only before the first record");
  for (int k = 1; k <= T; k++) /* horizon 1: complete at T, nothing after it */
    win = push(w, "s", k, -1);
  cr_assert_not_null(win);
  cr_expect_eq(win->n_targets, T);
  cr_expect_eq(win->n_extra, 0);
  cr_expect_eq(win->x[T], (float)T);
  ls_windower_destroy(w);
}
