/*
 * A decoder's reason for its last rejection (ingest/decode.h: decode_why),
 * in a file of its own: decode.c and the formats' files all set it, and
 * the files of a folder may not use each other in a cycle.
 */
#include <stdarg.h>
#include <stdio.h>

#include "decode.h"

ls_reject_t decode_why(ls_decoder_t *d, ls_reject_t reason, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->why, sizeof d->why, fmt, ap);
  va_end(ap);
  return reason;
}
