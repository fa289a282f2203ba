/*
 * What a record value looks like (include/lstream/ingest.h,
 * ls_value_describe): for the message of a run whose records are not of
 * the format it declared, so that the message names the format they are
 * in, with the options that would read them.
 */
#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lstream/ingest.h"

/* A short quote of value [len] for messages: printable bytes, others '?'. */
static void quote(const unsigned char *v, size_t len, char *buf, size_t size) {
  size_t n = len < 40 ? len : 40;
  if (n >= size) n = size - 1;
  for (size_t i = 0; i < n; i++)
    buf[i] = v[i] >= 32 && v[i] < 127 ? (char)v[i] : '?';
  buf[n] = '\0';
}

/* JSON objects: their top-level fields and types, and the options. */
static int describe_json(const char *v, size_t len, char *buf, size_t size) {
  jsmntok_t tok[128];
  jsmn_parser p;
  jsmn_init(&p);
  int const n = jsmn_parse(&p, v, len, tok, 128);
  if (n < 1 || tok[0].type != JSMN_OBJECT) return 0;
  char fields[512] = "", numbers[256] = "", strings[256] = "";
  size_t at = 0, an = 0, as = 0;
  int i = 1;
  for (int m = 0; m < tok[0].size && i + 1 < n; m++) {
    const jsmntok_t *const k = &tok[i], *const val = &tok[i + 1];
    int const kl = k->end - k->start;
    const char *const type = val->type == JSMN_OBJECT                       ? "object"
                             : val->type == JSMN_ARRAY                      ? "array"
                             : val->type == JSMN_STRING                     ? "string"
                             : v[val->start] == 't' || v[val->start] == 'f' ? "boolean"
                             : v[val->start] == 'n'                         ? "null"
                                                                            : "number";
    if (at < sizeof fields)
      at += (size_t)snprintf(fields + at, sizeof fields - at, "%s%.*s (%s)", m ? ", " : "", kl,
                             v + k->start, type);
    if (!strcmp(type, "number") && an < sizeof numbers)
      an += (size_t)snprintf(numbers + an, sizeof numbers - an, "%s%.*s", an ? "," : "", kl,
                             v + k->start);
    if (!strcmp(type, "string") && as < sizeof strings)
      as += (size_t)snprintf(strings + as, sizeof strings - as, "%s%.*s", as ? " or " : "", kl,
                             v + k->start);
    int j = i + 2; /* past the value's subtree */
    while (j < n && tok[j].start < val->end)
      j++;
    i = j;
  }
  snprintf(buf, size, "JSON objects with fields %s: read them with --format json --fields %s%s%s%s",
           fields, an ? numbers : "PATH,...", as ? " (and --key-field, --time-field: " : "",
           as ? strings : "", as ? ")" : "");
  return 1;
}

/* CSV text: numbers separated by commas. */
static int describe_csv(const unsigned char *v, size_t len, char *buf, size_t size) {
  int digits = 0, fields = 1;
  for (size_t i = 0; i < len; i++) {
    unsigned char const c = v[i];
    if (c >= '0' && c <= '9')
      digits++;
    else if (c == ',')
      fields++;
    else if (!strchr("+-.eE \t\r\n", c))
      return 0;
  }
  if (digits == 0) return 0;
  char q[48];
  quote(v, len, q, sizeof q);
  snprintf(buf, size, "CSV text of %d number%s ('%s'): read it with --format csv --features %d",
           fields, fields > 1 ? "s" : "", q, fields);
  return 1;
}

/* Float32 values: how many of plausible size (0, or 1e-6 .. 1e9 in magnitude). */
static int plausible_floats(const unsigned char *v, size_t len) {
  int k = 0;
  for (size_t i = 0; i + 4 <= len; i += 4) {
    uint32_t const bits = (uint32_t)v[i] | (uint32_t)v[i + 1] << 8 | (uint32_t)v[i + 2] << 16 |
                          (uint32_t)v[i + 3] << 24;
    float x;
    memcpy(&x, &bits, sizeof x);
    k += x == 0 || (isfinite(x) && fabsf(x) >= 1e-6f && fabsf(x) <= 1e9f);
  }
  return k;
}

void ls_value_describe(const void *value, size_t len, char *buf, size_t size) {
  if (buf == NULL || size == 0) return;
  const unsigned char *const v = value;
  if (v == NULL || len == 0) {
    snprintf(buf, size, "empty values");
    return;
  }
  size_t a = 0;
  while (a < len && (v[a] == ' ' || v[a] == '\t' || v[a] == '\n' || v[a] == '\r'))
    a++;
  if (a < len && v[a] == '{' && describe_json((const char *)v + a, len - a, buf, size)) return;
  if (describe_csv(v, len, buf, size)) return;
  int text = 1;
  for (size_t i = 0; i < len && text; i++)
    text = v[i] >= 32 || v[i] == '\t' || v[i] == '\n' || v[i] == '\r';
  char q[48];
  quote(v, len, q, sizeof q);
  if (text) {
    snprintf(buf, size, "text of %zu bytes ('%s'), neither numbers nor a JSON object", len, q);
    return;
  }
  if (len >= 5 && v[0] == 0) {
    uint32_t const id = (uint32_t)v[1] << 24 | (uint32_t)v[2] << 16 | (uint32_t)v[3] << 8 | v[4];
    if (id < 1000000) {
      snprintf(buf, size,
               "binary starting with a 0 byte and id %u, as Confluent's framing of Avro: read "
               "it with --format avro --avro-schema FILE --avro-schema-id %u",
               id, id);
      return;
    }
  }
  if (len % 4 == 0 && plausible_floats(v, len) == (int)(len / 4)) {
    snprintf(buf, size,
             "binary of %zu bytes, %zu float32 values of plausible size: read it with --format "
             "f32 --features %zu",
             len, len / 4, len / 4);
    return;
  }
  char hex[40] = "";
  for (size_t i = 0, at = 0; i < len && i < 12; i++)
    at += (size_t)snprintf(hex + at, sizeof hex - at, "%s%02x", i ? " " : "", v[i]);
  snprintf(buf, size, "binary of %zu bytes (%s%s), no float32 values of plausible size", len, hex,
           len > 12 ? " ..." : "");
}
