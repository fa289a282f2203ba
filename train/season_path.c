/*
 * The linear path (train/season.h): per series and target, its features
 * from the series' ring and its seasons' profiles (season.c), its online
 * least squares, the forecasts it iterates to the later horizons, and the
 * mixing with the LSTM's forecast. The state's layout is season.c's.
 */
#include <math.h>
#include <string.h>

#include "season.h"
#include "season_internal.h"

/* Records the linear path's sums reach back (1/N forgotten per row). */
#define LIN_WINDOW 1024.0
/* Rows the mixing's sums reach back. */
#define MIX_WINDOW 1024.0
/* Records of a series before its linear path learns: the normaliser's
 * change scale, the rows' unit, is then within about 12% (a few first
 * records scaled by a scale of one or two changes are no rows to keep). */
#define WARM 32
/* Rows the linear path learns before its block features join (a short
 * series' least squares stays small: --linear-blocks). */
#define BLOCKS_AFTER 512
/* Rows alpha's prior at 1 is worth. */
#define MIX_PRIOR 32.0

static void learn_row(const season_t *s, double *m, int n, const double *z, double y);

/* ------------------------------------------------------------------------ */
/* Features                                                                  */

/* Where a record's values come from: the ring up to record t, then the
 * linear path's own forecasts fc [n] of records t + 1 .. t + n; sums, per
 * season slot, the sum of the P values that end at the record asked for
 * (season_update's at t, moved along by iterate). */
typedef struct vals_s {
  const float *ring;
  int64_t t;
  const double *fc;
  int n;
  const double *sums;
} vals_t;

static double val(const season_t *s, const vals_t *v, int64_t u) {
  if (u <= v->t) return season_value_at(s, v->ring, v->t, u);
  return u - v->t <= v->n ? v->fc[u - v->t - 1] : NAN;
}

/* A slot's values one and two seasons back, as changes from the record
 * (the model's inputs: season_record). */
typedef struct lags_s {
  double one, two; /* in the change scale's units */
  int has_one, has_two;
} lags_t;

/* The linear path's features of record tt of target block m (values from
 * src; sc its change scale, level its normalised level) into z (with the
 * linear path): the last RECENT changes, the level, per block q the mean
 * of the RECENT 2^q records before lag RECENT 2^q less x[tt] (0 until the
 * path learned BLOCKS_AFTER rows), per season slot s1, s2, c1, c2, e (and
 * l: season.h), and 1; each slot's lags into lags (NULL: not wanted).
 * The profiles are read as they are (the record's own update is
 * season_update's). */
static void features_of(const season_t *s, const double *m, const vals_t *src, int64_t tt,
                        double sc, double level, double *z, lags_t *lags) {
  int at = 0;
  double const now = val(s, src, tt);
  if (s->linear) {
    for (int k = 0; k < RECENT; k++) {
      double const a = val(s, src, tt - k), b = val(s, src, tt - k - 1);
      z[at++] = isnan(a) || isnan(b) ? 0.0 : season_clamp(s, (a - b) / sc);
    }
    z[at++] = level;
    for (int q = 0; q < s->blocks; q++) {
      int64_t const lo = (int64_t)RECENT << q, n = lo; /* lags lo .. 2 lo - 1 */
      double sum = 0.0;
      int all = tt - (2 * lo - 1) >= 0 && m[1] >= BLOCKS_AFTER;
      for (int64_t u = tt - (2 * lo - 1); all && u <= tt - lo; u++)
        sum += val(s, src, u);
      z[at++] = all ? season_clamp(s, (sum / (double)n - now) / sc) : 0.0;
    }
  }
  for (int i = 0; i < s->slots; i++) {
    int const P = season_period_of(s, m, i);
    double v[6] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    lags_t g = {0.0, 0.0, 0, 0};
    if (P > 0) {
      double const a1 = val(s, src, tt + 1 - P), a0 = val(s, src, tt - P);
      double const b1 = val(s, src, tt + 1 - 2 * P), b0 = val(s, src, tt - 2 * P);
      const float *const prof = season_profile_of(s, m, i);
      double const e = tt + 1 > P ? (double)prof[(tt + 1) % P] : NAN;
      g.has_one = !isnan(a1), g.has_two = !isnan(b1);
      v[0] = g.has_one ? season_clamp(s, (a1 - now) / sc) : 0.0;
      v[1] = g.has_two ? season_clamp(s, (b1 - now) / sc) : 0.0;
      v[2] = g.has_one && !isnan(a0) ? season_clamp(s, (a1 - a0) / sc) : 0.0;
      v[3] = g.has_two && !isnan(b0) ? season_clamp(s, (b1 - b0) / sc) : 0.0;
      v[4] = isnan(e) ? 0.0 : season_clamp(s, e / sc);
      /* the mean of the last P, plus the level profile (once record t saw its phases) */
      if (s->levels && src->t >= 2 * P - 2) {
        double const l =
            src->sums[i] / (double)P + (double)prof[s->prof_n + (size_t)((tt + 1) % P)];
        v[5] = isnan(l) ? 0.0 : season_clamp(s, (l - now) / sc);
      }
      g.one = v[0], g.two = v[1];
    }
    if (lags != NULL) lags[i] = g;
    if (!s->linear) continue;
    if (i == 1 && s->second) z[at++] = 1.0; /* slot 1's last */
    for (int q = 0; q < s->NF; q++)
      z[at++] = v[q];
  }
  if (s->linear && !s->second) z[at++] = 1.0;
}

/* ------------------------------------------------------------------------ */
/* Records                                                                   */

/* Slot 0's level profile's forecast of the change (with --mix-profile):
 * its feature l in z (features_of's v[5]), the mean of the last P plus the
 * profile at the next phase less the record, in the change scale's units
 * (0 until the series has a season and held two of it). */
static double profile_forecast(const season_t *s, const double *z) {
  return s->mixp ? z[s->lz] : 0.0;
}

/* The linear path's forecast from features z (its first n weights): no
 * change until it has seen --linear-wait rows per weight (a least squares
 * of fewer rows is mostly noise; a second season's weights and the blocks'
 * start at 0 and do not count: they never hold back the rest). */
static double forecast(const season_t *s, const double *m, int n, const double *z) {
  int const young = s->wait * (s->K - s->NF * s->second - s->blocks);
  double a = 0.0;
  for (int k = 0; k < n && m[1] >= young; k++)
    a += m[HEAD + k] * z[k];
  return a;
}

/* Target j's forecasts of records t + 2 .. t + H (block m; a the one-step
 * forecast, sc the change scale, level and ls the normalised level and its
 * scale): the one-step regression run on its own forecasts, as an AR(p)
 * forecasts h steps ahead (the recent changes and the lags after t its
 * forecasts, the profiles as they are). Horizon h's column k = (h - 1) O +
 * j: lin the linear path's share alpha_h a_h, beta the LSTM's weight and
 * araw (unless NULL) a_h, the change over h records in sc's units. */
static void iterate(season_t *s, const double *m, const float *ring, int64_t t, int j, int n,
                    double a, double sc, double level, double ls, double *sums, double *lin,
                    double *beta, double *araw) {
  double *const fc = s->fc, *const z = s->z2;
  double const now = ring[t % s->R];
  fc[0] = now + sc * a;
  /* Each slot's sum of the last P values (sums: record t's), moved along
   * a record at a time: the level profile's forecast is O(1) a horizon. */
  int P[SEASON_SLOTS_MAX];
  for (int i = 0; i < s->slots; i++)
    P[i] = s->levels && !isnan(sums[i]) ? season_period_of(s, m, i) : 0;
  for (int h = 2; h <= s->H; h++) {
    vals_t const src = {ring, t, fc, h - 1, sums};
    int64_t const tt = t + h - 1;
    for (int i = 0; i < s->slots; i++)
      if (P[i] > 0) sums[i] += val(s, &src, tt) - val(s, &src, tt - P[i]);
    double const lv = season_clamp(s, level + (fc[h - 2] - now) / ls);
    features_of(s, m, &src, tt, sc, lv, z, NULL);
    fc[h - 1] = fc[h - 2] + sc * forecast(s, m, n, z);
    double const ah = (fc[h - 1] - now) / sc;
    const double *const mix = m + s->hx + HMIX * (size_t)(h - 2);
    size_t const k = (size_t)(h - 1) * (size_t)s->O + (size_t)j;
    lin[k] = mix[5] * ah, beta[k] = mix[6];
    if (araw != NULL) araw[k] = ah;
  }
}

/* The linear path's features in use in target block m: all K, less slot
 * 1's while it has no season (they are 0). */
static int in_use(const season_t *s, const double *m) {
  return s->second && m[s->per - 1] == 0.0 ? s->K - s->NF : s->K;
}

/* Target j's record t in scratch slot g, up to its refit: the ring, the
 * seasons and profiles, its features (into the slot's zs [j K]) and each
 * slot's sums (the slot's sums [j SEASON_SLOTS_MAX]), the model's inputs
 * in `in`, and, with the linear path, the last record's features and this
 * record's change as one more row of its least squares (without a second
 * season's features while there is none: they are 0). Returns whether the
 * row was learned (the weights are to be refitted). */
static int record_row(season_t *s, int g, double *m, int64_t t, int j, const float *x, int f,
                      double sc, double ls, double level, float *in) {
  int const K = s->K;
  float *const ring = season_ring(s, m);
  ring[t % s->R] = x[f];
  size_t const at = (size_t)g * (size_t)s->O + (size_t)j; /* the slot's target j */
  double *const sums = s->sums + at * SEASON_SLOTS_MAX;
  season_update(s, m, t, sums);
  double const now = x[f];
  double *const zz = s->zs + at * (size_t)(K > 0 ? K : 1);
  lags_t lags[SEASON_SLOTS_MAX];
  vals_t const src = {ring, t, NULL, 0, sums};
  features_of(s, m, &src, t, sc, level, zz, lags);
  /* The model's inputs: the values one and two seasons back, as levels. */
  for (int i = 0; i < s->in_slots; i++) {
    double const r = sc / ls;
    int const Si = s->in_slots;
    in[(j * Si + i) * 2 + 0] =
        lags[i].has_one ? (float)season_clamp(s, level + lags[i].one * r) : 0.0f;
    in[(j * Si + i) * 2 + 1] =
        lags[i].has_two ? (float)season_clamp(s, level + lags[i].two * r) : 0.0f;
  }
  if (!s->linear) return 0;
  double *const zl = m + HEAD + K;
  int const learned = m[9] != 0.0 && t >= WARM;
  if (learned) {
    double const prev = season_value_at(s, ring, t, t - 1);
    learn_row(s, m, in_use(s, m), zl, season_clamp(s, (now - prev) / m[10]));
  }
  memcpy(zl, zz, (size_t)K * sizeof *zl);
  m[9] = 1.0, m[10] = sc;
  return learned;
}

void season_record_rows(season_t *s, int g, double *model, int64_t t, const float *x,
                        const int *feat, const double *ds, const double *ls, const float *level,
                        float *in) {
  if (g < 0 || g >= SEASON_GROUP) return;
  if (s->npend > (SEASON_GROUP - 1) * s->O) season_refit(s); /* room for O more, the same bits */
  for (int j = 0; j < s->O; j++) {
    double *const m = model + (size_t)j * s->per;
    int const f = feat[j];
    if (!record_row(s, g, m, t, j, x, f, ds[f], ls[f], level[f], in)) continue;
    s->pend[s->npend] = m, s->pend_n[s->npend] = in_use(s, m);
    s->npend++;
  }
}

void season_refit(season_t *s) {
  /* Blocks with the same features in use together (at most two counts: a
   * second season found or not), in the order they came: each block's
   * bits are its own whatever lane it takes, so the grouping changes
   * nothing but the time. */
  double *ms[SOLVE_LANES];
  for (int i = 0; i < s->npend; i++) {
    if (s->pend[i] == NULL) continue;
    int const n = s->pend_n[i];
    int lanes = 0;
    for (int k = i; k < s->npend; k++) {
      if (s->pend[k] == NULL || s->pend_n[k] != n) continue;
      ms[lanes++] = s->pend[k], s->pend[k] = NULL;
      if (lanes == SOLVE_LANES) season_solve_w(s, ms, lanes, n), lanes = 0;
    }
    if (lanes > 0) season_solve_w(s, ms, lanes, n);
  }
  s->npend = 0;
}

void season_record_out(season_t *s, int g, double *model, int64_t t, const int *feat,
                       const double *ds, const double *ls, const float *level, double *lin,
                       double *beta, double *araw, double *lraw) {
  for (int j = 0; j < s->O; j++) {
    if (!s->linear) {
      lin[j] = 0.0, beta[j] = 1.0;
      continue;
    }
    double *const m = model + (size_t)j * s->per;
    size_t const at = (size_t)g * (size_t)s->O + (size_t)j;
    const double *const z = s->zs + at * (size_t)s->K;
    int const f = feat[j], n = in_use(s, m);
    double const a = forecast(s, m, n, z);
    double const l = profile_forecast(s, z);
    lin[j] = m[7] * a + (s->mixp ? m[s->mx + 4] * l : 0.0);
    if (lraw != NULL) lraw[j] = l;
    beta[j] = m[8];
    if (araw != NULL) araw[j] = a;
    if (s->H > 1)
      iterate(s, m, season_ring(s, m), t, j, n, a, ds[f], level[f], ls[f],
              s->sums + at * SEASON_SLOTS_MAX, lin, beta, araw);
  }
}

void season_record(season_t *s, double *model, int64_t t, const float *x, const int *feat,
                   const double *ds, const double *ls, const float *level, float *in, double *lin,
                   double *beta, double *araw, double *lraw) {
  /* The targets' rows first, then their refits, then their forecasts:
   * each target's block is its own, so the order across targets changes
   * nothing. */
  season_record_rows(s, 0, model, t, x, feat, ds, ls, level, in);
  season_refit(s);
  season_record_out(s, 0, model, t, feat, ds, ls, level, lin, beta, araw, lraw);
}

/* ------------------------------------------------------------------------ */
/* The linear path's least squares and the mixing                            */

/* One row (features z [K], target y) into block m's forgotten sums: its
 * first n features (the others are 0 and their sums stay 0). A is
 * symmetric: its upper triangle is kept (season_tri_at), each entry the
 * bits it had when both triangles were. */
SEASON_CLONES_AVX2 static void learn_row(const season_t *s, double *m, int n, const double *z,
                                         double y) {
  int const K = s->K;
  double *const A = m + HEAD + 2 * (size_t)K, *const b = A + season_tri(K);
  double const keep = 1.0 - 1.0 / LIN_WINDOW;
  for (int u = 0; u < n; u++) {
    double *const row = A + season_tri_at(K, u, u) - u; /* row[v], v >= u */
    for (int v = u; v < n; v++)
      row[v] = keep * row[v] + z[u] * z[v];
    b[u] = keep * b[u] + z[u] * y;
  }
  m[1] += 1.0;
}

/* One row of a mixing's sums (aa, ap, pp, ay, py), g its weight. */
static void forget_into(double *sums, const double *v, int n, double g) {
  for (int k = 0; k < n; k++)
    sums[k] += g * (v[k] - sums[k]);
}

static void mix_learn(double *sums, double g, double a, double y, double p) {
  double const v[5] = {a * a, a * p, p * p, a * y, p * y};
  forget_into(sums, v, 5, g);
}

/* A mixing's weights from its sums over rows (means): least squares of y
 * on (a, p), alpha pulled towards 1 (the linear path is a least-squares
 * fit itself) by a prior worth MIX_PRIOR rows and beta towards 0 by one
 * worth beta_rows, each clamped to [0, 1]; kept as they were when the
 * system is singular. */
static void mix_solve(const double *sums, double rows, double beta_rows, double *alpha,
                      double *beta) {
  double const aa = sums[0], ap = sums[1], pp = sums[2], ay = sums[3], py = sums[4];
  double const n = fmin(fmax(rows, 1.0), MIX_WINDOW), k = MIX_PRIOR / n * aa + 1e-12;
  double const e = (1e-3 + beta_rows / n) * pp + 1e-12;
  double const det = (aa + k) * (pp + e) - ap * ap;
  if (!(det > 0.0)) return;
  *alpha = fmin(1.0, fmax(0.0, ((pp + e) * (ay + k) - ap * py) / det));
  *beta = fmin(1.0, fmax(0.0, ((aa + k) * py - ap * (ay + k)) / det));
}

/* mix_solve with the level profile's forecast l as a third predictor
 * (--mix-profile; x its sums of a l, p l, l l, l y): least squares of y on
 * (a, p, l), alpha pulled towards 1 and gamma towards 0 by priors worth
 * MIX_PRIOR rows, each clamped to [0, 1]; kept as they were when the
 * system is singular. */
static void mix_solve3(const double *sums, const double *x, double rows, double *alpha,
                       double *beta, double *gamma) {
  double const aa = sums[0], ap = sums[1], pp = sums[2], ay = sums[3], py = sums[4];
  double const al = x[0], pl = x[1], ll = x[2], ly = x[3];
  double const n = fmin(fmax(rows, 1.0), MIX_WINDOW), k = MIX_PRIOR / n * aa + 1e-12;
  double const e = 1e-3 * pp + 1e-12, g = MIX_PRIOR / n * ll + 1e-3 * ll + 1e-12;
  /* M w = r, M symmetric 3 x 3, by its cofactors (Cramer's rule) */
  double const m00 = aa + k, m01 = ap, m02 = al, m11 = pp + e, m12 = pl, m22 = ll + g;
  double const r0 = ay + k, r1 = py, r2 = ly;
  double const c00 = m11 * m22 - m12 * m12, c01 = m02 * m12 - m01 * m22;
  double const c02 = m01 * m12 - m02 * m11, c11 = m00 * m22 - m02 * m02;
  double const c12 = m01 * m02 - m00 * m12, c22 = m00 * m11 - m01 * m01;
  double const det = m00 * c00 + m01 * c01 + m02 * c02;
  if (!(det > 0.0)) return;
  double const g3 = (c02 * r0 + c12 * r1 + c22 * r2) / det;
  if (g3 >= 0.0 && g3 <= 1.0) {
    *alpha = fmin(1.0, fmax(0.0, (c00 * r0 + c01 * r1 + c02 * r2) / det));
    *beta = fmin(1.0, fmax(0.0, (c01 * r0 + c11 * r1 + c12 * r2) / det));
    *gamma = g3;
    return;
  }
  /* gamma at its bound, alpha and beta refitted to what it leaves (a and l
   * are near collinear where both forecast well: clamping gamma alone
   * would keep the alpha fitted beside a negative gamma) */
  *gamma = g3 < 0.0 ? 0.0 : 1.0;
  double const left[5] = {aa, ap, pp, ay - *gamma * al, py - *gamma * pl};
  mix_solve(left, rows, 0.0, alpha, beta);
}

void season_learn(season_t *s, double *model, int j, int h, double a, double y, double p,
                  double l) {
  if (!s->linear || h < 1 || h > s->H) return;
  double *const m = model + (size_t)j * s->per;
  if (h == 1) {
    double const g = fmax(1.0 / (m[1] + 1.0), 1.0 / MIX_WINDOW);
    mix_learn(m + 2, g, a, y, p);
    /* The third weight's sums, forgotten alike, over the rows where the
     * linear path forecast (a is exactly 0 while it is young: forecast()).
     * a and l forecast the same change: rows where l stood alone taught
     * gamma the whole of it, which the linear path then forecast too, and
     * alpha a + gamma l overshot every swing of a season that grows
     * (UKgas: alpha 0.9 and gamma 0.4 from 32 such rows of 108, 7.7x
     * Holt-Winters' MSE; tests/bench/realdata/FINDINGS.md 19). Those rows
     * count for l as if it were 0 then, as a is: the sums stay one set
     * of rows' products. (--mix-profile-rows all: every row, as before.) */
    if (s->mixp) {
      double const w = a != 0.0 || s->mix_all ? l : 0.0;
      double const v[4] = {a * w, p * w, w * w, w * y};
      forget_into(m + s->mx, v, 4, g);
    }
    return;
  }
  double *const x = m + s->hx + HMIX * (size_t)(h - 2);
  mix_learn(x, fmax(1.0 / (x[7] + 1.0), 1.0 / MIX_WINDOW), a, y, p);
  x[7] += 1.0;
}

double season_profile_weight(const season_t *s, const double *model, int j) {
  if (s == NULL || !s->mixp) return 0.0;
  return model[(size_t)j * s->per + s->mx + 4];
}

int season_horizons(const season_t *s) {
  return s != NULL ? s->H : 0;
}

void season_solve(season_t *s, double *model, int j) {
  if (!s->linear) return;
  double *const m = model + (size_t)j * s->per;
  if (s->mixp)
    mix_solve3(m + 2, m + s->mx, m[1], &m[7], &m[8], &m[s->mx + 4]);
  else
    mix_solve(m + 2, m[1], 0.0, &m[7], &m[8]);
  for (int h = 2; h <= s->H; h++) {
    double *const x = m + s->hx + HMIX * (size_t)(h - 2);
    /* The LSTM's forecast of the change over h records earns its weight
     * (--horizon-prior): rows of overlapping targets tell h times less
     * than as many records, and on a short series a free beta_h jumped
     * between 0 and 1 on its latest rows (BJsales: 3.0x the best
     * classical method over h = 1-12, 1.3x with it; FINDINGS.md 20). */
    if (x[7] > 0.0) mix_solve(x, x[7], s->hprior * h, &x[5], &x[6]);
  }
}
