/*
 * stage.c - the pinned host staging that page-outs copy to (swap.c): its
 * bounds and a pool that keeps it from one page-out to the next.
 *
 * Divided into: the host bound; the cgroup bound; the pool; taking and
 * giving back; the pool's trim.
 *
 * Why a pool: pinning is slow where it is done (a real driver pins at a
 * few GB/s and cuMemFreeHost synchronizes; over simgpu a fresh buffer
 * costs a page fault per 4 KiB at the first copy, half of a page-out's
 * time), and a job that is paged out once is paged again: the policy that
 * chose it chooses it again.  So a page-in gives its staging back to the
 * pool, not to the driver, and the next page-out takes it again, of the
 * same size (sizes rounded to VMEM_STAGE_ROUND: the same allocations
 * take the same buffers).  Kept staging is pinned memory the process
 * holds while it runs, so it is bounded three ways: by the bounds that
 * hold staging itself (SALUS_SWAP_LIMIT and the cgroup's room, counted
 * over staging in use plus kept), by the cgroup's room when it is given
 * back (kept only while as much is left beside it), and by time (let go
 * vmem_stage_keep_ns after the last page-in, at the drain thread's look).
 * A take that finds no buffer of its size lets kept ones go first, oldest
 * first, until the new one fits the bounds: kept staging never refuses a
 * page-out that would have passed without it.
 *
 * Lock: vmem_p.lock guards the pool and vmem_p.staged; every caller holds
 * it.  The trim hands what it lets go to its caller (keep.c's
 * vmem_keep_tick), which frees it once the lock is released:
 * cuMemFreeHost may synchronize the device.
 *
 * Invariant (under vmem_p.lock), on vmem_p.pool (P):
 * P->bytes == sum of P->ent[0..P->n).bytes,
 * every pool entry's bytes a multiple of VMEM_STAGE_ROUND, and
 * vmem_p.staged counts staging in use only (not kept).
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the host bound ---------------------------------------------------------
 * What the host can spare without swapping: SALUS_SWAP_LIMIT, or half of
 * MemAvailable when first asked (several jobs may page at once; the other
 * half is left to them and to the programs' own host memory). */
static uint64_t host_available(void)
{
    unsigned long long kb = 0;
    char line[128];
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

uint64_t vmem_swap_limit(void)
{
    static uint64_t limit;
    uint64_t v = util_load_relaxed(&limit);
    if (v)
        return v;
    const char *text = util_var_text(UTIL_VAR_SWAP_LIMIT);
    if (!text || util_parse_size(text, host_available(), &v) != 0 || !v)
        v = host_available() / 2;
    util_store_relaxed(&limit, v);
    return v;
}

/* ---- the cgroup bound -------------------------------------------------------------
 * Pinned staging is charged to the job's memory cgroup: past its limit the
 * kernel's OOM killer SIGKILLs the job mid page-out, its work lost, whatever
 * the host has.  Read once per page-out, as it is about to stage
 * (util_cgroup_mem: the room left over the cgroup and its ancestors): the
 * staging may grow by that room less a margin (what the program and the
 * copies themselves still take meanwhile), and by what the pool keeps (it
 * can be let go); a page-out that would pass it is refused whole (swap.c's
 * bounds_allow), not served in part.  Refused, the memory stays on the GPU
 * and the asker waits, as past SALUS_SWAP_LIMIT. */
#define CG_MARGIN_MIN (16ull << 20)
#define CG_MARGIN_MAX (256ull << 20)

static util_cgroup_mem_t cg_at;        /* what vmem_p.cg_cap was read from */
static int cg_said;

/* 1/32 of the limit, 16 to 256 MiB. */
static uint64_t cg_margin(uint64_t limit)
{
    uint64_t m = limit / 32;
    return m < CG_MARGIN_MIN ? CG_MARGIN_MIN : m > CG_MARGIN_MAX ? CG_MARGIN_MAX : m;
}

/* ---- the pool ---------------------------------------------------------------------- */

uint64_t vmem_stage_keep_ns = VMEM_STAGE_KEEP_NS;

/* The pool lives in vmem_p (vmem_int.h's vmem_pool_t): a fork() child's
 * forget (core.c) resets it with the rest. */
static vmem_pool_t *const P = &vmem_p.pool;

uint64_t vmem_stage_size(uint64_t bytes)
{
    return (bytes + VMEM_STAGE_ROUND - 1) / VMEM_STAGE_ROUND * VMEM_STAGE_ROUND;
}

#ifdef SALUS_DEBUG
/* The invariant above, at every change of a debug build; a violation is
 * said once at error level (libsalus never aborts its host). */
static void pool_check(void)
{
    static int said;
    uint64_t sum = 0;
    int whole = 1;
    for (unsigned i = 0; i < P->n; i++) {
        whole = whole && P->ent[i].p && P->ent[i].bytes % VMEM_STAGE_ROUND == 0;
        sum += P->ent[i].bytes;
    }
    if (!whole || sum != P->bytes)
        util_log_once(&said, UTIL_LOG_ERROR, "staging pool: %u entries, %s, summing to %llu "
                      "where %llu are counted (a bug in stage.c)", P->n,
                      whole ? "whole" : "one of them broken", (unsigned long long)sum,
                      (unsigned long long)P->bytes);
}
#else
static void pool_check(void) {}
#endif

/* Entry i out of the pool (its buffer the caller's). */
static void *pool_remove(unsigned i)
{
    void *p = P->ent[i].p;
    P->bytes -= P->ent[i].bytes;
    memmove(&P->ent[i], &P->ent[i + 1], (P->n - 1 - i) * sizeof P->ent[0]);
    P->n--;
    return p;
}

/* The oldest kept buffer back to the driver. */
static void pool_release_oldest(void)
{
    vmem_drv()->mem_free_host(pool_remove(0));
}

uint64_t vmem_stage_kept(void)
{
    return P->bytes;
}

/* ---- taking and giving back --------------------------------------------------------- */

void vmem_cg_read(void)
{
    util_cgroup_mem_t c;
    vmem_p.cg_cap = UINT64_MAX;
    if (util_cgroup_mem(&c) != 0)
        return;                       /* no cgroup limit, or none readable */
    uint64_t m = cg_margin(c.limit);
    vmem_p.cg_cap = vmem_p.staged + P->bytes + (c.room > m ? c.room - m : 0);
    cg_at = c;
}

void vmem_cg_refused(uint64_t bytes)
{
    util_log_once(&cg_said, UTIL_LOG_WARN, "memory: a page-out of %s to the host would pass "
                  "this job's memory cgroup's limit (%s: limit %s, %s in use; staging is bounded "
                  "by what is left less a margin of %s, and by SALUS_SWAP_LIMIT, now %s): the "
                  "kernel would kill the job mid page-out.  Its memory stays on the GPU and "
                  "the job that asked for it waits; give the cgroup more memory (%s) for it to "
                  "page", util_size(bytes).s, cg_at.path, util_size(cg_at.limit).s,
                  util_size(cg_at.used).s, util_size(cg_margin(cg_at.limit)).s,
                  util_size(vmem_swap_limit()).s,
                  cg_at.v1 ? "memory.limit_in_bytes" : "memory.max");
}

/* Whether `more` in use fits both bounds now. */
static int stage_fits(uint64_t more)
{
    return vmem_p.staged + more <= vmem_swap_limit() && vmem_p.staged + more <= vmem_p.cg_cap;
}

/* Whether staging in use plus kept plus `more` is within both bounds. */
static int pinned_fits(uint64_t more)
{
    uint64_t all = vmem_p.staged + P->bytes + more;
    return all <= vmem_swap_limit() && all <= vmem_p.cg_cap;
}

void *vmem_stage_take(uint64_t bytes)
{
    void *p = NULL;
    uint64_t n = vmem_stage_size(bytes);
    if (!stage_fits(n)) {
        if (vmem_p.staged + n <= vmem_swap_limit())
            vmem_cg_refused(n);       /* the cgroup's room, not the host's */
        return NULL;
    }
    for (unsigned i = P->n; i-- > 0;)
        if (P->ent[i].bytes == n) {     /* the newest of its size */
            p = pool_remove(i);
            goto out_taken;
        }
    while (P->n && !pinned_fits(n))
        pool_release_oldest();        /* kept staging never refuses one */
    if (vmem_drv()->mem_host_alloc(&p, n, 0) != CUDA_SUCCESS)
        return NULL;
out_taken:
    vmem_p.staged += n;
    pool_check();
    return p;
}

/* Whether a buffer of n bytes given back may be kept: room in the pool,
 * and, under a cgroup limit, as much room left in it as the pool would
 * hold (kept staging must not be what the program's own memory finds
 * missing). */
static int may_keep(uint64_t n)
{
    util_cgroup_mem_t c;
    if (!util_load_relaxed(&vmem_p.ticking))
        return 0;                     /* nobody would let it go */
    if (P->bytes + n + vmem_p.staged + mem_stage_others() > vmem_swap_limit())
        return 0;                     /* beside the table's reservations */
    return util_cgroup_mem(&c) != 0 || c.room >= P->bytes + n + cg_margin(c.limit);
}

void vmem_stage_give(void *p, uint64_t bytes)
{
    uint64_t n = vmem_stage_size(bytes);
    if (!p)
        return;
    vmem_p.staged -= n;
    P->last_in_ns = util_coarse_ns();
    if (!may_keep(n)) {
        vmem_drv()->mem_free_host(p);
        return;
    }
    if (P->n == VMEM_STAGE_KEEP_N)
        pool_release_oldest();
    P->ent[P->n++] = (vmem_kept_stage_t){ p, n };
    P->bytes += n;
    pool_check();
}

/* ---- the pool's trim ------------------------------------------------------------------- */

unsigned vmem_stage_trim_locked(uint64_t now, void **drop, uint64_t *next)
{
    unsigned n = 0;
    uint64_t keep = vmem_stage_keep_ns;
    if (P->n && now >= P->last_in_ns + keep)
        while (P->n)
            drop[n++] = pool_remove(0);
    if (P->n && (*next == 0 || *next > keep / 2 + 1))
        *next = keep / 2 + 1;
    pool_check();
    return n;
}
