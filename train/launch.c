/*
 * What a rank takes on: the ranks mpirun started (include/lstream/train.h),
 * its share of its host's cores, and the partitions that are its own
 * (train/launch.h).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "lstream/train.h"

int ls_train_launched_ranks(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *const v = getenv(vars[i]);
    if (v != NULL && atoi(v) > 0) return atoi(v);
  }
  return 1;
}

int train_rank_threads(int threads) {
  if (threads > 0 || getenv("OMP_NUM_THREADS") != NULL) return threads;
  static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                     "PMIX_LOCAL_SIZE"};
  int local = 0;
  for (size_t i = 0; i < sizeof vars / sizeof vars[0] && local <= 0; i++)
    local = getenv(vars[i]) != NULL ? atoi(getenv(vars[i])) : 0;
  if (local <= 1) return 0;
  long const online = sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t set;
  int const bound = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
  int const share = online > 0 ? (int)(online / local) : 1;
  int const n = share < bound ? share : bound;
  return n > 0 ? n : 1;
}

ls_err_t train_pick_partitions(const char *spec, int32_t count, int world, int rank, int32_t *parts,
                               int *P, int *P_all) {
  char *want = calloc((size_t)count, 1);
  LS_RETURN_IF(want == NULL, LS_ERR_NOMEM, "no memory for %d partitions", (int)count);
  const char *s = spec;
  ls_err_t err = LS_OK;
  if (!strcmp(s, "all")) memset(want, 1, (size_t)count), s = "";
  while (*s && err == LS_OK) {
    char *end = NULL;
    long const p = strtol(s, &end, 10);
    if (end == s || (*end != ',' && *end != '\0') || p < 0 || p >= count)
      err = ls_error_set(LS_ERR_INVALID_ARG,
                         "partitions '%s': expected 'all' or a list of partitions in [0, %d)", spec,
                         (int)count);
    else
      want[p] = 1, s = *end ? end + 1 : end;
  }
  /* Partition p belongs to rank p % world: its series and their states too. */
  *P = *P_all = 0;
  for (int32_t p = 0; p < count && err == LS_OK; p++) {
    *P_all += want[p];
    if (want[p] && p % world == rank) parts[(*P)++] = p;
  }
  free(want);
  if (err == LS_OK && *P_all == 0)
    err = ls_error_set(LS_ERR_INVALID_ARG, "partitions '%s' names none", spec);
  return err;
}
