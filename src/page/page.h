/*
 * page.h - who pages and when: the whole interface of src/page.
 *
 * With SALUS_SWAP=on a process that does not run can have its device
 * memory paged out to host memory and back, at the same addresses, before
 * it runs again.  The allocator (src/vmem) moves the bytes; this module
 * decides whom to ask to page out (the peers the policy runs last, under
 * the table lock), serves what this process was asked while it waits for
 * the GPU, pages it back in before it runs, pages it out by itself where
 * no policy gate can (pack: the stuck rule), and keeps the scheduler from
 * granting a waiter whose memory cannot come back.
 *
 * It sits above the scheduler, the allocator and memory admission, and
 * calls them: intercept -> page -> {sched, vmem -> memory} -> ipc.  What
 * it reads of memory's table areas it reads through memory.h's "for
 * paging" functions.  Two seams, each with a second implementation in the
 * tests: the pager (vmem's by default) and the scheduler's answers (the
 * scheduler's by default).
 *
 * Every function is safe to call with paging off (a load or two).
 */
#ifndef SALUS_PAGE_H
#define SALUS_PAGE_H

#include <stdint.h>

#include <cuda.h>

#include "ipc/ipc.h"
#include "memory/memory.h"

/* ---- start ------------------------------------------------------------------ */
/* After mem_init: memory's waits ask page what they need of the layers
 * above (memory.h's mem_set_paging): the scheduler's queue and order, and
 * with SALUS_SWAP=on whom to ask to page out, from the first (an admission
 * before this process has a pager). */
void page_start(void);

/* ---- the seams ----------------------------------------------------------------
 * The pager's primitives, run in the process that owns the memory:
 *   page_out         copy to host staging, unmap, release, return the
 *                    budget; *freed: the bytes given back (want: at least)
 *   page_in          take the budget back, map, copy back; not
 *                    CUDA_SUCCESS when the budget is not there (the caller
 *                    waits, asking peers to page out); *restored: the
 *                    bytes brought back
 *   paged_out_bytes  what is paged out now on that CUDA ordinal
 *   resident_bytes   what is resident (may be NULL)
 *   copied_bytes     bytes copied so far, both ways (may be NULL)
 * vmem's (vmem_page_*) once it has virtualized memory (vmem_pageable);
 * page_set_pager replaces it (copied; NULL, or one without the first
 * three, turns paging off).  Until a pager is set nobody pages. */
typedef struct page_pager {
    CUresult (*page_out)(int ordinal, uint64_t want, uint64_t *freed);
    CUresult (*page_in)(int ordinal, uint64_t *restored);
    uint64_t (*paged_out_bytes)(int ordinal);
    uint64_t (*resident_bytes)(int ordinal);
    uint64_t (*copied_bytes)(void);
} page_pager_t;
void page_set_pager(const page_pager_t *pager);
/* Nothing pages this process out again, for good (what is out comes back
 * as usual); said once on stderr with `why` when SALUS_SWAP=on.  For a
 * writer of device memory libsalus cannot see: the resolver handing out an
 * export it does not wrap.  page_stopped: 1 since. */
void page_stop(const char *why);
int  page_stopped(void);

/* What paging asks of the scheduler (sched.h's functions by default):
 *   rank      the policy's order on table device d: 0 the holder, 1 + its
 *             place among the waiters, -1 neither (sched_rank_locked;
 *             under the table lock): peers the policy runs last page out
 *             first;
 *   held      whether this process still holds table device d's GPU
 *             (sched_holds_gpu): a page-in before a tenure waits only then;
 *   give_up   leave the GPU of CUDA ordinal o and its queue
 *             (sched_give_up_for_mem): memory only the jobs behind it can
 *             give back;
 *   nudge     wake a peer asked to page out (sched_nudge; under the lock);
 *   hold      hold (on = 1) or let go this process's launches while it
 *             pages itself out (sched_hold_for_mem): 1 when held;
 *   wait_mem  queue for the GPU of CUDA ordinal o while a wait for memory
 *             lasts (sched_wait_mem);
 *   admit_order, enroll  the policy's order of two admission waiters on
 *             table device d (sched_admit_order_locked, under the lock) and
 *             the process's enrolment before it waits (sched_enroll);
 *   unsafe_begin, unsafe_end  around a page-out or page-in, whose copies
 *             and unmaps a stream capture of the process forbids
 *             (sched_unsafe_begin/_end): begin -1 while one is open, and
 *             the page-out waits for a later poll, the page-in for the
 *             capture's end (at most PAGE_CAPTURE_WAIT_NS, then said).
 * The last three and give_up are what memory's waits ask (memory.h's
 * mem_paging_t, which page sets at its start).  page_set_sched replaces
 * them all (tests); a NULL member: rank -1, held 1, admit_order 0,
 * unsafe_begin 0 (no capture), the others do nothing (hold: no stuck rule). */
typedef struct page_sched {
    int (*rank)(shm_table_t *t, int d, int slot);
    int (*held)(int d);
    void (*give_up)(int ordinal);
    void (*nudge)(shm_table_t *t, int slot);
    int (*hold)(int ordinal, int on);
    void (*wait_mem)(int ordinal);
    int (*admit_order)(shm_table_t *t, int d, int a, int b);
    void (*enroll)(int ordinal);
    int (*unsafe_begin)(void);
    void (*unsafe_end)(void);
} page_sched_t;
void page_set_sched(const page_sched_t *sched);

/* ---- at the scheduler's moments (intercept passes them on) ------------------- */
/* While this process waits for the GPU (each look of the wait loop): page
 * out what a peer asked of it, if anything.  One relaxed load when nothing
 * is asked. */
void page_serve(void);
/* Before this process runs on table device `device` (its tenure's first
 * launch): page back in what is paged out there, asking peers to page out
 * if the device lacks the room; waits until it is in, or until the GPU is
 * no longer this process's (the scheduler then waits for the GPU again,
 * and pages in at the next tenure). */
void page_in_before_run(int device);
/* This process has memory paged out now (any device): 1 or 0.  One load. */
int page_is_out(void);
/* What this process paged out on table device `device` would come back
 * there now, in the room the device has, with no peer paging out, and its
 * own limit lets it in: 1 (also when nothing is out there), else 0.  Takes
 * the table lock: never under it. */
int page_in_fits(int device);
/* This process holds table device `device` and the policy would hand it to
 * the process in `slot` at a boundary: 1 when it keeps it instead, since
 * it is within its minimum residency and that process has more paged out
 * than the device has room for.  Under the table lock. */
int page_keep_locked(shm_table_t *t, int device, int slot);
/* The process in `slot`, waiting for table device `device`'s GPU, has more
 * paged out than could come back there even were every other pageable
 * process paged out, or than its own limit lets in: 1, and the scheduler
 * leaves it out of its candidates.  Under the table lock. */
int page_blocked_locked(shm_table_t *t, int device, int slot);

/* ---- allocations that may page the process itself out ------------------------ */
/* vmem_alloc and vmem_alloc_async, driven: a try whose charge finds the
 * process stuck (memory.h's MEM_CHARGE_BAIL) gives up with vmem's lock
 * released; the process pages itself out (page_self_wait) and the
 * allocation is tried again, up to PAGE_STUCK_ROUNDS times, then once
 * more as any allocation waits (SALUS_MEM_WAIT_MS).  Answers as vmem's. */
#define PAGE_STUCK_ROUNDS 64
CUresult page_valloc(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                     size_t height, unsigned elem);
CUresult page_valloc_async(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device);
/* With every lock of the caller released: page this process out on CUDA
 * ordinal `ordinal`, its launches held, wait for room for it and `bytes`,
 * page back in and let the launches go.  0: charge again; -1: nothing
 * could move (the next charge waits as any allocation). */
int page_self_wait(int ordinal, uint64_t bytes);

#endif /* SALUS_PAGE_H */
