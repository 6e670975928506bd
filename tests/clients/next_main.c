/*
 * next_main.c - prints which next_x libnext_a's dlsym(RTLD_NEXT, "next_x")
 * found: "b" is right, "a" means dlsym was forwarded through an ordinary
 * call (the lookup started after the interposer, and found a's own).
 */
#include <stdio.h>

int next_a_lookup(void);

int main(void)
{
    int found = next_a_lookup();
    printf("%c\n", found);
    return found == 'b' ? 0 : 1;
}
