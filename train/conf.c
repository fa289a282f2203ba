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
static const char *const mix_rows[] = {"all", "linear", NULL}; /* mix_profile_rows order */
static const char *const comms[] = {"auto", "none", "mpi", "nccl", NULL};
static const char *const overlaps[] = {"auto", "false", "true", NULL};
static const char *const normalizes[] = {"series", "none", NULL};
static const char *const target_kinds[] = {"delta", "level", NULL};
static const char *const input_kinds[] = {"level,change", "level", NULL};
/* ls_train_conf_t.predictions: index + 1 = bit 0 next, bit 1 eval. */
static const char *const prediction_kinds[] = {"none", "next", "eval", "next,eval", NULL};
static const char *const recreated_kinds[] = {"refuse", "restart", NULL};

#define F(field) offsetof(ls_train_conf_t, field)
#define S(field) sizeof(((ls_train_conf_t *)0)->field)
static const base_key_t keys[] = {
    {"brokers", "bootstrap servers host:port[,...] (required)", F(brokers), BASE_V_STR(S(brokers)),
     NULL, LS_KEY_RUN},
    {"topic", "topic to read (required)", F(topic), BASE_V_STR(S(topic)), NULL,
     LS_KEY_DATA | LS_KEY_FIXED},
    {"format",
     "record values: f32 (F little-endian floats), csv, json (objects; --fields) or avro "
     "(--avro-schema, --fields)",
     F(format), BASE_V_CHOICE(ls_format_names), "f32", LS_KEY_DATA | LS_KEY_FIXED},
    {"features", "F, values per record (json, avro: the number of fields)", F(features),
     BASE_V_INT(1, LS_FEATURES_MAX), "1", LS_KEY_DATA | LS_KEY_FIXED},
    {"fields",
     "json, avro: the fields to train on, in order, as paths (names separated by dots into "
     "nested objects, [N] an array's element): px,qty or quote.bid,levels[0].px",
     F(fields), BASE_V_STR(S(fields)), NULL, LS_KEY_DATA | LS_KEY_FIXED},
    {"key_field",
     "json, avro: the path of the series key (a string or a number); empty: the "
     "Kafka key",
     F(key_field), BASE_V_STR(S(key_field)), NULL, LS_KEY_DATA | LS_KEY_FIXED},
    {"time_field",
     "json, avro: the path of the event time (a number since the epoch, or an ISO 8601 string "
     "with a zone such as 2024-01-02T14:30:00.123Z); empty: the Kafka timestamp",
     F(time_field), BASE_V_STR(S(time_field)), NULL, LS_KEY_DATA | LS_KEY_FIXED},
    {"time_unit",
     "a numeric time field's unit: s, ms, us, ns, or auto (by magnitude: below 1e11 s, 1e14 ms, "
     "1e17 us, else ns)",
     F(time_unit), BASE_V_CHOICE(ls_time_unit_names), "auto", LS_KEY_DATA | LS_KEY_FIXED},
    {"avro_schema", "avro: a FILE holding the writer's schema (the contract: no registry is asked)",
     F(avro_schema), BASE_V_STR(S(avro_schema)), NULL, LS_KEY_DATA | LS_KEY_NOTED},
    {"avro_schema_id",
     "avro: none (plain Avro binary), any (Confluent's framing: a 0 byte and a 4-byte schema "
     "id), or an id N (that framing, records of another id rejected)",
     F(avro_schema_id), BASE_V_STR(S(avro_schema_id)), "none", LS_KEY_DATA | LS_KEY_NOTED},
    {"feature_names",
     "names of the F features, comma separated, for the per-target figures (summary, /metrics, "
     "TensorBoard); empty: the fields' paths (json, avro), else the indexes",
     F(feature_names), BASE_V_STR(S(feature_names)), NULL, LS_KEY_RUN},
    {"dead_letter_topic",
     "copy every rejected record there, with headers lstream-reject-reason, lstream-partition "
     "and lstream-offset (the topic must exist); empty: none",
     F(dead_letter_topic), BASE_V_STR(S(dead_letter_topic)), NULL, LS_KEY_RUN},
    {"group",
     "the consumer group the offsets of each snapshot are committed to (for Kafka's lag tools; "
     "lstream resumes from its snapshots); empty: lstream-TOPIC-RUN, RUN the run's id (kept in "
     "the snapshot directory)",
     F(group), BASE_V_STR(S(group)), NULL, LS_KEY_RUN},
    {"window", "T, time steps per window (TBPTT length)", F(window), BASE_V_INT(1, LS_WINDOW_MAX),
     "16", LS_KEY_MODEL | LS_KEY_FIXED},
    {"batch", "B, windows (of distinct series) per step", F(batch), BASE_V_INT(1, 1 << 20), "64",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"hidden", "H, LSTM hidden size", F(hidden), BASE_V_INT(1, 16384), "64",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"layers", "L, stacked LSTM layers", F(layers), BASE_V_INT(1, 64), "1",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"optimizer", "adam (L2 weight decay) or adamw (decoupled)", F(optimizer),
     BASE_V_CHOICE(optimizers), "adam", LS_KEY_MODEL | LS_KEY_FIXED},
    {"lr", "learning rate", F(lr), BASE_V_DBL(0, 10), "0.003", LS_KEY_MODEL | LS_KEY_FIXED},
    {"beta1", "Adam first-moment decay", F(beta1), BASE_V_DBL(0, 0.999999), "0.9",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"beta2", "Adam second-moment decay", F(beta2), BASE_V_DBL(0, 0.999999999), "0.999",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"eps", "Adam epsilon (added to sqrt(v))", F(eps), BASE_V_DBL(1e-30, 1), "1e-08",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"weight_decay", "weight decay", F(weight_decay), BASE_V_DBL(0, 1), "0",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"clip", "bound on the global gradient norm; 0 = no clipping", F(clip), BASE_V_DBL(0, 1e30),
     "1", LS_KEY_MODEL | LS_KEY_FIXED},
    {"warmup", "updates over which the learning rate ramps up linearly", F(warmup),
     BASE_V_INT(0, 1 << 30), "0", LS_KEY_MODEL | LS_KEY_FIXED},
    {"accumulate", "steps whose gradients make one update", F(accumulate), BASE_V_INT(1, 1 << 20),
     "1", LS_KEY_MODEL | LS_KEY_FIXED},
    {"seed", "parameter initialisation seed", F(seed), BASE_V_I64(0, 9.2e18), "1",
     LS_KEY_MODEL | LS_KEY_FIXED},
    {"device", "cpu or cuda", F(device), BASE_V_CHOICE(devices), "cpu", LS_KEY_RUN},
    {"precision",
     "GEMM arithmetic: fp32, or tf32 (cuda only: TF32 tensor cores, float32 accumulation and "
     "state)",
     F(precision), BASE_V_CHOICE(precisions), "fp32", LS_KEY_RUN},
    {"threads",
     "CPU threads; 0 = OMP_NUM_THREADS, else under mpirun this rank's share of its host's cores, "
     "else every core the process may use (the bits do not depend on the count; while another "
     "process holds a core, an update may run on one: LSTREAM_CPU_ADAPT=0 keeps them all)",
     F(threads), BASE_V_INT(0, 4096), "0", LS_KEY_RUN},
    {"until", "end: replay to the high watermarks read at start; live: run until stopped", F(until),
     BASE_V_CHOICE(untils), "live", LS_KEY_DATA},
    {"start", "where partitions start: beginning, end, OFFSET or time:MS", F(start),
     BASE_V_STR(S(start)), "beginning", LS_KEY_DATA},
    {"stateless", "true: start every window from a zero state (for comparison)", F(stateless),
     BASE_V_CHOICE(bools), "false", LS_KEY_MODEL | LS_KEY_FIXED},
    {"max_abs",
     "reject records holding a value v with |v| above this (reason range); the default keeps "
     "squared errors finite in float32; 3.4e38 or more: no bound",
     F(max_abs), BASE_V_DBL(1e-30, 3.5e38), "1e+18", LS_KEY_DATA | LS_KEY_NOTED},
    {"series_idle_ms",
     "evict a series idle this many ms of event time (against its partition's newest record): its "
     "state and its partial window are forgotten; 0: never",
     F(series_idle_ms), BASE_V_I64(0, 1e15), "0", LS_KEY_DATA | LS_KEY_NOTED},
    {"max_series",
     "hold at most this many series (over all partitions, as partitions/N each), evicting the "
     "least recently active; 0: no bound",
     F(max_series), BASE_V_I64(0, 1e12), "0", LS_KEY_DATA | LS_KEY_NOTED},
    {"reset_gap_ms",
     "a series whose event time jumps by more than this many ms (a weekend, an outage) restarts "
     "its state (h, c) from zero at its next window; what it held before the gap trains as a "
     "partial window; 0: never",
     F(reset_gap_ms), BASE_V_I64(0, 1e15), "0", LS_KEY_DATA | LS_KEY_NOTED},
    {"max_future_ms",
     "reject a record stamped more than this many ms ahead of this machine's clock (reason "
     "future), leaving its series' clock as it was: one bad stamp never rejects the records "
     "after it; 0: no bound",
     F(max_future_ms), BASE_V_I64(0, 1e15), "3600000", LS_KEY_DATA | LS_KEY_NOTED},
    {"late_ms",
     "a record stamped before its series' last by at most this many ms (a clock stepped back) "
     "is trained in its place, its event time held at the series' last; one later still is "
     "rejected (reason backwards); 0: every such record is rejected",
     F(late_ms), BASE_V_I64(0, 1e15), "60000", LS_KEY_DATA | LS_KEY_NOTED},
    {"deadline_ms",
     "live: fire a partial step this long after it began (sooner when nothing ready can join it); "
     "the consumer's fetches wait a tenth of it at most",
     F(deadline_ms), BASE_V_INT(1, 3600000), "200", LS_KEY_INGEST},
    {"queue_windows",
     "ingest bound on queued windows, per partition; also how far a replay reads ahead per "
     "partition to form steps by event time",
     F(queue_windows), BASE_V_INT(1, 1 << 24), "4096", LS_KEY_INGEST | LS_KEY_FIXED},
    {"buffer_records", "ingest bound on records held in memory", F(buffer_records),
     BASE_V_I64(1, 1e15), "16777216", LS_KEY_INGEST | LS_KEY_FIXED},
    {"partitions", "partitions to read: all, or a list such as 0,2,5", F(partitions),
     BASE_V_STR(S(partitions)), "all", LS_KEY_DATA},
    {"comm", "gradient sums across ranks: auto (mpi/nccl under mpirun), none, mpi, nccl", F(comm),
     BASE_V_CHOICE(comms), "auto", LS_KEY_RUN},
    {"overlap",
     "start each layer's gradient all-reduce as soon as backward finishes it (several ranks, "
     "accumulate 1); auto = with nccl only",
     F(overlap), BASE_V_CHOICE(overlaps), "auto", LS_KEY_RUN},
    {"comm_always",
     "true: run the gradient sums even on one rank (with nccl: the NCCL path on one GPU, for "
     "tests)",
     F(comm_always), BASE_V_CHOICE(bools), "false", LS_KEY_RUN},
    {"comm_timeout_ms",
     "with nccl: how long a wait for the gradient sums may go without them ending (a peer gone "
     "or hung) before the communicator is aborted and the run fails, naming it",
     F(comm_timeout_ms), BASE_V_INT(1, 86400000), "600000", LS_KEY_RUN},
    {"max_steps", "stop after this many steps in all, resumed ones included; 0 = no limit",
     F(max_steps), BASE_V_I64(0, 1e15), "0", LS_KEY_RUN},
    {"snapshot_dir", "directory of snapshots; empty = none", F(snapshot_dir),
     BASE_V_STR(S(snapshot_dir)), NULL, LS_KEY_RUN},
    {"snapshot_every", "snapshot every N steps; 0 = not by steps", F(snapshot_every),
     BASE_V_I64(0, 1e15), "0", LS_KEY_RUN},
    {"snapshot_interval", "snapshot every S seconds; 0 = not by time", F(snapshot_interval),
     BASE_V_DBL(0, 1e9), "0", LS_KEY_RUN},
    {"snapshot_keep", "snapshots kept", F(snapshot_keep), BASE_V_INT(1, 1000000), "3", LS_KEY_RUN},
    {"snapshot_level",
     "zstd compression level of snapshots (-50..-1: zstd's fast levels, the series' states of "
     "doubles compress little more at higher ones; not 0)",
     F(snapshot_level), BASE_V_INT(LS_SNAPSHOT_LEVEL_MIN, 22), "-50", LS_KEY_RUN},
    {"snapshot_threads", "zstd worker threads; 0 = the writer's own thread", F(snapshot_threads),
     BASE_V_INT(0, 256), "0", LS_KEY_RUN},
    {"snapshot_shuffle", "byte-shuffle float arrays before compression", F(snapshot_shuffle),
     BASE_V_CHOICE(bools), "true", LS_KEY_RUN},
    {"resume",
     "latest (the newest good snapshot in snapshot_dir, if any), none, or a snapshot directory",
     F(resume), BASE_V_STR(S(resume)), "latest", LS_KEY_RUN},
    {"topic_recreated",
     "a resume whose topic is not the snapshot's any more (deleted and re-created: the record a "
     "partition's snapshot ends with is not at its offset, or the partition ends before the "
     "snapshot's offset): refuse (fail, naming the partition, its offset and why), or restart "
     "(read such partitions from their beginning, the model kept, their series started over)",
     F(topic_recreated), BASE_V_CHOICE(recreated_kinds), "refuse", LS_KEY_RUN},
    {"normalize",
     "series: each series' inputs and targets scaled by its own running location and scale; none: "
     "raw",
     F(normalize), BASE_V_CHOICE(normalizes), "series", LS_KEY_MODEL | LS_KEY_FIXED},
    {"norm_window",
     "records the normaliser's exponential weights reach back (1/N per record after a warm-up)",
     F(norm_window), BASE_V_INT(1, 1 << 30), "256", LS_KEY_MODEL | LS_KEY_FIXED},
    {"target",
     "delta: predict the next change (forecast = last value + change); level: the next value",
     F(target), BASE_V_CHOICE(target_kinds), "delta", LS_KEY_MODEL | LS_KEY_FIXED},
    {"inputs", "level,change: each feature's level and its last change; level: the level only",
     F(inputs), BASE_V_CHOICE(input_kinds), "level,change", LS_KEY_MODEL | LS_KEY_FIXED},
    {"targets",
     "the features forecast: all, or a list such as 0,3 (the others are covariates, inputs only)",
     F(targets), BASE_V_STR(S(targets)), "all", LS_KEY_MODEL | LS_KEY_FIXED},
    {"calibrate",
     "scale each target's predicted change by how much such changes paid off on past forecasts "
     "(without the linear path: with it, each series' mixing weights do)",
     F(calibrate), BASE_V_CHOICE(bools), "true", LS_KEY_MODEL | LS_KEY_FIXED},
    {"season",
     "each series' season, whose lags join its inputs and linear path: auto (found from the "
     "autocorrelation of the series' own changes, up to season_max), none, or up to 2 periods in "
     "records such as 24 or 24,168 (needs normalize series, target delta)",
     F(season), BASE_V_STR(S(season)), "auto", LS_KEY_MODEL | LS_KEY_FIXED},
    {"season_max",
     "the longest season looked for or given, in records (each series keeps its last 2 x this "
     "values per target)",
     F(season_max), BASE_V_INT(4, 4096), "336", LS_KEY_MODEL | LS_KEY_FIXED},
    {"auto_seasons",
     "with season auto, the seasons found per series and target: 1, or 2 (the second a multiple "
     "of the first that the series follows clearly more closely, as a week beside a day)",
     F(auto_seasons), BASE_V_INT(1, 2), "2", LS_KEY_MODEL | LS_KEY_FIXED},
    {"season_levels",
     "with a season, the linear path also sees the series' level at that phase (its value less "
     "the mean of the season it ends, averaged over about 16 seasons, as Holt-Winters' seasonal "
     "index: on short seasonal series its strongest feature), and a season found after the "
     "series' first records takes its profiles from the records the series already holds "
     "(needs linear)",
     F(season_levels), BASE_V_CHOICE(bools), "true", LS_KEY_MODEL | LS_KEY_FIXED},
    {"mix_profile",
     "with season levels, each series' one-step forecast also weighs in its first season's level "
     "profile forecast (the mean of the last season plus the profile at the next phase): a third "
     "weight of the per-series mixing, fitted with the linear path's and the LSTM's by least "
     "squares on the series' past forecasts; the LSTM still learns what the linear path leaves. "
     "Short seasonal series gain most (a few hundred records)",
     F(mix_profile), BASE_V_CHOICE(bools), "true", LS_KEY_MODEL | LS_KEY_FIXED},
    {"mix_profile_rows",
     "the rows the level profile's weight is fitted on: linear (those where the linear path "
     "forecast too: the two forecast the same change, and a weight fitted where the profile stood "
     "alone made the pair overshoot a season that grows) or all (every row, as before 2026-11-29)",
     F(mix_profile_rows), BASE_V_CHOICE(mix_rows), "linear", LS_KEY_MODEL | LS_KEY_FIXED},
    {"linear",
     "a linear autoregression on each series' recent and seasonal lags beside the LSTM, fitted "
     "per series by least squares on what the LSTM leaves (needs normalize series, target delta)",
     F(linear), BASE_V_CHOICE(bools), "true", LS_KEY_MODEL | LS_KEY_FIXED},
    {"linear_blocks",
     "the linear path's longer memory: per block q < this, the mean of the 12 x 2^q records "
     "before the last 12 x 2^q (with 2: records 13-24 and 25-48 back), joining once a series' "
     "path has learned 512 rows (a short series' least squares stays small); 0: none",
     F(linear_blocks), BASE_V_INT(0, 3), "2", LS_KEY_MODEL | LS_KEY_FIXED},
    {"linear_wait",
     "rows per weight the linear path learns before its forecasts count (before: the last "
     "value); with the ridge a least squares of one row per weight is already a fair forecast "
     "on a young series",
     F(linear_wait), BASE_V_INT(1, 8), "1", LS_KEY_MODEL | LS_KEY_FIXED},
    {"horizon",
     "H, the records ahead each forecast covers (at most window): after every record, forecasts "
     "of the series' next H records, from one head of targets x H outputs (h-major); a target "
     "past its window's last record is not known when the window trains and is masked",
     F(horizon), BASE_V_INT(1, LS_WINDOW_MAX), "1", LS_KEY_MODEL | LS_KEY_FIXED},
    {"horizon_linear",
     "with horizon above 1 and the linear path: the linear path's forecast of each later horizon, "
     "its one-step autoregression iterated on its own forecasts (as an AR(p) forecasts h steps "
     "ahead), combined per series and horizon with the LSTM's forecast by least squares on the "
     "series' past forecasts; false: the LSTM alone beyond h = 1",
     F(horizon_linear), BASE_V_CHOICE(bools), "true", LS_KEY_MODEL | LS_KEY_FIXED},
    {"horizon_prior",
     "with horizon_linear, rows per record ahead of a prior that draws the LSTM's weight at each "
     "later horizon h towards 0 (worth h x this many rows): its forecast of the change over h "
     "records earns its weight on targets that overlap h - 1 of every h (0: none, as before "
     "2026-11-29)",
     F(horizon_prior), BASE_V_INT(0, 1000000), "32", LS_KEY_MODEL | LS_KEY_FIXED},
    {"quantiles",
     "levels in (0, 1), ascending, such as 0.1,0.5,0.9: beside each point forecast, its quantiles "
     "(outputs trained with the pinball loss, sorted so that they never cross); empty: none",
     F(quantiles), BASE_V_STR(S(quantiles)), "", LS_KEY_MODEL | LS_KEY_FIXED},
    {"calibration_rate",
     "gamma, the step of the quantiles' online calibration (adaptive conformal inference): per "
     "series, level l, horizon h and target, a correction in the series' normalised units moves "
     "by g (l - 1[actual <= quantile]) each time the actual of a forecast arrives, so that each "
     "level's coverage stays at l while the stream drifts; g = gamma exp(z^2 / 2), z the normal "
     "quantile at l, |z| <= 1.96 (2.3 gamma at 0.1 and 0.9, 6.8 beyond 0.025 and 0.975): every "
     "level returns at the median's rate; 0 = off",
     F(calibration_rate), BASE_V_DBL(0, 1), "0.02", LS_KEY_MODEL},
    {"quantile_weight",
     "the weight of each quantile's pinball loss against its point forecast's squared error in "
     "the loss the model trains on; 0: 1 / the levels, so that they weigh together as much as the "
     "point (with 3 levels each at 1 took tmy ghi's one-step forecast 3.3% from --horizon 1's); 1 "
     "as before 2026-11-29",
     F(quantile_weight), BASE_V_DBL(0, 1), "0", LS_KEY_MODEL | LS_KEY_FIXED},
    {"replay", "extra updates per step on windows drawn from a memory of recent ones; 0 = none",
     F(replay), BASE_V_INT(0, 1024), "1", LS_KEY_MODEL | LS_KEY_FIXED},
    {"replay_batch",
     "windows per replay update, over all partitions (each gives batch/partitions, at least 1)",
     F(replay_batch), BASE_V_INT(1, 1 << 20), "8", LS_KEY_MODEL | LS_KEY_FIXED},
    {"replay_memory",
     "recent windows kept for replay, over all partitions (each keeps memory/partitions, at least "
     "16)",
     F(replay_memory), BASE_V_INT(1, 1 << 24), "256", LS_KEY_MODEL | LS_KEY_FIXED},
    {"predictions_topic",
     "publish forecasts to this topic (key: the series; value: the target features' forecasts in "
     "--format; headers: source partition, offset, event time, kind, model step), exactly once "
     "with --snapshot-dir; empty = none",
     F(predictions_topic), BASE_V_STR(S(predictions_topic)), NULL, LS_KEY_RUN},
    {"predictions_out",
     "write forecasts to this CSV file (with the actual value once known; FILE.rankN with several "
     "ranks); empty = none",
     F(predictions_out), BASE_V_STR(S(predictions_out)), NULL, LS_KEY_RUN},
    {"predictions",
     "which forecasts go out: next (after every record, of the series' next one), eval (the "
     "test-then-train forecasts behind the loss), or next,eval",
     F(predictions), BASE_V_CHOICE(prediction_kinds), "next", LS_KEY_RUN},
    {"serve_thread",
     "live on the CPU, make next forecasts on a thread of their own while a training step runs "
     "(with the parameters before the step), so that a record read meanwhile does not wait for "
     "the step; false: they wait",
     F(serve_thread), BASE_V_CHOICE(bools), "true", LS_KEY_RUN},
    {"predictions_commit_ms",
     "the predictions topic's transactions commit at most this long after their first forecast "
     "(read_committed consumers see forecasts then)",
     F(predictions_commit_ms), BASE_V_INT(0, 600000), "100", LS_KEY_RUN},
    {"predictions_buffer",
     "forecasts held for the predictions topic (a broker outage fills it, then training pauses; "
     "nothing is dropped)",
     F(predictions_buffer), BASE_V_I64(1, 1e9), "1048576", LS_KEY_RUN},
    {"health_snapshot_failures",
     "with --snapshot-dir and --http: /health answers 503 once this many snapshots in a row have "
     "failed (a full or read-only disk), long before the newest one's age passes "
     "--health-snapshot-age; a commit ends the run of failures",
     F(health_snapshot_failures), BASE_V_INT(1, 1000000), "3", LS_KEY_RUN},
};
#undef F
#undef S
static const size_t n_keys = sizeof keys / sizeof keys[0];
_Static_assert(sizeof keys / sizeof keys[0] <= TRAIN_KEYS_MAX, "TRAIN_KEYS_MAX is too small");

const ls_train_key_t *ls_train_conf_keys(void) {
  static ls_train_key_t list[sizeof keys / sizeof keys[0] + 1];
  if (list[0].key == NULL)
    for (size_t i = 0; i < n_keys; i++)
      list[i] = (ls_train_key_t){keys[i].name, keys[i].help, keys[i].def, keys[i].flags};
  return list;
}

/* The key, spelled with underscores or (as on the command line) dashes. */
static const base_key_t *find_key(const char *key) {
  return base_keys_find(keys, n_keys, key);
}

const base_key_t *train_conf_table(size_t *n) {
  if (n != NULL) *n = n_keys;
  return keys;
}

/* The index of a key of the table (one that exists). */
static size_t find_key_index(const char *key) {
  return (size_t)(find_key(key) - keys);
}

/* The table's defaults; none given. */
static void conf_defaults(ls_train_conf_t *c) {
  memset(c, 0, sizeof *c);
  /* The defaults are the table's (checked by the tests: test_train_conf). */
  (void)base_keys_defaults(keys, n_keys, c);
}

/* The item i of a comma-separated list into buf (blanks around it
 * dropped); NULL when the list has fewer. */
static const char *list_item(const char *list, int i, char *buf, size_t size) {
  const char *s = list;
  for (int k = 0; k < i; k++) {
    s = strchr(s, ',');
    if (s == NULL) return NULL;
    s++;
  }
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strcspn(s, ",");
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  snprintf(buf, size, "%.*s", (int)n, s);
  return buf;
}

static int list_count(const char *list) {
  int n = 1;
  for (const char *s = list; *s; s++)
    n += *s == ',';
  return n;
}

ls_err_t train_conf_resolve(ls_train_conf_t *c) {
  int const named = c->format == LS_FORMAT_JSON || c->format == LS_FORMAT_AVRO;
  int const features_key = (int)(find_key_index("features"));
  if (named) {
    LS_RETURN_IF(c->fields[0] == '\0', LS_ERR_INVALID_ARG,
                 "--format %s needs --fields: the record's fields to train on, in order (such "
                 "as --fields px,qty)",
                 ls_format2str((ls_format_t)c->format));
    int const n = list_count(c->fields);
    LS_RETURN_IF(c->given[features_key] && c->features != n, LS_ERR_INVALID_ARG,
                 "--features %d, but --fields names %d: leave --features out (it is the number "
                 "of fields)",
                 c->features, n);
    LS_RETURN_IF(n > LS_FEATURES_MAX, LS_ERR_INVALID_ARG, "--fields names %d, at most %d", n,
                 LS_FEATURES_MAX);
    c->features = n;
  } else {
    LS_RETURN_IF(c->fields[0] || c->key_field[0] || c->time_field[0], LS_ERR_INVALID_ARG,
                 "--fields, --key-field and --time-field read json and avro records, not %s "
                 "(--format json or avro; --feature-names names the features of any format)",
                 ls_format2str((ls_format_t)c->format));
  }
  LS_RETURN_IF(c->feature_names[0] && list_count(c->feature_names) != c->features,
               LS_ERR_INVALID_ARG, "--feature-names names %d features, the records hold %d",
               list_count(c->feature_names), c->features);
  /* Names label figures in JSON, Prometheus' text and TensorBoard's tags. */
  for (const char *p = c->feature_names[0] ? c->feature_names : c->fields; *p; p++)
    LS_RETURN_IF(*p == '"' || *p == '\\' || (unsigned char)*p < 0x20, LS_ERR_INVALID_ARG,
                 "feature names and fields may not hold quotes, backslashes or control "
                 "characters ('%s')",
                 c->feature_names[0] ? c->feature_names : c->fields);
  return LS_OK;
}

ls_err_t train_conf_check_settled(const ls_train_conf_t *c) {
  LS_RETURN_IF(c->given[find_key_index("calibration_rate")] && c->quantiles[0] == '\0',
               LS_ERR_INVALID_ARG,
               "--calibration-rate %g calibrates the quantiles, and this run has none: give "
               "--quantiles (such as 0.1,0.5,0.9), or leave --calibration-rate out",
               c->calibration_rate);
  return LS_OK;
}

const char *train_conf_feature_name(const ls_train_conf_t *c, int f, char *buf, size_t size) {
  int const named = c->format == LS_FORMAT_JSON || c->format == LS_FORMAT_AVRO;
  if (c->feature_names[0] && list_item(c->feature_names, f, buf, size) != NULL && buf[0])
    return buf;
  if (named && c->fields[0] && list_item(c->fields, f, buf, size) != NULL && buf[0]) return buf;
  snprintf(buf, size, "%d", f);
  return buf;
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

ls_err_t ls_train_conf_set(ls_train_conf_t *c, const char *key, const char *value) {
  LS_RETURN_IF(c == NULL || key == NULL || value == NULL, LS_ERR_INVALID_ARG,
               "conf, key or value is NULL");
  const base_key_t *const k = find_key(key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "unknown key '%s'", key);
  LS_FORWARD_IF_ERROR(base_key_set(k, c, value));
  c->given[k - keys] = 1;
  return LS_OK;
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
