/*
 * gang.c - gangs: the processes of one distributed job (DDP or FSDP ranks, a
 * JAX job's processes, a Slurm step's tasks) hold the leases of their
 * devices together.  Two 2-GPU jobs whose ranks wait for each other in
 * collectives would otherwise deadlock under per-device leases: each job
 * holding one GPU, blocked in a sync on its rank that waits for the other.
 *
 * Divided into: naming (the environment; pure); members; taking devices
 * (all of a gang's at once, or none); yielding (at one boundary of the
 * gang's iterations); standing.  docs/design.md, "Gangs", argues why no
 * cycle of waits can form.
 *
 * A gang is the set of live slots whose `gang` word is equal (a hash of the
 * name, never 0).  Its devices are the union of its members' devsets.
 *
 * Locks: every *_locked function runs under the table's lock, which guards
 * each slot's gang_yield and gang_yield_ns and every lease word; `gang` and
 * `gang_name` are written once, at registration, before the slot's magic.
 * Nothing here is on the launch path: grants, boundaries and waits only.
 * Every word read from the table is bounded before use (slot and device
 * indices, a policy number).
 */
#include "sched/sched_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- naming ------------------------------------------------------------------ */

static int name_put(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return n > 0 ? 0 : -1;
}

static int set(const char *v)
{
    return v && *v;
}

int sched_gang_name(const char *(*get)(const char *), char *buf, size_t len)
{
    const char *v = get("SALUS_GANG");
    if (set(v))
        return strcmp(v, "off") && strcmp(v, "none") ? name_put(buf, len, "%s", v) : -1;
    v = get("TORCHELASTIC_RUN_ID");         /* torchrun's default rendezvous id is "none" */
    if (set(v) && strcmp(v, "none"))
        return name_put(buf, len, "torchelastic:%s", v);
    const char *addr = get("MASTER_ADDR"), *port = get("MASTER_PORT");
    if (set(addr) && set(port))              /* one job's store: an address and a port */
        return name_put(buf, len, "torch:%s:%s", addr, port);
    v = get("JAX_COORDINATOR_ADDRESS");
    if (set(v))
        return name_put(buf, len, "jax:%s", v);
    v = get("SLURM_JOB_ID");
    if (set(v)) {
        const char *step = get("SLURM_STEP_ID");
        return name_put(buf, len, "slurm:%s.%s", v, set(step) ? step : "batch");
    }
    return -1;
}

uint64_t sched_gang_id(const char *name)
{
    uint64_t h = 1469598103934665603ull;          /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 1099511628211ull;
    return h ? h : 1;
}

/* ---- members ------------------------------------------------------------------- */

static sched_slot_t *member(shm_table_t *t, int s)
{
    sched_slot_t *m = sched_slot(t, s);
    return m && shm_slot_gen(t, s) != 0 &&
           util_load_relaxed(&m->magic) == SCHED_SLOT_MAGIC ? m : NULL;
}

static uint64_t gang_of(shm_table_t *t, int s)
{
    sched_slot_t *m = member(t, s);
    return m ? util_load_relaxed(&m->gang) : 0;
}

int sched_gang_members_locked(shm_table_t *t, int slot, int *out, int cap)
{
    uint64_t g = gang_of(t, slot);
    int n = 0;
    for (int s = 0; g && s < SHM_MAX_SLOTS && n < cap; s++)
        if (gang_of(t, s) == g)
            out[n++] = s;
    return n;
}

/* A device set up by the scheduler.  Under a policy that gates nothing its
 * lease is 0 (sched_int.h): free for everyone, so no gang waits for it. */
static sched_dev_t *gated(shm_table_t *t, int d)
{
    return sched_dev_ready(t, d);
}

static int holder_of(shm_table_t *t, const sched_dev_t *dev)
{
    return sched_lease_holder(t, util_load_relaxed(&dev->lease));
}

static uint32_t devset_of(const sched_slot_t *m)
{
    uint32_t set = util_load_relaxed(&m->devset);
    return SHM_MAX_DEVICES < 32 ? set & ((1u << SHM_MAX_DEVICES) - 1) : set;
}

/* ---- taking devices ------------------------------------------------------------- */

static void yield_set(shm_table_t *t, uint64_t g, uint64_t at, uint64_t now)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = gang_of(t, s) == g ? sched_slot(t, s) : NULL;
        if (m) {
            m->gang_yield = at;
            m->gang_yield_ns = now;
        }
    }
}

/* Whether slot's gang is yielding; a yield older than the max slice is
 * abandoned (a member that counts its iterations otherwise never reaches
 * the count): the gang is then scheduled as if it had not begun. */
static int yielding(shm_table_t *t, int slot, uint64_t now, uint64_t slice_ns)
{
    sched_slot_t *m = sched_slot(t, slot);
    uint64_t g = gang_of(t, slot);
    if (!g || !m->gang_yield)
        return 0;
    uint64_t at = util_load_relaxed(&m->gang_yield_ns);
    if (at <= now && now - at < slice_ns)
        return 1;
    yield_set(t, g, 0, 0);
    util_info("gang %.31s: its members did not all reach the boundary at which they were to "
              "hand their GPUs over; the yield is abandoned", m->gang_name);
    return 0;
}

int sched_gang_can_take_locked(shm_table_t *t, int slot, int d, uint64_t except,
                               uint64_t now, uint64_t slice_ns)
{
    uint64_t g = gang_of(t, slot);
    if (!g)
        return 1;
    sched_slot_t *me = sched_slot(t, slot);
    if (yielding(t, slot, now, slice_ns) &&
        util_load_relaxed(&me->iterations) + 1 >= me->gang_yield)
        return 0;     /* it has yielded: not until every member has; one short of the
                         count runs up to it (its peers may wait for its work) */
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = gang_of(t, s) == g ? sched_slot(t, s) : NULL;
        uint32_t set = m ? devset_of(m) : 0;
        for (int e = 0; set && e < SHM_MAX_DEVICES; e++) {
            sched_dev_t *dev = e != d && (set & (1u << e)) ? gated(t, e) : NULL;
            int h = dev ? holder_of(t, dev) : SCHED_NO_SLOT;
            if (h < 0)
                continue;                    /* free (or not gated, or d itself) */
            uint64_t hg = gang_of(t, h);
            if (hg != g && !(except && hg == except))
                return 0;                    /* another job holds one of its devices */
        }
    }
    return 1;
}

static int waits_for(shm_table_t *t, const sched_dev_t *dev, int s)
{
    return ((dev->waiters[s >> 6] >> (s & 63)) & 1) && dev->wait[s].gen != 0 &&
           dev->wait[s].gen == shm_slot_gen(t, s);
}

int sched_gang_rest_locked(shm_table_t *t, int slot, int d, sched_gang_grant_t *out, int cap)
{
    uint64_t g = gang_of(t, slot);
    int n = 0;
    for (int e = 0; g && e < SHM_MAX_DEVICES && n < cap; e++) {
        sched_dev_t *dev = e != d ? gated(t, e) : NULL;
        if (!dev || holder_of(t, dev) >= 0)
            continue;
        int to = SCHED_NO_SLOT;
        for (int s = 0; s < SHM_MAX_SLOTS; s++) {
            sched_slot_t *m = gang_of(t, s) == g ? sched_slot(t, s) : NULL;
            if (!m || !(devset_of(m) & (1u << e)))
                continue;
            if (to < 0 || waits_for(t, dev, s))
                to = s;
            if (waits_for(t, dev, s))
                break;
        }
        if (to >= 0)
            out[n++] = (sched_gang_grant_t){ to, e };
    }
    return n;
}

int sched_gang_held_locked(shm_table_t *t, uint64_t gang, int except, sched_gang_grant_t *out,
                           int cap)
{
    int n = 0;
    for (int e = 0; gang && e < SHM_MAX_DEVICES && n < cap; e++) {
        sched_dev_t *dev = gated(t, e);
        int h = dev ? holder_of(t, dev) : SCHED_NO_SLOT;
        if (h >= 0 && h != except && gang_of(t, h) == gang)
            out[n++] = (sched_gang_grant_t){ h, e };
    }
    return n;
}

int sched_gang_partial_locked(shm_table_t *t, int slot)
{
    uint64_t g = gang_of(t, slot);
    for (int s = 0; g && s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = gang_of(t, s) == g ? sched_slot(t, s) : NULL;
        uint32_t set = m ? devset_of(m) : 0;
        for (int e = 0; set && e < SHM_MAX_DEVICES; e++) {
            sched_dev_t *dev = (set & (1u << e)) ? gated(t, e) : NULL;
            int h = dev ? holder_of(t, dev) : SCHED_NO_SLOT;
            if (h >= 0 && gang_of(t, h) != g)
                return 1;
        }
    }
    return 0;
}

int sched_gang_dead_locked(shm_table_t *t, int slot)
{
    uint64_t g = gang_of(t, slot);
    for (int s = 0; g && s < SHM_MAX_SLOTS; s++)
        if (gang_of(t, s) == g && !shm_slot_alive(t, s))
            return 1;
    return 0;
}

/* ---- yielding ----------------------------------------------------------------------
 * A gang hands its devices over at one boundary of its iterations, every
 * member at the same count: a member that passed a boundary without
 * yielding may already wait, in its next iteration, for a peer's work, and
 * that peer must not give its device away before doing it.  The member
 * that decides, at its boundary with `mine` iterations done, sets the count
 * at which all hand over: `mine` when no other member has reached it yet
 * (the others then get there without needing anything more from it), else
 * one more than the most any member has done.  gang_yield stores it plus
 * one (0: not yielding). */

static uint64_t done_of(const sched_slot_t *m)
{
    return util_load_relaxed(&m->iterations);
}

int sched_gang_yield_locked(shm_table_t *t, int slot, uint64_t now, uint64_t slice_ns)
{
    uint64_t g = gang_of(t, slot);
    sched_slot_t *me = sched_slot(t, slot);
    if (!g)
        return 1;
    if (yielding(t, slot, now, slice_ns))
        return done_of(me) + 1 >= me->gang_yield;
    uint64_t mine = done_of(me), most = 0;
    int others = 0;
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = s != slot && gang_of(t, s) == g ? sched_slot(t, s) : NULL;
        if (m) {
            others = 1;
            most = done_of(m) > most ? done_of(m) : most;
        }
    }
    uint64_t at = others && most >= mine ? most + 1 : mine;
    yield_set(t, g, at + 1, now);
    return mine >= at;
}

int sched_gang_due_locked(shm_table_t *t, int slot, uint64_t now, uint64_t slice_ns)
{
    return yielding(t, slot, now, slice_ns) &&
           done_of(sched_slot(t, slot)) + 1 >= sched_slot(t, slot)->gang_yield;
}

int sched_gang_settle_locked(shm_table_t *t, int slot)
{
    uint64_t g = gang_of(t, slot);
    if (!g || !sched_slot(t, slot)->gang_yield)
        return 0;
    sched_gang_grant_t held[1];
    if (sched_gang_held_locked(t, g, SCHED_NO_SLOT, held, 1) > 0)
        return 0;
    yield_set(t, g, 0, 0);
    return 1;
}

/* ---- standing ------------------------------------------------------------------------ */

int sched_gang_priority_locked(shm_table_t *t, int slot, int priority)
{
    uint64_t g = gang_of(t, slot);
    for (int s = 0; g && s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *m = gang_of(t, s) == g ? sched_slot(t, s) : NULL;
        int p = m ? util_load_relaxed(&m->priority) : 0;
        if (p > priority && p <= 100)
            priority = p;
    }
    return priority;
}
