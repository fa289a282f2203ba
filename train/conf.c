/*
 * The trainer's configuration (include/lstream/train.h): typed fields, one
 * table of keys that drives parsing, printing and --help, and config files.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

typedef enum key_kind_e { K_STR, K_INT, K_I64, K_DBL, K_ENUM } key_kind_t;

typedef struct key_def_s {
  const char *key;
  const char *help;
  key_kind_t kind;
  size_t offset;  /* of the field in ls_train_conf_t */
  size_t size;    /* K_STR: buffer size */
  double min, max;
  const char *const *choices; /* K_ENUM: names by value, NULL-terminated */
} key_def_t;

static const char *const formats[] = {"f32", "csv", NULL};
static const char *const optimizers[] = {"adam", "adamw", NULL};
static const char *const devices[] = {"cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "tf32", NULL}; /* ls_precision_t order */
static const char *const untils[] = {"live", "end", NULL};
static const char *const bools[] = {"false", "true", NULL};
static const char *const comms[] = {"auto", "none", "mpi", "nccl", NULL};
static const char *const overlaps[] = {"auto", "false", "true", NULL};

#define F(field) offsetof(ls_train_conf_t, field)
#define S(field) sizeof(((ls_train_conf_t *)0)->field)
static const key_def_t keys[] = {
    {"brokers", "bootstrap servers host:port[,...] (required)", K_STR, F(brokers), S(brokers), 0, 0, NULL},
    {"topic", "topic to read (required)", K_STR, F(topic), S(topic), 0, 0, NULL},
    {"format", "record values: f32 (F little-endian floats) or csv", K_ENUM, F(format), 0, 0, 0, formats},
    {"features", "F, values per record", K_INT, F(features), 0, 1, 65536, NULL},
    {"window", "T, time steps per window (TBPTT length)", K_INT, F(window), 0, 1, 65536, NULL},
    {"batch", "B, windows (of distinct series) per step", K_INT, F(batch), 0, 1, 1 << 20, NULL},
    {"hidden", "H, LSTM hidden size", K_INT, F(hidden), 0, 1, 16384, NULL},
    {"layers", "L, stacked LSTM layers", K_INT, F(layers), 0, 1, 64, NULL},
    {"optimizer", "adam (L2 weight decay) or adamw (decoupled)", K_ENUM, F(optimizer), 0, 0, 0, optimizers},
    {"lr", "learning rate", K_DBL, F(lr), 0, 0, 10, NULL},
    {"beta1", "Adam first-moment decay", K_DBL, F(beta1), 0, 0, 0.999999, NULL},
    {"beta2", "Adam second-moment decay", K_DBL, F(beta2), 0, 0, 0.999999999, NULL},
    {"eps", "Adam epsilon (added to sqrt(v))", K_DBL, F(eps), 0, 1e-30, 1, NULL},
    {"weight_decay", "weight decay", K_DBL, F(weight_decay), 0, 0, 1, NULL},
    {"clip", "bound on the global gradient norm; 0 = no clipping", K_DBL, F(clip), 0, 0, 1e30, NULL},
    {"warmup", "updates over which the learning rate ramps up linearly", K_INT, F(warmup), 0, 0, 1 << 30, NULL},
    {"accumulate", "steps whose gradients make one update", K_INT, F(accumulate), 0, 1, 1 << 20, NULL},
    {"seed", "parameter initialisation seed", K_I64, F(seed), 0, 0, 9.2e18, NULL},
    {"device", "cpu or cuda", K_ENUM, F(device), 0, 0, 0, devices},
    {"precision", "GEMM arithmetic: fp32, or tf32 (cuda only: TF32 tensor cores, float32 accumulation and state)", K_ENUM, F(precision), 0, 0, 0, precisions},
    {"threads", "CPU threads; 0 = OMP_NUM_THREADS, else every core the process may use", K_INT, F(threads), 0, 0, 4096, NULL},
    {"until", "end: replay to the high watermarks read at start; live: run until stopped", K_ENUM, F(until), 0, 0, 0, untils},
    {"start", "where partitions start: beginning, end, OFFSET or time:MS", K_STR, F(start), S(start), 0, 0, NULL},
    {"stateless", "true: start every window from a zero state (for comparison)", K_ENUM, F(stateless), 0, 0, 0, bools},
    {"deadline_ms", "live: fire a partial step this long after its first window", K_INT, F(deadline_ms), 0, 1, 3600000, NULL},
    {"queue_windows", "ingest bound on queued windows, per partition", K_INT, F(queue_windows), 0, 1, 1 << 24, NULL},
    {"buffer_records", "ingest bound on records held in memory", K_I64, F(buffer_records), 0, 1, 1e15, NULL},
    {"partitions", "partitions to read: all, or a list such as 0,2,5", K_STR, F(partitions), S(partitions), 0, 0, NULL},
    {"comm", "gradient sums across ranks: auto (mpi/nccl under mpirun), none, mpi, nccl", K_ENUM, F(comm), 0, 0, 0, comms},
    {"overlap", "start each layer's gradient all-reduce as soon as backward finishes it (several ranks, accumulate 1); auto = with nccl only", K_ENUM, F(overlap), 0, 0, 0, overlaps},
    {"comm_always", "true: run the gradient sums even on one rank (with nccl: the NCCL path on one GPU, for tests)", K_ENUM, F(comm_always), 0, 0, 0, bools},
    {"max_steps", "stop after this many steps in all, resumed ones included; 0 = no limit", K_I64, F(max_steps), 0, 0, 1e15, NULL},
    {"snapshot_dir", "directory of snapshots; empty = none", K_STR, F(snapshot_dir), S(snapshot_dir), 0, 0, NULL},
    {"snapshot_every", "snapshot every N steps; 0 = not by steps", K_I64, F(snapshot_every), 0, 0, 1e15, NULL},
    {"snapshot_interval", "snapshot every S seconds; 0 = not by time", K_DBL, F(snapshot_interval), 0, 0, 1e9, NULL},
    {"snapshot_keep", "snapshots kept", K_INT, F(snapshot_keep), 0, 1, 1000000, NULL},
    {"snapshot_level", "zstd compression level of snapshots", K_INT, F(snapshot_level), 0, 1, 22, NULL},
    {"snapshot_threads", "zstd worker threads; 0 = the writer's own thread", K_INT, F(snapshot_threads), 0, 0, 256, NULL},
    {"snapshot_shuffle", "byte-shuffle float arrays before compression", K_ENUM, F(snapshot_shuffle), 0, 0, 0, bools},
    {"resume", "latest (the newest good snapshot in snapshot_dir, if any), none, or a snapshot directory", K_STR, F(resume), S(resume), 0, 0, NULL},
};
#undef F
#undef S
static const size_t n_keys = sizeof keys / sizeof keys[0];

const ls_train_key_t *ls_train_conf_keys(void) {
  static ls_train_key_t list[sizeof keys / sizeof keys[0] + 1];
  if (list[0].key == NULL)
    for (size_t i = 0; i < n_keys; i++) list[i] = (ls_train_key_t){keys[i].key, keys[i].help};
  return list;
}

void train_conf_defaults(ls_train_conf_t *c) {
  memset(c, 0, sizeof *c);
  c->format = 0;
  c->features = 1;
  c->window = 32;
  c->batch = 64;
  c->hidden = 64;
  c->layers = 1;
  c->optimizer = 0;
  c->lr = 1e-3;
  c->beta1 = 0.9;
  c->beta2 = 0.999;
  c->eps = 1e-8;
  c->clip = 1.0;
  c->accumulate = 1;
  c->seed = 1;
  c->until = 0;
  snprintf(c->start, sizeof c->start, "beginning");
  c->deadline_ms = 200;
  c->queue_windows = 4096;
  c->buffer_records = 16777216;
  snprintf(c->partitions, sizeof c->partitions, "all");
  c->snapshot_keep = 3;
  c->snapshot_level = 3;
  c->snapshot_shuffle = 1;
  snprintf(c->resume, sizeof c->resume, "latest");
}

ls_err_t ls_train_conf_new(ls_train_conf_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  ls_train_conf_t *c = malloc(sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for a configuration");
  train_conf_defaults(c);
  *out = c;
  return LS_OK;
}

void ls_train_conf_destroy(ls_train_conf_t *c) {
  if (c == NULL) return;
  train_conf_free_kafka(c);
  free(c);
}

void train_conf_free_kafka(ls_train_conf_t *c) {
  for (int i = 0; i < c->n_kafka; i++) free(c->kafka[i]);
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

static const key_def_t *find_key(const char *key) {
  for (size_t i = 0; i < n_keys; i++)
    if (!strcmp(keys[i].key, key)) return &keys[i];
  /* The command line spells keys with dashes (--weight-decay). */
  char alt[64];
  size_t n = strlen(key);
  if (n >= sizeof alt) return NULL;
  for (size_t i = 0; i <= n; i++) alt[i] = key[i] == '-' ? '_' : key[i];
  for (size_t i = 0; i < n_keys; i++)
    if (!strcmp(keys[i].key, alt)) return &keys[i];
  return NULL;
}

ls_err_t ls_train_conf_set(ls_train_conf_t *c, const char *key, const char *value) {
  LS_RETURN_IF(c == NULL || key == NULL || value == NULL, LS_ERR_INVALID_ARG,
               "conf, key or value is NULL");
  const key_def_t *const k = find_key(key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "unknown key '%s'", key);
  char *const field = (char *)c + k->offset;
  char *end = NULL;
  errno = 0;
  switch (k->kind) {
  case K_STR:
    LS_RETURN_IF(strlen(value) >= k->size, LS_ERR_INVALID_ARG, "%s: value longer than %zu bytes",
                 key, k->size - 1);
    memcpy(field, value, strlen(value) + 1);
    return LS_OK;
  case K_INT:
  case K_I64: {
    long long const v = strtoll(value, &end, 10);
    LS_RETURN_IF(*value == '\0' || *end != '\0' || errno != 0 || v < k->min || (double)v > k->max,
                 LS_ERR_INVALID_ARG, "%s: '%s' is not an integer in [%.0f, %.0f]", key, value,
                 k->min, k->max);
    if (k->kind == K_INT) *(int *)field = (int)v;
    else *(int64_t *)field = v;
    return LS_OK;
  }
  case K_DBL: {
    double const v = strtod(value, &end);
    LS_RETURN_IF(*value == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < k->min ||
                     v > k->max,
                 LS_ERR_INVALID_ARG, "%s: '%s' is not a number in [%g, %g]", key, value, k->min,
                 k->max);
    *(double *)field = v;
    return LS_OK;
  }
  case K_ENUM: {
    char list[128] = "";
    for (int i = 0; k->choices[i] != NULL; i++) {
      if (!strcmp(value, k->choices[i])) {
        *(int *)field = i;
        return LS_OK;
      }
      size_t const len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", k->choices[i]);
    }
    return ls_error_set(LS_ERR_INVALID_ARG, "%s: '%s' is not one of %s", key, value, list);
  }
  }
  return ls_error_set(LS_ERR_INVALID_ARG, "%s: unhandled kind", key);
}

ls_err_t ls_train_conf_get(const ls_train_conf_t *c, const char *key, char *buf, size_t size) {
  LS_RETURN_IF(c == NULL || key == NULL || buf == NULL || size == 0, LS_ERR_INVALID_ARG,
               "conf, key or buffer is NULL");
  const key_def_t *const k = find_key(key);
  LS_RETURN_IF(k == NULL, LS_ERR_UNKNOWN_KEY, "unknown key '%s'", key);
  const char *const field = (const char *)c + k->offset;
  int n = 0;
  switch (k->kind) {
  case K_STR: n = snprintf(buf, size, "%s", field); break;
  case K_INT: n = snprintf(buf, size, "%d", *(const int *)field); break;
  case K_I64: n = snprintf(buf, size, "%lld", (long long)*(const int64_t *)field); break;
  case K_DBL: n = snprintf(buf, size, "%.9g", *(const double *)field); break;
  case K_ENUM: n = snprintf(buf, size, "%s", k->choices[*(const int *)field]); break;
  }
  LS_RETURN_IF(n < 0 || (size_t)n >= size, LS_ERR_INVALID_ARG, "%s: buffer too small", key);
  return LS_OK;
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

/* Trims blanks at both ends, in place. */
static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

ls_err_t ls_train_conf_read(ls_train_conf_t *c, const char *path) {
  LS_RETURN_IF(c == NULL || path == NULL, LS_ERR_INVALID_ARG, "conf or path is NULL");
  FILE *f = fopen(path, "r");
  LS_RETURN_IF(f == NULL, LS_ERR_IO, "cannot open config file %s: %s", path, strerror(errno));
  char line[4096];
  int lineno = 0;
  ls_err_t err = LS_OK;
  while (err == LS_OK && fgets(line, sizeof line, f) != NULL) {
    lineno++;
    char *const s = trim(line);
    if (*s == '\0' || *s == '#') continue;
    char *const eq = strchr(s, '=');
    if (eq == NULL) {
      err = ls_error_set(LS_ERR_INVALID_ARG, "%s:%d: expected KEY = VALUE, got '%s'", path, lineno,
                         s);
      break;
    }
    *eq = '\0';
    char *const key = trim(s), *const value = trim(eq + 1);
    err = ls_train_conf_set(c, key, value);
    if (err != LS_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", ls_last_error());
      ls_error_set(err, "%s:%d: %s", path, lineno, why);
    }
  }
  fclose(f);
  return err;
}
