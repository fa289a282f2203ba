/*
 * CSV fields as lstream writes them (--series-out and any other CSV it
 * writes): RFC 4180, with an escape for bytes that are not text.
 */
#ifndef LSTREAM_BASE_CSV_H
#define LSTREAM_BASE_CSV_H

#include <stddef.h>
#include <stdio.h>

#include "base/api.h"

/* Writes the bytes s [n] to f as one CSV field (no separator, no line end):
 *   - a NUL byte, a byte that is not part of valid UTF-8 (a stray
 *     continuation byte, a truncated or overlong sequence, a surrogate, a
 *     code point above U+10FFFF) is written as \xHH (two lowercase hex
 *     digits), and a backslash as \\, so the bytes can always be recovered
 *     (read \\ as one backslash and \xHH as byte HH);
 *   - every other byte is written as it is (UTF-8 text stays readable);
 *   - a field holding a comma, a double quote, CR or LF is enclosed in
 *     double quotes and its double quotes are doubled (RFC 4180).
 * Returns 0, or -1 when f reports an error. */
BASE_API int base_csv_field(FILE *f, const void *s, size_t n);

#endif /* LSTREAM_BASE_CSV_H */
