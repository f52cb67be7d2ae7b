/* src/layers/im2col.c: lowering of a zero-padded, strided 2-D convolution of
 * one sample to a matrix product (im2col, as in Caffe and PyTorch's
 * slow_conv2d) and its adjoint (col2im). Layout of col: row
 * r = (c*k + ky)*k + kx, column oy*wo + ox, rows ldc floats apart. Each
 * channel goes through a zero-padded copy of its plane (scratch), so every
 * col row is a set of plain row copies without bounds tests. Serial: the
 * convolution runs one sample per thread. */
#include <string.h>

#include "src/base/hd.h"
#include "src/layers/layers_impl.h"

typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));

/* Rows here are short (8..40 floats): inline vector copies, not calls to
 * memmove, which gcc would otherwise substitute for the copy loops. */
#define ROW_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))

typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float v4u __attribute__((vector_size(16), aligned(4), may_alias));

/* d[0..n) = s[0..n) */
static inline __attribute__((always_inline)) void copy_row(float *ADAPT_RESTRICT d,
                                                            const float *ADAPT_RESTRICT s, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) *(v16u *)(d + i) = *(const v16u *)(s + i);
    if (i + 8 <= n) {
        *(v8u *)(d + i) = *(const v8u *)(s + i);
        i += 8;
    }
    if (i + 4 <= n) {
        *(v4u *)(d + i) = *(const v4u *)(s + i);
        i += 4;
    }
    for (; i < n; i++) d[i] = s[i];
}

/* d[0..n) += s[0..n) */
static inline __attribute__((always_inline)) void add_row(float *ADAPT_RESTRICT d,
                                                           const float *ADAPT_RESTRICT s, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) *(v16u *)(d + i) += *(const v16u *)(s + i);
    if (i + 8 <= n) {
        *(v8u *)(d + i) += *(const v8u *)(s + i);
        i += 8;
    }
    if (i + 4 <= n) {
        *(v4u *)(d + i) += *(const v4u *)(s + i);
        i += 4;
    }
    for (; i < n; i++) d[i] += s[i];
}

/* Zero-padded copy of one (h, w) plane into (h + 2p, w + 2p). */
ADAPT_HOT_CLONES ROW_LOOPS static void pad_plane(const struct adapt_conv_geom *g, const float *x, float *pp)
{
    const int p = g->pad, wp = g->w + 2 * p, hp = g->h + 2 * p;
    memset(pp, 0, (size_t)p * wp * sizeof(float));
    for (int iy = 0; iy < g->h; iy++) {
        float *r = pp + (size_t)(iy + p) * wp;
        for (int i = 0; i < p; i++) r[i] = 0.0f;
        copy_row(r + p, x + (size_t)iy * g->w, g->w);
        for (int i = p + g->w; i < wp; i++) r[i] = 0.0f;
    }
    memset(pp + (size_t)(g->h + p) * wp, 0, (size_t)(hp - g->h - p) * wp * sizeof(float));
}

/* col rows of one channel from its padded plane pp (row stride wp) */
ADAPT_HOT_CLONES ROW_LOOPS static void im2col_plane(const struct adapt_conv_geom *g, const float *pp, int wp,
                                          float *dst, size_t ldc)
{
    const int k = g->k, s = g->stride, wo = g->wo, ho = g->ho;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            float *d = dst + (size_t)(ky * k + kx) * ldc;
            const float *src = pp + (size_t)ky * wp + kx;
            if (s == 1) {
                for (int oy = 0; oy < ho; oy++) copy_row(d + (size_t)oy * wo, src + (size_t)oy * wp, wo);
            } else {
                for (int oy = 0; oy < ho; oy++) {
                    const float *r = src + (size_t)oy * s * wp;
                    float *dr = d + (size_t)oy * wo;
                    for (int ox = 0; ox < wo; ox++) dr[ox] = r[ox * s];
                }
            }
        }
}

/* adds the col rows of one channel into the plane pp (row stride wp) */
ADAPT_HOT_CLONES ROW_LOOPS static void col2im_plane(const struct adapt_conv_geom *g, const float *src,
                                          size_t ldc, float *pp, int wp)
{
    const int k = g->k, s = g->stride, wo = g->wo, ho = g->ho;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            const float *d = src + (size_t)(ky * k + kx) * ldc;
            float *dst = pp + (size_t)ky * wp + kx;
            if (s == 1) {
                for (int oy = 0; oy < ho; oy++) add_row(dst + (size_t)oy * wp, d + (size_t)oy * wo, wo);
            } else {
                for (int oy = 0; oy < ho; oy++) {
                    float *r = dst + (size_t)oy * s * wp;
                    const float *dr = d + (size_t)oy * wo;
                    for (int ox = 0; ox < wo; ox++) r[ox * s] += dr[ox];
                }
            }
        }
}

/* dx (=|+=) the interior of the padded plane pp */
ADAPT_HOT_CLONES ROW_LOOPS static void unpad_plane(const struct adapt_conv_geom *g, const float *pp,
                                         float *dx, int acc)
{
    const int p = g->pad, wp = g->w + 2 * p;
    for (int iy = 0; iy < g->h; iy++) {
        const float *r = pp + (size_t)(iy + p) * wp + p;
        if (acc)
            add_row(dx + (size_t)iy * g->w, r, g->w);
        else
            copy_row(dx + (size_t)iy * g->w, r, g->w);
    }
}

size_t adapt_im2col_scratch(const struct adapt_conv_geom *g)
{
    return g->pad ? (size_t)(g->h + 2 * g->pad) * (g->w + 2 * g->pad) : 0;
}

void adapt_im2col_sample(const struct adapt_conv_geom *g, const float *x, float *col, size_t ldc,
                         float *scratch)
{
    const size_t kk = (size_t)g->k * g->k, plane = (size_t)g->h * g->w;
    const size_t P = (size_t)g->ho * g->wo;
    const int wp = g->w + 2 * g->pad;
    for (int c = 0; c < g->cin; c++) {
        float *dst = col + (size_t)c * kk * ldc;
        const float *pp = x + (size_t)c * plane;
        if (g->pad) {
            pad_plane(g, pp, scratch);
            pp = scratch;
        }
        im2col_plane(g, pp, wp, dst, ldc);
        if (ldc > P) /* padding columns: keep them finite */
            for (size_t r = 0; r < kk; r++) memset(dst + r * ldc + P, 0, (ldc - P) * sizeof(float));
    }
}

void adapt_col2im_sample(const struct adapt_conv_geom *g, const float *col, size_t ldc, float *dx,
                         int acc, float *scratch)
{
    const size_t kk = (size_t)g->k * g->k, plane = (size_t)g->h * g->w;
    const int wp = g->w + 2 * g->pad;
    for (int c = 0; c < g->cin; c++) {
        const float *src = col + (size_t)c * kk * ldc;
        float *dp = dx + (size_t)c * plane;
        if (g->pad) {
            memset(scratch, 0, adapt_im2col_scratch(g) * sizeof(float));
            col2im_plane(g, src, ldc, scratch, wp);
            unpad_plane(g, scratch, dp, acc);
        } else {
            if (!acc) memset(dp, 0, plane * sizeof(float));
            col2im_plane(g, src, ldc, dp, wp);
        }
    }
}
