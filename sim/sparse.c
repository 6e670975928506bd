/*
 * sparse.c - large copies and zero memsets that keep never-written memory
 * unwritten: the
 * bytes of a copy are exactly memmove's, but where the source is known to
 * hold zeros that were never written (a hole of a memfd: a VMM handle's or
 * an IPC-shared allocation's; a page of a simgpu-owned anonymous mapping
 * that was never touched), the
 * destination is zeroed by giving its pages back (a hole punched in its
 * memfd, MADV_DONTNEED on its anonymous pages) instead of by writing them.
 *
 * Why: a simulated GPU's memory is host memory.  A job on simgpu whose
 * kernels only spin allocates gigabytes that nothing ever writes and that
 * cost the host nothing, until a copy (a page-out to pinned staging, a
 * page-in back) writes every byte: a 12 GiB job paged out and in would
 * take 24 GiB of the host's RAM and seconds of memcpy, which no real GPU
 * pays (its device memory is not the host's).  The copy's time on its
 * stream is still size / bandwidth for every byte (copy.c): only the
 * host's RAM and CPU are spared, never the modelled transfer.
 *
 * Divided into: what the source holds (holes of a memfd, untouched pages
 * of anonymous memory through /proc/self/pagemap); zeroing a destination
 * cheaply; the walk.
 *
 * Exactness: a page of a private anonymous mapping that is neither present
 * nor swapped (pagemap bits 63, 62) has never been written since it was
 * mapped or given back, so it reads as zeros; a memfd's hole (SEEK_HOLE)
 * reads as zeros.  Anything else, or any doubt (the pagemap cannot be
 * read, overlapping buffers, memory simgpu does not own), is copied.
 *
 * Lock: the caller's sim_p.lock (ranges do not change under it).
 */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SPARSE_MIN   (1u << 20)         /* smaller copies are memmove */
#define PAGE         4096u
#define PM_PRESENT   (1ull << 63)
#define PM_SWAPPED   (1ull << 62)
#define PM_BATCH     512                /* pagemap entries read at a time */

/* ---- what the source holds ----------------------------------------------------- */

/* The memfd behind r and where r->base is in it; -1 when r is not a
 * memfd's (a VMM mapping, or an allocation shared by legacy IPC, ipc.c). */
static int memfd_of(const sim_range_t *r, off_t *at)
{
    if (r->kind == SIM_R_MAPPED) {
        *at = (off_t)r->offset;
        return r->mh ? sim_vmm_fd(r->mh) : -1;
    }
    *at = 0;
    return sim_ipc_fd(r);
}

/* A simgpu range whose pages can be asked about: a memfd's (above; its
 * pages may be written by another process, so pagemap cannot tell) or an
 * anonymous mapping of its own (device or host memory of 1 MiB up). */
static int knows(const sim_range_t *r)
{
    off_t at;
    if (!r)
        return 0;
    if (r->kind == SIM_R_MAPPED || r->ipc)
        return memfd_of(r, &at) >= 0;
    return r->mmapped && (r->kind == SIM_R_DEVICE || r->kind == SIM_R_HOST ||
                          r->kind == SIM_R_MANAGED);
}

/* From p (inside r), how many bytes up to `max` are of one kind; *zero:
 * they are never-written zeros.  pm: /proc/self/pagemap's fd, or -1. */
static size_t run_of(const sim_range_t *r, uintptr_t p, size_t max, int pm, int *zero)
{
    size_t lim = r->base + r->size - p < max ? r->base + r->size - p : max;
    off_t at;
    int fd = memfd_of(r, &at);
    *zero = 0;
    if (fd >= 0) {
        off_t off = at + (off_t)(p - r->base), end = off + (off_t)lim;
        off_t data = lseek(fd, off, SEEK_DATA);
        if (data < 0 && errno != ENXIO)
            return lim;                        /* cannot tell: copied */
        if (data < 0 || data > off) {          /* a hole (ENXIO: to the end) */
            *zero = 1;
            return data < 0 || data >= end ? lim : (size_t)(data - off);
        }
        off_t hole = lseek(fd, off, SEEK_HOLE);
        return hole < 0 || hole >= end ? lim : (size_t)(hole - off);
    }
    if (pm < 0)
        return lim;
    if (p % PAGE)                              /* to the next page as data */
        return PAGE - p % PAGE < lim ? PAGE - p % PAGE : lim;
    uint64_t e[PM_BATCH];
    size_t pages = lim / PAGE, done = 0;
    if (!pages)
        return lim;
    while (done < pages) {
        size_t want = pages - done < PM_BATCH ? pages - done : PM_BATCH;
        off_t at = (off_t)((p / PAGE + done) * sizeof e[0]);
        ssize_t got = pread(pm, e, want * sizeof e[0], at);
        if (got < (ssize_t)sizeof e[0])
            break;
        for (size_t i = 0; i < (size_t)got / sizeof e[0]; i++) {
            int z = !(e[i] & (PM_PRESENT | PM_SWAPPED));
            if (done == 0 && i == 0)
                *zero = z;
            else if (z != *zero)
                return (done + i) * PAGE;
        }
        done += (size_t)got / sizeof e[0];
    }
    return done ? done * PAGE : lim;
}

/* ---- zeroing a destination cheaply ---------------------------------------------- */

static void zero(uintptr_t d, size_t n, const sim_range_t *r)
{
    uintptr_t lo = (d + PAGE - 1) & ~(uintptr_t)(PAGE - 1), hi = (d + n) & ~(uintptr_t)(PAGE - 1);
    int done = 0;
    off_t at;
    if (knows(r) && lo < hi && hi <= r->base + r->size) {
        int fd = memfd_of(r, &at);
        if (fd >= 0) {                 /* MADV_DONTNEED would not zero a shared page */
            done = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                             at + (off_t)(lo - r->base), (off_t)(hi - lo)) == 0;
        } else {
            done = madvise((void *)lo, hi - lo, MADV_DONTNEED) == 0;
        }
    }
    if (!done) {
        memset((void *)d, 0, n);
        return;
    }
    memset((void *)d, 0, lo - d);
    memset((void *)hi, 0, d + n - hi);
}

/* ---- the walk ---------------------------------------------------------------------- */

/* Before a copy writes [p, p+len) of a memfd's mapping (a VMM handle's
 * fresh memory, as a page-in writes it), the pages of its holes are made
 * present in one call (MADV_POPULATE_WRITE, Linux 5.14) instead of one
 * fault per 4 KiB as memcpy reaches them: the pages are the same ones the
 * copy would make, the faults' entries and exits are what is saved (a
 * fifth of a page-in over simgpu).  Memory with no hole in the span is left
 * alone (populating present pages costs a walk of them), and so is memory
 * that is not a memfd's; where the kernel refuses, memcpy faults as before. */
static void prefault(uintptr_t p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    const sim_range_t *r = sim_range_find(p);
    off_t at;
    int fd = r ? memfd_of(r, &at) : -1;
    if (fd < 0 || p + len > r->base + r->size)
        return;
    off_t off = at + (off_t)(p - r->base), hole = lseek(fd, off, SEEK_HOLE);
    if (hole < 0 || hole >= off + (off_t)len)
        return;                        /* every page there already */
    uintptr_t lo = (p + PAGE - 1) & ~(uintptr_t)(PAGE - 1), hi = (p + len) & ~(uintptr_t)(PAGE - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

void sim_move(void *dst, const void *src, size_t n)
{
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (n < SPARSE_MIN || (d < s + n && s < d + n) || !knows(sim_range_find(s))) {
        memmove(dst, src, n);
        return;
    }
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);   /* this process's, after fork too */
    for (size_t at = 0; at < n;) {
        const sim_range_t *rs = sim_range_find(s + at);
        int z = 0;
        size_t len = knows(rs) ? run_of(rs, s + at, n - at, pm, &z) : n - at;
        if (!len)
            len = n - at;
        if (z) {
            /* the destination's range may end inside the run: zero it range by range */
            for (size_t k = 0; k < len;) {
                const sim_range_t *rd = sim_range_find(d + at + k);
                size_t piece = len - k;
                if (rd && rd->base + rd->size - (d + at + k) < piece)
                    piece = rd->base + rd->size - (d + at + k);
                zero(d + at + k, piece, rd);
                k += piece;
            }
        } else {
            prefault(d + at, len);
            memcpy((void *)(d + at), (const void *)(s + at), len);
        }
        at += len;
    }
    if (pm >= 0)
        close(pm);
}

/* A memset of zeros: as zero() over each range the span crosses (the
 * caller checked that ranges cover it), page by page given back. */
void sim_zero(void *dst, size_t n)
{
    uintptr_t d = (uintptr_t)dst;
    if (n < SPARSE_MIN) {
        memset(dst, 0, n);
        return;
    }
    for (size_t k = 0; k < n;) {
        const sim_range_t *r = sim_range_find(d + k);
        size_t piece = n - k;
        if (r && r->base + r->size - (d + k) < piece)
            piece = r->base + r->size - (d + k);
        zero(d + k, piece, r);
        k += piece;
    }
}

/* For ipc.c's export: dst is a fresh memfd's mapping (zeros); only the runs
 * of r ever written are copied, so never-written memory stays unwritten. */
void sim_copy_written(void *dst, const sim_range_t *r)
{
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    for (size_t at = 0; at < r->size;) {
        int z = 0;
        size_t len = run_of(r, r->base + at, r->size - at, pm, &z);
        if (!len)
            len = r->size - at;
        if (!z)
            memcpy((char *)dst + at, (const void *)(r->base + at), len);
        at += len;
    }
    if (pm >= 0)
        close(pm);
}
