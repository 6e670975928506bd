/*
 * spank_salus.c - spank_salus.so, the Slurm plugin: jobs that share a node's
 * GPUs (Slurm's `shard` GRES) run under Salus, which arbitrates between them.
 *
 * Divided into:
 *   the plugin's arguments (plugstack.conf: default=, libsalus=, salus=,
 *       group=, shard_limit=, shards_per_gpu=);
 *   the options (--salus and one --salus-<option> per row of libsalus's list
 *       of variables that `salus run` offers, checked by the same rule with
 *       the same message: a bad value fails sbatch/srun/salloc at
 *       submission, not the job later);
 *   the node's table (remote context, as root: the group table is made by
 *       root, in the group, mode 0660, before any job's process can make
 *       it);
 *   the shards' share of a GPU (--gres=shard:N of the GPU's shards as the
 *       step's memory limit);
 *   each step's environment (LD_PRELOAD, the SALUS_* of the options, the
 *       table, SALUS_NAME "<job>.<step> <job name>", SALUS_END_TIME from the
 *       job's time limit, SALUS_MEM_LIMIT from the shards);
 *   the epilog check (job script context, as root: a finished job left no
 *       process and no memory in a table of the node; said in slurmd's log).
 *
 * Slurm calls a plugin from one thread of each process (sbatch, srun,
 * slurmstepd, the epilog): the settings below are that process's own, with
 * no lock.  See slurm/README.md and salus-slurm(8).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "util/vars.h"

SPANK_PLUGIN(salus, 1);

#ifndef SALUS_PREFIX
#define SALUS_PREFIX "/usr/local"
#endif

#define OPT_SALUS    (-1)        /* --salus[=on|off]; the others are variable ids */
#define NAME_MAX_LEN 31          /* SALUS_NAME: 1 to 31 printable characters */

/* Variables a job does not choose: the table belongs to the node's model,
 * the name to the job. */
static int offered(util_var_id_t id)
{
    return util_vars[id].option && id != UTIL_VAR_TABLE && id != UTIL_VAR_NAME;
}

/* ---- the plugin's arguments ------------------------------------------------------ */

static struct {
    int on_by_default;
    char libsalus[PATH_MAX];
    char salus[PATH_MAX];
    char group[64];              /* "": each user's own table */
    int shard_limit;             /* shards become SALUS_MEM_LIMIT */
    long shards_per_gpu;         /* 0: from gres.conf */
} conf;

/* text as a whole number in [min, max], digits only. */
static int whole(const char *text, long min, long max, long *out)
{
    char *end;
    if (!text[0] || strspn(text, "0123456789") != strlen(text))
        return 0;
    long n = strtol(text, &end, 10);
    if (*end || n < min || n > max)
        return 0;
    *out = n;
    return 1;
}

static int parse_args(int ac, char **av)
{
    conf.on_by_default = 0;
    snprintf(conf.libsalus, sizeof conf.libsalus, "%s/lib/libsalus.so", SALUS_PREFIX);
    snprintf(conf.salus, sizeof conf.salus, "%s/bin/salus", SALUS_PREFIX);
    snprintf(conf.group, sizeof conf.group, "salus");
    conf.shard_limit = 1;
    conf.shards_per_gpu = 0;
    for (int i = 0; i < ac; i++) {
        const char *a = av[i], *eq = strchr(a, '=');
        const char *v = eq ? eq + 1 : "";
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        int ok = 1;
        if (klen == 7 && !strncmp(a, "default", klen))
            ok = (conf.on_by_default = !strcmp(v, "on")) || !strcmp(v, "off");
        else if (klen == 8 && !strncmp(a, "libsalus", klen))
            ok = v[0] == '/' && snprintf(conf.libsalus, sizeof conf.libsalus, "%s", v) <
                                (int)sizeof conf.libsalus;
        else if (klen == 5 && !strncmp(a, "salus", klen))
            ok = v[0] == '/' && snprintf(conf.salus, sizeof conf.salus, "%s", v) <
                                (int)sizeof conf.salus;
        else if (klen == 11 && !strncmp(a, "shard_limit", klen))
            ok = (conf.shard_limit = !strcmp(v, "on")) || !strcmp(v, "off");
        else if (klen == 14 && !strncmp(a, "shards_per_gpu", klen))
            ok = whole(v, 1, 100000, &conf.shards_per_gpu);
        else if (klen == 5 && !strncmp(a, "group", klen))
            ok = strlen(v) < sizeof conf.group && (!*v || util_var_check(UTIL_VAR_GROUP, v,
                                                                         NULL, 0) == 0) &&
                 snprintf(conf.group, sizeof conf.group, "%s", v) >= 0;
        else
            ok = 0;
        if (!ok) {
            slurm_error("salus: plugstack.conf argument \"%s\" is not accepted: the "
                        "arguments are default=on|off, libsalus=/PATH, salus=/PATH, "
                        "group=NAME (group= alone: each user's own table), "
                        "shard_limit=on|off, shards_per_gpu=N (1 to 100000; default: "
                        "gres.conf's)", a);
            return -1;
        }
    }
    return 0;
}

/* ---- the options ------------------------------------------------------------------- */

static int enabled = -1;                        /* -1: the default */
static char *values[UTIL_VAR_COUNT];            /* the options given */
static char opt_names[UTIL_VAR_COUNT][48];
static char opt_usage[UTIL_VAR_COUNT][160];

static int on_option(int val, const char *arg, int remote)
{
    (void)remote;
    if (val == OPT_SALUS) {
        if (!arg || !strcasecmp(arg, "on") || !strcasecmp(arg, "yes") || !strcmp(arg, "1"))
            enabled = 1;
        else if (!strcasecmp(arg, "off") || !strcasecmp(arg, "no") || !strcmp(arg, "0"))
            enabled = 0;
        else {
            slurm_error("salus: --salus \"%s\" is not accepted: on or off", arg);
            return -1;
        }
        return 0;
    }
    if (val < 0 || val >= UTIL_VAR_COUNT || !offered((util_var_id_t)val))
        return -1;
    char msg[768];
    if (util_var_refusal((util_var_id_t)val, opt_names[val], arg, msg, sizeof msg) != 0) {
        slurm_error("salus: %s", msg);
        return -1;
    }
    free(values[val]);
    values[val] = strdup(arg);
    if (enabled < 0)
        enabled = 1;                   /* a Salus setting asks for Salus */
    return values[val] ? 0 : -1;
}

static int register_options(spank_t sp)
{
    static struct spank_option salus_opt = {
        "salus", "[on|off]", "share this job's GPUs under Salus (default: the site's, "
        "see salus-slurm(8))", 2, OPT_SALUS, on_option,
    };
    if (spank_option_register(sp, &salus_opt) != ESPANK_SUCCESS)
        return -1;
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        if (!offered((util_var_id_t)i))
            continue;
        const util_var_t *v = &util_vars[i];
        snprintf(opt_names[i], sizeof opt_names[i], "salus-%s", v->option);
        snprintf(opt_usage[i], sizeof opt_usage[i], "Salus: %s [%s]", v->help, v->name);
        struct spank_option o = { opt_names[i], (char *)v->arg, opt_usage[i], 1, i, on_option };
        if (spank_option_register(sp, &o) != ESPANK_SUCCESS)
            return -1;
    }
    return 0;
}

static int salus_on(void)
{
    return enabled < 0 ? conf.on_by_default : enabled;
}

/* ---- the node's table -------------------------------------------------------------
 * The group's table, /salus-group-<group>, as libsalus names it.  Made here
 * by root, empty (the first process that joins gives it its size and
 * layout), in the group, mode 0660: members can use it and nobody else can
 * open it; /dev/shm is sticky, so no member can remove it or put one of
 * their own in its place.  One found with another owner, group or mode was
 * made by hand or by a user before Slurm ran here: it is replaced, since its
 * owner could otherwise change its mode under the others. */

static int group_gid(gid_t *out)
{
    struct group gr, *res = NULL;
    char buf[4096];
    if (getgrnam_r(conf.group, &gr, buf, sizeof buf, &res) != 0 || !res)
        return -1;
    *out = res->gr_gid;
    return 0;
}

static void table_name(char *buf, size_t len)
{
    snprintf(buf, len, "/salus-group-%s", conf.group);
}

static int make_table(gid_t gid)
{
    char name[128];
    table_name(name, sizeof name);
    for (int tries = 0; tries < 3; tries++) {
        int fd = shm_open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
        if (fd >= 0) {
            struct stat st;
            int good = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
                       st.st_gid == gid && (st.st_mode & 07777) == 0660;
            close(fd);
            if (good)
                return 0;
            slurm_error("salus: table %s has owner %u, group %u, mode %03o, not root, %s, "
                        "0660: replacing it (processes still using it go on alone)", name,
                        (unsigned)st.st_uid, (unsigned)st.st_gid,
                        (unsigned)(st.st_mode & 07777), conf.group);
            shm_unlink(name);
            continue;
        }
        if (errno != ENOENT)
            break;
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST)
                continue;                      /* another step made it: check it */
            break;
        }
        int rc = fchown(fd, 0, gid) == 0 && fchmod(fd, 0660) == 0 ? 0 : -1;
        int err = errno;
        close(fd);
        if (rc == 0)
            return 0;
        shm_unlink(name);
        errno = err;
        break;
    }
    slurm_error("salus: cannot make table %s for group %s: %s; jobs use their user's own "
                "table", name, conf.group, strerror(errno));
    return -1;
}

/* The table model of this step: 1 the group's table, 0 the user's own. */
static int group_model(spank_t sp)
{
    gid_t gid, job_gid, *gids = NULL;
    int n = 0;
    if (!conf.group[0])
        return 0;
    if (group_gid(&gid) != 0) {
        slurm_error("salus: group %s does not exist on this node, so jobs of different "
                    "users are not arbitrated together: create it (groupadd %s) and add "
                    "the GPU users, or set group= in plugstack.conf", conf.group, conf.group);
        return 0;
    }
    int member = spank_get_item(sp, S_JOB_GID, &job_gid) == ESPANK_SUCCESS && job_gid == gid;
    if (!member && spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &n) == ESPANK_SUCCESS)
        for (int i = 0; i < n && !member; i++)
            member = gids[i] == gid;
    if (!member) {
        slurm_info("salus: the job's user is not in group %s: the job shares the GPU only "
                   "with the same user's jobs", conf.group);
        return 0;
    }
    return make_table(gid) == 0;
}

/* ---- each step's environment ---------------------------------------------------- */

static int step_name(spank_t sp, char *out, size_t len)
{
    uint32_t job = 0, step = 0, array = 0, task = 0;
    char id[64], jobname[128] = "";
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
        return -1;
    if (spank_get_item(sp, S_JOB_ARRAY_ID, &array) == ESPANK_SUCCESS && array &&
        spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &task) == ESPANK_SUCCESS)
        snprintf(id, sizeof id, "%u_%u", array, task);
    else
        snprintf(id, sizeof id, "%u", job);
    switch (step) {
    case SLURM_BATCH_SCRIPT:       snprintf(id + strlen(id), 16, ".batch"); break;
    case SLURM_INTERACTIVE_STEP:   snprintf(id + strlen(id), 16, ".interactive"); break;
    default:                       snprintf(id + strlen(id), 16, ".%u", step); break;
    }
    spank_getenv(sp, "SLURM_JOB_NAME", jobname, sizeof jobname);
    /* Printable ASCII only, as SALUS_NAME takes. */
    for (char *c = jobname; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    char full[sizeof id + sizeof jobname + 1];
    snprintf(full, sizeof full, "%s%s%s", id, *jobname ? " " : "", jobname);
    size_t n = strlen(full) < NAME_MAX_LEN ? strlen(full) : NAME_MAX_LEN;
    if (len <= n)
        return -1;
    memcpy(out, full, n);
    out[n] = '\0';
    return 0;
}

static int prepend_preload(spank_t sp)
{
    char old[4096] = "", v[PATH_MAX + sizeof old + 2];
    if (spank_getenv(sp, "LD_PRELOAD", old, sizeof old) != ESPANK_SUCCESS)
        old[0] = '\0';
    if (strstr(old, conf.libsalus))
        return 0;
    snprintf(v, sizeof v, "%s%s%s", conf.libsalus, *old ? ":" : "", old);
    return spank_setenv(sp, "LD_PRELOAD", v, 1) == ESPANK_SUCCESS ? 0 : -1;
}

/* The job's time limit, as its end, for srtf (SALUS_END_TIME); nothing for
 * a job without one. */
static void set_end_time(spank_t sp)
{
    uint32_t job;
    time_t end = 0, now = time(NULL);
    char v[32];
    if (values[UTIL_VAR_END_TIME] || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        slurm_get_end_time(job, &end) != 0)
        return;
    if (end <= now || end > now + 366L * 86400)      /* unlimited, or already over */
        return;
    snprintf(v, sizeof v, "%lld", (long long)end);
    spank_setenv(sp, "SALUS_END_TIME", v, 1);
}

/* ---- the shards' share of a GPU --------------------------------------------------
 * --gres=shard:N asks for N of a GPU's shards: without --salus-mem, the step's
 * SALUS_MEM_LIMIT becomes that share of the GPU's budget (2 of 4: 50%), so
 * that a shard count means memory as well as time.  The shards per GPU are
 * shards_per_gpu= of plugstack.conf, else gres.conf's beside slurm.conf: the
 * Count of this node's Name=shard lines, per File they name.  A step whose
 * share cannot be told gets no limit, said in the node's log. */

static int node_matches(const char *list, const char *node)
{
    if (!list)
        return 1;                                   /* a line for every node */
    hostlist_t hl = slurm_hostlist_create(list);
    if (!hl)
        return 0;
    int found = slurm_hostlist_find(hl, node) >= 0;
    slurm_hostlist_destroy(hl);
    return found;
}

/* The shards per GPU of this node's Name=shard lines of gres.conf `path`,
 * or 0. */
static long gres_shards_per_gpu(const char *path, const char *node)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[1024];
    long per = 0;
    while (!per && fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\n")] = '\0';
        char *save = NULL, *nodes = NULL, *name = NULL, *count = NULL, *file = NULL;
        for (char *tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = '\0';
            if (!strcasecmp(tok, "NodeName"))
                nodes = eq + 1;
            else if (!strcasecmp(tok, "Name"))
                name = eq + 1;
            else if (!strcasecmp(tok, "Count"))
                count = eq + 1;
            else if (!strcasecmp(tok, "File"))
                file = eq + 1;
        }
        long n;
        if (!name || strcmp(name, "shard") || !count || !whole(count, 1, 100000000, &n) ||
            !node_matches(nodes, node))
            continue;
        int files = 1;                              /* File=/dev/nvidia[0-3]: 4 GPUs */
        hostlist_t hl = file && strchr(file, '[') ? slurm_hostlist_create(file) : NULL;
        if (hl) {
            files = slurm_hostlist_count(hl);
            slurm_hostlist_destroy(hl);
        }
        per = files > 0 ? n / files : 0;
    }
    fclose(f);
    return per;
}

static void env_or(spank_t sp, const char *name, char *buf, size_t len)
{
    buf[0] = '\0';
    if (spank_getenv(sp, name, buf, (int)len) != ESPANK_SUCCESS) {
        const char *v = getenv(name);
        snprintf(buf, len, "%s", v ? v : "");
    }
}

static long shards_per_gpu(spank_t sp)
{
    if (conf.shards_per_gpu)
        return conf.shards_per_gpu;
    char slurm_conf[PATH_MAX], node[256], gres[PATH_MAX + 16];
    env_or(sp, "SLURM_CONF", slurm_conf, sizeof slurm_conf);
    if (!slurm_conf[0])
        snprintf(slurm_conf, sizeof slurm_conf, "/etc/slurm/slurm.conf");
    env_or(sp, "SLURMD_NODENAME", node, sizeof node);
    if (!node[0] && gethostname(node, sizeof node) != 0)
        return 0;
    char *slash = strrchr(slurm_conf, '/');
    snprintf(gres, sizeof gres, "%.*s/gres.conf", slash ? (int)(slash - slurm_conf) : 1,
             slash ? slurm_conf : ".");
    return gres_shards_per_gpu(gres, node);
}

static void set_shard_limit(spank_t sp)
{
    char text[32], limit[24];
    long shards, per;
    if (!conf.shard_limit || values[UTIL_VAR_MEM_LIMIT])
        return;                                     /* off, or the job chose */
    env_or(sp, "SLURM_SHARDS_ON_NODE", text, sizeof text);
    if (!whole(text, 1, 100000000, &shards))
        return;                                     /* not a shard job */
    per = shards_per_gpu(sp);
    if (per <= 0) {
        slurm_info("salus: %ld shard(s), but the shards of a GPU are not known (no "
                   "Name=shard line of this node in gres.conf): the step has no memory "
                   "limit; set shards_per_gpu= in plugstack.conf", shards);
        return;
    }
    long pct = shards >= per ? 100 : shards * 100 / per;
    snprintf(limit, sizeof limit, "%ld%%", pct > 0 ? pct : 1);
    spank_setenv(sp, "SALUS_MEM_LIMIT", limit, 1);
}

static int set_step_env(spank_t sp, int shared)
{
    char name[NAME_MAX_LEN + 1];
    if (access(conf.libsalus, R_OK) != 0) {
        slurm_error("salus: %s cannot be read (%s): this job runs without Salus; install "
                    "Salus on the node or set libsalus= in plugstack.conf", conf.libsalus,
                    strerror(errno));
        return 0;
    }
    for (int i = 0; i < UTIL_VAR_COUNT; i++)
        if (values[i] && spank_setenv(sp, util_vars[i].name, values[i], 1) != ESPANK_SUCCESS)
            return -1;
    spank_unsetenv(sp, "SALUS_TABLE");               /* the node's model decides */
    if (shared)
        spank_setenv(sp, "SALUS_GROUP", conf.group, 1);
    else
        spank_unsetenv(sp, "SALUS_GROUP");
    if (step_name(sp, name, sizeof name) == 0)
        spank_setenv(sp, "SALUS_NAME", name, 1);
    set_end_time(sp);
    set_shard_limit(sp);
    return prepend_preload(sp);
}

/* ---- the epilog check -------------------------------------------------------------
 * `salus status --json -a` lists the live processes of every table root can
 * read, with their memory; a process named after the job is one the job left
 * behind (Slurm has killed the job's processes by now).  Memory of processes
 * that died without being reaped is the device's used memory beyond its live
 * processes' sum: the next peer of that table to call Salus gives it back. */

typedef struct found {
    int procs;
    unsigned long long bytes;
    char first[160];
} found_t;

static unsigned long long number_after(const char *from, const char *end, const char *key)
{
    const char *p = strstr(from, key);
    return p && (!end || p < end) ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void scan_status(const char *json, const char *prefix, found_t *f)
{
    for (const char *p = json; (p = strstr(p, "{\"pid\":")) != NULL; p++) {
        const char *end = strchr(p, '}');
        const char *name = strstr(p, "\"name\":\"");
        if (!end || !name || name > end)
            continue;
        name += 8;
        if (strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        unsigned long long used = number_after(p, end, "\"mem_used_bytes\":");
        if (f->procs++ == 0)
            snprintf(f->first, sizeof f->first, "pid %llu (%.*s) holding %llu bytes",
                     number_after(p, end, "{\"pid\":"), (int)(strchr(name, '"') ?
                     strchr(name, '"') - name : 0), name, used);
        f->bytes += used;
    }
}

/* The output of `salus status --json -a`, NUL-terminated, or NULL. */
static char *read_status(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return NULL;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 2);
        execl(conf.salus, "salus", "status", "--json", "-a", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t n;
    while (buf && (n = read(fds[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap) {
            char *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (buf && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        free(buf);
        return NULL;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

static int epilog_check(spank_t sp)
{
    uint32_t job = 0;
    char env[32] = "", prefix[48];
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || job == 0) {
        if (spank_getenv(sp, "SLURM_JOB_ID", env, sizeof env) != ESPANK_SUCCESS)
            return 0;
        job = (uint32_t)strtoul(env, NULL, 10);
    }
    /* A task of an array is named <array>_<task>.<step> (step_name). */
    const char *array = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
    if (array && task && *array && *task)
        snprintf(prefix, sizeof prefix, "%.16s_%.16s.", array, task);
    else
        snprintf(prefix, sizeof prefix, "%u.", job);
    if (access(conf.salus, X_OK) != 0) {
        slurm_error("salus: epilog of job %u: %s cannot be run (%s); the node's tables "
                    "were not checked: install Salus or set salus= in plugstack.conf", job,
                    conf.salus, strerror(errno));
        return 0;
    }
    char *json = read_status();
    if (!json) {
        slurm_error("salus: epilog of job %u: `%s status --json -a` failed; the node's "
                    "tables were not checked", job, conf.salus);
        return 0;
    }
    found_t f = { 0 };
    scan_status(json, prefix, &f);
    free(json);
    if (f.procs)
        slurm_error("salus: job %u left %d process(es) in a Salus table of this node, "
                    "holding %llu bytes of GPU memory: %s%s", job, f.procs, f.bytes,
                    f.first, f.procs > 1 ? ", ..." : "");
    else
        slurm_info("salus: job %u left nothing in the Salus tables of this node", job);
    return 0;
}

/* ---- Slurm's entry points ------------------------------------------------------- */

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (parse_args(ac, av) != 0)
        return -1;
    spank_context_t ctx = spank_context();
    if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE)
        return register_options(sp);
    return 0;
}

static int step_shared = 0;

/* Remote context, still root: the node's table for this step's model. */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE || !salus_on())
        return 0;
    step_shared = group_model(sp);
    return 0;
}

/* Remote context, as the job's user, before the tasks start. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!salus_on())
        return 0;
    return set_step_env(sp, step_shared);
}

/* Job script context (slurmd's epilog, as root): Slurm calls no
 * slurm_spank_init here, so the arguments are read again. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    if (parse_args(ac, av) != 0)
        return 0;
    return epilog_check(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        free(values[i]);
        values[i] = NULL;
    }
    return 0;
}
