/*
 * JSON records (ingest/decode.h): jsmn (Debian's libjsmn-dev, a tokenizer
 * in one header, strict mode) splits a value into tokens, and each path of
 * the spec is found among them. Measured against jansson, cJSON, json-c
 * and yajl on ~120-byte ticks (tests/bench/json_libs.sh; README,
 * Benchmarks), jsmn was the fastest by 1.8x and the only one above 1M
 * records/s on one core: it allocates nothing and leaves numbers as text,
 * which lstream's own number parser (number.c, csv's) turns into the
 * correctly rounded float, so that a value gives the same float as JSON
 * and as csv. jsmn checks the structure (brackets, strings and their
 * escapes, a key before each value); the values read are checked here
 * (a number by JSON's grammar, true, false, null); values not read are
 * checked for structure only.
 */
#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* The most tokens a record may have (a value of 64k tokens is ~200 KB). */
#define JSON_TOKENS_MAX 65536

typedef struct record_json_s {
  jsmntok_t *tok; /* [cap] */
  int *next;      /* [cap]: the token after token i's subtree */
  int cap;
} record_json_t;

ls_err_t record_json_new(ls_decoder_t *d) {
  record_json_t *const j = calloc(1, sizeof *j);
  LS_RETURN_IF(j == NULL, LS_ERR_NOMEM, "no memory for a JSON decoder");
  d->json = j;
  j->cap = 128;
  j->tok = malloc((size_t)j->cap * sizeof *j->tok);
  j->next = malloc((size_t)j->cap * sizeof *j->next);
  LS_RETURN_IF(j->tok == NULL || j->next == NULL, LS_ERR_NOMEM, "no memory for a JSON decoder");
  return LS_OK;
}

void record_json_free(ls_decoder_t *d) {
  if (d->json == NULL) return;
  free(d->json->tok);
  free(d->json->next);
  free(d->json);
  d->json = NULL;
}

/* Tokenizes s [n] into j, growing the arrays as needed: the count, or a
 * jsmn error (< 0). */
static int tokenize(record_json_t *j, const char *s, size_t n) {
  for (;;) {
    jsmn_parser p;
    jsmn_init(&p);
    int const count = jsmn_parse(&p, s, n, j->tok, (unsigned)j->cap);
    if (count != JSMN_ERROR_NOMEM || j->cap >= JSON_TOKENS_MAX) return count;
    int const cap = j->cap * 4;
    jsmntok_t *const tok = realloc(j->tok, (size_t)cap * sizeof *tok);
    if (tok != NULL) j->tok = tok;
    int *const next = realloc(j->next, (size_t)cap * sizeof *next);
    if (next != NULL) j->next = next;
    if (tok == NULL || next == NULL) return JSMN_ERROR_NOMEM;
    j->cap = cap;
  }
}

/* next[i] for every token: tokens come in document order, so a subtree
 * ends at the first token that starts past its end. */
static void link_subtrees(record_json_t *j, int count) {
  int stack[64], top = 0;
  for (int i = 0; i < count; i++) {
    while (top > 0 && j->tok[i].start >= j->tok[stack[top - 1]].end)
      j->next[stack[--top]] = i;
    if (top < 64) {
      stack[top++] = i;
    } else { /* deeper than 64: find its end by scanning (rare) */
      int k = i + 1;
      while (k < count && j->tok[k].start < j->tok[i].end)
        k++;
      j->next[i] = k;
    }
  }
  while (top > 0)
    j->next[stack[--top]] = count;
}

/* What token t is, as a field. */
static void field_of(const char *s, const jsmntok_t *t, field_t *f) {
  *f = (field_t){FIELD_OTHER, s + t->start, (size_t)(t->end - t->start), 0, 0, 0, NULL};
  switch (t->type) {
  case JSMN_OBJECT: f->type = "an object"; return;
  case JSMN_ARRAY: f->type = "an array"; return;
  case JSMN_STRING:
    f->kind = FIELD_STRING;
    f->escaped = memchr(f->s, '\\', f->n) != NULL;
    return;
  default:
    if (f->s[0] == 't' || f->s[0] == 'f')
      f->type = "a boolean";
    else if (f->n == 4 && !memcmp(f->s, "null", 4))
      f->kind = FIELD_NULL;
    else
      f->kind = FIELD_NUMBER_TEXT; /* checked by JSON's grammar when read */
  }
}

/* Finds path p from the root token into f. */
static void find(const record_json_t *j, const char *s, const path_t *p, field_t *f) {
  int cur = 0;
  for (int k = 0; k < p->n; k++) {
    const jsmntok_t *const c = &j->tok[cur];
    const path_step_t *const st = &p->steps[k];
    jsmntype_t const want = st->index < 0 ? JSMN_OBJECT : JSMN_ARRAY;
    if (c->type != want) {
      field_of(s, c, f);
      if (f->kind != FIELD_NULL) f->kind = FIELD_OTHER;
      if (f->type == NULL) f->type = c->type == JSMN_STRING ? "a string" : "a number";
      return;
    }
    int found = -1, i = cur + 1;
    for (int m = 0; m < c->size && found < 0; m++) {
      if (st->index < 0) {
        const jsmntok_t *const key = &j->tok[i];
        if ((size_t)(key->end - key->start) == st->len &&
            !memcmp(s + key->start, st->name, st->len))
          found = i + 1;
        i = j->next[i + 1];
      } else {
        if (m == st->index) found = i;
        i = j->next[i];
      }
    }
    if (found < 0) {
      *f = (field_t){FIELD_MISSING, NULL, 0, 0, 0, 0, NULL};
      return;
    }
    cur = found;
  }
  field_of(s, &j->tok[cur], f);
}

/* 1 when every member of every object is a string key with one value. */
static int pairs_ok(const record_json_t *j, int count) {
  for (int i = 0; i < count; i++) {
    if (j->tok[i].type != JSMN_OBJECT) continue;
    int k = i + 1;
    for (int m = 0; m < j->tok[i].size; m++) {
      if (k >= count || j->tok[k].type != JSMN_STRING || j->tok[k].size != 1) return 0;
      k = j->next[k + 1 < count ? k + 1 : k];
    }
  }
  return 1;
}

ls_reject_t record_json_fields(ls_decoder_t *d, const char *value, size_t len) {
  record_json_t *const j = d->json;
  size_t a = 0, b = len;
  while (a < b && (value[a] == ' ' || value[a] == '\t' || value[a] == '\n' || value[a] == '\r'))
    a++;
  while (b > a && (value[b - 1] == ' ' || value[b - 1] == '\t' || value[b - 1] == '\n' ||
                   value[b - 1] == '\r'))
    b--;
  if (a == b || value[a] != '{')
    return decode_why(d, LS_REJECT_PARSE, "the value is not one JSON object ('%.*s')",
                      (int)(len < 32 ? len : 32), value);
  int const count = tokenize(j, value + a, b - a);
  if (count == JSMN_ERROR_PART)
    return decode_why(d, LS_REJECT_PARSE, "the JSON value (%zu bytes) is truncated", len);
  if (count == JSMN_ERROR_NOMEM)
    return decode_why(d, LS_REJECT_PARSE, "the JSON value has more than %d tokens",
                      JSON_TOKENS_MAX);
  if (count < 1)
    return decode_why(d, LS_REJECT_PARSE, "the value (%zu bytes, '%.*s') is not JSON", len,
                      (int)(len < 32 ? len : 32), value);
  if (j->tok[0].type != JSMN_OBJECT || (size_t)j->tok[0].end != b - a)
    return decode_why(d, LS_REJECT_PARSE, "the value is not one JSON object ('%.*s')",
                      (int)(len < 32 ? len : 32), value);
  link_subtrees(j, count);
  if (!pairs_ok(j, count))
    return decode_why(d, LS_REJECT_PARSE, "the JSON object is not of \"name\": value pairs");
  for (int f = 0; f < d->F + 2; f++)
    if (d->paths[f].n > 0) find(j, value + a, &d->paths[f], &d->fields[f]);
  return LS_REJECT_NONE;
}

/* Appends code point c to out [size] at *at as UTF-8. */
static int put_utf8(unsigned long c, char *out, size_t size, size_t *at) {
  unsigned char b[4];
  int n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
  if (*at + (size_t)n > size) return 0;
  if (n == 1) b[0] = (unsigned char)c;
  if (n == 2) b[0] = (unsigned char)(0xc0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 0x3f));
  if (n == 3)
    b[0] = (unsigned char)(0xe0 | c >> 12), b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f)),
    b[2] = (unsigned char)(0x80 | (c & 0x3f));
  if (n == 4)
    b[0] = (unsigned char)(0xf0 | c >> 18), b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f)),
    b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f)), b[3] = (unsigned char)(0x80 | (c & 0x3f));
  memcpy(out + *at, b, (size_t)n);
  *at += (size_t)n;
  return 1;
}

/* Four hex digits at s. */
static long hex4(const char *s, size_t left) {
  if (left < 4) return -1;
  char text[5] = {s[0], s[1], s[2], s[3], 0};
  char *end = NULL;
  long const v = strtol(text, &end, 16);
  return end == text + 4 ? v : -1;
}

long record_json_unescape(const char *s, size_t n, char *out, size_t size) {
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\') {
      if (at >= size) return -1;
      out[at++] = s[i];
      continue;
    }
    if (++i >= n) return -1;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *const e = strchr(from, s[i]);
    unsigned long c;
    if (e != NULL && s[i] != '\0') {
      c = (unsigned char)to[e - from];
    } else if (s[i] == 'u') {
      long const hi = hex4(s + i + 1, n - i - 1);
      if (hi < 0) return -1;
      i += 4;
      c = (unsigned long)hi;
      if (hi >= 0xd800 && hi < 0xdc00) { /* a surrogate pair */
        long const lo =
            i + 2 < n && s[i + 1] == '\\' && s[i + 2] == 'u' ? hex4(s + i + 3, n - i - 3) : -1;
        if (lo < 0xdc00 || lo >= 0xe000) return -1;
        c = 0x10000 + (((unsigned long)hi - 0xd800) << 10) + ((unsigned long)lo - 0xdc00);
        i += 6;
      } else if (hi >= 0xdc00 && hi < 0xe000) {
        return -1;
      }
    } else {
      return -1;
    }
    if (!put_utf8(c, out, size, &at)) return -1;
  }
  return (long)at;
}

/* A one-name path's name, or an error (encoding takes no nested paths). */
static ls_err_t flat_name(const path_t *p, const char **name, size_t *len) {
  LS_RETURN_IF(p->n != 1 || p->steps[0].index >= 0, LS_ERR_INVALID_ARG,
               "encoding a record: path '%s' is not one name", p->text);
  *name = p->steps[0].name, *len = p->steps[0].len;
  return LS_OK;
}

ls_err_t record_json_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                            const float *x, char *buf, size_t size, size_t *len) {
  size_t n = 0;
  const char *name = NULL;
  size_t nl = 0;
  char text[64];
  int const F = d->F;
#define PUT(...)                                                                                   \
  do {                                                                                             \
    int const w_ = snprintf(buf + n, n < size ? size - n : 0, __VA_ARGS__);                        \
    LS_RETURN_IF(w_ < 0 || (size_t)w_ >= size - n, LS_ERR_INVALID_ARG,                             \
                 "encoding a record: %zu bytes are too few", size);                                \
    n += (size_t)w_;                                                                               \
  } while (0)
  LS_RETURN_IF(size == 0, LS_ERR_INVALID_ARG, "encoding a record: no buffer");
  PUT("{");
  if (d->paths[F + PATH_KEY_SLOT].n > 0) {
    LS_FORWARD_IF_ERROR(flat_name(&d->paths[F + PATH_KEY_SLOT], &name, &nl));
    PUT("\"%.*s\":\"%.*s\",", (int)nl, name, (int)key_len, (const char *)key);
  }
  if (d->paths[F + PATH_TIME_SLOT].n > 0) {
    LS_FORWARD_IF_ERROR(flat_name(&d->paths[F + PATH_TIME_SLOT], &name, &nl));
    decode_iso8601(time_ms, text);
    PUT("\"%.*s\":\"%s\",", (int)nl, name, text);
  }
  for (int f = 0; f < F; f++) {
    LS_FORWARD_IF_ERROR(flat_name(&d->paths[f], &name, &nl));
    size_t tl = 0;
    LS_FORWARD_IF_ERROR(ls_record_encode(LS_FORMAT_CSV, &x[f], 1, text, sizeof text, &tl));
    PUT("%s\"%.*s\":%.*s", f ? "," : "", (int)nl, name, (int)tl, text);
  }
  PUT("}");
#undef PUT
  *len = n;
  return LS_OK;
}
