/*
 * vmm.c - the virtual memory management API: physical handles (cuMemCreate,
 * cuMemRelease, retain, export / import as POSIX fds), address reservations
 * (cuMemAddressReserve / Free), mappings (cuMemMap / Unmap) and access
 * (cuMemSetAccess / GetAccess).
 *
 * Divided into: properties; handles; reservations; mappings; access.
 *
 * A handle is a memfd of its size, charged exactly (sizes are multiples of
 * the 2 MiB granularity) to its device when created, given back when the
 * last reference goes.  A handle located in host memory (the location types
 * HOST, HOST_NUMA, HOST_NUMA_CURRENT) is charged to no device.  A reservation is an mmap(PROT_NONE) of address
 * space; mapping puts the memfd there with MAP_FIXED | MAP_SHARED, so two
 * mappings of one handle share bytes, and registers the mapping as a range
 * that grants no access until cuMemSetAccess (mprotect) does.  Unmapping
 * puts PROT_NONE address space back.
 *
 * Invariants (under sim_p.lock), for a handle h:
 *   h->refs == user references (create, retain, import) + mappings of h
 *   h is charged and its fd open while h->refs > 0; h->handle is valid
 *   while it has user references.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct sim_memhandle {
    uint64_t handle;
    int fd;
    size_t size;
    int device;
    uint64_t charged;                   /* 0 for an imported handle: its owner pays */
    int urefs, maps;
    CUmemAllocationProp prop;
};

unsigned long long sim_memhandle_types(const sim_memhandle_t *mh)
{
    return (unsigned long long)mh->prop.requestedHandleTypes;
}

typedef struct reservation {
    uintptr_t base;
    size_t size;
    struct reservation *next;
} reservation_t;

static reservation_t *reservations;

/* ---- properties ---------------------------------------------------------------------- */

static int prop_on_host(const CUmemAllocationProp *p)
{
    return p->location.type == CU_MEM_LOCATION_TYPE_HOST ||
           p->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           p->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult check_prop(const CUmemAllocationProp *p)
{
    if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop_on_host(p))
        return p->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && p->location.id != 0
                   ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;   /* one NUMA node, 0 */
    if (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(p->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p,
                                               CUmemAllocationGranularity_flags option)
{
    SIM_CHECK_INIT();
    if (!g || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
               option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(p);
    if (rc == CUDA_SUCCESS)
        *g = SIM_VMM_GRANULE;
    return rc;
}

/* ---- handles ------------------------------------------------------------------------ */

static sim_memhandle_t *mh_get(CUmemGenericAllocationHandle h)
{
    return sim_obj_get(h, SIM_K_MEMHANDLE);
}

static void mh_unref(sim_memhandle_t *m, int user)
{
    if (user && --m->urefs == 0) {
        sim_obj_free(m->handle);
        m->handle = 0;
    }
    if (!user)
        m->maps--;
    if (m->urefs == 0 && m->maps == 0) {
        close(m->fd);
        if (m->charged)
            sim_uncharge(m->device, m->charged);
        free(m);
    }
}

static CUresult mh_publish(sim_memhandle_t *m, CUmemGenericAllocationHandle *out)
{
    if (!m->handle && !(m->handle = sim_obj_new(SIM_K_MEMHANDLE, m)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->urefs++;
    *out = m->handle;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *out, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_CHECK_INIT();
    if (!out || flags || !size || size % SIM_VMM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_prop(prop);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_memhandle_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->size = size;
    m->device = prop_on_host(prop) ? CU_DEVICE_CPU : prop->location.id;
    m->prop = *prop;
    SIM_LOCK();
    if (m->device != CU_DEVICE_CPU) {
        if ((rc = sim_charge(m->device, size)) != CUDA_SUCCESS)
            goto out_free;
        m->charged = size;
    }
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if ((m->fd = memfd_create("simgpu-vmm", MFD_CLOEXEC)) < 0)
        goto out_uncharge;
    if (ftruncate(m->fd, (off_t)size) < 0 || mh_publish(m, out) != CUDA_SUCCESS)
        goto out_close;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
out_close:
    close(m->fd);
out_uncharge:
    if (m->charged)
        sim_uncharge(m->device, size);
out_free:
    SIM_UNLOCK();
    free(m);
    return rc;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_memhandle_t *m = mh_get(h);
    if (m)
        mh_unref(m, 1);                 /* the memory lives on while mapped */
    SIM_UNLOCK();
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle h)
{
    SIM_CHECK_INIT();
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_memhandle_t *m = mh_get(h);
    if (m)
        *prop = m->prop;
    SIM_UNLOCK();
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *out, void *addr)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)addr);
    CUresult rc = r && r->kind == SIM_R_MAPPED ? mh_publish(r->mh, out) : CUDA_ERROR_INVALID_VALUE;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemExportToShareableHandle(void *shared, CUmemGenericAllocationHandle h,
                                              CUmemAllocationHandleType type,
                                              unsigned long long flags)
{
    SIM_CHECK_INIT();
    if (!shared || flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    SIM_LOCK();
    sim_memhandle_t *m = mh_get(h);
    CUresult rc = !m ? CUDA_ERROR_INVALID_HANDLE
                : !(m->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                    ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        int fd = dup(m->fd);
        if (fd < 0)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *(int *)shared = fd;
    }
    SIM_UNLOCK();
    return rc;
}

/* An imported handle is charged to nobody here: its exporter pays for it. */
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *out, void *os,
                                                CUmemAllocationHandleType type)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct stat st;
    int fd = (int)(intptr_t)os;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % SIM_VMM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    sim_memhandle_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if ((m->fd = dup(fd)) < 0)
        goto out_free;
    m->size = (size_t)st.st_size;
    m->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    m->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    m->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    SIM_LOCK();
    rc = mh_publish(m, out);
    SIM_UNLOCK();
    if (rc == CUDA_SUCCESS)
        return rc;
    close(m->fd);
out_free:
    free(m);
    return rc;
}

/* ---- reservations --------------------------------------------------------------------- */

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *out, size_t size, size_t align,
                                     CUdeviceptr addr, unsigned long long flags)
{
    SIM_CHECK_INIT();
    if (!out || !size || size % SIM_VMM_GRANULE || flags || (align & (align - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (align < SIM_VMM_GRANULE)
        align = SIM_VMM_GRANULE;
    if (size > (1ull << 46) || align > (1ull << 40))
        return CUDA_ERROR_OUT_OF_MEMORY;
    reservation_t *res = malloc(sizeof *res);
    if (!res)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t len = size + align;
    char *p = mmap((void *)(uintptr_t)addr, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        free(res);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t base = sim_round_up((uintptr_t)p, align);
    if (base > (uintptr_t)p)            /* trim to the alignment */
        munmap(p, base - (uintptr_t)p);
    if ((uintptr_t)p + len > base + size)
        munmap((void *)(base + size), (uintptr_t)p + len - (base + size));
    res->base = base;
    res->size = size;
    SIM_LOCK();
    res->next = reservations;
    reservations = res;
    SIM_UNLOCK();
    *out = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

static reservation_t *reservation_of(uintptr_t p, size_t size)
{
    for (reservation_t *r = reservations; r; r = r->next)
        if (p >= r->base && size <= r->size && p - r->base <= r->size - size)
            return r;
    return NULL;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (reservation_t **r = &reservations; *r; r = &(*r)->next) {
        reservation_t *res = *r;
        if (res->base != (uintptr_t)ptr || res->size != size)
            continue;
        sim_range_t *m = sim_p.ranges;   /* refused while still mapped */
        for (; m; m = m->next)
            if (m->kind == SIM_R_MAPPED && m->base >= res->base &&
                m->base < res->base + res->size)
                break;
        if (m)
            break;
        munmap((void *)res->base, res->size);
        *r = res->next;
        free(res);
        rc = CUDA_SUCCESS;
        break;
    }
    SIM_UNLOCK();
    return rc;
}

/* A fork() child forgets its parent's reservations (their address space
 * stays mapped in it, unused). */
void sim_vmm_reset_after_fork(void)
{
    reservations = NULL;
}

int sim_vmm_fd(const sim_memhandle_t *m)
{
    return m ? m->fd : -1;
}

/* ---- mappings ----------------------------------------------------------------------- */

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle h, unsigned long long flags)
{
    SIM_CHECK_INIT();
    if (flags || !size || size % SIM_VMM_GRANULE || ptr % SIM_VMM_GRANULE ||
        offset % SIM_VMM_GRANULE)
        return CUDA_ERROR_INVALID_VALUE;
    sim_range_t *r = calloc(1, sizeof *r);
    if (!r)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SIM_LOCK();
    sim_memhandle_t *m = mh_get(h);
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    if (!m)
        goto out_free;
    rc = CUDA_ERROR_INVALID_VALUE;
    if (offset > m->size || size > m->size - offset || !reservation_of(ptr, size))
        goto out_free;
    *r = (sim_range_t){ .base = (uintptr_t)ptr, .size = size, .kind = SIM_R_MAPPED,
                        .device = m->device, .mh = m, .offset = offset, .prot = PROT_NONE };
    if (sim_range_add(r))               /* overlaps a mapping already there */
        goto out_free;
    if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, m->fd,
             (off_t)offset) == MAP_FAILED) {
        sim_range_remove(r);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_free;
    }
    m->maps++;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
out_free:
    SIM_UNLOCK();
    free(r);
    return rc;
}

/* The mappings exactly covering [ptr, ptr+size), or -1. */
static int covered(uintptr_t ptr, size_t size)
{
    for (uintptr_t p = ptr; p < ptr + size;) {
        sim_range_t *r = sim_range_find(p);
        if (!r || r->kind != SIM_R_MAPPED || r->base != p || r->size > ptr + size - p)
            return -1;
        p += r->size;
    }
    return 0;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_CHECK_INIT();
    if (!size)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    CUresult rc = covered((uintptr_t)ptr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)         /* it waits for the work that may touch the range, */
        rc = sim_capture_unsafe();  /* as cuMemFree does: not in a capture */
    for (uintptr_t p = ptr; rc == CUDA_SUCCESS && p < ptr + size;) {
        sim_range_t *r = sim_range_find(p);
        p += r->size;
        /* Back to reserved address space: nothing may land there meanwhile. */
        mmap((void *)r->base, r->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        sim_range_remove(r);
        mh_unref(r->mh, 0);
        free(r);
    }
    SIM_UNLOCK();
    return rc;
}

/* ---- access ------------------------------------------------------------------------- */

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    SIM_CHECK_INIT();
    if (!desc || !count || !size)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!sim_device_valid(desc[i].location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        switch ((int)desc[i].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE: break;
        case CU_MEM_ACCESS_FLAGS_PROT_READ: prot |= PROT_READ; break;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE: prot |= PROT_READ | PROT_WRITE; break;
        default: return CUDA_ERROR_INVALID_VALUE;
        }
    }
    SIM_LOCK();
    CUresult rc = covered((uintptr_t)ptr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    for (uintptr_t p = ptr; rc == CUDA_SUCCESS && p < ptr + size;) {
        sim_range_t *r = sim_range_find(p);
        if (mprotect((void *)r->base, r->size, prot) < 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            r->prot = prot;
        p += r->size;
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *loc,
                                CUdeviceptr ptr)
{
    SIM_CHECK_INIT();
    if (!flags || !loc)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)ptr);
    int ok = r && r->kind == SIM_R_MAPPED;
    if (ok)
        *flags = r->prot & PROT_WRITE ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
               : r->prot & PROT_READ ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                     : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
