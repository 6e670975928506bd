/*
 * ipc.c - CUDA IPC on paged memory: legacy IPC handles
 * (cuIpcGetMemHandle, cuIpcOpenMemHandle, cuIpcCloseMemHandle) for
 * virtualized allocations (vmem_int.h), emulated over the VMM API's
 * shareable handles, as CUDA recommends for sharing VMM memory.
 *
 * The driver makes no legacy handle for VMM memory.  So:
 *   - Export (cuIpcGetMemHandle of a virtualized allocation): the
 *     allocation is pinned resident (paged in first if it is out; never
 *     paged out again until it is freed and no importer maps it; published
 *     in the slot's `pinned`, which src/page leaves out of what peers may ask
 *     for), and the handle is libsalus's own (ipc_handle_t): a magic, this
 *     process's pid, start time and random token, the allocation's id, the
 *     offset of the pointer in it, its size, and a checksum.  A big
 *     allocation is its own chunk; a small one pins its device's whole small
 *     region (which pages as one) and is exported as the granules under it.
 *   - The exporter serves its handles from a thread started at its first
 *     export, on an abstract unix socket named by its pid and start time
 *     (a recycled pid names another socket): a SOCK_SEQPACKET connection per
 *     import, the importer's uid checked (SO_PEERCRED), answered with the
 *     chunks' POSIX file descriptors (cuMemExportToShareableHandle,
 *     SCM_RIGHTS) and their layout.  The importer keeps the connection open
 *     while it maps the memory, so the exporter knows its live imports.
 *   - Import (cuIpcOpenMemHandle of such a handle, in any process with
 *     libsalus, paging on or off): every field is checked, the exporter
 *     checked to be that pid of this uid, the descriptors imported
 *     (cuMemImportFromShareableHandle), mapped in a reservation of the
 *     importer's and made accessible to its current device.  Every socket
 *     call has a deadline: a dead or stuck exporter is an error, not a hang.
 *     Imported memory is charged to nobody here: its exporter pays, as the
 *     driver counts it.  cuIpcCloseMemHandle unmaps it and closes the
 *     connection.
 *   - The exporter frees an exported allocation: its own mapping goes, but
 *     an importer's mapping keeps the physical memory alive (as the driver
 *     does for VMM), so a big allocation's charge stays in the exporter's
 *     budget, and a small one's pin on its region, until the last import is
 *     closed (or its importer ends).
 * Handles the driver made pass to it untouched, and so does a
 * cuIpcGetMemHandle of memory that is not virtualized.
 *
 * What the two sides say is ipc_wire.h's; imports are ipcopen.c's.  An
 * exporter serves as many imports at once as half its open-file limit
 * allows (each is a descriptor); past it, and when no descriptor is left,
 * an importer is told why and the exporter says it once.
 *
 * Divided into: exports (records, pins, the handle); the server (its
 * connections, socket, thread, requests); a fork() child's forget.
 *
 * Lock: vmem_p.lock guards the export records, the small pins and the
 * server's start; the server thread alone touches its connections; no
 * socket call is made under the lock but the server's short non-blocking
 * ones.
 */
#include "vmem/vmem_int.h"
#include "vmem/ipc_wire.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IPC_MIN_CONN 16                /* live imports served at once: at least, */
#define IPC_CONN_SHARE 2               /* and up to 1/2 of the open-file limit */
#define IPC_PAUSE_NS (100ull * 1000000) /* the listener's rest when no fd is left */

/* This process's start time, field 22 of /proc/self/stat; 0 if unreadable. */
static uint64_t start_time(void)
{
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* ---- exports ----------------------------------------------------------------------
 * One record per exported allocation, by its id, while it lives or an
 * importer maps it: a (NULL once freed), its device, and, for a freed big
 * one, the charge kept for its importers. */

typedef struct ipc_export {
    vmem_buf_t *a;
    int ordinal;
    uint8_t big, kept;                 /* kept: a freed chunk's charge stays */
    uint64_t bytes;
    uint32_t imports;                  /* live connections that mapped it */
} ipc_export_t;

static struct {
    vmem_map_t exports;                /* id -> ipc_export_t */
    int listen_fd;                     /* while up */
    int up;                            /* the server runs */
    uint64_t start, token;
} ipc = { .listen_fd = -1 };

/* The slot's pinned bytes: exported big chunks (kept ones too) and each
 * pinned small region's backed granules.  One device is published: the
 * first that has any (a process exporting on two is rare; the other's pins
 * are then left out of src/page's figure, not out of paging's rule). */
static void publish_locked(void)
{
    uint64_t sum[VMEM_MAX_DEVICES] = { 0 };
    for (size_t i = 0; ipc.exports.key && i <= ipc.exports.mask; i++) {
        const ipc_export_t *e = ipc.exports.val[i];
        if (e && e->big)
            sum[e->ordinal] += e->bytes;
    }
    int pick = -1;
    for (int o = 0; o < VMEM_MAX_DEVICES; o++) {
        const vmem_dev_t *v = &vmem_p.dev[o];
        for (size_t g = 0; v->small_pins && g < v->size / v->gran; g++)
            sum[o] += v->g[g].h ? v->gran : 0;
        if (pick < 0 && sum[o])
            pick = o;
    }
    mem_set_pinned(pick, pick >= 0 ? sum[pick] : 0);
}

static void export_drop_locked(uint64_t id, ipc_export_t *e)
{
    if (!e->big && e->ordinal >= 0 && vmem_p.dev[e->ordinal].small_pins)
        vmem_p.dev[e->ordinal].small_pins--;
    if (e->kept)
        vmem_uncharge(e->ordinal, e->bytes);
    vmem_map_del(&ipc.exports, id);
    free(e);
    publish_locked();
}

static int ipc_freed(vmem_buf_t *a)
{
    ipc_export_t *e = vmem_map_get(&ipc.exports, a->id);
    if (!e)
        return 0;
    e->a = NULL;
    if (!e->imports) {
        export_drop_locked(a->id, e);
        return 0;
    }
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: %s of paged memory freed by the program "
                  "stays on the GPU, charged to this process and never paged out, while %u "
                  "import(s) of it in other processes stay open (until they call "
                  "cuIpcCloseMemHandle or end; caches of imported handles, as NCCL's and "
                  "UCX's, keep it for their lifetime); salus-top --json shows it as "
                  "pinned_bytes", util_size(e->bytes).s, e->imports);
    e->kept = e->big && a->charged;
    return e->kept;
}

static int server_up_locked(void);
static void ipc_forget(void);

/* Pin a (resident, under the lock) and fill *h. */
static CUresult export_locked(vmem_buf_t *a, CUdeviceptr p, ipc_handle_t *h)
{
    if (!vmem_ipc_able())
        return CUDA_ERROR_NOT_SUPPORTED;
    if (server_up_locked() != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    vmem_p.ipc_freed = ipc_freed;
    vmem_p.ipc_forget = ipc_forget;
    if (!a->exported) {
        ipc_export_t *e = calloc(1, sizeof *e);
        if (!e)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *e = (ipc_export_t){ .a = a, .ordinal = a->ordinal, .big = a->big, .bytes = a->bytes };
        if (vmem_map_put(&ipc.exports, a->id, e) != 0) {
            free(e);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        a->exported = 1;
        if (!a->big)
            vmem_p.dev[a->ordinal].small_pins++;
        publish_locked();
    }
    *h = (ipc_handle_t){ .magic = IPC_MAGIC, .version = IPC_VERSION, .pid = (uint32_t)getpid(),
                         .start = ipc.start, .token = ipc.token, .id = a->id,
                         .offset = p - a->base, .size = a->size };
    h->check = ipc_checksum(h);
    return CUDA_SUCCESS;
}

static int is_out_locked(const vmem_buf_t *a)
{
    return a->big ? a->out : vmem_p.dev[a->ordinal].small_out;
}

int vmem_ipc_get(CUipcMemHandle *handle, CUdeviceptr p, CUresult *rc)
{
    if (!handle || !vmem_on())
        return 0;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_buf_t *a = vmem_find_locked(p);
    /* Paged out: back in first (a peer may page it out again before the
     * pin is taken: a few tries). */
    for (int tries = 0; a && is_out_locked(a) && tries < 3; tries++) {
        int ordinal = a->ordinal;
        pthread_mutex_unlock(&vmem_p.lock);
        CUresult r = vmem_page_in(ordinal, NULL);
        pthread_mutex_lock(&vmem_p.lock);
        a = vmem_find_locked(p);
        if (r != CUDA_SUCCESS && a && is_out_locked(a)) {
            pthread_mutex_unlock(&vmem_p.lock);
            *rc = r;
            return 1;
        }
    }
    ipc_handle_t h;
    CUresult r = !a ? CUDA_SUCCESS : is_out_locked(a) ? CUDA_ERROR_OUT_OF_MEMORY
                                                       : export_locked(a, p, &h);
    pthread_mutex_unlock(&vmem_p.lock);
    if (!a)
        return 0;                      /* not virtualized: the driver's */
    if (r == CUDA_SUCCESS) {
        memset(handle, 0, sizeof *handle);
        memcpy(handle, &h, sizeof h);
    } else if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_OPERATING_SYSTEM) {
        static int said;
        util_log_once(&said, UTIL_LOG_ERROR, "memory: cuIpcGetMemHandle on paged memory "
                      "(SALUS_SWAP=on) needs the driver's POSIX file descriptor handles and "
                      "a unix socket, which are not available here; run this program with "
                      "SALUS_SWAP=off to share its memory over CUDA IPC");
    }
    *rc = r;
    return 1;
}

/* ---- the server ----------------------------------------------------------------------
 * A thread of its own, started at the first export, all signals blocked:
 * poll over the listening socket and one connection per import.  A
 * connection's first message is its request; after the answer, its end
 * (EOF: closed, or the importer ended) ends the import. */

typedef struct ipc_conn {
    int fd;
    uint64_t id;                       /* 0 until it imported */
} ipc_conn_t;

/* The server thread's own: conns[0, nconns) in an array of room entries
 * (pf has room + 1), grown by doubling up to limit (conn_limit). */
static ipc_conn_t *conns;
static struct pollfd *pf;
static int nconns, room, limit;
static uint64_t paused_until;          /* no fd was left: the listener rests */

/* How many imports are served at once: half the open-file limit (each is a
 * descriptor here; the program needs the rest), IPC_MIN_CONN at least. */
static int conn_limit(void)
{
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
    n = n == RLIM_INFINITY || n > (1u << 20) ? (1u << 20) : n;
    return n / IPC_CONN_SHARE > IPC_MIN_CONN ? (int)(n / IPC_CONN_SHARE) : IPC_MIN_CONN;
}

/* Room for one more connection: 0, or -1 at the limit (or no memory). */
static int conn_room(void)
{
    if (nconns < room)
        return 0;
    if (!limit)
        limit = conn_limit();
    if (room >= limit)
        return -1;
    int want = room ? (room > limit / 2 ? limit : 2 * room) : IPC_MIN_CONN;
    ipc_conn_t *c = realloc(conns, (size_t)want * sizeof *c);
    if (c)
        conns = c;
    struct pollfd *p = c ? realloc(pf, ((size_t)want + 1) * sizeof *p) : NULL;
    if (!p)
        return -1;                     /* conns grew, room did not: still consistent */
    pf = p;
    room = want;
    return 0;
}

/* The descriptors of e's chunks and their layout; CUDA_SUCCESS or why not. */
static CUresult chunks_locked(const ipc_export_t *e, int fds[IPC_MAX_FDS], ipc_rep_t *rep)
{
    const drv_t *d = vmem_drv();
    const vmem_buf_t *a = e->a;
    const vmem_dev_t *v = &vmem_p.dev[a->ordinal];
    CUmemGenericAllocationHandle hs[IPC_MAX_FDS] = { a->h };
    size_t first = 0, last = 0, n = 1;
    rep->chunk = a->bytes;
    rep->delta = 0;
    if (!a->big) {
        vmem_granules(v, a->base, a->size, &first, &last);
        n = last - first + 1;
        if (n > IPC_MAX_FDS)
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < n; i++)
            hs[i] = v->g[first + i].h;
        rep->chunk = v->gran;
        rep->delta = a->base - (v->base + first * v->gran);
    }
    for (size_t i = 0; i < n; i++) {
        int fd = -1;
        CUresult rc = hs[i] ? d->mem_export_to_shareable_handle(
                                  &fd, hs[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
                            : CUDA_ERROR_INVALID_VALUE;
        if (rc != CUDA_SUCCESS || fd < 0) {
            while (i-- > 0)
                close(fds[i]);
            return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
        }
        fds[i] = fd;
    }
    rep->nfds = (uint32_t)n;
    rep->size = a->size;
    return CUDA_SUCCESS;
}

static int send_rep(int fd, const ipc_rep_t *rep, const int *fds)
{
    union { char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)]; struct cmsghdr align; } u;
    struct iovec iov = { (void *)rep, sizeof *rep };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (rep->nfds) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * rep->nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * rep->nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * rep->nfds);
    }
    return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof *rep ? 0 : -1;
}

/* Answer c's request (a message of the connection): 0 when it imported
 * (the connection stays), -1 when it ends. */
static int serve(ipc_conn_t *c)
{
    ipc_req_t req;
    ipc_rep_t rep = { .magic = IPC_MAGIC, .status = CUDA_ERROR_INVALID_VALUE };
    int fds[IPC_MAX_FDS];
    ssize_t n = recv(c->fd, &req, sizeof req, MSG_DONTWAIT);
    if (n != (ssize_t)sizeof req || req.magic != IPC_MAGIC || req.version != IPC_VERSION)
        goto out_send;
    pthread_mutex_lock(&vmem_p.lock);
    ipc_export_t *e = req.id ? vmem_map_get(&ipc.exports, req.id) : NULL;
    if (e && e->a && req.token == ipc.token &&
        (rep.status = chunks_locked(e, fds, &rep)) == CUDA_SUCCESS) {
        e->imports++;
        c->id = req.id;
    }
    pthread_mutex_unlock(&vmem_p.lock);
out_send:;
    int sent = send_rep(c->fd, &rep, fds);
    for (uint32_t i = 0; rep.status == CUDA_SUCCESS && i < rep.nfds; i++)
        close(fds[i]);
    return sent == 0 && c->id ? 0 : -1;
}

/* c's import ended (or never was). */
static void conn_end(int k)
{
    ipc_conn_t *c = &conns[k];
    if (c->id) {
        pthread_mutex_lock(&vmem_p.lock);
        ipc_export_t *e = vmem_map_get(&ipc.exports, c->id);
        if (e && e->imports && --e->imports == 0 && !e->a)
            export_drop_locked(c->id, e);
        pthread_mutex_unlock(&vmem_p.lock);
    }
    close(c->fd);
    conns[k] = conns[--nconns];
}

/* A connection this exporter cannot serve: its importer is told why, and
 * this process says it once.  Its request is read first (it comes right
 * after the connect; 100 ms at most): closing a socket with unread data
 * resets the connection, and the importer would read the reset, not why. */
static void refuse_busy(int fd, const struct ucred *cr)
{
    static int said;
    ipc_req_t req;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    ipc_rep_t rep = { .magic = IPC_MAGIC, .status = CUDA_ERROR_OUT_OF_MEMORY,
                      .why = IPC_WHY_BUSY, .chunk = (uint64_t)nconns };
    if (poll(&p, 1, 100) == 1)
        (void)!recv(fd, &req, sizeof req, MSG_DONTWAIT);
    send_rep(fd, &rep, NULL);
    close(fd);
    util_log_once(&said, UTIL_LOG_WARN, "memory: an import of this process's paged memory "
                  "(cuIpcOpenMemHandle in process %d) was refused: it serves %d imports at "
                  "once already, half its open-file limit; raise that limit (ulimit -n) to "
                  "serve more", (int)cr->pid, nconns);
}

static void accept_one(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
            static int said;
            paused_until = util_now_ns() + IPC_PAUSE_NS;   /* no busy loop on it */
            util_log_once(&said, UTIL_LOG_WARN, "memory: this process has no file "
                          "descriptor left to serve an import of its paged memory "
                          "(cuIpcOpenMemHandle elsewhere): raise its open-file limit "
                          "(ulimit -n)");
        }
        return;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != getuid()) {
        close(fd);                     /* another user's: its importer says why */
        return;
    }
    if (conn_room() != 0) {
        refuse_busy(fd, &cr);
        return;
    }
    conns[nconns++] = (ipc_conn_t){ .fd = fd, .id = 0 };
}

static void *server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    if (conn_room() != 0)
        return NULL;                   /* no memory for the first: no server */
    for (;;) {
        uint64_t now = util_now_ns();
        int rest = paused_until > now ? (int)((paused_until - now) / 1000000) + 1 : -1;
        pf[0] = (struct pollfd){ .fd = rest < 0 ? lfd : -1, .events = POLLIN };
        for (int k = 0; k < nconns; k++)
            pf[k + 1] = (struct pollfd){ .fd = conns[k].fd, .events = POLLIN };
        int n = nconns;
        if (poll(pf, (nfds_t)n + 1, rest) < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        /* Downwards: conn_end moves the last connection into k's place. */
        for (int k = n - 1; k >= 0; k--) {
            short ev = pf[k + 1].revents;
            char b;
            if (!ev)
                continue;
            if (!conns[k].id && (ev & POLLIN)) {
                if (serve(&conns[k]) != 0)
                    conn_end(k);
                continue;
            }
            ssize_t r = recv(conns[k].fd, &b, 1, MSG_DONTWAIT);   /* junk is dropped */
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) ||
                (ev & (POLLHUP | POLLERR)))
                conn_end(k);
        }
        if (pf[0].revents & POLLIN)
            accept_one(lfd);
    }
}

static int server_up_locked(void)
{
    if (ipc.up)
        return 0;
    struct sockaddr_un sa;
    socklen_t len;
    if (getrandom(&ipc.token, sizeof ipc.token, GRND_NONBLOCK) != sizeof ipc.token)
        ipc.token = util_now_ns() ^ ((uint64_t)getpid() << 32);
    ipc.start = start_time();
    ipc_socket_name(&sa, &len, (uint32_t)getpid(), ipc.start);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, len) != 0 || listen(fd, 64) != 0)
        goto out_close;
    sigset_t all, old;
    pthread_t th;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&th, NULL, server, (void *)(intptr_t)fd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        goto out_close;
    pthread_detach(th);
    ipc.listen_fd = fd;
    ipc.up = 1;
    return 0;
out_close:
    close(fd);
    return -1;
}

/* The child's copies of the parent's sockets are closed, so that the
 * parent's imports and connections end when the parent ends them. */
static void ipc_forget(void)
{
    if (ipc.up)
        close(ipc.listen_fd);
    for (int k = 0; k < nconns; k++)
        close(conns[k].fd);
    free(conns);                       /* the parent's server thread is not ours */
    free(pf);
    conns = NULL;
    pf = NULL;
    room = limit = 0;
    paused_until = 0;
    vmem_ipc_imports_forget();
    memset(&ipc, 0, sizeof ipc);
    ipc.listen_fd = -1;
    nconns = 0;
}
