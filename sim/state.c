/*
 * state.c - simgpu's shared device state: create / attach / validate, the
 * per-process slots and their liveness, memory accounting, the engines, and
 * process initialization (cuInit) and fork.
 *
 * Divided into: configuration from the environment; the state's robust
 * lock; liveness and reclaim; accounting; engines; opening the state;
 * initialization and fork.
 *
 * Locks: sim_shared_t.lock (robust, process-shared) guards the slots,
 * used[] and pinned; sim_engine_t.lock guards one engine (its free time, last context
 * and each slot's queued tail, by which a dead process's work is cut).  sim_p.lock is taken around
 * initialization and by the fork handlers.
 *
 * Liveness: each process claims a slot and holds a POSIX record lock (write
 * lock on one byte at the slot's offset of the shm fd) for its whole life.
 * The kernel drops it when the process dies, however it dies, and never
 * hands it to a fork() child or to a new process that reuses the pid, so
 * F_GETLK from a peer tells a live owner from a dead one.  Caveat of record
 * locks: closing any fd of the same file drops them, so simgpu opens the
 * state once per process and keeps that fd.
 *
 * Accounting invariant (whenever the state's lock is free):
 *   used[d] == sum over live slots s of s.used[d]  <=  capacity,
 *   pinned  == sum over live slots s of s.pinned   <=  pin_limit (when set).
 * Every change to a slot's used[] and to used[] happens under the lock; a
 * holder that dies mid-change is detected by EOWNERDEAD, and the next holder
 * recomputes used[] and pinned from the slots (reclaim), which restores the
 * equations.  A dead process's pinned memory is the host's again, as its
 * device memory is the device's.
 */
#include "sim.h"
#include "loader/loader.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

sim_process_t sim_p = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .shm_fd = -1,
    .slot = -1,
    .trace_fd = -1,
    .next_stream_id = 1,
};

static char state_name[NAME_MAX];

/* ---- configuration ------------------------------------------------------ */

void sim_note(const char *fmt, ...)
{
    char line[512];
    int n = snprintf(line, sizeof line, "simgpu[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* One write: notes of several processes don't interleave. */
    ssize_t w = write(2, line, n);
    (void)w;
}

int sim_log_enabled(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("SIMGPU_LOG");
        cached = v && *v && strcmp(v, "0") != 0;
    }
    return cached;
}

/* "16G", "512M", "1024": K/M/G/T are powers of 1024; "B"/"iB" may follow;
 * 0 only where zero_ok. */
static int parse_size_z(const char *s, int zero_ok, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || (v == 0 && !zero_ok) || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    return parse_size_z(s, 0, out);
}

/* SIMGPU_CTX_MEMORY: what each context of this process takes (a process's
 * own setting, so that a test can make one process's contexts free). */
static uint64_t read_ctx_memory(void)
{
    uint64_t v = SIM_DEFAULT_CTX_MEMORY;
    const char *s = getenv("SIMGPU_CTX_MEMORY");
    if (s && *s && parse_size_z(s, 1, &v) != 0) {
        sim_note("SIMGPU_CTX_MEMORY=%s is not a size (like 512M): using 512M", s);
        v = SIM_DEFAULT_CTX_MEMORY;
    }
    return sim_round_up(sim_min(v, 1ull << 50), SIM_GRANULE);   /* more never fits */
}

uint64_t sim_env_u64(const char *name, uint64_t def, uint64_t max, int *set)
{
    const char *v = getenv(name);
    if (set)
        *set = 0;
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || x > max) {
        sim_note("%s=%s is not a number in [0, %llu]: using %llu", name, v,
                 (unsigned long long)max, (unsigned long long)def);
        return def;
    }
    if (set)
        *set = 1;
    return x;
}

typedef struct sim_config {
    uint64_t capacity, switch_ns, pin_limit;
    uint32_t ndevices;
    int capacity_set, ndevices_set, switch_set, pin_limit_set;
} sim_config_t;

static void read_config(sim_config_t *c)
{
    c->capacity = SIM_DEFAULT_MEMORY;
    c->capacity_set = 0;
    const char *mem = getenv("SIMGPU_MEMORY");
    if (mem && *mem) {
        if (parse_size(mem, &c->capacity) == 0)
            c->capacity_set = 1;
        else {
            sim_note("SIMGPU_MEMORY=%s is not a size (like 16G): using 16G", mem);
            c->capacity = SIM_DEFAULT_MEMORY;
        }
    }
    c->ndevices = (uint32_t)sim_env_u64("SIMGPU_DEVICES", 1, SIM_MAX_DEVICES, &c->ndevices_set);
    if (c->ndevices == 0) {
        sim_note("SIMGPU_DEVICES=0: simgpu needs at least one device; using 1");
        c->ndevices = 1;
    }
    c->switch_ns = sim_env_u64("SIMGPU_CTX_SWITCH_US", SIM_DEFAULT_SWITCH_US, 10000000,
                           &c->switch_set) * 1000;
    c->pin_limit = 0;
    c->pin_limit_set = 0;
    const char *pin = getenv("SIMGPU_PIN_LIMIT");
    if (pin && *pin) {
        if (parse_size_z(pin, 1, &c->pin_limit) == 0)
            c->pin_limit_set = 1;
        else
            sim_note("SIMGPU_PIN_LIMIT=%s is not a size (like 4G, 0 for no limit): "
                     "pinned host memory is not limited", pin);
    }
}

/* ---- the state's lock --------------------------------------------------- */

static void reclaim_locked(void);
static void engines_forget_slot(int i);

static void robust_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
}

/* Returns 1 when the previous holder died holding it (now made consistent). */
static int robust_lock(pthread_mutex_t *m)
{
    int rc = pthread_mutex_lock(m);
    if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(m);
        return 1;
    }
    return 0;
}

static void state_lock(void)
{
    /* A holder that died may have left used[] and a slot out of step:
     * reclaim recomputes used[] from the slots. */
    if (robust_lock(&sim_p.shared->lock))
        reclaim_locked();
}

static void state_unlock(void)
{
    pthread_mutex_unlock(&sim_p.shared->lock);
}

/* ---- liveness and reclaim ----------------------------------------------- */

static off_t slot_offset(int i)
{
    return (off_t)(offsetof(sim_shared_t, slot) + (size_t)i * sizeof(sim_slot_t));
}

static int slot_alive(int i)
{
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = slot_offset(i), .l_len = 1,
    };
    if (fcntl(sim_p.shm_fd, F_GETLK, &fl) < 0)
        return 1;                       /* can't tell: keep it */
    return fl.l_type != F_UNLCK;
}

/* Under the state's lock: free the slots of dead processes and recompute
 * used[] and pinned from the live slots (the accounting invariants). */
static void reclaim_locked(void)
{
    sim_shared_t *s = sim_p.shared;
    uint64_t used[SIM_MAX_DEVICES] = { 0 }, pinned = 0;
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        sim_slot_t *sl = &s->slot[i];
        if (!sl->live)
            continue;
        if (i != sim_p.slot && !slot_alive(i)) {
            sl->live = 0;
            memset(sl->used, 0, sizeof sl->used);
            sl->pinned = 0;
            continue;
        }
        for (int d = 0; d < SIM_MAX_DEVICES; d++)
            used[d] += sl->used[d];
        pinned += sl->pinned;
    }
    memcpy(s->used, used, sizeof used);
    s->pinned = pinned;
}

static CUresult claim_slot(void)
{
    sim_shared_t *s = sim_p.shared;
    CUresult rc = CUDA_ERROR_DEVICE_UNAVAILABLE;
    state_lock();
    reclaim_locked();
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        if (s->slot[i].live)
            continue;
        struct flock fl = {
            .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = slot_offset(i), .l_len = 1,
        };
        if (fcntl(sim_p.shm_fd, F_SETLK, &fl) < 0)
            continue;                   /* someone holds it: not ours */
        engines_forget_slot(i);
        s->slot[i].live = 1;
        s->slot[i].pid = (int32_t)getpid();
        memset(s->slot[i].used, 0, sizeof s->slot[i].used);
        s->slot[i].pinned = 0;
        sim_p.slot = i;
        rc = CUDA_SUCCESS;
        break;
    }
    state_unlock();
    if (rc != CUDA_SUCCESS)
        sim_note("state %s has no free process slot (%d processes use it)",
                 state_name, SIM_MAX_PROCS);
    return rc;
}

/* ---- accounting --------------------------------------------------------- */

CUresult sim_charge(int dev, uint64_t bytes)
{
    sim_shared_t *s = sim_p.shared;
    CUresult rc = CUDA_SUCCESS;
    state_lock();
    if (bytes > s->capacity - s->used[dev])
        reclaim_locked();
    if (bytes > s->capacity - s->used[dev]) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->used[dev] += bytes;
        s->slot[sim_p.slot].used[dev] += bytes;
    }
    state_unlock();
    return rc;
}

void sim_uncharge(int dev, uint64_t bytes)
{
    sim_shared_t *s = sim_p.shared;
    state_lock();
    sim_slot_t *sl = &s->slot[sim_p.slot];
    if (bytes > sl->used[dev])          /* never below zero, whatever happened */
        bytes = sl->used[dev];
    sl->used[dev] -= bytes;
    s->used[dev] -= bytes < s->used[dev] ? bytes : s->used[dev];
    state_unlock();
}

CUresult sim_pin(uint64_t bytes)
{
    sim_shared_t *s = sim_p.shared;
    CUresult rc = CUDA_SUCCESS;
    state_lock();
    if (s->pin_limit && bytes > s->pin_limit - sim_min(s->pinned, s->pin_limit))
        reclaim_locked();
    if (s->pin_limit && bytes > s->pin_limit - sim_min(s->pinned, s->pin_limit)) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->pinned += bytes;
        s->slot[sim_p.slot].pinned += bytes;
    }
    state_unlock();
    return rc;
}

void sim_unpin(uint64_t bytes)
{
    sim_shared_t *s = sim_p.shared;
    state_lock();
    sim_slot_t *sl = &s->slot[sim_p.slot];
    if (bytes > sl->pinned)             /* never below zero, whatever happened */
        bytes = sl->pinned;
    sl->pinned -= bytes;
    s->pinned -= bytes < s->pinned ? bytes : s->pinned;
    state_unlock();
}

uint64_t sim_free_bytes(int dev)
{
    sim_shared_t *s = sim_p.shared;
    state_lock();
    reclaim_locked();
    uint64_t free = s->capacity - s->used[dev];
    state_unlock();
    return free;
}

uint64_t sim_new_ctx_id(void)
{
    return atomic_fetch_add(&sim_p.shared->next_ctx_id, 1);
}

/* ---- engines ------------------------------------------------------------
 * A kernel starts when its stream lets it (ready) and the engine is free,
 * plus the switch penalty when the engine last ran another context: the
 * engine's (free_ns, last_ctx, tail[]) change under its lock only.
 *
 * Death: a real driver tears a process's contexts down when it dies, and
 * their queued work with them.  Here nobody runs at a death; the first
 * process that would wait behind a slot's queued work checks that slot's
 * liveness (a record-lock test, only then, so a launch behind live work
 * costs one test per slot ahead of it) and cuts a dead one's work at that
 * moment: no later submission waits for it, and the trace says so. */

/* Under e's lock: free_ns is the latest tail left. */
static void refree_locked(sim_engine_t *e)
{
    uint64_t latest = 0;
    for (int i = 0; i < SIM_MAX_PROCS; i++)
        latest = sim_max(latest, e->tail[i]);
    e->free_ns = latest;
}

/* Under e's lock: cut at t the queued work of every dead slot that still
 * has work queued now (t <= now).  Work that ended by now ran, even when it
 * ended after t: a process that synchronized and exited while we were
 * about to submit left nothing to cut. */
static void cut_dead_locked(sim_engine_t *e, int dev, uint64_t t)
{
    int cut = 0;
    uint64_t now = sim_now();
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        if (i == sim_p.slot || e->tail[i] <= now || slot_alive(i))
            continue;
        sim_trace_cut(sim_p.shared->slot[i].pid, dev, 0, t);
        e->tail[i] = 0;
        cut = 1;
    }
    if (cut)
        refree_locked(e);
}

/* Slot i is being claimed (its owner, if any, is dead): cut what it left. */
static void engines_forget_slot(int i)
{
    for (int d = 0; d < SIM_MAX_DEVICES; d++) {
        sim_engine_t *e = &sim_p.shared->engine[d];
        robust_lock(&e->lock);
        uint64_t now = sim_now();
        if (e->tail[i] > now)
            sim_trace_cut(sim_p.shared->slot[i].pid, d, 0, now);
        e->tail[i] = 0;
        refree_locked(e);
        pthread_mutex_unlock(&e->lock);
    }
}

void sim_engine_run(int dev, uint64_t ctx_id, uint64_t submit, uint64_t ready, uint64_t dur,
                    uint64_t *start, uint64_t *end)
{
    sim_engine_t *e = &sim_p.shared->engine[dev];
    robust_lock(&e->lock);             /* a dead holder leaves a usable pair */
    if (e->free_ns > ready)
        cut_dead_locked(e, dev, submit);        /* it died before we submitted */
    uint64_t t = sim_max(ready, e->free_ns);
    if (e->last_ctx && e->last_ctx != ctx_id)
        t += sim_p.shared->switch_ns;
    e->free_ns = t + dur;
    e->last_ctx = ctx_id;
    e->kernels++;
    e->tail[sim_p.slot] = t + dur;
    e->busy_ns += dur;
    e->slot_busy_ns[sim_p.slot] += dur;
    pthread_mutex_unlock(&e->lock);
    *start = t;
    *end = t + dur;
}

void sim_engine_reap(int dev)
{
    sim_engine_t *e = &sim_p.shared->engine[dev];
    robust_lock(&e->lock);
    uint64_t now = sim_now();
    if (e->free_ns > now)
        cut_dead_locked(e, dev, now);
    pthread_mutex_unlock(&e->lock);
}

void sim_engine_cut_own(int dev, uint64_t ctx_id, uint64_t rest)
{
    sim_engine_t *e = &sim_p.shared->engine[dev];
    uint64_t now = sim_now();
    robust_lock(&e->lock);
    if (e->tail[sim_p.slot] > now) {
        sim_trace_cut(sim_p.pid, dev, ctx_id, now);
        e->tail[sim_p.slot] = sim_min(e->tail[sim_p.slot], sim_max(rest, now));
        refree_locked(e);
    }
    pthread_mutex_unlock(&e->lock);
}

/* ---- opening the state -------------------------------------------------- */

const char *sim_state_name(void)
{
    return state_name;
}

static CUresult pick_name(void)
{
    const char *v = getenv("SIMGPU_STATE");
    if (v && *v) {
        if (v[0] != '/' || strchr(v + 1, '/') || strlen(v) < 2 || strlen(v) > 200) {
            sim_note("SIMGPU_STATE=%s is not a shared-memory name like /simgpu-test", v);
            return CUDA_ERROR_INVALID_VALUE;
        }
        snprintf(state_name, sizeof state_name, "%s", v);
    } else {
        snprintf(state_name, sizeof state_name, "/simgpu-%u", (unsigned)getuid());
    }
    return CUDA_SUCCESS;
}

static void init_shared(sim_shared_t *s, const sim_config_t *c)
{
    memset(s, 0, sizeof *s);
    s->version = SIM_STATE_VERSION;
    s->size = sizeof *s;
    s->ndevices = c->ndevices;
    s->creator = (int32_t)getpid();
    s->capacity = c->capacity;
    s->switch_ns = c->switch_ns;
    s->pin_limit = c->pin_limit;
    robust_init(&s->lock);
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        robust_init(&s->engine[d].lock);
    atomic_store(&s->next_ctx_id, 1);
    s->magic = SIM_STATE_MAGIC;
}

/* Create the state fully initialized under a private name, then publish it
 * with link(): peers never see a half-made state, and of two creators that
 * race, one link fails with EEXIST and that one attaches instead. */
static int create_state(const sim_config_t *c)
{
    char tmp[NAME_MAX + 32], from[PATH_MAX], to[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%.200s.new-%d", state_name, (int)getpid());
    int fd = shm_open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = 0;
    if (ftruncate(fd, sizeof(sim_shared_t)) == 0) {
        void *m = mmap(NULL, sizeof(sim_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            init_shared(m, c);
            munmap(m, sizeof(sim_shared_t));
            snprintf(from, sizeof from, "/dev/shm%s", tmp);
            snprintf(to, sizeof to, "/dev/shm%s", state_name);
            ok = link(from, to) == 0;
        }
    }
    int saved = errno;
    shm_unlink(tmp);
    close(fd);
    errno = ok ? 0 : saved;
    return ok ? 0 : -1;
}

static CUresult validate(int fd, sim_shared_t **out)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if ((size_t)st.st_size < sizeof(sim_shared_t)) {
        sim_note("state %s is %lld bytes, not a simgpu state of this version "
                 "(%zu bytes): remove it (rm /dev/shm%s) or set SIMGPU_STATE to another name",
                 state_name, (long long)st.st_size, sizeof(sim_shared_t), state_name);
        return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
    }
    sim_shared_t *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s == MAP_FAILED)
        return CUDA_ERROR_OPERATING_SYSTEM;
    if (s->magic != SIM_STATE_MAGIC || s->version != SIM_STATE_VERSION ||
        s->size != sizeof *s || s->ndevices < 1 || s->ndevices > SIM_MAX_DEVICES ||
        s->capacity == 0) {
        sim_note("state %s is not a simgpu state of this version (magic %#llx version %u "
                 "size %u; expected %#llx, %u, %zu): remove it (rm /dev/shm%s) or set "
                 "SIMGPU_STATE to another name", state_name, (unsigned long long)s->magic,
                 s->version, s->size, (unsigned long long)SIM_STATE_MAGIC,
                 SIM_STATE_VERSION, sizeof *s, state_name);
        munmap(s, sizeof *s);
        return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
    }
    *out = s;
    return CUDA_SUCCESS;
}

static void note_ignored(const sim_config_t *c, const sim_shared_t *s)
{
    if (c->capacity_set && c->capacity != s->capacity)
        sim_note("SIMGPU_MEMORY ignored: state %s was created with %llu bytes per device",
                 state_name, (unsigned long long)s->capacity);
    if (c->ndevices_set && c->ndevices != s->ndevices)
        sim_note("SIMGPU_DEVICES ignored: state %s was created with %u devices",
                 state_name, s->ndevices);
    if (c->switch_set && c->switch_ns != s->switch_ns)
        sim_note("SIMGPU_CTX_SWITCH_US ignored: state %s was created with %llu us",
                 state_name, (unsigned long long)(s->switch_ns / 1000));
    if (c->pin_limit_set && c->pin_limit != s->pin_limit)
        sim_note("SIMGPU_PIN_LIMIT ignored: state %s was created with %llu bytes "
                 "(0: no limit)", state_name, (unsigned long long)s->pin_limit);
}

static CUresult open_state(void)
{
    sim_config_t c;
    CUresult rc = pick_name();
    if (rc != CUDA_SUCCESS)
        return rc;
    read_config(&c);
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = shm_open(state_name, O_RDWR | O_CLOEXEC, 0);
        if (fd >= 0) {
            sim_shared_t *s;
            rc = validate(fd, &s);
            if (rc != CUDA_SUCCESS) {
                close(fd);
                return rc;
            }
            if (s->creator != (int32_t)getpid())
                note_ignored(&c, s);
            sim_p.shared = s;
            sim_p.shm_fd = fd;
            sim_p.ndevices = (int)s->ndevices;
            sim_p.capacity = s->capacity;
            return CUDA_SUCCESS;
        }
        if (errno != ENOENT)
            break;
        if (create_state(&c) < 0 && errno != EEXIST)
            break;
    }
    sim_note("cannot open or create state %s: %s", state_name, strerror(errno));
    return CUDA_ERROR_OPERATING_SYSTEM;
}

/* ---- initialization and fork -------------------------------------------- */

static void atfork_prepare(void) { pthread_mutex_lock(&sim_p.lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&sim_p.lock); }

/* The child of fork() starts with no simgpu state of its own: it keeps the
 * mapping of the shared state (and its fd) but forgets every object of its
 * parent, never frees or accounts them, and registers afresh at its first
 * cuInit.  Handle generations move on, so the parent's handles are refused. */
static void atfork_child(void)
{
    pthread_mutex_init(&sim_p.lock, NULL);
    pthread_cond_init(&sim_p.cond, NULL);
    atomic_store(&sim_p.initialized, 0);
    sim_p.slot = -1;
    sim_p.epoch++;
    memset(sim_p.primary, 0, sizeof sim_p.primary);
    memset(sim_p.default_pool, 0, sizeof sim_p.default_pool);
    memset(sim_p.current_pool, 0, sizeof sim_p.current_pool);
    sim_obj_reset_after_fork();
    sim_range_reset_after_fork();
    sim_exec_reset_after_fork();
    sim_vmm_reset_after_fork();
    sim_gmem_reset_after_fork();
}

static void register_atfork(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void open_trace(void)
{
    const char *path = getenv("SIMGPU_TRACE");
    if (!path || !*path || sim_p.trace_fd >= 0)
        return;
    sim_p.trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (sim_p.trace_fd < 0)
        sim_note("cannot open SIMGPU_TRACE=%s: %s; no trace", path, strerror(errno));
}

CUresult sim_init(unsigned flags)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load_explicit(&sim_p.initialized, memory_order_acquire))
        return CUDA_SUCCESS;
    pthread_once(&once, register_atfork);
    SIM_LOCK();
    CUresult rc = sim_p.init_error;
    if (rc != CUDA_SUCCESS || atomic_load(&sim_p.initialized))
        goto out_unlock;
    if (!sim_p.shared) {
        rc = open_state();
        if (rc != CUDA_SUCCESS)
            goto out_fail;
    }
    sim_read_visible();
    sim_read_loading_mode();
    sim_kernel_model_init();
    sim_p.ctx_memory = read_ctx_memory();
    sim_p.pcie_bw = sim_env_u64("SIMGPU_PCIE_GBPS", SIM_BW_HOST, 1000, NULL);
    if (sim_p.pcie_bw == 0)
        sim_p.pcie_bw = SIM_BW_HOST;
    sim_p.pin_bw = sim_env_u64("SIMGPU_PIN_GBPS", SIM_BW_PIN, 1000, NULL);
    open_trace();
    sim_p.pid = (int)getpid();
    rc = claim_slot();
    if (rc != CUDA_SUCCESS)
        goto out_fail;
    sim_cls_init();
    atomic_store_explicit(&sim_p.initialized, 1, memory_order_release);
    goto out_unlock;
out_fail:
    sim_p.init_error = rc;              /* as the driver, a failed init stays failed */
out_unlock:
    SIM_UNLOCK();
    return rc;
}
