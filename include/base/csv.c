/*
 * CSV fields (include/base/csv.h).
 */
#include "base/csv.h"

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
