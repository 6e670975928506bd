/*
 * yield.c - the holder's side of the lease: handing the GPU over at
 * boundaries (syncs, hints, the kernel boundaries of a program that does not
 * sync, past the max slice) when the policy says so, nudging a waiter when
 * it keeps it, and giving every device back at exit.  The waiter's side is
 * wait.c, which this calls (a launch that handed over waits its turn); it
 * calls nothing here.
 *
 * Divided into: decisions; yielding; exit.
 *
 * Locks: the table lock around every decision, never held while
 * synchronizing a context (the drain, after the grant) or across a wake;
 * p->mu for the process's own kernel record (sched_holder_launch).
 */
#include "sched/sched_int.h"

#include <limits.h>

#define SCHED_NOSYNC_NS (1000ull * 1000000)  /* no host sync this long: a no-sync program */

/* ---- decisions ------------------------------------------------------------ */

/* The holder keeps the GPU at a boundary while others wait: wake one waiter
 * (without a grant) so that it times its watch of the rest that may follow
 * (poll_rest) from this boundary rather than from its next periodic look.
 * At every such boundary: throttled to one a 2.5 ms, it halved what a
 * boundary costs beside 16 waiters (1.8 us against 3.2) but left a waiter
 * asleep when the grant came, and beside one busy CPU the handoff's p99
 * went from 8-18 us to 2.9 ms (bench/micro/handoff.c --hog 1). */

static void nudge_watcher(sched_proc_t *p, int d)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    for (int w = 0; w < SCHED_WAIT_WORDS; w++) {
        uint64_t bits = util_load_relaxed(&dev->waiters[w]);
        if (w * 64 <= p->slot && p->slot < w * 64 + 64)
            bits &= ~(1ull << (p->slot - w * 64));
        if (bits) {
            sched_slot_t *s = sched_slot(p->t, w * 64 + __builtin_ctzll(bits));
            if (s)
                shm_futex_wake(&s->grant, 1);
            return;
        }
    }
}

/* Hand device d over if the policy says so, then drain: the grant closed
 * this process's gate and asked it to drain (the mark the new holder waits
 * for), and this thread serves that request at once (drain.c: every context
 * the process launched into synchronized; a stream or event sync leaves its
 * other streams running).  1 if handed over. */
/* The grant marks d drain-pending and closes our gates; this thread drains
 * (the GPU is nearly done at a boundary) and answers before it wakes the new
 * holder, which then finds the answer and starts: one wake-up per handoff,
 * not a second for the answer (nor one of our drain thread).  Should the
 * drain not happen here (a capture opened meanwhile on another thread), the
 * drain thread is woken for it. */
int sched_hand_over(sched_proc_t *p, int d, int to)
{
    sched_grant_self_drain(p->slot);
    if (to == SCHED_PICK)
        to = sched_grant_pick_locked(p->t, d, sched_now(), 0);
    else
        sched_grant_locked(p->t, d, to, sched_now(), 0);
    sched_grant_self_drain(-1);
    shm_unlock(p->t);
    if (sched_drain_serve(p->me) != 0)
        shm_futex_wake(&p->me->drain_req, INT_MAX);
    if (to >= 0)
        sched_wake(p->t, to);
    return to;
}

static int yield_device(sched_proc_t *p, int d, int boundary)
{
    if (sched_captures() > 0)        /* the drain would break it: wait for its end */
        return 0;
    if (sched_lock_or_fail(p))
        return 0;
    if (sched_own_slot_spoiled_locked(p))
        return 0;                    /* given up, unlocked, said */
    int to = sched_decide_locked(p->t, d, p->slot, boundary, sched_now());
    if (to == SCHED_NO_SLOT) {
        shm_unlock(p->t);
        if (boundary)
            nudge_watcher(p, d);
        return 0;
    }
    shm_set_state(p->t, p->slot, SHM_IDLE);
    sched_hand_over(p, d, to);
    util_debug("device %d: the GPU goes to slot %d at a %s", d, to,
               boundary ? "boundary" : "sync past the max slice");
    return 1;
}

/* ---- yielding ---------------------------------------------------------------- */

void sched_yield_point(sched_proc_t *p, int boundary)
{
    uint32_t devset = util_load_relaxed(&p->devset);
    while (devset) {                     /* at every boundary: the devices used only */
        int d = __builtin_ctz(devset);
        devset &= devset - 1;
        sched_dev_t *dev = sched_dev(p->t, d);
        if (!dev || util_load_relaxed(&dev->lease) != sched_my_lease(p) ||
            (!sched_any_waiter(dev) &&
             !util_load_relaxed(&p->me->gang_yield)))  /* its gang yields */
            continue;
        yield_device(p, d, boundary);
    }
}

/* A launch by the holder while others wait, PROBEd: one in a while for a
 * program that syncs (which is handed over at its syncs), every one for a
 * program that does not (its gate stays PROBE), whose kernels are recorded
 * from then on.  For one that does not (no host sync for
 * SCHED_NOSYNC_NS, since it registered if it never synced), the boundary is
 * before the kernel its sequence launches once per iteration (detect.c),
 * once the quantum is used.  Not
 * "no sync in this tenure": a holder that was granted the GPU while it was
 * not scheduled has used its quantum before its first sync, and would be
 * cut mid-iteration.  Past the max slice without a boundary, any launch.
 * The context is synchronized before the handover. */
int sched_holder_launch(sched_proc_t *p, int d, uint64_t handle)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (!sched_dev_shares(dev))
        return 0;
    int waiter = sched_any_waiter(dev);
    uint64_t now = sched_now_coarse();     /* vs a quantum, a slice, a second: ms */
    uint64_t last = util_load_relaxed(&p->last_sync_ns);
    uint64_t quiet = last ? last : p->registered_ns;
    int no_sync = now > quiet && now - quiet >= SCHED_NOSYNC_NS;
    /* Alone, syncing and not recording: nothing to do, and no lock (the
     * record changes under p->mu only, and starts only when no_sync). */
    if (!waiter && !no_sync && !util_load_relaxed(&p->kseq_on))
        return 0;
    pthread_mutex_lock(&p->mu);
    if (waiter)
        p->waiter_seen_ns = now;
    /* The kernel sequence must see every launch, or the gaps it measures
     * are wrong: a no-sync holder keeps its gate probing (slow) for a while
     * after the last waiter went, so that a peer's host phase leaves no
     * hole in it; with nobody waiting for that long, its launches go fast. */
    int watch = no_sync && now - p->waiter_seen_ns < SCHED_NOSYNC_NS;
    if (watch && !p->kseq_on)                /* every launch from now on: a clean record */
        sched_kseq_reset(&p->kseq);
    if (p->kseq_on != watch)                 /* the gate probes while it watches */
        util_store_relaxed(&p->me->kwatch, (uint32_t)watch);
    util_store_relaxed(&p->kseq_on, watch);
    if (watch)
        sched_kseq_push(&p->kseq, handle);
    if (!waiter) {
        pthread_mutex_unlock(&p->mu);
        return watch;
    }
    uint64_t since = util_load_relaxed(&dev->since_ns);
    uint64_t held = now > since ? now - since : 0;
    uint32_t q = util_load_relaxed(&dev->quantum_ms);
    uint64_t slice = sched_dev_max_slice_ns(dev);
    int at = watch && held >= (uint64_t)q * 1000000ull &&
             sched_kseq_find(&p->kseq) && sched_kseq_at_anchor(&p->kseq);
    pthread_mutex_unlock(&p->mu);
    int over = sched_since_boundary(p->t, d, p->slot, now) >= slice;
    if (at)                                  /* a boundary, whatever the policy says */
        util_store_relaxed(&p->me->boundary_ns, now);

    if ((at || over) && yield_device(p, d, at))
        sched_acquire(p, d);                 /* this launch waits its turn */
    return watch;
}

/* ---- exit --------------------------------------------------------------------- */

void sched_release_all(sched_proc_t *p)
{
    if (shm_lock(p->t) != 0)
        return;
    uint64_t now = sched_now();
    sched_dev_t *dev;
    SCHED_FOR_EACH_DEV(p->t, d, dev) {
        sched_dequeue_locked(p->t, d, p->slot);
        if (dev->lease == sched_my_lease(p))
            sched_grant_pick_locked(p->t, d, now, 1);
    }
    util_store_relaxed(&p->me->devset, 0);
    sched_gate_update_locked(p->t, p->slot);
    shm_unlock(p->t);
}
