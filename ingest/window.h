/*
 * What ingest/window.c shares with the rest of ingest/ (internal): the
 * check of a series in flight, so that ls_ingest_conf_restore refuses a bad
 * one when it is added, with the windower's message.
 */
#ifndef LSTREAM_INGEST_WINDOW_H
#define LSTREAM_INGEST_WINDOW_H

#include "lstream/ingest.h"

/* LS_ERR_INVALID_ARG, naming fn and what is wrong, unless s is a series in
 * flight: a key of 1..LS_KEY_MAX bytes, rows >= 1 with their arrays and
 * ascending offsets, a partition and a window index >= 0. */
ls_err_t window_inflight_check(const ls_inflight_t *s, const char *fn);

#endif /* LSTREAM_INGEST_WINDOW_H */
