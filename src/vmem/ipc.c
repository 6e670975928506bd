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
 * Divided into: the handle; exports (records, pins, the handle); the
 * server (socket, thread, requests); imports.
 *
 * Lock: vmem_p.lock guards the export records, the small pins, the import
 * records and the server's start; no socket call is made under it but the
 * server's short non-blocking ones.
 */
#include "vmem/vmem_int.h"
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
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define IPC_MAGIC    0x53414c53u       /* "SLAS" */
#define IPC_VERSION  1u
#define IPC_MAX_FDS  2                 /* a big chunk, or the granules of a small one */
#define IPC_MAX_CONN 128               /* live imports served at once */
#define IPC_DEADLINE_MS 30000          /* an importer's wait for the exporter (which
                                          may be paging, its lock held, for seconds) */

/* ---- the handle ---------------------------------------------------------------- */

typedef struct ipc_handle {
    uint32_t magic, version;
    uint32_t pid, check;               /* check: FNV-1a of every other byte */
    uint64_t start;                    /* the exporter's start time (clock ticks) */
    uint64_t token;                    /* the exporter's random word */
    uint64_t id;                       /* the allocation's id in the exporter */
    uint64_t offset;                   /* of the pointer in the allocation */
    uint64_t size;                     /* the allocation's */
} ipc_handle_t;
_Static_assert(sizeof(ipc_handle_t) <= CU_IPC_HANDLE_SIZE, "IPC handle");

/* What an importer asks, and what the exporter answers (with the fds). */
typedef struct ipc_req {
    uint32_t magic, version;
    uint64_t token, id;
} ipc_req_t;

typedef struct ipc_rep {
    uint32_t magic;
    int32_t status;                    /* a CUresult */
    uint32_t nfds, pad;
    uint64_t chunk;                    /* each descriptor's bytes */
    uint64_t delta;                    /* the allocation's base in the chunks */
    uint64_t size;                     /* the allocation's */
} ipc_rep_t;

static uint32_t checksum(const ipc_handle_t *h)
{
    ipc_handle_t c = *h;
    const unsigned char *b = (const unsigned char *)&c;
    uint32_t x = 2166136261u;
    c.check = 0;
    for (size_t i = 0; i < sizeof c; i++)
        x = (x ^ b[i]) * 16777619u;
    return x;
}

static void socket_name(struct sockaddr_un *sa, socklen_t *len, uint32_t pid, uint64_t start)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "salus-ipc-%u-%llu", pid,
                     (unsigned long long)start);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

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
    vmem_map_t imports;                /* address -> ipc_import_t */
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
    h->check = checksum(h);
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

static ipc_conn_t conns[IPC_MAX_CONN];  /* the server thread's own */
static int nconns;

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

static void accept_one(int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (fd < 0)
        return;
    if (nconns == IPC_MAX_CONN || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
        cr.uid != getuid()) {
        close(fd);                     /* another user's, or too many */
        return;
    }
    conns[nconns++] = (ipc_conn_t){ .fd = fd, .id = 0 };
}

static void *server(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    struct pollfd pf[IPC_MAX_CONN + 1];
    for (;;) {
        pf[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int k = 0; k < nconns; k++)
            pf[k + 1] = (struct pollfd){ .fd = conns[k].fd, .events = POLLIN };
        int n = nconns;
        if (poll(pf, (nfds_t)n + 1, -1) < 0) {
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
    socket_name(&sa, &len, (uint32_t)getpid(), ipc.start);
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

/* ---- imports ---------------------------------------------------------------------------- */

typedef struct ipc_import {
    CUdeviceptr base;                  /* the reservation */
    uint64_t span, chunk;              /* its bytes; each mapping's */
    int fd;                            /* the connection: its end ends the import */
} ipc_import_t;

/* The parsed and checked handle, or -1 (not ours: 1 when it carries our
 * magic, so that a garbled handle of ours is refused, not passed on). */
static int parse(const CUipcMemHandle *raw, ipc_handle_t *h, int *ours)
{
    memcpy(h, raw, sizeof *h);
    *ours = h->magic == IPC_MAGIC;
    if (!*ours || h->version != IPC_VERSION || h->check != checksum(h) || h->pid == 0 ||
        h->id == 0 || h->size == 0 || h->size > MEM_MAX_BYTES || h->offset >= h->size)
        return -1;
    for (size_t i = sizeof *h; i < sizeof *raw; i++)
        if (raw->reserved[i])
            return -1;
    return 0;
}

/* Connect to h's exporter, check it, ask, and receive the answer and its
 * descriptors (nfds of them in fds).  The connection, or -1 with *why. */
static int ask(const ipc_handle_t *h, ipc_rep_t *rep, int fds[IPC_MAX_FDS], const char **why)
{
    struct sockaddr_un sa;
    socklen_t len;
    struct timeval tv = { IPC_DEADLINE_MS / 1000, (IPC_DEADLINE_MS % 1000) * 1000 };
    struct ucred cr;
    socklen_t crlen = sizeof cr;
    union { char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)]; struct cmsghdr align; } u;
    ipc_req_t req = { IPC_MAGIC, IPC_VERSION, h->token, h->id };
    struct iovec iov = { rep, sizeof *rep };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf };
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    *why = "no socket";
    if (fd < 0)
        return -1;
    socket_name(&sa, &len, h->pid, h->start);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    *why = "its exporter has ended";
    if (connect(fd, (struct sockaddr *)&sa, len) != 0)
        goto out_close;
    *why = "the socket is not its exporter's";
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0 ||
        (uint32_t)cr.pid != h->pid || cr.uid != getuid())
        goto out_close;
    *why = "its exporter did not answer within 30 s";
    if (send(fd, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req)
        goto out_close;
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    int got = 0;
    for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < k; i++) {
                int x;
                memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof x);
                if (got < IPC_MAX_FDS)
                    fds[got++] = x;
                else
                    close(x);
            }
        }
    *why = "its exporter's answer is malformed";
    if (n == (ssize_t)sizeof *rep && !(m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) &&
        rep->magic == IPC_MAGIC && (rep->status != CUDA_SUCCESS || rep->nfds == (uint32_t)got))
        return fd;
    while (got-- > 0)
        close(fds[got]);
out_close:
    close(fd);
    return -1;
}

/* Import rep's chunks (nfds descriptors, closed here) at a new reservation:
 * CUDA_SUCCESS and *base, or why not (nothing left). */
static CUresult map_chunks(const ipc_rep_t *rep, const int *fds, int ordinal, CUdeviceptr *base)
{
    const drv_t *d = vmem_drv();        /* an importer's paging may be off */
    CUmemGenericAllocationHandle hs[IPC_MAX_FDS] = { 0 };
    CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, ordinal },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    uint64_t span = rep->chunk * rep->nfds;
    uint32_t mapped = 0, i;
    CUdeviceptr at = 0;
    CUresult rc = CUDA_SUCCESS;
    for (i = 0; i < rep->nfds && rc == CUDA_SUCCESS; i++)
        rc = d->mem_import_from_shareable_handle(&hs[i], (void *)(intptr_t)fds[i],
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    for (i = 0; i < rep->nfds; i++)
        close(fds[i]);
    if (rc != CUDA_SUCCESS)
        goto out_release;
    if ((rc = d->mem_address_reserve(&at, span, 0, 0, 0)) != CUDA_SUCCESS)
        goto out_release;
    for (; mapped < rep->nfds && rc == CUDA_SUCCESS; mapped++)
        rc = d->mem_map(at + mapped * rep->chunk, rep->chunk, 0, hs[mapped], 0);
    if (rc != CUDA_SUCCESS)
        mapped--;
    else
        rc = d->mem_set_access(at, span, &acc, 1);
    if (rc == CUDA_SUCCESS) {
        *base = at;
        goto out_release;              /* the mappings keep the memory */
    }
    for (i = 0; i < mapped; i++)
        d->mem_unmap(at + i * rep->chunk, rep->chunk);
    d->mem_address_free(at, span);
out_release:
    for (i = 0; i < rep->nfds; i++)
        if (hs[i])
            d->mem_release(hs[i]);
    return rc;
}

static int rep_fits(const ipc_rep_t *rep, const ipc_handle_t *h)
{
    return rep->nfds >= 1 && rep->nfds <= IPC_MAX_FDS && rep->chunk > 0 &&
           rep->chunk <= MEM_MAX_BYTES && rep->size == h->size &&
           rep->delta < rep->chunk * rep->nfds &&
           rep->size <= rep->chunk * rep->nfds - rep->delta;
}

static CUresult open_checked(const ipc_handle_t *h, int ordinal, CUdeviceptr *out)
{
    ipc_rep_t rep;
    int fds[IPC_MAX_FDS];
    const char *why;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    int fd = ask(h, &rep, fds, &why);
    if (fd < 0)
        goto out_say;
    why = "its exporter refused it (freed, or not exported)";
    if (rep.status != CUDA_SUCCESS)
        goto out_close;
    why = "its exporter's answer does not fit the handle";
    if (!rep_fits(&rep, h)) {
        for (uint32_t i = 0; i < rep.nfds; i++)
            close(fds[i]);
        goto out_close;
    }
    CUdeviceptr base = 0;
    why = "the driver could not map its memory";
    if ((rc = map_chunks(&rep, fds, ordinal, &base)) != CUDA_SUCCESS)
        goto out_close;
    ipc_import_t *im = malloc(sizeof *im);
    CUdeviceptr p = base + rep.delta + h->offset;
    pthread_mutex_lock(&vmem_p.lock);
    int ok = im && !vmem_map_get(&ipc.imports, p) && vmem_map_put(&ipc.imports, p, im) == 0;
    if (ok)
        *im = (ipc_import_t){ base, rep.chunk * rep.nfds, rep.chunk, fd };
    pthread_mutex_unlock(&vmem_p.lock);
    if (ok) {
        *out = p;
        return CUDA_SUCCESS;
    }
    free(im);
    for (uint32_t i = 0; i < rep.nfds; i++)
        vmem_drv()->mem_unmap(base + i * rep.chunk, rep.chunk);
    vmem_drv()->mem_address_free(base, rep.chunk * rep.nfds);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    why = "no memory for its record";
out_close:
    close(fd);
out_say:;
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: cuIpcOpenMemHandle of a handle of process "
                  "%u (paged memory, SALUS_SWAP=on there) failed: %s", h->pid, why);
    return rc;
}

int vmem_ipc_open(CUdeviceptr *out, const CUipcMemHandle *handle, unsigned int flags,
                 CUresult *rc)
{
    const drv_t *d = vmem_drv();        /* paging on or off here */
    ipc_handle_t h;
    int ours, ordinal;
    int bad = parse(handle, &h, &ours);
    if (!ours)
        return 0;                      /* the driver's */
    *rc = CUDA_ERROR_INVALID_VALUE;
    if (bad || !out || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) {
        static int said;
        util_log_once(&said, UTIL_LOG_WARN, "memory: cuIpcOpenMemHandle: a handle that "
                      "claims to be libsalus's is garbled (refused)");
        return 1;
    }
    if (!d->mem_import_from_shareable_handle || !d->mem_address_reserve || !d->mem_map ||
        !d->mem_set_access || !d->mem_unmap || !d->mem_address_free || !d->mem_release) {
        *rc = CUDA_ERROR_NOT_SUPPORTED;
        return 1;
    }
    if (drv_current_device(d, &ordinal) != 0) {
        *rc = CUDA_ERROR_INVALID_CONTEXT;
        return 1;
    }
    *rc = open_checked(&h, ordinal, out);
    return 1;
}

int vmem_ipc_close(CUdeviceptr p, CUresult *rc)
{
    pthread_mutex_lock(&vmem_p.lock);
    ipc_import_t *im = p ? vmem_map_del(&ipc.imports, p) : NULL;
    pthread_mutex_unlock(&vmem_p.lock);
    if (!im)
        return 0;                      /* the driver's */
    for (uint64_t off = 0; off < im->span; off += im->chunk)
        vmem_drv()->mem_unmap(im->base + off, im->chunk);
    vmem_drv()->mem_address_free(im->base, im->span);
    close(im->fd);
    free(im);
    *rc = CUDA_SUCCESS;
    return 1;
}

/* The child's copies of the parent's sockets are closed, so that the
 * parent's imports and connections end when the parent ends them. */
static void ipc_forget(void)
{
    if (ipc.up)
        close(ipc.listen_fd);
    for (int k = 0; k < nconns; k++)
        close(conns[k].fd);
    for (size_t i = 0; ipc.imports.key && i <= ipc.imports.mask; i++) {
        const ipc_import_t *im = ipc.imports.val[i];
        if (im)
            close(im->fd);
    }
    memset(&ipc, 0, sizeof ipc);
    ipc.listen_fd = -1;
    nconns = 0;
}
