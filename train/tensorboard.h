/*
 * TensorBoard event files (train/ internal), written without TensorFlow:
 * TFRecord framing (uint64 length, masked CRC-32C of the length, the data,
 * masked CRC-32C of the data; all little-endian) around tensorflow.Event
 * protocol buffers, of which the few fields used are encoded by hand:
 *
 *   Event      1 wall_time double, 2 step int64, 3 file_version string,
 *              5 summary Summary, 7 session_log SessionLog
 *   Summary    1 value Value (repeated)
 *   Value      1 tag string, 2 simple_value float
 *   SessionLog 1 status enum (1 = START)
 *
 * A file begins with file_version "brain.Event:2" and a session start at
 * the first step it will write: TensorBoard's reader then drops every
 * record at or past that step written earlier (by a run that was killed
 * after its last snapshot), so a resumed run's curves stay monotonic.
 */
#ifndef LSTREAM_TRAIN_TENSORBOARD_H
#define LSTREAM_TRAIN_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "lstream/error.h"

typedef struct tb_writer_s tb_writer_t;

/* Creates dir (and its parents) if need be and a new event file in it,
 * events.out.tfevents.<seconds>.<microseconds>.<host>.<pid> (names sort in
 * the order files were made), beginning with the file version and a
 * session start at first_step. */
ls_err_t tb_writer_new(const char *dir, int64_t first_step, tb_writer_t **out);

/* Flushes and closes; accepts NULL. */
void tb_writer_destroy(tb_writer_t *w);

/* One event at step with n scalars tags[i] = values[i] (wall_time: seconds
 * since the epoch). */
ls_err_t tb_writer_scalars(tb_writer_t *w, int64_t step, double wall_time, const char *const *tags,
                           const float *values, int n);

/* Hands what is written to the operating system. */
ls_err_t tb_writer_flush(tb_writer_t *w);

/* The file's path. */
const char *tb_writer_path(const tb_writer_t *w);

#endif /* LSTREAM_TRAIN_TENSORBOARD_H */
