/*
 * train.c - salus-train: one deep-learning training job, as the GPU and the
 * driver see it.
 *
 * An iteration: per-iteration memory allocated; for each of --accum
 * micro-batches, host time (data loading) then the kernel sequence, split
 * by --syncs-per-iter logging syncs (item-like), and an item-like sync at
 * the end of the micro-batch when accumulating; the optimizer step (one
 * salus_axpy) when accumulating; the per-iteration memory freed; the
 * iteration-end sync of the chosen style.  Persistent memory is allocated
 * once, before the first iteration.
 *
 * Divided into: options (table, preset, checks); set-up; one iteration;
 * the loop; tear-down; the result line; main.
 */
#include "wl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "salus-train"

typedef struct train_cfg {
    wl_common_t c;
    long long iterations;     /* 0: until --seconds */
    long long syncs_per_iter;
    long long accum;
    double host_ms;
    uint64_t iter_mem;
    double mem_seconds;       /* 0: --mem held to the end */
    int sync;
    const char *preset;
} train_cfg_t;

typedef struct train_run {
    wl_run_t w;               /* GPU, --mem, times, memory figures */
    const train_cfg_t *cfg;
    wl_kernel_kind_t *plan;
    wl_seq_t *segs;           /* the micro-batch's kernels, split at logging syncs */
    int nsegs;
    wl_seq_t optim;           /* the optimizer step under --accum */
    wl_buf_t iter;
    wl_samples_t iter_ms;
    uint64_t loop_start_ns, loop_end_ns, last_report_ns;
    long long done;
} train_run_t;

static const char synopsis[] =
    "One training job on the GPU: --iterations iterations (or --seconds) of --kernels\n"
    "launches (salus_spin of --kernel-us each, with --aux-kernels salus_fill/salus_axpy),\n"
    "host time, per-iteration memory, and a host sync of the --sync style at the end of\n"
    "each.  --preset NAME fills the options from a model's figures (--preset list);\n"
    "options given explicitly override it.\n\n"
    "Result line fields: program name pid iterations jct_s start_ns end_ns (CLOCK_MONOTONIC)\n"
    "iter_ms_mean iter_ms_p50 iter_ms_p99 throughput_it_s (iterations per second of the\n"
    "loop) gpu_ms_per_iter (salus_spin time per iteration) launches (kernels, also those\n"
    "inside graphs) syncs (host syncs of the iteration pattern) oom_retries [interrupted]\n"
    "ok [error].";

/* ---- options ------------------------------------------------------------ */

static size_t train_opts(train_cfg_t *t, wl_opt_t *o)
{
    size_t n = 0;
    o[n++] = WL_OPT("preset", WL_OPT_STR, &t->preset, NULL, 0, 0, "NAME",
                    "fill the options from a model's figures ('list' shows them)");
    o[n++] = WL_OPT("iterations", WL_OPT_INT, &t->iterations, NULL, 1, 1e12, "N",
                    "iterations of the job (default 100; unbounded with --seconds alone)");
    o[n++] = WL_OPT("sync", WL_OPT_ENUM, &t->sync, wl_sync_names, 0, 0, "STYLE",
                    "iteration-end sync: item (blocking 4-byte cuMemcpyDtoH, as loss.item()), "
                    "cuStreamSynchronize, cuCtxSynchronize, cuEventRecord+cuEventSynchronize, "
                    "or none (one drain at the end)");
    o[n++] = WL_OPT("host-ms", WL_OPT_DOUBLE, &t->host_ms, NULL, 0, 3.6e6, "MS",
                    "host time (data loading) before each micro-batch, milliseconds (default 0)");
    o[n++] = WL_OPT("iter-mem", WL_OPT_SIZE, &t->iter_mem, NULL, 0, 0, "SIZE",
                    "memory allocated before each iteration's kernels, freed after (default 0)");
    o[n++] = WL_OPT("mem-seconds", WL_OPT_DOUBLE, &t->mem_seconds, NULL, 0, 3.6e6, "S",
                    "free --mem for good after S seconds of iterations, as a job that drops "
                    "its warm-up buffers (default 0: held to the end)");
    o[n++] = WL_OPT("syncs-per-iter", WL_OPT_INT, &t->syncs_per_iter, NULL, 0, 1e6, "N",
                    "extra item-like logging syncs inside each micro-batch (default 0)");
    o[n++] = WL_OPT("accum", WL_OPT_INT, &t->accum, NULL, 1, 1e6, "N",
                    "gradient accumulation: N micro-batches of --kernels, each ending with an "
                    "item-like sync, then an optimizer step of one salus_axpy (default 1)");
    wl_common_opts(&t->c, o, &n);
    o[n] = (wl_opt_t){ 0 };
    return n;
}

/* Preset figures fill what the command line left unset. */
static int apply_preset(train_cfg_t *t, wl_opt_t *opts)
{
    if (!t->preset)
        return WL_OK;
    if (strcmp(t->preset, "list") == 0) {
        wl_preset_list(stdout);
        return 1;
    }
    const wl_preset_t *p = wl_preset_find(t->preset);
    if (!p) {
        fprintf(stderr, PROG ": --preset: unknown preset '%s'; known presets:\n", t->preset);
        wl_preset_list(stderr);
        return WL_EUSAGE;
    }
    if (!wl_opt_given(opts, "kernels"))
        t->c.kernels = p->kernels;
    if (!wl_opt_given(opts, "mem"))
        t->c.mem = p->mem;
    if (!wl_opt_given(opts, "iter-mem"))
        t->iter_mem = p->iter_mem;
    if (!wl_opt_given(opts, "host-ms"))
        t->host_ms = p->host_ms;
    if (!wl_opt_given(opts, "iterations") && !wl_opt_given(opts, "seconds"))
        t->iterations = p->iterations;
    if (!t->c.name)
        t->c.name = p->name;
    return WL_OK;
}

static int check_cfg(train_cfg_t *t, wl_opt_t *opts)
{
    int rc = wl_common_check(PROG, &t->c);
    if (rc)
        return rc;
    if (t->syncs_per_iter >= t->c.kernels) {
        fprintf(stderr, PROG ": --syncs-per-iter: %lld needs at least %lld kernels per "
                "iteration; --kernels is %lld\n", t->syncs_per_iter, t->syncs_per_iter + 1,
                t->c.kernels);
        return WL_EUSAGE;
    }
    /* The preset's iteration time is for its salus_spin kernels. */
    long long spins = t->c.kernels - t->c.aux_kernels;
    if (t->preset && !wl_opt_given(opts, "kernel-us")) {
        const wl_preset_t *p = wl_preset_find(t->preset);
        t->c.kernel_us = spins > 0 ? p->iter_ms * 1000.0 / (double)spins : 0;
    }
    if (wl_opt_given(opts, "seconds") && !wl_opt_given(opts, "iterations"))
        t->iterations = 0;
    if (!t->c.name)
        t->c.name = PROG;
    return WL_OK;
}

/* WL_OK to run, 1 when --help or a list was printed, WL_EUSAGE. */
static int parse_args(train_cfg_t *t, int argc, char **argv)
{
    memset(t, 0, sizeof *t);
    wl_common_defaults(&t->c);
    t->iterations = 100;
    t->accum = 1;
    t->sync = WL_SYNC_ITEM;
    wl_opt_t opts[48];
    train_opts(t, opts);
    int rc = wl_opt_parse(PROG, synopsis, opts, argc, argv);
    if (rc == WL_OK)
        rc = apply_preset(t, opts);
    if (rc == WL_OK)
        rc = check_cfg(t, opts);
    return rc;
}

/* ---- set-up ------------------------------------------------------------- */

/* The micro-batch's kernels in syncs_per_iter + 1 segments of nearly equal
 * length; a logging sync follows every segment but the last. */
static int setup_segments(train_run_t *r)
{
    const train_cfg_t *t = r->cfg;
    long long n = t->c.kernels;
    r->plan = wl_plan(n, t->c.aux_kernels);
    if (!r->plan)
        return WL_ECUDA;
    r->nsegs = (int)t->syncs_per_iter + 1;
    r->segs = calloc((size_t)r->nsegs, sizeof *r->segs);
    if (!r->segs)
        return wl_errorf(WL_ECUDA, "out of host memory");
    for (int k = 0; k < r->nsegs; k++) {
        int rc = wl_seq_init(&r->w.g, &r->segs[k], r->plan, (int)(k * n / r->nsegs),
                             (int)((k + 1) * n / r->nsegs));
        if (rc)
            return rc;
    }
    static const wl_kernel_kind_t step[] = { WL_K_AXPY };
    return wl_seq_init(&r->w.g, &r->optim, step, 0, t->accum > 1 ? 1 : 0);
}

static int setup(train_run_t *r)
{
    int rc = wl_run_setup(&r->w);
    return rc ? rc : setup_segments(r);
}

/* ---- one iteration ------------------------------------------------------ */

static int micro_batch(train_run_t *r)
{
    const train_cfg_t *t = r->cfg;
    int rc;
    if (t->host_ms > 0)
        wl_sleep_until(wl_now_ns() + (uint64_t)(t->host_ms * 1e6));
    for (int k = 0; k < r->nsegs; k++) {
        if ((rc = wl_seq_launch(&r->w.g, &r->segs[k])))
            return rc;
        if (k + 1 < r->nsegs && (rc = wl_sync(&r->w.g, WL_SYNC_ITEM)))
            return rc;
    }
    return WL_OK;
}

static int iteration(train_run_t *r)
{
    const train_cfg_t *t = r->cfg;
    uint64_t t0 = wl_now_ns();
    int rc = wl_buf_alloc(&r->w.g, &r->iter, t->iter_mem, "--iter-mem", r->w.deadline_ns,
                          &r->w.oom_retries);
    if (rc)
        return rc;
    if (t->c.verbose && r->done == 0 &&
        (rc = wl_gpu_meminfo(&r->w.g, &r->w.free_iter, &r->w.total)))
        return rc;
    for (long long m = 0; m < t->accum; m++) {
        if ((rc = micro_batch(r)))
            return rc;
        if (t->accum > 1 && (rc = wl_sync(&r->w.g, WL_SYNC_ITEM)))
            return rc;
    }
    if ((rc = wl_seq_launch(&r->w.g, &r->optim)) ||
        (rc = wl_buf_free(&r->w.g, &r->iter)) ||
        (rc = wl_sync(&r->w.g, t->sync)))
        return rc;
    uint64_t t1 = wl_now_ns();
    if (t->mem_seconds > 0 && t1 - r->loop_start_ns >= (uint64_t)(t->mem_seconds * 1e9) &&
        (rc = wl_buf_free(&r->w.g, &r->w.mem)))
        return rc;                    /* freed once: its size is 0 from now on */
    r->done++;
    return wl_samples_add(&r->iter_ms, (double)(t1 - t0) / 1e6);
}

/* ---- the loop ----------------------------------------------------------- */

static int more_to_do(const train_run_t *r)
{
    if (wl_stop_requested())
        return 0;
    if (r->cfg->iterations && r->done >= r->cfg->iterations)
        return 0;
    return !r->w.deadline_ns || wl_now_ns() < r->w.deadline_ns;
}

/* At most two progress lines a second, whatever the iteration time. */
static void progress(train_run_t *r)
{
    uint64_t now = wl_now_ns();
    if (!r->cfg->c.verbose || (now - r->last_report_ns < 500000000ull && more_to_do(r)))
        return;
    r->last_report_ns = now;
    fprintf(stderr, PROG "[%d]: iteration %lld%s%lld  last %.3f ms  mean %.3f ms\n",
            (int)getpid(), r->done, r->cfg->iterations ? "/" : "",
            r->cfg->iterations, r->iter_ms.n ? r->iter_ms.v[r->iter_ms.n - 1] : 0.0,
            wl_samples_mean(&r->iter_ms));
}

static int run_loop(train_run_t *r)
{
    r->loop_start_ns = wl_now_ns();
    int rc = WL_OK;
    while (more_to_do(r)) {
        if ((rc = iteration(r)))
            break;
        progress(r);
    }
    r->loop_end_ns = wl_now_ns();
    return rc;
}

/* ---- tear-down ---------------------------------------------------------- */

/* Everything is released even after a failure; the first failure stays the
 * recorded one. */
static int teardown(train_run_t *r, int rc)
{
    wl_buf_t *bufs[] = { &r->iter, &r->w.mem };
    rc = wl_run_finish(&r->w, bufs, 2, rc);
    int r2;
    for (int k = 0; r->segs && k < r->nsegs; k++)
        if ((r2 = wl_seq_free(&r->segs[k])) && !rc)
            rc = r2;
    if ((r2 = wl_seq_free(&r->optim)) && !rc)
        rc = r2;
    free(r->segs);
    free(r->plan);
    return wl_run_close(&r->w, rc);
}

/* ---- the result line ---------------------------------------------------- */

static void report(train_run_t *r, int rc)
{
    const train_cfg_t *t = r->cfg;
    double loop_s = (double)(r->loop_end_ns - r->loop_start_ns) / 1e9;
    long long spins = t->c.kernels - t->c.aux_kernels;
    wl_json_t j;
    wl_run_json_begin(&r->w, &j, "iterations", r->done);
    wl_json_num(&j, "iter_ms_mean", wl_samples_mean(&r->iter_ms), 4);
    wl_json_num(&j, "iter_ms_p50", wl_samples_pct(&r->iter_ms, 50), 4);
    wl_json_num(&j, "iter_ms_p99", wl_samples_pct(&r->iter_ms, 99), 4);
    wl_json_num(&j, "throughput_it_s", loop_s > 0 ? (double)r->done / loop_s : 0, 4);
    wl_json_num(&j, "gpu_ms_per_iter", (double)(t->accum * spins) * t->c.kernel_us / 1000.0, 4);
    wl_run_json_end(&r->w, &j, rc);
}

static void describe(const train_cfg_t *t)
{
    char mem[32], iter[32];
    fprintf(stderr, PROG "[%d]: %s: %lld iterations%s, %lld kernels (%lld aux) of %.1f us, "
            "accum %lld, syncs-per-iter %lld, sync %s, host %.2f ms, mem %s, iter-mem %s, "
            "alloc %s, stream %s, launch %s\n", (int)getpid(), t->c.name, t->iterations,
            t->c.seconds > 0 ? " (or --seconds)" : "", t->c.kernels, t->c.aux_kernels,
            t->c.kernel_us, t->accum, t->syncs_per_iter, wl_sync_names[t->sync], t->host_ms,
            wl_fmt_size(t->c.mem, mem, sizeof mem), wl_fmt_size(t->iter_mem, iter, sizeof iter),
            wl_alloc_names[t->c.alloc], wl_stream_names[t->c.stream], wl_launch_names[t->c.launch]);
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    train_cfg_t cfg;
    int rc = parse_args(&cfg, argc, argv);
    if (rc)
        return rc == 1 ? 0 : rc;
    train_run_t run;
    memset(&run, 0, sizeof run);
    run.cfg = &cfg;
    wl_run_begin(&run.w, PROG, &cfg.c);
    if (cfg.c.verbose)
        describe(&cfg);
    rc = setup(&run);
    if (!rc)
        rc = run_loop(&run);
    rc = teardown(&run, rc);
    report(&run, rc);
    wl_samples_free(&run.iter_ms);
    return rc;
}
