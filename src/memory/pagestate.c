/*
 * pagestate.c - what paging (src/page, above this module) reads and writes
 * of memory's table areas: the paging words of the process's own slot (its
 * flags, the request peers raised, its counters), a validated copy of a
 * peer's paging state on a device, a request raised on a peer, a device's
 * figures, and the waits and wakes paging's own waits use.  Page reads no
 * struct of this module: it calls these (memory.h's "for paging").
 *
 * Divided into: the process and its devices; the own slot's paging words;
 * staging across the table; peers and devices (under the table lock); the
 * lock, waits and wakes.
 *
 * Locking: the own slot's words are the owner's, written with atomics
 * (peers read them under the table lock, monitors without it); a request
 * is raised on a peer under the table lock (mem_page_ask_slot_locked) and
 * cleared by its owner with a compare-and-swap (mem_page_request_served),
 * so that a larger request made meanwhile stays.  Every word read from a
 * peer's slot is bounded before use.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

/* ---- the process and its devices ------------------------------------------ */

int mem_swap_configured(void)
{
    return mem_p.cfg.swap;
}

shm_table_t *mem_table(void)
{
    return mem_p.t;
}

int mem_self_slot(void)
{
    return mem_p.slot;
}

int mem_registered(void)
{
    return util_load_acquire(&mem_p.area) != NULL;
}

/* The registered record of table device d, or NULL. */
static mem_local_dev_t *ld_at(int d)
{
    mem_local_dev_t *ld = d >= 0 && d < SHM_MAX_DEVICES ?
                          util_load_acquire(&mem_p.by_index[d]) : NULL;
    return ld && ld->sd ? ld : NULL;
}

int mem_ordinal_at(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    return ld ? (int)(ld - mem_p.dev) : -1;
}

int mem_device_at(int ordinal)
{
    mem_local_dev_t *ld = ordinal >= 0 && ordinal < MEM_MAX_ORDINALS ? &mem_p.dev[ordinal] : NULL;
    return ld && util_load_acquire(&ld->sd) && ld->dev ? ld->d : -1;
}

const char *mem_device_name(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    return ld ? ld->name : "a device";
}

/* ---- the own slot's paging words ------------------------------------------ */

/* Paging says whether it can page this process (a pager): the flags of the
 * slot follow, now and at registration (mem_page_flags_apply). */
void mem_page_set_able(int able)
{
    util_store_release(&mem_p.page_able, able ? 1 : 0);
    mem_page_flags_apply();
}

void mem_page_flags_apply(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (!a)
        return;
    if (mem_p.cfg.swap && util_load_acquire(&mem_p.page_able))
        util_or_release(&a->page_flags, MEM_PAGE_ABLE);
    else
        util_and_release(&a->page_flags, ~MEM_PAGE_ABLE);
    if (mem_p.cfg.swap)
        util_or_release(&a->page_flags, MEM_PAGE_SWAP);
}

uint32_t mem_page_flags(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    return a ? util_load_relaxed(&a->page_flags) : 0;
}

void mem_page_flags_set(uint32_t bits)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        util_or_relaxed(&a->page_flags, bits);
}

void mem_page_flags_clear(uint32_t bits)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        util_and_relaxed(&a->page_flags, ~bits);
}

uint64_t mem_page_request(int *d)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    uint64_t want = a ? util_load_acquire(&a->page_req_bytes) : 0;
    uint32_t dv = want ? util_load_relaxed(&a->page_req_dev) : 0;
    *d = dv >= 1 && dv <= SHM_MAX_DEVICES ? (int)dv - 1 : -1;
    return want;
}

void mem_page_request_served(uint64_t want)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        __atomic_compare_exchange_n(&a->page_req_bytes, &want, 0, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_RELAXED);
}

void mem_page_request_drop(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        util_store_relaxed(&a->page_req_bytes, 0);
}

void mem_page_counted(int in, uint64_t bytes, uint64_t ns)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (!a)
        return;
    util_add_relaxed(in ? &a->swap_ins : &a->swap_outs, 1);
    util_add_relaxed(&a->swap_bytes, bytes);
    util_add_relaxed(&a->swap_ns, ns);
}

void mem_page_resident_until(uint64_t ns)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        util_store_relaxed(&a->page_resident_until, ns);
}

void mem_page_publish(uint64_t out, int has_copied, uint64_t copied)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (!a)
        return;
    if (has_copied)
        util_store_relaxed(&a->swap_copied, copied);
    util_store_relaxed(&a->swapped_out, out);
}

uint64_t mem_page_out_now(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    return a ? util_load_relaxed(&a->swapped_out) : 0;
}

/* ---- staging across the table -----------------------------------------------
 * Pinned host staging is bounded for the table's processes together:
 * each taking its own SALUS_SWAP_LIMIT of the host (half its memory by
 * default) would swap it.  What counts is a reservation, not the bytes
 * staged now: src/vmem reserves all it could be asked to page out before
 * its first page-out and keeps it until it is all back in, so that a peer
 * staging meanwhile can never leave it paged out in part (vmem/swap.c's
 * bounds_allow says why that would hang).  Judged and written under the
 * table lock, so that two page-outs at once cannot both pass; a dead
 * slot's reservation counts no more once it is not alive; each word read
 * is bounded (MEM_MAX_BYTES), so that a stray one cannot wrap the sum. */

static uint64_t others_staging(shm_table_t *t, int self)
{
    uint64_t sum = 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        const mem_slot_t *a = j == self ? NULL : shm_slot_area(t, j, SHM_AREA_MEM);
        if (!a || shm_slot_gen(t, j) == 0 || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC)
            continue;
        uint64_t s = mem_umin((uint64_t)util_load_relaxed(&a->staging_mib) << 20, MEM_MAX_BYTES);
        if (s && shm_slot_alive(t, j))
            sum += s;
    }
    return sum;
}

mem_stage_t mem_stage_reserve(uint64_t bytes, uint64_t limit, uint64_t *others)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (!a || !mem_p.t || mem_lock() != 0)
        return MEM_STAGE_UNCOUNTED;
    uint64_t o = others_staging(mem_p.t, mem_p.slot);
    int fits = o <= limit && bytes <= limit - o;
    if (fits)
        util_store_relaxed(&a->staging_mib, (uint32_t)((mem_umin(bytes, MEM_MAX_BYTES) +
                                                        (1u << 20) - 1) >> 20));
    shm_unlock(mem_p.t);
    *others = o;
    return fits ? MEM_STAGE_TAKEN : MEM_STAGE_FULL;
}

void mem_stage_release(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (a)
        util_store_relaxed(&a->staging_mib, 0);
}

uint64_t mem_stage_others(void)
{
    return mem_p.t && util_load_acquire(&mem_p.area) ? others_staging(mem_p.t, mem_p.slot) : 0;
}

/* ---- peers and devices (under the table lock) ------------------------------ */

int mem_page_peer(shm_table_t *t, int d, int j, mem_page_peer_t *p)
{
    if (!t || d < 0 || d >= SHM_MAX_DEVICES || j < 0 || j >= SHM_MAX_SLOTS)
        return -1;
    const mem_slot_t *a = shm_slot_area(t, j, SHM_AREA_MEM);
    const mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
    if (!a || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC || !shm_slot_alive(t, j))
        return -1;
    if (t == mem_p.t && j == mem_p.slot)
        mem_own_check_locked();       /* its own words, as its waits judge them */
    const mem_sdev_t *sd = &a->dev[d];
    uint64_t used = mem_sdev_used(sd), pin = util_load_relaxed(&a->pinned);
    p->flags = util_load_relaxed(&a->page_flags);
    p->used = used;
    p->pinned = util_load_relaxed(&a->pinned_dev) == (uint32_t)d + 1 ? mem_umin(pin, used) : 0;
    p->resident_until = util_load_relaxed(&a->page_resident_until);
    p->swapped_out = util_load_relaxed(&a->swapped_out);
    p->run_peak = util_load_relaxed(&sd->run_peak);
    p->limit = util_load_relaxed(&sd->limit);
    p->ctx = dev ? mem_ctx_of(dev, j) : 0;
    p->waits_here = util_load_relaxed(&a->wait_dev) == (uint32_t)d + 1;
    p->wait_bytes = util_load_relaxed(&a->wait_bytes);
    return 0;
}

uint64_t mem_page_peer_out(shm_table_t *t, int j)
{
    const mem_slot_t *a = t && j >= 0 && j < SHM_MAX_SLOTS ? shm_slot_area(t, j, SHM_AREA_MEM)
                                                          : NULL;
    return a && util_load_relaxed(&a->magic) == MEM_SLOT_MAGIC
               ? util_load_relaxed(&a->swapped_out) : 0;
}

uint64_t mem_page_ask_slot_locked(shm_table_t *t, int j, int d, uint64_t want, int *raised)
{
    mem_slot_t *a = t ? shm_slot_area(t, j, SHM_AREA_MEM) : NULL;
    *raised = 0;
    if (!a || d < 0 || d >= SHM_MAX_DEVICES)
        return 0;
    uint64_t pending = util_load_relaxed(&a->page_req_dev) == (uint32_t)d + 1 ?
                       util_load_relaxed(&a->page_req_bytes) : 0;
    if (pending >= want)
        return pending;
    util_store_relaxed(&a->page_req_dev, (uint32_t)d + 1);
    util_store_release(&a->page_req_bytes, want);
    *raised = 1;
    return want;
}

int mem_page_dev_locked(shm_table_t *t, int d, int skip, mem_page_dev_t *f)
{
    const mem_dev_t *dev = t && d >= 0 && d < SHM_MAX_DEVICES ?
                           shm_device_area(t, d, SHM_AREA_MEM) : NULL;
    if (!dev)
        return -1;
    mem_sums_t o;
    mem_sums(t, d, skip, &o);
    f->budget = util_load_relaxed(&dev->budget);
    f->foreign = mem_clampb(util_load_relaxed(&dev->foreign));
    f->largest_seen = mem_largest_seen(dev);
    f->effective = mem_effective_budget(dev, &o, mem_ctx_of(dev, skip));
    f->held = o.held;
    return 0;
}

/* ---- the lock, waits and wakes ---------------------------------------------- */

int mem_page_lock(int d)
{
    if (mem_lock() != 0)
        return -1;
    if (d >= 0 && d < SHM_MAX_DEVICES)
        mem_fix_log(mem_p.t, d);
    return 0;
}

void mem_page_unlock(void)
{
    shm_unlock(mem_p.t);
}

uint64_t mem_room_of_locked(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    return ld ? mem_room_locked(ld) : 0;
}

uint32_t mem_wake_seq_of(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    return ld ? util_load_seq(&ld->dev->wake_seq) : 0;
}

void mem_wake_of(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    if (ld)
        mem_wake(ld->dev);
}

int mem_waited_at(int d)
{
    mem_local_dev_t *ld = ld_at(d);
    return ld && util_load_relaxed(&ld->dev->waiters) != 0;
}

void mem_wake_wait(int d, uint32_t seq, uint64_t max_ns)
{
    mem_local_dev_t *ld = ld_at(d);
    if (ld)
        shm_futex_wait(&ld->dev->wake_seq, seq, max_ns);
}

void mem_page_wait_enter_locked(int d, uint64_t bytes)
{
    mem_slot_t *a = mem_p.area;
    if (a && ld_at(d))
        mem_wait_enter(a, d, MEM_WAIT_ALLOC, 0, bytes);
}

void mem_page_wait_bytes(uint64_t bytes)
{
    mem_slot_t *a = mem_p.area;
    if (a)
        util_store_relaxed(&a->wait_bytes, bytes);
}

void mem_page_wait_leave(int d, uint64_t since, int locked)
{
    mem_slot_t *a = mem_p.area;
    if (a && ld_at(d))
        mem_wait_leave(a, d, since, locked);
}

int mem_page_sleep_unlocked(int d, uint32_t seq, uint64_t max_ns)
{
    mem_local_dev_t *ld = ld_at(d);
    if (!ld)
        return -1;
    return mem_sleep_unlocked(ld->dev, &ld->dev->wake_seq, seq, max_ns, d, 0);
}
