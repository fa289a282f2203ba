/*
 * Shared libraries opened on first use (base/library.h).
 */
#include "base/library.h"

#include <dlfcn.h>
#include <stdio.h>

/* Opens lib->file and finds every entry point; 0 with lib->why if not. */
static int library_load(base_library_t *lib, const base_symbol_t *syms, size_t n) {
  void *const handle = dlopen(lib->file, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *const why = dlerror();
    snprintf(lib->why, sizeof lib->why, "%s", why != NULL ? why : lib->file);
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    *syms[i].fn = dlsym(handle, syms[i].name);
    if (*syms[i].fn != NULL) continue;
    snprintf(lib->why, sizeof lib->why, "%s has no %s", lib->file, syms[i].name);
    for (size_t k = 0; k < i; k++)
      *syms[k].fn = NULL;
    (void)dlclose(handle);
    return 0;
  }
  return 1; /* the handle stays open for the life of the process */
}

ls_err_t base_library_open(base_library_t *lib, const base_symbol_t *syms, size_t n) {
  LS_RETURN_IF(lib == NULL || lib->file == NULL || (syms == NULL && n > 0), LS_ERR_INVALID_ARG,
               "library, its file name or its entry points are NULL");
  LS_RETURN_IF(pthread_mutex_lock(&lib->lock) != 0, LS_ERR_UNSUPPORTED,
               "cannot lock the loader of %s", lib->file);
  if (!lib->tried) {
    lib->loaded = library_load(lib, syms, n);
    lib->tried = 1;
  }
  (void)pthread_mutex_unlock(&lib->lock);
  LS_RETURN_IF(!lib->loaded, LS_ERR_UNSUPPORTED,
               "cannot load %s (%s): %s, or add its lib folder to LD_LIBRARY_PATH",
               lib->what != NULL ? lib->what : lib->file, lib->why,
               lib->hint != NULL ? lib->hint : "install it");
  return LS_OK;
}
