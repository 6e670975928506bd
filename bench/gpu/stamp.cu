/*
 * stamp.cu - the fixed-work kernel of bench/gpu/check.sh's overlap step.
 *
 * salus_stamp does a fixed amount of arithmetic per thread (iters dependent
 * multiply-adds), so that its run time stretches when another process's
 * kernels share the GPU with it; salus_spin, which spins until a wall-clock
 * time has passed, would finish on time whether or not it was interleaved
 * with a peer.  Thread 0 of each block writes the block's start and end
 * (%globaltimer, ns, one clock for every context of the GPU) to
 * out[2 * block] and out[2 * block + 1]: the host takes a launch's interval
 * as its blocks' earliest start and latest end.  Launched with enough
 * blocks to fill every SM.
 */

extern "C" __global__ void salus_stamp(unsigned long long iters, unsigned long long *out)
{
    unsigned long long t0, t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    float x = threadIdx.x * 1e-3f, y = 1.0f;
    for (unsigned long long i = 0; i < iters; i++) {
        x = fmaf(x, 0.999f, y);
        y = fmaf(y, 0.5f, 1e-3f);
    }
    __syncthreads();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = t0;
        out[2 * blockIdx.x + 1] = t1;
    }
    if (x == -1.0f)             /* never: keeps the loop's result alive */
        out[0] = 0;
}
