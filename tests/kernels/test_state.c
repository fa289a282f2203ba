/*
 * Series-state tables, gather/scatter, and state carried across windows:
 * two windows of T with the state scattered and gathered in between equal
 * one window of 2T; gather/scatter copy rows exactly; a table grows without
 * losing rows; parameter initialisation is seeded and reproducible; a
 * padded window carries on the state after its last real record.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

static ls_engine_t *engine(int I, int H, int L, int B, int T) {
  ref_dims_t const d = {I, H, L, I, T, B};
  ls_engine_t *e = ref_engine(&d);
  cr_assert_not_null(e, "%s", ls_last_error());
  return e;
}

Test(state, gather_scatter_exact) {
  int const H = 6, L = 2, B = 3, S = 10;
  ls_engine_t *e = engine(2, H, L, B, 2);
  ls_state_table_t *tab = NULL;
  cr_assert_eq(ls_state_table_new(e, S, &tab), LS_OK);
  size_t const row = (size_t)L * H;
  float *h = malloc(sizeof(float) * S * row), *c = malloc(sizeof(float) * S * row);
  ref_fill(h, S * row, 1, 1.0f);
  ref_fill(c, S * row, 2, 1.0f);
  cr_assert_eq(ls_state_table_write(tab, 0, S, h, c), LS_OK);

  /* gather rows 7, -1 (zeros), 2; a forward of one step; scatter to 4, 9, -1 */
  int64_t const from[] = {7, -1, 2}, to[] = {4, 9, -1};
  cr_assert_eq(ls_engine_gather_state(e, tab, B, from), LS_OK, "%s", ls_last_error());
  float x[2 * 3 * 2] = {0};
  cr_assert_eq(ls_engine_forward(e, 1, B, x, NULL, NULL, NULL, NULL), LS_OK);
  /* h0 was the gathered state: a zero-input step from it is reproducible by set_state */
  float *hT = malloc(sizeof(float) * L * B * H), *cT = malloc(sizeof(float) * L * B * H);
  cr_assert_eq(ls_engine_read_outputs(e, NULL, NULL, hT, cT), LS_OK);
  cr_assert_eq(ls_engine_scatter_state(e, tab, B, to), LS_OK, "%s", ls_last_error());
  float *h2 = malloc(sizeof(float) * S * row), *c2 = malloc(sizeof(float) * S * row);
  cr_assert_eq(ls_state_table_read(tab, 0, S, h2, c2), LS_OK);
  for (int s = 0; s < S; s++)
    for (int l = 0; l < L; l++)
      for (int j = 0; j < H; j++) {
        size_t const at = ((size_t)s * L + l) * H + j;
        int const b = s == 4 ? 0 : s == 9 ? 1 : -1; /* batch row scattered here */
        float const wh = b < 0 ? h[at] : hT[((size_t)l * B + b) * H + j];
        float const wc = b < 0 ? c[at] : cT[((size_t)l * B + b) * H + j];
        cr_assert(h2[at] == wh && c2[at] == wc, "slot %d layer %d unit %d", s, l, j);
      }

  /* Same forward from states set by hand gives bit-identical final states. */
  float *h0 = calloc((size_t)L * B * H, sizeof(float)), *c0 = calloc((size_t)L * B * H, 4);
  for (int l = 0; l < L; l++)
    for (int b = 0; b < B; b++)
      if (from[b] >= 0) {
        memcpy(h0 + ((size_t)l * B + b) * H, h + ((size_t)from[b] * L + l) * H, H * sizeof(float));
        memcpy(c0 + ((size_t)l * B + b) * H, c + ((size_t)from[b] * L + l) * H, H * sizeof(float));
      }
  float *hT2 = malloc(sizeof(float) * L * B * H), *cT2 = malloc(sizeof(float) * L * B * H);
  cr_assert_eq(ls_engine_set_state(e, B, h0, c0), LS_OK);
  cr_assert_eq(ls_engine_forward(e, 1, B, x, NULL, NULL, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_read_outputs(e, NULL, NULL, hT2, cT2), LS_OK);
  cr_expect_arr_eq(hT, hT2, sizeof(float) * L * B * H);
  cr_expect_arr_eq(cT, cT2, sizeof(float) * L * B * H);

  free(h), free(c), free(h2), free(c2), free(hT), free(cT), free(h0), free(c0), free(hT2),
      free(cT2);
  ls_state_table_destroy(tab);
  ls_engine_destroy(e);
}

Test(state, two_windows_equal_one_long_window) {
  int const I = 3, H = 10, L = 2, B = 4, T = 5;
  ls_engine_t *e = engine(I, H, L, B, 2 * T);
  cr_assert_eq(ls_engine_init_params(e, 3), LS_OK);
  ls_state_table_t *tab = NULL;
  cr_assert_eq(ls_state_table_new(e, 8, &tab), LS_OK);
  int64_t const slots[] = {5, 0, 7, 2};
  size_t const step = (size_t)B * I;
  float *x = malloc(sizeof(float) * 2 * T * step);
  ref_fill(x, 2 * T * step, 9, 1.0f);
  float *y_long = malloc(sizeof(float) * 2 * T * B * H),
        *y_two = malloc(sizeof(float) * 2 * T * B * H);
  float *h_long = malloc(sizeof(float) * L * B * H), *h_two = malloc(sizeof(float) * L * B * H);

  cr_assert_eq(ls_engine_gather_state(e, tab, B, slots), LS_OK); /* fresh: zeros */
  cr_assert_eq(ls_engine_forward(e, 2 * T, B, x, NULL, NULL, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_read_outputs(e, y_long, NULL, h_long, NULL), LS_OK);

  for (int w = 0; w < 2; w++) {
    cr_assert_eq(ls_engine_gather_state(e, tab, B, slots), LS_OK);
    cr_assert_eq(ls_engine_forward(e, T, B, x + (size_t)w * T * step, NULL, NULL, NULL, NULL),
                 LS_OK);
    cr_assert_eq(ls_engine_read_outputs(e, y_two + (size_t)w * T * B * H, NULL, h_two, NULL),
                 LS_OK);
    cr_assert_eq(ls_engine_scatter_state(e, tab, B, slots), LS_OK);
  }
  /* The same arithmetic, except that BLAS may block (and so round) the
   * input-projection GEMM over 2T*B rows differently from two over T*B rows:
   * a few float ulps (1e-6 relative) and nothing more. A state that was not
   * carried would differ by O(1e-1). */
  double dy = 0, dh = 0;
  for (size_t i = 0; i < (size_t)2 * T * B * H; i++)
    dy = fmax(dy, fabs(y_long[i] - y_two[i]));
  for (size_t i = 0; i < (size_t)L * B * H; i++)
    dh = fmax(dh, fabs(h_long[i] - h_two[i]));
  cr_expect(dy <= 1e-6 && dh <= 1e-6, "outputs differ by %.3g, final states by %.3g", dy, dh);
  free(x), free(y_long), free(y_two), free(h_long), free(h_two);
  ls_state_table_destroy(tab);
  ls_engine_destroy(e);
}

/* A batch whose rows end early (a replay's last windows, a live step fired
 * by its deadline): scatter stores, and read_outputs gives, each row's state
 * after its last valid step, which equals the state of a forward over that
 * row's records alone; a row with no valid step keeps its initial state. */
Test(state, padded_rows_carry_the_state_after_their_last_record) {
  int const I = 2, H = 7, L = 2, B = 4, T = 6;
  int const valid[] = {6, 4, 1, 0}; /* targets per row: full, partial, one, none */
  int64_t const slots[] = {3, 0, 5, 1};
  ls_engine_t *e = engine(I, H, L, B, T);
  cr_assert_eq(ls_engine_init_params(e, 8), LS_OK);
  ls_state_table_t *tab = NULL;
  cr_assert_eq(ls_state_table_new(e, 6, &tab), LS_OK);
  size_t const S = (size_t)L * B * H, row = (size_t)L * H;
  float *x = malloc(sizeof(float) * T * B * I), *mask = malloc(sizeof(float) * T * B);
  float *h0 = malloc(sizeof(float) * S), *c0 = malloc(sizeof(float) * S);
  float *hT = malloc(sizeof(float) * S), *cT = malloc(sizeof(float) * S);
  ref_fill(x, (size_t)T * B * I, 21, 1.0f);
  ref_fill(h0, S, 22, 0.5f);
  ref_fill(c0, S, 23, 0.5f);
  for (int t = 0; t < T; t++)
    for (int b = 0; b < B; b++)
      mask[t * B + b] = t < valid[b] ? 1.0f : 0.0f;
  cr_assert_eq(ls_engine_set_state(e, B, h0, c0), LS_OK);
  cr_assert_eq(ls_engine_forward(e, T, B, x, x, mask, NULL, NULL), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_read_outputs(e, NULL, NULL, hT, cT), LS_OK);
  cr_assert_eq(ls_engine_scatter_state(e, tab, B, slots), LS_OK, "%s", ls_last_error());
  for (int b = 0; b < B; b++) {
    float th[2 * 7], tc[2 * 7], want_h[2 * 7], want_c[2 * 7], xb[6 * 2], hb[2 * 7], cb[2 * 7];
    cr_assert_eq(ls_state_table_read(tab, (size_t)slots[b], 1, th, tc), LS_OK);
    for (int l = 0; l < L; l++) {
      memcpy(hb + l * H, h0 + ((size_t)l * B + b) * H, sizeof(float) * H);
      memcpy(cb + l * H, c0 + ((size_t)l * B + b) * H, sizeof(float) * H);
    }
    memcpy(want_h, hb, sizeof want_h), memcpy(want_c, cb, sizeof want_c);
    if (valid[b] > 0) { /* the row's records alone, no padding */
      for (int t = 0; t < valid[b]; t++)
        memcpy(xb + t * I, x + ((size_t)t * B + b) * I, sizeof(float) * I);
      cr_assert_eq(ls_engine_set_state(e, 1, hb, cb), LS_OK);
      cr_assert_eq(ls_engine_forward(e, valid[b], 1, xb, NULL, NULL, NULL, NULL), LS_OK);
      cr_assert_eq(ls_engine_read_outputs(e, NULL, NULL, want_h, want_c), LS_OK);
    }
    /* The same arithmetic over fewer rows: GEMM blocking may round the last
     * float bits differently; the state after padding is O(1e-2) away. */
    double dh = 0;
    for (size_t i = 0; i < row; i++) {
      int const l = (int)(i / H), j = (int)(i % H);
      float const rh = hT[((size_t)l * B + b) * H + j], rc = cT[((size_t)l * B + b) * H + j];
      dh = fmax(dh, fabs(th[i] - want_h[i]) + fabs(tc[i] - want_c[i]));
      cr_expect(th[i] == rh && tc[i] == rc, "row %d: scatter and read_outputs disagree", b);
    }
    cr_expect(dh <= 1e-6, "row %d (%d valid steps): off by %.3g", b, valid[b], dh);
  }
  free(x), free(mask), free(h0), free(c0), free(hT), free(cT);
  ls_state_table_destroy(tab);
  ls_engine_destroy(e);
}

Test(state, table_grows_keeping_rows) {
  int const H = 5, L = 3;
  ls_engine_t *e = engine(1, H, L, 2, 2);
  ls_state_table_t *tab = NULL;
  cr_assert_eq(ls_state_table_new(e, 3, &tab), LS_OK);
  size_t const row = (size_t)L * H;
  float h[3 * 15], c[3 * 15], h2[3 * 15], c2[3 * 15];
  ref_fill(h, 3 * row, 4, 1.0f);
  ref_fill(c, 3 * row, 5, 1.0f);
  cr_assert_eq(ls_state_table_write(tab, 0, 3, h, c), LS_OK);
  cr_assert_eq(ls_state_table_grow(tab, 1000), LS_OK);
  cr_assert_eq(ls_state_table_slots(tab), 1000);
  cr_assert_eq(ls_state_table_read(tab, 0, 3, h2, c2), LS_OK);
  cr_expect_arr_eq(h, h2, sizeof h);
  cr_expect_arr_eq(c, c2, sizeof c);
  cr_assert_eq(ls_state_table_read(tab, 997, 3, h2, c2), LS_OK);
  for (size_t i = 0; i < 3 * row; i++)
    cr_expect(h2[i] == 0.0f && c2[i] == 0.0f);
  cr_assert_eq(ls_state_table_grow(tab, 10), LS_OK, "shrinking is a no-op");
  cr_assert_eq(ls_state_table_slots(tab), 1000);
  ls_state_table_destroy(tab);
  ls_engine_destroy(e);
}

Test(state, init_is_seeded_and_bounded) {
  int const H = 9;
  ls_engine_t *a = engine(4, H, 2, 1, 1), *b = engine(4, H, 2, 1, 1);
  size_t const n = ls_engine_param_count(a);
  float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
  cr_assert_eq(ls_engine_init_params(a, 123), LS_OK);
  cr_assert_eq(ls_engine_init_params(b, 123), LS_OK);
  cr_assert_eq(ls_engine_read_params(a, pa, n), LS_OK);
  cr_assert_eq(ls_engine_read_params(b, pb, n), LS_OK);
  cr_expect_arr_eq(pa, pb, n * sizeof(float), "same seed, same parameters");
  double const k = 1.0 / sqrt((double)H);
  double lo = 0, hi = 0, mean = 0;
  for (size_t i = 0; i < n; i++) {
    cr_assert(fabs(pa[i]) <= k, "parameter %zu = %g outside +-1/sqrt(H)", i, pa[i]);
    lo = fmin(lo, pa[i]), hi = fmax(hi, pa[i]), mean += pa[i];
  }
  /* n = 1059 uniform draws: the extremes come within 1% of the bounds and
   * the mean within 5 standard errors (k / sqrt(3 n) each) of 0. */
  cr_expect(lo < -0.99 * k && hi > 0.99 * k, "range [%g, %g] for bound %g", lo, hi, k);
  cr_expect(fabs(mean / n) < 5 * k / sqrt(3.0 * n), "mean %g", mean / n);
  cr_assert_eq(ls_engine_init_params(b, 124), LS_OK);
  cr_assert_eq(ls_engine_read_params(b, pb, n), LS_OK);
  cr_expect(memcmp(pa, pb, n * sizeof(float)) != 0, "another seed, other parameters");
  free(pa), free(pb);
  ls_engine_destroy(a);
  ls_engine_destroy(b);
}
