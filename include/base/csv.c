/*
 * CSV fields (include/base/csv.h).
 */
#include "base/csv.h"

#include <stdlib.h>

#include "lstream/error.h"

/* The length of the valid UTF-8 sequence at p (left bytes from p), or 0
 * when the byte at p starts none (NUL counts as none: it is escaped). */
static size_t utf8_len(const unsigned char *p, size_t left) {
  unsigned char const c = p[0];
  if (c == 0) return 0;
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
  else
    return 0;
  if (left < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return len;
}

int base_csv_field(FILE *f, const void *s, size_t n) {
  if (f == NULL || (s == NULL && n > 0)) return -1;
  const unsigned char *const b = s;
  int quote = 0;
  for (size_t i = 0; i < n && !quote; i++)
    quote = b[i] == ',' || b[i] == '"' || b[i] == '\r' || b[i] == '\n';
  if (quote) fputc('"', f);
  for (size_t i = 0; i < n;) {
    size_t const len = utf8_len(b + i, n - i);
    if (len == 0) {
      fprintf(f, "\\x%02x", b[i]);
      i++;
      continue;
    }
    if (b[i] == '\\') fputc('\\', f);
    if (b[i] == '"') fputc('"', f);
    fwrite(b + i, 1, len, f);
    i += len;
  }
  if (quote) fputc('"', f);
  return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */

/* Appends byte c to the record's buffer. */
static int put(base_csv_reader_t *r, size_t *len, char c) {
  if (*len == r->cap) {
    size_t const cap = r->cap ? 2 * r->cap : 256;
    char *const b = realloc(r->buf, cap);
    if (b == NULL) return -1;
    r->buf = b, r->cap = cap;
  }
  r->buf[(*len)++] = c;
  return 0;
}

/* Starts a field at len. */
static int start_field(base_csv_reader_t *r, size_t len) {
  if (r->n == r->cap_at) {
    size_t const cap = r->cap_at ? 2 * r->cap_at : 16;
    size_t *const a = realloc(r->at, cap * sizeof *a);
    if (a == NULL) return -1;
    r->at = a, r->cap_at = cap;
  }
  r->at[r->n++] = len;
  return 0;
}

ls_err_t base_csv_next(base_csv_reader_t *r, FILE *f, int *got) {
  LS_RETURN_IF(r == NULL || f == NULL || got == NULL, LS_ERR_INVALID_ARG,
               "base_csv_next: r, f or got is NULL");
  *got = 0;
  if (r->next_line == 0) r->next_line = 1;
  r->line = r->next_line;
  r->n = 0;
  size_t len = 0;
  int c = getc(f), quoted = 0;
  if (c == EOF) {
    LS_RETURN_IF(ferror(f), LS_ERR_IO, "line %lld: read error", (long long)r->line);
    return LS_OK;
  }
  int bad = start_field(r, 0);
  for (; !bad; c = getc(f)) {
    if (c == EOF) {
      LS_RETURN_IF(quoted, LS_ERR_INVALID_ARG,
                   "line %lld: a quoted field is not closed at the end of the file",
                   (long long)r->line);
      break;
    }
    if (c == '\n') r->next_line++;
    if (quoted && c == '"') {
      int const d = getc(f);
      if (d == '"') {
        bad = put(r, &len, '"');
        continue;
      }
      quoted = 0;
      if (d != EOF) ungetc(d, f);
    } else if (quoted) {
      bad = put(r, &len, (char)c);
    } else if (c == '"') {
      quoted = 1;
    } else if (c == ',') {
      bad = put(r, &len, '\0') || start_field(r, len);
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      bad = put(r, &len, (char)c);
    }
  }
  LS_RETURN_IF(bad || put(r, &len, '\0'), LS_ERR_NOMEM, "no memory for a CSV record of %zu bytes",
               len);
  LS_RETURN_IF(ferror(f), LS_ERR_IO, "line %lld: read error", (long long)r->line);
  *got = 1;
  return LS_OK;
}

const char *base_csv_get(const base_csv_reader_t *r, size_t i) {
  return r != NULL && i < r->n ? r->buf + r->at[i] : "";
}

void base_csv_reader_free(base_csv_reader_t *r) {
  if (r == NULL) return;
  free(r->buf), free(r->at);
  *r = (base_csv_reader_t){0};
}
