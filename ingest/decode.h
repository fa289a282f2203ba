/*
 * Record decoders (include/lstream/ingest.h, "Records"), internal: the
 * paths of a spec, and what each format (record_json.c, record_avro.c)
 * hands decode.c for every path of a record: the field as it found it,
 * which decode.c turns into a value, a key or a time the same way for
 * both formats.
 */
#ifndef LSTREAM_INGEST_DECODE_H
#define LSTREAM_INGEST_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/ingest.h"

/* One step of a path: a name (index -1) or an array's element. */
typedef struct path_step_s {
  const char *name; /* into the decoder's copy of the spec's text */
  size_t len;
  int64_t index;
} path_step_t;

typedef struct path_s {
  path_step_t *steps; /* [n] */
  int n;              /* 0: no path (the Kafka key or timestamp) */
  char *text;         /* the path as given, NUL-terminated, for messages */
} path_t;

/* What a format found at a path. */
typedef enum field_kind_e {
  FIELD_MISSING = 0, /* no such field */
  FIELD_NULL,        /* null (JSON), the null branch of a union (Avro) */
  FIELD_NUMBER_TEXT, /* a JSON number: s [n] */
  FIELD_STRING,      /* s [n]; escaped: a JSON string holding backslash escapes */
  FIELD_DOUBLE,      /* d (Avro double, float) */
  FIELD_LONG,        /* l (Avro long, int) */
  FIELD_BYTES,       /* s [n] (Avro bytes, fixed) */
  FIELD_OTHER        /* anything else: `type` names it */
} field_kind_t;

typedef struct field_s {
  field_kind_t kind;
  const char *s;
  size_t n;
  int escaped;
  double d;
  int64_t l;
  const char *type; /* FIELD_OTHER: "an object", "an array", "a boolean", "a record", ... */
} field_t;

/* The paths: the F values', then the key's (slot F) and the time's (F + 1). */
enum { PATH_KEY_SLOT = 0, PATH_TIME_SLOT = 1 };

struct record_json_s;
struct record_avro_s;

struct ls_decoder_s {
  ls_record_spec_t spec; /* its strings owned */
  int F;
  path_t *paths;            /* [F + 2] */
  field_t *fields;          /* [F + 2]: what the format found, per record */
  char why[256];            /* the last rejection's detail */
  char key[LS_KEY_MAX + 1]; /* a key unescaped, or a number's text */
  struct record_json_s *json;
  struct record_avro_s *avro;
};

/* Sets d->why (printf) and returns reason. */
ls_reject_t decode_why(ls_decoder_t *d, ls_reject_t reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ------------------------------------------------------------------------ */
/* record_json.c                                                             */

ls_err_t record_json_new(ls_decoder_t *d);
void record_json_free(ls_decoder_t *d);

/* Parses value [len] as one JSON object and finds every path of d into
 * d->fields: LS_REJECT_NONE, or PARSE (with d->why). */
ls_reject_t record_json_fields(ls_decoder_t *d, const char *value, size_t len);

/* Encodes one record (ls_decoder_encode) into buf [size]. */
ls_err_t record_json_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                            const float *x, char *buf, size_t size, size_t *len);

/* ISO 8601 text of ms since the epoch (UTC, ms: 24 bytes) into buf [32]. */
void decode_iso8601(int64_t ms, char *buf);

/* Unescapes the JSON string s [n] into out [size] (UTF-8); returns its
 * length, or -1 when it does not fit or holds a bad escape. */
long record_json_unescape(const char *s, size_t n, char *out, size_t size);

/* ------------------------------------------------------------------------ */
/* record_avro.c                                                             */

/* Reads the spec's schema and finds every path in it (an error names a
 * field the schema lacks). */
ls_err_t record_avro_new(ls_decoder_t *d);
void record_avro_free(ls_decoder_t *d);

/* Encodes one record (ls_decoder_encode) into buf [size]. */
ls_err_t record_avro_encode(ls_decoder_t *d, const void *key, size_t key_len, int64_t time_ms,
                            const float *x, char *buf, size_t size, size_t *len);

/* Reads value [len] (the framing checked) as a record of the schema and
 * finds every path into d->fields: LS_REJECT_NONE, or PARSE (with d->why). */
ls_reject_t record_avro_fields(ls_decoder_t *d, const void *value, size_t len);

#endif /* LSTREAM_INGEST_DECODE_H */
