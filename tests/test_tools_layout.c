/*
 * test_tools_layout.c - the tools' pure parts, without a terminal or a
 * table: which columns fit a narrow (40) and a wide (200) terminal and how
 * wide each is, cells and their truncation, sorting, what changed between
 * snapshots, sanitizing, and the JSON and Prometheus outputs of a snapshot
 * made here (parsed back with a strict parser).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../tools/top.h"
#include "lib/testutil.h"
#include "test_tools_json.h"

/* ---- a snapshot made by hand ------------------------------------------------ */

static top_proc_t proc(int pid, const char *name, shm_state_t state, double gpu)
{
    top_proc_t p;
    memset(&p, 0, sizeof p);
    p.pid = pid;
    p.slot = pid % 7;
    p.gen = 1;
    snprintf(p.name, sizeof p.name, "%s", name);
    snprintf(p.user, sizeof p.user, "alice");
    p.state = state;
    p.has_sched = p.has_mem = 1;
    p.priority = 50;
    p.iterations = 120;
    p.iter_ms = 41.5;
    p.gpu_share = gpu;
    p.wait_share = gpu < 0 ? -1 : 1 - gpu;
    p.mem_used = 3ull << 30;
    p.mem_limit = 8ull << 30;
    p.switches = 7;
    return p;
}

/* One table, one device, three processes. */
static void make_snap(top_snap_t *s)
{
    top_snap_init(s);
    s->ntables = 1;
    snprintf(s->tables[0].name, sizeof s->tables[0].name, "/salus-test");
    s->tables[0].nprocs = 3;
    s->devices = calloc(1, sizeof *s->devices);
    s->ndevices = s->devcap = 1;
    top_device_t *d = &s->devices[0];
    d->has_sched = d->has_mem = 1;
    d->policy = SCHED_POLICY_FAIR;
    d->quantum_ms = 100;
    d->capacity = 16ull << 30;
    d->budget = 15ull << 30;
    d->used = 6ull << 30;                 /* with its contexts' part */
    d->ctx = 3ull << 29;
    d->holder = 101;
    d->nwaiters = 1;
    d->waiters[0] = 102;
    d->nprocs = 3;
    d->gpu_index = d->minor = -1;
    snprintf(s->host, sizeof s->host, "node1");
    s->procs = calloc(3, sizeof *s->procs);
    s->nprocs = s->proccap = 3;
    s->procs[0] = proc(101, "train-long", SHM_RUNNING, 0.75);
    s->procs[1] = proc(102, "bert \"quoted\" \\ name", SHM_WAIT_GPU, 0.25);
    s->procs[2] = proc(103, "serve", SHM_IDLE, -1);
    s->procs[2].priority = 90;
    s->interval_s = 1.0;
}

/* ---- layout ------------------------------------------------------------------ */

static int has_col(const top_layout_t *l, top_col_t c)
{
    for (int i = 0; i < l->ncols; i++)
        if (l->cols[i] == c)
            return 1;
    return 0;
}

static void test_layout_narrow(void **state)
{
    (void)state;
    top_layout_t l;
    top_layout_compute(40, 30, &l);
    assert_true(l.total <= 40);
    assert_true(has_col(&l, TOP_COL_PID));
    assert_true(has_col(&l, TOP_COL_NAME));
    assert_true(has_col(&l, TOP_COL_STATE));
    assert_true(has_col(&l, TOP_COL_GPU));
    assert_false(has_col(&l, TOP_COL_USER));       /* the first to go */
    assert_false(has_col(&l, TOP_COL_SWITCHES));
    /* NAME takes what is left, and no more than the width allows */
    for (int i = 0; i < l.ncols; i++)
        if (l.cols[i] == TOP_COL_NAME)
            assert_true(l.width[i] >= 6 && l.width[i] <= 40 - 7 - 9 - 4 - 3);
    /* columns do not overlap and follow each other */
    for (int i = 1; i < l.ncols; i++)
        assert_int_equal(l.x[i], l.x[i - 1] + l.width[i - 1] + 1);
}

static void test_layout_wide(void **state)
{
    (void)state;
    top_layout_t l;
    top_layout_compute(200, 20, &l);
    assert_int_equal(l.ncols, TOP_NCOLS);
    for (int i = 0; i < l.ncols; i++) {
        assert_int_equal(l.cols[i], (top_col_t)i);  /* in the documented order */
        if (l.cols[i] == TOP_COL_NAME)
            assert_int_equal(l.width[i], 20);       /* its longest cell, no more */
    }
    assert_true(l.total < 200);
    top_layout_compute(200, 500, &l);               /* a name longer than a slot holds */
    for (int i = 0; i < l.ncols; i++)
        if (l.cols[i] == TOP_COL_NAME)
            assert_int_equal(l.width[i], SHM_NAME_BYTES - 1);
}

static void test_layout_tiny(void **state)
{
    (void)state;
    top_layout_t l;
    for (int w = 1; w <= 30; w++) {
        top_layout_compute(w, 25, &l);
        assert_true(has_col(&l, TOP_COL_PID));
        assert_true(has_col(&l, TOP_COL_NAME));
        if (w >= 9)
            assert_true(l.total <= w);
    }
}

static void test_rows(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    top_layout_t l;
    char buf[512], title[512];
    top_layout_compute(200, top_name_len(&s), &l);
    top_format_title(&l, title, sizeof title);
    assert_int_equal((int)strlen(title), l.total);
    assert_non_null(strstr(title, "PID"));
    assert_non_null(strstr(title, "GPU%"));
    assert_non_null(strstr(title, "SWITCHES"));
    top_format_row(&l, &s.procs[0], buf, sizeof buf);
    assert_int_equal((int)strlen(buf), l.total);
    assert_memory_equal(buf, "    101", 7);               /* PID right-aligned */
    assert_non_null(strstr(buf, "train-long"));
    assert_non_null(strstr(buf, "running"));
    assert_non_null(strstr(buf, "3.0G/8.0G"));
    assert_non_null(strstr(buf, " 75 "));                  /* GPU% */
    top_format_row(&l, &s.procs[2], buf, sizeof buf);
    assert_non_null(strstr(buf, "idle"));
    assert_non_null(strstr(buf, "   - "));                 /* GPU% not measured */

    /* a narrow terminal cuts the name and marks the cut */
    top_layout_compute(40, top_name_len(&s), &l);
    top_format_row(&l, &s.procs[1], buf, sizeof buf);
    assert_true((int)strlen(buf) <= 40);
    assert_non_null(strstr(buf, "+"));
    assert_non_null(strstr(buf, "waiting-gpu"));
    top_snap_free(&s);
}

static void test_fit(void **state)
{
    (void)state;
    char buf[16];
    top_fit("abcdefgh", 5, buf, sizeof buf);
    assert_string_equal(buf, "abcd+");
    top_fit("abc", 5, buf, sizeof buf);
    assert_string_equal(buf, "abc");
    top_fit("abc", 0, buf, sizeof buf);
    assert_string_equal(buf, "");
    top_fit("abcdefghijklmnopqrstuvwxyz", 40, buf, sizeof buf);   /* the buffer bounds it */
    assert_int_equal(strlen(buf), sizeof buf - 1);
}

static void test_device_lines(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    char buf[512];
    top_device_line(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "GPU 0"));
    assert_non_null(strstr(buf, "6.0G used of 15G (contexts 1.5G)"));
    assert_non_null(strstr(buf, "16G"));
    assert_non_null(strstr(buf, "policy fair"));
    assert_non_null(strstr(buf, "quantum 100 ms"));
    s.devices[0].foreign = 1ull << 29;                /* beside used, not in it */
    top_device_line(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "6.0G used of 15G (contexts 1.5G; 512M outside Salus)"));
    s.devices[0].ctx = s.devices[0].foreign = 0;      /* nothing to say */
    top_device_line(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_null(strstr(buf, "contexts"));
    s.devices[0].ctx = 3ull << 29;
    top_device_line2(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "lease 101 (train-long)"));
    assert_non_null(strstr(buf, "waiting 1: 102"));
    top_device_line2(&s, &s.devices[0], 20, buf, sizeof buf);
    assert_int_equal(strlen(buf), 20);
    s.devices[0].policy = SCHED_POLICY_PACK;
    top_device_line2(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "pack"));
    assert_null(strstr(buf, "vram"));                 /* no NVML: nothing of it */
    /* NVML on a real GPU: utilization, memory, temperature, power */
    s.devices[0].has_nvml = 1;
    s.devices[0].nvml = (top_nvml_t){ .util_pct = 37, .temp_c = 45, .power_mw = 250500,
                                      .mem_used = 3ull << 30, .mem_total = 16ull << 30 };
    top_device_line2(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "util 37%  vram 3.0G/16G  45C  250W"));
    s.devices[0].nvml.temp_c = -1;                     /* a sensor it does not report */
    s.devices[0].nvml.power_mw = -1;
    top_device_line2(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_null(strstr(buf, "C  "));
    assert_null(strstr(buf, "W"));
    top_snap_free(&s);
}

static void test_sort(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    top_sort(&s, TOP_COL_GPU);
    assert_int_equal(s.procs[0].pid, 101);
    assert_int_equal(s.procs[1].pid, 102);
    assert_int_equal(s.procs[2].pid, 103);                 /* not measured: last */
    top_sort(&s, TOP_COL_NAME);
    assert_string_equal(s.procs[0].name, "bert \"quoted\" \\ name");
    assert_string_equal(s.procs[2].name, "train-long");
    top_sort(&s, TOP_COL_PRIO);
    assert_int_equal(s.procs[0].pid, 103);
    assert_int_equal(s.procs[1].pid, 101);                 /* ties by pid */
    top_sort(&s, TOP_COL_PID);
    assert_int_equal(s.procs[0].pid, 101);
    top_snap_free(&s);
}

static void test_changes(void **state)
{
    (void)state;
    top_snap_t a, b;
    char buf[512];
    make_snap(&a);
    make_snap(&b);
    assert_int_equal(top_changes(&a, &b, buf, sizeof buf), 0);
    b.nprocs = 2;                                          /* serve exited */
    b.devices[0].nprocs = 2;
    assert_int_equal(top_changes(&a, &b, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "103 (serve) exited"));
    snprintf(b.tables[0].name, sizeof b.tables[0].name, "/salus-other");
    assert_int_equal(top_changes(&a, &b, buf, sizeof buf), 2);
    assert_non_null(strstr(buf, "/salus-other appeared"));
    assert_non_null(strstr(buf, "/salus-test is gone"));
    /* many tables at once (each run of another program makes its own):
     * counted in one clause, not named one by one */
    b.ntables = 3;
    snprintf(b.tables[1].name, sizeof b.tables[1].name, "/salus-run-1");
    snprintf(b.tables[2].name, sizeof b.tables[2].name, "/salus-run-2");
    assert_int_equal(top_changes(&a, &b, buf, sizeof buf), 1);
    assert_non_null(strstr(buf, "3 tables appeared, 1 went (3 shown)"));
    assert_null(strstr(buf, "/salus-run-1"));
    top_snap_free(&a);
    top_snap_free(&b);
}

/* ---- text helpers ------------------------------------------------------------- */

static char *print_to_string(void (*fn)(FILE *, const top_snap_t *), const top_snap_t *s)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    fn(f, s);
    fclose(f);
    return out;
}

static void prom_of(FILE *f, const top_snap_t *s)
{
    top_print_prometheus(f, s, 1);
}

static void prom_down_of(FILE *f, const top_snap_t *s)
{
    top_print_prometheus(f, s, 0);
}

static void json_of(FILE *f, const top_snap_t *s)
{
    top_print_json(f, s);
}

static void test_sanitize(void **state)
{
    (void)state;
    char s[] = "ok\x1b[2Jname\x07\xc3\xa9";
    top_sanitize(s);
    assert_string_equal(s, "ok?[2Jname???");
    char b[16];
    top_human_bytes(0, b, sizeof b);
    assert_string_equal(b, "0");
    top_human_bytes(1536, b, sizeof b);
    assert_string_equal(b, "1.5K");
    top_human_bytes(16ull << 30, b, sizeof b);
    assert_string_equal(b, "16G");
    double d;
    assert_int_equal(top_parse_seconds("0.5", 0, 10, &d), 0);
    assert_true(d == 0.5);
    assert_int_equal(top_parse_seconds("1x", 0, 10, &d), -1);
    assert_int_equal(top_parse_seconds("nan", 0, 10, &d), -1);
    assert_int_equal(top_parse_seconds("", 0, 10, &d), -1);
    assert_int_equal(top_policy_of("PACK"), SCHED_POLICY_PACK);
    assert_int_equal(top_policy_of("lifo"), -1);
}

static void test_json(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    /* a hostile name: quotes, backslash, controls and non-ASCII bytes */
    snprintf(s.procs[0].name, sizeof s.procs[0].name, "a\"b\\c\n\x01\xff");
    char *out = print_to_string(json_of, &s);
    char err[128];
    tj_t *root = tj_parse(out, err, sizeof err);
    if (!root)
        fail_msg("invalid JSON (%s): %s", err, out);
    const tj_t *dev = tj_at(tj_get(root, "devices"), 0);
    static const char *const dev_fields[] = { "index", "mem_capacity_bytes", "mem_used_bytes",
        "policy", "quantum_ms", "processes", NULL };
    for (int i = 0; dev_fields[i]; i++)
        assert_non_null(tj_get(dev, dev_fields[i]));
    assert_string_equal(tj_get(dev, "policy")->str, "fair");
    const tj_t *p = tj_at(tj_get(dev, "processes"), 0);
    assert_string_equal(tj_get(p, "name")->str, "a\"b\\c\n\x01\xff");  /* escaped, round trip */
    const tj_t *serve = tj_at(tj_get(dev, "processes"), 2);
    assert_int_equal(tj_get(serve, "gpu_share")->type, TJ_NULL);
    assert_int_equal(tj_get(serve, "priority")->num, 90);
    tj_free(root);
    free(out);
    top_snap_free(&s);
}

static void test_prometheus(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    /* the driver knows this GPU: DCGM exporter's labels */
    snprintf(s.devices[0].uuid, sizeof s.devices[0].uuid, "GPU-0a1b2c3d-0000-1111-2222-333344445555");
    snprintf(s.devices[0].model, sizeof s.devices[0].model, "NVIDIA H100 80GB HBM3");
    s.devices[0].gpu_index = 2;
    s.devices[0].minor = 3;
    snprintf(s.devices[0].pci_bus_id, sizeof s.devices[0].pci_bus_id, "00000000:41:00.0");
    /* a Slurm step's process, as the plugin names it: its job and step */
    snprintf(s.procs[2].name, sizeof s.procs[2].name, "4242_7.batch serve");
    char *out = print_to_string(prom_of, &s);
    /* every sample follows the HELP and TYPE of its family */
    char *save = NULL, *copy = strdup(out);
    char family[128] = "";
    int samples = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# HELP ", 7) == 0) {
            sscanf(line + 7, "%127s", family);
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            assert_int_equal(sscanf(line + 7, "%127s %31s", name, type), 2);
            assert_string_equal(name, family);
            assert_true(strcmp(type, "gauge") == 0 || strcmp(type, "counter") == 0);
            continue;
        }
        assert_int_equal(strncmp(line, family, strlen(family)), 0);
        assert_true(line[strlen(family)] == '{' || line[strlen(family)] == ' ');
        samples++;
    }
    assert_true(samples > 20);
#define GPU_LABELS "{table=\"/salus-test\",table_device=\"0\",gpu=\"2\"," \
    "UUID=\"GPU-0a1b2c3d-0000-1111-2222-333344445555\",modelName=\"NVIDIA H100 80GB HBM3\"," \
    "Hostname=\"node1\",device=\"nvidia3\",pci_bus_id=\"00000000:41:00.0\""
    static const char *const want[] = {
        "salus_up{Hostname=\"node1\"} 1\n",
        "salus_build_info{version=\"",
        "salus_process_gpu_share" GPU_LABELS ",pid=\"101\",name=\"train-long\","
        "user=\"alice\"} 0.75\n",
        /* info-style: every policy and every state has its series, 0 or 1 */
        "salus_device_policy" GPU_LABELS ",policy=\"fair\"} 1\n",
        "salus_device_policy" GPU_LABELS ",policy=\"pack\"} 0\n",
        "salus_process_state" GPU_LABELS ",pid=\"102\",name=\"bert \\\"quoted\\\" \\\\ name\","
        "user=\"alice\",state=\"waiting-gpu\"} 1\n",
        "salus_process_state" GPU_LABELS ",pid=\"102\",name=\"bert \\\"quoted\\\" \\\\ name\","
        "user=\"alice\",state=\"running\"} 0\n",
        "salus_process_state" GPU_LABELS ",pid=\"103\",name=\"4242_7.batch serve\","
        "user=\"alice\",slurm_job=\"4242_7\",slurm_step=\"batch\",state=\"idle\"} 1\n",
        "salus_device_admission_queue" GPU_LABELS "} 0\n",
        "salus_device_memory_reserved_bytes" GPU_LABELS "} 0\n",
        "salus_device_memory_waiters" GPU_LABELS "} 0\n",
        NULL };
    for (int i = 0; want[i]; i++)
        if (!strstr(out, want[i]))
            fail_msg("the Prometheus output lacks %s:\n%s", want[i], out);
    assert_int_equal(tu_count_lines(out, "salus_process_state{"), 3 * TOP_NSTATES);
    assert_int_equal(tu_count_lines(out, "slurm_job="), tu_count_lines(out, "pid=\"103\""));
    assert_true(tu_count_lines(out, "slurm_job=") > 0);
    assert_int_equal(tu_count_lines(out, "salus_device_policy{"), SCHED_POLICY_COUNT);
    assert_null(strstr(out, "salus_process_gpu_share" GPU_LABELS ",pid=\"103\""));
    /* a collection that failed says salus_up 0 */
    free(out);
    out = print_to_string(prom_down_of, &s);
    assert_non_null(strstr(out, "salus_up{Hostname=\"node1\"} 0\n"));
    free(copy);
    free(out);
    top_snap_free(&s);
}

/* A filter keeps the rows of a name or user, per device; reverse flips each device. */
static void test_filter_reverse(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    top_sort(&s, TOP_COL_PID);
    top_reverse(&s);
    assert_int_equal(s.procs[0].pid, 103);
    assert_int_equal(s.procs[2].pid, 101);
    assert_int_equal(top_filter(&s, ""), 3);
    assert_int_equal(top_filter(&s, "long"), 1);
    assert_int_equal(s.nprocs, 1);
    assert_int_equal(s.devices[0].nprocs, 1);
    assert_int_equal(s.procs[0].pid, 101);
    top_snap_free(&s);
    make_snap(&s);
    assert_int_equal(top_filter(&s, "alice"), 3);            /* by user too */
    assert_int_equal(top_filter(&s, "nobody-has-this"), 0);
    assert_int_equal(s.devices[0].nprocs, 0);
    top_snap_free(&s);
}

/* The GPU's names come from the kernel driver's files, found by UUID. */
static void test_gpu_info(void **state)
{
    (void)state;
    static const uint8_t raw[16] = { 0x0a, 0x1b, 0x2c, 0x3d, 0, 0, 0x11, 0x11, 0x22, 0x22,
                                     0x33, 0x33, 0x44, 0x44, 0x55, 0x55 };
    char uuid[48];
    top_uuid_text(raw, uuid, sizeof uuid);
    assert_string_equal(uuid, "GPU-0a1b2c3d-0000-1111-2222-333344445555");

    /* two GPUs, listed out of PCI order: the index is their PCI order */
    char root[600], dir[700], path[800];
    snprintf(root, sizeof root, "%s/gpus", tu_tmpdir());
    static const char *const bus[] = { "0000:c1:00.0", "0000:41:00.0" };
    static const char *const info[] = {
        "Model: \t\t NVIDIA H100 80GB HBM3  \nIRQ:   12\n"
        "GPU UUID: \t GPU-0a1b2c3d-0000-1111-2222-333344445555\nDevice Minor: \t 5\n",
        "Model: \t\t NVIDIA A100\nGPU UUID: \t GPU-ffffffff-0000-1111-2222-333344445555\n"
        "Device Minor: \t 0\n" };
    mkdir(root, 0700);
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/%s", root, bus[i]);
        mkdir(dir, 0700);
        snprintf(path, sizeof path, "%s/information", dir);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(info[i], f);
        fclose(f);
    }
    top_gpu_info_t g;
    assert_int_equal(top_gpu_info(root, uuid, &g), 0);
    assert_int_equal(g.index, 1);
    assert_int_equal(g.minor, 5);
    assert_string_equal(g.pci_bus_id, "00000000:C1:00.0");      /* as NVML writes it */
    assert_string_equal(g.model, "NVIDIA H100 80GB HBM3");
    assert_int_equal(top_gpu_info(root, "GPU-ffffffff-0000-1111-2222-333344445555", &g), 0);
    assert_int_equal(g.index, 0);
    assert_int_equal(top_gpu_info(root, "GPU-00000000-0000-0000-0000-000000000000", &g), -1);
    snprintf(dir, sizeof dir, "%s/none", root);
    assert_int_equal(top_gpu_info(dir, uuid, &g), -1);

    /* and the device line names it */
    top_snap_t s;
    make_snap(&s);
    snprintf(s.devices[0].uuid, sizeof s.devices[0].uuid, "%s", uuid);
    snprintf(s.devices[0].model, sizeof s.devices[0].model, "%s", g.model);
    char buf[512];
    top_device_line(&s, &s.devices[0], 200, buf, sizeof buf);
    assert_non_null(strstr(buf, "GPU 0  NVIDIA A100 GPU-0a1b2c3d-0000-1111-2222-333344445555  "));
    top_snap_free(&s);
}

/* JSON carries the time (RFC 3339) and the host; states in the one vocabulary. */
static void test_json_time_host(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    s.wall_ms = 1796115600123;               /* 2026-12-01T09:00:00.123Z */
    s.procs[1].state = SHM_WAIT_MEM;
    s.procs[1].waiting_admission = 1;
    char *out = print_to_string(json_of, &s);
    char err[128];
    tj_t *root = tj_parse(out, err, sizeof err);
    if (!root)
        fail_msg("invalid JSON (%s): %s", err, out);
    assert_string_equal(tj_get(root, "time")->str, "2026-12-01T09:00:00.123Z");
    assert_string_equal(tj_get(root, "host")->str, "node1");
    const tj_t *procs = tj_get(tj_at(tj_get(root, "devices"), 0), "processes");
    assert_string_equal(tj_get(tj_at(procs, 0), "state")->str, "running");
    assert_string_equal(tj_get(tj_at(procs, 1), "state")->str, "admission");
    for (int i = 0; i < 3; i++) {                       /* the screen says the same */
        char cell[64];
        top_cell(&s.procs[i], TOP_COL_STATE, 20, cell, sizeof cell);
        assert_string_equal(cell, tj_get(tj_at(procs, i), "state")->str);
    }
    tj_free(root);
    free(out);
    top_snap_free(&s);
}

static void test_json_parser(void **state)
{
    (void)state;
    static const char *const bad[] = { "", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "01",
        "1.", "\"a\nb\"", "\"\\x\"", "[1] 2", "{a:1}", "tru", NULL };
    char err[128];
    for (int i = 0; bad[i]; i++) {
        tj_t *v = tj_parse(bad[i], err, sizeof err);
        if (v)
            fail_msg("accepted invalid JSON: %s", bad[i]);
    }
    tj_t *v = tj_parse(" {\"a\": [1, -2.5e3, true, null, \"x\\u0041\"]} ", err, sizeof err);
    assert_non_null(v);
    assert_true(tj_at(tj_get(v, "a"), 1)->num == -2500);
    assert_string_equal(tj_at(tj_get(v, "a"), 4)->str, "xA");
    tj_free(v);
}

/* At 80 columns the device header keeps what says how the GPU is shared
 * (its memory and its contexts' part, its policy, its processes) and gives
 * up the capacity, the GPU's names and the table first; at 200 it shows everything, in one order. */
static void test_device_line_priority(void **state)
{
    (void)state;
    top_snap_t s;
    make_snap(&s);
    snprintf(s.devices[0].uuid, sizeof s.devices[0].uuid, "%s",
             "GPU-0a1b2c3d-0000-1111-2222-333344445555");
    snprintf(s.devices[0].model, sizeof s.devices[0].model, "%s", "NVIDIA H100 80GB HBM3");
    char buf[512];
    top_device_line(&s, &s.devices[0], 200, buf, sizeof buf);
    const char *order[] = { "GPU 0", "NVIDIA H100", "GPU-0a1b2c3d", "6.0G used of 15G",
                            "(contexts 1.5G)", "(capacity 16G)", "policy fair", "quantum 100 ms", "process",
                            s.tables[0].name, NULL };
    const char *at = buf;
    for (int i = 0; order[i]; i++) {
        const char *p = strstr(at, order[i]);
        if (!p)
            fail_msg("\"%s\" missing or out of order in \"%s\"", order[i], buf);
        at = p;
    }
    top_device_line(&s, &s.devices[0], 80, buf, sizeof buf);
    assert_true(strlen(buf) <= 80);
    assert_non_null(strstr(buf, "GPU 0  "));
    assert_non_null(strstr(buf, "6.0G used of 15G (contexts 1.5G)"));  /* before the quantum */
    assert_non_null(strstr(buf, "policy fair"));
    assert_non_null(strstr(buf, "process"));
    assert_null(strstr(buf, "+"));                /* nothing cut in the middle */
    assert_null(strstr(buf, "GPU-0a1b2c3d"));     /* the UUID went first */
    top_device_line(&s, &s.devices[0], 40, buf, sizeof buf);
    assert_non_null(strstr(buf, "policy fair"));  /* the policy outlives the memory */
    top_snap_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_narrow),
        cmocka_unit_test(test_layout_wide),
        cmocka_unit_test(test_layout_tiny),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_device_lines),
        cmocka_unit_test(test_gpu_info),
        cmocka_unit_test(test_device_line_priority),
        cmocka_unit_test(test_filter_reverse),
        cmocka_unit_test(test_json_time_host),
        cmocka_unit_test(test_sort),
        cmocka_unit_test(test_changes),
        cmocka_unit_test(test_sanitize),
        cmocka_unit_test(test_json_parser),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_prometheus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
