/*
 * The gradient hook of ls_engine_backward (what overlaps a replica's
 * all-reduce with backward): it fires once per segment, head first, then
 * the layers top-down; the segments tile the gradient buffer back to front;
 * each segment already holds its final value when its hook fires, and no
 * later computation of the same backward touches it; a hook's error stops
 * the backward.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

#define MAX_SEG 8

typedef struct seen_s {
  int calls;
  int segment[MAX_SEG];
  size_t offset[MAX_SEG], count[MAX_SEG];
  float *copy;       /* (n) each segment's values when its hook fired */
  const float *grad; /* the engine's gradient buffer (host memory on the CPU) */
  int fail_at;       /* segment whose hook fails; -1 none */
} seen_t;

static ls_err_t record(void *opaque, int segment, size_t offset, size_t count, void *stream) {
  seen_t *const s = opaque;
  cr_assert_null(stream, "the CPU backend has no stream");
  cr_assert_lt(s->calls, MAX_SEG);
  s->segment[s->calls] = segment;
  s->offset[s->calls] = offset;
  s->count[s->calls] = count;
  s->calls++;
  memcpy(s->copy + offset, s->grad + offset, count * sizeof(float));
  if (segment == s->fail_at)
    return ls_error_set(LS_ERR_BACKEND, "all-reduce of %d failed", segment);
  return LS_OK;
}

/* One forward + backward of a random window on e. */
static ls_err_t step(ls_engine_t *e, const ref_dims_t *d) {
  size_t const nx = (size_t)d->T * d->B * d->I, ny = (size_t)d->T * d->B * d->O;
  float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
  ref_fill(x, nx, 11, 1.0f);
  ref_fill(y, ny, 12, 1.0f);
  ls_err_t err = ls_engine_set_state(e, d->B, NULL, NULL);
  if (err == LS_OK) err = ls_engine_forward(e, d->T, d->B, x, y, NULL, NULL, NULL);
  if (err == LS_OK) err = ls_engine_backward(e, 0.5f);
  free(x), free(y);
  return err;
}

Test(hook, segments_in_order_tile_the_buffer_with_final_values) {
  ref_dims_t const d = {3, 5, 3, 2, 4, 3};
  ls_engine_t *e = ref_engine(&d);
  cr_assert_not_null(e, "%s", ls_last_error());
  size_t const n = ls_engine_param_count(e);
  seen_t s = {.copy = calloc(n, sizeof(float)), .grad = ls_engine_grad_buffer(e), .fail_at = -1};
  /* Gradients accumulate: a hook must see the sum, not this backward's part. */
  cr_assert_eq(step(e, &d), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_engine_set_grad_hook(e, record, &s), LS_OK);
  cr_assert_eq(step(e, &d), LS_OK, "%s", ls_last_error());

  cr_assert_eq(s.calls, d.L + 1);
  size_t end = n; /* segments run back to front without gaps */
  for (int k = 0; k <= d.L; k++) {
    cr_assert_eq(s.segment[k], k);
    cr_assert_eq(s.offset[k] + s.count[k], end, "segment %d does not end where %d began", k, k - 1);
    size_t off, cnt;
    cr_assert_eq(ls_grad_segment(&ls_engine_get_conf(e)->shape, k, &off, &cnt), LS_OK);
    cr_assert(off == s.offset[k] && cnt == s.count[k], "ls_grad_segment(%d) differs", k);
    end = s.offset[k];
  }
  cr_assert_eq(end, 0, "the segments leave the start of the buffer out");
  /* Segment 0 is the head, segment L layer 0. */
  size_t off, cnt;
  ls_shape_t const *sh = &ls_engine_get_conf(e)->shape;
  cr_assert_eq(ls_param_locate(sh, 0, LS_PARAM_HEAD_WEIGHT, &off, &cnt), LS_OK);
  cr_assert_eq(s.offset[0], off);
  cr_assert_eq(ls_param_locate(sh, d.L - 1, LS_PARAM_WEIGHT_IH, &off, &cnt), LS_OK);
  cr_assert_eq(s.offset[1], off);

  float *final = malloc(n * sizeof(float));
  cr_assert_eq(ls_engine_read_grads(e, final, n), LS_OK);
  cr_assert_eq(memcmp(final, s.copy, n * sizeof(float)), 0,
               "a segment changed after its hook fired");

  /* Cleared: no calls. */
  cr_assert_eq(ls_engine_set_grad_hook(e, NULL, &s), LS_OK);
  s.calls = 0;
  cr_assert_eq(step(e, &d), LS_OK);
  cr_assert_eq(s.calls, 0);
  free(final), free(s.copy);
  ls_engine_destroy(e);
}

Test(hook, error_stops_backward) {
  ref_dims_t const d = {2, 4, 3, 2, 3, 2};
  ls_engine_t *e = ref_engine(&d);
  cr_assert_not_null(e, "%s", ls_last_error());
  size_t const n = ls_engine_param_count(e);
  seen_t s = {.copy = calloc(n, sizeof(float)), .grad = ls_engine_grad_buffer(e), .fail_at = 1};
  cr_assert_eq(ls_engine_set_grad_hook(e, record, &s), LS_OK);
  cr_assert_eq(step(e, &d), LS_ERR_BACKEND);
  cr_assert(strstr(ls_last_error(), "all-reduce of 1 failed") != NULL, "%s", ls_last_error());
  cr_assert_eq(s.calls, 2, "backward went on after the hook failed");
  free(s.copy);
  ls_engine_destroy(e);
}

Test(hook, bad_arguments) {
  ls_shape_t const sh = {2, 4, 2, 2};
  size_t off, cnt;
  cr_assert_eq(ls_grad_segment(&sh, -1, &off, &cnt), LS_ERR_INVALID_ARG);
  cr_assert_eq(ls_grad_segment(&sh, 3, &off, &cnt), LS_ERR_INVALID_ARG);
  cr_assert(strstr(ls_last_error(), "segment 3") != NULL, "%s", ls_last_error());
  cr_assert_eq(ls_grad_segment(NULL, 0, &off, &cnt), LS_ERR_INVALID_ARG);
  cr_assert_eq(ls_grad_segment(&sh, 0, NULL, &cnt), LS_ERR_INVALID_ARG);
  ls_shape_t const bad = {0, 4, 2, 2};
  cr_assert_eq(ls_grad_segment(&bad, 0, &off, &cnt), LS_ERR_INVALID_ARG);
  cr_assert_eq(ls_engine_set_grad_hook(NULL, record, NULL), LS_ERR_INVALID_ARG);
  cr_assert_null(ls_engine_stream(NULL));
}
