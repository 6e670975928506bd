/*
 * wl_opt.c - command-line options of the workloads: one table per program
 * drives parsing, checking and --help, so that the three cannot disagree.
 *
 * Divided into: sizes; parsing one value; the parser and --help; the
 * options both programs share.  Every error names the option, the value
 * given and the forms the option accepts, and the caller exits with 2.
 */
#include "wl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const wl_stream_names[] = { "legacy", "created", "per-thread", NULL };
const char *const wl_launch_names[] = { "kernel", "ex", "cooperative", "graph", NULL };
const char *const wl_alloc_names[] = { "alloc", "pitch", "managed", "async", "vmm", "array", NULL };
const char *const wl_sync_names[] = { "item", "stream", "ctx", "event", "none", NULL };
const char *const wl_oom_names[] = { "fail", "retry", NULL };

/* ---- sizes -------------------------------------------------------------- */

/* "N[.N][K|M|G|T][B|iB]", powers of 1024; a fraction needs a unit and
 * rounds up to a byte.  Nothing else: no sign, space or exponent. */
int wl_parse_size(const char *s, uint64_t *out)
{
    const char *p = s;
    if (!p || !(*p >= '0' && *p <= '9'))
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    int fraction = 0;
    if (*p == '.') {
        fraction = 1;
        if (!(*++p >= '0' && *p <= '9'))
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    double v = strtod(s, NULL);
    double mult = 1;
    switch (*p) {
    case 'k': case 'K': mult = 1024.0; p++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; p++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; p++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; p++; break;
    default: break;
    }
    if (mult > 1 && (strcasecmp(p, "iB") == 0 || strcasecmp(p, "B") == 0))
        p += strlen(p);
    if (*p || (fraction && mult == 1))
        return -1;
    double bytes = ceil(v * mult);
    if (!isfinite(bytes) || bytes >= 18446744073709551615.0)
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

const char *wl_fmt_size(uint64_t bytes, char *buf, size_t len)
{
    static const char units[] = "KMGT";
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024 && u < 3) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, len, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.*f%c", v == floor(v) ? 0 : 1, v, units[u]);
    return buf;
}

/* ---- parsing one value -------------------------------------------------- */

static void choices_str(const wl_opt_t *o, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; o->choices[i] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : "", o->choices[i]);
}

/* The forms an option accepts, for its error message and --help. */
static void forms_str(const wl_opt_t *o, char *buf, size_t len)
{
    switch (o->kind) {
    case WL_OPT_INT:
        snprintf(buf, len, "an integer from %.0f to %.0f", o->min, o->max);
        break;
    case WL_OPT_DOUBLE:
        snprintf(buf, len, "a number from %g to %g", o->min, o->max);
        break;
    case WL_OPT_SIZE:
        snprintf(buf, len, "a size in bytes, with an optional K, M, G or T suffix "
                           "(powers of 1024), e.g. 512M or 1.5G");
        break;
    case WL_OPT_ENUM:
        choices_str(o, buf, len);
        break;
    case WL_OPT_STR:
        snprintf(buf, len, "a non-empty string");
        break;
    case WL_OPT_FLAG:
        snprintf(buf, len, "no value");
        break;
    }
}

static int bad_value(const char *prog, const wl_opt_t *o, const char *val)
{
    char forms[256];
    forms_str(o, forms, sizeof forms);
    fprintf(stderr, "%s: --%s: invalid value '%s': expected %s\n", prog, o->name, val, forms);
    return WL_EUSAGE;
}

static int parse_value(const char *prog, wl_opt_t *o, const char *val)
{
    char *end;
    errno = 0;
    switch (o->kind) {
    case WL_OPT_INT: {
        long long v = strtoll(val, &end, 10);
        if (end == val || *end || errno || (double)v < o->min || (double)v > o->max)
            return bad_value(prog, o, val);
        *(long long *)o->dst = v;
        return WL_OK;
    }
    case WL_OPT_DOUBLE: {
        double v = strtod(val, &end);
        if (end == val || *end || errno || !isfinite(v) || v < o->min || v > o->max)
            return bad_value(prog, o, val);
        *(double *)o->dst = v;
        return WL_OK;
    }
    case WL_OPT_SIZE:
        if (wl_parse_size(val, (uint64_t *)o->dst) != 0)
            return bad_value(prog, o, val);
        return WL_OK;
    case WL_OPT_ENUM:
        for (int i = 0; o->choices[i]; i++) {
            if (strcmp(val, o->choices[i]) == 0) {
                *(int *)o->dst = i;
                return WL_OK;
            }
        }
        return bad_value(prog, o, val);
    case WL_OPT_STR:
        if (!*val)
            return bad_value(prog, o, val);
        *(const char **)o->dst = val;
        return WL_OK;
    case WL_OPT_FLAG:
        *(int *)o->dst = 1;
        return WL_OK;
    }
    return bad_value(prog, o, val);
}

/* ---- the parser and --help ---------------------------------------------- */

wl_opt_t *wl_opt_find(wl_opt_t *opts, const char *name)
{
    for (wl_opt_t *o = opts; o->name; o++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

int wl_opt_given(wl_opt_t *opts, const char *name)
{
    wl_opt_t *o = wl_opt_find(opts, name);
    return o && o->set;
}

/* Help text in a column of 52, broken at spaces. */
static void wrapped(FILE *f, const char *head, const char *text)
{
    const int width = 52;
    const char *p = text;
    do {
        int len = (int)strlen(p);
        if (len > width) {
            len = width;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0)
                len = width;
        }
        fprintf(f, "  %-24s %.*s\n", head, len, p);
        head = "";
        p += len;
        while (*p == ' ')
            p++;
    } while (*p);
}

static void usage(FILE *f, const char *prog, const char *synopsis, const wl_opt_t *opts)
{
    fprintf(f, "usage: %s [options]\n\n%s\n\noptions:\n", prog, synopsis);
    for (const wl_opt_t *o = opts; o->name; o++) {
        char head[64], forms[256], line[320];
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->kind == WL_OPT_FLAG ? "" : " ",
                 o->kind == WL_OPT_FLAG ? "" : o->metavar ? o->metavar : "X");
        wrapped(f, head, o->help);
        if (o->kind == WL_OPT_ENUM) {
            forms_str(o, forms, sizeof forms);
            snprintf(line, sizeof line, "one of %s", forms);
            wrapped(f, "", line);
        }
    }
    fprintf(f, "  %-24s this text\n\n", "--help");
    fprintf(f, "Values go as '--opt value' or '--opt=value'.  Sizes take K, M, G or T\n"
               "(powers of 1024).  The last line on stdout is one JSON object with the\n"
               "results; \"ok\":false and \"error\" on failure.  Exit status: 0 done (also\n"
               "when stopped by SIGTERM/SIGINT), 1 a CUDA failure, 2 bad arguments or out\n"
               "of device memory under --oom fail.\n");
}

int wl_opt_parse(const char *prog, const char *synopsis, wl_opt_t *opts, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout, prog, synopsis, opts);
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s': options start with -- "
                            "(see %s --help)\n", prog, arg, prog);
            return WL_EUSAGE;
        }
        char name[64];
        const char *eq = strchr(arg + 2, '=');
        size_t nl = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), arg + 2);
        wl_opt_t *o = wl_opt_find(opts, name);
        if (!o) {
            fprintf(stderr, "%s: unknown option '--%s' (see %s --help)\n", prog, name, prog);
            return WL_EUSAGE;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (o->kind == WL_OPT_FLAG) {
            if (val) {
                fprintf(stderr, "%s: --%s takes no value (got '%s')\n", prog, o->name, val);
                return WL_EUSAGE;
            }
        } else if (!val) {
            if (i + 1 >= argc) {
                char forms[256];
                forms_str(o, forms, sizeof forms);
                fprintf(stderr, "%s: --%s needs a value: %s\n", prog, o->name, forms);
                return WL_EUSAGE;
            }
            val = argv[++i];
        }
        int rc = parse_value(prog, o, val ? val : "");
        if (rc != WL_OK)
            return rc;
        o->set = 1;
    }
    return WL_OK;
}

/* ---- the options both programs share ------------------------------------ */

void wl_common_defaults(wl_common_t *c)
{
    memset(c, 0, sizeof *c);
    c->kernels = 10;
    c->aux_kernels = -1;
    c->kernel_us = 1000;
    c->seed = 1;
    c->stream = WL_STREAM_LEGACY;
    c->launch = WL_LAUNCH_KERNEL;
    c->alloc = WL_ALLOC_ALLOC;
    c->oom = WL_OOM_FAIL;
}

void wl_common_opts(wl_common_t *c, wl_opt_t *o, size_t *n)
{
    o[(*n)++] = WL_OPT("kernels", WL_OPT_INT, &c->kernels, NULL, 1, 1000000, "N",
                       "kernel launches per iteration/request (default 10)");
    o[(*n)++] = WL_OPT("kernel-us", WL_OPT_DOUBLE, &c->kernel_us, NULL, 0, 60e6, "US",
                       "GPU time of each salus_spin kernel, microseconds (default 1000)");
    o[(*n)++] = WL_OPT("aux-kernels", WL_OPT_INT, &c->aux_kernels, NULL, 0, 1000000, "N",
                       "how many of --kernels are salus_fill/salus_axpy over a small buffer "
                       "(distinct handles, as a model has); default kernels/8");
    o[(*n)++] = WL_OPT("mem", WL_OPT_SIZE, &c->mem, NULL, 0, 0, "SIZE",
                       "persistent device memory allocated at start (default 0)");
    o[(*n)++] = WL_OPT("alloc", WL_OPT_ENUM, &c->alloc, wl_alloc_names, 0, 0, "PATH",
                       "driver path of device memory: cuMemAlloc_v2, cuMemAllocPitch_v2, "
                       "cuMemAllocManaged, cuMemAllocAsync, cuMemCreate+Map (VMM), "
                       "cuArrayCreate_v2");
    o[(*n)++] = WL_OPT("oom", WL_OPT_ENUM, &c->oom, wl_oom_names, 0, 0, "POLICY",
                       "on CUDA_ERROR_OUT_OF_MEMORY: exit 2 with an error, or sleep 10 ms and "
                       "retry (counted in oom_retries)");
    o[(*n)++] = WL_OPT("stream", WL_OPT_ENUM, &c->stream, wl_stream_names, 0, 0, "KIND",
                       "stream of the work: the legacy default stream, a created stream, or the "
                       "per-thread default stream (_ptsz/_ptds entry points via cuGetProcAddress)");
    o[(*n)++] = WL_OPT("launch", WL_OPT_ENUM, &c->launch, wl_launch_names, 0, 0, "FORM",
                       "cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel, or "
                       "sequences captured once as graphs and run with cuGraphLaunch");
    o[(*n)++] = WL_OPT("seconds", WL_OPT_DOUBLE, &c->seconds, NULL, 0, 1e7, "S",
                       "stop after S seconds (0: no time bound)");
    o[(*n)++] = WL_OPT("device", WL_OPT_INT, &c->device, NULL, 0, 1023, "N",
                       "CUDA device (default 0)");
    o[(*n)++] = WL_OPT("retain-all", WL_OPT_FLAG, &c->retain_all, NULL, 0, 0, NULL,
                       "first retain the primary context of every visible device, as JAX "
                       "does, then work on --device only");
    o[(*n)++] = WL_OPT("name", WL_OPT_STR, &c->name, NULL, 0, 0, "NAME",
                       "name in the result line (default the preset's or the program's)");
    o[(*n)++] = WL_OPT("module", WL_OPT_STR, &c->module, NULL, 0, 0, "PATH",
                       "kernels cubin or PTX "
                       "(default <bin>/../workloads/kernels.cubin, then .ptx)");
    o[(*n)++] = WL_OPT("seed", WL_OPT_INT, &c->seed, NULL, 0, 9.2e18, "N",
                       "seed of every random choice (default 1)");
    o[(*n)++] = WL_OPT("verbose", WL_OPT_FLAG, &c->verbose, NULL, 0, 0, NULL,
                       "progress and free device memory on stderr");
}

int wl_common_check(const char *prog, wl_common_t *c)
{
    if (c->aux_kernels < 0)
        c->aux_kernels = c->kernels / 8;
    if (c->aux_kernels > c->kernels) {
        fprintf(stderr, "%s: --aux-kernels: %lld is more than --kernels (%lld)\n",
                prog, c->aux_kernels, c->kernels);
        return WL_EUSAGE;
    }
    return WL_OK;
}
