/*
 * The CPU backend's recurrent kernels (internal to kernels/).
 *
 * One time step of the recurrence is a small GEMM whose rows are the
 * batch: gates_t [B, 4H] += h_{t-1} [B, H] @ w_hh^T forward, and
 * dh_{t-1} [B, H] += dgates_t [B, 4H] @ w_hh backward. A BLAS packs w_hh on
 * every such call; here it is packed once per forward or backward
 * (recur_pack_forward, recur_pack_cols) into panels of U hidden units, and a
 * register-blocked micro-kernel computes a tile of rows x panel and runs
 * the cell math on it while it is still in cache: one pass per step instead
 * of a GEMM and a pointwise pass. The input projection joins the same
 * product ([x_t, h_{t-1}] @ [w_ih, w_hh]^T), so gates are written once,
 * never read.
 *
 * The weight and input gradients, GEMMs over all T*B rows, have kernels
 * of the same kind (gemm_cpu.c): the weight gradients read both operands
 * as they lie, with no transposed packing (what costs a BLAS most at these
 * skinny shapes).
 *
 * recur_cpu.c and gemm_cpu.c are compiled once per instruction set
 * (vec_cpu.h) into the tables below: AVX-512 and AVX2 on x86-64, and a
 * generic build of 4-float vectors for any CPU (SSE2 on x86-64);
 * recur_pick chooses the widest the CPU runs.
 */
#ifndef LSTREAM_KERNELS_RECUR_CPU_H
#define LSTREAM_KERNELS_RECUR_CPU_H

#include <stddef.h>

#include "lstream/kernels.h"

/* The forward of one layer over rows [b0, b1) of the batch (see backend.h
 * lstm_forward for the buffers). */
typedef struct recur_fwd_s {
  float *gates;      /* [T, B, 4H] out: activated gates */
  float *hs;         /* [T+1, B, H] in: hs[0]; out: hs[t+1] */
  float *cs;         /* [T+1, B, H] in: cs[0]; out: cs[t+1] */
  float *tcs;        /* [T, B, H] out: tanh(c_t) */
  const float *x;    /* [T, B, In] inputs */
  const float *wp;   /* recur_pack_forward: [P][In + H][4][U] */
  const float *bias; /* recur_pack_forward: [P][4][U] b_ih + b_hh */
  int T, B, In, H;
} recur_fwd_t;

/* The backward of one layer over rows [b0, b1) (see backend.h
 * lstm_backward). */
typedef struct recur_bwd_s {
  float *dh0;                    /* [B, H] out */
  float *dc;                     /* [B, H] in: zero; out: d/dc_0 */
  float *dgates;                 /* [T, B, 4H] out */
  float *dh;                     /* [T, B, H] in: d loss / d h_t from above; clobbered */
  const float *gates, *cs, *tcs; /* of the forward */
  const float *wp;               /* recur_pack_cols of w_hh [4H, H] */
  int T, B, H;
} recur_bwd_t;

/* Rows of the batch per partial sum of the bias gradients (a multiple of
 * every build's tile rows, MR = 2, 3 or 6): backward_rows keeps one sum
 * per 6 rows, so the sums and their order depend on B alone, never on how
 * the rows are split across threads. */
#define RECUR_DB_ROWS 6

typedef struct recur_kernels_s {
  const char *name; /* the instruction set, e.g. "avx512" */
  int width;        /* U: floats per vector, hidden units per panel */
  void (*forward_rows)(const recur_fwd_t *a, int b0, int b1);
  /* Also dh0 of the rows and, per RECUR_DB_ROWS rows from row 0, the
   * column sums of their dgates: db [ceil(B / RECUR_DB_ROWS), 4H] (doubles;
   * the rows' sums zeroed here, then added to in the order t = T-1 .. 0,
   * rows ascending). b0 is a multiple of RECUR_DB_ROWS. */
  void (*backward_rows)(const recur_bwd_t *a, int b0, int b1, double *db);
  /* C [M, N] += A^T B for rows [m0, m1) of C: A [K, M] (row stride lda),
   * B [K, N] (ldb), neither packed; buf: recur_tn_floats(M, N) floats,
   * 64-byte aligned, the caller's own. */
  void (*gemm_tn)(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m0,
                  int m1, int N, int K, float *buf);
  /* C [r, N] = A [r, K] (lda) @ W for rows [r0, r1), W packed by
   * recur_pack_cols. */
  void (*gemm_nn)(float *C, int ldc, const float *A, int lda, const float *wp, int r0, int r1,
                  int N, int K);
} recur_kernels_t;

#if defined(LSTREAM_RECUR_X86)
extern const recur_kernels_t recur_avx512;
extern const recur_kernels_t recur_avx2;
#endif
extern const recur_kernels_t recur_generic;

/* The kernels to use: `force` (LSTREAM_CPU_KERNELS: "avx512", "avx2" or
 * "generic"), else the widest the CPU runs. */
ls_err_t recur_pick(const char *force, const recur_kernels_t **out);

/* Floats the packed weights of a layer with inputs of up to In columns
 * take, forward or backward (recur_pack_forward, recur_pack_cols of w_hh
 * or of w_ih). */
size_t recur_pack_floats(const recur_kernels_t *k, int In, int H);

/* Rows of k per block of gemm_tn (its buffer holds them). */
#define RECUR_TN_ROWS 128

/* gemm_tn copies A's block at row strides (floats) from this on. */
#ifndef RECUR_TN_COPY
#define RECUR_TN_COPY 512
#endif

/* Floats of gemm_tn's buffer for N columns and rows [m0, m1) of C,
 * m1 - m0 <= M. */
size_t recur_tn_floats(const recur_kernels_t *k, int M, int N);

/* The row stride of gemm_tn's copy of A's block, m columns: an odd number
 * of cache lines, so that the rows of k a tile reads down fall in every L1
 * set (at A's own stride, 4H floats, a power of two, they fall in a few). */
static inline int recur_tn_stride(int m) {
  return ((m + 15) / 16 | 1) * 16;
}

/* wp [P][In + H][4][U]: panel p holds hidden units p*U .. p*U+U-1 of the
 * four gates, rows k < In from w_ih [4H, In], then w_hh [4H, H]; units past
 * H are zero. bias [P][4][U] = b_ih + b_hh. */
void recur_pack_forward(const recur_kernels_t *k, float *wp, float *bias, const float *w_ih,
                        const float *w_hh, const float *b_ih, const float *b_hh, int In, int H);

/* Vectors 0 .. n-1 (of U floats: hidden units, columns) go through the
 * micro-kernel in recur_groups(n) groups of at most 4, as even as possible:
 * 5 = 3 + 2, not 4 + 1, since a group of one vector leaves it waiting on
 * its broadcasts. Group q starts at vector *v0 and holds *nv. */
static inline int recur_groups(int n) {
  return (n + 3) / 4;
}
static inline void recur_group(int n, int q, int *v0, int *nv) {
  int const groups = recur_groups(n);
  *v0 = (int)((long)n * q / groups);
  *nv = (int)((long)n * (q + 1) / groups) - *v0;
}

/* wp of w [K, N] (row-major) by groups of column vectors (recur_group):
 * group q at wp + v0 * U * K holds columns v0*U .. (v0+nv)*U-1 as
 * [K][nv][U] (columns past N are zero). */
void recur_pack_cols(const recur_kernels_t *k, float *wp, const float *w, int K, int N);

#endif /* LSTREAM_KERNELS_RECUR_CPU_H */
