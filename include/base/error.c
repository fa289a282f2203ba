/*
 * Error codes and the per-thread error message (include/lstream/error.h).
 */
#include "lstream/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char ls_errmsg[1024];

const char *ls_err2str(ls_err_t err) {
  switch (err) {
  case LS_OK: return "success";
  case LS_ERR_INVALID_ARG: return "invalid argument";
  case LS_ERR_NOMEM: return "out of memory";
  case LS_ERR_UNSUPPORTED: return "not supported";
  case LS_ERR_IO: return "I/O error";
  case LS_ERR_CORRUPT: return "corrupt data";
  case LS_ERR_KAFKA: return "Kafka error";
  case LS_ERR_BACKEND: return "compute backend error";
  case LS_ERR_STATE: return "call out of order";
  case LS_ERR_UNKNOWN_KEY: return "unknown configuration key";
  case LS_ERR_NOT_FOUND: return "not found";
  case LS_ERR__COUNT: break;
  }
  return "unknown error code";
}

const char *ls_last_error(void) {
  return ls_errmsg;
}

void ls_error_clear(void) {
  ls_errmsg[0] = '\0';
}

ls_err_t ls_error_set(ls_err_t err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ls_errmsg, sizeof ls_errmsg, fmt, ap);
  va_end(ap);
  return err;
}
