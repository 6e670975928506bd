/*
 * test_memory_lib.c - the memory tests' fake driver, allocation helpers and
 * accounting readers (see test_memory_lib.h).
 *
 * Divided into: the test's table name; the fake driver; allocating through
 * the module; reading the table back; children and pipes.  The readers include the module's private
 * layout, as test_ipc reads the table's: a test checks the bytes.
 */
#include "test_memory_lib.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "lib/testutil.h"
#include "memory/mem_layout.h"

fake_drv_t fk = { .device = 0, .capacity = 1024 * MB, .base = 1ull << 32 };
static uint64_t next_addr;

/* ---- the test's table name ----------------------------------------------- */

char fk_table[64];

int fk_setup(void **state)
{
    (void)state;
    tu_unique_name("salus-mem", fk_table, sizeof fk_table);
    shm_unlink(fk_table);
    return 0;
}

int fk_teardown(void **state)
{
    (void)state;
    shm_unlink(fk_table);
    return 0;
}

/* ---- the fake driver ----------------------------------------------------- */

static CUresult fk_ctx_get_device(CUdevice *dev)
{
    if (fk.device < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = fk.device;
    return CUDA_SUCCESS;
}

static CUresult fk_total_mem(size_t *bytes, CUdevice dev)
{
    (void)dev;
    *bytes = (size_t)fk.capacity;
    return CUDA_SUCCESS;
}

/* The fake GPUs of a test's table (its name is in their UUIDs): test
 * binaries running at once have GPUs of their own, so that their tables
 * never claim one GPU (ipc's claim files). */
static CUresult fk_uuid(CUuuid *uuid, CUdevice dev)
{
    uint32_t tag = 2166136261u;
    for (const char *c = fk_table; *c; c++)
        tag = (tag ^ (unsigned char)*c) * 16777619u;
    memset(uuid, 0, sizeof *uuid);
    memcpy(uuid->bytes, "fakegpu", 7);
    uuid->bytes[8] = (char)dev;
    memcpy(uuid->bytes + 12, &tag, 4);
    return CUDA_SUCCESS;
}

static CUresult fk_range(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    if (!fk.pitch_size)
        return CUDA_ERROR_NOT_FOUND;
    *base = ptr;
    *size = (size_t)fk.pitch_size;
    return CUDA_SUCCESS;
}

static CUresult fk_pointer_attr(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    if (attr != CU_POINTER_ATTRIBUTE_CONTEXT)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (ptr < fk.gone_below)
        return CUDA_ERROR_INVALID_VALUE;
    *(CUcontext *)data = (CUcontext)0x1;
    return CUDA_SUCCESS;
}

static CUresult fk_array_desc(CUDA_ARRAY_DESCRIPTOR *d, CUarray a)
{
    (void)d;
    return (uint64_t)(uintptr_t)a < fk.gone_below ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

static int undone;
static CUresult fk_undo_ptr(CUdeviceptr p) { (void)p; undone++; return CUDA_SUCCESS; }
static CUresult fk_undo_vmm(CUmemGenericAllocationHandle h) { (void)h; undone++; return CUDA_SUCCESS; }
static CUresult fk_undo_array(CUarray a) { (void)a; undone++; return CUDA_SUCCESS; }

static CUresult fk_device_pool(CUmemoryPool *pool, CUdevice dev)
{
    (void)dev;
    *pool = FK_POOL;
    return CUDA_SUCCESS;
}

static CUresult fk_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    if (pool != FK_POOL || attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    __atomic_add_fetch(&fk.pool_reads, 1, __ATOMIC_RELAXED);
    *(cuuint64_t *)value = fk.pool_reserved;
    return CUDA_SUCCESS;
}

int fk_undone(void)
{
    return undone;
}

void fk_reset(void)
{
    static const char *const vars[] = { "SALUS_MEM_LIMIT", "SALUS_MEM_RESERVE",
                                        "SALUS_MEM_HEADROOM", "SALUS_MEM_WAIT_MS", NULL };
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    /* A refusal at once unless a test waits: the default wait (10 s) would
     * only slow the tests that count refusals. */
    setenv("SALUS_MEM_WAIT_MS", "0", 1);
    fake_drv_t d = { .device = 0, .capacity = 1024 * MB, .base = 1ull << 32 };
    fk = d;
}

drv_t fk_driver(void)
{
    drv_t d = {
        .ctx_get_device = fk_ctx_get_device,
        .device_total_mem = fk_total_mem,
        .device_get_uuid = fk.no_uuid ? NULL : fk_uuid,
        .mem_get_address_range = fk_range,
        .mem_free = fk_undo_ptr,
        .mem_release = fk_undo_vmm,
        .array_destroy = fk_undo_array,
        .pointer_get_attribute = fk_pointer_attr,
        .array_get_descriptor = fk_array_desc,
        .device_get_mem_pool = fk_device_pool,
        .mem_pool_get_attribute = fk_pool_attr,
    };
    return d;
}

shm_table_t *fk_start(const char *table)
{
    shm_open_opts_t o = { .name = table, .create = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&o, &t) != 0)
        return NULL;
    drv_t d = fk_driver();
    if (mem_init(&d, t) != 0)
        return NULL;
    return t;
}

/* ---- allocating through the module ---------------------------------------- */

CUresult fk_alloc(mem_kind_t kind, uint64_t bytes, uint64_t *handle)
{
    mem_op_t op;
    CUresult rc = mem_alloc_begin(kind, -1, bytes, &op);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t h = 0;
    CUresult drc = CUDA_SUCCESS;
    if (__atomic_load_n(&fk.fail_allocs, __ATOMIC_RELAXED) > 0) {
        __atomic_sub_fetch(&fk.fail_allocs, 1, __ATOMIC_RELAXED);
        drc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (fk.force_addr) {
        h = fk.force_addr;
        fk.force_addr = 0;
    } else {
        h = fk.base + __atomic_fetch_add(&next_addr, 1ull << 12, __ATOMIC_RELAXED);
    }
    rc = mem_alloc_end(&op, drc, h);
    if (rc == CUDA_SUCCESS)
        *handle = h;
    return rc;
}

CUresult fk_alloc_async(CUmemoryPool pool, uint64_t bytes, uint64_t *ptr)
{
    mem_op_t op;
    CUresult rc = mem_pool_alloc_begin(pool ? MEM_KIND_POOL : MEM_KIND_ASYNC, pool,
                                       MEM_DEV_CURRENT, bytes, &op);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t p = 0;
    CUresult drc = CUDA_SUCCESS;
    if (__atomic_load_n(&fk.fail_allocs, __ATOMIC_RELAXED) > 0) {
        __atomic_sub_fetch(&fk.fail_allocs, 1, __ATOMIC_RELAXED);
        drc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        p = fk.base + __atomic_fetch_add(&next_addr, 1ull << 12, __ATOMIC_RELAXED);
    }
    rc = mem_pool_alloc_end(&op, drc, p);
    if (rc == CUDA_SUCCESS)
        *ptr = p;
    return rc;
}

CUresult fk_free(mem_kind_t kind, uint64_t handle)
{
    mem_op_t op;
    mem_free_begin(kind, handle, &op);
    mem_free_end(&op, CUDA_SUCCESS);
    return CUDA_SUCCESS;
}

/* ---- reading the table back ------------------------------------------------ */

void fk_acct(shm_table_t *t, int slot, int d, fk_acct_t *out)
{
    mem_slot_t *a = shm_slot_area(t, slot, SHM_AREA_MEM);
    memset(out, 0, sizeof *out);
    if (!a || shm_lock(t) != 0)
        return;
    mem_sdev_t *sd = &a->dev[d];
    out->granted = sd->granted;
    out->spare = MEM_SPARE(sd->avail);
    out->used = out->granted - out->spare;
    out->reserved = sd->reserved;
    out->limit = sd->limit;
    out->peak = sd->peak;
    shm_unlock(t);
}

void fk_devsum(shm_table_t *t, int d, fk_devsum_t *out)
{
    mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
    memset(out, 0, sizeof *out);
    if (shm_lock(t) != 0)
        return;
    mem_sums_t s;
    mem_sums(t, d, -1, &s);
    out->used = s.used;
    out->committed = s.committed;
    out->budget = dev->budget;
    out->capacity = dev->capacity;
    shm_unlock(t);
}

void fk_check_invariants(shm_table_t *t)
{
    CHECK(shm_lock(t) == 0);
    const char *bad = mem_check_locked(t);
    shm_unlock(t);
    if (bad) {
        fprintf(stderr, "child %d: invariant broken: %s\n", (int)getpid(), bad);
        _exit(1);
    }
}

/* ---- children and pipes ------------------------------------------------------ */

pid_t fk_fork(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

int fk_wait(pid_t pid, int ms)
{
    tu_proc_t p = { .pid = pid };
    return tu_wait(&p, ms);
}

void fk_send(int fd, char c)
{
    while (write(fd, &c, 1) != 1 && errno == EINTR)
        ;
}

char fk_recv(int fd)
{
    char c = 0;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    return n == 1 ? c : 0;
}

const char *fk_capture_stderr(char *path, size_t len)
{
    static int n;
    snprintf(path, len, "%s/stderr-%d-%d", tu_tmpdir(), (int)getpid(), ++n);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    return path;
}

uint64_t fk_now_ms(void)
{
    return tu_now_ns() / 1000000;
}
