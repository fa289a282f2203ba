/*
 * libFuzzer target for the snapshot file reader (state/snapshot_decode.c).
 * The first input byte picks what the rest is read as: bit 0, a manifest or
 * a shard; bit 1, with every checksum verified (what the library always
 * does) or with checksums skipped, so that mutated content reaches the
 * decoders behind them. Decoding may allocate at most 64 MiB. Checked on
 * every input:
 *   - the reader never reads or writes outside its buffers (ASan), never
 *     overflows (UBSan), and fails only with LS_ERR_CORRUPT (LS_ERR_NOMEM
 *     within the cap cannot happen);
 *   - an accepted shard is consistent: every key lies in the key bytes and
 *     ends with a NUL, counts and partitions are in range;
 *   - round trip: an accepted shard, written again and read back (checksums
 *     verified), gives the same content bit for bit.
 * Seeds: files of a real snapshot (tests/state/snapshot_dump) with the
 * mode byte in front; see tests/fuzz/CMakeLists.txt.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapshot_format.h"

#define MAX_ALLOC (64u << 20)

static void finding(const char *what) {
  fprintf(stderr, "fuzz_snapshot_read: %s (%s)\n", what, ls_last_error());
  abort();
}

/* Every series, key and partition of s can be read, and holds legal values. */
static void check_content(const ls_snapshot_t *s) {
  ls_shape_t shape;
  ls_snapshot_get_shape(s, &shape);
  size_t const row = (size_t)shape.num_layers * shape.hidden_size;
  volatile float sink = 0.0f;
  for (size_t i = 0; i < ls_snapshot_series_count(s); i++) {
    ls_series_info_t si;
    const float *h, *c;
    if (ls_snapshot_get_series(s, i, &si, &h, &c) != LS_OK) finding("a series cannot be read");
    if (si.key_len < 1 || si.key_len > 255 || si.key[si.key_len] != '\0')
      finding("a key of a bad length or without its NUL");
    if (si.partition < 0 || si.windows < 0 || si.records < 0 || si.last_offset < -1)
      finding("counts out of range");
    sink += h[row - 1] + c[row - 1] + (float)si.key[0];
  }
  for (size_t i = 0; i < ls_snapshot_partition_count(s); i++) {
    int32_t p;
    int64_t off;
    if (ls_snapshot_get_partition(s, i, &p, &off) != LS_OK || p < 0 || off < 0)
      finding("a partition out of range");
  }
  ls_snapshot_model_t m;
  if (ls_snapshot_get_model(s, &m) == LS_OK) sink += m.params[m.n - 1] + m.adam_v[m.n - 1];
  (void)sink;
}

/* Writes s to a file and reads it back: the same content. */
static void round_trip(const ls_snapshot_t *s) {
  static snap_encoder_t *enc;
  static char path[64];
  if (enc == NULL) {
    ls_snapshot_conf_t conf;
    ls_snapshot_conf_init(&conf);
    conf.level = 1;
    snprintf(path, sizeof path, "/tmp/fuzz_snapshot_read.%d", (int)getpid());
    if (snap_encoder_new(&conf, &enc) != LS_OK) finding("no encoder");
  }
  if (snap_write_shard_file(enc, s, path) != LS_OK) finding("an accepted shard cannot be written");
  uint8_t *data = NULL;
  size_t size = 0;
  snap_file_t f;
  ls_snapshot_t *back = NULL;
  snap_limits_t const lim = {0};
  if (snap_read_file(path, &data, &size) != LS_OK ||
      snap_file_parse(data, size, path, SNAP_KIND_SHARD, &lim, &f) != LS_OK ||
      snap_decode_shard(&f, SNAP_DECODE_ALL, &lim, &back) != LS_OK)
    finding("a rewritten shard does not read back");
  size_t const S = ls_snapshot_series_count(s), P = ls_snapshot_partition_count(s);
  if (ls_snapshot_series_count(back) != S || ls_snapshot_partition_count(back) != P)
    finding("round trip changed the counts");
  ls_shape_t shape;
  ls_snapshot_get_shape(s, &shape);
  size_t const row = (size_t)shape.num_layers * shape.hidden_size;
  for (size_t i = 0; i < S; i++) {
    ls_series_info_t a, b;
    const float *ha, *ca, *hb, *cb;
    ls_snapshot_get_series(s, i, &a, &ha, &ca);
    ls_snapshot_get_series(back, i, &b, &hb, &cb);
    if (a.key_len != b.key_len || memcmp(a.key, b.key, a.key_len) || a.partition != b.partition ||
        a.windows != b.windows || a.records != b.records || a.last_offset != b.last_offset ||
        memcmp(ha, hb, row * sizeof(float)) || memcmp(ca, cb, row * sizeof(float)))
      finding("round trip changed a series");
  }
  ls_snapshot_model_t ma, mb;
  if (ls_snapshot_get_model(s, &ma) == LS_OK &&
      (ls_snapshot_get_model(back, &mb) != LS_OK || ma.adam_steps != mb.adam_steps ||
       memcmp(ma.params, mb.params, ma.n * sizeof(float)) ||
       memcmp(ma.adam_m, mb.adam_m, ma.n * sizeof(float))))
    finding("round trip changed the model");
  ls_snapshot_destroy(back);
  free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int const manifest = data[0] & 1;
  snap_limits_t const lim = {.skip_checksums = (data[0] >> 1) & 1, .max_alloc = MAX_ALLOC};
  /* A copy of exactly the file's size, so ASan sees any read past it. */
  size_t const len = size - 1;
  uint8_t *const file = malloc(len ? len : 1);
  memcpy(file, data + 1, len);
  snap_file_t f;
  ls_err_t err = snap_file_parse(file, len, "input",
                                 manifest ? SNAP_KIND_MANIFEST : SNAP_KIND_SHARD, &lim, &f);
  if (err == LS_OK && manifest) {
    ls_snapshot_shard_t *shards = NULL;
    err = snap_decode_manifest(&f, &lim, &shards);
    for (int32_t r = 0; err == LS_OK && r < f.world; r++)
      if (shards[r].size < SNAP_HEADER_BYTES + SNAP_TAIL_BYTES) finding("a shard size too small");
    free(shards);
  } else if (err == LS_OK) {
    ls_snapshot_t *s = NULL;
    err = snap_decode_shard(&f, SNAP_DECODE_ALL, &lim, &s);
    if (err == LS_OK) {
      check_content(s);
      round_trip(s);
    }
    ls_snapshot_destroy(s);
  }
  if (err != LS_OK && err != LS_ERR_CORRUPT) finding("an error other than LS_ERR_CORRUPT");
  free(file);
  return 0;
}
