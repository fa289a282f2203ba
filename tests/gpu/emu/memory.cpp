/*
 * Device memory of the CUDA emulator.
 *
 * Every device allocation is a mapping of its own that ends exactly at a
 * PROT_NONE guard page (its size rounded up to 4 bytes only), so a kernel,
 * copy or GEMM that runs past the end faults at once. Outside device work
 * (window_enter .. window_leave) the whole allocation is PROT_NONE too, so
 * host code that reads or writes device memory faults. Inside device work
 * an allocation is opened when first touched: its fault there makes it
 * readable and writable and the access is retried, and the window's end
 * closes the ones opened (an mprotect costs ~60 us in the VMs of CI:
 * opening all live allocations around every operation took ~90% of the
 * emulated engine tests' time). New memory holds
 * NaN bytes (0xff), as cudaMalloc gives garbage. Freed allocations stay
 * mapped PROT_NONE for a while, so a use after free faults rather than
 * reading a newer allocation. A SIGSEGV in any of these is turned into a
 * message that says what touched what, and exit status 3.
 *
 * Dynamic shared memory: each block of the group running (a cluster, or
 * one block) has a mapping of its own that ends at a guard page, NaN bytes
 * at the block's start, inaccessible once the block has ended and outside
 * kernels.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <map>
#include <vector>

#include "emu_internal.h"

namespace emu {
namespace {

struct alloc_t {
  char *map; /* the mapping: [map, map + len), its last page the guard */
  size_t len;
  char *start;     /* the pointer handed out; start + usable == guard */
  size_t bytes;    /* as asked */
  size_t usable;   /* bytes rounded up to 4 */
  const char *how; /* cudaMalloc, cudaMallocAsync */
  bool open;       /* readable and writable in the device window running */
};

std::map<uintptr_t, alloc_t> live; /* by start */
std::deque<alloc_t> freed;         /* quarantine, oldest first */
size_t freed_bytes;
std::map<uintptr_t, size_t> pinned;          /* cudaMallocHost blocks: start -> bytes */
int depth;                                   /* device windows open */
std::atomic_flag opening = ATOMIC_FLAG_INIT; /* the fault handlers' opening (threads of a GEMM) */
size_t const page = (size_t)sysconf(_SC_PAGESIZE);
long alloc_calls, host_calls, host_fail_at;
long fail_at = -2; /* -2: not yet read from the configuration */
struct sigaction previous;
bool handler_installed;

/* At most this much freed memory stays mapped (PROT_NONE) to catch uses
 * after free. */
size_t const QUARANTINE_BYTES = (size_t)256 << 20;

void protect(const alloc_t &a, int prot) {
  if (mprotect(a.map, a.len - page, prot) != 0) problem("mprotect failed on device memory");
}

/* The allocation (live or freed) whose mapping holds address x. */
const alloc_t *mapping_of(uintptr_t x, bool *is_freed) {
  *is_freed = false;
  auto it = live.upper_bound(x);
  if (it != live.begin()) {
    --it;
    const alloc_t &a = it->second;
    if (x >= (uintptr_t)a.map && x < (uintptr_t)a.map + a.len) return &a;
  }
  for (const alloc_t &a : freed)
    if (x >= (uintptr_t)a.map && x < (uintptr_t)a.map + a.len) {
      *is_freed = true;
      return &a;
    }
  return nullptr;
}

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  int const n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > 0) (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* Inside a device window, a live allocation's first touch: opens it (no
 * allocation, no lock a faulting thread could hold: a spin flag among the
 * threads of a GEMM). True: retry the access. */
bool open_on_fault(const alloc_t *a, uintptr_t x) {
  if (depth == 0 || a == nullptr || x >= (uintptr_t)a->start + a->usable) return false;
  while (opening.test_and_set(std::memory_order_acquire)) {
  }
  alloc_t *const m = const_cast<alloc_t *>(a);
  bool ok = true;
  if (!m->open) {
    ok = mprotect(m->map, m->len - page, PROT_READ | PROT_WRITE) == 0;
    m->open = ok;
  }
  opening.clear(std::memory_order_release);
  return ok;
}

/* A fault in device memory: say who touched what, and end the process. */
void on_segv(int sig, siginfo_t *si, void *uc) {
  uintptr_t const x = (uintptr_t)si->si_addr;
  bool was_freed = false;
  const alloc_t *const a = mapping_of(x, &was_freed);
  if (!was_freed && open_on_fault(a, x)) return;
  char smem_msg[512];
  if (a == nullptr && shared_fault(x, smem_msg, sizeof smem_msg)) {
    char who[256];
    describe_thread(who, sizeof who);
    say("EMU PROBLEM: %s %s\n", who, smem_msg);
    _exit(3);
  }
  if (a == nullptr) { /* not ours: the previous handler (or the default) */
    sigaction(SIGSEGV, &previous, nullptr);
    if (previous.sa_flags & SA_SIGINFO) {
      if (previous.sa_sigaction != nullptr) previous.sa_sigaction(sig, si, uc);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
      previous.sa_handler(sig);
    }
    return; /* the default action on the retried access */
  }
  char who[256];
  if (depth > 0) {
    describe_thread(who, sizeof who);
  } else {
    snprintf(who, sizeof who, "host code (outside any CUDA call or kernel)");
  }
  uintptr_t const start = (uintptr_t)a->start;
  if (was_freed) {
    say("EMU PROBLEM: %s touched device memory freed earlier: address %#lx, offset %ld of an "
        "allocation of %zu bytes (%s)\n",
        who, (unsigned long)x, (long)(x - start), a->bytes, a->how);
  } else if (x >= start + a->usable) {
    say("EMU PROBLEM: %s accessed %#lx, %lu bytes past the end of a device allocation of %zu "
        "bytes (%s)\n",
        who, (unsigned long)x, (unsigned long)(x - start - a->bytes), a->bytes, a->how);
  } else if (depth == 0) {
    say("EMU PROBLEM: %s touched device memory at %#lx (offset %ld of an allocation of %zu "
        "bytes): device memory is reachable only through CUDA calls and kernels\n",
        who, (unsigned long)x, (long)(x - start), a->bytes);
  } else {
    say("EMU PROBLEM: %s accessed %#lx, before the start of a device allocation of %zu bytes\n",
        who, (unsigned long)x, a->bytes);
  }
  _exit(3);
}

/* (Re)installs the fault handler; others (MPI, sanitizers) may have
 * installed theirs since. */
void install_handler(void) {
  struct sigaction now;
  sigaction(SIGSEGV, nullptr, &now);
  if (handler_installed && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_segv;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &previous);
  handler_installed = true;
}

void quarantine(const alloc_t &a) {
  if (mprotect(a.map, a.len, PROT_NONE) != 0) problem("mprotect failed on freed device memory");
  freed.push_back(a);
  freed_bytes += a.len;
  while (freed_bytes > QUARANTINE_BYTES && !freed.empty()) {
    freed_bytes -= freed.front().len;
    munmap(freed.front().map, freed.front().len);
    freed.pop_front();
  }
}

} // namespace

void fail_alloc_at(long k) {
  alloc_calls = 0;
  fail_at = k > 0 ? k : -1;
}

void fail_host_alloc_at(long k) {
  host_calls = 0;
  host_fail_at = k > 0 ? k : -1;
}

cudaError_t device_alloc(void **ptr, size_t bytes, const char *how) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (fail_at == -2) fail_alloc_at(config().fail_alloc);
  if (++alloc_calls == fail_at) return cudaErrorMemoryAllocation;
  install_handler();
  size_t const usable = ((bytes > 0 ? bytes : 1) + 3) / 4 * 4;
  size_t const len = (usable + page - 1) / page * page + page;
  char *const m =
      (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
  memset(m, 0xff, len - page); /* NaN floats and doubles: garbage that shows */
  /* Made in a device window: open until its end. */
  alloc_t const a = {m, len, m + len - page - usable, bytes, usable, how, depth > 0};
  mprotect(m + len - page, page, PROT_NONE);
  if (config().protect && depth == 0) protect(a, PROT_NONE);
  live[(uintptr_t)a.start] = a;
  *ptr = a.start;
  return cudaSuccess;
}

cudaError_t device_free(void *ptr, const char *how) {
  if (ptr == nullptr) return cudaSuccess;
  auto const it = live.find((uintptr_t)ptr);
  if (it == live.end()) {
    bool was_freed = false;
    const alloc_t *const a = mapping_of((uintptr_t)ptr, &was_freed);
    problem("%s(%p): %s", how, ptr,
            a == nullptr ? "not a pointer cudaMalloc returned"
            : was_freed  ? "freed already"
                         : "not the start of its allocation");
    return cudaErrorInvalidValue;
  }
  alloc_t const a = it->second;
  live.erase(it);
  quarantine(a);
  return cudaSuccess;
}

bool is_device(const void *p) {
  auto it = live.upper_bound((uintptr_t)p);
  if (it == live.begin()) return false;
  --it;
  return (uintptr_t)p >= it->first && (uintptr_t)p < it->first + it->second.usable;
}

bool device_range(const void *p, size_t n) {
  auto it = live.upper_bound((uintptr_t)p);
  if (it == live.begin()) return false;
  --it;
  uintptr_t const x = (uintptr_t)p, start = it->first;
  return x >= start && x <= start + it->second.bytes && n <= start + it->second.bytes - x;
}

bool is_pinned(const void *p, size_t n) {
  auto it = pinned.upper_bound((uintptr_t)p);
  if (it == pinned.begin()) return false;
  --it;
  uintptr_t const x = (uintptr_t)p;
  return x >= it->first && x - it->first <= it->second && n <= it->second - (x - it->first);
}

cudaError_t host_alloc(void **ptr, size_t bytes) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (++host_calls == host_fail_at) return cudaErrorMemoryAllocation;
  size_t const len = ((bytes > 0 ? bytes : 1) + page - 1) / page * page;
  void *const p = aligned_alloc(page, len);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  memset(p, 0xff, len);
  pinned[(uintptr_t)p] = bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t host_free(void *ptr) {
  if (ptr == nullptr) return cudaSuccess;
  auto const it = pinned.find((uintptr_t)ptr);
  if (it == pinned.end()) {
    problem("cudaFreeHost(%p): not a pointer cudaMallocHost returned", ptr);
    return cudaErrorInvalidValue;
  }
  pinned.erase(it);
  free(ptr);
  return cudaSuccess;
}

long live_device(void) {
  return (long)live.size();
}
long live_host(void) {
  return (long)pinned.size();
}

/* ------------------------------------------------------------------------ */
/* Dynamic shared memory                                                     */

namespace {
struct region_t {
  char *map = nullptr; /* [map, map + cap) usable, then the guard page */
  size_t cap = 0;
  char *base = nullptr; /* the block's bytes end at the guard */
  size_t bytes = 0;
  bool open = false;   /* accessible */
  bool closed = false; /* its block ended while its cluster ran on */
};
std::vector<region_t> regions;
size_t regions_used;

void region_protect(region_t &r, int prot) {
  if (r.cap > 0 && mprotect(r.map, r.cap, prot) != 0) problem("mprotect failed on shared memory");
  r.open = prot != PROT_NONE;
}
} // namespace

void shared_prepare(unsigned blocks, size_t bytes) {
  if (bytes > 0) install_handler();
  if (regions.size() < blocks) regions.resize(blocks);
  size_t const used = (bytes + 15) / 16 * 16, cap = (used + page - 1) / page * page;
  for (unsigned i = 0; i < blocks; i++) {
    region_t &r = regions[i];
    if (r.cap < cap) {
      if (r.map != nullptr) munmap(r.map, r.cap + page);
      r.map = (char *)mmap(nullptr, cap + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (r.map == MAP_FAILED) {
        fprintf(stderr, "emu: no memory for %zu bytes of shared memory\n", bytes);
        abort();
      }
      r.cap = cap, r.open = false;
    }
    r.base = r.map != nullptr ? r.map + r.cap - used : nullptr;
    r.bytes = bytes;
    r.closed = false;
    if (used > 0) {
      region_protect(r, PROT_READ | PROT_WRITE);
      memset(r.base, 0xff, used); /* NaN: unwritten shared memory shows */
    }
  }
  regions_used = blocks;
}

char *shared_region(unsigned block) {
  return block < regions_used ? regions[block].base : nullptr;
}

void shared_close(unsigned block) {
  if (block >= regions_used) return;
  if (regions[block].open) region_protect(regions[block], PROT_NONE);
  regions[block].closed = true;
}

void shared_done(void) {
  for (size_t i = 0; i < regions_used; i++)
    if (regions[i].open) region_protect(regions[i], PROT_NONE);
  regions_used = 0;
}

bool shared_fault(uintptr_t x, char *msg, size_t size) {
  for (size_t i = 0; i < regions.size(); i++) {
    const region_t &r = regions[i];
    if (r.map == nullptr || x < (uintptr_t)r.map || x >= (uintptr_t)r.map + r.cap + page) continue;
    if (x >= (uintptr_t)r.base + (r.bytes + 15) / 16 * 16 || x < (uintptr_t)r.base)
      snprintf(msg, size,
               "accessed %#lx, outside the %zu bytes of dynamic shared memory of block %zu of its "
               "group",
               (unsigned long)x, r.bytes, i);
    else if (r.closed)
      snprintf(msg, size,
               "accessed the shared memory of block %zu of its cluster after that block had ended "
               "(a block must not end while its peers may still reach its shared memory: "
               "cluster.sync() before it ends)",
               i);
    else
      snprintf(msg, size, "accessed shared memory of a block that is not running (%#lx)",
               (unsigned long)x);
    return true;
  }
  return false;
}

/* Allocations open when touched inside (open_on_fault). */
void window_enter(void) {
  if (depth++ == 0 && config().protect && !live.empty())
    install_handler(); /* ours on top: another's (MPI's) would take the touches for errors */
}

void window_leave(void) {
  if (--depth > 0) return;
  for (auto &kv : live) {
    if (kv.second.open && config().protect) protect(kv.second, PROT_NONE);
    kv.second.open = false;
  }
}

} // namespace emu
