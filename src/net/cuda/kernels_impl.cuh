/* src/net/cuda/kernels_impl.cuh: what the GPU engine's kernel files in src/net/cuda/ share
 * (each the device twin of a CPU layer family; their launchers are declared in kernels.h).
 *
 * Each kernel follows its CPU layer's arithmetic: activations (src/net/layers/act.c; tanh and
 * gelu from the same source, act_impl.h), copies and sums (add.c, flatten.c), pooling
 * (pool.c), batch norm (batchnorm.c), bias of conv2d.c / linear.c (fc.c), dropout
 * (dropout.c), concat (concat.c), softmax cross-entropy (xent.c), one SGD step
 * (src/net/optim.c) and the convolution lowering (im2col.c). Where the CPU rounds a product
 * before adding it (batch-norm coefficients and running statistics, the SGD update, dropout's
 * scaling, the cross-entropy gradient, the average-pool gradient) the kernels round it too
 * (__fmul_rn and friends: no contraction into FMA); the vectorised CPU loops may contract, and
 * so may these.
 *
 * Element-wise kernels walk the data grid-stride, four floats at a time (float4) when every
 * pointer is 16-byte aligned and a scalar tail after (map_kernel, launch_map). Reductions
 * accumulate in double: batch norm and the bias gradient run one block per channel (summation
 * order fixed by the block size, so repeated runs agree bit for bit), cross-entropy one block
 * for the batch, the sum of squares one block per slice of the tensor, combined by atomicAdd
 * on doubles (the order of that last addition varies from run to run, in the last bits of a
 * double). Dropout draws its bits with adapt_rng_block of src/base/rng.h, the function the CPU
 * calls, one thread per Philox block of four elements, so masks agree bit for bit.
 *
 * Max pooling keeps no indices: its backward finds, for every input element, the outputs whose
 * windows chose it by rescanning x with pool.c's rule, and adds their gradients in output
 * order, the order of the CPU's scatter. Average-pool backward and col2im gather the same way,
 * so no kernel here needs atomics on floats.
 *
 * Everything here has internal linkage (an unnamed namespace): each kernel file gets its own
 * copy of what it uses.
 */
#ifndef ADAPT_NET_CUDA_KERNELS_IMPL_CUH
#define ADAPT_NET_CUDA_KERNELS_IMPL_CUH

#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "src/net/cuda/kernels.h"

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

inline unsigned blocks_for(size_t work, int threads = kThreads)
{
    size_t b = (work + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < kMaxBlocks ? (b ? b : 1) : kMaxBlocks);
}

__host__ __device__ inline bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* Indices fit 32 bits (with room for one grid stride past the end): cheaper division. */
inline bool small_index(size_t total)
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

/* Applies op.run<4>(i) to the groups of four of [0, n) when vec, op.run<1>(i) to the rest, the
 * groups t0, t0 + step, ... of each (one thread's share). Op reads and writes only elements
 * i .. i+V-1, so in-place use (y == x) is safe. */
template <class Op>
__device__ __forceinline__ void map_range(const Op &op, size_t n, bool vec, size_t t0, size_t step)
{
    const size_t nv = vec ? n / 4 : 0;
    for (size_t q = t0; q < nv; q += step) op.template run<4>(4 * q);
    for (size_t i = 4 * nv + t0; i < n; i += step) op.template run<1>(i);
}

/* map_range for thread t0 of a grid of `step` threads. */
template <class Op> __global__ void map_kernel(Op op, size_t n, bool vec)
{
    map_range(op, n, vec, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
              (size_t)gridDim.x * blockDim.x);
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

/* ---------------------------------------------------------------- launch helpers */

/* Blocks per channel for the (slices, channels) grids: about kMaxBlocks in all. */
inline dim3 channel_grid(int n, int c, int hw, int v)
{
    const unsigned gy = (unsigned)(c < 65535 ? c : 65535);
    const size_t units = (size_t)n * (size_t)(hw / v);
    size_t gx = (units + kThreads - 1) / kThreads;
    const size_t gx_max = kMaxBlocks / gy ? kMaxBlocks / gy : 1;
    if (gx > gx_max) gx = gx_max;
    return dim3((unsigned)gx, gy);
}

} // namespace

#endif
