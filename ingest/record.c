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
 *        no trailing comma, at most NUMBER_TEXT_MAX characters per number
 *        (ingest/number.c parses them).
 *        Parsing and printing use the "C" locale whatever the process set.
 *
 * Rejection precedence for csv: a field count other than F is SIZE, then the
 * first field that is not a number is PARSE, then NaN/Inf/overflow is
 * NONFINITE.
 */
#include "lstream/ingest.h"

#include "number.h"

#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  case LS_REJECT_FIELD: return "field";
  case LS_REJECT_TYPE: return "type";
  case LS_REJECT_TIME: return "time";
  case LS_REJECT_FUTURE: return "future";
  case LS_REJECT__COUNT: break;
  }
  return "unknown";
}

const char *const ls_format_names[LS_FORMAT__COUNT + 1] = {[LS_FORMAT_F32] = "f32",
                                                           [LS_FORMAT_CSV] = "csv",
                                                           [LS_FORMAT_JSON] = "json",
                                                           [LS_FORMAT_AVRO] = "avro",
                                                           [LS_FORMAT__COUNT] = NULL};

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
/* The "C" locale, for snprintf whatever setlocale() did.                   */

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
    ls_reject_t const r = number_parse_float(s + a, b - a, 0, &out[f]);
    if (r == LS_REJECT_PARSE) {
      worst = r;
      break;
    }
    if (r != LS_REJECT_NONE) worst = r;
    start = end + 1;
  }
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
  case LS_FORMAT_JSON:
  case LS_FORMAT_AVRO:
    return ls_error_set(LS_ERR_INVALID_ARG,
                        "ls_record_encode: %s records have named fields (see ls_decoder_new)",
                        ls_format2str(fmt));
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
  case LS_FORMAT_JSON: /* named fields: ls_decoder_decode */
  case LS_FORMAT_AVRO:
  case LS_FORMAT__COUNT: break;
  }
  return LS_REJECT_PARSE;
}
