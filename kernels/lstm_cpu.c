/*
 * The CPU backend: the primitives of kernels/backend.h in C (+ OpenBLAS).
 *
 * An LSTM layer runs on the kernels of recur_cpu.h: the recurrence (the
 * weights packed once per call, a register-blocked product per step with
 * the cell math on each tile) split across threads by rows of the batch,
 * then the weight and input gradients over all T*B rows, split by rows of
 * their outputs. The head's small GEMMs go through cblas (row-major), one
 * thread each, split the same way. Threads come from pool_cpu.h.
 */
#include <cblas.h> /* OpenBLAS: cblas_sgemm */
#include <math.h>
#include <omp.h> /* the default thread count; OpenBLAS threads (run) */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "loss_elem.h"
#include "pool_cpu.h"
#include "recur_cpu.h"

typedef struct cpu_ctx_s {
  int threads;
  pool_t *pool;              /* threads - 1 workers; every split runs on it */
  const recur_kernels_t *rk; /* the CPU's kernels (recur_cpu.h) */
  double *colsum;            /* (O) the head's bias-gradient sums, in double */
  double *partial;           /* (NORM_PARTS) the gradient's sums of squares by part */
  double *db;                /* (ceil(max_batch / RECUR_DB_ROWS), 4H) bias-gradient sums */
  float *wp;                 /* (recur_pack_floats) packed weights of one layer */
  float *bias;               /* (4 P U) packed biases */
  float *tn;                 /* (threads, recur_tn_floats) gemm_tn's buffers */
  size_t tn_floats;          /* per thread */
  unsigned char fetched[64]; /* the bytes of the last fetch_start */
} cpu_ctx_t;

/* ------------------------------------------------------------------------ */
/* Context and memory                                                        */

/* The CPU is one device. */
static int device_count(void) {
  return 1;
}

static void ctx_free(void *ctx) {
  cpu_ctx_t *const c = ctx;
  if (c != NULL) {
    pool_free(c->pool);
    free(c->colsum);
    free(c->partial);
    free(c->db);
    free(c->wp);
    free(c->bias);
    free(c->tn);
  }
  free(c);
}

/* n floats, 64-byte aligned (the kernels' packed loads are). */
static float *alloc_floats(size_t n) {
  return aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
}

/* Parts of the gradient whose sums of squares are added up in order: the
 * norm's bits depend on the parameter count alone, not on the threads. */
#define NORM_PARTS 64

/* The kernels' buffers for a model of In inputs and H hidden units and
 * batches of up to B rows. */
static ls_err_t ctx_buffers(cpu_ctx_t *c, int In, int H, int O, int B) {
  size_t const U = (size_t)c->rk->width, panels = ((size_t)H + U - 1) / U;
  size_t const wp = recur_pack_floats(c->rk, In > H ? In : H, H);
  c->tn_floats = recur_tn_floats(c->rk, 4 * H, In > H ? In : H);
  c->colsum = malloc((size_t)O * sizeof(double));
  c->partial = malloc(NORM_PARTS * sizeof(double));
  c->db =
      malloc((size_t)((B + RECUR_DB_ROWS - 1) / RECUR_DB_ROWS) * 4 * (size_t)H * sizeof(double));
  c->wp = alloc_floats(wp);
  c->bias = alloc_floats(panels * 4 * U);
  c->tn = alloc_floats((size_t)c->threads * c->tn_floats);
  LS_RETURN_IF(!c->colsum || !c->partial || !c->db || !c->wp || !c->bias || !c->tn, LS_ERR_NOMEM,
               "no memory for the CPU backend's buffers (%zu floats of weights)", wp);
  return LS_OK;
}

/* The head's GEMMs run on OpenBLAS, one thread each (OpenBLAS' own threads
 * would synchronise many times inside every call). Its OpenMP build runs a
 * GEMM on omp_get_max_threads() threads of the calling thread: 1 on the
 * pool's threads, and on the caller's while it runs the pool (run). */
static void one_blas_thread(void) {
  omp_set_num_threads(1);
}

static int work_threads(const cpu_ctx_t *c, double macs, int most);

/* fn on as many threads as `macs` multiply-adds are worth, at most `most`. */
static void run(cpu_ctx_t *c, double macs, int most, void (*fn)(void *, int, int), void *arg) {
  int const keep = omp_get_max_threads();
  if (keep != 1) omp_set_num_threads(1);
  pool_run(c->pool, work_threads(c, macs, most), macs, fn, arg);
  if (keep != 1) omp_set_num_threads(keep);
}

/* LSTREAM_CPU_ADAPT: 1 (the default) the threads a step runs on follow a
 * competing load (pool_cpu.c), 0 all of them always, alternate (tests). */
static ls_err_t adapt_from_env(pool_t *pool) {
  const char *const v = getenv("LSTREAM_CPU_ADAPT");
  pool_adapt_t mode = POOL_ADAPT_ON;
  if (v != NULL && *v != '\0') {
    LS_RETURN_IF(strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "alternate"), LS_ERR_INVALID_ARG,
                 "LSTREAM_CPU_ADAPT='%s': 1 (adapt the threads to a competing load, the "
                 "default), 0 (all threads always) or alternate (tests)",
                 v);
    mode = !strcmp(v, "0")   ? POOL_ADAPT_OFF
           : !strcmp(v, "1") ? POOL_ADAPT_ON
                             : POOL_ADAPT_ALTERNATE;
  }
  pool_adapt(pool, mode);
  return LS_OK;
}

static ls_err_t ctx_new(ls_engine_conf_t *conf, void **out) {
  cpu_ctx_t *c = calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the CPU backend");
  /* OMP_NUM_THREADS where set, else the cores this process may run on. */
  int const cores = omp_get_max_threads();
  c->threads = conf->threads > 0 ? conf->threads : (cores > 0 ? cores : 1);
  conf->threads = c->threads;
  ls_err_t err = recur_pick(getenv("LSTREAM_CPU_KERNELS"), &c->rk);
  if (err == LS_OK)
    err = ctx_buffers(c, conf->shape.input_size, conf->shape.hidden_size, conf->shape.output_size,
                      conf->max_batch);
  if (err == LS_OK) err = pool_new(c->threads, one_blas_thread, &c->pool);
  if (err == LS_OK) err = adapt_from_env(c->pool);
  if (err != LS_OK) {
    ctx_free(c);
    return err;
  }
  *out = c;
  return LS_OK;
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

static void mem_free(void *ctx, void *ptr) {
  free(ptr);
}

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
/* Threads                                                                   */

/* Fewest batch rows a thread takes in the batch-split recurrence: below
 * this a thread's per-step GEMM is too short to pay for its share. */
#define RECURRENCE_MIN_ROWS 4

/* Fewest multiply-adds worth a thread of their own (~20-40 us): below it,
 * waking a second thread (and waiting for it when the machine is busy)
 * costs more than it saves. Live steps of a few series stay on one thread. */
#define THREAD_MIN_MACS (2.0 * 1024 * 1024)

/* Threads for `macs` multiply-adds, at most `most` and c->threads. */
static int work_threads(const cpu_ctx_t *c, double macs, int most) {
  double const by_work = macs / THREAD_MIN_MACS;
  int n = by_work < (double)c->threads ? (int)by_work : c->threads;
  n = n < most ? n : most;
  return n < 1 ? 1 : n;
}

/* Part i of n of [0, len), cut at multiples of `align`: [*lo, *hi). */
static void split(int len, int i, int n, int align, int *lo, int *hi) {
  long const units = ((long)len + align - 1) / align;
  *lo = (int)(units * i / n * align);
  *hi = (int)(units * (i + 1) / n * align);
  *lo = *lo < len ? *lo : len;
  *hi = *hi < len ? *hi : len;
}

/* ------------------------------------------------------------------------ */
/* The head's GEMMs (OpenBLAS)                                               */

/* C [M, N] = op(A) @ op(B) + beta C, row-major, one thread's part: rows
 * of C, or columns with `cols`. */
typedef struct gemm_s {
  CBLAS_TRANSPOSE ta, tb;
  int M, N, K, lda, ldb, ldc, cols;
  const float *A, *B;
  float beta;
  float *C;
} gemm_t;

/* Columns of C per call of a split by columns: OpenBLAS computes a column
 * with other kernels at the edge of a call than inside it, so each call
 * has the same columns whatever the thread count (the same bits). */
#define GEMM_COLS 16

static void gemm_part(const gemm_t *g, int i, int n) {
  int lo, hi;
  split(g->cols ? g->N : g->M, i, n, g->cols ? GEMM_COLS : 16, &lo, &hi);
  if (hi <= lo || g->K == 0) return;
  if (g->cols)
    for (int c0 = lo; c0 < hi; c0 += GEMM_COLS) {
      int const nc = hi - c0 < GEMM_COLS ? hi - c0 : GEMM_COLS;
      cblas_sgemm(CblasRowMajor, g->ta, g->tb, g->M, nc, g->K, 1.0f, g->A, g->lda,
                  g->tb == CblasNoTrans ? g->B + c0 : g->B + (size_t)c0 * g->ldb, g->ldb, g->beta,
                  g->C + c0, g->ldc);
    }
  else
    cblas_sgemm(CblasRowMajor, g->ta, g->tb, hi - lo, g->N, g->K, 1.0f,
                g->ta == CblasNoTrans ? g->A + (size_t)lo * g->lda : g->A + lo, g->lda, g->B,
                g->ldb, g->beta, g->C + (size_t)lo * g->ldc, g->ldc);
}

/* Work split across the pool: up to two GEMMs, gemm[0]'s rows first set
 * to `bias` (NULL: not), and the column sums of sum_rows [sum_N, sum_n]
 * added to `sum` in double (bias gradients add N terms that may cancel),
 * columns split. */
typedef struct job_s {
  cpu_ctx_t *c;
  gemm_t gemm[2];
  int gemms;
  const float *bias;
  const float *sum_rows;
  int sum_N, sum_n;
  float *sum;
} job_t;

static void colsum_part(const job_t *j, int i, int n) {
  int lo, hi;
  split(j->sum_n, i, n, 16, &lo, &hi);
  double *restrict acc = j->c->colsum;
  for (int k = lo; k < hi; k++)
    acc[k] = 0.0;
  for (int r = 0; r < j->sum_N; r++) {
    const float *restrict src = j->sum_rows + (size_t)r * j->sum_n;
#pragma omp simd
    for (int k = lo; k < hi; k++)
      acc[k] += (double)src[k];
  }
  for (int k = lo; k < hi; k++)
    j->sum[k] = (float)((double)j->sum[k] + acc[k]);
}

static void job_part(void *arg, int i, int n) {
  const job_t *const j = arg;
  if (j->bias != NULL) {
    gemm_t const *const g = &j->gemm[0];
    int lo, hi;
    split(g->M, i, n, 16, &lo, &hi);
    for (int r = lo; r < hi; r++)
      memcpy(g->C + (size_t)r * g->ldc, j->bias, g->N * sizeof(float));
  }
  for (int k = 0; k < j->gemms; k++)
    gemm_part(&j->gemm[k], i, n);
  if (j->sum_rows != NULL) colsum_part(j, i, n);
}

/* Runs a job on as many threads as its `macs` multiply-adds are worth. */
static void run_job(job_t *j, double macs) {
  run(j->c, macs, j->c->threads, job_part, j);
}

/* ------------------------------------------------------------------------ */
/* LSTM layer                                                                */

/* The recurrence runs on the fused kernels (recur_cpu.h), split across
 * threads by rows of the batch: rows are independent through time, so each
 * thread runs all T steps of its rows with no synchronisation between
 * steps. */

typedef struct fwd_job_s {
  const recur_kernels_t *rk;
  recur_fwd_t a;
} fwd_job_t;

static void forward_part(void *arg, int i, int n) {
  const fwd_job_t *const j = arg;
  int b0, b1;
  split(j->a.B, i, n, RECUR_DB_ROWS, &b0, &b1);
  j->rk->forward_rows(&j->a, b0, b1);
}

/* The multiply-adds of a window's recurrence (its threads: by them, and
 * at most one per RECURRENCE_MIN_ROWS rows). */
static double recurrence_macs(int T, int B, int In, int H) {
  return (double)T * B * 4.0 * H * (In + H);
}

static ls_err_t lstm_forward(void *ctx, float *gates, float *hs, float *cs, float *tcs,
                             const float *x, const float *w_ih, const float *w_hh,
                             const float *b_ih, const float *b_hh, int T, int B, int In, int H) {
  cpu_ctx_t *const c = ctx;
  recur_pack_forward(c->rk, c->wp, c->bias, w_ih, w_hh, b_ih, b_hh, In, H);
  fwd_job_t j = {c->rk,
                 {.gates = gates,
                  .hs = hs,
                  .cs = cs,
                  .tcs = tcs,
                  .x = x,
                  .wp = c->wp,
                  .bias = c->bias,
                  .T = T,
                  .B = B,
                  .In = In,
                  .H = H}};
  run(c, recurrence_macs(T, B, In, H), B / RECURRENCE_MIN_ROWS, forward_part, &j);
  return LS_OK;
}

typedef struct bwd_job_s {
  cpu_ctx_t *c;
  recur_bwd_t a;
  /* The gradients over all T*B rows, after the recurrence. */
  float *dx, *dw_ih, *dw_hh;
  const float *x, *hs;
  int In;
} bwd_job_t;

static void backward_part(void *arg, int i, int n) {
  const bwd_job_t *const j = arg;
  int b0, b1;
  split(j->a.B, i, n, RECUR_DB_ROWS, &b0, &b1);
  if (b1 > b0) j->c->rk->backward_rows(&j->a, b0, b1, j->c->db);
}

/* dw_ih, dw_hh [4H, ..] += dgates^T [x | h_{t-1}], split by rows of 4H;
 * dx [N, In] = dgates @ w_ih (packed in c->wp), split by rows of N. */
static void grads_part(void *arg, int i, int n) {
  const bwd_job_t *const j = arg;
  const recur_kernels_t *const k = j->c->rk;
  int const H = j->a.H, G = 4 * H, N = j->a.T * j->a.B, In = j->In;
  float *const buf = j->c->tn + (size_t)i * j->c->tn_floats;
  int m0, m1, r0, r1;
  split(G, i, n, 16, &m0, &m1);
  split(N, i, n, 16, &r0, &r1);
  k->gemm_tn(j->dw_ih, In, j->a.dgates, G, j->x, In, m0, m1, In, N, buf);
  k->gemm_tn(j->dw_hh, H, j->a.dgates, G, j->hs, H, m0, m1, H, N, buf);
  k->gemm_nn(j->dx, In, j->a.dgates, G, j->c->wp, r0, r1, In, G);
}

static ls_err_t lstm_backward(void *ctx, float *dx, float *dh0, float *dc0, float *dw_ih,
                              float *dw_hh, float *db_ih, float *db_hh, float *dgates, float *dh,
                              const float *gates, const float *hs, const float *cs,
                              const float *tcs, const float *x, const float *w_ih,
                              const float *w_hh, int T, int B, int In, int H) {
  cpu_ctx_t *const c = ctx;
  int const N = T * B, G = 4 * H;
  bwd_job_t j = {.c = c, .dx = dx, .dw_ih = dw_ih, .dw_hh = dw_hh, .x = x, .hs = hs, .In = In};
  j.a = (recur_bwd_t){.dh0 = dh0,
                      .dc = dc0,
                      .dgates = dgates,
                      .dh = dh,
                      .gates = gates,
                      .cs = cs,
                      .tcs = tcs,
                      .wp = c->wp,
                      .T = T,
                      .B = B,
                      .H = H};
  memset(dc0, 0, (size_t)B * H * sizeof(float)); /* d/dc_T = 0; ends as d/dc_0 */
  recur_pack_cols(c->rk, c->wp, w_hh, G, H);
  run(c, recurrence_macs(T, B, 0, H), B / RECURRENCE_MIN_ROWS, backward_part, &j);
  /* The bias gradients: the sums of each RECUR_DB_ROWS rows (double),
   * added in the order of the rows, whichever thread ran them. */
  int const parts = (B + RECUR_DB_ROWS - 1) / RECUR_DB_ROWS;
  for (int g = 0; g < G; g++) {
    double sum = 0.0;
    for (int i = 0; i < parts; i++)
      sum += c->db[(size_t)i * G + g];
    db_ih[g] = (float)((double)db_ih[g] + sum);
    db_hh[g] = (float)((double)db_hh[g] + sum);
  }
  /* Then the weight gradients and dx, which may overwrite dh: it is spent. */
  recur_pack_cols(c->rk, c->wp, w_ih, G, In);
  run(c, (double)N * G * (2.0 * In + H), c->threads, grads_part, &j);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Head and loss                                                             */

static ls_err_t head_forward(void *ctx, float *pred, const float *y, const float *w, const float *b,
                             int N, int H, int O) {
  job_t j = {.c = ctx, .gemms = 1, .bias = b};
  j.gemm[0] = (gemm_t){CblasNoTrans, CblasTrans, N, O, H, H, H, O, 0, y, w, 1.0f, pred};
  run_job(&j, (double)N * O * H);
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

/* Each column's loss (loss_elem.h: squared error or pinball), a mask per
 * row (mask_cols 1) or per element (mask_cols O). */
static ls_err_t elem_loss(void *ctx, double *loss, float *dpred, const float *pred,
                          const float *target, const float *mask, int mask_cols, const float *tau,
                          float scale, int N, int O) {
  double sum = 0.0, valid = 0.0;
  for (int r = 0; r < N; r++) {
    const float *const p = pred + (size_t)r * O, *const y = target + (size_t)r * O;
    const float *const me = mask != NULL && mask_cols > 1 ? mask + (size_t)r * O : NULL;
    float const mr = mask != NULL && mask_cols == 1 ? mask[r] : 1.0f;
    float *const d = dpred ? dpred + (size_t)r * O : NULL;
    if (mr == 0.0f) { /* padding: exactly nothing, whatever pred holds */
      if (d) memset(d, 0, (size_t)O * sizeof(float));
      continue;
    }
    double row = 0.0, known = 0.0;
    for (int o = 0; o < O; o++) {
      float const m = me != NULL ? me[o] : 1.0f;
      if (m == 0.0f) { /* not known: exactly nothing */
        if (d) d[o] = 0.0f;
        continue;
      }
      float g;
      float const l = loss_elem(p[o] - y[o], tau[o], &g);
      row += (double)(m * l);
      known += m;
      if (d) d[o] = scale * (mr * m) * g;
    }
    sum += (double)mr * row;
    valid += (double)mr * known;
  }
  loss[0] = sum;
  loss[1] = valid;
  return LS_OK;
}

static ls_err_t loss_cols(void *ctx, double *col, const float *pred, const float *target,
                          const float *mask, int mask_cols, const float *tau, int N, int O) {
  memset(col, 0, (size_t)O * sizeof(double));
  for (int r = 0; r < N; r++)
    for (int o = 0; o < O; o++) {
      size_t const i = (size_t)r * O + o;
      float const m = mask == NULL ? 1.0f : mask_cols > 1 ? mask[i] : mask[r];
      if (m == 0.0f) continue;
      float g;
      col[o] += (double)(m * loss_elem(pred[i] - target[i], tau[o], &g));
    }
  return LS_OK;
}

static ls_err_t head_backward(void *ctx, float *dy, float *dw, float *db, const float *dpred,
                              const float *y, const float *w, int N, int H, int O) {
  /* dy [N, H] = dpred [N, O] @ w [O, H]; dw [O, H] += dpred^T @ y (split
   * by columns: O is small); db += colsum(dpred). */
  job_t j = {.c = ctx, .gemms = 2, .sum_rows = dpred, .sum_N = N, .sum_n = O, .sum = db};
  j.gemm[0] = (gemm_t){CblasNoTrans, CblasNoTrans, N, H, O, O, H, H, 0, dpred, w, 0.0f, dy};
  j.gemm[1] = (gemm_t){CblasTrans, CblasNoTrans, O, H, N, O, H, H, 1, dpred, y, 1.0f, dw};
  run_job(&j, 2.0 * N * O * H);
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */

/* Element-wise work of the optimizer, as multiply-adds for work_threads: a
 * step over n parameters is worth a second thread from about 64k on. */
#define OPTIM_MACS_PER_PARAM 32.0

typedef struct norm_job_s {
  cpu_ctx_t *c;
  const float *g;
  size_t n;
} norm_job_t;

/* Thread i of n: the sums of squares of its share of the NORM_PARTS parts. */
static void norm_part(void *arg, int i, int n) {
  const norm_job_t *const j = arg;
  for (int q = NORM_PARTS * i / n; q < NORM_PARTS * (i + 1) / n; q++) {
    size_t const lo = j->n * (size_t)q / NORM_PARTS, hi = j->n * (size_t)(q + 1) / NORM_PARTS;
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t k = lo; k < hi; k++)
      sum += (double)j->g[k] * (double)j->g[k];
    j->c->partial[q] = sum;
  }
}

static ls_err_t grad_norm_sq(void *ctx, double *norm_sq, const float *g, size_t n) {
  cpu_ctx_t *const c = ctx;
  norm_job_t j = {c, g, n};
  /* The parts' sums added in order: the same bits on any thread count. */
  run(c, (double)n * OPTIM_MACS_PER_PARAM, c->threads, norm_part, &j);
  double sum = 0.0;
  for (int q = 0; q < NORM_PARTS; q++)
    sum += c->partial[q];
  *norm_sq = sum;
  return LS_OK;
}

typedef struct adam_job_s {
  float *p, *g, *m, *v;
  size_t n;
  float gs, b1, b2, step_size, bc2_sqrt, decay, l2, eps;
} adam_job_t;

static void adam_part(void *arg, int i, int nth) {
  const adam_job_t *const j = arg;
  size_t const lo = j->n * (size_t)i / (size_t)nth, hi = j->n * (size_t)(i + 1) / (size_t)nth;
  float *restrict p = j->p, *restrict g = j->g, *restrict m = j->m, *restrict v = j->v;
  float const gs = j->gs, b1 = j->b1, b2 = j->b2, l2 = j->l2, decay = j->decay;
#pragma omp simd
  for (size_t k = lo; k < hi; k++) {
    float const gk = g[k] * gs + l2 * p[k];
    float const pk = p[k] * decay;
    float const mk = m[k] + (1.0f - b1) * (gk - m[k]); /* lerp, weight < 0.5 */
    float const vk = v[k] * b2 + (1.0f - b2) * gk * gk;
    float const denom = sqrtf(vk) / j->bc2_sqrt + j->eps;
    p[k] = pk - j->step_size * (mk / denom);
    m[k] = mk;
    v[k] = vk;
    g[k] = 0.0f;
  }
}

static ls_err_t adam_update(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                            const double *norm_sq, float grad_scale, const ls_optim_t *opt,
                            double step) {
  cpu_ctx_t *const c = ctx;
  /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to 1. */
  double const norm = (double)grad_scale * sqrt(*norm_sq);
  double coef = 1.0;
  if (opt->clip_norm > 0.0f) {
    coef = (double)opt->clip_norm / (norm + 1e-6);
    coef = coef < 1.0 ? coef : 1.0;
  }
  /* torch.optim.Adam(W), single-tensor path: scalars in double, then float. */
  float const b1 = opt->beta1, b2 = opt->beta2, wd = opt->weight_decay, lr = opt->lr;
  double const bc1 = 1.0 - pow((double)b1, step);
  double const bc2 = 1.0 - pow((double)b2, step);
  adam_job_t j = {.p = p,
                  .g = g,
                  .m = m,
                  .v = v,
                  .n = n,
                  .gs = (float)((double)grad_scale * coef),
                  .b1 = b1,
                  .b2 = b2,
                  .step_size = (float)((double)lr / bc1),
                  .bc2_sqrt = (float)sqrt(bc2),
                  .decay = opt->decoupled ? 1.0f - lr * wd : 1.0f,
                  .l2 = opt->decoupled ? 0.0f : wd,
                  .eps = opt->eps};
  run(c, (double)n * OPTIM_MACS_PER_PARAM, c->threads, adam_part, &j);
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

/* grad_norm_sq, the count (or the skip of a gradient that is not finite),
 * then adam_update; the arguments' device memory is host memory. */
static ls_err_t optimizer_step(void *ctx, float *p, float *g, float *m, float *v, size_t n,
                               double *norm_sq, double *steps, const ls_optim_args_t *args) {
  cpu_ctx_t *const c = ctx;
  LS_FORWARD_IF_ERROR(grad_norm_sq(ctx, norm_sq, g, n));
  if (args->opt.skip_nonfinite && !isfinite(*norm_sq)) { /* NaN or Inf in g: no update */
    memset(g, 0, n * sizeof *g);
  } else {
    *steps += 1.0;
    LS_FORWARD_IF_ERROR(
        adam_update(ctx, p, g, m, v, n, norm_sq, args->grad_scale, &args->opt, *steps));
  }
  pool_adapt_end(c->pool); /* an update's end: the next one's threads */
  return LS_OK;
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
    .elem_loss = elem_loss,
    .loss_cols = loss_cols,
    .head_backward = head_backward,
    .optimizer_step = optimizer_step,
    .state_gather = state_gather,
    .state_scatter = state_scatter,
    .fetch_start = fetch_start,
    .fetch_wait = fetch_wait,
    .graph_run = graph_run,
};
