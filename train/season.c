/*
 * Seasons and the linear path (train/season.h).
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
 *   then       z_last [K], A [K, K], b [K]: the last record's features and
 *              the forgotten sums                      (with the linear path)
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

/* The recent changes the linear path sees. */
#define RECENT 12
/* Records the linear path's sums reach back (1/N forgotten per row). */
#define LIN_WINDOW 1024.0
/* Ridge on the linear path's normal equations: one prior row per weight,
 * at zero (the forecast starts at the last value). */
#define RIDGE 1.0
/* Records the autocorrelation sums reach back. */
#define ACF_WINDOW 2048.0
/* Rows the mixing's sums reach back. */
#define MIX_WINDOW 1024.0
/* Doubles of a target block before w. */
#define HEAD 11
/* Records of a series before its linear path learns: the normaliser's
 * change scale, the rows' unit, is then within about 12% (a few first
 * records scaled by a scale of one or two changes are no rows to keep). */
#define WARM 32
/* Rows the linear path learns before its block features join (a short
 * series' least squares stays small: --linear-blocks). */
#define BLOCKS_AFTER 512
/* Rows alpha's prior at 1 is worth. */
#define MIX_PRIOR 32.0
/* The shortest season looked for (shorter lags are the changes'
 * short-range correlation, which the recent changes carry). */
#define SEASON_MIN 4
/* Seasons a seasonal profile averages over (about). */
#define SEASON_AVG 16.0
/* A second season found is a multiple of the first whose autocorrelation
 * stands this much (of the variance) over the first's and over the
 * multiples beside it (a week beside a day: 336 over 48, 288 and 384). */
#define SECOND_MARGIN 0.05

struct season_s {
  int O, slots, pmax, linear, K;
  int levels;                    /* --season-levels: the level profile, the profiles filled */
  int blocks;                    /* --linear-blocks: means of older records, lags RECENT 2^q.. */
  int wait;                      /* --linear-wait: rows per weight before the path forecasts */
  int NF;                        /* the linear path's features per season slot: 5, 6 with levels */
  int periods[SEASON_SLOTS_MAX]; /* given, or 0: found */
  int autos;                     /* find the seasons (slot 0; slot 1 too with two slots) */
  int R, acf_n;                  /* ring length; autocorrelation lags (0 without auto) */
  int prof_n;                    /* floats of a slot's seasonal profile */
  size_t slot_n;                 /* floats per slot: its profile (and level profile) */
  int second;                    /* slot 1 found (--season auto, --auto-seasons 2) */
  int in_slots;                  /* slots whose lags are model inputs */
  size_t head, per;              /* doubles before the floats; per target */
  double clip;                   /* the normaliser's clamp */
  double *A, *y, *z;             /* [K, K], [K], [K] scratch */
};

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
  s->A = malloc((size_t)(s->K > 0 ? s->K * s->K : 1) * sizeof *s->A);
  s->y = malloc((size_t)(s->K > 0 ? s->K : 1) * sizeof *s->y);
  s->z = malloc((size_t)(s->K > 0 ? s->K : 1) * sizeof *s->z);
  if (s->A == NULL || s->y == NULL || s->z == NULL) {
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
  s->head = HEAD + (linear ? (size_t)s->K * (size_t)(s->K + 3) : 0);
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
  c->A = c->y = c->z = NULL;
  return with_scratch(c, out);
}

void season_free(season_t *s) {
  if (s == NULL) return;
  free(s->A), free(s->y), free(s->z);
  free(s);
}

size_t season_width(const season_t *s) {
  return s != NULL ? s->per * (size_t)s->O : 0;
}
int season_inputs(const season_t *s) {
  return s != NULL ? 2 * s->in_slots * s->O : 0;
}
int season_features(const season_t *s) {
  return s != NULL ? s->K : 0;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

/* AVX2 where the CPU has it (the same operations in the same order, no
 * fused multiply-adds: the results are the generic build's, bit for bit). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEASON_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SEASON_CLONES
#endif

static void learn_row(const season_t *s, double *m, int n, const double *z, double y);
static void solve_w(const season_t *s, double *m, int n);

static double clampv(const season_t *s, double v) {
  return v > s->clip ? s->clip : v < -s->clip ? -s->clip : v;
}

/* The ring and autocorrelation sums of target block m. */
static float *ring_of(const season_t *s, double *m) {
  return (float *)(void *)(m + s->head);
}

/* Record u of the series from the ring (t its newest); NAN when it is not
 * there (before the first, or out of the ring). */
static double value_at(const season_t *s, const float *ring, int64_t t, int64_t u) {
  if (u < 0 || u > t || t - u >= s->R) return NAN;
  return ring[u % s->R];
}

/* Slot 1's season (second) and the linear path's sums and weights of its
 * features set to P (0: none): what they learned of another season goes. */
static void set_second(const season_t *s, double *m, int P) {
  m[s->per - 1] = P;
  float *const prof = ring_of(s, m) + s->R + s->acf_n + s->slot_n;
  memset(prof, 0, s->slot_n * sizeof *prof);
  if (!s->linear) return;
  int const K = s->K, from = K - s->NF; /* slot 1's features come last */
  double *const w = m + HEAD, *const zl = w + K, *const A = zl + K, *const b = A + (size_t)K * K;
  for (int u = 0; u < K; u++)
    for (int v = u < from ? from : 0; v < K; v++)
      A[u * K + v] = A[v * K + u] = 0.0;
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

/* The autocorrelation sums after record t (its change d = x[t] - x[t-1]),
 * and the seasons they point to, over lags seen in three seasons at least,
 * above a bar that falls with the records seen. */
static void find_season(const season_t *s, double *m, const float *ring, int64_t t) {
  if (t < 1) return;
  float *const acf = (float *)(void *)(m + s->head) + s->R;
  int const R = s->R;
  /* Lag k pairs record t's change with record t - k's: ring slots i (t - k)
   * and its predecessor, walked down without a division per lag; each
   * lag's weight is 1 / (t - k) while that is above 1 / ACF_WINDOW. */
  int i = (int)(t % R);
  double const d = (double)ring[i] - (double)ring[i == 0 ? R - 1 : i - 1];
  int const lags = t < (int64_t)s->acf_n ? (int)t : s->acf_n; /* t - k >= 1 */
  for (int k = 0; k < lags; k++) {
    int const prev = i == 0 ? R - 1 : i - 1;
    double const dk = (double)ring[i] - (double)ring[prev];
    int64_t const age = t - k;
    double const w = age >= (int64_t)ACF_WINDOW ? 1.0 / ACF_WINDOW : 1.0 / (double)age;
    acf[k] += (float)(w * (d * dk - (double)acf[k]));
    i = prev;
  }
  if (!(acf[0] > 0.0f)) return;
  double const bar = 0.25 + 2.0 / sqrt(fmin((double)t, ACF_WINDOW));
  int const top = (int)(t / 3 < s->pmax ? t / 3 : s->pmax); /* three seasons seen */
  find_first(s, m, acf, bar, top);
  if (s->second) find_second(s, m, acf, bar, top);
}

/* Slot i's seasonal profile of period P after record t: per phase, the
 * changes at that phase, exponentially averaged over the last few seasons
 * (a running mean over the first SEASON_AVG); returns the profile's
 * change for record t + 1 (NAN before a season was seen). */
static float *profile_of(const season_t *s, double *m, int i) {
  return ring_of(s, m) + s->R + s->acf_n + (size_t)i * s->slot_n;
}

/* The profile's step for record u's change, g its weight (n the seasons
 * averaged: 1 / n over the first SEASON_AVG). */
static void profile_add(const season_t *s, float *prof, const float *ring, int P, int64_t u,
                        double g) {
  double const d = (double)ring[u % s->R] - (double)ring[(u - 1) % s->R];
  float *const e = &prof[u % P];
  *e += (float)(g * (d - (double)*e));
}

static double profile(const season_t *s, double *m, const float *ring, int i, int P, int64_t t) {
  float *const prof = profile_of(s, m, i);
  if (t >= 1)
    profile_add(s, prof, ring, P, t, fmax(1.0 / (double)((t - 1) / P + 1), 1.0 / SEASON_AVG));
  return t + 1 > P ? (double)prof[(t + 1) % P] : NAN;
}

/* The level profile's step for record u (u >= P - 1: the P records that
 * end at u in the ring), g its weight: at u's phase, u's value less the
 * mean of those P records. Returns that mean. */
static double levels_add(const season_t *s, float *lev, const float *ring, int P, int64_t u,
                         double g) {
  double sum = 0.0;
  for (int64_t v = u - P + 1; v <= u; v++)
    sum += (double)ring[v % s->R];
  double const mean = sum / (double)P;
  float *const e = &lev[u % P];
  *e += (float)(g * ((double)ring[u % s->R] - mean - (double)*e));
  return mean;
}

/* Slot i's level profile of period P after record t: returns its forecast
 * of record t + 1 (the mean of the last P records plus the profile at t +
 * 1's phase), NAN before that phase was seen once. */
static double level_forecast(const season_t *s, double *m, const float *ring, int i, int P,
                             int64_t t) {
  if (t + 1 < P) return NAN;
  float *const lev = profile_of(s, m, i) + s->prof_n;
  double const mean =
      levels_add(s, lev, ring, P, t, fmax(1.0 / (double)((t - P + 1) / P + 1), 1.0 / SEASON_AVG));
  return t >= 2 * P - 2 ? mean + (double)lev[(t + 1) % P] : NAN;
}

/* Slot i's profiles of a season P just found (with --season-levels), from
 * the records before t the ring still holds, as if P had been the season
 * since the first of them: a season found at a young series' 40th record
 * then starts from its three seasons seen, not from zero. */
static void backfill(const season_t *s, double *m, const float *ring, int i, int P, int64_t t) {
  float *const prof = profile_of(s, m, i), *const lev = prof + s->prof_n;
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

/* The linear path's first features of record t (sc its change scale,
 * level its normalised level) into z: the last RECENT changes, the level
 * and per block q the mean of the RECENT 2^q records before lag RECENT
 * 2^q, less x[t] (0 until the path learned BLOCKS_AFTER rows); returns
 * their count. */
static int recent_features(const season_t *s, const double *m, const float *ring, int64_t t,
                           double sc, float level, double *z) {
  int at = 0;
  double const now = ring[t % s->R];
  for (int k = 0; k < RECENT; k++) {
    double const a = value_at(s, ring, t, t - k), b = value_at(s, ring, t, t - k - 1);
    z[at++] = isnan(a) || isnan(b) ? 0.0 : clampv(s, (a - b) / sc);
  }
  z[at++] = level;
  for (int q = 0; q < s->blocks; q++) {
    int64_t const lo = (int64_t)RECENT << q, n = lo; /* lags lo .. 2 lo - 1 */
    double sum = 0.0;
    int all = t - (2 * lo - 1) >= 0 && m[1] >= BLOCKS_AFTER;
    for (int64_t u = t - (2 * lo - 1); all && u <= t - lo; u++)
      sum += ring[u % s->R];
    z[at++] = all ? clampv(s, (sum / (double)n - now) / sc) : 0.0;
  }
  return at;
}

void season_record(season_t *s, double *model, int64_t t, const float *x, const int *feat,
                   const double *ds, const double *ls, const float *level, float *in, double *lin,
                   double *beta, double *araw) {
  int const K = s->K, S = s->slots;
  for (int j = 0; j < s->O; j++) {
    double *const m = model + (size_t)j * s->per;
    float *const ring = ring_of(s, m);
    int const f = feat[j];
    ring[t % s->R] = x[f];
    if (s->autos) seasons_after(s, m, ring, t);
    double const sc = ds[f], now = x[f];
    double *const zz = s->z; /* scratch */
    int at = 0;
    if (s->linear) at = recent_features(s, m, ring, t, sc, level[f], zz);
    for (int i = 0; i < S; i++) {
      int const P = !s->autos ? s->periods[i] : i == 0 ? (int)m[0] : (int)m[s->per - 1];
      double v[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
      int one = 0, two = 0; /* the values one and two seasons back are there */
      if (P > 0) {
        double const a1 = value_at(s, ring, t, t + 1 - P), a0 = value_at(s, ring, t, t - P);
        double const b1 = value_at(s, ring, t, t + 1 - 2 * P), b0 = value_at(s, ring, t, t - 2 * P);
        double const e = profile(s, m, ring, i, P, t);
        one = !isnan(a1), two = !isnan(b1);
        v[0] = one ? clampv(s, (a1 - now) / sc) : 0.0;
        v[1] = two ? clampv(s, (b1 - now) / sc) : 0.0;
        v[2] = one && !isnan(a0) ? clampv(s, (a1 - a0) / sc) : 0.0;
        v[3] = two && !isnan(b0) ? clampv(s, (b1 - b0) / sc) : 0.0;
        v[4] = isnan(e) ? 0.0 : clampv(s, e / sc);
        if (s->levels) {
          double const l = level_forecast(s, m, ring, i, P, t);
          v[5] = isnan(l) ? 0.0 : clampv(s, (l - now) / sc);
        }
      }
      if (s->linear && i == 1 && s->second) zz[at++] = 1.0; /* slot 1's last */
      for (int q = 0; q < s->NF; q++)
        if (s->linear) zz[at++] = v[q];
      if (i >= s->in_slots) continue;
      /* The model's inputs: the values one and two seasons back, as levels. */
      double const lv = level[f], r = sc / ls[f];
      int const Si = s->in_slots;
      in[(j * Si + i) * 2 + 0] = one ? (float)clampv(s, lv + v[0] * r) : 0.0f;
      in[(j * Si + i) * 2 + 1] = two ? (float)clampv(s, lv + v[1] * r) : 0.0f;
    }
    if (!s->linear) {
      lin[j] = 0.0, beta[j] = 1.0;
      continue;
    }
    if (!s->second) zz[at++] = 1.0;
    /* The last record's features and this record's change: one more row
     * of the least squares, refitted now (without a second season's
     * features while there is none: they are 0). */
    int const n = s->second && m[s->per - 1] == 0.0 ? K - s->NF : K;
    double *const zl = m + HEAD + K;
    if (m[9] != 0.0 && t >= WARM) {
      double const prev = value_at(s, ring, t, t - 1);
      learn_row(s, m, n, zl, clampv(s, (now - prev) / m[10]));
      solve_w(s, m, n);
    }
    memcpy(zl, zz, (size_t)K * sizeof *zl);
    m[9] = 1.0, m[10] = sc;
    /* Until it has seen --linear-wait rows per weight, the linear path
     * forecasts no change (a least squares of fewer rows is mostly noise).
     * A second season's weights and the blocks' start at 0 and do not
     * count: they never hold back the rest. */
    double a = 0.0;
    int const young = s->wait * (K - s->NF * s->second - s->blocks);
    for (int k = 0; k < n && m[1] >= young; k++)
      a += m[HEAD + k] * zz[k];
    lin[j] = m[7] * a;
    beta[j] = m[8];
    if (araw != NULL) araw[j] = a;
  }
}

/* ------------------------------------------------------------------------ */
/* The linear path's least squares and the mixing                            */

/* One row (features z [K], target y) into block m's forgotten sums: its
 * first n features (the others are 0 and their sums stay 0). */
SEASON_CLONES static void learn_row(const season_t *s, double *m, int n, const double *z,
                                    double y) {
  int const K = s->K;
  double *const A = m + HEAD + 2 * (size_t)K, *const b = A + (size_t)K * K;
  double const keep = 1.0 - 1.0 / LIN_WINDOW;
  for (int u = 0; u < n; u++) {
    for (int v = 0; v < n; v++)
      A[u * K + v] = keep * A[u * K + v] + z[u] * z[v];
    b[u] = keep * b[u] + z[u] * y;
  }
  m[1] += 1.0;
}

/* Block m's first n weights from its sums: Cholesky of A + RIDGE I
 * (positive definite), then two triangular solves; kept as they were if
 * it is not. The others stay 0 (features that are 0 have weights 0, and
 * leaving them out changes no bit of the rest: a Cholesky's leading block
 * is the leading block's Cholesky). */
/* w = (A + RIDGE I)^-1 b by Cholesky, A = L L^T, L kept by columns (L
 * [q * K + p] = L_pq, p >= q). A column at a time: column q's entries
 * below the diagonal are independent of each other, so they are updated
 * together (vectors), each by the same terms in the same order (k = 0, 1,
 * ...) as an entry at a time would be; so is the forward substitution. A
 * refit per record: this was most of a training step's time on a topic of
 * several features (tests/bench/train_vs_engine.sh). */
SEASON_CLONES static void solve_w(const season_t *s, double *m, int n) {
  int const K = s->K;
  const double *const A = m + HEAD + 2 * (size_t)K, *const b = A + (size_t)K * K;
  double *const L = s->A, *const y = s->y, *const w = m + HEAD;
  for (int q = 0; q < n; q++) {
    double *restrict const col = L + (size_t)q * K;
    for (int p = q; p < n; p++)
      col[p] = A[p * K + q];
    col[q] += RIDGE;
    int k = 0;
    for (; k + 4 <= q; k += 4) { /* four columns a pass, each term in turn */
      const double *restrict const c0 = L + (size_t)k * K, *restrict const c1 = c0 + K;
      const double *restrict const c2 = c1 + K, *restrict const c3 = c2 + K;
      double const l0 = c0[q], l1 = c1[q], l2 = c2[q], l3 = c3[q];
      for (int p = q; p < n; p++)
        col[p] = col[p] - c0[p] * l0 - c1[p] * l1 - c2[p] * l2 - c3[p] * l3;
    }
    for (; k < q; k++) {
      const double *restrict const ck = L + (size_t)k * K;
      double const lqk = ck[q];
      for (int p = q; p < n; p++)
        col[p] -= ck[p] * lqk;
    }
    if (!(col[q] > 0.0)) return; /* not finite */
    double const lqq = sqrt(col[q]);
    col[q] = lqq;
    for (int p = q + 1; p < n; p++)
      col[p] = col[p] / lqq;
  }
  /* L y = b */
  for (int p = 0; p < n; p++)
    y[p] = b[p];
  for (int k = 0; k < n; k++) {
    const double *restrict const ck = L + (size_t)k * K;
    double const yk = y[k] / ck[k];
    y[k] = yk;
    for (int p = k + 1; p < n; p++)
      y[p] -= ck[p] * yk;
  }
  /* L^T w = y */
  for (int p = n - 1; p >= 0; p--) {
    const double *const cp = L + (size_t)p * K;
    double v = y[p];
    for (int k = p + 1; k < n; k++)
      v -= cp[k] * w[k];
    w[p] = v / cp[p];
  }
}

void season_learn(season_t *s, double *model, int j, double a, double y, double p) {
  if (!s->linear) return;
  double *const m = model + (size_t)j * s->per;
  double const g = fmax(1.0 / (m[1] + 1.0), 1.0 / MIX_WINDOW);
  double const v[5] = {a * a, a * p, p * p, a * y, p * y};
  for (int k = 0; k < 5; k++)
    m[2 + k] += g * (v[k] - m[2 + k]);
}

void season_mix(const season_t *s, const double *model, int j, double *alpha, double *beta) {
  const double *const m = model + (size_t)j * s->per;
  *alpha = s->linear ? m[7] : 0.0;
  *beta = s->linear ? m[8] : 1.0;
}

void season_solve(season_t *s, double *model, int j) {
  if (!s->linear) return;
  /* The mixing weights: least squares of y on (a, p), alpha pulled towards
   * 1 (the linear path is a least-squares fit itself) by a prior worth
   * MIX_PRIOR rows, each clamped to [0, 1]. */
  double *const m = model + (size_t)j * s->per;
  double const aa = m[2], ap = m[3], pp = m[4], ay = m[5], py = m[6];
  /* alpha's prior: 1, worth MIX_PRIOR rows of the sums (means over n). */
  double const n = fmin(fmax(m[1], 1.0), MIX_WINDOW), k = MIX_PRIOR / n * aa + 1e-12;
  double const e = 1e-3 * pp + 1e-12;
  double const det = (aa + k) * (pp + e) - ap * ap;
  if (!(det > 0.0)) return;
  m[7] = fmin(1.0, fmax(0.0, ((pp + e) * (ay + k) - ap * py) / det));
  m[8] = fmin(1.0, fmax(0.0, ((aa + k) * py - ap * (ay + k)) / det));
}

double season_naive(const season_t *s, const double *model, int j, int64_t t, int h) {
  int const P = season_period(s, model, j, 0);
  if (P <= 0 || h < 1) return NAN;
  int64_t const k = ((int64_t)h + P - 1) / P;
  const double *const m = model + (size_t)j * s->per;
  return value_at(s, (const float *)(const void *)(m + s->head), t, t + h - k * P);
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
