/*
 * test_simgpu_rt.c - simgpu serving the CUDA runtime.
 *
 * First the private tables of cuGetExportTable, one at a time, called as
 * the runtime calls them (driver API, this process): the CUDART interface
 * (an active primary context, modules from fatbin wrappers), the tools
 * tables, context-local storage and its destructors (destroy, reset, last
 * release, exit, not in a fork child), context checks and identity, the
 * integrity check (MD2 against RFC 1319's examples), cuBLASLt's table, and
 * refusals said once.  Then what the runtime needs beside them (loading
 * mode, a library without code for the device, a library's variables per
 * context, cluster occupancy, the CIG limits).  Then the toolkit's own
 * runtime and libraries over simgpu: the programs of tests/clients built by
 * nvcc (rt_client linked -cudart shared, -cudart static and PTX only;
 * rt_libs with cuBLAS, cuBLASLt and cuDNN), each a child with its own state
 * and trace, judged by its exit status, its JSON line and the kernels the
 * trace shows for it.  Their checks read data moved by copies through the
 * host; simgpu's kernels compute nothing, so no result of a kernel is
 * checked anywhere here.
 *
 * Children are this binary again (`--child <role>`, test_simgpu_mp_lib.c)
 * or the clients; skipped, saying why, when a client is not built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_simgpu_mp_lib.h"

#define CK(x)      assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e)  assert_int_equal((x), (e))
#define CLIENT_MS  60000

/* md2.c, linked into this binary. */
void sim_md2(const void *data, size_t len, uint8_t out[16]);
void sim_hmac_md2(const uint8_t key[16], const void *msg, size_t len, uint8_t out[16]);

/* ---- the tables' UUIDs and slots -------------------------------------------------------- */

static const uint8_t U_SKIP[16] = { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                    0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 };
static const uint8_t U_CUDART[16] = { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
                                      0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 };
static const uint8_t U_HOOKS[16] = { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74,
                                     0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 };
static const uint8_t U_TLS[16] = { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
                                   0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc };
static const uint8_t U_CLS[16] = { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
                                   0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 };
static const uint8_t U_CHECKS[16] = { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
                                      0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e };
static const uint8_t U_INTEGRITY[16] = { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
                                         0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 };
static const uint8_t U_IDENTITY[16] = { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
                                        0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 };
static const uint8_t U_LT[16] = { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
                                  0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca };

typedef void (*fn_t)(void);

/* The table for uuid, which must be served. */
static void *const *table_of(const uint8_t uuid[16])
{
    CUuuid id;
    const void *t = NULL;
    memcpy(id.bytes, uuid, 16);
    CK(cuGetExportTable(&t, &id));
    assert_non_null(t);
    return (void *const *)t;
}

#define SLOT(t, i, type) ((type)(t)[i])

typedef CUresult (*primary_fn)(CUcontext *, CUdevice);
typedef CUresult (*module_fn)(CUmodule *, const void *);
typedef CUresult (*module_ext_fn)(CUmodule *, const void *, void *, void *, unsigned);
typedef CUresult (*fatbin_fn)(const void *, CUmodule *, void *, void *, unsigned);
typedef void (*word_fn)(uintptr_t);
typedef CUresult (*void_fn)(void);
typedef void (*buffer_fn)(void **, size_t *);
typedef void (*event_fn)(unsigned, void *);
typedef CUresult (*ctx_out_fn)(CUcontext *);
typedef void (*dtor_fn)(CUcontext, void *, void *);
typedef CUresult (*put_fn)(CUcontext, void *, void *, dtor_fn);
typedef CUresult (*del_fn)(CUcontext, void *);
typedef CUresult (*get_fn)(void **, CUcontext, void *);
typedef CUresult (*check_fn)(CUcontext, uint32_t *, const void **);
typedef uint32_t (*zero_fn)(void);
typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t *);
typedef CUresult (*ctx_id_fn)(CUcontext, unsigned long long *);
typedef CUresult (*stream_fn)(CUcontext, CUstream, CUstream *, int);
typedef CUresult (*stream_id_fn)(CUcontext, CUstream, unsigned long long *);
typedef CUresult (*two_ptr_fn)(void **, void **);

/* An image of tests/simgpu_images.cu (test_simgpu_image's), malloc'd. */
static void *image(const char *file)
{
    char rel[128], path[512];
    snprintf(rel, sizeof rel, "tests/simimg/%s", file);
    void *img = tu_read_file(tu_build_path(rel, path, sizeof path), NULL);
    assert_non_null(img);
    return img;
}

/* Run fn(arg) in a thread of its own, which has no current context. */
static void in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* The primary context of device 0, retained again and current (tests that
 * reset or release it call this after). */
static CUcontext primary_again(void)
{
    CUcontext c;
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    CK(cuCtxSetCurrent(c));
    return c;
}

/* cuCtxCreate_v2, whatever cuda.h maps cuCtxCreate to. */
static CUresult ctx_create(CUcontext *c)
{
    CUresult (*fn)(CUcontext *, unsigned, CUdevice) = NULL;
    if (cuGetProcAddress_v2("cuCtxCreate", (void **)&fn, 3020, 0, NULL) || !fn)
        return CUDA_ERROR_UNKNOWN;
    return fn(c, 0, 0);
}

static int primary_active(void)
{
    unsigned flags;
    int active = -1;
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    return active;
}

/* ---- MD2, and which tables are served ------------------------------------------------------ */

static void hex16(const uint8_t d[16], char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* RFC 1319's test suite (appendix A.5), and HMAC as RFC 2104 composes it. */
static void test_md2(void **state)
{
    (void)state;
    static const char *const rfc[][2] = {
        { "", "8350e5a3e24c153df2275c9f80692773" },
        { "a", "32ec01ec4a6dac72c0ab96fb34c0b5d1" },
        { "abc", "da853b0d3f88d99b30283a69e6ded6bb" },
        { "message digest", "ab4f496bfb2a530b219ff33031fe06b0" },
        { "abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b" },
        { "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
          "da33def2a42df13975352846c30338cd" },
        { "1234567890123456789012345678901234567890123456789012345678901234567890"
          "1234567890", "d5976f79d83d3a0dc9806c3c66f3efd8" },
    };
    uint8_t d[16];
    char h[33];
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        sim_md2(rfc[i][0], strlen(rfc[i][0]), d);
        hex16(d, h);
        assert_string_equal(h, rfc[i][1]);
    }
    uint8_t key[16], msg[40], buf[56], inner[16], outer[16], mac[16];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)(i * 17 + 3);
    for (int i = 0; i < 40; i++)
        msg[i] = (uint8_t)(i * 5);
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x36;
    memcpy(buf + 16, msg, 40);
    sim_md2(buf, 56, inner);
    for (int i = 0; i < 16; i++)
        buf[i] = key[i] ^ 0x5c;
    memcpy(buf + 16, inner, 16);
    sim_md2(buf, 32, outer);
    sim_hmac_md2(key, msg, 40, mac);
    assert_memory_equal(mac, outer, 16);
}

/* Every table the runtime asks for is served, with its size word; the
 * skip-init probe and unknown UUIDs are CUDA_ERROR_NOT_FOUND, the pointer
 * left alone. */
static void test_tables_served(void **state)
{
    (void)state;
    const struct { const uint8_t *uuid; size_t words; } sized[] = {
        { U_CUDART, 13 }, { U_HOOKS, 7 }, { U_TLS, 4 }, { U_CHECKS, 4 }, { U_INTEGRITY, 3 },
        { U_IDENTITY, 64 }, { U_LT, 8 },
    };
    for (size_t i = 0; i < sizeof sized / sizeof sized[0]; i++) {
        void *const *t = table_of(sized[i].uuid);
        assert_int_equal((uintptr_t)t[0], sized[i].words * sizeof(void *));
        for (size_t s = 1; s < sized[i].words; s++)
            assert_non_null(t[s]);      /* never a NULL to jump to */
    }
    void *const *cls = table_of(U_CLS);                 /* no size word */
    for (int s = 0; s < 4; s++)
        assert_non_null(cls[s]);
    CUuuid id;
    const void *t = &t;
    memcpy(id.bytes, U_SKIP, 16);
    CKE(cuGetExportTable(&t, &id), CUDA_ERROR_NOT_FOUND);
    assert_ptr_equal(t, &t);
    id.bytes[0] ^= 1;
    CKE(cuGetExportTable(&t, &id), CUDA_ERROR_NOT_FOUND);
    assert_ptr_equal(t, &t);
}

/* ---- the CUDART interface ---------------------------------------------------------------------- */

/* Slot 2 hands out the primary context active, retained once for the
 * process however often it is asked, and again after a reset. */
static void test_cudart_primary(void **state)
{
    (void)state;
    void *const *t = table_of(U_CUDART);
    primary_fn primary = SLOT(t, 2, primary_fn);
    CUcontext c = NULL, c2 = NULL;
    CK(cuDevicePrimaryCtxReset(0));
    assert_int_equal(primary_active(), 0);
    CK(primary(&c, 0));
    assert_int_equal(primary_active(), 1);
    CK(cuCtxSetCurrent(c));             /* what the runtime does next */
    CK(primary(&c2, 0));
    assert_ptr_equal(c, c2);
    /* A program's own retain and release leave the runtime's. */
    CK(cuDevicePrimaryCtxRetain(&c2, 0));
    CK(cuDevicePrimaryCtxRelease(0));
    assert_int_equal(primary_active(), 1);
    /* One release undoes the runtime's retain: it was taken once. */
    CK(cuDevicePrimaryCtxRelease(0));
    assert_int_equal(primary_active(), 0);
    CK(primary(&c2, 0));
    assert_ptr_equal(c, c2);
    assert_int_equal(primary_active(), 1);
    CK(cuDevicePrimaryCtxReset(0));     /* cudaDeviceReset */
    assert_int_equal(primary_active(), 0);
    CK(primary(&c2, 0));
    assert_int_equal(primary_active(), 1);
    CK(cuCtxSetCurrent(c2));
    CKE(primary(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(primary(&c2, 7), CUDA_ERROR_INVALID_DEVICE);
}

/* Slots 1, 6 and 8 make modules from the wrapper nvcc embeds and from the
 * fatbin itself, through simgpu's loader; 7 and 12 do what the runtime
 * expects; the undocumented ones refuse. */
static void test_cudart_modules(void **state)
{
    (void)state;
    void *const *t = table_of(U_CUDART);
    primary_again();
    void *fatbin = image("multi.fatbin"), *other = image("other.fatbin");
    struct { uint32_t magic, version; const void *data; void *name; } wrapper = {
        0x466243b1, 1, fatbin, NULL };
    CUmodule m;
    CUfunction f;
    CK(SLOT(t, 1, module_fn)(&m, &wrapper));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CK(cuModuleUnload(m));
    CK(SLOT(t, 6, module_ext_fn)(&m, &wrapper, NULL, NULL, 0));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CK(cuModuleUnload(m));
    CK(SLOT(t, 8, fatbin_fn)(fatbin, &m, NULL, NULL, 0));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CK(cuModuleUnload(m));
    wrapper.data = other;               /* sm_80 and sm_120 only: a module refuses it */
    CKE(SLOT(t, 1, module_fn)(&m, &wrapper), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CKE(SLOT(t, 1, module_fn)(NULL, &wrapper), CUDA_ERROR_INVALID_VALUE);
    CKE(SLOT(t, 8, fatbin_fn)(NULL, &m, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    SLOT(t, 7, word_fn)(12345);
    CK(SLOT(t, 12, void_fn)());
    CKE(SLOT(t, 3, void_fn)(), CUDA_ERROR_NOT_SUPPORTED);
    free(fatbin);
    free(other);
}

/* ---- the tools tables ----------------------------------------------------------------------- */

static void *tls_in_thread(void *arg)
{
    ctx_out_fn current = (ctx_out_fn)arg;
    CUcontext c = (CUcontext)&c;
    CK(current(&c));
    assert_null(c);                     /* no context is current here */
    return NULL;
}

static void test_tools(void **state)
{
    (void)state;
    void *const *hooks = table_of(U_HOOKS);
    void *buf = NULL;
    size_t size = 0;
    SLOT(hooks, 2, buffer_fn)(&buf, &size);
    assert_non_null(buf);
    assert_int_equal(size, 1024);
    memset(buf, 0xab, 1024);            /* the runtime's to fill */
    SLOT(hooks, 6, buffer_fn)(&buf, &size);
    assert_non_null(buf);
    assert_int_equal(size, 14);
    memset(buf, 0xab, 14);
    SLOT(hooks, 1, event_fn)(3, NULL);
    SLOT(hooks, 4, event_fn)(0, NULL);
    /* TLS slot 2: the current context, and a CUresult. */
    void *const *tls = table_of(U_TLS);
    CUcontext want = primary_again(), got = NULL;
    CK(SLOT(tls, 2, ctx_out_fn)(&got));
    assert_ptr_equal(got, want);
    CKE(SLOT(tls, 2, ctx_out_fn)(NULL), CUDA_ERROR_INVALID_VALUE);
    in_thread(tls_in_thread, (void *)tls[2]);
    CKE(SLOT(tls, 1, void_fn)(), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- context-local storage ------------------------------------------------------------------- */

#define DTOR_MAX 16
static struct {
    int n;
    CUcontext ctx[DTOR_MAX];
    void *key[DTOR_MAX], *value[DTOR_MAX];
    CUresult ctx_valid[DTOR_MAX];       /* a driver call on ctx from inside */
} dtors;

static void record_dtor(CUcontext ctx, void *key, void *value)
{
    unsigned v;
    assert_true(dtors.n < DTOR_MAX);
    dtors.ctx[dtors.n] = ctx;
    dtors.key[dtors.n] = key;
    dtors.value[dtors.n] = value;
    dtors.ctx_valid[dtors.n] = cuCtxGetApiVersion(ctx, &v);
    dtors.n++;
}

/* A destructor that puts a value again: its destructor runs too. */
static put_fn cls_put_fn;
static void reput_dtor(CUcontext ctx, void *key, void *value)
{
    record_dtor(ctx, key, value);
    CK(cls_put_fn(ctx, (char *)key + 1, (char *)value + 1, record_dtor));
}

static int dtor_seen(CUcontext ctx, void *key, void *value)
{
    for (int i = 0; i < dtors.n; i++)
        if (dtors.ctx[i] == ctx && dtors.key[i] == key && dtors.value[i] == value)
            return dtors.ctx_valid[i] == CUDA_SUCCESS ? 1 : -1;
    return 0;
}

static void *cls_in_thread(void *arg)
{
    void *const *t = arg;
    void *v = &v, *key = &key;
    CKE(SLOT(t, 0, put_fn)(NULL, key, key, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CKE(SLOT(t, 2, get_fn)(&v, NULL, key), CUDA_ERROR_INVALID_CONTEXT);
    CKE(SLOT(t, 1, del_fn)(NULL, key), CUDA_ERROR_INVALID_CONTEXT);
    assert_ptr_equal(v, &v);
    return NULL;
}

static void test_cls_calls(void **state)
{
    (void)state;
    void *const *t = table_of(U_CLS);
    put_fn put = SLOT(t, 0, put_fn);
    del_fn del = SLOT(t, 1, del_fn);
    get_fn get = SLOT(t, 2, get_fn);
    char k1, k2, v1, v2;
    void *v = &v;
    CUcontext cur = primary_again();
    in_thread(cls_in_thread, (void *)t);          /* no current context there */
    CKE(get(&v, NULL, &k1), CUDA_ERROR_NOT_FOUND);
    assert_ptr_equal(v, &v);                       /* untouched */
    CK(put(NULL, &k1, &v1, NULL));                 /* NULL: the current one */
    CK(get(&v, NULL, &k1));
    assert_ptr_equal(v, &v1);
    CK(get(&v, cur, &k1));
    assert_ptr_equal(v, &v1);
    CK(put(cur, &k1, &v2, NULL));                  /* replaced */
    CK(get(&v, NULL, &k1));
    assert_ptr_equal(v, &v2);
    CK(put(cur, &k2, &v1, NULL));
    CK(del(NULL, &k1));
    CKE(get(&v, NULL, &k1), CUDA_ERROR_NOT_FOUND);
    CKE(del(NULL, &k1), CUDA_ERROR_NOT_FOUND);
    CK(get(&v, NULL, &k2));
    assert_ptr_equal(v, &v1);
    CK(del(cur, &k2));
    CKE(get(NULL, NULL, &k2), CUDA_ERROR_INVALID_VALUE);
    CKE(put((CUcontext)(uintptr_t)0x1234, &k1, &v1, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CKE(SLOT(t, 3, void_fn)(), CUDA_ERROR_NOT_SUPPORTED);
}

/* Destructors run, with (ctx, key, value) and the context still valid, at
 * cuCtxDestroy, a primary context's reset and its last release; a deleted
 * entry's does not; a destructor that puts again has its own run. */
static void test_cls_destructors(void **state)
{
    (void)state;
    void *const *t = table_of(U_CLS);
    put_fn put = cls_put_fn = SLOT(t, 0, put_fn);
    del_fn del = SLOT(t, 1, del_fn);
    static char keys[8], values[8];
    CUcontext prim = primary_again(), c;
    memset(&dtors, 0, sizeof dtors);
    CK(ctx_create(&c));
    CK(put(c, &keys[0], &values[0], record_dtor));
    CK(put(c, &keys[1], &values[1], reput_dtor));
    CK(put(c, &keys[3], &values[3], record_dtor));
    CK(del(c, &keys[3]));
    CK(cuCtxDestroy(c));
    assert_int_equal(dtors.n, 3);
    assert_int_equal(dtor_seen(c, &keys[0], &values[0]), 1);
    assert_int_equal(dtor_seen(c, &keys[1], &values[1]), 1);
    assert_int_equal(dtor_seen(c, &keys[2], &values[2]), 1);      /* put by the destructor */
    assert_int_equal(dtor_seen(c, &keys[3], &values[3]), 0);
    CK(cuCtxSetCurrent(prim));
    /* Reset. */
    memset(&dtors, 0, sizeof dtors);
    CK(put(prim, &keys[4], &values[4], record_dtor));
    CK(put(prim, &keys[5], &values[5], NULL));      /* no destructor: just dropped */
    CK(cuDevicePrimaryCtxReset(0));
    assert_int_equal(dtors.n, 1);
    assert_int_equal(dtor_seen(prim, &keys[4], &values[4]), 1);
    /* The storage went with the reset. */
    prim = primary_again();
    void *v;
    CKE(SLOT(t, 2, get_fn)(&v, prim, &keys[5]), CUDA_ERROR_NOT_FOUND);
    /* The last release; not an earlier one. */
    memset(&dtors, 0, sizeof dtors);
    CK(cuDevicePrimaryCtxRetain(&prim, 0));         /* two retains now */
    CK(put(prim, &keys[6], &values[6], record_dtor));
    CK(cuDevicePrimaryCtxRelease(0));
    assert_int_equal(dtors.n, 0);
    CK(cuDevicePrimaryCtxRelease(0));
    assert_int_equal(dtors.n, 1);
    assert_int_equal(dtor_seen(prim, &keys[6], &values[6]), 1);
    primary_again();
}

/* At exit, a child's destructors run; a fork child of it does not run its
 * parent's (it has no contexts). */
static void test_cls_exit(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    mp_run(&env, "cls-exit", &p);
    assert_int_equal(mp_reported(&p, "put", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "forked", 100), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    assert_int_equal(tu_count_lines(out, "dtor "), 1);
    assert_int_equal(mp_reported(&p, "dtor", 100), (long long)p.pid);
    free(out);
    tu_env_free(&env);
}

/* ---- context checks and identity; integrity; cuBLASLt's table --------------------------------- */

static void test_checks_and_identity(void **state)
{
    (void)state;
    void *const *checks = table_of(U_CHECKS), *const *id = table_of(U_IDENTITY);
    CUcontext c = primary_again();
    uint32_t r = 5;
    const void *detail = NULL;
    CK(SLOT(checks, 2, check_fn)(c, &r, &detail));
    assert_int_equal(r, 0);
    assert_int_equal(SLOT(checks, 3, zero_fn)(), 0);
    unsigned long long a = 0, b = 1;
    CK(SLOT(id, 4, ctx_id_fn)(c, &a));
    CK(cuCtxGetId(c, &b));
    assert_true(a == b);
    /* A stream's handle and id, as cuBLAS keys its workspaces. */
    CUstream s, out = NULL;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(SLOT(id, 51, stream_fn)(c, s, &out, 0));
    assert_ptr_equal(out, s);
    CK(SLOT(id, 39, stream_id_fn)(c, out, &a));
    CK(cuStreamGetId(s, &b));
    assert_true(a == b);
    CK(SLOT(id, 51, stream_fn)(c, CU_STREAM_PER_THREAD, &out, 1));
    assert_ptr_equal(out, CU_STREAM_PER_THREAD);
    CK(SLOT(id, 39, stream_id_fn)(c, out, &a));
    assert_true(a != b);
    CK(cuStreamDestroy(s));
    CKE(SLOT(id, 51, stream_fn)(c, s, &out, 0), CUDA_ERROR_INVALID_HANDLE);
    CKE(SLOT(id, 2, void_fn)(), CUDA_ERROR_NOT_SUPPORTED);
}

static void *integrity_in_thread(void *arg)
{
    uint64_t *r = arg;
    CK(SLOT(table_of(U_INTEGRITY), 1, integrity_fn)(13002, 1700000000, r));
    return NULL;
}

/* Fixed answers for versions ending in 0 and 1; otherwise an answer of its
 * inputs (the time, the thread among them).  That libcudart accepts it is
 * what the runtime tests below show: it fails every call otherwise. */
static void test_integrity(void **state)
{
    (void)state;
    integrity_fn check = SLOT(table_of(U_INTEGRITY), 1, integrity_fn);
    uint64_t r[2], s[2], u[2];
    CK(check(13000, 1700000000, r));
    assert_true(r[0] == 0x3341181c03cb675cull && r[1] == 0x8ed383aa1f4cd1e8ull);
    CK(check(12081, 1700000000, r));
    assert_true(r[0] == 0x1841181c03cb675cull && r[1] == 0x8ed383aa1f4cd1e8ull);
    CK(check(13002, 1700000000, r));
    CK(check(13002, 1700000000, s));
    assert_memory_equal(r, s, sizeof r);
    CK(check(13002, 1700000001, s));
    assert_memory_not_equal(r, s, sizeof r);
    in_thread(integrity_in_thread, u);
    assert_memory_not_equal(r, u, sizeof r);
    CKE(check(13002, 1700000000, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(SLOT(table_of(U_INTEGRITY), 2, void_fn)(), CUDA_ERROR_NOT_SUPPORTED);
}

static void test_cublaslt_table(void **state)
{
    (void)state;
    void *const *t = table_of(U_LT);
    void *a = NULL, *b = NULL;
    for (int s = 1; s < 8; s++)
        CKE(SLOT(t, s, two_ptr_fn)(&a, &b), CUDA_ERROR_NOT_SUPPORTED);
    assert_null(a);
    assert_null(b);
}

/* Under SIMGPU_LOG=1 an unknown UUID and an undocumented slot are each
 * said once, however often they are asked. */
static void test_refusals_said_once(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    tu_env_set(&env, "SIMGPU_LOG", "1");
    mp_run(&env, "refuse", &p);
    assert_int_equal(mp_reported(&p, "unknown", 100), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(mp_reported(&p, "slot", 100), CUDA_ERROR_NOT_SUPPORTED);
    char *err = tu_read_file(p.err_path, NULL);
    assert_non_null(err);
    assert_int_equal(tu_count_lines(err, "no table 01020304-0506-0708-090a-0b0c0d0e0f10"), 1);
    assert_int_equal(tu_count_lines(err, "no table 11020304-0506-0708-090a-0b0c0d0e0f10"), 1);
    assert_int_equal(tu_count_lines(err, "slot 4 of CUBLASLT_1734DC26 is not implemented"), 1);
    assert_int_equal(tu_count_lines(err, "slot 3 of TOOLS_TLS is not implemented"), 1);
    assert_int_equal(tu_count_lines(err, "cuGetExportTable"), 4);
    free(err);
    tu_env_free(&env);
}

/* ---- what the runtime needs beside the tables ------------------------------------------------------ */

/* LAZY unless CUDA_MODULE_LOADING=EAGER; another value is the default, said. */
static void test_loading_mode(void **state)
{
    (void)state;
    CUmoduleLoadingMode mode = 0;
    CK(cuModuleGetLoadingMode(&mode));
    assert_int_equal(mode, CU_MODULE_LAZY_LOADING);
    const char *values[] = { "EAGER", "LAZY", "SOMETIMES" };
    const int want[] = { CU_MODULE_EAGER_LOADING, CU_MODULE_LAZY_LOADING,
                         CU_MODULE_LAZY_LOADING };
    for (int i = 0; i < 3; i++) {
        tu_env_t env;
        tu_proc_t p;
        mp_env(&env, simt_state);
        tu_env_set(&env, "CUDA_MODULE_LOADING", "%s", values[i]);
        mp_run(&env, "mode", &p);
        assert_int_equal(mp_reported(&p, "mode", 100), want[i]);
        char *err = tu_read_file(p.err_path, NULL);
        assert_int_equal(tu_count_lines(err, "is neither EAGER nor LAZY"), i == 2);
        free(err);
        tu_env_free(&env);
    }
}

/* A library from a fatbin with no code for this device loads; its lookups
 * fail.  A module of it is refused at once. */
static void test_library_without_code(void **state)
{
    (void)state;
    primary_again();
    void *other = image("other.fatbin");
    CUlibrary lib;
    CUkernel k;
    CUmodule m;
    CUdeviceptr p;
    CK(cuLibraryLoadData(&lib, other, NULL, NULL, 0, NULL, NULL, 0));
    CKE(cuLibraryGetKernel(&k, lib, "img_kernel"), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CKE(cuLibraryGetGlobal(&p, NULL, lib, "img_table"), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CK(cuLibraryUnload(lib));
    CKE(cuModuleLoadData(&m, other), CUDA_ERROR_NO_BINARY_FOR_GPU);
    free(other);
}

static void *global_in_thread(void *arg)
{
    CUdeviceptr p;
    CKE(cuLibraryGetGlobal(&p, NULL, (CUlibrary)arg, "img_table"), CUDA_ERROR_INVALID_CONTEXT);
    return NULL;
}

/* A library's variable has memory in each context that asks, with its
 * initial bytes, kept until the library or that context goes. */
static void test_library_globals(void **state)
{
    (void)state;
    primary_again();
    void *fatbin = image("multi.fatbin");
    CUlibrary lib;
    CUmodule m;
    CUcontext other;
    CUdeviceptr p, q, r;
    size_t size = 0;
    float table[4], mine[4] = { 9, 8, 7, 6 };
    CK(cuLibraryLoadData(&lib, fatbin, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetGlobal(&p, &size, lib, "img_table"));
    assert_int_equal(size, sizeof table);
    CK(cuMemcpyDtoH(table, p, sizeof table));
    assert_true(table[0] == 1.5f && table[3] == 4.5f);
    CK(cuMemcpyHtoD(p, mine, sizeof mine));
    CK(cuLibraryGetGlobal(&q, NULL, lib, "img_table"));
    assert_true(q == p);
    CK(cuLibraryGetModule(&m, lib));
    CK(cuModuleGetGlobal(&q, NULL, m, "img_table"));
    assert_true(q == p);
    CK(ctx_create(&other));
    CK(cuLibraryGetGlobal(&r, NULL, lib, "img_table"));
    assert_true(r != p);
    CK(cuMemcpyDtoH(table, r, sizeof table));
    assert_true(table[0] == 1.5f);
    CK(cuCtxDestroy(other));
    primary_again();
    CK(cuMemcpyDtoH(table, p, sizeof table));
    assert_memory_equal(table, mine, sizeof mine);
    CKE(cuLibraryGetGlobal(&q, NULL, lib, "no_such"), CUDA_ERROR_NOT_FOUND);
    in_thread(global_in_thread, lib);
    CK(cuLibraryUnload(lib));
    CKE(cuMemcpyDtoH(table, p, sizeof table), CUDA_ERROR_INVALID_VALUE);    /* gone with it */
    free(fatbin);
}

#if CUDA_VERSION >= 12090
static void log_callback(void *data, CUlogLevel level, char *message, size_t len)
{
    (void)data, (void)level, (void)message, (void)len;
    fail_msg("simgpu wrote to its error log");
}
#endif

static void test_occupancy_limits_attributes(void **state)
{
    (void)state;
    primary_again();
    void *fatbin = image("multi.fatbin");
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, fatbin));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CUlaunchAttribute a = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
    CUlaunchConfig cfg = { .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
                           .sharedMemBytes = 232448, .attrs = &a, .numAttrs = 1 };
    int n = -1, per_sm = -1;
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 128, 232448));
    assert_int_equal(per_sm, 1);
    for (unsigned size = 1; size <= 16; size++) {
        a.value.clusterDim.x = size;
        a.value.clusterDim.y = a.value.clusterDim.z = 1;
        CK(cuOccupancyMaxActiveClusters(&n, f, &cfg));
        assert_int_equal(n, 132 / size);
    }
    a.value.clusterDim.x = 17;
    CKE(cuOccupancyMaxActiveClusters(&n, f, &cfg), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    cfg.numAttrs = 0;                   /* the kernel requires no size: one is needed */
    CKE(cuOccupancyMaxActiveClusters(&n, f, &cfg), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    CK(cuModuleUnload(m));
    free(fatbin);
    /* The CIG limits (CUDA 12.8), as a context that is not a CIG one has them. */
    size_t v = 1;
    CK(cuCtxGetLimit(&v, (CUlimit)8));                 /* CIG_ENABLED */
    assert_int_equal(v, 0);
    CK(cuCtxGetLimit(&v, (CUlimit)7));                 /* SHMEM_SIZE */
    assert_int_equal(v, 232448);
    CKE(cuCtxSetLimit((CUlimit)8, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
    CK(cuCtxSetLimit((CUlimit)9, 0));
    CK(cuCtxGetLimit(&v, (CUlimit)9));
    assert_int_equal(v, 0);
    int id = 0;
    CK(cuDeviceGetAttribute(&id, (CUdevice_attribute)139, 0));     /* GPU_PCI_DEVICE_ID */
    assert_int_equal((unsigned)id, 0x233010deu);
#if CUDA_VERSION >= 12040
    CUgreenCtx g = (CUgreenCtx)&g;
    CK(cuStreamGetGreenCtx(NULL, &g));
    assert_null(g);
#endif
#if CUDA_VERSION >= 12090
    CUlogsCallbackHandle h = NULL;
    CK(cuLogsRegisterCallback(log_callback, NULL, &h));
    CK(cuLogsUnregisterCallback(h));
    CKE(cuLogsUnregisterCallback(h), CUDA_ERROR_INVALID_VALUE);
#endif
}

/* ---- the toolkit's runtime and libraries -------------------------------------------------------- */

typedef struct rt_run {
    tu_proc_t p;
    int rc;
    char *out, *err;
    long kernels;                       /* of the client's pid */
    long named;                         /* of those, named as asked */
} rt_run_t;

static void rt_free(rt_run_t *r)
{
    free(r->out);
    free(r->err);
}

/* Run tests/clients/<client> <mode> over simgpu (state of its own; extra:
 * one "NAME=value" more); kernel: the name to count in its trace. */
static void rt_run(rt_run_t *r, const char *client, const char *mode, const char *kernel,
                   const char *extra)
{
    char rel[128], prog[512], state[64], trace[600];
    snprintf(rel, sizeof rel, "tests/clients/%s", client);
    if (!tu_built(rel))
        skip();
    memset(r, 0, sizeof *r);
    snprintf(trace, sizeof trace, "%s/rt-%s-%s.jsonl", tu_tmpdir(), client, mode);
    unlink(trace);
    tu_env_t env;
    mp_env(&env, tu_unique_name("rt", state, sizeof state));
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_env_unset(&env, "CUDA_MODULE_LOADING");
    if (extra) {
        const char *eq = strchr(extra, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - extra), extra);
        tu_env_set(&env, name, "%s", eq + 1);
    }
    tu_build_path(rel, prog, sizeof prog);
    char *argv[] = { prog, (char *)mode, NULL };
    r->rc = tu_run(argv, &env, CLIENT_MS, &r->p);
    r->out = tu_read_file(r->p.out_path, NULL);
    r->err = tu_read_file(r->p.err_path, NULL);
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(trace, &k);
    for (long i = 0; i < n; i++) {
        if (k[i].pid != r->p.pid)
            continue;
        r->kernels++;
        r->named += kernel && !strcmp(k[i].name, kernel);
    }
    free(k);
    tu_env_free(&env);
    if (r->rc != 0 || !r->out || tu_json_need(r->out, "ok") != 1)
        fail_msg("%s %s exited %d: %s%s", client, mode, r->rc, r->out ? r->out : "",
                 r->err ? r->err : "");
}

/* rt_client: every launch it counted reached simgpu as rt_scale. */
static void rt_client(const char *client, const char *mode)
{
    rt_run_t r;
    rt_run(&r, client, mode, "rt_scale", NULL);
    long launches = (long)tu_json_need(r.out, "launches");
    assert_true(launches > 0);
    assert_int_equal(r.named, launches);
    assert_int_equal(tu_json_need(r.out, "major"), 9);
    rt_free(&r);
}

static void test_rt_shared(void **state)  { (void)state; rt_client("rt_shared", "basic"); }
static void test_rt_static(void **state)  { (void)state; rt_client("rt_static", "basic"); }
static void test_rt_ptx(void **state)     { (void)state; rt_client("rt_ptx", "basic"); }
static void test_rt_reset(void **state)   { (void)state; rt_client("rt_shared", "reset"); }
static void test_rt_static_reset(void **state) { (void)state; rt_client("rt_static", "reset"); }
static void test_rt_threads(void **state) { (void)state; rt_client("rt_shared", "threads"); }

/* rt_libs: the library ran its kernels over simgpu. */
static void rt_libs(const char *mode, const char *extra)
{
    rt_run_t r;
    rt_run(&r, "rt_libs", mode, NULL, extra);
    assert_true(r.kernels > 0);
    double found;
    if (tu_json_num(r.out, "algorithms", &found) == 0)
        assert_true(found > 0);
    rt_free(&r);
}

static void test_rt_sgemm(void **state)   { (void)state; rt_libs("sgemm", NULL); }
static void test_rt_lt_f16(void **state)  { (void)state; rt_libs("lt-f16", NULL); }
static void test_rt_lt_bf16(void **state) { (void)state; rt_libs("lt-bf16", NULL); }
static void test_rt_conv(void **state)    { (void)state; rt_libs("conv", NULL); }
/* cuBLAS's runtime loads all its fatbins at start under EAGER, one without
 * code for sm_90 among them. */
static void test_rt_sgemm_eager(void **state)
{
    (void)state;
    rt_libs("sgemm", "CUDA_MODULE_LOADING=EAGER");
}

/* ---- children ---------------------------------------------------------------------------------------- */

static void exit_dtor(CUcontext ctx, void *key, void *value)
{
    (void)ctx, (void)key, (void)value;
    mp_say("dtor", (long long)getpid());
}

/* cls-exit: a destructor put, run at exit; a fork child exits without. */
static int child_cls_exit(void)
{
    CUcontext c;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 1;
    CUuuid id;
    const void *t;
    memcpy(id.bytes, U_CLS, 16);
    if (cuGetExportTable(&t, &id))
        return 1;
    mp_say("put", ((put_fn)((void *const *)t)[0])(NULL, &id, &id, exit_dtor));
    pid_t pid = fork();
    if (pid == 0)
        exit(0);                        /* atexit handlers run here too */
    int status = -1;
    waitpid(pid, &status, 0);
    mp_say("forked", WIFEXITED(status) ? WEXITSTATUS(status) : 100);
    return 0;                           /* exit: the destructor runs */
}

static int child_refuse(void)
{
    if (cuInit(0))
        return 1;
    CUuuid id;
    const void *t;
    for (int i = 0; i < 16; i++)
        id.bytes[i] = (char)(i + 1);
    cuGetExportTable(&t, &id);
    cuGetExportTable(&t, &id);
    id.bytes[0] = 0x11;
    mp_say("unknown", cuGetExportTable(&t, &id));
    memcpy(id.bytes, U_LT, 16);
    cuGetExportTable(&t, &id);
    void *a, *b;
    ((two_ptr_fn)((void *const *)t)[4])(&a, &b);
    mp_say("slot", ((two_ptr_fn)((void *const *)t)[4])(&a, &b));
    memcpy(id.bytes, U_TLS, 16);
    cuGetExportTable(&t, &id);
    ((void_fn)((void *const *)t)[3])();
    ((void_fn)((void *const *)t)[3])();
    return 0;
}

static int child_mode(void)
{
    CUmoduleLoadingMode mode = 0;
    if (cuInit(0))
        return 1;
    mp_say("mode", cuModuleGetLoadingMode(&mode) ? -1 : (long long)mode);
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc < 1)
        return 100;
    if (!strcmp(argv[0], "cls-exit")) return child_cls_exit();
    if (!strcmp(argv[0], "refuse")) return child_refuse();
    if (!strcmp(argv[0], "mode")) return child_mode();
    return 100;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc - 2, argv + 2);
    unsetenv("CUDA_MODULE_LOADING");    /* this process loads lazily */
    if (mp_init("test_simgpu_rt", "simgpu-rt"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_md2),
        cmocka_unit_test(test_tables_served),
        cmocka_unit_test(test_cudart_primary),
        cmocka_unit_test(test_cudart_modules),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_cls_calls),
        cmocka_unit_test(test_cls_destructors),
        cmocka_unit_test(test_cls_exit),
        cmocka_unit_test(test_checks_and_identity),
        cmocka_unit_test(test_integrity),
        cmocka_unit_test(test_cublaslt_table),
        cmocka_unit_test(test_refusals_said_once),
        cmocka_unit_test(test_loading_mode),
        cmocka_unit_test(test_library_without_code),
        cmocka_unit_test(test_library_globals),
        cmocka_unit_test(test_occupancy_limits_attributes),
        cmocka_unit_test(test_rt_shared),
        cmocka_unit_test(test_rt_static),
        cmocka_unit_test(test_rt_ptx),
        cmocka_unit_test(test_rt_reset),
        cmocka_unit_test(test_rt_static_reset),
        cmocka_unit_test(test_rt_threads),
        cmocka_unit_test(test_rt_sgemm),
        cmocka_unit_test(test_rt_lt_f16),
        cmocka_unit_test(test_rt_lt_bf16),
        cmocka_unit_test(test_rt_conv),
        cmocka_unit_test(test_rt_sgemm_eager),
    };
    return cmocka_run_group_tests_name("simgpu runtime", tests, NULL, NULL);
}
