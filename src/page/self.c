/*
 * self.c - paging itself out, under a policy that gates nothing, and the
 * virtualized allocations that may have to.
 *
 * Under pack no job waits at a gate, so none can be asked: jobs that each
 * hold memory and wait for more would wait for each other until
 * SALUS_MEM_WAIT_MS refused one (the training bench lost a job so).  When
 * every peer holding memory on the device waits for memory too, and none
 * of them could take what it waits for now, the job that arrived last
 * among those waiters that can page (registration time, then slot: every
 * waiter evaluates the same order, so exactly one moves) pages itself out:
 * its launches held (page_sched_t's hold), its work waited for and its
 * memory copied to the host, its budget given back; it then waits for room
 * for all of it and its allocation, pages in, and lets its threads go.
 * One job at a time pages, the latest first, as pack admitted them in
 * arrival order; a job that could not fit alone never gets here (its wait
 * ends in a refusal at once).  The wait takes no lock of the pager's under
 * the table lock: what a peer holds and waits for is read from its slot.
 *
 * Divided into: the start and the pager (what memory's waits call, from
 * both files: this one is the module's top); the stuck rule (under the table lock: memory's allocation
 * wait asks it through mem_set_paging, and gives up once it names this
 * process, MEM_CHARGE_BAIL); paging out, waiting and paging in; the
 * allocations, whose tries give up stuck with vmem's lock released, so
 * that this file, above vmem, pages the process out between two tries.
 *
 * Locks: the stuck rule under the table lock; page_self_wait takes the
 * table lock briefly to look for room and sleeps without it, holding no
 * lock of vmem's (the try that gave up released it).
 */
#include "page/page_int.h"
#include "util/util.h"
#include "vmem/vmem.h"

/* ---- the start and the pager ------------------------------------------------- */

static int stuck_locked(int d, uint64_t bytes);

/* What memory's waits ask: the scheduler's queue and order always; with
 * SALUS_SWAP=on whom to ask to page out too, before this process has a
 * pager (an admission before its first context); with one, the stuck rule
 * too. */
#define PAGE_SCHED_ page_wait_mem, page_give_up, page_admit_order, page_enroll
static const mem_paging_t sched_only = { NULL, NULL, NULL, PAGE_SCHED_ };
static const mem_paging_t asking = { page_ask_locked, page_movable_locked, NULL, PAGE_SCHED_ };
static const mem_paging_t paging = { page_ask_locked, page_movable_locked, stuck_locked,
                                     PAGE_SCHED_ };
/* The allocator's primitives: the pager once it has virtualized memory. */
static const page_pager_t vm_pager = { vmem_page_out, vmem_page_in, vmem_paged_out_bytes,
                                       vmem_resident_bytes, vmem_copied_bytes };
static int vm_pager_set;
static int stopped;                  /* page_stop: never paged out again (atomic) */

void page_set_pager(const page_pager_t *p)
{
    int on = p && p->page_out && p->page_in && p->paged_out_bytes &&
             !util_load_acquire(&stopped);
    if (on) {
        page_pager_store(p);
        mem_set_paging(&paging);
    } else {
        mem_set_paging(mem_swap_configured() ? &asking : &sched_only);
        page_pager_store(NULL);
    }
    mem_page_set_able(on);
}

/* Paging out needs the MEM_PAGE_ABLE flag, both when a peer asks and for
 * the stuck rule: cleared for good, nothing pages this process out again.
 * What is out now still comes back before it runs (the pager stays). */
void page_stop(const char *why)
{
    static int said;
    if (util_xchg_acq_rel(&stopped, 1))
        return;
    mem_page_set_able(0);
    if (mem_swap_configured())
        util_log_once(&said, UTIL_LOG_WARN, "paging is off for this process from now on: %s; "
                      "its memory stays on the GPU (SALUS_SWAP=on pages only what libsalus "
                      "sees written and gated; run without it, or tell us which call it was)",
                      why);
}

int page_stopped(void)
{
    return util_load_acquire(&stopped);
}

/* vmem pages this process once it has virtualized memory: its primitives
 * become the pager then (once; before and after each allocation's try,
 * the first one that starts paging included). */
static void pager_check(void)
{
    if (__builtin_expect(util_load_relaxed(&vm_pager_set), 1) || !vmem_pageable())
        return;
    util_store_relaxed(&vm_pager_set, 1);
    page_set_pager(&vm_pager);
}

void page_start(void)
{
    if (!page_pager())
        mem_set_paging(mem_swap_configured() ? &asking : &sched_only);
}

/* ---- the stuck rule ---------------------------------------------------------- */

/* Slot j (ident b) arrived after slot i (ident a). */
static int arrived_after(const shm_ident_t *b, int j, const shm_ident_t *a, int i)
{
    if (b->registered_ns != a->registered_ns)
        return b->registered_ns > a->registered_ns;
    return j > i;
}

static int stuck_locked(int d, uint64_t bytes)
{
    shm_table_t *t = mem_table();
    int self = mem_self_slot();
    shm_ident_t mine, id;
    mem_page_peer_t me, p;
    mem_page_dev_t f;
    if (!page_pager() || !mem_registered() || !page_can_hold() ||
        (mem_page_flags() & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE ||
        shm_slot_ident(t, self, &mine) != 0 || mem_page_peer(t, d, self, &me) != 0 ||
        mem_page_dev_locked(t, d, self, &f) != 0)
        return 0;
    uint64_t used = me.used;
    if (used <= me.pinned)
        return 0;                      /* nothing of it can move */
    uint64_t taken = me.ctx + f.foreign;
    if (used + bytes + taken > f.budget || used + bytes > me.limit)
        return 0;                      /* it cannot fit alone: refused, not paged */
    uint64_t room = f.effective > f.held + used ? f.effective - f.held - used : 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        if (j == self || mem_page_peer(t, d, j, &p) != 0 || shm_slot_ident(t, j, &id) != 0)
            continue;
        if (!p.used)
            continue;                  /* holds nothing here */
        if (id.state != SHM_WAIT_MEM || (p.flags & (MEM_PAGE_OUT_BUSY | MEM_PAGE_IN_BUSY)))
            return 0;                  /* runs, or pages: it gives memory back or ends */
        if (p.waits_here && p.wait_bytes <= room)
            return 0;                  /* it can take what it waits for: it goes on */
        if ((p.flags & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) == MEM_PAGE_ABLE && p.used > p.pinned &&
            !p.swapped_out && arrived_after(&id, j, &mine, self))
            return 0;                  /* a later one pages first */
    }
    return 1;
}

/* ---- paging out, waiting, paging in ------------------------------------------ */

static int self_out(int d, int ord, uint64_t bytes)
{
    const page_pager_t *pg = page_pager();
    if (!pg || !page_can_hold() || !page_hold(ord, 1))
        return 0;
    if (page_unsafe_begin() != 0) {    /* a capture began since the hold looked */
        page_hold(ord, 0);
        return 0;
    }
    uint64_t freed = 0, t0 = util_now_ns();
    mem_page_flags_set(MEM_PAGE_OUT_BUSY);
    CUresult rc = pg->page_out(ord, UINT64_MAX, &freed);
    mem_page_flags_clear(MEM_PAGE_OUT_BUSY);
    page_unsafe_end();
    if (freed)
        mem_page_counted(0, freed, util_now_ns() - t0);
    page_publish(pg);
    mem_wake_of(d);
    if (pg->paged_out_bytes(ord) == 0) {
        page_hold(ord, 0);             /* nothing moved (rc says why): it waits as it was */
        return 0;
    }
    static int said;
    util_log_once(&said, UTIL_LOG_INFO, "memory: %s: every job holding memory here waits "
                  "for more, and the policy runs them all at once (none waits at a gate to "
                  "be paged): this job, the last of them to arrive, paged out %s to the "
                  "host%s and waits for room for it and its %s allocation",
                  mem_device_name(d), util_size(freed).s,
                  rc == CUDA_SUCCESS ? "" : " (not all of it: the host staging bound)",
                  util_size(bytes).s);
    return 1;
}

static int self_in(int ord)
{
    const page_pager_t *pg = page_pager();
    if (!pg)
        return 0;
    mem_page_flags_set(MEM_PAGE_IN_BUSY);
    int rc = pg->paged_out_bytes(ord) ? page_in_once(pg, ord) : 0;
    mem_page_flags_clear(MEM_PAGE_IN_BUSY);
    if (rc == 0)
        mem_page_flags_clear(MEM_PAGE_FULL);
    page_publish(pg);
    return rc;
}

int page_self_wait(int ordinal, uint64_t bytes)
{
    int d = mem_device_at(ordinal);
    if (d < 0 || !mem_registered() || !self_out(d, ordinal, bytes))
        return -1;
    uint64_t start = util_now_ns();
    int in = 0, locked = mem_page_lock(d) == 0, entered = locked;
    if (locked)
        mem_page_wait_enter_locked(d, bytes);
    while (locked && !in) {
        uint32_t seq = mem_wake_seq_of(d);
        uint64_t need = bytes + page_umin(mem_page_out_now(), MEM_MAX_BYTES);
        mem_page_wait_bytes(need);     /* what peers see it wait for (stuck) */
        if (mem_room_of_locked(d) >= need) {
            mem_page_unlock();
            in = self_in(ordinal) == 0;
            locked = mem_page_lock(d) == 0;
            continue;
        }
        locked = mem_page_sleep_unlocked(d, seq, PAGE_SLICE_NS) == 0;
    }
    if (entered)
        mem_page_wait_leave(d, start, locked);
    if (locked)
        mem_page_unlock();
    if (!in && self_in(ordinal) != 0)  /* the lock is out of reach: said */
        util_warn("memory: %s: the table's lock is out of reach while this job is paged "
                  "out; its memory could not all come back in", mem_device_name(d));
    page_hold(ordinal, 0);
    return 0;
}

/* ---- the allocations ------------------------------------------------------------
 * A try gives up stuck only while rounds < PAGE_STUCK_ROUNDS (the bail
 * flag): each round pages the process out and back in; after that many, or
 * once nothing could move, it is tried as any allocation, which waits up
 * to SALUS_MEM_WAIT_MS and is refused then. */

/* Whether to try again after a try that answered rc (st: stuck or not). */
static int again(CUresult rc, const vmem_stuck_t *st, int *rounds)
{
    if (rc == CUDA_SUCCESS || !st->stuck)
        return 0;
    if (page_self_wait(st->ordinal, st->bytes) == 0)
        ++*rounds;
    else
        *rounds = PAGE_STUCK_ROUNDS;   /* nothing moves: once more, as any wait */
    return 1;
}

CUresult page_valloc(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                     size_t height, unsigned elem)
{
    CUresult rc;
    vmem_stuck_t st;
    int rounds = 0;
    do {
        pager_check();
        rc = vmem_alloc_try(kind, out, pitch, width, height, elem, rounds < PAGE_STUCK_ROUNDS,
                            &st);
        pager_check();            /* the first try starts paging on its device */
    } while (again(rc, &st, &rounds));
    return rc;
}

CUresult page_valloc_async(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device)
{
    CUresult rc;
    vmem_stuck_t st;
    int rounds = 0;
    do {
        pager_check();
        rc = vmem_alloc_async_try(out, bytes, pool, device, rounds < PAGE_STUCK_ROUNDS, &st);
        pager_check();
    } while (again(rc, &st, &rounds));
    return rc;
}
