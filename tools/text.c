/*
 * text.c - the string helpers of the tools: making a peer's bytes safe for a
 * terminal, JSON and Prometheus; sizes for people; parsing numbers given on
 * the command line; user names.
 *
 * Divided into: sanitizing and escaping; sizes; parsing; near misses (the
 * "did you mean" of a misspelled option or name); users.
 *
 * Why sanitize although ipc already replaces control bytes in names: the
 * table is written by other processes, possibly hostile, and ipc's promise
 * covers its names only.  Every string that reaches an output goes through
 * here, so that an escape sequence in a process name can never reach the
 * terminal and a quote can never end a JSON string early.
 */
#include "top.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- sanitizing and escaping -------------------------------------------- */

void top_sanitize(char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f)
            *s = '?';
    }
}

void top_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)   /* also non-ASCII: never invalid UTF-8 */
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* The exposition format escapes backslash, double quote and line feed in
 * label values; other control bytes are replaced, never passed on. */
void top_prom_label(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20 || c >= 0x7f)
            fputc('?', f);
        else
            fputc(c, f);
    }
}

/* ---- sizes ------------------------------------------------------------------ */

void top_human_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "KMGTPE";
    if (bytes < 1024) {
        snprintf(buf, len, "%llu", (unsigned long long)bytes);
        return;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && units[u + 1]) {
        v /= 1024.0;
        u++;
    }
    /* Three significant digits at most: 1.5G, 15.2G, 152G. */
    if (v < 9.95)
        snprintf(buf, len, "%.1f%c", v, units[u]);
    else
        snprintf(buf, len, "%.0f%c", v, units[u]);
}

/* ---- parsing -------------------------------------------------------------- */

int top_parse_seconds(const char *text, double min, double max, double *out)
{
    if (!text || !*text)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !isfinite(v) || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int top_parse_long(const char *text, long min, long max, long *out)
{
    if (!text || !*text)
        return -1;
    errno = 0;
    char *end;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int top_policy_of(const char *name)
{
    for (int i = 0; name && sched_policy_names[i]; i++)
        if (strcasecmp(name, sched_policy_names[i]) == 0)
            return i;
    return -1;
}

/* ---- near misses -------------------------------------------------------------
 * Damerau-Levenshtein distance (an adjacent swap counts one, so "pakc" is
 * one edit from "pack"), case-insensitive, over short words only. */

#define NEAR_MAX 40

static int edits(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > NEAR_MAX || nb > NEAR_MAX)
        return NEAR_MAX + 1;
    int d[NEAR_MAX + 1][NEAR_MAX + 1];
    for (size_t i = 0; i <= na; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) ==
                tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) ==
                tolower((unsigned char)b[j - 1]) && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

const char *top_nearest(const char *word, const char *const *cands, int n)
{
    const char *best = NULL;
    int best_d = 0;
    for (int i = 0; word && *word && i < n; i++) {
        if (!cands[i])
            continue;
        int len = (int)strlen(cands[i]);
        int cap = len <= 4 ? 1 : len <= 8 ? 2 : 3;      /* a few edits, never most */
        int d = edits(word, cands[i]);
        if (d <= cap && (!best || d < best_d)) {
            best = cands[i];
            best_d = d;
        }
    }
    return best;
}

/* ---- users ------------------------------------------------------------------ */

void top_user_name(uid_t uid, char *buf, size_t len)
{
    struct passwd pw, *res = NULL;
    char tmp[1024];
    if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res && res->pw_name[0])
        snprintf(buf, len, "%s", res->pw_name);
    else
        snprintf(buf, len, "%u", (unsigned)uid);
    top_sanitize(buf);
}
