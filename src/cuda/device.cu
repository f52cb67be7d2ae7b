/* src/cuda/device.cu: device query for builds with CUDA. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "src/cuda/device.h"

extern "C" int adapt_cuda_built(void) { return 1; }

extern "C" int adapt_cuda_device_count(char *desc, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        if (desc && len) snprintf(desc, len, "no CUDA device (%s)", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) == cudaSuccess && desc && len) {
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        snprintf(desc, len, "%s, sm_%d%d, %.1f GiB, %d SMs, driver %d.%d, runtime %d.%d", p.name,
                 p.major, p.minor, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0),
                 p.multiProcessorCount, drv / 1000, (drv % 1000) / 10, rt / 1000, (rt % 1000) / 10);
    }
    return n;
}
