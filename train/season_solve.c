/*
 * The linear path's refit (season_internal.h, season_solve_w): the weights
 * of several target blocks at once, each from its own forgotten sums, by
 * Cholesky of A + RIDGE I and two triangular solves, one block a vector
 * lane.
 *
 * Every lane goes through exactly the operations, in exactly the order,
 * of a solve of its block alone (GCC's vector extensions: lane-wise IEEE
 * arithmetic; no fused multiply-adds in either clone): the weights are
 * the bits a block-at-a-time solve gives. A refit per record and target
 * was most of a training step's cycles on a topic of several features
 * (tests/bench/train_vs_engine.sh); the targets of a record are refitted
 * together, SOLVE_LANES at a time.
 */
#include <math.h>

#include "season_internal.h"

/* Ridge on the normal equations: one prior row per weight, at zero (the
 * forecast starts at the last value). */
#define RIDGE 1.0

/* One block: plain doubles. */
#define LANES      1
#define LANE(v, l) (v)
#define FN(name)   name##_1
typedef double lanes_t;
#include "season_solve_lanes.h"
#undef LANES
#undef LANE
#undef FN

/* Up to 4 blocks, one a lane of a vector (GCC's vector extensions: two
 * SSE2 halves without AVX). */
#define LANES      4
#define LANE(v, l) ((v)[l])
#define FN(name)   name##_4
typedef double lanes4_t __attribute__((vector_size(4 * sizeof(double))));
#define lanes_t lanes4_t
#include "season_solve_lanes.h"
#undef lanes_t
#undef LANES
#undef LANE
#undef FN

/* Up to SOLVE_LANES (8): one AVX-512 vector, or two AVX2 halves. */
#define LANES      SOLVE_LANES
#define LANE(v, l) ((v)[l])
#define FN(name)   name##_8
typedef double lanes8_t __attribute__((vector_size(SOLVE_LANES * sizeof(double))));
#define lanes_t lanes8_t
#include "season_solve_lanes.h"
#undef lanes_t
#undef LANES
#undef LANE
#undef FN

void season_solve_w(season_t *s, double *const *ms, int lanes, int n) {
  if (lanes < 1 || lanes > SOLVE_LANES || n < 1 || n > s->K) return;
  if (lanes == 1)
    solve_1(s, ms, lanes, n);
  else if (lanes <= 4)
    solve_4(s, ms, lanes, n);
  else
    solve_8(s, ms, lanes, n);
}
