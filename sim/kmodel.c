/*
 * kmodel.c - how long a kernel runs: the fixed model and the shape model.
 *
 * Divided into: the settings, read once at cuInit (SIMGPU_KERNEL_WAVE_NS,
 * SIMGPU_KERNEL_LAUNCH_NS, the table file of SIMGPU_KERNEL_TABLE); a
 * function's time per wave, looked up in the table at its first launch and
 * kept in the function; the duration of one launch.
 *
 * salus_spin's duration is its parameter, decided by launch.c before it
 * asks here; the workloads' kernels are all salus_spin, so their timeline
 * is the same under either model.  Every other kernel:
 *
 *   fixed (SIMGPU_KERNEL_WAVE_NS unset or 0, the default): SIMGPU_KERNEL_NS.
 *   shape: SIMGPU_KERNEL_LAUNCH_NS + waves x wave time, where waves =
 *          ceil(blocks / (132 SMs x blocks resident per SM)), the blocks
 *          resident per SM as the occupancy calculator finds them from the
 *          block's threads, the function's registers and its static and
 *          dynamic shared memory (launch.c's sim_blocks_per_sm); the wave
 *          time is the table's for the kernel's name, else
 *          SIMGPU_KERNEL_WAVE_NS.
 *
 * A GPU runs a grid in waves of resident blocks, and each wave of a kernel
 * whose threads each do a fixed amount of work (elementwise, reductions'
 * first pass, most of a framework's kernels) takes about the same time; so
 * the model is proportional to the tensor a kernel covers.  What a launch
 * does not show is the work of a block that loops (a tiled GEMM's or
 * convolution's K dimension, a persistent kernel): the table gives such
 * kernels, by a substring of their names, a wave time of their own.
 *
 * Lock: the settings are written by cuInit's thread under sim_p.lock before
 * cuInit is published (the release store of sim_p.initialized) and only
 * read after; a function's wave time is written and read under sim_p.lock
 * (sim_kernel_duration is called from the launch, which holds it).
 */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_MAX_RULES 64
#define SIM_MAX_DURATION (3600ull * 1000000000ull)   /* SIMGPU_KERNEL_NS's limit */

struct sim_kernel_rule {
    char substr[128];
    uint64_t wave_ns;
};

/* ---- settings --------------------------------------------------------------- */

/* One "<substring> <ns per wave>" line (blank lines and # comments are
 * skipped); 1 on a rule, 0 on nothing, -1 on a line that is neither. */
static int parse_rule(char *line, struct sim_kernel_rule *r)
{
    char *p = line + strspn(line, " \t");
    if (!*p || *p == '\n' || *p == '#')
        return 0;
    size_t n = strcspn(p, " \t\n");
    if (n == 0 || n >= sizeof r->substr)
        return -1;
    memcpy(r->substr, p, n);
    r->substr[n] = '\0';
    p += n;
    p += strspn(p, " \t");
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || errno || v == 0 || v > SIM_MAX_DURATION)
        return -1;
    end += strspn(end, " \t\n");
    if (*end && *end != '#')
        return -1;
    r->wave_ns = v;
    return 1;
}

static void read_table(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        sim_note("SIMGPU_KERNEL_TABLE=%s: %s; no table", path, strerror(errno));
        return;
    }
    struct sim_kernel_rule *rules = calloc(SIM_MAX_RULES, sizeof *rules);
    char line[512];
    int n = 0, lineno = 0;
    while (rules && fgets(line, sizeof line, f)) {
        lineno++;
        if (n == SIM_MAX_RULES) {
            sim_note("SIMGPU_KERNEL_TABLE=%s: more than %d rules; line %d on ignored",
                     path, SIM_MAX_RULES, lineno);
            break;
        }
        int k = parse_rule(line, &rules[n]);
        if (k < 0)
            sim_note("SIMGPU_KERNEL_TABLE=%s:%d is not '<name substring> <ns per wave>' "
                     "(ns from 1 to 3600e9): ignored", path, lineno);
        n += k > 0;
    }
    fclose(f);
    if (!rules)
        sim_note("SIMGPU_KERNEL_TABLE=%s: out of memory; no table", path);
    sim_p.rules = rules;
    sim_p.nrules = rules ? n : 0;
}

void sim_kernel_model_init(void)
{
    sim_p.kernel_ns = sim_env_u64("SIMGPU_KERNEL_NS", SIM_DEFAULT_KERNEL_NS,
                                  SIM_MAX_DURATION, NULL);
    sim_p.wave_ns = sim_env_u64("SIMGPU_KERNEL_WAVE_NS", 0, SIM_MAX_DURATION, NULL);
    sim_p.launch_ns = sim_env_u64("SIMGPU_KERNEL_LAUNCH_NS", SIM_DEFAULT_LAUNCH_NS,
                                  SIM_MAX_DURATION, NULL);
    sim_p.queue_depth = sim_env_u64("SIMGPU_QUEUE_DEPTH", SIM_QUEUE_MAX, SIM_QUEUE_MAX, NULL);
    const char *table = getenv("SIMGPU_KERNEL_TABLE");
    if (table && *table && !sim_p.rules) {
        if (sim_p.wave_ns)
            read_table(table);
        else
            sim_note("SIMGPU_KERNEL_TABLE is set but SIMGPU_KERNEL_WAVE_NS is not: the "
                     "fixed model (SIMGPU_KERNEL_NS) ignores the table");
    }
}

/* ---- durations -------------------------------------------------------------- */

/* The first rule whose substring the name contains; else the default. */
static uint64_t wave_ns_of(sim_func_t *f)
{
    if (!f->wave_known) {
        f->wave_ns = sim_p.wave_ns;
        for (int i = 0; i < sim_p.nrules; i++) {
            if (f->name && strstr(f->name, sim_p.rules[i].substr)) {
                f->wave_ns = sim_p.rules[i].wave_ns;
                break;
            }
        }
        f->wave_known = 1;
    }
    return f->wave_ns;
}

uint64_t sim_kernel_duration(sim_func_t *f, const unsigned grid[3], const unsigned block[3],
                             unsigned shmem)
{
    if (!sim_p.wave_ns)
        return sim_p.kernel_ns;
    /* check_dims bounds them: blocks < 2^63, threads <= 1024. */
    uint64_t blocks = (uint64_t)grid[0] * grid[1] * grid[2];
    int threads = (int)(block[0] * block[1] * block[2]);
    uint64_t resident = (uint64_t)sim_blocks_per_sm(f, threads, shmem) * SIM_SMS;
    if (resident == 0)                  /* a block that fits no SM: one at a time */
        resident = 1;
    uint64_t waves = blocks / resident + (blocks % resident != 0);
    uint64_t wave = wave_ns_of(f);
    if (waves > (SIM_MAX_DURATION - sim_p.launch_ns) / wave)
        return SIM_MAX_DURATION;
    return sim_p.launch_ns + waves * wave;
}
