/*
 * rt_client.cu - a CUDA runtime program for simgpu's runtime tests
 * (test_simgpu_rt), built three ways: linked with -cudart shared
 * (rt_shared), with -cudart static (rt_static), and with PTX only
 * (rt_ptx: the driver is handed PTX to JIT).
 *
 *   rt_client <mode>
 *
 * Modes:
 *   basic    cudaFree(0), memory (device, pinned, stream-ordered), copies
 *            both ways and on the device, a memset, a __device__ variable
 *            written and read through its symbol, kernel launches on the
 *            legacy stream and a stream, events, device properties;
 *   reset    basic, cudaDeviceReset, basic again in the new context;
 *   threads  basic's copies and launches in 4 threads at once, each on its
 *            own stream and memory.
 * Every check reads data back through the host, moved by copies only:
 * simgpu's kernels compute nothing, so what a kernel would have written is
 * never checked.  Prints one JSON line ("ok":1, the launches made, the
 * device's name) and exits 0; a failed call or check prints what failed and
 * exits 2.
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096
#define THREADS 4

/* Doubles x on a GPU; on simgpu it runs for SIMGPU_KERNEL_NS and computes
 * nothing. */
extern "C" __global__ void rt_scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= a;
}

__device__ float rt_table[16];

static int launches;                    /* under launch_lock */
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;

#define CK(x) do { \
        cudaError_t e_ = (x); \
        if (e_ != cudaSuccess) { \
            printf("{\"ok\":0,\"call\":\"%s\",\"line\":%d,\"error\":%d,\"name\":\"%s\"}\n", \
                   #x, __LINE__, (int)e_, cudaGetErrorName(e_)); \
            exit(2); \
        } \
    } while (0)
#define CHECK(cond) do { \
        if (!(cond)) { \
            printf("{\"ok\":0,\"check\":\"%s\",\"line\":%d}\n", #cond, __LINE__); \
            exit(2); \
        } \
    } while (0)

static void launch(float *d, cudaStream_t s)
{
    rt_scale<<<N / 256, 256, 0, s>>>(d, 2.0f, N);
    CK(cudaGetLastError());
    pthread_mutex_lock(&launch_lock);
    launches++;
    pthread_mutex_unlock(&launch_lock);
}

static void fill(float *h, float base)
{
    for (int i = 0; i < N; i++)
        h[i] = base + (float)i;
}

/* Host -> device -> device -> host on stream s, the bytes checked. */
static void copies(cudaStream_t s, float base)
{
    static __thread float h[N], back[N];
    float *a, *b;
    fill(h, base);
    CK(cudaMalloc(&a, sizeof h));
    CK(cudaMalloc(&b, sizeof h));
    CK(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(b, a, sizeof h, cudaMemcpyDeviceToDevice, s));
    launch(a, s);
    CK(cudaMemcpyAsync(back, b, sizeof back, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    CHECK(memcmp(h, back, sizeof h) == 0);
    CK(cudaFree(a));
    CK(cudaFree(b));
}

static void basic(void)
{
    CK(cudaFree(0));                    /* starts the runtime */
    int count = 0, dev = -1;
    CK(cudaGetDeviceCount(&count));
    CHECK(count >= 1);
    CK(cudaGetDevice(&dev));
    CHECK(dev == 0);
    size_t free0 = 0, total = 0;
    CK(cudaMemGetInfo(&free0, &total));
    CHECK(free0 > 0 && free0 <= total);

    /* The legacy stream, synchronous copies, a memset. */
    float *d, *h;
    CK(cudaMalloc(&d, N * sizeof(float)));
    CK(cudaMallocHost(&h, N * sizeof(float)));
    fill(h, 1.0f);
    CK(cudaMemcpy(d, h, N * sizeof(float), cudaMemcpyHostToDevice));
    launch(d, 0);
    CK(cudaDeviceSynchronize());
    memset(h, 0, N * sizeof(float));
    CK(cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(h[0] == 1.0f && h[N - 1] == (float)N);
    CK(cudaMemset(d, 0x3f, N * sizeof(float)));
    CK(cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost));
    unsigned char *bytes = (unsigned char *)h;
    CHECK(bytes[0] == 0x3f && bytes[N * sizeof(float) - 1] == 0x3f);

    /* A module variable, through its symbol. */
    float table[16], got[16];
    for (int i = 0; i < 16; i++)
        table[i] = 0.5f * (float)i;
    CK(cudaMemcpyToSymbol(rt_table, table, sizeof table));
    CK(cudaMemcpyFromSymbol(got, rt_table, sizeof got));
    CHECK(memcmp(table, got, sizeof table) == 0);
    void *sym = NULL;
    CK(cudaGetSymbolAddress(&sym, rt_table));
    CHECK(sym != NULL);

    /* A stream, events, stream-ordered memory. */
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, s));
    copies(s, 7.0f);
    float *pooled;
    CK(cudaMallocAsync(&pooled, 1 << 20, s));
    launch(pooled, s);
    CK(cudaFreeAsync(pooled, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms = -1;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CHECK(ms >= 0);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
}

static void *thread_main(void *arg)
{
    int i = (int)(long)arg;
    cudaStream_t s;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&s));
    for (int round = 0; round < 3; round++)
        copies(s, 100.0f * (float)(i * 3 + round));
    CK(cudaStreamDestroy(s));
    return NULL;
}

static void threads(void)
{
    pthread_t t[THREADS];
    CK(cudaFree(0));
    for (long i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CK(cudaDeviceSynchronize());
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (!strcmp(mode, "basic")) {
        basic();
    } else if (!strcmp(mode, "reset")) {
        basic();
        CK(cudaDeviceReset());
        basic();
        CK(cudaDeviceReset());
    } else if (!strcmp(mode, "threads")) {
        threads();
    } else {
        fprintf(stderr, "rt_client: unknown mode %s (basic, reset, threads)\n", mode);
        return 2;
    }
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("{\"ok\":1,\"mode\":\"%s\",\"launches\":%d,\"major\":%d,\"minor\":%d,\"name\":\"%s\"}\n",
           mode, launches, p.major, p.minor, p.name);
    return 0;
}
