/*
 * slot_hooks.c - what is done to a process's accounting from outside it:
 * the reap and repair hooks the table runs under its lock (a slot freed, a
 * lock holder's unfinished work), and a monitor's new limit (salus limit).
 *
 * Divided into: reap and repair hooks; a new limit.
 *
 * Locks: every function here runs under the table's lock (the hooks are
 * called with it held; mem_set_limit_table takes it).  The grant and
 * reclaim protocol they use is account.c's.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <errno.h>

/* ---- reap and repair hooks -------------------------------------------------
 * Called under the lock by whichever process frees a slot (its own at exit,
 * a dead peer's).  Device sums need nothing: the slot drops out of them when
 * it is freed.  The hook zeroes the slot's accounting (monitors read it
 * without the lock) and wakes those waiting for memory. */
void mem_reap_hook(shm_table_t *t, int slot, void *area, void *ctx)
{
    (void)ctx;
    mem_slot_t *a = area;
    if (!a)
        return;
    if (slot == shm_self_peek(t))
        util_store_release(&mem_p.mode, MEM_OPEN);   /* released: stop */
    uint32_t wd = util_load_relaxed(&a->wait_dev);
    if (wd >= 1 && wd <= SHM_MAX_DEVICES && util_load_relaxed(&a->wait_kind) == MEM_WAIT_ADMIT) {
        mem_dev_t *dev = shm_device_area(t, (int)wd - 1, SHM_AREA_MEM);
        if (dev)
            mem_wake_admit(dev);                 /* it may have been the head */
    }
    util_store_relaxed(&a->wait_dev, 0);
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_sdev_t *sd = &a->dev[d];
        mem_dev_t *cd = shm_device_area(t, d, SHM_AREA_MEM);
        if (cd && slot >= 0 && slot < SHM_MAX_SLOTS)
            util_store_relaxed(&cd->ctx_kib[slot], 0);
        if (!util_load_relaxed(&sd->flags) && !util_load_relaxed(&sd->granted) &&
            !util_load_relaxed(&sd->reserved))
            continue;
        util_store_seq(&sd->avail, 0);
        util_store_relaxed(&sd->granted, 0);
        util_store_relaxed(&sd->reserved, 0);
        util_store_relaxed(&sd->flags, 0);
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        mem_publish_locked(t, d);
        mem_wake(dev);
    }
}

void mem_repair_hook(shm_table_t *t, void *ctx)
{
    (void)ctx;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        if (util_load_relaxed(&dev->magic) != MEM_DEV_MAGIC)
            continue;
        mem_fix_log(t, d);
        mem_publish_locked(t, d);
    }
}

/* ---- a new limit (salus limit) ----------------------------------------------
 * A monitor sets the limit of the process in (slot, gen) on each of its
 * devices, under the lock.  A limit below what the process can never free
 * while it runs (its contexts, its reservation) is refused unless forced:
 * every allocation would be refused.  Below what the process holds, the
 * limit stops its growth: its spare beyond its reservation is taken back at
 * once (with the reclaim protocol, so the owner's lock-free takes stay
 * exact), and the process sees the lowered limit at its next grant:
 * it may hold up to its last iteration's peak until that falls (livelim.c),
 * so that a training job's next iteration is not refused what the last
 * one freed.  The invariant sd.granted <= sd.limit holds again then; until
 * then sd.granted <= max(sd.limit, what it held when the limit came).  A page-out
 * frees too: what a paging job paged out comes back in only within the
 * limit (src/page's blocked rule and page-in keep it off the GPU meanwhile),
 * and *out says what it has paged out so that salus limit can say so. */
int mem_set_limit_table(shm_table_t *t, int slot, uint32_t gen, const char *text,
                        unsigned flags, mem_limit_change_t *out)
{
    uint64_t probe;
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS || !text || !out ||
        util_parse_size(text, 1, &probe) != 0)
        return -EINVAL;
    int rc = shm_lock(t);
    if (rc != 0)
        return rc;
    mem_slot_t *a = shm_slot_area(t, slot, SHM_AREA_MEM);
    if (!a || shm_slot_gen(t, slot) != gen || !shm_slot_alive(t, slot) ||
        util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC) {
        shm_unlock(t);
        return -ESRCH;
    }
    mem_limit_change_t c = { 0 };
    c.paged_out = mem_clampb(util_load_relaxed(&a->swapped_out));
    c.pages = (util_load_relaxed(&a->page_flags) & MEM_PAGE_SWAP) != 0;
    for (int d = 0; d < SHM_MAX_DEVICES && rc == 0; d++) {
        mem_sdev_t *sd = &a->dev[d];
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        uint64_t v, budget = util_load_relaxed(&dev->budget);
        if (!(util_load_relaxed(&sd->flags) & MEM_SDEV_REGISTERED) ||
            util_load_relaxed(&dev->magic) != MEM_DEV_MAGIC)
            continue;
        if (util_parse_size(text, budget, &v) != 0 || v == 0)
            rc = -EINVAL;                        /* 0 would refuse every allocation */
        else if (v < util_load_relaxed(&sd->reserved))
            rc = -EBUSY;                         /* below its guaranteed reservation */
        uint64_t floor = mem_ctx_of(dev, slot) + util_load_relaxed(&sd->reserved);
        if (rc == 0 && v < floor && !(flags & MEM_LIMIT_FORCE)) {
            rc = -EDOM;                          /* it can never hold less while it runs */
            c.floor = floor;
        }
        c.reserved += util_load_relaxed(&sd->reserved);
        c.ctx += mem_ctx_of(dev, slot);
        uint64_t g = mem_clampb(util_load_relaxed(&sd->granted));
        uint64_t spare = MEM_SPARE(util_load_relaxed(&sd->avail));
        c.used += g > spare ? g - spare : 0;
        c.limit = v > budget ? budget : v;
        c.devices++;
    }
    for (int d = 0; d < SHM_MAX_DEVICES && rc == 0; d++) {
        mem_sdev_t *sd = &a->dev[d];
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        uint64_t v, budget = util_load_relaxed(&dev->budget);
        if (!(util_load_relaxed(&sd->flags) & MEM_SDEV_REGISTERED) ||
            util_load_relaxed(&dev->magic) != MEM_DEV_MAGIC ||
            util_parse_size(text, budget, &v) != 0)
            continue;
        util_store_relaxed(&sd->limit, v > budget ? budget : v);
        if (mem_clampb(util_load_relaxed(&sd->granted)) > util_load_relaxed(&sd->limit))
            mem_reclaim_one(t, dev, d, slot);        /* its spare, not what it holds */
        mem_publish_locked(t, d);
        mem_wake(dev);                           /* a raised limit may let it go on */
    }
    shm_unlock(t);
    if (rc == 0 && c.devices == 0)
        rc = -ENODEV;                            /* registered on no device yet */
    if (rc == 0 || rc == -EDOM)
        *out = c;                                /* -EDOM: what it takes at least */
    return rc;
}
