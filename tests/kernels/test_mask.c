/*
 * Masking: positions with mask 0 contribute exactly nothing. A batch with
 * padded rows (mask 0, garbage and even NaN targets) gives the loss, count
 * and gradients of the batch with those rows removed; trailing padded time
 * steps give those of the shorter window.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* Removing rows changes only the order and blocking of float sums in the
 * GEMMs over T*B rows; 1e-6 of the largest value bounds that reordering at
 * these sizes (a padded row leaking through would be off by O(1e-1)). */
#define REORDER_TOL 1e-6

typedef struct run_s {
  double loss, count;
  float *grads;
} run_t;

static run_t run(const ref_dims_t *d, int T, int B, const float *x, const float *tgt,
                 const float *mask) {
  ls_engine_t *e = ref_engine(d);
  cr_assert_not_null(e, "%s", ls_last_error());
  size_t const n = ls_engine_param_count(e);
  run_t r = {0, 0, malloc(n * sizeof(float))};
  cr_assert_eq(ls_engine_init_params(e, 7), LS_OK);
  cr_assert_eq(ls_engine_set_state(e, B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward(e, T, B, x, tgt, mask, &r.loss, &r.count), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK);
  cr_assert_eq(ls_engine_read_grads(e, r.grads, n), LS_OK);
  ls_engine_destroy(e);
  return r;
}

static double rel(const float *a, const float *b, size_t n) {
  double diff = 0, top = 0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    top = fmax(top, fabs((double)b[i]));
  }
  return top > 0 ? diff / top : diff;
}

static size_t nparams(const ref_dims_t *d) {
  ls_shape_t const s = {d->I, d->H, d->L, d->O};
  size_t n = 0;
  ls_param_count(&s, &n);
  return n;
}

Test(mask, padded_rows_equal_removed_rows) {
  ref_dims_t const d = {3, 20, 2, 3, 6, 8}; /* B = 8, of which rows 2, 5, 6 are padding */
  int const T = d.T, B = d.B, I = d.I;
  int const keep[] = {0, 1, 3, 4, 7}, K = 5;
  float *x = malloc(sizeof(float) * T * B * I), *y = malloc(sizeof(float) * T * B * I);
  float *mask = malloc(sizeof(float) * T * B);
  float *xs = malloc(sizeof(float) * T * K * I), *ys = malloc(sizeof(float) * T * K * I);
  ref_fill(x, (size_t)T * B * I, 1, 1.0f);
  ref_fill(y, (size_t)T * B * I, 2, 1.0f);
  for (int t = 0; t < T; t++) {
    for (int b = 0; b < B; b++)
      mask[t * B + b] = 0.0f;
    for (int k = 0; k < K; k++) {
      int const b = keep[k];
      mask[t * B + b] = 1.0f;
      memcpy(xs + ((size_t)t * K + k) * I, x + ((size_t)t * B + b) * I, sizeof(float) * I);
      memcpy(ys + ((size_t)t * K + k) * I, y + ((size_t)t * B + b) * I, sizeof(float) * I);
    }
    y[((size_t)t * B + 2) * I] = NAN; /* a padded target may hold anything */
    y[((size_t)t * B + 5) * I + 1] = 1e30f;
  }
  ref_dims_t ds = d;
  ds.B = K;
  run_t const full = run(&d, T, B, x, y, mask), small = run(&ds, T, K, xs, ys, NULL);
  cr_expect(isfinite(full.loss), "a padded NaN target leaked into the loss");
  cr_expect_eq(full.count, small.count, "count %g vs %g", full.count, small.count);
  cr_expect(fabs(full.loss - small.loss) <= REORDER_TOL * small.loss, "loss %.9g vs %.9g",
            full.loss, small.loss);
  double const err = rel(full.grads, small.grads, nparams(&d));
  cr_expect(err <= REORDER_TOL, "gradients differ by %.3g", err);
  free(full.grads), free(small.grads);
  free(x), free(y), free(mask), free(xs), free(ys);
}

Test(mask, padded_tail_equals_shorter_window) {
  ref_dims_t const d = {2, 12, 2, 2, 7, 4};
  int const T = d.T, Ts = 4, B = d.B, I = d.I; /* steps 4..6 padded in every row */
  float *x = malloc(sizeof(float) * T * B * I), *y = malloc(sizeof(float) * T * B * I);
  float *mask = malloc(sizeof(float) * T * B);
  ref_fill(x, (size_t)T * B * I, 3, 1.0f);
  ref_fill(y, (size_t)T * B * I, 4, 1.0f);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      mask[t * B + b] = t < Ts ? 1.0f : 0.0f;
  run_t const full = run(&d, T, B, x, y, mask), small = run(&d, Ts, B, x, y, NULL);
  cr_expect_eq(full.count, small.count);
  cr_expect(fabs(full.loss - small.loss) <= REORDER_TOL * small.loss, "loss %.9g vs %.9g",
            full.loss, small.loss);
  double const err = rel(full.grads, small.grads, nparams(&d));
  cr_expect(err <= REORDER_TOL, "gradients differ by %.3g", err);
  free(full.grads), free(small.grads);
  free(x), free(y), free(mask);
}
