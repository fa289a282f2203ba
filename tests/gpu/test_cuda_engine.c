/*
 * The CUDA backend against the CPU backend: two engines of the same shape,
 * the same parameters and the same inputs; forward, backward and a few
 * clip + Adam/AdamW steps must agree, and state gather/scatter must copy
 * rows exactly; where O == I, the same window given as one sequence
 * (ls_engine_forward_seq) must agree too; and the losses per column
 * (pinball levels beside squared error, a mask per target, rows' lengths,
 * predictions equal to their targets: ls_engine_set_loss,
 * ls_engine_forward_elem, ls_engine_read_loss_cols) on both. Then the TF32 option
 * (LS_PRECISION_TF32) against the CPU's fp32 at a few shapes, under a
 * looser bound (TF32_TOL), and evidence that it took effect.
 *
 * Exit codes: 0 all passed, 1 a check failed or CUDA is unusable, 77 no GPU
 * (ctest reports the test as skipped through SKIP_RETURN_CODE). Without a
 * GPU it still checks that a CUDA engine fails cleanly with "no CUDA
 * device". Only the absence of a device skips: a GPU the runtime cannot use
 * (a driver too old for this CUDA, a broken installation) is a failure, with
 * CUDA's error printed.
 *
 * `test_cuda_engine --probe` only says whether a CUDA device is present
 * (exit 0), absent (77) or unusable (1, with the error), for the scripts.
 * `test_cuda_engine --small`
 * leaves out the cases above SMALL_ELEMS activations (B=4096 H=512), for
 * runs under compute-sanitizer, which slows kernels 10-100x.
 */
#include <cuda_runtime_api.h> /* is there a GPU at all, and can it run TF32 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "lstream/kernels.h"

#define SKIP 77

/* Every comparison: max|cuda - cpu| / max|cpu| over one tensor, at most
 * TOL. Norm-relative, as in tests/oracle/torch_oracle.py, and for the same
 * reason: an entry near zero has a meaningless elementwise error. 1e-4 is
 * the bound of the CUDA backend issue: ten times the oracle's 1e-5 (CPU
 * against torch), since here both sides carry float32 rounding in
 * different orders (cuBLAS tiles against OpenBLAS' panels, over up to
 * T*B = 65536 rows in the weight gradients) and different transcendentals
 * (expf/tanhf against the CPU's 2-ulp polynomials), compounded through T
 * steps and L layers; still far below the faults the oracle's mutations
 * produced (3e-1 swapped gates, 1e-2 AdamW decay without lr, 9e-3 clip
 * 0.1% off). */
#define TOL 1e-4

/* The bound for a CUDA engine in tf32 against the CPU engine in fp32,
 * after one window (outputs, final states, input and parameter gradients)
 * and the update that follows it. TF32 keeps 10 of float32's 23 explicit
 * mantissa bits: rounding a GEMM input changes it by up to 2^-11 = 4.9e-4
 * relative (2^-10 if the kernel truncates), a product of two inputs by up to
 * twice that, and a dot product of K such products, whose errors have random
 * signs, by about 3e-4 of its norm (fp32 accumulation adds nothing new). The
 * window then carries those errors through T steps of the recurrence and L
 * layers, and backward adds one more GEMM on each path; the gates damp them
 * (sigmoid' <= 1/4, tanh' <= 1, f < 1 on the cell state, weights within
 * 1/sqrt(H)), so they add up rather than grow: about 1e-3 at the shapes
 * below. 5e-3 leaves a factor of about 5 over that and still sits far below
 * the faults TOL is there to catch (3e-1 swapped gates, 1e-2 AdamW decay
 * without lr). A tf32 that silently runs fp32 passes any such bound: see
 * TF32_EFFECT for that. */
#define TF32_TOL 5e-3

/* Where tensor cores can run TF32 (compute capability 8.0 and up, and
 * NVIDIA_TF32_OVERRIDE is not 0), the largest tf32-vs-CPU difference of a
 * case with large GEMMs must exceed TF32_EFFECT times the fp32 CUDA engine's
 * on the same case: TF32 rounding (~1e-4 and up) against float32 rounding in
 * another order (~1e-6), so the mode did change the arithmetic. */
#define TF32_EFFECT 4.0

/* Adam steps per case; each starts both engines from their own parameters
 * but feeds both the CPU's gradient (see run_steps). */
#define STEPS 3

typedef struct tcase_s {
  int I, H, L, O, T, B;
  uint32_t seed;
  float lr;
} tcase_t;

/* torch_oracle.py's FIXED_CASES, then the large shape, then the
 * persistent kernels' paths (lstm_cuda_persist*.cu): H = 128 in clusters
 * of two blocks, groups of 2 rows (the last of 1), the input fused in
 * layer 0 and not in layer 1; groups of 4 rows (the last of 2); groups of
 * 8 rows (the last of 4), the input fused. (The random cases and the
 * small fixed ones take groups of one row; H = 256 and 512 the per-step
 * path.) */
static const tcase_t fixed_cases[] = {
    {3, 20, 3, 2, 7, 5, 11, 1e-3f},   {1, 5, 1, 1, 1, 1, 2, 1e-3f},
    {1, 17, 3, 1, 9, 1, 5, 3e-3f},    {4, 13, 2, 4, 12, 9, 7, 1e-3f},
    {2, 8, 2, 5, 1, 16, 99, 1e-3f},   {5, 1, 2, 3, 6, 4, 31, 1e-2f},
    {6, 33, 1, 3, 25, 3, 123, 1e-3f}, {32, 512, 2, 32, 16, 4096, 2024, 1e-3f},
    {8, 128, 2, 8, 3, 67, 41, 1e-3f}, {2, 16, 2, 2, 3, 250, 42, 1e-3f},
    {8, 32, 1, 3, 2, 460, 43, 1e-3f},
};
/* Drawn in the ranges of torch_oracle.py's random cases (not its draws:
 * that is numpy's generator), from RANDOM_SEED, so that every run checks
 * the same shapes. */
#define RANDOM_CASES 3
#define RANDOM_SEED  20240611u
/* --small: cases with T*B*H above this are left out. */
#define SMALL_ELEMS (1 << 20)

static int small_only;
static int too_big(const tcase_t *c) {
  return small_only && (double)c->T * c->B * c->H > SMALL_ELEMS;
}

/* ------------------------------------------------------------------------ */
/* Data                                                                      */

static uint32_t xorshift(uint32_t *s) {
  uint32_t x = *s;
  x ^= x << 13, x ^= x >> 17, x ^= x << 5;
  return *s = x;
}

/* Uniform in [-scale, scale). */
static void fill(float *v, size_t n, uint32_t *s, float scale) {
  for (size_t i = 0; i < n; i++)
    v[i] = (float)(((double)xorshift(s) / 2147483648.0 - 1.0) * scale);
}

static int draw(uint32_t *s, int lo, int hi) {
  return lo + (int)(xorshift(s) % (uint32_t)(hi - lo));
}

static double worst, worst_tf32; /* largest errors seen, fp32 and tf32, for the summary */
static double bound = TOL;       /* the bound of the comparisons under way */
static double *worst_now = &worst;
static double case_worst; /* largest error since it was last reset */

static void expect_close(const char *what, const char *ctx, const float *cuda, const float *cpu,
                         size_t n) {
  double const e = rel_err(cuda, cpu, n);
  if (e > *worst_now) *worst_now = e;
  if (e > case_worst) case_worst = e;
  CHECK(e <= bound, "%s: %s differs by %.3g (max|cuda-cpu|/max|cpu|, bound %g)", ctx, what, e,
        bound);
}

/* Every tensor of a flat buffer (parameters, gradients, moments) on its own. */
static void expect_close_flat(const char *what, const char *ctx, const ls_shape_t *s,
                              const float *cuda, const float *cpu) {
  for (int l = 0; l <= s->num_layers; l++)
    for (int k = 0; k <= LS_PARAM_HEAD_BIAS; k++) {
      int const head = k >= LS_PARAM_HEAD_WEIGHT;
      if (head != (l == s->num_layers)) continue;
      size_t off, cnt;
      char name[64], full[96];
      (void)ls_param_locate(s, head ? 0 : l, (ls_param_kind_t)k, &off, &cnt);
      (void)ls_param_name(l, (ls_param_kind_t)k, name, sizeof name);
      snprintf(full, sizeof full, "%s %s", what, name);
      expect_close(full, ctx, cuda + off, cpu + off, cnt);
    }
}

/* ------------------------------------------------------------------------ */
/* One case                                                                  */

typedef struct bufs_s {
  float *x, *target, *mask, *h0, *c0;    /* inputs */
  float *target_pad;                     /* target, NaN where the mask pads */
  float *y[2], *pred[2], *hT[2], *cT[2]; /* outputs, [0] CUDA, [1] CPU */
  float *dx[2], *dh0[2], *dc0[2];        /* input gradients */
  float *p[2], *g[2], *m[2], *v[2];      /* flat buffers */
} bufs_t;

static void bufs_free(bufs_t *b) {
  free(b->x), free(b->target), free(b->mask), free(b->h0), free(b->c0), free(b->target_pad);
  for (int k = 0; k < 2; k++) {
    free(b->y[k]), free(b->pred[k]), free(b->hT[k]), free(b->cT[k]);
    free(b->dx[k]), free(b->dh0[k]), free(b->dc0[k]);
    free(b->p[k]), free(b->g[k]), free(b->m[k]), free(b->v[k]);
  }
}

static int bufs_new(bufs_t *b, const tcase_t *c, size_t n) {
  memset(b, 0, sizeof *b);
  size_t const N = (size_t)c->T * c->B, S = (size_t)c->L * c->B * c->H;
  b->x = malloc(N * c->I * sizeof(float));
  b->target = malloc(N * c->O * sizeof(float));
  b->target_pad = malloc(N * c->O * sizeof(float));
  b->mask = malloc(N * sizeof(float));
  b->h0 = malloc(S * sizeof(float));
  b->c0 = malloc(S * sizeof(float));
  int ok = b->x && b->target && b->target_pad && b->mask && b->h0 && b->c0;
  for (int k = 0; k < 2; k++) {
    b->y[k] = malloc(N * c->H * sizeof(float));
    b->pred[k] = malloc(N * c->O * sizeof(float));
    b->hT[k] = malloc(S * sizeof(float));
    b->cT[k] = malloc(S * sizeof(float));
    b->dx[k] = malloc(N * c->I * sizeof(float));
    b->dh0[k] = malloc(S * sizeof(float));
    b->dc0[k] = malloc(S * sizeof(float));
    b->p[k] = malloc(n * sizeof(float));
    b->g[k] = malloc(n * sizeof(float));
    b->m[k] = malloc(n * sizeof(float));
    b->v[k] = malloc(n * sizeof(float));
    ok = ok && b->y[k] && b->pred[k] && b->hT[k] && b->cT[k] && b->dx[k] && b->dh0[k] &&
         b->dc0[k] && b->p[k] && b->g[k] && b->m[k] && b->v[k];
  }
  return ok;
}

/* Names a case ("LABEL INDEX (shape)") and allocates its buffers for its n
 * parameters; 0 (counted as a failure) when memory runs out. */
static int case_begin(const tcase_t *c, const char *label, int index, bufs_t *b, char *name,
                      size_t size, size_t *n) {
  snprintf(name, size, "%s %d (I=%d H=%d L=%d O=%d T=%d B=%d seed=%u)", label, index, c->I, c->H,
           c->L, c->O, c->T, c->B, (unsigned)c->seed);
  ls_shape_t const s = {c->I, c->H, c->L, c->O};
  *n = 0;
  (void)ls_param_count(&s, n);
  if (bufs_new(b, c, *n)) return 1;
  CHECK(0, "%s: no memory for the test buffers", name);
  bufs_free(b);
  return 0;
}

/* An engine configuration sized for a case. */
static void case_conf(const tcase_t *c, ls_device_t device, ls_precision_t precision,
                      ls_engine_conf_t *conf) {
  ls_engine_conf_init(conf);
  conf->shape = (ls_shape_t){c->I, c->H, c->L, c->O};
  conf->max_batch = c->B;
  conf->max_window = c->T;
  conf->device = device;
  conf->precision = precision;
}

/* A window of ls_engine_forward_elem: each engine's targets (NaN where
 * unknown), the mask per target [T, B, O] and the rows' lengths [B]. */
typedef struct elem_s {
  float *target[2]; /* (T, B, O) [0] CUDA, [1] CPU */
  float *mask;      /* (T, B, O) */
  int *lengths;     /* (B) */
  double *cols[2];  /* (2 O) the column figures: loss sums, counts */
} elem_t;

/* Forward + backward of the case's window on both engines, compared:
 * inputs x with the targets apart (NaN in padded rows when masked), or,
 * with seq, the window as one sequence (ls_engine_forward_seq, masked), or,
 * with el, targets and a mask per target (ls_engine_forward_elem), the
 * column figures compared too. */
static int run_window(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, int masked,
                      const float *seq, const elem_t *el, const char *ctx, ls_shape_t const *s) {
  size_t const N = (size_t)c->T * c->B, S = (size_t)c->L * c->B * c->H;
  double loss[2] = {0, 0}, count[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    MUST(ls_engine_set_state(e[k], c->B, b->h0, b->c0));
    /* Masked: padded targets are NaN, which must reach neither the loss nor
     * any gradient. */
    if (seq != NULL)
      MUST(ls_engine_forward_seq(e[k], c->T, c->B, seq, masked ? b->mask : NULL, &loss[k],
                                 &count[k]));
    else if (el != NULL)
      MUST(ls_engine_forward_elem(e[k], c->T, c->B, b->x, el->target[k], el->mask, el->lengths,
                                  &loss[k], &count[k]));
    else
      MUST(ls_engine_forward(e[k], c->T, c->B, b->x, masked ? b->target_pad : b->target,
                             masked ? b->mask : NULL, &loss[k], &count[k]));
    MUST(ls_engine_read_outputs(e[k], b->y[k], b->pred[k], b->hT[k], b->cT[k]));
    if (el != NULL) MUST(ls_engine_read_loss_cols(e[k], el->cols[k], el->cols[k] + c->O, c->O));
    MUST(ls_engine_backward(e[k], (float)(1.0 / count[k]))); /* the mean loss; count >= 1 */
    MUST(ls_engine_read_input_grads(e[k], b->dx[k], b->dh0[k], b->dc0[k]));
    MUST(ls_engine_read_grads(e[k], b->g[k], ls_engine_param_count(e[k])));
  }
  CHECK(count[0] == count[1], "%s: count %g (cuda) != %g (cpu)", ctx, count[0], count[1]);
  {
    float const l0 = (float)loss[0], l1 = (float)loss[1];
    expect_close("loss sum", ctx, &l0, &l1, 1);
  }
  expect_close("y", ctx, b->y[0], b->y[1], N * c->H);
  expect_close("pred", ctx, b->pred[0], b->pred[1], N * c->O);
  expect_close("hT", ctx, b->hT[0], b->hT[1], S);
  expect_close("cT", ctx, b->cT[0], b->cT[1], S);
  expect_close("dx", ctx, b->dx[0], b->dx[1], N * c->I);
  expect_close("dh0", ctx, b->dh0[0], b->dh0[1], S);
  expect_close("dc0", ctx, b->dc0[0], b->dc0[1], S);
  expect_close_flat("grad", ctx, s, b->g[0], b->g[1]);
  for (int o = 0; el != NULL && o < c->O; o++) {
    float const l0 = (float)el->cols[0][o], l1 = (float)el->cols[1][o];
    expect_close("column loss sum", ctx, &l0, &l1, 1);
    CHECK(el->cols[0][c->O + o] == el->cols[1][c->O + o], "%s: column %d counts %g (cuda), %g", ctx,
          o, el->cols[0][c->O + o], el->cols[1][c->O + o]);
  }
  return 0;
out:
  return -1;
}

/* STEPS optimizer steps. Each step: both engines run forward + backward from
 * their own parameters (compared in run_window); then the CUDA engine is
 * given the CPU's gradient, so that the update itself is compared on equal
 * inputs. A free-running comparison could not be held to TOL: Adam's first
 * step moves an entry by lr * g / (|g| + eps), which amplifies the rounding
 * of a gradient entry near eps = 1e-8 by up to lr / (4 eps) (see FREE_TOL in
 * torch_oracle.py). */
static int run_steps(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, const ls_optim_t *opt,
                     const char *name, ls_shape_t const *s, int n_steps) {
  size_t const n = ls_engine_param_count(e[0]);
  for (int step = 0; step < n_steps; step++) {
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s step %d", name, step);
    /* The window of run_case (masked) already sits in the gradient buffers
     * for step 0; later steps run their own, unmasked then masked again, so
     * that padding rows must clear what the unmasked window left in dpred. */
    if (step > 0 && run_window(e, c, b, step % 2 == 0, NULL, NULL, ctx, s) != 0) return -1;
    MUST(ls_engine_write_grads(e[0], b->g[1], n));
    float norm[2] = {0, 0};
    int64_t steps[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
      MUST(ls_engine_optimizer_step(e[k], opt, 1.0f, &norm[k]));
      MUST(ls_engine_read_params(e[k], b->p[k], n));
      MUST(ls_engine_read_optimizer(e[k], b->m[k], b->v[k], n, &steps[k]));
      MUST(ls_engine_read_grads(e[k], b->g[k], n));
    }
    expect_close("grad norm", ctx, &norm[0], &norm[1], 1);
    CHECK(steps[0] == step + 1 && steps[1] == step + 1, "%s: step counts %lld, %lld", ctx,
          (long long)steps[0], (long long)steps[1]);
    expect_close_flat("param", ctx, s, b->p[0], b->p[1]);
    expect_close_flat("adam m", ctx, s, b->m[0], b->m[1]);
    expect_close_flat("adam v", ctx, s, b->v[0], b->v[1]);
    for (size_t i = 0; i < n; i++)
      if (b->g[0][i] != 0.0f) {
        CHECK(0, "%s: gradient %zu not zeroed by the optimizer (%g)", ctx, i, (double)b->g[0][i]);
        break;
      }
  }
  return 0;
out:
  return -1;
}

/* A gradient holding an Inf, then a NaN, with skip_nonfinite and the norm
 * read later with the step's figures (as the trainer does): each engine
 * decides on its own device that the update is skipped, so parameters,
 * moments and the step count stay bit for bit, the gradient is zeroed and
 * the figures' norm is not finite; then a finite update counts as the next
 * one on both (a device that counted a skipped update would take another
 * bias correction and differ). */
static int run_skip(ls_engine_t *const e[2], bufs_t *b, const ls_optim_t *opt, const char *name,
                    ls_shape_t const *s, int64_t taken) {
  size_t const n = ls_engine_param_count(e[0]);
  ls_optim_t skip = *opt;
  skip.skip_nonfinite = 1;
  float const bad[2] = {INFINITY, NAN};
  for (int round = 0; round < 3; round++) {
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s skip round %d", name, round);
    for (size_t i = 0; i < n; i++)
      b->g[1][i] = 1e-3f * (float)((i * 7) % 13) - 6e-3f;
    if (round < 2) b->g[1][n / 3] = bad[round];
    for (int k = 0; k < 2; k++) {
      MUST(ls_engine_read_params(e[k], b->p[k], n));
      MUST(ls_engine_write_grads(e[k], b->g[1], n));
      MUST(ls_engine_optimizer_step(e[k], &skip, 0.5f, NULL));
      MUST(ls_engine_fetch_figures(e[k]));
      float norm = 0.0f;
      MUST(ls_engine_read_figures(e[k], NULL, &norm));
      int64_t steps = -1;
      MUST(ls_engine_read_optimizer(e[k], b->m[k], b->v[k], n, &steps));
      MUST(ls_engine_read_grads(e[k], b->g[0], n));
      int zeroed = 1;
      for (size_t i = 0; i < n; i++)
        zeroed &= b->g[0][i] == 0.0f;
      CHECK(zeroed, "%s: engine %d did not zero the gradient", ctx, k);
      CHECK(steps == taken + (round == 2), "%s: engine %d counts %lld updates, expected %lld", ctx,
            k, (long long)steps, (long long)(taken + (round == 2)));
      CHECK(round == 2 ? isfinite(norm) : !isfinite(norm), "%s: engine %d's norm %g", ctx, k,
            (double)norm);
      if (round == 2) continue;
      MUST(ls_engine_read_params(e[k], b->g[0], n));
      CHECK(!memcmp(b->g[0], b->p[k], n * sizeof(float)), "%s: engine %d changed a parameter", ctx,
            k);
    }
    if (round == 2) {
      for (int k = 0; k < 2; k++)
        MUST(ls_engine_read_params(e[k], b->p[k], n));
      expect_close_flat("param after a skipped update", ctx, s, b->p[0], b->p[1]);
      expect_close_flat("adam m after a skipped update", ctx, s, b->m[0], b->m[1]);
    }
  }
  return 0;
out:
  return -1;
}

/* The window as one sequence (ls_engine_forward_seq; O == I only): seq
 * [T+1, B, I] holds x in rows 0..T-1 and one more row; the targets are
 * rows 1..T of the engine's copy (the backend's seq_targets). Runs after
 * an update, which left the gradients zeroed. */
static int run_seq(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, const char *name,
                   ls_shape_t const *s) {
  size_t const NI = (size_t)c->T * c->B * c->I, BI = (size_t)c->B * c->I;
  float *const seq = malloc((NI + BI) * sizeof(float));
  char ctx[160];
  snprintf(ctx, sizeof ctx, "%s forward_seq", name);
  if (seq == NULL) {
    CHECK(0, "%s: no memory for the sequence", ctx);
    return -1;
  }
  uint32_t seed = c->seed * 40503u + 7u;
  memcpy(seq, b->x, NI * sizeof(float));
  fill(seq + NI, BI, &seed, 1.0f);
  int const rc = run_window(e, c, b, 1, seq, NULL, ctx, s);
  free(seq);
  return rc;
}

/* Column o's loss: squared error (0) or a pinball level, mixed for O >= 2. */
static float elem_tau(int o) {
  static const float taus[4] = {0.1f, 0.0f, 0.9f, 0.5f};
  return taus[o % 4];
}

/* A window's mask per target [T, B, O] from the case's seed: about 25%
 * unknown, 10% weights of 0.5, entry 0 known; every third row's last step
 * unknown (T > 1). Lengths: T for even rows, each odd row's last step with
 * a known target + 1. */
static void elem_mask(const tcase_t *c, elem_t *el) {
  uint32_t seed = c->seed * 97u + 5u;
  size_t const O = (size_t)c->O;
  for (int t = 0; t < c->T; t++)
    for (int r = 0; r < c->B; r++)
      for (size_t o = 0; o < O; o++) {
        uint32_t const u = xorshift(&seed) % 20;
        float m = u < 5 ? 0.0f : u < 7 ? 0.5f : 1.0f;
        if (c->T > 1 && r % 3 == 1 && t == c->T - 1) m = 0.0f;
        el->mask[((size_t)t * c->B + r) * O + o] = m;
      }
  el->mask[0] = 1.0f;
  for (int r = 0; r < c->B; r++) {
    int last = 0;
    for (int t = 0; t < c->T; t++)
      for (size_t o = 0; o < O; o++)
        if (el->mask[((size_t)t * c->B + r) * O + o] != 0.0f) last = t + 1;
    el->lengths[r] = r % 2 == 0 ? c->T : last;
  }
}

/* Each engine's targets: the case's, NaN where unknown, and every fifth
 * known one that engine's own prediction (a tie: an error of exactly 0, a 0
 * gradient). A known target within 1e-3 of the CPU's prediction is moved
 * to 1e-3 from it (in target_pad too, for the row mask's window): near the
 * pinball loss's kink the side of an error is the engines' rounding, and
 * the gradients 1 / count apart. */
static int elem_targets(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, elem_t *el) {
  size_t const NO = (size_t)c->T * c->B * c->O;
  for (int k = 0; k < 2; k++) {
    MUST(ls_engine_set_state(e[k], c->B, b->h0, b->c0));
    MUST(ls_engine_forward_elem(e[k], c->T, c->B, b->x, NULL, NULL, el->lengths, NULL, NULL));
    MUST(ls_engine_read_outputs(e[k], NULL, b->pred[k], NULL, NULL));
  }
  for (size_t i = 0; i < NO; i++) {
    float t = b->target[i];
    if (fabsf(t - b->pred[1][i]) < 1e-3f) t = b->pred[1][i] + (t < b->pred[1][i] ? -1e-3f : 1e-3f);
    for (int k = 0; k < 2; k++)
      el->target[k][i] = el->mask[i] == 0.0f ? NAN : i % 5 == 2 ? b->pred[k][i] : t;
    if (!isnan(b->target_pad[i])) b->target_pad[i] = t; /* the row mask's window, after */
  }
  return 0;
out:
  return -1;
}

/* The losses per column on both engines (elem_tau): a window of
 * ls_engine_forward_elem three times over (run directly, recorded, then
 * replayed as graphs), then the case's row mask with the same losses (their
 * kernel with a mask per row); squared error again after. */
static int run_elem(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, const char *name,
                    ls_shape_t const *s) {
  size_t const NO = (size_t)c->T * c->B * c->O;
  elem_t el = {
      {malloc(NO * sizeof(float)), malloc(NO * sizeof(float))},
      malloc(NO * sizeof(float)),
      malloc((size_t)c->B * sizeof(int)),
      {malloc(2 * (size_t)c->O * sizeof(double)), malloc(2 * (size_t)c->O * sizeof(double))}};
  ls_loss_col_t *const cols = malloc((size_t)c->O * sizeof *cols);
  char ctx[160];
  int rc = -1;
  if (!el.target[0] || !el.target[1] || !el.mask || !el.lengths || !el.cols[0] || !el.cols[1] ||
      !cols) {
    CHECK(0, "%s: no memory for the losses per column", name);
    goto out;
  }
  for (int o = 0; o < c->O; o++)
    cols[o] = (ls_loss_col_t){elem_tau(o) > 0.0f ? LS_LOSS_PINBALL : LS_LOSS_MSE, elem_tau(o)};
  for (int k = 0; k < 2; k++)
    MUST(ls_engine_set_loss(e[k], cols, c->O));
  elem_mask(c, &el);
  if (elem_targets(e, c, b, &el) != 0) goto out;
  for (int round = 0; round < 3; round++) {
    snprintf(ctx, sizeof ctx, "%s losses per column, round %d", name, round);
    for (int k = 0; k < 2; k++)
      MUST(ls_engine_zero_grads(e[k]));
    if (run_window(e, c, b, 1, NULL, &el, ctx, s) != 0) goto out;
  }
  snprintf(ctx, sizeof ctx, "%s losses per column, a row mask", name);
  for (int k = 0; k < 2; k++)
    MUST(ls_engine_zero_grads(e[k]));
  if (run_window(e, c, b, 1, NULL, NULL, ctx, s) != 0) goto out;
  for (int k = 0; k < 2; k++) {
    MUST(ls_engine_set_loss(e[k], NULL, 0));
    MUST(ls_engine_zero_grads(e[k]));
  }
  rc = 0;
out:
  free(el.target[0]), free(el.target[1]), free(el.mask), free(el.lengths);
  free(el.cols[0]), free(el.cols[1]), free(cols);
  return rc;
}

/* Gather/scatter on the CUDA engine copy rows exactly: scattered rows are
 * bit-identical to the final states read back, untouched rows keep their
 * bits, a gathered initial state is bit-identical to the same state set by
 * hand, and a grown table keeps every row. The window is padded at the end
 * of most rows (one row all padding): a row carries on its state after its
 * last valid step, which the scatter (row by row) and the read-back (its
 * own copies) must both take, and which the CPU engine's must match. */
static int run_state(ls_engine_t *const e[2], const tcase_t *c, bufs_t *b, const char *ctx) {
  ls_engine_t *const g = e[0];
  int const B = c->B;
  size_t const row = (size_t)c->L * c->H, S = (size_t)B + 3;
  ls_state_table_t *tab = NULL;
  float *th = malloc(S * row * sizeof(float)), *tc = malloc(S * row * sizeof(float));
  float *rh = malloc(2 * S * row * sizeof(float)), *rc = malloc(2 * S * row * sizeof(float));
  int64_t *from = malloc((size_t)B * sizeof(int64_t)), *to = malloc((size_t)B * sizeof(int64_t));
  float *mask = malloc((size_t)c->T * B * sizeof(float));
  int rc_ = -1;
  if (!th || !tc || !rh || !rc || !from || !to || !mask) {
    CHECK(0, "%s: no memory for the state check", ctx);
    goto out;
  }
  uint32_t seed = c->seed * 7u + 3u;
  fill(th, S * row, &seed, 1.0f);
  fill(tc, S * row, &seed, 1.0f);
  /* from: rows reversed, every third row a zero state; to: rotated by 3,
   * every fifth row skipped; distinct by construction. */
  for (int i = 0; i < B; i++) {
    from[i] = i % 3 == 1 ? -1 : (int64_t)(S - 1 - (size_t)i);
    to[i] = i % 5 == 2 ? -1 : (int64_t)(((size_t)i + 3) % S);
    int const len = i % 7 == 4 ? 0 : c->T - i % 3 > 0 ? c->T - i % 3 : 1; /* valid steps */
    for (int t = 0; t < c->T; t++)
      mask[(size_t)t * B + i] = t < len ? 1.0f : 0.0f;
  }
  MUST(ls_state_table_new(g, S, &tab));
  MUST(ls_state_table_write(tab, 0, S, th, tc));
  MUST(ls_engine_gather_state(g, tab, B, from));
  MUST(ls_engine_forward(g, c->T, B, b->x, b->target, mask, NULL, NULL));
  MUST(ls_engine_read_outputs(g, NULL, b->pred[0], b->hT[0], b->cT[0]));
  MUST(ls_engine_scatter_state(g, tab, B, to));
  MUST(ls_state_table_grow(tab, 2 * S));
  MUST(ls_state_table_read(tab, 0, 2 * S, rh, rc));
  size_t bad = 0;
  for (size_t s = 0; s < 2 * S; s++) {
    int bs = -1; /* batch row scattered into slot s */
    for (int i = 0; i < B && bs < 0; i++)
      if (to[i] == (int64_t)s) bs = i;
    for (size_t l = 0; l < (size_t)c->L; l++)
      for (size_t j = 0; j < (size_t)c->H; j++) {
        size_t const at = s * row + l * c->H + j;
        float wh = 0.0f, wc = 0.0f; /* grown rows are zero */
        if (bs >= 0) {
          wh = b->hT[0][(l * B + bs) * c->H + j], wc = b->cT[0][(l * B + bs) * c->H + j];
        } else if (s < S) {
          wh = th[at], wc = tc[at];
        }
        bad += memcmp(&rh[at], &wh, sizeof wh) != 0 || memcmp(&rc[at], &wc, sizeof wc) != 0;
      }
  }
  CHECK(bad == 0, "%s: %zu table entries are not bit-identical after scatter + grow", ctx, bad);
  /* The gathered state by hand, then the same forward: identical bits. */
  for (int i = 0; i < B; i++)
    for (size_t l = 0; l < (size_t)c->L; l++) {
      float *const dh = b->h0 + (l * B + i) * c->H, *const dc = b->c0 + (l * B + i) * c->H;
      if (from[i] < 0) {
        memset(dh, 0, c->H * sizeof(float));
        memset(dc, 0, c->H * sizeof(float));
      } else {
        memcpy(dh, th + (size_t)from[i] * row + l * c->H, c->H * sizeof(float));
        memcpy(dc, tc + (size_t)from[i] * row + l * c->H, c->H * sizeof(float));
      }
    }
  MUST(ls_engine_set_state(g, B, b->h0, b->c0));
  MUST(ls_engine_forward(g, c->T, B, b->x, b->target, mask, NULL, NULL));
  MUST(ls_engine_read_outputs(g, NULL, b->pred[1], b->hT[1], b->cT[1]));
  size_t const SB = row * B, NO = (size_t)c->T * B * c->O;
  CHECK(!memcmp(b->hT[0], b->hT[1], SB * sizeof(float)) &&
            !memcmp(b->cT[0], b->cT[1], SB * sizeof(float)) &&
            !memcmp(b->pred[0], b->pred[1], NO * sizeof(float)),
        "%s: a forward from gathered states is not bit-identical to one from the same states set "
        "by hand",
        ctx);
  /* The CPU engine's final states of the padded window. */
  MUST(ls_engine_set_state(e[1], B, b->h0, b->c0));
  MUST(ls_engine_forward(e[1], c->T, B, b->x, b->target, mask, NULL, NULL));
  MUST(ls_engine_read_outputs(e[1], NULL, NULL, b->hT[1], b->cT[1]));
  expect_close("hT of a padded window", ctx, b->hT[0], b->hT[1], SB);
  expect_close("cT of a padded window", ctx, b->cT[0], b->cT[1], SB);
  rc_ = 0;
out:
  ls_state_table_destroy(tab);
  free(th), free(tc), free(rh), free(rc), free(from), free(to), free(mask);
  return rc_;
}

/* The window of a case, from its seed: inputs, targets, initial states,
 * and a mask with about 20% padding (never all padding); target_pad is the
 * target with NaN in the padded rows. */
static void fill_inputs(const tcase_t *c, bufs_t *b) {
  uint32_t seed = c->seed * 2654435761u + 1u;
  size_t const N = (size_t)c->T * c->B, S = (size_t)c->L * c->B * c->H;
  fill(b->x, N * c->I, &seed, 1.0f);
  fill(b->target, N * c->O, &seed, 1.0f);
  fill(b->h0, S, &seed, 0.5f);
  fill(b->c0, S, &seed, 0.5f);
  for (size_t r = 0; r < N; r++) {
    b->mask[r] = r == 0 || xorshift(&seed) % 5 != 0;
    for (int o = 0; o < c->O; o++)
      b->target_pad[r * c->O + o] = b->mask[r] != 0.0f ? b->target[r * c->O + o] : NAN;
  }
}

static void run_case(const tcase_t *c, int index) {
  ls_shape_t const s = {c->I, c->H, c->L, c->O};
  ls_engine_t *e[2] = {NULL, NULL};
  bufs_t b;
  char name[128];
  size_t n = 0;
  if (!case_begin(c, "case", index, &b, name, sizeof name, &n)) return;
  for (int k = 0; k < 2; k++) {
    ls_engine_conf_t conf;
    case_conf(c, k == 0 ? LS_DEVICE_CUDA : LS_DEVICE_CPU, LS_PRECISION_FP32, &conf);
    MUST(ls_engine_new(&conf, &e[k]));
    MUST(ls_engine_init_params(e[k], c->seed));
    MUST(ls_engine_read_params(e[k], b.p[k], n));
  }
  CHECK(!memcmp(b.p[0], b.p[1], n * sizeof(float)), "%s: initial parameters differ", name);

  fill_inputs(c, &b);
  if (run_window(e, c, &b, 1, NULL, NULL, name, &s) != 0) goto out;

  /* Adam with L2 and clipping on even cases, AdamW without clipping on odd
   * ones; a tight clip bound on every third so that clipping engages. */
  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.lr = c->lr;
  opt.weight_decay = 1e-2f;
  opt.decoupled = index % 2;
  opt.clip_norm = index % 2 ? 0.0f : index % 3 == 0 ? 0.05f : 1.0f;
  if (run_steps(e, c, &b, &opt, name, &s, STEPS) != 0) goto out;
  if (run_skip(e, &b, &opt, name, &s, STEPS) != 0) goto out;
  if (c->O == c->I && run_seq(e, c, &b, name, &s) != 0) goto out;
  if (run_elem(e, c, &b, name, &s) != 0) goto out;
  (void)run_state(e, c, &b, name);
out:
  ls_engine_destroy(e[0]);
  ls_engine_destroy(e[1]);
  bufs_free(&b);
}

/* ------------------------------------------------------------------------ */
/* TF32                                                                      */

/* tf32 cases: two of the fixed cases (deep and narrow, long window), one
 * whose GEMMs are large enough for tensor-core kernels (H = 256, T*B =
 * 2048 rows), and the large shape. `effect` marks the cases the
 * TF32_EFFECT check applies to. */
typedef struct tf32_case_s {
  tcase_t c;
  int effect;
} tf32_case_t;

static const tf32_case_t tf32_cases[] = {
    {{3, 20, 3, 2, 7, 5, 11, 1e-3f}, 0},
    {{6, 33, 1, 3, 25, 3, 123, 1e-3f}, 0},
    {{16, 256, 2, 16, 32, 64, 77, 1e-3f}, 1},
    {{32, 512, 2, 32, 16, 4096, 2024, 1e-3f}, 1},
};

/* 1 if the device's tensor cores can run TF32 and the environment lets
 * cuBLAS use them; *why says why not. */
static int tf32_possible(const char **why) {
  struct cudaDeviceProp prop;
  const char *const env = getenv("NVIDIA_TF32_OVERRIDE");
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    *why = "cannot read the device's properties";
    return 0;
  }
  if (prop.major < 8) {
    *why = "compute capability below 8.0: no TF32 tensor cores (tf32 computes as fp32)";
    return 0;
  }
  if (env != NULL && !strcmp(env, "0")) {
    *why = "NVIDIA_TF32_OVERRIDE=0 turns TF32 off";
    return 0;
  }
  *why = "";
  return 1;
}

/* Three engines on one case: CUDA tf32, CUDA fp32 and the CPU (fp32), the
 * same parameters and window. The CUDA fp32 engine against the CPU under
 * TOL, then the tf32 engine against the CPU under TF32_TOL, followed by one
 * update from the CPU's gradient (run_steps). */
static void run_tf32_case(const tf32_case_t *tc, int index, int possible) {
  const tcase_t *const c = &tc->c;
  ls_shape_t const s = {c->I, c->H, c->L, c->O};
  ls_engine_t *tf = NULL, *fp = NULL, *cpu = NULL;
  bufs_t b;
  char name[128], ctx[160];
  size_t n = 0;
  if (!case_begin(c, "tf32 case", index, &b, name, sizeof name, &n)) return;
  ls_engine_t **const made[3] = {&tf, &fp, &cpu};
  for (int k = 0; k < 3; k++) {
    ls_engine_conf_t conf;
    case_conf(c, k < 2 ? LS_DEVICE_CUDA : LS_DEVICE_CPU,
              k == 0 ? LS_PRECISION_TF32 : LS_PRECISION_FP32, &conf);
    MUST(ls_engine_new(&conf, made[k]));
    CHECK(ls_engine_get_conf(*made[k])->precision == conf.precision,
          "%s: engine %d reports another precision", name, k);
    MUST(ls_engine_init_params(*made[k], c->seed));
  }
  fill_inputs(c, &b);

  ls_engine_t *const fp_pair[2] = {fp, cpu}, *const tf_pair[2] = {tf, cpu};
  snprintf(ctx, sizeof ctx, "%s, cuda fp32", name);
  bound = TOL, worst_now = &worst, case_worst = 0.0;
  if (run_window(fp_pair, c, &b, 1, NULL, NULL, ctx, &s) != 0) goto out;
  double const fp_err = case_worst;
  MUST(ls_engine_zero_grads(cpu)); /* backward accumulates: the CPU runs the window again */
  snprintf(ctx, sizeof ctx, "%s, cuda tf32", name);
  bound = TF32_TOL, worst_now = &worst_tf32, case_worst = 0.0;
  if (run_window(tf_pair, c, &b, 1, NULL, NULL, ctx, &s) != 0) goto out;
  double const tf_err = case_worst;
  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.lr = c->lr;
  if (run_steps(tf_pair, c, &b, &opt, ctx, &s, 1) != 0) goto out;
  printf("%s: max difference from the CPU: tf32 %.3g, fp32 %.3g\n", name, tf_err, fp_err);
  if (tc->effect && possible)
    CHECK(tf_err > TF32_EFFECT * fp_err,
          "%s: tf32 differs from the CPU by %.3g, not more than %g times fp32's %.3g: TF32 does "
          "not seem to be in effect",
          name, tf_err, TF32_EFFECT, fp_err);
out:
  bound = TOL, worst_now = &worst;
  ls_engine_destroy(tf);
  ls_engine_destroy(fp);
  ls_engine_destroy(cpu);
  bufs_free(&b);
}

/* ------------------------------------------------------------------------ */

/* 1 if a CUDA device is present, 0 if there is none (or no driver at all:
 * it reads as an insufficient one of version 0), -1 if CUDA cannot use
 * what is there (it prints why: a driver too old, a broken install). */
static int have_gpu(void) {
  int count = 0, driver = 0;
  cudaError_t const err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess) return count > 0;
  if (err == cudaErrorNoDevice) return 0;
  if (err == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
      driver == 0)
    return 0;
  printf("CUDA is unusable: cudaGetDeviceCount failed: %s (%s); driver version %d, runtime %d\n",
         cudaGetErrorString(err), cudaGetErrorName(err), driver, CUDART_VERSION);
  return -1;
}

/* Without a GPU a CUDA engine must fail cleanly, saying why. */
static void check_no_device(void) {
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.device = LS_DEVICE_CUDA;
  ls_engine_t *e = NULL;
  ls_err_t const err = ls_engine_new(&conf, &e);
  CHECK(err == LS_ERR_UNSUPPORTED && e == NULL && strstr(ls_last_error(), "no CUDA device"),
        "a CUDA engine without a GPU: got %s (%s), want LS_ERR_UNSUPPORTED with \"no CUDA device\"",
        ls_err2str(err), ls_last_error());
  ls_engine_destroy(e);
  /* tf32 is accepted on CUDA: the missing GPU is what it reports. */
  conf.precision = LS_PRECISION_TF32;
  e = NULL;
  ls_err_t const err2 = ls_engine_new(&conf, &e);
  CHECK(err2 == LS_ERR_UNSUPPORTED && e == NULL && strstr(ls_last_error(), "no CUDA device"),
        "a tf32 CUDA engine without a GPU: got %s (%s), want LS_ERR_UNSUPPORTED with \"no CUDA "
        "device\"",
        ls_err2str(err2), ls_last_error());
  ls_engine_destroy(e);
}

int main(int argc, char **argv) {
  int const gpu = have_gpu();
  if (argc > 1 && !strcmp(argv[1], "--probe")) {
    if (gpu >= 0) printf("%s\n", gpu ? "CUDA device present" : "no CUDA device");
    return gpu > 0 ? 0 : gpu == 0 ? SKIP : 1;
  }
  small_only = argc > 1 && !strcmp(argv[1], "--small");
  if (argc > 1 && !small_only && strcmp(argv[1], "--probe")) {
    fprintf(stderr, "usage: test_cuda_engine [--probe | --small]\n");
    return 2;
  }
  if (gpu < 0) return 1;
  if (!gpu) {
    check_no_device();
    if (failures) return 1;
    printf("no GPU: CUDA engine tests skipped\n");
    return SKIP;
  }
  int index = 0;
  for (size_t i = 0; i < sizeof fixed_cases / sizeof fixed_cases[0]; i++)
    if (!too_big(&fixed_cases[i])) run_case(&fixed_cases[i], index++);
  uint32_t rs = RANDOM_SEED;
  for (int i = 0; i < RANDOM_CASES; i++) {
    tcase_t c;
    c.I = draw(&rs, 1, 9), c.H = draw(&rs, 1, 41), c.L = draw(&rs, 1, 4), c.O = draw(&rs, 1, 9);
    c.T = draw(&rs, 1, 31), c.B = draw(&rs, 1, 21);
    c.lr = xorshift(&rs) % 2 ? 1e-3f : 3e-3f;
    c.seed = xorshift(&rs);
    run_case(&c, index++);
  }
  const char *why = "";
  int const possible = tf32_possible(&why);
  if (!possible) printf("tf32: the effect check is off: %s\n", why);
  int n_tf32 = 0;
  for (int i = 0; i < (int)(sizeof tf32_cases / sizeof tf32_cases[0]); i++)
    if (!too_big(&tf32_cases[i].c)) run_tf32_case(&tf32_cases[i], i, possible), n_tf32++;
  printf("%d fp32 cases, worst relative difference %.3g (bound %g); %d tf32 cases, worst %.3g "
         "(bound %g): %s\n",
         index, worst, TOL, n_tf32, worst_tf32, TF32_TOL, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
