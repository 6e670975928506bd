/*
 * lease.c - the lease in the table: its state transitions, done under the
 * table's lock, and the hooks that give a dead process's lease away.
 *
 * Divided into: access and validation; device set-up; gates; waiters and
 * views; grants (with the lease word's owner check); reap and repair.
 *
 * Locking.  Every function named *_locked runs under shm_lock.  The lock
 * guards: a device's lease, since_ns, release_ns, waiters, wait[], vclock,
 * ticket_next, policy, quantum, max slice; a slot's devset and vtime[]; and
 * every gate word (written only here).  Outside the lock, a slot's owner
 * reads its gate (relaxed: the fast path) and a device's lease (acquire),
 * and peers read its activity and in_sync (relaxed).
 *
 * Ordering argument (READ this before hacking).  A grant writes, in order:
 * the lease word (release store), the gates, then the grantee's grant word
 * (release increment), and after that wakes the grantee's futex.  A waiter
 * reads its grant word (acquire), then the lease (acquire), and sleeps with
 * FUTEX_WAIT(grant, value read) (after spinning a little on the lease word,
 * with acquire loads).  If it read the grant before the increment,
 * the futex either sees the new value and returns at once, or is woken by the
 * wake that follows the increment; if after, the release/acquire pair on the
 * grant word makes the new lease visible to its lease load.  So a grant is
 * never missed, and a waiter trusts only the lease word, never the wake.
 *
 * Every word read from the table is checked before use: slot and device
 * indices are bounded, a lease or waiter entry whose generation is not its
 * slot's current one is stale and dropped, a corrupt policy reads as fair,
 * an area without its magic is set up afresh.
 */
#include "sched/sched_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* ---- access and validation ---------------------------------------------- */

sched_policy_t sched_dev_policy(const sched_dev_t *dev)
{
    uint32_t p = util_load_relaxed(&dev->policy);
    return p < SCHED_POLICY_COUNT ? (sched_policy_t)p : SCHED_POLICY_FAIR;
}

static int slot_ready(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    return s && util_load_relaxed(&s->magic) == SCHED_SLOT_MAGIC;
}

static int bit_test(const uint64_t *set, int i)
{
    return (int)((set[i >> 6] >> (i & 63)) & 1);
}

static void bit_clear(uint64_t *set, int i)
{
    set[i >> 6] &= ~(1ull << (i & 63));
}

/* ---- device set-up ------------------------------------------------------- */

static void dev_init_locked(sched_dev_t *dev, const sched_config_t *cfg)
{
    memset(dev, 0, sizeof *dev);
    dev->policy = cfg->policy < SCHED_POLICY_COUNT ? cfg->policy : SCHED_POLICY_FAIR;
    dev->quantum_ms = cfg->quantum_ms;
    dev->max_slice_ms = cfg->max_slice_ms;
    dev->fill_us = cfg->fill_us;
    dev->ticket_next = 1;
    util_store_release(&dev->magic, SCHED_DEV_MAGIC);
}

void sched_dev_setup_locked(shm_table_t *t, int d, const sched_config_t *cfg)
{
    static int said_corrupt, said_policy;
    sched_dev_t *dev = sched_dev(t, d);
    if (!dev)
        return;
    uint32_t magic = util_load_acquire(&dev->magic);
    if (magic != SCHED_DEV_MAGIC) {
        if (magic != 0)
            util_log_once(&said_corrupt, UTIL_LOG_WARN,
                          "table %s: the scheduler's state of device %d was corrupted; "
                          "it is set up afresh", shm_table_name(t), d);
        dev_init_locked(dev, cfg);
        util_debug("device %d: policy %s, quantum %u ms, max slice %u ms", d,
                   sched_policy_names[dev->policy], dev->quantum_ms, dev->max_slice_ms);
        return;
    }
    if (dev->policy >= SCHED_POLICY_COUNT)
        dev->policy = SCHED_POLICY_FAIR;
    if (cfg->policy_given && dev->policy != (uint32_t)cfg->policy)
        util_log_once(&said_policy, UTIL_LOG_WARN,
                      "device %d is scheduled with policy %s, fixed by the first process "
                      "that used it; SALUS_POLICY=%s is ignored (change a running table's "
                      "policy with `salus policy`)", d, sched_policy_names[dev->policy],
                      sched_policy_names[cfg->policy]);
}

uint64_t sched_dev_fill_ns(const sched_dev_t *dev)
{
    uint32_t f = util_load_relaxed(&dev->fill_us);
    return f <= 1000000 ? (uint64_t)f * 1000ull : 0;
}

static uint64_t dev_quantum_ns(const sched_dev_t *dev)
{
    uint32_t q = util_load_relaxed(&dev->quantum_ms);
    return (uint64_t)(q <= 3600000 ? q : SCHED_QUANTUM_MS_DEFAULT) * 1000000ull;
}

/* Time since the holder `slot` of device d last reached a boundary in its
 * current tenure (since the tenure began if it reached none). */
uint64_t sched_since_boundary(shm_table_t *t, int d, int slot, uint64_t now)
{
    sched_dev_t *dev = sched_dev(t, d);
    uint64_t from = util_load_relaxed(&dev->since_ns);
    uint64_t b = util_load_relaxed(&sched_slot(t, slot)->boundary_ns);
    if (b > from && b <= now)
        from = b;
    return now > from ? now - from : 0;
}

uint64_t sched_dev_max_slice_ns(const sched_dev_t *dev)
{
    uint32_t ms = util_load_relaxed(&dev->max_slice_ms);
    return (uint64_t)(ms >= 1 && ms <= 3600000 ? ms : SCHED_MAX_SLICE_MS_DEFAULT) * 1000000ull;
}

/* ---- gates ----------------------------------------------------------------
 * gate(s) as the slot-area invariant defines it, from devset(s) and the
 * devices' leases and waiters. */

static uint32_t gate_compute(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    uint32_t devset = util_load_relaxed(&s->devset);
    uint32_t gate = SCHED_GATE_OPEN;
    if (util_load_relaxed(&s->hold))
        return SCHED_GATE_CLOSED;        /* paging itself out: nothing launches */
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        if (!(devset & (1u << d)))
            continue;
        sched_dev_t *dev = sched_dev_ready(t, d);
        if (!dev)
            continue;
        const sched_policy_ops_t *ops = sched_policy_ops(sched_dev_policy(dev));
        if (!(ops->flags & SCHED_POL_GATED))
            continue;
        if (sched_lease_holder(t, dev->lease) != slot)
            return SCHED_GATE_CLOSED;
        if ((ops->flags & SCHED_POL_SHARES) && sched_any_waiter(dev))
            gate = SCHED_GATE_CONTENDED;
    }
    if (gate == SCHED_GATE_OPEN && util_load_relaxed(&s->gang_yield))
        gate = SCHED_GATE_CONTENDED;     /* its gang yields: its syncs must look */
    if (util_load_relaxed(&s->kwatch))
        gate = SCHED_GATE_PROBE;         /* it records every launch: all slow */
    return gate;
}

/* A PROBE stands while the slot holds its leases (the gate would be OPEN or
 * CONTENDED): only the holder clears it, at its launch (sched_gate_settle_locked). */
void sched_gate_update_locked(shm_table_t *t, int slot)
{
    if (!slot_ready(t, slot))
        return;
    sched_slot_t *s = sched_slot(t, slot);
    uint32_t g = gate_compute(t, slot);
    if (SCHED_GATE_FAST(g) && util_load_relaxed(&s->gate) == SCHED_GATE_PROBE)
        return;
    util_store_relaxed(&s->gate, g);
}

void sched_gate_settle_locked(shm_table_t *t, int slot)
{
    if (slot_ready(t, slot))
        util_store_relaxed(&sched_slot(t, slot)->gate, gate_compute(t, slot));
}

void sched_probe(sched_slot_t *s)
{
    uint32_t c = SCHED_GATE_CONTENDED;
    __atomic_compare_exchange_n(&s->gate, &c, SCHED_GATE_PROBE, 0, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

void sched_probe_boundary(sched_slot_t *s)
{
    uint32_t g = util_load_relaxed(&s->gate);
    while (SCHED_GATE_FAST(g) &&
           !__atomic_compare_exchange_n(&s->gate, &g, SCHED_GATE_PROBE, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

void sched_gate_update_users_locked(shm_table_t *t, int d)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (slot_ready(t, s) && (sched_slot(t, s)->devset & (1u << d)))
            sched_gate_update_locked(t, s);
}

/* ---- waiters and views ------------------------------------------------------ */

static int waiter_valid(shm_table_t *t, const sched_dev_t *dev, int s, int holder)
{
    return s != holder && slot_ready(t, s) && dev->wait[s].gen != 0 &&
           dev->wait[s].gen == shm_slot_gen(t, s);
}

/* srtf's remaining time, from what the job told and what was measured:
 *   - a declared length (SALUS_LENGTH_MS, the running time alone): its share
 *     of the declared iterations left, or without them the length less the
 *     GPU time held so far (host phases are not counted: an estimate that
 *     errs long, never past the declared length).  Taken at its word, never
 *     replaced by a measurement: jobs that declared lengths must compare in
 *     one unit, and a measured iteration carries overheads a declared
 *     length does not (switches, wake-ups), so that a job that has run would
 *     look longer than its unstarted equals and hand the GPU round them all,
 *     sharing it where SRTF runs one to its end;
 *   - else declared iterations left x measured iteration time;
 *   - else the time left until the job's end (SALUS_END_TIME: a batch
 *     system's time limit, an upper bound the job is known to respect).
 * The first and the last need no measurement: the job ranks by them at
 * once, at admission too. */
static uint64_t mul_div(uint64_t a, uint64_t b, uint64_t c)
{
    return (uint64_t)((unsigned __int128)a * b / c);
}

void sched_cand_fill_locked(shm_table_t *t, int slot, int d, uint64_t now, sched_cand_t *c)
{
    sched_slot_t *s = sched_slot(t, slot);
    int prio = util_load_relaxed(&s->priority);
    uint64_t declared = util_load_relaxed(&s->declared);
    uint64_t done = util_load_relaxed(&s->iterations);
    uint64_t iter_ns = util_load_relaxed(&s->iter_ns);
    uint64_t deadline = util_load_relaxed(&s->deadline_ns);
    uint64_t length = util_load_relaxed(&s->length_ms) * 1000000ull;
    memset(c, 0, sizeof *c);
    c->slot = slot;
    c->priority = sched_gang_priority_locked(t, slot, prio < 0 ? 0 : prio > 100 ? 100 : prio);
    uint32_t lat = util_load_relaxed(&s->latency_ms);
    c->latency_ms = lat > 60000 ? 60000 : lat;
    c->vtime = s->vtime[d];
    c->declared = declared > 0 && declared <= 1000000000000ull;
    c->measured = iter_ns > 0 && iter_ns < 3600ull * 1000000000ull;
    uint64_t gap = util_load_relaxed(&s->host_gap_ns);
    c->host_gap_ns = gap < 3600ull * 1000000000ull ? gap : 0;
    c->switch_ns = (uint64_t)util_load_relaxed(&s->switch_us) * 1000ull;
    c->remaining_ns = SCHED_REMAINING_UNKNOWN;
    uint64_t left = c->declared && declared > done ? declared - done : 0;
    c->left = left;
    if (length) {
        uint64_t held = util_load_relaxed(&s->held_ns) +
                        sched_tenure_ns(t, sched_dev(t, d), slot, now);
        c->remaining_ns = c->declared ? mul_div(length, left, declared)
                                      : length > held ? length - held : 0;
        c->declared = c->measured = 1;
    } else if (c->declared && c->measured) {
        c->remaining_ns = left > (UINT64_MAX - 1) / iter_ns ? UINT64_MAX - 1 : left * iter_ns;
    } else if (!c->declared && deadline) {
        c->declared = c->measured = 1;
        c->remaining_ns = deadline > now ? deadline - now : 0;
    }
}

static int orphan(shm_table_t *t, int slot)
{
    return util_load_relaxed(&sched_slot(t, slot)->orphan) != 0;
}

/* A process whose gang lost a member to death will block at its next
 * collective, holding whatever it was granted: it is a candidate only when
 * nobody else waits. */
static void drop_orphans(shm_table_t *t, sched_view_t *v)
{
    int n = 0;
    for (int i = 0; i < v->n; i++)
        n += !orphan(t, v->waiters[i].slot);
    if (n == 0 || n == v->n)
        return;
    n = 0;
    for (int i = 0; i < v->n; i++)
        if (!orphan(t, v->waiters[i].slot))
            v->waiters[n++] = v->waiters[i];
    v->n = n;
}

static int ending(shm_table_t *t, int slot)
{
    return util_load_relaxed(&sched_slot(t, slot)->ending) != 0;
}

/* Waiters being ended by the tools go before everyone (their order among
 * themselves is the policy's): the others stay in the queue. */
static void ending_first(shm_table_t *t, sched_view_t *v)
{
    int n = 0;
    for (int i = 0; i < v->n; i++)
        if (ending(t, v->waiters[i].slot))
            v->waiters[n++] = v->waiters[i];
    if (n > 0)
        v->n = n;
}

static void drop_stale_waiters_locked(shm_table_t *t, sched_dev_t *dev)
{
    int holder = sched_lease_holder(t, dev->lease);
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (bit_test(dev->waiters, s) && !waiter_valid(t, dev, s, holder))
            bit_clear(dev->waiters, s);
}

/* The view of d; a waiter whose gang cannot take all its devices now is
 * left out (devices held by gang `except` count as free: see decide), and
 * so are orphans while others wait. */
static void view_build(shm_table_t *t, int d, uint64_t now, sched_view_t *v, uint64_t except)
{
    sched_dev_t *dev = sched_dev(t, d);
    v->now = now;
    v->quantum_ns = dev_quantum_ns(dev);
    v->fill_ns = sched_dev_fill_ns(dev);
    v->n = 0;
    v->held_ns = 0;
    int holder = sched_lease_holder(t, dev->lease);
    v->has_holder = holder >= 0;
    if (v->has_holder) {
        sched_cand_fill_locked(t, holder, d, now, &v->holder);
        v->held_ns = now > dev->since_ns ? now - dev->since_ns : 0;
    }
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        if (!bit_test(dev->waiters, s))
            continue;
        if (!waiter_valid(t, dev, s, holder)) {
            bit_clear(dev->waiters, s);          /* stale: its process is gone */
            continue;
        }
        if (util_load_relaxed(&sched_slot(t, s)->stopped_ns))
            continue;                            /* stopped: kept, not a candidate */
        if (!sched_gang_can_take_locked(t, s, d, except, now, sched_dev_max_slice_ns(dev)))
            continue;                            /* its gang cannot have all: kept */
        if (sched_hook_blocked_locked(t, d, s))
            continue;                            /* its memory cannot come back now: kept */
        sched_cand_t *c = &v->waiters[v->n++];
        sched_cand_fill_locked(t, s, d, now, c);
        c->ticket = dev->wait[s].ticket;
    }
    drop_orphans(t, v);
    ending_first(t, v);
}

void sched_view_build_locked(shm_table_t *t, int d, uint64_t now, sched_view_t *v)
{
    view_build(t, d, now, v, 0);
}

/* The least virtual time of the active set (holder with its tenure, and the
 * waiters), kept monotone in vclock: where newcomers and sleepers start. */
static uint64_t vclock_now_locked(shm_table_t *t, int d, uint64_t now)
{
    static sched_view_t v;       /* under the table lock; too big for a stack */
    sched_dev_t *dev = sched_dev(t, d);
    sched_view_build_locked(t, d, now, &v);
    uint64_t least = UINT64_MAX;
    if (v.has_holder)
        least = sched_holder_vtime(&v);
    for (int i = 0; i < v.n; i++)
        if (v.waiters[i].vtime < least)
            least = v.waiters[i].vtime;
    if (least != UINT64_MAX && least > dev->vclock)
        dev->vclock = least;
    return dev->vclock;
}

void sched_vtime_lift_locked(shm_table_t *t, int d, int slot, uint64_t now)
{
    sched_slot_t *s = sched_slot(t, slot);
    uint64_t floor = vclock_now_locked(t, d, now);
    if (s->vtime[d] < floor)
        s->vtime[d] = floor;
}

void sched_enqueue_locked(shm_table_t *t, int d, int slot, uint64_t now)
{
    sched_dev_t *dev = sched_dev(t, d);
    uint32_t gen = shm_slot_gen(t, slot);
    if (!(sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED))
        return;                                  /* pack: nobody waits */
    if (bit_test(dev->waiters, slot) && dev->wait[slot].gen == gen)
        return;
    sched_vtime_lift_locked(t, d, slot, now);
    if (dev->ticket_next == 0)
        dev->ticket_next = 1;
    dev->wait[slot].gen = gen;
    dev->wait[slot].ticket = dev->ticket_next++;
    dev->waiters[slot >> 6] |= 1ull << (slot & 63);
    /* The bit before the holder's gate is read: a holder settling a probe
     * without the lock (gate.c, settle_probe) reads the bits after its own
     * compare-and-swap of the gate; with a full fence on each side, one of
     * the two sees the other's store (the gate ends CONTENDED either way). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int holder = sched_lease_holder(t, dev->lease);
    if (holder >= 0)
        sched_gate_update_locked(t, holder);     /* CONTENDED: it will look */
}

void sched_dequeue_locked(shm_table_t *t, int d, int slot)
{
    sched_dev_t *dev = sched_dev(t, d);
    if (!dev || slot < 0 || slot >= SHM_MAX_SLOTS)
        return;
    bit_clear(dev->waiters, slot);
    dev->wait[slot].gen = 0;
}

/* ---- grants ------------------------------------------------------------------ */

void sched_wake(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    if (s)
        shm_futex_wake(&s->grant, INT_MAX);
}

void sched_nudge(shm_table_t *t, int slot)
{
    if (t && slot >= 0 && slot < SHM_MAX_SLOTS)
        sched_wake(t, slot);
}

/* The GPU was taken from a holder that is not waiting for it (at rest, idle,
 * or yielding): salus-top shows it idle until it launches again and queues.
 * A process on several GPUs may still hold another: its state stays. */
static void mark_idle_locked(shm_table_t *t, int slot)
{
    shm_ident_t id;
    uint32_t devset = util_load_relaxed(&sched_slot(t, slot)->devset);
    if ((devset & (devset - 1)) == 0 && shm_slot_ident(t, slot, &id) == 0 &&
        id.state == SHM_RUNNING)
        shm_set_state(t, slot, SHM_IDLE);
}

/* A grant takes d from `from`, which may have work queued there: ask it to
 * drain (drain.c) and make the new holder wait for the answer.  A drain
 * still pending from an earlier holder (the lease passed on before its
 * successor submitted anything) stays the one to wait for: that successor
 * queued no work.  The device's mark is stored before the lease word's
 * release store, so that a new holder that sees its lease sees the mark;
 * the request itself (drain_ask) after the gates, so that the drain starts
 * after `from`'s gate is CLOSED, and its wake-up (a syscall) outside the
 * window between a waiter's idle check and the lease store, which a
 * holder's launch races. */
void sched_drain_mark_locked(shm_table_t *t, int d, int from)
{
    sched_dev_t *dev = sched_dev(t, d);
    sched_slot_t *f = sched_slot(t, from);
    if (!dev || !f)
        return;
    uint32_t prev = dev->drain_from;
    if (prev >= 1 && prev <= SHM_MAX_SLOTS && (int)prev - 1 != from &&
        shm_slot_gen(t, (int)prev - 1) == dev->drain_gen &&
        (int32_t)(util_load_acquire(&sched_slot(t, (int)prev - 1)->drain_done) -
                  dev->drain_seq) < 0)
        return;
    dev->drain_gen = shm_slot_gen(t, from);
    dev->drain_seq = util_load_relaxed(&f->drain_req) + 1;
    util_store_release(&dev->drain_from, (uint32_t)from + 1);
}

/* The slot whose own thread is granting its devices away and drains them
 * itself right after (a holder yielding at a boundary): its drain thread is
 * not woken for that (a wake-up, and a thread contending for the CPU with
 * the process that is about to run, on every handoff). */
static __thread int self_draining = -1;

void sched_grant_self_drain(int slot)
{
    self_draining = slot;
}

static void drain_ask(shm_table_t *t, int d, int from)
{
    sched_dev_t *dev = sched_dev(t, d);
    sched_slot_t *f = sched_slot(t, from);
    if (!f || dev->drain_from != (uint32_t)from + 1)
        return;
    util_store_release(&f->drain_req, dev->drain_seq);
    if (from != self_draining)
        shm_futex_wake(&f->drain_req, INT_MAX);
}

/* The lease word's owner check.  Only a grant writes the lease word, under
 * the lock, with `granted` beside it: lease == granted at every unlock.  A
 * word that differs was written outside a grant (a stray write, or a group
 * member naming itself holder: libsalus(7), ISOLATION).  Every grant and
 * holder's decision looks first (two loads under the lock it holds), and a
 * waiter at each look at the holder (wait.c), so a raw write holds the GPU
 * for at most one poll.  The record wins: its holder gets the lease back
 * (its grant bumped for a wait of its own), the slot the word named has its
 * gate closed; a record naming no current slot frees the device. */
static void lease_set_locked(sched_dev_t *dev, uint64_t lease)
{
    dev->granted = lease;
    util_store_release(&dev->lease, lease);
}

int sched_lease_own_check_locked(shm_table_t *t, int d)
{
    static int said;
    sched_dev_t *dev = sched_dev(t, d);
    uint64_t lease = dev ? util_load_relaxed(&dev->lease) : 0;
    if (!dev || lease == dev->granted)
        return 0;
    int named = sched_lease_holder(t, lease), owner = sched_lease_holder(t, dev->granted);
    char who[48] = "no current slot";
    shm_ident_t id;
    if (named >= 0 && shm_slot_ident(t, named, &id) == 0)
        snprintf(who, sizeof who, "slot %d (pid %d)", named, (int)id.pid);
    util_log_once(&said, UTIL_LOG_WARN,
                  "table %s: device %d's lease word names %s, but no grant wrote it: a stray "
                  "write, or a process sharing the table (SALUS_GROUP) taking the GPU for "
                  "itself; the lease goes back to %s", shm_table_name(t), d, who,
                  owner >= 0 ? "the process it was granted to" : "the policy's pick");
    lease_set_locked(dev, owner >= 0 ? dev->granted : 0);
    sched_gate_update_locked(t, named);        /* (a bad index is left alone) */
    if (owner >= 0) {
        sched_gate_update_locked(t, owner);
        util_add_release(&sched_slot(t, owner)->grant, 1);
        sched_wake(t, owner);
    }
    return 1;
}

static void grant_one_locked(shm_table_t *t, int d, int to, uint64_t now, int wake)
{
    sched_dev_t *dev = sched_dev(t, d);
    int from = sched_lease_holder(t, dev->lease);
    if (from >= 0 && from != to)
        sched_drain_mark_locked(t, d, from);
    if (from >= 0) {
        sched_slot_t *f = sched_slot(t, from);
        uint64_t held = now > dev->since_ns ? now - dev->since_ns : 0;
        util_add_relaxed(&f->held_ns, held);
        f->vtime[d] += sched_vtime_charge(f->priority, held);
    }
    if (to < 0 || !slot_ready(t, to)) {
        lease_set_locked(dev, 0);
        if (from >= 0) {
            sched_gate_update_locked(t, from);
            drain_ask(t, d, from);
        }
        return;
    }
    sched_slot_t *s = sched_slot(t, to);
    bit_clear(dev->waiters, to);
    dev->since_ns = now;
    dev->release_ns = now;
    lease_set_locked(dev, sched_lease_of(to, shm_slot_gen(t, to)));
    if (from >= 0 && from != to) {
        dev->switches++;
        util_add_relaxed(&s->switches, 1);
        mark_idle_locked(t, from);
    }
    if (from >= 0)
        sched_gate_update_locked(t, from);
    sched_gate_update_locked(t, to);
    if (from >= 0 && from != to)
        drain_ask(t, d, from);
    util_add_release(&s->grant, 1);
    if (wake)
        sched_wake(t, to);
}

static void gates_of_gang_locked(shm_table_t *t, int slot)
{
    int members[SHM_MAX_SLOTS];
    int n = sched_gang_members_locked(t, slot, members, SHM_MAX_SLOTS);
    for (int i = 0; i < n; i++)
        sched_gate_update_locked(t, members[i]);
}

/* One grant, then the gang's: a member granted d gets, at once, every other
 * free device of its gang for the members that use them (the view left
 * out any member whose gang could not have them all); a yielding gang whose
 * last device went ends its yield. */
void sched_grant_locked(shm_table_t *t, int d, int to, uint64_t now, int wake)
{
    sched_dev_t *dev = sched_dev(t, d);
    sched_lease_own_check_locked(t, d);
    int from = sched_lease_holder(t, dev->lease);
    grant_one_locked(t, d, to, now, wake);
    if (from >= 0 && from != to && sched_gang_settle_locked(t, from))
        gates_of_gang_locked(t, from);
    sched_gang_grant_t rest[SHM_MAX_DEVICES];
    int n = to >= 0 ? sched_gang_rest_locked(t, to, d, rest, SHM_MAX_DEVICES) : 0;
    for (int i = 0; i < n; i++)
        grant_one_locked(t, rest[i].dev, rest[i].slot, now, 1);
}

int sched_grant_pick_locked(shm_table_t *t, int d, uint64_t now, int wake)
{
    static sched_view_t v;       /* under the table lock */
    sched_dev_t *dev = sched_dev(t, d);
    sched_view_build_locked(t, d, now, &v);
    int pick = sched_policy_ops(sched_dev_policy(dev))->pick(&v);
    int to = pick >= 0 ? v.waiters[pick].slot : SCHED_NO_SLOT;
    sched_grant_locked(t, d, to, now, wake);
    return to;
}

/* The waiter d goes to now, or, for a gang member, SCHED_RELEASE: free it
 * (its gang hands over every device; the next gang takes them all once the
 * last is free). */
static int handover_to_locked(shm_table_t *t, int d, uint64_t now, int release)
{
    static sched_view_t v;       /* under the table lock */
    sched_dev_t *dev = sched_dev(t, d);
    view_build(t, d, now, &v, 0);
    int pick = sched_policy_ops(sched_dev_policy(dev))->pick(&v);
    if (pick >= 0)
        return v.waiters[pick].slot;
    return release ? SCHED_RELEASE : SCHED_NO_SLOT;
}

/* Whether the holder `slot` of device d hands it over now, and to whom
 * (SCHED_NO_SLOT: it keeps it; SCHED_RELEASE: it frees it).  boundary:
 * this point ends an iteration, and the policy decides; at any point a
 * holder that reached no boundary for the max slice (since its tenure
 * began) hands over.  A gang member's policy decision is its gang's: the
 * waiters its gang holds devices of count (they could have them once it
 * yields), and it yields at the boundary gang.c sets for all its members,
 * each handing over whether or not anyone waits for its own device. */
int sched_decide_locked(shm_table_t *t, int d, int slot, int boundary, uint64_t now)
{
    static sched_view_t v;       /* under the table lock */
    sched_dev_t *dev = sched_dev(t, d);
    sched_lease_own_check_locked(t, d);
    if (!dev || sched_lease_holder(t, util_load_relaxed(&dev->lease)) != slot)
        return SCHED_NO_SLOT;
    const sched_policy_ops_t *ops = sched_policy_ops(sched_dev_policy(dev));
    if (boundary && !util_load_relaxed(&sched_slot(t, slot)->gang)) {
        /* A waiter being ended gets the GPU at this boundary, whatever the
         * policy: under fifo or priority it would wait for the holder's end. */
        view_build(t, d, now, &v, 0);
        if (v.n > 0 && ending(t, v.waiters[0].slot)) {
            int pick = ops->pick(&v);
            return v.waiters[pick >= 0 && pick < v.n ? pick : 0].slot;
        }
    }
    if (!(ops->flags & SCHED_POL_SHARES))
        return SCHED_NO_SLOT;
    uint64_t slice = sched_dev_max_slice_ns(dev);
    if (boundary && sched_gang_due_locked(t, slot, now, slice))
        return handover_to_locked(t, d, now, 1);
    uint64_t gang = util_load_relaxed(&sched_slot(t, slot)->gang);
    view_build(t, d, now, &v, gang);
    int pick = ops->pick(&v);
    if (pick < 0)
        return SCHED_NO_SLOT;
    if (boundary && (ops->yield(&v, pick) || orphan(t, slot))) {
        if (!gang)      /* memory's residency may keep it from a paged-out waiter */
            return sched_hook_keep_locked(t, d, v.waiters[pick].slot) ? SCHED_NO_SLOT
                                                                       : v.waiters[pick].slot;
        int now_too = sched_gang_yield_locked(t, slot, now, slice);
        gates_of_gang_locked(t, slot);       /* the members' syncs look from now on */
        return now_too ? handover_to_locked(t, d, now, 1) : SCHED_NO_SLOT;
    }
    if (!boundary && sched_since_boundary(t, d, slot, now) >= slice)
        return gang ? handover_to_locked(t, d, now, 0) : v.waiters[pick].slot;
    return SCHED_NO_SLOT;
}

/* ---- reap and repair ---------------------------------------------------------
 * The reaper (any process, under the lock) gives a dead slot's leases to the
 * policy's pick and wakes it at once; its waiter entries are dropped. */

/* A member of a gang died (or exited: the same hook): its peers wait for it,
 * in collectives, forever (until their own watchdog ends them), so the
 * devices they hold go to the others now, and they become orphans: granted
 * a device only when nobody else waits for it, handing it over at every
 * boundary while someone does. */
static void reap_gang_locked(shm_table_t *t, int slot, uint64_t now)
{
    sched_slot_t *s = sched_slot(t, slot);
    uint64_t gang = s ? util_load_relaxed(&s->gang) : 0;
    sched_gang_grant_t held[SHM_MAX_DEVICES];
    int n = sched_gang_held_locked(t, gang, slot, held, SHM_MAX_DEVICES);
    for (int s = 0; gang && s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = s != slot && shm_slot_gen(t, s) ? sched_slot(t, s) : NULL;
        if (m && util_load_relaxed(&m->gang) == gang)
            util_store_relaxed(&m->orphan, 1);
    }
    for (int i = 0; i < n; i++) {
        int to = sched_grant_pick_locked(t, held[i].dev, now, 1);
        sched_gate_update_locked(t, held[i].slot);
        util_info("device %d: a member of gang %.31s (slot %d) died; its peer's lease (slot "
                  "%d) goes to slot %d", held[i].dev, s->gang_name, slot, held[i].slot, to);
    }
}

void sched_reap_hook(shm_table_t *t, int slot, void *slot_area, void *ctx)
{
    (void)slot_area;
    (void)ctx;
    uint64_t now = sched_now();
    sched_dev_t *dev;
    SCHED_FOR_EACH_DEV(t, d, dev) {
        sched_dequeue_locked(t, d, slot);
        if (sched_lease_holder(t, dev->lease) == slot) {
            int to = sched_grant_pick_locked(t, d, now, 1);
            util_info("device %d: the lease of a dead process (slot %d) goes to slot %d",
                      d, slot, to);
        }
    }
    reap_gang_locked(t, slot, now);
}

/* After a process died holding the lock, mid-change: make every device and
 * gate consistent again.  Dead slots were reaped just before. */
void sched_repair_hook(shm_table_t *t, void *ctx)
{
    (void)ctx;
    uint64_t now = sched_now();
    sched_dev_t *dev;
    SCHED_FOR_EACH_DEV(t, d, dev) {
        if (dev->policy >= SCHED_POLICY_COUNT)
            dev->policy = SCHED_POLICY_FAIR;
        const sched_policy_ops_t *ops = sched_policy_ops(dev->policy);
        sched_lease_own_check_locked(t, d);
        if (!(ops->flags & SCHED_POL_GATED)) {
            lease_set_locked(dev, 0);
            memset(dev->waiters, 0, sizeof dev->waiters);
        } else if (sched_lease_holder(t, dev->lease) < 0) {
            sched_grant_pick_locked(t, d, now, 1);
        } else {
            drop_stale_waiters_locked(t, dev);       /* a pick would have */
        }
    }
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        sched_gate_update_locked(t, s);
}
