/*
 * lstream kernels: the math of one truncated-BPTT training step.
 *
 * An engine holds one model (a stack of L LSTM layers and a linear head),
 * its flat parameter, gradient and Adam buffers, and workspaces sized once
 * for the largest window (T) and batch (B) it will see, on one device. The
 * same calls run on the CPU backend (plain C + BLAS) and, where built and
 * present, the CUDA backend.
 *
 * Dimension letters, used in every shape comment:
 *   T  window length (time steps)        B  batch (series in the step)
 *   I  input features                    H  hidden size
 *   L  LSTM layers                       O  head outputs (default O = I)
 *   S  slots of a series-state table
 *
 * Parameters follow PyTorch's nn.LSTM layout and gate order (i, f, g, o),
 * all in one contiguous float buffer:
 *   for k in 0..L-1: weight_ih_l{k} [4H, I_k] (I_0 = I, I_k = H for k > 0),
 *                    weight_hh_l{k} [4H, H], bias_ih_l{k} [4H], bias_hh_l{k} [4H]
 *   then head.weight [O, H], head.bias [O].
 *
 * Loss. Each head output (column o of O) has its loss, set once for the
 * engine (ls_engine_set_loss): the squared error (every column's by
 * default) or the pinball (quantile) loss of a level tau in (0, 1). With
 * d = pred - target (e = -d, the error target - pred):
 *   squared error  l = d^2                      dl/dpred = 2 d
 *   pinball(tau)   l = max(tau e, (tau - 1) e)  dl/dpred = -tau where e > 0,
 *                                                          1 - tau where e < 0,
 *                                                          0 at e = 0
 * (at e = 0 the subgradient 0: PyTorch's of tau relu(e) + (1 - tau) relu(-e);
 * torch.maximum's would be tau - 1/2). A mask m weighs each target: per row,
 * m [T, B] (ls_engine_forward, ls_engine_forward_seq: the row's O targets),
 * or per element, m [T, B, O] (ls_engine_forward_elem: 1 = a known target,
 * 0 = not known yet or padding, another weight >= 0 a known target whose
 * loss weighs that much). The loss sum is sum m * l over every
 * target and the count sum m over every target: O * sum_{t,b} m[t,b] with a
 * row mask. With a row mask and every column squared error this is the
 * masked MSE, sum_{t,b} m[t,b] * sum_o (pred - target)^2, whose
 * loss_sum / count is PyTorch's mean-reduced MSE over the valid targets.
 * Targets with mask 0 contribute exactly nothing to the loss or to any
 * gradient (their values may be anything, NaN included).
 * ls_engine_read_loss_cols gives the sums and counts column by column.
 *
 * Host pointers go in and out of every call; device memory stays inside the
 * engine, except for series-state tables (see the state section below).
 * Every function checks its arguments and returns an ls_err_t, with a
 * message in ls_last_error(). Calls on one engine must not overlap.
 */
#ifndef LSTREAM_KERNELS_H
#define LSTREAM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Parameter layout                                                          */

typedef struct ls_shape_s {
  int input_size;  /* I */
  int hidden_size; /* H */
  int num_layers;  /* L */
  int output_size; /* O */
} ls_shape_t;

typedef enum ls_param_kind_e {
  LS_PARAM_WEIGHT_IH = 0, /* weight_ih_l{k} [4H, I_k] */
  LS_PARAM_WEIGHT_HH,     /* weight_hh_l{k} [4H, H]   */
  LS_PARAM_BIAS_IH,       /* bias_ih_l{k}   [4H]      */
  LS_PARAM_BIAS_HH,       /* bias_hh_l{k}   [4H]      */
  LS_PARAM_HEAD_WEIGHT,   /* head.weight    [O, H]    (layer ignored) */
  LS_PARAM_HEAD_BIAS      /* head.bias      [O]       (layer ignored) */
} ls_param_kind_t;

/* Checks a shape: every size >= 1, and small enough that buffers fit. */
LS_API ls_err_t ls_shape_check(const ls_shape_t *shape);

/* Number of floats in the flat parameter buffer of a shape. */
LS_API ls_err_t ls_param_count(const ls_shape_t *shape, size_t *count);

/* Where one parameter tensor lives in the flat buffer: its first float and
 * its number of floats. `layer` is 0..L-1 for the LSTM tensors. */
LS_API ls_err_t ls_param_locate(const ls_shape_t *shape, int layer, ls_param_kind_t kind,
                                size_t *offset, size_t *count);

/* The gradient buffer in the order backward finishes it: segment 0 is the
 * head (head.weight, head.bias), segment k = 1..L is layer L-k's four
 * tensors. Each segment is one contiguous range [offset, offset + count) of
 * the flat buffer, and the L+1 segments tile it, back to front. */
LS_API ls_err_t ls_grad_segment(const ls_shape_t *shape, int k, size_t *offset, size_t *count);

/* PyTorch's name of a tensor ("weight_ih_l0", "head.weight"), written into
 * buf (NUL-terminated). */
LS_API ls_err_t ls_param_name(int layer, ls_param_kind_t kind, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */

typedef enum ls_device_e { LS_DEVICE_CPU = 0, LS_DEVICE_CUDA = 1 } ls_device_t;

/* The arithmetic of the GEMMs (every matrix product of forward and
 * backward: input and recurrent projections, head, weight and input
 * gradients).
 *   LS_PRECISION_FP32  plain float32 throughout (the default; the only one
 *                      on the CPU). On CUDA the cuBLAS handle is in
 *                      CUBLAS_DEFAULT_MATH, which never lowers the precision
 *                      of float32 inputs (no TF32).
 *   LS_PRECISION_TF32  CUDA only: GEMM inputs rounded to TF32 (10 explicit
 *                      mantissa bits, float32's 8-bit exponent) on the
 *                      tensor cores (CUBLAS_TF32_TENSOR_OP_MATH), products
 *                      accumulated in float32. Parameters, gradients, Adam's
 *                      moments, the (h, c) state and all pointwise math (gates,
 *                      loss, reductions, optimizer) stay float32 (sums in
 *                      double, as with fp32). Expect results to differ
 *                      from fp32 by about 1e-4 to 1e-3 (relative) where
 *                      two fp32 engines agree to about 1e-6. cuBLAS turns
 *                      TF32 off process-wide when the environment holds
 *                      NVIDIA_TF32_OVERRIDE=0: tf32 then computes as fp32. */
typedef enum ls_precision_e { LS_PRECISION_FP32 = 0, LS_PRECISION_TF32 = 1 } ls_precision_t;

typedef struct ls_engine_conf_s {
  ls_shape_t shape;
  int max_batch;  /* largest B of any call; workspaces are sized for it */
  int max_window; /* largest T of any call */
  ls_device_t device;
  int device_index;         /* CUDA device ordinal (ignored on the CPU) */
  int threads;              /* CPU threads for BLAS and pointwise math; 0 = OMP_NUM_THREADS where
                               set, else every core the process may run on */
  ls_precision_t precision; /* GEMM arithmetic, see above; tf32 is refused on the CPU */
} ls_engine_conf_t;

/* How many devices of a kind this process can use: 1 for the CPU; the
 * visible GPUs for CUDA (0 where there is none or no driver).
 * LS_ERR_UNSUPPORTED for a device this build lacks. */
LS_API ls_err_t ls_device_count(ls_device_t device, int *count);

/* Fills conf with defaults: I = O = 1, H = 64, L = 1, B = 64, T = 32, CPU,
 * all cores, fp32. */
LS_API void ls_engine_conf_init(ls_engine_conf_t *conf);

typedef struct ls_engine_s ls_engine_t;

/* Creates an engine and allocates every buffer it will use (no allocation
 * happens in later calls). Parameters start at zero: call
 * ls_engine_init_params or ls_engine_write_params. conf is copied. */
LS_API ls_err_t ls_engine_new(const ls_engine_conf_t *conf, ls_engine_t **out);

/* Frees an engine; accepts NULL. */
LS_API void ls_engine_destroy(ls_engine_t *eng);

/* The engine's configuration (threads resolved to the number in use). */
LS_API const ls_engine_conf_t *ls_engine_get_conf(const ls_engine_t *eng);

/* Number of floats in the parameter (and gradient, and each Adam moment)
 * buffer. */
LS_API size_t ls_engine_param_count(const ls_engine_t *eng);

/* PyTorch's initialisation, reproducibly from seed: every LSTM tensor and
 * the head uniform in [-1/sqrt(H), 1/sqrt(H)]. Resets the optimizer. */
LS_API ls_err_t ls_engine_init_params(ls_engine_t *eng, uint64_t seed);

/* Copies the flat parameter buffer out of / into the engine (n floats,
 * n == ls_engine_param_count). Writing resets nothing else. */
LS_API ls_err_t ls_engine_read_params(ls_engine_t *eng, float *dst, size_t n);
LS_API ls_err_t ls_engine_write_params(ls_engine_t *eng, const float *src, size_t n);

/* The accumulated gradient (same layout as the parameters). */
LS_API ls_err_t ls_engine_read_grads(ls_engine_t *eng, float *dst, size_t n);
LS_API ls_err_t ls_engine_write_grads(ls_engine_t *eng, const float *src, size_t n);
LS_API ls_err_t ls_engine_zero_grads(ls_engine_t *eng);

/* The gradient buffer itself, in the engine's device memory (host memory on
 * the CPU): ls_engine_param_count floats, for an in-place all-reduce between
 * ls_engine_backward and ls_engine_optimizer_step. NULL for a NULL engine. */
LS_API float *ls_engine_grad_buffer(ls_engine_t *eng);

/* The engine's device: LS_DEVICE_CPU or LS_DEVICE_CUDA. */
LS_API ls_device_t ls_engine_device(const ls_engine_t *eng);

/* The stream the engine queues its work on: a cudaStream_t on CUDA, NULL on
 * the CPU (where every call has finished its work when it returns). Work
 * another library queues on it (an all-reduce) runs in the engine's order. */
LS_API void *ls_engine_stream(const ls_engine_t *eng);

/* Called by ls_engine_backward each time a gradient segment (see
 * ls_grad_segment) holds its final value for this backward: segment 0 after
 * the head, segment k after layer L-k, in that order. `stream` is the
 * engine's stream with the segment's work queued on it (NULL on the CPU:
 * the values are in memory). An error it returns stops the backward and is
 * returned by it. For overlapping a gradient all-reduce with the rest of
 * backward. */
typedef ls_err_t (*ls_grad_ready_fn)(void *opaque, int segment, size_t offset, size_t count,
                                     void *stream);

/* Sets (fn != NULL) or clears (fn == NULL) the engine's gradient hook. */
LS_API ls_err_t ls_engine_set_grad_hook(ls_engine_t *eng, ls_grad_ready_fn fn, void *opaque);

/* ------------------------------------------------------------------------ */
/* Loss                                                                      */

typedef enum ls_loss_kind_e {
  LS_LOSS_MSE = 0,    /* squared error (pred - target)^2 */
  LS_LOSS_PINBALL = 1 /* pinball (quantile) loss of level tau */
} ls_loss_kind_t;

/* The loss of one head output (see the top of this file). */
typedef struct ls_loss_col_s {
  ls_loss_kind_t kind;
  float tau; /* LS_LOSS_PINBALL: the quantile level, 0 < tau < 1; LS_LOSS_MSE: 0 */
} ls_loss_col_t;

/* Sets the loss of each head output: cols [n], n == O, copied (to the
 * device too). cols NULL (with n 0) makes every column squared error again,
 * a new engine's losses. For the forwards that follow (ls_engine_forward,
 * _seq and _elem alike); the last forward can no longer be back-propagated
 * or read (LS_ERR_STATE): run it again. A column of each kind may sit
 * anywhere; with every column squared error and a row mask, forwards
 * compute exactly what they did before losses could be set. */
LS_API ls_err_t ls_engine_set_loss(ls_engine_t *eng, const ls_loss_col_t *cols, int n);

/* The losses in use: cols [n], n == O. */
LS_API ls_err_t ls_engine_get_loss(const ls_engine_t *eng, ls_loss_col_t *cols, int n);

/* ------------------------------------------------------------------------ */
/* One window                                                                */

/* Sets the initial state of the next forward: h0, c0 [L, B, H] from host
 * memory; NULL for either means zeros. */
LS_API ls_err_t ls_engine_set_state(ls_engine_t *eng, int B, const float *h0, const float *c0);

/* Runs the LSTM stack, the head and (when target is not NULL) the masked
 * loss (the MSE unless ls_engine_set_loss said otherwise) over one window,
 * keeping what backward needs.
 *   x      [T, B, I]  inputs
 *   target [T, B, O]  next-step targets, or NULL for predictions only
 *   mask   [T, B]     1 = valid target, 0 = padding; NULL = all valid
 * The initial state is the one set for this B by ls_engine_set_state or
 * ls_engine_gather_state. loss_sum and count (may be NULL) receive the loss
 * sum and the number of valid target values (see the top of this file).
 * The count comes from the mask on the host; the loss sum is read back from
 * the device, which waits for it: pass NULL and read it with the step's
 * figures (ls_engine_fetch_figures) to keep the device busy. */
LS_API ls_err_t ls_engine_forward(ls_engine_t *eng, int T, int B, const float *x,
                                  const float *target, const float *mask, double *loss_sum,
                                  double *count);

/* ls_engine_forward for a window given as one sequence, the layout a
 * series' records arrive in: inputs are rows 0..T-1 of seq and targets
 * rows 1..T, the next step of every feature (so the model must have O == I).
 *   seq  [T+1, B, I]  records
 *   mask [T, B]       1 = valid target, 0 = padding; NULL = all valid
 * The T+1 rows are copied to the engine's memory once; the targets are read
 * from that copy (half the copies of x and a target shifted by one row). */
LS_API ls_err_t ls_engine_forward_seq(ls_engine_t *eng, int T, int B, const float *seq,
                                      const float *mask, double *loss_sum, double *count);

/* ls_engine_forward with a target and a mask for every element: targets of
 * the caller's, one per head output (several horizons, quantiles beside the
 * mean), each known or not on its own.
 *   x       [T, B, I]  inputs
 *   target  [T, B, O]  targets, or NULL for predictions only
 *   mask    [T, B, O]  per target: 1 = known, 0 = not known yet or padding
 *                      (nothing to the loss or any gradient, whatever the
 *                      target holds); any finite weight >= 0 (checked).
 *                      NULL = all known. Only with a target.
 *   lengths [B]        each row's real steps, 0..T: the row carries on its
 *                      state after step lengths[b] - 1 (h0, c0 for 0; see
 *                      ls_engine_read_outputs), and no target past them may
 *                      be known (mask 0 there, checked). NULL = up to the
 *                      row's last step with a known target (T without a
 *                      mask), as ls_engine_forward takes it from its mask.
 *                      Give it where a real step's targets may all be
 *                      unknown (horizons past the records read so far).
 * loss_sum and count as for ls_engine_forward: the count is the sum of the
 * mask (T * B * O without one). */
LS_API ls_err_t ls_engine_forward_elem(ls_engine_t *eng, int T, int B, const float *x,
                                       const float *target, const float *mask, const int *lengths,
                                       double *loss_sum, double *count);

/* Back-propagates the last forward (which must have had a target):
 * ACCUMULATES d(loss_scale * loss_sum)/d(parameters) into the gradient
 * buffer, and keeps d/d(x), d/d(h0), d/d(c0) for ls_engine_read_input_grads.
 * Pass loss_scale = 1/count for PyTorch's mean loss of this window alone, or
 * 1 when counts are summed across windows or ranks (then give the optimizer
 * grad_scale = 1/total count). */
LS_API ls_err_t ls_engine_backward(ls_engine_t *eng, float loss_scale);

/* Results of the last forward, any may be NULL:
 *   y [T, B, H] top-layer outputs, pred [T, B, O] head outputs,
 *   hT, cT [L, B, H] final states: each row's state after its last valid
 *   step (the last t with mask[t, b] != 0; step T without a mask; h0, c0
 *   for a row with no valid step; ls_engine_forward_elem: step
 *   lengths[b] - 1, or the last with a known target), so that a padded
 *   window carries on the state after its last real record, never after
 *   padding.
 *   ls_engine_scatter_state stores the same states. */
LS_API ls_err_t ls_engine_read_outputs(ls_engine_t *eng, float *y, float *pred, float *hT,
                                       float *cT);

/* Each head output's share of the last forward's loss (a forward with
 * targets): loss_sums [n] the sum of m * l over its targets, counts [n] the
 * sum of its mask (either may be NULL), n == O. The loss sums are computed
 * when asked, from the forward's outputs, targets and mask (on the device,
 * which the call waits for): they add up to the forward's loss sum up to
 * rounding (another order of the same terms); the counts add up to its
 * count. For the loss per horizon or per quantile. */
LS_API ls_err_t ls_engine_read_loss_cols(ls_engine_t *eng, double *loss_sums, double *counts,
                                         int n);

/* The initial state of the next (or last) forward, h0, c0 [L, B, H], as
 * set by ls_engine_set_state or ls_engine_gather_state (either may be NULL). */
LS_API ls_err_t ls_engine_read_initial_state(ls_engine_t *eng, float *h0, float *c0);

/* Input gradients of the last backward, any may be NULL:
 *   dx [T, B, I], dh0 [L, B, H], dc0 [L, B, H]. */
LS_API ls_err_t ls_engine_read_input_grads(ls_engine_t *eng, float *dx, float *dh0, float *dc0);

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */

typedef struct ls_optim_s {
  float lr;           /* learning rate */
  float beta1, beta2; /* Adam moment decays */
  float eps;          /* added to sqrt(v_hat), as in PyTorch */
  float weight_decay; /* 0 = none */
  int decoupled;      /* 1 = AdamW (decay the weights), 0 = Adam (add wd * p to the gradient) */
  float clip_norm;    /* global 2-norm bound on the gradient; <= 0 = no clipping */
  int skip_nonfinite; /* 1 = a gradient holding NaN or Inf changes nothing (see
                         ls_engine_optimizer_step); 0 = PyTorch's behaviour */
} ls_optim_t;

/* lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay, Adam, clip 1.0,
 * no skipping. */
LS_API void ls_optim_init(ls_optim_t *opt);

/* One optimizer step on the flat buffers, with PyTorch's semantics:
 *   g = grad_scale * grad
 *   g *= min(1, clip_norm / (||g|| + 1e-6))        (clip_grad_norm_)
 *   Adam/AdamW with bias correction (torch.optim.Adam / AdamW, foreach=False)
 * then zeroes the gradient buffer. grad_norm (may be NULL) receives ||g||
 * before clipping; it is read back from the device, which waits for it
 * (pass NULL and read it with the step's figures instead). With
 * opt->skip_nonfinite, a gradient holding NaN or Inf (its squared norm,
 * summed in double, is not finite) is only zeroed: the parameters, Adam's
 * moments and its step count stay as they were. The device decides it
 * (CUDA: inside the update's kernel), the host never waits for it: a
 * non-finite norm, read now or with the step's figures, says the step was
 * skipped. */
LS_API ls_err_t ls_engine_optimizer_step(ls_engine_t *eng, const ls_optim_t *opt, float grad_scale,
                                         float *grad_norm);

/* A step's figures without a blocking read in the middle of the step: give
 * NULL for loss_sum to ls_engine_forward and for grad_norm to
 * ls_engine_optimizer_step, then at the end of the step
 * ls_engine_fetch_figures queues one copy of the last forward's loss sum
 * (of a forward with targets) and the last optimizer step's gradient norm
 * (as ls_engine_optimizer_step gives it) into host memory (CUDA: pinned
 * memory, after the work queued so far); ls_engine_read_figures waits for
 * that copy and returns them (either pointer may be NULL; 0 before any
 * forward or update). Read them once the next step is queued and the
 * device never idles for the host. On the CPU the copy is immediate. */
LS_API ls_err_t ls_engine_fetch_figures(ls_engine_t *eng);
LS_API ls_err_t ls_engine_read_figures(ls_engine_t *eng, double *loss_sum, float *grad_norm);

/* The optimizer's step count (updates taken so far; skipped ones are not
 * counted). It lives on the device: this reads it back, waiting for the
 * work queued. -1 for a NULL engine or a failed read. */
LS_API int64_t ls_engine_optimizer_steps(ls_engine_t *eng);

/* The optimizer's state, for snapshots: Adam's moments m, v (n floats each,
 * n == ls_engine_param_count, the parameters' layout) and its step count. */
LS_API ls_err_t ls_engine_read_optimizer(ls_engine_t *eng, float *m, float *v, size_t n,
                                         int64_t *steps);
LS_API ls_err_t ls_engine_write_optimizer(ls_engine_t *eng, const float *m, const float *v,
                                          size_t n, int64_t steps);

/* ------------------------------------------------------------------------ */
/* Series-state tables in device memory                                      */

/* A table holds (h, c) for S series slots, laid out [S, L, H] each, in the
 * engine's device memory (host memory on the CPU). New tables are zero. */
typedef struct ls_state_table_s ls_state_table_t;

LS_API ls_err_t ls_state_table_new(ls_engine_t *eng, size_t slots, ls_state_table_t **out);
LS_API void ls_state_table_destroy(ls_state_table_t *tab); /* accepts NULL */
LS_API size_t ls_state_table_slots(const ls_state_table_t *tab);

/* Grows to at least `slots` slots keeping every existing row; new rows zero. */
LS_API ls_err_t ls_state_table_grow(ls_state_table_t *tab, size_t slots);

/* Host copies of rows [first, first + n): h, c [n, L, H]. */
LS_API ls_err_t ls_state_table_read(ls_state_table_t *tab, size_t first, size_t n, float *h,
                                    float *c);
LS_API ls_err_t ls_state_table_write(ls_state_table_t *tab, size_t first, size_t n, const float *h,
                                     const float *c);

/* h0[l, b] = tab.h[slots[b], l] (and c), for b < B; a negative slot gives a
 * zero state. Sets the initial state of the next forward of batch B. */
LS_API ls_err_t ls_engine_gather_state(ls_engine_t *eng, ls_state_table_t *tab, int B,
                                       const int64_t *slots);

/* tab.h[slots[b], l] = hT[l, b] (and c) from the last forward, for b < B:
 * each row's state after its last valid step (see ls_engine_read_outputs);
 * negative slots are skipped. Slots must be distinct (LS_ERR_INVALID_ARG
 * otherwise). */
LS_API ls_err_t ls_engine_scatter_state(ls_engine_t *eng, ls_state_table_t *tab, int B,
                                        const int64_t *slots);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_KERNELS_H */
