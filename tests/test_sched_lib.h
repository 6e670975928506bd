/*
 * test_sched_lib.h - what the scheduler's multi-process tests share
 * (test_sched_lease, test_sched_sim, _drain, _capture, _devices): watching
 * a live table from outside (open it once it exists, the holder once others
 * wait, who is registered and in what state), a child's end awaited, and
 * tables that a job must refuse.
 */
#ifndef TEST_SCHED_LIB_H
#define TEST_SCHED_LIB_H

#include <sys/types.h>

#include "ipc/ipc.h"
#include "lib/testutil.h"

/* The table `name`, read-only, once it exists (up to timeout_ms); NULL if
 * it never does. */
shm_table_t *ts_open_table(const char *name, int timeout_ms);
/* The pid holding device 0 while at least nwaiters wait for it; -1 when
 * nobody holds it or fewer wait. */
pid_t ts_holder(shm_table_t *t, int nwaiters);
/* The same, waiting for it up to timeout_ms. */
pid_t ts_await_holder(shm_table_t *t, int nwaiters, int timeout_ms);
/* The state (SHM_RUNNING, SHM_WAIT_GPU, ...) of pid's slot; -1 when pid is
 * not registered. */
int ts_state(shm_table_t *t, pid_t pid);
/* A tu_await predicate over a ts_watch_t: pid is in `state`, or registered
 * at all with state TS_REGISTERED. */
#define TS_REGISTERED (-2)
typedef struct ts_watch {
    shm_table_t *t;
    pid_t pid;
    int state;
} ts_watch_t;
int ts_in_state(void *watch);
/* The child `who` exited 0 within ms, or the test fails with its output. */
void ts_finish(tu_proc_t *p, const char *who, int ms);
/* Watch the table for ms: the first registered pid other than pid (0 if
 * none); *seen is set when pid itself was registered. */
pid_t ts_others(shm_table_t *t, pid_t pid, int ms, int *seen);
/* Replace the table `name` with a table of another ABI version (foreign 0)
 * or with bytes that are not a table (foreign 1). */
void ts_make_foreign(const char *name, int foreign);

#endif /* TEST_SCHED_LIB_H */
