/*
 * `lstream predict --snapshot DIR --series KEY --records FILE`: one series'
 * forecasts from a snapshot's model, state, normaliser and calibration, as
 * the trainer made them (train/audit.h): an auditor's check of a forecast.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "cli.h"
#include "lstream/ingest.h"

/* The records of key in a file of lines series,time_ms,v1,...,vF (what
 * `lstream produce --csv` reads): times [n] and values [n, F]. */
typedef struct records_s {
  int64_t *time;
  float *x;
  int64_t n, cap;
} records_t;

static int push(records_t *r, int64_t t, const float *x, int F) {
  if (r->n == r->cap) {
    int64_t const cap = r->cap ? 2 * r->cap : 1024;
    int64_t *const tm = realloc(r->time, (size_t)cap * sizeof *tm);
    if (tm != NULL) r->time = tm;
    float *const v = realloc(r->x, (size_t)cap * (size_t)F * sizeof *v);
    if (v != NULL) r->x = v;
    if (tm == NULL || v == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for the records");
    r->cap = cap;
  }
  r->time[r->n] = t;
  memcpy(r->x + (size_t)r->n * (size_t)F, x, (size_t)F * sizeof *x);
  r->n++;
  return CLI_EXIT_OK;
}

static int read_records(const char *path, const char *key, int F, records_t *r) {
  FILE *const f = fopen(path, "r");
  if (f == NULL) return cli_fail(LS_ERR_IO, "--records %s: %s", path, strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  float x[LS_FEATURES_MAX];
  int rc = CLI_EXIT_OK;
  size_t const klen = strlen(key);
  for (long no = 1; rc == CLI_EXIT_OK && getline(&line, &cap, f) >= 0; no++) {
    if (line[0] == '#' || line[0] == '\n' || (no == 1 && !strncmp(line, "series,", 7))) continue;
    if (strncmp(line, key, klen) != 0 || line[klen] != ',') continue;
    char *end = NULL;
    errno = 0;
    long long const t = strtoll(line + klen + 1, &end, 10);
    const char *const values = end;
    if (end == line + klen + 1 || *end != ',' || errno != 0 ||
        ls_record_decode(LS_FORMAT_CSV, values + 1, strlen(values + 1), F, x) != LS_REJECT_NONE)
      rc = cli_fail(LS_OK, "--records %s:%ld: not series,time_ms,v1,...,v%d", path, no, F);
    else
      rc = push(r, (int64_t)t, x, F);
  }
  free(line);
  fclose(f);
  return rc;
}

/* The forecasts of the records from `skip` on, as CSV into out. */
static int forecast(audit_t *a, const char *key, const records_t *r, int64_t skip, FILE *out) {
  audit_info_t in;
  audit_info(a, &in);
  int64_t const n = r->n - skip;
  size_t const V = (size_t)in.O * (size_t)(1 + in.Q), OH = V * (size_t)in.H; /* a record's */
  double *const v = malloc((size_t)(n > 0 ? n : 1) * OH * sizeof *v);
  if (v == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for %" PRId64 " forecasts", n);
  ls_err_t const err = audit_forecast(a, r->x + (size_t)skip * (size_t)in.F, n, v);
  if (err != LS_OK) {
    free(v);
    return cli_fail(err, "cannot forecast");
  }
  /* With horizons, a row per record and h, as --predictions-out writes them. */
  fprintf(out, "series,record,time,step%s", in.H > 1 ? ",h" : "");
  for (int j = 0; j < in.O; j++)
    fprintf(out, ",forecast_%d", in.feat[j]);
  for (int q = 0; q < in.Q; q++)
    for (int j = 0; j < in.O; j++)
      fprintf(out, ",q%g_%d", in.levels[q], in.feat[j]);
  fputc('\n', out);
  for (int64_t i = 0; i < n; i++)
    for (int h = 1; h <= in.H; h++) {
      fprintf(out, "%s,%" PRId64 ",%" PRId64 ",%" PRId64, key, skip + i, r->time[skip + i],
              in.step);
      if (in.H > 1) fprintf(out, ",%d", h);
      for (size_t k = 0; k < V; k++)
        fprintf(out, ",%.17g", v[(size_t)i * OH + (size_t)(h - 1) * V + k]);
      fputc('\n', out);
    }
  free(v);
  return ferror(out) ? cli_fail(LS_ERR_IO, "cannot write the forecasts") : CLI_EXIT_OK;
}

static void describe(const audit_t *a, const char *key, const char *path, int64_t skip, int64_t n) {
  audit_info_t in;
  audit_info(a, &in);
  fprintf(stderr,
          "lstream predict: series %s at step %" PRId64
          " (%s): its normaliser has consumed %" PRId64
          " records, its last trained record is at offset %" PRId64 "; calibration factor",
          key, in.step, path, in.norm_n, in.last_offset);
  for (int j = 0; j < in.O; j++)
    fprintf(stderr, " %.17g (target %d)", in.alpha[j], in.feat[j]);
  fprintf(stderr,
          "; forecasts after records %" PRId64 " to %" PRId64 " of the file's %" PRId64
          " of the series\n",
          skip, n - 1, n);
}

int cmd_predict(int argc, char **argv) {
  const char *snapshot = NULL, *key = NULL, *records = NULL, *out_path = NULL;
  int64_t skip = -1;
  cli_opt_t const opts[] = {
      {.name = "snapshot",
       .arg = "DIR",
       .kind = CLI_TEXT,
       .dst = &snapshot,
       .flags = CLI_REQUIRED,
       .help = "a snapshot directory (DIR/snap-<step>), or a snapshot\nroot DIR (or DIR/latest) "
               "for its latest"},
      {.name = "series",
       .arg = "KEY",
       .kind = CLI_TEXT,
       .dst = &key,
       .flags = CLI_REQUIRED,
       .help = "the series (its Kafka key)"},
      {.name = "records",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &records,
       .flags = CLI_REQUIRED,
       .help = "its records: lines series,time_ms,v1,...,vF (what\n`lstream produce --csv` "
               "reads; other series' lines skipped)"},
      {.name = "skip",
       .arg = "N",
       .kind = CLI_VALUE,
       .dst = &skip,
       .value = BASE_V_I64(0, 9e15),
       .def = "the records the series has consumed",
       .help = "the series' records in FILE before the first to forecast"},
      {.name = "out",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &out_path,
       .def = "stdout",
       .help = "the forecasts: series,record,time,step,forecast_J... (with --horizon H > 1 "
               "in the snapshot: series,record,time,step,h,forecast_J..., a row per h; with "
               "--quantiles, q<level>_J... after them, as --predictions-out names them)"},
      {0},
  };
  cli_spec_t const spec = {
      "predict",
      "--snapshot DIR --series KEY --records FILE [--skip N] [--out FILE]",
      "Forecasts a series' records from a snapshot: its model, the series' state\n"
      "and normaliser, the run's calibration and settings, records taken a window\n"
      "at a time, each forecast in the data's units as --predictions-out writes\n"
      "it. With FILE holding the series from its first record, the records after\n"
      "those it has consumed are forecast: the trainer's forecasts of the\n"
      "snapshot's step (the rows of that step in --predictions-out) come out bit\n"
      "for bit (a CPU run; a reset gap restarts the trainer's state, not this),\n"
      "quantiles too (calibrated as a replay's step calibrates them: each record\n"
      "moves the series' corrections by the forecasts whose actual it is).\n",
      opts,
      NULL,
      0};
  cli_args_t args;
  int const parsed = cli_parse(&spec, argc, argv, &args);
  if (parsed != CLI_EXIT_OK) return parsed == CLI_DONE ? CLI_EXIT_OK : parsed;
  char path[PATH_MAX];
  int rc = cli_snapshot_resolve("predict", snapshot, path, sizeof path, stderr);
  if (rc != CLI_EXIT_OK) return rc;
  audit_t *a = NULL;
  ls_err_t const err = audit_new(path, key, &a);
  if (err != LS_OK) return cli_fail(err, "cannot predict from %s", path);
  audit_info_t in;
  audit_info(a, &in);
  records_t r = {0};
  rc = read_records(records, key, in.F, &r);
  if (skip < 0) skip = in.norm_n;
  if (rc == CLI_EXIT_OK && skip > r.n)
    rc = cli_fail(LS_OK,
                  "--records %s holds %" PRId64 " records of %s, fewer than the %" PRId64
                  " to skip (those the series has consumed: give the series from its "
                  "first record, or --skip)",
                  records, r.n, key, skip);
  FILE *const out = rc == CLI_EXIT_OK && out_path != NULL ? fopen(out_path, "w") : stdout;
  if (out == NULL) rc = cli_fail(LS_ERR_IO, "--out %s: %s", out_path, strerror(errno));
  if (rc == CLI_EXIT_OK) describe(a, key, path, skip, r.n);
  if (rc == CLI_EXIT_OK) rc = forecast(a, key, &r, skip, out);
  if (out != NULL && out != stdout && fclose(out) != 0 && rc == CLI_EXIT_OK)
    rc = cli_fail(LS_ERR_IO, "--out %s: write failed", out_path);
  free(r.time), free(r.x);
  audit_free(a);
  return rc;
}
