/*
 * memory.h - memory admission: the whole interface of src/memory.
 *
 * Every device allocation a process makes is accounted in the arbitration
 * table before it reaches the driver, against the process's limit
 * (SALUS_MEM_LIMIT) and the device's budget (capacity - SALUS_MEM_HEADROOM),
 * and given back when it is freed, when the driver refuses it, or when the
 * process dies.  Jobs that reserve memory (SALUS_MEM_RESERVE) are admitted
 * at context creation in arrival order, once their reservation fits, and
 * nobody else's allocations can take what they reserved.  cuMemGetInfo and
 * cuDeviceTotalMem answer each process's own view.
 *
 * The interception layer calls this module around the driver:
 *
 *   mem_op_t op;
 *   CUresult rc = mem_alloc_begin(MEM_KIND_DEVICE, -1, bytes, &op);
 *   if (rc != CUDA_SUCCESS) return rc;              // refused: no driver call
 *   rc = real_cuMemAlloc(&ptr, bytes);
 *   while (rc == CUDA_ERROR_OUT_OF_MEMORY && mem_alloc_retry(&op))
 *       rc = real_cuMemAlloc(&ptr, bytes);          // memory not given back yet
 *   return mem_alloc_end(&op, rc, ptr);             // accounts, or gives back
 *
 *   mem_free_begin(MEM_KIND_DEVICE, ptr, &op);      // unknown ptr: nothing
 *   rc = real_cuMemFree(ptr);
 *   mem_free_end(&op, rc);
 *
 * Until mem_init has been called, and whenever the table or the driver table
 * is unusable (said once), every function lets calls through uncounted.
 * Nothing here exits, aborts or blocks without bound, except a job waiting
 * for admission, which the user asked for with SALUS_MEM_RESERVE.
 *
 * Environment (read by mem_init; sizes take K/M/G/T = powers of 1024, or a
 * percentage):
 *   SALUS_MEM_LIMIT=<size|p%>     per process and device; p% of the budget
 *   SALUS_MEM_HEADROOM=<size|p%>  left to contexts; p% of the capacity
 *                                 (default 5%, within 256 MiB..4 GiB)
 *   SALUS_MEM_RESERVE=<size|p%>   guaranteed to the job; admission waits
 *   SALUS_MEM_WAIT_MS=<ms>        over the budget: wait for peers that long
 *   SALUS_SWAP=on|off             page out while not running (page.c)
 *   SALUS_SWAP_LIMIT=<size>       host memory paged to, per process
 */
#ifndef SALUS_MEMORY_H
#define SALUS_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "drv/drv.h"
#include "ipc/ipc.h"

/* The allocation paths; the interception layer's kinds, in its order. */
typedef enum mem_kind {
    MEM_KIND_DEVICE = 0,   /* cuMemAlloc_v2                    -> cuMemFree_v2 */
    MEM_KIND_PITCH,        /* cuMemAllocPitch_v2                -> cuMemFree_v2 */
    MEM_KIND_MANAGED,      /* cuMemAllocManaged                 -> cuMemFree_v2 */
    MEM_KIND_ASYNC,        /* cuMemAllocAsync                   -> cuMemFree[Async] */
    MEM_KIND_POOL,         /* cuMemAllocFromPoolAsync           -> cuMemFree[Async] */
    MEM_KIND_VMM,          /* cuMemCreate                       -> cuMemRelease */
    MEM_KIND_ARRAY,        /* cuArrayCreate_v2 / cuArray3DCreate_v2 -> cuArrayDestroy */
    MEM_KINDS
} mem_kind_t;


/* Start accounting for this process: read the environment, open the table
 * (`t`, or shm_process_table() when NULL) and keep a copy of the driver
 * contract `drv` (drv.h; the test seam).  Required: ctx_get_device and
 * device_total_mem; without the others the module does less (no true pitch
 * size, no undo of an allocation it cannot record, no check of what a gone
 * context took).  Once per process; later calls return the first one's
 * result.  0, or -1 when this process runs uncounted (said once, with why). */
int mem_init(const drv_t *drv, shm_table_t *t);

/* An operation in flight, on the caller's stack; opaque. */
typedef struct mem_op {
    uint64_t bytes;
    uint64_t handle;
    uint64_t need;         /* a pool's allocation: what its pool grows by */
    int32_t  dev;          /* table device index, -1: not accounted */
    uint16_t kind;
    uint8_t  state;
    uint8_t  pool;         /* the pool's record, 0: none */
    uint64_t refused_at;   /* the driver's first refusal (mem_alloc_retry), 0: none */
} mem_op_t;

/* The largest size memory accounts (a larger one is refused): 2^48 - 1. */
#define MEM_MAX_BYTES ((1ull << 48) - 1)

/* Where an allocation is charged (mem_alloc_begin's `device`): a CUDA
 * ordinal of this process, or one of these. */
#define MEM_DEV_CURRENT (-1)   /* the calling thread's current context's device */
#define MEM_DEV_NONE    (-2)   /* not device memory (a host-located cuMemCreate) */

/* The device of the work a stream queues, for the allocations ordered on it
 * (cuMemAllocAsync): its context's ordinal, asked of the driver (one call),
 * or MEM_DEV_CURRENT for the legacy and per-thread default streams (NULL
 * included), and when the driver cannot say. */
int mem_stream_device(CUstream stream);

/* Before an allocation of `bytes` on `device` (a MEM_DEV_*, or an ordinal).
 * MEM_DEV_NONE passes uncounted; an ordinal is charged even when the calling
 * thread has no current context.
 * CUDA_SUCCESS: call the driver, then mem_alloc_end.  Otherwise the call is
 * refused with that code (CUDA_ERROR_OUT_OF_MEMORY past a limit, after
 * SALUS_MEM_WAIT_MS if set) and the driver must not be called. */
CUresult mem_alloc_begin(mem_kind_t kind, int device, uint64_t bytes, mem_op_t *op);
/* After the driver call that returned `rc`, with the new pointer / handle /
 * array.  Returns what the caller must return: rc, or
 * CUDA_ERROR_OUT_OF_MEMORY when the allocation could not be recorded (it has
 * then been freed again). */
CUresult mem_alloc_end(mem_op_t *op, CUresult rc, uint64_t handle);
/* The driver refused (CUDA_ERROR_OUT_OF_MEMORY) an allocation the table had
 * room for: memory the table does not see, most often what a process that
 * has just ended has not given back yet (the driver frees it as the process
 * is torn down, after libsalus gave its slot back).  1: call the driver
 * again, after a short sleep and a fresh reading of its free memory, for up
 * to SALUS_MEM_WAIT_MS from the first refusal, as a shortage the table
 * sees waits; 0: the refusal stands (said once). */
int mem_alloc_retry(mem_op_t *op);
/* cuMemAllocPitch_v2 is reserved at width x height, then accounted at its
 * true size (pitch x height, from cuMemGetAddressRange_v2): what it takes
 * beyond is reserved after the call, and past a limit the allocation is
 * freed again and refused. */

/* Before and after the driver frees `handle` (a device pointer, a VMM handle
 * or an array, as `kind` says).  Unknown handles are left alone. */
void mem_free_begin(mem_kind_t kind, uint64_t handle, mem_op_t *op);
void mem_free_end(mem_op_t *op, CUresult rc);

/* Memory pools (pool.c).  A stream-ordered allocation is charged what its
 * pool must grow by (the pool's memory kept from earlier frees is taken
 * first), and a free leaves its bytes in the pool, charged, until the
 * driver says the pool released them: `pool` is cuMemAllocFromPoolAsync's,
 * or NULL for cuMemAllocAsync (the current pool of `device`, a MEM_DEV_* or
 * an ordinal: the stream's).  The end is mem_pool_alloc_end; the free is
 * mem_free_begin / mem_free_end as for any allocation. */
CUresult mem_pool_alloc_begin(mem_kind_t kind, CUmemoryPool pool, int device, uint64_t bytes,
                              mem_op_t *op);
CUresult mem_pool_alloc_end(mem_op_t *op, CUresult rc, uint64_t ptr);
/* After the driver answered: a pool made (host: located in host memory,
 * never charged) or named by a device's query (cuDeviceGetDefaultMemPool,
 * cuDeviceGetMemPool) on CUDA ordinal `device`; a device's current pool
 * set; a pool destroyed (what it kept goes back; its live allocations as
 * they are freed); an attribute set (the release threshold is followed); a
 * pool trimmed (its reserved memory is read again). */
void mem_pool_learn(CUmemoryPool pool, int device, int host);
void mem_pool_set_current(int device, CUmemoryPool pool);
void mem_pool_destroyed(CUmemoryPool pool);
void mem_pool_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, const void *value);
void mem_pool_trimmed(CUmemoryPool pool);
/* Graph memory (pool.c): a device keeps the memory of graphs' allocation
 * nodes reserved between launches, until cuDeviceGraphMemTrim, and it is
 * charged as the driver's CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT says.
 * Around cuGraphAddMemAllocNode of `bytes` on `device` (an ordinal, or
 * MEM_DEV_NONE): admitted, or refused (the driver is not called), then
 * charged as the driver says.  After a trim or a free node on `device` (-1:
 * every device with graph memory), it is read again. */
CUresult mem_graph_alloc_begin(int device, uint64_t bytes, mem_op_t *op);
void mem_graph_alloc_end(mem_op_t *op, CUresult rc);
void mem_graph_changed(int device);

/* After a stream, event or context synchronize that succeeded: the driver
 * may have released pools' memory down to their thresholds, and backed
 * graphs' allocations.  One load when the process has no pool. */
void mem_pools_sync(void);

/* VMM memory lives until its handle is released and its last mapping is
 * gone (vmm_handles.c): after the driver mapped handle `handle` at `key` (a
 * device address; cuMemMapArrayAsync: a sparse array's place, top bit set),
 * and after it unmapped every mapping whose key lies in [key, key + span).
 * A cuMemRelease (mem_free_*) of a mapped handle keeps its charge until
 * then. */
void mem_vmm_mapped(uint64_t key, uint64_t handle);
void mem_vmm_unmapped(uint64_t key, uint64_t span);

/* Admission on `device`, before the process makes a context there
 * (mem_context_begin: a job queued for admission holds no context's
 * memory) or at its first allocation there:
 * with SALUS_MEM_RESERVE, waits (state waiting-mem) until the job's
 * reservation fits, in arrival order (the policy's once paging is
 * possible: mem_set_admit_order); once per process and device.
 * Without a reservation but with paging on (SALUS_SWAP=on), the first
 * context a process makes on a device is admitted the same way
 * (mem_context_begin waits): see admit.c.
 * CUDA_ERROR_OUT_OF_MEMORY when it can never fit (said, with the sizes),
 * which the allocation then answers. */
CUresult mem_admit(CUdevice device);

/* At each iteration boundary of the process (the scheduler finds them; the
 * interception layer passes them on): the peak of the iteration that ended
 * becomes what the process keeps, while it runs, out of the grants and
 * admissions of its peers (mem_layout.h), so that memory it frees at its
 * iteration's end is still there for its next one.  Lock-free: a few
 * atomics per device the process uses. */
void mem_iteration_end(void);

/* After cuCtxDestroy, cuDevicePrimaryCtxRelease or ...Reset on `device`
 * (-1: any): the driver freed the allocations of the context that went
 * away, without a call this module sees.  Those the driver no longer knows
 * are given back.  Costs a driver query per live allocation of the device. */
void mem_context_gone(CUdevice device);

/* A context's life: created (cuCtxCreate,
 * on `device`), destroyed (-1: its device is not known), the primary
 * context retained, released or reset on `device`, a module loaded into
 * the current context (-1).  A context made or a module loaded charges
 * this process what the driver's free memory shows it took (measured once
 * per primary context, at the first retain); when the process has no
 * context left on a device, that charge goes (an unloaded module's stays
 * until then).  The charge is outside the
 * process's grant and SALUS_MEM_LIMIT, and inside the device's: grants never
 * pass the capacity less every context's memory and the use the driver
 * shows that no process accounts for. */
typedef enum mem_ctx_event {
    MEM_CTX_CREATED, MEM_CTX_DESTROYED, MEM_CTX_RETAINED, MEM_CTX_RELEASED, MEM_CTX_RESET,
    MEM_CTX_MODULE                 /* a module loaded into the current context */
} mem_ctx_event_t;
/* Around the driver call: begin before it (a context or module about to
 * be made takes its device's serial lock, ipc.h, so that no peer's is
 * made while this one is measured), end after it with its result. */
void mem_context_begin(mem_ctx_event_t ev, CUdevice device);
void mem_context_end(mem_ctx_event_t ev, CUdevice device, CUresult rc);

/* The process's own view, applied to what the driver answered:
 * total = its limit (or the budget), free = what it could allocate now;
 * never more than the driver said. */
void mem_view_info(size_t *free_bytes, size_t *total_bytes);
void mem_view_total(size_t *bytes, CUdevice device);
/* The same view of the device with this UUID (the table's identity of a
 * GPU, whatever its ordinal), for NVML: free and total as cuMemGetInfo_v2
 * would answer there (before the driver's clamp), used = what its
 * allocations hold, contexts = what its contexts take there (outside its
 * allocations, inside its limit: NVML's used is both).  0 and *out, or -1 when the process has no memory accounted on
 * that device (nothing is registered by asking). */
typedef struct mem_uuid_view {
    uint64_t free, total, used, contexts;
} mem_uuid_view_t;
int mem_view_uuid(const uint8_t uuid[16], mem_uuid_view_t *out);

/* The report's fields: "mem_used":N,"mem_peak":N,... (no braces); the
 * length as snprintf; 0 when the module is not active. */
int mem_report_fields(char *buf, size_t cap);

/* ---- paging (page.c): who pages and when ----------------------------------
 * With SALUS_SWAP=on a process that does not run can have its device memory
 * paged out to host memory and back, at the same addresses, before it runs
 * again.  The allocator moves the bytes; its primitives are this seam, run
 * in the process that owns the memory (tests swap them):
 *   page_out         copy to host staging, unmap, release, return the
 *                    budget; *freed: the bytes given back (want: at least)
 *   page_in          take the budget back, map, copy back; not
 *                    CUDA_SUCCESS when the budget is not there (the caller
 *                    waits, asking peers to page out); *restored: the
 *                    bytes brought back
 *   paged_out_bytes  what is paged out now on that CUDA ordinal
 *   resident_bytes   what is resident (may be NULL)
 * Until a pager is set, nobody pages and SALUS_SWAP changes nothing. */
typedef struct mem_pager {
    CUresult (*page_out)(int ordinal, uint64_t want, uint64_t *freed);
    CUresult (*page_in)(int ordinal, uint64_t *restored);
    uint64_t (*paged_out_bytes)(int ordinal);
    uint64_t (*resident_bytes)(int ordinal);
    uint64_t (*copied_bytes)(void);     /* optional: bytes copied so far, both ways */
} mem_pager_t;
/* Copied; NULL (or a pager without the first three) turns paging off. */
void mem_set_pager(const mem_pager_t *pager);

/* The policy's order on table device `device`: 0 for the holder, 1 + its
 * place among the waiters in the order the policy would grant them, -1 for
 * a process in neither.  The scheduler's (sched_rank_locked), which the
 * interception layer registers: memory asks the peers the policy runs last
 * to page out first.  Called under the table lock. */
typedef int (*mem_rank_fn)(shm_table_t *t, int device, int slot);
void mem_set_rank(mem_rank_fn fn);

/* A process whose allocation or admission waits for memory with paging on
 * queues for the device's GPU (sched_wait_mem, which the interception layer
 * registers) at each slice of its wait, outside the table lock: the holder
 * yields to it by the policy, and peers waiting at the gate are asked to
 * page out for it.  The wait goes on, whatever SALUS_MEM_WAIT_MS says, as
 * long as paging could free what it lacks. */
typedef void (*mem_gpu_wait_fn)(int ordinal);
void mem_set_gpu_wait(mem_gpu_wait_fn fn);
/* Its other half (sched_give_up_for_mem): once paging cannot free what such
 * a wait lacks (the memory is held by peers that cannot be paged now: full
 * staging, paging off, running), the process gives the device's GPU up if
 * it holds it, and leaves its queue, for the rest of that wait: held by a
 * job that cannot run, the GPU would idle while the jobs that hold the
 * memory wait for it (each could only free it by running to its end). */
void mem_set_gpu_give_up(mem_gpu_wait_fn fn);
/* Whether this process still holds the GPU of table device `d` (the
 * scheduler's sched_holds_gpu, which intercept registers; outside the
 * lock).  A page-in before a tenure waits only while it does: a waiter may
 * take the lease from a holder whose page-in waits (it looks idle), and a
 * page-in that went on without the lease would wait, unqueued and asking
 * nobody, for memory that only the new holder's peers give back. */
typedef int (*mem_gpu_held_fn)(int d);
void mem_set_gpu_held(mem_gpu_held_fn fn);
/* How a peer asked to page out is woken (the scheduler's sched_nudge, which
 * intercept registers): it waits for the GPU and serves requests when it
 * looks, so that a nudge saves the asker up to a poll.  Called under the
 * table lock. */
typedef void (*mem_nudge_fn)(shm_table_t *t, int slot);
void mem_set_nudge(mem_nudge_fn fn);
/* Under a policy that gates nothing (pack) no job waits at a gate, so none
 * can be asked to page out; when every job holding memory on a device
 * waits for more, the one that arrived last pages itself out from inside
 * its wait and waits for room to come back in.  Meanwhile its other
 * threads must not launch: `hold` (the scheduler's sched_hold_for_mem,
 * which intercept registers) holds them, on=1, returning 1 when held, and
 * lets them go, on=0, once the memory is back.  Outside the table lock.
 * Without it, such a deadlock ends at SALUS_MEM_WAIT_MS. */
typedef int (*mem_hold_fn)(int ordinal, int on);
void mem_set_hold(mem_hold_fn fn);

/* The policy's order of two processes waiting for admission on table device
 * `device` (the scheduler's, sched_admit_order_locked, which the interception
 * layer registers): <0 slot a is admitted first, >0 slot b, 0 the policy
 * does not tell them apart (arrival decides).  Followed once paging is
 * possible on the device (a live process there may be paged); without it,
 * admission goes in arrival order.  Called under the table lock. */
typedef int (*mem_admit_order_fn)(shm_table_t *t, int device, int a, int b);
/* enroll(ordinal): registers the process with the scheduler on that device
 * (sched_enroll) before it waits, without queueing it for the GPU: a job
 * waiting for admission has nothing to launch, and holding the GPU would
 * stall the jobs it waits for. */
void mem_set_admit_order(mem_admit_order_fn fn, void (*enroll)(int ordinal));

/* In this process while it waits for the GPU (the scheduler's wait loop
 * calls it at each look): page out what a peer asked of it, if anything.
 * One relaxed load when nothing is asked. */
void mem_page_serve(void);
/* Before this process runs on table device `device` (its tenure's first
 * launch): page back in what is paged out there, asking peers to page out
 * if the device lacks the room; waits until it is in, or until the GPU is
 * no longer this process's (mem_set_gpu_held): the scheduler then waits for
 * the GPU again and pages in at the next tenure. */
void mem_page_in_before_run(int device);
/* This process has memory paged out now (on any device): 1 or 0.  One
 * relaxed load. */
int mem_page_is_out(void);
/* This process holds table device `device` and the policy would hand it to
 * the process in `slot` at a boundary: 1 when it keeps it instead, since
 * it is within its minimum residency and that process has more paged out
 * than the device has room for (it could only come back by paging this
 * one out, not before the residency ends).  Under the table lock. */
int mem_page_keep_locked(shm_table_t *t, int device, int slot);
/* The process in `slot`, waiting for table device `device`'s GPU, has more
 * paged out than could come back there even were every other pageable
 * process paged out (contexts, pinned and non-pageable memory fill the
 * rest): 1, and the scheduler leaves it out of its candidates until the
 * jobs that hold that memory give it back.  Under the table lock. */
int mem_page_blocked_locked(shm_table_t *t, int device, int slot);

/* ---- charging, for the modules that hold memory of their own (src/vmem) ---
 * A physical chunk of libsalus's own allocator is charged as an allocation
 * of its size on CUDA ordinal `ordinal` would be (the limit, admission, a
 * wait while the device is full), with `flags` where an allocation's rules
 * do not fit:
 *   MEM_CHARGE_NOWAIT  refused at once where it would wait (a page-in: its
 *                      caller waits, holding nothing, and asks again)
 *   MEM_CHARGE_BAIL    a wait that finds itself stuck (every job holding
 *                      memory waits for more, under a policy that gates
 *                      nothing, and this one arrived last) gives up,
 *                      without a word: MEM_CHARGE_STUCK; the caller releases
 *                      its own locks, pages itself out and waits
 *                      (mem_page_self_wait_at), then tries again
 * The answer: MEM_CHARGED (give it back with mem_uncharge_at),
 * MEM_UNCOUNTED (the module is off or its lock unusable: it passes, and
 * nothing is to be given back), MEM_CHARGE_REFUSED (past a limit, said:
 * the program sees CUDA_ERROR_OUT_OF_MEMORY), MEM_CHARGE_STUCK. */
enum { MEM_CHARGE_NOWAIT = 1u << 0, MEM_CHARGE_BAIL = 1u << 1 };
typedef enum mem_charge {
    MEM_CHARGED = 0, MEM_UNCOUNTED, MEM_CHARGE_REFUSED, MEM_CHARGE_STUCK
} mem_charge_t;
mem_charge_t mem_charge_at(int ordinal, uint64_t bytes, unsigned flags);
void mem_uncharge_at(int ordinal, uint64_t bytes);
/* The driver refused a chunk that was charged (the table had room): as
 * mem_alloc_retry, 1 to call it again (after a short sleep and a fresh
 * reading), 0 once SALUS_MEM_WAIT_MS has passed since *refused_at (0: this
 * is the first refusal).  mem_charge_refresh: the driver gave it after a
 * refusal, the memory that held it is gone: read its free memory again. */
int mem_charge_retry(int ordinal, uint64_t bytes, uint64_t *refused_at);
void mem_charge_refresh(int ordinal);
/* What this process could still charge on `ordinal` now (dead peers'
 * memory reaped first): 0 and *room, or -1 when it runs uncounted. */
int mem_room_at(int ordinal, uint64_t *room);
/* A peer waits for memory on `ordinal` now: 1 or 0.  One relaxed load. */
int mem_waited_on(int ordinal);
/* What paging cannot move in this process (exported over CUDA IPC), for
 * monitors and paging's rules: `bytes` on `ordinal` (-1 or 0 bytes: none). */
void mem_set_pinned(int ordinal, uint64_t bytes);
/* MEM_CHARGE_STUCK's answer, with every lock of the caller released: page
 * this process out on `ordinal`, its launches held, wait for room for it
 * and `bytes`, and page back in.  0: charge again; -1: nothing could move
 * (the next charge waits as any allocation). */
int mem_page_self_wait_at(int ordinal, uint64_t bytes);
/* This process's allocations are counted (mem_init succeeded, and nothing
 * has made it pass through since): 1 or 0.  mem_swap_wanted: and
 * SALUS_SWAP=on.  mem_driver: the driver table mem_init was given (kept
 * even when the process runs uncounted), NULL before (the allocator above
 * copies it). */
int mem_active(void);
int mem_swap_wanted(void);
const drv_t *mem_driver(void);

/* ---- monitors (salus-top): validated copies, read without the lock ------ */
typedef struct mem_slot_view {
    uint64_t used, peak, limit, reserved, granted;   /* over the slot's devices */
    uint64_t ctx;            /* what its contexts and modules take there: with
                              * used, what its limit bounds (used leaves it out) */
    uint64_t run_peak;       /* its last whole iteration's peak (mem_iteration_end) */
    uint64_t swapped_out;    /* paged out to the host now */
    uint64_t swap_outs, swap_ins, swap_ms;   /* page-outs, page-ins, time both took */
    uint64_t pinned;         /* paging cannot move it: exported over CUDA IPC */
    int32_t  paging;         /* 1 paging out or in now, 0 not */
    uint64_t oom_refusals, waited_ms;
    uint32_t devices;        /* bit d: has memory on table device d (a context
                              * at least: NVML lists it there, as the driver's
                              * own process list does) */
    uint32_t uses;           /* bit d: allocated, reserved or waits for memory
                              * there, not merely a context (salus-top's rows) */
    int32_t  waiting_device; /* table device index, or -1 */
    int32_t  waiting_admission;  /* 1: waiting to be admitted; 0: for memory */
} mem_slot_view_t;

typedef struct mem_device_view {
    uint8_t  uuid[16];
    uint64_t capacity, headroom, budget;
    uint64_t used, granted, reserved, committed;     /* over live slots */
    uint64_t ctx;            /* the live slots' contexts and modules (not in used) */
    uint64_t foreign;        /* what the driver last showed beyond the table */
    uint32_t waiters, queued;                        /* queued: for admission */
} mem_device_view_t;

/* 0 and *out filled, or -1 (slot free, device never used, or inconsistent). */
int mem_view_slot(shm_table_t *t, int slot, mem_slot_view_t *out);
int mem_view_device(shm_table_t *t, int device, mem_device_view_t *out);

/* Set the memory limit of the process in (slot, gen) on each of its devices
 * (salus limit): `text` in the size grammar (util_parse_size; a percentage
 * of each device's budget; 0 is refused).  Below what it holds, the
 * limit stops its growth until it has freed below it (account.c); with
 * paging on, what it pages out comes back in only within the limit
 * (page.c: until then it leaves the GPU).  0 and *out (its figures when
 * the limit came; limit: the new one, on its last device; paged_out: what
 * it has paged out now, over its devices; pages: 1 when it runs with
 * SALUS_SWAP=on), -EINVAL (text), -EBUSY (below its reservation), -EDOM
 * (below what it can never free while it runs, its contexts and
 * reservation: every allocation would be refused; *out is written, floor
 * says how much;
 * MEM_LIMIT_FORCE in `flags` sets it anyway), -ESRCH (gone), -ENODEV (no
 * device yet), or the lock's error.  Below what it holds, a running job
 * goes on up to its last iteration's peak, and the limit takes hold as that
 * peak falls (livelim.c). */
#define MEM_LIMIT_FORCE 1u
typedef struct mem_limit_change {
    uint64_t used, reserved, limit, paged_out;
    uint64_t floor;           /* its contexts and reservation, on the device named */
    uint64_t ctx;             /* its contexts and modules (the limit bounds them too) */
    int devices, pages;
} mem_limit_change_t;
int mem_set_limit_table(shm_table_t *t, int slot, uint32_t gen, const char *text,
                        unsigned flags, mem_limit_change_t *out);

#endif /* SALUS_MEMORY_H */
