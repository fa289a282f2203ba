/*
 * The CUDA backend: the primitives of kernels/backend.h on one GPU, with
 * cuBLAS for the GEMMs and fused kernels for everything pointwise.
 *
 * It mirrors lstm_cpu.c function for function (lstm_forward, lstm_backward,
 * lstm_cell_forward, lstm_cell_backward, head_forward, seq_targets, mse_loss,
 * head_backward, grad_norm_sq, adam_update, state_gather, state_scatter,
 * fill_rows, colsum_add), with the same arguments in the same order; read
 * the two side by side. Every float* is device memory; all work is queued
 * on the context's stream, and only download waits for it.
 *
 * GEMMs keep the CPU's row-major formulation: sgemm() below takes exactly
 * the arguments of the CPU's cblas_sgemm(CblasRowMajor, ...) calls and maps
 * them to column-major cuBLAS (opened with dlopen on first use), in plain
 * float32 or, with LS_PRECISION_TF32, on TF32 tensor cores (ctx_init sets
 * the handle's math mode; nothing else differs). Sums that feed a loss, a
 * norm or a bias gradient run in double, as on the CPU, through two-pass
 * reductions whose order depends only on the sizes (never on atomics or on
 * the device's SM count), so a replay gives bit-identical results run after
 * run.
 */
#include <cublas_v2.h> /* types and prototypes only: the library is opened at run time */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base/library.h"

#ifndef LSTREAM_CUDA_ARCHS
#define LSTREAM_CUDA_ARCHS "unknown"
#endif

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
/* cuBLAS, opened on first use                                               */

/* cuBLAS is opened by the first CUDA context instead of being linked:
 * loading libcublas (and libcublasLt) runs their static initialisers, about
 * 0.1 s at the start of every process (`lstream --help`: 0.11 s linked,
 * 0.01 s not), which CPU-only runs would pay, and the tests once per
 * Criterion test, each its own process. The entry points keep cuBLAS' own
 * prototypes. */
static struct {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasGetStatusString) status_string;
} blas;
static base_library_t blas_lib =
    BASE_LIBRARY_INIT(BASE_LIBRARY_SO("libcublas", CUBLAS_VER_MAJOR), "cuBLAS",
                      "install the CUDA toolkit's cuBLAS");

static ls_err_t blas_load(void) {
  base_symbol_t const syms[] = {
      {"cublasCreate_v2", reinterpret_cast<void **>(&blas.create)},
      {"cublasDestroy_v2", reinterpret_cast<void **>(&blas.destroy)},
      {"cublasSetStream_v2", reinterpret_cast<void **>(&blas.set_stream)},
      {"cublasSetMathMode", reinterpret_cast<void **>(&blas.set_math_mode)},
      {"cublasSgemm_v2", reinterpret_cast<void **>(&blas.sgemm)},
      {"cublasGetStatusString", reinterpret_cast<void **>(&blas.status_string)},
  };
  return base_library_open(&blas_lib, syms, sizeof syms / sizeof syms[0]);
}

/* ------------------------------------------------------------------------ */
/* Error checks                                                              */

/* LSTREAM_CUDA_SYNC=1 (read when a context is created): wait for every
 * kernel and GEMM right after its launch and check it, so that a fault is
 * reported by the launch that caused it, by name. Slow; for debugging. */
static int launch_sync;

/* A failed call: LS_ERR_BACKEND naming the call and CUDA's message. Errors
 * of earlier, asynchronous work surface in whichever call comes next: the
 * message then says how to find the kernel. */
static ls_err_t cuda_fail(const char *call, cudaError_t err) {
  int const async = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure;
  return ls_error_set(LS_ERR_BACKEND, "CUDA: %s failed: %s (%s)%s", call, cudaGetErrorString(err),
                      cudaGetErrorName(err),
                      async && !launch_sync
                          ? "; the fault is an earlier kernel's: rerun with LSTREAM_CUDA_SYNC=1 to "
                            "name it"
                          : "");
}

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
static ls_err_t launch_check(const char *kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && launch_sync) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return LS_OK;
  return ls_error_set(LS_ERR_BACKEND, "CUDA: %s %s failed: %s (%s)",
                      launch_sync ? "kernel" : "launch of", kernel, cudaGetErrorString(err),
                      cudaGetErrorName(err));
}
#define LAUNCH_CHECK(kernel) LS_FORWARD_IF_ERROR(launch_check(kernel))

/* Makes the context's device current on the calling thread (engine calls
 * may come from any one thread at a time). */
static ls_err_t enter(cuda_ctx_t *c) {
  CUDA_CHECK(cudaSetDevice(c->device));
  return LS_OK;
}

/* Blocks of THREADS threads for n items of a grid-stride loop. */
static unsigned grid_for(size_t n) {
  size_t const b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

#define GRID_STRIDE(i, n)                                                                          \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                          \
       i += (size_t)gridDim.x * blockDim.x)

/* ------------------------------------------------------------------------ */
/* Deterministic sums                                                        */

/* Sum of v over the block (blockDim.x == THREADS), in a fixed tree order;
 * every thread gets it. sh holds THREADS doubles. */
__device__ static double block_sum(double v, double *sh) {
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

/* Second pass: out[k] = sum over blocks of partials[blk * width + k], for
 * k < width (<= 2), times mul1 for k == 1 (the loss count's O). One block. */
__global__ static void reduce_final_kernel(double *out, const double *partials, int blocks,
                                           int width, double mul1) {
  __shared__ double sh[THREADS];
  for (int k = 0; k < width; k++) {
    double v = 0.0;
    for (int b = threadIdx.x; b < blocks; b += THREADS)
      v += partials[(size_t)b * width + k];
    v = block_sum(v, sh);
    if (threadIdx.x == 0) out[k] = k == 1 ? v * mul1 : v;
  }
}

static ls_err_t reduce_final(cuda_ctx_t *c, double *out, int blocks, int width, double mul1) {
  reduce_final_kernel<<<1, THREADS, 0, c->stream>>>(out, c->partials, blocks, width, mul1);
  LAUNCH_CHECK("reduce_final_kernel");
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Context and memory                                                        */

static void ctx_free(void *ctx) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  if (c == NULL) return;
  /* Teardown cannot report errors: each step is tried whatever came before. */
  (void)cudaSetDevice(c->device);
  if (c->stream != NULL) (void)cudaStreamSynchronize(c->stream);
  if (c->handle != NULL) (void)blas.destroy(c->handle);
  (void)cudaFree(c->partials);
  (void)cudaFree(c->colsum);
  (void)cudaFree(c->slots);
  for (int k = 0; k < 2; k++) {
    if (c->stage[k] != NULL) (void)cudaFreeHost(c->stage[k]);
    if (c->stage_ev[k] != NULL) (void)cudaEventDestroy(c->stage_ev[k]);
  }
  if (c->fetch != NULL) (void)cudaFreeHost(c->fetch);
  if (c->fetch_ev != NULL) (void)cudaEventDestroy(c->fetch_ev);
  if (c->stream != NULL) (void)cudaStreamDestroy(c->stream);
  free(c);
}

static void *ctx_stream(void *ctx) { return ((cuda_ctx_t *)ctx)->stream; }

__global__ static void probe_kernel(void) {}

/* Everything the context owns, on a context whose fields start zeroed. */
static ls_err_t ctx_init(cuda_ctx_t *c, const ls_engine_conf_t *conf) {
  CUDA_CHECK(cudaSetDevice(c->device));
  /* A device older than every architecture this build holds has no image
   * of our kernels: say so now, not at the first launch. */
  cudaFuncAttributes attr;
  cudaError_t const img = cudaFuncGetAttributes(&attr, probe_kernel);
  if (img != cudaSuccess) {
    cudaDeviceProp prop;
    int const known = cudaGetDeviceProperties(&prop, c->device) == cudaSuccess;
    (void)cudaGetLastError();
    return ls_error_set(LS_ERR_UNSUPPORTED,
                        "CUDA device %d (sm_%d%d) cannot run this build's kernels (built for "
                        "CMAKE_CUDA_ARCHITECTURES=%s): %s; rebuild with "
                        "-DCMAKE_CUDA_ARCHITECTURES=<the device's>",
                        c->device, known ? prop.major : 0, known ? prop.minor : 0,
                        LSTREAM_CUDA_ARCHS, cudaGetErrorString(img));
  }
  LS_FORWARD_IF_ERROR(blas_load());
  CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUBLAS_CHECK(blas.create(&c->handle));
  CUBLAS_CHECK(blas.set_stream(c->handle, c->stream));
  /* fp32: CUBLAS_DEFAULT_MATH, plain float32 GEMMs as on the CPU. cuBLAS'
   * default mode computes with at least the precision and range asked for
   * (cublas_api.h: CUBLAS_COMPUTE_32F "guarantee internal storage precision
   * with at least the same precision and range"); for float32 inputs TF32
   * is opt-in (CUBLAS_TF32_TENSOR_OP_MATH or a _FAST_TF32 compute type),
   * unlike cuDNN, where it is opt-out.
   * tf32: CUBLAS_TF32_TENSOR_OP_MATH: each cublasSgemm may round its inputs
   * to TF32 and run on the tensor cores, accumulating in float32. The
   * environment variable NVIDIA_TF32_OVERRIDE=0 disables TF32 in NVIDIA's
   * libraries whatever the handle says: tf32 then computes as fp32. */
  CUBLAS_CHECK(blas.set_math_mode(c->handle, conf->precision == LS_PRECISION_TF32
                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                 : CUBLAS_DEFAULT_MATH));
  size_t const H = (size_t)conf->shape.hidden_size, O = (size_t)conf->shape.output_size;
  size_t const cols = 4 * H > O ? 4 * H : O;
  CUDA_CHECK(cudaMalloc((void **)&c->partials, 2 * REDUCE_BLOCKS * sizeof(double)));
  CUDA_CHECK(cudaMalloc((void **)&c->colsum, COLSUM_CHUNKS * cols * sizeof(double)));
  CUDA_CHECK(cudaMalloc((void **)&c->slots, (size_t)conf->max_batch * sizeof(int64_t)));
  for (int k = 0; k < 2; k++) {
    CUDA_CHECK(cudaMallocHost((void **)&c->stage[k], STAGE_BYTES));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->stage_ev[k], cudaEventDisableTiming));
  }
  CUDA_CHECK(cudaMallocHost((void **)&c->fetch, FETCH_BYTES));
  CUDA_CHECK(cudaEventCreateWithFlags(&c->fetch_ev, cudaEventDisableTiming));
  return LS_OK;
}

static int device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear it: nothing else on this thread should see it */
    count = 0;
  }
  return count;
}

static ls_err_t ctx_new(ls_engine_conf_t *conf, void **out) {
  int count = 0;
  cudaError_t const err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError(); /* clear it: nothing else on this thread should see it */
    /* No driver at all reads as an insufficient one (driver version 0):
     * no device. A driver that is there but fails is an error. */
    int driver = 0;
    int const absent = err == cudaSuccess || err == cudaErrorNoDevice ||
                       (err == cudaErrorInsufficientDriver &&
                        cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0);
    LS_RETURN_IF(!absent, LS_ERR_BACKEND,
                 "CUDA cannot start: cudaGetDeviceCount failed: %s (%s); the driver supports "
                 "CUDA %d.%d, this build needs %d.%d: update the driver",
                 cudaGetErrorString(err), cudaGetErrorName(err), driver / 1000, driver % 1000 / 10,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    return ls_error_set(LS_ERR_UNSUPPORTED,
                        "no CUDA device (cudaGetDeviceCount: %s): is a GPU visible and its "
                        "driver installed? Otherwise use --device cpu",
                        err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
  }
  LS_RETURN_IF(conf->device_index < 0 || conf->device_index >= count, LS_ERR_INVALID_ARG,
               "CUDA device index %d is out of range [0, %d)", conf->device_index, count);
  const char *const sync = getenv("LSTREAM_CUDA_SYNC");
  launch_sync = sync != NULL && !strcmp(sync, "1");
  cuda_ctx_t *c = (cuda_ctx_t *)calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the CUDA backend");
  c->device = conf->device_index;
  ls_err_t const e = ctx_init(c, conf);
  if (e != LS_OK) {
    ctx_free(c);
    return e;
  }
  *out = c;
  return LS_OK;
}

/* Stream-ordered (cudaMallocAsync, cudaFreeAsync on the context's
 * stream): neither synchronises the device, so a state table can grow in
 * the middle of training while the NCCL stream runs. */
static ls_err_t mem_alloc(void *ctx, size_t bytes, void **ptr) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  void *p = NULL;
  cudaError_t const err = cudaMallocAsync(&p, bytes == 0 ? 256 : bytes, c->stream);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return ls_error_set(err == cudaErrorMemoryAllocation ? LS_ERR_NOMEM : LS_ERR_BACKEND,
                        "CUDA: cudaMallocAsync of %zu bytes on device %d failed: %s", bytes,
                        c->device, cudaGetErrorString(err));
  }
  if (bytes != 0) {
    cudaError_t const z = cudaMemsetAsync(p, 0, bytes, c->stream);
    if (z != cudaSuccess) {
      (void)cudaFreeAsync(p, c->stream);
      return ls_error_set(LS_ERR_BACKEND, "CUDA: cudaMemsetAsync of %zu bytes failed: %s", bytes,
                          cudaGetErrorString(z));
    }
  }
  *ptr = p;
  return LS_OK;
}

static void mem_free(void *ctx, void *ptr) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  (void)cudaSetDevice(c->device);
  (void)cudaFreeAsync(ptr, c->stream); /* after the work queued on the stream */
}

/* Host -> device through the pinned staging buffers, chunk by chunk; the
 * host buffer may be reused as soon as this returns, the copies complete in
 * stream order. */
static ls_err_t mem_upload(void *ctx, void *dst, const void *host_src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  for (size_t off = 0; off < bytes; off += STAGE_BYTES) {
    size_t const len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
    int const k = c->stage_next;
    c->stage_next ^= 1;
    CUDA_CHECK(cudaEventSynchronize(c->stage_ev[k])); /* stage[k]'s last transfer is done */
    memcpy(c->stage[k], (const unsigned char *)host_src + off, len);
    CUDA_CHECK(cudaMemcpyAsync((unsigned char *)dst + off, c->stage[k], len, cudaMemcpyHostToDevice,
                               c->stream));
    CUDA_CHECK(cudaEventRecord(c->stage_ev[k], c->stream));
  }
  return LS_OK;
}

/* Device -> host after everything queued so far: chunk i is copied out of
 * its staging buffer while chunk i+1 is in flight. */
static ls_err_t mem_download(void *ctx, void *host_dst, const void *src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  int pk = -1; /* the chunk in flight, not yet copied out: buffer, offset, length */
  size_t poff = 0, plen = 0;
  for (size_t off = 0; off < bytes; off += STAGE_BYTES) {
    size_t const len = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
    int const k = c->stage_next;
    c->stage_next ^= 1;
    CUDA_CHECK(cudaMemcpyAsync(c->stage[k], (const unsigned char *)src + off, len,
                               cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaEventRecord(c->stage_ev[k], c->stream));
    if (pk >= 0) {
      CUDA_CHECK(cudaEventSynchronize(c->stage_ev[pk]));
      memcpy((unsigned char *)host_dst + poff, c->stage[pk], plen);
    }
    pk = k, poff = off, plen = len;
  }
  CUDA_CHECK(cudaStreamSynchronize(c->stream));
  if (pk >= 0) memcpy((unsigned char *)host_dst + poff, c->stage[pk], plen);
  return LS_OK;
}

static ls_err_t mem_copy(void *ctx, void *dst, const void *src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
  return LS_OK;
}

static ls_err_t mem_zero(void *ctx, void *dst, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, c->stream));
  return LS_OK;
}

/* The step's figures: one copy into pinned memory queued after the step,
 * waited for only when they are read. */
static ls_err_t fetch_start(void *ctx, const void *src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  CUDA_CHECK(cudaMemcpyAsync(c->fetch, src, bytes, cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaEventRecord(c->fetch_ev, c->stream));
  return LS_OK;
}

static ls_err_t fetch_wait(void *ctx, void *host_dst, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  CUDA_CHECK(cudaEventSynchronize(c->fetch_ev));
  memcpy(host_dst, c->fetch, bytes);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Row-major GEMM through cuBLAS                                             */

/* C [M, N] = alpha * op(A) [M, K] @ op(B) [K, N] + beta * C, all row-major
 * with leading dimensions lda, ldb, ldc: the arguments of
 * cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta,
 * C, ldc). cuBLAS is column-major, and a row-major matrix with leading
 * dimension ld is, read column-major with the same ld, its transpose. So
 * the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T:
 * swap the operands (B first), swap M and N, keep each operand's own
 * transpose flag (op(B)^T is B's column-major view Bc when tb = N, and Bc^T
 * when tb = T) and every leading dimension. */
static ls_err_t sgemm(cuda_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int M, int N,
                      int K, float alpha, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc) {
  CUBLAS_CHECK(blas.sgemm(c->handle, tb, ta, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
  return launch_sync ? launch_check("cublasSgemm") : LS_OK;
}

/* cblas' names, so that every call below reads as its CPU twin. */
static cublasOperation_t const NoTrans = CUBLAS_OP_N, Trans = CUBLAS_OP_T;

/* ------------------------------------------------------------------------ */
/* Pointwise cell math, one thread per (b, j) of one time step               */

__device__ static float sigmoidf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/* Forward: g [B, 4H] pre-activations in, activated gates out;
 * c = f * c_prev + i * g; tc = tanh(c); h = o * tc. */
__global__ static void lstm_cell_forward_kernel(float *g, float *h, float *c, float *tc,
                                                const float *c_prev, int B, int H) {
  GRID_STRIDE(idx, (size_t)B * H) {
    size_t const b = idx / (size_t)H, j = idx % (size_t)H;
    float *const gi = g + b * 4 * H, *const gf = gi + H, *const gg = gi + 2 * H,
                 *const go = gi + 3 * H;
    float const i = sigmoidf(gi[j]), f = sigmoidf(gf[j]);
    float const gt = tanhf(gg[j]), o = sigmoidf(go[j]);
    float const cn = f * c_prev[idx] + i * gt;
    float const t = tanhf(cn);
    gi[j] = i, gf[j] = f, gg[j] = gt, go[j] = o;
    c[idx] = cn;
    tc[idx] = t;
    h[idx] = o * t;
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
    const float *const gi = g + b * 4 * H, *const gf = gi + H, *const gg = gi + 2 * H,
                       *const go = gi + 3 * H;
    float *const di = dg + b * 4 * H, *const df = di + H, *const dgg = di + 2 * H,
                 *const dout = di + 3 * H;
    float const i = gi[j], f = gf[j], gt = gg[j], o = go[j], t = tc[idx];
    float const d_h = dh[idx];
    float const d_c = dc[idx] + d_h * o * (1.0f - t * t);
    di[j] = d_c * gt * i * (1.0f - i);
    df[j] = d_c * c_prev[idx] * f * (1.0f - f);
    dgg[j] = d_c * i * (1.0f - gt * gt);
    dout[j] = d_h * t * o * (1.0f - o);
    dc[idx] = d_c * f;
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
/* Row helpers                                                               */

/* rows [N, n] = b1 [n] (+ b2 [n]) broadcast; beta=1 GEMMs then add. */
__global__ static void fill_rows_kernel(float *rows, const float *b1, const float *b2, size_t N,
                                        int n) {
  GRID_STRIDE(i, N * n) {
    size_t const j = i % (size_t)n;
    rows[i] = b2 != NULL ? b1[j] + b2[j] : b1[j];
  }
}

static ls_err_t fill_rows(cuda_ctx_t *c, float *rows, const float *b1, const float *b2, int N,
                          int n) {
  fill_rows_kernel<<<grid_for((size_t)N * n), THREADS, 0, c->stream>>>(rows, b1, b2, (size_t)N, n);
  LAUNCH_CHECK("fill_rows_kernel");
  return LS_OK;
}

/* First pass of a column sum: part[chunk, j] = sum of rows[r, j] over the
 * chunk's rows, in double. Blocks of 32 columns x 8 row lanes: a warp reads
 * 32 consecutive floats of one row. */
__global__ static void colsum_partial_kernel(double *part, const float *rows, int N, int n,
                                             int chunk_rows) {
  __shared__ double sh[8][33];
  int const j = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
  int const r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < N ? r0 + chunk_rows : N;
  double acc = 0.0;
  if (j < n)
    for (int r = r0 + threadIdx.y; r < r1; r += 8)
      acc += (double)rows[(size_t)r * n + j];
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    double s = 0.0;
    for (int k = 0; k < 8; k++)
      s += sh[k][threadIdx.x];
    part[(size_t)chunk * n + j] = s;
  }
}

/* Second pass: a[j] += sum over chunks (and b[j], if b is not NULL). */
__global__ static void colsum_final_kernel(float *a, float *b, const double *part, int chunks,
                                           int n) {
  GRID_STRIDE(j, (size_t)n) {
    double s = 0.0;
    for (int k = 0; k < chunks; k++)
      s += part[(size_t)k * n + j];
    a[j] = (float)((double)a[j] + s);
    if (b != NULL) b[j] = (float)((double)b[j] + s);
  }
}

/* a [n] += column sums of rows [N, n]; b (may be NULL) gets the same sums.
 * The sums run in double: bias gradients add T*B terms that may cancel. */
static ls_err_t colsum_add(cuda_ctx_t *c, float *a, float *b, const float *rows, int N, int n) {
  int chunks = (N + COLSUM_MIN_ROWS - 1) / COLSUM_MIN_ROWS;
  chunks = chunks > COLSUM_CHUNKS ? COLSUM_CHUNKS : chunks;
  int const chunk_rows = (N + chunks - 1) / chunks;
  dim3 const grid((unsigned)((n + 31) / 32), (unsigned)chunks), block(32, 8);
  colsum_partial_kernel<<<grid, block, 0, c->stream>>>(c->colsum, rows, N, n, chunk_rows);
  LAUNCH_CHECK("colsum_partial_kernel");
  colsum_final_kernel<<<grid_for((size_t)n), THREADS, 0, c->stream>>>(a, b, c->colsum, chunks, n);
  LAUNCH_CHECK("colsum_final_kernel");
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* LSTM layer                                                                */

/* The input projection of all T steps is one GEMM; the recurrence is one
 * GEMM and one fused cell kernel per step over all B rows. */
static ls_err_t lstm_forward(void *ctx, float *gates, float *hs, float *cs, float *tcs,
                             const float *x, const float *w_ih, const float *w_hh,
                             const float *b_ih, const float *b_hh, int T, int B, int In, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  int const N = T * B, G = 4 * H;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  LS_FORWARD_IF_ERROR(enter(c));
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

static ls_err_t lstm_backward(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih,
                              float *dw_hh, float *db_ih, float *db_hh, float *dgates, float *dh,
                              const float *gates, const float *hs, const float *cs,
                              const float *tcs, const float *x, const float *w_ih,
                              const float *w_hh, int T, int B, int In, int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  int const N = T * B, G = 4 * H;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  LS_FORWARD_IF_ERROR(enter(c));
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

/* ------------------------------------------------------------------------ */
/* Head and loss                                                             */

static ls_err_t head_forward(void *ctx, float *pred, const float *y, const float *w, const float *b,
                             int N, int H, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  LS_FORWARD_IF_ERROR(fill_rows(c, pred, b, NULL, N, O));
  /* pred [N, O] += y [N, H] @ w^T; cuBLAS: (T, N, O, N, H, w, H, y, H, pred, O). */
  LS_FORWARD_IF_ERROR(sgemm(c, NoTrans, Trans, N, O, H, 1.0f, y, H, w, H, 1.0f, pred, O));
  return LS_OK;
}

static ls_err_t seq_targets(void *ctx, const float **target, const float *seq, int B, int In) {
  (void)ctx; /* nothing to launch: the targets are rows of the device copy of seq */
  *target = seq + (size_t)B * In; /* row 1 */
  return LS_OK;
}

/* One thread per row (grid-stride over N rows): the row's squared error in
 * float and dpred as on the CPU; then, per block, the sums of m * row and
 * of m in double into partials[2 * block + {0, 1}]. */
__global__ static void mse_loss_kernel(double *partials, float *dpred, const float *pred,
                                       const float *target, const float *mask, float scale, int N,
                                       int O) {
  __shared__ double sh[THREADS];
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
  sum = block_sum(sum, sh);
  valid = block_sum(valid, sh);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sum;
    partials[2 * blockIdx.x + 1] = valid;
  }
}

static ls_err_t mse_loss(void *ctx, double *loss, float *dpred, const float *pred,
                         const float *target, const float *mask, float scale, int N, int O) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  unsigned blocks = grid_for((size_t)N);
  blocks = blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
  mse_loss_kernel<<<blocks, THREADS, 0, c->stream>>>(c->partials, dpred, pred, target, mask, scale,
                                                     N, O);
  LAUNCH_CHECK("mse_loss_kernel");
  /* loss[0] = sum, loss[1] = valid * O. */
  return reduce_final(c, loss, (int)blocks, 2, (double)O);
}

static ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
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

__global__ static void grad_norm_sq_kernel(double *partials, const float *g, size_t n) {
  __shared__ double sh[THREADS];
  double sum = 0.0;
  GRID_STRIDE(i, n) sum += (double)g[i] * (double)g[i];
  sum = block_sum(sum, sh);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

static ls_err_t grad_norm_sq(void *ctx, double *norm_sq, const float *g, size_t n) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  /* A grid that depends on n alone makes the sum reproducible. */
  unsigned blocks = grid_for(n);
  blocks = blocks > REDUCE_BLOCKS ? REDUCE_BLOCKS : blocks;
  grad_norm_sq_kernel<<<blocks, THREADS, 0, c->stream>>>(c->partials, g, n);
  LAUNCH_CHECK("grad_norm_sq_kernel");
  return reduce_final(c, norm_sq, (int)blocks, 1, 1.0);
}

/* torch.optim.Adam(W), single-tensor path, after clip_grad_norm_. The clip
 * coefficient comes from the device's norm_sq, in double as on the CPU. */
__global__ static void adam_update_kernel(float *p, float *g, float *m, float *v, size_t n,
                                          const double *norm_sq, float grad_scale, float clip_norm,
                                          float b1, float b2, float eps, float step_size,
                                          float bc2_sqrt, float decay, float l2) {
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  double const norm = (double)grad_scale * sqrt(*norm_sq);
  double coef = 1.0;
  if (clip_norm > 0.0f) {
    coef = (double)clip_norm / (norm + 1e-6);
    coef = coef < 1.0 ? coef : 1.0;
  }
  float const gs = (float)((double)grad_scale * coef);
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

static ls_err_t adam_update(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                            const double *norm_sq, float grad_scale, const ls_optim_t *opt,
                            int64_t step) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  /* Bias corrections on the host in double, then float, as on the CPU. */
  float const b1 = opt->beta1, b2 = opt->beta2, wd = opt->weight_decay, lr = opt->lr;
  double const bc1 = 1.0 - pow((double)b1, (double)step);
  double const bc2 = 1.0 - pow((double)b2, (double)step);
  float const step_size = (float)((double)lr / bc1);
  float const bc2_sqrt = (float)sqrt(bc2);
  float const decay = opt->decoupled ? 1.0f - lr * wd : 1.0f;
  float const l2 = opt->decoupled ? 0.0f : wd;
  adam_update_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(p, g, m, v, n, norm_sq, grad_scale,
                                                             opt->clip_norm, b1, b2, opt->eps,
                                                             step_size, bc2_sqrt, decay, l2);
  LAUNCH_CHECK("adam_update_kernel");
  return LS_OK;
}

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

static ls_err_t state_gather(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
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

static ls_err_t state_scatter(void *ctx, float *tab_h, float *tab_c, const float *hT,
                              const float *cT, size_t stride, const int64_t *slots, int B, int L,
                              int H) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(mem_upload(c, c->slots, slots, (size_t)B * sizeof(int64_t)));
  state_scatter_kernel<<<grid_for((size_t)B * L * H), THREADS, 0, c->stream>>>(
      tab_h, tab_c, hT, cT, stride, c->slots, B, L, H);
  LAUNCH_CHECK("state_scatter_kernel");
  return LS_OK;
}

/* ------------------------------------------------------------------------ */

/* C linkage from its declaration in backend.h. */
const ls_backend_ops_t ls_backend_cuda = {
    .name = "cuda",
    .ctx_new = ctx_new,
    .ctx_free = ctx_free,
    .stream = ctx_stream,
    .device_count = device_count,
    .alloc = mem_alloc,
    .free = mem_free,
    .upload = mem_upload,
    .download = mem_download,
    .copy = mem_copy,
    .zero = mem_zero,
    .lstm_forward = lstm_forward,
    .lstm_backward = lstm_backward,
    .head_forward = head_forward,
    .seq_targets = seq_targets,
    .mse_loss = mse_loss,
    .head_backward = head_backward,
    .grad_norm_sq = grad_norm_sq,
    .adam_update = adam_update,
    .state_gather = state_gather,
    .state_scatter = state_scatter,
    .fetch_start = fetch_start,
    .fetch_wait = fetch_wait,
};
