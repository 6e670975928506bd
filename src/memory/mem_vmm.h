/*
 * mem_vmm.h - virtualized allocations, private to src/memory: what
 * vmm_alloc.c (allocations, frees, queries), vmm_page.c (paging out and in)
 * and jem.c (the private jemalloc arena) share.  memory.h has the interface.
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
 * given back when released: the accounting counts what is on the device.
 *
 * Lock: mem_vm.lock guards all of it (the maps, the devices, the jemalloc
 * arenas, whose hooks run under it); it is taken before memory's start-up
 * lock and the table's, and held across the driver calls of a page-out or
 * page-in (the process is stopped at the gate meanwhile).
 */
#ifndef SALUS_MEM_VMM_H
#define SALUS_MEM_VMM_H

#include <pthread.h>
#include <stdint.h>

#include "memory/mem_layout.h"

#define MEM_VMM_MAX_DEVICES 16     /* CUDA ordinals that may virtualize */

/* The jemalloc arena of a device's small region (jem.c). */
typedef struct mem_jem {
    void *arena;                   /* jem.c's, NULL until made */
    unsigned index;                /* jemalloc's arena index */
    uintptr_t shadow;              /* host base of the shadow range */
    uintptr_t dev;                 /* device base of the small region */
    size_t size;                   /* of both */
    size_t bump;                   /* handed out to jemalloc so far */
} mem_jem_t;

/* Whether the private jemalloc is linked in (libsalus links it). */
int mem_jem_available(void);
/* Make j's arena over [shadow, shadow + size), mapping to dev: 0 or -1. */
int mem_jem_create(mem_jem_t *j, uintptr_t dev, size_t size);
/* A device address of n bytes in j's region, or 0. */
uintptr_t mem_jem_alloc(mem_jem_t *j, size_t n);
void mem_jem_free(mem_jem_t *j, uintptr_t devptr);
/* The shadow (host) address jemalloc knows for a device address of j. */
static inline uintptr_t mem_jem_shadow(const mem_jem_t *j, uintptr_t devptr)
{
    return devptr - j->dev + j->shadow;
}

/* One granule of a small region. */
typedef struct mem_vgran {
    CUmemGenericAllocationHandle h;   /* 0: not backed */
    uint32_t live;                    /* live allocations touching it */
    uint32_t charged;                 /* 1: its bytes are in the budget */
} mem_vgran_t;

/* A copied range of a paged-out small region: device address, length and
 * its offset in the staging buffer. */
typedef struct mem_vrange {
    uint64_t base, len, off;
} mem_vrange_t;

/* One CUDA ordinal's virtualized memory. */
/* A freed big allocation kept for the next of its size (vmm_alloc.c's
 * cache): its reservation and chunk, still mapped, still charged. */
typedef struct mem_vcached {
    uint64_t base, bytes;
    CUmemGenericAllocationHandle h;
    uint8_t charged;
    uint64_t at_ns;                /* when it was freed */
} mem_vcached_t;
#define MEM_VM_CACHE 4
#define MEM_VM_KEEP_NS (250ull * 1000000)    /* how long a freed chunk is kept */

typedef struct mem_vdev {
    int ready;                     /* context, stream, small region made */
    int ordinal;
    CUcontext ctx;                 /* where libsalus's copies run */
    CUstream stream;               /* libsalus's own, for paging copies */
    size_t gran;                   /* the driver's granularity */
    /* The small region. */
    CUdeviceptr base;
    size_t size;
    mem_vgran_t *g;                /* size / gran granules */
    mem_jem_t jem;
    /* A paged-out small region: what was copied where. */
    int small_out;
    void *stage;
    size_t stage_bytes;
    mem_vrange_t *ranges;
    size_t nranges;
    /* Freed big allocations kept, oldest first; counted in resident. */
    mem_vcached_t cache[MEM_VM_CACHE];
    int ncache;
    /* Figures. */
    uint64_t resident, paged_out;  /* physical bytes on the device; live bytes staged */
    /* Exports of small allocations (vmm_ipc.c) live or still imported: while
     * nonzero the small region is pinned (never paged out). */
    uint32_t small_pins;
} mem_vdev_t;

/* One virtualized allocation. */
typedef struct mem_valloc {
    uint64_t base, size;           /* what the program sees */
    uint64_t id;                   /* its buffer id, unique in the process */
    CUcontext ctx;                 /* current when it was made */
    int ordinal;
    uint8_t big;                   /* own reservation and chunk */
    uint8_t out;                   /* big: paged out */
    uint8_t charged;               /* big: its chunk is in the budget */
    uint8_t exported;              /* has an IPC handle (vmm_ipc.c): pinned resident */
    uint8_t clean;                 /* big, paged out: never written, nothing staged */
    uint64_t bytes;                /* big: reservation and chunk size */
    CUmemGenericAllocationHandle h;   /* big: the chunk, 0 when paged out */
    void *stage;                   /* big, paged out: its copy (NULL: never written) */
    uint64_t work_at;              /* big: the process's work calls when it was made
                                      (mem_p.work_count), UINT64_MAX: unknown */
} mem_valloc_t;

/* A map from nonzero 64-bit keys to pointers (open addressing). */
typedef struct mem_vmap {
    uint64_t *key;
    void **val;
    size_t mask, count;            /* capacity - 1 (a power of two), entries */
} mem_vmap_t;

int mem_vmap_put(mem_vmap_t *m, uint64_t key, void *val);
void *mem_vmap_get(const mem_vmap_t *m, uint64_t key);
void *mem_vmap_del(mem_vmap_t *m, uint64_t key);

/* The big allocations in the order of their bases (each has a reservation
 * of its own, so they are disjoint): the one holding an interior pointer
 * is found by binary search, and making or freeing one costs a move of n
 * pointers, whatever its size (a map entry per granule cost a 10 GiB
 * allocation 5,000 insertions).  Invariant: v[i]->base + v[i]->bytes <=
 * v[i + 1]->base. */
typedef struct mem_vspans {
    mem_valloc_t **v;
    size_t n, cap;
} mem_vspans_t;

int mem_vspans_add(mem_vspans_t *s, mem_valloc_t *a);
void mem_vspans_del(mem_vspans_t *s, const mem_valloc_t *a);
/* The allocation whose reservation holds p, NULL: none. */
mem_valloc_t *mem_vspans_find(const mem_vspans_t *s, uint64_t p);

typedef struct mem_vm {
    pthread_mutex_t lock;
    int on;                        /* 0 undecided, 1 on (SALUS_SWAP=on and
                                      the driver has VMM), 2 off */
    mem_vdev_t dev[MEM_VMM_MAX_DEVICES];
    mem_vmap_t allocs;             /* base -> mem_valloc_t */
    mem_vspans_t bigs;             /* big allocations, by base */
    uint64_t next_id;
    uint64_t staged;               /* bytes of pinned staging held */
    uint64_t copied;               /* bytes paging copied, both ways (relaxed) */
    int no_fd;                     /* the driver refused chunks with a POSIX fd
                                      handle type: chunks made without, no IPC */
    int ticking;                   /* mem_keep_tick has run: chunks may be kept
                                      (atomic; a fork() child starts without) */
    /* vmm_ipc.c's, set at its first export (so before an allocation is
     * exported), called by the files below it without naming it: an
     * exported allocation is being freed (its pin goes, or stays while
     * importers map it): 1 when its chunk's charge is kept for them (the
     * caller does not give it back); a fork() child forgets its parent's
     * exports, imports and server. */
    int (*ipc_freed)(mem_valloc_t *a);
    void (*ipc_forget)(void);
} mem_vm_t;

extern mem_vm_t mem_vm;

/* vmm_core.c: the budget (a CUresult; *charged 0 when it passed
 * uncounted), and the physical memory of a chunk (create, map, set access). */
CUresult mem_vm_charge(int ordinal, uint64_t bytes, int *charged);
void mem_vm_uncharge(int ordinal, uint64_t bytes);
/* vmm_core.c's chunk cache (it says the rule), under mem_vm.lock: put a
 * freed big allocation's chunk (1 kept: its reservation, chunk and charge
 * stay; 0 the caller lets them go); take one of exactly `bytes`; release
 * one taken; drop every kept chunk of v (the bytes that were charged). */
int mem_vm_cache_put_locked(mem_vdev_t *v, const mem_valloc_t *a);
int mem_vm_cache_take_locked(mem_vdev_t *v, uint64_t bytes, mem_vcached_t *c);
void mem_vm_cache_release_locked(mem_vdev_t *v, const mem_vcached_t *c);
uint64_t mem_vm_cache_drop_locked(mem_vdev_t *v);
/* An allocation's charge waits under mem_vm.lock, where this process
 * cannot page itself out; so an allocation is tried with its wait set to
 * give up once stuck (mem_take_stuck_bail: every job holding memory waits
 * for more, under pack), and after the try, with mem_vm.lock released,
 * this says whether to try again: 1 once the process has paged itself out
 * and back in with room for `bytes` (mem_page_self_wait), or when nothing
 * could move (the next try then waits as any allocation, and is refused at
 * SALUS_MEM_WAIT_MS); 0 when done.  Set the wait before each try with
 * mem_vm_stuck_try(rounds). */
#define MEM_VM_STUCK_ROUNDS 64
void mem_vm_stuck_try(int rounds);
int mem_vm_stuck_retry(int ordinal, CUresult rc, uint64_t bytes, int *rounds);
CUresult mem_vm_back(mem_vdev_t *v, CUdeviceptr at, size_t bytes,
                     CUmemGenericAllocationHandle *out);
void mem_vm_unback(CUdeviceptr at, size_t bytes, CUmemGenericAllocationHandle h);
/* Push v's context for libsalus's own driver calls; pop it after. */
int mem_vm_enter(mem_vdev_t *v);
void mem_vm_leave(void);
/* The granule index range [first, last] of [p, p + n) in v's small region. */
static inline void mem_vm_granules(const mem_vdev_t *v, uint64_t p, uint64_t n,
                                   size_t *first, size_t *last)
{
    *first = (p - v->base) / v->gran;
    *last = (p + n - 1 - v->base) / v->gran;
}
/* vmm_alloc.c: the virtualized allocation holding p, or NULL. */
mem_valloc_t *mem_vm_find_locked(uint64_t p);
/* Whether cuIpcGetMemHandle can be answered for virtualized memory
 * (vmm_ipc.c): chunks have POSIX fds and the driver exports them. */
static inline int mem_vm_ipc_able(void)
{
    return !mem_vm.no_fd && mem_p.drv.mem_export_to_shareable_handle != NULL;
}
/* vmm_page.c: bring a paged-out small region back. */
CUresult mem_vm_small_in(mem_vdev_t *v, uint64_t *restored);
/* The device bytes paging v back in takes. */
uint64_t mem_vm_need_in(const mem_vdev_t *v);
/* Forget a big allocation's staged copy (freed while paged out). */
void mem_vm_drop_stage(mem_valloc_t *a);

/* vmm_alloc.c: a virtualized allocation of `size` bytes on `ordinal`
 * (CUDA_ERROR_NOT_SUPPORTED: paging could not start there), and the
 * release of one already out of mem_vm.allocs (its record stays the
 * caller's to free). */
CUresult mem_vm_alloc_locked(int ordinal, uint64_t size, CUdeviceptr *out);
void mem_vm_free_locked(mem_valloc_t *a);
/* vmm_async.c's stream-ordered frees, reached through these pointers
 * (vmm_core.c's; NULL until its first allocation) so that the files
 * beneath it need not name it: release those whose stream has passed
 * them, and forget them all in a fork child. */
typedef struct mem_vm_async_ops {
    void (*settle_locked)(void);
    void (*forget)(void);
} mem_vm_async_ops_t;
extern const mem_vm_async_ops_t *mem_vm_async;
static inline void mem_vm_async_settle_locked(void)
{
    const mem_vm_async_ops_t *o = __atomic_load_n(&mem_vm_async, __ATOMIC_ACQUIRE);
    if (o)
        o->settle_locked();
}

/* A test seam: called, when set, half-way through a page-out (the first
 * big allocation's chunk released and its budget returned, the others'
 * copies staged and still mapped) and a page-in (the first big
 * allocation's chunk charged and mapped again, its copy back submitted,
 * the staging of all still held), under mem_vm.lock, so that a test can
 * park the process there and SIGKILL it (test_memory_pagekill).  NULL in
 * every program. */
typedef enum mem_vm_phase { MEM_VM_HALF_OUT = 1, MEM_VM_HALF_IN } mem_vm_phase_t;
extern void (*mem_vm_phase_hook)(mem_vm_phase_t phase);

/* The process's work calls so far (mem_p.work_count), UINT64_MAX: unknown
 * (every allocation counts as written then). */
static inline uint64_t mem_vm_work_now(void)
{
    uint64_t (*fn)(void) = __atomic_load_n(&mem_p.work_count, __ATOMIC_ACQUIRE);
    return fn ? fn() : UINT64_MAX;
}

#endif /* SALUS_MEM_VMM_H */
