/*
 * The CUDA backend's head, loss and optimizer (kernels/lstm_cuda.h; their
 * twins are lstm_cpu.c's): the linear head, the targets of a sequence, the
 * masked MSE, each column's loss (squared error or pinball, loss_elem.h)
 * and the gradient norm as deterministic sums in double (one kernel each:
 * the last block adds the blocks' parts up), the losses column by column,
 * and clip + Adam/AdamW in one kernel reading its arguments from device
 * memory.
 */
#include <math.h>

#include "loss_elem.h"
#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* Head and loss                                                             */

ls_err_t head_forward(void *ctx, float *pred, const float *y, const float *w, const float *b, int N,
                      int H, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  LS_FORWARD_IF_ERROR(fill_rows(c, pred, b, NULL, N, O));
  /* pred [N, O] += y [N, H] @ w^T; cuBLAS: (T, N, O, N, H, w, H, y, H, pred, O). */
  LS_FORWARD_IF_ERROR(sgemm(c, NoTrans, Trans, N, O, H, 1.0f, y, H, w, H, 1.0f, pred, O));
  return LS_OK;
}

ls_err_t seq_targets(void *ctx, const float **target, const float *seq, int B, int In) {
  (void)ctx; /* nothing to launch: the targets are rows of the device copy of seq */
  *target = seq + (size_t)B * In; /* row 1 */
  return LS_OK;
}

/* The end of a loss kernel, in every thread: the block's sums of m * l
 * (sum) and of m (valid) into partials[2 * block + {0, 1}], then, in the
 * last block, their totals into loss[0] and loss[1] (times mul1). sh: a
 * shared double[THREADS]; last: a shared int. */
__device__ static void loss_sums(double *loss, double *partials, unsigned *ticket, double sum,
                                 double valid, double mul1, double *sh, int *last) {
  sum = block_sum(sum, sh);
  valid = block_sum(valid, sh);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sum;
    partials[2 * blockIdx.x + 1] = valid;
  }
  if (last_block(ticket, last)) reduce_partials(loss, partials, (int)gridDim.x, 2, mul1, sh);
}

/* One thread per row (grid-stride over N rows): the row's squared error in
 * float and dpred as on the CPU; then, per block, the sums of m * row and
 * of m in double into partials[2 * block + {0, 1}]; the last block adds
 * them up into loss[0] and loss[1] (times O). */
__global__ static void mse_loss_kernel(double *loss, double *partials, unsigned *ticket,
                                       float *dpred, const float *pred, const float *target,
                                       const float *mask, float scale, int N, int O) {
  __shared__ double sh[THREADS];
  __shared__ int last;
  double sum = 0.0, valid = 0.0;
  GRID_STRIDE(r, (size_t)N) {
    float const m = mask != NULL ? mask[r] : 1.0f;
    const float *const p = pred + r * O, *const y = target + r * O;
    float *const d = dpred != NULL ? dpred + r * O : NULL;
    if (m == 0.0f) { /* padding: exactly nothing, whatever pred holds */
      if (d != NULL)
        for (int o = 0; o < O; o++)
          d[o] = 0.0f;
      continue;
    }
    float row = 0.0f;
    for (int o = 0; o < O; o++) {
      float const e = p[o] - y[o];
      row += e * e;
      if (d != NULL) d[o] = 2.0f * scale * m * e;
    }
    sum += (double)m * row;
    valid += m;
  }
  loss_sums(loss, partials, ticket, sum, valid, (double)O, sh, &last);
}

ls_err_t mse_loss(void *ctx, double *loss, float *dpred, const float *pred, const float *target,
                  const float *mask, float scale, int N, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  unsigned blocks = grid_for((size_t)N);
  blocks = blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
  /* loss[0] = sum, loss[1] = valid * O. */
  mse_loss_kernel<<<blocks, THREADS, 0, c->stream>>>(loss, c->partials, c->tickets + TICKET_LOSS,
                                                     dpred, pred, target, mask, scale, N, O);
  LAUNCH_CHECK("mse_loss_kernel");
  return LS_OK;
}

/* One thread per row (grid-stride over N rows), as mse_loss_kernel: the
 * row's losses (loss_elem.h) summed in double, its mask per row (mask_cols
 * 1) or per element (mask_cols O), dpred as on the CPU; then per block the
 * sums of m * l and of m into partials[2 * block + {0, 1}]; the last block
 * adds them up into loss[0] and loss[1]. */
__global__ static void elem_loss_kernel(double *loss, double *partials, unsigned *ticket,
                                        float *dpred, const float *pred, const float *target,
                                        const float *mask, int mask_cols, const float *tau,
                                        float scale, int N, int O) {
  __shared__ double sh[THREADS];
  __shared__ int last;
  double sum = 0.0, valid = 0.0;
  GRID_STRIDE(r, (size_t)N) {
    const float *const p = pred + r * O, *const y = target + r * O;
    const float *const me = mask != NULL && mask_cols > 1 ? mask + r * O : NULL;
    float const mr = mask != NULL && mask_cols == 1 ? mask[r] : 1.0f;
    float *const d = dpred != NULL ? dpred + r * O : NULL;
    if (mr == 0.0f) { /* padding: exactly nothing, whatever pred holds */
      if (d != NULL)
        for (int o = 0; o < O; o++)
          d[o] = 0.0f;
      continue;
    }
    double row = 0.0, known = 0.0;
    for (int o = 0; o < O; o++) {
      float const m = me != NULL ? me[o] : 1.0f;
      if (m == 0.0f) { /* not known: exactly nothing */
        if (d != NULL) d[o] = 0.0f;
        continue;
      }
      float g;
      float const l = loss_elem(p[o] - y[o], tau[o], &g);
      row += (double)(m * l);
      known += m;
      if (d != NULL) d[o] = scale * (mr * m) * g;
    }
    sum += (double)mr * row;
    valid += (double)mr * known;
  }
  loss_sums(loss, partials, ticket, sum, valid, 1.0, sh, &last);
}

ls_err_t elem_loss(void *ctx, double *loss, float *dpred, const float *pred, const float *target,
                   const float *mask, int mask_cols, const float *tau, float scale, int N, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  unsigned blocks = grid_for((size_t)N);
  blocks = blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
  elem_loss_kernel<<<blocks, THREADS, 0, c->stream>>>(loss, c->partials, c->tickets + TICKET_LOSS,
                                                      dpred, pred, target, mask, mask_cols, tau,
                                                      scale, N, O);
  LAUNCH_CHECK("elem_loss_kernel");
  return LS_OK;
}

/* col [O] = each column's sum over N rows of m * l, in colsum_kernel's
 * passes (colsum_part, colsum_total): a block takes a chunk of rows for 32
 * columns (threads 32 columns x 8 row lanes) into part[chunk, j]; the last
 * block to finish adds the chunks up in chunk order. */
__global__ static void loss_cols_kernel(double *col, double *part, unsigned *ticket,
                                        const float *pred, const float *target, const float *mask,
                                        int mask_cols, const float *tau, int N, int O,
                                        int chunk_rows) {
  __shared__ double sh[8][33];
  __shared__ int last;
  int const j = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
  int const r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < N ? r0 + chunk_rows : N;
  double acc = 0.0;
  if (j < O)
    for (int r = r0 + threadIdx.y; r < r1; r += 8) {
      size_t const i = (size_t)r * O + j;
      float const m = mask == NULL ? 1.0f : mask_cols > 1 ? mask[i] : mask[r];
      if (m == 0.0f) continue;
      float g;
      acc += (double)(m * loss_elem(pred[i] - target[i], tau[j], &g));
    }
  colsum_part(acc, sh, part, j, O);
  if (!last_block(ticket, &last)) return;
  for (int i = threadIdx.y * 32 + threadIdx.x; i < O; i += 32 * 8)
    col[i] = colsum_total(part, i, O);
}

ls_err_t loss_cols(void *ctx, double *col, const float *pred, const float *target,
                   const float *mask, int mask_cols, const float *tau, int N, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  int chunks = (N + COLSUM_MIN_ROWS - 1) / COLSUM_MIN_ROWS;
  chunks = chunks > COLSUM_CHUNKS ? COLSUM_CHUNKS : chunks;
  int const chunk_rows = (N + chunks - 1) / chunks;
  dim3 const grid((unsigned)((O + 31) / 32), (unsigned)chunks), block(32, 8);
  loss_cols_kernel<<<grid, block, 0, c->stream>>>(col, c->colsum, c->tickets + TICKET_LOSS_COLS,
                                                  pred, target, mask, mask_cols, tau, N, O,
                                                  chunk_rows);
  LAUNCH_CHECK("loss_cols_kernel");
  return LS_OK;
}

ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                       const float *y, const float *w, int N, int H, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  /* dy [N, H] = dpred [N, O] @ w [O, H]; cuBLAS: (N, N, H, N, O, w, H, dpred, O, dy, H). */
  LS_FORWARD_IF_ERROR(sgemm(c, NoTrans, NoTrans, N, H, O, 1.0f, dpred, O, w, H, 0.0f, dy, H));
  /* dw [O, H] += dpred^T @ y; cuBLAS: (N, T, H, O, N, y, H, dpred, O, dw, H). */
  LS_FORWARD_IF_ERROR(sgemm(c, Trans, NoTrans, O, H, N, 1.0f, dpred, O, y, H, 1.0f, dw, H));
  return colsum_add(c, db, NULL, dpred, N, O);
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */

/* norm_sq[0] = sum g^2; its last block then counts the update in steps[0]
 * unless it is to be skipped (a gradient that is not finite): one writer,
 * before adam_update_kernel's blocks read it. */
__global__ static void grad_norm_sq_kernel(double *norm_sq, double *steps,
                                           const ls_optim_args_t *args, double *partials,
                                           unsigned *ticket, const float *g, size_t n) {
  __shared__ double sh[THREADS];
  __shared__ int last;
  double sum = 0.0;
  GRID_STRIDE(i, n) sum += (double)g[i] * (double)g[i];
  sum = block_sum(sum, sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
  if (!last_block(ticket, &last)) return;
  reduce_partials(norm_sq, partials, (int)gridDim.x, 1, 1.0, sh);
  /* Thread 0 wrote norm_sq. */
  if (threadIdx.x == 0 && !(args->opt.skip_nonfinite && !isfinite(*norm_sq))) *steps += 1.0;
}

/* torch.optim.Adam(W), single-tensor path, after clip_grad_norm_, with
 * the arguments of this step from device memory. The clip coefficient
 * and the bias corrections (of the count in steps[0], this update's) in
 * double, then float, as on the CPU. A gradient that is not finite, with
 * skip_nonfinite, is only zeroed. */
__global__ static void adam_update_kernel(float *p, float *g, float *m, float *v, size_t n,
                                          const double *norm_sq, const double *steps,
                                          const ls_optim_args_t *args) {
  ls_optim_t const opt = args->opt;
  int const skip = opt.skip_nonfinite && !isfinite(*norm_sq);
  if (skip) { /* NaN or Inf in g */
    GRID_STRIDE(i, n) g[i] = 0.0f;
    return;
  }
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  double const norm = (double)args->grad_scale * sqrt(*norm_sq);
  double coef = 1.0;
  if (opt.clip_norm > 0.0f) {
    coef = (double)opt.clip_norm / (norm + 1e-6);
    coef = coef < 1.0 ? coef : 1.0;
  }
  float const gs = (float)((double)args->grad_scale * coef);
  float const b1 = opt.beta1, b2 = opt.beta2, lr = opt.lr, eps = opt.eps;
  double const bc1 = 1.0 - pow((double)b1, *steps);
  double const bc2 = 1.0 - pow((double)b2, *steps);
  float const step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float const decay = opt.decoupled ? 1.0f - lr * opt.weight_decay : 1.0f;
  float const l2 = opt.decoupled ? 0.0f : opt.weight_decay;
  GRID_STRIDE(i, n) {
    float const gi = g[i] * gs + l2 * p[i];
    float const pi = p[i] * decay;
    float const mi = m[i] + (1.0f - b1) * (gi - m[i]); /* lerp, weight < 0.5 */
    float const vi = v[i] * b2 + (1.0f - b2) * gi * gi;
    float const denom = sqrtf(vi) / bc2_sqrt + eps;
    p[i] = pi - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    g[i] = 0.0f;
  }
}

ls_err_t optimizer_step(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                        double *norm_sq, double *steps, const ls_optim_args_t *args) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  /* A grid that depends on n alone makes the sum reproducible. */
  unsigned blocks = grid_for(n);
  blocks = blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
  grad_norm_sq_kernel<<<blocks, THREADS, 0, c->stream>>>(norm_sq, steps, args, c->partials,
                                                         c->tickets + TICKET_NORM, g, n);
  LAUNCH_CHECK("grad_norm_sq_kernel");
  adam_update_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(p, g, m, v, n, norm_sq, steps, args);
  LAUNCH_CHECK("adam_update_kernel");
  return LS_OK;
}
