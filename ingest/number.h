/*
 * Decimal numbers as text, to float (internal to ingest/): the one parser of
 * csv fields and JSON numbers, so that the same text gives the same float
 * in either format (correctly rounded: Clinger's fast path, else strtof in
 * the "C" locale), and the epoch times of JSON and Avro time fields.
 */
#ifndef LSTREAM_INGEST_NUMBER_H
#define LSTREAM_INGEST_NUMBER_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/ingest.h" /* ls_reject_t */

/* The longest number text parsed (bytes). */
#define NUMBER_TEXT_MAX 63

/* A decimal number as scanned: (-1)^neg * mant * 10^exp10, exactly when
 * exact (at most 19 significant digits and an exponent below 10^6). */
typedef struct number_decimal_s {
  int neg, exact;
  uint64_t mant;
  int64_t exp10;
} number_decimal_t;

/* 1 if s[0..n) is exactly a decimal number, scanned into d. csv's grammar
 * (json = 0): [+-]digits[.digits][(e|E)[+-]digits], digits on at least one
 * side of the point; JSON's (json = 1): -?(0|[1-9]digits)(.digits)?
 * ((e|E)[+-]?digits)?. */
int number_scan(const char *s, size_t n, int json, number_decimal_t *d);

/* Parses s[0..n) into *out: LS_REJECT_NONE; PARSE when it is not a number
 * of the grammar (or longer than NUMBER_TEXT_MAX); NONFINITE for
 * nan/inf/infinity (csv only, any case) and for a number beyond float's
 * range. Locale independent, thread-safe. */
ls_reject_t number_parse_float(const char *s, size_t n, int json, float *out);

/* A scanned number times 10^shift, rounded toward minus infinity, as an
 * int64 into *out: 0 when it does not fit (or is not exact). For epoch
 * times: ms from seconds is shift 3, from ns shift -6. */
int number_to_i64(const number_decimal_t *d, int shift, int64_t *out);

#endif /* LSTREAM_INGEST_NUMBER_H */
