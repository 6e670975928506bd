/*
 * actor.c - forked children driven through pipes (see actor.h).
 *
 * Divided into: bytes over a pipe; the test's side; the actor's side.
 * Single-threaded; each process owns its ends of the pipes.
 */
#include "actor.h"

#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>   /* after setjmp.h, stdarg.h and stddef.h */

#include "testutil.h"

/* ---- bytes over a pipe ------------------------------------------------------ */

static void send_byte(int fd, char c)
{
    while (write(fd, &c, 1) != 1 && errno == EINTR)
        ;
}

static char recv_byte(int fd)
{
    char c = 0;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    return n == 1 ? c : 0;
}

static int readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

/* ---- the test's side ------------------------------------------------------------ */

void actor_start(actor_t *a, int (*fn)(actor_t *), uint64_t arg)
{
    assert_int_equal(pipe(a->cmd), 0);
    assert_int_equal(pipe(a->rep), 0);
    a->fn = fn;
    a->arg = arg;
    fflush(NULL);                     /* nothing buffered is written twice */
    a->pid = fork();
    if (a->pid == 0) {
        close(a->cmd[1]);
        close(a->rep[0]);
        _exit(a->fn(a));
    }
    assert_true(a->pid > 0);
    close(a->cmd[0]);
    close(a->rep[1]);
}

void actor_say(actor_t *a, char c)
{
    send_byte(a->cmd[1], c);
}

void actor_expect(actor_t *a, char c)
{
    assert_int_equal(recv_byte(a->rep[0]), c);
}

uint64_t actor_expect_u64(actor_t *a)
{
    uint64_t v = 0;
    assert_int_equal(read(a->rep[0], &v, sizeof v), (ssize_t)sizeof v);
    return v;
}

int actor_has_said(actor_t *a, int ms)
{
    return readable(a->rep[0], ms);
}

void actor_finish(actor_t *a)
{
    tu_proc_t p = { .pid = a->pid };
    assert_int_equal(tu_wait(&p, 30000), 0);
    close(a->cmd[1]);
    close(a->rep[0]);
}

/* ---- the actor's side ------------------------------------------------------------- */

void act_tell(actor_t *a, char c)
{
    send_byte(a->rep[1], c);
}

void act_tell_u64(actor_t *a, uint64_t v)
{
    ssize_t n;
    while ((n = write(a->rep[1], &v, sizeof v)) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof v) {     /* the test would wait for it: say why, end */
        fprintf(stderr, "actor %d: the reply pipe took %zd of %zu bytes\n", (int)getpid(), n,
                sizeof v);
        _exit(1);
    }
}

char act_next(actor_t *a)
{
    return recv_byte(a->cmd[0]);
}

int act_has(actor_t *a, int ms)
{
    return readable(a->cmd[0], ms);
}
