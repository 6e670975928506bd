/*
 * dlsym.c - the dlsym override: how programs that dlopen libcuda reach our
 * wrappers.
 *
 * dlsym(handle, name) does not search preloaded libraries, so the CUDA
 * runtime's dlsym(libcuda, "cuGetProcAddress_v2") and a Python binding's
 * dlsym(libcuda, "cuMemAlloc_v2") would bypass libsalus.  Our exported dlsym
 * answers a lookup of a wrapped export (the resolver among them) with our
 * wrapper, when the real lookup finds that export in the driver we forward
 * to; a lookup of an NVML name is the NVML module's to answer (pynvml and
 * nvidia-smi dlopen libnvidia-ml.so.1); everything else goes to glibc's
 * dlsym untouched.
 *
 * Divided into: the decision; the trampoline.  (The real dlsym is real.c's:
 * libsalus's own lookups need it too.)
 *
 * The trampoline.  glibc resolves dlsym(RTLD_NEXT, ...) from its caller's
 * return address: a forward through an ordinary call would make another
 * library's RTLD_NEXT lookup start after libsalus and find that library's own
 * symbol.  So the exported dlsym is a few instructions of assembly, correct
 * at any optimization level: save the arguments, call hook_dlsym_decide,
 * return its answer if it is not NULL, else restore the arguments and jump
 * to the real dlsym, which then sees the original caller's return address.
 *
 * No lock: the decision reads only read-only tables and the real-function
 * table (see intercept.h).
 */
#include "intercept/intercept.h"

#include "nvml/nvhook.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

/* NVML's names (nvml*): the NVML module decides (nvml/nvhook.h). */
static void *dlsym_nvml(void *handle, const char *name)
{
    if (strncmp(name, "nvml", 4) != 0)
        return NULL;
    void *found = hook_dlsym_real(handle, name);
    return found ? nvh_dlsym_decide(handle, name, found) : NULL;
}

/* ---- the decision ---------------------------------------------------------
 * NULL: forward to the real dlsym (the trampoline's tail call).  Not NULL:
 * the answer.  Cheap for the lookups every program makes: two characters. */
void *hook_dlsym_decide(void *handle, const char *name)
{
    hook_dlsym_ready();             /* hook_dlsym_next, for the trampoline's forward */
    if (!name || handle == RTLD_NEXT)
        return NULL;
    if (name[0] == 'n')
        return dlsym_nvml(handle, name);
    if (name[0] != 'c' || name[1] != 'u')
        return NULL;
    int id = hook_find(name);
    if (id < 0)
        return NULL;
    void *found = hook_dlsym_real(handle, name);
    if (!found)
        return NULL;                /* forward: the real lookup sets dlerror */
    if (found == hook_wrappers[id])
        return found;               /* the lookup found libsalus itself */
    if (hook_real_load() != 0 ||
        found != util_load_relaxed(&hook_real.slot[id])) {
        util_debug("dlsym %s: not the driver's (%p): passed", name, found);
        return NULL;
    }
    util_debug("dlsym %s: wrapped", name);
    return hook_wrappers[id];
}

/* ---- the trampoline ------------------------------------------------------- */

#if defined(__x86_64__)
#if defined(__CET__)
#define DLSYM_LANDING "    endbr64\n"
#else
#define DLSYM_LANDING ""
#endif
/* At entry rsp = 8 mod 16; two pushes and 8 bytes make it 0 mod 16 for the call. */
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, @function\n"
    "    .p2align 4\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    DLSYM_LANDING
    "    pushq %rdi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    pushq %rsi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    subq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    call hook_dlsym_decide\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rsi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rdi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    testq %rax, %rax\n"
    "    jnz 1f\n"
    "    jmp *hook_dlsym_next(%rip)\n"
    "1:  ret\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define DLSYM_LANDING "    bti c\n"
#else
#define DLSYM_LANDING ""
#endif
/* x30 (the return address glibc reads) is restored before the jump. */
__asm__(
    "    .text\n"
    "    .globl dlsym\n"
    "    .type dlsym, %function\n"
    "    .p2align 2\n"
    "dlsym:\n"
    "    .cfi_startproc\n"
    DLSYM_LANDING
    "    stp x29, x30, [sp, #-32]!\n"
    "    .cfi_def_cfa_offset 32\n"
    "    .cfi_offset 29, -32\n"
    "    .cfi_offset 30, -24\n"
    "    mov x29, sp\n"
    "    stp x0, x1, [sp, #16]\n"
    "    bl hook_dlsym_decide\n"
    "    cbnz x0, 1f\n"
    "    ldp x0, x1, [sp, #16]\n"
    "    ldp x29, x30, [sp], #32\n"
    "    adrp x16, hook_dlsym_next\n"
    "    ldr x16, [x16, #:lo12:hook_dlsym_next]\n"
    "    br x16\n"
    "1:  ldp x29, x30, [sp], #32\n"
    "    ret\n"
    "    .cfi_endproc\n"
    "    .size dlsym, .-dlsym\n");
#else
/* No trampoline for this architecture: the forward is a tail call only when
 * the compiler makes it one (optimized builds do), and otherwise another
 * library's dlsym(RTLD_NEXT, ...) starts its search after libsalus. */
SALUS_EXPORT void *dlsym(void *restrict handle, const char *restrict name)
{
    void *answer = hook_dlsym_decide(handle, name);
    return answer ? answer : hook_dlsym_real(handle, name);
}
#endif
