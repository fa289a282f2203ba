/*
 * oracle_dump: runs one training problem through the lstream engine and
 * writes every input and result to a file, for tests/oracle/torch_oracle.py
 * to replay in PyTorch and compare.
 *
 *   oracle_dump --shape I,H,L,O,T,B --seed S --opt adam|adamw --steps K
 *               --clip C --lr LR --wd WD --out FILE [--threads N]
 *
 * What it does, all on the CPU engine:
 *   1. ls_engine_init_params(S); inputs x [T, B, I], targets [T, B, O],
 *      mask [T, B] (zeros and ones, at least one 1, at least one 0 when
 *      T*B > 1) and initial states h0, c0 [L, B, H] (non-zero) drawn
 *      reproducibly from S;
 *   2. one forward + backward(loss_scale = 1/count) from (h0, c0): outputs,
 *      final states, loss, parameter gradients, d/dx, d/dh0, d/dc0;
 *   3. K optimizer steps on the same batch, each: set_state(h0, c0),
 *      forward, backward(1/count), read the gradient,
 *      ls_engine_optimizer_step (clip C, grad_scale 1), read the parameters.
 *      The oracle checks each step on its own (the gradient at the step's
 *      parameters, and the update given that gradient) as well as the whole
 *      trajectory: see torch_oracle.py for why both.
 *
 * File format (all integers uint32 and all values float32, little-endian):
 *   magic "LSORACL1" (8 bytes), tensor count
 *   per tensor: name length, name bytes (no NUL), ndim, ndim dims,
 *               prod(dims) values in row-major order (ndim 0 = one value)
 * Tensors, in order:
 *   config [6]            I, H, L, O, T, B
 *   optim [8]             lr, beta1, beta2, eps, weight_decay, decoupled,
 *                         clip_norm, steps
 *   layout/<name> [2]     offset, count of each parameter tensor in the
 *                         flat buffer (ls_param_locate, ls_param_name)
 *   params_init [n]       flat parameters after ls_engine_init_params
 *   x [T,B,I]  target [T,B,O]  mask [T,B]  h0 [L,B,H]  c0 [L,B,H]
 *   y [T,B,H]  pred [T,B,O]  hT [L,B,H]  cT [L,B,H]
 *   loss_sum []  count []    as returned by ls_engine_forward
 *   grads [n]  dx [T,B,I]  dh0 [L,B,H]  dc0 [L,B,H]
 *   step_loss [K]         loss_sum / count of each optimizer step's forward
 *   step_grad_norm [K]    gradient norm before clipping, per step
 *   step_grads [K,n]      gradient of each step, before clipping
 *   step_params [K,n]     parameters after each step (row K-1: the final ones)
 *
 * Exit status: 0 on success, 1 on any error (message on stderr), 2 on a
 * usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/kernels.h"

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */

typedef struct args_s {
  int I, H, L, O, T, B;
  uint64_t seed;
  int decoupled; /* 0 = adam, 1 = adamw */
  int steps;     /* K */
  float clip, lr, wd;
  int threads;
  const char *out;
} args_t;

static int usage(const char *fmt, const char *value) {
  fputs("oracle_dump: ", stderr);
  fprintf(stderr, fmt, value);
  fputs("\nusage: oracle_dump --shape I,H,L,O,T,B --seed S --opt adam|adamw --steps K "
        "--clip C --lr LR --wd WD --out FILE [--threads N]\n",
        stderr);
  return 2;
}

/* Strict integer in [min, max]; the whole string must be the number. */
static int parse_long(const char *s, long min, long max, long *out) {
  char *end = NULL;
  errno = 0;
  long const v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_float(const char *s, float min, float *out) {
  char *end = NULL;
  errno = 0;
  double const v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v > 1e30) return -1;
  *out = (float)v;
  return 0;
}

/* "I,H,L,O,T,B": six integers in [1, 1<<16] (the engine checks the rest). */
static int parse_shape(const char *s, args_t *a) {
  int *const dims[6] = {&a->I, &a->H, &a->L, &a->O, &a->T, &a->B};
  char buf[128];
  if (strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  char *p = buf;
  for (int i = 0; i < 6; i++) {
    char *const comma = strchr(p, ',');
    if ((comma == NULL) != (i == 5)) return -1;
    if (comma != NULL) *comma = '\0';
    long v;
    if (parse_long(p, 1, 1 << 16, &v) != 0) return -1;
    *dims[i] = (int)v;
    p = comma + 1;
  }
  return 0;
}

static int parse_args(int argc, char **argv, args_t *a) {
  memset(a, 0, sizeof *a);
  a->decoupled = -1;
  /* Each required option sets its bit. */
  enum { SHAPE = 1, SEED = 2, STEPS = 4, CLIP = 8, LR = 16, WD = 32, ALL = 63 };
  int have = 0;
  for (int i = 1; i < argc; i++) {
    const char *const opt = argv[i];
    if (i + 1 >= argc) return usage("option %s needs a value", opt);
    const char *const val = argv[++i];
    long v;
    if (strcmp(opt, "--shape") == 0) {
      if (parse_shape(val, a) != 0) return usage("bad --shape '%s': want I,H,L,O,T,B >= 1", val);
      have |= SHAPE;
    } else if (strcmp(opt, "--seed") == 0) {
      char *end = NULL;
      errno = 0;
      unsigned long long const s = strtoull(val, &end, 10);
      if (errno != 0 || end == val || *end != '\0' || val[0] == '-')
        return usage("bad --seed '%s': want an unsigned integer", val);
      a->seed = (uint64_t)s;
      have |= SEED;
    } else if (strcmp(opt, "--opt") == 0) {
      if (strcmp(val, "adam") == 0)
        a->decoupled = 0;
      else if (strcmp(val, "adamw") == 0)
        a->decoupled = 1;
      else
        return usage("bad --opt '%s': want adam or adamw", val);
    } else if (strcmp(opt, "--steps") == 0) {
      if (parse_long(val, 0, 100000, &v) != 0) return usage("bad --steps '%s'", val);
      a->steps = (int)v;
      have |= STEPS;
    } else if (strcmp(opt, "--threads") == 0) {
      if (parse_long(val, 0, 4096, &v) != 0) return usage("bad --threads '%s'", val);
      a->threads = (int)v;
    } else if (strcmp(opt, "--clip") == 0) {
      /* <= 0 means no clipping, as in ls_optim_t */
      if (parse_float(val, -1e30f, &a->clip) != 0) return usage("bad --clip '%s'", val);
      have |= CLIP;
    } else if (strcmp(opt, "--lr") == 0) {
      if (parse_float(val, 0.0f, &a->lr) != 0) return usage("bad --lr '%s'", val);
      have |= LR;
    } else if (strcmp(opt, "--wd") == 0) {
      if (parse_float(val, 0.0f, &a->wd) != 0) return usage("bad --wd '%s'", val);
      have |= WD;
    } else if (strcmp(opt, "--out") == 0) {
      a->out = val;
    } else {
      return usage("unknown option %s", opt);
    }
  }
  if (have != ALL || a->decoupled < 0 || a->out == NULL)
    return usage("%s", "every option but --threads is required");
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Reproducible inputs                                                       */

/* splitmix64: the inputs depend only on the seed, on every machine. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static float uniform(uint64_t *state, float lo, float hi) {
  double const u = (double)(splitmix64(state) >> 11) * 0x1.0p-53;
  return (float)(lo + (hi - lo) * u);
}

static void fill_uniform(float *dst, size_t n, uint64_t *state, float lo, float hi) {
  for (size_t i = 0; i < n; i++)
    dst[i] = uniform(state, lo, hi);
}

/* About 30% zeros; entry 0 is forced to 1 and, when there are two or more
 * entries, the last one to 0, so the mask always has both. */
static void fill_mask(float *mask, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; i++)
    mask[i] = uniform(state, 0.0f, 1.0f) < 0.3f ? 0.0f : 1.0f;
  mask[0] = 1.0f;
  if (n > 1) mask[n - 1] = 0.0f;
}

/* ------------------------------------------------------------------------ */
/* Output file                                                               */

typedef struct writer_s {
  FILE *f;
  const char *path;
  int failed;
} writer_t;

static void put_bytes(writer_t *w, const void *p, size_t n) {
  if (w->failed) return;
  if (fwrite(p, 1, n, w->f) != n) {
    fprintf(stderr, "oracle_dump: writing %s failed: %s\n", w->path, strerror(errno));
    w->failed = 1;
  }
}

static void put_u32(writer_t *w, uint32_t v) {
  unsigned char const b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 24)};
  put_bytes(w, b, sizeof b);
}

/* One tensor: name, shape, values (float32, little-endian, in chunks). */
static void put_tensor(writer_t *w, const char *name, int ndim, const size_t *dims,
                       const float *v) {
  size_t n = 1;
  put_u32(w, (uint32_t)strlen(name));
  put_bytes(w, name, strlen(name));
  put_u32(w, (uint32_t)ndim);
  for (int d = 0; d < ndim; d++) {
    if (dims[d] > UINT32_MAX && !w->failed) {
      fprintf(stderr, "oracle_dump: tensor %s: dimension %zu does not fit the format's uint32\n",
              name, dims[d]);
      w->failed = 1;
    }
    put_u32(w, (uint32_t)dims[d]);
    n *= dims[d];
  }
  if (w->failed) return;
  unsigned char buf[4096];
  size_t used = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], sizeof u);
    for (int k = 0; k < 4; k++)
      buf[used++] = (unsigned char)(u >> (8 * k));
    if (used == sizeof buf || i + 1 == n) {
      put_bytes(w, buf, used);
      used = 0;
    }
  }
}

static void put_1d(writer_t *w, const char *name, size_t n, const float *v) {
  put_tensor(w, name, 1, &n, v);
}

static void put_3d(writer_t *w, const char *name, size_t d0, size_t d1, size_t d2, const float *v) {
  size_t const dims[3] = {d0, d1, d2};
  put_tensor(w, name, 3, dims, v);
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */

typedef struct bufs_s {
  float *params_init, *grads;           /* (n) */
  float *x, *dx;                        /* (T, B, I) */
  float *target, *pred;                 /* (T, B, O) */
  float *mask;                          /* (T, B) */
  float *y;                             /* (T, B, H) */
  float *h0, *c0, *hT, *cT, *dh0, *dc0; /* (L, B, H) */
  float *step_loss, *step_grad_norm;    /* (K) */
  float *step_grads, *step_params;      /* (K, n) */
} bufs_t;

static void bufs_free(bufs_t *b) {
  float *const all[] = {b->params_init, b->grads,      b->x,         b->dx,
                        b->target,      b->pred,       b->mask,      b->y,
                        b->h0,          b->c0,         b->hT,        b->cT,
                        b->dh0,         b->dc0,        b->step_loss, b->step_grad_norm,
                        b->step_grads,  b->step_params};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]);
}

static int bufs_alloc(bufs_t *b, const args_t *a, size_t n) {
  size_t const TB = (size_t)a->T * (size_t)a->B, LBH = (size_t)a->L * a->B * a->H;
  size_t const K = (size_t)a->steps;
  struct {
    float **p;
    size_t n;
  } const want[] = {
      {&b->params_init, n},    {&b->grads, n},          {&b->x, TB * a->I},
      {&b->dx, TB * a->I},     {&b->target, TB * a->O}, {&b->pred, TB * a->O},
      {&b->mask, TB},          {&b->y, TB * a->H},      {&b->h0, LBH},
      {&b->c0, LBH},           {&b->hT, LBH},           {&b->cT, LBH},
      {&b->dh0, LBH},          {&b->dc0, LBH},          {&b->step_loss, K},
      {&b->step_grad_norm, K}, {&b->step_grads, K * n}, {&b->step_params, K * n},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    *want[i].p = calloc(want[i].n > 0 ? want[i].n : 1, sizeof(float)); /* K may be 0 */
    if (*want[i].p == NULL) {
      fprintf(stderr, "oracle_dump: no memory for %zu floats\n", want[i].n);
      return -1;
    }
  }
  return 0;
}

/* Prints what failed with lstream's message; returns 1 (the exit status). */
static int fail(ls_err_t err, const char *what) {
  fprintf(stderr, "oracle_dump: %s failed: %s: %s\n", what, ls_err2str(err), ls_last_error());
  return 1;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    ls_err_t const err_ = (call);                                                                  \
    if (err_ != LS_OK) return fail(err_, #call);                                                   \
  } while (0)

/* Steps 1-3 of the header comment, into b. */
static int run_engine(ls_engine_t *eng, const args_t *a, bufs_t *b, size_t n, float *loss_sum,
                      float *count) {
  uint64_t rng = a->seed ^ 0x5DEECE66Dull; /* a stream apart from the parameters' */
  size_t const TB = (size_t)a->T * (size_t)a->B, LBH = (size_t)a->L * a->B * a->H;
  fill_uniform(b->x, TB * a->I, &rng, -1.0f, 1.0f);
  fill_uniform(b->target, TB * a->O, &rng, -1.0f, 1.0f);
  fill_mask(b->mask, TB, &rng);
  fill_uniform(b->h0, LBH, &rng, -0.5f, 0.5f);
  fill_uniform(b->c0, LBH, &rng, -0.5f, 0.5f);

  CHECK(ls_engine_init_params(eng, a->seed));
  CHECK(ls_engine_read_params(eng, b->params_init, n));

  double sum = 0.0, cnt = 0.0;
  CHECK(ls_engine_set_state(eng, a->B, b->h0, b->c0));
  CHECK(ls_engine_forward(eng, a->T, a->B, b->x, b->target, b->mask, &sum, &cnt));
  if (!(cnt > 0.0)) {
    fprintf(stderr, "oracle_dump: the forward counted %g valid targets; want > 0\n", cnt);
    return 1;
  }
  CHECK(ls_engine_backward(eng, (float)(1.0 / cnt)));
  CHECK(ls_engine_read_outputs(eng, b->y, b->pred, b->hT, b->cT));
  CHECK(ls_engine_read_grads(eng, b->grads, n));
  CHECK(ls_engine_read_input_grads(eng, b->dx, b->dh0, b->dc0));
  CHECK(ls_engine_zero_grads(eng));
  *loss_sum = (float)sum;
  *count = (float)cnt;

  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.lr = a->lr;
  opt.weight_decay = a->wd;
  opt.decoupled = a->decoupled;
  opt.clip_norm = a->clip;
  for (int k = 0; k < a->steps; k++) {
    CHECK(ls_engine_set_state(eng, a->B, b->h0, b->c0));
    CHECK(ls_engine_forward(eng, a->T, a->B, b->x, b->target, b->mask, &sum, &cnt));
    CHECK(ls_engine_backward(eng, (float)(1.0 / cnt)));
    CHECK(ls_engine_read_grads(eng, b->step_grads + (size_t)k * n, n));
    CHECK(ls_engine_optimizer_step(eng, &opt, 1.0f, &b->step_grad_norm[k]));
    CHECK(ls_engine_read_params(eng, b->step_params + (size_t)k * n, n));
    b->step_loss[k] = (float)(sum / cnt);
  }
  if (ls_engine_optimizer_steps(eng) != a->steps) {
    fprintf(stderr, "oracle_dump: the engine counts %lld optimizer steps; want %d\n",
            (long long)ls_engine_optimizer_steps(eng), a->steps);
    return 1;
  }
  return 0;
}

/* layout/<name> [2] = offset, count of one parameter tensor. On an lstream
 * error, closes the file and returns 1. */
static int put_layout(writer_t *w, const ls_shape_t *shape, int layer, ls_param_kind_t kind) {
  char name[64], full[80];
  size_t off = 0, cnt = 0;
  ls_err_t err = ls_param_name(layer, kind, name, sizeof name);
  if (err == LS_OK) err = ls_param_locate(shape, layer, kind, &off, &cnt);
  if (err != LS_OK) {
    fclose(w->f);
    return fail(err, "describing the parameter layout");
  }
  snprintf(full, sizeof full, "layout/%s", name);
  float const oc[2] = {(float)off, (float)cnt};
  put_1d(w, full, 2, oc);
  return 0;
}

/* The file of the header comment. */
static int write_dump(const args_t *a, const bufs_t *b, size_t n, float loss_sum, float count) {
  ls_shape_t const shape = {a->I, a->H, a->L, a->O};
  size_t const T = (size_t)a->T, B = (size_t)a->B, L = (size_t)a->L, H = (size_t)a->H;
  /* config, optim; 4 layout entries per layer + 2 for the head; 20 more. */
  uint32_t const n_tensors = 2 + (4 * (uint32_t)a->L + 2) + 20;

  writer_t w = {fopen(a->out, "wb"), a->out, 0};
  if (w.f == NULL) {
    fprintf(stderr, "oracle_dump: cannot create %s: %s\n", a->out, strerror(errno));
    return 1;
  }
  put_bytes(&w, "LSORACL1", 8);
  put_u32(&w, n_tensors);
  float const config[6] = {(float)a->I, (float)a->H, (float)a->L,
                           (float)a->O, (float)a->T, (float)a->B};
  put_1d(&w, "config", 6, config);
  ls_optim_t opt;
  ls_optim_init(&opt);
  float const optim[8] = {a->lr, opt.beta1,           opt.beta2, opt.eps,
                          a->wd, (float)a->decoupled, a->clip,   (float)a->steps};
  put_1d(&w, "optim", 8, optim);

  /* The layout as the library states it, for the oracle to check against
   * its own reading of kernels.h. */
  for (int k = 0; k < a->L; k++)
    for (int j = 0; j < 4; j++)
      if (put_layout(&w, &shape, k, (ls_param_kind_t)(LS_PARAM_WEIGHT_IH + j)) != 0) return 1;
  if (put_layout(&w, &shape, 0, LS_PARAM_HEAD_WEIGHT) != 0 ||
      put_layout(&w, &shape, 0, LS_PARAM_HEAD_BIAS) != 0)
    return 1;
  put_1d(&w, "params_init", n, b->params_init);
  put_3d(&w, "x", T, B, (size_t)a->I, b->x);
  put_3d(&w, "target", T, B, (size_t)a->O, b->target);
  size_t const tb[2] = {T, B};
  put_tensor(&w, "mask", 2, tb, b->mask);
  put_3d(&w, "h0", L, B, H, b->h0);
  put_3d(&w, "c0", L, B, H, b->c0);
  put_3d(&w, "y", T, B, H, b->y);
  put_3d(&w, "pred", T, B, (size_t)a->O, b->pred);
  put_3d(&w, "hT", L, B, H, b->hT);
  put_3d(&w, "cT", L, B, H, b->cT);
  put_tensor(&w, "loss_sum", 0, NULL, &loss_sum);
  put_tensor(&w, "count", 0, NULL, &count);
  put_1d(&w, "grads", n, b->grads);
  put_3d(&w, "dx", T, B, (size_t)a->I, b->dx);
  put_3d(&w, "dh0", L, B, H, b->dh0);
  put_3d(&w, "dc0", L, B, H, b->dc0);
  put_1d(&w, "step_loss", (size_t)a->steps, b->step_loss);
  put_1d(&w, "step_grad_norm", (size_t)a->steps, b->step_grad_norm);
  size_t const kn[2] = {(size_t)a->steps, n};
  put_tensor(&w, "step_grads", 2, kn, b->step_grads);
  put_tensor(&w, "step_params", 2, kn, b->step_params);

  if (fclose(w.f) != 0 && !w.failed) {
    fprintf(stderr, "oracle_dump: closing %s failed: %s\n", a->out, strerror(errno));
    w.failed = 1;
  }
  return w.failed ? 1 : 0;
}

int main(int argc, char **argv) {
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc != 0) return rc;

  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = (ls_shape_t){a.I, a.H, a.L, a.O};
  conf.max_batch = a.B;
  conf.max_window = a.T;
  conf.threads = a.threads;
  ls_engine_t *eng = NULL;
  ls_err_t const err = ls_engine_new(&conf, &eng);
  if (err != LS_OK) return fail(err, "ls_engine_new");
  size_t const n = ls_engine_param_count(eng);

  bufs_t b;
  memset(&b, 0, sizeof b);
  float loss_sum = 0.0f, count = 0.0f;
  rc = bufs_alloc(&b, &a, n) != 0 ? 1 : 0;
  if (rc == 0) rc = run_engine(eng, &a, &b, n, &loss_sum, &count);
  if (rc == 0) rc = write_dump(&a, &b, n, loss_sum, count);
  bufs_free(&b);
  ls_engine_destroy(eng);
  return rc;
}
