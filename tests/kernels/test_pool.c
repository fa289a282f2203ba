/*
 * The CPU backend's thread pool (kernels/pool_cpu.h): every part of every
 * run runs exactly once, on the thread count asked for (clamped to the
 * pool's), the caller being part 0; runs that follow each other at once
 * (threads still spinning) and after a pause (threads asleep) both
 * complete; a pool of one thread runs on the caller.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "../../kernels/pool_cpu.h"

#define MAX_PARTS 8

typedef struct run_s {
  atomic_int calls[MAX_PARTS];
  atomic_int wrong_n; /* calls that saw another n than asked */
  int n;
  pthread_t caller;
  atomic_int caller_ran_0; /* part 0 ran on the calling thread */
} run_t;

static void part(void *arg, int i, int n) {
  run_t *const r = arg;
  if (n != r->n) atomic_fetch_add(&r->wrong_n, 1);
  if (i >= 0 && i < MAX_PARTS) atomic_fetch_add(&r->calls[i], 1);
  if (i == 0 && pthread_equal(pthread_self(), r->caller)) atomic_store(&r->caller_ran_0, 1);
}

/* One run of n parts on p (n already clamped by the caller of this). */
static void check_run(pool_t *p, int ask, int n) {
  run_t r = {.n = n, .caller = pthread_self()};
  pool_run(p, ask, 1.0, part, &r);
  for (int i = 0; i < MAX_PARTS; i++)
    cr_assert_eq(atomic_load(&r.calls[i]), i < n ? 1 : 0, "part %d of %d ran %d times", i, n,
                 atomic_load(&r.calls[i]));
  cr_assert_eq(atomic_load(&r.wrong_n), 0, "a part saw another part count than %d", n);
  cr_assert(atomic_load(&r.caller_ran_0), "part 0 did not run on the calling thread");
}

static void pause_ms(int ms) {
  struct timespec const ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

static int inits;
static void count_init(void) {
  __atomic_add_fetch(&inits, 1, __ATOMIC_SEQ_CST);
}

Test(pool, every_part_once) {
  pool_t *p = NULL;
  inits = 0;
  cr_assert_eq(pool_new(4, count_init, &p), LS_OK);
  for (int round = 0; round < 200; round++) {
    int const ask = 1 + round % 5; /* 5 asks for more than the pool has */
    check_run(p, ask, ask < 4 ? ask : 4);
    /* Now and then let the threads go to sleep (they spin for 50 us). */
    if (round % 50 == 49) pause_ms(5);
  }
  pool_free(p);
  cr_assert_eq(inits, 3, "init ran %d times for 3 started threads", inits);
}

Test(pool, one_thread_runs_on_the_caller) {
  pool_t *p = NULL;
  cr_assert_eq(pool_new(1, NULL, &p), LS_OK);
  check_run(p, 3, 1);
  pool_free(p);
  pool_free(NULL); /* accepted */
}
