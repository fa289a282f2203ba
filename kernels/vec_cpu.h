/*
 * One vector width's types, pointwise math and register-blocked
 * micro-kernel, for the files compiled once per instruction set
 * (recur_cpu.c, gemm_cpu.c; see kernels/CMakeLists.txt), which define
 *   VEC_ISA    the name suffix of their tables and functions (avx512, ...),
 *   VEC_WIDTH  U, floats per vector (16, 8, 4),
 *   VEC_ROWS   MR, rows per register tile (1 to 6),
 * and pass the matching -m flags. A tile is MR rows x nv <= 4 vectors of
 * U floats, held in registers while k runs. GCC vector extensions (not
 * intrinsics) keep one source for every width.
 */
#ifndef LSTREAM_KERNELS_VEC_CPU_H
#define LSTREAM_KERNELS_VEC_CPU_H

#include <stddef.h>
#include <stdint.h>

#if !defined(VEC_ISA) || !defined(VEC_WIDTH) || !defined(VEC_ROWS)
#error "compiled with VEC_ISA, VEC_WIDTH and VEC_ROWS set (kernels/CMakeLists.txt)"
#endif
#if VEC_ROWS < 1 || VEC_ROWS > 6
#error "VEC_ROWS is 1 to 6 (the cases of FOR_ROWS)"
#endif

#define U          VEC_WIDTH
#define MR         VEC_ROWS
#define CAT_(a, b) a##b
#define CAT(a, b)  CAT_(a, b)
#define STR_(a)    #a
#define STR(a)     STR_(a)
/* name_avx512 etc.: the per-set names of what the files share. */
#define ISA_NAME(name) CAT(name, CAT(_, VEC_ISA))
#define INLINE         static inline __attribute__((always_inline))

typedef float vf __attribute__((vector_size(U * sizeof(float)))); /* aligned */
typedef float vf_u __attribute__((vector_size(U * sizeof(float)), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(U * sizeof(float))));
typedef double vd_u __attribute__((vector_size(U * sizeof(double)), aligned(8), may_alias));

/* n <= U floats into a vector, the rest zero. */
INLINE vf load(const float *p, int n) {
  if (n == U) {
    vf_u const v = *(const vf_u *)p;
    return v;
  }
  vf v = {0};
  for (int j = 0; j < n; j++)
    v[j] = p[j];
  return v;
}

/* The first n <= U floats of v to p. */
INLINE void store(float *p, vf v, int n) {
  if (n == U) {
    *(vf_u *)p = v;
    return;
  }
  for (int j = 0; j < n; j++)
    p[j] = v[j];
}

/* p[j] += v[j] in double, j < n <= U. */
INLINE void add_double(double *p, vf v, int n) {
  if (n == U) {
    *(vd_u *)p += __builtin_convertvector(v, vd_u);
    return;
  }
  for (int j = 0; j < n; j++)
    p[j] += (double)v[j];
}

/* ------------------------------------------------------------------------ */
/* Pointwise math                                                            */

INLINE vf splat(float s) {
  return (vf){0} + s;
}

/* m ? a : b, lane by lane (m: all ones or zeros). */
INLINE vf vselect(vi m, vf a, vf b) {
  return (vf)((m & (vi)a) | (~m & (vi)b));
}

/* a > b ? a : b and a < b ? a : b, lane by lane: b where either is NaN,
 * so vmax(lo, x) and vmin(hi, x) keep a NaN x. On x86 one max/min
 * instruction (the same operand rule); GCC 12's C has no vector ?:, and
 * the compare-and-select it makes of vselect takes three, which made the
 * clamps of the cell's five exponentials 30% of its math (measured). */
INLINE vf vmax(vf a, vf b) {
#if defined(__AVX512F__) && U == 16
  return __builtin_ia32_maxps512_mask(a, b, b, (unsigned short)0xffff, 4 /* rounding: current */);
#elif defined(__AVX__) && U == 8
  return __builtin_ia32_maxps256(a, b);
#elif defined(__SSE__) && U == 4
  return __builtin_ia32_maxps(a, b);
#else
  return vselect(a > b, a, b);
#endif
}
INLINE vf vmin(vf a, vf b) {
#if defined(__AVX512F__) && U == 16
  return __builtin_ia32_minps512_mask(a, b, b, (unsigned short)0xffff, 4 /* rounding: current */);
#elif defined(__AVX__) && U == 8
  return __builtin_ia32_minps256(a, b);
#elif defined(__SSE__) && U == 4
  return __builtin_ia32_minps(a, b);
#else
  return vselect(a < b, a, b);
#endif
}

/* e^{s x} for s x in [lo, hi] (clamped outside; -87 <= lo, hi <= 88), s a
 * constant (1, -1, 2: its product and sign fold into the constants), with
 * relative error < 9e-8 + 1.9e-9 |k| (< 3.1e-7 at the ends of [-87, 88],
 * < 1.1e-7 without FMA; tests/kernels/test_vec.c measures it against libm
 * on every build). y = s x = k ln2 + r with |r| <= ln2/2, e^r by its
 * degree-6 minimax polynomial (a Remez fit of the relative error on
 * [-ln2/2, ln2/2]: 1.9e-9 before rounding; degree 5's 7.5e-8, a biased
 * error, took a gradient of the PyTorch oracle past its bound), times 2^k
 * built in the exponent bits. With FMA ln2 is one float, 1.9e-9 above
 * ln 2: the error that adds to r, 1.9e-9 |k|, is below 6e-8 where
 * |y| < 22, and where it is more e^y is all but 0 or infinite for the
 * sigmoid and tanh (without FMA, two parts, the product of the first
 * exact). k comes from the bits of y log2(e) + 1.5 * 2^23 + 127, whose
 * rounding to an integer leaves k + 127 in the low mantissa bits: shifted
 * into the exponent field, they are 2^k. */
INLINE vf vexp_scaled(vf x, float s, float lo, float hi) {
  x = vmax(splat((s > 0 ? lo : hi) / s), x);
  x = vmin(splat((s > 0 ? hi : lo) / s), x);
  vf const shifter = splat(12583039.0f); /* 1.5 * 2^23 + 127 */
  vf const kb = x * (s * 1.44269504088896341f) + shifter;
  vf const kf = kb - shifter;
#if defined(__FP_FAST_FMAF) /* kf ln2 fused into the subtraction, one rounding */
  vf const r = x * s - kf * 0.693147180559945f;
#else /* kf ln2 rounded: ln2 in two parts, the product of the first exact */
  vf const r = (x * s - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;
#endif
  vf p = splat(1.3836846134577056e-3f);
  p = p * r + 8.3748157983017933e-3f;
  p = p * r + 4.1668225566922838e-2f;
  p = p * r + 1.6666420169946367e-1f;
  p = p * r + 4.9999992079828019e-1f;
  p = p * r + 1.0000000363231765f;
  p = p * r + 1.0000000005541663f;
  return p * (vf)((vi)kb << 23); /* (k + 127) << 23: 0 < k + 127 < 255 */
}

INLINE vf vexp(vf x) {
  return vexp_scaled(x, 1.0f, -87.0f, 88.0f);
}

/* 1 / (1 + e^-x): relative error < 2e-7 on [-20, 20], absolute < 1e-7.
 * True divisions: a reciprocal estimate with a Newton step (r + r (1 - x r))
 * measured 6% slower in the cell, which is bound by its vector ops, not by
 * the divider. */
INLINE vf vsigmoid(vf x) {
  return 1.0f / (1.0f + vexp_scaled(x, -1.0f, -87.0f, 88.0f));
}

/* tanh(x) = 1 - 2 / (e^{2x} + 1): absolute error < 1.8e-7, about 1.5
 * float ulps of 1 (the subtraction's cancellation near 0). */
INLINE vf vtanh(vf x) {
  return 1.0f - 2.0f / (vexp_scaled(x, 2.0f, -87.0f, 88.0f) + 1.0f);
}

/* ------------------------------------------------------------------------ */
/* The micro-kernel                                                          */

/* acc[r][v] += a[r * ar + k * ak] * b[k * bk + v * U] over k < K, for r < mr,
 * v < nv. With mr and nv constant the loops unroll and acc lives in
 * registers: per k, nv loads, mr broadcasts and mr * nv FMAs. */
INLINE void core(vf acc[MR][4], int mr, int nv, const float *a, size_t ar, size_t ak,
                 const float *b, size_t bk, int K) {
  for (int k = 0; k < K; k++) {
    vf w[4];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++)
      w[v] = *(const vf_u *)(b + (size_t)k * bk + (size_t)v * U);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      float const s = a[(size_t)r * ar + (size_t)k * ak];
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++)
        acc[r][v] += s * w[v];
    }
  }
}

/* tile(args..., m, v) with m = mr (1 .. MR) and v = nv (1 .. 4) as
 * constants, or tile(args..., m) (ROW_SWITCH): one compiled copy per shape
 * of tile. */
#define NV_CASES(m, tile, ...)                                                                     \
  case (m)*8 + 1: tile(__VA_ARGS__, m, 1); break;                                                  \
  case (m)*8 + 2: tile(__VA_ARGS__, m, 2); break;                                                  \
  case (m)*8 + 3: tile(__VA_ARGS__, m, 3); break;                                                  \
  case (m)*8 + 4:                                                                                  \
    tile(__VA_ARGS__, m, 4);                                                                       \
    break;
#define M_CASE(m, tile, ...)                                                                       \
  case (m):                                                                                        \
    tile(__VA_ARGS__, m);                                                                          \
    break;
#define ROWS_1(C, tile, ...) C(1, tile, __VA_ARGS__)
#if MR >= 2
#define ROWS_2(C, tile, ...) C(2, tile, __VA_ARGS__)
#else
#define ROWS_2(C, tile, ...)
#endif
#if MR >= 3
#define ROWS_3(C, tile, ...) C(3, tile, __VA_ARGS__)
#else
#define ROWS_3(C, tile, ...)
#endif
#if MR >= 4
#define ROWS_4(C, tile, ...) C(4, tile, __VA_ARGS__)
#else
#define ROWS_4(C, tile, ...)
#endif
#if MR >= 5
#define ROWS_5(C, tile, ...) C(5, tile, __VA_ARGS__)
#else
#define ROWS_5(C, tile, ...)
#endif
#if MR >= 6
#define ROWS_6(C, tile, ...) C(6, tile, __VA_ARGS__)
#else
#define ROWS_6(C, tile, ...)
#endif
#define FOR_ROWS(C, tile, ...)                                                                     \
  ROWS_1(C, tile, __VA_ARGS__)                                                                     \
  ROWS_2(C, tile, __VA_ARGS__)                                                                     \
  ROWS_3(C, tile, __VA_ARGS__)                                                                     \
  ROWS_4(C, tile, __VA_ARGS__)                                                                     \
  ROWS_5(C, tile, __VA_ARGS__)                                                                     \
  ROWS_6(C, tile, __VA_ARGS__)
#define TILE_SWITCH(mr, nv, tile, ...)                                                             \
  do {                                                                                             \
    switch ((mr)*8 + (nv)) { FOR_ROWS(NV_CASES, tile, __VA_ARGS__) }                               \
  } while (0)
#define ROW_SWITCH(mr, tile, ...)                                                                  \
  do {                                                                                             \
    switch (mr) { FOR_ROWS(M_CASE, tile, __VA_ARGS__) }                                            \
  } while (0)

/* Rows per chunk for K-float rows: whole tiles, about 32k floats (128 KB,
 * in L2 beside a panel). A chunk's rows meet one panel after the other,
 * each panel read from L2 once per chunk while the rows stay close. */
INLINE int chunk_rows(int K) {
  int const rows = 32768 / (K > 0 ? K : 1) / MR * MR;
  return rows > MR ? rows : MR;
}

#endif /* LSTREAM_KERNELS_VEC_CPU_H */
