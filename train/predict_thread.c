/*
 * The serving thread (predict_internal.h; issue 30 item 5): live on the
 * CPU, forecasts of records read while a training step runs do not wait
 * for the step.
 *
 * The trainer's thread marks the engine-only parts of a step — the
 * training forward, the backward, the update and the replay updates — as
 * sections (predict_section_open / _close). Inside one it touches nothing
 * but the trainer's engine and its own buffers, so the serving thread may
 * take the tap's records and serve them meanwhile: with a serving engine of
 * its own (one thread, a batch of one time step) whose parameters are the
 * trainer's as published when the section opened (a copy taken between
 * sections whenever the optimizer's update count moved: the second buffer
 * of a double buffer), and a serving state table in that engine's memory.
 * Outside sections the serving thread waits and the trainer's thread
 * serves as before (between steps, while it waits for windows, after a
 * step's forecasts), so the serving state is never touched by both: a
 * section's close returns once the serving thread is idle.
 *
 * What the serving thread leaves: a record of a series the series table
 * does not know yet (its slot would grow the table under the step's feet)
 * waits for the next drain outside a section (predict.c's later list: at
 * the latest, predict_after_section as the step's update ends); the
 * trained states of series being re-synced are copied into the serving
 * table first (the tables of two engines do not mix).
 *
 * Polling: inside a section the thread looks for records every POLL_US
 * microseconds (the tap never waits; a window of records costs a lock and
 * a swap), so a record read while a step runs is served within about that
 * much of being read, plus its forward.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "predict_internal.h"
#include "view.h"

enum { POLL_US = 250 };

typedef struct serve_thread_s {
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  predict_serve_fn serve; /* what it runs */
  /* Under mu: */
  int open;                    /* in a section: the thread may serve */
  int busy;                    /* it is serving */
  int quit;                    /* predict_thread_stop */
  int64_t step;                /* the published parameters' steps (the forecasts' step) */
  volatile sig_atomic_t *stop; /* the trainer's */
  ls_err_t err;                /* the thread's failure, LS_OK none */
  char msg[512];               /* and its message */
  /* The trainer's thread only: */
  int published;   /* the serving engine holds parameters */
  int64_t updates; /* the optimizer's update count they are of */
  float *params;   /* [n] the copy's buffer */
  size_t n;
} serve_thread_t;

/* The thread: serves while a section is open, every POLL_US, until told
 * to quit; stops serving (and waits to be stopped) after a failure. */
static void *serving(void *opaque) {
  predict_t *const pr = opaque;
  serve_thread_t *const t = pr->thread;
  pthread_mutex_lock(&t->mu);
  while (!t->quit) {
    if (!t->open || t->err != LS_OK) {
      pthread_cond_wait(&t->cv, &t->mu);
      continue;
    }
    int64_t const step = t->step;
    volatile sig_atomic_t *const stop = t->stop;
    t->busy = 1;
    pthread_mutex_unlock(&t->mu);
    pr->on_thread = 1;
    ls_err_t const err = t->serve(pr, step, stop);
    pr->on_thread = 0;
    pthread_mutex_lock(&t->mu);
    if (err != LS_OK) {
      t->err = err;
      snprintf(t->msg, sizeof t->msg, "%s", ls_last_error());
    }
    t->busy = 0;
    pthread_cond_broadcast(&t->cv);
    if (t->open && !t->quit && t->err == LS_OK) {
      struct timespec at;
      clock_gettime(CLOCK_MONOTONIC, &at);
      at.tv_nsec += POLL_US * 1000L;
      if (at.tv_nsec >= 1000000000L) at.tv_sec++, at.tv_nsec -= 1000000000L;
      (void)pthread_cond_timedwait(&t->cv, &t->mu, &at);
    }
  }
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* The serving engine: the trainer's shape and losses, its largest batch,
 * one time step, one thread. */
static ls_err_t serving_engine(const predict_t *pr, ls_engine_t **out) {
  ls_engine_t *const eng = pr->v->eng;
  ls_engine_conf_t ec = *ls_engine_get_conf(eng);
  ec.max_window = 1;
  ec.threads = 1;
  LS_FORWARD_IF_ERROR(ls_engine_new(&ec, out));
  int const W = ec.shape.output_size;
  ls_loss_col_t *const cols = calloc((size_t)W, sizeof *cols);
  ls_err_t err = cols != NULL ? ls_engine_get_loss(eng, cols, W)
                              : ls_error_set(LS_ERR_NOMEM, "no memory for %d losses", W);
  if (err == LS_OK) err = ls_engine_set_loss(*out, cols, W);
  free(cols);
  if (err != LS_OK) ls_engine_destroy(*out), *out = NULL;
  return err;
}

ls_err_t predict_thread_start(predict_t *pr, predict_serve_fn serve) {
  if (!pr->live || !pr->v->conf->serve_thread || ls_engine_device(pr->v->eng) != LS_DEVICE_CPU)
    return LS_OK;
  serve_thread_t *const t = calloc(1, sizeof *t);
  LS_RETURN_IF(t == NULL, LS_ERR_NOMEM, "no memory for the serving thread");
  t->serve = serve;
  t->n = ls_engine_param_count(pr->v->eng);
  t->params = malloc(t->n * sizeof *t->params);
  ls_engine_t *eng = NULL;
  ls_err_t err = t->params != NULL
                     ? serving_engine(pr, &eng)
                     : ls_error_set(LS_ERR_NOMEM, "no memory for %zu serving parameters", t->n);
  pthread_condattr_t ca;
  int made = 0;
  if (err == LS_OK && pthread_condattr_init(&ca) == 0) {
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
        pthread_cond_init(&t->cv, &ca) == 0) {
      made = 1;
      if (pthread_mutex_init(&t->mu, NULL) != 0) pthread_cond_destroy(&t->cv), made = 0;
    }
    pthread_condattr_destroy(&ca);
  }
  if (err == LS_OK && !made)
    err = ls_error_set(LS_ERR_NOMEM, "cannot make the serving thread's lock");
  if (err == LS_OK) {
    pr->thread = t, pr->eng = eng;
    int const rc = pthread_create(&t->tid, NULL, serving, pr);
    if (rc == 0) return LS_OK;
    pr->thread = NULL, pr->eng = pr->v->eng;
    pthread_mutex_destroy(&t->mu), pthread_cond_destroy(&t->cv);
    err = ls_error_set(LS_ERR_IO, "cannot start the serving thread: %s", strerror(rc));
  }
  ls_engine_destroy(eng);
  free(t->params), free(t);
  return err;
}

void predict_thread_stop(predict_t *pr) {
  serve_thread_t *const t = pr->thread;
  if (t == NULL) return;
  pthread_mutex_lock(&t->mu);
  t->quit = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->tid, NULL);
  pthread_mutex_destroy(&t->mu), pthread_cond_destroy(&t->cv);
  free(t->params), free(t);
  pr->thread = NULL;
}

ls_err_t predict_thread_publish(predict_t *pr) {
  serve_thread_t *const t = pr->thread;
  if (t == NULL) return LS_OK;
  int64_t const updates = ls_engine_optimizer_steps(pr->v->eng);
  if (t->published && updates == t->updates) return LS_OK;
  LS_FORWARD_IF_ERROR(ls_engine_read_params(pr->v->eng, t->params, t->n));
  LS_FORWARD_IF_ERROR(ls_engine_write_params(pr->eng, t->params, t->n));
  t->published = 1, t->updates = updates;
  return LS_OK;
}

ls_err_t predict_section_open(predict_t *pr, int64_t step, volatile sig_atomic_t *stop) {
  if (pr == NULL || pr->thread == NULL) return LS_OK;
  serve_thread_t *const t = pr->thread;
  LS_FORWARD_IF_ERROR(predict_thread_publish(pr));
  pthread_mutex_lock(&t->mu);
  t->open = 1, t->step = step, t->stop = stop;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  return LS_OK;
}

ls_err_t predict_section_close(predict_t *pr) {
  if (pr == NULL || pr->thread == NULL) return LS_OK;
  serve_thread_t *const t = pr->thread;
  pthread_mutex_lock(&t->mu);
  t->open = 0;
  while (t->busy)
    pthread_cond_wait(&t->cv, &t->mu);
  ls_err_t const err = t->err;
  char msg[sizeof t->msg];
  memcpy(msg, t->msg, sizeof msg);
  pthread_mutex_unlock(&t->mu);
  return err == LS_OK ? LS_OK : ls_error_set(err, "serving a forecast: %s", msg);
}
