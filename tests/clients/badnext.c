/*
 * badnext.c - a dlsym interposer that forwards through an ordinary call (the
 * mistake the trampoline avoids), built -O0 -fno-optimize-sibling-calls.  The
 * RTLD_NEXT test runs it to show that it tells the two apart.
 */
#include <dlfcn.h>

typedef void *(*dlsym_fn)(void *, const char *);

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
    static dlsym_fn real;
    if (!real)
        real = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real)
        real = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    void *found = real(handle, name);
    return found;
}
