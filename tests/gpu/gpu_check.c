/*
 * Definitions of gpu_check.h.
 */
#include "gpu_check.h"

#include <math.h>

int failures;

double rel_err(const float *a, const float *b, size_t n) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++) {
    double const d = fabs((double)a[i] - (double)b[i]);
    if (isnan(d)) return NAN;
    diff = d > diff ? d : diff;
    scale = fabs((double)b[i]) > scale ? fabs((double)b[i]) : scale;
  }
  return scale == 0.0 ? (diff == 0.0 ? 0.0 : INFINITY) : diff / scale;
}
