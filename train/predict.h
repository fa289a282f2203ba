/*
 * Forecasts going out (train/ internal; issue 12): after every record of a
 * series, the forecast of its next record (kind next), and on request the
 * test-then-train forecasts behind the prequential loss (kind eval), to a
 * Kafka topic exactly once and/or a CSV file.
 *
 * What a forecast is. A forecast with source offset o is made after the
 * series' record at offset o, of its next record: per target feature, in
 * the data's own units, base + alpha * scale * prediction (prep_record):
 * with --target delta, the record's value plus the calibrated predicted
 * change; with level, the normaliser's location plus the calibrated
 * predicted deviation. An eval forecast is the training forward's, before
 * the step's update (what the reported MSE is computed from). A next
 * forecast is made when its record "arrives": with the latest parameters,
 * from the series' serving state,
 *   - in the step that trains the window holding the record as an input
 *     (its prediction in that window's forward, so in a replay next and eval
 *     forecasts agree), or
 *   - live (the tap on), as soon as the record is read, while its window is
 *     incomplete: the serving path advances the series' serving state (h, c
 *     in a state table of its own, and a copy of its normaliser) one record
 *     at a time with the engine's forward for a batch of series, one time
 *     step; a window taken into a step re-syncs it to the trained state;
 *     on the CPU, a record read while a step runs is served at once on the
 *     serving thread (predict_thread.c) with the parameters the step
 *     started from;
 *   - at the end of a replay, after each series' last record (which no
 *     window holds as an input), from its trained state.
 * A record whose window is complete but not yet in a step waits for it.
 *
 * Horizons (--horizon H > 1). A forecast covers the series' next H
 * records: O H values, h-major ((h - 1) O + j: target j, h records
 * ahead); h = 1's is the model's (the linear path and the LSTM mixed),
 * the later ones the LSTM's (prep.h). The topic's message holds all of
 * them (header lstream-horizon: H); the file has a row per h, its actual
 * written where known when the row is: an eval row's while t + h lies in
 * its window, a next row's where the record h ahead had been read by then
 * (a row is not held for an actual read later).
 *
 * Exactly once (the topic, with --snapshot-dir). Every snapshot records,
 * per series, the last record a next forecast followed (ls_series_stats_t
 * serve), so a resumed run publishes none twice for records it reads again;
 * it also records where this run's messages end in each partition of the
 * topic. A snapshot commits only once every forecast made before it was
 * taken is in a committed transaction. A resumed run reads the topic back
 * from there (read_committed) and leaves out each forecast whose (series,
 * kind) already has one at or after its source offset from this snapshot
 * directory (header lstream-run): what a crash left after the snapshot. So
 * each (series, offset, kind) is published once, and a replay regenerates
 * the same values bit for bit. The file is cut back to its length at the
 * snapshot and written again from there.
 */
#ifndef LSTREAM_TRAIN_PREDICT_H
#define LSTREAM_TRAIN_PREDICT_H

#include <signal.h>
#include <stdint.h>

#include "figures.h"
#include "lstream/ingest.h"
#include "lstream/state.h"
#include "prep.h"

struct train_view_s;
typedef struct predict_s predict_t;

/* Kinds of forecast (ls_train_conf_t.predictions bits). */
enum { PREDICT_NEXT = 1, PREDICT_EVAL = 2 };

/* The forecasts of a trainer (view: its conf, comm, rank, engine, series
 * table, consumer; p: its inputs; fig: the calibration), or *out = NULL
 * when none are asked for. Opens the topic (an error if it cannot be
 * written) and the file. */
ls_err_t predict_new(const struct train_view_s *view, prep_t *p, const figures_t *fig,
                     predict_t **out);
void predict_free(predict_t *pr); /* accepts NULL */

/* 1 when records are to be served as they are read (the consumer's tap). */
int predict_live(const predict_t *pr);

/* After the trainer resumed from snap (NULL: a fresh start): the file cut
 * back, the topic read back for what is there already. */
ls_err_t predict_resume(predict_t *pr, const ls_snapshot_t *snap);

/* After a step's forward, backward and scatter: wins [n] of series slots
 * [n], prepared in p, predicted pred [T, n, O] (h = 1's forecasts) and out
 * [T, n, O H] (the head's outputs, prep.h) with the parameters of `step`
 * steps. Live: then serves what the tap brought. */
ls_err_t predict_step(predict_t *pr, const ls_window_t *const *wins, const int64_t *slots, int n,
                      const float *pred, const float *out, int64_t step,
                      volatile sig_atomic_t *stop);

/* Live, between steps: serves what the tap brought; fails where the
 * publisher failed for good (fenced). */
ls_err_t predict_idle(predict_t *pr, int64_t step, volatile sig_atomic_t *stop);

/* Live on the CPU, the serving thread (predict_thread.c): the trainer's
 * thread enters an engine-only part of a step, where until
 * predict_section_close it touches nothing but its engine and its own
 * buffers; records read meanwhile are served at once on the serving
 * thread, with the parameters the trainer's engine holds now (`step`
 * steps), published to the serving engine. No-ops without the thread (pr
 * NULL included). _close returns once the serving thread is idle again,
 * with its error if it failed. */
ls_err_t predict_section_open(predict_t *pr, int64_t step, volatile sig_atomic_t *stop);
ls_err_t predict_section_close(predict_t *pr);

/* After a section that ends the step (the update's): what the serving
 * thread left for want of a slot (a new series), served now rather than
 * at the next record read. */
ls_err_t predict_after_section(predict_t *pr, int64_t step, volatile sig_atomic_t *stop);

/* At the end of a replay that read everything: after each series' last
 * record. */
ls_err_t predict_finish(predict_t *pr, int64_t step, volatile sig_atomic_t *stop);

/* Into a snapshot being taken (collective: every rank calls it): the
 * file flushed, and rank 0's part gets the run-wide bookkeeping. *mark
 * receives what must be committed before the snapshot may be. */
ls_err_t predict_save(predict_t *pr, ls_snapshot_t *snap, int64_t *mark);

/* 1 once every forecast up to mark is committed (asks for it); waits up to
 * wait_ms. Fails when the topic failed for good. */
ls_err_t predict_durable(predict_t *pr, int64_t mark, int wait_ms, int *done);

/* At the end of a run: the file's rows awaiting an actual written without
 * it, everything committed (within timeout_ms). */
ls_err_t predict_close(predict_t *pr, int timeout_ms);

/* This rank's counts: forecasts made per kind, left out (already in the
 * topic), published (committed), file rows, waits for room in the topic's
 * buffer, next forecasts made while a step ran. */
typedef struct predict_counts_s {
  int64_t next, eval, skipped, published, rows, waits;
  int64_t during_steps; /* next forecasts the serving thread made */
} predict_counts_t;
void predict_counts(const predict_t *pr, predict_counts_t *out);

#endif /* LSTREAM_TRAIN_PREDICT_H */
