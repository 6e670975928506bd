/*
 * fatbin.c - reading a fatbin (the container nvcc embeds): choosing the
 * entry the device runs, and decompressing it.
 *
 * Divided into: decompression (LZ4 blocks, ZSTD frames); the choice of an
 * entry; sim_fatbin_load().
 *
 * Layout (little-endian).  Header: magic u32, version u16, header size u16,
 * size of the entries u64.  Each entry: kind u16 (1 PTX, 2 ELF), u16,
 * header size u32, payload size u64 (padded), compressed size u32 at 16,
 * architecture u32 at 28 (sm_XY as XY; the virtual one for PTX), flags u64
 * at 40, uncompressed size u64 at 56; the payload follows the entry's
 * header.  Flag 0x2000 marks an LZ4 block (nvcc --compress-mode=speed),
 * 0x8000 a ZSTD frame (nvcc 13's default, and for PTX-only fatbins even
 * without asking).
 *
 * The choice is the driver's: the cubin of the newest architecture the
 * device runs (same major version, minor no newer: sm_90 on this sm_90
 * device), else the newest PTX no newer than the device, which the driver
 * would JIT; a fatbin with neither is CUDA_ERROR_NO_BINARY_FOR_GPU.
 *
 * No lock: works on the image and a module not yet published.
 */
#include "loader.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define ENTRY_MIN            64
#define KIND_PTX             1
#define KIND_ELF             2
#define FLAG_LZ4             0x2000u
#define FLAG_ZSTD            0x8000u

/* ---- decompression ------------------------------------------------------------ */

/* A length continued in 255-bytes (LZ4): 0, or -1 past the end. */
static int lz4_length(const unsigned char *src, size_t n, size_t *i, size_t *len)
{
    unsigned char b;
    do {
        if (*i >= n)
            return -1;
        b = src[(*i)++];
        *len += b;
    } while (b == 255);
    return 0;
}

/* One LZ4 block (sequences of token, literals, 16-bit offset, match) into
 * exactly cap bytes; -1 for anything that would read or write out of
 * bounds or does not fill dst. */
static int lz4_block(const unsigned char *src, size_t n, unsigned char *dst, size_t cap)
{
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned tok = src[i++];
        size_t lit = tok >> 4, match = tok & 15;
        if (lit == 15 && lz4_length(src, n, &i, &lit))
            return -1;
        if (lit > n - i || lit > cap - o)
            return -1;
        memcpy(dst + o, src + i, lit);
        i += lit;
        o += lit;
        if (i == n)                     /* the last sequence: literals only */
            break;
        if (n - i < 2)
            return -1;
        size_t off = (size_t)src[i] | (size_t)src[i + 1] << 8;
        i += 2;
        if (match == 15 && lz4_length(src, n, &i, &match))
            return -1;
        match += 4;
        if (!off || off > o || match > cap - o)
            return -1;
        for (size_t k = 0; k < match; k++, o++)     /* may overlap: byte by byte */
            dst[o] = dst[o - off];
    }
    return o == cap ? 0 : -1;
}

/* The payload of a compressed entry, NUL-terminated (PTX is text), in a
 * buffer of its own. */
static CUresult inflate(const unsigned char *e, const unsigned char *payload, uint64_t psize,
                        uint64_t flags, unsigned char **out, size_t *len)
{
    uint32_t csize;
    uint64_t usize;
    memcpy(&csize, e + 16, 4);
    memcpy(&usize, e + 56, 8);
    if (!csize || csize > psize || !usize || usize > SIM_IMAGE_MAX)
        return CUDA_ERROR_INVALID_IMAGE;
    unsigned char *buf = malloc(usize + 1);
    if (!buf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    int ok;
    if (flags & FLAG_ZSTD)
        ok = ZSTD_decompress(buf, usize, payload, csize) == usize;
    else
        ok = lz4_block(payload, csize, buf, usize) == 0;
    if (!ok) {
        free(buf);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    buf[usize] = '\0';
    *out = buf;
    *len = usize;
    return CUDA_SUCCESS;
}

/* ---- the choice of an entry ------------------------------------------------------ */

typedef struct pick {
    const unsigned char *e;             /* the entry's header; NULL: none */
    unsigned arch;
} pick_t;

static void consider(pick_t *p, const unsigned char *e, unsigned arch)
{
    if (!p->e || arch > p->arch) {
        p->e = e;
        p->arch = arch;
    }
}

/* ---- sim_fatbin_load -------------------------------------------------------------- */

CUresult sim_fatbin_load(const unsigned char *img, sim_module_t *m)
{
    uint16_t hsize;
    uint64_t size;
    memcpy(&hsize, img + 6, 2);
    memcpy(&size, img + 8, 8);
    if (hsize < 16 || size > SIM_IMAGE_MAX)
        return CUDA_ERROR_INVALID_IMAGE;
    pick_t elf = { 0 }, ptx = { 0 };
    int entries = 0;
    for (uint64_t off = hsize; off + ENTRY_MIN <= hsize + size;) {
        const unsigned char *e = img + off;
        uint16_t kind;
        uint32_t ehsize, arch;
        uint64_t psize;
        memcpy(&kind, e, 2);
        memcpy(&ehsize, e + 4, 4);
        memcpy(&psize, e + 8, 8);
        memcpy(&arch, e + 28, 4);
        if (ehsize < ENTRY_MIN || psize > SIM_IMAGE_MAX || off + ehsize + psize > hsize + size)
            return CUDA_ERROR_INVALID_IMAGE;
        entries++;
        if (kind == KIND_ELF && sim_arch_runs_cubin(arch))
            consider(&elf, e, arch);
        else if (kind == KIND_PTX && arch <= SIM_ARCH)
            consider(&ptx, e, arch);
        off += ehsize + psize;
    }
    const unsigned char *e = elf.e ? elf.e : ptx.e;
    if (!e)
        return entries ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_INVALID_IMAGE;
    uint32_t ehsize;
    uint64_t psize, flags;
    memcpy(&ehsize, e + 4, 4);
    memcpy(&psize, e + 8, 8);
    memcpy(&flags, e + 40, 8);
    const unsigned char *payload = e + ehsize;
    unsigned char *own = NULL;
    size_t len = psize;
    if (flags & (FLAG_LZ4 | FLAG_ZSTD)) {
        CUresult rc = inflate(e, payload, psize, flags, &own, &len);
        if (rc != CUDA_SUCCESS)
            return rc;
        payload = own;
    }
    CUresult rc;
    if (e == elf.e)
        rc = sim_cubin_load(payload, len, m);
    else if (memchr(payload, '\0', own ? len + 1 : len))
        rc = sim_ptx_load((const char *)payload, m);
    else
        rc = CUDA_ERROR_INVALID_IMAGE;
    free(own);
    return rc;
}
