/* src/bench/gemm_cuda_none.c: the GPU GEMM benchmark in a build without CUDA. */
#include <stdio.h>

#include "src/bench/gemm_cuda.h"

int adapt_bench_gemm_cuda(const int64_t *shapes, int n_shapes, double min_s, int repeats,
                          struct adapt_bench_timing *out, int cap, char *device, size_t dlen,
                          char *why, size_t wlen)
{
    (void)shapes, (void)n_shapes, (void)min_s, (void)repeats, (void)out, (void)cap;
    if (device && dlen) device[0] = 0;
    if (why && wlen) snprintf(why, wlen, "no GPU: this build has no CUDA (configure --with-cuda)");
    return -1;
}

int adapt_bench_quant_cuda(const struct quant_spec *spec, const size_t *sizes, int nsizes,
                           double min_s, double *gb, char *device, size_t dlen, char *why,
                           size_t wlen)
{
    (void)spec, (void)sizes, (void)nsizes, (void)min_s, (void)gb;
    if (device && dlen) device[0] = 0;
    if (why && wlen) snprintf(why, wlen, "no GPU: this build has no CUDA (configure --with-cuda)");
    return -1;
}
