/*
 * livelim.c - a limit lowered live (salus limit) below what a running job
 * uses: the job goes on, and the limit takes hold as the job frees.
 *
 * A training job frees its per-iteration memory and allocates it again in
 * the next iteration.  Were a lowered limit applied at once, the job's next
 * iteration would be refused what it had just freed: a steady state turned
 * into a crash.  So when this process first sees its limit lowered below
 * its last iteration's peak, it may hold up to that peak (ld->lim_hold,
 * contexts included, never more than its limit before), and at each
 * iteration boundary what it may hold falls to that iteration's peak,
 * until it reaches the limit: the footprint converges to the limit as the
 * job frees for good, and its spare above what it may hold goes back.
 * A job that pages (SALUS_SWAP=on) is held to the limit itself: its excess
 * is paged out and comes back in only within the limit (src/page).
 *
 * Divided into: what it may hold; an iteration's end.  It reads the
 * table's slot alone: account.c, near the bottom of the module, calls it, so
 * what it needs of the process (its contexts, whether it pages) comes in
 * its arguments.
 *
 * Locking: ld->lim_seen under the table's lock; ld->lim_hold is the
 * owner's, atomic (an iteration's end lowers it outside the lock, a grant
 * sets it under the lock: both only lower it once set).
 */
#include "memory/mem_layout.h"
#include "util/util.h"

/* ---- what it may hold ---------------------------------------------------- */

static uint64_t iteration_peak(mem_local_dev_t *ld, uint64_t ctx)
{
    uint64_t p = util_load_relaxed(&ld->sd->run_peak), i = util_load_relaxed(&ld->iter_peak);
    return mem_clampb(p > i ? p : i) + ctx;
}

static void say_held(mem_local_dev_t *ld, uint64_t limit, uint64_t hold)
{
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: %s: its limit was lowered to %s (salus "
                  "limit), below the %s its last iteration used (contexts included): it "
                  "goes on allocating up to that peak, and the limit takes hold as the "
                  "peak falls, at each iteration's end; what it frees for good goes back "
                  "to the device", ld->name, util_size(limit).s, util_size(hold).s);
}

uint64_t mem_live_limit_locked(mem_local_dev_t *ld, uint64_t ctx, int swap)
{
    uint64_t limit = util_load_relaxed(&ld->sd->limit), seen = ld->lim_seen;
    uint64_t hold = util_load_relaxed(&ld->lim_hold);
    if (limit != seen) {
        ld->lim_seen = limit;
        /* lowered: it keeps what its iterations use; a paging job's excess
         * is paged out instead, and comes back only within the limit
         * (src/page), so it is held to the limit itself */
        if (limit < seen && !swap) {
            uint64_t peak = mem_umin(iteration_peak(ld, ctx), seen);
            if (!hold)                /* once set, it only falls */
                hold = peak;
            if (hold > limit)
                say_held(ld, limit, hold);
        }
    }
    if (hold <= limit)
        hold = 0;                     /* reached, or raised past it */
    util_store_relaxed(&ld->lim_hold, hold);
    return hold ? hold : limit;
}

/* ---- an iteration's end -------------------------------------------------- */

int mem_live_limit_iteration(mem_local_dev_t *ld, uint64_t peak, uint64_t ctx)
{
    uint64_t hold = util_load_relaxed(&ld->lim_hold);
    uint64_t want = mem_clampb(peak) + ctx;
    if (!hold || want >= hold)
        return 0;                     /* its use has not fallen */
    uint64_t limit = util_load_relaxed(&ld->sd->limit);
    uint64_t to = want > limit ? want : 0;
    if (!__atomic_compare_exchange_n(&ld->lim_hold, &hold, to, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return 0;                     /* a grant changed it meanwhile: next time */
    if (to == 0) {
        static int said;
        util_log_once(&said, UTIL_LOG_INFO, "memory: %s: its limit of %s (salus limit) "
                      "holds now", ld->name, util_size(limit).s);
    }
    return 1;
}
