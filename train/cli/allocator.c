/*
 * The allocator the lstream program runs on (`lstream --version`).
 *
 * Where the build found jemalloc (CMake's LSTREAM_MALLOC, the default
 * outside the sanitizer build) the program links it, and its malloc and
 * free serve every library in the process. The reason is librdkafka: its
 * broker thread allocates each message it fetches and our consumer thread
 * frees it. glibc gives each thread an arena and frees a chunk into the
 * arena it came from under that arena's lock, so the two threads take the
 * same lock for every message and sleep on it (perf, `train --replay 0` at
 * the default shape: ~18% of the samples in the two threads' malloc and
 * free, half of it in futex waits and wake-ups); jemalloc returns a remote
 * free to its owner in batches. Figures in the README (Benchmarks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef LSTREAM_JEMALLOC
#include <stdint.h>

#include <jemalloc/jemalloc.h>

/* Bytes this thread has allocated through jemalloc; 0 where unknown. */
static uint64_t thread_allocated(void) {
  uint64_t n = 0;
  size_t len = sizeof n;
  return mallctl("thread.allocated", &n, &len, NULL, 0) == 0 ? n : 0;
}
#endif

void cli_allocator(char *buf, size_t size) {
  if (buf == NULL || size == 0) return;
#ifdef LSTREAM_JEMALLOC
  /* Linked is not enough: malloc must resolve to it. Its counter of this
   * thread's allocations moves by a malloc's size only if it does. */
  const char *version = NULL;
  size_t len = sizeof version;
  if (mallctl("version", &version, &len, NULL, 0) == 0) {
    uint64_t const before = thread_allocated();
    size_t const probe = (size_t)1 << 20;
    void *volatile p = malloc(probe);
    uint64_t const after = thread_allocated();
    int const counted = p != NULL && after - before >= probe;
    free(p);
    int const n = (int)strcspn(version, "-"); /* 5.3.0-0-g<commit>: 5.3.0 */
    if (counted)
      snprintf(buf, size, "jemalloc %.*s", n, version);
    else
      snprintf(buf, size, "another malloc (jemalloc %.*s linked, not in use)", n, version);
    return;
  }
#endif
  snprintf(buf, size, "system malloc");
}
