/*
 * top_main.c - the salus-top program: its whole work is in top.c (the
 * command line), collect.c, layout.c, draw.c and output.c.
 */
#include "top.h"

int main(int argc, char **argv)
{
    return top_main(argc, argv, "salus-top", 0);
}
