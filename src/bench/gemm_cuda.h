/* src/bench/gemm_cuda.h: the GPU half of `adapt-bench gemm` (cuBLAS fp32,
 * tf32, fp16 tensor cores; int8 through cublasLt; element-wise kernels).
 *
 * Compiled from gemm_cuda.cu when configure found the CUDA toolkit, from
 * gemm_cuda_none.c otherwise. Without a usable device the call returns -1
 * and says why; the benchmark then reports "no GPU" and skips.
 *
 *   struct adapt_bench_timing t[64];
 *   char dev[256], why[256];
 *   int n = adapt_bench_gemm_cuda(shapes, 3, 0.2, 3, t, 64, dev, sizeof dev, why, sizeof why);
 *
 * Ownership: the caller owns every array.
 */
#ifndef ADAPT_BENCH_GEMM_CUDA_H
#define ADAPT_BENCH_GEMM_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One measurement: a GEMM (m, n, k > 0) or an element-wise pass (elements > 0). */
struct adapt_bench_timing {
    char type[8];   /* "fp32", "tf32", "fp16", "bf16", "int8", "int16" */
    char impl[48];  /* "cublas-sgemm", "cublaslt-int8", ... */
    int64_t m, n, k;
    int64_t elements;
    double seconds; /* median seconds per call */
};

/* Times every shape (rows of m, n, k) for each GPU type, and the element-wise
 * kernels; writes at most cap timings and returns their number, or -1 with
 * why set (no device, no CUDA in this build, a CUDA or cuBLAS error).
 * device gets a one-line description of the GPU, driver and runtime. */
int adapt_bench_gemm_cuda(const int64_t *shapes, int n_shapes, double min_s, int repeats,
                          struct adapt_bench_timing *out, int cap, char *device, size_t dlen,
                          char *why, size_t wlen);

/* adapt-bench quant --device cuda: quant_cuda_rows_on as the GPU engine calls it for a weight
 * copy (one row of n elements, no mask, counted into device counters, queued on the stream with
 * scratch allocated once) against a device-to-device cudaMemcpyAsync of the same n floats, in
 * one run; gb[2 i] = rounding GB/s, gb[2 i + 1] = copy GB/s for size i and spec
 * (8 bytes per element: one float read, one written), best of 5 batches of about min_s
 * seconds. Returns 0, or -1 with why set. */
struct quant_spec;
int adapt_bench_quant_cuda(const struct quant_spec *spec, const size_t *sizes, int nsizes,
                           double min_s, double *gb, char *device, size_t dlen, char *why,
                           size_t wlen);

#ifdef __cplusplus
}
#endif
#endif
