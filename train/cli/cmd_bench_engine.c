/*
 * `lstream bench engine`: times full training steps of the engine (set the
 * initial state, forward, masked MSE, backward, clip + Adam) at given
 * shapes, and the machine's sgemm rate as the limit to compare with.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <cblas.h>  /* the sgemm reference rate */
#undef I            /* <complex.h>, via OpenBLAS' cblas.h, defines I */
#include <dlfcn.h>  /* the CUDA emulation's counters, when it runs us */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli.h"
#include "lstream/kernels.h"

typedef struct bench_shape_s {
  int B, I, H, L, T;
} bench_shape_t;

/* The CPU's default shapes; CUDA adds one large enough to fill a GPU. */
static const bench_shape_t default_shapes[] = {
    {256, 8, 128, 2, 32},
    {64, 4, 64, 1, 64},
    {1024, 16, 256, 2, 64},
    {4096, 32, 512, 2, 128},
};
#define CPU_DEFAULT_SHAPES 3

#define MAX_SHAPES 32

#define ABOUT                                                                                      \
  "Times full training steps as the trainer takes them (the initial states gathered\n"             \
  "from a state table, forward of a window of T+1 records, masked MSE over O = I\n"                \
  "next-step targets, backward, the final states stored, global-norm clip + Adam over\n"           \
  "the summed gradient) and prints one line per shape:\n"                                          \
  "  engine device=cpu precision=fp32 B=.. I=.. H=.. L=.. T=.. ms_per_step=<median>\n"             \
  "         timesteps_per_s=.. gflops=.. share=..\n"                                               \
  "share: gflops over the machine's GEMM rate, on the CPU: an N^3 sgemm (OpenBLAS,\n"              \
  "as many threads as the engine, its result checked), measured first:\n"                          \
  "  sgemm device=cpu n=N threads=.. core=<OpenBLAS kernel> gflops=.. check=ok\n"                  \
  "OPENBLAS_CORETYPE (set on some machines to keep OpenBLAS on an older kernel)\n"                 \
  "can hold OpenBLAS below the machine's widest instructions: where it is set, a\n"                \
  "child process measures the line again without it (widest=1), and the faster\n"                  \
  "checked line is the rate. A step ends by reading back the gradient norm, so on\n"               \
  "CUDA its work has completed when its time is taken. On the CUDA emulation\n"                    \
  "(tests/gpu/emu) a line per shape also gives what one step launches (its time\n"                 \
  "there means nothing):\n"                                                                        \
  "  launches device=cuda B=.. ... kernels_and_gemms=.. host_launches=.. graphs=..\n"

static const char *const devices[] = {"cpu", "cuda", NULL};     /* ls_device_t order */
static const char *const precisions[] = {"fp32", "tf32", NULL}; /* ls_precision_t order */

/* The shapes to time (--shape, repeatable). */
typedef struct shapes_s {
  bench_shape_t v[MAX_SHAPES];
  int n;
} shapes_t;

/* --shape B,I,H,L,T */
static int add_shape(void *opaque, const char *text) {
  shapes_t *const sh = opaque;
  bench_shape_t s;
  char tail;
  if (sh->n == MAX_SHAPES)
    return cli_usage_error("bench engine", "at most %d --shape options", MAX_SHAPES);
  if (sscanf(text, "%d,%d,%d,%d,%d%c", &s.B, &s.I, &s.H, &s.L, &s.T, &tail) != 5 || s.B < 1 ||
      s.I < 1 || s.H < 1 || s.L < 1 || s.T < 1)
    return cli_usage_error("bench engine",
                           "--shape '%s': expected five positive integers B,I,H,L,T", text);
  sh->v[sh->n++] = s;
  return CLI_EXIT_OK;
}

/* Multiply-adds x2 of one training step: per layer the input and recurrent
 * GEMMs forward (2*N*4H*(In+H)), and three times that backward (input
 * gradient, weight gradients, recurrent gradient) ... counted as 2x forward;
 * the head forward and backward likewise. Pointwise work is not counted. */
static double step_flops(const bench_shape_t *s) {
  double const N = (double)s->T * s->B, G = 4.0 * s->H;
  double f = 0.0;
  for (int l = 0; l < s->L; l++)
    f += 2.0 * N * G * ((l == 0 ? s->I : s->H) + s->H);
  f += 2.0 * N * s->H * s->I; /* head, O = I */
  return 3.0 * f;
}

/* The threads the engine takes by default: the cores this process may run
 * on (a taskset or cgroup's, not the machine's). */
static int cores_allowed(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long const online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

/* The GEMM rate on `threads` threads (an n^3 sgemm, median of 3 after one
 * untimed), 0 where memory is short; *ok: whether the product is right (a
 * kernel that a core-type setting makes misbehave gives no rate to trust).
 * A[i][k] = 1/(1 + (i+k) % 7) and B[k][j] = 1/(1 + (k+2j) % 5), so each
 * checked element is a sum computed here in double. */
static double sgemm_gflops(int n, int threads, int *ok) {
  *ok = 0;
  openblas_set_num_threads(threads);
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
        *c = malloc(sizeof(float) * n * n);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return 0.0;
  }
  for (long i = 0; i < n; i++)
    for (long k = 0; k < n; k++)
      a[i * n + k] = 1.0f / (float)(1 + (i + k) % 7),
                b[i * n + k] = 1.0f / (float)(1 + (i + 2 * k) % 5);
  double t[3];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  for (int r = 0; r < 3; r++) {
    double const t0 = base_now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    t[r] = base_now_s() - t0;
  }
  *ok = 1;
  for (long e = 0; e < 64; e++) { /* 64 elements spread over C */
    long const i = (e * 977) % n, j = (e * 1409 + 13) % n;
    double want = 0.0;
    for (long k = 0; k < n; k++)
      want += (double)a[i * n + k] * (double)b[k * n + j];
    if (!(fabs((double)c[i * n + j] - want) <= 1e-4 * fabs(want))) *ok = 0;
  }
  free(a), free(b), free(c);
  return 2.0 * n * (double)n * n / cli_median(t, 3) / 1e9;
}

/* Prints the sgemm line measured here; returns its rate (0: not checked). */
static double sgemm_line(int n, int threads) {
  const char *const set = getenv("OPENBLAS_CORETYPE");
  int const widest = set == NULL || set[0] == '\0';
  int ok = 0;
  double const g = sgemm_gflops(n, threads, &ok);
  const char *const core = openblas_get_corename();
  printf("sgemm device=cpu n=%d threads=%d core=%s%s gflops=%.1f check=%s\n", n, threads,
         core != NULL ? core : "unknown", widest ? " widest=1" : "", g, ok ? "ok" : "FAILED");
  fflush(stdout);
  return ok ? g : 0.0;
}

extern char **environ;

/* The sgemm line of a child process run without OPENBLAS_CORETYPE (read by
 * OpenBLAS when it loads, so not changeable here); its rate, 0 where it could
 * not be measured (said on stderr). */
static double sgemm_widest(int n, int threads) {
  char exe[PATH_MAX], nthreads[16], size[16];
  ssize_t const len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) {
    fprintf(stderr, "bench engine: cannot find this program (/proc/self/exe): %s\n",
            strerror(errno));
    return 0.0;
  }
  exe[len] = '\0';
  snprintf(nthreads, sizeof nthreads, "%d", threads);
  snprintf(size, sizeof size, "%d", n);
  size_t n_env = 0;
  while (environ[n_env] != NULL)
    n_env++;
  char **env = calloc(n_env + 1, sizeof *env);
  int fd[2] = {-1, -1};
  if (env == NULL || pipe(fd) != 0) {
    fprintf(stderr, "bench engine: cannot start the sgemm child: %s\n", strerror(errno));
    free(env);
    return 0.0;
  }
  for (size_t i = 0, k = 0; i < n_env; i++)
    if (strncmp(environ[i], "OPENBLAS_CORETYPE=", 18) != 0) env[k++] = environ[i];
  char *const argv[] = {exe,         "bench", "engine", "--sgemm-only", "--threads", nthreads,
                        "--sgemm-n", size,    NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  pid_t pid = 0;
  int const spawned = posix_spawn(&pid, exe, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  free(env);
  char line[512] = "";
  FILE *const f = spawned == 0 ? fdopen(fd[0], "r") : NULL;
  if (f == NULL || fgets(line, sizeof line, f) == NULL) line[0] = '\0';
  if (f != NULL)
    fclose(f);
  else
    close(fd[0]);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  const char *const at = strstr(line, "gflops=");
  if (spawned != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || at == NULL) {
    fprintf(stderr, "bench engine: the sgemm without OPENBLAS_CORETYPE failed (%s)\n",
            spawned != 0 ? strerror(spawned) : "no line");
    return 0.0;
  }
  fputs(line, stdout);
  fflush(stdout);
  return strstr(line, "check=ok") != NULL ? atof(at + 7) : 0.0;
}

/* Deterministic pseudo-random fill in [-1, 1). */
static void fill(float *v, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    v[i] = (float)((double)x / 2147483648.0 - 1.0);
  }
}

/* What a step needs besides the engine: its records, the series' states
 * (slots 0..B-1 of a table), the optimizer. */
typedef struct bench_data_s {
  const float *seq; /* [T+1, B, I] */
  ls_state_table_t *states;
  const int64_t *slots;
  ls_optim_t opt;
} bench_data_t;

/* One step as the trainer takes it (loss_scale 1, the sum scaled at the
 * update), ending with a blocking read of the gradient norm. */
static ls_err_t bench_step(ls_engine_t *eng, const bench_shape_t *s, const bench_data_t *d) {
  double count = 0.0;
  float norm = 0.0f;
  ls_err_t err = ls_engine_gather_state(eng, d->states, s->B, d->slots);
  if (err == LS_OK) err = ls_engine_forward_seq(eng, s->T, s->B, d->seq, NULL, NULL, &count);
  if (err == LS_OK) err = ls_engine_backward(eng, 1.0f);
  if (err == LS_OK) err = ls_engine_scatter_state(eng, d->states, s->B, d->slots);
  if (err == LS_OK) err = ls_engine_optimizer_step(eng, &d->opt, (float)(1.0 / count), &norm);
  return err;
}

/* On the CUDA emulation: what one more step launches, from its counters
 * (emu_count: tests/gpu/emu/include/emu.h); nothing elsewhere. */
static ls_err_t bench_launches(ls_engine_t *eng, const bench_shape_t *s, const bench_data_t *d) {
  long (*count)(const char *) = NULL;
  void (*reset)(void) = NULL;
  *(void **)&count = dlsym(RTLD_DEFAULT, "emu_count");
  *(void **)&reset = dlsym(RTLD_DEFAULT, "emu_reset_counts");
  if (count == NULL || reset == NULL) return LS_OK;
  reset();
  LS_FORWARD_IF_ERROR(bench_step(eng, s, d));
  printf("launches device=cuda B=%d I=%d H=%d L=%d T=%d kernels_and_gemms=%ld host_launches=%ld "
         "graphs=%ld (counted by the CUDA emulation)\n",
         s->B, s->I, s->H, s->L, s->T, count("kernels run") + count("gemms run"),
         count("kernel launches") + count("cublasSgemm"), count("graph launches"));
  return LS_OK;
}

/* limit: the machine's GEMM rate (GFLOP/s; 0: none, no share printed). */
static int bench_one(const bench_shape_t *s, ls_device_t device, ls_precision_t precision,
                     int threads, int steps, int warmup, double limit) {
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = (ls_shape_t){s->I, s->H, s->L, s->I};
  conf.max_batch = s->B;
  conf.max_window = s->T;
  conf.device = device;
  conf.precision = precision;
  conf.threads = threads;
  ls_engine_t *eng = NULL;
  ls_err_t err = ls_engine_new(&conf, &eng);
  if (err != LS_OK) return cli_fail(err, "cannot create the engine");
  size_t const n = (size_t)(s->T + 1) * s->B * s->I;
  float *seq = malloc(n * sizeof(float));
  int64_t *slots = malloc((size_t)s->B * sizeof(int64_t));
  double *times = malloc((size_t)steps * sizeof(double));
  bench_data_t d = {.seq = seq, .states = NULL, .slots = slots};
  int rc = CLI_EXIT_OK;
  if (!seq || !slots || !times) {
    rc = cli_fail(LS_ERR_NOMEM, "no memory for the benchmark data");
    goto done;
  }
  fill(seq, n, 1);
  for (int b = 0; b < s->B; b++)
    slots[b] = b;
  ls_optim_init(&d.opt);
  err = ls_engine_init_params(eng, 42);
  if (err == LS_OK) err = ls_state_table_new(eng, (size_t)s->B, &d.states);
  for (int i = 0; i < warmup + steps && err == LS_OK; i++) {
    double const t0 = base_now_s();
    err = bench_step(eng, s, &d);
    if (i >= warmup) times[i - warmup] = base_now_s() - t0;
  }
  if (err != LS_OK) {
    rc = cli_fail(err, "training step failed");
    goto done;
  }
  double const sec = cli_median(times, steps);
  double const gflops = step_flops(s) / sec / 1e9;
  printf("engine device=%s precision=%s B=%d I=%d H=%d L=%d T=%d ms_per_step=%.3f "
         "timesteps_per_s=%.0f gflops=%.1f",
         device == LS_DEVICE_CPU ? "cpu" : "cuda", precision == LS_PRECISION_TF32 ? "tf32" : "fp32",
         s->B, s->I, s->H, s->L, s->T, sec * 1e3, (double)s->B * s->T / sec, gflops);
  if (limit > 0.0) printf(" share=%.2f", gflops / limit);
  printf("\n");
  if (device == LS_DEVICE_CUDA && (err = bench_launches(eng, s, &d)) != LS_OK)
    rc = cli_fail(err, "training step failed");
  fflush(stdout);
done:
  free(seq), free(slots), free(times);
  ls_state_table_destroy(d.states);
  ls_engine_destroy(eng);
  return rc;
}

/* The machine's GEMM rate: the sgemm line here, and where
 * OPENBLAS_CORETYPE is set, a child's without it; the faster checked one
 * (0: none). */
static double sgemm_limit(int n, int threads) {
  const char *const set = getenv("OPENBLAS_CORETYPE");
  double const here = sgemm_line(n, threads);
  double const widest = set != NULL && set[0] != '\0' ? sgemm_widest(n, threads) : 0.0;
  return widest > here ? widest : here;
}

/* What `bench engine` was asked for. */
typedef struct bench_opts_s {
  shapes_t shapes;
  int steps, warmup, threads, no_sgemm, sgemm_only, sgemm_n;
  ls_device_t device;
  ls_precision_t precision;
} bench_opts_t;

/* The sgemm reference, then each shape (the defaults where none given). */
static int bench_run(bench_opts_t *o) {
  if (o->no_sgemm && o->sgemm_only)
    return cli_usage_error("bench engine", "--no-sgemm and --sgemm-only exclude each other");
  int const blas_threads = o->threads > 0 ? o->threads : cores_allowed();
  if (o->sgemm_only)
    return sgemm_line(o->sgemm_n, blas_threads) > 0.0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  double const limit =
      !o->no_sgemm && o->device == LS_DEVICE_CPU ? sgemm_limit(o->sgemm_n, blas_threads) : 0.0;
  shapes_t *const sh = &o->shapes;
  if (sh->n == 0) { /* the defaults */
    sh->n = o->device == LS_DEVICE_CPU ? CPU_DEFAULT_SHAPES
                                       : (int)(sizeof default_shapes / sizeof default_shapes[0]);
    memcpy(sh->v, default_shapes, (size_t)sh->n * sizeof default_shapes[0]);
  }
  for (int i = 0; i < sh->n; i++) {
    int const one =
        bench_one(&sh->v[i], o->device, o->precision, o->threads, o->steps, o->warmup, limit);
    if (one != CLI_EXIT_OK) return one;
  }
  return CLI_EXIT_OK;
}

int cmd_bench_engine(int argc, char **argv) {
  bench_opts_t o = {.shapes = {.n = 0},
                    .steps = 10,
                    .warmup = 2,
                    .sgemm_n = 2048,
                    .device = LS_DEVICE_CPU,
                    .precision = LS_PRECISION_FP32};
  cli_opt_t const opts[] = {
      {.name = "device",
       .arg = "D",
       .kind = CLI_VALUE,
       .dst = &o.device,
       .value = BASE_V_CHOICE(devices),
       .help = "cpu or cuda"},
      {.name = "precision",
       .arg = "P",
       .kind = CLI_VALUE,
       .dst = &o.precision,
       .value = BASE_V_CHOICE(precisions),
       .help = "GEMM arithmetic: fp32 or tf32 (CUDA only: inputs\n"
               "rounded to TF32 on the tensor cores, float32 accumulation;\n"
               "state, pointwise math and the optimizer stay float32)"},
      {.name = "shape",
       .arg = "S",
       .kind = CLI_CALL,
       .dst = &o.shapes,
       .call = add_shape,
       .help = "batch, inputs, hidden, layers, window; repeat for several\n"
               "(default: 256,8,128,2,32  64,4,64,1,64  1024,16,256,2,64,\n"
               "and on cuda also 4096,32,512,2,128)"},
      {.name = "steps",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &o.steps,
       .value = BASE_V_INT(1, 100000),
       .help = "timed steps per shape; the median is reported"},
      {.name = "warmup",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &o.warmup,
       .value = BASE_V_INT(0, 100000),
       .help = "untimed steps first"},
      {.name = "threads",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &o.threads,
       .value = BASE_V_INT(1, 4096),
       .def = "all cores",
       .help = "CPU threads"},
      {.name = "no-sgemm",
       .kind = CLI_FLAG,
       .dst = &o.no_sgemm,
       .help = "skip the sgemm reference line (and the share)"},
      {.name = "sgemm-only",
       .kind = CLI_FLAG,
       .dst = &o.sgemm_only,
       .help = "print the sgemm reference line only"},
      {.name = "sgemm-n",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &o.sgemm_n,
       .value = BASE_V_INT(16, 16384),
       .help = "the reference sgemm's size (N^3)"},
      {0},
  };
  cli_spec_t const spec = {
      "bench engine",
      "[--device cpu|cuda] [--precision fp32|tf32]\n"
      "                            [--shape B,I,H,L,T]... [--steps N] [--warmup N]\n"
      "                            [--threads N] [--no-sgemm | --sgemm-only] [--sgemm-n N]",
      ABOUT,
      opts,
      NULL,
      0};
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc != CLI_EXIT_OK) return rc == CLI_DONE ? CLI_EXIT_OK : rc;
  return bench_run(&o);
}
