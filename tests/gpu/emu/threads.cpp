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
#include <random>

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

enum { READY, AT_BARRIER, DONE };
size_t const STACK = 256 << 10;

struct fiber_t {
  char *stack; /* STACK bytes above a guard page */
  void *sp;    /* saved stack pointer (assembly switch) */
  ucontext_t ctx;
  uint3 tid;
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

/* Scheduler -> fiber i, back when it reaches a barrier or ends. */
void resume(unsigned i) {
  fiber_t &f = fibers[i];
  cur = (int)i;
  emu_threadIdx = f.tid;
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

void run_block(unsigned n) {
  ensure_fibers(n);
  std::vector<unsigned> ord = ordered(n);
  fiber_t &first = fibers[ord[0]];
  first.tid = tid_of(ord[0], emu_blockDim);
  first.state = READY;
  start_fiber(first);
  resume(ord[0]);
  if (first.state == DONE) { /* no barrier in this kernel: the others as calls */
    direct = true;
    for (unsigned k = 1; k < n; k++) {
      emu_threadIdx = tid_of(ord[k], emu_blockDim);
      (*body)();
    }
    direct = false;
    return;
  }
  for (unsigned k = 1; k < n; k++) {
    fiber_t &f = fibers[ord[k]];
    f.tid = tid_of(ord[k], emu_blockDim);
    f.state = READY;
    start_fiber(f);
  }
  for (bool first_round = true;; first_round = false) {
    if (!first_round) ord = ordered(n); /* a new order between barriers */
    for (unsigned i : ord)
      if (fibers[i].state == READY) resume(i);
    unsigned done = 0, waiting = 0;
    for (unsigned i = 0; i < n; i++) {
      done += fibers[i].state == DONE;
      waiting += fibers[i].state == AT_BARRIER;
    }
    if (waiting == 0) return;
    if (done > 0)
      problem("%s: __syncthreads() reached by %u threads of a block while %u had ended "
              "(a barrier not every thread reaches)",
              kname, waiting, done);
    for (unsigned i = 0; i < n; i++)
      if (fibers[i].state == AT_BARRIER) fibers[i].state = READY;
  }
}

bool bad_config(const launch_cfg &c) {
  unsigned long const threads = (unsigned long)c.block.x * c.block.y * c.block.z;
  return c.block.x == 0 || c.block.y == 0 || c.block.z == 0 || c.block.x > 1024 ||
         c.block.y > 1024 || c.block.z > 64 || threads > 1024 || c.grid.x == 0 || c.grid.y == 0 ||
         c.grid.z == 0 || c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535 ||
         c.shmem > 48 * 1024;
}

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
  unsigned long const nb = (unsigned long)c.grid.x * c.grid.y * c.grid.z;
  unsigned const nt = c.block.x * c.block.y * c.block.z;
  std::vector<unsigned long> blocks(nb);
  for (unsigned long b = 0; b < nb; b++)
    blocks[b] = b;
  if (config().order == ORDER_REV) std::reverse(blocks.begin(), blocks.end());
  if (config().order == ORDER_RAND) std::shuffle(blocks.begin(), blocks.end(), rng);
  for (unsigned long b : blocks) {
    emu_blockIdx = uint3{(unsigned)(b % c.grid.x), (unsigned)(b / c.grid.x % c.grid.y),
                         (unsigned)(b / ((unsigned long)c.grid.x * c.grid.y))};
    run_block(nt);
  }
  in_kernel = false;
}

void launch_grid(const char *kernel, const launch_cfg &c, std::function<void()> fn) {
  EMU_LOCK();
  count(kernel);
  count("kernel launches");
  if (bad_config(c)) {
    problem("%s: invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u), %zu bytes of "
            "shared memory",
            kernel, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.shmem);
    set_launch_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (sticky_error() != cudaSuccess) return;
  launch_cfg const cc = c;
  enqueue(c.stream, kernel, [kernel, cc, fn] { run_grid(kernel, cc, fn); });
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

void emu_syncthreads(void) {
  using namespace emu;
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
