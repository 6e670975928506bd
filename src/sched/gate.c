/*
 * gate.c - the process's side of scheduling: registration, the launch slow
 * path, a process waiting for memory, the sync hooks (the detector's input),
 * the iteration hint, fork and exit.  The gate words and the process record
 * are proc.c's.
 *
 * Divided into: registration; devices; where a launch runs; the launch slow
 * path; waiting for memory; syncs and hints; fork and exit.
 *
 * Locks: p->mu guards the process's bookkeeping (config, detector, kernel
 * sequence, iteration timing, registration).  Order: p->mu, then the lock of
 * the caller's thread registry (the fold callback of sched_sync_end), then
 * the table lock; nothing sleeps holding p->mu.  Threads keep their own
 * counts (sched.h); the process's token at a sync comes from the caller's
 * fold, which sums what every thread launched since the previous one.
 */
#include "sched/sched_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bump_activity(sched_slot_t *me)
{
    __atomic_store_n(&me->activity, util_load_relaxed(&me->activity) + 1,
                     __ATOMIC_RELAXED);
}

/* At an iteration boundary: until the next launch or sync the owner is at
 * rest between iterations, which waiters may treat as idle much sooner than
 * a pause inside an iteration (wait.c).  Launches are fast, whether or not
 * others wait, so the gate is PROBEd: the next launch takes the slow path
 * once (one per iteration) and its activity ends the rest.  The probe is
 * open_host_gap's, which every boundary calls first. */
static void mark_rest(sched_slot_t *me)
{
    __atomic_store_n(&me->rest_activity, util_load_relaxed(&me->activity),
                     __ATOMIC_RELAXED);
}

/* The first launch since a boundary (every boundary PROBEs the gate, so it
 * comes here): the host time since a sampled boundary is a sample of the
 * process's host phase, which fair fills with a waiter's work.  Before the
 * detector has found the loop's period, the host time after every sync is
 * a sample too: the first boundary then finds the phase measured (an early
 * sample too long only hands over at a boundary more: a handoff, never a
 * stall).  The slot shows the least of the last SCHED_GAP_SAMPLES.  The
 * phase is the process's own record (gap_from_ns, and the activity then),
 * not the slot's boundary_ns and rest_activity: a sync inside an iteration
 * is no rest that a waiter may take the GPU at. */
static void note_host_gap(sched_proc_t *p)
{
    uint64_t from = util_load_relaxed(&p->gap_from_ns);
    if (!from || util_load_relaxed(&p->me->activity) !=
                     util_load_relaxed(&p->gap_activity))
        return;
    uint64_t now = sched_now();
    util_store_relaxed(&p->gap_from_ns, 0);      /* one sample a phase */
    if (now <= from || now - from > 10ull * 1000000000ull)      /* idle, not a phase */
        return;
    pthread_mutex_lock(&p->mu);
    p->gaps[p->gap_n++ % SCHED_GAP_SAMPLES] = now - from;
    uint64_t least = UINT64_MAX;
    int have = p->gap_n < SCHED_GAP_SAMPLES ? (int)p->gap_n : SCHED_GAP_SAMPLES;
    for (int i = 0; i < have; i++)
        least = p->gaps[i] < least ? p->gaps[i] : least;
    util_store_relaxed(&p->me->host_gap_ns, least);
    pthread_mutex_unlock(&p->mu);
}

/* Whether anyone waits on a device the process uses (seq_cst: see below).
 * Only the devices of devset are visited (most processes use one): this
 * runs at every boundary and at its first launch, twice. */
static int waited_for(const sched_proc_t *p)
{
    uint32_t devset = util_load_relaxed(&p->devset);
    while (devset) {
        int d = __builtin_ctz(devset);
        devset &= devset - 1;
        const sched_dev_t *dev = sched_dev(p->t, d);
        if (!dev)
            continue;
        for (int w = 0; w < SCHED_WAIT_WORDS; w++)
            if (util_load_seq(&dev->waiters[w]))
                return 1;
    }
    return 0;
}

/* A host phase begins at `now` (after the activity bump of the sync that
 * ends before it); the next launch takes the slow path (the probe, which
 * rest detection needs at every boundary), and ends the phase's sample.
 * Alone, once it knows its loop, a process samples one phase in
 * SCHED_GAP_EVERY: samples matter when a waiter comes (then every phase
 * is one), and each costs a clock read (20-50 ns). */
#define SCHED_GAP_EVERY 8

static void open_host_gap(sched_proc_t *p, uint64_t now)
{
    int sample = !p->det.period || waited_for(p) ||
                 util_add_relaxed(&p->gap_opened, 1) % SCHED_GAP_EVERY == 1;
    __atomic_store_n(&p->gap_activity, util_load_relaxed(&p->me->activity),
                     __ATOMIC_RELAXED);
    util_store_relaxed(&p->gap_from_ns, sample ? now : 0);
    sched_probe_boundary(p->me);
}

/* The holder's launch looked (a PROBEd gate): the gate goes back to what the
 * leases make it.  Once per iteration, so the common case takes no lock:
 * nobody waits, and a compare-and-swap takes PROBE back to OPEN.
 * Ordering: a waiter sets its bit, then a full fence, then reads the gate
 * (sched_enqueue_locked); we swap the gate (a full barrier), then read the
 * bits.  Either we see its bit, and settle under the lock (CONTENDED), or it
 * reads the gate after our swap, sees OPEN and makes it CONTENDED.  A swap
 * that fails found the gate changed under the lock (CLOSED by a takeover,
 * or by a policy): nothing to settle.  0, or -1 when the lock timed out
 * (the process is then suspended). */
static int settle_probe_counted(sched_proc_t *p)
{
    uint32_t probe = SCHED_GATE_PROBE;
    if (!waited_for(p)) {
        if (!__atomic_compare_exchange_n(&p->me->gate, &probe, SCHED_GATE_OPEN, 0,
                                         __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            return 0;
        if (!waited_for(p))
            return 0;
    }
    int rc = shm_lock(p->t);
    if (rc != 0) {
        sched_lock_failed(p, rc);        /* a hung peer: suspended, said once */
        return -1;
    }
    sched_gate_settle_locked(p->t, p->slot);
    shm_unlock(p->t);
    return 0;
}

/* Counted in p->settling around it (seq_cst), so that the process's look
 * at its own slot (drain.c), under the lock, tells the OPEN this window
 * may leave with waiters from a spoiled gate: a look that reads the OPEN
 * our swap stored reads the count after it (one total order), and the
 * count drops only once the gate is settled (under the lock, which the
 * look holds) or no waiter was seen after the swap (then a waiter that
 * came since made the gate CONTENDED under the lock before the look). */
static int settle_probe(sched_proc_t *p)
{
    __atomic_add_fetch(&p->settling, 1, __ATOMIC_SEQ_CST);
    int rc = settle_probe_counted(p);
    __atomic_sub_fetch(&p->settling, 1, __ATOMIC_SEQ_CST);
    return rc;
}

/* ---- registration ------------------------------------------ */

static void at_exit(void);
static void fork_register(void);
static void resume_try(sched_proc_t *p);
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Under p->mu: the slot's area set up for this process (its claim,
 * shm_self, succeeded), the process active from then on. */
static int setup_slot_locked(sched_proc_t *p, shm_table_t *t, int slot)
{
    if (shm_lock(t) != 0) {
        sched_fail_open(p, "the table's lock cannot be taken");
        return -1;
    }
    sched_slot_t *me = sched_slot(t, slot);
    me->priority = p->cfg.priority;
    me->latency_ms = p->cfg.latency_ms;
    me->declared = p->cfg.iterations;
    me->length_ms = p->cfg.length_ms;
    me->deadline_ns = sched_config_deadline(&p->cfg, sched_now());
    me->gang = p->cfg.gang[0] ? sched_gang_id(p->cfg.gang) : 0;
    snprintf(me->gang_name, sizeof me->gang_name, "%s", p->cfg.gang);
    me->gang_yield = me->gang_yield_ns = 0;
    me->orphan = 0;
    me->sync_since_ns = 0;
    me->blocked = 0;
    util_store_relaxed(&me->hold, 0);
    util_store_relaxed(&me->devset, 0);
    util_store_relaxed(&me->gate, SCHED_GATE_OPEN);
    util_store_release(&me->magic, SCHED_SLOT_MAGIC);
    shm_unlock(t);

    p->t = t;
    p->slot = slot;
    p->gen = shm_slot_gen(t, slot);
    p->me = me;
    p->devset = 0;
    p->joined = 0;
    p->last_boundary_ns = p->registered_ns = sched_now();
    p->waited_mark_ns = 0;
    if (!p->handlers_made) {
        p->handlers_made = 1;
        if (atexit(at_exit) != 0)
            util_warn("cannot register an exit handler: peers take this process's "
                      "lease back only when they see it dead");
    }
    sched_drain_start(p);
    util_store_release(&p->state, SCHED_P_ACTIVE);
    sched_set_proc_gate(&me->gate);
    util_info("scheduler: table %s, slot %d, priority %d, policy %s (the first process "
              "on a device fixes it), gang %s", shm_table_name(t), slot, p->cfg.priority,
              sched_policy_names[p->cfg.policy], p->cfg.gang[0] ? p->cfg.gang : "none");
    return 0;
}

/* Under p->mu: claim the slot and set up its area; a full table leaves the
 * process unscheduled until a slot comes free (NOSLOT: join_try). */
static void register_locked(sched_proc_t *p)
{
    sched_config_read(&p->cfg);
    if (p->det.mode == SCHED_DET_AUTO && p->cfg.iter_sync_every)
        p->det.mode = SCHED_DET_EVERY;
    shm_table_t *t = shm_process_table();
    if (!t) {
        sched_fail_open(p, "the arbitration table cannot be used (see above)");
        return;
    }
    shm_set_hooks(t, SHM_AREA_SCHED, sched_reap_hook, sched_repair_hook, NULL);
    shm_set_check(t, SHM_AREA_SCHED, sched_check_hook);
    int slot = shm_self(t);
    if (slot < 0) {
        if (shm_table_full(t))
            sched_no_slot(p, t);         /* retried at syncs and launches */
        else
            sched_fail_open(p, "it has no slot in the arbitration table");
        return;
    }
    setup_slot_locked(p, t, slot);
}

/* A process the full table left unscheduled (NOSLOT) claims a slot once
 * one is free: tried at its syncs and launches, at most once per backoff
 * (100 ms doubling to 5 s), so that what the claim costs (the table's
 * lock, a scan of its slots, the reap of dead ones) stays rare. */
static void join_try(sched_proc_t *p)
{
    uint64_t now = sched_now();
    if (now < util_load_relaxed(&p->retry_ns) || pthread_mutex_trylock(&p->mu) != 0)
        return;
    if (util_load_acquire(&p->state) != SCHED_P_NOSLOT || now < p->retry_ns)
        goto out_unlock;
    int slot = shm_self(p->t);
    if (slot < 0) {
        uint64_t b = p->backoff_ns * 2;
        p->backoff_ns = b > SCHED_RETRY_MAX_NS ? SCHED_RETRY_MAX_NS : b;
        util_store_relaxed(&p->retry_ns, sched_now() + p->backoff_ns);
        goto out_unlock;
    }
    if (setup_slot_locked(p, p->t, slot) == 0)
        util_warn("GPU time slicing starts for this process: a slot of table %s came free "
                  "(it ran unscheduled for %llu ms)", shm_table_name(p->t),
                  (unsigned long long)((sched_now() - p->suspended_ns) / 1000000));
out_unlock:
    pthread_mutex_unlock(&p->mu);
}

/* The process's state once registration was tried (UNREG: still dormant). */
static sched_pstate_t ensure_registered(sched_proc_t *p)
{
    sched_pstate_t st = util_load_acquire(&p->state);
    if (st != SCHED_P_UNREG || !sched_enabled())
        return st;
    pthread_once(&fork_once, fork_register);     /* before the first p->mu */
    pthread_mutex_lock(&p->mu);
    if (p->state == SCHED_P_UNREG)
        register_locked(p);
    pthread_mutex_unlock(&p->mu);
    return util_load_acquire(&p->state);
}

/* ---- devices ------------------------------------------------------------------ */

/* The table device of a CUDA ordinal (ipc's cache, shared with memory), or
 * -1 (failed open, all table devices taken). */
static int table_index(sched_proc_t *p, int ordinal)
{
    static int said_full;
    if (ordinal < 0 || ordinal >= SHM_MAX_ORDINALS)
        return -1;
    int d = shm_device_of(p->t, sched_drv(), ordinal);
    if (d == -2) {
        sched_fail_open(p, "the table's lock cannot be taken");
        return -1;
    }
    if (d < 0) {
        util_log_once(&said_full, UTIL_LOG_ERROR, "table %s knows %d devices already; "
                      "launches on device %d are not scheduled", shm_table_name(p->t),
                      SHM_MAX_DEVICES, ordinal);
        return -1;
    }
    return d;
}

/* The same, and on first use the process joins it (set up if new, in its
 * devset, vtime lifted, gate updated). */
static int table_device(sched_proc_t *p, int ordinal)
{
    int d = table_index(p, ordinal);
    if (d < 0 || (util_load_acquire(&p->joined) & (1ull << ordinal)))
        return d;
    int rc = shm_lock(p->t);
    if (rc != 0) {
        sched_lock_failed(p, rc);
        return -1;
    }
    sched_dev_setup_locked(p->t, d, &p->cfg);
    sched_slot_t *me = p->me;
    util_store_relaxed(&me->devset, me->devset | (1u << d));
    sched_vtime_lift_locked(p->t, d, p->slot, sched_now());
    sched_gate_update_locked(p->t, p->slot);
    shm_unlock(p->t);
    util_or_relaxed(&p->devset, 1u << d);
    util_or_release(&p->joined, 1ull << ordinal);
    return d;
}

/* ---- where a launch runs ----------------------------------------------------------
 * The device a launch is gated, charged and drained on is its stream's
 * (drv_stream_place), not the current context's: CUDA 13 lets a stream of
 * device 1 take work while device 0's context is current.  A thread keeps
 * the place of the last SCHED_PLACES streams it launched on (the slow path
 * only: the fast path reads none of it); place_epoch, bumped whenever a
 * stream or context of the process goes (sched_streams_changed), voids
 * what every thread kept, so that a handle reused for a stream of another
 * device is asked again.  Relaxed: a launch on a stream made after a
 * destroy is ordered after that destroy by the program itself (it got the
 * new handle from the thread that made it), and write-read coherence makes
 * its load of the epoch see the bump. */
#define SCHED_PLACES 4

typedef struct place {
    uint32_t epoch;                      /* 0: empty (place_epoch starts at 1) */
    int ordinal;
    CUstream stream;
    CUcontext ctx;
} place_t;

static __thread place_t places[SCHED_PLACES];
static __thread unsigned place_next;
static uint32_t place_epoch = 1;

void sched_streams_changed(void)
{
    util_add_relaxed(&place_epoch, 1);
}

/* The context and CUDA ordinal of a launch on `stream`: 0, or -1 (the
 * driver cannot say; the launch is then not scheduled).  Without a driver
 * (a test's sched_init(NULL)) every launch is device 0's. */
static int launch_place(CUstream stream, CUcontext *ctx, int *ordinal)
{
    const drv_t *drv = sched_drv();
    if (!drv) {
        *ctx = NULL;
        *ordinal = 0;
        return 0;
    }
    if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD)
        return drv_stream_place(drv, stream, ctx, ordinal);   /* the current context */
    uint32_t epoch = util_load_relaxed(&place_epoch);
    for (int i = 0; i < SCHED_PLACES; i++)
        if (places[i].epoch == epoch && places[i].stream == stream) {
            *ctx = places[i].ctx;
            *ordinal = places[i].ordinal;
            return 0;
        }
    if (drv_stream_place(drv, stream, ctx, ordinal) != 0)
        return -1;
    places[place_next++ % SCHED_PLACES] =
        (place_t){ .epoch = epoch, .ordinal = *ordinal, .stream = stream, .ctx = *ctx };
    return 0;
}

/* ---- the launch slow path ------------------------------------------------------
 * Reached when the gate is not OPEN: register, find the launch's device,
 * join it, then either hold (bookkeeping while contended) or acquire. */

/* A launch that waited for the lease is one of the kernel sequence a
 * no-sync holder records (wait.c): the record must miss none. */
static void note_waited_launch(sched_proc_t *p, const void *work)
{
    pthread_mutex_lock(&p->mu);
    if (p->kseq_on)
        sched_kseq_push(&p->kseq, (uint64_t)(uintptr_t)work);
    pthread_mutex_unlock(&p->mu);
}

/* Memory pages the process out (sched_hold_for_mem): its other threads'
 * launches and copies wait here until it is back in.  They wait on the
 * process's own word, never on the table's: a slot's hold that the process
 * did not set (a corrupt table) closes its gate, and sched_acquire clears
 * it under the lock, but holds nothing.  The holder clears the word and
 * wakes them; a slice bounds each sleep, so that a wake lost to a signal
 * costs a slice, never the thread. */
static void held_wait(sched_proc_t *p)
{
    uint32_t h;
    while ((h = util_load_acquire(&p->hold)) != 0)
        shm_futex_wait(&p->hold, h, 100ull * 1000000);
}

const uint32_t *sched_launch_slow(const void *work, CUstream stream)
{
    sched_proc_t *p = &sched_p;
    sched_pstate_t st = ensure_registered(p);
    if (UTIL_UNLIKELY(st == SCHED_P_SUSPENDED || st == SCHED_P_NOSLOT)) {
        if (st == SCHED_P_SUSPENDED)
            resume_try(p);           /* at most once per backoff; cheap otherwise */
        else
            join_try(p);
        st = util_load_acquire(&p->state);
    }
    const uint32_t *gate = sched_proc_gate();
    if (st != SCHED_P_ACTIVE)
        return gate;
    held_wait(p);
    CUcontext ctx = NULL;
    int ordinal = -1;
    if (launch_place(stream, &ctx, &ordinal) != 0)
        ordinal = -1;
    int d = table_device(p, ordinal);
    if (d < 0)
        return sched_proc_gate();    /* no context (the driver will refuse it), or open */
    note_host_gap(p);
    sched_drain_note_context(ctx);
    bump_activity(p->me);
    sched_dev_t *dev = sched_dev(p->t, d);
    if (util_load_acquire(&dev->lease) == sched_lease_of(p->slot, p->gen)) {
        /* A probe (activity is bumped above: the waiter sees us busy); the
         * gate goes back to fast unless the holder learns its kernels. */
        if (util_load_relaxed(&p->me->gate) == SCHED_GATE_PROBE &&
            !sched_holder_launch(p, d, (uint64_t)(uintptr_t)work) && settle_probe(p) != 0)
            return sched_proc_gate();            /* suspended: the lock timed out */
        return gate;
    }
    sched_acquire(p, d);
    note_waited_launch(p, work);
    return sched_proc_gate();
}

/* ---- a process waiting for memory (sched.h) --------------------------------------
 * Queued as sched_acquire queues (enqueued, the holder CONTENDED, a free GPU
 * granted by policy), but the caller does not wait here: it waits for
 * memory, and takes the GPU at its next launch, or has it by then. */

static int queue_for_mem_locked(sched_proc_t *p, int d, uint64_t now, int *to)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (dev->lease == sched_lease_of(p->slot, p->gen) ||
        !(sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED))
        return 0;
    sched_unmark_stopped_locked(p->t, p->slot);
    sched_enqueue_locked(p->t, d, p->slot, now);
    if (sched_lease_holder(p->t, dev->lease) < 0)
        *to = sched_grant_pick_locked(p->t, d, now, 0);
    sched_gate_update_locked(p->t, p->slot);
    return dev->lease != sched_lease_of(p->slot, p->gen);
}

/* The table device of CUDA ordinal `ordinal` for a process waiting for
 * memory there, with the table lock held; -1 (no lock) when it is not
 * scheduled there. */
static int mem_device_locked(sched_proc_t *p, int ordinal)
{
    int rc, d;
    if (ensure_registered(p) != SCHED_P_ACTIVE || (d = table_device(p, ordinal)) < 0)
        return -1;
    if ((rc = shm_lock(p->t)) != 0) {
        sched_lock_failed(p, rc);
        return -1;
    }
    return d;
}

void sched_give_up_for_mem(int ordinal)
{
    static int said;
    sched_proc_t *p = &sched_p;
    int d, to = SCHED_NO_SLOT;
    if (sched_captures() > 0 || (d = mem_device_locked(p, ordinal)) < 0)
        return;                              /* a drain would break a capture */
    sched_dev_t *dev = sched_dev(p->t, d);
    if (dev->lease != sched_lease_of(p->slot, p->gen)) {
        sched_dequeue_locked(p->t, d, p->slot);
        sched_gate_update_locked(p->t, p->slot);
        shm_unlock(p->t);
        return;
    }
    if (!sched_any_waiter(dev)) {     /* fifo too: a holder that cannot go on must not keep it */
        shm_unlock(p->t);
        return;
    }
    to = sched_hand_over(p, d, SCHED_PICK);      /* drained as at a yield */
    if (to >= 0)
        util_log_once(&said, UTIL_LOG_INFO, "device %d: this process waits for memory that "
                      "paging cannot free now; the GPU goes to the jobs that hold it (slot %d "
                      "first) until then", d, to);
}

int sched_holds_gpu(int d)
{
    sched_proc_t *p = &sched_p;
    if (util_load_acquire(&p->state) != SCHED_P_ACTIVE || !p->t || d < 0 ||
        d >= SHM_MAX_DEVICES)
        return 1;
    sched_dev_t *dev = sched_dev(p->t, d);
    if (!(sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED))
        return 1;
    return util_load_acquire(&dev->lease) == sched_lease_of(p->slot, p->gen);
}

/* The hold (sched.h).  Set and cleared by this process only, under the
 * table lock, with its gate recomputed in the same hold: a thread that
 * looks at the gate after the store sees CLOSED and waits in held_wait; one
 * that looked before is inside its launch, which the page-out's context
 * synchronize waits for.  The clear wakes every held thread (release, so
 * that they see the memory back in before they launch into it). */
int sched_hold_for_mem(int ordinal, int on)
{
    sched_proc_t *p = &sched_p;
    int d;
    if (on && sched_captures() > 0)
        return 0;                        /* a page-out's synchronize would break it */
    if ((d = mem_device_locked(p, ordinal)) < 0) {
        if (!on) {                       /* the lock is out of reach: never keep them */
            util_store_release(&p->hold, 0);
            shm_futex_wake(&p->hold, INT32_MAX);
        }
        return 0;
    }
    sched_dev_t *dev = sched_dev(p->t, d);
    if (on && (sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED)) {
        shm_unlock(p->t);                /* the gate pages it: it waits there */
        return 0;
    }
    util_store_release(&p->hold, on ? 1u : 0u);
    util_store_relaxed(&p->me->hold, on ? 1u : 0u);
    sched_gate_update_locked(p->t, p->slot);
    shm_unlock(p->t);
    if (!on)
        shm_futex_wake(&p->hold, INT32_MAX);
    return on;
}

/* Registered, and the device's area set up (its policy orders the
 * admission), but not joined: the process is not in the device's devset,
 * whose gates, views and monitors count only devices it launches on. */
void sched_enroll(int ordinal)
{
    sched_proc_t *p = &sched_p;
    int d;
    if (ensure_registered(p) != SCHED_P_ACTIVE || (d = table_index(p, ordinal)) < 0)
        return;
    int rc = shm_lock(p->t);
    if (rc != 0) {
        sched_lock_failed(p, rc);
        return;
    }
    sched_dev_setup_locked(p->t, d, &p->cfg);
    shm_unlock(p->t);
}

void sched_wait_mem(int ordinal)
{
    sched_proc_t *p = &sched_p;
    int d, to = SCHED_NO_SLOT;
    if ((d = mem_device_locked(p, ordinal)) < 0)
        return;
    uint64_t now = sched_now();
    int queued = queue_for_mem_locked(p, d, now, &to);
    shm_unlock(p->t);
    if (to >= 0 && to != p->slot)
        sched_wake(p->t, to);
    bump_activity(p->me);                /* busy: not idle, not at rest */
    if (!queued)                         /* its slice starts when it can run */
        util_store_relaxed(&p->me->boundary_ns, now);
}

/* ---- syncs and hints -------------------------------------------------------------- */

/* Under p->mu: an iteration ended at `now`; its running time excludes the
 * time spent waiting for the lease. */
static void iteration_done(sched_proc_t *p, uint64_t now)
{
    sched_slot_t *me = p->me;
    uint64_t waited = util_load_relaxed(&me->waited_ns);
    if (p->last_boundary_ns && now > p->last_boundary_ns) {
        uint64_t dt = now - p->last_boundary_ns, w = waited - p->waited_mark_ns;
        p->iter_sum_ns += dt > w ? dt - w : 0;
        p->iter_count++;
        util_store_relaxed(&me->iter_ns, p->iter_sum_ns / p->iter_count);
    }
    p->last_boundary_ns = now;
    p->waited_mark_ns = waited;
    util_store_relaxed(&me->iterations, p->det.iterations);
    util_store_relaxed(&me->boundary_ns, now);
}

/* Under p->mu: the detector found the loop's period (first, or after a
 * phase change): the time since the last boundary spans learning, not one
 * iteration, and is not a sample; the next full iteration is. */
static void iteration_restart(sched_proc_t *p, int boundary, uint64_t now)
{
    p->last_boundary_ns = boundary ? now : 0;
    p->waited_mark_ns = util_load_relaxed(&p->me->waited_ns);
    util_store_relaxed(&p->me->iterations, p->det.iterations);
    if (boundary)                  /* a boundary all the same: rest and host phase time from it */
        util_store_relaxed(&p->me->boundary_ns, now);
}

/* The first thread to enter a sync says what it waits on, for a peer that
 * finds the process blocked there (wait.c, blocked holders). */
void sched_sync_begin(sched_thread_t *th, sched_sync_kind_t kind, const void *object)
{
    sched_proc_t *p = &sched_p;
    if (util_load_acquire(&p->state) != SCHED_P_ACTIVE || th->in_sync)
        return;
    th->in_sync = 1;
    sched_slot_t *me = p->me;
    if (util_add_relaxed(&me->in_sync, 1) == 1) {
        util_store_relaxed(&me->sync_kind, (uint32_t)kind);
        util_store_relaxed(&me->sync_obj, (uint64_t)(uintptr_t)object);
        util_store_relaxed(&me->sync_since_ns, sched_now_coarse());   /* vs the max slice */
    }
}

/* ---- coming back from a suspension ------------------------------------------------
 * At a host sync or a launch (the suspended gate is not fast) of a
 * SUSPENDED process, once its retry time has come: one
 * short try of the lock (backoff from 100 ms, doubling to 5 s).  Got it: the
 * slot must still be the process's own (else scheduling fails open for
 * good), the gate is recomputed, and the process follows it again; each
 * thread catches up at its own next sync (its gate pointer goes back to
 * UNREG, so its next launch takes the slow path and gets the slot's gate). */
#define SCHED_RETRY_WAIT_NS (2ull * 1000000)

static void resume_try(sched_proc_t *p)
{
    uint64_t now = sched_now();
    if (now < util_load_relaxed(&p->retry_ns) ||
        pthread_mutex_trylock(&p->mu) != 0)
        return;
    if (util_load_acquire(&p->state) != SCHED_P_SUSPENDED ||
        now < p->retry_ns)
        goto out_unlock;
    if (shm_lock_retry(p->t, SCHED_RETRY_WAIT_NS) != 0) {
        uint64_t b = p->backoff_ns * 2;
        p->backoff_ns = b > SCHED_RETRY_MAX_NS ? SCHED_RETRY_MAX_NS : b;
        util_store_relaxed(&p->retry_ns, sched_now() + p->backoff_ns);
        goto out_unlock;
    }
    if (shm_slot_gen(p->t, p->slot) != p->gen ||
        util_load_relaxed(&p->me->magic) != SCHED_SLOT_MAGIC) {
        shm_unlock(p->t);
        sched_fail_open(p, "this process's slot in the table was overwritten while the "
                        "table's lock was out of reach");
        goto out_unlock;
    }
    sched_gate_update_locked(p->t, p->slot);
    shm_unlock(p->t);
    util_store_release(&p->state, SCHED_P_ACTIVE);
    sched_set_proc_gate(&p->me->gate);
    util_warn("GPU time slicing resumes for this process: the table's lock is usable again "
              "(suspended for %llu ms)",
              (unsigned long long)((sched_now() - p->suspended_ns) / 1000000));
out_unlock:
    pthread_mutex_unlock(&p->mu);
}

void sched_sync_end(sched_thread_t *th, sched_sync_kind_t kind, int ok,
                    sched_token_t (*fold)(void))
{
    (void)kind;                      /* every kind of host wait is a candidate */
    sched_proc_t *p = &sched_p;
    if (th->in_sync) {
        th->in_sync = 0;
        if (util_sub_relaxed(&p->me->in_sync, 1) == 0) {
            util_store_relaxed(&p->me->sync_since_ns, 0);
            util_store_relaxed(&p->me->blocked, 0);
        }
    }
    sched_pstate_t st = util_load_acquire(&p->state);
    if (UTIL_UNLIKELY(st == SCHED_P_SUSPENDED))
        resume_try(p);
    else if (UTIL_UNLIKELY(st == SCHED_P_NOSLOT))
        join_try(p);                 /* a boundary: a slot may have come free */
    if (th->gate != sched_proc_gate())   /* a suspension began or ended: catch up */
        th->gate = &sched_gate_unreg;
    if (!ok || util_load_acquire(&p->state) != SCHED_P_ACTIVE)
        return;
    pthread_mutex_lock(&p->mu);
    sched_token_t tok = { 0, 0 };
    if (fold)
        tok = fold();
    int boundary = sched_detect_feed(&p->det, tok);
    /* Iterations are timed to the ns; other syncs only show it still syncs. */
    uint64_t now = boundary || p->det.relocked || !p->det.period ? sched_now()
                                                                 : sched_now_coarse();
    util_debug("sync: %llu launches since the last, period %d, %s", (unsigned long long)tok.launches,
               p->det.period, boundary ? "iteration boundary" : "inside an iteration");
    if (p->det.relocked)
        iteration_restart(p, boundary, now);
    else if (boundary)
        iteration_done(p, now);
    util_store_relaxed(&p->last_sync_ns, now);   /* read unlocked: sched_holder_launch */
    int learning = !p->det.period;
    pthread_mutex_unlock(&p->mu);
    bump_activity(p->me);
    if (boundary || learning)
        open_host_gap(p, now);
    if (boundary) {
        sched_hook_boundary();
        mark_rest(p->me);
    }
    if (util_load_relaxed(&p->me->gate) != SCHED_GATE_OPEN)
        sched_yield_point(p, boundary);
}

SALUS_EXPORT void salus_iteration_end(void)
{
    sched_proc_t *p = &sched_p;
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&p->mu);
    sched_detect_hint(&p->det);
    int active = util_load_acquire(&p->state) == SCHED_P_ACTIVE;
    if (active)
        iteration_done(p, sched_now());
    pthread_mutex_unlock(&p->mu);
    if (!active)
        return;
    sched_hook_boundary();
    bump_activity(p->me);
    open_host_gap(p, sched_now());
    mark_rest(p->me);
    if (util_load_relaxed(&p->me->gate) != SCHED_GATE_OPEN)
        sched_yield_point(p, 1);
}

/* ---- fork and exit ---------------------------------------------------------------
 * The child of fork() is a new process: no slot, no lease, counts from zero.
 * p->mu is taken before the fork (util.h's order) so that no bookkeeping is
 * half done in the copy, and made anew in the child, whose forking thread
 * holds it. */

static void prefork(void)
{
    pthread_mutex_lock(&sched_p.mu);
}

static void postfork_parent(void)
{
    pthread_mutex_unlock(&sched_p.mu);
}

static void postfork_child(void)
{
    sched_proc_t *p = &sched_p;
    pthread_mutex_init(&p->mu, NULL);
    p->state = SCHED_P_UNREG;
    p->t = NULL;
    p->slot = SCHED_NO_SLOT;
    p->gen = 0;
    p->me = NULL;
    p->devset = 0;
    p->joined = 0;
    sched_detect_init(&p->det, SCHED_DET_AUTO);
    sched_kseq_reset(&p->kseq);
    p->kseq_on = 0;
    p->gap_n = 0;
    memset(p->gaps, 0, sizeof p->gaps);
    p->last_boundary_ns = p->waited_mark_ns = 0;
    p->iter_sum_ns = p->iter_count = 0;
    p->last_sync_ns = p->registered_ns = 0;
    p->settling = 0;
    sched_streams_changed();         /* the parent's streams are not the child's */
    sched_set_proc_gate(&sched_gate_unreg);
    sched_captures_reset();
    sched_drain_reset();
}

static void fork_register(void)
{
    util_fork_register(UTIL_FORK_SCHED, prefork, postfork_parent, postfork_child);
}

static void at_exit(void)
{
    sched_proc_t *p = &sched_p;
    sched_pstate_t active = SCHED_P_ACTIVE;
    if (!__atomic_compare_exchange_n(&p->state, &active, SCHED_P_EXITING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    sched_proc_gate_open();
    sched_release_all(p);
}
