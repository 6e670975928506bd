/*
 * intercept.h - the interception layer of libsalus: its whole interface.
 *
 * libsalus sees every driver call a framework makes through three paths:
 *   - programs linked to libcuda call our exported wrappers directly
 *     (LD_PRELOAD puts libsalus first in the symbol search);
 *   - programs that dlopen libcuda and dlsym a versioned name get our wrapper
 *     from the dlsym override (dlsym.c);
 *   - the CUDA runtime asks cuGetProcAddress, which the dlsym override
 *     answers with our resolver (resolver.c), which answers with the wrapper
 *     of exactly the export the driver chose.
 * The wrapped exports and their categories are one list, hooks.list, turned
 * into the X-macro HOOK_LIST by gen_hooks.py; everything here is expanded from
 * it.  Everything else resolves to the real driver untouched.
 *
 * Other modules do not include this header (data flows intercept -> sched /
 * memory): the wrappers call them.  It is the interface for the tests: the
 * hook table, the real-function table they can swap (the seam), the driver
 * map, the counters and the report.
 *
 * Files, each depending only on those after it (mk/circles.py checks it):
 * report.c (the report and the library's constructor), dlsym.c (the dlsym
 * override), resolver.c (cuGetProcAddress and the wrappers' addresses),
 * wrappers.c (every other wrapper), memops.c (the MEMOP wrappers, each
 * written by hand), thread.c (the per-thread blocks),
 * real.c (the real driver and glibc's dlsym), procmap.c (the driver map),
 * hooks.c (the hook table).
 *
 * Include <cuda.h> in either mode before or through this header; nothing
 * here depends on __CUDA_API_VERSION_INTERNAL (export names are only pasted
 * or stringified, never expanded).
 */
#ifndef SALUS_INTERCEPT_H
#define SALUS_INTERCEPT_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

#include "cu_procmap.h"
#include "hook_list.h"
#include "memory/memory.h"
#include "vmem/vmem.h"
#include "page/page.h"
#include "sched/sched.h"
#include "util/list.h"
#include "util/util.h"

/* Everything declared here is internal to libsalus: references to it need
 * no GOT (the wrappers' exports are marked SALUS_EXPORT where defined). */
#pragma GCC visibility push(hidden)

/* ---- the hook table ------------------------------------------------------
 * One id per wrapped export, in the list's order: sorted by export name. */
#define HOOK_ID_ROW_(cat, export, ...) HOOK_##export,
typedef enum hook_id {
    HOOK_LIST(HOOK_ID_ROW_)
    HOOK_COUNT
} hook_id_t;

typedef enum hook_category {
    HOOK_CAT_LAUNCH,   /* submits work: gated by the scheduler */
    HOOK_CAT_SYNC,     /* the host waits for the GPU: iteration boundaries */
    HOOK_CAT_ALLOC,    /* device memory: admission and accounting */
    HOOK_CAT_FREE,
    HOOK_CAT_INFO,     /* memory queries: answered with the process's view */
    HOOK_CAT_LIFE,     /* driver and context lifecycle */
    HOOK_CAT_CAPTURE,  /* stream capture: begin, end, the thread's mode, queries */
    HOOK_CAT_MEMOP,    /* memory held past its allocation: mappings, pools (memops.c) */
    HOOK_CAT_COPY,     /* copies and memsets: GPU work, gated as launches are */
    HOOK_CAT_RESOLVE,  /* cuGetProcAddress */
    HOOK_CAT_COUNT
} hook_category_t;

/* The kinds a category row names (hooks.list kind=...): a SYNC row names a
 * sched_sync_kind_t (SCHED_SYNC_*), an ALLOC or FREE row a mem_kind_t
 * (MEM_KIND_*), a LIFE or CAPTURE row one of these. */
typedef enum {
    HOOK_LIFE_INIT, HOOK_LIFE_RETAIN, HOOK_LIFE_RELEASE, HOOK_LIFE_RESET, HOOK_LIFE_CREATE,
    HOOK_LIFE_DESTROY, HOOK_LIFE_MODULE, HOOK_LIFE_STREAM
} hook_life_kind_t;
typedef enum {
    HOOK_CAPTURE_BEGIN, HOOK_CAPTURE_END, HOOK_CAPTURE_MODE, HOOK_CAPTURE_QUERY
} hook_capture_kind_t;

/* Per id, from the list: the export's name (sorted), its category, its base
 * name, version and per-thread flag, and our wrapper of it. */
extern const char *const hook_names[HOOK_COUNT];
extern const hook_category_t hook_categories[HOOK_COUNT];
extern const char *const hook_category_names[HOOK_CAT_COUNT];
extern const char *const hook_bases[HOOK_COUNT];
extern const int hook_versions[HOOK_COUNT];
extern const unsigned char hook_per_thread[HOOK_COUNT];
extern void *const hook_wrappers[HOOK_COUNT];
/* The id of a wrapped export, or -1. */
int hook_find(const char *export_name);
/* 1 when a driver base name (cuGetProcAddress's symbol, the map's base)
 * launches, copies, sets, writes or allocates device memory: work paging
 * must see (resolver.c). */
int hook_base_writes(const char *base);
/* The LAUNCH exports' ids, in the list's order. */
#define HOOK_IS_LAUNCH_(cat, ...) + HOOK_IS_LAUNCH_##cat
#define HOOK_IS_LAUNCH_LAUNCH 1
#define HOOK_IS_LAUNCH_SYNC 0
#define HOOK_IS_LAUNCH_ALLOC 0
#define HOOK_IS_LAUNCH_FREE 0
#define HOOK_IS_LAUNCH_INFO 0
#define HOOK_IS_LAUNCH_LIFE 0
#define HOOK_IS_LAUNCH_CAPTURE 0
#define HOOK_IS_LAUNCH_MEMOP 0
#define HOOK_IS_LAUNCH_COPY 0
#define HOOK_IS_LAUNCH_RESOLVE 0
#define HOOK_LAUNCHES (0 HOOK_LIST(HOOK_IS_LAUNCH_))
extern const hook_id_t hook_launch_ids[HOOK_LAUNCHES];
/* The calls that can write device memory, or wait for what did: launches,
 * copies and memsets, and every sync row (gated ones among them).
 * HOOK_WHEN_WORK_<category>(...) is its arguments for those categories and
 * nothing for the others: a sum over them expands to one load per export,
 * at a constant offset (thread.c's work_of). */
#define HOOK_WHEN_WORK_LAUNCH(...) __VA_ARGS__
#define HOOK_WHEN_WORK_SYNC(...) __VA_ARGS__
#define HOOK_WHEN_WORK_ALLOC(...)
#define HOOK_WHEN_WORK_FREE(...)
#define HOOK_WHEN_WORK_INFO(...)
#define HOOK_WHEN_WORK_LIFE(...)
#define HOOK_WHEN_WORK_CAPTURE(...)
#define HOOK_WHEN_WORK_MEMOP(...)
#define HOOK_WHEN_WORK_COPY(...) __VA_ARGS__
#define HOOK_WHEN_WORK_RESOLVE(...)
#define HOOK_IS_WORK_(cat, ...) HOOK_WHEN_WORK_##cat(+ 1)
#define HOOK_WORKS (0 HOOK_LIST(HOOK_IS_WORK_))

/* ---- the real driver -----------------------------------------------------
 * One slot per wrapped export: where its wrapper forwards.  Until the driver
 * is loaded a slot holds a stub that loads it, on first need: from
 * SALUS_REAL_LIBCUDA=<path>, else libcuda.so.1 found the usual way.  A slot
 * whose export the driver lacks keeps its stub, which answers
 * CUDA_ERROR_NOT_FOUND; if the driver cannot be loaded every stub answers
 * CUDA_ERROR_NOT_INITIALIZED (and says once why, and what to do).
 *
 * Ordering: slots are written once by the loader, under its lock, with
 * release stores, and read by the wrappers with relaxed loads.  A wrapper that
 * reads the stub goes through the loader's lock (acquire) before calling the
 * real function; one that reads a real pointer reaches only the driver's
 * code, mapped by a dlopen that completed before the store, through an address
 * dependency. */
#define HOOK_REAL_FIELD_(cat, export, ...) CUresult (CUDAAPI *f_##export) CU_PARAMS_##export;
typedef union hook_real {
    struct { HOOK_LIST(HOOK_REAL_FIELD_) } fn;
    void *slot[HOOK_COUNT];
} hook_real_t;
extern hook_real_t hook_real;

/* The real function of an export, as its wrapper calls it. */
#define HOOK_REAL(export) util_load_relaxed(&hook_real.fn.f_##export)

/* Load the driver and fill the table, once.  0, or -1 if it cannot be loaded
 * (said once on stderr).  Safe from any thread; a call made while this thread
 * is loading (a driver constructor calling back) answers -1. */
int hook_real_load(void);
/* The driver's handle once loaded (NULL before, or with a fake table). */
void *hook_real_handle(void);
/* The driver contract (drv.h) over the loaded driver: 0 and *out filled,
 * or -1 (no driver loaded, a fake table, or the driver lacks what the
 * contract requires). */
int hook_real_drv(drv_t *out);

/* Test seam (as SQLite's aSyscall[]): make `fake` the driver.  Its non-NULL
 * slots replace the real functions; a NULL slot is an export the driver
 * lacks.  hook_real_reset() returns to the unloaded state, so that the next
 * call loads a driver again (with the environment as it is then). */
void hook_real_install(const hook_real_t *fake);
void hook_real_reset(void);

/* ---- the driver map (procmap.c) ------------------------------------------
 * What cuGetProcAddress(symbol, version, flags) returns, as an export name:
 * flags 0 (default) or 1 (legacy stream): the newest legacy variant whose
 * version is <= version; flags 2 (per-thread default stream): the newest
 * per-thread variant <= version if there is one, else as legacy.  Returns 0
 * and writes *export_name, or -1: unknown symbol, version too low, other
 * flags. */
int hook_procmap_lookup(const char *symbol, int version, cuuint64_t flags,
                        const char **export_name);

/* ---- the dlsym override (dlsym.c) ----------------------------------------
 * The exported dlsym is an assembly trampoline: it asks hook_dlsym_decide and
 * returns its answer when non-NULL, else jumps (a tail call, whatever the
 * optimization level) to the real dlsym with the original arguments, so that
 * RTLD_NEXT and dlerror() behave as if libsalus were not there. */
void *hook_dlsym_decide(void *handle, const char *name);
/* (real.c) glibc's dlsym, found with dlvsym; for libsalus's own lookups,
 * and where the trampoline forwards (hook_dlsym_next, set by the first
 * call). */
void *hook_dlsym_real(void *handle, const char *name);
extern void *hook_dlsym_next;
void hook_dlsym_ready(void);

/* ---- the per-thread blocks (thread.c) --------------------------------------
 * Each thread counts in a block of its own, reached through an initial-exec
 * TLS pointer and registered on the thread's first driver call; a thread's
 * exit folds its block into the process's sums.  Counts are per process: a
 * fork() child starts from zero and reports only if it calls the driver. */
typedef struct hook_counts {
    uint64_t launches;          /* calls of LAUNCH wrappers (snapshots only) */
    uint64_t syncs;             /* calls of SYNC wrappers that made the host wait */
    uint64_t allocs;            /* successful ALLOC calls */
    uint64_t frees;             /* successful FREE calls */
    uint64_t bytes_allocated;   /* sum of the sizes asked by successful ALLOCs */
    uint64_t resolver_wrapped;  /* cuGetProcAddress answered with a wrapper */
    uint64_t resolver_passed;   /* ... with the driver's own answer */
    uint64_t calls[HOOK_COUNT]; /* calls of each wrapper */
} hook_counts_t;

/* A thread's block: the one per-thread record of libsalus, the scheduler's
 * part (its gate pointer, first, so that a launch reads it from the line it
 * counts in) beside intercept's counters.  hook_tls is never NULL: a thread
 * starts on hook_unregistered, whose counts are discarded and whose gate is
 * sched_gate_unreg, so that its first launch takes the gated path, which
 * registers it.  The launch fast path has no branch: count, read the gate,
 * choose the real function or the gated one, jump.  (A branch there would
 * make GCC copy the stack arguments of cuLaunchKernel - 5 loads, 5 stores
 * and 4 register saves - around its tail call; keep it branch-free.)
 *
 * The active list.  A sync needs what the process launched since the
 * previous one, summed over its threads; walking every thread that ever
 * launched would cost the sync a few ns per thread.  So a block is on the
 * active list from its thread's first launch after a sync until the next
 * sync, which folds it (its counts minus what was folded before) and points
 * its gate back at sched_gate_unreg: the thread's next launch goes through
 * the gated path once, and rejoins.  A sync's cost is thus in the threads
 * that launched since the last one, not in all that ever did.
 *
 * Ownership: the owner thread writes its counters (hook_add) and `hash`;
 * `s.gate`, the fold marks and the list links are written under the
 * registry lock (by the owner in the gated path, by a syncing thread in a
 * fold) and the gate read by the owner with a relaxed load.  A launch that
 * read the gate just before a fold changed it is counted in the block but
 * folded at the next sync the block is folded in: late, never lost while
 * the thread lives (its exit folds the rest). */
typedef struct hook_block {
    sched_thread_t s;             /* gate pointer, hash, in_sync (sched.h) */
    hook_counts_t c;              /* written by the owner thread only */
    uint64_t folded_launches;     /* launches and hash at the last fold */
    uint64_t folded_hash;
    int active;                   /* on the active list */
    uint32_t parked;              /* in the gated path: its call counted, not made
                                     yet (owner writes, relaxed) */
    util_link_t on_live;          /* every registered block, or the spare ones */
    util_link_t on_active;        /* the active list */
} hook_block_t;

extern __thread hook_block_t *hook_tls __attribute__((tls_model("initial-exec")));
extern hook_block_t hook_unregistered;
/* Register the calling thread: its block from now on.  Never fails (a shared
 * fallback block takes the counts if memory is short; its launches are not
 * folded). */
hook_block_t *hook_thread_register(void);
/* The gated path of a launch (or copy) on `stream` by the thread of block b:
 * the scheduler's slow path, then b follows the gate it returned, on the
 * active list. */
void hook_thread_gated(hook_block_t *b, const void *work, CUstream stream);
/* How many calls of the work categories (HOOK_WHEN_WORK_) the process has let through to the
 * driver, over its threads (those parked in the gated path left out):
 * memory's mem_work_count, for allocations never written since. */
uint64_t hook_work_released(void);
/* What the process launched since the previous fold, every thread's (the
 * scheduler's sync token; sched_sync_end's callback). */
sched_token_t hook_threads_fold(void);
/* Called once at the process's first driver call (and a fork child's):
 * where the report learns that it has something to say. */
void hook_threads_on_first_call(void (*fn)(void));
/* Whether this process (not a parent before fork) called the driver. */
int hook_threads_armed(void);

/* The calling thread's block, registering it on its first call. */
static inline hook_block_t *hook_block(void)
{
    hook_block_t *b = hook_tls;
    if (UTIL_UNLIKELY(b == &hook_unregistered))
        b = hook_thread_register();
    return b;
}

/* Add to a counter of the calling thread's block: a relaxed load and a
 * volatile store, not a read-modify-write.  Only the owner writes; readers
 * (snapshots, folds, under the registry lock) use relaxed atomic loads and
 * see a recent value.  The store is volatile, as the kernel's WRITE_ONCE: a
 * single store the compiler may not tear, merge or drop.  Not
 * __atomic_store_n: GCC treats it as a possible write to the incoming stack
 * arguments, and cuLaunchKernel's wrapper would reload and re-store them
 * (5 loads, 5 stores, 4 register saves) around its tail call. */
static inline void hook_add(uint64_t *counter, uint64_t n)
{
    *(volatile uint64_t *)counter = util_load_relaxed(counter) + n;
}

/* Entry of every wrapper but the launches': count the call, return the block. */
static inline hook_block_t *hook_enter(hook_id_t id)
{
    hook_block_t *b = hook_block();
    hook_add(&b->c.calls[id], 1);
    return b;
}

/* The process's counts: exited threads plus the running ones. */
void hook_counts_snapshot(hook_counts_t *out);

/* ---- the report (report.c) ----------------------------------------------- */
/* The report object (one line of JSON, no newline) in buf; its length, or
 * -1 if it does not fit.  The modules' fields (sched_report_fields,
 * mem_report_fields) follow intercept's. */
int hook_report_format(char *buf, size_t cap);
/* Append the report to SALUS_REPORT, if set and this process made a driver
 * call; what the exit handler does.  0, or -1 (said on stderr). */
int hook_report_write(void);

#pragma GCC visibility pop

#endif /* SALUS_INTERCEPT_H */
