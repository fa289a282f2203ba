/*
 * What the CUDA engine's test programs share (test_cuda_engine.c, and
 * emu/test_emu_engine.c on the emulator): failure counting, checks, and the
 * norm-relative difference they compare tensors by. gpu_check.c has the
 * definitions.
 */
#ifndef LSTREAM_TESTS_GPU_CHECK_H
#define LSTREAM_TESTS_GPU_CHECK_H

#include <stddef.h>
#include <stdio.h>

#include "lstream/error.h"

/* Checks failed so far: the program's exit status is 1 when above 0. */
extern int failures;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

/* A call that must succeed; on failure the case is abandoned (goto out). */
#define MUST(call)                                                                                 \
  do {                                                                                             \
    ls_err_t const e_ = (call);                                                                    \
    if (e_ != LS_OK) {                                                                             \
      failures++;                                                                                  \
      printf("FAIL %s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, ls_err2str(e_),                \
             ls_last_error());                                                                     \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

/* max|a - b| / max|b| over n floats (norm-relative: an entry near zero has
 * a meaningless elementwise error); NaN anywhere gives NaN, a difference
 * from all zeros infinity. */
double rel_err(const float *a, const float *b, size_t n);

#endif
