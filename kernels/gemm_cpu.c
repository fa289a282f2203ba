/*
 * The GEMMs over all T*B rows of recur_cpu.h (gemm_tn, gemm_nn) for one
 * instruction set (vec_cpu.h).
 *
 * gemm_tn (the weight gradients, dW [4H, In] += dgates^T x): per block of
 * RECUR_TN_ROWS rows of k, B's rows are copied into a buffer (its columns
 * padded to whole vectors) and MR consecutive columns of each of A's rows
 * broadcast: no transposed copy. At A's larger strides (4H >= 128: its
 * rows, a power of two apart, fall in a few L1 sets) A's block is copied
 * too, at a stride that spreads them, B's block is laid out a panel per
 * group (contiguous, in L1 while the tiles pass over it) and the next
 * block's rows are prefetched towards L2 along the way (tnp_tile): 1.1x
 * to 1.4x on one thread at H = 128 to 256, measured. With fewer columns
 * than a vector, the other way round (tnt_tile).
 * gemm_nn (dx = dgates @ w_ih, dh0 = dgates_0 @ w_hh): A's rows broadcast
 * against W packed once per call (recur_pack_cols).
 */
#include <string.h>

#include "gemm_cpu.h"
#include "recur_cpu.h"
#include "vec_cpu.h"

/* The n <= nv*U valid columns of a tile's vectors. */
INLINE int cols_of(int n, int v) {
  return n - v * U < U ? (n - v * U > 0 ? n - v * U : 0) : U;
}

/* Lines a tile brings towards L2 while it runs (the next block's rows,
 * a share per tile): rows [rows, na] of a (lda), then [rows, nb] of b
 * (ldb). */
typedef struct tn_pf_s {
  const float *a, *b;
  int lda, ldb, na, nb, rows;
} tn_pf_t;

/* Lines [l0, l1) of pf, 16 floats each. */
INLINE void tn_prefetch(const tn_pf_t *pf, int l0, int l1) {
  int const la = (pf->na + 15) / 16, lb = (pf->nb + 15) / 16;
  for (int l = l0; l < l1; l++) {
    int const r = l / (la + lb), j = l % (la + lb);
    __builtin_prefetch(j < la ? pf->a + (size_t)r * pf->lda + j * 16
                              : pf->b + (size_t)r * pf->ldb + (j - la) * 16,
                       0, 2);
  }
}

/* C [mr, n] += A^T B over K rows; A's row k at A + k * lda, B packed
 * [K][bk]. */
INLINE void tn_tile(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                    int n, int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      acc[r][v] = load(C + (size_t)r * ldc + v * U, cols_of(n, v));
  core(acc, mr, nv, A, 1, (size_t)lda, bp, (size_t)bk, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      store(C + (size_t)r * ldc + v * U, acc[r][v], cols_of(n, v));
}

static void tn_block(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                     int n, int mr, int nv) {
  TILE_SWITCH(mr, nv, tn_tile, C, ldc, A, lda, bp, bk, K, n);
}

/* tn_tile, pf's lines prefetched along the way, a few per 16 rows of k. */
INLINE void tnp_tile(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                     const tn_pf_t *pf, int n, int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      acc[r][v] = load(C + (size_t)r * ldc + v * U, cols_of(n, v));
  int const lines = pf->rows * ((pf->na + 15) / 16 + (pf->nb + 15) / 16), parts = (K + 15) / 16;
  for (int p = 0; p < parts; p++) {
    int const k0 = p * 16, kn = K - k0 < 16 ? K - k0 : 16;
    tn_prefetch(pf, lines * p / parts, lines * (p + 1) / parts);
    core(acc, mr, nv, A + (size_t)k0 * lda, 1, (size_t)lda, bp + (size_t)k0 * bk, (size_t)bk, kn);
  }
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      store(C + (size_t)r * ldc + v * U, acc[r][v], cols_of(n, v));
}

static void tnp_block(float *C, int ldc, const float *A, int lda, const float *bp, int bk, int K,
                      const tn_pf_t *pf, int n, int mr, int nv) {
  TILE_SWITCH(mr, nv, tnp_tile, C, ldc, A, lda, bp, bk, K, pf, n);
}

/* The transposed way for C with fewer than U columns (dW_ih of a few
 * inputs): C^T [n, 4U] += B^T A over all K, the tile's rows being B's
 * columns (broadcast) and its vectors four of A's, read where they lie;
 * then added to C by columns. */
INLINE void tnt_tile(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int K,
                     int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      acc[r][v] = (vf){0};
  core(acc, mr, nv, B, 1, (size_t)ldb, A, (size_t)lda, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      for (int u = 0; u < U; u++)
        C[(size_t)(v * U + u) * ldc + r] += acc[r][v][u];
}

static void tnt_block(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int K,
                      int mr, int nv) {
  TILE_SWITCH(mr, nv, tnt_tile, C, ldc, A, lda, B, ldb, K);
}

/* Where group q of gemm_tn's B block (v0: its first vector, nv of them)
 * starts in buf and its row stride: grouped, [kb][nv][U] at v0 * U * kb,
 * each panel contiguous so that it stays in L1 while the tiles of m pass
 * over it; else rows [kb][Np] as B lies, the group at column v0 * U
 * (measured faster where A is read in place, its rows close in L1). */
INLINE size_t tn_group_at(int grouped, int v0, int kb) {
  return grouped ? (size_t)v0 * U * kb : (size_t)v0 * U;
}
INLINE int tn_group_ld(int grouped, int nv, int Np) {
  return grouped ? nv * U : Np;
}

/* B's rows [kb, N] (ldb) into buf by groups of column vectors
 * (recur_group, tn_group_at), columns past N zero. */
static void tn_pack_b(float *buf, const float *B, int ldb, int N, int kb, int grouped) {
  int const NV = (N + U - 1) / U;
  for (int q = 0; q < recur_groups(NV); q++) {
    int v0, nv;
    recur_group(NV, q, &v0, &nv);
    int const n = N - v0 * U < nv * U ? N - v0 * U : nv * U; /* columns of the group */
    int const ld = tn_group_ld(grouped, nv, NV * U);
    for (int k = 0; k < kb; k++) {
      const float *const src = B + (size_t)k * ldb + v0 * U;
      float *const dst = buf + tn_group_at(grouped, v0, kb) + (size_t)k * ld;
      for (int j = 0; j < n; j++)
        dst[j] = src[j];
      for (int j = n; j < nv * U; j++)
        dst[j] = 0.0f;
    }
  }
}

/* One block of kb rows of k from k0 of gemm_tn, buf as there; the next
 * block's rows (kn of them) prefetched along the way. */
static void tn_kblock(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m0,
                      int m1, int N, int k0, int kb, int kn, float *buf) {
  int const Np = (N + U - 1) / U * U, NV = Np / U, copy = lda >= RECUR_TN_COPY;
  int const tiles = recur_groups(NV) * ((m1 - m0 + MR - 1) / MR), la = recur_tn_stride(m1 - m0);
  const float *a = A + (size_t)k0 * lda + m0;
  tn_pack_b(buf, B + (size_t)k0 * ldb, ldb, N, kb, copy);
  if (copy) {
    float *const ab = buf + (size_t)RECUR_TN_ROWS * Np;
    for (int k = 0; k < kb; k++)
      memcpy(ab + (size_t)k * la, a + (size_t)k * lda, (size_t)(m1 - m0) * sizeof(float));
    a = ab;
  }
  for (int q = 0, t = 0; q < recur_groups(NV); q++) {
    int v0, nv;
    recur_group(NV, q, &v0, &nv);
    for (int m = m0; m < m1; m += MR, t++) {
      /* The next block's rows towards L2 meanwhile, a share per tile. */
      int const r0 = (int)((long)kn * t / tiles), r1 = (int)((long)kn * (t + 1) / tiles);
      size_t const k1 = (size_t)(k0 + kb + r0);
      int const mr = m1 - m < MR ? m1 - m : MR;
      float *const c = C + (size_t)m * ldc + v0 * U;
      tn_pf_t const pf = {A + k1 * lda + m0, B + k1 * ldb, lda, ldb, m1 - m0, N, r1 - r0};
      if (copy)
        tnp_block(c, ldc, a + (m - m0), la, buf + tn_group_at(1, v0, kb), nv * U, kb, &pf,
                  N - v0 * U, mr, nv);
      else
        tn_block(c, ldc, a + (m - m0), lda, buf + tn_group_at(0, v0, kb), Np, kb, N - v0 * U, mr,
                 nv);
    }
  }
}

/* buf: B's block [kb][Np] by groups (tn_pack_b), then, at A's larger
 * strides (lda >= RECUR_TN_COPY: its rows fall in few L1 sets), A's block
 * [kb][m1 - m0] copied at row stride recur_tn_stride(m1 - m0). */
void ISA_NAME(gemm_tn)(float *C, int ldc, const float *A, int lda, const float *B, int ldb, int m0,
                       int m1, int N, int K, float *buf) {
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
    int const kn = K - k0 - kb < RECUR_TN_ROWS ? K - k0 - kb : RECUR_TN_ROWS;
    tn_kblock(C, ldc, A, lda, B, ldb, m0, m1, N, k0, kb, kn, buf);
  }
}

/* C [mr, n] = A [mr, K] @ the group's packed columns [K][nv][U]. */
INLINE void nn_tile(float *C, int ldc, const float *A, int lda, const float *group, int K, int n,
                    int mr, int nv) {
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      acc[r][v] = (vf){0};
  core(acc, mr, nv, A, (size_t)lda, 1, group, (size_t)nv * U, K);
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++)
      store(C + (size_t)r * ldc + v * U, acc[r][v], cols_of(n, v));
}

static void nn_block(float *C, int ldc, const float *A, int lda, const float *group, int K, int n,
                     int mr, int nv) {
  TILE_SWITCH(mr, nv, nn_tile, C, ldc, A, lda, group, K, n);
}

void ISA_NAME(gemm_nn)(float *C, int ldc, const float *A, int lda, const float *wp, int r0, int r1,
                       int N, int K) {
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
