/*
 * The double-precision reference model and data helpers (see ref.h).
 */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double sigmoid(double v) {
  return 1.0 / (1.0 + exp(-v));
}

double ref_loss(const ref_dims_t *d, const double *p, const double *x, const double *h0,
                const double *c0, const double *target, const double *mask, double *pred,
                double *hT, double *cT) {
  ls_shape_t const s = {d->I, d->H, d->L, d->O};
  int const H = d->H, T = d->T, B = d->B;
  size_t const N = (size_t)T * B;
  /* in [T, B, In] for the current layer; out [T, B, H] */
  double *in = malloc(N * (size_t)(d->I > H ? d->I : H) * sizeof(double));
  double *out = malloc(N * (size_t)H * sizeof(double));
  double *h = malloc((size_t)H * sizeof(double)), *c = malloc((size_t)H * sizeof(double));
  double *gates = malloc(4 * (size_t)H * sizeof(double));
  memcpy(in, x, N * (size_t)d->I * sizeof(double));
  for (int l = 0; l < d->L; l++) {
    int const In = l == 0 ? d->I : H;
    size_t o[4], cnt;
    for (int k = 0; k < 4; k++)
      ls_param_locate(&s, l, (ls_param_kind_t)(LS_PARAM_WEIGHT_IH + k), &o[k], &cnt);
    const double *w_ih = p + o[0], *w_hh = p + o[1], *b_ih = p + o[2], *b_hh = p + o[3];
    for (int b = 0; b < B; b++) {
      memcpy(h, h0 + ((size_t)l * B + b) * H, (size_t)H * sizeof(double));
      memcpy(c, c0 + ((size_t)l * B + b) * H, (size_t)H * sizeof(double));
      /* The state carried on: after the row's last valid step. */
      int last = T;
      while (mask && last > 0 && mask[(size_t)(last - 1) * B + b] == 0.0)
        last--;
      size_t const fin = ((size_t)l * B + b) * H;
      if (last == 0 && hT) memcpy(hT + fin, h, (size_t)H * sizeof(double));
      if (last == 0 && cT) memcpy(cT + fin, c, (size_t)H * sizeof(double));
      for (int t = 0; t < T; t++) {
        const double *xt = in + ((size_t)t * B + b) * In;
        for (int r = 0; r < 4 * H; r++) {
          double a = b_ih[r] + b_hh[r];
          for (int k = 0; k < In; k++)
            a += w_ih[(size_t)r * In + k] * xt[k];
          for (int k = 0; k < H; k++)
            a += w_hh[(size_t)r * H + k] * h[k];
          gates[r] = a;
        }
        for (int j = 0; j < H; j++) {
          double const i = sigmoid(gates[j]), f = sigmoid(gates[H + j]);
          double const g = tanh(gates[2 * H + j]), og = sigmoid(gates[3 * H + j]);
          c[j] = f * c[j] + i * g;
          h[j] = og * tanh(c[j]);
        }
        memcpy(out + ((size_t)t * B + b) * H, h, (size_t)H * sizeof(double));
        if (t + 1 == last && hT) memcpy(hT + fin, h, (size_t)H * sizeof(double));
        if (t + 1 == last && cT) memcpy(cT + fin, c, (size_t)H * sizeof(double));
      }
    }
    memcpy(in, out, N * (size_t)H * sizeof(double));
  }
  size_t ow, ob, cnt;
  ls_param_locate(&s, 0, LS_PARAM_HEAD_WEIGHT, &ow, &cnt);
  ls_param_locate(&s, 0, LS_PARAM_HEAD_BIAS, &ob, &cnt);
  double loss = 0.0;
  for (size_t r = 0; r < N; r++) {
    double const m = mask ? mask[r] : 1.0;
    for (int o = 0; o < d->O; o++) {
      double y = p[ob + o];
      for (int k = 0; k < H; k++)
        y += p[ow + (size_t)o * H + k] * in[r * H + k];
      if (pred) pred[r * d->O + o] = y;
      double const e = y - target[r * d->O + o];
      if (m != 0.0) loss += m * e * e;
    }
  }
  free(in), free(out), free(h), free(c), free(gates);
  return loss;
}

void ref_fill(float *v, size_t n, uint32_t seed, float scale) {
  uint32_t s = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    v[i] = scale * (float)((double)s / 2147483648.0 - 1.0);
  }
}

void ref_widen(double *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = src[i];
}

double ref_rel_err(const float *a, const double *b, size_t n) {
  double diff = 0.0, top = 0.0;
  for (size_t i = 0; i < n; i++) {
    diff = fmax(diff, fabs((double)a[i] - b[i]));
    top = fmax(top, fabs(b[i]));
  }
  return top > 0.0 ? diff / top : diff;
}

ls_engine_t *ref_engine_on(const ref_dims_t *d, int threads) {
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = (ls_shape_t){d->I, d->H, d->L, d->O};
  conf.max_batch = d->B;
  conf.max_window = d->T;
  conf.threads = threads;
  ls_engine_t *e = NULL;
  return ls_engine_new(&conf, &e) == LS_OK ? e : NULL;
}

ls_engine_t *ref_engine(const ref_dims_t *d) {
  return ref_engine_on(d, 2);
}
