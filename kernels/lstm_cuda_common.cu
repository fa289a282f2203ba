/*
 * What the CUDA backend's rooms share (kernels/lstm_cuda.h): cuBLAS opened
 * on first use, error checks, the persistent kernels' launch
 * configuration, the row-major GEMM, and the row helpers fill_rows and
 * colsum_add (their twins are in lstm_cpu.c).
 */
#include <string.h>

#include "base/library.h"
#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* cuBLAS, opened on first use                                               */

/* cuBLAS is opened by the first CUDA context instead of being linked:
 * loading libcublas (and libcublasLt) runs their static initialisers, about
 * 0.1 s at the start of every process (`lstream --help`: 0.11 s linked,
 * 0.01 s not), which CPU-only runs would pay, and the tests once per
 * Criterion test, each its own process. The entry points keep cuBLAS' own
 * prototypes. */
cuda_blas_t blas;
static base_library_t blas_lib = BASE_LIBRARY_INIT(BASE_LIBRARY_SO("libcublas", CUBLAS_VER_MAJOR),
                                                   "cuBLAS", "install the CUDA toolkit's cuBLAS");

ls_err_t blas_load(void) {
  base_symbol_t const syms[] = {
      {"cublasCreate_v2", reinterpret_cast<void **>(&blas.create)},
      {"cublasDestroy_v2", reinterpret_cast<void **>(&blas.destroy)},
      {"cublasSetStream_v2", reinterpret_cast<void **>(&blas.set_stream)},
      {"cublasSetMathMode", reinterpret_cast<void **>(&blas.set_math_mode)},
      {"cublasSetWorkspace_v2", reinterpret_cast<void **>(&blas.set_workspace)},
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
int launch_sync;

/* A failed call: LS_ERR_BACKEND naming the call and CUDA's message. Errors
 * of earlier, asynchronous work surface in whichever call comes next: the
 * message then says how to find the kernel. */
ls_err_t cuda_fail(const char *call, cudaError_t err) {
  int const async = err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure;
  return ls_error_set(LS_ERR_BACKEND, "CUDA: %s failed: %s (%s)%s", call, cudaGetErrorString(err),
                      cudaGetErrorName(err),
                      async && !launch_sync
                          ? "; the fault is an earlier kernel's: rerun with LSTREAM_CUDA_SYNC=1 to "
                            "name it"
                          : "");
}

/* After a kernel launch: a bad configuration or a missing kernel image;
 * with LSTREAM_CUDA_SYNC=1 also the kernel's own faults. */
ls_err_t launch_check(const char *kernel) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && launch_sync) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) return LS_OK;
  return ls_error_set(LS_ERR_BACKEND, "CUDA: %s %s failed: %s (%s)",
                      launch_sync ? "kernel" : "launch of", kernel, cudaGetErrorString(err),
                      cudaGetErrorName(err));
}

/* Makes the context's device current on the calling thread (engine calls
 * may come from any one thread at a time). */
ls_err_t enter(cuda_ctx_t *c) {
  CUDA_CHECK(cudaSetDevice(c->device));
  return LS_OK;
}

/* Blocks of THREADS threads for n items of a grid-stride loop. */
unsigned grid_for(size_t n) {
  size_t const b = (n + THREADS - 1) / THREADS;
  return (unsigned)(b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : b);
}

/* A persistent kernel's launch (lstm_cuda_persist*.cu): clusters of C
 * blocks, no cluster attribute for C = 1. */
void persist_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *attr, int grid, int threads,
                    int C, size_t smem, cudaStream_t stream) {
  memset(attr, 0, sizeof *attr);
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = (unsigned)C, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
  cfg->gridDim = dim3((unsigned)grid), cfg->blockDim = dim3((unsigned)threads);
  cfg->dynamicSmemBytes = smem, cfg->stream = stream;
  cfg->attrs = C > 1 ? attr : NULL, cfg->numAttrs = C > 1 ? 1 : 0;
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
ls_err_t sgemm(cuda_ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C,
               int ldc) {
  CUBLAS_CHECK(blas.sgemm(c->handle, tb, ta, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
  return launch_sync ? launch_check("cublasSgemm") : LS_OK;
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

ls_err_t fill_rows(cuda_ctx_t *c, float *rows, const float *b1, const float *b2, int N, int n) {
  fill_rows_kernel<<<grid_for((size_t)N * n), THREADS, 0, c->stream>>>(rows, b1, b2, (size_t)N, n);
  LAUNCH_CHECK("fill_rows_kernel");
  return LS_OK;
}

/* a [n] += column sums of rows [N, n] in double (b, if not NULL, too), in
 * one kernel. Each block sums its chunk of rows for 32 columns into
 * part[chunk, j] (threads 32 columns x 8 row lanes: a warp reads 32
 * consecutive floats of a row); the last block to finish adds the chunks
 * up, in chunk order. */
__global__ static void colsum_kernel(float *a, float *b, double *part, unsigned *ticket,
                                     const float *rows, int N, int n, int chunk_rows) {
  __shared__ double sh[8][33];
  __shared__ int last;
  int const j = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
  int const r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < N ? r0 + chunk_rows : N;
  double acc = 0.0;
  if (j < n)
    for (int r = r0 + threadIdx.y; r < r1; r += 8)
      acc += (double)rows[(size_t)r * n + j];
  colsum_part(acc, sh, part, j, n);
  if (!last_block(ticket, &last)) return;
  for (int i = threadIdx.y * 32 + threadIdx.x; i < n; i += 32 * 8) {
    double const s = colsum_total(part, i, n);
    a[i] = (float)((double)a[i] + s);
    if (b != NULL) b[i] = (float)((double)b[i] + s);
  }
}

/* a [n] += column sums of rows [N, n]; b (may be NULL) gets the same sums.
 * The sums run in double: bias gradients add T*B terms that may cancel. */
ls_err_t colsum_add(cuda_ctx_t *c, float *a, float *b, const float *rows, int N, int n) {
  int chunks = (N + COLSUM_MIN_ROWS - 1) / COLSUM_MIN_ROWS;
  chunks = chunks > COLSUM_CHUNKS ? COLSUM_CHUNKS : chunks;
  int const chunk_rows = (N + chunks - 1) / chunks;
  dim3 const grid((unsigned)((n + 31) / 32), (unsigned)chunks), block(32, 8);
  colsum_kernel<<<grid, block, 0, c->stream>>>(a, b, c->colsum, c->tickets + TICKET_COLSUM, rows, N,
                                               n, chunk_rows);
  LAUNCH_CHECK("colsum_kernel");
  return LS_OK;
}
