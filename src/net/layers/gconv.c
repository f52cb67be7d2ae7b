/* src/net/layers/gconv.c: grouped and dilated 2-D convolution, mirroring torch.nn.Conv2d with
 * groups > 1 (depthwise when groups = Cin) or dilation d > 1: square kernel k, stride s, zero
 * padding p, taps d apart,
 * weight (Cout, Cin/groups, k, k), optional bias (Cout). Output channel o reads the input
 * channels of its group g = o / (Cout/groups):
 *   y[n, o, oy, ox] = b[o] + sum_{ic, ky, kx} W[o, ic, ky, kx] x[n, g Cin/groups + ic,
 *                                                              oy s - p + ky d, ox s - p + kx d].
 *
 * Grouped layers are thin (MobileNet's depthwise 3x3 has one input channel per output), so
 * they are computed directly rather than lowered to GEMMs. The forward pass of planes up to
 * about 38x38 puts eight samples side by side in vectors (lanes_forward below). Otherwise, and
 * in the backward pass, a channel's planes of nb samples (a "stack" of about
 * GCONV_STACK_FLOATS floats: 20 samples of a 4x4 plane with padding 1, one of a 16x16 plane)
 * are copied one under the other into a zero-filled buffer of width Ws >= W + p, each sample's
 * block Rs >= H + p rows high, the image at row and column p of its block: the zero columns
 * right of a row are the left padding of the next row, the zero rows below a sample the top
 * padding of the next one. Output element (b, oy, ox) of the stack sits at (b Rs/s + oy) Ws/s
 * + ox, so with stride 1 tap (ky, kx) is the buffer shifted by ky d Ws + kx d and every tap is
 * one contiguous, vectorised loop over the whole stack (the positions that are not outputs,
 * oy >= Hout or ox >= Wout, are computed and discarded).
 * Stride s > 1 splits the buffer into s x s phases (rows and columns taken s apart), in which
 * tap (ky, kx) is phase (ky d % s, kx d % s) shifted by (ky d / s) Ws/s + kx d / s: the same
 * contiguous loops. The zeros sit at the same places for every stack, so a stack is formed by
 * copying the image rows only.
 * The weight gradient is a set of dot products of dy, laid out as the output (zero at the
 * discarded positions), with the shifted input phases; dx, phase by phase of the buffer, sums
 * dy shifted the other way times the taps of that phase. Each output element sums its taps in
 * the order ic, ky, kx; a weight's gradient is summed in float within a stack and over the
 * stacks, in sample order, in double, and nb depends on the layer's shape only, so results do
 * not depend on the thread count. Threads split (samples, channel) pairs in forward and for dx,
 * output channels for dW; a depthwise layer of stride 1 forms dx in the dW task, from the same
 * dy stacks. The dW task reads a channel's planes sample after sample, which the hardware
 * prefetchers do not follow when the planes are small: it prefetches the next stack itself.
 * The backward pass is in gconv_backward.c; what the two files share in gconv_impl.h.
 * macs = Hout*Wout*Cout*(Cin/groups)*k*k; fan_in = (Cin/groups)*k*k (PyTorch's). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/gconv_impl.h"
#include "src/net/layers/layers_impl.h"

/* floats of one stack in all phases: about this many (at least one sample). Larger stacks
 * read more planes at once, which the memory system serves worse; smaller ones pay more per
 * call. (tests/test_layers_gconv.c sizes its batches to leave partial stacks with 512.) */
#define GCONV_STACK_FLOATS 512

/* Forward of planes whose padded plane has at most this many positions (40x40: MobileNet's
 * planes up to 32x32 with padding 1): eight samples side by side (see lanes_forward); the
 * stacks serve the rest and the backward pass. (tests/test_layers_gconv.c has a larger plane.) */
#define GCONV_LANES_POS 1600

static size_t r16(size_t v)
{
    return (v + 15) & ~(size_t)15;
}

size_t gconv_slice(const struct adapt_gconv *c, struct gconv_ws *w, float *base)
{
    const size_t ss = (size_t)c->stride * c->stride;
    const size_t lq = r16(c->mq + c->reach), ly = r16(c->reach) + r16(c->mq);
    const size_t ldx = ss * lq, sums = r16(2 * (size_t)c->cig * c->k * c->k);
    if (w) {
        w->xph = base;
        w->lq = lq;
        w->ys = base + ss * lq + r16(c->reach);
        w->dxph = base + ss * lq + ly;
        w->dwsum = (double *)(base + ss * lq + ly + ldx);
        if (c->k == 3)
            for (int t = 0; t < 9; t++) {
                w->xt[t] = w->xph + (size_t)c->tph[t] * lq + c->tsh[t];
                w->yt[t] = w->ys - c->tsh[t];
            }
    }
    const size_t lx = c->lanes ? r16((size_t)(c->h + 2 * c->pad) * (c->w + 2 * c->pad) * 8) : 0;
    const size_t lyo = c->lanes ? r16((size_t)c->ho * c->wo * 8) : 0;
    if (w) {
        w->xl = base + ss * lq + ly + ldx + sums;
        w->yl = w->xl + lx;
    }
    return ss * lq + ly + ldx + sums + lx + lyo;
}

static size_t gconv_workspace(const struct adapt_layer *l, int n)
{
    const struct adapt_gconv *c = (const struct adapt_gconv *)l;
    return (size_t)c->threads * gconv_slice(c, NULL, NULL);
}

/* Zero the parts of a thread's stacks that calls with n samples read (the zeros stay: only
 * image and output positions are written afterwards). */
void gconv_zero_stacks(const struct adapt_gconv *c, const struct gconv_ws *w, int n)
{
    const size_t ss = (size_t)c->stride * c->stride;
    const size_t used = n < c->nb ? (size_t)n * c->rq * c->wq : c->mq;
    for (size_t f = 0; f < ss; f++)
        memset(w->xph + f * w->lq, 0, (used + c->reach) * sizeof(float));
    memset(w->ys - c->reach, 0, (c->reach + used) * sizeof(float));
}

/* Copy planes of nb samples, src + b*sstride (h, w), into the image positions of the input
 * stack's phases; with clear, zero those of the samples nb.. of a full stack (a partial
 * stack's last sample reads into the next one's block at positions where dy is zero). */
ROW_LOOPS void gconv_stack_in(const struct adapt_gconv *c, const float *src, size_t sstride, int nb,
                              float *xph, size_t lq, int clear)
{
    const int s = c->stride, p = c->pad, w = c->w, wq = c->wq;
    const size_t blk = (size_t)c->rq * wq, HW = (size_t)c->h * w;
    for (int b = 0; b < (clear ? c->nb : nb); b++) {
        const float *pl = b < nb ? src + (size_t)b * sstride : NULL;
        float *d = xph + b * blk;
        if (s == 1) {
            for (int y = 0; y < c->h; y++)
                if (pl)
                    row_copy(d + (size_t)(p + y) * wq + p, pl + (size_t)y * w, w);
                else
                    row_zero(d + (size_t)(p + y) * wq + p, w);
        } else if (s == 2) {
            for (int y = 0; y < c->h; y++) {
                size_t ev, od;
                rows2(c, lq, y, &ev, &od);
                if (pl) {
                    row_split2(d + ev, d + od, pl + (size_t)y * w, w);
                } else {
                    row_zero(d + ev, (w + 1) / 2);
                    row_zero(d + od, w / 2);
                }
            }
        } else if (pl) {
            for (size_t i = 0; i < HW; i++) d[c->xoff[i]] = pl[i];
        } else {
            for (size_t i = 0; i < HW; i++) d[c->xoff[i]] = 0.0f;
        }
    }
}

/* y[i] (= or +=) w0 p0[i] + w1 p1[i] + w2 p2[i] (the first n of the three), i < m */
ADAPT_HOT_CLONES void gconv_taps_sum(float *restrict y, const float *restrict p0,
                                     const float *restrict p1, const float *restrict p2,
                                     const float *w, int n, int acc, size_t m)
{
    const float w0 = w[0], w1 = n > 1 ? w[1] : 0.0f, w2 = n > 2 ? w[2] : 0.0f;
    if (n == 3) {
        if (acc)
            for (size_t i = 0; i < m; i++) {
                float t = y[i];
                t += w0 * p0[i];
                t += w1 * p1[i];
                t += w2 * p2[i];
                y[i] = t;
            }
        else
            for (size_t i = 0; i < m; i++) {
                float t = w0 * p0[i];
                t += w1 * p1[i];
                t += w2 * p2[i];
                y[i] = t;
            }
    } else if (n == 2) {
        if (acc)
            for (size_t i = 0; i < m; i++) {
                float t = y[i];
                t += w0 * p0[i];
                t += w1 * p1[i];
                y[i] = t;
            }
        else
            for (size_t i = 0; i < m; i++) {
                float t = w0 * p0[i];
                t += w1 * p1[i];
                y[i] = t;
            }
    } else {
        if (acc)
            for (size_t i = 0; i < m; i++) y[i] += w0 * p0[i];
        else
            for (size_t i = 0; i < m; i++) y[i] = w0 * p0[i];
    }
}

/* y[i] (= or +=) sum_t w[t] p[t][i] over nine taps (a 3x3 kernel), in the order of t */
ADAPT_HOT_CLONES void gconv_taps9_sum(float *restrict y, const float *const *p, const float *w,
                                      int acc, size_t m)
{
    const float *restrict p0 = p[0], *restrict p1 = p[1], *restrict p2 = p[2];
    const float *restrict p3 = p[3], *restrict p4 = p[4], *restrict p5 = p[5];
    const float *restrict p6 = p[6], *restrict p7 = p[7], *restrict p8 = p[8];
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6],
                w7 = w[7], w8 = w[8];
    for (size_t i = 0; i < m; i++) {
        float t = acc ? y[i] + w0 * p0[i] : w0 * p0[i];
        t += w1 * p1[i];
        t += w2 * p2[i];
        t += w3 * p3[i];
        t += w4 * p4[i];
        t += w5 * p5[i];
        t += w6 * p6[i];
        t += w7 * p7[i];
        t += w8 * p8[i];
        y[i] = t;
    }
}

/* ys[0..m) (= or +=) the taps wk of the input stack xph, in groups of three */
static void stack_forward(const struct adapt_gconv *c, const struct gconv_ws *ws, const float *wk,
                          size_t m, int acc)
{
    const int kk = c->k * c->k;
    const float *p[3];
    int n = 0;
    if (kk == 9) {
        gconv_taps9_sum(ws->ys, ws->xt, wk, acc, m);
        return;
    }
    for (int t = 0; t < kk; t++) {
        p[n++] = ws->xph + (size_t)c->tph[t] * ws->lq + c->tsh[t];
        if (n == 3 || t == kk - 1) {
            gconv_taps_sum(ws->ys, p[0], p[n > 1], p[n - 1], wk + t + 1 - n, n, acc, m);
            acc = 1;
            n = 0;
        }
    }
}

/* ---- forward of planes up to GCONV_LANES_POS: eight samples side by side ----
 * A stack still computes 25 positions for the 16 outputs of a 4x4 plane and copies row by row
 * in and out. Here eight samples' planes are transposed, eight pixels at a time, into a padded
 * plane of vectors (position (y + p) Wp + x + p holds pixel (y, x) of the eight samples; the
 * padding is zeroed once per call), each output, of any stride and dilation, is one vector of
 * eight samples summing its taps in the order ic, ky, kx, and the output vectors are
 * transposed back into the eight planes. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int v8i __attribute__((vector_size(32)));
#if defined(__clang__)
#define SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUF8(a, b, ...) __builtin_shuffle(a, b, (v8i){__VA_ARGS__})
#endif

/* r[i][j] <-> r[j][i] */
static inline __attribute__((always_inline)) void tr8(v8 r[8])
{
    v8 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = SHUF8(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = SHUF8(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = SHUF8(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 1] = SHUF8(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[i + 2] = SHUF8(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[i + 3] = SHUF8(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = SHUF8(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = SHUF8(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* xl[pos[i] 8 + b] = src[b][i] for the hw pixels i of eight planes */
ADAPT_HOT_CLONES static void lanes_in(float *restrict xl, const float *const *src, const int *pos,
                                      int hw)
{
    int i = 0;
    for (; i + 8 <= hw; i += 8) {
        v8 r[8];
        for (int b = 0; b < 8; b++) r[b] = *(const v8u *)(src[b] + i);
        tr8(r);
        for (int q = 0; q < 8; q++) *(v8 *)(xl + (size_t)pos[i + q] * 8) = r[q];
    }
    for (; i < hw; i++)
        for (int b = 0; b < 8; b++) xl[(size_t)pos[i] * 8 + b] = src[b][i];
}

/* dst[b][i] = yl[i 8 + b] + bias for the p outputs i of the first nb planes */
ADAPT_HOT_CLONES static void lanes_out(float *const *dst, int nb, const float *restrict yl, int p,
                                       float bias)
{
    int i = 0;
    for (; i + 8 <= p; i += 8) {
        v8 r[8];
        for (int q = 0; q < 8; q++) r[q] = *(const v8 *)(yl + (size_t)(i + q) * 8);
        tr8(r);
        for (int b = 0; b < nb; b++) *(v8u *)(dst[b] + i) = r[b] + bias;
    }
    for (; i < p; i++)
        for (int b = 0; b < nb; b++) dst[b][i] = yl[(size_t)i * 8 + b] + bias;
}

/* yl[q] (= or +=) sum_t wk[t] xl[lout[q] + ltap[t]] over the p outputs q, eight samples each */
ADAPT_HOT_CLONES static void lanes_taps(float *restrict yl, const float *restrict xl,
                                        const int *lout, const int *ltap, const float *wk, int kk,
                                        int p, int acc)
{
    if (kk == 9) {
        const float w0 = wk[0], w1 = wk[1], w2 = wk[2], w3 = wk[3], w4 = wk[4], w5 = wk[5],
                    w6 = wk[6], w7 = wk[7], w8 = wk[8];
        const size_t o0 = (size_t)ltap[0] * 8, o1 = (size_t)ltap[1] * 8, o2 = (size_t)ltap[2] * 8,
                     o3 = (size_t)ltap[3] * 8, o4 = (size_t)ltap[4] * 8, o5 = (size_t)ltap[5] * 8,
                     o6 = (size_t)ltap[6] * 8, o7 = (size_t)ltap[7] * 8, o8 = (size_t)ltap[8] * 8;
        for (int q = 0; q < p; q++) {
            const float *x0 = xl + (size_t)lout[q] * 8;
            v8 t = *(const v8 *)(x0 + o0) * w0;
            if (acc) t = *(const v8 *)(yl + (size_t)q * 8) + t;
            t += *(const v8 *)(x0 + o1) * w1;
            t += *(const v8 *)(x0 + o2) * w2;
            t += *(const v8 *)(x0 + o3) * w3;
            t += *(const v8 *)(x0 + o4) * w4;
            t += *(const v8 *)(x0 + o5) * w5;
            t += *(const v8 *)(x0 + o6) * w6;
            t += *(const v8 *)(x0 + o7) * w7;
            t += *(const v8 *)(x0 + o8) * w8;
            *(v8 *)(yl + (size_t)q * 8) = t;
        }
        return;
    }
    for (int q = 0; q < p; q++) {
        const float *x0 = xl + (size_t)lout[q] * 8;
        v8 t = *(const v8 *)(x0 + (size_t)ltap[0] * 8) * wk[0];
        if (acc) t = *(const v8 *)(yl + (size_t)q * 8) + t;
        for (int k = 1; k < kk; k++) t += *(const v8 *)(x0 + (size_t)ltap[k] * 8) * wk[k];
        *(v8 *)(yl + (size_t)q * 8) = t;
    }
}

static void lanes_forward(const struct adapt_gconv *c, const struct adapt_exec *ex, const float *x,
                          const float *w, const float *b, float *y)
{
    const int n = ex->n, cout = c->cout, kk = c->k * c->k;
    const int nq = (n + 7) / 8, hw = c->h * c->w, P = c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        memset(ws.xl, 0, (size_t)(c->h + 2 * c->pad) * (c->w + 2 * c->pad) * 8 * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int q = 0; q < nq; q++)
            for (int o = 0; o < cout; o++) {
                const int j0 = q * 8, nb = n - j0 < 8 ? n - j0 : 8;
                const int g = o / c->cog;
                const float *src[8];
                float *dst[8];
                for (int ic = 0; ic < c->cig; ic++) {
                    const int ci = g * c->cig + ic;
                    /* the lanes past a partial octet repeat its first sample */
                    for (int j = 0; j < 8; j++)
                        src[j] = x + ((size_t)(j0 + (j < nb ? j : 0)) * c->cin + ci) * hw;
                    lanes_in(ws.xl, src, c->lpos, hw);
                    lanes_taps(ws.yl, ws.xl, c->lout, c->ltap, w + ((size_t)o * c->cig + ic) * kk,
                               kk, P, ic > 0);
                }
                for (int j = 0; j < nb; j++) dst[j] = y + ((size_t)(j0 + j) * cout + o) * P;
                lanes_out(dst, nb, ws.yl, P, b ? b[o] : 0.0f);
            }
    }
}

ROW_LOOPS static void gconv_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                                    const float *const *xs, float *y)
{
    struct adapt_gconv *c = (struct adapt_gconv *)l;
    const float *w = adapt_param_in_use(&l->param[0]);
    const float *b = c->bias ? adapt_param_in_use(&l->param[1]) : NULL;
    const float *x = xs[0];
    const int n = ex->n, cout = c->cout, kk = c->k * c->k, wq = c->wq;
    const int nstk = (n + c->nb - 1) / c->nb;
    const size_t HW = (size_t)c->h * c->w, P = (size_t)c->ho * c->wo;
    const size_t slice = gconv_slice(c, NULL, NULL);
    ADAPT_ASSERT(ex->ws != NULL);
    if (c->lanes) {
        lanes_forward(c, ex, x, w, b, y);
        return;
    }
#pragma omp parallel num_threads(c->threads)
    {
        struct gconv_ws ws;
        gconv_slice(c, &ws, ex->ws + (size_t)omp_get_thread_num() * slice);
        gconv_zero_stacks(c, &ws, n);
#pragma omp for collapse(2) schedule(static)
        for (int st = 0; st < nstk; st++)
            for (int o = 0; o < cout; o++) {
                const int j0 = st * c->nb, nb = n - j0 < c->nb ? n - j0 : c->nb;
                const int g = o / c->cog;
                const size_t m = (size_t)nb * c->rq * wq;
                for (int ic = 0; ic < c->cig; ic++) {
                    const int ci = g * c->cig + ic;
                    gconv_stack_in(c, x + ((size_t)j0 * c->cin + ci) * HW, (size_t)c->cin * HW, nb,
                                   ws.xph, ws.lq, 0);
                    stack_forward(c, &ws, w + ((size_t)o * c->cig + ic) * kk, m, ic > 0);
                }
                const float b0 = b ? b[o] : 0.0f;
                for (int j = 0; j < nb; j++) {
                    float *yo = y + ((size_t)(j0 + j) * cout + o) * P;
                    const float *sr = ws.ys + (size_t)j * c->rq * wq;
                    for (int oy = 0; oy < c->ho; oy++)
                        if (b)
                            row_bias(yo + (size_t)oy * c->wo, sr + (size_t)oy * wq, c->wo, b0);
                        else
                            row_copy(yo + (size_t)oy * c->wo, sr + (size_t)oy * wq, c->wo);
                }
            }
    }
}

static const struct adapt_layer_ops gconv_ops = {
    "conv2d", gconv_forward, gconv_backward, gconv_workspace, NULL, NULL,
};

struct adapt_layer *adapt_gconv2d_create(const char *name, const int in_chw[3], int cout, int k,
                                         int stride, int pad, int groups, int dilation, int bias)
{
    int64_t span = dilation >= 1 && k >= 1 ? (int64_t)(k - 1) * dilation + 1 : 0;
    if (groups < 1 || cout < 1 || in_chw[0] % groups || cout % groups || k < 1 || stride < 1 ||
        pad < 0 || dilation < 1 || (int64_t)in_chw[1] + 2 * pad < span ||
        (int64_t)in_chw[2] + 2 * pad < span) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: bad grouped conv2d (in %dx%dx%d, out %d, k %d, stride %d, pad %d, "
                    "groups %d, dilation %d: groups must divide both channel counts, the "
                    "dilated kernel fit the padded input)",
                    name ? name : "?", in_chw[0], in_chw[1], in_chw[2], cout, k, stride, pad,
                    groups, dilation);
        return NULL;
    }
    /* int sizes: the weight tensor (and so Cin/groups*k*k), the padded input plane; the
     * phase offsets are checked below */
    const int64_t hp = (int64_t)in_chw[1] + 2 * pad, wp64 = (int64_t)in_chw[2] + 2 * pad;
    if ((int64_t)cout * (in_chw[0] / groups) * k * k > INT_MAX || hp * wp64 > INT_MAX) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: conv2d out %d kernel %d padding %d groups %d on input (%d, %d, %d): a "
                    "weight tensor or padded plane of more than %d elements",
                    name ? name : "?", cout, k, pad, groups, in_chw[0], in_chw[1], in_chw[2],
                    INT_MAX);
        return NULL;
    }
    const size_t HW = (size_t)in_chw[1] * in_chw[2], kk = (size_t)k * k;
    const int ho = (int)((hp - span) / stride + 1);
    const int wo = (int)((wp64 - span) / stride + 1);
    const int lanes = hp * wp64 <= GCONV_LANES_POS;
    const size_t ntab = 2 * kk + (stride > 2 ? HW : 0) + (lanes ? HW + (size_t)ho * wo + kk : 0);
    struct adapt_gconv *c = calloc(1, sizeof *c + ntab * sizeof(int));
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
    c->ho = ho;
    c->wo = wo;
    c->cig = c->cin / groups;
    c->cog = cout / groups;
    c->bias = bias != 0;
    /* a sample's block: Rs >= H + p rows (the zeros below it are the next block's top
     * padding) and >= Hout s (its outputs), Ws likewise; both multiples of s */
    {
        const int s = stride;
        int rs = c->h + pad > c->ho * s ? c->h + pad : c->ho * s;
        int ws = c->w + pad > c->wo * s ? c->w + pad : c->wo * s;
        c->rq = (rs + s - 1) / s;
        c->wq = (ws + s - 1) / s;
        const size_t blk = (size_t)c->rq * c->wq * s * s;
        c->nb = blk >= GCONV_STACK_FLOATS ? 1 : (int)(GCONV_STACK_FLOATS / blk);
        c->mq = (size_t)c->nb * c->rq * c->wq;
        c->reach = (size_t)((k - 1) * dilation / s) * c->wq + (size_t)((k - 1) * dilation / s);
        const size_t lq = r16(c->mq + c->reach);
        if ((size_t)s * s * lq > INT_MAX) { /* the largest of xoff and tsh */
            ADAPT_ERROR(ADAPT_EINVAL,
                        "%s: conv2d stride %d dilation %d on input (%d, %d, %d): phases of "
                        "more than %d elements",
                        name ? name : "?", stride, dilation, in_chw[0], in_chw[1], in_chw[2],
                        INT_MAX);
            free(c);
            return NULL;
        }
        c->tph = c->tab;
        c->tsh = c->tab + kk;
        c->xoff = c->tab + 2 * kk;
        for (int t = 0; t < (int)kk; t++) {
            const int ty = t / k * dilation, tx = t % k * dilation;
            c->tph[t] = ty % s * s + tx % s;
            c->tsh[t] = ty / s * c->wq + tx / s;
        }
        if (s > 2)
            for (int y = 0; y < c->h; y++)
                for (int x = 0; x < c->w; x++) {
                    const int r = pad + y, cc = pad + x;
                    c->xoff[y * c->w + x] =
                        (int)((size_t)(r % s * s + cc % s) * lq + (size_t)(r / s) * c->wq + cc / s);
                }
        c->lanes = lanes;
        c->lpos = c->xoff + (s > 2 ? HW : 0);
        c->lout = c->lpos + (lanes ? HW : 0);
        c->ltap = c->lout + (lanes ? (size_t)ho * wo : 0);
        if (lanes) {
            const int wp = c->w + 2 * pad;
            for (int i = 0; i < (int)HW; i++) c->lpos[i] = (i / c->w + pad) * wp + i % c->w + pad;
            for (int i = 0; i < ho * wo; i++) c->lout[i] = i / wo * s * wp + i % wo * s;
            for (int t = 0; t < (int)kk; t++) c->ltap[t] = t / k * dilation * wp + t % k * dilation;
        }
    }
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
