/*
 * lstream error codes and messages.
 *
 * Every public lstream function returns an ls_err_t. On failure the library
 * also records a message for the calling thread: ls_last_error() returns it
 * (what failed, with which value, and a hint of the fix). The library never
 * prints and never exits; turning errors into messages and exit codes is the
 * job of the program's driver code in train/.
 */
#ifndef LSTREAM_ERROR_H
#define LSTREAM_ERROR_H

#include "lstream/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ls_err_e {
  LS_OK = 0,
  LS_ERR_INVALID_ARG = 1, /* a null pointer, a size of zero, shapes that do not match */
  LS_ERR_NOMEM = 2,       /* an allocation failed */
  LS_ERR_UNSUPPORTED = 3, /* a feature or device this build or machine lacks */
  LS_ERR_IO = 4,          /* a file could not be read or written */
  LS_ERR_CORRUPT = 5,     /* data failed a format or checksum check */
  LS_ERR_KAFKA = 6,       /* librdkafka reported an error */
  LS_ERR_BACKEND = 7,     /* the compute backend (BLAS, CUDA) failed */
  LS_ERR_STATE = 8,       /* a call out of order (e.g. backward before forward) */
  LS_ERR_UNKNOWN_KEY = 9, /* a configuration key that does not exist */
  LS_ERR_NOT_FOUND = 10,  /* what was asked for is not there (a snapshot section) */
  LS_ERR__COUNT
} ls_err_t;

/* A short, static description of an error code ("invalid argument"). */
LS_API const char *ls_err2str(ls_err_t err);

/* The message of the last error raised on this thread, or "" if none. The
 * string stays valid until the next lstream call on this thread. */
LS_API const char *ls_last_error(void);

/* Records a message for the calling thread and returns err, so that library
 * code can write `return ls_error_set(LS_ERR_INVALID_ARG, "...", ...)`.
 * Used by lstream's own modules; applications do not need it. */
LS_API ls_err_t ls_error_set(ls_err_t err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears the calling thread's message. */
LS_API void ls_error_clear(void);

/* One-line checks that keep error paths short (after zstd's RETURN_ERROR_IF). */
#define LS_RETURN_IF(cond, err, ...)                                                               \
  do {                                                                                             \
    if (cond) return ls_error_set(err, __VA_ARGS__);                                               \
  } while (0)

#define LS_FORWARD_IF_ERROR(expr)                                                                  \
  do {                                                                                             \
    ls_err_t const ls_e_ = (expr);                                                                 \
    if (ls_e_ != LS_OK) return ls_e_;                                                              \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_ERROR_H */
