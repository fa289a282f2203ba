/*
 * CRC-32C (Castagnoli), the checksum of snapshot files and of TFRecord
 * framing (TensorBoard event files). One implementation for both.
 */
#ifndef LSTREAM_BASE_CRC32C_H
#define LSTREAM_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#include "base/api.h"

/* CRC32C of n bytes, continuing from crc (start with 0): crc(a then b) is
 * base_crc32c(base_crc32c(0, a, na), b, nb). Uses the CPU's crc32
 * instruction where it has one. */
BASE_API uint32_t base_crc32c(uint32_t crc, const void *data, size_t n);

/* The same, table-driven on any CPU (the reference the fast one is tested
 * against). */
BASE_API uint32_t base_crc32c_portable(uint32_t crc, const void *data, size_t n);

/* The CRC32C of a then b from crc1 = CRC of a and crc2 = CRC of b (each
 * from 0) and b's length, without reading them: base_crc32c(crc1, b, len2)
 * = base_crc32c_combine(crc1, base_crc32c(0, b, len2), len2). */
BASE_API uint32_t base_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);

#endif /* LSTREAM_BASE_CRC32C_H */
