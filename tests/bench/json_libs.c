/*
 * JSON libraries from Debian measured on ticks (tests/bench/json_libs.sh):
 * each parses one record and takes what `--format json` needs of it (the
 * key string, the time string and F numbers as floats). One core, the
 * records in memory; the median of 5 passes per library, the libraries
 * alternating within each pass.
 *
 *   json_libs FILE F NAME...   FILE: one JSON object per line; NAME: the
 *                              fields read as numbers; the key is "sym",
 *                              the time "ts".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "number.h"

/* jansson's and json-c's names collide: the file is compiled three times,
 * PART 1 (main, cJSON, yajl, jsmn), PART 2 (jansson), PART 3 (json-c). */
#define PASSES 5
#define F_MAX  16

extern int F;
extern const char *names[F_MAX];
extern size_t name_len[F_MAX];
extern volatile float sink; /* keeps the work from being optimised away */
extern volatile size_t sink_len;
int with_jansson(const char *s, size_t n);
int with_jsonc(const char *s, size_t n);
void jsonc_init(void);

#if PART == 2
#include <jansson.h>

/* ---- jansson ---- */
int with_jansson(const char *s, size_t n) {
  json_error_t e;
  json_t *const root = json_loadb(s, n, 0, &e);
  if (root == NULL) return -1;
  json_t *const key = json_object_get(root, "sym"), *const ts = json_object_get(root, "ts");
  int ok = json_is_string(key) && json_is_string(ts);
  if (ok) sink_len = json_string_length(key) + json_string_length(ts);
  for (int f = 0; f < F && ok; f++) {
    json_t *const v = json_object_get(root, names[f]);
    ok = json_is_number(v);
    if (ok) sink = (float)json_number_value(v);
  }
  json_decref(root);
  return ok ? 0 : -1;
}

#elif PART == 3
#include <json-c/json.h>

/* ---- json-c (one tokener, reset per record) ---- */
static json_tokener *tok;
void jsonc_init(void) {
  tok = json_tokener_new();
}
int with_jsonc(const char *s, size_t n) {
  json_tokener_reset(tok);
  struct json_object *const root = json_tokener_parse_ex(tok, s, (int)n);
  if (root == NULL) return -1;
  struct json_object *key, *ts, *v;
  int ok = json_object_object_get_ex(root, "sym", &key) &&
           json_object_object_get_ex(root, "ts", &ts) &&
           json_object_is_type(key, json_type_string) && json_object_is_type(ts, json_type_string);
  if (ok)
    sink_len = (size_t)json_object_get_string_len(key) + (size_t)json_object_get_string_len(ts);
  for (int f = 0; f < F && ok; f++) {
    ok = json_object_object_get_ex(root, names[f], &v) &&
         (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
    if (ok) sink = (float)json_object_get_double(v);
  }
  json_object_put(root);
  return ok ? 0 : -1;
}

#else
#include <cjson/cJSON.h>
#include <yajl/yajl_parse.h>
#define JSMN_STATIC
#define JSMN_STRICT
#include <jsmn.h>

int F;
const char *names[F_MAX];
size_t name_len[F_MAX];
volatile float sink;
volatile size_t sink_len;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- cJSON ---- */
static int with_cjson(const char *s, size_t n) {
  cJSON *const root = cJSON_ParseWithLength(s, n);
  if (root == NULL) return -1;
  int ok = 1;
  const cJSON *const key = cJSON_GetObjectItemCaseSensitive(root, "sym");
  const cJSON *const ts = cJSON_GetObjectItemCaseSensitive(root, "ts");
  ok = cJSON_IsString(key) && cJSON_IsString(ts);
  if (ok) sink_len = strlen(key->valuestring) + strlen(ts->valuestring);
  for (int f = 0; f < F && ok; f++) {
    const cJSON *const v = cJSON_GetObjectItemCaseSensitive(root, names[f]);
    ok = cJSON_IsNumber(v);
    if (ok) sink = (float)v->valuedouble;
  }
  cJSON_Delete(root);
  return ok ? 0 : -1;
}

/* ---- yajl (events; numbers as text, through lstream's parser) ---- */
typedef struct ystate_s {
  int depth, want; /* want: -1 none, -2 key, -3 time, else the feature */
  int got;
} ystate_t;
static int y_key(void *ctx, const unsigned char *k, size_t len) {
  ystate_t *const y = ctx;
  y->want = -1;
  if (y->depth != 1) return 1;
  if (len == 3 && !memcmp(k, "sym", 3))
    y->want = -2;
  else if (len == 2 && !memcmp(k, "ts", 2))
    y->want = -3;
  else
    for (int f = 0; f < F; f++)
      if (len == name_len[f] && !memcmp(k, names[f], len)) y->want = f;
  return 1;
}
static int y_string(void *ctx, const unsigned char *s, size_t len) {
  ystate_t *const y = ctx;
  if (y->want == -2 || y->want == -3) sink_len = len, y->got++;
  return 1;
}
static int y_number(void *ctx, const char *s, size_t len) {
  ystate_t *const y = ctx;
  float v;
  if (y->want >= 0 && number_parse_float(s, len, 1, &v) == LS_REJECT_NONE) sink = v, y->got++;
  return 1;
}
static int y_start(void *ctx) {
  ((ystate_t *)ctx)->depth++;
  return 1;
}
static int y_end(void *ctx) {
  ((ystate_t *)ctx)->depth--;
  return 1;
}
static const yajl_callbacks ycb = {NULL,    NULL,  NULL,  NULL,    y_number, y_string,
                                   y_start, y_key, y_end, y_start, y_end};
static int with_yajl(const char *s, size_t n) {
  ystate_t y = {0, -1, 0};
  yajl_handle const h = yajl_alloc(&ycb, NULL, &y);
  int ok = yajl_parse(h, (const unsigned char *)s, n) == yajl_status_ok &&
           yajl_complete_parse(h) == yajl_status_ok;
  yajl_free(h);
  return ok && y.got == F + 2 ? 0 : -1;
}

/* ---- jsmn (tokens; numbers through lstream's parser) ---- */
static int with_jsmn(const char *s, size_t n) {
  jsmn_parser p;
  jsmntok_t t[64];
  jsmn_init(&p);
  int const nt = jsmn_parse(&p, s, n, t, 64);
  if (nt < 1 || t[0].type != JSMN_OBJECT) return -1;
  int got = 0;
  for (int i = 1; i + 1 < nt;) {
    const jsmntok_t *const k = &t[i], *const v = &t[i + 1];
    size_t const kl = (size_t)(k->end - k->start);
    const char *const ks = s + k->start;
    if (kl == 3 && !memcmp(ks, "sym", 3) && v->type == JSMN_STRING)
      sink_len = (size_t)(v->end - v->start), got++;
    else if (kl == 2 && !memcmp(ks, "ts", 2) && v->type == JSMN_STRING)
      sink_len = (size_t)(v->end - v->start), got++;
    else
      for (int f = 0; f < F; f++)
        if (kl == name_len[f] && !memcmp(ks, names[f], kl)) {
          float x;
          if (v->type != JSMN_PRIMITIVE ||
              number_parse_float(s + v->start, (size_t)(v->end - v->start), 1, &x) !=
                  LS_REJECT_NONE)
            return -1;
          sink = x, got++;
        }
    int j = i + 2; /* past the value's subtree */
    while (j < nt && t[j].start < v->end)
      j++;
    i = j;
  }
  return got == F + 2 ? 0 : -1;
}

typedef struct lib_s {
  const char *name;
  int (*parse)(const char *, size_t);
} lib_t;

static int cmp(const void *a, const void *b) {
  double const x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: json_libs FILE F NAME...\n");
    return 2;
  }
  F = atoi(argv[2]);
  for (int f = 0; f < F; f++)
    names[f] = argv[3 + f], name_len[f] = strlen(names[f]);
  FILE *const in = fopen(argv[1], "r");
  if (in == NULL) return 2;
  size_t cap = 1 << 20, len = 0, nrec = 0, rcap = 1024;
  char *text = malloc(cap);
  size_t *at = malloc(rcap * sizeof *at);
  char line[4096];
  while (fgets(line, sizeof line, in)) {
    size_t const l = strcspn(line, "\n");
    if (len + l > cap) text = realloc(text, cap *= 2);
    if (nrec + 2 > rcap) at = realloc(at, (rcap *= 2) * sizeof *at);
    at[nrec++] = len;
    memcpy(text + len, line, l);
    len += l;
  }
  at[nrec] = len;
  fclose(in);
  jsonc_init();
  lib_t const libs[] = {{"cJSON 1.7.15", with_cjson},
                        {"jansson 2.14", with_jansson},
                        {"json-c 0.16", with_jsonc},
                        {"yajl 2", with_yajl},
                        {"jsmn 1.1", with_jsmn}};
  int const L = (int)(sizeof libs / sizeof libs[0]);
  double t[8][PASSES];
  for (int pass = 0; pass < PASSES; pass++)
    for (int l = 0; l < L; l++) {
      double const t0 = now_s();
      for (size_t i = 0; i < nrec; i++)
        if (libs[l].parse(text + at[i], at[i + 1] - at[i]) != 0) {
          fprintf(stderr, "%s: record %zu failed\n", libs[l].name, i);
          return 1;
        }
      t[l][pass] = now_s() - t0;
    }
  printf("%zu records, %.1f bytes each, %d numbers; median of %d passes, one core\n", nrec,
         (double)len / (double)nrec, F, PASSES);
  for (int l = 0; l < L; l++) {
    qsort(t[l], PASSES, sizeof(double), cmp);
    printf("%-16s %8.0f ns/record %6.2f M records/s\n", libs[l].name,
           1e9 * t[l][PASSES / 2] / (double)nrec, (double)nrec / t[l][PASSES / 2] / 1e6);
  }
  free(text), free(at);
  return 0;
}
#endif
