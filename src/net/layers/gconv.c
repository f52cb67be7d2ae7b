/* src/net/layers/gconv.c: grouped and dilated 2-D convolution, mirroring torch.nn.Conv2d with
 * groups > 1 (depthwise when groups = Cin) or dilation d > 1: square kernel k, stride s, zero
 * padding p, taps d apart,
 * weight (Cout, Cin/groups, k, k), optional bias (Cout). Output channel o reads the input
 * channels of its group g = o / (Cout/groups):
 *   y[n, o, oy, ox] = b[o] + sum_{ic, ky, kx} W[o, ic, ky, kx] x[n, g Cin/groups + ic,
 *                                                              oy s - p + ky d, ox s - p + kx d].
 *
 * Grouped layers are thin (MobileNet's depthwise 3x3 has one input channel per output), so
 * they are computed directly rather than lowered to GEMMs, on a zero-padded copy of each
 * input plane (Hp = H + 2p, Wp = W + 2p): with stride 1 output element oy*Wp + ox of the
 * padded width reads xp[(oy*Wp + ox) + (ky*Wp + kx) d], so each tap is one contiguous,
 * vectorised loop over Hout*Wp elements even for 4x4 planes (the Wp - Wout extra columns
 * are discarded); other strides go row by row. dx is formed the same way in a padded plane,
 * dW as dot products of dy (on the padded width, zero in the extra columns) with the shifted
 * planes. Each output element sums its taps in the order ic, ky, kx; each weight gradient sums
 * over samples in order, so results do not depend on the thread count. Threads split
 * (sample, channel) pairs in forward and for dx, output channels for dW.
 * macs = Hout*Wout*Cout*(Cin/groups)*k*k; fan_in = (Cin/groups)*k*k (PyTorch's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

struct adapt_gconv {
    struct adapt_layer base;
    int cin, h, w, cout, k, stride, pad, groups, ho, wo, cig, cog, bias;
    int dil;     /* dilation: taps d apart */
    int tail;    /* floats read past a padded plane: (k - 1) d + 1 */
    int hp, wp;  /* padded plane */
    int threads; /* threads the workspace is sized for */
};

static size_t r16(size_t v) { return (v + 15) & ~(size_t)15; }

/* Per-thread workspace: a zero-padded input plane xp (Hp, Wp) plus k floats of tail, the
 * output or its gradient on the padded width, wide (ho, Wp), the padded input gradient dxp,
 * and the weight-gradient sums of one output channel (cig k k doubles). */
struct gconv_ws {
    float *xp, *wide, *dxp;
    double *dwsum;
};

static size_t gconv_slice(const struct adapt_gconv *c, struct gconv_ws *w, float *base)
{
    size_t plane = r16((size_t)c->hp * c->wp + c->tail), wide = r16((size_t)c->ho * c->wp);
    size_t sums = r16(2 * (size_t)c->cig * c->k * c->k);
    if (w) {
        w->xp = base;
        w->wide = base + plane;
        w->dxp = base + plane + wide;
        w->dwsum = (double *)(base + 2 * plane + wide);
    }
    return 2 * plane + wide + sums;
}

static size_t gconv_workspace(const struct adapt_layer *l, int n)
{
    const struct adapt_gconv *c = (const struct adapt_gconv *)l;
    return (size_t)c->threads * gconv_slice(c, NULL, NULL);
}

/* xp = the plane x (h, w) with pad zeros on every side (and a zero tail) */
static void pad_plane(const struct adapt_gconv *c, const float *x, float *xp)
{
    const int wp = c->wp, p = c->pad;
    memset(xp, 0, ((size_t)c->hp * wp + c->tail) * sizeof *xp);
    for (int y = 0; y < c->h; y++) memcpy(xp + (size_t)(y + p) * wp + p, x + (size_t)y * c->w,
                                          (size_t)c->w * sizeof *xp);
}

/* Stride 1 computes on the padded width: output i = oy*Wp + ox reads xp[i + ky*Wp + kx], so
 * every tap is one contiguous loop over ho*Wp elements (the columns ox >= wo are discarded);
 * other strides go row by row. */
ADAPT_HOT_CLONES static void tap_axpy(float *restrict y, const float *restrict x, float w,
                                      size_t m)
{
    for (size_t i = 0; i < m; i++) y[i] += w * x[i];
}

ADAPT_HOT_CLONES static double tap_dot(const float *restrict a, const float *restrict b, size_t m)
{
    float s0 = 0.0f;
    for (size_t i = 0; i < m; i++) s0 += a[i] * b[i];
    return s0;
}

/* wide (ho, Wp) += sum over taps of w[ky,kx] * xp shifted (forward of one input channel) */
static void taps_forward(const struct adapt_gconv *c, const float *xp, const float *wk,
                         float *wide)
{
    const int k = c->k, s = c->stride, wp = c->wp, d = c->dil;
    if (s == 1) {
        const size_t m = (size_t)c->ho * wp;
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++)
                tap_axpy(wide, xp + (size_t)(ky * wp + kx) * d, wk[ky * k + kx], m);
        return;
    }
    for (int oy = 0; oy < c->ho; oy++)
        for (int ky = 0; ky < k; ky++) {
            const float *row = xp + (size_t)(oy * s + ky * d) * wp;
            float *yr = wide + (size_t)oy * wp;
            for (int kx = 0; kx < k; kx++) {
                const float wv = wk[ky * k + kx];
                for (int ox = 0; ox < c->wo; ox++) yr[ox] += wv * row[ox * s + kx * d];
            }
        }
}

static void gconv_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                          const float *const *xs, float *y)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const float *x = xs[0];
    const int n = ex->n, cout = c->cout, k = c->k, wp = c->wp;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
    ADAPT_ASSERT(ex->ws != NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
#pragma omp for collapse(2) schedule(static)
        for (int j = 0; j < n; j++)
            for (int o = 0; o < cout; o++) {
                int g = o / c->cog;
                memset(ws.wide, 0, (size_t)c->ho * wp * sizeof(float));
                for (int ic = 0; ic < c->cig; ic++) {
                    pad_plane(c, x + ((size_t)j * c->cin + (size_t)g * c->cig + ic) * HW, ws.xp);
                    taps_forward(c, ws.xp, w + ((size_t)o * c->cig + ic) * k * k, ws.wide);
                }
                float *yo = y + ((size_t)j * cout + o) * P;
                const float b0 = b ? b[o] : 0.0f;
                for (int oy = 0; oy < c->ho; oy++)
                    for (int ox = 0; ox < c->wo; ox++)
                        yo[oy * c->wo + ox] = ws.wide[(size_t)oy * wp + ox] + b0;
            }
    }
}

/* wide = dy of one output channel on the padded width (zeros in the columns ox >= wo) */
static void widen(const struct adapt_gconv *c, const float *dyo, float *wide)
{
    const int wp = c->wp;
    for (int oy = 0; oy < c->ho; oy++) {
        float *r = wide + (size_t)oy * wp;
        memcpy(r, dyo + (size_t)oy * c->wo, (size_t)c->wo * sizeof *r);
        memset(r + c->wo, 0, (size_t)(wp - c->wo) * sizeof *r);
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
    const int n = ex->n, cout = c->cout, k = c->k, s = c->stride, wp = c->wp, d = c->dil;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL), m = (size_t)c->ho * wp;
    const int kk = k * k;
    ADAPT_ASSERT(ex->ws != NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        /* weight and bias gradients: one output channel per task, samples in order */
#pragma omp for schedule(static)
        for (int o = 0; o < cout; o++) {
            int g = o / c->cog;
            double sb = 0.0;
            for (int i = 0; i < c->cig * kk; i++) ws.dwsum[i] = 0.0;
            for (int j = 0; j < n; j++) {
                const float *dyo = dy + ((size_t)j * cout + o) * P;
                widen(c, dyo, ws.wide);
                if (db) {
                    float t = 0.0f;
                    for (size_t i = 0; i < P; i++) t += dyo[i];
                    sb += t;
                }
                for (int ic = 0; ic < c->cig; ic++) {
                    pad_plane(c, x + ((size_t)j * c->cin + (size_t)g * c->cig + ic) * HW, ws.xp);
                    double *sum = ws.dwsum + (size_t)ic * kk;
                    for (int ky = 0; ky < k; ky++)
                        for (int kx = 0; kx < k; kx++) {
                            if (s == 1) {
                                sum[ky * k + kx] +=
                                    tap_dot(ws.wide, ws.xp + (size_t)(ky * wp + kx) * d, m);
                                continue;
                            }
                            float t = 0.0f;
                            for (int oy = 0; oy < c->ho; oy++) {
                                const float *row = ws.xp + (size_t)(oy * s + ky * d) * wp + kx * d;
                                const float *d = ws.wide + (size_t)oy * wp;
                                for (int ox = 0; ox < c->wo; ox++) t += d[ox] * row[ox * s];
                            }
                            sum[ky * k + kx] += t;
                        }
                }
            }
            for (int i = 0; i < c->cig * kk; i++)
                dw[(size_t)o * c->cig * kk + i] += (float)ws.dwsum[i];
            if (db) db[o] += (float)sb;
        }
        /* input gradients: one (sample, input channel) per task */
        if (dx) {
#pragma omp for collapse(2) schedule(static)
            for (int j = 0; j < n; j++)
                for (int ci = 0; ci < c->cin; ci++) {
                    int g = ci / c->cig, ic = ci % c->cig;
                    memset(ws.dxp, 0, ((size_t)c->hp * wp + c->tail) * sizeof(float));
                    for (int oo = 0; oo < c->cog; oo++) {
                        int o = g * c->cog + oo;
                        const float *wk = w + ((size_t)o * c->cig + ic) * kk;
                        widen(c, dy + ((size_t)j * cout + o) * P, ws.wide);
                        for (int ky = 0; ky < k; ky++)
                            for (int kx = 0; kx < k; kx++) {
                                const float wv = wk[ky * k + kx];
                                if (s == 1) {
                                    tap_axpy(ws.dxp + (size_t)(ky * wp + kx) * d, ws.wide, wv, m);
                                    continue;
                                }
                                for (int oy = 0; oy < c->ho; oy++) {
                                    float *row = ws.dxp + (size_t)(oy * s + ky * d) * wp + kx * d;
                                    const float *d = ws.wide + (size_t)oy * wp;
                                    for (int ox = 0; ox < c->wo; ox++) row[ox * s] += wv * d[ox];
                                }
                            }
                    }
                    float *dxc = dx + ((size_t)j * c->cin + ci) * HW;
                    for (int yy = 0; yy < c->h; yy++) {
                        const float *src = ws.dxp + (size_t)(yy + c->pad) * wp + c->pad;
                        float *dst = dxc + (size_t)yy * c->w;
                        if (acc & 1u)
                            for (int xx = 0; xx < c->w; xx++) dst[xx] += src[xx];
                        else
                            memcpy(dst, src, (size_t)c->w * sizeof *dst);
                    }
                }
        }
    }
    (void)y;
}

static const struct adapt_layer_ops gconv_ops = {
    "conv2d", gconv_forward, gconv_backward, gconv_workspace, NULL, NULL,
};

struct adapt_layer *adapt_gconv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                         int stride, int pad, int groups, int dilation, int bias)
{
    int span = dilation >= 1 && k >= 1 ? (k - 1) * dilation + 1 : 0;
    if (groups < 1 || cout < 1 || in_chw[0] % groups || cout % groups || k < 1 || stride < 1 ||
        pad < 0 || dilation < 1 || in_chw[1] + 2 * pad < span || in_chw[2] + 2 * pad < span) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: bad grouped conv2d (in %dx%dx%d, out %d, k %d, stride %d, pad %d, "
                    "groups %d, dilation %d: groups must divide both channel counts, the "
                    "dilated kernel fit the padded input)",
                    name ? name : "?", in_chw[0], in_chw[1], in_chw[2], cout, k, stride, pad,
                    groups, dilation);
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
    c->groups = l->groups = groups;
    c->dil = l->dilation = dilation;
    c->tail = span;
    c->ho = (c->h + 2 * pad - span) / stride + 1;
    c->wo = (c->w + 2 * pad - span) / stride + 1;
    c->cig = c->cin / groups;
    c->cog = cout / groups;
    c->bias = bias != 0;
    c->hp = c->h + 2 * pad;
    c->wp = c->w + 2 * pad;
    c->threads = omp_get_max_threads();
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
