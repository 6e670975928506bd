/*
 * next_lib.c - the two libraries of the dlsym(RTLD_NEXT) test, built twice:
 * NEXT_SIDE 'a' (linked first) and 'b'.  Each defines next_x; a's
 * next_a_lookup() asks dlsym(RTLD_NEXT, "next_x"), which must find b's, the
 * next object after a, whatever interposes dlsym.
 */
#include <dlfcn.h>

#define VIS __attribute__((visibility("default")))

VIS int next_x = NEXT_SIDE;

#if NEXT_SIDE == 'a'
VIS int next_a_lookup(void)
{
    int *found = dlsym(RTLD_NEXT, "next_x");
    return found ? *found : '0';
}
#endif
