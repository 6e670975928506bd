/*
 * swap.c - paging a process's virtualized memory (vmem_int.h) out to
 * pinned host memory and back in at the same device addresses: the
 * primitives the scheduler calls in the process that owns the memory, while
 * its program is stopped at the gate or at rest with its work drained.
 *
 * Divided into: big allocations; small regions; the bounds' all-or-nothing;
 * the primitives.  The staging, its bounds and its pool: stage.c.
 *
 * Out: the program's work is waited for (a context synchronize on a thread
 * of its own, bounded: quiesce.c), the live
 * bytes are copied to pinned staging in large transfers on libsalus's own
 * stream (one per big allocation; a small region's live allocations
 * coalesced), then the physical chunks are unmapped and released and their
 * budget given back.  Free space in chunks is not copied, nor is a big
 * allocation no work has reached since it was made (vmem_set_work_count).  In:
 * the budget is taken back first (refused at once, never waited for, when
 * the device has no room for it now: the caller waits and asks again,
 * holding none of it: the big allocations come back all or none),
 * physical memory is created and mapped at the same addresses, access set,
 * the staged bytes copied back and the staging given back (to stage.c's
 * pool, for the next page-out).  Memory that has no
 * live allocation any more (freed while out) is neither backed nor copied.
 *
 * A test seam (vmem_phase_hook) parks the process half-way through each
 * direction, where tests SIGKILL it.
 *
 * Lock: vmem_p.lock, held throughout but for the page-out's wait for the
 * program's work (vmem_int.h).
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COALESCE_GAP (64u << 10)     /* live ranges this close are copied as one */

void (*vmem_phase_hook)(vmem_phase_t phase);

static void phase(vmem_phase_t at)
{
    void (*fn)(vmem_phase_t) = vmem_phase_hook;
    if (fn)
        fn(at);
}

static void copied(uint64_t bytes)
{
    util_add_relaxed(&vmem_p.copied, bytes);
}

uint64_t vmem_copied_bytes(void)
{
    return util_load_relaxed(&vmem_p.copied);
}

/* ---- big allocations -------------------------------------------------------------- */

static int by_bytes_desc(const void *x, const void *y)
{
    const vmem_buf_t *a = *(vmem_buf_t *const *)x, *b = *(vmem_buf_t *const *)y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

/* The big allocations of ordinal that are out (out = 1) or in (out = 0),
 * largest first; the count, or -1. */
static long bigs(int ordinal, int out, vmem_buf_t ***list)
{
    const vmem_map_t *m = &vmem_p.allocs;
    vmem_buf_t **v = malloc((m->count + 1) * sizeof *v);
    long n = 0;
    if (!v)
        return -1;
    for (size_t i = 0; m->key && i <= m->mask; i++) {
        vmem_buf_t *a = m->val[i];
        if (a && a->big && a->ordinal == ordinal && a->out == out && !a->exported)
            v[n++] = a;               /* an exported one is pinned (never out) */
    }
    qsort(v, (size_t)n, sizeof *v, by_bytes_desc);
    *list = v;
    return n;
}

/* a was never written: no work reached the driver since it was made
 * (vmem_set_work_count; `work` its value now, UINT64_MAX unknown). */
static int never_written(const vmem_buf_t *a, uint64_t work)
{
    return work != UINT64_MAX && a->work_at == work;
}

/* Copy out the chosen big allocations (want bytes of chunks, 0: all), then
 * release their chunks; one never written is released without a copy.
 * The bytes freed. */
static CUresult bigs_out(vmem_dev_t *v, uint64_t want, uint64_t *freed)
{
    vmem_buf_t **list;
    long n = bigs(v->ordinal, 0, &list), k = 0;
    uint64_t got = 0;
    uint64_t work = vmem_work_now();
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (; k < n && (want == 0 || got < want); k++) {
        vmem_buf_t *a = list[k];
        a->clean = (uint8_t)never_written(a, work);
        if (a->clean) {
            got += a->bytes;
            continue;
        }
        if (!(a->stage = vmem_stage_take(a->size)))
            continue;                 /* past the staging bound: a smaller one may fit */
        rc = vmem_drv()->memcpy_dtoh_async(a->stage, a->base, a->size, v->stream);
        copied(a->size);
        if (rc != CUDA_SUCCESS) {
            vmem_stage_give(a->stage, a->size);
            a->stage = NULL;
            break;
        }
        got += a->bytes;
    }
    if (k && (rc = vmem_drv()->stream_synchronize(v->stream)) != CUDA_SUCCESS)
        got = 0;
    for (long i = 0; i < k; i++) {
        vmem_buf_t *a = list[i];
        if (!a->stage && !a->clean)
            continue;
        if (rc != CUDA_SUCCESS) {     /* the copies failed: it stays in */
            if (a->stage)
                vmem_stage_give(a->stage, a->size);
            a->stage = NULL;
            a->clean = 0;
            continue;
        }
        vmem_unback(a->base, a->bytes, a->h);
        a->h = 0;
        a->out = 1;
        if (a->charged)
            vmem_uncharge(a->ordinal, a->bytes);
        a->charged = 0;
        v->resident -= a->bytes;
        v->paged_out += a->size;
        if (i == 0)
            phase(VMEM_HALF_OUT);
    }
    free(list);
    *freed += got;
    return rc;
}

static CUresult bigs_in(vmem_dev_t *v, uint64_t *restored)
{
    vmem_buf_t **list;
    long n = bigs(v->ordinal, 1, &list), k = 0;
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (; k < n; k++) {
        vmem_buf_t *a = list[k];
        int charged;
        if ((rc = vmem_charge(a->ordinal, a->bytes, &charged)) != CUDA_SUCCESS)
            break;
        if ((rc = vmem_back(v, a->base, a->bytes, &a->h)) != CUDA_SUCCESS) {
            if (charged)
                vmem_uncharge(a->ordinal, a->bytes);
            break;
        }
        a->charged = (uint8_t)charged;
        v->resident += a->bytes;
        if (a->stage && (rc = vmem_drv()->memcpy_htod_async(a->base, a->stage, a->size,
                                                          v->stream)) != CUDA_SUCCESS)
            break;
        copied(a->stage ? a->size : 0);
        if (k == 0)
            phase(VMEM_HALF_IN);
    }
    CUresult sync = k ? vmem_drv()->stream_synchronize(v->stream) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS || sync != CUDA_SUCCESS) {
        /* All or nothing: what came back in this call goes out again (its
         * staging kept), so that a page-in refused half-way holds no
         * memory while it waits for the rest: held, it was memory the
         * jobs it waits for needed (two such waits waited for each other). */
        for (long i = 0; i < k; i++) {
            vmem_buf_t *a = list[i];
            if (!a->h)
                continue;
            vmem_unback(a->base, a->bytes, a->h);
            a->h = 0;
            if (a->charged)
                vmem_uncharge(a->ordinal, a->bytes);
            a->charged = 0;
            v->resident -= a->bytes;
        }
        free(list);
        return rc != CUDA_SUCCESS ? rc : sync;
    }
    for (long i = 0; i < k; i++) {
        vmem_buf_t *a = list[i];
        if (!a->h)
            continue;
        if (a->stage)
            vmem_stage_give(a->stage, a->size);
        a->stage = NULL;
        a->clean = 0;
        a->out = 0;
        v->paged_out -= a->size;
        *restored += a->bytes;
    }
    free(list);
    return rc != CUDA_SUCCESS ? rc : sync;
}

void vmem_drop_stage(vmem_buf_t *a)
{
    vmem_dev_t *v = &vmem_p.dev[a->ordinal];
    if (a->stage)
        vmem_stage_give(a->stage, a->size);
    a->stage = NULL;
    v->paged_out -= a->size;
}

/* ---- small regions ----------------------------------------------------------------- */

static int by_base(const void *x, const void *y)
{
    const vmem_staged_t *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

/* The live small allocations of v, sorted and coalesced; the count, or -1. */
static long live_ranges(vmem_dev_t *v, vmem_staged_t **out)
{
    const vmem_map_t *m = &vmem_p.allocs;
    vmem_staged_t *r = malloc((m->count + 1) * sizeof *r);
    size_t n = 0, k = 0;
    if (!r)
        return -1;
    for (size_t i = 0; m->key && i <= m->mask; i++) {
        vmem_buf_t *a = m->val[i];
        if (a && !a->big && a->ordinal == v->ordinal)
            r[n++] = (vmem_staged_t){ a->base, a->size, 0 };
    }
    qsort(r, n, sizeof *r, by_base);
    for (size_t i = 0; i < n; i++) {
        if (k && r[i].base <= r[k - 1].base + r[k - 1].len + COALESCE_GAP) {
            uint64_t end = r[i].base + r[i].len;
            if (end > r[k - 1].base + r[k - 1].len)
                r[k - 1].len = end - r[k - 1].base;
            continue;
        }
        r[k++] = r[i];
    }
    uint64_t off = 0;
    for (size_t i = 0; i < k; i++) {
        r[i].off = off;
        off += r[i].len;
    }
    *out = r;
    return (long)k;
}

/* Granule i of the small allocations' range unmapped, its handle released
 * and its charge given back; 0 when it had no backing. */
static int gran_drop(vmem_dev_t *v, size_t i)
{
    vmem_gran_t *g = &v->g[i];
    if (!g->h)
        return 0;
    vmem_unback(v->base + i * v->gran, v->gran, g->h);
    g->h = 0;
    if (g->charged)
        vmem_uncharge(v->ordinal, v->gran);
    g->charged = 0;
    return 1;
}

static CUresult small_out(vmem_dev_t *v, uint64_t *freed)
{
    vmem_staged_t *r;
    long n = live_ranges(v, &r);
    uint64_t total = 0;
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (long i = 0; i < n; i++)
        total += r[i].len;
    void *stage = total ? vmem_stage_take(total) : NULL;
    if (total && !stage) {
        free(r);
        return CUDA_SUCCESS;          /* the staging bound: it stays in */
    }
    for (long i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        rc = vmem_drv()->memcpy_dtoh_async((char *)stage + r[i].off, r[i].base, r[i].len,
                                         v->stream);
        copied(r[i].len);
    }
    if (rc == CUDA_SUCCESS && n)
        rc = vmem_drv()->stream_synchronize(v->stream);
    if (rc != CUDA_SUCCESS) {
        if (stage)
            vmem_stage_give(stage, total);
        free(r);
        return rc;
    }
    for (size_t i = 0; i < v->size / v->gran; i++)
        if (gran_drop(v, i)) {
            v->resident -= v->gran;
            *freed += v->gran;
        }
    v->small_out = 1;
    v->stage = stage;
    v->stage_bytes = total;
    v->ranges = r;
    v->nranges = (size_t)n;
    v->paged_out += total;
    return CUDA_SUCCESS;
}

/* Copy back the part of staged range r that lies in backed granules (an
 * allocation freed while out may have left a granule unbacked). */
static CUresult copy_back(vmem_dev_t *v, const vmem_staged_t *r)
{
    uint64_t p = r->base, end = r->base + r->len;
    while (p < end) {
        size_t gi = (p - v->base) / v->gran;
        uint64_t gend = v->base + (gi + 1) * v->gran, stop = gend < end ? gend : end;
        if (v->g[gi].h) {
            CUresult rc = vmem_drv()->memcpy_htod_async(p, (char *)v->stage + r->off +
                                                      (p - r->base), stop - p, v->stream);
            if (rc != CUDA_SUCCESS)
                return rc;
            copied(stop - p);
        }
        p = stop;
    }
    return CUDA_SUCCESS;
}

CUresult vmem_small_in(vmem_dev_t *v, uint64_t *restored)
{
    size_t ng = v->size / v->gran, i;
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    for (i = 0; i < ng; i++) {
        vmem_gran_t *g = &v->g[i];
        int charged;
        if (!g->live)
            continue;
        if ((rc = vmem_charge(v->ordinal, v->gran, &charged)) != CUDA_SUCCESS)
            goto out_unback;
        if ((rc = vmem_back(v, v->base + i * v->gran, v->gran, &g->h)) != CUDA_SUCCESS) {
            if (charged)
                vmem_uncharge(v->ordinal, v->gran);
            goto out_unback;
        }
        g->charged = (uint32_t)charged;
        got += v->gran;
    }
    for (size_t k = 0; k < v->nranges; k++)
        if ((rc = copy_back(v, &v->ranges[k])) != CUDA_SUCCESS)
            goto out_unback;
    if (v->nranges && (rc = vmem_drv()->stream_synchronize(v->stream)) != CUDA_SUCCESS)
        goto out_unback;
    if (v->stage)
        vmem_stage_give(v->stage, v->stage_bytes);
    free(v->ranges);
    v->paged_out -= v->stage_bytes;
    v->resident += got;
    v->stage = NULL;
    v->ranges = NULL;
    v->nranges = 0;
    v->stage_bytes = 0;
    v->small_out = 0;
    if (restored)
        *restored += got;
    return CUDA_SUCCESS;
out_unback:                           /* all or nothing: it stays out */
    while (i-- > 0)
        gran_drop(v, i);
    return rc;
}

/* ---- the bounds' all-or-nothing ----------------------------------------------------- */

/* Whether v's small region would be paged out (an exported small
 * allocation pins it). */
static int small_goes(const vmem_dev_t *v)
{
    return v->size && !v->small_out && !v->small_pins;
}

/* The staging a page-out of `want` device bytes (0: all) takes, as
 * bigs_out and small_out choose (largest first; one never written takes
 * none); UINT64_MAX when it cannot be told. */
static uint64_t stage_need(vmem_dev_t *v, uint64_t want)
{
    vmem_buf_t **list;
    vmem_staged_t *r;
    long n = bigs(v->ordinal, 0, &list), k;
    uint64_t got = 0, need = 0, work = vmem_work_now();
    if (n < 0)
        return UINT64_MAX;
    for (k = 0; k < n && (want == 0 || got < want); k++) {
        need += never_written(list[k], work) ? 0 : vmem_stage_size(list[k]->size);
        got += list[k]->bytes;
    }
    free(list);
    if ((want == 0 || got < want) && small_goes(v)) {
        if ((n = live_ranges(v, &r)) < 0)
            return UINT64_MAX;
        uint64_t total = 0;
        for (k = 0; k < n; k++)
            total += r[k].len;
        need += total ? vmem_stage_size(total) : 0;
        free(r);
    }
    return need;
}

/* The staging that paging out everything still resident takes, over every
 * device this process pages (stage_need's rules); UINT64_MAX when it cannot
 * be told. */
static uint64_t stage_all(void)
{
    uint64_t all = 0;
    for (int i = 0; i < VMEM_MAX_DEVICES; i++) {
        vmem_dev_t *v = &vmem_p.dev[i];
        uint64_t need = v->ready ? stage_need(v, 0) : 0;
        if (need == UINT64_MAX || need > UINT64_MAX - all)
            return UINT64_MAX;
        all += need;
    }
    return all;
}

static int bound_said;

/* Say once that SALUS_SWAP_LIMIT refused a page-out: it cannot hold `all`
 * more bytes of staging beside what is staged now. */
static void bound_refused(uint64_t all)
{
    util_log_once(&bound_said, UTIL_LOG_WARN, "memory: a page-out to the host was refused "
                  "whole: the host staging bound (SALUS_SWAP_LIMIT, now %s, %s of it in use) "
                  "cannot hold all of this job's memory (%s to stage), and a job paged out "
                  "only in part needs room to come back that the job which took it, waiting "
                  "for more, would never give (both would hang).  Its memory stays on the GPU "
                  "and is not paged; the job that asked for it waits for it to end; raise "
                  "SALUS_SWAP_LIMIT to at least %s for it to page",
                  util_size(vmem_swap_limit()).s, util_size(vmem_p.staged).s,
                  all == UINT64_MAX ? "unknown" : util_size(all).s,
                  all == UINT64_MAX ? "its memory" : util_size(vmem_p.staged + all).s);
}

static void table_refused(uint64_t all, uint64_t others)
{
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: a page-out to the host was refused whole: "
                  "the other processes of this table have reserved %s of host staging, and "
                  "this job's %s beside them would pass SALUS_SWAP_LIMIT (%s), which bounds "
                  "them all together.  Its memory stays on the GPU; the job that asked for it "
                  "waits for it to end, or for a peer to page back in; raise SALUS_SWAP_LIMIT "
                  "(the same in every job) for more jobs to page at once",
                  util_size(others).s, util_size(vmem_p.staged + all).s,
                  util_size(vmem_swap_limit()).s);
}

/* Whether a page-out may start: the staging bounds (SALUS_SWAP_LIMIT, for
 * this process and for the table's processes together, and the cgroup's
 * room, vmem_p.cg_cap) must hold everything this process could still be
 * asked to page out, not only what this request takes; refused whole, said
 * once, when they do not.
 *
 * Why everything, not the request: a page-out served in part, or a request
 * served whole whose successor the bound then refuses, leaves the job
 * partly out.  The peer that asked has taken the room and, allocating in
 * pieces, waits for more: the job, full, can serve no more, and the peer,
 * waiting for memory, is no one's victim; the job needs that room to page
 * back in, and the peer waits for the job to end (memory's outwaits rule),
 * which it cannot without paging in: both hang (issue 32).  With this rule
 * a job is in one of two states only, each hang-free as the design is
 * without a bound: (a) the bounds hold all it has, so every request it is
 * asked is served in full, up to all of it (an asker that fits alone gets
 * its room once every pageable peer is out, as with no bound); (b) they do
 * not, and it pages nothing: it holds all its memory resident, never waits
 * to page in, and the asker waits for it to end as with paging off (the
 * job runs: the waiting peer leaves it the GPU).  While a job is partly
 * out it does not run, so what it has resident does not grow, nor is
 * more of it written: (a) stays true between its page-outs.  Not covered:
 * a host that fails a pinned allocation the bound allowed, or a cgroup
 * whose room shrinks between two page-outs (the program's own memory): the
 * job may then still be left partly out (page.c says so once). */
static int bounds_allow(void)
{
    uint64_t all = stage_all(), others = 0;
    if (all != UINT64_MAX && vmem_p.staged + all <= vmem_swap_limit() &&
        vmem_p.staged + all <= vmem_p.cg_cap) {
        /* The table's processes together (memory.h): reserved until all of
         * it is back in (reservation_settle_locked), so that what holds now
         * holds at every page-out until then, whatever the peers stage. */
        if (mem_stage_reserve(vmem_p.staged + all, vmem_swap_limit(), &others) != MEM_STAGE_FULL)
            return 1;
        table_refused(all, others);
        return 0;
    }
    if (all != UINT64_MAX && vmem_p.staged + all <= vmem_swap_limit())
        vmem_cg_refused(all);         /* the cgroup's room, not the host's */
    else
        bound_refused(all);
    return 0;
}

/* The table's staging reservation (bounds_allow) lasts while anything of
 * this process is out, staged or not (memory never written moves without
 * a copy, yet a job partly out is the state the reservation guards): let
 * go once all of it is back in.  Under vmem_p.lock. */
static void reservation_settle_locked(void)
{
    for (int o = 0; o < VMEM_MAX_DEVICES; o++)
        if (vmem_p.dev[o].paged_out || vmem_p.dev[o].small_out)
            return;                   /* paged_out counts clean allocations too */
    mem_stage_release();
}

/* ---- the primitives --------------------------------------------------------------- */

static vmem_dev_t *ready_dev(int ordinal)
{
    if (!vmem_on() || ordinal < 0 || ordinal >= VMEM_MAX_DEVICES)
        return NULL;
    vmem_dev_t *v = &vmem_p.dev[ordinal];
    return v->ready ? v : NULL;
}

/* The context of ordinal's virtualized memory, NULL when there is none. */
static CUcontext ctx_of(int ordinal)
{
    pthread_mutex_lock(&vmem_p.lock);
    vmem_dev_t *v = ready_dev(ordinal);
    CUcontext ctx = v ? v->ctx : NULL;
    pthread_mutex_unlock(&vmem_p.lock);
    return ctx;
}

CUresult vmem_page_out(int ordinal, uint64_t want, uint64_t *freed)
{
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    /* The program's work on its memory ends before the copies start: waited
     * for without the lock, and only so long (quiesce.c). */
    CUcontext ctx = ctx_of(ordinal);
    if (ctx && (rc = vmem_quiesce(ctx)) != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_dev_t *v = ready_dev(ordinal);
    if (!v)
        goto out_unlock;              /* nothing virtualized there */
    if (vmem_enter(v) != 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out_unlock;
    }
    vmem_async_settle_locked();       /* stream-ordered frees: done now, not copied */
    got = vmem_cache_drop_locked(v);  /* kept chunks: freed, nothing to copy */
    vmem_cg_read();
    if ((want == 0 || got < want) && !bounds_allow())
        goto out_leave;               /* refused whole: said */
    if (want == 0 || got < want)
        rc = bigs_out(v, want ? want - got : 0, &got);
    if (rc == CUDA_SUCCESS && (want == 0 || got < want) && small_goes(v))
        rc = small_out(v, &got);
out_leave:
    vmem_p.cg_cap = UINT64_MAX;
    vmem_leave();
    reservation_settle_locked();      /* a page-out that left nothing out */
out_unlock:
    pthread_mutex_unlock(&vmem_p.lock);
    if (rc == CUDA_SUCCESS && freed)
        *freed = got;
    return rc;
}

/* What bringing v back in takes on the device: the chunks of what is out
 * (granules left with no live allocation are not backed again). */
uint64_t vmem_need_in(const vmem_dev_t *v)
{
    uint64_t need = 0;
    for (size_t i = 0; v->small_out && i < v->size / v->gran; i++)
        need += v->g[i].live ? v->gran : 0;
    for (size_t i = 0; vmem_p.allocs.key && i <= vmem_p.allocs.mask; i++) {
        const vmem_buf_t *a = vmem_p.allocs.val[i];
        if (a && a->big && a->out && a->ordinal == v->ordinal)
            need += a->bytes;
    }
    return need;
}

/* Whether `need` bytes can be had on ordinal's device now: a page-in that
 * cannot answers at once (its caller waits and asks again), where an
 * allocation would wait SALUS_MEM_WAIT_MS.  A peer may take the room
 * between this look and the charge: then the charge waits as usual. */
static int room_for(int ordinal, uint64_t need)
{
    uint64_t room;
    if (need == 0 || mem_room_at(ordinal, &room) != 0)
        return 1;                     /* uncounted, or the charge says */
    return room >= need;
}

CUresult vmem_page_in(int ordinal, uint64_t *restored)
{
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_dev_t *v = ready_dev(ordinal);
    if (!v)
        goto out_unlock;
    if (!room_for(ordinal, vmem_need_in(v))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    if (vmem_enter(v) != 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out_unlock;
    }
    vmem_p.charge_flags = MEM_CHARGE_NOWAIT;   /* refused at once: the caller waits,
                                                  holding nothing */
    if (v->small_out)
        rc = vmem_small_in(v, &got);
    if (rc == CUDA_SUCCESS)
        rc = bigs_in(v, &got);
    vmem_p.charge_flags = 0;
    vmem_leave();
    reservation_settle_locked();
out_unlock:
    pthread_mutex_unlock(&vmem_p.lock);
    if (rc == CUDA_SUCCESS && restored)
        *restored = got;
    return rc;
}
