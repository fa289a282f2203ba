/*
 * Test helpers for snapshots (snap_util.h).
 */
#define _GNU_SOURCE /* nftw */
#include "snap_util.h"

#include "snapshot_format.h" /* the module sections, to compare and copy */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t next(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

/* Floats like a model's or a state's, with a few special bit patterns. */
static void fill(float *v, size_t n, uint32_t *s) {
  for (size_t i = 0; i < n; i++)
    v[i] = (float)((double)next(s) / 4294967296.0 - 0.5);
  if (n >= 4) {
    uint32_t const nan = 0x7fc01234u, denormal = 0x00000123u;
    v[0] = -0.0f;
    memcpy(&v[1], &nan, sizeof nan);
    memcpy(&v[2], &denormal, sizeof denormal);
  }
}

/* Doubles like a normaliser's: large, small, and -0.0. */
static void fill_d(double *v, size_t n, uint32_t *s) {
  for (size_t i = 0; i < n; i++)
    v[i] = ((double)next(s) / 4294967296.0 - 0.5) * (i % 3 == 0 ? 1e8 : 1e-3);
  if (n >= 2) v[1] = -0.0;
}

/* Host-side state of series i, calibration (rank 0) and replay memories:
 * the layouts SU_STATS_F, SU_STATS_O, SU_MODEL_X, SU_MEM_CAP x SU_MEM_ENTRY. */
enum { SU_STATS_F = 3, SU_STATS_O = 2, SU_MODEL_X = 7, SU_MEM_CAP = 3, SU_MEM_ENTRY = 5 };

/* Series in flight, one of each partition of snap with 1..9 rows (keys
 * "in-RANK-I" of 1..255 bytes), F = SU_IN_F. */
static void fill_inflight(ls_snapshot_t *snap, int rank, uint32_t *s) {
  cr_assert_eq(ls_snapshot_set_inflight_features(snap, SU_IN_F), LS_OK, "%s", ls_last_error());
  for (size_t i = 0; i < ls_snapshot_partition_count(snap); i++) {
    int32_t part;
    int64_t off;
    cr_assert_eq(ls_snapshot_get_partition(snap, i, &part, &off), LS_OK);
    int const rows = 1 + (int)(next(s) % 9);
    int64_t offsets[9], times[9];
    float x[9 * SU_IN_F];
    for (int r = 0; r < rows; r++)
      offsets[r] = 3 * r + (int64_t)(next(s) % 3), times[r] = r % 3 == 1 ? -1 : 1000 + r;
    fill(x, (size_t)rows * SU_IN_F, s);
    char key[255];
    size_t const len = i % 2 ? 255 : (size_t)snprintf(key, sizeof key, "in-%d-%zu", rank, i);
    if (i % 2) memset(key, 'q', sizeof key), key[3] = (char)('0' + rank);
    ls_inflight_t const in = {
        key,   len, part, (int64_t)(next(s) % 50), 1000 + rows, (int)(i % 2), rows, offsets,
        times, x,   0};
    cr_assert_eq(ls_snapshot_add_inflight(snap, &in), LS_OK, "%s", ls_last_error());
  }
}

static void fill_extra(ls_snapshot_t *snap, int rank, uint32_t *s) {
  fill_inflight(snap, rank, s);
  for (size_t i = 0; i < ls_snapshot_series_count(snap); i++) {
    ls_series_stats_t st;
    cr_assert_eq(ls_snapshot_series_stats(snap, i, &st), LS_OK, "%s", ls_last_error());
    *st.norm_n = (int64_t)(next(s) % 100000);
    fill_d(st.norm, SU_STATS_F * LS_NORM_STATS, s);
    fill_d(st.errors, SU_STATS_O * 2, s);
    for (int k = 0; k < LS_SERVE_FIELDS; k++) /* offsets and steps >= 0; a time may be -1 */
      st.serve[k] = (int64_t)(next(s) % 1000000) - (k == LS_SERVE_TIME);
    fill_d(st.pending, SU_STATS_O, s);
    fill_d(st.tail, SU_STATS_F, s);
    fill_d(st.model, st.model_n, s);
  }
  float mem[SU_MEM_CAP * SU_MEM_ENTRY];
  for (size_t i = 0; i < ls_snapshot_partition_count(snap); i++) {
    fill(mem, SU_MEM_CAP * SU_MEM_ENTRY, s);
    int64_t const filled = (int64_t)(next(s) % (SU_MEM_CAP + 1));
    cr_assert_eq(ls_snapshot_set_memory(snap, i, filled, (int64_t)(next(s) % SU_MEM_CAP), mem),
                 LS_OK, "%s", ls_last_error());
  }
  if (rank != 0) return;
  ls_shape_t shape;
  cr_assert_eq(ls_snapshot_get_shape(snap, &shape), LS_OK);
  size_t const O = (size_t)shape.output_size;
  double *const m = malloc(2 * O * sizeof *m);
  int64_t *const k = malloc(O * sizeof *k);
  fill_d(m, 2 * O, s);
  for (size_t j = 0; j < O; j++)
    k[j] = (int64_t)next(s);
  /* Module sections as a module would put them (content opaque here): a
   * calibration-like one and a float one. */
  uint8_t calib[3 * 64 * 8];
  memcpy(calib, m, 2 * O * 8), memcpy(calib + 2 * O * 8, k, O * 8);
  cr_assert_eq(ls_snapshot_put_section(snap, SU_SECTION_BYTES, 1, 0, calib, 3 * O * 8), LS_OK, "%s",
               ls_last_error());
  free(m), free(k);
  float extra[4];
  fill(extra, 4, s);
  cr_assert_eq(
      ls_snapshot_put_section(snap, SU_SECTION_FLOATS, 2, LS_SNAPSHOT_FLOATS, extra, sizeof extra),
      LS_OK, "%s", ls_last_error());
}

ls_snapshot_t *su_snapshot(const ls_shape_t *shape, int world, int rank, int64_t step,
                           size_t series, size_t parts, uint32_t seed) {
  uint32_t s = seed * 2654435761u + 12345u;
  ls_snapshot_t *snap = NULL;
  cr_assert_eq(ls_snapshot_new(shape, series / 2, 1, &snap), LS_OK, "%s", ls_last_error());
  ls_snapshot_info_t const info = {step, 0x5eedull, 0xf00dfacecafeull, world, rank, 5 + seed};
  cr_assert_eq(ls_snapshot_set_info(snap, &info), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_set_stats_shape(snap, SU_STATS_F, SU_STATS_O), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_snapshot_set_model_width(snap, SU_MODEL_X), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_set_memory_shape(snap, SU_MEM_CAP, SU_MEM_ENTRY), LS_OK, "%s",
               ls_last_error());
  if (rank == 0) {
    size_t n = 0;
    cr_assert_eq(ls_param_count(shape, &n), LS_OK);
    float *p = malloc(3 * n * sizeof *p);
    fill(p, 3 * n, &s);
    cr_assert_eq(ls_snapshot_set_model(snap, p, p + n, p + 2 * n, n, 17 + seed), LS_OK, "%s",
                 ls_last_error());
    free(p);
  }
  size_t const row = (size_t)shape->num_layers * shape->hidden_size;
  float *h = malloc(row * sizeof *h), *c = malloc(row * sizeof *c);
  for (size_t i = 0; i < series; i++) {
    char key[255];
    size_t const len = i % 7 == 3 ? 255 : i % 11 == 5 ? 1 : 8 + next(&s) % 24;
    for (size_t k = 0; k < len; k++)
      key[k] = (char)('a' + next(&s) % 26);
    /* rank and index, then a NUL or 0xff byte inside the key (where it fits) */
    int const n = snprintf(key, len, "r%d-%zu", rank, i);
    if (n >= 0 && (size_t)n + 1 < len) key[n] = i % 2 ? '\0' : '\xff';
    int32_t const part = rank + world * (int32_t)(next(&s) % (parts ? parts : 1));
    ls_series_info_t const si = {key,
                                 len,
                                 part,
                                 -1,
                                 (int64_t)(next(&s) % 1000),
                                 (int64_t)(next(&s) % 100000),
                                 (int64_t)next(&s) % 1000000 - 1,
                                 (int64_t)next(&s) % 1000000 - 1,
                                 (int64_t)(next(&s) % 5000)};
    fill(h, row, &s);
    fill(c, row, &s);
    cr_assert_eq(ls_snapshot_add_series(snap, &si, h, c), LS_OK, "%s", ls_last_error());
  }
  free(h), free(c);
  for (size_t p = 0; p < parts; p++)
    cr_assert_eq(
        ls_snapshot_add_partition(snap, rank + world * (int32_t)p, (int64_t)(next(&s) % 1000000)),
        LS_OK, "%s", ls_last_error());
  fill_extra(snap, rank, &s);
  return snap;
}

ls_snapshotter_t *su_writer(const ls_shape_t *shape, const char *dir, int level, int keep) {
  ls_snapshot_conf_t conf;
  ls_snapshot_conf_init(&conf);
  conf.level = level;
  conf.keep = keep;
  ls_snapshotter_t *w = NULL;
  cr_assert_eq(ls_snapshotter_new(dir, shape, &conf, &w), LS_OK, "%s", ls_last_error());
  return w;
}

void su_copy(ls_snapshot_t *dst, const ls_snapshot_t *src) {
  ls_snapshot_reset(dst);
  ls_snapshot_info_t info;
  ls_snapshot_model_t m;
  cr_assert_eq(ls_snapshot_get_info(src, &info), LS_OK);
  cr_assert_eq(ls_snapshot_set_info(dst, &info), LS_OK, "%s", ls_last_error());
  if (ls_snapshot_get_model(src, &m) == LS_OK)
    cr_assert_eq(ls_snapshot_set_model(dst, m.params, m.adam_m, m.adam_v, m.n, m.adam_steps), LS_OK,
                 "%s", ls_last_error());
  su_copy_sections(dst, src);
  int F, O;
  size_t cap, entry;
  ls_snapshot_stats_shape(src, &F, &O);
  ls_snapshot_memory_shape(src, &cap, &entry);
  cr_assert_eq(ls_snapshot_set_stats_shape(dst, F, O), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_snapshot_set_model_width(dst, ls_snapshot_model_width(src)), LS_OK, "%s",
               ls_last_error());
  cr_assert_eq(ls_snapshot_set_memory_shape(dst, cap, entry), LS_OK, "%s", ls_last_error());
  for (size_t i = 0; i < ls_snapshot_series_count(src); i++) {
    ls_series_info_t si;
    const float *h, *c;
    cr_assert_eq(ls_snapshot_get_series(src, i, &si, &h, &c), LS_OK);
    cr_assert_eq(ls_snapshot_add_series(dst, &si, h, c), LS_OK, "%s", ls_last_error());
    ls_series_stats_t a, b;
    if (F == 0) continue;
    cr_assert_eq(ls_snapshot_series_stats((ls_snapshot_t *)src, i, &a), LS_OK);
    cr_assert_eq(ls_snapshot_series_stats(dst, i, &b), LS_OK);
    cr_assert_eq(ls_series_stats_copy(&b, &a, F, O), LS_OK);
  }
  for (size_t i = 0; i < ls_snapshot_partition_count(src); i++) {
    int32_t p;
    int64_t off, filled, nx;
    const float *mem;
    cr_assert_eq(ls_snapshot_get_partition(src, i, &p, &off), LS_OK);
    cr_assert_eq(ls_snapshot_add_partition(dst, p, off), LS_OK, "%s", ls_last_error());
    if (cap > 0 && ls_snapshot_get_memory(src, i, &filled, &nx, &mem) == LS_OK)
      cr_assert_eq(ls_snapshot_set_memory(dst, i, filled, nx, mem), LS_OK, "%s", ls_last_error());
  }
  cr_assert_eq(ls_snapshot_set_inflight_features(dst, ls_snapshot_inflight_features(src)), LS_OK);
  for (size_t i = 0; i < ls_snapshot_inflight_count(src); i++) {
    ls_inflight_t in;
    cr_assert_eq(ls_snapshot_get_inflight(src, i, &in), LS_OK);
    cr_assert_eq(ls_snapshot_add_inflight(dst, &in), LS_OK, "%s", ls_last_error());
  }
}

/* The series in flight of a and b are the same, in order. */
static void expect_same_inflight(const ls_snapshot_t *a, const ls_snapshot_t *b) {
  int const F = ls_snapshot_inflight_features(a);
  cr_assert_eq(F, ls_snapshot_inflight_features(b), "record widths differ");
  size_t const Q = ls_snapshot_inflight_count(a);
  cr_assert_eq(Q, ls_snapshot_inflight_count(b), "series in flight differ in number");
  for (size_t i = 0; i < Q; i++) {
    ls_inflight_t x, y;
    cr_assert_eq(ls_snapshot_get_inflight(a, i, &x), LS_OK);
    cr_assert_eq(ls_snapshot_get_inflight(b, i, &y), LS_OK);
    cr_assert(x.key_len == y.key_len && !memcmp(x.key, y.key, x.key_len) &&
                  x.partition == y.partition && x.index == y.index && x.last_time == y.last_time &&
                  x.reset == y.reset && x.rows == y.rows,
              "series in flight %zu differs", i);
    cr_assert_arr_eq(x.offsets, y.offsets, (size_t)x.rows * 8, "in flight %zu: offsets", i);
    cr_assert_arr_eq(x.times, y.times, (size_t)x.rows * 8, "in flight %zu: times", i);
    cr_assert_arr_eq(x.x, y.x, (size_t)x.rows * (size_t)F * 4, "in flight %zu: values", i);
  }
}

/* The host-side state, calibration and memories of a and b are bit-identical. */
static void expect_same_extra(const ls_snapshot_t *a, const ls_snapshot_t *b) {
  int Fa, Oa, Fb, Ob;
  size_t ca, ea, cb, eb;
  ls_snapshot_stats_shape(a, &Fa, &Oa);
  ls_snapshot_stats_shape(b, &Fb, &Ob);
  ls_snapshot_memory_shape(a, &ca, &ea);
  ls_snapshot_memory_shape(b, &cb, &eb);
  cr_assert(Fa == Fb && Oa == Ob && ca == cb && ea == eb &&
                ls_snapshot_model_width(a) == ls_snapshot_model_width(b),
            "layouts differ");
  for (size_t i = 0; Fa > 0 && i < ls_snapshot_series_count(a); i++) {
    ls_series_stats_t x, y;
    cr_assert_eq(ls_snapshot_series_stats((ls_snapshot_t *)a, i, &x), LS_OK);
    cr_assert_eq(ls_snapshot_series_stats((ls_snapshot_t *)b, i, &y), LS_OK);
    cr_assert(*x.norm_n == *y.norm_n, "series %zu: normaliser counts differ", i);
    cr_assert_arr_eq(x.norm, y.norm, (size_t)Fa * LS_NORM_STATS * sizeof(double),
                     "series %zu: normaliser differs", i);
    cr_assert_arr_eq(x.errors, y.errors, (size_t)Oa * 2 * sizeof(double),
                     "series %zu: error sums differ", i);
    cr_assert_arr_eq(x.serve, y.serve, LS_SERVE_FIELDS * sizeof(int64_t),
                     "series %zu: forecasts going out differ", i);
    cr_assert_arr_eq(x.pending, y.pending, (size_t)Oa * sizeof(double),
                     "series %zu: pending forecast differs", i);
    cr_assert_arr_eq(x.tail, y.tail, (size_t)Fa * sizeof(double), "series %zu: tail differs", i);
    cr_assert(x.model_n == y.model_n, "series %zu: model widths differ", i);
    if (x.model_n > 0)
      cr_assert_arr_eq(x.model, y.model, x.model_n * sizeof(double), "series %zu: model differs",
                       i);
  }
  for (size_t i = 0; ca > 0 && i < ls_snapshot_partition_count(a); i++) {
    int64_t fa, na, fb, nb;
    const float *ma, *mb;
    cr_assert_eq(ls_snapshot_get_memory(a, i, &fa, &na, &ma), LS_OK);
    cr_assert_eq(ls_snapshot_get_memory(b, i, &fb, &nb, &mb), LS_OK);
    cr_assert(fa == fb && na == nb, "partition %zu: memory counts differ", i);
    cr_assert_arr_eq(ma, mb, ca * ea * sizeof(float), "partition %zu: memory differs", i);
  }
  /* Module sections: the same ids, versions, flags and bytes. */
  cr_assert_eq(a->n_modules, b->n_modules, "module sections: %d and %d", a->n_modules,
               b->n_modules);
  for (int i = 0; i < a->n_modules; i++) {
    const struct snap_module_s *const x = &a->modules[i], *const y = snap_module(b, x->id);
    cr_assert_not_null(y, "section %u missing", x->id);
    cr_assert(x->version == y->version && x->flags == y->flags && x->bytes == y->bytes &&
                  (x->bytes == 0 || !memcmp(x->data, y->data, x->bytes)),
              "section %u differs", x->id);
  }
}

void su_copy_sections(ls_snapshot_t *dst, const ls_snapshot_t *src) {
  for (int i = 0; i < src->n_modules; i++) {
    const struct snap_module_s *const m = &src->modules[i];
    if (m->id == LS_SNAPSHOT_SECTION_EVICTED) continue; /* the series in flight's: with them */
    cr_assert_eq(ls_snapshot_put_section(dst, m->id, m->version, m->flags, m->data, m->bytes),
                 LS_OK, "%s", ls_last_error());
  }
}

void su_expect_same(const ls_snapshot_t *a, const ls_snapshot_t *b) {
  ls_shape_t sa, sb;
  ls_snapshot_info_t ia, ib;
  cr_assert_eq(ls_snapshot_get_shape(a, &sa), LS_OK);
  cr_assert_eq(ls_snapshot_get_shape(b, &sb), LS_OK);
  cr_assert_arr_eq(&sa, &sb, sizeof sa, "shapes differ");
  cr_assert_eq(ls_snapshot_get_info(a, &ia), LS_OK);
  cr_assert_eq(ls_snapshot_get_info(b, &ib), LS_OK);
  cr_assert(ia.step == ib.step && ia.seed == ib.seed && ia.fingerprint == ib.fingerprint &&
                ia.world == ib.world && ia.rank == ib.rank && ia.updates == ib.updates,
            "info differs: step %lld/%lld rank %d/%d", (long long)ia.step, (long long)ib.step,
            ia.rank, ib.rank);
  ls_snapshot_model_t ma, mb;
  ls_err_t const ea = ls_snapshot_get_model(a, &ma), eb = ls_snapshot_get_model(b, &mb);
  cr_assert_eq(ea, eb, "one holds a model, the other not");
  if (ea == LS_OK) {
    cr_assert_eq(ma.n, mb.n);
    cr_assert_eq(ma.adam_steps, mb.adam_steps);
    cr_assert_arr_eq(ma.params, mb.params, ma.n * sizeof(float), "params differ");
    cr_assert_arr_eq(ma.adam_m, mb.adam_m, ma.n * sizeof(float), "adam_m differs");
    cr_assert_arr_eq(ma.adam_v, mb.adam_v, ma.n * sizeof(float), "adam_v differs");
  }
  size_t const S = ls_snapshot_series_count(a), row = (size_t)sa.num_layers * sa.hidden_size;
  cr_assert_eq(S, ls_snapshot_series_count(b), "series counts differ");
  for (size_t i = 0; i < S; i++) {
    ls_series_info_t x, y;
    const float *hx, *cx, *hy, *cy;
    cr_assert_eq(ls_snapshot_get_series(a, i, &x, &hx, &cx), LS_OK);
    cr_assert_eq(ls_snapshot_get_series(b, i, &y, &hy, &cy), LS_OK);
    cr_assert(x.key_len == y.key_len && !memcmp(x.key, y.key, x.key_len) &&
                  y.key[y.key_len] == '\0',
              "series %zu: keys differ", i);
    cr_assert(x.partition == y.partition && x.windows == y.windows && x.records == y.records &&
                  x.last_offset == y.last_offset && x.last_time == y.last_time &&
                  x.active == y.active,
              "series %zu: counts differ", i);
    cr_assert_arr_eq(hx, hy, row * sizeof(float), "series %zu: h differs", i);
    cr_assert_arr_eq(cx, cy, row * sizeof(float), "series %zu: c differs", i);
  }
  size_t const P = ls_snapshot_partition_count(a);
  cr_assert_eq(P, ls_snapshot_partition_count(b), "partition counts differ");
  for (size_t i = 0; i < P; i++) {
    int32_t pa, pb;
    int64_t oa, ob;
    cr_assert_eq(ls_snapshot_get_partition(a, i, &pa, &oa), LS_OK);
    cr_assert_eq(ls_snapshot_get_partition(b, i, &pb, &ob), LS_OK);
    cr_assert(pa == pb && oa == ob, "partition %zu differs", i);
  }
  expect_same_extra(a, b);
  expect_same_inflight(a, b);
}

char *su_temp_dir(void) {
  char *const dir = strdup("/tmp/lstream-snap-test-XXXXXX");
  cr_assert_not_null(mkdtemp(dir), "mkdtemp failed");
  return dir;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

void su_remove(const char *path) {
  nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void su_snap_path(char *buf, const char *dir, int64_t step, const char *name) {
  if (name == NULL)
    snprintf(buf, PATH_MAX, "%s/snap-%012lld", dir, (long long)step);
  else
    snprintf(buf, PATH_MAX, "%s/snap-%012lld/%s", dir, (long long)step, name);
}

void su_write_snapshot(const char *dir, const ls_shape_t *shape, int world, int64_t step,
                       size_t series, uint32_t seed, const ls_snapshot_conf_t *conf, int keep,
                       ls_snapshot_t **out) {
  for (int r = 0; r < world; r++) {
    ls_snapshot_t *const s =
        su_snapshot(shape, world, r, step, series + (size_t)r, 2 + (size_t)r, seed + (uint32_t)r);
    cr_assert_eq(ls_snapshot_write_shard(s, dir, conf), LS_OK, "%s", ls_last_error());
    if (out != NULL)
      out[r] = s;
    else
      ls_snapshot_destroy(s);
  }
  cr_assert_eq(ls_snapshot_commit(dir, step, world, keep), LS_OK, "%s", ls_last_error());
}

/* Opens path for reading and writing, or fails the test. */
static int open_rw(const char *path) {
  int const fd = open(path, O_RDWR);
  cr_assert(fd >= 0, "cannot open %s", path);
  return fd;
}

void su_flip_bit(const char *path, uint64_t offset, int bit) {
  int const fd = open_rw(path);
  unsigned char b;
  cr_assert_eq(pread(fd, &b, 1, (off_t)offset), 1, "%s: no byte at %llu", path,
               (unsigned long long)offset);
  b ^= (unsigned char)(1u << bit);
  cr_assert_eq(pwrite(fd, &b, 1, (off_t)offset), 1);
  close(fd);
}

void su_truncate(const char *path, uint64_t size) {
  cr_assert_eq(truncate(path, (off_t)size), 0, "cannot truncate %s", path);
}

void su_poke_u32(const char *path, uint64_t offset, uint32_t value) {
  int const fd = open_rw(path);
  cr_assert_eq(pwrite(fd, &value, sizeof value, (off_t)offset), (ssize_t)sizeof value);
  close(fd);
}

uint64_t su_file_size(const char *path) {
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "cannot stat %s", path);
  return (uint64_t)st.st_size;
}

ls_series_table_t *su_table(const ls_shape_t *shape, int n, int F, int O, size_t X, int parts,
                            ls_engine_t **eng) {
  ls_engine_conf_t ec;
  ls_engine_conf_init(&ec);
  ec.shape = *shape, ec.max_batch = 4, ec.max_window = 3, ec.threads = 1;
  cr_assert_eq(ls_engine_new(&ec, eng), LS_OK, "%s", ls_last_error());
  ls_series_table_t *tab = NULL;
  cr_assert_eq(ls_series_table_new(*eng, 8, &tab), LS_OK);
  cr_assert_eq(ls_series_table_keep_stats(tab, F, O), LS_OK, "%s", ls_last_error());
  cr_assert_eq(ls_series_table_keep_model(tab, X), LS_OK, "%s", ls_last_error());
  for (int k = 0; k < n; k++) {
    char key[16];
    int64_t slot;
    snprintf(key, sizeof key, "k%d", k);
    cr_assert_eq(ls_series_table_slot(tab, key, strlen(key), k % parts, &slot), LS_OK);
    cr_assert_eq(slot, k);
    ls_series_stats_t st;
    cr_assert_eq(ls_series_table_stats(tab, slot, &st), LS_OK);
    for (size_t i = 0; i < X; i++)
      st.model[i] = k * 1e4 + (double)i;
  }
  return tab;
}
