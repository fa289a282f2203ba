/*
 * Cooperative groups, emulated (tests/gpu/emu): the thread block cluster
 * of sm_90 that lstream uses (cg::this_cluster(): sync, block_rank,
 * num_blocks, map_shared_rank), with CUDA's names.
 *
 * cluster.sync() is a barrier of every thread of every block of the
 * cluster (a launch without a cluster dimension is a cluster of one
 * block). map_shared_rank(p, r) takes a pointer into the calling block's
 * dynamic shared memory and gives the same place in block r's; anything
 * else is an emulator problem, as is a rank outside the cluster.
 */
#ifndef EMU_COOPERATIVE_GROUPS_H
#define EMU_COOPERATIVE_GROUPS_H

#include "cuda_runtime.h"

void emu_cluster_sync(void);
unsigned emu_cluster_rank(void);
unsigned emu_cluster_blocks(void);
void *emu_map_shared_rank(void *p, unsigned rank);

namespace cooperative_groups {

class cluster_group {
public:
  void sync() const { emu_cluster_sync(); }
  unsigned block_rank() const { return emu_cluster_rank(); }
  unsigned num_blocks() const { return emu_cluster_blocks(); }
  template <typename T> T *map_shared_rank(T *p, unsigned rank) const {
    return (T *)emu_map_shared_rank((void *)p, rank);
  }
};

inline cluster_group this_cluster() {
  return cluster_group();
}

} // namespace cooperative_groups

#endif /* EMU_COOPERATIVE_GROUPS_H */
