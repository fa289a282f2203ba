/*
 * The CUDA emulator's own interface (tests/gpu/emu): controls and counters
 * for its tests (C), and what the cuBLAS and NCCL stand-ins use to queue
 * their work (C++).
 *
 * Environment (read once):
 *   EMU_ORDER=fwd|rev|rand  order of the threads of a block and of the blocks
 *                           of a grid (rand: EMU_SEED, default 12345)
 *   EMU_STREAMS=M[,M...]    M = eager (work runs when queued) or deferred
 *                           (work runs only when something waits for it),
 *                           by stream creation order, the last repeating;
 *                           default deferred
 *   EMU_DEVICE=1|none|no-driver|old-driver  one device; a driver and no
 *                           device; no driver (as without a GPU); a driver
 *                           too old for CUDA 13
 *   EMU_FAIL_ALLOC=K        the K-th device allocation fails
 *   EMU_FAIL_KERNEL=NAME[:K] the K-th run (default 1st) of kernel NAME fails
 *                           (cudaErrorLaunchFailure, sticky, as a GPU fault)
 *   EMU_PROTECT=0           device memory stays readable by host code
 *   EMU_REPORT=FILE         counts of launches, calls and copies at exit (%p in
 *                           FILE: the process id)
 *   EMU_SMS=N               the device's multiprocessors (default 132)
 *   EMU_NCCL_PEER_LOST=K[:error|:hang]  from the K-th ncclAllReduce on, a
 *                           peer never joins: the sums stay queued until
 *                           ncclCommAbort (tests/gpu/emu/nccl.cpp)
 * Every problem found prints "EMU PROBLEM: ..." on stderr and makes the
 * process exit with status 3 at the latest when it ends.
 */
#ifndef EMU_H
#define EMU_H

#include <stddef.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocation failures: the k-th device allocation (cudaMalloc,
 * cudaMallocAsync) / pinned host allocation (cudaMallocHost) counted from
 * this call fails; k <= 0: none. */
void emu_fail_alloc_at(long k);
void emu_fail_host_alloc_at(long k);
/* The k-th run of kernel `name` from now fails (NULL: none). */
void emu_fail_kernel(const char *name, long k);
/* Clears a sticky error (as a fresh context would). */
void emu_clear_error(void);
/* Live device allocations and pinned host allocations. */
long emu_live_device_allocs(void);
long emu_live_host_allocs(void);
/* Problems found so far. */
long emu_problems(void);
/* Problems found so far, forgotten: for tests of the emulator itself,
 * which provoke problems on purpose. */
long emu_take_problems(void);
/* On: problems print as expected ones (still counted). */
void emu_expect_problems(int on);
/* A counter: a kernel's name (its launches), or one of "kernel launches",
 * "cublasSgemm", "ncclAllReduce", "cudaMalloc", "cudaMallocAsync",
 * "cudaFree", "cudaFreeAsync", "cudaMemcpyAsync", "cudaMemsetAsync",
 * "cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize",
 * "blocking copies" (device -> pageable host); what the device ran (direct
 * or from a graph): "kernels run", "gemms run"; graphs: "captured
 * operations", "graph instantiations", "graph launches". */
long emu_count(const char *what);
void emu_reset_counts(void);
/* Prints every counter. */
void emu_report(void);
/* 1 if [p, p + bytes) lies inside one live device allocation. */
int emu_device_range(const void *p, size_t bytes);

#ifdef __cplusplus
}

#include <functional>

namespace emu {
/* Reports a problem (printf format): counted, printed, fatal at exit. */
void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Counts one `what`. */
void count(const char *what);
/* Queues fn on the stream (NULL: the legacy default stream) as one device
 * operation named `what`; it runs with device memory accessible. With
 * `ready`, the stream stops before it while ready() says no (it waits for
 * something outside the stream: a peer's part of a sum). */
void enqueue(cudaStream_t stream, const char *what, std::function<void()> fn,
             std::function<bool()> ready = nullptr);
/* A sticky error raised by device work (or cudaSuccess). */
cudaError_t sticky_error(void);
} // namespace emu
#endif

#endif /* EMU_H */
