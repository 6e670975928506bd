/*
 * salus.h - the salus command's pieces: its dispatcher and commands
 * (salus.c: policy, status, reset) and `salus run` (salus_run.c).
 */
#ifndef SALUS_TOOLS_SALUS_H
#define SALUS_TOOLS_SALUS_H

#include "top.h"

/* Say that `what` of command `cmd` is wrong and why; returns TOP_EXIT_USAGE. */
int  salus_bad(const char *cmd, const char *what, const char *why);

int  salus_run(int argc, char **argv);
void salus_run_usage(FILE *f);

#endif /* SALUS_TOOLS_SALUS_H */
