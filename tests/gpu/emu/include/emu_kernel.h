/*
 * The device side of CUDA C++, emulated on the CPU (tests/gpu/emu).
 *
 * A kernel is an ordinary host function run once per CUDA thread.
 * threadIdx, blockIdx, blockDim and gridDim are variables the emulator sets
 * before each thread runs; the threads of a block run as fibers, so that
 * __syncthreads() is a real barrier; blocks run one after another, in the
 * order EMU_ORDER asks (fwd, rev, rand). __shared__ becomes a
 * function-static variable, which one block at a time may use.
 *
 * A launch, name<<<grid, block, shmem, stream>>>(args), is rewritten at
 * build time (rewrite.pl) into EMU_LAUNCH(name, (grid, block, shmem,
 * stream), args), and cudaLaunchKernelEx(config, name, args) into
 * EMU_LAUNCH_EX(config, name, args): the configuration is checked, every
 * pointer argument must be device memory (or NULL), the arguments are
 * copied as CUDA copies them, and the grid is queued on the stream.
 *
 * Dynamic shared memory (`extern __shared__ T name[];`, rewritten into a
 * pointer to it) is each block's own, as many bytes as the launch asks,
 * full of NaN bytes at the block's start and followed by a guard page.
 * Thread block clusters (cudaLaunchKernelEx with a cluster dimension): the
 * blocks of a cluster run at the same time, their threads interleaved in
 * EMU_ORDER, so that cluster.sync() (cooperative_groups.h) is a barrier of
 * all of them and a block reads another's shared memory through
 * cluster.map_shared_rank; a block's shared memory becomes inaccessible when
 * it ends, so a peer that still reaches it faults. Kernels launched in
 * clusters must keep their shared memory dynamic: a static __shared__
 * variable would be one for the whole cluster here.
 */
#ifndef EMU_KERNEL_H
#define EMU_KERNEL_H

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

#define __global__
#define __device__
#define __host__
#define __shared__      static
#define __forceinline__ inline
#define __launch_bounds__(...)

extern thread_local uint3 emu_threadIdx, emu_blockIdx;
extern thread_local dim3 emu_blockDim, emu_gridDim;
#define threadIdx emu_threadIdx
#define blockIdx  emu_blockIdx
#define blockDim  emu_blockDim
#define gridDim   emu_gridDim
#define warpSize  32

void emu_syncthreads(void);
#define __syncthreads() emu_syncthreads()

/* The running block's dynamic shared memory (rewrite.pl turns
 * `extern __shared__ T name[];` into `T *const name = (T *)emu_dynamic_shared();`). */
void *emu_dynamic_shared(void);

/* Atomics: blocks run one at a time, so a plain read-modify-write is
 * atomic here; what the emulator cannot show is a missing fence (blocks
 * never run concurrently: see the README). */
template <typename T> inline T atomicAdd(T *address, T value) {
  T const old = *address;
  *address = old + value;
  return old;
}
inline void __threadfence(void) {}

/* cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
 * bytes): a launch asking for more than 48 KiB of dynamic shared memory
 * needs it, as on a GPU, and at most sharedMemPerBlockOptin. */
namespace emu {
cudaError_t set_func_attribute(const void *fn, enum cudaFuncAttribute attr, int value);
}
template <typename F>
cudaError_t cudaFuncSetAttribute(F *fn, enum cudaFuncAttribute attr, int value) {
  return emu::set_func_attribute((const void *)fn, attr, value);
}

namespace emu {
cudaError_t func_attributes(cudaFuncAttributes *attr, const void *fn);
}
template <typename F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, F *fn) {
  return emu::func_attributes(attr, (const void *)fn);
}

/* cudaLaunchKernelEx's configuration (cuda_runtime_api.h's, for the one
 * attribute lstream uses: a cluster dimension). */
enum cudaLaunchAttributeID { cudaLaunchAttributeClusterDimension = 4 };
union cudaLaunchAttributeValue {
  struct {
    unsigned x, y, z;
  } clusterDim;
  char pad[64];
};
struct cudaLaunchAttribute {
  enum cudaLaunchAttributeID id;
  union cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute *attrs;
  unsigned numAttrs;
};

namespace emu {
struct launch_cfg {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  unsigned cluster = 1;     /* blocks of a cluster, along x */
  const void *fn = nullptr; /* the kernel, for its attributes */
};
inline launch_cfg make_cfg(dim3 g, dim3 b, size_t shmem = 0, cudaStream_t s = nullptr) {
  return {g, b, shmem, s};
}
launch_cfg make_cfg_ex(const cudaLaunchConfig_t *c);

/* Checks the configuration and queues body, run once per thread of the
 * grid, on the stream; a bad configuration is a launch error. */
void launch_grid(const char *kernel, const launch_cfg &c, std::function<void()> body);
/* cudaOccupancyMaxActiveClusters: the device's blocks per cluster size;
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor: as threads and shared
 * memory allow (2048 threads, 228 KiB with 1 KiB reserved per block). */
cudaError_t max_active_clusters(int *n, const launch_cfg &c);
cudaError_t max_active_blocks(int *n, const launch_cfg &c);
/* A pointer argument must be NULL or point into device memory. */
void check_pointer(const char *kernel, int index, const void *p);

template <typename T> void check_arg(const char *, int, const T &) {}
template <typename T> void check_arg(const char *k, int i, T *const &p) {
  check_pointer(k, i, (const void *)p);
}

/* A kernel's name without its template arguments, kept for the program's life. */
const char *kernel_name(const char *spelled);

template <typename... P, typename... A>
void launch(const char *kernel, void (*fn)(P...), launch_cfg c, A &&...a) {
  /* The arguments, converted to the kernel's parameter types and copied now. */
  auto args = std::make_shared<std::tuple<typename std::decay<P>::type...>>(std::forward<A>(a)...);
  int i = 0;
  kernel = kernel_name(kernel);
  std::apply([&](auto &...x) { (check_arg(kernel, i++, x), ...); }, *args);
  c.fn = (const void *)fn;
  launch_grid(kernel, c, [fn, args] { std::apply(fn, *args); });
}

template <typename... P, typename... A>
cudaError_t launch_ex(const cudaLaunchConfig_t *config, const char *kernel, void (*fn)(P...),
                      A &&...a) {
  if (config == nullptr) return cudaErrorInvalidValue;
  launch(kernel, fn, make_cfg_ex(config), std::forward<A>(a)...);
  return cudaPeekAtLastError();
}
} // namespace emu

template <typename F>
cudaError_t cudaOccupancyMaxActiveClusters(int *n, F *fn, const cudaLaunchConfig_t *config) {
  if (n == nullptr || config == nullptr) return cudaErrorInvalidValue;
  emu::launch_cfg c = emu::make_cfg_ex(config);
  c.fn = (const void *)fn;
  return emu::max_active_clusters(n, c);
}

/* Blocks of a kernel per multiprocessor, as its shared memory allows. */
template <typename F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F *fn, int threads, size_t smem) {
  if (n == nullptr || threads <= 0) return cudaErrorInvalidValue;
  emu::launch_cfg c = emu::make_cfg(dim3(1), dim3((unsigned)threads), smem);
  c.fn = (const void *)fn;
  return emu::max_active_blocks(n, c);
}

#define EMU_LAUNCH(k, c, ...)    emu::launch(#k, k, emu::make_cfg c, __VA_ARGS__)
#define EMU_LAUNCH_EX(c, k, ...) emu::launch_ex(c, #k, k, __VA_ARGS__)

#endif /* EMU_KERNEL_H */
