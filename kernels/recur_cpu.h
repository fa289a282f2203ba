/*
 * The CPU backend's recurrent kernels (internal to kernels/).
 *
 * One time step of the recurrence is a small GEMM whose rows are the
 * batch: gates_t [B, 4H] += h_{t-1} [B, H] @ w_hh^T forward, and
 * dh_{t-1} [B, H] += dgates_t [B, 4H] @ w_hh backward. A BLAS packs w_hh on
 * every such call; here it is packed once per forward or backward
 * (recur_pack_forward/backward) into panels of U hidden units, and a
 * register-blocked micro-kernel computes a tile of rows x panel and runs
 * the cell math on it while it is still in cache: one pass per step instead
 * of a GEMM and a pointwise pass. With few input columns (layer 0 of a
 * time-series model) the input projection joins the same product
 * ([x_t, h_{t-1}] @ [w_ih, w_hh]^T), so gates are written once, never read.
 *
 * recur_cpu.c is compiled once per instruction set (RECUR_WIDTH floats per
 * vector = U, RECUR_ROWS rows per tile) into the tables below: AVX-512 and
 * AVX2 on x86-64, and a generic build of 4-float vectors for any CPU
 * (SSE2 on x86-64); recur_pick chooses the widest the CPU runs.
 */
#ifndef LSTREAM_KERNELS_RECUR_CPU_H
#define LSTREAM_KERNELS_RECUR_CPU_H

#include <stddef.h>

#include "lstream/kernels.h"

/* The forward of one layer over rows [b0, b1) of the batch (see backend.h
 * lstm_forward for the buffers). */
typedef struct recur_fwd_s {
  float *gates;      /* [T, B, 4H] out: activated gates; in: the pre-activations
                        (x @ w_ih^T + biases) unless kx > 0 */
  float *hs;         /* [T+1, B, H] in: hs[0]; out: hs[t+1] */
  float *cs;         /* [T+1, B, H] in: cs[0]; out: cs[t+1] */
  float *tcs;        /* [T, B, H] out: tanh(c_t) */
  const float *x;    /* [T, B, kx] inputs whose projection is fused; NULL when kx = 0 */
  const float *wp;   /* recur_pack_forward: [P][kx + H][4][U] */
  const float *bias; /* recur_pack_forward: [P][4][U] b_ih + b_hh, when kx > 0 */
  const struct recur_kernels_s *rk;
  int T, B, H, kx;
} recur_fwd_t;

/* The backward of one layer over rows [b0, b1) (see backend.h
 * lstm_backward). */
typedef struct recur_bwd_s {
  float *dh0;    /* [B, H] out */
  float *dc;     /* [B, H] in: zero; out: d/dc_0 */
  float *dgates; /* [T, B, 4H] out */
  float *dh;     /* [T, B, H] in: d loss / d h_t from above; clobbered */
  const float *gates, *cs, *tcs; /* of the forward */
  const float *wp;               /* recur_pack_backward: [Q][4H][4][U] */
  const struct recur_kernels_s *rk;
  int T, B, H;
} recur_bwd_t;

typedef struct recur_kernels_s {
  const char *name; /* the instruction set, e.g. "avx512" */
  int width;        /* U: hidden units per panel (floats per vector) */
  void (*forward_rows)(const recur_fwd_t *a, int b0, int b1);
  void (*backward_rows)(const recur_bwd_t *a, int b0, int b1);
} recur_kernels_t;

#if defined(LSTREAM_RECUR_X86)
extern const recur_kernels_t recur_avx512;
extern const recur_kernels_t recur_avx2;
#endif
extern const recur_kernels_t recur_generic;

/* The kernels to use: `force` (LSTREAM_CPU_KERNELS: "avx512", "avx2" or
 * "generic"), else the widest the CPU runs. */
ls_err_t recur_pick(const char *force, const recur_kernels_t **out);

/* Floats recur_pack_forward (for inputs of up to In columns) or
 * recur_pack_backward needs, whichever is more. */
size_t recur_pack_floats(const recur_kernels_t *k, int In, int H);

/* wp [P][kx + H][4][U]: panel p holds hidden units p*U .. p*U+U-1 of the
 * four gates, rows k < kx from w_ih [4H, kx], then w_hh [4H, H]; units past
 * H are zero. With kx > 0, bias [P][4][U] = b_ih + b_hh. */
void recur_pack_forward(const recur_kernels_t *k, float *wp, float *bias, const float *w_ih,
                        const float *w_hh, const float *b_ih, const float *b_hh, int kx, int H);

/* wp [Q][4H][nv][U], Q = ceil(P / 4): group q holds panels 4q .. 4q+nv-1
 * (nv = 4, fewer in the last group) of w_hh [4H, H] by columns. */
void recur_pack_backward(const recur_kernels_t *k, float *wp, const float *w_hh, int H);

#endif /* LSTREAM_KERNELS_RECUR_CPU_H */
