/*
 * libcublas.so.13 for the CUDA emulator: cublasSgemm_v2 (column-major, as
 * cuBLAS) through OpenBLAS' cblas_sgemm, queued on the handle's stream.
 * cuBLAS' argument rules are enforced (an invalid call returns
 * CUBLAS_STATUS_INVALID_VALUE, and is an emulator problem), every operand
 * must lie inside one device allocation, alpha and beta are read from host
 * memory (CUBLAS_POINTER_MODE_HOST), C is not read when beta is 0, and in
 * CUBLAS_TF32_TENSOR_OP_MATH both inputs are rounded to TF32 (10 explicit
 * mantissa bits, to nearest even) first, unless NVIDIA_TF32_OVERRIDE=0.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <vector>

#include "cublas_v2.h"
#include "emu.h"

struct cublasContext {
  cudaStream_t stream;
  cublasMath_t math;
};

namespace {

float tf32(float x) {
  unsigned u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) { /* finite: round off 13 bits, to nearest even */
    u += 0x0fffu + ((u >> 13) & 1u);
    u &= ~0x1fffu;
  }
  memcpy(&x, &u, sizeof x);
  return x;
}

/* A column-major rows x cols operand with leading dimension ld: inside one
 * device allocation? */
bool in_device(const float *p, int rows, int cols, int ld) {
  if (rows == 0 || cols == 0) return true;
  size_t const bytes = ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * sizeof(float);
  return emu_device_range(p, bytes) != 0;
}

cublasStatus_t invalid(const char *why, long a, long b) {
  emu::problem("cublasSgemm: %s (%ld, %ld)", why, a, b);
  return CUBLAS_STATUS_INVALID_VALUE;
}

/* A copy of a rows x cols operand, packed (ld = rows) and rounded to TF32. */
std::vector<float> rounded(const float *p, int rows, int cols, int ld) {
  std::vector<float> v((size_t)rows * cols);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++)
      v[(size_t)j * rows + i] = tf32(p[(size_t)j * ld + i]);
  return v;
}

bool tf32_on(const cublasContext *h) {
  const char *const o = getenv("NVIDIA_TF32_OVERRIDE");
  return h->math == CUBLAS_TF32_TENSOR_OP_MATH && !(o != nullptr && !strcmp(o, "0"));
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
  int n = 0;
  if (h == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return CUBLAS_STATUS_NOT_INITIALIZED;
  *h = new cublasContext{nullptr, CUBLAS_DEFAULT_MATH};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}

/* The workspace must be device memory of its size; cuBLAS uses it instead
 * of allocating (which a graph capture forbids). */
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *workspace, size_t bytes) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && !emu_device_range(workspace, bytes)) {
    emu::problem("cublasSetWorkspace: %zu bytes at %p are not one device allocation", bytes,
                 workspace);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m != CUBLAS_DEFAULT_MATH && m != CUBLAS_TENSOR_OP_MATH && m != CUBLAS_PEDANTIC_MATH &&
      m != CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  h->math = m;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                              int n, int k, const float *alpha, const float *A, int lda,
                              const float *B, int ldb, const float *beta, float *C, int ldc) {
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (emu::sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
    return invalid("transpose flag is neither N nor T", ta, tb);
  if (m < 0 || n < 0 || k < 0) return invalid("negative size m or n or k", m, n);
  int const ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
  int const br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
  if (lda < (ar > 1 ? ar : 1)) return invalid("lda < max(1, rows of op(A)'s storage)", lda, ar);
  if (ldb < (br > 1 ? br : 1)) return invalid("ldb < max(1, rows of op(B)'s storage)", ldb, br);
  if (ldc < (m > 1 ? m : 1)) return invalid("ldc < max(1, m)", ldc, m);
  if (alpha == nullptr || beta == nullptr || emu_device_range(alpha, 4) ||
      emu_device_range(beta, 4))
    return invalid("alpha and beta must be host pointers (pointer mode host)", 0, 0);
  emu::count("cublasSgemm");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if (k > 0 && !in_device(A, ar, ac, lda))
    return invalid("A runs outside its device allocation", ar, ac);
  if (k > 0 && !in_device(B, br, bc, ldb))
    return invalid("B runs outside its device allocation", br, bc);
  if (!in_device(C, m, n, ldc)) return invalid("C runs outside its device allocation", m, n);
  float const a = *alpha, b = *beta;
  bool const round = tf32_on(h);
  emu::enqueue(h->stream, "cublasSgemm", [=] {
    emu::count("gemms run");
    if (b == 0.0f) /* C is not read */
      for (int j = 0; j < n; j++)
        memset(C + (size_t)j * ldc, 0, (size_t)m * sizeof(float));
    if (k == 0 || a == 0.0f) {
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++)
          C[(size_t)j * ldc + i] *= b;
      return;
    }
    const float *pa = A, *pb = B;
    int la = lda, lb = ldb;
    std::vector<float> ra, rb;
    if (round) {
      ra = rounded(A, ar, ac, lda), rb = rounded(B, br, bc, ldb);
      pa = ra.data(), pb = rb.data(), la = ar, lb = br;
    }
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, a, pa, la, pb, lb, b, C,
                ldc);
  });
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
