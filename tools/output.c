/*
 * output.c - a snapshot written without a terminal: as plain text (salus-top
 * --once, salus status), as one JSON object (--json), or in the Prometheus
 * text exposition format (--prometheus, for node_exporter's textfile
 * collector).
 *
 * Divided into: plain text; JSON; Prometheus.
 *
 * The JSON shape is an interface that scripts rely on: fields are added,
 * never removed or renamed (salus-top(1) lists them).  Every string comes
 * from a table written by other processes and is escaped here.
 */
#include "top.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "salus_version.h"

/* ---- plain text ---------------------------------------------------------------- */

/* "versions: this salus 0.3.0 (table ABI 7); /salus-1000 made by 0.3.0; ...":
 * which versions of Salus the tables in sight belong to. */
static void print_versions(FILE *f, const top_snap_t *s)
{
    fprintf(f, "versions: this salus %s (table ABI %u)", SALUS_VERSION,
            (unsigned)SHM_ABI_VERSION);
    for (int i = 0; i < s->ntables; i++)
        fprintf(f, "; %s made by %s%s", s->tables[i].name,
                s->tables[i].made_by[0] ? "Salus " : "an older Salus of this ABI",
                s->tables[i].made_by);
    for (int i = 0; i < s->nothers; i++) {
        const top_other_t *o = &s->others[i];
        fprintf(f, "; %s of table ABI %u (%s%s), ", o->name, o->abi,
                o->made_by[0] ? "Salus " : "an older Salus", o->made_by);
        if (o->nprocs >= 0)
            fprintf(f, "%d live process%s, ", o->nprocs, o->nprocs == 1 ? "" : "es");
        fprintf(f, "not read by this salus");
    }
    fprintf(f, "\n");
}

void top_print_text(FILE *f, const top_snap_t *s, top_col_t sort, int width)
{
    if (s->ntables == 0) {
        fprintf(f, "%s\n", s->note);
        if (s->nothers > 0)
            print_versions(f, s);
        return;
    }
    top_snap_t copy = *s;                     /* sorting reorders rows only */
    copy.procs = malloc((size_t)(s->nprocs > 0 ? s->nprocs : 1) * sizeof *copy.procs);
    if (!copy.procs)
        copy.procs = s->procs;                /* unsorted, rather than nothing */
    else
        memcpy(copy.procs, s->procs, (size_t)s->nprocs * sizeof *copy.procs);
    if (copy.procs != s->procs)
        top_sort(&copy, sort);

    top_layout_t l;
    char line[2048];
    top_layout_compute(width, top_name_len(s), &l);
    int nprocs = 0;
    for (int i = 0; i < s->ntables; i++)
        nprocs += s->tables[i].nprocs;
    fprintf(f, "salus-top: %d table%s, %d process%s", s->ntables, s->ntables == 1 ? "" : "s",
            nprocs, nprocs == 1 ? "" : "es");
    if (s->interval_s > 0)
        fprintf(f, "; GPU%% and WAIT%% over the last %.1f s", s->interval_s);
    if (s->hidden_tables > 0)
        fprintf(f, "; %d other table%s without live processes (--all shows them)",
                s->hidden_tables, s->hidden_tables == 1 ? "" : "s");
    fprintf(f, "\n");
    print_versions(f, s);
    if (s->note[0])
        fprintf(f, "note: %s\n", s->note);
    for (int d = 0; d < s->ndevices; d++) {
        const top_device_t *dev = &s->devices[d];
        top_device_line(s, dev, width, line, sizeof line);
        fprintf(f, "\n%s\n", line);
        top_device_line2(s, dev, width, line, sizeof line);
        fprintf(f, "%s\n", line);
        top_format_title(&l, line, sizeof line);
        fprintf(f, "%s\n", line);
        int first = top_device_first(&copy, d);
        for (int i = first; i < first + dev->nprocs && i < copy.nprocs; i++) {
            top_format_row(&l, &copy.procs[i], line, sizeof line);
            fprintf(f, "%s\n", line);
        }
    }
    if (copy.procs != s->procs)
        free(copy.procs);
}

/* ---- JSON ---------------------------------------------------------------------- */

static void json_share(FILE *f, const char *key, double v)
{
    if (v < 0)
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.4f", key, v);
}

static void json_proc(FILE *f, const top_proc_t *p)
{
    fprintf(f, "{\"pid\":%d,\"name\":", (int)p->pid);
    top_json_string(f, p->name);
    fprintf(f, ",\"user\":");
    top_json_string(f, p->user);
    fprintf(f, ",\"uid\":%u,\"priority\":%d,\"state\":", (unsigned)p->uid, p->priority);
    top_json_string(f, top_state_names[top_proc_state(p)]);
    fprintf(f, ",\"gang\":");
    top_json_string(f, p->gang);
    fprintf(f, ",\"waiting_admission\":%s,\"holds_lease\":%s",
            p->waiting_admission ? "true" : "false", p->holds ? "true" : "false");
    fprintf(f, ",\"mem_used_bytes\":%llu,\"mem_context_bytes\":%llu,\"mem_limit_bytes\":%llu"
            ",\"mem_peak_bytes\":%llu,\"mem_reserved_bytes\":%llu,\"oom_refusals\":%llu",
            (unsigned long long)p->mem_used, (unsigned long long)p->mem_ctx,
            (unsigned long long)p->mem_limit, (unsigned long long)p->mem_peak,
            (unsigned long long)p->mem_reserved, (unsigned long long)p->oom_refusals);
    fprintf(f, ",\"swapped_out_bytes\":%llu,\"swap_outs\":%llu,\"swap_ins\":%llu,"
            "\"swap_ms\":%llu,\"pinned_bytes\":%llu", (unsigned long long)p->mem_swapped,
            (unsigned long long)p->swap_outs, (unsigned long long)p->swap_ins,
            (unsigned long long)p->swap_ms, (unsigned long long)p->mem_pinned);
    fprintf(f, ",\"iterations\":%llu,\"declared_iterations\":%llu,\"declared_length_ms\":%u"
            ",\"iter_ms\":%.3f,\"gpu_held_ms\":%.3f,\"waited_ms\":%.3f",
            (unsigned long long)p->iterations, (unsigned long long)p->declared, p->length_ms,
            p->iter_ms, p->gpu_held_ms, p->waited_ms);
    json_share(f, "gpu_share", p->gpu_share);
    json_share(f, "wait_share", p->wait_share);
    fprintf(f, ",\"switches\":%llu}", (unsigned long long)p->switches);
}

/* Who may run now: the holder, or every process under pack. */
static void json_holders(FILE *f, const top_snap_t *s, const top_device_t *d, int first)
{
    int n = 0;
    fprintf(f, ",\"holders\":[");
    if (d->has_sched && d->policy == SCHED_POLICY_PACK) {
        for (int i = first; i < first + d->nprocs && i < s->nprocs; i++)
            fprintf(f, "%s%d", n++ ? "," : "", (int)s->procs[i].pid);
    } else if (d->holder > 0) {
        fprintf(f, "%d", (int)d->holder);
    }
    fprintf(f, "],\"waiters\":[");
    for (int i = 0; i < d->nwaiters; i++)
        fprintf(f, "%s%d", i ? "," : "", (int)d->waiters[i]);
    fprintf(f, "]");
}

/* "nvml": what NVML says of the GPU (every tenant's), null without NVML;
 * a sensor the GPU does not report is null. */
static void json_nvml(FILE *f, const top_device_t *d)
{
    const top_nvml_t *n = &d->nvml;
    if (!d->has_nvml) {
        fprintf(f, ",\"nvml\":null");
        return;
    }
    fprintf(f, ",\"nvml\":{\"mem_used_bytes\":%llu,\"mem_total_bytes\":%llu,\"utilization_percent\":",
            (unsigned long long)n->mem_used, (unsigned long long)n->mem_total);
    n->util_pct >= 0 ? fprintf(f, "%d", n->util_pct) : fprintf(f, "null");
    fprintf(f, ",\"temperature_c\":");
    n->temp_c >= 0 ? fprintf(f, "%d", n->temp_c) : fprintf(f, "null");
    fprintf(f, ",\"power_watts\":");
    n->power_mw >= 0 ? fprintf(f, "%.3f", (double)n->power_mw / 1000) : fprintf(f, "null");
    fprintf(f, "}");
}

static void json_device(FILE *f, const top_snap_t *s, int di)
{
    const top_device_t *d = &s->devices[di];
    int first = top_device_first(s, di);
    fprintf(f, "{\"table\":");
    top_json_string(f, s->tables[d->table].name);
    fprintf(f, ",\"uuid\":");
    top_json_string(f, d->uuid);
    fprintf(f, ",\"model\":");
    top_json_string(f, d->model);
    fprintf(f, ",\"gpu_index\":%d,\"index\":%d,\"mem_capacity_bytes\":%llu,"
            "\"mem_budget_bytes\":%llu,\"mem_used_bytes\":%llu,\"mem_context_bytes\":%llu,"
            "\"mem_foreign_bytes\":%llu,\"mem_reserved_bytes\":%llu,\"policy\":", d->gpu_index,
            d->index, (unsigned long long)d->capacity, (unsigned long long)d->budget,
            (unsigned long long)d->used, (unsigned long long)d->ctx,
            (unsigned long long)d->foreign, (unsigned long long)d->reserved);
    top_json_string(f, d->has_sched ? sched_policy_names[d->policy] : "unknown");
    fprintf(f, ",\"quantum_ms\":%u,\"max_slice_ms\":%u,\"switches\":%llu",
            (unsigned)d->quantum_ms, (unsigned)d->max_slice_ms,
            (unsigned long long)d->switches);
    json_nvml(f, d);
    json_holders(f, s, d, first);
    fprintf(f, ",\"mem_waiters\":%u,\"admission_queue\":%u,\"processes\":[",
            (unsigned)d->mem_waiters, (unsigned)d->queued);
    for (int i = first; i < first + d->nprocs && i < s->nprocs; i++) {
        if (i > first)
            fputc(',', f);
        json_proc(f, &s->procs[i]);
    }
    fprintf(f, "]}");
}

/* RFC 3339, UTC, to the millisecond: 2026-12-01T09:00:00.123Z. */
static void json_time(FILE *f, int64_t wall_ms)
{
    time_t sec = (time_t)(wall_ms / 1000);
    struct tm tm;
    char buf[32];
    if (!gmtime_r(&sec, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(buf, sizeof buf, "1970-01-01T00:00:00");
    fprintf(f, "\"%s.%03dZ\"", buf, (int)(wall_ms % 1000));
}

void top_print_json(FILE *f, const top_snap_t *s)
{
    fprintf(f, "{\"time\":");
    json_time(f, s->wall_ms);
    fprintf(f, ",\"host\":");
    top_json_string(f, s->host);
    fprintf(f, ",\"devices\":[");
    for (int d = 0; d < s->ndevices; d++) {
        if (d)
            fputc(',', f);
        json_device(f, s, d);
    }
    fprintf(f, "],\"tables\":[");
    for (int i = 0; i < s->ntables; i++) {
        fprintf(f, "%s{\"name\":", i ? "," : "");
        top_json_string(f, s->tables[i].name);
        fprintf(f, ",\"processes\":%d,\"table_abi\":%u,\"made_by\":", s->tables[i].nprocs,
                s->tables[i].abi);
        top_json_string(f, s->tables[i].made_by);
        fputc('}', f);
    }
    fprintf(f, "],\"salus_version\":");
    top_json_string(f, SALUS_VERSION);
    fprintf(f, ",\"table_abi\":%u,\"other_versions\":[", (unsigned)SHM_ABI_VERSION);
    for (int i = 0; i < s->nothers; i++) {
        fprintf(f, "%s{\"name\":", i ? "," : "");
        top_json_string(f, s->others[i].name);
        fprintf(f, ",\"table_abi\":%u,\"made_by\":", s->others[i].abi);
        top_json_string(f, s->others[i].made_by);
        if (s->others[i].nprocs >= 0)
            fprintf(f, ",\"processes\":%d}", s->others[i].nprocs);
        else
            fprintf(f, ",\"processes\":null}");
    }
    fprintf(f, "],\"hidden_tables\":%d,\"interval_s\":%.3f,\"note\":", s->hidden_tables,
            s->interval_s);
    top_json_string(f, s->note);
    fprintf(f, "}\n");
}

/* ---- Prometheus -------------------------------------------------------------------
 * One family at a time (HELP, TYPE, then every sample), as the format asks.
 * Counters carry _total; shares are gauges in [0, 1], absent when not
 * measured.  Label values are escaped.
 *
 * Every series of a GPU carries DCGM exporter's labels, so that a query can
 * join them with DCGM's (on UUID, or gpu and Hostname): gpu (the driver's
 * index, else the table's), UUID, modelName, Hostname and device
 * ("nvidia<minor>"), the last three where known; and ours, table and
 * table_device (the GPU's index in the table).  States and policies are
 * info-style: one series per possible value, 1 for the current one and 0
 * for the others, so that no series comes and goes with a change. */

typedef double (*dev_get_fn)(const top_device_t *d);
typedef double (*proc_get_fn)(const top_proc_t *p);

static double d_capacity(const top_device_t *d) { return (double)d->capacity; }
static double d_budget(const top_device_t *d) { return (double)d->budget; }
static double d_used(const top_device_t *d) { return (double)d->used; }
static double d_ctx(const top_device_t *d) { return (double)d->ctx; }
static double d_foreign(const top_device_t *d) { return (double)d->foreign; }
static double d_reserved(const top_device_t *d) { return (double)d->reserved; }
static double d_mem_waiters(const top_device_t *d) { return d->mem_waiters; }
static double d_queued(const top_device_t *d) { return d->queued; }
static double d_quantum(const top_device_t *d) { return d->quantum_ms / 1e3; }
static double d_slice(const top_device_t *d) { return d->max_slice_ms / 1e3; }
static double d_waiters(const top_device_t *d) { return d->nwaiters; }
static double d_switches(const top_device_t *d) { return (double)d->switches; }

static double p_used(const top_proc_t *p) { return (double)p->mem_used; }
static double p_ctx(const top_proc_t *p) { return (double)p->mem_ctx; }
static double p_limit(const top_proc_t *p) { return (double)p->mem_limit; }
static double p_peak(const top_proc_t *p) { return (double)p->mem_peak; }
static double p_reserved(const top_proc_t *p) { return (double)p->mem_reserved; }
static double p_prio(const top_proc_t *p) { return p->priority; }
static double p_holds(const top_proc_t *p) { return p->holds; }
static double p_iters(const top_proc_t *p) { return (double)p->iterations; }
static double p_iter_s(const top_proc_t *p) { return p->iter_ms / 1e3; }
static double p_held(const top_proc_t *p) { return p->gpu_held_ms / 1e3; }
static double p_waited(const top_proc_t *p) { return p->waited_ms / 1e3; }
static double p_gpu(const top_proc_t *p) { return p->gpu_share; }
static double p_wait(const top_proc_t *p) { return p->wait_share; }
static double p_switches(const top_proc_t *p) { return (double)p->switches; }
static double p_oom(const top_proc_t *p) { return (double)p->oom_refusals; }
static double p_swapped(const top_proc_t *p) { return (double)p->mem_swapped; }
static double p_pinned(const top_proc_t *p) { return (double)p->mem_pinned; }
static double p_swap_outs(const top_proc_t *p) { return (double)p->swap_outs; }
static double p_swap_ins(const top_proc_t *p) { return (double)p->swap_ins; }
static double p_swap_s(const top_proc_t *p) { return p->swap_ms / 1e3; }

static const struct {
    const char *name, *type, *help;
    dev_get_fn get;
    int mem;             /* needs the memory module's figures */
} dev_metrics[] = {
    { "salus_device_memory_capacity_bytes", "gauge", "Memory of the GPU.", d_capacity, 1 },
    { "salus_device_memory_budget_bytes", "gauge",
      "Memory the processes may share (capacity minus headroom).", d_budget, 1 },
    { "salus_device_memory_used_bytes", "gauge",
      "Memory the processes hold, their contexts and modules included (what the budget counts).",
      d_used, 1 },
    { "salus_device_memory_context_bytes", "gauge",
      "Memory the processes' contexts and modules take (part of the used bytes).", d_ctx, 1 },
    { "salus_device_memory_foreign_bytes", "gauge",
      "Memory the driver last showed taken beyond the table's processes (not in the used "
      "bytes; the budget counts it).", d_foreign, 1 },
    { "salus_device_memory_reserved_bytes", "gauge",
      "Memory reserved for admitted jobs (SALUS_MEM_RESERVE).", d_reserved, 1 },
    { "salus_device_memory_waiters", "gauge",
      "Processes waiting for memory under a limit or the budget.", d_mem_waiters, 1 },
    { "salus_device_admission_queue", "gauge",
      "Jobs waiting to be admitted for their reservation.", d_queued, 1 },
    { "salus_device_quantum_seconds", "gauge",
      "Least time a lease holder keeps the GPU before yielding to an equal waiter.",
      d_quantum, 0 },
    { "salus_device_max_slice_seconds", "gauge",
      "Longest a holder keeps the GPU without reaching a boundary.", d_slice, 0 },
    { "salus_device_waiters", "gauge", "Processes waiting for the GPU's lease.", d_waiters, 0 },
    { "salus_device_switches_total", "counter", "Lease handoffs between processes.",
      d_switches, 0 },
};

static const struct {
    const char *name, *type, *help;
    proc_get_fn get;
    int mem;             /* from the memory module (else from the scheduler) */
} proc_metrics[] = {
    { "salus_process_memory_used_bytes", "gauge",
      "Device memory the process holds, its contexts and modules included (what its limit "
      "counts).", p_used, 1 },
    { "salus_process_memory_context_bytes", "gauge",
      "Device memory the process's contexts and modules take (part of the used bytes).",
      p_ctx, 1 },
    { "salus_process_memory_limit_bytes", "gauge", "The process's memory limit.", p_limit, 1 },
    { "salus_process_memory_peak_bytes", "gauge", "Most device memory the process held.",
      p_peak, 1 },
    { "salus_process_memory_reserved_bytes", "gauge",
      "Memory reserved for the process (SALUS_MEM_RESERVE).", p_reserved, 1 },
    { "salus_process_priority", "gauge", "SALUS_PRIORITY of the process (0..100).", p_prio, 0 },
    { "salus_process_holds_lease", "gauge", "1 while the process holds the GPU's lease.",
      p_holds, 0 },
    { "salus_process_iterations_total", "counter", "Iterations the process has done.", p_iters, 0 },
    { "salus_process_iteration_seconds", "gauge", "Mean running time of an iteration.",
      p_iter_s, 0 },
    { "salus_process_gpu_held_seconds_total", "counter", "Time the process held the GPU.",
      p_held, 0 },
    { "salus_process_waited_seconds_total", "counter", "Time the process waited for the GPU.",
      p_waited, 0 },
    { "salus_process_gpu_share", "gauge",
      "Share of the last interval the process held the GPU (0..1).", p_gpu, 0 },
    { "salus_process_wait_share", "gauge",
      "Share of the last interval the process waited for the GPU (0..1).", p_wait, 0 },
    { "salus_process_switches_total", "counter", "Times the process was handed the GPU.",
      p_switches, 0 },
    { "salus_process_oom_refusals_total", "counter", "Allocations refused over a limit.", p_oom, 1 },
    { "salus_process_memory_swapped_out_bytes", "gauge",
      "Device memory of the process paged out to the host now (SALUS_SWAP).", p_swapped, 1 },
    { "salus_process_memory_pinned_bytes", "gauge",
      "Device memory of the process that paging cannot move: exported over CUDA IPC.",
      p_pinned, 1 },
    { "salus_process_swap_outs_total", "counter", "Times the process paged its memory out.",
      p_swap_outs, 1 },
    { "salus_process_swap_ins_total", "counter", "Times the process paged its memory back in.",
      p_swap_ins, 1 },
    { "salus_process_swap_seconds_total", "counter",
      "Time the process spent paging out and in.", p_swap_s, 1 },
};

static void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_label(FILE *f, const char *name, const char *value)
{
    fprintf(f, ",%s=\"", name);
    top_prom_label(f, value);
    fputc('"', f);
}

/* The labels of a GPU, without the closing brace. */
static void prom_dev_labels(FILE *f, const top_snap_t *s, const top_device_t *d)
{
    fprintf(f, "{table=\"");
    top_prom_label(f, s->tables[d->table].name);
    fprintf(f, "\",table_device=\"%d\",gpu=\"%d\"", d->index,
            d->gpu_index >= 0 ? d->gpu_index : d->index);
    if (d->uuid[0])
        prom_label(f, "UUID", d->uuid);
    if (d->model[0])
        prom_label(f, "modelName", d->model);
    prom_label(f, "Hostname", s->host);
    if (d->minor >= 0)
        fprintf(f, ",device=\"nvidia%d\"", d->minor);
    if (d->pci_bus_id[0])
        prom_label(f, "pci_bus_id", d->pci_bus_id);
}

/* A Slurm step's process is named "<job>.<step> <job name>" by the plugin
 * (the job "<array>_<task>" in an array): its job and step as labels, so
 * that series join Slurm's accounting.  0 when the name is not one. */
static int slurm_ids(const char *name, char *job, size_t jlen, char *step, size_t slen)
{
    size_t j = strspn(name, "0123456789");
    if (j && name[j] == '_')
        j += 1 + strspn(name + j + 1, "0123456789");
    if (!j || name[j] != '.' || !isdigit((unsigned char)name[0]))
        return 0;
    size_t s = strcspn(name + j + 1, " ");
    if (!s || name[j + 1 + s] != ' ' || j >= jlen || s >= slen)
        return 0;
    snprintf(job, jlen, "%.*s", (int)j, name);
    snprintf(step, slen, "%.*s", (int)s, name + j + 1);
    return 1;
}

static const top_device_t *device_of(const top_snap_t *s, const top_proc_t *p)
{
    for (int d = 0; d < s->ndevices; d++)
        if (s->devices[d].table == p->table && s->devices[d].index == p->device)
            return &s->devices[d];
    return NULL;
}

static void prom_proc_labels(FILE *f, const top_snap_t *s, const top_proc_t *p)
{
    const top_device_t *d = device_of(s, p);
    if (d) {
        prom_dev_labels(f, s, d);
    } else {
        fprintf(f, "{table=\"");
        top_prom_label(f, s->tables[p->table].name);
        fprintf(f, "\",table_device=\"%d\"", p->device);
    }
    fprintf(f, ",pid=\"%d\"", (int)p->pid);
    prom_label(f, "name", p->name);
    prom_label(f, "user", p->user);
    char job[32], step[32];
    if (slurm_ids(p->name, job, sizeof job, step, sizeof step)) {
        prom_label(f, "slurm_job", job);
        prom_label(f, "slurm_step", step);
    }
}

static void prom_device_families(FILE *f, const top_snap_t *s)
{
    prom_family(f, "salus_device_policy", "gauge",
                "The GPU's policy: 1 for the current one, 0 for the others.");
    for (int d = 0; d < s->ndevices; d++) {
        const top_device_t *dev = &s->devices[d];
        for (int p = 0; dev->has_sched && p < SCHED_POLICY_COUNT; p++) {
            fprintf(f, "salus_device_policy");
            prom_dev_labels(f, s, dev);
            fprintf(f, ",policy=\"%s\"} %d\n", sched_policy_names[p], (int)dev->policy == p);
        }
    }
    for (size_t m = 0; m < sizeof dev_metrics / sizeof *dev_metrics; m++) {
        prom_family(f, dev_metrics[m].name, dev_metrics[m].type, dev_metrics[m].help);
        for (int d = 0; d < s->ndevices; d++) {
            const top_device_t *dev = &s->devices[d];
            if (dev_metrics[m].mem ? !dev->has_mem : !dev->has_sched)
                continue;
            fprintf(f, "%s", dev_metrics[m].name);
            prom_dev_labels(f, s, dev);
            fprintf(f, "} %.12g\n", dev_metrics[m].get(dev));
        }
    }
}

static void prom_process_families(FILE *f, const top_snap_t *s)
{
    prom_family(f, "salus_process_state", "gauge",
                "The process's state: 1 for the current one, 0 for the others.");
    for (int i = 0; i < s->nprocs; i++) {
        top_state_t now = top_proc_state(&s->procs[i]);
        for (int st = 0; st < TOP_NSTATES; st++) {
            fprintf(f, "salus_process_state");
            prom_proc_labels(f, s, &s->procs[i]);
            fprintf(f, ",state=\"%s\"} %d\n", top_state_names[st], (int)now == st);
        }
    }
    for (size_t m = 0; m < sizeof proc_metrics / sizeof *proc_metrics; m++) {
        prom_family(f, proc_metrics[m].name, proc_metrics[m].type, proc_metrics[m].help);
        for (int i = 0; i < s->nprocs; i++) {
            const top_proc_t *p = &s->procs[i];
            double v = proc_metrics[m].get(p);
            if (v < 0 || !(proc_metrics[m].mem ? p->has_mem : p->has_sched))
                continue;                     /* not measured */
            fprintf(f, "%s", proc_metrics[m].name);
            prom_proc_labels(f, s, p);
            fprintf(f, "} %.12g\n", v);
        }
    }
}

void top_print_prometheus(FILE *f, const top_snap_t *s, int up)
{
    prom_family(f, "salus_up", "gauge", "1 when the Salus tables could be read, else 0.");
    fprintf(f, "salus_up{Hostname=\"");
    top_prom_label(f, s->host);
    fprintf(f, "\"} %d\n", up ? 1 : 0);
    prom_family(f, "salus_build_info", "gauge",
                "The version of the Salus tools that wrote this (always 1).");
    fprintf(f, "salus_build_info{version=\"%s\",abi=\"%u\"} 1\n", SALUS_VERSION,
            (unsigned)SHM_ABI_VERSION);
    prom_family(f, "salus_table_processes", "gauge", "Live processes attached to a table.");
    for (int i = 0; i < s->ntables; i++) {
        fprintf(f, "salus_table_processes{table=\"");
        top_prom_label(f, s->tables[i].name);
        fprintf(f, "\"} %d\n", s->tables[i].nprocs);
    }
    prom_device_families(f, s);
    prom_process_families(f, s);
}
