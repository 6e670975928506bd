/*
 * test_memory_jobs.c - the paging tests' pageclient helpers
 * (test_memory_jobs.h).  No state; each call reads the job's files anew.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_memory_jobs.h"

int pj_file_has(const char *path, const char *word)
{
    char *text = tu_read_file(path, NULL);
    int yes = text && strstr(text, word) != NULL;
    free(text);
    return yes;
}

void pj_fail_with(tu_proc_t *p, const char *what)
{
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    fail_msg("%s: %s / %s", what, out ? out : "", err ? err : "");
}

static int ready_or_exited(void *arg)
{
    tu_proc_t *p = arg;
    return pj_file_has(p->out_path, "ready") || tu_exited(p);
}

void pj_await_ready(tu_proc_t *p, int ms, const char *who)
{
    if (!tu_await(ready_or_exited, p, ms) || p->exited)
        pj_fail_with(p, who);
}

void pj_finish(tu_proc_t *p, int ms, const char *who)
{
    int rc = tu_wait(p, ms);
    if (rc == 0 && pj_file_has(p->out_path, "done 0 bad 0"))
        return;
    char what[200];
    snprintf(what, sizeof what, "the %s job %s (rc %d)", who,
             p->timed_out ? "hung: killed at its deadline"
             : rc == 128 + SIGKILL ? "was SIGKILLed" : "failed", rc);
    pj_fail_with(p, what);
}
