/*
 * Typed values and tables of keys (include/base/value.h).
 */
#include "base/value.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole decimal integer in [min, max]. */
static int parse_integer(const char *text, double min, double max, long long *out) {
  char *end = NULL;
  errno = 0;
  long long const v = strtoll(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || (double)v < min || (double)v > max)
    return -1;
  *out = v;
  return 0;
}

static int parse_u64(const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long const v = strtoull(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0) return -1;
  *out = v;
  return 0;
}

static int parse_double(const char *text, double min, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double const v = strtod(text, &end);
  if (text[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

static int parse_string(const base_value_t *v, const char *text, void *dst) {
  size_t const len = strlen(text);
  if (v->size > 0) {
    if (len >= v->size) return -1;
    memcpy(dst, text, len + 1);
    return 0;
  }
  char *const copy = len > 0 ? strdup(text) : NULL;
  if (len > 0 && copy == NULL) return -2;
  free(*(char **)dst);
  *(char **)dst = copy;
  return 0;
}

int base_value_parse(const base_value_t *v, const char *text, void *dst) {
  if (v == NULL || text == NULL || dst == NULL) return -1;
  long long i = 0;
  switch (v->kind) {
  case BASE_INT:
    if (parse_integer(text, v->min, v->max, &i) != 0) return -1;
    *(int *)dst = (int)i;
    return 0;
  case BASE_I64:
    if (parse_integer(text, v->min, v->max, &i) != 0) return -1;
    *(int64_t *)dst = i;
    return 0;
  case BASE_U64: return parse_u64(text, dst);
  case BASE_DBL: return parse_double(text, v->min, v->max, dst);
  case BASE_STR: return parse_string(v, text, dst);
  case BASE_CHOICE:
    for (int c = 0; v->choices[c] != NULL; c++)
      if (!strcmp(text, v->choices[c])) {
        *(int *)dst = c;
        return 0;
      }
    return -1;
  }
  return -1;
}

/* 0 when the value at src is one base_value_parse could have given (in
 * range, a valid choice, a string that fits), else -1. */
static int value_check(const base_value_t *v, const void *src) {
  switch (v->kind) {
  case BASE_INT: {
    int const i = *(const int *)src;
    return i >= v->min && i <= v->max ? 0 : -1;
  }
  case BASE_I64: {
    double const i = (double)*(const int64_t *)src;
    return i >= v->min && i <= v->max ? 0 : -1;
  }
  case BASE_U64: return 0;
  case BASE_DBL: {
    double const d = *(const double *)src;
    return isfinite(d) && d >= v->min && d <= v->max ? 0 : -1;
  }
  case BASE_STR: return v->size == 0 || strnlen(src, v->size) < v->size ? 0 : -1;
  case BASE_CHOICE: {
    int const c = *(const int *)src;
    for (int i = 0; v->choices[i] != NULL; i++)
      if (i == c) return 0;
    return -1;
  }
  }
  return -1;
}

void base_value_expected(const base_value_t *v, char *buf, size_t size) {
  switch (v->kind) {
  case BASE_INT:
  case BASE_I64: snprintf(buf, size, "an integer in [%.0f, %.0f]", v->min, v->max); return;
  case BASE_U64:
    snprintf(buf, size, "an integer in [0, %llu]", (unsigned long long)UINT64_MAX);
    return;
  case BASE_DBL: snprintf(buf, size, "a number in [%g, %g]", v->min, v->max); return;
  case BASE_STR:
    if (v->size > 0)
      snprintf(buf, size, "text of at most %zu bytes", v->size - 1);
    else
      snprintf(buf, size, "text");
    return;
  case BASE_CHOICE: {
    size_t len = (size_t)snprintf(buf, size, "one of ");
    for (int c = 0; v->choices[c] != NULL && len < size; c++)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", c ? ", " : "", v->choices[c]);
    return;
  }
  }
  snprintf(buf, size, "?");
}

ls_err_t base_value_format(const base_value_t *v, const void *src, char *buf, size_t size) {
  LS_RETURN_IF(v == NULL || src == NULL || buf == NULL || size == 0, LS_ERR_INVALID_ARG,
               "value, source or buffer is NULL");
  int n = 0;
  switch (v->kind) {
  case BASE_INT: n = snprintf(buf, size, "%d", *(const int *)src); break;
  case BASE_I64: n = snprintf(buf, size, "%lld", (long long)*(const int64_t *)src); break;
  case BASE_U64: n = snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)src); break;
  case BASE_DBL: n = snprintf(buf, size, "%.9g", *(const double *)src); break;
  case BASE_STR: {
    const char *const s = v->size > 0 ? (const char *)src : *(const char *const *)src;
    n = snprintf(buf, size, "%s", s != NULL ? s : "");
    break;
  }
  case BASE_CHOICE: n = snprintf(buf, size, "%s", v->choices[*(const int *)src]); break;
  }
  LS_RETURN_IF(n < 0 || (size_t)n >= size, LS_ERR_INVALID_ARG,
               "a buffer of %zu bytes is too small for the value", size);
  return LS_OK;
}

const base_key_t *base_keys_find(const base_key_t *keys, size_t n, const char *name) {
  for (size_t i = 0; name != NULL && i < n; i++)
    if (!strcmp(keys[i].name, name)) return &keys[i];
  char alt[64];
  size_t const len = name != NULL ? strlen(name) : sizeof alt;
  if (len >= sizeof alt) return NULL;
  for (size_t i = 0; i <= len; i++)
    alt[i] = name[i] == '-' || name[i] == '.' ? '_' : name[i];
  for (size_t i = 0; i < n; i++)
    if (!strcmp(keys[i].name, alt)) return &keys[i];
  return NULL;
}

ls_err_t base_keys_defaults(const base_key_t *keys, size_t n, void *settings) {
  LS_RETURN_IF(keys == NULL || settings == NULL, LS_ERR_INVALID_ARG, "keys or settings is NULL");
  for (size_t i = 0; i < n; i++)
    if (keys[i].def != NULL) LS_FORWARD_IF_ERROR(base_key_set(&keys[i], settings, keys[i].def));
  return LS_OK;
}

ls_err_t base_key_set(const base_key_t *k, void *settings, const char *text) {
  LS_RETURN_IF(k == NULL || settings == NULL || text == NULL, LS_ERR_INVALID_ARG,
               "key, settings or text is NULL");
  int const rc = base_value_parse(&k->value, text, (char *)settings + k->offset);
  LS_RETURN_IF(rc == -2, LS_ERR_NOMEM, "%s: no memory for its value", k->name);
  if (rc != 0) {
    char expected[160];
    base_value_expected(&k->value, expected, sizeof expected);
    return ls_error_set(LS_ERR_INVALID_ARG, "%s: '%s' is not %s", k->name, text, expected);
  }
  return LS_OK;
}

ls_err_t base_key_check(const base_key_t *k, const void *settings) {
  LS_RETURN_IF(k == NULL || settings == NULL, LS_ERR_INVALID_ARG, "key or settings is NULL");
  const void *const field = (const char *)settings + k->offset;
  if (value_check(&k->value, field) == 0) return LS_OK;
  char expected[160], value[64] = "?";
  base_value_expected(&k->value, expected, sizeof expected);
  if (k->value.kind == BASE_CHOICE)
    snprintf(value, sizeof value, "%d", *(const int *)field);
  else if (k->value.kind != BASE_STR)
    (void)base_value_format(&k->value, field, value, sizeof value);
  return ls_error_set(LS_ERR_INVALID_ARG, "%s: %s is not %s", k->name, value, expected);
}

ls_err_t base_key_get(const base_key_t *k, const void *settings, char *buf, size_t size) {
  LS_RETURN_IF(k == NULL || settings == NULL, LS_ERR_INVALID_ARG, "key or settings is NULL");
  return base_value_format(&k->value, (const char *)settings + k->offset, buf, size);
}
