/*
 * Decimal numbers as text (ingest/number.h): scanning by csv's or JSON's
 * grammar, the correctly rounded float, and exact integers for times.
 */
#define _GNU_SOURCE /* strtof_l */
#include "number.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Scans the digits at s[*i..n) into d (frac: they follow the point);
 * returns how many there were. */
static size_t scan_digits(const char *s, size_t n, size_t *i, number_decimal_t *d, int frac) {
  size_t const start = *i;
  for (; *i < n && is_digit(s[*i]); (*i)++) {
    if (d->mant < UINT64_C(1000000000000000000)) { /* 10^18: one more digit fits */
      d->mant = d->mant * 10 + (uint64_t)(s[*i] - '0');
      d->exp10 -= frac;
    } else {
      d->exact = 0; /* the 20th significant digit and beyond: strtof rounds */
      d->exp10 += !frac;
    }
  }
  return *i - start;
}

/* 1 if s[0..n) follows JSON's number grammar (RFC 8259, section 6). */
static int json_number_ok(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && s[i] == '-') i++;
  if (i < n && s[i] == '0') {
    i++;
  } else {
    if (i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i]))
      i++;
  }
  if (i < n && s[i] == '.') {
    if (++i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i]))
      i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i]))
      i++;
  }
  return i == n;
}

int number_scan(const char *s, size_t n, int json, number_decimal_t *d) {
  *d = (number_decimal_t){0, 1, 0, 0};
  if (json && !json_number_ok(s, n)) return 0;
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
static int fast_float(const number_decimal_t *d, float *out) {
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
static int is_nonfinite_word(const char *s, size_t n) {
  if (n > 0 && (s[0] == '+' || s[0] == '-')) {
    s++;
    n--;
  }
  return (n == 3 && (!strncasecmp(s, "nan", 3) || !strncasecmp(s, "inf", 3))) ||
         (n == 8 && !strncasecmp(s, "infinity", 8));
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void) {
  c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

ls_reject_t number_parse_float(const char *s, size_t n, int json, float *out) {
  if (!json && is_nonfinite_word(s, n)) return LS_REJECT_NONFINITE;
  number_decimal_t d;
  if (n > NUMBER_TEXT_MAX || !number_scan(s, n, json, &d)) return LS_REJECT_PARSE;
  if (fast_float(&d, out)) return isfinite(*out) ? LS_REJECT_NONE : LS_REJECT_NONFINITE;
  char text[NUMBER_TEXT_MAX + 1];
  memcpy(text, s, n);
  text[n] = '\0';
  pthread_once(&c_locale_once, c_locale_init);
  char *end = NULL;
  float const v = c_locale != (locale_t)0 ? strtof_l(text, &end, c_locale) : strtof(text, &end);
  if (end != text + n) return LS_REJECT_PARSE;
  /* Overflow gives an infinite result; underflow rounds to a subnormal or
   * zero, which is a finite value we keep. */
  if (!isfinite(v)) return LS_REJECT_NONFINITE;
  *out = v;
  return LS_REJECT_NONE;
}

int number_to_i64(const number_decimal_t *d, int shift, int64_t *out) {
  if (!d->exact) return 0;
  int64_t const e = d->exp10 + shift;
  uint64_t v = d->mant;
  int up = 0; /* a fraction dropped: floor moves a negative value down */
  if (e >= 0) {
    for (int64_t i = 0; i < e; i++) {
      if (v > UINT64_MAX / 10) return 0;
      v *= 10;
    }
  } else if (e < -19) {
    up = v != 0;
    v = 0;
  } else {
    uint64_t p = 1;
    for (int64_t i = 0; i < -e; i++)
      p *= 10;
    up = v % p != 0;
    v /= p;
  }
  if (v > (uint64_t)INT64_MAX) return 0;
  *out = d->neg ? -(int64_t)v - up : (int64_t)v;
  return 1;
}
