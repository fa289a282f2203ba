/*
 * The trainer's configuration (include/lstream/train.h): typed fields, one
 * table of keys that drives parsing, printing and --help, and config files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kvfile.h"
#include "base/value.h"
#include "lstream/ingest.h" /* LS_FEATURES_MAX, LS_WINDOW_MAX: the bounds ingest takes */
#include "train_internal.h"

static const char *const optimizers[] = {"adam", "adamw", NULL};
static const char *const devices[] = {"cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "tf32", NULL}; /* ls_precision_t order */
static const char *const untils[] = {"live", "end", NULL};
static const char *const bools[] = {"false", "true", NULL};
static const char *const comms[] = {"auto", "none", "mpi", "nccl", NULL};
static const char *const overlaps[] = {"auto", "false", "true", NULL};
static const char *const normalizes[] = {"series", "none", NULL};
static const char *const target_kinds[] = {"delta", "level", NULL};
static const char *const input_kinds[] = {"level,change", "level", NULL};
/* ls_train_conf_t.predictions: index + 1 = bit 0 next, bit 1 eval. */
static const char *const prediction_kinds[] = {"none", "next", "eval", "next,eval", NULL};

#define F(field) offsetof(ls_train_conf_t, field)
#define S(field) sizeof(((ls_train_conf_t *)0)->field)
static const base_key_t keys[] = {
    {"brokers", "bootstrap servers host:port[,...] (required)", F(brokers), BASE_V_STR(S(brokers))},
    {"topic", "topic to read (required)", F(topic), BASE_V_STR(S(topic))},
    {"format", "record values: f32 (F little-endian floats) or csv", F(format),
     BASE_V_CHOICE(ls_format_names)},
    {"features", "F, values per record", F(features), BASE_V_INT(1, LS_FEATURES_MAX)},
    {"window", "T, time steps per window (TBPTT length)", F(window), BASE_V_INT(1, LS_WINDOW_MAX)},
    {"batch", "B, windows (of distinct series) per step", F(batch), BASE_V_INT(1, 1 << 20)},
    {"hidden", "H, LSTM hidden size", F(hidden), BASE_V_INT(1, 16384)},
    {"layers", "L, stacked LSTM layers", F(layers), BASE_V_INT(1, 64)},
    {"optimizer", "adam (L2 weight decay) or adamw (decoupled)", F(optimizer),
     BASE_V_CHOICE(optimizers)},
    {"lr", "learning rate", F(lr), BASE_V_DBL(0, 10)},
    {"beta1", "Adam first-moment decay", F(beta1), BASE_V_DBL(0, 0.999999)},
    {"beta2", "Adam second-moment decay", F(beta2), BASE_V_DBL(0, 0.999999999)},
    {"eps", "Adam epsilon (added to sqrt(v))", F(eps), BASE_V_DBL(1e-30, 1)},
    {"weight_decay", "weight decay", F(weight_decay), BASE_V_DBL(0, 1)},
    {"clip", "bound on the global gradient norm; 0 = no clipping", F(clip), BASE_V_DBL(0, 1e30)},
    {"warmup", "updates over which the learning rate ramps up linearly", F(warmup),
     BASE_V_INT(0, 1 << 30)},
    {"accumulate", "steps whose gradients make one update", F(accumulate), BASE_V_INT(1, 1 << 20)},
    {"seed", "parameter initialisation seed", F(seed), BASE_V_I64(0, 9.2e18)},
    {"device", "cpu or cuda", F(device), BASE_V_CHOICE(devices)},
    {"precision",
     "GEMM arithmetic: fp32, or tf32 (cuda only: TF32 tensor cores, float32 accumulation and "
     "state)",
     F(precision), BASE_V_CHOICE(precisions)},
    {"threads",
     "CPU threads; 0 = OMP_NUM_THREADS, else under mpirun this rank's share of its host's cores, "
     "else every core the process may use (the count changes the order of sums: give it for the "
     "same bits on other machines)",
     F(threads), BASE_V_INT(0, 4096)},
    {"until", "end: replay to the high watermarks read at start; live: run until stopped", F(until),
     BASE_V_CHOICE(untils)},
    {"start", "where partitions start: beginning, end, OFFSET or time:MS", F(start),
     BASE_V_STR(S(start))},
    {"stateless", "true: start every window from a zero state (for comparison)", F(stateless),
     BASE_V_CHOICE(bools)},
    {"max_abs",
     "reject records holding a value v with |v| above this (reason range); the default keeps "
     "squared errors finite in float32; 3.4e38 or more: no bound",
     F(max_abs), BASE_V_DBL(1e-30, 3.5e38)},
    {"series_idle_ms",
     "evict a series idle this many ms of event time (against its partition's newest record): its "
     "state and its partial window are forgotten; 0: never",
     F(series_idle_ms), BASE_V_I64(0, 1e15)},
    {"max_series",
     "hold at most this many series (over all partitions, as partitions/N each), evicting the "
     "least recently active; 0: no bound",
     F(max_series), BASE_V_I64(0, 1e12)},
    {"reset_gap_ms",
     "a series whose event time jumps by more than this many ms (a weekend, an outage) restarts "
     "its state (h, c) from zero at its next window; what it held before the gap trains as a "
     "partial window; 0: never",
     F(reset_gap_ms), BASE_V_I64(0, 1e15)},
    {"deadline_ms",
     "live: fire a partial step this long after it began (sooner when nothing ready can join it); "
     "the consumer's fetches wait a tenth of it at most",
     F(deadline_ms), BASE_V_INT(1, 3600000)},
    {"queue_windows",
     "ingest bound on queued windows, per partition; also how far a replay reads ahead per "
     "partition to form steps by event time",
     F(queue_windows), BASE_V_INT(1, 1 << 24)},
    {"buffer_records", "ingest bound on records held in memory", F(buffer_records),
     BASE_V_I64(1, 1e15)},
    {"partitions", "partitions to read: all, or a list such as 0,2,5", F(partitions),
     BASE_V_STR(S(partitions))},
    {"comm", "gradient sums across ranks: auto (mpi/nccl under mpirun), none, mpi, nccl", F(comm),
     BASE_V_CHOICE(comms)},
    {"overlap",
     "start each layer's gradient all-reduce as soon as backward finishes it (several ranks, "
     "accumulate 1); auto = with nccl only",
     F(overlap), BASE_V_CHOICE(overlaps)},
    {"comm_always",
     "true: run the gradient sums even on one rank (with nccl: the NCCL path on one GPU, for "
     "tests)",
     F(comm_always), BASE_V_CHOICE(bools)},
    {"max_steps", "stop after this many steps in all, resumed ones included; 0 = no limit",
     F(max_steps), BASE_V_I64(0, 1e15)},
    {"snapshot_dir", "directory of snapshots; empty = none", F(snapshot_dir),
     BASE_V_STR(S(snapshot_dir))},
    {"snapshot_every", "snapshot every N steps; 0 = not by steps", F(snapshot_every),
     BASE_V_I64(0, 1e15)},
    {"snapshot_interval", "snapshot every S seconds; 0 = not by time", F(snapshot_interval),
     BASE_V_DBL(0, 1e9)},
    {"snapshot_keep", "snapshots kept", F(snapshot_keep), BASE_V_INT(1, 1000000)},
    {"snapshot_level", "zstd compression level of snapshots (-50..-1: zstd's fast levels; not 0)",
     F(snapshot_level), BASE_V_INT(LS_SNAPSHOT_LEVEL_MIN, 22)},
    {"snapshot_threads", "zstd worker threads; 0 = the writer's own thread", F(snapshot_threads),
     BASE_V_INT(0, 256)},
    {"snapshot_shuffle", "byte-shuffle float arrays before compression", F(snapshot_shuffle),
     BASE_V_CHOICE(bools)},
    {"resume",
     "latest (the newest good snapshot in snapshot_dir, if any), none, or a snapshot directory",
     F(resume), BASE_V_STR(S(resume))},
    {"normalize",
     "series: each series' inputs and targets scaled by its own running location and scale; none: "
     "raw",
     F(normalize), BASE_V_CHOICE(normalizes)},
    {"norm_window",
     "records the normaliser's exponential weights reach back (1/N per record after a warm-up)",
     F(norm_window), BASE_V_INT(1, 1 << 30)},
    {"target",
     "delta: predict the next change (forecast = last value + change); level: the next value",
     F(target), BASE_V_CHOICE(target_kinds)},
    {"inputs", "level,change: each feature's level and its last change; level: the level only",
     F(inputs), BASE_V_CHOICE(input_kinds)},
    {"targets",
     "the features forecast: all, or a list such as 0,3 (the others are covariates, inputs only)",
     F(targets), BASE_V_STR(S(targets))},
    {"calibrate",
     "scale each target's predicted change by how much such changes paid off on past forecasts",
     F(calibrate), BASE_V_CHOICE(bools)},
    {"replay", "extra updates per step on windows drawn from a memory of recent ones; 0 = none",
     F(replay), BASE_V_INT(0, 1024)},
    {"replay_batch",
     "windows per replay update, over all partitions (each gives batch/partitions, at least 1)",
     F(replay_batch), BASE_V_INT(1, 1 << 20)},
    {"replay_memory",
     "recent windows kept for replay, over all partitions (each keeps memory/partitions, at least "
     "16)",
     F(replay_memory), BASE_V_INT(1, 1 << 24)},
    {"predictions_topic",
     "publish forecasts to this topic (key: the series; value: the target features' forecasts in "
     "--format; headers: source partition, offset, event time, kind, model step), exactly once "
     "with --snapshot-dir; empty = none",
     F(predictions_topic), BASE_V_STR(S(predictions_topic))},
    {"predictions_out",
     "write forecasts to this CSV file (with the actual value once known; FILE.rankN with several "
     "ranks); empty = none",
     F(predictions_out), BASE_V_STR(S(predictions_out))},
    {"predictions",
     "which forecasts go out: next (after every record, of the series' next one), eval (the "
     "test-then-train forecasts behind the loss), or next,eval",
     F(predictions), BASE_V_CHOICE(prediction_kinds)},
    {"predictions_commit_ms",
     "the predictions topic's transactions commit at most this long after their first forecast "
     "(read_committed consumers see forecasts then)",
     F(predictions_commit_ms), BASE_V_INT(0, 600000)},
    {"predictions_buffer",
     "forecasts held for the predictions topic (a broker outage fills it, then training pauses; "
     "nothing is dropped)",
     F(predictions_buffer), BASE_V_I64(1, 1e9)},
};
#undef F
#undef S
static const size_t n_keys = sizeof keys / sizeof keys[0];

const ls_train_key_t *ls_train_conf_keys(void) {
  static ls_train_key_t list[sizeof keys / sizeof keys[0] + 1];
  if (list[0].key == NULL)
    for (size_t i = 0; i < n_keys; i++)
      list[i] = (ls_train_key_t){keys[i].name, keys[i].help};
  return list;
}

static void conf_defaults(ls_train_conf_t *c) {
  memset(c, 0, sizeof *c);
  c->format = 0;
  c->features = 1;
  c->window = 16;
  c->batch = 64;
  c->hidden = 64;
  c->layers = 1;
  c->optimizer = 0;
  c->lr = 3e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
  c->clip = 1.0;
  c->accumulate = 1;
  c->seed = 1;
  c->until = 0;
  snprintf(c->start, sizeof c->start, "beginning");
  c->max_abs = 1e18;
  c->deadline_ms = 200;
  c->queue_windows = 4096;
  c->buffer_records = 16777216;
  snprintf(c->partitions, sizeof c->partitions, "all");
  c->snapshot_keep = 3;
  c->snapshot_level = 3;
  c->snapshot_shuffle = 1;
  snprintf(c->resume, sizeof c->resume, "latest");
  /* tests/bench/realdata/FINDINGS.md, section 4.5 */
  c->normalize = 0;
  c->norm_window = 256;
  c->target = 0;
  c->inputs = 0;
  snprintf(c->targets, sizeof c->targets, "all");
  c->calibrate = 1;
  c->replay = 4;
  c->replay_batch = 8;
  c->replay_memory = 256;
  c->predictions = 1; /* next */
  c->predictions_commit_ms = 100;
  c->predictions_buffer = 1048576;
}

ls_err_t train_conf_targets(const ls_train_conf_t *c, int *feat, int *O) {
  *O = 0;
  const char *s = c->targets;
  if (!strcmp(s, "all")) {
    for (int f = 0; f < c->features; f++)
      feat[(*O)++] = f;
    return LS_OK;
  }
  char *seen = calloc((size_t)c->features, 1);
  LS_RETURN_IF(seen == NULL, LS_ERR_NOMEM, "no memory for %d features", c->features);
  ls_err_t err = LS_OK;
  while (*s && err == LS_OK) {
    char *end = NULL;
    long const f = strtol(s, &end, 10);
    if (end == s || (*end != ',' && *end != '\0') || f < 0 || f >= c->features || seen[f])
      err = ls_error_set(LS_ERR_INVALID_ARG,
                         "targets '%s': expected 'all' or a list of distinct features in [0, %d) "
                         "(features %d)",
                         c->targets, c->features, c->features);
    else
      seen[f] = 1, s = *end ? end + 1 : end;
  }
  for (int f = 0; f < c->features && err == LS_OK; f++)
    if (seen[f]) feat[(*O)++] = f;
  free(seen);
  if (err == LS_OK && *O == 0)
    err = ls_error_set(LS_ERR_INVALID_ARG, "targets '%s' names no feature", c->targets);
  return err;
}

ls_err_t ls_train_conf_new(ls_train_conf_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  ls_train_conf_t *c = malloc(sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for a configuration");
  conf_defaults(c);
  *out = c;
  return LS_OK;
}

void ls_train_conf_destroy(ls_train_conf_t *c) {
  if (c == NULL) return;
  train_conf_free_kafka(c);
  free(c);
}

void train_conf_free_kafka(ls_train_conf_t *c) {
  for (int i = 0; i < c->n_kafka; i++)
    free(c->kafka[i]);
  free(c->kafka);
  c->kafka = NULL;
  c->n_kafka = 0;
}

ls_err_t train_conf_copy(ls_train_conf_t *dst, const ls_train_conf_t *src) {
  *dst = *src;
  dst->kafka = NULL;
  dst->n_kafka = 0;
  for (int i = 0; i < src->n_kafka; i++) {
    ls_err_t const err = ls_train_conf_set_kafka(dst, src->kafka[i]);
    if (err != LS_OK) {
      train_conf_free_kafka(dst);
      return err;
    }
  }
  return LS_OK;
}

/* The key, spelled with underscores or (as on the command line) dashes. */
static const base_key_t *find_key(const char *key) {
  const base_key_t *const k = base_keys_find(keys, n_keys, key);
  if (k != NULL || strlen(key) >= 64) return k;
  char alt[64];
  for (size_t i = 0; i <= strlen(key); i++)
    alt[i] = key[i] == '-' ? '_' : key[i];
  return base_keys_find(keys, n_keys, alt);
}

ls_err_t ls_train_conf_set(ls_train_conf_t *c, const char *key, const char *value) {
  LS_RETURN_IF(c == NULL || key == NULL || value == NULL, LS_ERR_INVALID_ARG,
               "conf, key or value is NULL");
  const base_key_t *const k = find_key(key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "unknown key '%s'", key);
  return base_key_set(k, c, value);
}

ls_err_t ls_train_conf_get(const ls_train_conf_t *c, const char *key, char *buf, size_t size) {
  LS_RETURN_IF(c == NULL || key == NULL || buf == NULL || size == 0, LS_ERR_INVALID_ARG,
               "conf, key or buffer is NULL");
  const base_key_t *const k = find_key(key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "unknown key '%s'", key);
  return base_key_get(k, c, buf, size);
}

ls_err_t ls_train_conf_set_kafka(ls_train_conf_t *c, const char *setting) {
  LS_RETURN_IF(c == NULL || setting == NULL, LS_ERR_INVALID_ARG, "conf or setting is NULL");
  const char *const eq = strchr(setting, '=');
  LS_RETURN_IF(eq == NULL || eq == setting, LS_ERR_INVALID_ARG,
               "librdkafka property '%s' is not key=value", setting);
  char **list = realloc(c->kafka, (size_t)(c->n_kafka + 1) * sizeof *list);
  LS_RETURN_IF(list == NULL, LS_ERR_NOMEM, "no memory for a property");
  c->kafka = list;
  c->kafka[c->n_kafka] = strdup(setting);
  LS_RETURN_IF(c->kafka[c->n_kafka] == NULL, LS_ERR_NOMEM, "no memory for a property");
  c->n_kafka++;
  return LS_OK;
}

ls_err_t ls_train_conf_set_warn_cb(ls_train_conf_t *c, ls_train_warn_cb cb, void *opaque) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "conf is NULL");
  c->warn_cb = cb;
  c->warn_opaque = opaque;
  return LS_OK;
}

static ls_err_t set_from_file(void *conf, const char *key, const char *value) {
  return ls_train_conf_set(conf, key, value);
}

ls_err_t ls_train_conf_read(ls_train_conf_t *c, const char *path) {
  LS_RETURN_IF(c == NULL || path == NULL, LS_ERR_INVALID_ARG, "conf or path is NULL");
  return base_kv_read(path, "config file", set_from_file, c);
}
