/*
 * wait.c - a process's side of the lease: acquiring it (or waiting for it),
 * watching the holder while waiting, and handing the GPU over at boundaries.
 *
 * Divided into: watching the holder (dead, stopped, idle, gone, past its
 * slice; what a waiter says of a blocked or stopped one is blocked.c's);
 * acquiring and waiting.  The holder's side, yielding at syncs, hints and
 * kernel boundaries and at exit, is yield.c.
 *
 * Waiting.  A process without the lease enqueues itself under the table
 * lock (which marks the holder CONTENDED, so that it looks at its next
 * boundary), spins on the lease word for SCHED_SPIN_NS, then sleeps on its
 * own slot's grant word with a timeout of SCHED_POLL_NS.  A grant wakes it
 * directly (lease.c explains why no grant is missed; the spin, like the
 * sleep, trusts only the lease word).  At each timeout it looks at the
 * holder:
 *   - no valid holder (freed, stale generation): the policy's pick gets it;
 *   - holder dead (its liveness lock is gone): reap it; the reap hook hands
 *     the lease on.  Detection within SCHED_POLL_NS, well under 100 ms;
 *   - holder at rest since its last boundary for SCHED_REST_NS, or idle
 *     inside an iteration (its activity word unchanged, not inside a sync,
 *     while it used the CPU or slept - not merely while it was not
 *     scheduled - for a few of its iterations): the lease is taken from it
 *     and granted by policy (work conserving).  Not under fifo, which never
 *     shares.  A waiter that sees the holder at rest times its next look to
 *     the moment the rest reaches SCHED_REST_NS;
 *   - holder stopped (state T or t in /proc: SIGSTOP, Ctrl-Z, a debugger)
 *     for SCHED_STOP_NS: it is marked stopped (left out of every pick until
 *     it runs again and clears the mark), the stop is left out of its
 *     tenure (not charged as GPU time), and the lease is granted by policy.
 *     Under every policy, fifo's too, and before a paged-out waiter's rule
 *     (sched.h's paged_out): one whose memory has room beside the stopped
 *     one's takes it; one whose memory could come back only once the
 *     stopped one paged out waits, and says why once (blocked.c);
 *   - holder past its max slice without a boundary by SCHED_SLICE_GRACE_NS
 *     more (the holder enforces the slice itself at its next launch or sync;
 *     one that makes none, stuck on the host, is enforced here); one blocked
 *     inside a sync past the max slice is said first (blocked holders).
 * Every SCHED_RECHECK_NS of waiting the waiter re-examines its own standing
 * under the lock: its slot still its own, its place among the waiters (put
 * back if a repair dropped it); so no wait depends on a wake-up alone.
 *
 * A new holder submits nothing before the last holder's work is done: a
 * holder yielding at its sync drains itself first, and the new holder waits
 * for a drain the grant asked for (drain.c).
 *
 * Locks: the table lock around every decision, never held while sleeping,
 * while synchronizing a context, or across a call into the driver; p->mu
 * only for the process's own bookkeeping, never held while taking the table
 * lock here.  Views are static buffers used under the table lock only.
 */
#include "sched/sched_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCHED_POLL_NS          (10ull * 1000000)     /* a waiter's look at the holder */
#define SCHED_IDLE_ITERS       3                     /* idle: this many iterations */
#define SCHED_IDLE_MIN_NS      (200ull * 1000000)   /* well above CPU scheduling stalls */
#define SCHED_IDLE_MAX_NS      (5000ull * 1000000)
#define SCHED_IDLE_UNKNOWN_NS  (500ull * 1000000)   /* before a first iteration */
#define SCHED_REST_NS          (5ull * 1000000)     /* idle at rest between iterations */
#define SCHED_SPIN_NS          (20ull * 1000)       /* a waiter's spin before it sleeps */
#define SCHED_STOP_NS          (30ull * 1000000)    /* stopped this long: not a stray look */
#define SCHED_SLICE_GRACE_NS   (200ull * 1000000)   /* the holder's own slice check first */
#define SCHED_RECHECK_NS       (1000ull * 1000000)  /* a waiter re-examines its standing */

enum { W_WAIT, W_GOT, W_PASS };

/* ---- watching the holder --------------------------------------------------- */

/* What a waiter knows of the holder's idleness: how long it has done no GPU
 * work (no launch, no sync) while it had the CPU or slept.  A holder that is
 * merely not scheduled (a loaded machine, a stalled vCPU) is not idle: its
 * CPU time does not advance and it does not sleep. */
typedef struct idle_track {
    uint64_t lease, activity;
    uint64_t since;              /* first poll that saw this activity value */
    uint64_t last;               /* the previous poll */
    uint64_t cpu0;               /* the holder's CPU time when first measured */
    uint64_t slept;              /* wall time it was seen asleep */
    int measured;                /* 0 not yet, 1 cpu0 valid, -1 wall time only */
    int asleep;                  /* asleep at the previous poll */
    uint64_t stopped_lease;      /* the lease under which... */
    uint64_t stopped_since;      /* ...the holder was first seen stopped, 0: not */
    int stopped_said;            /* this stop's wait is said (poll_stopped) */
} idle_track_t;

/* The CPU time of a process (all its threads), whether its main thread
 * sleeps and whether it is stopped, from /proc/<pid>/stat; -1 when
 * unreadable or when its start time is not the slot's (another pid
 * namespace, a recycled pid). */
static int proc_stat(const shm_ident_t *id, uint64_t *cpu_ns, int *asleep, int *stopped)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)id->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *f = strrchr(buf, ')');             /* fields after comm: 3 state ... */
    if (!f || f[1] != ' ')
        return -1;
    f += 2;
    char state = *f;
    unsigned long long v[23] = { 0 };
    for (int field = 3; field <= 22 && f; field++) {
        if (field > 3)
            v[field] = strtoull(f, NULL, 10);
        f = strchr(f, ' ');
        f = f ? f + 1 : NULL;
    }
    if (!f || (id->start_ticks && v[22] != id->start_ticks))
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    *cpu_ns = (uint64_t)(v[14] + v[15]) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
    *asleep = state == 'S' || state == 'D';
    *stopped = state == 'T' || state == 't';
    return 0;
}

/* 1 when slot h's process is stopped (a signal or a debugger). */
static int holder_stopped(shm_table_t *t, int h)
{
    shm_ident_t id;
    uint64_t cpu;
    int asleep, stopped;
    return shm_slot_ident(t, h, &id) == 0 && proc_stat(&id, &cpu, &asleep, &stopped) == 0 &&
           stopped;
}

/* How long the holder has been idle: CPU time used plus time asleep since
 * its activity last changed (wall time when /proc cannot tell). */
static uint64_t idle_progress(shm_table_t *t, int h, idle_track_t *tr, uint64_t now)
{
    shm_ident_t id;
    uint64_t cpu = 0;
    int asleep = 0, stopped = 0;
    if (tr->measured >= 0 &&
        (shm_slot_ident(t, h, &id) != 0 || proc_stat(&id, &cpu, &asleep, &stopped) != 0))
        tr->measured = -1;
    if (tr->measured < 0)
        return now - tr->since;
    if (tr->measured == 0) {
        tr->measured = 1;
        tr->cpu0 = cpu;
        tr->asleep = asleep;
        tr->last = now;
        return 0;
    }
    if (tr->asleep && asleep)
        tr->slept += now - tr->last;
    tr->asleep = asleep;
    tr->last = now;
    return (cpu > tr->cpu0 ? cpu - tr->cpu0 : 0) + tr->slept;
}

/* How much idle progress takes the lease from a holder quiet inside an
 * iteration: a few of its iterations. */
static uint64_t idle_ns(const sched_slot_t *h)
{
    uint64_t it = util_load_relaxed(&h->iter_ns);
    if (it == 0)
        return SCHED_IDLE_UNKNOWN_NS;
    if (it > SCHED_IDLE_MAX_NS / SCHED_IDLE_ITERS)
        return SCHED_IDLE_MAX_NS;
    it *= SCHED_IDLE_ITERS;
    return it < SCHED_IDLE_MIN_NS ? SCHED_IDLE_MIN_NS : it;
}

static int got(const sched_proc_t *p, const sched_dev_t *dev)
{
    return util_load_acquire(&dev->lease) == sched_my_lease(p) ? W_GOT : W_WAIT;
}

/* Grant device d by policy if `lease` still names its holder (or none) and,
 * for an idle holder (idle: R_IDLE, R_FILL), it did nothing meanwhile
 * (since idle_ns, where its tenure's charge ends); for R_FILL, only as the
 * holder's boundary would (sched_rest_yield_locked). */
enum { R_FREE, R_IDLE, R_FILL };
static int regrant(sched_proc_t *p, int d, uint64_t lease, uint64_t activity, int idle,
                   uint64_t idle_ns)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (sched_lock_or_fail(p))
        return W_PASS;
    int to = SCHED_NO_SLOT;
    int h = sched_lease_holder(p->t, dev->lease);
    if (h < 0) {
        to = sched_grant_pick_locked(p->t, d, sched_now(), 0);
    } else if (idle && dev->lease == lease) {
        sched_slot_t *hs = sched_slot(p->t, h);
        if (util_load_relaxed(&hs->activity) == activity &&
            util_load_relaxed(&hs->in_sync) == 0 &&
            (idle != R_FILL || sched_rest_yield_locked(p->t, d, sched_now()))) {
            to = sched_take_from_idle_locked(p->t, d, idle_ns, sched_now());
            util_debug("device %d: slot %d is idle; the GPU goes to slot %d", d, h, to);
        }
    }
    shm_unlock(p->t);
    if (to >= 0 && to != p->slot)
        sched_wake(p->t, to);
    return got(p, dev);
}

/* Take device d from a holder that is stopped (since stopped_ns) or past its
 * max slice (stopped_ns 0), if `lease` still names it. */
static int take_over(sched_proc_t *p, int d, uint64_t lease, uint64_t stopped_ns)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (sched_lock_or_fail(p))
        return W_PASS;
    int to = SCHED_NO_SLOT, h = sched_lease_holder(p->t, dev->lease);
    uint64_t now = sched_now();
    if (dev->lease == lease && h >= 0) {
        to = stopped_ns ? sched_take_from_stopped_locked(p->t, d, stopped_ns, now)
                        : sched_grant_pick_locked(p->t, d, now, 0);
        util_info("device %d: slot %d %s; the GPU goes to slot %d", d, h,
                  stopped_ns ? "is stopped (a signal or a debugger)"
                             : "is past its max slice without a boundary", to);
    }
    shm_unlock(p->t);
    if (to >= 0 && to != p->slot)
        sched_wake(p->t, to);
    return got(p, dev);
}

/* A holder whose gang holds part of its devices while another process
 * holds the rest cannot run through (its ranks wait for the one without a
 * GPU), and waiting for it could close a cycle: its device goes to the
 * waiters at once (docs/design.md, Gangs).  Nor can one whose gang lost a
 * member: the dead one is reaped here (nobody may wait for its own device)
 * and the reaper's gang rule takes the peers' devices.  W_GOT or W_WAIT
 * after, -1 when it is neither. */
static int poll_partial(sched_proc_t *p, int d, int h, uint64_t lease)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (!util_load_relaxed(&sched_slot(p->t, h)->gang))
        return -1;
    if (sched_lock_or_fail(p))
        return W_PASS;
    if (dev->lease == lease && sched_gang_dead_locked(p->t, h)) {
        shm_reap_dead(p->t, 1);              /* the reap hook hands the devices on */
        shm_unlock(p->t);
        return got(p, dev);
    }
    int to = SCHED_NO_SLOT, partial = dev->lease == lease && sched_gang_partial_locked(p->t, h);
    if (partial) {
        to = sched_grant_pick_locked(p->t, d, sched_now(), 0);
        util_info("device %d: slot %d's gang holds only part of its GPUs; this one goes to "
                  "slot %d", d, h, to);
    }
    shm_unlock(p->t);
    if (to >= 0 && to != p->slot)
        sched_wake(p->t, to);
    return partial ? got(p, dev) : -1;
}

/* A stopped holder, seen so for SCHED_STOP_NS: take the lease (W_GOT or
 * W_WAIT after), whatever the policy (a stopped process is idle, fifo's
 * too), and before the rule that keeps a paged-out waiter from taking the
 * GPU from a live holder: the stopped one's memory stays where it is, so a
 * waiter whose memory fits beside it pages in waiting for nobody.  One
 * whose memory does not fit would wait in its page-in for the stopped one
 * to page out, which it cannot do while stopped: it waits, and says why
 * once per stop.  -1 when the holder is not stopped (long enough). */
static int poll_stopped(sched_proc_t *p, int d, int h, uint64_t lease, idle_track_t *track)
{
    uint64_t now = sched_now();
    if (!holder_stopped(p->t, h)) {
        track->stopped_since = 0;
        return -1;
    }
    if (track->stopped_lease != lease || !track->stopped_since) {
        track->stopped_lease = lease;
        track->stopped_since = now;
        track->stopped_said = 0;
    }
    if (now - track->stopped_since < SCHED_STOP_NS)
        return -1;
    if (sched_hook_paged_out() && !sched_hook_fits(d)) {
        if (!track->stopped_said++)
            sched_note_stopped_paged(p, d, h);
        return W_WAIT;
    }
    return take_over(p, d, lease, track->stopped_since);
}

/* A holder past its max slice without a boundary by the grace: take the
 * lease (W_GOT or W_WAIT after), else -1. */
static int poll_slice(sched_proc_t *p, int d, int h, uint64_t lease)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    if (sched_since_boundary(p->t, d, h, sched_now()) >= sched_dev_max_slice_ns(dev) +
                                                             SCHED_SLICE_GRACE_NS)
        return take_over(p, d, lease, 0);
    return -1;
}

/* A lease word that differs from the last grant's record may have been
 * written outside a grant (one in flight differs too, for a moment): judged
 * under the lock (lease.c, the owner check).  1: it was, and was put back;
 * -1: the lock failed (the process fails open). */
static int lease_forged(sched_proc_t *p, sched_dev_t *dev, int d)
{
    if (util_load_acquire(&dev->lease) == util_load_relaxed(&dev->granted))
        return 0;
    if (sched_lock_or_fail(p))
        return -1;
    int forged = sched_lease_own_check_locked(p->t, d);
    shm_unlock(p->t);
    return forged;
}

static int poll_holder(sched_proc_t *p, int d, idle_track_t *track)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    int forged = lease_forged(p, dev, d);
    if (forged)
        return forged < 0 ? W_PASS : got(p, dev);
    uint64_t lease = util_load_acquire(&dev->lease);
    if (lease == sched_my_lease(p))
        return W_GOT;
    int h = sched_lease_holder(p->t, lease);
    if (h < 0) {
        if (lease)                           /* its process may live on, unaware */
            sched_nudge_owner(p->t, lease);
        return regrant(p, d, lease, 0, R_FREE, 0);
    }
    if (!shm_slot_alive(p->t, h)) {
        shm_reap_dead(p->t, 0);            /* the reap hook hands the lease on */
        return got(p, dev);
    }
    int stuck = poll_stopped(p, d, h, lease, track);
    if (stuck >= 0)
        return stuck;
    if (!sched_dev_shares(dev) || sched_hook_paged_out())
        return W_WAIT;                       /* paged out: waits for a grant (sched.h) */
    sched_note_blocked(p, d, h);
    stuck = poll_partial(p, d, h, lease);
    if (stuck < 0)
        stuck = poll_slice(p, d, h, lease);
    if (stuck >= 0)
        return stuck;
    sched_slot_t *hs = sched_slot(p->t, h);
    uint64_t act = util_load_relaxed(&hs->activity);
    uint64_t now = sched_now();
    uint32_t gate = util_load_relaxed(&hs->gate);
    if (gate == SCHED_GATE_OPEN || gate > SCHED_GATE_PROBE)
        sched_nudge_owner(p->t, lease);      /* it would not look while we wait: drain.c */
    sched_probe(hs);        /* a launch before the next look moves its activity */
    if (track->lease != lease || track->activity != act ||
        util_load_relaxed(&hs->in_sync) != 0) {
        *track = (idle_track_t){ .lease = lease, .activity = act, .since = now,
                                 .stopped_lease = track->stopped_lease,
                                 .stopped_since = track->stopped_since,
                                 .stopped_said = track->stopped_said };
        return W_WAIT;
    }
    if (idle_progress(p->t, h, track, now) < idle_ns(hs))
        return W_WAIT;
    return regrant(p, d, lease, act, R_IDLE, track->since);
}

/* A holder at rest since its last boundary (host time between iterations,
 * an inference service between requests) has no GPU work left: handing the
 * GPU over cuts nothing, and keeping it only idles the GPU.  It gives way
 * once it has rested SCHED_REST_NS, whether it sleeps, computes on the CPU
 * or is merely not scheduled.  Returns W_WAIT with *next_ns, the time to
 * look again, when it is not at rest or not yet long enough.
 *
 * "At rest" is read from activity == rest_activity: a holder bumps its
 * activity at launches only on its slow path, and every boundary PROBEs
 * its gate (mark_rest in gate.c), so its first launch since the boundary
 * moves activity, whether or not anyone waited then.
 *
 * Under fair, a holder whose host phase after a boundary is worth filling
 * (its measured host_gap_ns, at least SALUS_FILL_US) gives way at once if
 * its boundary would (the waiter has had no more GPU time: fair's rule): the
 * waiter's work overlaps the holder's host time, and GPU time is charged as
 * always.  Other policies keep
 * the SCHED_REST_NS wait: a waiter of lower priority or longer remaining
 * time let in during a short host phase would delay the holder's return. */
static int poll_rest(sched_proc_t *p, int d, uint64_t *next_ns)
{
    sched_dev_t *dev = sched_dev(p->t, d);
    uint64_t lease = util_load_acquire(&dev->lease);
    int h = sched_lease_holder(p->t, lease);
    *next_ns = SCHED_POLL_NS;
    if (h < 0 || lease == sched_my_lease(p) || !sched_dev_shares(dev) || sched_hook_paged_out())
        return W_WAIT;
    sched_slot_t *hs = sched_slot(p->t, h);
    uint64_t act = util_load_relaxed(&hs->activity);
    if (act != util_load_relaxed(&hs->rest_activity) ||
        util_load_relaxed(&hs->in_sync) != 0)
        return W_WAIT;
    uint64_t now = sched_now();
    uint64_t b = util_load_relaxed(&hs->boundary_ns);
    if (b == 0 || b > now)
        return W_WAIT;
    uint64_t since = now - b, rest = SCHED_REST_NS;
    uint64_t fill = sched_dev_fill_ns(dev);
    if (since < rest && sched_dev_policy(dev) == SCHED_POLICY_FAIR && fill &&
        util_load_relaxed(&hs->host_gap_ns) >= fill) {
        int r = regrant(p, d, lease, act, R_FILL, b);
        if (r != W_WAIT)
            return r;                /* got it, or the lock failed */
    }
    if (since < rest) {
        *next_ns = rest - since + 100000;
        return W_WAIT;
    }
    return regrant(p, d, lease, act, R_IDLE, b);
}

/* ---- acquiring and waiting --------------------------------------------------- */

/* Spin on the lease word for SCHED_SPIN_NS before sleeping (machines with
 * more than one CPU): a handoff that comes within it costs a cache-line
 * transfer instead of a futex wake-up across CPUs, and a wait for a long
 * iteration costs 20 us of CPU.  The grantor wakes the futex all the same. */
static int spin_for_grant(const sched_proc_t *p, const sched_dev_t *dev)
{
    static int cpus;
    if (!cpus)
        cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2)
        return 0;
    uint64_t end = util_now_ns() + SCHED_SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (util_load_acquire(&dev->lease) == sched_my_lease(p))
            return 1;
        if (i % 64 == 0 && util_now_ns() >= end)
            return 0;
        util_cpu_relax();
    }
}

/* The waiter's own standing, under the lock: its slot still its own (else
 * it stops scheduling itself, and says why), no stopped mark left from a
 * stop it has come back from, and a place among d's waiters (a repair may
 * have dropped it).  W_WAIT, or W_PASS. */
static int recheck(sched_proc_t *p, int d)
{
    if (sched_lock_or_fail(p))
        return W_PASS;
    if (shm_slot_gen(p->t, p->slot) != p->gen ||
        util_load_relaxed(&p->me->magic) != SCHED_SLOT_MAGIC) {
        shm_unlock(p->t);
        sched_fail_open(p, "this process's slot in the table was overwritten while it "
                        "waited");
        return W_PASS;
    }
    sched_unmark_stopped_locked(p->t, p->slot);
    if (sched_dev(p->t, d)->lease != sched_my_lease(p))
        sched_enqueue_locked(p->t, d, p->slot, sched_now());
    shm_unlock(p->t);
    return W_WAIT;
}

static int wait_loop(sched_proc_t *p, int d, int *by_other)
{
    sched_slot_t *me = p->me;
    sched_dev_t *dev = sched_dev(p->t, d);
    idle_track_t track = { .measured = 0 };
    uint64_t enqueued_ns = sched_now();      /* sched_acquire has just enqueued us */
    uint64_t recheck_at = enqueued_ns + SCHED_RECHECK_NS;
    /* The holder is looked at every SCHED_POLL_NS whatever wakes us: a
     * holder that nudges us at each of its boundaries (nudge_watcher) must
     * not keep us from seeing that it no longer holds anything it can
     * yield (its slot spoiled, drain.c). */
    uint64_t look_at = enqueued_ns + SCHED_POLL_NS;
    if (spin_for_grant(p, dev)) {
        *by_other = 1;
        return W_GOT;
    }
    for (;;) {
        uint32_t seen = util_load_acquire(&me->grant);
        if (got(p, dev) == W_GOT) {
            *by_other = 1;
            return W_GOT;
        }
        if (sched_dev_ungated(dev) || util_load_acquire(&p->state) != SCHED_P_ACTIVE)
            return W_PASS;
        uint64_t now = sched_now();
        if (util_load_relaxed(&me->stopped_ns) || now >= recheck_at) {
            recheck_at = now + SCHED_RECHECK_NS;
            if (recheck(p, d) != W_WAIT)
                return W_PASS;
            continue;
        }
        sched_hook_waiting();                /* memory pages out what peers asked */
        uint64_t next_ns;
        int r = poll_rest(p, d, &next_ns);
        if (r == W_WAIT && now < look_at) {
            uint64_t left = look_at - now;
            if (shm_futex_wait(&me->grant, seen, next_ns < left ? next_ns : left) != ETIMEDOUT)
                continue;
        }
        if (r == W_WAIT) {
            look_at = sched_now() + SCHED_POLL_NS;
            r = poll_holder(p, d, &track);
        }
        if (r != W_WAIT) {
            *by_other = 0;
            return r;
        }
    }
}

/* The lease of d is ours: memory pages back in what was paged out while
 * we waited (sched_hooks_t's tenure) before the first launch of the tenure.
 * 0, or -1 when the lease went to another meanwhile: memory gave it up
 * while its page-in waited for memory only the jobs behind it could give
 * back; it returns once it is in, and the process waits for the GPU again. */
static int tenure_begins(sched_proc_t *p, int d)
{
    shm_set_state(p->t, p->slot, SHM_RUNNING);
    /* A page-in is paid back, not this thread's preemption (test_sched_tenure). */
    int out = sched_hook_paged_out();
    uint64_t t0 = sched_now();
    sched_hook_tenure(d);
    p->switch_acc_ns += out ? sched_now() - t0 : 0;
    sched_dev_t *dev = sched_dev(p->t, d);
    int kept = sched_dev_ungated(dev) || util_load_acquire(&dev->lease) == sched_my_lease(p) ||
               util_load_acquire(&p->state) != SCHED_P_ACTIVE;
    if (kept) {                       /* fair's quantum grows with it (SCHED_SWITCH_FACTOR) */
        uint64_t us = p->switch_acc_ns / 1000;
        util_store_relaxed(&p->me->switch_us, us > 60000000 ? 60000000u : (uint32_t)us);
        p->switch_acc_ns = 0;
    }
    return kept ? 0 : -1;
}

static int acquire_once(sched_proc_t *p, int d);

/* Once more when the tenure's page-in gave the lease up (tenure_begins):
 * the memory is in by then, so the second wait ends in a tenure.  Past
 * SCHED_ACQUIRE_ROUNDS waits that each ended so (memory taken back each
 * time, or a table scribbled on), the launch goes ahead without the lease,
 * as libsalus never hangs its host, and says so once. */
#define SCHED_ACQUIRE_ROUNDS 64

void sched_acquire(sched_proc_t *p, int d)
{
    static int said;
    for (int round = 0; round < SCHED_ACQUIRE_ROUNDS; round++)
        if (acquire_once(p, d) == 0)
            return;
    util_log_once(&said, UTIL_LOG_WARN, "device %d: the GPU was granted %d times in a row "
                  "and each time given up again while this process paged its memory back in; "
                  "this launch goes ahead without the lease, so jobs may share the GPU for a "
                  "while; salus-top shows which jobs hold and wait for the device's memory",
                  d, SCHED_ACQUIRE_ROUNDS);
}

static int acquire_once(sched_proc_t *p, int d)
{
    shm_table_t *t = p->t;
    sched_dev_t *dev = sched_dev(t, d);
    if (sched_lock_or_fail(p))
        return 0;
    if (sched_dev_ungated(dev) || dev->lease == sched_my_lease(p)) {
        if (!util_load_relaxed(&p->hold))   /* set and cleared under the lock */
            util_store_relaxed(&p->me->hold, 0);
        sched_gate_update_locked(t, p->slot);
        shm_unlock(t);
        return 0;
    }
    uint64_t t0 = sched_now();
    sched_unmark_stopped_locked(t, p->slot);     /* it runs: whatever stopped it is over */
    sched_enqueue_locked(t, d, p->slot, t0);
    int to = SCHED_NO_SLOT;
    if (sched_lease_holder(t, dev->lease) < 0)
        to = sched_grant_pick_locked(t, d, t0, 0);
    sched_gate_update_locked(t, p->slot);
    shm_unlock(t);
    if (to == p->slot) {
        if (sched_drain_await(p, d))        /* a holder that left work queued */
            util_add_relaxed(&p->me->waited_ns, sched_now() - t0);
        return tenure_begins(p, d);
    }
    if (to >= 0)
        sched_wake(t, to);

    shm_set_state(t, p->slot, SHM_WAIT_GPU);
    util_debug("device %d: waiting for the GPU", d);
    sched_slot_t *me = p->me;
    util_store_relaxed(&me->wait_since_ns, t0);    /* monitors see it grow */
    int by_other = 0;
    int r = wait_loop(p, d, &by_other);
    if (r == W_GOT)
        sched_drain_await(p, d);             /* the last holder's work first: waited */
    uint64_t now = sched_now();
    util_add_relaxed(&me->waited_ns, now - t0);   /* threads may wait at once */
    util_store_relaxed(&me->wait_since_ns, 0);
    if (r != W_GOT) {
        shm_set_state(t, p->slot, SHM_RUNNING);
        return 0;
    }
    uint64_t rel = util_load_relaxed(&dev->release_ns);
    if (by_other && rel >= t0 && rel <= now)
        sched_hist_add(me, now - rel);       /* the handoff includes the drain */
    return tenure_begins(p, d);
}
