/* src/net/cuda/conv.cu: the bias of conv2d.c / fc.c and the convolution lowering of im2col.c, in
 * float32 and, for the half-precision products, into fp16 / bf16
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "src/net/cuda/kernels_impl.cuh"

namespace {

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

} // namespace

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
