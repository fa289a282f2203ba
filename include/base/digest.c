/*
 * FNV-1a, 64 bit (include/base/digest.h).
 */
#include "base/digest.h"

uint64_t base_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *const p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
