/*
 * CRC-32C (include/base/crc32c.h): a byte table, and SSE4.2's crc32
 * instruction where the CPU has it.
 */
#include "base/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h> /* _mm_crc32_u64: SSE4.2's CRC32C instruction */
#define HAVE_CRC32_SSE42 1
#endif

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    crc_table[i] = c;
  }
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
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data,
                                                               size_t n) {
  const uint8_t *p = data;
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    c = _mm_crc32_u64(c, v);
  }
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
