/*
 * stubs.c - a generated definition of every driver export, for those simgpu
 * does not implement.
 *
 * An X-macro over CU_PROCMAP with each export's own prototype (CU_PARAMS_*)
 * makes a weak definition of all of them; the strong definitions of the
 * other files of sim/ override theirs at link time (so this file must stay
 * free of strong driver definitions).  What is left answers, honestly,
 * CUDA_ERROR_NOT_SUPPORTED, with a line on stderr under SIMGPU_LOG=1.
 *
 * The graphics interop exports of cudaGL.h, cudaEGL.h and cudaVDPAU.h
 * (CU_PROCMAP_GFX) are defined here too, strongly, answering what a driver
 * answers on a machine without a display: NOT_SUPPORTED.  Loaders such as
 * ffmpeg's and GStreamer's resolve them all before any call.  They are
 * defined without parameters: the parameter types are the graphics
 * libraries', the definitions read no argument, and on the C calling
 * conventions simgpu runs on (System V x86-64 and AArch64) the caller owns
 * its arguments, so a definition that reads none serves any prototype.
 *
 * No state, no lock.
 */
#include "sim.h"

static CUresult unimplemented(const char *name)
{
    if (sim_log_enabled())
        sim_note("%s is not implemented: CUDA_ERROR_NOT_SUPPORTED", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#pragma GCC diagnostic ignored "-Wunused-parameter"
#define SIM_STUB(base, version, per_thread, export) \
    __attribute__((weak)) CUresult CUDAAPI export CU_PARAMS_##export \
    { return unimplemented(#export); }
CU_PROCMAP(SIM_STUB)

#define SIM_GFX_STUB(base, version, per_thread, export) \
    CUresult CUDAAPI export(void) { return unimplemented(#export); }
CU_PROCMAP_GFX(SIM_GFX_STUB)
