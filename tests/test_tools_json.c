/*
 * test_tools_json.c - the strict JSON parser of the tools' tests (see
 * test_tools_json.h): recursive descent over values, strings with their
 * escapes, numbers in the grammar's exact form.
 *
 * Divided into: the cursor and errors; values; the tree.
 */
#include "test_tools_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the cursor and errors ------------------------------------------------ */

typedef struct cur {
    const char *p, *start;
    char *err;
    size_t errlen;
    int depth;
} cur_t;

static tj_t *fail(cur_t *c, const char *why)
{
    if (c->err && !c->err[0])
        snprintf(c->err, c->errlen, "at byte %ld: %s", (long)(c->p - c->start), why);
    return NULL;
}

static void ws(cur_t *c)
{
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
        c->p++;
}

static tj_t *node(tj_type_t type)
{
    tj_t *v = calloc(1, sizeof *v);
    if (v)
        v->type = type;
    return v;
}

static int push(tj_t *parent, tj_t *child)
{
    tj_t **items = realloc(parent->items, (parent->n + 1) * sizeof *items);
    if (!items)
        return -1;
    parent->items = items;
    parent->items[parent->n++] = child;
    return 0;
}

/* ---- values ---------------------------------------------------------------------- */

static tj_t *value(cur_t *c);

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static char *string(cur_t *c)
{
    if (*c->p != '"')
        return fail(c, "expected a string"), NULL;
    c->p++;
    size_t cap = 16, n = 0;
    char *out = malloc(cap);
    while (out && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\0' || ch < 0x20) {
            free(out);
            return fail(c, "control character or end inside a string"), NULL;
        }
        if (n + 2 > cap && !(out = realloc(out, cap *= 2)))
            break;
        if (ch != '\\') {
            out[n++] = (char)ch;
            c->p++;
            continue;
        }
        c->p++;
        const char *esc = strchr("\"\\/bfnrtu", *c->p);
        if (!esc || !*c->p) {
            free(out);
            return fail(c, "bad escape"), NULL;
        }
        if (*c->p == 'u') {
            int v = hex4(c->p + 1);
            if (v < 0) {
                free(out);
                return fail(c, "bad \\u escape"), NULL;
            }
            out[n++] = v < 0x100 ? (char)v : '?';
            c->p += 5;
        } else {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            out[n++] = to[strchr(from, *c->p) - from];
            c->p++;
        }
    }
    if (!out)
        return fail(c, "out of memory"), NULL;
    out[n] = '\0';
    c->p++;
    return out;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static tj_t *number(cur_t *c)
{
    const char *s = c->p, *p = c->p;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return fail(c, "bad number");
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return fail(c, "bad fraction");
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return fail(c, "bad exponent");
        while (*p >= '0' && *p <= '9')
            p++;
    }
    tj_t *v = node(TJ_NUM);
    if (v)
        v->num = strtod(s, NULL);
    c->p = p;
    return v;
}

static tj_t *literal(cur_t *c, const char *word, tj_type_t type, double num)
{
    size_t n = strlen(word);
    if (strncmp(c->p, word, n) != 0)
        return fail(c, "unexpected character");
    c->p += n;
    tj_t *v = node(type);
    if (v)
        v->num = num;
    return v;
}

static tj_t *array(cur_t *c)
{
    tj_t *v = node(TJ_ARR);
    c->p++;
    ws(c);
    if (*c->p == ']') {
        c->p++;
        return v;
    }
    for (;;) {
        tj_t *item = value(c);
        if (!item || push(v, item) != 0) {
            tj_free(item);
            tj_free(v);
            return NULL;
        }
        ws(c);
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == ']') {
            c->p++;
            return v;
        }
        tj_free(v);
        return fail(c, "expected ',' or ']'");
    }
}

static tj_t *object(cur_t *c)
{
    tj_t *v = node(TJ_OBJ);
    c->p++;
    ws(c);
    if (*c->p == '}') {
        c->p++;
        return v;
    }
    for (;;) {
        ws(c);
        char *key = string(c);
        tj_t *item = NULL;
        if (key) {
            ws(c);
            if (*c->p == ':') {
                c->p++;
                item = value(c);
            } else {
                fail(c, "expected ':'");
            }
        }
        if (!item || push(v, item) != 0) {
            free(key);
            tj_free(item);
            tj_free(v);
            return NULL;
        }
        item->key = key;
        ws(c);
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            return v;
        }
        tj_free(v);
        return fail(c, "expected ',' or '}'");
    }
}

static tj_t *value(cur_t *c)
{
    ws(c);
    if (++c->depth > 64)
        return fail(c, "nested too deep");
    tj_t *v;
    switch (*c->p) {
    case '{': v = object(c); break;
    case '[': v = array(c); break;
    case '"': {
        char *s = string(c);
        v = s ? node(TJ_STR) : NULL;
        if (v)
            v->str = s;
        else
            free(s);
        break;
    }
    case 't': v = literal(c, "true", TJ_BOOL, 1); break;
    case 'f': v = literal(c, "false", TJ_BOOL, 0); break;
    case 'n': v = literal(c, "null", TJ_NULL, 0); break;
    default:  v = number(c); break;
    }
    c->depth--;
    return v;
}

/* ---- the tree ------------------------------------------------------------------------ */

tj_t *tj_parse(const char *text, char *err, size_t errlen)
{
    cur_t c = { .p = text, .start = text, .err = err, .errlen = errlen };
    if (err && errlen)
        err[0] = '\0';
    tj_t *v = value(&c);
    if (!v)
        return NULL;
    ws(&c);
    if (*c.p != '\0') {
        tj_free(v);
        return fail(&c, "text after the value");
    }
    return v;
}

void tj_free(tj_t *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        tj_free(v->items[i]);
    free(v->items);
    free(v->str);
    free(v->key);
    free(v);
}

const tj_t *tj_get(const tj_t *v, const char *key)
{
    if (!v || v->type != TJ_OBJ)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->items[i]->key, key) == 0)
            return v->items[i];
    return NULL;
}

const tj_t *tj_at(const tj_t *v, size_t i)
{
    if (!v || (v->type != TJ_ARR && v->type != TJ_OBJ) || i >= v->n)
        return NULL;
    return v->items[i];
}
