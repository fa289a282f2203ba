/*
 * The background snapshot writer (include/lstream/state.h, "Background
 * writer"): a thread with a one-job slot and two snapshots that it swaps
 * with the caller, so that the step loop hands a snapshot over without
 * waiting on compression or I/O and without allocating; and the book of
 * its segments (snapshot_segment.c), so that a window in flight is written
 * once however many snapshots hold it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/clock.h"
#include "snapshot_format.h"

typedef enum job_e { JOB_NONE = 0, JOB_SHARD, JOB_COMMIT } job_t;

struct ls_snapshotter_s {
  char *dir;
  ls_snapshot_conf_t conf;
  snap_encoder_t *enc;
  ls_snapshot_t *staging; /* the caller's */
  ls_snapshot_t *writing; /* the thread's: being written, or written last */
  snap_book_t book;       /* its segments: read while the caller fills staging, changed by
                             the thread while it writes (never both: see submit) */

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a job was posted, or quit */
  pthread_cond_t idle; /* a job finished */
  /* Under lock: */
  job_t job;
  int64_t job_step;
  int job_world;
  int quit;
  ls_snapshotter_status_t status;
};

/* Runs one job; errors land in the status. */
static void run_job(ls_snapshotter_t *w, job_t job, int64_t step, int world) {
  double const t0 = base_now_s();
  ls_error_clear();
  ls_err_t err = LS_OK;
  if (job == JOB_SHARD) {
    err = snap_write_shard(w->enc, w->writing, w->dir);
    /* The segments it does not reference: no later snapshot will. */
    if (err == LS_OK) err = snap_segments_sweep(&w->book, w->writing, w->dir);
    if (err == LS_OK && world == 1 && !w->conf.deferred)
      err = snap_commit(w->enc, w->dir, step, 1, w->conf.keep);
  } else {
    err = snap_commit(w->enc, w->dir, step, world, w->conf.keep);
  }
  pthread_mutex_lock(&w->lock);
  ls_snapshotter_status_t *const s = &w->status;
  s->err = err;
  snprintf(s->message, sizeof s->message, "%s", err == LS_OK ? "" : ls_last_error());
  s->seconds = base_now_s() - t0;
  if (err != LS_OK) s->failures++;
  if (err == LS_OK && job == JOB_SHARD) s->written_step = step;
  if (err == LS_OK && (job == JOB_COMMIT || (world == 1 && !w->conf.deferred)))
    s->committed_step = step;
  s->busy = 0;
  if (job == JOB_SHARD) __atomic_store_n(&w->book.writing, 0, __ATOMIC_RELEASE);
  w->job = JOB_NONE;
  pthread_cond_broadcast(&w->idle);
  pthread_mutex_unlock(&w->lock);
}

static void *thread_main(void *arg) {
  ls_snapshotter_t *const w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (w->job == JOB_NONE && !w->quit)
      pthread_cond_wait(&w->wake, &w->lock);
    if (w->job == JOB_NONE) break; /* quit, nothing left to do */
    job_t const job = w->job;
    int64_t const step = w->job_step;
    int const world = w->job_world;
    pthread_mutex_unlock(&w->lock);
    run_job(w, job, step, world);
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

ls_err_t ls_snapshotter_new(const char *dir, const ls_shape_t *shape,
                            const ls_snapshot_conf_t *conf, ls_snapshotter_t **out) {
  LS_RETURN_IF(dir == NULL || out == NULL, LS_ERR_INVALID_ARG, "dir or out is NULL");
  *out = NULL;
  LS_FORWARD_IF_ERROR(ls_snapshot_conf_check(conf));
  ls_snapshotter_t *w = calloc(1, sizeof *w);
  LS_RETURN_IF(w == NULL, LS_ERR_NOMEM, "no memory for a snapshot writer");
  w->conf = *conf;
  w->status.written_step = w->status.committed_step = -1;
  w->dir = strdup(dir);
  ls_err_t err = w->dir ? LS_OK : ls_error_set(LS_ERR_NOMEM, "no memory for a path");
  if (err == LS_OK) err = snap_book_init(&w->book);
  if (err == LS_OK) err = ls_snapshot_new(shape, 0, 0, &w->staging);
  if (err == LS_OK) err = ls_snapshot_new(shape, 0, 0, &w->writing);
  if (err == LS_OK) err = snap_encoder_new(conf, &w->enc);
  if (err == LS_OK) w->staging->book = w->writing->book = &w->book;
  int started = 0;
  if (err == LS_OK) {
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->idle, NULL);
    started = pthread_create(&w->thread, NULL, thread_main, w) == 0;
    if (!started) {
      pthread_cond_destroy(&w->idle);
      pthread_cond_destroy(&w->wake);
      pthread_mutex_destroy(&w->lock);
      err = ls_error_set(LS_ERR_NOMEM, "cannot start the snapshot writer's thread");
    }
  }
  if (err != LS_OK) {
    snap_encoder_destroy(w->enc);
    ls_snapshot_destroy(w->staging);
    ls_snapshot_destroy(w->writing);
    snap_book_free(&w->book);
    free(w->dir);
    free(w);
    return err;
  }
  *out = w;
  return LS_OK;
}

void ls_snapshotter_destroy(ls_snapshotter_t *w) {
  if (w == NULL) return;
  pthread_mutex_lock(&w->lock);
  w->quit = 1; /* the thread finishes a posted job first */
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->idle);
  pthread_cond_destroy(&w->wake);
  pthread_mutex_destroy(&w->lock);
  snap_encoder_destroy(w->enc);
  ls_snapshot_destroy(w->staging);
  ls_snapshot_destroy(w->writing);
  snap_book_free(&w->book);
  free(w->dir);
  free(w);
}

ls_snapshot_t *ls_snapshotter_staging(ls_snapshotter_t *w) {
  return w == NULL ? NULL : w->staging;
}

/* Posts a job unless one is running (*busy = 1). For a shard, swaps the
 * snapshots: the thread only touches `writing` while a job runs; one whose
 * windows by reference were kept before the book last changed (filled while
 * the thread wrote) is refused. */
static ls_err_t post(ls_snapshotter_t *w, job_t job, int64_t step, int world, int *busy) {
  pthread_mutex_lock(&w->lock);
  *busy = w->job != JOB_NONE;
  ls_err_t err = LS_OK;
  if (!*busy && job == JOB_SHARD && w->staging->book_gen >= 0 &&
      w->staging->book_gen != w->book.generation)
    err = ls_error_set(LS_ERR_STATE,
                       "the staging snapshot was filled while the writer wrote: fill it again "
                       "while the writer is idle (ls_snapshotter_poll)");
  if (!*busy && err == LS_OK) {
    if (job == JOB_SHARD) {
      __atomic_store_n(&w->book.writing, 1, __ATOMIC_RELEASE);
      ls_snapshot_t *const t = w->writing;
      w->writing = w->staging;
      w->staging = t;
    }
    w->job = job;
    w->job_step = step;
    w->job_world = world;
    w->status.busy = 1;
    pthread_cond_signal(&w->wake);
  }
  pthread_mutex_unlock(&w->lock);
  return err;
}

ls_err_t ls_snapshotter_submit(ls_snapshotter_t *w, int *busy) {
  LS_RETURN_IF(w == NULL || busy == NULL, LS_ERR_INVALID_ARG, "writer or busy is NULL");
  const ls_snapshot_info_t *const info = &w->staging->info;
  LS_RETURN_IF(info->world < 1, LS_ERR_STATE,
               "the staging snapshot has no step, world and rank: call ls_snapshot_set_info");
  LS_RETURN_IF(w->staging->has_model != (info->rank == 0), LS_ERR_INVALID_ARG,
               "rank %d's part %s a model: rank 0's part and only it holds one", (int)info->rank,
               w->staging->has_model ? "holds" : "lacks");
  return post(w, JOB_SHARD, info->step, info->world, busy);
}

ls_err_t ls_snapshotter_commit(ls_snapshotter_t *w, int64_t step, int world, int *busy) {
  LS_RETURN_IF(w == NULL || busy == NULL, LS_ERR_INVALID_ARG, "writer or busy is NULL");
  LS_RETURN_IF(step < 0 || world < 1, LS_ERR_INVALID_ARG, "step %lld of world %d", (long long)step,
               world);
  return post(w, JOB_COMMIT, step, world, busy);
}

ls_err_t ls_snapshotter_poll(ls_snapshotter_t *w, ls_snapshotter_status_t *out) {
  LS_RETURN_IF(w == NULL || out == NULL, LS_ERR_INVALID_ARG, "writer or out is NULL");
  pthread_mutex_lock(&w->lock);
  *out = w->status;
  pthread_mutex_unlock(&w->lock);
  return LS_OK;
}

ls_err_t ls_snapshotter_flush(ls_snapshotter_t *w) {
  LS_RETURN_IF(w == NULL, LS_ERR_INVALID_ARG, "writer is NULL");
  pthread_mutex_lock(&w->lock);
  while (w->job != JOB_NONE)
    pthread_cond_wait(&w->idle, &w->lock);
  ls_snapshotter_status_t const s = w->status;
  pthread_mutex_unlock(&w->lock);
  return s.err == LS_OK ? LS_OK : ls_error_set(s.err, "%s", s.message);
}
