/*
 * real.c - the NVML behind the hooks: the hooked names and the real function
 * of each, bound on first need.
 *
 * Divided into: the names; binding; the test seam.  (The dlsym decision
 * is wrappers.c's, beside the wrappers it answers.)
 *
 * One NVML is bound per process: the library the first real function came
 * from (a dlsym's answer, or libnvidia-ml.so.1 already loaded, for a program
 * linked to it).  A function found in another library than that one is
 * never bound: its wrapper would ask one NVML for a device handle of
 * another.  NVML is never loaded by libsalus (dlopen RTLD_NOLOAD only): a
 * process without it is left as it is.
 *
 * No lock: every binding is a compare-and-swap of a pointer from NULL
 * (lib, lib_base, slot[id]); two threads racing bind the same values, and
 * the loser's dlopen reference is harmless.  Acquire loads pair with the
 * swaps' release, so a thread that sees a slot sees the library it is in.
 */
#include "nvml/nvhook.h"
#include "util/util.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ---- the names ------------------------------------------------------------ */

#define NAME_ROW_(cat, name, type) #name,
const char *const nvh_names[NVH_IDS] = { NVH_LIST(NAME_ROW_) };

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

int nvh_find(const char *name)
{
    const char *const *hit = bsearch(name, nvh_names, NVH_IDS, sizeof nvh_names[0], cmp_name);
    return hit ? (int)(hit - nvh_names) : -1;
}

/* ---- binding ---------------------------------------------------------------- */

static nvh_dlsym_fn dlsym_real;     /* set once by the constructor */
static void *lib;                   /* the bound NVML's handle */
static void *lib_base;              /* its load address (dladdr's dli_fbase) */
static void *slot[NVH_IDS];

void nvh_init(nvh_dlsym_fn real_dlsym)
{
    util_store_release(&dlsym_real, real_dlsym);
}

static void *base_of(void *fn, const char **file)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info))
        return NULL;
    if (file)
        *file = info.dli_fname;
    return info.dli_fbase;
}

/* Whether fn lies in libsalus itself (our own export, found by a lookup that
 * reached us first). */
static int is_ours(void *fn)
{
    static const char here = 0;
    return base_of(fn, NULL) == base_of((void *)&here, NULL);
}

/* Bind the library whose file is `file`, loaded at `base`; 0 when it is
 * (now) the bound one. */
static int bind_lib(const char *file, void *base)
{
    void *bound = util_load_acquire(&lib_base);
    if (bound)
        return bound == base ? 0 : -1;
    void *h = dlopen(file, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return -1;
    void *none = NULL;
    __atomic_compare_exchange_n(&lib, &none, h, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    none = NULL;
    if (!__atomic_compare_exchange_n(&lib_base, &none, base, 0, __ATOMIC_RELEASE,
                                     __ATOMIC_ACQUIRE))
        return none == base ? 0 : -1;
    return 0;
}

int nvh_bind(nvh_id_t id, void *fn)
{
    const char *file = NULL;
    void *base = base_of(fn, &file);
    if (!base || !file || is_ours(fn) || bind_lib(file, base) != 0)
        return -1;
    void *none = NULL;
    if (__atomic_compare_exchange_n(&slot[id], &none, fn, 0, __ATOMIC_RELEASE,
                                    __ATOMIC_ACQUIRE))
        return 0;
    return none == fn ? 0 : -1;
}

void *nvh_real(nvh_id_t id, int *pass, nvmlReturn_t *why)
{
    void *fn = util_load_acquire(&slot[id]);
    *pass = 0;
    if (UTIL_LIKELY(fn != NULL))
        return fn;
    nvh_dlsym_fn sym = util_load_acquire(&dlsym_real);
    void *h = util_load_acquire(&lib);
    int opened = 0;
    if (!h) {
        /* A program linked to NVML: it is loaded already, or there is none. */
        h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
        opened = h != NULL;
    }
    if (!h || !sym) {
        *why = NVML_ERROR_UNINITIALIZED;
        return NULL;
    }
    fn = sym(h, nvh_names[id]);
    if (opened)
        dlclose(h);                 /* nvh_bind holds its own reference */
    if (!fn) {
        *why = NVML_ERROR_FUNCTION_NOT_FOUND;
        return NULL;
    }
    if (nvh_bind(id, fn) != 0) {
        static int said;
        util_log_once(&said, UTIL_LOG_WARN,
                      "NVML: %s found in another library than the NVML already in use: "
                      "not virtualized, passed through", nvh_names[id]);
        *pass = 1;                  /* the caller calls fn, and keeps its answer */
        return fn;
    }
    return fn;
}

void *nvh_real_other(const char *name)
{
    nvh_dlsym_fn sym = util_load_acquire(&dlsym_real);
    void *h = util_load_acquire(&lib);
    return h && sym ? sym(h, name) : NULL;
}

/* ---- the test seam ---------------------------------------------------------- */

void nvh_reset(void)
{
    for (int i = 0; i < NVH_IDS; i++)
        util_store_release(&slot[i], NULL);
    util_store_release(&lib_base, NULL);
    util_store_release(&lib, NULL);
}
