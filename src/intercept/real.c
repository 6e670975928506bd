/*
 * real.c - the real driver: loaded on first need, and the table of its
 * functions that every wrapper forwards to.
 *
 * Divided into: glibc's dlsym; the lazy stubs (the table's initial
 * contents); loading the driver and filling the table; the driver contract;
 * the test seam.
 *
 * The driver is never loaded in a process that does not use CUDA: LD_PRELOAD
 * reaches every program a shell starts.  The first wrapper called (or the
 * first dlsym of a wrapped name, or the first cuGetProcAddress) goes through
 * a stub, which loads the driver: SALUS_REAL_LIBCUDA=<path> if set, else
 * libcuda.so.1, already loaded (RTLD_NOLOAD) or found the usual way.
 *
 * Locking: load_lock serializes loading and the seam; load_state is written
 * under it with release stores and read with acquire loads, so a thread that
 * sees it set also sees the table it guards.  Table slots: see intercept.h.
 * hook_dlsym_next is written with the same value by whichever thread first
 * needs it (relaxed: a single aligned pointer).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* ---- glibc's dlsym ----------------------------------------------------------
 * Found once with dlvsym: __libc_dlsym and _dl_sym are gone since glibc
 * 2.34, and calling dlsym here would reach our own override. */

typedef void *(*dlsym_fn_t)(void *, const char *);

/* Read by the dlsym trampoline; set before hook_dlsym_decide returns. */
__attribute__((used)) void *hook_dlsym_next;

static void *dlsym_unavailable(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    return NULL;
}

#if defined(__x86_64__)
#define DLSYM_OLD_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define DLSYM_OLD_VERSION "GLIBC_2.17"
#else
#define DLSYM_OLD_VERSION NULL
#endif

static void *dlsym_find_real(void)
{
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!f && DLSYM_OLD_VERSION)
        f = dlvsym(RTLD_NEXT, "dlsym", DLSYM_OLD_VERSION);
    if (!f) {
        static int said;
        util_log_once(&said, UTIL_LOG_ERROR,
                      "cannot find the C library's dlsym (dlvsym: GLIBC_2.34, %s): every "
                      "dlsym lookup returns NULL. libsalus needs glibc; remove it from "
                      "LD_PRELOAD on this system", DLSYM_OLD_VERSION ? DLSYM_OLD_VERSION : "-");
        f = (void *)dlsym_unavailable;
    }
    return f;
}

static inline dlsym_fn_t dlsym_next(void)
{
    void *f = util_load_relaxed(&hook_dlsym_next);
    if (UTIL_UNLIKELY(f == NULL)) {
        f = dlsym_find_real();
        util_store_relaxed(&hook_dlsym_next, f);
    }
    return (dlsym_fn_t)f;
}

void hook_dlsym_ready(void)
{
    dlsym_next();
}

void *hook_dlsym_real(void *handle, const char *name)
{
    return dlsym_next()(handle, name);
}

/* ---- the lazy stubs ------------------------------------------------------ */

/* Bind id: load the driver if need be.  CUDA_SUCCESS when the slot now holds
 * the driver's function, CUDA_ERROR_NOT_INITIALIZED when there is no driver,
 * CUDA_ERROR_NOT_FOUND when the driver lacks the export. */
static CUresult real_bind(hook_id_t id);

#define LAZY_(cat, export, ...)                                               \
    static CUresult CUDAAPI lazy_##export CU_PARAMS_##export                  \
    {                                                                         \
        CUresult rc = real_bind(HOOK_##export);                               \
        if (rc != CUDA_SUCCESS)                                               \
            return rc;                                                        \
        return HOOK_REAL(export) CU_ARGS_##export;                            \
    }
HOOK_LIST(LAZY_)

#define LAZY_SLOT_(cat, export, ...) .f_##export = lazy_##export,
static const hook_real_t real_lazy = { .fn = { HOOK_LIST(LAZY_SLOT_) } };

hook_real_t hook_real = { .fn = { HOOK_LIST(LAZY_SLOT_) } };

/* ---- loading ------------------------------------------------------------- */

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_state;              /* 0 not tried, 1 loaded, -1 failed */
static void *driver;                /* under load_lock; NULL with a fake table */
static __thread int loading;        /* this thread holds load_lock, loading */

static void *real_open(const char **what)
{
    const char *path = util_var_text(UTIL_VAR_REAL_LIBCUDA);
    if (path) {
        *what = path;
        return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    *what = "libcuda.so.1";
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? h : dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
}

/* libsalus's own span of addresses: from its lowest loaded segment to the
 * end of its highest (the loader reserves the span whole, so nothing else
 * lies between).  Found once per fill with dl_iterate_phdr, not by a dladdr
 * per export: dladdr scans the object's symbol table for the nearest
 * symbol, and two of them for each of the hundreds of wrapped exports were
 * most of a process's start-up. */
typedef struct span {
    uintptr_t here, lo, hi;
} span_t;

static int span_of_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    span_t *s = arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (s->here < lo || s->here >= hi)
        return 0;
    s->lo = lo;
    s->hi = hi;
    return 1;
}

/* Our span in *out (empty when the loader does not say: then nothing is
 * taken for ours, as dladdr failing did). */
static void span_find(span_t *out)
{
    static const char here = 0;
    span_t s = { (uintptr_t)&here, 0, 0 };
    if (dl_iterate_phdr(span_of_object, &s) != 1)
        s.lo = s.hi = 0;
    *out = s;
}

static int is_ours(const span_t *mine, void *fn)
{
    return (uintptr_t)fn >= mine->lo && (uintptr_t)fn < mine->hi;
}

/* Fill the table from h.  -1 if h is libsalus itself (its symbols are our
 * wrappers: forwarding to them would recurse). */
static int real_fill(void *h, const char *what)
{
    void *fn[HOOK_COUNT];
    span_t mine;
    span_find(&mine);
    for (int i = 0; i < HOOK_COUNT; i++) {
        fn[i] = hook_dlsym_real(h, hook_names[i]);
        if (fn[i] && is_ours(&mine, fn[i])) {
            util_error("the CUDA driver %s is libsalus itself; CUDA calls fail with "
                       "CUDA_ERROR_NOT_INITIALIZED. Set SALUS_REAL_LIBCUDA to the "
                       "path of the real libcuda.so.1", what);
            return -1;
        }
    }
    int missing = 0;
    for (int i = 0; i < HOOK_COUNT; i++) {
        if (fn[i])
            util_store_release(&hook_real.slot[i], fn[i]);
        else
            missing++;
    }
    /* The one line SALUS_LOG=info shows at start: proof that the driver's
     * calls go through libsalus. */
    util_info("intercepting CUDA driver %s (%d of %d wrapped exports present)",
              what, HOOK_COUNT - missing, HOOK_COUNT);
    return 0;
}

/* Under load_lock. */
static int real_load_locked(void)
{
    const char *what;
    void *h = real_open(&what);
    if (!h) {
        const char *why = dlerror();
        util_error("cannot load the CUDA driver %s: %s. CUDA calls fail with "
                   "CUDA_ERROR_NOT_INITIALIZED. Install the NVIDIA driver, or set "
                   "SALUS_REAL_LIBCUDA to the path of libcuda.so.1",
                   what, why ? why : "not found");
        return -1;
    }
    if (real_fill(h, what) != 0)
        return -1;
    driver = h;
    return 1;
}

/* fork(): the loader's lock is the first the library takes (util.h's order);
 * the child keeps what was loaded, and makes the lock anew. */
static void load_prefork(void)
{
    pthread_mutex_lock(&load_lock);
}

static void load_postfork_parent(void)
{
    pthread_mutex_unlock(&load_lock);
}

static void load_postfork_child(void)
{
    pthread_mutex_init(&load_lock, NULL);
}

static void load_fork_register(void)
{
    util_fork_register(UTIL_FORK_LOADER, load_prefork, load_postfork_parent,
                       load_postfork_child);
}

int hook_real_load(void)
{
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    int state = util_load_acquire(&load_state);
    if (UTIL_LIKELY(state != 0))
        return state > 0 ? 0 : -1;
    if (loading)       /* the driver's constructor called back into us */
        return -1;
    pthread_once(&fork_once, load_fork_register);
    pthread_mutex_lock(&load_lock);
    state = load_state;
    if (state == 0) {
        loading = 1;
        state = real_load_locked();
        loading = 0;
        util_store_release(&load_state, state);
    }
    pthread_mutex_unlock(&load_lock);
    return state > 0 ? 0 : -1;
}

void *hook_real_handle(void)
{
    if (util_load_acquire(&load_state) <= 0)
        return NULL;
    return driver;
}

static CUresult real_bind(hook_id_t id)
{
    if (hook_real_load() != 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (util_load_acquire(&hook_real.slot[id]) == real_lazy.slot[id]) {
        static int said[HOOK_COUNT];
        util_log_once(&said[id], UTIL_LOG_WARN,
                      "the CUDA driver has no %s: the call fails with CUDA_ERROR_NOT_FOUND "
                      "(is the driver older than the program?)", hook_names[id]);
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}

/* ---- the driver contract ---------------------------------------------------- */

static void *drv_sym(const char *name)
{
    void *h = hook_real_handle();
    return h ? hook_dlsym_real(h, name) : NULL;
}

int hook_real_drv(drv_t *out)
{
    return hook_real_handle() ? drv_resolve(drv_sym, out) : -1;
}

/* ---- the test seam -------------------------------------------------------- */

void hook_real_install(const hook_real_t *fake)
{
    pthread_mutex_lock(&load_lock);
    for (int i = 0; i < HOOK_COUNT; i++)
        __atomic_store_n(&hook_real.slot[i], fake->slot[i] ? fake->slot[i] : real_lazy.slot[i],
                         __ATOMIC_RELEASE);
    driver = NULL;
    util_store_release(&load_state, 1);
    pthread_mutex_unlock(&load_lock);
}

void hook_real_reset(void)
{
    pthread_mutex_lock(&load_lock);
    for (int i = 0; i < HOOK_COUNT; i++)
        util_store_release(&hook_real.slot[i], real_lazy.slot[i]);
    driver = NULL;
    util_store_release(&load_state, 0);
    pthread_mutex_unlock(&load_lock);
}
