/*
 * oracle_dump: runs one training problem through the lstream engine and
 * writes every input and result to a file, for tests/oracle/torch_oracle.py
 * to replay in PyTorch and compare.
 *
 *   oracle_dump --shape I,H,L,O,T,B --seed S --opt adam|adamw --steps K
 *               --clip C --lr LR --wd WD --out FILE [--threads N]
 *               [--taus T0,...,T{O-1}] [--elem]
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
 * The losses per column (kernels.h, "Loss"; torch_oracle.py --loss):
 *   --taus  each head output's loss (ls_engine_set_loss): 0 = squared
 *           error, else the pinball loss of that level;
 *   --elem  a mask per target [T, B, O] (ls_engine_forward_elem) instead of
 *           one per row: about 30% zeros, 10% weights of 0.5, target NaN
 *           where the mask is 0; every third row's last two steps unknown,
 *           every even row given lengths T (its state after step T - 1,
 *           whatever its mask says), the others none.
 * With either, every fifth target of the known ones (i % 5 == 2) is set to
 * the engine's own prediction first (a predictions-only forward from the
 * same state), so that those errors are exactly 0 (a tie: the pinball
 * loss's gradient is 0 there); each tie is checked to hold in the forward.
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
 * then, with --taus or --elem only:
 *   taus [O]              each column's level, 0 = squared error
 *   lengths [B]           the rows' lengths given (--elem; -1 = none given)
 *   ties []               how many targets were set to their prediction
 *   loss_cols [O]  count_cols [O]   ls_engine_read_loss_cols of the forward
 *   step_pred [K,T,B,O]   the predictions of each optimizer step's forward
 *                         (where each error's sign is lstream's: its side of
 *                         the pinball loss's kink)
 * and mask is [T,B,O] with --elem.
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
  const char *taus_arg; /* --taus, parsed once O is known */
  float *taus;          /* (O) with --taus or --elem, else NULL */
  int elem;             /* --elem */
  int loss;             /* --taus or --elem: the dump holds the loss's tensors */
} args_t;

static int usage(const char *fmt, const char *value) {
  fputs("oracle_dump: ", stderr);
  fprintf(stderr, fmt, value);
  fputs("\nusage: oracle_dump --shape I,H,L,O,T,B --seed S --opt adam|adamw --steps K "
        "--clip C --lr LR --wd WD --out FILE [--threads N] [--taus T0,...] [--elem]\n",
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
    if (strcmp(opt, "--elem") == 0) {
      a->elem = 1;
      continue;
    }
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
    } else if (strcmp(opt, "--taus") == 0) {
      a->taus_arg = val;
    } else {
      return usage("unknown option %s", opt);
    }
  }
  if (have != ALL || a->decoupled < 0 || a->out == NULL)
    return usage("%s", "every option but --threads, --taus and --elem is required");
  a->loss = a->elem || a->taus_arg != NULL;
  if (!a->loss) return 0;
  a->taus = calloc((size_t)a->O, sizeof(float)); /* 0: squared error */
  if (a->taus == NULL) return usage("%s", "no memory for the levels");
  const char *p = a->taus_arg;
  for (int o = 0; p != NULL && o < a->O; o++) {
    char *end = NULL;
    errno = 0;
    double const v = strtod(p, &end);
    if (errno != 0 || end == p || !(v >= 0.0 && v < 1.0) || *end != (o + 1 < a->O ? ',' : '\0'))
      return usage("bad --taus '%s': want O levels in [0, 1) separated by commas", a->taus_arg);
    a->taus[o] = (float)v;
    p = end + 1;
  }
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
  /* The losses per column (--taus, --elem); mask is (T, B, O) with --elem. */
  float *loss_cols, *count_cols; /* (O) */
  float *step_pred;              /* (K, T, B, O) */
  int *lengths;                  /* (B) the rows' lengths, -1 = none given */
  int *tie;                      /* (T, B, O) 1 where the target was set to its prediction */
  float ties;                    /* how many */
} bufs_t;

static void bufs_free(bufs_t *b) {
  float *const all[] = {b->params_init, b->grads,      b->x,         b->dx,
                        b->target,      b->pred,       b->mask,      b->y,
                        b->h0,          b->c0,         b->hT,        b->cT,
                        b->dh0,         b->dc0,        b->step_loss, b->step_grad_norm,
                        b->step_grads,  b->step_params};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    free(all[i]);
  free(b->loss_cols), free(b->count_cols), free(b->lengths), free(b->tie), free(b->step_pred);
}

static int bufs_alloc(bufs_t *b, const args_t *a, size_t n) {
  size_t const TB = (size_t)a->T * (size_t)a->B, LBH = (size_t)a->L * a->B * a->H;
  size_t const K = (size_t)a->steps, M = a->elem ? (size_t)a->O : 1; /* mask per row */
  struct {
    float **p;
    size_t n;
  } const want[] = {
      {&b->params_init, n},    {&b->grads, n},          {&b->x, TB * a->I},
      {&b->dx, TB * a->I},     {&b->target, TB * a->O}, {&b->pred, TB * a->O},
      {&b->mask, TB * M},      {&b->y, TB * a->H},      {&b->h0, LBH},
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
  b->loss_cols = calloc((size_t)a->O, sizeof(float));
  b->count_cols = calloc((size_t)a->O, sizeof(float));
  b->lengths = calloc((size_t)a->B, sizeof(int));
  b->tie = calloc(TB * a->O, sizeof(int));
  b->step_pred = calloc((K > 0 ? K : 1) * TB * a->O, sizeof(float));
  if (!b->loss_cols || !b->count_cols || !b->lengths || !b->tie || !b->step_pred) {
    fprintf(stderr, "oracle_dump: no memory for the losses' buffers\n");
    return -1;
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

/* --elem's mask [T, B, O]: about 30% zeros and 10% weights of 0.5, entry 0
 * a 1; every third row's last two steps unknown (T > 2). The rows'
 * lengths: for an even seed, T for even rows (past their known targets in
 * the rows with unknown steps) and each odd row's last step with a known
 * target + 1; for an odd seed none (-1: the engine takes them from the
 * mask). */
static void fill_elem_mask(const args_t *a, bufs_t *b, uint64_t *state) {
  size_t const O = (size_t)a->O;
  for (int t = 0; t < a->T; t++)
    for (int r = 0; r < a->B; r++)
      for (size_t o = 0; o < O; o++) {
        float const u = uniform(state, 0.0f, 1.0f);
        float m = u < 0.3f ? 0.0f : u < 0.4f ? 0.5f : 1.0f;
        if (a->T > 2 && r % 3 == 1 && t >= a->T - 2) m = 0.0f;
        b->mask[((size_t)t * a->B + r) * O + o] = m;
      }
  b->mask[0] = 1.0f;
  for (int r = 0; r < a->B; r++) {
    int last = 0;
    for (int t = 0; t < a->T; t++)
      for (size_t o = 0; o < O; o++)
        if (b->mask[((size_t)t * a->B + r) * O + o] != 0.0f) last = t + 1;
    b->lengths[r] = a->seed % 2 ? -1 : r % 2 == 0 ? a->T : last;
  }
}

/* The window's forward with targets, as the options say. */
static ls_err_t forward(ls_engine_t *eng, const args_t *a, const bufs_t *b, const float *target,
                        double *sum, double *cnt) {
  if (!a->elem)
    return ls_engine_forward(eng, a->T, a->B, b->x, target, target ? b->mask : NULL, sum, cnt);
  return ls_engine_forward_elem(eng, a->T, a->B, b->x, target, target ? b->mask : NULL,
                                b->lengths[0] >= 0 ? b->lengths : NULL, sum, cnt);
}

/* With --taus or --elem: the losses set, every fifth known target set to
 * its prediction (a predictions-only forward from the same state), and the
 * unknown ones (--elem) NaN. */
static int plant_ties(ls_engine_t *eng, const args_t *a, bufs_t *b) {
  size_t const NO = (size_t)a->T * a->B * a->O;
  ls_loss_col_t *const cols = calloc((size_t)a->O, sizeof *cols);
  if (cols == NULL) {
    fprintf(stderr, "oracle_dump: no memory for the losses\n");
    return 1;
  }
  for (int o = 0; o < a->O; o++)
    cols[o] = (ls_loss_col_t){a->taus[o] > 0.0f ? LS_LOSS_PINBALL : LS_LOSS_MSE, a->taus[o]};
  ls_err_t const err = ls_engine_set_loss(eng, cols, a->O);
  free(cols);
  CHECK(err);
  CHECK(ls_engine_set_state(eng, a->B, b->h0, b->c0));
  CHECK(forward(eng, a, b, NULL, NULL, NULL));
  CHECK(ls_engine_read_outputs(eng, NULL, b->pred, NULL, NULL));
  for (size_t i = 0; i < NO; i++) {
    float const m = a->elem ? b->mask[i] : b->mask[i / (size_t)a->O];
    b->tie[i] = m != 0.0f && i % 5 == 2;
    if (b->tie[i]) b->target[i] = b->pred[i], b->ties++;
    if (a->elem && m == 0.0f) b->target[i] = NAN;
  }
  return 0;
}

/* The ties planted hold in the forward that follows, whose column
 * figures go to b. */
static int check_ties(ls_engine_t *eng, const args_t *a, bufs_t *b) {
  size_t const NO = (size_t)a->T * a->B * a->O;
  for (size_t i = 0; i < NO; i++)
    if (b->tie[i] && b->pred[i] != b->target[i]) {
      fprintf(stderr, "oracle_dump: target %zu was set to its prediction %a, which is now %a\n", i,
              (double)b->target[i], (double)b->pred[i]);
      return 1;
    }
  double sums[64], counts[64]; /* O <= 64 with --taus */
  if (a->O > 64) {
    fprintf(stderr, "oracle_dump: --taus and --elem take O <= 64, not %d\n", a->O);
    return 1;
  }
  CHECK(ls_engine_read_loss_cols(eng, sums, counts, a->O));
  for (int o = 0; o < a->O; o++)
    b->loss_cols[o] = (float)sums[o], b->count_cols[o] = (float)counts[o];
  return 0;
}

/* Steps 1-3 of the header comment, into b. */
static int run_engine(ls_engine_t *eng, const args_t *a, bufs_t *b, size_t n, float *loss_sum,
                      float *count) {
  uint64_t rng = a->seed ^ 0x5DEECE66Dull; /* a stream apart from the parameters' */
  size_t const TB = (size_t)a->T * (size_t)a->B, LBH = (size_t)a->L * a->B * a->H;
  fill_uniform(b->x, TB * a->I, &rng, -1.0f, 1.0f);
  fill_uniform(b->target, TB * a->O, &rng, -1.0f, 1.0f);
  if (a->elem)
    fill_elem_mask(a, b, &rng);
  else
    fill_mask(b->mask, TB, &rng);
  fill_uniform(b->h0, LBH, &rng, -0.5f, 0.5f);
  fill_uniform(b->c0, LBH, &rng, -0.5f, 0.5f);

  for (int r = 0; r < a->B && !a->elem; r++)
    b->lengths[r] = -1; /* none given (dumped with --taus) */
  CHECK(ls_engine_init_params(eng, a->seed));
  CHECK(ls_engine_read_params(eng, b->params_init, n));
  if (a->loss && plant_ties(eng, a, b) != 0) return 1;

  double sum = 0.0, cnt = 0.0;
  CHECK(ls_engine_set_state(eng, a->B, b->h0, b->c0));
  CHECK(forward(eng, a, b, b->target, &sum, &cnt));
  if (!(cnt > 0.0)) {
    fprintf(stderr, "oracle_dump: the forward counted %g valid targets; want > 0\n", cnt);
    return 1;
  }
  CHECK(ls_engine_backward(eng, (float)(1.0 / cnt)));
  CHECK(ls_engine_read_outputs(eng, b->y, b->pred, b->hT, b->cT));
  if (a->loss && check_ties(eng, a, b) != 0) return 1;
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
    CHECK(forward(eng, a, b, b->target, &sum, &cnt));
    CHECK(ls_engine_read_outputs(eng, NULL, b->step_pred + (size_t)k * TB * a->O, NULL, NULL));
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
  uint32_t const n_tensors = 2 + (4 * (uint32_t)a->L + 2) + 20 + (a->loss ? 6 : 0);

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
  if (a->elem)
    put_3d(&w, "mask", T, B, (size_t)a->O, b->mask);
  else
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
  if (a->loss) {
    float *const lengths = malloc(B * sizeof(float));
    for (size_t r = 0; lengths != NULL && r < B; r++)
      lengths[r] = (float)b->lengths[r];
    if (lengths == NULL) {
      fprintf(stderr, "oracle_dump: no memory for the lengths\n");
      w.failed = 1;
    }
    put_1d(&w, "taus", (size_t)a->O, a->taus);
    if (lengths != NULL) put_1d(&w, "lengths", B, lengths);
    put_tensor(&w, "ties", 0, NULL, &b->ties);
    put_1d(&w, "loss_cols", (size_t)a->O, b->loss_cols);
    put_1d(&w, "count_cols", (size_t)a->O, b->count_cols);
    size_t const kp[4] = {(size_t)a->steps, T, B, (size_t)a->O};
    put_tensor(&w, "step_pred", 4, kp, b->step_pred);
    free(lengths);
  }

  if (fclose(w.f) != 0 && !w.failed) {
    fprintf(stderr, "oracle_dump: closing %s failed: %s\n", a->out, strerror(errno));
    w.failed = 1;
  }
  return w.failed ? 1 : 0;
}

int main(int argc, char **argv) {
  args_t a;
  int rc = parse_args(argc, argv, &a);
  if (rc != 0) {
    free(a.taus);
    return rc;
  }

  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = (ls_shape_t){a.I, a.H, a.L, a.O};
  conf.max_batch = a.B;
  conf.max_window = a.T;
  conf.threads = a.threads;
  ls_engine_t *eng = NULL;
  ls_err_t const err = ls_engine_new(&conf, &eng);
  if (err != LS_OK) {
    free(a.taus);
    return fail(err, "ls_engine_new");
  }
  size_t const n = ls_engine_param_count(eng);

  bufs_t b;
  memset(&b, 0, sizeof b);
  float loss_sum = 0.0f, count = 0.0f;
  rc = bufs_alloc(&b, &a, n) != 0 ? 1 : 0;
  if (rc == 0) rc = run_engine(eng, &a, &b, n, &loss_sum, &count);
  if (rc == 0) rc = write_dump(&a, &b, n, loss_sum, count);
  bufs_free(&b);
  ls_engine_destroy(eng);
  free(a.taus);
  return rc;
}
