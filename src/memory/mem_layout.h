/*
 * mem_layout.h - the memory module's bytes in the arbitration table and its
 * process-local state; private to src/memory (and its tests).
 *
 * Shared, in the table's per-module areas:
 *   slot area   mem_slot_t: per device, the process's grant, its spare
 *               (avail), reservation, limit and peak; its wait; counters.
 *   device area mem_dev_t (index from shm_device_index_locked): capacity, budget; the futex word
 *               frees bump when someone waits; the admission ticket counter;
 *               a reclaim log; sums cached for monitors.
 *
 * A process holds a grant of device budget per device, taken and returned
 * under the table's lock in chunks; its allocations are taken from the spare
 * part of the grant (avail) with a compare-and-swap and need no lock.
 *
 * Invariants, for every device d, between operations under the table lock
 * (live = slot not free; a dead slot counts until reaped):
 *   sd.used      := sd.granted - spare(sd.avail)           (>= 0)
 *   sd.used      == sum of the process's live allocations on d, but its
 *                   pools' (map.c)
 *                   + those between mem_alloc_begin and mem_alloc_end
 *                   + released VMM handles still mapped (mem_vmm_kept)
 *                   + the charged bytes of its pools on d (pool.c: their
 *                     live allocations plus their slack)
 *                   + its graph memory on d (graph_charged)
 *   sd.granted   <= sd.limit
 *   sum over live slots of max(sd.granted, sd.reserved)  <= dev.budget
 *   dev.budget   <= dev.capacity < 2^48
 *   sd.reserved  >  0  only once the job is admitted on d
 * Not an invariant but a rule of every grant and admission: a peer that
 * runs (not waiting for the GPU or for memory) keeps max(sd.run_peak,
 * sd.used, sd.reserved) of the budget out of the others' reach, so that
 * what it freed at its iteration's end is there for its next iteration.
 *   dev.log.valid == 0 (at every unlock: a live reclaimer clears it)
 * Device-wide sums are never kept as the truth: they are recomputed from the
 * live slots under the lock, so a slot freed by any process (with or without
 * this module's reap hook) drops out of them at once, exactly.
 * mem_check_locked (check.c) checks all but the second, which only the
 * process itself can count: it does (mem_local_dev_t.charged), and checks
 * its own slot's grant, spare word and limit against its record each time
 * it takes the lock (owncheck.c), so that a word written by something else
 * is repaired there.
 */
#ifndef SALUS_MEM_LAYOUT_H
#define SALUS_MEM_LAYOUT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "util/atomic.h"
#include "memory/memory.h"
#include "memory/mem_map.h"

#define MEM_SLOT_MAGIC   0x314d454du   /* "MEM1" */
#define MEM_DEV_MAGIC    0x31564544u   /* "DEV1" */

/* avail = tag (16 bits) | spare bytes (48 bits).  Only reclaimers change
 * the tag; the owner's compare-and-swaps and additions keep it. */
#define MEM_SPARE_BITS   48
#define MEM_SPARE_MASK   ((1ull << MEM_SPARE_BITS) - 1)
_Static_assert(MEM_MAX_BYTES == MEM_SPARE_MASK, "memory.h's bound is the spare's field");
#define MEM_TAG(w)       ((uint32_t)((w) >> MEM_SPARE_BITS))
#define MEM_SPARE(w)     ((w) & MEM_SPARE_MASK)

#define MEM_SDEV_REGISTERED 1u
#define MEM_SDEV_ADMITTED   2u

enum { MEM_WAIT_NONE = 0, MEM_WAIT_ADMIT = 1, MEM_WAIT_ALLOC = 2 };

/* One process on one device. */
typedef struct mem_sdev {
    uint64_t avail;        /* tag | spare: CAS by owner, CAS by reclaimers (locked) */
    uint64_t granted;      /* under lock (atomic stores for monitors) */
    uint64_t reserved;     /* admitted reservation; under lock */
    uint64_t limit;        /* written at registration */
    uint64_t peak;         /* highest used seen; owner, atomic max */
    uint64_t run_peak;     /* highest used in its last whole iteration; owner, at
                              each iteration boundary (mem_iteration_end) */
    uint32_t granted_tag;  /* tag of the last reclaim applied to granted */
    uint32_t flags;        /* MEM_SDEV_* */
} mem_sdev_t;

/* page_flags: memory.h's MEM_PAGE_* (src/page sets them, pagestate.c) */

typedef struct mem_slot {
    uint32_t magic;        /* MEM_SLOT_MAGIC once the process registered */
    uint32_t wait_dev;     /* 0: not waiting; else table device + 1 */
    uint32_t wait_kind;    /* MEM_WAIT_* */
    uint32_t wait_ticket;  /* admission: arrival order on wait_dev */
    uint64_t wait_bytes;
    uint64_t oom_refusals;
    uint64_t waited_ns;
    /* Paging (src/page, through pagestate.c).  The request words are raised by peers under the
     * table lock and cleared by the owner; the rest is the owner's. */
    uint32_t page_flags;   /* MEM_PAGE_* */
    uint32_t page_req_dev; /* the device of the request: table device + 1 */
    uint64_t page_req_bytes;       /* 0: no request; else what to page out */
    uint64_t page_resident_until;  /* CLOCK_MONOTONIC ns: not asked before */
    uint64_t swapped_out;  /* bytes paged out now, over its devices */
    uint64_t swap_outs, swap_ins, swap_bytes, swap_ns;   /* counters, both ways */
    mem_sdev_t dev[SHM_MAX_DEVICES];
    /* Memory that paging cannot move: virtualized allocations exported
     * over CUDA IPC (vmm_ipc.c), on table device pinned_dev - 1 (0: none).
     * The owner's; paging leaves it out of what a peer can page out. */
    uint64_t pinned;
    uint32_t pinned_dev;
    /* The pinned host staging this process has reserved for paging out, in
     * MiB, rounded up (src/vmem: all it could be asked to stage, from its
     * first page-out until it is all back in), judged against the others'
     * under the table lock (pagestate.c).  The owner's.  It was padding,
     * always 0, before: a process of an earlier version reserves nothing. */
    uint32_t staging_mib;
    /* Of swap_bytes, what paging copied (both ways): memory never written
     * moves without a copy (vmm_page.c).  The owner's, relaxed. */
    uint64_t swap_copied;
} mem_slot_t;

/* Written under the lock before a reclaimer changes another slot's avail
 * and granted, cleared after: a reclaimer that dies between the two leaves
 * what the next locker needs to finish its work (mem_fix_log). */
typedef struct mem_reclaim_log {
    uint32_t valid;
    int32_t  slot;
    uint32_t slot_gen;
    uint32_t tag;          /* the tag the reclaim's CAS writes */
    uint64_t take;
} mem_reclaim_log_t;

typedef struct mem_dev {
    /* Read by every free (waiters), written when someone waits. */
    uint32_t wake_seq;     /* futex word: bumped when memory is returned */
    uint32_t waiters;      /* slots waiting on this device (recomputed, locked) */
    /* futex word: bumped when the admission queue's head may change (a
     * waiter left it, admitted or dead); the waiters behind the head sleep
     * on it, not on wake_seq, which every free bumps. */
    uint32_t admit_seq;
    uint8_t  pad0[52];
    /* Under the lock. */
    uint32_t magic;        /* MEM_DEV_MAGIC once registered */
    uint32_t next_ticket;  /* admission arrival order */
    uint64_t capacity, headroom, budget;
    mem_reclaim_log_t log;
    /* What the driver says is taken and no live slot accounts for (other
     * processes, modules, heaps), as of the last reading (ctxmem.c). */
    uint64_t foreign;
    /* The last context measured here: what a job admitted before its
     * context is made must leave room for. */
    uint64_t ctx_last;
    /* What each slot's contexts and modules take here, measured from the
     * driver (ctxmem.c), in KiB, outside its grant: counted for a live slot
     * registered here only (a slot's area is zeroed when it is claimed, a
     * device's is not: registration zeroes its entry). */
    uint32_t ctx_kib[SHM_MAX_SLOTS];
    /* Cached for monitors after each locked change. */
    uint64_t sum_granted, sum_used, sum_reserved, sum_committed;
    uint32_t queued;
    /* The largest peak a job has reached here since the table was made, in
     * MiB (raised under the lock, never lowered): with paging on, what
     * admission assumes a job whose peak is not known yet may need. */
    uint32_t peak_mib;
    uint64_t sum_ctx;
} mem_dev_t;

_Static_assert(sizeof(mem_slot_t) <= SHM_SLOT_AREA_BYTES, "mem slot area");
_Static_assert(sizeof(mem_dev_t) <= SHM_DEVICE_AREA_BYTES, "mem device area");

/* ---- process-local state (memory.c) ------------------------------------- */

#define MEM_MAX_ORDINALS 64

typedef struct mem_local_dev {
    mem_sdev_t *sd;        /* own slot's record; NULL until registered (acquire) */
    mem_dev_t *dev;
    int d;                 /* table device index */
    int admitted;          /* 1 admitted (or nothing to reserve), -1 never can be */
    int failed;            /* passes through uncounted (said once) */
    uint64_t chunk;        /* grant extra asked for small allocations */
    uint64_t shrink_at;    /* spare above this goes back to the device */
    uint64_t iter_peak;    /* highest used since the last iteration boundary (atomic) */
    uint64_t lim_set;      /* sd->limit as registration set it (SALUS_MEM_LIMIT or the
                              budget): another value was set by salus limit */
    uint64_t lim_seen;     /* sd->limit as this process last saw it (under the lock) */
    uint64_t lim_hold;     /* 0, or a live limit came below its iterations' use: it
                              may hold up to this (contexts included) until its last
                              iteration's peak falls (account.c's live limit; atomic) */
    char name[64];         /* "CUDA device <ordinal> (GPU-<uuid>)", for messages */
    uint64_t debt;         /* taken while the table's lock was out of reach, not
                              yet in the grant: used = granted + debt - spare
                              (atomic; charged when the lock comes back) */
    int primary_refs;      /* the process's retains of the primary context
                              less its releases (mem_p.lock) */
    int ctx_pending;       /* a context made here is not measured yet (mem_p.lock) */
    uint64_t ctx_precharge;   /* charged to its contexts at admission, before the
                                 first is made (admit.c), until it is measured
                                 (ctxmem.c); under the table lock */
    /* The owner's own record, against which owncheck.c checks the table's
     * words of its slot (something other than libsalus may write them). */
    uint64_t charged;      /* what it has charged here and not given back: its
                              used, counted by itself (relaxed atomic: +bytes
                              after every take's CAS, -bytes before every give) */
    uint64_t granted_own;  /* sd->granted as it last wrote or accepted it (under
                              the table lock; read relaxed at iteration ends) */
    uint32_t tag_seen;     /* the tag of sd->avail then (under the table lock) */
} mem_local_dev_t;

/* A memory pool of this process (pool.c): what of the grant on its device
 * it holds.  charged - slack == the bytes of its live allocations (as
 * asked); slack is what it keeps with no allocation in it, which its next
 * allocations take before it has to grow. */
#define MEM_MAX_POOLS 128          /* index 0: none (an entry's 7 bits) */
typedef struct mem_pool {
    uint64_t handle;               /* CUmemoryPool; 0: a free record */
    int32_t  ord;                  /* CUDA ordinal of its device */
    uint8_t  host;                 /* in host memory: not charged */
    uint8_t  destroyed;            /* its memory goes as its allocations do */
    uint8_t  dirty;                /* allocated from slack since the last read */
    uint64_t charged, slack;       /* atomic */
    uint64_t threshold;            /* CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    pthread_mutex_t lock;          /* a read of the driver's figure and its charge */
} mem_pool_t;

typedef struct mem_config {
    const char *limit, *reserve;   /* validated text, NULL: unset */
    uint64_t headroom;             /* bytes, or MEM_HEADROOM_DEFAULT */
    int headroom_pct;              /* headroom text is a percentage */
    const char *headroom_text;
    uint64_t wait_ns;
    int swap;                      /* SALUS_SWAP: 1 on */
} mem_config_t;

enum { MEM_OFF = 0, MEM_ON = 1, MEM_OPEN = 2 };

typedef struct mem_proc {
    int mode;                      /* MEM_*: acquire load on the fast path */
    int suspended;                 /* the lock timed out; retried (atomic) */
    uint64_t retry_ns, backoff_ns; /* when suspended: next try, wait after a failed one */
    shm_table_t *t;
    mem_slot_t *area;              /* own slot's area, NULL until registered */
    int slot;
    drv_t drv;
    mem_config_t cfg;
    pthread_mutex_t lock;          /* registration of devices; context counts */
    int created;                   /* contexts created less destroyed (mem_p.lock) */
    uint64_t ctx_peak;             /* the most its contexts took at once (table lock) */
    mem_local_dev_t dev[MEM_MAX_ORDINALS];
    mem_local_dev_t *by_index[SHM_MAX_DEVICES];   /* registered, by table device */
    /* bit d: by_index[d] and its sd are set (released after both): what
     * runs at every iteration boundary visits these devices only. */
    uint32_t registered_set;
    mem_pool_t pools[MEM_MAX_POOLS];              /* records claimed under pool.c's lock */
    uint8_t cur_pool[MEM_MAX_ORDINALS];           /* each device's current pool; 0: unknown */
    int pools_used;                               /* records ever claimed (atomic) */
    /* Graph memory (pool.c), per ordinal: charged as the driver's
     * CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT said; graph_mask's bit o once
     * the process made a graph's allocation on ordinal o (atomic). */
    uint64_t graph_charged[MEM_MAX_ORDINALS];
    uint64_t graph_mask;
    pthread_mutex_t graph_lock;                   /* its reads and charges */
    /* What this module's waits ask of the layer above (mem_set_paging:
     * src/page, memory.h says each; NULL: none).  Under the table lock:
     * page_ask, page_movable, page_stuck, admit_order; outside it:
     * gpu_wait, gpu_give_up, sched_enroll. */
    uint64_t (*page_ask)(int d, uint64_t need);
    uint64_t (*page_movable)(int d, uint64_t *now);
    int (*page_stuck)(int d, uint64_t bytes);
    void (*gpu_wait)(int ordinal);
    void (*gpu_give_up)(int ordinal);
    int (*admit_order)(shm_table_t *t, int device, int a, int b);
    void (*sched_enroll)(int ordinal);
    int page_able;                 /* paging can page this process (mem_page_set_able) */
} mem_proc_t;

extern mem_proc_t mem_p;

/* ---- reading the table ------------------------------------------------------
 * Every word of the table is read and written with relaxed atomics
 * (util_load_relaxed, util_store_relaxed: util/atomic.h; the
 * lock or a futex orders what needs ordering); a size read from it is
 * clamped to MEM_MAX_BYTES before it is summed, so that a scribbling peer
 * cannot overflow a sum. */

static inline uint64_t mem_umin(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t mem_umax(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t mem_clampb(uint64_t v) { return v > MEM_MAX_BYTES ? MEM_MAX_BYTES : v; }

/* Slot `slot`'s memory area (NULL for a slot out of range). */
static inline mem_slot_t *mem_area_of(shm_table_t *t, int slot)
{
    return shm_slot_area(t, slot, SHM_AREA_MEM);
}

/* What a slot's record says it uses (granted less its spare); 0 for a
 * grant no device could hold (a scribbled word). */
static inline uint64_t mem_sdev_used(const mem_sdev_t *sd)
{
    uint64_t g = util_load_relaxed(&sd->granted);
    uint64_t spare = MEM_SPARE(util_load_relaxed(&sd->avail));
    return g <= MEM_MAX_BYTES && g > spare ? g - spare : 0;
}

/* The largest peak a job has reached on dev (mem_dev_t.peak_mib): what a
 * job whose own peak is not known yet may need; 0 for more than the budget
 * (a scribbled word, not a peak). */
static inline uint64_t mem_largest_seen(const mem_dev_t *dev)
{
    uint64_t seen = (uint64_t)util_load_relaxed(&dev->peak_mib) << 20;
    return seen <= util_load_relaxed(&dev->budget) ? seen : 0;
}

/* Slot j's context charge on device dev, in bytes (j checked). */
static inline uint64_t mem_ctx_of(const mem_dev_t *dev, int j)
{
    return j >= 0 && j < SHM_MAX_SLOTS ?
           (uint64_t)util_load_relaxed(&dev->ctx_kib[j]) << 10 : 0;
}

/* The registered device of an ordinal (-1: the current context's), or NULL
 * when the module is off or that device passes through uncounted. */
mem_local_dev_t *mem_local_dev(int device);

/* An entry freed or forgotten: its bytes back to the grant, or to its pool. */
void mem_entry_released(const mem_entry_t *e);

/* What a charge came to.  Inside the module results are this, never a
 * CUresult mixed with 1 and -1: a CUresult is made only at the interface,
 * by mem_take_cu. */
typedef enum mem_take {
    MEM_TAKEN = 0,          /* charged */
    MEM_TAKE_REFUSED,       /* past the limit, the budget or the reservation */
    MEM_TAKE_UNCOUNTED,     /* the table's lock is unusable: passes uncounted */
    MEM_TAKE_ASK_DRIVER,    /* near the capacity: read the driver's free memory,
                               then ask again with fresh = 1 (mem_take_slow) */
    MEM_TAKE_STUCK,         /* MEM_CHARGE_BAIL: the wait gave up stuck, nothing said */
} mem_take_t;

/* What the program sees of a charge: an uncounted one goes ahead (fail
 * open), a refusal is CUDA_ERROR_OUT_OF_MEMORY. */
static inline CUresult mem_take_cu(mem_take_t r)
{
    return r == MEM_TAKE_REFUSED || r == MEM_TAKE_STUCK ? CUDA_ERROR_OUT_OF_MEMORY
                                                        : CUDA_SUCCESS;
}

/* Charge `bytes` on ld for an allocation (admission, the spare, a grant),
 * with memory.h's MEM_CHARGE_* `flags`: MEM_TAKEN, MEM_TAKE_UNCOUNTED,
 * MEM_TAKE_REFUSED, or MEM_TAKE_STUCK (MEM_CHARGE_BAIL) (memory.c). */
mem_take_t mem_charge(mem_local_dev_t *ld, uint64_t bytes, unsigned flags);

/* ---- account.c: grants, reclaim, waits, admission (table lock) ---------- */

typedef enum { MEM_FIT = 0, MEM_OVER_LIMIT, MEM_OVER_DEVICE, MEM_ASK } mem_fit_t;

/* The table's lock: 0, or -1 when it cannot be taken.  A time-out suspends
 * the module's use of the lock (said once): the process counts alone,
 * within its own limit, as debt; the lock is tried again now and then
 * (mem_lock, mem_resume_try) and, once taken, the debt is charged.  Any
 * other failure lets allocations pass uncounted for good. */
int mem_lock(void);
/* A suspended module tries the lock again if its time has come. */
void mem_resume_try(void);
/* Pay `bytes` given back towards ld's debt; what is left to give. */
uint64_t mem_pay_debt(mem_local_dev_t *ld, uint64_t bytes);

/* Take `bytes` from sd's spare with one CAS; 1 on success, with the spare
 * left in *spare_after.  The CAS keeps the tag: bytes <= spare, no borrow. */
static inline int mem_take_fast(mem_sdev_t *sd, uint64_t bytes, uint64_t *spare_after)
{
    uint64_t w = util_load_relaxed(&sd->avail);
    while (MEM_SPARE(w) >= bytes)
        if (__atomic_compare_exchange_n(&sd->avail, &w, w - bytes, 1,
                                        __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
            *spare_after = MEM_SPARE(w) - bytes;
            return 1;
        }
    return 0;
}

/* Raise *w to v (the owner's threads race only to raise it). */
static inline void mem_raise(uint64_t *w, uint64_t v)
{
    uint64_t p = util_load_relaxed(w);
    while (__builtin_expect(v > p, 0) &&
           !__atomic_compare_exchange_n(w, &p, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* Record a new high of ld's use, for ever and in this iteration: `used`
 * is the process's own count after a take (ld->charged), never the
 * table's words, which a scribbler could raise for ever. */
static inline void mem_note_peak(mem_local_dev_t *ld, uint64_t used)
{
    mem_raise(&ld->sd->peak, used);
    mem_raise(&ld->iter_peak, used);
}

/* `bytes` were taken (the spare's CAS, or a grant, is done): counted in
 * the process's own record, and its peaks raised.  One relaxed atomic
 * addition on the fast path (owncheck.c says why its order matters). */
static inline void mem_took(mem_local_dev_t *ld, uint64_t bytes)
{
    mem_note_peak(ld, util_add_relaxed(&ld->charged, bytes));
}

/* The owner writes its grant: the table's word and its own record of it
 * (owncheck.c), under the table lock. */
static inline void mem_set_granted(mem_local_dev_t *ld, uint64_t g)
{
    util_store_relaxed(&ld->sd->granted, g);
    util_store_relaxed(&ld->granted_own, g);
}

/* The slow path of an allocation: grant more under the lock (waiting up to
 * SALUS_MEM_WAIT_MS when the device is full, unless MEM_CHARGE_NOWAIT is
 * in `flags`).  MEM_TAKEN with `bytes` taken, MEM_TAKE_REFUSED,
 * MEM_TAKE_UNCOUNTED (the lock is unusable: let it pass), MEM_TAKE_STUCK
 * (MEM_CHARGE_BAIL: the wait gave up stuck); or MEM_TAKE_ASK_DRIVER (never
 * when `fresh`): the grant would come within the headroom of the device's
 * capacity, where the driver's free memory is to be read first
 * (mem_drv_refresh) and the call made again with fresh = 1. */
mem_take_t mem_take_slow(mem_local_dev_t *ld, uint64_t bytes, int fresh, unsigned flags);
/* Charge `bytes` the driver has already given (a pool or graph memory that
 * grew unseen): as mem_take_slow, but it never waits, counts no refusal and
 * says nothing; MEM_TAKE_REFUSED past the limit or the budget (the caller
 * says so), MEM_TAKE_UNCOUNTED when the lock is unusable. */
mem_take_t mem_take_held(mem_local_dev_t *ld, uint64_t bytes);
void mem_give_slow(mem_local_dev_t *ld, uint64_t spare);
/* Wake those waiting for memory on dev (wake_seq). */
static inline void mem_wake(mem_dev_t *dev)
{
    util_add_seq(&dev->wake_seq, 1);
    shm_futex_wake(&dev->wake_seq, INT_MAX);
}

/* Return bytes to the spare (one atomic addition: spare + bytes <= granted,
 * no carry into the tag); past shrink_at the spare beyond a chunk goes back
 * to the device, and waiters are woken.  Lock-free unless either happens.
 * Ordering with waiters: see account.c. */
static inline void mem_give(mem_local_dev_t *ld, uint64_t bytes)
{
    util_sub_relaxed(&ld->charged, bytes);      /* before the spare: owncheck.c */
    if (__builtin_expect(util_load_relaxed(&ld->debt) != 0, 0) &&
        (bytes = mem_pay_debt(ld, bytes)) == 0)
        return;
    uint64_t w = util_add_seq(&ld->sd->avail, bytes);
    if (__builtin_expect(MEM_SPARE(w) > ld->shrink_at, 0) ||
        __builtin_expect(util_load_seq(&ld->dev->waiters) != 0, 0))
        mem_give_slow(ld, MEM_SPARE(w));
}
/* Admission of the process on ld's device (admit.c): SALUS_MEM_RESERVE's
 * reservation (waits until it fits), and with paging on, room for the
 * process's first context there (waits up to SALUS_MEM_WAIT_MS, longer
 * while paging makes the room).  Both before the context is made. */
CUresult mem_admit_wait(mem_local_dev_t *ld, uint64_t reserve);
/* Whether the process was admitted on some device already, or had nothing
 * to reserve there (admit.c): its first context waits for admission, its
 * contexts on other devices for their first allocation. */
int mem_admitted_anywhere(void);
void mem_ctx_admit(mem_local_dev_t *ld);

/* (livelim.c) What this process may hold on ld's device, its contexts
 * (ctx) included: its limit, or more while a limit lowered live stays above
 * its last iteration's peak (ld->lim_hold; never for a process that pages,
 * swap).  Under the lock. */
uint64_t mem_live_limit_locked(mem_local_dev_t *ld, uint64_t ctx, int swap);
/* (livelim.c) An iteration ended with `peak` its highest use, ctx its
 * contexts: a live limit it held more than lowers what it may hold to that
 * peak; 1 when it did (the caller gives the spare above it back,
 * mem_shrink).  The owner's, outside the lock. */
int mem_live_limit_iteration(mem_local_dev_t *ld, uint64_t peak, uint64_t ctx);
/* (account.c) Spare beyond a chunk, and above what it may hold, back to
 * the device.  Takes the table's lock. */
void mem_shrink(mem_local_dev_t *ld);

/* Room for this process on d, under the lock: what it could still take. */
uint64_t mem_room_locked(mem_local_dev_t *ld);
/* (sums.c) Over the live (not free) slots but `skip` (-1: none), on device
 * d; exact under the lock, a monitor's estimate without it. */
typedef struct mem_sums {
    uint64_t granted, used, reserved;
    uint64_t committed;    /* sum of max(granted, reserved) */
    uint64_t held;         /* sum of max(used, reserved): what reclaim cannot take */
    /* The same sums with each running peer's last iteration's peak kept
     * (max with its run_peak): what grants and admissions must leave. */
    uint64_t committed_run, held_run;
    uint64_t ctx;          /* sum of the contexts' measured memory */
    uint64_t peak;         /* the largest peak of one slot */
    uint32_t waiters, queued;
} mem_sums_t;
void mem_sums(shm_table_t *t, int d, int skip, mem_sums_t *s);
/* Over the slots whose process is alive (one record-lock test each), for
 * monitors: a process that has died counts for nothing from that moment,
 * not from when a peer reaps it. */
void mem_sums_live(shm_table_t *t, int d, mem_sums_t *s);
/* Finish a dead reclaimer's work on device d, under the lock. */
void mem_fix_log(shm_table_t *t, int d);
/* Recompute the monitor sums of device d, under the lock. */
void mem_publish_locked(shm_table_t *t, int d);
/* (account.c) Under the lock: take slot j's spare on d back (a limit that
 * fell below what it holds); what was taken. */
uint64_t mem_reclaim_one(shm_table_t *t, mem_dev_t *dev, int d, int j);
void mem_reap_hook(shm_table_t *t, int slot, void *area, void *ctx);
void mem_repair_hook(shm_table_t *t, void *ctx);

/* ---- account.c's parts that admission (admit.c) shares ------------------ */
#define MEM_WAIT_SLICE_NS (20ull * 1000 * 1000)
/* While peers are asked to page out (their requests pending), a wait goes
 * on at least this long past each look: a peer serves within its wait
 * loop's poll (10 ms) plus its copy's time. */
#define MEM_PAGE_WAIT_NS  (1000ull * 1000 * 1000)
/* A waiter behind the head of the admission queue looks again when the
 * head leaves (admit_seq), and at least this often (a rank changed by
 * salus control, a head that died unseen). */
#define MEM_ADMIT_SLICE_NS (250ull * 1000 * 1000)
/* What this process's contexts take on table device d. */
uint64_t mem_own_ctx(int d);
/* Under the lock: every peer's spare above its reservation on d, taken
 * back (self excepted); what was taken. */
uint64_t mem_reclaim_all_locked(shm_table_t *t, mem_dev_t *dev, int d, int self);
/* The slot's wait words and state (waiting-mem), under the lock: enter
 * with its kind, admission ticket and bytes; leave adds the time waited
 * since `since` (locked: publish the device's sums). */
void mem_wait_enter(mem_slot_t *a, int d, uint32_t kind, uint32_t ticket, uint64_t bytes);
void mem_wait_leave(mem_slot_t *a, int d, uint64_t since, int locked);
/* With paging on, queue for table device d's GPU (outside the lock). */
void mem_queue_for_gpu(int d);
/* Under the lock: paging could free what `bytes` lacks on ld's device;
 * *now (may be NULL): by asking peers now (none within its residency or
 * waiting for memory itself). */
int mem_pageable_locked(mem_local_dev_t *ld, uint64_t bytes, int *now);
/* What a wait for memory does with the GPU at its next sleep
 * (mem_sleep_unlocked's queue): 1 queued while paging can make its room
 * now; else -1, leaving it, once per stretch of such sleeps (*gave_up
 * counts them), then 0. */
int mem_gpu_choice(int page_now, int *gave_up);
/* Leave table device d's GPU (mem_paging_t's give_up), outside the lock. */
void mem_give_up_gpu(int d);
/* Sleep until the futex word `word` of dev (wake_seq: memory returned;
 * admit_seq: the admission queue moved) leaves `seq`, max_ns at most (a
 * slice at most for wake_seq), with the lock released; with paging on,
 * queued for the GPU if `queue` > 0, giving it up (and leaving its queue)
 * if `queue` < 0; 0 with the lock held again, -1 if it cannot be taken
 * again. */
int mem_sleep_unlocked(mem_dev_t *dev, uint32_t *word, uint32_t seq, uint64_t max_ns, int d,
                       int queue);
/* How long a wait must find itself stuck before it pages itself out: a
 * peer about to free or take memory goes on first. */
#define MEM_STUCK_NS (20ull * 1000 * 1000)
/* Wake the admission queue's waiters on dev (admit_seq): its head may have
 * changed. */
void mem_wake_admit(mem_dev_t *dev);
/* Under the lock: ask the peers the policy runs last to page out what
 * `bytes` lacks on ld's device; what is asked (0: nobody can be). */
uint64_t mem_ask_pages_locked(mem_local_dev_t *ld, uint64_t bytes);
/* What grants may commit on the device, less its contexts and foreign
 * use (own_ctx: the caller's contexts). */
uint64_t mem_effective_budget(const mem_dev_t *dev, const mem_sums_t *o, uint64_t own_ctx);

/* Give back what pool p keeps beyond its live allocations (its slack):
 * p destroyed, or the driver released it (account.c). */
void mem_pool_drain(mem_pool_t *p);

/* ---- vmm_handles.c: VMM handles released while mapped ---------------------- */
/* At a successful cuMemRelease of `handle`, charged `bytes` on table device
 * `dev`: 1 when it is still mapped, and the charge is kept until its last
 * mapping goes; 0 when the caller gives it back now. */
int mem_vmm_keep(uint64_t handle, uint64_t bytes, int dev);
/* The charge kept by released handles still mapped, on table device dev
 * (-1: all), and their number; for tests and checks. */
uint64_t mem_vmm_kept(int dev, uint64_t *count);
/* fork(): take the lock before, drop it after in the parent, forget every
 * mapping in the child. */
void mem_vmm_prefork(void);
void mem_vmm_postfork(int child);

/* ---- pools (pool.c): a free into a pool --------------------------------- */
/* An allocation of pool `idx` freed: its bytes stay in the pool (slack)
 * until the driver says the pool released them; a destroyed pool's go back
 * at once.  Lock-free: a free and a destroy that meet drain the slack once
 * (whoever exchanges it to 0). */
static inline void mem_pool_put(int idx, uint64_t bytes)
{
    mem_pool_t *p = &mem_p.pools[idx & (MEM_MAX_POOLS - 1)];
    util_add_seq(&p->slack, bytes);
    if (__builtin_expect(util_load_seq(&p->destroyed), 0))
        mem_pool_drain(p);
}
/* ---- ctxmem.c: what the driver says (contexts, the foreign use) --------- */

/* Read the driver's free memory on ld's device through the calling
 * thread's current context (nothing when it is on another device, or the
 * driver lacks cuMemGetInfo_v2), and set the device's foreign use from it
 * under the lock.  0, or -1 when nothing was read. */
int mem_drv_refresh(mem_local_dev_t *ld, int ordinal);
/* The driver refused `bytes` on ld's device (ordinal) that the table had
 * room for (mem_alloc_retry): 1 after a short sleep and a fresh reading
 * (call the driver again), 0 once SALUS_MEM_WAIT_MS has passed since
 * *refused_at, the first refusal (0: now). */
int mem_drv_retry(mem_local_dev_t *ld, int ordinal, uint64_t bytes, uint64_t *refused_at);
/* A context was made, or a module loaded, on ld's device (ordinal):
 * measure what it took and charge it to this process, reading the driver
 * through the current context, or through the primary context pushed for
 * the reading (MEM_CHARGE_PRIMARY). */
enum { MEM_CHARGE_CURRENT = 0, MEM_CHARGE_PRIMARY = 1, MEM_CHARGE_MODULE = 2 };
void mem_ctx_charge(mem_local_dev_t *ld, int ordinal, int what);
/* The most the process's contexts and modules were charged at once. */
uint64_t mem_ctx_peak(void);
/* 0 when the calling thread's current context is on `ordinal`. */
int mem_ctx_current(int ordinal);
/* The process has no context left on ld's device: its charge goes. */
void mem_ctx_uncharge(mem_local_dev_t *ld);
/* A context admitted (its estimate charged, admit.c) was not made. */
void mem_ctx_precharge_drop(mem_local_dev_t *ld);

/* ---- owncheck.c: the owner's check of its own slot's words ---------------- */
/* Under the lock (mem_lock calls it once the lock is taken): on each
 * device this process registered, the table's grant, spare word and limit
 * checked against its own record; what something else wrote is repaired
 * and said once. */
void mem_own_check_locked(void);
/* Outside the lock: whether the table's words of some device disagree with
 * the process's record (a few relaxed loads per device), so that its
 * caller takes the lock, which checks them. */
int mem_own_words_suspect(void);
/* (account.c) At an iteration's end: the lock is taken, and the words
 * checked, only when mem_own_words_suspect says so. */
void mem_own_check_soon(void);

/* ---- check.c: the invariants above, under the table lock ---------------- */
/* NULL when they hold on every registered device; else a description of the
 * first violation (a per-thread buffer, valid until the next call).  Never
 * repairs, logs or aborts.  The hook is the same, for ipc's lock and
 * unlock in a debug build. */
const char *mem_check_locked(shm_table_t *t);
const char *mem_check_hook(shm_table_t *t, void *ctx);

#endif /* SALUS_MEM_LAYOUT_H */
