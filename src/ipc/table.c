/*
 * table.c - the arbitration table's life: its name, creation, attachment and
 * validation.
 *
 * Divided into: names; opening (create or attach, then validate).  The lock
 * is lock.c, slots slots.c, and what the table offers below the lock (areas,
 * hooks, devices, futexes) area.c: this file depends on them and none on it
 * but upgrade.c, the top of ipc, which picks the process's own table (and
 * what to do when another version holds its name).
 *
 * Creation race.  The creator and every attacher take a record lock on the
 * INIT byte before looking at the object; whoever holds it and finds the
 * object empty (size 0, or a header never marked ready because its creator
 * died half-way) initializes it and marks it ready with a release store.
 * Nobody uses a table whose `ready` it has not read as 1 with an acquire load,
 * so a half-made table is never seen.  The INIT lock is taken with a deadline:
 * a peer that holds it for seconds is hung, and we fail open rather than hang.
 *
 * One fd per table per process.  POSIX record locks belong to the process and
 * are all dropped when it closes any fd of the file, so a process opens its
 * table once (shm_process_table, upgrade.c) and keeps it open until it exits.
 */
#include "ipc/shm_layout.h"
#include "salus_version.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define INIT_LOCK_WAIT_NS  (2000ull * 1000 * 1000)

/* The open in progress on this thread asked for quiet (shm_open_opts_t):
 * every message of opening goes through open_error, which drops it. */
static __thread int open_quiet;
#define open_error(...)                 \
    do {                                \
        if (!open_quiet)                \
            util_error(__VA_ARGS__);    \
    } while (0)

static const char *const state_names[SHM_STATES] = {
    "free", "idle", "running", "waiting-gpu", "waiting-mem",
};

const char *shm_state_name(shm_state_t state)
{
    return (unsigned)state < SHM_STATES ? state_names[state] : "invalid";
}

/* ---- names -------------------------------------------------------------- */

/* A POSIX shm name: one leading '/', then [A-Za-z0-9._-], at most 62 chars. */
static int valid_name(const char *name)
{
    return name[0] == '/' && util_table_name_ok(name);
}

int shm_default_name(char *buf, size_t len, int quiet)
{
    const char *table = util_var_text(UTIL_VAR_TABLE);
    const char *group = util_var_text(UTIL_VAR_GROUP);
    char name[SHM_TABLE_NAME_BYTES + 8];
    if (table)
        snprintf(name, sizeof name, "%s%s", table[0] == '/' ? "" : "/", table);
    else if (group)
        snprintf(name, sizeof name, "/salus-group-%s", group);
    else
        snprintf(name, sizeof name, "/salus-%u", (unsigned)getuid());
    if (!valid_name(name) || strlen(name) + 1 > len) {
        if (!quiet)
            util_error("SALUS_TABLE / SALUS_GROUP give the table name \"%s\", which is not "
                   "accepted: it takes letters, digits, '.', '_' and '-', at most 62 of "
                   "them", name);
        return -EINVAL;
    }
    memcpy(buf, name, strlen(name) + 1);
    return 0;
}

/* ---- opening ------------------------------------------------------------ */

static int group_id(const char *group, gid_t *out)
{
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(group, &gr, buf, sizeof buf, &res) != 0 || !res) {
        open_error("SALUS_GROUP=\"%s\" is not a group of this machine; name a group "
                   "whose members share the GPU (see getent group)", group);
        return -EINVAL;
    }
    *out = res->gr_gid;
    return 0;
}

static int record_lock(int fd, int cmd, short type, off_t at)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };
    return fcntl(fd, cmd, &fl);
}

/* The INIT lock, with a deadline. */
static int init_lock(int fd, const char *name)
{
    uint64_t deadline = util_now_ns() + INIT_LOCK_WAIT_NS;
    while (record_lock(fd, F_SETLK, F_WRLCK, SHM_LOCK_INIT) != 0) {
        if ((errno != EAGAIN && errno != EACCES) || util_now_ns() > deadline) {
            open_error("table %s: another process has been setting it up for 2 s "
                       "and seems hung; Salus passes calls through for this process", name);
            return -ETIMEDOUT;
        }
        struct timespec ts = { 0, 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void init_layout(shm_layout_t *m)
{
    memset(m, 0, sizeof *m);
    m->hdr.magic = SHM_MAGIC;
    m->hdr.abi_version = SHM_ABI_VERSION;
    m->hdr.size = sizeof *m;
    m->hdr.max_slots = SHM_MAX_SLOTS;
    m->hdr.max_devices = SHM_MAX_DEVICES;
    m->hdr.slot_area = SHM_SLOT_AREA_BYTES;
    m->hdr.device_area = SHM_DEVICE_AREA_BYTES;
    m->hdr.global_area = SHM_GLOBAL_AREA_BYTES;
    m->hdr.creator_uid = (uint32_t)getuid();
    m->hdr.creator_pid = (int32_t)getpid();
    m->hdr.created_ns = util_now_ns();
    snprintf(m->hdr.version, sizeof m->hdr.version, "%s", SALUS_VERSION);
    util_store_release(&m->hdr.ready, 1);
}

/* The path of a table's object: glibc's shm_open puts every name there. */
static void object_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", SHM_DIR, name);
}

static const char *file_kind(mode_t mode)
{
    return S_ISFIFO(mode) ? "a FIFO" : S_ISLNK(mode) ? "a symbolic link" :
           S_ISDIR(mode) ? "a directory" : S_ISSOCK(mode) ? "a socket" :
           S_ISCHR(mode) || S_ISBLK(mode) ? "a device" : "not a regular file";
}

/* Refuse an object we must not use, from its fstat, before reading a byte of
 * it: not a regular file (a FIFO planted there would hang a reader), of
 * another user without a group, writable or readable beyond its owner
 * without a group, beyond its group with one, or not writable by a host. */
static int check_file(int fd, const char *name, const shm_open_opts_t *o, gid_t gid)
{
    struct stat st;
    char path[SHM_TABLE_NAME_BYTES + 16];
    object_path(name, path, sizeof path);
    if (fstat(fd, &st) != 0) {
        int err = -errno;
        open_error("table %s: cannot examine %s: %s; Salus passes calls through", name,
                   path, strerror(-err));
        return err;
    }
    unsigned mode = (unsigned)(st.st_mode & 0777);
    if (!S_ISREG(st.st_mode)) {
        open_error("table %s: %s is %s, not a table: someone put it there (`ls -l %s` "
                   "shows who); Salus passes calls through until it is removed", name,
                   path, file_kind(st.st_mode), path);
        return -EPERM;
    }
    if (!o->group && st.st_uid != geteuid()) {
        open_error("table %s belongs to uid %u, not to this user: someone took the name "
                   "(`ls -l %s` shows who). Set SALUS_TABLE to a name of your own, or "
                   "SALUS_GROUP to a group that shares one", name, (unsigned)st.st_uid,
                   path);
        return -EPERM;
    }
    if ((st.st_mode & 0007) || (!o->group && (st.st_mode & 0070))) {
        open_error("table %s has mode %03o: it is open to %s, so Salus will not trust "
                   "it; remove it with `salus reset --force` (or rm %s)%s", name, mode,
                   st.st_mode & 0007 ? "every user of the machine" : "its group",
                   path, st.st_mode & 0007 ? "" : ", or name that group in SALUS_GROUP");
        return -EPERM;
    }
    if (o->group && st.st_gid != gid) {
        open_error("table %s is in group %u, not in group %s (`ls -l %s` shows it); "
                   "remove it with `salus reset` or choose another SALUS_TABLE", name,
                   (unsigned)st.st_gid, o->group, path);
        return -EPERM;
    }
    if (!o->read_only && !(st.st_mode & S_IWUSR)) {
        open_error("table %s has mode %03o: its owner cannot write to it, so this "
                   "process cannot take part; chmod 600 %s, or remove it with `salus "
                   "reset`", name, mode, path);
        return -EACCES;
    }
    return 0;
}

static int validate(const shm_layout_t *m, const char *name)
{
    const shm_header_t *h = &m->hdr;
    char what[128];
    if (h->magic != SHM_MAGIC)
        snprintf(what, sizeof what, "is not a Salus table (bad magic)");
    else if (h->abi_version != SHM_ABI_VERSION)
        snprintf(what, sizeof what, "was made by another version of Salus (table ABI %u, "
                 "this library's %u)", h->abi_version, SHM_ABI_VERSION);
    else if (h->size != sizeof *m || h->max_slots != SHM_MAX_SLOTS ||
             h->max_devices != SHM_MAX_DEVICES || h->slot_area != SHM_SLOT_AREA_BYTES ||
             h->device_area != SHM_DEVICE_AREA_BYTES || h->global_area != SHM_GLOBAL_AREA_BYTES)
        snprintf(what, sizeof what, "has another layout (corrupted, or made by another "
                 "build of Salus)");
    else
        return 0;
    open_error("table %s %s; Salus passes calls through for this process; once no "
               "process uses that table, remove it with `salus reset`, or set SALUS_TABLE "
               "to another name", name, what);
    return -EPROTO;
}

/* Open (or create) the object without following a link and without
 * blocking on a FIFO: what it is gets checked before anything else. */
static int open_fd(const char *name, const shm_open_opts_t *o, mode_t mode, int *created)
{
    int flags = (o->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
    char path[SHM_TABLE_NAME_BYTES + 16];
    object_path(name, path, sizeof path);
    *created = 0;
    for (int tries = 0; tries < 3; tries++) {
        int fd = open(path, flags);
        if (fd >= 0 || errno != ENOENT || !o->create || o->read_only)
            return fd >= 0 ? fd : -errno;
        fd = open(path, flags | O_CREAT | O_EXCL, mode);
        if (fd >= 0) {
            *created = 1;
            return fd;
        }
        if (errno != EEXIST)
            return -errno;
    }
    return -EAGAIN;
}

/* Why the object could not be opened, from what lstat says of it. */
static void say_open_error(const char *name, int err, const shm_open_opts_t *o)
{
    char path[SHM_TABLE_NAME_BYTES + 16];
    struct stat st;
    object_path(name, path, sizeof path);
    int seen = lstat(path, &st) == 0;
    if (err == -ENOENT && o->read_only)
        return;                              /* a monitor before any host: quiet */
    if (err == -ELOOP || (seen && S_ISLNK(st.st_mode)))
        open_error("table %s: %s is a symbolic link, which Salus does not follow: "
                   "someone put it there (`ls -l %s` shows who); Salus passes calls "
                   "through until it is removed", name, path, path);
    else if (err == -EACCES && seen && st.st_uid == geteuid())
        open_error("table %s has mode %03o: it does not let its owner %s it; chmod 600 "
                   "%s, or remove it with `salus reset`", name,
                   (unsigned)(st.st_mode & 0777), o->read_only ? "read" : "write to", path);
    else if (err == -EACCES)
        open_error("table %s belongs to another user (uid %d; `ls -l %s` shows who) and "
                   "is not open to this one. Set SALUS_TABLE to a name of your own, or "
                   "SALUS_GROUP to a group that shares it", name,
                   seen ? (int)st.st_uid : -1, path);
    else
        open_error("table %s: cannot %s %s: %s; Salus passes calls through", name,
                   o->create && !o->read_only ? "open or create" : "open", path,
                   strerror(-err));
}

/* Give the object its pages for real: ftruncate alone leaves it sparse, and
 * the first write to a page that a full /dev/shm cannot back is a SIGBUS. */
static int allocate(shm_table_t *t)
{
    int err = posix_fallocate(t->fd, 0, (off_t)sizeof(shm_layout_t));
    if (err == 0)
        return 0;
    open_error("table %s: cannot allocate its %zu KiB in %s: %s; %s is full or too "
               "small (see df -h %s; a container's default is 64M, set with docker's "
               "--shm-size). Salus passes calls through for this process", t->name,
               sizeof(shm_layout_t) / 1024, SHM_DIR, strerror(err), SHM_DIR, SHM_DIR);
    return -err;
}

/* The header's `ready` and `magic`, read with pread: no mapping, so an object
 * that shrinks meanwhile cannot fault. */
static int peek_header(shm_table_t *t, uint32_t *ready, uint64_t *magic)
{
    shm_header_t h;
    ssize_t n = pread(t->fd, &h, sizeof h, 0);
    if (n != (ssize_t)sizeof h)
        return n < 0 ? -errno : -EAGAIN;
    *ready = h.ready;
    *magic = h.magic;
    return 0;
}

static int map_error(shm_table_t *t, const char *what, int err)
{
    open_error("table %s: %s failed: %s; Salus passes calls through for this process",
               t->name, what, strerror(-err));
    return err;
}

/* With the INIT lock held (unless read-only): make the object a table if it
 * is not one yet, and map it.  A table is made in this order: allocate its
 * pages, map, write the layout, mark it ready; an object left at any step by
 * a creator that failed or died is made again by the next process. */
static int map_table(shm_table_t *t, int created)
{
    struct stat st;
    uint32_t ready = 0;
    uint64_t magic = 0;
    int err, prot = t->read_only ? PROT_READ : PROT_READ | PROT_WRITE;
    if (fstat(t->fd, &st) != 0)
        return map_error(t, "fstat", -errno);
    if (st.st_size == 0 && t->read_only)
        return -EAGAIN;                      /* a monitor, before the creator */
    if (st.st_size != 0 && (size_t)st.st_size != sizeof(shm_layout_t)) {
        open_error("table %s is %lld bytes, not the %zu this version of Salus uses; "
                   "remove it with `salus reset` once no process uses it, or set "
                   "SALUS_TABLE to another name", t->name, (long long)st.st_size,
                   sizeof(shm_layout_t));
        return -EPROTO;
    }
    if (st.st_size != 0 && (err = peek_header(t, &ready, &magic)) != 0)
        return t->read_only && err == -EAGAIN      /* a monitor: it shrank, retry */
                   ? err : map_error(t, "reading its header", err == -EAGAIN ? -EIO : err);
    int make = !ready && !t->read_only;
    if (!ready && t->read_only)
        return -EAGAIN;
    if (make && !created && magic != 0 && magic != SHM_MAGIC) {
        shm_header_t h = { .magic = magic };
        return validate((const shm_layout_t *)&h, t->name);   /* someone else's */
    }
    if (make && (err = allocate(t)) != 0)
        return err;
    void *m = mmap(NULL, sizeof(shm_layout_t), prot, MAP_SHARED, t->fd, 0);
    if (m == MAP_FAILED)
        return map_error(t, "mmap", -errno);
    t->map = m;
    shm_guard_add(t);
    if (make)
        init_layout(t->map);                 /* new, or its creator failed or died */
    else if (!util_load_acquire(&t->map->hdr.ready))
        return -EAGAIN;
    return validate(t->map, t->name);
}

static int open_table(const shm_open_opts_t *opts, shm_table_t **out);

int shm_open_table(const shm_open_opts_t *opts, shm_table_t **out)
{
    int saved = open_quiet;
    open_quiet = opts && opts->quiet;
    int rc = open_table(opts, out);
    open_quiet = saved;
    return rc;
}

static int open_table(const shm_open_opts_t *opts, shm_table_t **out)
{
    shm_open_opts_t o = opts ? *opts : (shm_open_opts_t){ .create = 1 };
    char name[SHM_TABLE_NAME_BYTES];
    gid_t gid = 0;
    int err, created;

    if (o.name) {
        if (!valid_name(o.name)) {
            open_error("\"%s\" is not a table name: it takes '/' then letters, digits, "
                       "'.', '_' and '-'", o.name);
            return -EINVAL;
        }
        snprintf(name, sizeof name, "%s", o.name);
    } else if ((err = shm_default_name(name, sizeof name, o.quiet)) != 0) {
        return err;
    }
    if (!opts)                               /* the process's own table */
        o.group = util_var_text(UTIL_VAR_GROUP);
    if (o.group && (err = group_id(o.group, &gid)) != 0)
        return err;

    shm_table_t *t = calloc(1, sizeof *t);
    if (!t) {
        util_error("table %s: out of memory for its handle; Salus passes calls through",
                   name);
        return -ENOMEM;
    }
    t->self = -1;
    t->repair_locked = shm_repair_locked;
    t->guest = -1;
    t->read_only = o.read_only;
    snprintf(t->name, sizeof t->name, "%s", name);
    mode_t mode = o.group ? 0660 : 0600;

    t->fd = open_fd(name, &o, mode, &created);
    if (t->fd < 0) {
        err = t->fd;
        say_open_error(name, err, &o);
        goto out_free;
    }
    if (created) {
        /* open's mode passes through the umask: set it exactly. */
        if (fchmod(t->fd, mode) != 0 ||
            (o.group && fchown(t->fd, (uid_t)-1, gid) != 0)) {
            err = -errno;
            open_error("table %s: cannot give it mode %03o%s%s: %s", name, (unsigned)mode,
                       o.group ? " and group " : "", o.group ? o.group : "",
                       strerror(-err));
            shm_unlink(name);
            goto out_close;
        }
    }
    if ((err = check_file(t->fd, name, &o, gid)) != 0)
        goto out_close;
    if (!t->read_only && (err = init_lock(t->fd, name)) != 0)
        goto out_close;
    err = map_table(t, created);
    if (!t->read_only)
        record_lock(t->fd, F_SETLK, F_UNLCK, SHM_LOCK_INIT);
    if (err != 0)
        goto out_unmap;
    *out = t;
    return 0;

out_unmap:
    if (t->map) {
        shm_guard_remove(t);
        munmap(t->map, sizeof(shm_layout_t));
    }
out_close:
    close(t->fd);
out_free:
    free(t);
    return err;
}

void shm_close_table(shm_table_t *t)
{
    if (!t)
        return;
    shm_release_self(t);
    shm_lock_forget(t);
    shm_guard_remove(t);
    munmap(t->map, sizeof(shm_layout_t));
    close(t->fd);
    free(t);
}

const char *shm_table_name(const shm_table_t *t)
{
    return t->name;
}

int shm_unlink_table(const char *name)
{
    if (!valid_name(name))
        return -EINVAL;
    int rc = shm_unlink(name) == 0 ? 0 : -errno;
    if (rc == 0 || rc == -ENOENT)            /* removed, or gone already */
        shm_forget_claims(name);
    return rc;
}
