/*
 * salus.c - the salus command: `run` (salus_run.c), `status` (salus-top
 * --once, top.c), `policy`, `renice` and `limit` (salus_control.c) and
 * `reset`, and the help of each.
 *
 * Divided into: help and errors; policy; reset; the dispatcher.
 *
 * Exit statuses: 0 done; 1 the operation failed or was refused (a table in
 * use, none to change); 2 bad arguments, after naming the argument and the
 * forms it accepts.
 */
#include "salus.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* ---- help and errors --------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
"usage: salus COMMAND [options]\n"
"\n"
"Share one NVIDIA GPU among unmodified deep-learning processes: they lease the\n"
"GPU to each other at iteration boundaries and have every allocation counted\n"
"against limits, through a shared-memory table; libsalus.so, preloaded into\n"
"each process, does the work (see libsalus(7)).\n"
"\n"
"commands:\n"
"  run [options] [--] COMMAND [ARGS...]\n"
"                  run COMMAND under Salus (--priority, --mem, --reserve,\n"
"                  --policy, --iterations, --quantum, --name, ...)\n"
"  status [options]\n"
"                  who shares which GPU, once (the options of salus-top:\n"
"                  --json, --prometheus, -t TABLE, -a); salus-top watches live\n"
"  policy [NAME] [--quantum MS] [--device N] [-t TABLE]\n"
"                  show a GPU's policy, or change it for the running processes:\n"
"                 " SCHED_POLICY_WORDS "\n"
"  renice PID|NAME PRIORITY [-t TABLE]\n"
"                  change a running process's priority (0..100)\n"
"  limit PID|NAME SIZE [-t TABLE]\n"
"                  change a running process's memory limit (20G, 512M, 25%%)\n"
"  reset [--force] [--all] [-t TABLE]\n"
"                  remove a stale table; refused while live processes use it\n"
"  help [COMMAND]  this text, or a command's (as salus COMMAND --help)\n"
"  --version       the version of Salus\n"
"\n"
"examples:\n"
"  salus run --priority 80 --mem 20G -- python train.py\n"
"  salus run --name serve -- python serve.py &\n"
"  salus status\n"
"  salus renice serve 90\n"
"  salus policy pack\n"
"  salus reset\n"
"\n"
"environment: SALUS_TABLE names the table (default /salus-<uid>), SALUS_GROUP\n"
"shares one among a group's users; the other SALUS_* variables are libsalus's\n"
"(libsalus(7)).\n"
"exit status: 0 done, 1 failed or refused, 2 bad arguments.\n"
"See salus(1), salus-top(1), libsalus(7).\n");
}

static void policy_usage(FILE *f)
{
    fprintf(f,
"usage: salus policy [NAME] [--quantum MS] [--device N] [-t TABLE]\n"
"\n"
"Without NAME or --quantum, show the policy of each GPU of the table.  With\n"
"them, change it: the running processes follow at their next launch, and\n"
"processes that join later keep it (the policy belongs to the table's GPU).\n"
"\n");
    for (int i = 0; i < SCHED_POLICY_COUNT; i++)
        fprintf(f, "%-21s%-10s%s\n", i == 0 ? "  NAME" : "", sched_policy_names[i],
                sched_policy_help[i]);
    fprintf(f,
"  --quantum MS       least time a holder keeps the GPU before yielding to an\n"
"                     equal waiter, 0 to 3600000\n"
"  --device N         only GPU N of the table (default: every GPU in use, or 0)\n"
"  -t, --table NAME   the table (default SALUS_TABLE, or /salus-<uid>)\n"
"  -h, --help         this text\n"
"\n"
"examples:\n"
"  salus policy                    show\n"
"  salus policy pack               let every job run at once\n"
"  salus policy fair --quantum 50  equal shares, switching every 50 ms at most\n"
"  salus policy srtf --device 1 -t salus-group-ml\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the default table.\n"
"exit status: 0 done, 1 no such table or it cannot be changed, 2 bad arguments.\n");
}

static void reset_usage(FILE *f)
{
    fprintf(f,
"usage: salus reset [--force] [--all] [-t TABLE]\n"
"\n"
"Remove an arbitration table, so that the next process makes a fresh one: for\n"
"a table left by another version of Salus, or one whose policy or memory\n"
"settings you want to start over.  Refused while live processes use it (they\n"
"are named), unless --force: they then go on with the old table, apart from\n"
"processes that start afterwards.\n"
"\n"
"  --force            remove it even while processes use it\n"
"  --all              every table of this user (/dev/shm/salus-*) that no live\n"
"                     process uses\n"
"  -t, --table NAME   the table (default SALUS_TABLE, or /salus-<uid>)\n"
"  -h, --help         this text\n"
"\n"
"examples:\n"
"  salus reset                     the table of SALUS_TABLE, or /salus-<uid>\n"
"  salus reset --all               every table of yours nobody uses\n"
"  salus reset --force -t salus-1000\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the default table.\n"
"exit status: 0 removed (or nothing to remove), 1 refused or failed, 2 bad\n"
"arguments.\n");
}

int salus_bad(const char *cmd, const char *what, const char *why)
{
    fprintf(stderr, "salus %s: %s %s\nsalus %s: see 'salus %s --help'\n", cmd, what, why,
            cmd, cmd);
    return TOP_EXIT_USAGE;
}

/* `opt "value"` is not accepted: why. */
static int bad_value(const char *cmd, const char *opt, const char *value, const char *why)
{
    char what[256];
    snprintf(what, sizeof what, "%s \"%.200s\"", opt, value);
    char because[512];
    snprintf(because, sizeof because, "is not accepted: %s", why);
    return salus_bad(cmd, what, because);
}

/* The table a command works on: -t, else SALUS_TABLE / SALUS_GROUP / uid. */
static int table_name(const char *given, char *name, size_t len, char *group, size_t glen)
{
    if (given) {
        snprintf(name, len, "%s%s", given[0] == '/' ? "" : "/", given);
        top_table_group(name, group, glen);
        return 0;
    }
    return top_default_table(name, len, group, glen);
}

/* ---- policy ------------------------------------------------------------------------- */

typedef struct policy_args {
    int policy;              /* -1: keep */
    long quantum;            /* -1: keep */
    long device;             /* -1: all in use */
    const char *table;
} policy_args_t;

static int policy_parse(int argc, char **argv, policy_args_t *a)
{
    static const struct option longs[] = {
        { "quantum", required_argument, NULL, 'q' },
        { "device", required_argument, NULL, 'D' },
        { "table", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'q':
            if (top_parse_long(optarg, 0, 3600000, &a->quantum) != 0)
                return bad_value("policy", "--quantum", optarg, "it takes milliseconds, a "
                                 "whole number from 0 to 3600000");
            break;
        case 'D':
            if (top_parse_long(optarg, 0, SHM_MAX_DEVICES - 1, &a->device) != 0)
                return bad_value("policy", "--device", optarg, "it takes a GPU index of the "
                                 "table, 0 to 15");
            break;
        case 't': a->table = optarg; break;
        case 'h': policy_usage(stdout); return -1;
        case ':': return salus_bad("policy", argv[optind - 1], "needs a value");
        default:  return salus_bad("policy", argv[optind - 1], "is not an option of salus policy");
        }
    }
    if (optind < argc) {
        a->policy = top_policy_of(argv[optind]);
        const char *guess = a->policy < 0 ? top_nearest(argv[optind], sched_policy_names,
                                                        SCHED_POLICY_COUNT) : NULL;
        char why[256];
        snprintf(why, sizeof why, "is not a policy: it takes" SCHED_POLICY_WORDS "%s%s%s",
                 guess ? "; did you mean " : "", guess ? guess : "", guess ? "?" : "");
        if (a->policy < 0)
            return salus_bad("policy", argv[optind], why);
        if (optind + 1 < argc)
            return salus_bad("policy", argv[optind + 1], "is one argument too many");
    }
    return 0;
}

static void policy_show(shm_table_t *t, const char *name, int d)
{
    sched_device_info_t si;
    if (sched_read_device(t, d, &si) != 0) {
        printf("GPU %d [%s]: not in use yet\n", d, name);
        return;
    }
    printf("GPU %d [%s]: policy %s, quantum %u ms, max slice %u ms, %d waiting, "
           "%llu switches\n", d, name, sched_policy_names[si.policy], (unsigned)si.quantum_ms,
           (unsigned)si.max_slice_ms, si.nwaiters, (unsigned long long)si.switches);
}

/* Whether a live process on table device d declared what srtf ranks by. */
static int device_has_lengths(shm_table_t *t, int d)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_info_t si;
        if (shm_slot_alive(t, s) && sched_read_slot(t, s, &si) == 0 &&
            (si.devices & (1u << d)) && (si.declared || si.length_ms || si.has_end))
            return 1;
    }
    return 0;
}

static int policy_set(shm_table_t *t, const char *name, int d, const policy_args_t *a)
{
    sched_device_info_t old;
    int had = sched_read_device(t, d, &old) == 0;
    sched_policy_t p = a->policy >= 0 ? (sched_policy_t)a->policy
                       : had ? old.policy : SCHED_POLICY_FAIR;
    int rc = sched_set_policy_table(t, d, p, (int)a->quantum);
    if (rc != 0) {
        fprintf(stderr, "salus policy: GPU %d of %s: cannot change it: %s\n", d, name,
                strerror(-rc));
        top_audit("policy: GPU %d of %s: %s refused: %s", d, name, sched_policy_names[p],
                  strerror(-rc));
        return TOP_EXIT_FAIL;
    }
    sched_device_info_t now;
    if (sched_read_device(t, d, &now) != 0)
        now.quantum_ms = 0;
    top_audit("policy: GPU %d of %s: %s -> %s, quantum %u ms", d, name,
              had ? sched_policy_names[old.policy] : "-", sched_policy_names[p],
              (unsigned)now.quantum_ms);
    printf("GPU %d [%s]: policy %s", d, name, sched_policy_names[p]);
    if (had && old.policy != p)
        printf(" (was %s)", sched_policy_names[old.policy]);
    printf(", quantum %u ms\n", (unsigned)now.quantum_ms);
    if (p == SCHED_POLICY_SRTF && !device_has_lengths(t, d))
        printf("GPU %d [%s]: no job there declares its length (SALUS_ITERATIONS, "
               "SALUS_LENGTH_MS or SALUS_END_TIME: salus run --iterations, --length, "
               "--end-time): until one does, srtf orders them as fair does\n", d, name);
    return TOP_EXIT_OK;
}

static int cmd_policy(int argc, char **argv)
{
    policy_args_t a = { .policy = -1, .quantum = -1, .device = -1 };
    int rc = policy_parse(argc, argv, &a);
    if (rc != 0)
        return rc < 0 ? TOP_EXIT_OK : rc;
    char name[SHM_TABLE_NAME_BYTES], group[SHM_TABLE_NAME_BYTES];
    if (table_name(a.table, name, sizeof name, group, sizeof group) != 0)
        return salus_bad("policy", "SALUS_TABLE", "is not a table name: letters, digits, "
                         "'.', '_', '-'");
    int change = a.policy >= 0 || a.quantum >= 0;
    shm_table_t *t;
    rc = top_open_table(name, group, change, &t);
    if (rc != 0) {
        fprintf(stderr, "salus policy: table %s: %s\n", name, top_open_error(rc));
        if (rc == -ENOENT)
            fprintf(stderr, "salus policy: the first process on a GPU sets its policy: "
                    "start jobs with salus run --policy NAME (or SALUS_POLICY=NAME)\n");
        return TOP_EXIT_FAIL;
    }
    uint32_t devs = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_device_info_t si;
        if (sched_read_device(t, d, &si) == 0)
            devs |= 1u << d;
    }
    if (a.device >= 0)
        devs = 1u << a.device;
    else if (!devs && change)
        devs = 1;                              /* nobody on a GPU yet: GPU 0 */
    if (!devs)
        printf("table %s: no GPU in use yet\n", name);
    rc = TOP_EXIT_OK;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        if (!(devs & (1u << d)))
            continue;
        if (change)
            rc |= policy_set(t, name, d, &a);
        else
            policy_show(t, name, d);
    }
    shm_close_table(t);
    return rc;
}

/* ---- reset ------------------------------------------------------------------------- */

/* "1234 (train), 1240 (serve)" of the table's live processes; their count. */
static int live_processes(shm_table_t *t, char *buf, size_t len)
{
    size_t at = 0;
    int n = 0;
    buf[0] = '\0';
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        if (shm_slot_ident(t, s, &id) != 0 || !shm_slot_alive(t, s))
            continue;
        top_sanitize(id.name);
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%d (%s)", n ? ", " : "",
                                   (int)id.pid, id.name);
        n++;
    }
    return n;
}

static int reset_one(const char *name, const char *group, int force)
{
    shm_table_t *t;
    char who[2048];
    int n = 0, rc = top_open_table(name, group, 0, &t);
    if (rc == -ENOENT) {
        shm_forget_claims(name);                 /* what a removal left, if anything */
        printf("no table %s: nothing to remove\n", name);
        return TOP_EXIT_OK;
    }
    if (rc == 0) {
        n = live_processes(t, who, sizeof who);
        shm_close_table(t);
    } else if (rc != -EPROTO && rc != -EAGAIN && !force) {
        /* Not ours to judge (another user's, open to everyone): only on request. */
        fprintf(stderr, "salus reset: table %s: %s; remove it anyway with --force\n", name,
                top_open_error(rc));
        return TOP_EXIT_FAIL;
    }
    if (n > 0 && !force) {
        fprintf(stderr, "salus reset: table %s is in use by %d live process%s: %s\n"
                "salus reset: stop %s first, or remove it anyway with --force\n", name, n,
                n == 1 ? "" : "es", who, n == 1 ? "it" : "them");
        return TOP_EXIT_FAIL;
    }
    rc = shm_unlink_table(name);
    top_audit("reset%s: table %s %s, %d live process%s", force ? " --force" : "", name,
              rc != 0 && rc != -ENOENT ? "not removed" : "removed", n, n == 1 ? "" : "es");
    if (rc != 0 && rc != -ENOENT) {
        fprintf(stderr, "salus reset: cannot remove %s: %s\n", name, strerror(-rc));
        return TOP_EXIT_FAIL;
    }
    printf("removed table %s", name);
    if (n > 0)
        printf("; its %d process%s keep%s the old one until %s exit, new processes make "
               "a new one", n, n == 1 ? "" : "es", n == 1 ? "s" : "", n == 1 ? "it" : "they");
    printf("\n");
    return TOP_EXIT_OK;
}

/* Every table of this user that nobody uses (and with --force, all of them). */
static int reset_all(int force)
{
    top_collect_opts_t o = { .all = 1 };
    top_collector_t *c;
    top_snap_t s;
    if (top_collector_new(&o, &c) != 0)
        return TOP_EXIT_FAIL;
    top_snap_init(&s);
    int rc = top_collect(c, &s);
    top_collector_free(c);                       /* closed before they are removed */
    if (rc != 0) {
        top_snap_free(&s);
        return TOP_EXIT_FAIL;
    }
    int removed = 0, kept = 0;
    rc = TOP_EXIT_OK;
    for (int i = 0; i < s.ntables; i++) {
        if (s.tables[i].nprocs > 0 && !force) {
            printf("kept table %s: %d live process%s\n", s.tables[i].name,
                   s.tables[i].nprocs, s.tables[i].nprocs == 1 ? "" : "es");
            kept++;
            continue;
        }
        char group[SHM_TABLE_NAME_BYTES];
        top_table_group(s.tables[i].name, group, sizeof group);
        rc |= reset_one(s.tables[i].name, group, force);
        removed++;
    }
    if (!removed && !kept)
        printf("no table to remove\n");
    top_snap_free(&s);
    int claims = shm_forget_claims(NULL);       /* of tables removed some other way */
    if (claims > 0)
        printf("removed %d GPU claim%s of tables that are gone\n", claims,
               claims == 1 ? "" : "s");
    return rc;
}

static int cmd_reset(int argc, char **argv)
{
    static const struct option longs[] = {
        { "force", no_argument, NULL, 'f' },
        { "all", no_argument, NULL, 'a' },
        { "table", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c, force = 0, all = 0;
    const char *table = NULL;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:h", longs, NULL)) != -1) {
        switch (c) {
        case 'f': force = 1; break;
        case 'a': all = 1; break;
        case 't': table = optarg; break;
        case 'h': reset_usage(stdout); return TOP_EXIT_OK;
        case ':': return salus_bad("reset", argv[optind - 1], "needs a value");
        default:  return salus_bad("reset", argv[optind - 1], "is not an option of salus reset");
        }
    }
    if (optind < argc)
        return salus_bad("reset", argv[optind], "is not an option of salus reset (it takes "
                         "--force, --all, -t TABLE)");
    if (all && table)
        return salus_bad("reset", "--all", "and -t exclude each other");
    if (all)
        return reset_all(force);
    char name[SHM_TABLE_NAME_BYTES], group[SHM_TABLE_NAME_BYTES];
    if (table_name(table, name, sizeof name, group, sizeof group) != 0)
        return salus_bad("reset", table ? "-t" : "SALUS_TABLE", "is not a table name: '/' "
                         "then letters, digits, '.', '_', '-'");
    return reset_one(name, group, force);
}

/* ---- the dispatcher ------------------------------------------------------------------ */

static int help(const char *cmd)
{
    if (!cmd)
        usage(stdout);
    else if (strcmp(cmd, "run") == 0)
        salus_run_usage(stdout);
    else if (strcmp(cmd, "policy") == 0)
        policy_usage(stdout);
    else if (strcmp(cmd, "reset") == 0)
        reset_usage(stdout);
    else if (strcmp(cmd, "renice") == 0)
        salus_renice_usage(stdout);
    else if (strcmp(cmd, "limit") == 0)
        salus_limit_usage(stdout);
    else if (strcmp(cmd, "status") == 0)
        return top_main(2, (char *[]){ "status", "--help", NULL }, "salus status", 1);
    else
        return salus_bad("help", cmd, "is not a command: run, status, policy, renice, limit, "
                         "reset");
    return TOP_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return TOP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return help(NULL);
    if (strcmp(cmd, "help") == 0)
        return help(argc > 2 ? argv[2] : NULL);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        top_print_version(stdout, "salus");
        return TOP_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0)
        return salus_run(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return top_main(argc - 1, argv + 1, "salus status", 1);
    if (strcmp(cmd, "policy") == 0)
        return cmd_policy(argc - 1, argv + 1);
    if (strcmp(cmd, "reset") == 0)
        return cmd_reset(argc - 1, argv + 1);
    if (strcmp(cmd, "renice") == 0)
        return salus_renice(argc - 1, argv + 1);
    if (strcmp(cmd, "limit") == 0)
        return salus_limit(argc - 1, argv + 1);
    static const char *const cmds[] = { "run", "status", "policy", "renice", "limit", "reset",
                                        "help" };
    const char *guess = top_nearest(cmd, cmds, (int)(sizeof cmds / sizeof *cmds));
    fprintf(stderr, "salus: \"%s\" is not a command: it takes run, status, policy, renice, "
            "limit, reset or help%s%s%s\nsalus: see 'salus --help'\n", cmd,
            guess ? "; did you mean " : "", guess ? guess : "", guess ? "?" : "");
    return TOP_EXIT_USAGE;
}
