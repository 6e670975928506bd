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

    /* ---- the paper's training workloads (Salus, MLSys 2020, its workload
     * table: 15 models at 3 batch sizes each), used by bench/.
     *
     * The CNNs' figures come from the Salus authors' own measurements on
     * their testbed (an NVIDIA P100, 16 GB, TensorFlow 1.x), published in
     * their repository (SymbioticLab/Salus, tests/workloads.csv: for each
     * model_batch, the JCT and iteration count of runs sized to 1, 5 and
     * 10 minutes, and the peak GPU memory in MiB):
     *   iteration time = (JCT_10min - JCT_1min) / (iters_10min - iters_1min),
     *     which removes the fixed start-up time of a run;
     *   host_ms = 5% of it, iter_ms the other 95% (an assumption: these jobs
     *     read synthetic data, so the GPU is busy nearly all the time);
     *   mem (persistent) = parameters x 4 B (fp32 weights) for the
     *     tf_cnn_benchmarks models, whose variables live on the CPU
     *     parameter server, and x 12 B (weights, gradients, Adam slot) for
     *     VGG, trained on the GPU by Salus's test_vgg.py (its VGG16 figure,
     *     1.66 GB persistent, matches); parameter counts from the models'
     *     papers, cited per model;
     *   iter_mem = peak - mem (activations, gradients, workspace);
     *   iterations = one minute of training at that iteration time (the
     *     paper's jobs last 1, 5 or 10 minutes: bench scales this);
     *   kernels = about 3 per layer (forward, backward data, backward
     *     weights): far fewer than TensorFlow launches, enough for the
     *     boundary detector and the engine's interleaving. */
    /* vgg11: VGG-A, Simonyan & Zisserman 2015: 133M parameters x 12 B; 40 kernels. */
    { .name = "vgg11_25", .iter_ms = 164.57, .kernels = 40, .mem = 1521 * MiB,
      .iter_mem = 5094 * MiB, .host_ms = 8.66, .iterations = 346,
      .source = "Salus csv 600.8s/3440it-63.1s/336it, peak 6615M" },
    { .name = "vgg11_50", .iter_ms = 289.74, .kernels = 40, .mem = 1521 * MiB,
      .iter_mem = 8217 * MiB, .host_ms = 15.25, .iterations = 197,
      .source = "Salus csv 597.3s/1941it-62.6s/188it, peak 9738M" },
    { .name = "vgg11_100", .iter_ms = 517.91, .kernels = 40, .mem = 1521 * MiB,
      .iter_mem = 11289 * MiB, .host_ms = 27.26, .iterations = 110,
      .source = "Salus csv 596.5s/1082it-62.2s/102it, peak 12810M" },
    /* vgg16: VGG-D, Simonyan & Zisserman 2015: 138M parameters x 12 B; 56 kernels. */
    { .name = "vgg16_25", .iter_ms = 285.28, .kernels = 56, .mem = 1584 * MiB,
      .iter_mem = 5030 * MiB, .host_ms = 15.01, .iterations = 200,
      .source = "Salus csv 600.2s/1979it-63.3s/191it, peak 6614M" },
    { .name = "vgg16_50", .iter_ms = 518.06, .kernels = 56, .mem = 1584 * MiB,
      .iter_mem = 8154 * MiB, .host_ms = 27.27, .iterations = 110,
      .source = "Salus csv 579.6s/1050it-61.5s/100it, peak 9738M" },
    { .name = "vgg16_100", .iter_ms = 948.14, .kernels = 56, .mem = 1584 * MiB,
      .iter_mem = 11378 * MiB, .host_ms = 49.90, .iterations = 60,
      .source = "Salus csv 597.6s/590it-62.6s/54it, peak 12962M" },
    /* vgg19: VGG-E, Simonyan & Zisserman 2015: 144M parameters x 12 B; 64 kernels. */
    { .name = "vgg19_25", .iter_ms = 340.31, .kernels = 64, .mem = 1645 * MiB,
      .iter_mem = 4969 * MiB, .host_ms = 17.91, .iterations = 167,
      .source = "Salus csv 601.3s/1660it-64.0s/160it, peak 6614M" },
    { .name = "vgg19_50", .iter_ms = 614.50, .kernels = 64, .mem = 1645 * MiB,
      .iter_mem = 8093 * MiB, .host_ms = 32.34, .iterations = 93,
      .source = "Salus csv 598.0s/913it-63.0s/86it, peak 9738M" },
    { .name = "vgg19_100", .iter_ms = 1114.34, .kernels = 64, .mem = 1645 * MiB,
      .iter_mem = 10905 * MiB, .host_ms = 58.65, .iterations = 51,
      .source = "Salus csv 594.3s/499it-61.8s/45it, peak 12550M" },
    /* resnet50: He et al. 2016: 25.6M parameters x 4 B; 160 kernels. */
    { .name = "resnet50_25", .iter_ms = 118.54, .kernels = 160, .mem = 98 * MiB,
      .iter_mem = 2006 * MiB, .host_ms = 6.24, .iterations = 481,
      .source = "Salus csv 608.1s/4723it-77.6s/471it, peak 2104M" },
    { .name = "resnet50_50", .iter_ms = 214.83, .kernels = 160, .mem = 98 * MiB,
      .iter_mem = 3908 * MiB, .host_ms = 11.31, .iterations = 265,
      .source = "Salus csv 622.9s/2665it-80.2s/265it, peak 4006M" },
    { .name = "resnet50_75", .iter_ms = 308.34, .kernels = 160, .mem = 98 * MiB,
      .iter_mem = 5809 * MiB, .host_ms = 16.23, .iterations = 185,
      .source = "Salus csv 622.7s/1850it-82.0s/184it, peak 5907M" },
    /* resnet101: He et al. 2016: 44.5M parameters x 4 B; 310 kernels. */
    { .name = "resnet101_25", .iter_ms = 204.35, .kernels = 310, .mem = 170 * MiB,
      .iter_mem = 3055 * MiB, .host_ms = 10.76, .iterations = 279,
      .source = "Salus csv 630.9s/2776it-93.2s/276it, peak 3225M" },
    { .name = "resnet101_50", .iter_ms = 361.78, .kernels = 310, .mem = 170 * MiB,
      .iter_mem = 5933 * MiB, .host_ms = 19.04, .iterations = 158,
      .source = "Salus csv 633.2s/1565it-96.2s/155it, peak 6103M" },
    { .name = "resnet101_75", .iter_ms = 550.49, .kernels = 310, .mem = 170 * MiB,
      .iter_mem = 8811 * MiB, .host_ms = 28.97, .iterations = 104,
      .source = "Salus csv 670.0s/1095it-98.0s/108it, peak 8981M" },
    /* resnet152: He et al. 2016: 60.2M parameters x 4 B; 460 kernels. */
    { .name = "resnet152_25", .iter_ms = 292.92, .kernels = 460, .mem = 230 * MiB,
      .iter_mem = 4317 * MiB, .host_ms = 15.42, .iterations = 195,
      .source = "Salus csv 641.6s/1922it-107.9s/191it, peak 4547M" },
    { .name = "resnet152_50", .iter_ms = 515.47, .kernels = 460, .mem = 230 * MiB,
      .iter_mem = 8404 * MiB, .host_ms = 27.13, .iterations = 111,
      .source = "Salus csv 651.1s/1103it-111.7s/109it, peak 8634M" },
    { .name = "resnet152_75", .iter_ms = 744.69, .kernels = 460, .mem = 230 * MiB,
      .iter_mem = 12488 * MiB, .host_ms = 39.19, .iterations = 77,
      .source = "Salus csv 655.6s/766it-113.9s/75it, peak 12718M" },
    /* googlenet: Szegedy et al. 2015: 6.8M parameters x 4 B; 180 kernels. */
    { .name = "googlenet_25", .iter_ms = 55.58, .kernels = 180, .mem = 26 * MiB,
      .iter_mem = 717 * MiB, .host_ms = 2.93, .iterations = 1026,
      .source = "Salus csv 608.4s/10168it-72.9s/1015it, peak 743M" },
    { .name = "googlenet_50", .iter_ms = 95.15, .kernels = 180, .mem = 26 * MiB,
      .iter_mem = 1373 * MiB, .host_ms = 5.01, .iterations = 599,
      .source = "Salus csv 609.7s/5939it-74.2s/593it, peak 1399M" },
    { .name = "googlenet_100", .iter_ms = 170.88, .kernels = 180, .mem = 26 * MiB,
      .iter_mem = 2505 * MiB, .host_ms = 8.99, .iterations = 334,
      .source = "Salus csv 616.0s/3332it-76.4s/332it, peak 2531M" },
    /* alexnet: Krizhevsky et al. 2012: 61M parameters x 4 B; 30 kernels. */
    { .name = "alexnet_25", .iter_ms = 51.92, .kernels = 30, .mem = 233 * MiB,
      .iter_mem = 398 * MiB, .host_ms = 2.73, .iterations = 1098,
      .source = "Salus csv 560.7s/10168it-60.5s/1016it, peak 631M" },
    { .name = "alexnet_50", .iter_ms = 54.04, .kernels = 30, .mem = 233 * MiB,
      .iter_mem = 830 * MiB, .host_ms = 2.84, .iterations = 1055,
      .source = "Salus csv 626.4s/10908it-67.8s/1089it, peak 1063M" },
    { .name = "alexnet_100", .iter_ms = 57.67, .kernels = 30, .mem = 233 * MiB,
      .iter_mem = 1007 * MiB, .host_ms = 3.04, .iterations = 988,
      .source = "Salus csv 616.4s/9999it-70.1s/999it, peak 1240M" },
    /* overfeat: Sermanet et al. 2014, fast model: 145M parameters x 4 B; 30 kernels. */
    { .name = "overfeat_25", .iter_ms = 128.73, .kernels = 30, .mem = 553 * MiB,
      .iter_mem = 2702 * MiB, .host_ms = 6.78, .iterations = 443,
      .source = "Salus csv 653.2s/4723it-77.1s/471it, peak 3255M" },
    { .name = "overfeat_50", .iter_ms = 135.96, .kernels = 30, .mem = 553 * MiB,
      .iter_mem = 2864 * MiB, .host_ms = 7.16, .iterations = 419,
      .source = "Salus csv 621.0s/4254it-72.9s/424it, peak 3416M" },
    { .name = "overfeat_100", .iter_ms = 147.28, .kernels = 30, .mem = 553 * MiB,
      .iter_mem = 5631 * MiB, .host_ms = 7.75, .iterations = 387,
      .source = "Salus csv 623.4s/3920it-76.2s/391it, peak 6184M" },
    /* inception3: Szegedy et al. 2016: 23.8M parameters x 4 B; 300 kernels. */
    { .name = "inception3_25", .iter_ms = 188.25, .kernels = 300, .mem = 91 * MiB,
      .iter_mem = 2388 * MiB, .host_ms = 9.91, .iterations = 303,
      .source = "Salus csv 641.6s/3075it-92.9s/306it, peak 2479M" },
    { .name = "inception3_50", .iter_ms = 342.53, .kernels = 300, .mem = 91 * MiB,
      .iter_mem = 4704 * MiB, .host_ms = 18.03, .iterations = 166,
      .source = "Salus csv 639.1s/1674it-95.4s/166it, peak 4794M" },
    { .name = "inception3_100", .iter_ms = 649.19, .kernels = 300, .mem = 91 * MiB,
      .iter_mem = 9299 * MiB, .host_ms = 34.17, .iterations = 88,
      .source = "Salus csv 638.6s/874it-100.1s/86it, peak 9390M" },
    /* inception4: Szegedy et al. 2017: 42.7M parameters x 4 B; 450 kernels. */
    { .name = "inception4_25", .iter_ms = 384.70, .kernels = 450, .mem = 163 * MiB,
      .iter_mem = 4272 * MiB, .host_ms = 20.25, .iterations = 148,
      .source = "Salus csv 650.4s/1487it-107.8s/147it, peak 4435M" },
    { .name = "inception4_50", .iter_ms = 691.59, .kernels = 450, .mem = 163 * MiB,
      .iter_mem = 8366 * MiB, .host_ms = 36.40, .iterations = 82,
      .source = "Salus csv 654.0s/824it-113.1s/81it, peak 8529M" },
    { .name = "inception4_75", .iter_ms = 1002.32, .kernels = 450, .mem = 163 * MiB,
      .iter_mem = 12448 * MiB, .host_ms = 52.75, .iterations = 57,
      .source = "Salus csv 658.8s/568it-117.5s/55it, peak 12611M" },
    /* speech (Fathom's DeepSpeech, batch 25/50/75): no published per-
     * iteration figure was found.  ESTIMATE: about 30M parameters x 12 B
     * (weights, gradients, Adam slot on the GPU); iteration time and
     * activations scaled with the batch like resnet50's rows; host 10%. */
    { .name = "speech_25", .iter_ms = 135.00, .kernels = 300, .mem = 343 * MiB,
      .iter_mem = 1536 * MiB, .host_ms = 15.00, .iterations = 400,
      .source = "estimate: 30M params, scaled like resnet50" },
    { .name = "speech_50", .iter_ms = 252.00, .kernels = 300, .mem = 343 * MiB,
      .iter_mem = 3072 * MiB, .host_ms = 28.00, .iterations = 214,
      .source = "estimate: 30M params, scaled like resnet50" },
    { .name = "speech_75", .iter_ms = 369.00, .kernels = 300, .mem = 343 * MiB,
      .iter_mem = 4608 * MiB, .host_ms = 41.00, .iterations = 146,
      .source = "estimate: 30M params, scaled like resnet50" },
    /* seq2seq (TensorFlow's PTB word LSTM, small/medium/large configs).
     * Memory: Salus's own admission figures for these jobs (its
     * tests/test_tf/test_seq.py: temporary 79.2M / 1.01G / 5.05G,
     * persistent 18M / 80M / 343.3M).  Time: 12 ms per batch for the small
     * network (2x200 LSTM, batch 20), as a published PyTorch log of the same
     * network shows; medium (2x650) and large (2x1500) ESTIMATED at 45 and
     * 150 ms (their FLOPs are 10.6x and 56x, at better GPU efficiency).
     * Host 30% (Python feed of every step). */
    { .name = "seq2seq_small", .iter_ms = 8.40, .kernels = 240, .mem = 18 * MiB,
      .iter_mem = 79 * MiB, .host_ms = 3.60, .iterations = 5000,
      .source = "Salus test_seq.py memory; 12 ms/batch published log" },
    { .name = "seq2seq_medium", .iter_ms = 31.50, .kernels = 420, .mem = 80 * MiB,
      .iter_mem = 1034 * MiB, .host_ms = 13.50, .iterations = 1333,
      .source = "Salus test_seq.py memory; time estimated from FLOPs" },
    { .name = "seq2seq_large", .iter_ms = 105.00, .kernels = 420, .mem = 343 * MiB,
      .iter_mem = 5171 * MiB, .host_ms = 45.00, .iterations = 400,
      .source = "Salus test_seq.py memory; time estimated from FLOPs" },
    /* vae (MNIST VAE, 784-500-500-20 MLP, batch 64/128/256): about 1.3M
     * parameters x 12 B (Adam); activations and workspace ESTIMATED at a few
     * MiB per 64 images.  GPU time ESTIMATED (a launch-bound MLP: 2-3 ms);
     * host time as long again (the Python feed), an assumption. */
    { .name = "vae_64", .iter_ms = 2.00, .kernels = 24, .mem = 16 * MiB,
      .iter_mem = 8 * MiB, .host_ms = 2.00, .iterations = 15000,
      .source = "estimate: 1.3M params, launch-bound MLP" },
    { .name = "vae_128", .iter_ms = 2.50, .kernels = 24, .mem = 16 * MiB,
      .iter_mem = 16 * MiB, .host_ms = 2.50, .iterations = 12000,
      .source = "estimate: 1.3M params, launch-bound MLP" },
    { .name = "vae_256", .iter_ms = 3.00, .kernels = 24, .mem = 16 * MiB,
      .iter_mem = 32 * MiB, .host_ms = 3.00, .iterations = 10000,
      .source = "estimate: 1.3M params, launch-bound MLP" },
    /* superres (ESPCN sub-pixel network, 32x32 -> 128x128, batch 32/64/128).
     * Memory: Salus's own admission figures (tests/test_tf/test_super_res.py:
     * temporary 252.8M / 500M / 993M, persistent 17.5M / 31.7M / 60.4M).
     * GPU time ESTIMATED from FLOPs (about 0.23 GFLOP per image for a
     * training step, at 30% of a P100's 9.3 TFLOP/s, plus launches).  Host
     * time 1.5x the GPU time (the GPU busy 40% of a step alone) is an
     * ASSUMPTION: the paper's point is that such small jobs leave the GPU
     * idle; the hyper-parameter experiment's gain from packing is bounded
     * by 1 / 0.4 = 2.5x on simgpu, which has one engine. */
    { .name = "superres_32", .iter_ms = 8.00, .kernels = 40, .mem = 18 * MiB,
      .iter_mem = 253 * MiB, .host_ms = 12.00, .iterations = 3000,
      .source = "Salus test_super_res.py memory; time estimated" },
    { .name = "superres_64", .iter_ms = 12.00, .kernels = 40, .mem = 32 * MiB,
      .iter_mem = 500 * MiB, .host_ms = 18.00, .iterations = 2000,
      .source = "Salus test_super_res.py memory; time estimated" },
    { .name = "superres_128", .iter_ms = 20.00, .kernels = 40, .mem = 60 * MiB,
      .iter_mem = 993 * MiB, .host_ms = 30.00, .iterations = 1200,
      .source = "Salus test_super_res.py memory; time estimated" },
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
