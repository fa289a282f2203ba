/*
 * What season.c (the seasons: found, their profiles) and season_path.c (the
 * linear path: its features, least squares and mixing) share (train/
 * internal; the layout of a series' state is season.c's opening comment).
 */
#ifndef LSTREAM_TRAIN_SEASON_INTERNAL_H
#define LSTREAM_TRAIN_SEASON_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "season.h"

/* The recent changes the linear path sees. */
#define RECENT 12
/* Doubles of a target block before w. */
#define HEAD 11
/* Doubles per horizon h >= 2 of the mixing's block (--horizon-linear):
 * the sums of a a, a p, p p, a y, p y, then alpha, beta, the rows. */
#define HMIX 8

/* Doubles of the linear path's A (symmetric, K x K): its upper triangle,
 * row by row (row u holds A[u][u..K-1]). */
static inline size_t season_tri(int K) {
  return (size_t)K * (size_t)(K + 1) / 2;
}

/* Where A[u][v] (u <= v) is in its triangle. */
static inline size_t season_tri_at(int K, int u, int v) {
  return (size_t)u * (size_t)K - (size_t)u * (size_t)(u - 1) / 2 + (size_t)(v - u);
}

/* AVX-512 or AVX2 where the CPU has them: the same operations in the same
 * order, no fused multiply-adds, so the results are the generic build's,
 * bit for bit. SEASON_CLONES_AVX2: AVX2 at most, for learn_row, whose rows
 * of K doubles (K = 28 with two seasons) took 25% longer in AVX-512 than in
 * AVX2 on an AMD EPYC (tests/bench/train_cycles.sh). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEASON_CLONES      __attribute__((target_clones("avx512f", "avx2", "default")))
#define SEASON_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define SEASON_CLONES
#define SEASON_CLONES_AVX2
#endif

struct season_s {
  int O, slots, pmax, linear, K;
  int levels;                    /* --season-levels: the level profile, the profiles filled */
  int blocks;                    /* --linear-blocks: means of older records, lags RECENT 2^q.. */
  int wait;                      /* --linear-wait: rows per weight before the path forecasts */
  int NF;                        /* the linear path's features per season slot: 5, 6 with levels */
  int H;                         /* horizons the linear path forecasts (--horizon-linear; else 1) */
  double hprior;                 /* --horizon-prior: rows per h of beta_h's prior towards 0 */
  int periods[SEASON_SLOTS_MAX]; /* given, or 0: found */
  int autos;                     /* find the seasons (slot 0; slot 1 too with two slots) */
  int R, acf_n;                  /* ring length; autocorrelation lags (0 without auto) */
  int prof_n;                    /* floats of a slot's seasonal profile */
  size_t slot_n;                 /* floats per slot: its profile (and level profile) */
  int second;                    /* slot 1 found (--season auto, --auto-seasons 2) */
  int in_slots;                  /* slots whose lags are model inputs */
  size_t hx;                     /* doubles before the horizons' mixing block */
  int mixp;                      /* the level profile's forecast in the mixing (h = 1) */
  int mix_all;                   /* its weight fitted on every row (--mix-profile-rows all) */
  size_t mx;                     /* its block: sums al, pl, ll, ly, then gamma */
  int lz;                        /* l's index in z: slot 0's level-profile feature */
  size_t head, per;              /* doubles before the floats; per target */
  double clip;                   /* the normaliser's clamp */
  double *z2, *fc;               /* [K], [H] scratch */
  double *recip;                 /* [ACF_WINDOW] 1 / (ACF_WINDOW - q) at q (--season auto) */
  double *zs, *sums;             /* [SEASON_GROUP, O, K] each series' and target's features,
                                  * [SEASON_GROUP, O, slots] its sums */
  double **pend;                 /* [SEASON_GROUP O] the target blocks awaiting their refit */
  int *pend_n, npend;            /* their features in use; how many */
  double *lanes;                 /* [K K + 2 K, SOLVE_LANES] season_solve_w's scratch */
};

static inline double season_clamp(const season_t *s, double v) {
  return v > s->clip ? s->clip : v < -s->clip ? -s->clip : v;
}

/* The ring and autocorrelation sums of target block m. */
static inline float *season_ring(const season_t *s, double *m) {
  return (float *)(void *)(m + s->head);
}

/* Record u of the series from the ring (t its newest); NAN when it is not
 * there (before the first, or out of the ring). */
static inline double season_value_at(const season_t *s, const float *ring, int64_t t, int64_t u) {
  if (u < 0 || u > t || t - u >= s->R) return NAN;
  return ring[u % s->R];
}

/* Slot i's profiles (season_max floats: the changes at each phase, then,
 * with --season-levels, the levels) of target block m. */
static inline float *season_profile_of(const season_t *s, const double *m, int i) {
  return (float *)(void *)(m + s->head) + s->R + s->acf_n + (size_t)i * s->slot_n;
}

/* Slot i's season in target block m (0: none). */
static inline int season_period_of(const season_t *s, const double *m, int i) {
  return !s->autos ? s->periods[i] : i == 0 ? (int)m[0] : (int)m[s->per - 1];
}

/* Target blocks the linear path refits at once: one a lane of 8 doubles
 * (AVX-512; two vectors of 4 with AVX2). */
#define SOLVE_LANES 8

/* The first n weights of each of the `lanes` (1..SOLVE_LANES) target
 * blocks ms[l] from its forgotten sums (learn_row's A, its upper triangle,
 * and b): w = (A + RIDGE I)^-1 b by Cholesky, kept as they were in a
 * block where A + RIDGE I is not positive definite; the others stay 0
 * (features that are 0 have weights 0, and leaving them out changes no
 * bit of the rest: a Cholesky's leading block is the leading block's
 * Cholesky). The bits of a block solved alone (season_solve.c). */
void season_solve_w(season_t *s, double *const *ms, int lanes, int n);

/* Record t just in target block m's ring: the seasons found after it
 * (--season auto) and each slot's profiles updated by it. sums
 * [SEASON_SLOTS_MAX] receives per slot the sum of the P values that end
 * at t, which the level profile's step added up (NAN: none, without
 * --season-levels or before P records). */
void season_update(const season_t *s, double *m, int64_t t, double *sums);

#endif /* LSTREAM_TRAIN_SEASON_INTERNAL_H */
