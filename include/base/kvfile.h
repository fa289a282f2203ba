/*
 * KEY = VALUE files: lstream train's --config FILE and the --kafka-config
 * FILE of every command that talks to Kafka (kcat -F's format).
 */
#ifndef LSTREAM_BASE_KVFILE_H
#define LSTREAM_BASE_KVFILE_H

#include "base/api.h"
#include "lstream/error.h"

/* The longest line a KEY = VALUE file may hold, in bytes, its line end
 * aside. */
#define BASE_KV_LINE_MAX 4095

/* Called for each pair of a file; an error it returns (with its message)
 * stops the reading. */
typedef ls_err_t (*base_kv_fn)(void *opaque, const char *key, const char *value);

/* Reads path: one KEY = VALUE a line, blanks (spaces, tabs) around the key
 * and the value ignored, the value everything after the first '=' (it may
 * hold '='), lines that are empty or start with '#' skipped, "\r\n" line
 * ends accepted. Calls fn for each pair in file order. Errors name the file
 * and the line ("PATH:LINE: expected key=value, got '...'", or
 * "PATH:LINE: " + fn's message); `what` names the file when it cannot be
 * opened or read ("cannot open WHAT PATH: reason"). Refused, with nothing
 * of the offending line applied (the lines before it were): a directory, a
 * line longer than BASE_KV_LINE_MAX bytes, a line holding a NUL byte. */
BASE_API ls_err_t base_kv_read(const char *path, const char *what, base_kv_fn fn, void *opaque);

#endif /* LSTREAM_BASE_KVFILE_H */
