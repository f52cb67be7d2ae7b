/* src/bench/gemm_cuda.cu: GPU GEMM and element-wise timings for `adapt-bench gemm`.
 *
 * GEMMs are column-major C (m x n) = A (m x k) B (k x n):
 *   fp32  cublasGemmEx, CUBLAS_COMPUTE_32F (no TF32)
 *   tf32  cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores)
 *   fp16  cublasGemmEx, fp16 A, B, C with fp32 accumulation (tensor cores)
 *   bf16  cublasGemmEx, bf16 A, B, C with fp32 accumulation (tensor cores)
 *   int8  cublasLtMatmul, int8 A, B, int32 C, CUBLAS_COMPUTE_32I, A transposed
 *         (the "TN" form int8 kernels require); m, n, k padded up to multiples
 *         of 16 for the int8 alignment rules (the padded problem is timed)
 * Element-wise: y = max(a x + b, 0) over 2^26 elements in fp32, fp16 and int8
 * (int8: (a x + b) >> 8 clamped to [0, 127]).
 * Times are CUDA-event medians of `repeats` samples, each long enough to
 * last min_s, after one warm-up call. Reference: cuBLAS documentation,
 * cublasGemmEx and cublasLtMatmul.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "src/bench/gemm_cuda.h"
#include "src/cuda/device.h"
#include "src/quant/quant.h"

namespace {

__device__ __forceinline__ uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

__global__ void fill_f32(float *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (float)((int)(mix((uint32_t)i ^ seed) % 2001u) - 1000) * 1e-3f;
}

__global__ void fill_f16(__half *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2half((float)((int)(mix((uint32_t)i ^ seed) % 2001u) - 1000) * 1e-3f);
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16((float)((int)(mix((uint32_t)i ^ seed) % 2001u) - 1000) * 1e-3f);
}

__global__ void fill_i8(int8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (int8_t)(mix((uint32_t)i ^ seed) & 0xffu);
}

__global__ void ew_f32(const float *x, float *y, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = fmaxf(fmaf(x[i], a, b), 0.0f);
}

__global__ void ew_f16(const __half2 *x, __half2 *y, size_t n2, __half2 a, __half2 b)
{
    const __half2 z = __float2half2_rn(0.0f);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __hmax2(__hfma2(x[i], a, b), z);
}

__global__ void ew_i8(const char4 *x, char4 *y, size_t n4, int a, int b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        char4 v = x[i], r;
        r.x = (signed char)min(max((v.x * a + b) >> 8, 0), 127);
        r.y = (signed char)min(max((v.y * a + b) >> 8, 0), 127);
        r.z = (signed char)min(max((v.z * a + b) >> 8, 0), 127);
        r.w = (signed char)min(max((v.w * a + b) >> 8, 0), 127);
        y[i] = r;
    }
}

struct bench {
    cublasHandle_t h = nullptr;
    cublasLtHandle_t lt = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
    size_t cap_a = 0, cap_b = 0, cap_c = 0, ws_bytes = 32u << 20;
    int blocks = 1024;
    double min_s = 0.2;
    int repeats = 3;
    char *why = nullptr;
    size_t wlen = 0;

    bool cuda_ok(cudaError_t e, const char *what)
    {
        if (e == cudaSuccess) return true;
        snprintf(why, wlen, "%s: %s", what, cudaGetErrorString(e));
        return false;
    }
    bool blas_ok(cublasStatus_t s, const char *what)
    {
        if (s == CUBLAS_STATUS_SUCCESS) return true;
        snprintf(why, wlen, "%s: cuBLAS status %d", what, (int)s);
        return false;
    }
    bool reserve(void **p, size_t *cap, size_t bytes)
    {
        if (*cap >= bytes) return true;
        if (*p) cudaFree(*p);
        *p = nullptr;
        *cap = 0;
        if (!cuda_ok(cudaMalloc(p, bytes), "cudaMalloc")) return false;
        *cap = bytes;
        return true;
    }
    /* Median seconds per call of f (which returns false on error). */
    template <class F> bool time(F f, double *seconds)
    {
        if (!f() || !cuda_ok(cudaDeviceSynchronize(), "warm-up")) return false;
        float ms = 0;
        cudaEventRecord(e0);
        if (!f()) return false;
        cudaEventRecord(e1);
        if (!cuda_ok(cudaEventSynchronize(e1), "timing")) return false;
        cudaEventElapsedTime(&ms, e0, e1);
        double one = std::max(1e-6, (double)ms * 1e-3);
        int iters = (int)std::min(100000.0, std::max(1.0, std::ceil(min_s / one)));
        std::vector<double> v;
        for (int r = 0; r < repeats; r++) {
            cudaEventRecord(e0);
            for (int i = 0; i < iters; i++)
                if (!f()) return false;
            cudaEventRecord(e1);
            if (!cuda_ok(cudaEventSynchronize(e1), "timing")) return false;
            cudaEventElapsedTime(&ms, e0, e1);
            v.push_back((double)ms * 1e-3 / iters);
        }
        std::sort(v.begin(), v.end());
        *seconds = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
        return true;
    }
    void release()
    {
        if (a) cudaFree(a);
        if (b) cudaFree(b);
        if (c) cudaFree(c);
        if (ws) cudaFree(ws);
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        if (lt) cublasLtDestroy(lt);
        if (h) cublasDestroy(h);
    }
};

bool gemm_ex(bench &B, const char *type, int64_t m, int64_t n, int64_t k, double *s)
{
    cudaDataType_t dt = CUDA_R_32F;
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    size_t es = 4;
    if (!strcmp(type, "tf32")) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    if (!strcmp(type, "fp16")) dt = CUDA_R_16F, es = 2;
    if (!strcmp(type, "bf16")) dt = CUDA_R_16BF, es = 2;
    if (!B.reserve(&B.a, &B.cap_a, (size_t)(m * k) * 4) ||
        !B.reserve(&B.b, &B.cap_b, (size_t)(k * n) * 4) ||
        !B.reserve(&B.c, &B.cap_c, (size_t)(m * n) * 4))
        return false;
    if (es == 4) {
        fill_f32<<<B.blocks, 256>>>((float *)B.a, (size_t)(m * k), 1u);
        fill_f32<<<B.blocks, 256>>>((float *)B.b, (size_t)(k * n), 2u);
    } else if (dt == CUDA_R_16F) {
        fill_f16<<<B.blocks, 256>>>((__half *)B.a, (size_t)(m * k), 1u);
        fill_f16<<<B.blocks, 256>>>((__half *)B.b, (size_t)(k * n), 2u);
    } else {
        fill_bf16<<<B.blocks, 256>>>((__nv_bfloat16 *)B.a, (size_t)(m * k), 1u);
        fill_bf16<<<B.blocks, 256>>>((__nv_bfloat16 *)B.b, (size_t)(k * n), 2u);
    }
    if (!B.cuda_ok(cudaGetLastError(), "fill")) return false;
    const float alpha = 1.0f, beta = 0.0f;
    return B.time(
        [&]() {
            return B.blas_ok(cublasGemmEx(B.h, CUBLAS_OP_N, CUBLAS_OP_N, (int)m, (int)n, (int)k,
                                          &alpha, B.a, dt, (int)m, B.b, dt, (int)k, &beta, B.c, dt,
                                          (int)m, ct, CUBLAS_GEMM_DEFAULT),
                             "cublasGemmEx");
        },
        s);
}

bool gemm_int8(bench &B, int64_t m0, int64_t n0, int64_t k0, double *s)
{
    int64_t m = (m0 + 15) / 16 * 16, n = (n0 + 15) / 16 * 16, k = (k0 + 15) / 16 * 16;
    if (!B.reserve(&B.a, &B.cap_a, (size_t)(m * k)) ||
        !B.reserve(&B.b, &B.cap_b, (size_t)(k * n)) ||
        !B.reserve(&B.c, &B.cap_c, (size_t)(m * n) * 4))
        return false;
    fill_i8<<<B.blocks, 256>>>((int8_t *)B.a, (size_t)(m * k), 3u);
    fill_i8<<<B.blocks, 256>>>((int8_t *)B.b, (size_t)(k * n), 4u);
    if (!B.cuda_ok(cudaGetLastError(), "fill")) return false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t heur;
    int nres = 0;
    bool ok = false;
    const int32_t alpha = 1, beta = 0;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (!B.blas_ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32I, CUDA_R_32I), "int8 desc"))
        goto destroy_descriptors;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    /* op(A) = A^T is m x k: A is stored k x m */
    if (!B.blas_ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, k, m, k), "int8 layout") ||
        !B.blas_ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, k, n, k), "int8 layout") ||
        !B.blas_ok(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32I, m, n, m), "int8 layout") ||
        !B.blas_ok(cublasLtMatmulPreferenceCreate(&pref), "int8 preference"))
        goto destroy_descriptors;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &B.ws_bytes, sizeof B.ws_bytes);
    if (!B.blas_ok(cublasLtMatmulAlgoGetHeuristic(B.lt, op, la, lb, lc, lc, pref, 1, &heur, &nres),
                   "int8 heuristic"))
        goto destroy_descriptors;
    if (nres < 1) {
        snprintf(B.why, B.wlen, "cublasLt has no int8 algorithm for %lldx%lldx%lld",
                 (long long)m, (long long)n, (long long)k);
        goto destroy_descriptors;
    }
    ok = B.time(
        [&]() {
            return B.blas_ok(cublasLtMatmul(B.lt, op, &alpha, B.a, la, B.b, lb, &beta, B.c, lc, B.c,
                                            lc, &heur.algo, B.ws, B.ws_bytes, 0),
                             "cublasLtMatmul");
        },
        s);
destroy_descriptors:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return ok;
}

bool elementwise(bench &B, const char *type, size_t n, double *s)
{
    size_t bytes = !strcmp(type, "fp32") ? 4 * n : !strcmp(type, "fp16") ? 2 * n : n;
    if (!B.reserve(&B.a, &B.cap_a, bytes) || !B.reserve(&B.b, &B.cap_b, bytes)) return false;
    if (!strcmp(type, "fp32")) {
        fill_f32<<<B.blocks, 256>>>((float *)B.a, n, 5u);
        return B.time(
            [&]() {
                ew_f32<<<B.blocks, 256>>>((const float *)B.a, (float *)B.b, n, 0.75f, 0.125f);
                return B.cuda_ok(cudaGetLastError(), "ew_f32");
            },
            s);
    }
    if (!strcmp(type, "fp16")) {
        fill_f16<<<B.blocks, 256>>>((__half *)B.a, n, 5u);
        __half2 a2 = __float2half2_rn(0.75f), b2 = __float2half2_rn(0.125f);
        return B.time(
            [&]() {
                ew_f16<<<B.blocks, 256>>>((const __half2 *)B.a, (__half2 *)B.b, n / 2, a2, b2);
                return B.cuda_ok(cudaGetLastError(), "ew_f16");
            },
            s);
    }
    fill_i8<<<B.blocks, 256>>>((int8_t *)B.a, n, 5u);
    return B.time(
        [&]() {
            ew_i8<<<B.blocks, 256>>>((const char4 *)B.a, (char4 *)B.b, n / 4, 192, 32);
            return B.cuda_ok(cudaGetLastError(), "ew_i8");
        },
        s);
}

void put(struct adapt_bench_timing *t, const char *type, const char *impl, int64_t m, int64_t n,
         int64_t k, int64_t elements, double s)
{
    memset(t, 0, sizeof *t);
    snprintf(t->type, sizeof t->type, "%s", type);
    snprintf(t->impl, sizeof t->impl, "%s", impl);
    t->m = m, t->n = n, t->k = k, t->elements = elements, t->seconds = s;
}

} // namespace

extern "C" int adapt_bench_gemm_cuda(const int64_t *shapes, int n_shapes, double min_s,
                                     int repeats, struct adapt_bench_timing *out, int cap,
                                     char *device, size_t dlen, char *why, size_t wlen)
{
    char desc[256];
    if (adapt_cuda_device_count(desc, sizeof desc) < 1) {
        snprintf(why, wlen, "no GPU: %s", desc);
        return -1;
    }
    snprintf(device, dlen, "%s", desc);
    bench B;
    B.min_s = min_s;
    B.repeats = repeats;
    B.why = why;
    B.wlen = wlen;
    int n = 0, sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    B.blocks = std::max(1, sms) * 16;
    bool ok = B.blas_ok(cublasCreate(&B.h), "cublasCreate") &&
              B.blas_ok(cublasLtCreate(&B.lt), "cublasLtCreate") &&
              B.cuda_ok(cudaEventCreate(&B.e0), "cudaEventCreate") &&
              B.cuda_ok(cudaEventCreate(&B.e1), "cudaEventCreate") &&
              B.cuda_ok(cudaMalloc(&B.ws, B.ws_bytes), "cudaMalloc");
    static const char *const types[4] = {"fp32", "tf32", "fp16", "bf16"};
    static const char *const impls[4] = {"cublas-gemmex-32f", "cublas-gemmex-tf32",
                                         "cublas-gemmex-16f", "cublas-gemmex-16bf"};
    for (int i = 0; ok && i < n_shapes; i++) {
        int64_t m = shapes[3 * i], nn = shapes[3 * i + 1], k = shapes[3 * i + 2];
        double s;
        for (int t = 0; ok && t < 4 && n < cap; t++)
            if ((ok = gemm_ex(B, types[t], m, nn, k, &s)))
                put(&out[n++], types[t], impls[t], m, nn, k, 0, s);
        if (ok && n < cap && (ok = gemm_int8(B, m, nn, k, &s)))
            put(&out[n++], "int8", "cublaslt-int8-tn-pad16", m, nn, k, 0, s);
    }
    static const char *const etypes[3] = {"fp32", "fp16", "int8"};
    static const char *const eimpls[3] = {"cuda-fma-relu-f32", "cuda-hfma2-relu-f16",
                                          "cuda-int-relu-i8"};
    const size_t elements = (size_t)1 << 26;
    for (int t = 0; ok && t < 3 && n < cap; t++) {
        double s;
        if ((ok = elementwise(B, etypes[t], elements, &s)))
            put(&out[n++], etypes[t], eimpls[t], 0, 0, 0, (int64_t)elements, s);
    }
    B.release();
    return ok ? n : -1;
}

namespace {

/* seconds per call of f: best of 5 batches, each repeating f for about min_s */
template <typename F> double best_of(F f, double min_s, cudaEvent_t e0, cudaEvent_t e1, bool *ok)
{
    f();
    cudaDeviceSynchronize();
    int reps = 1;
    double best = 1e30;
    for (int b = 0; b < 6 && *ok; b++) {
        cudaEventRecord(e0, 0);
        for (int r = 0; r < reps; r++) *ok = *ok && f();
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double s = ms * 1e-3 / reps;
        if (b == 0) { /* the first batch sizes the others */
            reps = (int)std::min(1e6, std::max(1.0, min_s / std::max(s, 1e-7)));
            continue;
        }
        best = std::min(best, s);
    }
    return best;
}

} // namespace

extern "C" int adapt_bench_quant_cuda(const struct quant_spec *spec, const size_t *sizes,
                                      int nsizes, double min_s, double *gb, char *device,
                                      size_t dlen, char *why, size_t wlen)
{
    char desc[256];
    if (adapt_cuda_device_count(desc, sizeof desc) == 0) {
        snprintf(why, wlen, "%s", desc);
        return -1;
    }
    snprintf(device, dlen, "%s", desc);
    size_t nmax = 0;
    for (int i = 0; i < nsizes; i++) nmax = std::max(nmax, sizes[i]);
    float *x = nullptr, *y = nullptr;
    void *scratch = nullptr;
    unsigned long long *counts = nullptr;
    const size_t sbytes = quant_cuda_scratch_bytes(spec, 1, nmax);
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    bool ok = cudaMalloc(&x, nmax * sizeof(float)) == cudaSuccess &&
              cudaMalloc(&y, nmax * sizeof(float)) == cudaSuccess &&
              cudaMalloc(&scratch, sbytes) == cudaSuccess &&
              cudaMalloc(&counts, 3 * sizeof *counts) == cudaSuccess &&
              cudaMemset(counts, 0, 3 * sizeof *counts) == cudaSuccess &&
              cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
    if (!ok) snprintf(why, wlen, "cannot allocate 2 x %zu floats on the GPU", nmax);
    if (ok) {
        int sms = 0;
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        /* activations-like data, as the CPU bench: symmetric, a few beyond <8,4> */
        fill_f32<<<std::max(1, sms) * 16, 256>>>(x, nmax, 5u);
        ok = cudaDeviceSynchronize() == cudaSuccess;
    }
    for (int i = 0; ok && i < nsizes; i++) {
        size_t n = sizes[i];
        struct quant_key key = {1, 16, 0};
        double tq = best_of(
            [&]() {
                key.index += n;
                if (quant_cuda_rows_on(spec, x, y, 1, n, key, NULL, counts, scratch, sbytes,
                                       NULL) == ADAPT_OK)
                    return true;
                snprintf(why, wlen, "%s", adapt_error_message());
                return false;
            },
            min_s, e0, e1, &ok);
        double tc = best_of(
            [&]() {
                if (cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, 0) ==
                    cudaSuccess)
                    return true;
                snprintf(why, wlen, "cudaMemcpyAsync failed");
                return false;
            },
            min_s, e0, e1, &ok);
        gb[2 * i] = 8.0 * (double)n / tq * 1e-9;
        gb[2 * i + 1] = 8.0 * (double)n / tc * 1e-9;
    }
    if (x) cudaFree(x);
    if (y) cudaFree(y);
    if (scratch) cudaFree(scratch);
    if (counts) cudaFree(counts);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return ok ? 0 : -1;
}
