/*
 * Forecasts going out (train/predict.h): when each forecast is made, and
 * the serving path. Where they go is predict_out.c's.
 *
 * Per series (pseries_t): whether its serving (h, c) is the trained state
 * (synced: after a window of it trained, nothing served since), its serving
 * normaliser, and the records read and not yet served. A record is served
 * (its next forecast made) by the engine's forward for a batch of series,
 * one time step: series whose state is the trained one gather it from the
 * series table's states (zero with stateless), the others from the serving
 * table; each batch serves one record of each series in it, so a series'
 * records go in order. Live, a series' records are served as they are
 * read, up to 2T past its trained boundary (the records of the windows
 * not yet trained: it does not wait for them); when a window of it trains,
 * its serving state restarts from the trained one and goes through the
 * records read past that window again (their forecasts went out: they
 * are not sent again), so each record is advanced at most twice.
 */
#include <stdlib.h>
#include <string.h>

#include "predict_internal.h"
#include "view.h"

/* ------------------------------------------------------------------------ */
/* Per-series state                                                          */

/* Grows a per-index int64 array (*v, *cap) to hold index i, new entries
 * fill. */
static ls_err_t grow_i64(int64_t **v, size_t *cap, size_t i, int64_t fill) {
  if (i < *cap) return LS_OK;
  size_t n = *cap ? *cap : 1024;
  while (n <= i)
    n *= 2;
  int64_t *const g = realloc(*v, n * sizeof *g);
  LS_RETURN_IF(g == NULL, LS_ERR_NOMEM, "no memory for %zu series", n);
  for (size_t k = *cap; k < n; k++)
    g[k] = fill;
  *v = g;
  *cap = n;
  return LS_OK;
}

/* Room for slot in the serving states (zero when new): the per-slot state
 * and the serving table's rows. */
static ls_err_t grow_ps(predict_t *pr, int64_t slot) {
  if ((size_t)slot >= pr->cap_ps) {
    size_t n = pr->cap_ps ? pr->cap_ps : 1024;
    while (n <= (size_t)slot)
      n *= 2;
    pseries_t *const g = realloc(pr->ps, n * sizeof *g);
    LS_RETURN_IF(g == NULL, LS_ERR_NOMEM, "no memory for the serving state of %zu series", n);
    memset(g + pr->cap_ps, 0, (n - pr->cap_ps) * sizeof *g);
    pr->ps = g;
    pr->cap_ps = n;
  }
  if (pr->serve != NULL && (size_t)slot >= ls_state_table_slots(pr->serve))
    LS_FORWARD_IF_ERROR(ls_state_table_grow(pr->serve, 2 * (size_t)slot + 1));
  return LS_OK;
}

/* s's serving normaliser and seasons from the trained ones (st). */
static void sync_series(const predict_t *pr, pseries_t *s, const ls_series_stats_t *st) {
  s->synced = 1;
  s->norm_n = *st->norm_n;
  memcpy(s->norm, st->norm, (size_t)pr->F * LS_NORM_STATS * sizeof *s->norm);
  if (st->model_n > 0) memcpy(s->model, st->model, st->model_n * sizeof *s->model);
}

/* The serving state of slot, created (synced, with the trained state's
 * normaliser) on first use; the serving table grown to hold it. */
static ls_err_t series_of(predict_t *pr, int64_t slot, pseries_t **out) {
  LS_FORWARD_IF_ERROR(grow_ps(pr, slot));
  pseries_t *const s = &pr->ps[slot];
  if (s->norm == NULL) {
    s->last_time = s->reset_at = -1;
    s->norm = calloc((size_t)pr->F * LS_NORM_STATS, sizeof *s->norm);
    LS_RETURN_IF(s->norm == NULL, LS_ERR_NOMEM, "no memory for a serving normaliser");
    ls_series_stats_t st;
    LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, slot, &st));
    if (st.model_n > 0) s->model = malloc(st.model_n * sizeof *s->model);
    LS_RETURN_IF(st.model_n > 0 && s->model == NULL, LS_ERR_NOMEM,
                 "no memory for a serving linear path");
    sync_series(pr, s, &st);
  }
  *out = s;
  return LS_OK;
}

/* Appends a record read to s's records to serve. */
static ls_err_t pend_push(predict_t *pr, pseries_t *s, int64_t off, int64_t time, const float *x) {
  size_t const F = (size_t)pr->F;
  if (s->head > 0 && s->n == s->cap) { /* slide the trained ones out */
    int64_t const k = s->n - s->head;
    memmove(s->off, s->off + s->head, (size_t)k * sizeof *s->off);
    memmove(s->time, s->time + s->head, (size_t)k * sizeof *s->time);
    memmove(s->x, s->x + (size_t)s->head * F, (size_t)k * F * sizeof *s->x);
    s->adv -= s->head;
    s->n = k, s->head = 0;
  }
  if (s->n == s->cap) {
    int64_t const cap = s->cap ? 2 * s->cap : 4;
    int64_t *const o = realloc(s->off, (size_t)cap * sizeof *o);
    if (o != NULL) s->off = o;
    int64_t *const t = realloc(s->time, (size_t)cap * sizeof *t);
    if (t != NULL) s->time = t;
    float *const v = realloc(s->x, (size_t)cap * F * sizeof *v);
    if (v != NULL) s->x = v;
    LS_RETURN_IF(!o || !t || !v, LS_ERR_NOMEM, "no memory for %lld records to serve",
                 (long long)cap);
    s->cap = cap;
  }
  s->off[s->n] = off, s->time[s->n] = time;
  memcpy(s->x + (size_t)s->n * F, x, F * sizeof *x);
  s->n++;
  return LS_OK;
}

/* Drops s's records below offset `below` (a window trained them). */
static void pend_drop_below(pseries_t *s, int64_t below) {
  while (s->head < s->n && s->off[s->head] < below)
    s->head++;
  if (s->adv < s->head) s->adv = s->head;
  if (s->reset_at >= 0 && s->reset_at < below) s->reset_at = -1; /* trained from zero */
  if (s->head == s->n) s->head = s->adv = s->n = 0;
}

/* Puts slot on the list of series with records to serve. */
static ls_err_t mark_dirty(predict_t *pr, int64_t slot, pseries_t *s) {
  if (s->dirty) return LS_OK;
  if (pr->n_dirty == pr->cap_dirty) {
    size_t const cap = pr->cap_dirty ? 2 * pr->cap_dirty : 1024;
    int64_t *const d = realloc(pr->dirty, cap * sizeof *d);
    LS_RETURN_IF(d == NULL, LS_ERR_NOMEM, "no memory for %zu series", cap);
    pr->dirty = d, pr->cap_dirty = cap;
  }
  pr->dirty[pr->n_dirty++] = slot;
  s->dirty = 1;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The serving path                                                          */

/* Whether s's next record may be served now: finals (a replay's end), or
 * live within 2T of its trained boundary. */
static int servable(const predict_t *pr, const pseries_t *s, int finals) {
  return s->adv < s->n && (finals || (pr->live && s->adv - s->head < 2 * (int64_t)pr->T));
}

/* pr->state_row holds one serving state row: *row floats of h, then of c. */
static ls_err_t state_row_buffer(predict_t *pr, size_t *row) {
  const ls_engine_conf_t *const ec = ls_engine_get_conf(pr->eng);
  *row = (size_t)ec->shape.num_layers * (size_t)ec->shape.hidden_size;
  if (pr->state_row == NULL) pr->state_row = malloc(2 * *row * sizeof *pr->state_row);
  LS_RETURN_IF(pr->state_row == NULL, LS_ERR_NOMEM, "no memory for a serving state row");
  return LS_OK;
}

/* One batch of the n series b_slot [n], one time step from the trained
 * states (synced) or the serving ones, into the serving table: b_pred. */
static ls_err_t forward_batch(predict_t *pr, int n, int synced) {
  ls_engine_t *const eng = pr->eng;
  ls_state_table_t *const trained = ls_series_table_states(pr->v->series);
  ls_state_table_t *from = synced ? trained : pr->serve;
  int64_t *const gather = pr->b_slot + pr->B; /* [B] scratch after b_slot */
  for (int b = 0; b < n; b++) {
    const pseries_t *const s = &pr->ps[pr->b_slot[b]];
    int const zero = s->reset_at >= 0 && s->off[s->adv] == s->reset_at; /* after a gap */
    gather[b] = (synced && pr->v->conf->stateless) || zero ? -1 : pr->b_slot[b];
  }
  if (synced && eng != pr->v->eng) { /* the serving engine's own: the trained rows copied in */
    size_t row;
    LS_FORWARD_IF_ERROR(state_row_buffer(pr, &row));
    for (int b = 0; b < n; b++) {
      if (gather[b] < 0) continue;
      size_t const slot = (size_t)gather[b];
      LS_FORWARD_IF_ERROR(
          ls_state_table_read(trained, slot, 1, pr->state_row, pr->state_row + row));
      LS_FORWARD_IF_ERROR(
          ls_state_table_write(pr->serve, slot, 1, pr->state_row, pr->state_row + row));
    }
    from = pr->serve;
  }
  LS_FORWARD_IF_ERROR(ls_engine_gather_state(eng, from, n, gather));
  LS_FORWARD_IF_ERROR(ls_engine_forward(eng, 1, n, pr->b_x, NULL, NULL, NULL, NULL));
  LS_FORWARD_IF_ERROR(ls_engine_read_outputs(eng, NULL, pr->b_pred, NULL, NULL));
  return ls_engine_scatter_state(eng, pr->serve, n, pr->b_slot);
}

/* One forecast's values [W] in the data's units, h-major: per horizon
 * the O targets' point forecasts, then with quantiles each level's O
 * (sorted: prep_quantile_values); from the targets' base and scale [O],
 * the linear path's share lin [OH], the LSTM's weights beta [OH] and the
 * head's outputs out [W]: h = 1's point forecast the model's, given mixed
 * in h1 [O] or, h1 NULL, the LSTM's mixed with the linear path; the later
 * horizons' mixed likewise (prep_horizon_fc); the quantiles those of qv [Q OH] (the training
 * forward's, as figures_score calibrated them) or, qv NULL, the head's with the series' calibration
 * cal (NULL: none; prep_calib). */
static void values_of(const predict_t *pr, const double *base, const double *scale,
                      const double *lin, const double *beta, const float *h1, const float *out,
                      const double *qv, const prep_calib_t *cal, double *value) {
  const double *const alpha = figures_alpha(pr->fig);
  size_t const O = (size_t)pr->O, VH = O * (size_t)(1 + pr->NQ);
  for (int k = 0; k < pr->OH; k++) {
    int const j = k % pr->O;
    double const fc = k < pr->O && h1 != NULL
                          ? (double)h1[j]
                          : prep_horizon_fc(pr->p, k / pr->O + 1, lin[k], beta[k], out[k]);
    value[(size_t)(k / pr->O) * VH + (size_t)j] = base[j] + alpha[j] * scale[j] * fc;
  }
  if (pr->NQ == 0) return;
  if (qv == NULL) prep_quantile_values(pr->p, out, base, scale, lin, beta, cal, pr->qv);
  const double *const v = qv != NULL ? qv : pr->qv;
  for (size_t q = 0; q < (size_t)pr->NQ; q++)
    for (size_t k = 0; k < (size_t)pr->OH; k++)
      value[k / O * VH + (q + 1) * O + k % O] = v[q * (size_t)pr->OH + k];
}

/* Sends out the forecast after the record just served of slot's series:
 * row b of the batch. Records read again after a resume, whose forecast
 * went out before, are served again (their state) but not sent. */
static ls_err_t serve_emit(predict_t *pr, int b, pseries_t *s, int64_t step,
                           volatile sig_atomic_t *stop) {
  int64_t const slot = pr->b_slot[b], at = s->adv;
  ls_series_stats_t st;
  LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, slot, &st));
  int64_t const off = s->off[at];
  int const fresh = off + 1 > st.serve[LS_SERVE_SERVED];
  if (fresh && (pr->kinds & PREDICT_NEXT)) {
    size_t const o = (size_t)b * (size_t)pr->O, oh = (size_t)b * (size_t)pr->OH;
    prep_calib_t const cal = pr->NQ > 0 ? prep_calib(pr->p, &st) : (prep_calib_t){0};
    values_of(pr, pr->b_base + o, pr->b_scale + o, pr->b_lin + oh, pr->b_beta + oh, NULL,
              pr->b_pred + (size_t)b * (size_t)pr->W, NULL,
              pr->NQ > 0 && pr->p->gamma > 0.0 ? &cal : NULL, pr->value);
    ls_series_info_t si;
    LS_FORWARD_IF_ERROR(ls_series_table_info(pr->v->series, slot, &si));
    int64_t const after = s->n - at - 1; /* records read after it */
    const float *const next = after > 0 ? s->x + (size_t)(at + 1) * (size_t)pr->F : NULL;
    forecast_t const fc = {PREDICT_NEXT, slot,        si.partition,
                           off,          s->time[at], step,
                           pr->value,    next,        after < pr->H ? (int)after : pr->H};
    LS_FORWARD_IF_ERROR(predict_emit(pr, &fc, stop));
    pr->during_steps += pr->on_thread; /* made on the serving thread */
  }
  if (fresh) st.serve[LS_SERVE_SERVED] = off + 1;
  s->adv++;
  if (!pr->live && s->adv == s->n) s->head = s->adv = s->n = 0; /* a replay keeps none */
  return LS_OK;
}

/* Serves one record of each servable series whose state is synced (or
 * not): up to B a batch. *served receives how many. */
static ls_err_t serve_group(predict_t *pr, int finals, int synced, int64_t step,
                            volatile sig_atomic_t *stop, int *served) {
  *served = 0;
  size_t i = 0;
  while (i < pr->n_dirty) {
    int n = 0;
    for (; i < pr->n_dirty && n < pr->B; i++) {
      int64_t const slot = pr->dirty[i];
      pseries_t *const s = &pr->ps[slot];
      if (!servable(pr, s, finals) || s->synced != synced) continue;
      size_t const r = (size_t)n;
      LS_FORWARD_IF_ERROR(
          prep_record(pr->p, &s->norm_n, s->norm, s->model, s->x + (size_t)s->adv * (size_t)pr->F,
                      pr->b_x + r * (size_t)pr->I, pr->b_base + r * (size_t)pr->O,
                      pr->b_scale + r * (size_t)pr->O, pr->b_lin + r * (size_t)pr->OH,
                      pr->b_beta + r * (size_t)pr->OH, NULL));
      pr->b_slot[n++] = slot;
    }
    if (n == 0) break;
    LS_FORWARD_IF_ERROR(forward_batch(pr, n, synced));
    for (int b = 0; b < n; b++) {
      pseries_t *const s = &pr->ps[pr->b_slot[b]];
      LS_FORWARD_IF_ERROR(serve_emit(pr, b, s, step, stop));
      s->synced = 0;
    }
    *served += n;
  }
  return LS_OK;
}

/* Serves every servable record, a batch at a time; then forgets the
 * series with nothing left to serve. */
static ls_err_t serve(predict_t *pr, int finals, int64_t step, volatile sig_atomic_t *stop) {
  for (int a = 1, b = 1; a + b > 0;) {
    LS_FORWARD_IF_ERROR(serve_group(pr, finals, 1, step, stop, &a));
    LS_FORWARD_IF_ERROR(serve_group(pr, finals, 0, step, stop, &b));
  }
  size_t kept = 0;
  for (size_t i = 0; i < pr->n_dirty; i++) {
    pseries_t *const s = &pr->ps[pr->dirty[i]];
    if (s->adv < s->n)
      pr->dirty[kept++] = pr->dirty[i];
    else
      s->dirty = 0;
  }
  pr->n_dirty = kept;
  return LS_OK;
}

/* The slot of a tap record's series (cached by the consumer's id). */
static ls_err_t tap_slot(predict_t *pr, const ls_tap_record_t *r, int64_t *slot) {
  LS_FORWARD_IF_ERROR(grow_i64(&pr->slot_of, &pr->cap_slot_of, (size_t)r->series, -1));
  if (pr->slot_of[r->series] < 0) {
    LS_FORWARD_IF_ERROR(ls_series_table_slot(pr->v->series, r->key, r->key_len, r->partition,
                                             &pr->slot_of[r->series]));
    int64_t const at = pr->slot_of[r->series];
    LS_FORWARD_IF_ERROR(grow_i64(&pr->id_of, &pr->cap_id_of, (size_t)at, -1));
    pr->id_of[at] = r->series;
  }
  *slot = pr->slot_of[r->series];
  return LS_OK;
}

/* A record read more than --reset-gap-ms after its series' last: the
 * serving state restarts from zero at it, as the trained state does at
 * the window it starts. */
static void note_gap(predict_t *pr, pseries_t *s, const ls_tap_record_t *r) {
  int64_t const gap = pr->v->conf->reset_gap_ms;
  if (gap > 0 && r->time >= 0 && s->last_time >= 0 && r->time - s->last_time > gap)
    s->reset_at = r->offset;
  if (r->time >= 0) s->last_time = r->time;
}

/* The series table evicted slot (its series forgotten: --series-idle-ms,
 * --max-series) and moved slot `moved` (-1: none) into its place: the
 * serving state follows. */
static ls_err_t on_evict(void *opaque, int64_t slot, int64_t moved) {
  predict_t *const pr = opaque;
  size_t const dst = (size_t)slot;
  if (dst < pr->cap_id_of && pr->id_of[dst] >= 0) pr->slot_of[pr->id_of[dst]] = -1;
  pseries_t gone = {0};
  if (dst < pr->cap_ps) gone = pr->ps[dst], pr->ps[dst] = (pseries_t){0};
  free(gone.norm), free(gone.model), free(gone.off), free(gone.time), free(gone.x);
  size_t kept = 0; /* the evicted slot leaves the list to serve; the moved one is renamed */
  for (size_t i = 0; i < pr->n_dirty; i++)
    if (pr->dirty[i] != slot) pr->dirty[kept++] = pr->dirty[i] == moved ? slot : pr->dirty[i];
  pr->n_dirty = kept;
  if (moved < 0) return LS_OK;
  size_t const src = (size_t)moved;
  if (src < pr->cap_ps) {
    LS_FORWARD_IF_ERROR(grow_ps(pr, slot));
    pr->ps[dst] = pr->ps[src], pr->ps[src] = (pseries_t){0};
  }
  if (src < pr->cap_id_of) {
    LS_FORWARD_IF_ERROR(grow_i64(&pr->id_of, &pr->cap_id_of, dst, -1));
    pr->id_of[dst] = pr->id_of[src], pr->id_of[src] = -1;
    if (pr->id_of[dst] >= 0) pr->slot_of[pr->id_of[dst]] = slot;
  }
  if (pr->serve == NULL || src >= ls_state_table_slots(pr->serve)) return LS_OK;
  size_t row;
  LS_FORWARD_IF_ERROR(state_row_buffer(pr, &row));
  LS_FORWARD_IF_ERROR(ls_state_table_read(pr->serve, src, 1, pr->state_row, pr->state_row + row));
  return ls_state_table_write(pr->serve, dst, 1, pr->state_row, pr->state_row + row);
}

/* A record read into its series' records to serve. */
static ls_err_t take(predict_t *pr, const ls_tap_record_t *r) {
  int64_t slot;
  pseries_t *s = NULL;
  LS_FORWARD_IF_ERROR(tap_slot(pr, r, &slot));
  LS_FORWARD_IF_ERROR(series_of(pr, slot, &s));
  LS_FORWARD_IF_ERROR(predict_resolve(pr, slot, r->x)); /* the actual of its last forecast */
  note_gap(pr, s, r);
  LS_FORWARD_IF_ERROR(pend_push(pr, s, r->offset, r->time, r->x));
  return mark_dirty(pr, slot, s);
}

/* Keeps a record (its key and values copied) for the next drain outside a
 * section: on the serving thread, for a series without a slot yet. */
static ls_err_t defer(predict_t *pr, const ls_tap_record_t *r) {
  size_t const F = (size_t)pr->F;
  if (pr->n_later == pr->cap_later) {
    size_t const cap = pr->cap_later ? 2 * pr->cap_later : 64;
    ls_tap_record_t *const l = realloc(pr->later, cap * sizeof *l);
    if (l != NULL) pr->later = l;
    float *const x = realloc(pr->later_x, cap * F * sizeof *x);
    if (x != NULL) pr->later_x = x;
    LS_RETURN_IF(l == NULL || x == NULL, LS_ERR_NOMEM, "no memory for %zu records to serve", cap);
    pr->cap_later = cap;
  }
  if (pr->key_n + r->key_len + 1 > pr->key_cap) {
    size_t cap = pr->key_cap ? pr->key_cap : 4096;
    while (cap < pr->key_n + r->key_len + 1)
      cap *= 2;
    char *const k = realloc(pr->later_key, cap);
    LS_RETURN_IF(k == NULL, LS_ERR_NOMEM, "no memory for %zu bytes of keys to serve", cap);
    pr->later_key = k, pr->key_cap = cap;
  }
  ls_tap_record_t *const l = &pr->later[pr->n_later];
  *l = *r;
  l->key = NULL, l->x = NULL; /* pointers once the list is taken: the buffers may move */
  memcpy(pr->later_key + pr->key_n, r->key, r->key_len);
  pr->later_key[pr->key_n + r->key_len] = '\0';
  memcpy(pr->later_x + pr->n_later * F, r->x, F * sizeof *r->x);
  pr->key_n += r->key_len + 1;
  pr->n_later++;
  return LS_OK;
}

/* Whether the series of r has a slot known here (the serving thread
 * takes only those: a new slot may grow the series table). */
static int known(const predict_t *pr, const ls_tap_record_t *r) {
  return (size_t)r->series < pr->cap_slot_of && pr->slot_of[r->series] >= 0;
}

/* Live: takes what the tap brought into the series' records to serve;
 * outside a section, first what the serving thread left (in order). */
static ls_err_t drain(predict_t *pr) {
  if (!pr->on_thread && pr->n_later > 0) {
    size_t key = 0;
    for (size_t i = 0; i < pr->n_later; i++) {
      ls_tap_record_t r = pr->later[i];
      r.key = pr->later_key + key, r.x = pr->later_x + i * (size_t)pr->F;
      key += r.key_len + 1;
      LS_FORWARD_IF_ERROR(take(pr, &r));
    }
    pr->n_later = pr->key_n = 0;
  }
  const ls_tap_record_t *r = NULL;
  int64_t n = 0;
  LS_FORWARD_IF_ERROR(ls_ingest_records(pr->v->ing, &r, &n));
  for (int64_t i = 0; i < n; i++)
    if (pr->on_thread && !known(pr, &r[i])) /* its slot: outside a section */
      LS_FORWARD_IF_ERROR(defer(pr, &r[i]));
    else
      LS_FORWARD_IF_ERROR(take(pr, &r[i]));
  return LS_OK;
}

/* Live: what the tap brought, then every record that may be served (the
 * serving thread's too). */
static ls_err_t serve_read(predict_t *pr, int64_t step, volatile sig_atomic_t *stop) {
  LS_FORWARD_IF_ERROR(drain(pr));
  return serve(pr, 0, step, stop);
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

/* The forecasts of window b's rows from the training forward (pred), the
 * series re-synced to its trained state. */
static ls_err_t window_forecasts(predict_t *pr, const ls_window_t *w, int64_t slot, int b, int n,
                                 const float *pred, const float *out, int64_t step,
                                 volatile sig_atomic_t *stop) {
  const prep_t *const p = pr->p;
  int const O = pr->O;
  ls_series_stats_t st;
  LS_FORWARD_IF_ERROR(ls_series_table_peek(pr->v->series, slot, &st));
  for (int t = 0; t < w->n_targets; t++) {
    size_t const r = (size_t)t * (size_t)n + (size_t)b;
    values_of(pr, p->base + r * (size_t)O, p->scale + r * (size_t)O, p->lin + r * (size_t)pr->OH,
              p->beta + r * (size_t)pr->OH, pred + r * (size_t)O, out + r * (size_t)pr->W,
              pr->NQ > 0 ? p->qcal + r * (size_t)(pr->W - pr->OH) : NULL, NULL, pr->value);
    const float *const next = w->x + (size_t)(t + 1) * (size_t)pr->F;
    int const in = w->n_targets + w->n_extra - t; /* its records from row t + 1 on */
    int const known = in < pr->H ? in : pr->H;
    forecast_t fc = {PREDICT_EVAL, slot,      w->partition, w->offsets[t], w->times[t],
                     step,         pr->value, next,         known};
    if (pr->kinds & PREDICT_EVAL) LS_FORWARD_IF_ERROR(predict_emit(pr, &fc, stop));
    if (!(pr->kinds & PREDICT_NEXT) || w->offsets[t] + 1 <= st.serve[LS_SERVE_SERVED]) continue;
    fc.kind = PREDICT_NEXT;
    LS_FORWARD_IF_ERROR(predict_emit(pr, &fc, stop));
    st.serve[LS_SERVE_SERVED] = w->offsets[t] + 1;
  }
  if (!(pr->kinds & PREDICT_NEXT)) return LS_OK;
  pseries_t *s = NULL;
  LS_FORWARD_IF_ERROR(series_of(pr, slot, &s));
  sync_series(pr, s, &st);
  if (pr->live) { /* the serving state goes through the records past the window again */
    pend_drop_below(s, w->last_offset);
    s->adv = s->head;
    return s->adv < s->n ? mark_dirty(pr, slot, s) : LS_OK;
  }
  /* A replay: its last target, served at the end if no window takes it as
   * an input (kept in the series table: in snapshots). */
  const float *const tail = w->x + (size_t)w->n_targets * (size_t)pr->F;
  for (int f = 0; f < pr->F; f++)
    st.tail[f] = (double)tail[f];
  st.serve[LS_SERVE_TAIL_TIME] = w->times[w->n_targets];
  return LS_OK;
}

ls_err_t predict_after_section(predict_t *pr, int64_t step, volatile sig_atomic_t *stop) {
  if (pr == NULL || pr->n_later == 0) return LS_OK;
  LS_FORWARD_IF_ERROR(predict_thread_publish(pr));
  return serve_read(pr, step, stop);
}

ls_err_t predict_step(predict_t *pr, const ls_window_t *const *wins, const int64_t *slots, int n,
                      const float *pred, const float *out, int64_t step,
                      volatile sig_atomic_t *stop) {
  if (pr->live) { /* every record of these windows is read; serve's parameters current */
    LS_FORWARD_IF_ERROR(predict_thread_publish(pr));
    LS_FORWARD_IF_ERROR(drain(pr));
  }
  for (int b = 0; b < n; b++)
    LS_FORWARD_IF_ERROR(window_forecasts(pr, wins[b], slots[b], b, n, pred, out, step, stop));
  return pr->live ? serve(pr, 0, step, stop) : LS_OK;
}

ls_err_t predict_idle(predict_t *pr, int64_t step, volatile sig_atomic_t *stop) {
  if (!pr->live) return LS_OK;
  /* A publisher failed for good (fenced: another trainer took over, or an
   * outage outlasted the transaction timeout) stops the run now, not at
   * the next record, which a quiet feed may not send for hours. */
  int done = 0;
  LS_FORWARD_IF_ERROR(predict_durable(pr, 0, 0, &done));
  LS_FORWARD_IF_ERROR(predict_thread_publish(pr));
  return serve_read(pr, step, stop);
}

ls_err_t predict_finish(predict_t *pr, int64_t step, volatile sig_atomic_t *stop) {
  if (pr->live || !(pr->kinds & PREDICT_NEXT)) return LS_OK;
  /* Each series' last record (its last window's last target) whose
   * forecast has not gone out. */
  size_t const n = ls_series_table_count(pr->v->series);
  float *const x = malloc((size_t)pr->F * sizeof *x);
  LS_RETURN_IF(x == NULL, LS_ERR_NOMEM, "no memory for a record");
  ls_err_t err = LS_OK;
  for (size_t slot = 0; slot < n && err == LS_OK; slot++) {
    ls_series_info_t si;
    ls_series_stats_t st;
    pseries_t *s = NULL;
    err = ls_series_table_info(pr->v->series, (int64_t)slot, &si);
    if (err == LS_OK) err = ls_series_table_peek(pr->v->series, (int64_t)slot, &st);
    if (err != LS_OK || si.windows == 0 || st.serve[LS_SERVE_SERVED] > si.last_offset) continue;
    for (int f = 0; f < pr->F; f++)
      x[f] = (float)st.tail[f];
    err = series_of(pr, (int64_t)slot, &s);
    if (err == LS_OK) err = pend_push(pr, s, si.last_offset, st.serve[LS_SERVE_TAIL_TIME], x);
    if (err == LS_OK) err = mark_dirty(pr, (int64_t)slot, s);
  }
  free(x);
  return err == LS_OK ? serve(pr, 1, step, stop) : err;
}

int predict_live(const predict_t *pr) {
  return pr != NULL && pr->live;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                  */

ls_err_t predict_new(const train_view_t *v, prep_t *p, const figures_t *fig, predict_t **out) {
  *out = NULL;
  const ls_train_conf_t *const c = v->conf;
  if ((c->predictions_topic[0] == '\0' && c->predictions_out[0] == '\0') || c->predictions == 0)
    return LS_OK;
  predict_t *const pr = calloc(1, sizeof *pr);
  LS_RETURN_IF(pr == NULL, LS_ERR_NOMEM, "no memory for the forecasts");
  pr->v = v, pr->p = p, pr->fig = fig;
  pr->kinds = c->predictions;
  pr->T = p->T, pr->F = p->F, pr->I = p->I, pr->O = p->O;
  pr->H = p->H, pr->OH = p->OH, pr->NQ = p->Q, pr->W = p->W;
  pr->B = ls_engine_get_conf(v->eng)->max_batch;
  pr->eng = v->eng;
  /* Records are served as they are read only live, and only for next forecasts. */
  pr->live = !c->until && (pr->kinds & PREDICT_NEXT) && v->ing != NULL;
  size_t const B = (size_t)pr->B;
  pr->b_slot = malloc(2 * B * sizeof *pr->b_slot);
  pr->b_x = malloc(B * (size_t)pr->I * sizeof *pr->b_x);
  pr->b_pred = malloc(B * (size_t)pr->W * sizeof *pr->b_pred);
  pr->value = malloc((size_t)pr->W * sizeof *pr->value);
  pr->qv = malloc((size_t)pr->W * sizeof *pr->qv);
  pr->b_base = malloc(B * (size_t)pr->O * sizeof *pr->b_base);
  pr->b_scale = malloc(B * (size_t)pr->O * sizeof *pr->b_scale);
  pr->b_lin = malloc(B * (size_t)pr->OH * sizeof *pr->b_lin); /* h-major, every horizon's */
  pr->b_beta = malloc(B * (size_t)pr->OH * sizeof *pr->b_beta);
  ls_err_t err = pr->b_slot && pr->b_x && pr->b_pred && pr->b_base && pr->b_scale && pr->b_lin &&
                         pr->b_beta && pr->value && pr->qv
                     ? LS_OK
                     : ls_error_set(LS_ERR_NOMEM, "no memory for a serving batch of %zu", B);
  if (err == LS_OK)
    err = predict_thread_start(pr, serve_read); /* live on the CPU: pr->eng its own */
  if (err == LS_OK && (pr->kinds & PREDICT_NEXT))
    err = ls_state_table_new(pr->eng, 1024, &pr->serve);
  if (err == LS_OK) err = predict_out_open(pr);
  if (err == LS_OK) err = ls_series_table_on_evict(v->series, on_evict, pr);
  if (err != LS_OK) {
    predict_free(pr);
    return err;
  }
  *out = pr;
  return LS_OK;
}

void predict_free(predict_t *pr) {
  if (pr == NULL) return;
  predict_thread_stop(pr);
  predict_out_close(pr);
  for (size_t i = 0; i < pr->cap_ps; i++) {
    pseries_t *const s = &pr->ps[i];
    free(s->norm), free(s->model), free(s->off), free(s->time), free(s->x);
  }
  (void)ls_series_table_on_evict(pr->v->series, NULL, NULL);
  free(pr->ps), free(pr->slot_of), free(pr->id_of), free(pr->state_row), free(pr->dirty);
  free(pr->b_slot), free(pr->b_x), free(pr->b_pred), free(pr->b_base), free(pr->b_scale);
  free(pr->b_lin), free(pr->b_beta), free(pr->value), free(pr->qv);
  free(pr->later), free(pr->later_x), free(pr->later_key);
  ls_state_table_destroy(pr->serve);
  if (pr->eng != pr->v->eng) ls_engine_destroy(pr->eng); /* after its table */
  free(pr);
}
