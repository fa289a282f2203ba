/*
 * `lstream bench comm`: times the gradient all-reduce of a replica step
 * across the ranks mpirun started, at the gradient sizes of model shapes:
 * the whole buffer in one sum (--overlap false) and segment by segment, as
 * an overlapped backward starts them (the head, then each layer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli.h"
#include "comm.h"
#include "lstream/kernels.h"

#define MAX_SHAPES 32

#define ABOUT                                                                                      \
  "Times the sum of a model's gradient buffer over every rank (mpi on the CPU,\n"                  \
  "nccl on GPUs), median of --reps, and prints one line per shape on rank 0:\n"                    \
  "  comm backend=mpi ranks=N H=.. I=.. L=.. floats=.. MB=.. whole_us=..\n"                        \
  "       segments=L+1 segmented_us=.. busbw_GBps=..\n"                                            \
  "whole: one all-reduce of the buffer; segmented: one per layer and one for the\n"                \
  "head, started back to back (what an overlapped backward does, less the\n"                       \
  "compute in between). busbw = 2 (N-1)/N * bytes / whole time, NCCL's bus\n"                      \
  "bandwidth convention. On one rank the sums are no-ops: run it under mpirun.\n"

static const char *const devices[] = {"cpu", "cuda", NULL}; /* ls_device_t order */

/* The shapes to time (--shape, repeatable). */
typedef struct shapes_s {
  ls_shape_t v[MAX_SHAPES];
  int n;
} shapes_t;

/* --shape H,I,L (outputs = inputs). */
static int add_shape(void *opaque, const char *text) {
  shapes_t *const sh = opaque;
  ls_shape_t s = {0, 0, 0, 0};
  char tail = 0;
  if (sh->n == MAX_SHAPES) return cli_usage_error("bench comm", "at most %d shapes", MAX_SHAPES);
  if (sscanf(text, "%d,%d,%d%c", &s.hidden_size, &s.input_size, &s.num_layers, &tail) != 3)
    return cli_usage_error("bench comm", "--shape is H,I,L, not '%s'", text);
  s.output_size = s.input_size;
  if (ls_shape_check(&s) != LS_OK)
    return cli_usage_error("bench comm", "--shape %s: %s", text, ls_last_error());
  sh->v[sh->n++] = s;
  return CLI_EXIT_OK;
}

/* One timed round: every rank starts together (a step's sum of doubles is
 * the barrier), the sums run, the host waits for them. */
static ls_err_t timed(comm_t *c, int segmented, double *seconds) {
  double z = 0.0;
  LS_FORWARD_IF_ERROR(comm_sum_doubles(c, &z, 1));
  double const t0 = base_now_s();
  if (segmented) {
    LS_FORWARD_IF_ERROR(comm_grads_start_segments(c));
    LS_FORWARD_IF_ERROR(comm_grads_finish(c));
  } else {
    LS_FORWARD_IF_ERROR(comm_sum_grads(c));
  }
  LS_FORWARD_IF_ERROR(comm_sync(c));
  *seconds = base_now_s() - t0;
  return LS_OK;
}

static int bench_one(comm_t *c, const ls_shape_t *shape, ls_device_t device, int reps, int warmup) {
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = *shape;
  conf.max_batch = 1, conf.max_window = 1; /* only the gradient buffer matters */
  conf.device = device;
  ls_engine_t *e = NULL;
  ls_err_t err = device == LS_DEVICE_CUDA ? comm_gpu(c, &conf.device_index) : LS_OK;
  if (err == LS_OK) err = ls_engine_new(&conf, &e);
  if (err != LS_OK) return cli_fail(err, "cannot create an engine");
  comm_t *bound = NULL; /* a comm binds one engine: a fresh one per shape */
  err = comm_new(comm_kind(c), &bound);
  if (err == LS_OK) err = comm_bind(bound, e);
  double *whole = calloc((size_t)reps, sizeof(double)), *seg = calloc((size_t)reps, sizeof(double));
  if (err == LS_OK && (whole == NULL || seg == NULL))
    err = ls_error_set(LS_ERR_NOMEM, "no memory for %d timings", reps);
  for (int r = -warmup; err == LS_OK && r < reps; r++) {
    double a = 0.0, b = 0.0;
    err = timed(bound, 0, &a);
    if (err == LS_OK) err = timed(bound, 1, &b);
    if (r >= 0) whole[r] = a, seg[r] = b;
  }
  int rc = CLI_EXIT_OK;
  if (err != LS_OK) {
    rc = cli_fail(err, "the all-reduce failed");
  } else if (comm_rank(c) == 0) {
    size_t const n = ls_engine_param_count(e);
    int const N = comm_world(c);
    double const bytes = (double)n * sizeof(float);
    double const tw = cli_median(whole, reps), ts = cli_median(seg, reps);
    printf("comm backend=%s ranks=%d H=%d I=%d L=%d floats=%zu MB=%.3f whole_us=%.1f "
           "segments=%d segmented_us=%.1f busbw_GBps=%.2f\n",
           comm_kind(c) == COMM_NCCL  ? "nccl"
           : comm_kind(c) == COMM_MPI ? "mpi"
                                      : "none",
           N, shape->hidden_size, shape->input_size, shape->num_layers, n, bytes / 1e6, tw * 1e6,
           shape->num_layers + 1, ts * 1e6, tw > 0 ? 2.0 * (N - 1) / N * bytes / tw / 1e9 : 0.0);
    fflush(stdout);
  }
  free(whole), free(seg);
  comm_destroy(bound);
  ls_engine_destroy(e);
  return rc;
}

int cmd_bench_comm(int argc, char **argv) {
  shapes_t shapes = {.n = 0};
  int reps = 20, warmup = 3;
  ls_device_t device = LS_DEVICE_CPU;
  cli_opt_t const opts[] = {
      {.name = "device",
       .arg = "D",
       .kind = CLI_VALUE,
       .dst = &device,
       .value = BASE_V_CHOICE(devices),
       .help = "cpu (MPI) or cuda (NCCL, one GPU per local rank)"},
      {.name = "shape",
       .arg = "S",
       .kind = CLI_CALL,
       .dst = &shapes,
       .call = add_shape,
       .help = "hidden, inputs, layers (outputs = inputs); repeat for several\n"
               "(default: the engine benchmark's 128,8,2 64,4,1 256,16,2 and\n"
               "512,32,2)"},
      {.name = "reps",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &reps,
       .value = BASE_V_INT(1, 1000000),
       .help = "timed sums per shape"},
      {.name = "warmup",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &warmup,
       .value = BASE_V_INT(0, 1000000),
       .help = "untimed sums first"},
      {0},
  };
  cli_spec_t const spec = {"bench comm",
                           "[--device cpu|cuda] [--shape H,I,L]... [--reps N] [--warmup N]\n"
                           "       (under mpirun -np N)",
                           ABOUT,
                           opts,
                           NULL,
                           0};
  cli_args_t args;
  int const parsed = cli_parse(&spec, argc, argv, &args);
  if (parsed != CLI_EXIT_OK) return parsed == CLI_DONE ? CLI_EXIT_OK : parsed;
  int n_shapes = shapes.n;
  ls_shape_t *const sh = shapes.v;
  if (n_shapes == 0) {
    static const ls_shape_t defaults[] = {
        {8, 128, 2, 8}, {4, 64, 1, 4}, {16, 256, 2, 16}, {32, 512, 2, 32}};
    n_shapes = (int)(sizeof defaults / sizeof defaults[0]);
    memcpy(sh, defaults, sizeof defaults);
  }
  int up = 0;
  int rc = cli_mpi_begin(&argc, &argv, &up);
  comm_t *c = NULL;
  if (rc == CLI_EXIT_OK) {
    ls_err_t const err = comm_new(!up                        ? COMM_NONE
                                  : device == LS_DEVICE_CUDA ? COMM_NCCL
                                                             : COMM_MPI,
                                  &c);
    if (err != LS_OK) rc = cli_fail(err, "cannot open the comm backend");
  }
  if (rc == CLI_EXIT_OK && comm_rank(c) == 0 && !up)
    cli_log(CLI_WARN, "lstream bench comm", "one rank: the sums are no-ops (run it under mpirun)");
  for (int i = 0; rc == CLI_EXIT_OK && i < n_shapes; i++)
    rc = bench_one(c, &sh[i], device, reps, warmup);
  comm_destroy(c);
  cli_mpi_end(up, rc);
  return rc;
}
