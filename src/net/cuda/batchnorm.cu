/* src/net/cuda/batchnorm.cu: batch norm, the GPU twin of batchnorm.c
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/net/cuda/kernels_impl.cuh"

namespace {

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

} // namespace

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
