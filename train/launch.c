/*
 * What a process learns from its launcher and what describes its result
 * across ranks: the ranks mpirun started (ls_train_launched_ranks), and the
 * digests of the model and of every rank's series (train/snapshots.h).
 */
#include <stdlib.h>

#include "base/digest.h"
#include "snapshots.h"

int ls_train_launched_ranks(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *const v = getenv(vars[i]);
    if (v != NULL && atoi(v) > 0) return atoi(v);
  }
  return 1;
}

ls_err_t train_view_digest(const train_view_t *view, uint64_t *params, uint64_t *states) {
  size_t const n = ls_engine_param_count(view->eng);
  float *p = malloc(n * sizeof(float));
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for %zu parameters", n);
  ls_err_t const err = ls_engine_read_params(view->eng, p, n);
  uint64_t const h = base_fnv1a(BASE_FNV1A_INIT, p, n * sizeof(float));
  free(p);
  LS_FORWARD_IF_ERROR(err);
  *params = h;
  uint64_t mine = 0;
  LS_FORWARD_IF_ERROR(ls_series_table_digest(view->series, &mine));
  /* Every rank's digest, summed in two exact 32-bit halves, then mixed. */
  double v[2] = {(double)(mine >> 32), (double)(mine & 0xffffffffu)};
  LS_FORWARD_IF_ERROR(comm_sum_doubles(view->comm, v, 2));
  uint64_t const hi = (uint64_t)v[0], lo = (uint64_t)v[1];
  *states = view->world == 1 ? mine : (hi * 0x9E3779B97F4A7C15ull) ^ lo ^ (hi << 32);
  return LS_OK;
}
