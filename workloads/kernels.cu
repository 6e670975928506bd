/*
 * kernels.cu - the device code of the workloads, built to a cubin and to PTX.
 *
 * salus_spin is the unit of GPU work of every workload: it keeps the GPU busy
 * for a given time, so that an iteration's GPU time is set by its parameters
 * rather than by the GPU model.  On a real GPU it spins on %globaltimer; on
 * simgpu a kernel of this name takes exactly its first parameter in ns.
 * The other kernels give the workloads a mix of kernel handles to launch, as a
 * real model's forward and backward passes do.
 */

extern "C" __global__ void salus_spin(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

extern "C" __global__ void salus_fill(float *dst, float value, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        dst[i] = value;
}

extern "C" __global__ void salus_axpy(float *y, const float *x, float a, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        y[i] += a * x[i];
}
