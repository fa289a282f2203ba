/*
 * CRC-32C (include/base/crc32c.h): a byte table, and SSE4.2's crc32
 * instruction where the CPU has it, on three blocks at once (the
 * instruction's latency is three times its throughput: one stream waits
 * on each result), the three then combined; and combining two CRCs, by
 * multiplying by x^(8n) modulo the polynomial (as zlib's crc32_combine).
 * The polynomial is kept reflected: bit 31 is x^0.
 */
#include "base/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h> /* _mm_crc32_u64: SSE4.2's CRC32C instruction */
#define HAVE_CRC32_SSE42 1
#endif

#define POLY 0x82f63b78u /* Castagnoli's, reflected */

/* Bytes of each of the three blocks the instruction works on at once. */
#define BLOCK 4096

static uint32_t crc_table[256];
static uint32_t x2n[32];             /* x^(2^k) mod P */
static uint32_t block_shift[4][256]; /* multiplying by x^(8 BLOCK), a byte at a time */
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* a b mod P. */
static uint32_t multmodp(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
  }
  return p;
}

/* x^(n 2^k) mod P. */
static uint32_t x2nmodp(uint64_t n, unsigned k) {
  uint32_t p = 1u << 31; /* x^0 */
  for (; n != 0; n >>= 1, k++)
    if (n & 1) p = multmodp(x2n[k & 31], p);
  return p;
}

static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    crc_table[i] = c;
  }
  uint32_t p = 1u << 30; /* x^1 */
  for (int k = 0; k < 32; k++)
    x2n[k] = p, p = multmodp(p, p);
  uint32_t const shift = x2nmodp(BLOCK, 3); /* x^(8 BLOCK) */
  for (int j = 0; j < 4; j++)
    for (uint32_t b = 0; b < 256; b++)
      block_shift[j][b] = multmodp(shift, b << (8 * j));
}

uint32_t base_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  pthread_once(&crc_once, crc_table_init);
  return multmodp(x2nmodp(len2, 3), crc1) ^ crc2;
}

uint32_t base_crc32c_portable(uint32_t crc, const void *data, size_t n) {
  pthread_once(&crc_once, crc_table_init);
  const uint8_t *p = data;
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; i++)
    c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

#ifdef HAVE_CRC32_SSE42
/* The bytes at p, little-endian (memcpy: any alignment). */
static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* c, the CRC register after some bytes, as if BLOCK zero bytes followed. */
static inline uint64_t over_block(uint64_t c) {
  return block_shift[0][c & 0xff] ^ block_shift[1][(c >> 8) & 0xff] ^
         block_shift[2][(c >> 16) & 0xff] ^ block_shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data,
                                                               size_t n) {
  pthread_once(&crc_once, crc_table_init);
  const uint8_t *p = data;
  uint64_t c = ~crc;
  /* Three blocks at once: the register over a then b is that over a moved
   * past b, xor b's own from zero (the CRC is linear). */
  for (; n >= 3 * BLOCK; n -= 3 * BLOCK, p += 3 * BLOCK) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < BLOCK; i += 8) {
      c = _mm_crc32_u64(c, load64(p + i));
      c1 = _mm_crc32_u64(c1, load64(p + BLOCK + i));
      c2 = _mm_crc32_u64(c2, load64(p + 2 * BLOCK + i));
    }
    c = over_block(over_block(c) ^ c1) ^ c2;
  }
  for (; n >= 8; n -= 8, p += 8)
    c = _mm_crc32_u64(c, load64(p));
  uint32_t c32 = (uint32_t)c;
  for (; n > 0; n--)
    c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}
#endif

uint32_t base_crc32c(uint32_t crc, const void *data, size_t n) {
#ifdef HAVE_CRC32_SSE42
  if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42(crc, data, n);
#endif
  return base_crc32c_portable(crc, data, n);
}
