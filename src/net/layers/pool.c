/* src/net/layers/pool.c: pooling, mirroring torch.nn.MaxPool2d(k, s) and
 * torch.nn.AvgPool2d(k, s) with padding 0, dilation 1 and floor mode
 * (out = (in - k) / s + 1), and global average pooling
 * (torch.nn.AdaptiveAvgPool2d(1), created with k == 0).
 *
 * Max pooling follows PyTorch's CPU kernel: the window is scanned row by row
 * and an element replaces the current maximum when it is greater or NaN, so
 * ties go to the first maximum in scan order and NaN propagates. The index of
 * the maximum within its (H, W) plane is kept in l->saved (int32 in a float
 * slot, one per output element) by a training-mode forward, for backward,
 * which scatters dy there (so backward needs the training forward of the
 * same batch). Average pooling divides by k*k (no padding, so every window
 * is full).
 *
 * elementwise = input elements read per sample (out numel * k*k; C*H*W for
 * the global pool). Work is parallel over (sample, channel) planes, so each
 * thread owns the dx planes it writes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/hd.h"
#include "src/net/layers/layers_impl.h"

struct adapt_pool {
    struct adapt_layer base;
    int k, s; /* k == 0: global average */
};

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

ADAPT_HOT_CLONES static void maxpool_plane(const float *x, int w, int ho, int wo, int k, int s,
                                           float *y, int32_t *arg)
{
    if (k == 2 && s == 2) {
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
    for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
            int i0 = oy * s * w + ox * s;
            float best = -INFINITY;
            int32_t bi = i0;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) {
                    int idx = i0 + ky * w + kx;
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
        maxpool_plane(xs + q * in_plane, w, ho, wo, p->k, p->s, y + q * out_plane,
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

ADAPT_HOT_CLONES static void avgpool_plane(const float *x, int w, int ho, int wo, int k, int s,
                                           float *y)
{
    const float inv = 1.0f / (float)(k * k);
    if (k == 2 && s == 2) {
        for (int oy = 0; oy < ho; oy++) {
            const float *r0 = x + 2 * oy * w, *r1 = r0 + w;
            float *yo = y + oy * wo;
            for (int ox = 0; ox < wo; ox++)
                yo[ox] = ((r0[2 * ox] + r0[2 * ox + 1]) + (r1[2 * ox] + r1[2 * ox + 1])) * inv;
        }
        return;
    }
    for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
            const float *xw = x + oy * s * w + ox * s;
            float acc = 0.0f;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) acc += xw[ky * w + kx];
            y[oy * wo + ox] = acc * inv;
        }
}

ADAPT_HOT_CLONES static void avgpool_back_plane(const float *dy, int h, int w, int ho, int wo,
                                                int k, int s, float *dx, int acc)
{
    const float inv = 1.0f / (float)(k * k);
    if (k == s && !acc) {
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
    for (int oy = 0; oy < ho; oy++)
        for (int ox = 0; ox < wo; ox++) {
            float g = dy[oy * wo + ox] * inv;
            float *dw = dx + oy * s * w + ox * s;
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++) dw[ky * w + kx] += g;
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
        avgpool_plane(xs + q * in_plane, w, ho, wo, p->k, p->s, y + q * out_plane);
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
        avgpool_back_plane(dy + q * out_plane, h, w, ho, wo, p->k, p->s, d + q * in_plane, a);
}

/* ---------------------------------------------------------------- constructors */

static const struct adapt_layer_ops maxpool_ops = {
    "maxpool2d", maxpool_forward, maxpool_backward, NULL, maxpool_saved, NULL,
};
static const struct adapt_layer_ops avgpool_ops = {
    "avgpool2d", avgpool_forward, avgpool_backward, NULL, NULL, NULL,
};

static struct adapt_layer *pool_create(const struct adapt_layer_ops *ops, const char *name,
                                       const int in_chw[3], int k, int stride)
{
    struct adapt_pool *p = calloc(1, sizeof *p);
    if (!p) {
        ADAPT_ERROR(ADAPT_ENOMEM, "%s: cannot allocate a %s layer", name ? name : "?", ops->kind);
        return NULL;
    }
    struct adapt_layer *l = &p->base;
    if (adapt_layer_setup(l, ops, name, 1, in_chw) != ADAPT_OK) goto free_layer;
    if (k == 0 && ops == &avgpool_ops) {
        p->k = 0;
        p->s = 0;
        l->global = 1;
        l->out_dim[1] = l->out_dim[2] = 1;
        l->k = in_chw[1]; /* the window is the whole plane */
        l->stride = 1;
        l->elementwise = (int64_t)adapt_layer_in_numel(l, 0);
        return l;
    }
    if (k <= 0 || stride <= 0 || k > in_chw[1] || k > in_chw[2]) {
        ADAPT_ERROR(ADAPT_EINVAL, "%s: %s kernel %d stride %d does not fit input %dx%d", name,
                    ops->kind, k, stride, in_chw[1], in_chw[2]);
        goto free_layer;
    }
    p->k = k;
    p->s = stride;
    l->k = k;
    l->stride = stride;
    l->out_dim[1] = (in_chw[1] - k) / stride + 1;
    l->out_dim[2] = (in_chw[2] - k) / stride + 1;
    l->elementwise = (int64_t)adapt_layer_out_numel(l) * k * k;
    return l;
free_layer:
    free(p);
    return NULL;
}

struct adapt_layer *adapt_maxpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride)
{
    return pool_create(&maxpool_ops, name, in_chw, k, stride);
}

struct adapt_layer *adapt_avgpool2d_create(const char *name, const int in_chw[3], int k,
                                           int stride)
{
    return pool_create(&avgpool_ops, name, in_chw, k, stride);
}
