/* tests/kernels/vec_errors.c: the errors of vec_cpu.h's pointwise math. */
#ifndef LSTREAM_TESTS_VEC_ERRORS_H
#define LSTREAM_TESTS_VEC_ERRORS_H

typedef struct vec_errors_s {
  double exp_rel;     /* max |vexp - exp| / exp over [-87, 88] */
  double sigmoid_rel; /* max |vsigmoid - s| / s over [-20, 20] */
  double sigmoid_abs; /* max |vsigmoid - s| */
  double tanh_abs;    /* max |vtanh - tanh| over [-20, 20] */
  int outside_ok;     /* clamps at +-1e4 and NaN behave (vec_errors.c) */
} vec_errors_t;

/* n grid points per range. */
#if defined(LSTREAM_RECUR_X86)
void vec_errors_avx512(vec_errors_t *e, long n);
void vec_errors_avx2(vec_errors_t *e, long n);
#endif
void vec_errors_generic(vec_errors_t *e, long n);

#endif /* LSTREAM_TESTS_VEC_ERRORS_H */
