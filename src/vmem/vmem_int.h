/*
 * vmem_int.h - the virtualized allocator's insides, private to src/vmem:
 * what core.c (the maps, start-up, chunks), keep.c (the chunk cache, the
 * drain thread's look), alloc.c (allocations, frees, queries), async.c
 * (stream-ordered frees), swap.c (paging out and in), stage.c (pinned
 * staging and its bounds), quiesce.c (a page-out's bounded wait for the
 * program's work), ipc.c and ipcopen.c (CUDA IPC on paged memory: the
 * exporter, the importer) and jem.c (the private jemalloc arena) share.
 * vmem.h has the interface.
 *
 * With paging on (SALUS_SWAP), cuMemAlloc_v2 and cuMemAllocPitch_v2 are
 * served from device address ranges libsalus reserves and backs itself
 * through the real driver (cuMemAddressReserve, cuMemCreate, cuMemMap,
 * cuMemSetAccess), so that the physical memory can be released and new
 * memory mapped at the same addresses later:
 *
 *   - a big allocation (>= the granularity, 2 MiB) is a reservation of its
 *     own, backed by one physical chunk of its rounded size;
 *   - a small one is sub-allocated by jemalloc in the device's small region
 *     (one reservation per device), whose granules (granularity-sized) are
 *     backed when a live allocation first lands in them.  jemalloc is handed
 *     host "shadow" addresses, one to one with the region at a fixed
 *     offset, so that its metadata is written to host memory, never to the
 *     device.
 *
 * Every physical chunk is charged to the process's budget when created and
 * given back when released (memory.h's mem_charge_at, mem_uncharge_at):
 * the accounting counts what is on the device.
 *
 * Lock: vmem_p.lock guards all of it (the maps, the devices, the jemalloc
 * arenas, whose hooks run under it); it is taken before memory's start-up
 * lock and the table's, and held across the driver calls of a page-out or
 * page-in (the process is stopped at the gate meanwhile).
 */
#ifndef SALUS_VMEM_INT_H
#define SALUS_VMEM_INT_H

#include <pthread.h>
#include <stdint.h>

#include "drv/drv.h"
#include "memory/memory.h"
#include "vmem/vmem.h"
#include "util/atomic.h"

#define VMEM_MAX_DEVICES 16        /* CUDA ordinals that may virtualize */
#define VMEM_SPARE_BUFS 64         /* allocation records kept for reuse */

/* A freed block jem.c keeps for the next allocation of its size. */
typedef struct vmem_jem_block {
    uintptr_t devptr;
    size_t size;                   /* rounded to VMEM_ALIGN */
} vmem_jem_block_t;
#define VMEM_JEM_KEEP 8

/* The jemalloc arena of a device's small region (jem.c). */
typedef struct vmem_jem {
    void *arena;                   /* jem.c's, NULL until made */
    unsigned index;                /* jemalloc's arena index */
    uintptr_t shadow;              /* host base of the shadow range */
    uintptr_t dev;                 /* device base of the small region */
    size_t size;                   /* of both */
    size_t bump;                   /* handed out to jemalloc so far */
    vmem_jem_block_t keep[VMEM_JEM_KEEP];   /* [0, kept): freed, newest last */
    unsigned kept;
} vmem_jem_t;

/* Whether the private jemalloc is linked in (libsalus links it). */
int vmem_jem_available(void);
/* Make j's arena over [shadow, shadow + size), mapping to dev: 0 or -1. */
int vmem_jem_create(vmem_jem_t *j, uintptr_t dev, size_t size);
/* A device address of n bytes in j's region, or 0: aligned to VMEM_ALIGN,
 * its block a whole number of VMEM_ALIGN bytes, as cudaMalloc's memory is
 * (programs rely on it: a texture over linear memory needs the texture
 * alignment, and an overrun of a few bytes must not reach a neighbour). */
#define VMEM_ALIGN 512u
uintptr_t vmem_jem_alloc(vmem_jem_t *j, size_t n);
/* Free the block of n bytes (as allocated) at devptr: kept for the next
 * allocation of its size, or back to jemalloc. */
void vmem_jem_free(vmem_jem_t *j, uintptr_t devptr, size_t n);
/* Give the blocks j keeps back to jemalloc, for an allocation the device
 * is short for: 1 if any was kept, else 0. */
int vmem_jem_flush(vmem_jem_t *j);
/* The shadow (host) address jemalloc knows for a device address of j. */
static inline uintptr_t vmem_jem_shadow(const vmem_jem_t *j, uintptr_t devptr)
{
    return devptr - j->dev + j->shadow;
}

/* One granule of a small region. */
typedef struct vmem_gran {
    CUmemGenericAllocationHandle h;   /* 0: not backed */
    uint32_t live;                    /* live allocations touching it */
    uint32_t charged;                 /* 1: its bytes are in the budget */
} vmem_gran_t;

/* A copied range of a paged-out small region: device address, length and
 * its offset in the staging buffer. */
typedef struct vmem_range {
    uint64_t base, len, off;
} vmem_staged_t;

/* One CUDA ordinal's virtualized memory. */
/* A freed big allocation kept for the next of its size (alloc.c's
 * cache): its reservation and chunk, still mapped, still charged. */
typedef struct vmem_cached {
    uint64_t base, bytes;
    CUmemGenericAllocationHandle h;
    uint8_t charged;
    uint64_t at_ns;                /* when it was freed */
} vmem_cached_t;
#define VMEM_CACHE 4
#define VMEM_KEEP_NS (250ull * 1000000)    /* how long a freed chunk is kept */

typedef struct vmem_dev {
    int ready;                     /* context, stream, small region made */
    int ordinal;
    CUcontext ctx;                 /* where libsalus's copies run */
    CUstream stream;               /* libsalus's own, for paging copies */
    size_t gran;                   /* the driver's granularity: a power of two */
    /* The small region. */
    CUdeviceptr base;
    size_t size;
    vmem_gran_t *g;                /* size / gran granules */
    vmem_jem_t jem;
    /* A paged-out small region: what was copied where. */
    int small_out;
    void *stage;
    size_t stage_bytes;
    vmem_staged_t *ranges;
    size_t nranges;
    /* Freed big allocations kept, oldest first; counted in resident. */
    vmem_cached_t cache[VMEM_CACHE];
    int ncache;
    /* Figures. */
    uint64_t resident, paged_out;  /* physical bytes on the device; live bytes staged */
    /* Exports of small allocations (ipc.c) live or still imported: while
     * nonzero the small region is pinned (never paged out). */
    uint32_t small_pins;
} vmem_dev_t;

/* One virtualized allocation. */
typedef struct vmem_buf {
    uint64_t base, size;           /* what the program sees */
    uint64_t id;                   /* its buffer id, unique in the process */
    CUcontext ctx;                 /* current when it was made */
    int ordinal;
    uint8_t big;                   /* own reservation and chunk */
    uint8_t out;                   /* big: paged out */
    uint8_t charged;               /* big: its chunk is in the budget */
    uint8_t exported;              /* has an IPC handle (ipc.c): pinned resident */
    uint8_t clean;                 /* big, paged out: never written, nothing staged */
    uint64_t bytes;                /* big: reservation and chunk size */
    CUmemGenericAllocationHandle h;   /* big: the chunk, 0 when paged out */
    void *stage;                   /* big, paged out: its copy (NULL: never written) */
    uint64_t work_at;              /* big: the process's work calls when it was made
                                      (vmem_set_work_count), UINT64_MAX: unknown */
} vmem_buf_t;

/* A map from nonzero 64-bit keys to pointers (open addressing). */
typedef struct vmem_map {
    uint64_t *key;
    void **val;
    size_t mask, count;            /* capacity - 1 (a power of two), entries */
} vmem_map_t;

int vmem_map_put(vmem_map_t *m, uint64_t key, void *val);
void *vmem_map_get(const vmem_map_t *m, uint64_t key);
void *vmem_map_del(vmem_map_t *m, uint64_t key);

/* The big allocations in the order of their bases (each has a reservation
 * of its own, so they are disjoint): the one holding an interior pointer
 * is found by binary search, and making or freeing one costs a move of n
 * pointers, whatever its size (a map entry per granule cost a 10 GiB
 * allocation 5,000 insertions).  Invariant: v[i]->base + v[i]->bytes <=
 * v[i + 1]->base. */
typedef struct vmem_spans {
    vmem_buf_t **v;
    size_t n, cap;
} vmem_spans_t;

int vmem_spans_add(vmem_spans_t *s, vmem_buf_t *a);
void vmem_spans_del(vmem_spans_t *s, const vmem_buf_t *a);
/* The allocation whose reservation holds p, NULL: none. */
vmem_buf_t *vmem_spans_find(const vmem_spans_t *s, uint64_t p);

/* Pinned staging kept for the next page-out (stage.c says the rules and
 * the invariant): sizes rounded to VMEM_STAGE_ROUND, at most
 * VMEM_STAGE_KEEP_N buffers, for VMEM_STAGE_KEEP_NS after the last page-in. */
#define VMEM_STAGE_ROUND (2ull << 20)
#define VMEM_STAGE_KEEP_N 256
#define VMEM_STAGE_KEEP_NS (30ull * 1000000000)   /* kept after the last page-in */
typedef struct vmem_kept_stage {
    void *p;
    uint64_t bytes;                /* a multiple of VMEM_STAGE_ROUND */
} vmem_kept_stage_t;

typedef struct vmem_pool {
    vmem_kept_stage_t ent[VMEM_STAGE_KEEP_N];   /* [0, n): oldest first */
    unsigned n;
    uint64_t bytes;                /* kept, summed */
    uint64_t last_in_ns;           /* the last give back: the trim's clock */
} vmem_pool_t;

typedef struct vmem_state {
    pthread_mutex_t lock;
    int on;                        /* 0 undecided, 1 on (SALUS_SWAP=on and
                                      the driver has VMM), 2 off */
    vmem_dev_t dev[VMEM_MAX_DEVICES];
    vmem_map_t allocs;             /* base -> vmem_buf_t */
    vmem_spans_t bigs;             /* big allocations, by base */
    uint64_t next_id;
    uint64_t staged;               /* bytes of pinned staging in use (stage.c:
                                      kept staging is not counted) */
    vmem_pool_t pool;              /* stage.c's kept staging */
    uint64_t cg_cap;               /* the staging the page-out in progress may
                                      reach (stage.c's vmem_cg_read; UINT64_MAX:
                                      unbounded) */
    uint64_t copied;               /* bytes paging copied, both ways (relaxed) */
    int no_fd;                     /* the driver refused chunks with a POSIX fd
                                      handle type: chunks made without, no IPC */
    int ticking;                   /* vmem_keep_tick has run: chunks may be kept
                                      (atomic; a fork() child starts without) */
    drv_t drv;                     /* its own copy of the driver table, taken at
                                      start-up (memory's, mem_driver) */
    /* What the charges of the operation in progress ask of memory.h
     * (MEM_CHARGE_*: set with the lock taken, by the operation that holds
     * it, and cleared before it is released), and whether one of them was
     * answered MEM_CHARGE_STUCK (read by the operation before the lock
     * goes: vmem_stuck_seen). */
    unsigned charge_flags;
    int stuck;
    int pageable;                  /* a device's paging started (vmem_pageable); atomic */
    unsigned small_devs;           /* bit i: dev[i]'s small region is made (base
                                      and size set first); atomic */
    uint64_t (*work_count)(void);  /* vmem_set_work_count; atomic */
    /* vmm_ipc.c's, set at its first export (so before an allocation is
     * exported), called by the files below it without naming it: an
     * exported allocation is being freed (its pin goes, or stays while
     * importers map it): 1 when its chunk's charge is kept for them (the
     * caller does not give it back); a fork() child forgets its parent's
     * exports, imports and server. */
    int (*ipc_freed)(vmem_buf_t *a);
    void (*ipc_forget)(void);
    vmem_buf_t *spare[VMEM_SPARE_BUFS];   /* [0, nspare): records for reuse */
    unsigned nspare;
} vmem_state_t;

extern vmem_state_t vmem_p;

/* core.c: an allocation's record, zeroed (NULL: no memory), and its return
 * once the allocation is gone, under vmem_p.lock: a few are kept for the
 * next (a pair must not cost a calloc and a free). */
vmem_buf_t *vmem_buf_new_locked(void);
void vmem_buf_put_locked(vmem_buf_t *a);

/* core.c: the budget, under vmem_p.lock with vmem_p.charge_flags (a
 * CUresult; *charged 0 when it passed uncounted), and the physical memory
 * of a chunk (create, map, set access). */
CUresult vmem_charge(int ordinal, uint64_t bytes, int *charged);
void vmem_uncharge(int ordinal, uint64_t bytes);
/* keep.c's chunk cache (it says the rule), under vmem_p.lock: put a
 * freed big allocation's chunk (1 kept: its reservation, chunk and charge
 * stay; 0 the caller lets them go); take one of exactly `bytes`; release
 * one taken; drop every kept chunk of v (the bytes that were charged). */
int vmem_cache_put_locked(vmem_dev_t *v, const vmem_buf_t *a);
int vmem_cache_take_locked(vmem_dev_t *v, uint64_t bytes, vmem_cached_t *c);
void vmem_cache_release_locked(vmem_dev_t *v, const vmem_cached_t *c);
uint64_t vmem_cache_drop_locked(vmem_dev_t *v);
/* An allocation's charge waits under vmem_p.lock, where this process
 * cannot page itself out; so an allocation may be tried with its wait set
 * to give up once stuck (MEM_CHARGE_BAIL: every job holding memory waits
 * for more, under pack), and the caller above (page.h's page_valloc), with
 * vmem_p.lock released, pages the process out and back in and tries again
 * (vmem_stuck_t).  Under the lock, vmem_stuck_try(bail) sets the try's
 * charges and vmem_stuck_seen takes (and clears) whether one gave up. */
void vmem_stuck_try(int bail);
int vmem_stuck_seen(void);
CUresult vmem_back(vmem_dev_t *v, CUdeviceptr at, size_t bytes,
                     CUmemGenericAllocationHandle *out);
void vmem_unback(CUdeviceptr at, size_t bytes, CUmemGenericAllocationHandle h);
/* core.c: the module's driver table (its copy of memory's, mem_driver), or
 * one of NULL calls while memory has none; vmem_p.drv once vmem_on. */
const drv_t *vmem_drv(void);
/* Push v's context for libsalus's own driver calls; pop it after. */
int vmem_enter(vmem_dev_t *v);
void vmem_leave(void);
/* The granule index range [first, last] of [p, p + n) in v's small region. */
static inline void vmem_granules(const vmem_dev_t *v, uint64_t p, uint64_t n,
                                   size_t *first, size_t *last)
{
    unsigned shift = (unsigned)__builtin_ctzll(v->gran);   /* a power of two: no division */
    *first = (p - v->base) >> shift;
    *last = (p + n - 1 - v->base) >> shift;
}
/* alloc.c: the virtualized allocation holding p, or NULL. */
vmem_buf_t *vmem_find_locked(uint64_t p);
/* Whether cuIpcGetMemHandle can be answered for virtualized memory
 * (ipc.c): chunks have POSIX fds and the driver exports them. */
static inline int vmem_ipc_able(void)
{
    return !vmem_p.no_fd && vmem_drv()->mem_export_to_shareable_handle != NULL;
}
/* ipcopen.c: a fork() child forgets its parent's imports (ipc.c's forget). */
void vmem_ipc_imports_forget(void);
/* swap.c: bring a paged-out small region back. */
CUresult vmem_small_in(vmem_dev_t *v, uint64_t *restored);
/* The device bytes paging v back in takes. */
uint64_t vmem_need_in(const vmem_dev_t *v);
/* stage.c: pinned host staging, under vmem_p.lock (it says the rules).
 * vmem_stage_take: a buffer for `bytes` (NULL: past a bound, said, or no
 * host memory), from the pool when one of its size is kept;
 * vmem_stage_give: it back (kept for the next page-out, or freed), with
 * the bytes it was taken for; vmem_stage_size: what a take of `bytes`
 * counts against the bounds.  vmem_cg_read reads the cgroup's room into
 * vmem_p.cg_cap for the page-out about to stage (UINT64_MAX: unbounded; the
 * page-out sets it back).  vmem_stage_trim_locked: at the drain thread's look, the kept
 * buffers let go (their count, into drop[VMEM_STAGE_KEEP_N]; the caller
 * frees them once the lock is released), *next lowered to the ns until it
 * wants the next look. */
extern uint64_t vmem_stage_keep_ns;       /* VMEM_STAGE_KEEP_NS; tests shorten it */
void *vmem_stage_take(uint64_t bytes);
void vmem_stage_give(void *p, uint64_t bytes);
uint64_t vmem_stage_size(uint64_t bytes);
uint64_t vmem_stage_kept(void);
void vmem_cg_read(void);
void vmem_cg_refused(uint64_t bytes);
uint64_t vmem_swap_limit(void);
unsigned vmem_stage_trim_locked(uint64_t now, void **drop, uint64_t *next);

/* Forget a big allocation's staged copy (freed while paged out). */
void vmem_drop_stage(vmem_buf_t *a);

/* alloc.c: a virtualized allocation of `size` bytes on `ordinal`
 * (CUDA_ERROR_NOT_SUPPORTED: paging could not start there), and the
 * release of one already out of vmem_p.allocs (its record stays the
 * caller's to free). */
CUresult vmem_alloc_locked(int ordinal, uint64_t size, CUdeviceptr *out);
void vmem_free_locked(vmem_buf_t *a);
/* async.c's stream-ordered frees, reached through these pointers
 * (core.c's; NULL until its first allocation) so that the files
 * beneath it need not name it: release those whose stream has passed
 * them, and forget them all in a fork child. */
typedef struct vmem_async_ops {
    void (*settle_locked)(void);
    void (*forget)(void);
} vmem_async_ops_t;
extern const vmem_async_ops_t *vmem_async_ops_p;
static inline void vmem_async_settle_locked(void)
{
    const vmem_async_ops_t *o = util_load_acquire(&vmem_async_ops_p);
    if (o)
        o->settle_locked();
}

/* The program's work on ctx waited for (quiesce.c), up to vmem_quiesce_ns
 * (vmem.h), holding none of the allocator's locks: CUDA_SUCCESS, the
 * synchronize's error, or CUDA_ERROR_NOT_READY when it has not ended in
 * time (or an earlier wait has not yet).  Not under vmem_p.lock. */
CUresult vmem_quiesce(CUcontext ctx);
/* 1 while a synchronize of quiesce's has not returned (tests, tools). */
int vmem_quiesce_waiting(void);

/* A test seam: called, when set, half-way through a page-out (the first
 * big allocation's chunk released and its budget returned, the others'
 * copies staged and still mapped) and a page-in (the first big
 * allocation's chunk charged and mapped again, its copy back submitted,
 * the staging of all still held), under vmem_p.lock, so that a test can
 * park the process there and SIGKILL it (test_memory_pagekill).  NULL in
 * every program. */
typedef enum vmem_phase { VMEM_HALF_OUT = 1, VMEM_HALF_IN } vmem_phase_t;
extern void (*vmem_phase_hook)(vmem_phase_t phase);

/* The process's work calls so far (vmem_set_work_count), UINT64_MAX:
 * unknown (every allocation counts as written then). */
static inline uint64_t vmem_work_now(void)
{
    uint64_t (*fn)(void) = util_load_acquire(&vmem_p.work_count);
    return fn ? fn() : UINT64_MAX;
}

#endif /* SALUS_VMEM_INT_H */
