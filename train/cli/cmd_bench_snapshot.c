/*
 * `lstream bench snapshot`: size and speed of snapshots of many series'
 * states, with and without byte shuffling, at a few zstd levels. The
 * states are real: each series' (h, c) after a short window through a
 * freshly initialised engine, filled into the snapshot the way the trainer
 * does it (ls_snapshot_set_engine + ls_snapshot_add_series_table).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli.h"
#include "lstream/state.h"

#define MAX_LEVELS 8
#define CHUNK      1000 /* series per forward while making states */
#define PARTITIONS 64

typedef struct bench_s {
  int series, I, H, L, T, threads, workers;
  int levels[MAX_LEVELS], n_levels;
  const char *dir;
} bench_t;

#define ABOUT                                                                                      \
  "Makes N series' states by running a window of T random-walk steps per series\n"                 \
  "through an engine (I inputs, H hidden, L layers, O = I), fills a snapshot from\n"               \
  "the engine and series table as the trainer does, then writes (shard + commit,\n"                \
  "fsync included) and loads it back at each level, without and with byte\n"                       \
  "shuffling, and prints one line per configuration:\n"                                            \
  "  snapshot series=.. H=.. L=.. level=.. shuffle=0|1 workers=.. raw_mb=..\n"                     \
  "           file_mb=.. ratio=.. write_s=.. write_mb_s=.. load_s=.. load_mb_s=..\n"               \
  "(MB/s of raw content). The files go to DIR, emptied of its snapshots as it goes.\n"

/* --levels A,B,..: zstd levels. */
static int parse_levels(void *opaque, const char *text) {
  bench_t *const b = opaque;
  static const base_value_t level = BASE_V_INT(LS_SNAPSHOT_LEVEL_MIN, 22);
  char *copy = strdup(text), *save = NULL;
  int bad = copy == NULL;
  b->n_levels = 0;
  for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && !bad;
       t = strtok_r(NULL, ",", &save))
    bad = b->n_levels == MAX_LEVELS ||
          base_value_parse(&level, t, &b->levels[b->n_levels++]) != 0 ||
          b->levels[b->n_levels - 1] == 0;
  free(copy);
  if (bad || b->n_levels == 0)
    return cli_usage_error("bench snapshot",
                           "--levels '%s': expected 1 to %d zstd levels (%d..-1: "
                           "fast, 1..22), separated by commas",
                           text, MAX_LEVELS, LS_SNAPSHOT_LEVEL_MIN);
  return CLI_EXIT_OK;
}

/* Random-walk inputs x [T, B, I]. */
static void walk(float *x, int T, int B, int I, uint32_t *s) {
  for (int b = 0; b < B; b++)
    for (int i = 0; i < I; i++) {
      float v = 0.0f;
      for (int t = 0; t < T; t++) {
        *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
        v += (float)((double)*s / 4294967296.0 - 0.5) * 0.2f;
        x[((size_t)t * B + b) * I + i] = v;
      }
    }
}

/* Runs every series through a window and one update, leaving its state in
 * the table (the trainer's state after one window per series). */
static ls_err_t make_states(const bench_t *b, ls_engine_t *eng, ls_series_table_t *tab) {
  float *const x = malloc(sizeof(float) * (size_t)b->T * CHUNK * (size_t)b->I);
  int64_t *const slots = malloc(sizeof(int64_t) * CHUNK);
  ls_err_t err = x && slots ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for inputs");
  uint32_t s = 12345;
  ls_optim_t opt;
  ls_optim_init(&opt);
  for (int first = 0; first < b->series && err == LS_OK; first += CHUNK) {
    int const B = b->series - first < CHUNK ? b->series - first : CHUNK;
    for (int k = 0; k < B && err == LS_OK; k++) {
      char key[32];
      int const n = snprintf(key, sizeof key, "sym-%07d", first + k);
      err = ls_series_table_slot(tab, key, (size_t)n, (first + k) % PARTITIONS, &slots[k]);
    }
    walk(x, b->T, B, b->I, &s);
    double loss = 0.0, count = 0.0;
    int const update = first == 0; /* one update: non-zero Adam moments */
    if (err == LS_OK) err = ls_engine_gather_state(eng, ls_series_table_states(tab), B, slots);
    if (err == LS_OK)
      err = ls_engine_forward(eng, b->T, B, x, update ? x : NULL, NULL, &loss, &count);
    if (err == LS_OK && update) err = ls_engine_backward(eng, (float)(1.0 / count));
    if (err == LS_OK && update) err = ls_engine_optimizer_step(eng, &opt, 1.0f, NULL);
    if (err == LS_OK) err = ls_engine_scatter_state(eng, ls_series_table_states(tab), B, slots);
    for (int k = 0; k < B && err == LS_OK; k++)
      err = ls_series_table_trained(tab, slots[k], b->T, 100 + first + k);
  }
  free(x);
  free(slots);
  return err;
}

/* Writes and loads snapshot `step` with conf; prints its line. */
static int bench_one(const bench_t *b, const ls_snapshot_t *snap, const ls_snapshot_conf_t *conf,
                     int64_t step) {
  double const t0 = base_now_s();
  ls_err_t err = ls_snapshot_write_shard(snap, b->dir, conf);
  if (err == LS_OK) err = ls_snapshot_commit(b->dir, step, 1, 1);
  double const write_s = base_now_s() - t0;
  if (err != LS_OK) return cli_fail(err, "cannot write the snapshot");
  char path[4096];
  err = ls_snapshot_path(b->dir, step, path, sizeof path);
  if (err != LS_OK) return cli_fail(err, "cannot name the snapshot");
  ls_snapshot_manifest_t *man = NULL;
  ls_snapshot_shard_t shard;
  err = ls_snapshot_manifest_read(path, &man);
  if (err == LS_OK) err = ls_snapshot_manifest_shard(man, 0, &shard);
  ls_snapshot_manifest_destroy(man);
  double const t1 = base_now_s();
  ls_snapshot_t *back = NULL;
  if (err == LS_OK) err = ls_snapshot_load(path, 1, 0, &back);
  double const load_s = base_now_s() - t1;
  size_t const loaded = ls_snapshot_series_count(back);
  ls_snapshot_file_t file = {0};
  ls_snapshot_get_file(back, &file);
  ls_snapshot_destroy(back);
  double raw_mb = 0.0;
  for (int i = 0; i < file.n_sections; i++)
    raw_mb += (double)file.sections[i].raw / 1e6;
  if (err != LS_OK) return cli_fail(err, "cannot load the snapshot back");
  if (loaded != (size_t)b->series)
    return cli_fail(LS_OK, "loaded %zu series of %d", loaded, b->series);
  double const file_mb = (double)shard.size / 1e6;
  printf("snapshot series=%d H=%d L=%d level=%d shuffle=%d workers=%d raw_mb=%.1f file_mb=%.1f "
         "ratio=%.3f write_s=%.2f write_mb_s=%.0f load_s=%.2f load_mb_s=%.0f\n",
         b->series, b->H, b->L, conf->level, conf->shuffle, conf->workers, raw_mb, file_mb,
         raw_mb / file_mb, write_s, raw_mb / write_s, load_s, raw_mb / load_s);
  fflush(stdout);
  return CLI_EXIT_OK;
}

static int run(const bench_t *b) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = (ls_shape_t){b->I, b->H, b->L, b->I};
  ec.max_batch = CHUNK;
  ec.max_window = b->T;
  ec.threads = b->threads;
  ls_engine_t *eng = NULL;
  ls_series_table_t *tab = NULL;
  ls_snapshot_t *snap = NULL;
  ls_err_t err = ls_engine_new(&ec, &eng);
  if (err == LS_OK) err = ls_engine_init_params(eng, 1);
  if (err == LS_OK) err = ls_series_table_new(eng, (size_t)b->series, &tab);
  double const t0 = base_now_s();
  if (err == LS_OK) err = make_states(b, eng, tab);
  double const make_s = base_now_s() - t0;
  if (err == LS_OK) err = ls_snapshot_new(&ec.shape, (size_t)b->series, PARTITIONS, &snap);
  /* Fill twice: the second fill is what every snapshot after the first
   * costs the step loop (no allocation). */
  double fill_s = 0.0;
  for (int round = 0; round < 2 && err == LS_OK; round++) {
    double const t1 = base_now_s();
    ls_snapshot_reset(snap);
    ls_snapshot_info_t const info = {round, 1, 0, 1, 0, 0};
    err = ls_snapshot_set_info(snap, &info);
    if (err == LS_OK) err = ls_snapshot_set_engine(snap, eng);
    if (err == LS_OK) err = ls_snapshot_add_series_table(snap, tab);
    for (int p = 0; p < PARTITIONS && err == LS_OK; p++)
      err = ls_snapshot_add_partition(snap, p, 1000 + p);
    fill_s = base_now_s() - t1;
  }
  int rc = CLI_EXIT_OK;
  if (err != LS_OK) rc = cli_fail(err, "cannot prepare the snapshot");
  if (rc == CLI_EXIT_OK)
    printf("snapshot states made in %.1f s; filling the snapshot from the engine and table "
           "(the step loop's pause): %.1f ms\n",
           make_s, fill_s * 1e3);
  int64_t step = 1;
  for (int l = 0; l < b->n_levels && rc == CLI_EXIT_OK; l++)
    for (int shuffle = 0; shuffle <= 1 && rc == CLI_EXIT_OK; shuffle++) {
      ls_snapshot_conf_t conf;
      ls_snapshot_conf_init(&conf);
      conf.level = b->levels[l];
      conf.shuffle = shuffle;
      conf.workers = b->workers;
      ls_snapshot_info_t const info = {step, 1, 0, 1, 0, 0};
      err = ls_snapshot_set_info(snap, &info);
      rc = err == LS_OK ? bench_one(b, snap, &conf, step++) : cli_fail(err, "bad configuration");
    }
  ls_snapshot_destroy(snap);
  ls_series_table_destroy(tab);
  ls_engine_destroy(eng);
  return rc;
}

int cmd_bench_snapshot(int argc, char **argv) {
  bench_t b = {100000, 1, 256, 2, 4, 0, 0, {1, 3}, 2, "/tmp/lstream-bench-snapshot"};
  cli_opt_t const opts[] = {
      {.name = "series",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &b.series,
       .value = BASE_V_INT(1, 100000000),
       .help = "series"},
      {.name = "hidden",
       .arg = "H",
       .kind = CLI_VALUE,
       .dst = &b.H,
       .value = BASE_V_INT(1, 65536),
       .help = "hidden size"},
      {.name = "layers",
       .arg = "L",
       .kind = CLI_VALUE,
       .dst = &b.L,
       .value = BASE_V_INT(1, 64),
       .help = "layers"},
      {.name = "inputs",
       .arg = "I",
       .kind = CLI_VALUE,
       .dst = &b.I,
       .value = BASE_V_INT(1, 65536),
       .help = "features"},
      {.name = "window",
       .arg = "T",
       .kind = CLI_VALUE,
       .dst = &b.T,
       .value = BASE_V_INT(1, 4096),
       .help = "steps run per series to make its state"},
      {.name = "levels",
       .arg = "A,B,..",
       .kind = CLI_CALL,
       .dst = &b,
       .call = parse_levels,
       .def = "1,3",
       .help = "zstd levels"},
      {.name = "workers",
       .arg = "W",
       .kind = CLI_VALUE,
       .dst = &b.workers,
       .value = BASE_V_INT(0, 256),
       .help = "zstd worker threads (0: compress on the writing thread)"},
      {.name = "threads",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &b.threads,
       .value = BASE_V_INT(1, 4096),
       .def = "all cores",
       .help = "engine threads"},
      {.name = "dir",
       .arg = "DIR",
       .kind = CLI_TEXT,
       .dst = &b.dir,
       .def = b.dir,
       .help = "where the snapshots go"},
      {0},
  };
  cli_spec_t const spec = {
      "bench snapshot",
      "[--series N] [--hidden H] [--layers L] [--inputs I]\n"
      "                              [--window T] [--levels A,B,..] [--workers W]\n"
      "                              [--threads N] [--dir DIR]",
      ABOUT,
      opts,
      NULL,
      0};
  cli_args_t args;
  int const rc = cli_parse(&spec, argc, argv, &args);
  if (rc != CLI_EXIT_OK) return rc == CLI_DONE ? CLI_EXIT_OK : rc;
  return run(&b);
}
