/*
 * detect.c - the iteration-boundary detector: pure logic, no table, no clock.
 *
 * Divided into: sync tokens (the period of the sequence of syncs); kernel
 * sequences (the period of the launches of a program that never syncs).
 *
 * Sync tokens.  A training loop makes the host wait for the GPU at the same
 * points of every iteration: the loss's .item(), a logging sync, the end of
 * each micro-batch under gradient accumulation.  Between two consecutive
 * host syncs the process launched `launches` kernels whose handles sum (after
 * sched_mix) to `hash`: that pair is the token of the sync.  The token
 * sequence of a loop is periodic; its smallest period p is the number of
 * syncs per iteration, and switching only at one phase of it (the anchor)
 * switches only between whole iterations:
 *   period p is locked at token n  <=>  tok[i] == tok[i-p] for n-p <= i < n
 *                                       (one full repetition), p smallest
 *   boundary at token i            <=>  (i - anchor) mod p == 0
 * The anchor is the rarest token of the period (the optimizer step's sync
 * under accumulation: it comes once, the micro-batch syncs p-1 times), then
 * the one with the most launches, then the largest hash; of its occurrences,
 * the one that ends a run.  A token that breaks the period (phase change:
 * evaluation, a new epoch's warm-up) unlocks it until the next repetition.
 * While no period is known the detector learns: its syncs are no boundaries
 * until SCHED_DET_LEARN of them went by without a period (any period up to
 * SCHED_DET_MAXP shows within that), and every sync is one after that; when
 * a period is found the iterations among the learned syncs are counted.  So
 * a newcomer, or a job after a phase change, is not switched mid-iteration
 * while the detector has not seen its loop twice; the max slice bounds it.  A sync with no
 * launch since the previous one (set-up, a second .item(), the final drain)
 * ends no iteration and is not a token.
 *
 * Kernel sequences.  A program that never syncs (torch.compile graphs, a
 * loop without .item(), one that polls with cuEventQuery) is tracked
 * launch by launch, only while contended: each kernel's gap between its
 * launches, in O(1); the boundary is before a kernel launched once per
 * iteration, found as its section below says.
 */
#include "sched/sched_int.h"

#include <string.h>

/* ---- sync tokens ------------------------------------------------------------ */

void sched_detect_init(sched_detect_t *d, sched_det_mode_t mode)
{
    memset(d, 0, sizeof *d);
    d->mode = mode;
}

static const sched_token_t *tok_at(const sched_detect_t *d, uint64_t i)
{
    return &d->ring[i % SCHED_DET_RING];
}

static int tok_eq(const sched_token_t *a, const sched_token_t *b)
{
    return a->launches == b->launches && a->hash == b->hash;
}

/* a ranks before b as an anchor. */
static int anchor_before(int count_a, const sched_token_t *a, int count_b,
                         const sched_token_t *b)
{
    if (count_a != count_b)
        return count_a < count_b;
    if (a->launches != b->launches)
        return a->launches > b->launches;
    return a->hash > b->hash;
}

/* The anchor's token index for a period p over the last p tokens. */
static uint64_t choose_anchor(const sched_detect_t *d, int p)
{
    uint64_t first = d->n - (uint64_t)p;
    const sched_token_t *best = NULL;
    int best_count = 0;
    for (int j = 0; j < p; j++) {
        const sched_token_t *t = tok_at(d, first + (uint64_t)j);
        int count = 0;
        for (int k = 0; k < p; k++)
            count += tok_eq(t, tok_at(d, first + (uint64_t)k));
        if (!best || anchor_before(count, t, best_count, best)) {
            best = t;
            best_count = count;
        }
    }
    /* Of its occurrences, the last that ends a run (the next token of the
     * period differs); the last one when the whole period is one value. */
    uint64_t pick = d->n - 1;
    for (int j = p - 1; j >= 0; j--) {
        uint64_t i = first + (uint64_t)j;
        uint64_t next = j == p - 1 ? first : i + 1;
        if (tok_eq(tok_at(d, i), best) && (p == 1 || !tok_eq(tok_at(d, next), best))) {
            pick = i;
            break;
        }
    }
    return pick;
}

/* The smallest period the last two repetitions show.  A constant window is
 * period 1's to claim, and period 1 only when the run of identical tokens is
 * longer than any run a different token has ended before: after
 * "A A A A B", four A's in a row are micro-batches, not a loop of A. */
static int find_period(const sched_detect_t *d)
{
    for (int p = 1; p <= SCHED_DET_MAXP; p++) {
        if (d->n < 2 * (uint64_t)p)
            break;
        int ok = 1, constant = 1;
        for (uint64_t i = d->n - (uint64_t)p; i < d->n && ok; i++) {
            ok = tok_eq(tok_at(d, i), tok_at(d, i - (uint64_t)p));
            constant = constant && tok_eq(tok_at(d, i), tok_at(d, d->n - 1));
        }
        if (!ok)
            continue;
        if (p == 1 && d->run <= d->max_run)
            continue;
        if (p > 1 && constant)
            continue;
        return p;
    }
    return 0;
}

static int is_anchor(const sched_detect_t *d, uint64_t i)
{
    return (i - d->anchor) % (uint64_t)d->period == 0;
}

/* A period p found at token i: the iterations that ended while learning are
 * counted now, as if the loop had had this period since learning began. */
static int lock(sched_detect_t *d, int p, uint64_t i)
{
    d->period = p;
    d->anchor = choose_anchor(d, p);
    d->relocked = 1;
    d->locked_at = i;
    if (d->gave_up) {                         /* every sync was counted until now */
        d->gave_up = 0;
        d->learn_from = i;
        d->learn_iters = d->iterations;
        d->iterations += (uint64_t)is_anchor(d, i);
        return is_anchor(d, i);
    }
    uint64_t from = d->learn_from, up = (uint64_t)p;
    uint64_t first = from + (d->anchor + up - from % up) % up;   /* first anchor >= from */
    d->iterations = d->learn_iters + (first <= i ? (i - first) / up + 1 : 0);
    return is_anchor(d, i);
}

/* The period broke at token i.  A period-1 lock that lasted under
 * SCHED_DET_MAXP tokens was the start of a longer loop (micro-batches):
 * learning goes on from where it began and its iterations are counted again
 * at the next lock.  Otherwise the loop changed (evaluation...): learn anew. */
static void unlock(sched_detect_t *d, uint64_t i)
{
    if (d->period == 1 && i - d->locked_at < SCHED_DET_MAXP) {
        d->iterations = d->learn_iters;
    } else {
        d->learn_from = i;
        d->learn_iters = d->iterations;
    }
    d->period = 0;
    d->gave_up = 0;
}

int sched_detect_feed(sched_detect_t *d, sched_token_t tok)
{
    if (tok.launches == 0 && d->mode == SCHED_DET_AUTO)
        return 0;                            /* no work since the last sync */
    uint64_t i = d->n;
    d->ring[i % SCHED_DET_RING] = tok;
    d->n++;
    d->relocked = 0;
    if (d->mode == SCHED_DET_EXPLICIT)
        return 0;
    if (d->mode == SCHED_DET_EVERY) {
        d->iterations++;
        return 1;
    }
    if (i > 0 && tok_eq(tok_at(d, i), tok_at(d, i - 1))) {
        d->run++;
    } else {
        if (d->run > d->max_run)
            d->max_run = d->run;
        d->run = 1;
    }
    if (d->period) {
        if (tok_eq(tok_at(d, i), tok_at(d, i - (uint64_t)d->period))) {
            int b = is_anchor(d, i);
            d->iterations += (uint64_t)b;
            return b;
        }
        unlock(d, i);                        /* phase change: learn again */
    }
    int p = find_period(d);
    if (p)
        return lock(d, p, i);
    if (!d->gave_up && i + 1 - d->learn_from < SCHED_DET_LEARN)
        return 0;                            /* still learning */
    if (!d->gave_up) {                       /* no period: every sync, from here on */
        d->gave_up = 1;
        d->iterations = d->learn_iters + (i - d->learn_from);   /* the syncs spent learning */
    }
    d->iterations++;
    return 1;
}

void sched_detect_hint(sched_detect_t *d)
{
    if (d->mode != SCHED_DET_EXPLICIT) {
        d->mode = SCHED_DET_EXPLICIT;
        d->period = 0;
        d->iterations = 0;
    }
    d->iterations++;
}

/* ---- kernel sequences -------------------------------------------------------
 * Why gaps, not the smallest period of the last launches: a transformer
 * launches the same kernels in each of its layers, so its last launches
 * repeat with a layer's period all through the forward pass, and a boundary
 * there would leave the activations resident.  Each kernel's gap (the
 * launches between its last two) is kept instead, with the list of kernels
 * by last launch.  Kernel K is the anchor, and its gap G the period, when
 *   K's last two gaps agree (within an eighth), and
 *   every kernel still remembered was launched within the last G (and an
 *   eighth) launches (the oldest end of the list),
 * which in a loop holds for a kernel launched once per iteration and for no
 * kernel of a layer: the loop's other kernels (the embedding's, the loss's,
 * the optimizer's) were launched longer ago than a layer.  A longer such
 * gap takes the anchor over (a loop around a sub-loop); the anchor's gap
 * changing, or the anchor forgotten, drops it (a phase change).  A kernel
 * is forgotten once absent for twice its longest gap (a warm-up's loop that
 * ended, a layer's kernels during the backward pass) and, launched only
 * once, after SCHED_KSEQ_HORIZON launches; so any period up to that is found
 * once the loop ran three times (two gaps of its anchor).  Invariant: the
 * list holds exactly the entries whose handle != 0, ordered by `last`. */

void sched_kseq_reset(sched_kseq_t *k)
{
    memset(k, 0, sizeof *k);
}

static sched_kseq_ent_t *kent(sched_kseq_t *k, uint32_t ref)
{
    return ref ? &k->ent[ref - 1] : NULL;
}

static void kseq_unlink(sched_kseq_t *k, sched_kseq_ent_t *e)
{
    uint32_t me = (uint32_t)(e - k->ent) + 1;
    sched_kseq_ent_t *o = kent(k, e->older), *n = kent(k, e->newer);
    if (o)
        o->newer = e->newer;
    if (n)
        n->older = e->older;
    if (k->oldest == me)
        k->oldest = e->newer;
    if (k->newest == me)
        k->newest = e->older;
    e->older = e->newer = 0;
}

static void kseq_forget(sched_kseq_t *k, sched_kseq_ent_t *e)
{
    kseq_unlink(k, e);
    if (k->anchor == e->handle) {
        k->anchor = 0;
        k->period = 0;
    }
    memset(e, 0, sizeof *e);
}

static void kseq_link_newest(sched_kseq_t *k, sched_kseq_ent_t *e)
{
    uint32_t me = (uint32_t)(e - k->ent) + 1;
    e->older = k->newest;
    e->newer = 0;
    if (k->newest)
        k->ent[k->newest - 1].newer = me;
    k->newest = me;
    if (!k->oldest)
        k->oldest = me;
}

/* The entry of `handle`, made (the least recent of its set evicted) if new. */
static sched_kseq_ent_t *kseq_slot(sched_kseq_t *k, uint64_t handle, int *fresh)
{
    size_t set = (size_t)(sched_mix(handle) % (SCHED_KSEQ_SLOTS / SCHED_KSEQ_WAYS));
    sched_kseq_ent_t *ways = &k->ent[set * SCHED_KSEQ_WAYS], *victim = &ways[0];
    for (int w = 0; w < SCHED_KSEQ_WAYS; w++) {
        if (ways[w].handle == handle) {
            *fresh = 0;
            return &ways[w];
        }
        if (!ways[w].handle || (victim->handle && ways[w].last < victim->last))
            victim = &ways[w];
    }
    if (victim->handle)
        kseq_forget(k, victim);
    victim->handle = handle;
    *fresh = 1;
    return victim;
}

static int near(uint64_t a, uint64_t b)
{
    uint64_t hi = a > b ? a : b, lo = a > b ? b : a;
    return hi - lo <= hi / 8;
}

/* Forget the oldest kernels past their time; the oldest one's absence. */
static uint64_t kseq_oldest_absence(sched_kseq_t *k, uint64_t now)
{
    for (sched_kseq_ent_t *o; (o = kent(k, k->oldest)) != NULL;) {
        uint64_t away = now - o->last;
        uint64_t limit = o->maxgap && 2 * o->maxgap < SCHED_KSEQ_HORIZON
                             ? 2 * o->maxgap : SCHED_KSEQ_HORIZON;
        if (away <= limit)
            return away;
        kseq_forget(k, o);
    }
    return 0;
}

#ifdef SALUS_DEBUG
/* The list invariant above, at every push of a debug build; a violation is
 * said once at error level (libsalus never aborts its host). */
static void kseq_check(const sched_kseq_t *k)
{
    static int said;
    uint32_t listed = 0, held = 0;
    uint64_t prev = 0;
    int ordered = 1;
    for (uint32_t r = k->oldest; r && listed <= SCHED_KSEQ_SLOTS; r = k->ent[r - 1].newer) {
        const sched_kseq_ent_t *e = &k->ent[r - 1];
        ordered = ordered && e->handle && e->last >= prev;
        prev = e->last;
        listed++;
    }
    for (int i = 0; i < (int)SCHED_KSEQ_SLOTS; i++)
        held += k->ent[i].handle != 0;
    if (!ordered || listed != held)
        util_log_once(&said, UTIL_LOG_ERROR, "kernel sequence: %u entries listed, %u held, "
                      "%s by last launch (a bug in detect.c)", listed, held,
                      ordered ? "ordered" : "not ordered");
}
#else
static void kseq_check(const sched_kseq_t *k)
{
    (void)k;
}
#endif

void sched_kseq_push(sched_kseq_t *k, uint64_t handle)
{
    if (!handle)
        handle = ~0ull;                      /* 0 marks an empty entry */
    uint64_t i = k->n++;
    int fresh;
    sched_kseq_ent_t *e = kseq_slot(k, handle, &fresh);
    k->at = 0;
    if (!fresh) {
        uint64_t g = i - e->last;
        e->stable = e->gap && near(g, e->gap) ? e->stable + 1 : 0;
        e->gap = g;
        if (g > e->maxgap)
            e->maxgap = g;
        kseq_unlink(k, e);
    }
    e->last = i;
    kseq_link_newest(k, e);
    uint64_t away = kseq_oldest_absence(k, i);
    int steady = e->stable >= 1;
    int covers = steady && away <= e->gap + e->gap / 8;
    if (k->anchor == handle) {
        if (!steady) {
            k->anchor = 0;                   /* its gap changed: a phase change */
            k->period = 0;
        } else {
            k->period = e->gap;
            k->at = covers;                  /* not while a newcomer is in the loop */
        }
    } else if (covers && (!k->anchor || e->gap > k->period + k->period / 8)) {
        k->anchor = handle;
        k->period = e->gap;
        k->at = 1;
    }
    kseq_check(k);
}

int sched_kseq_find(sched_kseq_t *k)
{
    return k->anchor != 0;
}

int sched_kseq_at_anchor(const sched_kseq_t *k)
{
    return k->at;
}
