/*
 * Kernels in the CUDA emulator: the threads of a block as fibers.
 *
 * A grid runs its blocks one after another (in EMU_ORDER: forward, reversed
 * or shuffled); a block runs its threads in that order too, each up to its
 * next __syncthreads() (or its end), then again from the barrier, until all
 * have ended. A thread that reads shared memory another thread writes
 * without a barrier between them sees the write or not depending on the
 * order: forward and reversed orders find different missing barriers. The
 * first thread runs in a fiber; if it ends without reaching a barrier the
 * kernel has none (a barrier some threads skip is an error) and the others
 * run as plain calls.
 *
 * A thread block cluster runs as one group: the threads of all its blocks
 * are fibers, run in EMU_ORDER across the blocks, each up to its next
 * barrier: __syncthreads() waits for the threads of its block,
 * cluster.sync() for those of the whole cluster. A barrier some threads
 * never reach (they ended, or wait at the other kind) is an error.
 *
 * Fibers switch with a few instructions of assembly on x86-64 (ucontext's
 * swapcontext makes a system call per switch) and with ucontext elsewhere;
 * under AddressSanitizer every switch is announced to it.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

thread_local uint3 emu_threadIdx, emu_blockIdx;
thread_local dim3 emu_blockDim, emu_gridDim;

#if defined(__x86_64__)
/* emu_switch(&save, load): saves the callee-saved registers, the SSE and
 * x87 control words and the stack pointer into *save, and resumes the
 * context whose stack pointer is load. */
extern "C" void emu_switch(void **save, void *load);
asm(R"(
  .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw (%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  fldcw (%rsp)
  ldmxcsr 8(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#define EMU_ASM_SWITCH 1
#else
#define EMU_ASM_SWITCH 0
#endif

namespace emu {
namespace {

enum { READY, AT_BARRIER, AT_CLUSTER, DONE };
size_t const STACK = 256 << 10;

struct fiber_t {
  char *stack; /* STACK bytes above a guard page */
  void *sp;    /* saved stack pointer (assembly switch) */
  ucontext_t ctx;
  uint3 tid, bid;
  unsigned block; /* its block within the group */
  int state;
};

std::vector<fiber_t> fibers;
void *sched_sp;
ucontext_t sched_ctx;
#if EMU_ASAN
const void *sched_bottom; /* the scheduler's stack */
size_t sched_size;
#endif
int cur = -1; /* fiber running, -1 none */
bool direct;  /* threads run as plain calls (no barrier in this kernel) */
bool in_kernel;
const std::function<void()> *body;
const char *kname;
std::mt19937 rng;
std::string failing;
long failing_at, failing_runs;
unsigned cur_block;    /* the running thread's block within its group */
unsigned group_blocks; /* blocks in the running group (the cluster size) */
size_t group_shmem;    /* dynamic shared memory bytes per block */

void trampoline(void);

#if EMU_ASM_SWITCH
void start_fiber(fiber_t &f) {
  uint64_t *sp = (uint64_t *)(f.stack + STACK); /* 16-aligned top */
  *--sp = 0;                                    /* trampoline's return address: none */
  *--sp = (uint64_t)(uintptr_t)trampoline;      /* where the first switch returns to */
  for (int i = 0; i < 6; i++)
    *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
  sp -= 2;
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  memcpy(&sp[1], &mxcsr, sizeof mxcsr);
  memcpy(&sp[0], &fpucw, sizeof fpucw);
  f.sp = sp;
}
void jump(void **save, void *load, ucontext_t *, ucontext_t *) {
  emu_switch(save, load);
}
#else
void start_fiber(fiber_t &f) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = STACK;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, trampoline, 0);
}
void jump(void **, void *, ucontext_t *save, ucontext_t *load) {
  swapcontext(save, load);
}
#endif

/* The running thread's identity, for the kernel and for messages. */
void enter_thread(const uint3 &tid, const uint3 &bid, unsigned block) {
  emu_threadIdx = tid;
  emu_blockIdx = bid;
  cur_block = block;
}

/* Scheduler -> fiber i, back when it reaches a barrier or ends. */
void resume(unsigned i) {
  fiber_t &f = fibers[i];
  cur = (int)i;
  enter_thread(f.tid, f.bid, f.block);
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack, STACK);
#endif
  jump(&sched_sp, f.sp, &sched_ctx, &f.ctx);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  cur = -1;
}

/* Fiber -> scheduler. */
void yield(bool ending) {
  fiber_t &f = fibers[(size_t)cur];
#if EMU_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(ending ? nullptr : &fake, sched_bottom, sched_size);
#else
  (void)ending;
#endif
  jump(&f.sp, sched_sp, &f.ctx, &sched_ctx);
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, &sched_bottom, &sched_size);
#endif
}

void trampoline(void) {
#if EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &sched_bottom, &sched_size);
#endif
  (*body)();
  fibers[(size_t)cur].state = DONE;
  yield(true);
  __builtin_unreachable();
}

void ensure_fibers(unsigned n) {
  size_t const old = fibers.size();
  if (old >= n) return;
  fibers.resize(n);
  size_t const page = (size_t)sysconf(_SC_PAGESIZE);
  for (size_t i = old; i < n; i++) {
    char *const m = (char *)mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      fprintf(stderr, "emu: no memory for fiber stacks\n");
      abort();
    }
    mprotect(m, page, PROT_NONE); /* a stack overflow faults */
    fibers[i].stack = m + page;
  }
}

uint3 tid_of(unsigned i, const dim3 &b) {
  return uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
}

/* 0..n-1 in the configured order. */
std::vector<unsigned> ordered(unsigned n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; i++)
    v[i] = i;
  if (config().order == ORDER_REV) std::reverse(v.begin(), v.end());
  if (config().order == ORDER_RAND) std::shuffle(v.begin(), v.end(), rng);
  return v;
}

/* Fiber i of a group: thread i % nt of block i / nt. */
void init_fiber(unsigned i, unsigned nt, const std::vector<uint3> &bids) {
  fiber_t &f = fibers[i];
  f.block = i / nt;
  f.tid = tid_of(i % nt, emu_blockDim);
  f.bid = bids[f.block];
  f.state = READY;
  start_fiber(f);
}

/* After a round, with no thread ready: releases the barriers every thread
 * they wait for has reached (reporting those some never will); false when
 * every thread has ended. */
bool release(unsigned nb, unsigned nt, std::vector<bool> &closed) {
  unsigned waiting = 0, at_cluster = 0, done = 0;
  bool released = false;
  for (unsigned b = 0; b < nb; b++) {
    unsigned bar = 0, clu = 0, end = 0;
    for (unsigned i = b * nt; i < (b + 1) * nt; i++) {
      bar += fibers[i].state == AT_BARRIER;
      clu += fibers[i].state == AT_CLUSTER;
      end += fibers[i].state == DONE;
    }
    waiting += bar, at_cluster += clu, done += end;
    if (end == nt && !closed[b] && nb > 1) { /* its peers may not reach its memory any more */
      closed[b] = true;
      shared_close(b);
    }
    if (bar == 0) continue;
    if (end > 0)
      problem("%s: __syncthreads() reached by %u threads of a block while %u had ended "
              "(a barrier not every thread reaches)",
              kname, bar, end);
    if (clu > 0)
      problem("%s: __syncthreads() reached by %u threads of a block while %u wait at "
              "cluster.sync() (mismatched barriers: on a GPU the block hangs)",
              kname, bar, clu);
    for (unsigned i = b * nt; i < (b + 1) * nt; i++)
      if (fibers[i].state == AT_BARRIER) fibers[i].state = READY;
    released = true;
  }
  if (released) return true;
  if (at_cluster == 0) return waiting > 0;
  if (done > 0)
    problem("%s: cluster.sync() reached by %u threads of a cluster while %u had ended "
            "(a barrier not every thread reaches, or a block that ended before its peers)",
            kname, at_cluster, done);
  for (unsigned i = 0; i < nb * nt; i++)
    if (fibers[i].state == AT_CLUSTER) fibers[i].state = READY;
  return true;
}

/* The blocks bids of one group (a cluster; one block without clusters),
 * nt threads each, to the end. */
void run_group(const std::vector<uint3> &bids, unsigned nt) {
  unsigned const nb = (unsigned)bids.size(), n = nb * nt;
  group_blocks = nb;
  shared_prepare(nb, group_shmem);
  ensure_fibers(n);
  std::vector<unsigned> ord = ordered(n);
  init_fiber(ord[0], nt, bids);
  resume(ord[0]);
  /* No barrier in this kernel: the others as calls. (Not for clusters: one
   * block may end at once while its peers meet at barriers.) */
  if (fibers[ord[0]].state == DONE && nb == 1) {
    direct = true;
    for (unsigned k = 1; k < n; k++) {
      enter_thread(tid_of(ord[k] % nt, emu_blockDim), bids[ord[k] / nt], ord[k] / nt);
      (*body)();
    }
    direct = false;
    shared_done();
    return;
  }
  for (unsigned k = 1; k < n; k++)
    init_fiber(ord[k], nt, bids);
  std::vector<bool> closed(nb, false);
  for (bool first_round = true;; first_round = false) {
    if (!first_round) ord = ordered(n); /* a new order between barriers */
    for (unsigned i : ord)
      if (fibers[i].state == READY) resume(i);
    if (!release(nb, nt, closed)) break;
  }
  shared_done();
}

bool bad_config(const launch_cfg &c, size_t smem_limit) {
  unsigned long const threads = (unsigned long)c.block.x * c.block.y * c.block.z;
  return c.block.x == 0 || c.block.y == 0 || c.block.z == 0 || c.block.x > 1024 ||
         c.block.y > 1024 || c.block.z > 64 || threads > 1024 || c.grid.x == 0 || c.grid.y == 0 ||
         c.grid.z == 0 || c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535 ||
         c.shmem > smem_limit || c.cluster == 0 || c.cluster > 8 || c.grid.x % c.cluster != 0;
}

/* cudaFuncSetAttribute's dynamic shared memory limits, by kernel. */
std::map<const void *, size_t> &smem_limits = *new std::map<const void *, size_t>;

} // namespace

void describe_thread(char *buf, size_t size) {
  if (in_kernel)
    snprintf(buf, size, "kernel %s, block (%u,%u,%u) thread (%u,%u,%u),", kname, emu_blockIdx.x,
             emu_blockIdx.y, emu_blockIdx.z, emu_threadIdx.x, emu_threadIdx.y, emu_threadIdx.z);
  else
    snprintf(buf, size, "device operation %s", current_op() ? current_op() : "(unknown)");
}

void fail_kernel(const char *name, long k) {
  failing = name != nullptr ? name : "";
  failing_at = k;
  failing_runs = 0;
}

void run_grid(const char *kernel, const launch_cfg &c, const std::function<void()> &fn) {
  static bool seeded;
  if (!seeded) {
    rng.seed(config().seed);
    if (!config().fail_kernel.empty())
      fail_kernel(config().fail_kernel.c_str(), config().fail_kernel_at);
    seeded = true;
  }
  count("kernels run");
  if (!failing.empty() && failing == kernel && ++failing_runs == failing_at) {
    fprintf(stderr, "emu: kernel %s fails (an injected fault)\n", kernel);
    set_sticky(cudaErrorLaunchFailure);
    return;
  }
  body = &fn;
  kname = kernel;
  in_kernel = true;
  emu_blockDim = c.block;
  emu_gridDim = c.grid;
  group_shmem = c.shmem;
  unsigned long const groups = (unsigned long)c.grid.x / c.cluster * c.grid.y * c.grid.z;
  unsigned const nt = c.block.x * c.block.y * c.block.z, gx = c.grid.x / c.cluster;
  std::vector<unsigned long> order(groups);
  for (unsigned long g = 0; g < groups; g++)
    order[g] = g;
  if (config().order == ORDER_REV) std::reverse(order.begin(), order.end());
  if (config().order == ORDER_RAND) std::shuffle(order.begin(), order.end(), rng);
  std::vector<uint3> bids(c.cluster);
  for (unsigned long g : order) {
    unsigned const x0 = (unsigned)(g % gx) * c.cluster, y = (unsigned)(g / gx % c.grid.y);
    unsigned const z = (unsigned)(g / ((unsigned long)gx * c.grid.y));
    for (unsigned r = 0; r < c.cluster; r++)
      bids[r] = uint3{x0 + r, y, z};
    run_group(bids, nt);
  }
  in_kernel = false;
}

void launch_grid(const char *kernel, const launch_cfg &c, std::function<void()> fn) {
  EMU_LOCK();
  count(kernel);
  count("kernel launches");
  auto const lim = smem_limits.find(c.fn);
  size_t const smem_limit = lim != smem_limits.end() ? lim->second : 48 * 1024;
  if (bad_config(c, smem_limit)) {
    problem("%s: invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u), cluster %u, "
            "%zu bytes of shared memory (this kernel's limit %zu: cudaFuncSetAttribute raises "
            "it above 48 KiB)",
            kernel, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.cluster,
            c.shmem, smem_limit);
    set_launch_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (sticky_error() != cudaSuccess) return;
  launch_cfg const cc = c;
  enqueue(c.stream, kernel, [kernel, cc, fn] { run_grid(kernel, cc, fn); });
}

const char *kernel_name(const char *spelled) {
  static std::set<std::string> &names = *new std::set<std::string>;
  std::string s = spelled;
  size_t const lt = s.find('<');
  if (lt != std::string::npos) s.resize(lt);
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return names.insert(s).first->c_str();
}

launch_cfg make_cfg_ex(const cudaLaunchConfig_t *c) {
  launch_cfg l = make_cfg(c->gridDim, c->blockDim, c->dynamicSmemBytes, c->stream);
  for (unsigned i = 0; i < c->numAttrs; i++)
    if (c->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      l.cluster = c->attrs[i].val.clusterDim.x;
      if (c->attrs[i].val.clusterDim.y != 1 || c->attrs[i].val.clusterDim.z != 1)
        problem("cudaLaunchKernelEx: a cluster of (%u,%u,%u) blocks: the emulator models "
                "clusters along x only",
                c->attrs[i].val.clusterDim.x, c->attrs[i].val.clusterDim.y,
                c->attrs[i].val.clusterDim.z);
    }
  return l;
}

cudaError_t set_func_attribute(const void *fn, enum cudaFuncAttribute attr, int value) {
  EMU_LOCK();
  if (fn == nullptr || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      (size_t)value > SHARED_OPTIN)
    return cudaErrorInvalidValue;
  smem_limits[fn] = (size_t)value;
  return sticky_error();
}

cudaError_t max_active_clusters(int *n, const launch_cfg &c) {
  EMU_LOCK();
  auto const lim = smem_limits.find(c.fn);
  size_t const smem_limit = lim != smem_limits.end() ? lim->second : 48 * 1024;
  launch_cfg one = c;
  one.grid = dim3(c.cluster);
  *n = bad_config(one, smem_limit) ? 0 : config().sms / (int)c.cluster;
  return bad_config(one, smem_limit) ? cudaErrorInvalidValue : sticky_error();
}

cudaError_t max_active_blocks(int *n, const launch_cfg &c) {
  EMU_LOCK();
  auto const lim = smem_limits.find(c.fn);
  size_t const smem_limit = lim != smem_limits.end() ? lim->second : 48 * 1024;
  unsigned const threads = c.block.x * c.block.y * c.block.z;
  *n = 0;
  if (bad_config(c, smem_limit)) return cudaErrorInvalidValue;
  size_t const by_smem = c.shmem > 0 ? (size_t)233472 / (c.shmem + 1024) : 32;
  size_t const by_threads = 2048 / threads;
  *n = (int)(by_smem < by_threads ? by_smem : by_threads);
  return sticky_error();
}

void check_pointer(const char *kernel, int index, const void *p) {
  if (p != nullptr && !is_device(p))
    problem("%s: pointer argument %d (%p) is not device memory (a host pointer given to a "
            "kernel?)",
            kernel, index, p);
}

cudaError_t func_attributes(cudaFuncAttributes *attr, const void *fn) {
  if (attr == nullptr || fn == nullptr) return cudaErrorInvalidValue;
  memset(attr, 0, sizeof *attr);
  attr->maxThreadsPerBlock = 1024;
  return sticky_error();
}

} // namespace emu

using namespace emu;

void emu_syncthreads(void) {
  if (direct) {
    problem("%s: __syncthreads() in a block whose first thread ended without reaching it (a "
            "barrier not every thread reaches)",
            kname);
    return;
  }
  if (cur < 0) {
    problem("__syncthreads() outside a kernel");
    return;
  }
  fibers[(size_t)cur].state = AT_BARRIER;
  yield(false);
}

void emu_cluster_sync(void) {
  if (direct) {
    problem("%s: cluster.sync() in a kernel whose first thread ended without reaching it (a "
            "barrier not every thread reaches)",
            kname);
    return;
  }
  if (cur < 0) {
    problem("cluster.sync() outside a kernel");
    return;
  }
  fibers[(size_t)cur].state = AT_CLUSTER;
  yield(false);
}

unsigned emu_cluster_rank(void) {
  return cur_block;
}

unsigned emu_cluster_blocks(void) {
  return group_blocks;
}

void *emu_dynamic_shared(void) {
  if (!in_kernel) {
    problem("dynamic shared memory asked for outside a kernel");
    return nullptr;
  }
  return shared_region(cur_block);
}

void *emu_map_shared_rank(void *p, unsigned rank) {
  char *const mine = shared_region(cur_block);
  if (!in_kernel || rank >= group_blocks) {
    problem("%s: cluster.map_shared_rank(%p, %u) in a cluster of %u blocks", kname, p, rank,
            group_blocks);
    return p;
  }
  size_t const off = (size_t)((char *)p - mine);
  if ((char *)p < mine || off >= group_shmem) {
    problem("%s: cluster.map_shared_rank(%p, %u): not a pointer into the block's dynamic shared "
            "memory (%zu bytes at %p)",
            kname, p, rank, group_shmem, (void *)mine);
    return p;
  }
  return shared_region(rank) + off;
}
