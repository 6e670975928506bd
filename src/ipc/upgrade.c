/*
 * upgrade.c - tables made by other versions of Salus, and what a process
 * does when it finds one at its table's name (a rolling upgrade: jobs of
 * the old version still running when jobs of the new one start).
 *
 * Divided into: what any version's table says of itself; the process's
 * table when another version holds the name; the process's own table (the
 * top of ipc: this file depends on table.c, nothing depends on it).
 *
 * What every version keeps, so that versions can judge each other's tables
 * without reading their layout: the first bytes of the header (magic, then
 * the table ABI), the maker's version text at a fixed offset (tables of
 * ABI 6 made before it was written have zeros there), and the liveness
 * record locks of the processes using it, at SHM_LIVE_BASE + i.
 *
 * The rule, documented in README's "Upgrading", for a table of an older
 * ABI (one of a newer ABI is a newer Salus's, which this one does not
 * judge: the process passes calls through and says so, as before):
 *   - a table of an older ABI that no process uses is made anew for this
 *     version (it is stale: its jobs have ended);
 *   - while processes use it, this process joins the side table
 *     "<name>.abi<N>" of its own ABI beside it, and so does every process
 *     of this version after it, for as long as the side table has live
 *     processes: old jobs keep their table, new jobs share theirs, and the
 *     GPU claims (claim.c) make each table cap its grants by the driver's
 *     free memory, since the other hands out the same GPU's memory;
 *   - once the side table's processes have ended too, the next process
 *     takes the name back (the old table made anew), and removes the side
 *     table if nobody uses it.
 * Two processes that find a stale table at once: each takes the object's
 * INIT lock before removing it and checks that the name still holds that
 * very object, so that only one removes it and the other opens what that
 * one made.
 *
 * No lock of the table is taken (another version's lock word means nothing
 * here); the record locks are the kernel's.
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include "salus_version.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(offsetof(shm_header_t, magic) == 0 && offsetof(shm_header_t, abi_version) == 8,
               "every version's tables start with magic and ABI");
_Static_assert(offsetof(shm_header_t, version) == SHM_VERSION_OFFSET,
               "the maker's version stays where other versions read it");

/* Liveness locks of any version: past this, none has had lockers. */
#define LIVE_SPAN 4096

/* ---- what any version's table says of itself ---------------------------------------- */

/* Processes holding a record lock in the liveness range of the object at
 * fd (this process's own never conflict, so they are not counted). */
static int count_live(int fd)
{
    pid_t seen[64];
    int n = 0;
    off_t at = SHM_LIVE_BASE;
    while (at < SHM_LIVE_BASE + LIVE_SPAN) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at,
                            .l_len = SHM_LIVE_BASE + LIVE_SPAN - at };
        if (fcntl(fd, F_GETLK, &fl) != 0)
            return -1;
        if (fl.l_type == F_UNLCK)
            break;
        int dup = 0;
        for (int i = 0; i < n && !dup; i++)
            dup = seen[i] == fl.l_pid;
        if (!dup && n < (int)(sizeof seen / sizeof *seen))
            seen[n++] = fl.l_pid;
        at = fl.l_start + (fl.l_len > 0 ? fl.l_len : 1);
    }
    return n;
}

int shm_table_about(const char *name, shm_table_about_t *out)
{
    char path[SHM_TABLE_NAME_BYTES + 16];
    if (!name || name[0] != '/' || !util_table_name_ok(name) || !out)
        return -EINVAL;
    snprintf(path, sizeof path, "%s%s", SHM_DIR, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    shm_table_about_t a;
    memset(&a, 0, sizeof a);
    uint8_t head[SHM_VERSION_OFFSET + SHM_VERSION_BYTES];
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = -EPROTO;
    else if (pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head) {
        uint64_t magic;
        memcpy(&magic, head, sizeof magic);
        if (magic == SHM_MAGIC) {
            memcpy(&a.abi, head + 8, sizeof a.abi);
            memcpy(a.version, head + SHM_VERSION_OFFSET, SHM_VERSION_BYTES - 1);
            a.version[SHM_VERSION_BYTES - 1] = '\0';
            for (char *c = a.version; *c; c++)          /* another version's bytes */
                if (*c < 0x20 || *c >= 0x7f)
                    *c = '?';
        }
    }
    if (rc == 0)
        a.live = count_live(fd);
    close(fd);
    if (rc == 0)
        *out = a;
    return rc;
}

/* "Salus 0.3.0" or "an older Salus", for messages. */
static void maker(const shm_table_about_t *a, char *buf, size_t len)
{
    if (a->version[0])
        snprintf(buf, len, "Salus %s", a->version);
    else
        snprintf(buf, len, "an older Salus");
}

/* ---- the process's table when another version holds the name ------------------------- */

static int open_named(const char *name, const char *group, int create, int quiet,
                      shm_table_t **out)
{
    shm_open_opts_t o = { .name = name, .group = group, .create = create, .quiet = quiet };
    return shm_open_table(&o, out);
}

/* Remove the stale table of another version at `name`, once: under its
 * INIT lock, if the name still holds that object and nobody uses it.  0
 * when it is gone (by us or by a peer), -1 when it is in use after all. */
static int remove_stale(const char *name)
{
    char path[SHM_TABLE_NAME_BYTES + 16];
    snprintf(path, sizeof path, "%s%s", SHM_DIR, name);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LOCK_INIT,
                        .l_len = 1 };
    uint64_t deadline = util_now_ns() + 2000ull * 1000 * 1000;
    int rc = -1;
    while (fcntl(fd, F_SETLK, &fl) != 0 && util_now_ns() < deadline) {
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    struct stat mine, now;
    if (fstat(fd, &mine) == 0 && count_live(fd) == 0) {
        if (lstat(path, &now) != 0)
            rc = 0;                              /* a peer removed it first */
        else if (now.st_dev == mine.st_dev && now.st_ino == mine.st_ino) {
            int r = shm_unlink_table(name);
            rc = r == 0 || r == -ENOENT ? 0 : -1;
        }
        else
            rc = 0;                              /* a peer made it anew */
    }
    close(fd);                                   /* drops our INIT lock */
    return rc;
}

/* The side table's name, "<name>.abi<N>"; "" when it would be too long. */
static void side_name(const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s.abi%u", name, (unsigned)SHM_ABI_VERSION);
    if (n < 0 || (size_t)n >= len || n >= SHM_TABLE_NAME_BYTES || !util_table_name_ok(buf))
        buf[0] = '\0';
}

static int side_in_use(const char *side)
{
    shm_table_about_t a;
    return side[0] && shm_table_about(side, &a) == 0 && a.abi == SHM_ABI_VERSION && a.live > 0;
}

int shm_open_for_process(const char *name, const char *group, shm_table_t **out)
{
    char side[SHM_TABLE_NAME_BYTES + 16], who[48];
    static int said_side, said_new, said_join;
    side_name(name, side, sizeof side);
    /* This version's processes already share the side table: join them. */
    if (side_in_use(side) && open_named(side, group, 0, 1, out) == 0) {
        util_log_once(&said_join, UTIL_LOG_INFO, "table %s is another version's; this "
                      "process joins this version's processes in %s", name, side);
        return 0;
    }
    int rc = open_named(name, group, 1, 1, out);
    if (rc != -EPROTO)
        return rc == 0 ? 0 : open_named(name, group, 1, 0, out);   /* said, this time */
    shm_table_about_t a;
    if (shm_table_about(name, &a) != 0 || a.abi == 0 || a.abi >= SHM_ABI_VERSION)
        return open_named(name, group, 1, 0, out);   /* not an older version's: said */
    maker(&a, who, sizeof who);
    if (a.live == 0 && remove_stale(name) == 0) {
        if (side[0] && !side_in_use(side))
            shm_unlink_table(side);                  /* the last upgrade's, unused */
        rc = open_named(name, group, 1, 0, out);
        if (rc == 0)
            util_log_once(&said_new, UTIL_LOG_WARN, "table %s was made by %s (table ABI "
                          "%u) and no process uses it any more: made anew for Salus %s "
                          "(table ABI %u)", name, who, (unsigned)a.abi, SALUS_VERSION,
                          (unsigned)SHM_ABI_VERSION);
        return rc;
    }
    if (!side[0])
        return open_named(name, group, 1, 0, out);   /* no room for a side name: said */
    rc = open_named(side, group, 1, 0, out);
    if (rc == 0)
        util_log_once(&said_side, UTIL_LOG_WARN, "table %s is in use by %d process%s of %s "
                      "(table ABI %u); this process, of Salus %s (table ABI %u), uses table "
                      "%s beside it until they end: the two tables share each GPU's memory "
                      "by the driver's free memory, not its time (salus status shows both)",
                      name, a.live, a.live == 1 ? "" : "es", who, (unsigned)a.abi,
                      SALUS_VERSION, (unsigned)SHM_ABI_VERSION, side);
    return rc;
}

/* ---- the process's own table ---------------------------------------------------------- */

static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static shm_table_t *process_table;

/* The default name, or beside another version's table there. */
static void open_process_table(void)
{
    shm_table_t *t;
    char name[SHM_TABLE_NAME_BYTES];
    if (shm_default_name(name, sizeof name, 0) == 0 &&
        shm_open_for_process(name, util_var_text(UTIL_VAR_GROUP), &t) == 0)
        process_table = t;
}

shm_table_t *shm_process_table(void)
{
    pthread_once(&process_once, open_process_table);
    return process_table;
}

/* A normal exit gives the slot back at once, so that what the process held
 * shows as free without waiting for a peer to reap it.  A destructor, not an
 * atexit handler: it runs after every atexit handler (the scheduler's release
 * of the lease, the report, which reads the slot), whenever they were
 * registered.  A forked child that never claimed a slot releases nothing. */
__attribute__((destructor)) static void process_table_exit(void)
{
    if (process_table)
        shm_release_self(process_table);
}
