/*
 * salus_run.c - `salus run`: start a command under Salus.  It checks every
 * setting first, sets SALUS_* and LD_PRELOAD (libsalus.so, prepended to any
 * preload already there), then execs the command, which thus keeps salus's
 * pid, so that a shell's job control and a supervisor's signals reach it.
 *
 * Divided into: the settings; finding libsalus.so; the command.
 *
 * The options are the rows of libsalus's own list of variables (util/vars.h)
 * and a value is checked by the same rule libsalus applies, so that a
 * mistake is caught here with the option's name rather than passed to a job
 * whose libsalus would ignore it with a warning.
 */
#include "salus.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/util.h"

/* ---- the settings -------------------------------------------------------------------
 * The rows of the one list of variables (util/vars.h) that have an option:
 * the option's name, its argument, its help and its rule all come from it. */

#define NOPTS 32

static int settings(util_var_id_t ids[NOPTS])
{
    int n = 0;
    for (int i = 0; i < UTIL_VAR_COUNT && n < NOPTS; i++)
        if (util_vars[i].option)
            ids[n++] = (util_var_id_t)i;
    return n;
}

/* A choice of off|on is a switch: `--swap` alone means on, `--swap=off`
 * turns it off (getopt's optional argument takes the `=` form only). */
static int switch_option(util_var_id_t id)
{
    return util_vars[id].kind == UTIL_KIND_CHOICE && util_vars[id].choices == util_onoff_names;
}

/* 0, or says what is wrong, with the choice it most likely means (exit
 * status 2 follows). */
static int check(util_var_id_t id, const char *v)
{
    char msg[768], near[96] = "";
    if (util_var_refusal(id, util_vars[id].option, v, msg, sizeof msg) == 0)
        return 0;
    const char *const *ch = util_vars[id].kind == UTIL_KIND_CHOICE ? util_vars[id].choices : NULL;
    int n = 0;
    while (ch && ch[n])
        n++;
    const char *guess = ch ? top_nearest(v, ch, n) : NULL;
    if (guess)
        snprintf(near, sizeof near, "\nsalus run: did you mean --%s %s?", util_vars[id].option,
                 guess);
    fprintf(stderr, "salus run: %s%s\nsalus run: see 'salus run --help'\n", msg, near);
    return -1;
}

/* An option salus run does not know (argv's word, "--priorty=5"): said with
 * the option it most likely means. */
static int unknown_option(const char *word, const util_var_id_t *ids, int n)
{
    const char *cands[NOPTS + 1];
    char name[64], why[160];
    for (int i = 0; i < n; i++)
        cands[i] = util_vars[ids[i]].option;
    cands[n] = "help";
    const char *w = word;
    while (*w == '-')
        w++;
    snprintf(name, sizeof name, "%.*s", (int)strcspn(w, "="), w);
    const char *guess = top_nearest(name, cands, n + 1);
    if (guess)
        snprintf(why, sizeof why, "is not an option of salus run: did you mean --%s?", guess);
    else
        snprintf(why, sizeof why, "is not an option of salus run");
    return salus_bad("run", word, why);
}

/* A misspelled SALUS_* variable of the environment would be ignored by the
 * job in silence (beneath its own libsalus's warning, among its output):
 * said here, where the user is looking. */
static void warn_misspelled(void)
{
    extern char **environ;
    for (char **e = environ; e && *e; e++) {
        size_t n;
        int id = util_var_misspelled(*e, &n);
        if (id >= 0)
            fprintf(stderr, "salus run: warning: %.*s is not a variable of Salus and is "
                    "ignored: did you mean %s?\n", (int)n, *e, util_vars[id].name);
    }
}

/* ---- finding libsalus.so ------------------------------------------------------------
 * Installed: <prefix>/bin/salus and <prefix>/lib/libsalus.so.  Build tree:
 * build/bin/salus and build/libsalus.so. */

static int find_library(char *out, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';                                   /* .../bin */
    static const char *const rel[] = { "/../lib/libsalus.so", "/../libsalus.so" };
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        char path[PATH_MAX + 32], real[PATH_MAX];
        snprintf(path, sizeof path, "%s%s", exe, rel[i]);
        if (access(path, R_OK) == 0 && realpath(path, real)) {
            snprintf(out, len, "%s", real);
            return 0;
        }
    }
    snprintf(out, len, "%s/../lib/libsalus.so or %s/../libsalus.so", exe, exe);
    return -1;
}

/* LD_PRELOAD with lib first, once. */
static int set_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    if (!old || !*old)
        return setenv("LD_PRELOAD", lib, 1);
    size_t n = strlen(lib);
    for (const char *p = old; (p = strstr(p, lib)) != NULL; p += n)
        if ((p == old || p[-1] == ':' || p[-1] == ' ') && (p[n] == '\0' || p[n] == ':' ||
                                                           p[n] == ' '))
            return 0;                                /* already there */
    size_t len = n + strlen(old) + 2;
    char *v = malloc(len);
    if (!v)
        return -1;
    snprintf(v, len, "%s:%s", lib, old);
    int rc = setenv("LD_PRELOAD", v, 1);
    free(v);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------ */

void salus_run_usage(FILE *f)
{
    fprintf(f,
"usage: salus run [options] [--] COMMAND [ARGS...]\n"
"\n"
"Run COMMAND with libsalus.so preloaded (prepended to LD_PRELOAD) and the\n"
"SALUS_* variables the options give, so that it shares the GPU with the other\n"
"processes of its table.  Every value is checked first; COMMAND replaces salus\n"
"(same pid).\n"
"\n"
"options (each sets the variable in brackets; see libsalus(7)):\n");
    util_var_id_t ids[NOPTS];
    int n = settings(ids);
    for (int i = 0; i < n; i++) {
        const util_var_t *v = &util_vars[ids[i]];
        char left[48], def[32] = "";
        snprintf(left, sizeof left, switch_option(ids[i]) ? "--%s[=%s]" : "--%s %s", v->option,
                 v->arg);
        if (v->kind == UTIL_KIND_LONG && v->def)
            snprintf(def, sizeof def, " (default %ld)", v->def);
        fprintf(f, "  %-22s %s%s\n  %-22s [%s]\n", left, v->help, def, "", v->name);
    }
    fprintf(f,
"  -h, --help             this text\n"
"\n"
"examples:\n"
"  salus run --priority 80 --mem 20G -- python train.py\n"
"  salus run --iterations 5000 --policy srtf --name resnet -- ./train --epochs 3\n"
"  salus run --log info --report /tmp/salus.jsonl -- ./job   # check interception\n"
"\n"
"environment: variables already set are kept unless an option sets them;\n"
"LD_PRELOAD keeps its entries after libsalus.so.\n"
"exit status: COMMAND's; 2 bad arguments; 1 libsalus.so not found; 126 COMMAND\n"
"cannot be run; 127 COMMAND not found.\n");
}

int salus_run(int argc, char **argv)
{
    util_var_id_t ids[NOPTS];
    int n = settings(ids);
    struct option longs[NOPTS + 2];
    for (int i = 0; i < n; i++)
        longs[i] = (struct option){ util_vars[ids[i]].option,
                                    switch_option(ids[i]) ? optional_argument : required_argument,
                                    NULL, 1000 + i };
    longs[n] = (struct option){ "help", no_argument, NULL, 'h' };
    longs[n + 1] = (struct option){ NULL, 0, NULL, 0 };

    const char *values[NOPTS] = { 0 };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
        if (c == 'h') {
            salus_run_usage(stdout);
            return TOP_EXIT_OK;
        }
        if (c >= 1000 && c < 1000 + n) {
            if (!optarg)
                optarg = (char *)"on";          /* a switch given alone: --swap */
            if (check(ids[c - 1000], optarg) != 0)
                return TOP_EXIT_USAGE;
            values[c - 1000] = optarg;
            continue;
        }
        if (c == ':')
            return salus_bad("run", argv[optind - 1], "needs a value");
        return unknown_option(argv[optind - 1], ids, n);
    }
    if (optind >= argc)
        return salus_bad("run", "COMMAND", "is missing: salus run [options] -- COMMAND [ARGS...]");

    warn_misspelled();
    char lib[PATH_MAX * 2 + 64];
    if (find_library(lib, sizeof lib) != 0) {
        fprintf(stderr, "salus run: libsalus.so is not installed beside salus (looked for "
                "%s); reinstall Salus (make install) or build it (make)\n", lib);
        return TOP_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++)
        if (values[i] && setenv(util_vars[ids[i]].name, values[i], 1) != 0)
            return TOP_EXIT_FAIL;
    if (set_preload(lib) != 0)
        return TOP_EXIT_FAIL;
    execvp(argv[optind], argv + optind);
    int err = errno;
    fprintf(stderr, "salus run: cannot run %s: %s\n", argv[optind], strerror(err));
    return err == ENOENT ? 127 : 126;
}
