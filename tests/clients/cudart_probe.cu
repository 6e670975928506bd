/*
 * cudart_probe.cu - the smallest real CUDA runtime client: cudaGetDeviceCount.
 * Linked with -cudart shared, it makes libcudart resolve its whole driver
 * table through cuGetProcAddress, which is what the interception test
 * watches.  Prints the runtime's answer; exits 0 on success, 2 on an error
 * (over simgpu: the runtime stops at cuGetExportTable, which simgpu refuses).
 */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    int count = -1;
    cudaError_t err = cudaGetDeviceCount(&count);
    printf("{\"error\":%d,\"name\":\"%s\",\"count\":%d}\n", (int)err, cudaGetErrorName(err), count);
    return err == cudaSuccess ? 0 : 2;
}
