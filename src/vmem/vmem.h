/*
 * vmem.h - the virtualized allocator: the whole interface of src/vmem.
 *
 * With SALUS_SWAP=on a process's device memory is served from address
 * ranges libsalus reserves and backs itself through the driver's VMM calls,
 * so that its physical memory can be paged out to pinned host memory and
 * back in at the same addresses (vmem_int.h says how).  This module moves
 * the bytes and keeps the maps; who pages and when is src/page's (the
 * module above, which calls vmem_page_* and the allocations' tries), what
 * may be charged is
 * src/memory's: every physical chunk is charged through
 * memory.h (mem_charge_at / mem_uncharge_at) when made, and given back when
 * released.  Its driver calls go to its own copy of the driver table
 * (drv.h), taken from memory's when paging starts.
 *
 * Depends on memory.h and drv.h only.  Every function is safe to call with
 * paging off (one relaxed load).  Lock: vmem_p.lock (vmem_int.h), rank 4 of
 * docs/hacking.md's lock order.
 */
#ifndef SALUS_VMEM_H
#define SALUS_VMEM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "drv/drv.h"
#include "memory/memory.h"

/* ---- virtualized allocations (alloc.c, swap.c) ---------------------------
 * With SALUS_SWAP=on, the process's cuMemAlloc_v2 and cuMemAllocPitch_v2
 * are served from device ranges libsalus reserves and backs itself (VMM),
 * so that their memory can be paged out to pinned host memory and back in
 * at the same addresses, and so are stream-ordered allocations from a
 * device's default pool (async.c, below).  Other pools, managed
 * memory, arrays and the program's own VMM handles stay ordinary and
 * resident.  Every function is safe to call with paging off. */

/* 1 when this process's allocations are virtualized. */
int vmem_on(void);
/* cuMemAlloc_v2 (kind DEVICE: width bytes) or cuMemAllocPitch_v2 (PITCH:
 * rows of width bytes, height of them, elements of elem bytes; *pitch
 * written), virtualized, in the current context's device.
 * CUDA_ERROR_NOT_SUPPORTED: not virtualized (no context, paging could not
 * start there): the caller goes to the driver; anything else is the answer. */
CUresult vmem_alloc(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                    size_t height, unsigned elem);
/* The same, one try, for paging (page.h's page_valloc, which drives the
 * retries): with `bail`, a charge that finds the process stuck (every job
 * holding memory on the device waits for more, under a policy that gates
 * nothing, and this one arrived last: memory.h's MEM_CHARGE_BAIL) gives
 * up, and the answer is CUDA_ERROR_OUT_OF_MEMORY with st->stuck = 1, the
 * ordinal and the bytes it was for: the caller pages the process out,
 * waits for room and tries again.  vmem_alloc never bails. */
typedef struct vmem_stuck {
    int stuck, ordinal;
    uint64_t bytes;
} vmem_stuck_t;
CUresult vmem_alloc_try(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                        size_t height, unsigned elem, int bail, vmem_stuck_t *st);
/* 1 once paging has started on some device of this process (its first
 * virtualized allocation there): from then on vmem_page_* page it. */
int vmem_pageable(void);
/* cuMemFree_v2 of p: 1 and *rc when p is a virtualized allocation (freed),
 * 0 when it is not (the driver's). */
int vmem_free(CUdeviceptr p, CUresult *rc);
/* cuMemGetAddressRange_v2 of p: 0 with the allocation's own base and size
 * (each out-parameter may be NULL) when p lies in a virtualized allocation,
 * -1 otherwise (the driver answers). */
int vmem_range(CUdeviceptr p, CUdeviceptr *base, size_t *size);
/* After the driver answered cuPointerGetAttribute: 1 when memory wrote
 * *data over its answer for a virtualized allocation (range start and
 * size, context, buffer id, legacy IPC capability: libsalus's handles
 * below; allowed handle types: none, as cuMemAlloc's memory), 0 when the
 * driver's answer stands. */
int vmem_attr(void *data, CUpointer_attribute attr, CUdeviceptr p);
/* The report's fields (intercept's SALUS_REPORT), as snprintf: with paging
 * on, "paged_allocs", the allocations paging has served; nothing when off. */
int vmem_report_fields(char *buf, size_t cap);

/* ---- CUDA IPC on paged memory (ipc.c) ------------------------------------------------
 * The driver makes no legacy IPC handle for VMM memory, so libsalus makes
 * its own: cuIpcGetMemHandle of a virtualized allocation pins it resident
 * and writes a handle naming this process and the allocation; the
 * cuIpcOpenMemHandle of a process with libsalus (paging on or off) that
 * receives it obtains the allocation's physical chunks from this process
 * as POSIX file descriptors over a unix socket and maps them.  Each returns
 * 1 and *rc when memory answered, 0 when the driver answers (a pointer
 * that is not virtualized, a handle or address that is not libsalus's). */
int vmem_ipc_get(CUipcMemHandle *handle, CUdeviceptr p, CUresult *rc);
int vmem_ipc_open(CUdeviceptr *out, const CUipcMemHandle *handle, unsigned int flags,
                 CUresult *rc);
int vmem_ipc_close(CUdeviceptr p, CUresult *rc);

/* ---- stream-ordered allocations (async.c) --------------------------------
 *   With paging on,
 * cuMemAllocAsync (pool NULL: the current pool) and cuMemAllocFromPoolAsync
 * (pool named) of `bytes` ordered on a stream of `device` (mem_stream_device)
 * are virtualized when: the stream's device is the current context's, the
 * pool is that device's default pool (named, or current: the program set
 * no other with cuDeviceSetMemPool), the program gave no other device
 * access to it (cuMemPoolSetAccess), and no stream capture is in progress
 * in the process (the caller checks: a captured allocation is a graph's,
 * and stays the driver's).  Pools the program made stay the driver's
 * (memory's pool.c), IPC-exportable ones among them.
 * CUDA_ERROR_NOT_SUPPORTED: not virtualized, the caller goes to the driver
 * (mem_pool_alloc_begin);
 * anything else is the answer.  The memory is usable from every stream at
 * once, charged as cuMemAlloc_v2's is (its chunks), and freed by
 * vmem_free (cuMemFree_v2) or: */
CUresult vmem_alloc_async(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device);
/* Its one try, as vmem_alloc_try (page.h's page_valloc_async). */
CUresult vmem_alloc_async_try(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device,
                              int bail, vmem_stuck_t *st);
/* cuMemFreeAsync of p on `stream` (the per-thread stream named as
 * CU_STREAM_PER_THREAD): 1 and *rc when p is virtualized, 0 when it is not
 * (the driver's).  Its memory is released once the work queued on the
 * stream before this call has completed (an event of libsalus's own,
 * looked at by later allocations, synchronizations, trims and page-outs);
 * `captured` (the stream is capturing): the free cannot be ordered, and
 * the allocation stays live until the process ends (said once). */
int vmem_free_async(CUdeviceptr p, CUstream stream, int captured, CUresult *rc);
/* Release the stream-ordered frees whose streams have passed them; one
 * relaxed load when none is waiting.  After synchronizations and trims. */
void vmem_async_settle(void);
/* Before a context may go (cuCtxDestroy, a primary context released or
 * reset): the frees waiting for their streams are waited for, and
 * libsalus's events destroyed, so that none outlives its context. */
void vmem_async_context_ending(void);
/* The frees waiting for their streams (tests, figures). */
size_t vmem_async_pending(void);
/* After the driver accepted cuDeviceSetMemPool(device, pool) and
 * cuMemPoolSetAccess(pool, ...): whether the device's stream-ordered
 * allocations are still from its default pool, and only its own. */
void vmem_async_pool_set(int device, CUmemoryPool pool);
void vmem_async_pool_access(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count);

/* The primitives of paging, run in the process that owns the memory while
 * its program is stopped (at the gate, or at rest with its work drained),
 * never during a stream capture (they synchronize the context).
 *
 * vmem_page_out: copy the live contents of the process's virtualized memory
 * on CUDA ordinal `ordinal` to pinned host staging (bounded by
 * SALUS_SWAP_LIMIT), release the physical memory and give its budget back:
 * big allocations largest first, then the small allocations' region, until
 * `want` bytes are freed (0: all).  *freed: the device bytes released (may
 * be less than asked: the staging bound, or nothing virtualized there).
 * vmem_page_in: take the budget back (may be refused with
 * CUDA_ERROR_OUT_OF_MEMORY at once when the device has no room for it now,
 * never waiting, or another code: wait and ask again; big allocations come
 * back all or none, a small region first, whole), map new
 * physical memory at the same addresses and copy
 * the contents back.  *restored: the device bytes taken.  An allocation
 * freed while out drops its copy; a small allocation made while the region
 * is out pages it in first; a big one gets a chunk of its own.
 * vmem_paged_out_bytes: the device bytes that are out (what paging them back
 * in takes: their chunks); vmem_resident_bytes: the physical bytes of
 * virtualized memory on the device.  Once this process has virtualized
 * memory (vmem_pageable), src/page pages through these. */
CUresult vmem_page_out(int ordinal, uint64_t want, uint64_t *freed);
/* How long vmem_page_out waits for the program's work on the device to end
 * (its context synchronize, on a thread of its own, holding no lock):
 * past it, the page-out is skipped with CUDA_ERROR_NOT_READY, and so is
 * every page-out asked while that synchronize has not returned.  Work that
 * waits on another process (an NCCL collective, cuStreamWaitValue32) may
 * never end while this one waits.  VMEM_QUIESCE_NS; tests shorten it. */
#define VMEM_QUIESCE_NS (2000ull * 1000000)
extern uint64_t vmem_quiesce_ns;
CUresult vmem_page_in(int ordinal, uint64_t *restored);
uint64_t vmem_paged_out_bytes(int ordinal);
uint64_t vmem_resident_bytes(int ordinal);
/* The bytes paging has copied in this process so far, both ways (memory
 * never written moves without a copy). */
uint64_t vmem_copied_bytes(void);

/* The scheduler's drain thread looks (sched_hooks_t's tick): freed chunks
 * that paging's allocator keeps for reuse (core.c) go once past their
 * time, or at once while a peer waits for memory; the ns until the next
 * look it wants (0: none kept).  Never blocks: a look that finds the
 * allocator busy comes back soon.  Until it is first called nothing is
 * kept (nobody would let it go). */
uint64_t vmem_keep_tick(void);

/* How many calls that can write device memory (launches, copies, memsets)
 * the process has made so far (the interception layer's count): a large
 * virtualized allocation made since the last of them was never written,
 * and paging neither copies it out nor back.  NULL: unknown (every
 * allocation counts as written). */
typedef uint64_t (*vmem_work_count_fn)(void);
void vmem_set_work_count(vmem_work_count_fn fn);

#endif /* SALUS_VMEM_H */
