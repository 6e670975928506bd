/*
 * module.c - modules, libraries and functions: cuModuleLoad*, cuLibrary*,
 * cuModuleGetFunction, cuFunc* and cuKernel* queries.
 *
 * Divided into: loading and unloading; lookups (functions, variables);
 * function attributes; libraries and kernels.
 *
 * A module loaded into a context charges its device the size of its image
 * (the device code chosen: the cubin, or the PTX text), until it is
 * unloaded or its context goes; a library, tied to no context, is not
 * charged.  A module's variables (__device__ / __constant__) get
 * host-backed memory in the module's context when it is loaded, with their
 * initial bytes from the cubin (PTX variables start as zeros), and go with
 * the module; a library's get memory in each context that asks for them
 * (cuLibraryGetGlobal), until the library or the context goes.
 *
 * Loading is lazy unless CUDA_MODULE_LOADING=EAGER, as the driver's since
 * CUDA 12.2: cuModuleGetLoadingMode says which, and the runtime loads its
 * fatbins at their first use or all at start accordingly.  A library from a
 * fatbin with no code for the device loads either way, failing only its
 * lookups.
 *
 * A library is a module not tied to a context; a CUkernel is the handle of
 * the library's function, so it may be launched as a CUfunction, as the
 * driver allows, and cuKernelGetFunction / cuLibraryGetModule return the
 * same handles.  Images are parsed by image.c.
 *
 * Lock: sim_p.lock guards modules and functions; images are parsed before
 * taking it, into a module that nobody else sees yet.
 */
#include "loader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- loading and unloading -------------------------------------------------- */

/* A library's variable has memory in each context that asked for it
 * (cuLibraryGetGlobal), until the library is unloaded or the context goes. */
struct sim_ginst {
    sim_ctx_t *ctx;
    sim_range_t *r;
    sim_ginst_t *next;
};

/* Drop the instances of g in ctx (NULL: in every context). */
static void ginst_drop(sim_global_t *g, const sim_ctx_t *ctx)
{
    for (sim_ginst_t **e = &g->inst; *e;) {
        sim_ginst_t *i = *e;
        if (ctx && i->ctx != ctx) {
            e = &i->next;
            continue;
        }
        *e = i->next;
        sim_mem_release(i->r);
        free(i);
    }
}

void sim_module_free(sim_module_t *m)
{
    for (int i = 0; i < m->nfuncs; i++)
        sim_func_free(m->funcs[i]);
    free(m->funcs);
    for (int i = 0; i < m->nglobals; i++) {
        ginst_drop(&m->globals[i], NULL);
        if (m->globals[i].r)
            sim_mem_release(m->globals[i].r);
        free(m->globals[i].name);
        free(m->globals[i].init);
    }
    free(m->globals);
    if (m->charged && m->ctx)
        sim_uncharge(m->ctx->device, m->charged);
    if (m->handle)
        sim_obj_free(m->handle);
    free(m);
}

static int is_fatbin(const void *image)
{
    uint32_t magic;
    memcpy(&magic, image, sizeof magic);
    return magic == SIM_FATBIN_MAGIC || magic == SIM_FATBIN_WRAPPER_MAGIC;
}

/* A library from a fatbin with no code for this device loads, and only a
 * lookup in it fails, with CUDA_ERROR_NO_BINARY_FOR_GPU (a cubin built for
 * another device is still refused at once).  Under lazy loading the driver
 * documents that a library's code is loaded at its first use; under eager
 * loading what it does with such a library is not documented, but cuBLAS
 * 13's runtime loads all of its 131 fatbins then (one holds only sm_120
 * code and PTX) and works on an sm_90 GPU, so simgpu loads it in both. */
static CUresult library_without_code(sim_module_t *m)
{
    for (int i = 0; i < m->nfuncs; i++)
        sim_func_free(m->funcs[i]);
    free(m->funcs);
    m->funcs = NULL;
    m->nfuncs = 0;
    for (int i = 0; i < m->nglobals; i++) {
        free(m->globals[i].name);
        free(m->globals[i].init);
    }
    free(m->globals);
    m->globals = NULL;
    m->nglobals = 0;
    m->nocode = 1;
    return CUDA_SUCCESS;
}

/* Parse (unlocked), then publish: handles for the module and its functions. */
static CUresult module_load(const void *image, size_t len, int library, uint64_t *out)
{
    SIM_CHECK_INIT();
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    sim_module_t *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->is_library = library;
    CUresult rc = sim_image_load(image, len, m);
    if (rc == CUDA_ERROR_NO_BINARY_FOR_GPU && library && is_fatbin(image))
        rc = library_without_code(m);
    if (rc != CUDA_SUCCESS)
        goto out_free;
    SIM_LOCK();
    if (!library && (rc = sim_ctx_require(&m->ctx)) != CUDA_SUCCESS)
        goto out_unlock;
    if (m->ctx) {                       /* its code takes device memory */
        uint64_t bytes = sim_round_up(m->image_bytes, SIM_GRANULE);
        if ((rc = sim_charge(m->ctx->device, bytes)) != CUDA_SUCCESS)
            goto out_unlock;
        m->charged = bytes;
    }
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(m->handle = sim_obj_new(SIM_K_MODULE, m)))
        goto out_unlock;
    for (int i = 0; i < m->nfuncs; i++)
        if (!(m->funcs[i]->handle = sim_obj_new(SIM_K_FUNC, m->funcs[i])))
            goto out_unlock;
    for (int i = 0; m->ctx && i < m->nglobals; i++) {   /* a library's: get_global */
        sim_global_t *g = &m->globals[i];
        if ((rc = sim_mem_alloc(m->ctx, m->ctx->device, g->size, SIM_R_GLOBAL, &g->r)))
            goto out_unlock;
        if (g->init)
            memcpy((void *)g->r->base, g->init, g->size);
        else
            memset((void *)g->r->base, 0, g->size);
    }
    *out = m->handle;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
out_unlock:
    sim_module_free(m);
    SIM_UNLOCK();
    return rc;
out_free:
    sim_module_free(m);
    return rc;
}

static CUresult load_file(const char *path, int library, uint64_t *out)
{
    SIM_CHECK_INIT();
    if (!path || !out)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_IMAGE;
    struct stat st;
    char *buf = NULL;
    if (fstat(fileno(f), &st) < 0 || st.st_size <= 0 || st.st_size > (1 << 30))
        goto out_close;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!(buf = malloc((size_t)st.st_size + 1)))
        goto out_close;
    rc = CUDA_ERROR_FILE_NOT_FOUND;
    if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        goto out_free;
    buf[st.st_size] = '\0';             /* PTX text ends there */
    rc = module_load(buf, (size_t)st.st_size + 1, library, out);
out_free:
    free(buf);
out_close:
    fclose(f);
    return rc;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *mod, const char *fname)
{
    return load_file(fname, 0, (uint64_t *)mod);
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *mod, const void *image)
{
    return module_load(image, 0, 0, (uint64_t *)mod);
}

/* A load with JIT options (link.c): nothing is compiled, so the info log
 * stays empty and the wall time 0; a refused image is said in the error log. */
static CUresult load_jit(const void *image, const char *path, int library, uint64_t *out,
                         unsigned n, CUjit_option *opts, void **vals)
{
    sim_jit_t j;
    CUresult rc = sim_jit_parse(&j, n, opts, vals);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = path ? load_file(path, library, out) : module_load(image, 0, library, out);
    if (rc != CUDA_SUCCESS) {
        const char *name = NULL;
        cuGetErrorName(rc, &name);
        sim_jit_log(&j, 1, "error   : %s: %s\n", path ? path : "image", name);
    }
    return rc;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned int n,
                                    CUjit_option *opts, void **vals)
{
    return load_jit(image, NULL, 0, (uint64_t *)mod, n, opts, vals);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *mod, const void *fatbin)
{
    return module_load(fatbin, 0, 0, (uint64_t *)mod);
}

static CUresult unload(uint64_t h, int library)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_module_t *m = sim_obj_get(h, SIM_K_MODULE);
    CUresult rc = CUDA_SUCCESS;
    if (!m || m->is_library != library)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        sim_module_free(m);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuModuleUnload(CUmodule mod)
{
    return unload((uint64_t)(uintptr_t)mod, 0);
}

static void free_if_ctx(void *obj, void *arg)
{
    sim_module_t *m = obj;
    if (m->ctx == arg)
        sim_module_free(m);
    else if (m->is_library)
        for (int i = 0; i < m->nglobals; i++)
            ginst_drop(&m->globals[i], arg);
}

void sim_modules_destroy_ctx(sim_ctx_t *ctx)
{
    sim_obj_foreach(SIM_K_MODULE, free_if_ctx, ctx);
}

/* A module's variable is its memory; a library's has memory in the current
 * context, made (with its initial bytes) at the first ask there. */
static CUresult global_range(sim_module_t *m, sim_global_t *g, sim_range_t **out)
{
    if (!m->is_library) {
        *out = g->r;
        return g->r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    }
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_ginst_t *i = g->inst;
    while (i && i->ctx != ctx)
        i = i->next;
    if (!i) {
        if (!(i = calloc(1, sizeof *i)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        if ((rc = sim_mem_alloc(ctx, ctx->device, g->size, SIM_R_GLOBAL, &i->r))) {
            free(i);
            return rc;
        }
        if (g->init)
            memcpy((void *)i->r->base, g->init, g->size);
        else
            memset((void *)i->r->base, 0, g->size);
        i->ctx = ctx;
        i->next = g->inst;
        g->inst = i;
    }
    *out = i->r;
    return CUDA_SUCCESS;
}

/* The variable name of module or library h (library: 1 for a library
 * only, -1 for either); both outputs are optional. */
static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, uint64_t h, const char *name,
                           int library)
{
    SIM_CHECK_INIT();
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_module_t *m = sim_obj_get(h, SIM_K_MODULE);
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    if (m && (library < 0 || m->is_library == library)) {
        rc = m->nocode ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_NOT_FOUND;
        for (int i = 0; i < m->nglobals; i++) {
            sim_range_t *r;
            if (strcmp(m->globals[i].name, name))
                continue;
            if ((rc = global_range(m, &m->globals[i], &r)) == CUDA_SUCCESS) {
                if (dptr)
                    *dptr = (CUdeviceptr)r->base;
                if (bytes)
                    *bytes = m->globals[i].size;
            }
            break;
        }
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hm,
                                     const char *name)
{
    return get_global(dptr, bytes, (uint64_t)(uintptr_t)hm, name, -1);
}

/* As the driver documents it: the variable's memory for the library and
 * the current context. */
CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib,
                                    const char *name)
{
    return get_global(dptr, bytes, (uint64_t)(uintptr_t)lib, name, 1);
}

/* CUDA_MODULE_LOADING, as the driver reads it: EAGER or LAZY, LAZY when
 * unset (the default since CUDA 12.2).  What the driver does with another
 * value is not documented; simgpu takes the default and says so. */
void sim_read_loading_mode(void)
{
    const char *v = getenv("CUDA_MODULE_LOADING");
    sim_p.eager = v && !strcmp(v, "EAGER");
    if (v && *v && !sim_p.eager && strcmp(v, "LAZY"))
        sim_note("CUDA_MODULE_LOADING=%s is neither EAGER nor LAZY: loading lazily", v);
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    SIM_CHECK_INIT();
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = sim_p.eager ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* ---- lookups ------------------------------------------------------------------ */

static CUresult get_function(uint64_t *out, uint64_t hm, const char *name, int library)
{
    SIM_CHECK_INIT();
    if (!out || !name)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_module_t *m = sim_obj_get(hm, SIM_K_MODULE);
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    if (m && (library < 0 || m->is_library == library)) {
        rc = m->nocode ? CUDA_ERROR_NO_BINARY_FOR_GPU : CUDA_ERROR_NOT_FOUND;
        for (int i = 0; i < m->nfuncs; i++) {
            if (!strcmp(m->funcs[i]->name, name)) {
                *out = m->funcs[i]->handle;
                rc = CUDA_SUCCESS;
                break;
            }
        }
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
    return get_function((uint64_t *)f, (uint64_t)(uintptr_t)mod, name, -1);
}

SIM_MAYBE_UNUSED static CUresult count_functions(unsigned *count, uint64_t hm)
{
    SIM_CHECK_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_module_t *m = sim_obj_get(hm, SIM_K_MODULE);
    if (m)
        *count = (unsigned)m->nfuncs;
    SIM_UNLOCK();
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_MAYBE_UNUSED static CUresult enumerate(uint64_t *out, unsigned n, uint64_t hm)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_module_t *m = sim_obj_get(hm, SIM_K_MODULE);
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    if (m) {
        rc = n < (unsigned)m->nfuncs ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        for (int i = 0; rc == CUDA_SUCCESS && i < m->nfuncs; i++)
            out[i] = m->funcs[i]->handle;
    }
    SIM_UNLOCK();
    return rc;
}

#ifdef CU_PARAMS_cuModuleGetFunctionCount
CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    return count_functions(count, (uint64_t)(uintptr_t)mod);
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *fns, unsigned int n, CUmodule mod)
{
    return enumerate((uint64_t *)fns, n, (uint64_t)(uintptr_t)mod);
}
#endif

/* ---- function attributes ---------------------------------------------------------- */

static sim_func_t *func_get(uint64_t h)
{
    return sim_obj_get(h, SIM_K_FUNC);
}

static CUresult func_attr(int *v, CUfunction_attribute a, const sim_func_t *f)
{
    switch ((int)a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = (int)f->shared_bytes; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *v = (int)f->const_bytes; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = (int)f->local_bytes; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = f->num_regs; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = f->max_dyn_shared; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = f->carveout; break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *v = 0; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult func_set_attr(sim_func_t *f, CUfunction_attribute a, int v)
{
    switch ((int)a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (v < 0 || (uint64_t)v + f->shared_bytes > 232448)
            return CUDA_ERROR_INVALID_VALUE;
        f->max_dyn_shared = v;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (v < -1 || v > 100)
            return CUDA_ERROR_INVALID_VALUE;
        f->carveout = v;
        return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

#define WITH_FUNC(h, body) do { \
        SIM_CHECK_INIT(); \
        SIM_LOCK(); \
        sim_func_t *f = func_get((uint64_t)(uintptr_t)(h)); \
        CUresult rc = f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; \
        if (f) { body; } \
        SIM_UNLOCK(); \
        return rc; \
    } while (0)

CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction h)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, rc = func_attr(v, a, f));
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction h, CUfunction_attribute a, int v)
{
    WITH_FUNC(h, rc = func_set_attr(f, a, v));
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction h, CUfunc_cache c)
{
    if ((unsigned)c > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, f->cache_config = c);
}

CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction h, CUsharedconfig c)
{
    if ((unsigned)c > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, (void)f);              /* bank size has no effect since Volta */
}

/* The execution state of the old cuLaunch/cuLaunchGrid family, which simgpu
 * does not implement.  PyCUDA sets the block shape before each of its
 * cuLaunchKernel calls (which carry their own), so the setters check their
 * arguments and succeed, as the driver's do; nothing reads what they set. */
CUresult CUDAAPI cuFuncSetBlockShape(CUfunction h, int x, int y, int z)
{
    if (x <= 0 || y <= 0 || z <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, (void)f);
}

CUresult CUDAAPI cuFuncSetSharedSize(CUfunction h, unsigned int bytes)
{
    (void)bytes;
    WITH_FUNC(h, (void)f);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *mod, CUfunction h)
{
    if (!mod)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, *mod = (CUmodule)(uintptr_t)f->mod->handle);
}

SIM_MAYBE_UNUSED static CUresult param_info(const sim_func_t *f, size_t i, size_t *off, size_t *size)
{
    if (i >= (size_t)f->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    if (off)
        *off = f->params[i].offset;
    if (size)
        *size = f->params[i].size;
    return CUDA_SUCCESS;
}

#ifdef CU_PARAMS_cuFuncGetName
CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction h)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, *name = f->name);
}
#endif

#ifdef CU_PARAMS_cuFuncGetParamInfo
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction h, size_t i, size_t *off, size_t *size)
{
    WITH_FUNC(h, rc = param_info(f, i, off, size));
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction h)
{
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(h, *state = CU_FUNCTION_LOADING_STATE_LOADED);
}

CUresult CUDAAPI cuFuncLoad(CUfunction h)
{
    WITH_FUNC(h, (void)f);
}
#endif

/* ---- libraries and kernels ------------------------------------------------------- */

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jopts,
                                   void **jvals, unsigned int nj, CUlibraryOption *lopts,
                                   void **lvals, unsigned int nl)
{
    (void)lopts;
    (void)lvals;
    (void)nl;
    return load_jit(code, NULL, 1, (uint64_t *)lib, nj, jopts, jvals);
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *lib, const char *path, CUjit_option *jopts,
                                       void **jvals, unsigned int nj, CUlibraryOption *lopts,
                                       void **lvals, unsigned int nl)
{
    (void)lopts;
    (void)lvals;
    (void)nl;
    return load_jit(NULL, path, 1, (uint64_t *)lib, nj, jopts, jvals);
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary lib)
{
    return unload((uint64_t)(uintptr_t)lib, 1);
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *k, CUlibrary lib, const char *name)
{
    return get_function((uint64_t *)k, (uint64_t)(uintptr_t)lib, name, 1);
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *mod, CUlibrary lib)
{
    SIM_CHECK_INIT();
    if (!mod)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_module_t *m = sim_obj_get((uint64_t)(uintptr_t)lib, SIM_K_MODULE);
    if (m && m->is_library)
        *mod = (CUmodule)(uintptr_t)m->handle;
    SIM_UNLOCK();
    return m && m->is_library ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

#ifdef CU_PARAMS_cuLibraryGetKernelCount
CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    return count_functions(count, (uint64_t)(uintptr_t)lib);
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *ks, unsigned int n, CUlibrary lib)
{
    return enumerate((uint64_t *)ks, n, (uint64_t)(uintptr_t)lib);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    WITH_FUNC(k, rc = param_info(f, i, off, size));
}
#endif

CUresult CUDAAPI cuKernelGetFunction(CUfunction *fn, CUkernel k)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(k, *fn = (CUfunction)(uintptr_t)f->handle);
}

#ifdef CU_PARAMS_cuKernelGetName
CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel k)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(k, *name = f->name);
}
#endif

#ifdef CU_PARAMS_cuKernelGetLibrary
CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *lib, CUkernel k)
{
    if (!lib)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_FUNC(k, *lib = (CUlibrary)(uintptr_t)f->mod->handle);
}
#endif

CUresult CUDAAPI cuKernelGetAttribute(int *v, CUfunction_attribute a, CUkernel k, CUdevice dev)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    WITH_FUNC(k, rc = func_attr(v, a, f));
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice dev)
{
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    WITH_FUNC(k, rc = func_set_attr(f, a, v));
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel k, CUfunc_cache c, CUdevice dev)
{
    if ((unsigned)c > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    WITH_FUNC(k, f->cache_config = c);
}
