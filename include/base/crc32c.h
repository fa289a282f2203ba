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

#endif /* LSTREAM_BASE_CRC32C_H */
