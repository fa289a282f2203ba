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
 *   count B,I,H,L,T  kernel launches and cuBLAS calls of one training step
 *            (gather, forward, backward, scatter, update), and the check
 *            that the recurrence costs 4 launches per layer and time step
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
/* sync                                                                      */

/* A window whose backward's first cell kernel faults; the error of the
 * first call that reports it. */
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
  if (!pair_new(e, MT, MB)) return;
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

/* Launches (kernels + cuBLAS calls) of one training step at a shape. */
static long step_launches(int B, int I, int H, int L, int T, int print) {
  ls_engine_conf_t c;
  ls_engine_conf_init(&c);
  c.shape = (ls_shape_t){I, H, L, I};
  c.max_batch = B, c.max_window = T, c.device = LS_DEVICE_CUDA;
  ls_engine_t *e = NULL;
  ls_state_table_t *t = NULL;
  long total = -1;
  float *x = calloc((size_t)T * B * I, sizeof(float));
  int64_t *slots = malloc((size_t)B * sizeof(int64_t));
  if (x == NULL || slots == NULL) goto out;
  for (int b = 0; b < B; b++)
    slots[b] = b;
  ls_optim_t opt;
  ls_optim_init(&opt);
  MUST(ls_engine_new(&c, &e));
  MUST(ls_engine_init_params(e, 42));
  MUST(ls_state_table_new(e, (size_t)B, &t));
  emu_reset_counts();
  MUST(ls_engine_gather_state(e, t, B, slots));
  MUST(ls_engine_forward(e, T, B, x, x, NULL, NULL, NULL));
  MUST(ls_engine_backward(e, 1.0f));
  MUST(ls_engine_scatter_state(e, t, B, slots));
  MUST(ls_engine_optimizer_step(e, &opt, 1.0f, NULL));
  MUST(ls_engine_fetch_figures(e));
  total = emu_count("kernel launches") + emu_count("cublasSgemm");
  if (print) {
    printf("count: B=%d I=%d H=%d L=%d T=%d: %ld launches per step (%ld kernels, %ld cuBLAS "
           "GEMMs), %ld copies, %ld memsets\n",
           B, I, H, L, T, total, emu_count("kernel launches"), emu_count("cublasSgemm"),
           emu_count("cudaMemcpyAsync"), emu_count("cudaMemsetAsync"));
    emu_report();
  }
out:
  ls_state_table_destroy(t);
  ls_engine_destroy(e);
  free(x), free(slots);
  return total;
}

static void run_count(const char *shape) {
  int B, I, H, L, T;
  if (sscanf(shape, "%d,%d,%d,%d,%d", &B, &I, &H, &L, &T) != 5 || T < 2) {
    CHECK(0, "count: want B,I,H,L,T with T >= 2, got %s", shape);
    return;
  }
  long const full = step_launches(B, I, H, L, T, 1), half = step_launches(B, I, H, L, T / 2, 0);
  double const per = (double)(full - half) / ((double)L * (T - T / 2));
  printf("count: %.2f launches per layer and time step (%ld per step at T=%d, %ld at T=%d)\n", per,
         full, T, half, T / 2);
  /* Forward: the recurrent GEMM and the cell kernel; backward: the same. */
  CHECK(per == 4.0, "the recurrence takes %.2f launches per layer and time step, not 4", per);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_emu_engine edges|alloc|figures|slots|sync|count B,I,H,L,T...\n");
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
    else if (!strcmp(argv[i], "count") && i + 1 < argc)
      run_count(argv[++i]);
    else {
      fprintf(stderr, "test_emu_engine: unknown section %s\n", argv[i]);
      return 2;
    }
  }
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
