/*
 * test_simgpu_image.c - simgpu's device images beyond a plain cubin or PTX:
 * architectures (cubins for other devices refused, a fatbin's entry
 * chosen), compressed fatbin entries (ZSTD, LZ4), managed variables, the JIT
 * linker (cuLink*: PTX, cubin, fatbin, host object and archive
 * inputs, the option and log handling, the errors), and the linked image
 * loaded, its kernels launched and its variables read; managed variables;
 * libraries as the CUDA runtime uses them (one without code for the device,
 * a library's variables in each context).
 *
 * The images are built by tests/sim.mk from tests/simgpu_images.cu
 * (img_kernel, img_table {1.5, 2.5, 3.5, 4.5}, img_const = 7, img_managed,
 * img_zero[16]) and the workloads' kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <elf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/testutil.h"

#ifndef CUDA_HOME_DIR
#define CUDA_HOME_DIR "/usr/local/cuda"
#endif

/* test_simgpu_util.c */
extern CUcontext simt_ctx;
int simt_init(const char *tag);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))

static char *image_path(const char *name, char *buf, size_t len)
{
    char rel[128];
    snprintf(rel, sizeof rel, "tests/simimg/%s", name);
    tu_build_path(rel, buf, len);
    return buf;
}

/* The bytes of a built image (and its size). */
static char *image(const char *name, size_t *len)
{
    char path[512];
    char *data = tu_read_file(image_path(name, path, sizeof path), len);
    if (!data)
        fail_msg("cannot read %s: run make first", path);
    return data;
}

/* img_const's value and img_table's bytes in a loaded module. */
static void check_img_variables(CUmodule m)
{
    CUdeviceptr p;
    size_t size = 0;
    int c = 0;
    float table[4];
    CK(cuModuleGetGlobal(&p, &size, m, "img_const"));
    assert_int_equal(size, 4);
    CK(cuMemcpyDtoH(&c, p, sizeof c));
    assert_int_equal(c, 7);
    CK(cuModuleGetGlobal(&p, &size, m, "img_table"));
    assert_int_equal(size, sizeof table);
    CK(cuMemcpyDtoH(table, p, sizeof table));
    assert_true(table[0] == 1.5f && table[3] == 4.5f);
    CK(cuModuleGetGlobal(&p, &size, m, "img_zero"));
    assert_int_equal(size, 64);
}

/* ---- architectures and containers ------------------------------------------------- */

static CUresult load(const char *file, CUmodule *m)
{
    char *img = image(file, NULL);
    CUresult rc = cuModuleLoadData(m, img);
    free(img);
    return rc;
}

/* The device is sm_90: an sm_80 or sm_120 cubin is refused as a real one
 * refuses it, in a module, a library or a linker input. */
static void test_cubin_architecture(void **state)
{
    (void)state;
    CUmodule m;
    CUfunction f;
    CKE(load("sm80.cubin", &m), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CKE(load("sm120.cubin", &m), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CK(load("sm90.cubin", &m));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CK(cuModuleUnload(m));
    char path[512];
    CUlibrary lib;
    CKE(cuLibraryLoadFromFile(&lib, image_path("sm120.cubin", path, sizeof path), NULL, NULL, 0,
                              NULL, NULL, 0), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CUlinkState st;
    CK(cuLinkCreate(0, NULL, NULL, &st));
    CKE(cuLinkAddFile(st, CU_JIT_INPUT_CUBIN, image_path("sm80.cubin", path, sizeof path),
                      0, NULL, NULL), CUDA_ERROR_NO_BINARY_FOR_GPU);
    CK(cuLinkDestroy(st));
    /* Cubins of CUDA before 12.8 (ELF ABI version 7) say their architecture
     * in e_flags' low byte: the same rule applies. */
    size_t len;
    unsigned char *old = (unsigned char *)image("sm90.cubin", &len);
    Elf64_Ehdr eh;
    memcpy(&eh, old, sizeof eh);
    eh.e_ident[EI_ABIVERSION] = 7;
    eh.e_flags = 0x5a005a;                  /* sm_90 as ABI 7 writes it */
    memcpy(old, &eh, sizeof eh);
    CK(cuModuleLoadData(&m, old));
    CK(cuModuleUnload(m));
    eh.e_flags = 0x500050;                  /* sm_80 */
    memcpy(old, &eh, sizeof eh);
    CKE(cuModuleLoadData(&m, old), CUDA_ERROR_NO_BINARY_FOR_GPU);
    free(old);
    /* PTX for a newer device fails to JIT, as ptxas refuses it. */
    char *ptx = image("sm90.ptx", NULL);
    char *t = strstr(ptx, ".target sm_90");
    assert_non_null(t);
    memcpy(t, ".target sm_99", 13);
    CKE(cuModuleLoadData(&m, ptx), CUDA_ERROR_INVALID_PTX);
    free(ptx);
}

/* A fatbin gives the device's cubin when it has one, else PTX it can JIT:
 * multi.fatbin holds sm_80 and sm_90 cubins and compute_80 PTX; other.fatbin
 * sm_80 and sm_120 cubins only. */
static void test_fatbin_choice(void **state)
{
    (void)state;
    CUmodule m;
    CUfunction f;
    int regs = 0;
    CK(load("multi.fatbin", &m));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    /* A cubin was chosen, not PTX: registers are known only from a cubin. */
    CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    assert_true(regs > 0);
    check_img_variables(m);
    CK(cuModuleUnload(m));
    CKE(load("other.fatbin", &m), CUDA_ERROR_NO_BINARY_FOR_GPU);
}

/* PTX-only fatbins as nvcc 13 makes them: ZSTD by default, LZ4 with
 * --compress-mode=speed, plain with none; each gives the same module. */
static void test_fatbin_compressed(void **state)
{
    (void)state;
    static const char *const files[] = { "ptx_zstd.fatbin", "ptx_lz4.fatbin",
                                         "ptx_plain.fatbin" };
    static const uint64_t flag[] = { 0x8000, 0x2000, 0 };
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        unsigned char *img = (unsigned char *)image(files[i], &len);
        /* The files are what they claim: the first entry's flags. */
        uint64_t flags;
        assert_true(len > 64);
        memcpy(&flags, img + 16 + 40, 8);
        assert_int_equal(flags & 0xa000, flag[i]);
        CUmodule m;
        CUfunction f;
        CUdeviceptr p;
        size_t size = 0;
        CK(cuModuleLoadData(&m, img));
        CK(cuModuleGetFunction(&f, m, "img_kernel"));
        CK(cuModuleGetGlobal(&p, &size, m, "img_managed"));
        assert_int_equal(size, 4);
        CK(cuModuleUnload(m));
        if (flag[i]) {
            /* A corrupt payload is refused, never read out of bounds. */
            uint32_t csize;
            memcpy(&csize, img + 16 + 16, 4);
            uint32_t ehsize;
            memcpy(&ehsize, img + 16 + 4, 4);
            memset(img + 16 + ehsize + csize / 2, 0xff, csize - csize / 2);
            CKE(cuModuleLoadData(&m, img), CUDA_ERROR_INVALID_IMAGE);
        }
        free(img);
    }
}

/* ---- variables ----------------------------------------------------------------------- */

/* Managed variables (`.global .attribute(.managed)` in PTX) are variables
 * like the others, in PTX as in a cubin; PTX's start as zeros. */
static void test_managed_variables(void **state)
{
    (void)state;
    static const char *const files[] = { "sm90.ptx", "sm90.cubin" };
    for (size_t i = 0; i < 2; i++) {
        char *img = image(files[i], NULL);
        CUmodule m;
        CUdeviceptr p = 0;
        size_t size = 0;
        int v = -1;
        CK(cuModuleLoadData(&m, img));
        CK(cuModuleGetGlobal(&p, &size, m, "img_managed"));
        assert_int_equal(size, 4);
        CK(cuMemcpyDtoH(&v, p, sizeof v));
        assert_int_equal(v, 0);
        v = 42;                             /* and it is memory the device can write */
        CK(cuMemcpyHtoD(p, &v, sizeof v));
        CK(cuModuleGetGlobal(&p, &size, m, "img_zero"));
        assert_int_equal(size, 64);
        CKE(cuModuleGetGlobal(&p, &size, m, "img_missing"), CUDA_ERROR_NOT_FOUND);
        CK(cuModuleUnload(m));
        free(img);
    }
    /* An attribute does not make a function prototype a variable. */
    const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                      ".extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);\n"
                      ".global .attribute(.managed) .align 8 .b8 buf[24];\n"
                      ".visible .entry k(.param .u64 p) { ret; }\n";
    CUmodule m;
    CUdeviceptr p;
    size_t size = 0;
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleGetGlobal(&p, &size, m, "buf"));
    assert_int_equal(size, 24);
    CKE(cuModuleGetGlobal(&p, &size, m, "vprintf"), CUDA_ERROR_NOT_FOUND);
    CK(cuModuleUnload(m));
}

/* ---- the JIT linker ----------------------------------------------------------------- */

typedef struct linker {
    CUlinkState st;
    char info[4096], err[4096];
    CUjit_option opts[6];
    void *vals[6];
} linker_t;

static void linker_create(linker_t *l, int verbose)
{
    memset(l, 0, sizeof *l);
    strcpy(l->info, "junk");
    strcpy(l->err, "junk");
    CUjit_option o[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_LOG_VERBOSE, CU_JIT_WALL_TIME };
    void *v[] = { l->info, (void *)(uintptr_t)sizeof l->info, l->err,
                  (void *)(uintptr_t)sizeof l->err, (void *)(uintptr_t)verbose, NULL };
    memcpy(l->opts, o, sizeof o);
    memcpy(l->vals, v, sizeof v);
    CK(cuLinkCreate(6, l->opts, l->vals, &l->st));
    /* The logs are emptied, their sizes written back. */
    assert_string_equal(l->info, "");
    assert_string_equal(l->err, "");
    assert_int_equal((uintptr_t)l->vals[1], 0);
}

static size_t log_size(const linker_t *l, int error)
{
    return (size_t)(uintptr_t)l->vals[error ? 3 : 1];
}

/* PTX (the workloads', its size without the NUL as Numba passes it) and a
 * cubin file, linked, loaded, launched, their variables read. */
static void test_link_ptx_and_cubin(void **state)
{
    (void)state;
    char path[512];
    linker_t l;
    linker_create(&l, 1);
    char *ptx = tu_read_file(tu_build_path("workloads/kernels.ptx", path, sizeof path), NULL);
    assert_non_null(ptx);
    CK(cuLinkAddData(l.st, CU_JIT_INPUT_PTX, ptx, strlen(ptx), "kernels.ptx", 0, NULL, NULL));
    free(ptx);
    CK(cuLinkAddFile(l.st, CU_JIT_INPUT_CUBIN, image_path("sm90.cubin", path, sizeof path),
                     0, NULL, NULL));
    void *cubin = NULL;
    size_t size = 0;
    CK(cuLinkComplete(l.st, &cubin, &size));
    assert_non_null(cubin);
    assert_true(size > 64);
    assert_memory_equal(cubin, "\177ELF", 4);
    /* The logs: verbose info for each kernel and input, no error. */
    assert_non_null(strstr(l.info, "'img_kernel' from 'sm90.cubin'"));
    assert_non_null(strstr(l.info, "'salus_fill' from 'kernels.ptx'"));
    assert_int_equal(log_size(&l, 0), strlen(l.info));
    assert_string_equal(l.err, "");
    assert_int_equal(log_size(&l, 1), 0);
    float wall = -1;
    memcpy(&wall, &l.vals[5], sizeof wall);
    assert_true(wall >= 0);

    /* The image loads: kernels with their parameter layouts, variables
     * with their initial bytes. */
    CUmodule m;
    CK(cuModuleLoadData(&m, cubin));
    CUfunction img, fill;
    CK(cuModuleGetFunction(&img, m, "img_kernel"));
    CK(cuModuleGetFunction(&fill, m, "salus_fill"));
    CK(cuModuleGetFunction(&fill, m, "salus_spin"));
    CK(cuModuleGetFunction(&fill, m, "salus_fill"));
    check_img_variables(m);
    size_t pbytes = 0, poff = 0;
    CK(cuFuncGetParamInfo(img, 2, &poff, &pbytes));     /* (float *, int, double) */
    assert_int_equal(poff, 16);
    assert_int_equal(pbytes, 8);
    /* salus_fill is still emulated: its layout survived the link. */
    CUdeviceptr y;
    float v = 3.0f, out[64];
    unsigned long long n = 64;
    CK(cuMemAlloc(&y, sizeof out));
    void *args[] = { &y, &v, &n };
    CK(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    CK(cuMemcpyDtoH(out, y, sizeof out));
    assert_true(out[0] == 3.0f && out[63] == 3.0f);
    CK(cuMemFree(y));
    CK(cuModuleUnload(m));
    CK(cuLinkDestroy(l.st));
    CKE(cuLinkDestroy(l.st), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuLinkComplete(l.st, &cubin, &size), CUDA_ERROR_INVALID_HANDLE);
}

/* A fatbin, a host object and an archive each give their device code. */
static void test_link_containers(void **state)
{
    (void)state;
    static const struct { const char *file; CUjitInputType type; } in[] = {
        { "ptx_plain.fatbin", CU_JIT_INPUT_FATBINARY },
        { "img.o", CU_JIT_INPUT_OBJECT },
        { "img_z.o", CU_JIT_INPUT_OBJECT },                 /* its cubin compressed */
        { "libimg.a", CU_JIT_INPUT_LIBRARY },
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        linker_t l;
        char path[512];
        linker_create(&l, 0);
        CK(cuLinkAddFile(l.st, in[i].type, image_path(in[i].file, path, sizeof path),
                         0, NULL, NULL));
        void *cubin = NULL;
        CK(cuLinkComplete(l.st, &cubin, NULL));   /* the size is optional */
        assert_string_equal(l.info, "");          /* not verbose */
        CUmodule m;
        CUfunction f;
        CK(cuModuleLoadData(&m, cubin));
        CK(cuModuleGetFunction(&f, m, "img_kernel"));
        CK(cuModuleUnload(m));
        CK(cuLinkDestroy(l.st));
    }
}

/* The toolkit's device runtime (an archive whose one member has a long
 * name and compressed relocatable cubins for many architectures), linked
 * with PTX that uses none of it, as libNVVM's device-launch sample does. */
static void test_link_device_runtime(void **state)
{
    (void)state;
    char path[512];
    linker_t l;
    linker_create(&l, 0);
    CK(cuLinkAddFile(l.st, CU_JIT_INPUT_LIBRARY, CUDA_HOME_DIR "/lib64/libcudadevrt.a",
                     0, NULL, NULL));
    CK(cuLinkAddFile(l.st, CU_JIT_INPUT_PTX, image_path("sm90.ptx", path, sizeof path),
                     0, NULL, NULL));
    void *cubin = NULL;
    CK(cuLinkComplete(l.st, &cubin, NULL));
    assert_string_equal(l.err, "");
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, cubin));
    CK(cuModuleGetFunction(&f, m, "img_kernel"));
    CK(cuModuleUnload(m));
    CK(cuLinkDestroy(l.st));
}

static void test_link_errors(void **state)
{
    (void)state;
    char path[512];
    linker_t l;
    size_t cubin_len;
    char *cubin = image("sm90.cubin", &cubin_len);
    char *ptx = image("sm90.ptx", NULL);
    linker_create(&l, 0);
    /* Nothing to link yet. */
    void *out = NULL;
    CKE(cuLinkComplete(l.st, &out, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_non_null(strstr(l.err, "no input"));
    /* Data of the wrong type, said in the error log with the input's name. */
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_PTX, cubin, cubin_len, "a.cubin", 0, NULL, NULL),
        CUDA_ERROR_INVALID_PTX);
    assert_non_null(strstr(l.err, "a.cubin (PTX): CUDA_ERROR_INVALID_PTX"));
    assert_int_equal(log_size(&l, 1), strlen(l.err));
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, ptx, strlen(ptx) + 1, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_IMAGE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_FATBINARY, cubin, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_IMAGE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_OBJECT, ptx, strlen(ptx), NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_IMAGE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_LIBRARY, cubin, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_IMAGE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_NVVM, cubin, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_NOT_SUPPORTED);
    CKE(cuLinkAddData(l.st, (CUjitInputType)99, cubin, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, NULL, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, cubin, 0, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuLinkAddFile(l.st, CU_JIT_INPUT_CUBIN, "/nonexistent/x.cubin", 0, NULL, NULL),
        CUDA_ERROR_FILE_NOT_FOUND);
    CKE(cuLinkAddFile(l.st, CU_JIT_INPUT_CUBIN, NULL, 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    /* Per-input options are checked; their own logs get the input's errors. */
    char own[256] = "junk";
    CUjit_option bad[] = { (CUjit_option)999 };
    void *badv[] = { NULL };
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, cubin, cubin_len, NULL, 1, bad, badv),
        CUDA_ERROR_INVALID_VALUE);
    CUjit_option oo[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
    void *ov[] = { own, (void *)(uintptr_t)sizeof own };
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_PTX, cubin, cubin_len, "b", 2, oo, ov),
        CUDA_ERROR_INVALID_PTX);
    assert_non_null(strstr(own, "b (PTX)"));
    assert_int_equal((uintptr_t)ov[1], strlen(own));
    /* A kernel defined twice. */
    CK(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, cubin, cubin_len, "one", 0, NULL, NULL));
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_PTX, ptx, 0, "two", 0, NULL, NULL),
        CUDA_ERROR_INVALID_IMAGE);
    assert_non_null(strstr(l.err, "Multiple definition of 'img_kernel' in 'two'"));
    /* What was linked before the errors still links. */
    CK(cuLinkComplete(l.st, &out, NULL));
    CK(cuLinkDestroy(l.st));
    CKE(cuLinkAddData(l.st, CU_JIT_INPUT_CUBIN, cubin, cubin_len, NULL, 0, NULL, NULL),
        CUDA_ERROR_INVALID_HANDLE);
    CKE(cuLinkDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);

    /* Creation: options checked, a context needed, a target no newer than
     * the device. */
    CUlinkState st;
    CKE(cuLinkCreate(1, bad, badv, &st), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CUjit_option target[] = { CU_JIT_TARGET };
    void *sm100[] = { (void *)(uintptr_t)CU_TARGET_COMPUTE_100 };
    CKE(cuLinkCreate(1, target, sm100, &st), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxSetCurrent(NULL));
    CKE(cuLinkCreate(0, NULL, NULL, &st), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(simt_ctx));
    free(cubin);
    free(ptx);
    (void)path;
}

/* ---- libraries ---------------------------------------------------------------------
 * What the CUDA runtime needs of them: it loads fatbins as libraries. */

/* cuCtxCreate_v2, whatever cuda.h maps cuCtxCreate to. */
static CUresult ctx_create(CUcontext *c)
{
    CUresult (*fn)(CUcontext *, unsigned, CUdevice) = NULL;
    if (cuGetProcAddress_v2("cuCtxCreate", (void **)&fn, 3020, 0, NULL) || !fn)
        return CUDA_ERROR_UNKNOWN;
    return fn(c, 0, 0);
}

/* Run fn(arg) in a thread of its own, which has no current context. */
static void in_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

/* A library from a fatbin with no code for this device loads; its lookups
 * fail.  A module of it is refused at once. */
static void test_library_without_code(void **state)
{
    (void)state;
    char *other = image("other.fatbin", NULL);
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
    char *fatbin = image("multi.fatbin", NULL);
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
    CK(cuCtxSetCurrent(simt_ctx));
    CK(cuMemcpyDtoH(table, p, sizeof table));
    assert_memory_equal(table, mine, sizeof mine);
    CKE(cuLibraryGetGlobal(&q, NULL, lib, "no_such"), CUDA_ERROR_NOT_FOUND);
    in_thread(global_in_thread, lib);
    CK(cuLibraryUnload(lib));
    CKE(cuMemcpyDtoH(table, p, sizeof table), CUDA_ERROR_INVALID_VALUE);    /* gone with it */
    free(fatbin);
}

int main(void)
{
    if (simt_init("simgpu-image"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cubin_architecture),
        cmocka_unit_test(test_fatbin_choice),
        cmocka_unit_test(test_fatbin_compressed),
        cmocka_unit_test(test_managed_variables),
        cmocka_unit_test(test_link_ptx_and_cubin),
        cmocka_unit_test(test_link_containers),
        cmocka_unit_test(test_link_device_runtime),
        cmocka_unit_test(test_link_errors),
        cmocka_unit_test(test_library_without_code),
        cmocka_unit_test(test_library_globals),
    };
    return cmocka_run_group_tests_name("simgpu_image", tests, NULL, NULL);
}
