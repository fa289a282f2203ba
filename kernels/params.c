/*
 * The flat parameter layout (PyTorch nn.LSTM + nn.Linear order) and the
 * optimizer defaults. See include/lstream/kernels.h.
 */
#include <stdio.h>

#include "lstream/kernels.h"

/* Bounds that keep every buffer size inside size_t and int indexing:
 * 4H * max(I, H) and T * B * 4H must fit in an int row count per GEMM. */
#define LS_MAX_FEATURES (1 << 16)
#define LS_MAX_HIDDEN   (1 << 14)
#define LS_MAX_LAYERS   64

ls_err_t ls_shape_check(const ls_shape_t *shape) {
  LS_RETURN_IF(shape == NULL, LS_ERR_INVALID_ARG, "shape is NULL");
  LS_RETURN_IF(shape->input_size < 1 || shape->input_size > LS_MAX_FEATURES, LS_ERR_INVALID_ARG,
               "input size I=%d is out of range [1, %d]", shape->input_size, LS_MAX_FEATURES);
  LS_RETURN_IF(shape->hidden_size < 1 || shape->hidden_size > LS_MAX_HIDDEN, LS_ERR_INVALID_ARG,
               "hidden size H=%d is out of range [1, %d]", shape->hidden_size, LS_MAX_HIDDEN);
  LS_RETURN_IF(shape->num_layers < 1 || shape->num_layers > LS_MAX_LAYERS, LS_ERR_INVALID_ARG,
               "layer count L=%d is out of range [1, %d]", shape->num_layers, LS_MAX_LAYERS);
  LS_RETURN_IF(shape->output_size < 1 || shape->output_size > LS_MAX_FEATURES, LS_ERR_INVALID_ARG,
               "output size O=%d is out of range [1, %d]", shape->output_size, LS_MAX_FEATURES);
  return LS_OK;
}

/* Floats of layer k's four tensors. */
static size_t layer_floats(const ls_shape_t *s, int k) {
  size_t const H = (size_t)s->hidden_size;
  size_t const In = k == 0 ? (size_t)s->input_size : H;
  return 4 * H * In + 4 * H * H + 8 * H;
}

ls_err_t ls_param_count(const ls_shape_t *shape, size_t *count) {
  LS_FORWARD_IF_ERROR(ls_shape_check(shape));
  LS_RETURN_IF(count == NULL, LS_ERR_INVALID_ARG, "count is NULL");
  size_t n = 0;
  for (int k = 0; k < shape->num_layers; k++)
    n += layer_floats(shape, k);
  n += (size_t)shape->output_size * ((size_t)shape->hidden_size + 1);
  *count = n;
  return LS_OK;
}

ls_err_t ls_param_locate(const ls_shape_t *shape, int layer, ls_param_kind_t kind, size_t *offset,
                         size_t *count) {
  LS_FORWARD_IF_ERROR(ls_shape_check(shape));
  LS_RETURN_IF(offset == NULL || count == NULL, LS_ERR_INVALID_ARG, "offset or count is NULL");
  size_t const H = (size_t)shape->hidden_size, O = (size_t)shape->output_size;
  int const is_head = kind == LS_PARAM_HEAD_WEIGHT || kind == LS_PARAM_HEAD_BIAS;
  LS_RETURN_IF((int)kind < 0 || kind > LS_PARAM_HEAD_BIAS, LS_ERR_INVALID_ARG,
               "unknown parameter kind %d", (int)kind);
  LS_RETURN_IF(!is_head && (layer < 0 || layer >= shape->num_layers), LS_ERR_INVALID_ARG,
               "layer %d is out of range [0, %d)", layer, shape->num_layers);
  size_t off = 0;
  int const upto = is_head ? shape->num_layers : layer;
  for (int k = 0; k < upto; k++)
    off += layer_floats(shape, k);
  size_t const In = layer == 0 ? (size_t)shape->input_size : H;
  size_t n = 0;
  switch (kind) {
  case LS_PARAM_WEIGHT_IH: n = 4 * H * In; break;
  case LS_PARAM_WEIGHT_HH: off += 4 * H * In, n = 4 * H * H; break;
  case LS_PARAM_BIAS_IH: off += 4 * H * In + 4 * H * H, n = 4 * H; break;
  case LS_PARAM_BIAS_HH: off += 4 * H * In + 4 * H * H + 4 * H, n = 4 * H; break;
  case LS_PARAM_HEAD_WEIGHT: n = O * H; break;
  case LS_PARAM_HEAD_BIAS: off += O * H, n = O; break;
  }
  *offset = off;
  *count = n;
  return LS_OK;
}

ls_err_t ls_grad_segment(const ls_shape_t *shape, int k, size_t *offset, size_t *count) {
  LS_FORWARD_IF_ERROR(ls_shape_check(shape));
  LS_RETURN_IF(offset == NULL || count == NULL, LS_ERR_INVALID_ARG, "offset or count is NULL");
  int const L = shape->num_layers;
  LS_RETURN_IF(k < 0 || k > L, LS_ERR_INVALID_ARG, "gradient segment %d is out of range [0, %d]", k,
               L);
  size_t n = 0;
  if (k == 0) {
    LS_FORWARD_IF_ERROR(ls_param_locate(shape, 0, LS_PARAM_HEAD_WEIGHT, offset, &n));
    *count = (size_t)shape->output_size * ((size_t)shape->hidden_size + 1);
    return LS_OK;
  }
  LS_FORWARD_IF_ERROR(ls_param_locate(shape, L - k, LS_PARAM_WEIGHT_IH, offset, &n));
  *count = layer_floats(shape, L - k);
  return LS_OK;
}

ls_err_t ls_param_name(int layer, ls_param_kind_t kind, char *buf, size_t size) {
  LS_RETURN_IF(buf == NULL || size == 0, LS_ERR_INVALID_ARG, "buffer is NULL or empty");
  static const char *const names[] = {"weight_ih_l", "weight_hh_l", "bias_ih_l",
                                      "bias_hh_l",   "head.weight", "head.bias"};
  LS_RETURN_IF((int)kind < 0 || kind > LS_PARAM_HEAD_BIAS, LS_ERR_INVALID_ARG,
               "unknown parameter kind %d", (int)kind);
  int const is_head = kind >= LS_PARAM_HEAD_WEIGHT;
  LS_RETURN_IF(!is_head && layer < 0, LS_ERR_INVALID_ARG, "layer %d is negative", layer);
  int const n = is_head ? snprintf(buf, size, "%s", names[kind])
                        : snprintf(buf, size, "%s%d", names[kind], layer);
  LS_RETURN_IF(n < 0 || (size_t)n >= size, LS_ERR_INVALID_ARG,
               "buffer of %zu bytes is too small for the name", size);
  return LS_OK;
}

void ls_optim_init(ls_optim_t *opt) {
  if (opt == NULL) return;
  opt->lr = 1e-3f;
  opt->beta1 = 0.9f;
  opt->beta2 = 0.999f;
  opt->eps = 1e-8f;
  opt->weight_decay = 0.0f;
  opt->decoupled = 0;
  opt->clip_norm = 1.0f;
  opt->skip_nonfinite = 0;
}
