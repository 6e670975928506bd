/*
 * cgroup.c - the room left in the calling process's memory cgroup: what a
 * page-out may pin on the host before the kernel's OOM killer ends the job
 * (the host's MemAvailable knows nothing of a cgroup's limit).
 *
 * Divided into: reading a file; finding the cgroup (/proc/self/cgroup,
 * the mount from /proc/self/mountinfo); the walk up its ancestors.
 *
 * The cgroup: cgroup v1's "memory" controller line when there is one (a
 * hybrid host binds memory there), else v2's "0::" line.  Its directory:
 * the path under the mount of that hierarchy (v2: fstype cgroup2; v1:
 * fstype cgroup with the memory option), less the mount's own root (a
 * container's bind mount); /sys/fs/cgroup (v2) or /sys/fs/cgroup/memory
 * (v1) when mountinfo names none.  At each level up to the mount's root:
 * limit memory.max ("max": none) or memory.limit_in_bytes (2^60 and above:
 * none), use memory.current or memory.usage_in_bytes less the inactive
 * file cache (memory.stat: inactive_file, v1 total_inactive_file; the
 * kernel reclaims it before it kills).  The room: the least limit - use
 * over the levels.  A file absent, unreadable or not a plain number is no
 * bound at its level: this can only refuse a page-out that would be
 * killed, never fail a job.
 *
 * Called when a page-out is about to stage, never on a launch path.  No
 * lock: no state but the test seam, set before any call.
 */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *util_cgroup_root;

#define LEVELS_MAX 64

static const char *root(void)
{
    return util_cgroup_root ? util_cgroup_root : "";
}

/* ---- reading a file ------------------------------------------------------------ */

/* The start of root()/path into buf (NUL-terminated); its length, or -1. */
static long read_small(const char *path, char *buf, size_t len)
{
    char full[1024];
    if (snprintf(full, sizeof full, "%s%s", root(), path) >= (int)sizeof full)
        return -1;
    int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n;
    do
        n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return (long)n;
}

/* A byte count as the kernel writes it: digits, one newline at most.
 * "max" (v2) or 2^60 and more (v1's "no limit", 2^63 less a page) is
 * UINT64_MAX.  0, or -1 for anything else. */
static int parse_bytes(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    if (strcmp(s, "max\n") == 0 || strcmp(s, "max") == 0) {
        *out = UINT64_MAX;
        return 0;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == s || (*p && strcmp(p, "\n") != 0))
        return -1;
    *out = v >= (1ull << 60) ? UINT64_MAX : v;
    return 0;
}

static int read_bytes(const char *dir, const char *file, uint64_t *out)
{
    char path[1024], buf[64];
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path ||
        read_small(path, buf, sizeof buf) < 0)
        return -1;
    return parse_bytes(buf, out);
}

/* memory.stat's `key` (a line "key N"); 0 when absent or not a number. */
static uint64_t stat_value(const char *dir, const char *key)
{
    char path[1024], buf[8192];
    size_t klen = strlen(key);
    if (snprintf(path, sizeof path, "%s/memory.stat", dir) >= (int)sizeof path ||
        read_small(path, buf, sizeof buf) < 0)
        return 0;
    for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : 0)
        if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(line + klen + 1, &end, 10);
            return errno || end == line + klen + 1 ? 0 : (uint64_t)v;
        }
    return 0;
}

/* ---- finding the cgroup ---------------------------------------------------------- */

/* The cgroup path of this process (v1's memory line, else v2's) into
 * path; 1 for v1, 2 for v2, -1 when neither is there. */
static int own_cgroup(char *path, size_t len)
{
    char buf[4096];
    char *save = NULL;
    int v2 = 0;
    if (read_small("/proc/self/cgroup", buf, sizeof buf) < 0)
        return -1;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = 0;
        char ctl[256];
        snprintf(ctl, sizeof ctl, ",%s,", c1 + 1);
        if (strstr(ctl, ",memory,")) {
            snprintf(path, len, "%s", c2 + 1);
            return 1;
        }
        if (strcmp(line, "0:") == 0 && c1[1] == 0 && !v2) {
            snprintf(path, len, "%s", c2 + 1);
            v2 = 1;
        }
    }
    return v2 ? 2 : -1;
}

/* The mount of the hierarchy (v 1 or 2): its mount point and root into
 * point and mroot; 0, or -1 when mountinfo names none. */
static int find_mount(int v, char *point, char *mroot, size_t len)
{
    char full[1024], line[4096];
    snprintf(full, sizeof full, "%s/proc/self/mountinfo", root());
    FILE *f = fopen(full, "re");
    int found = -1;
    if (!f)
        return -1;
    while (found != 0 && fgets(line, sizeof line, f)) {
        char mr[1024], mp[1024], type[64], opts[1024], words[1040];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %1023s %1023s", mr, mp) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", type, opts) != 2)
            continue;
        snprintf(words, sizeof words, ",%s,", opts);
        if ((v == 2 && strcmp(type, "cgroup2") == 0) ||
            (v == 1 && strcmp(type, "cgroup") == 0 && strstr(words, ",memory,"))) {
            snprintf(point, len, "%s", mp);
            snprintf(mroot, len, "%s", mr);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* The cgroup's directory (without root()) into dir, and where its walk
 * up stops (the mount point's length in dir); 0, or -1. */
static int cgroup_dir(int v, const char *cg, char *dir, size_t len, size_t *top)
{
    char point[1024], mroot[1024];
    const char *rel = cg;
    if (find_mount(v, point, mroot, sizeof point) != 0) {
        snprintf(point, sizeof point, "%s", v == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
        snprintf(mroot, sizeof mroot, "/");
    }
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0) {
        if (strncmp(cg, mroot, rl) != 0 || (cg[rl] != '/' && cg[rl] != 0))
            return -1;                /* a cgroup outside the mount: not ours to read */
        rel = cg + rl;
    }
    if (strstr(rel, "/..") || snprintf(dir, len, "%s%s", point, rel) >= (int)len)
        return -1;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;
    *top = strlen(point);
    return 0;
}

/* ---- the walk up ------------------------------------------------------------------- */

int util_cgroup_mem(util_cgroup_mem_t *out)
{
    char cg[1024], dir[2048];
    size_t top;
    int v = own_cgroup(cg, sizeof cg);
    if (v < 0 || cgroup_dir(v, cg, dir, sizeof dir, &top) != 0)
        return 1;
    util_cgroup_mem_t best = { .room = UINT64_MAX, .v1 = v == 1 };
    for (int level = 0; level < LEVELS_MAX; level++) {
        uint64_t limit, used;
        if (read_bytes(dir, v == 2 ? "memory.max" : "memory.limit_in_bytes", &limit) == 0 &&
            limit != UINT64_MAX &&
            read_bytes(dir, v == 2 ? "memory.current" : "memory.usage_in_bytes", &used) == 0) {
            uint64_t cache = stat_value(dir, v == 2 ? "inactive_file" : "total_inactive_file");
            used -= cache < used ? cache : used;
            uint64_t room = used < limit ? limit - used : 0;
            if (room < best.room) {
                best.room = room;
                best.limit = limit;
                best.used = used;
                snprintf(best.path, sizeof best.path, "%s", dir);
            }
        }
        size_t n = strlen(dir);
        if (n <= top)
            break;                    /* the mount's root: done */
        while (n > top && dir[n - 1] != '/')
            n--;
        dir[n > top ? n - 1 : top] = 0;
    }
    if (best.room == UINT64_MAX)
        return 1;
    *out = best;
    return 0;
}
