/* src/net/cuda/policy.cu: the precision policies' vector work and reductions
 * (src/policy/precision.c, adapt.c, muppet.c, the AMP policy): sums of squares, scaling and
 * accumulation, the saturating straight-through rule, histograms, gathers and the overflow
 * check (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/net/cuda/kernels_impl.cuh"

namespace {

/* ---------------------------------------------------------------- sum of squares */

/* One thread's share (t0, t0 + step, ...) of the sums of x^2 and |x| over n floats, in double;
 * V = 4 reads float4 (x 16-byte aligned). */
template <int V>
__device__ __forceinline__ void sumsq_part(const float *x, size_t n, size_t t0, size_t step,
                                           double &sq, double &ab)
{
    const size_t nv = n / V;
    for (size_t q = t0; q < nv; q += step) {
        const fvec<V> a = ld<V>(x + V * q);
#pragma unroll
        for (int l = 0; l < V; l++) {
            const double v = a.v[l];
            sq += v * v;
            ab += fabs(v);
        }
    }
    for (size_t i = V * nv + t0; i < n; i += step) {
        const double v = x[i];
        sq += v * v;
        ab += fabs(v);
    }
}

/* The block's sums (thread 0 holds them after block_sum2) added into out[0], out[1]. */
__device__ __forceinline__ void sumsq_flush(double sq, double ab, double *out)
{
    block_sum2<kThreads>(sq, ab);
    if (threadIdx.x == 0) {
        atomicAdd(&out[0], sq);
        atomicAdd(&out[1], ab);
    }
}

/* This thread's share of a list: the entry e whose blocks hold this block (the last i < k with
 * t[i].first <= blockIdx.x; entries with no blocks share their successor's first, so they are
 * never the answer), and the grid-stride start t0 and step over that entry's blocks. */
struct list_share {
    int e;
    size_t t0, step;
};

__device__ __forceinline__ list_share share_of(const acu_tensor *t, int k)
{
    int lo = 0, hi = k - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (t[mid].first <= blockIdx.x)
            lo = mid;
        else
            hi = mid - 1;
    }
    list_share s;
    s.e = lo;
    s.t0 = (size_t)(blockIdx.x - t[lo].first) * blockDim.x + threadIdx.x;
    s.step = (size_t)(t[lo + 1].first - t[lo].first) * blockDim.x;
    return s;
}

__global__ void __launch_bounds__(kThreads) sumsq_list_kernel(const acu_tensor *t, int k,
                                                               double *out)
{
    const list_share s = share_of(t, k);
    const acu_tensor a = t[s.e];
    double sq = 0.0, ab = 0.0;
    if (aligned16(a.x))
        sumsq_part<4>(a.x, a.count, s.t0, s.step, sq, ab);
    else
        sumsq_part<1>(a.x, a.count, s.t0, s.step, sq, ab);
    sumsq_flush(sq, ab, out + 2 * s.e);
}

struct scale_acc_op { /* g *= scale (or 1 / sqrt(*sumsq) when sumsq is given); acc += g */
    float *g, *acc;
    float scale;
    const double *sumsq;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        /* the CPU's (float)(1.0 / sqrt(s)) for s > 0, else 1: IEEE double division and root */
        const float sc = sumsq ? (*sumsq > 0.0 ? (float)(1.0 / sqrt(*sumsq)) : 1.0f) : scale;
        fvec<V> gv = ld<V>(g + i);
        if (sc != 1.0f) {
#pragma unroll
            for (int l = 0; l < V; l++) gv.v[l] = __fmul_rn(gv.v[l], sc);
            st<V>(g + i, gv);
        }
        if (acc) {
            fvec<V> a = ld<V>(acc + i);
#pragma unroll
            for (int l = 0; l < V; l++) a.v[l] = __fadd_rn(a.v[l], gv.v[l]);
            st<V>(acc + i, a);
        }
    }
};

__global__ void __launch_bounds__(kThreads) normalize_acc_list_kernel(const acu_tensor *t, int k,
                                                                       const double *sumsq)
{
    const list_share s = share_of(t, k);
    const acu_tensor a = t[s.e];
    const scale_acc_op op = {a.x, a.acc, 1.0f, sumsq + 2 * s.e};
    map_range(op, a.count, aligned16(a.x) && (!a.acc || aligned16(a.acc)), s.t0, s.step);
}

struct ste_clip_op {
    const float *y;
    float *dy;
    float lo, hi;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        const fvec<V> yv = ld<V>(y + i);
        fvec<V> d = ld<V>(dy + i);
#pragma unroll
        for (int l = 0; l < V; l++)
            if ((yv.v[l] >= hi && d.v[l] < 0.0f) || (yv.v[l] <= lo && d.v[l] > 0.0f)) d.v[l] = 0.0f;
        st<V>(dy + i, d);
    }
};

struct add_scaled_op { /* dst = x + a * w */
    float *dst;
    const float *x, *w;
    float a;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        const fvec<V> xv = ld<V>(x + i), wv = ld<V>(w + i);
        fvec<V> y;
#pragma unroll
        for (int l = 0; l < V; l++) y.v[l] = __fadd_rn(xv.v[l], __fmul_rn(a, wv.v[l]));
        st<V>(dst + i, y);
    }
};

/* adapt_muppet_gd's two sums over ring (r slices of n): out[0] += sum_i sum_k g_k[i]^2,
 * out[1] += sum_i (sum_k g_k[i])^2, in double */
__global__ void __launch_bounds__(kThreads) gd_kernel(const float *ring, int r, size_t n,
                                                      double *out)
{
    double sq = 0.0, ss = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double sum = 0.0;
        for (int k = 0; k < r; k++) {
            const double v = ring[(size_t)k * n + i];
            sq += v * v;
            sum += v;
        }
        ss += sum * sum;
    }
    block_sum2<kThreads>(sq, ss);
    if (threadIdx.x == 0) {
        atomicAdd(&out[0], sq);
        atomicAdd(&out[1], ss);
    }
}

/* *flag = 1 when x holds an inf or NaN (every writer writes the same value) */
__global__ void nonfinite_kernel(const float *x, size_t n, unsigned *flag)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) {
            *flag = 1u;
            return;
        }
}

__global__ void gather_kernel(const float *src, size_t stride, float *dst, size_t n)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i * stride];
}

constexpr int kHistShared = 1024; /* bins counted in shared memory; more go to global atomics */

__global__ void hist_kernel(const float *x, size_t n, double lo, double hi, int bins,
                            unsigned long long *counts)
{
    __shared__ unsigned long long sh[kHistShared];
    const bool local = bins <= kHistShared;
    if (local)
        for (int b = threadIdx.x; b < bins; b += blockDim.x) sh[b] = 0ull;
    __syncthreads();
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const double d = (double)x[i];
        int b;
        if (d != d) continue;
        if (d < lo) {
            b = 0;
        } else if (d > hi) {
            b = bins - 1;
        } else {
            const double f = floor(__ddiv_rn(__dmul_rn(__dsub_rn(d, lo), (double)bins),
                                             __dsub_rn(hi, lo)));
            b = f >= (double)bins ? bins - 1 : (int)f;
        }
        atomicAdd(local ? &sh[b] : &counts[b], 1ull);
    }
    __syncthreads();
    if (local)
        for (int b = threadIdx.x; b < bins; b += blockDim.x)
            if (sh[b]) atomicAdd(&counts[b], sh[b]);
}

/* ---------------------------------------------------------------- scaled roles */

/* amax[r] = max over row r (cols floats) of the bits of |x| (src/quant/quant.c,
 * quant_amax_compute: for non-negative floats their order is the integers'; inf and NaN are the
 * patterns from 0x7f800000 up). Grid: x over a row's chunks, y over rows (grid-stride). */
__global__ void __launch_bounds__(kThreads) amax_rows_kernel(const float *x, size_t rows,
                                                             size_t cols, unsigned *amax)
{
    for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *xr = x + r * cols;
        unsigned m = 0u;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < cols;
             i += (size_t)gridDim.x * blockDim.x)
            m = max(m, __float_as_uint(xr[i]) & 0x7fffffffu);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_down_sync(0xffffffffu, m, o));
        if ((threadIdx.x & 31) == 0 && m) atomicMax(&amax[r], m);
    }
}

/* y[i] = x[i] * f[i / c] (one factor per row of c floats; a plain float32 product, as the CPU's
 * scale_span). */
__global__ void __launch_bounds__(kThreads) scale_rows_kernel(const float *x, float *y, size_t n,
                                                              size_t c, const float *f)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __fmul_rn(x[i], f[i / c]);
}

} // namespace

extern "C" unsigned acu_list_blocks(const float *x, size_t count)
{
    /* a thread per element of x, or per four when x is 16-byte aligned (the sums' walk); at
     * most kSumsqBlocks (each block adds one pair of doubles atomically) */
    if (count == 0) return 0u;
    const size_t b = ((aligned16(x) ? count / 4 : count) + kThreads - 1) / kThreads;
    return (unsigned)(b < 1 ? 1 : b < kSumsqBlocks ? b : kSumsqBlocks);
}

extern "C" void acu_sumsq_list(const struct acu_tensor *t, int k, unsigned blocks, double *out,
                               cudaStream_t s)
{
    if (k <= 0) return;
    cudaMemsetAsync(out, 0, 2 * (size_t)k * sizeof(double), s);
    if (blocks) sumsq_list_kernel<<<blocks, kThreads, 0, s>>>(t, k, out);
}

extern "C" void acu_normalize_acc_list(const struct acu_tensor *t, int k, unsigned blocks,
                                       const double *sumsq, cudaStream_t s)
{
    if (k > 0 && blocks) normalize_acc_list_kernel<<<blocks, kThreads, 0, s>>>(t, k, sumsq);
}

extern "C" void acu_scale_acc(float *g, float *acc, size_t count, float scale, cudaStream_t s)
{
    if (scale == 1.0f && !acc) return;
    scale_acc_op op = {g, acc, scale, NULL};
    launch_map(op, count, aligned16(g) && (!acc || aligned16(acc)), s);
}

extern "C" void acu_ste_clip(const float *y, float *dy, size_t count, float lo, float hi,
                             cudaStream_t s)
{
    ste_clip_op op = {y, dy, lo, hi};
    launch_map(op, count, aligned16(y) && aligned16(dy), s);
}

extern "C" void acu_gather(const float *src, size_t stride, float *dst, size_t count,
                           cudaStream_t s)
{
    if (count == 0) return;
    if (stride == 1) {
        cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, s);
        return;
    }
    gather_kernel<<<blocks_for(count), kThreads, 0, s>>>(src, stride, dst, count);
}

extern "C" void acu_hist(const float *x, size_t count, double lo, double hi, int bins,
                         unsigned long long *counts, cudaStream_t s)
{
    cudaMemsetAsync(counts, 0, (size_t)bins * sizeof *counts, s);
    if (count == 0 || bins < 1) return;
    hist_kernel<<<blocks_for(count), kThreads, 0, s>>>(x, count, lo, hi, bins, counts);
}

extern "C" void acu_add_scaled(float *dst, const float *x, const float *w, float a, size_t count,
                               cudaStream_t s)
{
    add_scaled_op op = {dst, x, w, a};
    launch_map(op, count, aligned16(dst) && aligned16(x) && aligned16(w), s);
}

extern "C" void acu_gd(const float *ring, int r, size_t n, double *out, cudaStream_t s)
{
    cudaMemsetAsync(out, 0, 2 * sizeof(double), s);
    if (n == 0 || r < 1) return;
    size_t b = (n + kThreads - 1) / kThreads;
    if (b > kSumsqBlocks) b = kSumsqBlocks;
    gd_kernel<<<(unsigned)b, kThreads, 0, s>>>(ring, r, n, out);
}

extern "C" void acu_nonfinite(const float *x, size_t count, unsigned *flag, cudaStream_t s)
{
    if (count == 0) return;
    nonfinite_kernel<<<blocks_for(count), kThreads, 0, s>>>(x, count, flag);
}

extern "C" void acu_amax_rows(const float *x, size_t rows, size_t cols, unsigned *amax,
                              cudaStream_t s)
{
    cudaMemsetAsync(amax, 0, rows * sizeof *amax, s);
    if (rows == 0 || cols == 0) return;
    size_t bx = (cols + kThreads - 1) / kThreads;
    bx = bx < 1024 ? bx : 1024;
    size_t by = rows < 65535 ? rows : 65535;
    amax_rows_kernel<<<dim3((unsigned)bx, (unsigned)by), kThreads, 0, s>>>(x, rows, cols, amax);
}

extern "C" void acu_scale_rows(const float *x, float *y, size_t n, size_t c, const float *f,
                               cudaStream_t s)
{
    if (n == 0) return;
    scale_rows_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n, c, f);
}
