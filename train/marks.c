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
 * watermarks only), version 1: n u32, topic u32 (the topic's partitions
 * the rank knew; 0 in snapshots of before issue 23: unknown), then n
 * entries of 32 bytes: partition i32, 0 u32, offset i64, time i64, digest
 * u64. Each shard keeps its own partitions' (a resume on another world
 * gathers those of its partitions from every shard: train_marks_gather).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshots.h"

enum { MARKS_VERSION = 1, MARK_BYTES = 32 };

ls_err_t train_marks_put(ls_snapshot_t *snap, int n, const int32_t *parts,
                         const ls_ingest_mark_t *marks, int32_t topic) {
  LS_RETURN_IF(snap == NULL || n < 0 || (n > 0 && (parts == NULL || marks == NULL)),
               LS_ERR_INVALID_ARG, "train_marks_put: snap, and parts and marks for n=%d", n);
  size_t const bytes = 8 + (size_t)n * MARK_BYTES;
  uint8_t *const b = calloc(1, bytes);
  LS_RETURN_IF(b == NULL, LS_ERR_NOMEM, "no memory for %d partitions' marks", n);
  uint32_t const count = (uint32_t)n;
  uint32_t const known = topic > 0 ? (uint32_t)topic : 0;
  memcpy(b, &count, 4);
  memcpy(b + 4, &known, 4);
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

/* The marks section of snap: *n entries at *e (none when the snapshot has
 * no section), *topic its count of the topic's partitions. */
static ls_err_t marks_section(const ls_snapshot_t *snap, uint32_t *n, uint32_t *topic,
                              const uint8_t **e) {
  *n = 0, *topic = 0, *e = NULL;
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  if (ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_MARKS, &version, &data, &bytes) != LS_OK)
    return LS_OK; /* written before marks were kept */
  const uint8_t *const b = data;
  uint32_t count = 0;
  if (bytes >= 8) memcpy(&count, b, 4), memcpy(topic, b + 4, 4);
  LS_RETURN_IF(version != MARKS_VERSION || bytes < 8 || bytes != 8 + (size_t)count * MARK_BYTES,
               LS_ERR_CORRUPT,
               "the snapshot's partition marks are of version %u and %zu bytes, not version %d "
               "of %u entries",
               version, bytes, MARKS_VERSION, count);
  *n = count, *e = b + 8;
  return LS_OK;
}

/* Entry i of a marks section: its partition and mark. */
static ls_err_t marks_entry(const uint8_t *e, uint32_t i, int32_t *partition,
                            ls_ingest_mark_t *out) {
  e += (size_t)i * MARK_BYTES;
  memcpy(partition, e, 4);
  memcpy(&out->offset, e + 8, 8);
  memcpy(&out->time, e + 16, 8);
  memcpy(&out->digest, e + 24, 8);
  LS_RETURN_IF(out->offset < -1 || out->time < -1, LS_ERR_CORRUPT,
               "the snapshot's mark of partition %d holds offset %lld, time %lld", (int)*partition,
               (long long)out->offset, (long long)out->time);
  return LS_OK;
}

ls_err_t train_marks_get(const ls_snapshot_t *snap, int32_t partition, ls_ingest_mark_t *out) {
  LS_RETURN_IF(snap == NULL || out == NULL, LS_ERR_INVALID_ARG, "train_marks_get: snap or out");
  *out = (ls_ingest_mark_t){-1, -1, 0};
  uint32_t n = 0, topic = 0;
  const uint8_t *e = NULL;
  LS_FORWARD_IF_ERROR(marks_section(snap, &n, &topic, &e));
  for (uint32_t i = 0; i < n; i++) {
    int32_t p = -1;
    ls_ingest_mark_t m;
    LS_FORWARD_IF_ERROR(marks_entry(e, i, &p, &m));
    if (p == partition) {
      *out = m;
      return LS_OK;
    }
  }
  return LS_OK;
}

ls_err_t train_marks_topic(const ls_snapshot_t *snap, int32_t *topic) {
  LS_RETURN_IF(snap == NULL || topic == NULL, LS_ERR_INVALID_ARG, "train_marks_topic: snap, topic");
  uint32_t n = 0, known = 0;
  const uint8_t *e = NULL;
  LS_FORWARD_IF_ERROR(marks_section(snap, &n, &known, &e));
  *topic = known <= INT32_MAX ? (int32_t)known : 0;
  return LS_OK;
}

/* Adds the marks of shard `shard` of man whose partitions p have p % world
 * == rank to parts, marks (*n of them, room grown), and its count of the
 * topic's partitions to *topic (the largest). */
static ls_err_t gather_shard(const ls_snapshot_manifest_t *man, int shard, int world, int rank,
                             int32_t **parts, ls_ingest_mark_t **marks, int *n, int *cap,
                             int32_t *topic) {
  ls_snapshot_t *part = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_load_sections(man, shard, &part));
  uint32_t count = 0, known = 0;
  const uint8_t *e = NULL;
  ls_err_t err = marks_section(part, &count, &known, &e);
  if (err == LS_OK && known <= INT32_MAX && (int32_t)known > *topic) *topic = (int32_t)known;
  for (uint32_t i = 0; i < count && err == LS_OK; i++) {
    int32_t p = -1;
    ls_ingest_mark_t m;
    err = marks_entry(e, i, &p, &m);
    if (err != LS_OK || p % world != rank) continue;
    if (*n == *cap) {
      int const grown = *cap ? 2 * *cap : 64;
      int32_t *const gp = realloc(*parts, (size_t)grown * sizeof *gp);
      if (gp != NULL) *parts = gp;
      ls_ingest_mark_t *const gm = realloc(*marks, (size_t)grown * sizeof *gm);
      if (gm != NULL) *marks = gm;
      if (gp == NULL || gm == NULL) {
        err = ls_error_set(LS_ERR_NOMEM, "no memory for %d partitions' marks", grown);
        break;
      }
      *cap = grown;
    }
    (*parts)[*n] = p, (*marks)[(*n)++] = m;
  }
  ls_snapshot_destroy(part);
  return err;
}

ls_err_t train_marks_gather(const char *path, ls_snapshot_t *snap, int world, int rank) {
  LS_RETURN_IF(path == NULL || snap == NULL || world < 1 || rank < 0 || rank >= world,
               LS_ERR_INVALID_ARG, "train_marks_gather: path, snap, rank %d of world %d", rank,
               world);
  ls_snapshot_manifest_t *man = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_manifest_read(path, &man));
  int64_t step = 0;
  int32_t written = 0, topic = 0;
  int32_t *parts = NULL;
  ls_ingest_mark_t *marks = NULL;
  int n = 0, cap = 0;
  ls_err_t err = ls_snapshot_manifest_get(man, &step, &written);
  for (int r = 0; r < written && err == LS_OK; r++)
    err = gather_shard(man, r, world, rank, &parts, &marks, &n, &cap, &topic);
  /* Only when the shards kept marks (a snapshot of before keeps none). */
  uint32_t version = 0;
  const void *data = NULL;
  size_t bytes = 0;
  int const any =
      ls_snapshot_get_section(snap, LS_SNAPSHOT_SECTION_MARKS, &version, &data, &bytes) == LS_OK;
  if (err == LS_OK && (any || n > 0)) err = train_marks_put(snap, n, parts, marks, topic);
  free(parts), free(marks);
  ls_snapshot_manifest_destroy(man);
  return err;
}
