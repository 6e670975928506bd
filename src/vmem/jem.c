/*
 * jem.c - libsalus's private jemalloc, sub-allocating the small device
 * allocations of a virtualized process (vmem_int.h).
 *
 * Divided into: the jemalloc entry points; the extent hooks; arenas.
 *
 * jemalloc is Debian's static PIC archive with its public names renamed
 * salus_je_* (mk/jemalloc.sh) and kept out of libsalus's exports, so the
 * program's malloc is untouched.  It is referenced weakly: binaries that
 * link the memory module without it (the tools, unit tests) see it absent,
 * and small allocations then get chunks of their own.
 *
 * jemalloc 5.3 takes its metadata (base blocks) from an arena's own extent
 * hooks.  So the hooks never hand it device memory: each arena manages a
 * host "shadow" range (PROT_NONE, MAP_NORESERVE: address space only) of the
 * small region's size, and a device address is its shadow address plus a
 * fixed offset.  jemalloc writes its metadata into shadow pages (committed
 * by the kernel only where written) and never touches user extents (no junk
 * or zero fill is asked), so no host write ever reaches the device.
 * Extents are handed out by a bump pointer and never taken back (the dalloc
 * hook opts out): jemalloc keeps and reuses them.  Splitting and merging
 * are free (a range is only addresses).
 *
 * In front of jemalloc, each arena keeps the last blocks freed
 * (VMEM_JEM_KEEP of them, of any size below the granularity), and an
 * allocation of a kept block's exact size takes it back: a program that
 * frees and allocates one size again then costs two scans of a few words
 * instead of an extent built and torn down in jemalloc (what made a
 * paging-on pair ten times a plain one).  jemalloc's own thread caches
 * cannot serve here: it serves a large size asked with an alignment over
 * a cache line outside them, and without it offsets a large block within
 * its first page.  A kept block is free for libsalus (its granules no
 * longer count it: it moves without a copy), only not yet for jemalloc;
 * what is kept is under VMEM_JEM_KEEP granules, and vmem_jem_flush gives
 * it back when the device is short.
 *
 * Lock: every call runs under vmem_p.lock, the hooks included (they run
 * inside mallocx and dallocx).
 */
#define JEMALLOC_NO_DEMANGLE
#include <jemalloc/jemalloc.h>

#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- the jemalloc entry points (weak: absent outside libsalus) ------------ */

extern int salus_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                            size_t newlen) __attribute__((weak));
extern void *salus_je_mallocx(size_t size, int flags) __attribute__((weak));
extern void salus_je_dallocx(void *ptr, int flags) __attribute__((weak));

int vmem_jem_available(void)
{
    return salus_je_mallctl && salus_je_mallocx && salus_je_dallocx;
}

/* ---- the extent hooks ------------------------------------------------------ */

typedef struct jem_arena {
    extent_hooks_t hooks;          /* first: jemalloc hands back this pointer */
    vmem_jem_t *j;
} jem_arena_t;

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align,
                        bool *zero, bool *commit, unsigned arena_ind)
{
    (void)arena_ind;
    vmem_jem_t *j = ((jem_arena_t *)h)->j;
    if (align < 4096)
        align = 4096;
    uintptr_t at = (j->shadow + j->bump + align - 1) & ~(uintptr_t)(align - 1);
    if (new_addr && (uintptr_t)new_addr != at)
        return NULL;                  /* only the next addresses can be had */
    if (at + size < at || at + size > j->shadow + j->size)
        return NULL;
    if (mprotect((void *)at, size, PROT_READ | PROT_WRITE) != 0)
        return NULL;
    j->bump = at + size - j->shadow;
    *zero = true;                     /* fresh anonymous pages */
    *commit = true;
    return (void *)at;
}

static bool hook_dalloc(extent_hooks_t *h, void *addr, size_t size, bool committed,
                        unsigned arena_ind)
{
    (void)h, (void)addr, (void)size, (void)committed, (void)arena_ind;
    return true;                      /* opt out: jemalloc keeps it for reuse */
}

static bool hook_split(extent_hooks_t *h, void *addr, size_t size, size_t a, size_t b,
                       bool committed, unsigned arena_ind)
{
    (void)h, (void)addr, (void)size, (void)a, (void)b, (void)committed, (void)arena_ind;
    return false;
}

static bool hook_merge(extent_hooks_t *h, void *a, size_t asize, void *b, size_t bsize,
                       bool committed, unsigned arena_ind)
{
    (void)h, (void)a, (void)asize, (void)b, (void)bsize, (void)committed, (void)arena_ind;
    return false;
}

/* ---- arenas ---------------------------------------------------------------- */

int vmem_jem_create(vmem_jem_t *j, uintptr_t dev, size_t size)
{
    if (!vmem_jem_available())
        return -1;
    jem_arena_t *a = calloc(1, sizeof *a);
    if (!a)
        return -1;
    void *shadow = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (shadow == MAP_FAILED)
        goto out_free;
    a->hooks = (extent_hooks_t){ .alloc = hook_alloc, .dalloc = hook_dalloc,
                                 .split = hook_split, .merge = hook_merge };
    a->j = j;
    j->shadow = (uintptr_t)shadow;
    j->dev = dev;
    j->size = size;
    j->bump = 0;
    extent_hooks_t *hp = &a->hooks;
    unsigned index;
    size_t len = sizeof index;
    if (salus_je_mallctl("arenas.create", &index, &len, &hp, sizeof hp) != 0)
        goto out_unmap;
    j->index = index;
    j->arena = a;
    return 0;
out_unmap:
    munmap(shadow, size);
    j->shadow = 0;
out_free:
    free(a);
    util_error("memory: jemalloc could not make an arena for small allocations; "
               "each gets a chunk of its own");
    return -1;
}

static int flags_of(const vmem_jem_t *j)
{
    return MALLOCX_ARENA(j->index) | MALLOCX_TCACHE_NONE;
}

/* ---- blocks --------------------------------------------------------------------
 * j->keep[0, j->kept) are the kept blocks, the newest last; a block is
 * in jemalloc (allocated there) while kept. */

static size_t rounded(size_t n)
{
    return (n + VMEM_ALIGN - 1) & ~(size_t)(VMEM_ALIGN - 1);
}

uintptr_t vmem_jem_alloc(vmem_jem_t *j, size_t n)
{
    if (!j->arena || n > SIZE_MAX - VMEM_ALIGN)
        return 0;
    n = rounded(n);
    for (unsigned i = j->kept; i-- > 0;) {
        if (j->keep[i].size != n)
            continue;
        uintptr_t p = j->keep[i].devptr;
        j->keep[i] = j->keep[--j->kept];
        return p;
    }
    void *p = salus_je_mallocx(n, flags_of(j) | MALLOCX_ALIGN(VMEM_ALIGN));
    if (!p)
        return 0;
    return (uintptr_t)p - j->shadow + j->dev;
}

static void release(vmem_jem_t *j, uintptr_t devptr)
{
    salus_je_dallocx((void *)vmem_jem_shadow(j, devptr), flags_of(j));
}

void vmem_jem_free(vmem_jem_t *j, uintptr_t devptr, size_t n)
{
    if (!j->arena)
        return;
    if (j->kept == VMEM_JEM_KEEP) {          /* the oldest goes back */
        release(j, j->keep[0].devptr);
        memmove(&j->keep[0], &j->keep[1], (VMEM_JEM_KEEP - 1) * sizeof j->keep[0]);
        j->kept--;
    }
    j->keep[j->kept++] = (vmem_jem_block_t){ .devptr = devptr, .size = rounded(n) };
}

int vmem_jem_flush(vmem_jem_t *j)
{
    int any = j->kept > 0;
    while (j->kept > 0)
        release(j, j->keep[--j->kept].devptr);
    return any;
}
