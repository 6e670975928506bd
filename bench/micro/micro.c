/*
 * micro.c - what the micro-benchmarks over the null driver share
 * (launch_overhead, handoff, alloc_overhead): see micro.h.
 *
 * Divided into: clock and medians; options; children; the child's
 * context; reports.  No state: the benchmarks are single-threaded.
 */
#include "micro.h"

#include <cuda.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- clock and medians ---------------------------------------------------- */

unsigned long long micro_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double micro_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- options -------------------------------------------------------------- */

int micro_option(micro_t *m, const char *key, const char *value)
{
    if (strcmp(key, "--nulldrv") == 0) m->nulldrv = value;
    else if (strcmp(key, "--libsalus") == 0) m->libsalus = value;
    else if (strcmp(key, "--out") == 0) m->out = value;
    else return 0;
    return 1;
}

int micro_options_given(const micro_t *m)
{
    return m->nulldrv && m->libsalus && m->out;
}

int micro_setup(micro_t *m)
{
    ssize_t n = readlink("/proc/self/exe", m->self, sizeof m->self - 1);
    if (n <= 0)
        return -1;
    m->self[n] = '\0';
    snprintf(m->report, sizeof m->report, "%s.report", m->out);
    return 0;
}

/* ---- children ------------------------------------------------------------- */

pid_t micro_spawn(char *const argv[], const micro_env_t *env, int out_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (out_fd >= 0)
        dup2(out_fd, 1);
    setenv("LD_LIBRARY_PATH", env->nulldrv, 1);
    unsetenv("LD_PRELOAD");
    if (env->libsalus) {
        setenv("LD_PRELOAD", env->libsalus, 1);
        setenv("SALUS_TABLE", env->table, 1);
        if (env->report)
            setenv("SALUS_REPORT", env->report, 1);
        else
            unsetenv("SALUS_REPORT");
    }
    execv(argv[0], argv);
    _exit(127);
}

int micro_run(char *const argv[], const micro_env_t *env, char *buf, size_t size)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)     /* the child keeps only its stdout */
        return -1;
    pid_t pid = micro_spawn(argv, env, fds[1]);
    close(fds[1]);
    size_t got = 0;
    ssize_t n;
    while (pid > 0 && got < size - 1 && (n = read(fds[0], buf + got, size - 1 - got)) > 0)
        got += (size_t)n;
    close(fds[0]);
    buf[got] = '\0';
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

void micro_unlink_table(const char *table)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/%s", table);
    unlink(path);
}

/* ---- the child's context -------------------------------------------------- */

int micro_context(void)
{
    CUdevice dev;
    CUcontext ctx = NULL;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

/* ---- reports -------------------------------------------------------------- */

int micro_last_line(const char *path, char *line, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    line[0] = '\0';
    while (fgets(line, (int)size, f))
        ;
    fclose(f);
    return 0;
}

double micro_field(const char *line, const char *key)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *p = strstr(line, needle);
    return p ? atof(p + strlen(needle)) : -1;
}
