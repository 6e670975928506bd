/*
 * blocked.c - what a waiter says of a holder it cannot take the GPU from
 * yet: one blocked inside a sync (on work outside this GPU's lease), and
 * one stopped while this process's memory is paged out and can come back
 * only once the stopped one pages out.
 *
 * Divided into: blocked holders; stopped holders.
 *
 * Locks: none taken; the holder's slot is read with relaxed atomics and
 * its `blocked` mark set with a compare-and-swap (the first waiter says).
 */
#include "sched/sched_int.h"

#include <stdio.h>
#include <string.h>

/* ---- blocked holders -----------------------------------------------------------
 * A holder inside one host-blocking sync for longer than the max slice
 * while this process waits is blocked on something outside this GPU's
 * lease: another process's work (a collective's peer rank, an IPC event, a
 * value another process writes) that may itself wait for a GPU.  The first
 * waiter to see it marks it (salus-top shows it blocked until its sync
 * ends) and says once per sync what it waits on; the first time, a
 * process's holder without a gang also hears what to do.  The rule that
 * follows is the max slice's: SCHED_SLICE_GRACE_NS later the GPU goes to the
 * policy's pick (wait.c's poll_slice).  That never makes a deadlock worse: the
 * holder's queued work stays queued (its drain cannot end, so the new
 * holder waits SCHED_DRAIN_MAX_NS for it, drain.c, then the GPU time-slices
 * the two), nothing it waits for is held back by Salus, and it waits for
 * the lease again only at its next launch, after its sync has returned. */

static const char *const sync_names[] = {
    [SCHED_SYNC_STREAM] = "cuStreamSynchronize", [SCHED_SYNC_CTX] = "cuCtxSynchronize",
    [SCHED_SYNC_EVENT] = "cuEventSynchronize", [SCHED_SYNC_COPY] = "a device-to-host copy",
    [SCHED_SYNC_HOSTFN] = "cuLaunchHostFunc",
};

void sched_note_blocked(sched_proc_t *p, int d, int h)
{
    static int said_gang;
    sched_slot_t *hs = sched_slot(p->t, h);
    uint64_t since = util_load_relaxed(&hs->sync_since_ns), now = sched_now();
    if (!since || since > now || now - since < sched_dev_max_slice_ns(sched_dev(p->t, d)) ||
        util_load_relaxed(&hs->in_sync) == 0)
        return;
    uint32_t none = 0;
    if (!__atomic_compare_exchange_n(&hs->blocked, &none, (uint32_t)d + 1, 0,
                                     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        return;                                  /* said already, for this sync */
    uint32_t kind = util_load_relaxed(&hs->sync_kind);
    unsigned long long obj = util_load_relaxed(&hs->sync_obj);
    char gang[SCHED_GANG_NAME];
    memcpy(gang, hs->gang_name, sizeof gang);
    gang[sizeof gang - 1] = '\0';
    for (char *c = gang; *c; c++)                /* the table's bytes: printable only */
        if (*c < 0x20 || *c > 0x7e)
            *c = '?';
    shm_ident_t id;
    int pid = shm_slot_ident(p->t, h, &id) == 0 ? (int)id.pid : 0;
    util_warn("device %d: the process that holds it (pid %d, slot %d, gang %s) has been blocked "
              "in %s(%#llx) for %llu ms while this process waits: it waits for work outside "
              "this GPU (another process's kernel, a collective, an IPC event); the GPU goes "
              "to the waiters at its max slice (SALUS_MAX_SLICE_MS)", d, pid, h,
              gang[0] ? gang : "none", kind < 4 ? sync_names[kind] : "a sync", obj,
              (unsigned long long)((now - since) / 1000000));
    if (!gang[0])
        util_log_once(&said_gang, UTIL_LOG_WARN,
                      "if the processes that wait for each other are the ranks of one "
                      "distributed job, give each of them SALUS_GANG=<job> (Salus names the "
                      "gang itself from torchrun's, MPI's, Slurm's or JAX's variables unless "
                      "SALUS_GANG=off): a gang's processes hold their GPUs together, so that "
                      "one job cannot hold a GPU while its rank waits for another job's");
}

/* ---- stopped holders ------------------------------------------------------------
 * A holder stopped by a signal or a debugger is idle: the GPU goes to a
 * waiter (wait.c's poll_stopped), whatever the policy.  Not to a waiter
 * with memory paged out that the device has no room for: its page-in would
 * need the stopped process to page out, which only that process can do,
 * by running, and would hold the GPU idle until it continues.  The waiter
 * says so once per stop, and waits. */
void sched_note_stopped_paged(sched_proc_t *p, int d, int h)
{
    shm_ident_t id;
    int pid = shm_slot_ident(p->t, h, &id) == 0 ? (int)id.pid : 0;
    util_warn("device %d: the process that holds it (pid %d, slot %d) is stopped (SIGSTOP, "
              "Ctrl-Z or a debugger), and this process's memory paged out (SALUS_SWAP) can "
              "come back only once the stopped one pages out, which only it can do, by "
              "running: this process waits until it continues (kill -CONT %d) or ends", d,
              pid, h, pid);
}
