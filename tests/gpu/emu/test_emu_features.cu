/*
 * The CUDA emulator's own features, each shown to work and, where it is
 * there to catch a bug, shown to catch it: dynamic shared memory, thread
 * block clusters (cluster.sync, distributed shared memory), atomics, the
 * shared memory limit, and graphs (stream capture and replay). Compiled as
 * the backend is (rewrite.pl, then host C++ against the emulated headers);
 * run in each thread order. A check that provokes an emulator problem on
 * purpose takes it back (emu_take_problems); one that faults runs in a
 * child process. Exit status 0 when every check passed, 1 otherwise.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "emu.h"

namespace cg = cooperative_groups;

static int failures;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      failures++;                                                                                  \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
    }                                                                                              \
  } while (0)

enum { THREADS = 64, CLUSTER = 2, BLOCKS = 6 };

/* ------------------------------------------------------------------------ */
/* Kernels                                                                   */

/* out[block][t] = the block's shared memory at t before anything wrote it
 * (1: NaN), then each thread's write read back by its neighbour. */
__global__ static void shared_kernel(float *out) {
  extern __shared__ float sh[];
  float const before = sh[threadIdx.x];
  sh[threadIdx.x] = (float)(blockIdx.x * 1000 + threadIdx.x);
  __syncthreads();
  float const next = sh[(threadIdx.x + 1) % blockDim.x];
  out[blockIdx.x * blockDim.x + threadIdx.x] = isnan(before) ? next : -1.0f;
}

/* Each thread writes its value into the same place of every block of its
 * cluster; after cluster.sync() (when `sync`) it reads what its peer wrote. */
__global__ static void exchange_kernel(float *out, int sync) {
  extern __shared__ float sh[]; /* [CLUSTER][THREADS] */
  cg::cluster_group const cluster = cg::this_cluster();
  unsigned const rank = cluster.block_rank();
  for (unsigned r = 0; r < cluster.num_blocks(); r++)
    cluster.map_shared_rank(sh, r)[rank * blockDim.x + threadIdx.x] =
        (float)(blockIdx.x * 100 + threadIdx.x);
  if (sync) cluster.sync();
  unsigned const peer = (rank + 1) % cluster.num_blocks();
  out[blockIdx.x * blockDim.x + threadIdx.x] = sh[peer * blockDim.x + threadIdx.x];
  if (sync) cluster.sync(); /* peers write no more into a block that ended */
}

/* Half the threads wait at __syncthreads(), the others at cluster.sync(). */
__global__ static void mismatch_kernel(float *out) {
  cg::cluster_group const cluster = cg::this_cluster();
  if (threadIdx.x % 2)
    __syncthreads();
  else
    cluster.sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

/* Block 1 of each cluster ends at once; block 0 then waits at cluster.sync(). */
__global__ static void early_exit_kernel(float *out) {
  cg::cluster_group const cluster = cg::this_cluster();
  if (cluster.block_rank() == 1) return;
  cluster.sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

/* Block 0 writes into block 1's shared memory after block 1 has ended. */
__global__ static void late_write_kernel(int wait) {
  extern __shared__ float sh[];
  cg::cluster_group const cluster = cg::this_cluster();
  if (cluster.block_rank() == 1) return;
  __syncthreads(); /* block 1 has run to its end by now, in every order */
  if (wait == 0) cluster.map_shared_rank(sh, 1)[threadIdx.x] = 1.0f;
}

/* map_shared_rank of a pointer that is not shared memory, and of a rank
 * outside the cluster. */
__global__ static void bad_map_kernel(float *global) {
  extern __shared__ float sh[];
  cg::cluster_group const cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
    (void)cluster.map_shared_rank(global, 0);
    (void)cluster.map_shared_rank(sh, cluster.num_blocks());
  }
}

/* A read one float past the block's dynamic shared memory. */
__global__ static void overrun_kernel(float *out, int n) {
  extern __shared__ float sh[];
  out[0] = sh[n];
}

/* p[i] = 1. */
__global__ static void poke_kernel(float *p, int i) {
  p[i] = 1.0f;
}

/* The sum of v over the grid, in the last block to finish (whichever it
 * is), in block order; the counter is left at zero for the next launch. */
__global__ static void last_block_kernel(double *out, double *partials, unsigned *counter,
                                         const double *v) {
  extern __shared__ double red[];
  red[threadIdx.x] = v[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (unsigned i = 0; i < blockDim.x; i++)
      s += red[i];
    partials[blockIdx.x] = s;
    __threadfence();
    red[0] = atomicAdd(counter, 1u) == gridDim.x - 1 ? 1.0 : 0.0;
  }
  __syncthreads();
  if (red[0] != 1.0 || threadIdx.x != 0) return;
  double s = 0.0;
  for (unsigned b = 0; b < gridDim.x; b++)
    s += ((volatile double *)partials)[b];
  *out = s;
  *counter = 0;
}

/* x[i] = x[i] * 2 + 1 */
__global__ static void affine_kernel(float *x, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static cudaLaunchConfig_t cluster_cfg(cudaLaunchAttribute *attr, unsigned blocks, unsigned cluster,
                                      size_t shmem, cudaStream_t s) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster, attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(blocks), c.blockDim = dim3(THREADS);
  c.dynamicSmemBytes = shmem, c.stream = s;
  c.attrs = attr, c.numAttrs = 1;
  return c;
}

static void download(void *host, const void *dev, size_t bytes, cudaStream_t s) {
  CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s) == cudaSuccess,
        "download failed");
  CHECK(cudaStreamSynchronize(s) == cudaSuccess, "synchronise failed");
}

/* Runs fn in a child process; its exit status, and whether its stderr
 * holds `want`. */
static int in_child(void (*fn)(void), const char *want, int *said) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return -1;
  fflush(stdout);
  pid_t const pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    fn();
    exit(0); /* through the emulator's exit check: status 3 if it found a problem */
  }
  close(pipefd[1]);
  char buf[8192];
  size_t got = 0;
  ssize_t r;
  while ((r = read(pipefd[0], buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t)r;
  buf[got] = 0;
  close(pipefd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  *said = strstr(buf, want) != NULL;
  if (!*said) printf("  (the child said: %s)\n", buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */

static void check_shared(cudaStream_t s, float *dev, float *host) {
  shared_kernel<<<BLOCKS, THREADS, THREADS * sizeof(float), s>>>(dev);
  download(host, dev, BLOCKS * THREADS * sizeof(float), s);
  int bad = 0;
  for (int b = 0; b < BLOCKS; b++)
    for (int t = 0; t < THREADS; t++)
      bad += host[b * THREADS + t] != (float)(b * 1000 + (t + 1) % THREADS);
  CHECK(bad == 0, "dynamic shared memory: %d threads saw another block's memory or no NaN", bad);
}

static void check_cluster(cudaStream_t s, float *dev, float *host) {
  cudaLaunchAttribute attr;
  size_t const shmem = CLUSTER * THREADS * sizeof(float);
  for (int sync = 1; sync >= 0; sync--) {
    cudaLaunchConfig_t const c = cluster_cfg(&attr, BLOCKS, CLUSTER, shmem, s);
    CHECK(cudaLaunchKernelEx(&c, exchange_kernel, dev, sync) == cudaSuccess, "cluster launch");
    download(host, dev, BLOCKS * THREADS * sizeof(float), s);
    int wrong = 0;
    for (int b = 0; b < BLOCKS; b++)
      for (int t = 0; t < THREADS; t++) {
        int const peer = b / CLUSTER * CLUSTER + (b % CLUSTER + 1) % CLUSTER;
        wrong += host[b * THREADS + t] != (float)(peer * 100 + t);
      }
    if (sync)
      CHECK(wrong == 0, "cluster exchange with cluster.sync(): %d wrong values", wrong);
    else
      CHECK(wrong > 0, "cluster exchange without cluster.sync(): the race did not show");
  }
  long const problems = emu_take_problems();
  CHECK(problems == 0, "a correct cluster kernel raised %ld problems", problems);
  int n = 0;
  cudaLaunchConfig_t const c = cluster_cfg(&attr, CLUSTER, CLUSTER, shmem, s);
  CHECK(cudaOccupancyMaxActiveClusters(&n, exchange_kernel, &c) == cudaSuccess && n == 132 / 2,
        "cudaOccupancyMaxActiveClusters: %d clusters of 2, want 66", n);
}

/* Barriers not every thread reaches, bad maps, bad configurations: each an
 * emulator problem. */
static void check_problems(cudaStream_t s, float *dev) {
  cudaLaunchAttribute attr;
  static const char *const cases[] = {"mismatched barriers", "cluster.sync() a block ended before",
                                      "map_shared_rank of global memory and of rank 2",
                                      "a grid that is no whole number of clusters",
                                      "more than 48 KiB of shared memory without the attribute"};
  for (int k = 0; k < 5; k++) {
    cudaLaunchConfig_t c = cluster_cfg(&attr, CLUSTER, CLUSTER, sizeof(float) * THREADS, s);
    if (k == 0) cudaLaunchKernelEx(&c, mismatch_kernel, dev);
    if (k == 1) cudaLaunchKernelEx(&c, early_exit_kernel, dev);
    if (k == 2) cudaLaunchKernelEx(&c, bad_map_kernel, dev);
    if (k == 3) c.gridDim = dim3(CLUSTER + 1), cudaLaunchKernelEx(&c, exchange_kernel, dev, 1);
    if (k == 4) shared_kernel<<<1, THREADS, 49 * 1024, s>>>(dev);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "%s: synchronise", cases[k]);
    (void)cudaGetLastError();
    long const got = emu_take_problems();
    CHECK(got >= (k == 2 ? 2 : 1), "%s: %ld problems", cases[k], got);
  }
  /* With the attribute the same launch is fine; 227 KiB is the most. */
  CHECK(cudaFuncSetAttribute(shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             64 * 1024) == cudaSuccess,
        "cudaFuncSetAttribute 64 KiB");
  shared_kernel<<<1, THREADS, 49 * 1024, s>>>(dev);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess && emu_take_problems() == 0,
        "49 KiB of shared memory after cudaFuncSetAttribute");
  CHECK(cudaFuncSetAttribute(shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             228 * 1024) == cudaErrorInvalidValue,
        "cudaFuncSetAttribute above 227 KiB should fail");
}

static cudaStream_t child_stream;
static float *child_dev;
static void late_write(void) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t const c =
      cluster_cfg(&attr, CLUSTER, CLUSTER, THREADS * sizeof(float), child_stream);
  cudaLaunchKernelEx(&c, late_write_kernel, 0);
  cudaStreamSynchronize(child_stream);
}
static void overrun(void) {
  overrun_kernel<<<1, 1, 16 * sizeof(float), child_stream>>>(child_dev, 16);
  cudaStreamSynchronize(child_stream);
}
/* Host code reads device memory that a kernel had just touched (opened in
 * its window): closed again once the kernel's window ended. */
static void host_touch(void) {
  poke_kernel<<<1, 1, 0, child_stream>>>(child_dev, 0);
  cudaStreamSynchronize(child_stream);
  printf("%g\n", (double)*(volatile float *)child_dev);
}
/* The same with memory allocated on the stream (inside a window). */
static void host_touch_async(void) {
  float *p = NULL;
  cudaMallocAsync((void **)&p, 64, child_stream);
  poke_kernel<<<1, 1, 0, child_stream>>>(p, 0);
  cudaStreamSynchronize(child_stream);
  printf("%g\n", (double)*(volatile float *)p);
}
/* A kernel writes one float past the end of its allocation, opened by an
 * earlier write in the same window. */
static void past_end(void) {
  poke_kernel<<<1, 1, 0, child_stream>>>(child_dev, 0);
  poke_kernel<<<1, 1, 0, child_stream>>>(child_dev, BLOCKS * THREADS);
  cudaStreamSynchronize(child_stream);
}
/* A kernel writes into memory freed before it. */
static void after_free(void) {
  float *p = NULL;
  cudaMalloc((void **)&p, 64);
  poke_kernel<<<1, 1, 0, child_stream>>>(p, 0);
  cudaStreamSynchronize(child_stream);
  cudaFree(p);
  poke_kernel<<<1, 1, 0, child_stream>>>(p, 1);
  cudaStreamSynchronize(child_stream);
}

static void check_faults(cudaStream_t s, float *dev) {
  child_stream = s, child_dev = dev;
  int said = 0, rc = in_child(late_write, "after that block had ended", &said);
  CHECK(rc == 3 && said, "a write into an ended block's shared memory: exit %d, message %d", rc,
        said);
  rc = in_child(overrun, "outside the 64 bytes of dynamic shared memory", &said);
  CHECK(rc == 3 && said, "a read past dynamic shared memory: exit %d, message %d", rc, said);
  const char *const host_only = "reachable only through CUDA calls";
  rc = in_child(host_touch, host_only, &said);
  CHECK(rc == 3 && said, "host code reading device memory after a kernel: exit %d, message %d", rc,
        said);
  rc = in_child(host_touch_async, host_only, &said);
  CHECK(rc == 3 && said, "host code reading cudaMallocAsync memory: exit %d, message %d", rc, said);
  rc = in_child(past_end, "bytes past the end of a device allocation", &said);
  CHECK(rc == 3 && said, "a write past a device allocation: exit %d, message %d", rc, said);
  rc = in_child(after_free, "device memory freed earlier", &said);
  CHECK(rc == 3 && said, "a write into freed device memory: exit %d, message %d", rc, said);
}

static void check_atomics(cudaStream_t s) {
  enum { NB = 37 };
  double host[NB * THREADS], sum = 0.0, got[2] = {0, 0};
  for (int i = 0; i < NB * THREADS; i++)
    host[i] = 1.0 / (1 + i % 17), sum += host[i];
  double *v = NULL, *partials = NULL, *out = NULL;
  unsigned *counter = NULL;
  cudaMallocAsync((void **)&v, sizeof host, s);
  cudaMallocAsync((void **)&partials, NB * sizeof(double), s);
  cudaMallocAsync((void **)&out, sizeof(double), s);
  cudaMallocAsync((void **)&counter, sizeof(unsigned), s);
  cudaMemsetAsync(counter, 0, sizeof(unsigned), s);
  cudaMemcpyAsync(v, host, sizeof host, cudaMemcpyHostToDevice, s);
  for (int k = 0; k < 2; k++) { /* twice: the counter was reset */
    last_block_kernel<<<NB, THREADS, THREADS * sizeof(double), s>>>(out, partials, counter, v);
    download(&got[k], out, sizeof(double), s);
  }
  double serial = 0.0; /* the kernel's order: per block, then blocks in order */
  for (int b = 0; b < NB; b++) {
    double p = 0.0;
    for (int t = 0; t < THREADS; t++)
      p += host[b * THREADS + t];
    serial += p;
  }
  CHECK(got[0] == serial && got[1] == serial,
        "last-block sum %.17g, %.17g, want %.17g (within rounding of %.17g)", got[0], got[1],
        serial, sum);
  cudaFreeAsync(v, s), cudaFreeAsync(partials, s), cudaFreeAsync(out, s), cudaFreeAsync(counter, s);
}

static void check_graphs(cudaStream_t s, float *dev) {
  enum { N = 100 };
  float *pinned = NULL, host[N];
  cudaMallocHost((void **)&pinned, N * sizeof(float));
  for (int i = 0; i < N; i++)
    pinned[i] = (float)i;
  cudaGraph_t g = NULL;
  cudaGraphExec_t exec = NULL;
  long const before = emu_count("kernels run");
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture");
  cudaMemcpyAsync(dev, pinned, N * sizeof(float), cudaMemcpyHostToDevice, s);
  affine_kernel<<<2, 64, 0, s>>>(dev, N);
  affine_kernel<<<2, 64, 0, s>>>(dev, N);
  CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && g != NULL, "end capture");
  CHECK(emu_count("kernels run") == before, "a captured kernel ran during the capture");
  CHECK(cudaGraphInstantiate(&exec, g, 0) == cudaSuccess, "instantiate");
  for (int k = 0; k < 2; k++) { /* replays copy the pinned memory as it is at the replay */
    for (int i = 0; i < N; i++)
      pinned[i] = (float)(i + k);
    CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "graph launch");
    download(host, dev, sizeof host, s);
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += host[i] != (float)(i + k) * 4.0f + 3.0f;
    CHECK(bad == 0, "graph replay %d: %d wrong values", k, bad);
  }
  CHECK(emu_count("kernels run") == before + 4, "replays ran %ld kernels, want 4",
        emu_count("kernels run") - before);
  cudaGraphExecDestroy(exec), cudaGraphDestroy(g);
  /* A synchronisation inside a capture invalidates it. */
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "capture 2");
  affine_kernel<<<2, 64, 0, s>>>(dev, N);
  CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "synchronise in a capture");
  CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && g == NULL,
        "a capture with a synchronisation should end invalidated");
  CHECK(emu_take_problems() == 1, "a synchronisation inside a capture is one problem");
  cudaFreeHost(pinned);
}

int main(void) {
  cudaStream_t s = NULL;
  float *dev = NULL, host[BLOCKS * THREADS];
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc((void **)&dev, BLOCKS * THREADS * sizeof(float)) != cudaSuccess) {
    printf("FAIL: no stream or memory\n");
    return 1;
  }
  emu_expect_problems(1);
  check_shared(s, dev, host);
  check_cluster(s, dev, host);
  check_problems(s, dev);
  check_faults(s, dev);
  check_atomics(s);
  check_graphs(s, dev);
  emu_expect_problems(0);
  cudaFree(dev);
  cudaStreamDestroy(s);
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
