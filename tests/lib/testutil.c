/*
 * testutil.c - helpers of the multi-process tests (see testutil.h).
 *
 * Divided into: paths and names; environments; child processes; files and
 * flat JSON; simgpu traces; time and waiting; the soak switch; the test filter.
 * Single-threaded, like the tests.
 */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>   /* after setjmp.h, stdarg.h and stddef.h */

extern char **environ;

/* ---- paths and names ---------------------------------------------------- */

/* build/tests/<binary> -> build */
static const char *build_dir(void)
{
    static char dir[512];
    if (!dir[0]) {
        char exe[512];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return "build";
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');           /* .../build/tests */
        if (slash) *slash = '\0';
        slash = strrchr(exe, '/');                 /* .../build */
        if (slash) *slash = '\0';
        snprintf(dir, sizeof dir, "%s", exe);
    }
    return dir;
}

const char *tu_build_path(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", build_dir(), rel);
    return buf;
}

int tu_built(const char *rel)
{
    char path[512];
    struct stat st;
    if (stat(tu_build_path(rel, path, sizeof path), &st) == 0)
        return 1;
    fprintf(stderr, "skipping: %s is not built (make %s)\n", path, path);
    return 0;
}

const char *tu_source_path(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/../%s", build_dir(), rel);
    return buf;
}

const char *tu_tmpdir(void)
{
    static char dir[512];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/salus-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir))
            snprintf(dir, sizeof dir, "/tmp");
    }
    return dir;
}

/* Every name handed out is unlinked when the test binary exits, so that a
 * run leaves nothing in /dev/shm (tables, simgpu states).  Only the process
 * that made the list does it: a forked child that exits must not remove
 * what its parent still uses. */
#define TU_MAX_NAMES 512
static char tu_names[TU_MAX_NAMES][64];
static int tu_nnames;
static pid_t tu_names_pid;

/* Each claim file in /dev/shm, with the table it names: `fn` returns 1 to
 * stop. */
static void each_claim(int (*fn)(const char *path, const char *table, void *arg), void *arg)
{
    DIR *dir = opendir("/dev/shm");
    struct dirent *e;
    if (!dir)
        return;
    while ((e = readdir(dir)) != NULL) {
        char p[512], *text, name[128];
        unsigned uid;
        if (strncmp(e->d_name, "salus-gpu-", 10) != 0)
            continue;
        snprintf(p, sizeof p, "/dev/shm/%s", e->d_name);
        text = tu_read_file(p, NULL);
        int stop = text && sscanf(text, "%u %127s", &uid, name) == 2 && fn(p, name, arg);
        free(text);
        if (stop)
            break;
    }
    closedir(dir);
}

struct claim_find { const char *table; char *path; size_t len; int found; };

static int claim_match(const char *path, const char *table, void *arg)
{
    struct claim_find *f = arg;
    if (strcmp(table, f->table) != 0)
        return 0;
    snprintf(f->path, f->len, "%s", path);
    f->found = 1;
    return 1;
}

int tu_claim_of(const char *table, char *path, size_t len)
{
    struct claim_find f = { table, path, len, 0 };
    each_claim(claim_match, &f);
    return f.found ? 0 : -1;
}

static int claim_unlink_ours(const char *path, const char *table, void *arg)
{
    (void)arg;
    for (int i = 0; i < tu_nnames; i++)
        if (strcmp(table, tu_names[i]) == 0)
            unlink(path);
    return 0;
}

/* The library's removal of a table with the GPU claims naming it
 * (src/ipc/table.c), in the binaries that link the ipc module: weak, so
 * that the others link too.  Those remove the claims naming their names
 * themselves: their tables are made by children under libsalus. */
extern int shm_unlink_table(const char *name) __attribute__((weak));

static void unlink_names(void)
{
    if (getpid() != tu_names_pid)
        return;
    for (int i = 0; i < tu_nnames; i++)
        if (!shm_unlink_table || shm_unlink_table(tu_names[i]) == -EINVAL)
            shm_unlink(tu_names[i]);
    if (!shm_unlink_table)
        each_claim(claim_unlink_ours, NULL);
}

const char *tu_unique_name(const char *prefix, char *buf, size_t len)
{
    static int counter;
    snprintf(buf, len, "/%s-%d-%d", prefix, (int)getpid(), ++counter);
    if (tu_names_pid != getpid()) {          /* first name in this process */
        tu_names_pid = getpid();
        tu_nnames = 0;
        atexit(unlink_names);
    }
    if (tu_nnames < TU_MAX_NAMES)
        snprintf(tu_names[tu_nnames++], sizeof tu_names[0], "%s", buf);
    return buf;
}

/* ---- environments ------------------------------------------------------- */

static void env_push(tu_env_t *env, char *var)
{
    if (env->n + 2 > env->cap) {
        env->cap = env->cap ? env->cap * 2 : 64;
        env->vars = realloc(env->vars, env->cap * sizeof *env->vars);
    }
    env->vars[env->n++] = var;
    env->vars[env->n] = NULL;
}

void tu_env_init(tu_env_t *env)
{
    memset(env, 0, sizeof *env);
    for (char **e = environ; *e; e++)
        env_push(env, strdup(*e));
    if (!env->vars)
        env_push(env, strdup("TU_EMPTY=1"));
}

void tu_env_unset(tu_env_t *env, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < env->n; i++) {
        if (strncmp(env->vars[i], name, nl) == 0 && env->vars[i][nl] == '=') {
            free(env->vars[i]);
            memmove(&env->vars[i], &env->vars[i + 1], (env->n - i) * sizeof *env->vars);
            env->n--;
            i--;
        }
    }
}

void tu_env_set(tu_env_t *env, const char *name, const char *fmt, ...)
{
    char value[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    tu_env_unset(env, name);
    char *var = malloc(strlen(name) + strlen(value) + 2);
    sprintf(var, "%s=%s", name, value);
    env_push(env, var);
}

void tu_env_free(tu_env_t *env)
{
    for (size_t i = 0; i < env->n; i++)
        free(env->vars[i]);
    free(env->vars);
    memset(env, 0, sizeof *env);
}

void tu_env_simgpu(tu_env_t *env, const char *state_name)
{
    char path[512];
    tu_env_set(env, "LD_LIBRARY_PATH", "%s", tu_build_path("sim", path, sizeof path));
    tu_env_set(env, "SIMGPU_STATE", "%s", state_name);
    tu_env_set(env, "SIMGPU_MEMORY", "16G");
    tu_env_unset(env, "LD_PRELOAD");
    tu_env_unset(env, "SIMGPU_TRACE");
}

void tu_env_salus(tu_env_t *env, const char *state_name, const char *table_name)
{
    char path[512];
    tu_env_simgpu(env, state_name);
    tu_env_set(env, "LD_PRELOAD", "%s", tu_build_path("libsalus.so", path, sizeof path));
    tu_env_set(env, "SALUS_TABLE", "%s", table_name);
}

/* ---- child processes ---------------------------------------------------- */

int tu_spawn(tu_proc_t *p, char *const argv[], const tu_env_t *env)
{
    static int seq;
    memset(p, 0, sizeof *p);
    seq++;
    snprintf(p->out_path, sizeof p->out_path, "%s/child-%d.out", tu_tmpdir(), seq);
    snprintf(p->err_path, sizeof p->err_path, "%s/child-%d.err", tu_tmpdir(), seq);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int out = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out >= 0) dup2(out, 1);
        if (err >= 0) dup2(err, 2);
        execve(argv[0], argv, env ? env->vars : environ);
        fprintf(stderr, "tu_spawn: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
    return 0;
}

int tu_wait(tu_proc_t *p, int timeout_ms)
{
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (!p->exited) {
        pid_t r = waitpid(p->pid, &p->status, WNOHANG);
        if (r == p->pid) {
            p->exited = 1;
            break;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (tu_now_ns() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &p->status, 0);
            p->exited = 1;
            p->timed_out = 1;
            fprintf(stderr, "tu_wait: pid %d still running after %d ms: killed\n",
                    (int)p->pid, timeout_ms);
            return -1;
        }
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    if (p->timed_out)
        return -1;
    if (WIFEXITED(p->status))
        return WEXITSTATUS(p->status);
    if (WIFSIGNALED(p->status))
        return 128 + WTERMSIG(p->status);
    return -1;
}

int tu_exited(tu_proc_t *p)
{
    if (!p->exited && waitpid(p->pid, &p->status, WNOHANG) == p->pid)
        p->exited = 1;
    return p->exited;
}

int tu_run(char *const argv[], const tu_env_t *env, int timeout_ms, tu_proc_t *p)
{
    if (tu_spawn(p, argv, env) != 0)
        return -1;
    return tu_wait(p, timeout_ms);
}

pid_t tu_fork_teller(int (*fn)(void *), void *arg, int *told)
{
    int up[2];
    if (pipe(up) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        int v = fn(arg);
        if (write(up[1], &v, sizeof v) != sizeof v)
            _exit(11);
        for (;;)
            pause();
    }
    close(up[1]);
    int v;
    ssize_t got = pid > 0 ? read(up[0], &v, sizeof v) : -1;
    close(up[0]);
    if (got != (ssize_t)sizeof v) {
        if (pid > 0)
            waitpid(pid, NULL, 0);          /* it died before telling */
        return -1;
    }
    *told = v;
    return pid;
}

/* ---- files and flat JSON ------------------------------------------------ */

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

int tu_find_line(const char *text, const char *needle, int n, char *buf, size_t len)
{
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        char *hit = memmem(line, ll, needle, strlen(needle));
        if (hit && n-- == 0) {
            size_t c = ll < len - 1 ? ll : len - 1;
            memcpy(buf, line, c);
            buf[c] = '\0';
            return 0;
        }
        line = end ? end + 1 : NULL;
    }
    return -1;
}

int tu_count_lines(const char *text, const char *needle)
{
    int count = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t ll = end ? (size_t)(end - line) : strlen(line);
        if (memmem(line, ll, needle, strlen(needle)))
            count++;
        line = end ? end + 1 : NULL;
    }
    return count;
}

static const char *json_value(const char *obj, const char *key)
{
    char pat[256];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(obj, pat);
    while (p) {
        const char *v = p + strlen(pat);
        while (*v == ' ' || *v == '\t') v++;
        if (*v == ':') {
            v++;
            while (*v == ' ' || *v == '\t') v++;
            return v;
        }
        p = strstr(p + 1, pat);
    }
    return NULL;
}

int tu_json_num(const char *obj, const char *key, double *out)
{
    const char *v = json_value(obj, key);
    if (!v)
        return -1;
    char *end;
    double d = strtod(v, &end);
    if (end == v)
        return -1;
    *out = d;
    return 0;
}

double tu_json_need(const char *obj, const char *key)
{
    double v = -1;
    if (!obj || tu_json_num(obj, key, &v) != 0)
        fail_msg("no \"%s\" in %s", key, obj ? obj : "(nothing)");
    return v;
}

int tu_json_str(const char *obj, const char *key, char *buf, size_t len)
{
    const char *v = json_value(obj, key);
    if (!v || *v != '"')
        return -1;
    v++;
    size_t i = 0;
    while (*v && *v != '"' && i + 1 < len) {
        if (*v == '\\' && v[1])
            v++;
        buf[i++] = *v++;
    }
    buf[i] = '\0';
    return 0;
}

/* ---- simgpu traces ------------------------------------------------------ */

static int by_start(const void *a, const void *b)
{
    const tu_kernel_t *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* A "cut" line: the work of pid on device (of one context, unless 0) that
 * was submitted by t and not finished at t ended at t: simgpu writes one
 * when a context goes with work queued (its process died, a reset). */
typedef struct trace_cut {
    int pid, device;
    uint64_t context, t;
} trace_cut_t;

static void apply_cuts(tu_kernel_t *k, long n, const trace_cut_t *c, long nc)
{
    for (long j = 0; j < nc; j++)
        for (long i = 0; i < n; i++) {
            tu_kernel_t *e = &k[i];
            if (e->pid != c[j].pid || e->device != c[j].device ||
                (c[j].context && e->context != c[j].context) ||
                e->submit_ns > c[j].t || e->end_ns <= c[j].t)
                continue;
            if (e->start_ns > c[j].t)
                e->start_ns = c[j].t;   /* never ran */
            e->end_ns = c[j].t;
        }
}

static long trace_load(const char *path, int kernels_only, tu_kernel_t **out)
{
    char *text = tu_read_file(path, NULL);
    if (!text)
        return -1;
    long n = 0, cap = 1024, nc = 0;
    tu_kernel_t *k = malloc(cap * sizeof *k);
    trace_cut_t *cuts = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        double v;
        tu_kernel_t e;
        memset(&e, 0, sizeof e);
        if (tu_json_num(line, "pid", &v)) continue;
        e.pid = (int)v;
        if (!tu_json_num(line, "device", &v)) e.device = (int)v;
        if (!tu_json_num(line, "context", &v)) e.context = (uint64_t)v;
        if (!tu_json_num(line, "stream", &v)) e.stream = (uint64_t)v;
        if (tu_json_str(line, "kind", e.kind, sizeof e.kind))
            strcpy(e.kind, "kernel");
        if (!strcmp(e.kind, "cut") && !tu_json_num(line, "end_ns", &v)) {
            trace_cut_t *c = realloc(cuts, (size_t)(nc + 1) * sizeof *cuts);
            if (c) {
                cuts = c;
                cuts[nc++] = (trace_cut_t){ e.pid, e.device, e.context, (uint64_t)v };
            }
            continue;
        }
        if (kernels_only && strcmp(e.kind, "kernel") != 0)
            continue;
        tu_json_str(line, "name", e.name, sizeof e.name);
        if (!tu_json_num(line, "submit_ns", &v)) e.submit_ns = (uint64_t)v;
        if (tu_json_num(line, "start_ns", &v)) continue;
        e.start_ns = (uint64_t)v;
        if (tu_json_num(line, "end_ns", &v)) continue;
        e.end_ns = (uint64_t)v;
        if (n == cap) {
            cap *= 2;
            k = realloc(k, cap * sizeof *k);
        }
        k[n++] = e;
    }
    free(text);
    apply_cuts(k, n, cuts, nc);
    free(cuts);
    qsort(k, n, sizeof *k, by_start);
    *out = k;
    return n;
}

long tu_trace_load(const char *path, tu_kernel_t **out)
{
    return trace_load(path, 1, out);
}

long tu_trace_load_all(const char *path, tu_kernel_t **out)
{
    return trace_load(path, 0, out);
}

uint64_t tu_trace_busy(const tu_kernel_t *k, long n, int pid, uint64_t from, uint64_t to)
{
    uint64_t busy = 0;
    for (long i = 0; i < n; i++) {
        if (pid && k[i].pid != pid)
            continue;
        uint64_t s = k[i].start_ns, e = k[i].end_ns;
        if (from || to) {
            if (s < from) s = from;
            if (e > to) e = to;
        }
        if (e > s)
            busy += e - s;
    }
    return busy;
}

long tu_trace_switches(const tu_kernel_t *k, long n)
{
    long switches = 0;
    for (long i = 1; i < n; i++)
        if (k[i].pid != k[i - 1].pid)
            switches++;
    return switches;
}

static const tu_kernel_t *by_submit_base;
static int by_submit(const void *a, const void *b)
{
    uint64_t x = by_submit_base[*(const long *)a].submit_ns;
    uint64_t y = by_submit_base[*(const long *)b].submit_ns;
    return x < y ? -1 : x > y;
}

/* A sweep in submission order keeping, per (device, pid), the latest end of
 * the work submitted so far: work is submitted into another's unfinished
 * work when another pid's latest end on its device is past its submission. */
long tu_trace_cross_submits(const tu_kernel_t *k, long n, long *first)
{
    size_t cap = (size_t)(n ? n : 1);
    long *order = malloc(cap * sizeof *order);
    struct { int device, pid; uint64_t end; } *tails = malloc(cap * sizeof *tails);
    if (!order || !tails) {
        free(order);
        free(tails);
        return -1;
    }
    for (long i = 0; i < n; i++)
        order[i] = i;
    by_submit_base = k;
    qsort(order, (size_t)n, sizeof *order, by_submit);
    long ntails = 0, count = 0;
    for (long o = 0; o < n; o++) {
        const tu_kernel_t *w = &k[order[o]];
        long mine = -1, crossed = 0;
        for (long t = 0; t < ntails; t++) {
            if (tails[t].device != w->device)
                continue;
            if (tails[t].pid == w->pid)
                mine = t;
            else if (tails[t].end > w->submit_ns)
                crossed = 1;
        }
        if (crossed && count++ == 0 && first)
            *first = order[o];
        if (mine < 0) {
            mine = ntails++;
            tails[mine].device = w->device;
            tails[mine].pid = w->pid;
            tails[mine].end = 0;
        }
        if (w->end_ns > tails[mine].end)
            tails[mine].end = w->end_ns;
    }
    free(order);
    free(tails);
    return count;
}

/* ---- time --------------------------------------------------------------- */

uint64_t tu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tu_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int tu_await(int (*pred)(void *arg), void *arg, int ms)
{
    uint64_t deadline = tu_now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000ull;
    int nap = 1;
    while (tu_now_ns() < deadline) {
        if (pred(arg))
            return 1;
        tu_sleep_ms(nap);
        if (nap < 16)
            nap *= 2;
    }
    return pred(arg) ? 1 : 0;
}

/* ---- the soak switch ------------------------------------------------------ */

int tu_soak(void)
{
    const char *v = getenv(TU_SOAK_VAR);
    return v && strcmp(v, "1") == 0;
}

/* ---- the test filter ------------------------------------------------------ */

/* cmocka 1.1 reads no filter from the environment (later versions read this
 * same variable), so the filter is set here, before any test binary's main. */
__attribute__((constructor)) static void tu_set_filter(void)
{
    const char *pattern = getenv(TU_FILTER_VAR);
    if (pattern && *pattern)
        cmocka_set_test_filter(pattern);
}
