/*
 * pool_cpu.h: a fixed pool of threads, each woken by its own flag.
 *
 * A run numbers itself (`gen`), sets its function, argument and part
 * count, and then stores its number in the flag (`go`) of each worker it
 * needs; those see it within their spin, or sleep on `work` and are woken
 * by a broadcast. Each of them counts `pending` down; the last one wakes
 * the caller if it went to sleep on `done`. A worker reads the run's
 * function, argument and count only after its own flag said this run, and
 * the caller sets the next run's only after every worker of this one has
 * counted down: so no worker can take a later run's parameters for the
 * run it saw, or run one part twice (with one counter for every worker, a
 * worker left out of a run could read the next run's count and part of it
 * before that run's number was out, then run it again). Spinning is
 * bounded by time (POOL_SPIN_NS), so on a busy machine an idle thread
 * gives its core back quickly.
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

/* The adaptation to a competing load (pool_adapt_end; issue 30 item 3).
 * With another process spinning on one of two cores, the busy loop and
 * the pool's two threads share both cores: each run waits at its end for
 * whichever thread was preempted, and a step takes longer than on one
 * thread of a quiet machine. The caller alone then keeps a core to itself.
 * Units (optimizer updates) run on all threads while their rate (work a
 * second, of the runs that wanted several threads) stays above
 * POOL_ADAPT_SLOW of the best since the last trial; below it (at least
 * POOL_ADAPT_COOL units after a trial: on a noisy machine at most about
 * 1/16 of the units are trials) the next POOL_ADAPT_TRIAL units try the
 * caller alone, kept where POOL_ADAPT_MARGIN faster (as every
 * POOL_ADAPT_RECHECK units, the fifth unit first: a load from the start).
 * Alone, all threads are tried every POOL_ADAPT_RETRY units, and taken
 * back where POOL_ADAPT_MARGIN faster. The results are the same bits
 * either way (lstm_cpu.c: sums by fixed parts). */
#define POOL_ADAPT_SLOW    0.75
#define POOL_ADAPT_MARGIN  1.02
#define POOL_ADAPT_RETRY   8
#define POOL_ADAPT_RECHECK 256
#define POOL_ADAPT_TRIAL   2
#define POOL_ADAPT_COOL    32

struct pool_s {
  int threads; /* the caller included */
  pthread_t *tids;
  pthread_mutex_t lock;
  pthread_cond_t work, done;
  unsigned gen;       /* the last run's number (the caller's alone) */
  atomic_uint *go;    /* [threads] per worker: the number of the run it is to take part in */
  atomic_int pending; /* workers of this run still busy */
  atomic_int stop;
  void (*fn)(void *, int, int);
  void *arg;
  int n; /* threads of this run */
  /* The adaptation (the caller's alone; pool_adapt_end): */
  pool_adapt_t adapt;
  int alone;              /* the runs take the caller alone */
  int trying;             /* units left of a trial of the other choice */
  int fresh;              /* the next unit starts a trial */
  int since;              /* units since the last trial */
  double secs, done_work; /* this unit's runs that wanted several threads */
  double rate[2];         /* work a second on all threads, alone */
  double all_best;        /* the best rate[0] since the last trial */
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

/* Spins until cond(p, id, v) is false or POOL_SPIN_NS have passed;
 * returns 1 if it became false. */
static int spin_while(pool_t *p, int (*cond)(pool_t *, int, unsigned), int id, unsigned v) {
  double const until = base_now_s() + POOL_SPIN_NS * 1e-9;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (!cond(p, id, v)) return 1;
      cpu_relax();
    }
    if (base_now_s() > until) return 0;
  }
}

/* Worker id's flag still at g: no new run for it. */
static int idle_since(pool_t *p, int id, unsigned g) {
  return atomic_load_explicit(&p->go[id], memory_order_acquire) == g;
}
static int busy(pool_t *p, int unused_id, unsigned unused) {
  return atomic_load_explicit(&p->pending, memory_order_acquire) != 0;
}

static void *worker_main(void *opaque) {
  worker_t *const w = opaque;
  pool_t *const p = w->pool;
  unsigned seen = 0;
  if (w->init != NULL) w->init();
  for (;;) {
    if (!spin_while(p, idle_since, w->id, seen)) {
      pthread_mutex_lock(&p->lock);
      while (idle_since(p, w->id, seen))
        pthread_cond_wait(&p->work, &p->lock);
      pthread_mutex_unlock(&p->lock);
    }
    seen = atomic_load_explicit(&p->go[w->id], memory_order_acquire);
    if (atomic_load(&p->stop)) break;
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

/* Wakes workers 1..n-1 for the run set up in p (its parameters first). */
static void wake(pool_t *p, int n) {
  unsigned const g = ++p->gen;
  for (int i = 1; i < n; i++)
    atomic_store_explicit(&p->go[i], g, memory_order_release);
  pthread_mutex_lock(&p->lock);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
}

ls_err_t pool_new(int threads, void (*init)(void), pool_t **out) {
  *out = NULL;
  pool_t *p = calloc(1, sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for the thread pool");
  p->tids = calloc((size_t)(threads > 1 ? threads - 1 : 1), sizeof *p->tids);
  p->go = calloc((size_t)(threads > 1 ? threads : 1), sizeof *p->go);
  if (p->tids == NULL || p->go == NULL) {
    free(p->tids), free(p->go);
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
  wake(p, p->threads);
  for (int i = 0; i < p->threads - 1; i++)
    pthread_join(p->tids[i], NULL);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p->tids), free(p->go);
  free(p);
}

static void run_on(pool_t *p, int n, void (*fn)(void *arg, int i, int n), void *arg);

/* Whether this unit's runs take the caller alone: its choice, or the
 * other one during a trial. */
static int runs_alone(const pool_t *p) {
  return p->alone != (p->trying > 0);
}

void pool_run(pool_t *p, int n, double work, void (*fn)(void *arg, int i, int n), void *arg) {
  n = n < p->threads ? n : p->threads;
  if (n <= 1 || p->adapt == POOL_ADAPT_OFF) {
    run_on(p, n, fn, arg);
    return;
  }
  double const t0 = base_now_s();
  run_on(p, runs_alone(p) ? 1 : n, fn, arg);
  p->secs += base_now_s() - t0;
  p->done_work += work;
}

void pool_adapt(pool_t *p, pool_adapt_t mode) {
  p->adapt = mode;
  p->alone = p->trying = 0;
  p->since = POOL_ADAPT_RECHECK - 4; /* the fifth unit starts a trial: a load from the start */
  p->fresh = 1;
  p->secs = p->done_work = p->rate[0] = p->rate[1] = p->all_best = 0.0;
}

void pool_adapt_end(pool_t *p) {
  if (p->adapt == POOL_ADAPT_OFF || !(p->done_work > 0.0) || !(p->secs > 0.0)) return;
  double const rate = p->done_work / p->secs;
  p->secs = p->done_work = 0.0;
  if (p->adapt == POOL_ADAPT_ALTERNATE) {
    p->alone = !p->alone;
    return;
  }
  /* The rate of what this unit ran on: a trial's own from its first unit,
   * else averaged with the units before (halves: a noisy unit moves it half). */
  int const ran_alone = runs_alone(p);
  double *const r = &p->rate[ran_alone];
  *r = p->fresh ? rate : *r + 0.5 * (rate - *r);
  p->fresh = 0;
  if (!ran_alone) p->all_best = p->rate[0] > p->all_best ? p->rate[0] : p->all_best;
  if (p->trying > 0) {
    if (--p->trying > 0) return;
    /* The trial's end: the other choice only if clearly faster. */
    if (p->rate[!p->alone] > POOL_ADAPT_MARGIN * p->rate[p->alone]) p->alone = !p->alone;
    p->since = 0;
    p->all_best = p->rate[0]; /* the rate of all threads now, not before a load */
  } else if (!p->alone
                 ? ++p->since >= POOL_ADAPT_RECHECK ||
                       (p->since >= POOL_ADAPT_COOL && p->rate[0] < POOL_ADAPT_SLOW * p->all_best)
                 : ++p->since >= POOL_ADAPT_RETRY) {
    p->trying = POOL_ADAPT_TRIAL, p->fresh = 1;
  }
}

/* The run on n threads. */
static void run_on(pool_t *p, int n, void (*fn)(void *arg, int i, int n), void *arg) {
  if (n <= 1) {
    fn(arg, 0, 1);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store_explicit(&p->pending, n - 1, memory_order_release);
  wake(p, n);
  fn(arg, 0, n);
  if (!spin_while(p, busy, 0, 0)) {
    pthread_mutex_lock(&p->lock);
    while (busy(p, 0, 0))
      pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
}
