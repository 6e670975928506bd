/*
 * access.c - who may read what salus-top --listen serves.
 *
 * A table is a file of /dev/shm with its owner, group and mode: a local user
 * may open it when it owns it, or when it is a group table (mode 0640) of
 * one of the user's groups.  The exporter reads with its own rights, which
 * may be more (root, or the systemd unit's group): serving every process it
 * reads to any client would let every local user read the names, pids and
 * users of jobs they could never see themselves.  So each client is served
 * what it could read itself:
 *
 *   - a loopback client's uid is that of its socket (/proc/net/tcp and tcp6
 *     list each socket with its owner); it gets the process rows of the
 *     tables it could open, and everything when it is root or the exporter's
 *     own user;
 *   - a client whose uid cannot be learned (another machine) gets the
 *     devices' series and no process rows, unless the exporter was started
 *     with --serve-all, which serves everything to everyone it reaches.
 *
 * Divided into: the peer's uid; what a reader may see; the view.  No state:
 * each request asks again (a few small files read per scrape, which are
 * already limited to four a second).
 */
#include "top.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"

/* ---- the peer's uid ------------------------------------------------------------ */

/* An address as /proc/net/tcp{,6} prints it: each 32-bit word of the address
 * in the kernel's byte order (%08X of the word as stored), then the port in
 * hex.  0, or -1 for a family other than IPv4 and IPv6. */
static int proc_net_addr(const struct sockaddr_storage *a, char *out, size_t len)
{
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)a;
        uint32_t w;
        memcpy(&w, &in->sin_addr, 4);
        snprintf(out, len, "%08X:%04X", w, ntohs(in->sin_port));
        return 0;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
        uint32_t w[4];
        memcpy(w, &in6->sin6_addr, 16);
        snprintf(out, len, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3],
                 ntohs(in6->sin6_port));
        return 0;
    }
    return -1;
}

static int is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss_family != AF_INET6)
        return 0;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(v6))
        return 1;
    return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
}

/* The uid of the socket in `file` whose local end is `local` and remote end
 * `remote`.  0 and *uid, or -1. */
static int uid_in(const char *file, const char *local, const char *remote, uid_t *uid)
{
    FILE *f = fopen(file, "re");
    if (!f)
        return -1;
    char line[512], l[64], r[64];
    unsigned long u;
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f))
        if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %lu", l, r, &u) == 3 &&
            strcmp(l, local) == 0 && strcmp(r, remote) == 0) {
            *uid = (uid_t)u;
            found = 0;
        }
    fclose(f);
    return found;
}

int top_peer_uid(int fd, uid_t *uid)
{
    struct sockaddr_storage peer, self;
    socklen_t plen = sizeof peer, slen = sizeof self;
    char pa[64], sa[64];
    if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
        getsockname(fd, (struct sockaddr *)&self, &slen) != 0 || !is_loopback(&peer) ||
        proc_net_addr(&peer, pa, sizeof pa) != 0 || proc_net_addr(&self, sa, sizeof sa) != 0)
        return -1;
    /* The client's socket lists the client's address as its local end. */
    return uid_in(peer.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", pa, sa, uid);
}

/* ---- what a reader may see ------------------------------------------------------- */

static int in_group(uid_t uid, gid_t gid)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
        return 0;
    if (pw.pw_gid == gid)
        return 1;
    gid_t groups[256];
    int n = (int)(sizeof groups / sizeof *groups);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
        return 0;                        /* more than 256 groups: not found here */
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

/* Whether reader could open the table `name` ("/salus-..."), by the rules
 * libsalus makes tables with: its own, or a group table of its groups. */
static int may_read_table(const top_reader_t *r, const char *name)
{
    if (r->all || (r->known && (r->uid == 0 || r->uid == geteuid())))
        return 1;
    if (!r->known)
        return 0;
    char path[sizeof SHM_DIR + SHM_TABLE_NAME_BYTES + 1];
    struct stat st;
    snprintf(path, sizeof path, SHM_DIR "%s%s", name[0] == '/' ? "" : "/", name);
    if (stat(path, &st) != 0)
        return 0;
    if (st.st_uid == r->uid)
        return 1;
    return strncmp(name + (name[0] == '/'), "salus-group-", 12) == 0 &&
           (st.st_mode & 0040) && in_group(r->uid, st.st_gid);
}

/* ---- the view ------------------------------------------------------------------------ */

int top_view_for(const top_snap_t *s, const top_reader_t *r, top_snap_t *view)
{
    int keep[TOP_MAX_TABLES];
    for (int t = 0; t < s->ntables && t < TOP_MAX_TABLES; t++)
        keep[t] = !r->none && may_read_table(r, s->tables[t].name);
    top_proc_t *procs = s->nprocs ? malloc((size_t)s->nprocs * sizeof *procs) : NULL;
    if (s->nprocs && !procs)
        return -1;
    *view = *s;
    view->procs = procs;
    view->proccap = s->nprocs;
    view->nprocs = 0;
    for (int i = 0; i < s->nprocs; i++) {
        int t = s->procs[i].table;
        if (t >= 0 && t < s->ntables && t < TOP_MAX_TABLES && keep[t])
            procs[view->nprocs++] = s->procs[i];
    }
    return 0;
}

void top_view_free(top_snap_t *view)
{
    free(view->procs);               /* devices are the snapshot's own */
    view->procs = NULL;
    view->nprocs = 0;
}
