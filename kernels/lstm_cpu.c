/*
 * The CPU backend: the primitives of kernels/backend.h in C + OpenBLAS.
 *
 * GEMMs go through cblas (row-major): the input projection of all T steps
 * of a layer is one GEMM, the recurrent GEMM is one per step, and the
 * weight gradients are one GEMM each over all T*B rows. The pointwise gate
 * math is fused in one pass per step and split across threads by rows of
 * the batch. Transcendentals use branch-free polynomial forms that the
 * compiler vectorises (see ls_exp).
 */
#include <cblas.h> /* OpenBLAS: cblas_sgemm, openblas_set_num_threads */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef struct cpu_ctx_s {
  int threads;
  double *colsum; /* (max(4H, O)) bias-gradient sums, in double */
  unsigned char fetched[64]; /* the bytes of the last fetch_start */
} cpu_ctx_t;

/* The pointwise loops are compiled for AVX-512, AVX2 and the baseline; the
 * loader picks the best the machine has (GCC function multi-versioning). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LS_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LS_VECTOR_CLONES
#endif

/* ------------------------------------------------------------------------ */
/* Vectorisable transcendentals                                              */

/* e^x for float x, within 2 ulp on [-87, 88] (clamped outside): x = k ln2 + r
 * with |r| <= ln2/2, e^r by its degree-7 Taylor polynomial (truncation
 * error r^8/8! < 6e-9 relative), times 2^k built in the exponent bits. No
 * branches and no library calls, so loops over it vectorise. */
static inline float ls_exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  float const shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  float const kf = (x * 1.44269504088896341f + shifter) - shifter;
  float const r = (x - kf * 0.693145751953125f) - kf * 1.428606765330187045e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  union {
    int32_t i;
    float f;
  } scale;
  scale.i = ((int32_t)kf + 127) << 23;
  return p * scale.f;
}

static inline float ls_sigmoid(float x) { return 1.0f / (1.0f + ls_exp(-x)); }

/* tanh(x) = 1 - 2 / (e^{2x} + 1): absolute error about one float ulp of 1
 * (6e-8), which is what the state and gradient arithmetic around it carries
 * anyway. */
static inline float ls_tanh(float x) { return 1.0f - 2.0f / (ls_exp(2.0f * x) + 1.0f); }

/* ------------------------------------------------------------------------ */
/* Context and memory                                                        */

/* The CPU is one device. */
static int device_count(void) { return 1; }

static ls_err_t ctx_new(ls_engine_conf_t *conf, void **out) {
  cpu_ctx_t *c = calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the CPU backend");
  /* OMP_NUM_THREADS where set, else the cores this process may run on. */
  int const cores = omp_get_max_threads();
  c->threads = conf->threads > 0 ? conf->threads : (cores > 0 ? cores : 1);
  conf->threads = c->threads;
  int const H = conf->shape.hidden_size, O = conf->shape.output_size;
  c->colsum = malloc((size_t)(4 * H > O ? 4 * H : O) * sizeof(double));
  if (c->colsum == NULL) {
    free(c);
    return ls_error_set(LS_ERR_NOMEM, "no memory for the CPU backend");
  }
  openblas_set_num_threads(c->threads);
  *out = c;
  return LS_OK;
}

static void ctx_free(void *ctx) {
  cpu_ctx_t *const c = ctx;
  if (c != NULL) free(c->colsum);
  free(c);
}

static ls_err_t mem_alloc(void *ctx, size_t bytes, void **ptr) {
  /* 64-byte alignment: whole cache lines and AVX-512 vectors. */
  size_t const rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, rounded);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "could not allocate %zu bytes", bytes);
  memset(p, 0, rounded);
  *ptr = p;
  return LS_OK;
}

static void mem_free(void *ctx, void *ptr) { free(ptr); }

static ls_err_t mem_copy(void *ctx, void *dst, const void *src, size_t bytes) {
  if (bytes) memmove(dst, src, bytes);
  return LS_OK;
}

static ls_err_t mem_zero(void *ctx, void *dst, size_t bytes) {
  if (bytes) memset(dst, 0, bytes);
  return LS_OK;
}

/* The work is done when a call returns: the bytes are there at once. */
static ls_err_t fetch_start(void *ctx, const void *src, size_t bytes) {
  memcpy(((cpu_ctx_t *)ctx)->fetched, src, bytes);
  return LS_OK;
}

static ls_err_t fetch_wait(void *ctx, void *host_dst, size_t bytes) {
  memcpy(host_dst, ((cpu_ctx_t *)ctx)->fetched, bytes);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Pointwise cell math, rows [b0, b1) of one time step                       */

/* Forward: g [B, 4H] pre-activations in, activated gates out;
 * c = f * c_prev + i * g; tc = tanh(c); h = o * tc. */
LS_VECTOR_CLONES static void lstm_cell_forward(float *restrict g, float *restrict h,
                                               float *restrict c, float *restrict tc,
                                               const float *restrict c_prev, int b0, int b1,
                                               int H) {
  for (int b = b0; b < b1; b++) {
    float *restrict gi = g + (size_t)b * 4 * H;
    float *restrict gf = gi + H, *restrict gg = gi + 2 * H, *restrict go = gi + 3 * H;
    size_t const r = (size_t)b * H;
#pragma omp simd
    for (int j = 0; j < H; j++) {
      float const i = ls_sigmoid(gi[j]), f = ls_sigmoid(gf[j]);
      float const gt = ls_tanh(gg[j]), o = ls_sigmoid(go[j]);
      float const cn = f * c_prev[r + j] + i * gt;
      float const t = ls_tanh(cn);
      gi[j] = i, gf[j] = f, gg[j] = gt, go[j] = o;
      c[r + j] = cn;
      tc[r + j] = t;
      h[r + j] = o * t;
    }
  }
}

/* Backward of one step: dh [B, H] (output gradient plus the recurrent part),
 * dc [B, H] in: d/dc_t from step t+1, out: d/dc_{t-1}; dg [B, 4H] out:
 * pre-activation gate gradients. */
LS_VECTOR_CLONES static void lstm_cell_backward(float *restrict dg, float *restrict dc,
                                                const float *restrict dh,
                                                const float *restrict g,
                                                const float *restrict tc,
                                                const float *restrict c_prev, int b0, int b1,
                                                int H) {
  for (int b = b0; b < b1; b++) {
    const float *restrict gi = g + (size_t)b * 4 * H;
    const float *restrict gf = gi + H, *restrict gg = gi + 2 * H, *restrict go = gi + 3 * H;
    float *restrict di = dg + (size_t)b * 4 * H;
    float *restrict df = di + H, *restrict dgg = di + 2 * H, *restrict dout = di + 3 * H;
    size_t const r = (size_t)b * H;
#pragma omp simd
    for (int j = 0; j < H; j++) {
      float const i = gi[j], f = gf[j], gt = gg[j], o = go[j], t = tc[r + j];
      float const d_h = dh[r + j];
      float const d_c = dc[r + j] + d_h * o * (1.0f - t * t);
      di[j] = d_c * gt * i * (1.0f - i);
      df[j] = d_c * c_prev[r + j] * f * (1.0f - f);
      dgg[j] = d_c * i * (1.0f - gt * gt);
      dout[j] = d_h * t * o * (1.0f - o);
      dc[r + j] = d_c * f;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Row helpers                                                               */

/* Fewest batch rows a thread takes in the batch-split recurrence: below
 * this a thread's per-step GEMM is too short to pay for its share. */
#define RECURRENCE_MIN_ROWS 4

/* Rows [b0, b1) of thread `tid` of `nth` over B rows. */
static void split_rows(int B, int tid, int nth, int *b0, int *b1) {
  *b0 = (int)((long)B * tid / nth);
  *b1 = (int)((long)B * (tid + 1) / nth);
}

/* Threads for the batch-split recurrence; 1 runs it on the calling thread
 * (whose GEMMs may then use every thread). */
static int recurrence_threads(const cpu_ctx_t *c, int B, int H) {
  int const most = B / RECURRENCE_MIN_ROWS;
  return most < 1 ? 1 : (c->threads < most ? c->threads : most);
}

/* rows [N, n] += bias [n] broadcast (overwrites: rows = bias, then beta=1 GEMMs add). */
static void fill_rows(float *restrict rows, const float *restrict b1, const float *restrict b2,
                      int N, int n) {
  for (int r = 0; r < N; r++) {
    float *restrict dst = rows + (size_t)r * n;
    if (b2 != NULL) {
#pragma omp simd
      for (int j = 0; j < n; j++) dst[j] = b1[j] + b2[j];
    } else {
      memcpy(dst, b1, (size_t)n * sizeof(float));
    }
  }
}

/* a [n] += column sums of rows [N, n]; b (may be NULL) gets the same sums.
 * The sums run in double: bias gradients add T*B terms that may cancel. */
static void colsum_add(cpu_ctx_t *c, float *restrict a, float *restrict b,
                       const float *restrict rows, int N, int n) {
  double *restrict acc = c->colsum;
  memset(acc, 0, (size_t)n * sizeof(double));
  for (int r = 0; r < N; r++) {
    const float *restrict src = rows + (size_t)r * n;
#pragma omp simd
    for (int j = 0; j < n; j++) acc[j] += (double)src[j];
  }
  for (int j = 0; j < n; j++) a[j] = (float)((double)a[j] + acc[j]);
  if (b != NULL)
    for (int j = 0; j < n; j++) b[j] = (float)((double)b[j] + acc[j]);
}

/* ------------------------------------------------------------------------ */
/* LSTM layer                                                                */

/* The recurrence is split across threads by rows of the batch: rows are
 * independent through time, so each thread runs all T steps of its rows
 * (a single-threaded recurrent GEMM, then the fused cell math) with no
 * synchronisation between steps. OpenBLAS (OpenMP build) runs a GEMM called
 * inside a parallel region on the calling thread. The GEMMs over all T*B
 * rows run outside, on every thread. */

/* All T steps of rows [b0, b1): gates[t] += h_{t-1} @ w_hh^T, then the cell. */
static void lstm_forward_rows(float *gates, float *hs, float *cs, float *tcs, const float *w_hh,
                              int T, int B, int H, int b0, int b1) {
  int const G = 4 * H, nb = b1 - b0;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  for (int t = 0; t < T && nb > 0; t++) {
    float *const g = gates + t * BG;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, G, H, 1.0f,
                hs + t * BH + (size_t)b0 * H, H, w_hh, H, 1.0f, g + (size_t)b0 * G, G);
    lstm_cell_forward(g, hs + (t + 1) * BH, cs + (t + 1) * BH, tcs + t * BH, cs + t * BH, b0, b1,
                      H);
  }
}

/* All T steps of rows [b0, b1), backwards: dh[t] += dgates[t+1] @ w_hh, the
 * cell, and finally dh0 = dgates[0] @ w_hh. dc carries d/dc across steps. */
static void lstm_backward_rows(float *dh0, float *dc, float *dgates, float *dh,
                               const float *gates, const float *cs, const float *tcs,
                               const float *w_hh, int T, int B, int H, int b0, int b1) {
  int const G = 4 * H, nb = b1 - b0;
  size_t const BH = (size_t)B * H, BG = (size_t)B * G;
  if (nb <= 0) return;
  for (int t = T - 1; t >= 0; t--) {
    float *const dg = dgates + t * BG;
    if (t < T - 1)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, H, G, 1.0f,
                  dg + BG + (size_t)b0 * G, G, w_hh, H, 1.0f, dh + t * BH + (size_t)b0 * H, H);
    lstm_cell_backward(dg, dc, dh + t * BH, gates + t * BG, tcs + t * BH, cs + t * BH, b0, b1, H);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, H, G, 1.0f, dgates + (size_t)b0 * G,
              G, w_hh, H, 0.0f, dh0 + (size_t)b0 * H, H);
}

static ls_err_t lstm_forward(void *ctx, float *gates, float *hs, float *cs, float *tcs,
                             const float *x, const float *w_ih, const float *w_hh,
                             const float *b_ih, const float *b_hh, int T, int B, int In, int H) {
  cpu_ctx_t *const c = ctx;
  int const N = T * B, G = 4 * H;
  /* gates [N, 4H] = b_ih + b_hh + x [N, In] @ w_ih^T: all T steps at once. */
  fill_rows(gates, b_ih, b_hh, N, G);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, G, In, 1.0f, x, In, w_ih, In, 1.0f,
              gates, G);
  int const nth = recurrence_threads(c, B, H);
  if (nth == 1) {
    lstm_forward_rows(gates, hs, cs, tcs, w_hh, T, B, H, 0, B);
    return LS_OK;
  }
#pragma omp parallel num_threads(nth)
  {
    int b0, b1;
    split_rows(B, omp_get_thread_num(), omp_get_num_threads(), &b0, &b1);
    lstm_forward_rows(gates, hs, cs, tcs, w_hh, T, B, H, b0, b1);
  }
  return LS_OK;
}

static ls_err_t lstm_backward(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih,
                              float *dw_hh, float *db_ih, float *db_hh, float *dgates, float *dh,
                              const float *gates, const float *hs, const float *cs,
                              const float *tcs, const float *x, const float *w_ih,
                              const float *w_hh, int T, int B, int In, int H) {
  cpu_ctx_t *const c = ctx;
  int const N = T * B, G = 4 * H;
  int const nth = recurrence_threads(c, B, H);
  memset(dc0, 0, (size_t)B * H * sizeof(float)); /* d/dc_T = 0; ends as d/dc_0 */
  if (nth == 1) {
    lstm_backward_rows(dh0, dc0, dgates, dh, gates, cs, tcs, w_hh, T, B, H, 0, B);
  } else {
#pragma omp parallel num_threads(nth)
    {
      int b0, b1;
      split_rows(B, omp_get_thread_num(), omp_get_num_threads(), &b0, &b1);
      lstm_backward_rows(dh0, dc0, dgates, dh, gates, cs, tcs, w_hh, T, B, H, b0, b1);
    }
  }
  /* Weight gradients over all T*B rows at once. */
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, G, In, N, 1.0f, dgates, G, x, In, 1.0f,
              dw_ih, In);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, G, H, N, 1.0f, dgates, G, hs, H, 1.0f,
              dw_hh, H);
  colsum_add(c, db_ih, db_hh, dgates, N, G);
  /* dx [N, In] = dgates @ w_ih [4H, In]; may overwrite dh, which is spent. */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, In, G, 1.0f, dgates, G, w_ih, In,
              0.0f, dx, In);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Head and loss                                                             */

static ls_err_t head_forward(void *ctx, float *pred, const float *y, const float *w,
                             const float *b, int N, int H, int O) {
  fill_rows(pred, b, NULL, N, O);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, O, H, 1.0f, y, H, w, H, 1.0f, pred, O);
  return LS_OK;
}

static ls_err_t seq_targets(void *ctx, const float **target, const float *seq, int B, int In) {
  *target = seq + (size_t)B * In; /* row 1 */
  return LS_OK;
}

static ls_err_t mse_loss(void *ctx, double *loss, float *dpred, const float *pred,
                         const float *target, const float *mask, float scale, int N, int O) {
  double sum = 0.0, valid = 0.0;
  for (int r = 0; r < N; r++) {
    float const m = mask ? mask[r] : 1.0f;
    const float *const p = pred + (size_t)r * O, *const y = target + (size_t)r * O;
    float *const d = dpred ? dpred + (size_t)r * O : NULL;
    if (m == 0.0f) { /* padding: exactly nothing, whatever pred holds */
      if (d) memset(d, 0, (size_t)O * sizeof(float));
      continue;
    }
    float row = 0.0f;
    for (int o = 0; o < O; o++) {
      float const e = p[o] - y[o];
      row += e * e;
      if (d) d[o] = 2.0f * scale * m * e;
    }
    sum += (double)m * row;
    valid += m;
  }
  loss[0] = sum;
  loss[1] = valid * O;
  return LS_OK;
}

static ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                              const float *y, const float *w, int N, int H, int O) {
  /* dy [N, H] = dpred [N, O] @ w [O, H] */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, H, O, 1.0f, dpred, O, w, H, 0.0f, dy,
              H);
  /* dw [O, H] += dpred^T @ y */
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, O, H, N, 1.0f, dpred, O, y, H, 1.0f, dw, H);
  colsum_add(ctx, db, NULL, dpred, N, O);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */

static ls_err_t grad_norm_sq(void *ctx, double *norm_sq, const float *g, size_t n) {
  cpu_ctx_t *const c = ctx;
  double sum = 0.0;
  /* A static schedule and a fixed thread count make the sum reproducible. */
#pragma omp parallel for simd num_threads(c->threads) schedule(static) reduction(+ : sum) \
    if (n > 65536)
  for (size_t i = 0; i < n; i++) sum += (double)g[i] * (double)g[i];
  *norm_sq = sum;
  return LS_OK;
}

static ls_err_t adam_update(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                            const double *norm_sq, float grad_scale, const ls_optim_t *opt,
                            int64_t step) {
  cpu_ctx_t *const c = ctx;
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  double const norm = (double)grad_scale * sqrt(*norm_sq);
  double coef = 1.0;
  if (opt->clip_norm > 0.0f) {
    coef = (double)opt->clip_norm / (norm + 1e-6);
    coef = coef < 1.0 ? coef : 1.0;
  }
  /* torch.optim.Adam(W), single-tensor path: scalars in double, then float. */
  float const gs = (float)((double)grad_scale * coef);
  float const b1 = opt->beta1, b2 = opt->beta2, wd = opt->weight_decay, lr = opt->lr;
  double const bc1 = 1.0 - pow((double)b1, (double)step);
  double const bc2 = 1.0 - pow((double)b2, (double)step);
  float const step_size = (float)((double)lr / bc1);
  float const bc2_sqrt = (float)sqrt(bc2);
  float const decay = opt->decoupled ? 1.0f - lr * wd : 1.0f;
  float const l2 = opt->decoupled ? 0.0f : wd;
  float const eps = opt->eps;
#pragma omp parallel for simd num_threads(c->threads) schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++) {
    float const gi = g[i] * gs + l2 * p[i];
    float const pi = p[i] * decay;
    float const mi = m[i] + (1.0f - b1) * (gi - m[i]); /* lerp, weight < 0.5 */
    float const vi = v[i] * b2 + (1.0f - b2) * gi * gi;
    float const denom = sqrtf(vi) / bc2_sqrt + eps;
    p[i] = pi - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    g[i] = 0.0f;
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Series states                                                             */

static ls_err_t state_gather(void *ctx, float *h0, float *c0, size_t stride, const float *tab_h,
                             const float *tab_c, const int64_t *slots, int B, int L, int H) {
  size_t const row = (size_t)H * sizeof(float);
  for (int b = 0; b < B; b++)
    for (int l = 0; l < L; l++) {
      float *const dh = h0 + (size_t)l * stride + (size_t)b * H;
      float *const dc = c0 + (size_t)l * stride + (size_t)b * H;
      if (slots[b] < 0) {
        memset(dh, 0, row);
        memset(dc, 0, row);
      } else {
        size_t const src = ((size_t)slots[b] * L + l) * H;
        memcpy(dh, tab_h + src, row);
        memcpy(dc, tab_c + src, row);
      }
    }
  return LS_OK;
}

static ls_err_t state_scatter(void *ctx, float *tab_h, float *tab_c, const float *hT,
                              const float *cT, size_t stride, const int64_t *slots, int B, int L,
                              int H) {
  size_t const row = (size_t)H * sizeof(float);
  for (int b = 0; b < B; b++) {
    if (slots[b] < 0) continue;
    for (int l = 0; l < L; l++) {
      size_t const dst = ((size_t)slots[b] * L + l) * H;
      memcpy(tab_h + dst, hT + (size_t)l * stride + (size_t)b * H, row);
      memcpy(tab_c + dst, cT + (size_t)l * stride + (size_t)b * H, row);
    }
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The slots whose CPU form is the paths above                               */

/* grad_norm_sq, then adam_update; the arguments' device memory is host memory. */
static ls_err_t optimizer_step(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                               double *norm_sq, const ls_optim_args_t *args) {
  LS_FORWARD_IF_ERROR(grad_norm_sq(ctx, norm_sq, g, n));
  return adam_update(ctx, p, g, m, v, n, norm_sq, args->grad_scale, &args->opt, args->step);
}

/* Nothing to record: the work runs now. */
static ls_err_t graph_run(void *ctx, const void *key, size_t key_bytes, ls_err_t (*queue)(void *),
                          void *opaque) {
  (void)ctx, (void)key, (void)key_bytes;
  return queue(opaque);
}

/* ------------------------------------------------------------------------ */

const ls_backend_ops_t ls_backend_cpu = {
    .name = "cpu",
    .ctx_new = ctx_new,
    .ctx_free = ctx_free,
    .stream = NULL, /* every call finishes its work before it returns */
    .device_count = device_count,
    .alloc = mem_alloc,
    .free = mem_free,
    .upload = mem_copy,
    .download = mem_copy,
    .copy = mem_copy,
    .zero = mem_zero,
    .lstm_forward = lstm_forward,
    .lstm_backward = lstm_backward,
    .head_forward = head_forward,
    .seq_targets = seq_targets,
    .mse_loss = mse_loss,
    .head_backward = head_backward,
    .optimizer_step = optimizer_step,
    .state_gather = state_gather,
    .state_scatter = state_scatter,
    .fetch_start = fetch_start,
    .fetch_wait = fetch_wait,
    .graph_run = graph_run,
};
