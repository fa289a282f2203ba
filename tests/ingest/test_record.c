/*
 * Record decoders and encoders (ingest/record.c): f32 byte layout and
 * widths, the csv grammar and whitespace policy, every rejection reason and
 * its precedence, and the encode -> decode round trip bit for bit.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/ingest.h"

static ls_reject_t csv(const char *text, int F, float *out) {
  return ls_record_decode(LS_FORMAT_CSV, text, strlen(text), F, out);
}

static uint32_t bits_of(float v) {
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return b;
}

static float float_of(uint32_t b) {
  float v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* A deterministic stream of 32-bit patterns (xorshift32). */
static uint32_t next_bits(uint32_t *state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

Test(record, names) {
  const char *const expected[] = {"none",      "size", "parse",     "nonfinite",
                                  "backwards", "key",  "partition", "range",
                                  "field",     "type", "time",      "future"};
  for (int r = 0; r < LS_REJECT__COUNT; r++)
    cr_expect_str_eq(ls_reject2str((ls_reject_t)r), expected[r]);
  cr_expect_str_eq(ls_reject2str(LS_REJECT__COUNT), "unknown");
  ls_format_t f;
  cr_expect_eq(ls_format_parse("f32", &f), LS_OK);
  cr_expect_eq(f, LS_FORMAT_F32);
  cr_expect_eq(ls_format_parse("csv", &f), LS_OK);
  cr_expect_eq(f, LS_FORMAT_CSV);
  cr_expect_eq(ls_format_parse("CSV", &f), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "'CSV'") != NULL, "%s", ls_last_error());
  cr_expect(strstr(ls_last_error(), "expected f32 or csv") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_format_parse(NULL, &f), LS_ERR_INVALID_ARG);
  cr_expect_str_eq(ls_format2str(LS_FORMAT_CSV), "csv");
  /* The one table: every name parses to its index and prints back; it ends
   * at the count with NULL; past the count is no format. */
  for (int i = 0; i < LS_FORMAT__COUNT; i++) {
    cr_assert_not_null(ls_format_names[i]);
    cr_expect_eq(ls_format_parse(ls_format_names[i], &f), LS_OK);
    cr_expect_eq((int)f, i);
    cr_expect_str_eq(ls_format2str(f), ls_format_names[i]);
  }
  cr_expect_null(ls_format_names[LS_FORMAT__COUNT]);
  cr_expect_str_eq(ls_format2str(LS_FORMAT__COUNT), "unknown");
  cr_expect_str_eq(ls_format2str((ls_format_t)-1), "unknown");
  char buf[8];
  size_t len = 0;
  float v = 1.0f;
  cr_expect_eq(ls_record_encode(LS_FORMAT__COUNT, &v, 1, buf, sizeof buf, &len),
               LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_record_decode(LS_FORMAT__COUNT, "1", 1, 1, &v), LS_REJECT_PARSE);
  ls_windower_t *w = NULL;
  cr_expect_eq(ls_windower_new(&w, LS_FORMAT__COUNT, 1, 4), LS_ERR_INVALID_ARG);
  cr_expect_null(w);
}

Test(record, f32_little_endian_layout) {
  /* 1.0f = 0x3f800000, -2.5f = 0xc0200000, stored low byte first. */
  unsigned char const bytes[] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0};
  float out[2];
  cr_assert_eq(ls_record_decode(LS_FORMAT_F32, bytes, 8, 2, out), LS_REJECT_NONE);
  cr_expect_eq(out[0], 1.0f);
  cr_expect_eq(out[1], -2.5f);
  char enc[8];
  size_t len = 0;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, out, 2, enc, sizeof enc, &len), LS_OK);
  cr_expect_eq(len, 8);
  cr_expect_arr_eq(enc, bytes, 8);
}

Test(record, f32_unaligned_and_special_finite_values) {
  float const v[4] = {-0.0f, float_of(1) /* smallest subnormal */, 3.4028235e38f, -1e-30f};
  char buf[1 + 16];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, v, 4, buf + 1, 16, &len), LS_OK);
  float out[4];
  cr_assert_eq(ls_record_decode(LS_FORMAT_F32, buf + 1, len, 4, out), LS_REJECT_NONE);
  for (int i = 0; i < 4; i++)
    cr_expect_eq(bits_of(out[i]), bits_of(v[i]), "value %d", i);
}

Test(record, f32_rejections) {
  float const good[3] = {1, 2, 3};
  char buf[16];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_F32, good, 3, buf, sizeof buf, &len), LS_OK);
  float out[3];
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, buf, 11, 3, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, buf, 13, 3, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, buf, 0, 3, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, buf, 12, 2, out), LS_REJECT_SIZE);
  uint32_t const specials[] = {0x7fc00000u /* NaN */, 0xffc00001u /* -NaN, payload */,
                               0x7f800000u /* +Inf */, 0xff800000u /* -Inf */,
                               0x7f800001u /* signalling NaN */};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
    float bad[3] = {1, 2, 3};
    bad[i % 3] = float_of(specials[i]);
    cr_assert_eq(ls_record_encode(LS_FORMAT_F32, bad, 3, buf, sizeof buf, &len), LS_OK);
    cr_expect_eq(ls_record_decode(LS_FORMAT_F32, buf, len, 3, out), LS_REJECT_NONFINITE,
                 "pattern %08x", specials[i]);
  }
}

Test(record, csv_accepted_forms) {
  float out[4];
  cr_assert_eq(csv("1,-2.5,3e2,+0.125", 4, out), LS_REJECT_NONE);
  cr_expect_eq(out[0], 1.0f);
  cr_expect_eq(out[1], -2.5f);
  cr_expect_eq(out[2], 300.0f);
  cr_expect_eq(out[3], 0.125f);
  cr_assert_eq(csv(" 1 ,\t2,3\t , 4\r\n", 4, out), LS_REJECT_NONE);
  cr_expect_eq(out[3], 4.0f);
  cr_assert_eq(csv("1.,.5,-3E-2,4e+1\n", 4, out), LS_REJECT_NONE);
  cr_expect_eq(out[0], 1.0f);
  cr_expect_eq(out[1], 0.5f);
  cr_expect_eq(out[2], -0.03f);
  cr_expect_eq(out[3], 40.0f);
  cr_assert_eq(csv("7", 1, out), LS_REJECT_NONE);
  cr_expect_eq(out[0], 7.0f);
  /* Underflow rounds to a subnormal or zero: finite, kept. */
  cr_assert_eq(csv("1e-40,1e-50", 2, out), LS_REJECT_NONE);
  cr_expect(out[0] > 0 && out[0] < 1.2e-38f);
  cr_expect_eq(out[1], 0.0f);
  /* Correct rounding: the nearest float to 0.1. */
  cr_assert_eq(csv("0.1", 1, out), LS_REJECT_NONE);
  cr_expect_eq(out[0], 0.1f);
}

Test(record, csv_size) {
  float out[4];
  const char *const cases[] = {"1,2,3", "1,2,3,4,5", "1,2,3,4,", ",1,2,3,4", "", "1\n2,3,4"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(csv(cases[i], 4, out), LS_REJECT_SIZE, "'%s'", cases[i]);
}

Test(record, csv_parse) {
  float out[2];
  const char *const cases[] = {
      "1,x",   "1,",     "1, ",     "1,1e",    "1,e5",  "1,.",       "1,+",    "1,0x10", "1,1 2",
      "1,--1", "1,1..2", "1,1e+",   "1,1,5",   "1;2,3", "1,\"2\"",   "1,1f",   "1,nana", "1,in",
      "1,\v2", "1,2\r",  "1,2\n\r", "1,1_000", "1,٣",   "1,infinit", "1,2\n\n"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ls_reject_t const r = csv(cases[i], 2, out);
    /* "1,1,5" has three fields: that is a size error, checked first. */
    ls_reject_t const want = !strcmp(cases[i], "1,1,5") ? LS_REJECT_SIZE : LS_REJECT_PARSE;
    cr_expect_eq(r, want, "'%s' gave %s", cases[i], ls_reject2str(r));
  }
  /* An embedded NUL is not part of a number. */
  char const nul[] = {'1', ',', '2', '\0', '3'};
  cr_expect_eq(ls_record_decode(LS_FORMAT_CSV, nul, sizeof nul, 2, out), LS_REJECT_PARSE);
  /* 63 characters are allowed, 64 are not (LS_CSV_NUMBER_MAX). */
  char longest[80] = "1,";
  memset(longest + 2, '0', 62);
  longest[64] = '1';
  longest[65] = '\0';
  cr_expect_eq(csv(longest, 2, out), LS_REJECT_NONE);
  cr_expect_eq(out[1], 1.0f);
  memmove(longest + 3, longest + 2, 64);
  longest[2] = '0';
  cr_expect_eq(csv(longest, 2, out), LS_REJECT_PARSE);
}

Test(record, csv_nonfinite) {
  float out[2];
  const char *const cases[] = {"1,nan",       "1,NaN",  "1,-nan",    "1,inf",     "1,-Inf",
                               "1,+INFINITY", "1,1e39", "1,-3.5e38", "1,1e999999"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_expect_eq(csv(cases[i], 2, out), LS_REJECT_NONFINITE, "'%s'", cases[i]);
  /* The largest float is finite. */
  cr_expect_eq(csv("1,3.4028235e38", 2, out), LS_REJECT_NONE);
}

Test(record, csv_precedence) {
  float out[3];
  cr_expect_eq(csv("nan,x,1", 3, out), LS_REJECT_PARSE); /* parse beats nonfinite */
  cr_expect_eq(csv("x,nan,1", 3, out), LS_REJECT_PARSE);
  cr_expect_eq(csv("nan,x", 3, out), LS_REJECT_SIZE); /* size beats both */
  cr_expect_eq(csv("inf,1,2", 3, out), LS_REJECT_NONFINITE);
}

Test(record, decode_bad_arguments) {
  float out[2];
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, "abcdefgh", 8, 2, NULL), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, "abcdefgh", 8, 0, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, NULL, 8, 2, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_CSV, NULL, 0, 1, out), LS_REJECT_PARSE);
  cr_expect_eq(ls_record_decode(LS_FORMAT_F32, "x", 1, LS_FEATURES_MAX + 1, out), LS_REJECT_SIZE);
  cr_expect_eq(ls_record_decode((ls_format_t)7, "1", 1, 1, out), LS_REJECT_PARSE);
}

Test(record, encode_bad_arguments) {
  float const v[2] = {1, 2};
  char buf[64];
  size_t len;
  cr_expect_eq(ls_record_encode(LS_FORMAT_F32, NULL, 2, buf, sizeof buf, &len), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_record_encode(LS_FORMAT_F32, v, 0, buf, sizeof buf, &len), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_record_encode(LS_FORMAT_F32, v, 2, buf, 7, &len), LS_ERR_INVALID_ARG);
  cr_expect(strstr(ls_last_error(), "8 bytes") != NULL, "%s", ls_last_error());
  cr_expect_eq(ls_record_encode(LS_FORMAT_CSV, v, 2, buf, 3, &len), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_record_encode(LS_FORMAT_CSV, v, 2, buf, 3, NULL), LS_ERR_INVALID_ARG);
  cr_expect_eq(ls_record_encode((ls_format_t)9, v, 2, buf, sizeof buf, &len), LS_ERR_INVALID_ARG);
}

Test(record, csv_shortest_text) {
  struct {
    float v;
    const char *text;
  } const cases[] = {{0.1f, "0.1"},
                     {1.0f / 3, "0.33333334"},
                     {16777216.0f, "16777216"},
                     {-0.0f, "-0"},
                     {1e-45f, "1e-45"},
                     {0.3f, "0.3"},
                     {3.4028235e38f, "3.4028235e+38"},
                     {100.0f, "100"},
                     {1.1754944e-38f, "1.1754944e-38"},
                     {3e-40f, "3e-40"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[LS_CSV_VALUE_MAX];
    size_t len = 0;
    cr_assert_eq(ls_record_encode(LS_FORMAT_CSV, &cases[i].v, 1, buf, sizeof buf, &len), LS_OK);
    cr_expect_eq(len, strlen(cases[i].text));
    cr_expect_eq(memcmp(buf, cases[i].text, len), 0, "%.9g -> '%.*s', want '%s'",
                 (double)cases[i].v, (int)len, buf, cases[i].text);
  }
}

Test(record, nonfinite_values_encode_and_are_rejected) {
  float const v[2] = {NAN, -INFINITY};
  char buf[2 * LS_CSV_VALUE_MAX];
  size_t len;
  cr_assert_eq(ls_record_encode(LS_FORMAT_CSV, v, 2, buf, sizeof buf, &len), LS_OK);
  float out[2];
  cr_expect_eq(ls_record_decode(LS_FORMAT_CSV, buf, len, 2, out), LS_REJECT_NONFINITE);
}

/* Every finite float survives encode -> decode bit for bit, in both
 * formats; 200000 patterns from all exponents (plus the extremes), in
 * buffers of exactly F * LS_CSV_VALUE_MAX bytes. */
Test(record, round_trip_bit_exact) {
  enum { F = 5, N = 40000 };
  uint32_t state = 0x12345678u;
  for (int n = 0; n < N; n++) {
    float v[F];
    for (int f = 0; f < F; f++) {
      uint32_t b = next_bits(&state);
      if ((b & 0x7f800000u) == 0x7f800000u) b &= 0xbfffffffu; /* make it finite */
      v[f] = float_of(b);
    }
    if (n == 0) v[0] = float_of(0x7f7fffffu), v[1] = float_of(0x80000001u);
    for (int fmt = 0; fmt <= LS_FORMAT_CSV; fmt++) { /* json, avro: tests/ingest/test_decode.c */
      char buf[F * LS_CSV_VALUE_MAX];
      size_t len = 0;
      cr_assert_eq(ls_record_encode((ls_format_t)fmt, v, F, buf, sizeof buf, &len), LS_OK);
      float out[F];
      cr_assert_eq(ls_record_decode((ls_format_t)fmt, buf, len, F, out), LS_REJECT_NONE,
                   "%s '%.*s'", ls_format2str((ls_format_t)fmt), (int)len, buf);
      for (int f = 0; f < F; f++)
        cr_assert_eq(bits_of(out[f]), bits_of(v[f]), "%s: %a became %a",
                     ls_format2str((ls_format_t)fmt), (double)v[f], (double)out[f]);
    }
  }
}

/* The csv decoder's fast path (an exact double product, then float) gives
 * strtof's correctly rounded float, also next to float midpoints where
 * double rounding would go wrong (those fall back to strtof). */
static void expect_like_strtof(const char *text) {
  float got = 0;
  ls_reject_t const r = csv(text, 1, &got);
  float const want = strtof(text, NULL);
  if (!isfinite(want)) {
    cr_expect_eq(r, LS_REJECT_NONFINITE, "'%s'", text);
    return;
  }
  cr_assert_eq(r, LS_REJECT_NONE, "'%s'", text);
  cr_assert_eq(bits_of(got), bits_of(want), "'%s': %a, strtof %a", text, (double)got, (double)want);
}

Test(record, csv_matches_strtof) {
  /* 2^24 + 1 is the midpoint of 2^24 and 2^24 + 2 (ties to even: down).
   * 1.012272298336029 and the next three are 16-digit decimals next to a
   * float midpoint whose nearest double IS that midpoint: rounding the double
   * to float would go the wrong way. */
  const char *const cases[] = {"16777217",
                               "1.012272298336029",
                               "1.015104353427887e+00",
                               "1.033040702342987",
                               "-1.035872757434845",
                               "16777217.0000000001",
                               "16777216.9999999999",
                               "16777219",
                               "-16777217.00000000001",
                               "33554435",
                               "0.1",
                               "1e22",
                               "9007199254740993",
                               "123456789012345678901",
                               "0.000000000000000000000001",
                               "3.4028235e38",
                               "3.4028236e38",
                               "1.17549435e-38",
                               "1e-45",
                               "7e-46",
                               "-0",
                               "0e99999"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_like_strtof(cases[i]);
  uint32_t state = 0xdeadbeefu;
  for (int n = 0; n < 200000; n++) {
    char text[64];
    int at = 0;
    if (next_bits(&state) & 1) text[at++] = '-';
    int const digits = 1 + (int)(next_bits(&state) % 20);
    int const point = (int)(next_bits(&state) % (unsigned)(digits + 1));
    for (int d = 0; d < digits; d++) {
      if (d == point && d > 0) text[at++] = '.';
      text[at++] = (char)('0' + next_bits(&state) % 10);
    }
    if (next_bits(&state) & 1)
      at +=
          snprintf(text + at, sizeof text - (size_t)at, "e%d", (int)(next_bits(&state) % 81) - 40);
    text[at] = '\0';
    expect_like_strtof(text);
  }
}
