/*
 * salus_control.c - `salus renice PID|NAME N` and `salus limit PID|NAME
 * SIZE`: change one running process's priority or memory limit, from the
 * command line; the work is control.c's, shared with salus-top's keys.
 *
 * Divided into: help; the shared command line; the two commands.
 *
 * Exit statuses: 0 changed (every process named); 1 no such process, or a
 * change refused or failed; 2 bad arguments.
 */
#include "salus.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define MAX_TARGETS 64

/* ---- help ------------------------------------------------------------------------ */

void salus_renice_usage(FILE *f)
{
    fprintf(f,
"usage: salus renice PID|NAME PRIORITY [-t TABLE]\n"
"\n"
"Change the priority of a running process (every process of that name):\n"
"0 to 100, higher first; fair shares the GPU by it, priority and srtf order by\n"
"it.  It takes effect at the process's next iteration boundary (or the\n"
"holder's, whichever decides first).  You may change your own processes, or\n"
"any process of a group table (SALUS_GROUP) whose group you are in.\n"
"\n"
"  -t, --table NAME   only this table (default: every table of this user)\n"
"  -h, --help         this text\n"
"\n"
"examples:\n"
"  salus renice 4242 90            process 4242 first\n"
"  salus renice serve 80           every process named serve\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the default table.\n"
"exit status: 0 changed, 1 no such process or not allowed, 2 bad arguments.\n");
}

void salus_limit_usage(FILE *f)
{
    fprintf(f,
"usage: salus limit PID|NAME SIZE [-t TABLE] [--force]\n"
"\n"
"Change the device-memory limit of a running process (every process of that\n"
"name), on each of its GPUs: SIZE as 20G, 512M, 1.5GiB, 25%% (of each GPU's\n"
"budget; 100%% lifts the limit).  Raised, it lets the process allocate at\n"
"once.  Lowered below what the process holds, nothing is taken from it and\n"
"it is not made to fail: it goes on allocating up to its last iteration's\n"
"peak (what a training job frees and allocates again each iteration), and\n"
"the limit takes hold as that peak falls, at each iteration's end, until its\n"
"footprint is within the limit; it says so once on its stderr.  A job that\n"
"pages (SALUS_SWAP=on) is held to the limit itself, and gets what it pages\n"
"out back only within its limit: below what it holds, once paged out it\n"
"leaves the GPU to its peers and waits until the limit is raised again.\n"
"Refused below the memory it has reserved, and below what it can never free\n"
"while it runs (its contexts and modules): every allocation would be refused;\n"
"--force sets such a limit anyway.  You may\n"
"change your own processes, or any process of a group table whose group you\n"
"are in.\n"
"\n"
"  -t, --table NAME   only this table (default: every table of this user)\n"
"  -f, --force        set a limit below what it can never free while it runs\n"
"  -h, --help         this text\n"
"\n"
"examples:\n"
"  salus limit 4242 8G\n"
"  salus limit train 50%%\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the default table.\n"
"exit status: 0 changed, 1 no such process or not allowed, 2 bad arguments.\n");
}

/* ---- the shared command line ------------------------------------------------------------ */

typedef struct control_args {
    const char *who, *value, *table;
    int force;                /* --force: salus limit only */
} control_args_t;

/* 0, -1 after --help, or TOP_EXIT_USAGE. */
static int parse(const char *cmd, int argc, char **argv, void (*usage)(FILE *),
                 control_args_t *a)
{
    static const struct option longs[] = {
        { "table", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { "force", no_argument, NULL, 'f' },
        { NULL, 0, NULL, 0 },
    };
    int c, limit = strcmp(cmd, "limit") == 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, limit ? ":t:hf" : ":t:h", longs, NULL)) != -1) {
        switch (c) {
        case 't': a->table = optarg; break;
        case 'h': usage(stdout); return -1;
        case 'f':                             /* getopt_long knows --force for both */
            if (!limit)
                return salus_bad(cmd, argv[optind - 1], "is not an option (it takes -t TABLE)");
            a->force = 1;
            break;
        case ':': return salus_bad(cmd, argv[optind - 1], "needs a value");
        default:
            return salus_bad(cmd, argv[optind - 1], limit ? "is not an option (it takes -t "
                             "TABLE, --force)" : "is not an option (it takes -t TABLE)");
        }
    }
    if (argc - optind < 2)
        return salus_bad(cmd, argc - optind ? "the value" : "PID|NAME", "is missing");
    if (argc - optind > 2)
        return salus_bad(cmd, argv[optind + 2], "is one argument too many");
    a->who = argv[optind];
    a->value = argv[optind + 1];
    return 0;
}

typedef int (*change_fn)(const top_target_t *t, const void *value, char *msg, size_t len);

/* Find the processes a->who names and change each; the exit status. */
static int apply(const char *cmd, const control_args_t *a, change_fn change, const void *value)
{
    char name[SHM_TABLE_NAME_BYTES + 1];
    const char *tables[2] = { NULL, NULL };
    if (a->table) {
        snprintf(name, sizeof name, "%s%s", a->table[0] == '/' ? "" : "/", a->table);
        tables[0] = name;
    }
    top_collect_opts_t o = { .tables = a->table ? tables : NULL };
    top_collector_t *c;
    top_snap_t s;
    if (top_collector_new(&o, &c) != 0)
        return TOP_EXIT_FAIL;
    top_snap_init(&s);
    int rc = top_collect(c, &s);
    top_collector_free(c);
    static top_target_t found[MAX_TARGETS];
    int n = rc == 0 ? top_find_targets(&s, a->who, found, MAX_TARGETS) : 0;
    if (rc == 0 && n == 0)
        fprintf(stderr, "salus %s: no process %s in %s%s\n", cmd, a->who,
                a->table ? "table " : "the tables of this user",
                a->table ? name : (s.note[0] ? "" : ""));
    top_snap_free(&s);
    if (rc != 0 || n == 0)
        return TOP_EXIT_FAIL;
    int failed = 0;
    for (int i = 0; i < n; i++) {
        char msg[1024];
        int r = change(&found[i], value, msg, sizeof msg);
        fprintf(r == 0 ? stdout : stderr, "%s%s\n", r == 0 ? "" : "salus: ", msg);
        failed |= r != 0;
    }
    return failed ? TOP_EXIT_FAIL : TOP_EXIT_OK;
}

/* ---- the two commands ---------------------------------------------------------------------- */

/* `"value" why`, as salus_bad says it. */
static int bad_value(const char *cmd, const char *value, const char *why)
{
    char what[160];
    snprintf(what, sizeof what, "\"%.100s\"", value);
    return salus_bad(cmd, what, why);
}

static int renice_one(const top_target_t *t, const void *value, char *msg, size_t len)
{
    return top_renice(t, (int)*(const long *)value, msg, len);
}

static int limit_force;       /* --force, for limit_one */

static int limit_one(const top_target_t *t, const void *value, char *msg, size_t len)
{
    return top_limit(t, value, limit_force, msg, len);
}

int salus_renice(int argc, char **argv)
{
    control_args_t a = { 0 };
    int rc = parse("renice", argc, argv, salus_renice_usage, &a);
    if (rc != 0)
        return rc < 0 ? TOP_EXIT_OK : rc;
    long prio;
    if (top_parse_long(a.value, 0, 100, &prio) != 0)
        return bad_value("renice", a.value, "is not a priority: it takes a whole number from "
                         "0 to 100 (higher first)");
    return apply("renice", &a, renice_one, &prio);
}

int salus_limit(int argc, char **argv)
{
    control_args_t a = { 0 };
    int rc = parse("limit", argc, argv, salus_limit_usage, &a);
    if (rc != 0)
        return rc < 0 ? TOP_EXIT_OK : rc;
    uint64_t v;
    if (util_parse_size(a.value, 1, &v) != 0 || v == 0)
        return bad_value("limit", a.value, "is not a size: it takes 20G, 512M, 1.5GiB, 25% (of "
                         "the GPU's budget; 100% is the whole budget) or exact bytes from 1 MiB "
                         "as 2097152B; not 0, which would refuse every allocation");
    limit_force = a.force;
    return apply("limit", &a, limit_one, a.value);
}
