/*
 * FNV-1a, 64 bit: the digest lstream prints and compares (parameters,
 * series tables, configuration fingerprints). Equal digests mean equal
 * bytes, as far as a 64-bit digest can tell; not for untrusted input. And
 * splitmix64's mixer, for reproducible draws, and 64 random bits for ids.
 */
#ifndef LSTREAM_BASE_DIGEST_H
#define LSTREAM_BASE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/api.h"

/* The starting value (FNV's 64-bit offset basis). */
#define BASE_FNV1A_INIT 0xcbf29ce484222325ull

/* Continues digest h over n bytes of data: digest(a then b) is
 * base_fnv1a(base_fnv1a(BASE_FNV1A_INIT, a, na), b, nb). */
BASE_API uint64_t base_fnv1a(uint64_t h, const void *data, size_t n);

/* splitmix64's step and finaliser: z + 2^64/phi, bits mixed. A counter-based
 * generator (the synthetic feed's draws, replay's) and a hash of integers;
 * the same on every machine. */
BASE_API uint64_t base_mix64(uint64_t z);

/* 64 random bits, never 0 (getrandom; the clock and the pid mixed where it
 * fails): ids that set one run's files apart from another's. */
BASE_API uint64_t base_random64(void);

#endif /* LSTREAM_BASE_DIGEST_H */
