/*
 * Avro records (ingest/decode.h) through Apache Avro C (Debian's
 * libavro-dev): the writer's schema is read once, every path is found in
 * it (a record's field by its index, an array's element, a map's entry by
 * name; a union of null and a type is followed through its branch), and
 * each value is read into one generic value that is reused. Framing: plain
 * Avro binary, or Confluent's (a 0 byte, then the schema id in 4 bytes
 * big-endian), its id checked when one is given. No schema registry is
 * asked: the schema file is the contract.
 */
#include <avro.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* A step of a path resolved against the schema. */
typedef struct astep_s {
  int field;     /* a record's field index, or -1 */
  char *name;    /* a map's key (NUL-terminated), or NULL */
  int64_t index; /* an array's element, or -1 */
} astep_t;

typedef struct record_avro_s {
  avro_schema_t schema;
  avro_value_iface_t *iface;
  avro_value_t value;
  int have_value;
  avro_reader_t reader;
  astep_t **steps; /* [F + 2][the path's steps] */
} record_avro_t;

/* The schema a union of null and one type stands for (the type), else s. */
static avro_schema_t through_union(avro_schema_t s) {
  if (s == NULL || !is_avro_union(s)) return s;
  avro_schema_t other = NULL;
  size_t const n = avro_schema_union_size(s);
  for (size_t b = 0; b < n; b++) {
    avro_schema_t const br = avro_schema_union_branch(s, (int)b);
    if (!is_avro_null(br)) {
      if (other != NULL) return s; /* two types: left to the value's branch */
      other = br;
    }
  }
  return other != NULL ? other : s;
}

/* Resolves path p (for messages, what) against the schema into steps. */
static ls_err_t resolve(record_avro_t *a, const path_t *p, astep_t *steps) {
  avro_schema_t s = a->schema;
  for (int k = 0; k < p->n; k++) {
    const path_step_t *const st = &p->steps[k];
    s = through_union(s);
    steps[k] = (astep_t){-1, NULL, st->index};
    if (st->index >= 0) {
      LS_RETURN_IF(s == NULL || !is_avro_array(s), LS_ERR_INVALID_ARG,
                   "field '%s': step %d is an index [%lld], but the schema has no array there",
                   p->text, k + 1, (long long)st->index);
      s = avro_schema_array_items(s);
      continue;
    }
    char name[256];
    LS_RETURN_IF(st->len >= sizeof name, LS_ERR_INVALID_ARG, "field '%s': a name too long",
                 p->text);
    memcpy(name, st->name, st->len);
    name[st->len] = '\0';
    if (s != NULL && is_avro_map(s)) {
      steps[k].name = strdup(name);
      LS_RETURN_IF(steps[k].name == NULL, LS_ERR_NOMEM, "no memory for a path");
      s = avro_schema_map_values(s);
      continue;
    }
    LS_RETURN_IF(s == NULL || !is_avro_record(s), LS_ERR_INVALID_ARG,
                 "field '%s': '%s' is not in a record of the schema", p->text, name);
    int const idx = avro_schema_record_field_get_index(s, name);
    if (idx < 0) {
      char fields[512] = "";
      size_t at = 0;
      size_t const n = avro_schema_record_size(s);
      for (size_t i = 0; i < n && at < sizeof fields; i++)
        at += (size_t)snprintf(fields + at, sizeof fields - at, "%s%s", i ? ", " : "",
                               avro_schema_record_field_name(s, (int)i));
      return ls_error_set(LS_ERR_INVALID_ARG,
                          "field '%s': the schema's record %s has no field '%s' (its fields: %s)",
                          p->text, avro_schema_name(s), name, fields);
    }
    steps[k].field = idx;
    s = avro_schema_record_field_get_by_index(s, idx);
  }
  return LS_OK;
}

ls_err_t record_avro_new(ls_decoder_t *d) {
  record_avro_t *const a = calloc(1, sizeof *a);
  LS_RETURN_IF(a == NULL, LS_ERR_NOMEM, "no memory for an Avro decoder");
  d->avro = a;
  const char *const text = d->spec.avro_schema;
  LS_RETURN_IF(avro_schema_from_json_length(text, strlen(text), &a->schema) != 0,
               LS_ERR_INVALID_ARG, "the Avro schema does not parse: %s", avro_strerror());
  LS_RETURN_IF(!is_avro_record(a->schema), LS_ERR_INVALID_ARG,
               "the Avro schema is not a record (its type: %s)", avro_schema_type_name(a->schema));
  a->iface = avro_generic_class_from_schema(a->schema);
  LS_RETURN_IF(a->iface == NULL, LS_ERR_NOMEM, "Avro: %s", avro_strerror());
  LS_RETURN_IF(avro_generic_value_new(a->iface, &a->value) != 0, LS_ERR_NOMEM, "Avro: %s",
               avro_strerror());
  a->have_value = 1;
  a->reader = avro_reader_memory("", 0);
  a->steps = calloc((size_t)d->F + 2, sizeof *a->steps);
  LS_RETURN_IF(a->reader == NULL || a->steps == NULL, LS_ERR_NOMEM,
               "no memory for an Avro decoder");
  for (int f = 0; f < d->F + 2; f++) {
    if (d->paths[f].n == 0) continue;
    a->steps[f] = calloc((size_t)d->paths[f].n, sizeof *a->steps[f]);
    LS_RETURN_IF(a->steps[f] == NULL, LS_ERR_NOMEM, "no memory for an Avro decoder");
    LS_FORWARD_IF_ERROR(resolve(a, &d->paths[f], a->steps[f]));
  }
  return LS_OK;
}

void record_avro_free(ls_decoder_t *d) {
  record_avro_t *const a = d->avro;
  if (a == NULL) return;
  for (int f = 0; a->steps != NULL && f < d->F + 2; f++) {
    for (int k = 0; a->steps[f] != NULL && k < d->paths[f].n; k++)
      free(a->steps[f][k].name);
    free(a->steps[f]);
  }
  free(a->steps);
  if (a->reader != NULL) avro_reader_free(a->reader);
  if (a->have_value) avro_value_decref(&a->value);
  if (a->iface != NULL) avro_value_iface_decref(a->iface);
  if (a->schema != NULL) avro_schema_decref(a->schema);
  free(a);
  d->avro = NULL;
}

/* v, or the branch of its union; 0 when it is a null branch. */
static int branch(avro_value_t *v) {
  if (avro_value_get_type(v) != AVRO_UNION) return 1;
  avro_value_t b;
  if (avro_value_get_current_branch(v, &b) != 0) return 0;
  *v = b;
  return avro_value_get_type(v) != AVRO_NULL;
}

/* What v holds, as a field. */
static void field_of(avro_value_t *v, field_t *f) {
  *f = (field_t){FIELD_OTHER, NULL, 0, 0, 0, 0, NULL};
  const void *p = NULL;
  size_t size = 0;
  int32_t i32;
  float fl;
  switch (avro_value_get_type(v)) {
  case AVRO_DOUBLE: f->kind = FIELD_DOUBLE, avro_value_get_double(v, &f->d); return;
  case AVRO_FLOAT: f->kind = FIELD_DOUBLE, avro_value_get_float(v, &fl), f->d = fl; return;
  case AVRO_INT64: f->kind = FIELD_LONG, avro_value_get_long(v, &f->l); return;
  case AVRO_INT32: f->kind = FIELD_LONG, avro_value_get_int(v, &i32), f->l = i32; return;
  case AVRO_STRING:
    avro_value_get_string(v, (const char **)&p, &size);
    f->kind = FIELD_STRING, f->s = p, f->n = size > 0 ? size - 1 : 0; /* size counts the NUL */
    return;
  case AVRO_BYTES:
    avro_value_get_bytes(v, &p, &size);
    f->kind = FIELD_BYTES, f->s = p, f->n = size;
    return;
  case AVRO_FIXED:
    avro_value_get_fixed(v, &p, &size);
    f->kind = FIELD_BYTES, f->s = p, f->n = size;
    return;
  case AVRO_NULL: f->kind = FIELD_NULL; return;
  case AVRO_BOOLEAN: f->type = "a boolean"; return;
  case AVRO_RECORD: f->type = "a record"; return;
  case AVRO_ARRAY: f->type = "an array"; return;
  case AVRO_MAP: f->type = "a map"; return;
  case AVRO_ENUM: f->type = "an enum"; return;
  default: f->type = "of another type"; return;
  }
}

/* Finds the path of steps [n] in the record just read into f. */
static void find(record_avro_t *a, const astep_t *steps, int n, field_t *f) {
  avro_value_t cur = a->value, child;
  for (int k = 0; k < n; k++) {
    if (!branch(&cur)) {
      *f = (field_t){FIELD_NULL, NULL, 0, 0, 0, 0, NULL};
      return;
    }
    int rc = -1;
    size_t size = 0;
    avro_type_t const t = avro_value_get_type(&cur);
    if (steps[k].field >= 0 && t == AVRO_RECORD)
      rc = avro_value_get_by_index(&cur, (size_t)steps[k].field, &child, NULL);
    else if (steps[k].name != NULL && t == AVRO_MAP)
      rc = avro_value_get_by_name(&cur, steps[k].name, &child, NULL);
    else if (steps[k].index >= 0 && t == AVRO_ARRAY && avro_value_get_size(&cur, &size) == 0 &&
             (size_t)steps[k].index < size)
      rc = avro_value_get_by_index(&cur, (size_t)steps[k].index, &child, NULL);
    if (rc != 0 || (steps[k].name != NULL && child.self == NULL)) {
      *f = (field_t){FIELD_MISSING, NULL, 0, 0, 0, 0, NULL};
      return;
    }
    cur = child;
  }
  if (!branch(&cur)) {
    *f = (field_t){FIELD_NULL, NULL, 0, 0, 0, 0, NULL};
    return;
  }
  field_of(&cur, f);
}

ls_reject_t record_avro_fields(ls_decoder_t *d, const void *value, size_t len) {
  record_avro_t *const a = d->avro;
  const unsigned char *p = value;
  int64_t const want = d->spec.avro_schema_id;
  if (want != LS_AVRO_PLAIN) {
    if (len < 5 || p[0] != 0)
      return decode_why(d, LS_REJECT_PARSE,
                        "the value (%zu bytes, first byte %d) is not in Confluent's framing "
                        "(a 0 byte, then a 4-byte schema id)",
                        len, len > 0 ? p[0] : -1);
    uint32_t const id = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
    if (want >= 0 && id != (uint32_t)want)
      return decode_why(d, LS_REJECT_PARSE, "schema id %u, not %lld (--avro-schema-id)", id,
                        (long long)want);
    p += 5, len -= 5;
  }
  avro_value_reset(&a->value);
  avro_reader_memory_set_source(a->reader, (const char *)p, (int64_t)len);
  if (avro_value_read(a->reader, &a->value) != 0)
    return decode_why(d, LS_REJECT_PARSE, "the value (%zu bytes) is not a record of the schema: %s",
                      len, avro_strerror());
  size_t used = 0; /* (the memory reader tells no position: the record's own size) */
  if (avro_value_sizeof(&a->value, &used) != 0 || used != len)
    return decode_why(d, LS_REJECT_PARSE,
                      "the value (%zu bytes) holds more than a record of the schema (%zu bytes)",
                      len, used);
  for (int f = 0; f < d->F + 2; f++)
    if (d->paths[f].n > 0) find(a, a->steps[f], d->paths[f].n, &d->fields[f]);
  return LS_REJECT_NONE;
}

ls_err_t record_avro_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                            const float *x, char *buf, size_t size, size_t *len) {
  record_avro_t *const a = d->avro;
  int64_t const id = d->spec.avro_schema_id;
  size_t at = id == LS_AVRO_PLAIN ? 0 : 5;
  LS_RETURN_IF(size < at + 1, LS_ERR_INVALID_ARG, "encoding a record: no room");
  if (at == 5) {
    uint32_t const u = id >= 0 ? (uint32_t)id : 0;
    unsigned char const head[5] = {0, (unsigned char)(u >> 24), (unsigned char)(u >> 16),
                                   (unsigned char)(u >> 8), (unsigned char)u};
    memcpy(buf, head, 5);
  }
  avro_value_reset(&a->value);
  for (int f = 0; f < d->F + 2; f++) {
    avro_value_t v, b;
    if (d->paths[f].n == 0) continue;
    LS_RETURN_IF(d->paths[f].n != 1 || a->steps[f][0].field < 0, LS_ERR_INVALID_ARG,
                 "encoding a record: path '%s' is not one field", d->paths[f].text);
    avro_value_get_by_index(&a->value, (size_t)a->steps[f][0].field, &v, NULL);
    if (avro_value_get_type(&v) == AVRO_UNION) { /* the branch that is not null */
      avro_value_set_branch(&v, 0, &b);
      if (avro_value_get_type(&b) == AVRO_NULL) avro_value_set_branch(&v, 1, &b);
      v = b;
    }
    avro_type_t const t = avro_value_get_type(&v);
    char iso[32];
    int rc = 0;
    if (f == d->F + PATH_KEY_SLOT) {
      char k[LS_KEY_MAX + 1];
      snprintf(k, sizeof k, "%.*s", (int)key_len, (const char *)key);
      rc = t == AVRO_STRING ? avro_value_set_string(&v, k) : -1;
    } else if (f == d->F + PATH_TIME_SLOT) {
      decode_iso8601(time_ms, iso);
      rc = t == AVRO_INT64    ? avro_value_set_long(&v, time_ms)
           : t == AVRO_STRING ? avro_value_set_string(&v, iso)
                              : -1;
    } else {
      rc = t == AVRO_FLOAT    ? avro_value_set_float(&v, x[f])
           : t == AVRO_DOUBLE ? avro_value_set_double(&v, x[f])
                              : -1;
    }
    LS_RETURN_IF(rc != 0, LS_ERR_INVALID_ARG, "encoding a record: field '%s' takes no such value",
                 d->paths[f].text);
  }
  avro_writer_t const w = avro_writer_memory(buf + at, (int64_t)(size - at));
  LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "no memory for an Avro writer");
  int const rc = avro_value_write(w, &a->value);
  at += (size_t)avro_writer_tell(w);
  avro_writer_free(w);
  LS_RETURN_IF(rc != 0, LS_ERR_INVALID_ARG, "encoding a record: %s", avro_strerror());
  *len = at;
  return LS_OK;
}
