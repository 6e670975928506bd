/*
 * graphmem.c - graph memory: memory-allocation and memory-free nodes made
 * explicitly (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode), and each
 * device's graph memory (cuDeviceGetGraphMemAttribute,
 * cuDeviceSetGraphMemAttribute, cuDeviceGraphMemTrim).
 *
 * Divided into: allocations; nodes; the device's figures.
 *
 * Semantics, simple but honest.  The driver fixes an allocation node's
 * address when the node is made and backs it with physical memory from the
 * device's graph memory, which it keeps reserved between launches and gives
 * back only at cuDeviceGraphMemTrim, for what no graph still holds.  Here
 * the memory is allocated (and charged to its device) when the node is
 * made; it is used while a graph or an executable graph holds a node of it
 * (an instantiation copies the node), reserved until a trim after the last
 * is destroyed.  A free node names such an allocation and does nothing at
 * launch (the memory stays the graph memory's).  Allocations recorded by
 * stream capture stay pool blocks (pool.c, capture.c).
 *
 * Invariants (under sim_p.lock), per device d:
 *   reserved[d] == sum of charged over d's allocations
 *   used[d]     == sum of charged over d's allocations with refs > 0
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

struct sim_gmem {
    sim_range_t *r;
    int device;
    int refs;                           /* nodes that hold it */
    struct sim_gmem *next;
};

static sim_gmem_t *gmems;
static uint64_t reserved[SIM_MAX_DEVICES], used[SIM_MAX_DEVICES];
static uint64_t reserved_high[SIM_MAX_DEVICES], used_high[SIM_MAX_DEVICES];

/* ---- allocations ------------------------------------------------------------------- */

static void note_highs(int d)
{
    if (reserved[d] > reserved_high[d])
        reserved_high[d] = reserved[d];
    if (used[d] > used_high[d])
        used_high[d] = used[d];
}

void sim_gmem_ref(sim_gmem_t *g)
{
    if (g->refs++ == 0) {
        used[g->device] += g->r->charged;
        note_highs(g->device);
    }
}

void sim_gmem_unref(sim_gmem_t *g)
{
    if (--g->refs == 0)
        used[g->device] -= g->r->charged;
}

static sim_gmem_t *gmem_of(CUdeviceptr p)
{
    for (sim_gmem_t *g = gmems; g; g = g->next)
        if (g->r->base == (uintptr_t)p)
            return g;
    return NULL;
}

/* A fork() child forgets its parent's graph memory (its pages stay mapped in
 * it, unused), as it does its parent's contexts. */
void sim_gmem_reset_after_fork(void)
{
    gmems = NULL;
    memset(reserved, 0, sizeof reserved);
    memset(used, 0, sizeof used);
    memset(reserved_high, 0, sizeof reserved_high);
    memset(used_high, 0, sizeof used_high);
}

/* ---- nodes ------------------------------------------------------------------------- */

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps,
                                        size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
    SIM_CHECK_INIT();
    if (!p || !p->bytesize || p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(p->poolProps.location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    sim_gmem_t *g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int dev = p->poolProps.location.id;
    SIM_LOCK();
    sim_node_t proto = { .type = N_MEMALLOC, .gmem = g };
    sim_graph_t *graph;
    CUresult rc = sim_graph_for_add(out, hg, deps, n, &graph);
    if (rc == CUDA_SUCCESS)
        rc = sim_mem_alloc(NULL, dev, p->bytesize, SIM_R_GRAPH, &g->r);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    g->device = dev;
    proto.dst = (CUdeviceptr)g->r->base;
    sim_node_t *nd;
    if ((rc = sim_node_add(graph, &proto, &nd)) != CUDA_SUCCESS) {   /* refs 0 */
        sim_mem_release(g->r);
        goto out_unlock;
    }
    g->next = gmems;
    gmems = g;
    reserved[dev] += g->r->charged;
    note_highs(dev);
    p->dptr = proto.dst;
    *out = (CUgraphNode)(uintptr_t)nd->handle;
    g = NULL;
out_unlock:
    SIM_UNLOCK();
    free(g);
    return rc;
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps,
                                       size_t n, CUdeviceptr dptr)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *graph;
    sim_node_t proto = { .type = N_MEMFREE, .dst = dptr, .own = 1 }, *nd;
    CUresult rc = sim_graph_for_add(out, hg, deps, n, &graph);
    if (rc == CUDA_SUCCESS && !gmem_of(dptr))
        rc = CUDA_ERROR_INVALID_VALUE;  /* only graph memory is freed by a graph */
    if (rc == CUDA_SUCCESS && (rc = sim_node_add(graph, &proto, &nd)) == CUDA_SUCCESS)
        *out = (CUgraphNode)(uintptr_t)nd->handle;
    SIM_UNLOCK();
    return rc;
}

/* ---- the device's figures ------------------------------------------------------------ */

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *v)
{
    SIM_CHECK_INIT();
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    SIM_LOCK();
    switch ((int)attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)v = used[dev]; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)v = used_high[dev]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)v = reserved[dev]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)v = reserved_high[dev]; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    SIM_UNLOCK();
    return rc;
}

/* Only the high-water marks can be set, and only reset (to 0: the current). */
CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *v)
{
    SIM_CHECK_INIT();
    if (!v || *(cuuint64_t *)v != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    SIM_LOCK();
    if ((int)attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        used_high[dev] = used[dev];
    else if ((int)attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        reserved_high[dev] = reserved[dev];
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    SIM_UNLOCK();
    return rc;
}

/* What no graph holds goes back to the device. */
CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    for (sim_gmem_t **g = &gmems; *g;) {
        sim_gmem_t *x = *g;
        if (x->device != dev || x->refs > 0) {
            g = &x->next;
            continue;
        }
        *g = x->next;
        reserved[dev] -= x->r->charged;
        sim_mem_release(x->r);
        free(x);
    }
    SIM_UNLOCK();
    return CUDA_SUCCESS;
}
