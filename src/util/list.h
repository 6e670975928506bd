/*
 * list.h - an intrusive doubly linked list whose head is one pointer, as
 * the kernel's hlist: an element embeds a util_link_t, is pushed at the
 * head, and is removed from wherever it is in O(1) without the list's
 * address (its link points at the pointer that points at it).  A link that
 * is on no list is all zeros, so a zeroed element is a free one.
 *
 * Not thread-safe: whoever owns the list guards it and every link on it
 * with one lock (the caller says which).
 */
#ifndef SALUS_UTIL_LIST_H
#define SALUS_UTIL_LIST_H

#include <stddef.h>

typedef struct util_link {
    struct util_link *next;
    struct util_link **pprev;    /* the pointer to this link; NULL: on no list */
} util_link_t;

typedef struct util_list {
    util_link_t *first;
} util_list_t;

/* The element that embeds link `ptr` as its `member`. */
#define UTIL_CONTAINER(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline int util_link_on(const util_link_t *n)
{
    return n->pprev != NULL;
}

static inline void util_list_push(util_list_t *l, util_link_t *n)
{
    n->next = l->first;
    n->pprev = &l->first;
    if (l->first)
        l->first->pprev = &n->next;
    l->first = n;
}

/* n leaves its list (n must be on one), its link zeroed. */
static inline void util_list_remove(util_link_t *n)
{
    *n->pprev = n->next;
    if (n->next)
        n->next->pprev = n->pprev;
    n->next = NULL;
    n->pprev = NULL;
}

/* The first link of l, removed; NULL when l is empty. */
static inline util_link_t *util_list_pop(util_list_t *l)
{
    util_link_t *n = l->first;
    if (n)
        util_list_remove(n);
    return n;
}

/* Each element `e` (a pointer to `type`, declared by the caller) of l,
 * through its link `member`; the body may remove e (the next is read
 * first), not others. */
#define UTIL_LIST_EACH(e, l, type, member)                                      \
    for (util_link_t *e##_at_ = (l)->first, *e##_next_ = NULL;                  \
         e##_at_ && ((e) = UTIL_CONTAINER(e##_at_, type, member),               \
                     e##_next_ = e##_at_->next, 1);                             \
         e##_at_ = e##_next_)

#endif /* SALUS_UTIL_LIST_H */
