/*
 * CSV fields as lstream writes them (--series-out and any other CSV it
 * writes): RFC 4180, with an escape for bytes that are not text.
 */
#ifndef LSTREAM_BASE_CSV_H
#define LSTREAM_BASE_CSV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/api.h"
#include "lstream/error.h"

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

/* A reader of CSV records (RFC 4180: fields separated by commas, a field
 * in double quotes may hold commas, doubled quotes and line ends; a record
 * ends at LF or CRLF outside quotes). Fields are returned as written, the
 * quotes removed and doubled quotes made single; the escapes of
 * base_csv_field (\\, \xHH) are left as they are. Zero-initialise; free
 * with base_csv_reader_free. */
typedef struct base_csv_reader_s {
  char *buf; /* the record's fields, each NUL-terminated */
  size_t cap;
  size_t *at; /* [n] where each field starts in buf */
  size_t n, cap_at;
  int64_t line; /* the line the record starts on, from 1 */
  int64_t next_line;
} base_csv_reader_t;

/* Reads the next record of f into r: r->n fields, field i at r->buf +
 * r->at[i]; *got = 1, or 0 at the end of the file. Errors: no memory, a
 * read error, a quote left open at the end of the file. */
BASE_API ls_err_t base_csv_next(base_csv_reader_t *r, FILE *f, int *got);

/* Field i of the record read last (i < r->n). */
BASE_API const char *base_csv_get(const base_csv_reader_t *r, size_t i);

BASE_API void base_csv_reader_free(base_csv_reader_t *r);

#endif /* LSTREAM_BASE_CSV_H */
