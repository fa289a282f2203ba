/*
 * One target's loss and its gradient (kernels.h, "Loss"): the arithmetic of
 * the backends' elem_loss and loss_cols (backend.h), written once for the
 * CPU backend (lstm_cpu.c, C) and the CUDA backend's kernels
 * (lstm_cuda_head.cu, device code), so that both round alike.
 */
#ifndef LSTREAM_KERNELS_LOSS_ELEM_H
#define LSTREAM_KERNELS_LOSS_ELEM_H

/* Host and device code under nvcc (and the CUDA emulator, whose headers
 * define __device__); plain C otherwise. */
#if defined(__CUDACC__) || defined(__device__)
#define LOSS_ELEM_FN __host__ __device__ static inline
#else
#define LOSS_ELEM_FN static inline
#endif

/* The loss of one target for d = pred - target, and *g = d loss / d pred:
 * the squared error where tau == 0 (d^2, 2d); else the pinball loss of level
 * tau: tau * (target - pred) where the target lies above the prediction
 * (d < 0, *g = -tau), (1 - tau) * (pred - target) below it (*g = 1 - tau),
 * 0 with *g = 0 at d == 0. A NaN d (a prediction gone NaN) carries into both,
 * as the squared error's does, so that the step is seen to be non-finite. */
LOSS_ELEM_FN float loss_elem(float d, float tau, float *g) {
  if (tau == 0.0f) {
    *g = 2.0f * d;
    return d * d;
  }
  if (d < 0.0f) {
    *g = -tau;
    return -tau * d;
  }
  if (d > 0.0f) {
    *g = 1.0f - tau;
    return (1.0f - tau) * d;
  }
  *g = d - d; /* 0 at d == 0, NaN for NaN */
  return *g;
}

#endif /* LSTREAM_KERNELS_LOSS_ELEM_H */
