/*
 * fork.c - the library's one set of fork handlers (util.h): each module's
 * prefork, postfork-parent and postfork-child, called in the library's lock
 * order.
 *
 * reg_lock guards the table and is the first lock every fork takes (so that
 * a child never inherits it held); the pthread_atfork handlers are
 * registered once per process image, at the first registration.  An entry
 * is complete before its `set` flag is stored with release, and entries are
 * never removed.  The child makes reg_lock anew: its owner may not exist.
 */
#include "util/util.h"

#include <pthread.h>

typedef struct fork_entry {
    void (*prefork)(void), (*parent)(void), (*child)(void);
    int set;
} fork_entry_t;

static fork_entry_t entries[UTIL_FORK_RANKS];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int handlers;                  /* 1 registered, -1 refused */

static void all_prefork(void)
{
    pthread_mutex_lock(&reg_lock);
    for (int r = 0; r < UTIL_FORK_RANKS; r++)
        if (util_load_acquire(&entries[r].set) && entries[r].prefork)
            entries[r].prefork();
}

static void all_parent(void)
{
    for (int r = UTIL_FORK_RANKS - 1; r >= 0; r--)
        if (util_load_acquire(&entries[r].set) && entries[r].parent)
            entries[r].parent();
    pthread_mutex_unlock(&reg_lock);
}

static void all_child(void)
{
    for (int r = UTIL_FORK_RANKS - 1; r >= 0; r--)
        if (util_load_acquire(&entries[r].set) && entries[r].child)
            entries[r].child();
    pthread_mutex_init(&reg_lock, NULL);
}

int util_fork_register(util_fork_rank_t rank, void (*prefork)(void),
                       void (*parent)(void), void (*child)(void))
{
    if ((unsigned)rank >= UTIL_FORK_RANKS)
        return -1;
    pthread_mutex_lock(&reg_lock);
    if (!handlers)
        handlers = pthread_atfork(all_prefork, all_parent, all_child) == 0 ? 1 : -1;
    if (handlers > 0 && !entries[rank].set) {
        entries[rank].prefork = prefork;
        entries[rank].parent = parent;
        entries[rank].child = child;
        util_store_release(&entries[rank].set, 1);
    }
    int ok = handlers > 0;
    pthread_mutex_unlock(&reg_lock);
    if (!ok) {
        static int said;
        util_log_once(&said, UTIL_LOG_WARN, "cannot register the fork handlers: a forked "
                      "child may inherit its parent's scheduling and accounting state");
        return -1;
    }
    return 0;
}
