/*
 * The GEMMs over all T*B rows of recur_cpu.h (gemm_tn, gemm_nn) for one
 * instruction set (vec_cpu.h).
 *
 * gemm_tn (the weight gradients, dW [4H, In] += dgates^T x): per block of
 * RECUR_TN_ROWS rows of k, B's rows are copied into a buffer (its columns
 * padded to whole vectors) and A is read where it lies, MR consecutive
 * columns of each of its rows broadcast: no transposed copy. With fewer
 * columns than a vector, the other way round (tnt_tile).
 * gemm_nn (dx = dgates @ w_ih, dh0 = dgates_0 @ w_hh): A's rows broadcast
 * against W packed once per call (recur_pack_cols).
 */
#include "recur_cpu.h"
#include "vec_cpu.h"

/* The n <= nv*U valid columns of a tile's vectors. */
INLINE int cols_of(int n, int v) { return n - v * U < U ? (n - v * U > 0 ? n - v * U : 0) : U; }

/* C [mr, n] += A^T B over K rows; A's row k at A + k * lda, B packed
 * [K][bk]. */
INLINE void tn_tile(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                    int n, int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) acc[r][v] = load(C + (size_t)r * ldc + v * U, cols_of(n, v));
  core(acc, mr, nv, A, 1, (size_t)lda, bp, (size_t)bk, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) store(C + (size_t)r * ldc + v * U, acc[r][v], cols_of(n, v));
}

static void tn_block(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                     int n, int mr, int nv) {
  TILE_SWITCH(mr, nv, tn_tile, C, ldc, A, lda, bp, bk, K, n);
}

/* The transposed way for C with fewer than U columns (dW_ih of a few
 * inputs): C^T [n, 4U] += B^T A over all K, the tile's rows being B's
 * columns (broadcast) and its vectors four of A's, read where they lie;
 * then added to C by columns. */
INLINE void tnt_tile(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int K,
                     int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) acc[r][v] = (vf){0};
  core(acc, mr, nv, B, 1, (size_t)ldb, A, (size_t)lda, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      for (int u = 0; u < U; u++) C[(size_t)(v * U + u) * ldc + r] += acc[r][v][u];
}

static void tnt_block(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int K,
                      int mr, int nv) {
  TILE_SWITCH(mr, nv, tnt_tile, C, ldc, A, lda, B, ldb, K);
}

void ISA_NAME(gemm_tn)(float *C, int ldc, const float *A, int lda, const float *B, int ldb,
                       int m0, int m1, int N, int K, float *buf) {
  int const Np = (N + U - 1) / U * U, NV = Np / U;
  if (N < U && (m1 - m0) % U == 0) { /* every vector of A's rows whole */
    int const MV = (m1 - m0) / U;
    for (int q = 0; q < recur_groups(MV); q++) {
      int v0, nv;
      recur_group(MV, q, &v0, &nv);
      for (int i = 0; i < N; i += MR)
        tnt_block(C + (size_t)(m0 + v0 * U) * ldc + i, ldc, A + m0 + v0 * U, lda, B + i, ldb, K,
                  N - i < MR ? N - i : MR, nv);
    }
    return;
  }
  for (int k0 = 0; k0 < K; k0 += RECUR_TN_ROWS) {
    int const kb = K - k0 < RECUR_TN_ROWS ? K - k0 : RECUR_TN_ROWS;
    for (int k = 0; k < kb; k++) {
      const float *const src = B + (size_t)(k0 + k) * ldb;
      float *const dst = buf + (size_t)k * Np;
      for (int j = 0; j < N; j++) dst[j] = src[j];
      for (int j = N; j < Np; j++) dst[j] = 0.0f;
    }
    for (int q = 0; q < recur_groups(NV); q++) {
      int v0, nv;
      recur_group(NV, q, &v0, &nv);
      for (int m = m0; m < m1; m += MR)
        tn_block(C + (size_t)m * ldc + v0 * U, ldc, A + (size_t)k0 * lda + m, lda, buf + v0 * U,
                 Np, kb, N - v0 * U, m1 - m < MR ? m1 - m : MR, nv);
    }
  }
}

/* C [mr, n] = A [mr, K] @ the group's packed columns [K][nv][U]. */
INLINE void nn_tile(float *C, int ldc, const float *A, int lda, const float *group, int K, int n,
                    int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) acc[r][v] = (vf){0};
  core(acc, mr, nv, A, (size_t)lda, 1, group, (size_t)nv * U, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) store(C + (size_t)r * ldc + v * U, acc[r][v], cols_of(n, v));
}

static void nn_block(float *C, int ldc, const float *A, int lda, const float *group, int K, int n,
                     int mr, int nv) {
  TILE_SWITCH(mr, nv, nn_tile, C, ldc, A, lda, group, K, n);
}

void ISA_NAME(gemm_nn)(float *C, int ldc, const float *A, int lda, const float *wp, int r0,
                       int r1, int N, int K) {
  int const NV = (N + U - 1) / U, RC = chunk_rows(K);
  for (int c0 = r0; c0 < r1; c0 += RC) {
    int const c1 = r1 - c0 < RC ? r1 : c0 + RC;
    for (int q = 0; q < recur_groups(NV); q++) {
      int v0, nv;
      recur_group(NV, q, &v0, &nv);
      for (int r = c0; r < c1; r += MR)
        nn_block(C + (size_t)r * ldc + v0 * U, ldc, A + (size_t)r * lda, lda,
                 wp + (size_t)v0 * U * K, K, N - v0 * U, c1 - r < MR ? c1 - r : MR, nv);
    }
  }
}
