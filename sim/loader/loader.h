/*
 * loader.h - simgpu's loader: device code read from cubins, PTX and fatbins
 * (image.c, fatbin.c), modules, libraries and functions (module.c), and the
 * JIT linker with its CU_JIT_* options and logs (link.c).  About 2k lines
 * that barely touch the process state or the time model: they build
 * sim_module_t and sim_func_t (sim.h), which launches read.
 *
 * What the rest of simgpu calls: sim_modules_destroy_ctx (a context's
 * teardown, ctx.c) and sim_read_loading_mode (cuInit, state.c); the rest
 * is the loader's files' interface to each other.  All under sim_p.lock.
 */
#ifndef SIM_LOADER_H
#define SIM_LOADER_H

#include "../sim.h"

/* ---- images (image.c, fatbin.c) and modules (module.c) ------------------ */
/* Read a cubin, fatbin or PTX image (len 0: unknown, found from the image)
 * into m's functions.  CUDA_ERROR_INVALID_IMAGE for anything else. */
CUresult sim_image_load(const void *image, size_t len, sim_module_t *m);
/* A cubin of len bytes (CUDA_ERROR_NO_BINARY_FOR_GPU if built for another
 * architecture); NUL-terminated PTX (CUDA_ERROR_INVALID_PTX if its target
 * is newer than the device); a fatbin's entry for this device (fatbin.c). */
CUresult sim_cubin_load(const unsigned char *img, size_t len, sim_module_t *m);
CUresult sim_ptx_load(const char *text, sim_module_t *m);
CUresult sim_fatbin_load(const unsigned char *img, sim_module_t *m);
void sim_func_free(sim_func_t *f);
void sim_module_free(sim_module_t *m);
void sim_modules_destroy_ctx(sim_ctx_t *ctx);
/* Read CUDA_MODULE_LOADING (at cuInit, under the process lock). */
void sim_read_loading_mode(void);

/* ---- link.c: CU_JIT_* options and logs ---------------------------------- */
typedef struct sim_jit {
    char *log[2];                       /* [0] info, [1] error; NULL: none */
    size_t cap[2], used[2];             /* buffer sizes, bytes written */
    void **vals;                        /* the caller's optionValues */
    int size_at[2], wall_at;            /* where outputs go back; -1: nowhere */
    int verbose, target;                /* CU_JIT_LOG_VERBOSE, CU_JIT_TARGET */
} sim_jit_t;
/* Validate and record options; empties the logs the caller gave. */
CUresult sim_jit_parse(sim_jit_t *j, unsigned n, CUjit_option *opts, void **vals);
/* Append to the info (error 0) or error (1) log, truncated, NUL-terminated. */
void sim_jit_log(sim_jit_t *j, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Write back the logs' sizes and, when ms >= 0, CU_JIT_WALL_TIME. */
void sim_jit_done(sim_jit_t *j, float ms);

#endif /* SIM_LOADER_H */
