/*
 * The CUDA backend's persistent recurrent kernels (kernels/lstm_cuda.h):
 * which layers they fit (the plan), and the forward. The backward is in
 * lstm_cuda_persist_bwd.cu.
 *
 * One launch runs a layer's whole window. Its blocks form clusters of C;
 * each block keeps the recurrent weights of U = H / C hidden units (their
 * four gate rows, all H inputs) in shared memory for the whole window, so
 * that they are read from device memory once per launch instead of once
 * per time step. A cluster carries a group of batch rows through the T
 * steps: at each step every block computes the gates of its units for the
 * group's rows (partial dot products over slices of the inputs, added up
 * in a fixed order), applies the cell math, and writes its part of h_t
 * into the shared memory of every block of the cluster (distributed
 * shared memory); one cluster barrier per step, the inputs double-buffered
 * by step. With H = 64 a block holds all 64 units (C = 1); with H = 128 a
 * cluster of two blocks holds 64 each. Where the layer's input is small
 * (In <= H / 4) it is an input of the kernel too: the weights w_ih sit
 * beside w_hh and x_t beside h_{t-1}, so the input projection needs no
 * GEMM of its own. Larger H, or a device without room, keeps the per-step
 * path (lstm_cuda_layer.cu).
 *
 * Every row's arithmetic is the same whichever cluster carries it, and a
 * group's rows depend on B alone (persist_rows): results do not depend on
 * the device's size. Only constructs the CUDA emulator models are used
 * (no inline PTX): cooperative groups' cluster barrier and
 * map_shared_rank, dynamic shared memory, atomics (the backward's sums).
 */
#include <stdlib.h>
#include <string.h>

#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* The block's weights in shared memory: w [K][4U + 1] (the stride padded
 * against bank conflicts) holds at [k][g * U + u] the weight of input k
 * for gate row g * H + j0 + u, w_ih's for k < Kx and w_hh's after; bias
 * [4U] = b_ih + b_hh. Read along the rows of the weights (coalesced). */
__device__ static void fwd_load_weights(float *w, float *bias, const float *w_ih, const float *w_hh,
                                        const float *b_ih, const float *b_hh, int Kx, int In, int H,
                                        int U, int j0) {
  int const K = Kx + H, W = 4 * U + 1;
  for (int i = threadIdx.x; i < 4 * U * K; i += blockDim.x) {
    int const row = i / K, k = i % K;
    size_t const gr = (size_t)(row / U) * H + j0 + row % U;
    w[(size_t)k * W + row] = k < Kx ? w_ih[gr * In + k] : w_hh[gr * H + (k - Kx)];
  }
  for (int i = threadIdx.x; i < 4 * U; i += blockDim.x) {
    size_t const gr = (size_t)(i / U) * H + j0 + i % U;
    bias[i] = b_ih[gr] + b_hh[gr];
  }
}

/* A group's start: z [nb][K] = (x_0, h0) of its rows, cst [nb][U] = c0 of
 * the block's units. */
__device__ static void fwd_group_init(float *z, float *cst, const float *x, const float *hs,
                                      const float *cs, int r0, int nb, int Kx, int In, int H, int U,
                                      int j0) {
  int const K = Kx + H;
  for (int i = threadIdx.x; i < nb * K; i += blockDim.x) {
    int const b = i / K, k = i % K;
    z[i] = k < Kx ? x[(size_t)(r0 + b) * In + k] : hs[(size_t)(r0 + b) * H + (k - Kx)];
  }
  for (int i = threadIdx.x; i < nb * U; i += blockDim.x)
    cst[i] = cs[(size_t)(r0 + i / U) * H + j0 + i % U];
}

/* Thread (u, ks): the dot products of unit u's four gate rows with the
 * group's inputs z [nb][K] over slice ks of the K inputs, into part
 * [KS][4][BC][U]. */
template <int BC>
__device__ static void fwd_partials(float *part, const float *w, const float *z, int K, int U,
                                    int nb) {
  int const KS = (int)blockDim.x / U, u = threadIdx.x % U, ks = threadIdx.x / U;
  if (ks >= KS) return;
  int const per = (K + KS - 1) / KS, k0 = ks * per, k1 = k0 + per < K ? k0 + per : K;
  int const W = 4 * U + 1;
  float acc[4][BC];
#pragma unroll
  for (int b = 0; b < BC; b++)
    acc[0][b] = acc[1][b] = acc[2][b] = acc[3][b] = 0.0f;
  for (int k = k0; k < k1; k++) {
    const float *const wk = w + (size_t)k * W + u;
    float const w0 = wk[0], w1 = wk[U], w2 = wk[2 * U], w3 = wk[3 * U];
#pragma unroll
    for (int b = 0; b < BC; b++)
      if (b < nb) {
        float const zb = z[b * K + k];
        acc[0][b] += w0 * zb, acc[1][b] += w1 * zb, acc[2][b] += w2 * zb, acc[3][b] += w3 * zb;
      }
  }
#pragma unroll
  for (int b = 0; b < BC; b++)
    if (b < nb)
      for (int g = 0; g < 4; g++)
        part[((ks * 4 + g) * BC + b) * U + u] = acc[g][b];
}

/* What a step writes of one (row, unit): the layer's buffers (as the
 * per-step path lays them out) and h_t into the next step's inputs zn of
 * every block of the cluster. */
struct fwd_out_t {
  float *gates, *hs, *cs, *tcs; /* gates [T, B, 4H] at step t; hs, cs [T+1, B, H] at t+1 */
  float *zn;                    /* the next step's z, this block's */
};

/* Thread per (b, u) of the group: the gates' pre-activations (bias, the
 * partial sums in slice order, and the input projection when it came from
 * a GEMM: xproj), the cell, and h_t everywhere it goes. */
template <int BC>
__device__ static void fwd_cells(const fwd_out_t &o, float *cst, const float *part,
                                 const float *bias, int xproj, int r0, int nb, int B, int Kx, int H,
                                 int U, int j0, int C) {
  int const KS = (int)blockDim.x / U, K = Kx + H, rank = j0 / U;
  for (int i = threadIdx.x; i < nb * U; i += blockDim.x) {
    int const b = i / U, u = i % U, j = j0 + u;
    size_t const row = (size_t)r0 + b;
    float *const gr = o.gates + row * 4 * H + j;
    float pre[4];
    for (int g = 0; g < 4; g++) {
      float s = bias[g * U + u];
      for (int ks = 0; ks < KS; ks++)
        s += part[((ks * 4 + g) * BC + b) * U + u];
      pre[g] = xproj ? gr[g * H] + s : s;
    }
    float c, tc;
    float const h = cell_forward(pre, cst[i], &c, &tc);
    for (int g = 0; g < 4; g++)
      gr[g * H] = pre[g];
    o.cs[row * H + j] = c;
    o.tcs[row * H + j] = tc;
    o.hs[row * H + j] = h;
    cst[i] = c;
    persist_put(o.zn + b * K + Kx + j, h, C, rank);
  }
}

/* One layer's forward over the window: gates, hs[1..T], cs[1..T], tcs as
 * the per-step path writes them; x [T, B, In] when the input projection
 * is the kernel's, else NULL and gates holding x @ w_ih^T. Clusters take
 * groups of rows in turn. */
template <int BC>
__global__ static void __launch_bounds__(PERSIST_THREADS)
    lstm_persist_forward_kernel(float *gates, float *hs, float *cs, float *tcs, const float *x,
                                const float *w_ih, const float *w_hh, const float *b_ih,
                                const float *b_hh, int T, int B, int In, int H, int C) {
  extern __shared__ float smem[];
  int const rank = persist_rank(C);
  int const U = H / C, j0 = rank * U, Kx = x != NULL ? In : 0, K = Kx + H;
  int const rows = persist_rows(B), groups = (B + rows - 1) / rows;
  float *const w = smem, *const bias = w + (size_t)K * (4 * U + 1), *const z = bias + 4 * U;
  float *const part = z + 2 * BC * K, *const cst = part + (size_t)(blockDim.x / U) * 4 * BC * U;
  fwd_load_weights(w, bias, w_ih, w_hh, b_ih, b_hh, Kx, In, H, U, j0);
  for (int grp = (int)blockIdx.x / C; grp < groups; grp += (int)gridDim.x / C) {
    int const r0 = grp * rows, nb = B - r0 < rows ? B - r0 : rows;
    fwd_group_init(z, cst, x, hs, cs, r0, nb, Kx, In, H, U, j0);
    persist_sync(C); /* every block has started and holds its weights and inputs */
    for (int t = 0; t < T; t++) {
      float *const zt = z + (t & 1) * BC * K, *const zn = z + ((t + 1) & 1) * BC * K;
      fwd_partials<BC>(part, w, zt, K, U, nb);
      for (int i = threadIdx.x; i < nb * Kx && t + 1 < T; i += blockDim.x) /* x_{t+1} */
        zn[i / Kx * K + i % Kx] = x[((size_t)(t + 1) * B + r0 + i / Kx) * In + i % Kx];
      __syncthreads();
      size_t const at = (size_t)t * B;
      fwd_out_t const o = {gates + at * 4 * H, hs + (at + B) * H, cs + (at + B) * H, tcs + at * H,
                           zn};
      fwd_cells<BC>(o, cst, part, bias, x == NULL, r0, nb, B, Kx, H, U, j0, C);
      persist_sync(C); /* h_t is in every block's zn; zt may be written again */
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Launches                                                                  */

template <int BC>
static cudaError_t forward_launch(const cudaLaunchConfig_t *cfg, float *gates, float *hs, float *cs,
                                  float *tcs, const float *x, const float *w_ih, const float *w_hh,
                                  const float *b_ih, const float *b_hh, int T, int B, int In, int H,
                                  int C) {
  return cudaLaunchKernelEx(cfg, lstm_persist_forward_kernel<BC>, gates, hs, cs, tcs, x, w_ih, w_hh,
                            b_ih, b_hh, T, B, In, H, C);
}

ls_err_t persist_forward(cuda_ctx_t *c, const persist_plan_t *plan, float *gates, float *hs,
                         float *cs, float *tcs, const float *x, const float *w_ih,
                         const float *w_hh, const float *b_ih, const float *b_hh, int T, int B,
                         int In, int H) {
  int const rows = persist_rows(B), groups = (B + rows - 1) / rows, C = plan->cluster;
  int const clusters = groups < plan->max_clusters ? groups : plan->max_clusters;
  int const bc = persist_bc_index(rows), Kx = x != NULL ? In : 0;
  int const threads = persist_threads(H / C, Kx + H);
  size_t const smem = persist_fwd_bytes(Kx, H, H / C, 1 << bc, threads);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr;
  persist_config(&cfg, &attr, clusters * C, threads, C, smem, c->stream);
  cudaError_t err;
  switch (bc) {
  case 0:
    err = forward_launch<1>(&cfg, gates, hs, cs, tcs, x, w_ih, w_hh, b_ih, b_hh, T, B, In, H, C);
    break;
  case 1:
    err = forward_launch<2>(&cfg, gates, hs, cs, tcs, x, w_ih, w_hh, b_ih, b_hh, T, B, In, H, C);
    break;
  case 2:
    err = forward_launch<4>(&cfg, gates, hs, cs, tcs, x, w_ih, w_hh, b_ih, b_hh, T, B, In, H, C);
    break;
  default:
    err = forward_launch<8>(&cfg, gates, hs, cs, tcs, x, w_ih, w_hh, b_ih, b_hh, T, B, In, H, C);
    break;
  }
  if (err != cudaSuccess) return cuda_fail("cudaLaunchKernelEx(lstm_persist_forward_kernel)", err);
  LAUNCH_CHECK("lstm_persist_forward_kernel");
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Plans                                                                     */

/* The plan of one direction for a layer input of In: the fewest blocks
 * per cluster whose weights fit (x fused where In <= H / 4 and it fits). */
static persist_plan_t plan_for(int backward, int In, int H, const cudaDeviceProp *prop) {
  persist_plan_t p = {0, 0, 0};
  size_t const room = prop->sharedMemPerBlockOptin;
  int const most = prop->major >= 9 ? PERSIST_MAX_CLUSTER : 1; /* clusters: sm_90 on */
  for (int C = 1; C <= most && p.cluster == 0; C *= 2) {
    int const U = H / C;
    if (H % C != 0 || U > PERSIST_THREADS) continue;
    for (int fused = 4 * In <= H; fused >= 0 && p.cluster == 0; fused--) {
      int const Kx = fused ? In : 0, threads = persist_threads(U, backward ? 4 * H : Kx + H);
      size_t const smem = backward ? persist_bwd_bytes(Kx, H, U, C, PERSIST_ROWS, threads)
                                   : persist_fwd_bytes(Kx, H, U, PERSIST_ROWS, threads);
      if (smem > room) continue;
      int const n = backward ? persist_bwd_fitting(threads, C, smem, prop)
                             : persist_fitting(lstm_persist_forward_kernel<PERSIST_ROWS>, threads,
                                               C, smem, prop);
      if (n > 0) p.cluster = C, p.fused = fused, p.max_clusters = n;
    }
  }
  return p;
}

ls_err_t persist_init(cuda_ctx_t *c, const ls_engine_conf_t *conf) {
  memset(c->fwd, 0, sizeof c->fwd);
  memset(c->bwd, 0, sizeof c->bwd);
  const char *const env = getenv("LSTREAM_CUDA_PERSIST");
  if (env != NULL && !strcmp(env, "0")) return LS_OK;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  decltype(&lstm_persist_forward_kernel<1>)
      const fwd[] = {lstm_persist_forward_kernel<1>, lstm_persist_forward_kernel<2>,
                     lstm_persist_forward_kernel<4>, lstm_persist_forward_kernel<8>};
  LS_FORWARD_IF_ERROR(persist_allow(fwd, 4, prop.sharedMemPerBlockOptin));
  LS_FORWARD_IF_ERROR(persist_bwd_allow(prop.sharedMemPerBlockOptin));
  int const H = conf->shape.hidden_size, I = conf->shape.input_size;
  int Ka = 0; /* the most input-gradient columns a backward sums */
  for (int k = 0; k < 2; k++) {
    int const In = k == 0 ? I : H;
    c->fwd[k] = plan_for(0, In, H, &prop);
    c->bwd[k] = plan_for(1, In, H, &prop);
    if (c->bwd[k].cluster > 0 && c->bwd[k].fused && In > Ka) Ka = In;
  }
  if (c->bwd[0].cluster == 0 && c->bwd[1].cluster == 0) return LS_OK;
  /* The backward's per-group sums: at most max(PERSIST_GROUPS, Bm /
   * PERSIST_ROWS) groups (persist_rows). */
  size_t const Bm = (size_t)conf->max_batch, most = (Bm + PERSIST_ROWS - 1) / PERSIST_ROWS;
  size_t const groups = most > PERSIST_GROUPS ? most : PERSIST_GROUPS;
  CUDA_CHECK(cudaMalloc((void **)&c->persist_part,
                        groups * 4 * (size_t)H * (size_t)(Ka + 1) * sizeof(double)));
  return LS_OK;
}

const persist_plan_t *persist_plan(const cuda_ctx_t *c, int backward, int In) {
  const persist_plan_t *const p = backward ? &c->bwd[In == c->H] : &c->fwd[In == c->H];
  return p->cluster > 0 ? p : NULL;
}
