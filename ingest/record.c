/*
 * Record values: encoding and decoding of one Kafka message value into F
 * float features (include/lstream/ingest.h, "Records").
 *
 *   f32  F little-endian IEEE-754 float32, exactly 4F bytes. Read and written
 *        byte by byte through uint32_t (never a pointer cast over the buffer),
 *        so the code is correct on any host byte order and any alignment.
 *   csv  F decimal numbers separated by commas. Whitespace policy: ASCII
 *        spaces and tabs around a number are ignored, and so is one line
 *        ending ("\n" or "\r\n") after the last number; nothing else is. A
 *        number is [+-]digits[.digits][(e|E)[+-]digits] (digits on at least
 *        one side of the point), or nan/inf/infinity in any case (which decode
 *        and are then rejected as NONFINITE). No hexadecimal, no empty field,
 *        no trailing comma, at most LS_CSV_NUMBER_MAX characters per number.
 *        Parsing and printing use the "C" locale whatever the process set.
 *
 * Rejection precedence for csv: a field count other than F is SIZE, then the
 * first field that is not a number is PARSE, then NaN/Inf/overflow is
 * NONFINITE.
 */
#include "lstream/ingest.h"

#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The longest number text a csv field may hold (bytes, without spaces). */
#define LS_CSV_NUMBER_MAX 63

/* ------------------------------------------------------------------------ */
/* Names                                                                     */

const char *ls_reject2str(ls_reject_t reason) {
  switch (reason) {
  case LS_REJECT_NONE: return "none";
  case LS_REJECT_SIZE: return "size";
  case LS_REJECT_PARSE: return "parse";
  case LS_REJECT_NONFINITE: return "nonfinite";
  case LS_REJECT_BACKWARDS: return "backwards";
  case LS_REJECT_KEY: return "key";
  case LS_REJECT_PARTITION: return "partition";
  case LS_REJECT_RANGE: return "range";
  case LS_REJECT__COUNT: break;
  }
  return "unknown";
}

const char *const ls_format_names[LS_FORMAT__COUNT + 1] = {
    [LS_FORMAT_F32] = "f32", [LS_FORMAT_CSV] = "csv", [LS_FORMAT__COUNT] = NULL};

ls_err_t ls_format_parse(const char *name, ls_format_t *out) {
  LS_RETURN_IF(name == NULL || out == NULL, LS_ERR_INVALID_ARG,
               "ls_format_parse: name and out must not be NULL");
  char expected[64] = "";
  for (int f = 0; f < LS_FORMAT__COUNT; f++) {
    if (!strcmp(name, ls_format_names[f])) {
      *out = (ls_format_t)f;
      return LS_OK;
    }
    size_t const len = strlen(expected);
    snprintf(expected + len, sizeof expected - len, "%s%s", f ? " or " : "", ls_format_names[f]);
  }
  return ls_error_set(LS_ERR_INVALID_ARG, "unknown record format '%s' (expected %s)", name,
                      expected);
}

const char *ls_format2str(ls_format_t fmt) {
  return (unsigned)fmt < LS_FORMAT__COUNT ? ls_format_names[fmt] : "unknown";
}

/* ------------------------------------------------------------------------ */
/* The "C" locale, for strtof and snprintf whatever setlocale() did.        */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void) {
  c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* Switches the calling thread to the "C" numeric locale; returns the
 * previous one for restore_locale(). */
static locale_t use_c_locale(void) {
  pthread_once(&c_locale_once, c_locale_init);
  return c_locale != (locale_t)0 ? uselocale(c_locale) : (locale_t)0;
}

static void restore_locale(locale_t previous) {
  if (previous != (locale_t)0) uselocale(previous);
}

/* ------------------------------------------------------------------------ */
/* f32                                                                       */

static int f32_is_finite_bits(uint32_t bits) {
  return (bits & 0x7f800000u) != 0x7f800000u;
}

static ls_reject_t f32_decode(const unsigned char *p, size_t len, int F, float *out) {
  if (len != (size_t)F * 4) return LS_REJECT_SIZE;
  uint32_t nonfinite = 0;
  for (int f = 0; f < F; f++, p += 4) {
    uint32_t const bits =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    nonfinite |= !f32_is_finite_bits(bits);
    memcpy(&out[f], &bits, sizeof bits);
  }
  return nonfinite ? LS_REJECT_NONFINITE : LS_REJECT_NONE;
}

static void f32_encode(const float *values, int F, unsigned char *p) {
  for (int f = 0; f < F; f++, p += 4) {
    uint32_t bits;
    memcpy(&bits, &values[f], sizeof bits);
    p[0] = (unsigned char)bits;
    p[1] = (unsigned char)(bits >> 8);
    p[2] = (unsigned char)(bits >> 16);
    p[3] = (unsigned char)(bits >> 24);
  }
}

/* ------------------------------------------------------------------------ */
/* csv                                                                       */

static int is_blank(char c) {
  return c == ' ' || c == '\t';
}
static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* A decimal number as scanned: (-1)^neg * mant * 10^exp10, exactly when
 * exact (at most 19 significant digits and an exponent below 10^6). */
typedef struct decimal_s {
  int neg, exact;
  uint64_t mant;
  int64_t exp10;
} decimal_t;

/* Scans the digits at s[*i..n) into d (frac: they follow the point);
 * returns how many there were. */
static size_t scan_digits(const char *s, size_t n, size_t *i, decimal_t *d, int frac) {
  size_t const start = *i;
  for (; *i < n && is_digit(s[*i]); (*i)++) {
    if (d->mant < UINT64_C(1000000000000000000)) { /* 10^18: one more digit fits */
      d->mant = d->mant * 10 + (uint64_t)(s[*i] - '0');
      d->exp10 -= frac;
    } else {
      d->exact = 0; /* the 20th significant digit and beyond: strtof rounds */
    }
  }
  return *i - start;
}

/* 1 if s[0..n) is exactly a decimal number by the grammar above, scanned
 * into d. */
static int csv_scan_decimal(const char *s, size_t n, decimal_t *d) {
  *d = (decimal_t){0, 1, 0, 0};
  size_t i = 0;
  if (i < n && (s[i] == '+' || s[i] == '-')) d->neg = s[i++] == '-';
  size_t digits = scan_digits(s, n, &i, d, 0);
  if (i < n && s[i] == '.') {
    i++;
    digits += scan_digits(s, n, &i, d, 1);
  }
  if (digits == 0) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    int const neg = i < n && s[i] == '-';
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t const start = i;
    int64_t e = 0;
    for (; i < n && is_digit(s[i]); i++)
      if (e < 1000000) e = e * 10 + (s[i] - '0');
    if (i == start) return 0;
    if (e >= 1000000) d->exact = 0;
    d->exp10 += neg ? -e : e;
  }
  return i == n;
}

/* Clinger's fast path: when mant < 2^53 and |exp10| <= 22, mant and
 * 10^|exp10| are exact doubles, so one IEEE multiply or divide gives the
 * correctly rounded double. Rounding that to float is the correctly rounded
 * float unless the double sits exactly halfway between two floats (the
 * decimal may be just off that midpoint): then it returns 0 and strtof
 * decides. */
static int csv_fast_float(const decimal_t *d, float *out) {
  static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (!d->exact || d->mant > (UINT64_C(1) << 53) || d->exp10 < -22 || d->exp10 > 22) return 0;
  double v = (double)d->mant;
  v = d->exp10 < 0 ? v / pow10[-d->exp10] : v * pow10[d->exp10];
  float const f = (float)v;
  if ((double)f != v && isfinite(f)) {
    float const other = nextafterf(f, (double)f < v ? INFINITY : -INFINITY);
    if (isfinite(other) && ((double)f + (double)other) / 2 == v) return 0;
  }
  *out = d->neg ? -f : f;
  return 1;
}

/* 1 if s[0..n) is [+-]nan, [+-]inf or [+-]infinity, in any case. */
static int csv_is_nonfinite_word(const char *s, size_t n) {
  if (n > 0 && (s[0] == '+' || s[0] == '-')) {
    s++;
    n--;
  }
  return (n == 3 && (!strncasecmp(s, "nan", 3) || !strncasecmp(s, "inf", 3))) ||
         (n == 8 && !strncasecmp(s, "infinity", 8));
}

/* Parses one trimmed field s[0..n) into *out. */
static ls_reject_t csv_parse_number(const char *s, size_t n, float *out) {
  if (csv_is_nonfinite_word(s, n)) return LS_REJECT_NONFINITE;
  decimal_t d;
  if (n > LS_CSV_NUMBER_MAX || !csv_scan_decimal(s, n, &d)) return LS_REJECT_PARSE;
  if (csv_fast_float(&d, out)) return isfinite(*out) ? LS_REJECT_NONE : LS_REJECT_NONFINITE;
  char text[LS_CSV_NUMBER_MAX + 1];
  memcpy(text, s, n);
  text[n] = '\0';
  errno = 0;
  char *end = NULL;
  float const v = strtof(text, &end);
  if (end != text + n) return LS_REJECT_PARSE;
  /* ERANGE with an infinite result is overflow; underflow rounds to a
   * subnormal or zero, which is a finite value we keep. */
  if (!isfinite(v)) return LS_REJECT_NONFINITE;
  *out = v;
  return LS_REJECT_NONE;
}

static ls_reject_t csv_decode(const char *s, size_t len, int F, float *out) {
  /* One line ending ("\n" or "\r\n") after the last number is allowed. */
  if (len > 0 && s[len - 1] == '\n') {
    len--;
    if (len > 0 && s[len - 1] == '\r') len--;
  }
  size_t fields = 1;
  for (size_t i = 0; i < len; i++)
    fields += s[i] == ',';
  if (fields != (size_t)F) return LS_REJECT_SIZE;

  ls_reject_t worst = LS_REJECT_NONE;
  locale_t const previous = use_c_locale();
  size_t start = 0;
  for (int f = 0; f < F; f++) {
    size_t end = start;
    while (end < len && s[end] != ',')
      end++;
    size_t a = start, b = end;
    while (a < b && is_blank(s[a]))
      a++;
    while (b > a && is_blank(s[b - 1]))
      b--;
    ls_reject_t const r = csv_parse_number(s + a, b - a, &out[f]);
    if (r == LS_REJECT_PARSE) {
      worst = r;
      break;
    }
    if (r != LS_REJECT_NONE) worst = r;
    start = end + 1;
  }
  restore_locale(previous);
  return worst;
}

/* Writes the shortest "%.{p}g" text (p <= 9) of v that reads back to v.
 * A normal float whose shortest round-trip text has at most 6 significant
 * digits prints as that text with p = 6 (it lies within 2^-24 of it
 * relatively, far inside half a unit of the sixth digit, and %g drops
 * trailing zeros), so the search starts there; subnormals have less
 * relative precision and start at p = 1. Returns snprintf's length. */
static int csv_format_number(char *buf, size_t size, float v) {
  int n = 0;
  for (int p = fabsf(v) < FLT_MIN && v != 0 ? 1 : 6; p <= 9; p++) {
    n = snprintf(buf, size, "%.*g", p, (double)v);
    if (n < 0 || (size_t)n >= size || !isfinite(v) || strtof(buf, NULL) == v) break;
  }
  return n;
}

static ls_err_t csv_encode(const float *values, int F, char *buf, size_t size, size_t *len) {
  locale_t const previous = use_c_locale();
  size_t at = 0;
  ls_err_t err = LS_OK;
  for (int f = 0; f < F; f++) {
    if (f > 0) {
      if (at + 1 >= size) {
        err = LS_ERR_INVALID_ARG;
        break;
      }
      buf[at++] = ',';
    }
    int const n = csv_format_number(buf + at, size - at, values[f]);
    if (n < 0 || (size_t)n >= size - at) {
      err = LS_ERR_INVALID_ARG;
      break;
    }
    at += (size_t)n;
  }
  restore_locale(previous);
  LS_RETURN_IF(err != LS_OK, err,
               "ls_record_encode: %d csv values do not fit in a buffer of %zu bytes "
               "(allow LS_CSV_VALUE_MAX bytes per value)",
               F, size);
  *len = at;
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Public entry points                                                       */

ls_err_t ls_record_encode(ls_format_t fmt, const float *values, int F, char *buf, size_t size,
                          size_t *len) {
  LS_RETURN_IF(values == NULL || buf == NULL || len == NULL, LS_ERR_INVALID_ARG,
               "ls_record_encode: values, buf and len must not be NULL");
  LS_RETURN_IF(F < 1 || F > LS_FEATURES_MAX, LS_ERR_INVALID_ARG,
               "ls_record_encode: F=%d features is outside [1, %d]", F, LS_FEATURES_MAX);
  switch (fmt) {
  case LS_FORMAT_F32:
    LS_RETURN_IF(size < (size_t)F * 4, LS_ERR_INVALID_ARG,
                 "ls_record_encode: %d f32 values need %zu bytes, the buffer holds %zu", F,
                 (size_t)F * 4, size);
    f32_encode(values, F, (unsigned char *)buf);
    *len = (size_t)F * 4;
    return LS_OK;
  case LS_FORMAT_CSV: return csv_encode(values, F, buf, size, len);
  case LS_FORMAT__COUNT: break;
  }
  return ls_error_set(LS_ERR_INVALID_ARG, "ls_record_encode: unknown format %d", (int)fmt);
}

ls_reject_t ls_record_decode(ls_format_t fmt, const void *value, size_t len, int F, float *out) {
  if (out == NULL || F < 1 || F > LS_FEATURES_MAX || (value == NULL && len > 0))
    return LS_REJECT_SIZE;
  switch (fmt) {
  case LS_FORMAT_F32: return f32_decode(value, len, F, out);
  case LS_FORMAT_CSV: return csv_decode(value, len, F, out);
  case LS_FORMAT__COUNT: break;
  }
  return LS_REJECT_PARSE;
}
