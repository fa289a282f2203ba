/*
 * Bad arguments: every public kernels function refuses null pointers, zero
 * or out-of-range sizes, mismatched buffers and calls out of order with an
 * error code and a message, and never crashes; a non-finite gradient is
 * skipped when asked; losses per column take levels in (0, 1) and masks
 * per target finite weights >= 0, none known past a row's length.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/kernels.h"

/* The call fails with err and leaves a message that mentions `word`. */
#define EXPECT_ERR(call, err, word)                                                                \
  do {                                                                                             \
    ls_error_clear();                                                                              \
    ls_err_t const got_ = (call);                                                                  \
    cr_expect_eq(got_, err, "%s returned %d (%s), expected %d", #call, (int)got_,                  \
                 ls_err2str(got_), (int)(err));                                                    \
    cr_expect(strstr(ls_last_error(), word) != NULL, "%s: message '%s' lacks '%s'", #call,         \
              ls_last_error(), word);                                                              \
  } while (0)

/* A CPU engine of this shape for batches up to B and windows up to T. */
static ls_engine_t *shaped_engine(ls_shape_t shape, int B, int T) {
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = shape;
  conf.max_batch = B;
  conf.max_window = T;
  conf.threads = 1;
  ls_engine_t *e = NULL;
  cr_assert_eq(ls_engine_new(&conf, &e), LS_OK, "%s", ls_last_error());
  return e;
}

static ls_engine_t *small_engine(void) {
  return shaped_engine((ls_shape_t){2, 4, 2, 2}, 3, 5);
}

Test(args, engine_conf) {
  ls_engine_conf_t conf;
  ls_engine_t *e = (ls_engine_t *)&conf; /* must be reset to NULL on failure */
  EXPECT_ERR(ls_engine_new(NULL, &e), LS_ERR_INVALID_ARG, "NULL");
  cr_expect_null(e);
  ls_engine_conf_init(&conf);
  EXPECT_ERR(ls_engine_new(&conf, NULL), LS_ERR_INVALID_ARG, "NULL");
  conf.shape.hidden_size = 0;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "H=0");
  ls_engine_conf_init(&conf);
  conf.shape.input_size = -3;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "I=-3");
  ls_engine_conf_init(&conf);
  conf.shape.num_layers = 0;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "L=0");
  ls_engine_conf_init(&conf);
  conf.shape.output_size = 0;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "O=0");
  ls_engine_conf_init(&conf);
  conf.max_batch = 0;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "max_batch=0");
  ls_engine_conf_init(&conf);
  conf.max_window = 0;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "max_window=0");
  ls_engine_conf_init(&conf);
  conf.threads = -1;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "threads=-1");
  ls_engine_conf_init(&conf);
  conf.max_batch = 1 << 20, conf.max_window = 1 << 16;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "2^31");
  ls_engine_conf_init(&conf);
  conf.device = (ls_device_t)7;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "device");
  ls_engine_destroy(NULL); /* accepted */
}

Test(args, precision) {
  ls_engine_conf_t conf;
  ls_engine_t *e = NULL;
  ls_engine_conf_init(&conf);
  cr_expect_eq(conf.precision, LS_PRECISION_FP32, "the default precision is fp32");
  conf.precision = (ls_precision_t)2;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "unknown precision 2");
  cr_expect_null(e);
  conf.precision = (ls_precision_t)-1;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG, "unknown precision -1");
  cr_expect_null(e);
  /* TF32 is a tensor-core mode: the CPU engine refuses it, saying what to use. */
  ls_engine_conf_init(&conf);
  conf.precision = LS_PRECISION_TF32;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_UNSUPPORTED, "tf32");
  cr_expect_null(e);
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_UNSUPPORTED, "--device cuda");
  cr_expect_null(e);
  /* fp32 on the CPU, and the conf read back says so. */
  conf.precision = LS_PRECISION_FP32;
  conf.threads = 1;
  cr_assert_eq(ls_engine_new(&conf, &e), LS_OK, "%s", ls_last_error());
  cr_expect_eq(ls_engine_get_conf(e)->precision, LS_PRECISION_FP32);
  ls_engine_destroy(e);
}

Test(args, layout) {
  ls_shape_t const s = {2, 4, 2, 3};
  size_t off, cnt, n;
  char name[8];
  EXPECT_ERR(ls_param_count(NULL, &n), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_param_count(&s, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_param_locate(&s, 2, LS_PARAM_WEIGHT_IH, &off, &cnt), LS_ERR_INVALID_ARG, "layer 2");
  EXPECT_ERR(ls_param_locate(&s, -1, LS_PARAM_BIAS_HH, &off, &cnt), LS_ERR_INVALID_ARG, "layer -1");
  EXPECT_ERR(ls_param_locate(&s, 0, (ls_param_kind_t)9, &off, &cnt), LS_ERR_INVALID_ARG, "kind 9");
  EXPECT_ERR(ls_param_name(0, LS_PARAM_HEAD_WEIGHT, name, sizeof name), LS_ERR_INVALID_ARG,
             "too small");
  EXPECT_ERR(ls_param_name(0, LS_PARAM_HEAD_BIAS, NULL, 10), LS_ERR_INVALID_ARG, "NULL");
  /* The layout itself: tensors tile the buffer in PyTorch's order. */
  cr_assert_eq(ls_param_count(&s, &n), LS_OK);
  size_t expect = 0;
  for (int l = 0; l <= s.num_layers; l++)
    for (int k = l < s.num_layers ? 0 : 4; k < (l < s.num_layers ? 4 : 6); k++) {
      cr_assert_eq(ls_param_locate(&s, l, (ls_param_kind_t)k, &off, &cnt), LS_OK);
      cr_expect_eq(off, expect, "layer %d kind %d at %zu, expected %zu", l, k, off, expect);
      expect += cnt;
    }
  cr_expect_eq(expect, n);
  cr_expect_eq(n, (size_t)(16 * 2 + 16 * 4 + 32) + (16 * 4 + 16 * 4 + 32) + 3 * 4 + 3);
}

Test(args, buffers_and_order) {
  ls_engine_t *e = small_engine();
  size_t const n = ls_engine_param_count(e);
  float *p = calloc(n, sizeof(float));
  float x[5 * 3 * 2] = {0}, y[5 * 3 * 2] = {0}, m[5 * 3] = {0};
  ls_optim_t opt;
  ls_optim_init(&opt);

  EXPECT_ERR(ls_engine_read_params(NULL, p, n), LS_ERR_INVALID_ARG, "engine");
  EXPECT_ERR(ls_engine_read_params(e, NULL, n), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_write_params(e, p, n - 1), LS_ERR_INVALID_ARG, "parameters");
  EXPECT_ERR(ls_engine_read_grads(e, p, n + 1), LS_ERR_INVALID_ARG, "parameters");
  EXPECT_ERR(ls_engine_init_params(NULL, 1), LS_ERR_INVALID_ARG, "NULL");

  /* Out of order: no state, no forward, no backward. */
  EXPECT_ERR(ls_engine_forward(e, 5, 3, x, y, NULL, NULL, NULL), LS_ERR_STATE, "initial state");
  EXPECT_ERR(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "forward");
  EXPECT_ERR(ls_engine_read_outputs(e, x, NULL, NULL, NULL), LS_ERR_STATE, "forward");
  EXPECT_ERR(ls_engine_read_input_grads(e, x, NULL, NULL), LS_ERR_STATE, "backward");

  EXPECT_ERR(ls_engine_set_state(e, 0, NULL, NULL), LS_ERR_INVALID_ARG, "B=0");
  EXPECT_ERR(ls_engine_set_state(e, 4, NULL, NULL), LS_ERR_INVALID_ARG, "B=4");
  cr_assert_eq(ls_engine_set_state(e, 3, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_forward(e, 6, 3, x, y, NULL, NULL, NULL), LS_ERR_INVALID_ARG, "T=6");
  EXPECT_ERR(ls_engine_forward(e, 0, 3, x, y, NULL, NULL, NULL), LS_ERR_INVALID_ARG, "T=0");
  EXPECT_ERR(ls_engine_forward(e, 5, 3, NULL, y, NULL, NULL, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_forward(e, 5, 3, x, NULL, m, NULL, NULL), LS_ERR_INVALID_ARG, "mask");
  EXPECT_ERR(ls_engine_forward(e, 5, 2, x, y, NULL, NULL, NULL), LS_ERR_STATE, "B=2");

  /* Predictions only: backward refuses. */
  cr_assert_eq(ls_engine_forward(e, 5, 3, x, NULL, NULL, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "without targets");
  cr_assert_eq(ls_engine_forward(e, 5, 3, x, y, m, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_backward(e, 1.0f / 0.0f), LS_ERR_INVALID_ARG, "not finite");
  cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK);
  EXPECT_ERR(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "already");

  /* Optimizer hyper-parameters. */
  EXPECT_ERR(ls_engine_optimizer_step(e, NULL, 1.0f, NULL), LS_ERR_INVALID_ARG, "NULL");
  opt.lr = -1.0f;
  EXPECT_ERR(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_ERR_INVALID_ARG, "learning rate");
  ls_optim_init(&opt);
  opt.beta1 = 1.0f;
  EXPECT_ERR(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_ERR_INVALID_ARG, "betas");
  ls_optim_init(&opt);
  opt.eps = 0.0f;
  EXPECT_ERR(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_ERR_INVALID_ARG, "eps");
  ls_optim_init(&opt);
  EXPECT_ERR(ls_engine_optimizer_step(e, &opt, -2.0f, NULL), LS_ERR_INVALID_ARG, "grad_scale");
  cr_expect_eq(ls_engine_optimizer_steps(e), 0, "failed steps are not counted");
  cr_assert_eq(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_OK);
  cr_expect_eq(ls_engine_optimizer_steps(e), 1);
  free(p);
  ls_engine_destroy(e);
}

/* The step's figures read after the step equal the ones read during it. */
Test(args, figures) {
  ls_engine_t *e = small_engine();
  float x[5 * 3 * 2], y[5 * 3 * 2], m[5 * 3];
  for (int i = 0; i < 30; i++)
    x[i] = sinf((float)i), y[i] = cosf((float)i);
  for (int i = 0; i < 15; i++)
    m[i] = i % 4 != 1;
  ls_optim_t opt;
  ls_optim_init(&opt);
  double loss = -1, count = -1, fetched_loss = -1;
  float norm = -1, fetched_norm = -1;
  EXPECT_ERR(ls_engine_read_figures(e, &fetched_loss, &fetched_norm), LS_ERR_STATE, "fetch");
  EXPECT_ERR(ls_engine_fetch_figures(NULL), LS_ERR_INVALID_ARG, "NULL");
  cr_assert_eq(ls_engine_set_state(e, 3, NULL, NULL), LS_OK);
  cr_assert_eq(ls_engine_forward(e, 5, 3, x, y, m, &loss, &count), LS_OK);
  cr_expect_eq(count, 2.0 * 11, "count: 11 valid rows of O = 2");
  cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK);
  cr_assert_eq(ls_engine_optimizer_step(e, &opt, 0.5f, &norm), LS_OK);
  cr_assert_eq(ls_engine_fetch_figures(e), LS_OK);
  cr_assert_eq(ls_engine_read_figures(e, &fetched_loss, &fetched_norm), LS_OK);
  cr_expect(loss > 0 && fetched_loss == loss, "loss %.17g fetched, %.17g returned", fetched_loss,
            loss);
  cr_expect(norm > 0 && fetched_norm == norm, "norm %.9g fetched, %.9g returned",
            (double)fetched_norm, (double)norm);
  ls_engine_destroy(e);
}

/* skip_nonfinite: a gradient with a NaN or an Inf leaves parameters, Adam's
 * moments and its step count alone and is zeroed; without it (PyTorch's
 * behaviour) it reaches the parameters. */
Test(args, nonfinite_gradient_skipped) {
  ls_engine_t *e = small_engine();
  size_t const n = ls_engine_param_count(e);
  float *const g = calloc(n, sizeof(float)), *const p0 = calloc(n, sizeof(float));
  float *const p1 = calloc(n, sizeof(float)), *const m = calloc(n, sizeof(float));
  float *const v = calloc(n, sizeof(float));
  cr_assert(g && p0 && p1 && m && v);
  cr_assert_eq(ls_engine_init_params(e, 7), LS_OK);
  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.skip_nonfinite = 1;
  for (size_t i = 0; i < n; i++)
    g[i] = 0.01f * (float)(i % 7);
  cr_assert_eq(ls_engine_write_grads(e, g, n), LS_OK);
  float norm = 0.0f;
  cr_assert_eq(ls_engine_optimizer_step(e, &opt, 1.0f, &norm), LS_OK, "a finite step");
  cr_expect_eq(ls_engine_optimizer_steps(e), 1);
  cr_expect(isfinite(norm) && norm > 0.0f);
  float const bad[] = {INFINITY, -INFINITY, NAN};
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(ls_engine_read_params(e, p0, n), LS_OK);
    g[n / 2] = bad[k];
    cr_assert_eq(ls_engine_write_grads(e, g, n), LS_OK);
    cr_assert_eq(ls_engine_optimizer_step(e, &opt, 1.0f, &norm), LS_OK);
    cr_expect(!isfinite(norm), "case %d: the norm %g", k, (double)norm);
    cr_expect_eq(ls_engine_optimizer_steps(e), 1, "case %d: no step counted", k);
    cr_assert_eq(ls_engine_read_params(e, p1, n), LS_OK);
    cr_expect_arr_eq(p0, p1, n * sizeof(float), "case %d: parameters changed", k);
    cr_assert_eq(ls_engine_read_grads(e, p1, n), LS_OK);
    for (size_t i = 0; i < n; i++)
      cr_expect_eq(p1[i], 0.0f, "case %d: gradient not zeroed", k);
  }
  int64_t steps = 0;
  cr_assert_eq(ls_engine_read_optimizer(e, m, v, n, &steps), LS_OK);
  for (size_t i = 0; i < n; i++)
    cr_expect(isfinite(m[i]) && isfinite(v[i]), "moment %zu", i);
  /* Without skip_nonfinite the Inf goes through, as in PyTorch. */
  opt.skip_nonfinite = 0;
  g[n / 2] = INFINITY;
  cr_assert_eq(ls_engine_write_grads(e, g, n), LS_OK);
  cr_assert_eq(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_OK);
  cr_expect_eq(ls_engine_optimizer_steps(e), 2);
  cr_assert_eq(ls_engine_read_params(e, p1, n), LS_OK);
  cr_expect(!isfinite(p1[n / 2]), "an Inf gradient reaches its parameter without the skip");
  free(g), free(p0), free(p1), free(m), free(v);
  ls_engine_destroy(e);
}

Test(args, state_tables) {
  ls_engine_t *e = small_engine(), *other = small_engine();
  ls_state_table_t *t = NULL;
  float h[16], c[16];
  int64_t slots[3] = {0, 1, 2};
  EXPECT_ERR(ls_state_table_new(NULL, 4, &t), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_state_table_new(e, 0, &t), LS_ERR_INVALID_ARG, "at least one slot");
  EXPECT_ERR(ls_state_table_new(e, (size_t)-1, &t), LS_ERR_INVALID_ARG, "do not fit");
  cr_assert_eq(ls_state_table_new(e, 2, &t), LS_OK);
  EXPECT_ERR(ls_state_table_read(t, 1, 2, h, c), LS_ERR_INVALID_ARG, "outside");
  EXPECT_ERR(ls_state_table_write(t, 0, 0, h, c), LS_ERR_INVALID_ARG, "outside");
  EXPECT_ERR(ls_state_table_read(t, 0, 1, NULL, c), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_gather_state(e, t, 3, slots), LS_ERR_INVALID_ARG, "slot 2");
  EXPECT_ERR(ls_engine_gather_state(other, t, 2, slots), LS_ERR_INVALID_ARG, "another engine");
  EXPECT_ERR(ls_engine_gather_state(e, t, 2, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_scatter_state(e, t, 2, slots), LS_ERR_STATE, "completed forward");
  /* A slot twice: fine to read (gather), refused to write (scatter: its
   * rows would race on a GPU); -1 (skip) may repeat. */
  int64_t const dup[3] = {1, -1, 1}, skips[3] = {-1, 0, -1};
  float x[5 * 3 * 2] = {0};
  cr_assert_eq(ls_engine_gather_state(e, t, 3, dup), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_forward(e, 5, 3, x, NULL, NULL, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_scatter_state(e, t, 3, dup), LS_ERR_INVALID_ARG, "rows 0 and 2");
  cr_expect_eq(ls_engine_scatter_state(e, t, 3, skips), LS_OK, "%s", ls_last_error());
  EXPECT_ERR(ls_state_table_grow(NULL, 5), LS_ERR_INVALID_ARG, "NULL");
  ls_state_table_destroy(t);
  ls_state_table_destroy(NULL);
  ls_engine_destroy(e);
  ls_engine_destroy(other);
}

/* The losses per column (ls_engine_set_loss, ls_engine_get_loss,
 * ls_engine_forward_elem, ls_engine_read_loss_cols): levels, kinds, masks
 * per target, rows' lengths, and the calls' order. */
Test(args, losses) {
  ls_engine_t *e = shaped_engine((ls_shape_t){2, 4, 1, 3}, 2, 3); /* O = 3, B <= 2, T <= 3 */
  size_t const NO = 3 * 2 * 3;                                    /* T * B * O */
  float x[12] = {0}, tgt[18] = {0}, mask[18], pred[18];
  double sums[3], counts[3];
  for (size_t i = 0; i < NO; i++)
    mask[i] = 1.0f;
  ls_loss_col_t q[3] = {{LS_LOSS_MSE, 0.0f}, {LS_LOSS_PINBALL, 0.5f}, {LS_LOSS_PINBALL, 0.9f}};

  /* ls_engine_set_loss, ls_engine_get_loss */
  EXPECT_ERR(ls_engine_set_loss(NULL, q, 3), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_set_loss(e, NULL, 3), LS_ERR_INVALID_ARG, "n=0");
  EXPECT_ERR(ls_engine_set_loss(e, q, 2), LS_ERR_INVALID_ARG, "O=3");
  EXPECT_ERR(ls_engine_set_loss(e, q, 4), LS_ERR_INVALID_ARG, "O=3");
  q[0].tau = 0.5f;
  EXPECT_ERR(ls_engine_set_loss(e, q, 3), LS_ERR_INVALID_ARG, "column 0");
  q[0].tau = 0.0f;
  float const bad_tau[] = {0.0f, 1.0f, -0.1f, 1.5f, NAN, INFINITY};
  for (size_t k = 0; k < sizeof bad_tau / sizeof bad_tau[0]; k++) {
    q[2].tau = bad_tau[k];
    EXPECT_ERR(ls_engine_set_loss(e, q, 3), LS_ERR_INVALID_ARG, "(0, 1)");
  }
  q[2].tau = 0.9f;
  q[1].kind = (ls_loss_kind_t)7;
  EXPECT_ERR(ls_engine_set_loss(e, q, 3), LS_ERR_INVALID_ARG, "unknown loss kind 7");
  q[1].kind = LS_LOSS_PINBALL;
  ls_loss_col_t got[3];
  cr_expect_eq(ls_engine_get_loss(e, got, 3), LS_OK);
  cr_expect(got[1].kind == LS_LOSS_MSE && got[2].tau == 0.0f, "a refused loss was kept");
  EXPECT_ERR(ls_engine_get_loss(NULL, got, 3), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_get_loss(e, NULL, 3), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_get_loss(e, got, 2), LS_ERR_INVALID_ARG, "O=3");
  cr_assert_eq(ls_engine_set_loss(e, q, 3), LS_OK, "%s", ls_last_error());

  /* ls_engine_forward_elem */
  cr_assert_eq(ls_engine_set_state(e, 2, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_forward_elem(NULL, 3, 2, x, tgt, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "NULL");
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, NULL, tgt, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "NULL");
  EXPECT_ERR(ls_engine_forward_elem(e, 4, 2, x, tgt, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "T=4");
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 3, x, tgt, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "B=3");
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, NULL, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "without targets");
  int lengths[2] = {3, 4};
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, NULL, NULL), LS_ERR_INVALID_ARG,
             "lengths[1]=4");
  lengths[1] = -1;
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, NULL, NULL), LS_ERR_INVALID_ARG,
             "lengths[1]=-1");
  lengths[1] = 2;
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, NULL, lengths, NULL, NULL), LS_ERR_INVALID_ARG,
             "give a mask");
  /* t = 2, b = 1 is past row 1's 2 steps: its targets must be unknown. */
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, NULL, NULL), LS_ERR_INVALID_ARG,
             "mask[t=2, b=1, o=0]");
  for (int o = 0; o < 3; o++)
    mask[(2 * 2 + 1) * 3 + o] = 0.0f;
  float const bad_mask[] = {-1.0f, NAN, INFINITY};
  for (size_t k = 0; k < sizeof bad_mask / sizeof bad_mask[0]; k++) {
    mask[4] = bad_mask[k];
    EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, NULL, NULL),
               LS_ERR_INVALID_ARG, "mask[t=0, b=1, o=1]");
  }
  mask[4] = 1.0f;
  double loss = -1.0, count = -1.0;
  cr_expect_eq(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, &loss, &count), LS_OK, "%s",
               ls_last_error());
  cr_expect(loss >= 0.0 && count == (double)NO - 3, "loss %g count %g", loss, count);
  /* Predictions only: lengths alone are fine, and no loss to read. */
  cr_expect_eq(ls_engine_forward_elem(e, 3, 2, x, NULL, NULL, lengths, &loss, &count), LS_OK, "%s",
               ls_last_error());
  cr_expect(loss == 0.0 && count == 0.0, "a forward without targets: loss %g count %g", loss,
            count);
  EXPECT_ERR(ls_engine_read_loss_cols(e, sums, counts, 3), LS_ERR_STATE, "no targets");
  EXPECT_ERR(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "without targets");

  /* ls_engine_read_loss_cols; a loss set after a forward */
  cr_assert_eq(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, lengths, NULL, NULL), LS_OK);
  EXPECT_ERR(ls_engine_read_loss_cols(NULL, sums, counts, 3), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_engine_read_loss_cols(e, sums, counts, 2), LS_ERR_INVALID_ARG, "O=3");
  cr_expect_eq(ls_engine_read_loss_cols(e, NULL, NULL, 3), LS_OK);
  cr_expect_eq(ls_engine_read_loss_cols(e, sums, NULL, 3), LS_OK);
  cr_expect_eq(ls_engine_read_loss_cols(e, NULL, counts, 3), LS_OK);
  cr_expect(counts[0] == 5.0 && counts[1] == 5.0, "counts %g %g %g", counts[0], counts[1],
            counts[2]);
  cr_assert_eq(ls_engine_set_loss(e, NULL, 0), LS_OK);
  EXPECT_ERR(ls_engine_read_loss_cols(e, sums, counts, 3), LS_ERR_STATE, "no completed forward");
  EXPECT_ERR(ls_engine_backward(e, 1.0f), LS_ERR_STATE, "forward");
  EXPECT_ERR(ls_engine_read_outputs(e, NULL, pred, NULL, NULL), LS_ERR_STATE, "forward");
  /* A failed forward leaves none to read either. */
  cr_assert_eq(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, NULL, NULL, NULL), LS_OK);
  mask[0] = -1.0f;
  EXPECT_ERR(ls_engine_forward_elem(e, 3, 2, x, tgt, mask, NULL, NULL, NULL), LS_ERR_INVALID_ARG,
             "finite and >= 0");
  EXPECT_ERR(ls_engine_read_loss_cols(e, sums, counts, 3), LS_ERR_STATE, "no completed forward");
  ls_engine_destroy(e);
}

Test(args, cuda_without_backend) {
#ifndef LSTREAM_HAVE_CUDA
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.device = LS_DEVICE_CUDA;
  ls_engine_t *e = NULL;
  EXPECT_ERR(ls_engine_new(&conf, &e), LS_ERR_UNSUPPORTED, "--device cpu");
#endif
}

Test(args, error_strings) {
  for (int i = 0; i < LS_ERR__COUNT; i++)
    cr_expect(strlen(ls_err2str((ls_err_t)i)) > 0);
  cr_expect_str_eq(ls_err2str((ls_err_t)99), "unknown error code");
}

Test(args, device_count) {
  int n = -1;
  cr_assert_eq(ls_device_count(LS_DEVICE_CPU, &n), LS_OK);
  cr_assert_eq(n, 1);
  EXPECT_ERR(ls_device_count(LS_DEVICE_CPU, NULL), LS_ERR_INVALID_ARG, "NULL");
  EXPECT_ERR(ls_device_count((ls_device_t)7, &n), LS_ERR_INVALID_ARG, "unknown device");
  /* CUDA: the GPUs visible here (none in CI), never an error where built. */
#ifdef LSTREAM_HAVE_CUDA
  cr_assert_eq(ls_device_count(LS_DEVICE_CUDA, &n), LS_OK);
  cr_assert_geq(n, 0);
#else
  EXPECT_ERR(ls_device_count(LS_DEVICE_CUDA, &n), LS_ERR_UNSUPPORTED, "no CUDA backend");
#endif
}
