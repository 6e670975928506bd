/*
 * presets.c - the models salus-train can imitate with --preset NAME.
 *
 * A row gives a training job's figures: GPU time and kernel launches per
 * iteration, persistent memory (weights, gradients, optimizer state),
 * per-iteration memory (activations, workspace), host time per iteration
 * and the job's length.  salus-train turns them into its options (kernel-us
 * = iter_ms / salus_spin kernels per iteration); options given on the
 * command line override them.
 *
 * Every row names the source of its figures in a comment and in .source.
 * Rows for the paper's models (vgg16, resnet50, inception, ...: batch size,
 * measured iteration time on a known GPU, nvidia-smi memory) belong here
 * when the benchmarks need them; the rows below are for tests and the demo.
 */
#include "wl.h"

#include <string.h>

#define MiB (1024ull * 1024)

static const wl_preset_t presets[] = {
    /* Test fixture, not a model: short iterations with every kind of
     * memory, small enough for a loaded 2-core CI machine. */
    { .name = "tiny", .iter_ms = 5, .kernels = 10, .mem = 64 * MiB, .iter_mem = 16 * MiB,
      .host_ms = 1, .iterations = 20, .source = "test fixture" },
    /* What make demo runs: two of these share the GPU for a few seconds. */
    { .name = "demo", .iter_ms = 20, .kernels = 20, .mem = 512 * MiB, .iter_mem = 128 * MiB,
      .host_ms = 2, .iterations = 60, .source = "demo fixture" },
};

const wl_preset_t *wl_preset_find(const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

void wl_preset_list(FILE *f)
{
    char mem[32], iter[32];
    fprintf(f, "%-12s %9s %8s %9s %9s %8s %6s  %s\n", "preset", "iter_ms", "kernels",
            "mem", "iter_mem", "host_ms", "iters", "source");
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const wl_preset_t *p = &presets[i];
        fprintf(f, "%-12s %9.2f %8lld %9s %9s %8.2f %6lld  %s\n", p->name, p->iter_ms,
                p->kernels, wl_fmt_size(p->mem, mem, sizeof mem),
                wl_fmt_size(p->iter_mem, iter, sizeof iter), p->host_ms, p->iterations,
                p->source);
    }
}
