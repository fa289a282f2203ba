/*
 * What the engine's files share (kernels/ internal): the engine's fields,
 * and the helpers the series-state tables (state_table.c) and the losses
 * (engine_loss.c) use. engine.c orders a training step; state_table.c
 * holds (h, c) per series; engine_loss.c the losses.
 */
#ifndef LSTREAM_KERNELS_ENGINE_INTERNAL_H
#define LSTREAM_KERNELS_ENGINE_INTERNAL_H

#include "backend.h"
#include "lstream/kernels.h"

/* A scatter's slot and its batch row, for the duplicate check. */
typedef struct slot_row_s {
  int64_t slot;
  int row;
} slot_row_t;

struct ls_engine_s {
  ls_engine_conf_t conf;
  const ls_backend_ops_t *ops;
  void *ctx;
  size_t n_params; /* n */

  /* Flat buffers, device memory. */
  float *params; /* (n) PyTorch layout, see kernels.h */
  float *grads;  /* (n) */
  float *adam_m; /* (n) */
  float *adam_v; /* (n) */

  /* Workspaces for the largest window Tm = max_window, Bm = max_batch. A
   * call with (T, B) packs each layer's block densely as [T(+1), B, ...]. */
  float *x;        /* (Tm+1, Bm, I) inputs; a sequence window's targets in rows 1..T */
  float *target;   /* (Tm, Bm, O) targets given apart from the inputs */
  float *mask;     /* (Tm, Bm, O): per row (Tm, Bm) or per element */
  float *gates;    /* (L, Tm, Bm, 4H) activated gates */
  float *hs;       /* (L, Tm+1, Bm, H) hs[l][0] = h0 of layer l */
  float *cs;       /* (L, Tm+1, Bm, H) */
  float *tcs;      /* (L, Tm, Bm, H) tanh(c_t) */
  float *pred;     /* (Tm, Bm, O) */
  float *dpred;    /* (Tm, Bm, O) */
  float *dh;       /* (Tm, Bm, H) gradient flowing down the stack */
  float *dgates;   /* (Tm, Bm, 4H) */
  float *dx;       /* (Tm, Bm, I) */
  float *dh0;      /* (L, Bm, H) */
  float *dc0;      /* (L, Bm, H) */
  double *scalars; /* (SCALARS) loss sum, count, gradient norm^2, scratch, Adam's count of updates
                      taken (SCALAR_STEPS: on the device, which decides a skip) */
  ls_optim_args_t *optim_args;                /* (1) the last update's arguments */
  size_t gates_stride, hs_stride, tcs_stride; /* floats per layer block */

  /* The losses (ls_engine_set_loss), device memory. */
  float *tau;       /* (O) each column's pinball level, 0 = squared error */
  double *col_loss; /* (O) per-column loss sums (ls_engine_read_loss_cols) */

  float norm_scale;         /* grad_scale of the last optimizer step */
  float fetch_scale;        /* norm_scale when the figures were fetched */
  int fetched;              /* ls_engine_fetch_figures was called */
  slot_row_t *scatter_rows; /* (Bm) host scratch of the duplicate-slot check */
  int state_B;              /* B whose initial state is in hs[l][0], cs[l][0]; -1 none */
  int fwd_T;                /* (T, B) of the last forward; 0 none */
  int fwd_B;
  int fwd_masked;          /* the last forward's mask: MASK_NONE, MASK_ROWS or MASK_ELEMS */
  float *tau_host;         /* [O] host: e->tau's values, each column's loss */
  int pinball;             /* some column is pinball: every loss is elem_loss's */
  double *col_count;       /* [O] host: per column, the last forward's count */
  int *last;               /* [Bm] host: per row of the last forward, its last valid step + 1 (the
                              hs index of the state it carries on: T for a full window, 0 for a row
                              with no valid target) */
  int fwd_partial;         /* some row of the last forward ends before T */
  int64_t *skip;           /* [Bm] host scratch: slots with the partial rows left out */
  const float *fwd_target; /* the targets of the last forward (device), NULL none */
  int bwd_done;            /* input gradients are those of the last forward */

  ls_grad_ready_fn grad_hook; /* ls_engine_set_grad_hook; NULL none */
  void *grad_hook_opaque;
};

/* fwd_masked: the last forward had no mask, one per row or one per element. */
enum { MASK_NONE = 0, MASK_ROWS = 1, MASK_ELEMS = 2 };

/* scalars: where Adam's update count is, how many in all. */
#define SCALAR_STEPS 4
#define SCALARS      5

/* Allocates `floats` floats of device memory (zeroed). */
ls_err_t engine_alloc(ls_engine_t *e, float **ptr, size_t floats);

/* LS_ERR_INVALID_ARG unless 1 <= B <= max_batch. */
ls_err_t engine_check_batch(const ls_engine_t *e, int B);

/* engine_loss.c: the losses of a forward (kernels.h, "Loss").
 * engine_uses_elem_loss: 1 where a forward with this mask (MASK_*) takes
 * elem_loss (a pinball column, or a mask per element), 0 where mse_loss,
 * the masked MSE of before, bit for bit. engine_loss_queue: that loss of N
 * rows (targets in device memory, the mask in e->mask) into e->scalars,
 * and scale * d loss / d pred into e->dpred. engine_count_rows: the count
 * of a forward with a row mask [N] (NULL: all valid) and each column's
 * (e->col_count). engine_mark_elems: checks an element mask [T, B, O] and
 * rows' lengths [B] (either NULL; targets: the forward has them), and
 * sets each row's last step (e->last, e->fwd_partial), the columns' counts
 * and *valid, the forward's. */
int engine_uses_elem_loss(const ls_engine_t *e, int masked);
ls_err_t engine_loss_queue(ls_engine_t *e, const float *target, int masked, float scale, int N);
double engine_count_rows(ls_engine_t *e, size_t N, const float *mask);
ls_err_t engine_mark_elems(ls_engine_t *e, int T, int B, int targets, const float *mask,
                           const int *lengths, double *valid);

#endif /* LSTREAM_KERNELS_ENGINE_INTERNAL_H */
