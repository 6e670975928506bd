/*
 * sums.c - what a device's slots add up to, read from the table: the sums
 * grants and admissions are judged by (mem_sums, mem_sums_live), their copy
 * for monitors (mem_publish_locked), and the repair of a reclaim that a
 * process died in the middle of (mem_fix_log).
 *
 * Divided into: sums over slots; the reclaim log.
 *
 * Locking.  Every function here runs under the table's lock; the sums read
 * peers' words with relaxed loads, each clamped, and write only the
 * device's cached sums and the log.  Nothing here calls another file of the
 * module (account.c, near the bottom of the module, calls these).
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <string.h>

/* ---- sums over slots ----------------------------------------------------
 * Each value clamped to what one slot can hold: the device's budget, which
 * is set by the first process on the device and kept while others are on
 * it, and which every slot's grant and reservation fit within (mem_layout.h).
 * A word scribbled past it (a grant of all ones) then weighs as one slot
 * holding the whole device, as a real one could, until its owner repairs
 * it (owncheck.c), never more: it cannot overflow a sum, nor raise a
 * running peer's kept peak past the device. */
static uint64_t slot_cap(shm_table_t *t, int d)
{
    const mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
    uint64_t budget = dev ? mem_clampb(util_load_relaxed(&dev->budget)) : 0;
    return budget ? budget : MEM_MAX_BYTES;
}

/* What slot j keeps for its next iteration: its last iteration's peak while
 * it runs.  A peer with memory paged out keeps nothing more: it runs again
 * only once paged back in, which takes room as any allocation does (a
 * paged-out peer at rest between iterations would otherwise hold its whole
 * peak against a device it has left).  A peer waiting for the GPU is not
 * running: whoever runs instead
 * hands the GPU back at an iteration boundary, with its own iteration's
 * memory freed.  A peer waiting for memory keeps nothing either, so that
 * two processes whose peaks together pass the budget never wait for each
 * other: one of them goes on. */
static uint64_t run_peak(shm_table_t *t, int j, const mem_slot_t *a, const mem_sdev_t *sd,
                         uint64_t floor, uint64_t cap)
{
    shm_ident_t id;
    uint64_t p = mem_umin(util_load_relaxed(&sd->run_peak), cap);
    if (p <= floor || shm_slot_ident(t, j, &id) != 0 || id.state == SHM_WAIT_GPU ||
        id.state == SHM_WAIT_MEM || util_load_relaxed(&a->swapped_out) != 0)
        return floor;
    return p;
}

static void sums(shm_table_t *t, int d, int skip, int live_only, mem_sums_t *s)
{
    uint64_t cap = slot_cap(t, d);
    memset(s, 0, sizeof *s);
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (j == skip || shm_slot_gen(t, j) == 0 || (live_only && !shm_slot_alive(t, j)))
            continue;
        mem_slot_t *a = mem_area_of(t, j);
        mem_sdev_t *sd = &a->dev[d];
        uint64_t g = mem_umin(util_load_relaxed(&sd->granted), cap);
        uint64_t r = mem_umin(util_load_relaxed(&sd->reserved), cap);
        uint64_t spare = MEM_SPARE(util_load_relaxed(&sd->avail));
        uint64_t u = g > spare ? g - spare : 0;
        s->granted += g;
        s->used += u;
        s->reserved += r;
        s->committed += mem_umax(g, r);
        s->held += mem_umax(u, r);
        s->committed_run += run_peak(t, j, a, sd, mem_umax(g, r), cap);
        s->held_run += run_peak(t, j, a, sd, mem_umax(u, r), cap);
        s->peak = mem_umax(s->peak, mem_umin(util_load_relaxed(&sd->peak), cap));
        if (util_load_relaxed(&sd->flags) & MEM_SDEV_REGISTERED)
            s->ctx += mem_ctx_of(shm_device_area(t, d, SHM_AREA_MEM), j);
        if (util_load_relaxed(&a->wait_dev) == (uint32_t)d + 1) {
            s->waiters++;
            s->queued += util_load_relaxed(&a->wait_kind) == MEM_WAIT_ADMIT;
        }
    }
}

void mem_sums(shm_table_t *t, int d, int skip, mem_sums_t *s)
{
    sums(t, d, skip, 0, s);
}

void mem_sums_live(shm_table_t *t, int d, mem_sums_t *s)
{
    sums(t, d, -1, 1, s);
}

void mem_publish_locked(shm_table_t *t, int d)
{
    mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
    mem_sums_t s;
    if (!dev)
        return;
    mem_sums(t, d, -1, &s);
    util_store_relaxed(&dev->sum_granted, s.granted);
    util_store_relaxed(&dev->sum_used, s.used);
    util_store_relaxed(&dev->sum_reserved, s.reserved);
    util_store_relaxed(&dev->sum_committed, s.committed);
    util_store_relaxed(&dev->sum_ctx, s.ctx);
    util_store_relaxed(&dev->queued, s.queued);
    uint64_t mib = s.peak >> 20;
    if (mib > util_load_relaxed(&dev->peak_mib))
        util_store_relaxed(&dev->peak_mib, (uint32_t)(mib > UINT32_MAX ? UINT32_MAX : mib));
    util_store_seq(&dev->waiters, s.waiters);
}

/* ---- the reclaim log ----------------------------------------------------
 * A valid log seen under the lock belongs to a reclaimer that died holding
 * it (a live one clears it before unlocking).  If its CAS happened (slot j,
 * same process, avail carries the log's tag) and its granted write did not
 * (granted_tag differs), finish it. */
void mem_fix_log(shm_table_t *t, int d)
{
    mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
    if (!dev || !util_load_seq(&dev->log.valid))
        return;
    mem_reclaim_log_t log = dev->log;
    mem_slot_t *a = mem_area_of(t, log.slot);
    if (a && log.slot_gen != 0 && shm_slot_gen(t, log.slot) == log.slot_gen) {
        mem_sdev_t *sd = &a->dev[d];
        uint64_t g = util_load_relaxed(&sd->granted);
        if (MEM_TAG(util_load_relaxed(&sd->avail)) == log.tag &&
            util_load_relaxed(&sd->granted_tag) != log.tag) {
            util_store_relaxed(&sd->granted, g > log.take ? g - log.take : 0);
            util_store_relaxed(&sd->granted_tag, log.tag);
            util_info("memory: finished the reclaim of a process that died holding the "
                      "table's lock (slot %d, %s)", log.slot, util_size(log.take).s);
        }
    }
    util_store_seq(&dev->log.valid, 0);
}
