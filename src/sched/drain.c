/*
 * drain.c - exclusive handoffs: under every gated policy, no work of a new
 * holder reaches a device before the work the previous holder queued there
 * has finished, on all its streams, contexts and threads.  A sync of one
 * stream or event (a boundary) says nothing of the process's other streams,
 * and a holder that polls, or has work queued ahead (JAX dispatches up to
 * 32 executions), is not done when its lease is taken.
 *
 * Divided into: the contexts the process launched into; stream captures;
 * draining oneself; the process's own slot; the drain thread; the new
 * holder's wait.
 *
 * How.  Every grant away from a holder (it yields at its own sync or max
 * slice; a waiter takes the GPU at its rest, idleness, stop or max slice;
 * it exits) marks the device "drain pending from slot S, request n" and
 * bumps S's drain_req (lease.c, sched_drain_mark_locked).  A holder that
 * yields serves the request itself at once, after its grant (wait.c,
 * yield_device); otherwise S's drain thread, asleep on that word, does: it
 * synchronizes every context the process launched into and publishes
 * drain_done = n.  Draining after the grant, not before it, matters: until
 * the grant closes the gate, the holder's other threads keep launching on
 * the fast path.  The
 * new holder, before its first submission (the end of sched_acquire), waits
 * for drain_done >= n, or S's death (its contexts, and their work, are gone
 * with it), or S's stop (its drain thread is stopped too: the work it
 * queued runs out beside the new holder's first kernels), or a bound: as
 * long as the work queued takes once S's drain began (up to
 * SCHED_DRAIN_WORK_NS: a wedged kernel, a long capture), SCHED_DRAIN_MAX_NS
 * before it began, or for a gang's member or a holder blocked on another
 * process's work (drain_deadline); the new holder then goes on, said once.  Its tenure (since_ns, what fair and srtf charge) starts
 * when the wait ends; the previous holder is charged up to then.
 *
 * Ordering argument.  The mark is written under the table lock together
 * with the grant (lease word, gates: the old holder's gate is CLOSED from
 * then on), and the request word is stored with release after the mark.
 * The drain thread loads drain_req with acquire, so its synchronizes start
 * after the gate was CLOSED; a launch of the old holder that loads its gate
 * after that takes the slow path and waits for the lease again.  Its answer
 * (drain_done, release) follows the synchronizes, and the new holder loads
 * it with acquire before it submits.  What remains is a launch that loaded
 * its gate OPEN or CONTENDED before the grant and reaches the driver after
 * the drain's synchronize began: the drain synchronizes twice, so that such
 * a launch, in flight during the first pass, is waited for by the second;
 * only a thread descheduled between its gate load and the driver's enqueue
 * for longer than both passes can still overlap (the fast path has no room
 * for a count after the driver call).  No context is synchronized while a
 * capture is open (it would be invalidated: stream captures, below, says
 * how a capture that begins during a drain is kept apart from it): the
 * drain thread waits for its end, which the new holder's bounded wait
 * covers, the old holder being charged for the wait.
 *
 * Locks: ctxs.mu (a leaf: nothing is taken or called while holding it)
 * guards the set of contexts; the table lock is taken only to clear a mark
 * and charge the tenure, and for a look at the process's own slot that
 * found something wrong.  No driver call under any lock.
 */
#include "sched/sched_int.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define SCHED_DRAIN_CTXS     16                     /* contexts remembered */
#define SCHED_DRAIN_MAX_NS   (1000ull * 1000000)    /* a new holder's wait for a drain
                                                       to begin, or for a blocked one */
#define SCHED_DRAIN_WORK_NS  (10000ull * 1000000)   /* ... for the work of one begun */
#define SCHED_DRAIN_LOOK_NS  (2ull * 1000000)       /* its look at the old holder's life */
#define SCHED_DRAIN_IDLE_NS  (1000ull * 1000000)    /* the drain thread's re-look */
#define SCHED_DRAIN_CAPTURE_NS (2ull * 1000000)     /* its look at a capture's end */

/* ---- the contexts the process launched into --------------------------------- */

static struct {
    pthread_mutex_t mu;
    int n;
    CUcontext ctx[SCHED_DRAIN_CTXS];
    unsigned epoch;              /* bumped in a fork child: threads' caches are void */
    int thread_started;
} ctxs = { .mu = PTHREAD_MUTEX_INITIALIZER };

static __thread struct { unsigned epoch; CUcontext last; } seen;

void sched_drain_note_context(CUcontext c)
{
    if (!c)
        return;
    unsigned epoch = util_load_relaxed(&ctxs.epoch);
    if (seen.epoch == epoch && seen.last == c)
        return;
    pthread_mutex_lock(&ctxs.mu);
    int i = 0;
    while (i < ctxs.n && ctxs.ctx[i] != c)
        i++;
    if (i == ctxs.n) {
        if (ctxs.n == SCHED_DRAIN_CTXS) {    /* the oldest goes: contexts are few */
            memmove(ctxs.ctx, ctxs.ctx + 1, (SCHED_DRAIN_CTXS - 1) * sizeof ctxs.ctx[0]);
            ctxs.n--;
        }
        ctxs.ctx[ctxs.n++] = c;
    }
    pthread_mutex_unlock(&ctxs.mu);
    seen.epoch = epoch;
    seen.last = c;
}

/* A context the driver refuses (destroyed since): not synchronized again. */
static void forget_context(CUcontext c)
{
    pthread_mutex_lock(&ctxs.mu);
    for (int i = 0; i < ctxs.n; i++)
        if (ctxs.ctx[i] == c) {
            ctxs.ctx[i] = ctxs.ctx[--ctxs.n];
            break;
        }
    pthread_mutex_unlock(&ctxs.mu);
    util_add_relaxed(&ctxs.epoch, 1);   /* re-noted if alive */
}

/* ---- stream captures --------------------------------------------------------------
 * Under CU_STREAM_CAPTURE_MODE_GLOBAL (PyTorch's and vLLM's default) a
 * context synchronize from any thread of the process invalidates every
 * capture in progress, and so does one from the capturing thread in any
 * mode but RELAXED.  So the drain synchronizes nothing while any capture of
 * the process is open, whatever its mode (cuStreamBeginCapture,
 * cuStreamBeginCaptureToGraph), and checks before each synchronize, not
 * once per drain: a capture may begin between two.
 *
 * Ordering argument.  A check followed by a synchronize leaves a window in
 * which another thread begins a capture.  It is closed Dekker's way, with
 * two counters and sequentially consistent operations: the drain raises
 * `syncing`, then reads `captures`, and synchronizes only if it read 0; a
 * capture's begin (intercept, before the driver's call) raises `captures`,
 * then reads `syncing`, and calls the driver only once it reads 0.  In the
 * single total order one of the two raises comes first, so at least one
 * side sees the other: either the drain defers (it lowers `syncing` at
 * once), or the begin waits until the synchronize in progress has returned
 * (a futex on `syncing`, woken by the drain when a capture is pending, and
 * a 1 ms bound on each sleep so that a lost wake costs a millisecond; past
 * SCHED_DRAIN_MAX_NS the begin goes on, said once, rather than hang behind
 * work that never ends).  A begin that then fails is lowered again
 * (sched_capture_end).  Neither
 * side waits for the other while the other waits: the drain never waits. */

static uint32_t captures;        /* captures open or beginning (seq_cst) */
static uint32_t syncing;         /* drain synchronizes in progress (seq_cst) */

void sched_capture_begin(void)
{
    static int said;
    uint32_t s;
    uint64_t until = 0;
    __atomic_add_fetch(&captures, 1, __ATOMIC_SEQ_CST);
    while ((s = __atomic_load_n(&syncing, __ATOMIC_SEQ_CST)) != 0) {
        uint64_t now = util_now_ns();
        if (!until) {
            until = now + SCHED_DRAIN_MAX_NS;
        } else if (now >= until) {       /* never hang the host: a wedged synchronize */
            util_log_once(&said, UTIL_LOG_WARN, "a stream capture begins while libsalus "
                          "has waited %llu ms in a call a capture forbids (a context "
                          "synchronize of work that does not finish, or a long page-out); "
                          "the capture may be invalidated",
                          (unsigned long long)(SCHED_DRAIN_MAX_NS / 1000000));
            return;
        }
        shm_futex_wait(&syncing, s, 1000000ull);
    }
}

/* Never below zero: an end without a begin seen (libsalus loaded late). */
void sched_capture_end(void)
{
    uint32_t c = __atomic_load_n(&captures, __ATOMIC_RELAXED);
    while (c > 0 && !__atomic_compare_exchange_n(&captures, &c, c - 1, 1, __ATOMIC_SEQ_CST,
                                                 __ATOMIC_RELAXED))
        ;
}

int sched_captures(void)
{
    return (int)__atomic_load_n(&captures, __ATOMIC_SEQ_CST);
}

void sched_captures_reset(void)
{
    util_store_relaxed(&captures, 0);
    util_store_relaxed(&syncing, 0);
}

/* `syncing` counts every call a capture forbids, not the drain's alone:
 * paging's copies and unmaps (src/page) and the keep-tick's unmaps (the
 * drain thread, below) enter the same way. */
int sched_unsafe_begin(void)
{
    __atomic_add_fetch(&syncing, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&captures, __ATOMIC_SEQ_CST) == 0)
        return 0;
    sched_unsafe_end();
    return -1;
}

void sched_unsafe_end(void)
{
    __atomic_sub_fetch(&syncing, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&captures, __ATOMIC_SEQ_CST) != 0)
        shm_futex_wake(&syncing, INT_MAX);      /* a begin may wait for this one */
}

/* The current context synchronized, unless a capture is open (or
 * beginning): -1 then, and nothing was called. */
static int sync_unless_capture(const drv_t *drv)
{
    if (sched_unsafe_begin() != 0)
        return -1;
    if (drv->ctx_synchronize)
        drv->ctx_synchronize();
    sched_unsafe_end();
    return 0;
}

/* ---- draining oneself ---------------------------------------------------------- */

/* One pass: push each context on the calling thread, synchronize it, pop it
 * (the thread's own stack is as it was).  Without push and pop in the
 * driver, the current context alone.  -1 as soon as a capture is open. */
static int sync_pass(const drv_t *drv)
{
    CUcontext set[SCHED_DRAIN_CTXS];
    pthread_mutex_lock(&ctxs.mu);
    int n = ctxs.n;
    memcpy(set, ctxs.ctx, (size_t)n * sizeof set[0]);
    pthread_mutex_unlock(&ctxs.mu);
    if (!drv->ctx_push_current || !drv->ctx_pop_current || n == 0)
        return sync_unless_capture(drv);
    for (int i = 0; i < n; i++) {
        CUcontext popped;
        if (drv->ctx_push_current(set[i]) != CUDA_SUCCESS) {
            forget_context(set[i]);
            continue;
        }
        int rc = sync_unless_capture(drv);
        drv->ctx_pop_current(&popped);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static void (*between_passes)(void);     /* a test's seam (sched_drain_set_seam) */

void sched_drain_set_seam(void (*fn)(void))
{
    util_store_release(&between_passes, fn);
}

int sched_drain_self(void)
{
    const drv_t *drv = sched_drv();
    if (!drv)
        return sched_captures() > 0 ? -1 : 0;
    if (sync_pass(drv) != 0)
        return -1;
    void (*seam)(void) = util_load_acquire(&between_passes);
    if (seam)
        seam();
    return sync_pass(drv);           /* a launch in flight during the first (above) */
}

/* ---- the process's own slot (sched_int.h) ------------------------------------
 * What a stray write into the table can do to the slot of a holder: its
 * state word at free (0) makes its lease stale, so that peers take the GPU
 * while it goes on launching; its gate word at OPEN keeps its launches on
 * the fast path, so that a holder that never syncs never looks again and
 * its waiters wait its whole max slice.  The owner cannot trust a slot so
 * spoiled (it cannot tell what else was written), nor repair it for good:
 * it gives its leases away, leaves every queue and runs unscheduled,
 * saying so once, as a waiter whose slot is spoiled does (wait.c,
 * recheck).  Looked at by the drain thread (a lock-free look first, the
 * lock only when something looks wrong) and by the holder at its yields. */

/* Under the lock: what is wrong with the process's own slot, or NULL. */
static const char *own_slot_fault_locked(sched_proc_t *p)
{
    static char why[256];                /* under the table lock */
    if (shm_slot_gen(p->t, p->slot) != p->gen)
        return "its state word no longer names this process";
    if (util_load_relaxed(&p->me->magic) != SCHED_SLOT_MAGIC)
        return "its scheduler magic word was overwritten";
    if (__atomic_load_n(&p->settling, __ATOMIC_SEQ_CST) != 0)
        return NULL;                     /* its gate may read OPEN until settled: gate.c */
    const char *bad = sched_check_slot_locked(p->t, p->slot);
    if (!bad)
        return NULL;
    snprintf(why, sizeof why, "its gate word is wrong: %s", bad);
    return why;
}

int sched_own_slot_spoiled_locked(sched_proc_t *p)
{
    static char why[512];                /* under the table lock */
    if (util_load_acquire(&p->state) != SCHED_P_ACTIVE)
        return 0;
    const char *fault = own_slot_fault_locked(p);
    if (!fault)
        return 0;
    uint64_t mine = sched_lease_of(p->slot, p->gen), now = sched_now();
    int gave = 0;
    sched_dev_t *dev;
    SCHED_FOR_EACH_DEV(p->t, d, dev) {
        sched_dequeue_locked(p->t, d, p->slot);
        if (util_load_relaxed(&dev->lease) == mine) {   /* the word, stale or not */
            sched_grant_pick_locked(p->t, d, now, 1);
            gave++;
        }
    }
    util_store_relaxed(&p->me->devset, 0);
    snprintf(why, sizeof why, "this process's slot in the table was overwritten (%s); it "
             "gave up %d GPU lease%s to the processes waiting, and runs unscheduled from now "
             "on (restart it to be scheduled again)", fault, gave, gave == 1 ? "" : "s");
    shm_unlock(p->t);
    sched_fail_open(p, why);
    if (sched_drain_serve(p->me) != 0)       /* a capture: the drain thread answers */
        shm_futex_wake(&p->me->drain_req, INT_MAX);
    return 1;
}

/* Lock-free: whether the slot looks spoiled (the lock then tells). */
static int own_slot_suspect(sched_proc_t *p)
{
    sched_slot_t *me = p->me;
    uint32_t gate = util_load_relaxed(&me->gate);
    if (shm_slot_gen(p->t, p->slot) != p->gen ||
        util_load_relaxed(&me->magic) != SCHED_SLOT_MAGIC ||
        gate > SCHED_GATE_PROBE || gate == SCHED_GATE_UNREG)
        return 1;
    if (!SCHED_GATE_FAST(gate) && gate != SCHED_GATE_PROBE)
        return 0;
    uint32_t devset = util_load_relaxed(&me->devset);
    uint64_t mine = sched_lease_of(p->slot, p->gen);
    sched_dev_t *dev;
    SCHED_FOR_EACH_DEV(p->t, d, dev) {
        if (!(devset & (1u << d)) ||
            !(sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED))
            continue;
        if (util_load_acquire(&dev->lease) != mine)
            return 1;                    /* fast, yet another holds it */
        if (gate == SCHED_GATE_OPEN && sched_any_waiter(dev))
            return 1;                    /* fifo's holder too: the lock tells */
    }
    return 0;
}

void sched_own_slot_look(sched_proc_t *p)
{
    if (util_load_acquire(&p->state) != SCHED_P_ACTIVE || !p->t || !own_slot_suspect(p))
        return;
    int rc = shm_lock(p->t);
    if (rc != 0) {
        sched_lock_failed(p, rc);
        return;
    }
    if (!sched_own_slot_spoiled_locked(p))
        shm_unlock(p->t);
}

void sched_nudge_owner(shm_table_t *t, uint64_t lease)
{
    uint32_t lo = (uint32_t)lease;
    sched_slot_t *s = lo >= 1 && lo <= SHM_MAX_SLOTS ? sched_slot(t, (int)lo - 1) : NULL;
    if (s)
        shm_futex_wake(&s->drain_req, INT_MAX);
}

/* ---- the drain thread ------------------------------------------------------------
 * Asleep on its slot's drain_req; at a request it drains the process and
 * answers.  Detached, with every asynchronous signal blocked (the program's
 * handlers run on its own threads; a SIGBUS from a truncated table must
 * reach ipc's guard); it never exits the process or keeps it from exiting. */

/* 0 when served, -1 when a capture is in progress (its end serves).  Two
 * servers (the yielding thread, the drain thread) may answer out of order:
 * drain_done may go back to an older request, which only makes a waiter
 * wait for the drain thread's next pass, which sees req != done. */
static int serve(sched_slot_t *me)
{
    uint32_t req = util_load_acquire(&me->drain_req);
    if (req == util_load_relaxed(&me->drain_done))
        return 0;
    util_store_release(&me->drain_busy, req);      /* the waiter's longer bound */
    if (sched_drain_self() != 0)
        return -1;
    util_store_release(&me->drain_done, req);
    shm_futex_wake(&me->drain_done, INT_MAX);
    return 0;
}

int sched_drain_serve(sched_slot_t *me)
{
    return serve(me);
}

static void *drain_main(void *arg)
{
    sched_slot_t *me = arg;
    for (;;) {
        uint32_t req = util_load_acquire(&me->drain_req);
        if (req != util_load_relaxed(&me->drain_done)) {
            if (serve(me) != 0)                     /* a capture: its end serves */
                shm_futex_wait(&me->drain_req, req, SCHED_DRAIN_CAPTURE_NS);
            continue;
        }
        sched_own_slot_look(&sched_p);              /* a waiter may have nudged us */
        uint64_t tick = SCHED_DRAIN_CAPTURE_NS;     /* a capture: its unmaps after it */
        if (sched_unsafe_begin() == 0) {
            tick = sched_hook_tick();               /* memory's keep-alive: sooner */
            sched_unsafe_end();
        }
        shm_futex_wait(&me->drain_req, req,
                       tick && tick < SCHED_DRAIN_IDLE_NS ? tick : SCHED_DRAIN_IDLE_NS);
    }
    return NULL;
}

void sched_drain_start(sched_proc_t *p)
{
    static int said;
    if (ctxs.thread_started)
        return;
    pthread_attr_t a;
    sigset_t all, old;
    pthread_t th;
    if (pthread_attr_init(&a) != 0)
        return;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 64 * 1024);
    sigfillset(&all);
    sigdelset(&all, SIGBUS);         /* synchronous: ipc's guard handles a table */
    sigdelset(&all, SIGSEGV);        /* truncated under us; blocked, they would kill */
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&th, &a, drain_main, p->me);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (rc == 0)
        ctxs.thread_started = 1;
    else
        util_log_once(&said, UTIL_LOG_WARN, "cannot start the drain thread (error %d): a "
                      "waiter that takes this process's GPU waits up to %llu ms for its "
                      "work instead", rc, (unsigned long long)(SCHED_DRAIN_MAX_NS / 1000000));
}

void sched_drain_reset(void)
{
    pthread_mutex_init(&ctxs.mu, NULL);
    ctxs.n = 0;
    ctxs.thread_started = 0;
    util_add_relaxed(&ctxs.epoch, 1);
}

/* ---- the new holder's wait ----------------------------------------------------- */

/* Under the lock: the wait for (from1, seq) is over at now; if the mark is
 * still that one, clear it, charge the old holder the drain, and start the
 * new holder's tenure if it is p's. */
static void drained_locked(sched_proc_t *p, int d, uint32_t from1, uint32_t seq, uint64_t now)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (dev->drain_from != from1 || dev->drain_seq != seq)
        return;
    util_store_release(&dev->drain_from, 0);
    if (dev->lease != sched_lease_of(p->slot, p->gen) || now <= dev->since_ns)
        return;
    int from = (int)from1 - 1;
    uint64_t extra = now - dev->since_ns;
    if (from != p->slot && from < SHM_MAX_SLOTS && shm_slot_gen(p->t, from) == dev->drain_gen) {
        sched_slot_t *f = sched_slot(p->t, from);
        util_add_relaxed(&f->held_ns, extra);
        f->vtime[d] += sched_vtime_charge(f->priority, extra);
    }
    dev->since_ns = now;
}

/* Whether the drain (from, gen, seq) needs no more waiting: answered, its
 * process gone, or stopped (marked so by the waiter that took the GPU from
 * it: its drain thread is stopped with it, and what it queued runs out on
 * the GPU by itself, so waiting would only idle the GPU longer). */
static int drain_over(shm_table_t *t, int from, uint32_t gen, uint32_t seq, uint32_t *done)
{
    sched_slot_t *f = sched_slot(t, from);
    *done = util_load_acquire(&f->drain_done);
    return (int32_t)(*done - seq) >= 0 || shm_slot_gen(t, from) != gen ||
           util_load_relaxed(&f->stopped_ns) != 0 ||
           !shm_slot_alive(t, from);
}

/* How long a new holder waits for a drain, from `start`.  Once the old
 * holder's drain began serving this request (drain_busy), the work it
 * waits for is work the old holder queued, which the driver runs out
 * however long it is (JAX queues 32 executions): SCHED_DRAIN_WORK_NS, so
 * that the handoff stays exclusive, charged to the old holder.
 * SCHED_DRAIN_MAX_NS instead where the queued work may wait for another
 * process's, which may wait for this lease (a deadlock only going on
 * ends): a member of a gang (its ranks' kernels wait for each other's, and
 * a gang's devices change hands one at a time), and a holder a waiter
 * found blocked in a sync on another process's work (blocked.c); and
 * before the drain began (its drain thread stuck in an earlier one, a
 * wedged process).  Either way bounded, whatever the words say. */
static uint64_t drain_deadline(shm_table_t *t, int from, uint32_t seq, uint64_t start)
{
    sched_slot_t *f = sched_slot(t, from);
    int begun = (int32_t)(util_load_acquire(&f->drain_busy) - seq) >= 0;
    int alone = util_load_relaxed(&f->gang) == 0 && util_load_relaxed(&f->blocked) == 0;
    return start + (begun && alone ? SCHED_DRAIN_WORK_NS : SCHED_DRAIN_MAX_NS);
}

static void say_late(shm_table_t *t, int d, int from, uint64_t waited)
{
    static int said;
    int ganged = util_load_relaxed(&sched_slot(t, from)->gang) != 0;
    util_log_once(&said, UTIL_LOG_WARN,
                  "device %d: the previous holder (slot %d) did not finish its GPU work "
                  "within %llu ms (wedged, waiting for another process's work, or inside "
                  "a long capture); this process goes on, and its first kernels may share "
                  "the GPU with that work%s", d, from, (unsigned long long)(waited / 1000000),
                  ganged ? "" : " (processes of one job whose kernels wait for each other's "
                  "should form a gang: SALUS_GANG)");
}

int sched_drain_await(sched_proc_t *p, int d)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    uint64_t start = sched_now();
    int slept = 0;
    for (;;) {
        uint32_t from1 = util_load_acquire(&dev->drain_from);
        if (from1 == 0)
            return slept;
        uint32_t gen = util_load_relaxed(&dev->drain_gen);
        uint32_t seq = util_load_relaxed(&dev->drain_seq), done = 0;
        int from = (int)from1 - 1;
        int over = from >= SHM_MAX_SLOTS || from == p->slot ||
                   drain_over(p->t, from, gen, seq, &done);
        uint64_t now = sched_now();
        if (!over && now >= drain_deadline(p->t, from, seq, start)) {
            say_late(p->t, d, from, now - start);
            over = 1;
        }
        if (over) {
            int rc = shm_lock(p->t);
            if (rc != 0) {
                sched_lock_failed(p, rc);
                return slept;
            }
            drained_locked(p, d, from1, seq, now);
            shm_unlock(p->t);
            return slept;
        }
        shm_futex_wait(&sched_slot(p->t, from)->drain_done, done, SCHED_DRAIN_LOOK_NS);
        slept = 1;
    }
}
