/*
 * Internals of the CUDA emulator shared by its files (runtime.cpp: the API
 * and configuration; memory.cpp: device memory; streams.cpp: streams,
 * events and device operations; threads.cpp: kernels as fibers).
 */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include <mutex>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "emu.h"

namespace emu {

enum order_t { ORDER_FWD, ORDER_REV, ORDER_RAND };

struct config_t {
  order_t order = ORDER_FWD;
  unsigned seed = 12345;
  std::vector<bool> deferred{true}; /* by stream creation order, the last repeating */
  bool protect = true;
  cudaError_t device = cudaSuccess; /* what cudaGetDeviceCount reports */
  int driver = CUDART_VERSION;      /* what cudaDriverGetVersion reports (0: none) */
  long fail_alloc = 0;
  std::string fail_kernel;
  long fail_kernel_at = 0;
  std::string report;
  int sms = 132; /* multiprocessors (EMU_SMS) */
};

/* The most dynamic shared memory a block may ask for (sm_90: 227 KiB). */
size_t const SHARED_OPTIN = 232448;
const config_t &config();

/* One lock over the whole emulator: it runs device work on the thread that
 * waits for it. */
std::recursive_mutex &lock();

/* The last error of a failed launch (cleared by cudaGetLastError), and the
 * sticky error of failed device work (never cleared). */
void set_launch_error(cudaError_t e);
cudaError_t take_launch_error(bool clear);
void set_sticky(cudaError_t e);

/* Device memory (memory.cpp). */
cudaError_t device_alloc(void **ptr, size_t bytes, const char *how);
cudaError_t device_free(void *ptr, const char *how);
bool is_device(const void *p);              /* inside a live device allocation */
bool device_range(const void *p, size_t n); /* [p, p + n) inside one */
bool is_pinned(const void *p, size_t n);    /* inside one cudaMallocHost block */
cudaError_t host_alloc(void **ptr, size_t bytes);
cudaError_t host_free(void *ptr);
long live_device(void);
long live_host(void);
void fail_alloc_at(long k);
void fail_host_alloc_at(long k);
/* Device memory is accessible between window_enter and window_leave
 * (nested), inaccessible to host code otherwise. */
void window_enter(void);
void window_leave(void);

/* Dynamic shared memory of the blocks of the group running (memory.cpp):
 * blocks 0..blocks-1 get `bytes` each, NaN-filled and accessible; a block
 * that ended is closed (inaccessible); done closes them all. shared_fault
 * says (into msg) what a fault at x touched, if x is shared memory. */
void shared_prepare(unsigned blocks, size_t bytes);
char *shared_region(unsigned block);
void shared_close(unsigned block);
void shared_done(void);
bool shared_fault(uintptr_t x, char *msg, size_t size);

/* Device operations (streams.cpp), for a call `what` that blocks until
 * they have run (a problem if one never can). */
void drain_all(const char *what);
void drain_stream(cudaStream_t s, const char *what); /* what s holds so far (NULL: all) */
/* cudaSuccess, or (a problem, the captures invalidated) the error of a
 * call named `what` that a running stream capture forbids. */
cudaError_t capture_forbids(const char *what);
bool is_capturing(cudaStream_t s);
/* What runs now, for messages ("kernel NAME block (x,y,z) thread (x,y,z)"). */
const char *current_op(void);
void set_current_op(const char *what);

/* Kernels (threads.cpp): runs the grid now. */
void run_grid(const char *kernel, const launch_cfg &c, const std::function<void()> &body);
void fail_kernel(const char *name, long k);
/* The thread being run, for messages. */
void describe_thread(char *buf, size_t size);

} // namespace emu

#define EMU_LOCK() std::lock_guard<std::recursive_mutex> emu_guard_(emu::lock())

#endif /* EMU_INTERNAL_H */
