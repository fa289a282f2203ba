/*
 * The CUDA backend's device memory (kernels/lstm_cuda.h): stream-ordered
 * allocation, copies through pinned staging buffers, and the step's
 * figures fetched without a wait.
 */
#include <string.h>

#include "lstm_cuda.h"

/* ------------------------------------------------------------------------ */
/* Device memory and copies                                                  */

/* Stream-ordered (cudaMallocAsync, cudaFreeAsync on the context's
 * stream): neither synchronises the device, so a state table can grow in
 * the middle of training while the NCCL stream runs. */
ls_err_t mem_alloc(void *ctx, size_t bytes, void **ptr) {
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

void mem_free(void *ctx, void *ptr) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  (void)cudaSetDevice(c->device);
  (void)cudaFreeAsync(ptr, c->stream); /* after the work queued on the stream */
}

/* Host -> device through the pinned staging buffers, chunk by chunk; the
 * host buffer may be reused as soon as this returns, the copies complete in
 * stream order. */
ls_err_t mem_upload(void *ctx, void *dst, const void *host_src, size_t bytes) {
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
ls_err_t mem_download(void *ctx, void *host_dst, const void *src, size_t bytes) {
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

ls_err_t mem_copy(void *ctx, void *dst, const void *src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
  return LS_OK;
}

ls_err_t mem_zero(void *ctx, void *dst, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, c->stream));
  return LS_OK;
}

/* The step's figures: one copy into pinned memory queued after the step,
 * waited for only when they are read. */
ls_err_t fetch_start(void *ctx, const void *src, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  CUDA_CHECK(cudaMemcpyAsync(c->fetch, src, bytes, cudaMemcpyDeviceToHost, c->stream));
  CUDA_CHECK(cudaEventRecord(c->fetch_ev, c->stream));
  return LS_OK;
}

ls_err_t fetch_wait(void *ctx, void *host_dst, size_t bytes) {
  cuda_ctx_t *const c = (cuda_ctx_t *)ctx;
  LS_FORWARD_IF_ERROR(enter(c));
  CUDA_CHECK(cudaEventSynchronize(c->fetch_ev));
  memcpy(host_dst, c->fetch, bytes);
  return LS_OK;
}
