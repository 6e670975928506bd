/*
 * graph_int.h - what graph.c (nodes, graphs, instantiation, launch),
 * capture.c (stream capture), graphmem.c (graph memory) and graphnode.c
 * (the generic node calls, executable graphs' kernel parameters) share: the
 * node and graph structures and the calls they make on them.  Private to
 * those files.
 */
#ifndef SIM_GRAPH_INT_H
#define SIM_GRAPH_INT_H

#include "sim.h"

enum { N_KERNEL = 1, N_MEMSET, N_MEMCPY, N_HOST, N_EMPTY, N_MEMALLOC, N_MEMFREE };

struct sim_node {
    uint64_t handle;                    /* 0 in an executable graph */
    uint64_t origin;                    /* executable: the graph node it was made from */
    sim_graph_t *graph;
    int type;
    uint64_t func;                      /* N_KERNEL: function handle */
    unsigned grid[3], block[3], shmem;
    void *params;
    size_t psize;
    CUdeviceptr dst;                    /* N_MEMSET, N_MEMALLOC, N_MEMFREE */
    int own;                            /* N_MEMFREE: of the graph's own allocation */
    size_t pitch, width, height;
    unsigned value, elem;
    void *cdst;                         /* N_MEMCPY */
    const void *csrc;
    size_t bytes;
    uint64_t bw;
    void (*fn)(void *);                 /* N_HOST */
    void *user;
    sim_gmem_t *gmem;                   /* N_MEMALLOC made explicitly (graphmem.c) */
};

struct sim_graph {
    uint64_t handle;
    int exec;                           /* an instantiated (executable) graph */
    sim_node_t **nodes;
    size_t n, cap;
};

/* Under sim_p.lock. */
CUresult sim_node_add(sim_graph_t *g, const sim_node_t *proto, sim_node_t **out);
/* The graph hg, for a node to be added with dependencies deps[0..n). */
CUresult sim_graph_for_add(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                           sim_graph_t **g);
/* A kernel node's prototype, its parameters packed (proto->params: the
 * caller frees it, whatever the result). */
CUresult sim_kernel_proto(sim_node_t *proto, CUfunction hf, const unsigned grid[3],
                          const unsigned block[3], unsigned shmem, void **kp, void **extra);
sim_graph_t *sim_graph_new(int exec);
void sim_graph_free(sim_graph_t *g);
/* (capture.c) Record a node into s's capture: refused once it is invalidated. */
CUresult sim_capture_add(sim_stream_t *s, const sim_node_t *proto);

#endif /* SIM_GRAPH_INT_H */
