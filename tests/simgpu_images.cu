// Device code for test_simgpu_image: one kernel and variables of each kind,
// built by tests/sim.mk for several architectures and containers (cubins,
// PTX, plain and compressed fatbins, a host object and an archive).
__device__ float img_table[4] = { 1.5f, 2.5f, 3.5f, 4.5f };
__constant__ int img_const = 7;
__managed__ int img_managed;
__device__ int img_zero[16];

extern "C" __global__ void img_kernel(float *out, int n, double scale)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = (float)scale * img_table[i % 4] + img_const + img_managed + img_zero[i % 16];
}
