/*
 * What a process learns from its launcher (include/lstream/train.h): the
 * ranks mpirun started.
 */
#include <stdlib.h>

#include "lstream/train.h"

int ls_train_launched_ranks(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *const v = getenv(vars[i]);
    if (v != NULL && atoi(v) > 0) return atoi(v);
  }
  return 1;
}
