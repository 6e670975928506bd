/*
 * charge.c - memory's charging interface for the modules above it that
 * hold device memory of their own (src/vmem's physical chunks): charge and
 * give back by CUDA ordinal, with explicit flags where an allocation's
 * rules do not fit, the driver's refusals of what was charged, the
 * process's room, and the few facts of the module those callers need.
 *
 * Divided into: the module's state; charges; room and waiters.
 *
 * Locking: none of its own.  A charge is an allocation's (memory.c's
 * charge: lock-free on the spare, the table's lock on the slow path); the
 * room is read under the table's lock.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

/* ---- the module's state ------------------------------------------------- */

int mem_active(void)
{
    return util_load_acquire(&mem_p.mode) == MEM_ON;
}

const drv_t *mem_driver(void)
{
    /* start() copies it before the release store of the mode, counted or
     * not (it keeps the table that was given even when it runs open). */
    return util_load_acquire(&mem_p.mode) != MEM_OFF &&
           mem_p.drv.ctx_get_device ? &mem_p.drv : NULL;
}

int mem_swap_wanted(void)
{
    return mem_active() && mem_p.cfg.swap;
}

/* ---- charges ------------------------------------------------------------ */

mem_charge_t mem_charge_at(int ordinal, uint64_t bytes, unsigned flags)
{
    if (!mem_active() || bytes == 0 || ordinal == MEM_DEV_NONE)
        return MEM_UNCOUNTED;
    if (__builtin_expect(util_load_relaxed(&mem_p.suspended), 0))
        mem_resume_try();             /* the lock timed out once: is it back? */
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    if (!ld)
        return MEM_UNCOUNTED;
    switch (mem_charge(ld, bytes, flags)) {
    case MEM_TAKEN:
        return MEM_CHARGED;
    case MEM_TAKE_STUCK:
        return MEM_CHARGE_STUCK;
    case MEM_TAKE_UNCOUNTED:
        return MEM_UNCOUNTED;
    default:
        return MEM_CHARGE_REFUSED;
    }
}

void mem_uncharge_at(int ordinal, uint64_t bytes)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    if (ld)
        mem_give(ld, bytes);
}

int mem_charge_retry(int ordinal, uint64_t bytes, uint64_t *refused_at)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    return ld ? mem_drv_retry(ld, ordinal, bytes, refused_at) : 0;
}

void mem_charge_refresh(int ordinal)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    if (ld)
        mem_drv_refresh(ld, ordinal);
}

/* ---- room and waiters ----------------------------------------------------- */

int mem_room_at(int ordinal, uint64_t *room)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    if (!ld || mem_lock() != 0)
        return -1;                    /* uncounted; the lock's trouble is said */
    shm_reap_dead(mem_p.t, 1);        /* a dead peer's memory is room */
    mem_fix_log(mem_p.t, ld->d);
    uint64_t r = mem_room_locked(ld);
    shm_unlock(mem_p.t);
    *room = r;
    return 0;
}

int mem_waited_on(int ordinal)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    return ld && ld->dev && util_load_relaxed(&ld->dev->waiters) != 0;
}

void mem_set_pinned(int ordinal, uint64_t bytes)
{
    mem_slot_t *area = util_load_acquire(&mem_p.area);
    mem_local_dev_t *ld = ordinal >= 0 ? mem_local_dev(ordinal) : NULL;
    if (!area)
        return;
    util_store_relaxed(&area->pinned, ld ? bytes : 0);
    util_store_relaxed(&area->pinned_dev, ld ? (uint32_t)ld->d + 1 : 0);
}
