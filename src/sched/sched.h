/*
 * sched.h - time slicing: the whole interface of the scheduler module.
 *
 * Salus's first primitive, fast job switching (Yu & Chowdhury, section 3):
 * the GPU is leased, per device, to one process at a time (or to all of
 * them, under `pack`).  Leases change hands at iteration boundaries, which
 * this module finds from the pattern of launches and host-blocking syncs.
 * A process without the lease sleeps on a futex in its next launch until a
 * releaser hands it the GPU and wakes it, and only it.  Everything lives in
 * the arbitration table (src/ipc): no daemon, and a holder that dies is
 * replaced within 100 ms.
 *
 * Who calls what:
 *   - intercept's launch wrappers count (sched_count) and pass the gate
 *     (SCHED_SELECT), each thread with its sched_thread_t inside intercept's
 *     per-thread block;
 *   - its sync wrappers call sched_sync_begin() / sched_sync_end() around the
 *     real call (the boundary candidates);
 *   - its init hands the driver contract over (sched_init); a process joins
 *     a device's lease at its first launch there, not when it makes or
 *     retains a context (JAX retains one on every visible GPU);
 *   - its report appends sched_report_fields();
 *   - tools (salus-top, `salus policy`) use sched_read_slot/device and
 *     sched_set_policy, so that no other module reads this module's layout.
 *
 * The fast path (a holder, whether or not others wait): a hash add in the
 * thread's block, ONE relaxed load of the gate word (through the block's pointer),
 * then a predictable branch (sched_launch) or a branch-free choice of the
 * function to tail-call (SCHED_SELECT).  No lock, syscall, getenv, clock
 * read or allocation.
 */
#ifndef SALUS_SCHED_H
#define SALUS_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "drv/drv.h"
#include "ipc/ipc.h"
#include "sched/policies.h"
#include "util/util.h"

#pragma GCC visibility push(hidden)   /* no GOT loads inside libsalus */

/* ---- the gate ---------------------------------------------------------------
 * Each thread reads the gate word its sched_thread_t points at.  A new
 * thread points at sched_gate_unreg, which forces the slow path; the slow
 * path registers the process and returns the word the thread follows from
 * then on: its slot's gate word in the table, or a local word that stays
 * OPEN when scheduling fails open.  Only OPEN takes the fast path.  Whoever
 * owns the thread's block (intercept) may point it back at sched_gate_unreg
 * to see the thread's next launch in the slow path (intercept.h says why).
 *
 * OPEN and CONTENDED take the fast path: a holder's launches cost the same
 * whether or not others wait (sharing is the normal case).  What the holder
 * must do while others wait is decided at its syncs and boundaries, and at
 * a waiter's periodic look, which PROBEs it: its next launch takes the slow
 * path once (showing that it is busy, checking its max slice), then the
 * gate goes back to CONTENDED.  A holder that never syncs stays PROBEd, so
 * that its kernel sequence can be learnt, only while others wait. */
#define SCHED_GATE_OPEN      0u   /* holds every lease it needs, nobody waits (or pack) */
#define SCHED_GATE_CONTENDED 1u   /* holds them, someone waits: decides at syncs */
#define SCHED_GATE_CLOSED    2u   /* lacks a lease: acquire or wait */
#define SCHED_GATE_UNREG     3u   /* process-local: thread or process not registered */
#define SCHED_GATE_PROBE     4u   /* CONTENDED, and its next launch is to look */
/* The fast path's test: one compare. */
#define SCHED_GATE_FAST(v)   ((v) <= SCHED_GATE_CONTENDED)

extern const uint32_t sched_gate_unreg;

/* A thread's part of the scheduler's state, inside the thread's block (the
 * caller keeps it: intercept's per-thread block, a test's variable).
 * `gate` is read by the owner at every launch with a relaxed load and
 * written under its keeper's lock; `hash` is written by the owner only (a
 * load and a volatile store, no read-modify-write) and read at syncs by any
 * thread of the process. */
typedef struct sched_thread {
    const uint32_t *gate;         /* never NULL: sched_gate_unreg at first */
    uint64_t hash;                /* sum of sched_mix(kernel handle): order-independent */
    uint32_t in_sync;             /* inside a host-blocking sync (counted in the slot) */
} sched_thread_t;

/* What the process launched between two syncs: the detector's token. */
typedef struct sched_token {
    uint64_t launches, hash;
} sched_token_t;

/* Whatever the gate is not fast: register, acquire or wait, a probe, for
 * work submitted on `stream` (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD:
 * the current context's).  The work is gated, charged and drained on the
 * stream's device, which CUDA 13 lets differ from the current context's
 * (a CUkernel launch runs in its stream's context): asked of the driver
 * here, on the slow path, and remembered per thread and stream.  Returns
 * the gate word the calling thread follows from now on. */
const uint32_t *sched_launch_slow(const void *work, CUstream stream);
/* A stream or context of the process went (cuStreamDestroy, a context's
 * destroy, release or reset): what the slow paths remember of streams'
 * devices is forgotten, since a new stream may reuse a handle.  One
 * relaxed increment. */
void sched_streams_changed(void);

/* Spreads a handle's bits (xorshift, multiply, xorshift) so that sums of
 * different kernel sets differ: handles are addresses in a few tables, whose
 * plain sums collide.  The odd multiplier fits an imul immediate (no
 * register to save on the launch path). */
static inline uint64_t sched_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x5bd1e995u;
    x ^= x >> 29;
    return x;
}

/* Count a launch of `work` (a CUfunction or CUgraphExec) for the detector.
 * A volatile store, as the kernel's WRITE_ONCE: an atomic store would make
 * GCC treat the launch's stack arguments as clobbered around its tail call. */
static inline __attribute__((always_inline)) void sched_count(sched_thread_t *th,
                                                              const void *work)
{
    *(volatile uint64_t *)&th->hash = th->hash + sched_mix((uint64_t)(uintptr_t)work);
}

/* The one relaxed load of the fast path (after the pointer's, which shares
 * the thread block's line with the counters just written). */
static inline __attribute__((always_inline)) uint32_t sched_gate_value(const sched_thread_t *th)
{
    return util_load_relaxed(__atomic_load_n(&th->gate, __ATOMIC_RELAXED));
}

/* The gate as a statement, for callers that keep their own block alone
 * (tests, benchmarks): count, then the slow path unless the gate is fast. */
static inline __attribute__((always_inline)) void sched_launch(sched_thread_t *th,
                                                               const void *work)
{
    sched_count(th, work);
    if (UTIL_UNLIKELY(!SCHED_GATE_FAST(sched_gate_value(th))))
        util_store_relaxed(&th->gate, sched_launch_slow(work, NULL));
}

/* The gate as a choice, for wrappers that end in a tail call: `open` when
 * the gate is fast, else `gated` (a function of the same type that calls
 * sched_launch_slow first).  Branch-free, so that the wrapper's tail call
 * needs no copy of its stack arguments. */
static inline __attribute__((always_inline)) uintptr_t sched_select(const sched_thread_t *th,
                                                                     uintptr_t open,
                                                                     uintptr_t gated)
{
    uintptr_t closed = -(uintptr_t)!SCHED_GATE_FAST(sched_gate_value(th));
    return (open & ~closed) | (gated & closed);
}
#define SCHED_SELECT(th, open, gated) \
    ((__typeof__(open))sched_select((th), (uintptr_t)(open), (uintptr_t)(gated)))

/* ---- the driver and the clock (seams) -------------------------------------
 * The scheduler reaches the driver through the contract (drv.h): the current
 * context's device, a context synchronize, a device's identity.  Until
 * sched_init the module is dormant: launches pass, nothing registers.  drv
 * NULL: every launch counts as device 0 and no context is synchronized. */
void sched_init(const drv_t *drv);

/* CLOCK_MONOTONIC ns by default; tests swap it (NULL restores). */
typedef uint64_t (*sched_clock_fn)(void);
void sched_set_clock(sched_clock_fn fn);

/* ---- what the modules beside this one do at its moments ---------------------
 * sched calls neither paging (src/page, above it) nor memory (beside it);
 * intercept registers here what they must do when the scheduler sees one
 * of these moments in this process (a call up left to convert: issue 25,
 * mk/pointers.py's PENDING).  Any may be NULL.
 *   boundary  an iteration of this process ended (a boundary found at a
 *             sync, or salus_iteration_end), before the process yields;
 *             on the syncing thread, outside the scheduler's locks;
 *   waiting   the process waits for the GPU: at each look of its wait
 *             loop (every 10 ms at most), outside the locks (memory pages
 *             out what peers asked of it);
 *   tenure    the process got the lease of table device `device` and is
 *             about to run: before its tenure's first launch, outside the
 *             locks (memory pages its memory back in; it may wait);
 *   paged_out the process, waiting for the GPU, has memory paged out (1):
 *             it does not take the GPU from a live holder (idle, at rest,
 *             past its max slice), which may hold the memory that
 *             paging it out freed: its page-in would wait for that memory
 *             while holding the GPU, and the holder, waiting for the GPU
 *             in turn, could not run to free it.  It waits for a grant at
 *             the holder's boundary, exit or death.  A stopped holder
 *             is the exception where `fits` says so;
 *   fits      the process, waiting for the GPU with memory paged out,
 *             would page all it has out on table device `device` back in
 *             now, in the room the device has, no peer paging out (1):
 *             it may take the GPU from a stopped holder (SIGSTOP, a
 *             debugger), whose memory stays put while it is stopped, since
 *             its page-in then waits for nobody.  Outside the locks (it
 *             takes the table lock);
 *   keep      the process holds table device `device` and, at a boundary,
 *             the policy would hand it to the waiter in `slot`: 1 to keep
 *             it, because that waiter has memory paged out that can only
 *             come back once this process is paged out, and this process
 *             is within its minimum residency (memory's rule against
 *             thrashing: the waiter could not run before the residency
 *             ends, and the GPU would idle meanwhile).  Under the table
 *             lock: it reads the table only;
 *   blocked   the process in `slot` waits for table device `device`'s GPU
 *             with memory paged out that could not come back there now,
 *             whoever else were paged out (contexts and memory that cannot
 *             move fill the rest): 1 to leave it out of the candidates, so
 *             that the GPU goes to jobs that can run and, ending, give the
 *             memory back.  Under the table lock: it reads the table only;
 *   tick      the process's drain thread looks (at most a second apart):
 *             memory lets go of what it keeps past its time; returns the
 *             ns until it wants to look again (0: no hurry).  On the drain
 *             thread: it must not block.  Never while a stream capture of
 *             the process is open (its unmaps would break it): the drain
 *             thread looks again soon. */
typedef struct sched_hooks {
    void (*boundary)(void);
    void (*waiting)(void);
    void (*tenure)(int device);
    int (*paged_out)(void);
    int (*fits)(int device);
    int (*keep)(shm_table_t *t, int device, int slot);
    int (*blocked)(shm_table_t *t, int device, int slot);
    uint64_t (*tick)(void);
} sched_hooks_t;
void sched_set_hooks(const sched_hooks_t *hooks);

/* The process waits for memory on CUDA ordinal `ordinal` with paging on
 * (memory's wait, through page, src/page, which calls it; outside the table
 * lock, at each slice of the wait): it is queued for that device's GPU as a
 * launch would queue it, without waiting for the grant, so that the holder
 * yields to it at a boundary by the policy and, once waiting at the gate,
 * can be asked to page out.  A holder that waits so (or a process granted
 * the GPU meanwhile) counts as busy and as not yet into its slice: waiters
 * do not take the GPU back from it as idle or past its max slice while its
 * peers page out for it. */
void sched_wait_mem(int ordinal);
/* Its other half: the process's wait for memory on CUDA ordinal `ordinal`
 * cannot be helped by paging now (the memory is held by peers that cannot
 * be paged): it hands the device's GPU to the policy's pick if it holds it
 * (its work drained as at any handoff), and leaves the device's queue, so
 * that the jobs holding the memory run and give it back.  Its next launch
 * queues it again as any launch does. */
void sched_give_up_for_mem(int ordinal);
/* Whether this process holds table device `d`'s GPU now (1 also where the
 * device is not gated, or the process is not scheduled): memory's page-in
 * before a tenure waits only while it does.  One load; no lock. */
int sched_holds_gpu(int d);
/* Memory pages this process out while one of its threads waits for memory
 * on CUDA ordinal `ordinal` under a policy that gates nothing there (pack:
 * every job holding memory waits for more, and one of them must give its
 * memory back).  on=1 holds the process's launches and copies: its gate
 * closes and every other thread's next launch waits in the slow path until
 * on=0, which memory calls once the memory is back in.  1 when held; 0 when
 * not (a gated policy there, which pages a waiter at its gate; a stream
 * capture, which a page-out's synchronize would break; the process not
 * scheduled there). */
int sched_hold_for_mem(int ordinal, int on);
/* Wake slot's threads that wait for a GPU, granting nothing: they look
 * again, and serve what memory asked of them meanwhile (a page-out) at once
 * rather than at their next poll.  Under the table lock or not. */
void sched_nudge(shm_table_t *t, int slot);
/* Register the process with the scheduler and set CUDA ordinal's device up,
 * without joining it or queueing for its GPU: memory's admission, before
 * the process's first launch, orders it by what it registered
 * (sched_admit_order_locked).  The process joins a device at its first
 * launch there (or wait for memory there), so that a context it only made
 * (JAX retains one on every GPU) neither lists it on the device nor holds
 * its gate on that device's lease. */
void sched_enroll(int ordinal);

/* How late the process in `slot` runs on table device `device` in the
 * policy's order: 0 the holder, 1 + its place among the waiters in the
 * order the policy would grant them, -1 neither.  Under the table lock;
 * for paging's choice of whom to page (src/page calls it). */
int sched_rank_locked(shm_table_t *t, int device, int slot);

/* The policy's order of two processes waiting for memory admission on table
 * device `device`, before they have run (memory's admission, through page,
 * src/page, which calls it): <0 slot a first, >0 slot b first, 0 the policy does not tell
 * them apart.  From what each registered (SALUS_ITERATIONS, SALUS_PRIORITY,
 * SALUS_LATENCY_MS, SALUS_END_TIME): srtf the fewest declared iterations
 * left, priority the highest; fair, fifo and pack: 0 (arrival).  0 too for
 * a slot the scheduler does not know.  Under the table lock. */
int sched_admit_order_locked(shm_table_t *t, int device, int a, int b);

/* ---- boundaries ------------------------------------------------------------ */
/* HOSTFN: a host callback enqueued (cuLaunchHostFunc), which a program
 * that learns of its work's end from the callback (JAX's PJRT, one per
 * execution) makes where another would sync: a boundary candidate, though
 * the host does not wait in it. */
typedef enum sched_sync_kind {
    SCHED_SYNC_STREAM, SCHED_SYNC_CTX, SCHED_SYNC_EVENT, SCHED_SYNC_COPY, SCHED_SYNC_HOSTFN
} sched_sync_kind_t;

/* Around a host-blocking sync by the thread `th`: begin before the real call
 * (the process is not idle while it waits; kind and object, the stream or
 * event, say what it waits on), end after it, with ok = the call
 * succeeded.  `fold` returns what the process launched since its previous
 * call (every thread's launches and hash sums): called only when the
 * scheduler is active, under its bookkeeping lock (so in the order of
 * syncs). */
void sched_sync_begin(sched_thread_t *th, sched_sync_kind_t kind, const void *object);
void sched_sync_end(sched_thread_t *th, sched_sync_kind_t kind, int ok,
                    sched_token_t (*fold)(void));
/* The program says an iteration ended here (ctypes-callable).  From its
 * first call on, only these calls are boundaries. */
SALUS_EXPORT void salus_iteration_end(void);

/* ---- stream capture -------------------------------------------------------
 * A process with a capture in progress records work; it does not submit it.
 * Its launches into the capture pass ungated (intercept asks the driver
 * which stream captures, on the gated path only: the fast path is
 * untouched), and the scheduler makes no call a capture forbids: while any
 * capture is in progress it synchronizes no context of the process, so the
 * process hands no device over at its own syncs, boundaries or max slice;
 * a handoff that falls due waits for the capture's end (the next sync or
 * probed launch after it).  Waiters may still take the lease from a holder
 * that stays idle or at rest (that needs nothing of the holder); its
 * capture goes on, and its next real launch waits its turn.
 * intercept calls begin before the driver's cuStreamBeginCapture (every
 * mode, ToGraph too: it waits for a drain's synchronize in progress, which
 * would invalidate the capture, to return), end after one ended (with a
 * graph or invalidated) and after a begin that failed.  The drain checks
 * before each synchronize it makes.  Process-wide, atomic; a fork child
 * starts with none. */
void sched_capture_begin(void);
void sched_capture_end(void);
/* Captures in progress (a relaxed load). */
int sched_captures(void);
/* Around any other call a capture forbids (paging's copies and unmaps, the
 * keep-tick's unmaps): begin answers 0 when no capture of the process is
 * open, and a capture's begin then waits for the matching end (as for a
 * drain's synchronize, at most a second); -1 when one is open, with
 * nothing to end: the caller defers the call. */
int  sched_unsafe_begin(void);
void sched_unsafe_end(void);

/* ---- policies ---------------------------------------------------------------- */
/* The list of policies is policies.h; SCHED_POLICY_FAIR is the default. */
typedef enum sched_policy {
#define SCHED_POLICY_ENUM_(id, name, ops, help) SCHED_POLICY_##id,
    SCHED_POLICIES(SCHED_POLICY_ENUM_)
#undef SCHED_POLICY_ENUM_
    SCHED_POLICY_COUNT
} sched_policy_t;
/* Each policy's name ("fifo", ...) and one-line help, then NULL. */
extern const char *const sched_policy_names[SCHED_POLICY_COUNT + 1];
extern const char *const sched_policy_help[SCHED_POLICY_COUNT + 1];

/* Change a running table's policy on table device `device` (quantum_ms < 0:
 * keep the quantum).  Opens the process's table (SALUS_TABLE...).  0, or
 * -errno (-ENODEV: no process has used that device yet). */
int sched_set_policy(int device, sched_policy_t policy, int quantum_ms);
int sched_set_policy_table(shm_table_t *t, int device, sched_policy_t policy, int quantum_ms);
/* Set the priority (0..100) of the process in (slot, gen) (control.c): it
 * takes effect at the next policy decision on its devices.  0, -EINVAL,
 * -ESRCH (that process is gone or not scheduled), or the lock's error. */
int sched_set_priority_table(shm_table_t *t, int slot, uint32_t gen, int priority);
/* The tools are ending the process of (slot, gen) (they sent it SIGTERM): it
 * goes first for the GPU, and holders hand over to it at their next
 * boundary under every policy, so that a job that needs the GPU to exit
 * gets it.  0, or -EINVAL, -ESRCH (gone or not scheduled), -errno of the
 * lock. */
int sched_set_ending_table(shm_table_t *t, int slot, uint32_t gen);

/* ---- counters -------------------------------------------------------------- */
/* The report's fields ("name":value pairs, comma-separated, no braces):
 * iterations, iter_ms, gpu_held_ms, waited_ms, switches, handoff_us_p50,
 * handoff_us_p99, policy.  Returns the length as snprintf does. */
int sched_report_fields(char *buf, size_t cap);

/* A validated copy of one slot's scheduler state, for monitors. */
typedef struct sched_slot_info {
    int priority;                 /* 0..100 */
    uint64_t declared;            /* SALUS_ITERATIONS, 0: unknown */
    uint32_t length_ms;           /* SALUS_LENGTH_MS, 0: none */
    int has_end;                  /* SALUS_END_TIME given */
    uint64_t iterations;
    double iter_ms;               /* mean running time of an iteration, 0: not yet */
    double gpu_held_ms, waited_ms;
    uint64_t switches;            /* times it was handed the GPU by another */
    double handoff_us_p50, handoff_us_p99;
    uint32_t devices;             /* devices it uses (bit d) */
    uint32_t holds;               /* devices whose lease it holds (bit d) */
    uint32_t waits;               /* devices it waits for (bit d) */
    int blocked;                  /* holds a GPU, found blocked in a sync by a waiter */
    char gang[32];                /* its gang's name, NUL-terminated; "": none */
} sched_slot_info_t;

/* Devices are known by uuid in the table, as memory knows them, so that
 * processes that see a GPU under other ordinals (CUDA_VISIBLE_DEVICES)
 * share its lease; a table device index is not a CUDA ordinal. */
typedef struct sched_device_info {
    unsigned char uuid[16];       /* "ordinal:<n>" when the driver gave none */
    sched_policy_t policy;
    uint32_t quantum_ms, max_slice_ms;
    int holder;                   /* slot, -1: none */
    double held_ms;               /* of the current tenure */
    uint64_t switches;            /* handoffs on this device */
    int nwaiters;
    int waiters[SHM_MAX_SLOTS];   /* slots, in arrival order */
} sched_device_info_t;

/* 0 and *out filled, or -1 (slot free or not set up by sched, device not
 * configured, bad index). */
int sched_read_slot(shm_table_t *t, int slot, sched_slot_info_t *out);
int sched_read_device(shm_table_t *t, int device, sched_device_info_t *out);

#pragma GCC visibility pop

#endif /* SALUS_SCHED_H */
