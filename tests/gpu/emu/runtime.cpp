/*
 * The CUDA runtime API on the CPU (libcudart_emu): configuration, problems
 * and counters, devices and errors, memory calls and copies. Streams and
 * events are in streams.cpp, device memory in memory.cpp, kernels in
 * threads.cpp. What it models and what it does not: the README's "Testing the
 * CUDA backend without a GPU".
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "emu_internal.h"

namespace emu {
namespace {

config_t read_config(void) {
  config_t c;
  const char *v;
  if ((v = getenv("EMU_ORDER")) != nullptr) {
    if (!strcmp(v, "rev"))
      c.order = ORDER_REV;
    else if (!strcmp(v, "rand"))
      c.order = ORDER_RAND;
    else if (strcmp(v, "fwd") != 0)
      fprintf(stderr, "emu: EMU_ORDER=%s: want fwd, rev or rand\n", v);
  }
  if ((v = getenv("EMU_SEED")) != nullptr) c.seed = (unsigned)strtoul(v, nullptr, 10);
  if ((v = getenv("EMU_STREAMS")) != nullptr && *v) {
    c.deferred.clear();
    std::string const s = v;
    for (size_t at = 0; at <= s.size();) {
      size_t const end = s.find(',', at) == std::string::npos ? s.size() : s.find(',', at);
      std::string const m = s.substr(at, end - at);
      if (m != "eager" && m != "deferred")
        fprintf(stderr, "emu: EMU_STREAMS: '%s' is neither eager nor deferred\n", m.c_str());
      c.deferred.push_back(m != "eager");
      at = end + 1;
    }
  }
  if ((v = getenv("EMU_PROTECT")) != nullptr) c.protect = strcmp(v, "0") != 0;
  if ((v = getenv("EMU_DEVICE")) != nullptr) {
    if (!strcmp(v, "none")) { /* a driver, no device */
      c.device = cudaErrorNoDevice;
    } else if (!strcmp(v, "no-driver")) { /* as a machine without a GPU driver */
      c.device = cudaErrorInsufficientDriver;
      c.driver = 0;
    } else if (!strcmp(v, "old-driver")) { /* a CUDA 12.4 driver */
      c.device = cudaErrorInsufficientDriver;
      c.driver = 12040;
    } else if (strcmp(v, "1") != 0) {
      fprintf(stderr, "emu: EMU_DEVICE=%s: want 1, none, no-driver or old-driver\n", v);
    }
  }
  if ((v = getenv("EMU_FAIL_ALLOC")) != nullptr) c.fail_alloc = atol(v);
  if ((v = getenv("EMU_FAIL_KERNEL")) != nullptr) {
    c.fail_kernel = v;
    size_t const colon = c.fail_kernel.find(':');
    c.fail_kernel_at = colon == std::string::npos ? 1 : atol(v + colon + 1);
    if (colon != std::string::npos) c.fail_kernel.resize(colon);
  }
  if ((v = getenv("EMU_REPORT")) != nullptr) c.report = v;
  if ((v = getenv("EMU_SMS")) != nullptr) c.sms = atoi(v) > 0 ? atoi(v) : c.sms;
  return c;
}

long problems;
bool expecting; /* emu_expect_problems */
cudaError_t launch_error = cudaSuccess, sticky = cudaSuccess;
/* Counters by name; never destroyed (the exit report reads them). */
std::map<std::string, long> &counts = *new std::map<std::string, long>;
int device = 0;

void report_to(FILE *f) {
  for (auto &kv : counts)
    fprintf(f, "emu: %-32s %ld\n", kv.first.c_str(), kv.second);
  fprintf(f, "emu: problems %ld\n", problems);
}

/* At exit: the counts where asked, and status 3 if the emulator found a
 * problem the program itself did not notice. */
__attribute__((destructor)) void at_exit(void) {
  if (!config().report.empty()) {
    std::string path = config().report; /* %p: the process id (one file per rank) */
    size_t const at = path.find("%p");
    if (at != std::string::npos) path.replace(at, 2, std::to_string((long)getpid()));
    FILE *const f = fopen(path.c_str(), "w");
    if (f != nullptr) {
      report_to(f);
      fclose(f);
    }
  }
  if (problems > 0) {
    fprintf(stderr, "emu: %ld problem%s found: exit status 3\n", problems, problems > 1 ? "s" : "");
    fflush(stdout);
    _exit(3);
  }
}

} // namespace

const config_t &config() {
  static const config_t *c = new config_t(read_config()); /* never destroyed: at_exit reads it */
  return *c;
}

std::recursive_mutex &lock() {
  static std::recursive_mutex *m = new std::recursive_mutex;
  return *m;
}

void problem(const char *fmt, ...) {
  EMU_LOCK();
  problems++;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s: %s\n", expecting ? "emu: expected problem" : "EMU PROBLEM", msg);
}

void count(const char *what) {
  EMU_LOCK();
  counts[what]++;
}

void set_launch_error(cudaError_t e) {
  launch_error = e;
}
cudaError_t take_launch_error(bool clear) {
  cudaError_t const e = sticky != cudaSuccess ? sticky : launch_error;
  if (clear) launch_error = cudaSuccess;
  return e;
}
void set_sticky(cudaError_t e) {
  sticky = e;
}
cudaError_t sticky_error(void) {
  return sticky;
}

} // namespace emu

using namespace emu;

/* ------------------------------------------------------------------------ */
/* Controls for tests                                                        */

extern "C" {
void emu_fail_alloc_at(long k) {
  EMU_LOCK();
  fail_alloc_at(k);
}
void emu_fail_host_alloc_at(long k) {
  EMU_LOCK();
  fail_host_alloc_at(k);
}
void emu_fail_kernel(const char *name, long k) {
  EMU_LOCK();
  fail_kernel(name, k);
}
void emu_clear_error(void) {
  EMU_LOCK();
  sticky = cudaSuccess;
  launch_error = cudaSuccess;
}
long emu_live_device_allocs(void) {
  EMU_LOCK();
  return live_device();
}
long emu_live_host_allocs(void) {
  EMU_LOCK();
  return live_host();
}
long emu_problems(void) {
  return problems;
}
void emu_expect_problems(int on) {
  EMU_LOCK();
  expecting = on != 0;
}
long emu_take_problems(void) {
  EMU_LOCK();
  long const n = problems;
  problems = 0;
  return n;
}
long emu_count(const char *what) {
  EMU_LOCK();
  auto const it = counts.find(what);
  return it == counts.end() ? 0 : it->second;
}
void emu_reset_counts(void) {
  EMU_LOCK();
  counts.clear();
}
void emu_report(void) {
  EMU_LOCK();
  report_to(stderr);
}
int emu_device_range(const void *p, size_t bytes) {
  EMU_LOCK();
  return device_range(p, bytes);
}

/* ------------------------------------------------------------------------ */
/* Devices and errors                                                        */

cudaError_t cudaGetDeviceCount(int *n) {
  if (n == nullptr) return cudaErrorInvalidValue;
  *n = config().device == cudaSuccess ? 1 : 0;
  return config().device;
}

cudaError_t cudaDriverGetVersion(int *v) {
  if (v == nullptr) return cudaErrorInvalidValue;
  *v = config().driver;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v) {
  if (v == nullptr) return cudaErrorInvalidValue;
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
  if (config().device != cudaSuccess) return config().device;
  if (d != 0) return cudaErrorInvalidDevice;
  device = d;
  return sticky;
}

cudaError_t cudaGetDevice(int *d) {
  if (d == nullptr) return cudaErrorInvalidValue;
  *d = device;
  return config().device;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) {
  if (p == nullptr) return cudaErrorInvalidValue;
  if (config().device != cudaSuccess) return config().device;
  if (d != 0) return cudaErrorInvalidDevice;
  memset(p, 0, sizeof *p);
  snprintf(p->name, sizeof p->name, "CUDA emulator (sm_90 on the CPU)");
  p->major = 9, p->minor = 0;
  p->multiProcessorCount = config().sms;
  p->sharedMemPerBlockOptin = SHARED_OPTIN;
  p->totalGlobalMem = (size_t)80 << 30;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  EMU_LOCK();
  return take_launch_error(true);
}

cudaError_t cudaPeekAtLastError(void) {
  EMU_LOCK();
  return take_launch_error(false);
}

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorInitializationError: return "cudaErrorInitializationError";
  case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
  case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
  case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
  case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  case cudaErrorNotSupported: return "cudaErrorNotSupported";
  case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorMemoryAllocation: return "out of memory";
  case cudaErrorInitializationError: return "initialization error";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorInsufficientDriver:
    return "CUDA driver version is insufficient for CUDA runtime version";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle: return "invalid resource handle";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
  case cudaErrorLaunchFailure: return "unspecified launch failure";
  case cudaErrorNotSupported: return "operation not supported";
  case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureImplicit:
    return "operation would make the legacy stream depend on a capturing blocking stream";
  }
  return "unknown error";
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

cudaError_t cudaMalloc(void **p, size_t bytes) {
  EMU_LOCK();
  count("cudaMalloc");
  if (sticky != cudaSuccess) return sticky;
  if (capture_forbids("cudaMalloc") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  return device_alloc(p, bytes, "cudaMalloc");
}

cudaError_t cudaFree(void *p) {
  EMU_LOCK();
  count("cudaFree");
  if (capture_forbids("cudaFree") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain_all("cudaFree"); /* cudaFree synchronises the device */
  cudaError_t const e = device_free(p, "cudaFree");
  return sticky != cudaSuccess ? sticky : e;
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
  EMU_LOCK();
  count("cudaMallocAsync");
  if (sticky != cudaSuccess) return sticky;
  if (is_capturing(s) && capture_forbids("cudaMallocAsync") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  return device_alloc(p, bytes, "cudaMallocAsync");
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  EMU_LOCK();
  count("cudaFreeAsync");
  if (p == nullptr) return sticky;
  if (is_capturing(s) && capture_forbids("cudaFreeAsync") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  if (!is_device(p)) return device_free(p, "cudaFreeAsync"); /* reports it */
  /* Released when the stream reaches it: work queued before may still use it. */
  enqueue(s, "cudaFreeAsync", [p] { (void)device_free(p, "cudaFreeAsync"); });
  return sticky;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) {
  EMU_LOCK();
  count("cudaMallocHost");
  if (sticky != cudaSuccess) return sticky;
  if (capture_forbids("cudaMallocHost") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  return host_alloc(p, bytes);
}

cudaError_t cudaFreeHost(void *p) {
  EMU_LOCK();
  if (capture_forbids("cudaFreeHost") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain_all("cudaFreeHost"); /* as cudaFree */
  return host_free(p);
}

namespace {

/* Checks a copy's kind against its pointers and its ranges; a problem
 * otherwise. */
cudaError_t check_copy(void *dst, const void *src, size_t n, cudaMemcpyKind *kind) {
  bool const dd = is_device(dst), sd = is_device(src);
  cudaMemcpyKind const want = dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                 : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  if (*kind != cudaMemcpyDefault && *kind != want) {
    problem("cudaMemcpyAsync: kind %d does not match its pointers (dst %s, src %s)", (int)*kind,
            dd ? "device" : "host", sd ? "device" : "host");
    return cudaErrorInvalidValue;
  }
  *kind = want;
  if ((dd && !device_range(dst, n)) || (sd && !device_range(src, n))) {
    problem("cudaMemcpyAsync of %zu bytes runs past the end of its %s allocation", n,
            dd && !device_range(dst, n) ? "destination" : "source");
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

} // namespace

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  EMU_LOCK();
  count("cudaMemcpyAsync");
  if (sticky != cudaSuccess) return sticky;
  if (n == 0) return cudaSuccess;
  cudaError_t const e = check_copy(dst, src, n, &kind);
  if (e != cudaSuccess) return e;
  if (is_capturing(s) &&
      ((kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) ||
       (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, n))) &&
      capture_forbids("cudaMemcpyAsync with pageable host memory") != cudaSuccess)
    return cudaErrorStreamCaptureUnsupported;
  if (kind == cudaMemcpyHostToDevice && !is_pinned(src, n)) {
    /* From pageable memory the source is staged at once: the caller may
     * reuse it when the call returns. */
    auto const staged = std::make_shared<std::string>((const char *)src, n);
    enqueue(s, "cudaMemcpyAsync", [dst, staged] { memcpy(dst, staged->data(), staged->size()); });
    return sticky;
  }
  /* Pinned memory (and device memory) is read and written when the copy runs. */
  enqueue(s, "cudaMemcpyAsync", [dst, src, n] { memmove(dst, src, n); });
  if (kind == cudaMemcpyDeviceToHost && !is_pinned(dst, n)) {
    count("blocking copies"); /* into pageable memory: returns when done */
    drain_stream(s, "a copy into pageable host memory");
  }
  return sticky;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind) {
  EMU_LOCK();
  if (capture_forbids("cudaMemcpy") != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  drain_all("cudaMemcpy");
  cudaError_t const e = cudaMemcpyAsync(dst, src, n, kind, nullptr);
  return e;
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
  EMU_LOCK();
  count("cudaMemsetAsync");
  if (sticky != cudaSuccess) return sticky;
  if (n == 0) return cudaSuccess;
  if (!device_range(dst, n)) {
    problem("cudaMemsetAsync of %zu bytes at %p: not inside one device allocation", n, dst);
    return cudaErrorInvalidValue;
  }
  enqueue(s, "cudaMemsetAsync", [dst, value, n] { memset(dst, value, n); });
  return sticky;
}

} // extern "C"
