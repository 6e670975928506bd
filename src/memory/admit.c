/*
 * admit.c - admission: a job is let onto a device before it makes its
 * context there, so that a job queued for memory holds none of the device.
 * Two kinds, one queue per device:
 *   - a reservation (SALUS_MEM_RESERVE): waits until the job's reservation
 *     and a context like the last measured fit beside what the others
 *     commit, however long; before the job's first context, and on every
 *     other device at its first allocation there (a context alone claims
 *     no reservation: JAX retains one on every visible GPU);
 *   - with paging on (SALUS_SWAP=on) and no reservation, the first context
 *     the process makes on the device: a context cannot be paged, so it is
 *     made only when the room for one like the last measured is free
 *     (peers the policy runs after it are asked to page out for it), and
 *     when every context there, this one with them, still leaves room for
 *     the largest job on the device to be resident alone (its peak; past
 *     that, contexts of queued jobs would keep the device from the jobs
 *     that hold them), and when no job admitted before it still waits for
 *     the memory of an allocation (a job waiting for memory cannot be paged
 *     out: two newcomers that each hold their first memory and wait for
 *     more would wait for each other).  At the head of the queue the wait lasts
 *     SALUS_MEM_WAIT_MS, longer while peers page out for it or could;
 *     then the driver is called and answers (said once).
 *
 * Divided into: the order of the waiters; what fits; the reservation's
 * wait; the context's wait.
 *
 * Order.  Each request takes a ticket (arrival).  Once paging is possible
 * on the device (a live process registered there may be paged), waiters go
 * in the policy's order (the scheduler's comparison, mem_paging_t's admit_order:
 * srtf shortest declared length first, priority highest first, fair and
 * fifo arrival), ties by ticket; without paging, by ticket alone.  Every
 * waiter evaluates the same order under the table lock, so exactly one of
 * them is at the head at a time.
 *
 * A context admitted is charged to the process at once, as large as the
 * last measured (ld->ctx_precharge), so that the next waiter does not see
 * its room free before the driver has made it; its measure (ctxmem.c)
 * replaces the estimate under the same lock hold.
 *
 * Locking.  Tickets, the slot's wait words, the sums and the precharge under
 * the table's lock; every wait sleeps without it (and never holds the
 * device's serial lock: mem_context_begin takes that after admission).
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <string.h>

/* The scheduler knows this process (its declared length, priority) before
 * it is ordered among the waiters.  Outside the lock. */
static void enroll(mem_local_dev_t *ld)
{
    void (*fn)(int) = util_load_acquire(&mem_p.sched_enroll);
    if (fn)
        fn((int)(ld - mem_p.dev));
}

int mem_admitted_anywhere(void)
{
    for (int o = 0; o < MEM_MAX_ORDINALS; o++)
        if (util_load_acquire(&mem_p.dev[o].admitted) > 0)
            return 1;
    return 0;
}

/* ---- the order of the waiters --------------------------------------------- */

/* A live process registered on d has paging on (it may be paged, or will
 * once it allocates).  Under the lock. */
static int paging_possible_locked(shm_table_t *t, int d)
{
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (shm_slot_gen(t, j) == 0)
            continue;
        mem_slot_t *a = mem_area_of(t, j);
        if (util_load_relaxed(&a->magic) == MEM_SLOT_MAGIC &&
            (util_load_relaxed(&a->page_flags) & (MEM_PAGE_ABLE | MEM_PAGE_SWAP)) &&
            (util_load_relaxed(&a->dev[d].flags) & MEM_SDEV_REGISTERED))
            return 1;
    }
    return 0;
}

/* Slot j, waiting with ticket tj, is admitted before this process (ticket
 * mine). */
static int goes_before(shm_table_t *t, int d, int j, uint32_t tj, uint32_t mine, int ordered)
{
    int (*order)(shm_table_t *, int, int, int) =
        ordered ? util_load_acquire(&mem_p.admit_order) : NULL;
    int c = order ? order(t, d, j, mem_p.slot) : 0;
    if (c != 0)
        return c < 0;
    return (int32_t)(tj - mine) < 0;
}

static int is_head(shm_table_t *t, int d, uint32_t ticket)
{
    int ordered = paging_possible_locked(t, d);
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (j == mem_p.slot || shm_slot_gen(t, j) == 0)
            continue;
        mem_slot_t *a = mem_area_of(t, j);
        if (util_load_relaxed(&a->wait_dev) == (uint32_t)d + 1 &&
            util_load_relaxed(&a->wait_kind) == MEM_WAIT_ADMIT &&
            goes_before(t, d, j, util_load_relaxed(&a->wait_ticket), ticket, ordered))
            return 0;
    }
    return 1;
}

/* The head of the queue waits for memory (wake_seq, bumped by every free);
 * the waiters behind it for the head to leave (admit_seq), so that a free
 * wakes one waiter, not the whole queue.  Both words are read before the
 * look that decides which to sleep on: a change after the look is seen as
 * a word that moved, whichever it is (the table lock orders the look after
 * the reads, and a waker bumps after its change, seq_cst). */
typedef struct wait_word {
    uint32_t wake, admit;
} wait_word_t;

static wait_word_t wait_word(mem_dev_t *dev)
{
    wait_word_t w = { util_load_seq(&dev->wake_seq),
                      util_load_seq(&dev->admit_seq) };
    return w;
}

static int sleep_in_queue(mem_dev_t *dev, const wait_word_t *w, int head, uint64_t max_ns,
                          int d, int queue)
{
    if (head)
        return mem_sleep_unlocked(dev, &dev->wake_seq, w->wake, max_ns, d, queue);
    return mem_sleep_unlocked(dev, &dev->admit_seq, w->admit, mem_umin(max_ns, MEM_ADMIT_SLICE_NS),
                              d, queue);
}

/* ---- what fits -------------------------------------------------------------- */

/* Room for a context like the last measured on ld's device, if this process
 * has none there yet. */
static uint64_t ctx_need(mem_local_dev_t *ld)
{
    return mem_own_ctx(ld->d) ? 0 : mem_clampb(util_load_relaxed(&ld->dev->ctx_last));
}

/* `reserve` and a context fit beside what the others commit (their spare
 * reclaimed if that makes the difference). */
static int fits_locked(mem_local_dev_t *ld, uint64_t reserve, uint64_t ctx)
{
    uint64_t mine = mem_umax(util_load_relaxed(&ld->sd->granted), reserve) + ctx;
    mem_sums_t o;
    mem_sums(mem_p.t, ld->d, mem_p.slot, &o);
    uint64_t budget = mem_effective_budget(ld->dev, &o, mem_own_ctx(ld->d));
    if (o.committed_run + mine <= budget)
        return 1;
    if (o.held_run + mine > budget)
        return 0;
    mem_reclaim_all_locked(mem_p.t, ld->dev, ld->d, mem_p.slot);
    mem_sums(mem_p.t, ld->d, mem_p.slot, &o);
    return o.committed_run + mine <= budget;
}

/* Every context on ld's device, with one more of `ctx`, leaves room for the
 * largest live job there (its peak or reservation) to be resident alone;
 * with paging on, for a job as large as the largest seen there too: this
 * job's own peak is not known yet, paging cannot move contexts, and each
 * context admitted beside jobs that are small so far would otherwise take
 * room that one of them, growing, needs to run at all (the device then
 * fills with contexts of jobs that can never all run). */
static int leaves_room_locked(mem_local_dev_t *ld, uint64_t ctx)
{
    shm_table_t *t = mem_p.t;
    mem_sums_t o;
    uint64_t largest = 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (j == mem_p.slot || shm_slot_gen(t, j) == 0)
            continue;
        const mem_sdev_t *sd = &mem_area_of(t, j)->dev[ld->d];
        if (util_load_relaxed(&sd->flags) & MEM_SDEV_REGISTERED)
            largest = mem_umax(largest, mem_umax(mem_clampb(util_load_relaxed(&sd->peak)),
                                                 mem_clampb(util_load_relaxed(&sd->reserved))));
    }
    if (mem_p.cfg.swap)
        largest = mem_umax(largest, mem_largest_seen(ld->dev));
    mem_sums(t, ld->d, mem_p.slot, &o);
    return ctx + largest <= mem_effective_budget(ld->dev, &o, mem_own_ctx(ld->d));
}

/* A peer waits for memory for an allocation on d: a job admitted before
 * this one that has not got its memory yet.  Under the lock. */
static int alloc_waiter_locked(int d)
{
    shm_table_t *t = mem_p.t;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (j == mem_p.slot || shm_slot_gen(t, j) == 0)
            continue;
        const mem_slot_t *a = mem_area_of(t, j);
        if (util_load_relaxed(&a->wait_dev) == (uint32_t)d + 1 &&
            util_load_relaxed(&a->wait_kind) == MEM_WAIT_ALLOC)
            return 1;
    }
    return 0;
}

/* ---- the reservation's wait ------------------------------------------------ */

CUresult mem_admit_wait(mem_local_dev_t *ld, uint64_t reserve)
{
    shm_table_t *t = mem_p.t;
    mem_slot_t *a = mem_p.area;
    int d = ld->d, waited = 0, lost = 0;
    enroll(ld);
    if (mem_lock() != 0)
        return CUDA_SUCCESS;          /* said: runs without its reservation */
    mem_fix_log(t, d);
    uint32_t ticket = ld->dev->next_ticket++;
    uint64_t start = util_now_ns();
    mem_wait_enter(a, d, MEM_WAIT_ADMIT, ticket, reserve);
    for (;;) {
        wait_word_t w = wait_word(ld->dev);
        int head = is_head(t, d, ticket);
        if (head && fits_locked(ld, reserve, ctx_need(ld)))
            break;
        int asked = head && mem_ask_pages_locked(ld, reserve + ctx_need(ld)) != 0;
        if (!waited++)
            util_warn("memory: waiting for admission on %s: %s reserved "
                      "(SALUS_MEM_RESERVE) does not fit yet beside the jobs running "
                      "('salus status' shows who holds the memory)",
                      ld->name, util_size(reserve).s);
        if (sleep_in_queue(ld->dev, &w, head, MEM_ADMIT_SLICE_NS, d, asked) != 0) {
            lost = 1;
            break;
        }
        shm_reap_dead(t, 1);
    }
    if (!lost) {
        util_store_relaxed(&ld->sd->reserved, reserve);
        util_or_relaxed(&ld->sd->flags, MEM_SDEV_ADMITTED);
    }
    mem_wait_leave(a, d, start, !lost);
    if (!lost)
        shm_unlock(t);
    mem_wake_admit(ld->dev);          /* the next in line looks again */
    if (waited)
        util_warn("memory: admitted on %s after %llu ms", ld->name,
                  (unsigned long long)((util_now_ns() - start) / 1000000));
    return CUDA_SUCCESS;
}

/* ---- the context's wait ------------------------------------------------------ */

static void say_passed(mem_local_dev_t *ld, uint64_t ctx, uint64_t waited_ns)
{
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: %s: room for this job's context (%s, as "
                  "the last one measured there) was not free after %llu ms "
                  "(SALUS_MEM_WAIT_MS), and paging cannot make it: the context is made "
                  "now, and the driver answers whether it fits; a larger "
                  "SALUS_MEM_WAIT_MS waits longer for the jobs on the device to end",
                  ld->name, util_size(ctx).s, (unsigned long long)(waited_ns / 1000000));
}

/* Charge the context about to be made, as large as `ctx`, until it is
 * measured.  Under the lock. */
static void precharge_locked(mem_local_dev_t *ld, uint64_t ctx)
{
    mem_dev_t *dev = ld->dev;
    uint64_t kib = (mem_ctx_of(dev, mem_p.slot) >> 10) + (ctx + 1023) / 1024;
    util_store_relaxed(&dev->ctx_kib[mem_p.slot], (uint32_t)(kib > UINT32_MAX ? UINT32_MAX : kib));
    ld->ctx_precharge = ctx;
    mem_publish_locked(mem_p.t, ld->d);
}

void mem_ctx_admit(mem_local_dev_t *ld)
{
    shm_table_t *t = mem_p.t;
    mem_slot_t *a = mem_p.area;
    int d = ld->d, entered = 0, lost = 0, passed = 0, gave_up = 0;
    if (!a || !ctx_need(ld))
        return;                       /* none measured yet: the first is measured */
    enroll(ld);
    if (mem_lock() != 0)
        return;                       /* said: the driver answers */
    mem_fix_log(t, d);
    uint64_t ctx = ctx_need(ld), start = util_now_ns(), deadline = start + mem_p.cfg.wait_ns;
    uint32_t ticket = ld->dev->next_ticket++;
    for (;;) {
        wait_word_t w = wait_word(ld->dev);
        int head = is_head(t, d, ticket);
        if (head && !alloc_waiter_locked(d) && fits_locked(ld, 0, ctx) &&
            leaves_room_locked(ld, ctx))
            break;
        if (!entered++) {
            mem_wait_enter(a, d, MEM_WAIT_ADMIT, ticket, ctx);
            util_warn("memory: %s: this job's context waits for room on the device "
                      "(paging on: contexts cannot be paged; 'salus status' shows who "
                      "holds the memory)", ld->name);
        }
        uint64_t now = util_now_ns();
        /* Paging frees memory, not contexts: when the contexts would leave
         * the largest job no room, only jobs that end can admit this one. */
        int can_page = head && leaves_room_locked(ld, ctx);
        int asked = can_page && mem_ask_pages_locked(ld, ctx);
        int page_now = 0;
        int pageable = can_page && mem_pageable_locked(ld, ctx, &page_now);
        if (!head)                    /* its time counts from the head of the queue */
            deadline = now + mem_p.cfg.wait_ns;
        else if (asked && deadline < now + MEM_PAGE_WAIT_NS)
            deadline = now + MEM_PAGE_WAIT_NS;           /* peers page out: wait for them */
        if (pageable && deadline < now + 2 * MEM_WAIT_SLICE_NS)
            deadline = now + 2 * MEM_WAIT_SLICE_NS;      /* they will, once they wait */
        if (head && now >= deadline) {
            passed = 1;
            break;
        }
        /* Queued for the GPU only while paging can make its room, so that
         * the holder yields and is paged too if need be; otherwise it
         * leaves the GPU (once) if it was granted it while queued: held,
         * the GPU would stall the jobs it waits for. */
        if (sleep_in_queue(ld->dev, &w, head, head ? deadline - now : MEM_ADMIT_SLICE_NS, d,
                           mem_gpu_choice(asked || page_now, &gave_up)) != 0) {
            lost = 1;
            break;
        }
        shm_reap_dead(t, 1);
    }
    if (!lost)
        precharge_locked(ld, ctx);    /* passed too: the driver is about to make it */
    if (entered)
        mem_wait_leave(a, d, start, !lost);
    if (!lost)
        shm_unlock(t);
    mem_wake_admit(ld->dev);          /* the next in line looks again */
    if (passed)
        say_passed(ld, ctx, util_now_ns() - start);
    else if (entered && !lost)
        util_warn("memory: %s: this job's context admitted after %llu ms", ld->name,
                  (unsigned long long)((util_now_ns() - start) / 1000000));
}
