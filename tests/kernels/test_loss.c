/*
 * Losses per head output and masks per target (kernels.h, "Loss";
 * ls_engine_set_loss, ls_engine_forward_elem, ls_engine_read_loss_cols):
 * every column squared error and a row mask is the masked MSE of before,
 * bit for bit; an element mask of whole rows is the row mask; the loss,
 * the column sums and counts and d loss / d pred (seen through the head's
 * gradients) are those of the equations on the engine's own predictions,
 * with 0 at a prediction equal to its target; unknown targets change
 * nothing whatever they hold; lengths set the state carried on (bad
 * arguments: test_args.c, args.losses). The PyTorch oracle (tests/oracle, torch_oracle_loss)
 * checks every gradient against torch.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

/* The same equations in double on the engine's float predictions: the
 * loss and column sums differ by float rounding of each term (~1e-7
 * relative); a tie given -tau instead of 0 moves a bias gradient by tau
 * out of ~1, a wrong level by far more. */
#define EQ_TOL 1e-5

/* Two features, three horizons' worth of columns: the mean (squared error)
 * and the 0.1, 0.5 and 0.9 quantiles, the pattern of issue 25's heads. */
static const ls_loss_col_t mixed[6] = {
    {LS_LOSS_MSE, 0.0f},     {LS_LOSS_PINBALL, 0.1f}, {LS_LOSS_PINBALL, 0.5f},
    {LS_LOSS_PINBALL, 0.9f}, {LS_LOSS_MSE, 0.0f},     {LS_LOSS_PINBALL, 0.25f},
};
static const ls_loss_col_t all_mse[6] = {0};

typedef enum how_e { ROWS, ELEMS } how_t;

/* One forward + backward and what it leaves. */
typedef struct out_s {
  double loss, count;
  float *y, *pred, *hT, *cT, *grads, *dx;
  double *col_loss, *col_count;
} out_t;

static void out_free(out_t *o) {
  free(o->y), free(o->pred), free(o->hT), free(o->cT), free(o->grads), free(o->dx);
  free(o->col_loss), free(o->col_count);
}

static ls_engine_t *engine(const ref_dims_t *d, const ls_loss_col_t *cols) {
  ls_engine_t *e = ref_engine(d);
  cr_assert_not_null(e, "%s", ls_last_error());
  cr_assert_eq(ls_engine_init_params(e, 11), LS_OK);
  if (cols != NULL) cr_assert_eq(ls_engine_set_loss(e, cols, d->O), LS_OK, "%s", ls_last_error());
  return e;
}

/* Forward (ROWS: ls_engine_forward with a row mask; ELEMS:
 * ls_engine_forward_elem with an element mask and lengths), the column
 * figures, backward(scale). */
static out_t run_on(ls_engine_t *e, const ref_dims_t *d, how_t how, const float *x,
                    const float *tgt, const float *mask, const int *lengths, float scale) {
  size_t const n = ls_engine_param_count(e), TB = (size_t)d->T * d->B;
  size_t const S = (size_t)d->L * d->B * d->H;
  out_t o = {0};
  o.y = malloc(TB * d->H * sizeof(float)), o.pred = malloc(TB * d->O * sizeof(float));
  o.hT = malloc(S * sizeof(float)), o.cT = malloc(S * sizeof(float));
  o.grads = malloc(n * sizeof(float)), o.dx = malloc(TB * d->I * sizeof(float));
  o.col_loss = malloc(d->O * sizeof(double)), o.col_count = malloc(d->O * sizeof(double));
  cr_assert_eq(ls_engine_set_state(e, d->B, NULL, NULL), LS_OK);
  ls_err_t const err =
      how == ROWS ? ls_engine_forward(e, d->T, d->B, x, tgt, mask, &o.loss, &o.count)
                  : ls_engine_forward_elem(e, d->T, d->B, x, tgt, mask, lengths, &o.loss, &o.count);
  cr_assert_eq(err, LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_outputs(e, o.y, o.pred, o.hT, o.cT), LS_OK);
  cr_assert_eq(ls_engine_read_loss_cols(e, o.col_loss, o.col_count, d->O), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_engine_zero_grads(e), LS_OK);
  cr_assert_eq(ls_engine_backward(e, scale), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_grads(e, o.grads, n), LS_OK);
  cr_assert_eq(ls_engine_read_input_grads(e, o.dx, NULL, NULL), LS_OK);
  return o;
}

static out_t run(const ref_dims_t *d, const ls_loss_col_t *cols, how_t how, const float *x,
                 const float *tgt, const float *mask, const int *lengths, float scale) {
  ls_engine_t *e = engine(d, cols);
  out_t const o = run_on(e, d, how, x, tgt, mask, lengths, scale);
  ls_engine_destroy(e);
  return o;
}

/* Everything two runs leave is identical, bit for bit (the loss too when
 * loss_too, else within 1e-6: mse_loss sums a row in float, elem_loss in
 * double). */
static void expect_same(const ref_dims_t *d, const out_t *a, const out_t *b, int loss_too,
                        const char *what) {
  ls_shape_t const s = {d->I, d->H, d->L, d->O};
  size_t n = 0, TB = (size_t)d->T * d->B, S = (size_t)d->L * d->B * d->H;
  ls_param_count(&s, &n);
  if (loss_too)
    cr_expect(a->loss == b->loss, "%s: loss %.17g vs %.17g", what, a->loss, b->loss);
  else
    cr_expect(fabs(a->loss - b->loss) <= 1e-6 * fabs(b->loss), "%s: loss %.17g vs %.17g", what,
              a->loss, b->loss);
  cr_expect(a->count == b->count, "%s: count %g vs %g", what, a->count, b->count);
  cr_expect(!memcmp(a->pred, b->pred, TB * d->O * sizeof(float)), "%s: predictions differ", what);
  cr_expect(!memcmp(a->hT, b->hT, S * sizeof(float)), "%s: hT differs", what);
  cr_expect(!memcmp(a->cT, b->cT, S * sizeof(float)), "%s: cT differs", what);
  cr_expect(!memcmp(a->grads, b->grads, n * sizeof(float)), "%s: gradients differ", what);
  cr_expect(!memcmp(a->dx, b->dx, TB * d->I * sizeof(float)), "%s: dx differs", what);
  cr_expect(!memcmp(a->col_count, b->col_count, d->O * sizeof(double)), "%s: column counts", what);
}

/* x, targets, a row mask (about a quarter padding, row 0 always valid). */
typedef struct data_s {
  float *x, *tgt, *rows, *elems;
} data_t;

static data_t data(const ref_dims_t *d, uint32_t seed) {
  size_t const TB = (size_t)d->T * d->B;
  data_t w = {malloc(TB * d->I * sizeof(float)), malloc(TB * d->O * sizeof(float)),
              malloc(TB * sizeof(float)), malloc(TB * d->O * sizeof(float))};
  ref_fill(w.x, TB * d->I, seed, 1.0f);
  ref_fill(w.tgt, TB * d->O, seed + 1, 1.0f);
  ref_fill(w.rows, TB, seed + 2, 1.0f);
  for (size_t r = 0; r < TB; r++) {
    w.rows[r] = r == 0 || w.rows[r] > -0.5f ? 1.0f : 0.0f;
    for (int o = 0; o < d->O; o++)
      w.elems[r * d->O + o] = w.rows[r]; /* the row mask, element by element */
  }
  return w;
}

static void data_free(data_t *w) {
  free(w->x), free(w->tgt), free(w->rows), free(w->elems);
}

/* ------------------------------------------------------------------------ */

Test(loss, squared_error_columns_are_the_masked_mse_bit_for_bit) {
  ref_dims_t const d = {3, 12, 2, 6, 5, 4};
  data_t w = data(&d, 21);
  float const scale = 1.0f / 97.0f; /* backward recomputes d loss / d pred */
  out_t const base = run(&d, NULL, ROWS, w.x, w.tgt, w.rows, NULL, scale);
  out_t const set = run(&d, all_mse, ROWS, w.x, w.tgt, w.rows, NULL, scale);
  expect_same(&d, &set, &base, 1, "every column set to squared error");
  /* Pinball set, then every column squared error again (NULL). */
  ls_engine_t *e = engine(&d, mixed);
  cr_assert_eq(ls_engine_set_loss(e, NULL, 0), LS_OK, "%s", ls_last_error());
  out_t const reset = run_on(e, &d, ROWS, w.x, w.tgt, w.rows, NULL, scale);
  expect_same(&d, &reset, &base, 1, "losses reset to squared error");
  out_t const none = run_on(e, &d, ROWS, w.x, w.tgt, NULL, NULL, 1.0f);
  cr_expect_eq(none.count, (double)d.T * d.B * d.O);
  ls_engine_destroy(e);
  out_t o[] = {base, set, reset, none};
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
    out_free(&o[i]);
  data_free(&w);
}

Test(loss, an_element_mask_of_whole_rows_is_the_row_mask) {
  ref_dims_t const d = {3, 12, 2, 6, 5, 4};
  data_t w = data(&d, 22);
  const ls_loss_col_t *const kinds[2] = {NULL, mixed};
  for (int k = 0; k < 2; k++)
    for (int s = 0; s < 2; s++) {
      float const scale = s ? 1.0f : 0.01f;
      out_t rows = run(&d, kinds[k], ROWS, w.x, w.tgt, w.rows, NULL, scale);
      out_t elems = run(&d, kinds[k], ELEMS, w.x, w.tgt, w.elems, NULL, scale);
      /* Squared error: mse_loss's row sums in float against elem_loss's
       * in double; with pinball columns both are elem_loss's. */
      expect_same(&d, &elems, &rows, k == 1, k ? "pinball columns" : "squared error");
      for (int o = 0; o < d.O; o++)
        cr_expect(fabs(elems.col_loss[o] - rows.col_loss[o]) <= 1e-12 * fabs(rows.col_loss[o]),
                  "column %d: %.17g vs %.17g", o, elems.col_loss[o], rows.col_loss[o]);
      out_free(&rows), out_free(&elems);
    }
  data_free(&w);
}

Test(loss, sequence_windows_take_the_losses_too) {
  ref_dims_t const d = {3, 12, 2, 3, 5, 4};
  size_t const row = (size_t)d.B * d.I, TB = (size_t)d.T * d.B;
  float *const seq = malloc((d.T + 1) * row * sizeof(float)), *mask = malloc(TB * sizeof(float));
  ref_fill(seq, (d.T + 1) * row, 5, 1.0f);
  for (size_t r = 0; r < TB; r++)
    mask[r] = r % 7 == 3 ? 0.0f : 1.0f;
  ls_loss_col_t const q[3] = {
      {LS_LOSS_PINBALL, 0.2f}, {LS_LOSS_MSE, 0.0f}, {LS_LOSS_PINBALL, 0.8f}};
  ls_engine_t *e = engine(&d, q);
  double loss[2], count[2];
  float *pred[2], *g[2];
  size_t const n = ls_engine_param_count(e);
  for (int k = 0; k < 2; k++) {
    pred[k] = malloc(TB * d.O * sizeof(float)), g[k] = malloc(n * sizeof(float));
    cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
    ls_err_t const err =
        k == 0 ? ls_engine_forward_seq(e, d.T, d.B, seq, mask, &loss[k], &count[k])
               : ls_engine_forward(e, d.T, d.B, seq, seq + row, mask, &loss[k], &count[k]);
    cr_assert_eq(err, LS_OK, "%s", ls_last_error());
    cr_assert_eq(ls_engine_read_outputs(e, NULL, pred[k], NULL, NULL), LS_OK);
    cr_assert_eq(ls_engine_zero_grads(e), LS_OK);
    cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK);
    cr_assert_eq(ls_engine_read_grads(e, g[k], n), LS_OK);
  }
  cr_expect(loss[0] == loss[1] && count[0] == count[1], "loss %.17g vs %.17g", loss[0], loss[1]);
  cr_expect(!memcmp(g[0], g[1], n * sizeof(float)), "gradients differ");
  /* And the pinball columns were pinball: the loss is not the MSE's. */
  double mse = 0.0;
  for (size_t r = 0; r < TB; r++)
    for (int o = 0; o < d.O && mask[r] != 0.0f; o++) {
      double const e2 = (double)pred[0][r * d.O + o] - seq[row + r * d.O + o];
      mse += e2 * e2;
    }
  cr_expect(fabs(loss[0] - mse) > 1e-3 * mse, "the loss %.9g is the MSE's", loss[0]);
  ls_engine_destroy(e);
  free(seq), free(mask), free(pred[0]), free(pred[1]), free(g[0]), free(g[1]);
}

/* The loss of one target by the equations, in double; *g its d/d pred. */
static double eq_loss(double d, float tau, double *g) {
  if (tau == 0.0f) {
    *g = 2.0 * d;
    return d * d;
  }
  *g = d < 0.0 ? -(double)tau : d > 0.0 ? 1.0 - (double)tau : 0.0;
  return d < 0.0 ? -(double)tau * d : (1.0 - (double)tau) * d;
}

Test(loss, pinball_columns_follow_the_equations_with_0_at_a_tie) {
  ref_dims_t const d = {3, 12, 2, 6, 7, 5};
  size_t const TB = (size_t)d.T * d.B, NO = TB * d.O;
  data_t w = data(&d, 23);
  float *const mask = malloc(NO * sizeof(float)), *const pred0 = malloc(NO * sizeof(float));
  for (size_t i = 0; i < NO; i++) /* 0, 0.5, 1 and 2 as weights */
    mask[i] = i % 5 == 1 ? 0.0f : i % 7 == 2 ? 0.5f : i % 11 == 3 ? 2.0f : 1.0f;
  ls_engine_t *e = engine(&d, mixed);
  /* The predictions first; then some targets exactly equal to them (a
   * tie: nothing to the loss, a 0 gradient), unknown targets NaN. */
  cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward_elem(e, d.T, d.B, w.x, NULL, NULL, NULL, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_read_outputs(e, NULL, pred0, NULL, NULL), LS_OK);
  int ties = 0;
  for (size_t i = 0; i < NO; i++) {
    if (mask[i] != 0.0f && i % 4 == 0) w.tgt[i] = pred0[i], ties++;
    if (mask[i] == 0.0f) w.tgt[i] = NAN;
  }
  out_t const o = run_on(e, &d, ELEMS, w.x, w.tgt, mask, NULL, 1.0f);
  cr_assert(!memcmp(o.pred, pred0, NO * sizeof(float)), "the predictions changed");
  /* The equations: loss, column sums and counts, and d loss / d pred,
   * which the head turns into db = colsum(dpred) and dW = dpred^T y. */
  ls_shape_t const s = {d.I, d.H, d.L, d.O};
  size_t ow, ob, cnt;
  ls_param_locate(&s, 0, LS_PARAM_HEAD_WEIGHT, &ow, &cnt);
  ls_param_locate(&s, 0, LS_PARAM_HEAD_BIAS, &ob, &cnt);
  double loss = 0.0, count = 0.0, *col = calloc(d.O, sizeof(double));
  double *cols_n = calloc(d.O, sizeof(double)), *db = calloc(d.O, sizeof(double));
  double *dw = calloc((size_t)d.O * d.H, sizeof(double));
  int tie_terms = 0;
  for (size_t r = 0; r < TB; r++)
    for (int k = 0; k < d.O; k++) {
      size_t const i = r * d.O + k;
      if (mask[i] == 0.0f) continue;
      double g;
      double const l = eq_loss((double)o.pred[i] - w.tgt[i], mixed[k].tau, &g);
      loss += mask[i] * l, count += mask[i];
      col[k] += mask[i] * l, cols_n[k] += mask[i];
      db[k] += mask[i] * g;
      for (int j = 0; j < d.H; j++)
        dw[(size_t)k * d.H + j] += mask[i] * g * o.y[r * d.H + j];
      tie_terms += o.pred[i] == w.tgt[i];
    }
  cr_expect(ties > 5 && tie_terms == ties, "%d ties planted, %d seen", ties, tie_terms);
  cr_expect(fabs(o.loss - loss) <= EQ_TOL * loss, "loss %.9g, equations %.9g", o.loss, loss);
  cr_expect_eq(o.count, count, "count %g, mask sum %g", o.count, count);
  double col_total = 0.0;
  for (int k = 0; k < d.O; k++) {
    cr_expect(fabs(o.col_loss[k] - col[k]) <= EQ_TOL * col[k], "column %d: %.9g vs %.9g", k,
              o.col_loss[k], col[k]);
    cr_expect_eq(o.col_count[k], cols_n[k], "column %d count %g vs %g", k, o.col_count[k],
                 cols_n[k]);
    col_total += o.col_loss[k];
  }
  cr_expect(fabs(col_total - o.loss) <= 1e-12 * o.loss, "columns add up to %.17g, loss %.17g",
            col_total, o.loss);
  double const db_err = ref_rel_err(o.grads + ob, db, d.O);
  double const dw_err = ref_rel_err(o.grads + ow, dw, (size_t)d.O * d.H);
  cr_expect(db_err <= EQ_TOL && dw_err <= EQ_TOL, "head gradients: bias %.3g, weight %.3g off",
            db_err, dw_err);
  ls_engine_destroy(e);
  free(mask), free(pred0), free(col), free(cols_n), free(db), free(dw);
  out_t oo = o;
  out_free(&oo);
  data_free(&w);
}

Test(loss, unknown_targets_change_nothing_whatever_they_hold) {
  ref_dims_t const d = {2, 10, 2, 6, 6, 3};
  size_t const NO = (size_t)d.T * d.B * d.O;
  data_t w = data(&d, 24);
  float *const mask = malloc(NO * sizeof(float));
  for (size_t i = 0; i < NO; i++)
    mask[i] = i == 0 || i % 3 != 1 ? 1.0f : 0.0f;
  float const held[3] = {0.0f, NAN, 1e30f};
  out_t o[3];
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < NO; i++)
      if (mask[i] == 0.0f) w.tgt[i] = held[k];
    o[k] = run(&d, mixed, ELEMS, w.x, w.tgt, mask, NULL, 0.5f);
    cr_expect(isfinite(o[k].loss), "unknown targets %g: loss %g", (double)held[k], o[k].loss);
  }
  expect_same(&d, &o[1], &o[0], 1, "NaN unknown targets");
  expect_same(&d, &o[2], &o[0], 1, "1e30 unknown targets");
  cr_expect_eq(o[0].count, (double)(NO - NO / 3), "count %g", o[0].count);
  for (int k = 0; k < 3; k++)
    out_free(&o[k]);
  free(mask);
  data_free(&w);
}

Test(loss, lengths_set_the_state_carried_on) {
  ref_dims_t const d = {2, 10, 2, 6, 6, 4};
  size_t const TB = (size_t)d.T * d.B, NO = TB * d.O, LBH = (size_t)d.L * d.B * d.H;
  data_t w = data(&d, 25);
  /* Rows of 6, 4, 0 and 3 real steps; row 1's last 2 and row 3's last
   * step have no known target (horizons not read yet). */
  int const lengths[4] = {6, 4, 0, 3}, known[4] = {6, 2, 0, 2};
  float *const mask = malloc(NO * sizeof(float)), *const rows = malloc(TB * sizeof(float));
  for (int t = 0; t < d.T; t++)
    for (int b = 0; b < d.B; b++) {
      rows[t * d.B + b] = t < lengths[b] ? 1.0f : 0.0f;
      for (int o = 0; o < d.O; o++)
        mask[((size_t)t * d.B + b) * d.O + o] = t < known[b] && (o + t) % 3 != 2 ? 1.0f : 0.0f;
    }
  /* With lengths: the state after step lengths[b] - 1, as a row mask
   * of those steps gives it. */
  out_t const el = run(&d, mixed, ELEMS, w.x, w.tgt, mask, lengths, 1.0f);
  out_t const rm = run(&d, mixed, ROWS, w.x, w.tgt, rows, NULL, 1.0f);
  cr_expect(!memcmp(el.hT, rm.hT, LBH * sizeof(float)) &&
                !memcmp(el.cT, rm.cT, LBH * sizeof(float)),
            "the state carried on is not the one after each row's lengths");
  /* Without: the state after each row's last step with a known target. */
  for (int t = 0; t < d.T; t++)
    for (int b = 0; b < d.B; b++)
      rows[t * d.B + b] = t < known[b] ? 1.0f : 0.0f;
  out_t const el2 = run(&d, mixed, ELEMS, w.x, w.tgt, mask, NULL, 1.0f);
  out_t const rm2 = run(&d, mixed, ROWS, w.x, w.tgt, rows, NULL, 1.0f);
  cr_expect(!memcmp(el2.hT, rm2.hT, LBH * sizeof(float)) &&
                !memcmp(el2.cT, rm2.cT, LBH * sizeof(float)),
            "without lengths, the state carried on is not the one after the last known target");
  cr_expect(memcmp(el.hT, el2.hT, LBH * sizeof(float)), "lengths changed no state");
  /* The scatter stores the same states. */
  ls_engine_t *e = engine(&d, mixed);
  ls_state_table_t *tab = NULL;
  int64_t const slots[4] = {3, 0, 2, 1};
  float *th = malloc(LBH * sizeof(float)), *tc = malloc(LBH * sizeof(float));
  cr_assert_eq(ls_state_table_new(e, 4, &tab), LS_OK);
  cr_assert_eq(ls_engine_set_state(e, d.B, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward_elem(e, d.T, d.B, w.x, w.tgt, mask, lengths, NULL, NULL), LS_OK,
               "%s", ls_last_error());
  cr_assert_eq(ls_engine_scatter_state(e, tab, d.B, slots), LS_OK);
  cr_assert_eq(ls_state_table_read(tab, 0, 4, th, tc), LS_OK);
  size_t bad = 0;
  for (int b = 0; b < d.B; b++)
    for (int l = 0; l < d.L; l++)
      bad += memcmp(th + ((size_t)slots[b] * d.L + l) * d.H, el.hT + ((size_t)l * d.B + b) * d.H,
                    d.H * sizeof(float)) != 0;
  cr_expect_eq(bad, 0, "%zu scattered states are not the ones read", bad);
  ls_state_table_destroy(tab);
  ls_engine_destroy(e);
  out_t o[] = {el, rm, el2, rm2};
  for (size_t i = 0; i < sizeof o / sizeof o[0]; i++)
    out_free(&o[i]);
  free(mask), free(rows), free(th), free(tc);
  data_free(&w);
}

Test(loss, the_losses_set_are_the_losses_read) {
  ref_dims_t const d = {2, 4, 1, 6, 2, 2};
  ls_engine_t *e = engine(&d, NULL);
  ls_loss_col_t got[6];
  cr_assert_eq(ls_engine_get_loss(e, got, 6), LS_OK);
  for (int o = 0; o < 6; o++)
    cr_expect(got[o].kind == LS_LOSS_MSE && got[o].tau == 0.0f, "a new engine's column %d", o);
  cr_assert_eq(ls_engine_set_loss(e, mixed, 6), LS_OK);
  cr_assert_eq(ls_engine_get_loss(e, got, 6), LS_OK);
  cr_expect(!memcmp(got, mixed, sizeof mixed), "the losses read are not the ones set");
  ls_engine_destroy(e);
}
