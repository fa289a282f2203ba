/*
 * recur_cpu.h: choosing the recurrent kernels, and packing the weights
 * into their panels (once per forward or backward of a layer).
 */
#include <string.h>

#include "recur_cpu.h"

ls_err_t recur_pick(const char *force, const recur_kernels_t **out) {
  int const any = force == NULL || force[0] == '\0';
  const recur_kernels_t *const all[] = {
#if defined(LSTREAM_RECUR_X86)
    &recur_avx512,
    &recur_avx2,
#endif
    &recur_generic,
  };
  *out = &recur_generic;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const recur_kernels_t *const k = all[i];
    if (!any && strcmp(force, k->name) != 0) continue;
    int runs = 1;
#if defined(LSTREAM_RECUR_X86)
    __builtin_cpu_init();
    if (k == &recur_avx512) runs = __builtin_cpu_supports("avx512f");
    if (k == &recur_avx2) runs = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    if (runs) {
      *out = k;
      return LS_OK;
    }
    LS_RETURN_IF(!any, LS_ERR_UNSUPPORTED,
                 "LSTREAM_CPU_KERNELS=%s: this CPU cannot run them (try avx2 or generic)", force);
  }
  LS_RETURN_IF(!any, LS_ERR_INVALID_ARG,
               "LSTREAM_CPU_KERNELS='%s': expected avx512, avx2 or generic (or unset: the "
               "widest this CPU runs)",
               force);
  return LS_OK;
}

/* n rounded up to whole vectors of the kernels. */
static size_t padded(const recur_kernels_t *k, int n) {
  return (size_t)(n + k->width - 1) / (size_t)k->width * (size_t)k->width;
}

size_t recur_pack_floats(const recur_kernels_t *k, int In, int H) {
  size_t const fwd = padded(k, H) * 4 * (size_t)(In + H);
  size_t const w_hh = padded(k, H) * 4 * (size_t)H, w_ih = padded(k, In) * 4 * (size_t)H;
  size_t const bwd = w_hh > w_ih ? w_hh : w_ih;
  return fwd > bwd ? fwd : bwd;
}

size_t recur_tn_floats(const recur_kernels_t *k, int M, int N) {
  return (size_t)RECUR_TN_ROWS * (padded(k, N) + (size_t)recur_tn_stride(M));
}

/* w [4H, K] into rows k0 .. k0+K-1 of the panels [P][Kp][4][U]: written in
 * order, read down U rows at a time (their lines stay in L1 across k). */
static void pack_gates(float *wp, const float *w, int U, int P, int Kp, int k0, int K, int H) {
  for (int p = 0; p < P; p++) {
    int const n = H - p * U < U ? H - p * U : U; /* units of the panel */
    for (int kk = 0; kk < K; kk++) {
      float *const dst = wp + ((size_t)p * Kp + (size_t)(k0 + kk)) * 4 * U;
      for (int q = 0; q < 4; q++) {
        const float *const src = w + ((size_t)q * H + (size_t)p * U) * K + kk;
        for (int u = 0; u < n; u++)
          dst[q * U + u] = src[(size_t)u * K];
        for (int u = n; u < U; u++)
          dst[q * U + u] = 0.0f;
      }
    }
  }
}

void recur_pack_forward(const recur_kernels_t *k, float *wp, float *bias, const float *w_ih,
                        const float *w_hh, const float *b_ih, const float *b_hh, int In, int H) {
  int const U = k->width, P = (int)(padded(k, H) / (size_t)U);
  pack_gates(wp, w_ih, U, P, In + H, 0, In, H);
  pack_gates(wp, w_hh, U, P, In + H, In, H, H);
  for (int p = 0; p < P; p++)
    for (int q = 0; q < 4; q++)
      for (int u = 0; u < U; u++) {
        int const j = p * U + u;
        size_t const row = (size_t)q * H + (size_t)j;
        bias[((size_t)p * 4 + q) * U + u] = j < H ? b_ih[row] + b_hh[row] : 0.0f;
      }
}

void recur_pack_cols(const recur_kernels_t *k, float *wp, const float *w, int K, int N) {
  int const U = k->width, P = (int)(padded(k, N) / (size_t)U);
  for (int q = 0; q < recur_groups(P); q++) {
    int v0, nv;
    recur_group(P, q, &v0, &nv);
    float *const group = wp + (size_t)v0 * U * K;
    int const n = N - v0 * U < nv * U ? N - v0 * U : nv * U; /* columns of the group */
    for (int kk = 0; kk < K; kk++) {
      float *const dst = group + (size_t)kk * nv * U;
      const float *const src = w + (size_t)kk * N + (size_t)v0 * U;
      for (int j = 0; j < n; j++)
        dst[j] = src[j];
      for (int j = n; j < nv * U; j++)
        dst[j] = 0.0f;
    }
  }
}
