/*
 * claim.c - two tables on one GPU: a claim file per GPU names the table
 * that hands out its memory, so that a second table (another user's,
 * another group's, another SALUS_TABLE) finds that its budget overlaps
 * another's, says so, and marks the device shared: memory then caps every
 * grant on it by the driver's free memory (account.c).
 *
 * Divided into: names and holding; reading a claim; telling the other
 * table; claiming (which first sweeps, once per process, the claims of
 * tables removed by hand); forgetting the claims of removed tables.
 *
 * The claim is /dev/shm/salus-gpu-<32 hex of the UUID>, mode 0644, one line
 * "<uid> <table name>".  It is made with O_CREAT|O_EXCL|O_NOFOLLOW and
 * written before anyone can read it whole: a reader that finds it empty or
 * short (its maker between the create and the write) reads again for a few
 * milliseconds, then takes it for stale.  Every process of the claiming
 * table holds a read lock on the claim's first byte while it lives (a
 * record lock: the kernel drops it at the process's end), so that a claim
 * nobody holds is stale whether or not its table's object is still there
 * (tables outlive their processes): it is taken over by renaming a file of
 * ours over it (atomic: a reader sees the old claim or the new one), then
 * read again, so that of two processes taking it over at once the one whose
 * rename lost sees the winner's table.  Not covered: a reader that comes
 * between a claim's creation and its maker's lock (microseconds) takes it
 * for stale.  A claim of another user in the sticky /dev/shm cannot be
 * replaced: it stays, said at debug level.
 *
 * A table's removal (shm_unlink_table) removes the claims naming it that
 * nobody holds, so that removed tables leave no files behind; a claim is
 * removed under a write lock on its first byte, which the kernel grants only
 * while no process holds its read lock: a live table's claim stays, and so
 * does another user's, which this user cannot open for writing.  Never one
 * that this process holds: closing any fd of the file would drop its lock.
 *
 * No lock: called outside the table's lock; the shared flags are bytes of
 * the table's header set with a relaxed store and never cleared, read
 * relaxed (a grant that misses a flag set meanwhile is one grant capped
 * the old way).
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CLAIM_BYTES 128

/* ---- names ---------------------------------------------------------------- */

void shm_claim_path(const uint8_t uuid[16], char *buf, size_t len)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
    snprintf(buf, len, "%s/salus-gpu-%s", SHM_DIR, hex);
}

static void uuid_text(const uint8_t u[16], char out[48])
{
    snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
             u[12], u[13], u[14], u[15]);
}

/* Whether a process other than this one holds its read lock on the claim
 * open at fd: 1 yes (its table uses the GPU now), 0 no, -1 unknown. */
static int claim_held(int fd)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    if (fcntl(fd, F_GETLK, &fl) != 0)
        return -1;
    return fl.l_type != F_UNLCK;
}

/* The claim each device's lock is held on, and by which process (a forked
 * child inherits the array, not the locks).  The file's identity is written
 * before the pid is released, so that a reader that sees our pid sees it. */
static struct {
    int pid;
    dev_t dev;
    ino_t ino;
} held[SHM_MAX_DEVICES];

/* Hold a read lock on the claim for as long as this process lives: what
 * tells another table that ours uses the GPU (the kernel drops it when the
 * process ends; a forked child holds none, its parent does).  The fd stays
 * open: closing any fd of the file would drop the lock. */
static void hold_claim(const char *path, int device)
{
    struct flock fl = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    if (util_load_relaxed(&held[device].pid) == getpid())
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fcntl(fd, F_SETLK, &fl) != 0) {
        close(fd);
        return;
    }
    held[device].dev = st.st_dev;
    held[device].ino = st.st_ino;
    util_store_release(&held[device].pid, getpid());
}

/* Whether this process holds its lock on the file st describes. */
static int held_here(const struct stat *st)
{
    for (int d = 0; d < SHM_MAX_DEVICES; d++)
        if (util_load_acquire(&held[d].pid) == getpid() &&
            held[d].dev == st->st_dev && held[d].ino == st->st_ino)
            return 1;
    return 0;
}

/* ---- reading a claim ------------------------------------------------------ */

/* What the claim open at fd names: 0 with name and uid, 1 when it names
 * none yet (empty, short, garbled). */
static int parse_claim(int fd, char name[SHM_TABLE_NAME_BYTES], unsigned *uid)
{
    char buf[CLAIM_BYTES + 1], tn[SHM_TABLE_NAME_BYTES];
    unsigned u;
    ssize_t n = pread(fd, buf, CLAIM_BYTES, 0);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    if (sscanf(buf, "%u %63s", &u, tn) != 2 || !memchr(buf, '\n', (size_t)n) ||
        tn[0] != '/' || !util_table_name_ok(tn))
        return 1;
    snprintf(name, SHM_TABLE_NAME_BYTES, "%s", tn);
    *uid = u;
    return 0;
}

/* The table a claim names: 0 with name, uid and *live (a process of that
 * table holds the claim), 1 when it names none yet (empty, short,
 * garbled), -errno when it cannot be opened (ENOENT: gone). */
static int read_once(const char *path, char name[SHM_TABLE_NAME_BYTES], unsigned *uid,
                     int *live)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CLAIM_BYTES) {
        close(fd);
        return -EPERM;                   /* not a claim: someone put it there */
    }
    int rc = parse_claim(fd, name, uid);
    *live = claim_held(fd) != 0;              /* unknown: taken for live */
    close(fd);
    return rc;
}

static int read_claim(const char *path, char name[SHM_TABLE_NAME_BYTES], unsigned *uid,
                      int *live)
{
    for (int ms = 0;; ms++) {
        int rc = read_once(path, name, uid, live);
        if (rc != 1 || ms >= 20)
            return rc;
        struct timespec d = { 0, 1000000 };
        nanosleep(&d, NULL);
    }
}

/* ---- telling the other table ---------------------------------------------- */

/* Mark the device with this UUID shared in table `name` too, when this
 * process may write it (the same user, or its group): one byte of its
 * header, after checking that the object is a table of this layout.
 * 0 done, -1 not. */
static int mark_other(const char *name, const uint8_t uuid[16])
{
    char path[SHM_TABLE_NAME_BYTES + 16];
    shm_header_t h;
    struct stat st;
    int rc = -1;
    snprintf(path, sizeof path, "%s%s", SHM_DIR, name);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size != sizeof(shm_layout_t) ||
        pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || h.magic != SHM_MAGIC ||
        h.abi_version != SHM_ABI_VERSION || h.ready != 1 || h.size != sizeof(shm_layout_t))
        goto out_close;
    uint32_t n = h.devices < SHM_MAX_DEVICES ? h.devices : SHM_MAX_DEVICES;
    for (uint32_t d = 0; d < n; d++) {
        if (memcmp(h.dev_uuid[d], uuid, 16) != 0)
            continue;
        uint8_t one = 1;
        off_t at = (off_t)(offsetof(shm_layout_t, hdr.dev_shared) + d);
        rc = pwrite(fd, &one, 1, at) == 1 ? 0 : -1;
        break;
    }
out_close:
    close(fd);
    return rc;
}

/* ---- claiming ----------------------------------------------------------- */

/* Write our claim to a new file at `path` (O_EXCL), or to a file of ours
 * renamed over it (`replace`: a stale claim).  0 or -errno. */
static int write_claim(shm_table_t *t, const char *path, int replace)
{
    char tmp[SHM_CLAIM_PATH_BYTES + 32], line[CLAIM_BYTES];
    const char *at = path;
    if (replace) {
        snprintf(tmp, sizeof tmp, "%s.new-%d", path, (int)getpid());
        at = tmp;
    }
    int fd = open(at, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int len = snprintf(line, sizeof line, "%u %s\n", (unsigned)geteuid(), t->name);
    int err = fchmod(fd, 0644) != 0 || write(fd, line, (size_t)len) != len ? -EIO : 0;
    close(fd);
    if (!err && replace && rename(tmp, path) != 0)
        err = -errno;
    if (err && replace)
        unlink(tmp);
    return err;
}

static void say_shared(shm_table_t *t, int device, const uint8_t uuid[16], const char *other,
                       unsigned uid, int told)
{
    static int said[SHM_MAX_DEVICES];
    char u[48];
    uuid_text(uuid, u);
    util_log_once(&said[device], UTIL_LOG_WARN, "table %s and table %s (uid %u) both hand "
                  "out the memory of %s: their budgets overlap, and what one grants the "
                  "other may have granted too. Salus now caps every grant on it by the "
                  "driver's free memory%s. Run the jobs of one GPU under one table: "
                  "SALUS_TABLE=%s", t->name, other, uid, u,
                  told ? " in both tables" : " in this table (the other's processes, "
                  "which this user cannot tell, see it only when the driver refuses them)",
                  other);
}

/* The claims of tables removed without their claims (by hand, rm
 * /dev/shm/salus-..., or by an older Salus) would pile up, one per GPU UUID
 * they used: the first claim a process makes sweeps them, once per process
 * (a readdir of /dev/shm, at a device's registration, never on a fast
 * path).  Only claims nobody holds and whose table's object is gone go. */
static void sweep_once(void)
{
    static int swept;
    if (!__atomic_exchange_n(&swept, 1, __ATOMIC_RELAXED)) {
        int n = shm_forget_claims(NULL);
        if (n > 0)
            util_debug("removed %d GPU claims of tables that are gone", n);
    }
}

int shm_device_claim(shm_table_t *t, int device, const uint8_t uuid[16])
{
    char path[SHM_CLAIM_PATH_BYTES], name[SHM_TABLE_NAME_BYTES];
    unsigned uid = 0;
    if (!t || t->read_only || device < 0 || device >= SHM_MAX_DEVICES || !uuid)
        return -1;
    sweep_once();
    shm_claim_path(uuid, path, sizeof path);
    int live = 0;
    for (int tries = 0; tries < 3; tries++) {
        int rc = write_claim(t, path, 0);
        if (rc == 0) {
            hold_claim(path, device);                /* the GPU's first table */
            return 0;
        }
        if (rc != -EEXIST)
            break;
        rc = read_claim(path, name, &uid, &live);
        if (rc == -ENOENT)
            continue;                                /* removed meanwhile: again */
        if (rc < 0)
            break;
        if (rc == 0 && strcmp(name, t->name) == 0) {
            hold_claim(path, device);
            return 0;
        }
        if (rc == 0 && live) {
            util_store_relaxed(&t->map->hdr.dev_shared[device], 1);
            say_shared(t, device, uuid, name, uid, mark_other(name, uuid) == 0);
            return 1;
        }
        /* Stale (no process of its table holds it) or never written: ours,
         * then read again. */
        if (write_claim(t, path, 1) != 0)
            break;
    }
    util_debug("the claim %s of this GPU could not be checked or taken; two tables on it "
               "would not be told apart", path);
    return -1;
}

int shm_device_shared(shm_table_t *t, int device)
{
    if (!t || device < 0 || device >= SHM_MAX_DEVICES)
        return 0;
    return util_load_relaxed(&t->map->hdr.dev_shared[device]) == 1;
}

/* ---- forgetting the claims of removed tables ------------------------------ */

/* Whether a claim naming table tn is one to forget: it names `name`, or
 * with name NULL, a table whose object is gone. */
static int claim_of(const char *tn, const char *name)
{
    char path[SHM_TABLE_NAME_BYTES + 16];
    struct stat st;
    if (name)
        return strcmp(tn, name) == 0;
    snprintf(path, sizeof path, "%s%s", SHM_DIR, tn);
    return lstat(path, &st) != 0 && errno == ENOENT;
}

/* Remove the claim at path when it is one to forget and nobody holds it:
 * opened for writing (another user's cannot be), read, write-locked (refused
 * while any process holds its read lock), checked to be still the file at
 * path (not one renamed over it meanwhile), unlinked; closing the fd drops
 * our lock.  A process of a new table that comes to hold it in the
 * microseconds of our lock is refused its lock and goes on without, as a
 * reader between a claim's creation and its maker's lock does.  1 removed,
 * 0 not. */
static int forget_one(const char *path, const char *name)
{
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
    struct stat st, now;
    char tn[SHM_TABLE_NAME_BYTES];
    unsigned uid;
    int removed = 0;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || held_here(&st))
        return 0;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CLAIM_BYTES ||
        held_here(&st) || parse_claim(fd, tn, &uid) != 0 || !claim_of(tn, name) ||
        fcntl(fd, F_SETLK, &fl) != 0)
        goto out_close;
    if (lstat(path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino)
        removed = unlink(path) == 0;
out_close:
    close(fd);
    return removed;
}

/* A claim's file name: salus-gpu- and 32 hex digits (not a taker's
 * temporary .new-<pid>). */
static int claim_file_name(const char *n)
{
    if (strncmp(n, "salus-gpu-", 10) != 0 || strlen(n) != 42)
        return 0;
    return strspn(n + 10, "0123456789abcdef") == 32;
}

int shm_forget_claims(const char *name)
{
    if (name && (name[0] != '/' || !util_table_name_ok(name)))
        return -EINVAL;
    DIR *dir = opendir(SHM_DIR);
    if (!dir)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char path[SHM_CLAIM_PATH_BYTES];
        if (!claim_file_name(e->d_name))
            continue;
        snprintf(path, sizeof path, "%s/%s", SHM_DIR, e->d_name);
        n += forget_one(path, name);
    }
    closedir(dir);
    return n;
}
