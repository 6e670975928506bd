/*
 * test_memory_page.c - who pages and when (src/page), driven through the
 * modules' interfaces with a fake driver and a fake pager (the
 * page_pager_t seam): the allocator's primitives are replaced by frees and
 * allocations of the process's own blocks, so that what is tested is the
 * decision, not the copy.
 *
 *   - a process that needs memory the device lacks asks the peer the policy
 *     runs last, and only it, for what it lacks; the peer, waiting for the
 *     GPU, serves the request; the allocation that asked waits for it
 *     (SALUS_MEM_WAIT_MS=0 would refuse at once without paging) and the
 *     counters show one page-out of the right peer;
 *   - a peer that pages back in before it runs asks the others in turn;
 *   - a peer paged in stays resident 8 times as long as its page-in took:
 *     asked within that time it is left alone, after it is asked (the
 *     asker waits for it, since paging will free what it lacks);
 *   - a peer paged out for memory that cannot move is no candidate for the
 *     GPU until that memory is freed;
 *   - a peer whose own limit (salus limit) is below what it would hold with
 *     its paged-out memory back is no candidate for the GPU though the
 *     device has room; granted anyway, its page-in gives the GPU up and
 *     asks no peer to page out (before, it asked at every 20 ms, holding
 *     the GPU for good), and it pages in once the limit is raised;
 *   - a peer killed while it pages out: its memory is reaped exactly and
 *     the one that asked goes on;
 *   - a page-in before a tenure that waits for room ends, its memory still
 *     out, once its process no longer holds the GPU (page_sched_t's held,
 *     seam): before, it waited for good, asking nobody (torch_swap hung so);
 *   - while a stream capture of the process is open (page_sched_t's
 *     unsafe_begin, seam) it neither pages out nor in: both wait for its end.
 * The policy's order is a table the test writes (page_sched_t's rank).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "lib/actor.h"
#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "page/page.h"
#include "test_memory_lib.h"

/* Shared with the children: the policy's order by slot (0 = none known). */
typedef struct shared {
    int rank[SHM_MAX_SLOTS];
    int stall_out;                 /* a page-out stops half-way until killed */
    int give_ups;                  /* calls of the GPU give-up hook (page_sched_t's give_up) */
    int lease_lost;                /* the GPU-held hook answers 0 (page_sched_t's held) */
    int capturing;                 /* a stream capture is open (page_sched_t's unsafe_begin) */
    int unsafe_in;                 /* page-outs and page-ins entered while not capturing */
} shared_t;
static shared_t *sh;

static int fake_rank(shm_table_t *t, int d, int slot)
{
    (void)t;
    (void)d;
    return slot >= 0 && slot < SHM_MAX_SLOTS ? __atomic_load_n(&sh->rank[slot], __ATOMIC_RELAXED)
                                             : -1;
}

/* ---- the fake pager: a process's blocks, freed and allocated again ------- */

#define BLOCKS 8
static struct { uint64_t handle, bytes; int out; } blk[BLOCKS];
static uint64_t page_in_sleep_ms;

static CUresult fp_out(int ordinal, uint64_t want, uint64_t *freed)
{
    (void)ordinal;
    uint64_t f = 0;
    for (int i = 0; i < BLOCKS && f < want; i++) {
        if (!blk[i].handle || blk[i].out)
            continue;
        fk_free(MEM_KIND_DEVICE, blk[i].handle);
        blk[i].handle = 0;
        blk[i].out = 1;
        f += blk[i].bytes;
        if (__atomic_load_n(&sh->stall_out, __ATOMIC_RELAXED))
            pause();                   /* killed here, half-way */
    }
    *freed = f;
    return CUDA_SUCCESS;
}

static CUresult fp_in(int ordinal, uint64_t *restored)
{
    uint64_t r = 0;
    if (page_in_sleep_ms) {            /* the copy's time, which residency scales */
        struct timespec ts = { (time_t)(page_in_sleep_ms / 1000),
                               (long)(page_in_sleep_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    /* The budget is taken back in one piece, as the allocator's page-in
     * re-admits it: one allocation of everything paged out, kept in the
     * first block paged out (the others become empty). */
    int first = -1;
    for (int i = 0; i < BLOCKS; i++)
        if (blk[i].out) {
            r += blk[i].bytes;
            first = first < 0 ? i : first;
        }
    if (first < 0) {
        *restored = 0;
        return CUDA_SUCCESS;
    }
    uint64_t h, room;
    if (mem_room_at(ordinal, &room) == 0 && room < r)
        return CUDA_ERROR_OUT_OF_MEMORY;   /* refused at once, as vmem_page_in is */
    if (fk_alloc(MEM_KIND_DEVICE, r, &h) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;   /* the room is not there yet */
    for (int i = 0; i < BLOCKS; i++)
        if (blk[i].out) {
            blk[i].out = 0;
            blk[i].handle = i == first ? h : 0;
            blk[i].bytes = i == first ? r : 0;
        }
    *restored = r;
    return CUDA_SUCCESS;
}

static uint64_t fp_paged(int ordinal)
{
    (void)ordinal;
    uint64_t s = 0;
    for (int i = 0; i < BLOCKS; i++)
        s += blk[i].out ? blk[i].bytes : 0;
    return s;
}

static const page_pager_t fake_pager = { fp_out, fp_in, fp_paged, NULL, NULL };

/* ---- actors: tests/lib/actor.h ------------------------------------------ */

/* A 100M device, no headroom, refusals at once unless peers page. */
static shm_table_t *start_100m(int swap)
{
    fk_reset();
    fk.capacity = 100 * MB;
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    setenv("SALUS_SWAP", swap ? "on" : "off", 1);
    static const page_sched_t ranked = { .rank = fake_rank };
    page_set_pager(&fake_pager);
    page_set_sched(&ranked);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    return t;
}

static void count_give_up(int ordinal)
{
    (void)ordinal;
    __atomic_add_fetch(&sh->give_ups, 1, __ATOMIC_RELAXED);
}

static int fake_held(int d)
{
    (void)d;
    return !__atomic_load_n(&sh->lease_lost, __ATOMIC_RELAXED);
}

static int fake_unsafe_begin(void)
{
    if (__atomic_load_n(&sh->capturing, __ATOMIC_ACQUIRE))
        return -1;
    __atomic_add_fetch(&sh->unsafe_in, 1, __ATOMIC_RELAXED);
    return 0;
}

static void fake_unsafe_end(void)
{
    __atomic_sub_fetch(&sh->unsafe_in, 1, __ATOMIC_RELAXED);
}

/* A job that holds `arg` MB in two blocks and waits for the GPU, serving
 * page-out requests as the scheduler's wait loop does, until told:
 *   'r' run: page in (as before a tenure), say 'i', wait for the GPU again;
 *   'x' exit. */
static int waiting_job(actor_t *a)
{
    shm_table_t *t = start_100m(1);
    static const page_sched_t fake = { .rank = fake_rank, .held = fake_held,
                                       .give_up = count_give_up,
                                       .unsafe_begin = fake_unsafe_begin,
                                       .unsafe_end = fake_unsafe_end };
    page_set_sched(&fake);
    uint64_t half = a->arg * MB / 2;
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, half, &blk[i].handle), CUDA_SUCCESS);
        blk[i].bytes = half;
    }
    int slot = shm_self_peek(t);
    shm_set_state(t, slot, SHM_WAIT_GPU);
    act_tell(a, 'w');
    for (;;) {
        while (!act_has(a, 5)) {
            page_serve();
            fk_check_invariants(t);
        }
        char c = act_next(a);
        if (c == 'x' || c == 0)          /* told to, or the test is gone */
            break;
        if (c == 'r') {
            shm_set_state(t, slot, SHM_RUNNING);
            page_in_before_run(0);
            CHECK_EQ(fp_paged(0), 0);
            shm_set_state(t, slot, SHM_WAIT_GPU);
            act_tell(a, 'i');
        }
        if (c == 'R') {                  /* a tenure's page-in that may end without it */
            shm_set_state(t, slot, SHM_RUNNING);
            page_in_before_run(0);
            shm_set_state(t, slot, SHM_WAIT_GPU);
            act_tell(a, fp_paged(0) ? 'o' : 'i');
        }
        if (c == 's') {                  /* slow page-ins from now on: 500 ms */
            page_in_sleep_ms = 500;
            act_tell(a, 's');
        }
    }
    return 0;
}

/* Allocates `arg` MB with no wait of its own; says 'o' (it got it) or 'n'. */
static int asker(actor_t *a)
{
    start_100m(0);
    uint64_t h;
    for (;;) {
        char c = act_next(a);
        if (c == 'x' || c == 0)
            break;
        if (c == 'a')
            act_tell(a, fk_alloc(MEM_KIND_DEVICE, a->arg * MB, &h) == CUDA_SUCCESS ? 'o' : 'n');
        if (c == 'f') {
            fk_free(MEM_KIND_DEVICE, h);
            act_tell(a, 'f');
        }
    }
    return 0;
}

static shm_table_t *monitor(void)
{
    shm_open_opts_t o = { .name = fk_table, .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    return t;
}

static int slot_of(shm_table_t *t, pid_t pid)
{
    shm_ident_t id;
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        if (shm_slot_ident(t, i, &id) == 0 && id.pid == pid)
            return i;
    return -1;
}

static mem_slot_view_t view(shm_table_t *t, pid_t pid)
{
    mem_slot_view_t v;
    int s = slot_of(t, pid);
    assert_true(s >= 0);
    assert_int_equal(mem_view_slot(t, s, &v), 0);
    return v;
}

static int setup(void **state)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        sh->rank[i] = -1;
    return fk_setup(state);
}

static int teardown(void **state)
{
    munmap(sh, sizeof *sh);
    return fk_teardown(state);
}

/* pid's counters, once its page-outs reach `outs` (its own bookkeeping
 * follows the frees that let the asker go on). */
typedef struct outs_goal {
    shm_table_t *t;
    pid_t pid;
    uint64_t outs, ins;
} outs_goal_t;

static int counted(void *arg)
{
    outs_goal_t *g = arg;
    mem_slot_view_t v;
    int s = slot_of(g->t, g->pid);
    return s >= 0 && mem_view_slot(g->t, s, &v) == 0 && v.swap_outs >= g->outs &&
           v.swap_ins >= g->ins && !v.paging;
}

static mem_slot_view_t view_after(shm_table_t *t, pid_t pid, uint64_t outs, uint64_t ins)
{
    outs_goal_t g = { t, pid, outs, ins };
    if (!tu_await(counted, &g, 10000))
        fail_msg("process %d never counted %llu page-outs and %llu page-ins", (int)pid,
                 (unsigned long long)outs, (unsigned long long)ins);
    return view(t, pid);
}

/* The three actors told to exit and reaped, the table closed. */
static void end_three(shm_table_t *m, actor_t *first, actor_t *last, actor_t *ask)
{
    actor_t *all[] = { first, last, ask };
    for (int i = 0; i < 3; i++)
        actor_say(all[i], 'x');
    for (int i = 0; i < 3; i++)
        actor_finish(all[i]);
    shm_close_table(m);
}

/* Two jobs of 40M wait for the GPU; the policy runs `last` after `first`. */
static void two_waiting(shm_table_t **m, actor_t *first, actor_t *last)
{
    actor_start(first, waiting_job, 40);
    actor_expect(first, 'w');
    actor_start(last, waiting_job, 40);
    actor_expect(last, 'w');
    *m = monitor();
    sh->rank[slot_of(*m, first->pid)] = 1;
    sh->rank[slot_of(*m, last->pid)] = 2;
}

/* ---- the last in the policy's order pages, and only it ------------------- */

static void test_last_pages_first(void **state)
{
    (void)state;
    shm_table_t *m;
    actor_t first, last, ask;
    two_waiting(&m, &first, &last);
    actor_start(&ask, asker, 50);                   /* 20M free: 30M to page */
    actor_say(&ask, 'a');
    actor_expect(&ask, 'o');                              /* waited for the page-out */
    mem_slot_view_t vl = view_after(m, last.pid, 1, 0), vf = view(m, first.pid);
    assert_int_equal(vl.swap_outs, 1);
    assert_int_equal(vl.swapped_out, 40 * MB);      /* whole blocks: 2 x 20M >= 30M */
    assert_int_equal(vl.used, 0);
    assert_int_equal(vf.swap_outs, 0);
    assert_int_equal(vf.used, 40 * MB);

    /* The last job is to run: it pages in, and the first, waiting, pages out. */
    sh->rank[slot_of(m, first.pid)] = 2;
    sh->rank[slot_of(m, last.pid)] = 0;
    actor_say(&last, 'r');
    actor_expect(&last, 'i');
    vl = view(m, last.pid);
    vf = view_after(m, first.pid, 1, 0);
    assert_int_equal(vl.swap_ins, 1);
    assert_int_equal(vl.swapped_out, 0);
    assert_int_equal(vl.used, 40 * MB);
    assert_int_equal(vf.swap_outs, 1);
    assert_int_equal(vf.swapped_out, 40 * MB);
    fk_devsum_t s;
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 90 * MB);              /* 50 + 40 + 0 */
    end_three(m, &first, &last, &ask);
}

/* ---- residency --------------------------------------------------------- */

static void test_residency(void **state)
{
    (void)state;
    shm_table_t *m;
    actor_t first, last, ask;
    two_waiting(&m, &first, &last);
    actor_start(&ask, asker, 50);
    actor_say(&ask, 'a');
    actor_expect(&ask, 'o');                              /* `last` paged out */
    view_after(m, last.pid, 1, 0);
    actor_say(&ask, 'f');
    actor_expect(&ask, 'f');
    actor_say(&last, 's');
    actor_expect(&last, 's');
    sh->rank[slot_of(m, first.pid)] = 0;            /* the holder now: never asked */
    sh->rank[slot_of(m, last.pid)] = 1;
    actor_say(&last, 'r');                                /* pages in, in 500 ms */
    actor_expect(&last, 'i');
    /* Within 8 x 500 ms of its page-in, `last` is not asked.  The asker,
     * which does not wait on its own (SALUS_MEM_WAIT_MS=0), waits all the
     * same, since paging will free what it lacks: it gets its memory once
     * the residency is over and `last` is asked again. */
    actor_say(&ask, 'a');
    assert_int_equal(view(m, last.pid).swap_outs, 1);
    actor_expect(&ask, 'o');
    mem_slot_view_t v = view_after(m, last.pid, 2, 1);
    assert_int_equal(v.swap_outs, 2);
    end_three(m, &first, &last, &ask);
}

/* ---- no candidate while its memory cannot come back ----------------------
 * A job paged out for a peer that cannot be paged (paging off) has more out
 * than could come back beside it, whoever else paged out: the scheduler
 * leaves it out of the GPU's candidates (page_blocked_locked) until the
 * peer frees its memory; a job with nothing out never is. */

static int blocked(shm_table_t *m, pid_t pid)
{
    assert_int_equal(shm_lock(m), 0);
    int b = page_blocked_locked(m, 0, slot_of(m, pid));
    shm_unlock(m);
    return b;
}

/* Two waiting jobs of 40M and 20M, the 40M one first to be paged; the
 * monitor's table. */
static shm_table_t *start_pair(actor_t *job, actor_t *other)
{
    actor_start(job, waiting_job, 40);
    actor_expect(job, 'w');
    actor_start(other, waiting_job, 20);
    actor_expect(other, 'w');
    shm_table_t *m = monitor();
    sh->rank[slot_of(m, job->pid)] = 2;             /* paged first */
    sh->rank[slot_of(m, other->pid)] = 1;
    return m;
}

static void finish_three(shm_table_t *m, actor_t *job, actor_t *other, actor_t *ask)
{
    actor_t *all[] = { job, other, ask };
    for (int i = 0; i < 3; i++)
        actor_say(all[i], 'x');
    for (int i = 0; i < 3; i++)
        actor_finish(all[i]);
    shm_close_table(m);
}

static void test_blocked_until_room(void **state)
{
    (void)state;
    actor_t job, other, ask;
    shm_table_t *m = start_pair(&job, &other);
    assert_false(blocked(m, job.pid));
    actor_start(&ask, asker, 70);                   /* 40M free: 30M to page */
    actor_say(&ask, 'a');
    actor_expect(&ask, 'o');
    mem_slot_view_t v = view_after(m, job.pid, 1, 0);
    assert_int_equal(v.swapped_out, 40 * MB);
    /* 40M out, 70M that cannot move: no room on 100M even with `other`
     * (which could move) paged out too. */
    assert_true(blocked(m, job.pid));
    assert_false(blocked(m, other.pid));            /* nothing out */
    actor_say(&ask, 'f');
    actor_expect(&ask, 'f');
    assert_false(blocked(m, job.pid));              /* 40 + 20 fit now */
    actor_say(&job, 'r');
    actor_expect(&job, 'i');
    assert_int_equal(view(m, job.pid).swapped_out, 0);
    finish_three(m, &job, &other, &ask);
}

/* ---- its own limit keeps its memory out ----------------------------------- */

static int gave_up(void *arg)
{
    (void)arg;
    return __atomic_load_n(&sh->give_ups, __ATOMIC_RELAXED) > 0;
}

static void set_limit(shm_table_t *m, pid_t pid, const char *size, mem_limit_change_t *c)
{
    int s = slot_of(m, pid);
    assert_true(s >= 0);
    assert_int_equal(mem_set_limit_table(m, s, shm_slot_gen(m, s), size, 0, c), 0);
}

static void test_own_limit_keeps_it_out(void **state)
{
    (void)state;
    actor_t job, other, ask;
    shm_table_t *m = start_pair(&job, &other);
    actor_start(&ask, asker, 70);                   /* 40M free: 30M to page */
    actor_say(&ask, 'a');
    actor_expect(&ask, 'o');
    assert_int_equal(view_after(m, job.pid, 1, 0).swapped_out, 40 * MB);
    actor_say(&ask, 'f');
    actor_expect(&ask, 'f');
    assert_false(blocked(m, job.pid));              /* 40 + 20 fit now */
    sh->rank[slot_of(m, job.pid)] = 1;              /* other runs after it now: */
    sh->rank[slot_of(m, other.pid)] = 2;            /* a page-in could ask it */
    mem_limit_change_t c;
    set_limit(m, job.pid, "10M", &c);
    assert_int_equal(c.paged_out, 40 * MB);         /* what salus limit says */
    assert_int_equal(c.pages, 1);
    assert_true(blocked(m, job.pid));               /* its limit keeps it out */
    assert_false(blocked(m, other.pid));
    actor_say(&job, 'r');                           /* granted all the same */
    if (!tu_await(gave_up, NULL, 10000))
        fail_msg("the job whose limit keeps its memory out kept the GPU");
    tu_sleep_ms(100);                               /* five slices of its wait */
    assert_int_equal(view(m, other.pid).swap_outs, 0);  /* nobody asked for nothing */
    assert_int_equal(view(m, job.pid).swapped_out, 40 * MB);
    set_limit(m, job.pid, "100%", &c);
    actor_expect(&job, 'i');                        /* raised: it pages in */
    assert_int_equal(view(m, job.pid).swapped_out, 0);
    assert_false(blocked(m, job.pid));
    finish_three(m, &job, &other, &ask);
}

/* ---- killed while paging out -------------------------------------------- */

typedef struct paging_goal {
    shm_table_t *t;
    int slot;
} paging_goal_t;

static int is_paging(void *arg)
{
    paging_goal_t *g = arg;
    mem_slot_view_t v;
    return mem_view_slot(g->t, g->slot, &v) == 0 && v.paging && v.used < 40 * MB;
}

static void test_killed_while_paging_out(void **state)
{
    (void)state;
    shm_table_t *m;
    actor_t first, last, ask;
    two_waiting(&m, &first, &last);
    __atomic_store_n(&sh->stall_out, 1, __ATOMIC_RELAXED);
    actor_start(&ask, asker, 50);
    actor_say(&ask, 'a');
    /* `last` freed its first block and stalls: kill it there. */
    paging_goal_t g = { m, slot_of(m, last.pid) };
    assert_true(tu_await(is_paging, &g, 10000));
    kill(last.pid, SIGKILL);
    assert_int_equal(fk_wait(last.pid, 5000), 128 + SIGKILL);
    __atomic_store_n(&sh->stall_out, 0, __ATOMIC_RELAXED);
    actor_expect(&ask, 'o');                              /* its memory came back by the reap */
    fk_devsum_t d;
    fk_devsum(m, 0, &d);
    assert_int_equal(d.used, 90 * MB);              /* first's 40 + the asker's 50 */
    assert_true(d.committed <= d.budget);
    fk_check_invariants(m);
    actor_say(&first, 'x');
    actor_say(&ask, 'x');
    actor_finish(&first);
    actor_finish(&ask);
    close(last.cmd[1]);
    close(last.rep[0]);
    shm_close_table(m);
}

/* ---- a page-in that lost its tenure --------------------------------------- */

/* The torch_swap hang: a job granted the GPU pages in before it runs and
 * waits for room; a waiter takes the lease from it meanwhile (it looks
 * idle).  Without the lease it runs before no one, so it asks nobody, and
 * unqueued it serves nothing: its page-in must end, its memory still out,
 * so that it waits for the GPU again (before, it waited for good while the
 * new holder ran). */
static void test_page_in_ends_with_the_lease(void **state)
{
    (void)state;
    shm_table_t *m;
    actor_t first, last, ask;
    two_waiting(&m, &first, &last);
    actor_start(&ask, asker, 50);                   /* cannot move: paging off */
    actor_say(&ask, 'a');
    actor_expect(&ask, 'o');
    assert_int_equal(view_after(m, last.pid, 1, 0).swapped_out, 40 * MB);
    /* 10M free; `first` (40M, pageable) runs before `last`, so `last` asks
     * nobody, and is not blocked (first's memory could move). */
    actor_say(&last, 'R');
    assert_false(actor_has_said(&last, 300));       /* it waits for room, holding the GPU */
    __atomic_store_n(&sh->lease_lost, 1, __ATOMIC_RELAXED);
    if (!actor_has_said(&last, 5000)) {
        kill(last.pid, SIGKILL);
        fail_msg("the page-in went on waiting 5 s after its process lost the GPU");
    }
    actor_expect(&last, 'o');
    mem_slot_view_t vl = view(m, last.pid), vf = view(m, first.pid);
    assert_int_equal(vl.swapped_out, 40 * MB);      /* still out: paged in at its next tenure */
    assert_int_equal(vl.swap_ins, 0);
    assert_int_equal(vf.swap_outs, 0);              /* nobody was asked for it */
    assert_int_equal(vf.used, 40 * MB);
    end_three(m, &first, &last, &ask);
}

/* ---- stream captures ------------------------------------------------------
 * A page-out's synchronize and unmaps, and a page-in's copies, would break a
 * stream capture of the process (another of its threads capturing while
 * one waits for the GPU): asked while a capture is open, the waiting job
 * pages nothing out and the asker waits; once the capture ends, the next
 * poll serves it.  A page-in before a tenure waits for the capture's end. */
static void test_paging_waits_for_captures(void **state)
{
    (void)state;
    shm_table_t *m;
    actor_t first, last, ask;
    two_waiting(&m, &first, &last);
    __atomic_store_n(&sh->capturing, 1, __ATOMIC_RELEASE);
    actor_start(&ask, asker, 50);                   /* 20M free: 30M to page */
    actor_say(&ask, 'a');
    assert_false(actor_has_said(&ask, 300));         /* waits: nobody pages during a capture */
    assert_int_equal(view(m, last.pid).swap_outs, 0);
    assert_int_equal(view(m, last.pid).used, 40 * MB);
    __atomic_store_n(&sh->capturing, 0, __ATOMIC_RELEASE);
    actor_expect(&ask, 'o');                         /* served at a poll after the capture */
    assert_int_equal(view_after(m, last.pid, 1, 0).swapped_out, 40 * MB);

    actor_say(&ask, 'f');                            /* room for last to come back */
    actor_expect(&ask, 'f');
    __atomic_store_n(&sh->capturing, 1, __ATOMIC_RELEASE);
    actor_say(&last, 'r');
    assert_false(actor_has_said(&last, 300));        /* its page-in waits for the capture */
    assert_int_equal(view(m, last.pid).swapped_out, 40 * MB);
    __atomic_store_n(&sh->capturing, 0, __ATOMIC_RELEASE);
    actor_expect(&last, 'i');
    mem_slot_view_t vl = view(m, last.pid);
    assert_int_equal(vl.swap_ins, 1);
    assert_int_equal(vl.used, 40 * MB);
    assert_int_equal(__atomic_load_n(&sh->unsafe_in, __ATOMIC_RELAXED), 0);   /* all ended */
    end_three(m, &first, &last, &ask);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_last_pages_first),
        T(test_residency),
        T(test_blocked_until_room),
        T(test_own_limit_keeps_it_out),
        T(test_killed_while_paging_out),
        T(test_page_in_ends_with_the_lease),
        T(test_paging_waits_for_captures),
    };
    return cmocka_run_group_tests_name("memory-page", tests, NULL, NULL);
}
