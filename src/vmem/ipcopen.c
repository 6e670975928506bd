/*
 * ipcopen.c - the importer's side of CUDA IPC on paged memory (ipc.c says
 * the protocol): cuIpcOpenMemHandle of libsalus's handle, in any process
 * with libsalus, paging on or off, and cuIpcCloseMemHandle.  A refusal
 * says once what refused it and what to do: the exporter gone or in
 * another network namespace (its socket is abstract), another user's, in
 * a PID namespace this process cannot see, or serving all it can.
 *
 * Divided into: the handle's parse; asking the exporter; mapping its
 * chunks; open and close; a fork() child's forget.
 *
 * Lock: vmem_p.lock guards the import records; no socket call is made
 * under it.
 */
#include "vmem/vmem_int.h"
#include "vmem/ipc_wire.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct ipc_import {
    CUdeviceptr base;                  /* the reservation */
    uint64_t span, chunk;              /* its bytes; each mapping's */
    int fd;                            /* the connection: its end ends the import */
} ipc_import_t;

static vmem_map_t imports;             /* address -> ipc_import_t */

/* The parsed and checked handle, or -1 (not ours: 1 when it carries our
 * magic, so that a garbled handle of ours is refused, not passed on). */
static int parse(const CUipcMemHandle *raw, ipc_handle_t *h, int *ours)
{
    memcpy(h, raw, sizeof *h);
    *ours = h->magic == IPC_MAGIC;
    if (!*ours || h->version != IPC_VERSION || h->check != ipc_checksum(h) || h->pid == 0 ||
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
    ipc_socket_name(&sa, &len, h->pid, h->start);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    *why = "its exporter has ended, or runs in another network namespace (a container "
           "with a network of its own: the exporter serves its handles on an abstract unix "
           "socket, which is the network namespace's)";
    if (connect(fd, (struct sockaddr *)&sa, len) != 0)
        goto out_close;
    *why = "the socket is not its exporter's";
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0)
        goto out_close;
    *why = "its exporter runs as another user: paged memory is shared among one user's "
           "processes only";
    if (cr.uid != getuid())
        goto out_close;
    *why = cr.pid == 0 ? "its exporter runs in a PID namespace this process cannot see "
                         "(another container): CUDA IPC of paged memory works between "
                         "processes that see each other's pids"
                       : "the socket is not its exporter's";
    if ((uint32_t)cr.pid != h->pid)
        goto out_close;
    /* An exporter that cannot serve answers at once and closes: the
     * request may then find the connection shut, the answer still there. */
    *why = "its exporter did not answer within 30 s";
    int sent = send(fd, &req, sizeof req, MSG_NOSIGNAL) == (ssize_t)sizeof req;
    ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    if (!sent && n <= 0)
        goto out_close;
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
    char busy[192];
    int fd = ask(h, &rep, fds, &why);
    if (fd < 0)
        goto out_say;
    why = "its exporter refused it (freed, or not exported)";
    if (rep.status != CUDA_SUCCESS && rep.why == IPC_WHY_BUSY) {
        snprintf(busy, sizeof busy, "its exporter serves %llu imports at once already, half "
                 "its open-file limit (raise the exporter's ulimit -n, or close imports no "
                 "longer needed)", (unsigned long long)rep.chunk);
        why = busy;
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
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
    int ok = im && !vmem_map_get(&imports, p) && vmem_map_put(&imports, p, im) == 0;
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
    ipc_import_t *im = p ? vmem_map_del(&imports, p) : NULL;
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

/* A fork() child: the descriptors are copies of the parent's, closed so
 * that the parent's imports end when the parent ends them (ipc.c's forget,
 * under the child's fresh lock). */
void vmem_ipc_imports_forget(void)
{
    for (size_t i = 0; imports.key && i <= imports.mask; i++) {
        ipc_import_t *im = imports.val[i];
        if (im)
            close(im->fd);
        free(im);
    }
    free(imports.key);
    free(imports.val);
    memset(&imports, 0, sizeof imports);
}
