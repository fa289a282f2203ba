/*
 * The recurrent kernels of recur_cpu.h for one instruction set.
 *
 * Compiled once per set by kernels/CMakeLists.txt with
 *   RECUR_ISA    the table's name suffix (avx512, avx2),
 *   RECUR_WIDTH  U, floats per vector (16, 8),
 *   RECUR_ROWS   MR, batch rows per register tile (6, 3),
 * and the matching -m flags. A tile is MR rows x 4 vectors of U floats,
 * held in registers while k runs: forward, the four gates of one panel of
 * U hidden units; backward, four panels of U units. GCC vector extensions
 * (not intrinsics) keep one source for every width.
 */
#include <stdint.h>

#include "recur_cpu.h"

#if !defined(RECUR_ISA) || !defined(RECUR_WIDTH) || !defined(RECUR_ROWS)
#error "recur_cpu.c is compiled with RECUR_ISA, RECUR_WIDTH and RECUR_ROWS set (CMakeLists.txt)"
#endif
#if RECUR_ROWS < 1 || RECUR_ROWS > 6
#error "RECUR_ROWS is 1 to 6 (the tile switch in fwd_block and bwd_block)"
#endif

#define U RECUR_WIDTH
#define MR RECUR_ROWS
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)
#define INLINE static inline __attribute__((always_inline))

typedef float vf __attribute__((vector_size(U * sizeof(float)))); /* aligned */
typedef float vf_u __attribute__((vector_size(U * sizeof(float)), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(U * sizeof(float))));

/* n <= U floats into a vector, the rest zero. */
INLINE vf load(const float *p, int n) {
  if (n == U) {
    vf_u const v = *(const vf_u *)p;
    return v;
  }
  vf v = {0};
  for (int j = 0; j < n; j++) v[j] = p[j];
  return v;
}

/* The first n <= U floats of v to p. */
INLINE void store(float *p, vf v, int n) {
  if (n == U) {
    *(vf_u *)p = v;
    return;
  }
  for (int j = 0; j < n; j++) p[j] = v[j];
}

/* ------------------------------------------------------------------------ */
/* Pointwise math on vectors                                                 */

INLINE vf splat(float s) { return (vf){0} + s; }

/* m ? a : b, lane by lane (m: all ones or zeros). */
INLINE vf vselect(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }

/* e^x within 2 ulp on [-87, 88] (clamped outside): x = k ln2 + r with
 * |r| <= ln2/2, e^r by its degree-7 Taylor polynomial (truncation error
 * r^8/8! < 6e-9 relative), times 2^k built in the exponent bits. */
INLINE vf vexp(vf x) {
  x = vselect(x < splat(-87.0f), splat(-87.0f), x);
  x = vselect(x > splat(88.0f), splat(88.0f), x);
  vf const shifter = splat(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
  vf const kf = (x * 1.44269504088896341f + shifter) - shifter;
  vf const r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;
  vf p = splat(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  vi const k = __builtin_convertvector(kf, vi);
  return p * (vf)((k + 127) << 23);
}

INLINE vf vsigmoid(vf x) { return 1.0f / (1.0f + vexp(-x)); }

/* tanh(x) = 1 - 2 / (e^{2x} + 1): absolute error about one float ulp of 1. */
INLINE vf vtanh(vf x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }

/* ------------------------------------------------------------------------ */
/* The micro-kernel                                                          */

/* acc[r][v] += a[r * lda + k] * bp[k][v] over k < K, for r < mr, v < nv:
 * the micro-kernel. bp [K][nv][U] is packed (64-byte aligned). With mr and
 * nv constant the loops unroll and acc lives in registers. */
INLINE void core(vf acc[MR][4], int mr, int nv, const float *a, size_t lda, const float *bp,
                 int K) {
  for (int k = 0; k < K; k++) {
    vf w[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) w[v] = *(const vf *)(bp + ((size_t)k * nv + v) * U);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      float const s = a[(size_t)r * lda + k];
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[r][v] += s * w[v];
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */

/* The cell on a finished tile: rows b .. b+mr-1 of step t, units j0 .. j0+n-1;
 * tile [MR][4] holds their pre-activations (i, f, g, o).
 * c = f * c_prev + i * g; tc = tanh(c); h = o * tc. */
static void fwd_cell(const recur_fwd_t *a, int t, int b, int mr, int j0, int n,
                     const vf tile[MR][4]) {
  int const H = a->H;
  size_t const G = 4 * (size_t)H, BH = (size_t)a->B * H;
  for (int r = 0; r < mr; r++) {
    size_t const row = (size_t)(b + r) * H + j0;
    float *const g = a->gates + ((size_t)t * a->B + b + r) * G + j0;
    vf const i = vsigmoid(tile[r][0]), f = vsigmoid(tile[r][1]);
    vf const gt = vtanh(tile[r][2]), o = vsigmoid(tile[r][3]);
    vf const c = f * load(a->cs + t * BH + row, n) + i * gt;
    vf const tc = vtanh(c);
    store(g, i, n);
    store(g + H, f, n);
    store(g + 2 * H, gt, n);
    store(g + 3 * H, o, n);
    store(a->cs + (t + 1) * BH + row, c, n);
    store(a->tcs + t * BH + row, tc, n);
    store(a->hs + (t + 1) * BH + row, o * tc, n);
  }
}

/* Rows b .. b+mr-1 of step t, panel p: pre-activations, then the cell. */
INLINE void fwd_tile(const recur_fwd_t *a, int t, int b, int mr, int p) {
  int const H = a->H, kx = a->kx, j0 = p * U, n = H - j0 < U ? H - j0 : U;
  size_t const G = 4 * (size_t)H;
  float *const g = a->gates + ((size_t)t * a->B + b) * G + j0;
  const float *wp = a->wp + (size_t)p * (size_t)(kx + H) * 4 * U;
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int q = 0; q < 4; q++)
      acc[r][q] = kx > 0 ? *(const vf *)(a->bias + ((size_t)p * 4 + q) * U)
                         : load(g + r * G + (size_t)q * H, n);
  if (kx > 0) {
    core(acc, mr, 4, a->x + ((size_t)t * a->B + b) * kx, (size_t)kx, wp, kx);
    wp += (size_t)kx * 4 * U;
  }
  core(acc, mr, 4, a->hs + ((size_t)t * a->B + b) * H, (size_t)H, wp, H);
  fwd_cell(a, t, b, mr, j0, n, acc);
}

/* mr = 1 .. MR, each compiled with its rows known. */
static void fwd_block(const recur_fwd_t *a, int t, int b, int mr, int p) {
  switch (mr) {
  case 1: fwd_tile(a, t, b, 1, p); break;
#if MR >= 2
  case 2: fwd_tile(a, t, b, 2, p); break;
#endif
#if MR >= 3
  case 3: fwd_tile(a, t, b, 3, p); break;
#endif
#if MR >= 4
  case 4: fwd_tile(a, t, b, 4, p); break;
#endif
#if MR >= 5
  case 5: fwd_tile(a, t, b, 5, p); break;
#endif
#if MR >= 6
  case 6: fwd_tile(a, t, b, 6, p); break;
#endif
  }
}

static void forward_rows(const recur_fwd_t *a, int b0, int b1) {
  int const P = (a->H + U - 1) / U;
  for (int t = 0; t < a->T; t++)
    for (int b = b0; b < b1; b += MR) {
      int const mr = b1 - b < MR ? b1 - b : MR;
      for (int p = 0; p < P; p++) fwd_block(a, t, b, mr, p);
    }
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */

/* The cell backward on a finished tile: rows b .. b+mr-1 of step t, panels
 * 4q .. 4q+nv-1; tile [MR][4] holds d loss / d h_t there. dc: in d/dc_t
 * from step t+1, out d/dc_{t-1}; dgates_t: the pre-activation gradients. */
static void bwd_cell(const recur_bwd_t *a, int t, int b, int mr, int q, int nv,
                     const vf tile[MR][4]) {
  int const H = a->H;
  size_t const G = 4 * (size_t)H, BH = (size_t)a->B * H;
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      int const j0 = (4 * q + v) * U, n = H - j0 < U ? H - j0 : U;
      size_t const row = (size_t)(b + r) * H + j0, grow = ((size_t)t * a->B + b + r) * G + j0;
      const float *const g = a->gates + grow;
      float *const dg = a->dgates + grow, *const dc = a->dc + row;
      vf const i = load(g, n), f = load(g + H, n), gt = load(g + 2 * H, n);
      vf const o = load(g + 3 * H, n), tc = load(a->tcs + t * BH + row, n);
      vf const d_h = tile[r][v];
      vf const d_c = load(dc, n) + d_h * o * (1.0f - tc * tc);
      store(dg, d_c * gt * i * (1.0f - i), n);
      store(dg + H, d_c * load(a->cs + t * BH + row, n) * f * (1.0f - f), n);
      store(dg + 2 * H, d_c * i * (1.0f - gt * gt), n);
      store(dg + 3 * H, d_h * tc * o * (1.0f - o), n);
      store(dc, d_c * f, n);
    }
}

/* Rows b .. b+mr-1, panels 4q .. 4q+nv-1: d/dh = the gradient from above (at
 * step t >= 0) plus dgates_{t+1} @ w_hh (t < T-1), then the cell; at t = -1
 * dh0 = dgates_0 @ w_hh alone. */
INLINE void bwd_tile(const recur_bwd_t *a, int t, int b, int mr, int q, int nv) {
  int const H = a->H, G = 4 * H, j0 = 4 * q * U;
  size_t const BH = (size_t)a->B * H;
  vf acc[MR][4];
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      int const n = H - j0 - v * U < U ? H - j0 - v * U : U;
      acc[r][v] = t < 0 ? (vf){0} : load(a->dh + t * BH + (size_t)(b + r) * H + j0 + v * U, n);
    }
  if (t < a->T - 1)
    core(acc, mr, nv, a->dgates + ((size_t)(t + 1) * a->B + b) * G, (size_t)G,
         a->wp + (size_t)q * 4 * U * G, G);
  if (t >= 0) {
    bwd_cell(a, t, b, mr, q, nv, acc);
    return;
  }
  for (int r = 0; r < mr; r++)
    for (int v = 0; v < nv; v++) {
      int const n = H - j0 - v * U < U ? H - j0 - v * U : U;
      store(a->dh0 + (size_t)(b + r) * H + j0 + v * U, acc[r][v], n);
    }
}

#define BWD_NV(m)                                                                         \
  switch (nv) {                                                                           \
  case 1: bwd_tile(a, t, b, m, q, 1); break;                                              \
  case 2: bwd_tile(a, t, b, m, q, 2); break;                                              \
  case 3: bwd_tile(a, t, b, m, q, 3); break;                                              \
  case 4: bwd_tile(a, t, b, m, q, 4); break;                                              \
  }                                                                                       \
  break

/* mr = 1 .. MR and nv = 1 .. 4, each compiled with both known. */
static void bwd_block(const recur_bwd_t *a, int t, int b, int mr, int q, int nv) {
  switch (mr) {
  case 1: BWD_NV(1);
#if MR >= 2
  case 2: BWD_NV(2);
#endif
#if MR >= 3
  case 3: BWD_NV(3);
#endif
#if MR >= 4
  case 4: BWD_NV(4);
#endif
#if MR >= 5
  case 5: BWD_NV(5);
#endif
#if MR >= 6
  case 6: BWD_NV(6);
#endif
  }
}

/* Steps T-1 .. 0, then dh0 (as step -1). */
static void backward_rows(const recur_bwd_t *a, int b0, int b1) {
  int const P = (a->H + U - 1) / U, Q = (P + 3) / 4;
  for (int t = a->T - 1; t >= -1; t--)
    for (int b = b0; b < b1; b += MR) {
      int const mr = b1 - b < MR ? b1 - b : MR;
      for (int q = 0; q < Q; q++) bwd_block(a, t, b, mr, q, P - 4 * q < 4 ? P - 4 * q : 4);
    }
}

const recur_kernels_t CAT(recur_, RECUR_ISA) = {
    .name = STR(RECUR_ISA),
    .width = U,
    .forward_rows = forward_rows,
    .backward_rows = backward_rows,
};
