/*
 * actor.h - actors: forked children that a test drives through a command
 * pipe and that answer on a reply pipe, a byte (or a number) at a time, so
 * that several processes of one test take their steps in the order the test
 * says (test_memory_share, test_memory_page: one process per actor, each
 * with the module under test started in it).
 *
 * The child runs fn(actor) and exits with what it returns; its failed
 * checks exit it (the test's CHECK macros), which actor_finish reports.
 * Parent-side calls assert with cmocka; child-side calls (act_*) never do:
 * cmocka's asserts would unwind into the parent's runner.
 */
#ifndef SALUS_TEST_ACTOR_H
#define SALUS_TEST_ACTOR_H

#include <stdint.h>
#include <sys/types.h>

typedef struct actor {
    pid_t pid;
    int cmd[2], rep[2];          /* test -> actor, actor -> test */
    int (*fn)(struct actor *);
    uint64_t arg;                /* for fn: what the test gave */
} actor_t;

/* In the test: fork the actor running fn, with its pipes. */
void actor_start(actor_t *a, int (*fn)(actor_t *), uint64_t arg);
/* Send the actor command c. */
void actor_say(actor_t *a, char c);
/* The actor's next reply is c (asserted; blocks until it comes). */
void actor_expect(actor_t *a, char c);
/* The actor's next reply, a number. */
uint64_t actor_expect_u64(actor_t *a);
/* 1 if the actor has replied something within ms (not read), else 0. */
int actor_has_said(actor_t *a, int ms);
/* The actor exits 0 within 30 s (asserted); its pipes are closed. */
void actor_finish(actor_t *a);

/* In the actor: reply c, or a number (a pipe that fails it exits 1). */
void act_tell(actor_t *a, char c);
void act_tell_u64(actor_t *a, uint64_t v);
/* The next command (blocks; 0 when the test closed the pipe). */
char act_next(actor_t *a);
/* 1 if a command has come within ms (not read), else 0. */
int act_has(actor_t *a, int ms);

#endif /* SALUS_TEST_ACTOR_H */
