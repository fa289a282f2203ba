/*
 * Record decoders (include/lstream/ingest.h, "Records"): a spec's paths,
 * and each record's values, key and event time. f32 and csv decode as
 * ls_record_decode; json and avro have their format find every path
 * (record_json.c, record_avro.c), then the fields found become values,
 * the key and the time here, alike for both:
 *
 *   value  a number (JSON number, Avro double, float, long, int); null or
 *          missing: FIELD; any other type: TYPE; NaN/Inf: NONFINITE
 *   key    a string (its bytes, JSON escapes undone), a number (its text),
 *          Avro bytes; null or missing: FIELD; others: TYPE
 *   time   a number since the epoch in the spec's unit (auto: by its
 *          magnitude, which reads Avro's timestamp-millis and -micros alike),
 *          or an ISO 8601 string
 *          with a zone; null or missing: FIELD; other types: TYPE; one that
 *          does not read, or before 1970: TIME
 *
 * Checked in this order: the record's structure (PARSE), the key, the
 * values, the time; the first failure is the reason.
 */
#include "decode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"

const char *const ls_time_unit_names[LS_TIME__COUNT + 1] = {"auto", "s", "ms", "us", "ns", NULL};

void ls_record_spec_init(ls_record_spec_t *spec) {
  if (spec == NULL) return;
  memset(spec, 0, sizeof *spec);
  spec->format = LS_FORMAT_F32;
  spec->features = 1;
  spec->time_unit = LS_TIME_AUTO;
  spec->avro_schema_id = LS_AVRO_PLAIN;
}

/* ------------------------------------------------------------------------ */
/* Paths                                                                     */

static int is_set(const char *s) {
  return s != NULL && s[0] != '\0';
}

/* Parses text [n] ("a.b[2].c") into p (text copied). */
static ls_err_t path_parse(const char *text, size_t n, const char *what, path_t *p) {
  LS_RETURN_IF(n == 0, LS_ERR_INVALID_ARG, "%s is an empty name", what);
  p->text = malloc(n + 1);
  p->steps = calloc(n + 1, sizeof *p->steps); /* at most one step per byte */
  LS_RETURN_IF(p->text == NULL || p->steps == NULL, LS_ERR_NOMEM, "no memory for a path");
  memcpy(p->text, text, n);
  p->text[n] = '\0';
  const char *s = p->text, *const end = p->text + n;
  p->n = 0;
  while (s < end) {
    path_step_t *const st = &p->steps[p->n++];
    if (*s == '[') {
      char *close = NULL;
      long long const idx = strtoll(s + 1, &close, 10);
      LS_RETURN_IF(
          close == s + 1 || close >= end || *close != ']' || idx < 0 || s[1] == '-' || s[1] == '+',
          LS_ERR_INVALID_ARG,
          "%s '%s': '[' must hold an array index such as [0] (a whole number >= 0)", what, p->text);
      *st = (path_step_t){NULL, 0, idx};
      s = close + 1;
      LS_RETURN_IF(s < end && *s != '.' && *s != '[', LS_ERR_INVALID_ARG,
                   "%s '%s': after ']' comes '.', '[' or the end", what, p->text);
    } else {
      LS_RETURN_IF(p->n == 1 ? 0 : s[-1] != '.' && s[-1] != ']', LS_ERR_INVALID_ARG,
                   "%s '%s' is not a path", what, p->text);
      size_t const len = strcspn(s, ".[");
      LS_RETURN_IF(len == 0 || (size_t)(end - s) < len, LS_ERR_INVALID_ARG,
                   "%s '%s' has an empty name (paths are names separated by dots, with [N] for "
                   "an array's element: quote.bid, levels[0].px)",
                   what, p->text);
      *st = (path_step_t){s, len, -1};
      s += len;
    }
    if (s < end && *s == '.') {
      s++;
      LS_RETURN_IF(s == end, LS_ERR_INVALID_ARG, "%s '%s' ends with a dot", what, p->text);
    }
  }
  LS_RETURN_IF(p->n == 0 || p->steps[0].index >= 0, LS_ERR_INVALID_ARG,
               "%s '%s' must start with a field's name", what, p->text);
  return LS_OK;
}

static void path_free(path_t *p) {
  free(p->steps);
  free(p->text);
  p->steps = NULL;
  p->text = NULL;
  p->n = 0;
}

/* Counts the comma-separated items of list (blanks around each ignored). */
static int list_count(const char *list) {
  int n = 1;
  for (const char *s = list; *s; s++)
    n += *s == ',';
  return n;
}

/* The paths of spec->fields into d->paths [0, F), the key's and the time's
 * after them. */
static ls_err_t paths_make(ls_decoder_t *d) {
  const ls_record_spec_t *const sp = &d->spec;
  d->paths = calloc((size_t)d->F + 2, sizeof *d->paths);
  d->fields = calloc((size_t)d->F + 2, sizeof *d->fields);
  LS_RETURN_IF(d->paths == NULL || d->fields == NULL, LS_ERR_NOMEM, "no memory for %d fields",
               d->F);
  const char *s = sp->fields;
  for (int f = 0; f < d->F; f++) {
    while (*s == ' ' || *s == '\t')
      s++;
    size_t len = strcspn(s, ",");
    size_t trimmed = len;
    while (trimmed > 0 && (s[trimmed - 1] == ' ' || s[trimmed - 1] == '\t'))
      trimmed--;
    char what[40];
    snprintf(what, sizeof what, "field %d of fields", f + 1);
    LS_FORWARD_IF_ERROR(path_parse(s, trimmed, what, &d->paths[f]));
    for (int g = 0; g < f; g++)
      LS_RETURN_IF(!strcmp(d->paths[g].text, d->paths[f].text), LS_ERR_INVALID_ARG,
                   "fields: '%s' is named twice", d->paths[f].text);
    s += len + (s[len] == ',');
  }
  if (is_set(sp->key_field))
    LS_FORWARD_IF_ERROR(
        path_parse(sp->key_field, strlen(sp->key_field), "key_field", &d->paths[d->F]));
  if (is_set(sp->time_field))
    LS_FORWARD_IF_ERROR(
        path_parse(sp->time_field, strlen(sp->time_field), "time_field", &d->paths[d->F + 1]));
  return LS_OK;
}

/* ------------------------------------------------------------------------ */
/* The decoder                                                               */

/* Copies the spec's strings into d->spec. */
static ls_err_t spec_copy(ls_decoder_t *d, const ls_record_spec_t *spec) {
  d->spec = *spec;
  const char **const strs[] = {&d->spec.fields, &d->spec.key_field, &d->spec.time_field,
                               &d->spec.avro_schema};
  for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
    const char *const src = *strs[i];
    *strs[i] = NULL;
    if (src == NULL) continue;
    char *const copy = strdup(src);
    LS_RETURN_IF(copy == NULL, LS_ERR_NOMEM, "no memory for a record spec");
    *strs[i] = copy;
  }
  return LS_OK;
}

/* The spec's checks that do not need the format's own. */
static ls_err_t spec_check(const ls_record_spec_t *sp, int *F) {
  LS_RETURN_IF((unsigned)sp->format >= LS_FORMAT__COUNT, LS_ERR_INVALID_ARG,
               "record spec: unknown format %d", (int)sp->format);
  LS_RETURN_IF((unsigned)sp->time_unit >= LS_TIME__COUNT, LS_ERR_INVALID_ARG,
               "record spec: unknown time unit %d", (int)sp->time_unit);
  int const named = sp->format == LS_FORMAT_JSON || sp->format == LS_FORMAT_AVRO;
  if (!named) {
    LS_RETURN_IF(is_set(sp->fields) || is_set(sp->key_field) || is_set(sp->time_field),
                 LS_ERR_INVALID_ARG,
                 "fields, key_field and time_field name the fields of json and avro records, "
                 "not of %s (--format json or avro)",
                 ls_format2str(sp->format));
    LS_RETURN_IF(sp->features < 1 || sp->features > LS_FEATURES_MAX, LS_ERR_INVALID_ARG,
                 "features F=%d is outside [1, %d]", sp->features, LS_FEATURES_MAX);
    *F = sp->features;
    return LS_OK;
  }
  LS_RETURN_IF(!is_set(sp->fields), LS_ERR_INVALID_ARG,
               "--format %s needs --fields: the record's fields to train on, in order "
               "(such as --fields px,qty)",
               ls_format2str(sp->format));
  int const n = list_count(sp->fields);
  LS_RETURN_IF(n > LS_FEATURES_MAX, LS_ERR_INVALID_ARG, "fields: %d of them, at most %d", n,
               LS_FEATURES_MAX);
  LS_RETURN_IF(sp->features > 0 && sp->features != n, LS_ERR_INVALID_ARG,
               "features %d, but fields names %d ('%s'): leave features out, or make them agree",
               sp->features, n, sp->fields);
  LS_RETURN_IF(sp->format == LS_FORMAT_AVRO && !is_set(sp->avro_schema), LS_ERR_INVALID_ARG,
               "--format avro needs the writer's schema (--avro-schema FILE)");
  LS_RETURN_IF(sp->avro_schema_id < LS_AVRO_ANY_ID || sp->avro_schema_id > INT32_MAX,
               LS_ERR_INVALID_ARG, "avro schema id %lld is not an id (0..2^31-1)",
               (long long)sp->avro_schema_id);
  *F = n;
  return LS_OK;
}

ls_err_t ls_decoder_new(ls_decoder_t **out, const ls_record_spec_t *spec) {
  LS_RETURN_IF(out == NULL || spec == NULL, LS_ERR_INVALID_ARG,
               "ls_decoder_new: out and spec must not be NULL");
  *out = NULL;
  int F = 0;
  LS_FORWARD_IF_ERROR(spec_check(spec, &F));
  ls_decoder_t *const d = calloc(1, sizeof *d);
  LS_RETURN_IF(d == NULL, LS_ERR_NOMEM, "no memory for a decoder");
  d->F = F;
  ls_err_t err = spec_copy(d, spec);
  if (err == LS_OK && (spec->format == LS_FORMAT_JSON || spec->format == LS_FORMAT_AVRO))
    err = paths_make(d);
  if (err == LS_OK && spec->format == LS_FORMAT_JSON) err = record_json_new(d);
  if (err == LS_OK && spec->format == LS_FORMAT_AVRO) err = record_avro_new(d);
  if (err != LS_OK) {
    ls_decoder_destroy(d);
    return err;
  }
  *out = d;
  return LS_OK;
}

void ls_decoder_destroy(ls_decoder_t *d) {
  if (d == NULL) return;
  record_json_free(d);
  record_avro_free(d);
  for (int i = 0; d->paths != NULL && i < d->F + 2; i++)
    path_free(&d->paths[i]);
  free(d->paths);
  free(d->fields);
  free((char *)d->spec.fields), free((char *)d->spec.key_field);
  free((char *)d->spec.time_field), free((char *)d->spec.avro_schema);
  free(d);
}

int ls_decoder_features(const ls_decoder_t *d) {
  return d != NULL ? d->F : 0;
}

const char *ls_decoder_why(const ls_decoder_t *d) {
  return d != NULL ? d->why : "";
}

/* ------------------------------------------------------------------------ */
/* Fields into values, keys and times                                        */

/* The type of a field, for messages. */
static const char *kind_name(const field_t *f) {
  switch (f->kind) {
  case FIELD_MISSING: return "missing";
  case FIELD_NULL: return "null";
  case FIELD_NUMBER_TEXT:
  case FIELD_DOUBLE:
  case FIELD_LONG: return "a number";
  case FIELD_STRING: return "a string";
  case FIELD_BYTES: return "bytes";
  case FIELD_OTHER: break;
  }
  return f->type != NULL ? f->type : "of another type";
}

/* FIELD for a field missing or null, else TYPE: "field 'p' is ..., not want". */
static ls_reject_t wrong(ls_decoder_t *d, const path_t *p, const field_t *f, const char *want) {
  if (f->kind == FIELD_MISSING)
    return decode_why(d, LS_REJECT_FIELD, "field '%s' is missing", p->text);
  if (f->kind == FIELD_NULL) return decode_why(d, LS_REJECT_FIELD, "field '%s' is null", p->text);
  return decode_why(d, LS_REJECT_TYPE, "field '%s' is %s, not %s", p->text, kind_name(f), want);
}

static ls_reject_t field_value(ls_decoder_t *d, const path_t *p, const field_t *f, float *out) {
  switch (f->kind) {
  case FIELD_NUMBER_TEXT: {
    ls_reject_t const r = number_parse_float(f->s, f->n, 1, out);
    if (r == LS_REJECT_PARSE)
      return decode_why(d, r, "field '%s' holds '%.*s', not a JSON number", p->text,
                        (int)(f->n < 40 ? f->n : 40), f->s);
    if (r == LS_REJECT_NONFINITE)
      return decode_why(d, r, "field '%s' holds %.*s, beyond float's range", p->text,
                        (int)(f->n < 40 ? f->n : 40), f->s);
    return r;
  }
  case FIELD_DOUBLE:
    *out = (float)f->d;
    return isfinite(*out)
               ? LS_REJECT_NONE
               : decode_why(d, LS_REJECT_NONFINITE, "field '%s' holds %g", p->text, f->d);
  case FIELD_LONG: *out = (float)f->l; return LS_REJECT_NONE;
  default: return wrong(d, p, f, "a number");
  }
}

static ls_reject_t field_key(ls_decoder_t *d, const path_t *p, const field_t *f,
                             ls_decoded_t *out) {
  switch (f->kind) {
  case FIELD_STRING:
    if (f->escaped) {
      long const n = record_json_unescape(f->s, f->n, d->key, sizeof d->key);
      if (n < 0)
        return decode_why(d, LS_REJECT_KEY,
                          "key field '%s' holds a bad escape or is longer than %d bytes", p->text,
                          LS_KEY_MAX);
      out->key = d->key, out->key_len = (size_t)n;
      return LS_REJECT_NONE;
    }
    /* fall through */
  case FIELD_NUMBER_TEXT:
  case FIELD_BYTES: out->key = f->s, out->key_len = f->n; return LS_REJECT_NONE;
  case FIELD_LONG:
    out->key_len = (size_t)snprintf(d->key, sizeof d->key, "%lld", (long long)f->l);
    out->key = d->key;
    return LS_REJECT_NONE;
  default: return wrong(d, p, f, "a string or a number");
  }
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int day) {
  y -= m <= 2;
  int64_t const era = (y >= 0 ? y : y - 399) / 400;
  int64_t const yoe = y - era * 400;
  int64_t const doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + day - 1;
  int64_t const doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* Reads n digits at s[*i] into *v. */
static int digits(const char *s, size_t len, size_t *i, int n, int *v) {
  *v = 0;
  for (int k = 0; k < n; k++, (*i)++) {
    if (*i >= len || s[*i] < '0' || s[*i] > '9') return 0;
    *v = *v * 10 + (s[*i] - '0');
  }
  return 1;
}

/* An ISO 8601 / RFC 3339 date and time with a zone: YYYY-MM-DD(T| )hh:mm
 * [:ss[.frac]](Z|+hh[:mm]|-hh[:mm]|+hhmm); into ms since the epoch, the
 * fraction's digits past ms dropped. 1 when it reads. */
static int iso8601_ms(const char *s, size_t n, int64_t *ms) {
  size_t i = 0;
  int y, mo, day, h, mi, sec = 0, zh = 0, zm = 0;
  if (!digits(s, n, &i, 4, &y) || i >= n || s[i++] != '-' || !digits(s, n, &i, 2, &mo) || i >= n ||
      s[i++] != '-' || !digits(s, n, &i, 2, &day) || i >= n ||
      (s[i] != 'T' && s[i] != 't' && s[i] != ' '))
    return 0;
  i++;
  if (!digits(s, n, &i, 2, &h) || i >= n || s[i++] != ':' || !digits(s, n, &i, 2, &mi)) return 0;
  int64_t frac = 0;
  if (i < n && s[i] == ':') {
    i++;
    if (!digits(s, n, &i, 2, &sec)) return 0;
    if (i < n && (s[i] == '.' || s[i] == ',')) {
      size_t const start = ++i;
      for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        if (i - start < 3) frac = frac * 10 + (s[i] - '0');
      if (i == start) return 0;
      for (size_t k = i - start; k < 3; k++)
        frac *= 10;
    }
  }
  if (i >= n) return 0; /* no zone */
  int sign = 0;
  if (s[i] == 'Z' || s[i] == 'z') {
    i++;
  } else if (s[i] == '+' || s[i] == '-') {
    sign = s[i++] == '-' ? -1 : 1;
    if (!digits(s, n, &i, 2, &zh)) return 0;
    if (i < n && s[i] == ':') i++;
    if (i < n && !digits(s, n, &i, 2, &zm)) return 0;
  } else {
    return 0;
  }
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int const leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (i != n || mo < 1 || mo > 12 || day < 1 || day > mdays[mo - 1] ||
      (mo == 2 && day == 29 && !leap) || h > 23 || mi > 59 || sec > 60 || zh > 23 || zm > 59)
    return 0;
  int64_t const secs =
      days_from_civil(y, mo, day) * 86400 + h * 3600 + mi * 60 + sec - sign * (zh * 3600 + zm * 60);
  *ms = secs * 1000 + frac;
  return 1;
}

/* The unit of a number v (in whatever unit) for auto: by magnitude. */
static ls_time_unit_t unit_by_magnitude(double v) {
  double const a = fabs(v);
  return a < 1e11 ? LS_TIME_S : a < 1e14 ? LS_TIME_MS : a < 1e17 ? LS_TIME_US : LS_TIME_NS;
}

/* 10^shift converts the unit to ms. */
static int unit_shift(ls_time_unit_t u) {
  return u == LS_TIME_S ? 3 : u == LS_TIME_MS ? 0 : u == LS_TIME_US ? -3 : -6;
}

/* A number of time into ms; 0 when it does not fit. */
static int time_number_ms(const field_t *f, ls_time_unit_t unit, int64_t *ms) {
  if (f->kind == FIELD_NUMBER_TEXT) {
    number_decimal_t dec;
    if (!number_scan(f->s, f->n, 1, &dec)) return 0;
    if (unit == LS_TIME_AUTO) {
      int64_t whole = 0;
      if (!number_to_i64(&dec, 0, &whole)) return 0;
      unit = unit_by_magnitude((double)whole);
    }
    return number_to_i64(&dec, unit_shift(unit), ms);
  }
  if (f->kind == FIELD_LONG) {
    if (unit == LS_TIME_AUTO) unit = unit_by_magnitude((double)f->l);
    number_decimal_t const dec = {f->l < 0, 1,
                                  f->l < 0 ? (uint64_t)0 - (uint64_t)f->l : (uint64_t)f->l, 0};
    return number_to_i64(&dec, unit_shift(unit), ms);
  }
  if (unit == LS_TIME_AUTO) unit = unit_by_magnitude(f->d);
  double const v = floor(f->d * pow(10, unit_shift(unit)));
  if (!(fabs(v) < 9e18)) return 0;
  *ms = (int64_t)v;
  return 1;
}

static ls_reject_t field_time(ls_decoder_t *d, const path_t *p, const field_t *f, int64_t *ms) {
  int ok = 0;
  switch (f->kind) {
  case FIELD_STRING: ok = !f->escaped && iso8601_ms(f->s, f->n, ms); break;
  case FIELD_NUMBER_TEXT:
  case FIELD_LONG:
  case FIELD_DOUBLE: ok = time_number_ms(f, d->spec.time_unit, ms); break;
  default: return wrong(d, p, f, "a time (a number since the epoch, or an ISO 8601 string)");
  }
  if (ok && *ms >= 0) return LS_REJECT_NONE;
  if (f->kind == FIELD_STRING)
    return decode_why(d, LS_REJECT_TIME,
                      "time field '%s' holds '%.*s', not an ISO 8601 time with a zone "
                      "(2024-01-02T14:30:00.123Z, +01:00) from 1970 on",
                      p->text, (int)(f->n < 48 ? f->n : 48), f->s);
  return decode_why(d, LS_REJECT_TIME, "time field '%s' is not a time from 1970 on in %s", p->text,
                    ls_time_unit_names[d->spec.time_unit]);
}

/* json, avro: the fields the format found into key, values and time. */
static ls_reject_t decode_fields(ls_decoder_t *d, const ls_record_t *rec, float *x,
                                 ls_decoded_t *out) {
  int const F = d->F;
  const path_t *const kp = &d->paths[F + PATH_KEY_SLOT], *const tp = &d->paths[F + PATH_TIME_SLOT];
  out->key = NULL, out->key_len = 0;
  ls_reject_t r = kp->n > 0 ? field_key(d, kp, &d->fields[F + PATH_KEY_SLOT], out) : LS_REJECT_NONE;
  if (r != LS_REJECT_NONE) return r;
  if (kp->n == 0) out->key = rec->key, out->key_len = rec->key_len;
  for (int f = 0; f < F; f++)
    if ((r = field_value(d, &d->paths[f], &d->fields[f], &x[f])) != LS_REJECT_NONE) return r;
  if (tp->n > 0) return field_time(d, tp, &d->fields[F + PATH_TIME_SLOT], &out->time);
  return LS_REJECT_NONE;
}

ls_reject_t ls_decoder_decode(ls_decoder_t *d, const ls_record_t *rec, float *x,
                              ls_decoded_t *out) {
  if (d == NULL || rec == NULL || x == NULL || out == NULL ||
      (rec->value == NULL && rec->value_len > 0) || (rec->key == NULL && rec->key_len > 0)) {
    if (d != NULL) decode_why(d, LS_REJECT_PARSE, "ls_decoder_decode: invalid arguments");
    return LS_REJECT_PARSE;
  }
  d->why[0] = '\0';
  /* A record without a Kafka key has an empty one (not NULL: that is a key field unread). */
  *out = (ls_decoded_t){rec->key != NULL ? rec->key : "", rec->key_len,
                        rec->timestamp >= 0 ? rec->timestamp : -1};
  ls_format_t const fmt = d->spec.format;
  if (fmt == LS_FORMAT_F32 || fmt == LS_FORMAT_CSV) {
    ls_reject_t const r = ls_record_decode(fmt, rec->value, rec->value_len, d->F, x);
    if (r == LS_REJECT_SIZE)
      decode_why(d, r, "the value (%zu bytes) is not %d %s values", rec->value_len, d->F,
                 ls_format2str(fmt));
    else if (r == LS_REJECT_PARSE)
      decode_why(d, r, "the value '%.*s' does not parse as %d csv numbers",
                 (int)(rec->value_len < 40 ? rec->value_len : 40), (const char *)rec->value, d->F);
    else if (r == LS_REJECT_NONFINITE)
      decode_why(d, r, "the value holds NaN or Inf");
    return r;
  }
  ls_reject_t const r = fmt == LS_FORMAT_JSON ? record_json_fields(d, rec->value, rec->value_len)
                                              : record_avro_fields(d, rec->value, rec->value_len);
  if (r != LS_REJECT_NONE) {
    if (d->paths[d->F + PATH_KEY_SLOT].n > 0) out->key = NULL, out->key_len = 0;
    return r;
  }
  return decode_fields(d, rec, x, out);
}

ls_err_t ls_decoder_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                           const float *x, char *buf, size_t size, size_t *len) {
  LS_RETURN_IF(d == NULL || (key == NULL && key_len > 0) || x == NULL || buf == NULL ||
                   len == NULL || time_ms < 0,
               LS_ERR_INVALID_ARG,
               "ls_decoder_encode: d, key, x, buf and len must not be NULL, time_ms >= 0");
  if (d->spec.format == LS_FORMAT_JSON)
    return record_json_encode(d, key, key_len, time_ms, x, buf, size, len);
  if (d->spec.format == LS_FORMAT_AVRO)
    return record_avro_encode(d, key, key_len, time_ms, x, buf, size, len);
  return ls_record_encode(d->spec.format, x, d->F, buf, size, len);
}
