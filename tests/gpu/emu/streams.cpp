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
 */
#include <stdio.h>
#include <string.h>

#include <deque>
#include <functional>

#include "emu_internal.h"

struct op_t {
  std::function<void()> fn;
  const char *what;
};

struct CUstream_st {
  int id; /* 1-based creation order */
  bool deferred;
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
} // namespace

const char *current_op(void) {
  return running_op;
}
void set_current_op(const char *what) {
  running_op = what;
}

void drain_all(void) {
  for (CUstream_st *s : streams)
    drain_to(s, s->queued);
}

void drain_stream(cudaStream_t s) {
  if (s == nullptr)
    drain_all();
  else
    drain_to(s, s->queued);
}

void enqueue(cudaStream_t s, const char *what, std::function<void()> fn) {
  EMU_LOCK();
  if (s == nullptr) { /* the legacy default stream: after all work, before any */
    drain_all();
    window_enter();
    const char *const outer = running_op;
    running_op = what;
    fn();
    running_op = outer;
    window_leave();
    return;
  }
  s->queue.push_back(op_t{std::move(fn), what});
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
  if (s == nullptr)
    drain_all();
  else
    drain_to(s, s->queued);
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
  CUstream_st *const es = e->stream;
  uint64_t const pos = e->pos;
  if (es == nullptr) return sticky_error(); /* never recorded, or complete */
  enqueue(s, "cudaStreamWaitEvent", [es, pos] { drain_to(es, pos); });
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
  if (s == nullptr) { /* the legacy stream: after everything queued so far */
    drain_all();
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
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream != nullptr) drain_to(e->stream, e->pos);
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
  drain_all();
  return sticky_error();
}

} // extern "C"
