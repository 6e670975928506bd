/*
 * layout.c - the view of a snapshot, as pure functions of the snapshot and a
 * width, so that they are tested without a terminal: which columns fit and
 * how wide each is, the text of every cell, the device header lines, the
 * order of rows, and what changed between two snapshots.
 *
 * Divided into: columns (their table and the fitting); cells and rows;
 * device headers; sorting and filtering; changes.
 *
 * Widths count characters, and every string here is ASCII: names were
 * sanitized by the collector, so one byte is one column.
 */
#include "top.h"

#include <stdlib.h>
#include <string.h>

/* ---- columns -----------------------------------------------------------------
 * Display order is the enum's.  `drop` ranks what goes first when the width
 * is short: the identity (PID, NAME) never goes; what a user glances at
 * first (GPU%, STATE, MEM) goes last. */
typedef struct col_spec {
    const char *title;
    int width;          /* fixed width (NAME: its least) */
    int right;          /* right-aligned */
    int drop;           /* 1 dropped first ... 0 never */
} col_spec_t;

#define NAME_MAX_WIDTH (SHM_NAME_BYTES - 1)

static const col_spec_t cols[TOP_NCOLS] = {
    [TOP_COL_PID]      = { "PID",      7, 1, 0 },
    [TOP_COL_USER]     = { "USER",     8, 0, 2 },
    [TOP_COL_NAME]     = { "NAME",     6, 0, 0 },
    [TOP_COL_PRIO]     = { "PRIO",     4, 1, 6 },
    [TOP_COL_STATE]    = { "STATE",    11, 0, 9 },
    [TOP_COL_MEM]      = { "MEM/LIMIT", 11, 1, 8 },
    [TOP_COL_ITERS]    = { "ITERS",    9, 1, 7 },
    [TOP_COL_ITER_MS]  = { "ITER ms",  7, 1, 4 },
    [TOP_COL_GPU]      = { "GPU%",     4, 1, 10 },
    [TOP_COL_WAIT]     = { "WAIT%",    5, 1, 5 },
    [TOP_COL_SWITCHES] = { "SWITCHES", 8, 1, 3 },
    [TOP_COL_HIST]     = { "GPU% LAST MINUTE", TOP_HIST_CHARS, 0, 1 },
};
#define MAX_DROP 10

const char *top_col_title(top_col_t col)
{
    return (unsigned)col < TOP_NCOLS ? cols[col].title : "?";
}

int top_col_right(top_col_t col)
{
    return (unsigned)col < TOP_NCOLS && cols[col].right;
}

/* Width of the kept columns, NAME at its least, with one space between. */
static int least_width(const int *keep)
{
    int w = 0, n = 0;
    for (int c = 0; c < TOP_NCOLS; c++)
        if (keep[c]) {
            w += cols[c].width;
            n++;
        }
    return w + (n > 0 ? n - 1 : 0);
}

void top_layout_compute(int width, int name_len, top_layout_t *out)
{
    int keep[TOP_NCOLS];
    for (int c = 0; c < TOP_NCOLS; c++)
        keep[c] = 1;
    /* Drop by rank, lowest first, while the least layout does not fit. */
    for (int rank = 1; rank <= MAX_DROP && least_width(keep) > width; rank++)
        for (int c = 0; c < TOP_NCOLS; c++)
            if (cols[c].drop == rank)
                keep[c] = 0;

    int rest = width - least_width(keep);    /* what NAME may take beyond its least */
    int want = name_len > NAME_MAX_WIDTH ? NAME_MAX_WIDTH : name_len;
    if (want < (int)strlen(cols[TOP_COL_NAME].title))
        want = (int)strlen(cols[TOP_COL_NAME].title);
    int name_w = cols[TOP_COL_NAME].width;
    if (want > name_w)
        name_w += rest < want - name_w ? (rest > 0 ? rest : 0) : want - name_w;
    if (rest < 0)                            /* narrower than PID + NAME: cut NAME */
        name_w = name_w + rest > 1 ? name_w + rest : 1;

    memset(out, 0, sizeof *out);
    int x = 0;
    for (int c = 0; c < TOP_NCOLS; c++) {
        if (!keep[c])
            continue;
        int i = out->ncols++;
        out->cols[i] = (top_col_t)c;
        out->width[i] = c == TOP_COL_NAME ? name_w : cols[c].width;
        out->x[i] = x;
        x += out->width[i] + 1;
    }
    out->total = x > 0 ? x - 1 : 0;
}

/* ---- cells and rows ------------------------------------------------------------ */

void top_fit(const char *s, int width, char *buf, size_t len)
{
    size_t n = strlen(s);
    if (width < 0 || len == 0) {
        if (len)
            buf[0] = '\0';
        return;
    }
    if ((size_t)width + 1 > len)
        width = (int)len - 1;
    if (n <= (size_t)width) {
        memcpy(buf, s, n + 1);
        return;
    }
    memcpy(buf, s, (size_t)width);
    if (width > 0)
        buf[width - 1] = '+';               /* cut, as ps marks a cut field */
    buf[width] = '\0';
}

#define TOP_ST_NAME_(id, name, what) [id] = name,
const char *const top_state_names[TOP_NSTATES] = { TOP_STATES(TOP_ST_NAME_) };
#undef TOP_ST_NAME_

int top_proc_has_length(const top_proc_t *p)
{
    return p->declared || p->length_ms || p->has_end;
}

int top_device_has_lengths(const top_snap_t *s, const top_device_t *d)
{
    for (int i = 0; i < s->nprocs; i++)
        if (s->procs[i].table == d->table && s->procs[i].device == d->index &&
            top_proc_has_length(&s->procs[i]))
            return 1;
    return 0;
}

top_state_t top_proc_state(const top_proc_t *p)
{
    if (p->stopped)
        return TOP_ST_STOPPED;
    if (p->blocked)
        return TOP_ST_BLOCKED;
    if (p->mem_swapped && (p->state == SHM_WAIT_GPU || p->state == SHM_IDLE))
        return TOP_ST_PAGED_OUT;
    switch (p->state) {
    case SHM_RUNNING:  return TOP_ST_RUNNING;
    case SHM_WAIT_GPU: return TOP_ST_WAIT_GPU;
    case SHM_WAIT_MEM: return p->waiting_admission ? TOP_ST_ADMISSION : TOP_ST_WAIT_MEM;
    default:           return TOP_ST_IDLE;
    }
}

static void share_text(double v, char *buf, size_t len)
{
    if (v < 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.0f", v * 100.0);
}

void top_cell(const top_proc_t *p, top_col_t col, int width, char *buf, size_t len)
{
    char t[96], a[16], b[16];
    switch (col) {
    case TOP_COL_PID:   snprintf(t, sizeof t, "%d", (int)p->pid); break;
    case TOP_COL_USER:  snprintf(t, sizeof t, "%s", p->user); break;
    case TOP_COL_NAME:  snprintf(t, sizeof t, "%s", p->name); break;
    case TOP_COL_PRIO:
        snprintf(t, sizeof t, p->has_sched ? "%d" : "-", p->priority);
        break;
    case TOP_COL_STATE: snprintf(t, sizeof t, "%s", top_state_names[top_proc_state(p)]); break;
    case TOP_COL_HIST:  snprintf(t, sizeof t, "%s", p->spark); break;
    case TOP_COL_MEM:
        if (!p->has_mem) {
            snprintf(t, sizeof t, "-");
            break;
        }
        top_human_bytes(p->mem_used, a, sizeof a);
        if (p->mem_swapped) {              /* resident+paged out, the limit dropped */
            top_human_bytes(p->mem_swapped, b, sizeof b);
            snprintf(t, sizeof t, "%s+%s", a, b);
            break;
        }
        if (p->mem_limit)
            top_human_bytes(p->mem_limit, b, sizeof b);
        snprintf(t, sizeof t, "%s/%s", a, p->mem_limit ? b : "-");
        break;
    case TOP_COL_ITERS:
        if (p->declared)
            snprintf(t, sizeof t, "%llu/%llu", (unsigned long long)p->iterations,
                     (unsigned long long)p->declared);
        else
            snprintf(t, sizeof t, "%llu", (unsigned long long)p->iterations);
        if ((int)strlen(t) > width)        /* the count matters more than the goal */
            snprintf(t, sizeof t, "%llu", (unsigned long long)p->iterations);
        break;
    case TOP_COL_ITER_MS:
        snprintf(t, sizeof t, p->iter_ms > 0 ? "%.1f" : "-", p->iter_ms);
        break;
    case TOP_COL_GPU:   share_text(p->gpu_share, t, sizeof t); break;
    case TOP_COL_WAIT:  share_text(p->wait_share, t, sizeof t); break;
    case TOP_COL_SWITCHES:
        snprintf(t, sizeof t, "%llu", (unsigned long long)p->switches);
        break;
    default: t[0] = '\0';
    }
    top_fit(t, width, buf, len);
}

/* Put `text` in buf at column x, padded to w and aligned. */
static void put(char *buf, int x, int w, int right, const char *text)
{
    int n = (int)strlen(text);
    int pad = right && n < w ? w - n : 0;
    memset(buf + x, ' ', (size_t)w);
    memcpy(buf + x + pad, text, (size_t)(n < w ? n : w));
}

static void format_line(const top_layout_t *l, const top_proc_t *p, char *buf, size_t len)
{
    if (len == 0)
        return;
    if ((size_t)l->total + 1 > len) {
        buf[0] = '\0';
        return;
    }
    memset(buf, ' ', (size_t)l->total);
    buf[l->total] = '\0';
    for (int i = 0; i < l->ncols; i++) {
        char cell[128];
        if (p)
            top_cell(p, l->cols[i], l->width[i], cell, sizeof cell);
        else
            top_fit(cols[l->cols[i]].title, l->width[i], cell, sizeof cell);
        put(buf, l->x[i], l->width[i], cols[l->cols[i]].right, cell);
    }
}

void top_format_row(const top_layout_t *l, const top_proc_t *p, char *buf, size_t len)
{
    format_line(l, p, buf, len);
}

void top_format_title(const top_layout_t *l, char *buf, size_t len)
{
    format_line(l, NULL, buf, len);
}

int top_name_len(const top_snap_t *s)
{
    int n = 0;
    for (int i = 0; i < s->nprocs; i++) {
        int k = (int)strlen(s->procs[i].name);
        n = k > n ? k : n;
    }
    return n;
}

/* ---- device headers -------------------------------------------------------------- */

int top_device_first(const top_snap_t *s, int d)
{
    int first = 0;
    for (int i = 0; i < d && i < s->ndevices; i++)
        first += s->devices[i].nprocs;
    return first;
}

/* "1234 (name)" of a process of the device's table. */
static void who(const top_snap_t *s, const top_device_t *d, pid_t pid, char *buf, size_t len)
{
    for (int i = 0; i < s->nprocs; i++)
        if (s->procs[i].table == d->table && s->procs[i].pid == pid) {
            snprintf(buf, len, "%d (%s)", (int)pid, s->procs[i].name);
            return;
        }
    snprintf(buf, len, "%d", (int)pid);
}

/* The first header line is made of parts, each with a rank: when the line
 * is wider than the screen, the parts of the highest rank go first (the
 * capacity, which the budget beside used nearly says, then the GPU's model
 * and UUID, the table), so that what says how the device is shared (its
 * memory, its contexts' part, and its policy) stays at 80 columns.  The
 * parts keep their order on the line. */
enum { HEAD_PARTS = 11, HEAD_MAX_RANK = 9 };
typedef struct head_part {
    char text[112];
    int rank;                        /* 0: always kept; higher: dropped first */
    int tight;                       /* one space before it, not two (model UUID) */
} head_part_t;

static int head_width(const head_part_t *p, int n, const int *keep)
{
    int w = 0, shown = 0;
    for (int i = 0; i < n; i++)
        if (keep[i] && p[i].text[0]) {
            w += (int)strlen(p[i].text) + (shown ? 2 - p[i].tight : 0);
            shown++;
        }
    return w;
}

static int head_parts(const top_snap_t *s, const top_device_t *d, head_part_t *p)
{
    char used[16], budget[16], cap[16], ctx[16], foreign[16];
    int n = 0;
    memset(p, 0, HEAD_PARTS * sizeof *p);
    snprintf(p[n].text, sizeof p[n].text, "GPU %d", d->index);
    p[n++].rank = 0;
    snprintf(p[n].text, sizeof p[n].text, "%s", d->model);
    p[n++].rank = 7;
    snprintf(p[n].text, sizeof p[n].text, "%s", d->uuid);
    p[n].tight = d->model[0] != '\0';
    p[n++].rank = 8;
    if (d->has_mem) {
        top_human_bytes(d->used, used, sizeof used);
        top_human_bytes(d->budget, budget, sizeof budget);
        top_human_bytes(d->capacity, cap, sizeof cap);
        snprintf(p[n].text, sizeof p[n].text, "mem %s used of %s", used, budget);
        p[n++].rank = 1;
        /* used counts the contexts (what the budget counts); what the
         * driver shows beyond the table is said beside it, not in it */
        top_human_bytes(d->ctx, ctx, sizeof ctx);
        top_human_bytes(d->foreign, foreign, sizeof foreign);
        if (d->foreign)
            snprintf(p[n].text, sizeof p[n].text, "(contexts %s; %s outside Salus)", ctx, foreign);
        else if (d->ctx)
            snprintf(p[n].text, sizeof p[n].text, "(contexts %s)", ctx);
        p[n].tight = 1;
        p[n++].rank = 3;
        snprintf(p[n].text, sizeof p[n].text, "(capacity %s)", cap);
        p[n].tight = 1;
        p[n++].rank = HEAD_MAX_RANK;
    } else {
        snprintf(p[n].text, sizeof p[n].text, "mem not accounted");
        p[n++].rank = 1;
    }
    snprintf(p[n].text, sizeof p[n].text, "policy %s",
             d->has_sched ? sched_policy_names[d->policy] : "-");
    p[n++].rank = 0;
    /* srtf with no length to rank by is fair: say so beside the policy. */
    if (d->has_sched && d->policy == SCHED_POLICY_SRTF && d->nprocs &&
        !top_device_has_lengths(s, d)) {
        snprintf(p[n].text, sizeof p[n].text, "(no job declares a length: as fair)");
        p[n].tight = 1;
        p[n++].rank = 1;
    }
    if (d->has_sched) {
        snprintf(p[n].text, sizeof p[n].text, "quantum %u ms", (unsigned)d->quantum_ms);
        p[n++].rank = 4;
    }
    snprintf(p[n].text, sizeof p[n].text, "%d process%s", d->nprocs, d->nprocs == 1 ? "" : "es");
    p[n++].rank = 2;
    snprintf(p[n].text, sizeof p[n].text, "[%.100s]", s->tables[d->table].name);
    p[n++].rank = 6;
    return n;
}

void top_device_line(const top_snap_t *s, const top_device_t *d, int width,
                     char *buf, size_t len)
{
    head_part_t p[HEAD_PARTS];
    int keep[HEAD_PARTS], n = head_parts(s, d, p);
    for (int i = 0; i < n; i++)
        keep[i] = 1;
    for (int rank = HEAD_MAX_RANK; rank > 0 && head_width(p, n, keep) > width; rank--)
        for (int i = 0; i < n; i++)
            if (p[i].rank == rank)
                keep[i] = 0;
    char line[1024];
    size_t at = 0;
    line[0] = '\0';
    for (int i = 0; i < n; i++)
        if (keep[i] && p[i].text[0] && at < sizeof line)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%s",
                                   at ? (p[i].tight ? " " : "  ") : "", p[i].text);
    top_fit(line, width, buf, len);
}

/* "  util 37%  vram 3.2G/16G  45C  250W": the device as NVML sees it, every
 * tenant's use (what nvtop shows); the sensors only where reported. */
static void nvml_text(const top_nvml_t *n, char *buf, size_t len)
{
    char used[16], total[16];
    top_human_bytes(n->mem_used, used, sizeof used);
    top_human_bytes(n->mem_total, total, sizeof total);
    size_t at = 0;
    if (n->util_pct >= 0)
        at += (size_t)snprintf(buf + at, len - at, "  util %d%%", n->util_pct);
    if (at < len)
        at += (size_t)snprintf(buf + at, len - at, "  vram %s/%s", used, total);
    if (at < len && n->temp_c >= 0)
        at += (size_t)snprintf(buf + at, len - at, "  %dC", n->temp_c);
    if (at < len && n->power_mw >= 0)
        snprintf(buf + at, len - at, "  %lldW", (long long)(n->power_mw / 1000));
}

void top_device_line2(const top_snap_t *s, const top_device_t *d, int width,
                      char *buf, size_t len)
{
    char line[1024], lease[96];
    size_t at;
    if (!d->has_sched)
        snprintf(lease, sizeof lease, "-");
    else if (d->policy == SCHED_POLICY_PACK)
        snprintf(lease, sizeof lease, "none, all run at once (pack)");
    else if (d->holder > 0)
        who(s, d, d->holder, lease, sizeof lease);
    else
        snprintf(lease, sizeof lease, "free");
    at = (size_t)snprintf(line, sizeof line, "  lease %s  waiting %d", lease, d->nwaiters);
    for (int i = 0; i < d->nwaiters && at < sizeof line - 32; i++) {
        char w[96];
        who(s, d, d->waiters[i], w, sizeof w);
        at += (size_t)snprintf(line + at, sizeof line - at, "%s%s", i ? ", " : ": ", w);
    }
    if (at < sizeof line - 64 && d->has_mem && (d->mem_waiters || d->queued))
        at += (size_t)snprintf(line + at, sizeof line - at, "  memory waiters %u, admission %u",
                               (unsigned)d->mem_waiters, (unsigned)d->queued);
    if (at < sizeof line - 32 && d->has_sched)
        at += (size_t)snprintf(line + at, sizeof line - at, "  switches %llu",
                               (unsigned long long)d->switches);
    if (at < sizeof line - 96 && d->has_nvml)
        nvml_text(&d->nvml, line + at, sizeof line - at);
    top_fit(line, width, buf, len);
}

/* ---- sorting ------------------------------------------------------------------- */

static int cmp_num(double a, double b)
{
    return a > b ? -1 : a < b ? 1 : 0;      /* descending: the biggest first */
}

static int cmp_rows(const void *va, const void *vb, void *arg)
{
    const top_proc_t *a = va, *b = vb;
    top_col_t col = *(const top_col_t *)arg;
    int r = 0;
    switch (col) {
    case TOP_COL_USER:     r = strcmp(a->user, b->user); break;
    case TOP_COL_NAME:     r = strcmp(a->name, b->name); break;
    case TOP_COL_PRIO:     r = cmp_num(a->priority, b->priority); break;
    case TOP_COL_STATE:    r = cmp_num(a->state == SHM_RUNNING, b->state == SHM_RUNNING);
                           if (!r) r = (int)a->state - (int)b->state;
                           break;
    case TOP_COL_MEM:      r = cmp_num((double)a->mem_used, (double)b->mem_used); break;
    case TOP_COL_ITERS:    r = cmp_num((double)a->iterations, (double)b->iterations); break;
    case TOP_COL_ITER_MS:  r = cmp_num(a->iter_ms, b->iter_ms); break;
    case TOP_COL_GPU:
    case TOP_COL_HIST:     r = cmp_num(a->gpu_share, b->gpu_share); break;
    case TOP_COL_WAIT:     r = cmp_num(a->wait_share, b->wait_share); break;
    case TOP_COL_SWITCHES: r = cmp_num((double)a->switches, (double)b->switches); break;
    default: break;
    }
    return r ? r : (a->pid > b->pid) - (a->pid < b->pid);
}

void top_sort(top_snap_t *s, top_col_t col)
{
    int first = 0;
    for (int d = 0; d < s->ndevices; d++) {
        int n = s->devices[d].nprocs;
        if (first + n <= s->nprocs)
            qsort_r(s->procs + first, (size_t)n, sizeof *s->procs, cmp_rows, &col);
        first += n;
    }
}

void top_reverse(top_snap_t *s)
{
    int first = 0;
    for (int d = 0; d < s->ndevices; d++) {
        int n = s->devices[d].nprocs;
        for (int i = 0; i < n / 2 && first + n <= s->nprocs; i++) {
            top_proc_t tmp = s->procs[first + i];
            s->procs[first + i] = s->procs[first + n - 1 - i];
            s->procs[first + n - 1 - i] = tmp;
        }
        first += n;
    }
}

int top_filter(top_snap_t *s, const char *text)
{
    if (!text || !*text)
        return s->nprocs;
    int first = 0, kept = 0;
    for (int d = 0; d < s->ndevices; d++) {
        int n = s->devices[d].nprocs, left = 0;
        for (int i = first; i < first + n && i < s->nprocs; i++) {
            const top_proc_t *p = &s->procs[i];
            if (strstr(p->name, text) || strstr(p->user, text)) {
                s->procs[kept++] = *p;            /* kept <= i: moves rows down only */
                left++;
            }
        }
        first += n;
        s->devices[d].nprocs = left;
    }
    s->nprocs = kept;
    return kept;
}

/* ---- changes ----------------------------------------------------------------------- */

static int has_table(const top_snap_t *s, const char *name)
{
    for (int i = 0; i < s->ntables; i++)
        if (strcmp(s->tables[i].name, name) == 0)
            return 1;
    return 0;
}

static const top_proc_t *find_proc(const top_snap_t *s, const top_proc_t *p,
                                   const char *table)
{
    for (int i = 0; i < s->nprocs; i++) {
        const top_proc_t *q = &s->procs[i];
        if (q->pid == p->pid && q->gen == p->gen && q->slot == p->slot &&
            strcmp(s->tables[q->table].name, table) == 0)
            return q;
    }
    return NULL;
}

int top_changes(const top_snap_t *old, const top_snap_t *now, char *buf, size_t len)
{
    size_t at = 0;
    int n = 0;
    buf[0] = '\0';
#define SAY(...)                                                            \
    do {                                                                    \
        if (at < len)                                                       \
            at += (size_t)snprintf(buf + at, len - at, "%s", n++ ? "; " : ""); \
        if (at < len)                                                       \
            at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__);        \
    } while (0)
    /* Tables that come and go (another program's, each run a table of its
     * own) are named when one or two do, counted when more do, so that the
     * line stays readable. */
    int came = 0, went = 0;
    for (int i = 0; i < now->ntables; i++)
        came += !has_table(old, now->tables[i].name);
    for (int i = 0; i < old->ntables; i++)
        went += !has_table(now, old->tables[i].name);
    if (came + went > 2) {
        SAY("%d table%s appeared, %d went (%d shown)", came, came == 1 ? "" : "s", went,
            now->ntables);
    } else {
        for (int i = 0; i < now->ntables; i++)
            if (!has_table(old, now->tables[i].name))
                SAY("table %s appeared", now->tables[i].name);
        for (int i = 0; i < old->ntables; i++)
            if (!has_table(now, old->tables[i].name))
                SAY("table %s is gone", old->tables[i].name);
    }
    for (int i = 0; i < old->nprocs; i++) {
        const top_proc_t *p = &old->procs[i];
        const char *table = old->tables[p->table].name;
        if (has_table(now, table) && !find_proc(now, p, table) &&
            (i == 0 || old->procs[i - 1].pid != p->pid))
            SAY("%d (%s) exited", (int)p->pid, p->name);
    }
#undef SAY
    return n;
}
