/*
 * The rows of --predictions-out files (train/eval.h, "The rows"): columns
 * found by name in the header, so that later columns (h, q<level>_X) are
 * picked up and unknown ones left alone.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/csv.h"
#include "eval.h"

/* Where each column is in a file: -1 absent. */
typedef struct cols_s {
  int kind, series, offset, time, step, h;
  int *f, *y; /* [O] */
  int *q;     /* [Q, O] */
  size_t width;
} cols_t;

/* ------------------------------------------------------------------------ */
/* The header                                                                */

static int find_col(const base_csv_reader_t *rd, const char *name) {
  for (size_t i = 0; i < rd->n; i++)
    if (!strcmp(base_csv_get(rd, i), name)) return (int)i;
  return -1;
}

/* q<level>_X: *level and X (after the '_'), or 0 when name is not one. */
static int quantile_name(const char *name, double *level, const char **x) {
  if (name[0] != 'q') return 0;
  char *end = NULL;
  errno = 0;
  double const l = strtod(name + 1, &end);
  if (end == name + 1 || *end != '_' || errno != 0 || !(l > 0.0 && l < 1.0)) return 0;
  *level = l;
  *x = end + 1;
  return 1;
}

static int target_index(const eval_rows_t *r, const char *x) {
  for (int j = 0; j < r->O; j++)
    if (!strcmp(r->target[j], x)) return j;
  return -1;
}

static int cmp_double(const void *a, const void *b) {
  double const x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The first file's targets and quantile levels into r. */
static ls_err_t learn_columns(eval_rows_t *r, const base_csv_reader_t *rd, const char *path) {
  r->target = calloc(rd->n, sizeof *r->target);
  r->level = calloc(rd->n, sizeof *r->level);
  LS_RETURN_IF(r->target == NULL || r->level == NULL, LS_ERR_NOMEM, "no memory for %zu columns",
               rd->n);
  for (size_t i = 0; i < rd->n; i++) {
    const char *const name = base_csv_get(rd, i);
    if (strncmp(name, "forecast_", 9) != 0 || name[9] == '\0') continue;
    char actual[512];
    snprintf(actual, sizeof actual, "actual_%s", name + 9);
    LS_RETURN_IF(find_col(rd, actual) < 0, LS_ERR_INVALID_ARG,
                 "%s: column %s has no %s beside it: is this a --predictions-out file?", path, name,
                 actual);
    r->target[r->O] = strdup(name + 9);
    LS_RETURN_IF(r->target[r->O] == NULL, LS_ERR_NOMEM, "no memory for a column name");
    r->O++;
  }
  LS_RETURN_IF(r->O == 0, LS_ERR_INVALID_ARG,
               "%s: no forecast_X column in its first line: is this a --predictions-out file?",
               path);
  for (size_t i = 0; i < rd->n; i++) {
    double l = 0;
    const char *x = NULL;
    if (!quantile_name(base_csv_get(rd, i), &l, &x) || target_index(r, x) < 0) continue;
    int seen = 0;
    for (int k = 0; k < r->Q; k++)
      seen |= r->level[k] == l;
    if (!seen) r->level[r->Q++] = l;
  }
  qsort(r->level, (size_t)r->Q, sizeof *r->level, cmp_double);
  return LS_OK;
}

/* This file's columns (its header read into rd) against r's. */
static ls_err_t map_columns(eval_rows_t *r, const base_csv_reader_t *rd, const char *path,
                            cols_t *c) {
  if (r->files == 0) {
    LS_FORWARD_IF_ERROR(learn_columns(r, rd, path));
    r->has_h = find_col(rd, "h") >= 0;
  }
  c->width = rd->n;
  c->kind = find_col(rd, "kind"), c->series = find_col(rd, "series");
  c->offset = find_col(rd, "offset"), c->time = find_col(rd, "time");
  c->step = find_col(rd, "step"), c->h = find_col(rd, "h");
  const char *const need[] = {"kind", "series", "offset", "time"};
  int const at[] = {c->kind, c->series, c->offset, c->time};
  for (int i = 0; i < 4; i++)
    LS_RETURN_IF(at[i] < 0, LS_ERR_INVALID_ARG, "%s: no column %s in its first line", path,
                 need[i]);
  LS_RETURN_IF((c->h >= 0) != r->has_h, LS_ERR_INVALID_ARG,
               "%s: %s an h column where %s files did not", path, r->has_h ? "lacks" : "has",
               "the first");
  c->f = calloc((size_t)r->O, sizeof *c->f), c->y = calloc((size_t)r->O, sizeof *c->y);
  c->q = calloc((size_t)r->O * (size_t)(r->Q > 0 ? r->Q : 1), sizeof *c->q);
  LS_RETURN_IF(!c->f || !c->y || !c->q, LS_ERR_NOMEM, "no memory for %d targets", r->O);
  for (int j = 0; j < r->O; j++) {
    char name[512];
    snprintf(name, sizeof name, "forecast_%s", r->target[j]);
    c->f[j] = find_col(rd, name);
    snprintf(name, sizeof name, "actual_%s", r->target[j]);
    c->y[j] = find_col(rd, name);
    LS_RETURN_IF(c->f[j] < 0 || c->y[j] < 0, LS_ERR_INVALID_ARG,
                 "%s: no forecast_%s or actual_%s, which the first file has (files of one run?)",
                 path, r->target[j], r->target[j]);
    for (int k = 0; k < r->Q; k++) {
      snprintf(name, sizeof name, "q%.17g_%s", r->level[k], r->target[j]);
      int at_q = find_col(rd, name);
      for (size_t i = 0; at_q < 0 && i < rd->n; i++) { /* q0.10_X: the level's other spellings */
        double l = 0;
        const char *x = NULL;
        if (quantile_name(base_csv_get(rd, i), &l, &x) && l == r->level[k] &&
            !strcmp(x, r->target[j]))
          at_q = (int)i;
      }
      LS_RETURN_IF(at_q < 0, LS_ERR_INVALID_ARG, "%s: no quantile %g of target %s", path,
                   r->level[k], r->target[j]);
      c->q[k * r->O + j] = at_q;
    }
  }
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* Rows                                                                      */

static ls_err_t grow(eval_rows_t *r) {
  if (r->n < r->cap) return LS_OK;
  size_t const cap = r->cap ? 2 * r->cap : 4096, O = (size_t)r->O, Q = (size_t)r->Q;
#define GROW(field, per)                                                                           \
  do {                                                                                             \
    void *const g = realloc(r->field, cap * (per) * sizeof *r->field);                             \
    LS_RETURN_IF(g == NULL, LS_ERR_NOMEM, "no memory for %zu forecasts", cap);                     \
    r->field = g;                                                                                  \
  } while (0)
  GROW(series, 1);
  GROW(kind, 1);
  GROW(h, 1);
  GROW(offset, 1);
  GROW(time, 1);
  GROW(step, 1);
  GROW(f, O);
  GROW(y, O);
  GROW(q, Q * O > 0 ? Q * O : 1);
#undef GROW
  r->cap = cap;
  return LS_OK;
}

/* The index of a series key, added when new. */
static ls_err_t key_index(eval_rows_t *r, const char *key, int32_t *out) {
  size_t const len = strlen(key);
  uint64_t const hash = base_key_hash(key, len);
  int64_t i = base_keymap_find(&r->map, hash, key, len);
  if (i < 0) {
    if (r->n_keys == r->cap_keys) {
      size_t const cap = r->cap_keys ? 2 * r->cap_keys : 256;
      char **const k = realloc(r->key, cap * sizeof *k);
      LS_RETURN_IF(k == NULL, LS_ERR_NOMEM, "no memory for %zu series", cap);
      r->key = k, r->cap_keys = cap;
    }
    char *const copy = strdup(key);
    LS_RETURN_IF(copy == NULL, LS_ERR_NOMEM, "no memory for a series key");
    ls_err_t const err = base_keymap_add(&r->map, hash, copy, len, "report series");
    if (err != LS_OK) {
      free(copy);
      return err;
    }
    i = (int64_t)r->n_keys;
    r->key[r->n_keys++] = copy;
  }
  *out = (int32_t)i;
  return LS_OK;
}

/* A whole number or a number in field text; `empty_nan`: "" is NaN. */
static int parse_i64(const char *s, int64_t *v) {
  char *end = NULL;
  errno = 0;
  long long const x = strtoll(s, &end, 10);
  *v = (int64_t)x;
  return end != s && *end == '\0' && errno == 0;
}

static int parse_f64(const char *s, double *v, int empty_nan) {
  if (s[0] == '\0' && empty_nan) {
    *v = NAN;
    return 1;
  }
  char *end = NULL;
  *v = strtod(s, &end);
  return end != s && *end == '\0' && isfinite(*v);
}

/* The record in rd as row r->n. */
static ls_err_t add_row(eval_rows_t *r, const base_csv_reader_t *rd, const cols_t *c,
                        const char *path) {
  LS_RETURN_IF(rd->n != c->width, LS_ERR_INVALID_ARG,
               "%s:%lld: %zu fields where the first line names %zu", path, (long long)rd->line,
               rd->n, c->width);
  LS_FORWARD_IF_ERROR(grow(r));
  size_t const i = r->n, O = (size_t)r->O;
  const char *const kind = base_csv_get(rd, (size_t)c->kind);
  LS_RETURN_IF(strcmp(kind, "next") != 0 && strcmp(kind, "eval") != 0, LS_ERR_INVALID_ARG,
               "%s:%lld: kind '%s' is neither next nor eval", path, (long long)rd->line, kind);
  r->kind[i] = kind[0] == 'e' ? EVAL_EVAL : EVAL_NEXT;
  int64_t h = 1;
  int ok = parse_i64(base_csv_get(rd, (size_t)c->offset), &r->offset[i]) &&
           parse_i64(base_csv_get(rd, (size_t)c->time), &r->time[i]) &&
           (c->h < 0 || (parse_i64(base_csv_get(rd, (size_t)c->h), &h) && h >= 1));
  r->step[i] = -1;
  if (ok && c->step >= 0) ok = parse_i64(base_csv_get(rd, (size_t)c->step), &r->step[i]);
  r->h[i] = (int32_t)h;
  for (size_t j = 0; ok && j < O; j++) {
    ok = parse_f64(base_csv_get(rd, (size_t)c->f[j]), &r->f[i * O + j], 0) &&
         parse_f64(base_csv_get(rd, (size_t)c->y[j]), &r->y[i * O + j], 1);
    for (int k = 0; ok && k < r->Q; k++)
      ok = parse_f64(base_csv_get(rd, (size_t)c->q[k * r->O + (int)j]),
                     &r->q[(i * (size_t)r->Q + (size_t)k) * O + j], 0);
  }
  LS_RETURN_IF(!ok, LS_ERR_INVALID_ARG,
               "%s:%lld: a field that should be a number is not (offset, time, h, step, a "
               "forecast or an actual)",
               path, (long long)rd->line);
  LS_FORWARD_IF_ERROR(key_index(r, base_csv_get(rd, (size_t)c->series), &r->series[i]));
  r->n++;
  return LS_OK;
}

ls_err_t eval_read(eval_rows_t *r, const char *path) {
  LS_RETURN_IF(r == NULL || path == NULL, LS_ERR_INVALID_ARG, "eval_read: r or path is NULL");
  FILE *const f = fopen(path, "r");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  base_csv_reader_t rd = {0};
  cols_t c = {0};
  int got = 0;
  ls_err_t err = base_csv_next(&rd, f, &got);
  if (err == LS_OK && !got) err = ls_error_set(LS_ERR_INVALID_ARG, "%s: empty", path);
  if (err == LS_OK) err = map_columns(r, &rd, path, &c);
  while (err == LS_OK && (err = base_csv_next(&rd, f, &got)) == LS_OK && got)
    if (!(rd.n == 1 && base_csv_get(&rd, 0)[0] == '\0')) /* a blank line */
      err = add_row(r, &rd, &c, path);
  if (err == LS_OK) r->files++;
  free(c.f), free(c.y), free(c.q);
  base_csv_reader_free(&rd);
  fclose(f);
  return err;
}

void eval_rows_free(eval_rows_t *r) {
  if (r == NULL) return;
  for (int j = 0; j < r->O; j++)
    free(r->target[j]);
  for (size_t i = 0; i < r->n_keys; i++)
    free(r->key[i]);
  free(r->target), free(r->level), free(r->series), free(r->kind), free(r->h);
  free(r->offset), free(r->time), free(r->step), free(r->f), free(r->y), free(r->q);
  free(r->key);
  base_keymap_free(&r->map);
  *r = (eval_rows_t){0};
}
