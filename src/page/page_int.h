/*
 * page_int.h - what the files of src/page share; private to the module
 * (and its tests).  page.c, the bottom: the seams, asking peers, serving,
 * paging in, the scheduler's candidates; self.c, above it: the start and
 * the pager, paging itself out under a policy that gates nothing, and the
 * allocations that may.
 */
#ifndef SALUS_PAGE_INT_H
#define SALUS_PAGE_INT_H

#include "page/page.h"

/* A job paged in stays resident this many times as long as its page-in
 * took (page.c's protocol). */
#define PAGE_RESIDENCY_FACTOR 8
#define PAGE_SLICE_NS         (20ull * 1000 * 1000)
/* A page-in's longest wait for a stream capture of the process to end. */
#define PAGE_CAPTURE_WAIT_NS  (5000ull * 1000 * 1000)

static inline uint64_t page_umin(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* The pager (NULL: none set; acquire) and the scheduler's answers
 * (page.c), a NULL member answered as page.h says. */
const page_pager_t *page_pager(void);
void page_pager_store(const page_pager_t *pager);   /* copied; NULL: none */
int page_rank(shm_table_t *t, int d, int slot);
int page_held(int d);
void page_give_up(int ordinal);
void page_nudge(shm_table_t *t, int slot);
int page_hold(int ordinal, int on);
void page_wait_mem(int ordinal);
int page_admit_order(shm_table_t *t, int d, int a, int b);
int page_unsafe_begin(void);
void page_unsafe_end(void);
void page_enroll(int ordinal);
int page_can_hold(void);

/* (page.c) Page in what was paged out on CUDA ordinal `ord`, once: 0 when
 * it is all in, -1 when the budget is not there now.  Publish what is
 * paged out now and what was copied (the own slot's counters). */
int page_in_once(const page_pager_t *pg, int ord);
void page_publish(const page_pager_t *pg);
/* (page.c) Under the table lock, for memory's waits (mem_set_paging, set
 * by self.c): ask the peers the policy runs last to page out `need` bytes
 * on table device d between them, what is asked (requests already pending
 * count; 0: nobody can be); what paging could free there (*now: the part
 * that may be asked now). */
uint64_t page_ask_locked(int d, uint64_t need);
uint64_t page_movable_locked(int d, uint64_t *now);

#endif /* SALUS_PAGE_INT_H */
