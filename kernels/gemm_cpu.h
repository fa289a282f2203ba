/*
 * The GEMMs of gemm_cpu.c for one instruction set (vec_cpu.h: ISA_NAME),
 * internal to kernels/: what recur_cpu.c puts in its table
 * (recur_kernels_t's gemm_tn, gemm_nn, documented there) and calls for
 * dh0. Included by the files compiled once per instruction set only.
 */
#ifndef LSTREAM_KERNELS_GEMM_CPU_H
#define LSTREAM_KERNELS_GEMM_CPU_H

#include "vec_cpu.h" /* ISA_NAME */

/* C [M, N] += A^T B for rows [m0, m1) of C (recur_kernels_t.gemm_tn). */
void ISA_NAME(gemm_tn)(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m0,
                       int m1, int N, int K, float *buf);

/* C [r, N] = A [r, K] @ W for rows [r0, r1), W packed by recur_pack_cols
 * (recur_kernels_t.gemm_nn). */
void ISA_NAME(gemm_nn)(float *C, int ldc, const float *A, int lda, const float *wp, int r0, int r1,
                       int N, int K);

#endif /* LSTREAM_KERNELS_GEMM_CPU_H */
