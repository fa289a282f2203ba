/*
 * The CUDA engine on the emulator, beyond test_cuda_engine: what only an
 * emulator can check or provoke. One section per argument:
 *   edges    windows and batches (T, B) = (1, 1), (7, 1), (1, 8), inside a
 *            larger engine and as an engine's exact maximum (so its buffers
 *            end at the guard pages), against the CPU engine
 *   alloc    every device and pinned allocation of engine creation fails in
 *            turn: a clean error, nothing left allocated; a table growth
 *            that fails halfway keeps the table
 *   figures  the step's loss and gradient norm read without a blocking read
 *            in the step (ls_engine_fetch_figures), equal to the blocking
 *            ones, and a table growth that queues no synchronisation
 *   slots    a scatter with a slot twice is refused
 *   sync     a kernel that faults is named by LSTREAM_CUDA_SYNC=1, and
 *            without it the error says how to find it
 *   pad      a partial step padded to the engine's batch (rows masked,
 *            starting from zeros, not stored) replays the full steps'
 *            graphs and trains as the dense step does on the CPU
 *   count B,I,H,L,T MAX  kernels and cuBLAS GEMMs of one training step
 *            (gather, forward, backward, scatter, update): 4 per layer and
 *            time step on the per-step path, none on the persistent
 *            kernels, at most MAX in all, and graphs replayed from the
 *            third step on
 * Exit status 0 when every check passed, 1 otherwise (and 3 from the
 * emulator on any problem it found).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "gpu_check.h"
#include "lstream/kernels.h"

/* The norm-relative bound of test_cuda_engine.c's TOL (1e-4), for the same
 * reasons: float32 rounding in other orders, other transcendentals. */
#define TOL 1e-4

static ls_shape_t const SHAPE = {3, 7, 2, 2}; /* I, H, L, O */

static void conf_for(ls_engine_conf_t *c, ls_device_t d, int T, int B) {
  ls_engine_conf_init(c);
  c->shape = SHAPE;
  c->max_window = T, c->max_batch = B, c->device = d;
}

/* An engine pair, CUDA [0] and CPU [1], with the same parameters. */
static int pair_new(ls_engine_t *e[2], int T, int B) {
  for (int k = 0; k < 2; k++) {
    ls_engine_conf_t c;
    conf_for(&c, k == 0 ? LS_DEVICE_CUDA : LS_DEVICE_CPU, T, B);
    if (ls_engine_new(&c, &e[k]) != LS_OK || ls_engine_init_params(e[k], 5) != LS_OK) {
      printf("FAIL: engine: %s\n", ls_last_error());
      failures++;
      return 0;
    }
  }
  return 1;
}

/* ------------------------------------------------------------------------ */
/* edges                                                                     */

enum { MT = 10, MB = 8, MI = 3, MH = 7, ML = 2, MO = 2 }; /* the largest case */

typedef struct outs_s {
  float y[MT * MB * MH], pred[MT * MB * MO], hT[ML * MB * MH], cT[ML * MB * MH];
  float dx[MT * MB * MI], dh0[ML * MB * MH], dc0[ML * MB * MH];
  float *g, *p;
} outs_t;

/* One window and one update on engine e; 0 on failure. */
static int window(ls_engine_t *e, int T, int B, outs_t *o) {
  static float x[MT * MB * MI], y[MT * MB * MO], mask[MT * MB];
  for (int i = 0; i < MT * MB * MI; i++)
    x[i] = sinf((float)i * 0.37f);
  for (int i = 0; i < MT * MB * MO; i++)
    y[i] = cosf((float)i * 0.11f);
  for (int i = 0; i < MT * MB; i++)
    mask[i] = i % 5 != 3;
  ls_optim_t opt;
  ls_optim_init(&opt);
  double loss = 0, cnt = 0;
  size_t const n = ls_engine_param_count(e);
  MUST(ls_engine_zero_grads(e));
  MUST(ls_engine_set_state(e, B, NULL, NULL));
  MUST(ls_engine_forward(e, T, B, x, y, mask, &loss, &cnt));
  MUST(ls_engine_backward(e, 1.0f / (float)cnt));
  MUST(ls_engine_read_outputs(e, o->y, o->pred, o->hT, o->cT));
  MUST(ls_engine_read_input_grads(e, o->dx, o->dh0, o->dc0));
  MUST(ls_engine_read_grads(e, o->g, n));
  MUST(ls_engine_optimizer_step(e, &opt, 1.0f, NULL));
  MUST(ls_engine_read_params(e, o->p, n));
  return 1;
out:
  return 0;
}

static void edge_case(int T, int B, int maxT, int maxB) {
  ls_engine_t *e[2] = {NULL, NULL};
  outs_t o[2];
  memset(o, 0, sizeof o);
  if (!pair_new(e, maxT, maxB)) goto out;
  size_t const n = ls_engine_param_count(e[0]), S = (size_t)ML * B * MH, N = (size_t)T * B;
  for (int k = 0; k < 2; k++) {
    o[k].g = malloc(n * sizeof(float)), o[k].p = malloc(n * sizeof(float));
    if (o[k].g == NULL || o[k].p == NULL || !window(e[k], T, B, &o[k])) goto out;
  }
  double const errs[] = {rel_err(o[0].y, o[1].y, N * MH),   rel_err(o[0].pred, o[1].pred, N * MO),
                         rel_err(o[0].hT, o[1].hT, S),      rel_err(o[0].cT, o[1].cT, S),
                         rel_err(o[0].dx, o[1].dx, N * MI), rel_err(o[0].dh0, o[1].dh0, S),
                         rel_err(o[0].dc0, o[1].dc0, S),    rel_err(o[0].g, o[1].g, n),
                         rel_err(o[0].p, o[1].p, n)};
  static const char *const names[] = {"y",   "pred", "hT",    "cT",    "dx",
                                      "dh0", "dc0",  "grads", "params"};
  double worst = 0.0;
  for (int i = 0; i < 9; i++) {
    CHECK(errs[i] <= TOL, "T=%d B=%d (engine %d, %d): %s differs by %.3g", T, B, maxT, maxB,
          names[i], errs[i]);
    worst = errs[i] > worst || isnan(errs[i]) ? errs[i] : worst;
  }
  printf("edges: T=%d B=%d in an engine of (%d, %d): worst difference from the CPU %.3g\n", T, B,
         maxT, maxB, worst);
out:
  for (int k = 0; k < 2; k++)
    free(o[k].g), free(o[k].p), ls_engine_destroy(e[k]);
}

static void run_edges(void) {
  static const int shapes[][2] = {{1, 1}, {7, 1}, {1, 8}};
  for (int i = 0; i < 3; i++) {
    edge_case(shapes[i][0], shapes[i][1], MT, MB);
    edge_case(shapes[i][0], shapes[i][1], shapes[i][0], shapes[i][1]);
  }
}

/* ------------------------------------------------------------------------ */
/* alloc                                                                     */

/* Fails the k-th device (host = 0) or pinned (host = 1) allocation of an
 * engine's creation for k = 1, 2, ... until creation succeeds; each must
 * fail cleanly and leave nothing allocated. Returns the allocations seen. */
static long fail_each(int host) {
  long k = 1;
  for (;; k++) {
    emu_fail_alloc_at(host ? 0 : k);
    emu_fail_host_alloc_at(host ? k : 0);
    ls_engine_conf_t c;
    conf_for(&c, LS_DEVICE_CUDA, MT, MB);
    ls_engine_t *e = NULL;
    ls_err_t const err = ls_engine_new(&c, &e);
    if (err == LS_OK) {
      ls_engine_destroy(e);
      break;
    }
    CHECK(e == NULL && (err == LS_ERR_NOMEM || err == LS_ERR_BACKEND) && ls_last_error()[0],
          "%s allocation %ld failed: engine %p, error %s (%s)", host ? "pinned" : "device", k,
          (void *)e, ls_err2str(err), ls_last_error());
    CHECK(emu_live_device_allocs() == 0 && emu_live_host_allocs() == 0,
          "%s allocation %ld failed: %ld device and %ld pinned allocations left",
          host ? "pinned" : "device", k, emu_live_device_allocs(), emu_live_host_allocs());
  }
  emu_fail_alloc_at(0), emu_fail_host_alloc_at(0);
  CHECK(emu_live_device_allocs() == 0 && emu_live_host_allocs() == 0,
        "after a successful engine: %ld device, %ld pinned allocations left",
        emu_live_device_allocs(), emu_live_host_allocs());
  printf("alloc: each of the %ld %s allocations of engine creation failed in turn, cleanly\n",
         k - 1, host ? "pinned" : "device");
  return k - 1;
}

/* A growth whose second buffer cannot be had keeps the table as it was. */
static void failed_grow(void) {
  ls_engine_t *e[2] = {NULL, NULL};
  ls_state_table_t *t = NULL;
  float h[4 * ML * MH], c[4 * ML * MH], h2[4 * ML * MH], c2[4 * ML * MH];
  for (int i = 0; i < 4 * ML * MH; i++)
    h[i] = (float)i, c[i] = -(float)i;
  if (!pair_new(e, MT, MB)) goto out;
  MUST(ls_state_table_new(e[0], 4, &t));
  MUST(ls_state_table_write(t, 0, 4, h, c));
  long const before = emu_live_device_allocs();
  emu_fail_alloc_at(2);
  CHECK(ls_state_table_grow(t, 100) == LS_ERR_NOMEM, "the growth should fail");
  emu_fail_alloc_at(0);
  MUST(ls_state_table_read(t, 0, 4, h2, c2));
  CHECK(ls_state_table_slots(t) == 4 && !memcmp(h, h2, sizeof h) && !memcmp(c, c2, sizeof c),
        "a failed growth changed the table");
  ls_state_table_destroy(t), t = NULL;
  ls_engine_destroy(e[0]), e[0] = NULL; /* its stream runs the frees it queued */
  CHECK(before > 2 && emu_live_device_allocs() == 0, "a failed growth leaked: %ld left",
        emu_live_device_allocs());
out:
  ls_state_table_destroy(t);
  ls_engine_destroy(e[0]), ls_engine_destroy(e[1]);
}

static void run_alloc(void) {
  long const device = fail_each(0), pinned = fail_each(1);
  /* The engine's 19 buffers and the backend's partials, colsum and slots;
   * two staging buffers and the figures' buffer. */
  CHECK(device >= 22 && pinned >= 3, "only %ld device and %ld pinned allocations were tried",
        device, pinned);
  failed_grow();
}

/* ------------------------------------------------------------------------ */
/* figures                                                                   */

/* One training step with the figures read blocking (fetch = 0) or fetched
 * at the end (fetch = 1); the counters from gather to the end of the step. */
static int step(ls_engine_t *e, ls_state_table_t *t, int fetch, double *loss, float *norm) {
  static float x[MT * MB * MI], y[MT * MB * MO];
  int64_t slots[MB];
  for (int i = 0; i < MT * MB * MI; i++)
    x[i] = sinf((float)i * 0.21f);
  for (int i = 0; i < MT * MB * MO; i++)
    y[i] = cosf((float)i * 0.13f);
  for (int b = 0; b < MB; b++)
    slots[b] = b;
  ls_optim_t opt;
  ls_optim_init(&opt);
  double cnt = 0;
  emu_reset_counts();
  MUST(ls_engine_gather_state(e, t, MB, slots));
  MUST(ls_engine_forward(e, MT, MB, x, y, NULL, fetch ? NULL : loss, &cnt));
  MUST(ls_engine_backward(e, 1.0f));
  MUST(ls_engine_scatter_state(e, t, MB, slots));
  MUST(ls_engine_optimizer_step(e, &opt, (float)(1.0 / cnt), fetch ? NULL : norm));
  if (fetch) MUST(ls_engine_fetch_figures(e));
  return 1;
out:
  return 0;
}

static void run_figures(void) {
  ls_engine_t *e[2] = {NULL, NULL}, *blk = NULL; /* CUDA, CPU; CUDA with blocking reads */
  ls_state_table_t *t[3] = {NULL, NULL, NULL};
  double loss[3] = {0, 0, 0};
  float norm[3] = {0, 0, 0};
  ls_engine_conf_t c;
  conf_for(&c, LS_DEVICE_CUDA, MT, MB);
  if (!pair_new(e, MT, MB)) goto out;
  MUST(ls_engine_new(&c, &blk));
  MUST(ls_engine_init_params(blk, 5));
  MUST(ls_state_table_new(e[0], MB, &t[0]));
  MUST(ls_state_table_new(e[1], MB, &t[1]));
  MUST(ls_state_table_new(blk, MB, &t[2]));
  if (!step(blk, t[2], 0, &loss[2], &norm[2])) goto out;
  long const blocking = emu_count("cudaStreamSynchronize") + emu_count("blocking copies");
  CHECK(blocking >= 2, "the blocking reads were not seen (%ld waits): the counters do not work",
        blocking);
  if (!step(e[0], t[0], 1, NULL, NULL)) goto out;
  long const waits = emu_count("cudaStreamSynchronize") + emu_count("blocking copies") +
                     emu_count("cudaDeviceSynchronize") + emu_count("cudaFree");
  CHECK(waits == 0, "a step with fetched figures waited for the device %ld times", waits);
  MUST(ls_engine_read_figures(e[0], &loss[0], &norm[0]));
  CHECK(loss[0] == loss[2] && norm[0] == norm[2],
        "fetched figures (loss %.17g, norm %.9g) differ from the blocking ones (%.17g, %.9g)",
        loss[0], (double)norm[0], loss[2], (double)norm[2]);
  if (!step(e[1], t[1], 1, NULL, NULL)) goto out;
  MUST(ls_engine_read_figures(e[1], &loss[1], &norm[1]));
  CHECK(fabs(loss[1] - loss[0]) <= TOL * fabs(loss[1]) && fabs(norm[1] - norm[0]) <= TOL * norm[1],
        "CPU figures (%.9g, %.9g) against CUDA's (%.9g, %.9g)", loss[1], (double)norm[1], loss[0],
        (double)norm[0]);
  /* A table growing in the middle of training queues its allocations,
   * copies and frees on the stream: no synchronisation of the device. */
  emu_reset_counts();
  MUST(ls_state_table_grow(t[0], 1000));
  long const syncs = emu_count("cudaFree") + emu_count("cudaDeviceSynchronize") +
                     emu_count("cudaStreamSynchronize") + emu_count("cudaMalloc");
  CHECK(syncs == 0 && emu_count("cudaFreeAsync") == 2,
        "a table growth synchronised the device (%ld cudaFree/cudaMalloc/synchronisations, %ld "
        "stream-ordered frees)",
        syncs, emu_count("cudaFreeAsync"));
  printf("figures: loss %.9g, gradient norm %.6g, fetched without a wait in the step; a table "
         "growth queued %ld allocations and no synchronisation\n",
         loss[0], (double)norm[0], emu_count("cudaMallocAsync"));
out:
  for (int k = 0; k < 3; k++)
    ls_state_table_destroy(t[k]);
  ls_engine_destroy(e[0]), ls_engine_destroy(e[1]), ls_engine_destroy(blk);
}

/* ------------------------------------------------------------------------ */
/* slots                                                                     */

static void run_slots(void) {
  ls_engine_t *e[2] = {NULL, NULL};
  ls_state_table_t *t = NULL;
  float x[2 * 3 * MI];
  memset(x, 0, sizeof x);
  int64_t const dup[3] = {4, -1, 4}, fine[3] = {4, -1, -1};
  if (!pair_new(e, MT, MB)) goto out;
  MUST(ls_state_table_new(e[0], 8, &t));
  MUST(ls_engine_gather_state(e[0], t, 3, dup)); /* reading a slot twice is fine */
  MUST(ls_engine_forward(e[0], 2, 3, x, NULL, NULL, NULL, NULL));
  ls_err_t const err = ls_engine_scatter_state(e[0], t, 3, dup);
  CHECK(err == LS_ERR_INVALID_ARG && strstr(ls_last_error(), "rows 0 and 2"),
        "a scatter of slot 4 from rows 0 and 2: got %s (%s)", ls_err2str(err), ls_last_error());
  MUST(ls_engine_scatter_state(e[0], t, 3, fine));
  printf("slots: a scatter with a slot twice is refused: %s\n", err ? ls_last_error() : "(no)");
out:
  ls_state_table_destroy(t);
  ls_engine_destroy(e[0]), ls_engine_destroy(e[1]);
}

/* ------------------------------------------------------------------------ */
/* pad                                                                       */

/* A window, the engine's batch, the rows of a partial step, the features
 * (O = I) and hidden size. */
enum { PT = 4, PB = 8, PN = 5, PF = 3, PH = 16 };

/* One training step as the trainer takes it: B rows of seq [T+1, B, F]
 * with mask [T, B]; slots [B] (-1: a row that starts from zeros and is not
 * stored); its figures after. */
static int train_step(ls_engine_t *e, ls_state_table_t *t, int B, const float *seq,
                      const float *mask, const int64_t *slots, double *loss, float *norm) {
  ls_optim_t opt;
  ls_optim_init(&opt);
  double count = 0.0;
  MUST(ls_engine_gather_state(e, t, B, slots));
  MUST(ls_engine_forward_seq(e, PT, B, seq, mask, NULL, &count));
  MUST(ls_engine_backward(e, 1.0f));
  MUST(ls_engine_scatter_state(e, t, B, slots));
  MUST(ls_engine_optimizer_step(e, &opt, (float)(1.0 / count), NULL));
  MUST(ls_engine_fetch_figures(e));
  MUST(ls_engine_read_figures(e, loss, norm));
  return 1;
out:
  return 0;
}

/* A partial step padded to the engine's batch (padding rows masked, from
 * zeros, not stored) replays the graphs of full steps and trains as the
 * dense step of its rows does on the CPU. */
static void run_pad(void) {
  ls_engine_t *e[2] = {NULL, NULL}; /* CUDA, CPU */
  ls_state_table_t *t[2] = {NULL, NULL};
  static float seq[(PT + 1) * PB * PF], dense[(PT + 1) * PN * PF], mask[PT * PB], ones[PT * PN];
  float p[2][4096], h[2][(PB + PN) * 2 * PH], c[2][(PB + PN) * 2 * PH];
  int64_t full[PB], pad[PB], rows[PN];
  double loss[2] = {0, 0};
  float norm[2] = {0, 0};
  for (int i = 0; i < (PT + 1) * PB * PF; i++)
    seq[i] = sinf((float)i * 0.53f);
  for (int b = 0; b < PB; b++)
    full[b] = b, pad[b] = b < PN ? PB + b : -1;
  for (int b = 0; b < PN; b++)
    rows[b] = PB + b;
  for (int r = 0; r < PT * PB; r++)
    mask[r] = 1.0f;
  for (int r = 0; r < PT * PN; r++)
    ones[r] = 1.0f;
  for (int k = 0; k < 2; k++) {
    ls_engine_conf_t cf;
    ls_engine_conf_init(&cf);
    cf.shape = (ls_shape_t){PF, PH, 2, PF};
    cf.max_window = PT, cf.max_batch = PB, cf.device = k == 0 ? LS_DEVICE_CUDA : LS_DEVICE_CPU;
    MUST(ls_engine_new(&cf, &e[k]));
    MUST(ls_engine_init_params(e[k], 9));
    MUST(ls_state_table_new(e[k], PB + PN, &t[k]));
    for (int step = 0; step < 3; step++) /* full steps: direct, recorded, replayed */
      if (!train_step(e[k], t[k], PB, seq, mask, full, &loss[k], &norm[k])) goto out;
  }
  /* The partial step: its rows dense on the CPU, padded on CUDA. */
  for (int tt = 0; tt <= PT; tt++)
    for (int b = 0; b < PB; b++)
      for (int f = 0; f < PF; f++) {
        float const v = cosf((float)(tt * 31 + b * 7 + f) * 0.29f);
        seq[(tt * PB + b) * PF + f] = b < PN ? v : 0.0f;
        if (b < PN) dense[(tt * PN + b) * PF + f] = v;
      }
  for (int r = 0; r < PT * PB; r++)
    mask[r] = r % PB < PN;
  emu_reset_counts();
  if (!train_step(e[0], t[0], PB, seq, mask, pad, &loss[0], &norm[0]) ||
      !train_step(e[1], t[1], PN, dense, ones, rows, &loss[1], &norm[1]))
    goto out;
  CHECK(emu_count("graph instantiations") == 0 && emu_count("graph launches") == 3,
        "the padded step recorded %ld graphs and launched %ld (want 0 and the full steps' 3)",
        emu_count("graph instantiations"), emu_count("graph launches"));
  size_t const n = ls_engine_param_count(e[0]), S = (size_t)(PB + PN) * 2 * PH;
  if (n > sizeof p[0] / sizeof p[0][0]) {
    CHECK(0, "pad: %zu parameters do not fit the test's buffer", n);
    goto out;
  }
  for (int k = 0; k < 2; k++) {
    MUST(ls_engine_read_params(e[k], p[k], n));
    MUST(ls_state_table_read(t[k], 0, PB + PN, h[k], c[k]));
  }
  float const l0 = (float)loss[0], l1 = (float)loss[1];
  double const errs[] = {rel_err(&l0, &l1, 1), rel_err(&norm[0], &norm[1], 1),
                         rel_err(p[0], p[1], n), rel_err(h[0], h[1], S), rel_err(c[0], c[1], S)};
  for (int i = 0; i < 5; i++)
    CHECK(errs[i] <= TOL, "padded step: %s differs by %.3g",
          (const char *[]){"loss", "norm", "params", "h", "c"}[i], errs[i]);
  printf("pad: a step of %d rows padded to %d replays the full steps' graphs; loss %.9g, params "
         "%.3g from the CPU's dense step\n",
         PN, PB, loss[0], errs[2]);
out:
  for (int k = 0; k < 2; k++)
    ls_state_table_destroy(t[k]), ls_engine_destroy(e[k]);
}

/* ------------------------------------------------------------------------ */
/* sync                                                                      */

/* A window whose backward's first cell kernel faults (the per-step path,
 * LSTREAM_CUDA_PERSIST=0: one cell kernel per time step); the error of
 * the first call that reports it. */
static void faulting_window(int sync, char *msg, size_t size) {
  ls_engine_t *e[2] = {NULL, NULL};
  float x[MT * MB * MI], y[MT * MB * MO], out_y[MT * MB * MH];
  for (int i = 0; i < MT * MB * MI; i++)
    x[i] = 0.1f;
  for (int i = 0; i < MT * MB * MO; i++)
    y[i] = 0.2f;
  snprintf(msg, size, "(no error)");
  if (sync)
    setenv("LSTREAM_CUDA_SYNC", "1", 1);
  else
    unsetenv("LSTREAM_CUDA_SYNC");
  setenv("LSTREAM_CUDA_PERSIST", "0", 1);
  int const made = pair_new(e, MT, MB);
  unsetenv("LSTREAM_CUDA_PERSIST");
  if (!made) return;
  emu_fail_kernel("lstm_cell_backward_kernel", 1);
  ls_err_t err = ls_engine_set_state(e[0], MB, NULL, NULL);
  if (err == LS_OK) err = ls_engine_forward(e[0], MT, MB, x, y, NULL, NULL, NULL);
  if (err == LS_OK) err = ls_engine_backward(e[0], 1.0f);
  if (err == LS_OK) err = ls_engine_read_outputs(e[0], out_y, NULL, NULL, NULL);
  if (err != LS_OK) snprintf(msg, size, "%s", ls_last_error());
  ls_engine_destroy(e[0]), ls_engine_destroy(e[1]);
  emu_fail_kernel(NULL, 0);
  emu_clear_error();
}

static void run_sync(void) {
  char plain[1024], synced[1024];
  faulting_window(0, plain, sizeof plain);
  faulting_window(1, synced, sizeof synced);
  unsetenv("LSTREAM_CUDA_SYNC");
  printf("sync: without LSTREAM_CUDA_SYNC: %s\nsync: with LSTREAM_CUDA_SYNC=1: %s\n", plain,
         synced);
  CHECK(strstr(plain, "lstm_cell_backward_kernel") == NULL && strstr(plain, "LSTREAM_CUDA_SYNC=1"),
        "without LSTREAM_CUDA_SYNC the fault should surface later, with a hint: %s", plain);
  CHECK(strstr(synced, "kernel lstm_cell_backward_kernel failed") != NULL,
        "LSTREAM_CUDA_SYNC=1 should name the faulting kernel: %s", synced);
}

/* ------------------------------------------------------------------------ */
/* count                                                                     */

/* What one training step (gather, forward of a sequence, backward at
 * loss_scale 1, scatter, update, figures fetched: as the trainer) asks of
 * the device: the kernels and GEMMs it runs (direct or from graphs), the
 * launches the host makes (kernels and GEMMs launched directly, graph
 * launches) and its waits for the device. */
typedef struct launches_s {
  long work, host, graphs, waits;
} launches_t;

/* Runs `steps` steps at a shape and counts the last (the first runs
 * directly, the second records the graphs, the third replays them). */
static int step_launches(int B, int I, int H, int L, int T, int steps, launches_t *n, int print) {
  ls_engine_conf_t c;
  ls_engine_conf_init(&c);
  c.shape = (ls_shape_t){I, H, L, I};
  c.max_batch = B, c.max_window = T, c.device = LS_DEVICE_CUDA;
  ls_engine_t *e = NULL;
  ls_state_table_t *t = NULL;
  int ok = 0;
  float *seq = calloc((size_t)(T + 1) * B * I, sizeof(float));
  int64_t *slots = malloc((size_t)B * sizeof(int64_t));
  if (seq == NULL || slots == NULL) goto out;
  for (int b = 0; b < B; b++)
    slots[b] = b;
  ls_optim_t opt;
  ls_optim_init(&opt);
  MUST(ls_engine_new(&c, &e));
  MUST(ls_engine_init_params(e, 42));
  MUST(ls_state_table_new(e, (size_t)B, &t));
  for (int k = 0; k < steps; k++) {
    double count = 0.0, loss = 0.0;
    if (k == steps - 1) emu_reset_counts();
    MUST(ls_engine_gather_state(e, t, B, slots));
    MUST(ls_engine_forward_seq(e, T, B, seq, NULL, NULL, &count));
    MUST(ls_engine_backward(e, 1.0f));
    MUST(ls_engine_scatter_state(e, t, B, slots));
    MUST(ls_engine_optimizer_step(e, &opt, (float)(1.0 / count), NULL));
    MUST(ls_engine_fetch_figures(e));
    if (k == steps - 1)
      n->waits = emu_count("cudaStreamSynchronize") + emu_count("cudaDeviceSynchronize") +
                 emu_count("blocking copies");
    MUST(ls_engine_read_figures(e, &loss, NULL)); /* the step's work has run */
  }
  n->work = emu_count("kernels run") + emu_count("gemms run");
  n->host = emu_count("kernel launches") + emu_count("cublasSgemm");
  n->graphs = emu_count("graph launches");
  ok = 1;
  if (print) {
    printf("count: B=%d I=%d H=%d L=%d T=%d, step %d: %ld kernels and GEMMs (%ld launched by the "
           "host, %ld graph launches), %ld waits\n",
           B, I, H, L, T, steps, n->work, n->host, n->graphs, n->waits);
    emu_report();
  }
out:
  ls_state_table_destroy(t);
  ls_engine_destroy(e);
  free(seq), free(slots);
  return ok;
}

/* count B,I,H,L,T MAX: the per-step path (LSTREAM_CUDA_PERSIST=0) takes 4
 * launches per layer and time step; the persistent kernels none, at most
 * MAX kernels and GEMMs a step, and from the third step on graphs: the
 * host launches the gather and scatter kernels and three graphs (forward,
 * backward, update), and waits for nothing. A step launches as many
 * kernels at any B: the steps that only count (the per-step path's, the
 * graphs') run at B = 4. */
static void run_count(const char *shape, const char *most) {
  int B, I, H, L, T;
  long const max = most != NULL ? atol(most) : 0;
  if (sscanf(shape, "%d,%d,%d,%d,%d", &B, &I, &H, &L, &T) != 5 || T < 3 || max < 1) {
    CHECK(0, "count: want B,I,H,L,T with T >= 3 and a bound, got %s %s", shape, most);
    return;
  }
  launches_t full, two, replay;
  setenv("LSTREAM_CUDA_PERSIST", "0", 1);
  if (!step_launches(4, I, H, L, T, 1, &full, 0) || !step_launches(4, I, H, L, 2, 1, &two, 0))
    return;
  unsetenv("LSTREAM_CUDA_PERSIST");
  double const before = (double)(full.work - two.work) / ((double)L * (T - 2));
  printf("count: the per-step path (LSTREAM_CUDA_PERSIST=0): %ld kernels and GEMMs a step, %.2f "
         "per layer and time step\n",
         full.work, before);
  CHECK(before == 4.0, "the per-step path takes %.2f launches per layer and time step, not 4",
        before);
  if (!step_launches(B, I, H, L, T, 1, &full, 1) || !step_launches(B, I, H, L, 2, 1, &two, 0) ||
      !step_launches(4, I, H, L, T, 3, &replay, 0))
    return;
  double const per = (double)(full.work - two.work) / ((double)L * (T - 2));
  printf("count: persistent: %ld kernels and GEMMs a step (%.2f per layer and time step); "
         "replayed: %ld, the host launching %ld kernels and %ld graphs\n",
         full.work, per, replay.work, replay.host, replay.graphs);
  CHECK(per == 0.0, "the persistent path takes %.2f launches per layer and time step", per);
  CHECK(full.work <= max, "a step takes %ld kernels and GEMMs, more than %ld", full.work, max);
  CHECK(replay.work == full.work && replay.host == 2 && replay.graphs == 3 && replay.waits == 0,
        "a replayed step: %ld kernels and GEMMs (want %ld), %ld direct launches (want gather and "
        "scatter: 2), %ld graph launches (want 3), %ld waits",
        replay.work, full.work, replay.host, replay.graphs, replay.waits);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: test_emu_engine edges|alloc|figures|slots|sync|pad|count B,I,H,L,T MAX...\n");
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "edges"))
      run_edges();
    else if (!strcmp(argv[i], "alloc"))
      run_alloc();
    else if (!strcmp(argv[i], "figures"))
      run_figures();
    else if (!strcmp(argv[i], "slots"))
      run_slots();
    else if (!strcmp(argv[i], "sync"))
      run_sync();
    else if (!strcmp(argv[i], "pad"))
      run_pad();
    else if (!strcmp(argv[i], "count") && i + 2 < argc)
      run_count(argv[i + 1], argv[i + 2]), i += 2;
    else {
      fprintf(stderr, "test_emu_engine: unknown section %s\n", argv[i]);
      return 2;
    }
  }
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
