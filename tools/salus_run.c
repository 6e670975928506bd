/*
 * salus_run.c - `salus run`: start a command under Salus.  It checks every
 * setting first, sets SALUS_* and LD_PRELOAD (libsalus.so, prepended to any
 * preload already there), then execs the command, which thus keeps salus's
 * pid, so that a shell's job control and a supervisor's signals reach it.
 *
 * Divided into: the settings (one table: option, variable, rule); checking
 * a value; finding libsalus.so; the command.
 *
 * A value is checked by the rule libsalus applies to the variable (the
 * ranges of src/sched/config.c, the sizes of src/memory/memory.c through
 * util_parse_size, ipc's table names through shm_default_name), so that a
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

/* ---- the settings ------------------------------------------------------------------- */

typedef enum { K_LONG, K_SIZE, K_CHOICE, K_NAME, K_TABLE, K_PATH } kind_t;

static const char *const log_levels[] = { "error", "warn", "info", "debug", NULL };
static const char *const iter_syncs[] = { "auto", "every", NULL };

typedef struct setting {
    const char *opt;          /* long option */
    const char *var;          /* the variable it sets */
    kind_t kind;
    long min, max;            /* K_LONG */
    int zero_ok;              /* K_SIZE: 0 accepted */
    const char *const *choices;
    const char *arg;          /* in --help */
    const char *help;
} setting_t;

static const setting_t settings[] = {
    { "priority", "SALUS_PRIORITY", K_LONG, 0, 100, 0, NULL, "N",
      "priority, 0 to 100, higher is more important (default 50)" },
    { "mem", "SALUS_MEM_LIMIT", K_SIZE, 0, 0, 0, NULL, "SIZE",
      "memory limit per device: 8G, 512M, ... or a percentage of the budget (50%)" },
    { "reserve", "SALUS_MEM_RESERVE", K_SIZE, 0, 0, 1, NULL, "SIZE",
      "memory guaranteed to the job; it waits for admission until it fits" },
    { "policy", "SALUS_POLICY", K_CHOICE, 0, 0, 0, sched_policy_names, "NAME",
      "policy if this job is the first on its GPU: fifo, fair, priority, srtf, pack" },
    { "iterations", "SALUS_ITERATIONS", K_LONG, 1, 1000000000000L, 0, NULL, "N",
      "the job's length in iterations (srtf ranks by remaining time)" },
    { "quantum", "SALUS_QUANTUM_MS", K_LONG, 0, 3600000, 0, NULL, "MS",
      "least time a holder keeps the GPU before yielding to an equal waiter (100)" },
    { "max-slice", "SALUS_MAX_SLICE_MS", K_LONG, 1, 3600000, 0, NULL, "MS",
      "a holder that reaches no iteration boundary yields after this long (2000)" },
    { "iter-sync", "SALUS_ITER_SYNC", K_CHOICE, 0, 0, 0, iter_syncs, "auto|every",
      "every host sync ends an iteration, or the detector finds which do (auto)" },
    { "mem-wait", "SALUS_MEM_WAIT_MS", K_LONG, 0, 24L * 3600 * 1000, 0, NULL, "MS",
      "over a limit, wait this long for peers to free memory before failing (0)" },
    { "headroom", "SALUS_MEM_HEADROOM", K_SIZE, 0, 0, 1, NULL, "SIZE",
      "memory left to contexts, if this job is the first on its GPU (5%)" },
    { "name", "SALUS_NAME", K_NAME, 0, 0, 0, NULL, "NAME",
      "the name salus-top shows (default: the program, or python's script)" },
    { "table", "SALUS_TABLE", K_TABLE, 0, 0, 0, NULL, "NAME",
      "the arbitration table to join (default /salus-<uid>)" },
    { "report", "SALUS_REPORT", K_PATH, 0, 0, 0, NULL, "FILE",
      "append a JSON line of the job's counters to FILE at exit" },
    { "log", "SALUS_LOG", K_CHOICE, 0, 0, 0, log_levels, "LEVEL",
      "libsalus's messages: error, warn (default), info, debug" },
};
#define NSETTINGS ((int)(sizeof settings / sizeof *settings))

/* ---- checking a value ------------------------------------------------------------- */

static void choices_text(const char *const *c, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; c[i] && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", c[i]);
}

/* 0, or says what is wrong (exit status 2 follows). */
static int check(const setting_t *s, const char *v)
{
    char why[256];
    long n;
    uint64_t bytes;
    switch (s->kind) {
    case K_LONG:
        if (top_parse_long(v, s->min, s->max, &n) == 0)
            return 0;
        snprintf(why, sizeof why, "it takes a whole number from %ld to %ld", s->min, s->max);
        break;
    case K_SIZE:
        if (util_parse_size(v, 100, &bytes) == 0 &&
            (s->zero_ok || bytes > 0 || v[strlen(v) - 1] == '%'))
            return 0;
        snprintf(why, sizeof why, "it takes a size: bytes with an optional K, M, G or T "
                 "suffix (powers of 1024, e.g. 512M, 1.5G), or a percentage in (0, 100] "
                 "(e.g. 25%%)%s", s->zero_ok ? "" : "; 0 would refuse every allocation");
        break;
    case K_CHOICE: {
        for (int i = 0; s->choices[i]; i++)
            if (strcasecmp(v, s->choices[i]) == 0)
                return 0;
        size_t at = (size_t)snprintf(why, sizeof why, "it takes one of: ");
        choices_text(s->choices, why + at, sizeof why - at);
        break;
    }
    case K_NAME: {
        /* ipc keeps SHM_NAME_BYTES - 1 bytes and shows controls as '?'. */
        size_t len = strlen(v), ok = len > 0 && len < SHM_NAME_BYTES;
        for (size_t i = 0; ok && i < len; i++)
            ok = (unsigned char)v[i] >= 0x20 && (unsigned char)v[i] < 0x7f;
        if (ok)
            return 0;
        snprintf(why, sizeof why, "it takes 1 to %d printable ASCII characters",
                 SHM_NAME_BYTES - 1);
        break;
    }
    case K_TABLE: {
        char name[SHM_TABLE_NAME_BYTES], group[SHM_TABLE_NAME_BYTES];
        char *old = getenv("SALUS_TABLE") ? strdup(getenv("SALUS_TABLE")) : NULL;
        setenv("SALUS_TABLE", v, 1);
        int rc = top_default_table(name, sizeof name, group, sizeof group);
        if (old) {
            setenv("SALUS_TABLE", old, 1);
            free(old);
        } else {
            unsetenv("SALUS_TABLE");
        }
        if (rc == 0)
            return 0;
        snprintf(why, sizeof why, "a table name takes letters, digits, '.', '_' and '-', "
                 "at most 62, after an optional '/'");
        break;
    }
    case K_PATH:
        if (*v && strlen(v) < PATH_MAX)
            return 0;
        snprintf(why, sizeof why, "it takes a file name");
        break;
    }
    fprintf(stderr, "salus run: --%s \"%s\" is not accepted: %s\n"
            "salus run: see 'salus run --help'\n", s->opt, v, why);
    return -1;
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
    for (int i = 0; i < NSETTINGS; i++) {
        char left[48];
        snprintf(left, sizeof left, "--%s %s", settings[i].opt, settings[i].arg);
        fprintf(f, "  %-22s %s\n  %-22s [%s]\n", left, settings[i].help, "", settings[i].var);
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
    struct option longs[NSETTINGS + 2];
    for (int i = 0; i < NSETTINGS; i++)
        longs[i] = (struct option){ settings[i].opt, required_argument, NULL, 1000 + i };
    longs[NSETTINGS] = (struct option){ "help", no_argument, NULL, 'h' };
    longs[NSETTINGS + 1] = (struct option){ NULL, 0, NULL, 0 };

    const char *values[NSETTINGS] = { 0 };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+:h", longs, NULL)) != -1) {
        if (c == 'h') {
            salus_run_usage(stdout);
            return TOP_EXIT_OK;
        }
        if (c >= 1000 && c < 1000 + NSETTINGS) {
            if (check(&settings[c - 1000], optarg) != 0)
                return TOP_EXIT_USAGE;
            values[c - 1000] = optarg;
            continue;
        }
        return salus_bad("run", argv[optind - 1],
                         c == ':' ? "needs a value" : "is not an option of salus run");
    }
    if (optind >= argc)
        return salus_bad("run", "COMMAND", "is missing: salus run [options] -- COMMAND [ARGS...]");

    char lib[PATH_MAX * 2 + 64];
    if (find_library(lib, sizeof lib) != 0) {
        fprintf(stderr, "salus run: libsalus.so is not installed beside salus (looked for "
                "%s); reinstall Salus (make install) or build it (make)\n", lib);
        return TOP_EXIT_FAIL;
    }
    for (int i = 0; i < NSETTINGS; i++)
        if (values[i] && setenv(settings[i].var, values[i], 1) != 0)
            return TOP_EXIT_FAIL;
    if (set_preload(lib) != 0)
        return TOP_EXIT_FAIL;
    execvp(argv[optind], argv + optind);
    int err = errno;
    fprintf(stderr, "salus run: cannot run %s: %s\n", argv[optind], strerror(err));
    return err == ENOENT ? 127 : 126;
}
