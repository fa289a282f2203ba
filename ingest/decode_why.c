/*
 * What decode.c and the formats' files share (ingest/decode.h), in a file
 * of its own, since the files of a folder may not use each other in a
 * cycle: a decoder's reason for its last rejection, ISO 8601 text of a time.
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "decode.h"

ls_reject_t decode_why(ls_decoder_t *d, ls_reject_t reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof d->why, fmt, ap);
  va_end(ap);
  return reason;
}

void decode_iso8601(int64_t ms, char *buf) {
  time_t const secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  size_t const n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}
