/*
 * `lstream inspect SNAPSHOT` and `lstream export SNAPSHOT ...`: look into a
 * snapshot (verifying every checksum), and write its model and states as
 * safetensors files for PyTorch.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit.h"
#include "cli.h"
#include "lstream/state.h"

/* Partitions listed per rank by inspect before "...". */
#define SHOWN_PARTITIONS 8

static void print_rejected(void *opaque, const char *path, ls_err_t err, const char *why) {
  char logger[64];
  snprintf(logger, sizeof logger, "lstream %s", (const char *)opaque);
  cli_log(CLI_WARN, logger, "passed over %s: %s: %s", path, ls_err2str(err), why);
}

int cli_snapshot_resolve(const char *cmd, const char *arg, char *path, size_t size, FILE *note) {
  char manifest[PATH_MAX], root[PATH_MAX];
  struct stat st;
  snprintf(manifest, sizeof manifest, "%s/manifest", arg);
  if (stat(manifest, &st) == 0) {
    snprintf(path, size, "%s", arg);
    return CLI_EXIT_OK;
  }
  /* DIR/latest, the file that names the newest snapshot: DIR's latest. */
  size_t const n = strlen(arg);
  const char *const base = strrchr(arg, '/') != NULL ? strrchr(arg, '/') + 1 : arg;
  snprintf(root, sizeof root, "%s", arg);
  if (!strcmp(base, "latest") && stat(arg, &st) == 0 && S_ISREG(st.st_mode) && n < sizeof root)
    snprintf(root, sizeof root, "%.*s", base - arg > 1 ? (int)(base - arg - 1) : 1,
             base > arg ? arg : "."); /* (not its last '/', unless it is "/") */
  ls_err_t const err = ls_snapshot_find_latest(root, print_rejected, (void *)cmd, path, size);
  if (err != LS_OK) return cli_fail(err, "%s: no snapshot to read", arg);
  if (path[0] == '\0' && stat(arg, &st) != 0)
    return cli_fail(LS_ERR_IO, "%s: %s", arg, strerror(errno));
  if (path[0] == '\0') return cli_fail(LS_OK, "%s: no snapshot there (nor a manifest)", arg);
  fprintf(note, "%s: latest good snapshot is %s\n", arg, path);
  return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* inspect                                                                   */

typedef struct totals_s {
  uint64_t stored, raw, sections, files, series, partitions;
} totals_t;

static void print_file(const char *name, const ls_snapshot_file_t *f, totals_t *t) {
  uint64_t raw = 0;
  for (int i = 0; i < f->n_sections; i++)
    raw += f->sections[i].raw;
  printf("%s: %llu bytes (%llu raw, ratio %.2f), format version %u, crc32c %08x: ok\n", name,
         (unsigned long long)f->size, (unsigned long long)raw, (double)raw / (double)f->size,
         f->version, f->crc);
  printf("  %-11s %10s %12s %12s %7s %8s  %s\n", "section", "offset", "stored", "raw", "ratio",
         "shuffled", "crc32c");
  for (int i = 0; i < f->n_sections; i++) {
    const ls_snapshot_section_t *const s = &f->sections[i];
    char module[64] = ""; /* a module section's id, version and whether it is required */
    if (s->id >= LS_SNAPSHOT_SECTION_FIRST)
      snprintf(module, sizeof module, "  (section %u, version %u, %s)", s->id, s->version,
               s->required ? "required" : "optional");
    printf("  %-11s %10llu %12llu %12llu %7.2f %8s  %08x ok%s\n", s->name,
           (unsigned long long)s->offset, (unsigned long long)s->stored, (unsigned long long)s->raw,
           s->stored ? (double)s->raw / (double)s->stored : 0.0, s->shuffled ? "yes" : "no", s->crc,
           module);
  }
  t->stored += f->size;
  t->raw += raw;
  t->sections += (uint64_t)f->n_sections;
  t->files++;
}

static void print_part(int rank, const ls_snapshot_t *s, totals_t *t) {
  ls_snapshot_model_t m;
  if (ls_snapshot_get_model(s, &m) == LS_OK) {
    ls_shape_t shape;
    ls_snapshot_info_t info;
    ls_snapshot_get_shape(s, &shape);
    ls_snapshot_get_info(s, &info);
    printf("model: I=%d H=%d L=%d O=%d, %zu parameters, %lld optimizer updates, step %lld, "
           "seed %llu, config fingerprint %016llx\n",
           shape.input_size, shape.hidden_size, shape.num_layers, shape.output_size, m.n,
           (long long)m.adam_steps, (long long)info.step, (unsigned long long)info.seed,
           (unsigned long long)info.fingerprint);
  }
  size_t const S = ls_snapshot_series_count(s), P = ls_snapshot_partition_count(s);
  printf("rank %d: %zu series, %zu partitions (partition@resume offset:", rank, S, P);
  for (size_t i = 0; i < P && i < SHOWN_PARTITIONS; i++) {
    int32_t p;
    int64_t off;
    ls_snapshot_get_partition(s, i, &p, &off);
    printf(" %d@%lld", (int)p, (long long)off);
  }
  printf("%s)\n", P > SHOWN_PARTITIONS ? " ..." : "");
  size_t const Q = ls_snapshot_inflight_count(s);
  int64_t rows = 0;
  for (size_t i = 0; i < Q; i++) {
    ls_inflight_t in;
    if (ls_snapshot_get_inflight(s, i, &in) == LS_OK) rows += in.rows;
  }
  printf("rank %d: %zu series with %lld records in flight (not yet trained, before the resume "
         "offsets)\n",
         rank, Q, (long long)rows);
  t->series += S;
  t->partitions += P;
}

int cmd_inspect(int argc, char **argv) {
  cli_opt_t const opts[] = {{0}};
  cli_spec_t const spec = {
      "inspect",
      "SNAPSHOT",
      "Verifies and describes a snapshot: SNAPSHOT is a snapshot directory\n"
      "(DIR/snap-<step>), or a snapshot root DIR (or DIR/latest) for its latest\n"
      "good snapshot.\n"
      "Prints the manifest, every file's sections with their sizes, compression\n"
      "ratios and checksums, the model's shape and step, and each rank's series\n"
      "and partitions. Every checksum is verified and every section decoded; the\n"
      "exit status is 1 on any fault.\n",
      opts,
      NULL,
      1};
  cli_args_t args;
  int const parsed = cli_parse(&spec, argc, argv, &args);
  if (parsed != CLI_EXIT_OK) return parsed == CLI_DONE ? CLI_EXIT_OK : parsed;
  if (args.n != 1) return cli_usage_error("inspect", "expected one SNAPSHOT");
  char path[PATH_MAX];
  int rc = cli_snapshot_resolve("inspect", args.pos[0], path, sizeof path, stdout);
  if (rc != CLI_EXIT_OK) return rc;
  ls_snapshot_manifest_t *man = NULL;
  ls_err_t err = ls_snapshot_manifest_read(path, &man);
  if (err != LS_OK) return cli_fail(err, "FAULT: %s", path);
  int64_t step;
  int32_t world;
  ls_snapshot_file_t file;
  ls_snapshot_manifest_get(man, &step, &world);
  ls_snapshot_manifest_file(man, &file);
  totals_t t = {0};
  printf("snapshot %s: step %lld, %d rank%s\n", path, (long long)step, (int)world,
         world > 1 ? "s" : "");
  print_file("manifest", &file, &t);
  printf("  %-6s %12s %9s %10s %10s\n", "shard", "bytes", "crc32c", "series", "partitions");
  for (int r = 0; r < world; r++) {
    ls_snapshot_shard_t sh;
    ls_snapshot_manifest_shard(man, r, &sh);
    printf("  %-6d %12llu  %08x %10llu %10llu\n", r, (unsigned long long)sh.size, sh.crc,
           (unsigned long long)sh.series, (unsigned long long)sh.partitions);
  }
  int faults = 0;
  for (int r = 0; r < world; r++) {
    ls_snapshot_t *s = NULL;
    err = ls_snapshot_load_shard(man, r, &s);
    if (err != LS_OK) {
      cli_fail(err, "FAULT: shard-%d", r);
      faults++;
      continue;
    }
    char name[32];
    snprintf(name, sizeof name, "shard-%d", r);
    ls_snapshot_get_file(s, &file);
    print_file(name, &file, &t);
    print_part(r, s, &t);
    ls_snapshot_destroy(s);
  }
  ls_snapshot_manifest_destroy(man);
  printf("total: %llu series, %llu partitions, %llu bytes in %llu files (%llu raw, ratio %.2f)\n",
         (unsigned long long)t.series, (unsigned long long)t.partitions,
         (unsigned long long)t.stored, (unsigned long long)t.files, (unsigned long long)t.raw,
         t.stored ? (double)t.raw / (double)t.stored : 0.0);
  if (faults > 0) {
    printf("verification: FAILED, %d of %d shards damaged\n", faults, (int)world);
    return CLI_EXIT_FAIL;
  }
  printf("verification: ok, %llu section checksums and %llu file checksums\n",
         (unsigned long long)t.sections, (unsigned long long)t.files);
  return CLI_EXIT_OK;
}

/* ------------------------------------------------------------------------ */
/* export                                                                    */

/* The calibration of the snapshot's forecasts as export tensors: alpha
 * [S, O] (each series' factor: the run's, per target) and calibration
 * [O, 3] into t [2], their data into *buf (malloc'd); *n = 0 for a
 * snapshot without settings (format 4: its calibration is not exported). */
static int calibration_tensors(ls_snapshot_t *const *parts, int world, ls_export_tensor_t *t,
                               int *n, double **buf) {
  int F = 0, O = 0;
  size_t S = 0;
  ls_snapshot_stats_shape(parts[0], &F, &O);
  for (int r = 0; r < world; r++)
    S += ls_snapshot_series_count(parts[r]);
  *n = 0;
  *buf = NULL;
  uint32_t version = 0;
  const void *data = NULL;
  size_t len = 0;
  if (O < 1 || S == 0 ||
      ls_snapshot_get_section(parts[0], LS_SNAPSHOT_SECTION_SETTINGS, &version, &data, &len) !=
          LS_OK) {
    printf("(no calibration exported: a snapshot of format 4 or without series)\n");
    return CLI_EXIT_OK;
  }
  double *const b = malloc(((size_t)O * 4 + S * (size_t)O) * sizeof *b);
  if (b == NULL) return cli_fail(LS_ERR_NOMEM, "no memory for the calibration");
  double *const alpha = b, *const moments = b + O, *const each = b + 4 * (size_t)O;
  ls_err_t const err = audit_calibration(parts[0], O, alpha, moments);
  if (err != LS_OK) {
    free(b);
    return cli_fail(err, "cannot read the snapshot's calibration");
  }
  for (size_t s = 0; s < S; s++)
    memcpy(each + s * (size_t)O, alpha, (size_t)O * sizeof *alpha);
  t[0] = (ls_export_tensor_t){"alpha", S, (size_t)O, each,
                              "each series' calibration factor per target: forecast = base + "
                              "alpha * scale * prediction (the run's, the same for every series)"};
  t[1] = (ls_export_tensor_t){"calibration", (size_t)O, 3, moments,
                              "per target: the averages of p y and p p (alpha = clamp(their "
                              "ratio, 0, 1)), the forecasts they have seen"};
  *n = 2;
  *buf = b;
  return CLI_EXIT_OK;
}

/* Writes the states of every shard of the snapshot at path, with the
 * calibration. */
static int export_states(const char *path, const char *out) {
  ls_snapshot_manifest_t *man = NULL;
  ls_err_t err = ls_snapshot_manifest_read(path, &man);
  if (err != LS_OK) return cli_fail(err, "cannot read the manifest of %s", path);
  int64_t step;
  int32_t world;
  ls_snapshot_manifest_get(man, &step, &world);
  ls_snapshot_t **const parts = calloc((size_t)world, sizeof *parts);
  err = parts ? LS_OK : LS_ERR_NOMEM;
  for (int r = 0; r < world && err == LS_OK; r++)
    err = ls_snapshot_load_shard(man, r, &parts[r]);
  int rc = err != LS_OK ? cli_fail(err, "cannot load %s", path) : CLI_EXIT_OK;
  ls_export_tensor_t extra[2];
  int n_extra = 0;
  double *buf = NULL;
  if (rc == CLI_EXIT_OK) rc = calibration_tensors(parts, world, extra, &n_extra, &buf);
  if (rc == CLI_EXIT_OK &&
      (err = ls_snapshot_export_states_with((const ls_snapshot_t *const *)parts, world, extra,
                                            n_extra, out)) != LS_OK)
    rc = cli_fail(err, "cannot export the states");
  for (int r = 0; parts && r < world; r++)
    ls_snapshot_destroy(parts[r]);
  free(parts), free(buf);
  ls_snapshot_manifest_destroy(man);
  return rc;
}

int cmd_export(int argc, char **argv) {
  const char *model_out = NULL, *states_out = NULL;
  cli_opt_t const opts[] = {
      {.name = "safetensors",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &model_out,
       .help = "the model, with PyTorch's names for a module M with\n"
               "M.lstm = nn.LSTM(I, H, L) and M.head = nn.Linear(H, O):\n"
               "lstm.weight_ih_l0, ..., head.weight, head.bias\n"
               "(M.load_state_dict(tensors, strict=True) loads it)"},
      {.name = "states",
       .arg = "FILE",
       .kind = CLI_TEXT,
       .dst = &states_out,
       .help = "every rank's series states h, c [S, L, H]; a trainer's\n"
               "snapshot also has each series' normaliser: norm_n [S]\n"
               "(I64, records consumed), norm [S, F, 4] (F64: location,\n"
               "variance, mean square change, last value per feature),\n"
               "errors [S, O, 2] (F64: the model's and the last value's\n"
               "squared errors per target, data units), alpha [S, O]\n"
               "(F64: each series' calibration factor per target, the\n"
               "run's) and calibration [O, 3] (F64: its moments); and\n"
               "in __metadata__ \"keys\" (a JSON array of strings, key\n"
               "byte b as code point b) and \"partitions\" (a JSON array)"},
      {0},
  };
  cli_spec_t const spec = {
      "export",
      "SNAPSHOT [--safetensors FILE] [--states FILE]",
      "Writes a snapshot (a snapshot directory, or a root DIR or DIR/latest for its\n"
      "latest good one) as safetensors files (F32, little-endian); at least one of\n"
      "the two.\n",
      opts,
      NULL,
      1};
  cli_args_t args;
  int const parsed = cli_parse(&spec, argc, argv, &args);
  if (parsed != CLI_EXIT_OK) return parsed == CLI_DONE ? CLI_EXIT_OK : parsed;
  if (args.n == 0) return cli_usage_error("export", "expected a SNAPSHOT");
  const char *const snapshot = args.pos[0];
  if (model_out == NULL && states_out == NULL)
    return cli_usage_error("export", "nothing to do: give --safetensors FILE and/or --states FILE");
  char path[PATH_MAX];
  int rc = cli_snapshot_resolve("export", snapshot, path, sizeof path, stdout);
  if (rc != CLI_EXIT_OK) return rc;
  if (model_out != NULL) {
    ls_snapshot_manifest_t *man = NULL;
    ls_snapshot_t *s = NULL;
    ls_err_t err = ls_snapshot_manifest_read(path, &man);
    if (err == LS_OK) err = ls_snapshot_load_shard(man, 0, &s);
    if (err == LS_OK) err = ls_snapshot_export_model(s, model_out);
    ls_snapshot_destroy(s);
    ls_snapshot_manifest_destroy(man);
    if (err != LS_OK) return cli_fail(err, "cannot export the model of %s", path);
    printf("model of %s -> %s\n", path, model_out);
  }
  if (states_out != NULL) {
    rc = export_states(path, states_out);
    if (rc != CLI_EXIT_OK) return rc;
    printf("states of %s -> %s\n", path, states_out);
  }
  return CLI_EXIT_OK;
}
