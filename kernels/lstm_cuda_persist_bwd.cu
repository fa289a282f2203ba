/*
 * The persistent recurrent kernel's backward (kernels/lstm_cuda.h; the
 * forward and the plans are in lstm_cuda_persist.cu).
 *
 * The same clusters and groups as the forward, the window walked from
 * t = T-1 down: each block keeps w_hh's columns of its U units (all 4H
 * gate rows) in shared memory, so that d/dh_t of its units is the
 * gradient from above plus dgates_{t+1} . w_hh[:, j]; the cell's backward
 * gives dgates_t of its units' four gates, which go into the shared memory
 * of every block of the cluster for the next step (one cluster barrier
 * per step, double-buffered). The bias gradients are summed on the way:
 * per group in double (in the group's order), then over the groups in
 * order by the last block to finish (atomics: a ticket per block), as the
 * per-step path's column sums do. Where the layer's input is small and
 * the kernel takes x (fused), the input-weight gradients are summed the
 * same way, beside the biases, and d/dx_t = dgates_t . w_ih is computed
 * here too: the layer needs no GEMM for its input.
 */
#include "lstm_cuda.h"

/* Where a block keeps what: see persist_bwd_bytes for the sizes. */
struct bwd_smem_t {
  double *acc; /* [4U][Ka + 1] the group's sums: input-weight gradients, then the bias's */
  float *wt;   /* [4H][U + 1] w_hh's columns of the block's units (padded stride) */
  float *wi;   /* [4H][nI] w_ih's columns i = rank + C * ii (fused) */
  float *dgs;  /* [2][BC][4H] dgates of the cluster's rows: step t+1's, step t's */
  float *part; /* [KS][BC][U] partial recurrent sums */
  float *dcs;  /* [BC][U] d/dc of the block's units */
  float *xs;   /* [BC][Ka] x_t of the group's rows (fused) */
  float *dxp;  /* [BC][nI][PERSIST_DX_SLICES] partial input gradients (fused) */
  int *flag;   /* the last block's flag */
};

/* The shape of one launch, shared by its device functions. */
struct bwd_dims_t {
  int T, B, In, H, C, rank, U, j0, Ka, nI, BC;
};

__device__ static bwd_smem_t bwd_layout(void *smem, const bwd_dims_t &d) {
  int const G = 4 * d.H, KS = (int)blockDim.x / d.U;
  bwd_smem_t m;
  m.acc = (double *)smem;
  m.wt = (float *)(m.acc + (size_t)4 * d.U * (d.Ka + 1));
  m.wi = m.wt + (size_t)G * (d.U + 1);
  m.dgs = m.wi + (size_t)G * d.nI;
  m.part = m.dgs + 2 * (size_t)d.BC * G;
  m.dcs = m.part + (size_t)KS * d.BC * d.U;
  m.xs = m.dcs + d.BC * d.U;
  m.dxp = m.xs + d.BC * d.Ka;
  m.flag = (int *)(m.dxp + d.BC * d.nI * PERSIST_DX_SLICES);
  return m;
}

/* The block's weights: wt[k][u] = w_hh[k][j0 + u]; wi[k][ii] = w_ih[k][i]
 * for its columns i = rank + C * ii (0 past In). */
__device__ static void bwd_load_weights(const bwd_smem_t &m, const bwd_dims_t &d, const float *w_hh,
                                        const float *w_ih) {
  int const G = 4 * d.H;
  for (int i = threadIdx.x; i < G * d.U; i += blockDim.x)
    m.wt[(size_t)(i / d.U) * (d.U + 1) + i % d.U] = w_hh[(size_t)(i / d.U) * d.H + d.j0 + i % d.U];
  for (int i = threadIdx.x; i < G * d.nI; i += blockDim.x) {
    int const col = d.rank + d.C * (i % d.nI);
    m.wi[i] = col < d.In ? w_ih[(size_t)(i / d.nI) * d.In + col] : 0.0f;
  }
}

/* Thread (u, ks): part[ks][b][u] = sum over slice ks of the 4H gate rows
 * of dg[b][k] * w_hh[k][j0 + u], for the group's nb rows. */
template <int BC>
__device__ static void bwd_partials(const bwd_smem_t &m, const bwd_dims_t &d, const float *dg,
                                    int nb) {
  int const G = 4 * d.H, KS = (int)blockDim.x / d.U, u = threadIdx.x % d.U;
  int const ks = threadIdx.x / d.U;
  if (ks >= KS) return;
  int const per = (G + KS - 1) / KS, k0 = ks * per, k1 = k0 + per < G ? k0 + per : G;
  float acc[BC];
#pragma unroll
  for (int b = 0; b < BC; b++)
    acc[b] = 0.0f;
  for (int k = k0; k < k1; k++) {
    float const w = m.wt[(size_t)k * (d.U + 1) + u];
#pragma unroll
    for (int b = 0; b < BC; b++)
      if (b < nb) acc[b] += w * dg[b * G + k];
  }
#pragma unroll
  for (int b = 0; b < BC; b++)
    if (b < nb) m.part[(ks * BC + b) * d.U + u] = acc[b];
}

/* Fused input: the partial dot products of dg [nb][4H] with the block's
 * w_ih columns, slice by slice, into dxp; bwd_dx_store adds them up (in
 * slice order) into dx [nb rows of B][In]. */
__device__ static void bwd_dx_partials(const bwd_smem_t &m, const bwd_dims_t &d, const float *dg,
                                       int nb) {
  int const G = 4 * d.H, per = (G + PERSIST_DX_SLICES - 1) / PERSIST_DX_SLICES;
  for (int i = threadIdx.x; i < nb * d.nI * PERSIST_DX_SLICES; i += blockDim.x) {
    int const item = i / PERSIST_DX_SLICES, sl = i % PERSIST_DX_SLICES;
    int const b = item / d.nI, ii = item % d.nI, k0 = sl * per, k1 = k0 + per < G ? k0 + per : G;
    float s = 0.0f;
    for (int k = k0; k < k1; k++)
      s += dg[b * G + k] * m.wi[(size_t)k * d.nI + ii];
    m.dxp[i] = s;
  }
}

__device__ static void bwd_dx_store(const bwd_smem_t &m, const bwd_dims_t &d, float *dx, int nb) {
  for (int item = threadIdx.x; item < nb * d.nI; item += blockDim.x) {
    int const col = d.rank + d.C * (item % d.nI);
    if (col >= d.In) continue;
    float s = 0.0f;
    for (int sl = 0; sl < PERSIST_DX_SLICES; sl++)
      s += m.dxp[item * PERSIST_DX_SLICES + sl];
    dx[(size_t)(item / d.nI) * d.In + col] = s;
  }
}

/* The layer's buffers at step t, offset to the group's first row. */
struct bwd_step_t {
  float *dgates;      /* [nb][4H] out */
  const float *dh;    /* [nb][H] from above */
  const float *gates; /* [nb][4H] activated */
  const float *cs;    /* [nb][H] c_{t-1} */
  const float *tcs;   /* [nb][H] tanh(c_t) */
  float *dgn;         /* this block's dgs for step t */
  int recur;          /* t < T-1: part holds the recurrent sums */
};

/* Thread per (b, u): d/dh_t (from above, plus the recurrent sums in slice
 * order), the cell's backward, and dgates_t in the layer's buffer and in
 * every block of the cluster. */
template <int BC>
__device__ static void bwd_cells(const bwd_smem_t &m, const bwd_dims_t &d, const bwd_step_t &s,
                                 int nb) {
  int const G = 4 * d.H, KS = (int)blockDim.x / d.U;
  for (int i = threadIdx.x; i < nb * d.U; i += blockDim.x) {
    int const b = i / d.U, u = i % d.U, j = d.j0 + u;
    float dh = s.dh[(size_t)b * d.H + j];
    for (int ks = 0; ks < KS && s.recur; ks++)
      dh += m.part[(ks * BC + b) * d.U + u];
    const float *const gr = s.gates + (size_t)b * G + j;
    float const g[4] = {gr[0], gr[d.H], gr[2 * d.H], gr[3 * d.H]};
    float dg[4], dc = m.dcs[i];
    cell_backward(g, s.tcs[(size_t)b * d.H + j], s.cs[(size_t)b * d.H + j], dh, &dc, dg);
    m.dcs[i] = dc;
    for (int k = 0; k < 4; k++)
      persist_put(s.dgn + b * G + k * d.H + j, dg[k], d.C, d.rank);
    for (int k = 0; k < 4; k++)
      s.dgates[(size_t)b * G + k * d.H + j] = dg[k];
  }
}

/* The group's sums over its rows at step t, for the block's own gate rows
 * (in dgn since bwd_cells): acc[g * U + u][col] += dgates * x_t[col], and
 * at col = Ka the bias's (times 1). */
__device__ static void bwd_accumulate(const bwd_smem_t &m, const bwd_dims_t &d, const float *dgn,
                                      int nb) {
  int const G = 4 * d.H, cols = d.Ka + 1;
  for (int i = threadIdx.x; i < 4 * d.U * cols; i += blockDim.x) {
    int const row = i / cols, col = i % cols;
    int const k = row / d.U * d.H + d.j0 + row % d.U;
    double s = m.acc[i];
    for (int b = 0; b < nb; b++)
      s += (double)dgn[b * G + k] * (col < d.Ka ? (double)m.xs[b * d.Ka + col] : 1.0);
    m.acc[i] = s;
  }
}

/* The layer's outputs and scratch, as persist_backward takes them. */
struct bwd_io_t {
  float *dgates, *dh0, *dc0, *dw_ih, *db_ih, *db_hh, *dx;
  double *part;     /* [groups][4H][Ka + 1] the groups' sums */
  unsigned *ticket; /* TICKET_PERSIST */
  const float *dh, *gates, *cs, *tcs, *x;
};

/* One group of rows through the window, backwards: at step t the
 * recurrent sums of dgates_{t+1} (and, fused, dx_{t+1}), the cells, the
 * group's sums; after t = 0, dh0 (dgates_0 . w_hh), dc0 and dx_0, and
 * the group's sums into io.part. */
template <int BC>
__device__ static void bwd_group(const bwd_smem_t &m, const bwd_dims_t &d, const bwd_io_t &io,
                                 int grp, int r0, int nb) {
  int const G = 4 * d.H;
  for (int i = threadIdx.x; i < nb * d.U; i += blockDim.x)
    m.dcs[i] = 0.0f; /* d/dc_T */
  for (int i = threadIdx.x; i < 4 * d.U * (d.Ka + 1); i += blockDim.x)
    m.acc[i] = 0.0;
  persist_sync(d.C); /* every block has started; the last group's reads are done */
  for (int t = d.T - 1; t >= 0; t--) {
    float *const dg = m.dgs + (t & 1) * BC * G, *const dgn = m.dgs + ((t + 1) & 1) * BC * G;
    if (t < d.T - 1) bwd_partials<BC>(m, d, dg, nb);
    if (t < d.T - 1 && d.Ka > 0) bwd_dx_partials(m, d, dg, nb);
    for (int i = threadIdx.x; i < nb * d.Ka; i += blockDim.x)
      m.xs[i] = io.x[((size_t)t * d.B + r0 + i / d.Ka) * d.In + i % d.Ka];
    __syncthreads();
    size_t const row = (size_t)t * d.B + r0;
    bwd_step_t const s = {io.dgates + row * G, io.dh + row * d.H,  io.gates + row * G,
                          io.cs + row * d.H,   io.tcs + row * d.H, dgn,
                          t < d.T - 1};
    bwd_cells<BC>(m, d, s, nb);
    if (t < d.T - 1 && d.Ka > 0) bwd_dx_store(m, d, io.dx + (row + d.B) * d.In, nb);
    __syncthreads();
    bwd_accumulate(m, d, dgn, nb);
    persist_sync(d.C); /* dgates_t is in every block */
  }
  const float *const dg0 = m.dgs + BC * G; /* dgates_0, written at t = 0 */
  bwd_partials<BC>(m, d, dg0, nb);
  if (d.Ka > 0) bwd_dx_partials(m, d, dg0, nb);
  __syncthreads();
  for (int i = threadIdx.x; i < nb * d.U; i += blockDim.x) {
    int const KS = (int)blockDim.x / d.U, b = i / d.U, u = i % d.U;
    float s = 0.0f;
    for (int ks = 0; ks < KS; ks++)
      s += m.part[(ks * BC + b) * d.U + u];
    io.dh0[(size_t)(r0 + b) * d.H + d.j0 + u] = s;
    io.dc0[(size_t)(r0 + b) * d.H + d.j0 + u] = m.dcs[i];
  }
  if (d.Ka > 0) bwd_dx_store(m, d, io.dx + (size_t)r0 * d.In, nb);
  for (int i = threadIdx.x; i < 4 * d.U * (d.Ka + 1); i += blockDim.x) {
    int const row = i / (d.Ka + 1), k = row / d.U * d.H + d.j0 + row % d.U;
    io.part[((size_t)grp * G + k) * (d.Ka + 1) + i % (d.Ka + 1)] = m.acc[i];
  }
  __syncthreads(); /* before the next group clears acc and dcs */
}

/* After every group: the last block to finish adds the groups' sums up in
 * group order into dw_ih (fused) and both bias gradients. */
__device__ static void bwd_finish(const bwd_smem_t &m, const bwd_dims_t &d, const bwd_io_t &io,
                                  int groups) {
  if (!last_block(io.ticket, m.flag)) return;
  int const cols = d.Ka + 1;
  for (int i = threadIdx.x; i < 4 * d.H * cols; i += blockDim.x) {
    int const k = i / cols, col = i % cols;
    double s = 0.0;
    for (int grp = 0; grp < groups; grp++)
      s += ((const volatile double *)io.part)[(size_t)grp * 4 * d.H * cols + i];
    if (col < d.Ka) {
      float *const w = io.dw_ih + (size_t)k * d.In + col;
      *w = (float)((double)*w + s);
    } else {
      io.db_ih[k] = (float)((double)io.db_ih[k] + s);
      io.db_hh[k] = (float)((double)io.db_hh[k] + s);
    }
  }
}

/* One layer's backward over the window (see persist_backward). Every
 * buffer is an argument of its own (the emulator checks each). */
template <int BC>
__global__ static void __launch_bounds__(PERSIST_THREADS)
    lstm_persist_backward_kernel(float *dgates, float *dh0, float *dc0, float *dw_ih, float *db_ih,
                                 float *db_hh, float *dx, double *part, unsigned *ticket,
                                 const float *dh, const float *gates, const float *cs,
                                 const float *tcs, const float *x, const float *w_ih,
                                 const float *w_hh, int T, int B, int In, int H, int C) {
  extern __shared__ double smem_d[];
  bwd_io_t const io = {dgates, dh0,    dc0, dw_ih, db_ih, db_hh, dx,
                       part,   ticket, dh,  gates, cs,    tcs,   x};
  bwd_dims_t d;
  d.T = T, d.B = B, d.In = In, d.H = H, d.C = C, d.rank = persist_rank(C);
  d.U = H / C, d.j0 = d.rank * d.U, d.Ka = io.x != NULL ? In : 0;
  d.nI = (d.Ka + C - 1) / C, d.BC = BC;
  bwd_smem_t const m = bwd_layout(smem_d, d);
  bwd_load_weights(m, d, w_hh, w_ih);
  int const rows = persist_rows(B), groups = (B + rows - 1) / rows;
  for (int grp = (int)blockIdx.x / C; grp < groups; grp += (int)gridDim.x / C) {
    int const r0 = grp * rows;
    bwd_group<BC>(m, d, io, grp, r0, B - r0 < rows ? B - r0 : rows);
  }
  bwd_finish(m, d, io, groups);
}

/* ------------------------------------------------------------------------ */
/* Launches                                                                  */

template <int BC>
static cudaError_t backward_launch(const cudaLaunchConfig_t *cfg, const bwd_io_t &io,
                                   const float *w_ih, const float *w_hh, int T, int B, int In,
                                   int H, int C) {
  return cudaLaunchKernelEx(cfg, lstm_persist_backward_kernel<BC>, io.dgates, io.dh0, io.dc0,
                            io.dw_ih, io.db_ih, io.db_hh, io.dx, io.part, io.ticket, io.dh,
                            io.gates, io.cs, io.tcs, io.x, w_ih, w_hh, T, B, In, H, C);
}

ls_err_t persist_backward(cuda_ctx_t *c, const persist_plan_t *plan, float *dgates, float *dh0,
                          float *dc0, float *dw_ih, float *db_ih, float *db_hh, float *dx,
                          const float *dh, const float *gates, const float *cs, const float *tcs,
                          const float *x, const float *w_ih, const float *w_hh, int T, int B,
                          int In, int H) {
  int const rows = persist_rows(B), groups = (B + rows - 1) / rows, C = plan->cluster;
  int const clusters = groups < plan->max_clusters ? groups : plan->max_clusters;
  int const bc = persist_bc_index(rows), threads = persist_threads(H / C, 4 * H);
  size_t const smem = persist_bwd_bytes(x != NULL ? In : 0, H, H / C, C, 1 << bc, threads);
  bwd_io_t const io = {
      dgates, dh0,   dc0, dw_ih, db_ih, db_hh, dx, c->persist_part, c->tickets + TICKET_PERSIST,
      dh,     gates, cs,  tcs,   x};
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr;
  persist_config(&cfg, &attr, clusters * C, threads, C, smem, c->stream);
  cudaError_t err;
  switch (bc) {
  case 0: err = backward_launch<1>(&cfg, io, w_ih, w_hh, T, B, In, H, C); break;
  case 1: err = backward_launch<2>(&cfg, io, w_ih, w_hh, T, B, In, H, C); break;
  case 2: err = backward_launch<4>(&cfg, io, w_ih, w_hh, T, B, In, H, C); break;
  default: err = backward_launch<8>(&cfg, io, w_ih, w_hh, T, B, In, H, C); break;
  }
  if (err != cudaSuccess) return cuda_fail("cudaLaunchKernelEx(lstm_persist_backward_kernel)", err);
  LAUNCH_CHECK("lstm_persist_backward_kernel");
  return LS_OK;
}

ls_err_t persist_bwd_allow(size_t bytes) {
  decltype(&lstm_persist_backward_kernel<1>)
      const k[] = {lstm_persist_backward_kernel<1>, lstm_persist_backward_kernel<2>,
                   lstm_persist_backward_kernel<4>, lstm_persist_backward_kernel<8>};
  return persist_allow(k, 4, bytes);
}

int persist_bwd_fitting(int threads, int C, size_t smem, const cudaDeviceProp *prop) {
  return persist_fitting(lstm_persist_backward_kernel<PERSIST_ROWS>, threads, C, smem, prop);
}
