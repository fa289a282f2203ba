/*
 * The communication backends (train/comm.h).
 */
#include "comm.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"

#ifdef LSTREAM_HAVE_MPI
#include <mpi.h>
#endif
#ifdef LSTREAM_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h> /* types and prototypes only: the library is opened on first use */

#include "base/library.h"
#endif

/* MPI counts are ints: a range is started in pieces of at most this. */
#define COMM_PIECE ((size_t)1 << 30)

struct comm_s {
  comm_kind_t kind;
  int rank, world, local_rank;
  ls_engine_t *eng;
  float *grad;      /* the engine's gradient buffer */
  size_t n;         /* its floats */
  int started;      /* sums started since the last finish */
  int always;       /* sum even on one rank (comm_set_always) */
  double timeout_s; /* the bound on a wait for sums */
#ifdef LSTREAM_HAVE_MPI
  MPI_Request *req; /* (cap_req) the started sums (mpi) */
  int cap_req;
#endif
#ifdef LSTREAM_HAVE_NCCL
  ncclComm_t nccl;
  cudaStream_t stream; /* where the sums run */
  cudaEvent_t ready;   /* engine work a sum waits for */
  cudaEvent_t done;    /* the sums, for the engine's next work */
  cudaStream_t engine; /* the bound engine's stream */
  int failed;          /* a call failed: abort, do not wait, at teardown */
#endif
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

/* Rank, world and local rank from MPI_COMM_WORLD (MPI must be up). */
static ls_err_t mpi_open(comm_t *c, const char *name) {
  int up = 0;
  MPI_Initialized(&up);
  LS_RETURN_IF(!up, LS_ERR_STATE,
               "comm %s: MPI is not initialised (the lstream program does it under mpirun)", name);
  /* Errors come back as codes, not as an abort of the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &c->world);
  MPI_Comm host;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "splitting the ranks by host");
  MPI_Comm_rank(host, &c->local_rank);
  MPI_Comm_free(&host);
  return LS_OK;
}
#endif

#ifdef LSTREAM_HAVE_NCCL
/* NCCL is opened by the first nccl communicator instead of being linked,
 * as kernels/lstm_cuda.cu opens cuBLAS: CPU runs never load it (nor the
 * CUDA libraries it brings). The entry points keep NCCL's prototypes. */
static struct {
  __typeof__(&ncclGetUniqueId) get_unique_id;
  __typeof__(&ncclCommInitRankConfig) init_rank_config;
  __typeof__(&ncclAllReduce) all_reduce;
  __typeof__(&ncclCommAbort) abort;
  __typeof__(&ncclCommDestroy) destroy;
  __typeof__(&ncclCommGetAsyncError) async_error;
  __typeof__(&ncclGetErrorString) error_string;
  __typeof__(&ncclGetLastError) last_error;
} nccl;
static base_library_t nccl_lib = BASE_LIBRARY_INIT(BASE_LIBRARY_SO("libnccl", NCCL_MAJOR), "NCCL",
                                                   "install NCCL beside the CUDA toolkit");

static ls_err_t nccl_load(void) {
  base_symbol_t const syms[] = {
      {"ncclGetUniqueId", (void **)&nccl.get_unique_id},
      {"ncclCommInitRankConfig", (void **)&nccl.init_rank_config},
      {"ncclAllReduce", (void **)&nccl.all_reduce},
      {"ncclCommAbort", (void **)&nccl.abort},
      {"ncclCommDestroy", (void **)&nccl.destroy},
      {"ncclCommGetAsyncError", (void **)&nccl.async_error},
      {"ncclGetErrorString", (void **)&nccl.error_string},
      {"ncclGetLastError", (void **)&nccl.last_error},
  };
  return base_library_open(&nccl_lib, syms, sizeof syms / sizeof syms[0]);
}

#define CUDA_TRY(call, what)                                                                       \
  do {                                                                                             \
    cudaError_t const rc_ = (call);                                                                \
    LS_RETURN_IF(rc_ != cudaSuccess, LS_ERR_BACKEND, "comm nccl: %s: %s", what,                    \
                 cudaGetErrorString(rc_));                                                         \
  } while (0)
/* The communicator is blocking (nccl_bind): every call has finished its
 * host-side work, and queued its kernels, when it returns. A failure marks
 * the communicator for an abort at teardown. */
#define NCCL_TRY(c, call, what)                                                                    \
  do {                                                                                             \
    ncclResult_t const rc_ = (call);                                                               \
    if (rc_ != ncclSuccess) (c)->failed = 1;                                                       \
    LS_RETURN_IF(rc_ != ncclSuccess, LS_ERR_BACKEND, "comm nccl: %s: %s%s%s", what,                \
                 nccl.error_string(rc_), (c)->nccl != NULL ? ": " : "",                            \
                 (c)->nccl != NULL ? nccl.last_error((c)->nccl) : "");                             \
  } while (0)

/* Ends the communicator after a failure: its kernels stop (a sum a peer
 * never joins is dropped), so the streams after them can go on. */
static void nccl_abort(comm_t *c) {
  if (c->nccl != NULL) (void)nccl.abort(c->nccl);
  c->nccl = NULL;
  c->failed = 1;
}

/* Waits until everything queued on the sums' stream is done, polling the
 * stream and the communicator's asynchronous error, at most c->timeout_s:
 * on an error or the timeout the communicator is aborted and the wait
 * fails, naming `what`. The one wait for sums: a blocking synchronisation
 * would wait for ever for a peer that is gone. */
static ls_err_t nccl_wait(comm_t *c, const char *what) {
  LS_RETURN_IF(c->nccl == NULL, LS_ERR_STATE,
               "comm nccl: %s: the communicator was aborted after a failure", what);
  double const t0 = base_now_s();
  useconds_t pause = 10; /* doubling to 1 ms: a sum that is almost done costs little */
  for (;;) {
    cudaError_t const q = cudaStreamQuery(c->stream);
    if (q == cudaSuccess) return LS_OK;
    if (q != cudaErrorNotReady) {
      nccl_abort(c);
      return ls_error_set(LS_ERR_BACKEND, "comm nccl: %s: %s", what, cudaGetErrorString(q));
    }
    ncclResult_t async = ncclSuccess;
    ncclResult_t const rc = nccl.async_error(c->nccl, &async);
    if (rc != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      ls_err_t const err = ls_error_set(
          LS_ERR_BACKEND, "comm nccl: %s: %s: %s (a peer gone?); the communicator was aborted",
          what, nccl.error_string(rc != ncclSuccess ? rc : async), nccl.last_error(c->nccl));
      nccl_abort(c);
      return err;
    }
    double const waited = base_now_s() - t0;
    if (waited > c->timeout_s) {
      nccl_abort(c);
      return ls_error_set(LS_ERR_BACKEND,
                          "comm nccl: %s did not end within %.1f s (--comm-timeout-ms): a peer "
                          "gone or hung?; the communicator was aborted",
                          what, c->timeout_s);
    }
    usleep(pause);
    if (pause < 1000) pause *= 2;
  }
}

/* The communicator, its stream and events, on the engine's device. */
static ls_err_t nccl_bind(comm_t *c, ls_engine_t *eng) {
  LS_RETURN_IF(ls_engine_device(eng) != LS_DEVICE_CUDA, LS_ERR_UNSUPPORTED,
               "comm nccl sums GPU buffers: use --device cuda, or --comm mpi on CPUs");
  LS_FORWARD_IF_ERROR(nccl_load());
  CUDA_TRY(cudaSetDevice(ls_engine_get_conf(eng)->device_index), "selecting the engine's GPU");
  ncclUniqueId id;
  if (c->rank == 0) NCCL_TRY(c, nccl.get_unique_id(&id), "creating the communicator id");
#ifdef LSTREAM_HAVE_MPI
  if (c->world > 1) {
    int const rc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcasting the NCCL id");
  }
#endif
  /* Blocking, whatever NCCL_COMM_BLOCKING says: the events around the sums
   * rely on ncclAllReduce having queued its kernel when it returns. */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  NCCL_TRY(c, nccl.init_rank_config(&c->nccl, c->world, id, c->rank, &config),
           "creating the communicator");
  CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "creating a stream");
  CUDA_TRY(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming), "creating an event");
  CUDA_TRY(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming), "creating an event");
  c->engine = (cudaStream_t)ls_engine_stream(eng);
  return LS_OK;
}
#endif

ls_err_t comm_new(comm_kind_t kind, comm_t **out) {
  LS_RETURN_IF(out == NULL, LS_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  comm_t *const c = calloc(1, sizeof *c);
  LS_RETURN_IF(c == NULL, LS_ERR_NOMEM, "no memory for the comm backend");
  c->kind = kind;
  c->world = 1;
  c->timeout_s = COMM_TIMEOUT_S;
  ls_err_t err = LS_OK;
  switch (kind) {
  case COMM_NONE: break;
  case COMM_MPI:
#ifdef LSTREAM_HAVE_MPI
    err = mpi_open(c, "mpi");
#else
    err = ls_error_set(LS_ERR_UNSUPPORTED,
                       "comm mpi: this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
    break;
  case COMM_NCCL:
#ifdef LSTREAM_HAVE_NCCL
  {
    /* One rank may run NCCL without mpirun; more need MPI for the id. */
#ifdef LSTREAM_HAVE_MPI
    int up = 0;
    MPI_Initialized(&up);
    if (up) err = mpi_open(c, "nccl");
#endif
  }
#else
    err = ls_error_set(LS_ERR_UNSUPPORTED,
                       "comm nccl: this build has no NCCL (it needs the CUDA toolkit and NCCL at "
                       "build time); use --comm mpi with --device cpu");
#endif
  break;
  default: err = ls_error_set(LS_ERR_INVALID_ARG, "unknown comm backend %d", (int)kind);
  }
  if (err != LS_OK) {
    free(c);
    return err;
  }
  *out = c;
  return LS_OK;
}

void comm_destroy(comm_t *c) {
  if (c == NULL) return;
#ifdef LSTREAM_HAVE_MPI
  free(c->req);
#endif
#ifdef LSTREAM_HAVE_NCCL
  /* Teardown cannot report errors: each step is tried whatever came before.
   * Sums started and never finished, or a failed call, mean a peer may be
   * gone: abort the communicator rather than wait for them; the last sums
   * are waited for as always, bounded (a wait that fails aborts). Then the
   * stream holds nothing that can wait for ever. */
  if (c->nccl != NULL && (c->failed || c->started > 0)) nccl_abort(c);
  if (c->nccl != NULL && c->stream != NULL) (void)nccl_wait(c, "the last gradient sums");
  if (c->stream != NULL) (void)cudaStreamSynchronize(c->stream);
  if (c->nccl != NULL) (void)nccl.destroy(c->nccl);
  if (c->ready != NULL) (void)cudaEventDestroy(c->ready);
  if (c->done != NULL) (void)cudaEventDestroy(c->done);
  if (c->stream != NULL) (void)cudaStreamDestroy(c->stream);
#endif
  free(c);
}

int comm_rank(const comm_t *c) {
  return c == NULL ? 0 : c->rank;
}
int comm_world(const comm_t *c) {
  return c == NULL ? 1 : c->world;
}
int comm_local_rank(const comm_t *c) {
  return c == NULL ? 0 : c->local_rank;
}
comm_kind_t comm_kind(const comm_t *c) {
  return c == NULL ? COMM_NONE : c->kind;
}

void comm_set_always(comm_t *c, int on) {
  if (c != NULL) c->always = on != 0;
}

void comm_set_timeout(comm_t *c, double seconds) {
  if (c != NULL && seconds > 0) c->timeout_s = seconds;
}

ls_err_t comm_gpu(const comm_t *c, int *index) {
  LS_RETURN_IF(c == NULL || index == NULL, LS_ERR_INVALID_ARG, "comm or index is NULL");
  *index = 0;
  int gpus = 0;
  LS_FORWARD_IF_ERROR(ls_device_count(LS_DEVICE_CUDA, &gpus));
  if (gpus <= 1) return LS_OK;
  LS_RETURN_IF(c->local_rank >= gpus, LS_ERR_INVALID_ARG,
               "rank %d is rank %d of its host, which shows %d GPUs: run at most one rank per "
               "GPU on each host",
               c->rank, c->local_rank, gpus);
  *index = c->local_rank;
  return LS_OK;
}

ls_err_t comm_bind(comm_t *c, ls_engine_t *eng) {
  LS_RETURN_IF(c == NULL || eng == NULL, LS_ERR_INVALID_ARG, "comm or engine is NULL");
  LS_RETURN_IF(c->eng != NULL, LS_ERR_STATE, "comm is already bound to an engine");
  if (c->kind == COMM_MPI)
    LS_RETURN_IF(ls_engine_device(eng) != LS_DEVICE_CPU, LS_ERR_UNSUPPORTED,
                 "comm mpi sums host buffers: use --device cpu, or --comm nccl on GPUs");
#ifdef LSTREAM_HAVE_NCCL
  if (c->kind == COMM_NCCL) LS_FORWARD_IF_ERROR(nccl_bind(c, eng));
#endif
  c->eng = eng;
  c->grad = ls_engine_grad_buffer(eng);
  c->n = ls_engine_param_count(eng);
  return LS_OK;
}

ls_err_t comm_grads_start(comm_t *c, size_t offset, size_t count, void *stream) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "comm is NULL");
  LS_RETURN_IF(c->eng == NULL, LS_ERR_STATE, "comm is not bound to an engine");
  LS_RETURN_IF(offset > c->n || count > c->n - offset, LS_ERR_INVALID_ARG,
               "gradient range [%zu, +%zu) is outside the buffer of %zu", offset, count, c->n);
  if ((c->world == 1 && !c->always) || count == 0) return LS_OK;
  switch (c->kind) {
  case COMM_MPI:
#ifdef LSTREAM_HAVE_MPI
    (void)stream;
    for (size_t done = 0; done < count; done += COMM_PIECE) {
      if (c->started == c->cap_req) {
        int const cap = c->cap_req ? 2 * c->cap_req : 16;
        MPI_Request *const r = realloc(c->req, (size_t)cap * sizeof *r);
        LS_RETURN_IF(r == NULL, LS_ERR_NOMEM, "no memory for all-reduce requests");
        c->req = r, c->cap_req = cap;
      }
      int const cnt = (int)(count - done < COMM_PIECE ? count - done : COMM_PIECE);
      int rc = MPI_Iallreduce(MPI_IN_PLACE, c->grad + offset + done, cnt, MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD, &c->req[c->started]);
      if (rc != MPI_SUCCESS) return mpi_fail(rc, "gradient all-reduce");
      c->started++;
      /* Open MPI progresses non-blocking collectives inside MPI calls. */
      int flag;
      rc = MPI_Testall(c->started, c->req, &flag, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return mpi_fail(rc, "gradient all-reduce");
    }
    return LS_OK;
#else
    return ls_error_set(LS_ERR_UNSUPPORTED, "no MPI in this build");
#endif
  case COMM_NCCL:
#ifdef LSTREAM_HAVE_NCCL
    LS_RETURN_IF(c->nccl == NULL, LS_ERR_STATE,
                 "comm nccl: gradient all-reduce: the communicator was aborted after a failure");
    CUDA_TRY(cudaEventRecord(c->ready, (cudaStream_t)stream), "recording the gradient's event");
    CUDA_TRY(cudaStreamWaitEvent(c->stream, c->ready, 0), "ordering the all-reduce");
    NCCL_TRY(c,
             nccl.all_reduce(c->grad + offset, c->grad + offset, count, ncclFloat, ncclSum, c->nccl,
                             c->stream),
             "gradient all-reduce");
    c->started++;
    return LS_OK;
#else
    (void)stream;
    return ls_error_set(LS_ERR_UNSUPPORTED, "no NCCL in this build");
#endif
  default: return ls_error_set(LS_ERR_STATE, "comm none has one rank");
  }
}

ls_err_t comm_grads_start_segments(comm_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "comm is NULL");
  LS_RETURN_IF(c->eng == NULL, LS_ERR_STATE, "comm is not bound to an engine");
  const ls_shape_t *const s = &ls_engine_get_conf(c->eng)->shape;
  for (int k = 0; k <= s->num_layers; k++) {
    size_t off, cnt;
    LS_FORWARD_IF_ERROR(ls_grad_segment(s, k, &off, &cnt));
    LS_FORWARD_IF_ERROR(comm_grads_start(c, off, cnt, ls_engine_stream(c->eng)));
  }
  return LS_OK;
}

ls_err_t comm_grads_finish(comm_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "comm is NULL");
  if (c->started == 0) return LS_OK;
  int const started = c->started;
  c->started = 0;
#ifdef LSTREAM_HAVE_MPI
  if (c->kind == COMM_MPI) {
    int const rc = MPI_Waitall(started, c->req, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? LS_OK : mpi_fail(rc, "gradient all-reduce");
  }
#endif
#ifdef LSTREAM_HAVE_NCCL
  if (c->kind == COMM_NCCL) {
    CUDA_TRY(cudaEventRecord(c->done, c->stream), "recording the all-reduce's event");
    CUDA_TRY(cudaStreamWaitEvent(c->engine, c->done, 0), "ordering the optimizer step");
    ncclResult_t async = ncclSuccess;
    NCCL_TRY(c, nccl.async_error(c->nccl, &async), "checking the communicator");
    NCCL_TRY(c, async, "gradient all-reduce");
    return LS_OK;
  }
#endif
  (void)started;
  return ls_error_set(LS_ERR_STATE, "sums started on a backend without them");
}

ls_err_t comm_wait(comm_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "comm is NULL");
#ifdef LSTREAM_HAVE_NCCL
  if (c->kind == COMM_NCCL && c->stream != NULL) return nccl_wait(c, "the gradient sums");
#endif
  return LS_OK;
}

ls_err_t comm_sync(comm_t *c) {
  return comm_wait(c);
}

ls_err_t comm_sum_grads(comm_t *c) {
  LS_RETURN_IF(c == NULL, LS_ERR_INVALID_ARG, "comm is NULL");
  LS_RETURN_IF(c->eng == NULL, LS_ERR_STATE, "comm is not bound to an engine");
  LS_FORWARD_IF_ERROR(comm_grads_start(c, 0, c->n, ls_engine_stream(c->eng)));
  return comm_grads_finish(c);
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
