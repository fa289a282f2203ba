/*
 * libFuzzer target for the record decoders (ingest/record.c), after zstd's
 * round-trip fuzzers (tests/fuzz/simple_round_trip.c). The first input byte
 * picks the format and F; the rest is a record value. Checked on every input:
 *   - decode returns a known reason and never reads past the value (ASan);
 *   - an accepted record holds only finite values;
 *   - round trip: its values, encoded in either format, decode to the same
 *     bits (what csv encode promises: text that reads back exactly);
 *   - csv: a lone number made only of number characters decodes exactly as
 *     strtof reads it (the fast path against libc's correctly rounded one);
 *   - a wrong-size f32 value is SIZE, whatever its bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/ingest.h"

enum { F_MAX = 16 };

/* Stops the fuzzer with a message: a finding. */
static void finding(const char *what, ls_format_t fmt, int F) {
  fprintf(stderr, "fuzz_record_decode: %s (format %s, F=%d)\n", what, ls_format2str(fmt), F);
  abort();
}

static void round_trip(const float *values, int F) {
  for (int fmt = 0; fmt <= LS_FORMAT_CSV; fmt++) { /* the formats without named fields */
    char buf[F_MAX * LS_CSV_VALUE_MAX];
    size_t len = 0;
    if (ls_record_encode((ls_format_t)fmt, values, F, buf, sizeof buf, &len) != LS_OK)
      finding("encode failed on accepted values", (ls_format_t)fmt, F);
    float back[F_MAX];
    if (ls_record_decode((ls_format_t)fmt, buf, len, F, back) != LS_REJECT_NONE)
      finding("an encoded record was rejected", (ls_format_t)fmt, F);
    if (memcmp(back, values, (size_t)F * sizeof(float)) != 0)
      finding("round trip changed a value", (ls_format_t)fmt, F);
  }
}

/* csv, F = 1: a value of number characters only is one number for strtof. */
static void like_strtof(const uint8_t *value, size_t len, ls_reject_t r, float got) {
  if (len == 0 || len > 63) return;
  char text[64];
  memcpy(text, value, len);
  text[len] = '\0';
  if (strspn(text, "0123456789+-.eE") != len) return;
  char *end = NULL;
  float const want = strtof(text, &end);
  if (end != text + len) {
    if (r == LS_REJECT_NONE) finding("accepted what strtof does not read whole", LS_FORMAT_CSV, 1);
    return;
  }
  /* With these characters strtof's grammar is the decoder's. */
  if (r == LS_REJECT_PARSE) finding("rejected a number strtof reads whole", LS_FORMAT_CSV, 1);
  if (!isfinite(want) != (r == LS_REJECT_NONFINITE))
    finding("finite or not, unlike strtof", LS_FORMAT_CSV, 1);
  if (r == LS_REJECT_NONE && memcmp(&got, &want, sizeof got) != 0)
    finding("a value other than strtof's", LS_FORMAT_CSV, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  ls_format_t const fmt = data[0] & 1 ? LS_FORMAT_CSV : LS_FORMAT_F32;
  int const F = 1 + (data[0] >> 1) % F_MAX;
  /* A copy of exactly the value's size, so ASan sees any read past it. */
  size_t const len = size - 1;
  uint8_t *const value = malloc(len ? len : 1);
  memcpy(value, data + 1, len);
  float out[F_MAX];
  ls_reject_t const r = ls_record_decode(fmt, value, len, F, out);
  if (r != LS_REJECT_NONE && r != LS_REJECT_SIZE && r != LS_REJECT_PARSE &&
      r != LS_REJECT_NONFINITE)
    finding("decode returned a reason it never should", fmt, F);
  if (fmt == LS_FORMAT_F32 && (len != (size_t)F * 4) != (r == LS_REJECT_SIZE))
    finding("f32 size verdict does not match the length", fmt, F);
  if (r == LS_REJECT_NONE) {
    for (int f = 0; f < F; f++)
      if (!isfinite(out[f])) finding("accepted a non-finite value", fmt, F);
    round_trip(out, F);
  }
  if (fmt == LS_FORMAT_CSV && F == 1) like_strtof(value, len, r, out[0]);
  free(value);
  return 0;
}
