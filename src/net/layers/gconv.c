/* src/net/layers/gconv.c: grouped 2-D convolution, mirroring torch.nn.Conv2d with groups > 1
 * (depthwise when groups = Cin): square kernel k, stride s, zero padding p, dilation 1,
 * weight (Cout, Cin/groups, k, k), optional bias (Cout). Output channel o reads the input
 * channels of its group g = o / (Cout/groups):
 *   y[n, o, oy, ox] = b[o] + sum_{ic, ky, kx} W[o, ic, ky, kx] x[n, g Cin/groups + ic,
 *                                                              oy s - p + ky, ox s - p + kx].
 *
 * Grouped layers are thin (MobileNet's depthwise 3x3 has one input channel per output), so
 * they are computed directly rather than lowered to GEMMs: for each tap (ky, kx) an output
 * row gains w times an input row, a loop over ox that the compiler vectorises (contiguous for
 * stride 1). Each output element sums its taps in the order ic, ky, kx; each weight gradient
 * sums over samples and positions in a fixed order, so results do not depend on the thread
 * count. Threads split (sample, channel) pairs in forward and for dx, output channels for dW.
 * macs = Hout*Wout*Cout*(Cin/groups)*k*k; fan_in = (Cin/groups)*k*k (PyTorch's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

struct adapt_gconv {
    struct adapt_layer base;
    int cin, h, w, cout, k, stride, pad, groups, ho, wo, cig, cog, bias;
};

/* The output columns ox whose input column ox*s - p + kx lies in [0, w): [*lo, *hi). */
ADAPT_INLINE void ox_range(const struct adapt_gconv *c, int kx, int *lo, int *hi)
{
    int a = c->pad - kx; /* ox*s >= a */
    int l = a > 0 ? (a + c->stride - 1) / c->stride : 0;
    int b = c->w - 1 + c->pad - kx; /* ox*s <= b */
    int h = b >= 0 ? b / c->stride + 1 : 0;
    *lo = l;
    *hi = h < c->wo ? h : c->wo;
}

/* yrow[ox] += wv * xrow[ox*s + off] for ox in [lo, hi) */
ADAPT_HOT_CLONES static void axpy_row(float *restrict yrow, const float *restrict xrow, float wv,
                                      int lo, int hi, int s, int off)
{
    if (s == 1) {
        const float *xr = xrow + off;
        for (int ox = lo; ox < hi; ox++) yrow[ox] += wv * xr[ox];
    } else {
        for (int ox = lo; ox < hi; ox++) yrow[ox] += wv * xrow[ox * s + off];
    }
}

/* dxrow[ox*s + off] += wv * dyrow[ox] for ox in [lo, hi) */
ADAPT_HOT_CLONES static void scatter_row(float *restrict dxrow, const float *restrict dyrow,
                                         float wv, int lo, int hi, int s, int off)
{
    if (s == 1) {
        float *dr = dxrow + off;
        for (int ox = lo; ox < hi; ox++) dr[ox] += wv * dyrow[ox];
    } else {
        for (int ox = lo; ox < hi; ox++) dxrow[ox * s + off] += wv * dyrow[ox];
    }
}

/* sum over ox in [lo, hi) of dyrow[ox] * xrow[ox*s + off] */
ADAPT_HOT_CLONES static float dot_row(const float *restrict dyrow, const float *restrict xrow,
                                      int lo, int hi, int s, int off)
{
    float acc = 0.0f;
    if (s == 1) {
        const float *xr = xrow + off;
        for (int ox = lo; ox < hi; ox++) acc += dyrow[ox] * xr[ox];
    } else {
        for (int ox = lo; ox < hi; ox++) acc += dyrow[ox] * xrow[ox * s + off];
    }
    return acc;
}

static void gconv_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                          const float *const *xs, float *y)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const float *x = xs[0];
    const int n = ex->n, cout = c->cout, k = c->k, s = c->stride;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 0; j < n; j++)
        for (int o = 0; o < cout; o++) {
            float *yo = y + ((size_t)j * cout + o) * P;
            float b0 = b ? b[o] : 0.0f;
            for (size_t i = 0; i < P; i++) yo[i] = b0;
            int g = o / c->cog;
            for (int ic = 0; ic < c->cig; ic++) {
                const float *xc = x + ((size_t)j * c->cin + (size_t)g * c->cig + ic) * HW;
                const float *wk = w + ((size_t)o * c->cig + ic) * k * k;
                for (int ky = 0; ky < k; ky++)
                    for (int oy = 0; oy < c->ho; oy++) {
                        int iy = oy * s - c->pad + ky;
                        if (iy < 0 || iy >= c->h) continue;
                        for (int kx = 0; kx < k; kx++) {
                            int lo, hi;
                            ox_range(c, kx, &lo, &hi);
                            axpy_row(yo + (size_t)oy * c->wo, xc + (size_t)iy * c->w,
                                     wk[ky * k + kx], lo, hi, s, kx - c->pad);
                        }
                    }
            }
        }
}

static void gconv_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                           const float *const *xs, const float *y, const float *dy,
                           float *const *dxs, unsigned acc)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    float *dw = l->param[0].grad.data;
    float *db = c->bias ? l->param[1].grad.data : NULL;
    const float *x = xs[0];
    float *dx = dxs[0];
    const int n = ex->n, cout = c->cout, k = c->k, s = c->stride;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    /* weight and bias gradients: one output channel per task, samples in order */
#pragma omp parallel for schedule(static)
    for (int o = 0; o < cout; o++) {
        int g = o / c->cog;
        double sb = 0.0;
        for (int ic = 0; ic < c->cig; ic++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    int lo, hi;
                    ox_range(c, kx, &lo, &hi);
                    double sw = 0.0;
                    for (int j = 0; j < n; j++) {
                        const float *dyo = dy + ((size_t)j * cout + o) * P;
                        const float *xc = x + ((size_t)j * c->cin + (size_t)g * c->cig + ic) * HW;
                        for (int oy = 0; oy < c->ho; oy++) {
                            int iy = oy * s - c->pad + ky;
                            if (iy < 0 || iy >= c->h) continue;
                            sw += dot_row(dyo + (size_t)oy * c->wo, xc + (size_t)iy * c->w, lo,
                                          hi, s, kx - c->pad);
                        }
                    }
                    dw[((size_t)o * c->cig + ic) * k * k + ky * k + kx] += (float)sw;
                }
        if (db) {
            for (int j = 0; j < n; j++) {
                const float *dyo = dy + ((size_t)j * cout + o) * P;
                float t = 0.0f;
                for (size_t i = 0; i < P; i++) t += dyo[i];
                sb += t;
            }
            db[o] += (float)sb;
        }
    }
    if (!dx) return;
    /* input gradients: one (sample, input channel) per task */
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 0; j < n; j++)
        for (int ci = 0; ci < c->cin; ci++) {
            float *dxc = dx + ((size_t)j * c->cin + ci) * HW;
            if (!(acc & 1u)) memset(dxc, 0, HW * sizeof *dxc);
            int g = ci / c->cig, ic = ci % c->cig;
            for (int oo = 0; oo < c->cog; oo++) {
                int o = g * c->cog + oo;
                const float *dyo = dy + ((size_t)j * cout + o) * P;
                const float *wk = w + ((size_t)o * c->cig + ic) * k * k;
                for (int ky = 0; ky < k; ky++)
                    for (int oy = 0; oy < c->ho; oy++) {
                        int iy = oy * s - c->pad + ky;
                        if (iy < 0 || iy >= c->h) continue;
                        for (int kx = 0; kx < k; kx++) {
                            int lo, hi;
                            ox_range(c, kx, &lo, &hi);
                            scatter_row(dxc + (size_t)iy * c->w, dyo + (size_t)oy * c->wo,
                                        wk[ky * k + kx], lo, hi, s, kx - c->pad);
                        }
                    }
            }
        }
    (void)y;
}

static const struct adapt_layer_ops gconv_ops = {
    "conv2d", gconv_forward, gconv_backward, NULL, NULL, NULL,
};

struct adapt_layer *adapt_gconv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                         int stride, int pad, int groups, int bias)
{
    if (groups < 1 || cout < 1 || in_chw[0] % groups || cout % groups || k < 1 || stride < 1 ||
        pad < 0 || in_chw[1] + 2 * pad < k || in_chw[2] + 2 * pad < k) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: bad grouped conv2d (in %dx%dx%d, out %d, k %d, stride %d, pad %d, "
                    "groups %d: groups must divide both channel counts)",
                    name ? name : "?", in_chw[0], in_chw[1], in_chw[2], cout, k, stride, pad,
                    groups);
        return NULL;
    }
    struct adapt_gconv *c = calloc(1, sizeof *c);
    if (!c) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a conv2d layer", name ? name : "?");
        return NULL;
    }
    struct adapt_layer *l = &c->base;
    if (adapt_layer_setup(l, &gconv_ops, name, 1, in_chw) != ADAPT_OK) {
        free(c);
        return NULL;
    }
    c->cin = in_chw[0];
    c->h = in_chw[1];
    c->w = in_chw[2];
    c->cout = cout;
    c->k = k;
    c->stride = stride;
    c->pad = pad;
    c->groups = groups;
    c->ho = (c->h + 2 * pad - k) / stride + 1;
    c->wo = (c->w + 2 * pad - k) / stride + 1;
    c->cig = c->cin / groups;
    c->cog = cout / groups;
    c->bias = bias != 0;
    l->out_dim[0] = cout;
    l->out_dim[1] = c->ho;
    l->out_dim[2] = c->wo;
    int fan_in = c->cig * k * k;
    int wdim[4] = {cout, c->cig, k, k};
    adapt_layer_param_add(l, "weight", ADAPT_PARAM_WEIGHT, 4, wdim, fan_in);
    if (c->bias) adapt_layer_param_add(l, "bias", ADAPT_PARAM_BIAS, 1, &cout, fan_in);
    l->macs = (int64_t)c->ho * c->wo * cout * fan_in;
    l->is_unit = 1;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    return l;
}
