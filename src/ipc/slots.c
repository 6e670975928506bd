/*
 * slots.c - one slot per process: claiming it, proving the process alive,
 * and reaping the slots of processes that died.
 *
 * Divided into: liveness; identity; claim and release; reaping and repair.
 *
 * Liveness.  A process that claims slot i takes a POSIX write lock on the byte
 * SHM_LIVE_BASE + i of the table's object and keeps it for its life.  Record
 * locks belong to the process: the kernel drops them when it dies however it
 * dies (SIGKILL, the OOM killer), fork() does not pass them to the child, and
 * a later process that happens to get the same pid does not hold them.  So
 *   alive(i)  <=>  state(i) != FREE  and  F_GETLK finds the byte locked
 * is true whatever pids are recycled.  The test is F_OFD_GETLK, which
 * reports a process's record locks to that process too (F_GETLK would not).
 *
 * Locking.  Claim, release and reap change slot states under the table's
 * lock.  Identity fields are written before the state is published with a
 * release store; readers without the lock (monitors) copy the fields between
 * two reads of the generation and throw away a copy that changed under them.
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- liveness ----------------------------------------------------------- */

static int live_lock(shm_table_t *t, int slot, int cmd, short type)
{
    struct flock fl = {
        .l_type = type, .l_whence = SEEK_SET,
        .l_start = SHM_LIVE_BASE + slot, .l_len = 1,
    };
    return fcntl(t->fd, cmd, &fl);
}

int shm_self_peek(const shm_table_t *t)
{
    return shm_self_now(t);
}

int shm_slot_alive(shm_table_t *t, int slot)
{
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS)
        return 0;
    shm_slot_id_t *id = &t->map->slots[slot].id;
    if (util_load_acquire(&id->state) == SHM_FREE)
        return 0;
    if (slot == shm_self_peek(t))
        return 1;
    /* An open-file-description test (l_pid 0, as the kernel requires): it
     * sees the owner's record lock even from the owner's own process, which
     * F_GETLK cannot, so a monitor in any process counts the slot. */
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET,
        .l_start = SHM_LIVE_BASE + slot, .l_len = 1, .l_pid = 0,
    };
    if (fcntl(t->fd, F_OFD_GETLK, &fl) != 0)
        return 1;            /* cannot tell: never reap on doubt */
    return fl.l_type != F_UNLCK;
}

/* ---- identity ----------------------------------------------------------- */

static uint64_t start_ticks(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Field 22; fields after the ")" that closes comm are space-separated. */
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Append src to out[0..len) from position *at, truncating quietly. */
static void append(char *out, size_t len, size_t *at, const char *src)
{
    while (*src && *at + 1 < len)
        out[(*at)++] = *src++;
    out[*at] = '\0';
}

/* SALUS_NAME, else the program's name; for an interpreter (python train.py)
 * the script's name too, which is what a user recognizes in salus-top. */
static void process_name(char *out, size_t len)
{
    const char *env = util_var_text(UTIL_VAR_NAME);
    size_t at = 0;
    out[0] = '\0';
    if (env) {
        append(out, len, &at, env);
        return;
    }
    char cmd[512];
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
    if (f)
        fclose(f);
    cmd[n] = '\0';
    if (n == 0) {
        append(out, len, &at, program_invocation_short_name);
        return;
    }
    const char *argv0 = base_name(cmd);
    const char *argv1 = strlen(cmd) + 1 < n ? cmd + strlen(cmd) + 1 : NULL;
    append(out, len, &at, argv0);
    if (argv1 && strncmp(argv0, "python", 6) == 0 && argv1[0] != '-') {
        append(out, len, &at, " ");
        append(out, len, &at, base_name(argv1));
    }
}

int shm_slot_ident(shm_table_t *t, int slot, shm_ident_t *out)
{
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS)
        return -1;
    shm_slot_id_t *id = &t->map->slots[slot].id;
    uint32_t gen = util_load_acquire(&id->gen);
    uint32_t state = util_load_acquire(&id->state);
    shm_ident_t v;
    v.pid = util_load_relaxed(&id->pid);
    v.uid = util_load_relaxed(&id->uid);
    v.start_ticks = util_load_relaxed(&id->start_ticks);
    v.registered_ns = util_load_relaxed(&id->registered_ns);
    memcpy(v.name, id->name, sizeof v.name);
    util_fence_acquire();
    if (util_load_relaxed(&id->gen) != gen)
        return -1;                         /* claimed or freed under us */
    if (state == SHM_FREE || state >= SHM_STATES || v.pid <= 0)
        return -1;
    v.name[sizeof v.name - 1] = '\0';
    for (char *c = v.name; *c; c++)        /* a peer's bytes go to terminals */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
            *c = '?';
    v.gen = gen;
    v.state = (shm_state_t)state;
    *out = v;
    return 0;
}

uint32_t shm_slot_gen(shm_table_t *t, int slot)
{
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS)
        return 0;
    shm_slot_id_t *id = &t->map->slots[slot].id;
    if (util_load_acquire(&id->state) == SHM_FREE)
        return 0;
    return util_load_acquire(&id->gen);
}

void shm_set_state(shm_table_t *t, int slot, shm_state_t state)
{
    if (!t || t->read_only || slot < 0 || slot >= SHM_MAX_SLOTS ||
        state == SHM_FREE || state >= SHM_STATES)
        return;
    shm_slot_id_t *id = &t->map->slots[slot].id;
    if (util_load_relaxed(&id->state) != SHM_FREE)
        util_store_release(&id->state, (uint32_t)state);
}

/* ---- claim and release -------------------------------------------------- */

#define RELEASE_WAIT_NS (100ull * 1000000)

static void free_slot_locked(shm_table_t *t, int slot)
{
    shm_slot_t *s = &t->map->slots[slot];
    for (int a = 0; a < SHM_AREAS; a++)
        if (t->hooks[a].reap)
            t->hooks[a].reap(t, slot, s->area[a], t->hooks[a].ctx);
    util_store_release(&s->id.state, SHM_FREE);
    t->map->hdr.changes++;
}

/* A slot's next generation.  0 means "no process" to every reader of a
 * (slot, gen) pair (sched's lease holder, memory's views), so a generation
 * that wraps skips it: a slot claimed 2^32 times, or a free slot whose word
 * a stray write set to all ones, must not come back as nobody. */
static uint32_t next_gen(uint32_t gen)
{
    return gen + 1 != 0 ? gen + 1 : 1;
}

static int claim_locked(shm_table_t *t)
{
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        shm_slot_t *s = &t->map->slots[i];
        if (util_load_acquire(&s->id.state) != SHM_FREE)
            continue;
        if (live_lock(t, i, F_SETLK, F_WRLCK) != 0)
            continue;        /* a process between release and unlock: skip */
        memset(s->area, 0, sizeof s->area);
        s->id.pid = (int32_t)getpid();
        s->id.uid = (uint32_t)getuid();
        s->id.start_ticks = start_ticks();
        s->id.registered_ns = util_now_ns();
        memset(s->id.name, 0, sizeof s->id.name);
        process_name(s->id.name, sizeof s->id.name);
        util_store_release(&s->id.gen, next_gen(s->id.gen));
        util_store_release(&s->id.state, SHM_IDLE);
        t->map->hdr.changes++;
        return i;
    }
    return -1;
}

int shm_self(shm_table_t *t)
{
    static int said_full;
    if (!t || t->read_only)
        return -1;
    int self = shm_self_peek(t);
    if (self >= 0)
        return self;
    t->self = -1;            /* a forked child does not own its parent's slot */
    if (shm_lock(t) != 0)
        return -1;
    shm_reap_dead(t, 1);
    self = claim_locked(t);
    if (self >= 0) {         /* before the unlock, which gives back our guest id */
        t->self = self;
        t->self_pid = getpid();
    }
    t->full = self < 0;
    shm_unlock(t);
    if (self < 0) {
        util_log_once(&said_full, UTIL_LOG_ERROR,
                      "table %s is full (%d processes): this process runs without "
                      "Salus until a slot comes free (GPU time slicing then starts at a "
                      "sync or launch; its memory stays uncounted)", t->name, SHM_MAX_SLOTS);
        return -1;
    }
    util_debug("table %s: registered in slot %d", t->name, self);
    return self;
}

int shm_table_full(const shm_table_t *t)
{
    return t && t->full;
}

/* The liveness byte stays locked until the process ends or closes the table:
 * at exit other threads may still be running, and a slot nobody can claim is
 * one they cannot scribble over for a newcomer (claim_locked skips it). */
void shm_release_self(shm_table_t *t)
{
    int self = shm_self_peek(t);
    if (self < 0)
        return;
    if (shm_lock_retry(t, RELEASE_WAIT_NS) == 0) {   /* an exit waits little: else */
        free_slot_locked(t, self);                     /* peers reap the slot after */
        shm_unlock(t);
    }
    t->self = -1;
    util_info("table %s: this process exited and gave its slot %d back", t->name, self);
}

/* ---- reaping and repair ------------------------------------------------- */

int shm_reap_dead(shm_table_t *t, int locked)
{
    if (!t || t->read_only)
        return -1;
    if (!locked && shm_lock(t) != 0)
        return -1;
    int self = shm_self_peek(t), reaped = 0;
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        if (i == self || shm_slot_alive(t, i))
            continue;
        if (util_load_acquire(&t->map->slots[i].id.state) == SHM_FREE)
            continue;
        /* It exited or was killed without releasing its slot: which, we cannot
         * tell, so the message claims neither. */
        util_info("table %s: process %d (slot %d) has ended; giving back what it held",
                  t->name, (int)t->map->slots[i].id.pid, i);
        free_slot_locked(t, i);
        reaped++;
    }
    if (!locked)
        shm_unlock(t);
    return reaped;
}

void shm_repair_locked(shm_table_t *t)
{
    shm_reap_dead(t, 1);
    for (int a = 0; a < SHM_AREAS; a++)
        if (t->hooks[a].repair)
            t->hooks[a].repair(t, t->hooks[a].ctx);
}
