/*
 * The CPU engine's bits do not depend on its threads: training steps
 * (forward, backward, clipped Adam) on 1, 2, 3 and 5 threads, and on 2
 * threads while the pool changes its choice between all threads and the
 * caller alone at every update (LSTREAM_CPU_ADAPT=alternate), leave the
 * same parameters, optimizer moments and states, bit for bit. The sums
 * that cross rows of the batch or parts of the parameters (the bias
 * gradients, the gradient's norm, the head's weight gradient) are taken
 * by parts fixed by the shape alone (kernels/lstm_cpu.c).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define STEPS 3

typedef struct run_s {
  float *params, *m, *v, *hT;
  size_t n, states;
} run_t;

static void run_free(run_t *r) {
  free(r->params), free(r->m), free(r->v), free(r->hT);
}

/* STEPS steps of shape d on `threads` threads (LSTREAM_CPU_ADAPT as the
 * environment says); batches of B rows, every 7th masked. */
static run_t train(const ref_dims_t *d, int threads) {
  ls_engine_t *const e = ref_engine_on(d, threads);
  cr_assert_not_null(e, "%s", ls_last_error());
  size_t const TB = (size_t)d->T * d->B;
  run_t r = {.n = ls_engine_param_count(e), .states = (size_t)d->L * d->B * d->H};
  r.params = malloc(r.n * sizeof(float));
  r.m = malloc(r.n * sizeof(float));
  r.v = malloc(r.n * sizeof(float));
  r.hT = malloc(r.states * sizeof(float));
  float *const x = malloc(TB * d->I * sizeof(float)), *const y = malloc(TB * d->O * sizeof(float));
  float *const mask = malloc(TB * sizeof(float));
  cr_assert(r.params && r.m && r.v && r.hT && x && y && mask);
  cr_assert_eq(ls_engine_init_params(e, 7), LS_OK);
  ls_optim_t opt;
  ls_optim_init(&opt);
  opt.lr = 1e-2f;
  opt.clip_norm = 0.05f; /* the norm is used: a step's update depends on it */
  for (int s = 0; s < STEPS; s++) {
    ref_fill(x, TB * d->I, 100 + (uint32_t)s, 1.0f);
    ref_fill(y, TB * d->O, 200 + (uint32_t)s, 1.0f);
    for (size_t k = 0; k < TB; k++)
      mask[k] = k % 7 == 3 ? 0.0f : 1.0f;
    double loss = 0.0, count = 0.0;
    cr_assert_eq(ls_engine_set_state(e, d->B, NULL, NULL), LS_OK);
    cr_assert_eq(ls_engine_forward(e, d->T, d->B, x, y, mask, &loss, &count), LS_OK, "%s",
                 ls_last_error());
    cr_assert_eq(ls_engine_backward(e, 1.0f), LS_OK, "%s", ls_last_error());
    cr_assert_eq(ls_engine_optimizer_step(e, &opt, 1.0f, NULL), LS_OK, "%s", ls_last_error());
  }
  cr_assert_eq(ls_engine_read_outputs(e, NULL, NULL, r.hT, NULL), LS_OK);
  cr_assert_eq(ls_engine_read_params(e, r.params, r.n), LS_OK);
  int64_t updates = 0;
  cr_assert_eq(ls_engine_read_optimizer(e, r.m, r.v, r.n, &updates), LS_OK, "%s", ls_last_error());
  cr_assert_eq(updates, STEPS);
  ls_engine_destroy(e);
  free(x), free(y), free(mask);
  return r;
}

static void expect_same(const run_t *a, const run_t *b, const char *what) {
  cr_expect_eq(memcmp(a->params, b->params, a->n * sizeof(float)), 0, "parameters differ: %s",
               what);
  cr_expect_eq(memcmp(a->m, b->m, a->n * sizeof(float)), 0, "Adam's m differs: %s", what);
  cr_expect_eq(memcmp(a->v, b->v, a->n * sizeof(float)), 0, "Adam's v differs: %s", what);
  cr_expect_eq(memcmp(a->hT, b->hT, a->states * sizeof(float)), 0, "final states differ: %s", what);
}

/* Shapes whose splits differ by thread count: B not a multiple of 6 (the
 * bias gradients' parts), H not of 16 (the panels), and the last with
 * work enough for 3 threads in the head's GEMMs (its forward and dy split
 * by rows, its weight gradient by columns: 19 outputs) and in the
 * gradient's norm (over 200k parameters). */
static const ref_dims_t shapes[] = {
    {3, 72, 2, 3, 20, 98},
    {5, 40, 1, 2, 16, 64},
    {2, 136, 2, 19, 24, 130},
};

Test(threads, same_bits_on_any_thread_count) {
  setenv("LSTREAM_CPU_ADAPT", "0", 1);
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    run_t one = train(&shapes[s], 1);
    int const counts[] = {2, 3, 5};
    for (size_t k = 0; k < 3; k++) {
      run_t r = train(&shapes[s], counts[k]);
      char what[64];
      snprintf(what, sizeof what, "shape %zu, %d threads against 1", s, counts[k]);
      expect_same(&one, &r, what);
      run_free(&r);
    }
    run_free(&one);
  }
  unsetenv("LSTREAM_CPU_ADAPT");
}

Test(threads, same_bits_while_the_pool_adapts) {
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    setenv("LSTREAM_CPU_ADAPT", "0", 1);
    run_t one = train(&shapes[s], 1);
    setenv("LSTREAM_CPU_ADAPT", "alternate", 1);
    run_t alt = train(&shapes[s], 2);
    setenv("LSTREAM_CPU_ADAPT", "1", 1);
    run_t on = train(&shapes[s], 2);
    expect_same(&one, &alt, "alternating all threads and the caller alone");
    expect_same(&one, &on, "adapting");
    run_free(&one), run_free(&alt), run_free(&on);
  }
  unsetenv("LSTREAM_CPU_ADAPT");
}

Test(threads, a_bad_adapt_setting_is_refused) {
  setenv("LSTREAM_CPU_ADAPT", "yes", 1);
  ls_engine_conf_t conf;
  ls_engine_conf_init(&conf);
  conf.shape = (ls_shape_t){2, 8, 1, 1};
  ls_engine_t *e = NULL;
  cr_expect_eq(ls_engine_new(&conf, &e), LS_ERR_INVALID_ARG);
  cr_expect_null(e);
  cr_expect_not_null(strstr(ls_last_error(), "LSTREAM_CPU_ADAPT='yes'"), "%s", ls_last_error());
  unsetenv("LSTREAM_CPU_ADAPT");
}
