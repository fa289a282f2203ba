/*
 * The pointwise math of kernels/vec_cpu.h (vexp, vsigmoid, vtanh) against
 * libm in double, for one instruction set: compiled once per set with the
 * kernels' own flags (tests/kernels/CMakeLists.txt), as vec_errors_<set>.
 */
#include "vec_errors.h"

#include <math.h>

#include "vec_cpu.h"

/* x_i = lo + i (hi - lo) / (n - 1), i < n, in vectors of U. */
#define GRID(i, lo, hi, n) ((lo) + (double)(i) * ((hi) - (lo)) / (double)((n)-1))

void ISA_NAME(vec_errors)(vec_errors_t *e, long n) {
  *e = (vec_errors_t){0};
  for (long i0 = 0; i0 < n; i0 += U) {
    vf x = {0}, t = {0};
    for (int j = 0; j < U; j++) {
      long const i = i0 + j < n ? i0 + j : n - 1;
      x[j] = (float)GRID(i, -87.0, 88.0, n); /* vexp's range */
      t[j] = (float)GRID(i, -20.0, 20.0, n); /* tanh, sigmoid: all but 0 or +-1 */
    }
    vf const ex = vexp(x), sx = vsigmoid(t), tx = vtanh(t);
    for (int j = 0; j < U; j++) {
      double const e_ref = exp((double)x[j]), s_ref = 1.0 / (1.0 + exp(-(double)t[j]));
      double const t_ref = tanh((double)t[j]);
      double const er = fabs(ex[j] - e_ref) / e_ref, sr = fabs(sx[j] - s_ref) / s_ref;
      double const sa = fabs(sx[j] - s_ref), ta = fabs(tx[j] - t_ref);
      e->exp_rel = er > e->exp_rel ? er : e->exp_rel;
      e->sigmoid_rel = sr > e->sigmoid_rel ? sr : e->sigmoid_rel;
      e->sigmoid_abs = sa > e->sigmoid_abs ? sa : e->sigmoid_abs;
      e->tanh_abs = ta > e->tanh_abs ? ta : e->tanh_abs;
    }
  }
  /* Outside the range: clamped, finite, in order; NaN stays NaN. */
  vf const far = vexp(splat(-1e4f)), near = vexp(splat(1e4f)), nan = vexp(splat(NAN));
  vf const s = vsigmoid(splat(-1e4f)), s1 = vsigmoid(splat(1e4f)), t = vtanh(splat(-1e4f));
  e->outside_ok = far[0] >= 0.0f && far[0] < 1e-37f && isfinite(near[0]) && near[0] > 1e38f &&
                  isnan(nan[0]) && s[0] >= 0.0f && s[0] < 1e-37f && s1[0] == 1.0f && t[0] == -1.0f;
}
