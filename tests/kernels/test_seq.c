/*
 * ls_engine_forward_seq: a window given as one sequence [T+1, B, I], the
 * targets its rows 1..T. It must give exactly (bit for bit) what
 * ls_engine_forward gives with inputs = rows 0..T-1 and targets = rows 1..T
 * as two buffers: loss, count, predictions, final states, parameter and
 * input gradients; and the loss of the double-precision reference.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* The engine and the reference differ by float vs double arithmetic
 * through a 2-layer LSTM over 5 steps: observed ~1e-6 relative; a target
 * taken from the wrong row would be off by O(1). */
#define REF_TOL 1e-4

typedef struct out_s {
  double loss, count;
  float *pred, *hT, *grads, *dx;
} out_t;

static void out_free(out_t *o) {
  free(o->pred), free(o->hT), free(o->grads), free(o->dx);
}

/* forward (seq != NULL: forward_seq; else x and tgt), backward, and what
 * they leave. */
static out_t run(const ref_dims_t *d, const float *seq, const float *x, const float *tgt,
                 const float *mask) {
  ls_engine_t *e = ref_engine(d);
  cr_assert_not_null(e, "%s", ls_last_error());
  size_t const n = ls_engine_param_count(e), TB = (size_t)d->T * d->B;
  out_t o = {0,
             0,
             malloc(TB * d->O * sizeof(float)),
             malloc((size_t)d->L * d->B * d->H * 4),
             malloc(n * sizeof(float)),
             malloc(TB * d->I * sizeof(float))};
  cr_assert_eq(ls_engine_init_params(e, 11), LS_OK);
  cr_assert_eq(ls_engine_set_state(e, d->B, NULL, NULL), LS_OK);
  ls_err_t const err = seq != NULL
                           ? ls_engine_forward_seq(e, d->T, d->B, seq, mask, &o.loss, &o.count)
                           : ls_engine_forward(e, d->T, d->B, x, tgt, mask, &o.loss, &o.count);
  cr_assert_eq(err, LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_outputs(e, NULL, o.pred, o.hT, NULL), LS_OK);
  cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_grads(e, o.grads, n), LS_OK);
  cr_assert_eq(ls_engine_read_input_grads(e, o.dx, NULL, NULL), LS_OK);
  ls_engine_destroy(e);
  return o;
}

Test(seq, equals_forward_with_shifted_targets) {
  ref_dims_t const d = {3, 16, 2, 3, 5, 4};
  size_t const row = (size_t)d.B * d.I, TB = (size_t)d.T * d.B;
  float *const seq = malloc((d.T + 1) * row * sizeof(float));
  ref_fill(seq, (d.T + 1) * row, 3, 1.0f);
  float mask[5 * 4];
  for (size_t r = 0; r < TB; r++)
    mask[r] = r % 7 == 3 || r >= TB - d.B ? 0.0f : 1.0f; /* scattered and trailing padding */
  out_t a = run(&d, seq, NULL, NULL, mask);
  out_t b = run(&d, NULL, seq, seq + row, mask); /* two buffers: rows 0..T-1 and 1..T */
  cr_expect_eq(a.loss, b.loss);
  cr_expect_eq(a.count, b.count);
  ls_shape_t const shape = {d.I, d.H, d.L, d.O};
  size_t n = 0;
  ls_param_count(&shape, &n);
  cr_expect_eq(memcmp(a.pred, b.pred, TB * d.O * sizeof(float)), 0, "predictions differ");
  cr_expect_eq(memcmp(a.hT, b.hT, (size_t)d.L * d.B * d.H * sizeof(float)), 0, "hT differs");
  cr_expect_eq(memcmp(a.grads, b.grads, n * sizeof(float)), 0, "gradients differ");
  cr_expect_eq(memcmp(a.dx, b.dx, TB * d.I * sizeof(float)), 0, "input gradients differ");

  /* And the reference's loss, from the sequence's rows. */
  ls_engine_t *e = ref_engine(&d);
  float *const p = malloc(n * sizeof(float));
  cr_assert_eq(ls_engine_init_params(e, 11), LS_OK);
  cr_assert_eq(ls_engine_read_params(e, p, n), LS_OK);
  double *const pd = malloc(n * sizeof(double)), *const sd = malloc((d.T + 1) * row * 8);
  double *const md = malloc(TB * sizeof(double));
  ref_widen(pd, p, n);
  ref_widen(sd, seq, (d.T + 1) * row);
  ref_widen(md, mask, TB);
  double *const zero = calloc((size_t)d.L * d.B * d.H, sizeof(double)); /* h0 = c0 = 0 */
  double const want = ref_loss(&d, pd, sd, zero, zero, sd + row, md, NULL, NULL, NULL);
  free(zero);
  cr_expect_leq(fabs(a.loss - want) / want, REF_TOL, "loss %.9g, reference %.9g", a.loss, want);
  ls_engine_destroy(e);
  free(p), free(pd), free(sd), free(md), free(seq);
  out_free(&a), out_free(&b);
}

/* Forward of T, B, x, target in a fresh engine of seed 2: its loss. */
static double fresh_loss(const ref_dims_t *d, const float *x, const float *target) {
  ls_engine_t *f = ref_engine(d);
  double loss = 0, count = 0;
  cr_assert_eq(ls_engine_init_params(f, 2), LS_OK);
  cr_assert_eq(ls_engine_set_state(f, d->B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward(f, d->T, d->B, x, target, NULL, &loss, &count), LS_OK);
  ls_engine_destroy(f);
  return loss;
}

/* At the largest window and batch, unmasked (every row of the sequence is
 * read, the last included); then a forward with explicit targets in the
 * same engine uses those. */
Test(seq, largest_window_then_explicit_targets) {
  ref_dims_t const d = {2, 8, 1, 2, 6, 3};
  size_t const row = (size_t)d.B * d.I;
  float *const seq = malloc((d.T + 1) * row * sizeof(float));
  float *const other = malloc(d.T * row * sizeof(float));
  ref_fill(seq, (d.T + 1) * row, 5, 1.0f);
  ref_fill(other, d.T * row, 6, 1.0f);
  ls_engine_t *e = ref_engine(&d);
  cr_assert_eq(ls_engine_init_params(e, 2), LS_OK);
  double l1 = 0, c1 = 0, l2 = 0, c2 = 0;
  cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward_seq(e, d.T, d.B, seq, NULL, &l1, &c1), LS_OK, "%s",
               ls_last_error());
  cr_expect_eq(c1, (double)d.T * d.B * d.O, "no mask: every target counts");
  cr_expect_eq(l1, fresh_loss(&d, seq, seq + row), "the sequence's targets are its rows 1..T");
  cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward(e, d.T, d.B, seq, other, NULL, &l2, &c2), LS_OK);
  cr_expect_eq(l2, fresh_loss(&d, seq, other), "the explicit targets were not the ones used");
  cr_expect_neq(l1, l2);
  ls_engine_destroy(e);
  free(seq), free(other);
}

Test(seq, arguments) {
  ref_dims_t const d = {2, 8, 1, 2, 4, 3};
  float seq[5 * 3 * 2] = {0};
  double loss, count;
  ls_engine_t *e = ref_engine(&d);
  cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
  cr_expect_eq(ls_engine_forward_seq(NULL, 4, 3, seq, NULL, &loss, &count), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_engine_forward_seq(e, 4, 3, NULL, NULL, &loss, &count), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_engine_forward_seq(e, 5, 3, seq, NULL, &loss, &count), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_engine_forward_seq(e, 0, 3, seq, NULL, &loss, &count), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_engine_forward_seq(e, 4, 2, seq, NULL, &loss, &count), LS_ERR_STATE,
               "no state was set for B=2");
  cr_expect_eq(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "no forward completed");
  ls_engine_destroy(e);
  ref_dims_t const other = {2, 8, 1, 3, 4, 3}; /* O = 3 outputs, I = 2 inputs */
  e = ref_engine(&other);
  cr_assert_eq(ls_engine_set_state(e, other.B, NULL, NULL), LS_OK);
  cr_expect_eq(ls_engine_forward_seq(e, 4, 3, seq, NULL, &loss, &count), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "O=3") != NULL, "%s", ls_last_error());
  ls_engine_destroy(e);
}
