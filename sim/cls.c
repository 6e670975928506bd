/*
 * cls.c - context-local storage (export table c693336e-...): values the
 * runtime keeps per context, by key, each with an optional destructor.
 *
 * The table has no size word: [0] put(ctx, key, value, dtor), [1]
 * delete(ctx, key), [2] get(void **value, ctx, key).  A NULL ctx means the
 * calling thread's current one; with none current (libcudart asks so before
 * any context exists) the answer is CUDA_ERROR_INVALID_CONTEXT, as for any
 * call that needs a context.  A key absent is CUDA_ERROR_NOT_FOUND for get
 * and delete (the driver's own answer is not known).  Putting a key again
 * replaces its value and destructor without running the old one.
 *
 * Destructors, dtor(ctx, key, value), run when the context goes: its
 * cuCtxDestroy, the reset or last release of a primary context, and the
 * process's exit (an atexit handler, made at the first put, so that it runs
 * before the handlers the runtime registered earlier: the runtime is still
 * whole when its destructors run).  They run while the context is still
 * valid and without any simgpu lock held, since they call the driver
 * (libcudart unloads its modules there).  A destructor that puts again is
 * served: the context's storage is emptied again, up to a few rounds.
 *
 * Divided into: entries; the table's three calls; destructors.
 *
 * Lock: sim_p.lock guards every context's list (sim_ctx_t.cls).
 */
#include "sim.h"

#include <stdlib.h>

typedef void (*cls_dtor_t)(CUcontext ctx, void *key, void *value);

struct sim_cls {
    void *key, *value;
    cls_dtor_t dtor;
    sim_cls_t *next;
};

#define DTOR_ROUNDS 4                   /* destructors that put again: rounds */

/* ---- entries ---------------------------------------------------------------------- */

/* The context h names (or the current one), under the lock. */
static CUresult cls_ctx(CUcontext h, sim_ctx_t **out)
{
    if (!h)
        return sim_ctx_require(out);
    *out = sim_ctx_get(h);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static sim_cls_t **cls_find(sim_ctx_t *c, void *key)
{
    sim_cls_t **e = &c->cls;
    while (*e && (*e)->key != key)
        e = &(*e)->next;
    return e;
}

/* ---- the table's three calls ----------------------------------------------------- */

static CUresult cls_put(CUcontext h, void *key, void *value, cls_dtor_t dtor)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_ctx_t *c;
    CUresult rc = cls_ctx(h, &c);
    if (rc == CUDA_SUCCESS) {
        sim_cls_t **e = cls_find(c, key);
        if (!*e && !(*e = calloc(1, sizeof **e)))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            (*e)->key = key;
            (*e)->value = value;
            (*e)->dtor = dtor;
        }
    }
    SIM_UNLOCK();
    return rc;
}

static CUresult cls_delete(CUcontext h, void *key)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_ctx_t *c;
    CUresult rc = cls_ctx(h, &c);
    if (rc == CUDA_SUCCESS) {
        sim_cls_t **e = cls_find(c, key), *gone = *e;
        if (!gone)
            rc = CUDA_ERROR_NOT_FOUND;
        else {
            *e = gone->next;
            free(gone);
        }
    }
    SIM_UNLOCK();
    return rc;
}

static CUresult cls_get(void **value, CUcontext h, void *key)
{
    SIM_CHECK_INIT();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *c;
    CUresult rc = cls_ctx(h, &c);
    if (rc == CUDA_SUCCESS) {
        sim_cls_t *e = *cls_find(c, key);
        if (e)
            *value = e->value;
        else
            rc = CUDA_ERROR_NOT_FOUND;
    }
    SIM_UNLOCK();
    return rc;
}

static CUresult cls_refuse_3(void)
{
    return sim_export_refuse(SIM_EXPORT_CLS, 3);
}

const void *const sim_cls_table[4] = {
    (const void *)cls_put, (const void *)cls_delete, (const void *)cls_get,
    (const void *)cls_refuse_3,
};

/* ---- destructors ------------------------------------------------------------------ */

sim_cls_t *sim_cls_take(sim_ctx_t *c)
{
    sim_cls_t *list = c->cls;
    c->cls = NULL;
    return list;
}

void sim_cls_run(sim_cls_t *list, CUcontext h)
{
    while (list) {
        sim_cls_t *next = list->next;
        if (list->dtor)
            list->dtor(h, list->key, list->value);
        free(list);
        list = next;
    }
}

void sim_cls_drop(sim_cls_t *list)
{
    while (list) {
        sim_cls_t *next = list->next;
        free(list);
        list = next;
    }
}

void sim_cls_release(CUcontext h)
{
    for (int round = 0; round < DTOR_ROUNDS; round++) {
        SIM_LOCK();
        sim_ctx_t *c = sim_ctx_get(h);
        sim_cls_t *list = c ? sim_cls_take(c) : NULL;
        SIM_UNLOCK();
        if (!list)
            return;
        sim_cls_run(list, h);
    }
}

/* The first live context with storage, or 0. */
static void first_with_cls(void *obj, void *arg)
{
    sim_ctx_t *c = obj;
    uint64_t *h = arg;
    if (!*h && c->cls && sim_ctx_get((CUcontext)(uintptr_t)c->handle))
        *h = c->handle;
}

/* At exit, every context's destructors, one context at a time.  A child of
 * fork() has no contexts (its parent's are forgotten): nothing runs there. */
static void exit_handler(void)
{
    if (!atomic_load(&sim_p.initialized))
        return;
    for (int n = 0; n < 4 * SIM_MAX_DEVICES + 256; n++) {
        uint64_t h = 0;
        SIM_LOCK();
        sim_obj_foreach(SIM_K_CTX, first_with_cls, &h);
        SIM_UNLOCK();
        if (!h)
            return;
        sim_cls_release((CUcontext)(uintptr_t)h);
    }
}

static void register_exit(void) { atexit(exit_handler); }

void sim_cls_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_exit);
}
