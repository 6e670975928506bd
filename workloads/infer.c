/*
 * infer.c - salus-infer: one inference service, as the GPU and the driver
 * see it.
 *
 * Requests arrive as a Poisson process of --rate per second (seeded, so a
 * run is repeatable), or back to back with --rate 0.  The server takes them
 * in arrival order, one at a time (open loop): a request waits for those
 * before it, then runs its --kernels kernels (a batch-1 forward pass) and
 * an item-like sync (the blocking copy of the result).  Its latency is its
 * completion time minus its arrival time, queueing included.
 *
 * Divided into: options; set-up; serving; the result line; main.
 */
#include "wl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "salus-infer"

typedef struct infer_cfg {
    wl_common_t c;
    long long requests;       /* 0: until --seconds */
    double rate;              /* requests per second; 0: back to back */
    double slo_ms;            /* 0: none */
} infer_cfg_t;

typedef struct infer_run {
    const infer_cfg_t *cfg;
    wl_gpu_t g;
    int gpu_opened;
    wl_kernel_kind_t *plan;
    wl_seq_t fwd;
    wl_buf_t mem;
    wl_samples_t latency_ms;
    long long slo_violations;
    uint64_t start_ns, end_ns, deadline_ns, serve_start_ns, last_done_ns, oom_retries;
    size_t free_start, free_end, total;
    int interrupted;
} infer_run_t;

static const char synopsis[] =
    "One inference service on the GPU: --requests requests (or --seconds) arriving as a\n"
    "Poisson process of --rate per second, served in arrival order; each runs --kernels\n"
    "kernels (salus_spin of --kernel-us each) and a blocking 4-byte cuMemcpyDtoH.\n\n"
    "Result line fields: program name pid requests jct_s start_ns end_ns (CLOCK_MONOTONIC)\n"
    "throughput_rps latency_ms_mean latency_ms_p50 latency_ms_p95 latency_ms_p99\n"
    "latency_ms_max (arrival to completion, queueing included) slo_violations (requests\n"
    "over --slo-ms) slo_violation_frac rate_rps gpu_ms_per_request launches syncs\n"
    "oom_retries [interrupted] ok [error].";

/* ---- options ------------------------------------------------------------ */

#define OPT(nm, k, d, ch, lo, hi, mv, h) \
    (wl_opt_t){ .name = nm, .kind = k, .dst = d, .choices = ch, .min = lo, .max = hi, \
                .metavar = mv, .help = h }

static int parse_args(infer_cfg_t *t, int argc, char **argv)
{
    memset(t, 0, sizeof *t);
    wl_common_defaults(&t->c);
    t->requests = 100;
    t->rate = 50;
    wl_opt_t opts[40];
    size_t n = 0;
    opts[n++] = OPT("requests", WL_OPT_INT, &t->requests, NULL, 1, 1e12, "N",
                    "requests to serve (default 100; unbounded with --seconds alone)");
    opts[n++] = OPT("rate", WL_OPT_DOUBLE, &t->rate, NULL, 0, 1e6, "R",
                    "mean arrivals per second, Poisson (default 50; 0: back to back)");
    opts[n++] = OPT("slo-ms", WL_OPT_DOUBLE, &t->slo_ms, NULL, 0, 3.6e6, "MS",
                    "latency bound; requests over it are counted (default none)");
    wl_common_opts(&t->c, opts, &n);
    opts[n] = (wl_opt_t){ 0 };
    int rc = wl_opt_parse(PROG, synopsis, opts, argc, argv);
    if (rc)
        return rc;
    if ((rc = wl_common_check(PROG, &t->c)))
        return rc;
    if (wl_opt_given(opts, "seconds") && !wl_opt_given(opts, "requests"))
        t->requests = 0;
    if (!t->c.name)
        t->c.name = PROG;
    return WL_OK;
}

/* ---- set-up ------------------------------------------------------------- */

static int setup(infer_run_t *r)
{
    const infer_cfg_t *t = r->cfg;
    int rc = wl_gpu_open(&r->g, PROG, &t->c);
    r->gpu_opened = 1;
    if (rc || (rc = wl_gpu_meminfo(&r->g, &r->free_start, &r->total)))
        return rc;
    if ((rc = wl_buf_alloc(&r->g, &r->mem, t->c.mem, "--mem", r->deadline_ns, &r->oom_retries)))
        return rc;
    r->plan = wl_plan(t->c.kernels, t->c.aux_kernels);
    if (!r->plan)
        return WL_ECUDA;
    return wl_seq_init(&r->g, &r->fwd, r->plan, 0, (int)t->c.kernels);
}

/* ---- serving ------------------------------------------------------------ */

static int serve_one(infer_run_t *r, uint64_t arrival_ns)
{
    int rc = wl_seq_launch(&r->g, &r->fwd);
    if (!rc)
        rc = wl_sync(&r->g, WL_SYNC_ITEM);
    if (rc)
        return rc;
    uint64_t done = wl_now_ns();
    double ms = (double)(done - arrival_ns) / 1e6;
    r->last_done_ns = done;
    if (r->cfg->slo_ms > 0 && ms > r->cfg->slo_ms)
        r->slo_violations++;
    return wl_samples_add(&r->latency_ms, ms);
}

/* Arrival times come from the seed alone, counted from the start of
 * service, so that two runs with one seed see the same arrivals (and, with
 * --seconds, the same number of requests) whatever the GPU does. */
static int serve(infer_run_t *r)
{
    const infer_cfg_t *t = r->cfg;
    wl_rng_t rng;
    wl_rng_seed(&rng, (uint64_t)t->c.seed);
    r->serve_start_ns = r->last_done_ns = wl_now_ns();
    uint64_t cutoff = t->c.seconds > 0 ? r->serve_start_ns + (uint64_t)(t->c.seconds * 1e9) : 0;
    double offset_s = 0;
    for (long long i = 0; !t->requests || i < t->requests; i++) {
        uint64_t arrival;
        if (t->rate > 0) {
            offset_s += -log(wl_rng_unit(&rng)) / t->rate;
            arrival = r->serve_start_ns + (uint64_t)(offset_s * 1e9);
        } else {
            arrival = wl_now_ns();
        }
        if (wl_stop_requested() || (cutoff && arrival >= cutoff))
            break;
        if (arrival > wl_now_ns() && wl_sleep_until(arrival))
            break;
        int rc = serve_one(r, arrival);
        if (rc)
            return rc;
        if (t->c.verbose && (i + 1) % 100 == 0)
            fprintf(stderr, PROG "[%d]: %lld requests, p50 %.3f ms\n", (int)getpid(), i + 1,
                    wl_samples_pct(&r->latency_ms, 50));
    }
    return WL_OK;
}

static int teardown(infer_run_t *r, int rc)
{
    if (!r->gpu_opened)
        return rc;
    wl_buf_t *bufs[] = { &r->mem };
    rc = wl_finish(&r->g, bufs, 1, &r->end_ns, &r->free_end, rc);
    int r2 = wl_seq_free(&r->fwd);
    rc = rc ? rc : r2;
    free(r->plan);
    r2 = wl_gpu_close(&r->g);
    return rc ? rc : r2;
}

/* ---- the result line ---------------------------------------------------- */

static void report(infer_run_t *r, int rc)
{
    const infer_cfg_t *t = r->cfg;
    if (!r->end_ns)
        r->end_ns = wl_now_ns();
    const wl_samples_t *l = &r->latency_ms;
    double serve_s = (double)(r->last_done_ns - r->serve_start_ns) / 1e9;
    long long spins = t->c.kernels - t->c.aux_kernels;
    wl_json_t j;
    wl_json_head(&j, PROG, t->c.name);
    wl_json_int(&j, "requests", (long long)l->n);
    wl_json_num(&j, "jct_s", (double)(r->end_ns - r->start_ns) / 1e9, 6);
    wl_json_u64(&j, "start_ns", r->start_ns);
    wl_json_u64(&j, "end_ns", r->end_ns);
    wl_json_num(&j, "throughput_rps", serve_s > 0 ? (double)l->n / serve_s : 0, 4);
    wl_json_num(&j, "latency_ms_mean", wl_samples_mean(l), 4);
    wl_json_num(&j, "latency_ms_p50", wl_samples_pct(l, 50), 4);
    wl_json_num(&j, "latency_ms_p95", wl_samples_pct(l, 95), 4);
    wl_json_num(&j, "latency_ms_p99", wl_samples_pct(l, 99), 4);
    wl_json_num(&j, "latency_ms_max", wl_samples_max(l), 4);
    wl_json_int(&j, "slo_violations", r->slo_violations);
    wl_json_num(&j, "slo_violation_frac", l->n ? (double)r->slo_violations / (double)l->n : 0, 6);
    wl_json_num(&j, "rate_rps", t->rate, 4);
    wl_json_num(&j, "gpu_ms_per_request", (double)spins * t->c.kernel_us / 1000.0, 4);
    wl_json_u64(&j, "launches", r->g.launches);
    wl_json_u64(&j, "syncs", r->g.syncs);
    wl_json_u64(&j, "oom_retries", r->oom_retries);
    wl_json_tail(&j, rc, r->interrupted);
    wl_json_end(&j, stdout);
    if (rc)
        fprintf(stderr, PROG ": %s\n", wl_error());
    if (t->c.verbose && rc == WL_OK)
        wl_report_mem(PROG, r->free_start, r->free_start, r->free_end, r->total);
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    infer_cfg_t cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    infer_run_t run;
    memset(&run, 0, sizeof run);
    run.cfg = &cfg;
    run.start_ns = wl_now_ns();
    if (cfg.c.seconds > 0)
        run.deadline_ns = run.start_ns + (uint64_t)(cfg.c.seconds * 1e9);
    rc = wl_signals_install();
    if (!rc)
        rc = setup(&run);
    if (!rc)
        rc = serve(&run);
    if (rc == WL_ESTOP)
        rc = WL_OK;
    run.interrupted = wl_stop_requested();
    rc = teardown(&run, rc);
    report(&run, rc);
    wl_samples_free(&run.latency_ms);
    return rc;
}
