/*
 * sched_int.h - private to src/sched: the layout of the scheduler's areas in
 * the arbitration table, the process-local state, and what the files of the
 * module offer each other.  Tests include it to drive the pure parts (the
 * detector, the policies) directly.
 *
 * Files, each depending only on those after it (mk/circles.py checks it):
 * gate.c (the process side: registration, the launch slow path, syncs,
 * hints, fork and exit), wait.c (acquiring, waiting, yielding), drain.c
 * (exclusive handoffs: the contexts a process launched into, its drain
 * thread, a new holder's wait for the last one's work), stats.c
 * (histograms, report, monitors), check.c (the invariants), lease.c (the
 * table side: state transitions under the lock, reap and repair), policy.c
 * (the table of policies), policy_<name>.c (each policy), policy_util.c
 * (what they share), detect.c (the boundary detector), config.c (SALUS_*),
 * gang.c (gangs: naming one, its members, whether it can take its devices,
 * its yields), proc.c (the process's state, the driver contract, the clock,
 * failing open).
 */
#ifndef SALUS_SCHED_INT_H
#define SALUS_SCHED_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

/* ---- the slot area (SHM_AREA_SCHED of every slot) ------------------------
 * Owner: the slot's process.  Lines are split by writer so that the owner's
 * fast-path word is not dirtied by its own counters.
 *
 * Invariants (under the table lock, for a slot with magic == SCHED_SLOT_MAGIC):
 *   gate == OPEN      => for every d in devset with a gated policy:
 *                        holder(d) == slot and, if the policy shares,
 *                        waiters(d) == {}
 *   gate == CONTENDED or PROBE => for every such d: holder(d) == slot
 *   (PROBE: OPEN or CONTENDED, whose next launch takes the slow path once)
 *   gate == CLOSED   <=> some such d has holder(d) != slot
 *   grant increases at every grant to this slot (futex word)
 * sched_check_locked (check.c) checks these and the device's below.
 */
#define SCHED_SLOT_MAGIC   0x31484353u    /* "SCH1" */
#define SCHED_HIST_BUCKETS 120
#define SCHED_GANG_NAME    32             /* SALUS_GANG: 1 to 31 characters */

typedef struct sched_slot {
    /* line 0: read by the owner at every launch; written under the lock */
    uint32_t gate;
    uint32_t hold;            /* memory holds the owner's launches while it pages itself
                                 out (sched_hold_for_mem): gate CLOSED; the owner's, under
                                 the lock; futex word of its held threads */
    uint8_t pad0[56];
    /* line 1: the owner's threads sleep on it; bumped under the lock */
    uint32_t grant;
    uint8_t pad1[60];
    /* line 2: written by the owner (relaxed), read by waiting peers */
    uint64_t activity;        /* bumped at the owner's slow paths and syncs */
    uint32_t in_sync;         /* owner threads inside a host-blocking sync */
    uint32_t magic;           /* SCHED_SLOT_MAGIC once set up */
    uint32_t devset;          /* devices the owner uses (bit d); under the lock */
    int32_t  priority;        /* 0..100 */
    uint64_t declared;        /* SALUS_ITERATIONS, 0: unknown */
    uint64_t iterations;      /* iterations done */
    uint64_t iter_ns;         /* mean running time of an iteration, 0: unknown */
    uint64_t boundary_ns;     /* the owner's last iteration boundary */
    uint64_t rest_activity;   /* activity at that boundary: equal => at rest since */
    /* line 3: counters */
    uint64_t held_ns;         /* GPU time of closed tenures (atomic add, any writer) */
    uint64_t waited_ns;       /* owner's threads (atomic add) */
    uint64_t switches;        /* grants from another holder (atomic add) */
    uint64_t handoffs;        /* samples in hist (owner's threads, atomic add) */
    uint64_t wait_since_ns;   /* start of the owner's wait in progress, 0: none */
    uint64_t stopped_ns;      /* seen stopped (SIGSTOP, a debugger) since, 0: not;
                                 set by a peer, cleared by the owner; under the lock */
    uint64_t deadline_ns;     /* SALUS_END_TIME on the sched clock, 0: none; set once */
    uint32_t latency_ms;      /* SALUS_LATENCY_MS, 0: none; written at registration */
    uint32_t length_ms;       /* SALUS_LENGTH_MS, 0: none; written at registration */
    uint64_t host_gap_ns;     /* the owner's host phase after a boundary (the least of
                                 its last samples), 0: unknown (owner, relaxed) */
    /* gangs (gang.c): the job's processes hold their devices together */
    uint64_t gang;            /* sched_gang_id of its name, 0: none; set at registration */
    char gang_name[SCHED_GANG_NAME];   /* for monitors, NUL-terminated; set at registration */
    uint64_t gang_yield;      /* its gang hands over at this many iterations, 0: not
                                 yielding; under the lock */
    uint64_t gang_yield_ns;   /* when that yield was decided; under the lock */
    uint32_t orphan;          /* a member of its gang died: it waits for it forever; under
                                 the lock (set by the reaper) */
    uint32_t switch_us;       /* what the start of its last tenure took before its first
                                 launch (memory paged it in), us; the owner's, relaxed */
    /* the owner's host-blocking sync in progress (relaxed), for blocked holders */
    uint64_t sync_since_ns;   /* its start, 0: none */
    uint64_t sync_obj;        /* the stream or event it waits on (0: the legacy stream) */
    uint32_t sync_kind;       /* SCHED_SYNC_* */
    uint32_t blocked;         /* a waiter found it blocked in that sync (device bit + 1);
                                 cleared by the owner when the sync ends */
    uint64_t vtime[SHM_MAX_DEVICES];   /* weighted GPU time per device; under the lock */
    uint32_t hist[SCHED_HIST_BUCKETS]; /* handoff latency, ns buckets (atomic add) */
    /* the drain (drain.c): a grantor that takes a lease from this slot asks
     * (drain_req, bumped under the lock, futex word of the owner's drain
     * thread); the owner answers with the request it served (drain_done,
     * release store, futex word of the new holder) once every context it
     * launched into is synchronized */
    uint32_t drain_req __attribute__((aligned(64)));
    uint32_t drain_done;
    /* the tools are ending its process (salus-top's kill sent SIGTERM): it
     * goes first and the holder hands over at its next boundary under every
     * policy, since a job that needs the GPU to exit must get it; under the
     * lock (set by the tool; the slot's next claim clears it). */
    uint32_t ending;
    /* the request the owner's drain began serving (release store before
     * its synchronizes): a new holder whose request it names waits for
     * the work queued, however long, up to SCHED_DRAIN_WORK_NS (drain.c) */
    uint32_t drain_busy;
    /* the owner records every launch of a program that does not sync
     * (wait.c, sched_holder_launch): its gate probes (slow) whenever it
     * would be fast, so that no launch escapes the record; the owner's */
    uint32_t kwatch;
} sched_slot_t;

/* The lines the comments above name, where they say: the gate on line 0
 * with the hold word, the grant alone on line 1, the owner's words from
 * line 2, the counters from line 3, the drain words on a line of their
 * own. */
_Static_assert(offsetof(sched_slot_t, gate) == 0, "the gate opens line 0");
_Static_assert(offsetof(sched_slot_t, hold) < 64, "the hold word shares line 0");
_Static_assert(offsetof(sched_slot_t, grant) == 64, "the grant opens line 1");
_Static_assert(offsetof(sched_slot_t, activity) == 128, "the owner's words open line 2");
_Static_assert(offsetof(sched_slot_t, held_ns) == 192, "the counters open line 3");
_Static_assert(offsetof(sched_slot_t, drain_req) % 64 == 0, "the drain words own a line");

/* ---- the device area (SHM_AREA_SCHED of every device) --------------------
 * lease packs holder and generation in one word, so that a reader without
 * the lock (a waiter just woken) sees both or neither:
 *   lease == 0  or  lease == ((uint64_t)gen << 32) | (slot + 1)
 * Invariants (under the lock, when magic == SCHED_DEV_MAGIC):
 *   policy < SCHED_POLICY_COUNT
 *   policy == PACK     => lease == 0 and waiters == {}
 *   lease names (s,g)  => g == gen(s) or the holder is stale (treated as none)
 *   s in waiters       => wait[s].gen == gen(s) or the bit is stale (dropped)
 *   s in waiters       => s is not the holder
 *   lease == granted   (only a grant writes either; a lease word that
 *                       differs was written outside one: lease.c)
 *   vclock never decreases
 * (policy == PACK stands for any policy without SCHED_POL_GATED.)
 */
#define SCHED_DEV_MAGIC 0x31564453u       /* "SDV1" */

/* The limits the layout is sized from, tied to ipc's: a waiter bit per slot,
 * a devset bit per table device. */
#define SCHED_WAIT_WORDS ((SHM_MAX_SLOTS + 63) / 64)
_Static_assert(SCHED_WAIT_WORDS * 64 >= SHM_MAX_SLOTS, "a waiter bit for every slot");
_Static_assert(SHM_MAX_DEVICES <= 32, "devset is a uint32_t: a bit per table device");

typedef struct sched_wait {
    uint32_t gen;             /* the waiter's slot generation */
    uint32_t ticket;          /* arrival order */
} sched_wait_t;

typedef struct sched_dev {
    uint64_t lease;           /* release store under the lock; see above */
    uint64_t since_ns;        /* start of the holder's tenure */
    uint64_t release_ns;      /* when the last grant was made */
    uint64_t switches;        /* grants from one holder to another */
    uint64_t vclock;          /* fair: least virtual time of the active set */
    uint64_t waiters[SCHED_WAIT_WORDS];   /* bit s: slot s waits */
    uint32_t magic;
    uint32_t policy;
    uint32_t quantum_ms;
    uint32_t max_slice_ms;
    uint32_t ticket_next;
    uint32_t fill_us;         /* fair: a host phase worth filling (SALUS_FILL_US), 0: off */
    uint8_t pad[64 - 8 * SCHED_WAIT_WORDS];
    sched_wait_t wait[SHM_MAX_SLOTS];
    /* A drain pending (drain.c): the previous holder (slot + 1, 0: none, and
     * its generation) must answer request drain_seq before the new holder
     * submits; under the lock, read by the new holder with acquire. */
    uint32_t drain_from;
    uint32_t drain_gen;
    uint32_t drain_seq;
    /* The lease word as the last grant wrote it, beside it, under the lock
     * (lease.c, the owner check): lease == granted at every unlock. */
    uint64_t granted;
} sched_dev_t;

_Static_assert(offsetof(sched_dev_t, wait) % 64 == 0,
               "the waiters' records start on a line of their own (pad)");
_Static_assert(sizeof(sched_slot_t) <= SHM_SLOT_AREA_BYTES, "sched slot area");
_Static_assert(sizeof(sched_dev_t) <= SHM_DEVICE_AREA_BYTES, "sched device area");

/* Whether any slot waits for dev (a relaxed look, without the lock). */
static inline int sched_any_waiter(const sched_dev_t *dev)
{
    uint64_t any = 0;
    for (int i = 0; i < SCHED_WAIT_WORDS; i++)
        any |= util_load_relaxed(&dev->waiters[i]);
    return any != 0;
}

/* ---- configuration (config.c) --------------------------------------------- */
/* Defaults: the one list of variables (util/vars.h) holds them. */
#define SCHED_QUANTUM_MS_DEFAULT    ((uint32_t)util_vars[UTIL_VAR_QUANTUM_MS].def)
#define SCHED_MAX_SLICE_MS_DEFAULT  ((uint32_t)util_vars[UTIL_VAR_MAX_SLICE_MS].def)
#define SCHED_FILL_US_DEFAULT       ((uint32_t)util_vars[UTIL_VAR_FILL_US].def)
#define SCHED_PRIORITY_DEFAULT      ((int)util_vars[UTIL_VAR_PRIORITY].def)

typedef struct sched_config {
    sched_policy_t policy;       /* SALUS_POLICY, default fair */
    int policy_given;            /* set explicitly */
    uint32_t quantum_ms;         /* SALUS_QUANTUM_MS */
    uint32_t max_slice_ms;       /* SALUS_MAX_SLICE_MS */
    uint32_t fill_us;            /* SALUS_FILL_US */
    int priority;                /* SALUS_PRIORITY */
    uint32_t latency_ms;         /* SALUS_LATENCY_MS, 0: none */
    uint64_t iterations;         /* SALUS_ITERATIONS, 0: unknown */
    uint32_t length_ms;          /* SALUS_LENGTH_MS, 0: unknown */
    int64_t end_time_s;          /* SALUS_END_TIME (Unix seconds), 0: none */
    int iter_sync_every;         /* SALUS_ITER_SYNC=every */
    char gang[SCHED_GANG_NAME];  /* the gang (SALUS_GANG or the launcher's), "": none */
} sched_config_t;

/* Read every variable; bad values are said once and their default kept. */
void sched_config_read(sched_config_t *out);
/* SALUS_END_TIME on the sched clock whose time is `now`; 0: none. */
uint64_t sched_config_deadline(const sched_config_t *c, uint64_t now);

/* ---- the boundary detector (detect.c): pure logic --------------------------
 * Tokens (launches, hash sum) between consecutive host syncs; the smallest
 * period of the token sequence and a consistent phase in it. */
#define SCHED_DET_RING  64
#define SCHED_DET_MAXP  16
#define SCHED_DET_LEARN (2 * SCHED_DET_MAXP)   /* syncs to find a period in */

typedef enum { SCHED_DET_AUTO, SCHED_DET_EVERY, SCHED_DET_EXPLICIT } sched_det_mode_t;

typedef struct sched_detect {
    sched_det_mode_t mode;
    sched_token_t ring[SCHED_DET_RING];
    uint64_t n;               /* tokens fed */
    int period;               /* 0: none known */
    uint64_t anchor;          /* token index of a boundary of the period */
    uint64_t learn_from;      /* first token of the learning (no period) phase */
    uint64_t learn_iters;     /* iterations counted before it */
    uint64_t locked_at;       /* token at which the period was found */
    uint64_t run, max_run;    /* identical tokens in a row; the longest run broken */
    int gave_up;              /* learning ended without a period: every sync */
    uint64_t iterations;      /* boundaries so far, learned ones included */
    int relocked;             /* set by feed when a period was (re)found */
} sched_detect_t;

void sched_detect_init(sched_detect_t *d, sched_det_mode_t mode);
/* One host sync ended with this token: 1 if it ends an iteration. */
int  sched_detect_feed(sched_detect_t *d, sched_token_t tok);
/* An explicit boundary (salus_iteration_end): switches to EXPLICIT mode. */
void sched_detect_hint(sched_detect_t *d);

/* Kernel sequences, for programs that never sync: handles launched while
 * contended, each with the launches between its last two (its gap); the
 * loop's period is the gap of a kernel launched once per iteration, and
 * boundaries fall before that kernel (detect.c says why a layer's kernels,
 * repeated within the iteration, are never taken for it).  O(1) a launch. */
#define SCHED_KSEQ_SLOTS   2048       /* handles remembered: 4-way, by hash */
#define SCHED_KSEQ_WAYS    4
#define SCHED_KSEQ_ONCE    1024       /* a kernel never launched again is forgotten
                                         after this many launches */
#define SCHED_KSEQ_HORIZON 8192       /* every kernel after this many: the longest
                                         period found */

typedef struct sched_kseq_ent {
    uint64_t handle;          /* 0: empty */
    uint64_t last;            /* index of its last launch */
    uint64_t gap;             /* launches between its last two, 0: launched once */
    uint64_t maxgap;          /* the longest gap it had */
    uint32_t stable;          /* consecutive gaps within an eighth of each other */
    uint32_t older, newer;    /* the list by last launch: entry index + 1, 0: none */
} sched_kseq_ent_t;

typedef struct sched_kseq {
    sched_kseq_ent_t ent[SCHED_KSEQ_SLOTS];
    uint32_t newest, oldest;  /* ends of the list by last launch (index + 1) */
    uint64_t n;               /* handles pushed */
    uint64_t anchor;          /* the handle launched once per iteration, 0: none */
    uint64_t period;          /* its gap: launches per iteration, 0: none known */
    int at;                   /* the kernel last pushed is the anchor, at a boundary */
} sched_kseq_t;

void sched_kseq_reset(sched_kseq_t *k);
/* Record the kernel about to be launched (O(1)); finds, keeps or drops the
 * anchor. */
void sched_kseq_push(sched_kseq_t *k, uint64_t handle);
/* 1 if a period is known. */
int  sched_kseq_find(sched_kseq_t *k);
/* 1 if the kernel last pushed starts an iteration (the anchor phase). */
int  sched_kseq_at_anchor(const sched_kseq_t *k);

/* ---- policies (policy*.c): pure logic over a view ----------------------------
 * The lease code builds a view of one device from the table (validated) and
 * asks its policy; tests build views by hand, with any clock. */
#define SCHED_WEIGHT_UNIT 51u     /* weight of the default priority */
/* The host gap a slot shows is the least of its last few samples: a holder
 * descheduled after a boundary (a loaded machine) lengthens one sample, never
 * all of them, while a loop's host phase is in every one. */
#define SCHED_GAP_SAMPLES 4
/* Under fair (and between equals under priority and srtf) a holder keeps
 * the GPU at least this many times what the start of its tenure cost (a
 * page-in, the wait for peers to page out for it), beyond its quantum: the
 * quantum grows with what a switch costs, so that switches take at most
 * about 1 / (1 + factor) of the GPU's time however many jobs share it. */
#define SCHED_SWITCH_FACTOR 8
#define SCHED_REMAINING_UNKNOWN UINT64_MAX

typedef struct sched_cand {
    int slot;
    int priority;                 /* 0..100 */
    uint32_t ticket;              /* arrival order */
    uint64_t vtime;               /* weighted GPU time on the device */
    uint64_t remaining_ns;        /* srtf; SCHED_REMAINING_UNKNOWN */
    int measured;                 /* srtf: iteration time known */
    int declared;                 /* srtf: SALUS_ITERATIONS given */
    uint64_t left;                /* srtf: declared iterations not done yet */
    uint32_t latency_ms;          /* SALUS_LATENCY_MS: served first, 0: not */
    uint64_t host_gap_ns;         /* its host phase after a boundary, 0: unknown */
    uint64_t switch_ns;           /* what its last tenure's start cost (switch_us) */
} sched_cand_t;

typedef struct sched_view {
    uint64_t now;
    uint64_t quantum_ns;
    uint64_t fill_ns;             /* fair: a holder's host phase worth filling, 0: off */
    int has_holder;
    sched_cand_t holder;
    uint64_t held_ns;             /* the holder's current tenure */
    int n;
    sched_cand_t waiters[SHM_MAX_SLOTS];
} sched_view_t;

#define SCHED_POL_GATED  1u       /* launches wait for a lease */
#define SCHED_POL_SHARES 2u       /* the holder yields (quantum, idle, max slice) */

typedef struct sched_policy_ops {
    unsigned flags;
    /* The waiter to grant next (index into waiters), -1: none. */
    int (*pick)(const sched_view_t *v);
    /* At a boundary of the holder, with `pick` chosen: 1 to hand over now. */
    int (*yield)(const sched_view_t *v, int pick);
    /* Memory's admission of two jobs that have not run yet (rank.c): <0 a
     * first, >0 b first, 0 arrival decides.  NULL: arrival order. */
    int (*admit)(const sched_cand_t *a, const sched_cand_t *b);
} sched_policy_ops_t;

/* Never NULL: an out-of-range policy gets fair's (policy.c). */
const sched_policy_ops_t *sched_policy_ops(unsigned policy);
/* Each policy's ops, defined in its own policy_<name>.c. */
#define SCHED_POLICY_OPS_DECL_(id, name, ops, help) extern const sched_policy_ops_t ops;
SCHED_POLICIES(SCHED_POLICY_OPS_DECL_)
#undef SCHED_POLICY_OPS_DECL_

/* Shared by the policies (policy_util.c). */
int  sched_ticket_before(uint32_t a, uint32_t b);      /* arrival order, wrap-safe */
int  sched_never_yield(const sched_view_t *v, int pick);
uint32_t sched_weight(int priority);
uint64_t sched_vtime_charge(int priority, uint64_t held_ns);
uint64_t sched_holder_vtime(const sched_view_t *v);   /* including the tenure */
int  sched_fair_before(const sched_cand_t *a, const sched_cand_t *b);
/* Latency-sensitive waiters (SALUS_LATENCY_MS) go first, in arrival order:
 * 1 a first, -1 b first, 0 neither is, or both are (the policy decides). */
int  sched_latency_order(const sched_cand_t *a, const sched_cand_t *b);
int  sched_fair_pick(const sched_view_t *v);
int  sched_fair_yield(const sched_view_t *v, int pick);
/* The holder has held the GPU SCHED_SWITCH_FACTOR times what the start of
 * its tenure cost: it may yield (fair's quantum and fill both wait for it). */
int  sched_switch_paid(const sched_view_t *v);

/* ---- the process (gate.c) ------------------------------------------------- */
/* SUSPENDED: the table's lock timed out (a hung peer inside it); launches
 * pass and the process retries (gate.c, sched_resume_try).  NOSLOT: every
 * slot of the table was taken when it registered; launches pass and it
 * claims one once one is free (gate.c's join_try; p->t is its table,
 * p->slot -1).  OPEN is for good. */
typedef enum {
    SCHED_P_UNREG = 0, SCHED_P_ACTIVE, SCHED_P_OPEN, SCHED_P_EXITING, SCHED_P_SUSPENDED,
    SCHED_P_NOSLOT
} sched_pstate_t;

typedef struct sched_proc {
    pthread_mutex_t mu;           /* everything below but the atomics */
    sched_pstate_t state;         /* atomic reads on the slow paths */
    sched_config_t cfg;
    shm_table_t *t;
    int slot;
    uint32_t gen;
    sched_slot_t *me;
    uint32_t hold;                /* memory holds the launches (sched_hold_for_mem): the
                                     held threads' futex word, atomic; me->hold mirrors it
                                     for the gate, and only this word is waited on */
    uint32_t devset;              /* mirror of me->devset */
    uint64_t joined;              /* bit o: CUDA ordinal o's device joined (devset) */
    sched_detect_t det;
    sched_kseq_t kseq;
    int kseq_on;                  /* recording every launch (a program that does not sync) */
    uint64_t waiter_seen_ns;      /* a holder's launch last saw a waiter (under mu) */
    uint64_t last_boundary_ns;    /* 0: none yet */
    uint64_t waited_mark_ns;      /* waited_ns at the last boundary */
    uint64_t iter_sum_ns, iter_count;
    uint64_t last_sync_ns;        /* end of the last host sync, 0: none yet */
    uint64_t registered_ns;       /* when the process registered */
    uint64_t gaps[SCHED_GAP_SAMPLES];   /* the last host gaps after boundaries */
    uint64_t switch_acc_ns;       /* tenure starts that lost the lease while paging in:
                                     added to the one that keeps it (switch_us) */
    uint32_t gap_n;               /* samples taken */
    uint32_t gap_opened;          /* phases opened alone (atomic): one in SCHED_GAP_EVERY sampled */
    uint64_t gap_from_ns;         /* a host phase to sample began (atomic), 0: none */
    uint64_t gap_activity;        /* me->activity then (atomic): unchanged = still in it */
    uint64_t suspended_ns;        /* SUSPENDED since (atomic) */
    uint64_t retry_ns;            /* SUSPENDED: next try of the lock (atomic) */
    uint64_t backoff_ns;          /* SUSPENDED: the wait after a failed try */
    uint32_t settling;            /* threads inside settle_probe (gate.c; seq_cst): its
                                     gate may read OPEN with waiters until it settles */
    int handlers_made;
} sched_proc_t;

/* (proc.c) The process's state; what every file of the module shares. */
extern sched_proc_t sched_p;
/* The driver contract given to sched_init (NULL: none), acquire loads. */
const drv_t *sched_drv(void);
/* Whether sched_init was called (else the module is dormant). */
int sched_enabled(void);
uint64_t sched_now(void);
/* The clock to a tick (1-4 ms, never ahead of sched_now), for thresholds of
 * milliseconds and more: a fifth of sched_now's cost (proc.c). */
uint64_t sched_now_coarse(void);
/* The gate word every thread of the process follows once registered:
 * sched_gate_unreg before, the slot's gate, or the OPEN word after a
 * fail-open or at exit (release store; acquire load). */
const uint32_t *sched_proc_gate(void);
void sched_set_proc_gate(const uint32_t *gate);
void sched_proc_gate_open(void);
/* Fail open for good: said once; launches pass from now on. */
void sched_fail_open(sched_proc_t *p, const char *why);
/* The table's lock failed with err: a time-out suspends scheduling (said
 * once; launches pass until sched_resume_try gets the lock again), any
 * other error fails open for good. */
void sched_lock_failed(sched_proc_t *p, int err);
/* Registration found every slot of t taken: unscheduled (NOSLOT) until
 * gate.c's join_try claims one, retried with a backoff (proc.c). */
void sched_no_slot(sched_proc_t *p, shm_table_t *t);
#define SCHED_RETRY_MIN_NS  (100ull * 1000000)
#define SCHED_RETRY_MAX_NS  (5000ull * 1000000)
/* A fork child has no capture in progress. */
void sched_captures_reset(void);
/* The registered hooks (sched_set_hooks), each run if set. */
void sched_hook_boundary(void);
void sched_hook_waiting(void);
uint64_t sched_hook_tick(void);
void sched_hook_tenure(int d);
int sched_hook_paged_out(void);
int sched_hook_fits(int d);
int sched_hook_keep_locked(shm_table_t *t, int d, int slot);
int sched_hook_blocked_locked(shm_table_t *t, int d, int slot);

/* ---- access (every file): the areas, a lease word ------------------------ */
#define SCHED_NO_SLOT (-1)
#define SCHED_RELEASE (-2)        /* sched_decide_locked: free the device */
#define SCHED_PICK    (-3)        /* sched_hand_over: the policy's pick */

static inline sched_slot_t *sched_slot(shm_table_t *t, int slot)   /* NULL: bad index */
{
    return shm_slot_area(t, slot, SHM_AREA_SCHED);
}

static inline sched_dev_t *sched_dev(shm_table_t *t, int device)   /* NULL: bad index */
{
    return shm_device_area(t, device, SHM_AREA_SCHED);
}

/* Table device `device`'s area once the scheduler has set it up (its magic,
 * read with acquire: the words written before it are seen), or NULL (a bad
 * index, a device nobody scheduled yet, a scribbled magic). */
static inline sched_dev_t *sched_dev_ready(shm_table_t *t, int device)
{
    sched_dev_t *dev = sched_dev(t, device);
    return dev && util_load_acquire(&dev->magic) == SCHED_DEV_MAGIC ? dev : NULL;
}
/* Each such device of t, in index order, as d and dev:
 *   sched_dev_t *dev;
 *   SCHED_FOR_EACH_DEV(t, d, dev) { ... }   (continue and break work) */
#define SCHED_FOR_EACH_DEV(t, d, dev)                                            \
    for (int d = 0; d < SHM_MAX_DEVICES; d++)                                    \
        if (((dev) = sched_dev_ready((t), d)) != NULL)

static inline uint64_t sched_lease_of(int slot, uint32_t gen)
{
    return ((uint64_t)gen << 32) | (uint64_t)(uint32_t)(slot + 1);
}

/* The holder named by a lease word if it is current, else SCHED_NO_SLOT. */
static inline int sched_lease_holder(shm_table_t *t, uint64_t lease)
{
    uint32_t lo = (uint32_t)lease, gen = (uint32_t)(lease >> 32);
    if (lo == 0 || lo > SHM_MAX_SLOTS || gen == 0)
        return SCHED_NO_SLOT;
    int slot = (int)lo - 1;
    return shm_slot_gen(t, slot) == gen ? slot : SCHED_NO_SLOT;
}

/* How long `slot` has held dev's lease in its tenure at `now`; 0: it does
 * not hold it.  What fair and srtf charge adds this to the closed tenures
 * (sched_slot_t.held_ns). */
static inline uint64_t sched_tenure_ns(shm_table_t *t, sched_dev_t *dev, int slot, uint64_t now)
{
    if (sched_lease_holder(t, util_load_acquire(&dev->lease)) != slot)
        return 0;
    uint64_t since = util_load_relaxed(&dev->since_ns);
    return now > since ? now - since : 0;
}

/* ---- gangs (gang.c): under the table lock unless said ---------------------
 * The processes of one distributed job (a gang) hold the leases of their
 * devices together: a member is granted a device only when every device of
 * every member is free or its gang's, and then the gang gets them all at
 * once; a gang that yields hands every device over at one boundary of its
 * iterations.  docs/design.md argues why no cycle of waits can form. */

/* The launchers whose variables name a gang, in order of precedence (after
 * an explicit SALUS_GANG): the first rule whose variables are set, and
 * whose size is more than one process, names it
 * "<prefix>:<id>[<sep><with>][:w<size>][:r<gen>]".  The one list: the
 * naming walks it, and its test checks that libsalus(7) names each
 * variable. */
typedef struct sched_gang_rule {
    const char *prefix;       /* the name's first word */
    const char *id[3];        /* the job: the first of these set (NULL ends) */
    const char *not_id;       /* a value of id that names no job, or NULL */
    const char *with;         /* also needed, part of the name, or NULL */
    char sep;                 /* between id and with */
    const char *size[2];      /* its processes: the first set, a number > 1;
                                 size[0] NULL: no size is visible (any count) */
    const char *gen;          /* its generation when set (a restart's), or NULL */
} sched_gang_rule_t;
extern const sched_gang_rule_t sched_gang_rules[];
extern const int sched_gang_rule_count;

/* The gang named by the environment (`get` is getenv, or a test's): 0 and
 * buf set, or -1 (none: SALUS_GANG=off or none, no launcher's rule holds).
 * Explicit SALUS_GANG first, then sched_gang_rules in order.  A name longer
 * than len - 1 keeps its start and ends in "~" and a hash of the whole, so
 * that two long names never merge. */
int  sched_gang_name(const char *(*get)(const char *), char *buf, size_t len);
/* A gang's id in the table: a hash of its name, never 0. */
uint64_t sched_gang_id(const char *name);
/* Whether `slot` may be granted device d now: 1 when it has no gang, or when
 * its gang is not yielding and every other device of its members is free,
 * or held by a member, or by a member of gang `except` (a holder's gang
 * deciding whether to yield: what it holds would be handed over).  A member
 * of a yielding gang that has reached the yield's count is not a candidate
 * until the whole gang has handed over; one short of it is (it lost its
 * device on the way, at rest or idle, and its peers wait for its work).  A
 * yield decided more than slice_ns ago is abandoned (a member that counts its
 * iterations otherwise never reaches it): the gang may be granted again. */
int  sched_gang_can_take_locked(shm_table_t *t, int slot, int d, uint64_t except,
                                uint64_t now, uint64_t slice_ns);
/* With d granted to `slot`: the other devices its gang is granted at once
 * (free ones, each to a member that uses it, a waiting one first). */
typedef struct sched_gang_grant {
    int slot, dev;
} sched_gang_grant_t;
int  sched_gang_rest_locked(shm_table_t *t, int slot, int d, sched_gang_grant_t *out, int cap);
/* The devices the members of `gang` hold, but `except`'s. */
int  sched_gang_held_locked(shm_table_t *t, uint64_t gang, int except, sched_gang_grant_t *out,
                            int cap);
/* 1 when slot's gang holds part of its devices while a process outside it
 * holds another (a member that joined a device after the gang's grant, a
 * takeover): it cannot run through, so its devices go to their waiters. */
int  sched_gang_partial_locked(shm_table_t *t, int slot);
/* 1 when a member of slot's gang is dead and not yet reaped (a record-lock
 * test per member: at waiters' looks only). */
int  sched_gang_dead_locked(shm_table_t *t, int slot);
/* The members of slot's gang (slot included), for their gates; 0 without a gang. */
int  sched_gang_members_locked(shm_table_t *t, int slot, int *out, int cap);
/* The holder `slot` is to yield by policy at a boundary: its gang yields at
 * one boundary of its members' iterations (gang.c says which).  1 if `slot`
 * hands over now (its gang yields here, or it has none).  A yield older
 * than slice_ns is abandoned, here and below. */
int  sched_gang_yield_locked(shm_table_t *t, int slot, uint64_t now, uint64_t slice_ns);
/* 1 when slot's gang is yielding and slot has reached the boundary (it
 * hands over whatever the policy says). */
int  sched_gang_due_locked(shm_table_t *t, int slot, uint64_t now, uint64_t slice_ns);
/* After a member of a yielding gang gave a device up: the yield ends (the
 * gang may be granted again) once no member holds one.  1 if it ended. */
int  sched_gang_settle_locked(shm_table_t *t, int slot);
/* A gang's standing is its members': the highest priority among them. */
int  sched_gang_priority_locked(shm_table_t *t, int slot, int priority);

/* ---- the lease (lease.c): under the table lock unless said ---------------- */
/* A usable policy number of a device (fair when the word is corrupt). */
sched_policy_t sched_dev_policy(const sched_dev_t *dev);

/* The small words both sides of the lease read (wait.c, yield.c). */
/* The table lock, or -1 having suspended the process (said once). */
static inline int sched_lock_or_fail(sched_proc_t *p)
{
    int rc = shm_lock(p->t);
    if (rc == 0)
        return 0;
    sched_lock_failed(p, rc);
    return -1;
}

static inline int sched_dev_ungated(const sched_dev_t *dev)
{
    return !(sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_GATED);
}

static inline int sched_dev_shares(const sched_dev_t *dev)
{
    return (sched_policy_ops(sched_dev_policy(dev))->flags & SCHED_POL_SHARES) != 0;
}

static inline uint64_t sched_my_lease(const sched_proc_t *p)
{
    return sched_lease_of(p->slot, p->gen);
}
uint64_t sched_dev_max_slice_ns(const sched_dev_t *dev);
/* Fair's host phase worth filling on the device, 0: off. */
uint64_t sched_dev_fill_ns(const sched_dev_t *dev);
/* Time since the holder `slot` of d last reached a boundary in its tenure. */
uint64_t sched_since_boundary(shm_table_t *t, int d, int slot, uint64_t now);

/* Set up table device d's scheduler area with the caller's config if new (or
 * say once that its policy differs from SALUS_POLICY). */
void sched_dev_setup_locked(shm_table_t *t, int d, const sched_config_t *cfg);
void sched_gate_update_locked(shm_table_t *t, int slot);
/* Every user of device d's gate (a policy change). */
void sched_gate_update_users_locked(shm_table_t *t, int d);
/* Add `slot` to the device's waiters (idempotent), its vtime lifted to the
 * active set's least; the holder's gate becomes CONTENDED. */
void sched_enqueue_locked(shm_table_t *t, int d, int slot, uint64_t now);
void sched_dequeue_locked(shm_table_t *t, int d, int slot);
/* Lift a slot's vtime on d to the active set's least (joining, waking up). */
void sched_vtime_lift_locked(shm_table_t *t, int d, int slot, uint64_t now);
/* Build the view of a device, dropping stale waiters and leaving out
 * stopped ones (they cannot use the GPU until they continue). */
void sched_view_build_locked(shm_table_t *t, int d, uint64_t now, sched_view_t *v);
/* What the policies see of one slot on device d (lease.c), under the lock. */
void sched_cand_fill_locked(shm_table_t *t, int slot, int d, uint64_t now, sched_cand_t *c);
/* Hand device d to `to` (may be SCHED_NO_SLOT: free it); ends the current
 * tenure.  Wakes `to` when wake is set (else the caller wakes it after the
 * unlock with sched_wake). */
void sched_grant_locked(shm_table_t *t, int d, int to, uint64_t now, int wake);
void sched_wake(shm_table_t *t, int slot);
/* Whether the holder `slot` hands device d over now, and to whom
 * (SCHED_NO_SLOT: it keeps it; SCHED_RELEASE: it frees it, its gang
 * yielding).  boundary: the policy decides; any point: a holder that
 * reached no boundary for the max slice (in this tenure) hands over. */
int  sched_decide_locked(shm_table_t *t, int d, int slot, int boundary, uint64_t now);
/* Whether the holder of d, at rest after its boundary, hands d over now by
 * its policy's rule (never for a gang member). */
int  sched_rest_yield_locked(shm_table_t *t, int d, uint64_t now);
/* (wait.c) The holder hands device d to `to` (a slot, SCHED_RELEASE, or
 * SCHED_PICK: the policy's pick), its own work drained on this thread
 * before the new holder is woken.  Called with the table lock held; returns
 * with it released, and the grantee. */
int  sched_hand_over(sched_proc_t *p, int d, int to);
/* The holder of d was stopped from `stopped_ns` on (a waiter saw it): mark
 * it stopped, leave the stop out of its tenure (a stop is not GPU time), and
 * grant d by policy.  Returns the grantee. */
int  sched_take_from_stopped_locked(shm_table_t *t, int d, uint64_t stopped_ns, uint64_t now);
/* The holder of d did no GPU work from idle_ns on (a waiter saw it): grant
 * d by policy, the tenure charged up to idle_ns.  Returns the grantee. */
int  sched_take_from_idle_locked(shm_table_t *t, int d, uint64_t idle_ns, uint64_t now);
/* The calling process runs again: clear its stopped mark (under the lock). */
void sched_unmark_stopped_locked(shm_table_t *t, int slot);
/* Grant a free or stale lease to the policy's pick. Returns the grantee. */
int  sched_grant_pick_locked(shm_table_t *t, int d, uint64_t now, int wake);
/* Hooks given to ipc. */
void sched_reap_hook(shm_table_t *t, int slot, void *slot_area, void *ctx);
void sched_repair_hook(shm_table_t *t, void *ctx);

/* ---- invariants (check.c): under the table lock --------------------------- */
/* NULL when the invariants of the slot and device areas (above) hold for
 * every device set up and every claimed slot set up; else a description of
 * the first violation (a per-thread buffer, valid until the next call).
 * Never repairs, logs or aborts.  The hook is the same, for ipc's lock and
 * unlock in a debug build. */
const char *sched_check_locked(shm_table_t *t);
const char *sched_check_hook(shm_table_t *t, void *ctx);
/* The same for one claimed slot's gate (the owner's look at its own slot,
 * drain.c, in every build). */
const char *sched_check_slot_locked(shm_table_t *t, int slot);

/* ---- acquiring and yielding (wait.c) --------------------------------------- */
/* The lease of device d for the calling process: returns when it holds it,
 * the device is under pack, or scheduling failed open. */
void sched_acquire(sched_proc_t *p, int d);
/* At a sync or boundary of the process: hand over what policy says to
 * (and drain).  boundary: this sync ends an iteration. */
void sched_yield_point(sched_proc_t *p, int boundary);
/* Launch slow path of a holder with waiters, PROBEd (kernel boundaries, max
 * slice).  1 when it should stay PROBEd: a program that does not sync, whose
 * kernel sequence is being learnt. */
int  sched_holder_launch(sched_proc_t *p, int d, uint64_t handle);
/* Make the slot's gate PROBE if it is CONTENDED (a waiter's look, no lock:
 * a probe lost to a race is made again at the next look). */
void sched_probe(sched_slot_t *s);
/* At the owner's boundary: PROBE if OPEN or CONTENDED, so that its first
 * launch since shows in its activity (a waiter's "at rest" relies on it). */
void sched_probe_boundary(sched_slot_t *s);
/* The holder's launch looked: its gate as the leases make it, PROBE cleared. */
void sched_gate_settle_locked(shm_table_t *t, int slot);
/* Give up every lease (exit). */
void sched_release_all(sched_proc_t *p);

/* ---- the drain (drain.c) ----------------------------------------------------
 * No work of a new holder reaches a device before the previous holder's
 * work there has finished (drain.c carries the ordering argument). */
/* The slow path of a launch: remember the context it runs in, its
 * stream's (the contexts a drain synchronizes); NULL: none known. */
void sched_drain_note_context(CUcontext ctx);
/* Synchronize every context the process launched into, twice; none while
 * a capture is in progress or beginning, checked before each synchronize
 * (drain.c's ordering argument): -1 when one was deferred so, else 0. */
int  sched_drain_self(void);
/* A test's seam: fn runs between the drain's two passes (NULL: none). */
void sched_drain_set_seam(void (*fn)(void));
/* Start the process's drain thread (at registration; again in a fork child). */
void sched_drain_start(sched_proc_t *p);
/* A fork child has no drain thread and no contexts yet. */
void sched_drain_reset(void);
/* The new holder of d, before its first submission: wait until the drain
 * pending on d is done, its process dead or stopped, or the bound passed
 * (drain.c: SCHED_DRAIN_WORK_NS once the drain began, SCHED_DRAIN_MAX_NS
 * before that or for a blocked holder; said once); the tenure then starts,
 * and the previous holder is charged up to it.  1 if it had to wait for that (a drain already answered, or
 * the process's own, costs no waiting), else 0. */
int  sched_drain_await(sched_proc_t *p, int d);
/* Serve the drain requests made of the process (its slot `me`) so far:
 * drain, then answer (by a holder that has just yielded, and by the drain
 * thread).  0 when served, -1 when a capture is open (the drain thread
 * serves it at the capture's end). */
int  sched_drain_serve(sched_slot_t *me);
/* The process's look at its own slot (drain.c): a stray write that spoils
 * it (its state word, its magic, its gate) would let it launch while its
 * peers wait, or keep them waiting for it.  The drain thread looks at each
 * of its wakes (at most a second apart, and at once when a waiter nudges
 * it: sched_nudge_owner); the holder also looks at its yield points.
 * Spoiled: it gives every lease it holds to the policy's pick, leaves every
 * queue and fails open, saying so once.  1 when spoiled (the lock is
 * released then), 0 when not (the lock is still held). */
int  sched_own_slot_spoiled_locked(sched_proc_t *p);
/* Without the lock: look, and give up if spoiled (the drain thread). */
void sched_own_slot_look(sched_proc_t *p);
/* A waiter found the lease word `lease` stale while its slot's process may
 * live, or that holder's gate fast while it waits: wake that slot's drain
 * thread, which looks at its own slot (no grant, no request). */
void sched_nudge_owner(shm_table_t *t, uint64_t lease);
/* (blocked.c) A waiter on d says what keeps holder h: blocked in one sync
 * past the max slice (once per sync, its `blocked` mark set), or stopped
 * while the waiter's paged-out memory has no room but the stopped one's
 * (the caller says it once per stop). */
void sched_note_blocked(sched_proc_t *p, int d, int h);
void sched_note_stopped_paged(sched_proc_t *p, int d, int h);
/* (lease.c) Under the lock: a lease word of d that is not what the last
 * grant wrote (granted) was written outside a grant; the grant's holder
 * gets it back (none when that one is gone), said once.  1: it was. */
int  sched_lease_own_check_locked(shm_table_t *t, int d);
/* (lease.c) Under the lock, at a grant of d away from `from`: ask it to
 * drain, unless an earlier holder's drain is still pending on d. */
void sched_drain_mark_locked(shm_table_t *t, int d, int from);
/* (lease.c) The calling thread's grants away from `slot` (-1: none) are
 * drained by that thread itself: they do not wake its drain thread. */
void sched_grant_self_drain(int slot);

/* ---- counters (stats.c) ----------------------------------------------------- */
int  sched_hist_bucket(uint64_t ns);
uint64_t sched_hist_value(int bucket);    /* a representative ns of the bucket */
void sched_hist_add(sched_slot_t *s, uint64_t ns);
/* The q-quantile (0..1) of a histogram, in ns; 0 when empty. */
uint64_t sched_hist_quantile(const uint32_t *hist, double q);

#endif /* SALUS_SCHED_INT_H */
