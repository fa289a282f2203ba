/*
 * vexp, vsigmoid and vtanh (kernels/vec_cpu.h) against libm on a dense
 * grid, for every instruction set the CPU engine is built for: the
 * polynomial, the range reduction and the clamps. The bounds are the
 * documented ones of vec_cpu.h; Taylor's degree-5 polynomial in place of
 * the minimax one exceeds them tenfold (exp 3.5e-6), ln 2 without its low
 * part where there is no FMA a thousandfold (exp 1.8e-4), and either clamp
 * left out fails the checks outside the range.
 */
#include <criterion/criterion.h>

#include "vec_errors.h"

/* 2^21 points: steps of 8e-5 over vexp's range, 2e-5 over [-20, 20]. */
#define POINTS (1L << 21)

/* vexp: 1.9e-9 of the minimax polynomial plus float rounding in the
 * reduction and Horner steps, plus with FMA 1.9e-9 |k| of ln2 as one
 * float: 3.08e-7 measured at k = +-126 with FMA (AVX2, AVX-512), 1.1e-7
 * without (generic on x86-64, SSE2). */
#define EXP_REL 3.3e-7
/* 1 / (1 + e^-x): vexp's error (< 1.5e-7 for |x| <= 20), shrunk by
 * e^-x / (1 + e^-x), plus the two roundings of the sum and the division:
 * 1.92e-7 measured with FMA, 1.57e-7 without. */
#define SIGMOID_REL 2.2e-7
/* tanh = 1 - 2 / (e^{2x} + 1): the cancellation leaves absolute error,
 * about an ulp of 1 (1.2e-7) plus vexp's share: 1.78e-7 measured. */
#define TANH_ABS 2e-7

static void check(void (*errors)(vec_errors_t *, long), const char *isa) {
  vec_errors_t e;
  errors(&e, POINTS);
  cr_log_info("%s: exp rel %.3g, sigmoid rel %.3g abs %.3g, tanh abs %.3g", isa, e.exp_rel,
              e.sigmoid_rel, e.sigmoid_abs, e.tanh_abs);
  cr_expect_leq(e.exp_rel, EXP_REL, "%s: vexp relative error %.3g", isa, e.exp_rel);
  cr_expect_leq(e.sigmoid_rel, SIGMOID_REL, "%s: vsigmoid relative error %.3g", isa, e.sigmoid_rel);
  cr_expect_leq(e.tanh_abs, TANH_ABS, "%s: vtanh absolute error %.3g", isa, e.tanh_abs);
  cr_expect(e.outside_ok, "%s: vexp/vsigmoid/vtanh wrong outside [-87, 88] or on NaN", isa);
}

Test(vec, generic) {
  check(vec_errors_generic, "generic");
}

#if defined(LSTREAM_RECUR_X86)
Test(vec, avx2) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    cr_skip_test("this CPU has no AVX2+FMA");
  check(vec_errors_avx2, "avx2");
}

Test(vec, avx512) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) cr_skip_test("this CPU has no AVX-512");
  check(vec_errors_avx512, "avx512");
}
#endif
