/*
 * vmm_handles.c - the program's own VMM handles (not paging's: src/vmem):
 * memory that outlives its handle: the physical memory of
 * a cuMemCreate handle lives until the handle is released AND its last
 * mapping is gone (the usual pattern is create, map, release: the memory
 * stays until cuMemUnmap).  The handle's charge, taken at cuMemCreate, is
 * therefore given back at whichever of the two comes last.
 *
 * Divided into: the records; mappings; release; fork.
 *
 * A record stands for one physical allocation that has mappings: its handle
 * while the program holds it, its count of mappings, and, once the handle
 * is released, the charge it keeps (bytes, table device).  A mapping is a
 * key (a device address from cuMemMap, or a sparse array's place from
 * cuMemMapArrayAsync) and its record.  A released handle's value may be
 * given to a new allocation by the driver: the released record is no longer
 * found by handle, only through its mappings.  A handle this process did
 * not create (imported, or made before accounting started) has a record for
 * its mappings and no charge.  A handle retained with
 * cuMemRetainAllocationHandle and released twice is not followed: its first
 * release is the one that counts.
 *
 * Locking: vmm_lock (a process mutex, a leaf: nothing else is taken while
 * it is held; charges are given back after it is dropped) guards both
 * arrays.  Mappings are few (a framework maps segments of megabytes) and
 * every call here follows a driver call that costs microseconds: the arrays
 * are searched linearly.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

typedef struct vmm_rec {
    uint64_t handle;       /* while not released */
    uint64_t bytes;        /* the charge it keeps once released; 0: none */
    int16_t  dev;          /* table device of that charge */
    uint8_t  released;
    uint32_t maps;
} vmm_rec_t;

typedef struct vmm_map {
    uint64_t key;
    vmm_rec_t *rec;
} vmm_map_t;

static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static vmm_map_t *maps;
static size_t n_maps, cap_maps;

static void say_no_memory(void)
{
    static int said;
    util_log_once(&said, UTIL_LOG_ERROR, "memory: out of host memory to follow a VMM "
                  "mapping; a handle released while mapped is uncharged at its release");
}

/* ---- the records (under vmm_lock) ----------------------------------------- */

static vmm_rec_t *live_rec(uint64_t handle)
{
    for (size_t i = 0; i < n_maps; i++)
        if (!maps[i].rec->released && maps[i].rec->handle == handle)
            return maps[i].rec;
    return NULL;
}

/* ---- mappings ----------------------------------------------------------------- */

void mem_vmm_mapped(uint64_t key, uint64_t handle)
{
    if (util_load_acquire(&mem_p.mode) != MEM_ON || handle == 0)
        return;
    pthread_mutex_lock(&vmm_lock);
    vmm_rec_t *rec = live_rec(handle);
    if (n_maps == cap_maps) {
        size_t ncap = cap_maps ? cap_maps * 2 : 64;
        vmm_map_t *nv = realloc(maps, ncap * sizeof *nv);
        if (!nv)
            goto out_nomem;
        maps = nv;
        cap_maps = ncap;
    }
    if (!rec && !(rec = calloc(1, sizeof *rec)))
        goto out_nomem;
    rec->handle = handle;
    rec->maps++;
    maps[n_maps++] = (vmm_map_t){ .key = key, .rec = rec };
    pthread_mutex_unlock(&vmm_lock);
    return;
out_nomem:
    pthread_mutex_unlock(&vmm_lock);
    say_no_memory();
}

/* Give back the charges of records whose last mapping went. */
static void give_back(const vmm_rec_t *gone, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mem_local_dev_t *ld = gone[i].dev >= 0 && gone[i].dev < SHM_MAX_DEVICES
                                  ? mem_p.by_index[gone[i].dev] : NULL;
        if (ld && gone[i].bytes)
            mem_give(ld, gone[i].bytes);
    }
}

void mem_vmm_unmapped(uint64_t key, uint64_t span)
{
    vmm_rec_t gone[16];
    size_t n_gone = 0;
    if (util_load_acquire(&mem_p.mode) != MEM_ON || span == 0)
        return;
    pthread_mutex_lock(&vmm_lock);
    for (size_t i = 0; i < n_maps;) {
        if (maps[i].key - key >= span) {          /* outside [key, key + span) */
            i++;
            continue;
        }
        vmm_rec_t *rec = maps[i].rec;
        maps[i] = maps[--n_maps];
        if (--rec->maps != 0)
            continue;
        if (rec->released && rec->bytes) {
            if (n_gone == sizeof gone / sizeof *gone) {
                pthread_mutex_unlock(&vmm_lock);
                give_back(gone, n_gone);
                n_gone = 0;
                pthread_mutex_lock(&vmm_lock);
            }
            gone[n_gone++] = *rec;
        }
        free(rec);
    }
    pthread_mutex_unlock(&vmm_lock);
    give_back(gone, n_gone);
}

/* ---- release ---------------------------------------------------------------- */

int mem_vmm_keep(uint64_t handle, uint64_t bytes, int dev)
{
    pthread_mutex_lock(&vmm_lock);
    vmm_rec_t *rec = live_rec(handle);
    if (rec) {
        rec->released = 1;
        rec->handle = 0;
        rec->bytes = bytes;
        rec->dev = (int16_t)dev;
    }
    pthread_mutex_unlock(&vmm_lock);
    return rec != NULL;
}

uint64_t mem_vmm_kept(int dev, uint64_t *count)
{
    uint64_t bytes = 0, n = 0;
    pthread_mutex_lock(&vmm_lock);
    for (size_t i = 0; i < n_maps; i++) {
        const vmm_rec_t *r = maps[i].rec;
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            first = maps[j].rec != r;
        if (first && r->released && (dev < 0 || r->dev == dev)) {
            bytes += r->bytes;
            n++;
        }
    }
    pthread_mutex_unlock(&vmm_lock);
    if (count)
        *count = n;
    return bytes;
}

/* ---- fork --------------------------------------------------------------------
 * The child follows nothing of its parent's (its accounting starts anew):
 * the arrays are forgotten, not freed (another thread may have been
 * changing them). */
void mem_vmm_prefork(void)
{
    pthread_mutex_lock(&vmm_lock);
}

void mem_vmm_postfork(int child)
{
    if (child) {
        pthread_mutex_init(&vmm_lock, NULL);
        maps = NULL;
        n_maps = cap_maps = 0;
        return;
    }
    pthread_mutex_unlock(&vmm_lock);
}
