/*
 * nulldrv_all.c - every export of the driver map (build/gen/cu_procmap.h),
 * each returning CUDA_SUCCESS at once and writing nothing: the floor under
 * which libsalus's own cost per call is measured.  Weak definitions:
 * nulldrv.c overrides the few a driver-API program needs answers from.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include "cu_procmap.h"

#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NULL_EXPORT_(base, version, pt, export)                                  \
    __attribute__((weak, visibility("default"))) CUresult CUDAAPI               \
    export CU_PARAMS_##export { return CUDA_SUCCESS; }
CU_PROCMAP(NULL_EXPORT_)
