/* src/net/layers/pool.c: pooling, mirroring torch.nn.MaxPool2d(k, s, padding) and
 * torch.nn.AvgPool2d(k, s, padding, count_include_pad) with dilation 1 and floor mode
 * (out = (in + 2 padding - k) / s + 1, padding <= k / 2 as PyTorch requires), and global
 * average pooling (torch.nn.AdaptiveAvgPool2d(1), created with k == 0).
 *
 * Max pooling follows PyTorch's CPU kernel: the window, clipped to the input (padding is
 * -infinity there, so it never wins), is scanned row by row and an element replaces the current
 * maximum when it is greater or NaN, so ties go to the first maximum in scan order and NaN
 * propagates. The index of the maximum within its (H, W) plane is kept in l->saved (int32 in a
 * float slot, one per output element) by a training-mode forward, for backward, which scatters
 * dy there (so backward needs the training forward of the same batch). Average pooling sums the
 * window's cells inside the input in the same order and multiplies by 1 / divisor: k*k with
 * count_include_pad (PyTorch's default: padding counts as zeros; floor mode keeps every window
 * within the padded input, so the divisor is always k*k), else the number of cells inside.
 *
 * elementwise = input elements read per sample (C times, per axis, the sum over windows of the
 * cells inside the input: out numel * k*k without padding; C*H*W for the global pool). Work is
 * parallel over (sample, channel) planes, so each thread owns the dx planes it writes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

struct adapt_pool {
    struct adapt_layer base;
    int k, s, p; /* k == 0: global average */
    int cip;     /* average: count_include_pad */
};

/* The window of output o along an axis of n cells, clipped to the input: [*a, *b). */
static inline void clip_window(int o, int k, int s, int p, int n, int *a, int *b)
{
    int lo = o * s - p, hi = lo + k;
    *a = lo > 0 ? lo : 0;
    *b = hi < n ? hi : n;
}

/* ---------------------------------------------------------------- max */

/* take ? v : u, by masks: the outcome is data-dependent and a branch on it
 * mispredicts half the time */
static inline __attribute__((always_inline)) float pick(int take, float v, float u)
{
    uint32_t m = -(uint32_t)take, bv, bu;
    memcpy(&bv, &v, sizeof bv);
    memcpy(&bu, &u, sizeof bu);
    bv = (bv & m) | (bu & ~m);
    memcpy(&v, &bv, sizeof v);
    return v;
}

ADAPT_HOT_CLONES static void maxpool_plane(const float *x, int h, int w, int ho, int wo, int k,
                                           int s, int p, float *y, int32_t *arg)
{
    if (k == 2 && s == 2 && p == 0) {
        /* a tournament (a vs b, c vs d, then the winners) picks the same
         * element as the scan: the first maximum, or the last NaN */
        for (int oy = 0; oy < ho; oy++) {
            const float *r0 = x + 2 * oy * w, *r1 = r0 + w;
            for (int ox = 0; ox < wo; ox++) {
                const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
                const int tb = (b > a) | (b != b), td = (d > c) | (d != d);
                const float w1 = pick(tb, b, a), w2 = pick(td, d, c);
                const int t2 = (w2 > w1) | (w2 != w2);
                y[oy * wo + ox] = pick(t2, w2, w1);
                if (arg) {
                    const int32_t i0 = 2 * oy * w + 2 * ox;
                    arg[oy * wo + ox] = i0 + tb + (-t2 & (w + td - tb));
                }
            }
        }
        return;
    }
    for (int oy = 0; oy < ho; oy++) {
        int y0, y1;
        clip_window(oy, k, s, p, h, &y0, &y1);
        for (int ox = 0; ox < wo; ox++) {
            int x0, x1;
            clip_window(ox, k, s, p, w, &x0, &x1);
            float best = -INFINITY;
            int32_t bi = y0 * w + x0;
            for (int iy = y0; iy < y1; iy++)
                for (int ix = x0; ix < x1; ix++) {
                    int idx = iy * w + ix;
                    float v = x[idx];
                    if (v > best || isnan(v)) {
                        best = v;
                        bi = idx;
                    }
                }
            y[oy * wo + ox] = best;
            if (arg) arg[oy * wo + ox] = bi;
        }
    }
}

static void maxpool_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, float *y)
{
    struct adapt_pool *p = (struct adapt_pool *)l;
    const int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    const int ho = l->out_dim[1], wo = l->out_dim[2];
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const long planes = (long)ex->n * c;
    int32_t *arg = ex->training ? (int32_t *)l->saved : NULL;
    const float *xs = x[0];
    ADAPT_ASSERT(!ex->training || l->saved);
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
    for (long q = 0; q < planes; q++)
        maxpool_plane(xs + q * in_plane, h, w, ho, wo, p->k, p->s, p->p, y + q * out_plane,
                      arg ? arg + q * out_plane : NULL);
}

static void maxpool_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                             const float *const *x, const float *y, const float *dy,
                             float *const *dx, unsigned acc)
{
    float *d = dx[0];
    if (!d) return;
    const size_t in_plane = adapt_layer_in_numel(l, 0) / (size_t)l->in_dim[0][0];
    const size_t out_plane = (size_t)l->out_dim[1] * l->out_dim[2];
    const long planes = (long)ex->n * l->in_dim[0][0];
    const int32_t *arg = (const int32_t *)l->saved;
    const int a = acc & 1u;
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
    for (long q = 0; q < planes; q++) {
        float *dp = d + q * in_plane;
        const float *gp = dy + q * out_plane;
        const int32_t *ap = arg + q * out_plane;
        if (!a) memset(dp, 0, in_plane * sizeof(float));
        for (size_t o = 0; o < out_plane; o++) dp[ap[o]] += gp[o];
    }
}

static size_t maxpool_saved(const struct adapt_layer *l, int n)
{
    return (size_t)n * adapt_layer_out_numel(l);
}

/* ---------------------------------------------------------------- average */

ADAPT_HOT_CLONES static void avgpool_plane(const float *x, int h, int w, int ho, int wo, int k,
                                           int s, int p, int cip, float *y)
{
    const float inv = 1.0f / (float)(k * k);
    if (k == 2 && s == 2 && p == 0) {
        for (int oy = 0; oy < ho; oy++) {
            const float *r0 = x + 2 * oy * w, *r1 = r0 + w;
            float *yo = y + oy * wo;
            for (int ox = 0; ox < wo; ox++)
                yo[ox] = ((r0[2 * ox] + r0[2 * ox + 1]) + (r1[2 * ox] + r1[2 * ox + 1])) * inv;
        }
        return;
    }
    for (int oy = 0; oy < ho; oy++) {
        int y0, y1;
        clip_window(oy, k, s, p, h, &y0, &y1);
        for (int ox = 0; ox < wo; ox++) {
            int x0, x1;
            clip_window(ox, k, s, p, w, &x0, &x1);
            float acc = 0.0f;
            for (int iy = y0; iy < y1; iy++)
                for (int ix = x0; ix < x1; ix++) acc += x[iy * w + ix];
            y[oy * wo + ox] = acc * (cip ? inv : 1.0f / (float)((y1 - y0) * (x1 - x0)));
        }
    }
}

ADAPT_HOT_CLONES static void avgpool_back_plane(const float *dy, int h, int w, int ho, int wo,
                                                int k, int s, int p, int cip, float *dx, int acc)
{
    const float inv = 1.0f / (float)(k * k);
    if (k == s && p == 0 && !acc) {
        /* windows tile the plane: each input gets one contribution, or none
         * in the rows/columns that floor mode leaves out */
        for (int iy = 0; iy < h; iy++) {
            int oy = iy / k;
            float *dr = dx + (size_t)iy * w;
            if (oy >= ho) {
                memset(dr, 0, (size_t)w * sizeof(float));
                continue;
            }
            const float *gr = dy + (size_t)oy * wo;
            int wcov = wo * k;
            if (k == 2)
                for (int ox = 0; ox < wo; ox++) dr[2 * ox] = dr[2 * ox + 1] = gr[ox] * inv;
            else
                for (int ix = 0; ix < wcov; ix++) dr[ix] = gr[ix / k] * inv;
            for (int ix = wcov; ix < w; ix++) dr[ix] = 0.0f;
        }
        return;
    }
    if (!acc) memset(dx, 0, (size_t)h * w * sizeof(float));
    for (int oy = 0; oy < ho; oy++) {
        int y0, y1;
        clip_window(oy, k, s, p, h, &y0, &y1);
        for (int ox = 0; ox < wo; ox++) {
            int x0, x1;
            clip_window(ox, k, s, p, w, &x0, &x1);
            float g = dy[oy * wo + ox] *
                      (cip ? inv : 1.0f / (float)((y1 - y0) * (x1 - x0)));
            for (int iy = y0; iy < y1; iy++)
                for (int ix = x0; ix < x1; ix++) dx[iy * w + ix] += g;
        }
    }
}

ADAPT_HOT_CLONES static void fill_span(float *dx, size_t n, float v, int acc)
{
    if (acc)
        for (size_t i = 0; i < n; i++) dx[i] += v;
    else
        for (size_t i = 0; i < n; i++) dx[i] = v;
}

static void avgpool_forward(struct adapt_layer *l, const struct adapt_exec *ex,
                            const float *const *x, float *y)
{
    struct adapt_pool *p = (struct adapt_pool *)l;
    const int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    const int ho = l->out_dim[1], wo = l->out_dim[2];
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const long planes = (long)ex->n * c;
    const float *xs = x[0];
    if (p->k == 0) {
        const double inv = 1.0 / (double)in_plane;
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
        for (long q = 0; q < planes; q++)
            y[q] = (float)(adapt_sum_f32(xs + q * in_plane, in_plane) * inv);
        return;
    }
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
    for (long q = 0; q < planes; q++)
        avgpool_plane(xs + q * in_plane, h, w, ho, wo, p->k, p->s, p->p, p->cip,
                      y + q * out_plane);
}

static void avgpool_backward(struct adapt_layer *l, const struct adapt_exec *ex,
                             const float *const *x, const float *y, const float *dy,
                             float *const *dx, unsigned acc)
{
    struct adapt_pool *p = (struct adapt_pool *)l;
    float *d = dx[0];
    if (!d) return;
    const int c = l->in_dim[0][0], h = l->in_dim[0][1], w = l->in_dim[0][2];
    const int ho = l->out_dim[1], wo = l->out_dim[2];
    const size_t in_plane = (size_t)h * w, out_plane = (size_t)ho * wo;
    const long planes = (long)ex->n * c;
    const int a = acc & 1u;
    if (p->k == 0) {
        const float inv = 1.0f / (float)in_plane;
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
        for (long q = 0; q < planes; q++) fill_span(d + q * in_plane, in_plane, dy[q] * inv, a);
        return;
    }
#pragma omp parallel for if ((size_t)planes * in_plane >= ADAPT_PAR_MIN) schedule(static)
    for (long q = 0; q < planes; q++)
        avgpool_back_plane(dy + q * out_plane, h, w, ho, wo, p->k, p->s, p->p, p->cip,
                           d + q * in_plane, a);
}

/* ---------------------------------------------------------------- constructors */

static const struct adapt_layer_ops maxpool_ops = {
    "maxpool2d", maxpool_forward, maxpool_backward, NULL, maxpool_saved, NULL,
};
static const struct adapt_layer_ops avgpool_ops = {
    "avgpool2d", avgpool_forward, avgpool_backward, NULL, NULL, NULL,
};

/* Input cells the windows of one axis read (the sum of their clipped lengths). */
static int64_t axis_reads(int n, int no, int k, int s, int p)
{
    int64_t r = 0;
    for (int o = 0; o < no; o++) {
        int a, b;
        clip_window(o, k, s, p, n, &a, &b);
        r += b - a;
    }
    return r;
}

static struct adapt_layer *pool_create(const struct adapt_layer_ops *ops, const char *name,
                                       const int in_chw[3], int k, int stride, int pad, int cip)
{
    struct adapt_pool *p = calloc(1, sizeof *p);
    if (!p) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a %s layer", name ? name : "?", ops->kind);
        return NULL;
    }
    struct adapt_layer *l = &p->base;
    if (adapt_layer_setup(l, ops, name, 1, in_chw) != ADAPT_OK) goto free_layer;
    if (k == 0 && ops == &avgpool_ops) {
        if (pad != 0) {
            ADAPT_ERROR(ADAPT_EINVAL, "%s: global average pooling takes no padding", name);
            goto free_layer;
        }
        p->k = 0;
        p->s = 0;
        p->cip = 1;
        l->global = 1;
        l->count_include_pad = 1;
        l->out_dim[1] = l->out_dim[2] = 1;
        l->k = in_chw[1]; /* the window is the whole plane */
        l->stride = 1;
        l->elementwise = (int64_t)adapt_layer_in_numel(l, 0);
        return l;
    }
    if (k <= 0 || stride <= 0 || pad < 0 || pad > k / 2 || k > in_chw[1] + 2 * pad ||
        k > in_chw[2] + 2 * pad) {
        ADAPT_ERROR(ADAPT_EINVAL,
                    "%s: %s kernel %d stride %d padding %d does not fit input %dx%d (padding "
                    "at most k/2)",
                    name, ops->kind, k, stride, pad, in_chw[1], in_chw[2]);
        goto free_layer;
    }
    p->k = k;
    p->s = stride;
    p->p = pad;
    p->cip = cip != 0;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->count_include_pad = p->cip;
    l->out_dim[1] = (in_chw[1] + 2 * pad - k) / stride + 1;
    l->out_dim[2] = (in_chw[2] + 2 * pad - k) / stride + 1;
    l->elementwise = (int64_t)in_chw[0] * axis_reads(in_chw[1], l->out_dim[1], k, stride, pad) *
                     axis_reads(in_chw[2], l->out_dim[2], k, stride, pad);
    return l;
free_layer:
    free(p);
    return NULL;
}

struct adapt_layer *adapt_maxpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride)
{
    return pool_create(&maxpool_ops, name, in_chw, k, stride, 0, 1);
}

struct adapt_layer *adapt_maxpool2d_pad_create(const char *name, const int in_chw[3], int k,
                                               int stride, int pad)
{
    return pool_create(&maxpool_ops, name, in_chw, k, stride, pad, 1);
}

struct adapt_layer *adapt_avgpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride)
{
    return pool_create(&avgpool_ops, name, in_chw, k, stride, 0, 1);
}

struct adapt_layer *adapt_avgpool2d_pad_create(const char *name, const int in_chw[3], int k,
                                               int stride, int pad, int count_include_pad)
{
    return pool_create(&avgpool_ops, name, in_chw, k, stride, pad, count_include_pad);
}
