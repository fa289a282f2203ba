/*
 * The recurrent kernels of recur_cpu.h for one instruction set (vec_cpu.h).
 *
 * Forward, a tile is MR batch rows x the four gates of one panel of U
 * hidden units: [x_t, h_{t-1}] @ the panel's packed weights plus biases,
 * then the cell, whose outputs (h_t, c_t) the next step reads. Backward, a
 * tile is MR rows x four panels of U units: the gradient from above plus
 * dgates_{t+1} @ w_hh, then the cell backward, which also adds the rows'
 * dgates into the bias sums.
 */
#include "gemm_cpu.h" /* gemm_cpu.c, the same instruction set */
#include "recur_cpu.h"
#include "vec_cpu.h"

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* The cell of one row of step t at units j0 .. j0+n-1 (row: its offset in
 * a [B, H] block); acc (i, f, g, o) holds the pre-activations.
 * c = f * c_prev + i * g; tc = tanh(c); h = o * tc. */
INLINE void fwd_cell_row(const recur_fwd_t *a, int t, size_t row, float *g, const vf acc[4],
                         int n) {
  int const H = a->H;
  size_t const BH = (size_t)a->B * H;
  vf const i = vsigmoid(acc[0]), f = vsigmoid(acc[1]), gt = vtanh(acc[2]);
  vf const o = vsigmoid(acc[3]);
  vf const c = f * load(a->cs + t * BH + row, n) + i * gt;
  vf const tc = vtanh(c);
  store(g, i, n);
  store(g + H, f, n);
  store(g + 2 * H, gt, n);
  store(g + 3 * H, o, n);
  store(a->cs + (t + 1) * BH + row, c, n);
  store(a->tcs + t * BH + row, tc, n);
  store(a->hs + (t + 1) * BH + row, o * tc, n);
}

/* The cell on a finished tile: rows b .. b+mr-1 of step t, units j0 .. j0+n-1. */
static void fwd_cell(const recur_fwd_t *a, int t, int b, int mr, int j0, int n,
                     const vf acc[MR][4]) {
  size_t const G = 4 * (size_t)a->H;
  for (int r = 0; r < mr; r++) {
    size_t const row = (size_t)(b + r) * a->H + j0;
    float *const g = a->gates + ((size_t)t * a->B + b + r) * G + j0;
    if (n == U)
      fwd_cell_row(a, t, row, g, acc[r], U);
    else
      fwd_cell_row(a, t, row, g, acc[r], n);
  }
}

/* Rows b .. b+mr-1 of step t, panel p: biases + x_t @ w_ih^T + h_{t-1} @
 * w_hh^T, then the cell. */
INLINE void fwd_tile(const recur_fwd_t *a, int t, int b, int p, int mr) {
  int const H = a->H, In = a->In, j0 = p * U, n = H - j0 < U ? H - j0 : U;
  const float *const wp = a->wp + (size_t)p * (size_t)(In + H) * 4 * U;
  size_t const row = (size_t)t * a->B + b;
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int q = 0; q < 4; q++)
      acc[r][q] = *(const vf *)(a->bias + ((size_t)p * 4 + q) * U);
  core(acc, mr, 4, a->x + row * In, (size_t)In, 1, wp, 4 * U, In);
  core(acc, mr, 4, a->hs + row * H, (size_t)H, 1, wp + (size_t)In * 4 * U, 4 * U, H);
  fwd_cell(a, t, b, mr, j0, n, acc);
}

static void fwd_block(const recur_fwd_t *a, int t, int b, int p, int mr) {
  ROW_SWITCH(mr, fwd_tile, a, t, b, p);
}

static void forward_rows(const recur_fwd_t *a, int b0, int b1) {
  int const P = (a->H + U - 1) / U, RC = chunk_rows(a->In + a->H);
  for (int t = 0; t < a->T; t++)
    for (int c0 = b0; c0 < b1; c0 += RC) {
      int const c1 = b1 - c0 < RC ? b1 : c0 + RC;
      for (int p = 0; p < P; p++)
        for (int b = c0; b < c1; b += MR)
          fwd_block(a, t, b, p, c1 - b < MR ? c1 - b : MR);
    }
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */

/* The cell backward of one row of step t at units j0 .. j0+n-1 (row: its
 * offset in a [B, H] block, grow in a [B, 4H] one); d_h = d loss / d h_t.
 * dc: in d/dc_t from step t+1, out d/dc_{t-1}; dgates_t: the pre-activation
 * gradients, also added to sum (i, f, g, o). */
INLINE void bwd_cell_row(const recur_bwd_t *a, int t, size_t row, size_t grow, vf d_h, vf sum[4],
                         int n) {
  int const H = a->H;
  size_t const BH = (size_t)a->B * H;
  const float *const g = a->gates + grow;
  float *const dg = a->dgates + grow, *const dc = a->dc + row;
  vf const i = load(g, n), f = load(g + H, n), gt = load(g + 2 * H, n);
  vf const o = load(g + 3 * H, n), tc = load(a->tcs + t * BH + row, n);
  vf const d_c = load(dc, n) + d_h * o * (1.0f - tc * tc);
  vf const di = d_c * gt * i * (1.0f - i);
  vf const df = d_c * load(a->cs + t * BH + row, n) * f * (1.0f - f);
  vf const dg_ = d_c * i * (1.0f - gt * gt), d_o = d_h * tc * o * (1.0f - o);
  store(dg, di, n);
  store(dg + H, df, n);
  store(dg + 2 * H, dg_, n);
  store(dg + 3 * H, d_o, n);
  store(dc, d_c * f, n);
  sum[0] += di, sum[1] += df, sum[2] += dg_, sum[3] += d_o;
}

/* The cell backward on a finished tile: rows b .. b+mr-1 of step t, panels
 * v0 .. v0+nv-1; acc [MR][4] holds d loss / d h_t there. The dgates' sum
 * over the tile's rows (float, at most MR terms) is added to db. */
static void bwd_cell(const recur_bwd_t *a, int t, int b, int mr, int v0, int nv,
                     const vf acc[MR][4], double *db) {
  int const H = a->H;
  size_t const G = 4 * (size_t)H;
  for (int v = 0; v < nv; v++) {
    int const j0 = (v0 + v) * U, n = H - j0 < U ? H - j0 : U;
    vf sum[4] = {{0}, {0}, {0}, {0}};
    for (int r = 0; r < mr; r++) {
      size_t const row = (size_t)(b + r) * H + j0, grow = ((size_t)t * a->B + b + r) * G + j0;
      if (n == U)
        bwd_cell_row(a, t, row, grow, acc[r][v], sum, U);
      else
        bwd_cell_row(a, t, row, grow, acc[r][v], sum, n);
    }
    for (int k = 0; k < 4; k++)
      add_double(db + (size_t)k * H + j0, sum[k], n);
  }
}

/* Rows b .. b+mr-1 of step t, panels v0 .. v0+nv-1: d/dh = the gradient
 * from above plus dgates_{t+1} @ w_hh (t < T-1), then the cell. */
INLINE void bwd_tile(const recur_bwd_t *a, int t, int b, int v0, double *db, int mr, int nv) {
  int const H = a->H, G = 4 * H, j0 = v0 * U;
  size_t const BH = (size_t)a->B * H;
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      int const n = H - j0 - v * U < U ? H - j0 - v * U : U;
      acc[r][v] = load(a->dh + t * BH + (size_t)(b + r) * H + j0 + v * U, n);
    }
  if (t < a->T - 1)
    core(acc, mr, nv, a->dgates + ((size_t)(t + 1) * a->B + b) * G, (size_t)G, 1,
         a->wp + (size_t)v0 * U * G, (size_t)nv * U, G);
  bwd_cell(a, t, b, mr, v0, nv, acc, db);
}

static void bwd_block(const recur_bwd_t *a, int t, int b, int v0, double *db, int mr, int nv) {
  TILE_SWITCH(mr, nv, bwd_tile, a, t, b, v0, db);
}

_Static_assert(RECUR_DB_ROWS % MR == 0, "a tile's rows fall in one bias-gradient partial sum");

/* Steps T-1 .. 0, then dh0 = dgates_0 @ w_hh. */
static void backward_rows(const recur_bwd_t *a, int b0, int b1, double *db) {
  int const H = a->H, G = 4 * H, P = (H + U - 1) / U, RC = chunk_rows(G);
  int const d0 = b0 / RECUR_DB_ROWS, d1 = (b1 + RECUR_DB_ROWS - 1) / RECUR_DB_ROWS;
  for (size_t j = (size_t)d0 * G; j < (size_t)d1 * G; j++)
    db[j] = 0.0;
  for (int t = a->T - 1; t >= 0; t--)
    for (int c0 = b0; c0 < b1; c0 += RC) {
      int const c1 = b1 - c0 < RC ? b1 : c0 + RC;
      for (int q = 0; q < recur_groups(P); q++) {
        int v0, nv;
        recur_group(P, q, &v0, &nv);
        for (int b = c0; b < c1; b += MR)
          bwd_block(a, t, b, v0, db + (size_t)(b / RECUR_DB_ROWS) * G, c1 - b < MR ? c1 - b : MR,
                    nv);
      }
    }
  ISA_NAME(gemm_nn)(a->dh0, H, a->dgates, G, a->wp, b0, b1, H, G);
}

const recur_kernels_t CAT(recur_, VEC_ISA) = {
    .name = STR(VEC_ISA),
    .width = U,
    .forward_rows = forward_rows,
    .backward_rows = backward_rows,
    .gemm_tn = ISA_NAME(gemm_tn),
    .gemm_nn = ISA_NAME(gemm_nn),
};
