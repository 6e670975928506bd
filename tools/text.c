/*
 * text.c - the string helpers of the tools: making a peer's bytes safe for a
 * terminal, JSON and Prometheus; sizes for people; parsing numbers given on
 * the command line; user names.
 *
 * Divided into: sanitizing and escaping; sizes; parsing; users.
 *
 * Why sanitize although ipc already replaces control bytes in names: the
 * table is written by other processes, possibly hostile, and ipc's promise
 * covers its names only.  Every string that reaches an output goes through
 * here, so that an escape sequence in a process name can never reach the
 * terminal and a quote can never end a JSON string early.
 */
#include "top.h"

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
