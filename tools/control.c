/*
 * control.c - live control of one running process, shared by `salus renice`,
 * `salus limit` and salus-top's keys: finding the processes a target names,
 * checking that the caller may change them, and changing their priority or
 * memory limit through the sched and memory modules.
 *
 * Divided into: permission; finding targets; the changes, each said in one
 * sentence, which is also the change's audit line (audit.c).
 *
 * A change is made in the table under its lock by the module that owns the
 * field (sched_set_priority_table, mem_set_limit_table); it names the
 * process by (slot, generation), so a process that exited since it was found
 * is reported gone, never confused with its slot's next owner.  Single
 * threaded: no lock of its own.
 */
#include "top.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/memory.h"
#include "util/util.h"

/* ---- permission ---------------------------------------------------------------- */

int top_control_allowed(uid_t caller, uid_t owner, int group_table, int in_group)
{
    return caller == 0 || caller == owner || (group_table && in_group);
}

/* May this process change `t`'s process? 0, or -EPERM with why in buf. */
static int may_change(const top_target_t *t, char *why, size_t len)
{
    int in_group = 0;
    if (t->group[0]) {
        struct group gr, *res = NULL;
        char buf[4096];
        in_group = getgrnam_r(t->group, &gr, buf, sizeof buf, &res) == 0 && res &&
                   (getegid() == gr.gr_gid || group_member(gr.gr_gid));
    }
    if (top_control_allowed(geteuid(), t->uid, t->group[0] != 0, in_group))
        return 0;
    snprintf(why, len, "%d (%s) belongs to %s: only its owner may change it%s", (int)t->pid,
             t->name, t->user, t->group[0] ? ", or a member of the table's group" : "");
    return -EPERM;
}

/* ---- finding targets ---------------------------------------------------------------- */

/* A process id, or a process name (as salus-top shows it). */
static int matches(const top_proc_t *p, const char *what)
{
    char *end;
    long pid = strtol(what, &end, 10);
    if (*what && !*end)
        return pid == (long)p->pid;
    return strcmp(p->name, what) == 0;
}

int top_find_targets(const top_snap_t *s, const char *what, top_target_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < s->nprocs && n < max; i++) {
        const top_proc_t *p = &s->procs[i];
        if (!matches(p, what))
            continue;
        int dup = 0;                         /* a process on two GPUs has two rows */
        for (int k = 0; k < n && !dup; k++)
            dup = out[k].slot == p->slot && strcmp(out[k].table, s->tables[p->table].name) == 0;
        if (dup)
            continue;
        top_target_of(s, p, &out[n++]);
    }
    return n;
}

void top_target_of(const top_snap_t *s, const top_proc_t *p, top_target_t *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->table, sizeof t->table, "%s", s->tables[p->table].name);
    top_table_group(t->table, t->group, sizeof t->group);
    t->slot = p->slot;
    t->gen = p->gen;
    t->pid = p->pid;
    t->start_ticks = p->start_ticks;
    t->uid = p->uid;
    t->priority = p->priority;
    t->mem_limit = p->mem_limit;
    snprintf(t->name, sizeof t->name, "%s", p->name);
    snprintf(t->user, sizeof t->user, "%s", p->user);
}

/* ---- the changes ---------------------------------------------------------------------- */

static const char *change_error(int rc)
{
    switch (rc) {
    case -ESRCH:  return "it has exited (or does not use the scheduler or the memory "
                         "accounting yet)";
    case -EBUSY:  return "that is below the memory it has reserved (SALUS_MEM_RESERVE)";
    case -EDOM:   return "that is below the memory it can never free while it runs (its "
                         "contexts and modules, and any reservation): every allocation "
                         "would be refused";
    case -ENODEV: return "it has no GPU yet: set its limit once it has made a context";
    case -EINVAL: return "the value is not accepted";
    default:      return top_open_error(rc);
    }
}

/* Open the target's table for writing, after the permission check. */
static int open_for(const top_target_t *t, shm_table_t **tab, char *msg, size_t len)
{
    char why[256];
    if (may_change(t, why, sizeof why) != 0) {
        snprintf(msg, len, "%s", why);
        return -EPERM;
    }
    int rc = top_open_table(t->table, t->group, 1, tab);
    if (rc != 0)
        snprintf(msg, len, "%d (%s): table %s: %s", (int)t->pid, t->name, t->table,
                 top_open_error(rc));
    return rc;
}

int top_renice(const top_target_t *t, int priority, char *msg, size_t len)
{
    shm_table_t *tab;
    int rc = open_for(t, &tab, msg, len);
    if (rc != 0) {
        top_audit("renice to %d refused in %s: %s", priority, t->table, msg);
        return rc;
    }
    rc = sched_set_priority_table(tab, t->slot, t->gen, priority);
    shm_close_table(tab);
    if (rc != 0)
        snprintf(msg, len, "%d (%s): the priority could not be changed: %s", (int)t->pid,
                 t->name, change_error(rc));
    else
        snprintf(msg, len, "%d (%s): priority %d -> %d, from its next iteration boundary",
                 (int)t->pid, t->name, t->priority, priority);
    top_audit("renice in %s: %s", t->table, msg);
    return rc;
}

/* What the limit does to a paging job (SALUS_SWAP=on) it is below, added
 * to msg: its paged-out memory comes back in only within the limit, so
 * paged out it leaves the GPU until the limit is raised (src/page). */
static void say_paging(const mem_limit_change_t *c, char *msg, size_t len)
{
    uint64_t whole = c->used + c->paged_out;
    size_t n = strlen(msg);
    if (!c->pages || whole <= c->limit || n >= len)
        return;
    char out[16], all[16];
    top_human_bytes(c->paged_out, out, sizeof out);
    top_human_bytes(whole, all, sizeof all);
    snprintf(msg + n, len - n, ". It pages (SALUS_SWAP=on), %s paged out now: what it pages "
             "out comes back in only within the limit, so paged out it leaves the GPU to its "
             "peers and waits, saying so, until its limit is raised to at least %s", out, all);
}

int top_limit(const top_target_t *t, const char *size, int force, char *msg, size_t len)
{
    shm_table_t *tab;
    int rc = open_for(t, &tab, msg, len);
    if (rc != 0) {
        top_audit("limit to %.32s refused in %s: %s", size, t->table, msg);
        return rc;
    }
    mem_limit_change_t c;
    rc = mem_set_limit_table(tab, t->slot, t->gen, size, force ? MEM_LIMIT_FORCE : 0, &c);
    shm_close_table(tab);
    if (rc == -EDOM) {
        char floor[16];
        top_human_bytes(c.floor, floor, sizeof floor);
        snprintf(msg, len, "%d (%s): the memory limit could not be changed: %s is below the "
                 "%s it can never free while it runs (its contexts and modules, and any "
                 "reservation), so every allocation would be refused; at least %s, or "
                 "--force to set it anyway", (int)t->pid, t->name, size, floor, floor);
        top_audit("limit to %.32s refused in %s: %s", size, t->table, msg);
        return rc;
    }
    if (rc != 0) {
        snprintf(msg, len, "%d (%s): the memory limit could not be changed: %s", (int)t->pid,
                 t->name, change_error(rc));
        top_audit("limit to %.32s refused in %s: %s", size, t->table, msg);
        return rc;
    }
    char was[16], now[16], holds[16];
    top_human_bytes(t->mem_limit, was, sizeof was);
    top_human_bytes(c.limit, now, sizeof now);
    top_human_bytes(c.used + c.ctx, holds, sizeof holds);   /* what the limit bounds */
    /* A size past the budget is cut to it (memory's rule): say why the
     * limit is not what was asked.  Percentages are of the budget already. */
    uint64_t asked;
    if (!strchr(size, '%') && !strchr(size, '=') && util_parse_size(size, 1, &asked) == 0 &&
        asked > c.limit)
        snprintf(msg, len, "%d (%s): memory limit %s -> %s (it holds %s): %s is more than its "
                 "GPU's budget, %s (the capacity less the headroom kept for contexts), so its "
                 "limit is the whole budget", (int)t->pid, t->name, was, now, holds, size, now);
    else if (c.used + c.ctx > c.limit)
        snprintf(msg, len, "%d (%s): memory limit %s -> %s; it holds %s, more than that: "
                 "%s", (int)t->pid, t->name, was, now, holds,
                 c.pages ? "the limit takes effect as it frees or pages out (a paging job's "
                 "excess is paged out)" : "it goes on allocating up to its last iteration's "
                 "peak, and the limit takes hold as that peak falls (what it frees for good "
                 "is not given back to it)");
    else
        snprintf(msg, len, "%d (%s): memory limit %s -> %s (it holds %s), from its next "
                 "allocation", (int)t->pid, t->name, was, now, holds);
    say_paging(&c, msg, len);
    top_audit("limit in %s: %s", t->table, msg);
    return 0;
}

/* A job that gets SIGTERM may need the GPU to shut down (its calls wait for
 * the lease): the table marks it, so that it goes first and the holder
 * hands over at its next boundary whatever the policy.  Best effort: the
 * signal is sent either way. */
static void mark_ending(const top_target_t *t)
{
    shm_table_t *tab;
    if (top_open_table(t->table, t->group, 1, &tab) != 0)
        return;
    sched_set_ending_table(tab, t->slot, t->gen);
    shm_close_table(tab);
}

int top_kill(const top_target_t *t, int sig, char *msg, size_t len)
{
    char why[256];
    int stopped, rc = 0;
    const char *signame = sig == SIGKILL ? "SIGKILL" : sig == SIGTERM ? "SIGTERM" : "a signal";
    if (may_change(t, why, sizeof why) != 0) {
        snprintf(msg, len, "%s", why);
        rc = -EPERM;
    } else if (!top_pid_is(t->pid, t->start_ticks, &stopped)) {
        /* Its slot's pid is the one it has where it runs; here that pid is
         * nobody, or another process, which must not get the signal. */
        snprintf(msg, len, "%d (%s): not sent %s: pid %d here is not that process (it runs "
                 "in another PID namespace, a container, whose pids the table shows; or it "
                 "has exited): signal it from its own namespace", (int)t->pid, t->name,
                 signame, (int)t->pid);
        rc = -ESRCH;
    } else {
        if (sig == SIGTERM)
            mark_ending(t);
        if (kill(t->pid, sig) != 0) {
            rc = -errno;
            snprintf(msg, len, "%d (%s): cannot be killed: %s", (int)t->pid, t->name,
                     strerror(errno));
        } else {
            snprintf(msg, len, "%d (%s): sent %s%s", (int)t->pid, t->name, signame,
                     sig == SIGTERM ? "; it goes first for the GPU, to exit" : "");
        }
    }
    top_audit("kill in %s: %s", t->table, msg);
    return rc;
}
