/*
 * salus.h - the salus command's pieces: its dispatcher and commands
 * (salus.c: policy, status, reset), `salus run` (salus_run.c), and `salus
 * renice` and `salus limit` (salus_control.c).
 */
#ifndef SALUS_TOOLS_SALUS_H
#define SALUS_TOOLS_SALUS_H

#include "top.h"

/* Say that `what` of command `cmd` is wrong and why; returns TOP_EXIT_USAGE. */
int  salus_bad(const char *cmd, const char *what, const char *why);

int  salus_run(int argc, char **argv);
void salus_run_usage(FILE *f);

/* salus_control.c: salus renice, salus limit. */
int  salus_renice(int argc, char **argv);
int  salus_limit(int argc, char **argv);
void salus_renice_usage(FILE *f);
void salus_limit_usage(FILE *f);

#endif /* SALUS_TOOLS_SALUS_H */
