/*
 * wl_run.c - what a run of either program does around its own loop: start
 * the clock, set up (signals, GPU, free memory, --mem), finish (free, drain,
 * free memory again), and the fields that begin and end its result line.
 *
 * Divided into: start and set-up; the end; the result line.
 * A program's run embeds a wl_run_t and keeps only what its loop needs.
 */
#include "wl.h"

/* ---- start and set-up --------------------------------------------------- */

void wl_run_begin(wl_run_t *r, const char *prog, const wl_common_t *c)
{
    r->prog = prog;
    r->c = c;
    r->start_ns = wl_now_ns();
    if (c->seconds > 0)
        r->deadline_ns = r->start_ns + (uint64_t)(c->seconds * 1e9);
}

int wl_run_setup(wl_run_t *r)
{
    int rc = wl_signals_install();
    if (rc || (rc = wl_gpu_open(&r->g, r->prog, r->c)))
        return rc;
    if ((rc = wl_gpu_meminfo(&r->g, &r->free_start, &r->total)))
        return rc;
    return wl_buf_alloc(&r->g, &r->mem, r->c->mem, "--mem", r->deadline_ns, &r->oom_retries);
}

/* ---- the end ------------------------------------------------------------ */

int wl_run_finish(wl_run_t *r, wl_buf_t *const bufs[], int n, int rc)
{
    if (rc == WL_ESTOP)
        rc = WL_OK;     /* a signal or --seconds ended a wait for memory */
    r->interrupted = wl_stop_requested();
    return wl_finish(&r->g, bufs, n, &r->end_ns, &r->free_end, rc);
}

int wl_run_close(wl_run_t *r, int rc)
{
    int r2 = wl_gpu_close(&r->g);
    return rc ? rc : r2;
}

/* ---- the result line ---------------------------------------------------- */

void wl_run_json_begin(wl_run_t *r, wl_json_t *j, const char *count_key, long long count)
{
    if (!r->end_ns)
        r->end_ns = wl_now_ns();
    wl_json_head(j, r->prog, r->c->name);
    wl_json_int(j, count_key, count);
    wl_json_num(j, "jct_s", (double)(r->end_ns - r->start_ns) / 1e9, 6);
    wl_json_u64(j, "start_ns", r->start_ns);
    wl_json_u64(j, "end_ns", r->end_ns);
}

void wl_run_json_end(wl_run_t *r, wl_json_t *j, int rc)
{
    wl_json_u64(j, "launches", r->g.launches);
    wl_json_u64(j, "syncs", r->g.syncs);
    wl_json_u64(j, "oom_retries", r->oom_retries);
    wl_json_tail(j, rc, r->interrupted);
    wl_json_end(j, stdout);
    if (rc)
        fprintf(stderr, "%s: %s\n", r->prog, wl_error());
    if (r->c->verbose && rc == WL_OK)
        wl_report_mem(r->prog, r->free_start, r->free_iter, r->free_end, r->total);
}
