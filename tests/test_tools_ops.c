/*
 * test_tools_ops.c - running Salus day to day: the version every tool
 * prints, each command's own help, the start-up lines at the log level the
 * man page names, the workloads' help without a driver; the metrics
 * (promtool, a scrape by curl, JSON's time and host, the wide view); the
 * upgrade's status.  Live control is test_tools_control's.
 *
 * Divided into: version and help; logs; metrics; upgrades.
 *
 * Every test has its own simgpu state and table (tu_unique_name) and stops
 * its jobs; each child has a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <grp.h>

#include "test_tools_lib.h"
#include "ipc/shm_layout.h"
#include "memory/memory.h"
#include "salus_version.h"

/* ---- version and help ---------------------------------------------------------- */

static void test_version(void **state)
{
    (void)state;
    tt_need_build();
    char path[512], want[128];
    char *version = tu_read_file(tu_source_path("VERSION", path, sizeof path), NULL);
    assert_non_null(version);
    version[strcspn(version, "\n")] = '\0';
    assert_true(version[0] != '\0');
    static const char *const cmds[][3] = {
        { "bin/salus", "--version", "salus" }, { "bin/salus", "-V", "salus" },
        { "bin/salus-top", "--version", "salus-top" }, { "bin/salus-top", "-V", "salus-top" },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        tt_out_t o = TT_TOOL(cmds[i][0], cmds[i][1]);
        snprintf(want, sizeof want, "%s %s (table ABI %u)\n", cmds[i][2], version,
                 (unsigned)SHM_ABI_VERSION);
        if (o.rc != 0 || strcmp(o.out, want) != 0)
            fail_msg("%s %s: rc %d, printed \"%s\", want \"%s\"", cmds[i][0], cmds[i][1],
                     o.rc, o.out, want);
        tt_out_free(&o);
    }
    free(version);
}

static void test_control_help(void **state)
{
    (void)state;
    tt_need_build();
    static const char *const cmds[][2] = { { "renice", "--help" }, { "limit", "--help" },
                                           { "help", "renice" }, { "help", "limit" } };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        tt_out_t o = TT_TOOL("bin/salus", cmds[i][0], cmds[i][1]);
        if (o.rc != 0 || !tt_contains(o.out, "usage: salus ") ||
            !tt_contains(o.out, "example") || !tt_contains(o.out, "environment") ||
            !tt_contains(o.out, "exit status"))
            fail_msg("salus %s %s: rc %d, incomplete help:\n%s", cmds[i][0], cmds[i][1],
                     o.rc, o.out);
        tt_out_free(&o);
    }
    tt_out_t o = TT_TOOL("bin/salus", "--help");
    assert_true(tt_contains(o.out, "renice PID|NAME") && tt_contains(o.out, "limit PID|NAME"));
    tt_out_free(&o);
}

static void test_status_help(void **state)
{
    (void)state;
    tt_need_build();
    tt_out_t both[2] = { TT_TOOL("bin/salus", "status", "--help"), TT_TOOL("bin/salus", "help", "status") };
    for (int i = 0; i < 2; i++) {
        tt_out_t *o = &both[i];
        if (o->rc != 0 || !tt_contains(o->out, "usage: salus status [options]") ||
            !tt_contains(o->out, "--json") || !tt_contains(o->out, "exit status"))
            fail_msg("salus status's help: rc %d:\n%s", o->rc, o->out);
        /* salus status is a snapshot: no live view, no keys, no --once */
        if (tt_contains(o->out, "keys") || tt_contains(o->out, "--once") ||
            tt_contains(o->out, "refresh"))
            fail_msg("salus status's help speaks of the live view:\n%s", o->out);
        tt_out_free(o);
    }
}

/* The workloads' --help needs no driver; a run without one says what to do. */
static void test_workload_help_without_driver(void **state)
{
    (void)state;
    tt_need_build();
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_LIBRARY_PATH");
    tu_env_unset(&env, "LD_PRELOAD");
    static const char *const progs[] = { "bin/salus-train", "bin/salus-infer", NULL };
    for (int i = 0; progs[i]; i++) {
        tt_out_t o = tt_tool_env(&env, progs[i], "--help", (char *)NULL);
        if (o.rc != 0 || !tt_contains(o.out, "usage:"))
            fail_msg("%s --help without LD_LIBRARY_PATH: rc %d: %s%s", progs[i], o.rc,
                     o.out, o.err);
        tt_out_free(&o);
    }
    /* Without simgpu on the path: no driver, and the message says what to do
     * (where a real driver is installed, the run may succeed instead). */
    tt_out_t o = tt_tool_env(&env, "bin/salus-train", "--iterations", "2", (char *)NULL);
    if (o.rc != 0 && !tt_contains(o.err, "cannot load the CUDA driver"))
        fail_msg("salus-train without a driver: rc %d: %s", o.rc, o.err);
    assert_true(o.rc == 0 || o.rc == 1);
    tt_out_free(&o);
    tu_env_free(&env);
}

/* ---- logs ---------------------------------------------------------------------- */

/* salus-train under libsalus at SALUS_LOG=level: its standard error. */
static char *train_log(const char *level)
{
    tu_env_t env;
    char prog[512];
    tu_env_init(&env);
    tu_env_salus(&env, tt_gpu, tt_table);
    tu_env_set(&env, "SALUS_LOG", "%s", level);
    char *argv[] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog),
                     "--iterations", "5", "--kernels", "2", "--aux-kernels", "0",
                     "--kernel-us", "100", NULL };
    tu_proc_t p;
    int rc = tu_run(argv, &env, 30000, &p);
    tu_env_free(&env);
    char *err = tu_read_file(p.err_path, NULL);
    if (rc != 0)
        fail_msg("salus-train at SALUS_LOG=%s: rc %d: %s", level, rc, err ? err : "");
    return err;
}

static void test_startup_lines_at_info(void **state)
{
    (void)state;
    tt_need_build();
    static const char *const startup[] = { "intercepting CUDA driver", "scheduler: table ",
                                           NULL };
    char *info = train_log("info"), *warn = train_log("warn");
    for (int i = 0; startup[i]; i++) {
        if (!tt_contains(info, startup[i]))
            fail_msg("SALUS_LOG=info lacks \"%s\": %s", startup[i], info ? info : "");
        if (tt_contains(warn, startup[i]))
            fail_msg("SALUS_LOG=warn prints \"%s\": %s", startup[i], warn);
    }
    free(info);
    free(warn);
    /* and libsalus(7) says so, under info, not under debug */
    char path[512];
    char *page = tu_read_file(tu_source_path("tools/man/libsalus.7", path, sizeof path), NULL);
    assert_non_null(page);
    const char *info_at = strstr(page, ".B info\nadds two start-up lines");
    assert_non_null(info_at);
    const char *debug_at = strstr(info_at, ".B debug\n");
    assert_non_null(debug_at);
    const char *line = strstr(info_at, "intercepting CUDA driver");
    assert_true(line && line < debug_at);
    free(page);
}

/* ---- metrics --------------------------------------------------------------------- */

/* promtool check metrics on text: skip() without promtool; else its verdict. */
static void promtool_accepts(const char *text)
{
    char promtool[512], path[600];
    if (!tt_which("promtool", promtool, sizeof promtool)) {
        print_message("promtool is not installed (mk/deps.sh test installs Debian's "
                      "prometheus)\n");
        skip();
    }
    snprintf(path, sizeof path, "%s/metrics-%d.prom", tu_tmpdir(), (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s check metrics < %s", promtool, path);
    char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    tu_proc_t p;
    int rc = tu_run(argv, NULL, 20000, &p);
    char *err = tu_read_file(p.err_path, NULL), *out = tu_read_file(p.out_path, NULL);
    if (rc != 0)
        fail_msg("promtool check metrics: rc %d: %s%s\n%s", rc, out ? out : "",
                 err ? err : "", text);
    free(err);
    free(out);
}

static void test_prometheus_promtool(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    tt_job_start(&j, "promjob", "30");
    tt_job_wait_running(&j);
    tt_out_t o = TT_TOOL("bin/salus-top", "--prometheus", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char pid[64];
    snprintf(pid, sizeof pid, "pid=\"%d\",name=\"promjob\"", (int)j.p.pid);
    static const char *const want[] = { "salus_up{Hostname=", "salus_build_info{version=",
        ",UUID=\"GPU-", "salus_device_admission_queue{", "salus_device_memory_reserved_bytes{",
        "salus_device_memory_waiters{", ",state=\"waiting-gpu\"} 0", ",policy=\"pack\"} 0",
        NULL };
    for (int i = 0; want[i]; i++)
        if (!tt_contains(o.out, want[i]))
            fail_msg("--prometheus lacks %s:\n%s", want[i], o.out);
    assert_true(tt_contains(o.out, pid));
    /* --no-processes: the devices' and tables' series, none per process */
    tt_out_t np = TT_TOOL("bin/salus-top", "--prometheus", "--no-processes", "-t", tt_table);
    if (np.rc != 0 || !tt_contains(np.out, "salus_device_admission_queue{") ||
        !tt_contains(np.out, "salus_table_processes{") || tt_contains(np.out, "pid=\""))
        fail_msg("--prometheus --no-processes: rc %d:\n%s%s", np.rc, np.out, np.err);
    tt_out_free(&np);
    /* every series the Grafana dashboard asks for is one of these */
    char path[512];
    char *dash = tu_read_file(tu_source_path("tools/grafana/salus.json", path, sizeof path), NULL);
    assert_non_null(dash);
    int asked = 0;
    for (const char *at = strstr(dash, "salus_"); at; at = strstr(at + 1, "salus_")) {
        char name[128], type[160];
        if (sscanf(at, "%127[a-z_]", name) != 1 || strcmp(name, "salus_") == 0)
            continue;
        snprintf(type, sizeof type, "# TYPE %s ", name);
        if (!tt_contains(o.out, type))
            fail_msg("the dashboard asks for %s, which salus-top does not export", name);
        asked++;
    }
    assert_true(asked >= 8);
    free(dash);
    tt_job_stop(&j);
    promtool_accepts(o.out);
    tt_out_free(&o);
}

/* A port nobody listens on now (the kernel's choice); racy only against
 * another program taking it in between. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

typedef struct scrape {
    const char *curl, *url;
    const char *method;        /* NULL: GET */
    char *body;
    int code;
} scrape_t;

/* curl the URL: body and HTTP status (0: no answer). */
static void curl(scrape_t *sc)
{
    char *argv[] = { (char *)sc->curl, "-s", "-o", "-", "-w", "\n%{http_code}", "-m", "10",
                     "-X", (char *)(sc->method ? sc->method : "GET"), (char *)sc->url, NULL };
    tu_proc_t p;
    free(sc->body);
    tu_run(argv, NULL, 15000, &p);
    sc->body = tu_read_file(p.out_path, NULL);
    sc->code = 0;
    char *nl = sc->body ? strrchr(sc->body, '\n') : NULL;
    if (nl) {
        sc->code = atoi(nl + 1);
        nl[1] = '\0';
    }
}

static int answers(void *arg)
{
    scrape_t *sc = arg;
    curl(sc);
    return sc->code == 200;
}

static void test_exporter_scrape(void **state)
{
    (void)state;
    tt_need_build();
    char curlbin[512], top[512], listen_at[64], url[128];
    if (!tt_which("curl", curlbin, sizeof curlbin)) {
        print_message("curl is not installed (mk/deps.sh test installs it)\n");
        skip();
    }
    tt_job_t j;
    tt_job_start(&j, "scrapejob", "30");
    tt_job_wait_running(&j);
    int port = free_port();
    snprintf(listen_at, sizeof listen_at, ":%d", port);           /* loopback by default */
    char *argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--listen",
                     listen_at, "-t", tt_table, NULL };
    tu_proc_t srv;
    assert_int_equal(tu_spawn(&srv, argv, NULL), 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
    scrape_t sc = { .curl = curlbin, .url = url };
    if (!tu_await(answers, &sc, 10000))
        fail_msg("no answer from %s (last status %d)", url, sc.code);
    char pid[64];
    snprintf(pid, sizeof pid, "pid=\"%d\",name=\"scrapejob\"", (int)j.p.pid);
    if (!tt_contains(sc.body, "salus_up{") || !tt_contains(sc.body, pid) ||
        !tt_contains(sc.body, "} 1\n"))
        fail_msg("the scrape lacks salus_up or the job:\n%s", sc.body);
    promtool_accepts(sc.body);

    /* what it is not asked for: refused with its status; then it goes on */
    char other[128];
    snprintf(other, sizeof other, "http://127.0.0.1:%d/nothing", port);
    scrape_t bad = { .curl = curlbin, .url = other };
    curl(&bad);
    assert_int_equal(bad.code, 404);
    bad.url = url;
    bad.method = "POST";
    curl(&bad);
    assert_int_equal(bad.code, 405);
    free(bad.body);
    curl(&sc);
    assert_int_equal(sc.code, 200);
    free(sc.body);

    char *err = tu_read_file(srv.err_path, NULL);
    char said[128];
    snprintf(said, sizeof said, "serving http://127.0.0.1:%d/metrics", port);
    if (!tt_contains(err, said))
        fail_msg("salus-top --listen %s did not say \"%s\": %s", listen_at, said, err);
    free(err);
    kill(srv.pid, SIGTERM);                      /* it stops cleanly */
    assert_int_equal(tu_wait(&srv, 10000), 0);
    tt_job_stop(&j);
}

/* salus-top --listen on a free loopback port for tt_table (serve_all: with
 * --serve-all), answering by the deadline; its URL in url. */
static void exporter_start(tu_proc_t *srv, int serve_all, const char *curlbin, char *url,
                           size_t ulen, int *port_out)
{
    char top[512], listen_at[64];
    int port = free_port();
    snprintf(listen_at, sizeof listen_at, ":%d", port);
    char *argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--listen",
                     listen_at, "-t", tt_table, serve_all ? "--serve-all" : NULL, NULL };
    assert_int_equal(tu_spawn(srv, argv, NULL), 0);
    snprintf(url, ulen, "http://127.0.0.1:%d/metrics", port);
    scrape_t sc = { .curl = curlbin, .url = url };
    if (!tu_await(answers, &sc, 10000))
        fail_msg("no answer from %s (last status %d)", url, sc.code);
    free(sc.body);
    *port_out = port;
}

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Clients that connect and never ask (or ask a byte and stop), more than
 * the exporter keeps: a scrape among them is still answered, at once, not
 * after each idle one's 2 s deadline in turn (200 of them would be 400 s). */
static void test_exporter_beside_idle_clients(void **state)
{
    (void)state;
    tt_need_build();
    char curlbin[512], url[128];
    if (!tt_which("curl", curlbin, sizeof curlbin)) {
        print_message("curl is not installed (mk/deps.sh test installs it)\n");
        skip();
    }
    tu_proc_t srv;
    int port, idle[200];
    exporter_start(&srv, 0, curlbin, url, sizeof url, &port);
    for (int i = 0; i < 200; i++) {
        idle[i] = connect_port(port);
        if (i % 2)
            assert_int_equal(send(idle[i], "G", 1, MSG_NOSIGNAL), 1);
    }
    scrape_t sc = { .curl = curlbin, .url = url };
    curl(&sc);                            /* curl -m 10: ten seconds at most */
    if (sc.code != 200 || !tt_contains(sc.body, "salus_up{"))
        fail_msg("no scrape beside 200 idle clients (status %d)", sc.code);
    free(sc.body);
    for (int i = 0; i < 200; i++)
        close(idle[i]);
    kill(srv.pid, SIGTERM);
    assert_int_equal(tu_wait(&srv, 10000), 0);
}

/* GET /metrics on port as uid (in a forked child that gives up root): the
 * response, malloc'd, or NULL. */
static char *scrape_as(int port, uid_t uid)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        alarm(20);
        if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)
            _exit(2);
        int fd = connect_port(port);
        static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
        if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)sizeof req - 1)
            _exit(3);
        char buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
            if (write(fds[1], buf, (size_t)n) != n)
                _exit(4);
        _exit(n == 0 ? 0 : 5);
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    assert_non_null(out);
    uint64_t deadline = tu_now_ns() + 20ull * 1000000000;
    for (;;) {
        struct pollfd p = { .fd = fds[0], .events = POLLIN };
        if (tu_now_ns() >= deadline || poll(&p, 1, 1000) < 0)
            break;
        ssize_t n = read(fds[0], out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) {
            char *more = realloc(out, cap *= 2);
            assert_non_null(more);
            out = more;
        }
    }
    close(fds[0]);
    out[len] = '\0';
    tu_proc_t child = { .pid = pid };
    if (tu_wait(&child, 20000) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The exporter serves each client what it could read itself: nobody (uid
 * 65534) gets the device's series but not root's job (its pid, name, user);
 * root gets it; with --serve-all, nobody gets it too. */
static void test_exporter_serves_what_client_may_read(void **state)
{
    (void)state;
    tt_need_build();
    char curlbin[512], url[128], pid[64];
    if (geteuid() != 0) {
        print_message("not root: the scrape as another user cannot be made\n");
        skip();
    }
    if (!tt_which("curl", curlbin, sizeof curlbin)) {
        print_message("curl is not installed (mk/deps.sh test installs it)\n");
        skip();
    }
    tt_job_t j;
    tt_job_start(&j, "privatejob", "30");
    tt_job_wait_running(&j);
    snprintf(pid, sizeof pid, "pid=\"%d\",name=\"privatejob\"", (int)j.p.pid);
    for (int all = 0; all < 2; all++) {
        tu_proc_t srv;
        int port;
        exporter_start(&srv, all, curlbin, url, sizeof url, &port);
        char *mine = scrape_as(port, 0), *theirs = scrape_as(port, 65534);
        if (!mine || !tt_contains(mine, pid))
            fail_msg("root's scrape lacks root's job:\n%s", mine ? mine : "(none)");
        if (!theirs || !tt_contains(theirs, "salus_up{") ||
            !tt_contains(theirs, "salus_device_") || tt_contains(theirs, pid) != all)
            fail_msg("%s: nobody's scrape %s root's job:\n%s", all ? "--serve-all" : "default",
                     all ? "lacks" : "shows", theirs ? theirs : "(none)");
        free(mine);
        free(theirs);
        kill(srv.pid, SIGTERM);
        assert_int_equal(tu_wait(&srv, 10000), 0);
    }
    tt_job_stop(&j);
}

static void test_listen_arguments(void **state)
{
    (void)state;
    tt_need_build();
    static const char *const bad[][3] = { { "--listen", "9400", NULL },
        { "--listen", ":0", NULL }, { "--listen", ":70000", NULL }, { "--listen", "x:", NULL },
        { "--listen", ":9400", "--json" }, { "--serve-all", NULL, NULL },
        { "--no-processes", NULL, NULL } };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tt_out_t o = TT_TOOL("bin/salus-top", bad[i][0], bad[i][1], bad[i][2]);
        if (o.rc != 2 || !tt_contains(o.err, "--listen"))
            fail_msg("salus-top %s %s %s: rc %d: %s", bad[i][0], bad[i][1],
                     bad[i][2] ? bad[i][2] : "", o.rc, o.err);
        tt_out_free(&o);
    }
}

/* JSON: the time (RFC 3339, UTC) and this host, every snapshot. */
static void test_json_time_host(void **state)
{
    (void)state;
    tt_need_build();
    tt_out_t o = TT_TOOL("bin/salus-top", "--once", "--json", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char host[256] = "", time_text[64] = "", want_host[300];
    gethostname(host, sizeof host);
    snprintf(want_host, sizeof want_host, "\"host\":\"%s\"", host);
    const char *at = strstr(o.out, "\"time\":\"");
    assert_non_null(at);
    sscanf(at + 8, "%63[^\"]", time_text);
    int y, mo, d, h, mi, sec, ms;
    char z = 0;
    if (sscanf(time_text, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &sec, &ms,
               &z) != 8 || z != 'Z' || strlen(time_text) != 24)
        fail_msg("\"time\" is not RFC 3339 UTC: %s", time_text);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    assert_int_equal(y, tm.tm_year + 1900);
    assert_true(tt_contains(o.out, want_host));
    tt_out_free(&o);
}

/* The wide layout: the GPU named by UUID, a minute of GPU share per process. */
static void test_top_wide(void **state)
{
    (void)state;
    tt_need_build();
    tt_tmux_t tm;
    tt_tmux_need(&tm, "salus-to");
    tt_job_t j;
    tt_job_start(&j, "widejob", "30");
    tt_job_wait_running(&j);
    tt_top_start(&tm, "0.2", "160", "30");
    /* after a few samples the job's sparkline has marks ('_' idle ... '@' all) */
    const char *const wide[] = { "GPU 0  GPU-", "GPU% LAST MINUTE", "widejob", NULL };
    char *screen = tt_screen_with(&tm, wide);
    tt_assert_shows(screen, wide);
    free(screen);
    tt_top_quit(&tm);
    tt_job_stop(&j);
}

/* At 80 columns, with libsalus saying something on stderr (an invalid
 * SALUS_TABLE, read by the table code salus-top links) and a table nobody
 * uses beside the job's: the message is in the message line (line 1), no
 * "salus[" line is drawn over the screen, the idle table is counted, not
 * shown, the device header keeps its policy; at the end, the message is on
 * salus-top's real stderr. */
static void test_top_at_80(void **state)
{
    (void)state;
    tt_need_build();
    tt_tmux_t tm;
    tt_tmux_need(&tm, "salus-t8");
    char idle[80], err_path[512], top[512], cmd[1400];
    snprintf(idle, sizeof idle, "%s-idle", tt_table);
    shm_table_t *t;
    shm_open_opts_t o = { .name = idle, .create = 1, .quiet = 1 };
    assert_int_equal(shm_open_table(&o, &t), 0);
    shm_close_table(t);
    tt_job_t j;
    tt_job_start(&j, "job80", "30");
    tt_job_wait_running(&j);
    snprintf(err_path, sizeof err_path, "%s/top80-%d.err", tu_tmpdir(), (int)getpid());
    snprintf(cmd, sizeof cmd, "env SALUS_TABLE='bad name' %s -d 0.3 2>%s",
             tu_build_path("bin/salus-top", top, sizeof top), err_path);
    assert_int_equal(tt_tmux(&tm, NULL, "new-session", "-d", "-x", "80", "-y", "30", "-s",
                             "top", cmd, NULL), 0);
    const char *const want[] = { "libsalus: error: SALUS_TABLE=\"bad name\" is not accepted",
                                 "unused)", "job80", "policy fair", NULL };
    char *screen = tt_screen_with(&tm, want);
    tt_assert_shows(screen, want);
    assert_int_equal(tu_count_lines(screen, "libsalus:"), 1);
    assert_true(strncmp(screen, " salus-top", 10) == 0);             /* line 0: the bar */
    const char *second = strchr(screen, '\n');
    assert_non_null(second);
    assert_true(strncmp(second + 1, "libsalus: error:", 16) == 0);   /* line 1 */
    assert_null(strstr(screen, "salus["));                           /* nothing drawn over */
    assert_null(strstr(screen, idle + 1));                           /* the idle table: counted */
    free(screen);
    tt_top_quit(&tm);
    char *err = tu_read_file(err_path, NULL);
    unlink(err_path);
    assert_true(tt_contains(err, "]: error: SALUS_TABLE=\"bad name\" is not accepted"));
    free(err);
    tt_job_stop(&j);
    shm_unlink_table(idle);
}

/* ---- upgrades ---------------------------------------------------------------------- */

typedef struct side_watch {
    const char *table;
    pid_t pid;
} side_watch_t;

/* The job has a slot in that table, with an iteration done. */
static int runs_in(void *arg)
{
    const side_watch_t *w = arg;
    shm_table_t *t;
    int ok = 0;
    if (top_open_table(w->table, "", 0, &t) != 0)
        return 0;
    for (int s = 0; s < SHM_MAX_SLOTS && !ok; s++) {
        shm_ident_t id;
        sched_slot_info_t si;
        ok = shm_slot_ident(t, s, &id) == 0 && id.pid == w->pid &&
             sched_read_slot(t, s, &si) == 0 && si.iterations > 0;
    }
    shm_close_table(t);
    return ok;
}

/* In a child: a process of the old version, holding its liveness lock on
 * the table at the path arg, as every version's processes do. */
static int old_version_process(void *arg)
{
    int fd = open(arg, O_RDWR);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LIVE_BASE + 3,
                        .l_len = 1 };
    return fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 0 : 1;
}

/* A rolling upgrade: the table's name is held by an older version's table
 * (table ABI one less, "Salus 0.2.9") with a live process; a job of this
 * version runs, shared, in the side table, says so once, and salus status
 * names both versions. */
static void test_upgrade_status(void **state)
{
    (void)state;
    tt_need_build();
    char path[128], side[96];
    snprintf(path, sizeof path, "/dev/shm%s", tt_table);
    snprintf(side, sizeof side, "%s.abi%u", tt_table, (unsigned)SHM_ABI_VERSION);
    shm_open_opts_t o = { .name = tt_table, .create = 1, .quiet = 1 };
    shm_table_t *t;
    assert_int_equal(shm_open_table(&o, &t), 0);
    shm_close_table(t);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint32_t old_abi = SHM_ABI_VERSION - 1;
    char made_by[SHM_VERSION_BYTES] = "0.2.9";
    assert_int_equal(pwrite(fd, &old_abi, sizeof old_abi, 8), (ssize_t)sizeof old_abi);
    assert_int_equal(pwrite(fd, made_by, sizeof made_by, SHM_VERSION_OFFSET),
                     (ssize_t)sizeof made_by);
    close(fd);
    int told = -1;
    pid_t old = tu_fork_teller(old_version_process, path, &told);
    assert_true(old > 0);
    assert_int_equal(told, 0);

    tt_job_t j;
    tt_job_start(&j, "upgjob", "30");
    side_watch_t w = { side, j.p.pid };
    int running = tu_await(runs_in, &w, 15000);
    tt_out_t out = TT_TOOL("bin/salus", "status", "-d", "0", "-t", tt_table, "-t", side);
    kill(old, SIGKILL);
    tu_proc_t op = { .pid = old };
    tu_wait(&op, 5000);
    tt_job_stop(&j);
    char *err = tu_read_file(j.p.err_path, NULL);
    shm_unlink_table(side);
    assert_true(running);
    char want_old[160], want_side[160], want_job[200];
    snprintf(want_old, sizeof want_old, "%s of table ABI %u (Salus 0.2.9), 1 live process, "
             "not read by this salus", tt_table, (unsigned)old_abi);
    snprintf(want_side, sizeof want_side, "%s made by Salus %s", side, SALUS_VERSION);
    snprintf(want_job, sizeof want_job, "uses table %s beside it until they end", side);
    if (out.rc != 0 || !tt_contains(out.out, "versions: this salus ") ||
        !tt_contains(out.out, want_old) || !tt_contains(out.out, want_side) ||
        !tt_contains(out.out, "upgjob"))
        fail_msg("salus status during an upgrade: rc %d:\n%s%s", out.rc, out.out, out.err);
    if (!tt_contains(err, "is in use by 1 process of Salus 0.2.9") ||
        !tt_contains(err, want_job))
        fail_msg("the job did not say where it went: %s", err ? err : "");
    tt_out_free(&out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_help),
        cmocka_unit_test(test_control_help),
        cmocka_unit_test(test_workload_help_without_driver),
        cmocka_unit_test_setup_teardown(test_startup_lines_at_info, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_prometheus_promtool, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_exporter_scrape, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_exporter_beside_idle_clients, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_exporter_serves_what_client_may_read, tt_setup,
                                        tt_teardown),
        cmocka_unit_test(test_listen_arguments),
        cmocka_unit_test_setup_teardown(test_json_time_host, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_top_wide, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_top_at_80, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_status, tt_setup, tt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
