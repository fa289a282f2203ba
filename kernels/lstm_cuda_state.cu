/*
 * The CUDA backend's series states (kernels/lstm_cuda.h; the twins are
 * lstm_cpu.c's): a batch's initial states gathered from a state table and
 * its final states scattered back, by slot.
 */
#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* Series states                                                             */

/* One thread per (b, l, j), j fastest: rows of the table and of the state
 * blocks are read and written contiguously. */
__global__ static void state_gather_kernel(float *h0, float *c0, size_t stride, const float *tab_h,
                                           const float *tab_c, const int64_t *slots, int B, int L,
                                           int H) {
  GRID_STRIDE(i, (size_t)B * L * H) {
    size_t const j = i % (size_t)H, l = i / (size_t)H % (size_t)L, b = i / ((size_t)H * L);
    size_t const dst = l * stride + b * H + j;
    int64_t const s = slots[b];
    if (s < 0) {
      h0[dst] = 0.0f;
      c0[dst] = 0.0f;
    } else {
      size_t const src = ((size_t)s * L + l) * H + j;
      h0[dst] = tab_h[src];
      c0[dst] = tab_c[src];
    }
  }
}

ls_err_t state_gather(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
                      const float *tab_c, const int64_t *slots, int B, int L, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(mem_upload(c, c->slots, slots, (size_t)B * sizeof(int64_t)));
  state_gather_kernel<<<grid_for((size_t)B * L * H), THREADS, 0, c->stream>>>(
      h0, c0, stride, tab_h, tab_c, c->slots, B, L, H);
  LAUNCH_CHECK("state_gather_kernel");
  return LS_OK;
}

__global__ static void state_scatter_kernel(float *tab_h, float *tab_c, const float *hT,
                                            const float *cT, size_t stride, const int64_t *slots,
                                            int B, int L, int H) {
  GRID_STRIDE(i, (size_t)B * L * H) {
    size_t const j = i % (size_t)H, l = i / (size_t)H % (size_t)L, b = i / ((size_t)H * L);
    int64_t const s = slots[b];
    if (s < 0) continue;
    size_t const dst = ((size_t)s * L + l) * H + j, src = l * stride + b * H + j;
    tab_h[dst] = hT[src];
    tab_c[dst] = cT[src];
  }
}

ls_err_t state_scatter(void *ctx, float *tab_h, float *tab_c, const float *hT, const float *cT,
                       size_t stride, const int64_t *slots, int B, int L, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(mem_upload(c, c->slots, slots, (size_t)B * sizeof(int64_t)));
  state_scatter_kernel<<<grid_for((size_t)B * L * H), THREADS, 0, c->stream>>>(
      tab_h, tab_c, hT, cT, stride, c->slots, B, L, H);
  LAUNCH_CHECK("state_scatter_kernel");
  return LS_OK;
}
