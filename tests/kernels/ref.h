/*
 * Test helpers for kernels/: a plain double-precision reference of the
 * model (stacked LSTM + head + masked MSE) written straight from the
 * equations, and reproducible random data. Used by the gradient and state
 * tests; the PyTorch oracle (tests/oracle/) checks the engine independently.
 */
#ifndef LSTREAM_TESTS_KERNELS_REF_H
#define LSTREAM_TESTS_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/kernels.h"

typedef struct ref_dims_s {
  int I, H, L, O, T, B;
} ref_dims_t;

/* Loss sum of the masked MSE (see kernels.h) of a window, in double.
 *   p [n] flat parameters, x [T,B,I], h0, c0 [L,B,H], target [T,B,O],
 *   mask [T,B] or NULL; pred [T,B,O] and hT, cT [L,B,H] may be NULL: hT, cT
 *   are each row's state after its last valid step (h0, c0 for a row with
 *   none), as kernels.h says. */
double ref_loss(const ref_dims_t *d, const double *p, const double *x, const double *h0,
                const double *c0, const double *target, const double *mask, double *pred,
                double *hT, double *cT);

/* Uniform floats in [-scale, scale) from a seed (xorshift32). */
void ref_fill(float *v, size_t n, uint32_t seed, float scale);

/* floats -> doubles. */
void ref_widen(double *dst, const float *src, size_t n);

/* max |a - b| / max |b| over n values (0 when b is all zero and a == b). */
double ref_rel_err(const float *a, const double *b, size_t n);

/* An engine of shape d (O outputs), max_batch B, max_window T, CPU, 2 threads
 * (ref_engine_on: `threads`); NULL on failure (ls_last_error says why). */
ls_engine_t *ref_engine(const ref_dims_t *d);
ls_engine_t *ref_engine_on(const ref_dims_t *d, int threads);

#endif
