/*
 * top.h - the inside of salus-top and of the salus command: what they share.
 *
 * A monitor is three layers that do not know each other's details:
 *   1. collection (collect.c): find the tables this user can read, open them
 *      read-only, and copy what the ipc, sched and memory modules say into a
 *      snapshot (top_snap_t), with rates from the previous snapshot;
 *   2. the view (layout.c): pure functions over a snapshot and a width: row
 *      order, which columns fit, their widths and cell texts;
 *   3. the outputs: draw.c (ncurses, live), output.c (plain text, JSON,
 *      Prometheus), each fed a snapshot and, for text, a layout.
 * text.c holds the string helpers all of them use: sanitizing what comes
 * from a table (a peer's bytes), JSON and Prometheus escaping, sizes.
 *
 * The tools read the table only through ipc.h, sched.h and memory.h; they
 * link those modules' objects statically, never libsalus.so (which overrides
 * dlsym) nor the CUDA driver.
 */
#ifndef SALUS_TOOLS_TOP_H
#define SALUS_TOOLS_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ipc/ipc.h"
#include "sched/sched.h"

/* Exit statuses of both tools. */
#define TOP_EXIT_OK     0
#define TOP_EXIT_FAIL   1   /* the operation failed (a table unusable, ...) */
#define TOP_EXIT_USAGE  2   /* bad arguments */

#define TOP_MAX_TABLES  32
#define TOP_USER_BYTES  33

/* ---- the snapshot ----------------------------------------------------------- */

/* The one vocabulary of process states, on the screen, in JSON, in the
 * Prometheus output and in the man pages: X(id, name, what it means). */
#define TOP_STATES(X) \
    X(TOP_ST_RUNNING, "running", "holds the GPU (or runs under pack)") \
    X(TOP_ST_WAIT_GPU, "waiting-gpu", "waits for the GPU's lease") \
    X(TOP_ST_WAIT_MEM, "waiting-mem", "waits for memory under its limit or the budget") \
    X(TOP_ST_ADMISSION, "admission", "waits to be admitted (SALUS_MEM_RESERVE)") \
    X(TOP_ST_BLOCKED, "blocked", "holds the GPU, blocked in one sync past its max slice " \
      "while others wait (it waits for another process's work)") \
    X(TOP_ST_STOPPED, "stopped", "stopped by a signal or a debugger: idle for its peers") \
    X(TOP_ST_PAGED_OUT, "paged-out", "not running, its device memory paged out to the host " \
      "(SALUS_SWAP); paged back before it runs") \
    X(TOP_ST_IDLE, "idle", "registered, not using the GPU")
#define TOP_ST_ID_(id, name, what) id,
typedef enum top_state { TOP_STATES(TOP_ST_ID_) TOP_NSTATES } top_state_t;
#undef TOP_ST_ID_
extern const char *const top_state_names[TOP_NSTATES];

#define TOP_HIST_CHARS  20           /* the sparkline: GPU share over the last minute */
#define TOP_HIST_S      60

/* One process as shown under one device (a process on two devices makes two
 * rows; its memory figures are over all its devices). */
typedef struct top_proc {
    int table;                       /* index in top_snap_t.tables */
    int device;                      /* table device index of this row */
    int slot;
    uint32_t gen;
    pid_t pid;
    uid_t uid;
    char user[TOP_USER_BYTES];       /* sanitized */
    char name[SHM_NAME_BYTES];       /* sanitized */
    shm_state_t state;
    int waiting_admission;           /* waiting-mem: for admission (1), a limit (0) */
    int holds;                       /* holds this device's lease */
    int stopped;                     /* its process is stopped (state T or t) */
    int pid_here;                    /* pid is its pid in this PID namespace too (not a
                                        container's pid for another process here) */
    uint64_t start_ticks;            /* its start, to tell it from a reused pid */
    int blocked;                     /* a holder blocked in a sync (libsalus(7)) */
    char gang[32];                   /* its gang (SALUS_GANG...), sanitized; "": none */
    int has_sched, has_mem;          /* which modules had set the slot up */
    /* scheduler */
    int priority;
    uint64_t declared, iterations, switches;
    uint32_t length_ms;           /* SALUS_LENGTH_MS, 0: none */
    int has_end;                  /* SALUS_END_TIME given */
    double iter_ms, gpu_held_ms, waited_ms;
    /* memory (bytes): mem_used is what its limit counts, its allocations
     * and its contexts and modules (mem_ctx of it); mem_peak is its
     * allocations' peak */
    uint64_t mem_used, mem_ctx, mem_limit, mem_peak, mem_reserved, oom_refusals;
    /* paging: bytes paged out now (mem_used is what is resident) */
    uint64_t mem_swapped, swap_outs, swap_ins, swap_ms;
    uint64_t mem_pinned;          /* paging cannot move it: exported over CUDA IPC */
    /* over the interval since the previous snapshot; < 0: not measured (no
     * previous sample of this process, or no lease under pack) */
    double gpu_share, wait_share;
    /* GPU share over the last TOP_HIST_S seconds, oldest first, one character
     * per TOP_HIST_S / TOP_HIST_CHARS seconds (' ': no sample) */
    char spark[TOP_HIST_CHARS + 1];
} top_proc_t;

/* Whether srtf can rank p by its length: it declared iterations, a length
 * or an end time (without any, srtf orders jobs as fair does). */
int top_proc_has_length(const top_proc_t *p);

/* The state of a row, in the one vocabulary. */
top_state_t top_proc_state(const top_proc_t *p);

typedef struct top_device {
    int table;
    int index;                       /* in its table */
    int has_sched, has_mem;
    sched_policy_t policy;
    uint32_t quantum_ms, max_slice_ms;
    uint64_t switches;
    pid_t holder;                    /* 0: none (all, under pack) */
    int holder_slot;                 /* -1: none */
    int nwaiters;
    pid_t waiters[SHM_MAX_SLOTS];    /* in arrival order */
    /* used: what the budget counts of the table's live processes, their
     * allocations and contexts (ctx of it); foreign: what the driver last
     * showed taken beyond them (other processes), not in used */
    uint64_t capacity, budget, used, ctx, foreign, reserved;
    uint32_t mem_waiters, queued;
    int nprocs;                      /* rows of this device */
    /* the GPU as nvidia-smi and DCGM name it: UUID from the table; model,
     * index (PCI order) and minor from the kernel driver, when it says */
    char uuid[48];                   /* "GPU-...", "" when unknown */
    char model[96];                  /* "" when unknown */
    char pci_bus_id[32];             /* "" when unknown */
    int gpu_index, minor;            /* -1 when unknown */
    int has_nvml;                    /* NVML knows the GPU: nvml is filled */
    struct top_nvml {
        int util_pct, temp_c;        /* -1: not reported */
        int64_t power_mw;            /* -1: not reported */
        uint64_t mem_used, mem_total;
    } nvml;
} top_device_t;
typedef struct top_nvml top_nvml_t;

typedef struct top_table {
    char name[SHM_TABLE_NAME_BYTES];
    int nprocs;                      /* live processes */
    unsigned abi;                    /* its table ABI (this build's, when shown) */
    char made_by[SHM_VERSION_BYTES]; /* the Salus version that made it; "": older */
} top_table_t;

/* A table of another version of Salus (another table ABI), which this build
 * cannot read: named with what it says of itself (shm_table_about). */
typedef struct top_other {
    char name[SHM_TABLE_NAME_BYTES];
    unsigned abi;
    char made_by[SHM_VERSION_BYTES];
    int nprocs;                      /* live processes; -1 unknown */
} top_other_t;

typedef struct top_snap {
    uint64_t taken_ns;               /* CLOCK_MONOTONIC */
    int64_t wall_ms;                 /* CLOCK_REALTIME, for the JSON "time" */
    char host[64];                   /* this machine's name, sanitized */
    double interval_s;               /* since the previous snapshot, 0: none */
    int ntables;
    top_table_t tables[TOP_MAX_TABLES];
    /* Tables found in /dev/shm that no live process uses, left out (the
     * default table and those named with -t always show; --all shows all). */
    int hidden_tables;
    int nothers;                     /* tables of other versions, found */
    top_other_t others[TOP_MAX_TABLES];
    int ndevices, devcap;
    top_device_t *devices;           /* by table, then index */
    int nprocs, proccap;
    top_proc_t *procs;               /* by table, device, slot */
    char note[256];                  /* why nothing is shown, or what changed */
} top_snap_t;

void top_snap_init(top_snap_t *s);
void top_snap_free(top_snap_t *s);
/* Whether any process row of device d declares a length (top_proc_has_length). */
int top_device_has_lengths(const top_snap_t *s, const top_device_t *d);

/* ---- collection (collect.c) ---------------------------------------------------
 * A collector keeps its tables open between samples, notices a table that
 * appears, disappears or is made again, and keeps the previous sample for
 * rates.  Names are shm names ("/salus-1000"). */
typedef struct top_collector top_collector_t;

typedef struct top_collect_opts {
    const char *const *tables;       /* NULL-terminated; NULL: discover */
    int all;                         /* discovery: also tables nobody uses */
} top_collect_opts_t;

/* 0, or -ENOMEM. */
int  top_collector_new(const top_collect_opts_t *o, top_collector_t **out);
void top_collector_free(top_collector_t *c);
/* Take a snapshot (replacing *s's contents).  0, or -ENOMEM. */
int  top_collect(top_collector_t *c, top_snap_t *s);
/* The name the tables of this process would use (SALUS_TABLE, SALUS_GROUP,
 * uid), and the group of a group table ("" otherwise).  0 or -EINVAL. */
int  top_default_table(char *name, size_t len, char *group, size_t glen);
/* Open `name` (group "" or NULL: none) for reading or writing, without
 * creating it and without logging.  0, or -errno (-ENOENT: no such table,
 * -EACCES/-EPERM: not this user's, -EPROTO: another version of Salus). */
int  top_open_table(const char *name, const char *group, int writable, shm_table_t **out);
/* The group to open `name` with: the one a /salus-group-<g> name implies, or
 * SALUS_GROUP for the table SALUS_TABLE names, else "". */
void top_table_group(const char *name, char *group, size_t len);
/* Words for top_open_table's errors. */
const char *top_open_error(int err);

/* ---- the GPU's names (gpuinfo.c) ------------------------------------------------- */
typedef struct top_gpu_info {
    int index;                       /* among the driver's GPUs, in PCI bus order */
    int minor;                       /* /dev/nvidia<minor>, -1 unknown */
    char model[96];
    char pci_bus_id[32];             /* as NVML and DCGM write it: 00000000:3B:00.0 */
} top_gpu_info_t;
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it. */
void top_uuid_text(const uint8_t uuid[16], char *buf, size_t len);
/* The GPU of that UUID text as the kernel driver describes it under `root`
 * (NULL: /proc/driver/nvidia/gpus).  0, or -1 when it does not know it. */
int  top_gpu_info(const char *root, const char *uuid, top_gpu_info_t *out);

/* ---- what NVML says of the GPU (nvmlinfo.c) ---------------------------------------
 * The device of that UUID text: 0 and *out, or -1 (no NVML, or it does not
 * know the GPU).  NVML is loaded on first need, never linked. */
int  top_nvml_read(const char *uuid, top_nvml_t *out);

/* ---- the view (layout.c) ---------------------------------------------------------- */
typedef enum top_col {
    TOP_COL_PID = 0, TOP_COL_USER, TOP_COL_NAME, TOP_COL_PRIO, TOP_COL_STATE,
    TOP_COL_MEM, TOP_COL_ITERS, TOP_COL_ITER_MS, TOP_COL_GPU, TOP_COL_WAIT,
    TOP_COL_SWITCHES, TOP_COL_HIST, TOP_NCOLS
} top_col_t;

typedef struct top_layout {
    int ncols;                       /* visible, in display order */
    top_col_t cols[TOP_NCOLS];
    int width[TOP_NCOLS];            /* by position */
    int x[TOP_NCOLS];                /* by position */
    int total;                       /* used width */
} top_layout_t;

/* Which columns fit in `width` characters and how wide each is: columns are
 * dropped from the least useful first; NAME takes what is left, up to its
 * longest cell (`name_len`).  Never fails: under 20 columns, PID and NAME
 * are kept and NAME is cut. */
void top_layout_compute(int width, int name_len, top_layout_t *out);
const char *top_col_title(top_col_t col);
/* Right-aligned numbers, left-aligned words. */
int  top_col_right(top_col_t col);
/* The cell of `p` in `col`, at most `width` characters (cut with '+'). */
void top_cell(const top_proc_t *p, top_col_t col, int width, char *buf, size_t len);
/* One row or the title line: exactly l->total characters. */
void top_format_row(const top_layout_t *l, const top_proc_t *p, char *buf, size_t len);
void top_format_title(const top_layout_t *l, char *buf, size_t len);
/* Copy s into buf in at most width characters, cut with '+' when too long. */
void top_fit(const char *s, int width, char *buf, size_t len);
/* Longest NAME of the snapshot's rows. */
int  top_name_len(const top_snap_t *s);

/* Sort the rows within each device by `col` (numbers descending, words
 * ascending, ties by pid). */
void top_sort(top_snap_t *s, top_col_t col);
/* Reverse the order of the rows within each device. */
void top_reverse(top_snap_t *s);
/* Keep only the rows whose name or user contains `text` (all when it is
 * empty); the number of rows kept. */
int  top_filter(top_snap_t *s, const char *text);
/* The device's header lines ("GPU 0  ..."), `width` at most. */
void top_device_line(const top_snap_t *s, const top_device_t *d, int width,
                     char *buf, size_t len);
void top_device_line2(const top_snap_t *s, const top_device_t *d, int width,
                      char *buf, size_t len);
/* The rows of device d: index of its first row. */
int  top_device_first(const top_snap_t *s, int d);
/* What changed from `old` to `now` (tables that appeared or went, processes
 * that exited), as one line in buf; the number of changes. */
int  top_changes(const top_snap_t *old, const top_snap_t *now, char *buf, size_t len);

/* ---- outputs (output.c) -------------------------------------------------------- */
void top_print_text(FILE *f, const top_snap_t *s, top_col_t sort, int width);
void top_print_json(FILE *f, const top_snap_t *s);
/* up: 0 when the snapshot could not be taken (salus_up 0, nothing else). */
void top_print_prometheus(FILE *f, const top_snap_t *s, int up);

/* ---- the live view (draw.c) ------------------------------------------------------ */
typedef struct top_ui_opts {
    double delay_s;
    top_col_t sort;
} top_ui_opts_t;
/* Until q.  TOP_EXIT_OK, or TOP_EXIT_FAIL when the terminal cannot be used. */
int top_ui_run(top_collector_t *c, const top_ui_opts_t *o);

/* ---- libsalus's messages under the live view (capture.c) -------------------------
 * While the view is up, stderr (fd 2) is a pipe whose lines the view shows
 * in its message line instead of letting them be drawn over the screen;
 * stopping puts stderr back and writes every line captured on it. */
/* 0, or -errno (stderr is left as it was). */
int  top_capture_start(void);
/* The next whole line captured, sanitized, without its newline: 1, or 0
 * when there is none (or nothing is captured). */
int  top_capture_line(char *buf, size_t len);
void top_capture_stop(void);

/* ---- the HTTP exporter (http.c) ---------------------------------------------------
 * "[ADDRESS]:PORT" into host ("127.0.0.1" when ADDRESS is empty) and port.
 * 0 or -1. */
int top_listen_parse(const char *text, char *host, size_t hlen, char *port, size_t plen);
/* Serve /metrics at listen_at until SIGINT or SIGTERM: TOP_EXIT_OK,
 * TOP_EXIT_FAIL (cannot listen) or TOP_EXIT_USAGE (a bad address).  Each
 * client gets what it could read itself (access.c). */
typedef struct top_serve_opts {
    const char *listen_at;
    int serve_all;                   /* every client gets every process read */
    int no_procs;                    /* no per-process series, for anyone */
} top_serve_opts_t;
int top_serve(top_collector_t *c, const top_serve_opts_t *o);

/* ---- who may read what (access.c) ----------------------------------------------- */
typedef struct top_reader {
    int all;                         /* --serve-all: everything */
    int none;                        /* --no-processes: no process rows at all */
    int known;                       /* uid is the client's (a loopback socket's owner) */
    uid_t uid;
} top_reader_t;
/* The uid owning the other end of the loopback TCP connection fd: 0 and
 * *uid, or -1 (not loopback, or not found). */
int  top_peer_uid(int fd, uid_t *uid);
/* *view: s with only the process rows of the tables r could open itself (an
 * unknown reader: none; root or this user: all); it shares s's devices and
 * is freed with top_view_free before s changes.  0, or -1 (no memory). */
int  top_view_for(const top_snap_t *s, const top_reader_t *r, top_snap_t *view);
void top_view_free(top_snap_t *view);

/* ---- live control (control.c) -----------------------------------------------------
 * A process a command or a key changes, as found in a snapshot. */
typedef struct top_target {
    char table[SHM_TABLE_NAME_BYTES], group[SHM_TABLE_NAME_BYTES];
    int slot;
    uint32_t gen;
    pid_t pid;
    uint64_t start_ticks;            /* the process's start, as its slot says */
    uid_t uid;
    int priority;
    uint64_t mem_limit;
    char name[SHM_NAME_BYTES], user[TOP_USER_BYTES];
} top_target_t;
/* Who may change a process: root, its owner, or a member of the group of a
 * group table. */
int top_control_allowed(uid_t caller, uid_t owner, int group_table, int in_group);
/* The processes `what` names in s (a pid, or a name as shown), once each:
 * their count, at most max. */
int top_find_targets(const top_snap_t *s, const char *what, top_target_t *out, int max);
/* The target of one row. */
void top_target_of(const top_snap_t *s, const top_proc_t *p, top_target_t *t);
/* Change one process; what happened (or why not) in one sentence in msg.
 * 0, or -errno (-EPERM: not the caller's to change, -ESRCH: it exited). */
int top_renice(const top_target_t *t, int priority, char *msg, size_t len);
int top_limit(const top_target_t *t, const char *size, int force, char *msg, size_t len);
/* Send sig to the target's process, only if its pid here is that process
 * (its start time is the slot's): a process of another PID namespace (a
 * container) is known by a pid that may be another process here.  0, or
 * -errno (-ESRCH: gone or not this namespace's; -EPERM). */
int top_kill(const top_target_t *t, int sig, char *msg, size_t len);
/* Whether /proc/<pid>/stat here is the process that started at start_ticks
 * (0: any); *stopped: it is stopped.  (collect.c) */
int top_pid_is(pid_t pid, uint64_t start_ticks, int *stopped);

/* One line to the system log (authpriv, notice, tag "salus") for a change
 * made through the tools: who (user, uid, tool), when, and `fmt`: what and
 * how it ended ("renice 4242 (train) in /salus-1000: priority 50 -> 80").
 * (audit.c) */
void top_audit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- salus-top's command line (top.c): also `salus status` -----------------------
 * once: always a snapshot (salus status), never the live view. */
int top_main(int argc, char **argv, const char *prog, int once);
/* "salus-top 0.3.0 (table ABI 2)": the version of the build (VERSION). */
void top_print_version(FILE *f, const char *prog);

/* ---- text (text.c) ------------------------------------------------------------------- */
/* Replace bytes a terminal would act on (controls, DEL, non-ASCII) by '?'. */
void top_sanitize(char *s);
void top_json_string(FILE *f, const char *s);      /* "..." with escapes */
void top_prom_label(FILE *f, const char *s);       /* label value, escaped */
/* 1.5G, 512M, 0: four significant characters at most. */
void top_human_bytes(uint64_t bytes, char *buf, size_t len);
/* Seconds as given to -d / --window: a positive decimal.  0 or -1. */
int  top_parse_seconds(const char *text, double min, double max, double *out);
/* A whole number in [min, max].  0 or -1. */
int  top_parse_long(const char *text, long min, long max, long *out);
/* The policy of that name (case-insensitive), or -1. */
int  top_policy_of(const char *name);
/* The candidate `word` is most likely a misspelling of (a few edits away,
 * case-insensitive, an adjacent swap one edit), or NULL: the "did you
 * mean" of a bad option, policy or command. */
const char *top_nearest(const char *word, const char *const *cands, int n);
/* The user name of uid (or its number), sanitized. */
void top_user_name(uid_t uid, char *buf, size_t len);

#endif /* SALUS_TOOLS_TOP_H */
