/*
 * Streams, events and device operations of the CUDA emulator.
 *
 * Every piece of device work (a kernel, a copy, a memset, a GEMM, an
 * all-reduce, a stream-ordered free, an event wait) is an operation queued
 * on a stream and run in the stream's order. A stream is eager (its
 * operations run as soon as they are queued) or deferred (they run only
 * when something needs them: a synchronisation with the stream or with an
 * event recorded on it, another stream's wait for such an event, a copy
 * into pageable host memory). With one stream eager and the other deferred,
 * work that another stream uses without an event wait has either not run
 * yet or run too early: a missing wait gives a wrong result instead of
 * passing by luck. An event is a position in its stream's queue.
 *
 * An operation may wait for something outside the stream (an all-reduce
 * for its peers, another stream's event): while its ready() says no, its
 * stream stops before it. A query then says not ready, as on a GPU; a call
 * that blocks until the stream passes it (a synchronisation, a blocking
 * copy, cudaFree) would wait for ever on a GPU, so it is a problem here
 * (the emulated NCCL's lost peer: nccl.cpp).
 *
 * Graphs: while a stream captures, what is queued on it is recorded in
 * its graph instead of run; launching the instantiated graph queues the
 * recorded operations again, in their order, on the launch's stream. A
 * call that would wait for the device or allocate during a capture (a
 * synchronisation, a copy into pageable memory, cudaMalloc, work on the
 * legacy stream) is an error that invalidates the capture, and so are the
 * captures' cross-stream events, which the emulator does not model.
 */
#include <stdio.h>
#include <string.h>

#include <deque>
#include <functional>
#include <vector>

#include "emu_internal.h"

struct op_t {
  std::function<void()> fn;
  const char *what;
  std::function<bool()> ready; /* empty: always; else it may run once this says so */
};

struct CUgraph_st {
  std::vector<op_t> ops;
};
struct CUgraphExec_st {
  std::vector<op_t> ops;
};

struct CUstream_st {
  int id; /* 1-based creation order */
  bool deferred;
  CUgraph_st *capture = nullptr; /* the graph being captured, if any */
  bool capture_invalid = false;
  std::deque<op_t> queue;
  uint64_t queued = 0;  /* operations ever queued */
  uint64_t done = 0;    /* operations run */
  bool running = false; /* one of its operations is running */
};

struct CUevent_st {
  CUstream_st *stream = nullptr; /* where it was last recorded; NULL: complete */
  uint64_t pos = 0;              /* complete once stream->done >= pos */
};

namespace emu {
namespace {
/* Every stream ever created, kept (events may refer to destroyed ones),
 * never destroyed (so that none looks leaked at exit). */
std::vector<CUstream_st *> &streams = *new std::vector<CUstream_st *>;
const char *running_op;
int captures; /* streams capturing */

void invalidate_captures(void) {
  for (CUstream_st *s : streams)
    if (s->capture != nullptr) s->capture_invalid = true;
}

/* Runs the stream's operations until `pos` of them have run. */
void drain_to(CUstream_st *s, uint64_t pos) {
  if (s->done >= pos) return;
  if (s->running) {
    problem("stream %d waits for work queued after the operation it is running (a cycle of "
            "event waits: on a GPU this would hang)",
            s->id);
    return;
  }
  s->running = true;
  window_enter();
  while (s->done < pos && !s->queue.empty()) {
    if (s->queue.front().ready && !s->queue.front().ready()) break; /* waits for something */
    op_t const op = std::move(s->queue.front());
    s->queue.pop_front();
    const char *const outer = running_op;
    running_op = op.what;
    /* After a fault the device runs nothing more (frees aside). */
    if (sticky_error() == cudaSuccess || !strcmp(op.what, "cudaFreeAsync")) op.fn();
    running_op = outer;
    s->done++;
  }
  window_leave();
  s->running = false;
}

/* Runs the stream's operations until `pos` of them have run, for a call
 * that blocks until then (`what`): an operation that can never run (a
 * lost peer's sum) makes it a problem, as it would hang on a GPU. */
bool block_to(CUstream_st *s, uint64_t pos, const char *what) {
  drain_to(s, pos);
  if (s->done >= pos) return true;
  problem("%s waits for stream %d's %s, which never completes (on a GPU this would wait for "
          "ever: poll with cudaStreamQuery or cudaEventQuery and give up, as NCCL's "
          "ncclCommAbort allows)",
          what, s->id, s->queue.empty() ? "work" : s->queue.front().what);
  return false;
}
} // namespace

const char *current_op(void) {
  return running_op;
}
void set_current_op(const char *what) {
  running_op = what;
}

cudaError_t capture_forbids(const char *what) {
  if (captures == 0) return cudaSuccess;
  problem("%s during a stream capture (it would wait for the device, allocate, or order "
          "streams in ways a graph does not record): the capture is invalidated",
          what);
  invalidate_captures();
  return cudaErrorStreamCaptureUnsupported;
}

bool is_capturing(cudaStream_t s) {
  return s != nullptr && s->capture != nullptr;
}

void drain_all(const char *what) {
  for (CUstream_st *s : streams)
    if (!block_to(s, s->queued, what)) return;
}

void drain_stream(cudaStream_t s, const char *what) {
  if (s == nullptr)
    drain_all(what);
  else
    block_to(s, s->queued, what);
}

void enqueue(cudaStream_t s, const char *what, std::function<void()> fn,
             std::function<bool()> ready) {
  EMU_LOCK();
  if (s != nullptr && s->capture != nullptr) { /* recorded, not run */
    s->capture->ops.push_back(op_t{std::move(fn), what, std::move(ready)});
    count("captured operations");
    return;
  }
  if (s == nullptr && capture_forbids(what) != cudaSuccess) return;
  if (s == nullptr) { /* the legacy default stream: after all work, before any */
    drain_all(what);
    window_enter();
    const char *const outer = running_op;
    running_op = what;
    fn();
    running_op = outer;
    window_leave();
    return;
  }
  s->queue.push_back(op_t{std::move(fn), what, std::move(ready)});
  s->queued++;
  if (!s->deferred) drain_to(s, s->queued);
}

} // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
  EMU_LOCK();
  if (stream == nullptr || (flags & ~1u) != 0) return cudaErrorInvalidValue;
  CUstream_st *const s = new CUstream_st;
  s->id = (int)streams.size() + 1;
  const std::vector<bool> &d = config().deferred;
  s->deferred = d[(size_t)s->id - 1 < d.size() ? (size_t)s->id - 1 : d.size() - 1];
  streams.push_back(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  EMU_LOCK();
  if (s == nullptr) return cudaErrorInvalidResourceHandle;
  drain_to(s, s->queued); /* its work completes, as on a GPU */
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  EMU_LOCK();
  count("cudaStreamSynchronize");
  if (capture_forbids("cudaStreamSynchronize") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  drain_stream(s, "cudaStreamSynchronize");
  return sticky_error();
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  EMU_LOCK();
  if (s != nullptr && s->done < s->queued) {
    drain_to(s, s->queued); /* time passes: done at the next query */
    return cudaErrorNotReady;
  }
  return sticky_error();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
  EMU_LOCK();
  if (e == nullptr || flags != 0) return cudaErrorInvalidValue;
  if ((is_capturing(s) || is_capturing(e->stream)) &&
      capture_forbids("cudaStreamWaitEvent on a capturing stream") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  CUstream_st *const es = e->stream;
  uint64_t const pos = e->pos;
  if (es == nullptr) return sticky_error(); /* never recorded, or complete */
  enqueue(
      s, "cudaStreamWaitEvent", [] {},
      [es, pos] {
        drain_to(es, pos);
        return es->done >= pos;
      });
  return sticky_error();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
  EMU_LOCK();
  if (e == nullptr || (flags & ~3u) != 0) return cudaErrorInvalidValue;
  *e = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  EMU_LOCK();
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  EMU_LOCK();
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (is_capturing(s) && capture_forbids("cudaEventRecord on a capturing stream") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  if (s == nullptr) { /* the legacy stream: after everything queued so far */
    drain_all("cudaEventRecord on the legacy stream");
    e->stream = nullptr;
  } else {
    e->stream = s;
    e->pos = s->queued;
  }
  return sticky_error();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  EMU_LOCK();
  count("cudaEventSynchronize");
  if (capture_forbids("cudaEventSynchronize") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream != nullptr) block_to(e->stream, e->pos, "cudaEventSynchronize");
  return sticky_error();
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  EMU_LOCK();
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream != nullptr && e->stream->done < e->pos) {
    drain_to(e->stream, e->pos); /* time passes: complete at the next query */
    return cudaErrorNotReady;
  }
  return sticky_error();
}

cudaError_t cudaDeviceSynchronize(void) {
  EMU_LOCK();
  count("cudaDeviceSynchronize");
  if (capture_forbids("cudaDeviceSynchronize") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  drain_all("cudaDeviceSynchronize");
  return sticky_error();
}

/* ------------------------------------------------------------------------ */
/* Graphs                                                                    */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  EMU_LOCK();
  if (s == nullptr || s->capture != nullptr || (int)mode < 0 || (int)mode > 2)
    return cudaErrorInvalidValue;
  s->capture = new CUgraph_st;
  s->capture_invalid = false;
  captures++;
  return sticky_error();
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  EMU_LOCK();
  if (s == nullptr || graph == nullptr || s->capture == nullptr) return cudaErrorInvalidValue;
  CUgraph_st *const g = s->capture;
  bool const invalid = s->capture_invalid;
  s->capture = nullptr;
  captures--;
  *graph = nullptr;
  if (invalid) {
    delete g;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = g;
  return sticky_error();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
  EMU_LOCK();
  if (status == nullptr) return cudaErrorInvalidValue;
  *status = s == nullptr || s->capture == nullptr ? cudaStreamCaptureStatusNone
            : s->capture_invalid                  ? cudaStreamCaptureStatusInvalidated
                                                  : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t g, unsigned long long flags) {
  EMU_LOCK();
  if (exec == nullptr || g == nullptr || flags != 0) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{g->ops};
  count("graph instantiations");
  return sticky_error();
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  EMU_LOCK();
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (is_capturing(s) && capture_forbids("cudaGraphLaunch into a capture") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  count("graph launches");
  if (sticky_error() != cudaSuccess) return sticky_error();
  for (const op_t &op : exec->ops)
    enqueue(s, op.what, op.fn, op.ready);
  return sticky_error();
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  EMU_LOCK();
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  EMU_LOCK();
  delete g;
  return cudaSuccess;
}

} // extern "C"
