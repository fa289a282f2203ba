/*
 * FNV-1a, 64 bit, and splitmix64's mixer (include/base/digest.h).
 */
#include "base/digest.h"

uint64_t base_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *const p = data;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t base_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
