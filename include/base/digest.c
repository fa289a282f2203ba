/*
 * FNV-1a, 64 bit, splitmix64's mixer and random ids (include/base/digest.h).
 */
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

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

uint64_t base_random64(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) == (ssize_t)sizeof r && r != 0) return r;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  r = base_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec);
  return r != 0 ? r : 1;
}
