/*
 * The CUDA backend's LSTM layer (kernels/lstm_cuda.h; its twin is
 * lstm_cpu.c's): a layer's forward and backward over a window. Where the
 * layer's recurrent weights fit on chip (its plan, lstm_cuda_persist.cu)
 * the whole recurrence is one persistent kernel and the rest a few GEMMs;
 * otherwise each time step is a cuBLAS GEMM and a fused cell kernel.
 */
#include <math.h>

#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* Pointwise cell math, one thread per (b, j) of one time step               */

/* Forward: g [B, 4H] pre-activations in, activated gates out;
 * c = f * c_prev + i * g; tc = tanh(c); h = o * tc. */
__global__ static void lstm_cell_forward_kernel(float *g, float *h, float *c, float *tc,
                                                const float *c_prev, int B, int H) {
  GRID_STRIDE(idx, (size_t)B * H) {
    size_t const b = idx / (size_t)H, j = idx % (size_t)H;
    float *const gr = g + b * 4 * H + j;
    float pre[4] = {gr[0], gr[H], gr[2 * H], gr[3 * H]};
    float cn, t;
    h[idx] = cell_forward(pre, c_prev[idx], &cn, &t);
    for (int k = 0; k < 4; k++)
      gr[k * H] = pre[k];
    c[idx] = cn;
    tc[idx] = t;
  }
}

static ls_err_t lstm_cell_forward(cuda_ctx_t *ctx, float *g, float *h, float *c, float *tc,
                                  const float *c_prev, int B, int H) {
  lstm_cell_forward_kernel<<<grid_for((size_t)B * H), THREADS, 0, ctx->stream>>>(g, h, c, tc,
                                                                                 c_prev, B, H);
  LAUNCH_CHECK("lstm_cell_forward_kernel");
  return LS_OK;
}

/* Backward of one step: dh [B, H] (output gradient plus the recurrent part),
 * dc [B, H] in: d/dc_t from step t+1, out: d/dc_{t-1}; dg [B, 4H] out:
 * pre-activation gate gradients. */
__global__ static void lstm_cell_backward_kernel(float *dg, float *dc, const float *dh,
                                                 const float *g, const float *tc,
                                                 const float *c_prev, int B, int H) {
  GRID_STRIDE(idx, (size_t)B * H) {
    size_t const b = idx / (size_t)H, j = idx % (size_t)H;
    const float *const gr = g + b * 4 * H + j;
    float *const dr = dg + b * 4 * H + j;
    float const gates[4] = {gr[0], gr[H], gr[2 * H], gr[3 * H]};
    float d[4], d_c = dc[idx];
    cell_backward(gates, tc[idx], c_prev[idx], dh[idx], &d_c, d);
    for (int k = 0; k < 4; k++)
      dr[k * H] = d[k];
    dc[idx] = d_c;
  }
}

static ls_err_t lstm_cell_backward(cuda_ctx_t *ctx, float *dg, float *dc, const float *dh,
                                   const float *g, const float *tc, const float *c_prev, int B,
                                   int H) {
  lstm_cell_backward_kernel<<<grid_for((size_t)B * H), THREADS, 0, ctx->stream>>>(dg, dc, dh, g, tc,
                                                                                  c_prev, B, H);
  LAUNCH_CHECK("lstm_cell_backward_kernel");
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* LSTM layer                                                                */

/* The input projection of all T steps is one GEMM (or, on a persistent
 * kernel that takes x itself, part of it); the recurrence is one
 * persistent kernel, or one GEMM and one fused cell kernel per step over
 * all B rows. */
ls_err_t lstm_forward(void *ctx, float *gates, float *hs, float *cs, float *tcs, const float *x,
                      const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh,
                      int T, int B, int In, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  int const N = T * B, G = 4 * H;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  LS_FORWARD_IF_ERROR(enter(c));
  const persist_plan_t *const plan = persist_plan(c, 0, In);
  if (plan != NULL) {
    /* gates [N, 4H] = x @ w_ih^T (the kernel adds the biases) */
    if (!plan->fused)
      LS_FORWARD_IF_ERROR(
          sgemm(c, NoTrans, Trans, N, G, In, 1.0f, x, In, w_ih, In, 0.0f, gates, G));
    return persist_forward(c, plan, gates, hs, cs, tcs, plan->fused ? x : NULL, w_ih, w_hh, b_ih,
                           b_hh, T, B, In, H);
  }
  /* gates [N, 4H] = b_ih + b_hh + x [N, In] @ w_ih^T: all T steps at once.
   * cuBLAS: cublasSgemm(T, N, 4H, N, In, w_ih, In, x, In, gates, 4H). */
  LS_FORWARD_IF_ERROR(fill_rows(c, gates, b_ih, b_hh, N, G));
  LS_FORWARD_IF_ERROR(sgemm(c, NoTrans, Trans, N, G, In, 1.0f, x, In, w_ih, In, 1.0f, gates, G));
  for (int t = 0; t < T; t++) {
    float *const g = gates + t * BG;
    /* gates[t] [B, 4H] += h_{t-1} [B, H] @ w_hh^T;
     * cuBLAS: cublasSgemm(T, N, 4H, B, H, w_hh, H, hs[t], H, g, 4H). */
    LS_FORWARD_IF_ERROR(
        sgemm(c, NoTrans, Trans, B, G, H, 1.0f, hs + t * BH, H, w_hh, H, 1.0f, g, G));
    LS_FORWARD_IF_ERROR(lstm_cell_forward(c, g, hs + (t + 1) * BH, cs + (t + 1) * BH, tcs + t * BH,
                                          cs + t * BH, B, H));
  }
  return LS_OK;
}

/* The recurrence on the persistent kernel (dgates, dh0, dc0, the bias
 * gradients, and where it takes x the input and input-weight gradients),
 * then the weight gradients over all T*B rows and dx as GEMMs. */
static ls_err_t lstm_backward_persist(cuda_ctx_t *c, const persist_plan_t *plan, float *dx,
                                      float *dh0, float *dc0, float *dw_ih, float *dw_hh,
                                      float *db_ih, float *db_hh, float *dgates, const float *dh,
                                      const float *gates, const float *hs, const float *cs,
                                      const float *tcs, const float *x, const float *w_ih,
                                      const float *w_hh, int T, int B, int In, int H) {
  int const N = T * B, G = 4 * H;
  int const fused = plan->fused;
  LS_FORWARD_IF_ERROR(persist_backward(c, plan, dgates, dh0, dc0, fused ? dw_ih : NULL, db_ih,
                                       db_hh, fused ? dx : NULL, dh, gates, cs, tcs,
                                       fused ? x : NULL, w_ih, w_hh, T, B, In, H));
  /* dw_hh [4H, H] += dgates^T @ hs[0..T-1]; as in lstm_backward below. */
  LS_FORWARD_IF_ERROR(sgemm(c, Trans, NoTrans, G, H, N, 1.0f, dgates, G, hs, H, 1.0f, dw_hh, H));
  if (fused) return LS_OK;
  LS_FORWARD_IF_ERROR(sgemm(c, Trans, NoTrans, G, In, N, 1.0f, dgates, G, x, In, 1.0f, dw_ih, In));
  return sgemm(c, NoTrans, NoTrans, N, In, G, 1.0f, dgates, G, w_ih, In, 0.0f, dx, In);
}

ls_err_t lstm_backward(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih, float *dw_hh,
                       float *db_ih, float *db_hh, float *dgates, float *dh, const float *gates,
                       const float *hs, const float *cs, const float *tcs, const float *x,
                       const float *w_ih, const float *w_hh, int T, int B, int In, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  int const N = T * B, G = 4 * H;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  LS_FORWARD_IF_ERROR(enter(c));
  const persist_plan_t *const plan = persist_plan(c, 1, In);
  if (plan != NULL)
    return lstm_backward_persist(c, plan, dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dgates, dh,
                                 gates, hs, cs, tcs, x, w_ih, w_hh, T, B, In, H);
  /* d/dc_T = 0; dc0 carries d/dc across steps and ends as d/dc_0. */
  CUDA_CHECK(cudaMemsetAsync(dc0, 0, BH * sizeof(float), c->stream));
  for (int t = T - 1; t >= 0; t--) {
    float *const dg = dgates + t * BG;
    /* dh[t] [B, H] += dgates[t+1] [B, 4H] @ w_hh [4H, H];
     * cuBLAS: cublasSgemm(N, N, H, B, 4H, w_hh, H, dgates[t+1], 4H, dh[t], H). */
    if (t < T - 1)
      LS_FORWARD_IF_ERROR(
          sgemm(c, NoTrans, NoTrans, B, H, G, 1.0f, dg + BG, G, w_hh, H, 1.0f, dh + t * BH, H));
    LS_FORWARD_IF_ERROR(lstm_cell_backward(c, dg, dc0, dh + t * BH, gates + t * BG, tcs + t * BH,
                                           cs + t * BH, B, H));
  }
  /* dh0 [B, H] = dgates[0] @ w_hh; cuBLAS: (N, N, H, B, 4H, w_hh, H, dgates, 4H, dh0, H). */
  LS_FORWARD_IF_ERROR(sgemm(c, NoTrans, NoTrans, B, H, G, 1.0f, dgates, G, w_hh, H, 0.0f, dh0, H));
  /* Weight gradients over all T*B rows at once.
   * dw_ih [4H, In] += dgates^T [4H, N] @ x [N, In];
   *   cuBLAS: (N, T, In, 4H, N, x, In, dgates, 4H, dw_ih, In).
   * dw_hh [4H, H] += dgates^T @ hs[0..T-1] [N, H];
   *   cuBLAS: (N, T, H, 4H, N, hs, H, dgates, 4H, dw_hh, H). */
  LS_FORWARD_IF_ERROR(sgemm(c, Trans, NoTrans, G, In, N, 1.0f, dgates, G, x, In, 1.0f, dw_ih, In));
  LS_FORWARD_IF_ERROR(sgemm(c, Trans, NoTrans, G, H, N, 1.0f, dgates, G, hs, H, 1.0f, dw_hh, H));
  LS_FORWARD_IF_ERROR(colsum_add(c, db_ih, db_hh, dgates, N, G));
  /* dx [N, In] = dgates @ w_ih [4H, In]; may overwrite dh, which is spent.
   * cuBLAS: (N, N, In, N, 4H, w_ih, In, dgates, 4H, dx, In). */
  LS_FORWARD_IF_ERROR(
      sgemm(c, NoTrans, NoTrans, N, In, G, 1.0f, dgates, G, w_ih, In, 0.0f, dx, In));
  return LS_OK;
}
