/* src/net/cuda/xent.cu: softmax cross-entropy, the GPU twin of xent.c
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/net/cuda/kernels_impl.cuh"

namespace {

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

} // namespace

extern "C" void acu_softmax_xent(const float *logits, const int *labels, int n, int c,
                                 float *dlogits, double *out, cudaStream_t s)
{
    if (n <= 0 || c <= 0) { /* no rows: loss 0, none correct */
        cudaMemsetAsync(out, 0, 2 * sizeof(double), s);
        return;
    }
    xent_kernel<<<1, kXentThreads, 0, s>>>(logits, labels, n, c, dlogits, out);
}
