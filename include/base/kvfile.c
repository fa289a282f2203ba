/*
 * KEY = VALUE files (include/base/kvfile.h).
 */
#include "base/kvfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Trims blanks from both ends of s[0..*n) in place; returns the start. */
static char *trim(char *s, size_t *n) {
  while (*n > 0 &&
         (s[*n - 1] == ' ' || s[*n - 1] == '\t' || s[*n - 1] == '\r' || s[*n - 1] == '\n'))
    (*n)--;
  while (*n > 0 && (*s == ' ' || *s == '\t')) {
    s++;
    (*n)--;
  }
  s[*n] = '\0';
  return s;
}

/* One line: a pair for fn, or nothing (blank, comment). */
static ls_err_t kv_line(const char *path, int line_no, char *line, base_kv_fn fn, void *opaque) {
  size_t n = strlen(line);
  char *const text = trim(line, &n);
  if (n == 0 || text[0] == '#') return LS_OK;
  char *const eq = strchr(text, '=');
  LS_RETURN_IF(eq == NULL, LS_ERR_INVALID_ARG, "%s:%d: expected key=value, got '%.80s'", path,
               line_no, text);
  size_t key_n = (size_t)(eq - text), value_n = n - key_n - 1;
  char *const key = trim(text, &key_n);
  LS_RETURN_IF(key_n == 0, LS_ERR_INVALID_ARG, "%s:%d: expected key=value, the key is empty", path,
               line_no);
  ls_err_t const err = fn(opaque, key, trim(eq + 1, &value_n));
  if (err != LS_OK) {
    char detail[768];
    snprintf(detail, sizeof detail, "%s", ls_last_error());
    return ls_error_set(err, "%s:%d: %s", path, line_no, detail);
  }
  return LS_OK;
}

/* The checks of one raw line of n bytes (its newline included) before it
 * is parsed: a NUL byte would hide the rest of the line, and a line past
 * the bound is refused whole rather than cut. */
static ls_err_t kv_raw_line(const char *path, int line_no, const char *line, size_t n) {
  size_t body = n;
  if (body > 0 && line[body - 1] == '\n') body--;
  if (body > 0 && line[body - 1] == '\r') body--;
  LS_RETURN_IF(body > BASE_KV_LINE_MAX, LS_ERR_INVALID_ARG,
               "%s:%d: the line is longer than %d bytes (%zu)", path, line_no, BASE_KV_LINE_MAX,
               body);
  LS_RETURN_IF(memchr(line, '\0', n) != NULL, LS_ERR_INVALID_ARG,
               "%s:%d: the line holds a NUL byte (at byte %zu): is this a text file?", path,
               line_no, (size_t)((const char *)memchr(line, '\0', n) - line) + 1);
  return LS_OK;
}

ls_err_t base_kv_read(const char *path, const char *what, base_kv_fn fn, void *opaque) {
  LS_RETURN_IF(path == NULL || fn == NULL, LS_ERR_INVALID_ARG, "path or fn is NULL");
  FILE *const f = fopen(path, "r");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot open %s %s: %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return ls_error_set(LS_ERR_IO, "cannot read %s %s: it is a directory", what, path);
  }
  char *line = NULL;
  size_t cap = 0;
  int line_no = 0;
  ls_err_t err = LS_OK;
  ssize_t n;
  while (err == LS_OK && (n = getline(&line, &cap, f)) >= 0) {
    err = kv_raw_line(path, ++line_no, line, (size_t)n);
    if (err == LS_OK) err = kv_line(path, line_no, line, fn, opaque);
  }
  if (err == LS_OK && ferror(f))
    err = ls_error_set(LS_ERR_IO, "cannot read %s %s after line %d: %s", what, path, line_no,
                       strerror(errno));
  free(line);
  fclose(f);
  return err;
}
