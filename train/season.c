/*
 * Seasons (train/season.h): found, their profiles; the linear path is
 * season_path.c's.
 *
 * A series' state, per target, in ls_series_stats_t.model (doubles):
 *   [0]        its season P (0: none)
 *   [1]        rows the linear path learned
 *   [2, 7)     the mixing's sums of a a, a p, p p, a y, p y (a = w . z the
 *              linear path's forecast, p the LSTM's, y the target),
 *              forgotten over MIX_WINDOW rows
 *   [7], [8]   the mixing weights alpha, beta: the forecast is alpha a +
 *              beta p
 *   [9]        1 once the last record's features are in z_last
 *   [10]       the change scale they were made with
 *   [11, 11+K) w, the linear path's weights           (with the linear path)
 *              (features: the recent changes, the level, season slot 0's
 *              NF (five; six with --season-levels), 1, then slot 1's NF:
 *              the last while slot 1 has no season, its rows of A and b
 *              zero and its weights 0)
 *   then       z_last [K], A [K (K + 1) / 2], b [K]: the last record's
 *              features and the forgotten sums, of the symmetric A its upper
 *              triangle row by row (season_tri_at)     (with the linear path;
 *              A whole, K x K, in snapshots written before 2026-11-28's
 *              eighth session: season_pack_full)
 *   then       per horizon h = 2..H (--horizon-linear): its mixing's sums of
 *              a a, a p, p p, a y, p y, its alpha and beta and the rows it
 *              learned (HMIX doubles each; a the linear path's iterated
 *              forecast, p the LSTM's, y the change over h records)
 *   then       with --mix-profile (and season levels): the third mixing
 *              weight's sums of a l, p l, l l, l y (l the first season's
 *              level profile's forecast of the change, its feature in z),
 *              then gamma: the one-step forecast is alpha a + beta p +
 *              gamma l (5 doubles)
 *   then       floats, two to a double: the ring of its last R raw values
 *              (record u at u % R); with --season auto, the
 *              autocorrelation sums of its changes at lags 0..season_max;
 *              per season slot its profile (season_max floats: the
 *              change at each phase, averaged over about SEASON_AVG seasons)
 *              and, with --season-levels, its level profile (season_max
 *              floats: the value at each phase less the mean of the season
 *              it ends, averaged over about SEASON_AVG seasons)
 *   [per - 1]  with --season auto and --auto-seasons 2: the second season
 *              found (0: none), a multiple of the first; with one season
 *              found the layout is the one before the second (issue 24)
 */
#include "season.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "season_internal.h"

/* Records the autocorrelation sums reach back. */
#define ACF_WINDOW 2048.0
/* The shortest season looked for (shorter lags are the changes'
 * short-range correlation, which the recent changes carry). */
#define SEASON_MIN 4
/* Seasons a seasonal profile averages over (about). */
#define SEASON_AVG 16.0
/* A second season found is a multiple of the first whose autocorrelation
 * stands this much (of the variance) over the first's and over the
 * multiples beside it (a week beside a day: 336 over 48, 288 and 384). */
#define SECOND_MARGIN 0.05

ls_err_t season_parse(const char *text, int season_max, int *slots, int *periods) {
  memset(periods, 0, SEASON_SLOTS_MAX * sizeof *periods);
  *slots = 0;
  if (!strcmp(text, "none")) return LS_OK;
  if (!strcmp(text, "auto")) {
    *slots = 1;
    return LS_OK;
  }
  const char *s = text;
  while (*s) {
    char *end = NULL;
    long const p = strtol(s, &end, 10);
    LS_RETURN_IF(end == s || (*end != ',' && *end != '\0') || p < 2 || p > season_max ||
                     *slots == SEASON_SLOTS_MAX,
                 LS_ERR_INVALID_ARG,
                 "season '%s': auto, none, or up to %d periods in [2, season_max %d] such as 24 "
                 "or 24,168",
                 text, SEASON_SLOTS_MAX, season_max);
    periods[(*slots)++] = (int)p;
    s = *end ? end + 1 : end;
    LS_RETURN_IF(*end == ',' && *s == '\0', LS_ERR_INVALID_ARG,
                 "season '%s' ends with a comma: give its periods such as 24 or 24,168", text);
  }
  LS_RETURN_IF(*slots == 0, LS_ERR_INVALID_ARG, "season '%s' names no period", text);
  return LS_OK;
}

/* Both need the normalised change target (their units). */
static int season_units(const ls_train_conf_t *c) {
  return c->normalize == 0 && c->target == 0;
}

int season_linear(const ls_train_conf_t *c) {
  return season_units(c) && c->linear;
}

/* Gives s its scratch and hands it to *out, or frees it. */
static ls_err_t with_scratch(season_t *s, season_t **out) {
  size_t const K = (size_t)(s->K > 0 ? s->K : 1);
  s->z2 = malloc(K * sizeof *s->z2);
  s->fc = malloc((size_t)s->H * sizeof *s->fc);
  s->recip = s->autos ? malloc((size_t)ACF_WINDOW * sizeof *s->recip) : NULL;
  size_t const blocks = (size_t)SEASON_GROUP * (size_t)s->O; /* a group's targets */
  s->zs = malloc(blocks * K * sizeof *s->zs);
  s->sums = malloc(blocks * SEASON_SLOTS_MAX * sizeof *s->sums);
  s->pend = malloc(blocks * sizeof *s->pend);
  s->pend_n = malloc(blocks * sizeof *s->pend_n);
  s->npend = 0;
  size_t const lanes = ((K * K + 2 * K) * SOLVE_LANES * sizeof(double) + 63) / 64 * 64;
  s->lanes = aligned_alloc(64, lanes); /* whole vectors of SOLVE_LANES doubles */
  for (int q = 0; s->recip != NULL && q < (int)ACF_WINDOW; q++) /* ages down from ACF_WINDOW */
    s->recip[q] = 1.0 / (ACF_WINDOW - (double)q);
  if (s->z2 == NULL || s->fc == NULL || (s->autos && s->recip == NULL) || s->zs == NULL ||
      s->sums == NULL || s->lanes == NULL || s->pend == NULL || s->pend_n == NULL) {
    season_free(s);
    return ls_error_set(LS_ERR_NOMEM, "no memory for the linear path");
  }
  *out = s;
  return LS_OK;
}

ls_err_t season_new(const ls_train_conf_t *c, int O, season_t **out) {
  *out = NULL;
  int slots = 0, periods[SEASON_SLOTS_MAX];
  LS_FORWARD_IF_ERROR(season_parse(c->season, c->season_max, &slots, periods));
  int const on = season_units(c);
  int const linear = season_linear(c);
  slots = on ? slots : 0;
  if (!linear && slots == 0) return LS_OK;
  season_t *const s = calloc(1, sizeof *s);
  LS_RETURN_IF(s == NULL, LS_ERR_NOMEM, "no memory for the seasons");
  s->O = O, s->slots = slots, s->linear = linear;
  memcpy(s->periods, periods, sizeof s->periods);
  s->autos = slots == 1 && periods[0] == 0;
  if (s->autos && on) slots = s->slots = c->auto_seasons;
  s->second = s->autos && slots == 2;
  /* A second season found feeds the linear path only: the model's inputs,
   * and so its initial draws, stay those of one season (with the week's
   * lags as inputs too, taylor's seeds spread 18% against 10%). */
  s->in_slots = s->second ? 1 : slots;
  s->pmax = 0;
  for (int i = 0; i < slots; i++)
    s->pmax = periods[i] > s->pmax ? periods[i] : s->pmax;
  if (s->autos) s->pmax = c->season_max;
  s->levels = linear && c->season_levels;
  s->NF = s->levels ? 6 : 5;
  s->blocks = linear ? c->linear_blocks : 0;
  s->wait = c->linear_wait;
  s->K = linear ? RECENT + 1 + s->blocks + s->NF * slots + 1 : 0;
  s->R = 2 * s->pmax + 1 > RECENT + 1 ? 2 * s->pmax + 1 : RECENT + 1;
  if (s->R < RECENT << s->blocks) s->R = RECENT << s->blocks; /* the oldest block's records */
  s->acf_n = s->autos ? s->pmax + 1 : 0;
  s->H = linear && c->horizon_linear && c->horizon > 1 ? c->horizon : 1;
  s->hprior = (double)c->horizon_prior;
  s->hx = HEAD + (linear ? 3 * (size_t)s->K + season_tri(s->K) : 0);
  s->mx = s->hx + HMIX * (size_t)(s->H - 1);
  s->mixp = s->levels && c->mix_profile && slots > 0;
  s->mix_all = c->mix_profile_rows == 0;
  s->lz = RECENT + 1 + s->blocks + 5; /* features_of: recent, level, blocks, then v[5] */
  s->head = s->mx + (s->mixp ? 5 : 0);
  s->prof_n = s->pmax; /* per slot */
  s->slot_n = (size_t)s->prof_n * (s->levels ? 2 : 1);
  s->per = s->head + ((size_t)s->R + (size_t)s->acf_n + (size_t)slots * s->slot_n + 1) / 2 +
           s->second; /* the second season found */
  s->clip = 10.0;     /* ls_norm_conf_init's */
  return with_scratch(s, out);
}

ls_err_t season_clone(const season_t *s, season_t **out) {
  *out = NULL;
  season_t *const c = malloc(sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the seasons");
  *c = *s;
  c->z2 = c->fc = c->recip = c->zs = c->sums = c->lanes = NULL;
  c->pend = NULL, c->pend_n = NULL;
  return with_scratch(c, out);
}

void season_free(season_t *s) {
  if (s == NULL) return;
  free(s->z2), free(s->fc), free(s->recip);
  free(s->zs), free(s->sums), free(s->lanes);
  free(s->pend), free(s->pend_n);
  free(s);
}

size_t season_width(const season_t *s) {
  return s != NULL ? s->per * (size_t)s->O : 0;
}
size_t season_full_extra(const season_t *s) {
  return s != NULL && s->linear ? (size_t)s->O * (size_t)s->K * (size_t)(s->K - 1) / 2 : 0;
}
void season_pack_full(const season_t *s, const double *old, double *out) {
  int const K = s->K;
  size_t const at = HEAD + 2 * (size_t)K, tri = season_tri(K);
  size_t const was = s->per + (size_t)K * (size_t)(K - 1) / 2; /* an old block's doubles */
  for (int j = 0; j < s->O; j++) {
    const double *const o = old + (size_t)j * was;
    double *const m = out + (size_t)j * s->per;
    memcpy(m, o, at * sizeof *m);
    for (int u = 0; u < K; u++)
      for (int v = u; v < K; v++)
        m[at + season_tri_at(K, u, v)] = o[at + (size_t)u * K + v];
    memcpy(m + at + tri, o + at + (size_t)K * K, (s->per - at - tri) * sizeof *m);
  }
}
int season_inputs(const season_t *s) {
  return s != NULL ? 2 * s->in_slots * s->O : 0;
}
int season_features(const season_t *s) {
  return s != NULL ? s->K : 0;
}

/* ------------------------------------------------------------------------ */
/* Seasons                                                                   */

/* Slot 1's season (second) and the linear path's sums and weights of its
 * features set to P (0: none): what they learned of another season goes. */
static void set_second(const season_t *s, double *m, int P) {
  m[s->per - 1] = P;
  float *const prof = season_ring(s, m) + s->R + s->acf_n + s->slot_n;
  memset(prof, 0, s->slot_n * sizeof *prof);
  if (!s->linear) return;
  int const K = s->K, from = K - s->NF; /* slot 1's features come last */
  double *const w = m + HEAD, *const zl = w + K, *const A = zl + K, *const b = A + season_tri(K);
  for (int u = 0; u < K; u++)
    for (int v = u < from ? from : u; v < K; v++)
      A[season_tri_at(K, u, v)] = 0.0;
  for (int u = from; u < K; u++)
    w[u] = zl[u] = b[u] = 0.0;
}

/* The first season from the autocorrelation sums acf (lags up to top; bar
 * the least autocorrelation a season needs): the shortest local maximum
 * within 85% of the highest; the season in place changes only for a
 * clearly better one, or for a shorter one it is a multiple of (a
 * harmonic). */
static void find_first(const season_t *s, double *m, float *acf, double bar, int top) {
  /* The highest autocorrelation over the lags: the highest sum over
   * acf[0] (> 0; a correctly rounded division keeps the order). */
  double best = -1.0;
  if (top > SEASON_MIN) {
    float high = acf[SEASON_MIN];
    for (int k = SEASON_MIN + 1; k < top; k++)
      high = acf[k] > high ? acf[k] : high;
    best = fmax(best, high / acf[0]);
  }
  if (best < bar) return;
  int pick = 0;
  for (int k = SEASON_MIN; k < top && pick == 0; k++)
    if (acf[k] >= acf[k - 1] && acf[k] >= acf[k + 1] && acf[k] / acf[0] >= 0.85 * best) pick = k;
  int const now = (int)m[0];
  if (pick == 0 || pick == now) return;
  int const rest = now > 0 ? now % pick : 0;
  int const harmonic = pick < now && (rest <= 1 || pick - rest <= 1);
  if (now == 0 || acf[pick] > acf[now] + 0.1f * acf[0] ||
      (harmonic && acf[pick] >= 0.85f * acf[now])) {
    m[0] = pick; /* a new season: its profiles start anew */
    memset(acf + s->acf_n, 0, s->slot_n * sizeof *acf);
  }
}

/* The second season, after the first (P): the multiple of P (up to top)
 * with the highest autocorrelation, if that is above the bar and stands
 * SECOND_MARGIN over P's and over the multiples beside it (the next one
 * seen, or beyond season_max: not one at the edge of the lags seen yet): a
 * cycle of several of the first's, as a week of days, where the series
 * repeats itself more closely than one season back. A mere multiple of a
 * single season correlates no better than the season itself, so a series
 * of one season keeps one. The second in place changes only for a clearly
 * better one, and goes when the first changes to a season it is no
 * multiple of. */
static void find_second(const season_t *s, double *m, const float *acf, double bar, int top) {
  int const P = (int)m[0], cur = (int)m[s->per - 1];
  int const keep = cur > 0 && P > 0 && cur % P == 0 && cur > P ? cur : 0;
  int pick = 0;
  for (int k = 2 * P; P > 0 && k <= top; k += P)
    if (pick == 0 || acf[k] > acf[pick]) pick = k;
  double const e = SECOND_MARGIN * (double)acf[0];
  int const clear = pick > 0 && acf[pick] / acf[0] >= bar && acf[pick] >= acf[P] + e &&
                    acf[pick] >= acf[pick - P] + e &&
                    (pick + P <= top ? acf[pick] >= acf[pick + P] + e : pick + P > s->pmax);
  int want = keep;
  if (clear && pick != keep && (keep == 0 || acf[pick] > acf[keep] + 0.1f * acf[0])) want = pick;
  if (want != cur) set_second(s, m, want);
}

/* Lags k0 .. k1 - 1, whose records' values are at top[-(k - k0)] and
 * their predecessors' one below, in memory (no wrap): vectors; lag k's
 * sum takes record t's change d times record t - k's, weighted 1 / (t - k)
 * (from the table recip) while that is above 1 / ACF_WINDOW (these sums
 * were a tenth of a training step's cycles on a topic of several features
 * when a lag at a time). */
SEASON_CLONES static void acf_lags(float *restrict acf, const float *restrict top, int k0, int k1,
                                   double d, int64_t t, const double *restrict recip) {
  /* Ages t - k at least ACF_WINDOW (weight 1 / ACF_WINDOW) up to lag kc. */
  int64_t const last_old = t - (int64_t)ACF_WINDOW;
  int const kc = last_old < k0 ? k0 : last_old + 1 < k1 ? (int)(last_old + 1) : k1;
  double const wo = 1.0 / ACF_WINDOW;
  for (int k = k0; k < kc; k++) {
    double const dk = (double)top[k0 - k] - (double)top[k0 - k - 1];
    acf[k] += (float)(wo * (d * dk - (double)acf[k]));
  }
  if (kc == k1) return;
  /* recip[q] = 1 / (ACF_WINDOW - q): lag k's at q = ACF_WINDOW - t + k */
  int64_t const q0 = (int64_t)ACF_WINDOW - t; /* q0 + k >= 1 from kc on */
  for (int k = kc; k < k1; k++) {
    double const dk = (double)top[k0 - k] - (double)top[k0 - k - 1];
    acf[k] += (float)(recip[q0 + k] * (d * dk - (double)acf[k]));
  }
}

/* The autocorrelation sums after record t (its change d = x[t] - x[t-1]),
 * and the seasons they point to, over lags seen in three seasons at least,
 * above a bar that falls with the records seen. */
static void find_season(const season_t *s, double *m, const float *ring, int64_t t) {
  if (t < 1) return;
  float *const acf = (float *)(void *)(m + s->head) + s->R;
  int const R = s->R;
  int const i = (int)(t % R);
  double const d = (double)ring[i] - (double)ring[i == 0 ? R - 1 : i - 1];
  int const lags = t < (int64_t)s->acf_n ? (int)t : s->acf_n; /* t - k >= 1 */
  /* Lags 0 .. i - 1 read ring slots i, i - 1, .. 0 without wrapping; lag
   * i reads slots 0 and R - 1; the lags after it slots R - 1 down. */
  int const near = lags < i ? lags : i;
  acf_lags(acf, ring + i, 0, near, d, t, s->recip);
  if (lags > i) {
    float const wrap[2] = {ring[R - 1], ring[0]}; /* lag i's two, side by side */
    acf_lags(acf, wrap + 1, i, i + 1, d, t, s->recip);
    acf_lags(acf, ring + R - 1, i + 1, lags, d, t, s->recip);
  }
  if (!(acf[0] > 0.0f)) return;
  double const bar = 0.25 + 2.0 / sqrt(fmin((double)t, ACF_WINDOW));
  int const top = (int)(t / 3 < s->pmax ? t / 3 : s->pmax); /* three seasons seen */
  find_first(s, m, acf, bar, top);
  if (s->second) find_second(s, m, acf, bar, top);
}

/* The profile's step for record u's change, g its weight (n the seasons
 * averaged: 1 / n over the first SEASON_AVG). */
static void profile_add(const season_t *s, float *prof, const float *ring, int P, int64_t u,
                        double g) {
  double const d = (double)ring[u % s->R] - (double)ring[(u - 1) % s->R];
  float *const e = &prof[u % P];
  *e += (float)(g * (d - (double)*e));
}

/* The level profile's step for record u (u >= P - 1: the P records that
 * end at u in the ring), g its weight: at u's phase, u's value less the
 * mean of those P records. Returns their sum. */
static double levels_add(const season_t *s, float *lev, const float *ring, int P, int64_t u,
                         double g) {
  double sum = 0.0;
  for (int64_t v = u - P + 1; v <= u; v++)
    sum += (double)ring[v % s->R];
  double const mean = sum / (double)P;
  float *const e = &lev[u % P];
  *e += (float)(g * ((double)ring[u % s->R] - mean - (double)*e));
  return sum;
}

/* Slot i's profiles of a season P just found (with --season-levels), from
 * the records before t the ring still holds, as if P had been the season
 * since the first of them: a season found at a young series' 40th record
 * then starts from its three seasons seen, not from zero. */
static void backfill(const season_t *s, double *m, const float *ring, int i, int P, int64_t t) {
  float *const prof = season_profile_of(s, m, i), *const lev = prof + s->prof_n;
  int64_t const u0 = t - s->R + 1 > 1 ? t - s->R + 1 : 1; /* u and u - 1 in the ring */
  for (int64_t u = u0; u < t; u++)
    profile_add(s, prof, ring, P, u, fmax(1.0 / (double)((u - u0) / P + 1), 1.0 / SEASON_AVG));
  int64_t const v0 = t - s->R + P > P - 1 ? t - s->R + P : P - 1; /* u's P records in the ring */
  for (int64_t u = v0; u < t; u++)
    levels_add(s, lev, ring, P, u, fmax(1.0 / (double)((u - v0) / P + 1), 1.0 / SEASON_AVG));
}

/* The seasons found after record t; a season new in a slot fills its
 * profiles from the ring (with --season-levels). */
static void seasons_after(const season_t *s, double *m, const float *ring, int64_t t) {
  int const was0 = (int)m[0], was1 = s->second ? (int)m[s->per - 1] : 0;
  find_season(s, m, ring, t);
  int const now0 = (int)m[0], now1 = s->second ? (int)m[s->per - 1] : 0;
  if (s->levels && now0 > 0 && now0 != was0) backfill(s, m, ring, 0, now0, t);
  if (s->levels && now1 > 0 && now1 != was1) backfill(s, m, ring, 1, now1, t);
}

/* Slot i's profiles of period P take record t: the change at its phase
 * (averaged over the seasons seen, then about SEASON_AVG) and, with
 * --season-levels once P records are there, its level. */
static double slot_update(const season_t *s, double *m, const float *ring, int i, int P,
                          int64_t t) {
  float *const prof = season_profile_of(s, m, i);
  if (t >= 1)
    profile_add(s, prof, ring, P, t, fmax(1.0 / (double)((t - 1) / P + 1), 1.0 / SEASON_AVG));
  if (!s->levels || t + 1 < P) return NAN;
  return levels_add(s, prof + s->prof_n, ring, P, t,
                    fmax(1.0 / (double)((t - P + 1) / P + 1), 1.0 / SEASON_AVG));
}

void season_update(const season_t *s, double *m, int64_t t, double *sums) {
  const float *const ring = season_ring(s, m);
  if (s->autos) seasons_after(s, m, ring, t);
  for (int i = 0; i < s->slots; i++) {
    int const P = season_period_of(s, m, i);
    sums[i] = P > 0 ? slot_update(s, m, ring, i, P, t) : NAN;
  }
}

double season_naive(const season_t *s, const double *model, int j, int64_t t, int h) {
  int const P = season_period(s, model, j, 0);
  if (P <= 0 || h < 1) return NAN;
  int64_t const k = ((int64_t)h + P - 1) / P;
  const double *const m = model + (size_t)j * s->per;
  return season_value_at(s, (const float *)(const void *)(m + s->head), t, t + h - k * P);
}

int season_period(const season_t *s, const double *model, int j, int i) {
  if (s == NULL || i >= s->slots) return 0;
  const double *const m = model + (size_t)j * s->per;
  return !s->autos ? s->periods[i] : i == 0 ? (int)m[0] : (int)m[s->per - 1];
}

const float *season_profiles(const season_t *s, const double *model, int j, int i) {
  if (s == NULL || i >= s->slots || j < 0 || j >= s->O) return NULL;
  const float *const ring = (const float *)(const void *)(model + (size_t)j * s->per + s->head);
  return ring + s->R + s->acf_n + (size_t)i * s->slot_n;
}
