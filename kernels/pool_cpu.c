/*
 * pool_cpu.h: a fixed pool of threads, woken by a generation counter.
 *
 * A run bumps `gen`; idle workers see it within their spin, or sleep on
 * `work` and are woken by a broadcast. Each worker that took part counts
 * `pending` down; the last one wakes the caller if it went to sleep on
 * `done`. Spinning is bounded by time (POOL_SPIN_NS), so on a busy machine
 * an idle thread gives its core back quickly.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/clock.h"
#include "pool_cpu.h"

/* How long an idle thread (or the caller waiting for the others) spins
 * before it sleeps: long enough to bridge the gap between two runs of one
 * step, short enough to leave a shared core to others. */
#define POOL_SPIN_NS 50000

struct pool_s {
  int threads; /* the caller included */
  pthread_t *tids;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  atomic_uint gen;    /* bumped per run */
  atomic_int pending; /* workers of this run still busy */
  atomic_int stop;
  void (*fn)(void *, int, int);
  void *arg;
  int n; /* threads of this run */
};

typedef struct worker_s {
  pool_t *pool;
  int id;
  void (*init)(void);
} worker_t;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spins until cond(p, v) is false or POOL_SPIN_NS have passed; returns 1 if
 * it became false. */
static int spin_while(pool_t *p, int (*cond)(pool_t *, unsigned), unsigned v) {
  double const until = base_now_s() + POOL_SPIN_NS * 1e-9;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (!cond(p, v)) return 1;
      cpu_relax();
    }
    if (base_now_s() > until) return 0;
  }
}

static int same_gen(pool_t *p, unsigned g) {
  return atomic_load_explicit(&p->gen, memory_order_acquire) == g;
}
static int busy(pool_t *p, unsigned unused) {
  return atomic_load_explicit(&p->pending, memory_order_acquire) != 0;
}

static void *worker_main(void *opaque) {
  worker_t *const w = opaque;
  pool_t *const p = w->pool;
  unsigned seen = 0;
  if (w->init != NULL) w->init();
  for (;;) {
    if (!spin_while(p, same_gen, seen)) {
      pthread_mutex_lock(&p->lock);
      while (same_gen(p, seen))
        pthread_cond_wait(&p->work, &p->lock);
      pthread_mutex_unlock(&p->lock);
    }
    seen = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (atomic_load(&p->stop)) break;
    if (w->id >= p->n) continue;
    p->fn(p->arg, w->id, p->n);
    if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->lock);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
  free(w);
  return NULL;
}

/* Wakes the workers for the run set up in p. */
static void wake(pool_t *p) {
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_acq_rel);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
}

ls_err_t pool_new(int threads, void (*init)(void), pool_t **out) {
  *out = NULL;
  pool_t *p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for the thread pool");
  p->tids = calloc((size_t)(threads > 1 ? threads - 1 : 1), sizeof *p->tids);
  if (p->tids == NULL) {
    free(p);
    return ls_error_set(LS_ERR_NOMEM, "no memory for the thread pool");
  }
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->threads = 1;
  for (int i = 1; i < threads; i++) {
    worker_t *w = malloc(sizeof *w);
    int rc = w == NULL ? -1 : 0;
    if (w != NULL) {
      *w = (worker_t){p, i, init};
      rc = pthread_create(&p->tids[i - 1], NULL, worker_main, w);
      if (rc != 0) free(w);
    }
    if (rc != 0) {
      pool_free(p);
      return ls_error_set(LS_ERR_NOMEM, "could not start CPU thread %d of %d: lower --threads", i,
                          threads);
    }
    p->threads++;
  }
  *out = p;
  return LS_OK;
}

void pool_free(pool_t *p) {
  if (p == NULL) return;
  atomic_store(&p->stop, 1);
  wake(p);
  for (int i = 0; i < p->threads - 1; i++)
    pthread_join(p->tids[i], NULL);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p->tids);
  free(p);
}

void pool_run(pool_t *p, int n, void (*fn)(void *arg, int i, int n), void *arg) {
  n = n < p->threads ? n : p->threads;
  if (n <= 1) {
    fn(arg, 0, 1);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store_explicit(&p->pending, n - 1, memory_order_release);
  wake(p);
  fn(arg, 0, n);
  if (!spin_while(p, busy, 0)) {
    pthread_mutex_lock(&p->lock);
    while (busy(p, 0))
      pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
}
