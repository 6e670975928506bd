/*
 * ipc.c - legacy CUDA IPC memory handles (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle): another process maps the same
 * bytes as the exporter's cuMemAlloc allocation.
 *
 * What is shareable: memory of cuMemAlloc (and cuMemAllocPitch) of 1 MiB
 * or more, which mem.c backs by an anonymous mapping of its own.  Smaller
 * allocations live inside malloc blocks that share pages with other
 * allocations, so no other process could map their bytes alone: for them
 * cuIpcGetMemHandle answers CUDA_ERROR_NOT_SUPPORTED (said once on stderr
 * with SIMGPU_LOG=1).  For an address of a VMM mapping (cuMemMap), of a
 * pool, of managed or host memory or of nothing it answers
 * CUDA_ERROR_INVALID_VALUE, as the driver does (VMM memory is shared
 * through cuMemExportToShareableHandle instead).
 *
 * Export, made when first asked, so that allocating stays as cheap as it
 * was: the allocation's pages move into a memfd (only the pages ever
 * written are copied, sparse.c, so never-written memory stays unwritten),
 * mapped MAP_SHARED at the same address (mremap over the anonymous
 * mapping: the address never changes), and the range keeps the memfd open
 * (r->ipc).  The handle (64 bytes) names the exporter's pid and the memfd's
 * fd number there, the memfd's inode, a generation written into the
 * memfd's name, the allocation's size and device, and a checksum.  Asking
 * again for the same allocation, through its base or any address inside
 * it, gives the same handle (the driver's handle is the allocation's).
 *
 * Import: the opener reopens the exporter's memfd through
 * /proc/<pid>/fd/<n> (pidfd_getfd where /proc is closed to it), checks
 * that it is the memfd of the handle (the name's generation and the inode:
 * a freed allocation's fd number taken by another file is refused), and
 * maps it at an address of its own, a range of kind SIM_R_DEVICE charged
 * to nobody (its exporter pays, as the driver counts it).  A handle made in
 * this process answers CUDA_ERROR_INVALID_CONTEXT, as the driver's does;
 * one simgpu did not make, CUDA_ERROR_INVALID_VALUE; one whose memory is
 * gone (freed, or its process ended), CUDA_ERROR_INVALID_HANDLE.  Opening
 * a handle already open in this process returns the same address and
 * counts the open; each cuIpcCloseMemHandle takes one back and the last
 * unmaps.  cuMemFree of an imported address is refused.  The exporter's
 * free while imported: the importer's bytes stay (the memfd lives while it
 * is mapped), and the charge goes back to the device at the free.
 *
 * Events (cuIpcGetEventHandle, cuIpcOpenEventHandle): an event created
 * with CU_EVENT_INTERPROCESS, when first exported, moves its state (whether
 * recorded, and when its work completes: CLOCK_MONOTONIC, one clock for
 * every process of the host) into a page of a memfd of its own; the
 * handle names it as a memory handle names its memfd, and the opener maps
 * the page into a new event of its current context (flags
 * CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS), so that its query,
 * synchronize and stream waits see the exporter's latest record (and its
 * own records are the exporter's to see).  event.c loads and stores the
 * state through sim_ipc_event_load / _store.  An event not created
 * interprocess: CUDA_ERROR_INVALID_VALUE (which error the driver gives is
 * not documented).
 *
 * Divided into: the handle; export; import; close and release; events.
 *
 * Lock: sim_p.lock guards the ranges and their r->ipc; the /proc look-ups
 * of an import are made under it too (no other process's lock is taken).
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define IPC_MAGIC   0x494d4953u         /* "SIMI" (libsalus's handles start "SLAS") */
#define IPC_VERSION 1u
#define IPC_NAME    "simgpu-ipc-"
#define EV_MAGIC    0x454d4953u         /* "SIME": an event's */
#define EV_NAME     "simgpu-ipcev-"

struct sim_ipcmem {
    int fd;                             /* the memfd */
    int imported;                       /* mapped from another process's handle */
    int opens;                          /* imported: cuIpcOpenMemHandle calls not closed */
    uint64_t gen, ino;
    uint32_t pid;                       /* the exporter (imported: the handle's) */
};

/* ---- the handle ------------------------------------------------------------------- */

typedef struct ipc_handle {
    uint32_t magic, version;
    uint32_t pid;
    int32_t fd;
    uint64_t ino, gen, size;
    int32_t device;
    uint32_t check;                     /* FNV-1a of the bytes before it */
    uint8_t pad[16];
} ipc_handle_t;

_Static_assert(sizeof(ipc_handle_t) == sizeof(CUipcMemHandle), "a handle is 64 bytes");

static uint32_t fnv(const void *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const uint8_t *)p)[i]) * 16777619u;
    return h;
}

static void handle_make(const sim_range_t *r, CUipcMemHandle *out)
{
    ipc_handle_t h = { .magic = IPC_MAGIC, .version = IPC_VERSION, .pid = r->ipc->pid,
                       .fd = r->ipc->fd, .ino = r->ipc->ino, .gen = r->ipc->gen,
                       .size = r->size, .device = r->device };
    h.check = fnv(&h, offsetof(ipc_handle_t, check));
    memcpy(out, &h, sizeof h);
}

static int handle_read(const void *in, uint32_t magic, ipc_handle_t *h)
{
    memcpy(h, in, sizeof *h);
    return h->magic == magic && h->version == IPC_VERSION && h->fd >= 0 && h->size &&
           h->check == fnv(h, offsetof(ipc_handle_t, check)) ? 0 : -1;
}

/* ---- export ------------------------------------------------------------------------ */

static uint64_t next_gen(void)
{
    static uint64_t gen;
    if (!gen && getrandom(&gen, sizeof gen, 0) != sizeof gen)
        gen = (uint64_t)sim_now() ^ ((uint64_t)getpid() << 32);
    return ++gen;
}

/* Move r's pages into a memfd mapped shared at the same address. */
static CUresult make_shareable(sim_range_t *r)
{
    struct sim_ipcmem *m = calloc(1, sizeof *m);
    char name[64];
    struct stat st;
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->gen = next_gen();
    m->pid = (uint32_t)getpid();
    snprintf(name, sizeof name, IPC_NAME "%016llx", (unsigned long long)m->gen);
    m->fd = memfd_create(name, MFD_CLOEXEC);
    void *tmp = MAP_FAILED;
    if (m->fd < 0 || ftruncate(m->fd, (off_t)r->raw_size) || fstat(m->fd, &st))
        goto fail;
    m->ino = (uint64_t)st.st_ino;
    tmp = mmap(NULL, r->raw_size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (tmp == MAP_FAILED)
        goto fail;
    sim_copy_written(tmp, r);           /* the rest of a fresh memfd reads zeros */
    if (mremap(tmp, r->raw_size, r->raw_size, MREMAP_MAYMOVE | MREMAP_FIXED, r->raw) ==
        MAP_FAILED)
        goto fail;
    r->ipc = m;
    return CUDA_SUCCESS;
fail:
    if (tmp != MAP_FAILED)
        munmap(tmp, r->raw_size);
    if (m->fd >= 0)
        close(m->fd);
    free(m);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    static int said;
    SIM_CHECK_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)dptr);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (r && r->kind == SIM_R_DEVICE && !r->mmapped) {
        rc = CUDA_ERROR_NOT_SUPPORTED;
        if (sim_log_enabled() && !said++)
            fprintf(stderr, "simgpu: cuIpcGetMemHandle: an allocation under 1 MiB cannot be "
                            "shared between processes here (it shares host pages with "
                            "others); allocate 1 MiB or more to share it\n");
    } else if (r && r->kind == SIM_R_DEVICE) {
        rc = r->ipc ? CUDA_SUCCESS : make_shareable(r);
        if (rc == CUDA_SUCCESS)
            handle_make(r, handle);     /* an imported range's handle is its exporter's */
    }
    SIM_UNLOCK();
    return rc;
}

/* ---- import ------------------------------------------------------------------------ */

/* The exporter's memfd of h (named prefix + generation), reopened here; -1
 * when it is gone or not h's. */
static int reopen(const ipc_handle_t *h, const char *prefix)
{
    char path[64], link[128], want[64];
    snprintf(path, sizeof path, "/proc/%u/fd/%d", h->pid, h->fd);
    snprintf(want, sizeof want, "/memfd:%s%016llx", prefix, (unsigned long long)h->gen);
    ssize_t n = readlink(path, link, sizeof link - 1);
    int fd = -1;
    if (n > 0) {
        link[n] = '\0';
        if (strncmp(link, want, strlen(want)))
            return -1;                  /* that fd number is another file now */
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
#ifdef SYS_pidfd_getfd
    if (fd < 0 && n <= 0) {             /* /proc closed to us: ask the kernel for it */
        int pfd = (int)syscall(SYS_pidfd_open, (pid_t)h->pid, 0);
        if (pfd >= 0) {
            fd = (int)syscall(SYS_pidfd_getfd, pfd, h->fd, 0);
            close(pfd);
        }
    }
#endif
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) || (uint64_t)st.st_ino != h->ino ||
                    (uint64_t)st.st_size < h->size)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static sim_range_t *find_import(const ipc_handle_t *h)
{
    for (sim_range_t *r = sim_p.ranges; r; r = r->next)
        if (r->ipc && r->ipc->imported && r->ipc->pid == h->pid && r->ipc->gen == h->gen)
            return r;
    return NULL;
}

static CUresult map_import(const ipc_handle_t *h, sim_ctx_t *ctx, sim_range_t **out)
{
    int fd = reopen(h, IPC_NAME);
    if (fd < 0)
        return CUDA_ERROR_INVALID_HANDLE;
    size_t len = sim_round_up(h->size, 4096);
    sim_range_t *r = calloc(1, sizeof *r);
    struct sim_ipcmem *m = calloc(1, sizeof *m);
    void *p = r && m ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED)
        goto fail;
    *m = (struct sim_ipcmem){ .fd = fd, .imported = 1, .opens = 1, .gen = h->gen,
                              .ino = h->ino, .pid = h->pid };
    *r = (sim_range_t){ .base = (uintptr_t)p, .size = h->size, .raw = p, .raw_size = len,
                        .kind = SIM_R_DEVICE, .mmapped = 1, .device = ctx->device,
                        .ctx = ctx, .ipc = m };
    if (sim_range_add(r) == 0) {
        *out = r;
        return CUDA_SUCCESS;
    }
    munmap(p, len);
fail:
    free(r);
    free(m);
    close(fd);
    return CUDA_ERROR_MAP_FAILED;
}

static CUresult open_handle(CUdeviceptr *pdptr, const CUipcMemHandle *handle,
                            unsigned int flags)
{
    SIM_CHECK_INIT();
    ipc_handle_t h;
    /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: every device here reaches every
     * other's memory, so there is no peer access to enable. */
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ||
        handle_read(handle, IPC_MAGIC, &h))
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *ctx = sim_ctx_current();
    sim_range_t *r = NULL;
    CUresult rc = CUDA_SUCCESS;
    if (!ctx || h.pid == (uint32_t)getpid())
        rc = CUDA_ERROR_INVALID_CONTEXT;    /* the driver's answer in the exporter too */
    else if ((r = find_import(&h)) != NULL)
        r->ipc->opens++;
    else
        rc = map_import(&h, ctx, &r);
    if (rc == CUDA_SUCCESS)
        *pdptr = (CUdeviceptr)r->base;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                    unsigned int flags)
{
    return open_handle(pdptr, &handle, flags);
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                       unsigned int flags)
{
    return open_handle(pdptr, &handle, flags);
}

/* ---- close and release ------------------------------------------------------------- */

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    SIM_CHECK_INIT();
    if (!sim_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)dptr);
    CUresult rc = CUDA_ERROR_INVALID_VALUE;     /* not an address cuIpcOpenMemHandle gave */
    if (r && r->base == (uintptr_t)dptr && r->ipc && r->ipc->imported) {
        rc = CUDA_SUCCESS;
        if (--r->ipc->opens == 0)
            sim_mem_release(r);             /* charged nothing; unmaps, sim_ipc_release */
    }
    SIM_UNLOCK();
    return rc;
}

int sim_ipc_imported(const sim_range_t *r)
{
    return r->ipc && r->ipc->imported;
}

int sim_ipc_fd(const sim_range_t *r)
{
    return r->ipc ? r->ipc->fd : -1;
}

void sim_ipc_release(sim_range_t *r)
{
    if (!r->ipc)
        return;
    close(r->ipc->fd);
    free(r->ipc);
    r->ipc = NULL;
}

/* ---- events ------------------------------------------------------------------------ */

typedef struct ev_state {
    uint64_t time;
    uint32_t recorded;
} ev_state_t;

struct sim_ipcev {
    int fd;
    ev_state_t *st;                     /* the shared page */
    uint64_t gen, ino;
    uint32_t pid;
};

void sim_ipc_event_load(sim_event_t *e)
{
    if (!e->ipc)
        return;
    e->recorded = (int)__atomic_load_n(&e->ipc->st->recorded, __ATOMIC_ACQUIRE);
    e->time = __atomic_load_n(&e->ipc->st->time, __ATOMIC_RELAXED);
}

void sim_ipc_event_store(const sim_event_t *e)
{
    if (!e->ipc)
        return;
    __atomic_store_n(&e->ipc->st->time, e->time, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ipc->st->recorded, (uint32_t)e->recorded, __ATOMIC_RELEASE);
}

void sim_ipc_event_release(sim_event_t *e)
{
    if (!e->ipc)
        return;
    munmap(e->ipc->st, 4096);
    close(e->ipc->fd);
    free(e->ipc);
    e->ipc = NULL;
}

static struct sim_ipcev *ev_map(int fd)
{
    struct sim_ipcev *m = calloc(1, sizeof *m);
    void *p = m ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(m);
        return NULL;
    }
    m->fd = fd;
    m->st = p;
    return m;
}

static CUresult ev_share(sim_event_t *e)
{
    char name[64];
    struct stat st;
    uint64_t gen = next_gen();
    snprintf(name, sizeof name, EV_NAME "%016llx", (unsigned long long)gen);
    int fd = memfd_create(name, MFD_CLOEXEC);
    struct sim_ipcev *m = NULL;
    if (fd < 0 || ftruncate(fd, 4096) || fstat(fd, &st) || !(m = ev_map(fd))) {
        if (fd >= 0)
            close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->gen = gen;
    m->ino = (uint64_t)st.st_ino;
    m->pid = (uint32_t)getpid();
    e->ipc = m;
    sim_ipc_event_store(e);             /* what it holds so far */
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle *handle, CUevent ev)
{
    SIM_CHECK_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_event_t *e = sim_event_get(ev);
    CUresult rc = !e ? CUDA_ERROR_INVALID_HANDLE
                : !(e->flags & CU_EVENT_INTERPROCESS) ? CUDA_ERROR_INVALID_VALUE
                : e->ipc ? CUDA_SUCCESS : ev_share(e);
    if (rc == CUDA_SUCCESS) {
        ipc_handle_t h = { .magic = EV_MAGIC, .version = IPC_VERSION, .pid = e->ipc->pid,
                           .fd = e->ipc->fd, .ino = e->ipc->ino, .gen = e->ipc->gen,
                           .size = 4096, .device = e->ctx ? e->ctx->device : 0 };
        h.check = fnv(&h, offsetof(ipc_handle_t, check));
        _Static_assert(sizeof h == sizeof *handle, "an event handle is 64 bytes");
        memcpy(handle, &h, sizeof h);
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuIpcOpenEventHandle(CUevent *ph, CUipcEventHandle handle)
{
    SIM_CHECK_INIT();
    ipc_handle_t h;
    if (!ph || handle_read(&handle, EV_MAGIC, &h))
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *ctx = sim_ctx_current();
    CUresult rc = CUDA_SUCCESS;
    int fd = -1;
    struct sim_ipcev *m = NULL;
    sim_event_t *e = NULL;
    if (!ctx || h.pid == (uint32_t)getpid())
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if ((fd = reopen(&h, EV_NAME)) < 0)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (!(m = ev_map(fd)) ||
             !(e = sim_event_new(ctx, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (m)
            munmap(m->st, 4096);
        free(m);
        close(fd);
    } else {
        m->gen = h.gen;
        m->ino = h.ino;
        m->pid = h.pid;
        e->ipc = m;
        *ph = (CUevent)(uintptr_t)e->handle;
    }
    SIM_UNLOCK();
    return rc;
}
