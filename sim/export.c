/*
 * export.c - cuGetExportTable: the private tables the CUDA runtime (and
 * cuBLASLt) asks the driver for, by UUID.
 *
 * The runtime asks for them before its first public call does anything:
 * with no table, every libcudart program stops at once.  Their layouts are
 * not documented by NVIDIA; what is served here follows what public
 * reimplementations of the driver have found (ZLUDA's dark_api, smolvm's
 * CUDA shim) and what libcudart 13.0 does with the answers (sim/README.md,
 * "The CUDA runtime", lists each table).  Every table is an array of
 * pointer-sized words; word 0 is its size in bytes, except in context-local
 * storage's, which has none.
 *
 * Divided into: refusals (unknown UUIDs, slots nobody documents); the
 * CUDART interface; the tools tables; context checks and identity;
 * cuBLASLt's table; the list of tables and cuGetExportTable.  Context-local
 * storage is cls.c, the integrity check integrity.c.
 *
 * A slot that no reimplementation documents is never NULL (a caller would
 * jump to 0): it is a function that answers CUDA_ERROR_NOT_SUPPORTED and,
 * under SIMGPU_LOG=1, says once which slot of which table was called.  An
 * unknown UUID is CUDA_ERROR_NOT_FOUND (what the runtime takes for "no such
 * table", as its skip-init probe shows), said once under SIMGPU_LOG=1;
 * its table pointer is left unwritten.
 *
 * Lock: the tables are constant, but for the context-identity one, made
 * once (pthread_once) at the first ask; the once-flags are atomics; the
 * list of unknown UUIDs already said has its own mutex (never held across
 * a call).
 */
#include "sim.h"

#include <stdatomic.h>
#include <string.h>

/* ---- refusals -------------------------------------------------------------- */

#define T_CUDART    SIM_EXPORT_CUDART
#define T_HOOKS     SIM_EXPORT_HOOKS
#define T_TLS       SIM_EXPORT_TLS
#define T_CHECKS    SIM_EXPORT_CHECKS
#define T_IDENTITY  SIM_EXPORT_IDENTITY
#define T_LT        SIM_EXPORT_LT

static const char *const table_name[SIM_EXPORT_COUNT] = {
    [SIM_EXPORT_CUDART] = "CUDART_INTERFACE", [SIM_EXPORT_HOOKS] = "TOOLS_RUNTIME_CALLBACK_HOOKS",
    [SIM_EXPORT_TLS] = "TOOLS_TLS", [SIM_EXPORT_CLS] = "CONTEXT_LOCAL_STORAGE",
    [SIM_EXPORT_CHECKS] = "CONTEXT_CHECKS", [SIM_EXPORT_INTEGRITY] = "INTEGRITY_CHECK",
    [SIM_EXPORT_IDENTITY] = "CONTEXT_IDENTITY", [SIM_EXPORT_LT] = "CUBLASLT_1734DC26",
};

/* One bit per (table, slot): said already.  Slots are below 64. */
static _Atomic uint64_t said_slot[SIM_EXPORT_COUNT];

CUresult sim_export_refuse(int table, int slot)
{
    uint64_t bit = 1ull << slot;
    if (sim_log_enabled() && !(atomic_fetch_or(&said_slot[table], bit) & bit))
        sim_note("cuGetExportTable: slot %d of %s is not implemented: CUDA_ERROR_NOT_SUPPORTED",
                 slot, table_name[table]);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* A refusing function for slot n of table t.  It reads no argument: on the
 * C calling conventions simgpu runs on (System V x86-64, AArch64) the
 * caller owns its arguments, so such a definition serves any prototype. */
#define REFUSE(t, n) static CUresult refuse_##t##_##n(void) { return sim_export_refuse(t, n); }
#define SLOT(f)      ((const void *)(f))
#define SIZE_WORD(n) ((const void *)(uintptr_t)((n) * sizeof(void *)))

/* ---- the CUDART interface (6bd5fb6c-...) ---------------------------------------
 * [1] a module from the fatbin wrapper nvcc embeds (magic, version, fatbin
 * pointer, ...), [6] the same with three more arguments, [8] a module from
 * the fatbin itself; [2] the device's primary context, active; [7] takes
 * one word, returns nothing; [12] loads the JIT compilers.  Modules go
 * through simgpu's own loader (cuModuleLoadData reads both containers). */

static CUresult rt_module(CUmodule *mod, const void *image)
{
    if (!mod || !image)
        return CUDA_ERROR_INVALID_VALUE;
    return cuModuleLoadData(mod, image);
}

static CUresult rt_module_from_wrapper(CUmodule *mod, const void *wrapper)
{
    return rt_module(mod, wrapper);
}

static CUresult rt_module_from_wrapper_ext(CUmodule *mod, const void *wrapper, void *a3,
                                           void *a4, unsigned a5)
{
    (void)a3, (void)a4, (void)a5;       /* NULL, NULL, 0 as libcudart 13.0 calls it */
    return rt_module(mod, wrapper);
}

static CUresult rt_module_from_fatbin(const void *fatbin, CUmodule *mod, void *a3, void *a4,
                                      unsigned a5)
{
    (void)a3, (void)a4, (void)a5;
    return rt_module(mod, fatbin);
}

static CUresult rt_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    return sim_ctx_primary_for_runtime(pctx, dev);
}

static void rt_nothing(uintptr_t arg) { (void)arg; }
static CUresult rt_load_compilers(void) { return CUDA_SUCCESS; }   /* nothing compiles */

REFUSE(T_CUDART, 3) REFUSE(T_CUDART, 4) REFUSE(T_CUDART, 5) REFUSE(T_CUDART, 9)
REFUSE(T_CUDART, 10) REFUSE(T_CUDART, 11)

const void *const sim_cudart_table[13] = {
    SIZE_WORD(13), SLOT(rt_module_from_wrapper), SLOT(rt_primary_ctx),
    SLOT(refuse_T_CUDART_3), SLOT(refuse_T_CUDART_4), SLOT(refuse_T_CUDART_5),
    SLOT(rt_module_from_wrapper_ext), SLOT(rt_nothing), SLOT(rt_module_from_fatbin),
    SLOT(refuse_T_CUDART_9), SLOT(refuse_T_CUDART_10), SLOT(refuse_T_CUDART_11),
    SLOT(rt_load_compilers),
};

/* ---- the tools tables ------------------------------------------------------------
 * Runtime callback hooks (a094798c-...): [1] an event and [4] a span
 * callback, which libcudart 12.8 calls around optional lookups (no tool is
 * attached: they do nothing); [2] and [6] hand out buffers the runtime
 * fills, of 1024 and 14 units.  Whether a unit is a byte or a word is not
 * known (reimplementations differ), so each buffer holds that many 8-byte
 * words. */

static uint64_t hooks_buffer1[1024], hooks_buffer2[14];

static void hooks_event(unsigned event, void *data) { (void)event, (void)data; }
static void hooks_span(void *ctx, void *data) { (void)ctx, (void)data; }

static void hooks_buffer(void **ptr, size_t *size, void *buf, size_t n)
{
    if (ptr)
        *ptr = buf;
    if (size)
        *size = n;
}

static void hooks_get_buffer1(void **ptr, size_t *size)
{
    hooks_buffer(ptr, size, hooks_buffer1, 1024);
}

static void hooks_get_buffer2(void **ptr, size_t *size)
{
    hooks_buffer(ptr, size, hooks_buffer2, 14);
}

REFUSE(T_HOOKS, 3) REFUSE(T_HOOKS, 5)

static const void *const hooks_table[7] = {
    SIZE_WORD(7), SLOT(hooks_event), SLOT(hooks_get_buffer1), SLOT(refuse_T_HOOKS_3),
    SLOT(hooks_span), SLOT(refuse_T_HOOKS_5), SLOT(hooks_get_buffer2),
};

/* Tools TLS (42d85a81-...): [2] writes the calling thread's current context
 * (NULL when none) where its argument points, and answers a CUresult that
 * the caller tests; cuBLASLt's heuristics call it for every candidate
 * kernel, and find no algorithm when it fails or leaves it unwritten. */
static CUresult tls_current_ctx(CUcontext *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return cuCtxGetCurrent(out);
}

REFUSE(T_TLS, 1) REFUSE(T_TLS, 3)

static const void *const tls_table[4] = {
    SIZE_WORD(4), SLOT(refuse_T_TLS_1), SLOT(tls_current_ctx), SLOT(refuse_T_TLS_3),
};

/* ---- context checks and identity -------------------------------------------------
 * Context checks (263e8860-...): [2] check(ctx, u32 *, void **) reports 0
 * (nothing wrong) in its second argument, [3] returns 0. */
static CUresult checks_check(CUcontext ctx, uint32_t *result, const void **detail)
{
    (void)ctx, (void)detail;
    if (result)
        *result = 0;
    return CUDA_SUCCESS;
}

static uint32_t checks_zero(void) { return 0; }

REFUSE(T_CHECKS, 1)

static const void *const checks_table[4] = {
    SIZE_WORD(4), SLOT(refuse_T_CHECKS_1), SLOT(checks_check), SLOT(checks_zero),
};

/* Context identity (21318c60-...), a table of at least 52 slots: [4] is
 * cuCtxGetId, which cuBLASLt's kernel registry keys its per-context state
 * by.  cuBLAS, given a stream of its own (cublasSetStream), calls [51]
 * (context, stream, CUstream *out, per-thread flag) and then [39]
 * (context, that stream, u64 *out), and keys its per-stream workspaces by
 * what [39] gives, comparing the thread too for CU_STREAM_PER_THREAD;
 * either failing fails the cuBLAS call.  Nobody documents them: simgpu
 * answers what that use needs, [51] the stream's own handle (checked) and
 * [39] its cuStreamGetId.  The other slots refuse. */
#ifdef CU_PARAMS_cuStreamGetId
static CUresult identity_stream(CUcontext ctx, CUstream s, CUstream *out, int per_thread)
{
    unsigned long long id;
    (void)ctx;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (per_thread && !s)
        s = CU_STREAM_PER_THREAD;
    CUresult rc = cuStreamGetId(s, &id);
    if (rc == CUDA_SUCCESS)
        *out = s;
    return rc;
}

static CUresult identity_stream_id(CUcontext ctx, CUstream s, unsigned long long *id)
{
    (void)ctx;
    return cuStreamGetId(s, id);
}
#endif

#define IDENTITY_SLOTS 64
#define SEQ_1_63(X, t) \
    X(t, 1) X(t, 2) X(t, 3) X(t, 4) X(t, 5) X(t, 6) X(t, 7) X(t, 8) X(t, 9) X(t, 10) \
    X(t, 11) X(t, 12) X(t, 13) X(t, 14) X(t, 15) X(t, 16) X(t, 17) X(t, 18) X(t, 19) \
    X(t, 20) X(t, 21) X(t, 22) X(t, 23) X(t, 24) X(t, 25) X(t, 26) X(t, 27) X(t, 28) \
    X(t, 29) X(t, 30) X(t, 31) X(t, 32) X(t, 33) X(t, 34) X(t, 35) X(t, 36) X(t, 37) \
    X(t, 38) X(t, 39) X(t, 40) X(t, 41) X(t, 42) X(t, 43) X(t, 44) X(t, 45) X(t, 46) \
    X(t, 47) X(t, 48) X(t, 49) X(t, 50) X(t, 51) X(t, 52) X(t, 53) X(t, 54) X(t, 55) \
    X(t, 56) X(t, 57) X(t, 58) X(t, 59) X(t, 60) X(t, 61) X(t, 62) X(t, 63)
#define REFUSE_SLOT(t, n) REFUSE(t, n)
#define REFUSE_ENTRY(t, n) SLOT(refuse_##t##_##n),
SEQ_1_63(REFUSE_SLOT, T_IDENTITY)

static const void *const identity_refusals[IDENTITY_SLOTS] = {
    SIZE_WORD(IDENTITY_SLOTS), SEQ_1_63(REFUSE_ENTRY, T_IDENTITY)
};
static const void *identity_table[IDENTITY_SLOTS];

/* Made once, at the first ask. */
static void identity_fill(void)
{
    memcpy(identity_table, identity_refusals, sizeof identity_table);
#ifdef CU_PARAMS_cuCtxGetId
    identity_table[4] = SLOT(cuCtxGetId);
#endif
#ifdef CU_PARAMS_cuStreamGetId
    identity_table[39] = SLOT(identity_stream_id);
    identity_table[51] = SLOT(identity_stream);
#endif
}

/* ---- cuBLASLt's table (1734dc26-...) -----------------------------------------------
 * Nobody documents it.  cuBLASLt 13 asks for it in its fp16/bf16
 * heuristics, ignores a refusal and calls slot 4 (void **, void **) through
 * the table pointer anyway: so it gets a table, whose slots all refuse. */
REFUSE(T_LT, 1) REFUSE(T_LT, 2) REFUSE(T_LT, 3) REFUSE(T_LT, 4) REFUSE(T_LT, 5)
REFUSE(T_LT, 6) REFUSE(T_LT, 7)

static const void *const lt_table[8] = {
    SIZE_WORD(8), SLOT(refuse_T_LT_1), SLOT(refuse_T_LT_2), SLOT(refuse_T_LT_3),
    SLOT(refuse_T_LT_4), SLOT(refuse_T_LT_5), SLOT(refuse_T_LT_6), SLOT(refuse_T_LT_7),
};

/* ---- the list of tables, and cuGetExportTable --------------------------------------- */

typedef struct export_row {
    uint8_t uuid[16];
    const void *const *table;           /* NULL: answer CUDA_ERROR_NOT_FOUND */
} export_row_t;

static const export_row_t rows[] = {
    /* Skip-init ("CUDA 13 requirements"): a success makes the runtime skip its
     * normal bootstrap, which the CUDART interface serves. */
    { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
        0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9 }, NULL },
    { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
        0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, sim_cudart_table },
    { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74,
        0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, hooks_table },
    { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47,
        0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, tls_table },
    { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
        0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, sim_cls_table },
    { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43,
        0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, checks_table },
    { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
        0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, sim_integrity_table },
    { { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48,
        0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }, (const void *const *)identity_table },
    { { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45,
        0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca }, lt_table },
};

/* The unknown UUIDs said already (SIMGPU_LOG=1), each once. */
#define SAID_MAX 32
static struct {
    pthread_mutex_t lock;
    int n;
    uint8_t uuid[SAID_MAX][16];
} said = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void say_unknown(const uint8_t *u)
{
    if (!sim_log_enabled())
        return;
    pthread_mutex_lock(&said.lock);
    int seen = 0;
    for (int i = 0; i < said.n && !seen; i++)
        seen = !memcmp(said.uuid[i], u, 16);
    if (!seen && said.n < SAID_MAX)
        memcpy(said.uuid[said.n++], u, 16);
    pthread_mutex_unlock(&said.lock);
    if (!seen)
        sim_note("cuGetExportTable: no table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                 "%02x%02x%02x%02x%02x%02x: CUDA_ERROR_NOT_FOUND",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                 u[12], u[13], u[14], u[15]);
}

CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!table || !id)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&once, identity_fill);
    const uint8_t *u = (const uint8_t *)id->bytes;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (memcmp(rows[i].uuid, u, 16))
            continue;
        if (!rows[i].table)
            return CUDA_ERROR_NOT_FOUND;
        *table = rows[i].table;
        return CUDA_SUCCESS;
    }
    say_unknown(u);
    return CUDA_ERROR_NOT_FOUND;
}
