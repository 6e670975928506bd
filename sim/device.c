/*
 * device.c - the driver and its devices: cuInit, versions, device queries
 * (count, name, UUID, PCI id, attributes, properties), error names and
 * strings, the profiler and the error log (cuGetExportTable is export.c).
 *
 * Divided into: driver; devices; attributes; errors; the rest.
 *
 * CUDA_VISIBLE_DEVICES selects and orders the devices a process sees, as the
 * driver does: ordinal i of cuDeviceGet is the i-th listed index, and the
 * list ends at its first entry that names no device.  A CUdevice is the
 * device's own index, so its UUID is the same whatever the ordering.
 *
 * Each device is a plausible Hopper GPU (compute capability 9.0, 132 SMs,
 * as an H100 SXM) whose memory is SIMGPU_MEMORY.  Attributes the header
 * knows but simgpu does not model answer 0 (the feature is absent); values
 * the header does not know are CUDA_ERROR_INVALID_VALUE.
 *
 * Lock: nothing here touches process-local objects; the device count and
 * capacity are fixed once cuInit has attached the state.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- driver --------------------------------------------------------------------- */

CUresult CUDAAPI cuInit(unsigned int flags)
{
    return sim_init(flags);
}

CUresult CUDAAPI cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = CU_PROCMAP_HEADER_VERSION;
    return CUDA_SUCCESS;
}

/* ---- devices -------------------------------------------------------------------- */

int sim_device_valid(CUdevice dev)
{
    return dev >= 0 && dev < sim_p.ndevices;
}

#define CHECK_DEVICE(dev) do { \
        SIM_CHECK_INIT(); \
        if (!sim_device_valid(dev)) return CUDA_ERROR_INVALID_DEVICE; \
    } while (0)

void sim_read_visible(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    sim_p.nvisible = 0;
    if (!v) {
        for (int d = 0; d < sim_p.ndevices; d++)
            sim_p.visible[sim_p.nvisible++] = d;
        return;
    }
    while (*v && sim_p.nvisible < SIM_MAX_DEVICES) {
        char *end;
        long d = strtol(v, &end, 10);
        if (end == v || (*end && *end != ',') || !sim_device_valid((CUdevice)d))
            break;
        for (int i = 0; i < sim_p.nvisible; i++)
            if (sim_p.visible[i] == d)
                return;                  /* listed twice: the driver stops there too */
        sim_p.visible[sim_p.nvisible++] = (int)d;
        v = *end ? end + 1 : end;
    }
}

CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
    SIM_CHECK_INIT();
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim_p.nvisible)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = sim_p.visible[ordinal];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SIM_CHECK_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_p.nvisible;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "NVIDIA H100 (simgpu)");
    return CUDA_SUCCESS;
}

/* A stable, distinct UUID per device, shaped as a random (version 4) one.
 * The state's name is part of the seed: two states are two machines' GPUs,
 * so two tables on two states never look like two tables on one GPU, and
 * one state's devices keep their UUIDs across processes and runs. */
static void device_uuid(CUdevice dev, char out[16])
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *seeds[2] = { "simgpu", sim_state_name() };
    for (int s = 0; s < 2; s++)
        for (const char *p = seeds[s]; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < 16; i++) {
        h = (h ^ (unsigned)(dev + 1) ^ (unsigned)i) * 0x100000001b3ull;
        out[i] = (char)(h >> 56);
    }
    out[6] = (char)((out[6] & 0x0f) | 0x40);
    out[8] = (char)((out[8] & 0x3f) | 0x80);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    device_uuid(dev, uuid->bytes);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!id || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(id, (size_t)len, "0000:%02x:00.0", 0x18 + dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *id)
{
    SIM_CHECK_INIT();
    unsigned domain, bus, slot, fn;
    if (!dev || !id)
        return CUDA_ERROR_INVALID_VALUE;
    if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) != 4 &&
        (domain = 0, sscanf(id, "%x:%x.%x", &bus, &slot, &fn) != 3))
        return CUDA_ERROR_INVALID_VALUE;
    int d = (int)bus - 0x18;
    if (domain || slot || fn || !sim_device_valid(d))
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = d;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim_p.capacity > 0xffffffffu ? 0xffffffffu : (unsigned)sim_p.capacity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim_p.capacity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetProperties(CUdevprop *p, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    *p = (CUdevprop){
        .maxThreadsPerBlock = 1024,
        .maxThreadsDim = { 1024, 1024, 64 },
        .maxGridSize = { 2147483647, 65535, 65535 },
        .sharedMemPerBlock = 49152,
        .totalConstantMemory = 65536,
        .SIMDWidth = 32,
        .memPitch = 2147483647,
        .regsPerBlock = 65536,
        .clockRate = 1980000,
        .textureAlign = 512,
    };
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
    CHECK_DEVICE(dev);
    if (!can)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(peer))
        return CUDA_ERROR_INVALID_DEVICE;
    *can = dev != peer;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *v, CUdevice_P2PAttribute a, CUdevice src,
                                         CUdevice dst)
{
    CHECK_DEVICE(src);
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dst) || src == dst)
        return CUDA_ERROR_INVALID_DEVICE;
    switch ((int)a) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *v = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *v = 1; break;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *v = 1; break;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *v = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetTexture1DLinearMaxWidth(size_t *width, CUarray_format fmt,
                                                   unsigned channels, CUdevice dev)
{
    CHECK_DEVICE(dev);
    (void)fmt;
    if (!width || (channels != 1 && channels != 2 && channels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    *width = 1u << 28;
    return CUDA_SUCCESS;
}

/* Execution affinity (partitions of SMs) is not modelled. */
CUresult CUDAAPI cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType type, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!pi || (int)type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = 0;
    return CUDA_SUCCESS;
}

/* ---- attributes ------------------------------------------------------------------
 * Names that every CUDA 12.x and 13.x header has; attributes added later are
 * written as their (stable) numbers. */
static int attribute(CUdevice_attribute a, CUdevice dev, int *v)
{
    switch ((int)a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; return 0;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *v = 65536; return 0;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *v = 2147483647; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; return 0;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; return 0;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = SIM_TEX_ALIGN; return 0;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = CU_COMPUTEMODE_DEFAULT; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: *v = 131072; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: *v = 131072; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: *v = 65536; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: *v = 16384; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: *v = 16384; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: *v = 16384; return 0;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: *v = 512; return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x18 + dev; return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; return 0;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; return 0;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; return 0;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 3; return 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = SIM_TEX_PITCH_ALIGN; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: *v = SIM_TEX1D_LINEAR_MAX; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH: *v = SIM_TEX2D_LINEAR_W; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: *v = SIM_TEX2D_LINEAR_H; return 0;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: *v = SIM_TEX2D_LINEAR_PITCH; return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = SIM_ARCH / 10; return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = SIM_ARCH % 10; return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; return 0;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: *v = dev; return 0;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: *v = 2; return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *v = 1; return 0;
    case 92: case 93: case 94:          /* stream memory operations (v1) */
    case 122: case 123:                 /* 64-bit stream mem ops, wait value NOR */
        *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; return 0;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *v = 32505856; return 0;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *v = 134213632; return 0;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *v = 1024; return 0;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; return 0;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        *v = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; return 0;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; return 0;
    case 126: *v = 4; return 0;         /* MEM_SYNC_DOMAIN_COUNT */
    case 131: case 134: *v = -1; return 0;  /* NUMA_ID, HOST_NUMA_ID: none */
    /* GPU_PCI_DEVICE_ID: device 0x2330 (H100 SXM5 80GB), vendor 0x10de
     * (NVIDIA); cuBLASLt picks its kernels for the chip it reads here. */
    case 139: *v = (int)0x233010de; return 0;
    case 140: *v = (int)0x16c110de; return 0;   /* GPU_PCI_SUBSYSTEM_ID */
    }
    if ((int)a <= 0 || (int)a >= (int)CU_DEVICE_ATTRIBUTE_MAX)
        return -1;
    *v = 0;                             /* known to the header, not modelled */
    return 0;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice dev)
{
    CHECK_DEVICE(dev);
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    int out;
    if (attribute(a, dev, &out))
        return CUDA_ERROR_INVALID_VALUE;
    *v = out;
    return CUDA_SUCCESS;
}

/* ---- errors ------------------------------------------------------------------------ */

typedef struct sim_error {
    CUresult code;
    const char *name;
} sim_error_t;

#define SIM_ERROR_ROW(name, value) { (CUresult)(value), #name },
static const sim_error_t errors[] = { SIM_ERRORS(SIM_ERROR_ROW) };

/* The driver's wording for the codes programs print most. */
static const sim_error_t wording[] = {
    { CUDA_SUCCESS, "no error" },
    { CUDA_ERROR_INVALID_VALUE, "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
    { CUDA_ERROR_DEINITIALIZED, "driver shutting down" },
    { CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected" },
    { CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
    { CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid" },
    { CUDA_ERROR_INVALID_CONTEXT, "invalid device context" },
    { CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device" },
    { CUDA_ERROR_FILE_NOT_FOUND, "file not found" },
    { CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS" },
    { CUDA_ERROR_INVALID_HANDLE, "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "device not ready" },
    { CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered" },
    { CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure" },
    { CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
    { CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
      "system has unsupported display driver / cuda driver combination" },
    { CUDA_ERROR_UNKNOWN, "unknown error" },
};

static const sim_error_t *find_error(CUresult code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            return &errors[i];
    return NULL;
}

CUresult CUDAAPI cuGetErrorName(CUresult code, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_error_t *e = find_error(code);
    *str = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Other codes read as their names do: CUDA_ERROR_ILLEGAL_INSTRUCTION is
 * "illegal instruction".  Made once per code, kept for the process. */
static char derived[SIM_ERROR_COUNT][80];
static pthread_mutex_t derived_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult CUDAAPI cuGetErrorString(CUresult code, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_error_t *e = find_error(code);
    if (!e) {
        *str = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < sizeof wording / sizeof wording[0]; i++) {
        if (wording[i].code == code) {
            *str = wording[i].name;
            return CUDA_SUCCESS;
        }
    }
    char *d = derived[e - errors];
    pthread_mutex_lock(&derived_lock);
    if (!d[0]) {
        const char *n = e->name + (strncmp(e->name, "CUDA_ERROR_", 11) ? 5 : 11);
        size_t i = 0;
        for (; n[i] && i + 1 < sizeof derived[0]; i++)
            d[i] = n[i] == '_' ? ' ' : (char)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] + 32 : n[i]);
        d[i] = '\0';
    }
    pthread_mutex_unlock(&derived_lock);
    *str = d;
    return CUDA_SUCCESS;
}

/* ---- the rest ---------------------------------------------------------------------- */

/* No profiler is attached: starting, stopping and configuring one do nothing. */
CUresult CUDAAPI cuProfilerInitialize(const char *config, const char *output, CUoutput_mode mode)
{
    (void)config;
    (void)output;
    (void)mode;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuProfilerStart(void) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuProfilerStop(void) { return CUDA_SUCCESS; }

#ifdef CU_PARAMS_cuLogsRegisterCallback
/* The driver's error log (CUDA 12.9): simgpu writes nothing to it, so a
 * callback registered (PyTorch registers one) is never called and the
 * log's tail stays at 0.  Up to LOG_CALLBACKS at once; the handle is an
 * entry of this table, checked when unregistered. */
#define LOG_CALLBACKS 16
struct CUlogsCallbackEntry_st {
    CUlogsCallback fn;
    void *data;
};
static struct CUlogsCallbackEntry_st log_cb[LOG_CALLBACKS];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback fn, void *data, CUlogsCallbackHandle *out)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < LOG_CALLBACKS; i++) {
        if (!log_cb[i].fn) {
            log_cb[i].fn = fn;
            log_cb[i].data = data;
            if (out)                    /* optional, as documented */
                *out = &log_cb[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&log_lock);
    return rc;
}

CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle h)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < LOG_CALLBACKS; i++) {
        if (h == &log_cb[i] && log_cb[i].fn) {
            log_cb[i].fn = NULL;
            rc = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&log_lock);
    return rc;
}

CUresult CUDAAPI cuLogsCurrent(CUlogIterator *it, unsigned int flags)
{
    if (!it || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *it = 0;
    return CUDA_SUCCESS;
}
#endif
