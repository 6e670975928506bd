/*
 * initclient.c - cuInit(0), linked to libcuda, and nothing else: for the runs
 * of test_intercept_load over a fake driver (which has only a few exports) or
 * none.  Prints {"rc":N}; exits 0 on success, 3 otherwise.
 */
#include <cuda.h>
#include <stdio.h>

int main(void)
{
    CUresult rc = cuInit(0);
    printf("{\"rc\":%d}\n", (int)rc);
    return rc == CUDA_SUCCESS ? 0 : 3;
}
