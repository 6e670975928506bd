/*
 * gang.c - gangs: the processes of one distributed job (DDP or FSDP ranks, a
 * JAX job's processes, an MPI job's ranks, a Slurm step's tasks) hold the
 * leases of their devices together.  Two 2-GPU jobs whose ranks wait for each other in
 * collectives would otherwise deadlock under per-device leases: each job
 * holding one GPU, blocked in a sync on its rank that waits for the other.
 *
 * Divided into: naming (the environment, through the launchers' one list
 * of rules; pure); members; taking devices
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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- naming ------------------------------------------------------------------ */

/* The launchers, in order of precedence.  A launcher's rank variables are
 * not enough: a shell may export MASTER_ADDR for every job it starts, and
 * a single-process job has them too (srun -n 1, torchrun with one
 * process); a gang forms only from a job's identity *and* a size of more
 * than one, and the size is in the name, so that two jobs with the same
 * address but different sizes never merge.  torchrun's restart count is in
 * the name too: a restarted generation is a new gang and never waits for
 * the old one's members still tearing down.  vLLM and SGLang start
 * torch.distributed from a tcp:// URL given as an argument, which nothing
 * in the environment shows: SALUS_GANG names their gangs. */
const sched_gang_rule_t sched_gang_rules[] = {
    /* torchrun's elastic rendezvous (its default id "none" names no job) */
    { "torchelastic", { "TORCHELASTIC_RUN_ID" }, "none", NULL, 0, { "WORLD_SIZE" },
      "TORCHELASTIC_RESTART_COUNT" },
    /* torch.distributed's env:// (torchrun's static rendezvous, Lightning,
     * Accelerate, DeepSpeed's launcher, a script that exports them) */
    { "torch", { "MASTER_ADDR" }, NULL, "MASTER_PORT", ':', { "WORLD_SIZE" },
      "TORCHELASTIC_RESTART_COUNT" },
    /* jax.distributed: no size is visible */
    { "jax", { "JAX_COORDINATOR_ADDRESS" }, NULL, NULL, 0, { NULL }, NULL },
    /* Open MPI's mpirun: ORTE's job (4.x) or PRRTE's namespace (5.x) */
    { "ompi", { "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE" }, NULL,
      NULL, 0, { "OMPI_COMM_WORLD_SIZE" }, NULL },
    /* PMI-1/2 and PMIx launchers that give a job id (Slurm's --mpi=pmi2, Cray PALS) */
    { "pmi", { "PMI_JOBID", "PMIX_NAMESPACE" }, NULL, NULL, 0, { "PMI_SIZE" }, NULL },
    /* srun: one gang per job step (a batch script is no step) */
    { "slurm", { "SLURM_JOB_ID" }, NULL, "SLURM_STEP_ID", '.',
      { "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS" }, NULL },
};
const int sched_gang_rule_count = (int)(sizeof sched_gang_rules / sizeof sched_gang_rules[0]);

static int set(const char *v)
{
    return v && *v;
}

/* The first of names[] that is set (up to n of them), or NULL. */
static const char *first_set(const char *(*get)(const char *), const char *const *names, int n)
{
    for (int i = 0; i < n && names[i]; i++) {
        const char *v = get(names[i]);
        if (set(v))
            return v;
    }
    return NULL;
}

/* A count of processes: a whole decimal number, 0 when it is none. */
static long count_of(const char *v)
{
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    return v && end != v && !*end && !errno && n > 0 && n <= (1L << 24) ? n : 0;
}

/* The whole name into buf, or its start, "~" and 8 hex digits of a hash of
 * the whole when it does not fit (an Open MPI URI, a long namespace). */
static int name_fit(char *buf, size_t len, const char *whole)
{
    size_t n = strlen(whole);
    if (n == 0 || len < 16)
        return -1;
    if (n < len) {
        memcpy(buf, whole, n + 1);
        return 0;
    }
    uint64_t h = sched_gang_id(whole);
    int keep = (int)(len - 10);
    snprintf(buf, len, "%.*s~%08x", keep, whole, (unsigned)(h ^ (h >> 32)));
    return 0;
}

/* The rule's name into whole (size wlen), or -1 when it does not hold. */
static int rule_name(const sched_gang_rule_t *r, const char *(*get)(const char *), char *whole,
                     size_t wlen)
{
    const char *id = first_set(get, r->id, 3);
    if (!id || (r->not_id && !strcmp(id, r->not_id)))
        return -1;
    const char *with = r->with ? get(r->with) : NULL;
    if (r->with && !set(with))
        return -1;
    long size = 0;
    if (r->size[0] && (size = count_of(first_set(get, r->size, 2))) < 2)
        return -1;                        /* none, or one process: no gang */
    const char *gen = r->gen ? get(r->gen) : NULL;
    int n = snprintf(whole, wlen, "%s:%s", r->prefix, id);
    if (with && n > 0 && (size_t)n < wlen)
        n += snprintf(whole + n, wlen - (size_t)n, "%c%s", r->sep, with);
    if (size && n > 0 && (size_t)n < wlen)
        n += snprintf(whole + n, wlen - (size_t)n, ":w%ld", size);
    if (set(gen) && n > 0 && (size_t)n < wlen)
        n += snprintf(whole + n, wlen - (size_t)n, ":r%s", gen);
    return n > 0 ? 0 : -1;               /* longer than whole: its start, hashed by name_fit */
}

int sched_gang_name(const char *(*get)(const char *), char *buf, size_t len)
{
    const char *v = get("SALUS_GANG");
    if (set(v))
        return strcmp(v, "off") && strcmp(v, "none") ? name_fit(buf, len, v) : -1;
    char whole[512];
    for (int i = 0; i < sched_gang_rule_count; i++)
        if (rule_name(&sched_gang_rules[i], get, whole, sizeof whole) == 0)
            return name_fit(buf, len, whole);
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
