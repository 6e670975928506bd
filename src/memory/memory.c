/*
 * memory.c - the process's side of memory admission: start-up (the
 * environment, the driver table, the table), the registration of each
 * device it uses, fork, and the allocation and free paths.
 *
 * Divided into: configuration; start-up; devices (ordinal -> the table's
 * device, its budget and this process's limit); fork; allocations and frees;
 * admission.
 *
 * Locking.  mem_p.lock (a process mutex) guards start-up and registration;
 * the table's lock guards what registration writes in the table.  A
 * registered device is published by a release store of mem_local_dev_t.sd,
 * read with an acquire load on the fast path, so every other field of it is
 * seen written.  The fast path takes no lock: one driver call for the
 * current device, one CAS on the process's own spare, the map's stripe lock.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1ull << 20)
#define GIB (1ull << 30)

/* One admission at a time per process (a job never waits on itself). */
static pthread_mutex_t admit_lock = PTHREAD_MUTEX_INITIALIZER;

enum { OP_PASS = 0, OP_ALLOC = 1, OP_FREE = 2 };

/* ---- configuration -------------------------------------------------------
 * Sizes are checked once here by the one list's rules (a bad one is said
 * once, and ignored); percentages are resolved per device at registration. */

static void read_config(mem_config_t *c)
{
    long ms = util_vars[UTIL_VAR_MEM_WAIT_MS].def;
    memset(c, 0, sizeof *c);
    c->limit = util_var_text(UTIL_VAR_MEM_LIMIT);
    c->reserve = util_var_text(UTIL_VAR_MEM_RESERVE);
    c->headroom_text = util_var_text(UTIL_VAR_MEM_HEADROOM);
    util_var_long(UTIL_VAR_MEM_WAIT_MS, &ms);          /* unset or invalid: the default */
    c->wait_ns = (uint64_t)ms * 1000000ull;
    int swap = 0;
    util_var_choice(UTIL_VAR_SWAP, &swap);             /* off unless on */
    c->swap = swap == 1;
}

/* The default headroom: 5% of the capacity, within 256 MiB .. 4 GiB, and
 * never more than half the device.  SALUS_MEM_HEADROOM (per device, or
 * one for all) replaces it where it names this ordinal. */
static uint64_t headroom_of(int ordinal, uint64_t capacity)
{
    uint64_t h = capacity / 20;
    if (mem_p.cfg.headroom_text) {
        uint64_t v;
        int r = util_parse_size_at(mem_p.cfg.headroom_text, ordinal, capacity, &v);
        if (r == 0 && v < capacity)
            return v;
        if (r == 1)
            goto deflt;
        util_error("SALUS_MEM_HEADROOM=\"%s\" leaves nothing of a device of %s; "
                   "the default is used", mem_p.cfg.headroom_text, util_size(capacity).s);
    }
deflt:
    h = h < 256 * MIB ? 256 * MIB : h > 4 * GIB ? 4 * GIB : h;
    return mem_umin(h, capacity / 2);
}

/* ---- start-up ----------------------------------------------------------- */

static void fork_register(void);

static int start(const drv_t *drv, shm_table_t *t)
{
    if (!drv || !drv->ctx_get_device || !drv->device_total_mem) {
        util_error("memory: the driver lacks cuCtxGetDevice or cuDeviceTotalMem_v2; "
                   "allocations pass through without limits");
        return -1;
    }
    mem_p.drv = *drv;
    read_config(&mem_p.cfg);
    if (!t)
        t = shm_process_table();
    if (!t)
        return -1;                    /* the table said why */
    mem_p.t = t;
    shm_set_hooks(t, SHM_AREA_MEM, mem_reap_hook, mem_repair_hook, NULL);
    shm_set_check(t, SHM_AREA_MEM, mem_check_hook);
    return 0;
}

int mem_init(const drv_t *drv, shm_table_t *t)
{
    static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
    pthread_once(&fork_once, fork_register);     /* before the first lock */
    pthread_mutex_lock(&mem_p.lock);
    int mode = util_load_acquire(&mem_p.mode);
    if (mode == MEM_OFF) {
        mode = start(drv, t) == 0 ? MEM_ON : MEM_OPEN;
        util_store_release(&mem_p.mode, mode);
    }
    pthread_mutex_unlock(&mem_p.lock);
    return mode == MEM_ON ? 0 : -1;
}

/* ---- devices ------------------------------------------------------------
 * The table knows devices by uuid, so that processes that see them under
 * other ordinals (CUDA_VISIBLE_DEVICES) share one budget. */

static int own_slot(void)
{
    static int said_full;
    int self = shm_self(mem_p.t);
    if (self < 0) {
        util_log_once(&said_full, UTIL_LOG_ERROR, "memory: no slot in the table; "
                      "allocations pass through without limits");
        return -1;
    }
    if (self != mem_p.slot || !mem_p.area) {
        mem_p.slot = self;
        mem_p.area = shm_slot_area(mem_p.t, self, SHM_AREA_MEM);
    }
    return 0;
}

static int device_capacity(CUdevice ord, uint64_t *capacity)
{
    static int said;
    size_t bytes = 0;
    CUresult rc = mem_p.drv.device_total_mem(&bytes, ord);
    if (rc != CUDA_SUCCESS || bytes == 0 || (uint64_t)bytes > MEM_MAX_BYTES) {
        util_log_once(&said, UTIL_LOG_ERROR, "memory: cuDeviceTotalMem_v2 of device %d "
                      "answered %d (%s); its allocations pass through without limits",
                      (int)ord, (int)rc, util_size(bytes).s);
        return -1;
    }
    *capacity = bytes;
    return 0;
}

/* Table device d's area, set up if new; under the lock. */
static void setup_device_locked(int d)
{
    mem_dev_t *dev = shm_device_area(mem_p.t, d, SHM_AREA_MEM);
    if (util_load_acquire(&dev->magic) != MEM_DEV_MAGIC) {
        memset(dev, 0, sizeof *dev);
        util_store_release(&dev->magic, MEM_DEV_MAGIC);
    }
}

/* Set the budget when no live process is registered on d (the first comes,
 * or all have gone); otherwise keep the one in force.  Under the lock. */
static void settle_budget_locked(int d, int ordinal, uint64_t capacity)
{
    mem_dev_t *dev = shm_device_area(mem_p.t, d, SHM_AREA_MEM);
    int others = 0;
    for (int j = 0; j < SHM_MAX_SLOTS && !others; j++) {
        if (j == mem_p.slot || shm_slot_gen(mem_p.t, j) == 0)
            continue;
        mem_slot_t *a = shm_slot_area(mem_p.t, j, SHM_AREA_MEM);
        others = (util_load_relaxed(&a->dev[d].flags) & MEM_SDEV_REGISTERED) != 0;
    }
    uint64_t headroom = headroom_of(ordinal, capacity);
    if (!others || dev->budget == 0 || dev->budget > dev->capacity ||
        dev->capacity > MEM_MAX_BYTES) {
        dev->capacity = capacity;
        dev->headroom = headroom;
        util_store_relaxed(&dev->budget, capacity - headroom);
    } else if (dev->headroom != headroom || dev->capacity != capacity) {
        util_info("memory: CUDA device %d keeps the budget of the processes already on "
                  "it (%s, headroom %s), not this process's (headroom %s)", ordinal,
                  util_size(dev->budget).s, util_size(dev->headroom).s, util_size(headroom).s);
    }
}

/* This process's limit on CUDA ordinal `ordinal`, a device of that budget:
 * SALUS_MEM_LIMIT's value for it (per device, or one for all), else the
 * budget. */
static uint64_t limit_of(int ordinal, uint64_t budget)
{
    uint64_t v;
    if (!mem_p.cfg.limit || util_parse_size_at(mem_p.cfg.limit, ordinal, budget, &v) != 0 ||
        v == 0)
        return budget;
    if (v > budget) {
        static int said;
        util_log_once(&said, UTIL_LOG_INFO, "memory: SALUS_MEM_LIMIT=%s is more than the "
                      "device's budget of %s: the budget is the limit",
                      mem_p.cfg.limit, util_size(budget).s);
        return budget;
    }
    return v;
}

/* How messages name ordinal `ord`: the CUDA ordinal the program sees and
 * the uuid nvidia-smi -L prints (a table index would mean nothing to it). */
static void name_device(CUdevice ord, char *buf, size_t len)
{
    static const int dash_after[4] = { 4, 6, 8, 10 };
    uint8_t uuid[16];
    drv_device_uuid(&mem_p.drv, (int)ord, uuid);
    size_t at = (size_t)snprintf(buf, len, "CUDA device %d", (int)ord);
    if (memcmp(uuid, "ordinal:", 8) == 0 || at + 45 >= len)
        return;
    at += (size_t)snprintf(buf + at, len - at, " (GPU-");
    for (int i = 0, k = 0; i < 16; i++) {
        if (k < 4 && i == dash_after[k]) {
            buf[at++] = '-';
            k++;
        }
        at += (size_t)snprintf(buf + at, len - at, "%02x", uuid[i]);
    }
    snprintf(buf + at, len - at, ")");
}

static mem_local_dev_t *register_locked(CUdevice ord)
{
    mem_local_dev_t *ld = &mem_p.dev[ord];
    uint64_t capacity;
    if (ld->sd || ld->failed)
        return ld->sd ? ld : NULL;
    if (!ld->name[0])
        name_device(ord, ld->name, sizeof ld->name);
    if (own_slot() != 0) {
        util_store_release(&mem_p.mode, MEM_OPEN);
        return NULL;
    }
    if (device_capacity(ord, &capacity) != 0) {
        ld->failed = 1;
        return NULL;
    }
    int d = shm_device_of(mem_p.t, &mem_p.drv, (int)ord);   /* sched shares the index */
    if (d == -2) {                    /* the lock: mem_lock says so, or it came back */
        if (mem_lock() == 0)
            shm_unlock(mem_p.t);
        return NULL;
    }
    if (d >= 0 && mem_lock() != 0)
        return NULL;
    if (d < 0) {
        ld->failed = 1;
        static int said;
        util_log_once(&said, UTIL_LOG_ERROR, "memory: the table knows %d devices already; "
                      "device %d passes through without limits", SHM_MAX_DEVICES, (int)ord);
        return NULL;
    }
    setup_device_locked(d);
    settle_budget_locked(d, (int)ord, capacity);
    mem_dev_t *dev = shm_device_area(mem_p.t, d, SHM_AREA_MEM);
    mem_sdev_t *sd = &mem_p.area->dev[d];
    uint64_t budget = dev->budget;
    util_store_relaxed(&sd->limit, limit_of((int)ord, budget));
    ld->lim_set = ld->lim_seen = util_load_relaxed(&sd->limit);
    util_store_relaxed(&ld->granted_own, util_load_relaxed(&sd->granted));
    ld->tag_seen = MEM_TAG(util_load_relaxed(&sd->avail));   /* owncheck.c's record */
    util_store_relaxed(&ld->lim_hold, 0);
    if (mem_p.slot >= 0 && mem_p.slot < SHM_MAX_SLOTS)   /* a former slot's charge */
        util_store_relaxed(&dev->ctx_kib[mem_p.slot], 0);
    util_or_relaxed(&sd->flags, MEM_SDEV_REGISTERED);
    util_store_relaxed(&mem_p.area->magic, MEM_SLOT_MAGIC);
    mem_publish_locked(mem_p.t, d);
    shm_unlock(mem_p.t);
    mem_page_flags_apply();           /* whether peers may ask it to page out */

    ld->d = d;
    ld->dev = dev;
    ld->chunk = budget / 64 < MIB ? MIB : budget / 64 > 64 * MIB ? 64 * MIB : budget / 64;
    ld->shrink_at = 2 * ld->chunk;
    mem_p.by_index[d] = ld;
    util_store_release(&ld->sd, sd);
    util_or_release(&mem_p.registered_set, 1u << d);
    return ld;
}

static void ctx_measure(mem_local_dev_t *ld, int ordinal);

/* The registered device of an ordinal (MEM_DEV_CURRENT: the current
 * context's), or NULL when it passes through uncounted. */
static mem_local_dev_t *local_dev(int device)
{
    CUdevice ord = device;
    if (device == MEM_DEV_CURRENT && mem_p.drv.ctx_get_device(&ord) != CUDA_SUCCESS)
        return NULL;
    if (ord < 0 || ord >= MEM_MAX_ORDINALS)
        return NULL;
    mem_local_dev_t *ld = &mem_p.dev[ord];
    if (__builtin_expect(util_load_acquire(&ld->sd) != NULL, 1))
        return ld;
    pthread_mutex_lock(&mem_p.lock);
    ld = register_locked(ord);
    pthread_mutex_unlock(&mem_p.lock);
    if (ld)
        ctx_measure(ld, (int)ord);          /* its contexts made before */
    return ld;
}

mem_local_dev_t *mem_local_dev(int device)
{
    if (util_load_acquire(&mem_p.mode) != MEM_ON)
        return NULL;
    return local_dev(device);
}

/* ---- fork ------------------------------------------------------------------
 * The child inherits no accounting: no slot (shm_self claims one when it
 * first allocates), no registered device, an empty map.  Before the fork
 * the start-up lock and every stripe of the map are taken (util.h's order:
 * mem_p.lock, then the stripes in index order), so that the copy has no
 * registration or map update half done; the child makes them anew.
 * admit_lock is not taken: it is held across an admission wait, which may
 * last as long as peers keep their memory, and a fork must not wait for
 * that; the child, which inherits no admission, makes it anew. */
static void prefork(void)
{
    pthread_mutex_lock(&mem_p.lock);
    for (int k = 0; k < MEM_STRIPES; k++)
        mem_stripe_lock(&mem_stripes[k]);
    mem_vmm_prefork();
}

static void postfork_parent(void)
{
    mem_vmm_postfork(0);
    for (int k = MEM_STRIPES - 1; k >= 0; k--)
        mem_stripe_unlock(&mem_stripes[k]);
    pthread_mutex_unlock(&mem_p.lock);
}

static void postfork_child(void)
{
    pthread_mutex_init(&mem_p.lock, NULL);
    pthread_mutex_init(&admit_lock, NULL);
    mem_p.slot = -1;
    mem_p.area = NULL;
    for (int i = 0; i < MEM_MAX_ORDINALS; i++)
        memset(&mem_p.dev[i], 0, sizeof mem_p.dev[i]);
    memset(mem_p.by_index, 0, sizeof mem_p.by_index);
    mem_p.registered_set = 0;
    memset(mem_p.pools, 0, sizeof mem_p.pools);   /* its pools are its parent's */
    memset(mem_p.cur_pool, 0, sizeof mem_p.cur_pool);
    mem_p.pools_used = 0;
    memset(mem_p.graph_charged, 0, sizeof mem_p.graph_charged);
    mem_p.graph_mask = 0;
    pthread_mutex_init(&mem_p.graph_lock, NULL);
    mem_p.created = 0;                /* contexts are not inherited */
    mem_p.ctx_peak = 0;
    mem_map_reset();                  /* the stripes, unlocked and empty */
    mem_vmm_postfork(1);
}

static void fork_register(void)
{
    util_fork_register(UTIL_FORK_MEMORY, prefork, postfork_parent, postfork_child);
}

/* ---- allocations and frees ---------------------------------------------- */

static int is_on(void)
{
    return __builtin_expect(util_load_acquire(&mem_p.mode) == MEM_ON, 1);
}

int mem_stream_device(CUstream stream)
{
    CUdevice ord = -1;
    if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ||
        !is_on() || !mem_p.drv.stream_get_device ||
        mem_p.drv.stream_get_device(stream, &ord) != CUDA_SUCCESS ||
        ord < 0 || ord >= MEM_MAX_ORDINALS)
        return MEM_DEV_CURRENT;
    return (int)ord;
}

static inline __attribute__((always_inline)) mem_take_t charge(mem_local_dev_t *ld,
                                                                uint64_t bytes, unsigned flags)
{
    uint64_t spare;
    if (bytes > MEM_MAX_BYTES)
        return MEM_TAKE_REFUSED;
    if (__builtin_expect(mem_p.cfg.reserve != NULL, 0) &&
        util_load_acquire(&ld->admitted) <= 0 &&
        mem_admit((CUdevice)(ld - mem_p.dev)) != CUDA_SUCCESS)   /* the first allocation here */
        return MEM_TAKE_REFUSED;
    if (__builtin_expect(mem_take_fast(ld->sd, bytes, &spare), 1)) {
        mem_took(ld, bytes);
        return MEM_TAKEN;
    }
    mem_take_t r = mem_take_slow(ld, bytes, 0, flags);
    if (r == MEM_TAKE_ASK_DRIVER) {         /* near the capacity: ask the driver */
        mem_drv_refresh(ld, (int)(ld - mem_p.dev));
        r = mem_take_slow(ld, bytes, 1, flags);
    }
    return r;
}

mem_take_t mem_charge(mem_local_dev_t *ld, uint64_t bytes, unsigned flags)
{
    return charge(ld, bytes, flags);
}

CUresult mem_alloc_begin(mem_kind_t kind, int device, uint64_t bytes, mem_op_t *op)
{
    op->state = OP_PASS;
    op->dev = -1;
    op->pool = 0;
    op->refused_at = 0;
    if (!is_on() || bytes == 0 || (unsigned)kind >= MEM_KINDS || device == MEM_DEV_NONE)
        return CUDA_SUCCESS;
    if (__builtin_expect(util_load_relaxed(&mem_p.suspended), 0))
        mem_resume_try();             /* the lock timed out once: is it back? */
    mem_local_dev_t *ld = local_dev(device);
    if (!ld)
        return CUDA_SUCCESS;
    mem_take_t r = charge(ld, bytes, 0);
    if (r != MEM_TAKEN)
        return mem_take_cu(r);        /* refused, or uncounted (the lock is unusable) */
    op->bytes = bytes;
    op->dev = ld->d;
    op->kind = (uint16_t)kind;
    op->state = OP_ALLOC;
    return CUDA_SUCCESS;
}

/* What an entry freed (or forgotten) gives back: its bytes to the grant, or
 * to its pool, which keeps them until the driver says it released them. */
void mem_entry_released(const mem_entry_t *e)
{
    if (e->pool) {
        mem_pool_put(e->pool, e->bytes);
        return;
    }
    mem_local_dev_t *ld = mem_p.by_index[e->dev];
    if (ld)
        mem_give(ld, e->bytes);
}

/* Undo an allocation the driver made but we cannot keep. */
static void driver_undo(int cls, uint64_t handle)
{
    const drv_t *drv = &mem_p.drv;
    if (cls == MEM_CLS_PTR && drv->mem_free)
        drv->mem_free((CUdeviceptr)handle);
    else if (cls == MEM_CLS_VMM && drv->mem_release)
        drv->mem_release((CUmemGenericAllocationHandle)handle);
    else if (cls == MEM_CLS_ARRAY && drv->array_destroy)
        drv->array_destroy((CUarray)(uintptr_t)handle);
}

/* A pitched allocation at its true size: 0, or -1 when what it takes
 * beyond the bound is refused.  When that charge passes uncounted (the
 * table's lock is unusable) the allocation stands, accounted at the bound
 * it was charged: fail open, as every call from then on. */
static int pitch_true_size(mem_local_dev_t *ld, mem_op_t *op, uint64_t ptr)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    uint64_t spare;
    if (!mem_p.drv.mem_get_address_range ||
        mem_p.drv.mem_get_address_range(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS ||
        base != (CUdeviceptr)ptr || size == 0 || (uint64_t)size > MEM_MAX_BYTES)
        return 0;                     /* unknown: the bound stays */
    if (size < op->bytes) {
        mem_give(ld, op->bytes - size);
    } else if (size > op->bytes) {
        uint64_t more = size - op->bytes;
        int fast = mem_take_fast(ld->sd, more, &spare);
        mem_take_t r = fast ? (mem_took(ld, more), MEM_TAKEN) : mem_take_slow(ld, more, 1, 0);
        if (r == MEM_TAKE_REFUSED)
            return -1;
        if (r == MEM_TAKE_UNCOUNTED)
            return 0;                 /* the bound stays what is given back */
    }
    op->bytes = size;
    return 0;
}

int mem_alloc_retry(mem_op_t *op)
{
    if (op->state != OP_ALLOC || !is_on())
        return 0;
    mem_local_dev_t *ld = mem_p.by_index[op->dev];
    return ld ? mem_drv_retry(ld, (int)(ld - mem_p.dev), op->bytes, &op->refused_at) : 0;
}

CUresult mem_alloc_end(mem_op_t *op, CUresult rc, uint64_t handle)
{
    if (op->state != OP_ALLOC)
        return rc;
    op->state = OP_PASS;
    mem_local_dev_t *ld = mem_p.by_index[op->dev];
    if (!ld)
        return rc;
    if (rc != CUDA_SUCCESS || handle == 0) {
        mem_give(ld, op->bytes);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY)  /* the driver knew of more: read it */
            mem_drv_refresh(ld, (int)(ld - mem_p.dev));
        return rc;
    }
    if (op->refused_at)               /* what held it is gone: the foreign use too */
        mem_drv_refresh(ld, (int)(ld - mem_p.dev));
    int cls = mem_kind_class((mem_kind_t)op->kind);
    if (op->kind == MEM_KIND_PITCH && pitch_true_size(ld, op, handle) != 0)
        goto out_undo;
    mem_entry_t e = { .key = handle, .bytes = op->bytes, .dev = (int16_t)op->dev,
                      .cls = (uint8_t)cls, .kind = (uint8_t)op->kind }, old;
    int r = mem_map_insert(&e, &old);
    if (r == 1)
        mem_entry_released(&old);
    if (r >= 0)
        return rc;
    static int said;
    util_log_once(&said, UTIL_LOG_ERROR, "memory: out of host memory to record an "
                  "allocation; it is refused (CUDA_ERROR_OUT_OF_MEMORY)");
out_undo:
    driver_undo(cls, handle);
    mem_give(ld, op->bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void mem_free_begin(mem_kind_t kind, uint64_t handle, mem_op_t *op)
{
    mem_entry_t e;
    op->state = OP_PASS;
    if (!is_on() || handle == 0 || (unsigned)kind >= MEM_KINDS)
        return;
    if (mem_map_remove(mem_kind_class(kind), handle, &e) != 0)
        return;                       /* not ours: the driver decides */
    op->bytes = e.bytes;
    op->handle = handle;
    op->dev = e.dev;
    op->kind = e.kind;
    op->pool = e.pool;
    op->state = OP_FREE;
}

void mem_free_end(mem_op_t *op, CUresult rc)
{
    if (op->state != OP_FREE)
        return;
    if (__builtin_expect(util_load_relaxed(&mem_p.suspended), 0))
        mem_resume_try();
    op->state = OP_PASS;
    mem_local_dev_t *ld = mem_p.by_index[op->dev];
    if (rc == CUDA_SUCCESS) {
        if (op->pool)
            mem_pool_put(op->pool, op->bytes);
        else if (op->kind == MEM_KIND_VMM && mem_vmm_keep(op->handle, op->bytes, op->dev))
            ;                         /* still mapped: charged until its last unmap */
        else if (ld)
            mem_give(ld, op->bytes);
        return;
    }
    /* The driver kept it: so do we. */
    mem_entry_t e = { .key = op->handle, .bytes = op->bytes, .dev = (int16_t)op->dev,
                      .cls = (uint8_t)mem_kind_class((mem_kind_t)op->kind),
                      .kind = (uint8_t)op->kind, .pool = op->pool };
    if (mem_map_insert(&e, NULL) < 0)
        mem_entry_released(&e);       /* cannot track it any more: forget it */
}

/* ---- contexts that went away ---------------------------------------------
 * No lock is held while the driver is asked: the map is copied, each entry
 * checked, and those gone removed by key (a concurrent free of the same
 * entry removes it once: whoever removes it gives its bytes back). */

static int entry_gone(const mem_entry_t *e)
{
    const drv_t *drv = &mem_p.drv;
    if (e->cls == MEM_CLS_PTR && drv->pointer_get_attribute) {
        CUcontext ctx = NULL;
        return drv->pointer_get_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT,
                                          (CUdeviceptr)e->key) == CUDA_ERROR_INVALID_VALUE;
    }
    if (e->cls == MEM_CLS_ARRAY && drv->array_get_descriptor) {
        CUDA_ARRAY_DESCRIPTOR desc;
        return drv->array_get_descriptor(&desc, (CUarray)(uintptr_t)e->key) ==
               CUDA_ERROR_INVALID_HANDLE;
    }
    return 0;                         /* VMM handles outlive contexts */
}

/* The iteration's peak is published, and the next one starts from what is
 * used now: a relaxed exchange per device (a take racing with it lands in
 * one iteration or the other, both of which count it). */
void mem_iteration_end(void)
{
    if (!is_on())
        return;
    for (uint32_t set = util_load_acquire(&mem_p.registered_set); set; set &= set - 1) {
        mem_local_dev_t *ld = mem_p.by_index[__builtin_ctz(set)];
        mem_sdev_t *sd = ld->sd;
        uint64_t used = util_load_relaxed(&ld->charged);   /* its own count (owncheck.c) */
        uint64_t peak = util_xchg_relaxed(&ld->iter_peak, used);
        util_store_relaxed(&sd->run_peak, peak > used ? peak : used);
        if (__builtin_expect(util_load_relaxed(&ld->lim_hold) != 0, 0) &&
            mem_live_limit_iteration(ld, peak > used ? peak : used, mem_own_ctx(ld->d)))
            mem_shrink(ld);           /* its spare above what it may hold goes back */
    }
    mem_own_check_soon();             /* its words as it left them? (owncheck.c) */
}

void mem_context_gone(CUdevice device)
{
    if (!is_on())
        return;
    int d = -1;
    if (device >= 0) {
        if (device >= MEM_MAX_ORDINALS || !util_load_acquire(&mem_p.dev[device].sd))
            return;
        d = mem_p.dev[device].d;
    }
    mem_entry_t *v, e;
    size_t n = mem_map_snapshot(d, &v);
    for (size_t i = 0; i < n; i++) {
        if (!entry_gone(&v[i]) || mem_map_remove(v[i].cls, v[i].key, &e) != 0)
            continue;
        mem_entry_released(&e);
    }
    free(v);
}

/* ---- contexts' own memory -------------------------------------------------
 * Counted per device from the process's own calls: created contexts (their
 * device is not known at destruction, so all of them count for every
 * device) and retains of the primary context.  A context registers the
 * process's memory on its device (it takes memory there; the scheduler
 * and admission still enroll it only where it launches or allocates) and
 * is measured at once, so that the driver's reading holds this context
 * and as little else as can be.  When neither kind is left on a device,
 * what its contexts were charged there goes. */

static void ctx_measure(mem_local_dev_t *ld, int ordinal)
{
    int pending, primary;
    pthread_mutex_lock(&mem_p.lock);
    pending = ld->ctx_pending;
    primary = ld->primary_refs > 0;
    ld->ctx_pending = 0;
    pthread_mutex_unlock(&mem_p.lock);
    if (pending)
        mem_ctx_charge(ld, ordinal, primary && mem_ctx_current(ordinal) != 0 ?
                                    MEM_CHARGE_PRIMARY : MEM_CHARGE_CURRENT);
}

/* The device whose serial lock this thread holds across a context's
 * driver call and its measure (-1: none).  The lock keeps every other
 * process's context and module off that device meanwhile, so that the
 * reading holds this one alone; waited for 2 s at most (a peer that long
 * in the driver), then the measure is made without it. */
#define MEM_SERIAL_MS 2000
static __thread int serial_dev = -1;

static int makes_memory(mem_ctx_event_t ev)
{
    return ev == MEM_CTX_CREATED || ev == MEM_CTX_RETAINED || ev == MEM_CTX_MODULE;
}

void mem_context_begin(mem_ctx_event_t ev, CUdevice device)
{
    static int said;
    if (!is_on() || !makes_memory(ev) || device < -1 || device >= MEM_MAX_ORDINALS)
        return;
    if (ev == MEM_CTX_RETAINED &&
        util_load_relaxed(&mem_p.dev[device].primary_refs) > 0)
        return;                             /* retained already: nothing is made */
    /* A reserving job is admitted before it makes its first context, not
     * after: a job queued for admission would otherwise hold a context's
     * memory on the device, and enough of them would keep the head of the
     * queue out for good.  Its contexts on other devices are admitted at
     * their first allocation (charge): JAX retains a context on every
     * visible GPU, and a reservation on each would keep peers out of
     * devices the job never allocates on. */
    if (ev != MEM_CTX_MODULE && mem_p.cfg.reserve && !mem_admitted_anywhere())
        mem_admit(device);                  /* a refusal is the allocations' to say */
    mem_local_dev_t *ld = local_dev(ev == MEM_CTX_MODULE ? MEM_DEV_CURRENT : device);
    if (!ld || serial_dev >= 0)
        return;
    /* With paging on, a context, which cannot be paged, waits for its room
     * in the policy's order (admit.c), before the serial lock. */
    if (ev != MEM_CTX_MODULE && mem_p.cfg.swap && !mem_p.cfg.reserve) {
        pthread_mutex_lock(&admit_lock);
        mem_ctx_admit(ld);
        pthread_mutex_unlock(&admit_lock);
    }
    if (shm_device_serial_lock(mem_p.t, ld->d, MEM_SERIAL_MS) == 0)
        serial_dev = ld->d;
    else
        util_log_once(&said, UTIL_LOG_INFO, "memory: a peer has been making a context on "
                      "device %d for %d ms; this one is measured beside it (the two may share "
                      "their charges unevenly)", ld->d, MEM_SERIAL_MS);
}

static void serial_end(void)
{
    if (serial_dev >= 0)
        shm_device_serial_unlock(mem_p.t, serial_dev);
    serial_dev = -1;
}

void mem_context_end(mem_ctx_event_t ev, CUdevice device, CUresult rc)
{
    if (!is_on() || device < -1 || device >= MEM_MAX_ORDINALS || rc != CUDA_SUCCESS) {
        if (is_on() && device >= 0 && device < MEM_MAX_ORDINALS &&
            util_load_acquire(&mem_p.dev[device].sd))
            mem_ctx_precharge_drop(&mem_p.dev[device]);   /* admitted, not made */
        serial_end();
        return;
    }
    if (ev == MEM_CTX_MODULE) {             /* charged where it is loaded */
        mem_local_dev_t *m = local_dev(MEM_DEV_CURRENT);
        if (m)
            mem_ctx_charge(m, (int)(m - mem_p.dev), MEM_CHARGE_MODULE);
        serial_end();
        return;
    }
    mem_local_dev_t *ld = device >= 0 ? &mem_p.dev[device] : NULL;
    pthread_mutex_lock(&mem_p.lock);
    if (ev == MEM_CTX_CREATED && ld) {
        mem_p.created++;
        ld->ctx_pending = 1;
    } else if (ev == MEM_CTX_DESTROYED && mem_p.created > 0) {
        mem_p.created--;
    } else if (ld && ev == MEM_CTX_RETAINED) {
        ld->ctx_pending |= ++ld->primary_refs == 1;
    } else if (ld && ev == MEM_CTX_RELEASED && ld->primary_refs > 0) {
        ld->primary_refs--;
    } else if (ld && ev == MEM_CTX_RESET) {
        ld->primary_refs = 0;
    }
    int created = mem_p.created;
    pthread_mutex_unlock(&mem_p.lock);
    if (ev == MEM_CTX_CREATED || ev == MEM_CTX_RETAINED) {
        if (local_dev(device))              /* registers (and measures), or: */
            ctx_measure(ld, device);
        serial_end();
        return;
    }
    if (created)
        return;
    for (int o = 0; o < MEM_MAX_ORDINALS; o++) {   /* nothing left where refs are 0 */
        mem_local_dev_t *x = &mem_p.dev[o];
        if (util_load_acquire(&x->sd) && (device < 0 || o == device) &&
            util_load_relaxed(&x->primary_refs) == 0)
            mem_ctx_uncharge(x);
    }
}

/* ---- admission ---------------------------------------------------------- */

CUresult mem_admit(CUdevice device)
{
    if (!is_on() || !mem_p.cfg.reserve || device < 0)
        return CUDA_SUCCESS;
    mem_local_dev_t *ld = local_dev(device);
    int admitted = ld ? util_load_acquire(&ld->admitted) : 1;
    if (admitted)
        return admitted > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&admit_lock);
    CUresult rc = CUDA_SUCCESS;
    if (ld->admitted) {
        rc = ld->admitted > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    uint64_t budget = util_load_relaxed(&ld->dev->budget), reserve;
    uint64_t capacity = ld->dev->capacity;
    if (util_parse_size_at(mem_p.cfg.reserve, (int)device, budget, &reserve) != 0 ||
        reserve == 0)
        goto out_admitted;                   /* none on this device */
    if (reserve > budget) {
        util_error("SALUS_MEM_RESERVE=%s asks %s, more than %s can ever give: "
                   "%s (its %s less a headroom of %s for contexts); its allocations are "
                   "refused with CUDA_ERROR_OUT_OF_MEMORY", mem_p.cfg.reserve, util_size(reserve).s,
                   ld->name, util_size(budget).s, util_size(capacity).s,
                   util_size(ld->dev->headroom).s);
        util_store_release(&ld->admitted, -1);   /* said once */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    uint64_t limit = util_load_relaxed(&ld->sd->limit);
    if (reserve > limit) {
        util_warn("SALUS_MEM_RESERVE=%s is more than this process's limit "
                  "(SALUS_MEM_LIMIT=%s, %s): %s is reserved",
                  mem_p.cfg.reserve, mem_p.cfg.limit ? mem_p.cfg.limit : "",
                  util_size(limit).s, util_size(limit).s);
        reserve = limit;
    }
    rc = mem_admit_wait(ld, reserve);
out_admitted:
    if (rc == CUDA_SUCCESS)
        util_store_release(&ld->admitted, 1);
out_unlock:
    pthread_mutex_unlock(&admit_lock);
    return rc;
}
