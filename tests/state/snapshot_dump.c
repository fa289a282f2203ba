/*
 * snapshot_dump: makes a small multi-rank snapshot from a real engine and
 * writes what PyTorch should compute from its export, for
 * tests/state/export_test.py.
 *
 *   snapshot_dump --dir DIR --out PREFIX [--world W]
 *
 * What it does, on the CPU engine (I = 3, H = 16, L = 2, O = 3):
 *   1. ls_engine_init_params(5); 9 series (keys with a NUL, a quote, a
 *      backslash and bytes >= 0x80 among them) in partitions 0..4; three
 *      training steps of windows of T = 4 over all of them (forward,
 *      backward, Adam), their states scattered to the series table;
 *   2. a snapshot of W ranks in DIR (rank r: the series and partitions p
 *      with p % W == r; rank 0 also the model), committed;
 *   3. one more step T = 1 on new inputs x from every series' state
 *      (ls_engine_set_state + ls_engine_forward), giving predictions pred.
 * Output, in the order the states export lists the series (rank by rank,
 * each rank's series in table order):
 *   PREFIX.json  {"S", "I", "H", "L", "O", "keys_hex": [...], "partitions": [...]}
 *   PREFIX.bin   x [1, S, I] then pred [1, S, O], float32 little-endian
 * Exit status: 0 on success, 1 on an error (message on stderr), 2 on a
 * usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lstream/state.h"

enum { I = 3, H = 16, L = 2, O = 3, S = 9, T = 4, PARTS = 5 };

static int fail(const char *what) {
  fprintf(stderr, "snapshot_dump: %s: %s\n", what, ls_last_error());
  return 1;
}

static void fill(float *v, size_t n, uint32_t *s) {
  for (size_t i = 0; i < n; i++) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    v[i] = (float)((double)*s / 4294967296.0 - 0.5);
  }
}

/* The series' keys: some text, some binary. */
static size_t key_of(int i, char *key) {
  static const char *const keys[S] = {
      "AAPL", "MSFT", "a\"quote", "back\\slash", "nul\0inside", "\xff\x80\x01", "k6", "k7", "k8"};
  static const size_t lens[S] = {4, 4, 7, 10, 10, 3, 2, 2, 2};
  memcpy(key, keys[i], lens[i]);
  return lens[i];
}

/* Trains three steps on all series, leaving their states in tab. */
static ls_err_t train(ls_engine_t *eng, ls_series_table_t *tab, int64_t *slots) {
  float x[T * S * I], y[T * S * O];
  uint32_t s = 77;
  ls_optim_t opt;
  ls_optim_init(&opt);
  ls_err_t err = LS_OK;
  for (int step = 0; step < 3 && err == LS_OK; step++) {
    fill(x, sizeof x / sizeof x[0], &s);
    fill(y, sizeof y / sizeof y[0], &s);
    double loss = 0.0, count = 0.0;
    err = ls_engine_gather_state(eng, ls_series_table_states(tab), S, slots);
    if (err == LS_OK) err = ls_engine_forward(eng, T, S, x, y, NULL, &loss, &count);
    if (err == LS_OK) err = ls_engine_backward(eng, (float)(1.0 / count));
    if (err == LS_OK) err = ls_engine_optimizer_step(eng, &opt, 1.0f, NULL);
    if (err == LS_OK) err = ls_engine_scatter_state(eng, ls_series_table_states(tab), S, slots);
    for (int i = 0; i < S && err == LS_OK; i++)
      err = ls_series_table_trained(tab, slots[i], T, 10 * step + i);
  }
  return err;
}

/* Writes every rank's part and commits; order[] receives the table slots
 * in export order. */
static ls_err_t snapshot(ls_engine_t *eng, ls_series_table_t *tab, const char *dir, int world,
                         int64_t *order) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  ls_shape_t const shape = {I, H, L, O};
  size_t const row = (size_t)L * H;
  float *const h = malloc(sizeof(float) * S * row), *const c = malloc(sizeof(float) * S * row);
  ls_err_t err = h && c ? ls_state_table_read(ls_series_table_states(tab), 0, S, h, c)
                        : ls_error_set(LS_ERR_NOMEM, "no memory");
  int n = 0;
  for (int r = 0; r < world && err == LS_OK; r++) {
    ls_snapshot_t *snap = NULL;
    ls_snapshot_info_t const info = {3, 5, 0x1234, world, r, 0};
    err = ls_snapshot_new(&shape, S, PARTS, &snap);
    if (err == LS_OK) err = ls_snapshot_set_info(snap, &info);
    if (err == LS_OK && r == 0) err = ls_snapshot_set_engine(snap, eng);
    for (int64_t slot = 0; slot < S && err == LS_OK; slot++) {
      ls_series_info_t si;
      err = ls_series_table_info(tab, slot, &si);
      if (err != LS_OK || si.partition % world != r) continue;
      err = ls_snapshot_add_series(snap, &si, h + slot * row, c + slot * row);
      order[n++] = slot;
    }
    for (int p = r; p < PARTS && err == LS_OK; p += world)
      err = ls_snapshot_add_partition(snap, p, 100 + p);
    if (err == LS_OK) err = ls_snapshot_write_shard(snap, dir, &conf);
    ls_snapshot_destroy(snap);
  }
  if (err == LS_OK) err = ls_snapshot_commit(dir, 3, world, 2);
  free(h);
  free(c);
  return err;
}

/* One step T = 1 from every series' state, in export order. */
static ls_err_t predict(ls_engine_t *eng, ls_series_table_t *tab, const int64_t *order, float *x,
                        float *pred) {
  float hs[S * L * H], cs[S * L * H], h0[L * S * H], c0[L * S * H];
  LS_FORWARD_IF_ERROR(ls_state_table_read(ls_series_table_states(tab), 0, S, hs, cs));
  for (int b = 0; b < S; b++) /* [S, L, H] rows -> [L, B, H] */
    for (int l = 0; l < L; l++) {
      memcpy(h0 + ((size_t)l * S + b) * H, hs + ((size_t)order[b] * L + l) * H, H * sizeof(float));
      memcpy(c0 + ((size_t)l * S + b) * H, cs + ((size_t)order[b] * L + l) * H, H * sizeof(float));
    }
  uint32_t s = 99;
  fill(x, S * I, &s);
  LS_FORWARD_IF_ERROR(ls_engine_set_state(eng, S, h0, c0));
  LS_FORWARD_IF_ERROR(ls_engine_forward(eng, 1, S, x, NULL, NULL, NULL, NULL));
  return ls_engine_read_outputs(eng, NULL, pred, NULL, NULL);
}

static int write_expected(const char *prefix, ls_series_table_t *tab, const int64_t *order,
                          const float *x, const float *pred) {
  char path[4096];
  snprintf(path, sizeof path, "%s.json", prefix);
  FILE *f = fopen(path, "w");
  if (f == NULL) return fail(path);
  fprintf(f, "{\"S\": %d, \"I\": %d, \"H\": %d, \"L\": %d, \"O\": %d, \"keys_hex\": [", S, I, H, L,
          O);
  for (int b = 0; b < S; b++) {
    ls_series_info_t si;
    ls_series_table_info(tab, order[b], &si);
    fprintf(f, "%s\"", b ? ", " : "");
    for (size_t k = 0; k < si.key_len; k++)
      fprintf(f, "%02x", (unsigned char)si.key[k]);
    fprintf(f, "\"");
  }
  fprintf(f, "], \"partitions\": [");
  for (int b = 0; b < S; b++) {
    ls_series_info_t si;
    ls_series_table_info(tab, order[b], &si);
    fprintf(f, "%s%d", b ? ", " : "", (int)si.partition);
  }
  fprintf(f, "]}\n");
  if (fclose(f) != 0) return fail(path);
  snprintf(path, sizeof path, "%s.bin", prefix);
  f = fopen(path, "wb");
  if (f == NULL) return fail(path);
  int const ok =
      fwrite(x, sizeof(float), S * I, f) == S * I && fwrite(pred, sizeof(float), S * O, f) == S * O;
  if (fclose(f) != 0 || !ok) return fail(path);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  int world = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!strcmp(argv[i], "--out"))
      out = argv[i + 1];
    else if (!strcmp(argv[i], "--world"))
      world = atoi(argv[i + 1]);
  }
  if (dir == NULL || out == NULL || world < 1 || world > S || argc % 2 == 0) {
    fprintf(stderr, "usage: snapshot_dump --dir DIR --out PREFIX [--world W (1..%d)]\n", S);
    return 2;
  }
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = (ls_shape_t){I, H, L, O};
  ec.max_batch = S;
  ec.max_window = T;
  ec.threads = 1;
  ls_engine_t *eng = NULL;
  ls_series_table_t *tab = NULL;
  int64_t slots[S], order[S];
  float x[S * I], pred[S * O];
  if (ls_engine_new(&ec, &eng) != LS_OK || ls_engine_init_params(eng, 5) != LS_OK ||
      ls_series_table_new(eng, 4, &tab) != LS_OK)
    return fail("engine");
  for (int i = 0; i < S; i++) {
    char key[16];
    size_t const len = key_of(i, key);
    if (ls_series_table_slot(tab, key, len, i % PARTS, &slots[i]) != LS_OK) return fail("series");
  }
  if (train(eng, tab, slots) != LS_OK) return fail("training");
  if (snapshot(eng, tab, dir, world, order) != LS_OK) return fail("snapshot");
  if (predict(eng, tab, order, x, pred) != LS_OK) return fail("prediction");
  int const rc = write_expected(out, tab, order, x, pred);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  return rc;
}
