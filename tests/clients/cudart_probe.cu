/*
 * cudart_probe.cu - the smallest real CUDA runtime client.  Linked with
 * -cudart shared, it makes libcudart resolve its whole driver table through
 * cuGetProcAddress, which is what the interception test watches; then it
 * does a little work through the runtime: one allocation of 1 MiB, a copy
 * there and back (the bytes checked), PROBE_LAUNCHES launches of
 * probe_kernel and a device synchronize, one free.  Prints one JSON line of
 * what it did (the runtime's error, the device count, the work); exits 0 on
 * success, 2 on an error.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define PROBE_LAUNCHES 5
#define PROBE_BYTES (1 << 20)

extern "C" __global__ void probe_kernel(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

static unsigned char host[PROBE_BYTES], back[PROBE_BYTES];

static cudaError_t work(void)
{
    float *d;
    cudaError_t err;
    for (int i = 0; i < PROBE_BYTES; i++)
        host[i] = (unsigned char)(i * 13);
    if ((err = cudaMalloc(&d, PROBE_BYTES)) ||
        (err = cudaMemcpy(d, host, PROBE_BYTES, cudaMemcpyHostToDevice)) ||
        (err = cudaMemcpy(back, d, PROBE_BYTES, cudaMemcpyDeviceToHost)))
        return err;
    if (memcmp(host, back, PROBE_BYTES))
        return cudaErrorUnknown;
    for (int i = 0; i < PROBE_LAUNCHES; i++) {
        probe_kernel<<<PROBE_BYTES / 4 / 256, 256>>>(d, PROBE_BYTES / 4);
        if ((err = cudaGetLastError()))
            return err;
    }
    if ((err = cudaDeviceSynchronize()))
        return err;
    return cudaFree(d);
}

int main(void)
{
    int count = -1;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess)
        err = work();
    printf("{\"error\":%d,\"name\":\"%s\",\"count\":%d,\"launches\":%d,\"allocs\":1,"
           "\"frees\":1,\"bytes\":%d}\n", (int)err, cudaGetErrorName(err), count,
           PROBE_LAUNCHES, PROBE_BYTES);
    return err == cudaSuccess ? 0 : 2;
}
