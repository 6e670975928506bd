/*
 * draw.c - salus-top's live view (ncurses): the screen, the keys, and the
 * policy prompt.  It draws what layout.c computes from the collector's
 * snapshots and knows nothing of the tables itself.
 *
 * Divided into: the screen's lines (a flat list of device headers, titles
 * and rows, scrolled to keep the selected row visible); drawing; the help
 * screen; the policy prompt; prompts (a line of text, a confirmation);
 * changing the selected process (renice, limit, kill: control.c does the
 * work); keys and the loop.
 *
 * The screen is:
 *   line 0      a status bar: tables, processes, interval, sort column, keys
 *   line 1      what just happened (a table appeared or went, a process
 *               exited, a policy changed, what libsalus's table code said on
 *               stderr: capture.c), or why nothing is shown
 *   lines 2...  per device: two header lines, the column titles, its rows
 */
#include "top.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

#define MSG_SHOW_NS  (5ull * 1000 * 1000 * 1000)

enum { PAIR_RUN = 1, PAIR_WAIT, PAIR_HEAD, PAIR_NOTE };

typedef enum { L_HEAD1, L_HEAD2, L_TITLE, L_ROW, L_BLANK } line_kind_t;

typedef struct line {
    line_kind_t kind;
    int dev, row;
} line_t;

typedef struct ui {
    top_collector_t *c;
    top_snap_t snap, prev;
    double delay_s;
    top_col_t sort;
    int reverse;                   /* the sort order inverted (I) */
    char filter[64];               /* rows whose name or user contain it ("": all) */
    int filter_changed;            /* the next sample reports no exits */
    int sel;                       /* selected row (index in snap.procs), -1: none */
    char sel_table[SHM_TABLE_NAME_BYTES];
    pid_t sel_pid;
    int sel_device;
    int scroll;                    /* first content line shown */
    line_t *lines;
    int nlines, linecap;
    char msg[512];
    uint64_t msg_until;
    int msg_mine;                  /* the message answers a key: news waits for it */
    int colors;
    /* the last process sent SIGTERM by k, and when: k on it again after
     * KILL_GRACE_NS offers SIGKILL, as systemctl stop does after its timeout */
    pid_t term_pid;
    uint64_t term_start, term_ns;
} ui_t;

#define KILL_GRACE_NS (5ull * 1000000000)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void say(ui_t *u, const char *text)
{
    snprintf(u->msg, sizeof u->msg, "%s", text);
    u->msg_until = util_now_ns() + MSG_SHOW_NS;
    u->msg_mine = 1;
}

/* What changed in the tables: shown unless the answer to a key still is. */
static void tell(ui_t *u, const char *text)
{
    if (u->msg_mine && u->msg_until > util_now_ns())
        return;
    say(u, text);
    u->msg_mine = 0;
}

/* What libsalus's table code said on stderr meanwhile (capture.c): the
 * last line in the message line, "libsalus: <level>: ..." (the pid is
 * salus-top's own); shown as news is, and written on stderr at the end. */
static void heard(ui_t *u)
{
    char line[400], shown[420];
    int got = 0;
    while (top_capture_line(line, sizeof line))
        got = 1;
    if (!got)
        return;
    const char *text = line;
    if (strncmp(line, "salus[", 6) == 0 && strstr(line, "]: "))
        text = strstr(line, "]: ") + 3;
    snprintf(shown, sizeof shown, "libsalus: %s", text);
    tell(u, shown);
}

/* ---- the screen's lines ------------------------------------------------------------ */

static int add_line(ui_t *u, line_kind_t kind, int dev, int row)
{
    if (u->nlines == u->linecap) {
        int cap = u->linecap ? u->linecap * 2 : 64;
        line_t *l = realloc(u->lines, (size_t)cap * sizeof *l);
        if (!l)
            return -1;
        u->lines = l;
        u->linecap = cap;
    }
    u->lines[u->nlines++] = (line_t){ kind, dev, row };
    return 0;
}

static void build_lines(ui_t *u)
{
    u->nlines = 0;
    for (int d = 0; d < u->snap.ndevices; d++) {
        int first = top_device_first(&u->snap, d);
        if (d > 0)
            add_line(u, L_BLANK, d, -1);
        add_line(u, L_HEAD1, d, -1);
        add_line(u, L_HEAD2, d, -1);
        add_line(u, L_TITLE, d, -1);
        for (int i = 0; i < u->snap.devices[d].nprocs; i++)
            add_line(u, L_ROW, d, first + i);
    }
}

/* Find the selected process again in a new snapshot (rows move when sorted). */
static void reselect(ui_t *u)
{
    int found = -1;
    for (int i = 0; i < u->snap.nprocs && found < 0; i++) {
        const top_proc_t *p = &u->snap.procs[i];
        if (p->pid == u->sel_pid && p->device == u->sel_device &&
            strcmp(u->snap.tables[p->table].name, u->sel_table) == 0)
            found = i;
    }
    u->sel = found >= 0 ? found : (u->snap.nprocs > 0 ? 0 : -1);
    if (u->sel >= 0) {
        const top_proc_t *p = &u->snap.procs[u->sel];
        u->sel_pid = p->pid;
        u->sel_device = p->device;
        snprintf(u->sel_table, sizeof u->sel_table, "%s", u->snap.tables[p->table].name);
    }
}

static void keep_visible(ui_t *u, int height)
{
    int at = -1;
    for (int i = 0; i < u->nlines && at < 0; i++)
        if (u->lines[i].kind == L_ROW && u->lines[i].row == u->sel)
            at = i;
    if (at < 0)
        at = 0;
    if (at >= u->scroll + height)
        u->scroll = at - height + 1;
    if (at < u->scroll)
        u->scroll = at > 3 ? at - 3 : 0;   /* show its device's header too */
    if (u->scroll > u->nlines - height)
        u->scroll = u->nlines - height;
    if (u->scroll < 0)
        u->scroll = 0;
}

/* ---- drawing ---------------------------------------------------------------------- */

static void status_bar(ui_t *u, int width)
{
    char bar[512];
    int nprocs = 0;
    for (int i = 0; i < u->snap.ntables; i++)
        nprocs += u->snap.tables[i].nprocs;
    char filter[96] = "";
    if (u->filter[0])
        snprintf(filter, sizeof filter, "  filter \"%s\"", u->filter);
    char hidden[48] = "";
    if (u->snap.hidden_tables > 0)
        snprintf(hidden, sizeof hidden, " (+%d unused)", u->snap.hidden_tables);
    snprintf(bar, sizeof bar, " salus-top  %d table%s%s  %d process%s  every %.1f s  "
             "sort %s%s%s   ? help  r renice  l limit  k kill  / filter  q quit",
             u->snap.ntables, u->snap.ntables == 1 ? "" : "s", hidden, nprocs,
             nprocs == 1 ? "" : "es", u->delay_s, top_col_title(u->sort),
             u->reverse ? " (reversed)" : "", filter);
    char fit[512];
    top_fit(bar, width, fit, sizeof fit);
    attron(A_REVERSE);
    mvprintw(0, 0, "%-*s", width, fit);
    attroff(A_REVERSE);
}

static void message_line(ui_t *u, int width)
{
    char fit[512];
    const char *text = "";
    if (u->msg_until > util_now_ns())
        text = u->msg;
    else if (u->snap.note[0])
        text = u->snap.note;
    top_fit(text, width, fit, sizeof fit);
    if (u->colors)
        attron(COLOR_PAIR(PAIR_NOTE));
    mvprintw(1, 0, "%s", fit);
    if (u->colors)
        attroff(COLOR_PAIR(PAIR_NOTE));
}

static int state_pair(shm_state_t s)
{
    return s == SHM_RUNNING ? PAIR_RUN : s == SHM_WAIT_GPU || s == SHM_WAIT_MEM ? PAIR_WAIT : 0;
}

static void draw_row(ui_t *u, const top_layout_t *l, int y, int row)
{
    char buf[2048];
    const top_proc_t *p = &u->snap.procs[row];
    top_format_row(l, p, buf, sizeof buf);
    if (row == u->sel)
        attron(A_REVERSE);
    mvprintw(y, 0, "%s", buf);
    int pair = state_pair(p->state);
    for (int i = 0; i < l->ncols && u->colors && pair && row != u->sel; i++)
        if (l->cols[i] == TOP_COL_STATE)
            mvchgat(y, l->x[i], l->width[i], A_BOLD, (short)pair, NULL);
    if (row == u->sel)
        attroff(A_REVERSE);
}

static void draw_title(ui_t *u, const top_layout_t *l, int y)
{
    char buf[2048];
    top_format_title(l, buf, sizeof buf);
    attron(A_UNDERLINE);
    mvprintw(y, 0, "%s", buf);
    attroff(A_UNDERLINE);
    for (int i = 0; i < l->ncols; i++)     /* the sort column stands out */
        if (l->cols[i] == u->sort)
            mvchgat(y, l->x[i], l->width[i], A_UNDERLINE | A_BOLD, 0, NULL);
}

static void draw(ui_t *u)
{
    int height, width;
    getmaxyx(stdscr, height, width);
    erase();
    status_bar(u, width);
    message_line(u, width);
    top_layout_t l;
    top_layout_compute(width, top_name_len(&u->snap), &l);
    int body = height - 2;
    build_lines(u);
    keep_visible(u, body);
    for (int i = u->scroll, y = 2; i < u->nlines && y < height; i++, y++) {
        const line_t *ln = &u->lines[i];
        const top_device_t *d = &u->snap.devices[ln->dev];
        char buf[1024];
        switch (ln->kind) {
        case L_HEAD1:
        case L_HEAD2:
            if (ln->kind == L_HEAD1)
                top_device_line(&u->snap, d, width, buf, sizeof buf);
            else
                top_device_line2(&u->snap, d, width, buf, sizeof buf);
            attron(A_BOLD | (u->colors ? COLOR_PAIR(PAIR_HEAD) : 0));
            mvprintw(y, 0, "%s", buf);
            attroff(A_BOLD | (u->colors ? COLOR_PAIR(PAIR_HEAD) : 0));
            break;
        case L_TITLE: draw_title(u, &l, y); break;
        case L_ROW:   draw_row(u, &l, y, ln->row); break;
        case L_BLANK: break;
        }
    }
    refresh();
}

/* ---- the help screen ------------------------------------------------------------------ */

static const char *const help_text[] = {
    "salus-top: who shares the GPU, who waits, who holds how much memory",
    "",
    "  q, F10      quit",
    "  s, >, F6    sort by the next column (the sorted title is bold); < the previous",
    "  I           invert the sort order",
    "  /, F4       filter: only processes whose name or user contains a text",
    "  p           change the policy of the selected row's GPU (running processes",
    "              follow it):" SCHED_POLICY_WORDS,
    "  r           renice the selected process: a priority, 0 to 100",
    "  F7, F8      its priority up, down by 10",
    "  l           its memory limit: 20G, 512M, 25%, 100% (the whole budget)",
    "  k, F9       kill it (SIGTERM: it goes first for the GPU, to exit), after a",
    "              confirmation; again 5 s later, SIGKILL",
    "              (changes: your own processes, or any of a group table of yours)",
    "  Up, Down    select a row; PgUp, PgDn, Home, End (no vi keys: k is kill)",
    "  space       refresh now",
    "  h, ?, F1    this help",
    "",
    "STATE    running: holds the GPU (or runs under pack); waiting-gpu: waits for",
    "         the lease; waiting-mem: waits for memory; admission: waits to be",
    "         admitted (SALUS_MEM_RESERVE); blocked: holds the GPU, stuck in a",
    "         sync on another process's work; paged-out: its memory paged to the",
    "         host (SALUS_SWAP); idle: registered, not using the GPU",
    "MEM      memory held, its contexts and modules included (what its limit",
    "         counts) / its limit (the budget if it set none): 1.3G/15G;",
    "         resident+paged out while paged out: 1.0G+3.0G; - not accounted",
    "mem ... used  the device's: every job's memory and contexts (contexts:",
    "         their part); outside Salus: what other processes take",
    "ITERS    iterations done / declared (SALUS_ITERATIONS)",
    "GPU%     share of the last interval it held the GPU (- under pack: no lease)",
    "WAIT%    share of the last interval it waited for the GPU",
    "SWITCHES times it was handed the GPU by another process",
    "GPU% LAST MINUTE  its GPU share, 3 s a character: _ 0% . : - = + * # % @ 90%+",
    "",
    "press any key",
    NULL,
};

static void show_help(void)
{
    int height, width;
    getmaxyx(stdscr, height, width);
    erase();
    for (int i = 0; help_text[i] && i < height; i++) {
        char fit[256];
        top_fit(help_text[i], width, fit, sizeof fit);
        mvprintw(i, 0, "%s", fit);
    }
    refresh();
    timeout(-1);
    getch();
}

/* ---- the policy prompt ------------------------------------------------------------------ */

static const top_device_t *selected_device(ui_t *u)
{
    if (u->snap.ndevices == 0)
        return NULL;
    if (u->sel < 0)
        return &u->snap.devices[0];
    const top_proc_t *p = &u->snap.procs[u->sel];
    for (int d = 0; d < u->snap.ndevices; d++)
        if (u->snap.devices[d].table == p->table && u->snap.devices[d].index == p->device)
            return &u->snap.devices[d];
    return &u->snap.devices[0];
}

static void set_policy(ui_t *u, const char *table, int device, int policy)
{
    char group[SHM_TABLE_NAME_BYTES], msg[256];
    shm_table_t *t;
    top_table_group(table, group, sizeof group);
    int rc = top_open_table(table, group, 1, &t);
    if (rc == 0) {
        rc = sched_set_policy_table(t, device, (sched_policy_t)policy, -1);
        shm_close_table(t);
    }
    if (rc == 0)
        snprintf(msg, sizeof msg, "GPU %d of %s: policy set to %s", device, table,
                 sched_policy_names[policy]);
    else
        snprintf(msg, sizeof msg, "GPU %d of %s: the policy could not be changed: %s", device,
                 table, rc == -EINVAL ? "bad device" : top_open_error(rc));
    top_audit("policy: %s", msg);
    say(u, msg);
}

static void policy_prompt(ui_t *u)
{
    const top_device_t *d = selected_device(u);
    if (!d) {
        say(u, "no GPU to set a policy for");
        return;
    }
    int height, width;
    getmaxyx(stdscr, height, width);
    char line[256], fit[256], table[SHM_TABLE_NAME_BYTES];
    snprintf(table, sizeof table, "%s", u->snap.tables[d->table].name);
    int device = d->index;
    int n = snprintf(line, sizeof line, " policy of GPU %d (now %s):", device,
                     d->has_sched ? sched_policy_names[d->policy] : "-");
    for (int i = 0; i < SCHED_POLICY_COUNT && n < (int)sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %d %s ", i + 1, sched_policy_names[i]);
    if (n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, "  Esc cancels");
    top_fit(line, width, fit, sizeof fit);
    attron(A_REVERSE);
    mvprintw(height - 1, 0, "%-*s", width, fit);
    attroff(A_REVERSE);
    refresh();
    timeout(-1);
    int k = getch();
    if (k >= '1' && k < '1' + SCHED_POLICY_COUNT)
        set_policy(u, table, device, k - '1');
    else
        say(u, "policy unchanged");
}

/* ---- prompts --------------------------------------------------------------------------------
 * On the bottom line, in reverse video; the screen is redrawn after. */

static void bottom_line(const char *text)
{
    int height, width;
    char fit[512];
    getmaxyx(stdscr, height, width);
    top_fit(text, width, fit, sizeof fit);
    attron(A_REVERSE);
    mvprintw(height - 1, 0, "%-*s", width, fit);
    attroff(A_REVERSE);
    refresh();
}

/* A line of text: 1 with it in buf on Enter, 0 on Esc. */
static int prompt_text(const char *label, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    timeout(-1);
    for (;;) {
        char line[512];
        snprintf(line, sizeof line, " %s%s_   Enter confirms, Esc cancels", label, buf);
        bottom_line(line);
        int k = getch();
        if (k == '\n' || k == '\r' || k == KEY_ENTER)
            return 1;
        if (k == 27)
            return 0;
        if ((k == KEY_BACKSPACE || k == 127 || k == 8) && n > 0)
            buf[--n] = '\0';
        else if (k >= 0x20 && k < 0x7f && n + 1 < len) {
            buf[n++] = (char)k;
            buf[n] = '\0';
        }
    }
}

/* y or n. */
static int confirm(const char *question)
{
    char line[512];
    snprintf(line, sizeof line, " %s  y/N", question);
    bottom_line(line);
    timeout(-1);
    int k = getch();
    return k == 'y' || k == 'Y';
}

/* ---- changing the selected process ------------------------------------------------------------ */

static int selected(ui_t *u, top_target_t *t)
{
    if (u->sel < 0 || u->sel >= u->snap.nprocs) {
        say(u, "no process selected");
        return -1;
    }
    top_target_of(&u->snap, &u->snap.procs[u->sel], t);
    return 0;
}

static void renice_to(ui_t *u, const top_target_t *t, long prio)
{
    char msg[512];
    top_renice(t, (int)(prio < 0 ? 0 : prio > 100 ? 100 : prio), msg, sizeof msg);
    say(u, msg);
}

static void renice_prompt(ui_t *u)
{
    top_target_t t;
    char label[160], text[16];
    long prio;
    if (selected(u, &t) != 0)
        return;
    snprintf(label, sizeof label, "priority of %d (%s), now %d (0..100): ", (int)t.pid, t.name,
             t.priority);
    if (!prompt_text(label, text, sizeof text))
        say(u, "priority unchanged");
    else if (top_parse_long(text, 0, 100, &prio) != 0)
        say(u, "priority unchanged: it takes a whole number from 0 to 100");
    else
        renice_to(u, &t, prio);
}

static void limit_prompt(ui_t *u)
{
    top_target_t t;
    char label[200], text[32], now[16];
    if (selected(u, &t) != 0)
        return;
    top_human_bytes(t.mem_limit, now, sizeof now);
    snprintf(label, sizeof label, "memory limit of %d (%s), now %s (20G, 512M, 25%%, 100%%: the "
             "whole budget): ", (int)t.pid, t.name, now);
    char msg[512];
    if (!prompt_text(label, text, sizeof text)) {
        say(u, "memory limit unchanged");
        return;
    }
    top_limit(&t, text, 0, msg, sizeof msg);
    say(u, msg);
}

static void kill_prompt(ui_t *u)
{
    top_target_t t;
    char q[160], msg[256];
    if (selected(u, &t) != 0)
        return;
    uint64_t now = util_now_ns();
    int again = u->term_pid == t.pid && u->term_start == t.start_ticks;
    if (again && now - u->term_ns < KILL_GRACE_NS) {
        snprintf(msg, sizeof msg, "%d (%s) was sent SIGTERM %.1f s ago; k again from %.0f s "
                 "offers SIGKILL", (int)t.pid, t.name, (double)(now - u->term_ns) / 1e9,
                 (double)KILL_GRACE_NS / 1e9);
        say(u, msg);
        return;
    }
    int sig = again ? SIGKILL : SIGTERM;
    if (again)
        snprintf(q, sizeof q, "%d (%s) still runs %.0f s after SIGTERM: kill it with SIGKILL?",
                 (int)t.pid, t.name, (double)(now - u->term_ns) / 1e9);
    else
        snprintf(q, sizeof q, "kill %d (%s) with SIGTERM?", (int)t.pid, t.name);
    if (!confirm(q)) {
        say(u, "not killed");
        return;
    }
    if (top_kill(&t, sig, msg, sizeof msg) == 0 && sig == SIGTERM) {
        u->term_pid = t.pid;
        u->term_start = t.start_ticks;
        u->term_ns = util_now_ns();
    }
    say(u, msg);
}

static void filter_prompt(ui_t *u)
{
    char text[sizeof u->filter];
    if (!prompt_text("show processes whose name or user contains (empty: all): ", text,
                     sizeof text))
        return;
    snprintf(u->filter, sizeof u->filter, "%s", text);
    u->filter_changed = 1;
}

/* ---- keys and the loop -------------------------------------------------------------------- */

static void move_sel(ui_t *u, int by)
{
    if (u->snap.nprocs == 0)
        return;
    int s = u->sel + by;
    s = s < 0 ? 0 : s >= u->snap.nprocs ? u->snap.nprocs - 1 : s;
    u->sel = s;
    const top_proc_t *p = &u->snap.procs[s];
    u->sel_pid = p->pid;
    u->sel_device = p->device;
    snprintf(u->sel_table, sizeof u->sel_table, "%s", u->snap.tables[p->table].name);
}

/* 1 to quit, 2 to take a new sample, 0 to redraw only. */
static int key(ui_t *u, int k)
{
    int height = LINES - 2;
    switch (k) {
    case 'q': case 'Q': case KEY_F(10): return 1;
    case 's': case 'S': case '>': case KEY_F(6): case '<':
        u->sort = (top_col_t)((u->sort + (k == '<' ? TOP_NCOLS - 1 : 1)) % TOP_NCOLS);
        return 2;
    case 'I': u->reverse = !u->reverse; return 2;
    case '/': case KEY_F(4): filter_prompt(u); return 2;
    case 'p': case 'P': policy_prompt(u); return 2;
    case 'r': renice_prompt(u); return 2;
    case KEY_F(7): case KEY_F(8): {
        top_target_t t;
        if (selected(u, &t) == 0)
            renice_to(u, &t, t.priority + (k == KEY_F(7) ? 10 : -10));
        return 2;
    }
    case 'l': limit_prompt(u); return 2;
    case 'k': case KEY_F(9): kill_prompt(u); return 2;
    case 'h': case 'H': case '?': case KEY_F(1): show_help(); return 0;
    case KEY_UP: move_sel(u, -1); return 0;
    case KEY_DOWN: move_sel(u, 1); return 0;     /* no 'j': beside it, 'k' kills */
    case KEY_PPAGE: move_sel(u, -height); return 0;
    case KEY_NPAGE: move_sel(u, height); return 0;
    case KEY_HOME: move_sel(u, -u->snap.nprocs); return 0;
    case KEY_END: move_sel(u, u->snap.nprocs); return 0;
    case ' ': return 2;
    default: return 0;                 /* KEY_RESIZE too: redraw at the new size */
    }
}

static int sample(ui_t *u)
{
    top_snap_t tmp = u->prev;
    u->prev = u->snap;
    u->snap = tmp;
    if (top_collect(u->c, &u->snap) != 0)
        return -1;
    top_sort(&u->snap, u->sort);
    if (u->reverse)
        top_reverse(&u->snap);
    top_filter(&u->snap, u->filter);
    char changes[512];
    if (u->prev.taken_ns && !u->filter_changed &&
        top_changes(&u->prev, &u->snap, changes, sizeof changes) > 0)
        tell(u, changes);
    u->filter_changed = 0;
    reselect(u);
    return 0;
}

static void start_colors(ui_t *u)
{
    if (!has_colors() || start_color() != OK)
        return;
    use_default_colors();
    init_pair(PAIR_RUN, COLOR_GREEN, -1);
    init_pair(PAIR_WAIT, COLOR_YELLOW, -1);
    init_pair(PAIR_HEAD, COLOR_CYAN, -1);
    init_pair(PAIR_NOTE, COLOR_MAGENTA, -1);
    u->colors = 1;
}

int top_ui_run(top_collector_t *c, const top_ui_opts_t *o)
{
    ui_t u = { .c = c, .delay_s = o->delay_s, .sort = o->sort, .sel = -1 };
    top_snap_init(&u.snap);
    top_snap_init(&u.prev);
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!initscr()) {
        fprintf(stderr, "salus-top: this terminal cannot be used (TERM=%s); "
                "try salus-top --once\n", getenv("TERM") ? getenv("TERM") : "");
        return TOP_EXIT_FAIL;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    start_colors(&u);

    int rc = TOP_EXIT_OK, fresh = 1;
    uint64_t next = 0;
    while (!stop) {
        uint64_t now = util_now_ns();
        if (fresh || now >= next) {
            if (sample(&u) != 0) {
                rc = TOP_EXIT_FAIL;
                break;
            }
            next = now + (uint64_t)(u.delay_s * 1e9);
            fresh = 0;
        }
        heard(&u);
        draw(&u);
        now = util_now_ns();
        timeout(next > now ? (int)((next - now) / 1000000) + 1 : 0);
        int k = getch();
        if (k == ERR)
            continue;
        int r = key(&u, k);
        if (r == 1)
            break;
        fresh = r == 2;
    }
    endwin();
    top_snap_free(&u.snap);
    top_snap_free(&u.prev);
    free(u.lines);
    return rc;
}
