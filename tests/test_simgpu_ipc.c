/*
 * test_simgpu_ipc.c - legacy CUDA IPC of cuMemAlloc memory between
 * processes over simgpu (sim/ipc.c).
 *
 * The parent (a simgpu process) allocates, writes from the host and
 * exports; a child (this binary again, `--child open <handles>`) opens the
 * handles, reads the parent's bytes, writes its own; the parent reads them
 * back in the same allocation.  Then the parent zeroes part of the shared
 * memory with a copy from never-written memory (sparse.c punches a hole
 * in the shared memfd: the child must read zeros, which a private
 * MADV_DONTNEED would not give it) and frees an exported allocation the
 * child still maps (the child's bytes stay; a new open of the freed
 * allocation's handle is refused, even with its fd number reused by a new
 * export).  Also: a handle of an address inside an allocation is the
 * allocation's; the exporter's own open, a corrupt handle, a small
 * allocation, opening twice and closing each open.  Never-written memory
 * stays unwritten when exported (the memfd's blocks).  Events: the child
 * opens the parent's interprocess event, recorded behind 1.5 s of work,
 * and its query and synchronize see that record.
 *
 * The child reports "key value" lines; the parent waits for each with a
 * deadline, and the child waits for the parent's file with one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_simgpu_mp_lib.h"

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))

#define A_BYTES (8 * MiB)
#define B_BYTES (64 * MiB)
#define B_AT    MiB                     /* where B's one written page is */
#define WORDS   (A_BYTES / 8)

static uint64_t pat(uint64_t i, unsigned seed)
{
    return (i * 0x9e3779b97f4a7c15ull) ^ seed;
}

static uint64_t *buf;

static void hex(const CUipcMemHandle *h, char *out)
{
    for (size_t i = 0; i < sizeof *h; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static int unhex(const char *s, CUipcMemHandle *h)
{
    if (strlen(s) != 2 * sizeof *h)
        return -1;
    for (size_t i = 0; i < sizeof *h; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        h->reserved[i] = (char)v;
    }
    return 0;
}

/* 1 when A (dev, WORDS words) holds pat(.., seed). */
static int holds(CUdeviceptr d, unsigned seed)
{
    if (cuMemcpyDtoH(buf, d, A_BYTES))
        return 0;
    for (uint64_t i = 0; i < WORDS; i++)
        if (buf[i] != pat(i, seed))
            return 0;
    return 1;
}

static int fill(CUdeviceptr d, unsigned seed)
{
    for (uint64_t i = 0; i < WORDS; i++)
        buf[i] = pat(i, seed);
    return cuMemcpyHtoD(d, buf, A_BYTES) == CUDA_SUCCESS;
}

/* ---- the child --------------------------------------------------------------------- */

static int file_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* B's page at B_AT holds 0x5a bytes (or zeros), its neighbour zeros. */
static int page_is(CUdeviceptr b, int byte)
{
    unsigned char p[8192];
    if (cuMemcpyDtoH(p, b + B_AT - 4096, sizeof p))
        return 0;
    for (size_t i = 0; i < sizeof p; i++)
        if (p[i] != (i < 4096 ? 0 : byte))
            return 0;
    return 1;
}

/* The event's half: open it, query it (and when), wait for it (and when). */
static void child_event(const char *hex_ev)
{
    CUipcEventHandle he;
    CUevent ev;
    CUipcMemHandle tmp;
    if (unhex(hex_ev, &tmp)) {
        mp_say("ev_open", -1);
        return;
    }
    memcpy(&he, &tmp, sizeof he);
    CUresult rc = cuIpcOpenEventHandle(&ev, he);
    mp_say("ev_open", rc);
    if (rc)
        return;
    CUresult q = cuEventQuery(ev);
    long long tq = (long long)tu_now_ns();
    mp_say("ev_query", q);
    mp_say("ev_query_ns", tq);
    mp_say("ev_sync", cuEventSynchronize(ev));
    mp_say("ev_done_ns", (long long)tu_now_ns());
    mp_say("ev_destroy", cuEventDestroy(ev));
}

/* open <handle A> <handle B>:<event handle> <go file> */
static int child_open(char **argv)
{
    CUipcMemHandle ha, hb;
    CUcontext c;
    CUdeviceptr a, b, a2;
    char *colon = strchr(argv[1], ':');
    if (!colon)
        return 1;
    *colon = '\0';
    if (unhex(argv[0], &ha) || unhex(argv[1], &hb) || cuInit(0) ||
        cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 1;
    child_event(colon + 1);
    mp_say("open_a", cuIpcOpenMemHandle(&a, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    mp_say("open_b", cuIpcOpenMemHandle(&b, hb, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    mp_say("read_parent", holds(a, 1));
    mp_say("page_b", page_is(b, 0x5a));
    mp_say("again_same", cuIpcOpenMemHandle(&a2, ha, 0) == CUDA_SUCCESS && a2 == a);
    mp_say("free_refused", cuMemFree(a));
    mp_say("close_one", cuIpcCloseMemHandle(a));
    mp_say("wrote", fill(a, 2));
    if (!tu_await(file_exists, argv[2], 15000))
        return 1;
    mp_say("zeroed_b", page_is(b, 0));
    mp_say("kept_after_free", holds(a, 2));
    mp_say("close_two", cuIpcCloseMemHandle(a));
    mp_say("close_three", cuIpcCloseMemHandle(a));
    mp_say("stale", cuIpcOpenMemHandle(&a2, ha, 0));
    mp_say("close_b", cuIpcCloseMemHandle(b));
    return 0;
}

/* ---- the parent ------------------------------------------------------------------- */

/* Bytes the host holds for this process's (only) IPC memfd of size bytes. */
static long long memfd_bytes(uint64_t size)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long long got = -1;
    while (d && (e = readdir(d))) {
        char path[300], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof link - 1);
        struct stat st;
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (strstr(link, "memfd:simgpu-ipc-") && !stat(path, &st) &&
            (uint64_t)st.st_size == size)
            got = (long long)st.st_blocks * 512;
    }
    if (d)
        closedir(d);
    return got;
}

static void test_ipc_between_processes(void **state)
{
    (void)state;
    CUdeviceptr a, b, c, d, small;
    CUipcMemHandle ha, ha_in, hb, hs, hd;
    CK(cuMemAlloc(&a, A_BYTES));
    CK(cuMemAlloc(&b, B_BYTES));
    CK(cuMemAlloc(&c, 4 * MiB));                    /* never written */
    CK(cuMemAlloc(&small, 64 << 10));
    assert_true(fill(a, 1));
    CK(cuMemsetD8(b + B_AT, 0x5a, 4096));
    CK(cuIpcGetMemHandle(&ha, a));
    CK(cuIpcGetMemHandle(&ha_in, a + 12345));
    assert_memory_equal(&ha, &ha_in, sizeof ha);    /* the allocation's handle */
    CK(cuIpcGetMemHandle(&hb, b));
    assert_true(holds(a, 1));                       /* the move kept the bytes */
    /* 64 MiB exported, one page written: the memfd holds that page only. */
    long long held = memfd_bytes(B_BYTES);
    assert_true(held >= 4096 && held < (long long)MiB);
    CKE(cuIpcGetMemHandle(&hs, small), CUDA_ERROR_NOT_SUPPORTED);
    CKE(cuIpcGetMemHandle(&hs, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr x;
    CKE(cuIpcOpenMemHandle(&x, ha, 0), CUDA_ERROR_INVALID_CONTEXT);  /* its own */
    CUipcMemHandle bad = ha;
    bad.reserved[20] ^= 1;
    CKE(cuIpcOpenMemHandle(&x, bad, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuIpcOpenMemHandle(&x, ha, 4), CUDA_ERROR_INVALID_VALUE);    /* unknown flag */

    /* An interprocess event recorded after 1.5 s of work on the stream. */
    CUevent ev, plain_ev;
    CUipcEventHandle he;
    CK(cuEventCreate(&plain_ev, CU_EVENT_DISABLE_TIMING));
    CKE(cuIpcGetEventHandle(&he, plain_ev), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS));
    unsigned long long spin = 1500 * MS;
    void *args[] = { &spin };
    uint64_t t_end = tu_now_ns() + spin;        /* the work ends no sooner */
    CK(cuLaunchKernel(simt_spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuEventRecord(ev, NULL));
    CK(cuIpcGetEventHandle(&he, ev));
    CUevent self_ev;
    CKE(cuIpcOpenEventHandle(&self_ev, he), CUDA_ERROR_INVALID_CONTEXT);

    char sa[160], sb[330], go[512];
    CUipcMemHandle he_as_mem;
    memcpy(&he_as_mem, &he, sizeof he);
    hex(&ha, sa);
    hex(&hb, sb);
    sb[128] = ':';
    hex(&he_as_mem, sb + 129);
    snprintf(go, sizeof go, "%s/ipc-go-%d", tu_tmpdir(), (int)getpid());
    unlink(go);
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    mp_spawn(&p, &env, "open", sa, sb, go);
    CKE(mp_reported(&p, "ev_open", 10000), CUDA_SUCCESS);
    CUresult q = (CUresult)mp_reported(&p, "ev_query", 10000);
    if ((uint64_t)mp_reported(&p, "ev_query_ns", 10000) < t_end)
        CKE(q, CUDA_ERROR_NOT_READY);           /* the parent's record, seen there */
    CKE(mp_reported(&p, "ev_sync", 10000), CUDA_SUCCESS);
    assert_true((uint64_t)mp_reported(&p, "ev_done_ns", 10000) >= t_end);
    CKE(mp_reported(&p, "ev_destroy", 10000), CUDA_SUCCESS);
    CKE(mp_reported(&p, "open_a", 10000), CUDA_SUCCESS);
    CKE(mp_reported(&p, "open_b", 10000), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "read_parent", 10000), 1);
    assert_int_equal(mp_reported(&p, "page_b", 10000), 1);
    assert_int_equal(mp_reported(&p, "again_same", 10000), 1);
    CKE(mp_reported(&p, "free_refused", 10000), CUDA_ERROR_INVALID_VALUE);
    CKE(mp_reported(&p, "close_one", 10000), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "wrote", 10000), 1);
    assert_true(holds(a, 2));                       /* the child's bytes, here */

    /* Zero B's page from never-written memory, free A while the child maps
     * it, and export a new allocation (likely taking A's fd number). */
    CK(cuMemcpyDtoD(b, c, 2 * MiB));
    CK(cuMemFree(a));
    CK(cuMemAlloc(&d, 2 * MiB));
    CK(cuIpcGetMemHandle(&hd, d));
    FILE *f = fopen(go, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(mp_reported(&p, "zeroed_b", 10000), 1);
    assert_int_equal(mp_reported(&p, "kept_after_free", 10000), 1);
    CKE(mp_reported(&p, "close_two", 10000), CUDA_SUCCESS);
    CKE(mp_reported(&p, "close_three", 10000), CUDA_ERROR_INVALID_VALUE);
    CKE(mp_reported(&p, "stale", 10000), CUDA_ERROR_INVALID_HANDLE);
    CKE(mp_reported(&p, "close_b", 10000), CUDA_SUCCESS);
    assert_int_equal(tu_wait(&p, 10000), 0);
    unlink(go);
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    CK(cuMemFree(d));
    CK(cuMemFree(small));
    CK(cuEventDestroy(ev));
    CK(cuEventDestroy(plain_ev));
    tu_env_free(&env);
}

int main(int argc, char **argv)
{
    buf = malloc(A_BYTES);
    if (!buf)
        return 1;
    if (argc >= 6 && !strcmp(argv[1], "--child") && !strcmp(argv[2], "open"))
        return child_open(argv + 3);
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return 100;
    if (mp_init("test_simgpu_ipc", "simgpu-ipc"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_between_processes),
    };
    return cmocka_run_group_tests_name("simgpu legacy IPC", tests, NULL, NULL);
}
