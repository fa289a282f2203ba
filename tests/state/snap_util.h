/*
 * Test helpers for snapshots: reproducible snapshot content, a
 * bit-for-bit comparison, temporary directories and file damage.
 */
#ifndef LSTREAM_TESTS_STATE_SNAP_UTIL_H
#define LSTREAM_TESTS_STATE_SNAP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/state.h"

/* The optional module sections su_snapshot gives rank 0's part (ids no
 * module uses): some bytes, and float32s. */
#define SU_SECTION_BYTES  900
#define SU_SECTION_FLOATS 901

/* The features of the records in flight su_snapshot adds. */
#define SU_IN_F 2

/* A snapshot of `series` series and `parts` partitions for rank of world
 * at step, every value drawn from seed: keys of 1..255 bytes (some with
 * NUL and high bytes inside), partitions p with p % world == rank, states
 * including -0.0, a NaN payload and denormals. Rank 0's holds a model. */
ls_snapshot_t *su_snapshot(const ls_shape_t *shape, int world, int rank, int64_t step,
                           size_t series, size_t parts, uint32_t seed);

/* A background writer into dir for snapshots of shape, at zstd `level`,
 * keeping `keep` snapshots. */
ls_snapshotter_t *su_writer(const ls_shape_t *shape, const char *dir, int level, int keep);

/* Makes dst (reset first) a copy of src through the builders. */
void su_copy(ls_snapshot_t *dst, const ls_snapshot_t *src);

/* Copies src's module sections into dst (rank 0's part: what a resume
 * reads on every rank). */
void su_copy_sections(ls_snapshot_t *dst, const ls_snapshot_t *src);

/* Fails the test unless a and b hold bit-identical content (info, shape,
 * model, series, partitions, module sections). */
void su_expect_same(const ls_snapshot_t *a, const ls_snapshot_t *b);

/* A new engine of shape (*eng) and a table on it of n series "k0".."k<n-1>"
 * (series k in slot k, on partition k % parts) keeping stats of F
 * features and O targets and X doubles of model state each, series k's
 * model[i] = k 1e4 + i. */
ls_series_table_t *su_table(const ls_shape_t *shape, int n, int F, int O, size_t X, int parts,
                            ls_engine_t **eng);

/* A new empty directory under /tmp (malloc'ed path), and its removal with
 * everything below it. */
char *su_temp_dir(void);
void su_remove(const char *path);

/* Path of DIR/snap-<step, 12 digits>[/name] into buf (PATH_MAX). */
void su_snap_path(char *buf, const char *dir, int64_t step, const char *name);

/* Writes every rank's part of a `world`-rank snapshot at step (drawn from
 * seed) and commits it; returns the parts when out is not NULL (else frees
 * them). */
void su_write_snapshot(const char *dir, const ls_shape_t *shape, int world, int64_t step,
                       size_t series, uint32_t seed, const ls_snapshot_conf_t *conf, int keep,
                       ls_snapshot_t **out);

/* File damage: flips bit `bit` of the byte at offset; cuts the file to
 * size; overwrites 4 bytes at offset. */
void su_flip_bit(const char *path, uint64_t offset, int bit);
void su_truncate(const char *path, uint64_t size);
void su_poke_u32(const char *path, uint64_t offset, uint32_t value);
uint64_t su_file_size(const char *path);

#endif
