/*
 * Each partition's mark in a snapshot (train/snapshots.h): the last record
 * the consumer read of it (ls_ingest_mark_t), kept so that a resume knows
 * the topic again. The consumer checks it (ls_ingest_conf_set_mark): a
 * topic deleted and re-created under a snapshot directory counts its
 * offsets from 0 again, and the snapshot's offsets are then another
 * topic's.
 *
 * Section LS_SNAPSHOT_SECTION_MARKS, optional (an earlier lstream skips
 * it; a snapshot without it resumes with its offsets checked against the
 * watermarks only), version 1: n u32, 0 u32, then n entries of 32 bytes:
 * partition i32, 0 u32, offset i64, time i64, digest u64. Each shard keeps
 * its own partitions' (a resume on another world reads rank 0's: the
 * partitions of the other ranks' shards are checked against the
 * watermarks only).
 */
#include <stdlib.h>
#include <string.h>

#include "snapshots.h"

enum { MARKS_VERSION = 1, MARK_BYTES = 32 };

ls_err_t train_marks_put(ls_snapshot_t *snap, int n, const int32_t *parts,
                         const ls_ingest_mark_t *marks) {
  LS_RETURN_IF(snap == NULL || n < 0 || (n > 0 && (parts == NULL || marks == NULL)),
               LS_ERR_INVALID_ARG, "train_marks_put: snap, and parts and marks for n=%d", n);
  size_t const bytes = 8 + (size_t)n * MARK_BYTES;
  uint8_t *const b = calloc(1, bytes);
  LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for %d partitions' marks", n);
  uint32_t const count = (uint32_t)n;
  memcpy(b, &count, 4);
  for (int i = 0; i < n; i++) {
    uint8_t *const e = b + 8 + (size_t)i * MARK_BYTES;
    memcpy(e, &parts[i], 4);
    memcpy(e + 8, &marks[i].offset, 8);
    memcpy(e + 16, &marks[i].time, 8);
    memcpy(e + 24, &marks[i].digest, 8);
  }
  ls_err_t const err =
      ls_snapshot_put_section(snap, LS_SNAPSHOT_SECTION_MARKS, MARKS_VERSION, 0, b, bytes);
  free(b);
  return err;
}

ls_err_t train_marks_get(const ls_snapshot_t *snap, int32_t partition, ls_ingest_mark_t *out) {
  LS_RETURN_IF(snap == NULL || out == NULL, LS_ERR_INVALID_ARG, "train_marks_get: snap or out");
  *out = (ls_ingest_mark_t){-1, -1, 0};
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  if (ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_MARKS, &version, &data, &bytes) != LS_OK)
    return LS_OK; /* written before marks were kept */
  const uint8_t *const b = data;
  uint32_t n = 0;
  if (bytes >= 8) memcpy(&n, b, 4);
  LS_RETURN_IF(version != MARKS_VERSION || bytes < 8 || bytes != 8 + (size_t)n * MARK_BYTES,
               LS_ERR_CORRUPT,
               "the snapshot's partition marks are of version %u and %zu bytes, not version %d "
               "of %u entries",
               version, bytes, MARKS_VERSION, n);
  for (uint32_t i = 0; i < n; i++) {
    const uint8_t *const e = b + 8 + (size_t)i * MARK_BYTES;
    int32_t p = 0;
    memcpy(&p, e, 4);
    if (p != partition) continue;
    memcpy(&out->offset, e + 8, 8);
    memcpy(&out->time, e + 16, 8);
    memcpy(&out->digest, e + 24, 8);
    LS_RETURN_IF(out->offset < -1 || out->time < -1, LS_ERR_CORRUPT,
                 "the snapshot's mark of partition %d holds offset %lld, time %lld", (int)partition,
                 (long long)out->offset, (long long)out->time);
    return LS_OK;
  }
  return LS_OK;
}
