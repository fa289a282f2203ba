/*
 * The CUDA runtime, emulated (tests/gpu/emu): the API of
 * cuda_runtime_api.h and, for CUDA C++ compiled as host C++, the device
 * side (__global__, threadIdx, __syncthreads, launches) of emu_kernel.h.
 */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "emu_kernel.h"
#endif

#endif /* EMU_CUDA_RUNTIME_H */
