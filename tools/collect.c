/*
 * collect.c - what salus-top shows, copied from the arbitration tables into
 * a snapshot: the tables this user can read, their devices, and a row per
 * live process and device, with GPU and wait shares from the previous
 * sample.
 *
 * Divided into: snapshots (growable arrays); opening tables quietly;
 * finding tables (/dev/shm, SALUS_TABLE); keeping them open across samples;
 * sampling one table; rates; top_collect.
 *
 * Everything is read through ipc.h, sched.h and memory.h, which validate
 * what they copy (a peer may die mid-write or be hostile); tables are mapped
 * read-only, so a monitor can never disturb the processes it watches.  The
 * tool is single-threaded: the collector needs no lock.
 */
#include "top.h"

#include "memory/memory.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"

/* ---- snapshots ------------------------------------------------------------ */

void top_snap_init(top_snap_t *s)
{
    memset(s, 0, sizeof *s);
}

void top_snap_free(top_snap_t *s)
{
    free(s->devices);
    free(s->procs);
    top_snap_init(s);
}

static void snap_clear(top_snap_t *s)
{
    s->ntables = s->ndevices = s->nprocs = s->hidden_tables = s->nothers = 0;
    s->interval_s = 0;
    s->note[0] = '\0';
}

static top_device_t *snap_add_device(top_snap_t *s)
{
    if (s->ndevices == s->devcap) {
        int cap = s->devcap ? s->devcap * 2 : 8;
        top_device_t *d = realloc(s->devices, (size_t)cap * sizeof *d);
        if (!d)
            return NULL;
        s->devices = d;
        s->devcap = cap;
    }
    top_device_t *d = &s->devices[s->ndevices++];
    memset(d, 0, sizeof *d);
    return d;
}

static top_proc_t *snap_add_proc(top_snap_t *s)
{
    if (s->nprocs == s->proccap) {
        int cap = s->proccap ? s->proccap * 2 : 32;
        top_proc_t *p = realloc(s->procs, (size_t)cap * sizeof *p);
        if (!p)
            return NULL;
        s->procs = p;
        s->proccap = cap;
    }
    return &s->procs[s->nprocs++];
}

/* ---- opening tables quietly ----------------------------------------------
 * ipc logs why a table cannot be used, for applications; a monitor says it
 * in its own words (on its screen, not on a stderr under curses), so it
 * opens quietly, and with exactly the group it was given (none: private). */

int top_open_table(const char *name, const char *group, int writable, shm_table_t **out)
{
    shm_open_opts_t o = {
        .name = name,
        .group = group && *group ? group : NULL,
        .read_only = !writable,
        .quiet = 1,
    };
    return shm_open_table(&o, out);
}

const char *top_open_error(int err)
{
    switch (err) {
    case -ENOENT: return "it does not exist (no process has used Salus with it yet)";
    case -EACCES:
    case -EPERM:  return "it belongs to another user or group, or is open to everyone";
    case -EPROTO: return "it was made by another version of Salus, or is not a Salus table";
    case -EAGAIN: return "it is being set up";
    case -EINVAL: return "its name is not valid ('/' then letters, digits, '.', '_', '-'), "
                         "or SALUS_GROUP names no group of this machine";
    default:      return strerror(-err);
    }
}

int top_default_table(char *name, size_t len, char *group, size_t glen)
{
    int rc = shm_default_name(name, len, 1);
    const char *g = util_env_str("SALUS_GROUP");
    snprintf(group, glen, "%s", g ? g : "");
    return rc;
}

/* ---- finding tables ---------------------------------------------------------- */

typedef struct cand {
    char name[SHM_TABLE_NAME_BYTES];
    char group[SHM_TABLE_NAME_BYTES];
    int always;                 /* shown even when nobody uses it */
} cand_t;

/* The group a table's name implies ("" for private tables). */
static void group_of(const char *name, char *group, size_t len)
{
    static const char prefix[] = "/salus-group-";
    snprintf(group, len, "%s",
             strncmp(name, prefix, sizeof prefix - 1) == 0 ? name + sizeof prefix - 1 : "");
}

void top_table_group(const char *name, char *group, size_t len)
{
    char def[SHM_TABLE_NAME_BYTES], defgroup[SHM_TABLE_NAME_BYTES];
    group_of(name, group, len);
    if (!group[0] && top_default_table(def, sizeof def, defgroup, sizeof defgroup) == 0 &&
        strcmp(def, name) == 0)
        snprintf(group, len, "%s", defgroup);   /* SALUS_TABLE shared with SALUS_GROUP */
}

static int cand_add(cand_t *c, int n, const char *name, const char *group, int always)
{
    for (int i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0) {
            c[i].always |= always;
            return n;
        }
    if (n == TOP_MAX_TABLES || strlen(name) >= sizeof c[n].name)
        return n;
    snprintf(c[n].name, sizeof c[n].name, "%s", name);
    snprintf(c[n].group, sizeof c[n].group, "%s", group);
    c[n].always = always;
    return n + 1;
}

/* A /dev/shm entry this user may open as a Salus table: a regular file named
 * salus-*, owned by this user, or a group table of one of its groups. */
static int may_open(const char *entry, const struct stat *st)
{
    if (!S_ISREG(st->st_mode) || (st->st_mode & 0007))
        return 0;
    if (strncmp(entry, "salus-group-", 12) == 0)
        return (st->st_mode & 0040) &&
               (st->st_uid == geteuid() || st->st_gid == getegid() || group_member(st->st_gid));
    return st->st_uid == geteuid();
}

static int discover(cand_t *c, int n)
{
    DIR *dir = opendir(SHM_DIR);
    if (!dir)
        return n;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "salus-", 6) != 0)
            continue;
        char path[sizeof SHM_DIR + 256], name[SHM_TABLE_NAME_BYTES + 1], group[SHM_TABLE_NAME_BYTES];
        struct stat st;
        snprintf(path, sizeof path, SHM_DIR "/%s", e->d_name);
        if (strlen(e->d_name) + 2 > sizeof name || lstat(path, &st) != 0 ||
            !may_open(e->d_name, &st))
            continue;
        snprintf(name, sizeof name, "/%s", e->d_name);
        group_of(name, group, sizeof group);
        n = cand_add(c, n, name, group, 0);
    }
    closedir(dir);
    return n;
}

/* ---- keeping tables open -------------------------------------------------------- */

typedef struct open_table {
    char name[SHM_TABLE_NAME_BYTES];
    shm_table_t *t;
    dev_t dev;
    ino_t ino;                   /* the object opened: a new one is reopened */
    int last_err;                /* of the last failed open, said once */
} open_table_t;

/* One process's counters at the previous sample, for rates. */
/* GPU shares over the last minute, in TOP_HIST_CHARS buckets of equal time:
 * bucket k holds the samples of time slot no[k] (monotonic ns / width). */
#define HIST_BUCKET_NS ((uint64_t)TOP_HIST_S * 1000000000ull / TOP_HIST_CHARS)
typedef struct hist {
    uint64_t no[TOP_HIST_CHARS];
    float sum[TOP_HIST_CHARS];
    uint32_t cnt[TOP_HIST_CHARS];
} hist_t;

typedef struct prev_proc {
    char table[SHM_TABLE_NAME_BYTES];
    int slot;
    uint32_t gen;
    pid_t pid;
    double gpu_held_ms, waited_ms;
    hist_t hist;
} prev_proc_t;

struct top_collector {
    top_collect_opts_t o;
    char **names;                /* explicit tables, owned */
    char def_name[SHM_TABLE_NAME_BYTES], def_group[SHM_TABLE_NAME_BYTES];
    open_table_t open[TOP_MAX_TABLES];
    int nopen;
    prev_proc_t *prev;
    int nprev;
    uint64_t prev_ns;
};

int top_collector_new(const top_collect_opts_t *o, top_collector_t **out)
{
    top_collector_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = *o;
    if (o->tables) {
        int n = 0;
        while (o->tables[n])
            n++;
        c->names = calloc((size_t)n + 1, sizeof *c->names);
        for (int i = 0; c->names && i < n; i++)
            c->names[i] = strdup(o->tables[i]);
        c->o.tables = (const char *const *)c->names;
    }
    if (top_default_table(c->def_name, sizeof c->def_name, c->def_group,
                          sizeof c->def_group) != 0)
        c->def_name[0] = '\0';
    *out = c;
    return 0;
}

static void close_entry(open_table_t *e)
{
    if (e->t)
        shm_close_table(e->t);
    e->t = NULL;
}

void top_collector_free(top_collector_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nopen; i++)
        close_entry(&c->open[i]);
    for (int i = 0; c->names && c->names[i]; i++)
        free(c->names[i]);
    free(c->names);
    free(c->prev);
    free(c);
}

static open_table_t *entry_of(top_collector_t *c, const char *name)
{
    for (int i = 0; i < c->nopen; i++)
        if (strcmp(c->open[i].name, name) == 0)
            return &c->open[i];
    open_table_t *e = NULL;
    if (c->nopen < TOP_MAX_TABLES)
        e = &c->open[c->nopen++];
    for (int i = 0; i < c->nopen && !e; i++)   /* reuse a closed entry */
        if (!c->open[i].t)
            e = &c->open[i];
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    return e;
}

/* Have e open on the object that now bears its name.  0, or -errno. */
static int refresh_entry(open_table_t *e, const char *group)
{
    char path[sizeof SHM_DIR + SHM_TABLE_NAME_BYTES];
    struct stat st;
    snprintf(path, sizeof path, SHM_DIR "%s", e->name);
    if (stat(path, &st) != 0) {
        close_entry(e);                        /* removed (salus reset) */
        return -ENOENT;
    }
    if (e->t && st.st_dev == e->dev && st.st_ino == e->ino)
        return 0;
    close_entry(e);                            /* made again under that name */
    int rc = top_open_table(e->name, group, 0, &e->t);
    if (rc != 0) {
        e->t = NULL;
        return rc;
    }
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    return 0;
}

/* ---- sampling one table ------------------------------------------------------------ */

typedef struct slot_copy {
    int live;
    shm_ident_t id;
    int has_sched, has_mem;
    sched_slot_info_t si;
    mem_slot_view_t mv;
    uint32_t devices;
} slot_copy_t;

static void copy_slots(shm_table_t *t, slot_copy_t *sc)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        slot_copy_t *c = &sc[s];
        memset(c, 0, sizeof *c);
        if (shm_slot_ident(t, s, &c->id) != 0 || !shm_slot_alive(t, s))
            continue;
        c->live = 1;
        top_sanitize(c->id.name);
        c->has_sched = sched_read_slot(t, s, &c->si) == 0;
        c->has_mem = mem_view_slot(t, s, &c->mv) == 0;
        /* Where it launches or allocates: a context alone (JAX retains one on
         * every visible GPU) does not list it on a device. */
        c->devices = (c->has_sched ? c->si.devices : 0) | (c->has_mem ? c->mv.uses : 0);
    }
}

static pid_t pid_of(const slot_copy_t *sc, int slot)
{
    return slot >= 0 && slot < SHM_MAX_SLOTS && sc[slot].live ? sc[slot].id.pid : 0;
}

static void fill_device(top_device_t *d, shm_table_t *t, int index, const slot_copy_t *sc)
{
    sched_device_info_t si;
    mem_device_view_t mv;
    d->index = index;
    d->holder_slot = -1;
    d->policy = SCHED_POLICY_FAIR;
    if (sched_read_device(t, index, &si) == 0) {
        d->has_sched = 1;
        d->policy = si.policy;
        d->quantum_ms = si.quantum_ms;
        d->max_slice_ms = si.max_slice_ms;
        d->switches = si.switches;
        d->holder = pid_of(sc, si.holder);
        d->holder_slot = d->holder ? si.holder : -1;
        for (int i = 0; i < si.nwaiters && i < SHM_MAX_SLOTS; i++) {
            pid_t w = pid_of(sc, si.waiters[i]);
            if (w > 0)
                d->waiters[d->nwaiters++] = w;
        }
    }
    uint8_t uuid[16];
    top_gpu_info_t g;
    d->gpu_index = d->minor = -1;
    if (shm_device_uuid(t, index, uuid) == 0) {
        top_uuid_text(uuid, d->uuid, sizeof d->uuid);
        if (top_gpu_info(NULL, d->uuid, &g) == 0) {
            d->gpu_index = g.index;
            d->minor = g.minor;
            snprintf(d->model, sizeof d->model, "%s", g.model);
            snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", g.pci_bus_id);
        }
        d->has_nvml = top_nvml_read(d->uuid, &d->nvml) == 0;
    }
    if (mem_view_device(t, index, &mv) == 0) {
        d->has_mem = 1;
        d->capacity = mv.capacity;
        d->budget = mv.budget;
        /* One figure: what the budget counts, contexts included (each
         * part is clamped to the capacity by the view; so is the sum). */
        d->ctx = mv.ctx;
        d->used = mv.used + mv.ctx < mv.capacity ? mv.used + mv.ctx : mv.capacity;
        d->foreign = mv.foreign;
        d->reserved = mv.reserved;
        d->mem_waiters = mv.waiters;
        d->queued = mv.queued;
    }
}

/* 1 when the process is stopped (SIGSTOP, Ctrl-Z, a debugger): state T or t
 * in /proc/<pid>/stat, if that pid is still the slot's process (its start
 * time); 0 otherwise or when /proc cannot tell (another pid namespace). */
int top_pid_is(pid_t pid, uint64_t start_ticks, int *stopped)
{
    char path[64], buf[1024];
    *stopped = 0;
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *q = strrchr(buf, ')');             /* fields after comm: 3 state ... 22 start */
    if (!q || q[1] != ' ')
        return 0;
    char state = q[2];
    for (int field = 2; q && field < 22; field++)   /* q: the space before field+1 */
        q = strchr(q + 1, ' ');
    if (!q || (start_ticks && strtoull(q + 1, NULL, 10) != start_ticks))
        return 0;
    *stopped = state == 'T' || state == 't';
    return 1;
}

static void fill_proc(top_proc_t *p, const slot_copy_t *c, int slot, const top_device_t *d)
{
    memset(p, 0, sizeof *p);
    p->table = d->table;
    p->device = d->index;
    p->slot = slot;
    p->gen = c->id.gen;
    p->pid = c->id.pid;
    p->uid = c->id.uid;
    top_user_name(c->id.uid, p->user, sizeof p->user);
    snprintf(p->name, sizeof p->name, "%s", c->id.name);
    p->state = c->id.state;
    p->holds = d->holder_slot == slot;
    p->start_ticks = c->id.start_ticks;
    p->pid_here = top_pid_is(c->id.pid, c->id.start_ticks, &p->stopped);
    p->gpu_share = p->wait_share = -1;
    if ((p->has_sched = c->has_sched)) {
        p->priority = c->si.priority;
        p->declared = c->si.declared;
        p->length_ms = c->si.length_ms;
        p->has_end = c->si.has_end;
        p->iterations = c->si.iterations;
        p->switches = c->si.switches;
        p->iter_ms = c->si.iter_ms;
        p->gpu_held_ms = c->si.gpu_held_ms;
        p->waited_ms = c->si.waited_ms;
        p->blocked = c->si.blocked;
        snprintf(p->gang, sizeof p->gang, "%s", c->si.gang);
        top_sanitize(p->gang);
    }
    if ((p->has_mem = c->has_mem)) {
        p->mem_used = c->mv.used + c->mv.ctx;     /* what its limit counts */
        p->mem_ctx = c->mv.ctx;
        p->mem_limit = c->mv.limit;
        p->mem_peak = c->mv.peak;
        p->mem_reserved = c->mv.reserved;
        p->oom_refusals = c->mv.oom_refusals;
        p->mem_swapped = c->mv.swapped_out;
        p->mem_pinned = c->mv.pinned;
        p->swap_outs = c->mv.swap_outs;
        p->swap_ins = c->mv.swap_ins;
        p->swap_ms = c->mv.swap_ms;
        p->waiting_admission = c->mv.waiting_admission;
    }
}

/* Devices of the table: those sched or memory have set up, and device 0 for
 * processes that use none yet (they registered before their first context). */
static int sample_table(top_snap_t *s, int ti, shm_table_t *t)
{
    static slot_copy_t sc[SHM_MAX_SLOTS];     /* ~40 KiB: not on the stack (one thread) */
    copy_slots(t, sc);
    uint32_t devset = 0;
    int homeless = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_device_info_t si;
        mem_device_view_t mv;
        if (sched_read_device(t, d, &si) == 0 || mem_view_device(t, d, &mv) == 0)
            devset |= 1u << d;
    }
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        if (!sc[i].live)
            continue;
        s->tables[ti].nprocs++;
        devset |= sc[i].devices;
        homeless |= sc[i].devices == 0;
    }
    uint32_t first = devset ? (uint32_t)__builtin_ctz(devset) : 0;
    if (homeless)
        devset |= 1u << first;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        if (!(devset & (1u << d)))
            continue;
        top_device_t *dev = snap_add_device(s);
        if (!dev)
            return -ENOMEM;
        dev->table = ti;
        fill_device(dev, t, d, sc);
        for (int i = 0; i < SHM_MAX_SLOTS; i++) {
            uint32_t on = sc[i].devices ? sc[i].devices : 1u << first;
            if (!sc[i].live || !(on & (1u << d)))
                continue;
            top_proc_t *p = snap_add_proc(s);
            if (!p)
                return -ENOMEM;
            fill_proc(p, &sc[i], i, dev);
            dev->nprocs++;
        }
    }
    return 0;
}

/* ---- rates --------------------------------------------------------------------------
 * GPU% is the growth of the GPU time a process held (its lease tenures,
 * the current one included) over the time between two samples; WAIT% the
 * growth of its time waiting for the lease (the wait in progress included).
 * Under pack nobody holds a lease: GPU% is not measured there. */

static const prev_proc_t *find_prev(const top_collector_t *c, const char *table,
                                    const top_proc_t *p)
{
    for (int i = 0; i < c->nprev; i++) {
        const prev_proc_t *q = &c->prev[i];
        if (q->slot == p->slot && q->gen == p->gen && q->pid == p->pid &&
            strcmp(q->table, table) == 0)
            return q;
    }
    return NULL;
}

static double share(double now, double before, double dt_ms)
{
    double v = (now - before) / dt_ms;
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

static void apply_rates(top_collector_t *c, top_snap_t *s)
{
    double dt_ms = c->prev_ns && s->taken_ns > c->prev_ns
                       ? (double)(s->taken_ns - c->prev_ns) / 1e6 : 0;
    s->interval_s = dt_ms / 1e3;
    for (int i = 0; dt_ms > 0 && i < s->nprocs; i++) {
        top_proc_t *p = &s->procs[i];
        const prev_proc_t *q = find_prev(c, s->tables[p->table].name, p);
        if (!q || !p->has_sched)
            continue;
        const top_device_t *d = NULL;
        for (int k = 0; k < s->ndevices && !d; k++)
            if (s->devices[k].table == p->table && s->devices[k].index == p->device)
                d = &s->devices[k];
        if (!(d && d->has_sched && d->policy == SCHED_POLICY_PACK))
            p->gpu_share = share(p->gpu_held_ms, q->gpu_held_ms, dt_ms);
        p->wait_share = share(p->waited_ms, q->waited_ms, dt_ms);
    }
}

static void hist_add(hist_t *h, uint64_t now_ns, double v)
{
    uint64_t no = now_ns / HIST_BUCKET_NS;
    int k = (int)(no % TOP_HIST_CHARS);
    if (h->no[k] != no) {
        h->no[k] = no;
        h->sum[k] = 0;
        h->cnt[k] = 0;
    }
    if (v >= 0) {
        h->sum[k] += (float)v;
        h->cnt[k]++;
    }
}

/* One character per bucket, oldest first: ' ' no sample, then '_' (0%) to
 * '@' (100%) in ten steps.  ASCII, so that a character is a column. */
static void hist_spark(const hist_t *h, uint64_t now_ns, char *out)
{
    static const char levels[] = "_.:-=+*#%@";
    uint64_t now = now_ns / HIST_BUCKET_NS;
    for (int i = 0; i < TOP_HIST_CHARS; i++) {
        uint64_t no = now + 1 + (uint64_t)i - TOP_HIST_CHARS;
        int k = (int)(no % TOP_HIST_CHARS);
        if (h->no[k] != no || h->cnt[k] == 0) {
            out[i] = ' ';
            continue;
        }
        int l = (int)(h->sum[k] / (float)h->cnt[k] * 10.0f);
        out[i] = levels[l < 0 ? 0 : l > 9 ? 9 : l];
    }
    out[TOP_HIST_CHARS] = '\0';
}

/* Keep this sample for the next one's rates, and the minute of history of
 * each process that goes on (a new array: the old one is looked up). */
static int remember(top_collector_t *c, top_snap_t *s)
{
    prev_proc_t *now = calloc((size_t)(s->nprocs > 0 ? s->nprocs : 1), sizeof *now);
    if (!now)
        return -ENOMEM;
    for (int i = 0; i < s->nprocs; i++) {
        top_proc_t *p = &s->procs[i];
        prev_proc_t *q = &now[i];
        const prev_proc_t *old = find_prev(c, s->tables[p->table].name, p);
        if (old)
            q->hist = old->hist;
        snprintf(q->table, sizeof q->table, "%s", s->tables[p->table].name);
        q->slot = p->slot;
        q->gen = p->gen;
        q->pid = p->pid;
        q->gpu_held_ms = p->gpu_held_ms;
        q->waited_ms = p->waited_ms;
        hist_add(&q->hist, s->taken_ns, p->gpu_share);
        hist_spark(&q->hist, s->taken_ns, p->spark);
    }
    free(c->prev);
    c->prev = now;
    c->nprev = s->nprocs;
    c->prev_ns = s->taken_ns;
    return 0;
}

/* ---- top_collect -------------------------------------------------------------------- */

static int candidates(top_collector_t *c, cand_t *cand)
{
    int n = 0;
    char group[SHM_TABLE_NAME_BYTES];
    if (c->o.tables) {
        for (int i = 0; c->o.tables[i]; i++) {
            group_of(c->o.tables[i], group, sizeof group);
            n = cand_add(cand, n, c->o.tables[i], group[0] ? group : c->def_group, 1);
        }
        return n;
    }
    if (c->def_name[0])
        n = cand_add(cand, n, c->def_name, c->def_group, 1);
    return discover(cand, n);
}

/* A table this build could not read for its version: what it says of
 * itself, for the versions line (salus status) and the note. */
static void add_other(top_snap_t *s, const char *name)
{
    shm_table_about_t a;
    if (s->nothers == TOP_MAX_TABLES || shm_table_about(name, &a) != 0 || a.abi == 0 ||
        a.abi == SHM_ABI_VERSION)
        return;
    top_other_t *o = &s->others[s->nothers++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->abi = a.abi;
    snprintf(o->made_by, sizeof o->made_by, "%s", a.version);
    top_sanitize(o->made_by);
    o->nprocs = a.live;
}

static void note_other(top_snap_t *s)
{
    for (int i = 0; i < s->nothers && !s->note[0]; i++) {
        const top_other_t *o = &s->others[i];
        if (o->nprocs == 0)
            continue;
        snprintf(s->note, sizeof s->note, "table %.63s: %d process%s of %s%.15s (table ABI "
                 "%u), which this salus (ABI %u) cannot read; see Upgrading in the README",
                 o->name, o->nprocs, o->nprocs == 1 ? "" : "es",
                 o->made_by[0] ? "Salus " : "an older Salus", o->made_by, o->abi,
                 (unsigned)SHM_ABI_VERSION);
    }
}

static void note_missing(top_snap_t *s, const cand_t *cand, int n, const int *errs)
{
    for (int i = 0; i < n && !s->note[0]; i++)
        if (cand[i].always && errs[i] != 0 && errs[i] != -EAGAIN)
            snprintf(s->note, sizeof s->note, "table %.63s: %.180s", cand[i].name,
                     top_open_error(errs[i]));
}

int top_collect(top_collector_t *c, top_snap_t *s)
{
    cand_t cand[TOP_MAX_TABLES];
    int errs[TOP_MAX_TABLES];
    int n = candidates(c, cand);
    snap_clear(s);
    s->taken_ns = util_now_ns();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    s->wall_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    if (gethostname(s->host, sizeof s->host) != 0)
        snprintf(s->host, sizeof s->host, "unknown");
    s->host[sizeof s->host - 1] = '\0';
    top_sanitize(s->host);
    for (int i = 0; i < n; i++) {
        open_table_t *e = entry_of(c, cand[i].name);
        errs[i] = e ? refresh_entry(e, cand[i].group) : -EMFILE;
        if (errs[i] == -EPROTO)
            add_other(s, cand[i].name);
        if (errs[i] != 0 || s->ntables == TOP_MAX_TABLES)
            continue;
        int ti = s->ntables++;
        top_table_t *tt = &s->tables[ti];
        shm_table_about_t about;
        memset(tt, 0, sizeof *tt);
        snprintf(tt->name, sizeof tt->name, "%s", cand[i].name);
        tt->abi = SHM_ABI_VERSION;
        if (shm_table_about(cand[i].name, &about) == 0) {
            snprintf(tt->made_by, sizeof tt->made_by, "%s", about.version);
            top_sanitize(tt->made_by);
        }
        int nd = s->ndevices, np = s->nprocs;
        if (sample_table(s, ti, e->t) != 0)
            return -ENOMEM;
        if (tt->nprocs == 0 && !cand[i].always && !c->o.all) {
            s->ntables--;                      /* a stale table nobody uses */
            s->ndevices = nd;
            s->nprocs = np;
            s->hidden_tables++;
        }
    }
    /* Tables no longer named anywhere are closed. */
    for (int k = 0; k < c->nopen; k++) {
        int named = 0;
        for (int i = 0; i < n && !named; i++)
            named = strcmp(c->open[k].name, cand[i].name) == 0;
        if (!named)
            close_entry(&c->open[k]);
    }
    note_other(s);
    note_missing(s, cand, n, errs);
    if (s->ntables == 0 && !s->note[0])
        snprintf(s->note, sizeof s->note, "no Salus table: no process shares a GPU "
                 "through Salus (looked for %s and " SHM_DIR "/salus-*)",
                 c->def_name[0] ? c->def_name : "the default table");
    apply_rates(c, s);
    return remember(c, s);
}
