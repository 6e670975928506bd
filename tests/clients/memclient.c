/*
 * memclient.c - a driver-API program that holds device memory the ways the
 * accounting must follow beyond cuMemAlloc: VMM handles on a device other
 * than the current one or in host memory, handles that live on while
 * mapped, and memory pools that keep what was freed into them.  For
 * test_memory_drv, over simgpu with libsalus preloaded.
 *
 *   memclient vmm-device   cuMemCreate on device 1 with device 0 current,
 *                          then with no current context
 *   memclient vmm-host     a host-located cuMemCreate beside a device one
 *   memclient vmm-map      create, map, release 2 MiB at a time, 4 times;
 *                          then unmap and create again
 *   memclient pool-hold <MiB> max|0   a pool with an infinite release
 *                          threshold (max, PyTorch's) or the default 0:
 *                          allocate and free <MiB>, synchronize, then keep
 *                          the pool until killed
 *   memclient alloc <MiB>  cuMemAlloc <MiB> and free it
 *   memclient graph-mem    a graph's 64 MiB allocation node, launched,
 *                          destroyed, then the device's graph memory
 *                          trimmed; cuMemAlloc of 64 MiB between the steps
 *   memclient graph-mem-generic
 *                          the same, the nodes added by the generic
 *                          cuGraphAddNode (as XLA adds its nodes)
 *
 * Each mode prints one JSON line on stdout, "program":"memclient", the mode,
 * and each step's CUresult as r0, r1, ... (-1: not reached), then exits 0
 * (the test judges the steps).  pool-hold prints its line once the pool
 * holds the memory, then sleeps until killed.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define STEPS 8

static int r[STEPS];

static void say(const char *mode)
{
    printf("{\"program\":\"memclient\",\"mode\":\"%s\"", mode);
    for (int i = 0; i < STEPS; i++)
        printf(",\"r%d\":%d", i, r[i]);
    printf("}\n");
    fflush(stdout);
}

static CUresult create(CUmemGenericAllocationHandle *h, size_t bytes, CUmemLocationType type,
                       int id)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = type;
    prop.location.id = id;
    return cuMemCreate(h, bytes, &prop, 0);
}

/* Device 1's charge follows prop->location, whatever context is current
 * (device 0's, or none): under a 100 MiB limit per device, a second 64 MiB
 * handle on device 1 is refused while device 0 still has room. */
static void vmm_device(CUcontext ctx0)
{
    CUmemGenericAllocationHandle a, b, c;
    CUdeviceptr p;
    r[0] = create(&a, 64 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 1);
    r[1] = create(&b, 64 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 1);
    r[2] = cuMemAlloc(&p, 64 * MIB);
    cuCtxSetCurrent(NULL);
    r[3] = create(&c, 64 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 1);
    r[4] = r[0] == CUDA_SUCCESS ? (int)cuMemRelease(a) : -1;
    r[5] = create(&c, 64 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 1);
    if (r[5] == CUDA_SUCCESS)
        cuMemRelease(c);
    cuCtxSetCurrent(ctx0);
    if (r[2] == CUDA_SUCCESS)
        cuMemFree(p);
}

/* Host memory is no device's: an 8 MiB host handle passes a 4 MiB limit,
 * an 8 MiB device handle does not. */
static void vmm_host(void)
{
    CUmemGenericAllocationHandle h, d;
    r[0] = create(&h, 8 * MIB, CU_MEM_LOCATION_TYPE_HOST, 0);
    r[1] = create(&d, 8 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 0);
    r[2] = r[0] == CUDA_SUCCESS ? (int)cuMemRelease(h) : -1;
    if (r[1] == CUDA_SUCCESS)
        cuMemRelease(d);
}

/* Create, map, release, 2 MiB at a time, 4 times, under a 4 MiB limit: the
 * memory lives while mapped, so the third is refused.  Unmapping gives it
 * back. */
static void vmm_map(void)
{
    CUdeviceptr base;
    CUmemAccessDesc access = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                               .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    int mapped = 0;
    if (cuMemAddressReserve(&base, 8 * MIB, 0, 0, 0) != CUDA_SUCCESS)
        return;
    for (int i = 0; i < 4; i++) {
        CUmemGenericAllocationHandle h;
        if ((r[i] = create(&h, 2 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 0)) != CUDA_SUCCESS)
            continue;
        if (cuMemMap(base + (CUdeviceptr)mapped * 2 * MIB, 2 * MIB, 0, h, 0) == CUDA_SUCCESS) {
            cuMemSetAccess(base + (CUdeviceptr)mapped * 2 * MIB, 2 * MIB, &access, 1);
            mapped++;
        }
        cuMemRelease(h);
    }
    r[4] = cuMemUnmap(base, (size_t)mapped * 2 * MIB);
    CUmemGenericAllocationHandle h;
    if ((r[5] = create(&h, 2 * MIB, CU_MEM_LOCATION_TYPE_DEVICE, 0)) == CUDA_SUCCESS)
        cuMemRelease(h);
    cuMemAddressFree(base, 8 * MIB);
}

/* A pool that keeps everything (PyTorch's cudaMallocAsync backend), or
 * the driver's default (release at the next synchronize): the memory freed
 * into it stays reserved, or not. */
static void pool_hold(size_t mib, int keep_all)
{
    CUmemPoolProps props;
    CUmemoryPool pool;
    CUstream s;
    CUdeviceptr p;
    cuuint64_t keep = keep_all ? UINT64_MAX : 0, reserved = 0;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    if ((r[0] = cuMemPoolCreate(&pool, &props)) != CUDA_SUCCESS)
        return;
    r[1] = cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if ((r[2] = cuMemAllocFromPoolAsync(&p, mib * MIB, pool, s)) == CUDA_SUCCESS)
        r[3] = cuMemFreeAsync(p, s);
    r[4] = cuStreamSynchronize(s);
    r[5] = cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    r[6] = (reserved >= mib * MIB) == keep_all ? 0 : 1;   /* kept, or released */
}

/* Graph memory stays reserved until trimmed: under a 100 MiB limit, a
 * graph's 64 MiB node leaves no room for 64 MiB more, even once the graph is
 * destroyed, until cuDeviceGraphMemTrim. */
/* An allocation node by its typed call, or by the generic one. */
static CUresult add_alloc_node(CUgraphNode *node, CUgraph g, CUDA_MEM_ALLOC_NODE_PARAMS *params,
                               int generic)
{
    if (!generic)
        return cuGraphAddMemAllocNode(node, g, NULL, 0, params);
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    memcpy(&p.alloc, params, sizeof *params);       /* v1 and v2: the same fields */
    return cuGraphAddNode(node, g, NULL, NULL, 0, &p);
}

static void graph_mem(int generic)
{
    CUgraph g;
    CUgraphNode node;
    CUgraphExec x;
    CUstream s;
    CUdeviceptr p;
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = 0;
    params.bytesize = 64 * MIB;
    cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if (cuGraphCreate(&g, 0) != CUDA_SUCCESS)
        return;
    r[0] = add_alloc_node(&node, g, &params, generic);
    r[1] = add_alloc_node(&node, g, &params, generic);            /* 128 of 100 */
    if (cuGraphInstantiate(&x, g, 0) == CUDA_SUCCESS) {
        r[2] = cuGraphLaunch(x, s);
        cuStreamSynchronize(s);
        cuGraphExecDestroy(x);
    }
    if ((r[3] = cuMemAlloc(&p, 64 * MIB)) == CUDA_SUCCESS)
        cuMemFree(p);
    cuGraphDestroy(g);
    if ((r[4] = cuMemAlloc(&p, 64 * MIB)) == CUDA_SUCCESS)   /* still reserved */
        cuMemFree(p);
    r[5] = cuDeviceGraphMemTrim(0);
    if ((r[6] = cuMemAlloc(&p, 64 * MIB)) == CUDA_SUCCESS)
        cuMemFree(p);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    CUdevice dev;
    CUcontext ctx;
    for (int i = 0; i < STEPS; i++)
        r[i] = -1;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "memclient: no device 0\n");
        return 2;
    }
    if (strcmp(mode, "vmm-device") == 0) {
        vmm_device(ctx);
    } else if (strcmp(mode, "vmm-host") == 0) {
        vmm_host();
    } else if (strcmp(mode, "vmm-map") == 0) {
        vmm_map();
    } else if (strcmp(mode, "pool-hold") == 0) {
        pool_hold(mib, argc > 3 && strcmp(argv[3], "max") == 0);
        say(mode);
        for (;;)
            pause();
    } else if (strcmp(mode, "graph-mem") == 0 || strcmp(mode, "graph-mem-generic") == 0) {
        graph_mem(strcmp(mode, "graph-mem-generic") == 0);
    } else if (strcmp(mode, "alloc") == 0) {
        CUdeviceptr p;
        if ((r[0] = cuMemAlloc(&p, mib * MIB)) == CUDA_SUCCESS)
            r[1] = cuMemFree(p);
    } else {
        fprintf(stderr, "usage: memclient vmm-device | vmm-host | vmm-map | "
                        "pool-hold <MiB> max|0 | alloc <MiB> | graph-mem | graph-mem-generic\n");
        return 2;
    }
    say(mode);
    return 0;
}
