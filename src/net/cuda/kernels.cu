/* src/net/cuda/kernels.cu: CUDA kernels and extern "C" launchers of src/net/cuda/kernels.h.
 *
 * Each kernel is the device twin of a CPU layer and follows its arithmetic: activations
 * (src/net/layers/act.c; tanh and gelu from the same source, act_impl.h), copies and sums
 * (add.c, flatten.c), pooling (pool.c), batch norm (batchnorm.c), bias of conv2d.c / linear.c
 * (fc.c), dropout (dropout.c), concat (concat.c), softmax cross-entropy (xent.c), one SGD step
 * (src/net/optim.c) and the convolution lowering (im2col.c). Where the CPU rounds a product
 * before adding it (batch-norm coefficients and running statistics, the SGD update, dropout's
 * scaling, the cross-entropy gradient, the average-pool gradient) the kernels round it too
 * (__fmul_rn and friends: no contraction into FMA); the vectorised CPU loops may contract, and
 * so may these.
 *
 * Element-wise kernels walk the data grid-stride, four floats at a time (float4) when every
 * pointer is 16-byte aligned and a scalar tail after. Reductions accumulate in double: batch
 * norm and the bias gradient run one block per channel (summation order fixed by the block
 * size, so repeated runs agree bit for bit), cross-entropy one block for the batch, the sum of
 * squares one block per slice of the tensor, combined by atomicAdd on doubles (the order of
 * that last addition varies from run to run, in the last bits of a double).
 * Dropout draws its bits with adapt_rng_block of src/base/rng.h, the function the CPU calls,
 * one thread per Philox block of four elements, so masks agree bit for bit.
 *
 * Max pooling keeps no indices: its backward finds, for every input element, the outputs whose
 * windows chose it by rescanning x with pool.c's rule, and adds their gradients in output
 * order, the order of the CPU's scatter. Average-pool backward and col2im gather the same way,
 * so no kernel here needs atomics on floats.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "src/base/rng.h"
#include "src/net/cuda/kernels.h"
#include "src/net/layers/act_impl.h"

namespace {

/* Threads of the element-wise kernels, and their most blocks (the loops are grid-stride). */
constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 8192;
/* Threads of the one-block-per-channel reductions. */
constexpr int kChanThreads = 512;
/* Threads of the one-block cross-entropy. */
constexpr int kXentThreads = 1024;
/* Most blocks of the sum of squares (each adds one pair of doubles atomically). */
constexpr size_t kSumsqBlocks = 1024;

unsigned blocks_for(size_t work, int threads = kThreads)
{
    size_t b = (work + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < kMaxBlocks ? (b ? b : 1) : kMaxBlocks);
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* Indices fit 32 bits (with room for one grid stride past the end): cheaper division. */
bool small_index(size_t total)
{
    return total <= (size_t)INT_MAX;
}

/* ---------------------------------------------------------------- vector access */

/* V consecutive floats, V = 1 or 4 (float4: the address is 16-byte aligned). */
template <int V> struct fvec {
    float v[V];
};

template <int V> __device__ __forceinline__ fvec<V> ld(const float *p);
template <> __device__ __forceinline__ fvec<1> ld<1>(const float *p)
{
    fvec<1> r;
    r.v[0] = *p;
    return r;
}
template <> __device__ __forceinline__ fvec<4> ld<4>(const float *p)
{
    const float4 t = *reinterpret_cast<const float4 *>(p);
    fvec<4> r;
    r.v[0] = t.x;
    r.v[1] = t.y;
    r.v[2] = t.z;
    r.v[3] = t.w;
    return r;
}

template <int V> __device__ __forceinline__ void st(float *p, const fvec<V> &a);
template <> __device__ __forceinline__ void st<1>(float *p, const fvec<1> &a)
{
    *p = a.v[0];
}
template <> __device__ __forceinline__ void st<4>(float *p, const fvec<4> &a)
{
    *reinterpret_cast<float4 *>(p) = make_float4(a.v[0], a.v[1], a.v[2], a.v[3]);
}

/* Applies op.run<4>(i) to the groups of four of [0, n) when vec, op.run<1>(i) to the rest. Op
 * reads and writes only elements i .. i+V-1, so in-place use (y == x) is safe. */
template <class Op> __global__ void map_kernel(Op op, size_t n, bool vec)
{
    const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    const size_t nv = vec ? n / 4 : 0;
    for (size_t q = t0; q < nv; q += step) op.template run<4>(4 * q);
    for (size_t i = 4 * nv + t0; i < n; i += step) op.template run<1>(i);
}

template <class Op> void launch_map(const Op &op, size_t n, bool vec, cudaStream_t s)
{
    if (n == 0) return;
    map_kernel<Op><<<blocks_for(vec ? (n + 3) / 4 : n), kThreads, 0, s>>>(op, n, vec);
}

/* ---------------------------------------------------------------- reductions */

__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v; /* the same in every lane: each butterfly step adds the same pair both ways */
}

/* Sums a and b over the block (NT threads, a multiple of 32); the sums are valid in thread 0.
 * Called at most once per kernel (its shared memory is not reused). */
template <int NT> __device__ __forceinline__ void block_sum2(double &a, double &b)
{
    __shared__ double sh[2][NT / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) {
        sh[0][wid] = a;
        sh[1][wid] = b;
    }
    __syncthreads();
    if (wid == 0) {
        a = lane < NT / 32 ? sh[0][lane] : 0.0;
        b = lane < NT / 32 ? sh[1][lane] : 0.0;
        a = warp_sum(a);
        b = warp_sum(b);
    }
}

/* Calls f(offset) for the V-float groups start, start + step, ... of one channel of an
 * (n, C, hw) tensor: offset = j cs + base + V p for group j (hw / V) + p, where cs = C hw is
 * the sample stride and base = channel hw. V divides hw. */
template <int V, class F>
__device__ __forceinline__ void channel_walk(int n, int hw, size_t cs, size_t base, unsigned start,
                                             unsigned step, F f)
{
    const unsigned g = (unsigned)hw / V;
    const unsigned dj = step / g, dp = step % g;
    unsigned j = start / g, p = start % g;
    while (j < (unsigned)n) {
        f((size_t)j * cs + base + (size_t)p * V);
        j += dj;
        p += dp;
        if (p >= g) {
            p -= g;
            j++;
        }
    }
}

/* ---------------------------------------------------------------- activations (act.c) */

__device__ __forceinline__ float relu_f(float x)
{
    return x < 0.0f ? 0.0f : x;
}

__device__ __forceinline__ float relu6_f(float x)
{
    return x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x;
}

/* act.c's tanh: the same source (src/net/layers/act_impl.h) */
__device__ __forceinline__ float tanh_f(float xi) { return adapt_act_tanh(xi); }

/* 1 / (1 + e^-x) through e^-|x| so that neither tail cancels */
__device__ __forceinline__ float sigmoid_f(float x)
{
    const float e = expf(-fabsf(x));
    const float s = 1.0f / (1.0f + e);
    return x >= 0.0f ? s : e * s;
}

__device__ __forceinline__ float hardswish_f(float x)
{
    float t = x + 3.0f;
    t = t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t;
    return x * t / 6.0f;
}

template <int KIND> __device__ __forceinline__ float act_f(float x)
{
    if (KIND == ACU_RELU) return relu_f(x);
    if (KIND == ACU_RELU6) return relu6_f(x);
    if (KIND == ACU_TANH) return tanh_f(x);
    if (KIND == ACU_SIGMOID) return sigmoid_f(x);
    if (KIND == ACU_GELU) return adapt_act_gelu(x); /* act.c's: the same source */
    if (KIND == ACU_GELU_TANH) return adapt_act_gelu_tanh(x);
    return hardswish_f(x);
}

/* The gradient given r = y (x for hardswish and gelu) and dy, as act.c's *_back_span: relu and
 * relu6 compare y with the kinks (0 at y <= 0 and at y >= 6; a NaN y passes dy), hardswish is 0
 * below x = -3, dy (x/3 + 1/2) up to 3 inclusive, dy above (and for a NaN x); gelu's from
 * act_impl.h. */
template <int KIND> __device__ __forceinline__ float act_grad(float r, float dy)
{
    if (KIND == ACU_RELU) return r <= 0.0f ? 0.0f : dy;
    if (KIND == ACU_RELU6) return r <= 0.0f || r >= 6.0f ? 0.0f : dy;
    if (KIND == ACU_TANH) return (1.0f - r * r) * dy;
    if (KIND == ACU_SIGMOID) return dy * r * (1.0f - r);
    if (KIND == ACU_GELU) return adapt_act_gelu_grad(r) * dy;
    if (KIND == ACU_GELU_TANH) return adapt_act_gelu_tanh_grad(r) * dy;
    return r < -3.0f ? 0.0f : r <= 3.0f ? dy * (r / 3.0f + 0.5f) : dy;
}

template <int KIND> struct act_fwd_op {
    const float *x;
    float *y;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        fvec<V> a = ld<V>(x + i);
#pragma unroll
        for (int l = 0; l < V; l++) a.v[l] = act_f<KIND>(a.v[l]);
        st<V>(y + i, a);
    }
};

template <int KIND> struct act_bwd_op {
    const float *r; /* y, or x for hardswish and gelu */
    const float *dy;
    float *dx;
    int acc;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        const fvec<V> a = ld<V>(r + i);
        const fvec<V> g = ld<V>(dy + i);
        fvec<V> o;
#pragma unroll
        for (int l = 0; l < V; l++) o.v[l] = act_grad<KIND>(a.v[l], g.v[l]);
        if (acc) {
            const fvec<V> d = ld<V>(dx + i);
#pragma unroll
            for (int l = 0; l < V; l++) o.v[l] = d.v[l] + o.v[l];
        }
        st<V>(dx + i, o);
    }
};

template <int KIND> void act_forward_as(const float *x, float *y, size_t n, cudaStream_t s)
{
    act_fwd_op<KIND> op = {x, y};
    launch_map(op, n, aligned16(x) && aligned16(y), s);
}

template <int KIND>
void act_backward_as(const float *r, const float *dy, float *dx, size_t n, int acc, cudaStream_t s)
{
    act_bwd_op<KIND> op = {r, dy, dx, acc};
    launch_map(op, n, aligned16(r) && aligned16(dy) && aligned16(dx), s);
}

/* ---------------------------------------------------------------- copy, add (add.c, flatten.c) */

struct acc_op { /* dst += src */
    const float *src;
    float *dst;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        const fvec<V> a = ld<V>(src + i);
        fvec<V> d = ld<V>(dst + i);
#pragma unroll
        for (int l = 0; l < V; l++) d.v[l] += a.v[l];
        st<V>(dst + i, d);
    }
};

struct add_op { /* y = a + b */
    const float *a, *b;
    float *y;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        fvec<V> u = ld<V>(a + i);
        const fvec<V> w = ld<V>(b + i);
#pragma unroll
        for (int l = 0; l < V; l++) u.v[l] += w.v[l];
        st<V>(y + i, u);
    }
};

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

/* ---------------------------------------------------------------- batch norm (batchnorm.c) */

/* One block per channel: shifted moments (shift = the channel's first element, as the CPU) in
 * double, then thread 0 forms mean, invstd, the running statistics and the affine coefficients
 * as batchnorm.c does, then the block normalises the channel (still in L2). */
template <int V>
__global__ void __launch_bounds__(kChanThreads)
    bn_fwd_train_kernel(const float *x, float *y, const float *gamma, const float *beta,
                        float *rmean, float *rvar, float *saved, int n, int c, int hw, float eps,
                        float mom)
{
    const int ch = blockIdx.x;
    const size_t cs = (size_t)c * hw, base = (size_t)ch * hw;
    const double shift = x[base];
    double s1 = 0.0, s2 = 0.0;
    channel_walk<V>(n, hw, cs, base, threadIdx.x, kChanThreads, [&](size_t o) {
        const fvec<V> a = ld<V>(x + o);
#pragma unroll
        for (int l = 0; l < V; l++) {
            const double d = (double)a.v[l] - shift;
            s1 += d;
            s2 += d * d;
        }
    });
    block_sum2<kChanThreads>(s1, s2);
    __shared__ float coef[2];
    if (threadIdx.x == 0) {
        const double M = (double)n * (double)hw;
        const double d = s1 / M;
        double var = __dsub_rn(s2 / M, __dmul_rn(d, d));
        if (var < 0.0) var = 0.0;
        const double mu = shift + d;
        const double is = 1.0 / sqrt(var + (double)eps);
        saved[ch] = (float)mu;
        saved[c + ch] = (float)is;
        const float keep = 1.0f - mom;
        rmean[ch] = __fadd_rn(__fmul_rn(keep, rmean[ch]), __fmul_rn(mom, (float)mu));
        rvar[ch] = __fadd_rn(__fmul_rn(keep, rvar[ch]),
                             __fmul_rn(mom, (float)(__dmul_rn(var, M) / (M - 1.0))));
        const float a = __fmul_rn(gamma[ch], (float)is);
        coef[0] = a;
        coef[1] = __fsub_rn(beta[ch], __fmul_rn((float)mu, a));
    }
    __syncthreads();
    const float a = coef[0], b = coef[1];
    channel_walk<V>(n, hw, cs, base, threadIdx.x, kChanThreads, [&](size_t o) {
        fvec<V> v = ld<V>(x + o);
#pragma unroll
        for (int l = 0; l < V; l++) v.v[l] = v.v[l] * a + b;
        st<V>(y + o, v);
    });
}

/* grid (slices, channels): each block forms its channel's a = gamma / sqrtf(var + eps),
 * b = beta - mean a in float as batchnorm.c, then y = x a + b over its slice */
template <int V>
__global__ void bn_fwd_eval_kernel(const float *x, float *y, const float *gamma, const float *beta,
                                   const float *rmean, const float *rvar, int n, int c, int hw,
                                   float eps)
{
    const size_t cs = (size_t)c * hw;
    for (int ch = blockIdx.y; ch < c; ch += gridDim.y) {
        const float a = __fdiv_rn(gamma[ch], __fsqrt_rn(__fadd_rn(rvar[ch], eps)));
        const float b = __fsub_rn(beta[ch], __fmul_rn(rmean[ch], a));
        channel_walk<V>(n, hw, cs, (size_t)ch * hw, blockIdx.x * blockDim.x + threadIdx.x,
                        gridDim.x * blockDim.x, [&](size_t o) {
                            fvec<V> v = ld<V>(x + o);
#pragma unroll
                            for (int l = 0; l < V; l++) v.v[l] = v.v[l] * a + b;
                            st<V>(y + o, v);
                        });
    }
}

/* One block per channel: s1 = sum dy, s2 = sum dy (x - mean) in double; thread 0 adds the
 * parameter gradients and forms batchnorm.c's A = gamma invstd, B = -A invstd^2 s2 / M,
 * K = -A s1 / M - B mean (double, rounded to float); then dx (=|+=) dy A + (x B + K). */
template <int V>
__global__ void __launch_bounds__(kChanThreads)
    bn_bwd_kernel(const float *x, const float *dy, const float *gamma, const float *saved,
                  float *dx, float *dgamma, float *dbeta, int n, int c, int hw, int acc)
{
    const int ch = blockIdx.x;
    const size_t cs = (size_t)c * hw, base = (size_t)ch * hw;
    const float m = saved[ch];
    const double is = (double)saved[c + ch];
    double s1 = 0.0, s2 = 0.0;
    channel_walk<V>(n, hw, cs, base, threadIdx.x, kChanThreads, [&](size_t o) {
        const fvec<V> g = ld<V>(dy + o);
        const fvec<V> a = ld<V>(x + o);
#pragma unroll
        for (int l = 0; l < V; l++) {
            s1 += g.v[l];
            s2 += (double)g.v[l] * ((double)a.v[l] - (double)m);
        }
    });
    block_sum2<kChanThreads>(s1, s2);
    __shared__ float coef[3];
    if (threadIdx.x == 0) {
        if (dbeta) dbeta[ch] += (float)s1;
        if (dgamma) dgamma[ch] += (float)__dmul_rn(s2, is);
        const double M = (double)n * (double)hw;
        const double A = __dmul_rn((double)gamma[ch], is);
        const double B = __dmul_rn(__dmul_rn(__dmul_rn(-A, is), is), s2) / M;
        const double K = __dsub_rn(__dmul_rn(-A, s1) / M, __dmul_rn(B, (double)m));
        coef[0] = (float)A;
        coef[1] = (float)B;
        coef[2] = (float)K;
    }
    if (!dx) return; /* uniform over the block */
    __syncthreads();
    const float A = coef[0], B = coef[1], K = coef[2];
    channel_walk<V>(n, hw, cs, base, threadIdx.x, kChanThreads, [&](size_t o) {
        const fvec<V> g = ld<V>(dy + o);
        const fvec<V> a = ld<V>(x + o);
        fvec<V> r;
        if (acc) r = ld<V>(dx + o);
#pragma unroll
        for (int l = 0; l < V; l++) {
            const float v = g.v[l] * A + (a.v[l] * B + K);
            r.v[l] = acc ? r.v[l] + v : v;
        }
        st<V>(dx + o, r);
    });
}

/* ---------------------------------------------------------------- bias (conv2d.c, fc.c) */

/* hw == 1 ((n, c) rows, the linear layer): channel = index mod c */
template <typename I> __global__ void bias_rows_kernel(float *y, const float *b, I total, int c)
{
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (I)gridDim.x * blockDim.x)
        y[e] += b[e % (I)c];
}

/* grid (slices, channels), as bn_fwd_eval_kernel */
template <int V> __global__ void bias_planes_kernel(float *y, const float *b, int n, int c, int hw)
{
    const size_t cs = (size_t)c * hw;
    for (int ch = blockIdx.y; ch < c; ch += gridDim.y) {
        const float bc = b[ch];
        channel_walk<V>(n, hw, cs, (size_t)ch * hw, blockIdx.x * blockDim.x + threadIdx.x,
                        gridDim.x * blockDim.x, [&](size_t o) {
                            fvec<V> v = ld<V>(y + o);
#pragma unroll
                            for (int l = 0; l < V; l++) v.v[l] += bc;
                            st<V>(y + o, v);
                        });
    }
}

/* hw == 1: one thread per channel sums its column in row order in double (fc.c's loop) */
__global__ void bias_grad_rows_kernel(const float *dy, float *db, int n, int c)
{
    for (int ch = blockIdx.x * blockDim.x + threadIdx.x; ch < c; ch += gridDim.x * blockDim.x) {
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += dy[(size_t)i * c + ch];
        db[ch] += (float)sum;
    }
}

/* one block per channel, the sum in double */
template <int V>
__global__ void __launch_bounds__(kChanThreads)
    bias_grad_planes_kernel(const float *dy, float *db, int n, int c, int hw)
{
    const int ch = blockIdx.x;
    double s1 = 0.0, s2 = 0.0; /* s2 stays 0: block_sum2 reduces pairs */
    channel_walk<V>(n, hw, (size_t)c * hw, (size_t)ch * hw, threadIdx.x, kChanThreads,
                    [&](size_t o) {
                        const fvec<V> g = ld<V>(dy + o);
#pragma unroll
                        for (int l = 0; l < V; l++) s1 += g.v[l];
                    });
    block_sum2<kChanThreads>(s1, s2);
    if (threadIdx.x == 0) db[ch] += (float)s1;
}

/* ---------------------------------------------------------------- dropout.c, concat.c */

/* One thread per Philox block q (elements 4q .. 4q+3): the keep bit of element i is
 * adapt_u32_to_unit_float(bits) >= p, out = in * scale or 0, added to out under acc. */
__global__ void dropout_kernel(const float *in, float *out, size_t n, float p, float scale,
                               uint64_t seed, uint64_t stream, int acc, bool vec)
{
    const size_t nq = (n + 3) / 4;
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < nq;
         q += (size_t)gridDim.x * blockDim.x) {
        const adapt_u32x4 r = adapt_rng_block(seed, stream, q);
        const size_t i0 = 4 * q;
        if (vec && i0 + 4 <= n) {
            const fvec<4> a = ld<4>(in + i0);
            fvec<4> o;
            if (acc) o = ld<4>(out + i0);
#pragma unroll
            for (int l = 0; l < 4; l++) {
                const float v =
                    adapt_u32_to_unit_float(r.v[l]) >= p ? __fmul_rn(a.v[l], scale) : 0.0f;
                o.v[l] = acc ? o.v[l] + v : v;
            }
            st<4>(out + i0, o);
        } else {
            for (int l = 0; l < 4 && i0 + l < n; l++) {
                const size_t i = i0 + l;
                const float v =
                    adapt_u32_to_unit_float(r.v[l]) >= p ? __fmul_rn(in[i], scale) : 0.0f;
                out[i] = acc ? out[i] + v : v;
            }
        }
    }
}

void dropout_launch(const float *in, float *out, size_t n, float p, uint64_t seed, uint64_t stream,
                    int acc, cudaStream_t s)
{
    if (n == 0) return;
    const float scale = 1.0f / (1.0f - p); /* as dropout.c, in float */
    dropout_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, s>>>(
        in, out, n, p, scale, seed, stream, acc, aligned16(in) && aligned16(out));
}

/* dst[r, 0..width) (=|+=) src[r, 0..width) for rows r < rows, rows spitch / dpitch floats
 * apart; grid (column slices, rows) */
template <int V>
__global__ void rows_copy_kernel(const float *src, size_t spitch, float *dst, size_t dpitch,
                                 int rows, size_t width, int acc)
{
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *sr = src + (size_t)r * spitch;
        float *dr = dst + (size_t)r * dpitch;
        for (size_t j = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * V; j < width;
             j += (size_t)gridDim.x * blockDim.x * V) {
            fvec<V> v = ld<V>(sr + j);
            if (acc) {
                const fvec<V> d = ld<V>(dr + j);
#pragma unroll
                for (int l = 0; l < V; l++) v.v[l] = d.v[l] + v.v[l];
            }
            st<V>(dr + j, v);
        }
    }
}

void rows_copy(const float *src, size_t spitch, float *dst, size_t dpitch, int rows, size_t width,
               int acc, cudaStream_t s)
{
    if (rows <= 0 || width == 0) return;
    const bool vec =
        width % 4 == 0 && spitch % 4 == 0 && dpitch % 4 == 0 && aligned16(src) && aligned16(dst);
    const size_t units = vec ? width / 4 : width;
    const unsigned gy = (unsigned)(rows < 65535 ? rows : 65535);
    size_t gx = (units + kThreads - 1) / kThreads;
    const size_t gx_max = kMaxBlocks / gy ? kMaxBlocks / gy : 1;
    if (gx > gx_max) gx = gx_max;
    const dim3 grid((unsigned)gx, gy);
    if (vec)
        rows_copy_kernel<4><<<grid, kThreads, 0, s>>>(src, spitch, dst, dpitch, rows, width, acc);
    else
        rows_copy_kernel<1><<<grid, kThreads, 0, s>>>(src, spitch, dst, dpitch, rows, width, acc);
}

/* ---------------------------------------------------------------- cross-entropy (xent.c) */

/* One block; one warp per row. The arg-max is xent.c's scan (z[j] > m from m = z[0]): the
 * first maximum of the values, or 0 when z[0] is NaN (a NaN never replaces it nor is taken
 * after it). Lanes take the first maximum of their own columns, then the warp keeps the larger
 * value, the smaller column on ties. */
__global__ void __launch_bounds__(kXentThreads)
    xent_kernel(const float *logits, const int *labels, int n, int c, float *dl, double *out)
{
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const float inv_n = 1.0f / (float)n;
    double loss = 0.0, ok = 0.0; /* lane 0 of each warp */
    for (int i = wid; i < n; i += nw) {
        const float *z = logits + (size_t)i * c;
        float m = -INFINITY;
        int am = INT_MAX; /* none yet */
        for (int j = lane; j < c; j += 32) {
            const float v = z[j];
            if (v > m || (am == INT_MAX && v == v)) {
                m = v;
                am = j;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
            const int a2 = __shfl_xor_sync(0xffffffffu, am, o);
            if (a2 != INT_MAX && (am == INT_MAX || m2 > m || (m2 == m && a2 < am))) {
                m = m2;
                am = a2;
            }
        }
        const float z0 = z[0];
        if (z0 != z0) {
            m = z0;
            am = 0;
        }
        const int y = labels[i];
        const bool yok = y >= 0 && y < c;
        float *d = dl ? dl + (size_t)i * c : nullptr;
        double se = 0.0;
        for (int j = lane; j < c; j += 32) {
            const float e = expf(z[j] - m);
            if (d) d[j] = e;
            se += e;
        }
        se = warp_sum(se);
        if (d) {
            const float inv = (float)(1.0 / se);
            for (int j = lane; j < c; j += 32) {
                float v = __fmul_rn(d[j] * inv, inv_n); /* stored, then -1/n: no FMA */
                if (j == y) v -= inv_n;
                d[j] = v;
            }
        }
        if (lane == 0) {
            loss += ((double)m + log(se)) - (yok ? (double)z[y] : (double)NAN);
            ok += am == y ? 1.0 : 0.0;
        }
    }
    block_sum2<kXentThreads>(loss, ok);
    if (threadIdx.x == 0) {
        out[0] = loss;
        out[1] = ok;
    }
}

/* ---------------------------------------------------------------- SGD (optim.c) */

/* adapt_sgd_prepare for one element: g * scale (when scale != 1), then + l1 * sign(w) (when
 * l1 != 0), each operation rounded as optim.c's scalar loop (no FMA) */
__device__ __forceinline__ float sgd_prepared(float g, float w, float scale, float l1)
{
    if (scale != 1.0f) g = __fmul_rn(g, scale);
    if (l1 != 0.0f) g = __fadd_rn(g, __fmul_rn(l1, (float)((w > 0.0f) - (w < 0.0f))));
    return g;
}

/* adapt_sgd_prepare then adapt_sgd_update for one element group, each operation rounded as
 * optim.c's scalar loops (no FMA). */
struct sgd_op {
    float *w, *g, *b;
    const float *l1src, *l2src;
    float lr, mom, l2, l1, scale;
    int nesterov, first;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        fvec<V> gw = ld<V>(g + i);
        fvec<V> ww = ld<V>(w + i);
        const fvec<V> dw = l2src == w ? ww : ld<V>(l2src + i);
        fvec<V> bw;
        const bool read_b = mom != 0.0f && !first;
        if (read_b) bw = ld<V>(b + i);
        fvec<V> sw;
        if (l1 != 0.0f) sw = l1src == w ? ww : ld<V>(l1src + i);
#pragma unroll
        for (int l = 0; l < V; l++) {
            const float gv = sgd_prepared(gw.v[l], l1 != 0.0f ? sw.v[l] : 0.0f, scale, l1);
            const float d = __fadd_rn(gv, __fmul_rn(l2, dw.v[l]));
            const float bi = read_b ? __fadd_rn(__fmul_rn(mom, bw.v[l]), d) : d;
            bw.v[l] = bi;
            const float u = (nesterov && mom != 0.0f) ? __fadd_rn(d, __fmul_rn(mom, bi)) : bi;
            ww.v[l] = __fsub_rn(ww.v[l], __fmul_rn(lr, u));
            gw.v[l] = 0.0f;
        }
        st<V>(b + i, bw);
        st<V>(w + i, ww);
        st<V>(g + i, gw);
    }
};

/* ---------------------------------------------------------------- im2col (im2col.c) */

/* The value a lowered or permuted element is stored as: float32 as it is; fp16 and bf16
 * (conv and linear in half precision) rounded to nearest, which is exact for values already
 * in that format. */
template <typename T> __device__ __forceinline__ T store_as(float v)
{
    return v;
}
template <> __device__ __forceinline__ __half store_as<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 store_as<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* One thread per col element of n samples: row r = (ci k + ky) k + kx, column
 * i (ho wo) + oy wo + ox, so the row of a sample's output position holds all n samples side
 * by side (n = 1: one sample's matrix). xs: floats per sample. */
template <typename I, typename T>
__global__ void im2col_kernel(const float *x, T *col, I total, int h, int w, int k, int stride,
                              int pad, int dil, int wo, I ncol, int n, size_t xs)
{
    const int kk = k * k;
    const I nb = ncol * (I)n;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (I)gridDim.x * blockDim.x) {
        const I r = e / nb, q = e - r * nb, i = q / ncol;
        const int pc = (int)(q - i * ncol);
        const int ci = (int)(r / (I)kk), kr = (int)(r - (I)ci * kk);
        const int ky = kr / k, kx = kr - ky * k;
        const int oy = pc / wo, ox = pc - oy * wo;
        const int iy = oy * stride - pad + ky * dil, ix = ox * stride - pad + kx * dil;
        col[e] = store_as<T>((iy >= 0 && iy < h && ix >= 0 && ix < w)
                                 ? x[(size_t)i * xs + ((size_t)ci * h + iy) * w + ix]
                                 : 0.0f);
    }
}

/* One thread per input element of n samples (total = n c h w): the col entries that read it,
 * in (ky, kx) order. ldc: col's row length (ho wo for one sample's matrix, n ho wo for im2col's
 * n-sample layout). im2col.c adds them onto x itself when pad == 0 and stride == 1, else into
 * a zeroed scratch plane that is then added to x; the sums are grouped the same way here. */
template <typename I>
__global__ void col2im_kernel(const float *col, float *x, I total, int c, int h, int w, int k,
                              int stride, int pad, int dil, int ho, int wo, size_t ldc)
{
    const I plane = (I)h * (I)w, image = plane * (I)c;
    const size_t ncol = (size_t)ho * wo, kk = (size_t)k * k;
    const bool direct = pad == 0 && stride == 1;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (I)gridDim.x * blockDim.x) {
        const I i = e / image, ci = (e - i * image) / plane;
        const int r = (int)(e - i * image - ci * plane), iy = r / w, ix = r - iy * w;
        const float *cc = col + (size_t)ci * kk * ldc + (size_t)i * ncol;
        float sum = direct ? x[e] : 0.0f;
        for (int ky = 0; ky < k; ky++) {
            const int ty = iy + pad - ky * dil;
            if (ty < 0) break; /* ty falls as ky grows */
            if (ty % stride) continue;
            const int oy = ty / stride;
            if (oy >= ho) continue;
            for (int kx = 0; kx < k; kx++) {
                const int tx = ix + pad - kx * dil;
                if (tx < 0) break;
                if (tx % stride) continue;
                const int ox = tx / stride;
                if (ox >= wo) continue;
                sum += cc[(size_t)(ky * k + kx) * ldc + (size_t)oy * wo + ox];
            }
        }
        x[e] = direct ? sum : x[e] + sum;
    }
}

/* y (b, a, p) = x (a, b, p), stored as T: one thread per element of y */
template <typename I, typename T>
__global__ void swap_kernel(const float *x, T *y, I total, I a, I b, I p)
{
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (I)gridDim.x * blockDim.x) {
        const I bi = e / (a * p), q = e - bi * a * p, ai = q / p, pi = q - ai * p;
        y[e] = store_as<T>(x[((size_t)ai * b + bi) * p + pi]);
    }
}

/* ---------------------------------------------------------------- sum of squares */

template <int V>
__global__ void __launch_bounds__(kThreads) sumsq_kernel(const float *x, size_t n, double *out)
{
    const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t step = (size_t)gridDim.x * blockDim.x;
    double sq = 0.0, ab = 0.0;
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
    block_sum2<kThreads>(sq, ab);
    if (threadIdx.x == 0) {
        atomicAdd(&out[0], sq);
        atomicAdd(&out[1], ab);
    }
}

/* ---------------------------------------------------------------- launch helpers */

/* Blocks per channel for the (slices, channels) grids: about kMaxBlocks in all. */
dim3 channel_grid(int n, int c, int hw, int v)
{
    const unsigned gy = (unsigned)(c < 65535 ? c : 65535);
    const size_t units = (size_t)n * (size_t)(hw / v);
    size_t gx = (units + kThreads - 1) / kThreads;
    const size_t gx_max = kMaxBlocks / gy ? kMaxBlocks / gy : 1;
    if (gx > gx_max) gx = gx_max;
    return dim3((unsigned)gx, gy);
}

} // namespace

/* ---------------------------------------------------------------- launchers */

extern "C" void acu_act_forward(int kind, const float *x, float *y, size_t count, cudaStream_t s)
{
    switch (kind) {
    case ACU_RELU: act_forward_as<ACU_RELU>(x, y, count, s); break;
    case ACU_RELU6: act_forward_as<ACU_RELU6>(x, y, count, s); break;
    case ACU_TANH: act_forward_as<ACU_TANH>(x, y, count, s); break;
    case ACU_SIGMOID: act_forward_as<ACU_SIGMOID>(x, y, count, s); break;
    case ACU_HARDSWISH: act_forward_as<ACU_HARDSWISH>(x, y, count, s); break;
    case ACU_GELU: act_forward_as<ACU_GELU>(x, y, count, s); break;
    case ACU_GELU_TANH: act_forward_as<ACU_GELU_TANH>(x, y, count, s); break;
    default: break;
    }
}

extern "C" void acu_act_backward(int kind, const float *x, const float *y, const float *dy,
                                 float *dx, size_t count, int acc, cudaStream_t s)
{
    switch (kind) {
    case ACU_RELU: act_backward_as<ACU_RELU>(y, dy, dx, count, acc, s); break;
    case ACU_RELU6: act_backward_as<ACU_RELU6>(y, dy, dx, count, acc, s); break;
    case ACU_TANH: act_backward_as<ACU_TANH>(y, dy, dx, count, acc, s); break;
    case ACU_SIGMOID: act_backward_as<ACU_SIGMOID>(y, dy, dx, count, acc, s); break;
    case ACU_HARDSWISH: act_backward_as<ACU_HARDSWISH>(x, dy, dx, count, acc, s); break;
    case ACU_GELU: act_backward_as<ACU_GELU>(x, dy, dx, count, acc, s); break;
    case ACU_GELU_TANH: act_backward_as<ACU_GELU_TANH>(x, dy, dx, count, acc, s); break;
    default: break;
    }
}

extern "C" void acu_copy(const float *src, float *dst, size_t count, int acc, cudaStream_t s)
{
    if (count == 0) return;
    if (acc) {
        acc_op op = {src, dst};
        launch_map(op, count, aligned16(src) && aligned16(dst), s);
    } else if (src != dst) {
        cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, s);
    }
}

extern "C" void acu_add(const float *a, const float *b, float *y, size_t count, cudaStream_t s)
{
    add_op op = {a, b, y};
    launch_map(op, count, aligned16(a) && aligned16(b) && aligned16(y), s);
}

extern "C" void acu_zero(float *x, size_t count, cudaStream_t s)
{
    if (count) cudaMemsetAsync(x, 0, count * sizeof(float), s);
}

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

extern "C" void acu_bn_forward_train(const float *x, float *y, const float *gamma,
                                     const float *beta, float *running_mean, float *running_var,
                                     float *saved, int n, int c, int hw, float eps, float momentum,
                                     cudaStream_t s)
{
    if (n <= 0 || c <= 0 || hw <= 0) return;
    if (hw % 4 == 0 && aligned16(x) && aligned16(y))
        bn_fwd_train_kernel<4><<<c, kChanThreads, 0, s>>>(
            x, y, gamma, beta, running_mean, running_var, saved, n, c, hw, eps, momentum);
    else
        bn_fwd_train_kernel<1><<<c, kChanThreads, 0, s>>>(
            x, y, gamma, beta, running_mean, running_var, saved, n, c, hw, eps, momentum);
}

extern "C" void acu_bn_forward_eval(const float *x, float *y, const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var, int n,
                                    int c, int hw, float eps, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || hw <= 0) return;
    const bool vec = hw % 4 == 0 && aligned16(x) && aligned16(y);
    const dim3 grid = channel_grid(n, c, hw, vec ? 4 : 1);
    if (vec)
        bn_fwd_eval_kernel<4>
            <<<grid, kThreads, 0, s>>>(x, y, gamma, beta, running_mean, running_var, n, c, hw, eps);
    else
        bn_fwd_eval_kernel<1>
            <<<grid, kThreads, 0, s>>>(x, y, gamma, beta, running_mean, running_var, n, c, hw, eps);
}

extern "C" void acu_bn_backward(const float *x, const float *dy, const float *gamma,
                                const float *saved, float *dx, float *dgamma, float *dbeta, int n,
                                int c, int hw, int acc, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || hw <= 0) return;
    if (hw % 4 == 0 && aligned16(x) && aligned16(dy) && aligned16(dx))
        bn_bwd_kernel<4>
            <<<c, kChanThreads, 0, s>>>(x, dy, gamma, saved, dx, dgamma, dbeta, n, c, hw, acc);
    else
        bn_bwd_kernel<1>
            <<<c, kChanThreads, 0, s>>>(x, dy, gamma, saved, dx, dgamma, dbeta, n, c, hw, acc);
}

extern "C" void acu_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || hw <= 0) return;
    if (hw == 1) {
        const size_t total = (size_t)n * c;
        if (small_index(total))
            bias_rows_kernel<uint32_t>
                <<<blocks_for(total), kThreads, 0, s>>>(y, b, (uint32_t)total, c);
        else
            bias_rows_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(y, b, total, c);
        return;
    }
    const bool vec = hw % 4 == 0 && aligned16(y);
    const dim3 grid = channel_grid(n, c, hw, vec ? 4 : 1);
    if (vec)
        bias_planes_kernel<4><<<grid, kThreads, 0, s>>>(y, b, n, c, hw);
    else
        bias_planes_kernel<1><<<grid, kThreads, 0, s>>>(y, b, n, c, hw);
}

extern "C" void acu_bias_grad(const float *dy, float *db, int n, int c, int hw, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || hw <= 0) return;
    if (hw == 1) {
        bias_grad_rows_kernel<<<blocks_for((size_t)c), kThreads, 0, s>>>(dy, db, n, c);
        return;
    }
    if (hw % 4 == 0 && aligned16(dy))
        bias_grad_planes_kernel<4><<<c, kChanThreads, 0, s>>>(dy, db, n, c, hw);
    else
        bias_grad_planes_kernel<1><<<c, kChanThreads, 0, s>>>(dy, db, n, c, hw);
}

extern "C" void acu_dropout_forward(const float *x, float *y, size_t count, float p, uint64_t seed,
                                    uint64_t stream, cudaStream_t s)
{
    dropout_launch(x, y, count, p, seed, stream, 0, s);
}

extern "C" void acu_dropout_backward(const float *dy, float *dx, size_t count, float p,
                                     uint64_t seed, uint64_t stream, int acc, cudaStream_t s)
{
    dropout_launch(dy, dx, count, p, seed, stream, acc, s);
}

extern "C" void acu_concat_forward(const float *x, float *y, int n, int c0, int ci, int ctot,
                                   int hw, cudaStream_t s)
{
    if (n <= 0 || hw <= 0 || ci <= 0) return;
    const size_t m = (size_t)ci * hw, out = (size_t)ctot * hw;
    rows_copy(x, m, y + (size_t)c0 * hw, out, n, m, 0, s);
}

extern "C" void acu_concat_backward(const float *dy, float *dx, int n, int c0, int ci, int ctot,
                                    int hw, int acc, cudaStream_t s)
{
    if (n <= 0 || hw <= 0 || ci <= 0 || !dx) return;
    const size_t m = (size_t)ci * hw, out = (size_t)ctot * hw;
    rows_copy(dy + (size_t)c0 * hw, out, dx, m, n, m, acc, s);
}

extern "C" void acu_softmax_xent(const float *logits, const int *labels, int n, int c,
                                 float *dlogits, double *out, cudaStream_t s)
{
    if (n <= 0 || c <= 0) { /* no rows: loss 0, none correct */
        cudaMemsetAsync(out, 0, 2 * sizeof(double), s);
        return;
    }
    xent_kernel<<<1, kXentThreads, 0, s>>>(logits, labels, n, c, dlogits, out);
}

extern "C" void acu_sgd_update(float *w, float *g, float *b, const float *l1_src,
                               const float *l2_src, size_t count, float lr, float momentum,
                               float l2, float l1_coef, float grad_scale, int nesterov, int first,
                               cudaStream_t s)
{
    if (count == 0) return;
    const float *l2s = l2_src ? l2_src : w;
    const float *l1s = l1_src ? l1_src : w;
    sgd_op op = {w, g, b, l1s, l2s, lr, momentum, l2, l1_coef, grad_scale, nesterov, first};
    const bool vec = aligned16(w) && aligned16(g) && aligned16(b) && aligned16(l2s) &&
                     (l1_coef == 0.0f || aligned16(l1s));
    launch_map(op, count, vec, s);
}

template <typename T>
void im2col_launch(const float *x, T *col, int n, int c, int h, int w, int k, int stride, int pad,
                   int dil, int ho, int wo, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || k <= 0 || ho <= 0 || wo <= 0) return;
    const size_t ncol = (size_t)ho * wo, total = (size_t)c * k * k * ncol * n;
    const size_t xs = (size_t)c * h * w;
    if (small_index(total))
        im2col_kernel<uint32_t, T><<<blocks_for(total), kThreads, 0, s>>>(
            x, col, (uint32_t)total, h, w, k, stride, pad, dil, wo, (uint32_t)ncol, n, xs);
    else
        im2col_kernel<size_t, T><<<blocks_for(total), kThreads, 0, s>>>(
            x, col, total, h, w, k, stride, pad, dil, wo, ncol, n, xs);
}

void col2im_launch(const float *col, float *x, int n, int c, int h, int w, int k, int stride,
                   int pad, int dil, int ho, int wo, cudaStream_t s)
{
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0 || ho <= 0 || wo <= 0) return;
    const size_t total = (size_t)n * c * h * w, ldc = (size_t)n * ho * wo;
    if (small_index(total))
        col2im_kernel<uint32_t><<<blocks_for(total), kThreads, 0, s>>>(
            col, x, (uint32_t)total, c, h, w, k, stride, pad, dil, ho, wo, ldc);
    else
        col2im_kernel<size_t><<<blocks_for(total), kThreads, 0, s>>>(col, x, total, c, h, w, k,
                                                                     stride, pad, dil, ho, wo, ldc);
}

template <typename T> void swap_launch(const float *x, T *y, size_t a, size_t b, size_t p,
                                       cudaStream_t s)
{
    const size_t total = a * b * p;
    if (total == 0) return;
    if (small_index(total))
        swap_kernel<uint32_t, T><<<blocks_for(total), kThreads, 0, s>>>(
            x, y, (uint32_t)total, (uint32_t)a, (uint32_t)b, (uint32_t)p);
    else
        swap_kernel<size_t, T><<<blocks_for(total), kThreads, 0, s>>>(x, y, total, a, b, p);
}

extern "C" void acu_im2col(const float *x, float *col, int c, int h, int w, int k, int stride,
                           int pad, int dil, int ho, int wo, cudaStream_t s)
{
    im2col_launch(x, col, 1, c, h, w, k, stride, pad, dil, ho, wo, s);
}

extern "C" void acu_col2im(const float *col, float *x, int c, int h, int w, int k, int stride,
                           int pad, int dil, int ho, int wo, cudaStream_t s)
{
    col2im_launch(col, x, 1, c, h, w, k, stride, pad, dil, ho, wo, s);
}

extern "C" void acu_im2col_half(const float *x, void *col, int half, int n, int c, int h, int w,
                                int k, int stride, int pad, int dil, int ho, int wo, cudaStream_t s)
{
    if (half == ACU_BF16)
        im2col_launch(x, (__nv_bfloat16 *)col, n, c, h, w, k, stride, pad, dil, ho, wo, s);
    else
        im2col_launch(x, (__half *)col, n, c, h, w, k, stride, pad, dil, ho, wo, s);
}

extern "C" void acu_col2im_batch(const float *col, float *x, int n, int c, int h, int w, int k,
                                 int stride, int pad, int dil, int ho, int wo, cudaStream_t s)
{
    col2im_launch(col, x, n, c, h, w, k, stride, pad, dil, ho, wo, s);
}

extern "C" void acu_swap(const float *x, void *y, int half, size_t a, size_t b, size_t p,
                         cudaStream_t s)
{
    if (half == ACU_FP16)
        swap_launch(x, (__half *)y, a, b, p, s);
    else if (half == ACU_BF16)
        swap_launch(x, (__nv_bfloat16 *)y, a, b, p, s);
    else
        swap_launch(x, (float *)y, a, b, p, s);
}

extern "C" void acu_sumsq(const float *x, size_t count, double *out, cudaStream_t s)
{
    cudaMemsetAsync(out, 0, 2 * sizeof(double), s);
    if (count == 0) return;
    const bool vec = aligned16(x);
    size_t b = ((vec ? count / 4 : count) + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    if (b > kSumsqBlocks) b = kSumsqBlocks;
    if (vec)
        sumsq_kernel<4><<<(unsigned)b, kThreads, 0, s>>>(x, count, out);
    else
        sumsq_kernel<1><<<(unsigned)b, kThreads, 0, s>>>(x, count, out);
}

/* ---------------------------------------------------------------- precision policies */

namespace
{

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

struct sgd_prepare_op { /* g = g * scale + l1 * sign(w) */
    float *g;
    const float *w;
    float scale, l1;
    template <int V> __device__ __forceinline__ void run(size_t i) const
    {
        fvec<V> gv = ld<V>(g + i);
        fvec<V> wv;
        if (l1 != 0.0f) wv = ld<V>(w + i);
#pragma unroll
        for (int l = 0; l < V; l++)
            gv.v[l] = sgd_prepared(gv.v[l], l1 != 0.0f ? wv.v[l] : 0.0f, scale, l1);
        st<V>(g + i, gv);
    }
};

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

} // namespace

extern "C" void acu_scale_acc(float *g, float *acc, size_t count, float scale, cudaStream_t s)
{
    if (scale == 1.0f && !acc) return;
    scale_acc_op op = {g, acc, scale, NULL};
    launch_map(op, count, aligned16(g) && (!acc || aligned16(acc)), s);
}

extern "C" void acu_normalize_acc(float *g, float *acc, size_t count, const double *sumsq,
                                  cudaStream_t s)
{
    scale_acc_op op = {g, acc, 1.0f, sumsq};
    launch_map(op, count, aligned16(g) && (!acc || aligned16(acc)), s);
}

extern "C" void acu_sgd_prepare(float *g, const float *w, size_t count, float scale, float l1,
                                cudaStream_t s)
{
    if (scale == 1.0f && l1 == 0.0f) return;
    sgd_prepare_op op = {g, w, scale, l1};
    launch_map(op, count, aligned16(g) && (l1 == 0.0f || aligned16(w)), s);
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
