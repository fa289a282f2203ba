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
 *   lstm_cuda_head.cu    head, loss, optimizer
 *   lstm_cuda_state.cu   series states: gather, scatter
 * lstm_cuda.cu uses every room, each room lstm_cuda_common.cu (and
 * lstm_cuda_state.cu the memory room's upload), lstm_cuda_common.cu none.
 * The functions keep the names of their twins in lstm_cpu.c.
 */
#ifndef LSTREAM_KERNELS_LSTM_CUDA_H
#define LSTREAM_KERNELS_LSTM_CUDA_H

#include <cublas_v2.h> /* types and prototypes only: the library is opened at run time */
#include <cuda_runtime.h>
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

typedef struct cuda_ctx_s {
  int device;
  cudaStream_t stream;
  cublasHandle_t handle;   /* bound to stream */
  double *partials;        /* (2 * REDUCE_BLOCKS) first-pass sums of a reduction */
  double *colsum;          /* (COLSUM_CHUNKS, max(4H, O)) first-pass column sums */
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

/* out[k] (k < width <= 2) = the sum of the first pass's partials
 * (c->partials, blocks of them), times mul1 for k == 1. */
ls_err_t reduce_final(cuda_ctx_t *c, double *out, int blocks, int width, double mul1);

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
ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                       const float *y, const float *w, int N, int H, int O);
ls_err_t grad_norm_sq(void *ctx, double *norm_sq, const float *g, size_t n);
ls_err_t adam_update(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                     const double *norm_sq, float grad_scale, const ls_optim_t *opt, int64_t step);

/* lstm_cuda_state.cu */
ls_err_t state_gather(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
                      const float *tab_c, const int64_t *slots, int B, int L, int H);
ls_err_t state_scatter(void *ctx, float *tab_h, float *tab_c, const float *hT, const float *cT,
                       size_t stride, const int64_t *slots, int B, int L, int H);

#endif /* LSTREAM_KERNELS_LSTM_CUDA_H */
