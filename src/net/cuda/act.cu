/* src/net/cuda/act.cu: activations, copies and sums, dropout and concat: the GPU twins of act.c,
 * add.c, flatten.c, dropout.c and concat.c
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/base/rng.h"
#include "src/net/layers/act_impl.h"

#include "src/net/cuda/kernels_impl.cuh"

namespace {

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

} // namespace

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
