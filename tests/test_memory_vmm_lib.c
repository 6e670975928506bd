/*
 * test_memory_vmm_lib.c - the helpers of test_memory_vmm_lib.h: a child's
 * set-up over simgpu with paging on, the device's and the table's figures,
 * and the pattern's fill and check.  No state of its own.
 */
#include "test_memory_vmm_lib.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "lib/testutil.h"

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

void (*patch_drv)(drv_t *d);

int run_teller(const char *tag, char *state, char *table, size_t cap, int (*fn)(void *),
               void *arg)
{
    char name[64];
    int told = -1;
    snprintf(name, sizeof name, "%s-sim", tag);
    tu_unique_name(name, state, cap);
    snprintf(name, sizeof name, "%s-tab", tag);
    tu_unique_name(name, table, cap);
    pid_t pid = tu_fork_teller(fn, arg, &told);
    if (pid <= 0)
        return -1;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return told;
}

int setup_named(const char *mem, const char *state_name, const char *table_name)
{
    char state[96], table[96];
    drv_t d;
    CUcontext ctx;
    setenv("SIMGPU_STATE", state_name ? state_name
                                      : tu_unique_name("vmm-sim", state, sizeof state), 1);
    setenv("SALUS_TABLE", table_name ? table_name
                                     : tu_unique_name("vmm-tab", table, sizeof table), 1);
    setenv("SIMGPU_MEMORY", mem, 1);
    setenv("SALUS_SWAP", "on", 1);
    unsetenv("SALUS_MEM_LIMIT");
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    TRUE(drv_resolve(sym, &d) == 0);
    if (patch_drv)
        patch_drv(&d);
    TRUE(mem_init(&d, NULL) == 0);
    TRUE(vmem_on());
    return 0;
}

uint64_t dev_free(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return f;
}

uint64_t table_used(void)
{
    mem_slot_view_t v;
    shm_table_t *t = shm_process_table();
    if (!t || mem_view_slot(t, shm_self(t), &v) != 0)
        return UINT64_MAX;
    return v.used;
}

int fill(CUdeviceptr p, uint64_t n, uint64_t seed, uint64_t *buf, size_t cap)
{
    for (uint64_t off = 0; off < n; off += cap) {
        uint64_t len = n - off < cap ? n - off : cap;
        for (uint64_t i = 0; i < len / 8; i++)
            buf[i] = pat(p + off + i * 8, seed);
        CK(cuMemcpyHtoD(p + off, buf, len));
    }
    return 0;
}

int check(CUdeviceptr p, uint64_t n, uint64_t seed, uint64_t *buf, size_t cap)
{
    for (uint64_t off = 0; off < n; off += cap) {
        uint64_t len = n - off < cap ? n - off : cap;
        CK(cuMemcpyDtoH(buf, p + off, len));
        for (uint64_t i = 0; i < len / 8; i++)
            if (buf[i] != pat(p + off + i * 8, seed)) {
                fprintf(stderr, "byte %#llx of %#llx changed\n",
                        (unsigned long long)(off + i * 8), (unsigned long long)p);
                return 1;
            }
    }
    return 0;
}
