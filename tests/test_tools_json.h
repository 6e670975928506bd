/*
 * test_tools_json.h - a strict, small JSON parser for the tools' tests: it
 * validates a whole document (RFC 8259: no trailing commas, no bare
 * control characters in strings, proper escapes, one value and nothing
 * after it) and builds a tree the tests query by key.
 */
#ifndef SALUS_TEST_TOOLS_JSON_H
#define SALUS_TEST_TOOLS_JSON_H

#include <stddef.h>

typedef enum { TJ_NULL, TJ_BOOL, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ } tj_type_t;

typedef struct tj {
    tj_type_t type;
    double num;                /* TJ_NUM, TJ_BOOL (0/1) */
    char *str;                 /* TJ_STR: decoded (\u00XX only as bytes) */
    char *key;                 /* member name, inside an object */
    struct tj **items;         /* TJ_ARR, TJ_OBJ */
    size_t n;
} tj_t;

/* Parse text; NULL when it is not valid JSON (err says where and why). */
tj_t *tj_parse(const char *text, char *err, size_t errlen);
void  tj_free(tj_t *v);
/* Member of an object (NULL if absent or v is not an object). */
const tj_t *tj_get(const tj_t *v, const char *key);
/* Element i of an array (NULL if out of range). */
const tj_t *tj_at(const tj_t *v, size_t i);

#endif /* SALUS_TEST_TOOLS_JSON_H */
