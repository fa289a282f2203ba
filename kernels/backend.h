/*
 * The backend interface of kernels/: one table of functions per device.
 *
 * engine.c orchestrates a training step from these primitives and checks
 * every public argument; a backend only does the math. The CPU table lives
 * in lstm_cpu.c; a CUDA table fills the same slots with the same contracts
 * (device pointers for every float*, work queued on the backend's stream).
 * Within each backend file the functions carry the same names and argument
 * order (lstm_forward, lstm_backward, ...), so the two read side by side.
 *
 * Letters: T window, B batch, In layer input size, H hidden, O outputs,
 * N = T*B rows, S table slots, L layers, n parameters.
 */
#ifndef LSTREAM_KERNELS_BACKEND_H
#define LSTREAM_KERNELS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/kernels.h"

#ifdef __cplusplus
extern "C" { /* lstm_cuda.cu is compiled as C++ */
#endif

/* An optimizer step's arguments, in device memory (optimizer_step). */
typedef struct ls_optim_args_s {
  ls_optim_t opt;
  float grad_scale; /* the gradient's scale before clipping */
} ls_optim_args_t;

typedef struct ls_backend_ops_s {
  const char *name;

  /* Context: BLAS handles, streams, thread pools. */
  /* ctx_new may resolve conf->threads to the number it uses. */
  ls_err_t (*ctx_new)(ls_engine_conf_t *conf, void **ctx);
  void (*ctx_free)(void *ctx);
  /* The stream work is queued on (cudaStream_t); NULL: synchronous. */
  void *(*stream)(void *ctx);
  /* Devices of this kind the process can use (0 where there are none). */
  int (*device_count)(void);

  /* Device memory. alloc returns zeroed memory. */
  ls_err_t (*alloc)(void *ctx, size_t bytes, void **ptr);
  void (*free)(void *ctx, void *ptr);
  ls_err_t (*upload)(void *ctx, void *dst, const void *host_src, size_t bytes);
  ls_err_t (*download)(void *ctx, void *host_dst, const void *src, size_t bytes);
  ls_err_t (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
  ls_err_t (*zero)(void *ctx, void *dst, size_t bytes);

  /* One LSTM layer over a window. On entry hs[0], cs[0] hold h0, c0.
   *   gates [T, B, 4H]  out: activated gates (i, f, g, o)
   *   hs    [T+1, B, H] out: hs[t+1] = h_t
   *   cs    [T+1, B, H] out: cs[t+1] = c_t
   *   tcs   [T, B, H]   out: tanh(c_t)
   *   x     [T, B, In], w_ih [4H, In], w_hh [4H, H], b_ih, b_hh [4H] */
  ls_err_t (*lstm_forward)(void *ctx, float *gates, float *hs, float *cs, float *tcs,
                           const float *x, const float *w_ih, const float *w_hh, const float *b_ih,
                           const float *b_hh, int T, int B, int In, int H);

  /* Back-propagates one layer, accumulating into dw_ih, dw_hh, db_ih, db_hh.
   *   dh     [T, B, H]  in: d loss / d h_t from above; clobbered (scratch)
   *   dx     [T, B, In] out: d loss / d x (may alias dh when In == H)
   *   dh0, dc0 [B, H]   out
   *   dgates [T, B, 4H] scratch (pre-activation gate gradients) */
  ls_err_t (*lstm_backward)(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih,
                            float *dw_hh, float *db_ih, float *db_hh, float *dgates, float *dh,
                            const float *gates, const float *hs, const float *cs, const float *tcs,
                            const float *x, const float *w_ih, const float *w_hh, int T, int B,
                            int In, int H);

  /* pred [N, O] = y [N, H] @ w^T [H, O] + b [O]. */
  ls_err_t (*head_forward)(void *ctx, float *pred, const float *y, const float *w, const float *b,
                           int N, int H, int O);

  /* The targets of a window given as one sequence seq [T+1, B, In]
   * (device memory, ls_engine_forward_seq): target [T, B, In] = rows 1..T
   * of seq, the next step of every feature. *target points at those rows
   * of seq itself: nothing is copied and, on a GPU, nothing is uploaded a
   * second time. (Targets that are not rows of seq as they are, a subset of
   * the features or the differences x[t+1] - x[t], are what a later version
   * computes here, into a workspace of the engine's.) */
  ls_err_t (*seq_targets)(void *ctx, const float **target, const float *seq, int B, int In);

  /* Masked MSE over N rows: loss[0] = sum_r mask[r] * sum_o (pred - target)^2,
   * loss[1] = O * sum_r mask[r], two doubles in device memory.
   * dpred [N, O] = scale * d loss[0] / d pred. mask NULL = all 1. */
  ls_err_t (*mse_loss)(void *ctx, double *loss, float *dpred, const float *pred,
                       const float *target, const float *mask, float scale, int N, int O);

  /* The loss of every kind of column (kernels.h, ls_engine_set_loss) over N
   * rows (loss_elem.h): column o is the squared error where tau[o] == 0 and
   * the pinball loss of level tau[o] otherwise (tau [O], device). The mask
   * is per row, mask [N] (mask_cols 1), or per element, mask [N, O]
   * (mask_cols O); NULL = all 1. loss[0] = sum m * l and loss[1] = sum m,
   * over every element (a row's mask counts O times), two doubles in device
   * memory. dpred [N, O] = scale * d loss[0] / d pred, 0 where m == 0.
   * mse_loss's results where every tau is 0 and the mask is per row, up to
   * rounding (its row sums are float, these double). */
  ls_err_t (*elem_loss)(void *ctx, double *loss, float *dpred, const float *pred,
                        const float *target, const float *mask, int mask_cols, const float *tau,
                        float scale, int N, int O);

  /* elem_loss's loss column by column: col [O] (doubles, device) = the sum
   * over rows of m * l of column o. */
  ls_err_t (*loss_cols)(void *ctx, double *col, const float *pred, const float *target,
                        const float *mask, int mask_cols, const float *tau, int N, int O);

  /* dy [N, H] = dpred [N, O] @ w [O, H]; dw [O, H] += dpred^T @ y;
   * db [O] += colsum(dpred). */
  ls_err_t (*head_backward)(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                            const float *y, const float *w, int N, int H, int O);

  /* One update of the flat buffers, with its arguments in device memory
   * (so that a recorded step replays with each step's own): norm_sq[0] =
   * sum g[i]^2 (one double, device), then clip + Adam/AdamW (see
   * ls_engine_optimizer_step): g scaled by args->grad_scale and by the clip
   * coefficient computed from norm_sq, then zeroed. steps[0] (one double,
   * device) holds the updates taken so far: the update counts itself there
   * and takes the bias corrections of the new count. With
   * args->opt.skip_nonfinite and a norm_sq that is not finite, g is only
   * zeroed and steps[0] stays: the decision is taken where the gradient
   * is, with no read-back. */
  ls_err_t (*optimizer_step)(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                             double *norm_sq, double *steps, const ls_optim_args_t *args);

  /* States <-> table [S, L, H]. The state of layer l, row b is at
   * h0[l * stride + b * H] (so the engine's per-layer blocks need no
   * repacking); slots [B] are host indices, < 0 = zero state (gather) /
   * skip (scatter). */
  ls_err_t (*state_gather)(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
                           const float *tab_c, const int64_t *slots, int B, int L, int H);
  ls_err_t (*state_scatter)(void *ctx, float *tab_h, float *tab_c, const float *hT, const float *cT,
                            size_t stride, const int64_t *slots, int B, int L, int H);

  /* A few bytes of device memory without a blocking read: fetch_start
   * queues a copy of bytes (<= 64) at src, after the work queued so far,
   * into memory the backend owns; fetch_wait waits for the latest one and
   * copies it to host_dst. For a step's figures (loss, gradient norm), read
   * once the next step is queued. */
  ls_err_t (*fetch_start)(void *ctx, const void *src, size_t bytes);
  ls_err_t (*fetch_wait)(void *ctx, void *host_dst, size_t bytes);

  /* Queues the work queue(opaque) queues. A backend that can record work
   * (CUDA graphs) may record it for this key (key_bytes bytes, compared
   * bytewise) and, for later calls with the same key, replay the record
   * instead of calling queue: queue must then queue the same work for the
   * same key (the same kernels, sizes and buffers; the values it reads from
   * device memory may differ) and nothing else (no host reads, no waits, no
   * uploads). The CPU backend calls queue. */
  ls_err_t (*graph_run)(void *ctx, const void *key, size_t key_bytes, ls_err_t (*queue)(void *),
                        void *opaque);
} ls_backend_ops_t;

extern const ls_backend_ops_t ls_backend_cpu;
#ifdef LSTREAM_HAVE_CUDA
extern const ls_backend_ops_t ls_backend_cuda;
#endif

#ifdef __cplusplus
}
#endif

#endif /* LSTREAM_KERNELS_BACKEND_H */
