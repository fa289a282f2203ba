/*
 * Finite-difference gradient check of the engine: every parameter group,
 * the inputs, h0 and c0, against central differences of the double-
 * precision reference (ref.c) on several shapes, including L=3, T=1, B=1,
 * I=1 and hidden sizes that are not multiples of 8.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdlib.h>

#include "ref.h"

/* Central differences of the double model: step 1e-6 leaves a truncation
 * error ~1e-12 and a rounding error ~1e-16 / 1e-6 = 1e-10, far below the
 * float32 engine's own error, which is what the check measures. */
#define FD_STEP 1e-6

/* The engine computes in float32: each operation rounds at ~6e-8, and the
 * error grows through T steps, L layers and sums over B rows; 1e-4 of a
 * group's largest gradient bounds that with margin at these small shapes,
 * while a wrong term (a missing gate, a transposed weight) is off by O(1). */
#define GRAD_TOL 1e-4

/* The same float32 rounding on the forward values. */
#define FWD_TOL 1e-5

ParameterizedTestParameters(grad, finite_differences) {
  static ref_dims_t cases[] = {
      /* I, H, L, O, T, B */
      {1, 1, 1, 1, 1, 1},  {3, 5, 3, 2, 4, 2}, {2, 7, 2, 2, 1, 1},
      {1, 13, 2, 1, 5, 3}, {4, 9, 1, 4, 6, 5}, {5, 17, 1, 3, 3, 4},
  };
  return cr_make_param_array(ref_dims_t, cases, sizeof cases / sizeof cases[0]);
}

typedef struct fd_ctx_s {
  const ref_dims_t *d;
  double *p, *x, *h0, *c0, *tgt, *mask;
} fd_ctx_t;

static double loss_of(const fd_ctx_t *f) {
  return ref_loss(f->d, f->p, f->x, f->h0, f->c0, f->tgt, f->mask, NULL, NULL, NULL);
}

/* Central difference of the loss along v[i]. */
static double fd(const fd_ctx_t *f, double *v, size_t i) {
  double const keep = v[i];
  v[i] = keep + FD_STEP;
  double const up = loss_of(f);
  v[i] = keep - FD_STEP;
  double const down = loss_of(f);
  v[i] = keep;
  return (up - down) / (2 * FD_STEP);
}

static void check_group(const fd_ctx_t *f, double *v, const float *got, size_t n,
                        const char *what) {
  double *want = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++)
    want[i] = fd(f, v, i);
  double const err = ref_rel_err(got, want, n);
  cr_expect(err <= GRAD_TOL, "%s: relative error %.3g > %.0e (I=%d H=%d L=%d O=%d T=%d B=%d)", what,
            err, GRAD_TOL, f->d->I, f->d->H, f->d->L, f->d->O, f->d->T, f->d->B);
  free(want);
}

ParameterizedTest(ref_dims_t *d, grad, finite_differences) {
  ls_engine_t *e = ref_engine(d);
  cr_assert_not_null(e, "engine: %s", ls_last_error());
  size_t const n = ls_engine_param_count(e);
  size_t const N = (size_t)d->T * d->B, S = (size_t)d->L * d->B * d->H;
  size_t const nx = N * d->I, ny = N * d->O;
  float *pf = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
  float *x = malloc(nx * sizeof(float)), *tgt = malloc(ny * sizeof(float));
  float *mask = malloc(N * sizeof(float)), *h0 = malloc(S * sizeof(float));
  float *c0 = malloc(S * sizeof(float)), *dx = malloc(nx * sizeof(float));
  float *dh0 = malloc(S * sizeof(float)), *dc0 = malloc(S * sizeof(float));
  float *pred = malloc(ny * sizeof(float)), *hT = malloc(S * sizeof(float));
  float *cT = malloc(S * sizeof(float));
  fd_ctx_t f = {d,
                malloc(n * sizeof(double)),
                malloc(nx * sizeof(double)),
                malloc(S * sizeof(double)),
                malloc(S * sizeof(double)),
                malloc(ny * sizeof(double)),
                malloc(N * sizeof(double))};

  /* Larger-than-init weights so that the gates leave their linear range. */
  ref_fill(pf, n, 11u + (uint32_t)n, 0.6f);
  ref_fill(x, nx, 12, 1.0f);
  ref_fill(tgt, ny, 13, 1.0f);
  ref_fill(h0, S, 14, 0.5f);
  ref_fill(c0, S, 15, 0.5f);
  for (size_t r = 0; r < N; r++)
    mask[r] = r % 3 == 1 ? 0.0f : 1.0f;
  mask[0] = 1.0f;
  ref_widen(f.p, pf, n), ref_widen(f.x, x, nx), ref_widen(f.tgt, tgt, ny);
  ref_widen(f.h0, h0, S), ref_widen(f.c0, c0, S), ref_widen(f.mask, mask, N);

  double loss = 0.0, count = 0.0;
  cr_assert_eq(ls_engine_write_params(e, pf, n), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_set_state(e, d->B, h0, c0), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_forward(e, d->T, d->B, x, tgt, mask, &loss, &count), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_grads(e, g, n), LS_OK);
  cr_assert_eq(ls_engine_read_input_grads(e, dx, dh0, dc0), LS_OK);
  cr_assert_eq(ls_engine_read_outputs(e, NULL, pred, hT, cT), LS_OK);

  /* Forward values against the reference. */
  double *rp = malloc(ny * sizeof(double)), *rh = malloc(S * sizeof(double)),
         *rc = malloc(S * sizeof(double));
  double const want = ref_loss(d, f.p, f.x, f.h0, f.c0, f.tgt, f.mask, rp, rh, rc);
  double valid = 0.0;
  for (size_t r = 0; r < N; r++)
    valid += mask[r];
  cr_expect(fabs(loss - want) <= FWD_TOL * want, "loss %.9g, reference %.9g", loss, want);
  cr_expect_eq(count, valid * d->O, "count %g, expected %g", count, valid * d->O);
  cr_expect(ref_rel_err(pred, rp, ny) <= FWD_TOL, "predictions");
  cr_expect(ref_rel_err(hT, rh, S) <= FWD_TOL, "final h");
  cr_expect(ref_rel_err(cT, rc, S) <= FWD_TOL, "final c");

  /* Every parameter group, then the inputs and the initial state. */
  ls_shape_t const s = {d->I, d->H, d->L, d->O};
  for (int l = 0; l <= d->L; l++) {
    int const first = l < d->L ? LS_PARAM_WEIGHT_IH : LS_PARAM_HEAD_WEIGHT;
    int const last = l < d->L ? LS_PARAM_BIAS_HH : LS_PARAM_HEAD_BIAS;
    for (int k = first; k <= last; k++) {
      size_t off, cnt;
      char name[32];
      cr_assert_eq(ls_param_locate(&s, l, (ls_param_kind_t)k, &off, &cnt), LS_OK);
      cr_assert_eq(ls_param_name(l, (ls_param_kind_t)k, name, sizeof name), LS_OK);
      check_group(&f, f.p + off, g + off, cnt, name);
    }
  }
  check_group(&f, f.x, dx, nx, "d inputs");
  check_group(&f, f.h0, dh0, S, "d h0");
  check_group(&f, f.c0, dc0, S, "d c0");

  free(rp), free(rh), free(rc);
  free(f.p), free(f.x), free(f.h0), free(f.c0), free(f.tgt), free(f.mask);
  free(pf), free(g), free(x), free(tgt), free(mask), free(h0), free(c0), free(dx), free(dh0);
  free(dc0), free(pred), free(hT), free(cT);
  ls_engine_destroy(e);
}
