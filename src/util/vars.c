/*
 * vars.c - the table of SALUS_* variables (vars.h's one list) and the
 * readers that apply its rules.
 *
 * Divided into: the table; checking a value; reading one; names that are
 * not in the list.  The table is constant; readers are called at start-up
 * only.  A value that is set but
 * wrong is said once per variable (the `said` flags), naming the variable,
 * its value and the forms it accepts.
 */
#include "util/vars.h"
#include "util/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

/* ---- the table ------------------------------------------------------------ */

const char *const util_policy_names[] = { UTIL_POLICY_NAMES NULL };
const char *const util_log_names[] = { UTIL_LOG_NAMES, NULL };
const char *const util_iter_sync_names[] = { UTIL_ITER_SYNC_NAMES, NULL };
const char *const util_onoff_names[] = { UTIL_ONOFF_NAMES, NULL };

const util_var_t util_vars[UTIL_VAR_COUNT] = {
#define UTIL_VAR_ROW(id, name, kind, min, max, def, choices, option, arg, help) \
    [UTIL_VAR_##id] = { name, UTIL_KIND_##kind, min, max, def, choices, option, arg, help },
    SALUS_VARS(UTIL_VAR_ROW)
#undef UTIL_VAR_ROW
};

static int said[UTIL_VAR_COUNT];

/* ---- checking a value ------------------------------------------------------- */

int util_table_name_ok(const char *name)
{
    if (name[0] == '/')
        name++;
    size_t n = strlen(name);
    if (n < 1 || n > 62)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* A whole number as people write one: digits, after a '-' only when the
 * number is not 0.  strtol alone also takes leading blanks, a '+' and "-0",
 * which a typo or a script's quoting produces and the user never meant. */
static int whole_number_form(const char *text)
{
    const char *d = text[0] == '-' ? text + 1 : text;
    if (!isdigit((unsigned char)d[0]))
        return 0;
    if (d != text && strspn(d, "0") == strlen(d))
        return 0;                                   /* "-0", "-00" */
    return strspn(d, "0123456789") == strlen(d);
}

static int parse_long(const char *text, long min, long max, long *out)
{
    if (!whole_number_form(text))
        return -1;
    char *end;
    long n = strtol(text, &end, 10);
    if (end == text || *end != '\0' || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

static int choice_index(const util_var_t *v, const char *text)
{
    for (int i = 0; v->choices[i]; i++)
        if (strcasecmp(text, v->choices[i]) == 0)
            return i;
    return -1;
}

static void forms(const util_var_t *v, char *why, size_t len)
{
    size_t at;
    switch (v->kind) {
    case UTIL_KIND_LONG:
        snprintf(why, len, "it takes a whole number from %ld to %ld, in digits with "
                 "nothing around them (a '-' only before a number that is not 0)",
                 v->min, v->max);
        break;
    case UTIL_KIND_SIZE:
        snprintf(why, len, "it takes a size with a unit: 20G, 512M, 1.5GiB (K, M, G, T are "
                 "powers of 1024), a percentage in (0, 100] (25%%), or exact bytes of at "
                 "least 1 MiB (1073741824B), or one per device as MPS takes them "
                 "(0=8G,1=16G: CUDA ordinals, each once); a number without a unit is "
                 "refused%s",
                 v->min > 0 ? ", and so is 0, which would refuse every allocation"
                            : "; 0 means none");
        break;
    case UTIL_KIND_CHOICE:
        at = (size_t)snprintf(why, len, "it takes one of: ");
        for (int i = 0; v->choices[i] && at < len; i++)
            at += (size_t)snprintf(why + at, len - at, "%s%s", i ? ", " : "", v->choices[i]);
        break;
    case UTIL_KIND_NAME:
        snprintf(why, len, "it takes 1 to 31 printable ASCII characters");
        break;
    case UTIL_KIND_TABLE:
        snprintf(why, len, "it takes a table name: letters, digits, '.', '_' and '-', "
                 "at most 62, after an optional '/'");
        break;
    case UTIL_KIND_PATH:
        snprintf(why, len, "it takes a file name");
        break;
    }
}

int util_var_check(util_var_id_t id, const char *text, char *why, size_t whylen)
{
    if ((unsigned)id >= UTIL_VAR_COUNT || !text)
        return -1;
    const util_var_t *v = &util_vars[id];
    long n;
    uint64_t bytes;
    int ok = 0;
    size_t len = strlen(text);
    switch (v->kind) {
    case UTIL_KIND_LONG:
        ok = parse_long(text, v->min, v->max, &n) == 0;
        break;
    case UTIL_KIND_SIZE:
        /* 100 stands for the unknown whole: the percentage's range is checked.
         * Every device of a per-device list is checked (ordinal 0..63). */
        ok = 1;
        for (int o = 0; ok && o < (strchr(text, '=') ? UTIL_SIZE_ORDINALS : 1); o++) {
            int r = util_parse_size_at(text, o, 100, &bytes);
            ok = r == 1 || (r == 0 && (v->min == 0 || bytes > 0 || strchr(text, '%')));
        }
        break;
    case UTIL_KIND_CHOICE:
        ok = choice_index(v, text) >= 0;
        break;
    case UTIL_KIND_NAME:
        ok = len > 0 && len < 32;
        for (size_t i = 0; ok && i < len; i++)
            ok = (unsigned char)text[i] >= 0x20 && (unsigned char)text[i] < 0x7f;
        break;
    case UTIL_KIND_TABLE:
        ok = util_table_name_ok(text);
        break;
    case UTIL_KIND_PATH:
        ok = len > 0 && len < 4096;
        break;
    }
    if (ok)
        return 0;
    if (why && whylen)
        forms(v, why, whylen);
    return -1;
}

int util_var_refusal(util_var_id_t id, const char *option, const char *text, char *msg,
                     size_t len)
{
    char why[512];
    if (util_var_check(id, text, why, sizeof why) == 0)
        return 0;
    if (msg && len)
        snprintf(msg, len, "--%s \"%s\" is not accepted: %s", option ? option : "?",
                 text ? text : "", why);
    return -1;
}

/* ---- reading one ------------------------------------------------------------- */

/* The variable's value: NULL when unset; when invalid, said once and NULL. */
static const char *valid_text(util_var_id_t id)
{
    const char *text = util_env_str(util_vars[id].name);
    char why[512];
    if (!text || util_var_check(id, text, why, sizeof why) == 0)
        return text;
    util_log_once(&said[id], UTIL_LOG_ERROR, "%s=\"%s\" is not accepted: %s; %s",
                  util_vars[id].name, text, why,
                  util_vars[id].kind == UTIL_KIND_LONG ? "the default is used" : "it is ignored");
    return NULL;
}

/* A variable of `kind`: 0 and its valid text; 1 unset; -1 invalid or not
 * of that kind. */
static int read_kind(util_var_id_t id, util_var_kind_t kind, const char **text)
{
    if ((unsigned)id >= UTIL_VAR_COUNT || util_vars[id].kind != kind)
        return -1;
    if (!util_env_str(util_vars[id].name))
        return 1;
    *text = valid_text(id);
    return *text ? 0 : -1;
}

int util_var_long(util_var_id_t id, long *out)
{
    const char *text;
    int rc = read_kind(id, UTIL_KIND_LONG, &text);
    return rc ? rc : parse_long(text, util_vars[id].min, util_vars[id].max, out);
}

int util_var_choice(util_var_id_t id, int *out)
{
    const char *text;
    int rc = read_kind(id, UTIL_KIND_CHOICE, &text);
    if (rc == 0)
        *out = choice_index(&util_vars[id], text);
    return rc;
}

const char *util_var_text(util_var_id_t id)
{
    if ((unsigned)id >= UTIL_VAR_COUNT)
        return NULL;
    return valid_text(id);
}

/* ---- names that are not in the list --------------------------------------------
 * A SALUS_* variable the list lacks is most likely a misspelling, which would
 * otherwise be ignored in silence (SALUS_POLCY=srtf runs fair).  It is named
 * with the nearest known variable when that is a few edits away; a name far
 * from all of them belongs to someone else and is left alone. */

/* Edit distance (case-insensitive), capped at `cap` + 1. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb, size_t cap)
{
    enum { MAXN = 64 };
    size_t row[MAXN + 1];
    if (na > MAXN || nb > MAXN)
        return cap + 1;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0], best;
        row[0] = best = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t sub = diag + (toupper((unsigned char)a[i - 1]) !=
                                 toupper((unsigned char)b[j - 1]));
            size_t v = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < v ? sub : v;
            diag = up;
            best = row[j] < best ? row[j] : best;
        }
        if (best > cap)
            return cap + 1;
    }
    return row[nb];
}

int util_var_misspelled(const char *entry, size_t *name_len)
{
    size_t n = strcspn(entry, "=");
    if (n <= 6 || strncasecmp(entry, "SALUS_", 6) != 0)
        return -1;
    int best = -1;
    size_t best_d = 0;
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        const char *known = util_vars[i].name;
        size_t nk = strlen(known);
        if (n == nk && strncmp(entry, known, n) == 0)
            return -1;
        size_t cap = nk / 5 > 2 ? nk / 5 : 2;
        size_t d = distance(entry, n, known, nk, cap);
        if (d <= cap && (best < 0 || d < best_d)) {
            best = i;
            best_d = d;
        }
    }
    if (best >= 0)
        *name_len = n;
    return best;
}

void util_var_warn_misspelled(void)
{
    static int said;
    extern char **environ;
    if (util_xchg_relaxed(&said, 1))
        return;
    for (char **e = environ; e && *e; e++) {
        size_t n;
        int id = util_var_misspelled(*e, &n);
        if (id >= 0)
            util_warn("%.*s is not a variable of Salus and is ignored: did you mean %s?",
                      (int)n, *e, util_vars[id].name);
    }
}

/* ---- the log's level ---------------------------------------------------------
 * Here rather than in util.c, beside the variables it reads: util.c is below
 * this file (vars.c logs through it), never the other way round. */
void util_log_init(void)
{
    int level;
    int on;
    if (util_var_choice(UTIL_VAR_LOG, &level) == 0)
        util_log_level = level;
    if (util_var_choice(UTIL_VAR_LOG_SYSLOG, &on) == 0 && on == 1) {
        /* The tag names the library, the pid the job; syslog connects at
         * the first line (no LOG_NDELAY: a job that says nothing opens
         * nothing). */
        openlog("libsalus", LOG_PID, LOG_USER);
        util_log_syslog = 1;
    }
    util_var_warn_misspelled();
}
