/*
 * The engine: argument checks, buffers, and the order of a training step,
 * built from the primitives of a backend (kernels/backend.h). Public
 * contract in include/lstream/kernels.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ------------------------------------------------------------------------ */
/* Configuration and lifetime                                                */

void ls_engine_conf_init(ls_engine_conf_t *conf) {
  if (conf == NULL) return;
  memset(conf, 0, sizeof *conf);
  conf->shape.input_size = 1;
  conf->shape.hidden_size = 64;
  conf->shape.num_layers = 1;
  conf->shape.output_size = 1;
  conf->max_batch = 64;
  conf->max_window = 32;
  conf->device = LS_DEVICE_CPU;
  conf->precision = LS_PRECISION_FP32;
}

#define LS_MAX_BATCH  (1 << 20)
#define LS_MAX_WINDOW (1 << 16)

static ls_err_t conf_check(const ls_engine_conf_t *conf) {
  LS_RETURN_IF(conf == NULL, LS_ERR_INVALID_ARG, "engine configuration is NULL");
  LS_FORWARD_IF_ERROR(ls_shape_check(&conf->shape));
  LS_RETURN_IF(conf->max_batch < 1 || conf->max_batch > LS_MAX_BATCH, LS_ERR_INVALID_ARG,
               "max_batch=%d is out of range [1, %d]", conf->max_batch, LS_MAX_BATCH);
  LS_RETURN_IF(conf->max_window < 1 || conf->max_window > LS_MAX_WINDOW, LS_ERR_INVALID_ARG,
               "max_window=%d is out of range [1, %d]", conf->max_window, LS_MAX_WINDOW);
  LS_RETURN_IF(conf->threads < 0 || conf->threads > 4096, LS_ERR_INVALID_ARG,
               "threads=%d is out of range [0 (all cores), 4096]", conf->threads);
  LS_RETURN_IF(conf->precision != LS_PRECISION_FP32 && conf->precision != LS_PRECISION_TF32,
               LS_ERR_INVALID_ARG, "unknown precision %d: expected fp32 (%d) or tf32 (%d)",
               (int)conf->precision, (int)LS_PRECISION_FP32, (int)LS_PRECISION_TF32);
  /* Row counts of the biggest GEMM (T*B rows of 4H) must fit in an int. */
  double const rows = (double)conf->max_batch * (double)conf->max_window;
  LS_RETURN_IF(rows * 4.0 * conf->shape.hidden_size > 2147483647.0, LS_ERR_INVALID_ARG,
               "max_batch*max_window*4H = %.0f exceeds 2^31: lower the batch or window",
               rows * 4.0 * conf->shape.hidden_size);
  return LS_OK;
}

static ls_err_t select_backend(ls_device_t device, const ls_backend_ops_t **ops) {
  switch (device) {
  case LS_DEVICE_CPU: *ops = &ls_backend_cpu; return LS_OK;
  case LS_DEVICE_CUDA:
#ifdef LSTREAM_HAVE_CUDA
    *ops = &ls_backend_cuda;
    return LS_OK;
#else
    return ls_error_set(LS_ERR_UNSUPPORTED,
                        "this build has no CUDA backend: rebuild where nvcc is found, "
                        "or use --device cpu");
#endif
  }
  return ls_error_set(LS_ERR_INVALID_ARG, "unknown device %d", (int)device);
}

ls_err_t ls_device_count(ls_device_t device, int *count) {
  LS_RETURN_IF(count == NULL, LS_ERR_INVALID_ARG, "count is NULL");
  *count = 0;
  const ls_backend_ops_t *ops = NULL;
  LS_FORWARD_IF_ERROR(select_backend(device, &ops));
  *count = ops->device_count();
  return LS_OK;
}

ls_err_t engine_alloc(ls_engine_t *e, float **ptr, size_t floats) {
  return e->ops->alloc(e->ctx, floats * sizeof(float), (void **)ptr);
}

ls_err_t ls_engine_new(const ls_engine_conf_t *conf, ls_engine_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(conf_check(conf));
  const ls_backend_ops_t *ops = NULL;
  LS_FORWARD_IF_ERROR(select_backend(conf->device, &ops));
  LS_RETURN_IF(conf->precision == LS_PRECISION_TF32 && conf->device != LS_DEVICE_CUDA,
               LS_ERR_UNSUPPORTED,
               "precision tf32 (TF32 tensor-core GEMMs) needs the CUDA engine (--device cuda); "
               "the CPU engine computes in fp32 only");

  ls_engine_t *e = calloc(1, sizeof *e);
  LS_RETURN_IF(e == NULL, LS_ERR_NOMEM, "no memory for the engine");
  e->conf = *conf;
  e->ops = ops;
  e->state_B = -1;
  ls_err_t err = ops->ctx_new(&e->conf, &e->ctx);
  if (err != LS_OK) {
    free(e);
    return err;
  }
  size_t const I = (size_t)conf->shape.input_size, H = (size_t)conf->shape.hidden_size;
  size_t const L = (size_t)conf->shape.num_layers, O = (size_t)conf->shape.output_size;
  size_t const Tm = (size_t)conf->max_window, Bm = (size_t)conf->max_batch;
  (void)ls_param_count(&conf->shape, &e->n_params);
  e->gates_stride = Tm * Bm * 4 * H;
  e->hs_stride = (Tm + 1) * Bm * H;
  e->tcs_stride = Tm * Bm * H;

  struct {
    float **ptr;
    size_t floats;
  } const bufs[] = {
      {&e->params, e->n_params},     {&e->grads, e->n_params},
      {&e->adam_m, e->n_params},     {&e->adam_v, e->n_params},
      {&e->x, (Tm + 1) * Bm * I},    {&e->target, Tm * Bm * O},
      {&e->mask, Tm * Bm * O},       {&e->gates, L * e->gates_stride},
      {&e->hs, L * e->hs_stride},    {&e->cs, L * e->hs_stride},
      {&e->tcs, L * e->tcs_stride},  {&e->pred, Tm * Bm * O},
      {&e->dpred, Tm * Bm * O},      {&e->dh, Tm * Bm * H},
      {&e->dgates, Tm * Bm * 4 * H}, {&e->dx, Tm * Bm * I},
      {&e->dh0, L * Bm * H},         {&e->dc0, L * Bm * H},
  };
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0] && err == LS_OK; i++)
    err = engine_alloc(e, bufs[i].ptr, bufs[i].floats);
  if (err == LS_OK) err = ops->alloc(e->ctx, SCALARS * sizeof(double), (void **)&e->scalars);
  if (err == LS_OK) err = ops->alloc(e->ctx, sizeof(ls_optim_args_t), (void **)&e->optim_args);
  if (err == LS_OK) err = engine_alloc(e, &e->tau, O); /* zero: every column squared error */
  if (err == LS_OK) err = ops->alloc(e->ctx, O * sizeof(double), (void **)&e->col_loss);
  if (err == LS_OK && (e->scatter_rows = malloc(Bm * sizeof *e->scatter_rows)) == NULL)
    err = ls_error_set(LS_ERR_NOMEM, "no memory for the engine's %zu slot checks", Bm);
  e->last = calloc(Bm, sizeof *e->last);
  e->skip = calloc(Bm, sizeof *e->skip);
  if (err == LS_OK && (e->last == NULL || e->skip == NULL))
    err = ls_error_set(LS_ERR_NOMEM, "no memory for the rows of a batch of %zu", Bm);
  e->tau_host = calloc(O, sizeof *e->tau_host); /* as e->tau */
  e->col_count = calloc(O, sizeof *e->col_count);
  if (err == LS_OK && (e->tau_host == NULL || e->col_count == NULL))
    err = ls_error_set(LS_ERR_NOMEM, "no memory for the losses of %zu outputs", O);
  if (err != LS_OK) {
    ls_engine_destroy(e);
    return err;
  }
  *out = e;
  return LS_OK;
}

void ls_engine_destroy(ls_engine_t *e) {
  if (e == NULL) return;
  float *const bufs[] = {e->params, e->grads, e->adam_m, e->adam_v, e->x,   e->target,
                         e->mask,   e->gates, e->hs,     e->cs,     e->tcs, e->pred,
                         e->dpred,  e->dh,    e->dgates, e->dx,     e->dh0, e->dc0};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i] != NULL) e->ops->free(e->ctx, bufs[i]);
  if (e->scalars != NULL) e->ops->free(e->ctx, e->scalars);
  if (e->optim_args != NULL) e->ops->free(e->ctx, e->optim_args);
  if (e->tau != NULL) e->ops->free(e->ctx, e->tau);
  if (e->col_loss != NULL) e->ops->free(e->ctx, e->col_loss);
  free(e->last), free(e->skip), free(e->scatter_rows), free(e->tau_host), free(e->col_count);
  e->ops->ctx_free(e->ctx);
  free(e);
}

const ls_engine_conf_t *ls_engine_get_conf(const ls_engine_t *e) {
  return e == NULL ? NULL : &e->conf;
}

size_t ls_engine_param_count(const ls_engine_t *e) {
  return e == NULL ? 0 : e->n_params;
}

/* ------------------------------------------------------------------------ */
/* Parameters and gradients                                                  */

/* splitmix64: a small, well-mixed generator; reproducible across machines. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

ls_err_t ls_engine_init_params(ls_engine_t *e, uint64_t seed) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  float *host = malloc(e->n_params * sizeof(float));
  LS_RETURN_IF(host == NULL, LS_ERR_NOMEM, "no memory for %zu initial parameters", e->n_params);
  /* nn.LSTM: every tensor U(-k, k), k = 1/sqrt(H); nn.Linear(H, O): weight
   * (kaiming_uniform with a = sqrt(5)) and bias are U(-1/sqrt(fan_in),
   * 1/sqrt(fan_in)) with fan_in = H: the same bound. */
  double const k = 1.0 / sqrt((double)e->conf.shape.hidden_size);
  uint64_t state = seed;
  for (size_t i = 0; i < e->n_params; i++) {
    double const u = (double)(splitmix64(&state) >> 11) * 0x1.0p-53; /* [0, 1) */
    host[i] = (float)((2.0 * u - 1.0) * k);
  }
  ls_err_t err = ls_engine_write_params(e, host, e->n_params);
  free(host);
  if (err == LS_OK) err = e->ops->zero(e->ctx, e->grads, e->n_params * sizeof(float));
  if (err == LS_OK) err = e->ops->zero(e->ctx, e->adam_m, e->n_params * sizeof(float));
  if (err == LS_OK) err = e->ops->zero(e->ctx, e->adam_v, e->n_params * sizeof(float));
  if (err == LS_OK) err = e->ops->zero(e->ctx, e->scalars + SCALAR_STEPS, sizeof(double));
  return err;
}

static ls_err_t check_flat(const ls_engine_t *e, const void *p, size_t n, const char *what) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(p == NULL, LS_ERR_INVALID_ARG, "%s buffer is NULL", what);
  LS_RETURN_IF(n != e->n_params, LS_ERR_INVALID_ARG,
               "%s buffer holds %zu floats but the model has %zu parameters", what, n, e->n_params);
  return LS_OK;
}

ls_err_t ls_engine_read_params(ls_engine_t *e, float *dst, size_t n) {
  LS_FORWARD_IF_ERROR(check_flat(e, dst, n, "parameter"));
  return e->ops->download(e->ctx, dst, e->params, n * sizeof(float));
}

ls_err_t ls_engine_write_params(ls_engine_t *e, const float *src, size_t n) {
  LS_FORWARD_IF_ERROR(check_flat(e, src, n, "parameter"));
  return e->ops->upload(e->ctx, e->params, src, n * sizeof(float));
}

ls_err_t ls_engine_read_grads(ls_engine_t *e, float *dst, size_t n) {
  LS_FORWARD_IF_ERROR(check_flat(e, dst, n, "gradient"));
  return e->ops->download(e->ctx, dst, e->grads, n * sizeof(float));
}

ls_err_t ls_engine_write_grads(ls_engine_t *e, const float *src, size_t n) {
  LS_FORWARD_IF_ERROR(check_flat(e, src, n, "gradient"));
  return e->ops->upload(e->ctx, e->grads, src, n * sizeof(float));
}

float *ls_engine_grad_buffer(ls_engine_t *e) {
  return e == NULL ? NULL : e->grads;
}

ls_device_t ls_engine_device(const ls_engine_t *e) {
  return e == NULL ? LS_DEVICE_CPU : e->conf.device;
}

void *ls_engine_stream(const ls_engine_t *e) {
  return e == NULL || e->ops->stream == NULL ? NULL : e->ops->stream(e->ctx);
}

ls_err_t ls_engine_set_grad_hook(ls_engine_t *e, ls_grad_ready_fn fn, void *opaque) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  e->grad_hook = fn;
  e->grad_hook_opaque = fn != NULL ? opaque : NULL;
  return LS_OK;
}

/* Tells the gradient hook that segment k is final. */
static ls_err_t grad_ready(ls_engine_t *e, int k) {
  if (e->grad_hook == NULL) return LS_OK;
  size_t off, cnt;
  LS_FORWARD_IF_ERROR(ls_grad_segment(&e->conf.shape, k, &off, &cnt));
  return e->grad_hook(e->grad_hook_opaque, k, off, cnt, ls_engine_stream(e));
}

ls_err_t ls_engine_zero_grads(ls_engine_t *e) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  return e->ops->zero(e->ctx, e->grads, e->n_params * sizeof(float));
}

/* ------------------------------------------------------------------------ */
/* One window                                                                */

ls_err_t engine_check_batch(const ls_engine_t *e, int B) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(B < 1 || B > e->conf.max_batch, LS_ERR_INVALID_ARG,
               "batch B=%d is out of range [1, max_batch=%d]", B, e->conf.max_batch);
  return LS_OK;
}

ls_err_t ls_engine_set_state(ls_engine_t *e, int B, const float *h0, const float *c0) {
  LS_FORWARD_IF_ERROR(engine_check_batch(e, B));
  size_t const rows = (size_t)B * (size_t)e->conf.shape.hidden_size;
  for (int l = 0; l < e->conf.shape.num_layers; l++) {
    float *const dst_h = e->hs + (size_t)l * e->hs_stride;
    float *const dst_c = e->cs + (size_t)l * e->hs_stride;
    size_t const bytes = rows * sizeof(float);
    LS_FORWARD_IF_ERROR(h0 ? e->ops->upload(e->ctx, dst_h, h0 + (size_t)l * rows, bytes)
                           : e->ops->zero(e->ctx, dst_h, bytes));
    LS_FORWARD_IF_ERROR(c0 ? e->ops->upload(e->ctx, dst_c, c0 + (size_t)l * rows, bytes)
                           : e->ops->zero(e->ctx, dst_c, bytes));
  }
  e->state_B = B;
  e->fwd_T = 0;
  return LS_OK;
}

/* Pointers into layer l's blocks for a call of batch B. */
static float *layer_hs(const ls_engine_t *e, int l) {
  return e->hs + (size_t)l * e->hs_stride;
}
static float *layer_cs(const ls_engine_t *e, int l) {
  return e->cs + (size_t)l * e->hs_stride;
}

/* What a recorded part of a step depends on besides the values in device
 * memory (the backend's graph_run): which part, its sizes, its targets,
 * and the host scalars its launches take. */
typedef struct graph_key_s {
  int part; /* 'F' forward, 'B' backward (seg: its segment, -1 all), 'O' update */
  int T, B, seg, masked;
  uint32_t scale; /* loss_scale's bits */
  const void *target;
  int elem; /* the loss is elem_loss's (engine_uses_elem_loss) */
} graph_key_t;

static ls_err_t graph_run(ls_engine_t *e, graph_key_t key, ls_err_t (*queue)(void *),
                          void *opaque) {
  graph_key_t k;
  memset(&k, 0, sizeof k); /* padding included: keys compare bytewise */
  k.part = key.part, k.T = key.T, k.B = key.B, k.seg = key.seg, k.masked = key.masked;
  k.scale = key.scale, k.target = key.target, k.elem = key.elem;
  return e->ops->graph_run(e->ctx, &k, sizeof k, queue, opaque);
}

/* Checks what every forward needs, and marks the last one invalid until
 * this one completes. */
static ls_err_t forward_begin(ls_engine_t *e, int T, int B) {
  LS_FORWARD_IF_ERROR(engine_check_batch(e, B));
  LS_RETURN_IF(T < 1 || T > e->conf.max_window, LS_ERR_INVALID_ARG,
               "window T=%d is out of range [1, max_window=%d]", T, e->conf.max_window);
  LS_RETURN_IF(e->state_B != B, LS_ERR_STATE,
               "no initial state for batch B=%d (set for B=%d): call ls_engine_set_state or "
               "ls_engine_gather_state first",
               B, e->state_B);
  e->fwd_T = 0;
  e->bwd_done = 0;
  return LS_OK;
}

/* Each row's last valid step from the host mask [T, B] (NULL: all valid):
 * the state a row carries on is the one after its last real record, never
 * after padding (README, Architecture: "Partial windows"). */
static void mark_last(ls_engine_t *e, int T, int B, const float *mask) {
  e->fwd_partial = 0;
  for (int b = 0; b < B; b++) {
    int t = T;
    if (mask != NULL)
      while (t > 0 && mask[(size_t)(t - 1) * B + b] == 0.0f)
        t--;
    e->last[b] = t;
    e->fwd_partial |= t < T;
  }
}

/* The device work of a forward (see forward_run), for graph_run. */
typedef struct fwd_job_s {
  ls_engine_t *e;
  int T, B;
  const float *target; /* device, or NULL */
  int masked;          /* MASK_* */
} fwd_job_t;

static ls_err_t forward_queue(void *opaque) {
  const fwd_job_t *const j = opaque;
  ls_engine_t *const e = j->e;
  ls_shape_t const *s = &e->conf.shape;
  int const I = s->input_size, H = s->hidden_size, L = s->num_layers, O = s->output_size;
  int const T = j->T, B = j->B, N = T * B;
  const ls_backend_ops_t *const ops = e->ops;
  for (int l = 0; l < L; l++) {
    size_t offs[4], cnt;
    for (int k = 0; k < 4; k++)
      (void)ls_param_locate(s, l, (ls_param_kind_t)(LS_PARAM_WEIGHT_IH + k), &offs[k], &cnt);
    int const In = l == 0 ? I : H;
    const float *const xin = l == 0 ? e->x : layer_hs(e, l - 1) + (size_t)B * H;
    LS_FORWARD_IF_ERROR(ops->lstm_forward(
        e->ctx, e->gates + (size_t)l * e->gates_stride, layer_hs(e, l), layer_cs(e, l),
        e->tcs + (size_t)l * e->tcs_stride, xin, e->params + offs[0], e->params + offs[1],
        e->params + offs[2], e->params + offs[3], T, B, In, H));
  }
  size_t off_w, off_b, cnt;
  (void)ls_param_locate(s, 0, LS_PARAM_HEAD_WEIGHT, &off_w, &cnt);
  (void)ls_param_locate(s, 0, LS_PARAM_HEAD_BIAS, &off_b, &cnt);
  const float *const y = layer_hs(e, L - 1) + (size_t)B * H;
  LS_FORWARD_IF_ERROR(
      ops->head_forward(e->ctx, e->pred, y, e->params + off_w, e->params + off_b, N, H, O));
  /* The loss, and d loss / d pred for a backward of loss_scale 1 (the
   * trainer's: it scales the sum at the update), which then has nothing
   * of its own to compute there. */
  if (j->target == NULL) return LS_OK;
  return engine_loss_queue(e, j->target, j->masked, 1.0f, N);
}

/* The forward of a window whose inputs are in e->x: the LSTM stack, the
 * head and, with targets (device), the loss (the host's mask uploaded to
 * e->mask; masked: MASK_*) whose count the host made (valid). */
static ls_err_t forward_run(ls_engine_t *e, int T, int B, const float *target, int masked,
                            double valid, double *loss_sum, double *count) {
  fwd_job_t job = {e, T, B, target, masked};
  graph_key_t const key = {'F', T, B, 0, masked, 0, target, engine_uses_elem_loss(e, masked)};
  LS_FORWARD_IF_ERROR(graph_run(e, key, forward_queue, &job));
  /* The loss is read back only when asked (it waits for the device). */
  double loss[2] = {0.0, 0.0};
  if (target != NULL && loss_sum != NULL)
    LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, loss, e->scalars, sizeof loss));
  if (loss_sum != NULL) *loss_sum = loss[0];
  if (count != NULL) *count = target != NULL ? valid : 0.0;
  e->fwd_T = T;
  e->fwd_B = B;
  e->fwd_target = target;
  e->fwd_masked = masked;
  return LS_OK;
}

ls_err_t ls_engine_forward(ls_engine_t *e, int T, int B, const float *x, const float *target,
                           const float *mask, double *loss_sum, double *count) {
  LS_FORWARD_IF_ERROR(forward_begin(e, T, B));
  LS_RETURN_IF(x == NULL, LS_ERR_INVALID_ARG, "inputs x are NULL");
  LS_RETURN_IF(target == NULL && mask != NULL, LS_ERR_INVALID_ARG,
               "a mask was given without targets");
  size_t const N = (size_t)T * (size_t)B;
  const ls_backend_ops_t *const ops = e->ops;
  LS_FORWARD_IF_ERROR(
      ops->upload(e->ctx, e->x, x, N * (size_t)e->conf.shape.input_size * sizeof(float)));
  if (target != NULL)
    LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->target, target,
                                    N * (size_t)e->conf.shape.output_size * sizeof(float)));
  if (mask != NULL) LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->mask, mask, N * sizeof(float)));
  mark_last(e, T, B, mask);
  double const valid = target != NULL ? engine_count_rows(e, N, mask) : 0.0;
  return forward_run(e, T, B, target != NULL ? e->target : NULL,
                     mask != NULL ? MASK_ROWS : MASK_NONE, valid, loss_sum, count);
}

ls_err_t ls_engine_forward_seq(ls_engine_t *e, int T, int B, const float *seq, const float *mask,
                               double *loss_sum, double *count) {
  LS_FORWARD_IF_ERROR(forward_begin(e, T, B));
  LS_RETURN_IF(seq == NULL, LS_ERR_INVALID_ARG, "sequence seq is NULL");
  int const I = e->conf.shape.input_size, O = e->conf.shape.output_size;
  LS_RETURN_IF(O != I, LS_ERR_INVALID_ARG,
               "a sequence's targets are its next rows, all I=%d features: the model has O=%d "
               "outputs (use ls_engine_forward with targets of its own)",
               I, O);
  size_t const N = (size_t)T * (size_t)B;
  const ls_backend_ops_t *const ops = e->ops;
  LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->x, seq, (N + (size_t)B) * (size_t)I * sizeof(float)));
  if (mask != NULL) LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->mask, mask, N * sizeof(float)));
  mark_last(e, T, B, mask);
  const float *target = NULL;
  LS_FORWARD_IF_ERROR(ops->seq_targets(e->ctx, &target, e->x, B, I));
  return forward_run(e, T, B, target, mask != NULL ? MASK_ROWS : MASK_NONE,
                     engine_count_rows(e, N, mask), loss_sum, count);
}

ls_err_t ls_engine_forward_elem(ls_engine_t *e, int T, int B, const float *x, const float *target,
                                const float *mask, const int *lengths, double *loss_sum,
                                double *count) {
  LS_FORWARD_IF_ERROR(forward_begin(e, T, B));
  LS_RETURN_IF(x == NULL, LS_ERR_INVALID_ARG, "inputs x are NULL");
  LS_RETURN_IF(target == NULL && mask != NULL, LS_ERR_INVALID_ARG,
               "a mask was given without targets");
  double valid = 0.0;
  LS_FORWARD_IF_ERROR(engine_mark_elems(e, T, B, target != NULL, mask, lengths, &valid));
  size_t const N = (size_t)T * (size_t)B, O = (size_t)e->conf.shape.output_size;
  const ls_backend_ops_t *const ops = e->ops;
  LS_FORWARD_IF_ERROR(
      ops->upload(e->ctx, e->x, x, N * (size_t)e->conf.shape.input_size * sizeof(float)));
  if (target != NULL)
    LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->target, target, N * O * sizeof(float)));
  if (mask != NULL) LS_FORWARD_IF_ERROR(ops->upload(e->ctx, e->mask, mask, N * O * sizeof(float)));
  return forward_run(e, T, B, target != NULL ? e->target : NULL,
                     mask != NULL ? MASK_ELEMS : MASK_NONE, valid, loss_sum, count);
}

/* The device work of a backward, whole (seg -1) or one segment of the
 * gradient hook's (seg 0: the head; seg k: layer L-k), for graph_run. */
typedef struct bwd_job_s {
  ls_engine_t *e;
  float scale;
  int seg;
} bwd_job_t;

/* d loss / d pred (the forward's where loss_scale is 1), then through the
 * head into dh = d loss / d y. */
static ls_err_t backward_head(ls_engine_t *e, float scale) {
  ls_shape_t const *s = &e->conf.shape;
  int const H = s->hidden_size, L = s->num_layers, O = s->output_size;
  int const B = e->fwd_B, N = e->fwd_T * B;
  const ls_backend_ops_t *const ops = e->ops;
  if (scale != 1.0f)
    LS_FORWARD_IF_ERROR(engine_loss_queue(e, e->fwd_target, e->fwd_masked, scale, N));
  size_t off_w, off_b, cnt;
  (void)ls_param_locate(s, 0, LS_PARAM_HEAD_WEIGHT, &off_w, &cnt);
  (void)ls_param_locate(s, 0, LS_PARAM_HEAD_BIAS, &off_b, &cnt);
  const float *const y = layer_hs(e, L - 1) + (size_t)B * H;
  return ops->head_backward(e->ctx, e->dh, e->grads + off_w, e->grads + off_b, e->dpred, y,
                            e->params + off_w, N, H, O);
}

/* Layer l's backward: its dx (into dh, in place) is layer l-1's dh. */
static ls_err_t backward_layer(ls_engine_t *e, int l) {
  ls_shape_t const *s = &e->conf.shape;
  int const I = s->input_size, H = s->hidden_size, T = e->fwd_T, B = e->fwd_B;
  size_t offs[4], cnt;
  for (int k = 0; k < 4; k++)
    (void)ls_param_locate(s, l, (ls_param_kind_t)(LS_PARAM_WEIGHT_IH + k), &offs[k], &cnt);
  int const In = l == 0 ? I : H;
  const float *const xin = l == 0 ? e->x : layer_hs(e, l - 1) + (size_t)B * H;
  float *const dx = l == 0 ? e->dx : e->dh;
  return e->ops->lstm_backward(e->ctx, dx, e->dh0 + (size_t)l * B * H, e->dc0 + (size_t)l * B * H,
                               e->grads + offs[0], e->grads + offs[1], e->grads + offs[2],
                               e->grads + offs[3], e->dgates, e->dh,
                               e->gates + (size_t)l * e->gates_stride, layer_hs(e, l),
                               layer_cs(e, l), e->tcs + (size_t)l * e->tcs_stride, xin,
                               e->params + offs[0], e->params + offs[1], T, B, In, H);
}

static ls_err_t backward_queue(void *opaque) {
  const bwd_job_t *const j = opaque;
  int const L = j->e->conf.shape.num_layers;
  if (j->seg <= 0) LS_FORWARD_IF_ERROR(backward_head(j->e, j->scale));
  if (j->seg > 0) return backward_layer(j->e, L - j->seg);
  for (int l = L - 1; l >= 0 && j->seg < 0; l--)
    LS_FORWARD_IF_ERROR(backward_layer(j->e, l));
  return LS_OK;
}

ls_err_t ls_engine_backward(ls_engine_t *e, float loss_scale) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(!isfinite(loss_scale), LS_ERR_INVALID_ARG, "loss_scale %g is not finite",
               (double)loss_scale);
  LS_RETURN_IF(e->fwd_T == 0, LS_ERR_STATE, "backward without a completed forward");
  LS_RETURN_IF(e->fwd_target == NULL, LS_ERR_STATE, "backward after a forward without targets");
  LS_RETURN_IF(e->bwd_done, LS_ERR_STATE, "backward was already run for this forward");
  int const L = e->conf.shape.num_layers;
  bwd_job_t job = {e, loss_scale, -1};
  int const elem = engine_uses_elem_loss(e, e->fwd_masked);
  graph_key_t key = {'B', e->fwd_T, e->fwd_B, -1, e->fwd_masked, 0, e->fwd_target, elem};
  memcpy(&key.scale, &loss_scale, sizeof key.scale);
  if (e->grad_hook == NULL) {
    LS_FORWARD_IF_ERROR(graph_run(e, key, backward_queue, &job));
  } else { /* the head first, then down the stack, each segment's sum started at once */
    for (int k = 0; k <= L; k++) {
      job.seg = key.seg = k;
      LS_FORWARD_IF_ERROR(graph_run(e, key, backward_queue, &job));
      LS_FORWARD_IF_ERROR(grad_ready(e, k));
    }
  }
  e->bwd_done = 1;
  return LS_OK;
}

ls_err_t ls_engine_read_outputs(ls_engine_t *e, float *y, float *pred, float *hT, float *cT) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(e->fwd_T == 0, LS_ERR_STATE, "no completed forward to read");
  ls_shape_t const *s = &e->conf.shape;
  size_t const T = (size_t)e->fwd_T, B = (size_t)e->fwd_B, H = (size_t)s->hidden_size;
  int const L = s->num_layers;
  if (y != NULL)
    LS_FORWARD_IF_ERROR(
        e->ops->download(e->ctx, y, layer_hs(e, L - 1) + B * H, T * B * H * sizeof(float)));
  if (pred != NULL)
    LS_FORWARD_IF_ERROR(
        e->ops->download(e->ctx, pred, e->pred, T * B * (size_t)s->output_size * sizeof(float)));
  /* The final states: step T for every row, or row by row at its last
   * valid step when some row ends early. */
  size_t const rows = e->fwd_partial ? 1 : B;
  for (int l = 0; l < L; l++)
    for (size_t b = 0; b < B; b += rows) {
      size_t const at = (size_t)(e->fwd_partial ? e->last[b] : (int)T) * B * H + b * H;
      size_t const bytes = rows * H * sizeof(float), dst = (size_t)l * B * H + b * H;
      if (hT != NULL)
        LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, hT + dst, layer_hs(e, l) + at, bytes));
      if (cT != NULL)
        LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, cT + dst, layer_cs(e, l) + at, bytes));
    }
  return LS_OK;
}

ls_err_t ls_engine_read_initial_state(ls_engine_t *e, float *h0, float *c0) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(e->state_B < 1, LS_ERR_STATE,
               "no initial state to read: call ls_engine_set_state or ls_engine_gather_state");
  size_t const bytes = (size_t)e->state_B * (size_t)e->conf.shape.hidden_size * sizeof(float);
  for (int l = 0; l < e->conf.shape.num_layers; l++) {
    size_t const dst = (size_t)l * bytes / sizeof(float);
    if (h0 != NULL) LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, h0 + dst, layer_hs(e, l), bytes));
    if (c0 != NULL) LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, c0 + dst, layer_cs(e, l), bytes));
  }
  return LS_OK;
}

ls_err_t ls_engine_read_input_grads(ls_engine_t *e, float *dx, float *dh0, float *dc0) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(!e->bwd_done, LS_ERR_STATE, "no backward of the last forward to read");
  ls_shape_t const *s = &e->conf.shape;
  size_t const T = (size_t)e->fwd_T, B = (size_t)e->fwd_B, H = (size_t)s->hidden_size;
  size_t const states = (size_t)s->num_layers * B * H * sizeof(float);
  if (dx != NULL)
    LS_FORWARD_IF_ERROR(
        e->ops->download(e->ctx, dx, e->dx, T * B * (size_t)s->input_size * sizeof(float)));
  if (dh0 != NULL) LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, dh0, e->dh0, states));
  if (dc0 != NULL) LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, dc0, e->dc0, states));
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Optimizer                                                                 */

/* The device work of an update (arguments in e->optim_args), for graph_run. */
static ls_err_t optimizer_queue(void *opaque) {
  ls_engine_t *const e = opaque;
  return e->ops->optimizer_step(e->ctx, e->params, e->grads, e->adam_m, e->adam_v, e->n_params,
                                e->scalars + 2, e->scalars + SCALAR_STEPS, e->optim_args);
}

ls_err_t ls_engine_optimizer_step(ls_engine_t *e, const ls_optim_t *opt, float grad_scale,
                                  float *grad_norm) {
  LS_RETURN_IF(e == NULL || opt == NULL, LS_ERR_INVALID_ARG, "engine or optimizer is NULL");
  LS_RETURN_IF(!(opt->lr >= 0.0f) || !isfinite(opt->lr), LS_ERR_INVALID_ARG,
               "learning rate %g must be finite and >= 0", (double)opt->lr);
  LS_RETURN_IF(!(opt->beta1 >= 0.0f && opt->beta1 < 1.0f) ||
                   !(opt->beta2 >= 0.0f && opt->beta2 < 1.0f),
               LS_ERR_INVALID_ARG, "betas (%g, %g) must lie in [0, 1)", (double)opt->beta1,
               (double)opt->beta2);
  LS_RETURN_IF(!(opt->eps > 0.0f) || !isfinite(opt->eps), LS_ERR_INVALID_ARG,
               "eps %g must be finite and > 0", (double)opt->eps);
  LS_RETURN_IF(!(opt->weight_decay >= 0.0f) || !isfinite(opt->weight_decay), LS_ERR_INVALID_ARG,
               "weight decay %g must be finite and >= 0", (double)opt->weight_decay);
  LS_RETURN_IF(isnan(opt->clip_norm), LS_ERR_INVALID_ARG, "clip norm is NaN");
  LS_RETURN_IF(!isfinite(grad_scale) || grad_scale < 0.0f, LS_ERR_INVALID_ARG,
               "grad_scale %g must be finite and >= 0", (double)grad_scale);
  /* The step's arguments go to device memory, so that a recorded update
   * replays with each step's own. The update counts itself on the device,
   * which also decides the skip of a non-finite gradient (backend.h):
   * nothing is read back here. */
  ls_optim_args_t const args = {*opt, grad_scale};
  LS_FORWARD_IF_ERROR(e->ops->upload(e->ctx, e->optim_args, &args, sizeof args));
  graph_key_t const key = {'O', 0, 0, 0, 0, 0, NULL, 0};
  LS_FORWARD_IF_ERROR(graph_run(e, key, optimizer_queue, e));
  e->norm_scale = grad_scale;
  if (grad_norm != NULL) {
    double norm_sq = 0.0;
    LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, &norm_sq, e->scalars + 2, sizeof norm_sq));
    *grad_norm = (float)((double)grad_scale * sqrt(norm_sq));
  }
  return LS_OK;
}

int64_t ls_engine_optimizer_steps(ls_engine_t *e) {
  double steps = 0.0;
  if (e == NULL ||
      e->ops->download(e->ctx, &steps, e->scalars + SCALAR_STEPS, sizeof steps) != LS_OK)
    return -1;
  return (int64_t)steps;
}

ls_err_t ls_engine_fetch_figures(ls_engine_t *e) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  /* scalars: loss sum, count, gradient norm^2 */
  LS_FORWARD_IF_ERROR(e->ops->fetch_start(e->ctx, e->scalars, 3 * sizeof(double)));
  e->fetch_scale = e->norm_scale;
  e->fetched = 1;
  return LS_OK;
}

ls_err_t ls_engine_read_figures(ls_engine_t *e, double *loss_sum, float *grad_norm) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  LS_RETURN_IF(!e->fetched, LS_ERR_STATE, "no figures to read: call ls_engine_fetch_figures first");
  double f[3];
  LS_FORWARD_IF_ERROR(e->ops->fetch_wait(e->ctx, f, sizeof f));
  if (loss_sum != NULL) *loss_sum = f[0];
  if (grad_norm != NULL) *grad_norm = (float)((double)e->fetch_scale * sqrt(f[2]));
  return LS_OK;
}

ls_err_t ls_engine_read_optimizer(ls_engine_t *e, float *m, float *v, size_t n, int64_t *steps) {
  LS_FORWARD_IF_ERROR(check_flat(e, m, n, "first-moment"));
  LS_FORWARD_IF_ERROR(check_flat(e, v, n, "second-moment"));
  LS_RETURN_IF(steps == NULL, LS_ERR_INVALID_ARG, "steps is NULL");
  LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, m, e->adam_m, n * sizeof(float)));
  LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, v, e->adam_v, n * sizeof(float)));
  double taken = 0.0;
  LS_FORWARD_IF_ERROR(e->ops->download(e->ctx, &taken, e->scalars + SCALAR_STEPS, sizeof taken));
  *steps = (int64_t)taken;
  return LS_OK;
}

ls_err_t ls_engine_write_optimizer(ls_engine_t *e, const float *m, const float *v, size_t n,
                                   int64_t steps) {
  LS_FORWARD_IF_ERROR(check_flat(e, m, n, "first-moment"));
  LS_FORWARD_IF_ERROR(check_flat(e, v, n, "second-moment"));
  LS_RETURN_IF(steps < 0, LS_ERR_INVALID_ARG, "negative optimizer step count %lld",
               (long long)steps);
  LS_FORWARD_IF_ERROR(e->ops->upload(e->ctx, e->adam_m, m, n * sizeof(float)));
  LS_FORWARD_IF_ERROR(e->ops->upload(e->ctx, e->adam_v, v, n * sizeof(float)));
  double const taken = (double)steps; /* exact below 2^53 */
  return e->ops->upload(e->ctx, e->scalars + SCALAR_STEPS, &taken, sizeof taken);
}
