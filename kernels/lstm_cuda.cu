/*
 * The CUDA backend: the primitives of kernels/backend.h on one GPU, with
 * cuBLAS for the GEMMs and fused kernels for everything pointwise.
 *
 * It mirrors lstm_cpu.c function for function (lstm_forward, lstm_backward,
 * lstm_cell_forward, lstm_cell_backward, head_forward, seq_targets, mse_loss,
 * elem_loss, loss_cols, head_backward, grad_norm_sq, adam_update,
 * optimizer_step, state_gather, state_scatter, fill_rows, colsum_add,
 * graph_run), with the same arguments in the same order; read the two side
 * by side (elem_loss and loss_cols share one target's arithmetic with the
 * CPU, loss_elem.h). Every float* is device memory; all work is queued
 * on the context's stream, and only download waits for it. This file holds
 * the table and the context; the primitives live in rooms (lstm_cuda.h
 * lists them).
 *
 * GEMMs keep the CPU's row-major formulation: sgemm() (lstm_cuda_common.cu)
 * takes exactly the arguments of the CPU's cblas_sgemm(CblasRowMajor, ...)
 * calls and maps them to column-major cuBLAS (opened on first use), in
 * plain float32 or, with LS_PRECISION_TF32, on TF32 tensor cores (ctx_init
 * sets the handle's math mode). TF32 reaches the cuBLAS GEMMs only: the
 * persistent recurrent kernels (lstm_cuda_persist*.cu) compute in fp32
 * whatever the precision, so where a layer runs on them, its recurrent
 * product is fp32 under --precision tf32 too. Sums that feed a loss, a
 * norm or a bias gradient run in double, as on the CPU, through two-pass
 * reductions whose order depends only on the sizes (never on the order in
 * which blocks finish: an atomic ticket only picks which block adds the
 * parts up, in their fixed order). Our own kernels' results therefore do
 * not depend on the SM count; cuBLAS's are reproducible run after run only
 * on the same architecture and SM count (cuBLAS documentation, "Results
 * reproducibility"), and the persistent kernels' plan (cluster and row
 * groups) follows the device's shared memory. So a replay gives
 * bit-identical results run after run on one kind of GPU, not across kinds.
 */
#include <stdlib.h>
#include <string.h>

#include "lstm_cuda.h"

#ifndef LSTREAM_CUDA_ARCHS
#define LSTREAM_CUDA_ARCHS "unknown"
#endif

/* ------------------------------------------------------------------------ */
/* Context                                                                   */

static void ctx_free(void *ctx) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  if (c == NULL) return;
  /* Teardown cannot report errors: each step is tried whatever came before. */
  (void)cudaSetDevice(c->device);
  if (c->stream != NULL) (void)cudaStreamSynchronize(c->stream);
  graph_free_all(c);
  if (c->handle != NULL) (void)blas.destroy(c->handle);
  (void)cudaFree(c->blas_work);
  (void)cudaFree(c->partials);
  (void)cudaFree(c->colsum);
  (void)cudaFree(c->tickets);
  (void)cudaFree(c->persist_part);
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

static void *ctx_stream(void *ctx) {
  return ((cuda_ctx_t *)ctx)->stream;
}

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
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, c->device));
  size_t const work = prop.major >= 9 ? BLAS_WORKSPACE_HOPPER : BLAS_WORKSPACE;
  CUDA_CHECK(cudaMalloc(&c->blas_work, work));
  CUBLAS_CHECK(blas.set_workspace(c->handle, c->blas_work, work));
  size_t const H = (size_t)conf->shape.hidden_size, O = (size_t)conf->shape.output_size;
  size_t const cols = 4 * H > O ? 4 * H : O;
  c->H = (int)H;
  CUDA_CHECK(cudaMalloc((void **)&c->partials, 2 * REDUCE_BLOCKS * sizeof(double)));
  CUDA_CHECK(cudaMalloc((void **)&c->colsum, COLSUM_CHUNKS * cols * sizeof(double)));
  CUDA_CHECK(cudaMalloc((void **)&c->tickets, TICKETS * sizeof(unsigned)));
  CUDA_CHECK(cudaMemsetAsync(c->tickets, 0, TICKETS * sizeof(unsigned), c->stream));
  LS_FORWARD_IF_ERROR(persist_init(c, conf));
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
  const char *const graphs = getenv("LSTREAM_CUDA_GRAPHS");
  cuda_ctx_t *c = (cuda_ctx_t *)calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the CUDA backend");
  c->device = conf->device_index;
  /* Graphs replay what they recorded without the checks of each launch. */
  c->graphs_off = launch_sync || (graphs != NULL && !strcmp(graphs, "0"));
  ls_err_t const e = ctx_init(c, conf);
  if (e != LS_OK) {
    ctx_free(c);
    return e;
  }
  *out = c;
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
    .elem_loss = elem_loss,
    .loss_cols = loss_cols,
    .head_backward = head_backward,
    .optimizer_step = optimizer_step,
    .state_gather = state_gather,
    .state_scatter = state_scatter,
    .fetch_start = fetch_start,
    .fetch_wait = fetch_wait,
    .graph_run = graph_run,
};
