/*
 * lstream state: the series table. Every series (a Kafka message key) gets a
 * slot for the life of the table; its hidden state (h, c) lives in the
 * engine's memory at that slot (ls_state_table_t, kernels.h), and the table
 * counts what of it has been trained: windows, target records, and the
 * offset of the last record trained.
 */
#ifndef LSTREAM_STATE_H
#define LSTREAM_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"
#include "lstream/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ls_series_table_s ls_series_table_t;

/* What the table knows of one series. */
typedef struct ls_series_info_s {
  const char *key;     /* key_len bytes, NUL-terminated; owned by the table */
  size_t key_len;
  int32_t partition;   /* the partition it was first seen on */
  int64_t slot;        /* its row in the state table */
  int64_t windows;     /* windows trained */
  int64_t records;     /* target records trained (each record but a series' first) */
  int64_t last_offset; /* offset of the last record trained; -1 before any */
} ls_series_info_t;

/* Creates a table whose states live in eng's memory, with room for
 * `initial` series before it first grows (growth keeps every state). */
ls_err_t ls_series_table_new(ls_engine_t *eng, size_t initial, ls_series_table_t **out);

/* Frees the table and its states; accepts NULL. */
void ls_series_table_destroy(ls_series_table_t *tab);

/* The slot of a series, adding it (with a zero state) when new.
 * key: 1..255 bytes. */
ls_err_t ls_series_table_slot(ls_series_table_t *tab, const void *key, size_t key_len,
                              int32_t partition, int64_t *slot);

/* The slot of a series, or -1 when the table has not seen it. */
ls_err_t ls_series_table_find(const ls_series_table_t *tab, const void *key, size_t key_len,
                              int64_t *slot);

/* Number of series. Slots are 0..count-1 in order of first appearance. */
size_t ls_series_table_count(const ls_series_table_t *tab);

/* Records that a window of `records` target records ending at last_offset
 * was trained for the series at slot. */
ls_err_t ls_series_table_trained(ls_series_table_t *tab, int64_t slot, int64_t records,
                                 int64_t last_offset);

/* What the table knows of the series at slot. */
ls_err_t ls_series_table_info(const ls_series_table_t *tab, int64_t slot, ls_series_info_t *out);

/* The states of every slot, for ls_engine_gather_state / scatter_state. */
ls_state_table_t *ls_series_table_states(ls_series_table_t *tab);

/* A 64-bit FNV-1a digest of every series' key, partition, counts and state
 * bits, in slot order: equal digests mean bit-identical tables. */
ls_err_t ls_series_table_digest(ls_series_table_t *tab, uint64_t *digest);

#ifdef __cplusplus
}
#endif
#endif /* LSTREAM_STATE_H */
