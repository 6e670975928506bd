/*
 * owncheck.c - the owner's check of its own slot's words: the grant, the
 * spare word and the limit that the table holds for this process, against
 * what the process itself knows, so that a word something other than
 * libsalus wrote (a stray store, a tool, a bug) is repaired and said once
 * instead of hanging the process, or its peers, for good.
 *
 * Divided into: the limit; the grant and the spare; the entry points.
 *
 * What the process knows (mem_local_dev_t):
 *   charged      what it has charged on the device and not given back: its
 *                used, counted by itself (mem_took after every take,
 *                mem_give before every give: relaxed atomics);
 *   granted_own  sd.granted as it last wrote it (mem_set_granted, under the
 *                lock) or accepted it here;
 *   tag_seen     sd.avail's tag at that moment;
 *   lim_seen     sd.limit as it last saw it (livelim.c).
 *
 * The grant, exactly.  Under the table's lock, sd.granted, sd.granted_tag
 * and sd.avail's tag are still: only lock holders write them (the owner's
 * grants and shrinks; a reclaimer, which writes the new tag into avail,
 * then the grant, then granted_tag; mem_fix_log, run first, finishes a
 * reclaimer that died between).  The owner's other threads change only
 * avail's spare meanwhile, with one atomic read-modify-write each that
 * keeps the tag.  So, with the lock held, these are exact, whatever the
 * owner's other threads are doing:
 *   avail's tag != granted_tag: the spare word or granted_tag was written
 *     by something else (a reclaim writes both);
 *   tag == tag_seen and granted != granted_own: nobody reclaimed since
 *     the owner last wrote or accepted the grant, and only a reclaim
 *     changes it besides the owner: the grant was written by something
 *     else (blind only to 65,536 reclaims of this slot in between, each
 *     of which needs a spare above its reservation that only the owner's
 *     frees make, and the owner takes the lock at its next allocation);
 *   tag != tag_seen and granted > granted_own: reclaims only lower it;
 *   spare > granted: a give adds bytes that the grant counts as used, a
 *     take subtracts, a reclaim and a shrink lower the spare first: the
 *     spare never passes the grant.
 * A spare rewritten within the grant with its tag kept reads as the
 * owner's own takes and frees: that one word is not seen.
 *
 * The repair.  A grant found wrong with no reclaim since goes back to
 * granted_own: exact.  Otherwise what the owner holds decides:
 * granted - spare + debt := charged.  charged leads or lags the spare by
 * the takes and gives its other threads have in flight at that moment
 * (a take subtracts from the spare, then adds to charged; a give subtracts
 * from charged, then adds to the spare: between the two steps the table
 * says more than charged), so such a repair is exact but for those bytes,
 * at most one allocation per thread, which the table then counts short.
 * Nothing else reads charged: an in-flight difference never reads as
 * corruption.
 *
 * A driver reading (ctxmem.c) taken while the table said less than the
 * process held counted the rest as foreign use: a repair forgets the
 * foreign use, which the next grant near the budget reads again.
 *
 * The limit.  No tool writes 0 (salus limit refuses it; registration
 * writes SALUS_MEM_LIMIT or the budget), nor more than the device's budget
 * (salus limit clamps to it): such a word goes back to lim_seen.
 *
 * Locking: mem_own_check_locked runs with the table's lock held (mem_lock
 * calls it each time the lock is taken); mem_own_words_suspect runs outside
 * it and only reads (its caller takes the lock when they disagree).
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <inttypes.h>

#define MEM_NO_GRANT UINT64_MAX

/* ---- the limit ------------------------------------------------------------ */

static int limit_bad(const mem_local_dev_t *ld, uint64_t limit)
{
    return limit == 0 || (limit > util_load_relaxed(&ld->dev->budget) &&
                          limit != ld->lim_seen && limit != ld->lim_set);
}

static void check_limit_locked(mem_local_dev_t *ld)
{
    static int said;
    uint64_t limit = util_load_relaxed(&ld->sd->limit);
    if (!limit_bad(ld, limit))
        return;
    uint64_t was = ld->lim_seen ? ld->lim_seen : util_load_relaxed(&ld->dev->budget);
    util_store_relaxed(&ld->sd->limit, was);
    util_log_once(&said, UTIL_LOG_WARN, "memory: %s: the table said this process's limit is "
                  "%#" PRIx64 ", which neither SALUS_MEM_LIMIT nor salus limit sets: restored "
                  "to %s, as it last saw it; something other than libsalus wrote to the "
                  "table %s", ld->name, limit, util_size(was).s,
                  shm_table_name(mem_p.t));
}

/* ---- the grant and the spare ---------------------------------------------- */

/* What the table says it uses, for the message (clamped: a scribbled word). */
static uint64_t table_used(uint64_t g, uint64_t spare, uint64_t debt)
{
    g = mem_clampb(g);
    return g + debt > spare ? g + debt - spare : 0;
}

/* Rewrite ld's grant (and its spare word, when `avail_bad`) from what it
 * holds; `trust`: the grant known right (MEM_NO_GRANT: none).  Under the
 * lock; the spare word changes with one CAS, so that a take or a give of
 * another thread lands before it (retried) or after it. */
static void repair_locked(mem_local_dev_t *ld, uint64_t trust, int avail_bad)
{
    mem_sdev_t *sd = ld->sd;
    uint64_t w = util_load_seq(&sd->avail), g;
    for (;;) {
        uint64_t h = util_load_relaxed(&ld->charged), debt = util_load_relaxed(&ld->debt);
        uint64_t used = mem_clampb(h > debt ? h - debt : 0);   /* granted - spare */
        if (!avail_bad) {
            g = trust != MEM_NO_GRANT ? trust : used + MEM_SPARE(w);
            if (MEM_SPARE(w) <= g)
                break;                       /* the spare stands */
            avail_bad = 1;
        }
        g = trust != MEM_NO_GRANT ? mem_umax(trust, used) : used;
        uint64_t nw = (w & ~MEM_SPARE_MASK) | (g - used);
        if (__atomic_compare_exchange_n(&sd->avail, &w, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            w = nw;
            break;
        }
    }
    mem_set_granted(ld, g);
    util_store_relaxed(&sd->granted_tag, MEM_TAG(w));
    ld->tag_seen = MEM_TAG(w);
}

static void check_grant_locked(mem_local_dev_t *ld)
{
    static int said;
    mem_sdev_t *sd = ld->sd;
    uint64_t w = util_load_seq(&sd->avail), g = util_load_relaxed(&sd->granted);
    uint64_t own = util_load_relaxed(&ld->granted_own);
    uint32_t tag = MEM_TAG(w);
    int tag_bad = tag != util_load_relaxed(&sd->granted_tag);
    int reclaimed = tag != ld->tag_seen;
    int grant_bad = reclaimed ? g > own : g != own;
    if (!tag_bad && !grant_bad && MEM_SPARE(w) <= g) {
        ld->tag_seen = tag;                   /* as it is: reclaims accepted */
        util_store_relaxed(&ld->granted_own, g);
        return;
    }
    uint64_t debt = util_load_relaxed(&ld->debt), said_used = table_used(g, MEM_SPARE(w), debt);
    uint64_t trust = !tag_bad && !reclaimed ? own : g <= own ? g : MEM_NO_GRANT;
    repair_locked(ld, trust, tag_bad);
    util_log_once(&said, UTIL_LOG_WARN, "memory: %s: the table said this process holds %s "
                  "there (grant %#" PRIx64 ", spare word %#" PRIx64 "); it holds %s: "
                  "corrected; something other than libsalus wrote to the table %s",
                  ld->name, util_size(said_used).s, g, w,
                  util_size(util_load_relaxed(&ld->charged)).s, shm_table_name(mem_p.t));
    /* A driver reading taken while the table said less than it held left
     * the difference as foreign use, which would keep its peers out after
     * the repair (and after it ends): forgotten, so that the next grant
     * near the budget reads the driver again (account.c's MEM_ASK). */
    util_store_relaxed(&ld->dev->foreign, 0);
    mem_publish_locked(mem_p.t, ld->d);
    mem_wake(ld->dev);                        /* what it said it held is room */
}

/* ---- the entry points ------------------------------------------------------ */

static mem_local_dev_t *registered(int d)
{
    mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[d]);
    return ld && util_load_acquire(&ld->sd) && ld->dev ? ld : NULL;
}

void mem_own_check_locked(void)
{
    if (!mem_p.t)
        return;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_local_dev_t *ld = registered(d);
        if (!ld)
            continue;
        mem_fix_log(mem_p.t, d);              /* a dead reclaimer's half first */
        check_limit_locked(ld);
        check_grant_locked(ld);
    }
}

int mem_own_words_suspect(void)
{
    int look = 0;
    for (uint32_t set = util_load_acquire(&mem_p.registered_set); set && !look; set &= set - 1) {
        mem_local_dev_t *ld = registered(__builtin_ctz(set));
        if (!ld)
            continue;
        mem_sdev_t *sd = ld->sd;
        look = util_load_relaxed(&sd->granted) != util_load_relaxed(&ld->granted_own) ||
               MEM_TAG(util_load_relaxed(&sd->avail)) !=
                   util_load_relaxed(&sd->granted_tag) ||
               util_load_relaxed(&sd->limit) == 0 ||
               util_load_relaxed(&sd->limit) > util_load_relaxed(&ld->dev->budget);
    }
    return look;
}
