/*
 * stats.c - the scheduler's counters: handoff-latency histograms, the
 * report's fields, and validated copies of slots and devices for monitors.
 *
 * Divided into: histograms; the report; monitors.
 *
 * Histograms are log-linear over nanoseconds: four buckets per power of two
 * (values within 12.5% of their bucket's midpoint), from 0 to about 1 s, the
 * last bucket taking everything above.  A slot's histogram is written by its
 * owner's threads (atomic adds, after each wake by a grant); readers take
 * relaxed loads.
 *
 * No lock: everything here is a relaxed read of words whose writers keep
 * them consistent one by one, and every value is checked before it is used.
 */
#include "sched/sched_int.h"

#include <stdio.h>
#include <string.h>

/* ---- histograms ------------------------------------------------------------ */

int sched_hist_bucket(uint64_t ns)
{
    if (ns < 4)
        return (int)ns;
    int e = 63 - __builtin_clzll(ns);                 /* 2 <= e <= 63 */
    int b = (e - 1) * 4 + (int)((ns >> (e - 2)) & 3);
    return b < SCHED_HIST_BUCKETS ? b : SCHED_HIST_BUCKETS - 1;
}

uint64_t sched_hist_value(int b)
{
    if (b < 4)
        return (uint64_t)(b < 0 ? 0 : b);
    int e = b / 4 + 1, sub = b % 4;
    uint64_t width = 1ull << (e - 2);
    return (1ull << e) + (uint64_t)sub * width + width / 2;
}

/* Atomic adds: several threads of the owner may be woken by one grant. */
void sched_hist_add(sched_slot_t *s, uint64_t ns)
{
    util_add_relaxed(&s->hist[sched_hist_bucket(ns)], 1);
    util_add_relaxed(&s->handoffs, 1);
}

uint64_t sched_hist_quantile(const uint32_t *hist, double q)
{
    uint64_t total = 0;
    for (int b = 0; b < SCHED_HIST_BUCKETS; b++)
        total += util_load_relaxed(&hist[b]);
    if (total == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)total + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (int b = 0; b < SCHED_HIST_BUCKETS; b++) {
        seen += util_load_relaxed(&hist[b]);
        if (seen >= rank)
            return sched_hist_value(b);
    }
    return sched_hist_value(SCHED_HIST_BUCKETS - 1);
}

/* ---- monitors ---------------------------------------------------------------- */

static int slot_usable(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    return s && shm_slot_gen(t, slot) != 0 &&
           util_load_acquire(&s->magic) == SCHED_SLOT_MAGIC;
}

static int dev_usable(shm_table_t *t, int device)
{
    return sched_dev_ready(t, device) != NULL;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* GPU time held: closed tenures plus the current ones. */
static uint64_t held_now(shm_table_t *t, int slot, uint32_t *holds)
{
    sched_slot_t *s = sched_slot(t, slot);
    uint64_t held = util_load_relaxed(&s->held_ns), now = sched_now();
    *holds = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_dev_t *dev = sched_dev(t, d);
        if (!dev_usable(t, d) ||
            sched_lease_holder(t, util_load_acquire(&dev->lease)) != slot)
            continue;
        *holds |= 1u << d;
        held += sched_tenure_ns(t, dev, slot, now);
    }
    return held;
}

int sched_read_slot(shm_table_t *t, int slot, sched_slot_info_t *out)
{
    if (!slot_usable(t, slot))
        return -1;
    sched_slot_t *s = sched_slot(t, slot);
    sched_slot_info_t v;
    memset(&v, 0, sizeof v);
    int prio = util_load_relaxed(&s->priority);
    v.priority = prio < 0 ? 0 : prio > 100 ? 100 : prio;
    v.declared = util_load_relaxed(&s->declared);
    v.length_ms = util_load_relaxed(&s->length_ms);
    v.has_end = util_load_relaxed(&s->deadline_ns) != 0;
    v.iterations = util_load_relaxed(&s->iterations);
    v.iter_ms = ms(util_load_relaxed(&s->iter_ns));
    v.gpu_held_ms = ms(held_now(t, slot, &v.holds));
    /* Closed waits, plus the one in progress: a monitor sees a wait grow. */
    uint64_t waited = util_load_relaxed(&s->waited_ns);
    uint64_t wsince = util_load_relaxed(&s->wait_since_ns), now = sched_now();
    if (wsince && wsince <= now && now - wsince < 86400ull * 1000000000ull)
        waited += now - wsince;
    v.waited_ms = ms(waited);
    v.switches = util_load_relaxed(&s->switches);
    v.handoff_us_p50 = (double)sched_hist_quantile(s->hist, 0.50) / 1e3;
    v.handoff_us_p99 = (double)sched_hist_quantile(s->hist, 0.99) / 1e3;
    v.devices = util_load_relaxed(&s->devset) & ((1u << SHM_MAX_DEVICES) - 1);
    v.blocked = util_load_relaxed(&s->blocked) != 0 &&
                util_load_relaxed(&s->in_sync) != 0;
    memcpy(v.gang, s->gang_name, sizeof v.gang - 1);
    v.gang[sizeof v.gang - 1] = '\0';
    uint32_t gen = shm_slot_gen(t, slot);
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_dev_t *dev = sched_dev(t, d);
        if (dev_usable(t, d) && ((util_load_relaxed(&dev->waiters[slot >> 6])
                                  >> (slot & 63)) & 1) &&
            util_load_relaxed(&dev->wait[slot].gen) == gen)
            v.waits |= 1u << d;
    }
    *out = v;
    return 0;
}

int sched_read_device(shm_table_t *t, int device, sched_device_info_t *out)
{
    if (!dev_usable(t, device))
        return -1;
    sched_dev_t *dev = sched_dev(t, device);
    sched_device_info_t v;
    memset(&v, 0, sizeof v);
    if (shm_device_uuid(t, device, v.uuid) != 0)
        return -1;
    v.policy = sched_dev_policy(dev);
    v.quantum_ms = util_load_relaxed(&dev->quantum_ms);
    v.max_slice_ms = util_load_relaxed(&dev->max_slice_ms);
    v.holder = sched_lease_holder(t, util_load_acquire(&dev->lease));
    if (v.holder >= 0) {
        uint64_t since = util_load_relaxed(&dev->since_ns), now = sched_now();
        v.held_ms = ms(now > since ? now - since : 0);
    }
    v.switches = util_load_relaxed(&dev->switches);
    uint32_t tickets[SHM_MAX_SLOTS];
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        uint64_t word = util_load_relaxed(&dev->waiters[s >> 6]);
        uint32_t gen = util_load_relaxed(&dev->wait[s].gen);
        if (!((word >> (s & 63)) & 1) || gen == 0 || gen != shm_slot_gen(t, s) ||
            s == v.holder)
            continue;
        uint32_t ticket = util_load_relaxed(&dev->wait[s].ticket);
        int i = v.nwaiters++;                       /* insertion by ticket */
        while (i > 0 && (int32_t)(ticket - tickets[i - 1]) < 0) {
            v.waiters[i] = v.waiters[i - 1];
            tickets[i] = tickets[i - 1];
            i--;
        }
        v.waiters[i] = s;
        tickets[i] = ticket;
    }
    *out = v;
    return 0;
}

/* ---- the report ----------------------------------------------------------------- */

int sched_report_fields(char *buf, size_t cap)
{
    sched_proc_t *p = &sched_p;
    sched_slot_info_t v;
    memset(&v, 0, sizeof v);
    sched_policy_t policy = SCHED_POLICY_FAIR;
    sched_pstate_t st = util_load_acquire(&p->state);
    if ((st == SCHED_P_ACTIVE || st == SCHED_P_EXITING || st == SCHED_P_SUSPENDED) && p->t) {
        sched_read_slot(p->t, p->slot, &v);
        policy = p->cfg.policy;
        for (int d = 0; d < SHM_MAX_DEVICES; d++) {
            sched_device_info_t di;
            if ((p->devset & (1u << d)) && sched_read_device(p->t, d, &di) == 0) {
                policy = di.policy;
                break;
            }
        }
    } else if (st == SCHED_P_OPEN) {
        policy = p->cfg.policy;
    }
    return snprintf(buf, cap,
                    "\"iterations\":%llu,\"iter_ms\":%.3f,\"gpu_held_ms\":%.3f,"
                    "\"waited_ms\":%.3f,\"switches\":%llu,\"handoff_us_p50\":%.1f,"
                    "\"handoff_us_p99\":%.1f,\"policy\":\"%s\"",
                    (unsigned long long)v.iterations, v.iter_ms, v.gpu_held_ms, v.waited_ms,
                    (unsigned long long)v.switches, v.handoff_us_p50, v.handoff_us_p99,
                    st == SCHED_P_OPEN || st == SCHED_P_NOSLOT ? "off" : sched_policy_names[policy]);
}
