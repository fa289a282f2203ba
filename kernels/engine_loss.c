/*
 * The engine's losses (kernels.h, "Loss"): the loss each head output
 * takes, the choice between the masked MSE and the losses of every kind of
 * column for a forward, masks per element and rows' lengths, and the loss
 * column by column. engine.c orders the step around them.
 */
#include <math.h>
#include <string.h>

#include "engine_internal.h"

/* ------------------------------------------------------------------------ */
/* Which loss a forward takes                                                */

/* 1 where a forward's loss with this mask (MASK_*) is elem_loss's: a
 * column is pinball, or the mask is per element. Otherwise mse_loss's, the
 * masked MSE as it was before losses could be set, bit for bit. */
int engine_uses_elem_loss(const ls_engine_t *e, int masked) {
  return e->pinball || masked == MASK_ELEMS;
}

/* The loss of a window's N rows (targets in device memory, the mask in
 * e->mask) into e->scalars, and scale * d loss / d pred into e->dpred. */
ls_err_t engine_loss_queue(ls_engine_t *e, const float *target, int masked, float scale, int N) {
  int const O = e->conf.shape.output_size;
  const float *const mask = masked != MASK_NONE ? e->mask : NULL;
  if (!engine_uses_elem_loss(e, masked))
    return e->ops->mse_loss(e->ctx, e->scalars, e->dpred, e->pred, target, mask, scale, N, O);
  return e->ops->elem_loss(e->ctx, e->scalars, e->dpred, e->pred, target, mask,
                           masked == MASK_ELEMS ? O : 1, e->tau, scale, N, O);
}

/* The count of a forward over N rows with a row mask (NULL: all valid),
 * kernels.h's, and each column's (e->col_count). */
double engine_count_rows(ls_engine_t *e, size_t N, const float *mask) {
  int const O = e->conf.shape.output_size;
  double valid = 0.0;
  for (size_t r = 0; r < N && mask != NULL; r++)
    if (mask[r] != 0.0f) valid += mask[r];
  valid = mask != NULL ? valid : (double)N;
  for (int o = 0; o < O; o++)
    e->col_count[o] = valid;
  return valid * O;
}

/* An element mask [T, B, O] (NULL: every target known) and the rows'
 * lengths [B] (NULL: each row's last step with a known target): checks
 * them (a weight finite and >= 0; lengths in [0, T]; no known target past
 * a row's length), and sets each row's last step (as engine.c's mark_last does) and
 * the counts, *valid the forward's (targets: the forward has targets). */
ls_err_t engine_mark_elems(ls_engine_t *e, int T, int B, int targets, const float *mask,
                           const int *lengths, double *valid) {
  int const O = e->conf.shape.output_size;
  for (int b = 0; b < B && lengths != NULL; b++) {
    LS_RETURN_IF(lengths[b] < 0 || lengths[b] > T, LS_ERR_INVALID_ARG,
                 "lengths[%d]=%d is out of range [0, T=%d]", b, lengths[b], T);
    LS_RETURN_IF(targets && mask == NULL && lengths[b] < T, LS_ERR_INVALID_ARG,
                 "row %d has lengths[%d]=%d real steps of T=%d, and no mask makes the targets "
                 "past them unknown: give a mask (0 there)",
                 b, b, lengths[b], T);
  }
  *valid = 0.0;
  for (int o = 0; o < O; o++)
    e->col_count[o] = targets && mask == NULL ? (double)T * B : 0.0;
  if (targets && mask == NULL) *valid = (double)T * B * O;
  for (int b = 0; b < B; b++)
    e->last[b] = mask != NULL ? 0 : T;
  for (int t = 0; t < T && mask != NULL; t++)
    for (int b = 0; b < B; b++)
      for (int o = 0; o < O; o++) {
        float const m = mask[((size_t)t * B + b) * O + o];
        if (m == 0.0f) continue;
        LS_RETURN_IF(!(m > 0.0f) || !isfinite(m), LS_ERR_INVALID_ARG,
                     "mask[t=%d, b=%d, o=%d] = %g: a target's mask is a weight, finite and >= 0 "
                     "(1 = known, 0 = not known)",
                     t, b, o, (double)m);
        LS_RETURN_IF(lengths != NULL && t >= lengths[b], LS_ERR_INVALID_ARG,
                     "mask[t=%d, b=%d, o=%d] = %g marks a known target past row %d's "
                     "lengths[%d]=%d real steps: its prediction would come from padding",
                     t, b, o, (double)m, b, b, lengths[b]);
        e->col_count[o] += m;
        *valid += m;
        e->last[b] = t + 1;
      }
  e->fwd_partial = 0;
  for (int b = 0; b < B; b++) {
    if (lengths != NULL) e->last[b] = lengths[b];
    e->fwd_partial |= e->last[b] < T;
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* An engine's losses                                                        */

ls_err_t ls_engine_set_loss(ls_engine_t *e, const ls_loss_col_t *cols, int n) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  int const O = e->conf.shape.output_size;
  LS_RETURN_IF(cols == NULL && n != 0, LS_ERR_INVALID_ARG,
               "the losses are NULL with n=%d: give n=0 to make every column squared error", n);
  LS_RETURN_IF(cols != NULL && n != O, LS_ERR_INVALID_ARG,
               "%d losses given: the model has O=%d outputs, one loss each", n, O);
  for (int o = 0; o < n; o++) {
    float const tau = cols[o].tau;
    switch (cols[o].kind) {
    case LS_LOSS_MSE:
      LS_RETURN_IF(tau != 0.0f, LS_ERR_INVALID_ARG,
                   "column %d: a squared error (LS_LOSS_MSE) takes tau 0, not %g (a quantile "
                   "level needs LS_LOSS_PINBALL)",
                   o, (double)tau);
      break;
    case LS_LOSS_PINBALL:
      LS_RETURN_IF(!(tau > 0.0f && tau < 1.0f), LS_ERR_INVALID_ARG,
                   "column %d: the pinball loss's level tau=%g must lie in (0, 1)", o, (double)tau);
      break;
    default:
      return ls_error_set(LS_ERR_INVALID_ARG,
                          "column %d: unknown loss kind %d: expected LS_LOSS_MSE (%d) or "
                          "LS_LOSS_PINBALL (%d)",
                          o, (int)cols[o].kind, (int)LS_LOSS_MSE, (int)LS_LOSS_PINBALL);
    }
  }
  /* The last forward's loss and gradient were another loss's. */
  e->fwd_T = 0;
  e->bwd_done = 0;
  e->pinball = 0;
  for (int o = 0; o < O; o++) {
    e->tau_host[o] = cols != NULL ? cols[o].tau : 0.0f; /* 0: squared error */
    e->pinball |= e->tau_host[o] != 0.0f;
  }
  return e->ops->upload(e->ctx, e->tau, e->tau_host, (size_t)O * sizeof(float));
}

ls_err_t ls_engine_get_loss(const ls_engine_t *e, ls_loss_col_t *cols, int n) {
  LS_RETURN_IF(e == NULL || cols == NULL, LS_ERR_INVALID_ARG, "engine or losses are NULL");
  int const O = e->conf.shape.output_size;
  LS_RETURN_IF(n != O, LS_ERR_INVALID_ARG, "room for %d losses: the model has O=%d outputs", n, O);
  for (int o = 0; o < O; o++) {
    cols[o].kind = e->tau_host[o] != 0.0f ? LS_LOSS_PINBALL : LS_LOSS_MSE;
    cols[o].tau = e->tau_host[o];
  }
  return LS_OK;
}

ls_err_t ls_engine_read_loss_cols(ls_engine_t *e, double *loss_sums, double *counts, int n) {
  LS_RETURN_IF(e == NULL, LS_ERR_INVALID_ARG, "engine is NULL");
  int const O = e->conf.shape.output_size;
  LS_RETURN_IF(n != O, LS_ERR_INVALID_ARG, "room for %d columns: the model has O=%d outputs", n, O);
  LS_RETURN_IF(e->fwd_T == 0, LS_ERR_STATE, "no completed forward to read");
  LS_RETURN_IF(e->fwd_target == NULL, LS_ERR_STATE,
               "the last forward had no targets: it has no loss to read");
  if (loss_sums != NULL) {
    int const m = e->fwd_masked;
    LS_FORWARD_IF_ERROR(e->ops->loss_cols(e->ctx, e->col_loss, e->pred, e->fwd_target,
                                          m != MASK_NONE ? e->mask : NULL, m == MASK_ELEMS ? O : 1,
                                          e->tau, e->fwd_T * e->fwd_B, O));
    LS_FORWARD_IF_ERROR(
        e->ops->download(e->ctx, loss_sums, e->col_loss, (size_t)O * sizeof(double)));
  }
  if (counts != NULL) memcpy(counts, e->col_count, (size_t)O * sizeof(double));
  return LS_OK;
}
