/* src/net/cuda/optim.cu: one SGD step and its gradient preparation, the GPU twin of src/net/optim.c
 * (launchers declared in src/net/cuda/kernels.h; kernels_impl.cuh says what they share). */

#include "src/net/cuda/kernels_impl.cuh"

namespace {

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

} // namespace

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

extern "C" void acu_sgd_prepare(float *g, const float *w, size_t count, float scale, float l1,
                                cudaStream_t s)
{
    if (scale == 1.0f && l1 == 0.0f) return;
    sgd_prepare_op op = {g, w, scale, l1};
    launch_map(op, count, aligned16(g) && (l1 == 0.0f || aligned16(w)), s);
}
