/*
 * What ingest/window.c shares with the rest of ingest/ (internal): the
 * check of a skip rule's arguments, so that ls_ingest_conf_skip_series
 * refuses a bad rule when it is added, with the windower's message.
 */
#ifndef LSTREAM_INGEST_WINDOW_H
#define LSTREAM_INGEST_WINDOW_H

#include "lstream/ingest.h"

/* LS_ERR_INVALID_ARG, naming what is wrong, unless key [key_len] is a
 * series key (1..LS_KEY_MAX bytes) and partition, below and next_index are
 * not negative. */
ls_err_t window_skip_check(const void *key, size_t key_len, int32_t partition, int64_t below,
                           int64_t next_index);

#endif /* LSTREAM_INGEST_WINDOW_H */
