/*
 * view.c - what is seen of memory from outside the accounting: each
 * process's own view of its device (cuMemGetInfo_v2, cuDeviceTotalMem_v2),
 * the report's counters, and validated copies of slots and devices for
 * monitors (salus-top), so that no other module reads this module's layout.
 *
 * Divided into: the process's view; the report; monitors.
 *
 * Locking: the view takes the table's lock (and reaps the dead first, so
 * that their memory shows as free); monitors read without it, from a
 * read-only mapping too, and validate what they copy: a slot whose
 * generation changed under the copy is thrown away, every size is clamped
 * to the device.  A device's totals count live processes only (one
 * record-lock test per slot): a monitor is exact the moment a process dies,
 * not when a peer reaps it.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <stdio.h>
#include <string.h>

/* ---- the process's view -------------------------------------------------- */

/* The process's view of ld's device: free = what it could allocate now
 * (its room); total = its limit, or, without one (a limit of the whole
 * budget), what it has allocated there and its room: what it could hold
 * in allocations now, its contexts left out (they are no allocatable
 * memory).  So a framework that takes a fraction of the total (JAX: 75%)
 * takes a fraction of what it could have beside the processes already
 * there, and it fits. */
static void own_view(mem_local_dev_t *ld, uint64_t *free_out, uint64_t *total_out)
{
    uint64_t limit = util_load_relaxed(&ld->sd->limit), room, used;
    if (mem_lock() == 0) {
        shm_reap_dead(mem_p.t, 1);
        mem_fix_log(mem_p.t, ld->d);
        room = mem_room_locked(ld);
        used = mem_sdev_used(ld->sd);
        shm_unlock(mem_p.t);
    } else {
        used = mem_sdev_used(ld->sd);
        room = limit > used ? limit - used : 0;
    }
    *free_out = room;
    *total_out = limit < util_load_relaxed(&ld->dev->budget) ? limit : used + room;
}

void mem_view_info(size_t *free_bytes, size_t *total_bytes)
{
    mem_local_dev_t *ld = mem_local_dev(-1);
    uint64_t room, total;
    if (!ld || !free_bytes || !total_bytes)
        return;
    own_view(ld, &room, &total);
    total = mem_umin(total, *total_bytes);
    *total_bytes = (size_t)total;
    *free_bytes = (size_t)mem_umin(mem_umin(room, *free_bytes), total);
}

void mem_view_total(size_t *bytes, CUdevice device)
{
    mem_local_dev_t *ld = mem_local_dev(device);
    uint64_t room, total;
    if (!ld || !bytes)
        return;
    own_view(ld, &room, &total);
    *bytes = (size_t)mem_umin(*bytes, total);
}

/* The view of the registered device whose table UUID is uuid, for NVML
 * (src/nvml): the same own_view as cuMemGetInfo_v2's, and what the
 * process's contexts take there.  Never registers a device. */
int mem_view_uuid(const uint8_t uuid[16], mem_uuid_view_t *out)
{
    if (!uuid || !out || __atomic_load_n(&mem_p.mode, __ATOMIC_ACQUIRE) != MEM_ON)
        return -1;
    for (int ord = 0; ord < MEM_MAX_ORDINALS; ord++) {
        mem_local_dev_t *ld = &mem_p.dev[ord];
        uint8_t u[16];
        if (!__atomic_load_n(&ld->sd, __ATOMIC_ACQUIRE) ||
            shm_device_uuid(mem_p.t, ld->d, u) != 0 || memcmp(u, uuid, 16) != 0)
            continue;
        mem_uuid_view_t v;
        own_view(ld, &v.free, &v.total);
        v.used = mem_sdev_used(ld->sd);
        v.contexts = mem_ctx_of(ld->dev, mem_p.slot);
        *out = v;
        return 0;
    }
    return -1;
}

/* ---- the report ----------------------------------------------------------- */

int mem_report_fields(char *buf, size_t cap)
{
    mem_slot_t *a = mem_p.area;
    uint64_t used = 0, peak = 0, limit = 0, reserved = 0, ctx = mem_ctx_peak();
    if (!a)
        return 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        if (!util_load_relaxed(&mem_p.by_index[d]))
            continue;
        const mem_sdev_t *sd = &a->dev[d];
        used += mem_sdev_used(sd) + mem_own_ctx(d);   /* what its limit counts */
        peak += util_load_relaxed(&sd->peak);
        limit = util_load_relaxed(&sd->limit) > limit ? util_load_relaxed(&sd->limit) : limit;
        reserved += util_load_relaxed(&sd->reserved);
    }
    /* The key names of salus-top's JSON (mem_used_bytes, ...): one set, and
     * one meaning of used: its allocations and its contexts, as its limit
     * counts them.  The peaks (mem_peak_bytes: allocations; contexts:
     * mem_context_bytes) are the most each reached at once. */
    return snprintf(buf, cap, "\"mem_used_bytes\":%llu,\"mem_peak_bytes\":%llu,"
                    "\"mem_limit_bytes\":%llu,\"mem_reserved_bytes\":%llu,"
                    "\"oom_refusals\":%llu,\"mem_waited_ms\":%llu,"
                    "\"swapped_out_bytes\":%llu,\"swap_outs\":%llu,\"swap_ins\":%llu,"
                    "\"swap_ms\":%llu,\"swap_bytes\":%llu,\"swap_copied_bytes\":%llu,"
                    "\"mem_context_bytes\":%llu",
                    (unsigned long long)used, (unsigned long long)peak,
                    (unsigned long long)limit, (unsigned long long)reserved,
                    (unsigned long long)util_load_relaxed(&a->oom_refusals),
                    (unsigned long long)(util_load_relaxed(&a->waited_ns) / 1000000),
                    (unsigned long long)util_load_relaxed(&a->swapped_out),
                    (unsigned long long)util_load_relaxed(&a->swap_outs),
                    (unsigned long long)util_load_relaxed(&a->swap_ins),
                    (unsigned long long)(util_load_relaxed(&a->swap_ns) / 1000000),
                    (unsigned long long)util_load_relaxed(&a->swap_bytes),
                    (unsigned long long)util_load_relaxed(&a->swap_copied),
                    (unsigned long long)ctx);
}

/* ---- monitors ------------------------------------------------------------ */

int mem_view_slot(shm_table_t *t, int slot, mem_slot_view_t *out)
{
    mem_slot_t *a = shm_slot_area(t, slot, SHM_AREA_MEM);
    uint32_t gen = shm_slot_gen(t, slot);
    if (!a || gen == 0 || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC)
        return -1;
    mem_slot_view_t v;
    memset(&v, 0, sizeof v);
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        const mem_sdev_t *sd = &a->dev[d];
        if (!(util_load_relaxed(&sd->flags) & MEM_SDEV_REGISTERED))
            continue;
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        uint64_t cap = util_load_relaxed(&dev->capacity);
        if (util_load_relaxed(&dev->magic) != MEM_DEV_MAGIC || cap > MEM_MAX_BYTES)
            continue;
        v.devices |= 1u << d;
        uint32_t wd = util_load_relaxed(&a->wait_dev);
        if (util_load_relaxed(&sd->peak) || util_load_relaxed(&sd->granted) ||
            mem_sdev_used(sd) || util_load_relaxed(&sd->reserved) ||
            (util_load_relaxed(&sd->flags) & MEM_SDEV_ADMITTED) || wd == (uint32_t)d + 1)
            v.uses |= 1u << d;
        v.granted += mem_umin(util_load_relaxed(&sd->granted), cap);
        v.used += mem_umin(mem_sdev_used(sd), cap);
        v.ctx += mem_umin(mem_ctx_of(dev, slot), cap);
        v.peak += mem_umin(util_load_relaxed(&sd->peak), cap);
        v.run_peak += mem_umin(util_load_relaxed(&sd->run_peak), cap);
        v.reserved += mem_umin(util_load_relaxed(&sd->reserved), cap);
        uint64_t limit = mem_umin(util_load_relaxed(&sd->limit), cap);
        v.limit = limit > v.limit ? limit : v.limit;
    }
    uint32_t wd = util_load_relaxed(&a->wait_dev);
    v.waiting_device = wd >= 1 && wd <= SHM_MAX_DEVICES ? (int32_t)wd - 1 : -1;
    v.waiting_admission = v.waiting_device >= 0 &&
                          util_load_relaxed(&a->wait_kind) == MEM_WAIT_ADMIT;
    v.oom_refusals = util_load_relaxed(&a->oom_refusals);
    v.waited_ms = util_load_relaxed(&a->waited_ns) / 1000000;
    v.swapped_out = mem_clampb(util_load_relaxed(&a->swapped_out));
    v.swap_outs = util_load_relaxed(&a->swap_outs);
    v.swap_ins = util_load_relaxed(&a->swap_ins);
    v.swap_ms = util_load_relaxed(&a->swap_ns) / 1000000;
    v.pinned = mem_clampb(util_load_relaxed(&a->pinned));
    v.paging = (util_load_relaxed(&a->page_flags) & (MEM_PAGE_OUT_BUSY | MEM_PAGE_IN_BUSY)) != 0;
    util_fence_acquire();
    if (shm_slot_gen(t, slot) != gen)
        return -1;                      /* freed or claimed under us */
    *out = v;
    return 0;
}

int mem_view_device(shm_table_t *t, int device, mem_device_view_t *out)
{
    mem_dev_t *dev = shm_device_area(t, device, SHM_AREA_MEM);
    if (!dev || util_load_relaxed(&dev->magic) != MEM_DEV_MAGIC)
        return -1;
    mem_device_view_t v;
    memset(&v, 0, sizeof v);
    if (shm_device_uuid(t, device, v.uuid) != 0)
        return -1;
    v.capacity = util_load_relaxed(&dev->capacity);
    v.headroom = util_load_relaxed(&dev->headroom);
    v.budget = util_load_relaxed(&dev->budget);
    if (v.capacity == 0 || v.capacity > MEM_MAX_BYTES || v.budget > v.capacity ||
        v.headroom > v.capacity)
        return -1;
    mem_sums_t s;
    mem_sums_live(t, device, &s);
    v.used = mem_umin(s.used, v.capacity);
    v.granted = mem_umin(s.granted, v.capacity);
    v.reserved = mem_umin(s.reserved, v.capacity);
    v.committed = mem_umin(s.committed, v.capacity);
    v.ctx = mem_umin(s.ctx, v.capacity);
    v.foreign = mem_umin(util_load_relaxed(&dev->foreign), v.capacity);
    v.waiters = s.waiters;
    v.queued = s.queued;
    *out = v;
    return 0;
}
