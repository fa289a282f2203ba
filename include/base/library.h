/*
 * Shared libraries opened on first use instead of being linked: cuBLAS
 * (kernels/lstm_cuda.cu) and NCCL (train/comm.c). A process that never
 * needs one never loads it, nor the libraries it brings in, and pays none
 * of their start-up cost.
 */
#ifndef LSTREAM_BASE_LIBRARY_H
#define LSTREAM_BASE_LIBRARY_H

#include <pthread.h>
#include <stddef.h>

#include "base/api.h"
#include "lstream/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "STEM.so.MAJOR" with MAJOR a macro of the library's header:
 * BASE_LIBRARY_SO("libnccl", NCCL_MAJOR) is "libnccl.so.2". */
#define BASE_STR_(x)                 #x
#define BASE_STR(x)                  BASE_STR_(x)
#define BASE_LIBRARY_SO(stem, major) stem ".so." BASE_STR(major)

/* An entry point to look up: its name and where its address goes. fn is
 * the address of a function pointer of the entry point's own prototype,
 * given as void ** (dlsym(3)'s idiom): (void **)&table.fn. */
typedef struct base_symbol_s {
  const char *name;
  void **fn;
} base_symbol_t;

/* A library opened at most once per process; a static variable initialised
 * with BASE_LIBRARY_INIT. */
typedef struct base_library_s {
  const char *file; /* the name dlopen searches for: "libcublas.so.13" */
  const char *what; /* what it is, for messages: "cuBLAS" */
  const char *hint; /* how to get it, for messages: "install the CUDA toolkit's cuBLAS" */
  pthread_mutex_t lock;
  int tried;     /* base_library_open has run */
  int loaded;    /* and found the library and every entry point */
  char why[512]; /* why not, when not */
} base_library_t;

#define BASE_LIBRARY_INIT(file, what, hint)                                                        \
  { (file), (what), (hint), PTHREAD_MUTEX_INITIALIZER, 0, 0, "" }

/* The first call opens lib->file (dlopen, RTLD_NOW | RTLD_LOCAL; kept open
 * for good) and stores the address of each of the n entry points syms in
 * *syms[i].fn; every later call returns the first one's result (give the
 * same syms). Thread-safe. LS_OK when the library and all its entry points
 * were found, else LS_ERR_UNSUPPORTED ("cannot load WHAT (dlopen's reason,
 * or the entry point missing): HINT, or add its lib folder to
 * LD_LIBRARY_PATH") and no entry point set. */
BASE_API ls_err_t base_library_open(base_library_t *lib, const base_symbol_t *syms, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* LSTREAM_BASE_LIBRARY_H */
