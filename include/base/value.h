/*
 * Typed values from text, and tables of keys over a settings struct (after
 * librdkafka's property table): what the library's configurations
 * (train/conf.c, ingest/conf.c) and the program's command-line options
 * (train/cli/) share, so that a value is parsed, checked and printed in one
 * place.
 */
#ifndef LSTREAM_BASE_VALUE_H
#define LSTREAM_BASE_VALUE_H

#include <stddef.h>

#include "base/api.h"
#include "lstream/error.h"

typedef enum base_kind_e {
  BASE_INT,   /* int, a decimal integer in [min, max] */
  BASE_I64,   /* int64_t, a decimal integer in [min, max] */
  BASE_U64,   /* uint64_t, a decimal integer in [0, 2^64 - 1], no sign */
  BASE_DBL,   /* double, a finite number in [min, max] */
  BASE_STR,   /* size > 0: char [size], the text copied; size 0: char *, a
                 malloc'ed copy replacing (and freeing) the old one, "" = NULL */
  BASE_CHOICE /* int: the index of the text in choices */
} base_kind_t;

/* How a value is read. */
typedef struct base_value_s {
  base_kind_t kind;
  double min, max;            /* the numbers' range (integers exact below 2^53) */
  const char *const *choices; /* BASE_CHOICE: the names by value, NULL-terminated */
  size_t size;                /* BASE_STR: see above */
} base_value_t;

/* Initialisers of a base_value_t, one per kind. */
/* clang-format off */
#define BASE_V_INT(min, max)  {BASE_INT, (min), (max), NULL, 0}
#define BASE_V_I64(min, max)  {BASE_I64, (min), (max), NULL, 0}
#define BASE_V_U64            {BASE_U64, 0, 0, NULL, 0}
#define BASE_V_DBL(min, max)  {BASE_DBL, (min), (max), NULL, 0}
#define BASE_V_STR(size)      {BASE_STR, 0, 0, NULL, (size)}
#define BASE_V_CHOICE(names)  {BASE_CHOICE, 0, 0, (names), 0}
/* clang-format on */

/* Parses text into *dst (of the kind's type). 0 on success; -1 when the
 * text is not such a value (nothing is written); -2 when out of memory. */
BASE_API int base_value_parse(const base_value_t *v, const char *text, void *dst);

/* What a value must be, for messages: "an integer in [1, 64]", "one of f32,
 * csv", "text of at most 255 bytes". */
BASE_API void base_value_expected(const base_value_t *v, char *buf, size_t size);

/* The value at src as text (integers in decimal, doubles "%.9g", a choice's
 * name, a string as it is, "" for a NULL one). LS_ERR_INVALID_ARG when buf
 * is too small. */
BASE_API ls_err_t base_value_format(const base_value_t *v, const void *src, char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* Tables of keys                                                            */

/* A key of a settings struct: its name, one line of help, where its field
 * is and how it is read, its default as text (NULL: the field's zero) and
 * flags that the table's owner defines (what the key is, where it may
 * change). */
typedef struct base_key_s {
  const char *name;
  const char *help; /* may be NULL */
  size_t offset;    /* of the field in the settings struct */
  base_value_t value;
  const char *def; /* NULL: zero (an empty string, the first choice, 0) */
  unsigned flags;
} base_key_t;

/* The key called name in keys [n], or NULL. Dashes and dots in name are
 * read as underscores ("queue-windows", "queue.windows": queue_windows) where
 * the exact name is not in the table. */
BASE_API const base_key_t *base_keys_find(const base_key_t *keys, size_t n, const char *name);

/* Sets every key of keys [n] in settings to its default (its text parsed as
 * the key reads it); fields without a default are left as they are (the
 * caller zeroes the struct first). An error names the key: a table whose
 * default its own value does not accept. */
BASE_API ls_err_t base_keys_defaults(const base_key_t *keys, size_t n, void *settings);

/* Sets k's field of settings from text: LS_ERR_INVALID_ARG with
 * "NAME: 'TEXT' is not <expected>", LS_ERR_NOMEM. */
BASE_API ls_err_t base_key_set(const base_key_t *k, void *settings, const char *text);

/* Checks k's field of settings: a value base_value_parse could have given
 * (in range, a valid choice, a string that fits), else LS_ERR_INVALID_ARG with
 * "NAME: VALUE is not <expected>". */
BASE_API ls_err_t base_key_check(const base_key_t *k, const void *settings);

/* k's field of settings as text (base_value_format). */
BASE_API ls_err_t base_key_get(const base_key_t *k, const void *settings, char *buf, size_t size);

#endif /* LSTREAM_BASE_VALUE_H */
