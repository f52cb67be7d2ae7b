/* src/net/cuda/pool.cu: max and average pooling, the GPU twin of pool.c
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/net/cuda/kernels_impl.cuh"

namespace {

/* ---------------------------------------------------------------- pooling (pool.c) */

/* The planes of a pooling layer: window k, stride s, padding p; cip: average pooling divides by
 * k*k (count_include_pad), else by the window's cells inside the input. */
struct pool_geom {
    int h, w, ho, wo, k, s, p, cip;
};

/* pool.c's clip_window: the cells [*a, *b) of output o's window that lie inside n cells */
__device__ __forceinline__ void clip_window(int o, int k, int s, int p, int n, int *a, int *b)
{
    const int lo = o * s - p, hi = lo + k;
    *a = lo > 0 ? lo : 0;
    *b = hi < n ? hi : n;
}

/* pool.c's max rule: the window of output (oy, ox), clipped to the input, is scanned row by row
 * and an element replaces the maximum when it is greater or NaN (first maximum; last NaN).
 * Returns the index within the plane. */
__device__ __forceinline__ int max_arg(const float *xp, const pool_geom &g, int oy, int ox,
                                       float *best_out)
{
    int y0, y1, x0, x1;
    clip_window(oy, g.k, g.s, g.p, g.h, &y0, &y1);
    clip_window(ox, g.k, g.s, g.p, g.w, &x0, &x1);
    float best = -INFINITY;
    int bi = y0 * g.w + x0;
    for (int iy = y0; iy < y1; iy++)
        for (int ix = x0; ix < x1; ix++) {
            const int idx = iy * g.w + ix;
            const float v = xp[idx];
            if (v > best || v != v) {
                best = v;
                bi = idx;
            }
        }
    *best_out = best;
    return bi;
}

/* one thread per output element */
template <typename I>
__global__ void maxpool_fwd_kernel(const float *x, float *y, I total, pool_geom g)
{
    const I op = (I)g.ho * (I)g.wo;
    for (I o = (I)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I q = o / op;
        const int r = (int)(o - q * op), oy = r / g.wo, ox = r - oy * g.wo;
        float best;
        (void)max_arg(x + (size_t)q * g.h * g.w, g, oy, ox, &best);
        y[o] = best;
    }
}

/* First and last output index (along one axis) whose window [o s - p, o s - p + k) holds i. */
__device__ __forceinline__ void windows_of(int i, int k, int s, int p, int no, int *o0, int *o1)
{
    const int j = i + p;
    *o0 = j < k ? 0 : (j - k) / s + 1;
    const int last = j / s;
    *o1 = last < no - 1 ? last : no - 1;
}

/* one thread per input element: the outputs whose window chose it, in output order (the order
 * of the CPU's scatter dp[arg[o]] += dy[o]) */
template <typename I>
__global__ void maxpool_bwd_kernel(const float *x, const float *dy, float *dx, I total,
                                   pool_geom g, int acc)
{
    const I ip = (I)g.h * (I)g.w;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (I)gridDim.x * blockDim.x) {
        const I q = e / ip;
        const int r = (int)(e - q * ip), iy = r / g.w, ix = r - iy * g.w;
        const float *xp = x + (size_t)q * ip;
        const float *gp = dy + (size_t)q * g.ho * g.wo;
        int oy0, oy1, ox0, ox1;
        windows_of(iy, g.k, g.s, g.p, g.ho, &oy0, &oy1);
        windows_of(ix, g.k, g.s, g.p, g.wo, &ox0, &ox1);
        float sum = acc ? dx[e] : 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                float best;
                if (max_arg(xp, g, oy, ox, &best) == r) sum += gp[oy * g.wo + ox];
            }
        dx[e] = sum;
    }
}

/* 1 / divisor of output (oy, ox)'s window, in float as pool.c */
__device__ __forceinline__ float avg_inv(const pool_geom &g, int oy, int ox)
{
    if (g.cip) return 1.0f / (float)(g.k * g.k);
    int y0, y1, x0, x1;
    clip_window(oy, g.k, g.s, g.p, g.h, &y0, &y1);
    clip_window(ox, g.k, g.s, g.p, g.w, &x0, &x1);
    return 1.0f / (float)((y1 - y0) * (x1 - x0));
}

template <typename I>
__global__ void avgpool_fwd_kernel(const float *x, float *y, I total, pool_geom g)
{
    const I op = (I)g.ho * (I)g.wo;
    for (I o = (I)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (I)gridDim.x * blockDim.x) {
        const I q = o / op;
        const int r = (int)(o - q * op), oy = r / g.wo, ox = r - oy * g.wo;
        const float *xp = x + (size_t)q * g.h * g.w;
        float a;
        if (g.k == 2 && g.s == 2 && g.p == 0) { /* pool.c's 2x2 sum order */
            const float *xw = xp + (size_t)oy * 2 * g.w + ox * 2;
            a = (xw[0] + xw[1]) + (xw[g.w] + xw[g.w + 1]);
        } else {
            int y0, y1, x0, x1;
            clip_window(oy, g.k, g.s, g.p, g.h, &y0, &y1);
            clip_window(ox, g.k, g.s, g.p, g.w, &x0, &x1);
            a = 0.0f;
            for (int iy = y0; iy < y1; iy++)
                for (int ix = x0; ix < x1; ix++) a += xp[iy * g.w + ix];
        }
        y[o] = a * avg_inv(g, oy, ox);
    }
}

/* one thread per input element; the CPU adds dy * inv window by window in output order */
template <typename I>
__global__ void avgpool_bwd_kernel(const float *dy, float *dx, I total, pool_geom g, int acc)
{
    const I ip = (I)g.h * (I)g.w;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (I)gridDim.x * blockDim.x) {
        const I q = e / ip;
        const int r = (int)(e - q * ip), iy = r / g.w, ix = r - iy * g.w;
        const float *gp = dy + (size_t)q * g.ho * g.wo;
        int oy0, oy1, ox0, ox1;
        windows_of(iy, g.k, g.s, g.p, g.ho, &oy0, &oy1);
        windows_of(ix, g.k, g.s, g.p, g.wo, &ox0, &ox1);
        float sum = acc ? dx[e] : 0.0f;
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) /* no FMA: g = dy inv */
                sum = __fadd_rn(sum, __fmul_rn(gp[oy * g.wo + ox], avg_inv(g, oy, ox)));
        dx[e] = sum;
    }
}

/* global average: one warp per plane, the sum in double times 1 / hw in double (as
 * adapt_sum_f32(plane) * inv in pool.c) */
__global__ void gap_fwd_kernel(const float *x, float *y, size_t planes, int hw)
{
    const int lane = threadIdx.x & 31;
    const size_t w0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const size_t nw = ((size_t)gridDim.x * blockDim.x) >> 5;
    const double inv = 1.0 / (double)hw;
    for (size_t q = w0; q < planes; q += nw) {
        const float *xp = x + q * hw;
        double a = 0.0;
        for (int i = lane; i < hw; i += 32) a += xp[i];
        a = warp_sum(a);
        if (lane == 0) y[q] = (float)(a * inv);
    }
}

struct gap_bwd_op { /* dx[q, :] (=|+=) dy[q] / hw, inv in float as pool.c */
    const float *dy;
    float *dx;
    int hw, acc;
    float inv;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        /* V divides hw when V > 1: a group lies in one plane */
        const float g = __fmul_rn(dy[i / (size_t)hw], inv);
        fvec<V> o;
        if (acc) o = ld<V>(dx + i);
#pragma unroll
        for (int l = 0; l < V; l++) o.v[l] = acc ? o.v[l] + g : g;
        st<V>(dx + i, o);
    }
};

} // namespace

/* The geometry of a pooling launch, or 0 when there is nothing to do. */
static int pool_setup(int n, int c, int h, int w, int k, int stride, int pad, int cip,
                      pool_geom *g)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || stride <= 0 || pad < 0 ||
        k > h + 2 * pad || k > w + 2 * pad)
        return 0;
    g->h = h;
    g->w = w;
    g->ho = (h + 2 * pad - k) / stride + 1;
    g->wo = (w + 2 * pad - k) / stride + 1;
    g->k = k;
    g->s = stride;
    g->p = pad;
    g->cip = cip;
    return 1;
}

extern "C" void acu_maxpool_forward(const float *x, float *y, int n, int c, int h, int w, int k,
                                    int stride, int pad, cudaStream_t s)
{
    pool_geom g;
    if (!pool_setup(n, c, h, w, k, stride, pad, 1, &g)) return;
    const size_t total = (size_t)n * c * g.ho * g.wo;
    if (small_index(total))
        maxpool_fwd_kernel<uint32_t>
            <<<blocks_for(total), kThreads, 0, s>>>(x, y, (uint32_t)total, g);
    else
        maxpool_fwd_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(x, y, total, g);
}

extern "C" void acu_maxpool_backward(const float *x, const float *y, const float *dy, float *dx,
                                     int n, int c, int h, int w, int k, int stride, int pad,
                                     int acc, cudaStream_t s)
{
    (void)y; /* the choice is rescanned from x: y may have been overwritten in place */
    pool_geom g;
    if (!pool_setup(n, c, h, w, k, stride, pad, 1, &g)) return;
    const size_t total = (size_t)n * c * h * w;
    if (small_index(total))
        maxpool_bwd_kernel<uint32_t>
            <<<blocks_for(total), kThreads, 0, s>>>(x, dy, dx, (uint32_t)total, g, acc);
    else
        maxpool_bwd_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(x, dy, dx, total, g, acc);
}

extern "C" void acu_avgpool_forward(const float *x, float *y, int n, int c, int h, int w, int k,
                                    int stride, int pad, int count_include_pad, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return;
    if (k == 0) {
        const size_t planes = (size_t)n * c;
        gap_fwd_kernel<<<blocks_for(planes * 32), kThreads, 0, s>>>(x, y, planes, h * w);
        return;
    }
    pool_geom g;
    if (!pool_setup(n, c, h, w, k, stride, pad, count_include_pad, &g)) return;
    const size_t total = (size_t)n * c * g.ho * g.wo;
    if (small_index(total))
        avgpool_fwd_kernel<uint32_t>
            <<<blocks_for(total), kThreads, 0, s>>>(x, y, (uint32_t)total, g);
    else
        avgpool_fwd_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(x, y, total, g);
}

extern "C" void acu_avgpool_backward(const float *dy, float *dx, int n, int c, int h, int w, int k,
                                     int stride, int pad, int count_include_pad, int acc,
                                     cudaStream_t s)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) return;
    const size_t total = (size_t)n * c * h * w;
    if (k == 0) {
        const int hw = h * w;
        gap_bwd_op op = {dy, dx, hw, acc, 1.0f / (float)hw};
        launch_map(op, total, hw % 4 == 0 && aligned16(dx), s);
        return;
    }
    pool_geom g;
    if (!pool_setup(n, c, h, w, k, stride, pad, count_include_pad, &g)) return;
    if (small_index(total))
        avgpool_bwd_kernel<uint32_t>
            <<<blocks_for(total), kThreads, 0, s>>>(dy, dx, (uint32_t)total, g, acc);
    else
        avgpool_bwd_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(dy, dx, total, g, acc);
}
