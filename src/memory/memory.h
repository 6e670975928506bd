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
 *   SALUS_SWAP=on|off             page out while not running (src/page)
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
 * possible: mem_paging_t's admit_order); once per process and device.
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

/* ---- for paging (src/page, the module above this one) ----------------------
 * With SALUS_SWAP=on a process that does not run can have its device memory
 * paged out to host memory and back (page.h says who pages and when).  Its
 * words live in this module's slot area; page reads and writes them through
 * these, never through this module's structs.
 *
 * The calls up that are left (issue 25), one table that page sets at its
 * start (page_start) and with its pager: this module's own waits for
 * memory (an allocation's, an admission's) ask, at each look and under the
 * table lock, whom to ask to page out (ask: what is asked of peers for
 * `need` bytes on table device d, 0: nobody), what paging could free there
 * (movable; *now: the part that may be asked now) and whether the wait is
 * stuck (page's rule); outside the lock, at each slice, they queue for the
 * device's GPU (queue: the holder yields to the waiter by the policy, and
 * peers waiting at the gate can be asked to page out for it) or leave it
 * (give_up: once paging cannot free what the wait lacks, held by a job that
 * cannot run the GPU would idle while the jobs that hold the memory wait
 * for it), both by CUDA ordinal and only while ask is set (paging on); an
 * admission orders its waiters by the policy once paging is possible on
 * the device (admit_order, under the lock: <0 slot a first, >0 slot b, 0
 * arrival decides) and registers the process with the scheduler before it
 * waits, without queueing it for the GPU (enroll).  A NULL member: nobody
 * to ask, nothing movable, never stuck, no queue, arrival order, no
 * enrolment; NULL: all of them.  The waits go on, whatever
 * SALUS_MEM_WAIT_MS says, as long as paging could free what they lack. */
typedef struct mem_paging {
    uint64_t (*ask)(int d, uint64_t need);
    uint64_t (*movable)(int d, uint64_t *now);
    int (*stuck)(int d, uint64_t bytes);
    void (*queue)(int ordinal);
    void (*give_up)(int ordinal);
    int (*admit_order)(shm_table_t *t, int d, int a, int b);
    void (*enroll)(int ordinal);
} mem_paging_t;
void mem_set_paging(const mem_paging_t *p);

/* The own slot's paging flags, as peers see them. */
#define MEM_PAGE_ABLE     1u   /* SALUS_SWAP=on and a pager: peers may ask it */
#define MEM_PAGE_FULL     2u   /* could not serve a request: not asked until it pages in */
#define MEM_PAGE_OUT_BUSY 4u   /* paging out now */
#define MEM_PAGE_IN_BUSY  8u   /* paging in now */
#define MEM_PAGE_SWAP     16u  /* SALUS_SWAP=on (with or without a pager yet): the
                                  device's admission follows the policy (admit.c) */
/* SALUS_SWAP=on was read (whether the module counts or not). */
int mem_swap_configured(void);
/* The table mem_init opened (NULL before), this process's slot (-1);
 * whether its slot's area is registered (its first device): 1 or 0. */
shm_table_t *mem_table(void);
int mem_self_slot(void);
int mem_registered(void);
/* Table device d's CUDA ordinal in this process (-1: not registered); an
 * ordinal's table device (-1); d's name for messages ("CUDA device <n>
 * (GPU-<uuid>)", or "a device"). */
int mem_ordinal_at(int d);
int mem_device_at(int ordinal);
const char *mem_device_name(int d);
/* Paging can page this process (it has a pager): MEM_PAGE_ABLE follows,
 * now and when the slot registers (mem_page_flags_apply). */
void mem_page_set_able(int able);
void mem_page_flags_apply(void);
/* The own slot's MEM_PAGE_* flags (0 before it registers); set or clear
 * bits (relaxed: the owner's). */
uint32_t mem_page_flags(void);
void mem_page_flags_set(uint32_t bits);
void mem_page_flags_clear(uint32_t bits);
/* The request peers raised on this process: bytes to page out (0: none)
 * on table device *d (-1: none valid); served: cleared if it is still
 * `want` (a larger request made meanwhile stays); dropped at a tenure. */
uint64_t mem_page_request(int *d);
void mem_page_request_served(uint64_t want);
void mem_page_request_drop(void);
/* The own slot's counters: a page-out (in = 0) or page-in of `bytes` that
 * took `ns`; not asked before CLOCK_MONOTONIC `ns`; what is paged out now
 * (over its devices) and, if has_copied, what paging has copied so far. */
void mem_page_counted(int in, uint64_t bytes, uint64_t ns);
void mem_page_resident_until(uint64_t ns);
void mem_page_publish(uint64_t out, int has_copied, uint64_t copied);
uint64_t mem_page_out_now(void);
/* A validated copy of slot j's paging state on table device d: 0 and *p
 * when its area is registered and its process alive, else -1.  used is
 * bounded (0 for a scribbled grant), pinned <= used; the rest as read. */
typedef struct mem_page_peer {
    uint32_t flags;           /* MEM_PAGE_* */
    uint64_t used, pinned;    /* on d; pinned: exported over CUDA IPC, cannot move */
    uint64_t resident_until;  /* not asked before (CLOCK_MONOTONIC ns) */
    uint64_t swapped_out;     /* over its devices, unbounded: check it */
    uint64_t run_peak, limit; /* on d */
    uint64_t ctx;             /* its contexts' charge on d */
    int waits_here;           /* waits for memory on d */
    uint64_t wait_bytes;      /* what it waits for */
} mem_page_peer_t;
int mem_page_peer(shm_table_t *t, int d, int j, mem_page_peer_t *p);
/* Slot j's swapped_out word as it reads, no liveness test (a system call):
 * a slot with nothing out needs no more looking at.  0 for a slot without
 * a registered area. */
uint64_t mem_page_peer_out(shm_table_t *t, int j);
/* Under the lock: raise slot j's request to page out to `want` on table
 * device d; what is pending now; *raised: 1 when it was raised (the asker
 * wakes it). */
uint64_t mem_page_ask_slot_locked(shm_table_t *t, int j, int d, uint64_t want, int *raised);
/* Table device d's figures, over the live slots but `skip`, under the
 * lock: 0 and *f, -1 (no such device). */
typedef struct mem_page_dev {
    uint64_t budget, foreign;  /* foreign bounded */
    uint64_t largest_seen;     /* the largest peak a job reached here (0: unknown) */
    uint64_t effective;        /* the budget less every context (skip's too) and foreign */
    uint64_t held;             /* the others' max(used, reserved) */
} mem_page_dev_t;
int mem_page_dev_locked(shm_table_t *t, int d, int skip, mem_page_dev_t *f);
/* The table lock (and the reclaim log's repair on d): 0, or -1 when it is
 * out of reach (said); unlock.  Room for this process on d under it. */
int mem_page_lock(int d);
void mem_page_unlock(void);
uint64_t mem_room_of_locked(int d);
/* Table device d's wake word (bumped when memory is returned): its value,
 * a bump, whether anyone waits, a sleep on it (outside the lock). */
uint32_t mem_wake_seq_of(int d);
void mem_wake_of(int d);
int mem_waited_at(int d);
void mem_wake_wait(int d, uint32_t seq, uint64_t max_ns);
/* Paging's own wait for memory on d, as an allocation's (the slot shows
 * waiting-mem): enter under the lock, the bytes it waits for (peers read
 * them), leave (locked: publish the sums); sleep on the wake word with the
 * lock released, 0 with it held again, -1 when it cannot be taken. */
void mem_page_wait_enter_locked(int d, uint64_t bytes);
void mem_page_wait_bytes(uint64_t bytes);
void mem_page_wait_leave(int d, uint64_t since, int locked);
int mem_page_sleep_unlocked(int d, uint32_t seq, uint64_t max_ns);

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
 *                      (page.h's page_self_wait), then tries again
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
/* Pinned host staging, bounded for all processes of the table together
 * (src/vmem's SALUS_SWAP_LIMIT; pagestate.c).  mem_stage_reserve: this
 * process reserves `bytes` in all, judged under the table lock against
 * what the others have reserved (their sum into *others, as judged):
 * MEM_STAGE_TAKEN (now its reservation), MEM_STAGE_FULL (others + bytes
 * would pass `limit`; its reservation unchanged), MEM_STAGE_UNCOUNTED (no
 * table or its lock unusable: judge alone).  mem_stage_release: it needs
 * none now.  mem_stage_others: the others' reservations, read without
 * the lock (a snapshot, for what may be kept beside them). */
typedef enum mem_stage {
    MEM_STAGE_TAKEN, MEM_STAGE_FULL, MEM_STAGE_UNCOUNTED
} mem_stage_t;
mem_stage_t mem_stage_reserve(uint64_t bytes, uint64_t limit, uint64_t *others);
void mem_stage_release(void);
uint64_t mem_stage_others(void);
/* What paging cannot move in this process (exported over CUDA IPC), for
 * monitors and paging's rules: `bytes` on `ordinal` (-1 or 0 bytes: none). */
void mem_set_pinned(int ordinal, uint64_t bytes);
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
 * (src/page: until then it leaves the GPU).  0 and *out (its figures when
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
