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
    wl_run_t w;               /* GPU, --mem, times, memory figures */
    const infer_cfg_t *cfg;
    wl_kernel_kind_t *plan;
    wl_seq_t fwd;
    wl_samples_t latency_ms;
    long long slo_violations;
    uint64_t serve_start_ns, last_done_ns;
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

static int parse_args(infer_cfg_t *t, int argc, char **argv)
{
    memset(t, 0, sizeof *t);
    wl_common_defaults(&t->c);
    t->requests = 100;
    t->rate = 50;
    wl_opt_t opts[40];
    size_t n = 0;
    opts[n++] = WL_OPT("requests", WL_OPT_INT, &t->requests, NULL, 1, 1e12, "N",
                       "requests to serve (default 100; unbounded with --seconds alone)");
    opts[n++] = WL_OPT("rate", WL_OPT_DOUBLE, &t->rate, NULL, 0, 1e6, "R",
                       "mean arrivals per second, Poisson (default 50; 0: back to back)");
    opts[n++] = WL_OPT("slo-ms", WL_OPT_DOUBLE, &t->slo_ms, NULL, 0, 3.6e6, "MS",
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
    int rc = wl_run_setup(&r->w);
    if (rc)
        return rc;
    r->w.free_iter = r->w.free_start;   /* no per-request memory */
    r->plan = wl_plan(t->c.kernels, t->c.aux_kernels);
    if (!r->plan)
        return WL_ECUDA;
    return wl_seq_init(&r->w.g, &r->fwd, r->plan, 0, (int)t->c.kernels);
}

/* ---- serving ------------------------------------------------------------ */

static int serve_one(infer_run_t *r, uint64_t arrival_ns)
{
    int rc = wl_seq_launch(&r->w.g, &r->fwd);
    if (!rc)
        rc = wl_sync(&r->w.g, WL_SYNC_ITEM);
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
    wl_buf_t *bufs[] = { &r->w.mem };
    rc = wl_run_finish(&r->w, bufs, 1, rc);
    int r2 = wl_seq_free(&r->fwd);
    rc = rc ? rc : r2;
    free(r->plan);
    return wl_run_close(&r->w, rc);
}

/* ---- the result line ---------------------------------------------------- */

static void report(infer_run_t *r, int rc)
{
    const infer_cfg_t *t = r->cfg;
    const wl_samples_t *l = &r->latency_ms;
    double serve_s = (double)(r->last_done_ns - r->serve_start_ns) / 1e9;
    long long spins = t->c.kernels - t->c.aux_kernels;
    wl_json_t j;
    wl_run_json_begin(&r->w, &j, "requests", (long long)l->n);
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
    wl_run_json_end(&r->w, &j, rc);
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
    wl_run_begin(&run.w, PROG, &cfg.c);
    rc = setup(&run);
    if (!rc)
        rc = serve(&run);
    rc = teardown(&run, rc);
    report(&run, rc);
    wl_samples_free(&run.latency_ms);
    return rc;
}
