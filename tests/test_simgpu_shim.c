/*
 * test_simgpu_shim.c - a preloadable library that exports driver names, as
 * libsalus does, each answering 999.  test_simgpu_state preloads it to check
 * that simgpu (linked -Bsymbolic) keeps resolving its own functions: in
 * cuGetProcAddress's answers and in its internal calls.
 */
#include <cuda.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) { return (CUresult)999; }
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) { return (CUresult)999; }
CUresult cuInit(unsigned int flags) { return (CUresult)999; }
