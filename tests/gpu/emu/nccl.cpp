/*
 * libnccl.so.2 for the CUDA emulator: NCCL communicators over MPI, so that
 * `mpirun -np N lstream train --device cuda --comm nccl` runs on CPUs.
 *
 * A communicator of n ranks is rank r of MPI_COMM_WORLD (which must have n
 * ranks) over a duplicate of it; one of one rank needs no MPI. The unique id
 * must be the same on every rank (it is compared at init: an id that was not
 * broadcast is an error, as NCCL would hang). ncclAllReduce checks its
 * buffers (count elements of the type, inside device allocations) and
 * queues the sum on the stream; when the stream runs it, the data go
 * through a host buffer and MPI_Iallreduce, waited for with a time limit
 * (a sum the other ranks never join is reported, not a hang). Communicators
 * are blocking (config.blocking = 1 is what lstream asks).
 *
 * A lost peer (EMU_NCCL_PEER_LOST=K[:error|:hang]): from the K-th
 * ncclAllReduce of the process on, no sum is ever joined by the other
 * ranks. Each stays queued on its stream, which stops there, as a GPU's
 * NCCL kernel spins waiting for a peer that is gone: a stream query says
 * not ready, and a call that blocks on it (a synchronisation, a blocking
 * copy, cudaFree) is a problem (it would wait for ever), until
 * ncclCommAbort drops the sums and the stream goes on. With :error (the
 * default) ncclCommGetAsyncError reports ncclRemoteError once a lost sum
 * has been tried (NCCL's proxy finds the peer's connection closed); with
 * :hang it reports nothing (a peer alive but stuck: only a time limit
 * tells). One rank is enough to model it (--comm-always true).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "emu.h"
#include "nccl.h"

struct ncclComm {
  int nranks, rank;
  MPI_Comm mpi; /* MPI_COMM_NULL for one rank */
  bool aborted;
  ncclResult_t async; /* an error of queued work */
  std::string last;   /* the last error's message */
};

namespace {

char const MAGIC[] = "lstream-emu-nccl";
/* A sum not joined by every rank within this many seconds is reported. */
double const SUM_TIMEOUT_S = 120.0;
/* Aborted communicators: queued work may still name them. */
std::vector<ncclComm *> &aborted = *new std::vector<ncclComm *>;

/* EMU_NCCL_PEER_LOST: the first all-reduce (1-based) the lost peer never
 * joins (0: none), and whether the loss is reported as an error. */
struct lost_t {
  long from = 0;
  bool error = true;
};
const lost_t &lost_peer(void) {
  static const lost_t *const l = [] {
    lost_t *const v = new lost_t; /* never destroyed: read until exit */
    const char *const e = getenv("EMU_NCCL_PEER_LOST");
    if (e != nullptr && *e) {
      char *end = nullptr;
      v->from = strtol(e, &end, 10);
      if (!strcmp(end, ":hang"))
        v->error = false;
      else if (*end != '\0' && strcmp(end, ":error") != 0)
        fprintf(stderr, "emu: EMU_NCCL_PEER_LOST=%s: want K, K:error or K:hang\n", e);
    }
    return v;
  }();
  return *l;
}
long all_reduces; /* ncclAllReduce calls so far */

ncclResult_t fail(ncclComm *c, ncclResult_t r, const char *what) {
  emu::problem("NCCL: %s", what);
  if (c != nullptr) c->last = what;
  return r;
}

bool mpi_types(ncclDataType_t t, ncclRedOp_t op, MPI_Datatype *dt, MPI_Op *mop, size_t *size) {
  switch (t) {
  case ncclFloat32: *dt = MPI_FLOAT, *size = 4; break;
  case ncclFloat64: *dt = MPI_DOUBLE, *size = 8; break;
  case ncclInt32: *dt = MPI_INT32_T, *size = 4; break;
  case ncclInt64: *dt = MPI_INT64_T, *size = 8; break;
  default: return false;
  }
  switch (op) {
  case ncclSum: *mop = MPI_SUM; break;
  case ncclProd: *mop = MPI_PROD; break;
  case ncclMax: *mop = MPI_MAX; break;
  case ncclMin: *mop = MPI_MIN; break;
  default: return false;
  }
  return true;
}

double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs on the stream: recv = the sum over ranks of send. */
void all_reduce(ncclComm *c, const void *send, void *recv, size_t count, MPI_Datatype dt, MPI_Op op,
                size_t size) {
  if (c->aborted) return;
  if (c->nranks == 1) {
    if (send != recv) memmove(recv, send, count * size);
    return;
  }
  std::vector<char> buf((const char *)send, (const char *)send + count * size);
  MPI_Request req;
  if (MPI_Iallreduce(MPI_IN_PLACE, buf.data(), (int)count, dt, op, c->mpi, &req) != MPI_SUCCESS) {
    c->async = fail(c, ncclSystemError, "MPI_Iallreduce failed");
    return;
  }
  double const t0 = now();
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done && now() - t0 > SUM_TIMEOUT_S) {
      emu::problem("NCCL: an all-reduce of %zu elements was not joined by every rank within %.0f "
                   "s: the ranks started different sums (or in different orders)",
                   count, SUM_TIMEOUT_S);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (!done) usleep(50);
  }
  memcpy(recv, buf.data(), count * size);
}

} // namespace

extern "C" {

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t c) {
  return c != nullptr ? c->last.c_str() : "";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (id == nullptr) return fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
  memset(id, 0, sizeof *id);
  memcpy(id->internal, MAGIC, sizeof MAGIC);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long const mix[3] = {(long)getpid(), (long)ts.tv_sec, ts.tv_nsec};
  memcpy(id->internal + 32, mix, sizeof mix);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  if (out == nullptr) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *out = nullptr;
  if (config != nullptr &&
      (config->magic != EMU_NCCL_CONFIG_MAGIC || config->size != sizeof *config))
    return fail(nullptr, ncclInvalidArgument,
                "ncclCommInitRankConfig: config not initialised "
                "with NCCL_CONFIG_INITIALIZER");
  if (memcmp(id.internal, MAGIC, sizeof MAGIC) != 0)
    return fail(nullptr, ncclInvalidArgument,
                "ncclCommInitRank: the unique id does not come "
                "from ncclGetUniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: rank outside [0, nranks)");
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
    return fail(nullptr, ncclUnhandledCudaError, "ncclCommInitRank: no CUDA device");
  std::unique_ptr<ncclComm> c(new ncclComm{nranks, rank, MPI_COMM_NULL, false, ncclSuccess, ""});
  if (nranks > 1) {
    int up = 0, size = 0, me = 0;
    MPI_Initialized(&up);
    if (!up)
      return fail(nullptr, ncclSystemError, "the emulated NCCL needs MPI for more than one rank");
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (size != nranks || me != rank)
      return fail(nullptr, ncclInvalidArgument,
                  "the emulated NCCL maps rank r of n to MPI rank "
                  "r of a world of n ranks");
    std::vector<char> all((size_t)nranks * sizeof id);
    MPI_Allgather(&id, (int)sizeof id, MPI_BYTE, all.data(), (int)sizeof id, MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int r = 0; r < nranks; r++)
      if (memcmp(all.data() + (size_t)r * sizeof id, &id, sizeof id) != 0)
        return fail(nullptr, ncclInvalidArgument,
                    "ncclCommInitRank: the ranks hold different "
                    "unique ids (was rank 0's id broadcast?)");
    MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
  }
  *out = c.release();
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  return ncclCommInitRankConfig(out, nranks, id, rank, &config);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t c, cudaStream_t stream) {
  if (c == nullptr) return fail(nullptr, ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  if (c->aborted) return fail(c, ncclInvalidUsage, "ncclAllReduce on an aborted communicator");
  MPI_Datatype dt;
  MPI_Op mop;
  size_t size = 0;
  if (!mpi_types(type, op, &dt, &mop, &size))
    return fail(c, ncclInvalidArgument, "ncclAllReduce: a type or operation the emulation lacks");
  emu::count("ncclAllReduce");
  all_reduces++;
  if (count == 0) return ncclSuccess;
  if (count > (size_t)1 << 31)
    return fail(c, ncclInvalidArgument, "ncclAllReduce: more elements than the emulation sums");
  if (!emu_device_range(send, count * size) || !emu_device_range(recv, count * size)) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "ncclAllReduce of %zu elements of %zu bytes: the %s buffer is not "
             "inside one device allocation",
             count, size, emu_device_range(send, count * size) ? "receive" : "send");
    return fail(c, ncclInvalidArgument, msg);
  }
  std::function<bool()> joined; /* every rank's part is there: always, but for a lost peer */
  if (lost_peer().from > 0 && all_reduces >= lost_peer().from) {
    bool const error = lost_peer().error;
    joined = [c, error] {
      if (!c->aborted && error && c->async == ncclSuccess) {
        c->async = ncclRemoteError;
        c->last = "the emulated peer is gone (EMU_NCCL_PEER_LOST)";
      }
      return c->aborted; /* aborted: dropped (all_reduce does nothing) */
    };
  }
  emu::enqueue(
      stream, "ncclAllReduce", [=] { all_reduce(c, send, recv, count, dt, mop, size); }, joined);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *async) {
  if (c == nullptr || async == nullptr) return ncclInvalidArgument;
  *async = c->async;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (c == nullptr) return ncclSuccess;
  if (!c->aborted) aborted.push_back(c);
  c->aborted = true; /* queued sums are dropped; the MPI communicator is left */
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (c == nullptr) return ncclInvalidArgument;
  int fin = 0;
  MPI_Finalized(&fin);
  if (c->mpi != MPI_COMM_NULL && !fin) MPI_Comm_free(&c->mpi);
  if (!c->aborted) delete c; /* an aborted one may still be named by queued work: kept */
  return ncclSuccess;
}

} // extern "C"
