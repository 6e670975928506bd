/*
 * top.c - salus-top's command line, shared with `salus status`: options,
 * then one of three modes: the live view (draw.c), one snapshot (--once:
 * text, --json or --prometheus), or a stream of JSON lines (--json without
 * --once).
 *
 * Divided into: help; option parsing; the modes; top_main.
 *
 * Returns TOP_EXIT_OK, TOP_EXIT_FAIL when collecting or the terminal fails,
 * TOP_EXIT_USAGE (2) for bad arguments, after saying which argument is wrong
 * and what it accepts.
 */
#include "top.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "salus_version.h"

#define DEFAULT_DELAY_S   2.0
#define DEFAULT_WINDOW_S  0.5

static const char *const sort_names[TOP_NCOLS] = {
    [TOP_COL_PID] = "pid", [TOP_COL_USER] = "user", [TOP_COL_NAME] = "name",
    [TOP_COL_PRIO] = "prio", [TOP_COL_STATE] = "state", [TOP_COL_MEM] = "mem",
    [TOP_COL_ITERS] = "iters", [TOP_COL_ITER_MS] = "iter_ms", [TOP_COL_GPU] = "gpu",
    [TOP_COL_WAIT] = "wait", [TOP_COL_SWITCHES] = "switches", [TOP_COL_HIST] = "history",
};

/* ---- help ------------------------------------------------------------------------ */

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
"usage: %s [options]\n"
"\n"
"A live view of the GPUs shared through Salus: per device its memory, policy,\n"
"lease holder and waiters; per process its priority, state, memory, iterations,\n"
"and its share of GPU time and of waiting over the last interval.  It reads\n"
"every Salus table this user may open (SALUS_TABLE or /salus-<uid>, and\n"
"/dev/shm/salus-* tables in use), read-only.\n"
"\n"
"options:\n"
"  -d, --delay SECONDS   refresh interval (default 2; 0.1 to 3600); with --once,\n"
"                        the interval over which GPU%% and WAIT%% are measured\n"
"                        (default 0.5; 0: one sample, no shares)\n"
"      --once            print one snapshot as text and exit (no curses)\n"
"      --json            one JSON object (with --once), or one per interval,\n"
"                        a line each, until interrupted\n"
"      --prometheus      one snapshot in the Prometheus text format (implies\n"
"                        --once), for node_exporter's textfile collector\n"
"  -l, --listen [ADDR]:PORT\n"
"                        serve the same at http://ADDR:PORT/metrics for a\n"
"                        Prometheus scrape, until interrupted; ADDR defaults\n"
"                        to 127.0.0.1 (give 0.0.0.0 to be reachable); each\n"
"                        local client is served the processes of the tables\n"
"                        it could open itself, a remote one the devices only\n"
"      --serve-all       with --listen: serve every process to every client\n"
"      --no-processes    with --prometheus or --listen: the devices' and tables'\n"
"                        series only (no series per process, whose pid label\n"
"                        makes new series as jobs come and go)\n"
"  -t, --table NAME      only this table (repeatable); NAME as /salus-1000 or\n"
"                        salus-1000\n"
"  -a, --all             also show tables no live process uses\n"
"  -s, --sort COLUMN     initial sort: pid, user, name, prio, state, mem, iters,\n"
"                        iter_ms, gpu (default), wait, switches\n"
"  -V, --version         the version of Salus\n"
"  -h, --help            this text\n"
"\n"
"keys (live view):\n"
"  q  quit          s  next sort column     p  change the selected GPU's policy\n"
"  I  invert sort   /  filter name or user  r  renice the selected process\n"
"  l  memory limit  k  kill (confirmed)     F7/F8  priority up/down by 10\n"
"  ?  help          Up/Down  select a row   space  refresh now\n"
"\n"
"columns: PID USER NAME PRIO (0..100) STATE (running, waiting-gpu,\n"
"waiting-mem, admission, blocked, stopped, paged-out, idle) MEM/LIMIT\n"
"(held, its contexts and modules included, as its limit counts them / the\n"
"limit: 1.3G/15G, the budget when it set none; resident+paged out,\n"
"1.0G+3.0G) ITERS (done/declared) ITER ms (mean\n"
"iteration) GPU%% (time holding the GPU) WAIT%% (time waiting for it) SWITCHES\n"
"(times handed the GPU) GPU%% LAST MINUTE (a sparkline, wide terminals).\n"
"\n"
"examples:\n"
"  %s                          watch every table of this user\n"
"  %s --once --json | jq .     one snapshot for scripts\n"
"  %s --listen :9400           an exporter on 127.0.0.1:9400/metrics\n"
"  %s --prometheus > /var/lib/node_exporter/salus.prom.tmp &&\n"
"      mv /var/lib/node_exporter/salus.prom.tmp /var/lib/node_exporter/salus.prom\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the table (see libsalus(7)).\n"
"exit status: 0 done, 1 the terminal or a table could not be used, 2 bad\n"
"arguments.  See salus-top(1).\n",
            prog, prog, prog, prog, prog);
}

/* `salus status --help`: the snapshot's options only (no live view, no keys). */
static void status_usage(FILE *f)
{
    fprintf(f,
"usage: salus status [options]\n"
"\n"
"Who shares which GPU, once: per device its memory, policy, lease holder and\n"
"waiters; per process its priority, state, memory, iterations, and its share\n"
"of GPU time and of waiting, measured over a short window.  It reads every\n"
"Salus table this user may open, read-only.  salus-top shows the same live.\n"
"\n"
"options:\n"
"  -d, --delay SECONDS   the window over which GPU%% and WAIT%% are measured\n"
"                        (default 0.5; 0: one sample, no shares; up to 3600)\n"
"      --json            one JSON object (salus-top(1) lists its fields)\n"
"      --prometheus      the Prometheus text format, for node_exporter's\n"
"                        textfile collector\n"
"  -t, --table NAME      only this table (repeatable); NAME as /salus-1000 or\n"
"                        salus-1000\n"
"  -a, --all             also show tables no live process uses\n"
"  -s, --sort COLUMN     sort: pid, user, name, prio, state, mem, iters,\n"
"                        iter_ms, gpu (default), wait, switches\n"
"  -V, --version         the version of Salus\n"
"  -h, --help            this text\n"
"\n"
"examples:\n"
"  salus status                    every table of this user\n"
"  salus status --json | jq .      for scripts\n"
"  salus status -d 2 -t salus-group-ml\n"
"\n"
"environment: SALUS_TABLE, SALUS_GROUP name the table (see libsalus(7)).\n"
"exit status: 0 done, 1 a table could not be read, 2 bad arguments.\n"
"See salus(1), salus-top(1).\n");
}

void top_print_version(FILE *f, const char *prog)
{
    fprintf(f, "%s %s (table ABI %u)\n", prog, SALUS_VERSION, (unsigned)SHM_ABI_VERSION);
}

/* ---- option parsing -------------------------------------------------------------- */

typedef struct top_args {
    double delay_s;
    int delay_given, once, json, prom, all, help, version, serve_all, no_procs;
    const char *delay_text, *listen;
    top_col_t sort;
    const char **tables;
    int ntables;
} top_args_t;

static int bad(const char *prog, const char *opt, const char *value, const char *accepted)
{
    if (value)
        fprintf(stderr, "%s: %s \"%s\" is not accepted: %s\n", prog, opt, value, accepted);
    else
        fprintf(stderr, "%s: %s %s\n", prog, opt, accepted);
    fprintf(stderr, "%s: see '%s --help'\n", prog, prog);
    return TOP_EXIT_USAGE;
}

static int add_table(top_args_t *a, const char *name)
{
    const char **t = realloc(a->tables, (size_t)(a->ntables + 2) * sizeof *t);
    if (!t)
        return -1;
    a->tables = t;
    size_t n = strlen(name) + 2;
    char *copy = malloc(n);
    if (!copy)
        return -1;
    snprintf(copy, n, "%s%s", name[0] == '/' ? "" : "/", name);
    a->tables[a->ntables++] = copy;
    a->tables[a->ntables] = NULL;
    return 0;
}

static void free_args(top_args_t *a)
{
    for (int i = 0; i < a->ntables; i++)
        free((char *)a->tables[i]);
    free(a->tables);
}

static int parse_sort(const char *text, top_col_t *out)
{
    for (int c = 0; c < TOP_NCOLS; c++)
        if (strcasecmp(text, sort_names[c]) == 0) {
            *out = (top_col_t)c;
            return 0;
        }
    return -1;
}

static int parse_args(int argc, char **argv, const char *prog, top_args_t *a)
{
    static const struct option longs[] = {
        { "delay", required_argument, NULL, 'd' },
        { "once", no_argument, NULL, 'O' },
        { "json", no_argument, NULL, 'J' },
        { "prometheus", no_argument, NULL, 'P' },
        { "table", required_argument, NULL, 't' },
        { "all", no_argument, NULL, 'a' },
        { "sort", required_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "listen", required_argument, NULL, 'l' },
        { "serve-all", no_argument, NULL, 'S' },
        { "no-processes", no_argument, NULL, 'N' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:t:as:hVl:", longs, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (top_parse_seconds(optarg, 0, 3600, &a->delay_s) != 0)
                return bad(prog, "-d", optarg, "it takes seconds, a decimal number from 0.1 "
                           "to 3600 (0 too with --once), e.g. -d 0.5");
            a->delay_given = 1;
            a->delay_text = optarg;
            break;
        case 'O': a->once = 1; break;
        case 'J': a->json = 1; break;
        case 'P': a->prom = 1; break;
        case 'a': a->all = 1; break;
        case 'h': a->help = 1; break;
        case 'V': a->version = 1; break;
        case 'l': a->listen = optarg; break;
        case 'S': a->serve_all = 1; break;
        case 'N': a->no_procs = 1; break;
        case 't':
            if (add_table(a, optarg) != 0)
                return bad(prog, "-t", optarg, "out of memory");
            break;
        case 's':
            if (parse_sort(optarg, &a->sort) != 0)
                return bad(prog, "--sort", optarg, "it takes one of pid, user, name, prio, "
                           "state, mem, iters, iter_ms, gpu, wait, switches");
            break;
        case ':':
            return bad(prog, argv[optind - 1], NULL, "needs a value");
        default:
            return bad(prog, argv[optind - 1], NULL, "is not an option");
        }
    }
    if (optind < argc)
        return bad(prog, argv[optind], NULL, "is not an option (salus-top takes no operands)");
    if (a->json && a->prom)
        return bad(prog, "--json", NULL, "and --prometheus exclude each other: choose one");
    if (a->listen && (a->json || a->prom || a->once))
        return bad(prog, "--listen", NULL, "serves Prometheus text by itself: it excludes "
                   "--once, --json and --prometheus");
    if (a->no_procs && !a->listen && !a->prom)
        return bad(prog, "--no-processes", NULL, "shapes the Prometheus series: give "
                   "--prometheus or --listen too");
    if (a->serve_all && !a->listen)
        return bad(prog, "--serve-all", NULL, "says whom --listen serves: give --listen too");
    char host[256], port[16];
    if (a->listen && top_listen_parse(a->listen, host, sizeof host, port, sizeof port) != 0)
        return bad(prog, "--listen", a->listen, "it takes [ADDRESS]:PORT, e.g. :9400 "
                   "(127.0.0.1), 0.0.0.0:9400, [::1]:9400");
    if (a->prom)
        a->once = 1;
    if (!a->once && a->delay_given && a->delay_s < 0.1)
        return bad(prog, "-d", a->delay_text, "the refresh interval of the live view is "
                   "at least 0.1 s (0 is for --once)");
    return 0;
}

/* ---- the modes ------------------------------------------------------------------------ */

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int text_width(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 1000;                     /* a file or a pipe: nothing is cut */
}

static int run_once(top_collector_t *c, const top_args_t *a)
{
    top_snap_t s;
    top_snap_init(&s);
    double window = a->delay_given ? a->delay_s : DEFAULT_WINDOW_S;
    int rc = top_collect(c, &s);
    if (rc == 0 && window > 0 && s.nprocs > 0) {
        sleep_s(window);
        rc = top_collect(c, &s);
    }
    if (rc != 0) {
        fprintf(stderr, "salus-top: cannot take a snapshot: %s\n", strerror(-rc));
        top_snap_free(&s);
        return TOP_EXIT_FAIL;
    }
    if (a->json)
        top_print_json(stdout, &s);
    else if (a->prom) {
        if (a->no_procs)
            s.nprocs = 0;             /* the devices' and tables' series only */
        top_print_prometheus(stdout, &s, 1);
    }
    else
        top_print_text(stdout, &s, a->sort, text_width());
    top_snap_free(&s);
    return fflush(stdout) == 0 ? TOP_EXIT_OK : TOP_EXIT_FAIL;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

/* --json without --once: a JSON object per interval, one per line. */
static int run_stream(top_collector_t *c, const top_args_t *a)
{
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    top_snap_t s;
    top_snap_init(&s);
    int rc = TOP_EXIT_OK;
    while (!stop) {
        if (top_collect(c, &s) != 0) {
            rc = TOP_EXIT_FAIL;
            break;
        }
        top_print_json(stdout, &s);
        if (fflush(stdout) != 0)
            break;                    /* the reader went away */
        sleep_s(a->delay_given ? a->delay_s : DEFAULT_DELAY_S);
    }
    top_snap_free(&s);
    return rc;
}

/* ---- top_main ------------------------------------------------------------------------- */

int top_main(int argc, char **argv, const char *prog, int once)
{
    top_args_t a = { .sort = TOP_COL_GPU, .once = once };
    int rc = parse_args(argc, argv, prog, &a);
    if (rc != 0 || a.help || a.version) {
        if (rc == 0 && a.help && once)
            status_usage(stdout);
        else if (rc == 0 && a.help)
            usage(stdout, prog);
        else if (rc == 0)
            top_print_version(stdout, prog);
        free_args(&a);
        return rc;
    }
    if (!a.once && !a.json && !a.listen && !isatty(STDOUT_FILENO))
        a.once = 1;                   /* a pipe or a file: a snapshot, as top -b -n 1 */
    /* The live view: what the table code says on stderr from here on (the
     * collector's first reading of SALUS_* included) goes to its message
     * line, never over the screen (capture.c). */
    int live = !a.listen && !a.once && !a.json;
    if (live)
        top_capture_start();
    top_collect_opts_t o = { .tables = a.tables, .all = a.all };
    top_collector_t *c;
    if (top_collector_new(&o, &c) != 0) {
        if (live)
            top_capture_stop();
        free_args(&a);
        return TOP_EXIT_FAIL;
    }
    if (a.listen)
        rc = top_serve(c, &(top_serve_opts_t){ .listen_at = a.listen,
                                               .serve_all = a.serve_all,
                                               .no_procs = a.no_procs });
    else if (a.once)
        rc = run_once(c, &a);
    else if (a.json)
        rc = run_stream(c, &a);
    else
        rc = top_ui_run(c, &(top_ui_opts_t){
                            .delay_s = a.delay_given ? a.delay_s : DEFAULT_DELAY_S,
                            .sort = a.sort });
    top_collector_free(c);
    if (live)
        top_capture_stop();
    free_args(&a);
    return rc;
}
