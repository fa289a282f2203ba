/*
 * The communication backends (train/comm.h).
 */
#include "comm.h"

#include <stdlib.h>

#ifdef LSTREAM_HAVE_MPI
#include <mpi.h>
#endif

struct comm_s {
  comm_kind_t kind;
  int rank, world;
};

#ifdef LSTREAM_HAVE_MPI
/* MPI's message for a code, with what was being done. */
static ls_err_t mpi_fail(int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  msg[len] = '\0';
  return ls_error_set(LS_ERR_BACKEND, "%s failed: %s", what, len ? msg : "unknown MPI error");
}
#endif

ls_err_t comm_new(comm_kind_t kind, comm_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  comm_t c = {kind, 0, 1};
  switch (kind) {
  case COMM_NONE: break;
  case COMM_MPI: {
#ifdef LSTREAM_HAVE_MPI
    int up = 0;
    MPI_Initialized(&up);
    LS_RETURN_IF(!up, LS_ERR_STATE,
                 "comm mpi: MPI is not initialised (the lstream program does it under mpirun)");
    /* Errors come back as codes, not as an abort of the job. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.world);
    break;
#else
    return ls_error_set(LS_ERR_UNSUPPORTED, "comm mpi: this build has no MPI (install "
                                            "libopenmpi-dev and rebuild)");
#endif
  }
  case COMM_NCCL:
    return ls_error_set(LS_ERR_UNSUPPORTED,
                        "comm nccl: needs the CUDA backend, which this build lacks; use --comm mpi "
                        "with --device cpu");
  default: return ls_error_set(LS_ERR_INVALID_ARG, "unknown comm backend %d", (int)kind);
  }
  comm_t *const p = malloc(sizeof *p);
  LS_RETURN_IF(p == NULL, LS_ERR_NOMEM, "no memory for the comm backend");
  *p = c;
  *out = p;
  return LS_OK;
}

void comm_destroy(comm_t *c) { free(c); }

int comm_rank(const comm_t *c) { return c == NULL ? 0 : c->rank; }
int comm_world(const comm_t *c) { return c == NULL ? 1 : c->world; }

ls_err_t comm_sum_grads(comm_t *c, ls_engine_t *eng, float *grad, size_t n) {
  LS_RETURN_IF(c == NULL || grad == NULL, LS_ERR_INVALID_ARG, "comm or gradient is NULL");
  if (c->world == 1) return LS_OK;
#ifdef LSTREAM_HAVE_MPI
  LS_RETURN_IF(ls_engine_device(eng) != LS_DEVICE_CPU, LS_ERR_UNSUPPORTED,
               "comm mpi sums host buffers: use --device cpu, or --comm nccl on GPUs");
  /* Counts are ints: split very large buffers. */
  for (size_t done = 0; done < n;) {
    int const cnt = n - done > (1u << 30) ? 1 << 30 : (int)(n - done);
    int const rc = MPI_Allreduce(MPI_IN_PLACE, grad + done, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "gradient all-reduce");
    done += (size_t)cnt;
  }
  return LS_OK;
#else
  (void)eng, (void)n;
  return ls_error_set(LS_ERR_UNSUPPORTED, "no MPI in this build");
#endif
}

ls_err_t comm_sum_doubles(comm_t *c, double *v, int n) {
  LS_RETURN_IF(c == NULL || v == NULL || n < 0, LS_ERR_INVALID_ARG, "comm or values are NULL");
  if (c->world == 1) return LS_OK;
#ifdef LSTREAM_HAVE_MPI
  int const rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? LS_OK : mpi_fail(rc, "step all-reduce");
#else
  return ls_error_set(LS_ERR_UNSUPPORTED, "no MPI in this build");
#endif
}
