/*
 * What the files of the CUDA backend share (kernels/ internal; every
 * lstm_cuda*.cu is compiled by nvcc as C++, and for the CPU emulation by
 * tests/gpu/emu). The backend is one table, ls_backend_cuda (lstm_cuda.cu),
 * whose functions live in rooms:
 *   lstm_cuda.cu         the table, the context (device, stream, cuBLAS
 *                        handle, staging buffers)
 *   lstm_cuda_memory.cu  device memory, copies, the step's figures
 *   lstm_cuda_common.cu  cuBLAS opened on first use, error checks, the
 *                        row-major GEMM, a sum's second pass, row helpers
 *   lstm_cuda_layer.cu   the LSTM layer: cell kernels, forward, backward
 *                        (the persistent kernels where they fit)
 *   lstm_cuda_persist.cu the persistent recurrent kernels: which layers
 *                        they fit (the plan), forward
 *   lstm_cuda_persist_bwd.cu  their backward
 *   lstm_cuda_head.cu    head, losses, optimizer
 *   lstm_cuda_state.cu   series states: gather, scatter
 *   lstm_cuda_graph.cu   CUDA graphs: a step's work recorded once, replayed
 * lstm_cuda.cu uses every room, each room lstm_cuda_common.cu (and
 * lstm_cuda_state.cu the memory room's upload, lstm_cuda_layer.cu the
 * persistent rooms, lstm_cuda_persist.cu lstm_cuda_persist_bwd.cu),
 * lstm_cuda_common.cu none. The functions keep the
 * names of their twins in lstm_cpu.c.
 */
#ifndef LSTREAM_KERNELS_LSTM_CUDA_H
#define LSTREAM_KERNELS_LSTM_CUDA_H

#include <cooperative_groups.h> /* thread block clusters (the persistent kernels) */
#include <cublas_v2.h>          /* types and prototypes only: the library is opened at run time */
#include <cuda_runtime.h>
#include <math.h> /* expf, tanhf: the cell's math */
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* Threads per block of every 1-D kernel; block_sum needs a power of two. */
#define THREADS 256
/* Most blocks of a grid-stride kernel, and of a reduction's first pass (its
 * partial sums are then added by one block). Fixed numbers, not read off
 * the device, so that sums are ordered the same on every GPU. */
#define MAX_BLOCKS    65536
#define REDUCE_BLOCKS 1024
/* Row chunks of a column sum (first pass), and the fewest rows in one. */
#define COLSUM_CHUNKS   64
#define COLSUM_MIN_ROWS 64
/* Pinned staging for upload/download: two buffers of this many bytes, so
 * that filling one overlaps the transfer of the other. */
#define STAGE_BYTES ((size_t)4 << 20)
/* Most bytes of one fetch_start (the step's figures). */
#define FETCH_BYTES 64
/* cuBLAS' workspace (cublasSetWorkspace): its own, so that a graph capture
 * never makes cuBLAS allocate. NVIDIA recommends 32 MiB on Hopper, 4 MiB
 * before. */
#define BLAS_WORKSPACE_HOPPER ((size_t)32 << 20)
#define BLAS_WORKSPACE        ((size_t)4 << 20)
/* Graphs kept per context (lstm_cuda_graph.cu), and the bytes of a key. */
#define GRAPHS    16
#define GRAPH_KEY 64
/* The single-pass sums' tickets (last_block): one counter per kind of kernel. */
enum { TICKET_LOSS, TICKET_NORM, TICKET_COLSUM, TICKET_PERSIST, TICKET_LOSS_COLS, TICKETS };

/* How a layer's recurrence runs on the persistent kernels
 * (lstm_cuda_persist.cu); cluster == 0: it does not (the per-step path). */
typedef struct persist_plan_s {
  int cluster;      /* C blocks per cluster, each holding H/C units' weights */
  int fused;        /* the input x enters the kernel (In small): forward, its
                       projection; backward, the input and weight gradients */
  int max_clusters; /* clusters that fit on the device at once */
} persist_plan_t;

/* One graph: its key, and the instantiated graph (NULL: seen once, not
 * yet recorded). */
typedef struct cuda_graph_s {
  unsigned char key[GRAPH_KEY];
  size_t key_bytes;
  cudaGraphExec_t exec;
  uint64_t used; /* the context's use count when last used (LRU) */
} cuda_graph_t;

typedef struct cuda_ctx_s {
  int device;
  int H; /* hidden size (which plan a layer takes, by its In) */
  cudaStream_t stream;
  cublasHandle_t handle; /* bound to stream */
  void *blas_work;       /* cuBLAS' workspace */
  double *partials;      /* (2 * REDUCE_BLOCKS) first-pass sums of a reduction */
  double *colsum;        /* (COLSUM_CHUNKS, max(4H, O)) first-pass column sums (colsum_add,
                            loss_cols) */
  unsigned *tickets;     /* (TICKETS) blocks done of the running single-pass sum; 0 between */
  persist_plan_t fwd[2]; /* forward plans: [0] In = I (layer 0), [1] In = H */
  persist_plan_t bwd[2]; /* backward plans */
  double *persist_part;  /* the persistent backward's per-group sums (its bias and
                            input-weight gradients) */
  cuda_graph_t graphs[GRAPHS];
  uint64_t graph_uses;
  int graphs_off;          /* LSTREAM_CUDA_GRAPHS=0 or LSTREAM_CUDA_SYNC=1 */
  int64_t *slots;          /* (max_batch) device copy of gather/scatter slots */
  unsigned char *stage[2]; /* (STAGE_BYTES) pinned host staging buffers */
  cudaEvent_t stage_ev[2]; /* last transfer through stage[k] */
  int stage_next;          /* staging buffer the next chunk uses */
  unsigned char *fetch;    /* (FETCH_BYTES) pinned: the bytes of the last fetch_start */
  cudaEvent_t fetch_ev;    /* that copy */
} cuda_ctx_t;

/* ------------------------------------------------------------------------ */
/* cuBLAS, opened on first use (lstm_cuda_common.cu)                         */

/* cuBLAS' entry points, with cuBLAS' own prototypes (blas_load fills them). */
typedef struct cuda_blas_s {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasGetStatusString) status_string;
} cuda_blas_t;
extern cuda_blas_t blas;

/* Opens cuBLAS (once per process); LS_ERR_UNSUPPORTED where it cannot. */
ls_err_t blas_load(void);

/* ------------------------------------------------------------------------ */
/* Error checks (lstm_cuda_common.cu)                                        */

/* LSTREAM_CUDA_SYNC=1 (read when a context is created): wait for every
 * kernel and GEMM right after its launch and check it, so that a fault is
 * reported by the launch that caused it, by name. Slow; for debugging. */
extern int launch_sync;

/* A failed call: LS_ERR_BACKEND naming the call and CUDA's message. */
ls_err_t cuda_fail(const char *call, cudaError_t err);

/* Every CUDA and cuBLAS call goes through these: a failure returns
 * LS_ERR_BACKEND naming the call and the library's message. */
#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t const ls_cu_ = (call);                                                             \
    if (ls_cu_ != cudaSuccess) return cuda_fail(#call, ls_cu_);                                    \
  } while (0)

#define CUBLAS_CHECK(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t const ls_cb_ = (call);                                                          \
    if (ls_cb_ != CUBLAS_STATUS_SUCCESS)                                                           \
      return ls_error_set(LS_ERR_BACKEND, "cuBLAS: %s failed: %s", #call,                          \
                          blas.status_string(ls_cb_));                                             \
  } while (0)

/* After a kernel launch: a bad configuration or a missing kernel image;
 * with LSTREAM_CUDA_SYNC=1 also the kernel's own faults. */
ls_err_t launch_check(const char *kernel);
#define LAUNCH_CHECK(kernel) LS_FORWARD_IF_ERROR(launch_check(kernel))

/* Makes the context's device current on the calling thread (engine calls
 * may come from any one thread at a time). */
ls_err_t enter(cuda_ctx_t *c);

/* Blocks of THREADS threads for n items of a grid-stride loop. */
unsigned grid_for(size_t n);

#define GRID_STRIDE(i, n)                                                                          \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                          \
       i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------------------ */
/* Shared math (lstm_cuda_common.cu)                                         */

/* C [M, N] = alpha * op(A) [M, K] @ op(B) [K, N] + beta * C, row-major:
 * the arguments of cblas_sgemm(CblasRowMajor, ...), through cuBLAS. */
ls_err_t sgemm(cuda_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
               int ldc);
/* cblas' names, so that every sgemm call reads as its CPU twin. */
static cublasOperation_t const NoTrans = CUBLAS_OP_N, Trans = CUBLAS_OP_T;

/* Sum of v over the block (blockDim.x == THREADS), in a fixed tree order;
 * every thread gets it. sh holds THREADS doubles. */
__device__ static inline double block_sum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double const r = sh[0];
  __syncthreads(); /* sh may be reused at once */
  return r;
}

/* True in every thread of the last block of the grid to get here, once
 * every block has written its part of a sum (then visible to it);
 * *ticket counts the blocks and is left at 0 for the next kernel, so that
 * a sum takes one kernel, its second pass in its last block, and a graph
 * may replay it. flag: a shared int. */
__device__ static inline bool last_block(unsigned *ticket, int *flag) {
  __threadfence(); /* this block's part, before its ticket */
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    unsigned const blocks = gridDim.x * gridDim.y * gridDim.z;
    *flag = atomicAdd(ticket, 1u) == blocks - 1;
    if (*flag) *ticket = 0;
    /* The acquire side: the last block's reads of the other blocks' parts
     * come after its ticket (the CUDA memory model orders them only with a
     * fence between the atomic and the reads; the volatile loads alone do
     * not). */
    __threadfence();
  }
  __syncthreads();
  return *flag != 0;
}

/* out[k] (k < width <= 2) = the sum of partials[blk * width + k] over
 * `blocks` blocks, times mul1 for k == 1; run by one whole block
 * (blockDim.x == THREADS), in a fixed order. */
__device__ static inline void reduce_partials(double *out, const double *partials, int blocks,
                                              int width, double mul1, double *sh) {
  for (int k = 0; k < width; k++) {
    double v = 0.0;
    for (int b = threadIdx.x; b < blocks; b += THREADS)
      v += ((const volatile double *)partials)[(size_t)b * width + k];
    v = block_sum(v, sh);
    if (threadIdx.x == 0) out[k] = k == 1 ? v * mul1 : v;
  }
}

/* ------------------------------------------------------------------------ */
/* The cell's pointwise math (every forward and backward kernel)            */

__device__ static inline float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/* Forward: pre-activations pre[4] in, activated gates out (i, f, g, o);
 * c = f * c_prev + i * g; tc = tanh(c); returns h = o * tc. */
__device__ static inline float cell_forward(float pre[4], float c_prev, float *c, float *tc) {
  pre[0] = sigmoidf(pre[0]), pre[1] = sigmoidf(pre[1]);
  pre[2] = tanhf(pre[2]), pre[3] = sigmoidf(pre[3]);
  *c = pre[1] * c_prev + pre[0] * pre[2];
  *tc = tanhf(*c);
  return pre[3] * *tc;
}

/* Backward: gates g[4] (activated), tc = tanh(c_t), dh and *dc (d/dc_t
 * from step t+1) in; d[4] the pre-activation gradients out, *dc becomes
 * d/dc_{t-1}. */
__device__ static inline void cell_backward(const float g[4], float tc, float c_prev, float dh,
                                            float *dc, float d[4]) {
  float const i = g[0], f = g[1], gt = g[2], o = g[3];
  float const d_c = *dc + dh * o * (1.0f - tc * tc);
  d[0] = d_c * gt * i * (1.0f - i);
  d[1] = d_c * c_prev * f * (1.0f - f);
  d[2] = d_c * i * (1.0f - gt * gt);
  d[3] = dh * tc * o * (1.0f - o);
  *dc = d_c * f;
}

/* The two passes of a column sum over chunks of rows (colsum_kernel,
 * loss_cols_kernel: blocks of 32 columns x 8 row lanes, blockIdx.y the
 * chunk). colsum_part, in every thread: the 8 lanes' acc of column j (of n)
 * into part[blockIdx.y, j]; sh: a shared double[8][33]. colsum_total, in
 * the last block: column i's sum of the chunks' parts, in chunk order. */
__device__ static inline void colsum_part(double acc, double (*sh)[33], double *part, int j,
                                          int n) {
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    double s = 0.0;
    for (int k = 0; k < 8; k++)
      s += sh[k][threadIdx.x];
    part[(size_t)blockIdx.y * n + j] = s;
  }
}
__device__ static inline double colsum_total(const double *part, int i, int n) {
  double s = 0.0;
  for (int k = 0; k < (int)gridDim.y; k++)
    s += ((const volatile double *)part)[(size_t)k * n + i];
  return s;
}

/* rows [N, n] = b1 [n] (+ b2 [n], if not NULL) broadcast. */
ls_err_t fill_rows(cuda_ctx_t *c, float *rows, const float *b1, const float *b2, int N, int n);

/* a [n] += column sums of rows [N, n] (in double); b (may be NULL) too. */
ls_err_t colsum_add(cuda_ctx_t *c, float *a, float *b, const float *rows, int N, int n);

/* ------------------------------------------------------------------------ */
/* The primitives of kernels/backend.h (their contracts there), by room      */

/* lstm_cuda_memory.cu */
ls_err_t mem_alloc(void *ctx, size_t bytes, void **ptr);
void mem_free(void *ctx, void *ptr);
ls_err_t mem_upload(void *ctx, void *dst, const void *host_src, size_t bytes);
ls_err_t mem_download(void *ctx, void *host_dst, const void *src, size_t bytes);
ls_err_t mem_copy(void *ctx, void *dst, const void *src, size_t bytes);
ls_err_t mem_zero(void *ctx, void *dst, size_t bytes);
ls_err_t fetch_start(void *ctx, const void *src, size_t bytes);
ls_err_t fetch_wait(void *ctx, void *host_dst, size_t bytes);

/* ------------------------------------------------------------------------ */
/* Persistent recurrent kernels (lstm_cuda_persist*.cu)                      */

/* Most threads of a persistent block. A block holds the recurrent weights
 * of U = H / C hidden units (C blocks per cluster) and computes the dot
 * products of length K as KS = threads / U slices: at least
 * PERSIST_SLICE inputs a slice, at most PERSIST_THREADS threads. */
#define PERSIST_THREADS 256
#define PERSIST_SLICE   16
/* Most batch rows a cluster carries through the window at once (a group),
 * and the groups a batch is cut into until groups reach that size. */
#define PERSIST_ROWS   8
#define PERSIST_GROUPS 64
/* Most blocks per cluster: H = 128 takes two (a block's shared memory
 * holds 64 units' weights, 128 KiB). Larger clusters would fit larger H;
 * not tried. */
#define PERSIST_MAX_CLUSTER 2
/* The backward's input-gradient dot products (fused layers) are cut into
 * this many slices of the 4H gate rows. */
#define PERSIST_DX_SLICES 8

/* Rows per group for a batch of B: a function of B alone, so that the
 * backward's sums (per group, then over the groups in order) come out the
 * same on every device. */
__host__ __device__ static inline int persist_rows(int B) {
  int const r = (B + PERSIST_GROUPS - 1) / PERSIST_GROUPS;
  return r < 1 ? 1 : r > PERSIST_ROWS ? PERSIST_ROWS : r;
}

/* The kernels' rows per group are a template argument (registers): the
 * power of two at least rows, as an index 0..3 for the dispatch. */
static inline int persist_bc_index(int rows) {
  return rows <= 1 ? 0 : rows <= 2 ? 1 : rows <= 4 ? 2 : 3;
}

/* The threads of a persistent block of U units with dot products of
 * length K (a multiple of 32). */
static inline int persist_threads(int U, int K) {
  int ks = K / PERSIST_SLICE;
  ks = ks < 1 ? 1 : ks > PERSIST_THREADS / U ? PERSIST_THREADS / U : ks;
  return (U * ks + 31) / 32 * 32;
}

/* Shared memory of a persistent block of `threads`, bytes (BC rows per
 * group): the forward's weights of K = Kx + H inputs, and the backward's. */
__host__ __device__ static inline size_t persist_fwd_bytes(int Kx, int H, int U, int BC,
                                                           int threads) {
  int const K = Kx + H, KS = threads / U;
  size_t const floats = (size_t)K * (4 * U + 1) + 4 * U + 2 * (size_t)BC * K +
                        (size_t)KS * 4 * BC * U + (size_t)BC * U;
  return floats * sizeof(float);
}
__host__ __device__ static inline size_t persist_bwd_bytes(int Ka, int H, int U, int C, int BC,
                                                           int threads) {
  int const G = 4 * H, KS = threads / U, nI = (Ka + C - 1) / C;
  size_t const floats = (size_t)G * (U + 1) + (size_t)G * nI + 2 * (size_t)BC * G +
                        (size_t)KS * BC * U + (size_t)BC * U + (size_t)BC * Ka +
                        (size_t)BC * nI * PERSIST_DX_SLICES + 1;
  return (size_t)4 * U * (Ka + 1) * sizeof(double) + floats * sizeof(float);
}

/* The blocks of a cluster (C of them; C = 1: one block, no cluster
 * launched), in the persistent kernels: their barrier, a block's rank,
 * and persist_put, v into *p of every block of the cluster (p in this
 * block's shared memory). Clusters exist from sm_90 on; the plans keep
 * C = 1 before. persist_put writes this block's word with a plain store
 * and maps p only for the other blocks: given one store through
 * "map_shared_rank(p, q), or p where C = 1" for every block, CUDA 13.5's
 * compiler made the C = 1 store a shared::cluster store whose address
 * lacked the shared window's base (`add.s32 %r, 0, offset` where `smem`
 * belongs), landing 1 KiB low on sm_90 (on an H100 and an H200: wrong,
 * run-to-run different results and racecheck hazards between h_t's store
 * and the bias's reads; the emulator, compiling for the host, cannot show
 * it; tests/gpu/check_ptx.py looks for such addresses). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
__device__ static inline void persist_sync(int) {
  __syncthreads();
}
__device__ static inline int persist_rank(int) {
  return 0;
}
template <typename T> __device__ static inline void persist_put(T *p, T v, int, int) {
  *p = v;
}
#else
__device__ static inline void persist_sync(int C) {
  if (C == 1)
    __syncthreads();
  else
    cooperative_groups::this_cluster().sync();
}
__device__ static inline int persist_rank(int C) {
  return C == 1 ? 0 : (int)cooperative_groups::this_cluster().block_rank();
}
template <typename T> __device__ static inline void persist_put(T *p, T v, int C, int rank) {
  *p = v;
  for (int q = 0; q < C; q++)
    if (q != rank) *cooperative_groups::this_cluster().map_shared_rank(p, (unsigned)q) = v;
}
#endif

/* A persistent launch's configuration (lstm_cuda_common.cu): grid blocks
 * in clusters of C (no cluster attribute for C = 1, which runs before
 * sm_90 too). */
void persist_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, int grid, int threads,
                    int C, size_t smem, cudaStream_t stream);

/* Lets every instance of a kernel ask for `bytes` of shared memory. */
template <typename K> static inline ls_err_t persist_allow(K *const *kernels, int n, size_t bytes) {
  for (int i = 0; i < n; i++)
    CUDA_CHECK(
        cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  return LS_OK;
}

/* Clusters of C blocks with `smem` bytes each that fit on the device at
 * once (0: none) for one of a persistent kernel's instances. */
template <typename K>
static inline int persist_fitting(K *kernel, int threads, int C, size_t smem,
                                  const cudaDeviceProp *prop) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr;
  persist_config(&cfg, &attr, C, threads, C, smem, NULL);
  int n = 0;
  cudaError_t const err =
      C > 1 ? cudaOccupancyMaxActiveClusters(&n, kernel, &cfg)
            : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return C > 1 ? n : n * prop->multiProcessorCount;
}

/* lstm_cuda_persist_bwd.cu: persist_allow and persist_fitting for the
 * backward kernel's instances. */
ls_err_t persist_bwd_allow(size_t bytes);
int persist_bwd_fitting(int threads, int C, size_t smem, const cudaDeviceProp *prop);

/* lstm_cuda_persist.cu: the plans of a context's layers (ctx_init), and
 * the persistent forward of one layer (lstm_forward, when plan->cluster):
 * x [T, B, In] when plan->fused, else NULL and gates [T, B, 4H] holding
 * x @ w_ih^T. lstm_cuda_persist_bwd.cu: its backward (lstm_backward):
 * dgates, dh0, dc0, and db_ih, db_hh added to; when fused also dw_ih
 * added to and dx [T, B, In] written (x given), else x, dw_ih and dx are
 * NULL. */
ls_err_t persist_init(cuda_ctx_t *c, const ls_engine_conf_t *conf);
const persist_plan_t *persist_plan(const cuda_ctx_t *c, int backward, int In);
ls_err_t persist_forward(cuda_ctx_t *c, const persist_plan_t *plan, float *gates, float *hs,
                         float *cs, float *tcs, const float *x, const float *w_ih,
                         const float *w_hh, const float *b_ih, const float *b_hh, int T, int B,
                         int In, int H);
ls_err_t persist_backward(cuda_ctx_t *c, const persist_plan_t *plan, float *dgates, float *dh0,
                          float *dc0, float *dw_ih, float *db_ih, float *db_hh, float *dx,
                          const float *dh, const float *gates, const float *cs, const float *tcs,
                          const float *x, const float *w_ih, const float *w_hh, int T, int B,
                          int In, int H);

/* lstm_cuda_layer.cu */
ls_err_t lstm_forward(void *ctx, float *gates, float *hs, float *cs, float *tcs, const float *x,
                      const float *w_ih, const float *w_hh, const float *b_ih, const float *b_hh,
                      int T, int B, int In, int H);
ls_err_t lstm_backward(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih, float *dw_hh,
                       float *db_ih, float *db_hh, float *dgates, float *dh, const float *gates,
                       const float *hs, const float *cs, const float *tcs, const float *x,
                       const float *w_ih, const float *w_hh, int T, int B, int In, int H);

/* lstm_cuda_head.cu */
ls_err_t head_forward(void *ctx, float *pred, const float *y, const float *w, const float *b, int N,
                      int H, int O);
ls_err_t seq_targets(void *ctx, const float **target, const float *seq, int B, int In);
ls_err_t mse_loss(void *ctx, double *loss, float *dpred, const float *pred, const float *target,
                  const float *mask, float scale, int N, int O);
ls_err_t elem_loss(void *ctx, double *loss, float *dpred, const float *pred, const float *target,
                   const float *mask, int mask_cols, const float *tau, float scale, int N, int O);
ls_err_t loss_cols(void *ctx, double *col, const float *pred, const float *target,
                   const float *mask, int mask_cols, const float *tau, int N, int O);
ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                       const float *y, const float *w, int N, int H, int O);
ls_err_t optimizer_step(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                        double *norm_sq, double *steps, const ls_optim_args_t *args);

/* lstm_cuda_state.cu */
ls_err_t state_gather(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
                      const float *tab_c, const int64_t *slots, int B, int L, int H);
ls_err_t state_scatter(void *ctx, float *tab_h, float *tab_c, const float *hT, const float *cT,
                       size_t stride, const int64_t *slots, int B, int L, int H);

/* lstm_cuda_graph.cu */
ls_err_t graph_run(void *ctx, const void *key, size_t key_bytes, ls_err_t (*queue)(void *),
                   void *opaque);
void graph_free_all(cuda_ctx_t *c);

#endif /* LSTREAM_KERNELS_LSTM_CUDA_H */
