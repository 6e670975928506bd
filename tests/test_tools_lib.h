/*
 * test_tools_lib.h - what the tools' end-to-end tests share (test_tools,
 * test_tools_ops).  Each test's table and simgpu state are tt_table and
 * tt_gpu, made unique by tt_setup and removed by tt_teardown.
 */
#ifndef SALUS_TEST_TOOLS_LIB_H
#define SALUS_TEST_TOOLS_LIB_H

#include <stddef.h>
#include <sys/types.h>

#include "../tools/top.h"
#include "lib/testutil.h"

extern char tt_table[64], tt_gpu[64];
int  tt_setup(void **state);
int  tt_teardown(void **state);
int  tt_have(const char *rel);
/* skip() unless the tools, salus-train, libsalus and simgpu are built. */
void tt_need_build(void);
/* A program's path from PATH, or NULL. */
const char *tt_which(const char *prog, char *buf, size_t len);
int  tt_contains(const char *text, const char *needle);

typedef struct tt_out {
    int rc;
    char *out, *err;
} tt_out_t;

/* A training job over simgpu with libsalus: 5 ms iterations for `seconds`. */
typedef struct tt_job {
    tu_proc_t p;
    char report[512];
} tt_job_t;

typedef struct tt_tmux {
    char bin[512], sock[64];
} tt_tmux_t;

void tt_out_free(tt_out_t *o);
/* Run build/<tool> with args (NULL-terminated) in env (NULL: ours); 20 s at most. */
tt_out_t tt_tool_env(const tu_env_t *env, const char *tool, ...);
#define TT_TOOL(tool, ...) tt_tool_env(NULL, tool, __VA_ARGS__, (char *)NULL)

/* A salus-train job in tt_table over tt_gpu: 5 ms iterations for `seconds`. */
void tt_job_start(tt_job_t *j, const char *name, const char *seconds);
/* The same, holding `mem` of device memory (salus-train --mem). */
void tt_job_start_mem(tt_job_t *j, const char *name, const char *seconds, const char *mem);
/* The same, with more of the environment: "NAME=value" each, NULL-terminated. */
void tt_job_start_env(tt_job_t *j, const char *name, const char *seconds, const char *mem,
                      const char *const *vars);
/* Until its slot has done an iteration (15 s at most). */
/* The same, with `args` (NULL-ended) added to salus-train's command line. */
void tt_job_start_args(tt_job_t *j, const char *name, const char *seconds, const char *mem,
                       const char *const *vars, const char *const *args);
void tt_job_wait_running(const tt_job_t *j);
/* SIGTERM, and a clean exit. */
void tt_job_stop(tt_job_t *j);

/* tmux on a socket of its own; the session of salus-top is "top". */
int  tt_tmux(const tt_tmux_t *tm, char **out, ...);
/* Capture the pane until it shows every needle (8 s at most). */
char *tt_screen_with(const tt_tmux_t *tm, const char *const *needles);
void tt_assert_shows(const char *screen, const char *const *needles);
int  tt_top_gone(void *tm);
/* skip() without tmux; else its binary, and a socket named from tag. */
void tt_tmux_need(tt_tmux_t *tm, const char *tag);
/* salus-top -d delay -t tt_table in session "top", width x height. */
void tt_top_start(const tt_tmux_t *tm, const char *delay, const char *width,
                  const char *height);
/* q quits it (5 s at most), and the server goes. */
void tt_top_quit(const tt_tmux_t *tm);

#endif /* SALUS_TEST_TOOLS_LIB_H */
