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
 * stream), args): the configuration is checked, every pointer argument must
 * be device memory (or NULL), the arguments are copied as CUDA copies them,
 * and the grid is queued on the stream.
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

namespace emu {
cudaError_t func_attributes(cudaFuncAttributes *attr, const void *fn);
}
template <typename F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *attr, F *fn) {
  return emu::func_attributes(attr, (const void *)fn);
}

namespace emu {
struct launch_cfg {
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
};
inline launch_cfg make_cfg(dim3 g, dim3 b, size_t shmem = 0, cudaStream_t s = nullptr) {
  return {g, b, shmem, s};
}

/* Checks the configuration and queues body, run once per thread of the
 * grid, on the stream; a bad configuration is a launch error. */
void launch_grid(const char *kernel, const launch_cfg &c, std::function<void()> body);
/* A pointer argument must be NULL or point into device memory. */
void check_pointer(const char *kernel, int index, const void *p);

template <typename T> void check_arg(const char *, int, const T &) {}
template <typename T> void check_arg(const char *k, int i, T *const &p) {
  check_pointer(k, i, (const void *)p);
}

template <typename... P, typename... A>
void launch(const char *kernel, void (*fn)(P...), const launch_cfg &c, A &&...a) {
  /* The arguments, converted to the kernel's parameter types and copied now. */
  auto args = std::make_shared<std::tuple<typename std::decay<P>::type...>>(std::forward<A>(a)...);
  int i = 0;
  std::apply([&](auto &...x) { (check_arg(kernel, i++, x), ...); }, *args);
  launch_grid(kernel, c, [fn, args] { std::apply(fn, *args); });
}
} // namespace emu

#define EMU_LAUNCH(k, c, ...) emu::launch(#k, k, emu::make_cfg c, __VA_ARGS__)

#endif /* EMU_KERNEL_H */
